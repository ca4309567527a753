"""LLM layouts: closed forms (bubble, TP volume, Korthikanti activations, dp from the degrees), Megatron's
theoretical memory on a hand-worked case, and properties (parts sum to the step, more TP bandwidth never
slower, vectorised equals one at a time, tp = pp = 1 is the data-parallel model)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpusim.errors import ScenarioError
from gpusim.layout import Layout
from gpusim.model import comm as C
from gpusim.model.llm import activation_bytes_per_layer, bubble_frac, pipeline_step_s, tp_volume_bytes_per_layer
from gpusim.model.step import LLM_BREAKDOWN_KEYS, evaluate
from gpusim.params import DEFAULT_PARAMS
from gpusim.simulation import Scenario, build_inputs, simulate, stack_rows
from gpusim.workload import TransformerSpec, build_from_spec

SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

GPT175 = TransformerSpec(n_layers=96, d_model=12288, n_heads=96, vocab_size=51200, seq_len=2048, d_ff=49152,
                         learned_pos=True, max_positions=2048)


def _gpt(spec=GPT175):
    wl = build_from_spec(spec, id="gpt-test")
    return wl


def _scn(**kw):
    base = dict(workload=_gpt(), node="dgx-a100-80gb", gpus=64, nodes=8, precision="amp_fp16", tp=8, pp=8, vp=1,
                micro_batch=1, global_batch=64, recompute="full", sp=False, kind="ddp")
    base.update(kw)
    return Scenario(**base)


def _row(db, scn):
    return build_inputs(scn, db)[2]


# ---- closed forms ----------------------------------------------------------------------------------

def test_interleaved_bubble_is_pp_minus_one_over_vp_m():
    assert float(bubble_frac(8, 3, 64)) == pytest.approx(7 / 192)
    t = 2.0
    steady, bubble = pipeline_step_s(t, t, t, 8, 3, 64)
    assert float(steady) == pytest.approx(64 * t)
    assert float(bubble) / float(steady) == pytest.approx(7 / 192)
    # one stage: no bubble; an imbalanced last stage paces the steady state
    assert float(pipeline_step_s(t, t, t, 1, 1, 8)[1]) == 0.0
    steady, bubble = pipeline_step_s(t, t, 1.5 * t, 4, 1, 16)
    assert float(steady) == pytest.approx(16 * 1.5 * t)
    assert float(bubble) == pytest.approx(3 * t)  # first + 2 middle stages, each crossed once


def test_tp_volume_per_layer_is_four_all_reduces_of_the_activations(db):
    # Narayanan et al. SC'21: 2 all-reduces forward, 2 backward, of b s h elements each
    assert float(tp_volume_bytes_per_layer(2048, 12288, 2, 8)) == pytest.approx(2 * 2 * 7 / 8 * 2048 * 12288 * 2)
    scn = _scn(recompute="selective", pp=1, vp=1, gpus=8, nodes=1, global_batch=1, tp_async_bwd=False)
    out = evaluate(stack_rows([_row(db, scn)]), DEFAULT_PARAMS)
    row = _row(db, scn)
    one_ar = C.collective_time_s(C.ALL_REDUCE, 2048 * 12288 * 2.0, 8, 1, row["intra_busbw_bytes_per_s"],
                                 row["intra_hop_s"], row["inter_busbw_bytes_per_s"], row["inter_hop_s"], row["nvls"],
                                 base_latency_s=DEFAULT_PARAMS.coll_base_latency_s,
                                 nvls_gain_frac=DEFAULT_PARAMS.nvls_gain_frac,
                                 nvls_latency_s=DEFAULT_PARAMS.nvls_latency_s,
                                 tree_busbw_frac=DEFAULT_PARAMS.tree_busbw_frac)[0]
    # 96 layers x 4 all-reduces, plus the embedding's and the head's one each way
    assert float(out["tp_comm_exposed_s"][0]) == pytest.approx(float(one_ar) * (96 * 4 + 2))
    # Megatron 2022: the two backward all-reduces run beside the (longer) weight-gradient GEMMs, costing their slowdown
    out = evaluate(stack_rows([_row(db, scn.model_copy(update={"strategy": scn.strategy.model_copy(
        update={"tp_async_bwd": True})}))]), DEFAULT_PARAMS)
    slow = DEFAULT_PARAMS.overlap_slowdown_frac
    assert float(out["tp_comm_exposed_s"][0]) == pytest.approx(float(one_ar) * (96 * (2 + 2 * slow) + 2))


@pytest.mark.parametrize("t", [1, 2, 8])
def test_korthikanti_activation_formulas(t):
    s, b, h, a = 2048, 2, 12288, 96
    kw = dict(dropout=True, flash=False)
    sbh = s * b * h
    none_nosp, _ = activation_bytes_per_layer(s, b, h, a, h, h, 4 * h, 1, t, False, 0, **kw)
    none_sp, _ = activation_bytes_per_layer(s, b, h, a, h, h, 4 * h, 1, t, True, 0, **kw)
    sel_sp, _ = activation_bytes_per_layer(s, b, h, a, h, h, 4 * h, 1, t, True, 1, **kw)
    sel_nosp, _ = activation_bytes_per_layer(s, b, h, a, h, h, 4 * h, 1, t, False, 1, **kw)
    full, _ = activation_bytes_per_layer(s, b, h, a, h, h, 4 * h, 1, t, False, 2, **kw)
    assert float(none_nosp) == pytest.approx(sbh * (10 + 24 / t + 5 * a * s / (h * t)))
    assert float(none_sp) == pytest.approx(sbh / t * (34 + 5 * a * s / h))
    assert float(sel_sp) == pytest.approx(34 * sbh / t)
    assert float(sel_nosp) == pytest.approx(sbh * (10 + 24 / t))
    assert float(full) == pytest.approx(2 * sbh)


def test_layout_derives_dp_and_micro_batches():
    lay = Layout.create(gpus=64, tp=4, pp=4, vp=5, micro_batch=2, global_batch=128, n_layers=80, n_heads=64,
                        n_kv_heads=8, nvlink_domain_gpus=8)
    assert (lay.dp, lay.n_micro, lay.sp, lay.schedule) == (4, 16, True, "interleaved")
    assert lay.gpus == 64 and lay.global_batch == 128
    assert Layout.create(gpus=8, tp=1).sp is False


def test_layout_names_every_problem_and_what_would_work():
    with pytest.raises(ScenarioError) as e:
        Layout.create(gpus=64, tp=3, pp=4, vp=3, micro_batch=3, global_batch=128, n_layers=80, n_heads=64,
                      n_kv_heads=8, nvlink_domain_gpus=8)
    msg = str(e.value)
    for part in ("tp 3 x pp 4", "64 attention heads", "key/value heads", "80 layers", "tp could be"):
        assert part in msg
    with pytest.raises(ScenarioError, match="does not divide the global batch"):
        Layout.create(gpus=64, tp=8, pp=2, micro_batch=3, global_batch=128)
    with pytest.raises(ScenarioError, match="crosses the NVLink domain"):
        Layout.create(gpus=64, tp=16, n_heads=64, nvlink_domain_gpus=8)
    assert Layout.create(gpus=64, tp=16, n_heads=64, nvlink_domain_gpus=8, force_tp=True).dp == 4


# ---- memory: Megatron's theoretical formula on a hand-worked case ---------------------------------

def test_memory_matches_megatron_theoretical_formula(db):
    """GPT-3 175B, tp 8, pp 8, sp + selective, micro-batch 1: Megatron's theoretical_memory_usage counts 18 bytes
    per parameter (6 + 12/dp with the distributed optimizer) and 34 s b h / t bytes per layer, pp micro-batches
    on the first stage."""
    p = DEFAULT_PARAMS
    s, h, V, L, t, pp = 2048, 12288, 51200, 96, 8, 8
    layer = GPT175.layer_params()
    first_params = L / pp * layer / t + (V + s) * h / t  # word + position embeddings on the first stage
    acts = 34 * s * 1 * h / t * (L / pp) * pp
    for kind, dp, gpus, bytes_per_param in (("ddp", 1, 64, 18.0), ("zero1", 4, 256, 6 + 12 / 4)):
        res = simulate(_scn(recompute="selective", sp=True, kind=kind, gpus=gpus, nodes=gpus // 8, global_batch=64 * dp),
                       db=db, recommend=False)
        mb = res.memory_breakdown_bytes
        assert mb["weights"] + mb["gradients"] + mb["optimizer"] == pytest.approx(bytes_per_param * first_params)
        assert mb["activations"] == pytest.approx(acts * (1 + p.fragmentation_frac))
        assert res.memory_per_stage_bytes["first"] == pytest.approx(res.memory_per_gpu_bytes)
    # interleaving: the first stage holds 1 + (pp - 1)/(pp vp) times more
    a1 = simulate(_scn(recompute="selective", sp=True, vp=3), db=db, recommend=False).memory_breakdown_bytes
    assert a1["activations"] == pytest.approx(acts * (1 + 7 / 24) * (1 + p.fragmentation_frac))


def test_largest_micro_batch_that_fits_is_consistent(db):
    res = simulate(_scn(recompute="selective", sp=True), db=db, recommend=False)
    assert res.fits_in_memory and res.max_micro_batch >= 1
    over = simulate(_scn(recompute="selective", sp=True, micro_batch=res.max_micro_batch + 1,
                         global_batch=64 * (res.max_micro_batch + 1)), db=db, recommend=False)
    assert not over.fits_in_memory


# ---- properties -----------------------------------------------------------------------------------

@st.composite
def layouts(draw):
    tp = draw(st.sampled_from([1, 2, 4, 8]))
    pp = draw(st.sampled_from([1, 2, 4, 8]))
    vp = draw(st.sampled_from([1, 2, 3])) if pp > 1 else 1
    dp = draw(st.sampled_from([1, 2, 4]))
    micro = draw(st.sampled_from([1, 2, 4]))
    m = draw(st.sampled_from([1, 4, 16]))
    gpus = tp * pp * dp
    return dict(tp=tp, pp=pp, vp=vp, gpus=gpus, nodes=max(1, gpus // 8), micro_batch=micro,
                global_batch=micro * dp * m, recompute=draw(st.sampled_from(["none", "selective", "full"])),
                sp=draw(st.sampled_from([None, False])), kind=draw(st.sampled_from(["ddp", "zero1"])))


@SETTINGS
@given(layouts())
def test_llm_parts_sum_to_the_step_and_more_tp_bandwidth_is_never_slower(db, kw):
    scn = _scn(**kw)
    row = _row(db, scn)
    faster = {**row, "intra_busbw_bytes_per_s": 2.0 * row["intra_busbw_bytes_per_s"]}
    out = evaluate(stack_rows([row, faster]), DEFAULT_PARAMS)
    parts = sum(out["dp_comm_exposed_s" if k == "dp_comm_exposed_s" else k] for k in LLM_BREAKDOWN_KEYS)
    np.testing.assert_allclose(parts, out["step_s"], rtol=1e-12)
    assert out["step_s"][1] <= out["step_s"][0] * (1 + 1e-12)
    assert np.all(out["tp_comm_exposed_s"] >= 0) and np.all(out["pp_bubble_s"] >= 0)
    assert (kw["tp"] > 1) == (out["tp_comm_exposed_s"][0] > 0)
    assert (kw["pp"] > 1) == (out["pp_bubble_s"][0] > 0)


def test_vectorised_equals_one_at_a_time(db):
    kws = [dict(tp=8, pp=1, gpus=8, nodes=1, global_batch=4), dict(tp=4, pp=2, gpus=64, global_batch=64),
           dict(tp=8, pp=8, vp=3, gpus=64, recompute="selective", sp=True), dict(tp=2, pp=4, gpus=16, nodes=2,
                                                                                 kind="zero1", global_batch=32)]
    rows = [_row(db, _scn(**k)) for k in kws]
    together = evaluate(stack_rows(rows), DEFAULT_PARAMS)
    for i, r in enumerate(rows):
        alone = evaluate(stack_rows([r]), DEFAULT_PARAMS)
        for key in ("step_s", "memory_per_gpu_bytes", "tp_comm_exposed_s", "pp_bubble_s", "pp_p2p_exposed_s",
                    "comm_exposed_s", "max_micro_batch"):
            assert together[key][i] == pytest.approx(alone[key][0], rel=1e-12), key


def test_tp_pp_one_is_the_data_parallel_model(db):
    """A data-parallel row is the tp = pp = 1 case of the same evaluate(): the LLM fields at their defaults change
    nothing, and an LLM row at tp = pp = 1 has no TP, bubble or p2p terms and the same DP communication."""
    dp = Scenario(model="llama2-7b", gpu="h100-sxm", gpus=16, nodes=2, per_gpu_batch=4, seq_len=2048,
                  precision="amp_bf16")
    row = _row(db, dp)
    fabric = {"ll_max_busbw_bytes_per_s"}  # a hardware field with a default: the row's own stands
    with_defaults = {**row, **{f.name: f.default_factory() for f in dataclasses.fields(type(stack_rows([row])))
                               if f.default_factory is not dataclasses.MISSING and f.name not in fabric}}
    a = evaluate(stack_rows([row]), DEFAULT_PARAMS)
    b = evaluate(stack_rows([with_defaults]), DEFAULT_PARAMS)
    for key in a:
        np.testing.assert_array_equal(a[key], b[key])
    llm = _row(db, dp.with_changes(recompute="none", overlap_grad_reduce=True))
    c = evaluate(stack_rows([row, llm]), DEFAULT_PARAMS)
    assert c["tp_comm_exposed_s"][1] == c["pp_bubble_s"][1] == c["pp_p2p_exposed_s"][1] == 0.0
    # the same gradients over the same ranks: the DP all-reduce is the same collective (parameters counted from
    # the spec vs the workload's total agree to a fraction of a percent) once the data-parallel row takes the LLM
    # layout's bucket, Megatron-Core's 40 M parameters at dp 16 (stop 51; 4-byte gradients), not PyTorch DDP's 25 MiB
    from gpusim.model.step import megatron_bucket_params
    mib = float(megatron_bucket_params(16, 1.0)) * 4.0 / 2**20
    assert mib == pytest.approx(152.59, abs=0.01)
    same = evaluate(stack_rows([_row(db, dp.with_changes(bucket_mib=mib)), llm]), DEFAULT_PARAMS)
    assert same["allreduce_s"][1] == pytest.approx(same["allreduce_s"][0], rel=0.01)
    assert c["allreduce_s"][1] < c["allreduce_s"][0]  # fewer, larger buckets: less latency than 25 MiB ones
    # and the per-GEMM compute agrees with the layer-group roofline to within the GEMM-shape effects
    assert c["compute_s"][1] == pytest.approx(c["compute_s"][0], rel=0.35)


def test_tp_crossing_the_nvlink_domain_is_refused_then_slower_when_forced(db):
    spec = dataclasses.replace(GPT175, n_layers=8)
    with pytest.raises(ScenarioError, match="crosses the NVLink domain"):
        simulate(_scn(workload=_gpt(spec), tp=16, pp=1, gpus=16, nodes=2, global_batch=4), db=db)
    inside = simulate(_scn(workload=_gpt(spec), tp=8, pp=2, gpus=16, nodes=2, global_batch=4), db=db)
    forced = simulate(_scn(workload=_gpt(spec), tp=16, pp=1, gpus=16, nodes=2, global_batch=4, force_tp=True), db=db)
    # per layer (8 on one stage vs 4 per stage): the rings now cross the network
    assert forced.breakdown_s["tp_comm_exposed_s"] / 8 > inside.breakdown_s["tp_comm_exposed_s"] / 4
    # [issue 18] SHARP buys nothing here. NCCL runs CollNet (SHARP) only when asked (NCCL_COLLNET_ENABLE, off by
    # default: docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html; gpusim's step model leaves it out), and
    # between two nodes it could not lift the network term anyway: the double binary tree already sends each node's
    # buffer once per direction, as CollNet does, so NCCL's tuner rates both at the intra-node speed (NVIDIA/nccl
    # src/graph/tuning.cc @ b6475625fbcaa2c3c0e50eed2fa1255d7514d4a2: `bw = nNodes <= 2 || collnet ? bwIntra :
    # bwInter`; CollNet would only drop the tree's 0.92). The NVLink chain binds, so 200G RoCE without SHARP costs
    # what 200G InfiniBand with it does; the network matters once it is slower than that chain (100G RoCE: 1.875 x 85
    # GB/s < 240 GB/s of NVLink).
    def tp_s(inter):
        return simulate(_scn(workload=_gpt(spec), tp=16, pp=1, gpus=16, nodes=2, global_batch=4, force_tp=True,
                             inter=inter), db=db).breakdown_s["tp_comm_exposed_s"]
    assert tp_s("roce-200g") == pytest.approx(forced.breakdown_s["tp_comm_exposed_s"], rel=1e-9)
    slow = tp_s("roce-100g")
    assert slow > 1.2 * forced.breakdown_s["tp_comm_exposed_s"]
    assert slow / 8 > 1.2 * inside.breakdown_s["tp_comm_exposed_s"] / 4
    assert any(r["id"] == "llm-tp-domain" for r in forced.recommendations)


def test_a_deep_pipeline_with_few_micro_batches_reports_its_bubble(db):
    res = simulate(_scn(pp=16, tp=4, gpus=64, global_batch=8), db=db)
    assert res.breakdown_s["pp_bubble_s"] / res.step_s > 0.4
    msg = next(r["message"] for r in res.recommendations if r["id"] == "llm-bubble")
    assert "pp 16 with 8 micro-batches" in msg and "bubble" in msg
    assert res.parallelism == {"tp": 4, "pp": 16, "vp": 1, "cp": 1, "ep": 1, "dp": 1, "sp": False}


def test_a_calibrated_gemm_ceiling_replaces_the_database_figure(db):
    scn = _scn(recompute="selective", sp=True)
    base = simulate(scn, db=db, recommend=False)
    slower = simulate(scn, db=db, recommend=False,
                      params=DEFAULT_PARAMS.replace(gemm_ceiling_flop_per_s={"fp16": 0.5 * 271.2e12}))
    # GEMMs dominate compute: half the ceiling nearly doubles it (memory-bound kernels do not change)
    assert 1.7 < slower.breakdown_s["compute_s"] / base.breakdown_s["compute_s"] < 2.0


def test_megatron_optimizer_step_moves_its_bytes(db):
    """fp16 Adam in Megatron: Adam's 28 bytes per parameter plus zeroing, norm, master copy and unscale (22)."""
    p = DEFAULT_PARAMS
    for kind, shard in (("ddp", 1), ("zero1", 4)):
        scn = _scn(recompute="selective", sp=True, kind=kind, gpus=64 * shard, nodes=8 * shard, global_batch=64 * shard)
        res = simulate(scn, db=db, recommend=False)
        row = _row(db, scn)
        out = evaluate(stack_rows([row]), p)
        first = 12 * GPT175.layer_params() / 8 + (51200 + 2048) * 12288 / 8
        expected = (first / shard * (28 + 22) / (db.gpu("a100-sxm4-80gb").memory_bytes_per_s * p.mem_eff_frac)
                    + p.optimizer_kernels * max(p.kernel_tail_s, p.launch_cpu_s))
        assert float(out["optimizer_s"][0]) == pytest.approx(expected, rel=1e-9)
        assert res.breakdown_s["optimizer_s"] == pytest.approx(expected, rel=1e-9)


