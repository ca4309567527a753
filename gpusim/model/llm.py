"""Megatron-style LLM training: one transformer layer's work split by tensor parallelism, the pipeline
schedule's critical path, and memory per pipeline stage.

Shapes (per GPU, one micro-batch of ``b`` sequences of ``s`` tokens, ``T = b s``; ``h`` the model width,
``q``/``kv`` the query and key/value widths, ``f`` the FFN width, ``t`` the tensor-parallel degree):

- **GEMMs** (Megatron column/row parallel, Shoeybi et al. 2019; Narayanan et al. SC'21 section 2.3):
  QKV ``(T, (q + 2 kv)/t, h)``, attention output ``(T, h, q/t)``, FFN up ``(T, f u / t, h)`` with ``u`` = 2
  for a gated (SwiGLU) FFN, FFN down ``(T, h, f/t)``, vocab-parallel LM head ``(T, V/t, h)``. Each GEMM's
  time comes from :func:`gpusim.model.gemm.gemm_time_s`; the backward pass does the data-gradient GEMM
  ``(T, k, n)`` and the weight-gradient GEMM ``(k, n, T)`` (same FLOPs, other tiles and reduction length), which
  with gradient-accumulation fusion reads and writes the fp32 main gradient in its epilogue (serial after the main
  loop on pre-Hopper GPUs: :mod:`gpusim.model.gemm`).
- **Attention core**: without FlashAttention, batched ``Q K^T`` ``(s, s, d_head)`` and ``A V`` ``(s, d_head, s)``
  over ``b a / t`` heads, and softmax + dropout over ``b a s^2 / t`` scores by their bytes (Megatron's fused
  scale-mask-softmax). With FlashAttention (Dao, "FlashAttention-2", 2023) one fused kernel: ``4 b s^2 q / t``
  forward FLOPs, half of them for a causal mask, at ``flash_fwd_eff_frac`` of the matmul ceiling; the backward
  does 2.5x the forward FLOPs (it recomputes the scores) at ``flash_bwd_eff_frac``.
- **Memory-bound kernels** by their bytes at ``mem_eff_frac`` of HBM bandwidth: two norms, two fused
  bias-dropout-residual adds (split by ``t`` only with sequence parallelism), the activation function, rotary
  embeddings, and [issue 17] the per-head RMSNorms of queries and keys where the model has them (Qwen3, OLMo 2,
  Gemma 3: :func:`qk_norm_bytes`); the backward moves about twice the forward bytes.
- **TP communication** (Narayanan et al. SC'21 section 3.3; Korthikanti et al. 2022 section 4.2.2): per layer
  two all-reduces of ``T h`` activations in the forward pass and two in the backward; with sequence
  parallelism each all-reduce becomes a reduce-scatter plus an all-gather of the same total volume, and the
  backward all-gathers each column-parallel GEMM's input once more. The forward's collectives are on the critical
  path; in the backward Megatron-LM (2022) runs the all-reduces, reduce-scatters and extra all-gathers beside the
  gradient GEMMs (:func:`tp_backward_s`; ``tp_async_bwd``, off for the SC'21 code). Full recomputation runs the
  forward's collectives again. ``tp_overlap_frac`` of all of it hides under GEMMs (Transformer Engine's
  userbuffer overlap); the rest is exposed.
- **Pipeline** (Narayanan et al. SC'21 section 2.2): with ``m`` micro-batches, 1F1B (``vp = 1``) or the
  interleaved schedule with ``vp`` chunks per stage, the steady state runs at the pace of the slowest stage
  and warm-up plus cool-down cross the other stages once each, ``1/vp`` of a stage at a time:
  ``step = m t_max + (sum_j t_j - t_max) / vp``; with equal stages the bubble is ``(pp - 1)/(vp m)`` of the
  steady state. The first stage also holds the embedding, the last the LM head and the loss. Activations
  cross each stage boundary forward and their gradients backward: ``2 (vp m + pp - 1)`` sends on the
  critical path, each of ``T h / t`` bytes (the scatter/gather optimisation of SC'21 section 4.1; without
  sequence parallelism an all-gather over the tensor-parallel group rebuilds the activation). [issue 17] In the
  interleaved schedule Megatron-Core overlaps the steady state's sends with the next chunk's compute
  (``overlap_p2p_comm``, on by default with ``vp > 1``); 1F1B and the SC'21 / 2022 codes block on them
  (:func:`pp_p2p_exposed_s`).
- **Activation memory** (Korthikanti et al. 2022, section 4 and Table 2), per layer and micro-batch, 16-bit:
  ``s b h (10 + 24/t + 5 a s/(h t))`` without sequence parallelism, ``s b h (34 + 5 a s / h)/t`` with it;
  selective recomputation drops the ``5 a s/h`` scores, full recomputation keeps only each layer's input
  ``2 s b h`` (``/t`` with sequence parallelism) plus one layer's activations while it is recomputed. The
  constants are generalised here to the spec's ``q``, ``kv``, ``f``, gating, dropout and FlashAttention
  (which keeps 4 bytes of softmax statistics per query and head instead of the scores). The first stage holds
  ``pp`` micro-batches in flight, times ``1 + (pp - 1)/(pp vp)`` when interleaved (Korthikanti section 4.2.3).
- **Model states**: Megatron mixed precision keeps 16-bit weights, fp32 main gradients and an fp32 master
  copy with Adam's two moments, 18 bytes per parameter, or ``6 + 12/dp`` with the distributed optimizer
  (Megatron-LM ``theoretical_memory_usage.py``; Rajbhandari et al. SC'20 ZeRO stage 1). [issue 17] FP8 layers: FP8
  parameters with the distributed optimizer, the linear layers' inputs kept as FP8 copies, the sequence-parallel input
  all-gathers in FP8 (:mod:`gpusim.model.fp8`); activations of offloaded layers in host memory
  (:func:`gpusim.model.memory.activation_offload_terms`).

Every function is pure numpy on broadcastable float64 arrays (one row per configuration).
"""

from __future__ import annotations

import math

import numpy as np

from gpusim.model import comm as C
from gpusim.model import context as CTX
from gpusim.model import dualpipe as EPO
from gpusim.model import experts as EXP
from gpusim.model import fp8 as FP8
from gpusim.model import graphs as GRAPHS
from gpusim.model import hybrid as HYB
from gpusim.model import memory as MEM
from gpusim.model import placement as PLACE
from gpusim.model.compute import layer_cpu_s
from gpusim.model.distinct import Distinct
from gpusim.model.gemm import fp8_fprop_ceiling_flop_per_s, fp8_k_half, gemm_time_s

RECOMPUTE_CODES = {"none": 0, "selective": 1, "full": 2}
NONE, SELECTIVE, FULL = 0, 1, 2

#: FlashAttention-2's backward pass does 2.5x the forward FLOPs: five matmuls against two (Dao 2023, section 3.1.2)
FLASH_BWD_FLOP_MULT = 2.5
#: kernels of one layer's forward pass (GEMMs, norms, activation, dropout-adds, attention)
KERNELS_PER_LAYER = 14.0


def _f(a):
    return np.asarray(a, dtype=np.float64)


def bf16_stage_fracs(start, end, n_layers, model_layers, pp):
    """[stop 57] The share of bf16 layers in the first, a middle and the last pipeline stage, ``(first, mid, last)``, when
    the first ``start`` and the last ``end`` of the model's ``model_layers`` transformer layers keep their linear layers
    in bf16 under an FP8 or NVFP4 recipe (Megatron-Core ``--first-last-layers-bf16``, ``--num-layers-at-start-in-bf16``,
    ``--num-layers-at-end-in-bf16``: ``TransformerConfig.first_last_layers_bf16``; Megatron-Bridge's FP8 current-
    scaling recipe ``bf16_with_fp8_current_scaling_mixed`` keeps 1 + 1, its Nemotron 3 Super NVFP4 recipe the last 14).
    One stage holds them all: ``(start + end) / model_layers``. Several: the first stage holds the first ``start`` of
    its ``n_layers / pp`` slots and the last stage the last ``end`` (whatever spills past a stage is charged to the
    middle stages' share, spread over the ``pp - 2`` of them; with interleaving a stage's bf16 layers sit in its first
    or last chunk, which moves the time within the stage, not between stages). Hand-worked: 1 + 1 of 80 layers on pp 4:
    (0.05, 0, 0.05); 0 + 14 of 88 on one stage: 0.159 for all three."""
    b0, b1, L, Lm, P = _f(start), _f(end), _f(n_layers), _f(model_layers), _f(pp)
    lps = L / P
    one = np.where(Lm > 0, (b0 + b1) / np.maximum(Lm, 1.0), 0.0)
    first = np.minimum(b0, lps) / lps
    last = np.minimum(b1, lps) / lps
    spill = np.maximum(b0 - lps, 0.0) + np.maximum(b1 - lps, 0.0)
    mid = np.minimum(spill / np.maximum(P - 2.0, 1.0) / lps, 1.0)
    multi = P > 1
    return (np.where(multi, first, one), np.where(multi, mid, one), np.where(multi, last, one))


def stage_layers(n_layers, model_layers, mtp_layers, pp):
    """[issue 17] ``(last, on_top)``: the layer slots of the last pipeline stage and how many multi-token prediction
    modules (``mtp_layers``) sit on top of its ``n_layers / pp``. Megatron-Core places the modules after the decoder,
    on the last stage; an uneven split (``n_layers``, padded to whole stages by :func:`gpusim.rules.padded_layers`,
    exceeds ``model_layers``) has ``n_layers - model_layers`` empty slots, which the layouts of published runs give
    to the modules (Megatron-Bridge's DeepSeek-V3 layouts, ``recipes/deepseek/deepseek_v3.py`` ``layout_map``: 61
    layers on 16 stages as embedding + 4, 14 x 4, then 1 + mtp + loss), so a module there costs the critical path
    nothing more than the padded stage already carries; the rest (all of them on an even split) come on top, each
    with its layer, a pass through the LM head and its loss. Hand-worked: 61 layers + 1 module on pp 16: slots 64,
    slack 3, none on top; 64 layers + 1 on pp 16: 1 on top, the last stage holds 5 layers."""
    lps = _f(n_layers) / _f(pp)
    on_top = np.maximum(_f(mtp_layers) - (_f(n_layers) - _f(model_layers)), 0.0)
    return lps + on_top, on_top


def hidden_under_cpu_s(slack_s, *exposed_s):
    """[stop 50] The exposed exchanges of a launch-bound layer that remain once the CPU's lead over the GPU
    (``slack_s``: CPU launch time less GPU time, 0 where the GPU sets the pace) has absorbed them, in the order given:
    the GPU waits on them while the CPU is still launching. Hand-worked: slack 3 with exchanges (2, 4) leaves (0, 3)."""
    left = _f(slack_s)
    out = []
    for c in exposed_s:
        c = _f(c)
        hidden = np.minimum(c, left)
        out.append(c - hidden)
        left = left - hidden
    return tuple(out)


def pipeline_step_s(first_s, mid_s, last_s, pp, vp, n_micro):
    """Critical path of 1F1B / interleaved 1F1B: ``m t_max + (sum_j t_j - t_max) / vp`` and its bubble part.

    ``first_s``, ``mid_s``, ``last_s``: forward + backward time of one micro-batch on the first, a middle and
    the last stage (for ``pp = 1`` all three are the one stage's time). Returns ``(steady_s, bubble_s)``.
    """
    pp, vp, m = _f(pp), _f(vp), _f(n_micro)
    t_max = np.maximum(first_s, last_s)
    total = np.where(pp > 1, first_s + last_s + (pp - 2.0) * mid_s, t_max)
    return m * t_max, (total - t_max) / vp


def pp_p2p_exposed_s(p2p_s, regather_s, pp, vp, n_micro, overlap, *, chunk_fwd_s, chunk_bwd_s, slowdown_frac,
                     hidden_frac=0.0):
    """[issue 17] Exposed seconds of the sends between pipeline stages in one optimizer step.

    ``p2p_s``: one activation (or activation-gradient) send between neighbouring stages; ``regather_s``: the
    tensor-parallel all-gather that rebuilds it after the receive (tp > 1 without sequence parallelism; SC'21 section
    4.1), which runs on the compute stream after the receive in every schedule. The critical path crosses
    ``2 (vp m + pp - 1)`` stage boundaries (module docstring): ``2 vp m`` in the steady state and ``2 (pp - 1)`` while
    the pipeline fills and drains.

    - Without ``overlap`` (1F1B, ``vp = 1``: Megatron-Core's non-interleaved schedule posts each step's sends and
      receives together and waits for them, ``batch_p2p_comm``; the SC'21 and 2022 codes, which synchronised after
      every ``batch_isend_irecv``, Megatron-LM issue #167): every send is on the critical path, less the steady-state
      ``hidden_frac`` (ModelParams.pp_p2p_overlap_frac, 0 by default): ``(2 (vp m + pp - 1) - 2 vp m hidden_frac)
      (p2p + regather)``.
    - With ``overlap`` (Megatron-Core's ``overlap_p2p_comm`` in ``forward_backward_pipelining_with_interleaving``,
      schedules.py: ``pp_post_forward`` launches the forward's send/receive after a chunk's forward and
      ``pp_pre_forward`` waits for it before the next forward, the backward pass's likewise, so in the 1F1B steady
      state each forward send runs beside the next backward chunk and each backward send beside the next forward
      chunk): a steady-state pair of sends costs ``beside(p2p, chunk_bwd) + beside(p2p, chunk_fwd)``
      (:func:`beside_gemm_s`: what outlasts the chunk, plus the chunk's slowdown while the NCCL send/receive kernels
      hold ``slowdown_frac`` of the SMs). The warm-up and flush sends stay synchronous (``overlap_p2p_comm_warmup_flush``
      off, its default): ``2 (pp - 1) (p2p + regather) + vp m (pair + 2 regather)``.
    """
    pp, vp, m = _f(pp), _f(vp), _f(n_micro)
    unit = _f(p2p_s) + _f(regather_s)
    plain = (2.0 * (vp * m + pp - 1.0) - 2.0 * vp * m * _f(hidden_frac)) * unit
    pair = (beside_gemm_s(p2p_s, chunk_bwd_s, slowdown_frac) + beside_gemm_s(p2p_s, chunk_fwd_s, slowdown_frac)
            + 2.0 * _f(regather_s))
    overlapped = 2.0 * (pp - 1.0) * unit + vp * m * pair
    return np.where(pp > 1, np.where(np.asarray(overlap, dtype=bool), overlapped, plain), 0.0)


