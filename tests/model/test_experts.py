"""Expert parallelism: closed forms (tokens per expert, all-to-all volume per MoE layer), properties through the
model (more EP bandwidth never slower; ep = 1 on a dense model is the dense model), errors, and the CLI."""

from __future__ import annotations

import json

import numpy as np
import pytest

from gpusim.cli import main
from gpusim.errors import ScenarioError
from gpusim.model import experts as EXP
from gpusim.model.step import evaluate
from gpusim.params import DEFAULT_PARAMS
from gpusim.simulation import Scenario, build_inputs, simulate, stack_rows

DSV3 = dict(model="deepseek-v3", seq_len=4096, gpu="h100-sxm", gpus=256, nodes=32, kind="zero1", global_batch=512,
            per_gpu_batch=1, tp=1, pp=16, recompute="full", uneven_pp=True)


def test_tokens_per_expert_closed_form():
    # DeepSeek-V3: 256 routed experts, top-8. One rank routes 4096 tokens; with ep 8 each of its 32 experts gets
    # 4096 x 8 ranks x 8 / 256 = 1024 tokens, balanced
    assert float(EXP.tokens_per_expert(4096, 8, 256, ep=8)) == 1024.0
    # expert-TP 2 gathers the tokens of both ranks of the expert's TP group
    assert float(EXP.tokens_per_expert(4096, 8, 256, ep=8, etp=2)) == 2048.0
    # Mixtral 8x7B top-2 without EP: every expert sees a quarter of the tokens
    assert float(EXP.tokens_per_expert(4096, 2, 8)) == 1024.0


def test_all_to_all_volume_per_moe_layer_closed_form():
    # one dispatch: tokens x top-k x hidden x bytes; DeepSeek-V3 h 7168, bf16, 4096 tokens, top-8
    assert float(EXP.a2a_bytes_per_layer(4096, 8, 7168, 2.0)) == 4096 * 8 * 7168 * 2


@pytest.mark.parametrize("ep, domain, gpus, g, want", [
    (8, 8, 256, 8, (1, 400e9)),  # inside one DGX H100: one "node" of the collectives model
    (16, 8, 256, 8, (2, 400e9)),  # two DGX H100: two nodes, each rank with 1/8 of its node's NICs
    (64, 72, 256, 4, (1, 64 * 100e9)),  # NVL72 trays of 4, 256 GPUs: placed in segments, each group in one rack
    (64, 72, 64, 4, (1, 64 * 100e9)),  # the whole job inside one rack: NVLink only
])
def test_the_ep_group_as_the_collectives_model_sees_it(ep, domain, gpus, g, want):
    nodes, inter = EXP.a2a_fabric(ep, 1, domain, gpus, g, 400e9)
    assert (float(nodes), float(inter)) == pytest.approx(want)


def test_all_to_all_is_the_collectives_models_bisection_bound_across_domains():
    from gpusim.model import comm as C

    # 64 EP ranks in 8 domains of 8: 7/64 of the buffer over NVLink, 56/64 over each rank's 50 GB/s NIC share
    nodes, inter = EXP.a2a_fabric(64, 1, 8, 512, 8, 400e9)
    t = C.collective_min_time_s(C.ALL_TO_ALL, 1e10, 64, nodes, 370e9, 0.5e-6, inter, 3e-6, False,
                                base_latency_s=0.0, nvls_gain_frac=1.0, nvls_latency_s=0.0, tree_busbw_frac=1.0)
    assert float(t) == pytest.approx(max(1e10 * 7 / 64 / 370e9, 1e10 * 56 / 64 / 50e9), rel=1e-3)


