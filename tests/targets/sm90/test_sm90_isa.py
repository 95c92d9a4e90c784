"""The sm90 ISA tables (ptxgen/targets/sm90) cell by cell against the ISA (docs/ptx_facts/), and the
descriptor and fragment layouts against ptxgen.sim's independent decoders.

Expected values are written out here from the PTX ISA text (shape lists, the descriptor bit table,
the fragment formulas), not computed with the module under test.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from ptxgen.ir import Builder
from ptxgen.emit.index import evaluate
from ptxgen.ir import Addr, Sym
from ptxgen.ir.render import render_instr
from ptxgen.schedule.swizzle import TMA_MODES, Swizzle
from ptxgen.targets.sm90 import descriptors as dsc, tma_isa as tma, wgmma_isa as wi, wgmma_layouts as wl
from ptxgen.emit import mbarrier_isa as mb
from ptxgen.sim import wgmma_layouts as sim_layouts

SW = Swizzle.named

# ------------------------------------------------------------------ wgmma type table
FLOAT_N = [8 * i for i in range(1, 33)]                        # .m64n8 ... .m64n256, step 8
INT_N = [8, 16, 24, 32, 48, 64, 80, 96, 112, 128, 144, 160, 176, 192, 208, 224, 240, 256]
#: (dtype, atype, btype) -> K, written from the ISA's syntax blocks.
ISA_ROWS = {("f16", "f16", "f16"): 16, ("f32", "f16", "f16"): 16, ("f32", "bf16", "bf16"): 16,
            ("f32", "tf32", "tf32"): 8}
ISA_ROWS.update({(d, a, b): 32 for d in ("f16", "f32") for a in ("e4m3", "e5m2") for b in ("e4m3", "e5m2")})
ISA_ROWS.update({("s32", a, b): 32 for a in ("s8", "u8") for b in ("s8", "u8")})


def test_the_table_has_exactly_the_isa_type_rows():
    assert set(wi.WGMMA_TYPES) == set(ISA_ROWS)
    for key, k in ISA_ROWS.items():
        assert wi.WGMMA_TYPES[key].k == k, key
        assert wi.WGMMA_TYPES[key].k * wi.WGMMA_TYPES[key].esize == 32, key   # one K step = 32 bytes


@pytest.mark.parametrize("key", sorted(ISA_ROWS), ids=".".join)
def test_legal_n_per_type(key):
    row = wi.WGMMA_TYPES[key]
    assert list(row.n_values) == (INT_N if key[0] == "s32" else FLOAT_N)
    for n in range(1, 264):
        legal = n in row.n_values
        if legal:
            assert wi.wgmma_shape(*key, n).name == f"m64n{n}k{ISA_ROWS[key]}"
        else:
            with pytest.raises(ValueError, match="N must be one of"):
                wi.wgmma_shape(*key, n)


@pytest.mark.parametrize("key", sorted(ISA_ROWS), ids=".".join)
def test_register_counts(key):
    for n in wi.WGMMA_TYPES[key].n_values:
        shape = wi.wgmma_shape(*key, n)
        per_thread = 64 * n // 128 if key[0] in ("f32", "s32") else 64 * n // 256   # f16 packs 2 per .b32
        assert shape.d_registers == per_thread
        assert wl.accumulator_elements(n) == 64 * n // 128
    assert wi.A_REGISTERS * 4 * 128 == 64 * 32       # 64 x (32 bytes of K) over 128 threads


def test_transpose_negate_and_satfinite_columns():
    for key, row in wi.WGMMA_TYPES.items():
        assert row.transpose == (key[1] in ("f16", "bf16")), key
        assert row.negate == (key[0] != "s32"), key
        assert row.satfinite == (key[0] == "s32"), key
        assert row.ptx == ((8, 4) if key[0] == "s32" and key[1] != key[2] else (8, 0)), key


def test_unknown_type_combination_names_the_legal_ones():
    with pytest.raises(ValueError, match="no .f16.bf16.bf16 form; legal"):
        wi.lookup("f16", "bf16", "bf16")
    with pytest.raises(ValueError, match="no .f32.e4m3.s8"):
        wi.lookup("f32", "e4m3", "s8")


# ------------------------------------------------------------------ wgmma operand spelling
def _text(ins) -> str:
    return render_instr(ins, lambda v: f"%{v.cls}_{v.id}").strip()


def test_descriptor_form_operand_order_and_spelling():
    b = Builder("k", [])
    shape = wi.wgmma_shape("f32", "f16", "f16", 8)
    d, da, db, p = b.regs("f32", 4), b.reg("b64"), b.reg("b64"), b.reg("pred")
    text = _text(wi.wgmma(b, shape, d, da, db, p, scale_a=-1, trans_a=1, trans_b=0))
    assert text == ("wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%f32_1, %f32_2, %f32_3, %f32_4}, "
                    "%b64_5, %b64_6, %pred_7, -1, 1, 1, 0;")
    assert _text(wi.fence(b)) == "wgmma.fence.sync.aligned;"
    assert _text(wi.commit_group(b)) == "wgmma.commit_group.sync.aligned;"
    assert _text(wi.wait_group(b, 1)) == "wgmma.wait_group.sync.aligned 1;"


def test_register_a_form_has_no_trans_a_and_integer_has_no_scales():
    b = Builder("k", [])
    shape = wi.wgmma_shape("f32", "bf16", "bf16", 16, a_from_registers=True)
    d, a, db = b.regs("f32", 8), b.regs("b32", 4), b.reg("b64")
    ops = wi.wgmma_operands(shape, d, a, db, 1, trans_b=1)
    assert [str(o) for o in ops[2:]] == [str(db), "1", "1", "1", "1"]     # b-desc, scale-d, sa, sb, tb
    with pytest.raises(ValueError, match="imm-trans-a exists only"):
        wi.wgmma_operands(shape, d, a, db, 1, trans_a=1)
    ishape = wi.wgmma_shape("s32", "s8", "s8", 24, satfinite=True)
    assert ishape.opcode == "wgmma.mma_async.sync.aligned.m64n24k32.satfinite.s32.s8.s8"
    ops = wi.wgmma_operands(ishape, b.regs("b32", 12), b.reg("b64"), db, 0)
    assert len(ops) == 4
    with pytest.raises(ValueError, match="no imm-scale"):
        wi.wgmma_operands(ishape, b.regs("b32", 12), b.reg("b64"), db, 0, scale_a=-1)


@pytest.mark.parametrize("bad, match", [
    (dict(n_d=3), "writes 4 D registers"), (dict(trans_b=1, t="tf32"), "transposed operands exist only"),
    (dict(scale_d=2), "scale-d"), (dict(scale_b=0), "imm-scale-a/b must be 1 or -1"),
    (dict(trans_b=2), "imm-trans-b must be 0"), (dict(a_regs=3), "4-register tuple")])
def test_operand_errors_name_the_rule(bad, match):
    b = Builder("k", [])
    t = bad.get("t", "f16")
    shape = wi.wgmma_shape("f32", t, t, 8)
    d = b.regs("f32", bad.get("n_d", 4))
    a = b.regs("b32", bad["a_regs"]) if "a_regs" in bad else b.reg("b64")
    with pytest.raises(ValueError, match=match):
        wi.wgmma_operands(shape, d, a, b.reg("b64"), bad.get("scale_d", 1), scale_b=bad.get("scale_b", 1),
                          trans_b=bad.get("trans_b", 0))


# ------------------------------------------------------------------ descriptor bits
def test_descriptor_against_hand_computed_bits():
    # 128B, K-major f16, start 0x400, LBO 16 (encoded 1), SBO 1024 (encoded 64): bits written out
    want = (0x400 >> 4) | (1 << 16) | (64 << 32) | (1 << 62)
    assert want == 0x4000_0040_0001_0040
    assert dsc.SmemDescriptor(0x400, 16, 1024, SW("128B")).encode() == want
    assert dsc.SmemDescriptor(0x400, 16, 1024, SW("64B")).encode() == want ^ (1 << 62) ^ (2 << 62)
    assert dsc.SmemDescriptor(0x400, 16, 1024, SW("32B")).encode() == want ^ (1 << 62) ^ (3 << 62)
    assert dsc.SmemDescriptor(0x400, 16, 1024, SW("none")).encode() == want ^ (1 << 62)
    # start keeps address bits 17..4 only; base offset is bits 51..49
    assert dsc.SmemDescriptor(0x4_0000 + 0x30, 0, 0, SW("none")).encode() == 0x3
    assert dsc.SmemDescriptor(0, 0, 0, SW("128B"), base_offset=5).encode() == (5 << 49) | (1 << 62)
    assert dsc.SmemDescriptor(0x3FFF0, 0x3FFF0, 0x3FFF0, SW("none")).encode() == 0x3FFF | 0x3FFF << 16 | 0x3FFF << 32
    assert dsc.SmemDescriptor(0x400, 16, 1024, SW("128B")).hi_lo() == (want >> 32, want & 0xFFFFFFFF)


def test_swizzle_enums_differ_between_descriptor_and_tensor_map():
    assert {m.name: m.descriptor_code for m in TMA_MODES} == {"none": 0, "128B": 1, "64B": 2, "32B": 3}
    assert {m.name: m.tensor_map_enum for m in TMA_MODES} == {"none": 0, "32B": 1, "64B": 2, "128B": 3}


@pytest.mark.parametrize("field, kw", [("start address", dict(start=8)), ("LBO", dict(lbo=24)),
                                       ("SBO", dict(sbo=1 << 18))])
def test_descriptor_rejects_unencodable_offsets(field, kw):
    args = dict(start=0, lbo=16, sbo=1024) | kw
    with pytest.raises(ValueError, match=field):
        dsc.SmemDescriptor(args["start"], args["lbo"], args["sbo"]).encode()


def test_base_offset_rule():
    assert dsc.base_offset_for(0x2400, SW("128B")) == 0
    assert dsc.base_offset_for(0x2400 + 384, SW("128B")) == 3
    assert dsc.base_offset_for(0x200, SW("64B")) == 0 and dsc.base_offset_for(0x100, SW("32B")) == 0


@settings(max_examples=60, deadline=None)
@given(value=st.integers(0, 2**64 - 1))
def test_decode_matches_the_simulators_decoder(value):
    mine = dsc.decode(value)
    theirs = sim_layouts.decode_descriptor(value)
    assert (mine.start, mine.lbo, mine.sbo, mine.base_offset) == (theirs.start, theirs.lbo, theirs.sbo,
                                                                  theirs.base_offset)
    assert mine.swizzle.descriptor_code == theirs.swizzle


# ------------------------------------------------------------------ canonical layouts vs the simulator
LAYOUTS = [(major, sw, esize) for sw in ("none", "32B", "64B", "128B")
           for major, esize in (("K", 1), ("K", 2), ("K", 4), ("MN", 2))]


@pytest.mark.parametrize("major, swizzle, esize", LAYOUTS)
def test_canonical_tile_matches_simulator_decode(major, swizzle, esize):
    """Every wgmma K step of a whole tile: the element addresses our layout stores to are the ones
    the simulator's decoder reads for the descriptor we build."""
    w = SW(swizzle).width
    k_inst = 32 // esize
    mn = 64 if major == "K" else max(64, 2 * w // esize)
    k = 2 * max(w // esize, k_inst) if major == "K" else 32
    tile = dsc.CanonicalTile(mn, k, esize, major, SW(swizzle))
    base = 3 * 1024
    seen = set()
    for k0 in range(0, k, k_inst):
        d = tile.descriptor(base, 0, k0)
        value = d.encode()
        got = sim_layouts.operand_addresses(sim_layouts.decode_descriptor(value), mn, k_inst, esize, major == "MN")
        want = np.array([[tile.address(base, i, k0 + j) for j in range(k_inst)] for i in range(mn)])
        assert np.array_equal(got, want), (k0, d)
        seen.update(want.reshape(-1).tolist())
    # the tile is a bijection onto its bytes
    assert len(seen) == mn * k and min(seen) >= base and max(seen) < base + tile.nbytes


@settings(max_examples=80, deadline=None)
@given(data=st.data())
def test_any_subtile_descriptor_matches_simulator_decode(data):
    """A wgmma anywhere inside a larger tile (a later M block, a later K step or K block)."""
    major, swizzle, esize = data.draw(st.sampled_from(LAYOUTS), label="major, swizzle, esize")
    w = SW(swizzle).width
    if major == "K":
        mn = 8 * data.draw(st.integers(8, 24), label="mn / 8")
        k = (w // esize) * data.draw(st.integers(1, 3), label="k blocks") * max(1, 32 // w)
        mn_extent = data.draw(st.sampled_from([64, 8, 24]), label="wgmma rows (A: 64, B: N)")
        mn0 = 8 * data.draw(st.integers(0, (mn - mn_extent) // 8), label="mn0 / 8")
    else:
        per = w // esize if swizzle != "none" else 8
        mn = per * data.draw(st.integers(1, 4), label="mn blocks") * max(1, 64 // per)
        k = 8 * data.draw(st.integers(2, 6), label="k / 8")
        mn_extent = 64
        mn0 = per * data.draw(st.integers(0, (mn - mn_extent) // per), label="mn0 / block")
    k_inst = 32 // esize
    k0 = k_inst * data.draw(st.integers(0, k // k_inst - 1), label="k step")
    base = 1024 * data.draw(st.integers(0, 100), label="base / 1024")
    tile = dsc.CanonicalTile(mn, k, esize, major, SW(swizzle))
    value = tile.descriptor(base, mn0, k0).encode()
    got = sim_layouts.operand_addresses(sim_layouts.decode_descriptor(value), mn_extent, k_inst, esize,
                                        major == "MN")
    want = np.array([[tile.address(base, mn0 + i, k0 + j) for j in range(k_inst)] for i in range(mn_extent)])
    assert np.array_equal(got, want)


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_encode_matches_the_simulators_decoder(data):
    start = 16 * data.draw(st.integers(0, (1 << 14) - 1), label="start / 16")
    lbo = 16 * data.draw(st.integers(0, (1 << 14) - 1), label="lbo / 16")
    sbo = 16 * data.draw(st.integers(0, (1 << 14) - 1), label="sbo / 16")
    swizzle = data.draw(st.sampled_from([m.name for m in TMA_MODES]), label="swizzle")
    base_offset = data.draw(st.integers(0, 7), label="base offset")
    theirs = sim_layouts.decode_descriptor(dsc.SmemDescriptor(start, lbo, sbo, SW(swizzle), base_offset).encode())
    assert (theirs.start, theirs.lbo, theirs.sbo, theirs.base_offset) == (start, lbo, sbo, base_offset)
    assert sim_layouts.SWIZZLE_NAMES[theirs.swizzle] == swizzle


def test_kmajor_128b_f16_matches_the_fact_sheet_formula():
    """Element (r, c) of a 64-wide f16 tile at r*128 + (((c>>3) ^ (r&7)) << 4) + (c&7)*2."""
    tile = dsc.CanonicalTile(64, 64, 2, "K", SW("128B"))
    for r in range(64):
        for c in range(64):
            assert tile.address(0, r, c) == r * 128 + (((c >> 3) ^ (r & 7)) << 4) + (c & 7) * 2
    assert (tile.lbo, tile.sbo) == (16, 1024)
    assert tile.descriptor(0, 0, 16).start == 32          # k += 16 adds 32 bytes = 2 in the field


def test_canonical_tile_rejects_what_the_layout_cannot_hold():
    with pytest.raises(ValueError, match="multiple of 128 B"):
        dsc.CanonicalTile(64, 32, 2, "K", SW("128B"))
    with pytest.raises(ValueError, match="1024-byte boundary"):
        dsc.CanonicalTile(64, 64, 2, "K", SW("128B")).descriptor(512)
    with pytest.raises(ValueError, match="multiple of 8 along MN"):
        dsc.CanonicalTile(64, 64, 2, "K", SW("128B")).descriptor(0, 4, 0)
    with pytest.raises(ValueError, match="and of 8 along K"):
        dsc.CanonicalTile(128, 64, 2, "MN", SW("128B")).descriptor(0, 0, 4)


# ------------------------------------------------------------------ fragment layouts vs the simulator
@pytest.mark.parametrize("n", [8, 16, 24, 64, 120, 256])
def test_accumulator_layout_matches_simulator(n):
    theirs = sim_layouts.d_fragment(n)                        # (128, n/2, 2)
    for wg in (0, 1):                                         # every warpgroup maps the same way
        tid = np.arange(128) + 128 * wg
        rows = np.stack([evaluate(r, tid) for r, _ in wl.accumulator_table(n)], axis=1)
        cols = np.stack([evaluate(c, tid) for _, c in wl.accumulator_table(n)], axis=1)
        assert np.array_equal(rows, theirs[..., 0]) and np.array_equal(cols, theirs[..., 1])
    flat = (rows * n + cols).reshape(-1)
    assert sorted(flat.tolist()) == list(range(64 * n))     # a bijection onto the 64 x N tile


def test_accumulator_layout_against_the_isa_formula():
    for th in range(128):
        w, lane = divmod(th, 32)
        g, t = lane >> 2, lane & 3
        for i in range(16):
            r, c = wl.accumulator_coord(i)
            assert (int(evaluate(r, np.array([th]))[0]), int(evaluate(c, np.array([th]))[0])) == \
                (16 * w + g + 8 * ((i >> 1) & 1), 8 * (i >> 2) + 2 * t + (i & 1))


@pytest.mark.parametrize("kind", ["16bit", "tf32", "8bit"])
def test_register_a_layout_matches_simulator(kind):
    theirs = sim_layouts.a_fragment(kind)
    tid = np.arange(128)
    table = wl.a_register_table(kind)
    rows = np.stack([evaluate(r, tid) for r, _ in table], axis=1)
    cols = np.stack([evaluate(c, tid) for _, c in table], axis=1)
    assert np.array_equal(rows, theirs[..., 0]) and np.array_equal(cols, theirs[..., 1])
    k = {"16bit": 16, "tf32": 8, "8bit": 32}[kind]
    assert sorted((rows * k + cols).reshape(-1).tolist()) == list(range(64 * k))


# ------------------------------------------------------------------ TMA and mbarrier spelling
def test_tma_strings():
    assert tma.load_text("%r1", "%rd1", ("%r3", "%r4"), "%r2") == (
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes "
        "[%r1], [%rd1, {%r3, %r4}], [%r2];")
    assert tma.load_text("%r1", "%rd1", ("%r3",), "%r2", ptx=(8, 6)).startswith(
        "cp.async.bulk.tensor.1d.shared::cta.global.tile.")
    assert tma.load_text("%r1", "%rd1", ("%r3", "%r4", "%r5"), "%r2", multicast_mask="%h1").endswith(
        "complete_tx::bytes.multicast::cluster [%r1], [%rd1, {%r3, %r4, %r5}], [%r2], %h1;")
    assert tma.store_text("%rd1", ("%r3", "%r4"), "%r1") == (
        "cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [%rd1, {%r3, %r4}], [%r1];")
    with pytest.raises(ValueError, match="1..5 coordinates"):
        tma.store_text("%rd1", (), "%r1")


@pytest.mark.parametrize("box, esize, swizzle, match", [
    ((64, 300), 2, "128B", "1..256"), ((8, 8), 1, "none", "multiple of 16"),
    ((128, 64), 2, "128B", "at most 128 B"), ((1,) * 6, 16, "none", "rank 1..5")])
def test_tensor_tile_rules(box, esize, swizzle, match):
    with pytest.raises(ValueError, match=match):
        tma.TensorTile(box, esize, SW(swizzle))


def test_tensor_tile_bytes():
    assert tma.TensorTile((64, 128), 2, SW("128B")).nbytes == 16384


def test_mbarrier_and_sync_spelling():
    b = Builder("k", [])
    bar = Addr(b.reg("b32"))
    mb.init(b, bar, 1)
    mb.arrive_expect_tx(b, bar, 32768)
    mb.wait_parity(b, bar, 0, "wait_full")
    mb.fence_proxy_async(b)
    mb.setmaxnreg(b, 240, increase=True)
    texts = [render_instr(i, str).strip() for i in b.function.instructions()]
    assert texts[0] == f"mbarrier.init.shared::cta.b64 [{bar.base}], 1;"
    assert texts[1] == f"mbarrier.arrive.expect_tx.shared::cta.b64 _, [{bar.base}], 32768;"
    assert texts[2].startswith("mbarrier.try_wait.parity.shared::cta.b64 %vpred_")
    assert texts[3].startswith("@!%vpred_") and texts[3].endswith("bra $L_wait_full;")
    assert texts[4:] == ["fence.proxy.async.shared::cta;", "setmaxnreg.inc.sync.aligned.u32 240;"]


def test_elect_sync_renders_its_pair_destination_and_both_halves_are_defined():
    """elect.sync's `d|p` is one operand with two destinations: the renderer spells `_` for a
    discarded half and the allocator sees both halves defined (none read)."""
    b = Builder("k", [])
    p, none = mb.elect_sync(b)
    q, lane = mb.elect_sync(b, 0x0000FFFF, lane=True)
    assert none is None and lane is not None
    first, second = b.function.instructions()
    assert render_instr(first, str).strip() == f"elect.sync _|{p}, 0xffffffff;"
    assert render_instr(second, str).strip() == f"elect.sync {lane}|{q}, 0x0000ffff;"
    assert first.defs() == (p,) and second.defs() == (lane, q) and second.uses() == ()
    with pytest.raises(ValueError, match="nonzero 32-bit"):
        mb.elect_sync(b, 0)


@pytest.mark.parametrize("call, match", [
    (lambda b, a: mb.setmaxnreg(b, 20, True), "24..256"), (lambda b, a: mb.setmaxnreg(b, 100, False), "multiple of 8"),
    (lambda b, a: mb.init(b, a, 0), "1..1048575"), (lambda b, a: mb.arrive_expect_tx(b, a, 1 << 20), "split"),
    (lambda b, a: mb.try_wait_parity(b, a, 2), "0 or 1"), (lambda b, a: mb.stmatrix(b, a, ()), "1, 2 or 4"),
    (lambda b, a: mb.fence_proxy_async(b, "local"), "state space")])
def test_mbarrier_ranges(call, match):
    b = Builder("k", [])
    with pytest.raises(ValueError, match=match):
        call(b, Addr(Sym("bar")))