def kernel_tiles(seq_len: float, window: float | None, block: float, chunked: bool) -> float:
    """Query x key tiles a fused attention kernel visits for one head of one causal sequence (see
    :func:`attention_tile_frac`)."""
    n = int(math.ceil(seq_len / block))
    if not window or window >= seq_len:
        return n * (n + 1) / 2.0
    if chunked:  # each chunk its own causal sequence (a block-diagonal mask)
        full, rest = divmod(seq_len, window)
        nc, nr = math.ceil(window / block), math.ceil(rest / block)
        return full * nc * (nc + 1) / 2.0 + nr * (nr + 1) / 2.0
    m = np.arange(n, dtype=np.float64)
    first = np.maximum(0.0, np.floor((m * block - window) / block))
    return float(np.sum(m - first + 1.0))


#: [issue 17] fused attention kernel families of :func:`causal_rate_frac` (row codes) and their ModelParams keys
FA2, HOPPER, BLACKWELL = 0, 1, 2
CAUSAL_FAMILY_KEYS = {FA2: "fa2", HOPPER: "hopper", BLACKWELL: "blackwell"}


def causal_rate_frac(seq_len, family, p):
    """[issue 17] ``(forward, backward)`` rate of a fused causal attention kernel of ``family`` (:data:`FA2`,
    :data:`HOPPER`, :data:`BLACKWELL`; broadcastable codes) over ``seq_len`` query tokens, against its unmasked rate at
    16K tokens (the rate ``flash_*_eff_frac`` and the head-dimension figures describe): ModelParams
    ``flash_causal_fwd_rate_frac`` / ``_bwd_rate_frac`` (the published kernel tables, with their sources) at
    ``flash_causal_seq_tokens``, interpolated in log2 tokens, the end values held beyond them. Short sequences fall
    because every query block pays its prologue and epilogue over fewer key blocks and a causal mask gives the blocks
    unequal work (the diagonal tile computed whole, the last blocks the longest). Hand-worked: FlashAttention-3 at
    4096 tokens, forward 579 / 648 = 0.894; at 3000 tokens, log2-interpolated between 2048 and 4096."""
    x = np.log2(np.maximum(_f(seq_len), 1.0))
    points = np.log2(np.asarray(p.flash_causal_seq_tokens, dtype=np.float64))
    fam = np.asarray(family, dtype=np.int64)
    fwd = np.zeros(np.broadcast(x, fam).shape)
    bwd = np.zeros_like(fwd)
    for code, key in CAUSAL_FAMILY_KEYS.items():
        on = fam == code
        if np.any(on):
            fwd = np.where(on, np.interp(x, points, p.flash_causal_fwd_rate_frac[key]), fwd)
            bwd = np.where(on, np.interp(x, points, p.flash_causal_bwd_rate_frac[key]), bwd)
    return fwd, bwd


def query_block_overhead_tiles(family, p):
    """[issue 17] ``(forward, backward)`` fixed work of one query block of a fused attention kernel, in tiles: loading
    its queries, finishing the softmax's running statistics and writing its output (forward; the backward's
    ``dQ`` write and row terms), paid once per block of ``B`` queries however many key tiles it visits. A causal call
    of ``n = s / B`` blocks a side visits ``T = n (n + 1) / 2`` tiles and pays ``T + c n`` tile-times, so its rate
    against a long sequence's falls as ``T / (T + c n)``; ``c`` follows from two points of the kernel family's
    published causal table (ModelParams ``flash_causal_*_rate_frac`` at 1K and 16K tokens, their ratio ``rho``):
    ``c = T1 T2 (1 - rho) / (rho T2 n1 - T1 n2)`` (0 where the table does not fall). Hand-worked (``B = 128``,
    Blackwell forward, 501 / 872: ``rho = 0.5745``, ``n = 8`` and 128, ``T = 36`` and 8256): ``c = 36 x 8256 x 0.4255
    / (0.5745 x 8256 x 8 - 36 x 128) = 3.79`` tiles; Hopper forward (423 / 616) 2.28; both backward tables 1.60.
    The rest of the table agrees within 4% (Blackwell at 4K: 0.861 against 770 / 872 = 0.883). A sliding window keeps
    the per-block work and drops most tiles, which is why its kernel runs far below the causal rate
    (:func:`window_time_frac`)."""
    B = float(p.flash_block_tokens)
    n1, n2 = 1024.0 / B, 16384.0 / B
    t1, t2 = n1 * (n1 + 1.0) / 2.0, n2 * (n2 + 1.0) / 2.0
    points = np.log2(np.asarray(p.flash_causal_seq_tokens, dtype=np.float64))
    fam = np.asarray(family, dtype=np.int64)
    out = []
    for table in (p.flash_causal_fwd_rate_frac, p.flash_causal_bwd_rate_frac):
        c = np.zeros(np.shape(fam))
        for code, key in CAUSAL_FAMILY_KEYS.items():
            r1, r2 = np.interp([10.0, 14.0], points, table[key])
            rho = r1 / r2
            val = max(0.0, t1 * t2 * (1.0 - rho) / (rho * t2 * n1 - t1 * n2)) if rho < 1.0 else 0.0
            c = np.where(fam == code, val, c)
        out.append(c)
    return out[0], out[1]


def window_time_frac(share, tiles_frac, qblock_per_tile, overhead_tiles):
    """[issue 17] A layer-averaged fused attention call's time with a sliding window (or chunks) on a ``share`` of the
    layers, against a plain causal call's at the same length: a windowed layer pays ``T_w + c n`` tile-times where
    the causal one pays ``T_c + c n`` (:func:`query_block_overhead_tiles`; ``tiles_frac = T_w / T_c``,
    ``qblock_per_tile = n / T_c``), so ``1 - share + share (tiles_frac + c q) / (1 + c q)``: more than the tile
    fraction (:func:`attention_tile_frac`) alone, most where the window is short. Hand-worked: 4096 tokens, a 128-key
    window (63 of 528 tiles, ``q = 32 / 528``), ``c = 3.79``: ``(0.1193 + 0.2297) / 1.2297 = 0.284`` of the causal
    call, 2.4x the tile fraction's 0.119 (cuDNN's benchmark on GB200: 2.35x gpusim's time before this,
    ``validation/attention_cudnn.csv``)."""
    sh, tf, q = _f(share), _f(tiles_frac), _f(qblock_per_tile)
    c = _f(overhead_tiles)
    return 1.0 - sh + sh * (tf + c * q) / (1.0 + c * q)


def attention_tile_frac(seq_len, window, block_tokens, *, chunked=False, window_layer_frac=1.0) -> float:
    """[issue 17] Work of a fused attention kernel with a sliding window (or chunks) of ``window`` keys on a share
    ``window_layer_frac`` of the attention layers, as a fraction of its work with a plain causal mask over
    ``seq_len`` tokens (1 without a window, or where the window holds the whole sequence).

    FlashAttention's kernels walk the score matrix in tiles of ``block_tokens`` queries by ``block_tokens`` keys
    (ModelParams ``flash_block_tokens``) and skip every tile the mask leaves empty: query block ``m`` visits key
    blocks ``max(0, floor((m B - w) / B))`` to ``m`` (FlashAttention-2, ``flash_fwd_kernel.h``: ``n_block_min`` /
    ``n_block_max`` of a local, i.e. sliding-window, kernel; the README's 2.3 "Local (i.e., sliding window)
    attention"), so a window costs whole tiles: with ``w = B`` two per query block where the element count would say
    one. A causal mask visits ``n (n + 1) / 2`` of ``n = ceil(s / B)`` blocks a side. Chunked attention (Llama 4:
    queries attend within their chunk) is a causal mask per chunk, each chunk tiled from its first token as a kernel
    tiles the sequences of a packed batch. Hand-worked (``B = 128``): ``s = 512``,
    ``w = 128``: 1 + 2 + 2 + 2 = 7 of 10 tiles, 0.7; chunks of 256: 3 + 3 = 6 of 10, 0.6; half the layers windowed:
    0.85. The model FLOPs of a run (gpusim.workload.flops) count the keys a query sees; this is the kernel's time.
    """
    s, B = float(seq_len), float(block_tokens)
    if not window or float(window) >= s or window_layer_frac <= 0.0:
        return 1.0
    ratio = kernel_tiles(s, float(window), B, chunked) / kernel_tiles(s, None, B, False)
    return float(1.0 - window_layer_frac + window_layer_frac * ratio)


#: [issue 17] the loss's vocabulary-parallel cross entropy, by implementation: ``(bytes moved per logit, forward and
#: backward; bytes per logit held at the loss)``. Counted from the kernels:
#:
#: - ``te``: Transformer Engine's Triton kernels (``transformer_engine/pytorch/triton/cross_entropy.py`` @02965d2e;
#:   Megatron ``--cross-entropy-loss-fusion --cross-entropy-fusion-impl te``): the forward's online softmax reads the
#:   bf16 logits once (2; the loss kernel reads one logit per row), the backward reads them and overwrites them with
#:   their gradient (2 + 2): 6 bytes; the bf16 logits are the only copy held (2).
#: - ``native``: Megatron-Core's fused version (``megatron/core/fusions/fused_cross_entropy.py``, the default impl of
#:   ``--cross-entropy-loss-fusion``; Megatron-Bridge's ``GPTModelProvider`` turns the fusion on and leaves the impl at
#:   native unless a recipe picks te): the fp32 copy with its row maximum (read 2, write 4), exp in place (4 + 4), the
#:   row sum (4), the division in place (4 + 4): 26 forward; the gradient scaled in place (4 + 4) and cast back to
#:   bf16 (4 + 2): 14 backward; 40 bytes. The bf16 logits and the fp32 copy are held together (2 + 4).
#: - ``unfused``: Megatron-Core's ``VocabParallelCrossEntropy`` (``megatron/core/tensor_parallel/cross_entropy.py``;
#:   Megatron-LM without the fusion flag): the cast (2 + 4), the maximum (4), subtracting it in place (4 + 4), exp in
#:   place (4 + 4), the sum (4), the division (4 + 4): 38 forward; the backward's scaling (4 + 4) and autograd's cast
#:   of the gradient to bf16 (4 + 2): 14; 52 bytes, held 2 + 4.
CROSS_ENTROPY_BYTES = {"te": (6.0, 2.0), "native": (40.0, 6.0), "unfused": (52.0, 6.0)}
CE_CODES = {"te": 0, "native": 1, "unfused": 2}


def cross_entropy_bytes(code):
    """[issue 17] ``(bytes moved, bytes held)`` per logit of the loss's cross entropy for an implementation code
    (:data:`CE_CODES`; :data:`CROSS_ENTROPY_BYTES` has the counts). Hand-worked: 16,384 tokens x 201,088 logits,
    native: 40 x 3.29e9 = 1.32e11 bytes, 26 ms at 5 TB/s; te 6 x 3.29e9 = 1.98e10 bytes."""
    table = np.array([CROSS_ENTROPY_BYTES[name] for name in sorted(CE_CODES, key=CE_CODES.get)])
    per = table[np.asarray(code, dtype=np.float64).astype(np.int64)]
    return per[..., 0], per[..., 1]


def head_dim_rate_frac(d_head, flash2, p):
    """[issue 17] ``(forward, backward)`` rate of a fused attention kernel at head dimension ``d_head`` against its
    rate at 128: 1 from 128 up, ``flash_hdim64_*_frac`` (the native kernel) or ``flash2_hdim64_*_frac``
    (FlashAttention-2 and the Triton kernel, ``flash2``) at 64 and below, linear between. The Q K^T and P V products
    of a 64-wide head do half the FLOPs per softmax element of a 128-wide one, which the exponentials and the
    smaller tiles do not keep up with (FlashAttention-3 paper, Figs. 5 and 6: FlashAttention-3 497 against 648
    TFLOP/s forward on H100). Hand-worked: 96 with the native defaults gives (1 + 0.767) / 2 = 0.884 forward."""
    d = _f(d_head)
    f2 = np.asarray(flash2, dtype=bool)
    lo_f = np.where(f2, p.flash2_hdim64_fwd_frac, p.flash_hdim64_fwd_frac)
    lo_b = np.where(f2, p.flash2_hdim64_bwd_frac, p.flash_hdim64_bwd_frac)
    w = np.clip((d - 64.0) / 64.0, 0.0, 1.0)
    return lo_f + (1.0 - lo_f) * w, lo_b + (1.0 - lo_b) * w


def bubble_frac(pp, vp, n_micro):
    """The interleaved 1F1B bubble with equal stages, ``(pp - 1) / (vp m)`` of the steady state (SC'21 eq. 2)."""
    return (_f(pp) - 1.0) / (_f(vp) * _f(n_micro))


