"""Composition: one optimizer step of data-parallel training, from its parts.

The step time generalises ``max(compute, comm) + sync`` (the first seed article) by the fraction of the
communication the schedule can overlap with computation::

    step = compute + exposed_comm + data_wait + optimizer + sync + overhead
    exposed_comm = comm - hidden,   hidden <= overlap_frac * (the compute it can run under)

With full overlap and comm < compute this is ``compute + small``; with no overlap it is
``compute + comm``; when communication dominates it tends to ``comm``. Every part is reported, and the
parts sum to the step (a test checks it).

Strategies (see :mod:`gpusim.strategy`):

- **DDP** all-reduces gradients in buckets during the backward pass of the last micro-batch (earlier
  micro-batches of gradient accumulation run under ``no_sync``; [issue 18] a loop that never enters it,
  Strategy ``sync_every_micro_batch``, reduces in every micro-batch's backward); the last bucket is always exposed
  (Li et al., "PyTorch Distributed: Experiences on Accelerating Data Parallel Training", VLDB 2020), and
  copying gradients into the buckets and back costs memory traffic (counted with the communication).
- **ZeRO-1** communicates like DDP (reduce-scatter + all-gather = one all-reduce's volume).
- **ZeRO-2 / FSDP SHARD_GRAD_OP** reduce-scatter gradients every micro-batch during backward and
  all-gather the updated parameters once per step, overlapped with the first forward.
- **ZeRO-3 / FSDP FULL_SHARD** all-gather parameters in forward and again in backward and reduce-scatter
  gradients: 1.5x DDP's volume (Rajbhandari et al., SC'20, section 7.2.2); only the first unit's gather is
  certain to be exposed.
- **FSDP HYBRID_SHARD** does the FULL_SHARD traffic inside a node and all-reduces each GPU's shard of the
  gradients across nodes over its share of the NICs.
- **DataParallel** (one process): every micro-batch replicates the weights from GPU 0, scatters inputs
  from it, and reduces gradients to it after backward, with no overlap; one Python process dispatches
  every replica's kernels, serialised in part by the GIL; the optimizer runs on GPU 0 alone.
"""

from __future__ import annotations

import functools
from dataclasses import MISSING, dataclass, field, fields

import numpy as np

from gpusim.model import comm as C
from gpusim.model import dualpipe as EPO
from gpusim.model import fp8 as FP8
from gpusim.model.compute import micro_batch_compute, model_flop_per_sample, optimizer_step_s, train_multiplier
from gpusim.model.data import data_times_s
from gpusim.model.distinct import Distinct
from gpusim.model.llm import dp_group_placement, expert_dp_group_placement, llm_terms, stage_state_bytes
from gpusim.model.memory import (fits_in_memory, headroom_bytes, max_micro_batch, memory_per_gpu_bytes,
                                 n_blocks, nccl_communicators)
from gpusim.model.sync import straggler_s
from gpusim.params import ModelParams

DP, DDP, ZERO1, ZERO2, ZERO3, HYBRID = 0, 1, 2, 3, 4, 5
SHARD_STAGE = np.array([0, 0, 1, 2, 3, 3])

BOTTLENECKS = ("compute", "cpu-dispatch", "communication", "data-loading", "optimizer", "stragglers", "overhead",
               "memory", "tp-communication", "pipeline-bubble", "pipeline-p2p", "cp-communication",
               "ep-communication")
BREAKDOWN_KEYS = ("compute_s", "comm_exposed_s", "data_wait_s", "optimizer_s", "sync_s", "overhead_s")
#: The one bottleneck rule (used by every caller; diagnose.py's advice follows from it): a part of the step other
#: than compute (exposed communication, data wait, optimizer, stragglers, overhead) is the bottleneck when it
#: is the largest such part and takes at least this share of the step: removing it would make the step at
#: least 1 / (1 - 0.25) = 1.33x faster (Amdahl's law). Otherwise the step is compute-bound (``cpu-dispatch``
#: when the CPU's kernel launches set the pace); a configuration that does not fit is ``memory``.
BOTTLENECK_SHARE_FRAC = 0.25


def bottleneck_codes(step_s, losses, dispatch_bound, fits):
    """Codes into :data:`BOTTLENECKS` by the rule of :data:`BOTTLENECK_SHARE_FRAC`. ``losses``: the non-compute
    parts as ``(code, seconds)`` in :data:`BOTTLENECKS` order (ties go to the first)."""
    shape = np.shape(step_s)
    largest = np.zeros(shape, dtype=np.float64)
    code = np.zeros(shape, dtype=np.int64)
    for c, part in losses:
        np.copyto(code, c, where=np.asarray(part) > largest)  # (in place: this runs on every row of a sweep)
        np.maximum(largest, part, out=largest)
    out = np.where(largest >= BOTTLENECK_SHARE_FRAC * np.asarray(step_s), code, np.asarray(dispatch_bound, dtype=np.int64))
    np.copyto(out, 7, where=~np.asarray(fits, dtype=bool))
    return out


#: the breakdown of an LLM layout: the data-parallel part is named as such, and the terms of tensor and pipeline
#: parallelism are added (they are zero, and left out, for a data-parallel scenario)
LLM_BREAKDOWN_KEYS = ("compute_s", "tp_comm_exposed_s", "cp_comm_exposed_s", "ep_comm_exposed_s", "pp_bubble_s", "pp_p2p_exposed_s", "dp_comm_exposed_s",
                      "data_wait_s", "optimizer_s", "sync_s", "overhead_s")


def _one(v=1.0):
    return field(default_factory=lambda: np.asarray(v))


