"""Strategy: how a workload is split over GPUs and run.

Options are ``Literal`` names at the edge (files, CLI, app) and integer codes inside the model's arrays
(:data:`STRATEGY_CODES`, :data:`PRECISION_CODES`, ...). Every option is documented here once.
"""

from __future__ import annotations

import typing
from typing import Literal

from pydantic import ConfigDict, Field, model_validator

from gpusim import units
from gpusim.checks import FiniteModel

StrategyKind = Literal["dp", "ddp", "zero1", "zero2", "zero3", "fsdp-full", "fsdp-grad-op", "fsdp-hybrid"]
"""
- ``dp``: legacy ``torch.nn.DataParallel``: one process, one thread per GPU under the GIL; every step the
  model is replicated from GPU 0, inputs are scattered from and outputs gathered to GPU 0, gradients are
  reduced to GPU 0 after the backward pass (no overlap), and the optimizer runs on GPU 0.
- ``ddp``: ``DistributedDataParallel``: one process per GPU, gradients all-reduced in buckets while the
  backward pass runs.
- ``zero1`` / ``zero2`` / ``zero3``: DeepSpeed ZeRO stages (Rajbhandari et al., SC'20): shard optimizer
  states / + gradients / + parameters across the data-parallel ranks.
- ``fsdp-full``: PyTorch FSDP ``FULL_SHARD`` (= ZeRO-3); ``fsdp-grad-op``: ``SHARD_GRAD_OP`` (= ZeRO-2);
  ``fsdp-hybrid``: ``HYBRID_SHARD``: full sharding inside a node, replication (all-reduce) across nodes.
"""

Precision = Literal["fp32", "tf32", "amp_fp16", "amp_bf16", "bf16", "fp8", "mxfp8", "nvfp4"]
#: other names of the FP8 recipes (the fp8 variants of shared/validation): current scaling and MXFP8
PRECISION_ALIASES = {"fp8-cs": ("fp8", "current"), "fp8-ds": ("fp8", "delayed"), "fp8-mx": ("mxfp8", None),
                     "fp8-delayed": ("fp8", "delayed"), "fp8-current": ("fp8", "current")}
"""
- ``fp32``: fp32 everywhere on CUDA cores (TF32 disabled).
- ``tf32``: fp32 tensors, matmuls and convolutions on tensor cores in TF32 (Ampere and later).
- ``amp_fp16`` / ``amp_bf16``: automatic mixed precision: fp32 parameters, gradients and optimizer
  states; matmuls in fp16/bf16 with fp32 accumulation; activations mostly 16-bit.
- ``bf16``: pure bf16 parameters and gradients (fp32 optimizer states).
- ``fp8``: fp8 matmuls (Transformer Engine style) with bf16 activations and fp32 master weights; for LLM layouts
  (gpusim.model.fp8) the linear layers' GEMMs in FP8 with per-tensor delayed (default) or current scaling
  (``fp8_recipe``; alias ``fp8-cs``), attention and the LM head in bf16.
- ``mxfp8``: the same with MXFP8 block scaling (one scale per 32 elements; Blackwell; alias ``fp8-mx``).
- ``nvfp4``: [issue 17] the linear layers' GEMMs in FP4 with NVFP4 block scaling (one E4M3 scale per 16 elements and
  an FP32 scale per tensor; random Hadamard transforms and stochastic rounding as Transformer Engine's
  ``NVFP4BlockScaling``; Blackwell), the rest as ``fp8``; the weights stay bf16 parameters (gpusim.model.fp8).
"""


def base_precision(precision: str) -> str:
    """[issue 17] The precision an FP8 recipe's name stands for (``fp8-cs`` -> ``fp8``, ``fp8-mx`` -> ``mxfp8``; the
    other names are their own): the key of the per-precision byte tables below."""
    return PRECISION_ALIASES.get(precision, (precision,))[0]

Optimizer = Literal["adam", "adamw", "sgd", "sgd-momentum", "muon"]  # [issue 17] muon: gpusim.optimizers
OptimizerImpl = Literal["foreach", "fused", "forloop"]

Recompute = Literal["none", "selective", "full"]
"""
- ``none``: every activation the backward pass needs is kept.
- ``selective``: the attention core (scores, softmax, dropout) is recomputed in the backward pass, the rest
  kept (Korthikanti et al. 2022, section 5).
- ``full``: only each layer's input is kept; the whole layer's forward runs again in the backward pass.
"""

RecomputeModule = Literal["core_attn", "layernorm", "mla_up_proj", "moe_act", "mlp", "moe"]
"""Modules recomputed in the backward pass instead of keeping their outputs (Megatron-Core
``--recompute-granularity selective --recompute-modules ...``; DeepSeek-V3 technical report section 3.2.3):

- ``core_attn``: the attention core (= ``recompute selective``).
- ``layernorm``: the two norms of each layer: their outputs (the QKV and FFN-up GEMM inputs) are not kept, only
  their inputs; the norms run again (memory-bound) in the backward pass.
- ``mla_up_proj``: multi-head latent attention's up-projections: Q, K, V are not kept, only the compressed latents;
  the up-projection GEMMs run again in the backward pass.
- ``moe_act``: the routed experts' activation function (SwiGLU): its output (the down-projection input) is not
  kept, only its input; it runs again in the backward pass.
- ``mlp`` [issue 17]: a dense layer's whole MLP (Megatron-Core's ``mlp`` module: ``tensor_parallel.checkpoint`` of
  the MLP on the pre-MLP norm's output): only that input is kept (16-bit, the checkpoint's own copy), not the
  activation function's input nor the down-projection's; the backward pass runs the MLP's forward again, its two
  GEMMs, the activation function and, with sequence parallelism, its all-gather and reduce-scatter. Mixture-of-experts
  layers are not affected (``moe`` is their counterpart).
- ``moe`` [stop 52]: a mixture-of-experts layer's whole MoE block (Megatron-Core's ``moe`` module: ``MoELayer`` with
  ``moe_layer_recompute``, ``tensor_parallel.checkpoint`` of the router, the token dispatcher, the experts and the
  combine on the pre-MLP norm's output): only that input is kept, none of the router's scores, dispatched tokens,
  expert activations or shared-expert activations; the backward pass runs the block's forward again, its
  all-to-alls, its CPU launches and its dispatcher's host sync included (gpusim.model.experts.moe_layer_terms,
  ``moe_fwd_s``). Dense layers are not affected (``mlp`` is theirs); ``moe_act`` inside a recomputed block changes
  nothing more.
"""

