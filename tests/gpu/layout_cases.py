"""Hand-written PTX probes for mma.sync, ldmatrix and cp.async, with their expected results.

Each `Case` is run twice by tests/gpu (on hardware with `ptxgen.runtime.launch_ptx` and in
`ptxgen.sim.launch`) and once by tests/runtime (simulator only, no GPU), so the probe PTX and
the expectations derived from docs/ptx_facts/ are checked before any GPU session.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import ml_dtypes
import numpy as np

import layout_facts as F

HEADER = ".version 7.8\n.target sm_80\n.address_size 64\n\n"
POISON32 = np.uint32(0xFFFFFFFF)


@dataclass
class Case:
    name: str
    ptx: str
    entry: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    make: Callable[[int], tuple[list, dict]]  # seed -> (launch args, context for checks)
    out: int  # index of the output argument
    expected: Callable[[dict], np.ndarray]  # what docs/ptx_facts/ predicts for the output argument
    exact: bool = True
    close: Callable[[dict, np.ndarray, np.ndarray], np.ndarray] | None = None  # elementwise ok mask
    dynamic_smem: int = 0
    notes: dict = field(default_factory=dict)


def run(case: Case, launcher: Callable[..., Any], seed: int) -> tuple[list, dict]:
    args, ctx = case.make(seed)
    launcher(case.ptx, case.entry, grid=case.grid, block=case.block, args=args,
             dynamic_smem=case.dynamic_smem)
    return args, ctx


def agree(case: Case, ctx: dict, got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Elementwise agreement mask: bit-exact for exact cases, else the case's tolerance."""
    if case.exact or case.close is None:
        return np.asarray(got) == np.asarray(want)
    return case.close(ctx, got, want)


# -- mma.sync ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class MmaSpec:
    instr: str
    a: F.Fragment
    b: F.Fragment
    c: F.Fragment  # C and D share a layout
    in_kind: str  # f16, bf16, tf32, s8, u8
    acc: str  # f32, f16, s32
    satfinite: bool = False


def _f(rows, cols, bits, nregs, where):
    return F.Fragment(rows, cols, bits, nregs, where)


MMA_SPECS: dict[str, MmaSpec] = {
    "m16n8k16_f32_f16": MmaSpec("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32",
                                _f(16, 16, 16, 4, F.a_m16n8k16_16bit), _f(16, 8, 16, 2, F.b_m16n8k16_16bit),
                                _f(16, 8, 32, 4, F.c_m16n8), "f16", "f32"),
    "m16n8k16_f32_bf16": MmaSpec("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32",
                                 _f(16, 16, 16, 4, F.a_m16n8k16_16bit), _f(16, 8, 16, 2, F.b_m16n8k16_16bit),
                                 _f(16, 8, 32, 4, F.c_m16n8), "bf16", "f32"),
    "m16n8k16_f16_f16": MmaSpec("mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16",
                                _f(16, 16, 16, 4, F.a_m16n8k16_16bit), _f(16, 8, 16, 2, F.b_m16n8k16_16bit),
                                _f(16, 8, 16, 2, F.c_m16n8), "f16", "f16"),
    "m16n8k8_f32_f16": MmaSpec("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32",
                               _f(16, 8, 16, 2, F.a_m16n8k8_16bit), _f(8, 8, 16, 1, F.b_m16n8k8_16bit),
                               _f(16, 8, 32, 4, F.c_m16n8), "f16", "f32"),
    "m16n8k8_f32_tf32": MmaSpec("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32",
                                _f(16, 8, 32, 4, F.a_m16n8k8_tf32), _f(8, 8, 32, 2, F.b_m16n8k8_tf32),
                                _f(16, 8, 32, 4, F.c_m16n8), "tf32", "f32"),
    "m16n8k32_s32_s8": MmaSpec("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32",
                               _f(16, 32, 8, 4, F.a_m16n8k32_8bit), _f(32, 8, 8, 2, F.b_m16n8k32_8bit),
                               _f(16, 8, 32, 4, F.c_m16n8), "s8", "s32"),
    "m16n8k32_s32_u8": MmaSpec("mma.sync.aligned.m16n8k32.row.col.s32.u8.u8.s32",
                               _f(16, 32, 8, 4, F.a_m16n8k32_8bit), _f(32, 8, 8, 2, F.b_m16n8k32_8bit),
                               _f(16, 8, 32, 4, F.c_m16n8), "u8", "s32"),
    "m16n8k32_s32_s8_satfinite": MmaSpec(
        "mma.sync.aligned.m16n8k32.row.col.satfinite.s32.s8.s8.s32",
        _f(16, 32, 8, 4, F.a_m16n8k32_8bit), _f(32, 8, 8, 2, F.b_m16n8k32_8bit),
        _f(16, 8, 32, 4, F.c_m16n8), "s8", "s32", satfinite=True),
}

