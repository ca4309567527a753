"""[issue 17] A fused causal attention kernel's rate by sequence length and kernel family
(gpusim.model.llm.causal_rate_frac): the published kernel figures it is read from, its interpolation, which GPUs take
which family, and that the layer's attention time follows it."""

from __future__ import annotations

import numpy as np
import pytest

from gpusim.model import llm as L
from gpusim.params import DEFAULT_PARAMS


def test_table_points_are_the_published_figures():
    # FlashAttention-3 paper, Fig. 5, H100, head dim 128, causal forward 579 TFLOP/s at 4K against 648 unmasked at 16K
    f, b = L.causal_rate_frac(4096.0, L.HOPPER, DEFAULT_PARAMS)
    assert float(f) == pytest.approx(579.0 / 648.0)
    # backward: 542 of 561 unmasked at 4K, times the 8K causal / unmasked ratio of PR #1791 (531.6 / 553.9)
    assert float(b) == pytest.approx(542.0 / 561.0 * 531.6 / 553.9)
    f2, _ = L.causal_rate_frac(16384.0, L.FA2, DEFAULT_PARAMS)
    assert float(f2) == pytest.approx(335.0 / 370.0)
    fb, _ = L.causal_rate_frac(8192.0, L.BLACKWELL, DEFAULT_PARAMS)  # cuDNN on B200, PR #2605: 838 causal against 906 unmasked
    assert float(fb) == pytest.approx(838.0 / 906.0)


def test_interpolation_in_log2_tokens_and_the_ends_hold():
    lo, _ = L.causal_rate_frac(2048.0, L.HOPPER, DEFAULT_PARAMS)
    hi, _ = L.causal_rate_frac(4096.0, L.HOPPER, DEFAULT_PARAMS)
    mid, _ = L.causal_rate_frac(2048.0 * 2 ** 0.5, L.HOPPER, DEFAULT_PARAMS)  # halfway in log2
    assert float(mid) == pytest.approx(0.5 * (float(lo) + float(hi)))
    assert float(L.causal_rate_frac(131072.0, L.HOPPER, DEFAULT_PARAMS)[0]) == pytest.approx(616.0 / 648.0)
    assert float(L.causal_rate_frac(128.0, L.FA2, DEFAULT_PARAMS)[0]) == pytest.approx(191.0 / 370.0)
    # every family falls at short sequences and never exceeds its unmasked rate
    for fam in (L.FA2, L.HOPPER, L.BLACKWELL):
        f, b = L.causal_rate_frac(np.array([512.0, 2048.0, 8192.0, 16384.0]), fam, DEFAULT_PARAMS)
        assert np.all(np.diff(f) >= 0) and np.all(np.diff(b) >= 0) and np.all(f <= 1) and np.all(b <= 1)
    # broadcasting over rows of different families
    f, _ = L.causal_rate_frac(np.array([4096.0, 4096.0]), np.array([L.FA2, L.BLACKWELL]), DEFAULT_PARAMS)
    assert f == pytest.approx([319.0 / 370.0, 770.0 / 906.0])


def test_families_by_gpu_and_kernel(db):
    from gpusim.params import DEFAULT_PARAMS
    from gpusim.rows import attention_kernel_fields

    assert attention_kernel_fields(db.gpu("b200"), None, DEFAULT_PARAMS).get("attn_blackwell") is True
    assert "attn_blackwell" not in attention_kernel_fields(db.gpu("b200"), "flash2", DEFAULT_PARAMS)
    assert attention_kernel_fields(db.gpu("b200"), "flash2", DEFAULT_PARAMS).get("attn_fa2") is True
    assert attention_kernel_fields(db.gpu("h100-sxm"), None, DEFAULT_PARAMS) == {}
    assert attention_kernel_fields(db.gpu("a100-sxm4-80gb"), None, DEFAULT_PARAMS).get("attn_fa2") is True


def test_the_layer_attention_time_follows_the_curve(db):
    """Same model, GPU and tokens per micro-batch (seq x micro-batch = 8K): at 1K tokens per sequence the attention
    kernels do 1/8 of the FLOPs of one 8K sequence but, per FLOP, take as long as the curve's 8K / 1K rate ratio
    says (the layer's attention time, forward, from `predict`'s one-layer lines)."""
    from gpusim.scenario import Scenario
    from gpusim.simulation import simulate
    from gpusim.workload import get_workload

    def attn_fwd(seq, mb):
        kw = dict(workload=get_workload("llama3-8b"), node="dgx-h100", gpus=8, tp=1, pp=1, precision="bf16",
                  micro_batch=mb, global_batch=8 * mb, seq_len=seq, kind="zero1", recompute="none")
        return simulate(Scenario.create(**kw), db=db, recommend=False).layer_s["attn_fwd_s"]

    tail = DEFAULT_PARAMS.kernel_tail_s
    long_s, short_s = attn_fwd(8192, 1) - tail, attn_fwd(1024, 8) - tail
    f8, _ = L.causal_rate_frac(8192.0, L.HOPPER, DEFAULT_PARAMS)
    f1, _ = L.causal_rate_frac(1024.0, L.HOPPER, DEFAULT_PARAMS)
    assert short_s / long_s == pytest.approx((1.0 / 8.0) * float(f8) / float(f1), rel=1e-6)


def test_the_tables_are_model_parameters():
    """The published figures live in ModelParams with their provenance, so a calibration can replace them: a flat
    table (every length at the long-sequence rate) gives the same rate at every length."""
    from gpusim.params import PROVENANCE

    for key in ("flash_causal_seq_tokens", "flash_causal_fwd_rate_frac", "flash_causal_bwd_rate_frac"):
        assert key in PROVENANCE
    flat = DEFAULT_PARAMS.model_copy(update={"flash_causal_fwd_rate_frac": {
        k: [v[-1]] * len(v) for k, v in DEFAULT_PARAMS.flash_causal_fwd_rate_frac.items()}})
    f, _ = L.causal_rate_frac(np.array([512.0, 4096.0, 16384.0]), L.HOPPER, flat)
    assert f == pytest.approx([616.0 / 648.0] * 3)
