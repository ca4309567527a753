"""gpusim.checks: one validation of numbers and files."""

from __future__ import annotations

import argparse
import math

import pytest
from hypothesis import given
from hypothesis import strategies as hs

from gpusim import checks
from gpusim.errors import GpusimError


@given(x=hs.floats(allow_nan=True, allow_infinity=True))
def test_a_bound_accepts_exactly_the_finite_values_in_its_range(x):
    b = checks.Bound(1e-3, 1e3)
    ok = math.isfinite(x) and 1e-3 <= x <= 1e3
    if ok:
        assert b.check(x) == x
    else:
        with pytest.raises(ValueError, match="from 0.001 to 1,000"):
            b.check(x)


@pytest.mark.parametrize("text", ["inf", "nan", "1e400", "-1", "abc", "", "1e-320", "2.5"])
def test_argparse_type_message(text):
    with pytest.raises(argparse.ArgumentTypeError, match="must be a whole number from 1 to 8"):
        checks.Bound(1, 8, integer=True)(text)


def test_subnormal_scale_is_refused_even_where_zero_is_allowed():
    with pytest.raises(ValueError):
        checks.Bound(0, 1).check(1e-320)
    assert checks.Bound(0, 1).check(0.0) == 0.0


def test_pydantic_models_reject_inf_nan_and_tiny_values_with_the_range():
    from gpusim.simulation import Scenario

    for bad in ({"bucket_mib": math.inf}, {"slowest_gpu_speed_frac": 1e-320}, {"baseline_throughput": math.nan}):
        with pytest.raises(GpusimError, match="must be a finite number from"):
            Scenario.create(model="resnet50", gpu="h100-sxm", **bad)


def test_files(tmp_path):
    (tmp_path / "b.bin").write_bytes(b"\x00\x01")
    with pytest.raises(GpusimError, match="binary"):
        checks.read_text(tmp_path / "b.bin")
    with pytest.raises(GpusimError, match="not a regular file"):
        checks.read_text("/dev/zero")
    (tmp_path / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(GpusimError, match="nested too deeply"):
        checks.load_json(tmp_path / "deep.json")
    (tmp_path / "nan.json").write_text('{"a": NaN}')
    with pytest.raises(GpusimError, match="NaN"):
        checks.load_json(tmp_path / "nan.json")
    assert checks.loads_json('{"a": NaN}', allow_nan=True)["a"] != 0


def test_output_path(tmp_path):
    assert checks.output_path(tmp_path / "new.json") == tmp_path / "new.json"
    (tmp_path / "old.json").write_text("{}")
    assert checks.output_path(tmp_path / "old.json")
    for bad in ("/dev/null", str(tmp_path)):
        with pytest.raises(GpusimError, match="regular file"):
            checks.output_path(bad)
    with pytest.raises(GpusimError, match="too long"):
        checks.output_path(tmp_path / ("x" * 300))


def test_read_csv_gives_rows_or_a_message_naming_the_file_and_the_missing_columns(tmp_path):
    from gpusim.checks import read_csv

    good = tmp_path / "good.csv"
    good.write_text("a,b\n1,2\n3,4\n")
    assert read_csv(good, ("a", "b")) == [{"a": "1", "b": "2"}, {"a": "3", "b": "4"}]
    with pytest.raises(GpusimError, match=r"good.csv: missing column\(s\) c; the schema is a, b, c"):
        read_csv(good, ("a", "b", "c"))
    with pytest.raises(GpusimError, match="missing column.*; see the README"):
        read_csv(good, ("z",), hint="see the README")
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    with pytest.raises(GpusimError, match="empty.csv: missing column"):
        read_csv(empty, ("a",))
    with pytest.raises(GpusimError, match="no-such.csv"):
        read_csv(tmp_path / "no-such.csv", ("a",))
    binary = tmp_path / "bin.csv"
    binary.write_bytes(b"a,b\n\x00\x01\n")
    with pytest.raises(GpusimError, match="binary"):
        read_csv(binary, ("a",))
