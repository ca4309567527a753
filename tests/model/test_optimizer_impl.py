"""[issue 18] The optimizer's implementation: torch.optim's per-tensor loop (PyTorch < 2.0's default) against the
multi-tensor and fused kernels, on the data-parallel path."""

from __future__ import annotations

import math

import pytest

from gpusim.errors import ScenarioError
from gpusim.params import DEFAULT_PARAMS
from gpusim.simulation import Scenario, simulate
from gpusim.strategy import OPT_FORLOOP_OPS_PER_TENSOR, Strategy, opt_traffic_bytes
from gpusim.workload.catalogue import get_workload

RN50 = dict(model="resnet50", gpu="a100-sxm4-80gb", gpus=8, per_gpu_batch=256, kind="ddp", precision="amp_fp16",
            optimizer="sgd-momentum")


def test_cnn_builders_count_their_parameter_tensors():
    """ResNet-50 v1.5: 53 convolutions without bias, 53 batch norms (weight, bias), the fc layer (weight, bias):
    53 + 106 + 2 = 161, torchvision's len(list(resnet50().parameters())); VGG-16: 13 convs and 3 linears with bias."""
    assert get_workload("resnet50").param_tensors == 161
    assert get_workload("resnet101").param_tensors == 314
    assert get_workload("vgg16").param_tensors == 2 * (13 + 3)


def test_forloop_step_is_its_kernels_at_the_launch_cost(db):
    """Hand-worked: SGD with momentum launches 5 kernels per tensor (weight-decay add, momentum mul_ and add_, the
    parameter update, zero_grad's zero_): 805 on ResNet-50, each at max(kernel tail, CPU launch) = 8 us, besides the
    memory traffic both implementations share; foreach pays the default few kernels."""
    p = DEFAULT_PARAMS
    per_kernel = max(p.kernel_tail_s, p.launch_cpu_s)
    loop = simulate(Scenario.create(**RN50, optimizer_impl="forloop"), db=db, recommend=False)
    multi = simulate(Scenario.create(**RN50), db=db, recommend=False)
    extra = (5.0 * 161 - p.optimizer_kernels) * per_kernel
    assert OPT_FORLOOP_OPS_PER_TENSOR["sgd-momentum"] == 5.0
    assert loop.breakdown_s["optimizer_s"] - multi.breakdown_s["optimizer_s"] == pytest.approx(extra, rel=1e-9)
    assert loop.breakdown_s["compute_s"] == pytest.approx(multi.breakdown_s["compute_s"], rel=1e-12)
    assert loop.step_s > multi.step_s
    # the traffic part is the optimizer's bytes per parameter, the same for both
    traffic = 25_557_032 * opt_traffic_bytes("sgd-momentum") / (db.gpus["a100-sxm4-80gb"].memory_bytes_per_s
                                                                 * p.mem_eff_frac)
    assert multi.breakdown_s["optimizer_s"] == pytest.approx(traffic + p.optimizer_kernels * per_kernel, rel=1e-6)


def test_fused_and_foreach_cost_the_same_few_kernels(db):
    fused = simulate(Scenario.create(**RN50, optimizer_impl="fused"), db=db, recommend=False)
    multi = simulate(Scenario.create(**RN50, optimizer_impl="foreach"), db=db, recommend=False)
    assert fused.step_s == pytest.approx(multi.step_s, rel=1e-12)


def test_the_loop_weighs_more_where_the_update_runs_every_iteration(db):
    """Eight GPUs at a fixed global batch step the optimizer every iteration where one GPU accumulates 8: the loop's
    fixed cost is a larger share per sample on eight, so it lowers the scaling efficiency."""
    one = dict(RN50, gpus=1, accum=8)
    eff = {}
    for impl in ("foreach", "forloop"):
        r1 = simulate(Scenario.create(**one, optimizer_impl=impl), db=db, recommend=False)
        r8 = simulate(Scenario.create(**RN50, optimizer_impl=impl), db=db, recommend=False)
        eff[impl] = r8.throughput_samples_per_s / (8 * r1.throughput_samples_per_s)
    assert eff["forloop"] < eff["foreach"] - 0.01


def test_predict_advises_the_multi_tensor_optimizer(db):
    res = simulate(Scenario.create(**RN50, optimizer_impl="forloop"), db=db)
    (rec,) = [r for r in res.recommendations if r["id"] == "optimizer-foreach"]
    assert rec["change"] == {"optimizer_impl": "foreach"} and rec["gain_frac"] > 0.01
    assert not any(r["id"] == "optimizer-foreach" for r in simulate(Scenario.create(**RN50), db=db).recommendations)


def test_forloop_needs_a_model_that_counts_its_tensors(db):
    with pytest.raises(ScenarioError, match="does not count its parameter tensors"):
        simulate(Scenario.create(model="bert-large", gpu="a100-sxm4-80gb", gpus=8, per_gpu_batch=8,
                                 optimizer_impl="forloop"), db=db)


@pytest.mark.parametrize("changes", [{"kind": "zero1"}, {"kind": "fsdp-full"}, {"tp": 2}])
def test_forloop_is_refused_where_flat_buffers_are_stepped(changes):
    with pytest.raises(ValueError, match="optimizer_impl forloop"):
        Strategy(optimizer_impl="forloop", **changes)


def test_cli_flag_and_error(capsys):
    from gpusim.cli import main

    base = ["predict", "--model", "resnet50", "--gpu", "a100-sxm4-80gb", "--gpus", "8", "--per-gpu-batch", "256",
            "--optimizer", "sgd-momentum"]
    assert main([*base, "--optimizer-impl", "forloop"]) == 0
    out = capsys.readouterr().out
    assert "foreach" in out  # the advice
    assert main([*base, "--optimizer-impl", "forloop", "--strategy", "zero1"]) == 2
    err = capsys.readouterr().err
    assert "forloop" in err and "--optimizer-impl foreach" in err and "Traceback" not in err
    assert main(["predict", "--model", "bert-large", "--gpu", "a100-sxm4-80gb", "--gpus", "8", "--per-gpu-batch", "8",
                 "--optimizer-impl", "forloop"]) == 2
    assert "parameter tensors" in capsys.readouterr().err


def test_workload_rejects_a_bad_tensor_count():
    w = get_workload("resnet50")
    import dataclasses

    for bad in (0, -3, 2.5, True):
        with pytest.raises(ScenarioError, match="param_tensors"):
            dataclasses.replace(w, param_tensors=bad)
    assert math.isfinite(float(dataclasses.replace(w, param_tensors=7).param_tensors))
