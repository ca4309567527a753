"""Closed forms and edge cases of the pure model (gpusim.model)."""

from __future__ import annotations


import numpy as np
import pytest

from gpusim.model import comm as C
from gpusim.model.memory import max_micro_batch, memory_per_gpu_bytes
from gpusim.model.sync import expected_max_std_normal, straggler_s
from gpusim.simulation import Scenario, simulate


def _coll(kind, size, n, nodes=1, intra=100e9, hop=1e-6, inter=50e9, inter_hop=5e-6, nvls=False, algorithm=-1):
    return C.collective_time_s(kind, size, n, nodes, intra, hop, inter, inter_hop, nvls, base_latency_s=10e-6,
                               nvls_gain_frac=1.3, nvls_latency_s=100e-6, tree_busbw_frac=0.9, algorithm=algorithm)


def test_bus_factors_are_nccl_tests_definitions():
    n = 8
    assert C.bus_factor(C.ALL_REDUCE, n) == pytest.approx(2 * 7 / 8)
    assert C.bus_factor(C.REDUCE_SCATTER, n) == pytest.approx(7 / 8)
    assert C.bus_factor(C.ALL_GATHER, n) == pytest.approx(7 / 8)
    assert C.bus_factor(C.BROADCAST, n) == 1.0
    assert C.bus_factor(C.ALL_REDUCE, 1) == 0.0


def test_ring_all_reduce_closed_form_with_the_simple_protocol():
    # Simple: NCCL's ring base latency 8.4 us, per hop the link's latency plus Simple's extra (3.4 - 0.6 us on NVLink)
    t, algo = _coll(C.ALL_REDUCE, 1e9, 8)
    expected = 10e-6 + 8.4e-6 + 2 * 7 * (1e-6 + 2.8e-6) + 2 * 7 / 8 * 1e9 / 100e9
    assert float(t) == pytest.approx(expected)
    assert int(algo) == C.ALGO_RING


def test_one_rank_means_no_communication():
    t, algo = _coll(C.ALL_REDUCE, 1e9, 1)
    assert float(t) == 0.0 and int(algo) == C.ALGO_NONE


def test_nvls_only_for_large_all_reduce_on_nvls_switch():
    small, a_small = _coll(C.ALL_REDUCE, 1e6, 8, nvls=True)
    large, a_large = _coll(C.ALL_REDUCE, 1e9, 8, nvls=True)
    rs, a_rs = _coll(C.REDUCE_SCATTER, 1e9, 8, nvls=True)
    assert int(a_small) == C.ALGO_RING and int(a_large) == C.ALGO_NVLS and int(a_rs) == C.ALGO_RING
    ring_large, _ = _coll(C.ALL_REDUCE, 1e9, 8, nvls=False)
    assert float(large) < float(ring_large)


def test_multi_node_ring_is_limited_by_the_node_nics_and_tree_wins_small_messages():
    big, _ = _coll(C.ALL_REDUCE, 4e9, 64, nodes=8, intra=400e9, inter=50e9)
    # bandwidth term at the inter-node bus bandwidth (the slower level)
    assert float(big) == pytest.approx(2 * 63 / 64 * 4e9 / 50e9, rel=0.02)
    _, algo_small = _coll(C.ALL_REDUCE, 1e3, 64, nodes=8)
    assert int(algo_small) == C.ALGO_TREE


def test_hierarchical_equals_its_formula():
    g, nodes, s = 8.0, 4.0, 1e9
    t = C.hierarchical_all_reduce_s(s, g, nodes, 200e9, 1e-6, 100e9, 5e-6, 10e-6)
    rs_ag = 2 * (10e-6 + 7 * 1e-6 + 7 / 8 * s / 200e9)
    cross = 10e-6 + 2 * 3 * 5e-6 + 2 * 3 / 4 * (s / 8) / (100e9 / 8)
    assert float(t) == pytest.approx(rs_ag + cross)


def test_bucketed_time_counts_each_bucket_and_exposes_the_last():
    calls = []

    def fn(x):
        calls.append(np.asarray(x).copy())
        return 1e-3 + np.asarray(x) / 1e9

    total, last = C.bucketed_time_s(np.array([60e6]), np.array([25e6]), fn)
    # two full buckets of 25 MB and one of 10 MB
    assert total[0] == pytest.approx(2 * (1e-3 + 0.025) + (1e-3 + 0.010))
    assert last[0] == pytest.approx(1e-3 + 0.010)


