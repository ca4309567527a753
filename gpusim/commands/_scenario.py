"""Scenario flags shared by `predict`, `scale` and `plan`-like commands, and their conversion to a Scenario."""

from __future__ import annotations

import argparse

PRECISIONS = ("fp32", "tf32", "amp_fp16", "amp_bf16", "bf16", "fp8", "mxfp8", "nvfp4", "fp8-cs", "fp8-mx")
STRATEGIES = ("dp", "ddp", "zero1", "zero2", "zero3", "fsdp-full", "fsdp-grad-op", "fsdp-hybrid")


def scenario_type(field: str, unit: str = ""):
    """argparse type: the range of the Scenario field (checked when the flag is given)."""
    from gpusim.checks import FieldBound

    return FieldBound("gpusim.scenario:Scenario", field, unit)


def strategy_type(field: str, unit: str = ""):
    from gpusim.checks import FieldBound

    return FieldBound("gpusim.strategy:Strategy", field, unit)


#: [issue 17] ``--optimizer``'s help (predict, compare, sweep and plan)
OPTIMIZER_HELP = ("muon [issue 17]: Muon on the hidden 2-D weights (one fp32 momentum, Newton-Schulz GEMMs in the "
                  "step) and AdamW on the rest (gpusim.optimizers); transformers only")


def optimizer_choices() -> tuple[str, ...]:
    """The optimizers gpusim models (gpusim.strategy.Optimizer), for ``--optimizer``'s choices."""
    from typing import get_args

    from gpusim.strategy import Optimizer

    return get_args(Optimizer)