_NP = {"f16": np.dtype(np.float16), "bf16": np.dtype(ml_dtypes.bfloat16), "tf32": np.dtype(np.float32),
       "f32": np.dtype(np.float32), "s8": np.dtype(np.int8), "u8": np.dtype(np.uint8),
       "s32": np.dtype(np.int32)}
_UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32}


def _bits(x: np.ndarray) -> np.ndarray:
    return x.view(_UINT[x.dtype.itemsize])


def _from_bits(bits: np.ndarray, dtype: np.dtype) -> np.ndarray:
    return bits.astype(_UINT[dtype.itemsize]).view(dtype)


def mma_ptx(spec: MmaSpec) -> str:
    na, nb, nc = spec.a.nregs, spec.b.nregs, spec.c.nregs
    creg = "f32" if spec.acc == "f32" else "b32"
    ld = "f32" if creg == "f32" else "u32"
    lines = [HEADER + ".visible .entry mma_probe(.param .u64 pin, .param .u64 pout)", "{",
             f"    .reg .b32 %a<{na}>;", f"    .reg .b32 %b<{nb}>;", f"    .reg .{creg} %c<{nc}>;",
             f"    .reg .{creg} %d<{nc}>;", "    .reg .b32 %r<2>;", "    .reg .b64 %rd<7>;",
             "    ld.param.u64 %rd1, [pin];", "    ld.param.u64 %rd2, [pout];",
             "    cvta.to.global.u64 %rd1, %rd1;", "    cvta.to.global.u64 %rd2, %rd2;",
             "    mov.u32 %r1, %tid.x;",
             f"    mul.wide.u32 %rd3, %r1, {4 * (na + nb + nc)};", "    add.s64 %rd4, %rd1, %rd3;",
             f"    mul.wide.u32 %rd5, %r1, {4 * nc};", "    add.s64 %rd6, %rd2, %rd5;"]
    off = 0
    for reg, n, typ in (("a", na, "u32"), ("b", nb, "u32"), ("c", nc, ld)):
        for i in range(n):
            lines.append(f"    ld.global.{typ} %{reg}{i}, [%rd4+{4 * off}];")
            off += 1
    regs = lambda r, n: "{" + ", ".join(f"%{r}{i}" for i in range(n)) + "}"  # noqa: E731
    lines.append(f"    {spec.instr} {regs('d', nc)}, {regs('a', na)}, {regs('b', nb)}, {regs('c', nc)};")
    lines += [f"    st.global.{ld} [%rd6+{4 * i}], %d{i};" for i in range(nc)]
    lines += ["    ret;", "}", ""]
    return "\n".join(lines)


