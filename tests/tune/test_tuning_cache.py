"""The tuning cache: problem classes, keys, schedules through JSON, corruption and concurrent writers."""
from __future__ import annotations

import multiprocessing
import os
import warnings

import pytest
from hypothesis import given
from hypothesis import strategies as st

import ptxgen
from ptxgen.tune import cache as tuning_cache
from ptxgen.targets.sm80.candidates import base_schedules, legal, variants

SCHEDULE = ptxgen.Schedule(block=(64, 128, 32), warps=(2, 2), stages=3, raster="grouped", group_m=8)


def entry(s=SCHEDULE, t=1e-4, device="GPU A") -> tuning_cache.Entry:
    return tuning_cache.Entry(s, t, device, (100, 200, 300), 3, tuning_cache.now_utc())


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PTXGEN_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("PTXGEN_CACHE", raising=False)
    return tmp_path / "tuning"


@given(m=st.integers(1, 20000), n=st.integers(1, 20000), k=st.integers(1, 20000))
def test_shapes_share_a_class_exactly_when_every_dimension_shares_its_power_of_two(m, n, k):
    for x in (m, n, k):
        b = tuning_cache.shape_bucket(x)
        assert b >= x and b & (b - 1) == 0 and (b == 16 or b < 2 * x)
    g = ptxgen.Gemm(m, n, k, align=2)  # the alignment is part of the class: hold it fixed
    same = ptxgen.Gemm(tuning_cache.shape_bucket(m), tuning_cache.shape_bucket(n), tuning_cache.shape_bucket(k),
                       align=2)
    assert tuning_cache.problem_class(g) == tuning_cache.problem_class(same)
    bigger = ptxgen.Gemm(tuning_cache.shape_bucket(m) + 1, n, k, align=2)
    assert tuning_cache.problem_class(g) != tuning_cache.problem_class(bigger)


def test_fields_that_change_the_kernel_change_the_class():
    base = ptxgen.Gemm(256, 256, 256)
    others = [ptxgen.Gemm(256, 256, 256, dtype="bf16"), ptxgen.Gemm(256, 256, 256, out_dtype="f16"),
              ptxgen.Gemm(256, 256, 256, a_layout="col"), ptxgen.Gemm(256, 256, 256, align=4),
              ptxgen.Gemm(256, 256, 256, epilogue=ptxgen.Epilogue(bias="col")),
              ptxgen.Gemm(256, 256, 256, epilogue=ptxgen.Epilogue(beta=1.0)), ptxgen.Gemm(256, 256, 256, batch=2)]
    classes = [tuning_cache.problem_class(g) for g in [base, *others]]
    assert all(c != classes[0] for c in classes[1:])
    assert tuning_cache.problem_class(ptxgen.Gemm(256, 256, 256, epilogue=ptxgen.Epilogue(alpha=2.0))) == classes[0]


def test_every_candidate_schedule_survives_json():
    g = ptxgen.Gemm(4096, 4096, 4096)
    base = list(legal(g, base_schedules(g), "sm_80"))
    for s in base + [v for b in base[:5] for v in legal(g, variants(g, b), "sm_80")]:
        assert tuning_cache.schedule_from_json(tuning_cache.schedule_to_json(s)) == s


def test_the_key_holds_device_arch_toolchain_version_and_class(cache, monkeypatch):
    g = ptxgen.Gemm(100, 200, 300)
    tuning_cache.store(g, "sm_80", entry(), tools="nvJitLink 13.5")
    got = tuning_cache.load(g, "sm_80", "GPU A", tools="nvJitLink 13.5")
    assert got.schedule == SCHEDULE and got.measured_s == 1e-4 and got.shape == (100, 200, 300)
    assert tuning_cache.load(g, "sm_80", "GPU A", tools="nvJitLink 12.8") is None
    assert tuning_cache.load(g, "sm_80", "GPU B", tools="nvJitLink 13.5") is None
    assert tuning_cache.load(g, "sm_86", "GPU A", tools="nvJitLink 13.5") is None
    assert tuning_cache.load(ptxgen.Gemm(100, 200, 300, dtype="bf16"), "sm_80", "GPU A", tools="nvJitLink 13.5") is None
    # the version module `ptxgen.__version__` re-exports (what a release bump edits)
    monkeypatch.setattr(ptxgen.version, "__version__", "0.2.0")
    assert tuning_cache.load(g, "sm_80", "GPU A", tools="nvJitLink 13.5") is None