#: [issue 17] recomputations named by a module set, ``+``-joined (``recompute="layernorm+moe_act"``): Megatron-Core's
#: selective recomputation of those modules, what the MoE performance recipes run; the layout search tries these
#: (gpusim.search.MODULE_RECOMPUTES) and names its layouts by them, and a Strategy reads such a name as
#: ``recompute="none"`` (``"selective"`` with ``core_attn``) with those ``recompute_modules``
MODULE_SET_RECOMPUTES = ("layernorm+moe_act", "layernorm+moe_act+mla_up_proj",
                         # [stop 53] the whole MoE block (Megatron-Core's ``moe`` module) with the norms: what
                         # Megatron-MoE-ModelZoo's long-context Qwen3-235B runs recompute
                         # (--recompute-modules layernorm moe)
                         "layernorm+moe")

#: [issue 17] the attention kernel (Strategy.attention; the CLI's --attention, the planner's "Attention kernel")
Attention = Literal["flash", "flash2", "triton", "unfused"]
#: [issue 17] Megatron-Core's CUDA-graph scopes (--cuda-graph-scope; gpusim.model.graphs says what each captures)
CudaGraphScope = Literal["attn", "mlp", "moe_router", "moe_preprocess", "moe", "full_iteration"]
#: [issue 17] the context-parallel exchange (Strategy.cp_comm; the CLI's --cp-comm; gpusim.model.context)
CpComm = Literal["ring", "all-gather", "a2a", "a2a+p2p"]
#: [issue 17] the vocabulary-parallel cross entropy the loss runs (gpusim.model.llm.CROSS_ENTROPY_BYTES)
CrossEntropy = Literal["te", "native", "unfused"]

#: Megatron-LM's mixed-precision optimizer step reads and writes more than the inner Adam kernel (bytes per
#: parameter, MixedPrecisionOptimizer.step in megatron/core/optimizer/optimizer.py): zeroing the fp32 main-gradient
#: buffer (write 4), the gradient norm for clipping (read 4), copying the fp32 master weights into the 16-bit model
#: weights (read 4, write 2), and with fp16 loss scaling the unscale-and-check for inf/nan (read 4, write 4).
MEGATRON_OPT_EXTRA_BYTES: dict[str, float] = {"fp32": 8, "tf32": 8, "amp_fp16": 22, "amp_bf16": 14, "bf16": 14,
                                              "fp8": 14, "mxfp8": 14, "nvfp4": 14}

#: recomputation mode codes inside the model's arrays
RECOMPUTE_CODES: dict[str, int] = {"none": 0, "selective": 1, "full": 2}
#: strategies that combine with pipeline parallelism (Megatron-LM: DDP or the distributed optimizer)
PIPELINE_STRATEGIES = ("ddp", "zero1")

STRATEGY_CODES: dict[str, int] = {
    "dp": 0, "ddp": 1, "zero1": 2, "zero2": 3, "zero3": 4, "fsdp-full": 4, "fsdp-grad-op": 3, "fsdp-hybrid": 5}
#: shard stage per strategy code: 0 = nothing sharded ... 3 = parameters sharded
SHARD_STAGE_BY_CODE = {0: 0, 1: 0, 2: 1, 3: 2, 4: 3, 5: 3}

PRECISION_CODES: dict[str, int] = {"fp32": 0, "tf32": 1, "amp_fp16": 2, "amp_bf16": 3, "bf16": 4, "fp8": 5,
                                   "mxfp8": 6, "nvfp4": 7}

#: which datasheet column (GPU.dense_tflop_per_s) a precision's matmuls run at
PEAK_KEY: dict[str, str] = {"fp32": "fp32", "tf32": "tf32", "amp_fp16": "fp16", "amp_bf16": "bf16",
                            "bf16": "bf16", "fp8": "fp8", "mxfp8": "fp8", "nvfp4": "fp4"}

#: bytes per activation element (activations stored for backward and moved by elementwise kernels)
ACT_ELEM_BYTES: dict[str, float] = {"fp32": 4, "tf32": 4, "amp_fp16": 2, "amp_bf16": 2, "bf16": 2, "fp8": 2, "mxfp8": 2,
                                   "nvfp4": 2}

#: bytes per parameter held on the GPU (weights / gradients / gradient communication) per precision.
#: AMP keeps fp32 weights and gradients (PyTorch autocast casts on the fly; DDP all-reduces fp32
#: gradients); pure bf16 keeps both in bf16; fp8 training keeps bf16 weights and fp32 main gradients
#: (NVIDIA Transformer Engine documentation, "FP8 primer").
WEIGHT_BYTES: dict[str, float] = {"fp32": 4, "tf32": 4, "amp_fp16": 4, "amp_bf16": 4, "bf16": 2, "fp8": 2, "mxfp8": 2,
                                  "nvfp4": 2}
