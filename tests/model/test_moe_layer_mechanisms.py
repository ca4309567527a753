"""[issue 17] The MoE layer's mechanisms as Megatron-Core and Transformer Engine run them, each on a hand-worked case:
the dispatcher's (un)permutations and chunk sorts, the experts' separate FP8 quantisations, the weight gradients
accumulated into the fp32 main gradient, the MoE kernels' GPU tails, and the force-balanced (random-logit) router."""

from __future__ import annotations

import numpy as np
import pytest

from gpusim.model import experts as EXP
from gpusim.model import fp8 as FP8
from gpusim.params import DEFAULT_PARAMS


def _x(**over):
    x = {"moe_frac": 1.0, "d_model": 1024.0, "n_experts": 8.0, "top_k": 2.0, "expert_ff_dim": 512.0,
         "shared_ff_dim": 0.0, "ff_dim": 1024.0, "ffn_mats": 3.0, "ep": 1.0, "expert_tp": 1.0, "moe_capacity": np.nan,
         "moe_imbalance_frac": 0.0, "gpus_per_node": 8.0, "n_nodes": 1.0, "inter_busbw_bytes_per_s": 400e9}
    x.update(over)
    return x


def _terms(x, gemm=None, mem_rate=1e12, params=DEFAULT_PARAMS):
    gemm = gemm or (lambda m, n, k, batch=1.0, **kw: 0.0 * np.asarray(m, dtype=float))
    return EXP.moe_layer_terms(x, params, gemm=gemm, T=1000.0, tp=1.0, e=2.0, mem_rate=mem_rate, domain=8.0, g=8.0,
                               coll=lambda *a, **k: 0.0)


# ---- token permutation -------------------------------------------------------------------------------------------

def test_permutation_bytes_of_the_all_to_all_dispatcher_hand_worked():
    # n = 4096 tokens, top-8, r = 32768 copies received, h = 2048, bf16, several local experts (chunks sorted):
    # permute 4096 x (1 + 8) rows + unpermute the same, sort + unsort 4 x 32768 rows, each of 2048 x 2 bytes, and the
    # fp32 probabilities of the 32768 permuted copies (4 bytes) and of the sorted ones (read + write: 8)
    got = EXP.permutation_bytes(4096.0, 32768.0, 8.0, 2048.0, 2.0, sort_chunks=True)
    assert float(got) == (2 * 4096 * 9 + 4 * 32768) * 4096 + 4 * 4096 * 8 + 8 * 32768 == 839_254_016
    unsorted = EXP.permutation_bytes(4096.0, 32768.0, 8.0, 2048.0, 2.0, sort_chunks=False)
    assert float(unsorted) == 2 * 4096 * 9 * 4096 + 4 * 4096 * 8
    # DeepEP / HybridEP: the received copies permuted to the experts and back, read + write each
    flex = EXP.permutation_bytes(4096.0, 32768.0, 8.0, 2048.0, 2.0, sort_chunks=False, dispatcher=EXP.DEEPEP)
    assert float(flex) == 4 * 32768 * 4096


def test_chunks_are_sorted_only_with_several_local_experts_over_an_ep_group():
    assert bool(EXP.sorts_chunks(EXP.ALLTOALL, 8.0, 16.0))
    assert not bool(EXP.sorts_chunks(EXP.ALLTOALL, 1.0, 16.0))  # no all-to-all: the permutation is expert-major
    assert not bool(EXP.sorts_chunks(EXP.ALLTOALL, 8.0, 1.0))  # one expert per rank: nothing to reorder
    assert not bool(EXP.sorts_chunks(EXP.DEEPEP, 8.0, 16.0))


def test_the_layer_charges_the_permutation_bytes_and_the_kernel_tails():
    # GEMMs free, experts 0 wide: the forward MoE time is the permutation's bytes at mem_rate, the router scores'
    # bytes, and the fixed kernels' tails; the dense FFN (ff_dim 0) subtracts nothing
    x = _x(expert_ff_dim=0.0, ff_dim=0.0, ep=2.0)
    out = _terms(x, mem_rate=1e12)
    n, k, E, h = 1000.0, 2.0, 8.0, 1024.0
    recv = n * k  # balanced (imbalance 0), ep x tokens x k / E per expert x E / ep experts
    perm = EXP.permutation_bytes(n, recv, k, h, 2.0, sort_chunks=True)
    scores = n * E * 4.0 * 3.0
    tails = EXP.MOE_FIXED_GPU_KERNELS * DEFAULT_PARAMS.kernel_tail_s
    sync = DEFAULT_PARAMS.launch_cpu_s  # the dispatcher's host round trip (dropless, ep > 1)
    assert float(out["delta_f_s"]) == pytest.approx((perm + scores) / 1e12 + tails + sync)
    # the forward's kernels: its operations less the four collectives, the four device-to-host copies and the sync
    assert EXP.MOE_FIXED_GPU_KERNELS == EXP.MOE_FIXED_FWD_KERNELS - 9.0 == 24.0
    assert EXP.MOE_FIXED_GPU_KERNELS_BWD == EXP.MOE_FIXED_BWD_KERNELS - 3.0 == 18.0


# ---- FP8 quantisation of the experts' inputs --------------------------------------------------------------------

