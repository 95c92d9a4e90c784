"""ptxgen.runtime.tensormaps: arrays TMA cannot describe are refused with the problem and the fix
(before any driver call), and maps made for device arrays drive Triton's sm_90a TMA kernels through
the stand-in driver under the real cuda.bindings (tensormaps_worker.py, a fresh process)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from ptxgen.runtime import tensormaps
from ptxgen.runtime.simdriver import compiler_unavailable_reason
from ptxgen.runtime.tensormaps import TensorMapError, encode_tiled

HERE = Path(__file__).parent
ROOT = HERE.parent.parent


class FakeDeviceArray:
    """Only what encode_tiled reads: __cuda_array_interface__ and dtype (no driver is touched,
    since every case here is refused before the encode call)."""

    def __init__(self, shape, dtype, strides=None, address=0x7FF0000000000000):
        self.dtype = np.dtype(dtype)
        self.__cuda_array_interface__ = {"shape": tuple(shape), "typestr": self.dtype.str, "data": (address, False),
                                         "strides": strides, "version": 3}


@pytest.mark.parametrize("array, box, kwargs, match", [
    (FakeDeviceArray((64, 100), np.float16), (64, 64), {}, r"stride of 200 bytes.*pad the rows.*multiple of 8 elements"),
    (FakeDeviceArray((64, 64), np.float16, address=0x7FF0000000000008), (64, 64), {}, "not 16-byte aligned"),
    (FakeDeviceArray((64, 64), np.float16, strides=(256, 4)), (64, 64), {}, "innermost dimension.*contiguous copy"),
    (FakeDeviceArray((64, 64), np.float16), (64, 300), {"swizzle": "none"}, r"1\.\.256.*split the tile"),
    (FakeDeviceArray((64, 64), np.float16), (64, 4), {"swizzle": "none"}, "not a multiple of 16.*multiple of 8"),
    (FakeDeviceArray((64, 128), np.float16), (64, 128), {}, "wider than the 128B swizzle.*<= 64"),
    (FakeDeviceArray((64, 64), np.uint8), (64, 64), {"oob_fill": "nan"}, "floating-point.*'zero'"),
    (FakeDeviceArray((2,) * 6, np.float32), (2,) * 6, {}, "1 to 5 dimensions"),
    (FakeDeviceArray((64, 64), np.complex64), (64, 64), {}, "no TMA data type"),
    (FakeDeviceArray((64, 64), np.float16), (64,), {}, "one per dimension"),
    (FakeDeviceArray((64, 64), np.float16), (64, 64), {"swizzle": "256B"}, "is not one of"),
    (np.zeros((64, 64), np.float16), (64, 64), {}, "needs a device array.*DeviceArray.from_host"),
])
def test_arrays_tma_cannot_describe_name_the_fix(array, box, kwargs, match):
    with pytest.raises(TensorMapError, match=match):
        encode_tiled(array, box, **kwargs)


def test_bfloat16_and_fp8_map_to_tma_types():
    assert tensormaps._MAP_TYPES[np.dtype(ml_dtypes.bfloat16).name] == "BFLOAT16"
    assert tensormaps._MAP_TYPES[np.dtype(ml_dtypes.float8_e4m3fn).name] == "UINT8"


@pytest.fixture(scope="module")
def through_standin(tmp_path_factory) -> dict:
    if compiler_unavailable_reason():
        pytest.skip(compiler_unavailable_reason())
    env = {**os.environ, "PTXGEN_DRIVER": "sim", "PTXGEN_CACHE_DIR": str(tmp_path_factory.mktemp("tmaps")),
           "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run([sys.executable, str(HERE / "tensormaps_worker.py")], capture_output=True, text=True,
                          timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_maps_for_device_arrays_drive_triton_tma_kernels(through_standin):
    for name in ("copy", "dot_f16", "dot_fp8", "copy_padded"):
        assert through_standin[name] == {"ok": True}, (name, through_standin[name])


def test_launch_with_a_cluster(through_standin):
    """tensormaps.launch with cluster=(2, 1, 1) goes through cuLaunchKernelEx and runs on the simulator."""
    assert through_standin["copy_cluster"] == {"ok": True}


def test_launch_refuses_a_grid_that_is_not_whole_clusters():
    ptx = ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k()\n{\n ret;\n}\n"
    with pytest.raises(ValueError, match="not a whole number of .* clusters"):
        tensormaps.launch(ptx, "k", (3, 1, 1), 32, [], cluster=(2, 1, 1))


def test_ptx_newer_than_the_assembler_names_the_fix_and_the_corpus_is_lowered_to_fit():
    """A lent H200's nvJitLink 13.0 (ISA 9.0) refused Triton 3.9's `.version 9.4` corpus PTX: the
    error names both versions and the fix, and the device tests' worker lowers the declared version
    to what the assembler takes (the kernels use nothing past ISA 8.0). `.version 99.0` stands in
    for a newer ISA than any installed assembler takes."""
    import re

    from ptxgen.errors import AssembleError
    from ptxgen.runtime.assemble import AssemblerNotFound, assemble

    sys.path.insert(0, str(HERE.parent / "sim" / "hopper_corpus"))
    sys.path.insert(0, str(HERE))
    import harness
    from tensormaps_worker import for_this_assembler

    entry = next(x for x in harness.load_entries() if x.name == "tma_copy_fp16_64x64_w4")
    future = re.sub(r"^\.version [\d.]+", ".version 99.0", entry.ptx, count=1, flags=re.MULTILINE)
    try:
        with pytest.raises(AssembleError, match=r"declares ISA 99\.0 and .* takes 9\.\d+ at most.*declare `\.version 9"):
            assemble(future, "sm_90a", entry.meta["entry"])
    except AssemblerNotFound:
        pytest.skip("no assembler installed")
    fitted = for_this_assembler(future, entry.meta["entry"])
    assert re.search(r"^\.version 9\.\d+$", fitted, re.MULTILINE)
    assert assemble(fitted, "sm_90a", entry.meta["entry"]).cubin
    assert for_this_assembler(entry.ptx, entry.meta["entry"]) == entry.ptx  # accepted as it is
