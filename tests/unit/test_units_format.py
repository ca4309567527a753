"""The unit formatters the reports print with (gpusim.units)."""

from __future__ import annotations

import math

import pytest

from gpusim import units


@pytest.mark.parametrize("x, text", [
    (19321.7, "19,300"), (0.4567, "0.457"), (999.4, "999"),
    (999.96, "1,000"),  # rounded first, so not '1e+03'
    (1234567.0, "1,230,000"), (-1234.5, "-1,230"), (0.0, "0"), (math.inf, "inf"),
])
def test_format_count(x, text):
    assert units.format_count(x) == text


def test_format_count_digits():
    assert units.format_count(19321.7, digits=5) == "19,322"
    assert units.format_count(12.3456, digits=2) == "12"


@pytest.mark.parametrize("n_bytes, text", [(1000.4 * units.MIB, "1,000 MiB"), (1023.6 * units.MIB, "1,020 MiB"),
                                           (25 * units.MIB, "25 MiB"), (1.5 * units.GIB, "1.5 GiB"), (3.0, "3 B")])
def test_format_bytes_never_prints_an_exponent(n_bytes, text):
    """[stop 51] 1,000-1,023 of a binary unit read '1e+03 MiB' (gpusim validate's layout-search line)."""
    assert units.format_bytes(n_bytes) == text
