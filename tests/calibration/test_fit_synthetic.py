"""`gpusim fit` on synthetic measurements: parameter recovery, uncertainty coverage, the calibrated machine,
transfer to other GPUs, intervals and the calibration file.

Synthetic records are made from known parameters through the fit's own forward models (the model's
equations: ``flop / C + t_k`` for GEMMs, ``traffic / B`` for copies, ``gpusim.model.comm.collective_time_s``
for collectives, ``simulate()`` on the calibrated machine for DDP steps) times multiplicative log-normal
noise of 3 %, so every check can say how close the fit must come. No torch needed.
"""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import numpy as np
import pytest

from gpusim import calibration as cal_mod
from gpusim.calibration import (
    CollPoint,
    Environment,
    FitInputs,
    LevelFit,
    build_hardware,
    calibrated_params,
    ddp_scenario,
    fit_inputs,
    load_calibration,
    match_gpu,
)
from gpusim.errors import CalibrationError
from gpusim.profile import parse_record
from gpusim.simulation import simulate
from gpusim.units import GIB, KIB, MIB

H100 = "NVIDIA H100 80GB HBM3"
NOISE = 0.03

TRUTH_GPU = {
    "gemm.ceiling_flop_per_s.fp32": 48e12, "gemm.ceiling_flop_per_s.tf32": 380e12,
    "gemm.ceiling_flop_per_s.bf16": 780e12, "gemm.kernel_tail_s": 6e-6,
    "memory.device_copy_bytes_per_s": 2.9e12, "memory.h2d_pinned_bytes_per_s": 52e9,
    "memory.h2d_pageable_bytes_per_s": 21e9,
    "comm.intra-node.busbw_bytes_per_s": 360e9, "comm.intra-node.hop_s": 2.5e-6, "comm.base_latency_s": 12e-6,
    "compute.train_frac": 0.62, "compute.op_overhead_s": 15e-6, "compute.step_overhead_s": 2e-3,
    "sync.jitter_frac": 0.02,
}
#: the other collectives' own bus bandwidths (the model uses all-reduce's)
TRUTH_OTHER_BUSBW = {"all_gather": 330e9, "reduce_scatter": 340e9, "broadcast": 300e9}

WORKLOADS = {
    "mlp": {"params": 50_000_000, "fwd_flop_per_sample": 1.0e8, "act_bytes_per_sample": 2.0e5, "fwd_kernels": 12,
                "optimizer": "sgd", "workload_desc": "MLP, SGD momentum", "batches": (8, 64, 512)},
    "transformer": {"params": 120_000_000, "fwd_flop_per_sample": 1.3e11, "act_bytes_per_sample": 5.0e7, "fwd_kernels": 300,
                        "optimizer": "adamw", "workload_desc": "GPT encoder, AdamW", "batches": (2, 8, 32)},
}


# ---- building records ---------------------------------------------------------------------------------
_counter = itertools.count()


def _common(bench: str, env: Environment, **kw) -> dict:
    k = next(_counter)
    return {"bench": bench, "key": f"synthetic/{bench}/{k}", "point": f"p{k}", "point_n": 1, "run_id": "synthetic",
            "world_size": env.n_ranks, "host": env.hosts[0], "device": env.device_kind,
            "device_name": env.device_name, "t_unix": 0.0, **kw}


def _timed(t: float, cv: float = 0.01, noisy: bool = False) -> dict:
    return {"time_s": t, "time_s_min": t * (1 - 2 * cv), "time_s_p10": t * (1 - 1.2816 * cv),
            "time_s_p90": t * (1 + 1.2816 * cv), "time_s_max": t * (1 + 3 * cv), "rel_spread": 2 * 1.2816 * cv,
            "reps": 20, "inner_iters": 5, "warmup": 3, "noisy": noisy, "noisy_reason": "synthetic" if noisy else None}


def gpu_env(**kw) -> Environment:
    env = Environment(device_kind="cuda", device_name=H100, n_ranks=8, n_nodes=1, ranks_per_node=8, hosts=["node-a"],
                      backend="nccl", cpu_model="Synthetic CPU", cpu_cores=112, cpu_sockets=2, ram_bytes=2048 * GIB,
                      gpu_memory_bytes=80 * GIB, pcie_generation=5, pcie_width=16, intra_topology="nvswitch", **kw)
    return env


def cpu_env() -> Environment:
    return Environment(device_kind="cpu", device_name="Synthetic EPYC", n_ranks=2, n_nodes=1, ranks_per_node=2,
                       hosts=["vm"], backend="gloo", cpu_model="Synthetic EPYC", cpu_cores=2, cpu_sockets=1,
                       ram_bytes=24 * GIB, intra_topology="single")


def noise(rng, n=None):
    return np.exp(rng.normal(0.0, NOISE, n))


def gemm_records(env, truth, rng, precisions=("fp32", "tf32", "bf16"), sizes=(512, 1024, 2048, 4096, 8192),
                 ranks=2):
    out = []
    for p in precisions:
        for s in sizes:
            flop = 2.0 * s**3
            for r in range(ranks):
                t = (flop / truth[f"gemm.ceiling_flop_per_s.{p}"] + truth["gemm.kernel_tail_s"]) * noise(rng)
                out.append(_common("gemm", env, rank=r, m=s, n=s, k=s, precision=p, dtype=p, flop=flop,
                                   flop_per_s=flop / t, concurrent_ranks=ranks, **_timed(t)))
    return out


