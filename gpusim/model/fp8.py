"""FP8 training of the transformer layers as NVIDIA Transformer Engine runs it (``te.Linear`` /
``te.LayerNormMLP`` under ``fp8_autocast``; Micikevicius et al., "FP8 Formats for Deep Learning", 2022).

- **Which GEMMs**: the four linear layers of each transformer layer (QKV, attention output, FFN up and down;
  the routed and shared experts of an MoE layer likewise) run their forward, data-gradient and weight-gradient
  GEMMs on FP8 operands (E4M3 forward, E5M2 gradients: the HYBRID format) at the GPU's FP8 matmul ceiling,
  reading one byte per operand element. Attention (FlashAttention in bf16: TE's FP8 attention is off by
  default), the embedding, the LM head and the loss stay in bf16 (Megatron-LM keeps the output layer out of
  FP8), as do the norms and element-wise kernels.
- **Casts and amax, memory-bound**: every FP8 GEMM input is quantised by a kernel that reads the bf16 tensor
  and writes the FP8 copy and its transpose (TE ``cast_transpose``: the transpose feeds the weight-gradient
  GEMM), 2 + 2 bytes per element, fusing the amax of the tensor. [issue 17] On GPUs whose FP8 GEMMs take non-TN
  layouts (compute capability 10.x: :func:`non_tn_gemm`) TE writes no transpose for per-tensor scaling: 2 + 1
  bytes, and one FP8 weight copy:

  - *delayed scaling* (TE ``DelayedScaling``, the default): the scale comes from the amax history of earlier
    steps, so one pass suffices;
  - *current scaling* (TE ``Float8CurrentScaling``): the tensor's own amax must be known before the cast: an
    extra read of 2 bytes per element;
  - *MXFP8* (TE ``MXFP8BlockScaling``, Blackwell): one E8M0 scale per 32 elements computed in the same pass,
    rowwise and columnwise copies (2 + 2 bytes) plus 2/32 bytes of scales.

  Forward: the inputs of the four linear layers (``T h``, ``T q/t``, ``T h``, ``T f/t`` elements); backward: the
  output gradients entering the data-gradient GEMMs (``T (q + 2 kv)/t``, ``T h``, ``T f u/t``, ``T h``). The
  weights are cast once per optimizer step (TE caches the FP8 weights over the micro-batches), 2 + 2 bytes per
  parameter.

  [issue 17] **Casts fused into the kernel that makes the tensor.** Three of those tensors come out of a norm or an
  activation kernel, and Transformer Engine quantises them there (NVIDIA/TransformerEngine
  ``transformer_engine/pytorch/csrc/extensions/normalization.cpp`` ``layernorm_fwd`` / ``rmsnorm_fwd`` and
  ``activation.cpp``: ``Impl::FULLY_FUSED`` for the per-tensor delayed-scaling ``Float8Quantizer`` and, for
  activations, the ``MXFP8Quantizer``; ``Impl::FUSED_NORM_AMAX_FP8`` / ``FUSED_ACTIVATION_AMAX_FP8`` for the
  ``Float8CurrentScalingQuantizer``: the kernel writes its 16-bit output *and its amax*, then ``quantize_with_amax``
  casts it; MXFP8 norms are ``UNFUSED``): the two norm outputs (the QKV and FFN-up inputs, ``2 T h``), the
  activation output (the FFN-down input, ``T f/t``) and, backward, the activation gradient (the FFN-up output
  gradient, ``T f u/t``: TE's fused ``dact`` + cast + transpose). Their cost is counted over the 16-bit write the
  producing kernel is already charged for (:data:`NORM_FUSED_BYTES`, :data:`ACT_FUSED_BYTES`): delayed scaling
  writes FP8 (1 byte) in place of 16 bits (2) and the transposed copy in one more pass (read 1 + write 1): +1 byte
  per element (-1 with non-TN GEMMs: no transpose; where TE's fused kernel writes the transpose itself, as its
  ``dact`` + cast + transpose does, the cost is 0: +1 is the conservative side); current scaling skips the separate amax read (the producing
  kernel computes it): read 2 + write 1 + 1 = 4 (3 non-TN); MXFP8 norms cast in a separate pass
  (:data:`CAST_BYTES`) while MXFP8 activations write both FP8 orientations and their scales in place of the 16-bit
  output: +2/32. The other tensors (the attention output; the gradients arriving from attention and from the
  residual stream) are cast by a separate ``cast_transpose``: :data:`CAST_BYTES`.
- **Memory** [issue 17]:

  - *Weights*: the FP8 weight copy and its transpose, 2 bytes per parameter (MXFP8: + 2/32 for the scales; one
    copy, 1 byte, with non-TN GEMMs), cached over the micro-batches (Megatron-Core passes ``is_first_microbatch``
    to TE). With ``fp8_param_gather`` (Megatron-Core ``--fp8-param-gather``, which needs the distributed optimizer
    or FSDP) those FP8 tensors *are* the model's parameters and no bf16 copy is kept: Megatron-Bridge's FP8 and
    MXFP8 recipes all set it (``src/megatron/bridge/training/mixed_precision.py``:
    ``bf16_with_fp8_delayed_scaling_mixed``, ``bf16_with_fp8_current_scaling_mixed``, ``bf16_with_mxfp8_mixed``
    ``fp8_param_gather = True``; NeMo 2's ``bf16_with_fp8_mixed`` ``fp8_params = True``). The DDP parameter buffer
    then holds the FP8 bytes (``uint8``), and for MXFP8 the bf16 all-gather lands in the gradient buffer
    (``reuse_grad_buf_for_mxfp8_param_ag``, Megatron-Core ``distributed/param_and_grad_buffer.py``: "param buffer
    is not mapped to model params for MXFP8 ... cast from bf16 to MXFP8 during copy"): :func:`weight_state_bytes`.
    The fp32 main gradients (``grad_reduce_in_fp32 = True`` in ``bf16_mixed``) and the fp32 master copy with
    Adam's moments (sharded over dp by the distributed optimizer) are as in bf16 training.
  - *Saved activations* (:func:`te_saved_input_delta_bytes`): a TE linear layer keeps the FP8 copy of its input for
    the weight-gradient GEMM, not the bf16 tensor (``transformer_engine/pytorch/module/linear.py``: "Discard
    row-wise data since it is not needed in backward pass", ``inputmat.update_usage(rowwise_usage=False,
    columnwise_usage=True)``, ``saved_inputmat = inputmat``; TE 1.x saved ``inputmat_t`` or the FP8 ``inputmat``
    likewise), and ``LayerNormLinear`` keeps its FP8 norm output: 1 byte per element (MXFP8: + 1/32 of E8M0
    scales) instead of 2 for the QKV and FFN-up inputs and the FFN-down input. The activation function's input
    stays 16-bit (its own backward reads it), and the attention output is kept twice: in bf16 by the fused
    attention kernel (its backward reads ``O``) and in FP8 by the output projection (+1 byte per element).

- **NVFP4** [issue 17] (TE ``NVFP4BlockScaling``, Blackwell; Megatron-Bridge ``bf16_with_nvfp4_mixed``: ``fp4 =
  "e2m1"``, ``fp4_recipe = "nvfp4"``, ``fp8_param_gather = False``): the same linear-layer GEMMs on FP4 (E2M1) operands
  with one E4M3 scale per 16 elements and an FP32 scale per tensor (two-level scaling), 9/16 byte per operand element
  (:data:`OPERAND_BYTES`), at the FP8 kernel ceiling times ModelParams ``nvfp4_gemm_speedup`` (Transformer Engine's
  pre-quantised GEMM profile on B300: the FP4 kernels ran 1.81x the per-tensor FP8 ones where the datasheet gives
  2.92x), at most the GPU's datasheet FP4 / FP8 ratio (:func:`nvfp4_ceiling_flop_per_s`). The recipe (TE ``transformer_engine/common/recipe/__init__.py``
  ``NVFP4BlockScaling``): inputs and gradients in 1x16 blocks with a random Hadamard transform (16x16) on their
  column-wise copy, the weight-gradient GEMM's operands, and stochastic rounding of the gradients; weights in 16x16
  blocks (one quantisation serves both orientations), no transform; attention stays bf16. Every quantisation of an
  input or gradient (TE ``NVFP4Quantizer::quantize_impl``) runs three memory-bound kernels: the amax of the tensor and
  of its transform (``nvte_hadamard_transform_amax``, read 2 bytes), the row-wise cast (``nvte_quantize_v2``, read 2,
  write 9/16) and the transformed column-wise cast (``nvte_hadamard_transform_cast_fusion_columnwise``, read 2, write
  9/16): 7.125 bytes per element (:data:`CAST_BYTES`), and the norm and activation kernels cannot fuse it (TE's
  ``normalization.cpp`` / ``activation.cpp``: ``Impl::UNFUSED`` when the quantizer has the transform and its post-RHT
  amax: "Post-RHT amax is handled within NVFP4 quantizer"). A weight is cast once per optimizer step (amax 2, one
  2-D kernel reading 2 and writing both copies, 5.125: :data:`WEIGHT_CAST_BYTES`) into two FP4 copies kept beside the
  bf16 weight (1.125 bytes per parameter; no FP4 parameter all-gather, so the distributed optimizer gathers bf16); a
  linear layer saves the column-wise FP4 copy of its input (9/16 byte). Sequence-parallel input all-gathers move the
  quantised shards as MXFP8's do (:data:`TP_INPUT_GATHER_BYTES`: 9/8 byte forward, 9/16 backward).

Pure numpy on broadcastable float64 arrays.
"""