@pytest.mark.parametrize("ep", [8, 16])
def test_each_moe_layer_runs_six_all_to_alls_per_micro_batch_with_full_recomputation(ep):
    from gpusim.model import comm as C

    inp = _inputs(ep=ep)
    out = evaluate(inp, DEFAULT_PARAMS)
    x = {k: float(np.asarray(getattr(inp, k)).ravel()[0]) for k in
         ("intra_busbw_bytes_per_s", "inter_busbw_bytes_per_s", "intra_hop_s", "inter_hop_s", "gpus_per_node",
          "n_nodes", "moe_frac", "accum", "n_layers", "pp", "micro_batch", "seq_len", "top_k", "d_model",
          "n_experts")}
    nodes, inter = EXP.a2a_fabric(ep, 1, x["gpus_per_node"], x["gpus_per_node"] * x["n_nodes"], x["gpus_per_node"],
                                  x["inter_busbw_bytes_per_s"])
    tokens = x["micro_batch"] * x["seq_len"]  # tp 1, cp 1
    # bf16, the busiest rank's volume
    size = (EXP.a2a_bytes_per_layer(tokens, x["top_k"], x["d_model"], 2.0)
            * EXP.busiest_rank_load(tokens, x["top_k"], x["n_experts"], ep))
    one = C.collective_min_time_s(C.ALL_TO_ALL, size, ep, nodes, x["intra_busbw_bytes_per_s"], x["intra_hop_s"], inter,
                                  x["inter_hop_s"], bool(np.asarray(inp.nvls).ravel()[0]),
                                  base_latency_s=DEFAULT_PARAMS.coll_base_latency_s,
                                  nvls_gain_frac=DEFAULT_PARAMS.nvls_gain_frac,
                                  nvls_latency_s=DEFAULT_PARAMS.nvls_latency_s,
                                  tree_busbw_frac=DEFAULT_PARAMS.tree_busbw_frac,
                                  ll_max_busbw_bytes_per_s=float(np.asarray(inp.ll_max_busbw_bytes_per_s).ravel()[0]),
                                  tuning=C.tuning_from_params(DEFAULT_PARAMS))
    # dispatch + combine forward, both again for the recomputed forward and for the gradients
    want = x["accum"] * x["n_layers"] / x["pp"] * x["moe_frac"] * 6.0 * float(one)
    assert float(out["ep_comm_exposed_s"][0]) == pytest.approx(want, rel=1e-9)


def test_busiest_rank_load_hand_worked():
    # DeepSeek-V3 (256 experts, top-8), 4096 tokens per rank, ep 64: mu = 4096 x 8 = 32768 copies per rank,
    # spread sqrt(248 / (255 x 32768)) = 0.0054479, z_64 = 2.3437 (expected maximum of 64 standard normals, David &
    # Nagaraja's tables): 1 + 2.3437 x 0.0054479 = 1.012768
    assert float(EXP.busiest_rank_load(4096, 8, 256, ep=64)) == pytest.approx(1.012768, abs=5e-6)
    # one rank: nothing to wait for; every expert on every token: no spread
    assert float(EXP.busiest_rank_load(4096, 8, 256, ep=1)) == 1.0
    assert float(EXP.busiest_rank_load(4096, 8, 8, ep=8)) == 1.0
    # a user's figure overrides the mechanism
    assert float(EXP.busiest_rank_load(4096, 8, 256, ep=64, imbalance_frac=0.3)) == pytest.approx(1.3)


def test_forced_balance_matches_a_published_rank_load():
    """[issue 17] The sampling-spread mechanism against a measurement it was not set from: Megatron-Core with
    --moe-router-force-load-balancing on 64 GB200 (EP64, 256 experts, top-8, MBS 1 at seq 4096: 4096 tokens per rank)
    held the busiest EP rank at 1.013 of the mean on average over the layers (marin-community/marin issue #7668,
    2026-07-28, "average EP-rank overload near 1.013"); one is at ep 1."""
    assert float(EXP.busiest_rank_load(4096, 8, 256, ep=64)) == pytest.approx(1.013, abs=0.002)
    assert float(EXP.busiest_rank_load(4096, 8, 256, ep=1, imbalance_frac=0.5, skew_frac=0.3)) == 1.0


