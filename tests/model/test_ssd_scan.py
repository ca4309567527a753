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


def test_layout_copies_hand_worked_and_only_with_more_than_one_sequence():
    """[issue 17] Megatron-Core's MambaMixer copies the in_proj output (``l b d -> b l d``) and the scan's output back
    (``b l d -> l b d``) with ``contiguous()``: Nemotron 3 Nano's in_proj width 2 x 4096 + 2 x 8 x 128 + 64 = 10,304
    and d 4,096, bf16, read and written: 14,400 x 4 = 57,600 bytes per token; a micro-batch of one sequence permutes
    a dimension of size one and copies nothing; tensor parallelism splits both widths."""
    import numpy as np

    one = H.layout_copy_bytes(1, 2, 1, 2.0, width=10304, d_inner=4096)
    assert one == pytest.approx(57600)
    assert H.layout_copy_bytes(1000, 4, 2, 2.0, width=10304, d_inner=4096) == pytest.approx(1000 * 57600 / 2)
    assert H.layout_copy_bytes(1000, 1, 1, 2.0, width=10304, d_inner=4096) == 0.0
    assert np.all(H.layout_copy_bytes(np.array([8.0, 8.0]), np.array([1.0, 2.0]), 1.0, 2.0, width=1.0, d_inner=1.0)
                  == np.array([0.0, 64.0]))


def test_the_mixer_pays_the_copies_in_both_passes_at_hbm_speed():
    """The same tokens as one or as two sequences: with two the forward and the backward each take the copies'
    bytes over the memory rate and two launch tails more (a Mamba-1 mixer has no such copies)."""
    from types import SimpleNamespace

    import numpy as np

    p = SimpleNamespace(kernel_tail_s=1e-6, flash_fwd_eff_frac=0.8)
    x = dict(d_model=2688.0, mamba_version=2.0, mamba_d_inner=4096.0, mamba_state=128.0, mamba_heads=64.0,
             mamba_groups=8.0, mamba_conv=4.0, mamba_chunk=128.0, mamba_dt_rank=0.0, mamba_flop_per_token=1e7)
    kw = dict(gemm=lambda m, n, k: 0.0 * np.asarray(m), T=8192.0, tp=1.0, e=2.0, mem_rate=1e12, ceil_rate=1e15,
              rep=1.0)
    single, double = H.mamba_layer_terms(x, p, **kw), H.mamba_layer_terms(x, p, **kw, micro_batch=2.0)
    extra = 8192 * 57600 / 1e12 + 2e-6
    assert double["f_s"] - single["f_s"] == pytest.approx(extra)
    assert double["b_s"] - single["b_s"] == pytest.approx(extra)
    v1 = {**x, "mamba_version": 1.0, "mamba_dt_rank": 8.0}
    assert H.mamba_layer_terms(v1, p, **kw, micro_batch=2.0)["f_s"] == pytest.approx(
        H.mamba_layer_terms(v1, p, **kw)["f_s"])


def test_predict_names_the_mamba_mixers_share_of_a_layer(db):
    """[issue 17] gpusim predict's one-layer lines name a hybrid model's Mamba mixers (averaged over the layers, as
    the attention core and the MoE experts are), and a transformer's do not."""
    from pathlib import Path

    from gpusim.diagnose import layer_lines
    from gpusim.scenario import Scenario
    from gpusim.simulation import simulate

    cfg = Path(__file__).resolve().parents[1] / "workload" / "configs" / "nemotron-3-nano-30b-a3b.json"
    res = simulate(Scenario.create(model=str(cfg), gpu="gb300", gpus=8, nodes=2, ep=8, micro_batch=2, global_batch=64,
                                   seq_len=8192, precision="mxfp8", kind="zero1"), db=db, recommend=False)
    d = res.layer_s
    assert 0 < d["mamba_fwd_s"] < d["gpu_fwd_s"] and 0 < d["mamba_bwd_s"] < d["gpu_bwd_s"]
    assert "Mamba mixers" in "\n".join(layer_lines(d))
    dense = simulate(Scenario.create(model="llama3-8b", gpu="h100-sxm", gpus=8, tp=2, micro_batch=1, global_batch=64,
                                     seq_len=4096,
                                     precision="bf16", kind="zero1"), db=db, recommend=False)
    assert dense.layer_s["mamba_fwd_s"] == 0.0 and "Mamba" not in "\n".join(layer_lines(dense.layer_s))


