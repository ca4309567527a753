"""[issue 17] `gpusim sweep` says what the settings it ran as given would add to its best layout: FP8 training (a BF16
search on a GPU with FP8 tensor cores) and, for an MoE model, Megatron-Core's MoE software settings (flex dispatcher,
EP all-to-all overlap, fused grouped MLP, full-iteration CUDA graphs). The search runs the scenario's precision and
settings (BF16 and the framework's defaults unless given), so its best is the best under them."""

from __future__ import annotations

import json

import pytest

import gpusim
from gpusim.cli import main

JOB = dict(model="qwen3-30b-a3b", gpu="b200", gpus=16, nodes=2, global_batch=512, seq_len=4096, precision="fp8")
LAYOUT = ("tp", "pp", "vp", "cp", "ep", "micro_batch", "recompute")
# [issue 17] the search also tries the recipes' recomputed modules, whose best layout here fills the GPU's memory and
# leaves no room for the advised settings' buffers (so no advice); these tests pin the recipe's own "none"
NONE = {"recompute": "none"}


def _by_id(result) -> dict:
    return {a["id"]: a for a in result.software_advice}


@pytest.fixture(scope="module")
def swept():
    return gpusim.sweep(**JOB, **NONE)


def test_the_advice_is_predicts_for_the_best_layout(swept):
    adv = _by_id(swept)["llm-moe-software"]
    assert adv["gain_frac"] > 0
    assert "llm-fp8" not in _by_id(swept)  # (already FP8)
    b = swept.best
    layout = {k: b[k] for k in LAYOUT}
    base = gpusim.predict(**JOB, **layout, strategy="zero1")
    assert base.step_s == pytest.approx(b["step_s"], rel=1e-9)  # the layout the advice is about is the best row
    advice = {r["id"]: r for r in base.to_dict()["recommendations"]}["llm-moe-software"]
    assert advice["gain_frac"] == adv["gain_frac"]  # the same advice predict gives that layout
    change = dict(adv["change"])
    graphs = change.pop("cuda_graph_scope", None)
    flags = {k: v for k, v in change.items() if v is not False}
    faster = gpusim.predict(**JOB, **layout, **flags, strategy="zero1",
                            **({"cuda_graph_scope": list(graphs)} if graphs else {}))
    assert base.step_s / faster.step_s - 1.0 == pytest.approx(adv["gain_frac"], abs=1e-3)


def test_the_cli_prints_it_and_the_json_carries_it(capsys):
    argv = ["sweep", "--model", JOB["model"], "--gpu", JOB["gpu"], "--gpus", "16", "--nodes", "2",
            "--global-batch", "512", "--seq-len", "4096", "--precision", "fp8", "--recompute", "none"]
    assert main(argv) == 0
    assert "MoE software for the best layout: Megatron-Core's MoE software settings are off" in capsys.readouterr().out
    assert main(argv + ["--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert [a["id"] for a in d["software_advice"]] == ["llm-moe-software"]


def test_settings_already_on_leave_nothing_to_say():
    on = gpusim.sweep(**JOB, **NONE, moe_dispatcher="deepep", ep_overlap="1f1b", cuda_graph_scope=["full_iteration"])
    assert not on.software_advice  # (the fused grouped MLP is for MXFP8: nothing left for this FP8 job)
    assert "software_advice" not in on.to_dict()
    half = gpusim.sweep(**JOB, **NONE, moe_dispatcher="deepep")  # a pinned setting is the best layout's, not advised again
    msg = _by_id(half)["llm-moe-software"]["message"]
    assert "--moe-dispatcher" not in msg and "--ep-overlap 1f1b" in msg
    b = half.best
    same = gpusim.predict(**JOB, **{k: b[k] for k in LAYOUT}, moe_dispatcher="deepep", strategy="zero1")
    assert same.step_s == pytest.approx(b["step_s"], rel=1e-9)


def test_a_bf16_search_is_told_what_fp8_would_add(capsys):
    """A dense BF16 search on Hopper: the best BF16 layout, and what FP8 (per-tensor scaling) adds to it."""
    job = dict(model="llama3-70b", gpu="h100-sxm", gpus=64, nodes=8, global_batch=128, seq_len=8192,
               precision="bf16")
    s = gpusim.sweep(**job)
    adv = _by_id(s)["llm-fp8"]
    assert adv["change"] == {"precision": "fp8"} and adv["gain_frac"] > 0
    b = s.best
    layout = {k: b[k] for k in LAYOUT}
    base = gpusim.predict(**job, **layout, strategy="zero1", uneven_pp=True)
    fp8 = gpusim.predict(**{**job, "precision": "fp8"}, **layout, strategy="zero1", uneven_pp=True)
    assert base.step_s == pytest.approx(b["step_s"], rel=1e-9)
    assert base.step_s / fp8.step_s - 1.0 == pytest.approx(adv["gain_frac"], abs=1e-3)
    assert "llm-moe-software" not in _by_id(s)  # (a dense model)


def test_a_tensor_parallel_best_layout_is_the_one_advised():
    """The search runs sequence parallelism with tp > 1 (gpusim.search.with_layouts): so does the advice's layout."""
    s = gpusim.sweep(**JOB, tp=2)
    b = s.best
    assert b["tp"] == 2 and s.software_advice
    same = gpusim.predict(**JOB, **{k: b[k] for k in LAYOUT}, strategy="zero1", sp=True)
    assert same.step_s == pytest.approx(b["step_s"], rel=1e-9)


def test_advice_that_cannot_be_given_leaves_the_search_answer_whole(monkeypatch):
    """The advice is an addition: a layout simulate() refuses (a rule the search does not hold) gives no advice, and
    the search's best and table stay as they are."""
    import gpusim.simulation
    from gpusim.errors import ScenarioError

    def refuse(*_a, **_k):
        raise ScenarioError("a rule the search does not hold")

    monkeypatch.setattr(gpusim.simulation, "software_advice", refuse)
    out = gpusim.sweep(**JOB)
    assert out.software_advice == ()
    assert out.best is not None and out.n_feasible > 0
