"""What `ptxgen info` and `ptxgen run` print about a kernel: geometry, copies, fragments, epilogue,
registers, the assembler's report and shared-memory bank conflicts."""
from __future__ import annotations

from collections import Counter

from .flags import flag_text
from ..emit.describe import describe_epilogue
from ..kernel import Kernel
from ..schedule.grouping import describe as describe_grouping
from ..schedule.geometry import OperandTile, describe_staging, fragment_buffering, operand_tiles, register_estimate
from ..schedule.problem import instruction_name
from ..schedule.schedule import Schedule
from ..schedule.streamk import stream_k_plan
from ..schedule.units import counted


def instruction_mix(k: Kernel) -> Counter:
    """Count of each instruction family in the kernel text (all copies, whole kernel)."""
    mix: Counter = Counter()
    for line in k.ptx.splitlines():
        op = line.strip().split(" ")[0]
        if op.startswith("@"):
            op = line.strip().split(" ")[1]
        for family in ("cp.async.cg", "ldmatrix", "mma.sync", "bar.sync", "st.global"):
            if op.startswith(family):
                mix[family] += 1
    return mix


def _fragment_source(tile: OperandTile, s: Schedule) -> str:
    """How mma fragments leave shared memory (scalar loads where ldmatrix cannot transpose)."""
    if s.instruction == "wmma":
        return "wmma.load"
    if not tile.scalar_fragments:
        return "ldmatrix"
    dim = "M" if tile.name == "A" else "N"
    how = "ld.shared.b32" if tile.elem_bytes == 4 else "ld.shared.u8 + prmt"
    return f"scalar {how} ({dim}-contiguous {8 * tile.elem_bytes}-bit elements)"


def describe(k: Kernel) -> list[str]:
    lines = k.backend.describe(k) or _describe(k)  # a target's own (e.g. sm_90a's warpgroups, TMA boxes and ring)
    if k.lowered_gemm is None:
        return lines
    at = next(i for i, line in enumerate(lines) if line.startswith("problem ")) + 1
    return lines[:at] + [swap_ab_line(k)] + lines[at:]


def swap_ab_line(k: Kernel) -> str:
    """What a swap-AB kernel computes for the caller (schedule/swap_ab.py), under the problem line."""
    u, g = k.gemm, k.problem
    return (f"swap-ab    the caller's C[{u.m}x{u.n}] = A[{u.m}x{u.k}] @ B[{u.k}x{u.n}] is computed as C^T[{g.m}x{g.n}] "
            f"= B^T @ A^T: the problem above and the lines below are the kernel's (its A is the caller's B, its B the "
            f"caller's A); C is stored transposed into the caller's row-major C, one element per store")


def _describe(k: Kernel) -> list[str]:
    g, s = k.problem, k.schedule
    a, b = operand_tiles(g, s)
    est = register_estimate(g, s)
    live = ", ".join(f"{c} {n}" for c, n in k.peak_live.items() if n)
    return [
        f"kernel     {k.entry} ({k.arch})",
        f"problem    {f'{g.batch} x ' if g.batch > 1 else ''}C[{g.m}x{g.n}] {g.out_dtype} = A[{g.m}x{g.k}] {g.dtype} {g.a_layout}-major "
        f"@ B[{g.k}x{g.n}] {g.dtype} {g.b_layout}-major, {g.accumulator} accumulation",
        *([f"grouped    {describe_grouping(g)}; {group_walk_text(k)}"] if g.grouped else []),
        f"schedule   block {s.bm}x{s.bn}x{s.bk}, warps {s.warps[0]}x{s.warps[1]} (warp tile "
        f"{s.warp_tile[0]}x{s.warp_tile[1]}), {instruction_name(g, s.instruction)}, stages {s.stages}, smem {s.smem_layout}, "
        f"raster {s.raster}, fragment double buffer {fragment_buffering(g, s)}",
        f"launch     grid {k.grid} x block {k.block} = {s.threads} threads/CTA, "
        f"{k.smem_bytes} B dynamic shared memory",
        f"copies     A {a.copies_per_thread} + B {b.copies_per_thread} x {a.copy_bytes} B per thread per k-tile"
        + ("" if a.copy_bytes == 16 else f" (align {g.alignment()}: {16 // a.copy_bytes}x the copy "
                                         "instructions of 16-byte copies)"),
        f"fragments  A {_fragment_source(a, s)}, B {_fragment_source(b, s)}",
        f"epilogue   {describe_epilogue(g)}; {describe_staging(g, s)}"
        + (f"; split-K {s.split_k} ({s.split_k_mode})" if s.split_k > 1 else ""),
        *([stream_k_summary(k)] if s.stream_k else []),
        f"registers  estimate {est['total']}/thread ({est['accumulators']} accumulators); "
        f"ptxgen peak live: {live}",
        *(k.choice.lines() if k.choice is not None else []),
    ]


def group_walk_text(k: Kernel) -> str:
    """How the grouped kernel finds its tiles (emit/groups.py), for `info` and `run`."""
    g = k.gemm
    own = getattr(k.backend, "group_walk_text", None)
    if own is not None:  # a target's own walk (e.g. sm_90a's persistent one, targets/sm90/grouped.py)
        return own(k)
    if g.grouping == "contiguous":
        return (f"grid y = {k.grid[1]} m-tiles, the most any offs needs; each CTA walks offs on the device "
                f"to its group, CTAs past the last group's tiles exit")
    if g.grouping == "k-contiguous":
        return (f"grid z = {g.groups} groups; each CTA reads its group's K slice offs[group - 1]..offs[group] "
                f"on the device (an empty group's CTAs write the zero product)")
    return f"grid z = {g.groups} groups; CTAs whose tile starts past masked_m[group] exit"


