"""The tcgen05 instruction family on sm_100a: the opcode's dispatcher, and alloc / dealloc /
relinquish_alloc_permit, ld / st / wait, commit and fence (docs/ptx_facts/tcgen05.md §12b, §12f,
§12j; state and hazards in tmem.py, tcgen05.mma in tcgen05_mma.py, tcgen05.cp in tcgen05_cp.py).

Forms accepted (PTX ISA §9.7.16.7-§9.7.16.12, as CUTLASS and Triton 3.9 emit them; N = 1 or 2):
  tcgen05.alloc.cta_group::N.sync.aligned{.shared::cta}.b32 [dst], nCols;
  tcgen05.dealloc.cta_group::N.sync.aligned.b32 taddr, nCols;
  tcgen05.relinquish_alloc_permit.cta_group::N.sync.aligned;
  tcgen05.ld.sync.aligned.<shape>.x<N>{.pack::16b}.b32 {regs}, [taddr]{, immHalfSplitoff};
  tcgen05.st.sync.aligned.<shape>.x<N>{.unpack::16b}.b32 [taddr]{, immHalfSplitoff}, {regs};
  tcgen05.wait::{ld,st}.sync.aligned;  tcgen05.fence::{before,after}_thread_sync;
  tcgen05.commit.cta_group::N.mbarrier::arrive::one{.shared::cluster}{.multicast::cluster}.b64 [mbar]{, ctaMask};

With cta_group::2 each CTA of the pair keeps its own allocator (the pair's warps allocate the same
columns when their histories match) and the peer must be running.

tcgen05.fence::* orders tcgen05 operations around thread synchronisation. The simulator executes
in program order and retires MMAs when a wait observes their commit's mbarrier phase, so the
fences change nothing it models; their absence is not reported because the compilers whose PTX
runs in production (Triton 3.9, CUTLASS C++) omit them (docs/ptx_facts/tcgen05.md §12j). With the
environment variable PTXGEN_SIM_TCGEN05_FENCES=strict (read when the PTX is compiled), a thread
that completed an mbarrier wait and then issues tcgen05.mma/ld/st/cp without a
tcgen05.fence::after_thread_sync in between is reported (kind missing-fence): the ISA's canonical
pattern (§9.7.16.6.4).
"""
from __future__ import annotations

import os

import numpy as np

from . import async_order
from . import tcgen05_layouts as tl
from . import tmem as tm
from . import tmem_order
from .async_proxy import arrive, barrier_at, check_barrier_address, hopper
from .cluster import CLUSTER_STRIDE, own_offsets, targets as cluster_targets, window_base
from .errors import Fault
from .memory import SHARED_GENERIC_BASE
from .operands import Lit, Mem
from .ops_mem import address_getter, per_thread
from .ops_warp import participating_warps, read_warp_regs, write_warp_regs
from .parse import Instr
from .program import mark
from .state import CtaState
from .warps import DIVERGE


def require_tcgen05(ctx, what: str) -> None:
    """tcgen05 exists on sm_100a / sm_101a / sm_103a (and the sm_10xf families from PTX 8.8), PTX ISA
    8.6 or newer; not on plain sm_100 (§9.7.16.7.1 "Target ISA Notes"; docs/ptx_facts/tcgen05.md §12a)."""
    target = (ctx.target or "").replace(",", " ").split()
    arch = target[0] if target else ""
    if arch not in ("sm_100a", "sm_101a", "sm_103a", "sm_100f", "sm_101f", "sm_103f", "sm_110a", "sm_110f"):
        raise ctx.fail(f"{what} needs `.target sm_100a` (tcgen05 is architecture-specific; plain sm_100 "
                       f"cannot run it); the module targets {arch or 'nothing'}")
    version = tuple(int(x) for x in ctx.version.split(".")) if (ctx.version or "").count(".") == 1 else None
    if version is not None and version < ((8, 8) if arch.endswith("f") else (8, 6)):
        raise ctx.fail(f"{what} needs .version {'8.8' if arch.endswith('f') else '8.6'} or newer, the module "
                       f"says .version {ctx.version}")


def cta_group_of(mods: list, ctx, what: str) -> int:
    found = [m for m in mods if m.startswith("cta_group::")]
    if len(found) != 1 or found[0] not in ("cta_group::1", "cta_group::2"):
        raise ctx.fail(f"{what} needs .cta_group::1 or .cta_group::2")
    mods.remove(found[0])
    return int(found[0][-1])


