"""Disk cache of assembled cubins, shared safely between processes.

Why: assembling a big GEMM kernel takes ptxas hundreds of milliseconds, and tests/benchmarks
assemble the same PTX over and over. An entry is keyed by sha256 of (PTX, arch, entry,
assembler identity), written atomically (temp file in the same directory + `os.replace`), and
carries a checksum so a truncated or corrupted entry is detected, deleted and rebuilt — never
trusted. Any OS error degrades to "no cache" with one warning; it never fails an assembly.
A temp file is named after its writer (pid and host), so one left by a killed process is swept
when a process first uses the directory; any temp file older than STALE_SECONDS is swept too.

Environment:
    PTXGEN_CACHE=0        disable the cache
    PTXGEN_CACHE_DIR=dir  cache location (default $XDG_CACHE_HOME/ptxgen or ~/.cache/ptxgen)
"""
from __future__ import annotations

import hashlib
import os
import socket
import struct
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

MAGIC = b"PTXGENC1"
_HEADER = struct.Struct("<QQ32s")  # cubin length, log length, sha256(key + cubin + log)
SUFFIX = ".cubin-entry"


class CacheWarning(UserWarning):
    """The cache could not be used or held a bad entry; assembly went on without it."""


@dataclass
class CacheStats:
    """Counters for tests and diagnostics (per process)."""

    hits: int = 0
    misses: int = 0
    stores: int = 0
    corrupt: int = 0
    errors: int = 0


stats = CacheStats()
_warned: set[str] = set()
_swept: set[Path] = set()
#: A temp file this old is abandoned whoever wrote it (a write takes milliseconds).
STALE_SECONDS = 600
PART = SUFFIX + ".part"
_HOST = hashlib.sha256(socket.gethostname().encode()).hexdigest()[:8]
_FIX = ("point PTXGEN_CACHE_DIR at a writable directory, or set PTXGEN_CACHE=0 to run without "
        "a cache")


def _warn_once(tag: str, message: str) -> None:
    if tag not in _warned:
        _warned.add(tag)
        warnings.warn(message, CacheWarning, stacklevel=3)


def enabled() -> bool:
    return os.environ.get("PTXGEN_CACHE", "1").strip().lower() not in ("0", "false", "off", "no")


