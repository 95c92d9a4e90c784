"""Block-scaled MMAs on sm_100a, with the scale factors in tensor memory (docs/ptx_facts/tcgen05.md
§12h), loaded by TMA into each ring stage next to the A and B tiles and copied into TMEM with
tcgen05.cp (§12g) by the MMA thread before the MMAs of that stage:
* MXFP8: `Gemm(dtype="e4m3"/"e5m2", block_scale=BlockScale(a=(1, 32), b=(32, 1), dtype="ue8m0"))`,
  tcgen05.mma.kind::mxf8f6f4.block_scale.scale_vec::1X (K = 32 per MMA, one scale per row);
* MXFP4: `dtype="e2m1"` with the same BlockScale, kind::mxf4.block_scale.scale_vec::2X (K = 64 per
  MMA from 32 packed bytes, two scales per row: SF_ID 0 and 2);
* NVFP4: `dtype="e2m1"`, `BlockScale(a=(1, 16), b=(16, 1), dtype="ue4m3")`, kind::mxf4nvf4
  .block_scale.scale_vec::4X (four per-16 scales per row, SF_ID 0). NVFP4's per-tensor f32 scale
  (global_a * global_b) is the epilogue's alpha: `Epilogue(alpha=global_a * global_b)`, applied to
  the f32 accumulator before the cast (emit/epilogue/math.py).
fp4 operands are packed two per byte along K (runtime/fp4.py): the plan and the TMA boxes count
bytes of K, BK / 2 per k-tile.

Layout (runtime/scale_layout.py): blocks of 128 rows x 4 K groups, 512 bytes each. Per k-tile a
stage holds BK / (4 * 32) blocks of A's scales and as many per 128 rows of B's; block (a, d) goes
by one tcgen05.cp.32x128b.warpx4 to 4 TMEM columns (its rows to all four lane quarters). The MMA
covering K groups 4d + e (and the next ones of a 2X/4X MMA) reads its scales at the block's first
column with SF_ID = e, the byte (1X), half-word (2X) or word (4X) of each 32-bit column.

Ordering: the copies and the MMAs reading them are issued by the same thread, cp before mma, which
the ISA pipelines (§12j: cp -> mma needs no wait; the simulator's tmem_order.py checks the MMA is
ordered after the cp). Each stage has its own TMEM scale columns: a stage's columns are rewritten
only after the producer saw the stage's empty barrier, which the commit after the MMAs reading them
arrives on, so no copy overwrites scales an MMA still reads.

Tiles: BM = 128 (the block-scaled kinds at cta_group::1, §12h); BN 32, 64, 128 or 256, and a BN < 128
tile reads its rows' scales from column (n0 % 128) / 32 of its block (row r at column r >> 5); BK a
multiple of 4 groups (whole blocks: 128 for MX, 64 for NVFP4).

Masked grouped GEMMs (grouped.py; MXFP8 only, the verifier refuses the rest): each group's blocks are
stacked along the row blocks of one tensor map per operand (runtime/scale_layout.py), so a tile of
group g loads row block g * ceil(max_m/128) + bm0 / 128 of A's and g * ceil(N/128) + bn0 / 128 of B's.

CTA pair (cta_group=2, cta_pair.py; BM = 256, the pair's BN as above): a pair MMA scales each CTA's
128 rows of A by the SFA in that CTA's TMEM and all the pair's N rows of B by the SFB in that CTA's
TMEM (§12h, "SFB stays full per CTA"). So each CTA TMA-loads its own rows' A-scale block and the
B-scale blocks of the whole pair tile into its stage (the same bytes in both CTAs, on the leader's
full barrier), and the leader's MMA thread issues tcgen05.cp.cta_group::2, which copies each CTA's
stage into that CTA's TMEM at the same columns (§12g), then the .cta_group::2 MMAs. M = 128 pairs
(layout B) are refused: the simulator does not model where their scales sit (§12i).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ...errors import LoweringNotBuilt, ScheduleError
from ...ir import Addr, Builder, Imm, Instr, VReg
from ...ir import ops as ptx
from ...ir.ops import B32, U32
from ...runtime.scale_layout import BLOCK_BYTES, BLOCK_GROUPS, BLOCK_ROWS, MAP_ROW, stacked_shapes
from ...schedule.problem import Gemm
from ...schedule.schedule import Schedule
from ..sm90 import tma_isa as tma
from ..sm90.descriptors import DescriptorWords, join_words
from .kinds import TYPE_CODE

if TYPE_CHECKING:
    from .kernel import Sm100Lowering

#: The scale tensor maps' parameters, after tmapA and tmapB.
SCALE_MAP_PARAMS = ("tmapSFA", "tmapSFB")
#: (family, fp4 inputs) -> (kind, the .block_scale qualifier, K per MMA) (§12h): MXFP8 one scale per
#: row per MMA (1X), MXFP4 two (2X: SF_ID 0 or 2), NVFP4 four per-16 scales (4X: SF_ID 0). The
#: qualifiers are PTX 8.6's spelling: ptxas 13 refuses the newer .block32/.block16 under the
#: kernel's `.version 8.6` ("Feature '.block32' requires PTX ISA .version 8.8 or later").
KINDS = {("mx", False): ("mxf8f6f4", "scale_vec::1X", 32), ("mx", True): ("mxf4", "scale_vec::2X", 64),
         ("nv", True): ("mxf4nvf4", "scale_vec::4X", 64)}
#: The PTX ISA a kind needs above the target's 8.6: ptxas 13 says "Feature '.kind::mxf4nvf4' requires
#: PTX ISA .version 8.7 or later" (and the same of .scale_vec::4X).
KIND_PTX_VERSION = {"mxf4nvf4": (8, 7)}
#: The A/B type code of e2m1 under kind::mxf4 / mxf4nvf4 (Tables 43/44; f8f6f4 kinds use TYPE_CODE).
FP4_TYPE_CODE = 1
#: TMEM columns one 128x4 block fills (32 rows x 16 bytes copied to 4 columns, §12g).
BLOCK_COLUMNS = 4
#: The tcgen05.cp source descriptor's high word: SBO 128 B (dense 16-byte rows in 8-row core
#: matrices), the sm100 constant 0b001 at bits 46-48, no swizzle (Triton's 0x4008, §12g).
CP_DESCRIPTOR_HI = (128 >> 4) | 1 << 14


@dataclass(frozen=True)
class ScalePlan:
    """The numbers of a block-scaled tcgen05 schedule (module docstring)."""

    kind: str
    qualifier: str
    group_k: int
    mma_k: int
    scale_type: str
    k_blocks: int        # 128x4 blocks along K per k-tile
    b_row_blocks: int    # 128-row blocks of B's scales per tile (1 for BN <= 128)
    type_code: int       # A's type code in the instruction descriptor
    b_type_code: int     # B's (mixed fp8: the other fp8 format)

    @property
    def a_bytes(self) -> int:
        return BLOCK_BYTES * self.k_blocks

    @property
    def b_bytes(self) -> int:
        return BLOCK_BYTES * self.k_blocks * self.b_row_blocks

    @property
    def tx_bytes(self) -> int:
        return self.a_bytes + self.b_bytes

    @property
    def a_columns(self) -> int:
        return BLOCK_COLUMNS * self.k_blocks

    @property
    def stage_columns(self) -> int:
        """TMEM columns of one stage's scales: A's blocks, then B's (k block d, row block a at 4 (d rb + a))."""
        return BLOCK_COLUMNS * self.k_blocks * (1 + self.b_row_blocks)

    def boxes(self) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
        """The TMA boxes (row blocks, 256-byte rows, 256) of A's and B's scales per k-tile."""
        rows = 2 * self.k_blocks
        return (1, rows, MAP_ROW), (self.b_row_blocks, rows, MAP_ROW)

    def groups_of(self, kk: int) -> tuple[int, int]:
        """(k block, SF_ID) of the MMA at K offset kk of the k-tile."""
        group = kk // self.group_k
        return group // BLOCK_GROUPS, group % BLOCK_GROUPS

    def idesc(self, g: Gemm, bm: int, bn: int, sf_id: int) -> int:
        """The block-scaled kinds' instruction descriptor (§12h, Tables 43/44): SFB_ID bits 4-5, A and B
        types 7-9 / 10-12, N >> 3 in 17-22, the scale type in 23 (ue8m0 1), M >> 4 in 24-28, SFA_ID
        in 29-30; K-major operands (transpose bits 0)."""
        return (sf_id << 4 | self.type_code << 7 | self.b_type_code << 10 | (bn >> 3) << 17 | int(self.scale_type == "ue8m0") << 23
                | (bm >> 4) << 24 | sf_id << 29)