def test_expected_max_of_normals_matches_known_values():
    # E[max of n standard normals]: 0.5642 (n=2), 1.0294 (4), 1.4236 (8), 1.7660 (16) (order statistics tables)
    got = expected_max_std_normal(np.array([1, 2, 4, 8, 16]))
    assert got == pytest.approx([0.0, 0.5642, 1.0294, 1.4236, 1.7660], abs=2e-3)
    assert straggler_s(1.0, 1, 0.05, 1.0) == 0.0
    assert straggler_s(1.0, 8, 0.0, 0.5) == pytest.approx(1.0)  # one GPU at half speed doubles the step


def _mem(stage, ranks=8, **kw):
    args = dict(params=1e9, act_bytes_per_sample=1e8, act_ckpt_bytes_per_sample=1e7, act_block_bytes_per_sample=1e6,
                micro_batch=4, checkpointing=False, act_scale=1.0, shard_stage=stage, shard_ranks=ranks,
                weight_bytes_per_param=4, grad_bytes_per_param=4, opt_bytes_per_param=8, master_bytes_per_param=0,
                gather_bytes_per_param=2, ddp_buckets=False, cpu_offload=False, multi_gpu=True, fwd_kernels=200,
                framework_overhead_bytes=0.0, comm_buffer_bytes=0.0, fragmentation_frac=0.0)
    args.update(kw)
    return memory_per_gpu_bytes(**args)


def test_zero_stages_shard_what_the_paper_says():
    full = _mem(0)
    assert float(full["weights"]) == 4e9 and float(full["gradients"]) == 4e9 and float(full["optimizer"]) == 8e9
    z1, z2, z3 = _mem(1), _mem(2), _mem(3)
    assert float(z1["optimizer"]) == pytest.approx(8e9 / 8)
    assert float(z2["gradients"]) == pytest.approx(4e9 / 8)
    assert float(z3["weights"]) == pytest.approx(4e9 / 8)  # ZeRO-3 weights bytes = total / dp
    totals = [float(m["total"]) for m in (full, z1, z2, z3)]
    assert totals[0] > totals[1] > totals[2] > totals[3]


def test_checkpointing_and_offload_reduce_memory():
    assert float(_mem(0, checkpointing=True)["activations"]) < float(_mem(0)["activations"])
    assert float(_mem(3, cpu_offload=True)["optimizer"]) == 0.0


def test_max_micro_batch_is_the_largest_that_fits():
    m = _mem(0)
    cap = float(m["total"]) + 2.5 * float(m["activation_per_sample"])
    b = int(max_micro_batch(m, cap))
    assert b == 4 + 2
    assert float(_mem(0, micro_batch=b)["total"]) <= cap < float(_mem(0, micro_batch=b + 1)["total"])


@pytest.fixture(scope="module")
def rn50_8(db):
    return simulate(Scenario(model="resnet50", gpu="h100-sxm", gpus=8, per_gpu_batch=256), db=db)


def test_parts_sum_to_the_step(rn50_8):
    assert sum(rn50_8.breakdown_s.values()) == pytest.approx(rn50_8.step_s, rel=1e-12)


def test_one_gpu_has_no_communication_and_perfect_efficiency(db):
    r = simulate(Scenario(model="resnet50", gpu="h100-sxm", gpus=1, per_gpu_batch=256), db=db)
    assert r.breakdown_s["comm_exposed_s"] == 0.0 and r.breakdown_s["sync_s"] == 0.0
    assert r.speedup == pytest.approx(1.0) and r.scaling_efficiency_frac == pytest.approx(1.0)


def test_throughput_and_mfu_follow_from_the_step(rn50_8, db):
    from gpusim.workload import get_workload

    w = get_workload("resnet50")
    assert rn50_8.throughput_samples_per_s == pytest.approx(8 * 256 / rn50_8.step_s)
    peak = db.gpu("h100-sxm").peak_flop_per_s("bf16")
    assert rn50_8.mfu_frac == pytest.approx(3 * w.fwd_flop_per_sample * 8 * 256 / (rn50_8.step_s * 8 * peak))


def test_accumulation_synchronises_once_per_optimizer_step(db):
    base = dict(model="bert-large", gpu="a100-sxm4-80gb", gpus=16, nodes=2, per_gpu_batch=16, precision="amp_bf16")
    one = simulate(Scenario(**base), db=db, recommend=False)
    four = simulate(Scenario(**base, accum=4), db=db, recommend=False)
    assert four.detail["comm_total_s"] == pytest.approx(one.detail["comm_total_s"], rel=1e-9)
    assert four.breakdown_s["compute_s"] == pytest.approx(4 * one.breakdown_s["compute_s"], rel=1e-9)
    assert four.throughput_samples_per_s >= one.throughput_samples_per_s


