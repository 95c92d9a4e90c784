"""Spreading independent jobs over local processes or a Ray cluster (an existing engine, not ours).

    from ptxgen.scaleout import Workers, spread

    def measure(shared, item):          # module-level: pickled by reference, so importable by workers
        return ...

    results = spread(measure, items, Workers.of(4), shared=big)           # 4 local processes
    results = spread(measure, items, Workers.of("ray", "auto", num_gpus=1))  # one task per GPU

* `fn(shared, item)` runs once per item; `shared` (operands, a kernel's PTX) travels to each
  worker once (a process pool's initializer; Ray's object store), not once per item.
* Results come back in the order of `items`, whatever order the workers finish in, so a spread
  run returns what a serial one does when `fn` is deterministic.
* `on_result(index, result)` runs in the calling process as each item finishes (progress bars).
* An item that raises stops the run: items not yet started are cancelled, and the exception of the
  EARLIEST failing item is raised, as a serial loop would raise it (Ray's wrapper is removed).
* `Workers.of(1)` runs in this process, no pool, no pickling.

Ray is optional (`pip install -e ".[cluster]"`) and imported only when a Ray option is used.
`ray_map(..., num_gpus=1)` asks Ray for one GPU per task, so a cluster runs one task per GPU at a
time (what `ptxgen tune --ray` needs); `num_gpus=0` runs on CPUs (the simulator, the tests).
`address`: None joins the instance this process already started with `ray.init`, else starts a
local one (or joins $RAY_ADDRESS); "auto" joins a cluster started with `ray start`;
"ray://host:10001" connects as a client. Workers import `fn`'s module: ptxgen must be installed
(or on PYTHONPATH) on every node.
"""
from __future__ import annotations

import operator
import os
import signal
import sys
import warnings
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import multiprocessing

CLUSTER_EXTRA = 'pip install -e ".[cluster]"'
OnResult = Callable[[int, Any], None]


class WorkerLost(RuntimeError):
    """A pool worker process died (killed, or out of memory) before finishing its item."""


@dataclass(frozen=True)
class Workers:
    """Where `spread` runs jobs: `processes` local processes, or Ray tasks when `ray` is set."""

    processes: int = 1
    ray: bool = False
    ray_address: str | None = None
    num_cpus: float = 1.0
    num_gpus: float = 0.0

    @classmethod
    def of(cls, workers: "int | str | Workers | None" = 1, ray_address: str | None = None, *,
           num_cpus: float = 1.0, num_gpus: float = 0.0) -> "Workers":
        """From the user-facing pair: `workers` an int (local processes; 1 = this process) or
        "ray"; a `ray_address` alone implies Ray."""
        if isinstance(workers, Workers):
            return workers
        if workers is None:
            workers = 1
        if workers == "ray" or (ray_address is not None and workers == 1):
            return cls(ray=True, ray_address=ray_address, num_cpus=num_cpus, num_gpus=num_gpus)
        try:
            if isinstance(workers, (bool, str, float)):
                raise TypeError
            workers = operator.index(workers)  # an int, or numpy's
        except TypeError:
            raise ValueError(f"workers={workers!r}: expected a number of local processes (an int >= 1) or "
                             "'ray'; fix: workers=4, or workers='ray' with ray_address=") from None
        if workers < 1:
            raise ValueError(f"workers={workers}: at least 1 process is needed; fix: workers=1 runs serially")
        if ray_address is not None:
            raise ValueError(f"workers={workers} and ray_address={ray_address!r} ask for both a local process "
                             "pool and Ray; fix: pass one (ray_address alone runs on Ray)")
        return cls(processes=workers, num_cpus=num_cpus, num_gpus=num_gpus)

    @property
    def parallel(self) -> bool:
        return self.ray or self.processes > 1

    def describe(self) -> str:
        if self.ray:
            return f"Ray ({self.ray_address or 'local or running instance'})"
        return f"{self.processes} local processes" if self.processes > 1 else "this process"


