"""The persistent tuning cache: the measured winner of `ptxgen.tune` per problem class.

Why a cache: a measurement costs seconds to minutes per candidate, and the winner stays the
winner until the device, the arch, the assembler or ptxgen's lowering changes, so later
`compile(gemm, arch)` calls with no schedule take the cached winner instead of the model's pick.

Key: the device's name (as the driver reports it), the arch, the toolchain (`assembler_version`,
e.g. "nvJitLink 13.5"), ptxgen's version and the problem class (`problem_class`). An entry is one
JSON file named by the key's sha256 under $PTXGEN_CACHE_DIR/tuning/ (the cubin cache's directory,
`runtime.cache.default_dir`), so writers of different keys never touch one file. A write goes to a
temp file in the same directory and is renamed over the entry (`os.replace`, atomic), so a reader
sees the old entry or the new one, never half of one; two writers of one key leave the later one's.
An entry that is not valid JSON, or whose key does not match its file name, is ignored with one
warning (the model chooses instead) and is rewritten by the next `tune` of that class.
PTXGEN_CACHE=0 turns this cache off as it does the cubin cache.
"""
from __future__ import annotations

import hashlib
import json
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import version
from ..runtime.cache import STALE_SECONDS, CacheWarning, default_dir, enabled, write_atomically
from ..schedule.problem import Gemm
from ..schedule.schedule import Schedule, flat_fields

SUFFIX = ".tuning.json"
PART = ".tuning.part"
_warned: set[str] = set()


def _warn_once(tag: str, message: str) -> None:
    if tag not in _warned:
        _warned.add(tag)
        warnings.warn(message, CacheWarning, stacklevel=3)


def shape_bucket(extent: int) -> int:
    """The power of two at or above `extent` (at least 16, one mma tile)."""
    return max(16, 1 << max(extent - 1, 0).bit_length())


def problem_class(g: Gemm) -> dict[str, Any]:
    """What a tuned winner is reused for: every field that changes the kernel's code or its legal
    schedules (dtypes, accumulator, layouts, alignments, the epilogue's shape: which vectors, the
    activation, whether C is read; batched or not; the grouping and the group count's bucket), and the shape as powers of two per dimension.

    Why buckets and not the exact shape: the terms that decide a winner (waves, tile waste, the L2
    footprint) move by size class, a measurement is costly, and serving shapes vary (a decode's M
    changes every step), so one tuning run serves its neighbours. Why powers of two: they keep M = 1,
    16 and 4096 apart, which want different tiles. The weak spot: shapes at the bottom of a bucket
    (4097 shares 8192's winner). A cached winner is re-verified for the exact shape and must
    assemble without spilling, else the model chooses (`lookup`)."""
    e = g.epi
    key = {"dtype": g.dtype, "out_dtype": g.out_dtype, "accumulator": g.accumulator,
           "a_layout": g.a_layout, "b_layout": g.b_layout, "align": g.alignment(), "out_align": g.out_alignment(),
           "bias": e.bias, "bias_dtype": g.bias_dtype if e.bias else None, "scale": e.scale,
           "activation": e.activation, "reads_c": e.beta != 0.0, "batched": g.batch > 1,
           "shape": [shape_bucket(g.m), shape_bucket(g.n), shape_bucket(g.k)],
           # the single-level fp8 kernel has its own winners; absent otherwise (earlier entries still match)
           **({"fast_accum": True} if g.fast_accum else {}),
           # block-scaled fp8 (other kernels, other legal tiles): its own winners, keyed by its groups and dtype
           **({"block_scale": [*g.block_scale.a, *g.block_scale.b, g.block_scale.dtype]} if g.block_scale else {})}
    if g.grouped:  # a grouped problem's winner is its own (ungrouped keys, and their digests, unchanged)
        key["grouping"] = [g.grouping, shape_bucket(g.groups)]
    return key


def toolchain() -> str:
    """The assembler the kernels are built with (a new one can change the winner)."""
    from ..runtime.assemble import AssemblerNotFound, assembler_version

    try:
        return assembler_version()
    except AssemblerNotFound:
        return "no assembler"


def make_key(g: Gemm, arch: str, device: str, tools: str | None = None) -> dict[str, Any]:
    return {"device": device, "arch": arch, "toolchain": tools if tools is not None else toolchain(),
            "ptxgen": version.__version__, "problem": problem_class(g)}


