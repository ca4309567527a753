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
- **scan** (Mamba-2's chunked SSD kernels, Mamba-1's selective scan), timed as the roofline
  ``max(FLOPs / (ceiling x flash_fwd_eff_frac), bytes / (HBM x mem_eff_frac))`` with the closed-form FLOPs of
  :mod:`gpusim.workload.ssm`; the backward pass recomputes the chunk states and runs the transposed products: 2x the
  forward's roofline. Mamba-1's selective scan is one fused kernel whose bytes are its inputs and output. [stop 38]
  Mamba-2's ``mamba_chunk_scan_combined`` (state-spaces/mamba ``mamba_ssm/ops/triton/ssd_combined.py``
  @d757aef189a5215ab3568516825a145e49f7b7ed) is not one kernel: the forward runs five (chunk_cumsum, chunk_state,
  state_passing, bmm_chunk, chunk_scan: :data:`SSD_FWD_KERNELS`), the backward fifteen (four of them recompute the
  forward's: :data:`SSD_BWD_KERNELS`), each with its launch tail, and its intermediates cross HBM between them
  (:func:`ssd_forward_bytes`): the chunk states (``nh P N`` values per chunk, written in fp32 by chunk_state, read in
  fp32 and written again in 16-bit by state_passing, read by chunk_scan) and the ``C B^T`` blocks (``G Q`` values
  per token, fp32, written by bmm_chunk and read by chunk_scan), besides ``x``, ``B``, ``C`` read twice and ``y``
  written. At Nemotron 3 Nano's shape that is about 92 KB per token against the 29 KB of the inputs and output
  alone. The kernels' own arithmetic efficiency has no published training measurement and keeps FlashAttention's;
  [issue 17] their bytes move at :data:`SSD_TRITON_HBM_FRAC` of the roofline, as a published H100 benchmark of the
  Triton kernels shows (forward; the backward is taken to match).
- **gate and norm**: ``y silu(z)`` and the gated RMSNorm by their bytes.
- **layout copies** [issue 17]: Megatron-Core's training path (``MambaMixer._ssm_training``,
  ``megatron/core/ssm/mamba_mixer.py`` @00bebb45b9b247b7c6a13d2f47f3b5beed3a335d) hands the fused kernel
  ``rearrange(zxBCdt, "l b d -> b l d").contiguous()`` and takes its output back as
  ``rearrange(y, "b l d -> l b d").contiguous()``: with more than one sequence per micro-batch each is a copy (read
  and write) of the in_proj output (``2 d + 2 G N + nh`` per token) and of ``y`` (``d``); the backward pass copies
  their gradients back the same way (:func:`layout_copy_bytes`). With one sequence the permutation moves a dimension
  of size one and ``contiguous()`` copies nothing.

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
#: [stop 38] Triton kernels of Mamba-2's ``mamba_chunk_scan_combined`` per forward and per backward pass
#: (``mamba_ssm/ops/triton/ssd_combined.py`` @d757aef1: ``_chunk_cumsum_fwd``, ``_chunk_state_fwd``,
#: ``_state_passing_fwd``, ``_bmm_chunk_fwd``, ``_chunk_scan_fwd``; the backward recomputes the first four and runs
#: eleven of its own, without counting the small PyTorch operations beside them)
SSD_FWD_KERNELS = 5.0
SSD_BWD_KERNELS = 15.0
#: [issue 17] the share of gpusim's HBM roofline (:func:`ssd_forward_bytes` at ``mem_eff_frac`` of the bandwidth)
#: that Mamba-2's multi-kernel Triton SSD reaches. Published: vLLM PR #27299 (comment of 2025-10-25, "supporting
#: performance results on single H100", the "Original" column: vLLM's copy of mamba_ssm's five SSD kernels) gives
#: 1.262e7, 1.292e7 and 1.180e7 tokens/s for 8,192, 16,384 and 32,768 tokens at 128 heads of 64, one group, state 128
#: (granite-4.0-h-small's shape, its chunk of 256), i.e. 57,344 tokens in 4,694 us, 81.9 ns per token. gpusim's
#: roofline there: 105,728 bytes per token over 3.35 TB/s x 0.70 = 45.1 ns (the FLOPs, 8.45 MFLOP per token, take 15 ns
#: at FlashAttention's efficiency, so the bytes bind): 45.1 / 81.9 = 0.55. The same table's single fused kernel (its
#: "Fused" column, 2.27e7 tokens/s at 32,768) reaches the roofline: the intermediates and the kernels' own latency, not
#: the bandwidth, cost the difference. Taken for the backward kernels too (no published figure) and on every GPU (the
#: table is H100's); Megatron-LM PR #5829's CuTe DSL SSD (1.44x the Triton SSD on Blackwell) is not what the stored
#: Megatron-Bridge recipes run. Smaller calls (1,024-4,096 tokens: 0.29-0.34 ms each) are launch-bound in that
#: benchmark, which the kernels' tails (:data:`SSD_FWD_KERNELS`) do not claim to model.
SSD_TRITON_HBM_FRAC = 45.1 / 81.9


def _f(a):
    return np.asarray(a, dtype=np.float64)


