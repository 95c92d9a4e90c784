"""Regenerate the Hopper PTX corpus: Triton (not ptxgen) compiles kernels.py for sm_90a.

    pip install triton==3.9.0          # dev-only; CI never runs this script
    TRITON_DEFAULT_FP_FUSION=1 python tests/sim/hopper_corpus/make_corpus.py

Writes <name>.ptx and <name>.json per entry next to this file. The json says how to launch the
PTX (parameters in order with their roles, constexprs, block, grid, shared bytes, each tensor
descriptor's box and swizzle) and which Hopper features the simulator needs for it (`needs`),
so tests/sim/test_hopper_corpus.py can run it without Triton.
"""
from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import kernels  # noqa: E402  (the Triton sources live beside this script)
from harness import features_of  # noqa: E402  (one feature table for the script and the harness)

TARGET = GPUTarget("cuda", 90, 32)


@dataclass(frozen=True)
class Corpus:
    """Where a corpus is written and for which GPU: the Hopper corpus here, the Blackwell one in
    tests/sim/blackwell_corpus/make_corpus.py (same json format, its own feature table)."""
    out_dir: Path
    target: GPUTarget
    target_text: str
    command: str
    features_of: Callable[[str], list[str]]
    #: features a json's descriptors need beyond the PTX's instructions (the Blackwell fp4 maps)
    descriptor_features: Callable[[dict], list[str]] = lambda descs: []


HOPPER = Corpus(HERE, TARGET, "cuda sm_90a (GPUTarget('cuda', 90, 32))",
                "TRITON_DEFAULT_FP_FUSION=1 python tests/sim/hopper_corpus/make_corpus.py", features_of)
#: Triton dtype name -> the name numpy/ml_dtypes (and the harness) use.
NP_DTYPE = {"fp16": "float16", "bf16": "bfloat16", "fp8e4nv": "float8_e4m3fn", "fp32": "float32"}
#: Triton's swizzle code in tensordesc_meta -> TensorMap swizzle name.
SWIZZLE = {0: "none", 1: "32B", 2: "64B", 3: "128B"}
#: The problem every matmul entry is tested on: no tile of the corpus divides it. The TMA entries
#: need 16-byte global row strides (K and N multiples of 16 bytes), the fp8 ones in 1-byte elements.
SHAPE_PTR = dict(M=200, N=136, K=100)
SHAPE_TMA = dict(M=200, N=136, K=104)
SHAPE_TMA_FP8 = dict(M=200, N=144, K=112)

def attrs_for(signature: dict[str, str], aligned: set[str]) -> dict:
    """tt.divisibility=16 on the named parameters, as Triton's launcher specialises 16-byte
    aligned pointers (numpy and torch allocations are)."""
    names = list(signature)
    return {(names.index(n),): [["tt.divisibility", 16]] for n in aligned}


def needs_of(ptx: str) -> list[str]:
    """The Hopper features the PTX uses (harness.FEATURE_OPCODES), from its instruction opcodes."""
    return features_of(ptx)


def entry_params(ptx: str, entry: str) -> list[dict]:
    """The .param declarations of `entry`, in order: name, type, and for arrays align/bytes."""
    m = re.search(r"\.entry\s+" + re.escape(entry) + r"\s*\((.*?)\)", ptx, re.S)
    out = []
    for decl in m.group(1).split(","):
        decl = " ".join(decl.split())
        arr = re.fullmatch(r"\.param \.align (\d+) \.b8 (\w+)\[(\d+)\]", decl)
        if arr:
            out.append(dict(name=arr.group(2), type="b8", align=int(arr.group(1)), bytes=int(arr.group(3))))
            continue
        sc = re.fullmatch(r"\.param \.(\w+)(?: \.ptr(?: \.\w+)*(?: \.align \d+)?)? (\w+)", decl)
        out.append(dict(name=sc.group(2), type=sc.group(1)))
    return out