from __future__ import annotations

import numpy as np

NONE, DELAYED, CURRENT, MX = 0, 1, 2, 3
#: [issue 17] per-tensor scaling on a GPU whose FP8 GEMMs take every layout (no transposed copy: :func:`non_tn_gemm`)
DELAYED_NTN, CURRENT_NTN = 4, 5
#: [issue 17] NVFP4 (module docstring): FP4 operands with 1x16 E4M3 block scales and a per-tensor FP32 scale
NVFP4 = 6
#: every quantised mode, in code order (the tables below are indexed by the code)
_ALL = (DELAYED, CURRENT, MX, DELAYED_NTN, CURRENT_NTN, NVFP4)
MODES = {"delayed": DELAYED, "current": CURRENT}
#: [issue 17] NVFP4 bytes per element of one FP4 copy: half a byte of data and one E4M3 scale per 16 elements
NVFP4_COPY_BYTES = 0.5 + 1.0 / 16.0
#: bytes moved per element by one quantisation of a bf16 tensor (read 2, write rowwise + columnwise FP8 1 + 1; current
#: scaling reads the tensor once more for its amax; with non-TN GEMMs only the rowwise copy is written; NVFP4: the amax
#: pass, then the row-wise and the Hadamard-transformed column-wise casts, each reading the tensor: 2 + 2 x (2 + 9/16))
CAST_BYTES = {DELAYED: 4.0, CURRENT: 6.0, MX: 4.0 + 2.0 / 32.0, DELAYED_NTN: 3.0, CURRENT_NTN: 5.0,
              NVFP4: 2.0 + 2.0 * (2.0 + NVFP4_COPY_BYTES)}
