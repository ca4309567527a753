"""The model catalogue's on-disk cache (gpusim.diskcache): a start served from it gives the same catalogue as
parsing, without importing the YAML parser or building the file schema; any change to a data file is a miss."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import gpusim.workload.catalogue as cat


@pytest.fixture
def cache(tmp_path, monkeypatch):
    d = tmp_path / "cache"
    monkeypatch.setenv("GPUSIM_CACHE_DIR", str(d))
    monkeypatch.delenv("GPUSIM_CACHE", raising=False)
    cat._load.cache_clear()
    yield d
    cat._load.cache_clear()


def _same(a, b) -> None:
    (ca, aa, sa), (cb, ab, sb) = a, b
    assert list(ca) == list(cb) and aa == ab
    assert sa == sb  # the TransformerSpec and EntryInfo of every transformer
    for k in ca:
        assert ca[k].func is cb[k].func and ca[k].args == cb[k].args


def test_a_cached_start_is_the_parsed_catalogue(cache):
    parsed = cat._parse(sorted(cat.DATA_DIR.glob("*.yaml")))
    first = cat._load()  # a miss: parses and writes
    assert [p.name.split("-")[0] for p in cache.iterdir()] == ["catalogue"]
    cat._load.cache_clear()
    second = cat._load()  # a hit
    assert second is not first
    _same(first, parsed)
    _same(second, parsed)


def test_a_changed_data_file_is_a_miss(cache, tmp_path, monkeypatch):
    data = tmp_path / "data"
    shutil.copytree(cat.DATA_DIR, data)
    monkeypatch.setattr(cat, "DATA_DIR", data)
    cat._load()
    assert len(list(cache.iterdir())) == 1
    f = sorted(data.glob("*.yaml"))[0]
    f.write_text(f.read_text() + "\n# edited\n")
    cat._load.cache_clear()
    cat._load()
    assert len(list(cache.iterdir())) == 2


def test_a_corrupt_cache_file_is_parsed_again(cache):
    cat._load()
    (path,) = cache.iterdir()
    path.write_bytes(b"not a pickle")
    cat._load.cache_clear()
    assert "resnet50" in cat._load()[0]
    assert path.read_bytes() != b"not a pickle"  # rewritten


def test_an_invalid_data_file_is_an_error_and_is_not_cached(cache, tmp_path, monkeypatch):
    from gpusim.errors import ScenarioError

    data = tmp_path / "data"
    shutil.copytree(cat.DATA_DIR, data)
    (data / "zz-bad.yaml").write_text("title: x\norder: 1\nmodels: []\n")
    monkeypatch.setattr(cat, "DATA_DIR", data)
    with pytest.raises(ScenarioError, match="zz-bad.yaml"):
        cat._load()
    assert not cache.exists() or not list(cache.iterdir())


def test_a_cached_start_imports_neither_yaml_nor_the_schema(cache):
    code = ("import sys, gpusim.workload.catalogue as c; c.get_workload('resnet50'); "
            "print(sorted(m for m in ('yaml', 'gpusim.workload.catalogue_schema', 'pydantic.main') if m in sys.modules))")
    env = {"GPUSIM_CACHE_DIR": str(cache), "PATH": "/usr/bin:/bin"}
    root = Path(__file__).resolve().parents[2]
    first = subprocess.run([sys.executable, "-c", code], env=env, cwd=root, capture_output=True, text=True, check=True)
    assert "yaml" in first.stdout  # the miss parsed
    second = subprocess.run([sys.executable, "-c", code], env=env, cwd=root, capture_output=True, text=True, check=True)
    assert second.stdout.strip() == "[]"