def add_scenario_args(p, *, batch_required: bool = True) -> None:
    """The scenario flags; ``batch_required``: a data-parallel run must give --per-gpu-batch (checked in
    :func:`resolve`, after the model id, so that a typo in it is the error shown)."""
    p.set_defaults(batch_required=batch_required)
    w = p.add_argument_group("workload")
    w.add_argument("--model", required=True, help="catalogue id (`gpusim models`), e.g. resnet50, bert-large, llama2-7b, "
                   "or the path of a Hugging Face config.json")
    w.add_argument("--seq-len", type=scenario_type("seq_len"),
                   help="sequence length for sequence models (one sample = one sequence)")
    add_attention_arg(w)
    add_cross_entropy_arg(w)
    add_mtp_arg(w)
    h = p.add_argument_group("hardware")
    h.add_argument("--gpu", help="GPU id (`gpusim hw list --kind gpu`); default the node template's")
    h.add_argument("--node", help="node template id (`gpusim hw list --kind node`)")
    h.add_argument("--gpus", type=scenario_type("gpus"), help="total GPUs (default 1, or the calibrated machine's count)")
    h.add_argument("--nodes", type=scenario_type("nodes"),
                   help="nodes; the GPUs are split evenly (default: as many as the node template's GPUs per node "
                        "imply, else 1)")
    h.add_argument("--intra", help="intra-node link id (default: the GPU's usual fabric)")
    h.add_argument("--intra-topology", choices=("nvswitch", "nvlink-mesh", "nvlink-bridge-pairs", "pcie-switch",
                                                "pcie-host", "pcie-cross-socket"),
                   help="how the GPUs of a node are wired (default: the node's)")
    h.add_argument("--no-p2p", action="store_true",
                   help="GPU peer-to-peer disabled (no peer access, or NCCL_P2P_DISABLE=1): every transfer between "
                        "the node's GPUs, NVLink included, staged through host memory")
    h.add_argument("--topo", metavar="FILE", help="the output of `nvidia-smi topo -m` on your node: sets how its GPUs "
                                                  "are wired (see `gpusim topo FILE`)")
    h.add_argument("--topo-p2p", metavar="FILE", help="the output of `nvidia-smi topo -p2p r` (peer-to-peer support)")
    h.add_argument("--inter", help="inter-node link id (default: the node's NICs)")
    h.add_argument("--nics-per-node", type=scenario_type("nics_per_node"),
                   help="GPU-facing NICs per node (default: the node's, or one per GPU)")
    h.add_argument("--oversubscription", type=scenario_type("oversubscription"), default=1.0,
                   help="network oversubscription (1 = non-blocking)")
    h.add_argument("--cpu-cores-per-gpu", type=scenario_type("cpu_cores_per_gpu"),
                   help="CPU cores per GPU for data loading (default: the node's)")
    h.add_argument("--storage-gbyte-per-s", type=scenario_type("storage_gbyte_per_s", "GB/s"),
                   help="storage read bandwidth per node, GB/s")
    h.add_argument("--slowest-gpu-frac", type=scenario_type("slowest_gpu_speed_frac"), default=1.0,
                   help="speed of the slowest GPU relative to the rest, e.g. 0.8 for one throttled card")
    s = p.add_argument_group("strategy")
    s.add_argument("--strategy", choices=STRATEGIES, default="ddp", help="default ddp")
    s.add_argument("--per-gpu-batch", "--micro-batch", dest="per_gpu_batch", type=strategy_type("per_gpu_batch"),
                   help="micro-batch per GPU (samples; sequences for a language model); needed for a data-parallel "
                        "run, default 1 for an LLM layout (--tp/--pp/--cp/--ep/--global-batch)")
    s.add_argument("--precision", choices=PRECISIONS, default="amp_bf16", help="default amp_bf16")
    s.add_argument("--accum", type=strategy_type("accum"), default=1, help="gradient accumulation steps (default 1)")
    s.add_argument("--sync-every-micro-batch", action="store_true",
                   help="[issue 18] with --accum > 1 under ddp or zero1: every micro-batch's backward all-reduces the "
                        "gradients, as a loop that never enters DDP's no_sync() does (accum x the communication)")
    s.add_argument("--optimizer", choices=optimizer_choices(), default="adam", help=OPTIMIZER_HELP)
    s.add_argument("--optimizer-impl", choices=("foreach", "fused", "forloop"), default="foreach",
                   help="[issue 18] how the optimizer step launches its kernels: foreach (PyTorch >= 2.0's default) "
                        "or fused, a few kernels a step; forloop (torch.optim before 2.0, or foreach=False): a few "
                        "kernels per parameter tensor (dp/ddp; models that count their tensors)")
    s.add_argument("--checkpointing", action="store_true", help="full activation checkpointing")
    s.add_argument("--cpu-offload", action="store_true", help="optimizer on the CPU (sharded strategies)")
    s.add_argument("--bucket-mib", type=strategy_type("bucket_mib", "MiB"), default=25.0,
                   help="DDP bucket size (default 25 MiB, PyTorch DDP's bucket_cap_mb; LLM layouts bucket as "
                        "Megatron-Core does: max(40 M, 1 M x dp) parameters)")
    s.add_argument("--workers", type=strategy_type("num_workers"),
                   help="DataLoader workers per GPU (default: data already prepared; the "
                                               "loader the prediction needs is reported)")
    s.add_argument("--no-pin-memory", action="store_true", help="DataLoader pin_memory=False")
    add_headroom_arg(s)
    m = p.add_argument_group("measurements")
    m.add_argument("--baseline-throughput", type=scenario_type("baseline_throughput", "samples/s"), metavar="SAMPLES_PER_S",
                   help="measured one-GPU throughput at this per-GPU batch and precision: replaces the modelled "
                        "compute time, and the model predicts the scaling from there")
    m.add_argument("--calibration", metavar="FILE", help="calibration file from `gpusim fit`")


def add_attention_arg(g) -> None:
    """[issue 17] ``--attention flash|flash2|triton|unfused`` (Strategy.attention; flash2 and triton: issue 18)."""
    from typing import get_args

    from gpusim.strategy import Attention

    g.add_argument("--attention", choices=get_args(Attention),
                   help="attention implementation: flash (one fused kernel native to the GPU: FlashAttention-2 on "
                        "Ampere, cuDNN / FlashAttention-3 on Hopper and Blackwell), flash2 (FlashAttention-2 itself, "
                        "1.75x slower than the native kernel on Hopper and Blackwell), triton (the Triton "
                        "FlashAttention of 2022-23, e.g. MPT attn_impl triton), or unfused (Q K^T, softmax and A V "
                        "apart, the s x s scores kept, as Megatron-LM ran before FlashAttention); default the model's "
                        "(a config.json's _attn_implementation: eager = unfused; else flash)")