#: [issue 17] bytes per element of the once-per-step weight quantisation: as :data:`CAST_BYTES`, but NVFP4 weights take
#: 16x16 blocks and no transform, so one kernel writes both copies after the amax pass: 2 + 2 + 2 x 9/16
WEIGHT_CAST_BYTES = {**CAST_BYTES, NVFP4: 2.0 + 2.0 + 2.0 * NVFP4_COPY_BYTES}
#: FP8 copies of the weights kept per parameter (rowwise + transpose, or rowwise only), and MXFP8's scales; NVFP4's two
#: FP4 copies with their scales
WEIGHT_COPY_BYTES = {DELAYED: 2.0, CURRENT: 2.0, MX: 2.0 + 2.0 / 32.0, DELAYED_NTN: 1.0, CURRENT_NTN: 1.0,
                     NVFP4: 2.0 * NVFP4_COPY_BYTES}
#: [issue 17] bytes per element a quantised GEMM reads of each operand (FP8: 1; NVFP4: 9/16 with its block scales)
OPERAND_BYTES = {m: 1.0 for m in _ALL} | {NVFP4: NVFP4_COPY_BYTES}


def _table(d: dict, none: float = 0.0) -> np.ndarray:
    """A lookup array indexed by mode code (``none`` at code 0, no quantisation)."""
    return np.array([none] + [d[m] for m in _ALL])


