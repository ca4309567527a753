"""Pure pieces of the planner: Pareto frontier, whole-run accounting, checkpoint interval, LR advice."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpusim.planning import (PlanError, checkpoint_bytes, lr_advice, node_power_w, pareto_front, run_accounting,
                         training_samples, young_interval_s)
from gpusim.workload import get_workload


def _brute_front(t, c):
    n = len(t)
    out = np.zeros(n, dtype=bool)
    for i in range(n):
        if not (math.isfinite(t[i]) and math.isfinite(c[i])):
            continue
        dominated = False
        for j in range(n):
            if j == i or not (math.isfinite(t[j]) and math.isfinite(c[j])):
                continue
            if t[j] <= t[i] and c[j] <= c[i] and (t[j] < t[i] or c[j] < c[i]):
                dominated = True
                break
        out[i] = not dominated
    return out


values = st.one_of(st.integers(0, 6).map(float), st.floats(0, 100, allow_nan=False), st.just(math.inf),
                   st.just(math.nan))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(values, values), min_size=0, max_size=40))
def test_pareto_front_is_non_dominated_and_complete(points):
    t = np.array([p[0] for p in points], dtype=float)
    c = np.array([p[1] for p in points], dtype=float)
    got = pareto_front(t, c)
    want = _brute_front(t, c)
    assert (got == want).all()
    # non-dominated: no front point dominates another; complete: every finite non-front point is dominated by one
    f = np.nonzero(got)[0]
    for i in np.nonzero(np.isfinite(t) & np.isfinite(c) & ~got)[0]:
        assert any(t[j] <= t[i] and c[j] <= c[i] and (t[j] < t[i] or c[j] < c[i]) for j in f)


def test_pareto_front_small_case():
    t = np.array([1.0, 2.0, 3.0, 2.0, 1.0, 5.0])
    c = np.array([9.0, 5.0, 1.0, 6.0, 9.0, 1.0])
    assert pareto_front(t, c).tolist() == [True, True, True, False, True, False]


def test_run_accounting_hand_calculation():
    # 1e6 samples, global batch 1000 -> 1000 steps of 2 s = 2000 s; eval 1% = 20 s; checkpoint write 30 s
    # 64 GPUs at 1e-4 per GPU-hour -> lambda = 0.0064 per hour; interval fixed at 1 h; restart 10 min
    acc = run_accounting(step_s=2.0, global_batch=1000, n_gpus=64, total_samples=1e6, checkpoint_write_s=30.0,
                         failure_rate_per_gpu_hour=1e-4, restart_s=600.0, checkpoint_interval_s=3600.0,
                         eval_overhead_frac=0.01)
    lam = 64 * 1e-4 / 3600.0
    useful = 2000.0 + 20.0 + 1 * 30.0 + 600.0  # floor(2000/3600) + 1 = 1 checkpoint; one start
    loss = 1800.0 + 600.0
    wall = useful / (1 - lam * loss)
    assert float(acc["steps"]) == 1000
    assert float(acc["checkpoints"]) == 1
    assert float(acc["wall_s"]) == pytest.approx(wall, rel=1e-12)
    assert float(acc["failures"]) == pytest.approx(lam * wall, rel=1e-12)
    assert float(acc["goodput_frac"]) == pytest.approx(2000.0 / wall, rel=1e-12)
    assert float(acc["lost_s"]) == pytest.approx(wall - useful, rel=1e-12)


def test_run_accounting_without_failures_and_when_failures_win():
    acc = run_accounting(step_s=1.0, global_batch=10, n_gpus=8, total_samples=95, checkpoint_write_s=5.0,
                         failure_rate_per_gpu_hour=0.0, restart_s=0.0, eval_overhead_frac=0.0)
    assert float(acc["steps"]) == 10  # ceil(95 / 10)
    assert float(acc["wall_s"]) == pytest.approx(10.0 + 5.0)  # one final checkpoint
    # one interruption per GPU-hour on 10,000 GPUs with 1 h restarts: never finishes
    acc = run_accounting(step_s=1.0, global_batch=10, n_gpus=10_000, total_samples=1e6, checkpoint_write_s=5.0,
                         failure_rate_per_gpu_hour=0.9, restart_s=3600.0)
    assert math.isinf(float(acc["wall_s"]))


def test_more_failures_never_shorten_the_run():
    rates = np.array([0.0, 1e-6, 1e-5, 1e-4, 1e-3])
    walls = [float(run_accounting(step_s=1.0, global_batch=512, n_gpus=512, total_samples=1e8, checkpoint_write_s=20.0,
                                  failure_rate_per_gpu_hour=r)["wall_s"]) for r in rates]
    assert walls == sorted(walls)


def test_young_interval():
    # write 60 s, MTBF 10 h -> sqrt(2 * 60 * 36000) = 2078 s
    assert float(young_interval_s(60.0, 36000.0)) == pytest.approx(math.sqrt(2 * 60 * 36000))
    # Young's interval minimises the first-order overhead write/T + T/(2 MTBF)
    ts = np.linspace(300, 8000, 2000)
    over = 60.0 / ts + ts / (2 * 36000.0)
    assert ts[np.argmin(over)] == pytest.approx(float(young_interval_s(60.0, 36000.0)), rel=0.01)


def test_training_samples_and_errors():
    llama = get_workload("llama2-7b")
    assert training_samples(llama, tokens=4096e6) == pytest.approx(1e6)
    rn = get_workload("resnet50")
    assert training_samples(rn, samples=1.28e6, epochs=90) == pytest.approx(1.152e8)
    with pytest.raises(PlanError, match="images"):
        training_samples(rn, tokens=1e9)
    with pytest.raises(PlanError, match="not both"):
        training_samples(llama, tokens=1e9, samples=5)
    with pytest.raises(PlanError):
        training_samples(llama)
    with pytest.raises(PlanError):
        training_samples(llama, tokens=-1)
    with pytest.raises(PlanError):
        training_samples(rn, samples=10, epochs=0)


def test_checkpoint_bytes_and_power():
    assert checkpoint_bytes(1e9, "amp_bf16", "adam") == 12e9  # fp32 weights + Adam m, v
    assert checkpoint_bytes(1e9, "bf16", "adam") == 14e9  # bf16 weights + fp32 master + m, v
    assert checkpoint_bytes(1e9, "fp32", "sgd") == 4e9
    p = float(node_power_w(700, 8, 2, 2048, 8))
    assert p == pytest.approx((5600 + 600 + 320 + 200) * 1.15)
    assert float(node_power_w(700, 8, 2, 2048, 8)) > float(node_power_w(400, 8, 2, 2048, 8))


def test_lr_advice_linear_scaling():
    a = lr_advice(2048, reference_global_batch=256, reference_lr=0.1, sample_unit="image", steps=10_000,
                  steps_per_epoch=625)
    assert a["batch_factor"] == 8
    assert a["linear_lr"] == pytest.approx(0.8)
    assert a["sqrt_lr"] == pytest.approx(0.1 * math.sqrt(8))
    assert a["warmup_steps"] == min(5 * 625, 1000)
    assert "warm" in a["advice"]
    big = lr_advice(256 * 64, reference_global_batch=256, reference_lr=0.1, sample_unit="image")
    assert big["warnings"]
    over = lr_advice(5000, max_global_batch=4096)
    assert any("exceeds your limit" in w for w in over["warnings"])
    same = lr_advice(256, reference_global_batch=256, reference_lr=0.1)
    assert "keep" in same["advice"]