def dp_group_placement(dp, tp, gpus_per_node, domain_gpus, n_gpus):
    """[issue 17] Where Megatron-Core puts a gradient-reduction group: ``(members per NVLink domain, domains it spans,
    NIC share factor)``: the shared placement rule (:func:`gpusim.model.placement.group_placement`) for a group of
    ``dp`` ranks ``tp`` apart (Megatron-Core's rank order ``tp-cp-ep-dp-pp``; ``dp`` here counts dp x cp, the
    distributed optimizer's group) in the job's ``n_gpus`` allocated in NVLink-domain blocks. Its collectives run over
    NVLink inside each domain and over the network between them, where the group's ``k`` members of a domain send
    through their own NICs: ``k / gpus_per_node`` of a node's inter-node bandwidth. On an 8-GPU HGX board the domain
    is the node; on a GB200/GB300 NVL72 rack a group inside one segment of trays never touches the network.
    """
    k, domains = PLACE.group_placement(dp, tp, n_gpus, gpus_per_node, domain_gpus)
    return k, domains, PLACE.nic_share(k, gpus_per_node)


def expert_dp_group_placement(dp, tp, ep, etp, gpus_per_node, domain_gpus, n_gpus):
    """[issue 17] ``(ranks, domains spanned, NIC share factor)`` of the group that reduces the routed experts'
    gradients and gathers their parameters: Megatron-Core's expert-data-parallel group (``parallel_state``'s
    ``get_expert_data_parallel_group``; the distributed optimizer keeps the expert parameters in their own buffers,
    ``DistributedDataParallel``'s ``expert_parallel_buffers``, reduce-scattered and all-gathered over that group and
    sharded over it, as gpusim's optimizer memory counts them). The experts' rank order ``etp-ep-edp-pp`` makes it
    ``edp = dp tp / (ep etp)`` ranks ``ep etp`` apart (``dp`` counting dp x cp, the dense group's size), placed by the
    same rule as every group (:func:`gpusim.model.placement.group_placement`). An ``ep`` group that fills an 8-GPU
    node leaves one member per node: the experts' gradients then cross the network at one GPU's NIC share, where the
    dense gradients' group of every ``tp``-th rank reduces inside the node first. ``edp = 1`` (``ep etp`` spans the
    stage's ranks): nothing to reduce.

    Hand-worked: 64 GPUs in 8-GPU nodes, tp 1, ep 8: ``edp = 64 / 8 = 8`` ranks 8 apart, one per node, 8 nodes,
    NIC share 1/8; the dense group is 64 ranks, 8 per node."""
    stride = _f(ep) * _f(etp)
    edp = np.maximum(_f(dp) * _f(tp) / stride, 1.0)
    _, domains, share = dp_group_placement(edp, stride, gpus_per_node, domain_gpus, n_gpus)
    return edp, domains, share


def tp_volume_bytes_per_layer(tokens, d_model, elem_bytes, tp):
    """Bytes each rank sends in one layer's forward TP all-reduces: ``2 x 2 (t-1)/t x T h e`` (ring)."""
    t = _f(tp)
    return 2.0 * 2.0 * (t - 1.0) / t * _f(tokens) * d_model * elem_bytes


def qk_norm_bytes(qk_norm, *, T, q, kv, tp, elem_bytes):
    """[issue 17] ``(bytes, kernels)`` of one forward pass of the per-head RMSNorms on queries and keys (Qwen3's
    ``Qwen3Attention.q_norm`` / ``k_norm`` over ``head_dim``; Megatron-Core ``qk_layernorm``, one Transformer Engine
    RMSNorm module each, applied to the QKV projection's query and key heads before the rotary embedding): each reads
    its ``T`` tokens' heads on this rank and writes them normalised, ``2 e T (q + kv) / tp`` bytes, in 2 kernels (the
    1/RMS per head row, 4 bytes per head, is left out). The backward pass reads the output gradient and the kept
    input and writes the input gradient, which :func:`_layer_rows_terms` charges as twice the forward's element-wise
    bytes, as for the layer's other norms. Zero where ``qk_norm`` is off. Hand-worked (Qwen3-30B-A3B: ``q`` 4096,
    ``kv`` 512; 16,384 tokens, tp 1, bf16): ``2 x 2 x 16384 x 4608 = 3.02e8`` bytes, 2 kernels."""
    on = _f(qk_norm)
    return on * 2.0 * _f(T) * (_f(q) + _f(kv)) / _f(tp) * _f(elem_bytes), on * 2.0


def activation_bytes_per_layer(s, b, h, a, q, kv, f, up_mats, tp, sp, recompute, *, dropout, flash, elem_bytes=2.0,
                               norms=False, mla_up=False, mla_latent=0.0, mla_q=False, cache_bytes=None, mla=False,
                               v_width=None, qk_norm=False):
    """Korthikanti et al. 2022 activation bytes of one layer and one micro-batch, generalised (module docstring).

    Returns ``(kept, full)``: the bytes kept for the backward pass under ``recompute`` and the bytes without
    recomputation (a layer holds ``full`` while it is recomputed).

    [issue 12] Memory-saving mechanisms (DeepSeek-V3 technical report, arXiv 2412.19437, sections 3.2.3 and 3.3.2;
    Megatron-Core ``--recompute-modules``), each only subtracting what it does not keep:

    - ``norms`` (recompute the norms): the two norms' outputs, which are the QKV and FFN-up GEMM inputs, are not kept
      (``2 e s b h``, ``/t`` with sequence parallelism); the norms' inputs stay.
    - ``mla_up`` (recompute MLA's up-projections): K and V (and Q where the query is low-rank, ``mla_q``) are not
      kept, ``e s b (kv + v + q)/t``; the latents they are computed from are kept either way (below).
    - ``cache_bytes`` (FP8 activation cache, bytes per element; None: ``elem_bytes``): the linear layers' inputs still
      kept (the QKV and FFN-up inputs where the norms are not recomputed, the FFN-down input) and the
      activation-function (SwiGLU) input are kept at ``cache_bytes``; the attention output projection's input stays
      16-bit (DeepSeek keeps it in a 12-bit E5M6 format, modelled as 16-bit: the conservative choice), as do the
      norms' inputs, Q, K, V and the softmax statistics.

    Multi-head latent attention (``mla``): the values are ``v_width`` wide (heads x v_head_dim), as is the output
    projection's input, and the latents the up-projections read are kept, ``e s b mla_latent`` (DeepSeek-V2 section
    2.1.2); recomputing the up-projections (``mla_up``) then drops Q (with a query latent), K and V only.

    [issue 17] ``qk_norm`` (per-head RMSNorms of the queries and keys, :func:`qk_norm_bytes`): the norms keep their
    inputs for their gradient, ``e s b (q + kv) / t`` besides the normalised Q and K the attention keeps.
    """
    v_width = q if v_width is None else v_width
    mla = np.asarray(mla, dtype=bool)
    v_store = np.where(mla, v_width, kv)  # V for A V (grouped-query attention: the key/value heads' width)
    o_in = np.where(mla, v_width, q)  # the attention output projection's input
    t = _f(tp)
    e = elem_bytes
    sb = _f(s) * b
    drop = _f(dropout)
    rep = np.where(np.asarray(sp, dtype=bool), 1.0 / t, 1.0)  # regions split only with sequence parallelism
    # replicated without sp (Korthikanti's 10 s b h): the inputs of the two norms, of the QKV and the FFN up GEMMs,
    # and the two dropout masks
    replicated = sb * h * (2.0 * e      # two LayerNorm inputs
                           + e + e      # QKV GEMM input, FFN up GEMM input
                           + 2.0 * drop)  # two dropout masks (1 byte per element)
    sharded = sb / t * (e * (q + kv) * (1.0 + _f(qk_norm))  # Q and K for Q K^T (and the q/k norms' inputs)
                        + e * v_store    # V for A V
                        + e * o_in       # attention output projection input
                        + e * f * up_mats  # activation-function input
                        + e * f)         # FFN down GEMM input
    latents = np.where(mla, e * sb * rep * _f(mla_latent), 0.0)  # MLA: the up-projections' inputs
    scores = np.where(np.asarray(flash, dtype=bool), 4.0 * sb * a / t,  # softmax statistics (fp32)
                      sb * _f(s) * a / t * (e + drop * (1.0 + e)))  # softmax output, dropout mask and output
    full = replicated * rep + sharded + scores + latents
    if np.any(norms) or np.any(mla_up) or cache_bytes is not None:  # [issue 12] (nothing subtracted by default)
        c = e if cache_bytes is None else _f(cache_bytes)
        gemm_in = np.where(np.asarray(norms, dtype=bool), 0.0, c)  # QKV and FFN-up inputs: the norms' outputs
        saved = (sb * h * rep * 2.0 * (e - gemm_in)
                 + np.where(np.asarray(mla_up, dtype=bool),
                            e * sb / t * (kv + v_store + np.where(np.asarray(mla_q, dtype=bool), q, 0.0)), 0.0)
                 + sb / t * (e - c) * f * (up_mats + 1.0))  # activation-function input and FFN-down input
        full = full - saved
    rc = np.asarray(recompute)
    layer_input = e * sb * h * rep
    kept = np.where(rc == FULL, layer_input, np.where(rc == SELECTIVE, full - scores, full))
    return kept, full


#: below this many rows the GEMMs are evaluated as columns of one array (numpy's per-call overhead dominates);
#: above it one column at a time (each column's temporaries stay in cache). Both compute the same elementwise formula.
_STACK_ROWS = 4096


def _gemm_columns(ms, ns, ks, bs, ceiling, hbm, sms, elem_bytes, p, outs=None, srcs=None, serial=False,
                  k_half=None) -> list:
    """Times of GEMM ``j`` = (ms[j], ns[j], ks[j], batch bs[j]) for every row, as a list of arrays. ``outs`` / ``srcs``:
    bytes written / read per output element, arrays whose last axis is the GEMM ``j`` (default: ``elem_bytes``
    written, nothing read); ``serial``: the GPU's epilogue reads its source after the main loop
    (:mod:`gpusim.model.gemm`)."""
    kh = p.gemm_k_half_steps if k_half is None else k_half
    kw = dict(k_half=kh, mem_eff_frac=p.mem_eff_frac, kernel_tail_s=p.kernel_tail_s, serial_epilogue=serial)
    nc = len(ms)
    outs = np.asarray(elem_bytes)[..., None] if outs is None else outs
    srcs = np.zeros(1) if srcs is None else srcs
    rows = max(np.size(v) for v in (*ms, *ns, *ks, *bs, ceiling, hbm, sms, serial))
    if rows > _STACK_ROWS:
        o = np.broadcast_to(outs, np.shape(outs)[:-1] + (nc,))
        r = np.broadcast_to(srcs, np.shape(srcs)[:-1] + (nc,))
        return [gemm_time_s(m, n, k, ceiling, hbm, sms, elem_bytes=elem_bytes, batch=b, out_bytes=o[..., j],
                            src_bytes=r[..., j], **kw)
                for j, (m, n, k, b) in enumerate(zip(ms, ns, ks, bs))]
    cols = np.broadcast_arrays(*ms, *ns, *ks, *bs)
    M, N, K, B = (np.stack(cols[i * nc:(i + 1) * nc], axis=-1) for i in range(4))
    kw["serial_epilogue"] = np.asarray(serial)[..., None]
    if np.ndim(kh):
        kw["k_half"] = np.asarray(kh)[..., None]
    t = gemm_time_s(M, N, K, ceiling[..., None], hbm[..., None], sms[..., None], elem_bytes=elem_bytes[..., None],
                    batch=B, out_bytes=outs, src_bytes=srcs, **kw)
    return [t[..., j] for j in range(nc)]


#: the weight-gradient GEMMs among the 23 columns of :func:`layer_gemm_times_s` (17-22: MLA's up-projections)
_WGRAD_COLUMN = np.array([False, False, True] * 5 + [False, False] + [False, False, True] * 2)


def beside_gemm_s(comm_s, gemm_s, slowdown_frac):
    """Exposed seconds of a collective launched beside a GEMM: what outlasts the GEMM, plus the GEMM's slowdown while
    they share the SMs and memory (``slowdown_frac`` of the overlapped time; ModelParams.overlap_slowdown_frac)."""
    return np.maximum(comm_s - gemm_s, 0.0) + slowdown_frac * np.minimum(comm_s, gemm_s)


def tp_backward_s(ar, ag, rs, sp, async_bwd, *, dgrad_qkv_s, wgrad_qkv_s, dgrad_up_s, wgrad_up_s, slowdown_frac,
                  ag_in=None):
    """Exposed seconds of one layer's tensor-parallel collectives in the backward pass (one micro-batch).

    ``ar``, ``ag``, ``rs``: one all-reduce, all-gather, reduce-scatter of the layer's ``T h`` activations. Without
    sequence parallelism the backward all-reduces the input gradients of the two column-parallel GEMMs (QKV, FFN up);
    with it the backward all-gathers the output gradients of the two row-parallel GEMMs (the backward of their
    reduce-scatters), all-gathers the column-parallel GEMMs' inputs again for their weight gradients (only the local
    shard was kept; Korthikanti et al. 2022 section 4.2.2) and reduce-scatters their input gradients. Megatron-LM's
    2022 code (megatron/mpu/layers.py ``ColumnParallelLinearWithAsyncAllreduce``,
    ``ColumnParallelLinearWithSequenceParallelism``; ``async_bwd``) launches the all-reduce, or the reduce-scatter,
    asynchronously and runs the weight-gradient GEMM beside it, and the extra all-gather beside the data-gradient
    GEMM (:func:`beside_gemm_s`); the row-parallel all-gathers stay on the critical path. Without ``async_bwd``
    (the SC'21 code) every collective is exposed. [issue 17] ``ag_in`` (default ``ag``): the input re-gathers, which
    FP8 layers run on their FP8 copies (gpusim.model.fp8.tp_input_gather_bytes).
    """
    sp = np.asarray(sp, dtype=bool)
    ag_in = ag if ag_in is None else ag_in
    sync = np.where(sp, 2.0 * ag + 2.0 * ag_in + 2.0 * rs, 2.0 * ar)
    beside = np.where(sp, 2.0 * ag + beside_gemm_s(ag_in, dgrad_qkv_s, slowdown_frac)
                      + beside_gemm_s(ag_in, dgrad_up_s, slowdown_frac) + beside_gemm_s(rs, wgrad_qkv_s, slowdown_frac)
                      + beside_gemm_s(rs, wgrad_up_s, slowdown_frac),
                      beside_gemm_s(ar, wgrad_qkv_s, slowdown_frac) + beside_gemm_s(ar, wgrad_up_s, slowdown_frac))
    return np.where(np.asarray(async_bwd, dtype=bool), beside, sync)