def tmem_getter(ctx, mem: Mem):
    """R -> uint32 TMEM addresses for [reg + imm] (Triton writes `[ %r + 0 ]`)."""
    get = address_getter(ctx, mem, "shared")
    return lambda R: get(R) & 0xFFFFFFFF


def _warp_uniform(values: np.ndarray, cta: CtaState, warps: np.ndarray, what: str) -> np.ndarray:
    per = np.broadcast_to(values, (cta.n,)).reshape(cta.nwarps, 32)[warps]
    bad = (per != per[:, :1]).any(axis=1)
    if bad.any():
        raise Fault("divergence", f"{what} differs between the lanes of warp {int(warps[np.flatnonzero(bad)[0]])}; "
                    "it must be the same in every thread of the warp")
    return per[:, 0].astype(np.int64)


def _warps(cta: CtaState, mask) -> np.ndarray:
    w = participating_warps(cta, mask)
    return np.arange(cta.nwarps) if w is None else w


# ------------------------------------------------------------------ alloc / dealloc / relinquish
def _compile_alloc(ins: Instr, ctx, mods: list):
    group = cta_group_of(mods, ctx, "tcgen05.alloc")
    if not {"sync", "aligned", "b32"} <= set(mods) or not set(mods) <= {"sync", "aligned", "b32", "shared::cta"}:
        raise ctx.fail("write tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [dst], nCols;")
    if len(ins.operands) != 2:
        raise ctx.fail("tcgen05.alloc takes [dst], nCols")
    space = "shared" if "shared::cta" in mods else "generic"
    get_dst = address_getter(ctx, ctx.mem(ins.operands[0]), space)
    get_n = ctx.src(ins.operands[1], "b32")
    if isinstance(ins.operands[1], Lit):
        n = int(ins.operands[1].value)
        if n < 32 or n > 512 or n & (n - 1):
            raise ctx.fail(f"tcgen05.alloc of {n} columns: the count must be a power of two from 32 to 512")
    me = ctx.index

    def run(cta: CtaState, mask):
        st = tm.tmem_of(cta)
        tm.use_cta_group(st, group, "tcgen05.alloc")
        if group == 2:
            tm.pair_peer(cta, "tcgen05.alloc")
        warps = _warps(cta, mask)
        counts = _warp_uniform(get_n(cta.R), cta, warps, "tcgen05.alloc nCols")
        dsts = _warp_uniform(get_dst(cta.R), cta, warps, "tcgen05.alloc destination")
        blocked = []
        for w, ncols, dst in zip(warps.tolist(), counts.tolist(), dsts.tolist()):
            tm.check_alloc_request(st, ncols)
            if space == "generic":
                dst -= SHARED_GENERIC_BASE
            dst = int(own_offsets(cta, np.array([dst], dtype=np.int64), "tcgen05.alloc destination")[0])
            if dst % 4:
                raise Fault("misaligned", f"tcgen05.alloc destination {dst:#x} is not 4-byte aligned")
            start = tm.try_alloc(st, ncols)
            if start is None:
                blocked.append((w, ncols))
                continue
            st.last_ncols = ncols
            data = np.array([start], dtype=np.uint32).view(np.uint8).reshape(1, 4)
            cta.smem.write(np.array([32 * w]), np.array([dst], dtype=np.int64), data, cta.epoch,
                           "tcgen05.alloc writes the TMEM address to")
        if not blocked:
            st.stall = 0
            return None
        # blocked warps retry this instruction (other warps may dealloc meanwhile); the others go on
        st.stall += 1
        if st.stall >= tm.STALL_LIMIT:
            held = ", ".join(f"{n} at column {s}" for s, n in sorted(st.allocs.items()))
            raise Fault("deadlock", f"tcgen05.alloc of {blocked[0][1]} columns by warp {blocked[0][0]} blocks "
                        f"forever: the CTA holds {held} of 512 columns and no dealloc frees any "
                        f"({tm.STALL_LIMIT} polls)")
        cta.polled = True
        if len(blocked) == len(warps):
            return me
        waiting = np.zeros(cta.n, dtype=bool)
        for w, _ in blocked:
            waiting[32 * w:32 * w + 32] = True
        cta.split = (me, waiting)
        return DIVERGE
    return mark(run, yields=True)