_CAST_TABLE = _table(CAST_BYTES)
_WEIGHT_CAST_TABLE = _table(WEIGHT_CAST_BYTES)
_OPERAND_TABLE = _table(OPERAND_BYTES, none=1.0)
#: [issue 17] bytes per element of a quantisation fused into the norm kernel that makes the tensor, over that kernel's
#: 16-bit write (module docstring: TE's normalization.cpp; MXFP8 and NVFP4 norms are unfused: a separate pass)
NORM_FUSED_BYTES = {DELAYED: -1.0 + 2.0, CURRENT: 2.0 + 1.0 + 1.0, MX: CAST_BYTES[MX], DELAYED_NTN: -1.0,
                    CURRENT_NTN: 2.0 + 1.0, NVFP4: CAST_BYTES[NVFP4]}
#: [issue 17] the same for the activation kernel (forward) and its gradient (backward; TE's activation.cpp: MXFP8
#: fully fused, rowwise + columnwise copies + 1/32 scales each in place of the 16-bit output; NVFP4 unfused)
ACT_FUSED_BYTES = {DELAYED: -1.0 + 2.0, CURRENT: 2.0 + 1.0 + 1.0, MX: 2.0 / 32.0, DELAYED_NTN: -1.0,
                   CURRENT_NTN: 2.0 + 1.0, NVFP4: CAST_BYTES[NVFP4]}
_NORM_TABLE = _table(NORM_FUSED_BYTES)
_ACT_TABLE = _table(ACT_FUSED_BYTES)
_WEIGHT_TABLE = _table(WEIGHT_COPY_BYTES)


def non_tn_gemm(compute_capability: str | None) -> bool:
    """[issue 17] Whether cuBLAS FP8 GEMMs on this GPU take non-TN layouts, so Transformer Engine keeps no transposed
    FP8 copy for per-tensor scaling: compute capability 10.x-11.x or 13.0 and later (Blackwell data-center parts), as
    TE's ``is_non_tn_fp8_gemm_supported()`` decides (``transformer_engine/pytorch/utils.py``:
    ``(10, 0) <= capability < (12, 0) or capability >= (13, 0)``). Hopper (9.0) and Ada (8.9) need TN: the
    weight-gradient and data-gradient GEMMs read a transposed FP8 copy made by ``cast_transpose``."""
    if not compute_capability:
        return False
    major, _, minor = str(compute_capability).partition(".")
    cc = (int(major), int(minor or 0))
    return (10, 0) <= cc < (12, 0) or cc >= (13, 0)


def gemm_ceiling_flop_per_s(mode, fp8_ceiling_flop_per_s, mx_rate_frac):
    """[issue 17] The matmul ceiling of a row's FP8 GEMMs: the GPU's (per-tensor) FP8 ceiling, times
    ``mx_rate_frac`` (ModelParams ``mxfp8_gemm_rate_frac``) for MXFP8, whose kernels load and apply an E8M0 scale per 32
    elements of the reduction for both operands (Transformer Engine's pre-quantised GEMM profile on B300: 0.951 of the
    per-tensor FP8 kernels' rate). Broadcastable arrays; FLOP/s."""
    c8 = np.asarray(fp8_ceiling_flop_per_s, dtype=np.float64)
    return np.where(np.asarray(mode) == MX, c8 * float(mx_rate_frac), c8)


def nvfp4_ceiling_flop_per_s(fp8_ceiling_flop_per_s, fp4_peak_flop_per_s, fp8_peak_flop_per_s, speedup):
    """[issue 17] The matmul ceiling of NVFP4 GEMMs: the GPU's per-tensor FP8 ceiling times ``speedup`` (ModelParams
    ``nvfp4_gemm_speedup``: the FP4 kernels' rate over the FP8 ones in Transformer Engine's B300 profile, 1.81), at most
    its datasheet FP4 / FP8 ratio. Hand-worked: B300 (FP8 sustained 2,759.8 TFLOP/s; datasheet FP4 13,125, FP8 4,500:
    2.917) 2,759.8 x 1.81 = 4,995.2 TFLOP/s; a GPU whose datasheet ratio is 1.5 gets 1.5. FLOP/s."""
    ratio = _f(fp4_peak_flop_per_s) / _f(fp8_peak_flop_per_s)
    return _f(fp8_ceiling_flop_per_s) * np.minimum(ratio, float(speedup))


