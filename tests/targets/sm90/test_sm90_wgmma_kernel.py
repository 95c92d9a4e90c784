"""End to end: a kernel built only from the ptxgen.targets.sm90 wrappers runs on ptxgen.sim against
numpy and assembles with nvJitLink for sm_90a; and ptxas, the ISA's own checker, accepts exactly the
wgmma forms the table says are legal."""
from __future__ import annotations

import numpy as np
import pytest

from ptxgen import sim
from ptxgen.ir import Builder
from ptxgen.ir import Addr, Param, Sym
from ptxgen.targets.sm90 import wgmma_isa as wi
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


def _tma_args(a, b, b_major: str, n: int, k: int):
    b_in = np.ascontiguousarray(b.T) if b_major == "K" else b
    return [sim.TensorMap(a, (64, 64), swizzle="128B"),
            sim.TensorMap(b_in, (n, 64) if b_major == "K" else (k, 64), swizzle="128B")]


@pytest.mark.parametrize("n, k, b_major", [(64, 128, "K"), (64, 128, "MN"), (128, 64, "MN"), (16, 64, "K")])
def test_tma_mbarrier_wgmma_kernel_matches_numpy(n, k, b_major):
    """TMA writes the 128B pattern and the descriptors read it: the two sides of the swizzle agree."""
    a, b = _operands(np.random.default_rng(7 * n + k), k, n)
    d = np.full((64, n), np.nan, dtype=np.float32)
    sim.launch(kern.build_tma(n, k, b_major), kern.TMA_ENTRY, block=(128,), args=_tma_args(a, b, b_major, n, k) + [d])
    assert np.array_equal(d, (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32))


def test_tma_kernel_without_the_mbarrier_wait_is_caught():
    ptx = kern.build_tma(64, 64, "K")
    bad = "\n".join(line for line in ptx.split("\n") if "try_wait" not in line and "$L_wait_full;" not in line)
    a, b = _operands(np.random.default_rng(1), 64, 64)
    d = np.zeros((64, 64), dtype=np.float32)
    with pytest.raises(sim.HazardError, match="not been waited for"):
        sim.launch(bad, kern.TMA_ENTRY, block=(128,), args=_tma_args(a, b, "K", 64, 64) + [d])


@pytest.mark.parametrize("b_major", ["K", "MN"])
def test_tma_kernel_assembles_for_sm90a(b_major):
    r = assemble(kern.build_tma(64, 128, b_major), "sm_90a", kern.TMA_ENTRY)
    assert r.resources.spill_store_bytes == 0 and "warning" not in r.log.lower(), r.log


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


@pytest.mark.parametrize("key", sorted(wi.WGMMA_TYPES), ids=".".join)
def test_ptxas_accepts_every_legal_shape(key):
    row = wi.WGMMA_TYPES[key]
    shapes = [wi.WgmmaShape(row, n) for n in row.n_values]
    assemble(_module(shapes, row.ptx), "sm_90a", "k")


@pytest.mark.parametrize("key, n", [(("s32", "s8", "s8"), 40), (("s32", "u8", "u8"), 248),
                                    (("s32", "s8", "s8"), 232)])
def test_ptxas_rejects_the_integer_n_the_table_leaves_out(key, n):
    row = wi.WGMMA_TYPES[key]
    assert n not in row.n_values
    # the same row with the floating-point N list, so the table's own check lets N through
    lenient = wi.WgmmaTypes(*key, 32, 1, wi.N_FLOAT, False, False, True, (8, 0))
    shape = wi.WgmmaShape(lenient, n)
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


