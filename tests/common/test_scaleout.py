"""ptxgen.scaleout: a process-pool map and a Ray map that return what a serial loop returns.

The Ray tests start a local instance (`ray.init(num_cpus=2)`) and are skipped, with the reason,
where Ray is not installed (`pip install -e ".[cluster]"`); the process-pool tests always run.
Every test here is bounded in time by `bounded` (SIGALRM), so a hung pool fails instead of hanging CI.
"""
from __future__ import annotations

import os
import sys
import time

import pytest

from ptxgen.scaleout import Workers, process_map, ray_map, require_ray, spread

#: Seconds any one test here may take (a Ray start is a few seconds on a busy 2-core machine).
LIMIT_S = 120


pytestmark = pytest.mark.usefixtures("bounded")   # each test stops after LIMIT_S (conftest.py)


# module level, so workers can unpickle them by reference
def scaled_square(shared: int, x: int) -> int:
    return shared * x * x


def pid_of(shared, x) -> int:
    time.sleep(0.05)
    return os.getpid()


def fail_some(shared: dict, x: int) -> int:
    """Fails for the items in shared["fail"]; the item in shared["slow"] takes a while first."""
    if x == shared.get("slow"):
        time.sleep(0.5)
    if x in shared["fail"]:
        raise ValueError(f"item {x} failed")
    return x


def fail_or_linger(pid_file: str, x: int) -> int:
    """Item 0 fails once item 1 (which then sleeps a minute) has written its process id."""
    if x == 1:
        with open(pid_file, "w") as f:
            f.write(str(os.getpid()))
        time.sleep(60)
    while not os.path.getsize(pid_file):
        time.sleep(0.05)
    raise ValueError("item 0 failed")


ITEMS = list(range(12))
EXPECTED = [3 * x * x for x in ITEMS]


def test_process_map_returns_results_in_item_order_from_other_processes():
    seen = []
    assert process_map(scaled_square, ITEMS, 2, shared=3, on_result=lambda i, r: seen.append((i, r))) == EXPECTED
    assert sorted(seen) == list(enumerate(EXPECTED))
    pids = process_map(pid_of, range(4), 2)
    assert os.getpid() not in pids


@pytest.mark.parametrize("workers", [Workers.of(1), Workers.of(2)], ids=["serial", "processes"])
def test_spread_raises_the_earliest_failing_items_error(workers):
    # item 7 fails at once, item 3 only after a pause: a serial loop would raise item 3's error
    with pytest.raises(ValueError, match="item 3 failed"):
        spread(fail_some, ITEMS, workers, shared={"fail": {3, 7}, "slow": 3})


def test_a_failure_ends_the_workers_still_running(tmp_path):
    pid_file = tmp_path / "pid"
    pid_file.write_text("")
    t0 = time.monotonic()
    with pytest.raises(ValueError, match="item 0 failed"):
        process_map(fail_or_linger, [0, 1], 2, shared=str(pid_file))
    assert time.monotonic() - t0 < 30
    with pytest.raises(ProcessLookupError):  # terminated and reaped, not left sleeping
        os.kill(int(pid_file.read_text()), 0)


def test_workers_of_reads_the_user_facing_pair():
    assert Workers.of(1) == Workers() and not Workers.of(1).parallel
    assert Workers.of(4).processes == 4
    assert Workers.of("ray").ray and Workers.of("ray").ray_address is None
    assert Workers.of(1, "auto") == Workers(ray=True, ray_address="auto")
    assert Workers.of(None) == Workers()
    import numpy as np
    assert Workers.of(np.int64(3)).processes == 3


@pytest.mark.parametrize("workers,address,message", [
    (0, None, "at least 1 process"),
    ("many", None, "workers=4, or workers='ray'"),
    (True, None, "an int >= 1"),
    (2.0, None, "an int >= 1"),
    (2, "auto", "pass one"),
])
def test_bad_worker_options_name_the_fix(workers, address, message):
    with pytest.raises(ValueError, match=message):
        Workers.of(workers, address)


def test_a_ray_option_without_ray_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray now fails, as when it is not installed
    with pytest.raises(ImportError, match=r'pip install -e "\.\[cluster\]"'):
        require_ray()
    with pytest.raises(ImportError, match=r"\[cluster\]"):
        spread(scaled_square, ITEMS, Workers.of("ray"), shared=3)


# -- Ray ---------------------------------------------------------------------------------------------
def test_ray_map_returns_results_in_item_order(local_ray):
    seen = []
    got = ray_map(scaled_square, ITEMS, shared=3, num_gpus=0, on_result=lambda i, r: seen.append(i))
    assert got == EXPECTED and sorted(seen) == ITEMS


def test_ray_map_raises_the_tasks_own_earliest_error(local_ray):
    with pytest.raises(ValueError, match="item 3 failed") as info:
        ray_map(fail_some, ITEMS, shared={"fail": {3, 7}, "slow": 3}, num_gpus=0)
    assert type(info.value) is ValueError  # not Ray's wrapper


def test_ray_map_one_gpu_per_task_needs_gpus(local_ray):
    with pytest.raises(RuntimeError, match="num_gpus=0"):
        ray_map(scaled_square, ITEMS, shared=3, num_gpus=1)


def test_spread_on_ray_matches_serial(local_ray):
    assert spread(scaled_square, ITEMS, Workers.of("ray"), shared=3) == spread(scaled_square, ITEMS, Workers(), shared=3)
