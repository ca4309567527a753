"""``gpusim models show ID_OR_PATH [--seq-len N] [--json]`` and ``--model PATH`` on the other commands."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpusim.cli import main

CONFIGS = Path(__file__).parent / "configs"


def _run(capsys, *argv):
    rc = main([str(a) for a in argv])
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_show_dense_catalogue_entry(capsys):
    rc, out, _ = _run(capsys, "models", "show", "llama3.1-8b", "--seq-len", "8192")
    assert rc == 0
    for text in ("llama3.1-8b", "8192 tokens", "6*N(active) + attention (MFU in gpusim uses this)", "Megatron-LM",
                 "per part", "attention", "mlp", "lm head", "source:"):
        assert text in out, text


def test_show_moe_config_json(capsys):
    rc, out, _ = _run(capsys, "models", "show", CONFIGS / "deepseek-v3.json", "--json")
    assert rc == 0
    d = json.loads(out)
    parts = {r["part"]: r for r in d["breakdown"]}
    # [issue 17] the published 671B / 37B leave the multi-token prediction module out; it is a part of its own
    mtp = parts["multi-token prediction"]
    assert mtp["layers"] == 1 and 11e9 < mtp["params"] < 12e9
    assert d["params"] - mtp["params"] == pytest.approx(671e9, rel=0.01)
    assert d["active_params"] - mtp["active_params"] == pytest.approx(37e9, rel=0.03)
    assert {"embeddings", "attention", "mlp", "router", "experts", "shared experts", "lm head"} <= set(parts)
    assert parts["experts"]["layers"] == 58 and parts["mlp"]["layers"] == 3
    assert sum(r["params"] for r in d["breakdown"]) == pytest.approx(d["params"], rel=1e-12)
    assert sum(r["active_params"] for r in d["breakdown"]) == pytest.approx(d["active_params"], rel=1e-12)
    assert sum(r["fwd_flop_per_token"] for r in d["breakdown"]) == pytest.approx(d["fwd_flop_per_token"], rel=1e-12)
    assert d["flops_per_token"]["megatron_flop_per_token"] > 0 and d["assumptions"]
    assert d["transformer"]["n_experts"] == 256 and d["act_bytes_per_token"] > 0


def test_show_text_says_what_was_assumed(capsys):
    rc, out, _ = _run(capsys, "models", "show", CONFIGS / "gpt-oss-20b.json")
    assert rc == 0 and "assumed: sequence length 4096" in out and "active per token" in out


@pytest.mark.parametrize("argv, match", [
    (("models", "show"), "needs a model"),
    (("models", "show", "nowhere/config.json"), "cannot read model config"),
    (("models", "show", "lama2-7b"), "did you mean"),
    (("predict", "--model", "nowhere/config.json", "--gpu", "h100-sxm", "--gpus", "8", "--per-gpu-batch", "1"), "cannot read model config"),
])
def test_bad_input_is_one_line_exit_2(capsys, argv, match):
    rc, _, err = _run(capsys, *argv)
    assert rc == 2 and match in err and err.count("\n") == 1, err


def test_bad_config_names_the_field_exit_2(capsys, tmp_path):
    cfg = json.loads((CONFIGS / "mixtral-8x7b.json").read_text())
    cfg["num_local_experts"] = -8
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    rc, _, err = _run(capsys, "models", "show", tmp_path)
    assert rc == 2 and "'num_local_experts' must be >= 1" in err
    cfg["model_type"] = "mamba"
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    rc, _, err = _run(capsys, "predict", "--model", tmp_path / "config.json", "--gpu", "h100-sxm", "--gpus", "8",
                      "--per-gpu-batch", "1")
    assert rc == 2 and "model_type 'mamba' is not supported" in err


def test_predict_and_plan_take_a_config_path(capsys):
    rc, out, _ = _run(capsys, "predict", "--model", CONFIGS / "qwen3-8b.json", "--gpu", "h100-sxm", "--gpus", "8",
                      "--per-gpu-batch", "1", "--seq-len", "2048", "--strategy", "fsdp-full", "--json")
    assert rc == 0 and json.loads(out)["step_s"] > 0
    rc, out, _ = _run(capsys, "plan", "--model", CONFIGS / "qwen3-8b.json", "--tokens", "1e9", "--gpu", "h100-sxm",
                      "--json")
    assert rc == 0 and json.loads(out)
