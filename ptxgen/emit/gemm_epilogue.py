"""GEMM epilogue: accumulators -> act(alpha*acc + beta*C + bias) -> output dtype -> global C.

Stores go straight from the mma fragment layout: each thread holds column pairs (2t, 2t+1)
of rows g and g+8 of every mma tile, so a pair becomes one `.v2.f32` or one packed f16x2/bf16x2
`.b32` store. Odd N, or operands aligned below a pair's width, fall back to scalar stores.
"""
from __future__ import annotations

import struct
from typing import TYPE_CHECKING

from .addressing import RowPointers
from .gemm_plan import store_plan
from .ir import Addr, Imm, Vec, VReg
from .memory import st_global

if TYPE_CHECKING:
    from .gemm import GemmLowering

CVT_PACK = {"f16": "cvt.rn.f16x2.f32", "bf16": "cvt.rn.bf16x2.f32"}
SQRT_2_OVER_PI = 0.7978845608028654
GELU_CUBIC = 0.044715
LOG2_E = 1.4426950408889634


def f32(x: float) -> Imm:
    """An exact PTX f32 immediate (0fXXXXXXXX)."""
    return Imm("0f%08X" % struct.unpack("<I", struct.pack("<f", x))[0])


class EpilogueEmitter:
    """Emits the epilogue for one GemmLowering, handed in explicitly."""

    def __init__(self, lw: "GemmLowering"):
        self.lw, self.b, self.g = lw, lw.b, lw.g
        self.e = lw.g.epi
        self.ob = lw.g.out_bytes
        self.atomic = lw.s.split_k > 1 and lw.s.split_k_mode == "atomic"

    # -- element math ---------------------------------------------------------------------------
    def f(self, op: str, *srcs) -> VReg:
        d = self.b.reg("f32")
        self.b.emit(op, d, *srcs, ndefs=1)
        return d

    def to_f32(self, half: VReg, dtype: str) -> VReg:
        """A .b16 f16/bf16 value widened exactly to f32 (bf16 is the top half of an f32)."""
        if dtype == "f16":
            return self.f("cvt.f32.f16", half)
        wide = self.lw.u32("cvt.u32.u16", half)
        return self.f("shl.b32", wide, Imm("16"))

    def unpack(self, packed: VReg, dtype: str) -> tuple[VReg, VReg]:
        lo, hi = self.b.reg("b16"), self.b.reg("b16")
        self.b.emit("mov.b32", _vec(lo, hi), packed, ndefs=1)
        return self.to_f32(lo, dtype), self.to_f32(hi, dtype)

    def apply(self, v: VReg, old: VReg | None, bias: VReg | None) -> VReg:
        e = self.e
        if e.alpha != 1.0:
            v = self.f("mul.f32", v, f32(e.alpha))
        if old is not None:
            v = self.f("fma.rn.f32", old, f32(e.beta), v)
        if bias is not None:
            v = self.f("add.f32", v, bias)
        if e.activation == "relu":
            v = self.f("max.f32", v, f32(0.0))
        elif e.activation == "gelu":  # 0.5 v (1 + tanh(y)) = v sigmoid(2y), y = sqrt(2/pi)(v + 0.044715 v^3)
            sq = self.f("mul.f32", v, v)
            k = self.f("fma.rn.f32", sq, f32(2 * SQRT_2_OVER_PI * GELU_CUBIC), f32(2 * SQRT_2_OVER_PI))
            v = self.times_sigmoid(v, self.f("mul.f32", v, k))
        elif e.activation == "silu":  # v sigmoid(v)
            v = self.times_sigmoid(v, v)
        return v

    def times_sigmoid(self, v: VReg, z: VReg) -> VReg:
        """v / (1 + e^-z) via ex2.approx and rcp.rn: no cancellation for large negative z, unlike
        1 + tanh(z/2), so small results keep their relative accuracy."""
        e = self.f("ex2.approx.f32", self.f("mul.f32", z, f32(-LOG2_E)))
        return self.f("mul.f32", v, self.f("rcp.rn.f32", self.f("add.f32", e, f32(1.0))))

    # -- memory -----------------------------------------------------------------------------------
    def load_old(self, addr: Addr, count: int, guard: VReg | None) -> list[VReg]:
        """C's current values at `addr` (beta != 0), as f32; zero where the guard is off."""
        dt = self.g.out_dtype
        if dt == "f32":
            vals = list(self.b.regs("f32", count))
            for v in vals:
                if guard is not None:
                    self.b.emit("mov.f32", v, f32(0.0), ndefs=1)
            op = "ld.global.f32" if count == 1 else "ld.global.v2.f32"
            self.b.emit(op, vals[0] if count == 1 else _vec(*vals), addr, ndefs=1, guard=guard)
            return vals
        cls = "b16" if count == 1 else "b32"
        raw = self.b.reg(cls)
        if guard is not None:
            self.b.emit(f"mov.{cls}", raw, Imm("0"), ndefs=1)
        self.b.emit(f"ld.global.{cls}", raw, addr, ndefs=1, guard=guard)
        return [self.to_f32(raw, dt)] if count == 1 else list(self.unpack(raw, dt))

    def load_bias(self, index: VReg, limit: str | None) -> VReg:
        """bias[index] as f32 (0 past the edge)."""
        lw, dt, eb = self.lw, self.g.out_dtype, self.ob
        addr = Addr(lw.u64("add.s64", lw.ptr["bias"], lw.wide_mul(index, Imm(str(eb)))))
        guard = lw.pred("setp.lt.u32", index, lw.dim(limit)) if limit else None
        if dt == "f32":
            v = self.b.reg("f32")
            if guard is not None:
                self.b.emit("mov.f32", v, f32(0.0), ndefs=1)
            self.b.emit("ld.global.f32", v, addr, ndefs=1, guard=guard)
            return v
        raw = self.b.reg("b16")
        if guard is not None:
            self.b.emit("mov.b16", raw, Imm("0"), ndefs=1)
        self.b.emit("ld.global.b16", raw, addr, ndefs=1, guard=guard)
        return self.to_f32(raw, dt)

    def store(self, addr: Addr, values: list[VReg], guard: VReg | None) -> None:
        """One store of 1 or 2 adjacent f32 values converted to the output dtype."""
        dt = self.g.out_dtype
        if self.atomic:  # split-K partial sums land in C with hardware float adds
            for j, v in enumerate(values):
                self.b.emit("red.relaxed.gpu.global.add.f32", Addr(addr.base, addr.offset + 4 * j), v, guard=guard)
        elif dt in ("f32", "s32"):  # s32: the accumulator bits, stored as they are
            st_global(self.b, ".f32" if dt == "f32" else ".b32", addr, tuple(values), guard=guard)
        elif len(values) == 2:
            packed = self.b.reg("b32")
            self.b.emit(CVT_PACK[dt], packed, values[1], values[0], ndefs=1)  # odd column -> high half
            st_global(self.b, ".b32", addr, (packed,), guard=guard)
        else:
            h = self.b.reg("b16")
            self.b.emit(f"cvt.rn.{dt}.f32", h, values[0], ndefs=1)
            st_global(self.b, ".b16", addr, (h,), guard=guard)

    # -- the epilogue -------------------------------------------------------------------------------
    def emit(self, acc) -> None:
        lw, b, g, ob = self.lw, self.b, self.g, self.ob
        sp = store_plan(lw.s)
        b.comment(f"C pointer of this thread's first fragment element ({g.out_dtype})")
        row = lw.u32("add.u32", lw.ex.reg(sp.row0), lw.bm0)
        col = lw.u32("add.u32", lw.ex.reg(sp.col0), lw.bn0)
        ldc_bytes = lw.u32("mul.lo.u32", lw.dim("ldc"), Imm(str(ob)))
        off = lw.u64("add.s64", lw.wide_mul(row, ldc_bytes), lw.wide_mul(col, Imm(str(ob))))
        base = lw.u64("add.s64", lw.ptr["C"], off)
        # Pair stores need an even N (so a pair never straddles the edge) and pair-aligned rows.
        pair = g.n % 2 == 0 and g.alignment() >= 2 * ob and not self.atomic
        widths = [0] if pair else [0, 1]
        guards = lw.edge.store_guards(row, col, sorted({(dr, dc + j) for *_, dr, dc in sp.sites for j in widths}))
        bias = self.biases(sp, row, col)
        row_ptr = RowPointers(b, base, ldc_bytes)
        for m, n, h, dr, dc in sp.sites:
            if n == 0:
                b.comment(f"epilogue rows m-tile {m} {'g+8' if h else 'g'}")
            if g.acc_dtype == "f16" and self.e.is_identity and pair:  # already packed f16x2
                st_global(b, ".b32", Addr(row_ptr[dr], dc * ob), (acc[m][n][h],), guard=guards[dr, dc])
                continue
            vals = self.accumulators(acc[m][n], h)
            for j0 in (range(0, 2, 2) if pair else range(2)):
                count = 2 if pair else 1
                addr = Addr(row_ptr[dr], (dc + j0) * ob)
                guard = guards[dr, dc + j0]  # one combined predicate, used by the load and the store
                olds = self.load_old(addr, count, guard) if self.e.beta != 0.0 else [None] * count
                outs = [self.apply(vals[j0 + j], olds[j], bias.get((dr, dc + j0 + j))) for j in range(count)]
                self.store(addr, outs, guard)

    def accumulators(self, tile: tuple[VReg, ...], h: int) -> list[VReg]:
        """The two f32 values (columns 2t, 2t+1) of row half h of one mma tile's accumulators."""
        if self.g.acc_dtype == "f16":
            return list(self.unpack(tile[h], "f16"))
        return [tile[2 * h], tile[2 * h + 1]]

    def biases(self, sp, row: VReg, col: VReg) -> dict[tuple[int, int], VReg]:
        """The bias value each (row delta, column delta) site adds, loaded once per row or column."""
        e, lw = self.e, self.lw
        if e.bias is None:
            return {}
        self.b.comment(f"bias ({e.bias}): one load per distinct {'column' if e.bias == 'col' else 'row'}")
        loaded: dict[int, VReg] = {}
        out: dict[tuple[int, int], VReg] = {}
        for *_, dr, dc in sp.sites:
            for j in range(2):
                key = dc + j if e.bias == "col" else dr
                if key not in loaded:
                    base, limit = (col, "N") if e.bias == "col" else (row, "M")
                    edge = lw.edge.n_edge if e.bias == "col" else lw.edge.m_edge
                    loaded[key] = self.load_bias(lw.u32("add.u32", base, Imm(str(key))), limit if edge else None)
                out[dr, dc + j] = loaded[key]
        return out


def _vec(*regs: VReg) -> Vec:
    return Vec(tuple(regs))
