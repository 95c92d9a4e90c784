"""tcgen05.cp: shared memory -> tensor memory, issued by one thread, asynchronous
(docs/ptx_facts/tcgen05.md §12g).

  tcgen05.cp.cta_group::N.<shape>{.<multicast>} [taddr], s-desc;     (qualifier order free)

The source is described by an sm100 shared-memory descriptor: `rows` rows of 16 or 32 bytes in the
K-major canonical layout (16-byte chunks; without swizzle, 8-row core matrices SBO apart and chunks
LBO apart; Triton's scale-factor copies use SBO = 128 B, i.e. dense 16-byte rows). Source row r
goes to TMEM lane L0 + r, its byte j to column C0 + j / 4, byte j % 4 (PTX ISA §9.7.16.9.2):

  .128x256b  128 rows x 32 B -> lanes L0..L0+127, 8 columns     (L0 = 0)
  .128x128b  128 rows x 16 B -> lanes L0..L0+127, 4 columns     (L0 = 0)
  .4x256b      4 rows x 32 B -> lanes L0..L0+3,   8 columns
  .32x128b.warpx4  32 rows x 16 B -> lanes 32q + r of all four quarters q, 4 columns
  .64x128b.warpx2::02_13  64 rows x 16 B -> row r to lanes r and 64 + r (warps 0/2 get rows 0-31,
                          warps 1/3 rows 32-63)
  .64x128b.warpx2::01_23  64 rows x 16 B -> row r < 32 to lanes r and 32 + r, row r >= 32 to lanes
                          32 + r and 64 + r (warps 0/1 get rows 0-31, warps 2/3 rows 32-63)

The warp pairs and "each warp of a pair receives half of the data" are the ISA's words; which half
is CuTe's UTCCP traits (SM100_UTCCP_2x64dp128bitlw0213/0123, docs §12g). With .cta_group::2 each
CTA of the pair copies from its own shared memory at the descriptor's offsets into its own tensor
memory at taddr (the ISA: "copied into the Tensor Memory of both the current and the peer CTAs";
whose shared memory is CuTe's usage: per-CTA scale factors of 2-CTA block-scaled GEMMs).

The copy is computed at issue and stays in flight until a wait observes the mbarrier phase of a
covering tcgen05.commit, like an MMA; a later tcgen05.mma may read its destination without a wait
(cp -> mma is pipelined, §9.7.16.6.2), a tcgen05.ld/st may not. Not simulated: the .b8x16
decompressing forms (where a 4- or 6-bit value sits in its 8-bit container is given only by the
ISA's Figures 195, 197 and 198).
"""
from __future__ import annotations

import numpy as np

from . import tcgen05_desc as td
from . import tmem as tm
from .async_proxy import check_async_read
from .errors import Fault
from .operands import Lit, Name
from .parse import Instr
from .state import CtaState

#: shape -> (source rows, bytes per row)
SHAPES = {"128x256b": (128, 32), "128x128b": (128, 16), "4x256b": (4, 32), "32x128b": (32, 16),
          "64x128b": (64, 16)}
#: the multicast qualifier each shape needs ("" none)
CASTS = {"128x256b": ("",), "128x128b": ("",), "4x256b": ("",), "32x128b": ("warpx4",),
         "64x128b": ("warpx2::02_13", "warpx2::01_23")}


def dest_lanes(shape: str, cast: str, lane0: int) -> np.ndarray:
    """(copies, rows) TMEM lanes each source row lands in (one row per copy)."""
    r32 = np.arange(32)
    if cast == "warpx4":
        return np.stack([32 * q + r32 for q in range(4)])
    if cast == "warpx2::02_13":
        return np.stack([np.arange(64), 64 + np.arange(64)])
    if cast == "warpx2::01_23":
        return np.stack([np.concatenate([r32, 64 + r32]), np.concatenate([32 + r32, 96 + r32])])
    return (lane0 + np.arange(SHAPES[shape][0]))[None, :]