def test_expert_skew_weighs_more_at_a_larger_ep_hand_worked():
    """[issue 17] Experts' shares with coefficient of variation c on contiguous blocks of E / ep: the busiest rank is
    1 + z_ep sqrt(spread^2 + c^2 ep / (E - 1)). Hand-worked, E 256, top-8, 4096 tokens, c 0.181: spread^2 =
    248 / (255 x 32768) = 2.968e-5, skew^2 at ep 64 = 0.032761 x 64 / 255 = 8.222e-3, z_64 2.3437: 1 + 2.3437 x
    0.09084 = 1.2129 (the marin run's 1.212 after 18 steps, from which c was read); at ep 8, z_8 1.4236: 1 + 1.4236 x
    sqrt(2.968e-5 + 1.0278e-3) = 1.0463."""
    assert float(EXP.busiest_rank_load(4096, 8, 256, ep=64, skew_frac=0.181)) == pytest.approx(1.2129, abs=2e-4)
    assert float(EXP.busiest_rank_load(4096, 8, 256, ep=8, skew_frac=0.181)) == pytest.approx(1.0463, abs=2e-4)
    eps = np.array([2.0, 4, 8, 16, 32, 64])
    over = EXP.busiest_rank_load(4096, 8, 256, ep=eps, skew_frac=0.181) - 1.0
    assert np.all(np.diff(over) > 0)
    assert float(EXP.busiest_rank_load(4096, 8, 256, ep=64, skew_frac=0.0)) == float(
        EXP.busiest_rank_load(4096, 8, 256, ep=64))


def test_more_tokens_per_expert_bring_the_load_closer_to_balanced():
    loads = EXP.busiest_rank_load(np.array([64.0, 256, 1024, 4096, 16384]), 8, 256, ep=32)
    assert np.all(np.diff(loads) < 0) and np.all(loads > 1.0)
    # the spread falls as 1 / sqrt(tokens)
    assert (loads[0] - 1) / (loads[2] - 1) == pytest.approx(4.0)
    # more ranks to wait for: busier
    assert np.all(np.diff(EXP.busiest_rank_load(1024, 8, 256, ep=np.array([2.0, 8, 32, 128]))) > 0)


def test_capacity_factor_caps_the_load():
    # an imbalance above the capacity is dropped; below it the experts are padded to capacity
    assert float(EXP.busiest_rank_load(64, 8, 256, ep=64, capacity=1.0)) == 1.0
    assert float(EXP.busiest_rank_load(4096, 8, 256, ep=64, imbalance_frac=0.5, capacity=1.25)) == 1.25
    assert float(EXP.busiest_rank_load(4096, 8, 256, ep=64, capacity=1.25)) == 1.25
    assert float(EXP.busiest_rank_load(4096, 8, 256, ep=64)) < 1.25


def test_the_busiest_rank_paces_the_step():
    inp = _inputs(ep=16)
    sampled = evaluate(inp, DEFAULT_PARAMS)
    balanced = evaluate(inp.replace(moe_imbalance_frac=np.zeros(1)), DEFAULT_PARAMS)
    skewed = evaluate(inp.replace(moe_imbalance_frac=np.full(1, 0.5)), DEFAULT_PARAMS)
    for k in ("compute_s", "ep_comm_exposed_s", "step_s"):
        assert float(balanced[k][0]) < float(sampled[k][0]) < float(skewed[k][0])


def _inputs(**kw):
    return stack_rows([build_inputs(Scenario(**{**DSV3, **kw}))[2]])


@pytest.mark.parametrize("ep", [4, 8, 16])
def test_more_ep_bandwidth_is_never_slower(ep):
    inp = _inputs(ep=ep)
    prev = None
    for f in (0.25, 0.5, 1.0, 2.0, 4.0):
        out = evaluate(inp.replace(inter_busbw_bytes_per_s=np.asarray(inp.inter_busbw_bytes_per_s) * f,
                                   intra_busbw_bytes_per_s=np.asarray(inp.intra_busbw_bytes_per_s) * f),
                       DEFAULT_PARAMS)
        ep_s, step = float(out["ep_comm_exposed_s"][0]), float(out["step_s"][0])
        assert ep_s > 0
        if prev is not None:
            assert ep_s <= prev[0] + 1e-15 and step <= prev[1] + 1e-12
        prev = (ep_s, step)