def operand_bytes(mode):
    """[issue 17] :data:`OPERAND_BYTES` of a mode code: bytes per operand element a quantised GEMM reads (1 at code 0,
    which the callers' 16-bit path never reads)."""
    return _OPERAND_TABLE[np.asarray(mode, dtype=np.int64)]


def mode_code(precision: str, recipe: str, compute_capability: str | None) -> int:
    """The integer quantisation mode of a row: NVFP4, MXFP8, or per-tensor FP8 ``recipe`` (with or without the
    transposed copy)."""
    if precision == "nvfp4":
        return NVFP4
    if precision == "mxfp8":
        return MX
    base = MODES[recipe]
    if non_tn_gemm(compute_capability):
        return DELAYED_NTN if base == DELAYED else CURRENT_NTN
    return base
#: bytes per element of an activation kept for the backward pass in FP8 (``fp8_act``): one byte plus the fine-grained
#: scales, one fp32 per 1x128 tile (DeepSeek-V3 section 3.3.1/3.3.2, its recipe under per-tensor fp8 too: the
#: conservative choice) or one E8M0 per 32 elements with MXFP8
ACT_CACHE_BYTES = {DELAYED: 1.0 + 4.0 / 128.0, CURRENT: 1.0 + 4.0 / 128.0, MX: 1.0 + 1.0 / 32.0}
#: cast kernels per layer and pass (four linear inputs forward, four output gradients backward)
CASTS_PER_LAYER = 4.0


def _f(a):
    return np.asarray(a, dtype=np.float64)


def cast_bytes_per_elem(mode):
    return _CAST_TABLE[np.asarray(mode, dtype=np.int64)]


def norm_fused_bytes_per_elem(mode):
    """[issue 17] :data:`NORM_FUSED_BYTES` of a mode code (0 without FP8)."""
    return _NORM_TABLE[np.asarray(mode, dtype=np.int64)]


def act_fused_bytes_per_elem(mode):
    """[issue 17] :data:`ACT_FUSED_BYTES` of a mode code (0 without FP8)."""
    return _ACT_TABLE[np.asarray(mode, dtype=np.int64)]


def layer_cast_s(mode, *, T, h, q, kv, f, up, tp, mem_rate, kernel_tail_s):
    """Seconds of one layer's FP8 quantisation kernels, ``(forward, backward)``, per micro-batch."""
    if not np.any(np.asarray(mode) > 0):
        return 0.0, 0.0
    code = np.asarray(mode, dtype=np.int64)
    per, norm, act = _CAST_TABLE[code], _NORM_TABLE[code], _ACT_TABLE[code]
    on = code > 0
    T = _f(T)
    # [issue 17] separate cast_transpose passes for the attention output (forward) and for the gradients arriving from
    # attention and from the residual stream (backward); the casts fused into the norms and the activation cost only
    # their bytes over the 16-bit write those kernels are already charged for (module docstring)
    fwd_bytes = T * (q / tp * per + 2.0 * h * norm + f / tp * act)
    bwd_bytes = T * (((q + 2.0 * kv) / tp + 2.0 * h) * per + f * up / tp * act)
    tail = CASTS_PER_LAYER * kernel_tail_s
    return (np.where(on, fwd_bytes / mem_rate + tail, 0.0),
            np.where(on, bwd_bytes / mem_rate + tail, 0.0))


def weight_cast_s(mode, params_local, mem_rate):
    """Seconds per optimizer step to cast the rank's linear weights to FP8 (once; cached over micro-batches)."""
    if not np.any(np.asarray(mode) > 0):
        return 0.0
    return np.where(np.asarray(mode) > 0, _f(params_local) * _WEIGHT_CAST_TABLE[np.asarray(mode, dtype=np.int64)]
                    / mem_rate, 0.0)