def add_mtp_arg(g) -> None:
    """[issue 17] ``--mtp-layers N`` (Strategy.mtp_layers): multi-token prediction modules trained with the model."""
    g.add_argument("--mtp-layers", type=strategy_type("mtp_layers"), metavar="N",
                   help="multi-token prediction modules trained with the model (Megatron-Core --mtp-num-layers; "
                        "DeepSeek-V3 report section 2.2): each one more layer of the model's last kind, a 2h -> h "
                        "projection and one more pass through the LM head with its own loss, on the last pipeline "
                        "stage (in the empty slots of an uneven split); default the model's own (a config.json's "
                        "num_nextn_predict_layers: DeepSeek-V3 1), 0 to train without them")
    g.add_argument("--mtp-shared", action=argparse.BooleanOptionalAction, default=None,
                   help="the multi-token prediction passes run one module's weights again (Megatron-Core "
                        "--mtp-use-repeated-layer; Nemotron 3 Super's recipe: --mtp-layers 2 --mtp-shared): their "
                        "compute and activations for every pass, the parameters and optimizer state of one module; "
                        "--no-mtp-shared gives each pass its own; default the model's own (a config's "
                        "mtp_use_repeated_layer)")


def add_cross_entropy_arg(g) -> None:
    """[issue 17] ``--cross-entropy te|native|unfused`` (Strategy.cross_entropy)."""
    from typing import get_args

    from gpusim.strategy import CrossEntropy

    g.add_argument("--cross-entropy", dest="cross_entropy", choices=get_args(CrossEntropy),
                   help="LLM layouts: the loss's vocabulary-parallel cross entropy: te (Transformer Engine's kernels, "
                        "--cross-entropy-fusion-impl te: 6 bytes per logit, no fp32 copy; the default, what tuned "
                        "recipes select), native (Megatron-Core's fused version, Megatron-Bridge's default: 40 bytes "
                        "and an fp32 copy of the logits) or unfused (Megatron-LM without --cross-entropy-loss-fusion: "
                        "52 bytes); it matters for large vocabularies and small hidden sizes")


def parse_headroom(text: str) -> dict:
    """[issue 17] ``--memory-headroom`` as Strategy fields: ``2GiB`` / ``2048MiB`` / ``2`` (>= 1: GiB) or ``0.05`` /
    ``5%`` (a fraction of the GPU's memory). Raises ``argparse.ArgumentTypeError`` with the accepted forms."""
    from gpusim import units

    t = str(text).strip().lower().replace(" ", "")
    forms = "give GiB (2, 2GiB, 1536MiB) or a fraction of the GPU's memory (0.05, 5%)"
    try:
        if t.endswith("%"):
            frac = float(t[:-1]) / 100.0
        elif t.endswith(("gib", "gb", "mib", "mb")):
            unit = next(u for u in ("gib", "gb", "mib", "mb") if t.endswith(u))
            v = float(t[: -len(unit)])
            per_unit = {"gib": 1.0, "gb": units.GB / units.GIB, "mib": units.MIB / units.GIB, "mb": units.MB / units.GIB}
            gib = per_unit[unit] * v
            if not (0.0 <= gib < 1e5):
                raise ValueError
            return {"memory_headroom_gib": gib}
        else:
            v = float(t)
            if v >= 1.0:
                if v >= 1e5:
                    raise ValueError
                return {"memory_headroom_gib": v}
            frac = v
    except (ValueError, StopIteration):
        raise argparse.ArgumentTypeError(f"invalid memory headroom {text!r}: {forms}") from None
    if not (0.0 <= frac < 1.0) or frac != frac:
        raise argparse.ArgumentTypeError(f"memory headroom {text!r} is not a fraction in [0, 1) of the GPU's memory: "
                                         f"{forms}")
    return {"memory_headroom_frac": frac}


def add_headroom_arg(g) -> None:
    g.add_argument("--memory-headroom", type=parse_headroom, metavar="GIB_OR_FRAC",
                   help="GPU memory a layout must leave free beyond its predicted use: GiB (2, 2GiB) or a fraction "
                        "of the GPU's memory (0.05, 5%%); default: what the NCCL communicators beyond the first "
                        "take, 688 MB each (a layout holds one per parallel group of tp, pp, cp, dp, ep)")


