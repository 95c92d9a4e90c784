"""The runtime from threads other than the one that created the context: the driver's current
context is per thread, so every runtime call that touches the device must make it current."""
from __future__ import annotations

import threading

import numpy as np

from gpu_helpers import device_compile_arch, random_operands, reference, rel_fro, require_gpu

require_gpu()

import ptxgen  # noqa: E402
from ptxgen.runtime import DeviceArray, driver  # noqa: E402
from ptxgen.runtime.driver import DeviceBuffer, context  # noqa: E402
from ptxgen.runtime.launch import prepare_launch  # noqa: E402


def in_new_thread(fn):
    """fn() on a fresh thread (which has no current context); its result or its exception."""
    box: dict = {}

    def body() -> None:
        try:
            box["value"] = fn()
        except BaseException as e:  # re-raised on the caller's thread
            box["error"] = e
    t = threading.Thread(target=body)
    t.start()
    t.join()
    if "error" in box:
        raise box["error"]
    return box.get("value")


def free_bytes() -> int:
    context()
    return int(driver._call("cuMemGetInfo")[0])


def test_upload_download_and_to_host_from_a_new_thread():
    host = np.arange(256, dtype=np.float32)
    arr = DeviceArray.from_host(np.zeros_like(host))
    in_new_thread(lambda: arr.buffer.upload(host))
    np.testing.assert_array_equal(in_new_thread(arr.to_host), host)
    out = np.zeros_like(host)
    in_new_thread(lambda: arr.buffer.download(out))
    driver._call("cuStreamSynchronize", 0)
    np.testing.assert_array_equal(out, host)


def test_free_from_a_new_thread_releases_the_memory():
    size = 256 << 20
    before = free_bytes()
    buf = DeviceBuffer(size)
    held = free_bytes()
    assert held <= before - size // 2
    in_new_thread(buf.free)
    assert buf.ptr == 0
    assert free_bytes() >= held + size // 2, "the free from another thread leaked the allocation"


def test_prepared_launch_runs_from_a_new_thread():
    g = ptxgen.Gemm(128, 128, 64, dtype="f16", out_dtype="f32", b_layout="row")
    kern = ptxgen.compile(g, ptxgen.Schedule(block=(64, 64, 32), warps=(2, 2), stages=2),
                          arch=device_compile_arch())
    a, b = random_operands(g, 2)
    da, db = DeviceArray.from_host(a), DeviceArray.from_host(np.ascontiguousarray(b))
    dc = DeviceArray.from_host(np.full((g.m, g.n), np.nan, np.float32))
    run = prepare_launch(kern, da, db, dc)
    in_new_thread(run)
    c = dc.to_host()
    assert rel_fro(c, reference(a, b)) < 1e-3
