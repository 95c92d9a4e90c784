"""Triton's TMA matmul for sm_90a, compiled on this machine (no GPU) and read by the same static
analysis as ptxgen's kernels (bench/sass_hopper.py): the baseline table that ptxgen's Hopper
kernels are set beside (issue 13).

    pip install triton==3.9.0 nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm   # bench-only
    TRITON_DEFAULT_FP_FUSION=1 PYTHONPATH=. python3 bench/triton_hopper.py --out bench/results

The kernel is the tensor-descriptor matmul of Triton's tutorials (host-side descriptors, so A, B
and C move by TMA with mbarriers, and `tl.dot` becomes wgmma), f16 inputs, f32 accumulation and
f32 output, A as [M, K] and B as [K, N], for 128x128x64 (4 stages) and 128x256x64 (3 stages)
with 4 and 8 warps, each with and without `tl.range(..., warp_specialize=True)` (which Triton 3.9
ignores on sm_90a with 8 warps and fails on with 4), and the warp-specialised Gluon kernel of
bench/gluon_ws_matmul.py (one producer warp, 4 or 8 consumer warps, setmaxnreg) for a
producer/consumer baseline.

Triton's PTX is assembled here by ptxgen's own assembler (nvJitLink, like every ptxgen kernel),
so both sides of the comparison come from the same ptxas; the rows marked `triton-ptxas` read
the cubin Triton made itself with the ptxas it bundles, for reference.

Per row: registers and spills, shared memory (Triton's dynamic allocation plus static), CTAs
per SM and what limits them, HGMMA in the kernel and their shape, and the consumer loop (the
loop with the most HGMMA) per 64-wide k-tile: HGMMA, TMA loads, mbarrier (SYNCS), wgmma
fence/wait (WARPGROUP), bar.sync, other, total; plus the producer loop where the kernel is
warp-specialised, setmaxnreg, and ptxas's C75xx performance notes in full.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import os
import platform
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from sass import cuobjdump, sass_text, tools  # noqa: E402
from results_file import commit  # noqa: E402
from sass_hopper import analyse_sass, hgmma_per_ktile, loop_columns, perf_notes  # noqa: E402

from ptxgen.schedule.occupancy import occupancy  # noqa: E402

#: (BM, BN, BK, stages): Triton's usual Hopper configurations for these tiles.
TILES = ((128, 128, 64, 4), (128, 256, 64, 3))
WARPS = (4, 8)
#: Registers the Gluon kernel's producer warp keeps (setmaxnreg.dec); the consumers get the rest.
PRODUCER_REGS = 40
COMMAND = "TRITON_DEFAULT_FP_FUSION=1 PYTHONPATH=. python3 bench/triton_hopper.py --out bench/results"


def _kernel():
    """The Triton program, built on first use so that importing this file needs no Triton."""
    import triton
    import triton.language as tl

    @triton.jit
    def tma_matmul(a_desc, b_desc, c_desc, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                   BLOCK_K: tl.constexpr, WARP_SPECIALIZE: tl.constexpr):
        off_m = tl.program_id(0) * BLOCK_M
        off_n = tl.program_id(1) * BLOCK_N
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k in tl.range(0, K, BLOCK_K, warp_specialize=WARP_SPECIALIZE):
            a = a_desc.load([off_m, k])
            b = b_desc.load([k, off_n])
            acc = tl.dot(a, b, acc)
        c_desc.store([off_m, off_n], acc.to(c_desc.dtype))

    return tma_matmul


@dataclass
class Compiled:
    label: str
    ptx: str | None
    cubin: bytes | None     # Triton's own (bundled ptxas)
    shared: int             # Triton's dynamic shared memory
    entry: str
    warps: int              # every warp of the CTA (Gluon adds its worker warps, rounded up)
    error: str = ""


def compile_triton(bm: int, bn: int, bk: int, stages: int, warps: int, ws: bool) -> Compiled:
    """One Triton compile for sm_90a (GPUTarget cuda 90: Triton appends the `a`)."""
    from triton.compiler import ASTSource

    label = f"{bm}x{bn}x{bk} w{warps} s{stages}" + (" ws" if ws else "")
    sig = {"a_desc": f"tensordesc<fp16[{bm}, {bk}]>", "b_desc": f"tensordesc<fp16[{bk}, {bn}]>",
           "c_desc": f"tensordesc<fp32[{bm}, {bn}]>", "K": "i32", "BLOCK_M": "constexpr",
           "BLOCK_N": "constexpr", "BLOCK_K": "constexpr", "WARP_SPECIALIZE": "constexpr"}
    consts = {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "WARP_SPECIALIZE": ws}
    return _compile(label, ASTSource(_kernel(), sig, consts), dict(num_warps=warps, num_stages=stages))


def compile_gluon(bm: int, bn: int, bk: int, stages: int, warps: int) -> Compiled:
    """bench/gluon_ws_matmul.py: `warps` consumer warps plus one producer warp (40 registers)."""
    from triton.experimental.gluon._runtime import GluonASTSource

    import gluon_ws_matmul as g

    label = f"gluon {bm}x{bn}x{bk} w{warps}+1 s{stages}"
    src = GluonASTSource(g.ws_matmul, g.signature(bm, bn, bk),
                         {"STAGES": stages, "WARPS": warps, "PRODUCER_REGS": PRODUCER_REGS})
    return _compile(label, src, dict(num_warps=warps))


def _compile(label: str, src, options: dict) -> Compiled:
    import triton
    from triton.backends.compiler import GPUTarget

    triton.knobs.compilation.disable_line_info = True
    # MLIR prints a failing pass's diagnostics (and a whole reproducer) on file descriptor 2:
    # catch them there, so that the table can quote the one line that says what went wrong.
    with tempfile.TemporaryFile(mode="w+") as err:
        saved = os.dup(2)
        sys.stderr.flush()
        os.dup2(err.fileno(), 2)
        try:
            k = triton.compile(src, target=GPUTarget("cuda", 90, 32), options=options)
        except Exception as e:
            os.dup2(saved, 2)
            err.seek(0)
            said = [ln for ln in (err.read() + "\n" + str(e)).splitlines() if " error: " in ln]
            why = said[0].split(" error: ", 1)[1] if said else str(e).splitlines()[-1]
            return Compiled(label, None, None, 0, "", 0, f"Triton failed: {why[:200]}")
        finally:
            os.dup2(saved, 2)
            os.close(saved)
    return Compiled(label, k.asm["ptx"], k.asm["cubin"], k.metadata.shared, k.metadata.name, k.metadata.num_warps)


HEAD = (f"{'kernel':28s} {'assembler':13s} {'regs':>4s} {'spill':>5s} {'smem KB':>7s} {'CTA/SM':>6s} "
        f"{'limit':>9s} | {'HGMMA':>5s} {'shape':>9s} | per k-tile: {'hgmma':>5s} {'tma':>4s} {'syncs':>5s} "
        f"{'wg':>4s} {'bar':>4s} {'other':>5s} {'total':>5s} {'cold':>4s} | {'prod':>4s} {'setmaxnreg':>25s} "
        f"{'notes':>5s}")


def row(label: str, asm: str, regs: int, spill: int, shared: int, threads: int, text: str, log: str,
        block: tuple[int, int, int], consumer_wgs: int, notes: list[str], kernel: str = "") -> str:
    """One table row (`label` blank for a second assembler's row of `kernel`); the full text of
    ptxas's notes goes to `notes`."""
    occ = occupancy("sm_90", regs, shared, threads)
    limit = {"shared memory": "smem", "CTA slots": "ctas"}.get(occ.limiter, occ.limiter)
    found = perf_notes(log)
    notes += [f"{label or kernel} [{asm}]: ({n.code}) {n.text}" for n in found]
    out = (f"{label:28s} {asm:13s} {regs:4d} {spill:5d} {shared / 1024:7.1f} {occ.ctas_per_sm:6d} {limit:>9s} |")
    hs = analyse_sass(text)
    h = hs[0] if hs else None
    if h is None or h.consumer is None:
        return out + " (no SASS: install nvidia-cuda-cuobjdump)" if not text else out + " no HGMMA loop"
    shape = max(h.hgmma_shapes, key=h.hgmma_shapes.get)
    per = hgmma_per_ktile(block, shape, consumer_wgs)
    ktiles = h.consumer.classes["hgmma"] / per
    c = loop_columns(h.consumer, ktiles)
    prod = f"{h.producer.total / ktiles:4.0f}" if h.producer else f"{'-':>4s}"
    maxnreg = h.registers_per_role
    return out + (f" {h.counts['hgmma']:5d} {shape:>9s} |             {c['hgmma']:5.0f} {c['tma']:4.0f} "
                  f"{c['syncs']:5.0f} {c['wg.arr'] + c['wg.dep']:4.0f} {c['bar']:4.0f} {c['other']:5.0f} "
                  f"{c['total']:5.0f} {c['cold']:4d} | {prod} {maxnreg:>25s} {len(found):5d}")


def report() -> list[str]:
    tool = cuobjdump()
    lines = [HEAD, "-" * len(HEAD)]
    notes: list[str] = []
    remarks: list[str] = []
    plain_ptx: dict[tuple, str] = {}
    for bm, bn, bk, stages in TILES:
        for warps in WARPS:
            for ws in (False, True):
                c = compile_triton(bm, bn, bk, stages, warps, ws)
                key = (bm, bn, bk, stages, warps)
                if ws and c.ptx is not None and plain_ptx.get(key) == c.ptx:
                    remarks.append(f"{c.label}: PTX identical to the kernel without warp_specialize "
                                   "(tl.range's docstring: warp specialization is only supported on Blackwell)")
                if not ws and c.ptx is not None:
                    plain_ptx[key] = c.ptx
                lines += rows_of(c, (bm, bn, bk), warps // 4, tool, notes)
        for warps in WARPS:
            lines += rows_of(compile_gluon(bm, bn, bk, stages, warps), (bm, bn, bk), warps // 4, tool, notes)
    lines += ["", "per k-tile: one pass of the consumer loop (the loop with the most HGMMA) divided by the "
              "64-wide k-tiles it covers (its HGMMA over the HGMMA one warpgroup issues per k-tile), i.e. what "
              "each consumer warpgroup issues per k-tile (with 8 warps both warpgroups run the loop); "
              "'wg' = WARPGROUP.ARRIVE + WARPGROUP.DEPBAR (wgmma fence and wait); 'cold' = instructions of "
              "the loop's out-of-line mbarrier retry path (not per k-tile); 'prod' = the producer loop of a "
              "warp-specialised kernel (- when the consumer loop issues its own TMA loads); 'setmaxnreg' = "
              "the register budget each loop runs under: the last setmaxnreg on the blocks that dominate "
              "it (- when the SASS has none)."]
    lines += remarks
    lines += notes or ["no C75xx performance notes"]
    if any("(C7504)" in n for n in notes):
        lines.append("C7504 comes from compiling the PTX as a relocatable unit (`ptxas -c`, which nvJitLink "
                     "does): the same PTX through whole-program ptxas (Triton's, or ptxas 13.0 without -c) "
                     "keeps setmaxnreg, so a kernel that relies on setmaxnreg needs that path.")
    return lines


def rows_of(c: Compiled, block: tuple[int, int, int], consumer_wgs: int, tool: str | None,
            notes: list[str]) -> list[str]:
    """A compiled kernel's rows: assembled by ptxgen's assembler, then as Triton assembled it."""
    import ptxgen.runtime.assemble as asm

    if c.error:
        return [f"{c.label:28s} {c.error}"]
    threads = 32 * c.warps
    a = asm.assemble(c.ptx, "sm_90a", c.entry)
    r = a.resources
    out = [row(c.label, a.assembler, r.registers, r.spill_bytes, c.shared + r.shared_bytes, threads,
               sass_text(a.cubin, tool) if tool else "", a.log, block, consumer_wgs, notes)]
    own = triton_ptxas_log(c.ptx)
    if own is not None:
        regs, spill, log = own
        out.append(row("", "triton-ptxas", regs, spill, c.shared + r.shared_bytes, threads,
                       sass_text(c.cubin, tool) if tool else "", log, block, consumer_wgs, notes, kernel=c.label))
    return out


def triton_ptxas_log(ptx: str) -> tuple[int, int, str] | None:
    """Registers, spill bytes and the -v log of the ptxas Triton uses, on the same PTX (what
    Triton's own cubin was made with), or None when that ptxas is not found."""
    from ptxgen.runtime.ptxlog import parse_resources

    exe = triton_ptxas()
    if exe is None:
        return None

    with tempfile.TemporaryDirectory() as d:
        src = Path(d) / "k.ptx"
        src.write_text(ptx)
        out = subprocess.run([str(exe), "-arch=sm_90a", "-v", "-o", str(Path(d) / "k.cubin"), str(src)],
                             capture_output=True, text=True)
    log = out.stdout + out.stderr
    entry = next((ln.split("'")[1] for ln in log.splitlines() if "Compiling entry function" in ln), "")
    r = parse_resources(log, entry)
    return r.registers, r.spill_bytes, log


def triton_ptxas() -> Path | None:
    """The ptxas Triton itself runs for sm_90a (3.9 bundles two and uses `ptxas-blackwell`, the
    newer, for sm_90 and up)."""
    try:
        from triton.backends.nvidia.compiler import get_ptxas

        exe = Path(get_ptxas(90).path)
    except Exception:
        return None
    return exe if exe.exists() else None


def versions() -> str:
    import triton

    exe = triton_ptxas()
    bundled = "?"
    if exe is not None:
        out = subprocess.run([str(exe), "--version"], capture_output=True, text=True).stdout.strip().splitlines()
        bundled = out[-1].split()[-1] if out else "?"
    return f"Triton {triton.__version__} (its ptxas for sm_90a: {bundled}); {tools()}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=None, help="folder for <date>-sass-triton-sm_90a-<commit>.txt")
    args = ap.parse_args(argv)
    if os.environ.get("TRITON_DEFAULT_FP_FUSION") is None:
        os.environ["TRITON_DEFAULT_FP_FUSION"] = "1"  # Triton 3.9's default, without its warning
    today = _dt.datetime.now(_dt.timezone.utc)
    lines = [f"# {COMMAND}", f"# at {commit()} on {today:%Y-%m-%d %H:%M} UTC, {platform.node() or 'unknown host'} "
             f"({platform.machine()}, no GPU needed); {versions()}",
             "# Triton TMA matmul (tensor descriptors), f16 x f16 -> f32, A [M, K], B [K, N], sm_90a", *report()]
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if args.out is not None:
        out = args.out
        out.mkdir(parents=True, exist_ok=True)
        path = out / f"{today:%Y-%m-%d}-sass-triton-sm_90a-{commit()}.txt"
        path.write_text(text)
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
