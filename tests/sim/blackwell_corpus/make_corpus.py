"""Regenerate the Blackwell PTX corpus: Triton and Gluon (not ptxgen) compile for sm_100a.

    pip install triton==3.9.0          # dev-only; CI never runs this script
    TRITON_DEFAULT_FP_FUSION=1 PYTHONPATH=$PWD python tests/sim/blackwell_corpus/make_corpus.py

Writes <name>.ptx and <name>.json per entry next to this file, in the Hopper corpus's format
(hopper_corpus/make_corpus.py does the compiling and recording; this script lists the entries).
"""
from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import triton
from triton.backends.compiler import GPUTarget

HERE = Path(__file__).resolve().parent


def _load(path: Path, name: str):
    """Import a file under its own name: both corpora have a make_corpus.py and a harness.py."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


#: The Hopper script (compile_entry/record_entry/write_entry); it imports the Hopper corpus's
#: kernels.py (the plain matmuls, compiled here for sm_100a) as `kernels`.
hopper_make = _load(HERE.parent / "hopper_corpus" / "make_corpus.py", "hopper_make_corpus")
hopper_kernels = sys.modules["kernels"]
kernels_sm100 = _load(HERE / "kernels_sm100.py", "kernels_sm100")
harness = _load(HERE / "harness.py", "blackwell_harness")    # this corpus's feature table

BLACKWELL = hopper_make.Corpus(
    HERE, GPUTarget("cuda", 100, 32), "cuda sm_100a (GPUTarget('cuda', 100, 32))",
    "TRITON_DEFAULT_FP_FUSION=1 PYTHONPATH=$PWD python tests/sim/blackwell_corpus/make_corpus.py",
    harness.features_of, harness.descriptor_features)
NP_DTYPE = {**hopper_make.NP_DTYPE, "fp8e5": "float8_e5m2", "i8": "int8", "i32": "int32"}
#: The problem shapes: no tile divides M or N. TMA needs 16-byte row strides; the block-scaled
#: entries need K a multiple of BLOCK_K (scales cover 32 elements, an fp4 byte two).
SHAPE_PTR = dict(M=200, N=136, K=100)
SHAPE_TMA = dict(M=200, N=136, K=104)
SHAPE_TMA_FP8 = dict(M=200, N=144, K=160)
SHAPE_SCALED = dict(M=200, N=136, K=256)
GRID_MN = ["cdiv(M, BLOCK_M)", "cdiv(N, BLOCK_N)", "1"]


def write(name: str, fn, sig: dict, constexprs: dict, **kw) -> None:
    hopper_make.write_entry(name, fn, sig, constexprs, corpus=BLACKWELL, **kw)


def tma_sig(dt: str, odt: str, bm: int, bn: int, bk: int, bt: bool = False) -> dict:
    b_box = f"[{bn}, {bk}]" if bt else f"[{bk}, {bn}]"
    return {"a_desc": f"tensordesc<{dt}[{bm}, {bk}]>", ("bt_desc" if bt else "b_desc"): f"tensordesc<{dt}{b_box}>",
            "c_desc": f"tensordesc<{odt}[{bm}, {bn}]>", "K": "i32"}


def matmul_arrays(dt: str, odt: str, bt: bool = False) -> dict:
    return dict(kind="matmul", a=NP_DTYPE[dt], b=NP_DTYPE[dt], c=NP_DTYPE[odt], b_layout="NxK" if bt else "KxN")


def expect_hazard(name: str, kind: str, line_text: str, why: str) -> None:
    """Record in <name>.json that the simulator must report `kind` at the PTX line `line_text`
    (a race in the PTX Triton wrote) instead of matching numpy."""
    path = HERE / f"{name}.json"
    doc = json.loads(path.read_text())
    lines = [i + 1 for i, text in enumerate((HERE / f"{name}.ptx").read_text().splitlines())
             if text.strip() == line_text.strip()]
    if len(lines) != 1:
        raise SystemExit(f"{name}: expected one line {line_text!r}, found {lines}")
    doc["expect_hazard"] = dict(kind=kind, line=lines[0], why=why)
    path.write_text(json.dumps(doc, indent=1) + "\n")


def write_triton_entries() -> None:
    tile = lambda bm, bn, bk: {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk}  # noqa: E731
    # TMA matmuls: tcgen05.mma kind::f16 from descriptors, TMEM accumulator, TMA epilogue.
    for dt, odt, bm, bn, bk, w, s in (("fp16", "fp16", 128, 128, 64, 4, 3),
                                      ("bf16", "bf16", 128, 256, 64, 8, 2),
                                      ("fp16", "fp32", 128, 64, 64, 4, 2)):
        write(f"dot_tma_{dt}_{bm}x{bn}x{bk}_w{w}_s{s}", hopper_kernels.dot_tma_kernel, tma_sig(dt, odt, bm, bn, bk),
              tile(bm, bn, bk), num_warps=w, num_stages=s, problem=SHAPE_TMA, grid=GRID_MN, aligned=set(),
              arrays=matmul_arrays(dt, odt))
    # fp8 (tcgen05 kind::f8f6f4) with B as [N, K].
    write("dot_tma_fp8e4nv_128x128x64_w4_s3", hopper_kernels.dot_tma_bt_kernel,
          tma_sig("fp8e4nv", "fp16", 128, 128, 64, bt=True), tile(128, 128, 64), num_warps=4, num_stages=3,
          problem=SHAPE_TMA_FP8, grid=GRID_MN, aligned=set(), arrays=matmul_arrays("fp8e4nv", "fp16", bt=True))
    # Warp-specialised K loop.
    write("dot_tma_ws_fp16_128x128x64_w4_s3", hopper_kernels.dot_tma_ws_kernel, tma_sig("fp16", "fp16", 128, 128, 64),
          tile(128, 128, 64), num_warps=4, num_stages=3, problem=SHAPE_TMA, grid=GRID_MN, aligned=set(),
          arrays=matmul_arrays("fp16", "fp16"))
    # Masked pointer loads at odd shapes (fp16, and fp8 e5m2 with f32 out).
    ptr_sig = ["M", "N", "K", "stride_am", "stride_ak", "stride_bk", "stride_bn", "stride_cm", "stride_cn"]
    for dt, odt, bm, bn, bk, w, s in (("fp16", "fp16", 128, 64, 32, 4, 3), ("fp8e5", "fp32", 128, 64, 64, 4, 2)):
        sig = {"a_ptr": "*" + dt, "b_ptr": "*" + dt, "c_ptr": "*" + odt, **{n: "i32" for n in ptr_sig}}
        write(f"dot_ptr_{dt}_{bm}x{bn}x{bk}_w{w}_s{s}", hopper_kernels.dot_ptr_kernel, sig, tile(bm, bn, bk),
              num_warps=w, num_stages=s, problem=SHAPE_PTR, grid=GRID_MN, aligned={"a_ptr", "b_ptr", "c_ptr"},
              arrays=matmul_arrays(dt, odt))
    # int8 (tcgen05 kind::i8, int32 accumulator) at the pointer entries' odd shapes.
    sig = {"a_ptr": "*i8", "b_ptr": "*i8", "c_ptr": "*i32", **{n: "i32" for n in ptr_sig}}
    write("dot_ptr_int8_128x64x64_w4_s2", kernels_sm100.dot_ptr_int8_kernel, sig, tile(128, 64, 64), num_warps=4,
          num_stages=2, problem=SHAPE_PTR, grid=GRID_MN, aligned={"a_ptr", "b_ptr", "c_ptr"},
          arrays=dict(kind="matmul", a="int8", b="int8", c="int32", b_layout="KxN"))
    # tf32 (kind::tf32): f32 inputs that tf32 holds exactly, so the reference is the f32 one. With B
    # as [N, K] (K-major) the MMA reads the TMA tile; with B as [K, N] Triton 3.9 transposes it through
    # registers into one shared buffer, which the next iteration overwrites while the MMA that reads
    # it may still run (it waits only for the MMA before): a race the simulator must report.
    write("dot_tma_tf32_bt_128x64x32_w4_s3", hopper_kernels.dot_tma_bt_kernel,
          tma_sig("fp32", "fp32", 128, 64, 32, bt=True), tile(128, 64, 32), num_warps=4, num_stages=3,
          problem=SHAPE_TMA, grid=GRID_MN, aligned=set(),
          arrays=dict(matmul_arrays("fp32", "fp32", bt=True), inputs="tf32"))
    write("dot_tma_tf32_128x64x32_w4_s3", hopper_kernels.dot_tma_kernel, tma_sig("fp32", "fp32", 128, 64, 32),
          tile(128, 64, 32), num_warps=4, num_stages=3, problem=SHAPE_TMA, grid=GRID_MN, aligned=set(),
          arrays=dict(matmul_arrays("fp32", "fp32"), inputs="tf32"))
    expect_hazard("dot_tma_tf32_128x64x32_w4_s3", "async-pending", "st.shared.b32 \t[%r9+81920], %r110;",
                  "Triton 3.9 transposes B ([K, N] f32) through registers into one shared buffer that every "
                  "K step's tcgen05.mma reads, and overwrites it after waiting only for the previous step's "
                  "MMA commit, not the one still reading it")
    # tl.dot_scaled: mxfp8 (e4m3) and mxfp4 (e2m1, two per byte along K), e8m0 scales per 32 of K.
    for fmt, bk in (("e4m3", 128), ("e2m1", 128)):
        sig = {"a_ptr": "*u8", "a_scale_ptr": "*u8", "b_ptr": "*u8", "b_scale_ptr": "*u8", "c_ptr": "*fp32",
               **{n: "i32" for n in ("M", "N", "K", "stride_am", "stride_bk", "stride_cm")}}
        write(f"dot_scaled_{fmt}_128x128x{bk}_w4_s2", kernels_sm100.dot_scaled_ptr_kernel, sig,
              {"FORMAT": fmt, **tile(128, 128, bk)}, num_warps=4, num_stages=2, problem=SHAPE_SCALED, grid=GRID_MN,
              aligned={"a_ptr", "a_scale_ptr", "b_ptr", "b_scale_ptr", "c_ptr"},
              arrays=dict(kind="scaled_matmul", format=fmt, c="float32"))
    # A persistent TMA matmul (static tile walk) and a 2-CTA cluster one.
    write("dot_tma_persistent_fp16_128x128x64_w4_s3", kernels_sm100.dot_tma_persistent_kernel,
          {**{k: v for k, v in tma_sig("fp16", "fp16", 128, 128, 64).items() if k != "K"},
           "M": "i32", "N": "i32", "K": "i32"},
          {**tile(128, 128, 64), "NUM_SMS": 3}, num_warps=4, num_stages=3, problem=SHAPE_TMA,
          grid=["NUM_SMS", "1", "1"], aligned=set(), arrays=matmul_arrays("fp16", "fp16"))
    write("dot_tma_fp16_256x128x64_w4_s3_ctas2", hopper_kernels.dot_tma_kernel, tma_sig("fp16", "fp16", 256, 128, 64),
          tile(256, 128, 64), num_warps=4, num_stages=3, num_ctas=2, problem=SHAPE_TMA,
          grid=["cdiv(M, BLOCK_M) * 2", "cdiv(N, BLOCK_N)", "1"], aligned=set(), arrays=matmul_arrays("fp16", "fp16"))


def gluon_desc(dt: str, shape: list[int], cga_layout=None, fp4_padded: bool = False) -> str:
    """A Gluon descriptor type: the shared layout travels in the signature."""
    from triton.experimental.gluon import language as gl
    ty = {"fp16": "float16", "fp32": "float32", "u8": "uint8", "fp8e4nv": "float8e4nv"}[dt]
    layout = gl.NVMMASharedLayout.get_default_for(shape, getattr(gl, ty), cga_layout=cga_layout,
                                                  fp4_padded=fp4_padded)
    return f"tensordesc<{dt}[{', '.join(map(str, shape))}],{layout!r}>"


def write_gluon(name: str, fn, signature: dict, constexprs: dict, *, num_warps: int, tile: dict, grid: list[str],
                problem: dict, arrays: dict, num_ctas: int = 1, note: str = "") -> None:
    """Compile a Gluon kernel (GluonASTSource) and record it like a Triton entry."""
    from triton.experimental.gluon._runtime import GluonASTSource
    triton.knobs.compilation.disable_line_info = True
    full = {**signature, **{k: "constexpr" for k in constexprs}}
    k = triton.compile(GluonASTSource(fn, full, constexprs), target=BLACKWELL.target,
                       options=dict(num_warps=num_warps, num_ctas=num_ctas))
    hopper_make.record_entry(name, k, fn, signature, constexprs, num_warps=num_warps,
                             num_stages=constexprs.get("STAGES", 1), problem=problem, grid=grid, arrays=arrays,
                             num_ctas=num_ctas, corpus=BLACKWELL,
                             extra=dict(source="tests/sim/blackwell_corpus/gluon_kernels.py (Gluon)", tile=tile,
                                        **({"note": note} if note else {})))


def write_gluon_entries() -> None:
    g = _load(HERE / "gluon_kernels.py", "gluon_kernels")
    bm, bn, bk = 128, 128, 64
    f32_out = dict(kind="matmul", a="float16", b="float16", c="float32", b_layout="KxN")
    f16_out = dict(f32_out, c="float16")
    tile = dict(BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk)
    write_gluon("gluon_tcgen05_ws_fp16_128x128x64_w4_s3", g.tcgen05_ws_matmul,
                {"a_desc": gluon_desc("fp16", [bm, bk]), "b_desc": gluon_desc("fp16", [bk, bn]),
                 "c_desc": gluon_desc("fp32", [bm, bn]), "K": "i32"}, {"STAGES": 3}, num_warps=4, tile=tile,
                grid=GRID_MN, problem=SHAPE_TMA, arrays=f32_out)
    write_gluon("gluon_clc_fp16_128x128x64_w4", g.clc_matmul,
                {"a_desc": gluon_desc("fp16", [bm, bk]), "b_desc": gluon_desc("fp16", [bk, bn]),
                 "c_desc": gluon_desc("fp16", [bm, bn]), "M": "i32", "N": "i32", "K": "i32"}, {}, num_warps=4,
                tile=tile, grid=["cdiv(M, BLOCK_M) * cdiv(N, BLOCK_N)", "1", "1"], problem=SHAPE_TMA, arrays=f16_out,
                note="one program per tile; programs that finish cancel unlaunched ones (CLC) and take their tile")
    write_gluon("gluon_2cta_fp16_256x128x64_w4", g.two_cta_matmul,
                {"a_desc": gluon_desc("fp16", [2 * bm, bk], [(1, 0)]), "b_desc": gluon_desc("fp16", [bk, bn], [(0, 1)]),
                 "c_desc": gluon_desc("fp16", [2 * bm, bn], [(1, 0)]), "K": "i32"}, {}, num_warps=4, num_ctas=2,
                tile=dict(BLOCK_M=2 * bm, BLOCK_N=bn, BLOCK_K=bk), grid=["cdiv(M, BLOCK_M) * 2", "cdiv(N, BLOCK_N)", "1"],
                problem=SHAPE_TMA, arrays=f16_out)
    write_gluon_scaled_entries(g)
    write_gluon_scaled_cp_entries(g)
    write_gluon_2cta_scaled_entry(g)
    write_gluon_2cta_ts_entry(g)


def write_gluon_2cta_ts_entry(g=None) -> None:
    """The 2-CTA f16 matmul with A in tensor memory (`tcgen05.mma.cta_group::2 … [a-tmem]`;
    `make_corpus.py write_gluon_2cta_ts_entry` regenerates only this entry)."""
    g = g or _load(HERE / "gluon_kernels.py", "gluon_kernels")
    bm, bn, bk = 128, 128, 64
    write_gluon("gluon_2cta_ts_fp16_256x128x64_w4", g.two_cta_ts_matmul,
                {"a_desc": gluon_desc("fp16", [2 * bm, bk], [(1, 0)]), "b_desc": gluon_desc("fp16", [bk, bn], [(0, 1)]),
                 "c_desc": gluon_desc("fp16", [2 * bm, bn], [(1, 0)]), "K": "i32"}, {}, num_warps=4, num_ctas=2,
                tile=dict(BLOCK_M=2 * bm, BLOCK_N=bn, BLOCK_K=bk), grid=["cdiv(M, BLOCK_M) * 2", "cdiv(N, BLOCK_N)", "1"],
                problem=SHAPE_TMA, arrays=dict(kind="matmul", a="float16", b="float16", c="float16", b_layout="KxN"))


def write_gluon_scaled_entries(g) -> None:
    """tcgen05_mma_scaled from TMA-loaded operands (B as [N, K]) with pointer-loaded scales:
    nvfp4 (e2m1 x e2m1, ue4m3 scales per 16: kind::mxf4nvf4.block16), mxfp4 (kind::mxf4) and
    mxfp8 x mxfp4 (kind::mxf8f6f4, the fp4 operand padded in shared memory by its TMA map)."""
    for name, afmt, bfmt, vec, scale in (("nvfp4", "e2m1", "e2m1", 16, "ue4m3"), ("mxfp4", "e2m1", "e2m1", 32, "ue8m0"),
                                         ("mxfp8xmxfp4", "e4m3", "e2m1", 32, "ue8m0")):
        mixed = afmt != bfmt
        bk = 128 if mixed else 256
        dts = {f: ("u8" if f == "e2m1" else "fp8e4nv") for f in (afmt, bfmt)}
        width = {f: bk // (2 if f == "e2m1" else 1) for f in (afmt, bfmt)}
        sdt = "fp8e4nv" if scale == "ue4m3" else "u8"
        sig = {"a_desc": gluon_desc(dts[afmt], [128, width[afmt]], fp4_padded=mixed and afmt == "e2m1"),
               "b_desc": gluon_desc(dts[bfmt], [128, width[bfmt]], fp4_padded=mixed and bfmt == "e2m1"),
               "c_desc": gluon_desc("fp32", [128, 128]), "a_scale_ptr": "*" + sdt, "b_scale_ptr": "*" + sdt,
               "M": "i32", "N": "i32", "K": "i32"}
        constexprs = {"A_FMT": afmt, "B_FMT": bfmt, "VEC": vec, "ONE": 1.0 if scale == "ue4m3" else 127}
        write_gluon(f"gluon_mma_scaled_{name}_128x128x{bk}_w4", g.mma_scaled_matmul, sig, constexprs, num_warps=4,
                    tile=dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=bk), grid=GRID_MN, problem=dict(M=200, N=136, K=2 * bk),
                    arrays=dict(kind="scaled_matmul_tma", a_format=afmt, b_format=bfmt, vec=vec, scale=scale,
                                c="float32"))


def write_gluon_2cta_scaled_entry(g=None) -> None:
    """2-CTA mxfp8 tcgen05_mma_scaled (kind::mxf8f6f4.block_scale.block32 with cta_group::2):
    A and its scales split along M over the pair, B [N, K] along N, B's scales whole in each CTA;
    the scales through registers (tcgen05.st), and TMA-loaded then tcgen05.cp.cta_group::2
    (`make_corpus.py write_gluon_2cta_scaled_entry` regenerates only these two entries)."""
    g = g or _load(HERE / "gluon_kernels.py", "gluon_kernels")
    sig = {"a_desc": gluon_desc("fp8e4nv", [256, 128], [(1, 0)]), "b_desc": gluon_desc("fp8e4nv", [128, 128], [(1, 0)]),
           "c_desc": gluon_desc("fp32", [256, 128], [(1, 0)]), "a_scale_ptr": "*u8", "b_scale_ptr": "*u8",
           "M": "i32", "N": "i32", "K": "i32"}
    write_gluon("gluon_2cta_scaled_mxfp8_256x128x128_w4", g.two_cta_scaled_matmul, sig, {"ONE": 127}, num_warps=4,
                num_ctas=2, tile=dict(BLOCK_M=256, BLOCK_N=128, BLOCK_K=128),
                grid=["cdiv(M, BLOCK_M) * 2", "cdiv(N, BLOCK_N)", "1"], problem=dict(M=200, N=136, K=256),
                arrays=dict(kind="scaled_matmul_tma", a_format="e4m3", b_format="e4m3", vec=32, scale="ue8m0",
                            c="float32"))
    sig = {**{k: sig[k] for k in ("a_desc", "b_desc", "c_desc")},
           "a_scale_desc": gluon_desc("u8", [1, 2, 1, 2, 256], [(0, 1, 0, 0, 0)]),
           "b_scale_desc": gluon_desc("u8", [1, 1, 1, 2, 256], [(0, 0, 0, 0, 0)]), "K": "i32"}
    write_gluon("gluon_2cta_scaled_cp_mxfp8_256x128x128_w4", g.two_cta_scaled_cp_matmul, sig, {}, num_warps=4,
                num_ctas=2, tile=dict(BLOCK_M=256, BLOCK_N=128, BLOCK_K=128),
                grid=["cdiv(M, BLOCK_M) * 2", "cdiv(N, BLOCK_N)", "1"], problem=dict(M=200, N=136, K=256),
                arrays=dict(kind="scaled_matmul_tma", a_format="e4m3", b_format="e4m3", vec=32, scale="ue8m0",
                            scale_layout="packed_block", c="float32"))


def write_gluon_scaled_cp_entries(g) -> None:
    """tcgen05_mma_scaled with both scale tiles TMA-loaded in the packed-block layout
    [rows/128, K/(4 vec), 32, 4, 4] (as a [1, rows/128, K/(4 vec), 2, 256] map, no swizzle) and copied
    to tensor memory with tcgen05.cp (.32x128b.warpx4). Gluon finds no tcgen05.cp layout for the
    swizzled e4m3 (nvfp4) scale tile, so mxfp8 and mxfp4 only."""
    for name, fmt, bk in (("mxfp8", "e4m3", 128), ("mxfp4", "e2m1", 256)):
        dt, width, rep_k = ("u8", bk // 2, bk // 128) if fmt == "e2m1" else ("fp8e4nv", bk, bk // 128)
        sig = {"a_desc": gluon_desc(dt, [128, width]), "b_desc": gluon_desc(dt, [128, width]),
               "c_desc": gluon_desc("fp32", [128, 128]), "a_scale_desc": gluon_desc("u8", [1, 1, rep_k, 2, 256]),
               "b_scale_desc": gluon_desc("u8", [1, 1, rep_k, 2, 256]), "K": "i32"}
        write_gluon(f"gluon_mma_scaled_cp_{name}_128x128x{bk}_w4", g.mma_scaled_cp_matmul, sig,
                    {"A_FMT": fmt, "B_FMT": fmt, "VEC": 32}, num_warps=4,
                    tile=dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=bk), grid=GRID_MN, problem=dict(M=200, N=136, K=2 * bk),
                    arrays=dict(kind="scaled_matmul_tma", a_format=fmt, b_format=fmt, vec=32, scale="ue8m0",
                                scale_layout="packed_block", c="float32"))


def write_gluon_scaled_entries_only() -> None:
    """Only the block-scaled Gluon entries (`make_corpus.py write_gluon_scaled_entries_only`)."""
    g = _load(HERE / "gluon_kernels.py", "gluon_kernels")
    write_gluon_scaled_entries(g)
    write_gluon_scaled_cp_entries(g)


def main() -> None:
    only = set(sys.argv[1:])
    for part in (write_triton_entries, write_gluon_entries, write_gluon_scaled_entries_only,
                 write_gluon_2cta_scaled_entry, write_gluon_2cta_ts_entry):
        if (not only and part in (write_triton_entries, write_gluon_entries)) or part.__name__ in only:
            part()


if __name__ == "__main__":
    main()
