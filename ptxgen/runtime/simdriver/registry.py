"""Which PTX each cubin was assembled from, so the stand-in driver can run a loaded cubin.

Why: ptxgen's simulator runs PTX, and SASS cannot be turned back into PTX. The stand-in therefore
only runs cubins ptxgen assembled in this process: `assemble()` records sha256(cubin) -> PTX here,
and a module load of any other cubin fails with CUDA_ERROR_INVALID_IMAGE and says why.
"""
from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict

__all__ = ["remember", "source_of"]

_LIMIT = 4096  # cubins remembered (oldest forgotten first); PTX texts are small
_sources: OrderedDict[str, str] = OrderedDict()
_lock = threading.Lock()


def _key(cubin: bytes) -> str:
    return hashlib.sha256(cubin).hexdigest()


def remember(cubin: bytes, ptx: str) -> None:
    """Record that `cubin` was assembled from `ptx`."""
    key = _key(cubin)
    with _lock:
        _sources[key] = ptx
        _sources.move_to_end(key)
        while len(_sources) > _LIMIT:
            _sources.popitem(last=False)


def source_of(cubin: bytes) -> str | None:
    """The PTX `cubin` was assembled from in this process, or None."""
    with _lock:
        return _sources.get(_key(cubin))
