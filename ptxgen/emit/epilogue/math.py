"""Epilogue math, shared by every store path: act(alpha*scale*acc + beta*C + bias) in f32, the
loads of C and of the bias/scale vectors, and the conversion + store of results to the output dtype.

Where the accumulators come from (fragment registers, a staging tile) is the store path's
business: sm80/epilogue.py (straight from mma.sync fragments), epilogue/staged.py (through shared
memory), sm80/epilogue_typed.py (staged in the output dtype).
"""
from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Protocol

from ...ir import Addr, Imm, Vec, VReg, ops as ptx, Builder
from ...ir.ops import B16, B32, F16, F32, S64, U16, U32, PtxType
from ..memory import st_global
from ..quantize import load_bytes, quantize, store_bytes
from ...schedule.problem import DTYPE_BYTES, QUANTIZED_DTYPES, Gemm
from ...schedule.schedule import Schedule

if TYPE_CHECKING:
    from ...targets.sm80.lowering import GemmLowering
    from ..edges import StoreEdges
    from ..tiles import Tile

CVT_PACK = {"f16": "cvt.rn.f16x2.f32", "bf16": "cvt.rn.bf16x2.f32"}
SQRT_2_OVER_PI = 0.7978845608028654
GELU_CUBIC = 0.044715
LOG2_E = 1.4426950408889634


def f32(x: float) -> Imm:
    """An exact PTX f32 immediate (0fXXXXXXXX)."""
    return Imm("0f%08X" % struct.unpack("<I", struct.pack("<f", x))[0])


class EpilogueOps(Protocol):
    """What the epilogue math needs of a lowering (sm_80/wmma `GemmLowering`, sm_90a
    `Sm90Context`): builder, problem, schedule, the vector pointers and scalar helpers."""

    @property
    def b(self) -> Builder: ...

    @property
    def g(self) -> Gemm: ...

    @property
    def s(self) -> Schedule: ...

    @property
    def ptr(self) -> dict[str, VReg]: ...

    def wide_mul(self, a: VReg | Imm, bb: VReg | Imm) -> VReg: ...


