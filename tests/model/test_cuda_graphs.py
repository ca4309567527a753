"""[issue 17] CUDA graphs (Megatron-Core --cuda-graph-scope): which CPU launches each scope replaces, hand-worked
against Transformer Engine's module costs; a launch-bound layout gains and a GPU-bound one does not; the MoE scopes
that need static shapes drop the dispatcher's host sync; bad scope sets are clear errors; the CLI and the API agree."""

from __future__ import annotations

import json

import numpy as np
import pytest

import gpusim
from gpusim.cli import main
from gpusim.errors import GpusimError
from gpusim.model import experts as EXP
from gpusim.model import graphs as GR
from gpusim.simulation import Scenario, simulate
from gpusim.strategy import Strategy

# GPT-3 125M at one 2048-token sequence per micro-batch on GB200 (a Grace host): short kernels, slow launches
SMALL = dict(model="gpt3-125m", gpu="gb200", gpus=8, nodes=2, seq_len=2048, per_gpu_batch=1, global_batch=128,
             precision="bf16", kind="zero1", recompute="none")
# Llama 3 70B at tp 4 pp 4 on H100: long GEMMs, the GPU sets the pace
BIG = dict(model="llama3-70b", gpu="h100-sxm", gpus=64, nodes=8, tp=4, pp=4, seq_len=4096, per_gpu_batch=1,
           global_batch=256, precision="bf16", kind="zero1")
MOE = dict(model="qwen3-30b-a3b", gpu="gb200", gpus=8, nodes=2, seq_len=4096, ep=8, per_gpu_batch=1, global_batch=256,
           precision="bf16", kind="zero1")


def test_attention_share_of_a_layers_launches_hand_worked():
    # TE PR #3523 (us): LayerNormLinear 83.48 / 397.73, Linear 59.19 / 311.30 (forward / forward + backward); a layer
    # is 2 LayerNormLinear + 3 Linear-like modules, its attention part one LayerNormLinear and two Linear-like ones
    fwd, fb = 2 * 83.48 + 3 * 59.19, 2 * 397.73 + 3 * 311.30
    assert GR.ATTN_CPU_SHARE_FWD == pytest.approx((83.48 + 2 * 59.19) / fwd)
    assert GR.ATTN_CPU_SHARE_BWD == pytest.approx(((397.73 + 2 * 311.30) - (83.48 + 2 * 59.19)) / (fb - fwd))
    assert GR.ATTN_CPU_SHARE_FWD == pytest.approx(0.586, abs=1e-3)
    assert GR.ATTN_CPU_SHARE_BWD == pytest.approx(0.591, abs=1e-3)


def test_dense_scopes_keep_the_uncaptured_share_and_add_one_replay_each():
    a_f, a_b = GR.ATTN_CPU_SHARE_FWD, GR.ATTN_CPU_SHARE_BWD
    masks = np.array([0.0, GR.scope_mask(["attn"]), GR.scope_mask(["attn", "mlp"]), GR.scope_mask(["full_iteration"]),
                      GR.scope_mask(["attn", "moe"])])
    moe_frac = np.array([0.0, 0.0, 0.0, 0.0, 0.5])
    keep_f, keep_b, replays = GR.dense_cpu_keep(masks, moe_frac)
    # eager; attention only; the whole layer (2 replays); the whole iteration (no per-layer launch at all); and an MoE
    # model with half its layers MoE: attention everywhere, the MLP part only in the MoE layers (moe scope)
    assert keep_f.tolist() == pytest.approx([1.0, 1 - a_f, 0.0, 0.0, 1 - a_f - 0.5 * (1 - a_f)])
    assert keep_b.tolist() == pytest.approx([1.0, 1 - a_b, 0.0, 0.0, 1 - a_b - 0.5 * (1 - a_b)])
    assert replays.tolist() == pytest.approx([0.0, 1.0, 2.0, 0.0, 1.5])