def _compile_dealloc(ins: Instr, ctx, mods: list):
    group = cta_group_of(mods, ctx, "tcgen05.dealloc")
    if set(mods) != {"sync", "aligned", "b32"}:
        raise ctx.fail("write tcgen05.dealloc.cta_group::1.sync.aligned.b32 taddr, nCols;")
    if len(ins.operands) != 2:
        raise ctx.fail("tcgen05.dealloc takes taddr, nCols")
    get_addr, get_n = ctx.src(ins.operands[0], "b32"), ctx.src(ins.operands[1], "b32")

    def run(cta: CtaState, mask):
        st = tm.tmem_of(cta)
        tm.use_cta_group(st, group, "tcgen05.dealloc")
        warps = _warps(cta, mask)
        addrs = _warp_uniform(get_addr(cta.R), cta, warps, "tcgen05.dealloc taddr")
        counts = _warp_uniform(get_n(cta.R), cta, warps, "tcgen05.dealloc nCols")
        for addr, ncols in zip(addrs.tolist(), counts.tolist()):
            lane, col = tm.split_address(addr)
            tm.dealloc(st, col, ncols, lane)
    return run


def _compile_relinquish(ins: Instr, ctx, mods: list):
    group = cta_group_of(mods, ctx, "tcgen05.relinquish_alloc_permit")
    if set(mods) != {"sync", "aligned"} or ins.operands:
        raise ctx.fail("write tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;")

    def run(cta: CtaState, mask):
        _warps(cta, mask)
        st = tm.tmem_of(cta)
        tm.use_cta_group(st, group, "tcgen05.relinquish_alloc_permit")
        st.relinquished = True
    return run


# ------------------------------------------------------------------ ld / st / wait
def _ldst_shape(mods: list, ctx, what: str, pack_word: str):
    shape = [m for m in mods if m in tl.SHAPES]
    nums = [m for m in mods if m.startswith("x") and m[1:].isdigit()]
    rest = set(mods) - set(shape) - set(nums) - {"sync", "aligned", "b32", pack_word}
    if len(shape) != 1 or len(nums) != 1 or rest or not {"sync", "aligned", "b32"} <= set(mods):
        raise ctx.fail(f"write {what}.sync.aligned.<shape>.x<N>{{.{pack_word}}}.b32 with shape one of "
                       f"{', '.join(tl.SHAPES)} (.red is not on sm_100a)")
    num = int(nums[0][1:])
    if num not in tl.NUMS or num > tl.MAX_NUM[shape[0]]:
        raise ctx.fail(f"{what}.{shape[0]}: .x{num} is not allowed (.x1 .. .x{tl.MAX_NUM[shape[0]]}, powers of two)")
    return shape[0], num, pack_word in mods


def _region_check(cta: CtaState, st: tm.TmemState, warps: np.ndarray, taddr: np.ndarray, lanes: np.ndarray,
                  cols: np.ndarray, what: str):
    """Absolute (warps, 32, regs) lanes and columns; checks quarters and allocation."""
    lane0, col0 = (taddr >> 16) & 0xFFFF, taddr & 0xFFFF
    abs_lanes = lane0[:, None, None] + lanes[None]
    abs_cols = col0[:, None, None] + cols[None]
    regions = []
    for j, w in enumerate(warps.tolist()):
        lo, hi = int(abs_lanes[j].min()), int(abs_lanes[j].max())
        q = 32 * (w % 4)
        if lo < q or hi > q + 31:
            raise Fault("tmem", f"warp {w} {what} lanes {lo}..{hi}; a warp may access only the lanes of its quarter, "
                        f"{q}..{q + 31} (warp id mod 4 = {w % 4}): add ((warp & 3) << 21) to the address")
        region = tm.Region(lo, hi + 1, int(abs_cols[j].min()), int(abs_cols[j].max()) + 1)
        tm.check_allocated(st, region, f"warp {w} {what}")
        regions.append(region)
    return abs_lanes, abs_cols, regions


