"""Selective-scan (Mamba-2 / SSD) mixer layers of hybrid Mamba-Transformer models (Nemotron-H, Jamba-class): FLOPs,
bytes, the state kept for the backward pass and the tensor-parallel split, in closed form.

One Mamba-2 mixer on ``T`` tokens (Dao & Gu, "Transformers are SSMs: Generalized Models and Efficient Algorithms
Through Structured State Space Duality", ICML 2024, sections 6-7 and Listing 1; the mixer of Megatron-Core's
``megatron/core/ssm/mamba_mixer.py`` and of Hugging Face's ``NemotronHMamba2Mixer``), model width ``h``, inner width
``d = expand h``, ``nh = d / P`` heads of width ``P`` (``mamba_head_dim``), state size ``N`` (``ssm_state_size``), ``G``
groups of ``B``/``C`` (``n_groups``), causal depthwise convolution of width ``K`` (``conv_kernel``), chunk length
``Q`` (``chunk_size``):

- **in_proj** ``h -> 2 d + 2 G N + nh`` (``z``, ``x``, ``B``, ``C``, ``dt``): ``2 T h (2 d + 2 G N + nh)`` FLOPs.
- **conv1d** (depthwise, on ``x``, ``B``, ``C``): ``2 T K (d + 2 G N)`` FLOPs, memory-bound.
- **SSD** (the chunked scan, Listing 1): within each chunk the "diagonal blocks" ``(C B^T o L) X`` cost ``2 Q N`` per
  token and group (``C B^T``) and ``2 Q P`` per token and head (times ``X``); the chunk states ``B^T X`` and the
  state-to-output ``C h`` cost ``2 N P`` per token and head each; the state passing between chunks
  ``nh N P`` per chunk (negligible). Per token: ``nh (2 Q P + 4 N P) + 2 G Q N``.
- **gated RMSNorm** on ``y`` (``d``) and **out_proj** ``d -> h``: ``2 T d h`` FLOPs.

**State in memory** (training): the backward pass of the chunked scan keeps the chunk states, ``T / Q`` of
``nh P N`` in fp32 (Listing 1's ``states``), besides the mixer's inputs ``x``, ``B``, ``C``, ``z``, ``dt`` at the
activation width.

**Tensor parallelism** (Megatron-Core ``MambaMixer``): ``in_proj`` is column-parallel and ``out_proj`` row-parallel,
so each rank holds ``nh / tp`` heads and ``G / tp`` groups (both must divide by ``tp``), runs its conv and scan on
them alone, and the layer needs one all-reduce of ``T h`` activations in the forward pass (a reduce-scatter and an
all-gather with sequence parallelism), as an MLP does.

Pure numpy on broadcastable float64 arrays.
"""

from __future__ import annotations

import numpy as np


def _f(a):
    return np.asarray(a, dtype=np.float64)


def mamba2_dims(d_model, expand, head_dim, state, groups):
    """``(d_inner, n_heads, in_proj_width)`` of a Mamba-2 mixer: ``d = expand h``, ``nh = d / P``,
    in_proj width ``2 d + 2 G N + nh``."""
    d = _f(expand) * _f(d_model)
    nh = d / _f(head_dim)
    return d, nh, 2.0 * d + 2.0 * _f(groups) * _f(state) + nh


def mamba2_params(d_model, expand, head_dim, state, groups, conv_kernel):
    """Parameters of one mixer: in_proj ``h x width``, conv1d ``(d + 2 G N)(K + 1)`` (weights and bias), ``A_log``,
    ``D`` and ``dt_bias`` (``nh`` each), the gated norm's ``d`` weights and out_proj ``d x h``."""
    d, nh, width = mamba2_dims(d_model, expand, head_dim, state, groups)
    h = _f(d_model)
    conv_ch = d + 2.0 * _f(groups) * _f(state)
    return h * width + conv_ch * (_f(conv_kernel) + 1.0) + 3.0 * nh + d + d * h


def mamba2_fwd_flop_per_token(d_model, expand, head_dim, state, groups, conv_kernel, chunk):
    """Forward FLOPs per token of one mixer (module docstring): projections, convolution and the chunked scan."""
    d, nh, width = mamba2_dims(d_model, expand, head_dim, state, groups)
    h, P, N, G, Q = _f(d_model), _f(head_dim), _f(state), _f(groups), _f(chunk)
    proj = 2.0 * h * width + 2.0 * d * h
    conv = 2.0 * _f(conv_kernel) * (d + 2.0 * G * N)
    ssd = nh * (2.0 * Q * P + 4.0 * N * P) + 2.0 * G * Q * N
    return proj + conv + ssd


def mamba2_state_bytes(tokens, d_model, expand, head_dim, state, groups, chunk, tp=1.0):
    """Bytes of chunk states one rank keeps for the backward pass of one mixer on ``tokens`` tokens: ``ceil(T / Q)``
    states of ``(nh / tp) P N`` fp32 values."""
    _, nh, _ = mamba2_dims(d_model, expand, head_dim, state, groups)
    return np.ceil(_f(tokens) / _f(chunk)) * nh / _f(tp) * _f(head_dim) * _f(state) * 4.0


def mamba2_tp_ok(tp, n_heads, groups):
    """Megatron-Core's split: ``tp`` must divide both the heads and the groups (broadcastable bool)."""
    tp, nh, G = _f(tp), _f(n_heads), _f(groups)
    return (np.mod(nh, tp) == 0) & (np.mod(G, tp) == 0)
