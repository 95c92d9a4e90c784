"""A progress bar for long simulator runs: CTAs done / total, elapsed time and an ETA, on stderr.

The simulator reports each finished CTA (`sim.launch(on_cta_done=...)`); a ticker thread redraws
the bar twice a second, so a run whose single CTA takes minutes still shows time passing and the
ETA from the static estimate. Nothing is drawn for runs shorter than `delay` seconds.
"""
from __future__ import annotations

import sys
import threading
import time
from typing import Callable, TextIO, Union

#: `Kernel.simulate(progress=...)`: None = a bar when stderr is a terminal, True = always a bar,
#: False = nothing, or a function called as fn(ctas_done, ctas_total) after every CTA.
ProgressArg = Union[bool, None, Callable[[int, int], None]]


def duration(seconds: float) -> str:
    """`1:05`, `1:02:03`, or days for the absurd."""
    s = int(round(seconds))
    if s >= 86400:
        return f"{s / 86400:.1f} days"
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    return f"{h}:{m:02d}:{sec:02d}" if h else f"{m}:{sec:02d}"


class ProgressBar:
    """Draws `label: done/total CTAs [####    ] 40%  0:12 elapsed, ETA 0:18` on `stream` (`unit`:
    what is counted, CTAs for the simulator, candidates for `ptxgen tune`).

    On a terminal the line redraws in place; elsewhere (asked for with progress=True) a new line
    at most every `line_interval` seconds."""

    def __init__(self, total: int, *, estimate_s: float | None = None, stream: TextIO | None = None,
                 label: str = "simulating", delay: float = 2.0, tick: float = 0.5, line_interval: float = 10.0,
                 unit: str = "CTAs"):
        self.total, self.estimate_s, self.label, self.unit = max(total, 1), estimate_s, label, unit
        self.stream = stream or sys.stderr
        self.delay, self.tick, self.line_interval = delay, tick, line_interval
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.done = 0
        self.start = time.monotonic()
        self._drawn = False
        self._last_line = 0.0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ptxgen-progress", daemon=True)
        self._thread.start()

    def __call__(self, done: int, total: int | None = None) -> None:
        self.done = done
        self.draw()

    def eta(self, elapsed: float) -> float | None:
        """Seconds left: from the measured pace once a CTA is done, else from the estimate."""
        if self.done:
            return elapsed / self.done * (self.total - self.done)
        if self.estimate_s is not None:
            return max(self.estimate_s - elapsed, 0.0)
        return None

    def text(self, now: float | None = None) -> str:
        elapsed = (now or time.monotonic()) - self.start
        frac = self.done / self.total
        bar = "#" * int(frac * 20)
        eta = self.eta(elapsed)
        return (f"{self.label}: {self.done}/{self.total} {self.unit} [{bar:<20}] {frac:4.0%}  {duration(elapsed)} elapsed"
                + (f", ETA {duration(eta)}" if eta is not None and self.done < self.total else ""))

    def draw(self, final: bool = False) -> None:
        now = time.monotonic()
        if now - self.start < self.delay and not (final and self._drawn):
            return
        with self._lock:
            if self.tty:
                self.stream.write("\r" + self.text(now) + "\033[K" + ("\n" if final else ""))
            elif final or now - self._last_line >= self.line_interval:
                self.stream.write(self.text(now) + "\n")
                self._last_line = now
            self.stream.flush()
            self._drawn = True

    def _run(self) -> None:
        while not self._stop.wait(self.tick):
            self.draw()

    def close(self) -> None:
        """Stop the ticker; finish the line if anything was drawn."""
        self._stop.set()
        self._thread.join()
        if self._drawn:
            self.draw(final=True)


def progress_callback(progress: ProgressArg, total: int, estimate_s: float | None = None,
                      stream: TextIO | None = None) -> tuple[Callable[[int], None] | None, ProgressBar | None]:
    """(per-CTA callback for sim.launch, the bar to close afterwards) for a `progress` argument."""
    stream = stream or sys.stderr
    if callable(progress):
        return (lambda done: progress(done, total)), None
    if progress is None:
        progress = bool(getattr(stream, "isatty", lambda: False)())
    if not progress:
        return None, None
    bar = ProgressBar(total, estimate_s=estimate_s, stream=stream)
    return bar, bar