def _compile_ld(ins: Instr, ctx, mods: list):
    shape, num, pack = _ldst_shape(mods, ctx, "tcgen05.ld", "pack::16b")
    ops = ins.operands
    split = shape == "16x32bx2"
    if len(ops) != (3 if split else 2):
        raise ctx.fail(f"tcgen05.ld.{shape} takes {{regs}}, [taddr]" + (", immHalfSplitoff" if split else ""))
    nregs = num * tl.REGS_PER_NUM[shape]
    slots = [ctx.dst(r, "b32")[0] for r in ctx.vec(ops[0], nregs, f"tcgen05.ld.{shape}.x{num} destination")]
    get_addr = tmem_getter(ctx, ctx.mem(ops[1]))
    offset = _split_offset(ops[2], ctx) if split else 0
    lanes, cols = _cell_map(shape, num, offset, pack)
    line = ctx.line

    def run(cta: CtaState, mask):
        st = tm.tmem_of(cta)
        warps = _warps(cta, mask)
        taddr = _warp_uniform(get_addr(cta.R), cta, warps, "tcgen05.ld taddr")
        abs_lanes, abs_cols, regions = _region_check(cta, st, warps, taddr, lanes, cols, "tcgen05.ld reads")
        for w, region in zip(warps.tolist(), regions):
            tm.check_not_mma_target(st, region, f"warp {w} tcgen05.ld reads")
            st.loads.append(tm.Pending(w, region, line))
        vals = st.cells[abs_lanes, abs_cols]                  # (warps, 32, cells)
        if pack:
            vals = (vals[..., 0::2] & 0xFFFF) | ((vals[..., 1::2] & 0xFFFF) << 16)
        full = None if len(warps) == cta.nwarps else warps
        for j, slot in enumerate(slots):
            write_warp_regs(cta, slot, full, vals[:, :, j].astype(np.uint32))
    return run


def _cell_map(shape: str, num: int, offset: int, pack: bool) -> tuple[np.ndarray, np.ndarray]:
    """(lanes, columns) of every 32-bit cell a thread moves, relative to taddr, in register order;
    with .pack::16b / .unpack::16b each register is two cells (its column c -> 2c, 2c+1). The
    half-split offset of .16x32bx2 is in TMEM columns and is added after the doubling."""
    lanes, cols = tl.ldst_map(shape, num, 0)
    if pack:
        lanes, cols = np.repeat(lanes, 2, axis=1), np.stack([2 * cols, 2 * cols + 1], axis=-1).reshape(32, -1)
    if offset:
        cols = cols + offset * (np.arange(32)[:, None] >= 16)
        if np.intersect1d(cols[:16].ravel() + 4096 * lanes[:16].ravel(),
                          cols[16:].ravel() + 4096 * lanes[16:].ravel()).size:
            raise Fault("unsupported", f".{shape}.x{num}: immHalfSplitoff {offset} makes the two halves overlap")
    return lanes, cols


def _split_offset(op, ctx) -> int:
    if not isinstance(op, Lit) or op.kind != "int" or not 0 <= op.value < 512:
        raise ctx.fail("immHalfSplitoff must be an immediate column offset (0..511)")
    return int(op.value)


def _compile_st(ins: Instr, ctx, mods: list):
    shape, num, unpack = _ldst_shape(mods, ctx, "tcgen05.st", "unpack::16b")
    ops = ins.operands
    split = shape == "16x32bx2"
    if len(ops) != (3 if split else 2):
        raise ctx.fail(f"tcgen05.st.{shape} takes [taddr], " + ("immHalfSplitoff, " if split else "") + "{regs}")
    nregs = num * tl.REGS_PER_NUM[shape]
    getters = [ctx.src(r, "b32") for r in ctx.vec(ops[-1], nregs, f"tcgen05.st.{shape}.x{num} source")]
    get_addr = tmem_getter(ctx, ctx.mem(ops[0]))
    offset = _split_offset(ops[1], ctx) if split else 0
    lanes, cols = _cell_map(shape, num, offset, unpack)
    line = ctx.line

    def run(cta: CtaState, mask):
        st = tm.tmem_of(cta)
        warps = _warps(cta, mask)
        taddr = _warp_uniform(get_addr(cta.R), cta, warps, "tcgen05.st taddr")
        abs_lanes, abs_cols, regions = _region_check(cta, st, warps, taddr, lanes, cols, "tcgen05.st writes")
        for w, region in zip(warps.tolist(), regions):
            tm.check_not_mma_target(st, region, f"warp {w} tcgen05.st writes")
            tm.check_not_mma_source(st, region, f"warp {w} tcgen05.st writes")
            tm.check_not_pending(st.loads, region, f"warp {w} tcgen05.st writes", "ld")
            st.stores.append(tm.Pending(w, region, line))
        vals = read_warp_regs(cta, getters, None if len(warps) == cta.nwarps else warps)
        if unpack:
            vals = np.stack([vals & 0xFFFF, vals >> 16], axis=-1).reshape(vals.shape[0], 32, -1)
        st.cells[abs_lanes, abs_cols] = vals
    return run