# No generated __eq__ (rows of arrays do not compare to one bool), __repr__ or __init__: for ~150 fields the generated
# code costs ~3.5 ms of every CLI start to compile (issue 20); __init__ below does the same job
@dataclass(frozen=True, eq=False, init=False, repr=False)
class StepInputs:
    """Everything the model needs, as broadcastable float64/int/bool arrays (SI units).

    Per-scenario arrays have shape ``(n,)`` (or ``(1,)``); per-layer-group arrays ``(n, K)`` or ``(1, K)``.
    Built by :func:`gpusim.simulation.build_inputs` for one scenario and by :mod:`gpusim.sweep` for grids.
    """

    # hardware
    peak_flop_per_s: np.ndarray
    mem_bytes_per_s: np.ndarray
    mem_capacity_bytes: np.ndarray
    n_gpus: np.ndarray
    n_nodes: np.ndarray
    intra_busbw_bytes_per_s: np.ndarray
    intra_hop_s: np.ndarray
    inter_busbw_bytes_per_s: np.ndarray
    inter_hop_s: np.ndarray
    nvls: np.ndarray
    pcie_bytes_per_s: np.ndarray
    cores_per_gpu: np.ndarray
    storage_bytes_per_s_per_gpu: np.ndarray
    cpu_optimizer_bytes_per_s: np.ndarray
    # workload
    params: np.ndarray
    fwd_flop_per_sample: np.ndarray
    act_bytes_per_sample: np.ndarray
    act_ckpt_bytes_per_sample: np.ndarray
    act_block_bytes_per_sample: np.ndarray
    input_bytes_per_sample: np.ndarray
    h2d_bytes_per_sample: np.ndarray
    preprocess_core_s_per_sample: np.ndarray
    group_flop_per_sample: np.ndarray
    group_bytes_per_sample: np.ndarray
    group_weight_bytes: np.ndarray
    group_count: np.ndarray
    group_eff_frac: np.ndarray
    # strategy
    strategy: np.ndarray
    micro_batch: np.ndarray
    accum: np.ndarray
    checkpointing: np.ndarray
    cpu_offload: np.ndarray
    bucket_bytes: np.ndarray
    num_workers: np.ndarray
    pin_memory: np.ndarray
    act_scale: np.ndarray
    weight_bytes_per_param: np.ndarray
    grad_bytes_per_param: np.ndarray
    gather_bytes_per_param: np.ndarray
    master_bytes_per_param: np.ndarray
    opt_state_bytes_per_param: np.ndarray
    opt_traffic_bytes_per_param: np.ndarray
    # measured or what-if
    compute_override_s: np.ndarray  # NaN: model the compute; else the measured one-GPU micro-batch time
    slowest_speed_frac: np.ndarray
    # LLM layout (gpusim.layout) and the transformer's shape; the defaults are the data-parallel case
    # NCCL's per-GPU cap on the LL protocol's bandwidth (llMaxBws)
    ll_max_busbw_bytes_per_s: np.ndarray = _one(np.inf)
    # [issue 17] a data-parallel row's layer-group efficiencies times this (gpusim.rows.matmul_cap_frac): never above
    # the GPU's own sustained matmul rate
    matmul_cap_frac: np.ndarray = _one(1.0)
    # [issue 18] kernels of one optimizer step (the for-loop optimizer's per-tensor launches); NaN: ModelParams
    # optimizer_kernels (foreach / fused)
    opt_kernels: np.ndarray = _one(np.nan)
    # [issue 17] GEMM FLOPs of one optimizer step per parameter (Muon's Newton-Schulz iterations: gpusim.optimizers)
    opt_flop_per_param: np.ndarray = _one(0.0)
    # [issue 17] LLM rows whose sharded optimizer all-reduces the gradients instead of reduce-scattering them
    # (Megatron-Core's layer-wise distributed Muon, dist_muon: _distopt_comm)
    grad_allreduce: np.ndarray = _one(False)
    ll128: np.ndarray = _one(True)  # NCCL runs the LL128 protocol here (NVLink inside the node, a validated GPU)
    host_cpu: np.ndarray = _one(C.HOST_INTEL)  # [issue 18] the nodes' CPU (gpusim.model.comm.HOST_CPUS): NCCL's net overhead
    llm: np.ndarray = _one(False)  # rows computed per GEMM shape with tensor/pipeline parallelism
    # [issue 17] FP8 weight transposes re-made each micro-batch (gpusim.model.fp8.retranspose_bytes_per_param)
    fp8_retranspose_bytes: np.ndarray = _one(0.0)
    # [stop 58] Megatron-Core --ddp-bucket-size (parameters per bucket); NaN: its default (megatron_bucket_params)
    ddp_bucket_params: np.ndarray = _one(np.nan)
    # [stop 57] the first / last transformer layers kept in bf16 under a quantised recipe (llm.bf16_stage_fracs)
    bf16_layers_start: np.ndarray = _one(0.0)
    bf16_layers_end: np.ndarray = _one(0.0)
    tp: np.ndarray = _one()
    pp: np.ndarray = _one()
    vp: np.ndarray = _one()
    sp: np.ndarray = _one(False)
    recompute: np.ndarray = _one(0)  # gpusim.strategy.RECOMPUTE_CODES
    dp_overlap: np.ndarray = _one()  # 1: gradient reduction may overlap the backward pass; 0: after it
    sync_every_micro: np.ndarray = _one(False)  # [issue 18] DDP / ZeRO-1 all-reduce every micro-batch (no no_sync)
    n_layers: np.ndarray = _one(0.0)
    d_model: np.ndarray = _one(0.0)
    n_heads: np.ndarray = _one()
    q_dim: np.ndarray = _one(0.0)
    kv_dim: np.ndarray = _one(0.0)
    ff_dim: np.ndarray = _one(0.0)
    ffn_mats: np.ndarray = _one(2.0)
    vocab: np.ndarray = _one(0.0)
    seq_len: np.ndarray = _one(0.0)
    dropout: np.ndarray = _one(True)
    flash: np.ndarray = _one(False)
    attn_fwd_slow: np.ndarray = _one(1.0)  # [issue 18] the attention kernel's time / the native fused kernel's
    attn_fa2: np.ndarray = _one(False)  # [issue 17] a FlashAttention-2-style kernel (llm.head_dim_rate_frac)
    attn_blackwell: np.ndarray = _one(False)  # [issue 17] Blackwell's native kernel (llm.causal_rate_frac)
    attn_bwd_slow: np.ndarray = _one(1.0)
    attn_tile_frac: np.ndarray = _one(1.0)  # [issue 17] sliding-window / chunked attention: llm.attention_tile_frac
    attn_win_share: np.ndarray = _one(0.0)  # [issue 17] the windowed layers' share, their tiles and query blocks
    attn_win_tiles_frac: np.ndarray = _one(1.0)  # against a causal call's (llm.window_time_frac)
    attn_qblock_per_tile: np.ndarray = _one(0.0)
    attn_key_frac: np.ndarray = _one(1.0)  # [issue 17] keys per query the MFU counts / seq_len (rows.window_fields)
    rope: np.ndarray = _one(False)
    qk_norm: np.ndarray = _one(False)  # [issue 17] per-head q/k RMSNorms (Qwen3, OLMo 2, Gemma 3): llm.qk_norm_bytes
    untied: np.ndarray = _one(False)
    layer_params: np.ndarray = _one(0.0)
    embed_params: np.ndarray = _one(0.0)
    ceiling_flop_per_s: np.ndarray = _one(np.nan)  # measured best-shape matmul rate; NaN: a fraction of the peak
    sm_count: np.ndarray = _one()
    grad_accum_fusion: np.ndarray = _one(True)  # weight gradients accumulated in the GEMM (Megatron's default)
    ce_code: np.ndarray = _one(0.0)  # [issue 17] the loss's cross entropy: llm.CE_CODES (0 te, 1 native, 2 unfused)
    gemm_serial_epilogue: np.ndarray = _one(False)  # the GPU's GEMM kernels run the epilogue after the main loop
    tp_async_bwd: np.ndarray = _one(True)  # backward TP collectives beside the gradient GEMMs (Megatron's default)
    tp_comm_overlap: np.ndarray = _one(False)  # [issue 17] TE userbuffers: TP collectives split beside their GEMMs
    pp_p2p_overlap: np.ndarray = _one(np.nan)  # [issue 17] overlap_p2p_comm: 1 on, 0 off, NaN Megatron's default
    # [issue 12] context parallelism (gpusim.model.context) and an uneven pipeline split's model layers
    cp: np.ndarray = _one()
    cp_kind: np.ndarray = _one(0)  # gpusim.model.context.CP_KINDS
    model_layers: np.ndarray = _one(np.nan)  # NaN: n_layers
    mtp_layers: np.ndarray = _one(0.0)  # [issue 17] multi-token prediction modules on the last stage (llm.stage_layers)
    mtp_fwd_flop: np.ndarray = _one(0.0)  # [issue 17] their forward model FLOPs per sample
    mtp_param_modules: np.ndarray = _one(0.0)  # [issue 17] those with weights of their own (mtp_shared: 1)
    nvlink_domain_gpus: np.ndarray = _one(np.nan)  # NaN: the GPUs of a node
    # [issue 12] mixture of experts (gpusim.model.experts); moe_frac 0: a dense model
    ep: np.ndarray = _one()
    expert_tp: np.ndarray = _one()
    moe_frac: np.ndarray = _one(0.0)  # fraction of the layers with routed experts
    # [issue 17] hybrid Mamba-Transformer models (gpusim.model.hybrid): shares of the layers with attention, an FFN
    # and a Mamba mixer (a dense transformer: 1, 1, 0) and the mixer's shape
    attn_frac: np.ndarray = _one(1.0)
    ffn_frac: np.ndarray = _one(1.0)
    mamba_frac: np.ndarray = _one(0.0)
    mamba_version: np.ndarray = _one(2.0)
    mamba_d_inner: np.ndarray = _one(0.0)
    mamba_state: np.ndarray = _one(0.0)
    mamba_heads: np.ndarray = _one(1.0)
    mamba_groups: np.ndarray = _one(1.0)
    mamba_conv: np.ndarray = _one(4.0)
    mamba_chunk: np.ndarray = _one(256.0)
    mamba_dt_rank: np.ndarray = _one(0.0)
    mamba_flop_per_token: np.ndarray = _one(0.0)
    n_experts: np.ndarray = _one(0.0)
    top_k: np.ndarray = _one(0.0)
    expert_ff_dim: np.ndarray = _one(0.0)
    moe_latent_dim: np.ndarray = _one(0.0)  # [stop 48] LatentMoE's expert width (0: d_model)
    shared_ff_dim: np.ndarray = _one(0.0)
    moe_capacity: np.ndarray = _one(np.nan)  # capacity factor (experts padded to it); NaN: dropless
    moe_imbalance_frac: np.ndarray = _one(np.nan)  # busiest EP rank / mean - 1; NaN: from routing statistics
    moe_expert_skew_frac: np.ndarray = _one(np.nan)  # [issue 17] CV of the experts' token shares; NaN: balanced router
    # [issue 17] the routed experts carry linear biases / clamp their GLU inputs (gpusim.model.experts.expert_extra_bytes)
    moe_expert_bias: np.ndarray = _one(False)
    moe_glu_clamp: np.ndarray = _one(False)
    moe_router_padding: np.ndarray = _one(False)  # [issue 17] FP8 token padding in the router (experts.fp8_padding_bytes)
    moe_fused_mlp: np.ndarray = _one(False)  # [issue 17] TE's CuTe DSL fused grouped MLP (experts.fused_mlp_terms)
    # [issue 12] the all-to-all's schedule (gpusim.model.dualpipe.EP_OVERLAPS), dispatcher
    # (gpusim.model.experts.DISPATCHERS), node-limited routing (topk_group of n_group groups; inf: no limit) and
    # FP8 dispatch
    ep_overlap: np.ndarray = _one(0)
    moe_dispatcher: np.ndarray = _one(0)
    moe_topk_groups: np.ndarray = _one(np.inf)
    moe_n_groups: np.ndarray = _one(1.0)
    ep_fp8_dispatch: np.ndarray = _one(False)
    # [issue 12] FP8 (gpusim.model.fp8): recipe code, the FP8 matmul ceiling (NaN: a fraction of the peak) and the
    # 16-bit peak the rest of the model runs at (NaN: peak_flop_per_s)
    fp8_mode: np.ndarray = _one(0)
    fp8_ceiling_flop_per_s: np.ndarray = _one(np.nan)
    peak16_flop_per_s: np.ndarray = _one(np.nan)
    # [issue 12] memory-saving mechanisms (gpusim.model.llm): modules recomputed in the backward pass, the FP8
    # activation cache, and MLA's latent widths and up-projection output widths (0: no MLA)
    recompute_norms: np.ndarray = _one(False)
    recompute_mla_up: np.ndarray = _one(False)
    recompute_moe_act: np.ndarray = _one(False)
    recompute_mlp: np.ndarray = _one(False)  # [issue 17] Megatron-Core's ``mlp`` recompute module (dense layers)
    recompute_moe: np.ndarray = _one(False)  # [stop 52] Megatron-Core's ``moe`` recompute module (MoE layers)
    fp8_act: np.ndarray = _one(False)
    act_offload_layers: np.ndarray = _one(0.0)  # [issue 17] layers per stage whose activations go to the host
    mla_q_lora: np.ndarray = _one(0.0)
    mla_kv_lora: np.ndarray = _one(0.0)
    mla_kv_up: np.ndarray = _one(0.0)
    mla_kv_a: np.ndarray = _one(0.0)  # MLA's key/value down-projection width (latent + shared rotary key)
    v_dim: np.ndarray = _one(np.nan)  # value width over heads where it differs from the query's (MLA); NaN: q_dim
    # [issue 17] memory a fit must leave free (--memory-headroom): bytes and a fraction of the GPU's memory; NaN: the
    # ModelParams defaults (gpusim.model.memory.headroom_bytes)
    mem_headroom_bytes: np.ndarray = _one(np.nan)
    mem_headroom_frac: np.ndarray = _one(np.nan)
    host_cpu_mult: np.ndarray = _one(1.0)  # [issue 17] the host CPU's launch time / an x86 DGX host's (Grace: > 1)
    host_python_mult: np.ndarray = _one(1.0)  # [stop 52] its Python-level bookkeeping time / an x86 host's
    cuda_graphs: np.ndarray = _one(0.0)  # [issue 17] CUDA-graph scopes, a bitmask (gpusim.model.graphs); 0: eager

    def __init__(self, **values):
        """Keyword arguments only: each field's array; a field left out takes its default (the required ones, the
        hardware and workload rows, raise TypeError when missing, as do unknown names)."""
        factories = _input_factories()
        unknown = values.keys() - factories.keys()
        if unknown:
            raise TypeError(f"StepInputs got unknown fields: {', '.join(sorted(unknown))}")
        set_field = object.__setattr__
        for name, make in factories.items():
            if name in values:
                set_field(self, name, values[name])
            elif make is None:
                raise TypeError(f"StepInputs needs the field {name!r}")
            else:
                set_field(self, name, make())

    def __repr__(self) -> str:
        rows = np.shape(self.peak_flop_per_s)[0] if np.ndim(self.peak_flop_per_s) else 1
        return f"StepInputs({len(_input_factories())} fields, {rows} rows)"

    @property
    def gpus_per_node(self) -> np.ndarray:
        return self.n_gpus / np.maximum(self.n_nodes, 1)

    def replace(self, **changes) -> StepInputs:
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        d.update({k: np.asarray(v) for k, v in changes.items()})
        return StepInputs(**d)

    def take(self, idx) -> StepInputs:
        """Rows ``idx`` of every per-scenario array (group arrays with one row are kept as they are)."""
        out = {}
        for f in fields(self):
            a = np.asarray(getattr(self, f.name))
            out[f.name] = a if a.ndim == 0 or a.shape[0] == 1 else a[idx]
        return StepInputs(**out)


