"""Planted synchronisation bugs of the sm_90a kernels: flagged by the simulator, observed on hardware.

Each plant deletes one synchronisation line from a real ptxgen kernel (the same edits the
simulator tests make: tests/targets/sm90/test_sm90_ws.py and test_sm90_tma_store.py). Two things
are checked for each:

* the simulator flags it (a `sim.HazardError`), deterministically, on a small problem; a plant it
  does not flag is a FAIL, since the simulator is the project's judge of these races;
* on a GPU the planted kernel runs RUNS times on a large problem (every SM busy, each persistent
  CTA walking several tiles) and the runs whose C is wrong are counted, next to the unplanted
  kernel's, which must be right every time (else FAIL).

How often hardware shows a race is recorded, not asserted: a count of 0 means this GPU, this
clock and this problem did not expose it in RUNS tries, not that the bug is harmless. What it does
show: whether the simulator's hazard corresponds to corruption the hardware really produces. Plants
that could hang a GPU (deadlocks, a missing expect_tx) are not run there. The sm_80 cp.async races
are in tests/gpu/test_gpu_planted.py.

    PYTHONPATH=. python3 bench/planted_races.py --out planted.json       # on an sm_90 GPU
    PYTHONPATH=. python3 bench/planted_races.py --sim-only               # anywhere: the simulator's half
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

if __package__ in (None, ""):  # run as a script: import this checkout's ptxgen
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ptxgen import Gemm, Schedule  # noqa: E402

ARCH = "sm_90a"
#: Launches of each planted kernel (and of its unplanted twin) on the GPU.
RUNS = 30

WS = Schedule(block=(128, 64, 64), instruction="wgmma", stages=3, consumers=2, persistent=True,
              epilogue_via_smem=True)
ONE_TILE = Schedule(block=(64, 128, 64), instruction="wgmma", stages=2, warp_specialized=False, persistent=False,
                    consumers=1, epilogue_via_smem=True)
#: (small problem and `sms` for the simulator, large problem and `sms` for the GPU) per kernel.
#: On the GPU the persistent grid is half an H100 (66 CTAs), so each CTA walks about 4 of the 256
#: tiles (the first plant needs a CTA to walk several); the one-tile kernel launches 256 CTAs.
PROBLEMS = {"ws": ((Gemm(136, 72, 136, a_layout="row", b_layout="col"), 1),
                   (Gemm(2048, 1024, 512, a_layout="row", b_layout="col"), 66)),
            "one-tile": ((Gemm(64, 128, 64, a_layout="row", b_layout="col"), None),
                         (Gemm(2048, 1024, 512, a_layout="row", b_layout="col"), None))}


def _drop_lines(marker: Callable[[str], bool]) -> Callable[[str], str]:
    def plant(ptx: str) -> str:
        lines = ptx.split("\n")
        kept = [line for line in lines if not marker(line)]
        if len(kept) == len(lines):
            raise LookupError("the line this plant removes is not in the kernel (the kernel changed: update the plant)")
        return "\n".join(kept)
    return plant


def _drop_barrier_after_reuse_wait(ptx: str) -> str:
    """The named barrier after the leaders' `wait_group.read` that opens each tile's epilogue
    (before the staging is written again: targets/sm90/epilogue_tma.py)."""
    lines = ptx.split("\n")
    at = next((i for i, line in enumerate(lines)
               if "cp.async.bulk.wait_group.read" in line and "bar.sync" in lines[i + 1]), None)
    if at is None:
        raise LookupError("no bar.sync right after a leader's cp.async.bulk.wait_group.read "
                          "(the kernel changed: update the plant)")
    return "\n".join(lines[:at + 1] + lines[at + 2:])


@dataclasses.dataclass(frozen=True)
class Plant:
    name: str
    kernel: str  # a key of PROBLEMS
    edit: Callable[[str], str]
    why: str  # what the deleted line orders


PLANTS = (
    Plant("ws: no barrier after the leaders' store read-wait before the staging is reused", "ws",
          _drop_barrier_after_reuse_wait,
          "the next tile's staging writes vs the TMA store still reading the staging buffer (issue 21, point 1)"),
    Plant("ws: CTA exits before its last TMA stores read the staging", "ws",
          _drop_lines(lambda line: "wait_group.read" in line and "before the CTA exits" in line),
          "the CTA's exit (its shared memory handed to the next CTA) vs the last TMA stores reading it"),
    Plant("ws: stage released before its wgmma retired", "ws",
          _drop_lines(lambda line: "k-tile kt-1's wgmma group has retired" in line),
          "the producer's next TMA load into a stage vs the wgmma still reading it"),
    Plant("ws: accumulators read before wgmma.wait_group 0", "ws",
          _drop_lines(lambda line: "the accumulators may be read" in line),
          "the epilogue's reads of the accumulators vs the last wgmma still writing them"),
    Plant("one-tile: staging rewritten before cp.async.bulk.wait_group.read", "one-tile",
          _drop_lines(lambda line: "wait_group.read" in line and "which chunk" in line),
          "the next chunk's staging writes vs the TMA store reading the previous one"),
    Plant("one-tile: no fence.proxy.async before the TMA store", "one-tile",
          _drop_lines(lambda line: "fence.proxy.async" in line),
          "generic-proxy staging writes vs the async proxy's read of them"),
)


def _kernel(key: str, big: bool):
    import ptxgen

    (small, small_sms), (large, large_sms) = PROBLEMS[key]
    g, sms = (large, large_sms) if big else (small, small_sms)
    s = WS if key == "ws" else ONE_TILE
    return ptxgen.compile(g, dataclasses.replace(s, sms=sms) if s.persistent else s, arch=ARCH)


def simulator_verdict(plant: Plant) -> dict[str, Any]:
    """Whether the simulator flags the plant (and runs the unplanted kernel clean)."""
    from ptxgen import sim
    from ptxgen.check import check_kernel, random_operands

    kern = _kernel(plant.kernel, big=False)
    a, b = random_operands(kern.gemm, 3)
    clean = check_kernel(kern, a, b, run=kern.simulate)
    planted = dataclasses.replace(kern, ptx=plant.edit(kern.ptx), _assembled=None)
    try:
        planted.simulate(a, b, progress=False)
    except sim.HazardError as e:
        return {"sim_unplanted_ok": clean.ok, "sim_flags": True, "sim_hazard": f"{e.kind}: {e}"[:400]}
    return {"sim_unplanted_ok": clean.ok, "sim_flags": False, "sim_hazard": None}


def hardware_rate(plant: Plant, runs: int) -> dict[str, Any]:
    """Wrong runs of the planted kernel and of its unplanted twin over `runs` launches each."""
    from ptxgen.check import compare, magnitude, poisoned, random_operands, reference

    kern = _kernel(plant.kernel, big=True)
    g = kern.gemm
    a, b = random_operands(g, 5)
    ref, bound = reference(a, b), magnitude(a, b)
    out: dict[str, Any] = {"hw_problem": [g.m, g.n, g.k], "hw_runs": runs}
    try:
        planted = dataclasses.replace(kern, ptx=plant.edit(kern.ptx), _assembled=None)
        planted.assemble()
    except Exception as e:  # the assembler may refuse the edited PTX: that is the observation
        out["hw_planted"] = f"not assembled: {type(e).__name__}: {e}"[:300]
        planted = None
    right: np.ndarray | None = None  # the unplanted kernel's first C, once checked: the same bits need no compare
    for label, k in (("unplanted", kern), ("planted", planted)):
        if k is None:
            continue
        wrong, worst, errors = 0, 0, []
        for _ in range(runs):
            c = poisoned((g.m, g.n), g.out_dtype)
            try:
                k(a, b, c=c)
            except Exception as e:  # a launch failure (e.g. an illegal address) is a wrong run too
                errors.append(f"{type(e).__name__}: {e}"[:200])
                wrong += 1
                break  # the context may be unusable after a fault: stop this kernel's runs
            if right is not None and np.array_equal(c, right):
                continue
            cmp = compare(c, ref, g, bound=bound)
            bad = cmp.bad + cmp.unwritten
            if label == "unplanted" and right is None and bad == 0:
                right = c
            wrong += bad > 0
            worst = max(worst, bad)
        out[f"hw_{label}_wrong_runs"] = wrong
        out[f"hw_{label}_worst_wrong_elements"] = worst
        if errors:
            out[f"hw_{label}_errors"] = errors
    return out


def _line(row: dict[str, Any], runs: int) -> str:
    """One printed line per plant: the simulator's verdict, then the hardware's counts or why none."""
    if "sim_flags" not in row:
        return f"{row['status'].upper():6s} {row['plant']}: {row.get('reason', '')}"
    verdict = "simulator flags it" if row["sim_flags"] else "simulator does NOT flag it"
    if "hardware" in row:
        hw = row["hardware"]
    else:
        hw = (f"hardware: planted wrong in {row.get('hw_planted_wrong_runs', '-')}/{runs} runs (worst "
              f"{row.get('hw_planted_worst_wrong_elements', '-')} elements), unplanted wrong in "
              f"{row.get('hw_unplanted_wrong_runs', '-')}/{runs}")
        hw += f"; {row['hw_planted']}" if "hw_planted" in row else ""
    return f"{row['status'].upper():6s} {row['plant']}: {verdict}; {hw}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="write the rows as JSON here")
    ap.add_argument("--sim-only", action="store_true", help="only the simulator's half (no GPU needed)")
    ap.add_argument("--runs", type=int, default=RUNS, help="GPU launches per kernel")
    args = ap.parse_args(argv)
    hardware_reason = "--sim-only" if args.sim_only else None
    if hardware_reason is None:
        from ptxgen.runtime import gpu_available, gpu_unavailable_reason, simdriver
        from ptxgen.runtime.driver import context

        if not gpu_available():
            hardware_reason = f"no GPU: {gpu_unavailable_reason()}"
        elif simdriver.active() or simdriver.selected():
            hardware_reason = "the stand-in driver is the simulator: only hardware shows how often a race corrupts data"
        elif context().arch != "sm_90":
            hardware_reason = f"the plants are sm_90a kernels; this device is {context().arch}"
    rows, failed = [], 0
    t0 = time.time()
    for plant in PLANTS:
        row: dict[str, Any] = {"plant": plant.name, "orders": plant.why}
        try:
            row.update(simulator_verdict(plant))
            if hardware_reason:
                row["hardware"] = f"skipped: {hardware_reason}"
            else:
                row.update(hardware_rate(plant, args.runs))
            ok = row["sim_flags"] and row["sim_unplanted_ok"] and not row.get("hw_unplanted_wrong_runs")
            row["status"] = "ok" if ok else "FAIL"
        except Exception as e:
            row.update(status="error", reason=f"{type(e).__name__}: {e}"[:500])
        if any(key.endswith("_errors") for key in row) and not hardware_reason:
            # a faulting launch can leave the CUDA context unusable: later launches would fail for that
            # reason, not their own, so the remaining plants keep only the simulator's half
            hardware_reason = f"a launch failed in the plant {plant.name!r} (the context may be broken)"
        failed += row["status"] != "ok"
        rows.append(row)
        print(_line(row, args.runs), flush=True)
        if args.out:  # after every plant: a run stopped at its time limit keeps what it saw
            Path(args.out).write_text(json.dumps({"runs": args.runs, "hardware": hardware_reason or "ran",
                                                  "rows": rows}, indent=1))
    print(f"planted races: {len(rows) - failed} ok, {failed} not ok of {len(rows)} ({time.time() - t0:.0f} s)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
