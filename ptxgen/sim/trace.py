"""A per-warp event timeline of a simulated launch, written as Chrome trace-event JSON (Perfetto,
chrome://tracing): `sim.launch(..., trace="run.json", trace_ctas=[...])`.

Layout: one process per traced CTA (named by its CTA and, in a cluster launch, its cluster and
rank; cluster members sorted together), one thread per warp (named by the role the PTX's banner
comments give it, e.g. "producer warpgroup 2"). Time is the simulator's own order: one unit per
instruction a traced thread group issues, counted over all traced CTAs (metadata `time_unit`);
it is not a cycle estimate.

What is recorded (trace_ops.py wraps the executors; nothing here runs when tracing is off):
* activity spans per warp: consecutive instructions of one kind are merged into one span
  (instructions of no kind, such as integer arithmetic and branches, neither start nor break one);
  waits (mbarrier, bar.sync, barrier.cluster) last from the first poll to the release;
* async spans ("b"/"e"): TMA/bulk copies in flight until they land (per stage and phase), cp.async
  commit groups until the wait that lands them, wgmma groups from issue to retirement;
* flow arrows from the event that completed an mbarrier phase (the last arrival, or the last copy
  whose bytes complete it) to each wait that the phase released;
* instant events: the PTX's banners and stage comments as a warp passes them, and a hazard or
  deadlock on the warps involved. The file is written also when a hazard stops the run.

Instructions of opcodes added later get spans by `trace_ops.classify` (tcgen05.* as kind
"tcgen05", named by their first modifier: tcgen05.mma, tcgen05.ld drains). Their executors may
report asynchronous work with the hooks at the end of this module, `async_begin` / `async_end`
(a tcgen05.mma from issue to the arrival of its tcgen05.commit) and `barrier_touched` (an
mbarrier phase the commit completed, so the waits it releases get a flow arrow); each is a no-op
for an untraced CTA (`cta.trace is None`), so they cost one attribute test.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

import numpy as np

#: activity kinds, in legend order (the PNG's colours follow this order)
KINDS = ("wait mbarrier", "wait barrier", "wait cluster", "wait async", "arrive", "TMA load", "TMA store",
         "cp.async", "wgmma", "tcgen05", "mma.sync", "smem load", "smem store", "global load", "global store",
         "atomic")
WAITS = frozenset(k for k in KINDS if k.startswith("wait"))
TIME_UNIT = ("simulator steps: one per instruction issued by a traced thread group (all its warps at "
             "once), counted over the traced CTAs in the order the simulator ran them; not cycles")
LAST_EVENTS = 3            # events per waiting warp named in a deadlock report


class Run:
    """An activity span shared by the warps that issued it together."""
    __slots__ = ("kind", "name", "key", "start", "end", "warps", "args", "count", "pending")

    def __init__(self, kind, name, key, start, warps, args):
        self.kind, self.name, self.key, self.start, self.end = kind, name, key, start, start
        self.warps, self.args, self.count, self.pending = warps, args, 1, False

    def copy_for(self, warps: tuple) -> "Run":
        r = Run(self.kind, self.name, self.key, self.start, warps, self.args)
        r.end, r.count, r.pending = self.end, self.count, self.pending
        return r


_NO_MASK = object()


@dataclass
class CtaTrace:
    """The timeline of one traced CTA; `cta.trace` points here while it runs."""
    rec: "TraceRecorder"
    pid: int
    xyz: tuple
    label: str
    nwarps: int
    cluster: tuple | None = None                    # cluster id in a cluster launch
    rank: int = 0
    open: list = field(default_factory=list)        # warp -> its open Run (or None)
    closed: list = field(default_factory=list)
    instants: list = field(default_factory=list)    # (ts, warp, name, cat, args)
    roles: dict = field(default_factory=dict)       # warp -> role name
    section: dict = field(default_factory=dict)     # warp -> banner section id it is in
    last_mark: dict = field(default_factory=dict)   # warp -> (marker id, open run) of its last marker
    last_wait: dict = field(default_factory=dict)   # warp -> barrier address of its last passed wait
    bar_wait: dict = field(default_factory=dict)    # named barrier id -> warps blocked there
    fill: list = field(default_factory=list)        # (ts, stages filled) of the stage ring
    fill_label: str = "stages filled (copies issued, not yet released)"
    level: int = 0
    cp_ref: int = -1                                # the warp whose cp.async groups are followed
    cp_open: list = field(default_factory=list)     # [first issue ts, bytes] of its uncommitted copies
    cp_flying: list = field(default_factory=list)   # committed groups: (first issue ts, bytes, number)
    cp_groups: int = 0
    stages: dict = field(default_factory=dict)      # full barrier address -> stage number
    regions: dict = field(default_factory=dict)     # stage -> (lo, hi) shared bytes its copies fill
    consumed: set = field(default_factory=set)      # (full barrier, phase) waited for (rings without empties)
    wgmma: dict = field(default_factory=dict)       # (wg, group) -> [first ts, count, stages, shape]
    _mask: object = _NO_MASK
    _warps: tuple = ()
    _key: object = None
    _runs: list = field(default_factory=list)

    def __post_init__(self):
        self.open = [None] * self.nwarps

    # ---------------------------------------------------------------- warps of the running group
    def warps_of(self, cta, mask) -> tuple:
        if mask is None:
            return tuple(range(self.nwarps)) if cta.mask_all is None else self.warps_of(cta, cta.mask_all)
        return tuple(np.flatnonzero(mask.reshape(-1, 32).any(axis=1)).tolist())

    def group(self, cta) -> tuple:
        gm = cta.mask_all
        if gm is not self._mask:
            self._mask, self._key = gm, None
            self._warps = tuple(range(self.nwarps)) if gm is None else self.warps_of(cta, gm)
        return self._warps

    # ---------------------------------------------------------------- activity spans
    def act(self, cta, kind: str, name: str, key=None, args=None) -> list:
        """The running group issued an instruction of `kind`: extend its open span or start one.
        Returns the Runs now open for the group (one, unless it merged groups with open spans)."""
        step = self.rec.step
        key = (kind, name) if key is None else key
        if cta.mask_all is self._mask and key == self._key:
            for r in self._runs:
                r.end = step
                r.count += 1
            return self._runs
        warps = self.group(cta)
        self._key = key
        olds = {id(r): r for w in warps if (r := self.open[w]) is not None}
        if olds and all(r.key == key for r in olds.values()) and all(self.open[w] is not None for w in warps):
            runs = list(olds.values())
            if all(set(r.warps) <= set(warps) for r in runs):
                for r in runs:
                    r.end = step
                    r.count += 1
                self._runs = runs
                return runs
        self._close(warps, olds.values())
        run = Run(kind, name, key, step, warps, dict(args) if args else {})
        for w in warps:
            self.open[w] = run
        self._runs = [run]
        return self._runs

    def _close(self, warps: tuple, runs) -> None:
        mine = set(warps)
        for r in runs:
            if set(r.warps) <= mine:
                self.closed.append(r)
                continue
            self.closed.append(r.copy_for(tuple(w for w in r.warps if w in mine)))
            r.warps = tuple(w for w in r.warps if w not in mine)

    def extend_waits(self, warps, step: int) -> None:
        """Blocked warps released at `step` (a barrier completed by another group)."""
        for w in warps:
            r = self.open[w]
            if r is not None and r.kind in WAITS:
                r.end, r.pending = step, False

    # ---------------------------------------------------------------- instants
    def instant(self, warps, name: str, cat: str, args=None) -> None:
        ts = self.rec.step
        for w in warps:
            self.instants.append((ts, w, name, cat, args))

    def marker(self, cta, mid: int, text: str, banner: bool, section: int, role) -> None:
        """The group passes a PTX comment: banners once per entry into their section, other
        comments once per pass (not per poll of a wait loop)."""
        out = []
        for w in self.group(cta):
            if banner:
                if self.section.get(w) == section:
                    continue
                self.section[w] = section
                if role is not None and w not in self.roles:
                    self.roles[w] = role(w)
            else:
                seen = (mid, id(self.open[w]))
                if self.last_mark.get(w) == seen:
                    continue
                self.last_mark[w] = seen
            out.append(w)
        if out:
            self.instant(out, text, "banner" if banner else "marker")

    def fault(self, cta, kind: str, detail: str, line: int) -> None:
        self.instant(self.group(cta), f"hazard: {kind}", "hazard", {"line": line, "detail": detail})

    # ---------------------------------------------------------------- stage ring
    def add_fill(self, delta: int) -> None:
        self.level = max(0, self.level + delta)
        self.fill.append((self.rec.step, self.level))

    def stage_of(self, addr: int) -> int:
        s = self.stages.get(addr)
        if s is None:
            s = self.stages[addr] = len(self.stages)
        return s

    def stage_reading(self, lo: int) -> int | None:
        for s, (a, b) in self.regions.items():
            if a <= lo <= b:
                return s
        return None

    # ---------------------------------------------------------------- output
    def all_runs(self) -> list:
        return self.closed + list({id(r): r for r in self.open if r is not None}.values())

    def waiting_warps(self) -> list[int]:
        return [w for w, r in enumerate(self.open) if r is not None and r.pending]

    def last_events(self, warp: int, count: int = LAST_EVENTS) -> list[str]:
        found = []
        for r in reversed(self.all_runs()):
            if warp in r.warps:
                found.append(r)
        found.sort(key=lambda r: (r.start, r.end))
        return [describe_run(r) for r in found[-count:]]

    def role(self, w: int) -> str:
        return self.roles.get(w, "")


def describe_run(r: Run) -> str:
    extra = ", ".join(f"{k} {v}" for k, v in r.args.items() if k in ("barrier", "stage", "parity", "phase", "id",
                                                                   "line"))
    times = f"x{r.count} " if r.count > 1 and r.kind not in WAITS else ""
    state = " (still waiting)" if r.pending else ""
    return f"{r.name}{' (' + extra + ')' if extra else ''} {times}at steps {r.start}-{r.end}{state}"


class TraceRecorder:
    """Collects the timelines of the traced CTAs of one launch and writes them."""

    def __init__(self, path, select, entry: str, program=None):
        self.path = os.fspath(path)
        self.select = None if select is None else {tuple(int(v) for v in c) + (0,) * (3 - len(tuple(c)))
                                                    for c in select}
        self.cdims = (1, 1, 1)
        self.entry = entry
        self.program = program
        self.step = 0
        self.ctas: list[CtaTrace] = []
        self.completions: dict = {}    # (pid, barrier, phase) -> (ts, pid, warp) of the completing event
        self.ready: dict = {}          # (pid, barrier) -> (ts, pid, warp): the last copy made it completable
        self.loads: dict = {}          # (pid, barrier) -> [first issue ts, copies, bytes, stage]
        self.empty_of: dict = {}       # (pid, barrier) -> stage whose release it counts
        self.asyncs: list = []         # (pid, name, cat, start, end, args)
        self.flows: list = []          # (src ts, src pid, src warp, dst ts, dst pid, dst warp, name)
        self.stopped: str | None = None

    def attach(self, cta) -> None:
        """Trace `cta` if it (or a CTA of its cluster) was selected."""
        xyz = tuple(cta.cta_xyz)
        self.cdims = tuple(cta.cluster.cluster.dims) if cta.cluster is not None else (1, 1, 1)
        cid = tuple(v // c for v, c in zip(xyz, self.cdims))
        if self.select is not None and xyz not in self.select and not any(
                tuple(v // c for v, c in zip(s, self.cdims)) == cid for s in self.select):
            return
        clustered = self.cdims != (1, 1, 1)
        label = f"CTA {xyz}" + (f" · cluster {cid} rank {cta.cluster.rank}" if clustered else "")
        cta.trace = CtaTrace(self, len(self.ctas), xyz, label, cta.nwarps, cid if clustered else None,
                             cta.cluster.rank if cta.cluster is not None else 0)
        self.ctas.append(cta.trace)

    # ---------------------------------------------------------------- barrier phases and flows
    def completed(self, pid: int, addr: int, phase: int, source) -> None:
        self.completions[(pid, addr, phase)] = source

    def released(self, ct: CtaTrace, warps, pid: int, addr: int, phase: int) -> None:
        """`warps` of `ct` passed a wait on phase `phase` of barrier (pid, addr)."""
        src = self.completions.get((pid, addr, phase))
        if src is None:
            return
        for w in warps:
            self.flows.append((src[0], src[1], src[2], self.step, ct.pid, w, f"mbarrier {addr:#x} phase {phase}"))

    # ---------------------------------------------------------------- writing
    def events(self) -> list[dict]:
        ev: list[dict] = [{"ph": "M", "name": "process_name", "pid": ct.pid, "args": {"name": ct.label}}
                          for ct in self.ctas]
        for ct in self.ctas:
            ev.append({"ph": "M", "name": "process_sort_index", "pid": ct.pid, "args": {"sort_index": ct.pid}})
            for w in range(ct.nwarps):
                role = ct.role(w)
                ev.append({"ph": "M", "name": "thread_name", "pid": ct.pid, "tid": w,
                           "args": {"name": f"warp {w}" + (f" · {role}" if role else "")}})
                ev.append({"ph": "M", "name": "thread_sort_index", "pid": ct.pid, "tid": w, "args": {"sort_index": w}})
            for r in sorted(ct.all_runs(), key=lambda r: r.start):
                args = dict(r.args, count=r.count) if r.count > 1 else r.args
                for w in r.warps:
                    e = {"ph": "X", "name": r.name, "cat": r.kind, "pid": ct.pid, "tid": w, "ts": r.start,
                         "dur": r.end - r.start + 1}
                    if args:
                        e["args"] = args
                    ev.append(e)
            for ts, w, name, cat, args in ct.instants:
                e = {"ph": "i", "s": "t", "name": name, "cat": cat, "pid": ct.pid, "tid": w, "ts": ts}
                if args:
                    e["args"] = args
                ev.append(e)
            if ct.fill:
                for ts, level in ct.fill:
                    ev.append({"ph": "C", "name": ct.fill_label, "pid": ct.pid, "ts": ts, "args": {"filled": level}})
        for n, (pid, name, cat, start, end, args) in enumerate(self.asyncs):
            base = {"name": name, "cat": cat, "pid": pid, "tid": 0, "id": n + 1}
            ev.append(dict(base, ph="b", ts=start, args=args))
            ev.append(dict(base, ph="e", ts=max(end, start + 1)))
        for n, (ts0, pid0, w0, ts1, pid1, w1, name) in enumerate(self.flows):
            ev.append({"ph": "s", "name": name, "cat": "release", "id": n + 1, "pid": pid0, "tid": w0, "ts": ts0})
            ev.append({"ph": "f", "bp": "e", "name": name, "cat": "release", "id": n + 1, "pid": pid1, "tid": w1,
                       "ts": ts1})
        return ev

    def write(self) -> None:
        doc = {"traceEvents": self.events(), "displayTimeUnit": "ns",
               "otherData": {"generator": "ptxgen.sim trace", "entry": self.entry, "time_unit": TIME_UNIT,
                             "cluster": list(self.cdims), "steps": self.step,
                             "ctas": [{"pid": ct.pid, "cta": list(ct.xyz), "rank": ct.rank,
                                       "cluster": None if ct.cluster is None else list(ct.cluster)}
                                      for ct in self.ctas],
                             **({"stopped": self.stopped} if self.stopped else {})}}
        with open(self.path, "w") as f:
            json.dump(doc, f, separators=(",", ":"), default=_plain_json)

    def stop(self, err) -> str:
        """A hazard stopped the run: mark it on the waiting warps (a deadlock) and return the
        last events of each waiting warp for the report."""
        self.stopped = f"{err.kind} at PTX line {err.line}"
        lines = []
        for ct in self.ctas:
            waiting = ct.waiting_warps()
            if err.kind == "deadlock" and waiting:
                ct.instant(waiting, f"hazard: {err.kind}", "hazard", {"line": err.line, "detail": err.detail})
            groups: list[tuple[list[int], str, list[str]]] = []   # warps with the same role and last events
            for w in waiting:
                events = ct.last_events(w)
                if groups and groups[-1][1] == ct.role(w) and groups[-1][2] == events:
                    groups[-1][0].append(w)
                else:
                    groups.append(([w], ct.role(w), events))
            for ws, role, events in groups[:8]:
                who = f"warp {ws[0]}" if len(ws) == 1 else f"warps {ws[0]}-{ws[-1]}"
                lines.append(f"{ct.label} {who}{f' ({role})' if role else ''}: " + "; then ".join(events))
            if len(lines) >= 16:
                break
        return " | ".join(lines)


def _plain_json(value):
    """numpy scalars and sets in event args as JSON numbers and lists."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (set, frozenset, tuple)):
        return sorted(value) if isinstance(value, (set, frozenset)) else list(value)
    raise TypeError(f"{type(value).__name__} in a trace event")