@functools.cache
def _input_factories() -> dict:
    """StepInputs field name -> its default factory (None: required), in field order."""
    return {f.name: (None if f.default_factory is MISSING else f.default_factory) for f in fields(StepInputs)}


def _overlap(comm_s, unhideable_s, window_s, overlap_frac):
    """Split ``comm_s`` into (exposed, hidden): ``unhideable_s`` is always exposed; the rest hides under up to
    ``overlap_frac * window_s`` of compute."""
    hideable = np.maximum(comm_s - unhideable_s, 0.0)
    hidden = np.minimum(hideable, overlap_frac * window_s)
    return comm_s - hidden, hidden


def _rows(v, idx, rows):
    """Rows ``idx`` of a per-scenario array (scalars and broadcast rows pass through)."""
    a = np.asarray(v)
    if a.ndim == 0 or a.shape[0] != rows:
        return a
    return a[idx]  # a slice gives a view, an index array a copy


def _strategy_comm(code: int, c: dict, p: ModelParams, dist: Distinct | None = None):
    """(exposed, hidden, all-reduce) communication seconds per optimizer step for one strategy's rows (``dist``: the
    evaluation's grouping, whose column codes it shares where its rows are all the block's)."""

    tuning = C.tuning_from_params(p)
    dist = Distinct() if dist is None else dist

    def coll_rows(kind, size, ranks, nn, intra, intra_hop, inter, inter_hop, nvls, ll_max, ll128, host_cpu):
        return C.collective_min_time_s(
            kind, size, ranks, nn, intra, intra_hop, inter, inter_hop, nvls,
            base_latency_s=p.coll_base_latency_s, nvls_gain_frac=p.nvls_gain_frac, nvls_latency_s=p.nvls_latency_s,
            tree_busbw_frac=p.tree_busbw_frac, ll_max_busbw_bytes_per_s=ll_max, ll128=ll128, tuning=tuning,
            host_cpu=host_cpu)

    def coll(kind, size, ranks=None, nn=None, inter=None):
        """One collective's time, evaluated once per distinct message size, group and fabric."""
        return dist(lambda *a: coll_rows(kind, *a),
                    [size, c["n"] if ranks is None else ranks, c["nodes"] if nn is None else nn, c["intra"],
                     c["intra_hop"], c["inter"] if inter is None else inter, c["inter_hop"], c["nvls"], c["ll_max"], c["ll128"],
                     c["host_cpu"]])

    k, fwd_s, bwd_s, blocks, ov = c["k"], c["fwd_s"], c["bwd_s"], c["blocks"], p.overlap_frac
    G_exp = np.asarray(c.get("G_exp", 0.0), dtype=np.float64)
    W_exp = np.asarray(c.get("W_exp", 0.0), dtype=np.float64)
    edp_n = np.asarray(c.get("edp_n", 1.0), dtype=np.float64)
    experts_on = (G_exp > 0) & (edp_n > 1)
    any_experts = bool(np.any(experts_on))

    def groups(fn):
        """[issue 17] ``fn(G, W, ranks, nodes, inter)`` (a tuple of seconds) summed over the groups that reduce the
        gradients: the dense dp group for everything but the routed experts, and the expert-data-parallel group
        (``edp_n`` ranks in ``edp_nodes`` domains at ``edp_inter``, :func:`gpusim.model.llm.expert_dp_group_placement`)
        for the experts' share ``G_exp`` / ``W_exp``. Megatron-Core's ``DistributedDataParallel`` keeps the expert
        parameters in buffers of their own (``expert_parallel_buffers``) with or without the distributed optimizer, and
        Megatron-FSDP shards them over the expert-data-parallel group; a dense model (``G_exp = 0``), and experts that
        span the whole stage (``edp_n = 1``: nothing to reduce), take the dense group alone."""
        dense = fn(c["G"] - G_exp, c["W"] - W_exp, c["n"], c["nodes"], c["inter"])
        if not any_experts:
            return dense
        ex = fn(G_exp, W_exp, edp_n, c["edp_nodes"], c["edp_inter"])
        return tuple(d + np.where(experts_on, e, 0.0) for d, e in zip(dense, ex))

    if code == ZERO1 and np.any(c["llm"]):  # [issue 17] Megatron's distributed optimizer on the LLM layout rows
        exp_d, hid_d, tot_d = _distopt_comm(c, coll_rows, dist, ov)
        if np.all(c["llm"]):
            return exp_d, hid_d, tot_d
        total, last = C.bucketed_time_s(c["G"], c["bucket"], lambda x: coll(C.ALL_REDUCE, x))
        exp, hid = _overlap(total, last, bwd_s, ov)
        syncs = c.get("syncs", 1.0)  # [issue 18] all-reduces per step (a hand-built context: one)
        exp, hid, total = exp * syncs, hid * syncs, total * syncs
        return (np.where(c["llm"], exp_d, exp), np.where(c["llm"], hid_d, hid), np.where(c["llm"], tot_d, total))
    if code in (DDP, ZERO1):
        # bucketed all-reduce once per optimizer step, under the last micro-batch's backward (an MoE layout's expert
        # buckets over their own group: groups())
        total, last = groups(lambda G, W, r, nn, bw: C.bucketed_time_s(
            G, c["bucket"], lambda x: coll(C.ALL_REDUCE, x, r, nn, bw)))
        exp, hid = _overlap(total, last, bwd_s, ov)
        if code == DDP:
            # DDP copies every gradient into its bucket and the reduced bucket back (gradient_as_bucket_view=False,
            # the PyTorch default): 4 x G bytes of memory traffic on the compute stream, once per step
            exp = exp + 4.0 * c["G"] / c["mem_rate"]
        # [issue 18] a loop that never enters no_sync() reduces in every micro-batch's backward, the same way each time
        syncs = c.get("syncs", 1.0)  # (a hand-built context: one)
        return exp * syncs, hid * syncs, total * syncs
    if code == ZERO2:
        # reduce-scatter per micro-batch under backward + all-gather of parameters once, under forward
        rs_total, rs_last, ag_total = groups(lambda G, W, r, nn, bw: (
            *C.bucketed_time_s(G, c["bucket"], lambda x: coll(C.REDUCE_SCATTER, x, r, nn, bw)),
            coll(C.ALL_GATHER, W, r, nn, bw)))
        rs_exp, rs_hid = _overlap(rs_total, rs_last, bwd_s, ov)
        ag_exp, ag_hid = _overlap(ag_total, ag_total / blocks, fwd_s, ov)
        return k * rs_exp + ag_exp, k * rs_hid + ag_hid, 0.0 * k
    if code == ZERO3:
        # per micro-batch: all-gather in forward, again in backward, reduce-scatter in backward, one unit at a time
        unit_ag, unit_rs = groups(lambda G, W, r, nn, bw: (coll(C.ALL_GATHER, W / blocks, r, nn, bw),
                                                          coll(C.REDUCE_SCATTER, G / blocks, r, nn, bw)))
        ag_total = blocks * unit_ag
        rs_total = blocks * unit_rs
        f_exp, f_hid = _overlap(ag_total, unit_ag, fwd_s, ov)
        b_exp, b_hid = _overlap(ag_total + rs_total, rs_total / blocks, bwd_s, ov)
        return k * (f_exp + b_exp), k * (f_hid + b_hid), 0.0 * k
    if code == HYBRID:
        # full sharding inside the node (g ranks, one node) + all-reduce of each GPU's gradient shard across
        # nodes on its share of the NICs (one rank per node in that collective)
        g, nodes = c["g"], c["nodes"]
        unit_ag = coll(C.ALL_GATHER, c["W"] / blocks, g, 1.0)
        ag_total = blocks * unit_ag
        rs_total = blocks * coll(C.REDUCE_SCATTER, c["G"] / blocks, g, 1.0)
        ar = coll(C.ALL_REDUCE, c["G"] / g, nodes, nodes, inter=c["inter"] / g)
        f_exp, f_hid = _overlap(ag_total, unit_ag, fwd_s, ov)
        b_exp, b_hid = _overlap(ag_total + rs_total + ar, ar / blocks, bwd_s, ov)
        return k * (f_exp + b_exp), k * (f_hid + b_hid), ar
    if code == DP:
        # per micro-batch, nothing overlapped: replicate weights from GPU 0, scatter inputs, reduce grads to GPU 0
        bcast = coll(C.BROADCAST, c["weights"])
        scatter = (c["n"] - 1.0) * c["b"] * c["h2d"] / c["intra"]
        reduce = coll(C.REDUCE, c["G"])
        return k * (bcast + np.where(c["n"] > 1, scatter, 0.0) + reduce), 0.0 * k, reduce
    raise ValueError(f"unknown strategy code {code}")


