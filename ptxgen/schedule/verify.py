"""The verifier: every rule a (Gemm, Schedule, arch) must meet before lowering.

Each violation raises ScheduleError naming the field, its value, the rule and a fix, so a user
never gets a wrong kernel or an assembler error for a schedule ptxgen could have rejected.
"""
from __future__ import annotations

import math
import threading
from contextlib import contextmanager
from dataclasses import replace
from typing import Iterator

import numpy as np

from .grouping import verify_grouped
from .block_scale import verify_block_scale
from .geometry import grid_for, operand_tiles, register_estimate, register_limit, smem_bytes, staging_fits
from .problem import _largest_alignment, FP8_DTYPES, INTEGER_DTYPES, QUANTIZED_DTYPES, Gemm, instruction_name, instruction_shape
from .schedule import Schedule
from .streamk import tile_count
from .swap_ab import explain, lowered_gemm, swapped, verify_swap_ab
from .targets import TARGETS, target
from .rules import check_pairing, rules_for
from .verify_types import check_arguments, verify_types
from ..errors import ScheduleError

F32_MAX = float(np.finfo(np.float32).max)
F32_MIN_NORMAL = float(np.finfo(np.float32).tiny)
MAX_THREADS = 1024
MAX_GRID_YZ = 65535
MAX_GRID_X = 2**31 - 1
U32_MAX = 2**32 - 1
#: Stream-K's persistent grid: a few CTAs per SM on the largest parts is plenty.
MAX_PERSISTENT_CTAS = 4096