def spread(fn: Callable[[Any, Any], Any], items: Sequence[Any], workers: Workers, *, shared: Any = None,
           on_result: OnResult | None = None) -> list[Any]:
    """fn(shared, item) for every item, on `workers`; the results in item order (module docstring)."""
    if workers.ray:
        return ray_map(fn, items, address=workers.ray_address, shared=shared, num_cpus=workers.num_cpus,
                       num_gpus=workers.num_gpus, on_result=on_result)
    if workers.processes > 1 and len(items) > 1:
        return process_map(fn, items, workers.processes, shared=shared, on_result=on_result)
    out = []
    for i, item in enumerate(items):
        out.append(fn(shared, item))
        if on_result is not None:
            on_result(i, out[-1])
    return out


# -- local processes -------------------------------------------------------------------------------
_WORKER_SHARED: Any = None  # set once per pool worker process by _init_worker (never in the parent)


def _init_worker(shared: Any) -> None:
    global _WORKER_SHARED
    _WORKER_SHARED = shared
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle: no N tracebacks
    if hasattr(signal, "pthread_sigmask"):  # blocked by process_map while the worker started
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def _call_in_worker(fn: Callable[[Any, Any], Any], item: Any) -> Any:
    return fn(_WORKER_SHARED, item)


def process_map(fn: Callable[[Any, Any], Any], items: Sequence[Any], processes: int, *, shared: Any = None,
                on_result: OnResult | None = None) -> list[Any]:
    """fn(shared, item) over a pool of `processes` processes; results in item order.

    Forked on Linux: the workers inherit `shared` without pickling it, and a user's script needs
    no `if __name__ == "__main__":` guard (a spawned worker re-runs the script). The workers only
    compute on numpy arrays: no CUDA context or thread of the parent is used in them. Elsewhere
    (macOS, Windows) the workers are spawned, and the guard is needed."""
    if processes < 1:
        raise ValueError(f"processes={processes}: need at least 1")
    # Workers start during the submits (they inherit this signal mask): SIGINT stays blocked until
    # each has set it to ignored, and the parent takes a Ctrl-C of that moment right after.
    masked = hasattr(signal, "pthread_sigmask")
    if masked:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        with warnings.catch_warnings():  # Python >= 3.12 warns of fork() beside threads (a progress
            # bar); the workers use none of the parent's threads or locks
            warnings.filterwarnings("ignore", message=".*fork", category=DeprecationWarning)
            pool = ProcessPoolExecutor(max_workers=min(processes, max(len(items), 1)),
                                       mp_context=multiprocessing.get_context(start_method()),
                                       initializer=_init_worker, initargs=(shared,))
            futures = {pool.submit(_call_in_worker, fn, item): i for i, item in enumerate(items)}
    finally:
        if masked:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    try:
        results = _collect(futures, lambda f: f.result(), on_result, len(items), _cancel_futures)
    except BrokenProcessPool as e:
        _terminate(pool)
        raise WorkerLost(f"a worker process died ({e}); it may have run out of memory: fix: fewer "
                         "workers, or a smaller problem") from None
    except BaseException:
        _terminate(pool)
        raise
    pool.shutdown(wait=True)
    return results


def start_method() -> str:
    """How pool workers start: "fork" on Linux, "spawn" elsewhere (fork is unsafe on macOS)."""
    return "fork" if sys.platform.startswith("linux") else "spawn"


def _cancel_futures(pending: list[Future]) -> None:
    for f in pending:
        f.cancel()


def _terminate(pool: ProcessPoolExecutor) -> None:
    """Stop a pool now (an error or Ctrl-C): cancel queued items and end the worker processes
    (taken before shutdown, which forgets them, and terminated rather than waited for: a CTA may
    take minutes)."""
    procs = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for proc in procs:
        if proc.is_alive():
            proc.terminate()
    for proc in procs:
        proc.join(timeout=5)


