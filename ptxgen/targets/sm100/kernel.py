"""The sm_100a GEMM kernel: warp-specialised and persistent, tcgen05.mma into tensor memory, in
the manner of CUTLASS's sm100 warp-specialised GEMM and the Gluon tcgen05 tutorials
(docs/ptx_facts/tcgen05.md; mbarrier.md §9e, tma.md §9d).

Roles (256 threads): warps 0..3 are the epilogue (warp w reads TMEM lanes 32w..32w+31, §12b),
warp 4 the TMA producer (lane 0), warp 5 the MMA warp (lane 0 issues every tcgen05.mma and
tcgen05.commit; the whole warp allocates and frees TMEM); warps 6 and 7 exit after the setup.
Every role walks the same output tiles (tile_scheduler.py): CTA x takes x, x + %nctaid.x, ... (a
static persistent grid of min(tiles, SMs) CTAs), or with tile_scheduler="clc" the tiles of the CTAs
it cancels (cluster launch control); the schedule's raster through the shared tile scheduler, and
a batched GEMM's batch as the TMA copies' third coordinate; a grouped GEMM's roles walk the groups'
tiles counted on the device (grouped.py), B's group as its third coordinate. The epilogue stores C by TMA through
shared memory (epilogue_tma.py) where TMA can write C, else directly (epilogue.py).

Barriers: the ring's full[S] (the producer's expect_tx, completed by TMA) and empty[S] (one
arrival: the MMA warp's `tcgen05.commit` once the MMAs reading the stage completed, the
`Tcgen05Release` strategy of the shared ring); acc_full[2] (one arrival: a commit after a tile's
last MMA) and acc_empty[2] (one arrival per epilogue warp once it has read the accumulator).
With two accumulator buffers (2 * BN <= 512 columns) tile t's epilogue overlaps tile t+1's MMAs.

TMEM is allocated once per CTA by the MMA warp (then relinquish_alloc_permit), its address passed
through shared memory; after the last tile the epilogue warps and the MMA warp meet at named
barrier 1 and the MMA warp frees it.

Clusters (`self.cluster`): a cta_group=1 cluster with TMA multicast (cluster.py) or a CTA pair
(cta_pair.py) supplies its part of each role: the walk over cluster or pair tiles, the producer's
copies, the stage release (a multicast tcgen05.commit), the accumulator commit and release, and
the cluster barriers after the inits and before exit. None keeps the single-CTA kernel above.
"""
from __future__ import annotations

from dataclasses import dataclass

from ...emit import mbarrier_isa as mb
from ...emit.describe import entry_variant
from ...emit.mbarrier_ring import MbarrierRing, PipelineState
from ...emit.memory import bar_sync, ld_param
from ...emit.scalar_ops import ScalarOps
from ...emit.tiles import Tile
from ...ir import Addr, Builder, Function, Imm, Param, Sym, VReg
from ...ir import ops as ptx
from ...ir.ops import B32, B64, U32, U64
from ...schedule.problem import K_PACK, Gemm
from ...schedule.schedule import Schedule
from ...schedule.swizzle import WIDEST_ALIGNMENT
from ..sm90 import tma_isa as tma
from ..sm90.descriptors import CanonicalTile, DescriptorWords, join_words, offset_words
from ..sm90.batch import batch_params
from . import tcgen05_isa as tc
from .cluster import ClusterMulticast
from .cta_pair import CtaPair
from .epilogue import TmemEpilogue
from .epilogue_tma import TmemTmaEpilogue, init_c_barriers
from .plan import EPILOGUE_WARPS, MMA_WARP, TEARDOWN_BARRIER, THREADS, TMA_WARP, sm100_plan
from .scales import KIND_PTX_VERSION, SCALE_MAP_PARAMS, StageScales, scaled_mma
from .store_path import C_MAP_PARAM
from .grouped import grouped_kernel_params, tile_walk
from .tile_scheduler import init_clc_barriers

SMEM_SYMBOL = "smem"
TENSOR_MAP_PARAMS = ("tmapA", "tmapB")
SCALAR_PARAMS = [Param(".u64", "C"), Param(".u32", "M"), Param(".u32", "N"), Param(".u32", "K"), Param(".u32", "ldc")]
VECTOR_PARAMS = ("bias", "scale")


