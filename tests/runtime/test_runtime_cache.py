"""The on-disk cubin cache: hits, misses, atomic writes, corruption, env vars, concurrency."""
from __future__ import annotations

import multiprocessing as mp
import os
import stat
import time
import warnings

import pytest

import ptx_samples as S
from ptxgen.runtime import cache
from ptxgen.runtime.assemble import assemble


@pytest.fixture(autouse=True)
def fresh_stats(monkeypatch):
    monkeypatch.setattr(cache, "stats", cache.CacheStats())
    monkeypatch.setattr(cache, "_warned", set())
    monkeypatch.setattr(cache, "_swept", set())


def entries(root):
    d = root / "cubins"
    return sorted(p for p in d.iterdir()) if d.is_dir() else []


def test_miss_then_hit(cache_root):
    a = assemble(S.add_one(), "sm_80", "add1")
    assert (cache.stats.misses, cache.stats.hits, cache.stats.stores) == (1, 0, 1)
    b = assemble(S.add_one(), "sm_80", "add1")
    assert (cache.stats.misses, cache.stats.hits, cache.stats.stores) == (1, 1, 1)
    assert a == b
    assert len(entries(cache_root)) == 1


def test_key_covers_ptx_arch_entry_and_assembler(cache_root, monkeypatch):
    assemble(S.add_one(), "sm_80", "add1")
    assemble(S.add_one(), "sm_90", "add1")
    assemble(S.add_one() + "\n// changed\n", "sm_80", "add1")
    monkeypatch.setenv("PTXGEN_ASSEMBLER", "ptxas")
    assemble(S.add_one(), "sm_80", "add1")
    assert cache.stats.hits == 0 and len(entries(cache_root)) == 4
    k = cache.make_key("p", "sm_80", "e", "x")
    assert len({k, cache.make_key("p", "sm_80", "e", "y"), cache.make_key("p", "sm_80", "f", "x"),
                cache.make_key("p", "sm_90", "e", "x"), cache.make_key("q", "sm_80", "e", "x"),
                cache.make_key("pe", "sm_80", "", "x")}) == 6


def test_cache_dir_env(tmp_path, monkeypatch):
    target = tmp_path / "elsewhere"
    monkeypatch.setenv("PTXGEN_CACHE_DIR", str(target))
    assemble(S.add_one(), "sm_80", "add1")
    assert len(entries(target)) == 1


