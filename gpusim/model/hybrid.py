"""[issue 17] Hybrid Mamba-Transformer layers in the layout model (:mod:`gpusim.model.llm`): one Mamba mixer's time,
activation bytes and model FLOPs per micro-batch on one tensor-parallel rank.

The layout model describes the model by an *average layer*: ``attn_frac`` of the layers carry attention,
``mamba_frac`` a Mamba mixer and ``ffn_frac`` an FFN (dense, or routed experts on ``moe_frac``); every per-layer term
of :func:`gpusim.model.llm.llm_rows_terms` is the fraction-weighted sum of the kinds, so the GEMM columns stay one
vectorised evaluation per distinct shape and a pipeline stage of ``L / pp`` layers holds the model's mix of kinds
(a real stage boundary falls between blocks of the pattern: the fullest stage may hold one Mamba layer more than the
average, not modelled). A dense transformer has ``attn_frac = ffn_frac = 1`` and ``mamba_frac = 0`` and does not
enter this module.

One Mamba mixer on ``T`` tokens of a rank (:mod:`gpusim.workload.ssm` for the closed forms), tensor-parallel as in
Megatron-Core's ``MambaMixer`` (``megatron/core/ssm/mamba_mixer.py``): in_proj column-parallel (``h -> W / tp``), the
conv1d, scan and gated norm on the rank's ``nh / tp`` heads and ``G / tp`` groups, out_proj row-parallel
(``d / tp -> h``), so one all-reduce of ``T h`` (reduce-scatter + all-gather with sequence parallelism) per mixer in
the forward pass, as an MLP has:

- **GEMMs**: in_proj and out_proj (Mamba-1 also x_proj ``d / tp -> R + 2 N`` and dt_proj ``R -> d / tp``) as forward,
  data-gradient and weight-gradient GEMMs through ``gemm`` (:func:`gpusim.model.gemm.gemm_time_s`).
- **conv1d** (depthwise, ``K`` taps): memory-bound, read and write ``C / tp`` channels per token.
- **scan** (Mamba-2's chunked SSD kernel, Mamba-1's selective scan): a fused kernel like FlashAttention's, timed as
  ``max(FLOPs / (ceiling x flash_fwd_eff_frac), bytes / (HBM x mem_eff_frac))`` (the roofline; its FLOPs are the
  closed forms of :mod:`gpusim.workload.ssm`, its bytes the inputs ``x``, ``B``, ``C``, ``dt`` read and ``y`` written);
  the backward pass recomputes the chunk states and runs the transposed products: 2x the forward time.
- **gate and norm**: ``y silu(z)`` and the gated RMSNorm by their bytes.

Kept for the backward pass (16-bit unless said): the norm input, the in_proj input and output, the conv output, the
scan output and the gate's inputs, the out_proj input. Not the chunk states: the fused kernel Megatron-Core calls
(mamba_ssm's ``mamba_chunk_scan_combined``) saves its inputs and output and recomputes the states in the backward pass
(the reference scan of Dao & Gu's Listing 1 would keep them: ``gpusim.workload.ssm.mamba2_state_bytes``).

Pure numpy on broadcastable float64 arrays.
"""

from __future__ import annotations

import numpy as np

#: the scan's backward pass over its forward pass (recompute the chunk states, then the transposed products)
SCAN_BWD_MULT = 2.0


def _f(a):
    return np.asarray(a, dtype=np.float64)


def mamba_layer_terms(x: dict, p, *, gemm, T, tp, e, mem_rate, ceil_rate, rep) -> dict:
    """Forward and backward seconds, kept bytes and forward model FLOPs per token of one Mamba mixer on one rank.

    ``x`` holds the row fields ``mamba_version``, ``mamba_d_inner``, ``mamba_state``, ``mamba_heads``,
    ``mamba_groups``, ``mamba_conv``, ``mamba_chunk``, ``mamba_dt_rank`` and ``mamba_flop_per_token`` (the mixer's
    forward FLOPs per token, :meth:`gpusim.workload.transformer.TransformerSpec.mamba_fwd_flop_per_token`); ``gemm``
    times one GEMM ``(m, n, k)``; ``T`` tokens per rank, ``e`` bytes per activation element, ``rep`` the share of
    ``T h`` a rank holds (``1 / tp`` with sequence parallelism).
    """
    h = _f(x["d_model"])
    v2 = _f(x["mamba_version"]) == 2.0
    d, N, nh = _f(x["mamba_d_inner"]), _f(x["mamba_state"]), _f(x["mamba_heads"])
    G, K, R = _f(x["mamba_groups"]), _f(x["mamba_conv"]), _f(x["mamba_dt_rank"])
    width = np.where(v2, 2.0 * d + 2.0 * G * N + nh, 2.0 * d)          # in_proj output (z, x[, B, C, dt])
    conv_ch = np.where(v2, d + 2.0 * G * N, d)

    def lin(n_out, k_in):
        return gemm(T, n_out, k_in), gemm(T, k_in, n_out) + gemm(k_in, n_out, T)

    in_f, in_b = lin(width / tp, h)
    out_f, out_b = lin(h, d / tp)
    gf, gb = in_f + out_f, in_b + out_b
    if np.any(~v2):  # Mamba-1: x_proj d/tp -> R + 2N and dt_proj R -> d/tp (zero on Mamba-2 rows)
        xp_f, xp_b = lin(R + 2.0 * N, d / tp)
        dt_f, dt_b = lin(d / tp, np.maximum(R, 1.0))
        gf = gf + np.where(v2, 0.0, xp_f + dt_f)
        gb = gb + np.where(v2, 0.0, xp_b + dt_b)
    proj_flop = np.where(v2, 2.0 * h * width + 2.0 * d * h, 2.0 * (2.0 * d * h + d * (R + 2.0 * N) + R * d + d * h))
    conv_s = T * conv_ch / tp * 2.0 * e / mem_rate + p.kernel_tail_s
    scan_flop = T / tp * (_f(x["mamba_flop_per_token"]) - proj_flop - 2.0 * K * conv_ch)
    scan_bytes = np.where(v2, T * (conv_ch + nh + 2.0 * d) / tp * e, T * (4.0 * d + 2.0 * N) / tp * e)
    scan_s = np.maximum(scan_flop / (ceil_rate * p.flash_fwd_eff_frac), scan_bytes / mem_rate) + p.kernel_tail_s
    gate_s = T * 5.0 * d / tp * e / mem_rate + 2.0 * p.kernel_tail_s
    fwd = gf + conv_s + scan_s + gate_s
    bwd = gb + 2.0 * conv_s + SCAN_BWD_MULT * scan_s + 2.0 * gate_s
    keep = (T * h * rep * e * 2.0                                        # norm input, in_proj input
            + T * (width + conv_ch + 3.0 * d) / tp * e                     # in_proj out, conv out, y, gate, out_proj in
            + np.where(v2, 0.0, T * (R + 2.0 * N) / tp * e))
    return {"f_s": fwd, "b_s": bwd, "keep_bytes": keep, "flop_per_token": _f(x["mamba_flop_per_token"])}