def test_every_sync_and_cluster_wrapper_assembles():
    """One module holding each mbarrier / fence / setmaxnreg / stmatrix / cluster wrapper and the
    text-level TMA store, multicast load and elect.sync: ptxas for sm_90a accepts the spellings."""
    from ptxgen.ir import REG_CLASSES
    from ptxgen.emit import mbarrier_isa as mb
    from ptxgen.targets.sm90 import tma_isa as tma

    b = Builder("k", [Param(".align 64 .b8", "tmap[128]")])
    b.function.shared.append(("buf", 1024, 4096))
    b.function.directives.append(".maxnreg 168")
    name = lambda v: f"{REG_CLASSES[v.cls][1]}{v.id}"       # noqa: E731 - render_plain's naming
    smem, bar, tm, x, mask = b.reg("b32"), b.reg("b32"), b.reg("b64"), b.reg("b32"), b.reg("b16")
    b.emit("mov.u32", smem, Sym("buf"), ndefs=1)
    b.emit("add.u32", bar, smem, 2048, ndefs=1)
    b.emit("mov.b64", tm, Sym("tmap"), ndefs=1)
    b.emit("mov.u32", x, 0, ndefs=1)
    b.emit("mov.u16", mask, 3, ndefs=1)
    mb.setmaxnreg(b, 40, increase=False)
    mb.setmaxnreg(b, 168, increase=True)
    mb.init(b, Addr(bar), 2)
    mb.fence_mbarrier_init(b)
    mb.cluster_arrive(b)
    mb.cluster_wait(b)
    mb.cluster_arrive(b, relaxed=True)
    mb.cluster_wait(b)
    rank = mb.cluster_ctarank(b)
    remote = mb.mapa(b, bar, rank)
    mb.arrive(b, Addr(bar))
    mb.arrive(b, Addr(bar), count=1)
    mb.arrive_remote(b, Addr(remote))
    mb.arrive_expect_tx(b, Addr(bar), 1024)
    b.comment("@@multicast@@")
    mb.wait_parity(b, Addr(bar), 0, "wait_full")
    regs = b.regs("b32", 4)
    for r in regs:
        b.emit("mov.u32", r, 0, ndefs=1)
    mb.stmatrix(b, Addr(smem), regs)
    mb.stmatrix(b, Addr(smem), regs[:2], trans=True)
    mb.fence_proxy_async(b)
    b.emit("bar.sync", 0)
    tma.prefetch_tensormap(b, Addr(tm))
    b.comment("@@store@@")
    tma.bulk_commit_group(b)
    tma.bulk_wait_group(b, 0)
    tma.bulk_wait_group(b, 0, read_only=False)
    p, _ = mb.elect_sync(b)
    y = b.reg("b32")
    b.emit("selp.u32", y, 1, 0, p, ndefs=1)
    b.emit("st.shared.u32", Addr(smem), y)
    b.emit("ret")
    text = kern.render_plain(b.function)
    text = text.replace("// @@multicast@@", tma.load_text(name(smem), name(tm), (name(x), name(x)), name(bar),
                                                         multicast_mask=name(mask)))
    text = text.replace("// @@store@@", tma.store_text(name(tm), (name(x), name(x)), name(smem)))
    r = assemble(text, "sm_90a", "k")
    assert r.resources.spill_store_bytes == 0


@pytest.mark.parametrize("accum", ["f32", "f16"])
def test_k_loop_through_the_register_allocator(accum):
    """wgmma reads D as well as writing it, which the IR does not record: the allocator must still
    keep the accumulators apart from the loop's address temporaries (f16 D shares their class)."""
    from ptxgen.ir.render import render
    from ptxgen.regalloc import allocate

    n, k = 64, 128
    fn = kern.build_loop(n, k, accum)
    alloc = allocate(fn.body)
    ptx = render(fn, kern.SM90A, ["k loop"], alloc.declarations(), alloc.name)
    a, b = _operands(np.random.default_rng(11), k, n)
    dt = np.float32 if accum == "f32" else np.float16
    d = np.full((64, n), np.nan, dtype=dt)
    sim.launch(ptx, kern.LOOP_ENTRY, block=(128,), args=[a, np.ascontiguousarray(b.T), d])
    assert np.array_equal(d, (a.astype(np.float64) @ b.astype(np.float64)).astype(dt))
    assemble(ptx, "sm_90a", kern.LOOP_ENTRY)