def split_overlap_s(comm_s, gemm_s, chunks, slowdown_frac):
    """[issue 17] Exposed seconds of a collective pipelined with its GEMM in ``chunks`` pieces: the first piece's
    communication cannot overlap (``comm / chunks``), the rest hides under the GEMM up to its length, and the GEMM
    slows by ``slowdown_frac`` of the overlapped time: ``max(comm - gemm, comm / chunks) + s min(comm, gemm)``.

    Transformer Engine's comm-GEMM overlap (``te.module`` userbuffers, ``ub_overlap_ag`` / ``ub_overlap_rs``;
    NeMo/Megatron-Bridge ``tp_comm_overlap`` with the ``userbuffers_*_tp*`` configs) splits an all-gather's GEMM or a
    reduce-scatter's GEMM into ``tp`` chunks and moves chunk ``i + 1`` (ring exchange, copy engines or a few SMs)
    while chunk ``i`` multiplies (Wang et al., "Overlap Communication with Dependent Computation via Decomposition in
    Large Deep Learning Models", ASPLOS 2023, section 3)."""
    c, g = _f(comm_s), _f(gemm_s)
    return np.maximum(c - g, c / _f(chunks)) + slowdown_frac * np.minimum(c, g)


def tp_userbuffers_s(ag, rs, tp, t, slowdown_frac, ag_in_f=None, ag_in_b=None):
    """[issue 17] Exposed seconds of one layer's TP collectives with sequence parallelism under TE userbuffers,
    ``(forward, backward)`` per micro-batch. Forward: the all-gathers before QKV and FFN-up pipelined with those GEMMs
    (``t[0]``, ``t[6]``), the reduce-scatters after the attention output and FFN-down projections with theirs
    (``t[3]``, ``t[9]``). Backward: the output-gradient all-gathers of the two row-parallel layers with their
    data-gradient GEMMs (``t[4]``, ``t[10]``, ring exchange: :func:`split_overlap_s`); the column-parallel layers'
    input re-gathers beside their data-gradient GEMMs (``t[1]``, ``t[7]``) and their input-gradient reduce-scatters
    beside their weight-gradient GEMMs (``t[2]``, ``t[8]``), TE's "bulk" overlaps (:func:`beside_gemm_s`). [issue 17]
    ``ag_in_f`` / ``ag_in_b`` (default ``ag``): the input all-gathers forward and the input re-gathers backward, on the
    FP8 copies where the layers run in FP8 (gpusim.model.fp8.tp_input_gather_bytes)."""
    ag_f = ag if ag_in_f is None else ag_in_f
    ag_b = ag if ag_in_b is None else ag_in_b
    fwd = (split_overlap_s(ag_f, t[0], tp, slowdown_frac) + split_overlap_s(rs, t[3], tp, slowdown_frac)
           + split_overlap_s(ag_f, t[6], tp, slowdown_frac) + split_overlap_s(rs, t[9], tp, slowdown_frac))
    bwd = (split_overlap_s(ag, t[4], tp, slowdown_frac) + split_overlap_s(ag, t[10], tp, slowdown_frac)
           + beside_gemm_s(ag_b, t[1], slowdown_frac) + beside_gemm_s(ag_b, t[7], slowdown_frac)
           + beside_gemm_s(rs, t[2], slowdown_frac) + beside_gemm_s(rs, t[8], slowdown_frac))
    return fwd, bwd


#: [issue 17] the forward GEMM columns of :func:`layer_gemm_times_s` (QKV, attention output, FFN up, FFN down, MLA up)
_FPROP_COLUMNS = (0, 3, 6, 9, 17, 20)


def layer_gemm_times_s(T, s, h, a, q, kv, f, up, V, tp, b, ceil_rate, hbm, sms, e, fp8, ceil8, fused_wgrad,
                       serial_epilogue, o=None, q_lora=0.0, kv_a=0.0, kv_lora=0.0, kv_up=0.0, ceil8_fwd=None, *,
                       p) -> tuple:
    """Seconds of the 23 GEMMs of one layer, the LM head and the attention core for one micro-batch of ``T`` tokens.

    Linear layers ``(n_out, k_in)``: QKV, attention output, FFN up, FFN down, vocab-parallel LM head; each as its
    forward ``(T, n, k)``, data gradient ``(T, k, n)`` and weight gradient ``(k, n)`` reduced over the ``T`` tokens
    (columns 0-14), then Megatron's unfused attention ``Q K^T`` and ``A V`` batched over the ``b a / t`` local
    heads (15, 16). A weight gradient with ``fused_wgrad`` (gradient-accumulation fusion) accumulates into the fp32
    main gradient: its epilogue reads 4 bytes and writes 4 per output element instead of writing ``e`` ([issue 17]
    ``fused_wgrad`` may instead give the main gradient's bytes, 2 for a bf16 buffer, 0 for no fusion). [issue 12] FP8
    (:mod:`gpusim.model.fp8`): the linear layers' GEMMs (columns 0-11 and 17-22) on FP8 operands at the FP8 matmul
    ceiling where ``fp8 > 0``; the LM head and the attention core stay in 16 bits. [issue 17] The forward GEMMs
    (columns 0, 3, 6, 9, 17, 20) at ``ceil8_fwd`` (:func:`gemm.fp8_fprop_ceiling_flop_per_s`: fast accumulation).

    [issue 12] Multi-head latent attention (DeepSeek-V2/V3; ``kv_lora > 0``): the query and the joint key/value are
    projected down to latents of ``q_lora`` and ``kv_a`` = ``kv_lora`` + the shared rotary key width (replicated over
    the TP ranks; column 0, one GEMM of their summed width; without a query latent the query projection ``q / t``
    joins it), then up: the query ``q_lora -> q / t`` (columns 17-19, zero without a query latent) and the keys and
    values ``kv_lora -> kv_up / t`` (columns 20-22); the attention's output projection reads ``o`` (the value width
    over heads: ``heads x v_head_dim``) and ``A V`` produces ``o / a`` per head (DeepSeek-AI, "DeepSeek-V2", 2024,
    section 2.1.2). Without MLA columns 17-22 are zero and ``o = q``.
    """
    o = q if o is None else o
    mla = _f(kv_lora) > 0
    has_ql = mla & (_f(q_lora) > 0)
    qkv_out = np.where(mla, np.where(has_ql, q_lora, q / tp) + kv_a, (q + 2.0 * kv) / tp)
    ones = np.ones(np.shape(mla))
    linears = ((qkv_out, h), (h, o / tp), (f * up / tp, h), (h, f / tp), (V / tp, h))
    mla_linears = ((np.where(has_ql, q / tp, ones), np.where(has_ql, q_lora, ones)),
                   (np.where(mla, kv_up / tp, ones), np.where(mla, kv_lora, ones)))
    heads_local = b * a / tp
    d_head = q / a
    # [issue 17] ``fused_wgrad``: the main gradient's bytes per element where gradient-accumulation fusion is on (4 for
    # fp32, 2 for a bf16 buffer: Strategy.grad_dtype), 0 where it is off (True counts as 4)
    fw = np.asarray(fused_wgrad)
    main = (np.where(fw, 4.0, 0.0) if fw.dtype == bool else fw.astype(np.float64))[..., None]
    fused = main > 0
    # bytes per output element: a weight gradient accumulated into the main gradient reads and writes its width
    outs = np.where(_WGRAD_COLUMN & fused, main, np.asarray(e)[..., None])
    srcs = np.where(_WGRAD_COLUMN & fused, main, 0.0)
    ms, ns, ks, bs = [], [], [], []
    for n_out, k_in in linears:
        ms += [T, T, k_in]
        ns += [n_out, k_in, n_out]
        ks += [k_in, n_out, T]
        bs += [1.0, 1.0, 1.0]
    ms += [s, s]
    ns += [s, o / a]
    ks += [d_head, s]
    bs += [heads_local, heads_local]
    any_mla = bool(np.any(mla))
    if any_mla:
        for n_out, k_in in mla_linears:
            ms += [T, T, k_in]
            ns += [n_out, k_in, n_out]
            ks += [k_in, n_out, T]
            bs += [1.0, 1.0, 1.0]
    lin = [*range(12), *range(17, len(ms))]  # the linear layers' GEMMs (FP8 where the row trains in FP8)
    t = _gemm_columns(ms, ns, ks, bs, ceil_rate, hbm, sms, e, p, outs[..., :len(ms)], srcs[..., :len(ms)],
                      serial_epilogue)
    if np.any(fp8 > 0):
        # [issue 17] FP8 operands (1 byte) but a 16-bit output (TE's FP8 GEMMs write the activation dtype; the weight
        # gradient accumulates into fp32), and the tile's fixed cost in k-steps of the faster FP8 loop (gemm.fp8_k_half)
        # [issue 17] NVFP4 operands: 9/16 byte with their block scales (fp8.operand_bytes)
        ob = FP8.operand_bytes(fp8)
        t8 = _gemm_columns([ms[j] for j in lin], [ns[j] for j in lin], [ks[j] for j in lin], [bs[j] for j in lin],
                           ceil8, hbm, sms, ob, p, outs[..., lin], srcs[..., lin], serial_epilogue,
                           k_half=fp8_k_half(p.gemm_k_half_steps, ceil_rate, ceil8))
        if ceil8_fwd is not None and np.any(_f(ceil8_fwd) != ceil8):
            # [issue 17] the forward GEMMs with fast accumulation (TE's fp8_gemm_fprop; gemm.fp8_fprop_ceiling_flop_per_s)
            fw = [i for i, j in enumerate(lin) if j in _FPROP_COLUMNS]
            tf = _gemm_columns([ms[lin[i]] for i in fw], [ns[lin[i]] for i in fw], [ks[lin[i]] for i in fw],
                               [bs[lin[i]] for i in fw], ceil8_fwd, hbm, sms, ob, p, outs[..., [lin[i] for i in fw]],
                               srcs[..., [lin[i] for i in fw]], serial_epilogue,
                               k_half=fp8_k_half(p.gemm_k_half_steps, ceil_rate, ceil8_fwd))
            for i, v in zip(fw, tf):
                t8[i] = v
        for i, j in enumerate(lin):
            t[j] = np.where(fp8 > 0, t8[i], t[j])
    if any_mla:
        for j, on in zip(range(17, 23), (has_ql,) * 3 + (mla,) * 3):
            t[j] = np.where(on, t[j], 0.0)
    else:
        t += [np.zeros(np.shape(t[0]))] * 6
    return tuple(t)


def llm_terms(x: dict, p, *, dist: Distinct | None = None) -> dict:
    """:func:`llm_rows_terms` evaluated once per distinct row of ``x`` (a sweep's rows repeat a few layouts and
    shapes; :class:`gpusim.model.distinct.Distinct`) and gathered back to every row: the same dict, the same values.
    ``dist``: the grouping to share (one per model evaluation: columns coded here are not coded again)."""
    # the layer's columns first: the grouping of one layer's terms (llm_rows_terms) finds them combined here
    keys = [k for k in x if k not in _PIPELINE_KEYS] + [k for k in x if k in _PIPELINE_KEYS]
    names: list[str] = []
    # shared with the inner groupings: a column found too varied here is not coded again there
    dist = Distinct() if dist is None else dist

    def rows_terms(*values):
        out = llm_rows_terms(dict(zip(keys, values)), p, dist=dist)
        names[:] = out
        return tuple(out.values())

    return dict(zip(names, dist(rows_terms, [x[k] for k in keys])))


#: what a collective reads where ``x`` lacks the column (:func:`_collective_fn`)
_FABRIC_DEFAULTS = {"ll_max_busbw_bytes_per_s": np.inf, "ll128": True, "host_cpu": C.HOST_INTEL}

#: [issue 17] the columns of :func:`llm_rows_terms`'s input that only its pipeline part reads (the layer's terms do
#: not depend on them: :func:`_layer_rows_terms`)
_PIPELINE_KEYS = frozenset({"n_layers", "model_layers", "pp", "vp", "n_micro", "mtp_layers", "mtp_fwd_flop",
                            "mtp_param_modules"})


def _collective_fn(x: dict, p, dist: Distinct):
    """``coll(kind, size, ranks, nodes, intra, inter)``: one collective's seconds on the fabric of ``x``, evaluated
    once per distinct message size, group and fabric (:func:`gpusim.model.comm.collective_min_time_s`)."""
    tuning = C.tuning_from_params(p)

    def coll_rows(kind, size, ranks, nodes, intra, intra_hop, inter, inter_hop, nvls, ll_max, ll128, host_cpu):
        return C.collective_min_time_s(kind, size, ranks, nodes, intra, intra_hop, inter, inter_hop, nvls,
                                       base_latency_s=p.coll_base_latency_s, nvls_gain_frac=p.nvls_gain_frac,
                                       nvls_latency_s=p.nvls_latency_s, tree_busbw_frac=p.tree_busbw_frac,
                                       ll_max_busbw_bytes_per_s=ll_max, ll128=ll128, tuning=tuning,
                                       host_cpu=host_cpu)

    def coll(kind, size, ranks, nodes, intra, inter):
        """One collective's time, evaluated once per distinct message size, group and fabric."""
        return dist(lambda *a: coll_rows(kind, *a),
                    [size, ranks, nodes, intra, x["intra_hop_s"], inter, x["inter_hop_s"], x["nvls"],
                     *(x.get(k, v) for k, v in _FABRIC_DEFAULTS.items())])

    return coll


