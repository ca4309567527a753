"""[issue 17] The ceiling a real run reaches: the sustained (power-limited) matmul rate, the memory headroom in the
layout search, and how the search's best layout differs from the framework's defaults."""

from __future__ import annotations

import numpy as np
import pytest

from gpusim.hwdb import load
from gpusim.units import GIB

DB = load()


def test_training_ceiling_is_the_burst_times_the_sustained_fraction():
    """H100 SXM: MAMF 794.5 TFLOP/s x MSMF/MAMF 0.888 = 705.516 TFLOP/s (bf16), 1402.6 x 0.888 = 1245.509 (fp8)."""
    h100 = DB.gpu("h100-sxm")
    assert h100.training_matmul_flop_per_s("bf16") == pytest.approx(794.5e12 * 0.888, rel=1e-12)
    assert h100.training_matmul_flop_per_s("fp8") == pytest.approx(1402.6e12 * 0.888, rel=1e-12)
    assert h100.training_matmul_flop_per_s("fp16") == h100.training_matmul_flop_per_s("bf16")


def test_without_a_sustained_measurement_the_burst_stands():
    a100 = DB.gpu("a100-sxm4-80gb")
    assert a100.sustained_matmul_frac is None
    assert a100.training_matmul_flop_per_s("bf16") == a100.achievable_matmul_flop_per_s("bf16")


def test_every_sustained_fraction_is_below_one_and_cited():
    seen = 0
    for g in DB.gpus.values():
        if g.sustained_matmul_frac:
            seen += 1
            assert all(0.5 < v <= 1.0 for v in g.sustained_matmul_frac.values())
            assert any("sustained_matmul_frac" in s.fields for s in g.sources)
            assert g.achievable_matmul_tflop_per_s  # a fraction of something measured
    assert seen >= 4


def _llama_row(precision="bf16"):
    from gpusim.rows import build_inputs
    from gpusim.scenario import Scenario

    scn = Scenario.create(model="llama3-8b", gpu="h100-sxm", gpus=8, seq_len=4096, precision=precision,
                          kind="zero1", tp=2, micro_batch=1, global_batch=64)
    return build_inputs(scn, db=DB)[2]


def test_the_layout_row_carries_the_sustained_ceiling():
    row = _llama_row()
    assert row["ceiling_flop_per_s"] == pytest.approx(794.5e12 * 0.888, rel=1e-12)
    row8 = _llama_row("fp8")
    assert row8["fp8_ceiling_flop_per_s"] == pytest.approx(1402.6e12 * 0.888, rel=1e-12)
    assert row8["ceiling_flop_per_s"] == pytest.approx(794.5e12 * 0.888, rel=1e-12)  # the bf16 parts of an fp8 step


def test_a_compute_bound_gemm_slows_by_the_sustained_fraction():
    """A large square GEMM is FLOP-bound: its time at the sustained ceiling is the burst time / 0.888 (less the
    fixed kernel tail)."""
    from gpusim.model.gemm import gemm_time_s
    from gpusim.params import DEFAULT_PARAMS as P

    h100 = DB.gpu("h100-sxm")
    kw = dict(elem_bytes=2.0, k_half=P.gemm_k_half_steps, mem_eff_frac=P.mem_eff_frac, kernel_tail_s=0.0)
    burst = gemm_time_s(8192, 8192, 8192, h100.achievable_matmul_flop_per_s("bf16"), h100.memory_bytes_per_s, 132, **kw)
    sus = gemm_time_s(8192, 8192, 8192, h100.training_matmul_flop_per_s("bf16"), h100.memory_bytes_per_s, 132, **kw)
    assert sus == pytest.approx(burst / 0.888, rel=1e-12)


# ---- the layout search and the headroom ---------------------------------------------------------------------

@pytest.fixture(scope="module")
def search_8b():
    from gpusim.scenario import Scenario
    from gpusim.search import search_layouts

    scn = Scenario.create(model="llama3.1-8b", gpu="h100-sxm", gpus=8, seq_len=8192, precision="bf16",
                          global_batch=128, micro_batch=1)
    return search_layouts(scn, db=DB)


