"""GNMT v2: an LSTM encoder-decoder with attention (conventions in :mod:`gpusim.workload.core`)."""

from __future__ import annotations

import functools
import math

from gpusim.workload.core import (ACT_BYTES, LOSS_BYTES, MASK_BYTES, TEXT_CORE_S_PER_SAMPLE, TEXT_CORE_S_PER_TOKEN,
                                  WEIGHT_BYTES, Workload, Groups)
from gpusim.workload.transformer import EntryInfo

#: Mean tokens (source + target) per WMT16 en-de training sentence pair as GNMT's tokens/s counts them.
#: Derivation: NVIDIA DLE GNMT README (pytorch-19.01, DGX-1): 1 V100, AMP, 66,050 tokens/s and
#: 264.4 min for 6 epochs (incl. evaluation) give <= 1.75e8 tokens per epoch; 8 GPUs: 387,282 tokens/s,
#: 46.2 min -> 1.79e8. The training set is WMT16 en-de (~4.5M pairs, tensorflow/nmt wmt16_en_de.sh)
#: filtered to <= 50 BPE tokens per side (--max-length-train 50), which we take as ~3.9-4.0M pairs:
#: 1.75e8 / 3.9e6 = ~45 tokens per pair (~22.5 per side; the trainer counts src + tgt - 1). Uncertain
#: by about +-15% (the pair count after filtering is not published in the README).
GNMT_TOKENS_PER_PAIR = 45.0


def build_gnmt(info: EntryInfo, tokens_per_pair: int | float | None = None, hidden: int = 1024,
               vocab: int = 32320, n_layers: int = 4) -> Workload:
    """GNMT v2 as in NVIDIA DLE: shared 32k-BPE embeddings (vocabulary padded to 32320), a 4-layer
    LSTM encoder (first layer bidirectional, residual connections from layer 3), a 4-layer decoder
    whose first layer feeds normalised Bahdanau attention, the context concatenated to the inputs of
    layers 2-4, and a linear classifier; hidden size 1024. A sample is a sentence pair; source and
    target are each half of ``tokens_per_pair``.

    FLOPs per token of an LSTM layer: ``2 * 4H * (I + H)``. Kernels: cuDNN LSTM launches about two
    kernels per time step and layer (recurrent GEMM + cell), the recurrent weights being re-read each
    step (the ``lstm recurrent`` group's ``weight_bytes`` grows with the length)."""
    T = float(tokens_per_pair or GNMT_TOKENS_PER_PAIR)
    ls = lt = T / 2.0
    steps_s, steps_t = math.ceil(ls), math.ceil(lt)
    H, V = float(hidden), float(vocab)
    E = ACT_BYTES
    g = Groups()
    params = V * H                                                   # shared embedding
    tensors = 1  # [issue 18] parameter tensors: the embedding; per LSTM direction weight_ih, weight_hh, bias_ih, bias_hh
    # (input width, directions, tokens, steps) of each LSTM layer
    enc = [(H, 2, ls, steps_s), (2 * H, 1, ls, steps_s)] + [(H, 1, ls, steps_s)] * (n_layers - 2)
    dec = [(H, 1, lt, steps_t)] + [(2 * H, 1, lt, steps_t)] * (n_layers - 1)
    act = 0.0
    layer_acts = []
    for i_w, dirs, toks, steps in enc + dec:
        params += dirs * (4 * H * (i_w + H) + 8 * H)
        tensors += 4 * dirs
        g.add("matmul", "lstm input projections", dirs, dirs * toks * 2 * 4 * H * i_w,
              dirs * E * toks * (i_w + 4 * H), dirs * WEIGHT_BYTES * 4 * H * i_w)
        g.add("matmul", "lstm recurrent", dirs * steps, dirs * toks * 2 * 4 * H * H,
              dirs * E * toks * (H + 4 * H), dirs * steps * WEIGHT_BYTES * 4 * H * H)
        g.add("elementwise", "lstm cells", dirs * steps, 0.0, dirs * E * toks * (4 * H + 2 * H + 2 * H))
        a = dirs * toks * (E * i_w + E * 6 * H) + MASK_BYTES * toks * i_w   # input, gates/cell/hidden, dropout mask
        layer_acts.append(a)
        act += a
    # attention (decoder layer-1 output as query over the encoder outputs)
    params += 2 * H * H + H + 1 + H                                  # W_q, W_k, v, norm scalar, bias
    tensors += 5
    g.add("matmul", "attention projections", 2, 2 * H * H * (ls + lt), E * 2 * H * (ls + lt), WEIGHT_BYTES * 2 * H * H)
    pairs = ls * lt
    g.add("elementwise", "attention additive scores", 3, 0.0, E * 3 * 2 * pairs * H)
    g.add("attention", "attention scores and context", 2, 2 * pairs * H * 2,
          E * (pairs * H + pairs + pairs + ls * H + lt * H))
    g.add("elementwise", "attention softmax, mask", 3, 0.0, E * 2 * 3 * pairs)
    act_att = E * (pairs * H + ls * H + lt * H + 2 * pairs)
    act += act_att
    # classifier and label-smoothed cross-entropy
    params += H * V + V
    tensors += 2                                                     # classifier weight and bias
    g.add("matmul", "classifier", 1, 2 * H * V * lt, E * lt * (H + V), WEIGHT_BYTES * H * V)
    g.add("elementwise", "loss", 4, 0.0, lt * V * (E + 3 * LOSS_BYTES))
    act_head = E * lt * H + LOSS_BYTES * lt * V
    act += act_head
    g.add("embedding", "embeddings", 2, 0.0, E * 2 * H * (ls + lt))
    g.add("elementwise", "dropout, concat, residual", 2 * n_layers + 3 * (n_layers - 1) + 4, 0.0,
          E * H * (ls + lt) * (3 * n_layers + 4))
    act_ckpt = sum(E * toks * i_w for i_w, dirs, toks, _ in enc + dec) + act_att + act_head
    rebuild = functools.partial(_gnmt_rebuild, info)
    pipe = {"input_bytes_per_sample": T * 2.0, "h2d_bytes_per_sample": T * 8.0 + 16.0,
            "preprocess_core_s_per_sample": TEXT_CORE_S_PER_SAMPLE + T * TEXT_CORE_S_PER_TOKEN}
    return Workload(id=info.id, name=info.name, family="rnn", sample_unit="sequence", tokens_per_sample=T,
                    params=params, fwd_flop_per_sample=g.total_flop(), act_bytes_per_sample=act,
                    act_ckpt_bytes_per_sample=act_ckpt, act_block_bytes_per_sample=max(layer_acts),
                    layers=g.build(), sources=info.sources,
                    seq_len_default=int(round(GNMT_TOKENS_PER_PAIR)), notes=info.notes, _rebuild=rebuild,
                    param_tensors=tensors, **pipe)


def _gnmt_rebuild(info: EntryInfo, seq_len: int) -> Workload:
    return build_gnmt(info, seq_len)