def test_moe_scopes_capture_the_router_and_preprocessing_ops():
    # 16 local experts, bf16: 2 GEMMs each forward, 4 backward; 33 fixed operations forward (22 of them before the host
    # sync), 21 backward (stop 51's count from Megatron-Core 0.15.3 / Transformer Engine 2.10.0)
    masks = np.array([0.0, GR.scope_mask(["moe_router"]), GR.scope_mask(["moe_router", "moe_preprocess"]),
                      GR.scope_mask(["moe"]), GR.scope_mask(["full_iteration"])])
    f, b, pre = GR.moe_cpu_ops(33.0, 21.0, 32.0, 64.0, 22.0, masks)
    # router: 7 ops forward (12 backward) -> 1 replay; router + preprocessing: 7 + 11 forward (12 + 1 backward) -> 1
    # replay; the four device-to-host copies stay eager before the sync; moe: one replay per pass; full iteration:
    # nothing per layer
    assert f.tolist() == [65.0, 59.0, 48.0, 1.0, 0.0]
    assert b.tolist() == [85.0, 74.0, 73.0, 1.0, 0.0]
    assert pre.tolist() == [22.0, 16.0, 5.0, 0.0, 0.0]
    assert GR.sync_free(masks).tolist() == [False, False, False, True, True]
    # the seconds: moe_cpu_s at 8 us per operation, with the model's own constants
    assert (EXP.MOE_FIXED_FWD_KERNELS, EXP.MOE_FIXED_BWD_KERNELS, EXP.MOE_PRESYNC_FWD_KERNELS) == (33.0, 21.0, 22.0)
    sf, sb, spre = EXP.moe_cpu_s(np.array([16.0]), np.array([0]), 8e-6, np.array([GR.scope_mask(["moe_router",
                                                                                               "moe_preprocess"])]))
    assert (sf[0], sb[0], spre[0]) == pytest.approx((48 * 8e-6, 73 * 8e-6, 5 * 8e-6))


def test_a_launch_bound_layout_gains_and_reports_the_cpu_as_its_bottleneck(db):
    eager = simulate(Scenario.create(**SMALL), db=db, recommend=False)
    attn = simulate(Scenario.create(**SMALL, cuda_graph_scope=["attn"]), db=db, recommend=False)
    layer = simulate(Scenario.create(**SMALL, cuda_graph_scope=["attn", "mlp"]), db=db, recommend=False)
    full = simulate(Scenario.create(**SMALL, cuda_graph_scope=["full_iteration"]), db=db, recommend=False)
    assert eager.bottleneck == "cpu-dispatch"
    assert full.step_s < attn.step_s < eager.step_s
    assert layer.step_s <= attn.step_s
    assert full.bottleneck == "compute"
    assert full.step_s < 0.7 * eager.step_s  # the Grace host's launches take most of an eager layer


def test_a_gpu_bound_layout_does_not_change(db):
    eager = simulate(Scenario.create(**BIG), db=db, recommend=False)
    full = simulate(Scenario.create(**BIG, cuda_graph_scope=["full_iteration"]), db=db, recommend=False)
    attn = simulate(Scenario.create(**BIG, cuda_graph_scope=["attn", "mlp"]), db=db, recommend=False)
    assert eager.bottleneck != "cpu-dispatch"
    assert full.step_s == pytest.approx(eager.step_s, rel=1e-12)
    assert attn.step_s == pytest.approx(eager.step_s, rel=1e-12)


def test_static_moe_graphs_drop_the_host_sync_and_partial_ones_keep_it(db):
    eager = simulate(Scenario.create(**MOE), db=db, recommend=False)
    partial = simulate(Scenario.create(**MOE, cuda_graph_scope=["attn", "moe_router", "moe_preprocess"]), db=db,
                       recommend=False)
    whole = simulate(Scenario.create(**MOE, cuda_graph_scope=["attn", "moe"]), db=db, recommend=False)
    assert whole.step_s <= partial.step_s <= eager.step_s
    assert whole.step_s < eager.step_s


@pytest.mark.parametrize("scopes, words", [
    (["full_iteration", "attn"], "takes no other scope"),
    (["moe_preprocess"], "together with moe_router"),
    (["moe", "moe_router"], "not both"),
])
def test_megatron_scope_rules_are_clear_errors(scopes, words):
    with pytest.raises(ValueError, match=words):
        Strategy(cuda_graph_scope=scopes)


def test_moe_scopes_on_a_dense_model_and_scopes_on_a_cnn_are_clear_errors(db):
    with pytest.raises(GpusimError, match="has none"):
        simulate(Scenario.create(**BIG, cuda_graph_scope=["moe_router"]), db=db)
    with pytest.raises(GpusimError, match="not a transformer"):
        simulate(Scenario.create(model="resnet50", gpu="h100-sxm", gpus=8, per_gpu_batch=64,
                                 cuda_graph_scope=["attn"]), db=db)


def test_cli_flag_exit_codes_and_the_api_twin(capsys):
    flags = ["--model", "gpt3-125m", "--gpu", "gb200", "--gpus", "8", "--nodes", "2", "--seq-len", "2048",
             "--micro-batch", "1", "--global-batch", "128", "--precision", "bf16", "--strategy", "zero1",
             "--recompute", "none", "--cuda-graph-scope", "attn", "mlp"]
    assert main(["predict", *flags, "--json"]) == 0
    cli = json.loads(capsys.readouterr().out)
    api = gpusim.predict(model="gpt3-125m", gpu="gb200", gpus=8, nodes=2, seq_len=2048, micro_batch=1,
                         global_batch=128, precision="bf16", strategy="zero1", recompute="none",
                         cuda_graph_scope=["attn", "mlp"]).to_dict()
    assert api["step_s"] == cli["step_s"]
    assert cli["scenario"]["strategy"]["cuda_graph_scope"] == ["attn", "mlp"]
    assert any("CUDA graphs over attn mlp" in a for a in cli["assumptions"])
    assert main(["predict", *flags[:-2], "moe_preprocess"]) == 2
    assert "together with moe_router" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:  # argparse refuses a scope it does not know, before gpusim runs
        main(["predict", *flags[:-2], "nonsense"])
    assert e.value.code == 2 and "invalid choice: 'nonsense'" in capsys.readouterr().err