def act_cache_bytes(mode, fp8_act, elem_bytes):
    """Bytes per element of a linear layer's input kept for the backward pass: :data:`ACT_CACHE_BYTES` where the row
    caches activations in FP8 (``fp8_act`` and an FP8 recipe), else ``elem_bytes`` (16-bit)."""
    m = np.asarray(mode)
    c8 = np.where(m == MX, ACT_CACHE_BYTES[MX], ACT_CACHE_BYTES[DELAYED])
    return np.where(np.asarray(fp8_act, dtype=bool) & (m > 0), c8, _f(elem_bytes))


def weight_copy_bytes_per_param(mode):
    return _WEIGHT_TABLE[np.asarray(mode, dtype=np.int64)]


#: [issue 17] bytes per element of a TE linear layer's input saved for the backward pass as its FP8 copy (the
#: columnwise data: one byte, per-tensor scales are one fp32 per tensor; MXFP8 adds one E8M0 scale per 32 elements)
TE_SAVED_INPUT_BYTES = {DELAYED: 1.0, CURRENT: 1.0, MX: 1.0 + 1.0 / 32.0, DELAYED_NTN: 1.0, CURRENT_NTN: 1.0,
                        NVFP4: NVFP4_COPY_BYTES}
_SAVED_TABLE = _table(TE_SAVED_INPUT_BYTES)


def te_saved_input_bytes(mode):
    """Bytes per element of an FP8 linear layer's saved input (:data:`TE_SAVED_INPUT_BYTES`; 0 without FP8)."""
    return _SAVED_TABLE[np.asarray(mode, dtype=np.int64)]


def te_saved_input_delta_bytes(mode, *, tokens, h, o_in, f, tp, sp, elem_bytes, norms_recomputed=False,
                               attn_frac=1.0, dense_ffn_frac=1.0):
    """[issue 17] Change of one layer's saved activations (bytes, one micro-batch of ``tokens``) when its linear
    layers run in FP8 under Transformer Engine, against the 16-bit accounting of
    :func:`gpusim.model.llm.activation_bytes_per_layer` (module docstring, *Saved activations*). With
    ``c`` = :func:`te_saved_input_bytes` and ``e`` the 16-bit element size:

    - the QKV input (the attention norm's output) ``T h r (c - e)`` (``r = 1/t`` with sequence parallelism, else 1;
      0 where the norms are recomputed: the norm output is not kept at all), per attention layer;
    - the output projection's FP8 copy of the attention output, ``+ T o c / t`` (the bf16 ``O`` the attention
      kernel keeps is already counted);
    - the FFN-up input ``T h r (c - e)`` and the FFN-down input ``T f (c - e) / t``, per dense FFN layer
      (``dense_ffn_frac``: a mixture-of-experts layer's routed tokens are counted by gpusim.model.experts).

    Hand-worked: T 4096, h 4096, o 4096, f 14336, tp 1, e 2, per-tensor FP8 (c 1):
    ``-4096 x 4096 + 4096 x 4096 - 4096 x 4096 - 4096 x 14336 = -4096 x 18432`` bytes (-75.5 MB). Zero without FP8.
    """
    code = np.asarray(mode, dtype=np.int64)
    if not np.any(code > 0):
        return 0.0
    c = _SAVED_TABLE[code]
    T = _f(tokens)
    t = _f(tp)
    e = _f(elem_bytes)
    r = np.where(np.asarray(sp, dtype=bool), 1.0 / t, 1.0)
    norm_out = np.where(np.asarray(norms_recomputed, dtype=bool), 0.0, T * _f(h) * r * (c - e))
    attn = norm_out + T * _f(o_in) * c / t
    ffn = norm_out + T * _f(f) * (c - e) / t
    return np.where(code > 0, _f(attn_frac) * attn + _f(dense_ffn_frac) * ffn, 0.0)