#: [stop 51] Megatron-Core's default gradient bucket: at least 40 M parameters, 1 M per data-parallel rank beyond 40
#: (NVIDIA/Megatron-LM ``megatron/core/distributed/distributed_data_parallel.py``, ``DistributedDataParallel.__init__``:
#: ``bucket_size = max(40000000, 1000000 * parallel_state.get_data_parallel_world_size())``, "If using very large
#: dp_sizes, make buckets larger to ensure that chunks used in NCCL ring-reduce implementations are large enough to
#: remain bandwidth-bound rather than latency-bound")
MEGATRON_BUCKET_MIN_PARAMS, MEGATRON_BUCKET_PARAMS_PER_DP_RANK = 40e6, 1e6


def megatron_bucket_params(dp, overlap, stated=np.nan):
    """[stop 51] Parameters in one of Megatron-Core's gradient (and, with the distributed optimizer, parameter
    all-gather) buckets for a data-parallel size ``dp`` (without context parallelism: ``get_data_parallel_world_size()``
    's default), :data:`MEGATRON_BUCKET_MIN_PARAMS` and :data:`MEGATRON_BUCKET_PARAMS_PER_DP_RANK`; one bucket for
    the whole buffer (``inf``) where ``overlap`` (``--overlap-grad-reduce``) is off ("Set bucket_size to infinity if
    overlap_grad_reduce is False"). [stop 58] ``stated``: the run's own ``--ddp-bucket-size`` (Strategy
    ``ddp_bucket_params``), which replaces the default where it is finite (``DistributedDataParallelConfig.bucket_size``
    is only filled in when None), still one bucket without the overlap. Hand-worked: dp 4 -> 40 M; dp 256 -> 256 M
    (a 1.02 GB fp32 gradient bucket); stated 768 M at dp 64 -> 768 M."""
    b = np.maximum(MEGATRON_BUCKET_MIN_PARAMS, MEGATRON_BUCKET_PARAMS_PER_DP_RANK * np.asarray(dp, dtype=np.float64))
    st = np.asarray(stated, dtype=np.float64)
    b = np.where(np.isfinite(st), st, b)
    return np.where(np.asarray(overlap, dtype=np.float64) > 0, b, np.inf)


def interleaved_grad_window_frac(vp, pp):
    """[stop 58] The backward time under which an interleaved pipeline stage's gradient reduce-scatters can hide, in
    units of one micro-batch's backward through the whole stage (``bwd_s``): ``(1 + (vp - 1) pp) / vp``; 1 without
    interleaving. Megatron-Core's interleaved schedule (``megatron/core/pipeline_parallel/schedules.py``,
    ``backward_step_helper``: ``enable_grad_sync()`` and ``config.grad_sync_func[chunk](...)`` once
    ``is_last_microbatch_for_model_chunk``) starts a model chunk's reduce-scatter as soon as its last micro-batch's
    backward ends, and the cooldown runs the last ``pp`` micro-batches through the chunks from the top down, so the
    top chunk's reduce-scatter is followed by ``(vp - 1) pp`` chunk passes of ``bwd_s / vp`` each, and every chunk's
    buckets also hide under its own last pass, as a non-interleaved stage's do under its last micro-batch's backward.
    The chunks' reduce-scatters run one after another on the data-parallel group, so what does not fit in the window
    is exposed (``gpusim.model.step._distopt_comm``). Hand-worked: vp 4, pp 4: ``(1 + 3 x 4) / 4 = 3.25``; vp 1: 1."""
    v = np.maximum(np.asarray(vp, dtype=np.float64), 1.0)
    return (1.0 + (v - 1.0) * np.asarray(pp, dtype=np.float64)) / v