def scale_plan(g: Gemm, s: Schedule) -> ScalePlan | None:
    """The scale numbers of a block-scaled schedule (None without block scaling, or for a family
    the verifier refuses)."""
    bs = g.block_scale
    fp4 = g.dtype == "e2m1"
    if bs is None or (bs.family, fp4) not in KINDS:
        return None
    kind, qualifier, mma_k = KINDS[bs.family, fp4]
    bk, bn = s.bk, s.bn
    return ScalePlan(kind, qualifier, bs.group_k, mma_k, bs.dtype, max(1, bk // (BLOCK_GROUPS * bs.group_k)),
                     max(1, -(-bn // BLOCK_ROWS)), FP4_TYPE_CODE if fp4 else TYPE_CODE[g.dtype],
                     FP4_TYPE_CODE if fp4 else TYPE_CODE[g.in_dtype_b])


def verify_scales(g: Gemm, s: Schedule) -> None:
    """The sm_100a block-scaling rules, each naming the field, the rule and the fix."""
    bs = g.block_scale
    if bs is None:
        return
    if (bs.family, g.dtype == "e2m1") not in KINDS:
        raise ScheduleError("gemm.block_scale", bs, f"{bs.family} scaling of {g.dtype} is not lowered for tcgen05 "
                            "(built: MXFP8 and MXFP4 with BlockScale(a=(1, 32), b=(32, 1), dtype='ue8m0'), NVFP4 "
                            "with BlockScale(a=(1, 16), b=(16, 1), dtype='ue4m3') and e2m1)",
                            "use one of those pairs")
    if g.dtype == "e2m1" and g.k % 32:
        raise ScheduleError("gemm.k", g.k, "packed fp4 rows hold K/2 bytes, which TMA needs a multiple of 16",
                            f"pad K to {-(-g.k // 32) * 32} with zeros (and the scales with any value)")
    bm, bn, bk = s.block
    if s.cta_group == 2 and bm == 128:
        raise LoweringNotBuilt("schedule.block.BM", bm, "block scaling on a CTA pair is built for the pair's M = 256 "
                               "(128 rows and their scales per CTA); at M = 128 each CTA's 64 rows and their scale "
                               "factors sit in TMEM layout B, given only by the ISA's figures, so the simulator that "
                               "proves the kernels does not model it (tcgen05.md §12h, §12i)",
                               f"use block=(256, {bn}, {bk}) with cta_group=2, or cta_group=1 with block=(128, {bn}, {bk})")
    if s.cta_group != 2 and bm != 128:
        raise ScheduleError("schedule.block.BM", bm, "block-scaled tcgen05.mma kinds have M = 128 at cta_group::1 "
                            "(tcgen05.md §12h)", f"use block=(128, {bn}, {bk})")
    per_block = BLOCK_GROUPS * bs.group_k
    if bk % per_block:
        raise ScheduleError("schedule.block.BK", bk, f"a k-tile holds whole 128-row x 4-group scale blocks "
                            f"({per_block} of K each)", f"use BK = {max(per_block, bk - bk % per_block)}")
    if bn not in (32, 64, 128, 256):
        raise ScheduleError("schedule.block.BN", bn, "a tile's B-scale rows start on a 32-row TMEM column of its "
                            "128-row scale block: BN must be 32, 64, 128 or 256",
                            f"use BN = {max(x for x in (32, 64, 128, 256) if x <= max(bn, 32))}")
    if g.a_layout != "row" or g.b_layout != "col":
        raise ScheduleError("gemm.layout", f"{g.a_layout}/{g.b_layout}", "block-scaled operands are K-major only",
                            "pass A row-major and B column-major")


def cp_descriptor(b: Builder, smem: VReg) -> DescriptorWords:
    """The tcgen05.cp source descriptor of one 512-byte block at `smem` (CP_DESCRIPTOR_HI)."""
    lo, hi = b.reg("b32"), b.reg("b32")
    b.emit("bfe.u32", lo, smem, 4, 14, ndefs=1, comment="descriptor start field: addr[17:4] (LBO 0)")
    b.emit("mov.u32", hi, CP_DESCRIPTOR_HI, ndefs=1, comment="SBO 128 B, version 0b001, no swizzle")
    return DescriptorWords(lo, hi)


def cp_32x128b_warpx4(b: Builder, taddr: Addr, desc: VReg, guard: VReg | None, comment: str, group: int = 1) -> Instr:
    """One thread: 32 rows x 16 bytes from shared memory to every TMEM lane quarter (§12g); with
    group 2 each CTA of the pair copies its own shared memory into its own TMEM at `taddr`."""
    return b.emit(f"tcgen05.cp.cta_group::{group}.32x128b.warpx4", taddr, desc, guard=guard, comment=comment)


def scaled_mma(b: Builder, plan: ScalePlan, d: Addr, a_desc: VReg, b_desc: VReg, idesc: VReg, sfa: Addr,
               sfb: Addr, accumulate: VReg | int, guard: VReg | None, comment: str, group: int = 1) -> Instr:
    acc = Imm(str(accumulate)) if isinstance(accumulate, int) else accumulate
    return b.emit(f"tcgen05.mma.cta_group::{group}.kind::{plan.kind}.block_scale.{plan.qualifier}", d, a_desc, b_desc,
                  idesc, sfa, sfb, acc, guard=guard, comment=comment)


class StageScales:
    """The scale side of the kernel's roles (kernel.py calls it where the block-scaled kernel
    differs): the producer's two extra TMA boxes per stage, and the MMA thread's copies."""

    def __init__(self, lw: "Sm100Lowering", plan: ScalePlan):
        self.lw, self.plan = lw, plan

    def issue_loads(self, base: VReg, k_tile: VReg, bar: Addr, tile, load=tma.load,
                    group: VReg | None = None) -> None:
        """A's and B's scale boxes of k-tile `k_tile` into the stage at `base` (after A and B). A pair's
        CTA passes its own rows' origin in `tile.bm0`, the pair's columns in `tile.bn0` (each CTA holds
        the scales of all the pair's B rows, §12h) and `load` completing on the leader's barrier. A
        masked grouped tile passes its `group`: the groups' blocks are stacked along the row blocks
        (runtime/scale_layout.py), ceil(max_m/128) of A's and ceil(N/128) of B's per group."""
        lw, b, p = self.lw, self.lw.b, self.plan
        offset = lw.plan.a_stage + lw.plan.b_stage
        row = ptx.mul(b, U32, k_tile, Imm(str(2 * p.k_blocks)), comment="the k-tile's first 256-byte scale row")
        operands = (("SFA", tile.bm0, offset, lw.g.m), ("SFB", tile.bn0, offset + p.a_bytes, lw.g.n))
        for name, origin, at, rows in operands:
            block = ptx.shr(b, U32, origin, Imm(str(BLOCK_ROWS.bit_length() - 1)), comment="its 128-row scale block")
            if group is not None:
                per_group = -(-rows // BLOCK_ROWS)
                block = ptx.mad(b, U32, group, Imm(str(per_group)), block,
                                comment=f"{name}: + group * {per_group} (the group's first block, groups stacked)")
            dst = ptx.add(b, U32, base, Imm(str(at)))
            load(b, Addr(dst), lw.tmaps[name], (Imm("0"), row, block), bar,
                 comment=f"{name}: {p.k_blocks} block(s) of 128 rows x 4 groups per row block")

    def stage_columns(self, tmem: VReg, index: VReg) -> VReg:
        """The TMEM address of the stage's scale columns (after the accumulators)."""
        lw, b = self.lw, self.lw.b
        first = lw.plan.acc_buffers * lw.s.bn
        col = ptx.mul(b, U32, index, Imm(str(self.plan.stage_columns)))
        return ptx.add(b, U32, ptx.add(b, U32, tmem, Imm(str(first))), col,
                       comment="this stage's scale columns: A's blocks, then B's")

    def copy(self, smem_stage: VReg, cols: VReg, guard: VReg) -> None:
        """The stage's blocks to its TMEM columns, one tcgen05.cp each, issued before its MMAs."""
        lw, b, p = self.lw, self.lw.b, self.plan
        at, group = lw.plan.a_stage + lw.plan.b_stage, lw.plan.cta_group
        copies = [("SFA", d, 0, at + d * BLOCK_BYTES, BLOCK_COLUMNS * d) for d in range(p.k_blocks)]
        copies += [("SFB", d, a, at + p.a_bytes + (a * p.k_blocks + d) * BLOCK_BYTES,
                    p.a_columns + BLOCK_COLUMNS * (d * p.b_row_blocks + a))
                   for d in range(p.k_blocks) for a in range(p.b_row_blocks)]
        for name, d, a, offset, col in copies:
            desc = join_words(b, cp_descriptor(b, ptx.add(b, U32, smem_stage, Imm(str(offset)))))
            cp_32x128b_warpx4(b, Addr(cols, col), desc, guard, f"{name} block (rows {128 * a}.., k block {d}) "
                              "to TMEM: its MMAs below are ordered after it (same thread, cp -> mma)"
                              + (" in both CTAs, each from its own stage" if group == 2 else ""), group)

    def b_column(self, tile) -> VReg | None:
        """BN < 128: the column of the tile's first B-scale row in its block, (n0 % 128) / 32."""
        if self.lw.s.bn >= BLOCK_ROWS:
            return None
        b = self.lw.b
        return ptx.and_(b, B32, ptx.shr(b, U32, tile.bn0, Imm("5")), Imm("3"),
                        comment="B-scale column of the tile's rows within the 128-row block")

    def b_columns(self, cols: VReg, b_offset: VReg | None) -> VReg:
        """The stage's B-scale base address for this tile's rows (`b_column`'s offset added)."""
        return cols if b_offset is None else ptx.add(self.lw.b, U32, cols, b_offset)

    def addresses(self, cols: VReg, b_cols: VReg, kk: int) -> tuple[Addr, Addr]:
        """[sfa], [sfb] of the MMA at K offset kk."""
        p = self.plan
        d, _ = p.groups_of(kk)
        return Addr(cols, BLOCK_COLUMNS * d), Addr(b_cols, p.a_columns + BLOCK_COLUMNS * d * p.b_row_blocks)


def scale_tensor_maps(kernel, views: tuple, ptrs: list[int]) -> list[bytes]:
    """The driver path's CUtensorMaps of the blocked scales (runtime/scale_layout.py): `views[3:5]`
    and `ptrs[3:5]` are A's and B's blocked arrays, (row blocks, 2 * K blocks, 256) uint8 each (a
    masked grouped GEMM's row blocks G times over: `stacked_shapes`)."""
    import numpy as np

    from ...runtime.tensormaps import encode_tiled
    from ..sm90.args import _DeviceMatrix

    out = []
    for spec, shape, view, ptr in zip(kernel.tensor_maps[2:], stacked_shapes(kernel.gemm), views[3:5], ptrs[3:5]):
        strides = (shape[1] * shape[2], shape[2], 1)
        out.append(encode_tiled(_DeviceMatrix(ptr, shape, strides, np.dtype(np.uint8)), spec.box, swizzle="none").raw)
    return out


def check_scaled_params(kernel, decls: list) -> list:
    """A block-scaled sm_100a kernel's parameters: tmapA, tmapB, tmapSFA, tmapSFB (.b8 [128]), C (.u64),
    M, N, K, ldc (.u32), then the epilogue's bias and scale pointers (.u64) when it has them; the
    scales come by tensor map, not by pointer and strides as on sm_90a. A masked grouped kernel has
    batch_stride_c (.u64) after ldc and masked_m (.u64) last."""
    g = kernel.gemm
    grouped = 2 * int(getattr(g, "grouped", False))
    maps, vectors = len(kernel.tensor_maps), int(bool(g.epi.bias)) + int(bool(g.epi.scale)) + grouped
    ok = (len(decls) == maps + 5 + vectors and all(d.is_array and d.nbytes == 128 for d in decls[:maps])
          and decls[maps].is_pointer_sized and all(d.type[1:] == "32" for d in decls[maps + 1:maps + 5])
          and all(d.is_pointer_sized for d in decls[maps + 5:]))
    if not ok:
        raise ValueError(f"entry {kernel.entry} declares parameters {[f'{d.name}:.{d.type}' for d in decls]}; "
                         f"ptxgen's block-scaled sm_100a kernels take {maps} tensor maps (.param .align 64 .b8 "
                         "[128]: A, B, A's and B's scales), then C (.u64), M, N, K, ldc (.u32), a masked grouped "
                         "kernel's batch_stride_c (.u64), the bias and scale pointers (.u64) when the epilogue "
                         "has them, and a grouped kernel's masked_m (.u64) last")
    return decls


def packed_operand_maps(kernel, views: tuple, ptrs: list[int]) -> list[bytes]:
    """The driver path's CUtensorMaps of packed fp4 A and B (runtime/fp4.py): uint8 maps over their
    K-contiguous (rows, K/2) views, with the boxes of `kernel.tensor_maps` (bytes of K)."""
    import numpy as np

    from ...runtime.tensormaps import encode_tiled
    from ..sm90.args import _DeviceMatrix

    out = []
    for spec, v, ptr in zip(kernel.tensor_maps[:2], views[:2], ptrs[:2]):
        (r, c), (sr, sc) = v.shape, v.strides
        shape, strides = ((c, r), (sc, sr)) if spec.operand == "B" else ((r, c), (sr, sc))   # both K-major
        out.append(encode_tiled(_DeviceMatrix(ptr, shape, strides, np.dtype(np.uint8)), spec.box,
                                swizzle=spec.swizzle).raw)
    return out


def describe_scales(g: Gemm, plan: ScalePlan, stages: int, first_column: int) -> str:
    """One line for the PTX header and `ptxgen info`: the scales' format, layout and staging."""
    bs = g.block_scale
    return (f"block scales: {bs.dtype} per {bs.group_k} of K ({bs.family}), tcgen05.mma.kind::{plan.kind}.block_scale."
            f"{plan.qualifier}; tmapSFA/tmapSFB over 128x4 blocks ({plan.k_blocks} + {plan.k_blocks * plan.b_row_blocks}"
            f" per k-tile, {plan.tx_bytes} B per stage), tcgen05.cp.32x128b.warpx4 by the MMA thread into "
            f"{plan.stage_columns} TMEM columns per stage from column {first_column} ({stages} stages)")