@pytest.mark.parametrize("damage", ["", "{", "[1, 2]", '{"key": 1}', "\x00\x01garbage"])
def test_a_corrupt_entry_is_ignored_with_one_warning_and_rewritten(cache, damage):
    g = ptxgen.Gemm(100, 200, 300)
    path = tuning_cache.store(g, "sm_80", entry(), tools="t")
    path.write_text(damage)
    tuning_cache._warned.clear()
    with pytest.warns(tuning_cache.CacheWarning, match="corrupt") as caught:
        assert tuning_cache.load(g, "sm_80", "GPU A", tools="t") is None
        assert tuning_cache.load(g, "sm_80", "GPU A", tools="t") is None
    assert len(caught) == 1
    assert tuning_cache.store(g, "sm_80", entry(t=2e-4), tools="t") == path
    assert tuning_cache.load(g, "sm_80", "GPU A", tools="t").measured_s == 2e-4


def test_an_entry_under_another_key_is_not_trusted(cache):
    g, other = ptxgen.Gemm(100, 200, 300), ptxgen.Gemm(100, 200, 300, dtype="bf16")
    path = tuning_cache.store(g, "sm_80", entry(), tools="t")
    moved = tuning_cache.store(other, "sm_80", entry(), tools="t")
    path.write_text(moved.read_text())  # a file whose key is not its name
    tuning_cache._warned.clear()
    with pytest.warns(tuning_cache.CacheWarning, match="does not match"):
        assert tuning_cache.load(g, "sm_80", "GPU A", tools="t") is None


def _writer(args) -> int:
    d, i = args
    os.environ["PTXGEN_CACHE_DIR"] = d
    g = ptxgen.Gemm(100, 200, 300)
    for j in range(40):
        tuning_cache.store(g, "sm_80", entry(t=(i * 100 + j + 1) * 1e-6), tools="t")
    return i


def test_concurrent_writers_leave_a_whole_entry_and_readers_never_see_half_of_one(cache):
    g = ptxgen.Gemm(100, 200, 300)
    tuning_cache.store(g, "sm_80", entry(), tools="t")
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(3) as pool:
        pending = pool.map_async(_writer, [(str(cache.parent), i) for i in range(3)])
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a torn read would warn "corrupt"
            reads = 0
            while not pending.ready():
                assert tuning_cache.load(g, "sm_80", "GPU A", tools="t") is not None
                reads += 1
        pending.get()
    final = tuning_cache.load(g, "sm_80", "GPU A", tools="t")
    assert final is not None and round(final.measured_s * 1e6) % 100 == 40  # some writer's last store
    assert [p.name for p in cache.iterdir() if not p.name.endswith(tuning_cache.SUFFIX)] == []  # no temp files
    assert reads > 0


def test_ptxgen_cache_0_reads_and_writes_nothing(cache, monkeypatch):
    monkeypatch.setenv("PTXGEN_CACHE", "0")
    g = ptxgen.Gemm(100, 200, 300)
    assert tuning_cache.store(g, "sm_80", entry(), tools="t") is None
    assert not cache.exists() and not tuning_cache.has_entries()


def test_a_killed_writers_temp_file_is_swept_once_stale(cache):
    cache.mkdir(parents=True)
    old, fresh = cache / ".tmp-1-x.tuning.part", cache / ".tmp-2-y.tuning.part"
    for p in (old, fresh):
        p.write_text("{")
    stale = os.path.getmtime(old) - tuning_cache.STALE_SECONDS - 5
    os.utime(old, (stale, stale))
    tuning_cache.store(ptxgen.Gemm(100, 200, 300), "sm_80", entry(), tools="t")
    assert not old.exists() and fresh.exists()  # a fresh one may be another process's write in flight
