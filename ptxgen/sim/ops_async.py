"""cp.async (global -> shared), its commit groups and waits (docs/ptx_facts/cp_async.md §5).

A copy reads global memory when issued but its bytes land in shared memory only when a wait of
the issuing thread covers its group; until then the destination bytes are marked pending and any
read of them (or another copy into them) is an "async-pending" hazard. Landing counts as a shared
write by the issuing thread at that moment, so other threads still need a bar.sync.
"""
from __future__ import annotations

import numpy as np

from .cluster import own_offsets

from .errors import Fault
from .memory import bank_wavefronts
from .ops_mem import check_aligned, per_thread, address_getter, lanes_per_phase
from .operands import Lit, Name
from .parse import Instr
from .state import AsyncChunk, CtaState


def compile_cp(ins: Instr, ctx):
    mods = ins.mods
    if not mods or mods[0] != "async":
        raise ctx.fail(f"cp.{'.'.join(mods)} is not supported (only cp.async)")
    rest = mods[1:]
    if rest == ("commit_group",):
        return _commit
    if rest == ("wait_all",):
        return _wait_all
    if rest == ("wait_group",):
        if len(ins.operands) != 1 or not isinstance(ins.operands[0], Lit) or ins.operands[0].kind != "int":
            raise ctx.fail("cp.async.wait_group needs an immediate group count")
        keep = int(ins.operands[0].value)
        return lambda cta, mask: _wait(cta, mask, keep)
    return _compile_copy(ins, ctx, rest)


def _compile_copy(ins: Instr, ctx, mods: tuple):
    if not mods or mods[0] not in ("ca", "cg"):
        raise ctx.fail(f"cp.async.{'.'.join(mods)} is not supported (bulk and mbarrier forms are not)")
    level = mods[0]
    seen = set()
    cache_hint = False
    for m in mods[1:]:
        if m in ("shared", "shared::cta", "global"):
            seen.add(m.split("::")[0])
        elif m == "L2::cache_hint":
            cache_hint = True
        elif m in ("L2::64B", "L2::128B", "L2::256B"):
            continue
        else:
            raise ctx.fail(f"cp.async modifier .{m} is not supported")
    if seen != {"shared", "global"}:
        raise ctx.fail("cp.async needs .shared and .global")
    ops = list(ins.operands)
    if cache_hint:
        if len(ops) < 4:
            raise ctx.fail(".L2::cache_hint needs a cache-policy operand")
        ops.pop()
    if len(ops) not in (3, 4):
        raise ctx.fail("cp.async takes [dst], [src], cp-size{, src-size | ignore-src}")
    size_op = ops[2]
    if not isinstance(size_op, Lit) or size_op.kind != "int" or size_op.value not in (4, 8, 16):
        raise ctx.fail("cp-size must be the immediate 4, 8 or 16")
    cp_size = int(size_op.value)
    if level == "cg" and cp_size != 16:
        raise ctx.fail("cp.async.cg only allows cp-size 16")
    get_dst = address_getter(ctx, ctx.mem(ops[0]), "shared")
    get_src = address_getter(ctx, ctx.mem(ops[1]), "global")
    get_size = None
    get_ignore = None
    if len(ops) == 4:
        extra = ops[3]
        if isinstance(extra, Name) and extra.name in ctx.regs and ctx.regs[extra.name][1] == 1:
            get_ignore = ctx.src(extra, "pred")
        else:
            if isinstance(extra, Lit) and not 0 <= extra.value <= cp_size:
                raise ctx.fail(f"src-size {extra.value} is outside [0, {cp_size}]")
            get_size = ctx.src(extra, "u32")
    line = ctx.line

    def run(cta: CtaState, mask):
        tids = cta.threads(mask)
        dst = own_offsets(cta, per_thread(get_dst(cta.R), tids), "cp.async destination")
        src = per_thread(get_src(cta.R), tids)
        if get_size is not None:
            size = per_thread(get_size(cta.R), tids).astype(np.int64)
            if (size > cp_size).any():
                k = int(np.flatnonzero(size > cp_size)[0])
                raise Fault("out-of-bounds", f"thread {int(tids[k])}: src-size {int(size[k])} exceeds cp-size {cp_size}")
        elif get_ignore is not None:
            size = np.where(per_thread(get_ignore(cta.R), tids), 0, cp_size).astype(np.int64)
        else:
            size = np.full(len(tids), cp_size, dtype=np.int64)
        _issue(cta, tids, dst, src, size, cp_size, line)
    return run


