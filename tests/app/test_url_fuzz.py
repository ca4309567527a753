"""Adversarial planner URLs: every page, any of its URL parameters, hostile values: never an exception in the
page (a bad value is dropped with a notice and the widget keeps its default)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hs

from app_helpers import PAGES, run_app

ROOT = Path(__file__).resolve().parents[2]
#: every widget key of the app's pages and sidebar (the URL-bound ones among them are what a URL can set)
KEYS = sorted({m for f in (ROOT / "gpusim" / "app_pages").glob("*.py")
               for m in re.findall(r'key="([a-z_0-9]+)"', f.read_text())})
HOSTILE = ["inf", "-inf", "nan", "1e400", "-1e400", "1e-320", "-1", "0", "1e30", "", "abc", "9" * 400, "0x10",
           "h100", "../../etc", "%00", "true", "[1,2]", "NaN", "1_000"]


def test_known_crashers_are_dropped_with_a_notice():
    at = run_app("step", {"batch": "inf", "nodes": "1e400"})
    assert not at.exception, [e.value for e in at.exception]
    notes = " ".join(w.value for w in at.warning)
    assert "batch" in notes and "must be a whole number" in notes
    at = run_app("plan", {"plan_max_gpus": "-inf"})
    assert not at.exception, [e.value for e in at.exception]


@pytest.mark.parametrize("page", sorted(PAGES))
@settings(max_examples=4, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(query=hs.dictionaries(hs.sampled_from(KEYS), hs.sampled_from(HOSTILE), min_size=1, max_size=3))
def test_hostile_url_parameters_never_raise(page, query):
    at = run_app(page, query)
    assert not at.exception, (query, [e.value for e in at.exception])
