"""A hand-assembled sm_90a kernel built only from the ptxgen.targets.sm90 wrappers and the Builder:
one warpgroup copies A (64 x K, row-major) and B (K-major N x K, or MN-major K x N) into shared
memory in the canonical 128B-swizzled layouts, issues wgmma from descriptors, and stores the f32
accumulators row-major through the accumulator layout table.

Registers get one physical register per virtual register (no allocator), so the test depends on
nothing but the wrappers, the IR, the renderer and the machine that runs the text.
"""
from __future__ import annotations

from ptxgen.ir import Builder
from ptxgen.emit.index import ExprEmitter, Tid
from ptxgen.ir import REG_CLASSES, Addr, Function, Param, Sym, Vec, VReg
from ptxgen.ir.render import render
from ptxgen.schedule.swizzle import SWIZZLE_128B
from ptxgen.targets.sm90 import descriptors as dsc, tma_isa as tma, wgmma_isa as wi
from ptxgen.emit import mbarrier_isa as mb
from ptxgen.targets.sm90.wgmma_layouts import accumulator_table
from ptxgen.schedule.targets import Target

SM90A = Target("sm_90a", (8, 0), 227 * 1024, sms=132)
ENTRY = "wgmma_tile"
TILES = "tiles"          # static shared array holding A then B
M = 64


def render_plain(fn: Function, target: Target = SM90A) -> str:
    """Render with virtual register i of class c named <prefix of c><i>."""
    used: dict[str, int] = {}
    for ins in fn.instructions():
        for r in ins.defs() + ins.uses():
            used[r.cls] = max(used.get(r.cls, 0), r.id)

    def name(v: VReg) -> str:
        return f"{REG_CLASSES[v.cls][1]}{v.id}"

    decls = [f".reg {REG_CLASSES[c][0]} {REG_CLASSES[c][1]}<{n + 1}>;" for c, n in sorted(used.items())]
    return render(fn, target, ["hand-assembled wgmma tile (tests/targets/sm90/sm90_kernel.py)"], decls, name)


def _prologue(b: Builder, tile_bytes: int):
    """%tid.x, its expression emitter, the global A/B/D pointers and the shared tiles' address."""
    b.function.shared.append((TILES, 1024, tile_bytes))
    tid = b.reg("b32")
    b.emit("mov.u32", tid, Sym("%tid.x"), ndefs=1)
    ex = ExprEmitter(b, tid)
    ptrs = []
    for p in ("pA", "pB", "pD"):
        r, g = b.reg("b64"), b.reg("b64")
        b.emit("ld.param.u64", r, Addr(Sym(p)), ndefs=1)
        b.emit("cvta.to.global.u64", g, r, ndefs=1)
        ptrs.append(g)
    smem = b.reg("b32")
    b.emit("mov.u32", smem, Sym(TILES), ndefs=1)
    return tid, ex, ptrs, smem


def build(n: int, k: int, b_major: str) -> str:
    """PTX for D(64 x n, f32) = A(64 x k, f16) @ B(k x n, f16), one CTA of 128 threads."""
    a_tile = dsc.CanonicalTile(M, k, 2, "K", SWIZZLE_128B)
    b_tile = dsc.CanonicalTile(n, k, 2, b_major, SWIZZLE_128B)
    b_base = a_tile.nbytes                      # a multiple of 1024: B's pattern starts aligned
    b = Builder(ENTRY, [Param(".u64", "pA"), Param(".u64", "pB"), Param(".u64", "pD")])
    tid, ex, ptrs, smem = _prologue(b, a_tile.nbytes + b_tile.nbytes)

    b.banner("copy A and B to shared memory in the canonical 128B-swizzled layouts")
    _copy(b, ex, tid, ptrs[0], smem, a_tile, 0, rows_along_mn=True, row_elems=k)
    _copy(b, ex, tid, ptrs[1], smem, b_tile, b_base, rows_along_mn=b_major == "K",
          row_elems=k if b_major == "K" else n)
    mb.fence_proxy_async(b, comment="st.shared (generic proxy) before wgmma reads (async proxy)")
    b.emit("bar.sync", 0)

    _mma_and_store(b, ex, smem, ptrs[2], a_tile, b_tile, b_base, n, k, b_major)
    return render_plain(b.function)