def test_no_feasible_layout_eats_into_the_headroom(search_8b):
    o, feas = search_8b["out"], search_8b["feasible"]
    assert feas.any()
    used = o["memory_per_gpu_bytes"][feas] + o["memory_headroom_bytes"][feas]
    assert np.all(used <= 80 * GIB)
    # the default headroom: the NCCL communicators beyond the first, 688 MB each (one per parallel group > 1 rank)
    from gpusim.model.memory import nccl_communicators

    lay = search_8b["layouts"]
    comms = nccl_communicators(lay["tp"], lay["pp"], lay["cp"], lay["dp"], lay["ep"])[feas]
    assert o["memory_headroom_bytes"][feas] == pytest.approx(np.maximum(comms - 1, 0) * 688e6)
    assert np.all(o["spare_bytes"][feas] >= 0)


def test_nccl_communicators_closed_form():
    """tp 1 pp 1 cp 2 dp 4 -> 2 communicators (cp, dp); tp 4 pp 4 cp 2 dp 2 -> 4; DDP on 8 GPUs -> 1; one GPU -> 0;
    the headroom is the ones beyond the first at 688 MB: 688 MB, 2.064 GB, 0, 0."""
    from gpusim.model.memory import headroom_bytes, nccl_communicators

    c = nccl_communicators(np.array([1, 4, 1, 1]), np.array([1, 4, 1, 1]), np.array([2, 2, 1, 1]),
                           np.array([4, 2, 8, 1]), 1)
    assert c.tolist() == [2, 4, 1, 0]
    h = headroom_bytes(80 * GIB, np.nan, np.nan, 0.0, 0.0, c, 688e6)
    assert h.tolist() == pytest.approx([688e6, 3 * 688e6, 0.0, 0.0])


def test_a_larger_headroom_never_adds_a_layout():
    from gpusim.scenario import Scenario
    from gpusim.search import search_layouts

    base = dict(model="llama3.1-8b", gpu="h100-sxm", gpus=8, seq_len=8192, precision="bf16", global_batch=128,
                micro_batch=1)
    small = search_layouts(Scenario.create(**base, memory_headroom_gib=0.5), db=DB)["feasible"]
    large = search_layouts(Scenario.create(**base, memory_headroom_frac=0.2), db=DB)["feasible"]
    assert large.sum() < small.sum() and not np.any(large & ~small)


def test_versus_defaults_names_the_changed_degrees(search_8b):
    from gpusim.search import FRAMEWORK_DEFAULTS, RECOMPUTES, versus_defaults

    text = versus_defaults(search_8b)
    lay, b = search_8b["layouts"], search_8b["best"]
    assert text.startswith("vs Megatron-LM's defaults")
    for k, v in FRAMEWORK_DEFAULTS.items():
        name = {"micro_batch": "micro-batch"}.get(k, k)
        best = RECOMPUTES[int(lay[k][b])] if k == "recompute" else int(lay[k][b])
        if int(lay[k][b]) != v:
            assert f"{name} {v if k != 'recompute' else 'none'} -> {best}" in text
    # Llama 3.1 8B at 8k tokens on 8 H100 with pure data parallelism does not fit: the text says so
    assert "the default does not fit in GPU memory" in text


def test_versus_defaults_when_the_default_fits():
    """GPT-2 fits with Megatron-LM's defaults: the text gives the default's slowdown and where it comes from."""
    from gpusim.scenario import Scenario
    from gpusim.search import search_layouts, versus_defaults

    res = search_layouts(Scenario.create(model="gpt2", gpu="h100-sxm", gpus=8, seq_len=1024, precision="bf16",
                                         global_batch=256, micro_batch=1), db=DB)
    text = versus_defaults(res)
    assert "the default fits and is" in text and "slower, most of it in" in text


# ---- CPU launches where kernels are small ---------------------------------------------------------------------