def test_expert_cast_bytes_mxfp8_hand_worked():
    # MXFP8: a separate cast moves 4 + 2/32 bytes per element; the dense FFN's norm-fused FC1-input cast the same
    # (MXFP8 norms are unfused), its activation-fused casts 2/32
    f, b = EXP.expert_cast_bytes(FP8.MX, T=4096.0, recv_tokens=32768.0, h=2048.0, f=6144.0, fe=768.0, fs=0.0, up=2.0,
                                 tp=1.0, etp=1.0)
    c = 4.0 + 2.0 / 32.0
    assert float(f) == pytest.approx(32768 * (2048 + 768) * c - 4096 * 6144 * (2 / 32) - 4096 * 2048 * c)
    assert float(f) == pytest.approx(3.39214336e8)
    assert float(b) == pytest.approx(32768 * (2048 + 1536) * c - 4096 * 12288 * (2 / 32) - 4096 * 2048 * c)


def test_expert_cast_bytes_delayed_with_shared_experts_and_none_without_fp8():
    # delayed scaling on Hopper: a separate cast 4 bytes, fused into the norm or the activation +1; with a shared
    # expert of width 512 the norm's fused cast and the FC2 output-gradient cast stay (the shared expert's)
    T, r, h, f, fe, fs = 100.0, 800.0, 64.0, 256.0, 32.0, 512.0
    fw, bw = EXP.expert_cast_bytes(FP8.DELAYED, T=T, recv_tokens=r, h=h, f=f, fe=fe, fs=fs, up=2.0, tp=1.0, etp=1.0)
    assert float(fw) == r * (h + fe) * 4.0 + T * fs * 1.0 - T * f * 1.0
    assert float(bw) == r * (h + 2 * fe) * 4.0 + T * fs * 2 * 1.0 - T * f * 2 * 1.0
    z = EXP.expert_cast_bytes(FP8.NONE, T=T, recv_tokens=r, h=h, f=f, fe=fe, fs=fs, up=2.0, tp=1.0, etp=1.0)
    assert float(z[0]) == 0.0 and float(z[1]) == 0.0


def test_fp8_rows_pay_the_expert_casts_and_one_kernel_per_expert_input():
    x16 = _x(ep=1.0)
    x8 = _x(ep=1.0, fp8_mode=FP8.DELAYED, moe_router_padding=True)  # (the FP8 row padding: its own test below)
    d16, d8 = _terms(x16), _terms(x8)
    r = 1000.0 * 2.0
    cf, _ = EXP.expert_cast_bytes(FP8.DELAYED, T=1000.0, recv_tokens=r, h=1024.0, f=1024.0, fe=512.0, fs=0.0, up=2.0,
                                  tp=1.0, etp=1.0)
    local = 8.0
    # the GEMM stub is free; CPU launches differ too but are reported apart (cpu_f_s), not in delta_f_s
    assert float(d8["delta_f_s"] - d16["delta_f_s"]) == pytest.approx(
        float(cf) / 1e12 + 2.0 * local * DEFAULT_PARAMS.kernel_tail_s)


# ---- weight gradients into the fp32 main gradient ---------------------------------------------------------------

def test_wgrad_epilogue_bytes():
    out, src = EXP.wgrad_epilogue_bytes(True, 2.0)
    assert (float(out), float(src)) == (4.0, 4.0)
    out, src = EXP.wgrad_epilogue_bytes(False, 2.0)
    assert (float(out), float(src)) == (2.0, 0.0)


def test_expert_weight_gradients_accumulate_into_the_main_gradient():
    # the layer asks every weight-gradient GEMM (m = the weight's input width, n = its output width, k = the tokens)
    # for 4 + 4 bytes per output element with gradient-accumulation fusion, and a 16-bit write without; forward and
    # data-gradient GEMMs write 16 bits
    calls = []

    def gemm(m, n, k, batch=1.0, out_bytes=None, src_bytes=0.0):
        calls.append((float(np.ravel(k)[0]), float(np.ravel(out_bytes)[0]), float(np.ravel(src_bytes)[0])))
        return 0.0 * np.asarray(m, dtype=float)

    _terms(_x(grad_accum_fusion=True), gemm=gemm)
    wgrads = [c for c in calls if c[2] > 0]
    # router, 2 routed-expert GEMMs, 2 dense-FFN GEMMs replaced (shared experts: 2 more, width 0): all with wgrads
    assert wgrads and all(c[1] == 4.0 and c[2] == 4.0 for c in wgrads)
    assert len(wgrads) == len(calls) // 3
    assert all(c[1] == 2.0 for c in calls if c[2] == 0.0)
    calls.clear()
    _terms(_x(grad_accum_fusion=False), gemm=gemm)
    assert all(c[2] == 0.0 and c[1] == 2.0 for c in calls)


