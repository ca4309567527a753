"""Llama 4 configs (``model_type`` ``llama4`` / ``llama4_text``): interleaved dense and MoE layers, the shared
expert, chunked attention; parameters by hand from the published config, and the scenario predicts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpusim.errors import ScenarioError
from gpusim.workload import flops_per_token, from_config

CONFIGS = Path(__file__).parent / "configs"
SCOUT, MAVERICK = CONFIGS / "llama4-scout-17b-16e.json", CONFIGS / "llama4-maverick-17b-128e.json"


def _by_hand(n_experts: int, moe_layers: int, L=48, h=5120, q=40 * 128, kv=8 * 128, fe=8192, fd=16384, V=202048):
    """Text-model parameters from the config by hand: embeddings and head untied, attention q/k/v/o, per MoE layer
    router h E + E routed SwiGLU experts + one shared, per dense layer one SwiGLU of ``intermediate_size_mlp``,
    two RMSNorm weights per layer + the final one (Llama 4's q/k L2 norm has no weight)."""
    attn = h * q * 2 + h * kv * 2
    moe = h * n_experts + n_experts * 3 * h * fe + 3 * h * fe
    dense = 3 * h * fd
    return 2 * V * h + L * attn + moe_layers * moe + (L - moe_layers) * dense + (2 * L + 1) * h


def test_scout_parameters_by_hand_and_published():
    w = from_config(SCOUT)
    assert w.params == pytest.approx(_by_hand(16, 48), rel=1e-12)
    # Meta's model card: 17B active, 109B total (the total includes the ~0.7B vision encoder left out here)
    assert w.active_params == pytest.approx(17e9, rel=0.02)
    assert w.params == pytest.approx(109e9, rel=0.015)


def test_maverick_interleaves_dense_and_moe_layers():
    w = from_config(MAVERICK)
    t = w.transformer
    assert t.dense_layers == tuple(range(0, 48, 2))  # interleave_moe_layer_step 2: layers 1, 3, ... are MoE
    assert t.d_ff == 16384 and t.expert_d_ff == 8192 and t.n_shared_experts == 1
    assert w.params == pytest.approx(_by_hand(128, 24), rel=1e-12)
    assert w.params == pytest.approx(400e9, rel=0.01)  # Meta's model card: 400B total, 17B active
    assert w.active_params == pytest.approx(17e9, rel=0.02)


def test_chunked_attention_on_the_rope_layers_only():
    t = from_config(SCOUT).transformer
    assert t.attention_window == 8192
    assert t.window_layers == tuple(i for i in range(48) if (i + 1) % 4)  # no_rope_layers: every 4th is global
    # attention FLOPs per token (6N + attention convention): 3 x 2 (q_dim + v_dim) x keys, summed over the layers;
    # at 32k tokens the 36 chunked layers see 8192 keys and the 12 global ones 32768
    q_v = 40 * 128 + 40 * 128
    f = flops_per_token(t, 32768)
    assert f["six_n_attention_part_flop_per_token"] == pytest.approx(3 * 2 * q_v * (12 * 32768 + 36 * 8192), rel=1e-12)
    # within one chunk the chunked layers cost what global attention does
    assert flops_per_token(t, 8192)["six_n_attention_part_flop_per_token"] == pytest.approx(3 * 2 * q_v * 48 * 8192, rel=1e-12)


def test_flat_llama4_text_config_reads_the_same(tmp_path):
    raw = json.loads(SCOUT.read_text())
    flat = tmp_path / "config.json"
    flat.write_text(json.dumps(raw["text_config"]))
    assert from_config(flat).params == from_config(SCOUT).params


def test_bad_moe_layers_names_the_field(tmp_path):
    raw = json.loads(SCOUT.read_text())
    raw["text_config"]["moe_layers"] = [3, 99]
    p = tmp_path / "config.json"
    p.write_text(json.dumps(raw))
    with pytest.raises(ScenarioError, match="moe_layers"):
        from_config(p)


def test_scout_predicts_with_expert_parallelism():
    from gpusim.simulation import Scenario, simulate

    scn = Scenario.create(workload=from_config(SCOUT, seq_len=8192), node="dgx-h100", gpus=64, nodes=8, kind="zero1",
                          precision="bf16", tp=2, pp=1, ep=16, micro_batch=1, global_batch=256, seq_len=8192,
                          recompute="full")
    res = simulate(scn, recommend=False)
    assert res.step_s > 0 and res.breakdown_s["ep_comm_exposed_s"] > 0
