"""End to end: a kernel built only from the ptxgen.emit.sm90 wrappers runs on ptxgen.sim against
numpy and assembles with nvJitLink for sm_90a; and ptxas, the ISA's own checker, accepts exactly the
wgmma forms the table says are legal."""
from __future__ import annotations

import numpy as np
import pytest

from ptxgen import sim
from ptxgen.emit.builder import Builder
from ptxgen.emit.ir import Addr, Param, Sym
from ptxgen.emit.sm90 import wgmma_isa as wi
from ptxgen.errors import AssembleError
from ptxgen.runtime.assemble import assemble

from . import sm90_kernel as kern


def _operands(rng, k: int, n: int):
    """Small nonzero integers: every f32 sum is exact, so the comparison is bit for bit."""
    a = (rng.integers(1, 4, (64, k)) * rng.choice([-1, 1], (64, k))).astype(np.float16)
    b = (rng.integers(1, 4, (k, n)) * rng.choice([-1, 1], (k, n))).astype(np.float16)
    return a, b


@pytest.mark.parametrize("n, k, b_major", [(64, 128, "K"), (64, 128, "MN"), (128, 64, "K"), (8, 64, "K")])
def test_wgmma_tile_kernel_matches_numpy_on_the_simulator(n, k, b_major):
    ptx = kern.build(n, k, b_major)
    a, b = _operands(np.random.default_rng(n + k), k, n)
    b_in = np.ascontiguousarray(b.T) if b_major == "K" else b
    d = np.full((64, n), np.nan, dtype=np.float32)           # poisoned output
    sim.launch(ptx, kern.ENTRY, block=(128,), args=[a, b_in, d])
    want = (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)
    assert np.array_equal(d, want)


def test_wrong_swizzle_on_one_side_is_caught():
    """The check can fail: B written unswizzled while its descriptor says 128B gives a wrong D."""
    ptx = kern.build(64, 64, "K")
    a, b = _operands(np.random.default_rng(3), 64, 64)
    d = np.full((64, 64), np.nan, dtype=np.float32)
    lines = ptx.split("\n")
    # B's descriptor high word (the last one built) loses its 128B code: bits 63-62 = 0
    hi = [i for i, line in enumerate(lines) if "swizzle" in line and "mov.u32" in line][-1]
    value = int(lines[hi].split(",")[1].split(";")[0])
    assert value >> 30 == 1
    lines[hi] = lines[hi].replace(f", {value};", f", {value & 0x3FFFFFFF};")
    sim.launch("\n".join(lines), kern.ENTRY, block=(128,), args=[a, np.ascontiguousarray(b.T), d])
    assert not np.array_equal(d, (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32))


@pytest.mark.parametrize("b_major", ["K", "MN"])
def test_wgmma_tile_kernel_assembles_for_sm90a(b_major):
    r = assemble(kern.build(64, 128, b_major), "sm_90a", kern.ENTRY)
    assert r.resources.spill_store_bytes == 0 and r.resources.spill_load_bytes == 0
    assert "warning" not in r.log.lower(), r.log          # no C7515 "wgmma serialized" etc.


# ------------------------------------------------------------------ ptxas as the oracle for the table
def _module(shapes: list[wi.WgmmaShape], version: tuple[int, int] = (8, 0)) -> str:
    """One wgmma per shape (descriptor A) through the Builder, rendered for sm_90a."""
    b = Builder("k", [Param(".u64", "p")])
    addr = b.reg("b64")
    b.emit("ld.param.u64", addr, Addr(Sym("p")), ndefs=1)
    for shape in shapes:
        cls = "f32" if shape.types.dtype == "f32" else "b32"
        d = b.regs(cls, shape.d_registers)
        wi.fence(b)
        wi.wgmma(b, shape, d, addr, addr, 0)
        wi.commit_group(b)
        wi.wait_group(b, 0)
        b.emit(f"st.global.{'f32' if cls == 'f32' else 'b32'}", Addr(addr), d[-1])
    b.emit("ret")
    target = kern.Target("sm_90a", version, 227 * 1024)
    return kern.render_plain(b.function, target)


@pytest.mark.parametrize("key", sorted(wi.WGMMA_TYPES))
def test_ptxas_accepts_every_legal_shape(key):
    row = wi.WGMMA_TYPES[key]
    shapes = [wi.WgmmaShape(row, n) for n in row.n_values]
    assemble(_module(shapes, row.ptx), "sm_90a", "k")


@pytest.mark.parametrize("key, n", [(("s32", "s8", "s8"), 40), (("s32", "u8", "u8"), 248),
                                    (("s32", "s8", "s8"), 232)])
def test_ptxas_rejects_the_integer_n_the_table_leaves_out(key, n):
    row = wi.WGMMA_TYPES[key]
    assert n not in row.n_values
    shape = object.__new__(wi.WgmmaShape)                     # bypass the table's own check
    object.__setattr__(shape, "types", row)
    object.__setattr__(shape, "n", n)
    object.__setattr__(shape, "a_from_registers", False)
    object.__setattr__(shape, "satfinite", False)
    with pytest.raises(AssembleError, match="Illegal matrix shape"):
        assemble(_module([shape]), "sm_90a", "k")


def test_ptxas_rejects_what_the_table_leaves_out():
    """bf16 with an f16 accumulator, and mixed s8/u8 before PTX 8.4."""
    bf16_f16 = wi.WgmmaTypes("f16", "bf16", "bf16", 16, 2, wi.N_FLOAT, True, True, False, (8, 0))
    assert ("f16", "bf16", "bf16") not in wi.WGMMA_TYPES
    with pytest.raises(AssembleError):
        assemble(_module([wi.WgmmaShape(bf16_f16, 8)]), "sm_90a", "k")
    mixed = wi.WGMMA_TYPES[("s32", "s8", "u8")]
    with pytest.raises(AssembleError, match="8.4"):
        assemble(_module([wi.WgmmaShape(mixed, 8)], (8, 0)), "sm_90a", "k")
