"""Properties of the model that must hold for any scenario (hypothesis)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpusim.model.step import BREAKDOWN_KEYS, evaluate
from gpusim.params import DEFAULT_PARAMS
from gpusim.simulation import Scenario, build_inputs, stack_rows

WORKLOADS = ["resnet50", "bert-large", "gpt2", "vit-b-16", "llama2-7b", "gnmt", "vgg16"]
GPUS = [("h100-sxm", "amp_bf16"), ("a100-sxm4-80gb", "amp_bf16"), ("v100-sxm2-16gb", "amp_fp16"),
        ("rtx-4090", "amp_fp16"), ("l40s", "amp_bf16"), ("a100-pcie-80gb", "tf32")]
KINDS = ["ddp", "zero1", "zero2", "zero3", "fsdp-hybrid", "dp"]
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@st.composite
def scenarios(draw, kinds=KINDS):
    model = draw(st.sampled_from(WORKLOADS))
    gpu, precision = draw(st.sampled_from(GPUS))
    kind = draw(st.sampled_from(kinds))
    per_node = draw(st.sampled_from([1, 2, 4, 8]))
    nodes = 1 if kind == "dp" else draw(st.sampled_from([1, 2, 4]))
    seq = 512 if model in ("llama2-7b", "gpt2") else None
    return dict(model=model, gpu=gpu, precision=precision, strategy=kind, gpus=per_node * nodes, nodes=nodes,
                per_gpu_batch=draw(st.integers(1, 256)), accum=draw(st.sampled_from([1, 2, 4])), seq_len=seq,
                intra_topology="pcie-host" if gpu in ("rtx-4090", "l40s", "a100-pcie-80gb") else None)


def _inputs(db, kw):
    _, _, row = build_inputs(Scenario(**kw), db)
    return stack_rows([row])


@SETTINGS
@given(scenarios(), st.floats(1.0, 100.0))
def test_more_bandwidth_is_never_slower(db, kw, factor):
    inp = _inputs(db, kw)
    base = evaluate(inp, DEFAULT_PARAMS)["step_s"]
    fast = evaluate(inp.replace(intra_busbw_bytes_per_s=inp.intra_busbw_bytes_per_s * factor,
                                inter_busbw_bytes_per_s=inp.inter_busbw_bytes_per_s * factor), DEFAULT_PARAMS)["step_s"]
    assert fast[0] <= base[0] * (1 + 1e-12)


@SETTINGS
@given(scenarios(), st.floats(1.0, 10.0))
def test_a_faster_gpu_is_never_slower(db, kw, factor):
    inp = _inputs(db, kw)
    base = evaluate(inp, DEFAULT_PARAMS)["step_s"]
    fast = evaluate(inp.replace(peak_flop_per_s=inp.peak_flop_per_s * factor,
                                mem_bytes_per_s=inp.mem_bytes_per_s * factor), DEFAULT_PARAMS)["step_s"]
    assert fast[0] <= base[0] * (1 + 1e-12)


@SETTINGS
@given(scenarios())
def test_parts_sum_to_the_total_and_are_non_negative(db, kw):
    out = evaluate(_inputs(db, kw), DEFAULT_PARAMS)
    parts = np.array([out[k][0] for k in BREAKDOWN_KEYS])
    assert np.all(parts >= 0)
    assert parts.sum() == pytest.approx(out["step_s"][0], rel=1e-12)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(scenarios(), min_size=2, max_size=6))
def test_vectorised_equals_one_at_a_time(db, kws):
    rows = [build_inputs(Scenario(**kw), db)[2] for kw in kws]
    together = evaluate(stack_rows(rows), DEFAULT_PARAMS)
    for i, row in enumerate(rows):
        alone = evaluate(stack_rows([row]), DEFAULT_PARAMS)
        for key in ("step_s", "comm_exposed_s", "memory_per_gpu_bytes", "throughput_samples_per_s"):
            assert together[key][i] == pytest.approx(alone[key][0], rel=1e-12), key


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from(WORKLOADS), st.integers(1, 128), st.sampled_from(["ddp", "zero2", "zero3"]))
def test_more_gpus_never_lower_total_throughput_on_a_non_blocking_fabric(db, model, batch, kind):
    """Weak scaling under DDP-like strategies on DGX H100 nodes (NVSwitch inside, one NDR NIC per GPU)."""
    seq = 512 if model in ("llama2-7b", "gpt2") else None
    rows = []
    counts = [1, 2, 4, 8, 16, 32, 64, 128, 256]
    for n in counts:
        kw = dict(model=model, node="dgx-h100", gpus=n, nodes=max(1, n // 8), per_gpu_batch=batch, strategy=kind,
                  seq_len=seq)
        rows.append(build_inputs(Scenario(**kw), db)[2])
    thr = evaluate(stack_rows(rows), DEFAULT_PARAMS)["throughput_samples_per_s"]
    assert np.all(np.diff(thr) >= -1e-9 * thr[:-1])


def test_a_model_function_on_pint_quantities_gives_seconds():
    pint = pytest.importorskip("pint")
    from gpusim.model.compute import optimizer_step_s

    u = pint.UnitRegistry()
    t = optimizer_step_s(7e9 * u.dimensionless, 28 * u.byte, 3.35e12 * u.byte / u.second, 0.7, 10.0,
                         5e-6 * u.second)
    assert t.check("[time]")
    assert t.to(u.second).magnitude == pytest.approx(7e9 * 28 / (3.35e12 * 0.7) + 10 * 5e-6)
