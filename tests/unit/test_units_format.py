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