def add_layout_args(p) -> None:
    """LLM layout flags (Megatron-style tensor, sequence and pipeline parallelism); see gpusim.layout."""
    g = p.add_argument_group("LLM layout")
    g.add_argument("--tp", type=strategy_type("tp"), help="tensor-parallel degree (default 1)")
    g.add_argument("--pp", type=strategy_type("pp"), help="pipeline stages (default 1)")
    g.add_argument("--vp", type=strategy_type("vp"), help="model chunks per pipeline stage: interleaved 1F1B when > 1 (default 1)")
    g.add_argument("--sp", action=argparse.BooleanOptionalAction, default=None,
                   help="sequence parallelism (default: on when tp > 1)")
    g.add_argument("--global-batch", type=strategy_type("global_batch"), help="sequences per optimizer step: accumulation = global / "
                                                    "(micro-batch x dp)")
    from gpusim.strategy import MODULE_SET_RECOMPUTES

    g.add_argument("--recompute", choices=("none", "selective", "full", *MODULE_SET_RECOMPUTES),
                   help="activation recomputation (selective = attention core only; a '+'-joined module set, as the "
                        "layout search names its layouts, = none with those --recompute-modules)")
    g.add_argument("--force-tp", action="store_true", help="allow tp beyond one NVLink domain")
    # [issue 12] context parallelism
    g.add_argument("--cp", type=strategy_type("cp"), help="context-parallel degree: the sequence split over cp ranks (default 1)")
    g.add_argument("--uneven-pp", action="store_true", default=None,
                   help="allow pipeline stages with unequal layers (each charged the fullest stage's)")
    g.add_argument("--ep", type=strategy_type("ep"), help="expert-parallel degree (mixture-of-experts models; default 1)")
    g.add_argument("--expert-tp", type=strategy_type("expert_tp"), help="expert tensor parallelism: each expert split over T ranks")
    g.add_argument("--moe-capacity-factor", type=strategy_type("moe_capacity_factor"),
                   help="expert capacity as a multiple of the balanced load (tokens beyond it dropped, experts "
                        "padded to it); default the model's (dropless)")
    add_moe_args(g)
    add_memory_args(g)
    g.add_argument("--cp-comm", choices=cp_comm_choices(),
                   help="context-parallel exchange: ring attention (default), all-gather (Llama 3), a2a "
                        "(DeepSpeed-Ulysses all-to-alls over the heads: cp must divide each tp rank's attention and "
                        "K/V heads) or a2a+p2p (Ulysses among the cp ranks of one NVLink domain, ring attention "
                        "across domains: Megatron-Core --hierarchical-context-parallel-sizes with the domain's ranks "
                        "inside)")
    g.add_argument("--no-overlap-grad-reduce", action="store_true",
                   help="reduce gradients after the backward pass instead of during it")
    g.add_argument("--ddp-bucket-size", type=strategy_type("ddp_bucket_params"), metavar="PARAMS",
                   help="[stop 58] LLM layouts: parameters per gradient bucket (Megatron-Core --ddp-bucket-size; "
                        "default Megatron-Core's max(40M, 1M x dp), e.g. 768e6 as NVIDIA's MLPerf Llama 3.1 8B "
                        "configs set): each bucket's reduce-scatter and all-gather pays the collective's latency once")
    g.add_argument("--tp-comm-overlap", action="store_true", default=None,
                   help="with tp > 1 and sequence parallelism: Transformer Engine's userbuffers overlap of the TP "
                        "all-gathers / reduce-scatters with their GEMMs (NeMo / Megatron-Bridge tp_comm_overlap)")
    g.add_argument("--no-overlap-p2p-comm", action="store_true",
                   help="[issue 17] with vp > 1: the sends between pipeline stages block the schedule instead of "
                        "running beside the next chunk's compute (Megatron-LM --no-overlap-p2p-communication; the "
                        "SC'21 / 2022 Megatron-LM codes of the paper tables ran so)")


#: [issue 12] the MoE all-to-all's options (Strategy fields of the same names)
MOE_OPTIONS = ("ep_overlap", "moe_dispatcher", "ep_fp8_dispatch", "moe_router_padding", "moe_fused_mlp",
               "moe_imbalance_frac", "moe_expert_skew_frac")


