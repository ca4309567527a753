"""[issue 17] FP8 GEMMs by shape: the tile's fixed cost counted in k-steps of the faster FP8 loop, the 16-bit output
an FP8 GEMM writes, and what that does to the FP8 speed-up of short and long reductions (hand-worked cases)."""

from __future__ import annotations

import numpy as np
import pytest

from gpusim.model.gemm import fp8_k_half, gemm_time_s
from gpusim.model.llm import layer_gemm_times_s
from gpusim.params import DEFAULT_PARAMS as P


def test_fp8_k_half_closed_form():
    # H100 SXM measured ceilings (hwdb): bf16 794.5, fp8 1402.6 TFLOP/s: 64 k-steps -> 64 x 1402.6 / 794.5 = 112.98
    assert fp8_k_half(64.0, 794.5e12, 1402.6e12) == pytest.approx(64.0 * 1402.6 / 794.5)
    assert fp8_k_half(64.0, 1e15, 1e15) == 64.0


def _t(k, ceil, kh, eb, ob=None):
    return gemm_time_s(8192.0, 8192.0, k, ceil, 3.35e12, 132.0, elem_bytes=eb, out_bytes=ob, k_half=kh,
                       mem_eff_frac=0.9, kernel_tail_s=0.0)


def test_fp8_speedup_is_smaller_for_short_reductions():
    c16, c8 = 794.5e12, 1402.6e12
    kh8 = fp8_k_half(64.0, c16, c8)

    def speedup(k):
        return _t(k, c16, 64.0, 2.0) / _t(k, c8, kh8, 1.0, 2.0)

    # a long reduction approaches the ceilings' ratio; a short one keeps less of it:
    # k = 16384: (1 + 113/16384) / (1 + 64/16384) x ratio ; k = 256: (256 + 64)/(256 + 113) x ratio
    assert speedup(16384.0) == pytest.approx(c8 / c16 * (16384 + 64) / (16384 + 64 * c8 / c16), rel=1e-9)
    assert speedup(1024.0) < speedup(16384.0) < c8 / c16


def test_layer_fp8_gemms_write_a_16_bit_output():
    """A memory-bound FP8 GEMM (small m) moves 1-byte inputs but a 2-byte output: its time is the roofline of
    those bytes, never that of a 1-byte output."""
    one = np.ones(1)
    T, h = 16.0 * one, 8192.0 * one  # 16 tokens: every linear GEMM is memory-bound
    args = dict(T=T, s=16.0 * one, h=h, a=64.0 * one, q=h, kv=1024.0 * one, f=28672.0 * one, up=one, V=128256.0 * one,
                tp=one, b=one, ceil_rate=794.5e12 * one, hbm=3.35e12 * one, sms=132.0 * one, e=2.0 * one,
                fp8=one, ceil8=1402.6e12 * one, fused_wgrad=np.zeros(1, bool), serial_epilogue=np.zeros(1, bool))
    t = layer_gemm_times_s(**args, p=P)
    # the FFN-down forward GEMM: (T, h, f) reads f T + f h bytes in FP8 and writes 2 T h bytes
    m, n, k = 16.0, 8192.0, 28672.0
    expect = (k * m + k * n + 2.0 * m * n) / (3.35e12 * P.mem_eff_frac) + P.kernel_tail_s
    assert t[9][0] == pytest.approx(expect, rel=1e-9)


def test_non_tn_fp8_gemms_need_no_transposed_copy():
    """TE's is_non_tn_fp8_gemm_supported(): compute capability 10.x-11.x and >= 13.0; there per-tensor casts write the
    rowwise copy only (2 + 1 bytes, current scaling + 2 for the amax read) and keep one FP8 weight copy; MXFP8 keeps
    both orientations everywhere."""
    from gpusim.model import fp8 as FP8

    assert [FP8.non_tn_gemm(c) for c in ("9.0", "8.9", "10.0", "10.3", "12.0", "13.0", None)] == \
        [False, False, True, True, False, True, False]
    assert FP8.mode_code("fp8", "delayed", "9.0") == FP8.DELAYED
    assert FP8.mode_code("fp8", "current", "10.0") == FP8.CURRENT_NTN
    assert FP8.mode_code("mxfp8", "current", "10.0") == FP8.MX
    modes = np.array([FP8.NONE, FP8.DELAYED, FP8.CURRENT, FP8.MX, FP8.DELAYED_NTN, FP8.CURRENT_NTN])
    assert FP8.cast_bytes_per_elem(modes).tolist() == [0.0, 4.0, 6.0, 4.0 + 1 / 16, 3.0, 5.0]
    assert FP8.weight_copy_bytes_per_param(modes).tolist() == [0.0, 2.0, 2.0, 2.0 + 1 / 16, 1.0, 1.0]


def test_blackwell_per_tensor_fp8_casts_cost_less_than_hoppers(db):
    """The same layout on B200 rows with the Hopper-style transposed copies (mode CURRENT) vs the non-TN mode: the
    non-TN step is never slower and needs less memory."""
    from gpusim.model import fp8 as FP8
    from gpusim.model.step import evaluate
    from gpusim.scenario import Scenario
    from gpusim.simulation import build_inputs, stack_rows
    from gpusim.workload import get_workload

    scn = Scenario(workload=get_workload("llama3-8b", seq_len=8192), node="dgx-b200", gpus=8, kind="zero1",
                   precision="fp8", fp8_recipe="current", tp=1, pp=1, micro_batch=2, global_batch=128,
                   recompute="none")
    _, _, row = build_inputs(scn, db)
    assert row["fp8_mode"] == FP8.CURRENT_NTN
    hop = dict(row, fp8_mode=FP8.CURRENT, weight_bytes_per_param=row["weight_bytes_per_param"] + 1.0)
    a, b = evaluate(stack_rows([row]), P), evaluate(stack_rows([hop]), P)
    assert a["step_s"][0] < b["step_s"][0]
    assert a["memory_per_gpu_bytes"][0] < b["memory_per_gpu_bytes"][0]