def test_data_parallel_is_slower_than_ddp(db):
    kw = dict(model="resnet50", gpu="v100-sxm2-16gb", gpus=8, per_gpu_batch=64, precision="amp_fp16")
    dp = simulate(Scenario(**kw, strategy="dp"), db=db)
    ddp = simulate(Scenario(**kw, strategy="ddp"), db=db, recommend=False)
    assert dp.throughput_samples_per_s < ddp.throughput_samples_per_s
    assert any(r["id"] == "use-ddp" and r["gain_frac"] > 0 for r in dp.recommendations)


def test_baseline_throughput_reproduces_the_measured_single_gpu(db):
    r = simulate(Scenario(model="resnet50", gpu="a100-sxm4-80gb", gpus=8, per_gpu_batch=256, precision="amp_fp16",
                          baseline_throughput=2000.0), db=db)
    assert r.single_gpu_throughput_samples_per_s == pytest.approx(2000.0, rel=0.01)
    assert r.throughput_samples_per_s < 8 * 2000.0


def test_loader_without_workers_adds_to_the_step(db):
    kw = dict(model="resnet50", gpu="a100-sxm4-80gb", gpus=8, per_gpu_batch=256)
    synthetic = simulate(Scenario(**kw), db=db, recommend=False)
    inline = simulate(Scenario(**kw, num_workers=0), db=db, recommend=False)
    workers = simulate(Scenario(**kw, num_workers=8), db=db, recommend=False)
    assert synthetic.breakdown_s["data_wait_s"] == 0.0
    assert inline.breakdown_s["data_wait_s"] > workers.breakdown_s["data_wait_s"] >= 0.0
    assert inline.step_s > workers.step_s >= synthetic.step_s


def test_a_throttled_gpu_sets_everyones_pace(db):
    kw = dict(model="resnet50", gpu="h100-sxm", gpus=8, per_gpu_batch=256)
    ok = simulate(Scenario(**kw), db=db, recommend=False)
    slow = simulate(Scenario(**kw, slowest_gpu_speed_frac=0.8), db=db, recommend=False)
    assert slow.breakdown_s["sync_s"] == pytest.approx(ok.breakdown_s["sync_s"] + ok.breakdown_s["compute_s"] * 0.25,
                                                       rel=1e-6)


def test_fsdp_recommended_when_the_model_does_not_fit(db):
    r = simulate(Scenario(model="llama2-7b", gpu="a100-sxm4-80gb", gpus=8, per_gpu_batch=1, seq_len=4096), db=db)
    assert not r.fits_in_memory and r.bottleneck == "memory"
    fit = [x for x in r.recommendations if x["id"] == "fit-memory"]
    assert fit and "fits" in fit[0]["message"]
    z3 = simulate(Scenario(model="llama2-7b", gpu="a100-sxm4-80gb", gpus=8, per_gpu_batch=1, seq_len=4096,
                           strategy="fsdp-full", activation_checkpointing=True), db=db, recommend=False)
    assert z3.fits_in_memory


def test_small_per_gpu_batch_is_flagged(db):
    r = simulate(Scenario(model="resnet50", gpu="h100-sxm", gpus=8, per_gpu_batch=4), db=db)
    assert r.gpu_util_frac < 0.8
    assert any(x["id"] == "larger-batch" for x in r.recommendations)


def test_pcie_cross_socket_is_slower_than_nvswitch(db):
    kw = dict(model="bert-large", gpu="a100-pcie-80gb", gpus=8, per_gpu_batch=8, seq_len=128)
    sw = simulate(Scenario(**kw, intra_topology="pcie-switch"), db=db, recommend=False)
    sys_ = simulate(Scenario(**kw, intra_topology="pcie-cross-socket"), db=db, recommend=False)
    assert sys_.step_s > sw.step_s
    assert sys_.intra_path == "pcie-cross-socket"


def test_scenario_errors_are_clear(db):
    from gpusim.errors import GpusimError, ScenarioError, UnknownIdError

    with pytest.raises(ScenarioError, match="cannot be split evenly"):
        Scenario.create(model="resnet50", gpu="h100-sxm", gpus=3, nodes=2, per_gpu_batch=8)
    with pytest.raises(ScenarioError, match="per_gpu_batch"):
        Scenario.create(model="resnet50", gpu="h100-sxm", gpus=1, per_gpu_batch=0)
    with pytest.raises(UnknownIdError, match="did you mean 'h100-sxm'"):
        simulate(Scenario(model="resnet50", gpu="h100-sxmm", gpus=1, per_gpu_batch=8), db=db)
    with pytest.raises(GpusimError, match="resnet50"):
        simulate(Scenario(model="resnet-5000", gpu="h100-sxm", gpus=1, per_gpu_batch=8), db=db)
    with pytest.raises(ScenarioError, match="DataParallel"):
        Scenario.create(model="resnet50", gpu="h100-sxm", gpus=16, nodes=2, per_gpu_batch=8, strategy="dp")


