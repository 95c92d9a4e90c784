"""bench/on_device.sh, the one-command hardware check, kept working without a GPU: its --dry-run runs
every step through the simulator-backed stand-in driver, and the summary lists every step with a
status; a step that fails (here: one given too small a budget) is FAIL, the others still run, and
the script exits non-zero at the end."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "on_device.sh"
STEPS = ("a-device-info", "b-tests-gpu", "c-planted-sm80", "c-planted-sm90a", "d-device-vs-sim", "e-gemm-sm90a",
         "e-gemm-mma-sync", "f-ablation-sm90a", "g-cluster-probe")
ROW = re.compile(r"^(?P<step>[a-g]-[\w-]+)\s+(?P<status>PASS|FAIL|SKIP)\s+(?P<secs>\d+)\s+(?P<budget>\d+|-)\s+"
                 r"(?P<note>.*)$")


@pytest.fixture(scope="module", autouse=True)
def _needs_the_stand_in():
    if shutil.which("bash") is None or shutil.which("timeout") is None:
        pytest.skip("bench/on_device.sh needs bash and coreutils' timeout")
    pytest.importorskip("cuda.bindings", reason="the stand-in driver runs under cuda-python's bindings")
    from ptxgen.runtime import simdriver

    reason = simdriver.compiler_unavailable_reason()
    if reason:
        pytest.skip(f"the stand-in driver cannot be built here: {reason}")


def run(out: Path, *flags: str, env: dict[str, str] | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    inherited = ("PTXGEN_DRIVER", "PTXGEN_TESTS_AUTO_SIM", "PTXGEN_GPU_REPORT")  # the script sets its own
    environ = {k: v for k, v in os.environ.items() if not k.startswith("BUDGET_") and k not in inherited}
    environ.update(PYTHON=sys.executable, **(env or {}))
    return subprocess.run(["bash", str(SCRIPT), "--dry-run", "--out", str(out), *flags], capture_output=True,
                          text=True, env=environ, cwd=ROOT, timeout=timeout)


def summary_rows(out: Path) -> tuple[Path, dict[str, dict[str, str]], str]:
    """(the run's folder, its rows by step, its result line)."""
    (folder,) = [p for p in out.iterdir() if p.is_dir()]
    text = (folder / "summary.txt").read_text()
    rows = {m["step"]: m.groupdict() for line in text.splitlines() if (m := ROW.match(line))}
    result = next(line for line in text.splitlines() if line.startswith("result: "))
    return folder, rows, result


def test_dry_run_runs_every_step_and_summarises_them(tmp_path):
    archive = tmp_path / "run.tar.gz"
    r = run(tmp_path / "results", "--archive", str(archive))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    folder, rows, result = summary_rows(tmp_path / "results")
    assert re.fullmatch(r"\d{4}-\d\d-\d\d-on-device-dry-run-\w+", folder.name)  # dated, with the commit
    assert list(rows) == list(STEPS)
    assert {row["status"] for row in rows.values()} == {"PASS"}, rows
    assert result.startswith("result: PASS") and "skipped" not in result
    assert all(int(row["secs"]) <= int(row["budget"]) + 15 for row in rows.values())

    info = json.loads((folder / "device_info.json").read_text())
    assert info["driver_view"]["status"] == "ok" and info["driver_view"]["driver"].startswith("sim")
    assert "nvJitLink" in info["assemblers"]["ptxgen_default"] or "ptxas" in info["assemblers"]["ptxgen_default"]

    versus = json.loads((folder / "device_vs_sim.json").read_text())
    designs = {row["design"] for row in versus["rows"]}
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import device_vs_sim
    finally:
        sys.path.remove(str(ROOT / "bench"))
    assert designs == {name for name, _, _ in device_vs_sim.DESIGNS}
    assert all(row["status"] == "ok" for row in versus["rows"]), versus["rows"]
    exact = [row for row in versus["rows"] if "device_exact" in row]
    assert {row["design"] for row in exact} == designs and all(row["bitwise_equal"] for row in exact)

    planted = json.loads((folder / "planted_races.json").read_text())
    assert planted["rows"] and all(row["sim_flags"] and row["status"] == "ok" for row in planted["rows"])
    assert all(row["hardware"].startswith("skipped: ") for row in planted["rows"])  # says why
    assert "needs real hardware" in (folder / "c-planted-sm80.log").read_text()  # pytest's skip reasons

    with tarfile.open(archive) as tar:
        assert f"{folder.name}/summary.txt" in tar.getnames()


def test_a_step_past_its_budget_is_FAIL_and_the_others_still_run(tmp_path):
    r = run(tmp_path, "--steps", "b,a", env={"BUDGET_B_TESTS_GPU": "1"}, timeout=300)
    assert r.returncode == 1, r.stdout[-3000:] + r.stderr[-2000:]
    _, rows, result = summary_rows(tmp_path)
    assert list(rows) == list(STEPS)
    assert rows["a-device-info"]["status"] == "PASS"
    assert rows["b-tests-gpu"]["status"] == "FAIL" and "timed out" in rows["b-tests-gpu"]["note"]
    assert all(rows[s]["status"] == "SKIP" and "not selected" in rows[s]["note"] for s in STEPS[2:])
    assert result.startswith("result: FAIL (b-tests-gpu;")


def test_bad_arguments_are_refused_with_the_usage(tmp_path):
    r = run(tmp_path, "--bogus", timeout=60)
    assert r.returncode == 2 and "unknown argument '--bogus'" in r.stderr
    assert not any(tmp_path.iterdir())