def test_xdg_default(tmp_path, monkeypatch):
    monkeypatch.delenv("PTXGEN_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache.default_dir() == tmp_path / "xdg" / "ptxgen"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache.default_dir() == tmp_path / "home" / ".cache" / "ptxgen"


@pytest.mark.parametrize("value", ["0", "false", "off"])
def test_disabled(cache_root, monkeypatch, value):
    monkeypatch.setenv("PTXGEN_CACHE", value)
    assemble(S.add_one(), "sm_80", "add1")
    assemble(S.add_one(), "sm_80", "add1")
    assert cache.stats.hits == 0 and cache.stats.stores == 0
    assert not (cache_root / "cubins").exists()


def _corrupt_truncate(p):
    data = p.read_bytes()
    p.write_bytes(data[: len(data) // 2])


def _corrupt_flip_cubin(p):
    data = bytearray(p.read_bytes())
    data[len(cache.MAGIC) + cache._HEADER.size + 100] ^= 0x5A
    p.write_bytes(bytes(data))


def _corrupt_flip_log(p):
    data = bytearray(p.read_bytes())
    data[-5] ^= 0x01
    p.write_bytes(bytes(data))


def _corrupt_extend(p):
    p.write_bytes(p.read_bytes() + b"junk")


def _corrupt_empty(p):
    p.write_bytes(b"")


def _corrupt_magic(p):
    data = bytearray(p.read_bytes())
    data[0] ^= 0xFF
    p.write_bytes(bytes(data))


@pytest.mark.parametrize("damage", [_corrupt_truncate, _corrupt_flip_cubin, _corrupt_flip_log,
                                    _corrupt_extend, _corrupt_empty, _corrupt_magic])
def test_corrupt_entry_is_detected_deleted_and_rebuilt(cache_root, damage):
    good = assemble(S.add_one(), "sm_80", "add1")
    (p,) = entries(cache_root)
    damage(p)
    with pytest.warns(cache.CacheWarning, match="corrupt"):
        again = assemble(S.add_one(), "sm_80", "add1")
    assert cache.stats.corrupt == 1
    assert again.cubin == good.cubin and again.resources == good.resources
    assert cache.decode_entry(p.name[: -len(cache.SUFFIX)], p.read_bytes()) is not None  # rebuilt
    assemble(S.add_one(), "sm_80", "add1")
    assert cache.stats.hits == 1


def test_entry_renamed_to_another_key_is_rejected(cache_root):
    assemble(S.add_one(), "sm_80", "add1")
    (p,) = entries(cache_root)
    other = cache.make_key(S.add_one(), "sm_90", "add1", "whatever")
    assert cache.decode_entry(other, p.read_bytes()) is None


def test_atomic_write_leaves_no_partial_entry(cache_root, monkeypatch):
    def boom(src, dst):
        raise OSError("disk full (simulated)")

    monkeypatch.setattr(cache.os, "replace", boom)
    with pytest.warns(cache.CacheWarning, match="disk full"):
        a = assemble(S.add_one(), "sm_80", "add1")
    assert a.cubin[:4] == b"\x7fELF"
    assert entries(cache_root) == []  # neither the entry nor the temp file remain


def test_write_goes_through_temp_file_in_same_dir(cache_root, monkeypatch):
    seen = []
    real = os.replace

    def spy(src, dst):
        seen.append((os.path.dirname(src), os.path.dirname(dst), os.path.basename(src)))
        return real(src, dst)

    monkeypatch.setattr(cache.os, "replace", spy)
    assemble(S.add_one(), "sm_80", "add1")
    ((src_dir, dst_dir, name),) = seen
    assert src_dir == dst_dir and name.startswith(".tmp-")


def test_unwritable_dir_degrades_to_no_cache(tmp_path, monkeypatch):
    """Root ignores directory permissions, so the refusal is also simulated: the test runs as any user."""
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(stat.S_IRUSR | stat.S_IXUSR)
    real_mkdir = cache.Path.mkdir

    def refuse(self, *a, **k):
        if ro in self.parents:
            raise PermissionError(13, "Permission denied (simulated)", str(self))
        return real_mkdir(self, *a, **k)

    monkeypatch.setattr(cache.Path, "mkdir", refuse)
    monkeypatch.setenv("PTXGEN_CACHE_DIR", str(ro / "sub"))
    with pytest.warns(cache.CacheWarning, match="PTXGEN_CACHE_DIR"):
        assert assemble(S.add_one(), "sm_80", "add1").cubin[:4] == b"\x7fELF"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per process
        assemble(S.add_one(), "sm_80", "add1")
    ro.chmod(stat.S_IRWXU)


def test_unusable_dir_degrades_to_no_cache(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("PTXGEN_CACHE_DIR", str(blocker))
    with pytest.warns(cache.CacheWarning, match="unusable"):
        a = assemble(S.add_one(), "sm_80", "add1")
    assert a.cubin[:4] == b"\x7fELF"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # warned once, not on every call
        assemble(S.add_one(), "sm_80", "add1")


def test_read_only_entry_dir_degrades(cache_root, monkeypatch):
    def no_write(*a, **k):
        raise PermissionError("read-only file system (simulated)")

    monkeypatch.setattr(cache.tempfile, "mkstemp", no_write)
    with pytest.warns(cache.CacheWarning, match="read-only"):
        assemble(S.add_one(), "sm_80", "add1")
    assert cache.stats.stores == 0 and cache.stats.errors == 1


def test_clear(cache_root):
    assemble(S.add_one(), "sm_80", "add1")
    assemble(S.add_one(), "sm_90", "add1")
    assert cache.clear() == 2 and entries(cache_root) == []


def test_concurrent_writers(cache_root):
    ptxs = [S.add_one(), S.add_one("sm_80") + "// variant\n", S.smem_user(1024), S.smem_user(2048)]
    ctx = mp.get_context("spawn")
    with ctx.Pool(4) as pool:
        results = pool.map(__import__("cache_worker").assemble_many, [(ptxs, s) for s in range(4)])
    flat = [r for rs in results for r in rs]
    assert len(flat) == 4 * 3 * len(ptxs)
    by_key = {}
    for key, regs, size in flat:
        by_key.setdefault(key, set()).add((regs, size))
    assert all(len(v) == 1 for v in by_key.values()), by_key
    files = entries(cache_root)
    assert len(files) == len(ptxs)  # no stray temp files
    for p in files:
        key = p.name[: -len(cache.SUFFIX)]
        assert cache.decode_entry(key, p.read_bytes()) is not None


def test_read_only_cache_warns_once_with_the_fix_and_claims_no_deletion(cache_root, monkeypatch):
    """A corrupt entry in a cache that cannot be written: one warning per process that names the fix
    and says the entry is ignored, not "deleting it" on every load (and the file stays)."""
    key = cache.make_key("ptx", "sm_80", "k", "asm")
    cache.store(key, b"\x7fELF-cubin", "log")
    path = cache.entry_path(key)
    path.write_bytes(path.read_bytes()[:-3])  # truncated

    def refuse(*a, **k):
        raise PermissionError(13, "Read-only file system (simulated)")

    monkeypatch.setattr(cache.Path, "unlink", refuse)
    monkeypatch.setattr(cache.tempfile, "mkstemp", refuse)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        for _ in range(3):
            assert cache.load(key) is None
            cache.store(key, b"\x7fELF-cubin", "log")
    (w,) = [w for w in seen if issubclass(w.category, cache.CacheWarning)]
    text = str(w.message)
    assert "deleting" not in text and "cannot be deleted" in text and "PTXGEN_CACHE_DIR" in text
    assert path.exists() and cache.stats.corrupt == 3


def _temp_name(pid: int, host: str = None) -> str:
    return f".tmp-{pid}-{host or cache._HOST}-abc_123{cache.PART}"


def test_temp_file_of_a_killed_writer_is_swept_by_the_next_process(cache_root, tmp_path):
    """A writer killed between writing its temp file and renaming it leaves a .part file; the next
    process to use the directory removes it (its writer is dead), and leaves live writers' alone."""
    import signal
    import subprocess
    import sys

    script = ("import os, signal\n"
              "from ptxgen.runtime import cache\n"
              "os.replace = lambda *a: os.kill(os.getpid(), signal.SIGKILL)\n"
              "cache.store(cache.make_key('p', 'sm_80', 'k', 'a'), b'cubin', 'log')\n")
    env = {**os.environ, "PTXGEN_CACHE_DIR": str(cache_root),
           "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.run([sys.executable, "-c", script], env=env)
    assert proc.returncode == -signal.SIGKILL
    d = cache_root / "cubins"
    (left,) = [p for p in d.iterdir() if p.name.endswith(cache.PART)]
    live = d / _temp_name(os.getpid())  # a write in progress in a live process
    other_host = d / _temp_name(1, host="0" * 8)  # another machine's (shared directory): unknown
    old = d / _temp_name(os.getpid(), host="f" * 8)
    for p in (live, other_host, old):
        p.write_bytes(b"partial")
    ancient = time.time() - cache.STALE_SECONDS - 60
    os.utime(old, (ancient, ancient))  # too old to be a live write, whoever wrote it
    assert cache.load(cache.make_key("p", "sm_80", "k", "a")) is None
    assert not left.exists() and not old.exists()
    assert live.exists() and other_host.exists()