def test_small_experts_weight_gradient_is_bound_by_the_main_gradient_traffic():
    # 1024 tokens per expert of DeepSeek-V3's shape (7168 x 2048) in FP8 on an H100-like GPU (3.35 TB/s, 132 SMs):
    # 2 x 1024 x 7168 x 2048 FLOPs (30 GFLOP, 35 us at 850 TFLOP/s) against 8 bytes x 7168 x 2048 (117 MB, 50 us at
    # 0.7 x 3.35 TB/s): memory-bound
    from gpusim.model.gemm import gemm_time_s

    hbm = 3.35e12
    kw = dict(elem_bytes=1.0, k_half=128.0, mem_eff_frac=0.7, kernel_tail_s=0.0)
    fused = gemm_time_s(7168.0, 2048.0, 1024.0, 850e12, hbm, 132.0, out_bytes=4.0, src_bytes=4.0, **kw)
    plain = gemm_time_s(7168.0, 2048.0, 1024.0, 850e12, hbm, 132.0, out_bytes=2.0, **kw)
    assert float(fused) == pytest.approx((7168 * 1024 + 1024 * 2048 + 8.0 * 7168 * 2048) / (hbm * 0.7))
    assert float(fused) > 1.3 * float(plain)


# ---- the force-balanced router ----------------------------------------------------------------------------------

def test_force_balanced_router_is_the_sampled_spread():
    # Megatron-Core's --moe-router-force-load-balancing draws random logits per token: the busiest of 8 ranks holding
    # 16 of 128 experts, 4096 tokens x top-8 each, carries 1 + z_8 sqrt((E - k) / ((E - 1) mu)) of the mean
    from gpusim.model.sync import expected_max_std_normal

    mu = 4096.0 * 8.0
    want = 1.0 + float(expected_max_std_normal(8.0)) * np.sqrt(120.0 / (127.0 * mu))
    assert float(EXP.busiest_rank_load(4096.0, 8.0, 128.0, 8.0)) == pytest.approx(want)
    assert 1.005 < want < 1.01


# ---- the dispatcher's host sync ---------------------------------------------------------------------------------

def test_synced_forward_adds_the_launch_bound_and_the_gpu_bound_halves():
    # post-sync part launch-bound (0.6 ms CPU, 0.2 ms GPU), pre-sync part GPU-bound (0.2 ms CPU, 0.3 ms GPU): the sync
    # makes them add, 0.6 + 0.3 = 0.9 ms, where a sync-free layer would take max(0.5, 0.8) = 0.8 ms
    assert float(EXP.synced_forward_s(0.2e-3, 0.6e-3, 0.3e-3, 0.2e-3)) == pytest.approx(0.9e-3)
    # GPU-bound on both sides: the GPU's sum; launch-bound on both: the CPU's sum
    assert float(EXP.synced_forward_s(0.5e-3, 0.1e-3, 0.4e-3, 0.1e-3)) == pytest.approx(0.9e-3)
    assert float(EXP.synced_forward_s(0.1e-3, 0.5e-3, 0.1e-3, 0.4e-3)) == pytest.approx(0.9e-3)
    assert EXP.MOE_PRESYNC_FWD_KERNELS < EXP.MOE_FIXED_FWD_KERNELS


def test_the_layer_reports_its_post_sync_part_only_where_the_dispatcher_syncs():
    dropless = _terms(_x(ep=2.0))
    padded = _terms(_x(ep=2.0, moe_capacity=1.0))
    assert bool(np.all(dropless["syncs"])) and not bool(np.any(padded["syncs"]))
    host = DEFAULT_PARAMS.launch_cpu_s
    assert float(dropless["post_cpu_f_s"]) == pytest.approx(float(dropless["cpu_f_s"])
                                                             - EXP.MOE_PRESYNC_FWD_KERNELS * host)


def test_a_launch_bound_moe_layer_is_slower_with_the_sync(db, monkeypatch):
    # Qwen3-30B-A3B at one 12288-token sequence on a Grace host, 16 local experts, dropless (the dispatcher syncs),
    # MXFP8 (the experts' quantisations add launches): the experts' launches (post-sync) outlast their GPU time while
    # the attention's GPU time (pre-sync) outlasts its launches -- checked below, since the GPU's figures move these
    # terms -- so the step exceeds the sync-free max(GPU, CPU) composition of the same layer
    from gpusim.simulation import Scenario, simulate

    scn = Scenario(model="qwen3-30b-a3b", gpu="gb200", gpus=8, nodes=2, kind="zero1", tp=1, pp=1, ep=8,
                   per_gpu_batch=1, global_batch=64, seq_len=12288, precision="mxfp8")
    seen = []
    orig = EXP.synced_forward_s

    def spy(g_post, c_post, g_pre, c_pre):
        seen.append([float(np.asarray(v).ravel()[0]) for v in (g_post, c_post, g_pre, c_pre)])
        return orig(g_post, c_post, g_pre, c_pre)

    monkeypatch.setattr(EXP, "synced_forward_s", spy)
    synced = simulate(scn, db=db, recommend=False).step_s
    g_post, c_post, g_pre, c_pre = seen[0]
    assert c_post > g_post and g_pre > c_pre  # the premise
    monkeypatch.setattr(EXP, "synced_forward_s", lambda gP, cP, gQ, cQ: np.maximum(gP + gQ, cP + cQ))
    free = simulate(scn, db=db, recommend=False).step_s
    assert synced > free



