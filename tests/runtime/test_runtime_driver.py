"""Driver-layer behaviour that needs no GPU: availability, error formatting, streams, params."""
from __future__ import annotations

import numpy as np
import pytest
from cuda.bindings import driver as real

import ptx_samples as S
from ptxgen.runtime import driver as drv
from ptxgen.runtime.params import ParamBlock, ParamDecl, pack_scalar, parse_params


def test_gpu_unavailable_here_with_a_clear_reason():
    # This CPU machine has no driver; a GPU machine skips this test.
    if drv.gpu_available():
        pytest.skip("a GPU is present")
    reason = drv.gpu_unavailable_reason()
    assert "driver" in reason.lower()
    with pytest.raises(RuntimeError, match="no GPU to run on: .*simulate"):
        drv.context()


def test_gpu_available_never_raises(monkeypatch):
    def boom():
        raise OSError("weird")

    drv._probe.cache_clear()
    monkeypatch.setattr(drv, "_driver", boom)
    try:
        assert drv.gpu_available() is False
        assert "cuda-python is not installed" in drv.gpu_unavailable_reason()
        monkeypatch.setenv("PTXGEN_DEVICE", "x")
        assert drv.gpu_available() is False
        assert "PTXGEN_DEVICE" in drv.gpu_unavailable_reason()
    finally:
        drv._probe.cache_clear()


def test_check_unpacks_results():
    ok = real.CUresult.CUDA_SUCCESS
    assert drv.check("cuInit", (ok,)) is None
    assert drv.check("cuMemAlloc", (ok, 1234)) == 1234
    assert drv.check("cuX", (ok, 1, 2)) == (1, 2)


def test_driver_error_formatting_with_mocked_status():
    status = real.CUresult.CUDA_ERROR_NO_BINARY_FOR_GPU
    with pytest.raises(drv.DriverError) as ei:
        drv.check("cuModuleLoadData", (status, None))
    e = ei.value
    assert isinstance(e, RuntimeError)
    assert (e.call, e.status, e.name) == ("cuModuleLoadData", 209, "CUDA_ERROR_NO_BINARY_FOR_GPU")
    msg = str(e)
    assert msg.startswith("cuModuleLoadData failed with CUDA_ERROR_NO_BINARY_FOR_GPU (209): ")
    assert "no kernel image" in msg  # description (from the driver, or the built-in fallback)
    assert "compile for the device's arch" in msg  # the hint


def test_driver_error_unknown_code_and_plain_int():
    with pytest.raises(drv.DriverError, match=r"cuFoo failed with .*\(700\): an illegal memory access"):
        drv.check("cuFoo", (700,))
    e = drv.DriverError("cuBar", 12345)
    assert "cuBar failed" in str(e) and "12345" in str(e)


def test_resolve_stream_forms():
    class TorchLike:
        cuda_stream = 0x10

    class CupyLike:
        ptr = 0x20

    class CoreLike:
        def __cuda_stream__(self):
            return (0, 0x30)

    assert drv.resolve_stream(None) == 0
    assert drv.resolve_stream(5) == 5
    assert drv.resolve_stream(np.uint64(6)) == 6
    assert drv.resolve_stream(TorchLike()) == 0x10
    assert drv.resolve_stream(CupyLike()) == 0x20
    assert drv.resolve_stream(CoreLike()) == 0x30
    assert drv.resolve_stream(real.CUstream(0x40)) == 0x40
    with pytest.raises(TypeError, match="cannot use str as a CUDA stream"):
        drv.resolve_stream("default")


@pytest.mark.parametrize("cubin,dev,ok", [
    ("sm_80", "sm_80", True), ("sm_80", "sm_86", True), ("sm_86", "sm_80", False),
    ("sm_80", "sm_90", False), ("sm_90", "sm_90", True), ("sm_90a", "sm_90", True),
    ("sm_90a", "sm_100", False), ("sm_89", "sm_86", False), ("sm_100", "sm_103", True),
])
def test_binary_compatible(cubin, dev, ok):
    assert drv.binary_compatible(cubin, dev) is ok


# -- parameters ----------------------------------------------------------------------------------
def test_parse_gemm_params():
    decls = parse_params(S.gemm_stub(), "gemm")
    assert [d.name for d in decls] == ["A", "B", "C", "M", "N", "K", "lda", "ldb", "ldc"]
    assert [d.type for d in decls] == ["u64"] * 3 + ["u32"] * 6


