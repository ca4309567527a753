"""The hardware loader's limits: alias bombs, duplicate keys, depth, size, impossible dates, non-UTF-8."""

from __future__ import annotations

import time

import pytest

from gpusim import hwdb
from gpusim.errors import HardwareFileError


def _problems(tmp_path, text: str | bytes) -> str:
    d = tmp_path / "mine"
    d.mkdir()
    f = d / "g.yaml"
    (f.write_bytes if isinstance(text, bytes) else f.write_text)(text)
    with pytest.raises(HardwareFileError) as e:
        hwdb.validate_dir(d)
    return str(e.value)


def test_a_billion_laughs_is_refused_quickly(tmp_path):
    bomb = "a: &a [x,x,x,x,x,x,x,x,x]\n" + "".join(
        f"{c}: &{c} [{','.join('*' + p for _ in range(9))}]\n" for p, c in zip("abcdefgh", "bcdefghi")) + "gpus: *i\n"
    assert len(bomb) < 400
    t0 = time.perf_counter()
    msg = _problems(tmp_path, bomb)
    assert time.perf_counter() - t0 < 5.0
    assert "aliases expand to more than" in msg and len(msg) < 1000


def test_duplicate_keys_name_the_file_and_both_lines(tmp_path):
    msg = _problems(tmp_path, "gpus:\n  - id: x\n    memory_gib: 80\n    memory_gib: 8\n")
    assert "g.yaml:4: duplicate key 'memory_gib' (first on line 3)" in msg


def test_an_impossible_date_and_non_utf8_name_the_file(tmp_path):
    assert "g.yaml:3: '2023-02-30' is not a valid date" in _problems(
        tmp_path, "gpus:\n  - id: x\n    released: 2023-02-30\n")


def test_non_utf8(tmp_path):
    assert "not UTF-8" in _problems(tmp_path, b"gpus:\n  - id: \xff\xfe\n")


def test_depth_and_size_limits(tmp_path, monkeypatch):
    assert "nested deeper than" in _problems(tmp_path, "x: " + "[" * 40 + "]" * 40 + "\n")
    monkeypatch.setattr(hwdb, "MAX_FILE_BYTES", 1000)
    (tmp_path / "big").mkdir()
    (tmp_path / "big" / "g.yaml").write_text("# " + "x" * 2000 + "\n")
    with pytest.raises(HardwareFileError, match="too large"):
        hwdb.validate_dir(tmp_path / "big")


def test_shared_anchors_within_the_limits_still_load(tmp_path):
    # an anchor reused a few times is ordinary YAML (not a bomb): the loader accepts the file's syntax
    text = "defaults: &d {x: 1}\nother: [*d, *d, *d]\n"
    assert hwdb.load_yaml_text(text, tmp_path / "x.yaml")["other"] == [{"x": 1}] * 3
