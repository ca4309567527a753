"""[issue 18] The attention kernel a run uses (Strategy.attention flash | flash2 | triton): closed forms on hand-worked
cases, the per-GEMM path's attention time scaled by exactly those factors, and the CLI's refusals."""

from __future__ import annotations

import subprocess
import sys

import pytest

from gpusim.params import DEFAULT_PARAMS
from gpusim.rows import attention_kernel_slowdown
from gpusim.simulation import Scenario, build_inputs, simulate


def test_kernel_slowdown_hand_worked(db):
    a100, h100, b200 = db.gpu("a100-sxm4-80gb"), db.gpu("h100-sxm"), db.gpu("b200")
    p = DEFAULT_PARAMS
    for g in (a100, h100, b200):
        assert attention_kernel_slowdown(g, None, p) == (1.0, 1.0)
        assert attention_kernel_slowdown(g, "flash", p) == (1.0, 1.0)
        assert attention_kernel_slowdown(g, "unfused", p) == (1.0, 1.0)
    # FlashAttention-2 is Ampere's native kernel; Triton is 1.4x (forward) and 2x (backward) slower than it there
    assert attention_kernel_slowdown(a100, "flash2", p) == (1.0, 1.0)
    assert attention_kernel_slowdown(a100, "triton", p) == pytest.approx((1.4, 2.0))
    # on Hopper and Blackwell FlashAttention-2 takes 1.75x the native kernel, and Triton (no wgmma) that times 1.4 / 2
    for g in (h100, b200):
        assert attention_kernel_slowdown(g, "flash2", p) == pytest.approx((1.75, 1.75))
        assert attention_kernel_slowdown(g, "triton", p) == pytest.approx((1.75 * 1.4, 1.75 * 2.0))


def _one_gpu(attention, gpu="a100-sxm4-80gb"):
    wl = get_workload_cached()
    return Scenario.create(workload=wl, gpu=gpu, gpus=1, kind="ddp", precision="bf16", micro_batch=2,
                           global_batch=2, seq_len=4096, recompute="none", attention=attention)


_WL = {}


def get_workload_cached():
    from gpusim.workload import get_workload

    if "w" not in _WL:
        _WL["w"] = get_workload("llama2-7b", seq_len=4096)
    return _WL["w"]


@pytest.mark.parametrize("gpu", ["a100-sxm4-80gb", "h100-sxm"])
def test_the_attention_time_scales_by_exactly_the_kernel_factors(db, gpu):
    """One GPU, no recomputation, no communication: the compute difference between two kernels is the flash
    forward and backward time of every layer times (factor - 1), by the closed form of gpusim.model.llm
    (causal: half of 2 b s^2 (q + o) forward FLOPs at flash_fwd_eff_frac of the matmul ceiling times the kernel
    family's causal rate at 4096 tokens, gpusim.model.llm.causal_rate_frac: FlashAttention-2's for flash2 and triton,
    the native kernel's for flash, which on Ampere is FlashAttention-2; the backward 2.5x the forward FLOPs at
    flash_bwd_eff_frac)."""
    import math

    p = DEFAULT_PARAMS
    base = simulate(_one_gpu("flash", gpu), db=db, params=p, recommend=False)
    spec = get_workload_cached().transformer
    _, _, row = build_inputs(_one_gpu("flash", gpu), db=db, params=p)
    ceiling = row["ceiling_flop_per_s"]
    if not math.isfinite(ceiling):
        ceiling = p.gemm_ceiling_frac * row["peak_flop_per_s"]
    b, s, q = 2.0, 4096.0, float(spec.q_dim)
    attn_flop = 2.0 * b * s * s * (q + q)
    from gpusim.model.llm import FA2, HOPPER, causal_rate_frac

    fwd_s = 0.5 * attn_flop / (ceiling * p.flash_fwd_eff_frac)
    bwd_s = 2.5 * 0.5 * attn_flop / (ceiling * p.flash_bwd_eff_frac)
    nf, nb = causal_rate_frac(s, HOPPER if gpu == "h100-sxm" else FA2, DEFAULT_PARAMS)  # the native kernel's family
    af, ab = causal_rate_frac(s, FA2, DEFAULT_PARAMS)
    for kernel in ("flash2", "triton"):
        f, k = attention_kernel_slowdown(db.gpu(gpu), kernel, p)
        res = simulate(_one_gpu(kernel, gpu), db=db, params=p, recommend=False)
        expected = spec.n_layers * ((f / af - 1.0 / nf) * fwd_s + (k / ab - 1.0 / nb) * bwd_s)
        got = float(res.breakdown_s["compute_s"]) - float(base.breakdown_s["compute_s"])
        assert got == pytest.approx(expected, rel=1e-6, abs=1e-9), kernel


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "gpusim", *args], capture_output=True, text=True, timeout=120)