def verify_fields(g: Gemm, s: Schedule, arch: str) -> None:
    """Types and enumerations (`verify_types`: the things a typo gets wrong), then field ranges."""
    if arch not in TARGETS:
        raise ScheduleError("arch", arch, "is not a supported target",
                            f"use arch={_nearest_arch(arch)!r} (supported: {', '.join(TARGETS)})")
    verify_types(g, s)
    for f in ("m", "n", "k"):
        if getattr(g, f) > U32_MAX // 2:
            pieces = -(-getattr(g, f) // (U32_MAX // 2))
            each = -(-getattr(g, f) // pieces)
            raise ScheduleError(f"gemm.{f}", getattr(g, f), "exceeds the 31-bit kernel parameter range",
                                f"split the problem into {pieces} GEMMs of {f}={each} each"
                                + (", adding each into C with beta=1.0" if f == "k" else ""))
    if g.batch > MAX_GRID_YZ:
        raise ScheduleError("gemm.batch", g.batch, f"exceeds the grid's z limit {MAX_GRID_YZ}",
                            "split the batch into several launches")
    if g.acc_dtype == "f16" and (g.dtype, g.out_dtype) != ("f16", "f16"):
        raise ScheduleError("gemm.acc_dtype", g.acc_dtype,
                            f"f16 accumulation takes f16 inputs and gives f16 output, not {g.dtype} -> {g.out_dtype}",
                            "use dtype='f16', out_dtype='f16', or acc_dtype='f32'")
    verify_fast_accum(g)
    verify_block_scale(g, s, arch)
    for name in ("alpha", "beta"):
        verify_f32_factor(f"epilogue.{name}", getattr(g.epi, name))
    target_rules = rules_for(s.instruction)
    verify_dtype_table(g, target_rules is not None and target_rules.tf32_narrow_outputs)
    if g.align not in (None, 1, 2, 4, 8, 16):
        raise ScheduleError("gemm.align", g.align, "must be 1, 2, 4, 8 or 16 bytes",
                            "state the alignment your pointers and leading dimensions guarantee, or None")
    if s.sms is not None and s.sms > MAX_PERSISTENT_CTAS:
        raise ScheduleError("schedule.sms", s.sms, f"more than {MAX_PERSISTENT_CTAS} persistent CTAs",
                            "give the number of SMs (or a small multiple), or None for the device's")


def verify_fast_accum(g: Gemm) -> None:
    """fast_accum=True only where it changes the kernel: fp8 inputs, which sm_90a's wgmma (their
    only path) promotes by default into a separate f32 accumulator (targets/sm90/promotion.py).
    On other dtypes the flag would do nothing, which the project refuses."""
    if not g.fast_accum or g.dtype in FP8_DTYPES:
        # fp8 off sm_90a's wgmma is not multiplied at all: targets/sm90/verify.verify_target names
        # that (and its fix) rather than the flag, which would take effect once fp8 runs there
        return
    raise ScheduleError("gemm.fast_accum", g.fast_accum, f"selects how fp8 (e4m3/e5m2) wgmma products are "
                        f"accumulated; {g.dtype} GEMMs always accumulate at the accumulator's full precision, "
                        "so it would change nothing", "drop fast_accum (it applies to fp8 inputs, dtype='e4m3' or "
                        "dtype='e5m2', with arch='sm_90a' and instruction='wgmma')")


def verify_f32_factor(field: str, v: int | float) -> None:
    """alpha and beta enter the kernel as f32 immediates: a value f32 turns into inf, or into 0 or a
    subnormal (which keeps fewer than f32's 24 significant bits), would silently change the result.
    (`verify_types` has made sure v is an int or a float.)"""
    short = field.split(".")[-1]
    if isinstance(v, float) and not math.isfinite(v):
        raise ScheduleError(field, v, "must be a finite number: NaN or inf would reach every output",
                            f"give {short} a finite float, e.g. {short}={1.0 if short == 'alpha' else 0.0} "
                            "(the default)")
    if v == 0:
        return
    with np.errstate(over="ignore", under="ignore"):
        as_f32 = float(np.float32(v)) if abs(v) < 2**1024 else math.inf  # a larger int has no float
    if not math.isfinite(as_f32) or abs(as_f32) < F32_MIN_NORMAL:
        what = "overflows to infinity" if not math.isfinite(as_f32) else (
            "underflows to 0" if as_f32 == 0 else "is an f32 subnormal, with fewer than 24 significant bits")
        raise ScheduleError(field, v, f"the epilogue computes in f32, where {v!r} {what}; f32 holds 0 and "
                            f"magnitudes from {F32_MIN_NORMAL:.8g} (smallest normal) to {F32_MAX:.8g}",
                            f"use {short}=1.0 and fold {v!r} into "
                            + ("A, B or a scale vector" if short == "alpha" else "C") + " instead (the data, in "
                            "parts each dtype can hold)" + (f", or {short}=0.0, what f32 makes of it"
                                                           if abs(as_f32) < F32_MIN_NORMAL else ""))


def verify_dtype_table(g: Gemm, tf32_narrow_outputs: bool = False) -> None:
    """The (inputs, accumulator, output) rows that are lowered. Every row takes all four layouts:
    M/N-contiguous tf32 and int8 tiles, which ldmatrix .trans cannot transpose (it moves 16-bit
    elements), load their fragments with scalar ld.shared instead (targets/sm80/fragments.py).

    s8/u8 inputs accumulate exactly in s32 and give either that s32 as it is (no epilogue), or the
    epilogue's f32 value rounded to s8/u8 (quantised) or cast to f32/f16/bf16 (dequantised).
    Float inputs give float outputs; tf32 gives f32 only on the mma.sync path, f32/f16/bf16 on the
    wgmma one (`hopper`), where tf32, fp8 and int8 tiles are K-major only (verify_hopper.verify_tma).
    """
    if g.dtype in INTEGER_DTYPES:  # (acc_dtype "f16" was rejected above: it needs f16 inputs)
        if g.out_dtype == "s32" and not g.epi.is_identity:
            raise ScheduleError("gemm.epilogue", g.epilogue, "s32 output is the exact accumulator, so it takes "
                                "no epilogue (alpha, beta, bias, scale or activation)",
                                "use out_dtype='s8' or 'u8' (quantised) or 'f32'/'f16'/'bf16' (dequantised) "
                                "for a scaled result, or drop the epilogue")
    elif g.out_dtype in ("s32", *QUANTIZED_DTYPES) or g.acc_dtype == "s32":
        raise ScheduleError("gemm.out_dtype", g.out_dtype, f"{g.dtype} inputs give float output; integer outputs "
                            "come from s8/u8 inputs", "use out_dtype 'f32', 'f16' or 'bf16'")
    bias_types = ("f32", g.out_dtype) if g.out_dtype in ("f16", "bf16") else ("f32",)
    if g.bias_dtype not in bias_types:
        raise ScheduleError("gemm.bias_dtype", g.bias_dtype, f"a {g.out_dtype} output takes a bias of dtype "
                            + " or ".join(bias_types), "use bias_dtype='f32' (the default)")
    if g.dtype == "tf32" and g.out_dtype != "f32" and not tf32_narrow_outputs:  # the wgmma epilogue casts tf32's f32 too
        raise ScheduleError("gemm.out_dtype", g.out_dtype, "tf32 GEMMs give f32 output on the mma.sync path",
                            "use out_dtype='f32', or arch='sm_90a' with instruction='wgmma' (f16/bf16 outputs too)")


def verify_tiling(g: Gemm, s: Schedule) -> None:
    """Block -> warp -> instruction: each level divides the one above. The instruction is the one
    the dtype issues (`instruction_shape`): mma.sync m16n8k16 for f16/bf16, m16n8k8 for tf32,
    m16n8k32 for s8/u8 (one k-step is 32 bytes of K), wmma m16n16k16."""
    if s.threads > MAX_THREADS:
        raise ScheduleError("schedule.warps", s.warps,
                            f"{s.num_warps} warps = {s.threads} threads exceed {MAX_THREADS} per CTA",
                            f"use at most {MAX_THREADS // 32} warps (WM*WN), e.g. warps={_fewer_warps(g, s)}")
    bm, bn, bk = s.block
    wm, wn = s.warps
    if bm % wm or bn % wn:
        raise ScheduleError("schedule.warps", s.warps,
                            f"block tile {bm}x{bn} does not divide by the warp grid {wm}x{wn}",
                            "make BM a multiple of WM and BN a multiple of WN, e.g. warps="
                            f"{max(((a, b) for a in range(1, wm + 1) for b in range(1, wn + 1) if bm % a == 0 and bn % b == 0), key=lambda w: (w[0] * w[1], w))}")
    im, in_, ik = instruction_shape(g, s.instruction)
    name = instruction_name(g, s.instruction)
    tm, tn = s.warp_tile
    if tm % im or tn % in_:
        fits = [(a, b) for a in range(1, wm + 1) for b in range(1, wn + 1)
                if bm % (a * im) == 0 and bn % (b * in_) == 0]
        fits.sort(key=lambda w: (-w[0] * w[1], w))
        good = next((w for w in fits if _accepted(g, replace(s, warps=w), "sm_80")), None)
        fewer = f" (e.g. warps={good})" if good else ""
        rule = f"make BM/WM a multiple of {im} and BN/WN a multiple of {in_}"
        blocks = [replace(s, block=(m, n, bk)) for m in _multiples(bm, im * wm) for n in _multiples(bn, in_ * wn)]
        raise ScheduleError("schedule.block", s.block,
                            f"warp tile {tm}x{tn} is not a multiple of the mma shape {im}x{in_} ({name})",
                            rule + fewer if good else _suggest(g, s, "sm_80", blocks, rule))
    if bk % ik:
        raise ScheduleError("schedule.block.BK", bk, f"BK is not a multiple of {ik}, the k of the {name} that "
                            f"{g.dtype} inputs issue",
                            f"make BK a multiple of {ik}, e.g. block=({bm}, {bn}, {-(-bk // ik) * ik})")


def _fewer_warps(g: Gemm, s: Schedule) -> tuple[int, int]:
    """A warp grid that fits MAX_THREADS and passes the sm_80 rules: the grid halved along its
    larger side until it fits, then halved further while that is refused; (2, 2) at the end."""
    wm, wn = s.warps
    while max(wm, wn) > 1:
        wm, wn = (wm // 2, wn) if wm >= wn else (wm, wn // 2)
        if 32 * wm * wn <= MAX_THREADS and _accepted(g, replace(s, warps=(wm, wn)), "sm_80"):
            return wm, wn
    return 2, 2


def verify_copies(g: Gemm, s: Schedule) -> None:
    """Every thread moves a whole number of copy units, with a uniform thread -> unit map."""
    for tile in operand_tiles(g, s):
        where = f"{tile.name} tile {tile.rows}x{tile.cols}"
        unit = f"{tile.copy_bytes}-byte"
        if tile.row_bytes % 16:
            raise ScheduleError("schedule.block", s.block, f"{where} has rows of {tile.row_bytes} B, "
                                "not whole 16-byte chunks", "make every tile width a multiple of 8 elements")
        if tile.units % s.threads:
            raise ScheduleError("schedule.block", s.block,
                                f"{where} is {tile.units} {unit} copies, which {s.threads} threads "
                                "cannot split evenly (each thread copies a whole number of them)",
                                _suggest(g, s, "sm_80", _warp_grids(s) + _pow2_blocks(s),
                                         "grow the block tile or use fewer warps"))
        upr = tile.units_per_row
        if s.threads % upr and upr % s.threads:
            raise ScheduleError("schedule.block", s.block,
                                f"{where} rows hold {upr} {unit} copies, which neither divides nor is "
                                f"divided by {s.threads} threads, so copies would not coalesce uniformly",
                                _suggest(g, s, "sm_80", _pow2_blocks(s) + _warp_grids(s),
                                         "use power-of-two tile widths or a warp count that divides them"))
        cpr = tile.chunks_per_row
        if s.smem_layout == "swizzle" and cpr & (cpr - 1):
            raise ScheduleError("schedule.smem_layout", s.smem_layout,
                                f"{where} rows hold {cpr} chunks; the XOR swizzle needs a power of two",
                                _suggest(g, s, "sm_80", [replace(s, smem_layout="pad"), *_pow2_blocks(s)],
                                         "use a power-of-two tile width or smem_layout='pad'"))


def verify_wmma(g: Gemm, s: Schedule) -> None:
    """wmma reads plain strided tiles into opaque fragments, which leave only through wmma.store.

    Split-K (partials via wmma.store.d / wmma.load.c) and f16 accumulation are lowered; their
    general rules (f32 partials, f16 -> f16 only) are verify_split_k's and verify_fields'.
    """
    if s.instruction != "wmma":
        return
    rules = [
        (s.smem_layout == "swizzle", "schedule.smem_layout", s.smem_layout,
         "wmma.load reads a plain strided tile, not an XOR-swizzled one", "use smem_layout='pad' or 'plain'"),
        (s.epilogue_via_smem is False, "schedule.epilogue_via_smem", False,
         "wmma fragments are opaque, so results leave through wmma.store into shared memory",
         "leave epilogue_via_smem None or True"),
    ]
    for broken, field, value, rule, fix in rules:
        if broken:
            raise ScheduleError(field, value, rule, fix)
    if not staging_fits(g, s):
        raise ScheduleError("schedule.instruction", "wmma", f"the {s.bm}x{s.bn} C tile staged for wmma.store "
                            f"cannot be drained evenly by {s.threads} threads",
                            "use a larger block tile or fewer warps")


def verify_staging(g: Gemm, s: Schedule) -> None:
    """The staged epilogue splits the C tile into whole chunks per thread, uniformly."""
    if s.epilogue_via_smem and not staging_fits(g, s):
        raise ScheduleError("schedule.epilogue_via_smem", True,
                            f"the {s.bm}x{s.bn} C tile's store chunks cannot be split evenly and uniformly "
                            f"over {s.threads} threads",
                            "use a larger block tile, fewer warps, or epilogue_via_smem=None/False")


def verify_resources(g: Gemm, s: Schedule, arch: str) -> None:
    t = target(arch)
    need = smem_bytes(g, s)
    if need > t.smem_per_block:
        raise ScheduleError("schedule.stages", s.stages,
                            f"{s.stages} stages of {s.bm}x{s.bn}x{s.bk} tiles need {need} B of shared memory, over "
                            f"{arch}'s {t.smem_per_block} B per block", _smem_fix(g, s, arch))
    limit = register_limit(s, t.regs_per_sm, t.max_regs_per_thread)
    est = register_estimate(g, s)
    # the copies' share is left out here: it is a calibrated average (bench/register_sample.py),
    # and a schedule it puts over the limit may still assemble clean (1x2048x512 nt, 128x128x32:
    # 253 registers), so the chooser avoids such schedules but an explicit one is not refused
    if est["total"] - est["copies"] > limit:
        raise ScheduleError("schedule.warps", s.warps,
                            f"warp tile {s.warp_tile[0]}x{s.warp_tile[1]} needs about {est['total'] - est['copies']} "
                            f"registers per thread ({est['accumulators']} accumulators, "
                            f"{est['fragments']} fragments), over the limit of {limit}",
                            _suggest(g, s, arch, _warp_grids(s) + [replace(s, frag_double_buffer=False)]
                                     + _halved_blocks(s), "use more warps (a smaller warp tile) or "
                                     "frag_double_buffer=False"))


#: Whether this thread is checking a fix now: the rules a candidate fix breaks then skip their
#: own search for a fix (the candidate is just refused), so checking a fix never recurses.
_fix_check = threading.local()


@contextmanager
def without_fix_search() -> Iterator[None]:
    """Refusals inside give only their general advice, searching no setting to suggest: for
    callers that try many schedules and drop the refused ones unread (the chooser's candidates)."""
    before = getattr(_fix_check, "active", False)
    _fix_check.active = True
    try:
        yield
    finally:
        _fix_check.active = before


def _accepted(g: Gemm, s: Schedule, arch: str) -> bool:
    """Whether every rule accepts (g, s) on `arch`: a fix is only suggested once this says so.
    False inside another fix's check: one level of search, never more."""
    if getattr(_fix_check, "active", False):
        return False
    _fix_check.active = True
    try:
        verify_rules(g, s, arch)
    except ScheduleError:
        return False
    finally:
        _fix_check.active = False
    return True


def _smem_fix(g: Gemm, s: Schedule, arch: str) -> str:
    """Settings that fit the shared memory and pass every other rule (each one checked): fewer
    stages, and a block halved along its longer side (with more warps where the warp tile would
    need too many registers); without either, the generic advice."""
    limit = target(arch).smem_per_block
    fixes = []
    fewer = next((st for st in range(s.stages - 1, 0, -1) if smem_bytes(g, replace(s, stages=st)) <= limit
                  and _accepted(g, replace(s, stages=st), arch)), None)
    bm, bn = s.bm, s.bn
    while max(bm, bn) > 16 and not fixes:
        bm, bn = (bm // 2, bn) if bm >= bn else (bm, bn // 2)
        for warps in dict.fromkeys([s.warps, (2, 2), (2, 4), (4, 2), (4, 4)]):
            cand = replace(s, block=(bm, bn, s.bk), warps=warps)
            if smem_bytes(g, cand) <= limit and _accepted(g, cand, arch):
                fixes.append(f"a smaller block, e.g. block={cand.block}"
                             + (f" with warps={warps}" if warps != s.warps else ""))
                break
    if fewer is not None:
        fixes.append(f"stages={fewer}")
    return "use " + " or ".join(fixes) if fixes else "use fewer stages, a smaller block or a smaller BK"


def _suggest(g: Gemm, s: Schedule, arch: str, candidates: list[Schedule], otherwise: str) -> str:
    """'use <the first candidate every rule accepts, as field=value>; generally, `otherwise`';
    just `otherwise` when none is (or inside another fix's check: `_accepted`)."""
    good = next((c for c in candidates if c != s and _accepted(g, c, arch)), None)
    if good is None:
        return otherwise
    names = ("block", "warps", "stages", "smem_layout", "frag_double_buffer", "raster")
    changed = " with ".join(f"{n}={getattr(good, n)!r}" for n in names if getattr(good, n) != getattr(s, n))
    return f"use {changed}; generally, {otherwise.removeprefix('use ')}"


def _warp_grids(s: Schedule) -> list[Schedule]:
    """`s` with each other warp grid of 1, 2, 4 or 8 a side (at most 16 warps), nearest in warp count first."""
    grids = sorted(((a, b) for a in (1, 2, 4, 8) for b in (1, 2, 4, 8) if a * b <= 16),
                   key=lambda w: (abs(math.log2(w[0] * w[1] / s.num_warps)), -w[0] * w[1], abs(w[0] - w[1])))
    return [replace(s, warps=w) for w in grids]


def _pow2_blocks(s: Schedule) -> list[Schedule]:
    """`s` with BM and BN rounded to powers of two (down first, then up)."""
    def near(x: int) -> list[int]:
        down = 1 << (x.bit_length() - 1)
        return [x] if x == down else [down, down * 2]
    return [replace(s, block=(m, n, s.bk)) for m in near(s.bm) for n in near(s.bn) if (m, n) != (s.bm, s.bn)]


def _taller_blocks(s: Schedule) -> list[Schedule]:
    """`s` with BM, then BN, doubled and quadrupled up to 256."""
    out = [replace(s, block=(s.bm * f, s.bn, s.bk)) for f in (2, 4) if s.bm * f <= 256]
    return out + [replace(s, block=(s.bm, s.bn * f, s.bk)) for f in (2, 4) if s.bn * f <= 256]


def _halved_blocks(s: Schedule) -> list[Schedule]:
    """`s` with the block halved along its longer side, with its own and a few common warp grids."""
    bm, bn = (s.bm // 2, s.bn) if s.bm >= s.bn else (s.bm, s.bn // 2)
    return [replace(s, block=(bm, bn, s.bk), warps=w) for w in dict.fromkeys([s.warps, (2, 2), (2, 4), (4, 2)])]


def _multiples(x: int, step: int) -> list[int]:
    """The multiples of `step` nearest `x`: below it (if any), then above it."""
    return [m for m in (x // step * step, -(-x // step) * step) if m > 0]


def _nearest_arch(arch: str) -> str:
    """The newest supported arch no newer than `arch` (by its number), else the oldest supported."""
    number = int("".join(ch for ch in arch if ch.isdigit()) or 0)
    older = [t for t in TARGETS if int("".join(ch for ch in t if ch.isdigit())) <= number]
    return older[-1] if older else next(iter(TARGETS))


def verify_problem(g: Gemm, s: Schedule, arch: str = "sm_80") -> None:
    """Any M, N, K >= 1 fit (edge tiles are bounds-checked); alignment and leading dims must hold."""
    align = g.alignment()
    need = g.in_bytes  # a copy never splits an element (int8 at 1- or 2-byte alignment: ld.global + st.shared)
    if align < need:
        field = "gemm.align" if g.align is not None else "gemm.lda"
        value = g.align if g.align is not None else g.leading_dims()[0]
        raise ScheduleError(field, value, f"{g.dtype} operands need {need}-byte aligned rows and pointers "
                            f"(got {align}): no narrower copy keeps every {g.dtype} element whole and in bounds",
                            f"pad the leading dimensions to a multiple of {need // g.in_bytes} elements")
    lds = g.leading_dims()
    for name, ld, width, eb, al in zip(("lda", "ldb", "ldc"), lds, g.min_leading_dims(),
                                       (g.in_bytes, g.in_bytes, g.out_bytes), (align, align, g.out_alignment())):
        if not isinstance(ld, int) or ld < width:
            raise ScheduleError(f"gemm.{name}", ld, f"is smaller than the matrix's width {width}",
                                f"give {name}={width} or more, or None for a dense matrix")
        if (ld * eb) % al:
            fits = _largest_alignment(ld * eb)
            padded = -(-ld * eb // al) * al // eb
            raise ScheduleError(f"gemm.{name}", ld, f"{ld * eb} B rows break the stated {al}-byte alignment",
                                f"state align={fits} (what {ld * eb} B rows allow), or pad {name} to {padded}")
    gy = -(-g.m // s.bm)
    if s.raster == "row" and gy > MAX_GRID_YZ:
        raise ScheduleError("schedule.raster", s.raster, f"{gy} CTA rows exceed the grid's y limit {MAX_GRID_YZ}",
                            _suggest(g, s, arch, [replace(s, raster="grouped")] + _taller_blocks(s),
                                     "use raster='grouped' (a 1-D grid) or a taller BM"))
    gx = grid_for(g, s)[0]
    if gx > MAX_GRID_X:
        tiles = f"{-(-g.m // s.bm)} x {-(-g.n // s.bn)} tiles of {s.bm}x{s.bn}"
        per_column = max(1, gx // -(-g.n // s.bn))  # CTAs per column of tiles
        split = f"split the problem across several launches of n={MAX_GRID_X // per_column * s.bn} columns each"
        raise ScheduleError("schedule.block", s.block, f"the launch grid's x is {gx} CTAs ({tiles}), past "
                            f"CUDA's x limit of 2^31-1 = {MAX_GRID_X}",
                            _suggest(g, s, arch, _taller_blocks(s) + [replace(s, raster="row")], split))


def verify_split_k(g: Gemm, s: Schedule) -> None:
    """Every split gets at least one k-tile; atomic partial sums need an f32, identity-like epilogue."""
    if s.split_k == 1:
        return
    if g.accumulator != "f32":
        fix = "use split_k=1" if g.accumulator == "s32" else "use acc_dtype='f32' with split_k"
        raise ScheduleError("schedule.split_k", s.split_k, f"split-K adds f32 partial sums; {g.dtype} inputs "
                            f"accumulate in {g.accumulator}, which has no split-K reduction", fix)
    kt = -(-g.k // s.bk)
    per = -(-kt // s.split_k)
    if (s.split_k - 1) * per >= kt:
        best = -(-kt // per) if per > 1 else kt
        raise ScheduleError("schedule.split_k", s.split_k,
                            f"K={g.k} is {kt} k-tiles of {s.bk}: {s.split_k} splits of {per} leave the "
                            "last split without work", f"use split_k={max(1, min(best, kt))} or a smaller BK")
    if g.batch * s.split_k > MAX_GRID_YZ:
        raise ScheduleError("schedule.split_k", s.split_k, f"batch x split_k exceeds the grid's z limit {MAX_GRID_YZ}",
                            "use fewer splits")
    if s.split_k_mode == "atomic":
        e = g.epi
        if g.out_dtype != "f32" or g.accumulator != "f32" or e.beta != 0.0 or e.bias or e.activation:
            raise ScheduleError("schedule.split_k_mode", s.split_k_mode,
                                "atomic split-K adds partial sums straight into C, so C must be f32 "
                                "and the epilogue linear: at most alpha and a scale vector",
                                "use split_k_mode='workspace' for other outputs and epilogues")


def verify_stream_k(g: Gemm, s: Schedule) -> None:
    """Stream-K shares tiles between CTAs through f32 partials in a workspace."""
    if not s.stream_k:
        return
    rules = [
        (s.split_k > 1, "schedule.split_k", s.split_k,
         "Stream-K already shares K between CTAs; it does not combine with split-K",
         "use split_k=1 with decomposition='stream-k', or decomposition='tiles'"),
        (g.accumulator != "f32", "gemm.acc_dtype", g.accumulator,
         f"Stream-K adds f32 partial tiles; {g.accumulator} accumulators are not lowered for it",
         "use f32 accumulation (f16/bf16/tf32 inputs) with Stream-K"),
    ]
    for broken, field, value, rule, fix in rules:
        if broken:
            raise ScheduleError(field, value, rule, fix)
    if tile_count(g, s) * -(-g.k // s.bk) > U32_MAX // 2:
        raise ScheduleError("schedule.decomposition", s.decomposition,
                            "tiles x k-tiles exceeds the 31-bit iteration counter", "use a larger block tile")


def verify_rules(g: Gemm, s: Schedule, arch: str = "sm_80") -> None:
    """Raise ScheduleError for the first rule (Gemm, Schedule) breaks on `arch` (a TypeError for
    arguments that are not a Gemm, a Schedule and an arch string, e.g. swapped ones): the fields,
    what each target reserves, the rules of the target that lowers `s.instruction` (registered in
    `rules`: targets/sm80/verify.py, targets/sm90/verify.py), then the problem's."""
    check_arguments("verify", g, s, arch)
    if s.swap_ab is True:  # the rules of the problem the kernel really computes (schedule/swap_ab.py)
        verify_swap_ab(g, s, arch)
        try:
            _verify_rules(swapped(g), s, arch)
        except ScheduleError as e:
            raise explain(e, g) from None
        return
    _verify_rules(g, s, arch)


def _verify_rules(g: Gemm, s: Schedule, arch: str) -> None:
    """`verify_rules` for the problem the kernel lowers (swapped already under swap_ab)."""
    verify_fields(g, s, arch)
    check_pairing(g, s, arch)
    verify_grouped(g, s)
    target_rules = rules_for(s.instruction)
    assert target_rules is not None, f"no target registered for instruction {s.instruction!r}"
    target_rules.verify(g, s, arch)
    verify_problem(g, s, arch)
    verify_split_k(g, s)
    verify_stream_k(g, s)


def verify(g: Gemm, s: Schedule, arch: str = "sm_80") -> None:
    """`verify_rules`, and then whether ptxgen can lower the schedule: a legal schedule outside
    what its target has built (e.g. targets/sm90/verify_built.py) raises LoweringNotBuilt (a
    ScheduleError), so that `compile` stops here with the setting to use."""
    verify_rules(g, s, arch)
    target_rules = rules_for(s.instruction)
    assert target_rules is not None
    try:
        target_rules.check_built(lowered_gemm(g, s), s, arch)
    except ScheduleError as e:
        if s.swap_ab is not True:
            raise
        raise explain(e, g) from None