def _layer_rows_terms(x: dict, p, dist: Distinct, detail: bool = False) -> dict:
    """One transformer layer's forward and backward seconds per micro-batch, ``layer_f`` / ``layer_b`` (its GEMMs,
    attention core, memory-bound kernels, FP8 casts, recomputation and the CPU's launches), its exposed TP, CP and EP
    communication, the LM head's GEMMs and the MoE and Mamba terms the stages add up: the part of
    :func:`llm_rows_terms` that depends on the layer's shape, degrees and micro-batch but not on the pipeline (``pp``,
    ``vp``, micro-batches, layers: :data:`_PIPELINE_KEYS`), so that it runs once per distinct layer of a search."""
    h, a = _f(x["d_model"]), _f(x["n_heads"])
    q, kv, f, V, s = _f(x["q_dim"]), _f(x["kv_dim"]), _f(x["ff_dim"]), _f(x["vocab"]), _f(x["seq_len"])
    up = _f(x["ffn_mats"]) - 1.0
    tp, b = _f(x["tp"]), _f(x["micro_batch"])
    sp = np.asarray(x["sp"], dtype=bool) & (tp > 1)
    rc = np.asarray(x["recompute"])
    flash = np.asarray(x["flash"], dtype=bool)
    drop = _f(x["dropout"])
    e = 2.0 * _f(x["act_scale"])
    ceil_rate, hbm, sms = _f(x["ceiling_flop_per_s"]), _f(x["mem_bytes_per_s"]), _f(x["sm_count"])
    g = _f(x["gpus_per_node"])
    cp = _f(x.get("cp", 1.0))  # [issue 12] context parallelism: each rank holds s / cp tokens of a sequence
    T = b * s / cp
    heads_local = b * a / tp

    # ---- every GEMM of a layer, the LM head and the attention core: once per distinct shape and GPU ----------
    fp8 = np.asarray(x.get("fp8_mode", FP8.NONE))
    ceil8 = _f(x.get("fp8_ceiling_flop_per_s", ceil_rate))
    serial = np.asarray(x.get("gemm_serial_epilogue", False), dtype=bool)
    # [issue 17] the main gradient's bytes per element (4: fp32; 2: a bf16 buffer, Strategy.grad_dtype)
    main_b = _f(x.get("grad_bytes_per_param", 4.0))
    fused_wgrad = np.where(np.asarray(x["grad_accum_fusion"], dtype=bool), main_b, 0.0)
    # [issue 12] multi-head latent attention: latents down, keys/values (and queries) up, values of their own width
    ql, kvl = _f(x.get("mla_q_lora", 0.0)), _f(x.get("mla_kv_lora", 0.0))
    mla = kvl > 0
    vd = _f(x.get("v_dim", np.nan))
    o = np.where(mla & np.isfinite(vd), vd, q)  # the attention output's width (A V, the output projection's input)
    kva, kvu = _f(x.get("mla_kv_a", 0.0)), _f(x.get("mla_kv_up", 0.0))
    # [issue 17] forward GEMMs with fast accumulation where the GPU has that mode (Hopper, Ada)
    ceil8f = fp8_fprop_ceiling_flop_per_s(fp8 == FP8.DELAYED, fp8 == FP8.CURRENT, ceil8, ceil_rate,
                                          _f(x.get("fp8_peak_ratio", 1.0))) if np.any(fp8 > 0) else ceil8
    t = dist(lambda *v: layer_gemm_times_s(*v, p=p), [T, s, h, a, q, kv, f, up, V, tp, b, ceil_rate, hbm, sms, e, fp8,
                                                       ceil8, fused_wgrad, serial, o, ql, kva, kvl, kvu, ceil8f])

    def gemm_lin(mm, nn, kk, batch=1.0, out_bytes=None, src_bytes=0.0):
        """One GEMM of a linear layer (the MoE experts' and router's): FP8 where the row trains in FP8. ``out_bytes`` /
        ``src_bytes``: bytes written / read per output element (default: the operand width written, nothing read;
        a weight gradient accumulated into the fp32 main gradient writes and reads 4)."""
        kw = dict(k_half=p.gemm_k_half_steps, mem_eff_frac=p.mem_eff_frac, kernel_tail_s=p.kernel_tail_s, batch=batch,
                  serial_epilogue=serial, out_bytes=out_bytes, src_bytes=src_bytes)
        g16 = gemm_time_s(mm, nn, kk, ceil_rate, hbm, sms, elem_bytes=e, **kw)
        if not np.any(fp8 > 0):
            return g16
        # [issue 17] 1 byte per FP8 operand element, 9/16 per NVFP4 one (fp8.operand_bytes)
        ob = FP8.operand_bytes(fp8)
        return np.where(fp8 > 0, gemm_time_s(mm, nn, kk, ceil8, hbm, sms, elem_bytes=ob, **kw), g16)
    gemm_f = t[0] + t[3] + t[6] + t[9] + t[17] + t[20]
    gemm_b = t[1] + t[2] + t[4] + t[5] + t[7] + t[8] + t[10] + t[11] + t[18] + t[19] + t[21] + t[22]
    head_f, head_b = t[12], t[13] + t[14]
    bmm = t[15] + t[16]

    mem_rate = hbm * p.mem_eff_frac
    attn_flop = 2.0 * b * s * s * (q + o) / (tp * cp)  # [issue 12] load-balanced causal cp: 1/cp of the scores each
    # [issue 18] the attention kernel's own rate (FlashAttention-2 past Ampere, Triton): gpusim.rows.attention_kernel_fields
    slow_f, slow_b = _f(x.get("attn_fwd_slow", 1.0)), _f(x.get("attn_bwd_slow", 1.0))
    # [issue 17] a sliding window or chunked attention on some layers: the tiles the fused kernel visits
    # (attention_tile_frac; 1 for a plain causal mask). Megatron's unfused attention masks a full score matrix: no gain.
    # The causal kernel's own rate at the length each call sees (s / cp: context parallelism splits the queries) against
    # its unmasked long-sequence rate (causal_rate_frac: the diagonal tiles computed whole, the blocks' unequal work,
    # short sequences' fixed costs), by kernel family (the row's attn_fa2 / attn_blackwell; Hopper's native otherwise)
    fam = np.where(np.asarray(x.get("attn_fa2", False), dtype=bool), FA2,
                   np.where(np.asarray(x.get("attn_blackwell", False), dtype=bool), BLACKWELL, HOPPER))
    # [issue 17] ... with each query block's fixed work, which a window keeps (window_time_frac)
    c_f, c_b = query_block_overhead_tiles(fam, p)
    share, tiles_frac, qpt = (_f(x.get(k, d)) for k, d in (("attn_win_share", 0.0), ("attn_win_tiles_frac", 1.0),
                                                            ("attn_qblock_per_tile", 0.0)))
    win_f, win_b = window_time_frac(share, tiles_frac, qpt, c_f), window_time_frac(share, tiles_frac, qpt, c_b)
    # ([issue 17] Ulysses, cp_comm a2a: each call sees the whole sequence for 1 / cp of the heads; a2a+p2p its NVLink
    # domain's share of it; the cp group, ranks tp apart, in the job's NVLink-domain allocation blocks:
    # gpusim.model.placement)
    n_job = g * _f(x["n_nodes"])
    block = dist(PLACE.allocation_block_gpus, [n_job, g, _f(x.get("nvlink_domain_gpus", g))])
    kind = np.asarray(x.get("cp_kind", CTX.RING))
    seen = (s / cp if not np.any((kind == CTX.A2A) | (kind == CTX.A2A_P2P))  # (the common case: no inner group)
            else CTX.attention_call_tokens(s, cp, kind, CTX.hier_inner_ranks(cp, tp, block)))
    cr_f, cr_b = causal_rate_frac(seen, fam, p)
    hd_f, hd_b = head_dim_rate_frac(q / a, x.get("attn_fa2", False), p)  # [issue 17] thin heads run slower
    flash_f = win_f * slow_f * 0.5 * attn_flop / (ceil_rate * p.flash_fwd_eff_frac * hd_f * cr_f) + p.kernel_tail_s
    flash_b = (win_b * slow_b * FLASH_BWD_FLOP_MULT * 0.5 * attn_flop
               / (ceil_rate * p.flash_bwd_eff_frac * hd_b * cr_b) + p.kernel_tail_s)
    score_bytes = heads_local * s * s * (2.0 * e + drop * (2.0 * e + 1.0))  # fused softmax, dropout
    attn_f = np.where(flash, flash_f, bmm + score_bytes / mem_rate)
    attn_b = np.where(flash, flash_b, 2.0 * bmm + 2.0 * score_bytes / mem_rate)
    rep = np.where(sp, 1.0 / tp, 1.0)
    # [issue 17] the per-head RMSNorms of queries and keys (qk_norm_bytes): bytes and kernels of one forward pass
    qk_f, qk_k = qk_norm_bytes(x.get("qk_norm", False), T=T, q=q, kv=kv, tp=tp, elem_bytes=e)
    # [issue 17] hybrid Mamba-Transformer rows (gpusim.model.hybrid): the average layer weights each kind by its share
    hyb = "mamba_frac" in x
    if hyb:
        fa, ff, fm = _f(x["attn_frac"]), _f(x["ffn_frac"]), _f(x["mamba_frac"])
        gemm_f = fa * (t[0] + t[3] + t[17] + t[20]) + ff * (t[6] + t[9])
        gemm_b = (fa * (t[1] + t[2] + t[4] + t[5] + t[18] + t[19] + t[21] + t[22])
                  + ff * (t[7] + t[8] + t[10] + t[11]))
        attn_f, attn_b = fa * attn_f, fa * attn_b
        elem_bytes_f = (T * h * rep * (2.0 * e + (3.0 * e + drop)) * (fa + ff + fm)  # a norm and an add per block
                        + ff * T * f / tp * e * (up + 1.0) + fa * _f(x["rope"]) * 2.0 * T * (q + kv) / tp * e
                        + fa * qk_f)
        with np.errstate(divide="ignore", invalid="ignore"):  # rows without Mamba layers: zero shapes, masked below
            mam = HYB.mamba_layer_terms(x, p, gemm=gemm_lin, T=T, tp=tp, e=e, mem_rate=mem_rate, ceil_rate=ceil_rate,
                                        rep=rep, micro_batch=b)
    else:
        elem_bytes_f = (T * h * rep * (2.0 * 2.0 * e + 2.0 * (3.0 * e + drop))  # 2 norms, 2 bias-dropout-adds
                        + T * f / tp * e * (up + 1.0)  # activation function: read its inputs, write its output
                        + _f(x["rope"]) * 2.0 * T * (q + kv) / tp * e
                        + qk_f)
    elem_f = elem_bytes_f / mem_rate + (KERNELS_PER_LAYER / 2.0 + (fa if hyb else 1.0) * qk_k) * p.kernel_tail_s
    layer_f = gemm_f + attn_f + elem_f
    if hyb:
        layer_f = layer_f + np.where(fm > 0, fm * mam["f_s"], 0.0)  # (a row without Mamba layers has no shape)
    cast_f, cast_b = FP8.layer_cast_s(fp8, T=T, h=h, q=q, kv=kv, f=f, up=up, tp=tp, mem_rate=mem_rate,
                                      kernel_tail_s=p.kernel_tail_s)  # [issue 12] FP8 casts (0 without fp8)
    layer_f = layer_f + cast_f
    # [issue 12] context-parallel K/V exchange per layer (ring overlapped with attention, or all-gather, ...)
    cp_f, cp_b = CTX.cp_layer_comm_s(x, p, attn_f_s=attn_f, attn_b_s=attn_b, kv_bytes_elem=e, tp=tp, g=g,
                                     domain=block, v_width=np.where(mla & np.isfinite(vd), vd, kv), o_width=o)
    # full recomputation runs the forward exchange again, and so does selective ([issue 17]: the core attention it
    # recomputes is Transformer Engine's attention module, which holds the context-parallel exchange)
    cp_b = cp_b + np.where((rc == FULL) | (rc == SELECTIVE), cp_f, 0.0)
    recompute_s = np.where(rc == FULL, layer_f, np.where(rc == SELECTIVE, attn_f, 0.0))
    # [issue 12] modules recomputed in the backward pass (not under full recomputation, which reruns everything):
    # the two norms by their bytes, MLA's up-projection GEMMs (FP8 where the row is); the FP8 activation cache
    # quantises the activation-function input in the forward pass (read 16-bit, write FP8; the linear layers'
    # inputs are cached from the FP8 copies their GEMMs already make: no extra pass)
    partial = rc != FULL
    norms_on = np.asarray(x.get("recompute_norms", False), dtype=bool) & partial
    mla_on = np.asarray(x.get("recompute_mla_up", False), dtype=bool) & partial & mla
    fp8_act = np.asarray(x.get("fp8_act", False), dtype=bool) & (fp8 > 0)
    cache = FP8.act_cache_bytes(fp8, fp8_act, e) if np.any(fp8_act) else None
    if np.any(norms_on):
        recompute_s = recompute_s + np.where(norms_on, T * h * rep * 2.0 * 2.0 * e / mem_rate
                                             + 2.0 * p.kernel_tail_s, 0.0)
    if np.any(mla_on):  # the up-projections' forward GEMMs again (columns 17 and 20; zero without a query latent)
        recompute_s = recompute_s + np.where(mla_on, t[17] + t[20], 0.0)
    # [issue 17] Megatron-Core's ``mlp`` recompute module: a dense layer's MLP forward again (its two GEMMs, columns 6
    # and 9, and the activation function: read the up-projection's output, write its own), dense layers only
    mlp_on = np.asarray(x.get("recompute_mlp", False), dtype=bool) & partial
    dense_mlp = (1.0 - _f(x.get("moe_frac", 0.0))) * (_f(x["ffn_frac"]) if hyb else 1.0)
    if np.any(mlp_on):
        recompute_s = recompute_s + np.where(mlp_on, dense_mlp * (t[6] + t[9] + T * f / tp * (up + 1.0) * e / mem_rate
                                                                  + p.kernel_tail_s), 0.0)
    if cache is not None:
        act_cast = np.where(fp8_act, T * f * up / tp * (e + cache) / mem_rate + p.kernel_tail_s, 0.0)
        layer_f = layer_f + act_cast
        recompute_s = recompute_s + np.where(rc == FULL, act_cast, 0.0)
    layer_b = gemm_b + attn_b + 2.0 * elem_f + recompute_s
    if hyb:
        layer_b = layer_b + np.where(fm > 0, fm * mam["b_s"], 0.0)
    layer_b = layer_b + cast_b  # [issue 12]

    # ---- TP communication per layer ----------------------------------------------------------------
    coll = _collective_fn(x, p, dist)

    intra, inter = _f(x["intra_busbw_bytes_per_s"]), _f(x["inter_busbw_bytes_per_s"])
    # [issue 12] mixture of experts: router, dispatch/combine all-to-all, grouped expert GEMMs, shared experts
    # replace the dense FFN of the MoE layers (zero for a dense model); full recomputation runs them again
    domain = _f(x.get("nvlink_domain_gpus", g))
    moe = EXP.moe_layer_terms(x, p, gemm=gemm_lin, T=T, tp=tp, e=e, mem_rate=mem_rate, domain=domain, g=g,
                              coll=lambda kind, size, ranks, nn, bw=inter: coll(kind, size, ranks, nn, intra, bw))
    layer_f = layer_f + moe["delta_f_s"]
    layer_b = layer_b + moe["delta_b_s"] + np.where(rc == FULL, moe["delta_f_s"], 0.0)
    ep_f, ep_b = moe["ep_f_s"], moe["ep_b_s"] + np.where(rc == FULL, moe["ep_f_s"], 0.0)
    # [stop 52] the ``moe`` recompute module reruns the MoE block's forward in the backward pass: its compute and
    # host sync (moe_fwd_s), its all-to-alls (ep_f_s, exposed as the forward's are) and, below, its CPU launches
    moe_rc = np.asarray(moe.get("moe_rc", False), dtype=bool)
    moe_rc_s = 0.0
    if np.any(moe_rc):  # (the layout search's rows seldom have it: no array work without it)
        moe_rc_s = np.where(moe_rc, moe["moe_fwd_s"], 0.0)
        layer_b = layer_b + moe_rc_s
        ep_b = ep_b + np.where(moe_rc, moe["ep_f_s"], 0.0)
    # a tensor-parallel group inside one NVLink domain runs at NVLink speed even across the compute trays of an
    # NVL72 rack; one forced beyond the domain crosses the network
    tp_nodes = np.maximum(1.0, tp / domain)
    act_bytes = T * h * e
    ag = coll(C.ALL_GATHER, act_bytes, tp, tp_nodes, intra, inter)
    ar = coll(C.ALL_REDUCE, act_bytes, tp, tp_nodes, intra, inter) if not np.all(sp) else 0.0
    rs = coll(C.REDUCE_SCATTER, act_bytes, tp, tp_nodes, intra, inter) if np.any(sp) else 0.0
    one = np.where(sp, rs + ag, ar)  # one all-reduce, or its RS + AG with sequence parallelism
    ag_f = ag_b = ag  # [issue 17] FP8 dense layers all-gather their inputs' FP8 copies (fp8.tp_input_gather_bytes)
    if np.any(fp8 > 0) and np.any(sp):
        dense = _f(x.get("moe_frac", 0.0)) == 0.0  # (an MoE model's dispatcher gathers bf16: unchanged)
        g8f, g8b = FP8.tp_input_gather_bytes(np.where(dense, fp8, FP8.NONE), e)
        ag_f = coll(C.ALL_GATHER, T * h * g8f, tp, tp_nodes, intra, inter)
        ag_b = coll(C.ALL_GATHER, T * h * g8b, tp, tp_nodes, intra, inter)
    one_f = np.where(sp, rs + ag_f, ar)
    exposed = 1.0 - p.tp_overlap_frac
    tp_f = 2.0 * one_f * exposed
    tp_b = (tp_backward_s(ar, ag, rs, sp, x["tp_async_bwd"], dgrad_qkv_s=t[1], wgrad_qkv_s=t[2], dgrad_up_s=t[7],
                          wgrad_up_s=t[8], slowdown_frac=p.overlap_slowdown_frac, ag_in=ag_b)
            + 2.0 * (rc == FULL) * one_f) * exposed  # full recomputation runs the forward's collectives again
    ub = np.asarray(x.get("tp_comm_overlap", False), dtype=bool) & sp
    if np.any(ub):  # [issue 17] Transformer Engine's userbuffers comm-GEMM overlap
        ub_f, ub_b = tp_userbuffers_s(ag, rs, tp, t, p.overlap_slowdown_frac, ag_f, ag_b)
        tp_f = np.where(ub, ub_f, tp_f)
        tp_b = np.where(ub, ub_b + np.where(rc == FULL, ub_f, 0.0), tp_b)
    # [issue 17] the recomputed MLP's all-gather and reduce-scatter: one of a dense layer's two forward collectives,
    # per dense FFN (dense_mlp: not the MoE layers', and a hybrid model's FFN blocks only)
    mlp_tp_b = np.where(mlp_on, dense_mlp * tp_f / 2.0, 0.0) if np.any(mlp_on) else 0.0
    if hyb:  # [issue 17] one all-reduce (or RS + AG) per mixer and per FFN: the dense layer's two, per block
        n_blocks = (fa + ff + fm) / 2.0
        tp_f, tp_b = tp_f * n_blocks, tp_b * n_blocks
    tp_b = tp_b + mlp_tp_b

    # [issue 17] Megatron-Core's EP A2A overlap hides each all-to-all under its own phase of a forward/backward layer
    # pair (dualpipe.layer_pair_comm_s): the exposed and interference parts as fractions of the layer's four
    pair_e = pair_i = np.zeros(np.shape(layer_f))
    if np.any(_f(x.get("ep_overlap", 0)) == EPO.ONE_F_ONE_B) and "mlp_f_s" in moe:
        mfr = _f(x.get("moe_frac", 0.0))
        a2a = moe["a2a_s"] * (1.0 - p.ep_a2a_overlap_frac)
        pe, pi = EPO.layer_pair_comm_s(np.maximum(layer_f - mfr * moe["mlp_f_s"], 0.0),
                                       np.maximum(layer_b - mfr * moe["mlp_b_s"], 0.0), moe["mlp_f_s"],
                                       moe["mlp_b_s"], a2a, p.ep_comm_sms / sms)
        four = np.where(a2a > 0, 4.0 * a2a, 1.0)
        pair_e, pair_i = np.where(a2a > 0, pe / four, 0.0), np.where(a2a > 0, pi / four, 0.0)
    # [issue 17] one CPU thread launches the layer ahead of the GPU (Megatron-Core + Transformer Engine modules): where
    # the layer's kernels are short, or the host CPU slow (Grace), the launches set its pace
    host = _f(x.get("host_cpu_mult", 1.0))
    cpu_f, cpu_b = layer_cpu_s(p.te_layer_cpu_fwd_s, p.te_layer_cpu_bwd_s, host,
                               np.where(fp8 > 0, p.te_layer_cpu_fp8_mult, 1.0), False)
    # [issue 17] CUDA graphs (--cuda-graph-scope, gpusim.model.graphs): a captured part of the layer costs the CPU one
    # replay instead of its launches; full recomputation launches the (partly captured) forward again
    keep_f, keep_b, replays = GRAPHS.dense_cpu_keep(_f(x.get("cuda_graphs", 0.0)), _f(x.get("moe_frac", 0.0)))
    replay_s = replays * p.launch_cpu_s * host
    cpu_f = cpu_f * keep_f + replay_s
    cpu_b = cpu_b * keep_b + replay_s + np.where(rc == FULL, cpu_f, 0.0)
    # [issue 17] an MoE layer launches the router's and token dispatcher's operations and per-expert GEMMs and
    # quantisations besides the dense layer's modules (gpusim.model.experts.moe_cpu_s); its dispatcher's host sync
    # (experts.dispatcher_syncs) waits for the GPU once per forward, so no CPU lead carries across MoE layers
    cpu_f = cpu_f + moe["cpu_f_s"]
    cpu_b = cpu_b + moe["cpu_b_s"] + np.where((rc == FULL) | moe_rc, moe["cpu_f_s"], 0.0)  # ([stop 52] moe module)
    gpu_fb = layer_f + layer_b  # [issue 17] the GPU's own time, before the CPU's pace (launch_excess_frac below)
    gpu_f, gpu_b = layer_f, layer_b
    syncs = moe.get("syncs", False)
    if np.any(syncs):  # [issue 17] the host sync splits the forward: launches after it wait (experts.synced_forward_s)
        g_post, c_post = moe["post_gpu_f_s"], moe["post_cpu_f_s"]
        synced = EXP.synced_forward_s(g_post, c_post, layer_f - g_post, cpu_f - c_post)
        layer_f = np.where(syncs, synced, np.maximum(layer_f, cpu_f))
    else:
        layer_f = np.maximum(layer_f, cpu_f)
    layer_b = np.maximum(layer_b, cpu_b)
    # [stop 50] the CPU enqueues the layer's collectives as it does its kernels, without waiting for them: where its
    # launches set the pace, the GPU's waits on the layer's exposed TP, CP and EP exchanges fall inside the CPU's lead
    # instead of adding to it (the layer takes max(CPU, GPU + exchanges), not max(CPU, GPU) + exchanges; PyTorch CUDA
    # semantics: a NCCL call returns once its kernel is queued). A dispatcher's host sync drains the stream in the
    # forward, so nothing of a synced forward is hidden.
    slack_f = np.where(np.asarray(syncs, dtype=bool), 0.0, np.maximum(cpu_f - gpu_f, 0.0))
    tp_f, cp_f, ep_f = hidden_under_cpu_s(slack_f, tp_f, cp_f, ep_f)
    tp_b, cp_b, ep_b = hidden_under_cpu_s(np.maximum(cpu_b - gpu_b, 0.0), tp_b, cp_b, ep_b)
    # [issue 17] the share of a layer's time the CPU's launches (and host syncs) add to the GPU's: the step's
    # bottleneck is "cpu-dispatch" where it is large (gpusim.model.step), as on the data-parallel path
    launch_excess = np.maximum(1.0 - gpu_fb / np.maximum(layer_f + layer_b, 1e-30), 0.0)
    out = {"layer_f": layer_f, "layer_b": layer_b, "launch_excess_frac": launch_excess, "tp_f": tp_f, "tp_b": tp_b, "cp_f": cp_f, "cp_b": cp_b, "ep_f": ep_f,
           "ep_b": ep_b, "one": one, "ag": ag, "head_f": head_f, "head_b": head_b,
           "moe_delta_params": moe["delta_params"], "moe_expert_params": moe["expert_params"],
           "moe_delta_act_bytes": moe["delta_act_bytes"], "ep_pair_exposed_frac": pair_e,
           "ep_pair_interf_frac": pair_i,
           # [stop 52] the MoE block's activations held again by the layer whose backward reruns it (``moe`` module)
           "moe_rc_buf_bytes": (np.zeros(np.shape(layer_f)) + moe["moe_rc_buf_bytes"]) if np.any(moe_rc)
           else np.float64(0.0)}  # (0-d: nothing for the distinct rows' gather to expand)
    if hyb:
        out.update(mam_keep_bytes=mam["keep_bytes"], mam_flop_per_token=mam["flop_per_token"])
    if detail:  # [issue 17] one layer's parts for ``gpusim predict`` (layer_detail; not computed in sweeps)
        mfr = _f(x.get("moe_frac", 0.0))
        out.update(gpu_f=gpu_f, gpu_b=gpu_b, cpu_f=cpu_f, cpu_b=cpu_b, attn_f=attn_f, attn_b=attn_b,
                   recompute_b=recompute_s + np.where(rc == FULL, moe["delta_f_s"], 0.0) + moe_rc_s,
                   moe_frac=mfr * np.ones(np.shape(gpu_f)),
                   experts_f=np.asarray(moe.get("mlp_f_s", 0.0)) * mfr, experts_b=np.asarray(moe.get("mlp_b_s", 0.0)) * mfr,
                   route_f=np.asarray(moe.get("route_f_s", 0.0)) * mfr, route_b=np.asarray(moe.get("route_b_s", 0.0)) * mfr,
                   a2a=np.asarray(moe.get("a2a_s", 0.0)) * np.ones(np.shape(gpu_f)),
                   syncs=np.asarray(moe.get("syncs", False)) * np.ones(np.shape(gpu_f)),
                   busiest=np.asarray(moe.get("busiest_load", 1.0)) * np.ones(np.shape(gpu_f)),
                   fused_mlp=(np.asarray(x.get("moe_fused_mlp", False), dtype=bool) & (fp8 == FP8.MX)
                              & (mfr > 0)) * np.ones(np.shape(gpu_f)))
        # [issue 17] a hybrid model's Mamba mixers (projections, convolution, scan, gate and norm), averaged over the
        # layers as the other parts are; zero for a transformer without them
        zero = np.zeros(np.shape(gpu_f))
        out.update(mamba_f=np.where(fm > 0, fm * mam["f_s"], 0.0) + zero if hyb else zero,
                   mamba_b=np.where(fm > 0, fm * mam["b_s"], 0.0) + zero if hyb else zero)
    return out


