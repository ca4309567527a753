"""CUDA graphs: which of a layer's CPU launches a captured graph replaces (Megatron-Core's ``--cuda-graph-scope``).

A training step run eagerly launches every kernel from one CPU thread (Python, PyTorch's dispatcher, Transformer
Engine's module bookkeeping, the CUDA launch); where the kernels are short the launches set the pace
(:func:`gpusim.model.compute.layer_cpu_s`, :func:`gpusim.model.experts.moe_cpu_s`). A CUDA graph records a fixed
sequence of kernels once and replays it with one launch, so a captured part of the layer costs the CPU one replay
instead of its launches; the GPU runs the same kernels (NVIDIA, "CUDA C++ Programming Guide", section "CUDA
Graphs": "the CPU cost of launching the work is reduced to a single launch").

Megatron-Core captures by scope (NVIDIA/Megatron-LM PR #1917, ``--cuda-graph-impl transformer_engine`` with
``--cuda-graph-scope``; ``full_iteration`` with ``--cuda-graph-impl local``):

- ``attn``: the attention part of every layer (input norm, QKV, core attention, projection, residual);
- ``mlp``: a dense layer's MLP;
- ``moe_router``: an MoE layer up to its router (gating GEMM, score function and top-k, load balancing);
- ``moe_preprocess``: the token dispatcher's preprocessing after the router (tokens per expert, their gather over
  the expert group, the all-to-all's splits, the permutation), "must be used together with moe_router";
- ``moe``: the whole MoE layer, dispatch, experts and combine: it needs static shapes (the recipes pad the experts'
  buffers: ``moe_expert_rank_capacity_factor``, paged stash), so no dispatcher host sync remains;
- ``full_iteration``: the forward and backward passes of every micro-batch, one replay per step: no per-layer
  launches and no host sync (Megatron-Bridge's full-iteration recipes set the same sync-free MoE options:
  ``set_full_iter_cg_configs`` in ``scripts/performance/configs/qwen/qwen3_llm_pretrain.py``, PR #4249).

Which part of a dense layer's launch time each scope takes is read from the module costs behind
``ModelParams.te_layer_cpu_fwd_s`` (Transformer Engine PR #3523, GB200, BF16, microseconds): a layer is two
LayerNormLinear modules (83.48 forward, 397.73 forward + backward: QKV and FC1), two Linear modules (59.19 / 311.30:
projection and FC2) and the attention module, taken as one more Linear. ``attn`` holds QKV, attention and projection
(:data:`ATTN_CPU_SHARE_FWD` = 201.86 / 344.5 = 0.586 of the forward; :data:`ATTN_CPU_SHARE_BWD` =
(1020.33 - 201.86) / 1384.9 = 0.591 of the backward), ``mlp`` the rest.

Each scope the layer replays costs one launch (ModelParams ``launch_cpu_s`` times the host's slowdown) per pass. Graphs
shorten only the CPU's side: where the GPU or the all-to-all sets the pace they gain nothing (Megatron-Bridge's CUDA
graph guide, ``skills/mbridge-perf-cuda-graphs/SKILL.md``: Qwen3 30B A3B on 16 H100, BF16, all-to-all dispatcher,
scoped attn + moe_router + moe_preprocess graphs replayed at 42.00 s per step against 41.36 s eager). The graphs' own
memory (static input and output buffers, a private pool; the same guide: "a few GB" for scoped graphs, up to 1.5-2x
the peak for full-iteration ones) is not modelled, and ``gpusim predict`` says so.
"""

from __future__ import annotations

import numpy as np

#: scope bits of the row field ``cuda_graphs`` (a float bitmask: a sweep's rows carry it as any other field)
ATTN, MLP, MOE_ROUTER, MOE_PREPROCESS, MOE, FULL = 1, 2, 4, 8, 16, 32
#: Megatron-Core's scope names -> bits
SCOPE_BITS = {"attn": ATTN, "mlp": MLP, "moe_router": MOE_ROUTER, "moe_preprocess": MOE_PREPROCESS, "moe": MOE,
              "full_iteration": FULL}

#: Transformer Engine's module CPU times (PR #3523, GB200 BF16, us): LayerNormLinear and Linear, forward and
#: forward + backward (the figures of ModelParams.te_layer_cpu_fwd_s / _bwd_s)
_LNL_F, _LNL_FB, _LIN_F, _LIN_FB = 83.48, 397.73, 59.19, 311.30
_LAYER_F = 2.0 * _LNL_F + 3.0 * _LIN_F
_LAYER_B = 2.0 * _LNL_FB + 3.0 * _LIN_FB - _LAYER_F
#: share of a dense layer's forward / backward CPU launch time in its attention part (QKV LayerNormLinear, the
#: attention module, the projection Linear); the MLP part (FC1 LayerNormLinear, FC2 Linear) holds the rest
ATTN_CPU_SHARE_FWD = (_LNL_F + 2.0 * _LIN_F) / _LAYER_F
ATTN_CPU_SHARE_BWD = ((_LNL_FB + 2.0 * _LIN_FB) - (_LNL_F + 2.0 * _LIN_F)) / _LAYER_B