GRAD_BYTES: dict[str, float] = {"fp32": 4, "tf32": 4, "amp_fp16": 4, "amp_bf16": 4, "bf16": 2, "fp8": 4, "mxfp8": 4,
                                "nvfp4": 4}
#: bytes per parameter of the copy sharded strategies gather (ZeRO-3 / FSDP all-gather the compute copy)
GATHER_BYTES: dict[str, float] = {"fp32": 4, "tf32": 4, "amp_fp16": 2, "amp_bf16": 2, "bf16": 2, "fp8": 2, "mxfp8": 2,
                                  "nvfp4": 2}
#: fp32 master copy kept by sharded mixed-precision optimizers in addition to the 16-bit weights
#: (ZeRO paper section 3.1: 2 + 2 + 12 bytes per parameter for mixed-precision Adam).
MASTER_BYTES: dict[str, float] = {"fp32": 0, "tf32": 0, "amp_fp16": 0, "amp_bf16": 0, "bf16": 4, "fp8": 4, "mxfp8": 4,
                                  "nvfp4": 4}

#: optimizer state bytes per parameter (fp32 states): Adam keeps m and v; SGD with momentum keeps one buffer; [issue 17]
#: Muon keeps one momentum buffer for the weights it steps (``torch.optim.Muon``'s ``momentum_buffer``; the parameters
#: it does not take stay on AdamW: gpusim.optimizers.muon_split gives the mix per model)
OPT_STATE_BYTES: dict[str, float] = {"adam": 8, "adamw": 8, "sgd": 0, "sgd-momentum": 4, "muon": 4}
#: bytes per element of the optimizer's states by their dtype (Megatron-Core ``--use-precision-aware-optimizer
#: --exp-avg-dtype bf16 --exp-avg-sq-dtype bf16``; DeepSeek-V3 section 3.3.2 tracks AdamW's moments in BF16); the
#: fp32 master weights and main gradients stay fp32
OPT_STATE_DTYPE_BYTES: dict[str, float] = {"fp32": 4.0, "bf16": 2.0}
#: [issue 17] bytes per parameter of Megatron-Core's main-gradient buffer by its dtype (Strategy.grad_dtype)
GRAD_DTYPE_BYTES: dict[str, float] = {"fp32": 4.0, "bf16": 2.0}
#: bytes the optimizer step reads and writes per parameter (fp32 param, grad, states; fused/foreach
#: kernels): Adam reads p, g, m, v and writes p, m, v = 7 x 4 bytes; SGD-momentum reads p, g, m and
#: writes p, m = 5 x 4; plain SGD reads p, g and writes p = 3 x 4.
#: [issue 17] Muon reads p, g, m and writes p, m (20; its Newton-Schulz GEMMs are FLOPs: gpusim.optimizers).
OPT_TRAFFIC_BYTES: dict[str, float] = {"adam": 28, "adamw": 28, "sgd": 12, "sgd-momentum": 20, "muon": 20}
#: [issue 18] kernels the for-loop optimizer (``optimizer_impl="forloop"``) launches per parameter tensor and step,
#: as PyTorch 1.x's ``torch/optim/_functional.py`` runs them (the loop of ``torch.optim.SGD`` / ``Adam`` / ``AdamW``
#: before PyTorch 2.0 made the multi-tensor ``foreach`` path the CUDA default), plus the one ``p.grad.zero_()`` of
#: ``zero_grad()`` at its pre-2.0 default ``set_to_none=False``. SGD, with the weight decay image recipes set:
#: ``d_p.add(p, wd)``, ``p.add_(d_p, -lr)`` (2 + 1); with momentum also ``buf.mul_(m).add_(d_p)`` (4 + 1). Adam at
#: torch's default ``weight_decay=0`` (no ``grad.add(p, wd)``): ``exp_avg.mul_().add_()``,
#: ``exp_avg_sq.mul_().addcmul_()``, ``(exp_avg_sq.sqrt() / c).add_(eps)``, ``p.addcdiv_()`` (8 + 1); AdamW decays
#: every step with ``p.mul_(1 - lr wd)`` (9 + 1)
#: [issue 17] ``torch.optim.Muon`` loops over its tensors whatever the implementation (``_single_tensor_muon``): two
#: lerps, the bf16 copy, its norm, clamp and division, 5 x (``matmul``, two ``addmm``) and the decay and update: 25
OPT_FORLOOP_OPS_PER_TENSOR: dict[str, float] = {"adam": 9.0, "adamw": 10.0, "sgd": 3.0, "sgd-momentum": 5.0,
                                                "muon": 25.0}


def opt_state_bytes(optimizer: str, dtype: str = "fp32") -> float:
    """Optimizer-state bytes per parameter with states of ``dtype`` (:data:`OPT_STATE_DTYPE_BYTES`)."""
    return OPT_STATE_BYTES[optimizer] * OPT_STATE_DTYPE_BYTES[dtype] / 4.0


def opt_traffic_bytes(optimizer: str, dtype: str = "fp32") -> float:
    """Bytes the optimizer step moves per parameter: :data:`OPT_TRAFFIC_BYTES` less what narrower states save (each
    state is read once and written once)."""
    return OPT_TRAFFIC_BYTES[optimizer] - 2.0 * (OPT_STATE_BYTES[optimizer] - opt_state_bytes(optimizer, dtype))


