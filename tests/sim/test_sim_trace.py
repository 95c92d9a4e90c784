"""The simulator's per-warp timeline (ptxgen/sim/trace.py): the Chrome trace-event JSON of a
warp-specialised sm_90a kernel (several tiles per CTA, and a cluster) and of an mma.sync kernel
must describe what the kernel did: every warp's track, waits that end after the event that
completed their mbarrier phase (flows point forward), stages released only after the wgmma
reading them retired, and as many k-tiles, tiles, copies and groups as the kernel has. A hazard
still writes the trace, ending at the stop, and a deadlock report names each waiting warp's last
events. Tiny shapes: each kernel simulates in about a second."""
from __future__ import annotations

import json
import re

import numpy as np
import pytest

import ptxgen
from ptxgen import Gemm, Schedule, sim
from ptxgen.check import random_operands
from ptxgen.sim.trace import KINDS
from ptxgen.simulate import cta_tiles


def traced(g, s, arch, path, **kw):
    k = ptxgen.compile(g, s, arch=arch)
    a, b = random_operands(g, seed=3)
    c = k.simulate(a, b, trace=str(path), **kw)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    assert np.allclose(c, ref, rtol=1e-2, atol=1e-2)       # tracing changes nothing the kernel computes
    with open(path) as f:
        return k, json.load(f)


def by_phase(doc, ph):
    return [e for e in doc["traceEvents"] if e["ph"] == ph]


def spans(doc, pid=None, tid=None, cat=None):
    return [e for e in by_phase(doc, "X") if (pid is None or e["pid"] == pid) and (tid is None or e["tid"] == tid)
            and (cat is None or e["cat"] == cat)]


def asyncs(doc, cat):
    """[(pid, name, start, end, args)] of the async spans of category `cat`."""
    begins = {e["id"]: e for e in by_phase(doc, "b")}
    return [(b["pid"], b["name"], b["ts"], e["ts"], b["args"]) for e in by_phase(doc, "e")
            if (b := begins[e["id"]])["cat"] == cat]


def flows(doc):
    starts = {e["id"]: e for e in by_phase(doc, "s")}
    return [(starts[e["id"]], e) for e in by_phase(doc, "f")]


def thread_names(doc):
    return {(e["pid"], e["tid"]): e["args"]["name"] for e in by_phase(doc, "M") if e["name"] == "thread_name"}


def enclosing(doc, ev, cat=None):
    """The X span on ev's thread that contains ev's time."""
    hits = [x for x in spans(doc, ev["pid"], ev["tid"], cat) if x["ts"] <= ev["ts"] < x["ts"] + x["dur"]]
    assert hits, f"no span contains {ev}"
    return hits[0]


def launch_args(k):
    """sim.launch arguments of a (possibly edited) sm_90a kernel's PTX: A, B, C tensor maps, C, M, N, K, ldc."""
    from ptxgen.simulate import matrix_operand, sim_tensor_maps
    g = k.gemm
    a, b = random_operands(g, seed=1)
    c = np.zeros((g.m, g.n), np.float32)
    views = [matrix_operand(x, name=name, shape=shape, dtype=dtype, layout=layout, align=16, batch=1,
                            writable=name == "C")[0]
             for x, name, shape, dtype, layout in ((a, "A", (g.m, g.k), g.dtype, g.a_layout),
                                                   (b, "B", (g.k, g.n), g.dtype, g.b_layout),
                                                   (c, "C", (g.m, g.n), g.out_dtype, "row"))]
    return [*sim_tensor_maps(k, *views), c, g.m, g.n, g.k, g.n]


def check_tracks(doc):
    """Perfetto's rules: the spans of one track do not overlap; flows and async spans are paired."""
    by_track = {}
    for e in spans(doc):
        by_track.setdefault((e["pid"], e["tid"]), []).append(e)
    for track in by_track.values():
        track.sort(key=lambda e: e["ts"])
        for a, b in zip(track, track[1:]):
            assert a["ts"] + a["dur"] <= b["ts"], (a, b)
    assert len(by_phase(doc, "b")) == len(by_phase(doc, "e")) and len(by_phase(doc, "s")) == len(by_phase(doc, "f"))