def tensor_map_params(g: Gemm, s: Schedule) -> tuple[str, ...]:
    """A's and B's maps, then A's and B's scales' for a block-scaled kernel (scales.py), then C's
    for the TMA-store epilogue."""
    return (TENSOR_MAP_PARAMS + (SCALE_MAP_PARAMS if g.block_scale is not None else ())
            + ((C_MAP_PARAM,) if sm100_plan(g, s).epilogue_tile is not None else ()))


def param_names(g: Gemm, s: Schedule) -> tuple[str, ...]:
    return tuple(f"{m}[128]" for m in tensor_map_params(g, s)) + tuple(p.name for p in SCALAR_PARAMS)


def kernel_params(g: Gemm, s: Schedule) -> list[Param]:
    after_ldc, last = grouped_kernel_params(g)   # grouped: batch_stride_c when masked, offs / masked_m last
    return ([Param(".align 64 .b8", f"{m}[128]") for m in tensor_map_params(g, s)] + list(SCALAR_PARAMS)
            + batch_params(g.batch) + after_ldc + [Param(".u64", name) for name in VECTOR_PARAMS if getattr(g.epi, name)]
            + last)


def entry_name(g: Gemm, s: Schedule) -> str:
    bm, bn, bk = s.block
    pair = "_pair" if s.cta_group == 2 else ""        # the tile's MMA on a CTA pair (BM is the pair's)
    clc = "_clc" if s.tile_scheduler == "clc" else ""  # tiles taken by cluster launch control
    return (f"ptxgen_gemm_sm100_{g.dtype}{'x' + g.b_dtype if g.b_dtype else ''}_{g.out_dtype}_"
            f"{g.a_layout[0]}{g.b_layout[0]}_{bm}x{bn}x{bk}_s{s.stages}_tcgen05{pair}{clc}{entry_variant(g, s)}")


def descriptor_words(b: Builder, addr: VReg, tile: CanonicalTile) -> DescriptorWords:
    """The sm100 shared-memory descriptor of `tile` at `addr` as two words (§12d): lo = start >> 4
    | LBO >> 4 << 16; hi = SBO >> 4 | the fixed 0b001 at bits 48-46 | swizzle code << 61."""
    hi = (tile.sbo >> 4) | 1 << 14 | tile.swizzle.umma_descriptor_code << 29
    start, lo, high = b.reg("b32"), b.reg("b32"), b.reg("b32")
    b.emit("bfe.u32", start, addr, 4, 14, ndefs=1, comment="descriptor start field: addr[17:4]")
    b.emit("or.b32", lo, start, (tile.lbo >> 4) << 16, ndefs=1, comment=f"| LBO {tile.lbo} B")
    b.emit("mov.u32", high, hi, ndefs=1, comment=f"SBO {tile.sbo} B, version 0b001, {tile.swizzle.name} swizzle")
    return DescriptorWords(lo, high)


@dataclass(frozen=True)
class Tcgen05Release:
    """The ring's stage release on sm_100a: `tcgen05.commit` to empty[index], one arrival once the
    MMAs issued so far by the committing thread (which read the stage) have completed (§12j)."""

    def release(self, ring: MbarrierRing, index: VReg, guard: VReg | None, comment: str) -> None:
        tc.commit(ring.ops.b, ring.empty_barrier(index), guard=guard, comment=comment)