def compile_cp(ins: Instr, ctx, mods: list):
    from .ops_tcgen05 import cta_group_of, tmem_getter
    group = cta_group_of(mods, ctx, "tcgen05.cp")
    if any(m.startswith("b8x16") or m.startswith("b6x16") or m.startswith("b4x16") for m in mods):
        raise ctx.fail("tcgen05.cp with decompression (.b8x16.b6x16_p32 / .b8x16.b4x16_p64) is not simulated: "
                       "where each 6- or 4-bit value lands in its 8-bit container is given only by the ISA's "
                       "Figures 195, 197 and 198 (PTX ISA §9.7.16.9.1), and no kernel here pins it down")
    shapes = [m for m in mods if m in SHAPES]
    casts = [m for m in mods if m.startswith("warpx")]
    if len(shapes) != 1 or len(mods) != 1 + len(casts) or len(casts) > 1:
        raise ctx.fail(f"tcgen05.cp.{'.'.join(ins.mods[1:])}: write tcgen05.cp.cta_group::N.<shape>{{.<multicast>}} "
                       f"with shape one of {', '.join(SHAPES)}")
    shape, cast = shapes[0], casts[0] if casts else ""
    if cast not in CASTS[shape]:
        wanted = " or ".join("." + c if c else "no multicast qualifier" for c in CASTS[shape])
        raise ctx.fail(f"tcgen05.cp.{shape} takes {wanted}"
                       " (PTX ISA §9.7.16.9.2: .64x128b needs .warpx2::02_13 or ::01_23, .32x128b needs .warpx4)")
    if len(ins.operands) != 2 or not isinstance(ins.operands[1], (Name, Lit)):
        raise ctx.fail("tcgen05.cp takes [taddr], s-desc")
    get_addr = tmem_getter(ctx, ctx.mem(ins.operands[0]))
    get_desc = ctx.src(ins.operands[1], "b64")
    line = ctx.line

    def run(cta: CtaState, mask):
        st = tm.tmem_of(cta)
        tm.use_cta_group(st, group, "tcgen05.cp")
        tids = cta.threads(mask)
        addrs = np.broadcast_to(get_addr(cta.R), (cta.n,))[tids]
        descs = np.broadcast_to(get_desc(cta.R), (cta.n,))[tids]
        for tid, addr, desc in zip(tids.tolist(), addrs.tolist(), descs.tolist()):
            ctas = tm.pair_of(cta, "tcgen05.cp") if group == 2 else [cta]
            records = [_issue(c, tm.tmem_of(c), int(tid), int(addr), int(desc), shape, cast, line) for c in ctas]
            tm.link(cta, records)
    return run


def _issue(cta: CtaState, st: tm.TmemState, tid: int, addr: int, desc_value: int, shape: str, cast: str,
           line: int) -> tm.MmaRecord:
    rows, width = SHAPES[shape]
    lane0, col0 = tm.split_address(addr)
    if rows >= 32:
        if lane0 != 0:
            raise Fault("tmem", f"tcgen05.cp.{shape} to lane {lane0}: this shape fills all 128 lanes from lane 0")
    elif lane0 % 4:
        raise Fault("tmem", f"tcgen05.cp.{shape} to lane {lane0}: a 4-lane copy starts at a multiple of 4")
    desc = td.decode_smem_descriptor(desc_value, "tcgen05.cp source")
    addrs = td.operand_addresses(desc, rows, width, 1, False, "tcgen05.cp source").reshape(-1)
    raw = cta.smem.read(np.full(addrs.size, tid, dtype=np.int64), addrs, 1, cta.epoch, "tcgen05.cp reads")
    idx = cta.smem.byte_index(addrs, 1)
    check_async_read(cta, idx, "tcgen05.cp (async proxy) reads")
    words = np.ascontiguousarray(raw.reshape(rows, width)).view(np.uint32)     # (rows, width / 4)
    ncols = width // 4
    lanes = dest_lanes(shape, cast, lane0)
    words = np.tile(words, (lanes.shape[0], 1))
    lanes = lanes.reshape(-1)
    region = tm.Region(int(lanes.min()), int(lanes.max()) + 1, col0, col0 + ncols)
    what = f"tcgen05.cp.{shape}"
    tm.check_allocated(st, region, f"{what} writes")
    tm.check_not_mma_target(st, region, f"{what} writes", pipelined=("tcgen05.shift",) if rows == 4 else ())
    tm.check_not_mma_source(st, region, f"{what} writes")
    tm.check_not_pending(st.loads, region, f"{what} writes", "ld")
    tm.check_not_pending(st.stores, region, f"{what} writes", "st")
    st.cells[lanes[:, None], col0 + np.arange(ncols)[None, :]] = words
    rec = tm.MmaRecord(tid, region, [], idx, line, owner=cta, what="tcgen05.cp")
    st.mmas.append(rec)
    smem = cta.smem
    if smem.async_reads is None:
        smem.async_reads = np.zeros(smem.size, dtype=np.int16)
    smem.async_reads += tm.byte_counts(idx, smem.size)
    return rec
