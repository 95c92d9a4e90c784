"""Fixtures shared by the scale-out tests (common/test_scaleout, common/test_simulate_workers,
cli/test_cli_workers, tune/test_tune), and the child process the Ray tests run in. tests/conftest.py
imports every fixture and hook here, so they apply wherever such a test lives.

Ray tests (those using the `local_ray` fixture, marked `ray` at collection) never run in the pytest process itself: a Ray driver there would live on
beside every later test, and a process that forks a Ray driver (the process-pool tests do) or loses
Ray's local daemons is ended by Ray's core worker with exit status 1, taking the whole run with it.
So the first Ray test of a run starts ONE child pytest with every selected Ray test (one local Ray
instance for all of them); each Ray test in the parent then passes or fails with its own outcome
from the child, its failure text included. A child that dies is followed by one more for the
tests it had not finished; tests still without an outcome fail, naming both exit statuses and
showing the children's output.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

#: set in the child pytest that runs the Ray tests; its value is the file the outcomes go to
RAY_CHILD_ENV = "PTXGEN_RAY_CHILD_RESULTS"
#: the most seconds the child may take for all the Ray tests of a run (a Ray start included)
RAY_CHILD_LIMIT_S = 900
IN_RAY_CHILD = bool(os.environ.get(RAY_CHILD_ENV))


@pytest.fixture
def bounded(request):
    """Stop the test with a TimeoutError after the module's LIMIT_S seconds (a hung worker pool or
    Ray start must fail the test, not CI); modules opt in with usefixtures("bounded"). A Ray test
    in the parent only reads its outcome from the child, which has its own limit."""
    if request.node.get_closest_marker("ray") and not IN_RAY_CHILD:
        yield
        return
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
    """A local Ray instance of 2 CPUs for all the Ray tests of the child process (one start costs
    10-30 s on a busy machine); None in the parent, where the test body does not run. Skipped,
    with the reason, where Ray is not installed."""
    ray = pytest.importorskip("ray", reason='Ray is not installed (pip install -e ".[cluster]")')
    if not IN_RAY_CHILD:
        yield None
        return
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    if started:
        ray.shutdown()


# -- the Ray child process -------------------------------------------------------------------------
def pytest_configure(config):
    config.addinivalue_line("markers", "ray: runs in a child pytest process with a local Ray instance "
                                       "(tests/ray_child.py)")


def pytest_collection_modifyitems(session, config, items):
    """Mark every test that uses `local_ray` as a Ray test, and remember the selected ones, so the
    child runs them all at once."""
    for item in items:
        if "local_ray" in getattr(item, "fixturenames", ()):
            item.add_marker("ray")
    config.stash[_RAY_ITEMS] = [item.nodeid for item in items if item.get_closest_marker("ray")]
    config.stash[_RAY_OUTCOMES] = None


def pytest_runtest_logreport(report):
    """In the child: append each Ray test's outcome (its call, or a failed/skipped setup) to the file."""
    path = os.environ.get(RAY_CHILD_ENV)
    if not path or not (report.when == "call" or report.outcome != "passed"):
        return
    text = report.longrepr[2] if report.skipped and isinstance(report.longrepr, tuple) else report.longreprtext
    with open(path, "a") as f:
        f.write(json.dumps({"nodeid": report.nodeid, "outcome": report.outcome, "text": text}) + "\n")


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    """In the parent: a Ray test takes its outcome from the child instead of running its body."""
    if IN_RAY_CHILD or not pyfuncitem.get_closest_marker("ray"):
        return None
    config = pyfuncitem.config
    if config.stash[_RAY_OUTCOMES] is None:
        config.stash[_RAY_OUTCOMES] = _run_ray_child(config.stash[_RAY_ITEMS], config.rootpath)
        outcomes, crash = config.stash[_RAY_OUTCOMES]
        missing = [n for n in config.stash[_RAY_ITEMS] if n not in outcomes]
        if missing:  # the child died (Ray's daemons lost, say): once more for what it had not run
            again, crash_again = _run_ray_child(missing, config.rootpath)
            config.stash[_RAY_OUTCOMES] = ({**outcomes, **again},
                                           f"{crash}\nand a second child, for the rest, {crash_again}")
    outcomes, crash = config.stash[_RAY_OUTCOMES]
    got = outcomes.get(pyfuncitem.nodeid)
    if got is None:
        pytest.fail(f"the child pytest running the Ray tests gave no outcome for this test; {crash}",
                    pytrace=False)
    if got["outcome"] == "skipped":
        pytest.skip(got["text"].removeprefix("Skipped: ") or "skipped in the Ray child")
    if got["outcome"] == "failed":
        pytest.fail(f"failed in the child pytest running the Ray tests:\n{got['text']}", pytrace=False)
    return True


_RAY_ITEMS = pytest.StashKey[list]()
_RAY_OUTCOMES = pytest.StashKey[object]()


def _run_ray_child(nodeids: list[str], rootpath: Path) -> tuple[dict[str, dict], str]:
    """Run `nodeids` in one child pytest; their outcomes by node id, and what to say of a crash."""
    with tempfile.TemporaryDirectory(prefix="ptxgen-ray-child-") as tmp:
        results = Path(tmp) / "outcomes.jsonl"
        results.touch()
        env = {**os.environ, RAY_CHILD_ENV: str(results)}
        cmd = [sys.executable, "-u", "-m", "pytest", "-p", "no:cacheprovider", "-o", "addopts=", "-q", *nodeids]
        try:
            run = subprocess.run(cmd, cwd=rootpath, env=env, capture_output=True, text=True,
                                 timeout=RAY_CHILD_LIMIT_S)
            status, output = f"exit status {run.returncode}", run.stdout + run.stderr
        except subprocess.TimeoutExpired as e:
            status = f"killed after {RAY_CHILD_LIMIT_S} s"
            output = "".join(x.decode() if isinstance(x, bytes) else (x or "") for x in (e.stdout, e.stderr))
        outcomes = {}
        for line in results.read_text().splitlines():
            entry = json.loads(line)
            if entry["nodeid"] not in outcomes or entry["outcome"] != "passed":
                outcomes[entry["nodeid"]] = entry
    stopped = next((n for n in nodeids if n not in outcomes), None)
    tail = "\n".join(output.strip().splitlines()[-40:])
    return outcomes, (f"it ended with {status} while running {stopped}, after {len(outcomes)} of "
                      f"{len(nodeids)} Ray tests; the end of its output:\n{tail}")
