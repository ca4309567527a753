"""[issue 17] `gpusim plan` on an MoE model: the recommendation carries its expert-parallel degree, and says what
Megatron-Core's MoE software settings would add to it (the plan ranks hardware under the settings it is given:
Megatron-Core's defaults unless pinned) and how to rank with them."""

from __future__ import annotations

import json

import pytest

import gpusim
from gpusim.cli import main

JOB = dict(model="qwen3-235b-a22b", tokens=1e12, deadline="60d", gpu=["h100-sxm"])


@pytest.fixture(scope="module")
def planned():
    return gpusim.plan(**JOB)


def test_the_recommendation_names_its_ep_and_the_software_advice(planned):
    c = planned.recommendation["configuration"]
    assert c["ep"] > 1 and f"ep {c['ep']} " in c["layout"]  # the JSON column agrees with the layout's text
    adv = planned.moe_software
    assert adv is not None and adv["id"] == "llm-moe-software" and adv["gain_frac"] > 0
    d = planned.to_dict()
    assert d["recommendation"]["moe_software"]["gain_frac"] == adv["gain_frac"]
    assert d["recommendation"]["configuration"]["ep"] == c["ep"]


def test_the_advice_is_predicts_for_the_recommended_configuration(planned):
    c = planned.recommendation["configuration"]
    layout = {k: c[k] for k in ("tp", "cp", "pp", "vp", "ep", "recompute")}
    r = gpusim.predict(model=JOB["model"], gpu=c["gpu"], node=c["node"], gpus=c["n_gpus"], nodes=c["nodes"],
                       micro_batch=c["micro_batch"], global_batch=c["global_batch"], precision=c["precision"],
                       strategy=c["strategy"], uneven_pp=True, **layout)
    assert r.throughput_samples_per_s == pytest.approx(c["throughput_samples_per_s"], rel=0.01)
    advice = {x["id"]: x for x in r.to_dict()["recommendations"]}["llm-moe-software"]
    assert advice["gain_frac"] == planned.moe_software["gain_frac"]


def test_the_cli_says_how_to_rank_with_the_settings(capsys):
    assert main(["plan", "--model", JOB["model"], "--tokens", "1e12", "--deadline", "60d", "--gpu", "h100-sxm",
                 "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "MoE software for the recommendation: Megatron-Core's MoE software settings are off" in out
    assert "run it again with the flags above to rank with them" in out
    assert main(["plan", "--model", JOB["model"], "--tokens", "1e12", "--deadline", "60d", "--gpu", "h100-sxm",
                 "--no-progress", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["recommendation"]["moe_software"]["id"] == "llm-moe-software"


def test_settings_given_leave_nothing_to_add_and_dense_plans_get_none():
    on = gpusim.plan(**JOB, moe_dispatcher="deepep", ep_overlap="1f1b", cuda_graph_scope=["full_iteration"])
    assert on.ok and on.moe_software is None
    assert "moe_software" not in on.to_dict()["recommendation"]
    dense = gpusim.plan(model="llama3-8b", tokens=1e11, deadline="30d", gpu=["h100-sxm"])
    assert dense.ok and dense.moe_software is None
