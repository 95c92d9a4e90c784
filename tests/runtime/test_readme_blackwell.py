"""README's Blackwell (sm_100a) example runs as written: the Python snippet on the simulator (its
result compared with float64 numpy) and the `ptxgen run/emit/info` commands through the CLI."""
from __future__ import annotations

import re
import shlex
from pathlib import Path

from ptxgen.cli.app import main

README = Path(__file__).resolve().parents[2] / "README.md"


def _section() -> str:
    text = README.read_text()
    start = text.index("### Blackwell (sm_100a): a bf16 example")
    return text[start:text.index("\n## ", start)]


def test_readme_blackwell_python_snippet_runs_and_passes(capsys):
    code = re.search(r"```python\n(.*?)```", _section(), re.S).group(1)
    exec(compile(code, "README.md (Blackwell)", "exec"), {})  # noqa: S102 - the README's own example
    out = capsys.readouterr().out
    assert out.startswith("PASS"), out


def test_readme_blackwell_commands_run(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    lines = re.search(r"```bash\n(.*?)```", _section(), re.S).group(1).strip().splitlines()
    assert [ln.split()[1] for ln in lines] == ["run", "run", "run", "run", "emit", "info"]
    for line in lines:
        argv = shlex.split(line.split("#")[0])
        assert argv[0] == "ptxgen"
        status = main(argv[1:])
        out = capsys.readouterr().out
        assert status == 0, (line, out)
        if argv[1] == "run":
            assert "PASS" in out
        if argv[1] == "info":
            assert "by the cost model over" in out and "B200" in out
    ptx = (tmp_path / "gemm_sm100.ptx").read_text()
    assert ".target sm_100a" in ptx and "tcgen05.mma.cta_group::1.kind::f16" in ptx