class EpilogueMath:
    """The element math and memory accesses of an epilogue; subclasses add a store path (`emit`)
    and say where the tile is (`TileEpilogueMath` on sm_80/wmma; the sm_90a stores take it per call)."""

    def __init__(self, lw: EpilogueOps):
        self.lw, self.b, self.g = lw, lw.b, lw.g
        self.e = lw.g.epi
        self.ob = lw.g.out_bytes
        self.atomic = lw.s.split_k > 1 and lw.s.split_k_mode == "atomic"
        self.quantized = lw.g.out_dtype in QUANTIZED_DTYPES
        #: s32 accumulators feeding anything but an s32 output go through the f32 epilogue
        self.int_to_float = lw.g.accumulator == "s32" and lw.g.out_dtype != "s32"

    # -- element math ---------------------------------------------------------------------------
    def f(self, op: str, *srcs) -> VReg:
        d = self.b.reg("f32")
        self.b.emit(op, d, *srcs, ndefs=1)
        return d

    def to_f32(self, half: VReg, dtype: str) -> VReg:
        """A .b16 f16/bf16 value widened exactly to f32 (bf16 is the top half of an f32)."""
        if dtype == "f16":
            return ptx.cvt(self.b, F32, F16, half)
        wide = ptx.cvt(self.lw.b, U32, U16, half)
        return ptx.emit(self.b, "shl", U32, wide, 16, result=F32)   # the f32 whose top half is the bf16

    def unpack(self, packed: VReg, dtype: str) -> tuple[VReg, VReg]:
        lo, hi = self.b.reg("b16"), self.b.reg("b16")
        ptx.split(self.b, B32, packed, _vec(lo, hi))
        return self.to_f32(lo, dtype), self.to_f32(hi, dtype)

    def apply(self, v: VReg, old: VReg | None, bias: VReg | None, factor: VReg | None = None) -> VReg:
        """act(factor * v + beta * old + bias) in f32; `factor` is alpha * scale[i] (else alpha)."""
        e = self.e
        if factor is not None:
            v = ptx.mul(self.b, F32, v, factor)
        elif e.alpha != 1.0:
            v = ptx.mul(self.b, F32, v, f32(e.alpha))
        if old is not None:
            v = ptx.fma(self.b, F32, old, f32(e.beta), v)
        if bias is not None:
            v = ptx.add(self.b, F32, v, bias)
        if e.activation == "relu":
            v = ptx.max_(self.b, F32, v, f32(0.0))
        elif e.activation == "gelu":  # 0.5 v (1 + tanh(y)) = v sigmoid(2y), y = sqrt(2/pi)(v + 0.044715 v^3)
            sq = ptx.mul(self.b, F32, v, v)
            k = ptx.fma(self.b, F32, sq, f32(2 * SQRT_2_OVER_PI * GELU_CUBIC), f32(2 * SQRT_2_OVER_PI))
            v = self.times_sigmoid(v, ptx.mul(self.b, F32, v, k))
        elif e.activation == "silu":  # v sigmoid(v)
            v = self.times_sigmoid(v, v)
        return v

    def times_sigmoid(self, v: VReg, z: VReg) -> VReg:
        """v / (1 + e^-z) via ex2.approx and rcp.rn: no cancellation for large negative z, unlike
        1 + tanh(z/2), so small results keep their relative accuracy."""
        e = ptx.ex2(self.b, F32, ptx.mul(self.b, F32, z, f32(-LOG2_E)))
        return ptx.mul(self.b, F32, v, ptx.rcp(self.b, F32, ptx.add(self.b, F32, e, f32(1.0))))

    # -- memory -----------------------------------------------------------------------------------
    def load_old(self, addr: Addr, count: int, guard: VReg | None) -> list[VReg]:
        """C's current values at `addr` (beta != 0), as f32; zero where the guard is off."""
        dt = self.g.out_dtype
        if self.quantized:
            return load_bytes(self.b, dt, addr, count, guard)
        if dt == "f32":
            vals = list(self.b.regs("f32", count))
            for v in vals:
                if guard is not None:
                    ptx.mov(self.b, F32, f32(0.0), into=v)
            ptx.load(self.b, "global", F32, addr, into=vals[0] if count == 1 else _vec(*vals), width=count,
                     guard=guard)
            return vals
        bits = B16 if count == 1 else B32
        raw = self.b.reg(bits.reg_class)
        if guard is not None:
            ptx.mov(self.b, bits, 0, into=raw)
        ptx.load(self.b, "global", bits, addr, into=raw, guard=guard)
        return [self.to_f32(raw, dt)] if count == 1 else list(self.unpack(raw, dt))

    def vector_values(self, name: str, index: VReg, offsets: list[int], guards: list[VReg | None]) -> list[VReg]:
        """Elements index + o of the epilogue's vector parameter `name` as f32 (0 where the guard is
        off), through one pointer and immediate offsets. "bias" has `gemm.bias_dtype` elements;
        "scale" is f32 and comes back multiplied by alpha (once per element loaded, not per use)."""
        lw, e = self.lw, self.e
        dt = self.g.bias_dtype if name == "bias" else "f32"
        eb = DTYPE_BYTES[dt]
        ptr = ptx.add(lw.b, S64, lw.ptr[name], lw.wide_mul(index, Imm(str(eb))))
        vals = [self.load_element(dt, Addr(ptr, o * eb), g) for o, g in zip(offsets, guards)]
        if name == "scale" and e.alpha != 1.0:
            vals = [ptx.mul(self.b, F32, v, f32(e.alpha)) for v in vals]
        return vals

    def load_element(self, dt: str, addr: Addr, guard: VReg | None) -> VReg:
        """One f32/f16/bf16 element as f32; 0 where the guard is off."""
        if dt == "f32":
            v = self.b.reg("f32")
            if guard is not None:
                ptx.mov(self.b, F32, f32(0.0), into=v)
            ptx.load(self.b, "global", F32, addr, into=v, guard=guard)
            return v
        raw = self.b.reg("b16")
        if guard is not None:
            ptx.mov(self.b, B16, 0, into=raw)
        ptx.load(self.b, "global", B16, addr, into=raw, guard=guard)
        return self.to_f32(raw, dt)

    def store(self, addr: Addr, values: list[VReg], guard: VReg | None) -> None:
        """One store of 1 or 2 adjacent f32 values converted to the output dtype."""
        dt = self.g.out_dtype
        if self.atomic:  # split-K partial sums land in C with hardware float adds
            for j, v in enumerate(values):
                ptx.red(self.b, "add", F32, Addr(addr.base, addr.offset + 4 * j), v, sem="relaxed.gpu", guard=guard)
        elif self.quantized:
            store_bytes(self.b, addr, [quantize(self.b, dt, v) for v in values], guard)
        elif dt in ("f32", "s32"):  # s32: the accumulator bits, stored as they are
            st_global(self.b, F32 if dt == "f32" else B32, addr, tuple(values), guard=guard)
        elif len(values) == 2:
            packed = self.b.reg("b32")
            self.b.emit(CVT_PACK[dt], packed, values[1], values[0], ndefs=1)  # odd column -> high half
            st_global(self.b, B32, addr, (packed,), guard=guard)
        else:
            h = self.b.reg("b16")
            ptx.cvt(self.b, PtxType.named(dt), F32, values[0], rounding="rn", into=h)
            st_global(self.b, B16, addr, (h,), guard=guard)

    def describe(self) -> None:
        """A comment saying what the epilogue computes, in the order it does."""
        e, g = self.e, self.g
        if g.out_dtype == "s32":
            self.b.comment("epilogue: the exact s32 accumulators, stored as they are")
            return
        x = "acc" if not self.int_to_float else "cvt.rn.f32.s32(acc)"
        if e.scale:
            x = f"{x} * (alpha * scale[{'n' if e.scale == 'col' else 'm'}])"
        elif e.alpha != 1.0:
            x = f"{x} * alpha"
        steps = [x] + (["+ beta * C"] if e.beta else []) + ([f"+ bias[{'n' if e.bias == 'col' else 'm'}]"] if e.bias
                                                            else []) + ([e.activation] if e.activation else [])
        out = f"{g.out_dtype} (round to nearest even, saturate)" if self.quantized else g.out_dtype
        self.b.comment(f"epilogue in f32: {', '.join(steps)}; -> {out}")


class TileEpilogueMath(EpilogueMath):
    """EpilogueMath of one sm_80/wmma output tile (`tile`, with the store guards of `edge`)."""

    lw: "GemmLowering"

    def __init__(self, lw: "GemmLowering", tile: "Tile", edge: "StoreEdges"):
        super().__init__(lw)
        self.tile, self.edge = tile, edge  # the output tile and its bounds

    def emit(self, acc) -> None:
        """The whole epilogue of the tile from the accumulators `acc` (the store path's)."""
        raise NotImplementedError


def _vec(*regs: VReg) -> Vec:
    return Vec(tuple(regs))