def stream_k_summary(k: Kernel) -> str:
    p = stream_k_plan(k.problem, k.schedule, k.grid[0])
    units = [p.units(c) for c in range(p.ctas)]
    split = sum(1 for c in range(p.ctas) for u in units[c] if u.tile >= p.dp_tiles and not u.whole)
    busiest = max(sum(u.k_count for u in us) for us in units)
    return (f"stream-k   {k.schedule.decomposition}: {p.tiles} tiles x {p.iters_per_tile} k-tiles over "
            f"{p.ctas} CTAs: {p.dp_tiles} whole tiles in data-parallel waves, {p.sk_tiles} tiles as "
            f"{p.sk_iters} Stream-K iterations ({split} partial units); busiest CTA runs {busiest} k-tiles"
            + ("" if k.schedule.sms else " (GPU launches use the device's SM count)")
            + "; launched cooperatively (every CTA resident at once, or refused before the launch)")


def resources_line(k: Kernel) -> str:
    """The assembler's report: which assembler, how it compiled, whether any setmaxnreg split was
    kept, the resources, and where they are not what a GPU launch runs, that too."""
    r = k.resources
    a = k.assemble()
    line = (f"assembled  {a.describe()}: {r.registers} registers/thread, {r.spill_store_bytes} B spill "
            f"stores, {r.spill_load_bytes} B spill loads, {r.stack_bytes} B stack, {r.shared_bytes} B "
            f"static shared")
    note = setmaxnreg_note(a.setmaxnreg)
    if note:
        line += f"\nnote       {note}"
    if r.spill_bytes:  # correct, but every spill is a local-memory round trip inside the k-loop
        line += ("\nwarning    the assembler spilled registers to local memory, which slows the k-loop: use "
                 "more warps (a smaller warp tile), a smaller block k, or --no-frag-double-buffer")
    return line


def setmaxnreg_note(status: str) -> str:
    """Why a dropped setmaxnreg split matters and what fixes it ('' when it was kept or unused)."""
    import os

    from ..runtime.assemble_setmaxnreg import C7504_NOTE

    if "C7504" in status:
        if os.environ.get("PTXGEN_ASSEMBLER", "").strip().lower() == "nvjitlink":
            return (f"{C7504_NOTE}, and PTXGEN_ASSEMBLER=nvjitlink makes GPU launches run this cubin: "
                    f"unset it to have ptxas or the driver's JIT compile the kernel whole-program")
        return (f"{C7504_NOTE}; a GPU launch has the driver's JIT compile the PTX whole-program, "
                f"which keeps the split. `ptxas` on PATH (CUDA toolkit) builds it here and reports "
                f"that build")
    if "C7508" in status:
        return ("ptxas ignored setmaxnreg (C7508) because the kernel declares no register cap at entry "
                "(.maxnreg or .maxntid): the kernel runs without the producer/consumer register split")
    return ""


def bank_summary(k: Kernel, wavefronts: dict[int, tuple[int, int]]) -> list[str]:
    lines = k.ptx.splitlines()
    by_kind: dict[str, list[int]] = {}
    for line_no, (w, ideal) in wavefronts.items():
        text = lines[line_no - 1].strip().lstrip("@!%p0123456789 ")
        parts = text.split(" ")[0].split(".")
        kind = ".".join(parts[:2])  # ldmatrix.sync, cp.async, st.shared, ld.shared, wmma.load ...
        kind = {"ldmatrix.sync": "ldmatrix"}.get(kind, kind)
        tot = by_kind.setdefault(kind, [0, 0])
        tot[0] += w
        tot[1] += ideal
    out = []
    for kind, (w, ideal) in sorted(by_kind.items()):
        extra = w - ideal
        out.append(f"  {kind:<12} {w} wavefronts, ideal {ideal}: "
                   + ("conflict-free" if extra == 0 else f"{extra} extra ({w / ideal:.2f}x)"))
    return out or ["  no shared-memory accesses"]


def occupancy_lines(k: Kernel) -> list[str]:
    """CTAs per SM, the resource that limits them, and the waves the grid takes on the target's
    flagship part (the assembler's register count, so this assembles the kernel)."""
    from ..schedule.occupancy import occupancy

    r = k.resources
    threads = k.block[0] * k.block[1] * k.block[2]
    occ = occupancy(k.arch, r.registers, k.smem_bytes + r.shared_bytes, threads)
    others = ", ".join(f"{name} {n}" for name, n in occ.limits.items())
    ctas = k.grid[0] * k.grid[1] * k.grid[2]
    waves = occ.waves(ctas)
    full, last = divmod(ctas, occ.ctas_per_sm * occ.sms) if occ.ctas_per_sm else (0, 0)
    tail = f", the last {last / (occ.ctas_per_sm * occ.sms):.0%} full" if last and full else ""
    return [f"occupancy  {counted(occ.ctas_per_sm, 'CTA')}/SM ({counted(occ.warps_per_sm, 'warp')}), limited by {occ.limiter} "
            f"(CTAs/SM each allows: {others})",
            f"waves      {ctas} CTAs over {occ.sms} SMs x {occ.ctas_per_sm} = {waves:.2f} waves{tail} "
            f"({k.arch}'s {occ.sms}-SM part)"]
