"""wgmma.mma_async and its fence / commit_group / wait_group as a table plus one builder
(docs/ptx_facts/wgmma.md; PTX ISA "wgmma.mma_async", "wgmma.fence", "wgmma.commit_group",
"wgmma.wait_group").

The table says, per (accumulator, A, B) type, which m64nNkK shapes exist, whether the operands
may be transposed or negated and which PTX version it needs; the builder spells the instruction and
checks its operands against the table, so an illegal wgmma fails in Python with the rule, not in
ptxas. ptxas 13 was used to confirm every row (tests/targets/sm90/test_sm90_isa.py assembles them).
"""
from __future__ import annotations

from dataclasses import dataclass

from ...ir import Builder
from ...ir import Imm, Instr, Operand, Vec, VReg

M = 64                                                   # one warpgroup's rows, every shape
#: N for the floating-point types: 8..256 in steps of 8.
N_FLOAT: tuple[int, ...] = tuple(range(8, 257, 8))
#: N for s8/u8 (and b1): 8, 16, 24, then steps of 16 up to 256 (ptxas rejects m64n40k32.s32.s8.s8).
N_INTEGER: tuple[int, ...] = (8, 16, 24) + tuple(range(32, 257, 16))


@dataclass(frozen=True)
class WgmmaTypes:
    """One legal (dtype, atype, btype) row of the wgmma type table."""

    dtype: str            # accumulator / D type
    atype: str
    btype: str
    k: int                # K of one instruction: 32 bytes of the input type
    esize: int            # bytes per A/B element
    n_values: tuple[int, ...]
    transpose: bool       # imm-trans-a/b exist (f16/bf16 with descriptors only)
    negate: bool          # imm-scale-a/b exist (floating-point types)
    satfinite: bool       # .satfinite allowed (integer types)
    ptx: tuple[int, int]  # first PTX ISA version

    @property
    def integer(self) -> bool:
        return self.dtype == "s32"


def _rows() -> dict[tuple[str, str, str], WgmmaTypes]:
    rows: list[WgmmaTypes] = []
    for d in ("f16", "f32"):
        rows.append(WgmmaTypes(d, "f16", "f16", 16, 2, N_FLOAT, True, True, False, (8, 0)))
    rows.append(WgmmaTypes("f32", "bf16", "bf16", 16, 2, N_FLOAT, True, True, False, (8, 0)))
    rows.append(WgmmaTypes("f32", "tf32", "tf32", 8, 4, N_FLOAT, False, True, False, (8, 0)))
    for d in ("f16", "f32"):
        for a in ("e4m3", "e5m2"):
            for b in ("e4m3", "e5m2"):
                rows.append(WgmmaTypes(d, a, b, 32, 1, N_FLOAT, False, True, False, (8, 0)))
    for a in ("s8", "u8"):
        for b in ("s8", "u8"):
            # mixed signedness needs PTX 8.4 (ptxas: "WGMMA with mixed integer types")
            rows.append(WgmmaTypes("s32", a, b, 32, 1, N_INTEGER, False, False, True,
                                   (8, 0) if a == b else (8, 4)))
    return {(r.dtype, r.atype, r.btype): r for r in rows}


#: Every legal (dtype, atype, btype) of wgmma.mma_async on sm_90a (b1 is left out: unused here).
WGMMA_TYPES: dict[tuple[str, str, str], WgmmaTypes] = _rows()


def lookup(dtype: str, atype: str, btype: str) -> WgmmaTypes:
    """The table row, or a ValueError naming the legal combinations."""
    try:
        return WGMMA_TYPES[(dtype, atype, btype)]
    except KeyError:
        legal = ", ".join(".".join(t) for t in WGMMA_TYPES)
        raise ValueError(f"wgmma has no .{dtype}.{atype}.{btype} form; legal dtype.atype.btype: {legal}") from None


def accumulator_registers(n: int, dtype: str) -> int:
    """D registers per thread: M*N/128 32-bit values for f32/s32, half that (packed .f16x2) for f16."""
    return M * n // 128 if dtype in ("f32", "s32") else M * n // 256


#: A from registers: 64 x K of 32 bytes per row over 128 threads = 4 .b32 registers, every type.
A_REGISTERS = 4


@dataclass(frozen=True)
class WgmmaShape:
    """One wgmma instruction form: types, N, and where A comes from."""

    types: WgmmaTypes
    n: int
    a_from_registers: bool = False
    satfinite: bool = False

    def __post_init__(self) -> None:
        t = self.types
        if self.n not in t.n_values:
            step = "8, 16, 24, 32, 48, ..., 256 (steps of 16 above 32)" if t.integer else "8, 16, ..., 256"
            raise ValueError(f"wgmma .{t.dtype}.{t.atype}.{t.btype} has no N = {self.n}: N must be one of {step}")
        if self.satfinite and not t.satfinite:
            raise ValueError(".satfinite applies only to the s32 (integer) wgmma forms")

    @property
    def k(self) -> int:
        return self.types.k

    @property
    def name(self) -> str:
        return f"m{M}n{self.n}k{self.k}"

    @property
    def d_registers(self) -> int:
        return accumulator_registers(self.n, self.types.dtype)

    @property
    def opcode(self) -> str:
        t = self.types
        sat = ".satfinite" if self.satfinite else ""
        return f"wgmma.mma_async.sync.aligned.{self.name}{sat}.{t.dtype}.{t.atype}.{t.btype}"


