"""The simulator against the device, kernel by kernel: every built design, run both ways.

Integer kernels (s8 -> s32) must agree bit for bit: their sums are exact, so the order in which a
tensor core, a split-K reduction or a Stream-K fix-up adds them cannot change a bit, and any
difference is a bug in the kernel (a race the simulator's order hides), in the simulator, or in
the launch path. Split-K and Stream-K add f32 partial tiles and refuse s32 accumulation, so their
exact case is f16 -> f32 on integer-valued operands in [-4, 4]: every partial sum is an integer
below 2**24, exact in f32 whatever the order, so bit-for-bit holds there too. Float kernels
(f16/bf16/fp8 on random operands, f32 accumulation) may round differently (the tensor core's
internal order is not the simulator's), so each side is checked elementwise against the float64
reference with `ptxgen.check.compare`, and whether the two are bit-identical is recorded, not
required.

"The device" is whatever `Kernel.__call__` launches on: NVIDIA's driver on a GPU, or with
PTXGEN_DRIVER=sim the simulator-backed stand-in (then both sides are the simulator and this checks
the plumbing, which is what the CPU dry run of bench/on_device.sh is for). `--tiny` shrinks every
problem to one or two tiles and short K, for the CPU.

    PYTHONPATH=. python3 bench/device_vs_sim.py --out results.json            # on a GPU
    PTXGEN_DRIVER=sim PYTHONPATH=. python3 bench/device_vs_sim.py --tiny      # anywhere

Exit status: 0 when every case that ran agreed, 1 when one did not (or raised), 2 when no device
(real or stand-in) could be used at all.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

if __package__ in (None, ""):  # run as a script: import this checkout's ptxgen
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ptxgen import Gemm, Schedule  # noqa: E402

#: Arch each design compiles for, and the device arch it needs (sm_80 PTX also runs on sm_90).
NEEDS = {"sm_80": ("sm_80", "sm_86", "sm_89", "sm_90"), "sm_90a": ("sm_90",)}

#: The designs: (name, arch, schedule). The sm_90a names follow bench/fuzz_draws_sm90.py's DESIGNS.
#: Persistent grids and Stream-K name `sms` so the device runs the grid the simulator runs.
_WG = dict(instruction="wgmma")
DESIGNS: tuple[tuple[str, str, Schedule], ...] = (
    ("mma.sync", "sm_80", Schedule(block=(64, 64, 64), warps=(2, 2), stages=3)),
    ("mma.sync split-k", "sm_80", Schedule(block=(64, 64, 64), warps=(2, 2), stages=2, split_k=2)),
    ("mma.sync stream-k", "sm_80", Schedule(block=(64, 64, 64), warps=(2, 2), stages=2,
                                            decomposition="stream-k", sms=3)),
    ("one-tile", "sm_90a", Schedule(block=(64, 64, 64), stages=2, warp_specialized=False, persistent=False,
                                    consumers=1, **_WG)),
    ("ws-one-tile", "sm_90a", Schedule(block=(128, 64, 64), stages=3, persistent=False, consumers=2, **_WG)),
    ("ws-persistent", "sm_90a", Schedule(block=(128, 128, 64), stages=3, consumers=2, sms=2, **_WG)),
    ("ws-persistent tma-store", "sm_90a", Schedule(block=(128, 64, 64), stages=3, consumers=2, sms=1,
                                                   epilogue_via_smem=True, **_WG)),
    ("ws-cluster 2x1 multicast", "sm_90a", Schedule(block=(128, 64, 64), stages=2, consumers=2, cluster=(2, 1),
                                                    multicast=True, sms=2, **_WG)),
    ("ws-cluster 1x2", "sm_90a", Schedule(block=(128, 64, 64), stages=2, consumers=2, cluster=(1, 2), sms=4, **_WG)),
    ("split-k", "sm_90a", Schedule(block=(64, 64, 64), stages=2, warp_specialized=False, persistent=False,
                                   consumers=1, split_k=2, **_WG)),
    ("stream-k", "sm_90a", Schedule(block=(64, 64, 64), stages=2, warp_specialized=False, consumers=1,
                                    decomposition="stream-k", sms=3, **_WG)),
)

#: Designs that refuse s32 accumulation: their exact case is integer-valued f16 -> f32 (module doc).
F32_PARTIALS = ("split-k", "stream-k")
#: Integer-valued f16 operands are drawn from [-INT_RANGE, INT_RANGE] (never zero).
INT_RANGE = 4

#: Float dtypes each design also runs (input, output): f16 everywhere, bf16 and fp8 on a few.
FLOAT_DTYPES = {"mma.sync": (("f16", "f32"), ("bf16", "bf16")),
                "ws-persistent": (("f16", "f32"), ("bf16", "bf16"), ("e4m3", "bf16"))}


@dataclasses.dataclass(frozen=True)
class Case:
    """One kernel to run on the device and on the simulator."""
    design: str
    arch: str
    gemm: Gemm
    schedule: Schedule
    integer_valued: bool = False  # f16 operands holding small integers: exact in f32 (module doc)

    @property
    def name(self) -> str:
        g = self.gemm
        ints = " (integer-valued)" if self.integer_valued else ""
        return f"{self.design} {g.dtype}->{g.out_dtype}{ints} {g.m}x{g.n}x{g.k}"

    @property
    def exact(self) -> bool:
        """Whether the device and the simulator must agree bit for bit."""
        return self.gemm.out_dtype == "s32" or self.integer_valued


def _shape(s: Schedule, tiny: bool) -> tuple[int, int, int]:
    """A problem with odd edges: about 2x2 tiles (3x2 full size) with the last row and column of
    tiles cut, and K of 2 k-tiles (tiny) or 5 with a cut last one."""
    bm, bn, bk = s.block
    cm, cn = s.cluster if s.instruction == "wgmma" else (1, 1)
    tm, tn = (max(2, cm), max(1, cn)) if tiny else (max(3, 2 * cm), max(2, 2 * cn))
    m = (tm - 1) * bm + bm // 2 + 8
    n = (tn - 1) * bn + bn // 2 + 8 if tn > 1 else bn
    k = 2 * bk if tiny else 4 * bk + bk // 2
    return m, n, k


def build_cases(tiny: bool = False, only: list[str] | None = None) -> list[Case]:
    """Every design's exact case (s8 -> s32, or integer-valued f16 -> f32 where partial tiles are
    f32), then every design's float dtypes (FLOAT_DTYPES; f16 -> f32 by default): a run cut short by
    its budget has compared every design bit for bit first."""
    cases = []
    for design, arch, s in DESIGNS:
        if only and not any(word in design for word in only):
            continue
        m, n, k = _shape(s, tiny)
        partials = any(design.endswith(p) for p in F32_PARTIALS)
        exact = ("f16", "f32", True) if partials else ("s8", "s32", False)
        dtypes = [exact] + [(d, o, False) for d, o in FLOAT_DTYPES.get(design, (("f16", "f32"),))]
        for dtype, out, ints in dtypes:
            # wgmma's K step is 32 bytes: the 1-byte types take a k-tile twice as deep
            bk = 2 * s.bk if dtype in ("s8", "u8", "e4m3", "e5m2") and s.instruction == "wgmma" else s.bk
            sched = dataclasses.replace(s, block=(s.bm, s.bn, bk)) if bk != s.bk else s
            cases.append(Case(design, arch, Gemm(m, n, k * bk // s.bk, dtype=dtype, out_dtype=out), sched, ints))
    return sorted(cases, key=lambda c: not c.exact)  # stable: design order within each half


def operands(case: Case, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """`check.random_operands`, or for an integer-valued case the same layouts holding integers in
    [-INT_RANGE, INT_RANGE] without zero (f16 holds them exactly)."""
    from ptxgen.check import random_operands

    a, b = random_operands(case.gemm, seed)
    if not case.integer_valued:
        return a, b
    rng = np.random.default_rng(seed)

    def ints(x: np.ndarray) -> np.ndarray:
        v = rng.integers(1, INT_RANGE + 1, x.shape) * rng.choice((-1, 1), x.shape)
        out = np.empty_like(x)  # keeps x's memory order (a column-major operand stays so)
        out[...] = v.astype(x.dtype)
        return out

    return ints(a), ints(b)


def device_description() -> tuple[str | None, str]:
    """(the device's arch, a line naming it and its driver); (None, why) without a device."""
    from ptxgen.runtime import gpu_available, gpu_unavailable_reason
    from ptxgen.runtime import simdriver
    from ptxgen.runtime.driver import context

    if not gpu_available():
        return None, f"no device: {gpu_unavailable_reason()}"
    ctx = context()
    return ctx.arch, f"{ctx.name} ({ctx.arch}, {ctx.sm_count} SMs; driver: {simdriver.driver_description()})"


def compile_arch(case: Case, dev_arch: str) -> str:
    """The mma.sync designs compile for the device's own arch where ptxgen has that target (sm_90
    on an H100: no driver JIT of sm_80 PTX), else for sm_80; the sm_90a ones for sm_90a."""
    from ptxgen.schedule.targets import TARGETS

    return dev_arch if case.arch == "sm_80" and dev_arch in TARGETS else case.arch


def _run_device(kern, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    from ptxgen.check import poisoned

    g = kern.gemm
    c = poisoned(((g.batch,) if g.batch > 1 else ()) + (g.m, g.n), g.out_dtype)
    out = kern(a, b, c=c)
    return np.asarray(out if out is not None else c)


def run_case(case: Case, seed: int, workers: int, arch: str | None = None) -> dict[str, Any]:
    """Compile (for `arch`, default the case's), run on the device and on the simulator, compare;
    a JSON-ready row."""
    import ptxgen
    from ptxgen.check import compare, magnitude, reference

    arch = arch or case.arch
    row: dict[str, Any] = {"case": case.name, "design": case.design, "arch": arch,
                           "dtype": case.gemm.dtype, "out_dtype": case.gemm.out_dtype,
                           "shape": [case.gemm.m, case.gemm.n, case.gemm.k], "schedule": repr(case.schedule)}
    t0 = time.time()
    kern = ptxgen.compile(case.gemm, case.schedule, arch=arch)
    a, b = operands(case, seed)
    t1 = time.time()
    dev = _run_device(kern, a, b)
    t2 = time.time()
    sim = np.asarray(kern.simulate(a, b, workers=workers, progress=False))
    row.update(compile_s=round(t1 - t0, 2), device_s=round(t2 - t1, 2), sim_s=round(time.time() - t2, 2))
    ref = reference(a, b)
    same = np.array_equal(dev, sim) and dev.dtype == sim.dtype
    row["bitwise_equal"] = bool(same)
    if not same:
        differ = dev.astype(np.float64) != sim.astype(np.float64)
        row["elements_differing"] = int(differ.sum())
        row["first_differing"] = [[int(i) for i in idx] for idx in np.argwhere(differ)[:8]]
    if case.exact:
        row["device_exact"] = bool(np.array_equal(dev.astype(np.float64), ref))
        row["sim_exact"] = bool(np.array_equal(sim.astype(np.float64), ref))
        row["status"] = "ok" if same and row["device_exact"] and row["sim_exact"] else "FAIL"
        return row
    bound = magnitude(a, b)
    for side, c in (("device", dev), ("sim", sim)):
        cmp = compare(c, ref, case.gemm, bound=bound)
        row[f"{side}_outside"] = int(cmp.bad)
        row[f"{side}_unwritten"] = int(cmp.unwritten)
        row[f"{side}_max_abs_err"] = cmp.max_abs_error
    with np.errstate(invalid="ignore"):
        row["max_abs_device_minus_sim"] = float(np.nanmax(np.abs(dev.astype(np.float64) - sim.astype(np.float64))))
    ok = all(row[f"{side}_{what}"] == 0 for side in ("device", "sim") for what in ("outside", "unwritten"))
    row["status"] = "ok" if ok else "FAIL"
    return row


def _fmt(row: dict[str, Any]) -> str:
    if row["status"] in ("skipped", "error"):
        return f"{row['status'].upper():7s} {row['case']}: {row.get('reason', '')}"
    if "device_exact" in row:
        detail = "bit-for-bit equal, exact" if row["status"] == "ok" else (
            f"{row.get('elements_differing', 0)} elements differ; device exact {row['device_exact']}, "
            f"sim exact {row['sim_exact']}")
    else:
        detail = (f"outside bound: device {row['device_outside']}, sim {row['sim_outside']}; unwritten: device "
                  f"{row['device_unwritten']}, sim {row['sim_unwritten']}; max |device-sim| "
                  f"{row['max_abs_device_minus_sim']:.3g}{' (bit-identical)' if row['bitwise_equal'] else ''}")
    return f"{row['status'].upper():7s} {row['case']}: {detail} [{row['device_s']}s device, {row['sim_s']}s sim]"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="write the rows as JSON here")
    ap.add_argument("--tiny", action="store_true", help="one or two tiles per problem, short K (CPU dry run)")
    ap.add_argument("--only", nargs="*", help="only designs whose name contains one of these words")
    ap.add_argument("--budget-s", type=float, default=None, help="start no new case after this many seconds")
    ap.add_argument("--workers", type=int, default=max(1, min(8, (os.cpu_count() or 2) // 2)),
                    help="simulator processes per case")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--list", action="store_true", help="list the cases and exit")
    args = ap.parse_args(argv)
    cases = build_cases(args.tiny, args.only)
    if args.list:
        print("\n".join(c.name for c in cases))
        return 0
    dev_arch, about = device_description()
    print(f"device: {about}", flush=True)
    if dev_arch is None:
        return 2
    t0 = time.time()
    rows = []
    for case in cases:
        row: dict[str, Any] = {"case": case.name, "design": case.design, "arch": case.arch,
                               "dtype": case.gemm.dtype, "out_dtype": case.gemm.out_dtype}
        if dev_arch not in NEEDS[case.arch]:
            row.update(status="skipped", reason=f"{case.arch} kernels need one of {', '.join(NEEDS[case.arch])}; "
                                                f"this device is {dev_arch}")
        elif args.budget_s is not None and time.time() - t0 > args.budget_s:
            row.update(status="skipped", reason=f"budget of {args.budget_s:.0f} s reached")
        else:
            try:
                row = run_case(case, args.seed, args.workers, compile_arch(case, dev_arch))
            except Exception as e:  # one broken case must not hide the others
                row.update(status="error", reason=f"{type(e).__name__}: {e}"[:500])
        rows.append(row)
        print(_fmt(row), flush=True)
        counts = {s: sum(r["status"] == s for r in rows) for s in ("ok", "FAIL", "error", "skipped")}
        if args.out:  # after every case: a run stopped at its time limit keeps what it compared
            Path(args.out).write_text(json.dumps({"device": about, "tiny": args.tiny, "seed": args.seed,
                                                  "done": len(rows) == len(cases), "counts": counts,
                                                  "rows": rows}, indent=1))
    counts = {s: sum(r["status"] == s for r in rows) for s in ("ok", "FAIL", "error", "skipped")}
    print(f"device vs simulator: {counts['ok']} ok, {counts['FAIL']} FAIL, {counts['error']} error, "
          f"{counts['skipped']} skipped of {len(rows)} cases ({time.time() - t0:.0f} s)")
    return 1 if counts["FAIL"] or counts["error"] else 0


if __name__ == "__main__":
    sys.exit(main())