def _compile_wait(ins: Instr, ctx, kind: str, mods: list):
    if set(mods) != {"sync", "aligned"} or ins.operands:
        raise ctx.fail(f"write tcgen05.wait::{kind}.sync.aligned;")
    line = ctx.line

    def run(cta: CtaState, mask):
        warps = set(_warps(cta, mask).tolist())
        st = tm.tmem_of(cta)
        if kind == "ld":
            st.loads = [p for p in st.loads if p.warp not in warps]
            return
        for w in sorted(warps):
            done = [p for p in st.stores if p.warp == w]
            if done:
                tmem_order.stored(cta, w, [p.region for p in done], [p.line for p in done], line)
        st.stores = [p for p in st.stores if p.warp not in warps]
    return run


# ------------------------------------------------------------------ commit
def _compile_commit(ins: Instr, ctx, mods: list):
    group = cta_group_of(mods, ctx, "tcgen05.commit")
    multicast = "multicast::cluster" in mods
    cluster_space = "shared::cluster" in mods
    rest = set(mods) - {"mbarrier::arrive::one", "shared::cluster", "multicast::cluster", "b64"}
    if rest or not {"mbarrier::arrive::one", "b64"} <= set(mods):
        raise ctx.fail("write tcgen05.commit.cta_group::1.mbarrier::arrive::one{.shared::cluster}"
                       "{.multicast::cluster}.b64 [mbar]{, ctaMask};")
    ops = ins.operands
    if len(ops) != (2 if multicast else 1):
        raise ctx.fail("tcgen05.commit takes [mbar]" + (", ctaMask (.b16)" if multicast else ""))
    get_addr = address_getter(ctx, ctx.mem(ops[0]), "shared" if cluster_space else "generic")
    get_mask = ctx.src(ops[1], "b16") if multicast else None
    what = "tcgen05.commit"

    def run(cta: CtaState, mask):
        st = tm.tmem_of(cta)
        tm.use_cta_group(st, group, what)
        tids = cta.threads(mask)
        addrs = per_thread(get_addr(cta.R), tids).astype(np.int64)
        if not cluster_space:
            base = SHARED_GENERIC_BASE + window_base(cta)
            inside = (addrs >= base) & (addrs < base + cta.smem.size)
            if not inside.all():
                raise Fault("out-of-bounds", f"{what} mbarrier address {int(addrs[~inside][0]):#x} is not in the "
                            "shared window (use .shared::cluster with a shared address)")
            addrs = addrs - SHARED_GENERIC_BASE
        masks = per_thread(get_mask(cta.R), tids).astype(np.int64) if multicast else None
        if group == 2:
            tm.pair_peer(cta, what)
        for j, tid in enumerate(tids.tolist()):
            records = [r for r in st.mmas if r.thread == tid]
            records += [p for r in records for p in r.partners]
            for r in records:
                r.committed = True
            if multicast:
                ranks = [r for r in range(16) if masks[j] >> r & 1]
                dests = [CLUSTER_STRIDE * r + int(addrs[j]) % CLUSTER_STRIDE for r in ranks]
            else:
                dests = [int(addrs[j])]
            for peer, _, offs in cluster_targets(cta, np.array(dests, dtype=np.int64), 8, what):
                check_barrier_address(peer, offs, what)
                for off in offs.tolist():
                    bar = barrier_at(peer, off, what)
                    phase = bar.phase
                    if async_order.active(cta):  # the committing thread's arrival releases what it is ordered after
                        one = np.zeros(cta.n, dtype=bool)
                        one[tid] = True
                        bar.arriving |= async_order.carried_by(cta, one)
                    arrive(bar, 1, what)
                    if bar.phase != phase:
                        peer.epoch += 1
                    if records:
                        tm.tmem_of(peer).watch.setdefault(off, []).append((bar, phase, records))
    return run


STRICT_FENCES_ENV = "PTXGEN_SIM_TCGEN05_FENCES"


def strict_fences() -> bool:
    return os.environ.get(STRICT_FENCES_ENV, "") == "strict"


def _compile_fence(ins: Instr, ctx, head: str, mods: list):
    if head not in ("fence::before_thread_sync", "fence::after_thread_sync") or mods or ins.operands:
        raise ctx.fail("write tcgen05.fence::before_thread_sync; or tcgen05.fence::after_thread_sync;")
    if head == "fence::before_thread_sync":
        return lambda cta, mask: None

    def run(cta: CtaState, mask):
        st = cta.tmem
        if st is not None and st.unfenced is not None:
            st.unfenced[cta.threads(mask)] = 0
    return run


