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
