"""Grouped GEMMs (mixture-of-experts): G independent products with one weight per group, whose
row counts live on the device, so they can change between launches without recompiling.

Two layouts, as DeepGEMM names them (`Gemm(groups=G, grouping=...)`):

* "contiguous" (prefill / training): the rows of every group are concatenated. A is (M_total, K)
  and C is (M_total, N) with `Gemm.m` = M_total; `offs` is an int32 array of G cumulative row
  ends (the `torch._grouped_mm` convention: group g owns rows offs[g-1] .. offs[g], offs[-1] = 0),
  non-decreasing, offs[G-1] <= M_total. Groups may be empty and need not be multiples of the
  tile; rows from offs[G-1] to M_total belong to no group and are left untouched.
* "masked" (decode under CUDA graphs): every group has a fixed slot of `Gemm.m` = max_m rows.
  A is (G, max_m, K), C is (G, max_m, N); `masked_m` is an int32 array of G valid row counts
  (0 <= masked_m[g] <= max_m). Only the valid rows of C are written; the rest stay untouched.

B is (G, K, N) for both: one weight per group, in either layout the Gemm supports.

* "k-contiguous" (mixture-of-experts weight gradients, dB_g = X_gᵀ · dY_g; DeepGEMM's k-grouped,
  torch._grouped_mm's 2-D x 2-D case): the groups split K. A is (M, K_total), B (K_total, N),
  C (G, M, N) with `Gemm.k` = K_total; `offs` is an int32 array of G cumulative ends along K
  (group g owns k = offs[g-1] .. offs[g], offs[-1] = 0) and C_g = A[:, k0:k1] @ B[k0:k1, :].
  Every C_g is written in full: an empty group gives the epilogue of a zero product. A must be
  column-major and B row-major, so K is the strided dimension of both and a group starting at
  any k keeps their copies aligned (the transpose of a row-major activation X is column-major).

This module holds the host-side facts (shapes, the checks a Gemm's fields must pass, the run-time
checks of `offs`/`masked_m` values); the device-side walk over groups is `emit/groups.py`.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ScheduleError

if TYPE_CHECKING:
    from .problem import Gemm
    from .schedule import Schedule

GROUPINGS = ("contiguous", "masked", "k-contiguous")
#: The run-time argument each grouping reads on the device.
COUNTS_ARG = {"contiguous": "offs", "masked": "masked_m", "k-contiguous": "offs"}
#: The groupings whose C has one (M, N) matrix per group, C (G, M, N) (contiguous C is (M_total, N)).
PER_GROUP_C = ("masked", "k-contiguous")
#: Groups a kernel walks: the contiguous tile walk loops over every group once per CTA (a prefix
#: over G on the device), which stays cheap for G up to a few hundred; more would cost every CTA
#: that loop.
MAX_GROUPS = 1024


def check_grouping_fields(g: "Gemm") -> None:
    """The grouped fields on their own and with the fields they constrain (run on construction)."""
    if g.grouping is None:
        if g.groups != 1:
            raise ScheduleError("gemm.groups", g.groups, "groups > 1 needs a grouping, which says how A's rows "
                                "are split among the groups",
                                f"add grouping='contiguous' (A is (M_total, K), offs gives each group's rows), "
                                f"grouping='masked' (A is ({g.groups}, max_m, K), masked_m gives the valid rows) or "
                                f"grouping='k-contiguous' (the groups split K: offs gives each group's slice of K, "
                                f"C is ({g.groups}, M, N))")
        return
    if g.groups > MAX_GROUPS:
        raise ScheduleError("gemm.groups", g.groups, f"more than {MAX_GROUPS} groups: every CTA walks the groups "
                            "on the device", f"split the groups over several launches of at most {MAX_GROUPS}")
    if g.batch != 1:
        raise ScheduleError("gemm.batch", g.batch, "a grouped GEMM has no batch: its groups are the independent "
                            "products", f"use batch=1 with groups={g.groups}, or a batched GEMM without grouping "
                            "when every product has the same size")
    if g.grouping == "contiguous" and g.a_layout == "col":
        raise ScheduleError("gemm.a_layout", g.a_layout, "a contiguous grouped GEMM's groups start at any row of "
                            "A, so A's rows must be its contiguous dimension (a column-major A would start groups "
                            "at unaligned addresses)", "use a_layout='row' (pass A as a C-contiguous "
                            "(M_total, K) array, e.g. np.ascontiguousarray(a))")
    if g.grouping == "k-contiguous":
        check_k_grouped_layouts(g)


def check_k_grouped_layouts(g: "Gemm") -> None:
    """A k-grouped GEMM's groups start at any k: A column-major and B row-major make K the strided
    dimension of both, so moving to a group's first k keeps every copy aligned."""
    if g.a_layout != "col":
        raise ScheduleError("gemm.a_layout", g.a_layout, "a k-contiguous grouped GEMM's groups start at any k, "
                            "so K must be A's strided dimension (a row-major A would start groups at unaligned "
                            "addresses)", "use a_layout='col': pass X.T of a row-major activation X (K_total, M) "
                            "as A, a column-major (M, K_total) view (torch: x.mT)")
    if g.b_layout != "row":
        raise ScheduleError("gemm.b_layout", g.b_layout, "a k-contiguous grouped GEMM's groups start at any k, "
                            "so K must be B's strided dimension (a column-major B would start groups at "
                            "unaligned addresses)", "use b_layout='row': pass B as a C-contiguous (K_total, N) "
                            "array, e.g. np.ascontiguousarray(b)")
    if g.block_scale is not None:
        raise ScheduleError("gemm.block_scale", g.block_scale, "block scaling is not built for k-contiguous grouped "
                            "GEMMs", "drop block_scale, or use grouping='contiguous' or 'masked'")