def wgmma_shape(dtype: str, atype: str, btype: str, n: int, a_from_registers: bool = False,
                satfinite: bool = False) -> WgmmaShape:
    return WgmmaShape(lookup(dtype, atype, btype), n, a_from_registers, satfinite)


def wgmma_operands(shape: WgmmaShape, d: tuple[VReg, ...], a: VReg | tuple[VReg, ...], b_desc: VReg,
                   scale_d: VReg | int, scale_a: int = 1, scale_b: int = 1, trans_a: int = 0,
                   trans_b: int = 0) -> tuple[Operand, ...]:
    """The operand list in ISA order: d, a-desc|{a}, b-desc, scale-d[, imm-scale-a, imm-scale-b]
    [, imm-trans-a][, imm-trans-b], checked against the table."""
    t = shape.types
    if len(d) != shape.d_registers:
        raise ValueError(f"{shape.opcode} writes {shape.d_registers} D registers per thread, got {len(d)}")
    if shape.a_from_registers != isinstance(a, tuple):
        raise ValueError("A must be a 4-register tuple exactly when the shape takes A from registers")
    if isinstance(a, tuple) and len(a) != A_REGISTERS:
        raise ValueError(f"register A is {A_REGISTERS} .b32 registers per thread, got {len(a)}")
    if isinstance(scale_d, int) and scale_d not in (0, 1):
        raise ValueError("scale-d is a predicate or the immediate 0 (D = A*B) / 1 (D = A*B + D)")
    ops: list[Operand] = [Vec(d), Vec(a) if isinstance(a, tuple) else a, b_desc,
                          Imm(str(scale_d)) if isinstance(scale_d, int) else scale_d]
    if t.negate:
        for s in (scale_a, scale_b):
            if s not in (1, -1):
                raise ValueError("imm-scale-a/b must be 1 or -1 (-1 negates the operand)")
        ops += [Imm(str(scale_a)), Imm(str(scale_b))]
    elif (scale_a, scale_b) != (1, 1):
        raise ValueError(f"the integer wgmma .{t.atype}.{t.btype} has no imm-scale-a/b operands")
    if t.transpose:
        if not shape.a_from_registers:
            ops.append(_flag(trans_a, "imm-trans-a"))
        elif trans_a:
            raise ValueError("imm-trans-a exists only when A comes from a descriptor")
        ops.append(_flag(trans_b, "imm-trans-b"))
    elif trans_a or trans_b:
        raise ValueError(f"transposed operands exist only for f16/bf16 (not .{t.atype}): store "
                         f"{t.atype} tiles K-major")
    return tuple(ops)


def _flag(v: int, what: str) -> Imm:
    if v not in (0, 1):
        raise ValueError(f"{what} must be 0 (K-major) or 1 (MN-major)")
    return Imm(str(v))


def wgmma(b: Builder, shape: WgmmaShape, d: tuple[VReg, ...], a: VReg | tuple[VReg, ...], b_desc: VReg,
          scale_d: VReg | int, scale_a: int = 1, scale_b: int = 1, trans_a: int = 0, trans_b: int = 0,
          comment: str | None = None) -> Instr:
    """Emit one wgmma.mma_async. D is read as well as written when scale-d is true: the IR has no
    in-out operand yet, so callers keep the accumulators live across the chain themselves."""
    ops = wgmma_operands(shape, d, a, b_desc, scale_d, scale_a, scale_b, trans_a, trans_b)
    return b.emit(shape.opcode, *ops, ndefs=1, comment=comment)


def fence(b: Builder, comment: str | None = None) -> Instr:
    """Orders earlier register accesses of D/A before the next wgmma (first wgmma, and after any
    ordinary access of those registers)."""
    return b.emit("wgmma.fence.sync.aligned", comment=comment)


def commit_group(b: Builder, comment: str | None = None) -> Instr:
    return b.emit("wgmma.commit_group.sync.aligned", comment=comment)


def wait_group(b: Builder, pending: int, comment: str | None = None) -> Instr:
    """Wait until at most `pending` wgmma groups are in flight (all older ones complete)."""
    if pending < 0:
        raise ValueError("wgmma.wait_group takes N >= 0")
    return b.emit("wgmma.wait_group.sync.aligned", Imm(str(pending)), comment=comment)
