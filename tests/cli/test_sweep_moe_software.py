"""[issue 17] `gpusim sweep` on an MoE model says what Megatron-Core's MoE software settings (flex dispatcher, EP
all-to-all overlap, fused grouped MLP, full-iteration CUDA graphs) would add to its best layout: the search runs the
scenario's settings (the framework's defaults unless pinned), so its best is the best of the default software."""

from __future__ import annotations

import json

import pytest

import gpusim
from gpusim.cli import main

JOB = dict(model="qwen3-30b-a3b", gpu="b200", gpus=16, nodes=2, global_batch=512, seq_len=4096, precision="fp8")


@pytest.fixture(scope="module")
def swept():
    return gpusim.sweep(**JOB)


def test_the_advice_is_predicts_for_the_best_layout(swept):
    adv = swept.moe_software
    assert adv is not None and adv["id"] == "llm-moe-software"
    assert adv["gain_frac"] > 0
    b = swept.best
    layout = {k: b[k] for k in ("tp", "pp", "vp", "cp", "ep", "micro_batch", "recompute")}
    base = gpusim.predict(**JOB, **layout, strategy="zero1")
    assert base.step_s == pytest.approx(b["step_s"], rel=1e-9)  # the layout the advice is about is the best row
    advice = {r["id"]: r for r in base.to_dict()["recommendations"]}["llm-moe-software"]
    assert advice["gain_frac"] == adv["gain_frac"]  # the same advice predict gives that layout
    change = {k: v for k, v in adv["change"].items()}
    graphs = change.pop("cuda_graph_scope", None)
    flags = {k: v for k, v in change.items() if v is not False}
    faster = gpusim.predict(**JOB, **layout, **flags, strategy="zero1",
                            **({"cuda_graph_scope": list(graphs)} if graphs else {}))
    assert base.step_s / faster.step_s - 1.0 == pytest.approx(adv["gain_frac"], abs=1e-3)


def test_the_cli_prints_it_and_the_json_carries_it(capsys):
    argv = ["sweep", "--model", JOB["model"], "--gpu", JOB["gpu"], "--gpus", "16", "--nodes", "2",
            "--global-batch", "512", "--seq-len", "4096", "--precision", "fp8"]
    assert main(argv) == 0
    assert "MoE software for the best layout: Megatron-Core's MoE software settings are off" in capsys.readouterr().out
    assert main(argv + ["--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["moe_software"]["id"] == "llm-moe-software"


def test_settings_already_on_leave_nothing_to_say():
    on = gpusim.sweep(**JOB, moe_dispatcher="deepep", ep_overlap="1f1b", cuda_graph_scope=["full_iteration"])
    assert on.moe_software is None  # (the fused grouped MLP is for MXFP8: nothing left for this FP8 job)
    half = gpusim.sweep(**JOB, moe_dispatcher="deepep")  # a pinned setting is the best layout's, not advised again
    assert "--moe-dispatcher" not in half.moe_software["message"]
    assert "--ep-overlap 1f1b" in half.moe_software["message"]
    b = half.best
    same = gpusim.predict(**JOB, **{k: b[k] for k in ("tp", "pp", "vp", "cp", "ep", "micro_batch", "recompute")},
                          moe_dispatcher="deepep", strategy="zero1")
    assert same.step_s == pytest.approx(b["step_s"], rel=1e-9)


def test_a_dense_model_gets_no_moe_advice():
    dense = gpusim.sweep(model="llama3-8b", gpu="h100-sxm", gpus=8, global_batch=128, seq_len=4096)
    assert dense.moe_software is None
    assert "moe_software" not in dense.to_dict()


def test_a_tensor_parallel_best_layout_is_the_one_advised():
    """The search runs sequence parallelism with tp > 1 (gpusim.search.with_layouts): so does the advice's layout."""
    s = gpusim.sweep(**JOB, tp=2)
    b = s.best
    assert b["tp"] == 2 and s.moe_software is not None
    same = gpusim.predict(**JOB, **{k: b[k] for k in ("tp", "pp", "vp", "cp", "ep", "micro_batch", "recompute")},
                          strategy="zero1", sp=True)
    assert same.step_s == pytest.approx(b["step_s"], rel=1e-9)
