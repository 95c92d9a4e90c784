"""What may still be in flight when a CTA's last thread exits (docs/ptx_facts/tma.md §9d-exit).

When every thread of a CTA has exited, its shared memory may be given to the next CTA the SM
starts. An asynchronous operation that still reads or writes that shared memory then touches
another CTA's bytes, so each kind must be waited for by the kernel before it ends:

* a bulk/TMA store (`cp.async.bulk{.tensor}` shared -> global, `.bulk_group`) reads its source
  until the issuing thread's `cp.async.bulk.wait_group.read` (or `wait_group`) covers its group
  (CUTLASS ends its epilogue with `tma_store_wait<0>()`; Triton with `wait_group.read 0`);
* a cp.async copy writes its destination until the issuing thread's `cp.async.wait_group` /
  `wait_all` covers it (cp_async.md §5);
* a TMA/bulk load writes its destination until its mbarrier phase completes and a thread
  observes it (mbarrier.md §9e);
* a wgmma reads its shared operands until `wgmma.wait_group` retires it (wgmma.md §9b).

tcgen05 operations need no rule here: they work on tensor memory, which must be deallocated
before exit (tmem.check_exit), and a dealloc already refuses columns with operations in flight.
Each finding is reported at the line that issued the operation, the exit named in the detail.
"""
from __future__ import annotations

from .errors import HazardError
from .state import CtaState


def _hazard(program, line: int, detail: str, cta: CtaState) -> HazardError:
    text = program.lines[line - 1] if 0 < line <= len(program.lines) else ""
    return HazardError("async-pending", line, f"{detail} [CTA {cta.cta_xyz}]", text)


def check_cta_end(program, cta: CtaState) -> None:
    """Raise a HazardError for the first asynchronous operation the finished CTA left in flight."""
    hop = cta.hopper
    if hop is not None and hop.bulk_reads:
        r = min(hop.bulk_reads, key=lambda b: b.line)
        raise _hazard(program, r.line, (
            f"the CTA exits while the bulk store issued here by thread {r.thread} may still read its "
            f"shared source ({len(r.idx)} bytes from {int(r.idx.min()):#x}); the shared memory can be "
            "given to another CTA once this one exits, so the issuing thread must run "
            "cp.async.bulk.wait_group.read 0 (after its last commit_group) before it exits"), cta)
    if cta.pending:
        chunk = min(cta.pending, key=lambda c: c.line)
        raise _hazard(program, chunk.line, (
            f"the CTA exits while the cp.async issued here by thread {int(chunk.threads[0])} has not "
            "landed (no cp.async.wait_group/wait_all of the issuing thread covered its group); it would "
            "write shared memory the CTA no longer owns: wait for it before exit"), cta)
    if hop is not None:
        for bar in hop.barriers.values():
            if bar.inflight:
                c = min(bar.inflight, key=lambda f: f.line)
                raise _hazard(program, c.line, (
                    f"the CTA exits while the copy issued here still writes {c.nbytes} bytes of shared "
                    f"memory ({bar.describe()}); no thread waited for the phase it completes, so it may "
                    "land after the CTA's shared memory was given to another CTA"), cta)
    wg = cta.wgmma
    if wg is not None and wg.inflight:
        rec = min(wg.inflight, key=lambda f: f.line)
        raise _hazard(program, rec.line, (
            f"the CTA exits while the wgmma issued here by warpgroup {rec.wg} is in flight (it may "
            "still read its shared operands); retire it with wgmma.wait_group 0 before exit"), cta)