def test_a_launch_bound_layer_hides_its_exchanges_under_the_cpu_hand_worked():
    """[stop 50] The CPU enqueues collectives without waiting: a layer whose launches outlast its GPU time by 3 ms
    hides 3 ms of its exposed exchanges, in order (TP first), and a GPU-bound layer hides none."""
    from gpusim.model.llm import hidden_under_cpu_s

    assert [float(v) for v in hidden_under_cpu_s(3.0, 2.0, 4.0)] == [0.0, 3.0]
    assert [float(v) for v in hidden_under_cpu_s(0.0, 2.0, 4.0)] == [2.0, 4.0]
    assert [float(v) for v in hidden_under_cpu_s(10.0, 2.0, 4.0, 1.0)] == [0.0, 0.0, 0.0]
    both = hidden_under_cpu_s(np.array([1.0, 5.0]), np.array([2.0, 2.0]))[0]
    assert both.tolist() == [1.0, 0.0]


def test_a_launch_bound_layer_without_a_sync_exposes_less_exchange(db, monkeypatch):
    """[stop 50] Qwen3-235B-A22B on 64 GB200 with token dropping (no dispatcher sync), one sequence per GPU, eager:
    the layer is launch-bound on Grace, so its exposed all-to-all is charged only where it outlasts the CPU's lead;
    with that hiding switched off (the exchanges added to max(GPU, CPU)) the step is longer by what was hidden."""
    from gpusim.model import llm as LLM
    from gpusim.simulation import Scenario, simulate

    scn = Scenario.create(model="qwen3-235b-a22b", gpu="gb200", gpus=64, nodes=16, tp=2, ep=64, micro_batch=1,
                          global_batch=1024, seq_len=4096, precision="fp8", fp8_recipe="current", kind="zero1",
                          moe_capacity_factor=1.0)
    on = simulate(scn, db=db, recommend=False)
    lay = on.layer_s
    assert lay["cpu_fwd_s"] > lay["gpu_fwd_s"] and lay["cpu_bwd_s"] > lay["gpu_bwd_s"] and not lay["host_sync_flag"]
    monkeypatch.setattr(LLM, "hidden_under_cpu_s", lambda slack, *c: c)
    off = simulate(scn, db=db, recommend=False)
    assert on.breakdown_s["ep_comm_exposed_s"] < off.breakdown_s["ep_comm_exposed_s"]
    assert on.step_s < off.step_s
    assert on.breakdown_s["compute_s"] == pytest.approx(off.breakdown_s["compute_s"], rel=1e-12)

# ---- expert biases and the clamped GLU (GPT-OSS) -------------------------------------------------------------------

def test_expert_extra_bytes_hand_worked_gpt_oss():
    # GPT-OSS-120B at EP 64, micro-batch 4 x 4096 tokens: 65536 routed copies on a rank, f = h = 2880, two local
    # experts, bf16 (the docstring's case)
    u = 65536 * 2880 * 2
    fwd, bwd, clamp_f, kept, k_f, k_b = EXP.expert_extra_bytes(65536.0, 2880.0, 2880.0, 2.0, 2.0, bias=True,
                                                               clamp=True)
    assert float(fwd) == 14 * u == 5_284_823_040  # clamp 8 (two clamps + cat), bias 6 (mul, add, cat)
    assert float(bwd) == 16 * u  # clamp gradients 10, bias gradients 6
    assert float(clamp_f) == 8 * u and float(kept) == 2 * u
    assert float(k_f) == 3 + 2 * 2 + 1 and float(k_b) == 3 + 4 * 2
    # each part alone, and neither
    b = EXP.expert_extra_bytes(65536.0, 2880.0, 2880.0, 2.0, 2.0, bias=True, clamp=False)
    c = EXP.expert_extra_bytes(65536.0, 2880.0, 2880.0, 2.0, 2.0, bias=False, clamp=True)
    assert float(b[0]) == 6 * u and float(b[3]) == 0.0 and float(c[0]) == 8 * u and float(c[1]) == 10 * u
    assert all(float(v) == 0.0 for v in EXP.expert_extra_bytes(65536.0, 2880.0, 2880.0, 2.0, 2.0, bias=False,
                                                                clamp=False))
    # under Transformer Engine's fused grouped MLP the clamp and the biases run in the kernels' epilogues: only fc2's
    # bias (and routing-probability) gradient reads fc2's output gradient once, in one kernel
    fz = EXP.expert_extra_bytes(65536.0, 2880.0, 2880.0, 2.0, 2.0, bias=True, clamp=True, fused=True)
    assert [float(v) for v in fz] == [0.0, 1.0 * u, 0.0, 0.0, 0.0, 1.0]
    assert [float(v) for v in EXP.expert_extra_bytes(65536.0, 2880.0, 2880.0, 2.0, 2.0, bias=False, clamp=True,
                                                     fused=True)] == [0.0] * 6


