"""[stop 38] Mamba-2's SSD scan as mamba_ssm runs it: five forward and fifteen backward Triton kernels whose
intermediates (fp32 chunk states, C B^T blocks) cross HBM between them (gpusim.model.hybrid)."""

from __future__ import annotations

import pytest

from gpusim.model import hybrid as H


def test_ssd_forward_bytes_hand_worked():
    # Nemotron 3 Nano: d 4096 (nh 64 x P 64), G 8, N 128, Q 128, bf16, one rank: x read twice and y written
    # 3 x 4096 x 2 = 24,576; B and C read twice 4 x 8 x 128 x 2 = 8,192; dt and its sums 64 x 34 = 2,176; the chunk
    # states 64 x 64 x 128 / 128 x 12 = 49,152; C B^T 8 x 8 x 128 = 8,192: 92,288 bytes per token
    one = H.ssd_forward_bytes(1, 1, 2.0, d_inner=4096, heads=64, groups=8, state=128, chunk=128)
    assert one == pytest.approx(24576 + 8192 + 2176 + 49152 + 8192)
    # linear in tokens, split over tensor-parallel ranks
    assert H.ssd_forward_bytes(1000, 2, 2.0, d_inner=4096, heads=64, groups=8, state=128, chunk=128) == \
        pytest.approx(1000 * one / 2)
    # longer chunks: fewer chunk states per token, larger C B^T blocks
    long = H.ssd_forward_bytes(1, 1, 2.0, d_inner=4096, heads=64, groups=8, state=128, chunk=256)
    assert long == pytest.approx(one - 49152 / 2 + 8 * 8 * 128)


def test_each_kernel_pays_its_launch_tail():
    """With no tokens only the launch tails are left: forward, conv 1 + SSD 5 + gate 2 = 8 tails; backward, conv 2 +
    SSD 15 + gate 4 = 21 (a Mamba-1 selective scan: one kernel forward, two backward)."""
    from types import SimpleNamespace

    import numpy as np

    p = SimpleNamespace(kernel_tail_s=1e-6, flash_fwd_eff_frac=0.8)
    x = dict(d_model=2688.0, mamba_version=2.0, mamba_d_inner=4096.0, mamba_state=128.0, mamba_heads=64.0,
             mamba_groups=8.0, mamba_conv=4.0, mamba_chunk=128.0, mamba_dt_rank=0.0, mamba_flop_per_token=1e7)
    kw = dict(gemm=lambda m, n, k: 0.0 * np.asarray(m), T=0.0, tp=1.0, e=2.0, mem_rate=1e12, ceil_rate=1e15, rep=1.0)
    v2 = H.mamba_layer_terms(x, p, **kw)
    assert (v2["f_s"], v2["b_s"]) == (pytest.approx(8e-6), pytest.approx(21e-6))
    v1 = H.mamba_layer_terms({**x, "mamba_version": 1.0, "mamba_dt_rank": 8.0}, p, **kw)
    assert (v1["f_s"], v1["b_s"]) == (pytest.approx(4e-6), pytest.approx(8e-6))


def test_a_hybrid_step_costs_more_with_the_intermediates_counted(db):
    """The same Nemotron 3 Nano layout: the SSD's intermediate traffic and launches make each Mamba mixer slower,
    so the step is longer than with the inputs and output alone (the model's earlier form)."""
    from pathlib import Path

    import numpy as np

    from gpusim.scenario import Scenario
    from gpusim.simulation import simulate

    cfg = Path(__file__).resolve().parents[1] / "workload" / "configs" / "nemotron-3-nano-30b-a3b.json"
    kw = dict(model=str(cfg), gpu="gb300", gpus=8, nodes=2, ep=8, micro_batch=2, global_batch=64, seq_len=8192,
              precision="mxfp8", kind="zero1")
    now = simulate(Scenario.create(**kw), db=db, recommend=False).step_s
    real = H.ssd_forward_bytes
    try:  # the earlier bytes: x, B, C, dt read and y written once (29 KB per token at this shape)
        H.ssd_forward_bytes = lambda T, tp, e, *, d_inner, heads, groups, state, chunk: (
            np.asarray(T, dtype=float) * (d_inner + 2 * groups * state + heads + 2 * d_inner) / tp * e)
        before = simulate(Scenario.create(**kw), db=db, recommend=False).step_s
    finally:
        H.ssd_forward_bytes = real
    assert now > before
