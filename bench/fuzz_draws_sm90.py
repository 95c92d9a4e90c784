"""The sm_90a (wgmma) draws of bench/fuzz.py: every built design, crossed with clusters, batches,
odd tile counts and `sms` (issue 21: an independent fuzz found cluster kernels failing at 10+
clusters with half-empty cluster tiles and at batch 2, which the narrower draws never reached).

`draw(rng)` returns (Gemm, Schedule); `design(s)` names the kernel family a schedule selects, so
the report counts outcomes per design. A new target adds a module like this one and a row in
fuzz.py's ARCH_DRAWS."""
from __future__ import annotations

import numpy as np

#: Hopper block edges drawn: BM (64 rows per consumer warpgroup) and BN from wgmma's N table.
HOPPER_BM = (64, 128, 256)
HOPPER_BN = (8, 16, 24, 40, 64, 96, 128, 192, 256)
#: Clusters (CM, CN) of the warp-specialised persistent kernel: mostly none, then the usual pairs.
CLUSTERS = ((1, 1),) * 4 + ((2, 1), (1, 2)) * 2 + ((2, 2), (4, 1), (1, 4))
#: Persistent grids, in clusters: one CTA (cluster) walking every tile, a few, 10 and 12 (the
#: issue's deadlock needed 10+), or the device's count (None: more than the tiles).
SMS_CLUSTERS = (1, 1, 2, 3, 5, 10, 12, None)
#: Tiles along M or N: odd counts (1, 3, 5) as often as even ones; the last tile full or partial.
TILE_COUNTS = (1, 2, 3, 3, 5)
SIZES = [1, 2, 7, 15, 16, 17, 63, 64, 100, 127, 128, 129, 200, 264]
#: At most this many 128x128 tiles' worth of output (all batches, tile grid rounded up to whole
#: clusters) where the shape allows: 24 64x128 tiles (24 CTAs, 12 (1, 2) clusters), a few seconds.
MAX_TILES = 12

DESIGNS = ("ws-persistent", "ws-cluster", "ws-one-tile", "one-tile", "split-k", "stream-k")


def design(s) -> str:
    """The kernel family `s` selects (targets/sm90: warp_specialized.py, cluster.py, splitk.py,
    streamk.py, or the one-CTA-per-tile kernel)."""
    if s.warp_specialized is not False:
        if s.cluster != (1, 1):
            return "ws-cluster"
        return "ws-persistent" if s.persistent is not False else "ws-one-tile"
    if s.decomposition != "tiles":
        return "stream-k"
    return "split-k" if s.split_k > 1 else "one-tile"