def memory_records(env, truth, rng):
    out = []
    for kind, sizes in (("device_copy", (256 * MIB, 1 * GIB, 4 * GIB)), ("h2d_pinned", (256 * MIB, 1 * GIB)),
                        ("h2d_pageable", (256 * MIB, 1 * GIB))):
        for b in sizes:
            traffic = 2 * b if kind == "device_copy" else b
            t = traffic / truth[f"memory.{kind}_bytes_per_s"] * noise(rng)
            out.append(_common("memory", env, rank=0, kind=kind, bytes=int(b), bytes_per_s=b / t,
                               traffic_bytes=int(traffic), concurrent_ranks=1, **_timed(t)))
    return out


def collective_records(env, truth, rng, group_sizes=(4, 8), sizes=None, level="intra-node"):
    sizes = sizes or [2**p for p in range(10, 31, 2)]
    pts, _meta = [], []
    for n in group_sizes:
        for c in ("all_reduce", "all_gather", "reduce_scatter", "broadcast"):
            for s in sizes:
                pts.append(CollPoint(c, float(s), n, 1, level, 1.0, 1.0, "synthetic"))
    lv = {level: LevelFit(busbw=truth[f"comm.{level}.busbw_bytes_per_s"], hop=truth[f"comm.{level}.hop_s"],
                          by_coll=dict(TRUTH_OTHER_BUSBW))}
    times = cal_mod._coll_model(pts, lv, truth["comm.base_latency_s"], cal_mod.DEFAULT_PARAMS) * noise(rng, len(pts))
    from gpusim.profile import busbw_factor

    out = []
    for p, t in zip(pts, times):
        f = busbw_factor(p.collective, p.n_ranks)
        out.append(_common("collective", env, ranks=list(range(p.n_ranks)), collective=p.collective,
                           bytes=int(p.size_bytes), dtype="float32", n_ranks=p.n_ranks, n_nodes=1, level=level,
                           concurrent_groups=1, algbw_bytes_per_s=p.size_bytes / t,
                           busbw_bytes_per_s=f * p.size_bytes / t, busbw_factor=f, correct=True, rank_time_s=[t],
                           slowest_rank=0, backend=env.backend or "nccl", **_timed(float(t))))
    return out


def ddp_records(env, truth, rng, db, n_ranks=(1, 8), precision="amp_bf16", jitter_cv=None):
    """DDP steps predicted by simulate() on the truth's calibrated machine, with noise."""
    hw = build_hardware(truth, env, db)
    params = calibrated_params(truth, env, db, hardware=hw)
    xdb = cal_mod.extended_db(db, hw)
    cv = truth["sync.jitter_frac"] if jitter_cv is None else jitter_cv
    out = []
    for name, w in WORKLOADS.items():
        for b in w["batches"]:
            for n in n_ranks:
                for sync in ((False,) if n == 1 else (True,)):
                    d = _common("ddp_step", env, ranks=list(range(n)), workload=name, workload_desc=w["workload_desc"],
                                per_rank_batch=b, n_ranks=n, n_nodes=1, sync=sync, ddp_wrapped=n > 1,
                                concurrent_ranks=n, samples_per_s=1.0, params=w["params"],
                                grad_bytes=4 * w["params"], fwd_flop_per_sample=w["fwd_flop_per_sample"],
                                train_flop_per_sample=3 * w["fwd_flop_per_sample"],
                                act_bytes_per_sample=w["act_bytes_per_sample"], fwd_kernels=w["fwd_kernels"],
                                fwd_ops=2 * w["fwd_kernels"], bucket_cap_mb=25.0, optimizer=w["optimizer"],
                                precision=precision, param_dtype="float32", rank_time_s=[1.0], backend="nccl",
                                **_timed(1.0))
                    rec = parse_record(d)
                    t = simulate(ddp_scenario(rec, hw), db=xdb, params=params, recommend=False).step_s * noise(rng)
                    d.update(_timed(float(t), cv=cv), samples_per_s=n * b / t, rank_time_s=[float(t)] * n)
                    out.append(d)
    return out


def synthetic_inputs(db, seed=0, *, env=None, truth=None, gemm=True, memory=True, coll=True, ddp=True,
                     group_sizes=(4, 8), ddp_ranks=(1, 8)):
    env = env or gpu_env()
    env.matched_gpu, env.match_rule = match_gpu(env.device_name, db) if env.device_kind == "cuda" else (None, "cpu")
    truth = truth or TRUTH_GPU
    rng = np.random.default_rng(seed)
    dicts = []
    if gemm:
        dicts += gemm_records(env, truth, rng)
    if memory:
        dicts += memory_records(env, truth, rng)
    if coll:
        dicts += collective_records(env, truth, rng, group_sizes=group_sizes)
    if ddp:
        dicts += ddp_records(env, truth, rng, db, n_ranks=ddp_ranks)
    return FitInputs(env=env, records=[parse_record(d) for d in dicts], sources=[{"path": "synthetic"}])


@pytest.fixture(scope="module")
def gpu_cal(db):
    return fit_inputs(synthetic_inputs(db, seed=1), db=db)


def _rel(cal, name):
    return cal.values[name] / TRUTH_GPU[name] - 1.0