def add_moe_args(g) -> None:
    """The MoE all-to-all's flags (predict, sweep, plan): schedule, dispatcher, FP8 dispatch."""
    g.add_argument("--ep-overlap", choices=("none", "1f1b", "dualpipe"),
                   help="MoE all-to-all schedule: none (default, Megatron-Core's), 1f1b (Megatron-Core "
                        "--overlap-moe-expert-parallel-comm) or dualpipe (DeepSeek-V3's bidirectional pipeline)")
    g.add_argument("--moe-dispatcher", choices=("alltoall", "deepep"),
                   help="MoE token dispatcher: alltoall (default, one NCCL all-to-all) or deepep (Megatron-Core's "
                        "flex dispatcher, DeepEP / HybridEP: across nodes once per node over InfiniBand, forwarded "
                        "over NVLink, node-limited routing; inside one NVLink domain the flat all-to-all; its "
                        "permutation fused, no FP8 padding copies)")
    g.add_argument("--ep-fp8-dispatch", action="store_true", default=None,
                   help="with --precision fp8: dispatch in FP8 (1x128 scales), combine in bf16 (DeepSeek-V3)")
    g.add_argument("--moe-imbalance", dest="moe_imbalance_frac", type=strategy_type("moe_imbalance_frac"),
                   metavar="FRAC",
                   help="[issue 17] the busiest expert-parallel rank's routed tokens over the mean, minus 1, at every "
                        "MoE layer (default: the 1-3%% sampling spread of a balanced router, what force-balanced "
                        "benchmarks run). Measured on Megatron-Core, 64 GB200, EP64: a learned router with the "
                        "auxiliary-loss-free bias 0.34 at the start of training, 0.21 after 18 steps (marin-community/"
                        "marin issue #7668). sweep and plan take it as given at every ep they try; "
                        "--moe-expert-skew derives it per ep")
    g.add_argument("--moe-expert-skew", dest="moe_expert_skew_frac", type=strategy_type("moe_expert_skew_frac"),
                   metavar="CV",
                   help="[issue 17] a learned router's popularity skew, the coefficient of variation of the experts' "
                        "shares of the routed tokens: the busiest expert-parallel rank follows from each layout's ep "
                        "(more at a larger ep), so sweep and plan weigh it. From the same measurement: 0.29 at the "
                        "start of training, 0.18 after 18 steps. Trained checkpoints on real text (B. Ma et al., "
                        "'Diagnosing Overhead in Dispatch Operations', arXiv 2605.20982, H100, EP 4-32): the experts' "
                        "loads have a Gini coefficient of 0.105 (DeepSeek-MoE-16B) and 0.150 (Nemotron-30B) on "
                        "wikitext and above 0.24 for MLA and gated-DeltaNet models; for normally spread shares "
                        "CV = Gini x sqrt(pi): 0.19, 0.27, above 0.43")
    g.add_argument("--moe-router-padding", action="store_true", default=None,
                   help="[issue 17] with --precision fp8/mxfp8 and the alltoall dispatcher: pad each expert's tokens "
                        "in the router (Megatron-Core --moe-router-padding-for-fp8) instead of copying the experts' "
                        "rows into a padded buffer and back")
    g.add_argument("--moe-fused-mlp", action="store_true", default=None,
                   help="[issue 17] with --precision mxfp8 on Blackwell: the experts run Transformer Engine's CuTe "
                        "DSL fused grouped MLP (Megatron-Core --use-transformer-engine-op-fuser, "
                        "--moe-mlp-glu-interleave-size 32, NVTE_CUTEDSL_FUSED_GROUPED_MLP=1): one kernel per GEMM "
                        "over all local experts, the SwiGLU and its quantisation in the GEMMs' epilogues")


#: [issue 12] memory-saving options (Strategy fields of the same names)
MEMORY_OPTIONS = ("recompute_modules", "fp8_activations", "opt_state_dtype", "activation_offload_layers",
                  "grad_dtype", "cuda_graph_scope")  # [issue 17] grad_dtype, CUDA graphs


def cp_comm_choices() -> tuple[str, ...]:
    """[issue 17] ``--cp-comm``'s choices (predict, sweep, compare, plan): Strategy.cp_comm's."""
    import typing

    from gpusim.strategy import CpComm

    return typing.get_args(CpComm)


def add_graph_args(g) -> None:
    """[issue 17] Megatron-Core's CUDA-graph scopes (predict, sweep, compare, plan; gpusim.model.graphs)."""
    import typing

    from gpusim.strategy import CudaGraphScope

    g.add_argument("--cuda-graph-scope", nargs="+", metavar="SCOPE", choices=typing.get_args(CudaGraphScope),
                   help="[issue 17] LLM layouts: the parts of each layer captured in CUDA graphs (Megatron-Core "
                        "--cuda-graph-scope): attn, mlp, moe_router, moe_preprocess (with moe_router), moe, or "
                        "full_iteration alone; a captured part costs the CPU one replay instead of its launches "
                        "(default: eager)")