def test_ep_splits_the_experts_weights_and_optimizer_states():
    r8 = simulate(Scenario(**{**DSV3, "ep": 8}))
    r16 = simulate(Scenario(**{**DSV3, "ep": 16}))
    assert r8.parallelism["ep"] == 8
    w8, w16 = r8.memory_breakdown_bytes["weights"], r16.memory_breakdown_bytes["weights"]
    assert w16 < w8
    # the difference is the routed experts ep 16 no longer holds: 16 of 32 per MoE layer, bf16, on a stage of
    # ceil(61 / 16) = 4 layers of which 58/61 are MoE layers (the first three of DeepSeek-V3 are dense)
    h, fe = 7168, 2048
    assert w8 - w16 == pytest.approx(4 * 58 / 61 * 16 * 3 * h * fe * 2, rel=1e-9)
    assert sum(r16.breakdown_s.values()) == pytest.approx(r16.step_s, rel=1e-9)
    assert r16.breakdown_s["ep_comm_exposed_s"] > 0


def test_overlap_hides_the_all_to_all():
    inp = _inputs(ep=16)
    plain = evaluate(inp, DEFAULT_PARAMS)
    hidden = evaluate(inp, DEFAULT_PARAMS.replace(ep_a2a_overlap_frac=1.0))
    assert float(hidden["ep_comm_exposed_s"][0]) == 0.0 < float(plain["ep_comm_exposed_s"][0])


def test_capacity_factor_pads_the_experts():
    base = simulate(Scenario(**{**DSV3, "ep": 8}))
    padded = simulate(Scenario(**{**DSV3, "ep": 8, "moe_capacity_factor": 2.0}))
    assert padded.breakdown_s["compute_s"] > base.breakdown_s["compute_s"]


def test_moe_errors_name_the_problem():
    with pytest.raises(ScenarioError, match="not divisible by ep"):
        simulate(Scenario(**{**DSV3, "ep": 3}))
    with pytest.raises(ScenarioError, match="dense"):
        simulate(Scenario(model="llama3-70b", gpu="h100-sxm", gpus=64, nodes=8, kind="zero1", tp=8, ep=8))
    with pytest.raises(ScenarioError, match="dense"):
        simulate(Scenario(model="llama3-70b", gpu="h100-sxm", gpus=64, nodes=8, kind="zero1", tp=8,
                          moe_capacity_factor=1.25))


def test_moe_flops_count_the_active_experts():
    from gpusim.simulation import transformer_of
    from gpusim.workload import get_workload

    spec = transformer_of(get_workload("deepseek-v3"))
    x = {"moe_frac": 1.0, "d_model": spec.d_model, "ffn_mats": 3.0, "top_k": spec.top_k, "n_experts": spec.n_experts,
         "expert_ff_dim": spec.expert_ff_dim, "shared_ff_dim": spec.shared_ff_dim, "ff_dim": spec.ff_dim}
    delta = float(EXP.moe_flop_delta_per_token(x))
    h = spec.d_model
    want = 2 * h * spec.n_experts + 6 * h * (spec.top_k * spec.expert_ff_dim + spec.shared_ff_dim) - 6 * h * spec.ff_dim
    assert delta == pytest.approx(want)


@pytest.mark.parametrize("args, needle", [
    (["--model", "deepseek-v3", "--ep", "3", "--pp", "16", "--uneven-pp"], "not divisible by ep"),
    (["--model", "llama3-70b", "--ep", "8", "--tp", "8"], "dense"),
    (["--model", "llama3-70b", "--tp", "8", "--cp", "4", "--seq-len", "8196"], "2 x cp"),
])
def test_cli_bad_moe_and_cp_input_exit_2(capsys, args, needle):
    code = main(["predict", "--gpu", "h100-sxm", "--gpus", "256", "--nodes", "32", "--strategy", "zero1",
                 "--micro-batch", "1", *args])
    _, err = capsys.readouterr()
    assert code == 2 and needle in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_cli_predict_moe_json(capsys):
    code = main(["predict", "--model", "deepseek-v3", "--gpu", "h100-sxm", "--gpus", "256", "--nodes", "32",
                 "--strategy", "zero1", "--micro-batch", "1", "--pp", "16", "--uneven-pp", "--ep", "8",
                 "--recompute", "full", "--global-batch", "512", "--seq-len", "4096", "--json"])
    d = json.loads(capsys.readouterr()[0])
    assert code == 0
    assert d["parallelism"]["ep"] == 8
    assert "ep_comm_exposed_s" in d["breakdown_s"] and "cp_comm_exposed_s" in d["breakdown_s"]