def describe(g: "Gemm") -> str:
    """One line for `ptxgen info` and the PTX header: the grouping, the shapes and what m means."""
    if g.grouping == "k-contiguous":
        return (f"{g.groups} groups, k-contiguous: A ({g.m}, {g.k}) column-major and B ({g.k}, {g.n}) with "
                f"offs[{g.groups}] int32 cumulative ends along K (k = K_total = {g.k}), C ({g.groups}, {g.m}, "
                f"{g.n}); every group's C written (an empty group: the epilogue of a zero product)")
    if g.grouping == "contiguous":
        return (f"{g.groups} groups, contiguous: A ({g.m}, {g.k}) with offs[{g.groups}] int32 cumulative row "
                f"ends (m = M_total = {g.m}), B ({g.groups}, {g.k}, {g.n}), C ({g.m}, {g.n}); rows past "
                f"offs[-1] untouched")
    return (f"{g.groups} groups, masked: A ({g.groups}, {g.m}, {g.k}) with masked_m[{g.groups}] int32 valid "
            f"rows (m = max_m = {g.m}), B ({g.groups}, {g.k}, {g.n}), C ({g.groups}, {g.m}, {g.n}); rows "
            f"past masked_m[g] untouched")


def c_shape(g: "Gemm") -> tuple[int, ...]:
    """C's shape: (M_total, N) contiguous, (G, max_m, N) masked and k-contiguous."""
    return (g.groups, g.m, g.n) if g.grouping in PER_GROUP_C else (g.m, g.n)