# ---- recovery ---------------------------------------------------------------------------------------------
@pytest.mark.timeout(120)
def test_recovers_gemm_memory_and_collective_parameters(gpu_cal):
    # ~30 GEMM and ~350 collective records with 3% noise: a few percent at most, and within 4 reported std
    for name, tol in (("gemm.ceiling_flop_per_s.fp32", 0.03), ("gemm.ceiling_flop_per_s.tf32", 0.03),
                      ("gemm.ceiling_flop_per_s.bf16", 0.03), ("memory.device_copy_bytes_per_s", 0.05),
                      ("memory.h2d_pinned_bytes_per_s", 0.06), ("memory.h2d_pageable_bytes_per_s", 0.06),
                      ("comm.intra-node.busbw_bytes_per_s", 0.03), ("comm.intra-node.hop_s", 0.15),
                      ("comm.base_latency_s", 0.25), ("gemm.kernel_tail_s", 0.5)):
        err = _rel(gpu_cal, name)
        std = gpu_cal.std[name]
        assert std is not None and std > 0, name
        assert abs(err) < tol, (name, err)
        assert abs(err) * TRUTH_GPU[name] < 4 * std + 1e-30, (name, err, std / TRUTH_GPU[name])
    for c, bw in TRUTH_OTHER_BUSBW.items():
        got = gpu_cal.values[f"comm.intra-node.busbw_bytes_per_s.{c}"]
        assert abs(got / bw - 1) < 0.05, c


@pytest.mark.timeout(120)
def test_recovers_compute_overheads_from_baselines(gpu_cal):
    assert abs(_rel(gpu_cal, "compute.train_frac")) < 0.08
    assert abs(_rel(gpu_cal, "compute.op_overhead_s")) < 0.3
    assert abs(_rel(gpu_cal, "compute.step_overhead_s")) < 0.5
    assert abs(_rel(gpu_cal, "sync.jitter_frac")) < 0.05  # read off the records' 10-90% spread


@pytest.mark.timeout(120)
def test_held_out_steps_of_a_consistent_machine_are_predicted_closely(gpu_cal):
    h = gpu_cal.held_out
    assert h["n"] == 6 and len(h["records"]) == 6
    assert h["median_abs_error_frac"] < 0.06  # 3% noise on the held-out steps themselves
    assert h["anchored"]["n"] == 6 and h["anchored"]["median_abs_error_frac"] < 0.08
    assert gpu_cal.held_out_line().startswith("held-out DDP step error: median ")
    assert gpu_cal.held_out_line().endswith("(n=6)")


@pytest.mark.timeout(120)
def test_calibrated_params_are_relative_to_the_datasheet(gpu_cal, db):
    p = gpu_cal.params
    h100 = db.gpu("h100-sxm")
    want = gpu_cal.values["gemm.ceiling_flop_per_s.bf16"] / h100.peak_flop_per_s("bf16") * gpu_cal.values[
        "compute.train_frac"]
    assert p.matmul_eff_frac["amp_bf16"] == pytest.approx(want)
    assert p.mem_eff_frac == pytest.approx(gpu_cal.values["memory.device_copy_bytes_per_s"] / h100.memory_bytes_per_s)
    assert p.busbw_override_bytes_per_s["intra-node"] == gpu_cal.values["comm.intra-node.busbw_bytes_per_s"]
    assert p.latency_override_s["intra-node"] == gpu_cal.values["comm.intra-node.hop_s"]
    assert p.coll_base_latency_s == pytest.approx(gpu_cal.values["comm.base_latency_s"])
    assert p.launch_cpu_s == pytest.approx(gpu_cal.values["compute.op_overhead_s"])
    assert p.kernel_tail_s == pytest.approx(gpu_cal.values["gemm.kernel_tail_s"])
    assert gpu_cal.env.matched_gpu == "h100-sxm"


@pytest.mark.timeout(300)
@pytest.mark.slow
def test_reported_std_covers_the_error_in_most_repeats(db):
    """Loose coverage: |fitted - true| <= 2 std should hold ~95% of the time; ask for 75% over 12 repeats."""
    names = ["gemm.ceiling_flop_per_s.fp32", "gemm.ceiling_flop_per_s.bf16", "gemm.kernel_tail_s",
             "comm.intra-node.busbw_bytes_per_s", "comm.intra-node.hop_s", "comm.base_latency_s"]
    hits = dict.fromkeys(names, 0)
    repeats = 12
    for seed in range(repeats):
        # two group sizes, so that the base latency is fitted too (with one it is kept at its default)
        inp = synthetic_inputs(db, seed=100 + seed, memory=False, ddp=False, group_sizes=(4, 8))
        c = fit_inputs(inp, db=db)
        for n in names:
            hits[n] += abs(c.values[n] - TRUTH_GPU[n]) <= 2 * c.std[n]
    assert sum(hits.values()) / (repeats * len(names)) >= 0.8, hits
    assert min(hits.values()) >= 0.6 * repeats, hits


def test_one_group_size_keeps_the_base_latency_and_says_so(db):
    c = fit_inputs(synthetic_inputs(db, seed=3, gemm=False, memory=False, ddp=False, group_sizes=(8,)), db=db)
    assert "comm.base_latency_s" not in c.values
    assert c.params.coll_base_latency_s == cal_mod.DEFAULT_PARAMS.coll_base_latency_s
    assert any("base latency cannot be told" in n for n in c.notes)