def test_what_ifs_scale_a_measured_baseline_by_the_models_ratio(db):
    from gpusim.params import DEFAULT_PARAMS
    from gpusim.simulation import _apply_baseline, _rescaled_override, _single_gpu, build_inputs, resolve_hardware, \
        scenario_row

    scn = Scenario(model="resnet50", gpu="a100-sxm4-80gb", gpus=8, per_gpu_batch=64, baseline_throughput=1500.0)
    hw, wl, row = build_inputs(scn, db)
    one = scenario_row(_single_gpu(scn), resolve_hardware(_single_gpu(scn), db), wl, DEFAULT_PARAMS)
    rows = [row, one]
    _apply_baseline(rows, scn, DEFAULT_PARAMS)
    measured = rows[0]["compute_override_s"]
    same = _rescaled_override(rows, dict(row), DEFAULT_PARAMS)
    assert same == pytest.approx(measured)  # an unchanged variant keeps the measured time
    bigger = scenario_row(scn.with_changes(per_gpu_batch=128), hw, wl, DEFAULT_PARAMS)
    assert _rescaled_override(rows, bigger, DEFAULT_PARAMS) == pytest.approx(2 * measured, rel=0.15)


def test_cpu_and_storage_come_from_a_node_never_from_code(db):
    import dataclasses

    from gpusim.errors import ScenarioError
    from gpusim.simulation import resolve_hardware

    kw = dict(model="resnet50", gpu="a100-pcie-80gb", gpus=12, per_gpu_batch=64)
    hw = resolve_hardware(Scenario(**kw), db)
    generic = db.node("pcie-8x-switch")
    assert hw.cpu_cores_per_gpu == pytest.approx(generic.cpu_cores / generic.gpus_per_node)
    bare = dataclasses.replace(db, nodes={k: v for k, v in db.nodes.items() if not k.startswith("pcie-")})
    with pytest.raises(ScenarioError, match="--cpu-cores-per-gpu"):
        resolve_hardware(Scenario(**kw), bare)
    ok = resolve_hardware(Scenario(**kw, cpu_cores_per_gpu=4, storage_gbyte_per_s=2), bare)
    assert ok.cpu_cores_per_gpu == 4


def test_a_language_models_vision_sized_batch_gets_a_micro_batch_that_fits(db):
    """A per-GPU batch of 256 sequences fits under no strategy; the advice is the fastest strategy at a micro-batch
    of 1 with the accumulation that keeps the global batch, and applying its change makes the scenario fit."""
    kw = dict(model="nemotron-3-nano-30b-a3b", gpu="h100-sxm", gpus=64, nodes=8)
    r = simulate(Scenario(**kw, per_gpu_batch=256), db=db)
    assert not r.fits_in_memory
    fit = [x for x in r.recommendations if x["id"] == "fit-memory"]
    assert len(fit) == 1 and "micro-batch of 1 and 256x gradient accumulation" in fit[0]["message"]
    ch = fit[0]["change"]
    assert ch["per_gpu_batch"] * ch["accum"] == 256
    applied = simulate(Scenario(**kw, per_gpu_batch=ch["per_gpu_batch"], accum=ch["accum"], strategy=ch["strategy"],
                                activation_checkpointing=ch["activation_checkpointing"]), db=db, recommend=False)
    assert applied.fits_in_memory and applied.global_batch == r.global_batch


def test_the_largest_micro_batch_that_fits_keeps_the_global_batch(db):
    """ResNet-50 at 4,096 images per GPU: halving still does not fit; the advice names the largest divisor of 4,096
    at most the micro-batch that fits, and that micro-batch fits while twice it does not."""
    from gpusim.diagnose import _largest_divisor_at_most

    assert [_largest_divisor_at_most(n, c) for n, c in ((256, 100), (12, 5), (7, 3), (8, 0))] == [64, 4, 1, 1]
    kw = dict(model="resnet50", gpu="h100-sxm", gpus=8)
    r = simulate(Scenario(**kw, per_gpu_batch=4096), db=db)
    fit = [x for x in r.recommendations if x["id"] == "fit-memory"][0]
    mb, acc = fit["change"]["per_gpu_batch"], fit["change"]["accum"]
    assert mb * acc == 4096 and mb > 1 and f"--micro-batch {mb} --accum {acc}" in fit["message"]
    assert simulate(Scenario(**kw, per_gpu_batch=mb, accum=acc), db=db, recommend=False).fits_in_memory
    assert not simulate(Scenario(**kw, per_gpu_batch=2 * mb, accum=acc // 2), db=db, recommend=False).fits_in_memory