def test_parse_params_variants():
    ptx = """
    // .entry commented(.param .u32 x)
    .visible .entry k(
        .param .u64 .ptr.global.align 16 p,   // a pointer
        .param .f32 alpha, /* inline */ .param .s32 delta,
        .param .align 64 .b8 tmap[128]
    )
    { ret; }
    .visible .entry noargs { ret; }
    """
    d = parse_params(ptx, "k")
    assert d == [ParamDecl("p", "u64"), ParamDecl("alpha", "f32"), ParamDecl("delta", "s32"),
                 ParamDecl("tmap", "b8", 128, 64)]
    assert parse_params(ptx, "noargs") == []
    with pytest.raises(ValueError, match=r"no `.entry nope`.*\['k', 'noargs'\]"):
        parse_params(ptx, "nope")


def test_pack_scalars():
    assert pack_scalar(ParamDecl("x", "u32"), 7).tobytes() == (7).to_bytes(4, "little")
    assert pack_scalar(ParamDecl("x", "s32"), -1).tobytes() == b"\xff" * 4
    assert pack_scalar(ParamDecl("x", "b32"), -2).tobytes() == (2**32 - 2).to_bytes(4, "little")
    assert pack_scalar(ParamDecl("x", "u64"), 2**63).tobytes() == (2**63).to_bytes(8, "little")
    assert pack_scalar(ParamDecl("x", "f32"), 1.5).tobytes() == np.float32(1.5).tobytes()
    assert pack_scalar(ParamDecl("x", "f32"), 2).tobytes() == np.float32(2).tobytes()
    assert pack_scalar(ParamDecl("x", "f64"), 0.1).tobytes() == np.float64(0.1).tobytes()
    assert pack_scalar(ParamDecl("t", "b8", 4), b"abcd").tobytes() == b"abcd"
    with pytest.raises(ValueError, match="does not fit"):
        pack_scalar(ParamDecl("x", "u32"), -1)
    with pytest.raises(ValueError, match="does not fit"):
        pack_scalar(ParamDecl("x", "s8"), 128)
    with pytest.raises(TypeError, match="an integer"):
        pack_scalar(ParamDecl("x", "u32"), 1.0)
    with pytest.raises(TypeError):
        pack_scalar(ParamDecl("x", "f32"), "1")
    with pytest.raises(ValueError, match="128 bytes"):
        pack_scalar(ParamDecl("t", "b8", 128), b"short")


def test_param_block_pointer_array():
    decls = parse_params(S.gemm_stub(), "gemm")
    blk = ParamBlock(decls, [0x1000, 0x2000, 0x3000, 1, 2, 3, 4, 5, 6])
    ptrs = np.frombuffer(np.ctypeslib.as_array(
        (np.ctypeslib.ctypes.c_uint64 * 9).from_address(blk.address)), np.uint64)
    got = [np.ctypeslib.as_array((np.ctypeslib.ctypes.c_uint8 * d.nbytes).from_address(int(p))).tobytes()
           for p, d in zip(ptrs, decls)]
    assert b"".join(got) == blk.raw()
    assert blk.raw()[:8] == (0x1000).to_bytes(8, "little")
    with pytest.raises(ValueError, match="takes 9 parameters"):
        ParamBlock(decls, [1, 2])


def _python(code: str) -> "subprocess.CompletedProcess[str]":
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ, PYTHONPATH=str(root))
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=120)


def test_import_loads_no_cuda_module():
    out = _python("import sys, ptxgen, ptxgen.runtime, ptxgen.runtime.launch\n"
                  "bad = [m for m in sys.modules if m.startswith('cuda.bindings.') or m in "
                  "('torch', 'cupy', 'triton')]\nprint(bad)")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_works_without_cuda_python_installed():
    out = _python("import sys\nsys.modules['cuda'] = None  # as if cuda-python were absent\n"
                  "import ptxgen.runtime as rt\n"
                  "from ptxgen.runtime.assemble import assemble, assembler_version\n"
                  "print(rt.gpu_available(), '|', rt.gpu_unavailable_reason(), '|', assembler_version())")
    assert out.returncode == 0, out.stderr
    avail, reason, asm = (s.strip() for s in out.stdout.split("|"))
    assert avail == "False" and "cuda-python is not installed" in reason
    assert asm.startswith("ptxas ")  # nvJitLink comes through cuda.bindings: fall back to ptxas