def check_pipeline(doc, k, ctas):
    """The structure every warp-specialised sm_90a trace must have."""
    check_tracks(doc)
    g, s = k.gemm, k.schedule
    k_tiles = -(-g.k // s.bk)
    assert "not cycles" in doc["otherData"]["time_unit"]
    names = thread_names(doc)
    nwarps = k.block[0] // 32
    for info in doc["otherData"]["ctas"]:
        pid = info["pid"]
        assert {t for p, t in names if p == pid} == set(range(nwarps))           # every warp has a track
        producer = [t for (p, t), n in names.items() if p == pid and "producer" in n]
        consumers = [t for (p, t), n in names.items() if p == pid and "consumer" in n]
        assert len(producer) == 4 and len(consumers) == 4 * (s.consumers or 1)
        tiles = len(cta_tiles(k, tuple(info["cta"])))
        assert tiles == ctas[tuple(info["cta"])]
        for w in consumers:                                      # one full-stage wait per k-tile and tile
            full = [e for e in spans(doc, pid, w, "wait mbarrier") if e["name"].endswith(" full")]
            assert len(full) == k_tiles * tiles
            epilogues = [e for e in by_phase(doc, "i") if e["pid"] == pid and e["tid"] == w
                         and e["cat"] == "banner" and e["name"].startswith("Epilogue")]
            assert len(epilogues) == tiles
        loads = [e for t in producer for e in spans(doc, pid, t, "TMA load")]
        copies_per_stage = 2 if (s.cluster in (None, (1, 1))) else None
        issued = sum(e.get("args", {}).get("count", 1) for e in loads)
        if copies_per_stage:
            assert issued == copies_per_stage * k_tiles * tiles
        landed = [a for a in asyncs(doc, "copy in flight") if a[0] == pid]
        assert len(landed) == k_tiles * tiles                    # one landing per stage fill
        groups = [a for a in asyncs(doc, "wgmma in flight") if a[0] == pid]
        assert len(groups) == k_tiles * tiles * (s.consumers or 1)
        assert all(a[4]["wgmma"] == s.bk // 16 * max(1, s.bn // 256) for a in groups)
        # a stage is released only after every wgmma group of the releasing warpgroup reading it retired
        releases = [e for w in consumers for e in spans(doc, pid, w, "arrive") if e["name"].startswith("release")]
        assert releases
        for rel in releases:
            stage, wg, t = rel["args"]["stage"], rel["tid"] // 4, rel["ts"]
            readers = [a for a in groups if a[4]["warpgroup"] == wg and stage in a[4]["stages"] and a[2] < t]
            assert readers, rel
            assert all(a[3] <= t for a in readers), (rel, readers)
    # every flow goes forward in time, from a completing event to the end of a wait it released
    pairs = flows(doc)
    assert pairs
    for src, dst in pairs:
        assert src["ts"] <= dst["ts"]
        wait = enclosing(doc, dst, "wait mbarrier")
        assert wait["ts"] + wait["dur"] - 1 == dst["ts"]
        assert enclosing(doc, src)["cat"] in ("TMA load", "arrive")
    # every consumer's full-stage wait was released by a completion flow (from the producer's copies)
    for info in doc["otherData"]["ctas"]:
        ends = {(d["pid"], d["tid"], d["ts"]) for _, d in pairs}
        for e in spans(doc, info["pid"], cat="wait mbarrier"):
            if e["name"].endswith(" full"):
                assert (e["pid"], e["tid"], e["ts"] + e["dur"] - 1) in ends, e
    return pairs


def test_warp_specialised_trace_reproduces_the_pipeline(tmp_path):
    g = Gemm(192, 128, 192, a_layout="row", b_layout="col")                     # 3 x 2 tiles, 3 k-tiles
    s = Schedule(block=(64, 64, 64), instruction="wgmma", stages=2, consumers=1, sms=2)
    k, doc = traced(g, s, "sm_90a", tmp_path / "ws.json")
    check_pipeline(doc, k, {(0, 0, 0): 3, (1, 0, 0): 3})
    kinds = {e["cat"] for e in spans(doc)}
    assert {"wait mbarrier", "TMA load", "wgmma", "arrive", "TMA store", "wait barrier"} <= kinds <= set(KINDS)
    counters = [e for e in by_phase(doc, "C") if e["pid"] == 0]
    assert max(e["args"]["filled"] for e in counters) == 2 and counters[-1]["args"]["filled"] == 0  # the ring


def test_cluster_trace_has_cross_cta_flows(tmp_path):
    g = Gemm(128, 128, 128, a_layout="row", b_layout="col")
    s = Schedule(block=(64, 64, 64), instruction="wgmma", stages=2, consumers=1, sms=2, cluster=(2, 1))
    k, doc = traced(g, s, "sm_90a", tmp_path / "cl.json", trace_ctas=[(1, 0, 0)])   # its cluster comes along
    ctas = doc["otherData"]["ctas"]
    assert [c["cta"] for c in ctas] == [[0, 0, 0], [1, 0, 0]] and {c["rank"] for c in ctas} == {0, 1}
    assert {c["cluster"][0] for c in ctas} == {0}
    names = {e["pid"]: e["args"]["name"] for e in by_phase(doc, "M") if e["name"] == "process_name"}
    assert all("cluster (0, 0, 0) rank" in n for n in names.values())
    pairs = check_pipeline(doc, k, {(0, 0, 0): 2, (1, 0, 0): 2})
    assert any(src["pid"] != dst["pid"] for src, dst in pairs)      # a remote release or a multicast copy
    assert spans(doc, cat="wait cluster")


def test_mma_sync_trace_shows_cp_async_groups_barriers_and_mma_bursts(tmp_path):
    g = Gemm(64, 64, 256)
    s = Schedule(block=(32, 32, 32), warps=(2, 2), instruction="m16n8k16", stages=3)
    k, doc = traced(g, s, "sm_80", tmp_path / "mma.json", trace_ctas=[(1, 1, 0)])
    k_tiles = 256 // 32
    assert [c["cta"] for c in doc["otherData"]["ctas"]] == [[1, 1, 0]]
    check_tracks(doc)
    assert set(thread_names(doc)) == {(0, w) for w in range(4)}
    groups = asyncs(doc, "copy in flight")
    assert sum(1 for a in groups if a[4]["bytes"] > 0) == k_tiles        # one cp.async group per k-tile
    assert all(a[4]["bytes"] == (32 * 32 * 2) * 2 for a in groups if a[4]["bytes"])   # A and B tiles
    assert [a[4]["group"] for a in groups] == sorted(a[4]["group"] for a in groups)
    per_k_tile = (32 // 16) * (16 // 16) * (16 // 8)                      # k-steps x warp tile 16x16 of m16n8
    for w in range(4):
        mma = spans(doc, 0, w, "mma.sync")
        assert sum(e.get("args", {}).get("count", 1) for e in mma) == k_tiles * per_k_tile
        assert len(spans(doc, 0, w, "wait barrier")) >= k_tiles               # bar.sync per k-tile
        assert spans(doc, 0, w, "wait async") and spans(doc, 0, w, "cp.async") and spans(doc, 0, w, "global store")
    assert not flows(doc)                                                       # no mbarriers on this path


def test_deadlock_writes_the_trace_and_names_the_waiting_warps(tmp_path):
    g = Gemm(128, 64, 128, a_layout="row", b_layout="col")
    s = Schedule(block=(64, 64, 64), instruction="wgmma", stages=2, consumers=1, sms=1)
    k = ptxgen.compile(g, s, arch="sm_90a")
    # the empty barriers expect one arrival more than the 4 consumer warps give: the producer waits forever
    ptx, n = re.subn(r"(mbarrier\.init\.shared::cta\.b64 \[%r\d+\+?\d*\]), 4;", r"\1, 5;", k.ptx)
    assert n >= 1
    args = launch_args(k)
    path = tmp_path / "dead.json"
    with pytest.raises(sim.HazardError) as info:
        sim.launch(ptx, k.entry, grid=k.grid, block=k.block, args=args, dynamic_smem=k.smem_bytes, trace=str(path))
    err = info.value
    assert err.kind == "deadlock"
    assert "Last events of the waiting warps" in err.detail and "warp 4 (producer warpgroup 1)" in err.detail
    assert "warps 0-3 (consumer warpgroup 0): " in err.detail                  # identical warps named once
    assert "wait stage 0 empty" in err.detail and "still waiting" in err.detail
    doc = json.loads(path.read_text())
    assert doc["otherData"]["stopped"].startswith("deadlock at PTX line")
    hazards = [e for e in by_phase(doc, "i") if e["cat"] == "hazard"]
    assert {e["tid"] for e in hazards} == {0, 1, 2, 3, 4}     # the consumers wait for the stuck producer
    last = max(e["ts"] + e.get("dur", 0) for e in by_phase(doc, "X"))
    assert all(e["ts"] >= last - 1 for e in hazards)                           # the trace ends at the stop
    assert doc["otherData"]["steps"] <= last + 1


def test_trace_png_draws_the_timeline(tmp_path):
    pytest.importorskip("matplotlib")
    from ptxgen.sim.trace_png import draw
    g = Gemm(128, 64, 128, a_layout="row", b_layout="col")
    s = Schedule(block=(64, 64, 64), instruction="wgmma", stages=2, consumers=1, sms=1)
    _, doc = traced(g, s, "sm_90a", tmp_path / "ws.json")
    draw(tmp_path / "ws.json", tmp_path / "ws.png")
    data = (tmp_path / "ws.png").read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
    with pytest.raises(ValueError, match="not in the trace"):
        draw(doc, tmp_path / "x.png", cta=(5, 0, 0))


def test_trace_refuses_spread_runs_and_bad_selections(tmp_path):
    g = Gemm(64, 64, 64, a_layout="row", b_layout="col")
    k = ptxgen.compile(g, Schedule(block=(64, 64, 64), instruction="wgmma", stages=2, consumers=1), arch="sm_90a")
    a, b = random_operands(g, seed=1)
    with pytest.raises(ValueError, match="workers=1"):
        k.simulate(a, b, trace=str(tmp_path / "t.json"), workers=2)
    with pytest.raises(TypeError, match="trace_ctas"):
        k.simulate(a, b, trace=str(tmp_path / "t.json"), trace_ctas=3)
    with pytest.raises(ValueError, match="pass trace="):
        k.simulate(a, b, trace_ctas=[(0, 0, 0)])


def test_untraced_launch_runs_the_plain_program():
    """Tracing off: the cached plain program, whose executors are not the traced wrappers."""
    from ptxgen.sim.machine import compile_entry
    from ptxgen.sim.trace_ops import compile_traced
    g = Gemm(64, 64, 64, a_layout="row", b_layout="col")
    k = ptxgen.compile(g, Schedule(block=(64, 64, 64), instruction="wgmma", stages=2, consumers=1), arch="sm_90a")
    plain, traced_prog = compile_entry(k.ptx, k.entry), compile_traced(k.ptx, k.entry)
    assert len(plain.ops) == len(traced_prog.ops) and plain.yields == traced_prog.yields
    assert all(a[0] is not b[0] for a, b in zip(plain.ops, traced_prog.ops))


def test_cli_run_writes_the_trace_and_its_picture(tmp_path, capsys, monkeypatch):
    pytest.importorskip("matplotlib")
    import tempfile
    from ptxgen.cli import main
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))     # where --trace-png alone keeps its JSON
    js, png = tmp_path / "run.json", tmp_path / "run.png"
    assert main(["run", "--arch", "sm_90a", "--instruction", "wgmma", "--block", "64x64x64", "--consumers", "1",
                 "--stages", "2", "--sms", "1", "--shape", "128x64x128", "--trace", str(js),
                 "--trace-png", str(png)]) == 0
    out = capsys.readouterr().out
    assert "executed   on the CPU simulator" in out and f"trace      {js}" in out and f"trace      {png}" in out
    doc = json.loads(js.read_text())
    assert [c["cta"] for c in doc["otherData"]["ctas"]] == [[0, 0, 0]]          # the CTAs run checks
    assert png.read_bytes()[:4] == b"\x89PNG"
    assert main(["run", "--block", "32x32x32", "--shape", "64x64x64", "--trace-png", str(tmp_path / "m.png")]) == 0
    assert (tmp_path / "m.png").exists() and not list(tmp_path.glob("ptxgen-trace-*"))   # the JSON is removed


def test_hooks_for_other_executors_record_spans_and_completions(tmp_path):
    """The API a later executor (tcgen05.mma / tcgen05.commit) calls: an async span from issue to
    its arrival, a phase it completed credited to the running group, nothing for untraced CTAs."""
    from types import SimpleNamespace
    from ptxgen.sim.trace import TraceRecorder, async_begin, async_end, barrier_touched
    rec = TraceRecorder(tmp_path / "h.json", None, "entry")
    cta = SimpleNamespace(cta_xyz=(0, 0, 0), cluster=None, nwarps=4, mask_all=None, trace=None)
    rec.attach(cta)
    ct = cta.trace
    assert ct is not None and ct.nwarps == 4
    async_begin(cta, "mma0", "tcgen05.mma group 0", {"stage": 1})
    rec.step += 7
    bar = SimpleNamespace(addr=0x40, phase=1)
    barrier_touched(cta, bar, 0)
    async_end(cta, "mma0")
    async_end(cta, "unknown")                                   # ignored
    assert rec.asyncs == [(0, "tcgen05.mma group 0", "mma in flight", 0, 7, {"stage": 1})]
    assert rec.completions == {(0, 0x40, 0): (7, 0, 0)}
    quiet = SimpleNamespace(trace=None)
    async_begin(quiet, "k", "x")
    barrier_touched(quiet, bar, 0)
    rec.write()
    doc = json.loads((tmp_path / "h.json").read_text())
    assert [e["ph"] for e in doc["traceEvents"] if e.get("cat") == "mma in flight"] == ["b", "e"]


def test_cli_deadlock_message_points_at_the_trace(monkeypatch, capsys, tmp_path):
    import ptxgen.simulate
    from ptxgen.cli import main

    def stuck(*args, **kw):
        raise sim.HazardError("deadlock", 7, "every thread group waits")
    monkeypatch.setattr(ptxgen.simulate, "run_simulation", stuck)
    argv = ["run", "--sim", "--block", "32x32x32", "--shape", "64x64x64"]
    assert main(argv) == 1
    assert "--trace run.json (or --trace-png run.png) shows what every warp did" in capsys.readouterr().err
    assert main(argv + ["--trace", str(tmp_path / "t.json")]) == 1
    assert "--trace run.json" not in capsys.readouterr().err      # tracing already: the report has the events


def test_readme_hopper_example_trace_is_small_and_selections_are_checked(tmp_path):
    g = Gemm(200, 136, 104, dtype="f16", a_layout="row", b_layout="col")
    k = ptxgen.compile(g, Schedule(block=(128, 128, 64), instruction="wgmma", stages=4), arch="sm_90a")
    a, b = random_operands(g, seed=0)
    path = tmp_path / "readme.json"
    k.simulate(a, b, trace=str(path))
    assert path.stat().st_size < 5e6                                       # issue 26: under 5 MB
    assert len(json.loads(path.read_text())["otherData"]["ctas"]) == k.grid[0]
    with pytest.raises(ValueError, match="outside grid"):
        k.simulate(a, b, trace=str(path), trace_ctas=[(9, 0, 0)])
    with pytest.raises(ValueError, match="was simulated"):
        k.simulate(a, b, ctas=[(0, 0, 0)], trace=str(path), trace_ctas=[(1, 0, 0)])
    with pytest.raises(OSError):
        k.simulate(a, b, trace=str(tmp_path / "no" / "such" / "dir.json"))


def test_hazard_ends_the_trace_with_the_hazard_on_the_warps_involved(tmp_path):
    """Consumers that skip their full-stage wait read bytes still in flight: the simulator stops the
    first wgmma; the trace ends there with the hazard on that warpgroup's four warps."""
    g = Gemm(128, 64, 128, a_layout="row", b_layout="col")
    s = Schedule(block=(64, 64, 64), instruction="wgmma", stages=2, consumers=1, sms=1)
    k = ptxgen.compile(g, s, arch="sm_90a")
    ptx, n = re.subn(r"mbarrier\.try_wait\.parity\.shared::cta\.b64 (%p\d+), \[%r\d+\], %r\d+(?:, \d+)?;"
                     r"( +// the stage's bytes)", r"setp.eq.u32 \1, 0, 0;\2", k.ptx)
    assert n >= 1  # the peeled first k-tile's wait and the loop's
    path = tmp_path / "race.json"
    args = launch_args(k)
    with pytest.raises(sim.HazardError) as info:
        sim.launch(ptx, k.entry, grid=k.grid, block=k.block, args=args, dynamic_smem=k.smem_bytes, trace=str(path))
    assert info.value.kind == "async-pending" and "Last events" not in info.value.detail
    doc = json.loads(path.read_text())
    assert doc["otherData"]["stopped"] == f"async-pending at PTX line {info.value.line}"
    hazards = [e for e in by_phase(doc, "i") if e["cat"] == "hazard"]
    assert {e["tid"] for e in hazards} == {0, 1, 2, 3} and {e["args"]["line"] for e in hazards} == {info.value.line}
    assert all(e["ts"] == doc["otherData"]["steps"] for e in hazards)      # the last step of the trace
    pytest.importorskip("matplotlib")
    from ptxgen.sim.trace_png import main
    assert main([str(path), str(tmp_path / "race.png"), "--cta", "0,0,0"]) == 0
    assert (tmp_path / "race.png").stat().st_size > 10_000