def test_triton_ssd_share_of_its_roofline_from_the_published_h100_figures(db):
    """[issue 17] SSD_TRITON_HBM_FRAC, recomputed: vLLM PR #27299's "Original" H100 column at 128 heads of 64, one
    group, state 128, chunk 256 (1.262e7, 1.292e7, 1.180e7 tokens/s at 8,192, 16,384, 32,768 tokens) against the
    roofline of 105,728 bytes per token over the H100's HBM at mem_eff_frac."""
    from gpusim.params import DEFAULT_PARAMS

    per_token = H.ssd_forward_bytes(1, 1, 2.0, d_inner=8192, heads=128, groups=1, state=128, chunk=256)
    assert per_token == pytest.approx(3 * 8192 * 2 + 4 * 128 * 2 + 128 * 34 + 128 * 64 * 128 / 256 * 12 + 8 * 256)
    assert per_token == pytest.approx(105728)
    roof_s = per_token / (db.gpu("h100-sxm").memory_gbyte_per_s * 1e9 * DEFAULT_PARAMS.mem_eff_frac)
    tokens = (8192, 16384, 32768)
    measured_s = sum(t / r for t, r in zip(tokens, (1.262327e7, 1.292440e7, 1.180002e7))) / sum(tokens)
    assert roof_s / measured_s == pytest.approx(H.SSD_TRITON_HBM_FRAC, rel=0.01)


def test_mamba2_scan_bytes_move_at_the_triton_share_and_mamba1_at_the_roofline():
    """The forward pass on T tokens less its launch tails: conv1d and gate at the memory rate, the SSD's bytes at
    SSD_TRITON_HBM_FRAC of it (bytes bind: the FLOPs' rate is set far above); the backward takes the scan twice."""
    from types import SimpleNamespace

    import numpy as np

    p = SimpleNamespace(kernel_tail_s=1e-6, flash_fwd_eff_frac=0.8)
    x = dict(d_model=2688.0, mamba_version=2.0, mamba_d_inner=4096.0, mamba_state=128.0, mamba_heads=64.0,
             mamba_groups=8.0, mamba_conv=4.0, mamba_chunk=128.0, mamba_dt_rank=0.0, mamba_flop_per_token=1e7)
    kw = dict(gemm=lambda m, n, k: 0.0 * np.asarray(m), tp=1.0, e=2.0, mem_rate=1e12, ceil_rate=1e18, rep=1.0)
    T = 8192.0
    conv = T * (4096 + 2 * 8 * 128) * 2 * 2.0 / 1e12
    gate = T * 5 * 4096 * 2.0 / 1e12
    ssd = H.ssd_forward_bytes(T, 1, 2.0, d_inner=4096, heads=64, groups=8, state=128, chunk=128) / 1e12
    f = H.mamba_layer_terms(x, p, T=T, **kw)["f_s"] - H.mamba_layer_terms(x, p, T=0.0, **kw)["f_s"]
    assert f == pytest.approx(conv + gate + ssd / H.SSD_TRITON_HBM_FRAC)
    b = H.mamba_layer_terms(x, p, T=T, **kw)["b_s"] - H.mamba_layer_terms(x, p, T=0.0, **kw)["b_s"]
    assert b == pytest.approx(2 * conv + 2 * gate + 2 * ssd / H.SSD_TRITON_HBM_FRAC)
    v1 = {**x, "mamba_version": 1.0, "mamba_dt_rank": 8.0}
    f1 = H.mamba_layer_terms(v1, p, T=T, **kw)["f_s"] - H.mamba_layer_terms(v1, p, T=0.0, **kw)["f_s"]
    assert f1 == pytest.approx(T * 4096 * 2 * 2.0 / 1e12 + gate + T * (4 * 4096 + 2 * 128) * 2.0 / 1e12)
