"""Build the stand-in driver (simcuda*.c) with the system C compiler, once per source version,
into the cache directory.

Why build on first use: the stand-in is a test tool; shipping a prebuilt libcuda.so.1 would tie the
wheel to one platform. The library is named by the hash of its source (and compiler), written
atomically, so concurrent test processes share one build and an edited source rebuilds.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from .. import cache

HERE = Path(__file__).parent
SOURCES = [HERE / "simcuda.c", HERE / "simcuda_launch.c", HERE / "simcuda_tensormap.c"]  # compiled
HEADERS = [HERE / "simcuda.h"]

__all__ = ["compiler", "compiler_unavailable_reason", "library_path", "SimDriverBuildError"]


class SimDriverBuildError(RuntimeError):
    """The stand-in driver could not be compiled."""


def compiler() -> str | None:
    """$CC if set, else `cc` on PATH."""
    cc = os.environ.get("CC", "").strip()
    return shutil.which(cc) if cc else shutil.which("cc")


def compiler_unavailable_reason() -> str:
    """'' when a C compiler exists, else why the stand-in cannot be built."""
    if compiler() is None:
        return ("the simulator-backed CUDA driver needs a C compiler to build, and none was found "
                "(install gcc or clang, or set CC)")
    return ""


def library_path() -> Path:
    """The built stand-in libcuda, building it if this source version has not been built."""
    cc = compiler()
    if cc is None:
        raise SimDriverBuildError(compiler_unavailable_reason())
    h = hashlib.sha256(cc.encode())
    for path in SOURCES + HEADERS:
        data = path.read_bytes()
        h.update(len(data).to_bytes(8, "little") + data)
    digest = h.hexdigest()[:16]
    out_dir = cache.default_dir() / "simdriver"
    target = out_dir / f"libcuda-sim-{digest}.so"
    if target.exists():
        return target
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError:
        out_dir = Path(tempfile.gettempdir()) / "ptxgen-simdriver"
        out_dir.mkdir(parents=True, exist_ok=True)
        target = out_dir / target.name
        if target.exists():
            return target
    fd, tmp = tempfile.mkstemp(prefix=".build-", suffix=".so.part", dir=out_dir)
    os.close(fd)
    cmd = [cc, "-shared", "-fPIC", "-O2", "-Wall", "-Wl,-soname,libcuda.so.1", "-o", tmp,
           *map(str, SOURCES), "-lpthread"]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        if proc.returncode != 0:
            raise SimDriverBuildError(f"building the stand-in driver failed: {' '.join(cmd)}\n"
                                      f"{proc.stdout}{proc.stderr}")
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return target