def test_noisy_records_are_counted_and_down_weighted(db):
    env = gpu_env()
    env.matched_gpu = "h100-sxm"
    rng = np.random.default_rng(5)
    dicts = gemm_records(env, TRUTH_GPU, rng, precisions=("bf16",))
    bad = dict(dicts[-1])
    bad.update(_timed(bad["time_s"] * 3.0, noisy=True), key="synthetic/bad")  # a 3x outlier flagged noisy
    inp = FitInputs(env=env, records=[parse_record(d) for d in [*dicts, bad]])
    c = fit_inputs(inp, db=db)
    f = next(x for x in c.doc["fitted"] if x["name"] == "gemm.ceiling_flop_per_s.bf16")
    assert f["noisy_records"] == 1
    assert any("1 of" in n and "noisy" in n for n in c.notes)
    assert abs(_rel(c, "gemm.ceiling_flop_per_s.bf16")) < 0.1


# ---- a CPU (or any device the database does not hold) ----------------------------------------------------
CPU_TRUTH = {"gemm.ceiling_flop_per_s.fp32": 100e9, "gemm.ceiling_flop_per_s.bf16": 180e9, "gemm.kernel_tail_s": 2e-6,
             "memory.device_copy_bytes_per_s": 20e9, "comm.intra-node.busbw_bytes_per_s": 1.2e9,
             "comm.intra-node.hop_s": 250e-6, "comm.base_latency_s": 8e-6, "compute.train_frac": 0.4,
             "compute.op_overhead_s": 40e-6, "compute.step_overhead_s": 1e-3, "sync.jitter_frac": 0.05}


@pytest.fixture(scope="module")
def cpu_cal(db):
    env = cpu_env()
    rng = np.random.default_rng(3)
    dicts = gemm_records(env, CPU_TRUTH, rng, precisions=("fp32", "bf16"), sizes=(128, 256, 512, 1024))
    dicts += [d for d in memory_records(env, {**CPU_TRUTH, "memory.h2d_pinned_bytes_per_s": 1,
                                              "memory.h2d_pageable_bytes_per_s": 1}, rng) if d["kind"] == "device_copy"]
    dicts += collective_records(env, CPU_TRUTH, rng, group_sizes=(2,), sizes=[4 * KIB, 64 * KIB, 1 * MIB, 8 * MIB])
    inp = FitInputs(env=env, records=[parse_record(d) for d in dicts])
    # DDP steps of small CPU-sized workloads, generated on the truth machine
    hw = build_hardware(CPU_TRUTH, env, db)
    params = calibrated_params(CPU_TRUTH, env, db, hardware=hw)
    xdb = cal_mod.extended_db(db, hw)
    more = []
    for name, w in {"mlp": {"params": 1.3e6, "flop": 2.6e6, "act": 9e3, "k": 5, "opt": "sgd", "b": (16, 64, 256)},
                    "transformer": {"params": 5.4e5, "flop": 6.3e7, "act": 1.25e6, "k": 27, "opt": "adamw", "b": (4, 16, 32)}}.items():
        for b in w["b"]:
            for n in (1, 2):
                d = _common("ddp_step", env, ranks=list(range(n)), workload=name, workload_desc=name, per_rank_batch=b,
                            n_ranks=n, n_nodes=1, sync=n > 1, ddp_wrapped=n > 1, concurrent_ranks=2, samples_per_s=1.0,
                            params=int(w["params"]), grad_bytes=int(4 * w["params"]), fwd_flop_per_sample=w["flop"],
                            train_flop_per_sample=3 * w["flop"], act_bytes_per_sample=w["act"], fwd_kernels=w["k"],
                            fwd_ops=2 * w["k"], bucket_cap_mb=25.0, optimizer=w["opt"], precision="fp32",
                            param_dtype="float32", rank_time_s=[1.0], backend="gloo", **_timed(1.0))
                rec = parse_record(d)
                t = simulate(ddp_scenario(rec, hw), db=xdb, params=params, recommend=False).step_s * noise(rng)
                d.update(_timed(float(t), cv=CPU_TRUTH["sync.jitter_frac"]), samples_per_s=n * b / t)
                more.append(parse_record(d))
    inp.records += more
    return fit_inputs(inp, db=db)


@pytest.mark.timeout(120)
def test_cpu_device_gets_its_measured_ceilings_as_peak(cpu_cal, db):
    gpu = cpu_cal.hardware["gpu"]
    assert gpu.id == "calibrated-synthetic-epyc"
    assert gpu.id not in db.gpus  # the shipped database is not touched
    assert gpu.peak_flop_per_s("fp32") == pytest.approx(cpu_cal.values["gemm.ceiling_flop_per_s.fp32"])
    assert gpu.peak_flop_per_s("fp32") == pytest.approx(100e9, rel=0.04)
    assert gpu.memory_bytes_per_s == pytest.approx(20e9, rel=0.08)
    p = cpu_cal.params
    # efficiency relative to its own ceiling = the training fraction; the per-op cost is kernel_tail_s on a CPU
    assert p.matmul_eff_frac["fp32"] == pytest.approx(cpu_cal.values["compute.train_frac"])
    assert p.launch_cpu_s == 0.0
    assert p.kernel_tail_s == pytest.approx(cpu_cal.values["compute.op_overhead_s"])
    assert abs(cpu_cal.values["compute.train_frac"] / 0.4 - 1) < 0.1
    assert cpu_cal.held_out["n"] == 6
    assert cpu_cal.held_out["median_abs_error_frac"] < 0.08