def launch_traced(launch, ptx_text: str, entry: str, path, trace_ctas, **kw):
    """machine.launch with a TraceRecorder: the traced program, the CTAs attached as they start,
    the file written however the run ends; a deadlock's report gains each waiting warp's last
    events."""
    from .errors import HazardError
    from .trace_ops import compile_traced

    if trace_ctas is not None and not isinstance(trace_ctas, (list, tuple, set)):
        raise TypeError(f"trace_ctas must be a list of CTA indices (x, y, z), got {type(trace_ctas).__name__}")
    rec = TraceRecorder(path, trace_ctas, entry, compile_traced(ptx_text, entry))
    grid = tuple(kw.get("grid", (1, 1, 1)) if not isinstance(kw.get("grid"), int) else (kw["grid"],))
    grid = grid + (1,) * (3 - len(grid))
    outside = sorted(c for c in rec.select or () if any(not 0 <= v < g for v, g in zip(c, grid)))
    if outside:
        raise ValueError(f"trace_ctas {outside} are outside grid {grid}")
    with open(rec.path, "w"):            # an unwritable path fails now, not after the simulation
        pass
    try:
        result = launch(ptx_text, entry, _tracer=rec, **kw)
        if not rec.ctas:
            raise ValueError(f"none of trace_ctas {sorted(rec.select)} was simulated (ctas={kw.get('ctas')}); "
                             "trace CTAs the launch runs")
        return result
    except HazardError as err:
        summary = rec.stop(err)
        if err.kind == "deadlock" and summary:
            raise HazardError(err.kind, err.line, f"{err.detail}. Last events of the waiting warps: {summary}",
                              err.line_text) from None
        raise
    finally:
        rec.write()


