"""Every runtime test gets its own cache directory, so nothing touches ~/.cache."""
import pytest


@pytest.fixture(autouse=True)
def cache_root(tmp_path, monkeypatch):
    monkeypatch.setenv("PTXGEN_CACHE_DIR", str(tmp_path / "ptxgen-cache"))
    monkeypatch.delenv("PTXGEN_CACHE", raising=False)
    monkeypatch.delenv("PTXGEN_ASSEMBLER", raising=False)
    yield tmp_path / "ptxgen-cache"
