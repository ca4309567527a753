"""[issue 17] `gpusim plan` says what the settings it ranked under as given would add to its recommendation: FP8
training (the plan's default precision is BF16) and, for an MoE model, Megatron-Core's MoE software settings; and
that the hardware should be ranked again with them. The recommendation also carries its expert-parallel degree."""

from __future__ import annotations

import json

import pytest

import gpusim
from gpusim.cli import main

# (zero1 for the data-parallel rows, as Megatron's recipes: at Lambda's 2026 H100 price a ZeRO-3 data-parallel row of
# this MoE model would otherwise win, which is no layout to advise on)
JOB = dict(model="qwen3-235b-a22b", tokens=1e12, deadline="60d", gpu=["h100-sxm"], strategy=["zero1"])


def _by_id(answer) -> dict:
    return {a["id"]: a for a in answer.software_advice}


@pytest.fixture(scope="module")
def planned():
    return gpusim.plan(**JOB)


def test_the_recommendation_names_its_ep_and_the_advice(planned):
    c = planned.recommendation["configuration"]
    assert c["ep"] > 1 and f"ep {c['ep']} " in c["layout"]  # the JSON column agrees with the layout's text
    adv = _by_id(planned)
    assert "llm-moe-software" in adv  # (FP8 is not advised here: its FP8 weight copies do not fit this layout)
    assert all(a["gain_frac"] > 0 for a in adv.values())
    d = planned.to_dict()
    assert [a["id"] for a in d["recommendation"]["software_advice"]] == [a["id"] for a in planned.software_advice]
    assert d["recommendation"]["configuration"]["ep"] == c["ep"]


def test_the_advice_is_predicts_for_the_recommended_configuration(planned):
    c = planned.recommendation["configuration"]
    layout = {k: c[k] for k in ("tp", "cp", "pp", "vp", "ep", "recompute")}
    r = gpusim.predict(model=JOB["model"], gpu=c["gpu"], node=c["node"], gpus=c["n_gpus"], nodes=c["nodes"],
                       micro_batch=c["micro_batch"], global_batch=c["global_batch"], precision=c["precision"],
                       strategy=c["strategy"], uneven_pp=True, **layout)
    assert r.throughput_samples_per_s == pytest.approx(c["throughput_samples_per_s"], rel=0.01)
    predicted = {x["id"]: x["gain_frac"] for x in r.to_dict()["recommendations"]}
    assert {k: a["gain_frac"] for k, a in _by_id(planned).items()} == {k: predicted[k] for k in _by_id(planned)}


def test_the_cli_says_how_to_rank_with_the_settings(capsys):
    argv = ["plan", "--model", JOB["model"], "--tokens", "1e12", "--deadline", "60d", "--gpu", "h100-sxm",
            "--strategy", "zero1", "--no-progress"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "MoE software for the recommendation: Megatron-Core's MoE software settings are off" in out
    assert ("This plan ranked the hardware with Megatron-Core's default MoE settings; run it again with the flags "
            "above to rank with them.") in out
    assert main(argv + ["--json"]) == 0
    ids = [a["id"] for a in json.loads(capsys.readouterr().out)["recommendation"]["software_advice"]]
    assert "llm-moe-software" in ids


def test_a_bf16_plan_is_told_what_fp8_would_add(capsys):
    dense = dict(model="llama3-8b", tokens=1e11, deadline="30d", gpu=["h100-sxm"])
    p = gpusim.plan(**dense)
    adv = _by_id(p)
    assert set(adv) == {"llm-fp8"} and adv["llm-fp8"]["change"] == {"precision": "fp8"}
    assert main(["plan", "--model", "llama3-8b", "--tokens", "1e11", "--deadline", "30d", "--gpu", "h100-sxm",
                 "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "FP8 for the recommendation: Training the layers' GEMMs in FP8 with per-tensor scaling" in out
    assert "This plan ranked the hardware with amp_bf16; run it again with the flags above" in out
    again = gpusim.plan(**dense, precision=["fp8"])  # the flag the advice names: the plan takes it
    assert again.ok and again.recommendation["configuration"]["precision"] == "fp8"
    assert "llm-fp8" not in _by_id(again)


def test_settings_given_leave_nothing_to_add():
    on = gpusim.plan(**JOB, moe_dispatcher="deepep", ep_overlap="1f1b", cuda_graph_scope=["full_iteration"])
    assert on.ok and "llm-moe-software" not in _by_id(on)


def test_a_configuration_the_rebuild_cannot_express_gets_no_advice(planned):
    """recommendation_software_advice gives no advice, rather than failing the plan, for a configuration it cannot
    rebuild (here tp 5, which divides neither the heads nor the GPUs), and none for one that is not a layout."""
    from gpusim.hwdb import load
    from gpusim.planning import recommendation_software_advice
    from gpusim.workload import get_workload

    db, wl = load(), get_workload(JOB["model"])
    c = dict(planned.recommendation["configuration"])
    assert recommendation_software_advice(c, wl, db)  # (the recommendation itself has advice: test_... above)
    assert recommendation_software_advice({**c, "tp": 5}, wl, db) == []
    assert recommendation_software_advice({**c, "layout": ""}, wl, db) == []