def _fenced(run, what: str):
    """Strict fences: the executing threads must have fenced since their last mbarrier wait."""
    def checked(cta: CtaState, mask):
        st = cta.tmem
        if st is not None and st.unfenced is not None:
            tids = cta.threads(mask)
            lines = st.unfenced[tids]
            if lines.any():
                k = int(np.flatnonzero(lines)[0])
                raise Fault("missing-fence", f"thread {int(tids[k])} issues {what} after its mbarrier wait at line "
                            f"{int(lines[k])} with no tcgen05.fence::after_thread_sync in between (the ISA's "
                            "canonical pattern, PTX ISA §9.7.16.6.4; reported because "
                            f"{STRICT_FENCES_ENV}=strict)")
        return run(cta, mask)
    for attr in ("yields", "communicates", "releases"):
        if hasattr(run, attr):
            setattr(checked, attr, getattr(run, attr))
    return checked


def compile_tcgen05(ins: Instr, ctx):
    head = ins.mods[0] if ins.mods else ""
    run = _compile_tcgen05(ins, ctx)
    if head in ("mma", "ld", "st", "cp", "shift") and strict_fences():
        return _fenced(run, f"tcgen05.{head}")
    return run


def _compile_tcgen05(ins: Instr, ctx):
    mods = list(ins.mods)
    head = mods.pop(0) if mods else ""
    require_tcgen05(ctx, f"tcgen05.{head}")
    if head == "mma":
        from .tcgen05_mma import compile_mma
        return compile_mma(ins, ctx, mods)
    if head == "cp":
        from .tcgen05_cp import compile_cp
        return compile_cp(ins, ctx, mods)
    if head == "shift":
        from .tcgen05_shift import compile_shift
        return compile_shift(ins, ctx, mods)
    table = {"alloc": _compile_alloc, "dealloc": _compile_dealloc, "relinquish_alloc_permit": _compile_relinquish,
             "ld": _compile_ld, "st": _compile_st, "commit": _compile_commit}
    if head in table:
        return table[head](ins, ctx, mods)
    if head in ("wait::ld", "wait::st"):
        return _compile_wait(ins, ctx, head[-2:], mods)
    if head.startswith("fence::"):
        return _compile_fence(ins, ctx, head, mods)
    raise ctx.fail(f"tcgen05.{head} is not a tcgen05 instruction the simulator knows (alloc, dealloc, "
                   "relinquish_alloc_permit, mma, cp, shift, commit, ld, st, wait::ld, wait::st, fence::*)")


# ------------------------------------------------------------------ mbarrier waits retire MMAs
def wrap_mbarrier(compile_mbarrier):
    """The mbarrier compiler, with successful waits retiring the tcgen05.mma operations whose commit
    arrived on the awaited phase (tmem.observed). Other mbarrier instructions are unchanged."""
    def compile_wrapped(ins: Instr, ctx):
        run = compile_mbarrier(ins, ctx)
        kind = ins.mods[0] if ins.mods else ""
        if kind not in ("try_wait", "test_wait"):
            return run
        pred_slot = ctx.dst(ins.operands[0], "pred")[0]
        space = "shared" if any(m.startswith("shared") for m in ins.mods) else "generic"
        get_addr = address_getter(ctx, ctx.mem(ins.operands[1]), space)
        generic = space == "generic"
        strict, line = strict_fences(), ctx.line

        def wrapped(cta: CtaState, mask):
            out = run(cta, mask)
            st = cta.tmem
            if st is None or not (st.watch or strict):
                return out
            tids = cta.threads(mask)
            ok = cta.R[pred_slot][tids]
            if strict and ok.any():
                if st.unfenced is None:
                    st.unfenced = np.zeros(cta.n, dtype=np.int64)
                st.unfenced[tids[ok]] = line
            if ok.any():
                addrs = per_thread(get_addr(cta.R), tids)[ok]
                addrs = own_offsets(cta, addrs - SHARED_GENERIC_BASE if generic else addrs, "mbarrier wait")
                waiters = tids[ok]
                for addr in np.unique(addrs).tolist():
                    bar = hopper(cta).barriers.get(int(addr))
                    if bar is not None:
                        tm.observed(cta, int(addr), bar, waiters[addrs == addr])
            return out
        for attr in ("yields", "communicates", "releases"):
            if hasattr(run, attr):
                setattr(wrapped, attr, getattr(run, attr))
        return wrapped
    return compile_wrapped


OPS = {"tcgen05": compile_tcgen05}
