"""[issue 17] Multi-token prediction (DeepSeek-V3 report section 2.2; Megatron-Core ``--mtp-num-layers``): D modules after
the last layer, each a transformer layer of the model's last kind, ``eh_proj`` 2h -> h, three norms and one more pass
through the shared LM head with its loss. Closed forms on hand-worked cases (parameters, FLOPs in both conventions),
the last pipeline stage's slots, the twins (CLI, Python API), bad input."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

import gpusim.api as api
from gpusim.cli import main
from gpusim.errors import ScenarioError
from gpusim.model.llm import stage_layers
from gpusim.simulation import Scenario, simulate
from gpusim.workload import build_transformer, get_workload
from gpusim.workload.flops import flops_per_token
from gpusim.workload.transformer import MTP_GROUP, EntryInfo, TransformerSpec

CONFIGS = Path(__file__).resolve().parents[1] / "workload" / "configs"
INFO = EntryInfo("tiny", "tiny", "decoder-lm", ("hand-worked",))
# a small dense decoder: 4 layers, h 256, 4 heads of 64, SwiGLU 512, untied head over 1000 tokens, RMSNorm, no biases
TINY = TransformerSpec(n_layers=4, d_model=256, n_heads=4, vocab_size=1000, seq_len=128, d_ff=512, gated_ffn=True,
                       norm="rmsnorm", bias=False, dropout=False, flash_attention=True, rope=True,
                       tied_embeddings=False)


def test_one_module_adds_a_layer_eh_proj_three_norms_and_no_embedding_or_head():
    h = 256.0
    layer = 4 * h * h + 3 * h * 512 + 2 * h   # Q K V O, gate up down, two RMSNorms
    mtp = dataclasses.replace(TINY, mtp_layers=2)
    assert mtp.mtp_params() == pytest.approx(2 * (layer + 2 * h * h + 3 * h), rel=1e-12)
    base, with_mtp = build_transformer(INFO, TINY), build_transformer(INFO, mtp)
    assert with_mtp.params - base.params == pytest.approx(mtp.mtp_params(), rel=1e-12)
    assert TINY.mtp_params() == 0.0


def test_forward_flops_of_a_module_by_hand():
    """Per sample of s = 128 tokens: the layer 2 s (4 h^2 + 3 h f) + attention 2 * 2 s^2 q, eh_proj 2 s (2h) h and
    one more head 2 s h V; the rest of the model is unchanged."""
    s, h, f, V = 128.0, 256.0, 512.0, 1000.0
    module = 2 * s * (4 * h * h + 3 * h * f) + 2 * 2 * s * s * h + 2 * s * 2 * h * h + 2 * s * h * V
    base = build_transformer(INFO, TINY)
    with_mtp = build_transformer(INFO, dataclasses.replace(TINY, mtp_layers=1))
    assert with_mtp.fwd_flop_per_sample - base.fwd_flop_per_sample == pytest.approx(module, rel=1e-12)
    grouped = sum(g.fwd_flop_per_sample for g in with_mtp.layers if g.name == MTP_GROUP)
    assert grouped == pytest.approx(module, rel=1e-12)


def test_flops_per_token_both_conventions():
    s, h, V = 128, 256.0, 1000.0
    spec = dataclasses.replace(TINY, mtp_layers=1)
    a, b = flops_per_token(TINY, s), flops_per_token(spec, s)
    w = build_transformer(INFO, spec)
    # 6 N + attention stays 3x the workload's forward count
    assert b["six_n_attention_flop_per_token"] == pytest.approx(3 * w.fwd_flop_per_sample / s, rel=1e-12)
    # Megatron-LM's count: the module's layer and logits as the one-layer model's, plus 6 (3 h + 2 h^2)
    blk = flops_per_token(spec.mtp_block_spec(), s)["megatron_flop_per_token"]
    assert b["megatron_flop_per_token"] - a["megatron_flop_per_token"] == pytest.approx(
        blk + 6 * (3 * h + 2 * h * h), rel=1e-12)
    assert blk > 6 * h * V   # (its logits are in it)


def test_deepseek_v3_module_is_an_moe_layer_with_mla():
    w = get_workload("deepseek-v3")
    spec = w.transformer
    blk = spec.mtp_block_spec()
    assert spec.mtp_layers == 1 and blk.n_layers == 1 and blk.n_moe_layers == 1 and blk.mla
    # 256 experts of 3 x 7168 x 2048 dominate: 11.3 G, the MTP's 14 G on the Hugging Face card less its own copies of
    # the 0.93 G embedding and head
    assert spec.mtp_params() == pytest.approx(blk.layer_params(0) + 2 * 7168.0 ** 2 + 3 * 7168.0, rel=1e-12)
    assert 11.3e9 < spec.mtp_params() < 11.8e9
    assert w.params - spec.mtp_params() == pytest.approx(671e9, rel=0.01)


def test_stage_layers_by_hand():
    last, top = stage_layers(64.0, 61.0, 1.0, 16.0)     # 61 layers padded to 64 on pp 16: slack 3 holds it
    assert float(last) == 4.0 and float(top) == 0.0
    last, top = stage_layers(64.0, 64.0, 1.0, 16.0)     # an even split: on top of the last stage
    assert float(last) == 5.0 and float(top) == 1.0
    last, top = stage_layers(64.0, 63.0, 3.0, 16.0)     # slack 1 of 3: two on top
    assert float(last) == 6.0 and float(top) == 2.0


def _sim(spec_or_model, **kw):
    base = dict(gpu="h100-sxm", gpus=8, micro_batch=1, global_batch=64, kind="zero1")
    base.update(kw)
    if isinstance(spec_or_model, str):
        return simulate(Scenario.create(model=spec_or_model, **base), recommend=False)
    return simulate(Scenario.create(workload=build_transformer(INFO, spec_or_model), **base), recommend=False)


def test_even_split_puts_the_module_on_the_last_stage():
    spec = dataclasses.replace(TINY, n_layers=8, seq_len=2048, d_model=1024, n_heads=8, d_ff=4096, vocab_size=32000)
    base = _sim(spec, pp=2, tp=1)
    mtp = _sim(dataclasses.replace(spec, mtp_layers=1), pp=2, tp=1)
    assert mtp.step_s > base.step_s
    # the last stage holds one layer more (4 + 1) and a second head: more than a quarter of a stage more work
    assert mtp.memory_breakdown_bytes["weights"] >= base.memory_breakdown_bytes["weights"]
    assert mtp.mfu_frac > 0 and mtp.model_tflop_per_s_per_gpu > 0


def test_uneven_split_fills_its_empty_slots_first():
    """DeepSeek-V3's 61 layers on pp 16 pad to 64 slots: the module takes one of the 3 empty ones (Megatron-Bridge's
    layouts: ... 1 + mtp + loss on the last stage), so the step is the padded stages' as without it, while the model
    FLOPs (MFU) count its work."""
    kw = dict(gpu="h100-sxm", gpus=1024, nodes=128, tp=2, pp=16, ep=64, micro_batch=1, global_batch=8192, seq_len=4096,
              precision="fp8", kind="zero1", uneven_pp=True)
    on = simulate(Scenario.create(model="deepseek-v3", **kw), recommend=False)
    off = simulate(Scenario.create(model="deepseek-v3", mtp_layers=0, **kw), recommend=False)
    assert on.step_s == pytest.approx(off.step_s, rel=2e-3)
    assert on.mfu_frac > off.mfu_frac * 1.02


def test_cli_and_api_twins(capsys):
    argv = ["predict", "--model", "llama3-8b", "--gpu", "h100-sxm", "--gpus", "8", "--pp", "2", "--micro-batch", "1",
            "--global-batch", "64", "--json"]
    assert main([*argv, "--mtp-layers", "1"]) == 0
    cli = json.loads(capsys.readouterr().out)
    assert main(argv) == 0
    plain = json.loads(capsys.readouterr().out)
    assert cli["step_s"] > plain["step_s"]
    res = api.predict(model="llama3-8b", gpu="h100-sxm", gpus=8, pp=2, micro_batch=1, global_batch=64, mtp_layers=1)
    assert res.step_s == pytest.approx(cli["step_s"], rel=1e-12)



def test_zero_takes_the_module_out_as_a_config_without_it(tmp_path):
    from gpusim.rows import apply_mtp

    cfg = json.loads((CONFIGS / "deepseek-v3.json").read_text())
    assert cfg.pop("num_nextn_predict_layers") == 1
    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg))
    without = get_workload(str(p))
    off = apply_mtp(get_workload(str(CONFIGS / "deepseek-v3.json")), 0)
    assert without.transformer.mtp_layers == off.transformer.mtp_layers == 0
    assert off.params == pytest.approx(without.params, rel=1e-12)
    assert off.fwd_flop_per_sample == pytest.approx(without.fwd_flop_per_sample, rel=1e-12)
    assert apply_mtp(off, None) is off


@pytest.mark.parametrize("args, needle", [
    (["--model", "llama3-8b", "--mtp-layers", "-1"], "--mtp-layers"),
    (["--model", "llama3-8b", "--mtp-layers", "17"], "--mtp-layers"),
    (["--model", "resnet50", "--per-gpu-batch", "64", "--mtp-layers", "1"], "language models"),
    (["--model", "resnet50", "--per-gpu-batch", "64", "--mtp-shared"], "leave --mtp-shared out"),
])
def test_bad_input_exits_2_with_the_fix(args, needle, capsys):
    try:
        rc = main(["predict", "--gpu", "h100-sxm", "--gpus", "8", *args])
    except SystemExit as e:  # argparse's usage errors (a flag out of range) exit 2 from the parser
        rc = e.code
    err = capsys.readouterr().err
    assert rc == 2 and needle in err and "Traceback" not in err


def test_config_fields_are_checked(tmp_path):
    cfg = json.loads((CONFIGS / "deepseek-v3.json").read_text())
    cfg["num_nextn_predict_layers"] = 99
    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg))
    with pytest.raises(ScenarioError, match="num_nextn_predict_layers"):
        get_workload(str(p))
    with pytest.raises(ScenarioError, match="mtp_layers"):
        dataclasses.replace(TINY, mtp_layers=-1)
    with pytest.raises(ScenarioError, match="language-model head"):
        dataclasses.replace(TINY, head="cls", n_classes=2, mtp_layers=1)


def test_megatron_recipe_reads_mtp_num_layers(tmp_path):
    p = tmp_path / "recipe.yaml"
    p.write_text("num_layers: 4\nhidden_size: 256\nnum_attention_heads: 4\nvocab_size: 1000\nseq_length: 128\n"
                 "mtp_num_layers: 2\n")
    assert get_workload(str(p)).transformer.mtp_layers == 2
    assert np.isfinite(get_workload(str(p)).fwd_flop_per_sample)


def test_runs_notes_option_mtp_num_layers(db, run_row):
    """A published run that trained without DeepSeek-V3's module (Megatron-Bridge's 25.11 table: 'w/o MTP') says
    ``mtp_num_layers=0``; without it the model's own module is trained. Here an even split (pp 1, where the module
    cannot take an empty slot) shows the difference in the step; a bad count is refused."""
    from gpusim.validation_runs import options, predict_row

    assert options("DeepSeekV3 (w/o MTP): mtp_num_layers=0; strategy=zero1")["mtp_num_layers"] == "0"
    row = run_row(model="deepseek-v3", gpu="gb200", gpus=256, gpus_per_node=72, ep=256, global_batch=2048,
                  seq_len=4096, precision="mxfp8")
    on = predict_row(row, db=db)
    off = predict_row(dict(row, notes="strategy=zero1; mtp_num_layers=0"), db=db)
    assert not on.error and not off.error and on.step_s > off.step_s
    assert "not a count" in predict_row(dict(row, notes="mtp_num_layers=many"), db=db).error


# --- [issue 17] passes through one shared module (Megatron-Core mtp_use_repeated_layer; Nemotron 3 Super's recipe) ---

def test_shared_passes_hold_one_module_and_run_every_pass():
    """Two passes through one module: one module's parameters (a layer, eh_proj, three norms), the FLOPs and the
    weight reads of two passes."""
    h = 256.0
    layer = 4 * h * h + 3 * h * 512 + 2 * h
    sep = dataclasses.replace(TINY, mtp_layers=2)
    shared = dataclasses.replace(TINY, mtp_layers=2, mtp_shared=True)
    assert shared.mtp_param_modules == 1 and sep.mtp_param_modules == 2
    assert shared.mtp_params() == pytest.approx(layer + 2 * h * h + 3 * h, rel=1e-12)
    base, w_sep, w_shared = (build_transformer(INFO, s) for s in (TINY, sep, shared))
    assert w_shared.params - base.params == pytest.approx(shared.mtp_params(), rel=1e-12)
    assert w_shared.fwd_flop_per_sample == pytest.approx(w_sep.fwd_flop_per_sample, rel=1e-12)
    assert w_shared.weight_bytes == pytest.approx(w_sep.weight_bytes, rel=1e-12)
    # no passes, nothing to share
    assert dataclasses.replace(TINY, mtp_shared=True).mtp_params() == 0.0
    with pytest.raises(ScenarioError, match="mtp_shared"):
        dataclasses.replace(TINY, mtp_layers=2, mtp_shared="yes")


def test_shared_passes_on_a_layout_save_one_module_of_state_and_no_time():
    """On an 8-layer model split over pp 2 the last stage holds 4 layers and two MTP passes: separate modules two
    more layers' weights, a shared one one. The last stage's weights differ by exactly one module's share of a rank
    (its layer, eh_proj and norms at tp 1, 2 bytes each in bf16); the step is the same work (the parameters' optimizer
    step aside)."""
    spec = dataclasses.replace(TINY, n_layers=8, seq_len=2048, d_model=1024, n_heads=8, d_ff=4096, vocab_size=32000)
    sep = _sim(dataclasses.replace(spec, mtp_layers=2), pp=2, tp=1)
    shared = _sim(dataclasses.replace(spec, mtp_layers=2, mtp_shared=True), pp=2, tp=1)
    one = _sim(dataclasses.replace(spec, mtp_layers=1), pp=2, tp=1)
    module = dataclasses.replace(spec, mtp_layers=1).mtp_params()
    w_sep, w_shared = sep.memory_breakdown_bytes["weights"], shared.memory_breakdown_bytes["weights"]
    assert w_sep - w_shared == pytest.approx(2.0 * module, rel=1e-9)  # bf16 weights
    assert (sep.memory_breakdown_bytes["gradients"] - shared.memory_breakdown_bytes["gradients"]
            == pytest.approx(4.0 * module, rel=1e-9))  # fp32 main gradients
    assert w_shared == pytest.approx(one.memory_breakdown_bytes["weights"], rel=1e-12)
    assert sep.memory_per_gpu_bytes > shared.memory_per_gpu_bytes > one.memory_per_gpu_bytes
    assert shared.step_s == pytest.approx(sep.step_s, rel=0.01)
    assert shared.mfu_frac == pytest.approx(sep.mfu_frac, rel=0.01)


def test_shared_cli_and_api_twins(capsys):
    argv = ["predict", "--model", "llama3-8b", "--gpu", "h100-sxm", "--gpus", "8", "--pp", "2", "--micro-batch", "1",
            "--global-batch", "64", "--mtp-layers", "2", "--json"]
    assert main([*argv, "--mtp-shared"]) == 0
    cli = json.loads(capsys.readouterr().out)
    assert main(argv) == 0
    sep = json.loads(capsys.readouterr().out)
    assert cli["memory_per_gpu_bytes"] < sep["memory_per_gpu_bytes"]
    res = api.predict(model="llama3-8b", gpu="h100-sxm", gpus=8, pp=2, micro_batch=1, global_batch=64, mtp_layers=2,
                      mtp_shared=True)
    assert res.memory_per_gpu_bytes == pytest.approx(cli["memory_per_gpu_bytes"], rel=1e-12)
    assert res.step_s == pytest.approx(cli["step_s"], rel=1e-12)


def test_config_and_recipe_read_the_shared_module(tmp_path, capsys):
    cfg = json.loads((CONFIGS / "deepseek-v3.json").read_text())
    cfg["num_nextn_predict_layers"] = 2
    for key in ("mtp_use_repeated_layer", "mtp_share_layers"):
        p = tmp_path / f"{key}.json"
        p.write_text(json.dumps({**cfg, key: True}))
        spec = get_workload(str(p)).transformer
        assert spec.mtp_layers == 2 and spec.mtp_shared
        assert main(["models", "show", str(p)]) == 0
        assert "2 multi-token prediction pass(es) through one shared module" in capsys.readouterr().out
        p.write_text(json.dumps({**cfg, key: "sometimes"}))
        with pytest.raises(ScenarioError, match=key):
            get_workload(str(p))
    r = tmp_path / "recipe.yaml"
    r.write_text("num_layers: 4\nhidden_size: 256\nnum_attention_heads: 4\nvocab_size: 1000\nseq_length: 128\n"
                 "mtp_num_layers: 2\nmtp_use_repeated_layer: true\n")
    spec = get_workload(str(r)).transformer
    assert spec.mtp_layers == 2 and spec.mtp_shared


def test_runs_notes_option_mtp_use_repeated_layer(db, run_row):
    """Nemotron 3 Super's recipe trains two MTP passes through one module (``mtp_use_repeated_layer=1``): its rows
    hold one module's state, not two."""
    from gpusim.validation_runs import predict_row

    row = run_row(model="tests/workload/configs/nemotron-3-super-120b-a12b.json", gpu="gb200", gpus=64,
                  gpus_per_node=72, ep=64, global_batch=512, seq_len=8192, precision="bf16",
                  notes="strategy=zero1; mtp_num_layers=2")
    sep = predict_row(row, db=db)
    shared = predict_row(dict(row, notes="strategy=zero1; mtp_num_layers=2; mtp_use_repeated_layer=1"), db=db)
    assert not sep.error and not shared.error
    assert shared.step_s <= sep.step_s
    assert "not 0 or 1" in predict_row(dict(row, notes="mtp_use_repeated_layer=2"), db=db).error