# ---- using a calibration --------------------------------------------------------------------------------
SCN = {"model": "resnet50", "gpu": None, "node": None, "gpus": 8, "nodes": None, "per_gpu_batch": 64,
       "precision": "amp_bf16"}


@pytest.mark.timeout(120)
def test_apply_without_gpu_points_at_the_calibrated_machine(gpu_cal, db):
    from gpusim.simulation import Scenario

    kw, params, xdb = gpu_cal.apply(dict(SCN), db)
    assert kw["gpu"] == "calibrated-h100-sxm" and kw["node"] == gpu_cal.node_id
    assert kw["nodes"] == 1
    assert xdb is not db and kw["gpu"] in xdb.gpus and kw["gpu"] not in db.gpus
    assert params.busbw_override_bytes_per_s["intra-node"] == pytest.approx(360e9, rel=0.03)
    res = simulate(Scenario.create(**{k: v for k, v in kw.items() if v is not None}), db=xdb, params=params)
    assert res.n_gpus == 8 and math.isfinite(res.step_s)
    # gpus defaults to the calibrated count when the caller does not set it
    kw2, _, _ = gpu_cal.apply({"model": "resnet50", "gpu": None, "node": None}, db)
    assert kw2["gpus"] == 8


@pytest.mark.timeout(120)
def test_apply_with_the_same_gpu_applies_efficiencies_not_links(gpu_cal, db):
    kw, params, xdb = gpu_cal.apply({**SCN, "gpu": "h100-sxm"}, db)
    assert xdb is db and kw["gpu"] == "h100-sxm"
    assert params.busbw_override_bytes_per_s == {} and params.latency_override_s == {}
    assert params.matmul_eff_frac["amp_bf16"] == pytest.approx(gpu_cal.params.matmul_eff_frac["amp_bf16"])
    assert params.mem_eff_frac == pytest.approx(gpu_cal.params.mem_eff_frac)
    # the NVSwitch path efficiency is learned: measured bus bandwidth over the H100's NVLink bandwidth
    assert params.busbw_eff_frac["nvswitch"] == pytest.approx(
        gpu_cal.values["comm.intra-node.busbw_bytes_per_s"] / db.gpu("h100-sxm").peer_link_bytes_per_s)
    assert any("applied" in n for n in gpu_cal.applied_notes)
    base = simulate({**{k: v for k, v in SCN.items() if v is not None}, "gpu": "h100-sxm"}, db=db)
    cal = simulate({**{k: v for k, v in SCN.items() if v is not None}, "gpu": "h100-sxm"}, db=db, params=params)
    assert cal.step_s != pytest.approx(base.step_s)


@pytest.mark.timeout(120)
def test_apply_with_another_gpu_transfers_fractions_with_a_note(gpu_cal, cpu_cal, db):
    _, params, _ = gpu_cal.apply({**SCN, "gpu": "a100-sxm4-80gb"}, db)
    assert params.matmul_eff_frac["amp_bf16"] == pytest.approx(gpu_cal.params.matmul_eff_frac["amp_bf16"])
    assert any("assumption" in n for n in gpu_cal.applied_notes)
    _, params, _ = cpu_cal.apply({**SCN, "gpu": "h100-sxm"}, db)
    assert params == cal_mod.DEFAULT_PARAMS
    assert any("do not transfer" in n for n in cpu_cal.applied_notes)
    with pytest.raises(Exception, match="did you mean"):
        gpu_cal.apply({**SCN, "gpu": "h100"}, db)


@pytest.mark.timeout(120)
def test_interval_brackets_the_prediction(gpu_cal, cpu_cal, db):
    from gpusim.simulation import Scenario

    kw, params, xdb = gpu_cal.apply(dict(SCN), db)
    scn = Scenario.create(**{k: v for k, v in kw.items() if v is not None})
    res = simulate(scn, db=xdb, params=params, recommend=False)
    iv = gpu_cal.interval(scn, xdb)
    lo, hi = iv["step_s"]
    assert lo < res.step_s < hi and iv["level"] == 0.9 and iv["applies"]
    tlo, thi = iv["throughput_samples_per_s"]
    assert tlo < res.throughput_samples_per_s < thi
    assert 0 < iv["sd_log_step"] < 0.2
    # a CPU calibration says nothing about an H100: no width, and it says so
    kw, params, xdb = cpu_cal.apply({**SCN, "gpu": "h100-sxm"}, db)
    iv = cpu_cal.interval(Scenario.create(**{k: v for k, v in kw.items() if v is not None}), xdb)
    assert not iv["applies"] and iv["step_s"][0] == pytest.approx(iv["step_s"][1]) and "note" in iv