def test_the_layer_charges_bias_and_clamp_passes_cpu_and_memory():
    base = _terms(_x(ep=2.0))
    on = _terms(_x(ep=2.0, moe_expert_bias=True, moe_glu_clamp=True))
    r = 1000.0 * 2.0  # balanced: the rank computes n k copies
    fwd, bwd, clamp_f, kept, k_f, k_b = EXP.expert_extra_bytes(r, 1024.0, 512.0, 4.0, 2.0, bias=True, clamp=True)
    tail = DEFAULT_PARAMS.kernel_tail_s
    assert float(on["delta_f_s"] - base["delta_f_s"]) == pytest.approx(float(fwd) / 1e12 + float(k_f) * tail)
    assert float(on["delta_b_s"] - base["delta_b_s"]) == pytest.approx(float(bwd) / 1e12 + float(k_b) * tail)
    assert float(on["delta_act_bytes"] - base["delta_act_bytes"]) == pytest.approx(float(kept))
    launch = DEFAULT_PARAMS.launch_cpu_s
    assert float(on["cpu_f_s"] - base["cpu_f_s"]) == pytest.approx(float(k_f) * launch)
    assert float(on["cpu_b_s"] - base["cpu_b_s"]) == pytest.approx(float(k_b) * launch)
    # moe_act recomputes the clamp in the backward and keeps no clamp input
    rc = _terms(_x(ep=2.0, moe_expert_bias=True, moe_glu_clamp=True, recompute_moe_act=True))
    rc0 = _terms(_x(ep=2.0, recompute_moe_act=True))
    assert float(rc["delta_b_s"] - rc0["delta_b_s"]) == pytest.approx(
        float(bwd + clamp_f) / 1e12 + float(k_b + 3.0) * tail)
    assert float(rc["delta_act_bytes"] - rc0["delta_act_bytes"]) == pytest.approx(0.0)


def test_under_the_fused_mlp_bias_and_clamp_cost_only_fc2s_bias_gradient():
    """[issue 17] Transformer Engine's fused grouped MLP takes GPT-OSS's biases and clamp into its epilogues: the
    layer's extra time is the one backward dbias kernel, and no extra launch precedes or follows the kernels."""
    mx = dict(ep=2.0, fp8_mode=FP8.MX, moe_fused_mlp=True)
    base = _terms(_x(**mx))
    on = _terms(_x(**mx, moe_expert_bias=True, moe_glu_clamp=True))
    r = 1000.0 * 2.0
    tail = DEFAULT_PARAMS.kernel_tail_s
    assert float(on["delta_f_s"] - base["delta_f_s"]) == pytest.approx(0.0, abs=1e-15)
    assert float(on["delta_b_s"] - base["delta_b_s"]) == pytest.approx(r * 1024.0 * 2.0 / 1e12 + tail)
    assert float(on["delta_act_bytes"] - base["delta_act_bytes"]) == pytest.approx(0.0)
    assert float(on["cpu_f_s"] - base["cpu_f_s"]) == pytest.approx(0.0, abs=1e-15)
    assert float(on["cpu_b_s"] - base["cpu_b_s"]) == pytest.approx(DEFAULT_PARAMS.launch_cpu_s)


def test_gpt_oss_config_reads_the_swiglu_limit_and_its_expert_biases(tmp_path):
    import json

    from pathlib import Path

    from gpusim.errors import ScenarioError
    from gpusim.workload.from_config import from_config

    cfg = json.loads((Path(__file__).parents[1] / "workload" / "configs" / "gpt-oss-120b.json").read_text())
    t = from_config(cfg).transformer
    assert t.glu_clamp == cfg["swiglu_limit"] == 7.0 and t.expert_bias
    assert from_config({k: v for k, v in cfg.items() if k != "swiglu_limit"}).transformer.glu_clamp == 7.0  # default
    with pytest.raises(ScenarioError, match="glu_clamp"):
        from_config({**cfg, "swiglu_limit": 0})


def test_gpt_oss_rows_are_slower_with_their_eager_bias_and_clamp(db):
    from gpusim.scenario import Scenario
    from gpusim.simulation import simulate
    from gpusim.workload import get_workload

    wl = get_workload("gpt-oss-120b")
    kw = dict(workload=wl, node="dgx-b200", gpus=64, nodes=8, kind="zero1", precision="bf16", ep=8, micro_batch=1,
              global_batch=256, seq_len=4096)
    with_extra = simulate(Scenario.create(**kw), db=db, recommend=False).step_s
    import dataclasses

    from gpusim.workload import build_from_spec
    plain = build_from_spec(dataclasses.replace(wl.transformer, glu_clamp=None, mlp_bias=False), id=wl.id,
                            name=wl.name)
    without = simulate(Scenario.create(**{**kw, "workload": plain}), db=db, recommend=False).step_s
    assert with_extra > without * 1.02


# ---- FP8 row padding around the experts (all-to-all dispatcher) ----------------------------------------------------

def test_fp8_padding_bytes_hand_worked():
    f, b, k = EXP.fp8_padding_bytes(131072.0, 2048.0, 2.0, True)
    assert float(f) == float(b) == 4 * 131072 * 2048 * 2 + 8 * 131072 == 2_148_532_224 and float(k) == 3.0
    assert all(float(v) == 0.0 for v in EXP.fp8_padding_bytes(131072.0, 2048.0, 2.0, False))