def _mma_and_store(b: Builder, ex: ExprEmitter, smem: VReg, d_ptr: VReg, a_tile: dsc.CanonicalTile,
                   b_tile: dsc.CanonicalTile, b_base: int, n: int, k: int, b_major: str) -> None:
    b.banner("wgmma chain from shared-memory descriptors")
    shape = wi.wgmma_shape("f32", "f16", "f16", n)
    b_addr = b.reg("b32")
    b.emit("add.u32", b_addr, smem, b_base, ndefs=1)
    desc_a = dsc.emit_descriptor(b, smem, a_tile)
    desc_b = dsc.emit_descriptor(b, b_addr, b_tile)
    d = b.regs("f32", shape.d_registers)
    wi.fence(b, comment="before the first wgmma")
    for kk in range(0, k, shape.k):
        da = dsc.advance_descriptor(b, desc_a, a_tile.descriptor(0, 0, kk).start, comment=f"A k={kk}")
        db = dsc.advance_descriptor(b, desc_b, b_tile.descriptor(0, 0, kk).start, comment=f"B k={kk}")
        wi.wgmma(b, shape, d, da, db, scale_d=0 if kk == 0 else 1, trans_b=int(b_major == "MN"))
    wi.commit_group(b)
    wi.wait_group(b, 0, comment="accumulators are read below")

    b.banner("store the accumulators row-major through the layout table")
    for reg, (row, col) in zip(d, accumulator_table(n)):
        off = ex.reg((row * n + col) * 4)
        wide, addr = b.reg("b64"), b.reg("b64")
        b.emit("cvt.u64.u32", wide, off, ndefs=1)
        b.emit("add.u64", addr, d_ptr, wide, ndefs=1)
        b.emit("st.global.f32", Addr(addr), reg)
    b.emit("ret")


def _copy(b: Builder, ex: ExprEmitter, tid: VReg, gptr: VReg, smem: VReg, tile: dsc.CanonicalTile,
          base: int, rows_along_mn: bool, row_elems: int) -> None:
    """Each thread copies 16-byte chunks of a dense row-major global matrix (rows of `row_elems`
    f16) to the element's swizzled shared address."""
    chunks_per_row = row_elems * 2 // 16
    total = tile.nbytes // 16
    for j in range(0, total, 128):
        guard = None
        if total - j < 128:                     # a partial last round: threads past the end idle
            guard = b.reg("pred")
            b.emit("setp.lt.u32", guard, tid, total - j, ndefs=1)
        c = Tid() + j
        row, col = c // chunks_per_row, (c % chunks_per_row) * 8
        mn, kk = (row, col) if rows_along_mn else (col, row)
        sh = ex.reg(tile.swizzle(tile.offset(mn, kk)) + base)
        goff = ex.reg(c * 16)
        wide, gaddr, saddr = b.reg("b64"), b.reg("b64"), b.reg("b32")
        b.emit("cvt.u64.u32", wide, goff, ndefs=1)
        b.emit("add.u64", gaddr, gptr, wide, ndefs=1)
        b.emit("add.u32", saddr, smem, sh, ndefs=1)
        vals = b.regs("b32", 4)
        b.emit("ld.global.v4.u32", Vec(vals), Addr(gaddr), ndefs=1, guard=guard)
        b.emit("st.shared.v4.u32", Addr(saddr), Vec(vals), guard=guard)


TMA_ENTRY = "wgmma_tma_tile"