#: [issue 17] layer_detail's names (StepResult.layer_s, in SI units) for the internal columns of _layer_rows_terms
LAYER_DETAIL_KEYS = {"gpu_f": "gpu_fwd_s", "gpu_b": "gpu_bwd_s", "cpu_f": "cpu_fwd_s", "cpu_b": "cpu_bwd_s",
                     "layer_f": "layer_fwd_s", "layer_b": "layer_bwd_s", "attn_f": "attn_fwd_s", "attn_b": "attn_bwd_s",
                     "recompute_b": "recompute_bwd_s", "moe_frac": "moe_layer_frac", "experts_f": "experts_fwd_s",
                     "experts_b": "experts_bwd_s", "route_f": "routing_fwd_s", "route_b": "routing_bwd_s",
                     "a2a": "a2a_s", "syncs": "host_sync_flag",
                     "fused_mlp": "fused_mlp_flag", "busiest": "ep_busiest_load", "tp_f": "tp_fwd_s",
                     "tp_b": "tp_bwd_s", "cp_f": "cp_fwd_s", "cp_b": "cp_bwd_s", "ep_f": "ep_fwd_s", "ep_b": "ep_bwd_s",
                     "mamba_f": "mamba_fwd_s", "mamba_b": "mamba_bwd_s"}


