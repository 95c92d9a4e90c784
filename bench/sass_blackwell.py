"""Static report of ptxgen's sm_100a (tcgen05) kernels next to Triton 3.9's sm_100a matmul for the
same tile, both assembled here by the same ptxas (no GPU): registers, spills, ptxas's C75xx notes,
the MMA warp's loop per k-tile and the epilogue warps' TMEM drain.

    PYTHONPATH=. python3 bench/sass.py --arch sm_100a --out bench/results [--ptxas PATH ...]
    PYTHONPATH=. python3 bench/sass_check.py --arch sm_100a [--ptxas PATH ...]   # the gate

Each ptxas given (default /usr/local/bin/ptxas and the 13.5 wheel's at PTXAS_135 when present)
assembles every row whole-program (`ptxas -arch=sm_100a -v`). Triton 3.9 writes PTX ISA 9.4, which
ptxas 13.0 refuses (it knows 9.0): for 13.0 the `.version` line is lowered to 8.8 (the last ISA
before 9.0 with every tcgen05 form Triton uses), and the row says so.

Per row, from the SASS control-flow graph (bench/sass_cfg.py): `mma` = the loop with the most
tcgen05 MMAs (UTCHMMA f16/bf16/tf32, UTCQMMA fp8/fp6/fp4, UTCOMMA mxf4/nvf4, UTCIMMA int8), per
k-tile (its MMAs over BK / K-per-MMA): MMAs, mbarrier (SYNCS), tcgen05.commit (UTCBAR), other,
total; `prod` = the TMA producer loop's length per k-tile (- when the MMA loop loads itself, as
Triton's single-partition kernel does); `drain` = tcgen05.ld (LDTM) per output tile and its width,
with the epilogue's st.global (STG) and TMA stores (UTMASTG) per tile, and the LDTM per k-tile at
K = 4096. ptxas wraps each elected thread's instruction (tcgen05.mma, commit, TMA) in a one-pass
ELECT loop; those are not loops of the kernel and are skipped (`elect_loop`).
"""
from __future__ import annotations

import os
import re
import subprocess
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from sass_cfg import Loop, busiest_loop, classify, find_loops, parse_functions
from sass_hopper import perf_notes

ARCH = "sm_100a"
PTXAS_130 = "/usr/local/bin/ptxas"
PTXAS_135 = "/tmp/nvcc135/x/nvidia/cu13/bin/ptxas"
#: K of the per-k-tile drain column: the drain of one tile spread over its K / BK k-tiles.
DRAIN_K = 4096
#: (label, Gemm keyword arguments, Schedule keyword arguments): the sm_100a bench candidates
#: (bench/gemm_cases.py BLACKWELL_SCHEDULES, 16-bit and tf32), TN as bench/gemm.py runs them, on a
#: divisible and an edge problem.
PROBLEMS = ((4096, 4096, 4096), (4000, 4000, 4008))
#: Triton's tiles (BM, BN, BK, stages), num_warps 4 as the brief's GPUTarget("cuda", 100, 32) call.
TRITON_TILES = ((128, 256, 64, 3), (128, 128, 64, 4))
_LDTM_WIDTH = re.compile(r"LDTM\.(?:\w+\.)*x(\d+)")


def ptxas_paths(given: list[str]) -> list[str]:
    """The ptxas binaries to use: those given, else 13.0 and (when installed) 13.5."""
    paths = given or [p for p in (PTXAS_130, PTXAS_135) if os.access(p, os.X_OK)]
    for p in paths:
        if not os.access(p, os.X_OK):
            raise FileNotFoundError(f"--ptxas {p}: not an executable ptxas (pip install --target /tmp/nvcc135 "
                                    "nvidia-cuda-nvcc==13.5.37 gives one at " + PTXAS_135 + ")")
    return paths


def ptxas_version(path: str) -> str:
    out = subprocess.run([path, "--version"], capture_output=True, text=True).stdout
    tail = [w for w in out.split() if w.startswith("V")]
    return tail[-1][1:] if tail else "?"


@dataclass
class Assembled:
    cubin: bytes | None
    log: str
    registers: int
    spill: int
    note: str = ""