def te_moe_saved_input_delta_bytes(mode, *, routed_tokens, tokens, h, fe_local, fs, elem_bytes, moe_act=False,
                                   hx=None):
    """[issue 17] Change of one MoE layer's saved activations (bytes, one micro-batch) when its experts run in FP8
    under Transformer Engine, against the 16-bit accounting of :func:`gpusim.model.experts.moe_layer_terms`, with
    ``c`` = :func:`te_saved_input_bytes` and ``e`` the 16-bit element size. Megatron-Core's ``TEGroupedMLP``
    (megatron/core/transformer/moe/experts.py) runs both expert GEMMs as TE ``GroupedLinear`` layers, which save the
    FP8 copy of their input for the weight gradient, not the 16-bit tensor (freed once quantised: the dispatched
    tokens are referenced by nothing else, the permutation and all-to-all backward need only the routing map):

    - the routed experts' fc1 input, the ``routed_tokens`` dispatched copies: ``routed_tokens h (c - e)``;
    - their fc2 input (the SwiGLU output): ``routed_tokens fe_local (c - e)``, and nothing with ``moe_act``
      (Megatron-Core then calls ``set_save_original_input(self.linear_fc2)``: fc2 keeps the 16-bit output, which the
      recompute discards, so the routed SwiGLU output is kept in neither form);
    - the SwiGLU input (fc1's output) stays 16-bit (the activation function is not a TE linear layer);
    - the shared experts (``fs`` wide, on the ``tokens`` of the rank): their fc2 input ``tokens fs (c - e)``, and their
      fc1 keeps an FP8 copy of the norm output, ``+ tokens h c``, beside the 16-bit one the router's gating GEMM keeps.

    Hand-worked: per-tensor FP8 (c 1), e 2, 32,768 routed copies of h 7168 into experts of 2048, 4096 tokens, a shared
    expert of 2048: ``-32768 (7168 + 2048) + 4096 (7168 - 2048) = -281 MB``. Zero without FP8. ``hx``: the routed
    experts' input width where it is not ``h`` ([stop 48] LatentMoE's latent)."""
    code = np.asarray(mode, dtype=np.int64)
    if not np.any(code > 0):
        return 0.0
    c = _SAVED_TABLE[code]
    e = _f(elem_bytes)
    R, T = _f(routed_tokens), _f(tokens)
    fc2 = np.where(np.asarray(moe_act, dtype=bool), 0.0, R * _f(fe_local) * (c - e))
    shared = np.where(_f(fs) > 0, T * (_f(h) * c + _f(fs) * (c - e)), 0.0)
    hr = _f(h) if hx is None else _f(hx)
    return np.where(code > 0, R * hr * (c - e) + fc2 + shared, 0.0)


def weight_state_bytes(mode, fp8_param_gather, sharded, elem_bytes=2.0, transpose_cache=True):
    """[issue 17] Bytes per parameter of a linear weight on the GPU under FP8 (module docstring, *Weights*): the
    FP8 copies (:func:`weight_copy_bytes_per_param`) alone where the parameters are FP8 (``fp8_param_gather`` with
    a sharded optimizer, ``sharded``), else the 16-bit weight plus those copies; without the transpose cache
    (:func:`retranspose_bytes_per_param`) the transposed copy is not kept. Hand-worked: Hopper per-tensor 2 (primary
    FP8) or 4, 1 or 3 without the cache; Blackwell per-tensor 1 or 3; MXFP8 2.0625 or 4.0625."""
    copies = weight_copy_bytes_per_param(mode) - (retranspose_bytes_per_param(mode, transpose_cache) > 0)
    # (NVFP4 has no FP4 parameter all-gather: Megatron-Bridge's bf16_with_nvfp4_mixed sets fp8_param_gather False)
    primary = (np.asarray(fp8_param_gather, dtype=bool) & np.asarray(sharded, dtype=bool)
               & (np.asarray(mode, dtype=np.int64) != NVFP4))
    return np.where(primary, copies, _f(elem_bytes) + copies)