def test_no_mtp_shared_gives_each_pass_its_module_cli_and_api(tmp_path, capsys):
    """A config whose passes share one module (mtp_use_repeated_layer) trains them with their own weights under
    --no-mtp-shared, and the Python API's mtp_shared=False is that flag."""
    cfg = json.loads((CONFIGS / "deepseek-v3.json").read_text())
    p = tmp_path / "shared.json"
    p.write_text(json.dumps({**cfg, "num_nextn_predict_layers": 2, "mtp_use_repeated_layer": True}))
    # (one stage: the modules' weights are on the stage that sets the memory per GPU)
    argv = ["predict", "--model", str(p), "--gpu", "h100-sxm", "--gpus", "256", "--nodes", "32", "--ep", "64",
            "--micro-batch", "1", "--global-batch", "512", "--seq-len", "4096", "--json"]
    out = {}
    for flag in ("", "--no-mtp-shared", "--mtp-shared"):
        assert main([*argv, *([flag] if flag else [])]) == 0
        out[flag] = json.loads(capsys.readouterr().out)["memory_per_gpu_bytes"]
    assert out[""] == out["--mtp-shared"] < out["--no-mtp-shared"]
    kw = dict(model=str(p), gpu="h100-sxm", gpus=256, nodes=32, ep=64, micro_batch=1, global_batch=512, seq_len=4096)
    assert api.predict(**kw, mtp_shared=False).memory_per_gpu_bytes == pytest.approx(out["--no-mtp-shared"], rel=1e-12)
    assert api.predict(**kw).memory_per_gpu_bytes == pytest.approx(out[""], rel=1e-12)