#: operations of gpusim.model.experts.MOE_FIXED_FWD_KERNELS (33) and MOE_FIXED_BWD_KERNELS (21) each MoE scope
#: captures: ``moe_router`` the router's GEMM, score function + top-k and the five load-balancing ones (7; their
#: gradients, the router GEMM's backward with its casts and the logits' gradient sum, 12); ``moe_preprocess`` the
#: tokens-per-expert sums, splits and copy, their gather and the four-kernel permutation (11; in the backward only the
#: permutation's gradient, 1). The four device-to-host copies that follow them stay eager. [stop 51] from the count in
#: gpusim.model.experts (until then 5 / 5 and 7 / 2)
ROUTER_OPS_FWD, ROUTER_OPS_BWD = 7.0, 12.0
PREPROCESS_OPS_FWD, PREPROCESS_OPS_BWD = 11.0, 1.0


def scope_mask(scopes) -> float:
    """The bitmask of Megatron-Core scope names (``()`` -> 0: eager)."""
    return float(sum(SCOPE_BITS[s] for s in set(scopes or ())))


def _has(mask, bit):
    return (np.asarray(mask, dtype=np.int64) & bit) > 0


def dense_cpu_keep(mask, moe_frac):
    """``(forward, backward, replays)`` of a layer's dense modules (attention part and MLP part of
    ``layer_cpu_s``) under the scopes ``mask``, averaged over the layers (``moe_frac`` of them MoE layers, whose MLP
    part is the experts' grouped linear layers, captured by ``moe`` only): the share of the CPU launch time left
    eager, and the graph replays per layer and pass that replace the rest. Hand-worked: ``attn`` alone on a dense
    model keeps 1 - 0.586 = 0.414 of the forward, 0.409 of the backward, one replay."""
    m = np.asarray(mask, dtype=np.float64)
    full = _has(m, FULL)
    mf = np.asarray(moe_frac, dtype=np.float64)
    attn = _has(m, ATTN).astype(np.float64)
    mlp = _has(m, MLP) * (1.0 - mf) + _has(m, MOE) * mf  # the MLP part captured: dense layers' and MoE layers'
    keep_f = 1.0 - attn * ATTN_CPU_SHARE_FWD - mlp * (1.0 - ATTN_CPU_SHARE_FWD)
    keep_b = 1.0 - attn * ATTN_CPU_SHARE_BWD - mlp * (1.0 - ATTN_CPU_SHARE_BWD)
    replays = attn + mlp
    zero = np.zeros(np.broadcast(m, mf).shape)
    return (np.where(full, zero, keep_f), np.where(full, zero, keep_b), np.where(full, zero, replays))


def moe_cpu_ops(fixed_fwd, fixed_bwd, per_expert_fwd, per_expert_bwd, presync, mask):
    """Eager operations of one MoE layer's forward, its backward and its forward before the dispatcher's host sync,
    under the scopes ``mask``, with one replay per captured group per pass (``moe_router`` and ``moe_preprocess``
    replay as one graph, adjacent in the layer): ``(fwd_ops, bwd_ops, presync_ops)``. ``fixed_fwd`` / ``fixed_bwd``
    are :data:`gpusim.model.experts.MOE_FIXED_FWD_KERNELS` / ``MOE_FIXED_BWD_KERNELS``, ``per_expert_*`` the experts'
    GEMMs and quantisations, ``presync`` the operations before the sync. ``moe`` and ``full_iteration`` capture
    everything (no eager operation; ``moe`` replays once)."""
    m = np.asarray(mask, dtype=np.float64)
    whole = _has(m, MOE) | _has(m, FULL)
    r = _has(m, MOE_ROUTER).astype(np.float64)
    pre = _has(m, MOE_PREPROCESS).astype(np.float64)
    group = np.maximum(r, pre)
    f = fixed_fwd - r * ROUTER_OPS_FWD - pre * PREPROCESS_OPS_FWD + group + per_expert_fwd
    b = fixed_bwd - r * ROUTER_OPS_BWD - pre * PREPROCESS_OPS_BWD + group + per_expert_bwd
    ps = presync - r * ROUTER_OPS_FWD - pre * PREPROCESS_OPS_FWD + group
    moe_replay = _has(m, MOE) * 1.0
    return np.where(whole, moe_replay, f), np.where(whole, moe_replay, b), np.where(whole, 0.0, ps)


def sync_free(mask):
    """Whether the scopes leave the MoE dispatcher without its host sync (``moe``, ``full_iteration``: static shapes)."""
    m = np.asarray(mask, dtype=np.float64)
    return _has(m, MOE) | _has(m, FULL)
