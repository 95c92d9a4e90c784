"""The sm_90a TMA-store epilogue: accumulators -> epilogue math -> cast -> a swizzled shared staging
tile -> one TMA store per box, per consumer warpgroup (docs/ptx_facts/tma.md §9d).

Each warpgroup owns `rows` = BM / consumers rows of the tile and walks BN in chunks of one TMA box
(`hopper.EpilogueTile`: rows x one swizzle width of columns). Chunk j goes through buffer j % 2:

    [beta] wait cfull[j % 2]        C's box, loaded by TMA into the C buffer (zero-filled out of bounds)
    every thread: math (epilogue/math.py) and cast of its chunk elements, written with stmatrix
                  (16-bit outputs, warp_specialisation.md §9i) or st.shared.v2.f32 (f32)
    fence.proxy.async.shared::cta    the generic writes, before the async proxy reads them (mbarrier.md §9f)
    leader: cp.async.bulk.wait_group.read 0    store j-1 has read the other buffer, which chunk j+1 fills
    bar.sync 8, 128 x consumers      every writer's chunk (and the leaders' waits) before the stores
    [beta, warp-specialised] leader: arrive cfree[j % 2]   every thread has read C's box: the
                                     producer's C loader may refill the buffer (epilogue_c_load.py)
    leader: TMA store of chunk j; commit_group; [beta, not warp-specialised] reload cfull[j % 2]
                                     with chunk j + 2 (the leader loaded chunks 0 and 1 first)
When the CTA walks several tiles (persistent), the next tile's epilogue starts, before its first
staging write, with the leader's wait (wait_group.read 0) and the named barrier once more, so no
store still reads shared memory when any consumer thread writes the staging again: the async
proxy may read a store's source until the issuing thread's wait returns, and only a barrier after
that wait orders the other threads' writes. Waiting there, not at the end of each tile, lets the
consumers start the next tile's first wgmma at once; before the consumers exit each leader waits
once more (`drain`). TMA clips the boxes at M and N: no per-element guards, except on the bias /
scale vector loads (which must not read past their ends).

Where the buffers live (TmaEpilogueLayout): after the ring's barriers, or, without a persistent
grid or warp specialisation, in the ring's own bytes (hopper.staging_fits_ring), which are idle
once every warpgroup's last wgmma has retired: the epilogue then starts with a CTA barrier.

Staging addresses: the thread's rows and the box swizzle (tma.md "Swizzle modes": the 16-byte
chunk index XORed with address bits 7.. modulo 8/4/2) give one register per 16- or 32-byte column
group; m64 blocks, row halves and buffers are immediate offsets on them.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from ...ir import Addr, Imm, Vec, VReg
from ...ir import ops as ptx
from ...ir.ops import B32, F32, S32, U32
from ...emit.memory import bar_sync
from ...schedule.geometry import align_up
from .plan import C_FREE_BARRIERS, EPILOGUE_BUFFERS, EXTRA_BARRIERS, MBARRIER_BYTES, SWIZZLE_ALIGN, EpilogueTile
from ...emit.epilogue.math import CVT_PACK
from ...emit import mbarrier_isa as mb
from . import tma_isa as tma
from .epilogue import DirectStores

if TYPE_CHECKING:
    from .context import Sm90Context, TmaOperands
    from .mainloop import RingLayout

#: The epilogue's named barrier (0 is the CTA's bar.sync), over the consumer warpgroups' threads:
#: one id for all of them, since the simulator wants a barrier id uniform over threads running
#: together (a per-warpgroup id, 8 + w, is legal PTX but reported as divergence there).
EPILOGUE_BARRIER = 8


@dataclass(frozen=True)
class TmaEpilogueLayout:
    """Byte offsets (from the 1024-aligned shared base) of the C-load mbarriers (two per consumer,
    beta != 0 only) right after the ring's, then (`frees_c`: the producer loads C) the C-free
    mbarriers (two per consumer), then the store buffers, then the C-load buffers, each consumer's
    EPILOGUE_BUFFERS consecutive and every buffer on the 1024-byte swizzle pattern."""

    tile: EpilogueTile
    consumers: int
    loads_c: bool
    barriers: int
    store: int
    in_ring: bool = False   # the buffers reuse the idle ring's bytes (hopper.staging_fits_ring)
    frees_c: bool = False   # C-free barriers: the producer warpgroup loads C (epilogue_c_load.py)

    @property
    def free_barriers(self) -> int:
        """The C-free barriers' offset, after the C-load ones."""
        return self.barriers + MBARRIER_BYTES * EXTRA_BARRIERS * self.consumers

    @property
    def barrier_count(self) -> int:
        if not self.loads_c:
            return 0
        return self.consumers * (EXTRA_BARRIERS + (C_FREE_BARRIERS if self.frees_c else 0))

    @property
    def per_consumer(self) -> int:
        return EPILOGUE_BUFFERS * self.tile.buffer_bytes

    @property
    def load(self) -> int:
        return self.store + self.consumers * self.per_consumer

    @property
    def end(self) -> int:
        """Where the epilogue's shared memory ends (its C-load barriers, with the buffers in the ring)."""
        if self.in_ring:
            return self.barriers + MBARRIER_BYTES * self.barrier_count
        return self.load + (self.consumers * self.per_consumer if self.loads_c else 0)


