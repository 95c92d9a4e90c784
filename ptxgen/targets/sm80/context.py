"""What an sm_80 / wmma kernel sets once, as a value: `kernel_context` emits the setup's first part
(the parameters, %tid.x, the CTA's batch and split slot, the sizes, the shared window) and returns
an `Sm80Context`, from which `GemmLowering` is then built; nothing writes it afterwards, as with
sm_90a's `Sm90Context` (targets/sm90/context.py).
"""
from __future__ import annotations

from dataclasses import dataclass

from ...ir import Builder, Imm, Sym, VReg, ops as ptx
from ...ir.ops import U32, U64
from ...schedule.problem import Gemm
from ...schedule.schedule import Schedule
from ...emit.groups import GroupSlot, GroupWalk, k_slice
from ...emit.index import ExprEmitter
from ...emit.memory import load_param
from ...emit.scalar_ops import ScalarOps
from ...emit.tiles import ZSlot, z_slot

SMEM_SYMBOL = "smem"


@dataclass(frozen=True, eq=False)
class Sm80Context:
    """One kernel's builder, problem, schedule and kernel-invariant registers.

    `ptr`: global pointers (A, B, C moved to the CTA's batch, then bias / scale / workspace /
    counters when present); Stream-K moves A, B and C per work unit (`batch_offsets`). `dims`:
    the lazily filled cache of .u32 size parameters (ScalarOps.dim). `z`: %ctaid.z as (batch,
    split), when the grid has a z dimension (never for Stream-K, whose units pick their batch)."""

    b: Builder
    dims: dict[str, VReg]
    g: Gemm
    s: Schedule
    tid: VReg
    ex: ExprEmitter            # per-thread index expressions over %tid.x
    ptr: dict[str, VReg]
    smem: VReg                 # shared window address of the tile buffers
    z: ZSlot | None
    #: Grouped GEMMs: the CTA's group (its rows are dims["M"]; A, B and C already point at it) and
    #: the label CTAs without a tile branch to (placed before the final ret); None otherwise.
    group: GroupSlot | None = None
    absent: str | None = None


def needs_workspace(s: Schedule) -> bool:
    """Workspace split-K and Stream-K take the workspace and counters pointers."""
    return (s.split_k > 1 and s.split_k_mode == "workspace") or s.stream_k


def kernel_context(b: Builder, g: Gemm, s: Schedule, banner: str) -> Sm80Context:
    """Emit the kernel-invariant registers under `banner` and return them: %tid.x and the global
    pointers, then (not for Stream-K) the z slot and the batch's A, B and C, then the sizes and
    the shared window."""
    b.banner(banner)
    tid = ptx.mov(b, U32, Sym("%tid.x"))
    ex = ExprEmitter(b, tid)
    extra = ((("bias",) if g.epi.bias else ()) + (("scale",) if g.epi.scale else ())
             + (("workspace", "counters") if needs_workspace(s) else ()))
    ptr = {name: ptx.to_global(b, U64, load_param(b, U64, name)) for name in ("A", "B", "C") + extra}
    if g.grouping == "k-contiguous":
        return k_grouped_context(b, g, s, tid, ex, ptr)
    if g.grouped:
        return grouped_context(b, g, s, tid, ex, ptr)
    z = None if s.stream_k else z_slot(b, g, s)
    if g.batch > 1 and not s.stream_k:
        assert z is not None
        batch_offsets(b, g, ptr, z.batch, dict(ptr))
    dims = {n: load_param(b, U32, n) for n in ("K", "lda", "ldb", "ldc")}
    smem = ptx.mov(b, U32, Sym(SMEM_SYMBOL), comment="shared window address of the tile buffers")
    return Sm80Context(b, dims, g, s, tid, ex, ptr, smem, z)


class _WalkOps(ScalarOps):
    """What `GroupWalk` asks of a lowering (`emit.tiles.TileOps`), before the lowering exists: the
    builder, the problem and schedule, and the scalar helpers over the sizes loaded so far."""

    def __init__(self, b: Builder, g: Gemm, s: Schedule, dims: dict[str, VReg]):
        self.b, self.g, self.s, self.dims = b, g, s, dims