def contiguous_tiles_bound(g: "Gemm", bm: int) -> int:
    """The most m-tiles the groups of a contiguous problem can need whatever `offs` holds:
    sum over g of ceil(rows_g / BM) <= floor((M_total + G (BM - 1)) / BM), since each group
    rounds up by less than one tile, and never more than one tile per row."""
    return max(1, min((g.m + g.groups * (bm - 1)) // bm, g.m))


def check_counts(g: "Gemm", offs: Any = None, masked_m: Any = None) -> Any:
    """The grouped run-time argument (`offs` or `masked_m`), checked: the right one for the
    grouping, shape (G,), int32, and (host arrays) values in range. Returns it (device arrays
    unchanged: their values are the kernel's to read; the kernel clamps them to the slot)."""
    want = COUNTS_ARG[g.grouping]
    other = "masked_m" if want == "offs" else "offs"
    given, wrong = (offs, masked_m) if want == "offs" else (masked_m, offs)
    along_k = g.grouping == "k-contiguous"
    if wrong is not None:
        raise ValueError(f"{other}= was given but the kernel was compiled for grouping={g.grouping!r}, which "
                         f"reads {want}=: pass {want}= (or compile with grouping="
                         f"{'masked' if other == 'masked_m' else 'contiguous'!r})")
    if given is None:
        raise ValueError(f"a {g.grouping} grouped GEMM needs {want}=, an int32 array of {g.groups} "
                         + ("cumulative ends along K (torch._grouped_mm's offs)" if along_k else
                            "cumulative row ends (torch._grouped_mm's offs)" if want == "offs" else
                            "valid row counts, one per group"))
    if not hasattr(given, "shape"):
        raise TypeError(f"{want} must be an int32 array (numpy, or a device array the kernel reads), not "
                        f"{type(given).__name__}: pass np.asarray({want}, dtype=np.int32)")
    shape = tuple(given.shape)
    if shape != (g.groups,):
        raise ValueError(f"{want} must be a 1-D array of {g.groups} int32 (one per group), got shape {shape}: "
                         f"pass {g.groups} values, or compile with Gemm(groups={shape[0] if len(shape) == 1 else 'G'})")
    dtype = str(getattr(given, "dtype", ""))
    if dtype.replace("torch.", "") not in ("int32",):
        raise TypeError(f"{want} has dtype {dtype or type(given).__name__}, not int32: pass "
                        f"{want}.astype(np.int32) (torch: {want}.to(torch.int32))")
    if not isinstance(given, np.ndarray):
        return given  # a device array: the kernel reads it
    values = given.astype(np.int64)
    if want == "offs":
        steps = np.diff(np.concatenate([[0], values]))
        if (steps < 0).any():
            at = int(np.argmax(steps < 0))
            raise ValueError(f"offs must be non-decreasing cumulative row ends from 0: offs[{at}] = {values[at]} "
                             f"is below {'0' if at == 0 else f'offs[{at - 1}] = {values[at - 1]}'}; "
                             f"build it as np.cumsum(rows_per_group).astype(np.int32)")
        if along_k and values[-1] > g.k:
            raise ValueError(f"offs[-1] = {values[-1]} exceeds the compiled K_total k={g.k}: compile with "
                             f"Gemm(k={values[-1]}, ...) or pass a shorter K")
        if not along_k and values[-1] > g.m:
            raise ValueError(f"offs[-1] = {values[-1]} rows exceed the compiled M_total m={g.m}: compile with "
                             f"Gemm(m={values[-1]}, ...) or pass fewer rows")
    else:
        bad = np.flatnonzero((values < 0) | (values > g.m))
        if bad.size:
            at = int(bad[0])
            raise ValueError(f"masked_m[{at}] = {values[at]} is outside 0..max_m={g.m}: each group holds at most "
                             f"m rows; clip it (np.clip(masked_m, 0, {g.m})) or compile with a larger m")
    return given


def balanced_counts(g: "Gemm") -> np.ndarray:
    """Sizes for timing a grouped kernel (`tune`): every group the same share of M_total
    (contiguous), every slot full (masked), every group the same share of K_total (k-contiguous), so a
    candidate is timed on all the rows (or all of K) it can compute."""
    if g.grouping == "masked":
        return np.full(g.groups, g.m, np.int32)
    total = g.k if g.grouping == "k-contiguous" else g.m
    return np.round(np.linspace(total / g.groups, total, g.groups)).astype(np.int32)


def random_counts(g: "Gemm", rng: np.random.Generator, empty: float = 0.25) -> np.ndarray:
    """Random int32 `offs` / `masked_m` for tests and `ptxgen run`: each group empty with
    probability `empty`, else a random size (contiguous: cut points of M_total, so some groups
    straddle tiles; masked: 0..max_m; k-contiguous: cut points of K_total, offs[-1] <= K_total)."""
    if g.grouping == "masked":
        counts = rng.integers(0, g.m + 1, size=g.groups)
        counts[rng.random(g.groups) < empty] = 0
        return counts.astype(np.int32)
    span = g.k if g.grouping == "k-contiguous" else g.m
    total = int(rng.integers(max(span // 2, 1), span + 1))  # rows (k) past offs[-1] belong to no group
    cuts = np.sort(rng.integers(0, total + 1, size=g.groups - 1))
    sizes = np.diff(np.concatenate([[0], cuts, [total]]))
    carry = 0  # an emptied group's rows go to the next kept group (past the last one: to no group)
    for i, emptied in enumerate(rng.random(g.groups) < empty):
        carry, sizes[i] = (carry + sizes[i], 0) if emptied else (0, sizes[i] + carry)
    return np.cumsum(sizes).astype(np.int32)


#: What the grouped kernels are built for: inputs (the mma.sync kernel's; a target's own grouped
#: kernel names its own, targets/sm90/backend.py) and outputs.
GROUPED_INPUTS = ("f16", "bf16")
#: The refusal's words where the mma.sync kernel's inputs are not enough.
MMA_SYNC_PATH = " on the mma.sync path"
FP8_GROUPED_FIX = " (fp8 grouped GEMMs: arch='sm_90a' with instruction='wgmma')"
GROUPED_OUTPUTS = ("f32", "f16", "bf16")
#: CUDA's grid y/z limit: the contiguous m-tile bound and the masked m-tiles run along y.
MAX_GRID_Y = 65535


def grouped_dtype_fix(g: "Gemm", inputs: tuple[str, ...], own: bool) -> str:
    """The fix for grouped inputs not built: a block-scaled GEMM (fp4 here) keeps its block scales
    with fp8 where the target builds fp8 groups, else f16/bf16 (and where fp8 groups are built)."""
    if getattr(g, "block_scale", None) is not None and "e4m3" in inputs:
        return ("use dtype='e4m3' or 'e5m2' with MXFP8 scales, BlockScale(a=(1, 32), b=(32, 1), dtype='ue8m0'), "
                "and grouping='masked' (block-scaled fp4 grouped GEMMs are not built)")
    return "use dtype='f16' or 'bf16'" + ("" if own else FP8_GROUPED_FIX)


def verify_grouped(g: "Gemm", s: "Schedule") -> None:
    """The grouped rules (the verifier's, after the fields): what the grouped kernels are built
    with. Each refusal names the setting to use."""
    from ..errors import LoweringNotBuilt

    if not g.grouped:
        return
    from .rules import rules_for

    # a target with a grouped kernel of its own names its inputs (targets/sm90: `grouped_inputs`;
    # what else it builds is its check_built's); the mma.sync kernel's are GROUPED_INPUTS
    own = getattr(rules_for(s.instruction), "grouped_inputs", None)
    if own and g.grouping == "k-contiguous":
        raise LoweringNotBuilt("gemm.grouping", g.grouping, f"the k-contiguous grouped GEMM is built on the mma.sync "
                               f"path only, not in {s.instruction}'s own grouped kernel",
                               "use arch='sm_90' (mma.sync, instruction='m16n8k16'), which runs on sm_90a and "
                               "sm_100a GPUs too")
    inputs = own or GROUPED_INPUTS
    rules = [
        (s.instruction == "wmma", "schedule.instruction", s.instruction,
         "the grouped kernel is built on mma.sync, not wmma", "use instruction='m16n8k16'"),
        (s.split_k > 1, "schedule.split_k", s.split_k,
         "split-K is not built for grouped GEMMs (each group's tiles are found on the device)", "use split_k=1"),
        (s.stream_k, "schedule.decomposition", s.decomposition,
         "Stream-K is not built for grouped GEMMs", "use decomposition='tiles'"),
        (s.raster != "row", "schedule.raster", s.raster,
         "grouped GEMMs number their m-tiles over the groups (ctaid.y); the grouped raster is not built for them",
         "use raster='row'"),
        (g.dtype not in inputs, "gemm.dtype", g.dtype,
         f"grouped GEMMs are built for {'/'.join(inputs)} inputs" + ("" if own else MMA_SYNC_PATH),
         grouped_dtype_fix(g, inputs, bool(own))),
        (g.out_dtype not in GROUPED_OUTPUTS, "gemm.out_dtype", g.out_dtype,
         f"grouped GEMMs are built for {'/'.join(GROUPED_OUTPUTS)} outputs", "use out_dtype='f32', 'f16' or 'bf16'"),
        (g.epi.bias == "row", "epilogue.bias", g.epi.bias,
         "a per-row bias is not built for grouped GEMMs (their rows are per group)",
         "use bias='col' (one length-N vector for every group) or add the row bias afterwards"),
        (g.epi.scale == "row", "epilogue.scale", g.epi.scale,
         "a per-row scale is not built for grouped GEMMs (their rows are per group)",
         "use scale='col' (one length-N vector for every group) or scale the rows of A beforehand"),
    ]
    for broken, field, value, rule, fix in rules:
        if broken:
            raise ScheduleError(field, value, rule, fix)
    if own:
        return  # the target's own (persistent, 1-D) grid: no grid-y limit
    tiles_y = contiguous_tiles_bound(g, s.bm) if g.grouping == "contiguous" else -(-g.m // s.bm)  # masked, k-contiguous
    if tiles_y > MAX_GRID_Y:
        raise ScheduleError("gemm.m", g.m, f"{tiles_y} m-tiles of {s.bm} rows exceed the grid's y limit {MAX_GRID_Y}",
                            "use a taller block tile (BM), or split the rows over several launches")