def roles_of(signature: dict[str, str], constexprs: dict) -> list[str]:
    """Roles of the kernel's runtime parameters in PTX order: a tensor descriptor expands to its
    128-byte map, then its shape (i32 each), then its strides (i64 each, in elements)."""
    roles = []
    for name, ty in signature.items():
        if name in constexprs:
            continue
        if ty.startswith("tensordesc"):
            # "tensordesc<fp16[128, 64]>" or, from Gluon, "tensordesc<fp16[128, 64],NVMMASharedLayout(...)>"
            rank = re.search(r"\[([^\]]*)\]", ty).group(1).count(",") + 1
            roles += [f"tensormap:{name}"] + [f"shape:{name}:{d}" for d in range(rank)] \
                + [f"stride:{name}:{d}" for d in range(rank)]
        elif ty.startswith("*"):
            roles.append(f"pointer:{name}")
        else:
            roles.append(f"scalar:{name}")
    return roles


def compile_entry(name: str, fn, signature: dict[str, str], constexprs: dict, num_warps: int,
                  num_stages: int, aligned: set[str], line_info: bool, num_ctas: int = 1,
                  corpus: Corpus = HOPPER):
    """Triton's own compile. Line info (.loc/.file and the DWARF .section blocks) is off except
    where an entry asks for it: it is most of the text and says nothing about the kernel."""
    triton.knobs.compilation.disable_line_info = not line_info
    sig = dict(signature)
    for k in constexprs:
        sig[k] = "constexpr"
    src = ASTSource(fn, sig, constexprs, attrs=attrs_for(sig, aligned))
    return triton.compile(src, target=corpus.target, options=dict(num_warps=num_warps, num_stages=num_stages,
                                                                  num_ctas=num_ctas))


def block_threads(ptx: str, num_warps: int) -> int:
    """Threads per CTA: the PTX's .reqntid where Triton set one (a warp-specialised kernel adds
    its partitions' warps to num_warps), else 32 x num_warps."""
    m = re.search(r"\.reqntid\s+(\d+)", ptx)
    return int(m.group(1)) if m else 32 * num_warps


def write_entry(name: str, fn, signature: dict[str, str], constexprs: dict, *, num_warps: int,
                num_stages: int, problem: dict, grid: list[str], aligned: set[str], arrays: dict,
                line_info: bool = False, num_ctas: int = 1, corpus: Corpus = HOPPER) -> None:
    """Compile one Triton entry and write its .ptx and .json. `grid` holds Python expressions over
    the problem and constexprs; `arrays` describes each pointer/descriptor operand for the harness.
    With num_ctas > 1 Triton writes a cluster kernel (.reqnctapercluster num_ctas) that its
    launcher runs on a grid num_ctas times wider in x; `grid` must include that factor."""
    k = compile_entry(name, fn, signature, constexprs, num_warps, num_stages, aligned, line_info, num_ctas, corpus)
    record_entry(name, k, fn, signature, constexprs, num_warps=num_warps, num_stages=num_stages,
                 problem=problem, grid=grid, arrays=arrays, line_info=line_info, num_ctas=num_ctas,
                 corpus=corpus)