def _issue(cta: CtaState, tids, dst, src, size, cp_size: int, line: int) -> None:
    smem = cta.smem
    check_aligned(dst, cp_size, "cp.async shared destination")
    reads = size > 0
    check_aligned(src[reads], cp_size, "cp.async global source")
    smem.check_bounds(dst, cp_size, "cp.async writes")
    idx = smem.byte_index(dst, cp_size)
    tid_rep = np.repeat(tids, cp_size)
    smem.check_not_pending(idx, tids, cp_size, "cp.async writes")
    smem.check_write(idx, tid_rep, cta.epoch, "cp.async writes")
    stamp = smem.scratch
    order = np.arange(len(idx), dtype=np.int32)
    stamp[idx] = order
    if (stamp[idx] != order).any():
        k = int(np.flatnonzero(stamp[idx] != order)[0])
        raise Fault("race", f"two cp.async copies of one instruction write shared byte {int(idx[k]):#x}")
    data = np.zeros((len(tids), cp_size), dtype=np.uint8)
    full = size == cp_size
    if full.any():
        data[full] = cta.gmem.read(src[full], cp_size, cta.sync, "cp.async reads", tids[full])
    partial = reads & ~full
    if partial.any():
        rows = np.flatnonzero(partial)
        cta.gmem.locate(src[rows], size[rows], "cp.async reads")
        for r in rows:
            n = int(size[r])
            data[r, :n] = cta.gmem.read(src[r:r + 1], n, cta.sync, "cp.async reads", tids[r:r + 1])[0]
    smem.pending[idx] += 1
    cta.pending.append(AsyncChunk(tids.copy(), cta.commit_count[tids].copy(), dst, data, line))
    cta.add_smem_stat(line, *bank_wavefronts(tids >> 5, tids & 31, dst, cp_size, lanes_per_phase(cp_size)))


def _commit(cta: CtaState, mask) -> None:
    tids = cta.threads(mask)
    counts = cta.commit_count.copy()
    counts[tids] += 1
    cta.commit_count = counts


def _wait_all(cta: CtaState, mask) -> None:
    _commit(cta, mask)
    _wait(cta, mask, 0)


def _wait(cta: CtaState, mask, keep: int) -> None:
    """Land every copy of the waiting threads whose group is older than their `keep` newest."""
    if not cta.pending:
        return
    waiting = np.zeros(cta.n, dtype=bool)
    waiting[cta.threads(mask)] = True
    limit = cta.commit_count - keep
    smem = cta.smem
    remaining = []
    for chunk in cta.pending:
        done = waiting[chunk.threads] & (chunk.groups < limit[chunk.threads])
        if not done.any():
            remaining.append(chunk)
            continue
        width = chunk.data.shape[1]
        idx = smem.byte_index(chunk.dst[done], width)
        tid_rep = np.repeat(chunk.threads[done], width)
        smem.pending[idx] -= 1
        smem.record_write(idx, tid_rep, cta.epoch, f"cp.async (issued at line {chunk.line}) landing")
        smem.data[idx] = chunk.data[done].reshape(-1)
        if not done.all():
            keep_rows = ~done
            remaining.append(AsyncChunk(chunk.threads[keep_rows], chunk.groups[keep_rows],
                                        chunk.dst[keep_rows], chunk.data[keep_rows], chunk.line))
    cta.pending = remaining


OPS = {"cp": compile_cp}