def test_layer_cpu_closed_form():
    """x86 host: 125.2 us forward, 503.4 us backward; a Grace host 2.751x and FP8 1.365x: forward 470.2 us; full
    recomputation launches the forward again in the backward pass."""
    from gpusim.model.compute import layer_cpu_s

    f, b = layer_cpu_s(125.2e-6, 503.4e-6, np.array([1.0, 2.751]), np.array([1.0, 1.365]), np.array([False, True]))
    assert f.tolist() == pytest.approx([125.2e-6, 125.2e-6 * 2.751 * 1.365])
    assert b.tolist() == pytest.approx([503.4e-6, (503.4e-6 + 125.2e-6) * 2.751 * 1.365])


def test_the_defaults_follow_from_the_cited_module_costs():
    """TE PR #3523 on GB200: 2 LayerNormLinear + 3 Linear per layer; / 2.751 (TE issue #2053) for an x86 host."""
    from gpusim.params import DEFAULT_PARAMS as P

    grace = 37.08 / 13.48
    assert P.te_layer_cpu_fwd_s == pytest.approx((2 * 83.48 + 3 * 59.19) * 1e-6 / grace, rel=1e-3)
    assert P.te_layer_cpu_bwd_s == pytest.approx((2 * (397.73 - 83.48) + 3 * (311.30 - 59.19)) * 1e-6 / grace,
                                                 rel=1e-3)
    assert DB.gpu("gb200").host_cpu_dispatch_mult == pytest.approx(grace, rel=1e-3)


def _tiny_step(cpu_scale, gpu="h100-sxm"):
    from gpusim.model.step import evaluate
    from gpusim.params import DEFAULT_PARAMS
    from gpusim.rows import build_inputs, stack_rows
    from gpusim.scenario import Scenario
    from gpusim.workload import TransformerSpec, build_from_spec

    spec = TransformerSpec(n_layers=4, d_model=128, n_heads=4, vocab_size=1000, seq_len=128, flash_attention=True)
    wl = build_from_spec(spec, id="tiny")
    scn = Scenario.create(workload=wl, gpu=gpu, gpus=2, nodes=1, precision="bf16", kind="zero1", tp=2, micro_batch=1,
                          global_batch=1)
    p = DEFAULT_PARAMS.replace(te_layer_cpu_fwd_s=DEFAULT_PARAMS.te_layer_cpu_fwd_s * cpu_scale,
                               te_layer_cpu_bwd_s=DEFAULT_PARAMS.te_layer_cpu_bwd_s * cpu_scale)
    return evaluate(stack_rows([build_inputs(scn, db=DB, params=p, workload=wl)[2]]), p)


def test_a_tiny_layer_is_launch_bound_and_a_free_cpu_is_not():
    """A 128-wide layer's kernels take microseconds: its forward and backward take the launches' 125 + 503 us, so
    the stage's 4 layers at least 4 x 628.6 us; with free launches they are faster."""
    from gpusim.params import DEFAULT_PARAMS as P

    slow, free = _tiny_step(1.0), _tiny_step(0.0)
    assert free["compute_s"][0] < slow["compute_s"][0]
    assert slow["compute_s"][0] >= 4 * (P.te_layer_cpu_fwd_s + P.te_layer_cpu_bwd_s)


def test_a_grace_host_launches_slower():
    """GB200's Grace host (host_cpu_dispatch_mult 2.751): the same launch-bound layers take 2.751x the CPU time."""
    from gpusim.params import DEFAULT_PARAMS as P

    grace = _tiny_step(1.0, gpu="gb200")
    assert grace["compute_s"][0] >= 4 * 2.751 * (P.te_layer_cpu_fwd_s + P.te_layer_cpu_bwd_s)


def test_allocated_bytes_hand_worked():
    """[stop 56] The allocator's share of a memory breakdown (gpusim.model.memory.allocated_bytes): the states as they
    are, the activations without their fragmentation allowance. 4 + 8 + 24 + 0 GiB of states and 22 GiB of activations
    (20 GiB + 10%) -> 56 GiB; vectorised over rows."""
    import numpy as np

    from gpusim.model.memory import allocated_bytes

    gib = 2.0**30
    out = allocated_bytes(np.array([4.0, 0.0]) * gib, 8 * gib, 24 * gib, 0.0, np.array([22.0, 11.0]) * gib, 0.10)
    assert np.allclose(out / gib, [56.0, 42.0])