def add_memory_args(g) -> None:
    """Memory-saving flags (DeepSeek-V3 sections 3.2.3 and 3.3.2, Megatron-Core's names)."""
    import typing

    from gpusim.strategy import RecomputeModule

    g.add_argument("--recompute-modules", nargs="+", choices=typing.get_args(RecomputeModule),
                   help="modules recomputed in the backward pass (Megatron-Core --recompute-modules): core_attn "
                        "(= --recompute selective), layernorm, mla_up_proj (MLA models), moe_act (MoE models), mlp "
                        "(a dense layer's whole MLP), moe (an MoE layer's whole MoE block: router, all-to-alls, "
                        "experts)")
    g.add_argument("--fp8-activations", action="store_true", default=None,
                   help="with --precision fp8/mxfp8: keep the linear layers' and SwiGLU's inputs for the backward "
                        "pass in FP8 with fine-grained scales (DeepSeek-V3 section 3.3.2)")
    g.add_argument("--opt-state-dtype", choices=("fp32", "bf16"),
                   help="dtype of Adam's moments (default fp32; bf16 as DeepSeek-V3 and Megatron-Core "
                        "--exp-avg-dtype/--exp-avg-sq-dtype bf16); master weights and gradients stay fp32")
    g.add_argument("--grad-dtype", choices=("fp32", "bf16"),
                   help="[issue 17] LLM layouts: dtype of Megatron's main-gradient buffer, which the data-parallel "
                        "reduction moves (default fp32 = --grad-reduce-in-fp32; bf16 as Megatron-Bridge's MoE "
                        "performance recipes set with grad_reduce_in_fp32=False)")
    g.add_argument("--activation-offload-layers", type=int, metavar="N",
                   help="[issue 17] layers per pipeline stage whose saved activations go to host memory and back "
                        "(Megatron-Core --cpu-offloading-num-layers; default 0)")
    add_graph_args(g)
    g.add_argument("--no-fp8-transpose-cache", action="store_true",
                   help="[issue 17] fp8 on Hopper: do not keep the FP8 weights' transposes over the micro-batches "
                        "(Megatron-Core disable_parameter_transpose_cache, as Megatron-Bridge's Llama 3 SFT configs "
                        "set): 1 byte per weight less memory, the transposes re-made every backward pass")
    g.add_argument("--bf16-layers", nargs=2, type=int, metavar=("START", "END"),
                   help="[stop 57] with --precision fp8/mxfp8/nvfp4: the first START and the last END transformer "
                        "layers keep their linear layers in bf16 (Megatron-Core --first-last-layers-bf16 "
                        "--num-layers-at-start-in-bf16 START --num-layers-at-end-in-bf16 END; Megatron-Bridge's "
                        "fp8-cs recipe keeps 1 1; default 0 0)")
    g.add_argument("--no-fp8-param-gather", action="store_true",
                   help="[issue 17] with fp8/mxfp8 and zero1/FSDP: keep bf16 weights beside their FP8 copies "
                        "(default: FP8 parameters, Megatron-Core --fp8-param-gather as Megatron-Bridge's recipes set)")


def layout_kwargs(args) -> dict:
    out = {k: getattr(args, k, None) for k in ("tp", "pp", "vp", "sp", "global_batch", "recompute", "cp", "cp_comm",
                                         "uneven_pp", "ep", "expert_tp", "moe_capacity_factor", "tp_comm_overlap",
                                         *MOE_OPTIONS,
                                         *MEMORY_OPTIONS)}
    if getattr(args, "force_tp", False):
        out["force_tp"] = True
    if getattr(args, "no_overlap_grad_reduce", False):
        out["overlap_grad_reduce"] = False
    if getattr(args, "no_overlap_p2p_comm", False):  # [issue 17]
        out["pp_p2p_overlap"] = False
    if getattr(args, "no_fp8_param_gather", False):  # [issue 17]
        out["fp8_param_gather"] = False
    if getattr(args, "no_fp8_transpose_cache", False):  # [issue 17]
        out["fp8_transpose_cache"] = False
    if getattr(args, "bf16_layers", None):  # [stop 57]
        out["bf16_layers_start"], out["bf16_layers_end"] = args.bf16_layers
    if getattr(args, "ddp_bucket_size", None) is not None:  # [stop 58]
        out["ddp_bucket_params"] = args.ddp_bucket_size
    return {k: v for k, v in out.items() if v is not None}


