"""Every runtime test gets its own cache directory, so nothing touches ~/.cache; `fake` swaps in
the fake CUDA driver (fake_driver.py) for the launch tests."""
import pytest

from fake_driver import FakeDriver
from ptxgen.runtime import driver as drv
from ptxgen.runtime import modules


@pytest.fixture(autouse=True)
def cache_root(tmp_path, monkeypatch):
    monkeypatch.setenv("PTXGEN_CACHE_DIR", str(tmp_path / "ptxgen-cache"))
    monkeypatch.delenv("PTXGEN_CACHE", raising=False)
    monkeypatch.delenv("PTXGEN_ASSEMBLER", raising=False)
    yield tmp_path / "ptxgen-cache"


@pytest.fixture
def fake(monkeypatch):
    f = FakeDriver()
    monkeypatch.setattr(drv, "_driver", lambda: f)
    drv._probe.cache_clear()
    drv._contexts.clear()
    drv._warned.clear()
    modules._driver_version.cache_clear()
    yield f
    drv._contexts.clear()
    drv._probe.cache_clear()
    modules._driver_version.cache_clear()