def test_fp8_layers_pay_the_padding_only_with_the_all_to_all_dispatcher_and_no_router_padding():
    fp8 = _x(ep=2.0, fp8_mode=FP8.MX)

    def padding_s(**over):
        """What the layer's forward pays for the padding: the same row without it (router padding) subtracted."""
        return float(_terms({**fp8, **over})["delta_f_s"]) - float(
            _terms({**fp8, **over, "moe_router_padding": True})["delta_f_s"])

    pad_f, _, pad_k = EXP.fp8_padding_bytes(2000.0, 1024.0, 2.0, True)  # balanced: the rank computes n k = 2000 copies
    assert padding_s() == pytest.approx(float(pad_f) / 1e12 + float(pad_k) * DEFAULT_PARAMS.kernel_tail_s)
    # the flex dispatcher (DeepEP / HybridEP) fuses the padding, and a sync-free captured layer pads in the router
    assert padding_s(moe_dispatcher=EXP.DEEPEP) == pytest.approx(0.0)
    assert padding_s(cuda_graphs=32.0) == pytest.approx(0.0)
    # a BF16 layer pads nothing
    bf16 = _x(ep=2.0)
    assert float(_terms(bf16)["delta_f_s"]) == pytest.approx(float(_terms({**bf16, "moe_router_padding": True})["delta_f_s"]))


def test_moe_router_padding_option_from_the_cli_and_its_errors(db):
    from gpusim.errors import ScenarioError
    from gpusim.scenario import Scenario
    from gpusim.simulation import simulate

    from gpusim.workload import get_workload

    kw = dict(workload=get_workload("qwen3-30b-a3b"), node="dgx-b200", gpus=8, ep=8, precision="mxfp8", micro_batch=4,
              global_batch=512, seq_len=4096, kind="zero1")
    padded_in_router = simulate(Scenario.create(**kw, moe_router_padding=True), db=db, recommend=False).step_s
    copied = simulate(Scenario.create(**kw), db=db, recommend=False).step_s
    assert copied > padded_in_router
    with pytest.raises(ScenarioError, match="needs --precision fp8 or mxfp8"):
        simulate(Scenario.create(**{**kw, "precision": "bf16"}, moe_router_padding=True), db=db, recommend=False)
    with pytest.raises(ScenarioError, match="only to mixture-of-experts"):
        simulate(Scenario.create(**{**kw, "workload": get_workload("llama3-8b"), "ep": 1}, moe_router_padding=True), db=db,
                 recommend=False)


def test_fp8_padding_is_advised_where_it_costs_and_not_where_it_is_gone(db):
    """[issue 17] An FP8 MoE layout on the all-to-all dispatcher is told what padding in the router would gain (its
    own what-if); with router padding, the flex dispatcher or BF16 there is nothing to advise; the CUDA-graph advice
    counts only the launches (its sync-free variant pads in the router too)."""
    from gpusim.scenario import Scenario
    from gpusim.simulation import simulate
    from gpusim.workload import get_workload

    kw = dict(workload=get_workload("qwen3-30b-a3b"), node="dgx-b200", gpus=8, ep=8, precision="mxfp8",
              micro_batch=4, global_batch=512, seq_len=4096, kind="zero1")

    def recs(**over):
        return {r["id"]: r for r in simulate(Scenario.create(**{**kw, **over}), db=db).recommendations}

    got = recs()
    pad = got["llm-moe-router-padding"]
    padded = simulate(Scenario.create(**kw, moe_router_padding=True), db=db, recommend=False)
    plain = simulate(Scenario.create(**kw), db=db, recommend=False)
    assert pad["gain_frac"] == pytest.approx(padded.throughput_samples_per_s / plain.throughput_samples_per_s - 1,
                                             abs=1e-3) and pad["gain_frac"] > 0.02
    assert "llm-cuda-graphs" not in got  # this layout is GPU-bound: the graphs' gain here was the padding's
    for over in ({"moe_router_padding": True}, {"moe_dispatcher": "deepep"}, {"precision": "bf16"}):
        assert "llm-moe-router-padding" not in recs(**over)


# ---- Transformer Engine's CuTe DSL fused grouped MLP ---------------------------------------------------------------

def test_fused_mlp_gemms_hand_worked_shapes_and_epilogue_bytes():
    """[issue 17] The fused path's GEMMs (experts.fused_mlp_terms) as TE's fused ops launch them: fc1 and fc2 forward
    and fc2's data gradient as one kernel over all 16 local experts (batch 16), fc1's kept output and the FP8 copies
    written in fc1's epilogue, the kept output read and fc1's output gradient written in FP8 by fc2's data-gradient
    kernel; the three other backward GEMMs per expert on TE's 4 streams (4 rounds of 4)."""
    calls = []

    def gemm(m, n, k, batch=1.0, out_bytes=None, src_bytes=0.0):
        calls.append((float(m), float(n), float(k), float(batch), out_bytes, src_bytes))
        return 1.0

    both = FP8.CAST_BYTES[FP8.MX] - 2.0  # 2 + 2/32: FP8 row- and column-wise copies and their E8M0 scales
    f, b = EXP.fused_mlp_terms(gemm, tpe=2048.0, local=16.0, h=2048.0, fe=768.0, up=2.0, e=2.0, both=both,
                               w_out=4.0, w_src=4.0)
    assert calls[0] == (2048.0, 1536.0, 2048.0, 16.0, 2.0 + both / 2.0, 0.0)  # fc1 + SwiGLU + quantise
    assert calls[1] == (2048.0, 2048.0, 768.0, 16.0, 2.0, 0.0)  # fc2
    assert calls[2] == (2048.0, 768.0, 2048.0, 16.0, 2.0 * both, 2.0 * 2.0)  # fc2 dgrad + dSwiGLU + quantise
    assert calls[3] == (768.0, 2048.0, 2048.0, 4.0, 4.0, 4.0)  # fc2 wgrad into the fp32 main gradient, per expert
    assert calls[4][:4] == (2048.0, 2048.0, 1536.0, 4.0) and calls[5][:4] == (2048.0, 1536.0, 2048.0, 4.0)
    assert float(f) == 2.0 and float(b) == 1.0 + 4.0 * 1.0 + 4.0 * 2.0  # rounds multiply the per-expert GEMMs