def layer_detail(x: dict, p) -> dict[str, float]:
    """[issue 17] One transformer layer's seconds per micro-batch, averaged over the layers, for one row of ``x``
    (:func:`gpusim.model.step.layer_detail` builds it): ``gpu_fwd_s`` / ``gpu_bwd_s`` the GPU's own forward and
    backward time (``attn_*`` of it the attention core, ``experts_*`` the MoE layers' routed and shared experts with
    their permutations and casts, averaged over the layers, ``routing_*`` [issue 17] the MoE layers' token routing
    and permutation: router, (un)permutations and the dispatcher's small kernels, the last two inside ``experts_*``,
    ``mamba_*`` [issue 17] a hybrid model's Mamba mixers, averaged over the layers (zero without them),
    ``recompute_bwd_s`` what the backward runs again),
    ``cpu_*`` the CPU's launches, ``layer_*`` the time the layer takes (the slower of the two, with the MoE
    dispatcher's host sync), ``moe_layer_frac`` the share of MoE layers, ``a2a_s`` one MoE all-to-all,
    ``host_sync_flag`` 1 where the dispatcher waits on the host, ``fused_mlp_flag`` 1 where the experts run as
    Transformer Engine's fused grouped MLP (``--moe-fused-mlp``), ``ep_busiest_load`` the busiest EP rank's routed
    tokens over the mean (``--moe-imbalance``, or the sampling spread), and the exposed ``tp_*``, ``cp_*``, ``ep_*``
    communication. Evaluated for one scenario only: the sweep path (:func:`llm_terms`) does not carry these columns."""
    keys = [k for k in x if k not in _PIPELINE_KEYS]
    out = _layer_rows_terms({k: x[k] for k in keys}, p, Distinct(), detail=True)
    return {name: float(np.ravel(np.asarray(out[k], dtype=np.float64))[0]) for k, name in LAYER_DETAIL_KEYS.items()}