def draw(rng: np.random.Generator):
    """A (Gemm, Schedule) for arch sm_90a: a design, then the problem it is crossed with.

    Problems: f16/bf16 in both majors, tf32/e4m3/e5m2 with f32 and s8/u8 with s32 accumulation
    K-major (now and then MN-major, which must be rejected), every output of each, epilogues; M and
    N either a drawn tile count of the block (odd counts as often as even, the last tile full or
    cut) or an odd size, rows 16-byte aligned for TMA; batch 1, 2 or 3. Schedules: consumers 1/2,
    stages 1-5, swizzle, raster, the TMA-store or direct epilogue, and per design its own fields:
    a cluster with or without multicast and `sms` in whole clusters (10+ now and then), split-K
    2/3, Stream-K hybrid or pure over a small grid. One draw in twenty asks for a legal part the
    lowering does not build (persistence without warp specialisation, f16 accumulation, split-K
    in the warp-specialised kernel), which must be rejected with LoweringNotBuilt."""
    from ptxgen import Epilogue, Gemm, Schedule
    from ptxgen.targets.sm90.plan import WGMMA_N
    from ptxgen.schedule.problem import DTYPE_BYTES

    def pick(xs):
        return xs[int(rng.integers(len(xs)))]

    unbuilt = rng.random() < 0.05
    family = pick(("ws-persistent",) * 3 + ("ws-cluster",) * 4 + ("ws-one-tile", "one-tile", "split-k", "stream-k"))
    dtype = pick(["f16", "bf16"] * 2 + ["tf32", "e4m3", "e5m2"] + (["s8", "u8"] if family not in ("split-k", "stream-k")
                                                                    or rng.random() < 0.1 else []))
    esize = DTYPE_BYTES[dtype]
    integer = dtype in ("s8", "u8")
    acc = "f16" if unbuilt and dtype == "f16" and rng.random() < 0.3 else "f32"
    out = ("f16" if acc == "f16" else
           pick(["s32", "s8", "s8", "u8", "f32", "f16", "bf16"]) if integer else pick(["f32", "f16", "bf16"]))
    epi = None
    if out != "s32" and rng.random() < 0.4:
        epi = Epilogue(alpha=pick([1.0, 0.5, -2.0]), beta=pick([0.0, 0.0, 1.0, -0.5]),
                       bias=pick([None, "row", "col"]), activation=pick([None, "relu", "gelu", "silu"]),
                       scale=pick([None, None, "col", "row"] if integer else [None] * 3 + ["col", "row"]))
    if esize == 2 or rng.random() < 0.03:  # tf32/fp8/int8 are K-major; now and then an MN-major one (rejected)
        a_layout, b_layout = pick(["row", "col"]), pick(["row", "col"])
    else:
        a_layout, b_layout = "row", "col"
    cluster = pick(CLUSTERS[4:]) if family == "ws-cluster" else (1, 1)
    bm = pick(HOPPER_BM)
    # BN a whole number of swizzle rows (and, with a cluster, of 8-row slices per CTA) mostly
    friendly = [x for x in HOPPER_BN if x in WGMMA_N[dtype] and x % (8 * max(cluster)) == 0 and x * esize % 32 == 0]
    bn = pick(friendly if friendly and rng.random() < 0.9 else [x for x in HOPPER_BN if x in WGMMA_N[dtype]])

    def extent(block: int, parts: int) -> int:
        """A tile count of `block` (odd as often as even), the last tile full or cut, or a size."""
        if rng.random() < 0.3:
            return pick(SIZES)
        return block * (pick(TILE_COUNTS) * (parts if rng.random() < 0.3 else 1) - 1) + pick(
            [block, block, max(1, block // 2 + 1), 8, block - 1 or 1])

    m, n = extent(bm, cluster[0]), extent(bn, cluster[1])
    batch = pick([1, 1, 2, 3])
    def work() -> float:  # 128x128 tiles' worth, the cluster's rounding up included
        tm, tn = -(-m // bm // cluster[0]) * cluster[0], -(-n // bn // cluster[1]) * cluster[1]
        return tm * tn * batch * bm * bn / 128 ** 2

    while work() > MAX_TILES and (m > bm or n > bn):  # the simulator's time goes with the tiles
        if (-(-m // bm) >= -(-n // bn) and m > bm) or n <= bn:
            m -= bm
        else:
            n -= bn
    per16 = 16 // esize  # elements in 16 bytes: rows along K stay 16-byte aligned (TMA strides)
    k = per16 * int(rng.integers(1, 17 if esize == 2 else 9))
    if a_layout == "col":
        m = -(-m // per16) * per16  # A's rows run along M: 16-byte strides
    if b_layout == "row":
        n = -(-n // per16) * per16
    g = Gemm(m, n, k, dtype=dtype, out_dtype=out, a_layout=a_layout, b_layout=b_layout, acc_dtype=acc,
             epilogue=epi, batch=batch)
    bk = pick([32, 64, 128, 256]) // esize  # 32..256 bytes of K
    fields: dict = {"warp_specialized": family.startswith("ws"),
                    "persistent": family in ("ws-persistent", "ws-cluster", "stream-k")}
    size = cluster[0] * cluster[1]
    if fields["persistent"]:
        per = pick(SMS_CLUSTERS)
        fields["sms"] = None if per is None else per * size
        if size > 1 and rng.random() < 0.03:
            fields["sms"] = size + 1  # not whole clusters: rejected
    if family == "ws-cluster":
        fields.update(cluster=cluster, multicast=pick([None, None, True, False]))
    if family == "split-k":
        fields["split_k"] = pick([2, 3])
    if family == "stream-k":
        fields.update(decomposition=pick(["stream-k", "stream-k-pure"]), sms=pick([1, 2, 3, 5, 8]))
    if unbuilt:
        fields.update(pick([{"warp_specialized": False, "persistent": True, "decomposition": "tiles"},
                            {"warp_specialized": True, "split_k": 2}, {}]))
    s = Schedule(block=(bm, bn, bk), instruction="wgmma",
                 consumers=pick([1, 2]) if bm % 128 == 0 else 1, stages=int(rng.integers(1, 6)),
                 swizzle=pick([None, None] + [w for w in (128, 64, 32) if bk * esize % w == 0]),
                 raster=pick(["row", "grouped"]), group_m=pick([1, 2, 4, 8]) * (cluster[0] if rng.random() < 0.9 else 1),
                 epilogue_via_smem=pick([None, None, False] + ([True] if g.batch == 1 else [])), **fields)
    return g, s