def test_fused_mlp_cpu_hand_worked():
    f, b = EXP.fused_mlp_cpu_s(16.0, 436.2e-6, 763.4e-6)
    assert float(f) == pytest.approx(436.2e-6 * (1 - 190 / 1200 * 0.75))
    assert float(b) == pytest.approx(763.4e-6 * (1 - 550 / 2100 * 0.75))
    f64, b64 = EXP.fused_mlp_cpu_s(64.0, 436.2e-6, 763.4e-6)  # TE issue #2897's 64 experts: the measured op costs
    assert (float(f64), float(b64)) == pytest.approx((436.2e-6, 763.4e-6))


def test_the_fused_mlp_drops_the_swiglu_passes_and_two_quantisations():
    """With free GEMMs the fused layer's forward is shorter than the unfused one by exactly the SwiGLU's pass (read
    the fc1 output, write its result), the per-expert quantisation of fc2's input and that kernel's tails; BF16
    rows (no fused kernel) are unchanged."""
    x = _x(ep=1.0, fp8_mode=FP8.MX, moe_router_padding=True)
    p = DEFAULT_PARAMS
    plain, fused = _terms(x), _terms({**x, "moe_fused_mlp": True})
    n, k, fe, up, e, local = 1000.0, 2.0, 512.0, 2.0, 2.0, 8.0
    r = n * k  # routed copies on the one rank
    # ... and (stop 51) the grouped GEMMs' four MXFP8 scale swizzles forward, eight backward
    saved_f = (r * fe * e * (up + 1.0) + r * fe * FP8.CAST_BYTES[FP8.MX]) / 1e12 + (2.0 * local - 1.0 + 4.0) * p.kernel_tail_s
    assert float(plain["delta_f_s"]) - float(fused["delta_f_s"]) == pytest.approx(saved_f)
    saved_b = (2.0 * r * fe * e * (up + 1.0) + r * fe * up * FP8.CAST_BYTES[FP8.MX]) / 1e12 \
        + (2.0 * local - 1.0 + 8.0) * p.kernel_tail_s
    assert float(plain["delta_b_s"]) - float(fused["delta_b_s"]) == pytest.approx(saved_b)
    bf16 = _x(ep=1.0)
    assert float(_terms({**bf16, "moe_fused_mlp": True})["delta_f_s"]) == float(_terms(bf16)["delta_f_s"])


def test_the_fused_mlp_cpu_time_is_captured_by_whole_layer_graphs():
    x = _x(ep=1.0, fp8_mode=FP8.MX, moe_router_padding=True, moe_fused_mlp=True)
    p = DEFAULT_PARAMS
    eager = _terms(x)
    # eager: the router's and dispatcher's operations less the (fused) activation, and the fused op's measured cost
    # (8 local experts) less the grouped linear layers' module share the dense layer's launches already count
    ff, _ = EXP.fused_mlp_cpu_s(8.0, p.te_fused_moe_mlp_cpu_fwd_s, p.te_fused_moe_mlp_cpu_bwd_s)
    from gpusim.model import graphs as GRAPHS
    mlp_f = (1.0 - GRAPHS.ATTN_CPU_SHARE_FWD) * p.te_layer_cpu_fwd_s * p.te_layer_cpu_fp8_mult
    assert float(eager["cpu_f_s"]) == pytest.approx((EXP.MOE_FIXED_FWD_KERNELS - 1.0) * p.launch_cpu_s + ff - mlp_f)
    for mask in (16.0, 32.0):  # moe, full_iteration
        graphed = _terms({**x, "cuda_graphs": mask})
        assert float(graphed["cpu_f_s"]) <= DEFAULT_PARAMS.launch_cpu_s and float(graphed["cpu_b_s"]) <= DEFAULT_PARAMS.launch_cpu_s