def build_tma(n: int, k: int, b_major: str) -> str:
    """As `build`, but thread 0 loads the tiles with TMA (128B-swizzled boxes of 64 elements along
    the contiguous dimension) completing on one mbarrier, and every thread waits on phase 0.

    The TMA copies are spliced in as text from tma_isa (the IR has no tensor-coordinate operand):
    the builder leaves a marker comment where each goes."""
    a_tile = dsc.CanonicalTile(M, k, 2, "K", SWIZZLE_128B)
    b_tile = dsc.CanonicalTile(n, k, 2, b_major, SWIZZLE_128B)
    b_base = a_tile.nbytes
    bar_off = b_base + b_tile.nbytes
    b = Builder(TMA_ENTRY, [Param(".align 64 .b8", "tmapA[128]"), Param(".align 64 .b8", "tmapB[128]"),
                            Param(".u64", "pD")])
    b.function.shared.append((TILES, 1024, bar_off + 8))
    tid = b.reg("b32")
    b.emit("mov.u32", tid, Sym("%tid.x"), ndefs=1)
    ex = ExprEmitter(b, tid)
    r, d_ptr = b.reg("b64"), b.reg("b64")
    b.emit("ld.param.u64", r, Addr(Sym("pD")), ndefs=1)
    b.emit("cvta.to.global.u64", d_ptr, r, ndefs=1)
    maps = []
    for name in ("tmapA", "tmapB"):
        p, g = b.reg("b64"), b.reg("b64")
        b.emit("mov.b64", p, Sym(name), ndefs=1)
        b.emit("cvta.param.u64", g, p, ndefs=1, comment="generic address of the by-value tensor map")
        maps.append(g)
    smem = b.reg("b32")
    b.emit("mov.u32", smem, Sym(TILES), ndefs=1)
    bar = b.reg("b32")
    b.emit("add.u32", bar, smem, bar_off, ndefs=1)
    leader = b.reg("pred")
    b.emit("setp.eq.u32", leader, tid, 0, ndefs=1)

    b.banner("TMA: thread 0 loads A and B; all threads wait on the full barrier, phase 0")
    mb.init(b, Addr(bar), 1, guard=leader)
    b.emit("bar.sync", 0, comment="the barrier is initialised before anyone uses it")
    for m in maps:
        tma.prefetch_tensormap(b, Addr(m))
    mb.arrive_expect_tx(b, Addr(bar), a_tile.nbytes + b_tile.nbytes, guard=leader)
    splices: dict[str, str] = {}
    boxes = [(maps[0], 0, a_tile, "K"), (maps[1], b_base, b_tile, b_major)]
    for which, (tmap, base, tile, major) in enumerate(boxes):
        # K-major: a box of 64 k x mn rows per 64-wide k block; MN-major: 64 mn x k rows
        blocks = tile.k // 64 if major == "K" else tile.mn // 64
        for blk in range(blocks):
            dst, c0 = b.reg("b32"), b.reg("b32")
            b.emit("add.u32", dst, smem, base + blk * tile.nbytes // blocks, ndefs=1)
            b.emit("mov.u32", c0, 64 * blk, ndefs=1)
            marker = f"@@tma_{which}_{blk}@@"
            b.comment(marker)
            names = {v: f"{REG_CLASSES[v.cls][1]}{v.id}" for v in (dst, c0, tmap, bar, leader)}
            splices[marker] = "@" + names[leader] + " " + tma.load_text(
                names[dst], names[tmap], (names[c0], "0"), names[bar])
    mb.wait_parity(b, Addr(bar), 0, "wait_full")
    _mma_and_store(b, ex, smem, d_ptr, a_tile, b_tile, b_base, n, k, b_major)
    text = render_plain(b.function)
    for marker, line in splices.items():
        assert f"// {marker}" in text
        text = text.replace(f"// {marker}", line)
    return text


LOOP_ENTRY = "wgmma_k_loop"


def build_loop(n: int, k: int, accum: str) -> Function:
    """A k-loop kernel: descriptors recomputed in fresh registers each iteration, one wgmma with
    scale-d = 1 accumulating into registers zeroed before the loop, then f32 (or packed f16) stores.
    Returns the Function so tests can render it with ptxgen's register allocator: the IR does not
    mark D as read by the wgmma, and this is the shape where that could go wrong."""
    a_tile = dsc.CanonicalTile(M, k, 2, "K", SWIZZLE_128B)
    b_tile = dsc.CanonicalTile(n, k, 2, "K", SWIZZLE_128B)
    b = Builder(LOOP_ENTRY, [Param(".u64", "pA"), Param(".u64", "pB"), Param(".u64", "pD")])
    tid, ex, ptrs, smem = _prologue(b, a_tile.nbytes + b_tile.nbytes)
    _copy(b, ex, tid, ptrs[0], smem, a_tile, 0, True, k)
    _copy(b, ex, tid, ptrs[1], smem, b_tile, a_tile.nbytes, True, k)
    mb.fence_proxy_async(b)
    b.emit("bar.sync", 0)
    shape = wi.wgmma_shape(accum, "f16", "f16", n)
    cls = "f32" if accum == "f32" else "b32"
    d = b.regs(cls, shape.d_registers)
    for r in d:
        b.emit(f"mov.{cls}", r, Sym("0f00000000") if cls == "f32" else 0, ndefs=1)
    step = b.reg("b32")
    b.emit("mov.u32", step, 0, ndefs=1)
    b.banner("main loop: one k16 step per iteration")
    loop = b.label("k_loop")
    b.place(loop)
    per_row = 128 // (2 * shape.k)                    # k16 steps inside one 128-byte row
    blk, inrow, t1, t2, off, a_addr, b_addr = b.regs("b32", 7)
    b.emit("shr.u32", blk, step, per_row.bit_length() - 1, ndefs=1)
    b.emit("and.b32", inrow, step, per_row - 1, ndefs=1)
    b.emit("shl.b32", t1, inrow, 5, ndefs=1)
    b.emit("mul.lo.u32", t2, blk, M * 128, ndefs=1)
    b.emit("add.u32", off, t1, t2, ndefs=1)
    b.emit("add.u32", a_addr, smem, off, ndefs=1)
    b2 = b.reg("b32")
    b.emit("mul.lo.u32", b2, blk, n * 128, ndefs=1)
    b.emit("add.u32", b2, b2, t1, ndefs=1)
    b.emit("add.u32", b_addr, smem, b2, ndefs=1)
    b.emit("add.u32", b_addr, b_addr, a_tile.nbytes, ndefs=1)
    da = dsc.emit_descriptor(b, a_addr, a_tile)
    db = dsc.emit_descriptor(b, b_addr, b_tile)
    wi.fence(b)
    wi.wgmma(b, shape, d, da, db, scale_d=1)
    wi.commit_group(b)
    wi.wait_group(b, 0)
    b.emit("add.u32", step, step, 1, ndefs=1)
    more = b.reg("pred")
    b.emit("setp.lt.u32", more, step, k // shape.k, ndefs=1)
    b.emit("bra", Sym(loop), guard=more)
    table = accumulator_table(n)
    per_reg = 1 if cls == "f32" else 2                # f16: d_{2j} low half, d_{2j+1} high half
    for reg, (row, col) in zip(d, table[::per_reg]):
        off_d = ex.reg((row * n + col) * (4 if cls == "f32" else 2))
        wide, addr = b.reg("b64"), b.reg("b64")
        b.emit("cvt.u64.u32", wide, off_d, ndefs=1)
        b.emit("add.u64", addr, ptrs[2], wide, ndefs=1)
        b.emit(f"st.global.{cls}", Addr(addr), reg)
    b.emit("ret")
    return b.function
