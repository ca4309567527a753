"""[issue 12] The MoE all-to-all's schedule (ep_overlap: none | 1f1b | dualpipe), the hierarchical (DeepEP-style)
dispatcher with node-limited routing, and FP8 dispatch: closed forms, properties through the model, bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpusim.cli import main
from gpusim.errors import ScenarioError
from gpusim.model import dualpipe as EPO
from gpusim.model import experts as EXP
from gpusim.simulation import Scenario, simulate

DSV3 = dict(model="deepseek-v3", seq_len=4096, gpu="h100-sxm", gpus=512, nodes=64, kind="zero1", global_batch=512,
            per_gpu_batch=1, tp=1, pp=8, ep=64, recompute="full", uneven_pp=True, precision="fp8")


# ---- closed forms ------------------------------------------------------------------------------------------------
def test_expected_distinct_nodes_closed_form():
    # DeepSeek-V3 on its 8-node EP group: 256 experts, 32 per node, top-8:
    # 8 (1 - C(224, 8) / C(256, 8)) = 8 (1 - prod_{i<8} (224 - i) / (256 - i))
    p_none = math.prod((224 - i) / (256 - i) for i in range(8))
    assert float(EXP.expected_distinct_nodes(8, 256, 8)) == pytest.approx(8 * (1 - p_none), rel=1e-12)
    assert float(EXP.expected_distinct_nodes(8, 256, 8)) == pytest.approx(5.295, abs=0.001)  # (0.875^8: 5.25)
    # with the node limit M = 4 (topk_group 4 of n_group 8): at most 4
    assert float(EXP.expected_distinct_nodes(8, 256, 8, 4)) == 4.0
    # one node: one; top-1: one; k experts on k or more nodes of one expert each: k
    assert float(EXP.expected_distinct_nodes(8, 256, 1)) == pytest.approx(1.0)
    assert float(EXP.expected_distinct_nodes(1, 256, 8)) == pytest.approx(1.0)
    assert float(EXP.expected_distinct_nodes(4, 8, 8)) == pytest.approx(4.0)


def test_node_limit_of_groups():
    # V3's 8 groups on 8 nodes: 4 nodes; on 16 nodes a group spans 2: 8 nodes; no limit: inf
    assert float(EXP.max_nodes_of_groups(4, 8, 8)) == 4.0
    assert float(EXP.max_nodes_of_groups(4, 8, 16)) == 8.0
    assert float(EXP.max_nodes_of_groups(4, 8, 2)) == 4.0
    assert math.isinf(float(EXP.max_nodes_of_groups(np.inf, 1, 8)))


def _coll_bytes(kind, size, ranks, nodes, inter=None):
    """A stand-in for the collectives model: returns the bytes (what the dispatcher hands it)."""
    return np.asarray(size, dtype=np.float64)


def test_deduplicated_dispatch_volume_hand_worked():
    # 4096 tokens, h 7168, bf16, top-8 of 256 experts on 8 nodes of 8 EP ranks, node limit 4: each token crosses
    # InfiniBand to min(4, 5.25) x 7/8 = 3.5 other nodes, not 8 x 7/8 = 7 copies (flat all-to-all)
    t, ib, nvl = EXP.hierarchical_dispatch_s(_coll_bytes, tokens=4096, top_k=8, n_experts=256, d_model=7168,
                                             elem_bytes=2.0, ep=64, n_nodes=8, max_nodes=4, nic_bytes_per_s=50e9)
    assert float(ib) == pytest.approx(4096 * 3.5 * 7168 * 2)
    # [issue 17] on arrival a token goes once to each GPU holding one of its experts (DeepEP's is_token_in_rank):
    # 64 (1 - C(252, 8) / C(256, 8)) = 7.676 rows per token over NVLink, not its 8 copies
    hit = 64 * (1 - math.comb(252, 8) / math.comb(256, 8))
    assert float(nvl) == pytest.approx(4096 * hit * 7168 * 2 * 7 / 8)
    flat_remote = 4096 * 8 * 7168 * 2 * 56 / 64
    assert float(ib) == pytest.approx(flat_remote / 2)


def test_fp8_dispatch_bytes():
    # E4M3 plus one fp32 scale per 1x128 tile (DeepSeek-V3 section 3.3.2)
    assert EXP.FP8_DISPATCH_BYTES == 1.0 + 4.0 / 128.0
    assert float(EXP.a2a_bytes_per_layer(4096, 8, 7168, EXP.FP8_DISPATCH_BYTES)) == 4096 * 8 * 7168 * 1.03125


def test_overlapped_pair_closed_form():
    # comm 1 s under 4 s of compute with 20/132 of the SMs: all hidden, compute slowed by 20/132 of the 1 s
    s = 20 / 132
    exp, interf = EPO.overlapped_s(1.0, 4.0, s)
    assert (float(exp), float(interf)) == pytest.approx((0.0, s))
    # comm 10 s over 4 s of compute: the pair takes the communication's 10 s (4 s of compute hides 4 / (1 - s))
    exp, interf = EPO.overlapped_s(10.0, 4.0, s)
    assert float(exp) + float(interf) + 4.0 == pytest.approx(10.0)


def test_dualpipe_bubble_closed_form():
    # (PP/2 - 1)(F&B + B - 3W) with PP 16, F&B 3, B 2, W 1: 7 x 2 = 14 (1F1B: 15 x 3 = 45)
    assert float(EPO.dualpipe_bubble_s(3.0, 2.0, 1.0, 16)) == 14.0
    assert float(EPO.dualpipe_bubble_s(3.0, 2.0, 1.0, 2)) == 0.0


def test_first_stage_activation_multiplier():
    """[issue 17] DualPipe (PP + 1) / PP; Megatron-Core's interleaved EP A2A overlap warms up one more chunk:
    pp 4, vp 2 holds 4 x 2 + 4 = 12 chunk-micro-batches instead of 11; 1F1B without interleaving and no overlap: 1."""
    assert float(EPO.activation_mult(EPO.DUALPIPE, 16)) == pytest.approx(17 / 16)
    assert float(EPO.activation_mult(EPO.ONE_F_ONE_B, 4, 2)) == pytest.approx(12 / 11)
    assert float(EPO.activation_mult(EPO.ONE_F_ONE_B, 4, 1)) == 1.0
    assert float(EPO.activation_mult(EPO.NONE, 4, 2)) == 1.0


def test_paired_fraction():
    # 1F1B: pp - 1 warm-up forwards and cool-down backwards of the first stage run unpaired; pp 1: one
    assert float(EPO.paired_frac(EPO.ONE_F_ONE_B, 16, 1, 64)) == pytest.approx(49 / 64)
    assert float(EPO.paired_frac(EPO.ONE_F_ONE_B, 1, 1, 8)) == pytest.approx(7 / 8)
    assert float(EPO.paired_frac(EPO.DUALPIPE, 16, 1, 64)) == 1.0
    assert float(EPO.paired_frac(EPO.NONE, 16, 1, 64)) == 0.0


# ---- properties ----------------------------------------------------------------------------------------------
@settings(max_examples=60, deadline=None)
@given(k=st.integers(1, 16), per_node=st.integers(1, 64), N=st.integers(1, 32), M=st.integers(1, 40))
def test_node_limit_never_increases_inter_node_bytes(k, per_node, N, M):
    E = per_node * N
    k = min(k, E)
    free = float(EXP.expected_distinct_nodes(k, E, N))
    limited = float(EXP.expected_distinct_nodes(k, E, N, M))
    assert limited <= free + 1e-12
    assert free <= min(k, N) + 1e-9
    if M >= N:
        assert limited == free


def _step(**kw):
    return simulate(Scenario(**{**DSV3, **kw}))


def test_overlap_is_never_slower_than_none():
    none = _step()
    one = _step(ep_overlap="1f1b")
    dual = _step(ep_overlap="dualpipe")
    assert one.step_s <= none.step_s
    assert dual.step_s <= none.step_s
    assert dual.breakdown_s["ep_comm_exposed_s"] < none.breakdown_s["ep_comm_exposed_s"]
    assert dual.breakdown_s["pp_bubble_s"] < none.breakdown_s["pp_bubble_s"]
    assert sum(dual.breakdown_s.values()) == pytest.approx(dual.step_s)
    # DualPipe holds two copies of the parameters
    assert dual.memory_per_gpu_bytes > none.memory_per_gpu_bytes


def test_deepep_and_fp8_dispatch_never_slower_across_nodes():
    flat = _step()
    deep = _step(moe_dispatcher="deepep")
    fp8 = _step(moe_dispatcher="deepep", ep_fp8_dispatch=True)
    assert deep.breakdown_s["ep_comm_exposed_s"] < flat.breakdown_s["ep_comm_exposed_s"]
    assert fp8.breakdown_s["ep_comm_exposed_s"] < deep.breakdown_s["ep_comm_exposed_s"]
    # FP8 dispatch needs the layers in FP8: in bf16 the flag is refused with the fix, not silently ignored
    with pytest.raises(ScenarioError, match="needs --precision fp8"):
        _step(precision="bf16", moe_dispatcher="deepep", ep_fp8_dispatch=True)


def test_the_hierarchical_dispatch_forwards_the_group_limited_rows():
    """[issue 17] DeepSeek-V3 on 512 H100 at ep 64 (8 nodes) with the flex dispatcher: the NVLink leg of each
    dispatch carries a token once per rank of its 4 groups it reaches (7.36), not once per rank of an unlimited
    router (7.68); moe_layer_terms hands hierarchical_dispatch_s that figure."""
    hit = float(EXP.expected_distinct_ranks(8, 256, 64, 4, 8))
    assert hit == pytest.approx(32 * (1 - math.comb(124, 8) / math.comb(128, 8)))
    seen = {}

    def coll(kind, size, ranks, nodes, inter=None):
        seen.setdefault(int(kind), []).append(float(np.max(size)))
        return np.asarray(size, dtype=np.float64) * 1e-12

    EXP.hierarchical_dispatch_s(coll, tokens=4096, top_k=8, n_experts=256, d_model=7168, elem_bytes=2.0, ep=64,
                                n_nodes=8, max_nodes=4, nic_bytes_per_s=50e9, ranks_hit=hit)
    from gpusim.model import comm as C

    assert seen[C.ALL_TO_ALL][-1] == pytest.approx(4096 * hit * 7168 * 2)


def test_deepep_inside_one_node_is_a_flat_exchange_of_one_row_per_rank_reached():
    """Inside one node DeepEP's exchange is flat, as the all-to-all, but [issue 17] moves a token once to each rank
    holding one of its experts (DeepSeek-V3's routing: 4 of 8 groups, so 3.6 of the 8 ranks on average), not its 8
    copies; its local permutations differ too (received tokens permuted once to the experts, no pre-dispatch
    permutation and no chunk sort: gpusim.model.experts.permutation_bytes), and they cost less."""
    kw = dict(gpus=64, nodes=8, ep=8, pp=8, global_batch=64)
    deep, flat = _step(**kw, moe_dispatcher="deepep"), _step(**kw)
    ratio = deep.layer_s["a2a_s"] / flat.layer_s["a2a_s"]
    assert ratio == pytest.approx(float(EXP.expected_distinct_ranks(8, 256, 8, 4, 8)) / 8, rel=0.05)
    assert deep.breakdown_s["ep_comm_exposed_s"] < flat.breakdown_s["ep_comm_exposed_s"]
    assert deep.step_s < flat.step_s


def test_the_config_reads_group_limited_routing():
    from gpusim.simulation import resolve_workload, transformer_of

    spec = transformer_of(resolve_workload(Scenario(**DSV3)))
    assert (spec.moe_n_groups, spec.moe_topk_groups) == (8, 4)


def test_the_search_takes_the_schedule_and_its_rules():
    from gpusim.search import R_DUALPIPE, Pins, search_layouts

    scn = Scenario(**{**DSV3, "ep_overlap": "none"})
    res = search_layouts(scn, pins=Pins(ep=64, pp=8, ep_overlap="dualpipe", recompute="full", micro_batch=1))
    assert res["best"] is not None
    none = search_layouts(scn, pins=Pins(ep=64, pp=8, recompute="full", micro_batch=1))
    assert np.nanmin(res["out"]["step_s"]) <= np.nanmin(none["out"]["step_s"])
    odd = search_layouts(scn, pins=Pins(ep=64, ep_overlap="dualpipe", recompute="full", micro_batch=1))
    lay = odd["layouts"]
    bad = (lay["pp"] % 2 == 1) | (lay["vp"] > 1)
    assert np.all((lay["reason"][bad] == R_DUALPIPE) | (lay["reason"][bad] < R_DUALPIPE))


# ---- bad input --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("flags, words", [
    (["--model", "llama3-8b", "--tp", "2", "--ep-overlap", "1f1b"], "mixture-of-experts"),
    (["--model", "llama3-8b", "--tp", "2", "--moe-dispatcher", "deepep"], "mixture-of-experts"),
    (["--model", "deepseek-v3", "--pp", "1", "--ep", "8", "--ep-overlap", "dualpipe"], "even number of pipeline"),
])
def test_bad_input_is_one_message_and_exit_2(flags, words, capsys):
    rc = main(["predict", *flags, "--gpu", "h100-sxm", "--gpus", "8", "--micro-batch", "1", "--global-batch", "8",
               "--seq-len", "4096"])
    err = capsys.readouterr().err
    assert rc == 2
    assert words in err


def test_dualpipe_micro_batch_rule():
    with pytest.raises(ScenarioError, match="even number of micro-batches"):
        _step(ep_overlap="dualpipe", global_batch=7 * 64)  # 7 micro-batches per step on dp 64


def test_layer_pair_phases_hand_worked():
    """[issue 17] Megatron-Core's TransformerLayerSchedulePlan.run: three phases per forward/backward layer pair.
    Attention 1 (fwd) + 2 (bwd), MLP 2 + 4, all-to-alls 1.5 each, s = 0: phase 1 max(1, 1.5) = 1.5, phase 2
    max(4 + 2, 3, 1.5 + 2, 2 + 1.5) = 6, phase 3 max(2, 1.5) = 2: 9.5 against 9 of computation, 0.5 exposed (the
    whole-step balance max(9, 6) would hide all of it)."""
    exp, interf = EPO.layer_pair_comm_s(1.0, 2.0, 2.0, 4.0, 1.5, 0.0)
    assert float(exp) == pytest.approx(0.5) and float(interf) == 0.0
    exp_all, _ = EPO.overlapped_s(6.0, 9.0, 0.0)
    assert float(exp_all) == 0.0
    # the dependency bound: a forward MLP longer than its phase's backward waits for its own dispatch
    exp, _ = EPO.layer_pair_comm_s(10.0, 10.0, 5.0, 0.5, 3.0, 0.0)  # phase 2 max(5.5, 6, 8, 3.25) = 8
    assert float(exp) == pytest.approx(8.0 - 5.5)
    # with the SMs shared, long computation pays only the interference s x (communication it runs under)
    exp, interf = EPO.layer_pair_comm_s(10.0, 10.0, 10.0, 20.0, 1.0, 0.2)
    assert float(exp) == 0.0 and float(interf) == pytest.approx(0.2 * 4.0)


def test_1f1b_step_uses_the_layer_phases():
    """Through the model: an MoE layout whose all-to-alls are long against its attention keeps part of them exposed
    with ep_overlap 1f1b, where the whole-step balance hid them; never more than without the overlap."""
    from gpusim.api import predict

    kw = dict(model="qwen3-235b-a22b", node="dgx-h100", gpus=256, tp=2, pp=8, vp=4, ep=32, per_gpu_batch=1,
              global_batch=2048, seq_len=4096, precision="fp8", strategy="zero1", uneven_pp=True)
    none = predict(**kw).breakdown_s
    over = predict(**kw, ep_overlap="1f1b").breakdown_s
    assert 0.0 < over["ep_comm_exposed_s"] < none["ep_comm_exposed_s"]
    assert sum(over.values()) < sum(none.values())
    # the layer phases expose more than the whole-step balance would: the exposed part is above the SM interference
    # alone (ep_comm_sms / SMs of the communication hidden)
    assert over["ep_comm_exposed_s"] > 20.0 / 132.0 * none["ep_comm_exposed_s"]


def test_expected_distinct_ranks_hand_worked():
    """[issue 17] The EP ranks a token's experts fall on (DeepEP / HybridEP send a token once per rank)."""
    def spread(k, E, n):  # n (1 - C(E - E/n, k) / C(E, k))
        return n * (1 - math.comb(E - E // n, k) / math.comb(E, k))

    assert float(EXP.expected_distinct_ranks(8, 256, 8)) == pytest.approx(spread(8, 256, 8))
    assert float(EXP.expected_distinct_ranks(8, 128, 8)) == pytest.approx(spread(8, 128, 8))
    # DeepSeek-V3's routing (a token's experts in 4 of 8 groups): on 64 ranks its experts lie in 32 ranks holding 128
    limited = float(EXP.expected_distinct_ranks(8, 256, 64, 4, 8))
    assert limited == pytest.approx(32 * (1 - math.comb(124, 8) / math.comb(128, 8)))
    assert limited < float(EXP.expected_distinct_ranks(8, 256, 64))
    # fewer ranks than groups: 4 of 8 groups reach 4 (1 - C(6, 4) / C(8, 4)) = 3.143 of 4 ranks, and the 8 experts fall
    # on expected_distinct_nodes(8, 128, 3.143) of those; one group per token is one rank
    reach = 4 * (1 - math.comb(6, 4) / math.comb(8, 4))
    few = float(EXP.expected_distinct_ranks(8, 256, 4, 4, 8))
    assert few == pytest.approx(float(EXP.expected_distinct_nodes(8, 128, reach)))
    assert few < reach < float(EXP.expected_distinct_ranks(8, 256, 4))
    assert float(EXP.expected_distinct_ranks(8, 256, 4, 1, 8)) == pytest.approx(1.0)
    assert float(EXP.expected_distinct_ranks(8, 256, 2, 1, 8)) == pytest.approx(1.0)
    # vectorised over the rows of a sweep
    got = EXP.expected_distinct_ranks(np.array([8.0, 8.0]), 256, np.array([4.0, 64.0]), np.array([4.0, np.inf]), 8)
    assert got == pytest.approx([few, float(EXP.expected_distinct_ranks(8, 256, 64))])
    assert float(EXP.expected_distinct_ranks(8, 256, 1)) == pytest.approx(1.0)
    assert float(EXP.expected_distinct_ranks(1, 256, 64)) == pytest.approx(1.0)


def test_the_flex_dispatcher_moves_one_row_per_rank_reached_inside_a_node():
    """[issue 17] Qwen3-30B-A3B on 8 B200 at ep 8: DeepEP / HybridEP move a token once to each of the 5.3 ranks its 8
    experts fall on; NCCL's all-to-all (Megatron-Core's alltoall dispatcher) moves its 8 copies. The sizes are large
    enough that the latency is a few percent."""
    base = dict(model="qwen3-30b-a3b", seq_len=4096, gpu="b200", gpus=8, kind="zero1", global_batch=32,
                per_gpu_batch=4, ep=8, precision="bf16")
    flat = simulate(Scenario.create(**base), recommend=False).layer_s["a2a_s"]
    flex = simulate(Scenario.create(**base, moe_dispatcher="deepep"), recommend=False).layer_s["a2a_s"]
    hit = float(EXP.expected_distinct_ranks(8, 128, 8))
    assert flex / flat == pytest.approx(hit / 8, rel=0.05)


def test_an_all_to_all_reaches_less_of_the_links_than_the_ring():
    """[issue 17] ModelParams.a2a_intra_busbw_frac (0.896, the open in-node all-to-all sweeps' median): at 8 GiB on 8
    GPUs of one node the all-to-all's transfer term is 1 / 0.896 of the ring bandwidth's, the all-reduce unchanged."""
    from gpusim.model import comm as C
    from gpusim.params import DEFAULT_PARAMS

    ring = DEFAULT_PARAMS.replace(a2a_intra_busbw_frac=1.0)
    kw = dict(base_latency_s=0.0, nvls_gain_frac=1.3, nvls_latency_s=23e-6, tree_busbw_frac=0.92)

    def t(c, params):
        return float(C.collective_time_s(c, 8 * 2**30, 8, 1, 600e9, 1e-6, 50e9, 5e-6, False,
                                         tuning=C.tuning_from_params(params), **kw)[0])

    a2a_ratio = t(C.ALL_TO_ALL, DEFAULT_PARAMS) / t(C.ALL_TO_ALL, ring)
    assert a2a_ratio == pytest.approx(1 / 0.896, rel=1e-3)
    assert t(C.ALL_REDUCE, DEFAULT_PARAMS) == t(C.ALL_REDUCE, ring)
