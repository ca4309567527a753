"""[issue 17] Hybrid Mamba-Transformer models: Nemotron-H (``nemotron_h``) and Jamba (``jamba``) configs, parameters
by hand against the published totals, a Mamba layer's FLOPs on a hand-worked case, the tensor-parallel split, memory,
and bad configs.

Sources of the test configs (tests/workload/configs/README-hybrid.md): ``nvidia/Nemotron-H-8B-Base-8K`` and
``ai21labs/Jamba-v0.1`` config.json on Hugging Face. Published sizes: Nemotron-H-8B about 8B parameters (Nemotron-H
report, arXiv 2504.03624); Jamba 52B total / 12B active (Lieber et al., arXiv 2403.19887, Table 1).
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from gpusim.errors import ScenarioError
from gpusim.workload import from_config
from gpusim.workload import ssm
from gpusim.workload.flops import flops_per_token
from gpusim.workload.from_config import spec_from_config

CONFIGS = Path(__file__).parent / "configs"
NEMOTRON_H = CONFIGS / "nemotron-h-8b.json"
JAMBA = CONFIGS / "jamba-v0.1.json"


def test_nemotron_h_8b_parameters_by_hand():
    w = from_config(NEMOTRON_H)
    h, d, G, N, nh, K, V, f = 4096, 8192, 8, 128, 128, 4, 131072, 21504
    mamba = h * (2 * d + 2 * G * N + nh) + (d + 2 * G * N) * (K + 1) + 3 * nh + d + d * h  # in, conv, A/D/dt, norm, out
    attn = 2 * h * 4096 + 2 * h * 1024                                                     # q, o; k, v (8 KV heads)
    mlp = 2 * h * f                                                                        # squared ReLU, not gated
    norms = 52 * h + h
    total = 24 * mamba + 4 * attn + 24 * mlp + norms + 2 * V * h                           # untied embedding and head
    assert w.params == total
    assert 7.9e9 < w.params < 8.3e9                                                        # "8B"
    spec = w.transformer
    assert (spec.n_mamba_layers, spec.n_attn_layers, spec.n_ffn_layers) == (24, 4, 24)


def test_jamba_parameters_by_hand():
    w = from_config(JAMBA)
    h, d, N, K, R, V, f, E = 4096, 8192, 16, 4, 256, 65536, 14336, 16
    mamba = (h * 2 * d + d * K + d + d * (R + 2 * N) + R * d + d + d * N + d + d * h
             + R + 2 * N)                                                  # + Jamba's dt/B/C RMSNorms
    attn = 2 * h * 4096 + 2 * h * 1024
    expert = 3 * h * f                                                     # SwiGLU
    moe = E * expert + h * E                                               # experts + router
    common = 28 * mamba + 4 * attn + 16 * expert + 32 * 2 * h + h + 2 * V * h
    assert w.params == common + 16 * moe
    assert w.active_params == common + 16 * (2 * expert + h * E)
    assert 51e9 < w.params < 53e9 and 11.5e9 < w.active_params < 12.5e9   # "52B total, 12B active"


def test_mamba1_flops_per_token_hand_worked():
    # h 4, d 8, N 2, K 3, R 1: projections 2 (2*8*4 + 8*5 + 1*8 + 8*4) = 288, conv 2*3*8 = 48, scan 9*8*2 + 8 = 152
    assert float(ssm.mamba1_fwd_flop_per_token(4, 2, 2, 3, 1)) == 288 + 48 + 152


def test_model_flops_count_the_mamba_layers():
    spec, *_ = spec_from_config(NEMOTRON_H)
    c = flops_per_token(spec, 4096)
    w = from_config(NEMOTRON_H, seq_len=4096)
    # gpusim's MFU convention is 3x its forward count; the Mamba layers' share is in both
    assert c["six_n_attention_flop_per_token"] == pytest.approx(3 * w.fwd_flop_per_sample / 4096, rel=1e-3)
    no_mamba = dataclasses.replace(spec, mixers=spec.mixers.replace("M", "-"))
    assert c["six_n_flop_per_token"] - flops_per_token(no_mamba, 4096)["six_n_flop_per_token"] == pytest.approx(
        6 * 24 * (spec.mamba_params() - 3 * 128 - 8192 - 10240 * 5), rel=1e-9)  # 6 x the projections' weights


def _predict(cfg, **kw):
    from gpusim.simulation import Scenario, simulate
    base = dict(model=str(cfg), gpu="h100-sxm", gpus=16, nodes=2, seq_len=4096, tp=2, pp=2, micro_batch=1,
                global_batch=64, precision="bf16", kind="zero1")
    return simulate(Scenario(**(base | kw)))


def test_hybrid_predicts_and_mfu_counts_mamba():
    r = _predict(NEMOTRON_H).to_dict()
    w = from_config(NEMOTRON_H, seq_len=4096)
    assert np.isfinite(r["step_s"]) and r["step_s"] > 0
    # model FLOPs per GPU = tokens/s/GPU x 3 x the forward FLOPs per token (the Mamba layers' included)
    assert r["model_tflop_per_s_per_gpu"] * 1e12 == pytest.approx(
        r["tokens_per_s_per_gpu"] * 3 * w.fwd_flop_per_sample / 4096, rel=0.02)


def test_tp_split_of_the_mamba_mixer():
    from gpusim.model.hybrid import mamba_layer_terms
    from gpusim.params import DEFAULT_PARAMS
    spec, *_ = spec_from_config(NEMOTRON_H)
    x = {"d_model": 4096.0, "mamba_version": 2.0, "mamba_d_inner": 8192.0, "mamba_state": 128.0,
         "mamba_heads": 128.0, "mamba_groups": 8.0, "mamba_conv": 4.0, "mamba_chunk": 128.0, "mamba_dt_rank": 0.0,
         "mamba_flop_per_token": spec.mamba_fwd_flop_per_token()}

    def terms(tp, rep):
        return mamba_layer_terms(x, DEFAULT_PARAMS, gemm=lambda m, n, k: 2.0 * m * n * k / 1e15, T=4096.0, tp=tp,
                                 e=2.0, mem_rate=3e12, ceil_rate=7e14, rep=rep)
    one, two = terms(1.0, 1.0), terms(2.0, 0.5)  # tp 2 with sequence parallelism
    assert two["keep_bytes"] == pytest.approx(one["keep_bytes"] / 2)
    assert two["f_s"] < one["f_s"]
    # hand-worked kept bytes at tp 1: norm + in_proj input 2 T h, in_proj out W, conv out, y/gate/out_proj in 3 d,
    # 16-bit (the fused scan recomputes its chunk states in the backward pass: none kept)
    T, h, d, W, C = 4096, 4096, 8192, 2 * 8192 + 2 * 8 * 128 + 128, 8192 + 2048
    assert one["keep_bytes"] == 2 * T * (2 * h + W + C + 3 * d)


def test_tp_that_does_not_split_the_mamba_heads_is_refused():
    with pytest.raises(ScenarioError, match=r"Mamba mixer's 128 heads and 8 groups.*--tp"):
        _predict(NEMOTRON_H, tp=16, gpus=32, nodes=4, pp=1, force_tp=True)
    with pytest.raises(ScenarioError, match=r"--cp 1"):
        _predict(NEMOTRON_H, cp=2)


def test_memory_grows_with_the_mamba_layers():
    spec, *_ = spec_from_config(NEMOTRON_H)
    w = from_config(NEMOTRON_H, seq_len=4096)
    fewer = dataclasses.replace(spec, mixers=spec.mixers.replace("M", "-", 12))
    from gpusim.workload.transformer import EntryInfo, build_transformer
    w2 = build_transformer(EntryInfo(id="x", name="x", family="decoder-lm", sources=()), fewer, 4096)
    assert w2.act_bytes_per_sample < w.act_bytes_per_sample
    r = _predict(NEMOTRON_H).to_dict()
    assert r["memory_per_gpu_bytes"] > 2 * w.params / 4  # at least the 16-bit weights of one of 4 model-parallel ranks


def test_search_excludes_layouts_the_mamba_mixer_cannot_take():
    from gpusim.search import search_layouts
    from gpusim.simulation import Scenario
    scn = Scenario(model=str(NEMOTRON_H), gpu="h100-sxm", gpus=16, nodes=2, seq_len=4096, precision="bf16",
                   kind="zero1")
    res = search_layouts(scn, global_batch=64)
    lay, ok = res["layouts"], np.asarray(res["feasible"], dtype=bool)
    assert ok.any()
    assert np.all(128 % lay["tp"][ok] == 0) and np.all(8 % lay["tp"][ok] == 0) and np.all(lay["cp"][ok] == 1)
    from gpusim.rules import R_MAMBA
    assert np.any(res["reason_code"] == R_MAMBA)


@pytest.mark.parametrize("field,value,message", [
    ("hybrid_override_pattern", "M-M*", r"hybrid_override_pattern.*num_hidden_layers=52"),
    ("hybrid_override_pattern", "X" * 52, r"other letters: X"),
])
def test_bad_nemotron_h_config_exits_2_with_the_fix(tmp_path, field, value, message):
    raw = json.loads(NEMOTRON_H.read_text()) | {field: value}
    p = tmp_path / "config.json"
    p.write_text(json.dumps(raw))
    with pytest.raises(ScenarioError, match=message):
        from_config(p)
    r = subprocess.run([sys.executable, "-m", "gpusim", "models", "show", str(p)], capture_output=True, text=True)
    assert r.returncode == 2 and "Traceback" not in r.stderr and "hybrid_override_pattern" in r.stderr


NANO = CONFIGS / "nemotron-3-nano-30b-a3b.json"


def test_nemotron_3_nano_moe_blocks_at_the_published_size():
    """'E' blocks (Nemotron 3 Nano): 23 Mamba-2, 23 MoE, 6 attention of 52; 31.6B total and 3.6B active parameters
    with the embeddings, as published (configs/README-hybrid.md)."""
    w = from_config(NANO)
    s = w.transformer
    assert (s.n_mamba_layers, s.n_moe_layers, s.n_attn_layers, s.n_ffn_layers) == (23, 23, 6, 23)
    assert (s.n_experts, s.top_k, s.expert_d_ff, s.n_shared_experts, s.shared_expert_d_ff) == (128, 6, 1856, 1, 3712)
    assert not s.dense_layers and s.router_bias
    assert w.params == pytest.approx(31.6e9, rel=0.01)
    assert w.active_params == pytest.approx(3.6e9, rel=0.03)


def test_nemotron_3_nano_predicts_with_expert_parallelism():
    r = subprocess.run([sys.executable, "-m", "gpusim", "predict", "--model", str(NANO), "--gpu", "h100-sxm",
                        "--gpus", "8", "--ep", "8", "--strategy", "zero1", "--global-batch", "64",
                        "--per-gpu-batch", "1", "--json"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["breakdown_s"]["ep_comm_exposed_s"] > 0 and d["step_s"] > 0


def test_bad_jamba_config_names_the_field(tmp_path):
    raw = json.loads(JAMBA.read_text()) | {"attn_layer_offset": 8}
    p = tmp_path / "config.json"
    p.write_text(json.dumps(raw))
    with pytest.raises(ScenarioError, match=r"attn_layer_offset.*smaller than its period 8"):
        from_config(p)


def test_the_hybrid_path_with_attention_and_an_ffn_everywhere_is_the_dense_model():
    """The average-layer path (gpusim.model.hybrid) at shares 1, 1, 0 reproduces the dense path term by term."""
    from gpusim.model.llm import llm_rows_terms
    from gpusim.model.step import HYBRID_FIELDS, _llm_inputs
    from gpusim.params import DEFAULT_PARAMS
    from gpusim.rows import build_inputs, stack_rows
    from gpusim.simulation import Scenario
    scn = Scenario(model="llama3-8b", gpu="h100-sxm", gpus=16, nodes=2, seq_len=4096, tp=2, pp=2, micro_batch=1,
                   global_batch=64, precision="bf16", kind="zero1", recompute="selective")
    _, _, row = build_inputs(scn)
    inp = stack_rows([row])
    x = _llm_inputs(inp, np.asarray(inp.gpus_per_node, dtype=np.float64), DEFAULT_PARAMS)
    assert "mamba_frac" not in x  # a dense row never enters the hybrid path
    dense = llm_rows_terms(x, DEFAULT_PARAMS)
    hyb = llm_rows_terms(x | {k: getattr(inp, k) for k in HYBRID_FIELDS}, DEFAULT_PARAMS)
    for k, v in dense.items():
        np.testing.assert_allclose(hyb[k], v, rtol=1e-12, err_msg=k)


def test_nemotron_h_56b_layer_counts_and_size_as_published():
    """NVIDIA's Nemotron-H blog: 54 Mamba-2, 54 MLP and 10 self-attention layers, 56B parameters."""
    w = from_config(CONFIGS / "nemotron-h-56b.json")
    spec = w.transformer
    assert (spec.n_mamba_layers, spec.n_ffn_layers, spec.n_attn_layers) == (54, 54, 10)
    assert 55.5e9 < w.params < 57e9