def test_many_rows_take_the_column_path_with_the_same_numbers(db):
    from gpusim.model import llm as LLM

    rows = [_row(db, _scn(**k)) for k in (dict(tp=8, pp=1, gpus=8, nodes=1, global_batch=4),
                                          dict(tp=8, pp=8, vp=3, gpus=64, recompute="selective", sp=True))]
    small = evaluate(stack_rows(rows), DEFAULT_PARAMS)
    big = evaluate(stack_rows(rows * (LLM._STACK_ROWS // 2 + 1)), DEFAULT_PARAMS)
    assert big["step_s"].shape[0] > LLM._STACK_ROWS
    for key in ("step_s", "tp_comm_exposed_s", "pp_bubble_s", "memory_per_gpu_bytes"):
        np.testing.assert_allclose(big[key][:2], small[key], rtol=1e-12)
        np.testing.assert_allclose(big[key][-2:], small[key], rtol=1e-12)


def test_backward_tp_collectives_beside_the_gradient_gemms():
    """Closed forms of tp_backward_s: synchronous (SC'21) every collective exposed, the extra all-gather of
    sequence parallelism included; asynchronous (Megatron 2022) a collective shorter than its GEMM costs only the
    GEMM's slowdown, a longer one also what outlasts the GEMM; the row-parallel all-gathers stay exposed."""
    from gpusim.model.llm import beside_gemm_s, tp_backward_s

    ar, ag, rs, slow = 0.8e-3, 0.4e-3, 0.4e-3, 0.5
    g = dict(dgrad_qkv_s=1e-3, wgrad_qkv_s=1e-3, dgrad_up_s=1.2e-3, wgrad_up_s=1.2e-3, slowdown_frac=slow)
    assert float(tp_backward_s(ar, ag, rs, False, False, **g)) == pytest.approx(2 * ar)
    assert float(tp_backward_s(ar, ag, rs, True, False, **g)) == pytest.approx(4 * ag + 2 * rs)
    assert float(tp_backward_s(ar, ag, rs, False, True, **g)) == pytest.approx(2 * slow * ar)
    assert float(tp_backward_s(ar, ag, rs, True, True, **g)) == pytest.approx(2 * ag + slow * (2 * ag + 2 * rs))
    # a collective longer than its GEMM: the excess is exposed, the GEMM slowed for the rest
    assert float(beside_gemm_s(3e-3, 1e-3, slow)) == pytest.approx(2e-3 + slow * 1e-3)
    # vectorised over the flags
    np.testing.assert_allclose(tp_backward_s(ar, ag, rs, np.array([False, True]), np.array([True, False]), **g),
                               [2 * slow * ar, 4 * ag + 2 * rs])


def test_megatron_bucket_size_hand_worked():
    """[stop 51] Megatron-Core's gradient bucket: max(40 M, 1 M x dp) parameters, one bucket without
    --overlap-grad-reduce (megatron/core/distributed/distributed_data_parallel.py)."""
    from gpusim.model.step import megatron_bucket_params
    got = megatron_bucket_params(np.array([1.0, 4.0, 40.0, 256.0]), 1.0)
    assert got.tolist() == [40e6, 40e6, 40e6, 256e6]
    assert np.isinf(megatron_bucket_params(256.0, 0.0))


def test_stated_ddp_bucket_size_replaces_megatrons_default():
    """[stop 58] --ddp-bucket-size (Megatron-Core DistributedDataParallelConfig.bucket_size, parameters) replaces the
    max(40 M, 1 M x dp) default where given; still one bucket without --overlap-grad-reduce."""
    from gpusim.model.step import megatron_bucket_params
    got = megatron_bucket_params(np.array([64.0, 64.0, 256.0]), 1.0, np.array([768e6, np.nan, 1e7]))
    assert got.tolist() == [768e6, 64e6, 1e7]
    assert np.isinf(megatron_bucket_params(64.0, 0.0, 768e6))


def test_fewer_larger_buckets_pay_the_collectives_latency_fewer_times(db):
    """[stop 58] One sequence per step over 512 GB300 (tp 2, cp 4: a 256-rank distributed-optimizer group): each of
    Megatron-Core's default 64 M-parameter buckets pays a 256-rank ring's per-step latency, so 768 M-parameter buckets
    (NVIDIA's MLPerf Llama 3.1 8B config) move the same bytes in less time, and a step with them is shorter; the bucket
    size reaches neither the computation nor the memory."""
    kw = dict(model="llama3-8b", node="gb300-nvl72", gpus=512, nodes=128, tp=2, cp=4, micro_batch=1,
              global_batch=64, seq_len=8192, precision="fp8", kind="zero1", cuda_graph_scope=["full_iteration"])
    default = simulate(Scenario.create(**kw), db=db, recommend=False)
    large = simulate(Scenario.create(**kw, ddp_bucket_params=768e6), db=db, recommend=False)
    assert large.detail["allreduce_s"] < 0.5 * default.detail["allreduce_s"]
    assert large.step_s < default.step_s
    assert large.breakdown_s["compute_s"] == default.breakdown_s["compute_s"]
    assert large.memory_per_gpu_bytes == default.memory_per_gpu_bytes
    with pytest.raises(ScenarioError, match="ddp_bucket_params"):
        Scenario.create(**kw, ddp_bucket_params=0.0)


def test_larger_buckets_are_advised_where_the_dp_exchange_is_latency_bound(db):
    """[stop 58] predict's llm-ddp-buckets advice: offered with its own gain where the data-parallel exchange shows in
    the step (one sequence per step on 512 GB300), carrying the bucket it tried; not once the run states its buckets,
    and not where the exchange hides (Llama 3 70B on 64 H100 at tp 4, pp 8, many micro-batches)."""
    from gpusim.diagnose import LARGE_DDP_BUCKET_PARAMS
    kw = dict(model="llama3-8b", node="gb300-nvl72", gpus=512, nodes=128, tp=2, cp=4, micro_batch=1,
              global_batch=64, seq_len=8192, precision="fp8", kind="zero1", cuda_graph_scope=["full_iteration"])
    base = simulate(Scenario.create(**kw), db=db)
    adv = [r for r in base.recommendations if r["id"] == "llm-ddp-buckets"]
    assert len(adv) == 1 and adv[0]["change"] == {"ddp_bucket_params": LARGE_DDP_BUCKET_PARAMS}
    tried = simulate(Scenario.create(**kw, ddp_bucket_params=LARGE_DDP_BUCKET_PARAMS), db=db, recommend=False)
    gain = tried.throughput_samples_per_s / base.throughput_samples_per_s - 1
    assert adv[0]["gain_frac"] == pytest.approx(gain, abs=1e-4)  # (the advice rounds its gain)
    stated = simulate(Scenario.create(**kw, ddp_bucket_params=LARGE_DDP_BUCKET_PARAMS), db=db)
    assert not [r for r in stated.recommendations if r["id"] == "llm-ddp-buckets"]
    hidden = simulate(Scenario.create(model="llama3-70b", gpu="h100-sxm", gpus=64, nodes=8, tp=4, pp=8, micro_batch=1,
                                      global_batch=256, seq_len=8192, precision="bf16", kind="zero1"), db=db)
    assert not [r for r in hidden.recommendations if r["id"] == "llm-ddp-buckets"]


def test_interleaving_widens_the_window_the_gradient_reduce_scatters_hide_in():
    """[stop 58] Megatron-Core's interleaved schedule reduce-scatters a chunk's gradients once its last micro-batch's
    backward ends, under the lower chunks' (vp - 1) x pp cooldown passes: (1 + (vp - 1) pp) / vp micro-batch backward
    passes of the stage; one without interleaving."""
    from gpusim.model.step import interleaved_grad_window_frac
    got = interleaved_grad_window_frac(np.array([1.0, 4.0, 8.0, 2.0]), np.array([4.0, 4.0, 8.0, 2.0]))
    np.testing.assert_allclose(got, [1.0, 3.25, 57.0 / 8.0, 1.5])


def test_an_llm_layout_takes_megatrons_buckets_not_ddps(db):
    """[stop 51] An LLM layout's data-parallel exchange is bucketed as Megatron-Core buckets it (more ranks, larger
    buckets), whatever Strategy.bucket_mib (PyTorch DDP's bucket_cap_mb) says; at dp 256, 1 M parameters per rank
    keep the ring's chunks large, so the exposed exchange grows little from dp 32 (dgxc-benchmarking's Nemotron-H 56B
    weak-scaling table measured 15.1 s at 32 H100 and 15.7 s at 2048)."""
    kw = dict(model="llama3-8b", gpu="h100-sxm", tp=2, pp=1, micro_batch=1, seq_len=4096, precision="bf16",
              kind="zero1")
    small = simulate(Scenario.create(**kw, gpus=64, nodes=8, global_batch=256), db=db, recommend=False)
    other = simulate(Scenario.create(**kw, gpus=64, nodes=8, global_batch=256, bucket_mib=1.0), db=db,
                     recommend=False)
    assert other.step_s == small.step_s  # the DDP bucket setting does not reach a Megatron layout
    big = simulate(Scenario.create(**kw, gpus=512, nodes=64, global_batch=2048), db=db, recommend=False)
    # the same work per GPU at 8x the data-parallel ranks: the exposed DP exchange grows by less than 25%
    assert big.breakdown_s["dp_comm_exposed_s"] < 1.25 * small.breakdown_s["dp_comm_exposed_s"]
