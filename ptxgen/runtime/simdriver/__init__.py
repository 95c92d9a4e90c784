"""A stand-in for NVIDIA's CUDA driver that runs kernels on ptxgen's CPU simulator.

With PTXGEN_DRIVER=sim, `ptxgen.runtime` loads this library as libcuda.so.1 before
`cuda.bindings.driver` looks for the driver, so the real cuda-python bindings (and every
argument conversion they make) drive it. simcuda.c holds the driver's bookkeeping and rules;
standin.py loads modules and runs each launch on `ptxgen.sim` over the stand-in's device memory.

    PTXGEN_DRIVER=sim                 use the stand-in (default: the real driver)
    PTXGEN_SIM_DEVICE=h100|a100       the device model whose limits are enforced (default h100)
    PTXGEN_SIM_DRIVER_VERSION=13000   what cuDriverGetVersion reports (1000*major + 10*minor)

Occupancy queries (cuOccupancyMaxActiveBlocksPerMultiprocessor, cuOccupancyMaxActiveClusters) and the
co-residency of a cooperative launch are answered from the device model (occupancy.py).

What it cannot tell you: timing (cuEventElapsedTime is refused), real cache behaviour, races the
hardware would show but a sequential simulator does not, and operand misalignment inside an
allocation (each buffer starts the simulator's address space aligned).
"""
from __future__ import annotations

import ctypes
import os
import threading

from .build import SimDriverBuildError, compiler_unavailable_reason, library_path
from .models import CDeviceModel, chosen_driver_version, chosen_model

__all__ = ["activate", "active", "instance", "selected", "driver_description", "SimDriverBuildError",
           "compiler_unavailable_reason", "reason", "clear_reason"]

_state: dict = {}
_lock = threading.Lock()


def selected() -> bool:
    """True when PTXGEN_DRIVER asks for the stand-in; ValueError for an unknown value."""
    raw = os.environ.get("PTXGEN_DRIVER", "").strip().lower()
    if raw not in ("", "cuda", "sim"):
        raise ValueError(f"PTXGEN_DRIVER={raw!r} is not a driver: use 'sim' (ptxgen's simulator behind "
                         f"the CUDA driver API) or 'cuda' (NVIDIA's driver, the default)")
    return raw == "sim"


def active() -> bool:
    return "lib" in _state


def instance():
    """The running StandIn (modules, functions, last_error), or None."""
    return _state.get("standin")


def driver_description() -> str:
    """Which driver ptxgen's runtime uses, for test reports."""
    if active():
        s = _state["standin"]
        return f"sim (ptxgen stand-in libcuda.so.1, {s.model.key} model, driver {s.driver_version})"
    return "cuda (NVIDIA driver)"


def activate() -> None:
    """Load the stand-in as libcuda.so.1 (building it first if needed); idempotent.

    Must run before cuda.bindings loads a driver: a real libcuda.so.1 already in the process
    would be used by the bindings instead, so that is refused with the fix.
    """
    with _lock:
        if active():
            return
        try:
            other = ctypes.CDLL("libcuda.so.1", mode=os.RTLD_NOLOAD)
        except OSError:
            other = None
        if other is not None and not hasattr(other, "simcuda_is_standin"):
            raise RuntimeError("PTXGEN_DRIVER=sim was asked for after NVIDIA's libcuda.so.1 was loaded "
                               "into this process: set PTXGEN_DRIVER=sim before anything uses CUDA")
        from cuda.bindings import driver as bindings

        from .standin import StandIn

        lib = ctypes.CDLL(str(library_path()), mode=os.RTLD_GLOBAL)
        lib.simcuda_translate.argtypes = [ctypes.c_uint64, ctypes.POINTER(ctypes.c_void_p),
                                          ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_uint64)]
        lib.simcuda_missing_symbols.restype = ctypes.c_char_p
        lib.simcuda_reason.restype = ctypes.c_char_p
        lib.simcuda_set_reason.argtypes = [ctypes.c_char_p]
        model, version = chosen_model(), chosen_driver_version()
        ids = {name: int(getattr(bindings.CUdevice_attribute, f"CU_DEVICE_ATTRIBUTE_{name}"))
               for name in model.attributes()}
        cmodel = CDeviceModel.of(model, version, ids)
        if lib.simcuda_configure(ctypes.byref(cmodel)) != 0:
            raise RuntimeError("the stand-in driver was already initialised with another model")
        lib.simcuda_set_jit_info.argtypes = [ctypes.c_char_p]
        sim = StandIn(model, version, lib.simcuda_translate, lib.simcuda_set_reason,
                      set_jit_info=lib.simcuda_set_jit_info, jit_verbose=lib.simcuda_jit_verbose)
        callbacks = sim.callbacks()
        lib.simcuda_set_callbacks(*callbacks)
        occupancy = sim.occupancy_callbacks()
        lib.simcuda_set_occupancy_callbacks(*occupancy)
        _state.update(lib=lib, standin=sim, callbacks=callbacks + occupancy, model=cmodel)


def clear_reason() -> None:
    """Forget why this thread's last stand-in call failed (before a new call)."""
    if active():
        _state["lib"].simcuda_set_reason(b"")


def reason() -> str:
    """Why this thread's last stand-in call failed ('' if it did not, or no stand-in is loaded)."""
    if not active():
        return ""
    return _state["lib"].simcuda_reason().decode(errors="replace")


def missing_symbols() -> list[str]:
    """Entry points the bindings asked for that the stand-in does not provide."""
    if not active():
        return []
    return _state["lib"].simcuda_missing_symbols().decode().split()
