"""Batched sm_90a GEMMs (Gemm(batch=B)): which matrices a CTA multiplies.

Why a module of its own: on the sm_80 path a batched kernel moves its A, B and C pointers by
batch * batch_stride (targets/sm80/context.py: batch_offsets). An sm_90a kernel has no A and B pointers:
its operands are CUtensorMaps, so the batch becomes the outermost dimension of a 3-D tensor
map, (batch, rows, cols) with the operand's batch stride in bytes, and every TMA copy names the
batch as its third coordinate. C, stored directly, still moves by pointer: the kernel takes
`batch_stride_c` (.u64, elements) after ldc, as the sm_80 kernels do; bias and scale are shared
by every batch (as on the sm_80 path).

One CTA per tile: the grid's z dimension is batch * split_k + split (tiles.TileScheduler.z_slot,
as on sm_80): batches are not folded into the tile index, so the grouped raster stays within one
batch. The warp-specialised persistent kernel has a 1-D grid: its walk covers batch x tiles, the
batch outermost, and each role takes the batch (and the consumers C's matrix) per tile
(persistent.py TileWalk).
"""
from __future__ import annotations

from typing import Protocol

from ...ir import Imm, Param, VReg
from ...ir import ops as ptx
from ...ir.ops import U32, U64
from ...emit.memory import ld_param
from ...emit.tiles import TileOps, TileScheduler, ZSlot

#: Appended after ldc when batch > 1: elements between consecutive C matrices.
BATCH_PARAM = Param(".u64", "batch_stride_c")


class BatchOps(TileOps, Protocol):
    """What moving C to a batch needs: the tile scheduler's (builder, problem, sizes)."""


def batch_params(batch: int) -> list[Param]:
    return [BATCH_PARAM] if batch > 1 else []


def z_slot(lw: TileOps) -> ZSlot | None:
    """%ctaid.z as (batch, split), None when the launch has no z dimension."""
    return TileScheduler(lw).z_slot()


def batch_matrix_c(lw: BatchOps, z: ZSlot | None, c: VReg) -> VReg:
    """C moved to the CTA's batch: c + batch * batch_stride_c * element bytes (c itself when not
    batched)."""
    if lw.g.batch == 1:
        return c
    assert z is not None, "a batched launch has a z dimension"
    lw.b.comment("batch: the third tensor-map coordinate of every TMA copy, and C's matrix")
    stride = ld_param(lw.b, "b64", ".u64", BATCH_PARAM.name)
    step = ptx.mul(lw.b, U64, ptx.cvt(lw.b, U64, U32, z.batch), stride)
    return ptx.mad(lw.b, U64, step, Imm(str(lw.g.out_bytes)), c)


def tma_batch_coordinate(lw: TileOps, z: ZSlot | None) -> tuple[VReg, ...]:
    """The TMA copies' extra (outermost) coordinate: (batch,) for a batched GEMM, else ()."""
    if lw.g.batch == 1:
        return ()
    assert z is not None, "a batched launch has a z dimension"
    return (z.batch,)
