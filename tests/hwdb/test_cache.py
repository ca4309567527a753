"""[issue 20] The on-disk cache of the validated hardware database: a hit gives the same database, any change
to a file is a miss, a corrupt or unreadable cache falls back to parsing, a read-only cache directory still
works, and ``GPUSIM_CACHE=0`` turns it off."""

from __future__ import annotations

import os
import shutil
import stat

import pytest

from gpusim import hwdb


@pytest.fixture
def cache(tmp_path, monkeypatch):
    d = tmp_path / "cache"
    monkeypatch.setenv(hwdb.CACHE_DIR_ENV_VAR, str(d))
    monkeypatch.delenv(hwdb.CACHE_ENV_VAR, raising=False)
    hwdb._load_cached.cache_clear()
    yield d
    hwdb._load_cached.cache_clear()


def _user_dir(tmp_path, bw=999.0):
    d = tmp_path / "mine"
    d.mkdir(exist_ok=True)
    (d / "links.yaml").write_text(f"""
links:
  - id: my-link
    name: My link
    kind: ethernet
    scope: inter-node
    bandwidth_gbyte_per_s_per_direction: {bw}
    latency_us: 5
    sources: [{{title: my own measurement, fields: [bandwidth_gbyte_per_s_per_direction, latency_us]}}]
""")
    return d


def _fresh(*args, **kw):
    hwdb._load_cached.cache_clear()
    return hwdb.load(*args, **kw)


def test_hit_returns_the_same_database_without_parsing(cache, monkeypatch):
    first = _fresh(use_env=False)
    files = list(cache.glob("hwdb-*.pickle"))
    assert len(files) == 1
    calls = []
    monkeypatch.setattr(hwdb, "_parse_layers", lambda layers: calls.append(layers))
    second = _fresh(use_env=False)
    assert calls == []  # served from the cache
    assert second == first and second is not first
    assert second.gpu("h100-sxm").peak_flop_per_s("bf16") == first.gpu("h100-sxm").peak_flop_per_s("bf16")


def test_a_changed_file_is_a_miss(cache, tmp_path):
    _user_dir(tmp_path, bw=10.0)
    a = _fresh([tmp_path / "mine"], use_env=False)
    assert a.link("my-link").bandwidth_gbyte_per_s_per_direction == 10.0
    _user_dir(tmp_path, bw=20.0)  # same path, new content
    b = _fresh([tmp_path / "mine"], use_env=False)
    assert b.link("my-link").bandwidth_gbyte_per_s_per_direction == 20.0
    assert len(list(cache.glob("hwdb-*.pickle"))) == 2


def test_a_bad_file_is_never_cached(cache, tmp_path):
    from gpusim.errors import HardwareFileError

    d = _user_dir(tmp_path)
    (d / "links.yaml").write_text((d / "links.yaml").read_text().replace("latency_us: 5", "latency_us: -5"))
    for _ in range(2):  # the second time too: the error comes from parsing, not from a cache
        with pytest.raises(HardwareFileError, match="latency_us"):
            _fresh([d], use_env=False)
    assert len(list(cache.glob("hwdb-*.pickle"))) == 0


@pytest.mark.parametrize("garbage", [b"", b"not a pickle", b"\x80\x05K\x01.", b"\x80\x05\x95"])
def test_a_corrupt_cache_falls_back_to_parsing(cache, garbage):
    good = _fresh(use_env=False)
    (path,) = cache.glob("hwdb-*.pickle")
    path.write_bytes(garbage)
    again = _fresh(use_env=False)
    assert again == good
    assert hwdb._cache_read(path) == good  # rewritten


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root ignores permissions")
def test_a_read_only_cache_directory_still_loads(cache):
    cache.mkdir()
    cache.chmod(stat.S_IRUSR | stat.S_IXUSR)
    try:
        assert _fresh(use_env=False).gpus
        assert list(cache.iterdir()) == []
    finally:
        cache.chmod(stat.S_IRWXU)


def test_an_unwritable_cache_path_still_loads(cache):
    cache.parent.mkdir(exist_ok=True)
    cache.write_text("a file where the directory should be")
    assert _fresh(use_env=False).gpus


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs /proc (a directory nobody can write in)")
def test_a_cache_directory_nobody_can_create_still_loads(monkeypatch):
    monkeypatch.setenv(hwdb.CACHE_DIR_ENV_VAR, "/proc/self/gpusim-cache")
    assert _fresh(use_env=False).gpus


def test_cache_off(cache, monkeypatch):
    monkeypatch.setenv(hwdb.CACHE_ENV_VAR, "0")
    assert hwdb.cache_dir() is None
    assert _fresh(use_env=False).gpus
    assert not cache.exists()


def test_default_location_is_the_user_cache_not_the_package(monkeypatch, tmp_path):
    monkeypatch.delenv(hwdb.CACHE_DIR_ENV_VAR, raising=False)
    monkeypatch.delenv(hwdb.CACHE_ENV_VAR, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert hwdb.cache_dir() == tmp_path / "xdg" / "gpusim"
    monkeypatch.delenv("XDG_CACHE_HOME")
    pkg = os.path.dirname(os.path.abspath(hwdb.__file__))
    assert not str(hwdb.cache_dir()).startswith(pkg)


def test_the_key_covers_the_paths(tmp_path):
    layers = [hwdb.builtin_dir()]
    k1 = hwdb._cache_key(layers)
    assert k1 == hwdb._cache_key(layers)
    copy = tmp_path / "copy"
    shutil.copytree(hwdb.builtin_dir(), copy)
    assert hwdb._cache_key([copy]) != k1  # the paths are part of the result (origin)
