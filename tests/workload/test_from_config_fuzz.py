"""Whatever a config.json holds, from_config answers with a workload or one readable ScenarioError, never
another exception (the CLI turns ScenarioError into a one-line message and exit code 2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpusim.errors import ScenarioError
from gpusim.workload import from_config

CONFIGS = Path(__file__).parent / "configs"
NAMES = sorted(p.stem for p in CONFIGS.glob("*.json"))
VALUES = st.one_of(st.none(), st.booleans(), st.integers(-10, 10**6), st.floats(allow_nan=True),
                   st.text(max_size=5), st.lists(st.integers(-2, 50), max_size=4), st.dictionaries(st.text(max_size=3),
                                                                                                    st.integers(), max_size=2))


@settings(max_examples=300, deadline=None)
@given(name=st.sampled_from(NAMES), data=st.data())
def test_any_field_value_gives_a_workload_or_a_scenario_error(name, data):
    cfg = json.loads((CONFIGS / f"{name}.json").read_text())
    key = data.draw(st.sampled_from(sorted(cfg)))
    cfg[key] = data.draw(VALUES)
    try:
        w = from_config(cfg, seq_len=64)
    except ScenarioError as e:
        assert str(e) and "\n" not in str(e)
    else:
        assert w.params > 0 and w.fwd_flop_per_sample > 0
