"""Compute per GEMM shape: wave and tile quantisation, a size efficiency that saturates at the measured ceiling,
the memory-bound corner, and the hwdb's achievable-matmul figures (STAS_MAMF)."""

from __future__ import annotations

import numpy as np
import pytest

from gpusim.model.gemm import TILES, gemm_efficiency_frac, gemm_time_s, wave_efficiency_frac
from gpusim.params import DEFAULT_PARAMS

KW = dict(elem_bytes=2.0, k_half=64.0, mem_eff_frac=0.7, kernel_tail_s=0.0)


def test_full_waves_are_efficient_and_one_extra_tile_costs_a_wave():
    sms = 132
    tm, tn = TILES[2]  # 128 x 128
    # exactly one wave of 128x128 tiles (132 = 12 x 11)
    assert float(wave_efficiency_frac(12 * tm, 11 * tn, sms)) == pytest.approx(1.0)
    # 133 tiles: the best tile shape still leaves part of a second wave idle
    assert float(wave_efficiency_frac(133 * tm, tn, sms)) < 0.75
    # tiny output: a few tiles on a large GPU
    assert float(wave_efficiency_frac(128, 128, sms)) == pytest.approx(1 / sms)


def test_efficiency_rises_with_size_and_saturates_below_the_ceiling():
    peak, ceiling, hbm, sms = 989.5e12, 794.5e12, 3.35e12, 132
    sizes = np.array([256, 512, 1024, 2048, 4096, 8192, 16384], dtype=float)
    eff = gemm_efficiency_frac(sizes, sizes, sizes, peak, ceiling, hbm, sms, **KW)
    assert np.all(np.diff(eff) > -0.05)  # (wave quantisation makes it not strictly monotone)
    assert eff[-1] > 0.95 * ceiling / peak and eff[-1] <= ceiling / peak + 1e-12
    assert eff[0] < 0.5 * eff[-1]


def test_short_reductions_and_skinny_gemms_run_below_peak():
    peak, ceiling, hbm, sms = 312e12, 271.2e12, 2.039e12, 108
    big = gemm_efficiency_frac(4096, 4096, 4096, peak, ceiling, hbm, sms, **KW)
    short_k = gemm_efficiency_frac(4096, 4096, 128, peak, ceiling, hbm, sms, **KW)
    assert short_k < 0.75 * big
    # a matrix-vector-like GEMM takes at least the time to read its weights, and runs far below peak
    t = gemm_time_s(8, 8192, 8192, ceiling, hbm, sms, **KW)
    assert float(t) >= 2.0 * (8 * 8192 + 8192 * 8192 + 8 * 8192) / (hbm * 0.7)
    assert gemm_efficiency_frac(8, 8192, 8192, peak, ceiling, hbm, sms, **KW) < 0.05


def test_hwdb_ceilings_come_from_the_mamf_table(db):
    h100 = db.gpu("h100-sxm")
    assert h100.achievable_matmul_flop_per_s("bf16") == pytest.approx(794.5e12)
    assert h100.achievable_matmul_flop_per_s("fp16") == pytest.approx(794.5e12)  # fp16 = bf16 on tensor cores
    assert h100.achievable_matmul_flop_per_s("fp8") == pytest.approx(1402.6e12)
    for gid in ("a100-sxm4-80gb", "h200-sxm", "gh200", "b200", "b300", "gb200", "mi300x", "mi325x"):
        gpu = db.gpu(gid)
        v = gpu.achievable_matmul_flop_per_s("bf16")
        assert v is not None and v < gpu.peak_flop_per_s("bf16")
        assert any("achievable_matmul_tflop_per_s" in s.fields and "MAMF" in s.title for s in gpu.sources)
    # a GPU the table does not cover falls back to a ModelParams fraction of its peak
    assert db.gpu("rtx-4090").achievable_matmul_flop_per_s("bf16") is None
    assert 0.5 < DEFAULT_PARAMS.gemm_ceiling_frac < 0.9


def test_an_accumulating_epilogue_reads_its_output_after_the_main_loop_on_ampere():
    """Weight gradient over 2048 tokens into an fp32 main gradient (20480 x 7680): with a serial epilogue (Ampere)
    the 4-byte source read follows the FLOPs; overlapped (Hopper) it is one more stream of the roofline."""
    ceiling, hbm, sms = 271.2e12, 2.039e12, 108
    m, n, k = 20480.0, 7680.0, 2048.0
    kw = dict(KW, out_bytes=4.0, src_bytes=4.0)
    overlapped = float(gemm_time_s(m, n, k, ceiling, hbm, sms, **kw))
    serial = float(gemm_time_s(m, n, k, ceiling, hbm, sms, serial_epilogue=True, **kw))
    src_s = 4.0 * m * n / (hbm * 0.7)
    assert serial == pytest.approx(overlapped + src_s)  # compute-bound: the overlapped read hides under the FLOPs
    # no source (beta = 0): the epilogue's writes drain under the next tile either way, as before
    plain = dict(KW)
    assert float(gemm_time_s(m, n, k, ceiling, hbm, sms, serial_epilogue=True, **plain)) == pytest.approx(
        float(gemm_time_s(m, n, k, ceiling, hbm, sms, **plain)))
    # vectorised over the flag
    both = gemm_time_s(m, n, k, ceiling, hbm, sms, serial_epilogue=np.array([False, True]), **kw)
    np.testing.assert_allclose(both, [overlapped, serial])


def test_the_epilogue_overlaps_on_hopper_and_blackwell_only(db):
    from gpusim.simulation import Scenario, build_inputs

    for gpu, node, serial in (("a100-sxm4-80gb", "dgx-a100-80gb", True), ("h100-sxm", None, False)):
        scn = Scenario(model="llama2-7b", gpu=gpu, node=node, gpus=8, tp=8, micro_batch=1, global_batch=8,
                       seq_len=2048, precision="bf16")
        assert bool(build_inputs(scn, db)[2]["gemm_serial_epilogue"]) is serial
    assert set(DEFAULT_PARAMS.gemm_epilogue_overlap_archs) == {"hopper", "blackwell"}