@pytest.mark.timeout(120)
def test_a_direction_the_records_do_not_determine_is_held_to_the_cap_and_named(gpu_cal, db):
    """A fit whose records barely inform a parameter (CI's CPU calibration once gave compute.step_overhead_s a log
    standard deviation of 718: the pseudo-inverse of a nearly singular J^T J) made the interval's sigma points
    exp(718), an OverflowError. The spread along such a direction is held to a factor of ten
    (calibration.INTERVAL_LOG_SD_CAP) and the interval says which parameter it held."""
    import copy

    from gpusim.simulation import Scenario

    kw, params, xdb = gpu_cal.apply(dict(SCN), db)
    scn = Scenario.create(**{k: v for k, v in kw.items() if v is not None})
    cal = copy.copy(gpu_cal)
    blocks = []
    for block, names, cov in gpu_cal._cov:
        if cov is not None and "compute.step_overhead_s" in names:
            cov = np.array(cov, float)
            i = names.index("compute.step_overhead_s")
            cov[i, :], cov[:, i] = 0.0, 0.0
            cov[i, i] = 718.0**2
        blocks.append((block, names, cov))
    assert any("compute.step_overhead_s" in names for _, names, _ in blocks)
    cal._cov = blocks
    iv = cal.interval(scn, xdb)
    lo, hi = iv["step_s"]
    res = simulate(scn, db=xdb, params=params, recommend=False)
    assert math.isfinite(lo) and math.isfinite(hi) and lo < res.step_s < hi
    assert "compute.step_overhead_s" in iv["note"] and "factor of ten" in iv["note"]
    assert "note" not in gpu_cal.interval(scn, xdb)  # the fit as it came: nothing held