# -------------------------------------------------------------------- hooks for other modules
def async_begin(cta, key, name: str, args=None, cat: str = "mma in flight") -> None:
    """Start an asynchronous span of `cta` (e.g. a tcgen05.mma from issue until the arrival its
    tcgen05.commit makes): drawn with the wgmma groups for cat "mma in flight", with the copies
    for "copy in flight"."""
    ct = cta.trace
    if ct is not None:
        ct.rec.loads[("hook", ct.pid, key)] = [ct.rec.step, name, dict(args or {}), cat]


def async_end(cta, key) -> None:
    """End the span `async_begin` started with the same key (unknown keys are ignored)."""
    ct = cta.trace
    if ct is not None:
        got = ct.rec.loads.pop(("hook", ct.pid, key), None)
        if got is not None:
            ct.rec.asyncs.append((ct.pid, got[1], got[3], got[0], ct.rec.step, got[2]))


def barrier_touched(cta, bar, phase_before: int) -> None:
    """An operation outside trace_ops (e.g. tcgen05.commit) changed mbarrier `bar` of `cta`: a
    phase it completed is credited to the running group, so waits it releases get a flow arrow."""
    ct = cta.trace
    if ct is not None and bar.phase > phase_before:
        warps = ct.group(cta)
        for p in range(phase_before, bar.phase):
            ct.rec.completed(ct.pid, bar.addr, p, (ct.rec.step, ct.pid, warps[0] if warps else 0))
