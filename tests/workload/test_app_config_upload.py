"""The planner's config.json upload: a page state with an uploaded config builds the scenario's workload,
and the sidebar offers the upload box."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("streamlit")

from gpusim.app_pages.state import scenario_from_state, workload_from_state  # noqa: E402
from gpusim.errors import ScenarioError  # noqa: E402
from gpusim.hwdb import load  # noqa: E402

CONFIGS = Path(__file__).parent / "configs"


def test_uploaded_config_becomes_the_workload():
    cfg = json.loads((CONFIGS / "mixtral-8x7b.json").read_text())
    state = {"wl": "config.json", "config": cfg, "seq": 2048, "gpus": 8, "strategy": "fsdp-full", "batch": 1}
    wl = workload_from_state(state)
    assert wl.is_moe and wl.tokens_per_sample == 2048 and wl.params == pytest.approx(46.7e9, rel=0.01)
    scn = scenario_from_state(state, load())
    assert scn.workload.params == wl.params and scn.workload.transformer.n_experts == 8


def test_no_upload_yet_is_a_readable_error():
    with pytest.raises(ScenarioError, match="upload a config.json"):
        workload_from_state({"wl": "config.json", "config": None})


def test_sidebar_offers_the_upload_box():
    from streamlit.testing.v1 import AppTest

    app = Path(__file__).parents[2] / "app.py"
    at = AppTest.from_file(str(app), default_timeout=60)
    at.query_params["wl"] = "config.json"
    at.run()
    assert not at.exception
    assert any("Upload the config.json" in i.value for i in at.info)