def test_the_recommendation_names_graphs_only_where_they_gain(db):
    small = simulate(Scenario.create(**SMALL), db=db)
    big = simulate(Scenario.create(**BIG), db=db)
    ids = lambda res: {r["id"] for r in res.recommendations}  # noqa: E731
    assert "llm-cuda-graphs" in ids(small)
    assert "llm-cuda-graphs" not in ids(big)
    rec = next(r for r in small.recommendations if r["id"] == "llm-cuda-graphs")
    full = simulate(Scenario.create(**SMALL, cuda_graph_scope=["full_iteration"]), db=db, recommend=False)
    assert rec["gain_frac"] == pytest.approx(small.step_s / full.step_s - 1.0, abs=1e-4)
    assert rec["addresses"] == "cpu-dispatch" and rec["change"] == {"cuda_graph_scope": ["full_iteration"]}


def test_scoped_graphs_gain_nothing_where_the_all_to_all_sets_the_pace(db):
    # Megatron-Bridge skills/mbridge-perf-cuda-graphs/SKILL.md (pitfall 13, 2026-05-18): Qwen3 30B A3B pretraining on
    # 16 H100 in BF16 with the all-to-all dispatcher, TE-scoped graphs over attn, moe_router and moe_preprocess:
    # 42.00 s per step replayed against 41.36 s eager (+1.5%). The recipe's layout as its verification card states it
    # (validation/runs_moe.csv mbcard-h100-q30-bf16): tp 1, pp 1, ep 16, micro-batch 1, global batch 1024, 4096 tokens.
    base = dict(model="qwen3-30b-a3b", gpu="h100-sxm", gpus=16, nodes=2, tp=1, pp=1, ep=16, seq_len=4096,
                per_gpu_batch=1, global_batch=1024, precision="bf16", kind="zero1", grad_dtype="bf16")
    eager = simulate(Scenario.create(**base), db=db, recommend=False)
    scoped = simulate(Scenario.create(**base, cuda_graph_scope=["attn", "moe_router", "moe_preprocess"]), db=db,
                      recommend=False)
    change = scoped.step_s / eager.step_s - 1.0
    assert abs(change) < 0.03, change  # measured +1.5%: within 3 points of no change, as replay was
    assert eager.bottleneck == "ep-communication"


def test_full_iteration_graphs_warn_where_the_guides_growth_would_not_fit(db):
    """Megatron-Bridge's CUDA-graph guide: full-iteration graphs can raise the peak 1.5-2x. gpusim does not model the
    graphs' memory; it says so, and where 1.5x its modelled peak exceeds the GPU it warns that the layout may not fit:
    Llama 3 8B at tp 1 on H100 (68 GiB of 80) is warned, at tp 2 (40 GiB) it is not."""
    base = dict(model="llama3-8b", gpu="h100-sxm", gpus=8, pp=1, per_gpu_batch=1, global_batch=64, seq_len=2048,
                precision="bf16", kind="zero1", recompute="selective", cuda_graph_scope=["full_iteration"])
    warned = lambda res: [a for a in res.assumptions if "may not fit with them" in a]  # noqa: E731
    big = simulate(Scenario.create(**base, tp=1), db=db, recommend=False)
    small = simulate(Scenario.create(**base, tp=2), db=db, recommend=False)
    assert big.fits_in_memory and 1.5 * big.memory_per_gpu_bytes > big.memory_capacity_bytes and warned(big)
    assert small.fits_in_memory and not warned(small)
    eager = simulate(Scenario.create(**{**base, "cuda_graph_scope": []}, tp=1), db=db, recommend=False)
    assert not warned(eager)


def test_the_model_knows_every_scope_the_strategy_accepts():
    # one list of names: Strategy's CudaGraphScope (the CLI's choices, the notes' parser) and the model's bits
    import typing

    from gpusim.strategy import CudaGraphScope

    assert set(GR.SCOPE_BITS) == set(typing.get_args(CudaGraphScope))
    assert len(set(GR.SCOPE_BITS.values())) == len(GR.SCOPE_BITS)  # one bit each