@pytest.mark.timeout(180)
def test_cli_predict_with_a_calibration_that_does_not_transfer_prints_no_interval(cpu_cal, tmp_path, capsys):
    """[issue 20] a CPU calibration used with --gpu h100-sxm said it does not transfer, then printed a zero-width
    "[90% interval 2.781e+04 .. 2.781e+04]"; now it prints no interval and says why."""
    import re

    from gpusim.cli import main

    path = cpu_cal.save(tmp_path / "cpu.json")
    assert main(["predict", "--model", "resnet50", "--gpu", "h100-sxm", "--gpus", "8", "--per-gpu-batch", "64",
                 "--calibration", str(path)]) == 0
    text = capsys.readouterr().out
    assert "90% interval" not in text
    assert re.search(r"interval\s+none: no fitted parameter of this calibration applies", text), text
    # a calibration that applies still shows its interval, with a width
    assert main(["predict", "--model", "resnet50", "--gpu", "h100-sxm", "--gpus", "8", "--per-gpu-batch", "64",
                 "--calibration", str(path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["interval"]["applies"] is False


# ---- the file ------------------------------------------------------------------------------------------------
@pytest.mark.timeout(120)
def test_file_round_trip(gpu_cal, db, tmp_path):
    path = gpu_cal.save(tmp_path / "cal.json")
    doc = json.loads(path.read_text())
    assert doc["format"] == "gpusim-calibration" and doc["version"] == 1
    for key in ("created_utc", "sources", "environment", "hardware", "params", "values", "std", "fitted", "report",
                "held_out", "covariance"):
        assert key in doc, key
    assert not list(tmp_path.glob(".cal.json.*"))  # no temporary file left behind
    back = load_calibration(path)
    assert back.values == pytest.approx(gpu_cal.values)
    assert back.params == gpu_cal.params
    assert back.hardware["gpu"].peak_flop_per_s("bf16") == gpu_cal.hardware["gpu"].peak_flop_per_s("bf16")
    kw, params, xdb = back.apply(dict(SCN), db)
    res = simulate({k: v for k, v in kw.items() if v is not None}, db=xdb, params=params)
    assert math.isfinite(res.step_s)


@pytest.mark.parametrize("content,message", [
    (None, "no such calibration file"),
    ("not json", "not valid JSON"),
    ('{"format": "gpusim-profile"}', "not a gpusim calibration file"),
    ('{"format": "gpusim-calibration", "version": 99}', "newer than this gpusim"),
    ('{"format": "gpusim-calibration", "version": 1}', "missing"),
])
def test_bad_calibration_files_give_clear_errors(tmp_path, content, message):
    p = tmp_path / "cal.json"
    if content is not None:
        p.write_text(content)
    with pytest.raises(CalibrationError, match=message):
        load_calibration(p)


def test_invalid_values_in_a_calibration_file(gpu_cal, tmp_path):
    doc = json.loads(json.dumps(cal_mod._jsonable(gpu_cal.doc)))
    doc["params"]["mem_eff_frac"] = 2.0
    (tmp_path / "a.json").write_text(json.dumps(doc))
    with pytest.raises(CalibrationError, match="mem_eff_frac"):
        load_calibration(tmp_path / "a.json")
    doc = json.loads(json.dumps(cal_mod._jsonable(gpu_cal.doc)))
    doc["values"]["comm.intra-node.hop_s"] = -1.0
    (tmp_path / "b.json").write_text(json.dumps(doc))
    with pytest.raises(CalibrationError, match="finite and positive"):
        load_calibration(tmp_path / "b.json")


def test_cli_bad_calibration_is_one_line_error(tmp_path, capsys):
    from gpusim.cli import main

    (tmp_path / "cal.json").write_text("{}")
    rc = main(["predict", "--model", "resnet50", "--per-gpu-batch", "8", "--calibration", str(tmp_path / "cal.json")])
    err = capsys.readouterr().err
    assert rc == 2 and "not a gpusim calibration file" in err and "Traceback" not in err


# ---- device names ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name,want", [
    ("NVIDIA H100 80GB HBM3", "h100-sxm"), ("NVIDIA H100 PCIe", "h100-pcie"), ("NVIDIA H100 NVL", "h100-nvl"),
    ("NVIDIA H200", "h200-sxm"), ("NVIDIA A100-SXM4-80GB", "a100-sxm4-80gb"), ("NVIDIA A100-SXM4-40GB", "a100-sxm4-40gb"),
    ("NVIDIA A100-PCIE-40GB", "a100-pcie-40gb"), ("NVIDIA A100 80GB PCIe", "a100-pcie-80gb"),
    ("NVIDIA GeForce RTX 4090", "rtx-4090"), ("NVIDIA GeForce RTX 3090", "rtx-3090"), ("Tesla V100-SXM2-32GB", "v100-sxm2-32gb"),
    ("Tesla T4", "t4"), ("NVIDIA L40S", "l40s"), ("NVIDIA L4", "l4"), ("NVIDIA RTX A6000", "rtx-a6000"),
    ("NVIDIA RTX 6000 Ada Generation", "rtx-6000-ada"), ("Quadro RTX 6000", "quadro-rtx-6000"), ("NVIDIA B200", "b200"),
    ("NVIDIA GH200 480GB", "gh200"), ("AMD Instinct MI300X", "mi300x"), ("Tesla P100-PCIE-16GB", "p100-pcie-16gb"),
    ("NVIDIA GeForce RTX 3080 Ti", None), ("AMD EPYC 7B13", None), ("cpu", None),
])
def test_match_gpu(db, name, want):
    assert match_gpu(name, db)[0] == want


# ---- the CLI on a synthetic profile directory (no torch) ------------------------------------------------------
def write_profile(d: Path, inp: FitInputs) -> Path:
    env = inp.env
    run = {"run_id": "synthetic", "started_utc": "2026-01-01T00:00:00Z", "finished_utc": "2026-01-01T00:10:00Z",
           "status": "complete", "argv": ["gpusim", "calibrate"], "args": {}, "quick": True, "benches": [],
           "backend": env.backend, "device": env.device_kind, "world_size": env.n_ranks, "n_nodes": env.n_nodes,
           "local_world_size": env.ranks_per_node, "timeout_s": 60.0, "gpusim_version": "0.1.0",
           "nodes": [{"host": env.hosts[0], "node_rank": 0, "ranks": list(range(env.n_ranks)),
                      "date_utc": "2026-01-01T00:00:00Z", "cpu_model": env.cpu_model, "cpu_cores": env.cpu_cores,
                      "cpu_sockets": env.cpu_sockets, "ram_bytes": env.ram_bytes,
                      "gpus": [{"index": i, "name": env.device_name, "memory_total_bytes": 85520809984,
                                "pcie_generation": 5, "pcie_width": 16} for i in range(env.n_ranks)]
                      if env.device_kind == "cuda" else [],
                      "topology": {"intra_topology": env.intra_topology}}],
           "ranks": [{"rank": i, "local_rank": i, "node_rank": 0, "host": env.hosts[0], "pid": 100 + i,
                      "device": env.device_kind, "device_name": env.device_name} for i in range(env.n_ranks)],
           "records_written": len(inp.records)}
    d.mkdir(parents=True, exist_ok=True)
    (d / "meta.json").write_text(json.dumps({"format": "gpusim-profile", "schema_version": 1,
                                             "created_utc": "2026-01-01T00:00:00Z", "runs": [run]}))
    with open(d / "records.jsonl", "w") as f:
        f.writelines(json.dumps(r.model_dump(mode="json")) + "\n" for r in inp.records)
    return d


@pytest.mark.timeout(180)
def test_cli_fit_then_predict_on_a_synthetic_profile(db, tmp_path, capsys):
    from gpusim.cli import main

    prof = write_profile(tmp_path / "profile", synthetic_inputs(db, seed=7))
    out = tmp_path / "cal.json"
    assert main(["fit", str(prof), "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert "held-out DDP step error: median " in text and "(n=6)" in text
    for title in ("GEMM", "memory copies", "collectives", "fitted parameters", "held-out DDP steps"):
        assert title in text, title
    assert load_calibration(out).env.matched_gpu == "h100-sxm"
    assert main(["fit", str(prof), "-o", str(out), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["format"] == "gpusim-calibration" and doc["held_out"]["n"] == 6
    assert main(["predict", "--model", "resnet50", "--gpus", "8", "--per-gpu-batch", "64", "--calibration", str(out),
                 "--json"]) == 0
    pred = json.loads(capsys.readouterr().out)
    assert pred["scenario"]["gpu_resolved"] == "calibrated-h100-sxm"
    lo, hi = pred["interval"]["throughput_samples_per_s"]
    assert lo < pred["throughput_samples_per_s"] < hi
    assert main(["comm", "--calibration", str(out), "--gpus", "8", "--bytes", "1GiB", "--json"]) == 0
    comm = json.loads(capsys.readouterr().out)
    assert comm["busbw_bytes_per_s"] == pytest.approx(360e9, rel=0.05)


def test_cli_fit_refuses_what_it_cannot_read(tmp_path, capsys):
    from gpusim.cli import main

    (tmp_path / "x.txt").write_text("hello\n")
    assert main(["fit", str(tmp_path / "x.txt"), "-o", str(tmp_path / "c.json")]) == 2
    assert "neither a profile directory nor nccl-tests output" in capsys.readouterr().err
    assert main(["fit", str(tmp_path / "missing"), "-o", str(tmp_path / "c.json")]) == 2
    assert "no such file or directory" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert main(["fit", str(tmp_path / "empty"), "-o", str(tmp_path / "c.json")]) == 2
    assert "meta.json" in capsys.readouterr().err


@pytest.mark.timeout(120)
def test_one_gpu_profile_has_nothing_to_hold_out(db):
    env = gpu_env()
    env.n_ranks = env.ranks_per_node = 1
    env.intra_topology = "single"
    c = fit_inputs(synthetic_inputs(db, seed=11, env=env, coll=False, ddp_ranks=(1,)), db=db)
    assert c.held_out["n"] == 0 and "none" in c.held_out_line()
    assert abs(c.values["compute.train_frac"] / TRUTH_GPU["compute.train_frac"] - 1) < 0.1
    assert c.params.busbw_override_bytes_per_s == {}
    kw, params, xdb = c.apply({"model": "resnet50", "gpu": None, "node": None, "per_gpu_batch": 32}, db)
    assert kw["gpus"] == 1
    assert math.isfinite(simulate({k: v for k, v in kw.items() if v is not None}, db=xdb, params=params).step_s)


@pytest.mark.timeout(120)
def test_unknown_device_without_gemm_records_needs_a_gpu(db):
    env = gpu_env()
    env.device_name = "Mystery Accelerator X1"
    c = fit_inputs(synthetic_inputs(db, seed=12, env=env, gemm=False, memory=False, ddp=False), db=db)
    assert c.hardware is None and c.env.matched_gpu is None
    assert c.values["comm.intra-node.busbw_bytes_per_s"] == pytest.approx(360e9, rel=0.03)
    with pytest.raises(CalibrationError, match="give --gpu"):
        c.apply({"model": "resnet50", "gpu": None, "node": None, "per_gpu_batch": 32}, db)
    _, params, _ = c.apply({"model": "resnet50", "gpu": "h100-sxm", "per_gpu_batch": 32}, db)
    assert params == cal_mod.DEFAULT_PARAMS


def test_a_profile_measured_without_p2p_is_a_host_staged_machine(db, tmp_path):
    """[issue 18] a profile taken with NCCL_P2P_DISABLE=1 on an NVSwitch node measured host staging: the calibrated
    machine has peer-to-peer off and a host-staged intra-node link, and the efficiency that transfers to another GPU
    is the host-staged path's, not NVSwitch's."""
    from gpusim.calibration import read_inputs, transferred_params
    from gpusim.profile import nccl_p2p_disabled

    assert nccl_p2p_disabled({"NCCL_P2P_DISABLE": "1"}) and not nccl_p2p_disabled({"NCCL_P2P_DISABLE": "0"})
    assert not nccl_p2p_disabled({}) and not nccl_p2p_disabled(None)
    truth = {**TRUTH_GPU, "comm.intra-node.busbw_bytes_per_s": 20e9, "comm.intra-node.hop_s": 14e-6}
    inp = synthetic_inputs(db, seed=5, truth=truth, ddp=False)
    d = write_profile(tmp_path / "prof", inp)
    meta = json.loads((d / "meta.json").read_text())
    meta["runs"][0]["nodes"][0]["nccl_env"] = {"NCCL_P2P_DISABLE": "1", "NCCL_DEBUG": "WARN"}
    (d / "meta.json").write_text(json.dumps(meta))
    read = read_inputs([d], db=db)
    assert read.env.p2p_disabled and read.env.intra_topology == "nvswitch"
    values = fit_inputs(read, db=db).values
    hw = build_hardware(values, read.env, db)
    assert hw["node"].p2p is False and hw["links"][hw["node"].intra_link].kind == "host-staged"
    params, notes = transferred_params(values, read.env, "a100-sxm4-80gb", db)  # (relative to the PCIe 5.0 link)
    assert params.busbw_eff_frac["nvswitch"] == cal_mod.DEFAULT_PARAMS.busbw_eff_frac["nvswitch"]
    assert params.busbw_eff_frac["host-staged"] == pytest.approx(20e9 / db.link("pcie5-x16").bandwidth_bytes_per_s,
                                                                 rel=0.15)
    assert any("host-staged" in n for n in notes)
    # the same profile without the variable keeps NVSwitch
    meta["runs"][0]["nodes"][0]["nccl_env"] = {}
    (d / "meta.json").write_text(json.dumps(meta))
    assert not read_inputs([d], db=db).env.p2p_disabled


@pytest.mark.timeout(120)
def test_no_p2p_on_the_calibrated_machine_drops_its_measured_intra_node_bandwidth(gpu_cal, db):
    """[issue 18] --no-p2p with a calibration measured with peer-to-peer: the measured NVSwitch bus bandwidth does not
    describe host staging, so it is not used, and the notes say so (before, the flag was silently overridden)."""
    kw, params, xdb = gpu_cal.apply(dict(SCN), db)
    assert "intra-node" in params.busbw_override_bytes_per_s
    kw_off, params_off, xdb_off = gpu_cal.apply({**SCN, "p2p": False}, db)
    assert "intra-node" not in params_off.busbw_override_bytes_per_s
    assert "intra-node" not in params_off.latency_override_s
    assert any("peer-to-peer" in n for n in gpu_cal.applied_notes)
    on = simulate({k: v for k, v in kw.items() if v is not None}, db=xdb, params=params, recommend=False)
    off = simulate({k: v for k, v in kw_off.items() if v is not None}, db=xdb_off, params=params_off, recommend=False)
    assert off.breakdown_s["comm_exposed_s"] > on.breakdown_s["comm_exposed_s"]
    # p2p as measured (on) keeps the measurement
    _, params_same, _ = gpu_cal.apply({**SCN, "p2p": True}, db)
    assert params_same.busbw_override_bytes_per_s == params.busbw_override_bytes_per_s
