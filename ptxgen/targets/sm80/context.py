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
from ...emit.index import ExprEmitter
from ...emit.memory import load_param
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
    z = None if s.stream_k else z_slot(b, g, s)
    if g.batch > 1 and not s.stream_k:
        assert z is not None
        batch_offsets(b, g, ptr, z.batch, dict(ptr))
    dims = {n: load_param(b, U32, n) for n in ("K", "lda", "ldb", "ldc")}
    smem = ptx.mov(b, U32, Sym(SMEM_SYMBOL), comment="shared window address of the tile buffers")
    return Sm80Context(b, dims, g, s, tid, ex, ptr, smem, z)


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