def assemble_with(ptxas: str, ptx: str) -> Assembled:
    """Whole-program `ptxas -arch=sm_100a -v` of `ptx`; PTX ISA 9.x lowered to 8.8 for a ptxas that
    knows only 9.0 or older (13.0), noted."""
    note = ""
    major = ptxas_version(ptxas).split(".")[:2]
    if major and major[0].isdigit() and (int(major[0]), int(major[1])) < (13, 1):
        lowered = re.sub(r"^\.version 9\.\d+", ".version 8.8", ptx, count=1, flags=re.M)
        if lowered != ptx:
            ptx, note = lowered, "PTX .version 9.x lowered to 8.8 for this ptxas"
    with tempfile.TemporaryDirectory() as d:
        src, out = Path(d) / "k.ptx", Path(d) / "k.cubin"
        src.write_text(ptx)
        run = subprocess.run([ptxas, f"-arch={ARCH}", "-v", "-o", str(out), str(src)], capture_output=True, text=True)
        log = run.stdout + run.stderr
        cubin = out.read_bytes() if run.returncode == 0 and out.exists() else None
    regs = re.search(r"Used (\d+) registers", log)
    spills = [int(x) for x in re.findall(r"(\d+) bytes spill (?:stores|loads)", log)]
    return Assembled(cubin, log, int(regs.group(1)) if regs else -1, sum(spills), note)


@dataclass
class Tcgen05Sass:
    """The roles of one tcgen05 kernel as found in its SASS."""

    mma: Loop | None
    producer: Loop | None
    ldtm: int            # tcgen05.ld per output tile (every LDTM of the function: one tile's drain)
    ldtm_width: str      # e.g. "x32"
    stg: int             # st.global of the epilogue per tile
    tma_stores: int      # cp.async.bulk.tensor stores (UTMASTG) per tile
    mma_kinds: Counter   # UTCHMMA / UTCQMMA / ... over the whole function


def elect_loop(loop: Loop) -> bool:
    """ptxas's ELECT wrapper around one elected thread's instruction (`ELECT P1 ... @P1 BRA.U.ANY
    back`): a branch back to an ELECT that runs once per warp, not a loop of the kernel's."""
    latch = loop.hot[-1] if loop.hot else None
    return (loop.hot[0].family == "ELECT" and latch is not None and latch.family == "BRA"
            and ".ANY" in latch.opcode)


def analyse(text: str, entry: str | None = None) -> Tcgen05Sass | None:
    """The MMA loop (the leaf loop with the most tcgen05 MMAs), the producer loop (TMA loads, no
    MMA), and the TMEM drain of one tile (a persistent kernel's epilogue loop holds one tile's
    LDTM; a one-tile kernel's drain is straight-line code after the MMA loop)."""
    funcs = parse_functions(text)
    instrs = funcs.get(entry or "") or next(iter(funcs.values()), [])
    if not instrs:
        return None
    loops = [lp for lp in find_loops(instrs) if not elect_loop(lp)]
    mma = busiest_loop(loops, "utcmma", leaf=True)
    producer = busiest_loop(loops, "tma_load", without="utcmma")
    if producer is not None and mma is not None and producer.blocks & mma.blocks:
        producer = None
    widths = Counter(m.group(1) for i in instrs if (m := _LDTM_WIDTH.match(i.opcode)))
    kinds = Counter(i.family for i in instrs if classify(i) == "utcmma")
    return Tcgen05Sass(mma, producer, sum(1 for i in instrs if i.family == "LDTM"),
                       "x" + max(widths, key=widths.get) if widths else "-",
                       sum(1 for i in instrs if i.family == "STG"), sum(1 for i in instrs if i.family == "UTMASTG"),
                       kinds)


def per_ktile(loop: Loop, mmas_per_ktile: int) -> tuple[float, dict[str, float]]:
    """(k-tiles one pass covers, the loop's classes per k-tile)."""
    c = loop.classes
    ktiles = max(c["utcmma"] / mmas_per_ktile, 1e-9) if mmas_per_ktile else 1.0
    out = {k: c[k] / ktiles for k in ("utcmma", "mbarrier", "tc_commit", "tma_load")}
    out["total"] = loop.total / ktiles
    out["other"] = out["total"] - sum(out[k] for k in ("utcmma", "mbarrier", "tc_commit", "tma_load"))
    return ktiles, out


HEAD = (f"{'kernel':50s} {'ptxas':7s} {'regs':>4s} {'spill':>5s} {'notes':>5s} | MMA loop per k-tile: "
        f"{'kind':>7s} {'mma':>4s} {'syncs':>5s} {'commit':>6s} {'other':>5s} {'total':>5s} | {'prod':>4s} | "
        f"drain/tile: {'ldtm':>4s} {'width':>5s} {'stg':>4s} {'tmast':>5s} {'ldtm/kt':>7s}")