def ssd_forward_bytes(T, tp, e, *, d_inner, heads, groups, state, chunk):
    """[stop 38] HBM bytes of Mamba-2's SSD forward kernels on ``T`` tokens of one tensor-parallel rank (``heads`` and
    ``groups`` split over ``tp``; head size ``P = d_inner / heads``; module docstring): ``x`` (``d / tp`` per token)
    read twice and ``y`` written once at ``e`` bytes; ``B`` and ``C`` (``G N / tp`` each) read twice; ``dt`` read and
    its fp32 cumulative sums and clamped values written and read by three kernels (``(e + 32) nh / tp``); the chunk
    states, ``nh P N / tp`` values per chunk of ``Q`` tokens, written and read in fp32 and again in ``e``-byte form
    (``(8 + 2 e)`` bytes each); ``C B^T``, ``G Q / tp`` fp32 values per token, written and read (8 bytes each).
    Hand-worked, Nemotron 3 Nano (d 4096, nh 64, G 8, N 128, Q 128, tp 1, bf16) per token: 16,384 + 8,192 + 2,176 +
    49,152 + 8,192 + 8,192 = 92,288 bytes."""
    d, nh, G, N, Q = _f(d_inner), _f(heads), _f(groups), _f(state), np.maximum(_f(chunk), 1.0)
    P = d / np.maximum(nh, 1.0)
    per_token = (3.0 * d * e + 4.0 * G * N * e + nh * (e + 32.0) + nh * P * N / Q * (8.0 + 2.0 * e)
                 + 8.0 * G * Q) / _f(tp)
    return _f(T) * per_token


def layout_copy_bytes(T, micro_batch, tp, e, *, width, d_inner):
    """[issue 17] HBM bytes of the two layout copies around Megatron-Core's fused Mamba kernel in one pass, per rank
    (module docstring): ``T (width + d) / tp`` values read and written, ``2 e`` bytes each, where the micro-batch
    holds more than one sequence; 0 with one. Hand-worked, Nemotron 3 Nano (width 10,304, d 4,096), micro-batch 2,
    bf16, tp 1: 14,400 x 4 = 57,600 bytes per token."""
    many = _f(micro_batch) > 1.0
    return np.where(many, _f(T) * (_f(width) + _f(d_inner)) / _f(tp) * 2.0 * _f(e), 0.0)


def mamba_layer_terms(x: dict, p, *, gemm, T, tp, e, mem_rate, ceil_rate, rep, micro_batch=1.0) -> dict:
    """Forward and backward seconds, kept bytes and forward model FLOPs per token of one Mamba mixer on one rank.

    ``x`` holds the row fields ``mamba_version``, ``mamba_d_inner``, ``mamba_state``, ``mamba_heads``,
    ``mamba_groups``, ``mamba_conv``, ``mamba_chunk``, ``mamba_dt_rank`` and ``mamba_flop_per_token`` (the mixer's
    forward FLOPs per token, :meth:`gpusim.workload.transformer.TransformerSpec.mamba_fwd_flop_per_token`); ``gemm``
    times one GEMM ``(m, n, k)``; ``T`` tokens per rank, ``e`` bytes per activation element, ``rep`` the share of
    ``T h`` a rank holds (``1 / tp`` with sequence parallelism), ``micro_batch`` the sequences in ``T`` (Mamba-2's
    layout copies, :func:`layout_copy_bytes`).
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
    ssd = ssd_forward_bytes(T, tp, e, d_inner=d, heads=nh, groups=G, state=N, chunk=x["mamba_chunk"])
    scan_bytes = np.where(v2, ssd, T * (4.0 * d + 2.0 * N) / tp * e)
    # [issue 17] Mamba-2's Triton SSD reaches SSD_TRITON_HBM_FRAC of its bytes' roofline (Mamba-1: one fused kernel)
    scan_roof = np.maximum(scan_flop / (ceil_rate * p.flash_fwd_eff_frac),
                           scan_bytes / (mem_rate * np.where(v2, SSD_TRITON_HBM_FRAC, 1.0)))
    fwd_kernels = np.where(v2, SSD_FWD_KERNELS, 1.0)
    bwd_kernels = np.where(v2, SSD_BWD_KERNELS, SCAN_BWD_MULT)
    scan_s = scan_roof + fwd_kernels * p.kernel_tail_s
    gate_s = T * 5.0 * d / tp * e / mem_rate + 2.0 * p.kernel_tail_s
    # [issue 17] Megatron-Core's two layout copies around the fused kernel (Mamba-2 rows; a kernel each where they
    # copy), the same again for the gradients in the backward pass
    copy_b = np.where(v2, layout_copy_bytes(T, micro_batch, tp, e, width=width, d_inner=d), 0.0)
    copy_s = copy_b / mem_rate + np.where(copy_b > 0, 2.0 * p.kernel_tail_s, 0.0)
    fwd = gf + conv_s + scan_s + gate_s + copy_s
    bwd = gb + 2.0 * conv_s + SCAN_BWD_MULT * scan_roof + bwd_kernels * p.kernel_tail_s + 2.0 * gate_s + copy_s
    keep = (T * h * rep * e * 2.0                                        # norm input, in_proj input
            + T * (width + conv_ch + 3.0 * d) / tp * e                     # in_proj out, conv out, y, gate, out_proj in
            + np.where(v2, 0.0, T * (R + 2.0 * N) / tp * e))
    return {"f_s": fwd, "b_s": bwd, "keep_bytes": keep, "flop_per_token": _f(x["mamba_flop_per_token"])}