def test_cli_attention_values():
    bad = _cli("predict", "--model", "llama2-7b", "--gpu", "h100-sxm", "--attention", "flash4")
    assert bad.returncode == 2 and "flash2" in bad.stderr and "triton" in bad.stderr and "Traceback" not in bad.stderr
    ok = _cli("predict", "--model", "llama2-7b", "--gpu", "h100-sxm", "--gpus", "8", "--strategy", "fsdp-full",
              "--per-gpu-batch", "1", "--seq-len", "8192", "--attention", "triton")
    assert ok.returncode == 0, ok.stderr
    plan = _cli("plan", "--model", "llama2-7b", "--tokens", "1e9", "--attention", "flash2")
    assert plan.returncode == 2 and "gpusim predict" in plan.stderr and "Traceback" not in plan.stderr


def test_a_kernel_rate_with_a_strategy_the_gemm_path_does_not_run_says_so():
    from gpusim.strategy import Strategy

    with pytest.raises(ValueError, match="per-GEMM transformer path.*'dp'.*--attention flash"):
        Strategy(kind="dp", attention="triton")
    with pytest.raises(ValueError, match="tensor/pipeline"):
        Strategy(kind="dp", tp=2)


def test_a_config_naming_flash_attention_2_says_how_to_time_that_kernel():
    from gpusim.workload import from_config

    cfg = {"model_type": "llama", "num_hidden_layers": 4, "hidden_size": 1024, "num_attention_heads": 8,
           "num_key_value_heads": 8, "intermediate_size": 2816, "vocab_size": 32000,
           "max_position_embeddings": 2048}
    wl = from_config({**cfg, "_attn_implementation": "flash_attention_2"})
    assert wl.transformer.flash_attention is True
    assert any("--attention flash2" in a for a in wl.assumptions)
    assert not any("--attention flash2" in a for a in from_config(cfg).assumptions)


def test_flash2_on_the_aggregate_path_says_how_to_compare_on_one_path():
    """[issue 17] flash2 / triton put a plain DDP row on the per-GEMM path; the result says so, and the advice it
    gives (flash with --recompute none) times the native kernel on that same path: on an A100, where
    FlashAttention-2 is the native kernel, the two then agree."""
    from gpusim.simulation import simulate

    base = dict(model="gpt2", gpu="a100-sxm4-80gb", gpus=8, per_gpu_batch=8, precision="amp_bf16", kind="ddp")
    r2 = simulate({**base, "attention": "flash2"}, recommend=False)
    assert any("--recompute none" in a for a in r2.assumptions)
    same_path = simulate({**base, "attention": "flash", "recompute": "none"}, recommend=False)
    assert not any("--recompute none" in a for a in same_path.assumptions)
    assert same_path.step_s == pytest.approx(r2.step_s, rel=1e-9)


def test_head_dim_rate_hand_worked():
    """[issue 17] A fused attention kernel's rate at head dim d against 128 (FlashAttention-3 paper, Figs. 5 and 6)."""
    from gpusim.model.llm import head_dim_rate_frac

    p = DEFAULT_PARAMS
    f, b = head_dim_rate_frac(128.0, False, p)
    assert (float(f), float(b)) == (1.0, 1.0)
    assert tuple(map(float, head_dim_rate_frac(192.0, False, p))) == (1.0, 1.0)  # MLA's 192-wide heads: as 128
    f, b = head_dim_rate_frac(64.0, False, p)
    assert float(f) == pytest.approx(497 / 648) and float(b) == pytest.approx(474 / 561)
    f, b = head_dim_rate_frac(64.0, True, p)  # FlashAttention-2's own bars fall less
    assert float(f) == pytest.approx(324 / 370) and float(b) == pytest.approx(291 / 322)
    f, _ = head_dim_rate_frac(96.0, False, p)
    assert float(f) == pytest.approx((1 + 497 / 648) / 2)


def test_thin_heads_make_the_attention_core_slower(db):
    """The same model with 64-wide heads (twice the heads) does the same attention FLOPs more slowly; the
    FlashAttention-2 rows (and Ampere, whose native kernel it is) by the FA2 bars' smaller fall."""
    import dataclasses

    from gpusim.workload import build_from_spec, get_workload

    base = get_workload("llama3-8b").transformer
    thin = dataclasses.replace(base, n_heads=base.n_heads * 2, n_kv_heads=base.n_kv_heads * 2,
                               d_head=(base.d_head or base.d_model // base.n_heads) // 2)

    def attn(spec, gpu, attention=None):
        wl = build_from_spec(spec, id="t", name="t")
        res = simulate(Scenario.create(workload=wl, gpu=gpu, gpus=8, tp=8, kind="zero1", precision="bf16",
                                       micro_batch=1, global_batch=8, seq_len=8192, attention=attention),
                       db=db, recommend=False)
        return res.layer_s["attn_fwd_s"], res.layer_s["attn_bwd_s"]

    f128, b128 = attn(base, "h100-sxm")
    f64, b64 = attn(thin, "h100-sxm")
    assert f64 / f128 == pytest.approx(648 / 497, rel=0.02) and b64 / b128 == pytest.approx(561 / 474, rel=0.02)
    f128, _ = attn(base, "h100-sxm", "flash2")
    f64, _ = attn(thin, "h100-sxm", "flash2")
    assert f64 / f128 == pytest.approx(370 / 324, rel=0.02)
    f128, _ = attn(base, "a100-sxm4-80gb")
    f64, _ = attn(thin, "a100-sxm4-80gb")
    assert f64 / f128 == pytest.approx(370 / 324, rel=0.02)