def test_moe_fused_mlp_option_and_its_errors(db):
    from gpusim.errors import ScenarioError
    from gpusim.scenario import Scenario
    from gpusim.simulation import simulate
    from gpusim.workload import get_workload

    import dataclasses

    from gpusim.workload import build_from_spec

    q30 = get_workload("qwen3-30b-a3b")
    # an expert width Transformer Engine's validate_grouped_mlp_dims refuses (720 = 64 x 11.25)
    narrow = build_from_spec(dataclasses.replace(q30.transformer, expert_d_ff=720), id="q30-720", name="q30-720")
    kw = dict(workload=q30, node="dgx-b200", gpus=8, ep=8, precision="mxfp8", micro_batch=4,
              global_batch=512, seq_len=4096, kind="zero1", moe_dispatcher="deepep")
    fused = simulate(Scenario.create(**kw, moe_fused_mlp=True), db=db, recommend=False).step_s
    grouped = simulate(Scenario.create(**kw), db=db, recommend=False).step_s
    assert grouped > fused
    for over, msg in (({"precision": "bf16"}, "--precision mxfp8"), ({"node": "dgx-h100"}, "microscaling"),
                      ({"expert_tp": 2, "ep": 4}, "no expert tensor parallelism"),
                      ({"recompute_modules": ("moe_act",)}, "moe_act"),
                      ({"workload": narrow}, "multiples of 64")):
        with pytest.raises(ScenarioError, match=msg):
            simulate(Scenario.create(**{**kw, **over}, moe_fused_mlp=True), db=db, recommend=False)
    with pytest.raises(ScenarioError, match="only to mixture-of-experts"):
        simulate(Scenario.create(**{**kw, "workload": get_workload("llama3-8b"), "ep": 1}, moe_fused_mlp=True), db=db,
                 recommend=False)
    # the architecture rule itself (mxfp8 on a GPU without microscaling is refused before it, above)
    from gpusim.rules import check_fused_mlp
    from gpusim.strategy import Strategy

    st = Strategy(precision="mxfp8", moe_fused_mlp=True)
    check_fused_mlp(get_workload("qwen3-30b-a3b").transformer, st, db.gpu("gb300"))
    check_fused_mlp(get_workload("gpt-oss-120b").transformer, st, db.gpu("gb300"))  # 2880 = 64 x 45, biases, clamp
    with pytest.raises(ScenarioError, match="compute capability 10.x"):
        check_fused_mlp(get_workload("qwen3-30b-a3b").transformer, st, db.gpu("h100-sxm"))


def test_moe_fused_mlp_from_the_cli_exits_2_with_the_fix(capsys):
    from gpusim.cli import main

    rc = main(["predict", "--model", "qwen3-30b-a3b", "--node", "dgx-h100", "--gpus", "8", "--ep", "8",
               "--precision", "fp8", "--moe-fused-mlp"])
    err = capsys.readouterr().err
    assert rc == 2 and "--moe-fused-mlp needs" in err and "mxfp8" in err and "Traceback" not in err
    assert main(["predict", "--model", "qwen3-30b-a3b", "--node", "dgx-b200", "--gpus", "8", "--ep", "8",
                 "--precision", "mxfp8", "--moe-fused-mlp", "--json"]) == 0
    capsys.readouterr()
    assert main(["predict", "--model", "qwen3-30b-a3b", "--node", "dgx-b200", "--gpus", "8", "--ep", "8",
                 "--precision", "mxfp8", "--moe-fused-mlp"]) == 0
    assert "MoE experts (TE's fused grouped MLP)" in capsys.readouterr().out


def test_moe_fused_mlp_in_the_layout_search_follows_the_same_rules(capsys):
    """[issue 17] `sweep` refuses the fused grouped MLP where TE would not run it (Hopper, fp8) and runs it on
    Blackwell in mxfp8; `plan` gives the reason on the hardware options that cannot run it."""
    from gpusim.cli import main

    args = ["sweep", "--model", "qwen3-30b-a3b", "--gpus", "8", "--global-batch", "512", "--moe-fused-mlp"]
    assert main(args + ["--node", "dgx-h100", "--precision", "fp8"]) == 2
    err = capsys.readouterr().err
    assert "--moe-fused-mlp needs" in err and "compute capability 10.x" in err
    assert main(args + ["--node", "dgx-b200", "--precision", "mxfp8"]) == 0


def test_plan_rows_say_why_an_option_cannot_run_the_fused_mlp(db):
    from gpusim.params import DEFAULT_PARAMS
    from gpusim.search import Pins, plan_layout_rows
    from gpusim.sweeps import HardwareOption
    from gpusim.workload import get_workload

    wl = get_workload("qwen3-30b-a3b")
    options = [HardwareOption(gpu="b200", gpus_per_node=8, node="dgx-b200"),
               HardwareOption(gpu="h100-sxm", gpus_per_node=8, node="dgx-h100")]
    fp8 = plan_layout_rows(wl, options, [[1], [1]], global_batch=512, precision="fp8", db=db, params=DEFAULT_PARAMS,
                           pins=Pins(moe_fused_mlp=True))
    assert all("--precision mxfp8" in r for r in fp8["reason"]), list(fp8["reason"])
    mx = plan_layout_rows(wl, options, [[1], [1]], global_batch=512, precision="mxfp8", db=db, params=DEFAULT_PARAMS,
                          pins=Pins(moe_fused_mlp=True))
    by_gpu = dict(zip(mx["gpu"], mx["reason"]))
    assert by_gpu["b200"] == "" and "microscaling" in by_gpu["h100-sxm"], by_gpu


def test_plan_does_not_recommend_data_parallel_rows_that_ignore_an_moe_pin():
    """[issue 17] The plan's data-parallel rows cannot model the MoE options (no expert parallelism, no fused MLP):
    with --moe-fused-mlp on H100 only, nothing can run it, and the plan says why instead of recommending a
    data-parallel configuration that drops the option."""
    import gpusim

    a = gpusim.plan(model="qwen3-30b-a3b", tokens="1e9", gpu=["h100-sxm"], moe_fused_mlp=True)
    assert a.recommendation["status"] == "nothing-feasible"
    text = a.recommendation.get("summary") or a.recommendation.get("text")
    assert "do not model --moe-fused-mlp" in text and "--precision mxfp8" in text