def tma_epilogue_layout(tile: EpilogueTile, consumers: int, loads_c: bool, ring: "RingLayout",
                        in_ring: bool = False, frees_c: bool = False) -> TmaEpilogueLayout:
    """The epilogue's shared memory after the ring's barriers; with `in_ring` its buffers start at
    the ring's first stage (offset 0, 1024-aligned) instead. `frees_c`: the producer warpgroup
    loads C (warp-specialised kernels), so each C buffer has a C-free barrier too."""
    barriers = ring.nbytes
    layout = TmaEpilogueLayout(tile, consumers, loads_c, barriers, 0, in_ring, frees_c)
    store = 0 if in_ring else align_up(barriers + MBARRIER_BYTES * layout.barrier_count, SWIZZLE_ALIGN)
    layout = replace(layout, store=store)
    assert not in_ring or layout.load + (consumers * layout.per_consumer if loads_c else 0) <= ring.barriers
    return layout


@dataclass(frozen=True)
class TileStaging:
    """The per-tile registers of one TMA-store epilogue (`TmaStores.emit`): the warpgroup
    leader's predicate, its store buffers' base and per-column-group staging addresses, the
    warpgroup's first row and the tile's first column (the TMA coordinates), and with beta its
    C-load barriers and buffers."""

    wg_leader: VReg
    store_base: VReg
    addrs: list[VReg]
    row0: VReg
    col_n0: VReg
    c_bars: VReg | None = None
    c_dst: VReg | None = None
    c_free: VReg | None = None   # the warpgroup's C-free barriers (the producer loads C)