class Sm100Lowering(ScalarOps):
    """Builds one sm_100a kernel (module docstring): the constructor emits the setup every role
    shares and keeps its registers; `lower` emits the roles. `EpilogueMath` reads b, g, s, ptr."""

    def __init__(self, g: Gemm, s: Schedule, offset: int = 0):
        self.g, self.s, self.plan = g, s, sm100_plan(g, s)
        self.offset = offset
        self.b = Builder(entry_name(g, s), kernel_params(g, s))
        self.b.function.directives.append(f".maxntid {THREADS}, 1, 1")
        #: the cluster's part of each role: None (one CTA), a multicast cluster, or a CTA pair
        self.cluster: ClusterMulticast | CtaPair | None = None
        if self.plan.cta_group == 2:
            self.cluster = CtaPair(self)
        elif self.plan.cluster != (1, 1):
            self.cluster = ClusterMulticast(self)
        if self.cluster is not None:  # a 1-D cluster of consecutive CTAs of the 1-D persistent grid
            self.b.function.directives.append(f".reqnctapercluster {self.cluster.size}, 1, 1")
        self.b.function.shared.append((SMEM_SYMBOL, WIDEST_ALIGNMENT, None))
        self.dims: dict[str, VReg] = {}
        self.ptr: dict[str, VReg] = {}
        b, plan = self.b, self.plan
        b.banner("Setup: tensor maps, pointers, 1024-aligned shared ring, barriers, tensor memory")
        self.tid = ptx.mov(b, U32, Sym("%tid.x"))
        warp = ptx.shr(b, U32, self.tid, Imm("5"))
        self.warp = b.reg("b32")
        b.emit("shfl.sync.idx.b32", self.warp, warp, Imm("0"), Imm("31"), Imm("-1"), ndefs=1,
               comment="warp index, warp-uniform for ptxas")
        self.lane = ptx.and_(b, B32, self.tid, Imm("31"))
        self.tmaps = {name: ptx.to_param(b, U64, ptx.mov(b, B64, Sym(param)), comment=f"generic address of {param} (by value)")
                      for name, param in zip(("A", "B") + (("SFA", "SFB") if g.block_scale is not None else ()) + ("C",),
                                             tensor_map_params(g, s))}
        self.scales = StageScales(self, self.plan.scales) if self.plan.scales is not None else None
        if self.plan.scales is not None:
            self.b.function.min_ptx_version = KIND_PTX_VERSION.get(self.plan.scales.kind)
        self.ptr.update({name: ptx.to_global(b, U64, ld_param(b, "b64", ".u64", name))
                         for name in ("C",) + tuple(n for n in VECTOR_PARAMS if getattr(g.epi, n))})
        for n in ("M", "N", "K", "ldc"):
            self.dim(n)
        window = ptx.mov(b, U32, Sym(SMEM_SYMBOL))
        start = ptx.add(b, U32, window, Imm(str(self.offset + WIDEST_ALIGNMENT - 1)))
        self.smem = ptx.and_(b, B32, start, Imm(str(-WIDEST_ALIGNMENT)),
                             comment="ring base rounded up to 1024 B (swizzle pattern, descriptor base offset 0)")
        full = ptx.add(b, U32, self.smem, Imm(str(plan.full)), comment="full barriers")
        empty = ptx.add(b, U32, self.smem, Imm(str(plan.empty)), comment="empty barriers")
        self.acc_full = ptx.add(b, U32, self.smem, Imm(str(plan.acc_full)), comment="accumulator-full barriers")
        self.acc_empty = ptx.add(b, U32, self.smem, Imm(str(plan.acc_empty)), comment="accumulator-empty barriers")
        slot = ptx.add(b, U32, self.smem, Imm(str(plan.tmem_slot)), comment="where tcgen05.alloc writes the TMEM address")
        cl = self.cluster
        if cl is None:
            self.ring = MbarrierRing(self, plan.stages, full, empty, 1).with_release(Tcgen05Release())
        else:
            self.ring = MbarrierRing(self, plan.stages, full, empty, cl.empty_arrivals, scope=cl.acquire_scope)
            self.ring = self.ring.with_release(cl)
            cl.setup()
        acc_empty_arrivals = EPILOGUE_WARPS if cl is None else cl.acc_empty_arrivals
        group = 1 if cl is None else cl.group
        leader = ptx.setp(b, "eq", U32, self.tid, Imm("0"))
        b.comment(f"thread 0: acc_full[0..1] (1 arrival: the MMA warp's commit), acc_empty[0..1] ({acc_empty_arrivals} "
                  f"arrivals: one per epilogue warp); the ring's {plan.stages} full (expect_tx) and empty "
                  "(tcgen05.commit) barriers")
        for buf in range(2):
            mb.init(b, Addr(self.acc_full, 8 * buf), 1, guard=leader)
            mb.init(b, Addr(self.acc_empty, 8 * buf), acc_empty_arrivals, guard=leader)
        self.ring.init(leader)
        self.clc = init_clc_barriers(self, leader)
        init_c_barriers(self, leader)
        if isinstance(cl, CtaPair):
            cl.sync_before_alloc()
        self.is_mma = ptx.setp(b, "eq", U32, self.warp, Imm(str(MMA_WARP)))
        allocated = b.label("tmem_allocated")
        b.emit("bra", Sym(allocated), guard=self.is_mma, negate=True)
        tc.alloc(b, Addr(slot), plan.tmem_columns,
                 comment=f"the MMA warp: {plan.tmem_columns} TMEM columns ({plan.acc_buffers} accumulator(s) of {self.s.bn})",
                 group=group)
        tc.relinquish_alloc_permit(b, comment="this CTA allocates no more", group=group)
        b.place(allocated)
        tc.fence_before_thread_sync(b)
        if cl is None:
            bar_sync(b, comment="barriers initialised and TMEM allocated before any role runs")
        else:
            cl.sync_after_init()
        tc.fence_after_thread_sync(b)
        self.tmem = ptx.load(b, "shared", U32, Addr(slot), comment="TMEM base address (lane 0, first column)")
        self.kt_count = self.ceil_div(self.dim("K"), self.s.bk)

    # -- the roles -----------------------------------------------------------------------------
    def lower(self) -> Function:
        """The role dispatch after the setup the constructor emitted, then each role's code."""
        b = self.b
        epilogue, producer, mma = b.label("epilogue_warps"), b.label("tma_warp"), b.label("mma_warp")
        b.emit("bra", Sym(epilogue), guard=ptx.setp(b, "lt", U32, self.warp, Imm(str(EPILOGUE_WARPS))))
        b.emit("bra", Sym(producer), guard=ptx.setp(b, "eq", U32, self.warp, Imm(str(TMA_WARP))))
        b.emit("bra", Sym(mma), guard=self.is_mma)
        b.emit("ret", comment="warps 6 and 7 have no role")
        b.place(producer)
        self.producer()
        b.place(mma)
        self.mma_warp()
        b.place(epilogue)
        (TmemTmaEpilogue(self) if self.plan.epilogue_tile is not None else TmemEpilogue(self)).emit()
        return b.function

    # -- the tile walk (tile_scheduler.py) --------------------------------------------------------
    def sync_before_exit(self, aligned: bool = True) -> None:
        """With a cluster, the exit barrier every running thread meets (cluster.py, cta_pair.py)."""
        if self.cluster is not None:
            self.cluster.sync_before_exit(aligned)

    def release_accumulator(self, buf: VReg, guard: VReg, comment: str) -> None:
        """An epilogue warp's arrival on acc_empty[buf] (a pair's on the leader's, cta_pair.py)."""
        offset = ptx.shl(self.b, B32, buf, Imm("3"))
        if self.cluster is None:
            mb.arrive(self.b, Addr(ptx.add(self.b, U32, self.acc_empty, offset)), guard=guard, comment=comment)
        else:
            self.cluster.arrive_accumulator_empty(offset, guard, comment)

    def buffer(self, i: VReg) -> tuple[VReg, VReg]:
        """(accumulator buffer, the parity of its use) of the CTA's i-th tile."""
        b = self.b
        if self.plan.acc_buffers == 1:
            return ptx.mov(b, U32, Imm("0")), ptx.and_(b, B32, i, Imm("1"))
        return ptx.and_(b, B32, i, Imm("1")), ptx.and_(b, B32, ptx.shr(b, U32, i, Imm("1")), Imm("1"))

    # -- the TMA warp --------------------------------------------------------------------------
    def producer(self) -> None:
        b, plan, ring = self.b, self.plan, self.ring
        b.banner(f"TMA warp: lane 0 fills the {plan.stages}-stage ring for every tile of the CTA")
        b.emit("ret", guard=ptx.setp(b, "ne", U32, self.lane, Imm("0")), comment="only lane 0 issues copies")
        for t in self.tmaps.values():
            tma.prefetch_tensormap(b, Addr(t), comment="tensor map into the descriptor cache")
        position = ring.start(1, ("producer's ring position, carried across tiles",
                                  "empty-barrier parity the producer waits for (starts 1)"))
        walk = tile_walk(self, "producer", cancels=True)
        wt = walk.begin()
        kt = ptx.mov(b, U32, Imm("0"))
        state = position.counting(kt)
        top = b.label("producer_k_loop")
        b.place(top)
        ring.producer_acquire(state, comment="the MMAs reading this stage completed (their commit arrived)")
        if self.cluster is None:
            self.issue_stage(state, wt.tile, wt.batch, wt.b_coord)
        else:
            self.cluster.issue_stage(state, wt.tile, wt.batch)
        ring.advance(state)
        b.emit("bra", Sym(top), guard=ptx.setp(b, "lt", U32, kt, self.kt_count))
        walk.end()
        self.sync_before_exit(aligned=False)
        b.emit("ret")

    def issue_stage(self, state: PipelineState, tile: Tile, batch: VReg | None = None,
                    b_batch: VReg | None = None) -> None:
        """Arm full[stage] for the stage's bytes and issue the A and B boxes of k-tile `state.count`
        (before its advance); out-of-bounds parts are zero-filled and count towards the bytes.
        `batch`: A's third coordinate; `b_batch`: B's (a grouped B's group), else `batch`."""
        b, plan = self.b, self.plan
        bar = self.ring.producer_commit(state.index, plan.stage_tx_bytes,
                                        comment=f"expect {plan.stage_tx_bytes} B (A and B boxes, OOB fill included)")
        base = ptx.add(b, U32, self.smem, ptx.mul(b, U32, state.index, Imm(str(plan.stage_bytes))))
        assert state.count is not None
        k0 = ptx.mul(b, U32, state.count, Imm(str(self.s.bk // K_PACK.get(self.g.dtype, 1))))  # fp4: bytes of K
        third = {"A": batch, "B": batch if b_batch is None else b_batch}
        for name, box, origin, offset in (("A", plan.a_box, tile.bm0, 0), ("B", plan.b_box, tile.bn0, plan.a_stage)):
            assert box is not None and plan.swizzle is not None
            for j in range(box.count):  # box j: the j-th swizzle-wide block of the contiguous extent
                dst = ptx.add(b, U32, base, Imm(str(offset + j * box.outer * plan.swizzle)))
                if box.k_major:
                    inner, outer = (ptx.add(b, U32, k0, Imm(str(j * box.inner))) if j else k0), origin
                else:
                    inner, outer = (ptx.add(b, U32, origin, Imm(str(j * box.inner))) if j else origin), k0
                coords = (inner, outer) + ((third[name],) if third[name] is not None else ())
                tma.load(b, Addr(dst), self.tmaps[name], coords, bar,
                         comment=f"{name} box {box.outer}x{box.inner} ({'K' if box.k_major else 'MN'}-major), block {j}")
        if self.scales is not None:
            self.scales.issue_loads(base, state.count, bar, tile, group=b_batch if self.g.grouped else None)

    # -- the MMA warp --------------------------------------------------------------------------
    def mma_warp(self) -> None:
        b, plan, ring, s = self.b, self.plan, self.ring, self.s
        bm, bn, k = plan.mma
        b.banner(f"MMA warp: lane 0 issues {s.bk // k} tcgen05.mma.kind::{plan.kind} (M{bm} N{bn} K{k}) per k-tile "
                 "into the tile's accumulator buffer, commits each stage to its empty barrier and the tile to "
                 "acc_full; the whole warp waits, allocates and frees")
        elected = ptx.setp(b, "eq", U32, self.lane, Imm("0"))
        assert plan.a_tile is not None and plan.b_tile is not None
        desc_a = descriptor_words(b, self.smem, plan.a_tile)
        desc_b = descriptor_words(b, ptx.add(b, U32, self.smem, Imm(str(plan.a_stage))), plan.b_tile)
        idesc = ptx.mov(b, U32, Imm(str(plan.idesc)),
                        comment=f"instruction descriptor {plan.idesc:#010x}: f32 D, M {bm}, N {bn}")
        position = ring.start(0, ("MMA warp's ring position, carried across tiles",
                                  "full-barrier parity the MMA warp waits for"))
        i = ptx.mov(b, U32, Imm("0"), comment="tiles this CTA has done: picks the accumulator buffer")
        walk = tile_walk(self, "mma")
        wt = walk.begin()
        cl = self.cluster
        if cl is not None and cl.issues_mma is not None:
            b.emit("bra", Sym(walk.done), guard=cl.issues_mma, negate=True,
                   comment="the peer CTA's MMA warp only allocates and frees: the leader issues the pair's MMAs")
        b_offset = self.scales.b_column(wt.tile) if self.scales is not None else None
        buf, use = self.buffer(i)
        mb.wait_parity(b, Addr(ptx.add(b, U32, self.acc_empty, ptx.shl(b, B32, buf, Imm("3")))),
                       ptx.xor(b, B32, use, Imm("1")), "wait_acc_empty",
                       comment="the epilogue has read this buffer's previous tile (a fresh one passes)",
                       scope="cta" if cl is None else cl.acc_empty_scope)
        tc.fence_after_thread_sync(b)
        d = ptx.add(b, U32, self.tmem, ptx.mul(b, U32, buf, Imm(str(bn))), comment="the buffer's first column")
        kt = ptx.mov(b, U32, Imm("0"))
        state = position.counting(kt)
        top = b.label("mma_k_loop")
        b.place(top)
        ring.consumer_wait(state, comment="the stage's bytes landed")
        tc.fence_after_thread_sync(b)
        step = ptx.mul(b, U32, state.index, Imm(str(plan.stage_bytes // 16)))
        a_words, b_words = offset_words(b, desc_a, step), offset_words(b, desc_b, step)
        first = ptx.setp(b, "ne", U32, kt, Imm("0"), comment="accumulate after the tile's first k-tile")
        if self.scales is not None:
            cols = self.scales.stage_columns(self.tmem, state.index)
            self.scales.copy(ptx.add(b, U32, self.smem, ptx.mul(b, U32, state.index, Imm(str(plan.stage_bytes)))),
                             cols, elected)
            b_cols = self.scales.b_columns(cols, b_offset)
            sp = self.scales.plan
            idescs = {sf: ptx.mov(b, U32, Imm(str(sp.idesc(self.g, bm, bn, sf))), comment=f"SFA_ID = SFB_ID = {sf}")
                      for sf in sorted({sp.groups_of(kk)[1] for kk in range(0, s.bk, k)})}
        for kk in range(0, s.bk, k):
            kk_stored = kk // K_PACK.get(self.g.dtype, 1)   # fp4: two values per byte along K
            da = join_words(b, offset_words(b, a_words, plan.a_tile.descriptor(0, 0, kk_stored).start // 16))
            db = join_words(b, offset_words(b, b_words, plan.b_tile.descriptor(0, 0, kk_stored).start // 16))
            if self.scales is not None:
                sfa, sfb = self.scales.addresses(cols, b_cols, kk)
                scaled_mma(b, sp, Addr(d), da, db, idescs[sp.groups_of(kk)[1]], sfa, sfb, first if kk == 0 else 1,
                           guard=elected, comment=f"k+{kk}, scale group {kk // sp.group_k}", group=plan.cta_group)
                continue
            tc.mma(b, plan.kind, Addr(d), da, db, idesc, first if kk == 0 else 1, guard=elected,
                   comment=f"k+{kk}", group=plan.cta_group)
        ring.consumer_release(state.index, elected, "the stage is free once these MMAs completed")
        ring.advance(state)
        b.emit("bra", Sym(top), guard=ptx.setp(b, "lt", U32, kt, self.kt_count))
        acc_full = Addr(ptx.add(b, U32, self.acc_full, ptx.shl(b, B32, buf, Imm("3"))))
        if cl is None:
            tc.commit(b, acc_full, guard=elected, comment="the tile's accumulator is complete once every MMA so far completed")
        else:
            cl.commit_accumulator(acc_full, elected, "the tile's accumulator is complete once every MMA so far completed")
        ptx.add(b, U32, i, Imm("1"), into=i)
        walk.end()
        bar_sync(b, barrier=TEARDOWN_BARRIER, threads=32 * (EPILOGUE_WARPS + 1),
                 comment="the epilogue warps have read every accumulator")
        tc.fence_after_thread_sync(b)
        tc.dealloc(b, self.tmem, plan.tmem_columns, comment="free the CTA's tensor memory", group=plan.cta_group)
        self.sync_before_exit()
        b.emit("ret")


def lower_sm100(g: Gemm, s: Schedule, offset: int = 0) -> Function:
    return Sm100Lowering(g, s, offset).lower()
