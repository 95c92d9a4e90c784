"""`ptxgen run --trace run.json --trace-png run.png`: where the simulator's timeline goes, and its
picture, written also when a hazard stops the simulation (the trace ends at the stop)."""
from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator


@contextlib.contextmanager
def traced_run(trace: str | None, png: str | None, workers) -> Iterator[str | None]:
    """Yield the JSON path to pass to the simulator (None: no tracing); afterwards report it and
    draw `png` from it."""
    if trace is None and png is None:
        yield None
        return
    from .build import UsageError

    if workers.parallel:
        raise UsageError("--trace/--trace-png record one process's simulation: drop --workers/--ray")
    if png is not None:
        from ptxgen.sim.trace_png import require_matplotlib
        require_matplotlib()
    scratch = None
    if trace is None:
        fd, scratch = tempfile.mkstemp(suffix=".json", prefix="ptxgen-trace-")
        os.close(fd)
    path = trace or scratch
    try:
        yield path
    finally:
        try:
            if os.path.exists(path) and os.path.getsize(path):
                if trace is not None:
                    print(f"trace      {trace}: {os.path.getsize(trace) / 1e6:.2f} MB of Chrome trace events "
                          "(open in https://ui.perfetto.dev; time = simulator steps, not cycles)")
                if png is not None:
                    from ptxgen.sim.trace_png import draw
                    draw(path, png)
                    print(f"trace      {png}: the timeline of the first traced CTA (or cluster)")
        except Exception as err:  # a picture must not hide the run's own result or hazard
            print(f"ptxgen: warning: could not write the trace picture: {err}", file=sys.stderr)
        finally:
            if scratch is not None:
                os.unlink(scratch)