def test_ep_groups_on_nvl72_racks_stay_inside_one_rack():
    # 64-rank EP groups on racks of 72: the scheduler places the job in segments inside one NVLink domain, so a
    # 256-GPU job is 4 x 64 GPUs of 4 racks and every group is on NVLink (gpusim.model.placement)
    assert float(EXP.ep_ranks_in_domain(64, 1, 72, 256, 4)) == 64
    assert float(EXP.ep_ranks_in_domain(8, 1, 72, 256, 4)) == 8  # 8 tiles the 64-GPU segment
    assert float(EXP.ep_ranks_in_domain(64, 1, 72, 64, 4)) == 64  # the whole job inside one rack
    assert float(EXP.ep_ranks_in_domain(16, 1, 8, 256, 8)) == 8  # larger than an 8-GPU node
    # ep x etp = 128 on 512 GPUs (128 trays -> segments of 16 trays = 64 GPUs): 64 / etp = 16 of its ranks each
    assert float(EXP.ep_ranks_in_domain(32, 4, 72, 512, 4)) == 16
    nodes, _ = EXP.a2a_fabric(64, 1, 72, 256, 4, 400e9)
    assert float(nodes) == 1.0  # the all-to-all never leaves the rack


def test_moe_layouts_refused_by_the_state_bound_really_do_not_fit(db):
    from gpusim.search import RECOMPUTES, search_layouts

    scn = Scenario(model="deepseek-v3", seq_len=4096, gpu="h100-sxm", gpus=128, nodes=16, kind="zero1",
                   global_batch=256, per_gpu_batch=1)
    res = search_layouts(scn, db=db, micro_batches=(1,), recomputes=("full",))
    lay, out = res["layouts"], res["out"]
    screened = np.flatnonzero(np.isfinite(out["memory_lower_bound_bytes"]))
    assert len(screened)
    for i in screened[:: max(1, len(screened) // 4)][:4]:
        r = simulate(scn.with_changes(tp=int(lay["tp"][i]), pp=int(lay["pp"][i]), vp=int(lay["vp"][i]),
                                      cp=int(lay["cp"][i]), ep=int(lay["ep"][i]), recompute=RECOMPUTES[int(lay["recompute"][i])],
                                      uneven_pp=True), db=db)
        assert r.memory_per_gpu_bytes >= float(out["memory_lower_bound_bytes"][i]) > r.memory_capacity_bytes


def test_full_recomputation_keeps_only_each_moe_layers_input():
    """Under full recomputation a layer keeps its input alone, MoE or not: the router scores, dispatched tokens and
    experts' activations are recomputed with the rest of the layer (only the layer being recomputed holds them)."""
    from gpusim.model.llm import llm_terms
    from gpusim.model.step import _llm_inputs

    _, _, row = build_inputs(Scenario.create(**DSV3), None)
    inp = stack_rows([row])
    x = _llm_inputs(inp, np.asarray(inp.n_gpus) / np.asarray(inp.n_nodes), DEFAULT_PARAMS)
    moe = llm_terms(x, DEFAULT_PARAMS)
    dense = llm_terms({**x, "moe_frac": np.zeros(1)}, DEFAULT_PARAMS)
    np.testing.assert_allclose(moe["act_layer_bytes"], dense["act_layer_bytes"], rtol=1e-12)
    # DeepSeek-V3's own layout (2,048 GPUs, pp 16, ep 64; DeepSeek-AI 2024 section 3.1) fits an 80 GB GPU
    own = simulate({**DSV3, "gpus": 2048, "nodes": 256, "ep": 64, "global_batch": 1024}, recommend=False)
    assert own.fits_in_memory


def test_grouped_gemm_runs_as_te_launches_it_per_expert_on_four_streams():
    # TE's multi-stream cuBLAS grouped GEMM: 16 local experts -> 4 rounds of 4 concurrent GEMMs; 2 -> 1 round of 2;
    # 6 -> 2 rounds (4 + 2, timed as 2 rounds of 4)
    rounds, conc = EXP.grouped_gemm_rounds(np.array([16.0, 2.0, 6.0, 1.0]))
    assert rounds.tolist() == [4.0, 1.0, 2.0, 1.0] and conc.tolist() == [4.0, 2.0, 4.0, 1.0]


def test_moe_forward_kernel_count_and_cpu_time_hand_worked():
    # 16 local experts, bf16: 33 + 2 x 16 = 65 forward operations; FP8 (current scaling) quantises both inputs per
    # expert: + 32 = 97; MXFP8 also swizzles the two grouped GEMMs' scale lists: + 4 = 101
    k = EXP.moe_forward_kernels(np.array([16.0, 16.0, 16.0]), np.array([0, 2, 3]))
    assert k.tolist() == [65.0, 97.0, 101.0]
    # backward: 21 + 4 x 16 = 85 (bf16), + 2 x 16 = 117 with FP8, + 8 swizzles = 125 with MXFP8; at 8 us each
    f, b, pre = EXP.moe_cpu_s(np.array([16.0, 16.0, 16.0]), np.array([0, 2, 3]), 8e-6)
    assert f.tolist() == pytest.approx([65 * 8e-6, 97 * 8e-6, 101 * 8e-6])
    assert b.tolist() == pytest.approx([85 * 8e-6, 117 * 8e-6, 125 * 8e-6])
    # the router's 7 and the dispatcher's preprocessing's 15 operations precede the host sync
    assert np.broadcast_to(pre, (3,)).tolist() == pytest.approx([22 * 8e-6] * 3)


def test_dispatcher_host_sync_only_where_megatron_syncs():
    # Megatron-Core's all-to-all dispatcher syncs when dropless (ep > 1 or several local experts); padded capacity
    # (drop-and-pad) does not
    syncs = EXP.dispatcher_syncs(np.array([0, 0, 1, 0]), np.array([np.nan, 1.25, np.nan, np.nan]),
                                 np.array([8.0, 8.0, 8.0, 1.0]), np.array([16.0, 16.0, 16.0, 1.0]))
    assert syncs.tolist() == [True, False, True, False]


def test_moe_step_grows_with_the_cpu_launch_cost_when_the_layer_is_launch_bound(db):
    # small experts at a small micro-batch on a Grace host: the MoE layer's launches (router, dispatcher, 16 local
    # experts' GEMMs) set the pace; the per-operation CPU cost shows in the step, more with more local experts
    from gpusim.params import DEFAULT_PARAMS

    scn = Scenario(model="qwen3-30b-a3b", gpu="gb200", gpus=8, nodes=2, kind="zero1", tp=1, pp=1, ep=8, per_gpu_batch=1,
                   global_batch=64, seq_len=1024, precision="bf16")
    slow = DEFAULT_PARAMS.model_copy(update={"launch_cpu_s": 50e-6})
    fast = simulate(scn, db=db, recommend=False).step_s
    assert simulate(scn, db=db, params=slow, recommend=False).step_s > fast


def test_moe_activations_keep_one_copy_of_the_dispatched_tokens():
    # Megatron-Core applies the routing probabilities in the experts' activation: the unpermutation keeps no token
    # copy. Halving d_model's dispatched-token term shows as h x e + 4 bytes per routed token in delta_act_bytes.
    from gpusim.params import DEFAULT_PARAMS

    x = {"moe_frac": 1.0, "d_model": 1024.0, "n_experts": 8.0, "top_k": 2.0, "expert_ff_dim": 0.0,
         "shared_ff_dim": 0.0, "ff_dim": 0.0, "ffn_mats": 3.0, "ep": 1.0, "expert_tp": 1.0, "moe_capacity": np.nan,
         "moe_imbalance_frac": 0.0, "gpus_per_node": 8.0, "n_nodes": 1.0, "inter_busbw_bytes_per_s": 400e9}
    out = EXP.moe_layer_terms(x, DEFAULT_PARAMS, gemm=lambda m, n, k, batch=1.0, **kw: 0.0 * m, T=1000.0, tp=1.0, e=2.0,
                              mem_rate=1e12, domain=8.0, g=8.0, coll=lambda *a, **k: 0.0)
    routed = 1000.0 * 2.0  # tokens x top-k, balanced, one rank
    assert float(out["delta_act_bytes"]) == pytest.approx(1000.0 * 8.0 * 4.0 + routed * (1024.0 * 2.0 + 4.0))