class TmaStores(DirectStores):
    """EpilogueMath with the staged TMA-store path. `init_barriers` runs in the kernel's setup
    (before its CTA barrier); `emit(acc)` is the whole epilogue of one tile (a persistent loop may
    call it once per tile: the C-load parities are loop-carried registers and every store has been
    waited for (.read) when it returns).

    What it reads of the kernel context `ctx`: smem (the 1024-aligned base), layout (where its
    shared memory starts: layout.nbytes), plan, tid, leader (thread 0), tmaps["C"] (the generic
    address of tmapC), dim("M"/"N"), ptr (bias/scale) and ScalarOps; of the tile's operands its
    origin and warpgroup."""

    def __init__(self, ctx: "Sm90Context"):
        super().__init__(ctx)
        tile = ctx.plan.epilogue_tile
        assert tile is not None, "the plan chose direct stores"
        self.tile = tile
        self.loads_c = self.e.beta != 0.0
        #: warp-specialised: the producer warpgroup loads C ahead of the epilogue
        #: (epilogue_c_load.py) and the consumers hand each C buffer back on its C-free barrier
        self.producer_loads_c = self.loads_c and ctx.plan.warp_specialized
        self.layout = tma_epilogue_layout(tile, ctx.plan.consumers, self.loads_c, ctx.layout,
                                          ctx.plan.smem.staging_in_ring > 0, ctx.plan.warp_specialized)
        #: the C buffers' phase parities, loop-carried across tiles (set to 0 by init_barriers)
        self.c_phase: tuple[VReg, ...] = ctx.b.regs("b32", 2) if self.loads_c else ()
        self.bar_threads = 128 * ctx.plan.consumers
        #: the CTA runs this epilogue once per tile of a persistent walk: the staging is reused
        self.several_tiles = bool(ctx.plan.warp_specialized and ctx.s.persistent)

    # -- setup ----------------------------------------------------------------------------------
    def init_barriers(self) -> None:
        """Thread 0 initialises the C-load mbarriers (one arrival: the expect_tx of the warpgroup
        leader, or of the producer's C loader) and the C-free ones (one arrival: the warpgroup
        leader's, once every consumer thread has read the buffer); the C-load parities, loop-carried
        across tiles, start at 0."""
        if not self.loads_c:
            return
        lw, b = self.lw, self.b
        n = self.layout.barrier_count
        b.comment(f"thread 0 initialises the {n} C-load{' and C-free' if self.producer_loads_c else ''} "
                  "barriers of the TMA epilogue (one arrival each)")
        for i in range(n):
            mb.init(b, Addr(lw.smem, self.layout.barriers + MBARRIER_BYTES * i), 1, guard=lw.leader)
        for k, phase in enumerate(self.c_phase):
            ptx.mov(b, U32, Imm("0"), into=phase, comment=f"C buffer {k}: phase parity")

    # -- addresses ------------------------------------------------------------------------------
    def _thread_row(self, sixteen_bit: bool) -> VReg:
        """The warpgroup row of this thread's first staged element: 16w + g (f32 pairs), or for
        stmatrix 16w + 8*(matrix & 1) + r, lane 8*matrix + r giving row r of matrix `matrix`."""
        lw = self.lw
        lane = ptx.and_(lw.b, B32, lw.tid, Imm("31"))
        warp = ptx.and_(lw.b, B32, ptx.shr(lw.b, U32, lw.tid, Imm("5")), Imm("3"))
        row = ptx.shl(lw.b, B32, warp, Imm("4"))
        if sixteen_bit:
            half = ptx.and_(lw.b, B32, ptx.shr(lw.b, U32, lane, Imm("3")), Imm("1"))
            row = ptx.add(lw.b, U32, row, ptx.shl(lw.b, B32, half, Imm("3")))
            return ptx.add(lw.b, U32, row, ptx.and_(lw.b, B32, lane, Imm("7")), comment="16w + 8(m&1) + r")
        return ptx.add(lw.b, U32, row, ptx.shr(lw.b, U32, lane, Imm("2")), comment="16w + g")

    def staging_addresses(self, base: VReg) -> list[VReg]:
        """One shared address per column group of a chunk (16-bit: two 8-column blocks, one
        stmatrix.x4; f32: one 8-column block, a thread's 2 columns), swizzled for its row."""
        lw, tile = self.lw, self.tile
        sixteen_bit = self.ob == 2
        row = self._thread_row(sixteen_bit)
        rowterm = ptx.mul(lw.b, U32, row, Imm(str(tile.pitch)), comment=f"row x {tile.pitch} B")
        lane = ptx.and_(lw.b, B32, lw.tid, Imm("31"))
        if sixteen_bit:  # lanes 16..31 give the addresses of the second 8-column block
            inner = ptx.and_(lw.b, B32, lane, Imm("16"))
            step, starts = 16, range(0, tile.cols // 8, 2)
        else:            # a thread's two f32 columns 2t, 2t+1: 8t bytes into the 32-byte block
            inner = ptx.shl(lw.b, B32, ptx.and_(lw.b, B32, lane, Imm("3")), Imm("3"))
            step, starts = 32, range(tile.cols // 8)
        swz = tile.swizzle_mode   # the box's Swizzle<B,4,3>: address bits 7.. into the chunk bits 4..
        if swz.bits:
            key = ptx.and_(lw.b, B32, ptx.shr(lw.b, U32, rowterm, Imm(str(swz.base + swz.shift))), Imm(str(swz.mask)))
            key = ptx.shl(lw.b, B32, key, Imm(str(swz.base)), comment=f"{swz.name} swizzle: row bits into the chunk")
            inner = ptx.xor(lw.b, B32, inner, key)
        rowbase = ptx.add(lw.b, U32, base, rowterm)
        return [ptx.add(lw.b, U32, rowbase, ptx.xor(lw.b, B32, inner, Imm(str(step * q))) if q else inner,
                       comment=f"column block {q * (2 if sixteen_bit else 1)}") for q in starts]

    # -- the epilogue ---------------------------------------------------------------------------
    def emit(self, acc: list[tuple[VReg, ...]], ops: "TmaOperands") -> None:
        lw, b, g, tile, lay = self.lw, self.b, self.g, self.tile, self.layout
        b.banner(f"Epilogue: accumulators -> {g.out_dtype} -> {tile.swizzle or 'un'}{'B-' if tile.swizzle else ''}"
                 f"swizzled staging ({tile.rows}x{tile.cols} per box, {EPILOGUE_BUFFERS} buffers) -> TMA store "
                 f"(clipped at M and N){'; C read through TMA' if self.loads_c else ''}")
        self.describe()
        if lay.in_ring:
            mb.fence_proxy_async(b, comment="the wgmma (async proxy) reads of the ring before generic writes")
            bar_sync(b, comment="every warpgroup's wgmma has retired: the ring becomes the staging")
        th = ptx.and_(lw.b, B32, lw.tid, Imm("127"))
        wg_leader = ptx.setp(lw.b, "eq", U32, th, Imm("0"))
        mine = ptx.mul(lw.b, U32, ops.warpgroup, Imm(str(lay.per_consumer)))
        store_base = ptx.add(lw.b, U32, ptx.add(lw.b, U32, lw.smem, Imm(str(lay.store))), mine,
                            comment="this warpgroup's store buffers")
        addrs = self.staging_addresses(store_base)
        row0 = ops.tile.bm0
        if lw.plan.consumers > 1:
            first = ptx.mul(lw.b, U32, ops.warpgroup, Imm(str(tile.rows)))
            row0 = ptx.add(lw.b, U32, ops.tile.bm0, first, comment="the warpgroup's first row")
        st = TileStaging(wg_leader, store_base, addrs, row0, ops.tile.bn0)
        if self.loads_c:
            c_bars = ptx.add(lw.b, U32, lw.smem, Imm(str(lay.barriers)))
            if lw.plan.consumers > 1:
                c_bars = ptx.add(lw.b, U32, c_bars, ptx.shl(lw.b, B32, ops.warpgroup, Imm("4")))
            c_dst = ptx.add(lw.b, U32, ptx.add(lw.b, U32, lw.smem, Imm(str(lay.load))), mine,
                           comment="this warpgroup's C buffers")
            st = replace(st, c_bars=c_bars, c_dst=c_dst)
            if self.producer_loads_c:
                c_free = ptx.add(lw.b, U32, lw.smem, Imm(str(lay.free_barriers)))
                if lw.plan.consumers > 1:
                    c_free = ptx.add(lw.b, U32, c_free, ptx.shl(lw.b, B32, ops.warpgroup, Imm("4")))
                st = replace(st, c_free=c_free)
            else:
                b.comment("the warpgroup leader loads C's first boxes")
                for j in range(min(2, tile.chunks)):
                    self.load_c(st, j)
        for j in range(tile.chunks):
            self.chunk(acc, st, j)

    def wait_previous_tile(self, wg_leader: VReg) -> None:
        """Before a tile's first staging write, when the CTA walks several tiles: the leader waits
        for the previous tile's stores to have read the staging, then the consumers meet, so no
        thread rewrites a buffer an earlier store may still read (the async proxy reads a store's
        source until the issuing thread's wait returns; only a barrier after that wait orders the
        other threads' writes). Waiting here rather than at the end of the previous tile lets
        that tile's consumers go on to the next tile's first wgmma at once."""
        b = self.b
        tma.bulk_wait_group(b, 0, read_only=True, guard=wg_leader,
                            comment="the previous tile's stores have read the staging")
        bar_sync(b, comment="after the leaders' waits: the staging may be written again", barrier=EPILOGUE_BARRIER,
                 threads=self.bar_threads)

    def drain(self) -> None:
        """Before the consumers exit: each warpgroup leader waits until its last stores have read
        shared memory (the CTA's shared memory goes with its last thread)."""
        lw, b = self.lw, self.b
        th = ptx.and_(lw.b, B32, lw.tid, Imm("127"))
        tma.bulk_wait_group(b, 0, read_only=True, guard=ptx.setp(lw.b, "eq", U32, th, Imm("0")),
                            comment="the last stores have read shared memory before the CTA exits")

    def col0(self, st: TileStaging, j: int) -> VReg:
        """The first column of chunk j (TMA coordinate and vector index)."""
        if j == 0:
            return st.col_n0
        return ptx.add(self.lw.b, U32, st.col_n0, Imm(str(j * self.tile.cols)))

    def load_c(self, st: TileStaging, j: int) -> None:
        """The leader arms C buffer j % 2's barrier and loads chunk j of C into it."""
        lw, b, tile = self.lw, self.b, self.tile
        assert st.c_bars is not None and st.c_dst is not None, "C is loaded only with beta != 0"
        k = j % 2
        bar = Addr(st.c_bars, MBARRIER_BYTES * k)
        nbytes = tile.rows * tile.pitch
        mb.arrive_expect_tx(b, bar, nbytes, guard=st.wg_leader, comment=f"C box {j}: {nbytes} B")
        tma.load(b, Addr(st.c_dst, k * tile.buffer_bytes), lw.tmaps["C"], (self.col0(st, j), st.row0), bar,
                 guard=st.wg_leader, comment=f"C columns +{j * tile.cols}, box {tile.rows}x{tile.cols}")

    def chunk(self, acc: list[tuple[VReg, ...]], st: TileStaging, j: int) -> None:
        lw, b, e, tile = self.lw, self.b, self.e, self.tile
        k = j % 2
        b.comment(f"chunk {j}: columns +{j * tile.cols}..+{(j + 1) * tile.cols - 1} through buffer {k}")
        if j == 0 and self.several_tiles:
            self.wait_previous_tile(st.wg_leader)
        q0, nq = j * tile.cols // 8, tile.cols // 8          # the chunk's 8-column accumulator blocks
        if self.loads_c:
            assert st.c_bars is not None
            mb.wait_parity(b, Addr(st.c_bars, MBARRIER_BYTES * k), self.c_phase[k], "wait_c",
                           comment=f"C box {j} landed")
            ptx.xor(b, B32, self.c_phase[k], Imm("1"), into=self.c_phase[k])
        t2 = ptx.shl(lw.b, B32, ptx.and_(lw.b, B32, lw.tid, Imm("3")), Imm("1"))
        col_vec = {}
        if e.bias == "col" or e.scale == "col":
            col = ptx.add(lw.b, U32, self.col0(st, j), t2, comment="this thread's first column of the chunk")
            room = ptx.sub(lw.b, U32, lw.dim("N"), col)
            offs = [8 * q + c for q in range(nq) for c in (0, 1)]
            oks = [ptx.setp(lw.b, "gt", S32, room, Imm(str(o))) for o in offs]
            col_vec = {name: dict(zip(offs, self.vector_values(name, col, offs, oks)))
                       for name in ("bias", "scale") if getattr(e, name) == "col"}
        row_t = None
        if e.bias == "row" or e.scale == "row":
            lane = ptx.and_(lw.b, B32, lw.tid, Imm("31"))
            warp = ptx.and_(lw.b, B32, ptx.shr(lw.b, U32, lw.tid, Imm("5")), Imm("3"))
            row_t = ptx.add(lw.b, U32, ptx.shl(lw.b, B32, warp, Imm("4")), ptx.shr(lw.b, U32, lane, Imm("2")))
            row_t = ptx.add(lw.b, U32, st.row0, row_t, comment="16w + g: this thread's first row")
        for m, frag in enumerate(acc):
            row_vecs: list[dict] = [{}, {}]
            if row_t is not None:
                for half in (0, 1):
                    row = ptx.add(lw.b, U32, row_t, Imm(str(64 * m + 8 * half)))
                    ok = ptx.setp(lw.b, "lt", U32, row, lw.dim("M"))
                    row_vecs[half] = {name: self.vector_values(name, row, [0], [ok])[0]
                                      for name in ("bias", "scale") if getattr(e, name) == "row"}
            b.comment(f"m64 block {m}")
            self.rows_out(frag, st.addrs, m, q0, nq, k, col_vec, row_vecs)
        mb.fence_proxy_async(b, comment="the staged tile, written by the generic proxy, before TMA reads it")
        if j >= 1 and j + 1 < tile.chunks:
            tma.bulk_wait_group(b, 0, read_only=True, guard=st.wg_leader,
                                comment=f"store {j - 1} has read buffer {1 - k}, which chunk {j + 1} fills")
        bar_sync(b, comment="the consumers' staged chunks are complete", barrier=EPILOGUE_BARRIER,
                 threads=self.bar_threads)
        if st.c_free is not None:   # every thread's reads of C box j precede the barrier above
            mb.arrive(b, Addr(st.c_free, MBARRIER_BYTES * k), guard=st.wg_leader,
                      comment=f"C buffer {k} read by every thread: back to the producer")
        tma.store(b, lw.tmaps["C"], (self.col0(st, j), st.row0), Addr(st.store_base, k * tile.buffer_bytes),
                  guard=st.wg_leader,
                  comment=f"box {tile.rows}x{tile.cols} of C, clipped at M and N")
        tma.bulk_commit_group(b, guard=st.wg_leader, comment=f"chunk {j}'s store")
        if st.c_free is None and self.loads_c and j + 2 < tile.chunks:
            self.load_c(st, j + 2)

    def rows_out(self, frag: tuple[VReg, ...], addrs: list[VReg], m: int, q0: int, nq: int, k: int, col_vec: dict,
                 row_vecs: list[dict]) -> None:
        """The chunk's elements of m64 block m: C read (beta), math, cast, staged. 16-bit outputs
        go per pair of 8-column blocks, both row halves in one stmatrix.x4 (x2 for a last odd
        block); f32 per 8-column block and row half, one st.shared.v2.f32 per thread."""
        b, tile = self.b, self.tile
        off = k * tile.buffer_bytes + 64 * m * tile.pitch
        if self.ob == 2:
            for gi, qb in enumerate(range(0, nq, 2)):
                count = min(2, nq - qb)
                elems = [4 * (q0 + qb + d) + 2 * h + c for d in range(count) for h in (0, 1) for c in (0, 1)]
                old = self.read_c16(Addr(addrs[gi], off), 2 * count) if self.loads_c else None
                vals = [self.element(frag[i], old[n] if old else None, 8 * ((i >> 2) - q0) + (i & 1),
                                     col_vec, row_vecs[(i >> 1) & 1]) for n, i in enumerate(elems)]
                packed = []
                for p in range(0, len(vals), 2):
                    r = b.reg("b32")
                    b.emit(CVT_PACK[self.g.out_dtype], r, vals[p + 1], vals[p], ndefs=1)  # odd column high
                    packed.append(r)
                mb.stmatrix(b, Addr(addrs[gi], off), tuple(packed),
                            comment=f"columns +{8 * qb}..+{8 * (qb + count) - 1}, both row halves")
            return
        for half in (0, 1):
            at = off + 8 * half * tile.pitch
            for q in range(nq):
                i0 = 4 * (q0 + q) + 2 * half
                old = None
                if self.loads_c:
                    old = list(b.regs("f32", 2))
                    ptx.load(b, "shared", F32, Addr(addrs[q], at + self.c_delta), into=Vec(tuple(old)), width=2)
                vals = [self.element(frag[i0 + c], old[c] if old else None, 8 * q + c, col_vec, row_vecs[half])
                        for c in (0, 1)]
                ptx.store(b, "shared", F32, Addr(addrs[q], at), Vec(tuple(vals)), width=2)

    @property
    def c_delta(self) -> int:
        """From a store buffer to the C buffer of the same warpgroup and index."""
        return self.layout.load - self.layout.store

    def read_c16(self, at: Addr, count: int) -> list[VReg]:
        """C's 16-bit values at the staging positions of `count` 8x8 matrices (ldmatrix: the
        inverse of the stmatrix that writes the results), widened to f32 in element order."""
        regs = self.b.regs("b32", count)
        self.b.emit(f"ldmatrix.sync.aligned.m8n8.x{count}.shared.b16", Vec(regs),
                    Addr(at.base, at.offset + self.c_delta), ndefs=1, comment="C values (beta)")
        out: list[VReg] = []
        for r in regs:
            out.extend(self.unpack(r, self.g.out_dtype))
        return out

    def element(self, v: VReg, old: VReg | None, col: int, col_vec: dict, row_vec: dict) -> VReg:
        """apply() with the element's vector values: `col` is its column offset from the thread's
        first column of the chunk. s32 accumulators (s8/u8 inputs) go out as they are for an s32
        output (no epilogue math: verify.py), else through cvt.rn.f32.s32 first, as in epilogue.py."""
        if self.g.out_dtype == "s32":
            return v
        if self.int_to_float:
            v = ptx.cvt(self.b, F32, S32, v, rounding="rn")
        vec = {}
        for name in ("bias", "scale"):
            if name in row_vec:
                vec[name] = row_vec[name]
            elif name in col_vec:
                vec[name] = col_vec[name][col]
        return self.apply(v, old, vec.get("bias"), vec.get("scale"))