def record_entry(name: str, k, fn, signature: dict[str, str], constexprs: dict, *, num_warps: int,
                 num_stages: int, problem: dict, grid: list[str], arrays: dict, line_info: bool = False,
                 num_ctas: int = 1, extra: dict | None = None, corpus: Corpus = HOPPER) -> None:
    """Write a compiled kernel `k` (Triton's or Gluon's CompiledKernel) as <name>.ptx + <name>.json.
    `signature` holds the runtime arguments only; `extra` adds fields (a Gluon entry's tile)."""
    ptx, md = k.asm["ptx"], k.metadata
    entry = md.name
    params = entry_params(ptx, entry)
    roles = roles_of(signature, constexprs)
    if len(params) < len(roles):
        raise SystemExit(f"{name}: {len(params)} PTX params but {len(roles)} roles")
    # Triton appends its global and profile scratch pointers after the kernel's own parameters.
    n_extra = len(params) - len(roles)
    roles += ["scratch:global", "scratch:profile"][:n_extra]
    if len(roles) != len(params):
        raise SystemExit(f"{name}: unexpected trailing params {params[len(roles) - n_extra:]}")
    for p, r in zip(params, roles):
        p["role"] = r
    descs = {}
    meta = list(getattr(md, "tensordesc_meta", None) or [])
    desc_names = [n for n, t in signature.items() if t.startswith("tensordesc")]
    for n, dm in zip(desc_names, meta):
        descs[n] = dict(block_size=list(dm["block_size"]), swizzle=SWIZZLE[dm["swizzle"]],
                        swizzle_code=dm["swizzle"], elem_size=dm["elem_size"])
        if dm.get("fp4_padded"):     # sm_100a: fp4 padded in shared memory (CU_TENSOR_MAP_DATA_TYPE 16U4_ALIGN16B)
            descs[n].update(fp4_padded=True, elem_type=dm["elem_type"])
    extra = extra or {}
    env = {**problem, **constexprs, **extra.get("tile", {}), "cdiv": lambda a, b: -(-a // b)}
    concrete = [int(eval(g, {}, env)) for g in grid]  # noqa: S307 (our own fixed expressions)
    doc = dict(
        entry=entry, kernel=fn.__name__, triton_version=triton.__version__,
        target=corpus.target_text, command=corpus.command,
        line_info=line_info,
        signature=signature, constexprs=constexprs, num_warps=num_warps, num_stages=num_stages,
        **({"num_ctas": num_ctas} if num_ctas > 1 else {}), **extra,
        block=[block_threads(ptx, num_warps), 1, 1], grid_formula=grid, problem=problem, grid=concrete,
        shared=md.shared, global_scratch_size=getattr(md, "global_scratch_size", 0),
        params=params, arrays=arrays, tensor_descriptors=descs,
        needs=sorted(set(corpus.features_of(ptx)) | set(corpus.descriptor_features(descs))),
    )
    (corpus.out_dir / f"{name}.ptx").write_text(ptx)
    (corpus.out_dir / f"{name}.json").write_text(json.dumps(doc, indent=1) + "\n")
    print(f"{name}: {len(ptx)} bytes, shared {md.shared}, needs {doc['needs']}, descs {descs}")


def ptr(d: str) -> str:
    return "*" + d


def main() -> None:
    # Baseline: no Hopper feature at all.
    write_entry("vadd_f32", kernels.vadd_kernel, {"x_ptr": ptr("fp32"), "y_ptr": ptr("fp32"),
                                                  "out_ptr": ptr("fp32"), "n": "i32"},
                {"BLOCK": 256}, num_warps=4, num_stages=1, problem=dict(n=1000),
                grid=["cdiv(n, BLOCK)", "1", "1"], aligned={"x_ptr", "y_ptr", "out_ptr"},
                arrays=dict(kind="vadd", dtype="float32"))
    # The same with Triton's default line info: DWARF sections that ptxas accepts.
    write_entry("vadd_f32_lineinfo", kernels.vadd_kernel, {"x_ptr": ptr("fp32"), "y_ptr": ptr("fp32"),
                                                           "out_ptr": ptr("fp32"), "n": "i32"},
                {"BLOCK": 256}, num_warps=4, num_stages=1, problem=dict(n=1000),
                grid=["cdiv(n, BLOCK)", "1", "1"], aligned={"x_ptr", "y_ptr", "out_ptr"},
                arrays=dict(kind="vadd", dtype="float32"), line_info=True)
    ptr_sig = ["M", "N", "K", "stride_am", "stride_ak", "stride_bk", "stride_bn", "stride_cm", "stride_cn"]
    ptr_tiles = [  # (dtype, out dtype, BM, BN, BK, warps, stages)
        ("fp16", "fp16", 64, 64, 32, 4, 3),
        ("bf16", "bf16", 128, 128, 64, 8, 3),
        ("fp16", "fp32", 128, 64, 64, 4, 4),
        ("fp8e4nv", "fp16", 128, 64, 64, 8, 2),
        ("fp16", "fp16", 16, 16, 16, 1, 2),   # one warp: too small for wgmma, Triton uses mma.sync
        ("bf16", "fp32", 32, 32, 32, 2, 2),   # two warps: mma.sync too
        ("fp8e4nv", "fp16", 16, 16, 32, 1, 2),  # mma.sync on f16 after cvt.rn.f16x2.e4m3x2
    ]
    for dt, odt, bm, bn, bk, w, s in ptr_tiles:
        sig = {"a_ptr": ptr(dt), "b_ptr": ptr(dt), "c_ptr": ptr(odt), **{n: "i32" for n in ptr_sig}}
        write_entry(f"dot_ptr_{dt}_{bm}x{bn}x{bk}_w{w}_s{s}", kernels.dot_ptr_kernel, sig,
                    {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk}, num_warps=w, num_stages=s,
                    problem=SHAPE_PTR, grid=["cdiv(M, BLOCK_M)", "cdiv(N, BLOCK_N)", "1"],
                    aligned={"a_ptr", "b_ptr", "c_ptr"},
                    arrays=dict(kind="matmul", a=NP_DTYPE[dt], b=NP_DTYPE[dt], c=NP_DTYPE[odt], b_layout="KxN"))
    write_entry("tma_copy_fp16_64x64_w4", kernels.tma_copy_kernel,
                {"in_desc": "tensordesc<fp16[64, 64]>", "out_desc": "tensordesc<fp16[64, 64]>"},
                {"BLOCK_M": 64, "BLOCK_N": 64}, num_warps=4, num_stages=1, problem=dict(M=200, N=136),
                grid=["cdiv(M, BLOCK_M)", "cdiv(N, BLOCK_N)", "1"], aligned=set(),
                arrays=dict(kind="copy_plus_one", dtype="float16"))
    tma_tiles = [  # (dtype, out dtype, BM, BN, BK, warps, stages, B as [N, K])
        ("fp16", "fp16", 128, 128, 64, 8, 3, False),
        ("bf16", "bf16", 64, 64, 32, 4, 2, False),
        ("fp16", "fp32", 128, 64, 64, 4, 3, False),
        ("fp8e4nv", "fp16", 128, 64, 64, 4, 4, True),
    ]
    for dt, odt, bm, bn, bk, w, s, bt in tma_tiles:
        b_box = f"[{bn}, {bk}]" if bt else f"[{bk}, {bn}]"
        sig = {"a_desc": f"tensordesc<{dt}[{bm}, {bk}]>", ("bt_desc" if bt else "b_desc"): f"tensordesc<{dt}{b_box}>",
               "c_desc": f"tensordesc<{odt}[{bm}, {bn}]>", "K": "i32"}
        shape = SHAPE_TMA_FP8 if dt.startswith("fp8") else SHAPE_TMA
        write_entry(f"dot_tma_{dt}_{bm}x{bn}x{bk}_w{w}_s{s}",
                    kernels.dot_tma_bt_kernel if bt else kernels.dot_tma_kernel, sig,
                    {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk}, num_warps=w, num_stages=s,
                    problem=shape, grid=["cdiv(M, BLOCK_M)", "cdiv(N, BLOCK_N)", "1"], aligned=set(),
                    arrays=dict(kind="matmul", a=NP_DTYPE[dt], b=NP_DTYPE[dt], c=NP_DTYPE[odt],
                                b_layout="NxK" if bt else "KxN"))
    # A cluster kernel: num_ctas=2 makes each CTA pair of a 2x1x1 cluster share one 128x128 tile
    # (each CTA computes half of N; barrier.cluster before exit). Grid x doubles, as in Triton's launcher.
    write_entry("dot_tma_fp16_128x128x64_w8_s3_ctas2", kernels.dot_tma_kernel,
                {"a_desc": "tensordesc<fp16[128, 64]>", "b_desc": "tensordesc<fp16[64, 128]>",
                 "c_desc": "tensordesc<fp16[128, 128]>", "K": "i32"},
                {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64}, num_warps=8, num_stages=3, num_ctas=2,
                problem=SHAPE_TMA, grid=["cdiv(M, BLOCK_M) * 2", "cdiv(N, BLOCK_N)", "1"], aligned=set(),
                arrays=dict(kind="matmul", a="float16", b="float16", c="float16", b_layout="KxN"))

    write_ws_entries()
    write_gluon_entries()


def write_ws_entries() -> None:
    """Warp-specialised TMA matmul: Triton 3.9 specialises this tile for sm_90a (larger tiles
    failed its NVGPUWarpSpecialization pass or came out without partitions)."""
    dt, bm, bn, bk, w, s = "fp16", 64, 64, 64, 4, 3
    sig = {"a_desc": f"tensordesc<{dt}[{bm}, {bk}]>", "b_desc": f"tensordesc<{dt}[{bk}, {bn}]>",
           "c_desc": f"tensordesc<{dt}[{bm}, {bn}]>", "K": "i32"}
    write_entry(f"dot_tma_ws_{dt}_{bm}x{bn}x{bk}_w{w}_s{s}", kernels.dot_tma_ws_kernel, sig,
                {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk}, num_warps=w, num_stages=s,
                problem=SHAPE_TMA, grid=["cdiv(M, BLOCK_M)", "cdiv(N, BLOCK_N)", "1"], aligned=set(),
                arrays=dict(kind="matmul", a=NP_DTYPE[dt], b=NP_DTYPE[dt], c=NP_DTYPE[dt], b_layout="KxN"))


#: bench/gluon_ws_matmul.py's producer warp keeps this many registers (setmaxnreg.dec), as in
#: bench/triton_hopper.py; the consumers raise theirs.
GLUON_PRODUCER_REGS = 40


def write_gluon_entries() -> None:
    """The Gluon warp-specialised matmul of bench/gluon_ws_matmul.py (one TMA producer warp, 4 or
    8 wgmma consumer warps, setmaxnreg, mbarrier rings), 128x128x64 with bench/triton_hopper.py's
    4 stages: Gluon wrote its partitions itself, unlike Triton 3.9's `warp_specialize`."""
    sys.path.insert(0, str(HERE.parents[2] / "bench"))
    from triton.experimental.gluon._runtime import GluonASTSource
    import gluon_ws_matmul as g
    bm, bn, bk, stages = 128, 128, 64, 4
    full_sig = g.signature(bm, bn, bk)
    for warps in (4, 8):
        constexprs = {"STAGES": stages, "WARPS": warps, "PRODUCER_REGS": GLUON_PRODUCER_REGS}
        signature = {n: t for n, t in full_sig.items() if n not in constexprs}
        triton.knobs.compilation.disable_line_info = True
        k = triton.compile(GluonASTSource(g.ws_matmul, full_sig, constexprs), target=TARGET,
                           options=dict(num_warps=warps))
        record_entry(f"gluon_ws_fp16_{bm}x{bn}x{bk}_w{warps}p1_s{stages}", k, g.ws_matmul, signature,
                     constexprs, num_warps=warps, num_stages=stages, problem=SHAPE_TMA,
                     grid=["cdiv(M, BLOCK_M)", "cdiv(N, BLOCK_N)", "1"], arrays=dict(
                         kind="matmul", a="float16", b="float16", c="float32", b_layout="KxN"),
                     extra=dict(source="bench/gluon_ws_matmul.py (Gluon)",
                                tile=dict(BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk)))


if __name__ == "__main__":
    main()