def _mma_values(spec: MmaSpec, rng: np.random.Generator, mode: str) -> tuple[np.ndarray, ...]:
    """(A, B, C) in their storage dtypes. mode: exact | random | saturate | tf32_lowbits."""
    fa, fb, fc = spec.a, spec.b, spec.c
    din, dacc = _NP[spec.in_kind], _NP[spec.acc]
    if spec.in_kind in ("s8", "u8"):
        lo, hi = (-128, 127) if spec.in_kind == "s8" else (0, 255)
        a = rng.integers(lo, hi + 1, (fa.rows, fa.cols)).astype(din)
        b = rng.integers(lo, hi + 1, (fb.rows, fb.cols)).astype(din)
        c = rng.integers(-2**20, 2**20, (fc.rows, fc.cols)).astype(dacc)
        if mode == "saturate":  # push every sum past INT32_MAX
            a[:] = 127
            b[:] = 127
            c[:] = np.iinfo(np.int32).max - 1000
        return a, b, c
    if mode == "exact":  # small integers: every product and sum exact in f32 and in f16
        a = rng.integers(-4, 5, (fa.rows, fa.cols)).astype(np.float32).astype(din)
        b = rng.integers(-4, 5, (fb.rows, fb.cols)).astype(np.float32).astype(din)
        c = rng.integers(-8, 9, (fc.rows, fc.cols)).astype(np.float32).astype(dacc)
        return a, b, c
    a = rng.standard_normal((fa.rows, fa.cols)).astype(np.float32)
    b = rng.standard_normal((fb.rows, fb.cols)).astype(np.float32)
    if mode == "tf32_lowbits":  # values with bits below tf32's 10-bit mantissa set
        a = (a.view(np.uint32) | np.uint32(0x1FFF)).view(np.float32)
        b = (b.view(np.uint32) | np.uint32(0x1000)).view(np.float32)
    c = rng.standard_normal((fc.rows, fc.cols)).astype(np.float32)
    return a.astype(din), b.astype(din), c.astype(dacc)


def _mma_reference(spec: MmaSpec, a, b, c) -> np.ndarray:
    """D per the facts sheet, in the accumulator dtype (exact for exact-mode inputs)."""
    if spec.acc == "s32":
        d = a.astype(np.int64) @ b.astype(np.int64) + c.astype(np.int64)
        if spec.satfinite:
            d = np.clip(d, np.iinfo(np.int32).min, np.iinfo(np.int32).max)
        return (d & 0xFFFFFFFF).astype(np.uint32).view(np.int32)
    ad, bd = a.astype(np.float64), b.astype(np.float64)
    if spec.in_kind == "tf32":  # docs/ptx_facts/mma_sync.md §2a: low 13 bits ignored (truncated)
        ad = (a.view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32).astype(np.float64)
        bd = (b.view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32).astype(np.float64)
    return (ad @ bd + c.astype(np.float64)).astype(_NP[spec.acc])


def mma_case(key: str, mode: str = "exact") -> Case:
    spec = MMA_SPECS[key]
    dacc = _NP[spec.acc]

    def make(seed: int):
        a, b, c = _mma_values(spec, np.random.default_rng(seed), mode)
        regs_in = np.concatenate([spec.a.pack(_bits(a)), spec.b.pack(_bits(b)), spec.c.pack(_bits(c))],
                                 axis=1)
        out = np.full((32, spec.c.nregs), POISON32, np.uint32)
        return [np.ascontiguousarray(regs_in), out], {"A": a, "B": b, "C": c}

    def expected(ctx):
        d = _mma_reference(spec, ctx["A"], ctx["B"], ctx["C"])
        return spec.c.pack(_bits(d))

    def close(ctx, got, want):
        """Hardware and simulator accumulate in unspecified order: allow a few f32/f16 ulps
        of the sum of magnitudes, per element (docs/ptx_facts/mma_sync.md §1 'Numerics')."""
        g = _from_bits(spec.c.unpack(got), dacc).astype(np.float64)
        w = _from_bits(spec.c.unpack(want), dacc).astype(np.float64)
        scale = np.abs(ctx["A"].astype(np.float64)) @ np.abs(ctx["B"].astype(np.float64)) + \
            np.abs(ctx["C"].astype(np.float64))
        eps = {"f32": 2.0**-21, "f16": 2.0**-9}[spec.acc]
        return _ok_regs(spec.c, np.abs(g - w) <= eps * scale + 1e-30)

    exact = mode in ("exact", "saturate") or spec.acc == "s32"
    return Case(f"mma_{key}_{mode}", mma_ptx(spec), "mma_probe", (1, 1, 1), (32, 1, 1), make, 1,
                expected, exact=exact, close=None if exact else close,
                notes={"key": key, "instr": spec.instr, "mode": mode})