def llm_rows_terms(x: dict, p, *, dist: Distinct | None = None) -> dict:
    """Per-row LLM step parts (seconds) and memory (bytes) for one optimizer step of ``n_micro`` micro-batches.

    ``x`` holds broadcastable arrays: the transformer's shape, the degrees, the micro-batch, the recomputation code,
    the GEMM ceiling, the GPU's memory bandwidth and SM count and the fabric's bus bandwidths (built from
    :class:`gpusim.model.step.StepInputs` by ``step._llm_inputs``); ``p`` is a :class:`~gpusim.params.ModelParams`.
    Returns the critical stage's compute, exposed TP communication, the bubble and the exposed sends, the stage
    forward/backward times, parameters and activation bytes per stage, and the model FLOPs of one sequence.
    """
    L, h, a = _f(x["n_layers"]), _f(x["d_model"]), _f(x["n_heads"])
    q, kv, f, V, s = _f(x["q_dim"]), _f(x["kv_dim"]), _f(x["ff_dim"]), _f(x["vocab"]), _f(x["seq_len"])
    up = _f(x["ffn_mats"]) - 1.0
    tp, pp, vp, m, b = _f(x["tp"]), _f(x["pp"]), _f(x["vp"]), _f(x["n_micro"]), _f(x["micro_batch"])
    sp = np.asarray(x["sp"], dtype=bool) & (tp > 1)
    rc = np.asarray(x["recompute"])
    flash = np.asarray(x["flash"], dtype=bool)
    drop = _f(x["dropout"])
    e = 2.0 * _f(x["act_scale"])
    hbm, sms = _f(x["mem_bytes_per_s"]), _f(x["sm_count"])
    g = _f(x["gpus_per_node"])
    cp = _f(x.get("cp", 1.0))  # [issue 12] context parallelism: each rank holds s / cp tokens of a sequence
    T = b * s / cp
    fp8 = np.asarray(x.get("fp8_mode", FP8.NONE))
    dist = Distinct() if dist is None else dist
    ql, kvl = _f(x.get("mla_q_lora", 0.0)), _f(x.get("mla_kv_lora", 0.0))
    mla = kvl > 0
    vd = _f(x.get("v_dim", np.nan))
    o = np.where(mla & np.isfinite(vd), vd, q)  # the attention output's width (A V, the output projection's input)
    kva, kvu = _f(x.get("mla_kv_a", 0.0)), _f(x.get("mla_kv_up", 0.0))
    mem_rate = hbm * p.mem_eff_frac
    hyb = "mamba_frac" in x
    if hyb:
        fa, ff, fm = _f(x["attn_frac"]), _f(x["ffn_frac"]), _f(x["mamba_frac"])
    partial = rc != FULL
    norms_on = np.asarray(x.get("recompute_norms", False), dtype=bool) & partial
    mla_on = np.asarray(x.get("recompute_mla_up", False), dtype=bool) & partial & mla
    fp8_act = np.asarray(x.get("fp8_act", False), dtype=bool) & (fp8 > 0)
    cache = FP8.act_cache_bytes(fp8, fp8_act, e) if np.any(fp8_act) else None
    intra, inter = _f(x["intra_busbw_bytes_per_s"]), _f(x["inter_busbw_bytes_per_s"])
    domain = _f(x.get("nvlink_domain_gpus", g))
    exposed = 1.0 - p.tp_overlap_frac

    # ---- one layer's times and communication: once per distinct layer (not per pipeline) -------------------
    keys = [k for k in x if k not in _PIPELINE_KEYS]
    names: list[str] = []

    def layer_terms(*values):
        out = _layer_rows_terms(dict(zip(keys, values)), p, dist)
        names[:] = out
        return tuple(out.values())

    lt = dict(zip(names, dist(layer_terms, [x[k] for k in keys])))
    # [stop 57] layers kept in bf16 under a quantised recipe (Megatron-Core --first-last-layers-bf16): the same layer's
    # terms without quantisation, mixed into each pipeline stage by the share of its layers that are bf16
    # (bf16_stage_fracs); the memory terms stay the quantised layer's
    bf16_fr = bf16_stage_fracs(x.get("bf16_layers_start", 0.0), x.get("bf16_layers_end", 0.0), L,
                               _f(x.get("model_layers", L)), pp) if np.any(fp8 > 0) else None
    if bf16_fr is not None and not np.any(np.asarray(bf16_fr) > 0):
        bf16_fr = None
    if bf16_fr is not None:
        lt16 = dict(zip(names, dist(layer_terms, [np.where(fp8 > 0, FP8.NONE, x[k]) if k == "fp8_mode" else x[k]
                                                  for k in keys])))
    layer_f, layer_b, tp_f, tp_b, cp_f, cp_b = (lt[k] for k in ("layer_f", "layer_b", "tp_f", "tp_b", "cp_f", "cp_b"))
    ep_f, ep_b, one, ag, head_f, head_b = (lt[k] for k in ("ep_f", "ep_b", "one", "ag", "head_f", "head_b"))
    pair_e, pair_i = lt["ep_pair_exposed_frac"], lt["ep_pair_interf_frac"]  # [issue 17] EP A2A overlap per layer pair
    main_b = _f(x.get("grad_bytes_per_param", 4.0))  # [issue 17] the main gradient's bytes per element
    moe = {"delta_params": lt["moe_delta_params"], "expert_params": lt["moe_expert_params"],
           "delta_act_bytes": lt["moe_delta_act_bytes"], "rc_buf_bytes": lt["moe_rc_buf_bytes"]}
    if hyb:
        mam = {"keep_bytes": lt["mam_keep_bytes"], "flop_per_token": lt["mam_flop_per_token"]}

    # ---- parameters per stage ---------------------------------------------------------------------
    lps = L / pp
    multi_stage = pp > 1
    # [issue 17] the last stage's layer slots (stage_layers): the multi-token prediction modules take the empty slots
    # of an uneven split, or come on top of the last stage
    D = _f(x.get("mtp_layers", 0.0))
    last_layers, D_top = stage_layers(L, _f(x.get("model_layers", L)), D, pp)
    lp, emb_p = _f(x["layer_params"]), _f(x["embed_params"])
    lp_rank = lp / tp + moe["delta_params"]  # [issue 12] per rank: experts split ep x etp ways, the rest tp ways
    head_p = np.where(np.asarray(x["untied"], dtype=bool) | multi_stage, V * h, 0.0)  # Megatron copies a tied
    # [issue 17] an MTP module's own parameters beside its layer: eh_proj 2h x h (column-parallel) and three norms; on
    # a multi-stage pipeline the last stage also holds a copy of the word embeddings for the modules' lookups. Passes
    # that share one module (TransformerSpec.mtp_shared) hold its weights once: D - Dp of the stage's layer slots run
    # without parameters of their own
    Dp = _f(x.get("mtp_param_modules", D))
    mtp_p = Dp * (2.0 * h * h / tp + 3.0 * h) + np.where(multi_stage & (D > 0), emb_p / tp, 0.0)
    first_p = lps * lp_rank + emb_p / tp + np.where(multi_stage, 0.0, head_p / tp + mtp_p)  # embedding to the last
    last_p = (last_layers - (D - Dp)) * lp_rank + head_p / tp + mtp_p + np.where(multi_stage, 0.0, emb_p / tp)
    first_p = np.where(multi_stage, first_p, last_p)  # (one stage: the same one)
    stage_p = np.maximum(first_p, last_p)
    # without gradient-accumulation fusion every micro-batch's 16-bit weight gradients are added into the fp32
    # main gradients by a separate kernel: read 2 + 4 bytes, write 4 per parameter (Megatron-LM's main_grad hook;
    # --gradient-accumulation-fusion does the add in the weight-gradient GEMM's epilogue instead)
    unfused = 1.0 - _f(x["grad_accum_fusion"])
    accum_bytes = unfused * (e + 2.0 * main_b)  # [issue 17] read and write the main gradient at its width

    # ---- stages: embedding on the first, LM head and loss on the last ------------------------------
    ce_moved, ce_held = cross_entropy_bytes(x.get("ce_code", 0.0))  # [issue 17] the loss's implementation
    loss_bytes = ce_moved * T * V / tp  # softmax and cross entropy over the logits, forward and backward
    head_c = head_f + head_b + loss_bytes / mem_rate
    emb_c = T * h * (e + main_b) / mem_rate  # gather rows; backward scatter-adds into the main gradient
    emb_k = one * exposed * 2.0  # vocab-parallel embedding output all-reduce, head input gather / grad reduce

    def stage_parts(fr):
        """A full stage's compute, TP, CP and EP seconds with a share ``fr`` of its layers in bf16 (None: none)."""
        def mix(k):
            return lt[k] if fr is None else (1.0 - fr) * lt[k] + fr * lt16[k]
        quant = 1.0 if fr is None else 1.0 - fr
        c = lps * (mix("layer_f") + mix("layer_b") + accum_bytes * lp_rank / mem_rate
                   + quant * FP8.weight_cast_s(fp8, lp_rank, mem_rate) / m  # [issue 12] FP8 weights cast once a step
                   # [issue 17] without the transpose cache, every backward re-makes the weights' transposes
                   + quant * _f(x.get("fp8_retranspose_bytes", 0.0)) * lp_rank / mem_rate)
        return (c, lps * (mix("tp_f") + mix("tp_b")), lps * (mix("cp_f") + mix("cp_b")),
                lps * (mix("ep_f") + mix("ep_b")))

    # [issue 12] cp and ep exchanges of a stage, reported as cp_comm_exposed_s and ep_comm_exposed_s (every stage holds
    # lps layers); [stop 57] the first and last stages hold the bf16 layers
    mid_c, mid_k, mid_cp, mid_ep = stage_parts(None if bf16_fr is None else bf16_fr[1])
    (first_c, first_k, first_cp, first_ep), (last_c, last_k, last_cp, last_ep) = (
        ((mid_c, mid_k, mid_cp, mid_ep),) * 2 if bf16_fr is None else (stage_parts(bf16_fr[0]), stage_parts(bf16_fr[2])))
    emb_c = emb_c + accum_bytes * emb_p / tp / mem_rate
    head_c = head_c + accum_bytes * head_p / tp / mem_rate
    # [issue 17] the multi-token prediction modules on top of the last stage (stage_layers), each beside its layer:
    # one more pass through the shared LM head and its loss, eh_proj 2h -> h at the head's achieved GEMM rate (both
    # (T, n, >= h) products; FLOPs 2h/V of the head's per rank), the embedding lookup of the tokens ahead, the two
    # input norms and the concatenation (reads and writes of T h, forward; twice that backward)
    mtp_c = D_top * (head_c + (head_f + head_b) * 2.0 * h / V + emb_c + 3.0 * 10.0 * T * h * e / tp / mem_rate)
    last_frac = last_layers / lps  # the last stage's layer slots over a full stage's
    first_c = first_c + emb_c
    first_k = first_k + emb_k * np.where(multi_stage, 0.5, 1.0)
    last_c = last_frac * last_c + head_c + mtp_c + np.where(multi_stage, 0.0, emb_c)
    last_k = last_frac * last_k + emb_k * np.where(multi_stage, 0.5, 1.0)
    cpep = mid_cp + mid_ep  # [issue 12]
    first_t, last_t, mid_t = (first_c + first_k + first_cp + first_ep, last_c + last_k + last_frac * (last_cp + last_ep),
                              mid_c + mid_k + cpep)
    # (one stage: the first is the last)
    first_c, first_k, first_t = (np.where(multi_stage, a_, b_) for a_, b_ in
                                 ((first_c, last_c), (first_k, last_k), (first_t, last_t)))
    steady, bubble = pipeline_step_s(first_t, mid_t, last_t, pp, vp, m)
    crit_first = first_t >= last_t
    crit_c = np.where(crit_first, first_c, last_c)
    crit_k = np.where(crit_first, first_k, last_k)
    compute_s = m * crit_c
    # [issue 17] the critical stage's layer slots over a full one (one stage: the last, whatever it is compared with)
    crit_frac = np.where(crit_first & multi_stage, 1.0, last_frac)
    cp_comm_s = m * np.where(crit_first, first_cp, last_cp) * crit_frac
    ep_comm_s = m * np.where(crit_first, first_ep, last_ep) * crit_frac
    tp_comm_s = m * crit_k

    # ---- p2p between stages ------------------------------------------------------------------------
    fabric = ("intra_hop_s", "inter_hop_s", "nvls", "ll_max_busbw_bytes_per_s", "ll128", "host_cpu")

    def p2p_rows(pp, tp, b, cp, s, h, e, nodes, g, domain, intra, inter, *fabric_columns):
        """One send between neighbouring stages (once per distinct pipeline, tensor-parallel degree and micro-batch)."""
        # [issue 17] a stage boundary leaves the NVLink domain where the pipeline group (pp ranks n / pp apart) spans
        # more than one of the job's allocation blocks (gpusim.model.placement)
        pp_domains = PLACE.group_placement(pp, nodes * g / pp, nodes * g, g, domain)[1]
        cross = pp_domains > 1
        p2p_bytes = b * s / cp * h * e / tp  # (act_bytes / tp)
        link = np.where(cross, inter / g, intra)  # every GPU of a node sends at a stage boundary: a share of the NICs
        coll_here = _collective_fn(dict(zip(fabric, fabric_columns)), p, dist)
        return coll_here(C.SEND_RECV, p2p_bytes, 2.0, np.where(cross, 2.0, 1.0), link, link)

    p2p_one = dist(p2p_rows, [pp, tp, b, cp, s, h, e, _f(x["n_nodes"]), g, domain, intra, inter,
                              *(x[k] if k in x else _FABRIC_DEFAULTS[k] for k in fabric)])
    regather = np.where((tp > 1) & ~sp, ag, 0.0)
    # [issue 17] Megatron-Core's overlap_p2p_comm: only the interleaved schedule has it (on by default there); DualPipe
    # rows keep their own schedule's overlap (gpusim.model.dualpipe)
    ov_in = _f(x.get("pp_p2p_overlap", np.nan))  # NaN: Megatron-Core's default, on with interleaving
    p2p_ov = (np.where(np.isnan(ov_in), True, ov_in > 0) & (vp > 1)
              & (np.asarray(x.get("ep_overlap", 0)) != EPO.DUALPIPE))
    p2p_s = pp_p2p_exposed_s(p2p_one, regather, pp, vp, m, p2p_ov, chunk_fwd_s=lps * layer_f / vp,
                             chunk_bwd_s=lps * layer_b / vp, slowdown_frac=np.where(sms > 1.0, p.pp_p2p_sms / sms, 0.0),
                             hidden_frac=p.pp_p2p_overlap_frac)

    # ---- activations per stage --------------------------------------------------------------------
    kept, full = activation_bytes_per_layer(s / cp, b, h, a, q, kv, f, up, tp, sp, rc, dropout=drop, flash=flash,
                                            elem_bytes=e, norms=norms_on, mla_up=mla_on, mla_latent=ql + kvl,
                                            mla_q=ql > 0, cache_bytes=cache, mla=mla, v_width=o,
                                            qk_norm=x.get("qk_norm", False))  # [issue 12] s / cp tokens (cp needs FlashAttention)
    # [issue 12] MoE layers keep router scores, dispatched tokens, experts' activations; under full recomputation a
    # layer keeps only its input (the MoE part is recomputed with the rest), so only the layer being recomputed
    # holds them
    if hyb:  # [issue 17] the attention part (f = 0), the FFN part and the Mamba mixers', weighted by their shares
        k0, f0 = activation_bytes_per_layer(s / cp, b, h, a, q, kv, 0.0 * f, up, tp, sp, rc, dropout=drop,
                                            flash=flash, elem_bytes=e, norms=norms_on, mla_up=mla_on,
                                            mla_latent=ql + kvl, mla_q=ql > 0, cache_bytes=cache, mla=mla, v_width=o,
                                            qk_norm=x.get("qk_norm", False))
        mkeep = np.where(fm > 0, fm * mam["keep_bytes"], 0.0)
        kept = np.where(rc == FULL, kept, fa * k0 + ff * (kept - k0) + mkeep)
        full = fa * f0 + ff * (full - f0) + mkeep
    kept = kept + np.where(rc == FULL, 0.0, moe["delta_act_bytes"])
    full = full + moe["delta_act_bytes"]
    # [issue 17] the ``mlp`` recompute module: a dense layer keeps its MLP's input only (the checkpoint's 16-bit copy,
    # counted above as the FFN-up input), not the activation function's input nor the down-projection's
    mlp_on = np.asarray(x.get("recompute_mlp", False), dtype=bool) & partial
    dense_mlp = (1.0 - _f(x.get("moe_frac", 0.0))) * (ff if hyb else 1.0)
    if np.any(mlp_on):
        c_mlp = e if cache is None else cache
        kept = kept - np.where(mlp_on, dense_mlp * b * s / cp / tp * f * (up + 1.0) * c_mlp, 0.0)
    if np.any(fp8 > 0):  # [issue 17] TE keeps the linear layers' FP8 input copies (fp8.te_saved_input_delta_bytes)
        dense_ffn = (1.0 - _f(x.get("moe_frac", 0.0))) * np.where(mlp_on, 0.0, 1.0)  # (a recomputed MLP keeps none)
        te8 = FP8.te_saved_input_delta_bytes(np.where(fp8_act, FP8.NONE, fp8), tokens=b * s / cp, h=h, o_in=o, f=f,
                                             tp=tp, sp=sp, elem_bytes=e, norms_recomputed=norms_on,
                                             attn_frac=fa if hyb else 1.0,
                                             dense_ffn_frac=(ff if hyb else 1.0) * dense_ffn)
        if bf16_fr is not None:  # [stop 57] the first stage's bf16 layers keep 16-bit inputs (the fullest stage's)
            te8 = te8 * (1.0 - bf16_fr[0])
        kept, full = kept + np.where(rc == FULL, 0.0, te8), full + te8
    in_flight = np.minimum(pp, m)
    interleave = np.where(vp > 1, 1.0 + (pp - 1.0) / (pp * vp), 1.0)
    recompute_buf = np.where(rc == FULL, full, 0.0)  # the layer being recomputed holds its full activations
    if np.any(moe["rc_buf_bytes"]):  # [stop 52] a rerun MoE block's
        recompute_buf = recompute_buf + np.where(rc == FULL, 0.0, moe["rc_buf_bytes"])
    frag = 1.0 + p.fragmentation_frac
    resident, off_s = lps, 0.0
    if np.any(_f(x.get("act_offload_layers", 0.0)) > 0):  # [issue 17] activations of some layers in host memory
        gone, off_s = MEM.activation_offload_terms(x["act_offload_layers"], lps, kept,
                                                   _f(x["pcie_bytes_per_s"]) * p.h2d_pinned_eff_frac, layer_f, layer_b)
        resident = lps - gone
    act_first = (resident * kept * in_flight * interleave + recompute_buf) * frag
    # the micro-batch's logits in the loss: [issue 17] Megatron-Core's vocab-parallel cross entropy
    # (megatron/core/tensor_parallel/cross_entropy.py, VocabParallelCrossEntropy.calculate_logits_max:
    # ``vocab_parallel_logits = vocab_parallel_logits.float()``, the fused native version alike) makes an fp32 copy
    # while the output layer's bf16 logits are still held by the model's forward: 2 + 4 bytes per logit at the loss;
    # Transformer Engine's kernels work in the bf16 logits themselves: 2 (CROSS_ENTROPY_BYTES)
    logits = ce_held * T * V / tp
    # [issue 17] the last stage's slots (stage_layers; the MTP modules' layers among them) and each module's logits
    resident_last = np.maximum(resident + last_layers - lps, 0.0)
    act_last = np.where(multi_stage, (resident_last * kept + recompute_buf + (1.0 + D) * logits) * frag,
                        (resident_last * kept * in_flight * interleave + recompute_buf + (1.0 + D) * logits) * frag)
    act_first = np.where(multi_stage, act_first, act_last)

    # [issue 12] an uneven pipeline split is modelled as every stage holding the fullest stage's layers
    # (``n_layers`` padded); the model FLOPs count the model's own layers
    L = _f(x.get("model_layers", x["n_layers"]))
    # [issue 12] MLA: the down- and up-projections instead of Q, K, V (DeepSeek-V2 section 2.1.2)
    qkv_flop = np.where(mla, 2.0 * s * (h * (np.where(ql > 0, ql, q) + kva) + ql * np.where(ql > 0, q, 0.0)
                                         + kvl * kvu),
                        2.0 * s * h * (q + 2.0 * kv))
    # [issue 17] the keys a query sees, as the workload's MFU count has them (a window's on its layers; rows.window_fields)
    keys = _f(x.get("attn_key_frac", 1.0))
    if hyb:  # [issue 17] each kind of layer by its share; the Mamba mixers' closed forms (gpusim.workload.ssm)
        flop_fwd = L * (s * EXP.moe_flop_delta_per_token(x) + fa * (qkv_flop + 2.0 * s * o * h
                                                                    + 2.0 * s * s * (q + o) * keys)
                        + ff * 2.0 * s * h * f * (up + 1.0) + fm * s * mam["flop_per_token"]) + 2.0 * s * h * V
    else:
        flop_fwd = L * (s * EXP.moe_flop_delta_per_token(x)  # [issue 12] the MoE layers' FFN instead of the dense one
                        + qkv_flop + 2.0 * s * o * h + 2.0 * s * h * f * (up + 1.0)
                        + 2.0 * s * s * (q + o) * keys) + 2.0 * s * h * V
    # [issue 17] the multi-token prediction modules (their layer, eh_proj and the head again: the workload's count)
    flop_fwd = flop_fwd + _f(x.get("mtp_fwd_flop", 0.0))
    if np.any(off_s):  # [issue 17] exposed offload copies: every stage's micro-batch longer by off_s
        compute_s, steady, bubble = compute_s + m * off_s, steady + m * off_s, bubble + (pp - 1.0) * off_s / vp
    out = {"compute_s": compute_s, "tp_comm_exposed_s": tp_comm_s, "cp_comm_exposed_s": cp_comm_s,
           "ep_pair_exposed_frac": pair_e, "ep_pair_interf_frac": pair_i,  # [issue 17] EP A2A overlap per layer pair
            "ep_comm_exposed_s": ep_comm_s, "expert_params_per_stage": lps * moe["expert_params"],
            # [issue 17] (stage_layers; shared MTP passes hold one module's experts)
            "expert_params_last_stage": (last_layers - (D - Dp)) * moe["expert_params"],
            "pp_bubble_s": bubble,
            "pp_p2p_exposed_s": p2p_s, "steady_s": steady,
            "stage_fwd_s": lps * layer_f, "stage_bwd_s": lps * layer_b,
            "first_stage_s": first_t, "last_stage_s": last_t, "mid_stage_s": mid_t,
            "first_params": first_p, "last_params": last_p, "stage_params": stage_p,
            "act_first_bytes": act_first, "act_last_bytes": act_last, "act_layer_bytes": kept,
            "model_fwd_flop_per_sample": flop_fwd, "layers_per_stage": lps,
            "tp_one_collective_s": one, "p2p_one_s": p2p_one,
            "launch_excess_frac": lt["launch_excess_frac"] + 0.0 * compute_s}  # [issue 17]
    overlap = np.asarray(x.get("ep_overlap", 0))
    if np.any(overlap > 0):  # [issue 12] EP A2A overlap / DualPipe: the schedule's exposed all-to-all, sends, bubble
        out.update(EPO.step_terms(overlap, out, pp=pp, vp=vp, n_micro=m, sm_frac=p.ep_comm_sms / sms,
                                  p2p_overlap_frac=p.pp_p2p_overlap_frac))
        out["act_first_bytes"] = act_first * EPO.activation_mult(overlap, pp, vp)  # DualPipe: PP + 1 micro-batches;
        # [issue 17] EP A2A overlap (interleaved): one more chunk warmed up
    return out


def stage_state_bytes(params_local, shard_stage, dp, *, weight_bytes, grad_bytes, master_bytes, opt_bytes):
    """Weights, gradients and optimizer states of one stage on one GPU: 16-bit weights, fp32 main gradients,
    fp32 master + Adam moments; ZeRO-1 / distributed optimizer shards the last over ``dp``, ZeRO-2 also the
    gradients, ZeRO-3 / FSDP also the weights. Returns ``(weights, grads, optimizer)``."""
    P = _f(params_local)
    stage = np.asarray(shard_stage)
    d = np.maximum(_f(dp), 1.0)
    w = P * weight_bytes / np.where(stage >= 3, d, 1.0)
    gr = P * grad_bytes / np.where(stage >= 2, d, 1.0)
    o = P * (master_bytes + opt_bytes) / np.where(stage >= 1, d, 1.0)
    return w, gr, o