def _digest(key: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()


def tuning_dir(create: bool = False) -> Path | None:
    """$PTXGEN_CACHE_DIR/tuning (created when `create`); None when the cache is off or unusable."""
    if not enabled():
        return None
    d = default_dir() / "tuning"
    if create:
        try:
            d.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            _warn_once(f"mkdir:{d}", f"ptxgen tuning cache directory {d} is unusable ({e}); the tuned winner is "
                                     "not saved. Fix: point PTXGEN_CACHE_DIR at a writable directory")
            return None
        sweep_temp_files(d)
    return d


def sweep_temp_files(d: Path, now: float | None = None) -> int:
    """Remove temp files older than STALE_SECONDS (their writer was killed: a write takes milliseconds)."""
    now = time.time() if now is None else now
    removed = 0
    try:
        for p in d.iterdir():
            if p.name.endswith(PART) and now - p.stat().st_mtime > STALE_SECONDS:
                p.unlink()
                removed += 1
    except OSError:  # gone already, or read-only: store() says so
        pass
    return removed


def schedule_to_json(s: Schedule) -> dict[str, Any]:
    """The fields that differ from their defaults, a target's own ones flat (as `Schedule(**d)`
    takes them and as entries written before they moved into `Schedule.options` hold them)."""
    return {name: (list(v) if isinstance(v, tuple) else v)
            for name, (v, default) in flat_fields(s).items() if v != default}


def schedule_from_json(d: dict[str, Any]) -> Schedule:
    return Schedule(**{k: tuple(v) if isinstance(v, list) else v for k, v in d.items()})


@dataclass(frozen=True)
class Entry:
    """A cached winner: its schedule, measured median time, where, and how many it beat."""

    schedule: Schedule
    measured_s: float
    device: str
    shape: tuple[int, int, int]          # the exact shape it was measured on
    candidates: int                      # candidates measured correct in that run
    when: str                            # UTC time of the measurement


def store(g: Gemm, arch: str, entry: Entry, tools: str | None = None) -> Path | None:
    """Write the entry for (g's class, arch, entry.device) atomically; a failure is one warning."""
    d = tuning_dir(create=True)
    if d is None:
        return None
    key = make_key(g, arch, entry.device, tools)
    data = {"key": key, "schedule": schedule_to_json(entry.schedule), "measured_s": entry.measured_s,
            "device": entry.device, "shape": list(entry.shape), "candidates": entry.candidates, "when": entry.when}
    path = d / (_digest(key) + SUFFIX)
    try:
        write_atomically(path, json.dumps(data, indent=1, sort_keys=True).encode(), PART)
    except OSError as e:
        _warn_once(f"write:{d}", f"ptxgen tuning cache write to {d} failed ({e}); the tuned winner is not saved. "
                                 "Fix: point PTXGEN_CACHE_DIR at a writable directory")
        return None
    return path


def load(g: Gemm, arch: str, device: str, tools: str | None = None) -> Entry | None:
    """The cached entry for (g's class, arch, device), or None (miss, cache off, or a bad entry:
    one warning, then ignored until `store` rewrites it)."""
    d = tuning_dir()
    if d is None:
        return None
    key = make_key(g, arch, device, tools)
    path = d / (_digest(key) + SUFFIX)
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    except OSError as e:
        _warn_once(f"read:{d}", f"ptxgen tuning cache read failed ({e}); the cost model chooses instead")
        return None
    try:
        data = json.loads(text)
        if data["key"] != key:
            raise ValueError("its key does not match its file name")
        return Entry(schedule_from_json(data["schedule"]), float(data["measured_s"]), str(data["device"]),
                     tuple(int(x) for x in data["shape"]), int(data["candidates"]), str(data["when"]))
    except (ValueError, KeyError, TypeError) as e:  # JSONDecodeError is a ValueError
        _warn_once(f"corrupt:{path}", f"ptxgen tuning cache entry {path} is corrupt ({type(e).__name__}: {e}); "
                                      "ignoring it (the cost model chooses); the next `ptxgen tune` of this "
                                      "problem class rewrites it")
        return None


def has_entries() -> bool:
    """Whether any entry exists (a cheap test before asking which GPU is present)."""
    d = tuning_dir()
    try:
        return d is not None and any(p.name.endswith(SUFFIX) for p in d.iterdir())
    except OSError:
        return False


def now_utc() -> str:
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())


def current_device() -> str | None:
    """The name of the GPU kernels run on here (the stand-in's when PTXGEN_DRIVER=sim), else None."""
    from ..runtime.driver import context, gpu_available

    if not gpu_available():
        return None
    try:
        return context().name
    except Exception:  # noqa: BLE001 - a device that fails to open has no cached winners to offer
        return None
