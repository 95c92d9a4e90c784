"""The device side of grouped GEMMs (schedule/grouping.py): which group an m-tile index belongs
to, read from `offs` / `masked_m` in global memory, so the groups' sizes can change between
launches without recompiling. Used by the sm_80 lowering; sm_90a's persistent walk (which
sm_100a's reuses), whose tile indices only grow, resumes its search tile to tile instead
(targets/sm90/grouped.py), with the same clamps.

Why a walk over the groups per CTA, and a grid for the worst case:

* contiguous: the launch's m-tiles are numbered over all groups, group 0's ceil(rows_0 / BM)
  tiles first, then group 1's, and so on. Each CTA finds its group by a prefix over the G groups
  (one u32 load and a few integer ops per group, CTA-uniform): G is at most a few hundred for MoE
  layers, so this costs far less than one k-tile, and it needs no host pass or device prefix
  kernel (the launch stays fixed and CUDA-graph capturable). The grid has the most m-tiles any
  `offs` can need (`grouping.contiguous_tiles_bound`: each group rounds up by less than a tile);
  CTAs past the groups' last tile exit at once.
* masked: %ctaid.z is the group and the m-tiles are those of the max_m slot; a CTA whose first
  row is at or past masked_m[g] exits at once.
* k-contiguous (groups split K, `k_slice`): %ctaid.z is the group, every CTA has a tile (C_g is
  written in full, an empty group's too); the CTA reads k0 = offs[g-1] and k1 = offs[g] and runs
  the K loop over k1 - k0 from A's and B's k0.

Values read from the device are clamped so that no `offs` / `masked_m` can make the kernel touch
memory outside A and C: a decreasing `offs` entry counts as an empty group, and every end is
clamped to M (the parameter: M_total or max_m). Rows outside a group are neither read (the
copies' row < rows predicate zero-fills them) nor written (the stores' row < rows guard), so the
`rows` returned here is the M the edge checks use.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..ir import Addr, Imm, Sym, VReg, ops as ptx
from ..ir.ops import S32, U32, U64
from .memory import load_param

if TYPE_CHECKING:
    from .tiles import TileOps

#: The kernel parameter holding the device array of group sizes, per grouping.
COUNTS_PARAM = {"contiguous": "offs", "masked": "masked_m", "k-contiguous": "offs"}


@dataclass(frozen=True)
class GroupSlot:
    """One CTA's group: its index, its first row in A's and C's rows (contiguous; None for masked,
    whose group moves A and C by their group stride), its row count (the M the edges check) and
    the m-tile within the group."""

    group: VReg
    row0: VReg | None
    rows: VReg
    tm: VReg


class GroupWalk:
    """Emits the search for a CTA's group; CTAs with no tile branch to `absent` (a label the
    lowering places before its final `ret`)."""

    def __init__(self, lw: "TileOps", absent: str):
        self.lw, self.b, self.g, self.s = lw, lw.b, lw.g, lw.s
        self.absent = absent
        grouping = self.g.grouping
        assert grouping in COUNTS_PARAM, "GroupWalk is for grouped GEMMs"
        self.counts = ptx.to_global(self.b, U64, load_param(self.b, U64, COUNTS_PARAM[grouping]))
        self.m_param = load_param(self.b, U32, "M")

    def count(self, group: VReg) -> VReg:
        """counts[group]: one u32 load from the device array."""
        b = self.b
        addr = ptx.mad_wide(b, U32, group, Imm("4"), self.counts)
        return ptx.load(b, "global", U32, Addr(addr), comment=f"{COUNTS_PARAM[self.g.grouping]}[group]")

    def find(self, m_tile: VReg, group: VReg | None = None) -> GroupSlot:
        """The group of linear m-tile `m_tile` (contiguous: numbered over all groups; masked: within
        `group`, default %ctaid.z; a persistent walk passes the group of its linear tile index)."""
        if self.g.grouping == "contiguous":
            return self._contiguous(m_tile)
        return self._masked(m_tile, group)

    def _masked(self, tm: VReg, group: VReg | None) -> GroupSlot:
        b, bm = self.b, self.s.bm
        b.comment("masked groups: rows = clamp(masked_m[group], 0, max_m)")
        if group is None:
            group = ptx.mov(b, U32, Sym("%ctaid.z"), comment="ctaid.z is the group")
        rows = ptx.min_(b, U32, ptx.max_(b, S32, self.count(group), 0), self.m_param)
        first = ptx.mul(b, U32, tm, Imm(str(bm)))
        ptx.bra(b, self.absent, guard=ptx.setp(b, "ge", U32, first, rows),
                comment="the tile starts past the group's valid rows: nothing to do")
        return GroupSlot(group, None, rows, tm)

    def _contiguous(self, m_tile: VReg) -> GroupSlot:
        """Walk the groups, subtracting each one's ceil(rows / BM) tiles from `m_tile` until it
        falls inside one (CTA-uniform: every thread walks the same values)."""
        b, lw, bm, groups = self.b, self.lw, self.s.bm, self.g.groups
        b.comment(f"contiguous groups: walk offs[0..{groups}) until the m-tile ({bm} rows each) falls inside a group")
        t = ptx.mov(b, U32, m_tile, comment="t: the m-tile, counted from the current group's first tile")
        group = ptx.mov(b, U32, 0, comment="group")
        start = ptx.mov(b, U32, 0, comment="start: the group's first row (offs[group - 1])")
        rows = b.reg("b32")
        walk, found = b.label("group_walk"), b.label("group_found")
        b.place(walk)
        ptx.bra(b, self.absent, guard=ptx.setp(b, "ge", U32, group, groups),
                comment="past the last group: this CTA has no tile")
        end = ptx.max_(b, S32, self.count(group), start, comment="a decreasing offs entry is an empty group")
        end = ptx.min_(b, U32, end, self.m_param, comment="no group reaches past M_total")
        ptx.sub(b, U32, end, start, into=rows)
        tiles = lw.ceil_div(rows, bm)
        ptx.bra(b, found, guard=ptx.setp(b, "lt", U32, t, tiles), comment="the tile is in this group")
        ptx.sub(b, U32, t, tiles, into=t)
        ptx.mov(b, U32, end, into=start)
        ptx.add(b, U32, group, 1, into=group)
        ptx.bra(b, walk)
        b.place(found)
        return GroupSlot(group, start, rows, t)


@dataclass(frozen=True)
class KSlice:
    """A k-contiguous CTA's group (%ctaid.z), its first k and its length along K (the K the
    K loop and its edge checks use)."""

    group: VReg
    k0: VReg
    length: VReg


def k_slice(b, k_total: VReg) -> KSlice:
    """Group %ctaid.z's slice of K from `offs`: k0 = clamp(offs[g-1], 0, K_total) (0 for group
    0), k1 = clamp(offs[g], k0, K_total), length k1 - k0 (0: an empty group)."""
    b.comment("k-contiguous groups: ctaid.z is the group, K from clamp(offs[group - 1]) to clamp(offs[group])")
    group = ptx.mov(b, U32, Sym("%ctaid.z"), comment="ctaid.z is the group")
    offs = ptx.to_global(b, U64, load_param(b, U64, COUNTS_PARAM["k-contiguous"]))
    end_addr = ptx.mad_wide(b, U32, group, Imm("4"), offs)
    end = ptx.load(b, "global", U32, Addr(end_addr), comment="offs[group]")
    first = ptx.mov(b, U32, 0, comment="k0 = 0 for group 0")
    has_prev = ptx.setp(b, "ne", U32, group, 0)
    ptx.load(b, "global", U32, Addr(end_addr, -4), comment="k0 = offs[group - 1]", into=first, guard=has_prev)
    k0 = ptx.min_(b, U32, ptx.max_(b, S32, first, 0), k_total, comment="k0 within 0..K_total")
    k1 = ptx.min_(b, U32, ptx.max_(b, S32, end, k0), k_total,
                  comment="k1 within k0..K_total: a decreasing offs entry is an empty group")
    return KSlice(group, k0, ptx.sub(b, U32, k1, k0, comment="the group's length along K"))
