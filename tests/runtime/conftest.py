"""Every runtime test gets its own cache directory, so nothing touches ~/.cache. `standin` runs a
test through the simulator-backed stand-in libcuda under the real cuda.bindings; `fake` swaps in
the fake CUDA driver (fake_driver.py, whose docstring says which tests still need it and why)."""
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


@pytest.fixture
def standin(monkeypatch):
    """The simulator-backed stand-in libcuda (ptxgen/runtime/simdriver) under the real
    cuda.bindings, in this process, for one test: PTXGEN_DRIVER=sim while it runs, so the tests
    around it still see no GPU. Kernels are ptxgen's real PTX run on ptxgen.sim."""
    from ptxgen.runtime import simdriver

    if simdriver.compiler_unavailable_reason():
        pytest.skip(simdriver.compiler_unavailable_reason())
    monkeypatch.setenv("PTXGEN_DRIVER", "sim")
    simdriver.activate()
    for clear in (drv._probe.cache_clear, drv._contexts.clear, drv._warned.clear,
                  modules._driver_version.cache_clear):
        clear()
    yield simdriver.instance()
    drv._contexts.clear()
    drv._probe.cache_clear()
    modules._driver_version.cache_clear()