class Strategy(FiniteModel):
    """How the work is split and run. Validated at the edge; the model sees integer codes."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: StrategyKind = "ddp"
    precision: Precision = "amp_bf16"
    per_gpu_batch: int = Field(default=32, ge=1, le=10_000_000, description="micro-batch per GPU, in samples")
    accum: int = Field(default=1, ge=1, le=100_000, description="gradient accumulation steps per optimizer step")
    sync_every_micro_batch: bool = Field(
        default=False, description="[issue 18] with gradient accumulation under DDP or ZeRO-1: every micro-batch's "
        "backward pass all-reduces the gradients, as a training loop does that never enters DDP's no_sync() (PyTorch "
        "DistributedDataParallel.no_sync; apex's DDP likewise without disable_allreduce): accum times the "
        "communication. False: the earlier micro-batches accumulate locally and only the last one reduces")
    optimizer: Optimizer = "adam"
    optimizer_impl: OptimizerImpl = Field(
        default="foreach", description="how the optimizer step launches its kernels (data-parallel rows): foreach "
        "(PyTorch >= 2.0's default on CUDA: multi-tensor kernels over all parameters) or fused (one fused kernel "
        "per group: torch fused=True, apex FusedAdam/FusedSGD), both a few kernels a step; forloop (torch.optim "
        "before PyTorch 2.0, or foreach=False): a few kernels per parameter tensor, each a CPU launch "
        "(OPT_FORLOOP_OPS_PER_TENSOR)")
    activation_checkpointing: bool = False
    cpu_offload: bool = Field(default=False, description="optimizer states and step on the CPU; needs a sharded "
                              "strategy. Data-parallel rows: ZeRO-Offload / FSDP CPUOffload (the gradient shard to the "
                              "host too); LLM layouts: Megatron-Core --optimizer-cpu-offload (master weights and Adam "
                              "states to the host, the fp32 main gradients stay on the GPU)")
    bucket_mib: float = Field(default=25.0, ge=1 / 1024, le=4096,
                              description="DDP gradient bucket size (MiB): PyTorch DDP's bucket_cap_mb; [stop 51] an "
                                          "LLM layout buckets as Megatron-Core does (gpusim.model.step."
                                          "megatron_bucket_params) and ignores it")
    num_workers: int | None = Field(default=None, ge=0, le=256,
                                    description="DataLoader workers per GPU; None (default) = data already prepared "
                                                "(synthetic): the step is predicted without a loader, and the loader "
                                                "it would need is reported")
    pin_memory: bool = True
    # --- LLM layout (Megatron-style 3D parallelism; see gpusim.layout) ---------------------------------
    tp: int = Field(default=1, ge=1, le=4096, description="tensor-parallel degree")
    pp: int = Field(default=1, ge=1, le=4096, description="pipeline-parallel stages")
    vp: int = Field(default=1, ge=1, le=512, description="model chunks per pipeline stage (interleaved 1F1B if > 1)")
    sp: bool | None = Field(default=None, description="sequence parallelism (default: on when tp > 1)")
    global_batch: int | None = Field(default=None, ge=1, le=100_000_000,
                                     description="sequences per optimizer step; sets accumulation = global / "
                                                 "(micro-batch x dp)")
    recompute: Recompute | None = Field(default=None, description="activation recomputation (LLM layouts; "
                                                                  "default none, or full with checkpointing)")
    ddp_bucket_params: float | None = Field(
        default=None, ge=1e5, le=1e13,
        description="[stop 58] LLM layouts: parameters per gradient (and distributed-optimizer parameter all-gather) "
                    "bucket, Megatron-Core --ddp-bucket-size (DistributedDataParallelConfig.bucket_size); None: "
                    "Megatron-Core's default, max(40 M, 1 M x dp) (gpusim.model.step.megatron_bucket_params). Fewer, "
                    "larger buckets pay the collectives' per-call latency fewer times and hide less of them under "
                    "the backward pass")
    overlap_grad_reduce: bool = Field(default=True, description="gradient reduction overlapped with the backward "
                                                                "pass (PyTorch DDP; Megatron --overlap-grad-reduce)")
    force_tp: bool = Field(default=False, description="allow tp beyond one NVLink domain")
    # [issue 12] context parallelism (gpusim.model.context)
    cp: int = Field(default=1, ge=1, le=4096, description="context-parallel degree (the sequence split over cp ranks)")
    uneven_pp: bool = Field(default=False, description="allow pipeline stages of unequal layer counts (Megatron "
                            "--decoder-first/last-pipeline-num-layers): every stage is charged the fullest stage's "
                            "ceil(layers / (pp vp)) layers per chunk")
    ep: int = Field(default=1, ge=1, le=4096, description="expert-parallel degree (MoE: experts split over ep ranks)")
    expert_tp: int = Field(default=1, ge=1, le=64, description="expert tensor parallelism (each expert split etp ways)")
    moe_capacity_factor: float | None = Field(default=None, gt=0, le=64, description="MoE expert capacity as a "
                                              "multiple of the balanced load (experts padded to it); default the "
                                              "model's (dropless)")
    # [issue 12] how the expert-parallel all-to-all runs (gpusim.model.dualpipe, gpusim.model.experts)
    ep_overlap: Literal["none", "1f1b", "dualpipe"] = Field(
        default="none", description="MoE all-to-all schedule: none (Megatron-Core's default: on the compute stream), "
        "1f1b (Megatron-Core --overlap-moe-expert-parallel-comm: under another micro-batch's compute in 1F1B's steady "
        "state) or dualpipe (DeepSeek-V3's bidirectional pipeline: every chunk overlapped, a smaller bubble, two "
        "copies of the parameters)")
    moe_dispatcher: Literal["alltoall", "deepep"] = Field(
        default="alltoall", description="MoE token dispatcher: alltoall (Megatron-Core's default: one NCCL "
        "all-to-all of every token copy) or deepep (Megatron-Core's flex dispatcher, DeepSeek-V3's DeepEP or "
        "HybridEP: once per node over InfiniBand, forwarded over NVLink; inside one NVLink domain the flat "
        "all-to-all; the permutation fused, no FP8 padding copies)")
    ep_fp8_dispatch: bool = Field(default=False, description="MoE dispatch in FP8 with 1x128 scales when the layers "
                                  "train in fp8 (DeepSeek-V3 section 3.3; combine stays bf16)")
    moe_imbalance_frac: float | None = Field(
        default=None, ge=0.0, le=10.0, description="[issue 17] MoE routing imbalance: the busiest expert-parallel "
        "rank's routed tokens over the mean, minus 1, at every MoE layer (its grouped GEMMs and the all-to-all volume "
        "it receives pace the layer). None: the sampling spread of a router balanced in expectation, what Megatron-"
        "Core's --moe-router-force-load-balancing benchmarks run (gpusim.model.experts.busiest_rank_load: 1-3%). "
        "Measured (marin-community/marin issue #7668, Megatron-Core on 64 GB200, EP64, 256 experts top-8): forced "
        "balance 0.013 on average over the layers (0.023 on the worst); a learned router with the auxiliary-loss-free "
        "bias at its default 1e-3 update rate 0.338 at the start of training and 0.212 after 18 steps (worst layers "
        "0.971 and 0.724), and the step 2.1x the forced-balance one over 100 steps. Taken as given at every ep; "
        "moe_expert_skew_frac derives it per ep instead")
    moe_expert_skew_frac: float | None = Field(
        default=None, ge=0.0, le=10.0, description="[issue 17] a learned router's popularity skew: the coefficient "
        "of variation of the experts' shares of the routed tokens. The busiest EP rank then follows from the layout "
        "(gpusim.model.experts.busiest_rank_load: 1 + z_ep sqrt(sampling^2 + skew^2 ep / (E - 1)), more at a larger "
        "ep). From the measurement behind moe_imbalance_frac: 0.29 at the start of training, 0.18 after 18 steps. "
        "None: a router balanced in expectation")
    moe_router_padding: bool = Field(default=False, description="[issue 17] with fp8/mxfp8 and the alltoall "
                                     "dispatcher: the router pads each expert's tokens to the FP8 GEMMs' multiple "
                                     "(Megatron-Core --moe-router-padding-for-fp8) instead of the experts copying "
                                     "their rows into a padded buffer and back (gpusim.model.experts.fp8_padding_bytes)")
    moe_fused_mlp: bool = Field(default=False, description="[issue 17] with mxfp8 on Blackwell (SM100): the routed "
                                "experts run Transformer Engine's CuTe DSL fused grouped MLP (Megatron-Core "
                                "--use-transformer-engine-op-fuser with --moe-mlp-glu-interleave-size 32 and "
                                "NVTE_CUTEDSL_FUSED_GROUPED_MLP=1): fc1 with the SwiGLU and the fc2 input's "
                                "quantisation in one kernel over all local experts, fc2 in one, and fc2's data "
                                "gradient with the SwiGLU's backward in one (gpusim.model.experts.fused_mlp_terms)")
    # [issue 12] memory-saving mechanisms (DeepSeek-V3 sections 3.2.3 and 3.3.2; Megatron-Core's interface)
    recompute_modules: tuple[RecomputeModule, ...] | None = Field(
        default=None, description="modules recomputed in the backward pass (Megatron-Core --recompute-modules): "
        "core_attn, layernorm, mla_up_proj, moe_act, mlp, moe (see RecomputeModule); core_attn is recompute selective")
    fp8_activations: bool = Field(default=False, description="with fp8: the linear layers' inputs kept for the "
                                  "backward pass in FP8 with fine-grained scales, and the SwiGLU inputs too "
                                  "(DeepSeek-V3 section 3.3.2); the attention output projection's input stays 16-bit")
    opt_state_dtype: Literal["fp32", "bf16"] = Field(default="fp32", description="dtype of the optimizer's states "
                                                     "(Adam's moments); master weights and gradients stay fp32")
    grad_dtype: Literal["fp32", "bf16"] = Field(
        default="fp32", description="[issue 17] LLM layouts: dtype of the main-gradient buffer the weight gradients "
        "accumulate into and the data-parallel reduce-scatter / all-reduce moves. Megatron-Core's DDP allocates it as "
        "``torch.float if ddp_config.grad_reduce_in_fp32 else param.dtype`` (megatron/core/distributed/"
        "distributed_data_parallel.py): fp32 with --grad-reduce-in-fp32 (gpusim's default, today's results), the "
        "parameters' bf16 without it, as the Megatron-Bridge performance recipes of DeepSeek-V3, GPT-OSS and Qwen3 "
        "set (``grad_reduce_in_fp32 = False`` in scripts/performance/configs/*/*_llm_pretrain.py)")
    activation_offload_layers: int = Field(default=0, ge=0, le=100_000, description="[issue 17] transformer layers "
                                           "per pipeline stage whose saved activations go to host memory in the "
                                           "forward pass and come back before their backward (Megatron-Core "
                                           "--cpu-offloading-num-layers, Transformer Engine's CPU offload)")
    fp8_param_gather: bool = Field(default=True, description="[issue 17] fp8/mxfp8 with a sharded optimizer "
                                   "(zero1 = Megatron's distributed optimizer, FSDP): the parameters are kept as FP8 "
                                   "tensors, no bf16 copy (Megatron-Core --fp8-param-gather, set by Megatron-Bridge's "
                                   "FP8 recipes); with ddp the bf16 weights stay beside their FP8 copies")
    fp8_transpose_cache: bool = Field(default=True, description="[issue 17] fp8 with per-tensor scaling on Hopper: "
                                      "keep the FP8 weights' transposes over the micro-batches (Transformer Engine's "
                                      "default); False = Megatron-Core disable_parameter_transpose_cache, 1 byte per "
                                      "weight less, re-made every backward pass")
    bf16_layers_start: int = Field(default=0, ge=0, le=100_000, description="[stop 57] with fp8/mxfp8/nvfp4 on an "
                                   "LLM layout: the first N transformer layers keep their linear layers in bf16 "
                                   "(Megatron-Core --first-last-layers-bf16 --num-layers-at-start-in-bf16 N)")
    bf16_layers_end: int = Field(default=0, ge=0, le=100_000, description="[stop 57] the same for the last N layers "
                                 "(--num-layers-at-end-in-bf16 N; Megatron-Bridge's FP8 current-scaling recipe keeps "
                                 "1 + 1, its Nemotron 3 Super NVFP4 recipe the last 14)")
    fp8_recipe: Literal["delayed", "current"] = Field(default="delayed", description="fp8: Transformer Engine's "
                                                      "per-tensor scaling from the amax history (delayed) or of the "
                                                      "tensor itself (current)")
    cp_comm: CpComm = Field(
        default="ring", description="context-parallel exchange: ring attention (point to point, overlapped), "
        "all-gather (Llama 3), a2a (DeepSpeed-Ulysses: all-to-alls over the heads; Transformer Engine cp_comm_type "
        "a2a) or a2a+p2p (Ulysses inside each NVLink domain, ring attention across them; TE's hierarchical type)")
    cross_entropy: CrossEntropy = Field(
        default="te", description="[issue 17] LLM layouts: the loss's vocabulary-parallel cross entropy "
        "(gpusim.model.llm.CROSS_ENTROPY_BYTES): te (Transformer Engine's Triton kernels, Megatron "
        "--cross-entropy-loss-fusion --cross-entropy-fusion-impl te: the bf16 logits read twice and overwritten by "
        "their gradient, 6 bytes per logit, no fp32 copy; what tuned recipes select), native (Megatron-Core's fused "
        "version, the impl's default and Megatron-Bridge's unless a recipe picks te: an fp32 copy, 40 bytes) or "
        "unfused (Megatron-LM without --cross-entropy-loss-fusion: 52 bytes)")
    grad_accum_fusion: bool = Field(default=True, description="LLM layouts: weight gradients accumulated into the "
                                                              "fp32 main gradients inside the GEMM (Megatron "
                                                              "--gradient-accumulation-fusion) rather than by a "
                                                              "separate add per micro-batch")
    tp_async_bwd: bool = Field(default=True, description="LLM layouts: the backward pass's tensor-parallel "
                                                         "collectives run beside the weight- and data-gradient GEMMs "
                                                         "(Megatron-LM's asynchronous all-reduce / all-gather / "
                                                         "reduce-scatter; --no-async-tensor-model-parallel-allreduce "
                                                         "turns it off)")
    pp_p2p_overlap: bool | None = Field(default=None, description="[issue 17] LLM layouts with interleaving (vp > 1): "
                                        "the sends between pipeline stages run beside the next chunk's compute "
                                        "(Megatron-Core overlap_p2p_comm). None: Megatron-Core's default, on with "
                                        "interleaving (Megatron-LM --no-overlap-p2p-communication turns it off; "
                                        "Megatron-Bridge's comm_overlap sets it for pp > 1 and vp > 1); the "
                                        "non-interleaved 1F1B schedule never overlaps them")
    tp_comm_overlap: bool = Field(default=False, description="[issue 17] LLM layouts with sequence parallelism: "
                                                             "Transformer Engine's userbuffers overlap of the "
                                                             "tensor-parallel all-gathers / reduce-scatters with their "
                                                             "GEMMs, split in tp chunks (NeMo / Megatron-Bridge "
                                                             "tp_comm_overlap)")
    # [issue 17] the attention kernel and the memory a fit must leave free (gpusim.rows, gpusim.model.memory)
    attention: Attention | None = Field(
        default=None, description="attention implementation: flash (one fused kernel native to the GPU generation: "
        "FlashAttention-2 on Ampere, cuDNN / FlashAttention-3 on Hopper and Blackwell), flash2 (FlashAttention-2 "
        "itself, slower than the native kernel on Hopper and Blackwell), triton (the Triton FlashAttention of "
        "2022-23, e.g. MPT's attn_impl triton), or unfused (Q K^T, softmax, A V as separate kernels, the s x s "
        "scores kept: Megatron-LM before FlashAttention); None: the model's own (a config.json's "
        "_attn_implementation, else flash). flash2 and triton put the row on the per-GEMM transformer path")
    mtp_layers: int | None = Field(
        default=None, ge=0, le=16, description="[issue 17] multi-token prediction modules trained with the model "
        "(Megatron-Core --mtp-num-layers; DeepSeek-V3 report section 2.2): each one more transformer layer of the "
        "model's last kind after the last layer, a 2h -> h projection and one more pass through the shared LM head "
        "with its own loss, on the last pipeline stage (gpusim.workload.transformer.TransformerSpec.mtp_layers). "
        "None: the model's own (a config.json's num_nextn_predict_layers: DeepSeek-V3 1); 0 trains without them")
    mtp_shared: bool | None = Field(
        default=None, description="[issue 17] the multi-token prediction passes run one module's weights again "
        "(Megatron-Core mtp_use_repeated_layer: Nemotron 3 Super's recipe trains mtp_num_layers 2 through one "
        "module): the passes' compute and activations, one module's parameters, gradients and optimizer state. "
        "None: the model's own (a config.json's mtp_use_repeated_layer or mtp_share_layers, else separate modules)")
    cuda_graph_scope: tuple[CudaGraphScope, ...] = Field(
        default=(), description="[issue 17] LLM layouts: the parts of each layer Megatron-Core captures in CUDA graphs "
        "(--cuda-graph-scope): attn, mlp (a dense layer's), moe_router, moe_preprocess (with moe_router), moe (the "
        "whole MoE layer, static shapes), or full_iteration (every micro-batch's forward and backward, alone); a "
        "captured part costs the CPU one graph replay instead of its launches (gpusim.model.graphs). Empty: eager")
    memory_headroom_gib: float | None = Field(default=None, ge=0, le=100_000, description="GiB of GPU memory a "
                                              "layout must leave free beyond what it is predicted to use; None: "
                                              "its NCCL communicators' (gpusim.model.memory.headroom_bytes)")
    memory_headroom_frac: float | None = Field(default=None, ge=0, lt=1, description="the same as a fraction of the "
                                               "GPU's memory (give this or memory_headroom_gib)")

    @model_validator(mode="before")
    @classmethod
    def _micro_batch_alias(cls, data):
        if isinstance(data, dict) and "micro_batch" in data:
            data = dict(data)
            mb = data.pop("micro_batch")
            if mb is not None:
                data.setdefault("per_gpu_batch", mb)
        if isinstance(data, dict) and data.get("precision") in PRECISION_ALIASES:  # [issue 12] fp8-cs, fp8-mx
            data = dict(data)
            data["precision"], recipe = PRECISION_ALIASES[data["precision"]]
            if recipe:
                data["fp8_recipe"] = recipe
        if isinstance(data, dict) and data.get("cuda_graph_scope") is not None:  # [issue 17] one order, no repeats
            data = dict(data)
            scopes = data["cuda_graph_scope"]
            data["cuda_graph_scope"] = tuple(dict.fromkeys([scopes] if isinstance(scopes, str) else scopes))
        rc = data.get("recompute") if isinstance(data, dict) else None
        if isinstance(rc, str) and "+" in rc:  # [issue 17] a module set by name (MODULE_SET_RECOMPUTES)
            names = tuple(m for m in rc.split("+") if m)
            if names and all(m in typing.get_args(RecomputeModule) for m in names):
                data = dict(data)
                data["recompute"] = "selective" if "core_attn" in names else "none"
                data["recompute_modules"] = tuple(data.get("recompute_modules") or ()) + names
        mods = data.get("recompute_modules") if isinstance(data, dict) else None
        if mods is not None:  # [issue 12] core_attn is gpusim's selective recomputation
            data = dict(data)
            mods = tuple(dict.fromkeys(mods))
            if "core_attn" in mods:
                if data.get("recompute") not in (None, "selective"):
                    raise ValueError(f"recompute_modules core_attn is recompute selective, not {data['recompute']!r}")
                data["recompute"] = "selective"
                mods = tuple(m for m in mods if m != "core_attn")
            data["recompute_modules"] = mods
        return data

    @model_validator(mode="after")
    def _check(self):
        if self.cpu_offload and self.kind in ("dp", "ddp"):
            raise ValueError(f"cpu_offload needs a sharded strategy (zero1/2/3 or fsdp-*), not {self.kind!r}")
        if self.cpu_offload and self.optimizer == "muon":  # [issue 17] its Newton-Schulz GEMMs run on the GPU
            raise ValueError("cpu_offload steps Adam or SGD on the CPU; Muon's orthogonalisation is GPU work: leave "
                             "cpu_offload off with optimizer muon")
        if self.optimizer_impl == "forloop" and (self.is_llm or self.kind not in ("dp", "ddp")):
            # [issue 18] ZeRO and FSDP step flat shards, Megatron-Core's optimizers multi-tensor or fused kernels
            raise ValueError(f"optimizer_impl forloop (torch.optim's loop over parameter tensors) is modelled for "
                             f"dp and ddp on the data-parallel path, not {self.llm_reason() if self.is_llm else repr(self.kind)}: "
                             f"sharded strategies and Megatron-Core step flat buffers; use --optimizer-impl foreach "
                             f"or fused")
        if self.is_llm and self.kind in ("dp", "fsdp-hybrid"):
            if self.attention in ("flash2", "triton"):  # [issue 18] the kernel's rate lives on the per-GEMM path
                raise ValueError(f"attention {self.attention} is modelled on the per-GEMM transformer path, which "
                                 f"runs with ddp, zero1/2/3 or fsdp-full / fsdp-grad-op, not {self.kind!r}: choose "
                                 f"one of those, or --attention flash")
            raise ValueError(f"{self.llm_reason()} runs on the LLM layout path, with ddp, zero1 (distributed "
                             f"optimizer) or FSDP, not {self.kind!r}: choose one of those")
        if self.recompute_modules and self.recompute_mode == "full":
            raise ValueError(f"recompute_modules {' '.join(self.recompute_modules)} with full recomputation: full "
                             f"recomputation already recomputes every module (use --recompute none or selective)")
        if self.pp > 1 and self.kind not in PIPELINE_STRATEGIES:
            raise ValueError(f"pipeline parallelism (pp {self.pp}) combines with ddp or zero1 (Megatron's distributed "
                             f"optimizer), not {self.kind!r}: use --strategy zero1")
        scopes = set(self.cuda_graph_scope)  # [issue 17] Megatron-Core's rules (NVIDIA/Megatron-LM PR #1917)
        if "full_iteration" in scopes and len(scopes) > 1:
            raise ValueError(f"cuda graph scope full_iteration captures the whole forward and backward pass and takes "
                             f"no other scope (got {' '.join(self.cuda_graph_scope)})")
        if "moe_preprocess" in scopes and "moe_router" not in scopes:
            raise ValueError("cuda graph scope moe_preprocess must be used together with moe_router (Megatron-Core)")
        if "moe" in scopes and scopes & {"moe_router", "moe_preprocess"}:
            raise ValueError("cuda graph scope moe already captures the router and the dispatcher's preprocessing: "
                             "give moe, or moe_router (and moe_preprocess), not both")
        if self.sync_every_micro_batch and (self.kind not in ("ddp", "zero1") or self.is_llm):  # [issue 18]
            raise ValueError(f"sync_every_micro_batch (--sync-every-micro-batch) is a data-parallel loop under ddp or "
                             f"zero1 that never enters DDP's no_sync(); not {self.kind!r}"
                             + (" with an LLM layout (Megatron's layouts reduce once per step)" if self.is_llm else "")
                             + ": drop it")
        if self.memory_headroom_gib is not None and self.memory_headroom_frac is not None:  # [issue 17]
            raise ValueError("give the memory headroom once: in GiB (memory_headroom_gib) or as a fraction of the "
                             "GPU's memory (memory_headroom_frac), not both")
        return self

    @property
    def is_llm(self) -> bool:
        """An LLM layout (tensor or pipeline parallelism, or a recomputation mode): the per-GEMM transformer path."""
        return (self.tp > 1 or self.pp > 1 or self.vp > 1 or self.cp > 1 or self.ep > 1 or self.expert_tp > 1
                or self.moe_capacity_factor is not None or self.recompute is not None or self.ep_overlap != "none"
                or self.moe_dispatcher != "alltoall" or self.ep_fp8_dispatch or self.moe_router_padding
                # ([issue 17] the routing figures moe_imbalance_frac / moe_expert_skew_frac are not named here: they
                # matter only where the experts are split, ep > 1, which is an LLM layout already)
                or self.moe_fused_mlp
                or bool(self.recompute_modules)
                or self.fp8_activations or self.activation_offload_layers > 0
                or self.grad_dtype != "fp32"  # [issue 17] Megatron's main-gradient buffer
                or self.attention in ("flash2", "triton")  # [issue 18] an attention kernel's own rate
                or bool(self.cuda_graph_scope)  # [issue 17] Megatron-Core's CUDA graphs
                or self.bf16_layers_start > 0 or self.bf16_layers_end > 0  # [stop 57] a transformer's bf16 layers
                or self.ddp_bucket_params is not None)  # [stop 58] Megatron-Core's gradient buckets

    def llm_reason(self) -> str:
        """The first setting that puts this strategy on the LLM layout path (:attr:`is_llm`), in the CLI's words."""
        degrees = [f"{n} {v}" for n, v in (("tp", self.tp), ("pp", self.pp), ("vp", self.vp), ("cp", self.cp),
                                           ("ep", self.ep), ("expert tp", self.expert_tp)) if v > 1]
        if degrees:
            return "tensor/pipeline/expert parallelism (" + ", ".join(degrees) + ")"
        if self.cuda_graph_scope:
            return "--cuda-graph-scope " + " ".join(self.cuda_graph_scope)
        if self.grad_dtype != "fp32":
            return f"--grad-dtype {self.grad_dtype}"
        if self.recompute is not None or self.recompute_modules:
            return "a recomputation mode (--recompute / --recompute-modules)"
        if self.bf16_layers_start or self.bf16_layers_end:  # [stop 57]
            return f"--bf16-layers {self.bf16_layers_start} {self.bf16_layers_end}"
        if self.ddp_bucket_params is not None:  # [stop 58]
            return f"--ddp-bucket-size {self.ddp_bucket_params:.0f}"
        return "an LLM layout option (MoE, FP8 activations or activation offload)"

    @property
    def micro_batch(self) -> int:
        return self.per_gpu_batch

    @property
    def recompute_mode(self) -> str:
        return self.recompute or ("full" if self.activation_checkpointing else "none")

    @property
    def sp_on(self) -> bool:
        return self.tp > 1 if self.sp is None else bool(self.sp and self.tp > 1)

    @property
    def code(self) -> int:
        return STRATEGY_CODES[self.kind]

    @property
    def shard_stage(self) -> int:
        return SHARD_STAGE_BY_CODE[self.code]

    @property
    def bucket_bytes(self) -> float:
        return self.bucket_mib * units.MIB

    @property
    def global_batch_per_gpu(self) -> int:
        return self.per_gpu_batch * self.accum