def _distopt_comm(c: dict, coll_rows, dist: Distinct, overlap_frac):
    """[issue 17] (exposed, hidden, total) seconds per step of Megatron-Core's distributed optimizer with
    ``--overlap-grad-reduce`` and ``--overlap-param-gather`` (the NeMo / Megatron-Bridge performance recipes' setting).

    Megatron-Core (``megatron/core/distributed/param_and_grad_buffer.py``, ``distributed_data_parallel.py``; the
    distributed optimizer's docs, "overlap_grad_reduce" / "overlap_param_gather") keeps the gradients of a stage in
    buckets of consecutive layers. Gradients accumulate locally over the micro-batches; in the last micro-batch's
    backward pass each bucket is reduce-scattered over the dp (x cp) group as soon as its layers' gradients are final,
    so the reduce-scatters hide under the rest of that backward pass and only the last bucket (the first layers) is
    exposed. After the optimizer step each rank holds its updated shard; the next step's forward pass all-gathers the
    parameters bucket by bucket, the next bucket's all-gather dispatched while the current one's layers run, so only
    the first bucket's all-gather is exposed. Per step::

        exposed = max(RS - f W_b, RS_last) + max(AG - f W_f, AG_first)

    with ``RS``, ``AG`` the bucketed collectives of the stage's gradient (``G``) and parameter (``W``) bytes, ``W_b`` /
    ``W_f`` one micro-batch's backward / forward time of the stage (zero where overlap is off) and ``f`` the
    overlap fraction. The volume is the all-reduce's (RS + AG), as Rajbhandari et al. SC'20 section 5 state for
    ZeRO stage 1-2.

    [issue 17] A mixture-of-experts stage keeps its routed experts' parameters in buffers of their own
    (``DistributedDataParallel``'s ``expert_parallel_buffers``), reduce-scattered and all-gathered over the
    expert-data-parallel group (``G_exp``, ``W_exp`` over ``edp_n`` ranks in ``edp_nodes`` domains at ``edp_inter``:
    :func:`gpusim.model.llm.expert_dp_group_placement`); the rest of ``G`` and ``W`` goes over the dense group. Both
    run in the same windows, one after the other, each with its own last (first) bucket exposed. Hand-worked (1 ns per
    byte, 10 buckets of 100 B each side, windows long enough): ``G = 1000`` of which ``G_exp = 500`` over two ranks:
    RS 500 + 500 ns with last buckets 100 + 100 ns exposed, AG likewise: 400 ns exposed.

    [issue 17] Rows with ``grad_ar`` (Muon under Megatron-Core's layer-wise distributed optimizer, ``dist_muon``:
    ``use_distributed_optimizer`` off, each data-parallel rank stepping whole layers, since Newton-Schulz needs whole
    matrices) all-reduce the gradient buckets in place of the reduce-scatter (the ring's volume doubles) and all-gather
    the updated parameters as above.

    ``coll_rows(kind, size, ranks, nodes, intra, intra_hop, inter, inter_hop, nvls, ll_max, ll128, host_cpu)``: one
    collective's seconds; the four bucketed collectives of a stage are evaluated once per distinct stage and group
    (``dist``).
    """
    def bucketed(ar, G, W, bucket_mb, w_ratio, *fabric):
        bucket = bucket_mb * 1e6
        bucket_w = bucket * w_ratio
        rs = C.bucketed_time_s(G, bucket, lambda size: coll_rows(C.REDUCE_SCATTER, size, *fabric), one_call=True)
        if np.any(ar):  # [issue 17] dist_muon: the gradients all-reduced, each rank keeping whole layers' states
            full = C.bucketed_time_s(G, bucket, lambda size: coll_rows(C.ALL_REDUCE, size, *fabric), one_call=True)
            rs = tuple(np.where(ar, f, r) for f, r in zip(full, rs))
        ag = C.bucketed_time_s(W, bucket_w, lambda size: coll_rows(C.ALL_GATHER, size, *fabric), one_call=True)
        return (*rs, *ag)

    fabric = ("intra", "intra_hop", "inter", "inter_hop", "nvls", "ll_max", "ll128", "host_cpu")
    G_exp = np.asarray(c.get("G_exp", 0.0), dtype=np.float64)  # [issue 17] the routed experts' share (none: dense)
    W_exp = np.asarray(c.get("W_exp", 0.0), dtype=np.float64)
    ar = np.asarray(c.get("grad_ar", False), dtype=bool)
    # [stop 51] the gradient bucket in MB and the parameters' all-gather bucket as a ratio of it (a hand-built context:
    # the same bucket)
    bucket_mb = np.asarray(c["bucket"], dtype=np.float64) / 1e6
    w_ratio = c.get("bucket_w_ratio", 1.0)
    dense = dist(bucketed, [ar, c["G"] - G_exp, c["W"] - W_exp, bucket_mb, w_ratio, c["n"], c["nodes"],
                            *(c[k] for k in fabric)])
    rs_total, rs_last, ag_total, ag_first = dense
    if np.any((G_exp > 0) & (np.asarray(c.get("edp_n", 1.0)) > 1)):
        ex_fabric = [c["intra"], c["intra_hop"], c["edp_inter"], *(c[k] for k in fabric[3:])]

        def expert_bucketed(ar, G, W, bucket_mb, w_ratio, ranks, *rest):
            out = bucketed(ar, G, W, bucket_mb, w_ratio, ranks, *rest)
            return tuple(np.where((ranks > 1) & (G > 0), t, 0.0) for t in out)

        ex = dist(expert_bucketed, [ar, G_exp, W_exp, bucket_mb, w_ratio, c["edp_n"], c["edp_nodes"], *ex_fabric])
        # the two buffers' buckets are reduced in the same backward pass, one after the other on the links; each
        # buffer's last bucket (and first all-gather) waits at the end (start) of the window
        rs_total, rs_last, ag_total, ag_first = (a + b for a, b in zip(dense, ex))
    rs_exp, rs_hid = _overlap(rs_total, rs_last, c["bwd_s"], overlap_frac)
    ag_exp, ag_hid = _overlap(ag_total, ag_first, c["fwd_ov_s"], overlap_frac)
    return rs_exp + ag_exp, rs_hid + ag_hid, rs_total + ag_total


#: rows evaluated at a time. A model evaluation makes a few hundred temporaries of one float64 per row; at a million
#: rows each is 8 MB, far beyond the CPU caches, and every one is fresh memory the allocator must fault in. In blocks
#: of this many rows (0.5 MB per temporary) the temporaries of one block are freed and reused by the next, and most
#: operands are still in the L2/L3 cache: about twice the rows per second at 10^6 rows (benchmarks/llm_speed.py).
BLOCK_ROWS = 65536


def n_rows(inp: StepInputs) -> int:
    """Rows (scenarios) of ``inp``: the longest leading dimension of its arrays (1 when all broadcast)."""
    shapes = map(np.shape, map(inp.__getattribute__, _input_factories()))  # (the field names, without fields())
    return max((sh[0] for sh in shapes if sh), default=1)


def evaluate(inp: StepInputs, p: ModelParams) -> dict[str, np.ndarray]:
    """Evaluate every scenario in ``inp``. Returns a dict of arrays (see the keys at the end of
    :func:`_evaluate_block`), one row per scenario; more than :data:`BLOCK_ROWS` rows are evaluated block by block
    (the same elementwise formulas, so the result does not depend on the block size)."""
    rows = n_rows(inp)
    if rows <= BLOCK_ROWS:
        return _evaluate_block(inp, p)
    out: dict[str, np.ndarray] = {}
    for start in range(0, rows, BLOCK_ROWS):
        stop = min(start + BLOCK_ROWS, rows)
        part = _evaluate_block(inp.take(slice(start, stop)), p)
        for key, v in part.items():
            v = np.asarray(v)
            if key not in out:
                out[key] = np.empty((rows,) + v.shape[1:], dtype=v.dtype)
            out[key][start:stop] = v if v.ndim else v[None]  # a block-constant scalar broadcasts over its rows
    return out