def default_dir() -> Path:
    """Where the cache lives (whether or not it is enabled or writable)."""
    env = os.environ.get("PTXGEN_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "ptxgen"


def cache_dir() -> Path | None:
    """The cubin directory, created if needed; None when disabled or unusable."""
    if not enabled():
        return None
    d = default_dir() / "cubins"
    try:
        d.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        stats.errors += 1
        _warn_once(f"mkdir:{d}", f"ptxgen cache directory {d} is unusable ({e}); continuing "
                                 f"without a cache. Fix: {_FIX}")
        return None
    if d not in _swept:
        _swept.add(d)
        sweep_temp_files(d)
    return d


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # e.g. PermissionError: it exists, under another user
        return True
    return True


def _abandoned(path: Path, now: float) -> bool:
    """Whether a temp file's writer is gone: a dead process of this host, or too old to be live."""
    try:
        age = now - path.stat().st_mtime
    except OSError:
        return False
    if age > STALE_SECONDS:
        return True
    parts = path.name.split("-")  # .tmp-<pid>-<host>-<random>.cubin-entry.part
    if len(parts) >= 4 and parts[1].isdigit() and parts[2] == _HOST:
        return not _alive(int(parts[1]))
    return False


def sweep_temp_files(d: Path) -> int:
    """Remove temp files left by writers that were killed; returns how many went."""
    removed = 0
    now = time.time()
    try:
        names = [p for p in d.iterdir() if p.name.endswith(PART)]
    except OSError:
        return 0
    for p in names:
        if _abandoned(p, now):
            try:
                p.unlink()
                removed += 1
            except FileNotFoundError:
                pass
            except OSError:  # read-only: store() says so, once
                break
    return removed


def make_key(ptx: str, arch: str, entry: str, assembler_id: str) -> str:
    h = hashlib.sha256()
    for part in (ptx, arch, entry, assembler_id):
        data = part.encode()
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()


def _checksum(key: str, cubin: bytes, log: bytes) -> bytes:
    return hashlib.sha256(key.encode() + b"\0" + cubin + log).digest()


def encode_entry(key: str, cubin: bytes, log: str) -> bytes:
    lb = log.encode("utf-8", errors="replace")
    return MAGIC + _HEADER.pack(len(cubin), len(lb), _checksum(key, cubin, lb)) + cubin + lb


def decode_entry(key: str, blob: bytes) -> tuple[bytes, str] | None:
    """(cubin, log), or None if the blob is not a complete, intact entry for `key`."""
    head = len(MAGIC) + _HEADER.size
    if len(blob) < head or not blob.startswith(MAGIC):
        return None
    n_cubin, n_log, digest = _HEADER.unpack_from(blob, len(MAGIC))
    if len(blob) != head + n_cubin + n_log:
        return None
    cubin = blob[head:head + n_cubin]
    lb = blob[head + n_cubin:]
    if _checksum(key, cubin, lb) != digest:
        return None
    return cubin, lb.decode("utf-8", errors="replace")


def entry_path(key: str, directory: Path | None = None) -> Path | None:
    d = directory if directory is not None else cache_dir()
    return None if d is None else d / (key + SUFFIX)


def load(key: str) -> tuple[bytes, str] | None:
    """The cached (cubin, log) for `key`, or None (miss, disabled, or a bad entry, now deleted)."""
    path = entry_path(key)
    if path is None:
        return None
    try:
        blob = path.read_bytes()
    except FileNotFoundError:
        stats.misses += 1
        return None
    except OSError as e:
        stats.errors += 1
        _warn_once(f"read:{path.parent}", f"ptxgen cache read failed ({e}); assembling instead")
        return None
    got = decode_entry(key, blob)
    if got is None:
        stats.corrupt += 1
        stats.misses += 1
        try:
            path.unlink()
        except FileNotFoundError:  # another process deleted it first
            pass
        except OSError as e:  # a read-only cache: say so once, and claim no deletion
            stats.errors += 1
            _warn_once(f"read-only:{path.parent}", f"ptxgen cache entry {path} is truncated or "
                       f"corrupt and cannot be deleted ({e}); ignoring it and assembling instead. "
                       f"Fix: {_FIX}")
            return None
        warnings.warn(f"ptxgen cache entry {path} was truncated or corrupt; deleted it and "
                      f"assembling again", CacheWarning, stacklevel=2)
        return None
    stats.hits += 1
    return got


def write_atomically(path: Path, blob: bytes, part: str = PART) -> None:
    """Write `blob` to `path` so that readers see the old file or the whole new one, never a part:
    a temp file in the same directory (named ...`part`, which its cache sweeps when stale), fsync, then rename over `path`.
    Raises OSError; the temp file is removed on failure. Used by this cache and the tuning cache."""
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".tmp-{os.getpid()}-{_HOST}-", suffix=part, dir=path.parent)
        with os.fdopen(fd, "wb") as f:
            f.write(blob)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        tmp = None
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass


def store(key: str, cubin: bytes, log: str) -> None:
    """Write an entry atomically; errors become one warning."""
    path = entry_path(key)
    if path is None:
        return
    try:
        write_atomically(path, encode_entry(key, cubin, log))
        stats.stores += 1
    except OSError as e:
        stats.errors += 1
        _warn_once(f"read-only:{path.parent}" if isinstance(e, PermissionError) else f"write:{path.parent}",
                   f"ptxgen cache write to {path.parent} failed ({e}); continuing without caching. "
                   f"Fix: {_FIX}")


def clear() -> int:
    """Delete every entry (and stray temp file); returns how many files were removed."""
    d = default_dir() / "cubins"
    n = 0
    if d.is_dir():
        for p in d.iterdir():
            if p.name.endswith(SUFFIX) or p.name.endswith(PART):
                try:
                    p.unlink()
                    n += 1
                except OSError:
                    pass
    return n
