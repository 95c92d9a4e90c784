"""Fixtures shared by the scale-out tests (test_scaleout, test_simulate_workers, test_cli_workers)."""
from __future__ import annotations

import signal

import pytest


@pytest.fixture
def bounded(request):
    """Stop the test with a TimeoutError after the module's LIMIT_S seconds (a hung worker pool or
    Ray start must fail the test, not CI); modules opt in with usefixtures("bounded")."""
    limit = request.module.LIMIT_S

    def expire(signum, frame):
        raise TimeoutError(f"test ran past {limit} s")

    old = signal.signal(signal.SIGALRM, expire)
    signal.alarm(limit)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


@pytest.fixture(scope="session")
def local_ray():
    """A local Ray instance of 2 CPUs for the whole session (one start costs 10-30 s on a busy
    machine); skipped, with the reason, where Ray is not installed."""
    ray = pytest.importorskip("ray", reason='Ray is not installed (pip install -e ".[cluster]")')
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    if started:
        ray.shutdown()