def row(label: str, ptxas: str, a: Assembled, text: str, entry: str | None, block: tuple[int, int, int],
        k_per_mma: int, notes: dict[str, list[str]]) -> str:
    """One table row (see HEAD); ptxas's C75xx notes in full go to `notes`."""
    found = perf_notes(a.log)
    if found or a.note:
        notes.setdefault(f"{label} [{ptxas}]", []).extend([f"({n.code}) {n.text}" for n in found]
                                                          + ([a.note] if a.note else []))
    head = f"{label:50s} {ptxas:7s} {a.registers:4d} {a.spill:5d} {len(found):5d} |"
    if a.cubin is None:
        return head + " assembly failed: " + next((ln for ln in a.log.splitlines() if "error" in ln.lower()), "?")
    h = analyse(text, entry)
    if h is None or h.mma is None:
        return head + " (no SASS: install nvidia-cuda-cuobjdump)" if not text else head + " no tcgen05 MMA loop"
    _, c = per_ktile(h.mma, block[2] // k_per_mma)
    kind = "/".join(sorted(h.mma_kinds))
    prod = f"{per_ktile(h.producer, 0)[1]['total']:4.0f}" if h.producer else f"{'-':>4s}"
    drain_per_kt = h.ldtm / (DRAIN_K / block[2])
    return head + (f" {'':21s}{kind:>7s} {c['utcmma']:4.0f} {c['mbarrier']:5.0f} {c['tc_commit']:6.0f} "
                   f"{c['other']:5.0f} {c['total']:5.0f} | {prod} | {'':11s} {h.ldtm:4d} {h.ldtm_width:>5s} "
                   f"{h.stg:4d} {h.tma_stores:5d} {drain_per_kt:7.3f}")


def ptxgen_rows(dtypes: tuple[str, ...] = ("bf16", "tf32")) -> list[tuple[str, object]]:
    """(label, Kernel) for each sm_100a bench candidate of bench/gemm_cases.py on PROBLEMS, and the
    chooser's own pick for each problem (a CTA pair, a cluster or a deeper ring, as it decides;
    named "chosen ..."), for every dtype (16-bit, tf32, and the block-scaled "mxfp8" / "nvfp4", on
    the divisible problem only: their 8- and 4-bit rows of K = 4008 are not 16-byte strides)."""
    import ptxgen
    from gemm_cases import BLOCK_SCALED, bench_gemm, candidates_for, chosen_spec

    out = []
    for dtype in dtypes:
        for m, n, k in PROBLEMS:
            g = bench_gemm(dtype, m, n, k)
            if dtype in BLOCK_SCALED and k % 128:  # 8- and 4-bit rows: TMA needs 16-byte row strides
                continue
            for spec in candidates_for(m, n, k, ARCH, dtype):
                out.append((f"ptxgen {dtype} {m}x{n}x{k} {spec.name.replace(' ws-persistent', '')}",
                            ptxgen.compile(g, spec.schedule(), arch=ARCH)))
            chosen = chosen_spec(g, ARCH)
            if chosen is not None:
                name = chosen.name.replace(" ws-persistent", "")
                out.append((f"ptxgen {dtype} {m}x{n}x{k} {name}", ptxgen.compile(g, chosen.schedule(), arch=ARCH)))
    return out


def grouped_rows() -> list[tuple[str, object]]:
    """(label, Kernel) of the chooser's pick for MoE-shaped grouped GEMMs (targets/sm100/grouped.py):
    DeepSeek-V3's expert shape (N 4096, K 7168) as masked decode slots in bf16 and MXFP8 and as a
    contiguous bf16 prefill."""
    import ptxgen

    mx = ptxgen.BlockScale(a=(1, 32), b=(32, 1), dtype="ue8m0")
    problems = [("masked bf16 8x256", dict(m=256, dtype="bf16", grouping="masked")),
                ("masked mxfp8 8x256", dict(m=256, dtype="e4m3", grouping="masked", block_scale=mx)),
                ("contiguous bf16 4096", dict(m=4096, dtype="bf16", grouping="contiguous"))]
    out = []
    for name, kw in problems:
        g = ptxgen.Gemm(kw.pop("m"), 4096, 7168, out_dtype="bf16", b_layout="col", groups=8, **kw)
        kern = ptxgen.compile(g, arch=ARCH)
        bm, bn, bk = kern.schedule.block
        out.append((f"ptxgen grouped {name} chosen {bm}x{bn}x{bk} s{kern.schedule.stages}", kern))
    return out


def _triton_kernel():
    """Triton's tensor-descriptor matmul, TN (B stored N x K as ptxgen's rows), built on first use so
    that importing this file needs no Triton."""
    import triton
    import triton.language as tl

    @triton.jit
    def tma_matmul_tn(a_desc, b_desc, c_desc, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                      BLOCK_K: tl.constexpr):
        off_m = tl.program_id(0) * BLOCK_M
        off_n = tl.program_id(1) * BLOCK_N
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k in tl.range(0, K, BLOCK_K):
            acc = tl.dot(a_desc.load([off_m, k]), b_desc.load([off_n, k]).T, acc)
        c_desc.store([off_m, off_n], acc.to(c_desc.dtype))

    return tma_matmul_tn


def triton_ptx(bm: int, bn: int, bk: int, stages: int) -> tuple[str, str] | str:
    """(PTX, entry) of Triton's tensor-descriptor matmul for sm_100a (bf16, B stored N x K as
    ptxgen's TN rows, bf16 out), or the reason Triton failed."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")  # Triton 3.9's default, without its warning
    kernel = _triton_kernel()
    sig = {"a_desc": f"tensordesc<bf16[{bm}, {bk}]>", "b_desc": f"tensordesc<bf16[{bn}, {bk}]>",
           "c_desc": f"tensordesc<bf16[{bm}, {bn}]>", "K": "i32", "BLOCK_M": "constexpr", "BLOCK_N": "constexpr",
           "BLOCK_K": "constexpr"}
    triton.knobs.compilation.disable_line_info = True
    try:
        k = triton.compile(ASTSource(kernel, sig, {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk}, attrs={}),
                           target=GPUTarget("cuda", 100, 32), options=dict(num_warps=4, num_stages=stages))
    except Exception as e:  # noqa: BLE001 - reported in the table
        return f"Triton failed: {str(e).splitlines()[-1][:160] if str(e) else type(e).__name__}"
    return k.asm["ptx"], k.metadata.name


def report(ptxas: list[str], tool: str | None, with_triton: bool = True) -> list[str]:
    """The side-by-side table: every ptxgen row and Triton tile under each ptxas."""
    from ptxgen.targets.sm100.plan import MMA_K
    from sass import sass_text

    versions = {p: ptxas_version(p) for p in ptxas}
    lines = [HEAD, "-" * len(HEAD)]
    notes: dict[str, list[str]] = {}
    for label, kern in ptxgen_rows():
        for p in ptxas:
            a = assemble_with(p, kern.ptx)
            text = sass_text(a.cubin, tool) if tool and a.cubin else ""
            lines.append(row(label, versions[p], a, text, kern.entry, kern.schedule.block, MMA_K[kern.gemm.dtype],
                             notes))
    for bm, bn, bk, stages in TRITON_TILES if with_triton else ():
        made = triton_ptx(bm, bn, bk, stages)
        label = f"triton bf16 {bm}x{bn}x{bk} s{stages} w4"
        if isinstance(made, str):
            lines.append(f"{label:50s} {made}")
            continue
        ptx, entry = made
        for p in ptxas:
            a = assemble_with(p, ptx)
            text = sass_text(a.cubin, tool) if tool and a.cubin else ""
            lines.append(row(label, versions[p], a, text, entry, (bm, bn, bk), 16, notes))
    lines += ["", "notes (ptxas C75xx performance warnings, and rows whose PTX was adapted):"]
    lines += [f"  {k}: {t}" for k, ts in notes.items() for t in ts] or ["  none"]
    return lines


def gate(ptxas: list[str]) -> tuple[list[str], int]:
    """bench/sass_check.py --arch sm_100a: every bench candidate and the chooser's pick (16-bit, tf32,
    MXFP8 and NVFP4; divisible and edge problems; MoE grouped GEMMs, `grouped_rows`) under each
    ptxas has 0 spill bytes and no C75xx warning. (rows, failures)"""
    versions = {p: ptxas_version(p) for p in ptxas}
    rows, failed = [], 0
    for label, kern in ptxgen_rows(("bf16", "f16", "tf32", "mxfp8", "nvfp4")) + grouped_rows():
        for p in ptxas:
            a = assemble_with(p, kern.ptx)
            codes = sorted({n.code for n in perf_notes(a.log)})
            ok = a.cubin is not None and a.spill == 0 and not codes
            failed += not ok
            rows.append(f"{'PASS' if ok else 'FAIL'}  {label:48s} {versions[p]:8s} {a.registers:4d} {a.spill:5d} "
                        f"{','.join(codes) or '-'}")
    return rows, failed


def header(script: str, ptxas: list[str], argv: list[str]) -> list[str]:
    """The provenance lines: command, date, commit, each assembler's and Triton's version."""
    import datetime as _dt

    from sass import commit, cuobjdump

    try:
        import triton

        tri = f"Triton {triton.__version__}"
    except ImportError:
        tri = "no Triton"
    tool = cuobjdump()
    dis = "no cuobjdump"
    if tool:
        out = subprocess.run([tool, "--version"], capture_output=True, text=True).stdout.strip().splitlines()
        dis = f"cuobjdump {out[-1].split()[-1] if out else '?'}"
    asm = ", ".join(f"ptxas {ptxas_version(p)} ({p})" for p in ptxas)
    return [f"# PYTHONPATH=. python3 bench/{script} {' '.join(argv)}",
            f"# at {commit()} on {_dt.datetime.now(_dt.timezone.utc):%Y-%m-%d %H:%M} UTC, no GPU; {asm} "
            f"-arch={ARCH} -v whole-program; {tri} (GPUTarget cuda 100, num_warps 4); {dis}"]