def _collect(handles: dict[Any, int], get: Callable[[Any], Any], on_result: OnResult | None, count: int,
             cancel: Callable[[list[Any]], None], waiter: Callable[[list[Any]], tuple[list, list]] | None = None
             ) -> list[Any]:
    """Gather results as they finish; on a failure cancel the later items, wait for the earlier ones,
    and raise the earliest failing item's exception."""
    waiter = waiter or (lambda pending: tuple(map(list, wait(pending, return_when=FIRST_COMPLETED))))
    results: list[Any] = [None] * count
    pending = list(handles)
    failed: dict[int, BaseException] = {}
    while pending:
        done, pending = waiter(pending)
        for h in done:
            i = handles[h]
            try:
                results[i] = get(h)
            except Exception as e:  # noqa: BLE001 - re-raised below, earliest first
                failed[i] = e
                continue
            if on_result is not None and not failed:
                on_result(i, results[i])
        if failed:
            first = min(failed)
            later = [h for h in pending if handles[h] > first]
            cancel(later)
            pending = [h for h in pending if handles[h] < first]
    if failed:
        raise failed[min(failed)]
    return results


# -- Ray -------------------------------------------------------------------------------------------
def require_ray(what: str = "a Ray option") -> Any:
    """The ray module, or an ImportError naming the extra to install."""
    try:
        import ray
    except ImportError:
        raise ImportError(f"{what} needs Ray, which is not installed; fix: {CLUSTER_EXTRA} "
                          "(or pip install 'ray>=2.9')") from None
    return ray


def connect_ray(address: str | None = None) -> Any:
    """Join Ray (see the module docstring for `address`); returns the ray module. A process
    already joined to Ray stays on that instance, whatever `address` says."""
    ray = require_ray()
    if not ray.is_initialized():
        kwargs: dict[str, Any] = {"address": address} if address else {}
        if not address and not os.environ.get("RAY_ADDRESS"):
            kwargs["include_dashboard"] = False  # a local instance for this run: no web server
        try:
            ray.init(**kwargs, log_to_driver=False)
        except ConnectionError as e:
            raise ConnectionError(f"cannot reach a Ray cluster at {address!r}: {e}; fix: start one with "
                                  "`ray start --head`, pass its address (host:6379, or auto), or omit "
                                  "the address for a local instance") from None
    return ray


def _ray_call(fn: Callable[[Any, Any], Any], shared: Any, item: Any) -> Any:
    return fn(shared, item)


def ray_map(fn: Callable[[Any, Any], Any], items: Sequence[Any], *, address: str | None = None,
            shared: Any = None, num_cpus: float = 1.0, num_gpus: float = 1.0,
            on_result: OnResult | None = None) -> list[Any]:
    """fn(shared, item) as one Ray task per item, each reserving `num_cpus` CPUs and `num_gpus`
    GPUs (1: one task per GPU at a time); results in item order (module docstring)."""
    ray = connect_ray(address)
    if num_gpus > 0 and ray.cluster_resources().get("GPU", 0) < num_gpus:
        raise RuntimeError(f"each task asks Ray for {num_gpus} GPU(s), but the cluster has "
                           f"{ray.cluster_resources().get('GPU', 0):g}; fix: add GPU nodes, or num_gpus=0 "
                           "for work that needs none")
    remote = ray.remote(_ray_call).options(num_cpus=num_cpus, num_gpus=num_gpus, max_retries=0)
    shared_ref = ray.put(shared)
    refs = {remote.remote(fn, shared_ref, item): i for i, item in enumerate(items)}

    def get(ref: Any) -> Any:
        try:
            return ray.get(ref)
        except ray.exceptions.RayTaskError as e:  # the task's own exception, not Ray's wrapper
            cause = getattr(e, "cause", None)
            if isinstance(cause, Exception):
                raise cause from None
            raise

    def cancel(later: list[Any]) -> None:
        for ref in later:
            ray.cancel(ref, force=False)

    def waiter(pending: list[Any]) -> tuple[list, list]:
        return ray.wait(pending, num_returns=1)

    try:
        return _collect(refs, get, on_result, len(items), cancel, waiter)
    except BaseException:
        cancel([r for r in refs])
        raise