def _evaluate_block(inp: StepInputs, p: ModelParams) -> dict[str, np.ndarray]:
    """:func:`evaluate` on at most :data:`BLOCK_ROWS` rows."""
    s = np.asarray(inp.strategy)
    n = np.asarray(inp.n_gpus, dtype=np.float64)
    nodes = np.asarray(inp.n_nodes, dtype=np.float64)
    g = n / nodes
    b = np.asarray(inp.micro_batch, dtype=np.float64)
    k = np.asarray(inp.accum, dtype=np.float64)
    P = np.asarray(inp.params, dtype=np.float64)
    multi = n > 1
    is_dp = s == DP
    stage = SHARD_STAGE[s]

    fwd_kernels = np.asarray(inp.group_count, dtype=np.float64).sum(axis=-1)  # kernels of one forward pass

    # ---- compute of one micro-batch -------------------------------------------------------------
    fwd_dispatch_mult = np.where(is_dp, 1.0 + (n - 1.0) * p.dp_gil_frac, 1.0)
    groups = {"fwd_flop_per_sample": inp.group_flop_per_sample, "fwd_bytes_per_sample": inp.group_bytes_per_sample,
              "weight_bytes": inp.group_weight_bytes, "count": inp.group_count}
    weight_scale = np.asarray(inp.gather_bytes_per_param) / 2.0
    llm = np.asarray(inp.llm, dtype=bool)
    if np.all(llm):  # every row an LLM layout: its compute comes from the GEMM shapes (below)
        z = np.zeros(np.broadcast_shapes(np.shape(b), np.shape(n)))
        mc = dict.fromkeys(("compute_s", "fwd_s", "bwd_s", "gpu_s", "cpu_dispatch_s", "roofline_s", "kernels"), z)
    else:
        eff = np.asarray(inp.group_eff_frac) * np.asarray(inp.matmul_cap_frac, dtype=np.float64)[..., None]
        mc = micro_batch_compute(b, groups, eff, inp.peak_flop_per_s, inp.mem_bytes_per_s,
                                 mem_eff_frac=p.mem_eff_frac, kernel_tail_s=p.kernel_tail_s,
                                 launch_cpu_s=p.launch_cpu_s, act_scale=inp.act_scale, weight_scale=weight_scale,
                                 recompute=inp.checkpointing, fwd_dispatch_mult=fwd_dispatch_mult,
                                 fwd_kernels=fwd_kernels)
    override = np.asarray(inp.compute_override_s, dtype=np.float64)
    measured = np.isfinite(override)
    mult = train_multiplier(inp.checkpointing)
    # a measured one-GPU time still pays DataParallel's extra dispatch when more GPUs share one process
    micro_s = np.where(measured, np.maximum(override, mc["cpu_dispatch_s"]), mc["compute_s"])
    fwd_s = np.where(measured, micro_s / mult, mc["fwd_s"])
    bwd_s = micro_s - fwd_s
    gpu_busy_micro_s = np.where(measured, np.minimum(override, micro_s), mc["gpu_s"])

    # ---- LLM layouts: per-GEMM compute, tensor and pipeline parallelism (zero for data-parallel rows) ----
    tp, pp = np.asarray(inp.tp, dtype=np.float64), np.asarray(inp.pp, dtype=np.float64)
    dp = n / (tp * pp)
    G = P * inp.grad_bytes_per_param  # gradient bytes communicated
    W = P * inp.gather_bytes_per_param  # parameter bytes gathered by sharded strategies
    dp_n, dp_nodes, dp_inter, P_local, blocks = n, nodes, inp.inter_busbw_bytes_per_s, P, n_blocks(fwd_kernels)
    G_exp = W_exp = P_exp = np.zeros(np.shape(n))  # [issue 17] the routed experts' share (LLM layout rows only)
    edp_n, edp_nodes, edp_inter = np.ones(np.shape(n)), np.ones(np.shape(n)), inp.inter_busbw_bytes_per_s
    mem_rate = np.asarray(inp.mem_bytes_per_s, dtype=np.float64) * p.mem_eff_frac
    zero = np.zeros(np.shape(n))
    tp_comm_s, pp_bubble_s, pp_p2p_s = zero, zero, zero
    cp = np.asarray(inp.cp, dtype=np.float64)  # [issue 12] dp above is the dp x cp group that shares weights
    cp_comm_s = ep_comm_s = zero
    lt = None
    dist = Distinct()  # one grouping per block: the LLM terms and the data-parallel collectives share column codes
    if np.any(llm):
        with np.errstate(divide="ignore", invalid="ignore"):  # data-parallel rows have no transformer shape
            lt = llm_terms(_llm_inputs(inp, g, p), p, dist=dist)
        # [issue 17] a data-parallel group takes every tp-th rank (Megatron's rank order tp-cp-ep-dp-pp): its members
        # share an NVLink domain as far as the domain holds them (an NVL72 rack, not only its tray)
        dom = np.asarray(inp.nvlink_domain_gpus, dtype=np.float64)
        _, dp_domains, nic_share = dp_group_placement(dp, tp, g, np.where(np.isfinite(dom), dom, g), n)
        dp_n = np.where(llm, dp, n)
        dp_nodes = np.where(llm, dp_domains, nodes)
        dp_inter = np.where(llm, inp.inter_busbw_bytes_per_s * nic_share, inp.inter_busbw_bytes_per_s)
        P_local = np.where(llm, lt["stage_params"], P)
        G = np.where(llm, P_local * inp.grad_bytes_per_param, G)
        W = np.where(llm, P_local * inp.gather_bytes_per_param, W)
        # [issue 17] the routed experts' gradients and parameters go over the expert-data-parallel group instead
        # (expert_dp_group_placement): their share of G and W, that group's size, placement and NIC share
        P_exp = np.where(llm, lt["expert_params_per_stage"], 0.0)
        edp_n, edp_nodes, edp_share = expert_dp_group_placement(dp, tp, inp.ep, inp.expert_tp, g,
                                                                np.where(np.isfinite(dom), dom, g), n)
        G_exp, W_exp = P_exp * inp.grad_bytes_per_param, P_exp * inp.gather_bytes_per_param
        edp_inter = inp.inter_busbw_bytes_per_s * edp_share
        blocks = np.where(llm, lt["layers_per_stage"], blocks)
        mem_rate = np.where(llm, np.inf, mem_rate)  # Megatron reduces its contiguous gradient buffer in place
        tp_comm_s = np.where(llm, lt["tp_comm_exposed_s"], 0.0)
        cp_comm_s = np.where(llm, lt["cp_comm_exposed_s"], 0.0)
        ep_comm_s = np.where(llm, lt["ep_comm_exposed_s"], 0.0)
        pp_bubble_s = np.where(llm, lt["pp_bubble_s"], 0.0)
        pp_p2p_s = np.where(llm, lt["pp_p2p_exposed_s"], 0.0)
        # (a measured one-GPU time is not combined with an LLM layout: the edge refuses it)
        micro_s = np.where(llm, (lt["compute_s"] + tp_comm_s + cp_comm_s + ep_comm_s + pp_bubble_s + pp_p2p_s) / k, micro_s)
        fwd_s = np.where(llm, lt["stage_fwd_s"], fwd_s)
        bwd_s = np.where(llm, lt["stage_bwd_s"], bwd_s)
        gpu_busy_micro_s = np.where(llm, lt["compute_s"] / k, gpu_busy_micro_s)

    # ---- communication (each strategy evaluated only on its own rows) ------------------------------
    # [stop 51] an LLM layout's gradient buckets are Megatron-Core's, not PyTorch DDP's 25 MiB (Strategy.bucket_mib):
    # megatron_bucket_params (the reduce-scatter's bytes at the gradient's width, the all-gather's at the parameters')
    # (the distributed optimizer's collectives group their rows by the bucket in MB and the all-gather's bucket as a
    # ratio of it: small integers and a constant, which gpusim.model.distinct codes in one counting pass each)
    bkt = megatron_bucket_params(dp / cp, inp.dp_overlap, inp.ddp_bucket_params)
    bucket = np.where(llm, bkt * inp.grad_bytes_per_param, inp.bucket_bytes)
    bucket_w_ratio = np.where(llm, np.asarray(inp.gather_bytes_per_param, dtype=np.float64)
                              / np.asarray(inp.grad_bytes_per_param, dtype=np.float64), 1.0)
    # [stop 58] an interleaved pipeline reduce-scatters each model chunk's gradients under the lower chunks' backward
    rs_window = np.where(llm, interleaved_grad_window_frac(inp.vp, pp), 1.0)
    ctx = {"n": dp_n, "nodes": dp_nodes, "g": g, "b": b, "k": k, "G": G, "W": W,
           "blocks": blocks, "fwd_s": fwd_s,
           "bwd_s": bwd_s * rs_window * np.asarray(inp.dp_overlap, dtype=np.float64),
           "fwd_ov_s": fwd_s * np.asarray(inp.dp_overlap, dtype=np.float64), "llm": llm,  # [issue 17]
           "bucket": np.asarray(bucket, dtype=np.float64), "bucket_w_ratio": bucket_w_ratio,
           "weights": P * inp.weight_bytes_per_param, "h2d": np.asarray(inp.h2d_bytes_per_sample, dtype=np.float64),
           "intra": inp.intra_busbw_bytes_per_s, "intra_hop": inp.intra_hop_s, "inter": dp_inter,
           "inter_hop": inp.inter_hop_s, "nvls": inp.nvls, "mem_rate": mem_rate,
           "ll_max": inp.ll_max_busbw_bytes_per_s, "ll128": inp.ll128, "host_cpu": inp.host_cpu,
           "G_exp": G_exp, "W_exp": W_exp, "edp_n": edp_n, "edp_nodes": edp_nodes, "edp_inter": edp_inter,
           "grad_ar": inp.grad_allreduce,  # [issue 17] dist_muon
           # [issue 18] all-reduces per optimizer step: one, or every micro-batch's when the loop never enters DDP's
           # no_sync() (Strategy sync_every_micro_batch)
           "syncs": np.where(np.asarray(inp.sync_every_micro, dtype=bool), k, 1.0)}
    rows = np.broadcast_shapes(*(np.shape(v) for v in ctx.values()))[0] if np.ndim(n) else 1
    comm_exposed = np.zeros(rows)
    comm_hidden = np.zeros(rows)
    allreduce_s = np.zeros(rows)
    s_b = np.broadcast_to(s, (rows,)).astype(np.int64, copy=False)
    for code in np.flatnonzero(np.bincount(s_b, minlength=HYBRID + 1)):  # the strategies present (no sort)
        mask = s_b == code
        idx = np.nonzero(mask)[0]
        if idx[-1] - idx[0] + 1 == len(idx):  # contiguous rows (one strategy, or a sweep ordered by strategy)
            idx = slice(int(idx[0]), int(idx[-1]) + 1)
        whole = isinstance(idx, slice) and idx.stop - idx.start == rows  # (the same arrays: their codes are shared)
        sub = ctx if whole else {key: _rows(v, idx, rows) for key, v in ctx.items()}
        exp, hid, ar = _strategy_comm(int(code), sub, p, dist if whole else None)
        comm_exposed[idx], comm_hidden[idx], allreduce_s[idx] = exp, hid, ar
    comm_exposed = np.where(multi, comm_exposed, 0.0)
    comm_hidden = np.where(multi, comm_hidden, 0.0)
    # communication kernels running under compute slow it down a little (SMs, memory bandwidth)
    interference = p.overlap_slowdown_frac * comm_hidden
    comm_total = comm_exposed + comm_hidden

    # ---- optimizer ------------------------------------------------------------------------------
    o_shard = np.where(stage >= 1, np.where(s == HYBRID, g, dp_n), 1.0)
    # [issue 17] an LLM layout's routed experts shard their optimizer over the expert-data-parallel group (edp_n ranks:
    # Megatron-Core's distributed optimizer keeps them in their own buffers), as _llm_memory counts them, not over dp
    p_local = (P_local - P_exp) / o_shard + P_exp / np.where(stage >= 1, edp_n, 1.0)
    opt_k = np.where(np.isfinite(inp.opt_kernels), inp.opt_kernels, p.optimizer_kernels)  # [issue 18]
    gpu_opt = optimizer_step_s(p_local, inp.opt_traffic_bytes_per_param, inp.mem_bytes_per_s, p.mem_eff_frac,
                               opt_k, np.maximum(p.kernel_tail_s, p.launch_cpu_s))
    # [issue 17] Muon's orthogonalisation: bf16 GEMMs over the rank's share of the weights at the GEMM ceiling
    opt_flop = np.asarray(inp.opt_flop_per_param, dtype=np.float64)
    if np.any(opt_flop > 0):
        peak16 = np.asarray(inp.peak16_flop_per_s, dtype=np.float64)
        gemm_rate = p.gemm_ceiling_frac * np.where(np.isfinite(peak16), peak16, np.asarray(inp.peak_flop_per_s))
        gpu_opt = gpu_opt + p_local * opt_flop / gemm_rate
    offload = np.asarray(inp.cpu_offload, dtype=bool)
    cpu_opt = (p_local * inp.opt_traffic_bytes_per_param / inp.cpu_optimizer_bytes_per_s
               + p_local * (inp.grad_bytes_per_param + inp.gather_bytes_per_param)
               / (inp.pcie_bytes_per_s * p.h2d_pinned_eff_frac))
    optimizer_s = np.where(offload, cpu_opt, gpu_opt)

    # ---- data -----------------------------------------------------------------------------------
    share = np.where(is_dp, g, 1.0)  # DataParallel: one loader feeds every GPU of the node through GPU 0
    data = data_times_s(b * share, micro_s, inp.num_workers, inp.pin_memory, inp.cores_per_gpu * share,
                        inp.preprocess_core_s_per_sample, inp.input_bytes_per_sample, inp.h2d_bytes_per_sample,
                        inp.storage_bytes_per_s_per_gpu * share, inp.pcie_bytes_per_s,
                        loader_core_eff_frac=p.loader_core_eff_frac, h2d_pinned_eff_frac=p.h2d_pinned_eff_frac,
                        h2d_pageable_eff_frac=p.h2d_pageable_eff_frac)
    data_wait = k * data["wait_s"]

    # ---- synchronisation and totals -------------------------------------------------------------
    compute_s = k * micro_s
    if lt is not None:
        compute_s = np.where(llm, lt["compute_s"], compute_s)
    sync_s = straggler_s(compute_s, n, p.jitter_frac, inp.slowest_speed_frac)
    # DataParallel re-replicates the module to every GPU on every forward (Python work per module and replica)
    overhead_s = p.step_overhead_s + np.where(is_dp, k * fwd_kernels * (n - 1.0) * p.dp_replicate_s, 0.0)
    comm_part = comm_exposed + interference
    step_s = compute_s + comm_part + data_wait + optimizer_s + sync_s + overhead_s
    if lt is not None:  # (the terms of tensor and pipeline parallelism: zero for data-parallel rows)
        step_s = step_s + tp_comm_s + cp_comm_s + ep_comm_s + pp_bubble_s + pp_p2p_s  # [issue 12] cp, ep

    samples = dp / cp * b * k  # a sample is shared by the tp x pp x cp GPUs of one model replica
    throughput = samples / step_s
    fwd_flop = inp.fwd_flop_per_sample if lt is None else np.where(llm, lt["model_fwd_flop_per_sample"],
                                                                    inp.fwd_flop_per_sample)
    model_flop = model_flop_per_sample(fwd_flop) * samples
    mfu = model_flop / (step_s * n * inp.peak_flop_per_s)
    gpu_util = k * gpu_busy_micro_s / step_s

    # ---- memory ---------------------------------------------------------------------------------
    shard_ranks = np.where(s == HYBRID, g, n)
    mem = memory_per_gpu_bytes(
        params=P, act_bytes_per_sample=inp.act_bytes_per_sample, act_ckpt_bytes_per_sample=inp.act_ckpt_bytes_per_sample,
        act_block_bytes_per_sample=inp.act_block_bytes_per_sample,
        micro_batch=b, checkpointing=inp.checkpointing, act_scale=inp.act_scale, shard_stage=stage,
        shard_ranks=shard_ranks, weight_bytes_per_param=inp.weight_bytes_per_param,
        grad_bytes_per_param=inp.grad_bytes_per_param, opt_bytes_per_param=inp.opt_state_bytes_per_param,
        master_bytes_per_param=inp.master_bytes_per_param, gather_bytes_per_param=inp.gather_bytes_per_param,
        ddp_buckets=(s == DDP) & multi, cpu_offload=offload, multi_gpu=multi, fwd_kernels=fwd_kernels,
        framework_overhead_bytes=p.framework_overhead_bytes, comm_buffer_bytes=p.comm_buffer_bytes,
        fragmentation_frac=p.fragmentation_frac)
    if lt is not None:
        mem = _llm_memory(mem, lt, inp, llm, stage, dp, multi, p)
    # [issue 17] the memory a layout must leave free (allocator, NCCL communicators, CUDA context, workspaces)
    comms = nccl_communicators(tp, pp, cp, dp / cp, inp.ep)
    headroom = headroom_bytes(inp.mem_capacity_bytes, inp.mem_headroom_bytes, inp.mem_headroom_frac,
                              p.memory_headroom_bytes, p.memory_headroom_frac, comms, p.nccl_communicator_bytes)
    fits = fits_in_memory(mem["total"], inp.mem_capacity_bytes, headroom)
    max_b = max_micro_batch(mem, inp.mem_capacity_bytes, headroom)

    # ---- bottleneck -----------------------------------------------------------------------------
    dispatch_bound = (mc["cpu_dispatch_s"] > mc["gpu_s"]) & ~measured
    losses = ((2, comm_part), (3, data_wait), (4, optimizer_s), (5, sync_s), (6, overhead_s))
    if lt is not None:
        # [issue 17] an LLM layout is launch-bound where the CPU's launches add at least BOTTLENECK_SHARE_FRAC to its
        # layers' GPU time (gpusim.model.llm: launch_excess_frac)
        dispatch_bound = np.where(llm, lt["launch_excess_frac"] >= BOTTLENECK_SHARE_FRAC, dispatch_bound)
        losses += ((8, tp_comm_s), (9, pp_bubble_s), (10, pp_p2p_s), (11, cp_comm_s), (12, ep_comm_s))  # [issue 12]
    bottleneck = bottleneck_codes(step_s, losses, dispatch_bound, fits)

    return {
        "step_s": step_s,
        "compute_s": compute_s, "comm_exposed_s": comm_part, "data_wait_s": data_wait, "optimizer_s": optimizer_s,
        "sync_s": sync_s, "overhead_s": overhead_s,
        "comm_total_s": comm_total, "comm_hidden_s": comm_hidden, "comm_interference_s": interference,
        "micro_compute_s": micro_s, "fwd_s": fwd_s, "bwd_s": bwd_s, "gpu_busy_s": k * gpu_busy_micro_s,
        "cpu_dispatch_s": k * mc["cpu_dispatch_s"] if lt is None else np.where(llm, 0.0, k * mc["cpu_dispatch_s"]),
        "roofline_s": k * mc["roofline_s"] if lt is None else np.where(llm, compute_s, k * mc["roofline_s"]),
        "throughput_samples_per_s": throughput, "throughput_per_gpu_samples_per_s": throughput / n,
        "mfu_frac": mfu, "gpu_util_frac": gpu_util,
        "loader_supply_samples_per_s": data["supply_samples_per_s"] / share, "loader_cpu_limited": data["cpu_limited"],
        "h2d_s": data["h2d_s"],
        "memory_per_gpu_bytes": mem["total"], "memory_weights_bytes": mem["weights"],
        "memory_gradients_bytes": mem["gradients"], "memory_optimizer_bytes": mem["optimizer"],
        "memory_activations_bytes": mem["activations"], "memory_buffers_bytes": mem["buffers"],
        "memory_overhead_bytes": mem["overhead"], "fits_in_memory": fits, "max_micro_batch": max_b,
        "bottleneck_code": bottleneck, "dispatch_bound": dispatch_bound, "grad_bytes": G,
        "allreduce_s": np.where(multi, allreduce_s, 0.0),
        "tp_comm_exposed_s": tp_comm_s, "pp_bubble_s": pp_bubble_s, "pp_p2p_exposed_s": pp_p2p_s,
        "cp_comm_exposed_s": cp_comm_s, "ep_comm_exposed_s": ep_comm_s,  # [issue 12] dp below: dp x cp
        "dp_comm_exposed_s": comm_part, "dp_degree": np.broadcast_to(dp / cp, np.shape(step_s)),
        "model_flop_per_step": model_flop,
        "memory_first_stage_bytes": mem.get("first", mem["total"]), "memory_last_stage_bytes": mem.get("last", mem["total"]),
        "memory_headroom_bytes": headroom + 0.0 * step_s,  # [issue 17]
    }