def scenario_kwargs(args) -> dict:
    return layout_kwargs(args) | dict(
        model=args.model, seq_len=args.seq_len, gpu=args.gpu, node=args.node, gpus=args.gpus, nodes=args.nodes,
        intra=args.intra, intra_topology=args.intra_topology, p2p=False if args.no_p2p else None, inter=args.inter,
        nics_per_node=args.nics_per_node, oversubscription=args.oversubscription,
        cpu_cores_per_gpu=args.cpu_cores_per_gpu, storage_gbyte_per_s=args.storage_gbyte_per_s,
        slowest_gpu_speed_frac=args.slowest_gpu_frac, baseline_throughput=args.baseline_throughput,
        kind=args.strategy, per_gpu_batch=args.per_gpu_batch, precision=args.precision, accum=args.accum,
        sync_every_micro_batch=getattr(args, "sync_every_micro_batch", False),
        optimizer=args.optimizer, optimizer_impl=getattr(args, "optimizer_impl", "foreach"),
        activation_checkpointing=args.checkpointing, cpu_offload=args.cpu_offload,
        bucket_mib=args.bucket_mib, num_workers=args.workers, pin_memory=not args.no_pin_memory,
        attention=getattr(args, "attention", None),
        **({"mtp_layers": args.mtp_layers} if getattr(args, "mtp_layers", None) is not None else {}),
        **({"mtp_shared": args.mtp_shared} if getattr(args, "mtp_shared", None) is not None else {}),
        **({"cross_entropy": args.cross_entropy} if getattr(args, "cross_entropy", None) else {}),
        **(getattr(args, "memory_headroom", None) or {}))


def resolve(args):
    """(scenario, db, params, calibration-or-None) from the parsed flags; errors are GpusimError."""
    from gpusim.commands._common import load_db
    from gpusim.errors import ScenarioError
    from gpusim.scenario import Scenario

    db = load_db(args)
    kwargs = scenario_kwargs(args)
    params = None
    cal = None
    if getattr(args, "calibration", None):
        from gpusim.calibration import load_calibration

        cal = load_calibration(args.calibration)
        kwargs, params, db = cal.apply(kwargs, db)
    if getattr(args, "topo", None):
        from gpusim.commands.topo import load_topology, scenario_fields

        topo = load_topology(args.topo, getattr(args, "topo_p2p", None))
        for key, value in scenario_fields(topo).items():
            if kwargs.get(key) is None:
                kwargs[key] = value
    kwargs = {k: v for k, v in kwargs.items() if v is not None or k in ("p2p",)}
    if kwargs.get("per_gpu_batch") is None and (is_llm_run(args) or getattr(args, "batch_required", False)):
        # [issue 20] the model is checked first (a typo is the error to show), then the batch it needs: an LLM
        # layout (a layout flag, or --global-batch for a transformer) takes Megatron's usual micro-batch of one
        # sequence; a data-parallel run must say its per-GPU batch
        from gpusim.rules import transformer_of
        from gpusim.workload import get_workload

        wl = get_workload(kwargs["model"], seq_len=kwargs.get("seq_len"))
        layout = any(getattr(args, k, None) is not None for k in LLM_FLAGS if k != "global_batch")
        if layout or (getattr(args, "global_batch", None) is not None and transformer_of(wl) is not None):
            kwargs["per_gpu_batch"] = 1
        elif getattr(args, "batch_required", False):
            raise ScenarioError("give the per-GPU batch: --per-gpu-batch B (samples per GPU per step; for an LLM "
                                "layout --micro-batch B with --global-batch G)")
    if "nodes" not in kwargs and kwargs.get("gpus"):  # [issue 20] the node template says how many GPUs a node holds
        from gpusim.errors import GpusimError
        from gpusim.rows import implied_nodes

        try:
            n = implied_nodes(db, gpus=int(kwargs["gpus"]), gpu=kwargs.get("gpu"), node=kwargs.get("node"))
        except GpusimError:
            n = None  # an unknown id: the scenario's own check says so
        if n:
            kwargs["nodes"] = n
    return Scenario.create(**kwargs), db, params, cal


#: flags that make a run an LLM layout (their micro-batch defaults to 1)
LLM_FLAGS = ("tp", "pp", "vp", "cp", "ep", "global_batch", "recompute")


def is_llm_run(args) -> bool:
    """An LLM layout run: a layout flag or --global-batch given."""
    return any(getattr(args, k, None) is not None for k in LLM_FLAGS)