def retranspose_bytes_per_param(mode, transpose_cache):
    """[issue 17] HBM bytes per weight parameter and micro-batch that re-making the FP8 weights' transposes moves when
    they are not cached: Megatron-Core's ``disable_parameter_transpose_cache`` ("the parameter transposes are not
    cached for subsequent iterations", ``TransformerConfig``; its Transformer Engine modules then pass
    ``is_first_microbatch=None``, so TE caches nothing over the micro-batches:
    ``megatron/core/extensions/transformer_engine.py``; Megatron-Bridge's Llama 3 SFT performance configs set it,
    ``set_llama3_common_peft_configs`` in ``scripts/performance/configs/llama/llama3_llm_finetune.py``). Only where a
    transposed copy exists: per-tensor scaling with TN-only GEMMs (Hopper, :func:`weight_copy_bytes_per_param` 2);
    each backward pass reads the FP8 weight and writes its transpose, 1 + 1 bytes. 0 with the cache (the default) and
    for the other modes (MXFP8 quantises both orientations at once; non-TN GEMMs need no transpose)."""
    m = np.asarray(mode, dtype=np.int64)
    off = ~np.asarray(transpose_cache, dtype=bool) & ((m == DELAYED) | (m == CURRENT))
    return np.where(off, 2.0, 0.0)


def param_gather_bytes(mode, fp8_param_gather, sharded, elem_bytes=2.0):
    """[issue 17] Bytes per parameter the distributed optimizer / FSDP all-gathers after the optimizer step. With
    FP8 primary weights (``fp8_param_gather`` and a sharded optimizer) per-tensor scaling gathers the FP8 bytes, 1 per
    parameter (Megatron-Core ``DistributedDataParallelConfig.fp8_param_gather``: "keep the compute param in fp8 ...
    and perform the param all-gather in fp8"); MXFP8 gathers the bf16 weights into the gradient buffer and casts them
    after (``reuse_grad_buf_for_mxfp8_param_ag``, ``distributed/param_and_grad_buffer.py``), ``elem_bytes``; without
    FP8 primary weights ``elem_bytes``. Hand-worked: per-tensor, zero1 -> 1; MXFP8 -> 2; ddp -> 2."""
    code = np.asarray(mode, dtype=np.int64)
    primary = (np.asarray(fp8_param_gather, dtype=bool) & np.asarray(sharded, dtype=bool) & (code > 0) & (code != MX)
               & (code != NVFP4))
    return np.where(primary, 1.0, _f(elem_bytes))


#: [issue 17] bytes per element of a sequence-parallel input all-gather of an FP8 linear layer, ``(forward, backward
#: re-gather)``: TE quantises the local shard and gathers the FP8 data (``transformer_engine/pytorch/module/linear.py``,
#: "Cast local input tensor if needed" before the all-gather; per-tensor scaling gathers the rowwise data only,
#: "All-gather is not supported with FP8 column-wise data", and keeps that rowwise shard for the backward re-gather;
#: MXFP8 gathers both orientations with their 1x32 scales forward and the columnwise copy backward; [stop 57] NVFP4
#: takes the same path as MXFP8, both FP4 orientations with their 1x16 E4M3 scales forward and the columnwise copy
#: backward: TE's ``gather_along_first_dim`` routes an NVFP4 tensor to its own all-gather of the packed data and scales)
TP_INPUT_GATHER_BYTES = {DELAYED: (1.0, 1.0), CURRENT: (1.0, 1.0), DELAYED_NTN: (1.0, 1.0), CURRENT_NTN: (1.0, 1.0),
                         MX: (2.0 + 2.0 / 32.0, 1.0 + 1.0 / 32.0),
                         NVFP4: (2.0 * NVFP4_COPY_BYTES, NVFP4_COPY_BYTES)}
_AGF_TABLE = _table({m: v[0] for m, v in TP_INPUT_GATHER_BYTES.items()}, none=np.nan)
_AGB_TABLE = _table({m: v[1] for m, v in TP_INPUT_GATHER_BYTES.items()}, none=np.nan)


def tp_input_gather_bytes(mode, elem_bytes):
    """[issue 17] Bytes per element of the tensor-parallel all-gathers of a linear layer's input, ``(forward,
    backward)`` (:data:`TP_INPUT_GATHER_BYTES`; ``elem_bytes`` without FP8). The output-gradient all-gathers of the
    row-parallel layers and every reduce-scatter stay 16-bit in this model. Hand-worked: per-tensor (1, 1); MXFP8
    (2.0625, 1.03125); bf16 (2, 2)."""
    code = np.asarray(mode, dtype=np.int64)
    e = _f(elem_bytes)
    return (np.where(code > 0, _AGF_TABLE[code], e), np.where(code > 0, _AGB_TABLE[code], e))