#: [issue 17] the hybrid Mamba-Transformer fields gpusim.model.hybrid reads
HYBRID_FIELDS = ("attn_frac", "ffn_frac", "mamba_frac", "mamba_version", "mamba_d_inner", "mamba_state", "mamba_heads",
                 "mamba_groups", "mamba_conv", "mamba_chunk", "mamba_dt_rank", "mamba_flop_per_token")


def layer_detail(inp: StepInputs, p: ModelParams) -> dict[str, float] | None:
    """[issue 17] One transformer layer's parts per micro-batch for the first row of ``inp``
    (:func:`gpusim.model.llm.layer_detail`); None for a data-parallel row."""
    from gpusim.model.llm import layer_detail as _detail

    if not bool(np.ravel(np.asarray(inp.llm))[0]):
        return None
    one = inp.take(slice(0, 1))
    g = np.asarray(one.n_gpus, dtype=np.float64) / np.asarray(one.n_nodes, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return _detail(_llm_inputs(one, g, p), p)


def _llm_inputs(inp: StepInputs, g, p: ModelParams) -> dict:
    """The arrays :func:`gpusim.model.llm.llm_terms` reads."""
    names = ("n_layers", "d_model", "n_heads", "q_dim", "kv_dim", "ff_dim", "ffn_mats", "vocab", "seq_len", "tp", "pp",
             "vp", "micro_batch", "sp", "recompute", "flash", "dropout", "rope", "qk_norm", "untied", "layer_params",
             "embed_params", "grad_accum_fusion", "ce_code", "grad_bytes_per_param", "gemm_serial_epilogue", "tp_async_bwd", "tp_comm_overlap", "pp_p2p_overlap", "act_scale", "mem_bytes_per_s", "sm_count", "n_nodes", "intra_busbw_bytes_per_s",
             "intra_hop_s", "inter_busbw_bytes_per_s", "inter_hop_s", "nvls", "ll_max_busbw_bytes_per_s", "ll128", "host_cpu", "cp", "cp_kind", "ep", "expert_tp",
             "moe_frac", "n_experts", "top_k", "expert_ff_dim", "moe_latent_dim", "shared_ff_dim", "moe_capacity", "moe_imbalance_frac",
             "moe_expert_skew_frac", "moe_expert_bias", "moe_glu_clamp", "moe_router_padding", "moe_fused_mlp",
             "moe_dispatcher", "moe_topk_groups", "moe_n_groups", "ep_fp8_dispatch", "ep_overlap",
             "recompute_norms", "recompute_mla_up", "recompute_moe_act", "recompute_mlp", "fp8_act", "mla_q_lora", "mla_kv_lora",
             "mla_kv_up", "mla_kv_a", "v_dim", "host_cpu_mult", "act_offload_layers",
             "pcie_bytes_per_s", "attn_fwd_slow", "attn_bwd_slow", "attn_fa2", "attn_blackwell",
             "attn_tile_frac", "attn_win_share", "attn_win_tiles_frac", "attn_qblock_per_tile", "attn_key_frac",
             "cuda_graphs", "fp8_retranspose_bytes", "mtp_layers", "mtp_fwd_flop", "mtp_param_modules",
             "bf16_layers_start", "bf16_layers_end")  # [issue 12], [issue 17], [issue 18], [stop 57]
    x = {k: getattr(inp, k) for k in names}
    if (np.any(np.asarray(inp.mamba_frac) > 0) or np.any(np.asarray(inp.attn_frac) != 1.0)
            or np.any(np.asarray(inp.ffn_frac) != 1.0)):  # [issue 17] hybrid rows only: a dense sweep reads none
        x.update({k: getattr(inp, k) for k in HYBRID_FIELDS})
    if np.any(np.asarray(inp.host_python_mult) != 1.0):  # [stop 52] (a column only where a row's host differs)
        x["host_python_mult"] = inp.host_python_mult
    if np.any(np.asarray(inp.recompute_moe, dtype=bool)):  # [stop 52] the ``moe`` recompute module's rows only (a
        x["recompute_moe"] = inp.recompute_moe  # column fewer for the rows' distinct coding where none has it)
    ml = np.asarray(inp.model_layers, dtype=np.float64)  # [issue 12]
    x["model_layers"] = np.where(np.isfinite(ml), ml, np.asarray(inp.n_layers, dtype=np.float64))
    dom = np.asarray(inp.nvlink_domain_gpus, dtype=np.float64)
    x["nvlink_domain_gpus"] = np.where(np.isfinite(dom), dom, g)
    ceiling = np.asarray(inp.ceiling_flop_per_s, dtype=np.float64)
    peak = np.asarray(inp.peak_flop_per_s, dtype=np.float64)
    peak16 = np.asarray(inp.peak16_flop_per_s, dtype=np.float64)  # [issue 12] fp8 rows: the bf16 peak
    x["ceiling_flop_per_s"] = np.where(np.isfinite(ceiling), ceiling,
                                       p.gemm_ceiling_frac * np.where(np.isfinite(peak16), peak16, peak))
    c8 = np.asarray(inp.fp8_ceiling_flop_per_s, dtype=np.float64)
    # [issue 17] MXFP8 GEMM kernels run a little below the per-tensor FP8 ones (fp8.gemm_ceiling_flop_per_s)
    x["fp8_ceiling_flop_per_s"] = FP8.gemm_ceiling_flop_per_s(inp.fp8_mode, np.where(np.isfinite(c8), c8,
                                                                                     p.gemm_ceiling_frac * peak),
                                                              p.mxfp8_gemm_rate_frac)
    x["fp8_peak_ratio"] = np.where(np.isfinite(peak16), peak / peak16, 1.0)  # [issue 17] FP8 / bf16 datasheet peak
    x["fp8_mode"] = inp.fp8_mode
    x["n_micro"] = inp.accum
    x["gpus_per_node"] = g
    return x


def _llm_memory(mem: dict, lt: dict, inp: StepInputs, llm, stage, dp, multi, p: ModelParams) -> dict:
    """Memory of the fullest pipeline stage for LLM rows (module gpusim.model.llm), the data-parallel model's
    memory for the others."""
    kw = {"weight_bytes": inp.weight_bytes_per_param, "grad_bytes": inp.grad_bytes_per_param,
          "master_bytes": inp.master_bytes_per_param, "opt_bytes": inp.opt_state_bytes_per_param}
    overhead = p.framework_overhead_bytes + np.where(multi, p.comm_buffer_bytes, 0.0)
    stages = {}
    for name, params_key, act_key in (("first", "first_params", "act_first_bytes"),
                                      ("last", "last_params", "act_last_bytes")):
        w, gr, o = stage_state_bytes(lt[params_key], stage, dp, **kw)
        # [issue 12] DualPipe keeps two copies of the parameters (and their gradients): DeepSeek-V3 Table 2
        copies = np.where(np.asarray(inp.ep_overlap) == EPO.DUALPIPE, EPO.PARAM_COPIES, 1.0)
        w, gr = w * copies, gr * copies
        # [issue 12] routed experts' optimizer states shard over the expert-data-parallel group only,
        # dp x cp x tp / (ep x etp) ranks (Megatron-Core's expert data parallelism), not over dp x cp; [issue 17] so do
        # their gradients under ZeRO-2 and their weights under ZeRO-3 / FSDP (Megatron-FSDP's expert sharding group)
        edp = np.maximum(dp * np.asarray(inp.tp, dtype=np.float64)
                         / (np.asarray(inp.ep, dtype=np.float64) * np.asarray(inp.expert_tp, dtype=np.float64)), 1.0)
        reshard = lt["expert_params_per_stage" if name == "first" else "expert_params_last_stage"] \
            * (1.0 / edp - 1.0 / np.maximum(dp, 1.0))
        o = o + np.where(stage >= 1, reshard * (inp.master_bytes_per_param + inp.opt_state_bytes_per_param), 0.0)
        # [issue 17] optimizer offload (Strategy.cpu_offload; Megatron-Core --optimizer-cpu-offload): the fp32 master
        # weights and Adam states of the shard live in host memory; the main gradients stay on the GPU for the
        # bucketed reduction and are copied out for the CPU's step. (The data-parallel rows' ZeRO-Offload / FSDP
        # CPUOffload, gpusim.model.memory, also moves the gradient shard to the host and keeps a 16-bit gradient.)
        o = np.where(np.asarray(inp.cpu_offload, dtype=bool), 0.0, o)
        gr = gr + np.where(stage >= 2, reshard * inp.grad_bytes_per_param * copies, 0.0)
        w = w + np.where(stage >= 3, reshard * inp.weight_bytes_per_param * copies, 0.0)
        # (DualPipe's first stage holds PP + 1 micro-batches: gpusim.model.llm counts it in act_first_bytes)
        stages[name] = {"weights": w, "gradients": gr, "optimizer": o, "activations": lt[act_key],
                        "buffers": 0.0 * w, "overhead": overhead + 0.0 * w}
        stages[name]["total"] = sum(stages[name].values())
    first_fuller = stages["first"]["total"] >= stages["last"]["total"]
    out = {}
    for key in ("weights", "gradients", "optimizer", "activations", "buffers", "overhead", "total"):
        out[key] = np.where(llm, np.where(first_fuller, stages["first"][key], stages["last"][key]), mem[key])
    b = np.asarray(inp.micro_batch, dtype=np.float64)
    out["activation_per_sample"] = np.where(llm, out["activations"] / b, mem["activation_per_sample"])
    out["first"] = np.where(llm, stages["first"]["total"], mem["total"])
    out["last"] = np.where(llm, stages["last"]["total"], mem["total"])
    return out