def grouped_context(b: Builder, g: Gemm, s: Schedule, tid: VReg, ex: ExprEmitter, ptr: dict[str, VReg]) -> Sm80Context:
    """A grouped GEMM's context: the group walk (emit/groups.py) finds the CTA's group from
    %ctaid.y (its m-tile over the groups, or within the masked group %ctaid.z); A, B and C move to
    the group (contiguous: A and C by the group's first row, B by its group stride; masked: all three
    by their group strides) and M becomes the group's row count, which the edge checks use."""
    dims = {n: load_param(b, U32, n) for n in ("K", "lda", "ldb", "ldc")}
    absent = b.label("no_tile")
    slot = GroupWalk(_WalkOps(b, g, s, dims), absent).find(ptx.mov(b, U32, Sym("%ctaid.y")))
    if g.grouping == "masked":
        batch_offsets(b, g, ptr, slot.group, dict(ptr))
    else:
        assert slot.row0 is not None
        b.comment("contiguous: A and C start at the group's first row, B at the group's weight")
        for name, ld, eb in (("A", "lda", g.in_bytes), ("C", "ldc", g.out_bytes)):
            rows = ptx.mul_wide(b, U32, slot.row0, dims[ld])
            ptr[name] = ptx.mad(b, U64, rows, Imm(str(eb)), ptr[name])
        step = ptx.mul(b, U64, ptx.cvt(b, U64, U32, slot.group), load_param(b, U64, "batch_stride_b"))
        ptr["B"] = ptx.mad(b, U64, step, Imm(str(g.in_bytes)), ptr["B"])
    dims["M"] = slot.rows
    smem = ptx.mov(b, U32, Sym(SMEM_SYMBOL), comment="shared window address of the tile buffers")
    return Sm80Context(b, dims, g, s, tid, ex, ptr, smem, None, slot, absent)


def k_grouped_context(b: Builder, g: Gemm, s: Schedule, tid: VReg, ex: ExprEmitter,
                      ptr: dict[str, VReg]) -> Sm80Context:
    """A k-contiguous grouped GEMM's context: the group is %ctaid.z and its slice of K comes from
    `offs` (emit/groups.py `k_slice`); A (column-major: + k0 * lda) and B (row-major: + k0 * ldb)
    move to the slice's first k, C to the group's matrix (+ group * batch_stride_c), and K becomes
    the slice's length, which the K loop and its (always on) edge checks use. The tile is the
    ungrouped one (ctaid.x, ctaid.y): every CTA has one, an empty group's writes the zero product."""
    dims = {n: load_param(b, U32, n) for n in ("K", "lda", "ldb", "ldc")}
    part = k_slice(b, dims["K"])
    b.comment("k-contiguous: A and B start at the group's first k, C at the group's matrix")
    for name, ld in (("A", "lda"), ("B", "ldb")):
        ptr[name] = ptx.mad(b, U64, ptx.mul_wide(b, U32, part.k0, dims[ld]), Imm(str(g.in_bytes)), ptr[name])
    step = ptx.mul(b, U64, ptx.cvt(b, U64, U32, part.group), load_param(b, U64, "batch_stride_c"))
    ptr["C"] = ptx.mad(b, U64, step, Imm(str(g.out_bytes)), ptr["C"])
    dims["K"] = part.length
    smem = ptx.mov(b, U32, Sym(SMEM_SYMBOL), comment="shared window address of the tile buffers")
    return Sm80Context(b, dims, g, s, tid, ex, ptr, smem, None)


def batch_strides(b: Builder) -> dict[str, VReg]:
    """The element strides between batches of A, B and C (kernel parameters)."""
    return {n: load_param(b, U64, f"batch_stride_{n.lower()}") for n in ("A", "B", "C")}


def batch_offsets(b: Builder, g: Gemm, ptr: dict[str, VReg], batch: VReg, base: dict[str, VReg],
                  strides: dict[str, VReg] | None = None) -> None:
    """Point `ptr`'s A, B and C at batch `batch`: base + batch * batch_stride * element bytes
    (the strides loaded here unless given)."""
    b.comment("batch: the batch index selects the matrices (a batch stride of 0 broadcasts)")
    strides = strides or batch_strides(b)
    z = ptx.cvt(b, U64, U32, batch)
    for name, eb in (("A", g.in_bytes), ("B", g.in_bytes), ("C", g.out_bytes)):
        step = ptx.mul(b, U64, z, strides[name])
        ptr[name] = ptx.mad(b, U64, step, Imm(str(eb)), base[name])
