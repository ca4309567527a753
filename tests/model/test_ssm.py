"""Mamba-2 mixer closed forms (gpusim.model.ssm) on a hand-worked case and Nemotron-H 8B's published shape."""

from __future__ import annotations

import pytest

from gpusim.model import ssm

# a small mixer worked by hand: h 4, expand 2 -> d 8, P 2 -> nh 4, N 3, G 1, K 4, Q 5
H, X, P, N, G, K, Q = 4, 2, 2, 3, 1, 4, 5


def test_dims_by_hand():
    d, nh, width = ssm.mamba2_dims(H, X, P, N, G)
    assert (float(d), float(nh), float(width)) == (8.0, 4.0, 2 * 8 + 2 * 1 * 3 + 4)  # z, x, B, C, dt


def test_params_by_hand():
    # in_proj 4 x 26 = 104; conv (8 + 6) channels x (4 + 1) = 70; A_log, D, dt_bias 3 x 4 = 12; norm 8; out_proj 32
    assert float(ssm.mamba2_params(H, X, P, N, G, K)) == 104 + 70 + 12 + 8 + 32


def test_forward_flops_by_hand():
    proj = 2 * 4 * 26 + 2 * 8 * 4  # in_proj + out_proj
    conv = 2 * 4 * (8 + 6)
    ssd = 4 * (2 * 5 * 2 + 4 * 3 * 2) + 2 * 1 * 5 * 3  # heads: diagonal blocks + states + output; groups: C B^T
    assert float(ssm.mamba2_fwd_flop_per_token(H, X, P, N, G, K, Q)) == proj + conv + ssd


def test_state_bytes_by_hand_and_split_over_tp():
    # 12 tokens in chunks of 5: 3 chunk states of nh P N = 4 x 2 x 3 fp32 values
    assert float(ssm.mamba2_state_bytes(12, H, X, P, N, G, Q)) == 3 * 4 * 2 * 3 * 4
    assert float(ssm.mamba2_state_bytes(12, H, X, P, N, G, Q, tp=2)) == 3 * 2 * 2 * 3 * 4


def test_nemotron_h_8b_mixer():
    # Nemotron-H 8B's config.json (nvidia/Nemotron-H-8B-Base-8K, as TensorRT-LLM's tests copy it): h 4096, 128
    # heads of 64 (expand 2), state 128, 8 groups, conv 4, chunk 256
    d, nh, width = ssm.mamba2_dims(4096, 2, 64, 128, 8)
    assert float(nh) == 128 and float(width) == 2 * 8192 + 2 * 8 * 128 + 128
    # the projections dominate: 2 h (width + d) per token; the scan adds 128 (2 256 64 + 4 128 64) + 2 8 256 128
    # and the convolution 2 4 (8192 + 2048): about 4% more
    f = float(ssm.mamba2_fwd_flop_per_token(4096, 2, 64, 128, 8, 4, 256))
    proj = 2 * 4096 * (float(width) + 8192)
    assert f == proj + 128 * (2 * 256 * 64 + 4 * 128 * 64) + 2 * 8 * 256 * 128 + 2 * 4 * (8192 + 2048)
    assert f / proj == pytest.approx(1.04, abs=0.01)
    assert bool(ssm.mamba2_tp_ok(8, nh, 8)) and not bool(ssm.mamba2_tp_ok(16, nh, 8))


def test_more_state_more_work():
    small = ssm.mamba2_fwd_flop_per_token(4096, 2, 64, 64, 8, 4, 128)
    large = ssm.mamba2_fwd_flop_per_token(4096, 2, 64, 128, 8, 4, 128)
    assert float(large) > float(small)
    assert float(ssm.mamba2_state_bytes(8192, 4096, 2, 64, 128, 8, 128)) == pytest.approx(
        64 * 128 * 64 * 128 * 4)