def _ok_regs(frag: F.Fragment, ok: np.ndarray) -> np.ndarray:
    """Per-register agreement from a per-element mask (a register is ok if all its elements are)."""
    regs = np.ones((32, frag.nregs), bool)
    for lane in range(32):
        for i in range(frag.nregs * frag.per_reg):
            r, c = frag.where(lane, i)
            regs[lane, i // frag.per_reg] &= bool(ok[r, c])
    return regs


def decode_mma(key: str, regs: np.ndarray) -> np.ndarray:
    """The D matrix a (32, nregs) output block holds, per the facts sheet's layout."""
    spec = MMA_SPECS[key]
    return _from_bits(spec.c.unpack(regs), _NP[spec.acc])


# -- ldmatrix ------------------------------------------------------------------------------------
def ldmatrix_ptx(nmat: int, trans: bool) -> str:
    dst = "{" + ", ".join(f"%m{i}" for i in range(nmat)) + "}"
    form = f"ldmatrix.sync.aligned.m8n8.x{nmat}{'.trans' if trans else ''}.shared.b16"
    body = [HEADER + ".visible .entry ldm_probe(.param .u64 psrc, .param .u64 prow, .param .u64 pout)",
            "{", "    .shared .align 16 .b8 tile[512];", f"    .reg .b32 %m<{nmat}>;",
            "    .reg .b32 %r<12>;", "    .reg .b64 %rd<10>;",
            "    ld.param.u64 %rd1, [psrc];", "    ld.param.u64 %rd2, [prow];",
            "    ld.param.u64 %rd3, [pout];", "    cvta.to.global.u64 %rd1, %rd1;",
            "    cvta.to.global.u64 %rd2, %rd2;", "    cvta.to.global.u64 %rd3, %rd3;",
            "    mov.u32 %r1, %tid.x;", "    mov.u32 %r2, tile;",
            "    // each thread copies one 16-byte row of the tile into shared memory",
            "    mul.wide.u32 %rd4, %r1, 16;", "    add.s64 %rd5, %rd1, %rd4;",
            "    shl.b32 %r3, %r1, 4;", "    add.u32 %r3, %r2, %r3;"]
    for i in range(4):
        body += [f"    ld.global.u32 %r{4 + i}, [%rd5+{4 * i}];", f"    st.shared.u32 [%r3+{4 * i}], %r{4 + i};"]
    body += ["    bar.sync 0;",
             "    // this lane supplies the address of tile row prow[tid]",
             "    mul.wide.u32 %rd6, %r1, 4;", "    add.s64 %rd7, %rd2, %rd6;",
             "    ld.global.u32 %r8, [%rd7];", "    shl.b32 %r8, %r8, 4;", "    add.u32 %r9, %r2, %r8;",
             f"    {form} {dst}, [%r9];",
             f"    mul.wide.u32 %rd8, %r1, {4 * nmat};", "    add.s64 %rd9, %rd3, %rd8;"]
    body += [f"    st.global.u32 [%rd9+{4 * i}], %m{i};" for i in range(nmat)]
    body += ["    ret;", "}", ""]
    return "\n".join(body)


def ldmatrix_case(nmat: int, trans: bool) -> Case:
    def make(seed: int):
        rng = np.random.default_rng(seed)
        tile = rng.permutation(65536)[:256].astype(np.uint16).reshape(32, 8)  # distinct values
        rows = rng.permutation(32).astype(np.uint32)  # lanes 8*nmat.. supply ignored addresses
        out = np.full((32, nmat), POISON32, np.uint32)
        return [tile.copy(), rows, out], {"tile": tile, "rows": rows}

    def expected(ctx):
        return F.ldmatrix_expected(ctx["tile"], ctx["rows"], nmat, trans)

    return Case(f"ldmatrix_x{nmat}{'_trans' if trans else ''}", ldmatrix_ptx(nmat, trans), "ldm_probe",
                (1, 1, 1), (32, 1, 1), make, 2, expected, notes={"nmat": nmat, "trans": trans})


# -- cp.async zero-fill --------------------------------------------------------------------------
def cp_async_ptx(level: str, cp: int, ignore_src: bool) -> str:
    words = cp // 4
    size_arg = "%p1" if ignore_src else "%r5"
    body = [HEADER + ".visible .entry cpa_probe(.param .u64 psrc, .param .u64 psize, .param .u64 pout)",
            "{", f"    .shared .align 16 .b8 buf[{32 * cp}];", "    .reg .pred %p1;",
            "    .reg .b32 %r<12>;", "    .reg .b64 %rd<12>;",
            "    ld.param.u64 %rd1, [psrc];", "    ld.param.u64 %rd2, [psize];",
            "    ld.param.u64 %rd3, [pout];", "    cvta.to.global.u64 %rd1, %rd1;",
            "    cvta.to.global.u64 %rd2, %rd2;", "    cvta.to.global.u64 %rd3, %rd3;",
            "    mov.u32 %r1, %tid.x;", "    mov.u32 %r2, buf;",
            f"    mul.lo.u32 %r3, %r1, {cp};", "    add.u32 %r4, %r2, %r3;",
            "    // sentinel 0xAB.. so zero-filled bytes differ from untouched ones"]
    body += [f"    st.shared.u32 [%r4+{4 * i}], 0xABABABAB;" for i in range(words)]
    body += ["    bar.sync 0;",
             "    mul.wide.u32 %rd4, %r1, 4;", "    add.s64 %rd5, %rd2, %rd4;",
             "    ld.global.u32 %r5, [%rd5];", "    setp.eq.u32 %p1, %r5, 0;",
             f"    mul.wide.u32 %rd6, %r1, {cp};", "    add.s64 %rd7, %rd1, %rd6;",
             f"    cp.async.{level}.shared.global [%r4], [%rd7], {cp}, {size_arg};",
             "    cp.async.commit_group;", "    cp.async.wait_group 0;", "    bar.sync 0;",
             "    add.s64 %rd8, %rd3, %rd6;"]
    for i in range(words):
        body += [f"    ld.shared.u32 %r{6 + (i % 4)}, [%r4+{4 * i}];", f"    st.global.u32 [%rd8+{4 * i}], %r{6 + (i % 4)};"]
    body += ["    ret;", "}", ""]
    return "\n".join(body)


def cp_async_case(level: str, cp: int, ignore_src: bool = False) -> Case:
    """Each of 32 threads copies `cp` bytes with src-size (or ignore-src) from a table."""
    def make(seed: int):
        rng = np.random.default_rng(seed)
        src = rng.integers(0, 256, 32 * cp).astype(np.uint8)
        src[src == 0xAB] = 0x11
        if ignore_src:
            sizes = rng.integers(0, 2, 32).astype(np.uint32)  # 0 -> ignore (zeros), 1 -> copy all
        else:
            sizes = rng.integers(0, cp + 1, 32).astype(np.uint32)
            sizes[:3] = [0, cp, min(1, cp)]  # always cover empty, full and partial
        out = np.full(32 * cp, 0xEE, np.uint8)
        return [src.copy(), sizes, out], {"src": src, "sizes": sizes}

    def expected(ctx):
        want = np.zeros(32 * cp, np.uint8)
        for t in range(32):
            n = (cp if ctx["sizes"][t] else 0) if ignore_src else int(ctx["sizes"][t])
            want[t * cp: t * cp + n] = ctx["src"][t * cp: t * cp + n]
        return want

    name = f"cp_async_{level}_{cp}" + ("_ignore_src" if ignore_src else "_src_size")
    return Case(name, cp_async_ptx(level, cp, ignore_src), "cpa_probe", (1, 1, 1), (32, 1, 1), make, 2,
                expected, notes={"level": level, "cp_size": cp, "ignore_src": ignore_src})


def all_cases() -> list[Case]:
    cases = [mma_case(k, "exact") for k in MMA_SPECS if not MMA_SPECS[k].satfinite]
    cases += [mma_case("m16n8k32_s32_s8_satfinite", "saturate"), mma_case("m16n8k32_s32_s8", "saturate")]
    cases += [mma_case(k, "random") for k in ("m16n8k16_f32_f16", "m16n8k16_f32_bf16",
                                              "m16n8k16_f16_f16", "m16n8k8_f32_tf32")]
    cases += [mma_case("m16n8k8_f32_tf32", "tf32_lowbits")]
    cases += [ldmatrix_case(n, t) for n in (1, 2, 4) for t in (False, True)]
    cases += [cp_async_case("ca", cp) for cp in (4, 8, 16)] + [cp_async_case("cg", 16)]
    cases += [cp_async_case("ca", 16, ignore_src=True)]
    return cases
