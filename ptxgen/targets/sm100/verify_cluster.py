"""The sm_100a cluster and CTA-pair rules of the verifier (cluster.py, cta_pair.py;
docs/ptx_facts/tcgen05.md §12i, clusters.md). Each rule raises ScheduleError naming the field, the
rule and a fix; `check_pair_built` raises LoweringNotBuilt for a legal pair the lowering lacks.
"""
from __future__ import annotations

from ...errors import LoweringNotBuilt, ScheduleError
from ...schedule.problem import Gemm
from ...schedule.schedule import Schedule
from ...schedule.targets import target
from ..sm90.verify import verify_multicast_slices
from .plan import Sm100Plan

#: The pair's M of a cta_group::2 tcgen05.mma (ISA Table 39, dense kinds f16 and tf32).
MMA_M_PAIR = (128, 256)


def verify_cluster(g: Gemm, s: Schedule, arch: str) -> None:
    """The cluster's size, the CTA pair's place in it, and a walk that keeps whole clusters."""
    cm, cn = s.cluster if s.cluster is not None else (1, 1)
    size, most = cm * cn, target(arch).max_cluster
    if cm < 1 or cn < 1 or size > most:
        raise ScheduleError("schedule.cluster", s.cluster, f"a cluster holds 1 to {most} CTAs (the portable "
                            f"limit; CM, CN >= 1), not {cm}x{cn}", "use cluster=(2, 1) or (1, 2)")
    if s.cta_group == 2 and cm % 2:
        raise ScheduleError("schedule.cluster", s.cluster, "a cta_group::2 MMA runs on a CTA pair: two CTAs of one "
                            "cluster whose %cluster_ctarank differ in bit 0, stacked along M (the pair's BM), so "
                            "the cluster's M extent CM must be even", "use cluster=(2, 1) with cta_group=2 (the pair is the cluster)")
    if size > 1 and s.raster == "grouped" and s.group_m % cm:
        raise ScheduleError("schedule.group_m", s.group_m, f"a grouped raster must keep whole clusters of {cm} "
                            "tile rows in one group", f"use a group_m that is a multiple of {cm}")
    if s.sms is not None and s.sms % size:
        raise ScheduleError("schedule.sms", s.sms, f"a persistent grid of clusters of {size} CTAs needs a multiple "
                            f"of {size} CTAs", f"use sms={max(size, s.sms // size * size)}")


def verify_multicast(s: Schedule, plan: Sm100Plan) -> None:
    """Each CTA sharing an operand loads 1/parts of its TMA box: a whole number of swizzle atoms."""
    cm, cn = plan.cluster
    verify_multicast_slices(plan, (cm, cn), f"with a {cm}x{cn} cluster", "cluster=(1, 1)")


def check_pair_built(s: Schedule) -> None:
    """The CTA pair is built for M = 256 in a (2, 1) cluster (the pair is the cluster): a bigger
    cluster would multicast with .cta_group::2, which the simulator that proves the kernels does
    not model; M = 128 pairs (64 rows per CTA, TMEM layout B) are not lowered."""
    if s.cta_group != 2:
        return
    if s.bm != 256:
        raise LoweringNotBuilt("schedule.block.BM", s.bm, "the CTA-pair lowering is built for the pair's M = 256 "
                               "(128 rows per CTA); M = 128 pairs are not built yet",
                               f"use block=(256, {s.bn}, {s.bk}) with cta_group=2, or cta_group=1 with BM = 128")
    if tuple(s.cluster) != (2, 1):
        raise LoweringNotBuilt("schedule.cluster", s.cluster, "the CTA-pair lowering is built for a cluster of one "
                               "pair; pairs sharing operands by multicast (.cta_group::2 with .multicast::cluster) "
                               "are not built yet", "use cluster=(2, 1) with cta_group=2")


def check_cluster_built(s: Schedule) -> None:
    """Cluster launch control is built for single-CTA clusters: with a cluster (or a CTA pair) a
    cancel must be multicast to every CTA of the cluster (`try_cancel.multicast::cluster::all`) and
    each CTA must take its own part of the cancelled cluster's tile, which is not lowered."""
    cm, cn = s.cluster if s.cluster is not None else (1, 1)
    if s.tile_scheduler == "clc" and (cm * cn > 1 or s.cta_group == 2):
        raise LoweringNotBuilt("schedule.tile_scheduler", "clc", f"cluster launch control is built for single-CTA "
                               f"clusters; with a {cm}x{cn} cluster"
                               + (" (a CTA pair)" if s.cta_group == 2 else "")
                               + " the cancel would have to be multicast to the whole cluster, which is not built yet",
                               "use tile_scheduler='static' with a cluster or a CTA pair, or cluster=(1, 1) and "
                               "cta_group=1 with tile_scheduler='clc'")
