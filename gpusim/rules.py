"""Every rule of a valid configuration, in one place, with the messages that say how to fix it.

Stage 1 of the road (docs/ARCHITECTURE.md), beside :mod:`gpusim.scenario` and :mod:`gpusim.layout`: the
scalar rules one scenario must pass (``check_*``, :func:`scenario_layout`) and the same rules on arrays of
layouts (:func:`layout_reason_codes`, indices into :data:`REASONS`) for the layout search, so that the
search and ``simulate()`` refuse the same configurations. Defaults that follow from the rules (the largest
useful global batch) live here too. Imports only the nouns and :mod:`gpusim.layout`.
"""

from __future__ import annotations

import numpy as np

from gpusim.errors import ScenarioError
from gpusim.layout import Layout

REASONS = ("", "tp does not divide the attention heads", "the K/V heads cannot be split over tp",
           "tp crosses the NVLink domain", "the sequence is not divisible by 2 x cp (load-balanced ring)",
           "cp needs FlashAttention", "vp needs pp > 1",
           "micro-batch x dp does not divide the global batch",
           "interleaving needs the micro-batches per step to be a multiple of pp",
           "dualpipe needs an even pp, vp 1 and an even number of micro-batches >= pp", "does not fit in GPU memory")


OK, R_HEADS, R_KV, R_DOMAIN, R_SEQ, R_FLASH, R_VP, R_BATCH, R_INTERLEAVE, R_DUALPIPE, R_MEMORY = range(len(REASONS))
#: [issue 17] appended after R_MEMORY so that the older codes keep their numbers
REASONS = (*REASONS, "tp does not divide the Mamba heads and groups, or cp > 1 with Mamba layers")
R_MAMBA = len(REASONS) - 1
REASONS = (*REASONS, "--activation-offload-layers is not below the layers of a pipeline stage")
R_OFFLOAD = len(REASONS) - 1
REASONS = (*REASONS, "cp a2a needs the attention and K/V heads of each tp rank to divide by its all-to-all's ranks")
R_CP_HEADS = len(REASONS) - 1


# The CLI flags whose names are not their Strategy field's name with dashes ([issue 17]).
_FLAG_OF_FIELD = {"moe_imbalance_frac": "--moe-imbalance", "moe_expert_skew_frac": "--moe-expert-skew"}


def cli_flags(fields) -> str:
    """The CLI flags of some Strategy fields, comma-separated, as an error message names them."""
    return ", ".join(_FLAG_OF_FIELD.get(f, "--" + f.replace("_", "-")) for f in fields)


def offload_layout_bad(offload_layers, layers, pp):
    """[issue 17] Layouts whose pipeline stages hold no more layers than ``--activation-offload-layers`` asks to
    offload (broadcastable bool): Megatron-Core's ``cpu_offloading_num_layers`` must stay below the layers, since
    one layer's activations are always on the GPU (:func:`gpusim.model.memory.activation_offload_terms`)."""
    n = np.asarray(offload_layers)
    return (n > 0) & (n >= np.asarray(layers) // np.maximum(np.asarray(pp), 1))


def mamba_layout_bad(spec, tp, cp):
    """[issue 17] Layouts a hybrid model's Mamba mixers cannot take (broadcastable bool; False without Mamba layers):
    Megatron-Core's ``MambaMixer`` splits the heads and the ``B``/``C`` groups over ``tp`` (both must divide), and
    the scan runs over the whole sequence, so context parallelism is not modelled for it."""
    if not getattr(spec, "n_mamba_layers", 0):
        return np.zeros(np.shape(tp), dtype=bool)
    tp, cp = np.asarray(tp), np.asarray(cp)
    heads, groups = int(spec.mamba_heads), int(spec.mamba_groups) if spec.mamba_version == 2 else int(spec.mamba_heads)
    return (heads % tp != 0) | (groups % tp != 0) | (cp > 1)


def check_mamba(spec, *, tp: int, cp: int) -> None:
    """[issue 17] :func:`mamba_layout_bad` for one scenario; raises ScenarioError naming the fix."""
    if not bool(mamba_layout_bad(spec, tp, cp)):
        return
    if cp > 1:
        raise ScenarioError(f"context parallelism (--cp {cp}) is not modelled for Mamba layers (the scan runs over "
                            f"the whole sequence): use --cp 1")
    heads = int(spec.mamba_heads)
    groups = int(spec.mamba_groups) if spec.mamba_version == 2 else heads
    ok = [t for t in (1, 2, 4, 8, 16, 32, 64) if heads % t == 0 and groups % t == 0]
    raise ScenarioError(f"tp {tp} does not divide the Mamba mixer's {heads} heads and {groups} groups (Megatron-Core "
                        f"splits both over tp): use --tp {' or '.join(str(t) for t in ok[-3:])}")


def ulysses_heads_ok(n_heads, n_kv_heads, tp, cp):
    """[issue 17] Whether Transformer Engine's a2a context parallelism can split this tp rank's heads over ``cp``: its
    ``AttnFuncWithCPAndQKVOA2A`` asserts ``q.shape[-2] % cp_size == 0 and k.shape[-2] % cp_size == 0`` ("The number
    of attention heads needs to be divisible by CP size!"), the heads a rank holds being ``n_heads / tp`` and
    ``n_kv_heads / tp`` (one replicated K/V head where tp exceeds them). Works on arrays."""
    kv_local = np.maximum(np.asarray(n_kv_heads) // np.asarray(tp), 1)
    return ((np.asarray(n_heads) // np.asarray(tp)) % np.asarray(cp) == 0) & (kv_local % np.asarray(cp) == 0)


def ulysses_ranks(cp, tp, block, comm_a2a_p2p):
    """[issue 17] The ranks one Ulysses all-to-all spans: all ``cp`` for a2a; for a2a+p2p the sub-group one NVLink
    allocation block of ``block`` GPUs holds (:func:`gpusim.model.context.hier_inner_ranks`, which the model uses
    too). Works on arrays."""
    from gpusim.model.context import hier_inner_ranks

    return np.where(comm_a2a_p2p, hier_inner_ranks(cp, tp, block), np.asarray(cp)).astype(np.int64)


def check_cp(*, seq_len: int, cp: int, flash: bool, tp: int = 1, domain: int | None = None, comm: str = "ring",
             n_heads: int | None = None, n_kv_heads: int | None = None) -> None:
    """The context-parallel rules for one scenario (the search's rules R_SEQ, R_FLASH and, for ``comm`` a2a or
    a2a+p2p, R_CP_HEADS); raises ScenarioError."""
    if cp == 1:
        return
    problems = []
    ranks = int(ulysses_ranks(cp, tp, domain or cp * tp, comm == "a2a+p2p"))  # (domain: the allocation block)
    if comm in ("a2a", "a2a+p2p") and n_heads and not ulysses_heads_ok(n_heads, n_kv_heads or n_heads, tp, ranks):
        kv = n_kv_heads or n_heads
        ok = [c for c in (2, 4, 8, 16, 32) if ulysses_heads_ok(n_heads, kv, tp, c)]
        over = "cp" if comm == "a2a" else f"the {ranks} cp ranks of one NVLink domain"
        fix = (f"cp could be {', '.join(map(str, ok))}, or " if ok and comm == "a2a"
               else "a larger tp, or " if comm == "a2a+p2p" else "")
        problems.append(f"--cp-comm {comm} splits each tp rank's heads over {over}, and tp {tp} leaves "
                        f"{n_heads // tp} attention and {max(kv // tp, 1)} K/V heads per rank, which {ranks} does not "
                        f"divide ({fix}use --cp-comm ring or all-gather)")
    if seq_len % (2 * cp):
        ok = [c for c in (2, 4, 8, 16, 32) if seq_len % (2 * c) == 0]
        problems.append(f"cp {cp} needs the sequence ({seq_len} tokens) to be divisible by 2 x cp = {2 * cp} for the "
                        f"load-balanced causal split" + (f" (cp could be {', '.join(map(str, ok))})" if ok else ""))
    if not flash:
        problems.append("context parallelism (ring attention) needs FlashAttention; this model's attention is unfused")
    if problems:
        raise ScenarioError(f"impossible context parallelism (cp {cp}): " + "; ".join(problems))


def check_ep(spec, *, ep: int, expert_tp: int = 1, capacity: float | None = None, tp: int = 1, cp: int = 1,
             ep_overlap: str = "none", moe_dispatcher: str = "alltoall", ep_fp8_dispatch: bool = False,
             dp: int | None = None, moe_router_padding: bool = False, moe_fused_mlp: bool = False,
             moe_imbalance_frac: float | None = None, moe_expert_skew_frac: float | None = None) -> None:
    """The expert-parallel rules for one scenario; raises ScenarioError naming what is wrong and what would work.
    The EP x expert-TP group is folded into the tp x cp x dp ranks (Megatron-Core "MoE parallel folding")."""
    moe_flags = [f for f, on in (("ep", ep > 1), ("expert_tp", expert_tp > 1), ("moe_capacity_factor",
                                                                               capacity is not None),
                                 ("ep_overlap", ep_overlap != "none"), ("moe_dispatcher", moe_dispatcher != "alltoall"),
                                 ("ep_fp8_dispatch", ep_fp8_dispatch),
                                 ("moe_router_padding", moe_router_padding),
                                 ("moe_fused_mlp", moe_fused_mlp),
                                 ("moe_imbalance_frac", moe_imbalance_frac is not None),
                                 ("moe_expert_skew_frac", moe_expert_skew_frac is not None)) if on]
    if not getattr(spec, "n_experts", 0):
        if moe_flags:
            flags = cli_flags(moe_flags)
            raise ScenarioError(f"{flags} {'applies' if len(moe_flags) == 1 else 'apply'} only to mixture-of-experts "
                                f"models, and {getattr(spec, 'name', None) or 'this model'} is dense (drop {flags})")
        return
    problems = []
    if moe_imbalance_frac is not None and moe_expert_skew_frac is not None:  # [issue 17] one figure or the other
        problems.append("--moe-imbalance (the busiest rank's figure at this layout) and --moe-expert-skew (the experts' "
                        "skew, from which the busiest rank follows) describe the same thing: give one")
    E = int(spec.n_experts)
    if E % ep:
        ok = [d for d in range(1, min(E, 256) + 1) if E % d == 0 and d & (d - 1) == 0]
        problems.append(f"{E} experts are not divisible by ep {ep} (ep could be {', '.join(map(str, ok))})")
    if dp is not None and (tp * cp * dp) % (ep * expert_tp):
        problems.append(f"ep {ep} x expert-tp {expert_tp} = {ep * expert_tp} must divide tp x cp x dp = "
                        f"{tp * cp * dp} (the ranks the expert groups fold into)")
    if problems:
        raise ScenarioError(f"impossible expert parallelism (ep {ep}, expert-tp {expert_tp}): " + "; ".join(problems))


def check_dualpipe(ep_overlap: str, *, pp: int, vp: int, n_micro: int) -> None:
    """DualPipe's rules (the search's R_DUALPIPE): an even number of stages, no interleaving, an even number of
    micro-batches, at least pp (DeepSeek-V3 section 3.2.1; deepseek-ai/DualPipe: "the pipeline stages and
    micro-batches be divisible by 2", fed from both ends); raises ScenarioError."""
    if ep_overlap != "dualpipe":
        return
    problems = []
    if pp < 2 or pp % 2:
        problems.append(f"an even number of pipeline stages (pp 2, 4, ...; got pp {pp})")
    if vp > 1:
        problems.append(f"no interleaving (vp 1; got vp {vp})")
    if n_micro % 2 or n_micro < pp:
        problems.append(f"an even number of micro-batches per step, at least pp = {pp} (got {n_micro}: raise "
                        f"--global-batch or lower --micro-batch)")
    if problems:
        raise ScenarioError("dualpipe needs " + "; ".join(problems) + " (--ep-overlap 1f1b overlaps the all-to-all "
                            "without DualPipe)")


def padded_layers(n_layers: int, pp: int, vp: int):
    """Layers charged with an uneven split: every one of the ``pp vp`` chunks holds the fullest's
    ``ceil(L / (pp vp))`` (works on arrays)."""
    return -(-n_layers // (pp * vp)) * pp * vp



def layout_reason_codes(*, tp, cp, pp, vp, n_micro, n_heads: int, n_kv_heads: int | None, domain: int,
                        tp_pinned: bool, seq_len: int, flash: bool, dualpipe: bool, cp_a2a: bool = False,
                        cp_a2a_p2p: bool = False, block: int | None = None) -> np.ndarray:
    """The first rule each layout breaks, as an index into :data:`REASONS` (0: none, before memory), on integer
    arrays of degrees (``n_micro`` 0 where micro-batch x dp does not divide the global batch). The same rules as
    :func:`check_cp`, :func:`check_dualpipe` and :class:`~gpusim.layout.Layout`'s checks, vectorised."""
    kv = n_kv_heads or n_heads
    reason = np.zeros(np.shape(tp), dtype=np.int64)
    checks = ((n_heads % tp != 0, R_HEADS), ((kv % tp != 0) & (tp % kv != 0), R_KV),
              ((tp > domain) & (not tp_pinned), R_DOMAIN),
              ((seq_len % (2 * cp) != 0) & (cp > 1), R_SEQ), ((cp > 1) & (not flash), R_FLASH),
              ((cp_a2a or cp_a2a_p2p) & (cp > 1)
               & ~ulysses_heads_ok(n_heads, kv, tp, ulysses_ranks(cp, tp, block or domain, cp_a2a_p2p)), R_CP_HEADS),
              ((vp > 1) & (pp == 1), R_VP), (n_micro == 0, R_BATCH),
              ((vp > 1) & (n_micro % pp != 0), R_INTERLEAVE),
              (dualpipe & ((pp % 2 != 0) | (vp > 1) | (n_micro % 2 != 0) | (n_micro < pp)), R_DUALPIPE))
    for bad, code in reversed(checks):  # the first rule broken wins
        reason = np.where(bad, code, reason)
    return reason


def transformer_of(workload):
    """The TransformerSpec behind a workload, or None (CNNs, GNMT, custom and measured workloads)."""
    return getattr(workload, "transformer", None)


def allocation_block(hw) -> int:
    """[issue 17] GPUs of one NVLink allocation block of the job (:func:`gpusim.model.placement.allocation_block_gpus`:
    the job where it fits in one domain, else the largest whole-node share of a domain that divides it)."""
    from gpusim.model.placement import allocation_block_gpus

    return int(allocation_block_gpus(hw.n_gpus, hw.gpus_per_node, nvlink_domain_gpus(hw)))


def nvlink_domain_gpus(hw) -> int:
    """GPUs that share one NVLink (or PCIe) domain: tensor parallelism should stay inside it."""
    return int(getattr(hw.node, "nvlink_domain_gpus", None) or hw.gpus_per_node)


def scenario_layout(scn, hw, workload):
    """The checked :class:`~gpusim.layout.Layout` of an LLM scenario (raises ScenarioError with every factor)."""

    st = scn.strategy
    spec = transformer_of(workload)
    if spec is None:
        if st.cuda_graph_scope:  # [issue 17] the scopes name a transformer layer's parts
            raise ScenarioError(f"--cuda-graph-scope names parts of a transformer layer (Megatron-Core); "
                                f"{workload.id!r} is not a transformer: leave it out")
        # [stop 57] name the setting that put the scenario on the LLM path (Strategy.llm_reason)
        raise ScenarioError(f"{st.llm_reason()} needs a transformer; {workload.id!r} is not one (use tp 1, pp 1 and "
                            f"--checkpointing, and leave out the LLM layout options)")
    if scn.baseline_throughput:
        raise ScenarioError("--baseline-throughput is a one-GPU measurement and cannot be combined with tp/pp layouts")

    check_cp(seq_len=scn.seq_len or spec.seq_len, cp=st.cp, flash=bool(spec.flash_attention), tp=st.tp,
             domain=allocation_block(hw), comm=st.cp_comm, n_heads=spec.n_heads, n_kv_heads=spec.n_kv_heads)
    model_par = st.tp * st.pp * st.cp
    check_ep(spec, ep=st.ep, expert_tp=st.expert_tp, capacity=st.moe_capacity_factor, tp=st.tp, cp=st.cp,
             ep_overlap=st.ep_overlap, moe_dispatcher=st.moe_dispatcher, ep_fp8_dispatch=st.ep_fp8_dispatch,
             dp=hw.n_gpus // model_par if hw.n_gpus % model_par == 0 else None,
             moe_router_padding=st.moe_router_padding, moe_fused_mlp=st.moe_fused_mlp,
             moe_imbalance_frac=st.moe_imbalance_frac, moe_expert_skew_frac=st.moe_expert_skew_frac)
    n_layers = padded_layers(spec.n_layers, st.pp, st.vp) if st.uneven_pp else spec.n_layers
    lay = Layout.create(gpus=hw.n_gpus, tp=st.tp, pp=st.pp, vp=st.vp, cp=st.cp, sp=st.sp,
                               micro_batch=st.per_gpu_batch,
                               global_batch=st.global_batch, accum=st.accum, recompute=st.recompute_mode,
                               n_layers=n_layers, n_heads=spec.n_heads, n_kv_heads=spec.n_kv_heads or spec.n_heads,
                               nvlink_domain_gpus=nvlink_domain_gpus(hw), force_tp=st.force_tp)
    check_dualpipe(st.ep_overlap, pp=lay.pp, vp=lay.vp, n_micro=lay.n_micro)  # [issue 12]
    check_mamba(spec, tp=lay.tp, cp=lay.cp)  # [issue 17]
    check_memory_saving(spec, st)
    check_fused_mlp(spec, st, hw.gpu)  # [issue 17]
    if offload_layout_bad(st.activation_offload_layers, n_layers, lay.pp):  # [issue 17]
        per_stage = n_layers // lay.pp
        raise ScenarioError(f"--activation-offload-layers {st.activation_offload_layers}: a pipeline stage holds "
                            f"{per_stage} layers ({n_layers} over pp {lay.pp}) and can offload at most {per_stage - 1} "
                            f"of them (Megatron-Core's cpu_offloading_num_layers must stay below the layers; one "
                            f"layer's activations are always on the GPU)")
    return spec, lay


#: [issue 17] Transformer Engine's CuTe DSL fused grouped MLP takes only FC dimensions that are multiples of this:
#: ``validate_grouped_mlp_dims`` in transformer_engine/pytorch/ops/fused/grouped_mlp.py (NVIDIA/TransformerEngine
#: @6ce52594dab51c7f26039ea4dd95dd3d95df09d5 and @011829b6e4eb00083e487bd5311947184f1e5c4a: ``in_features % 64`` and
#: ``out_features % 64`` of both GEMMs, else "Unsupported dims", and the op fuser leaves the layers unfused). The
#: first version (``ForwardGroupedMLP_CuTeGEMMSwiGLU_MXFP8`` in forward_grouped_mlp.py @fb28b6e0) asked for multiples
#: of 256 and refused biases; the newer one also fuses expert biases and GPT-OSS's clamped GLU
#: (``ScaledClampedQGeGLU``), which Megatron-Bridge's GPT-OSS MXFP8 recipes ran (their 26.06.01 table footnotes a
#: GPT-OSS slowdown to the fused backward kernel's regression, NVIDIA/cudnn-frontend issue 256)
FUSED_MLP_DIM_MULTIPLE = 64


def check_fused_mlp(spec, st, gpu) -> None:
    """[issue 17] ``--moe-fused-mlp`` (Transformer Engine's CuTe DSL fused grouped MLP) runs where TE registers the
    fusion: MXFP8 (``recipe.mxfp8()``), an SM 10.x GPU (``get_device_compute_capability()[0] == 10``: B200, GB200,
    B300, GB300), a gated FFN (GroupedLinear, ScaledSwiGLU or GPT-OSS's ScaledClampedQGeGLU, GroupedLinear; expert
    biases fuse too), FC dimensions that are multiples of :data:`FUSED_MLP_DIM_MULTIPLE` and no expert tensor
    parallelism (Megatron-Core's op-fuser experts take ``tp_group.size() == 1``); it saves the SwiGLU's
    input inside the fused kernel, so gpusim does not model it with ``--recompute-modules moe_act``. Raises
    ScenarioError naming the fix."""
    if not getattr(st, "moe_fused_mlp", False):
        return
    name = getattr(spec, "name", None) or "this model"
    problems = []
    if st.precision != "mxfp8":
        problems.append(f"--precision mxfp8 (the fused kernels are MXFP8 only; got {st.precision})")
    cc = getattr(gpu, "compute_capability", None) or ""
    if not cc.startswith("10."):
        problems.append(f"a Blackwell data-centre GPU of compute capability 10.x (B200, GB200, B300, GB300; "
                        f"{getattr(gpu, 'name', None) or 'this GPU'} is {cc or 'of unknown compute capability'})")
    if not getattr(spec, "gated_ffn", False):
        problems.append(f"a gated (SwiGLU or clamped GeGLU) expert FFN ({name}'s is not gated)")
    dims = {"hidden size": int(getattr(spec, "d_model", 0) or 0),
            "expert FFN width": int(getattr(spec, "expert_ff_dim", 0) or 0)}
    bad = [f"{k} {v}" for k, v in dims.items() if v % FUSED_MLP_DIM_MULTIPLE]
    if bad:
        problems.append(f"FC dimensions that are multiples of {FUSED_MLP_DIM_MULTIPLE} ({name}: {', '.join(bad)})")
    if st.expert_tp > 1:
        problems.append(f"no expert tensor parallelism (--expert-tp 1; got {st.expert_tp})")
    if "moe_act" in (st.recompute_modules or ()):
        problems.append("no --recompute-modules moe_act (the fused kernel keeps the SwiGLU input itself; gpusim does "
                        "not model the two together)")
    if problems:
        raise ScenarioError("--moe-fused-mlp needs " + "; ".join(problems) + " (drop --moe-fused-mlp to run the "
                            "experts as Transformer Engine's GroupedLinear layers)")


def check_memory_saving(spec, st) -> None:
    """[issue 12] The memory-saving options need what they act on; raises ScenarioError naming the fix."""
    problems = []
    mods = st.recompute_modules or ()
    if "mla_up_proj" in mods and not getattr(spec, "mla", False):
        problems.append(f"--recompute-modules mla_up_proj needs multi-head latent attention (DeepSeek-V2/V3); "
                        f"{getattr(spec, 'name', None) or 'this model'} has none")
    if "moe" in mods and not getattr(spec, "n_experts", 0):  # [stop 52]
        problems.append(f"--recompute-modules moe recomputes a mixture-of-experts layer's MoE block; "
                        f"{getattr(spec, 'name', None) or 'this model'} is dense (use mlp for a dense layer's MLP)")
    if "moe_act" in mods and not getattr(spec, "n_experts", 0):
        problems.append(f"--recompute-modules moe_act needs a mixture-of-experts model; {getattr(spec, 'name', None) or 'this model'} "
                        f"is dense")
    n_layers = getattr(spec, "n_layers", 0) or 0
    if "mlp" in mods and getattr(spec, "n_experts", 0) and getattr(spec, "n_moe_layers", 0) >= n_layers > 0:
        problems.append(f"--recompute-modules mlp recomputes a dense layer's MLP, and every layer of "
                        f"{getattr(spec, 'name', None) or 'this model'} is a mixture-of-experts layer: use moe_act "
                        f"or moe (Megatron-Core's moe module: the whole MoE block)")
    if st.fp8_activations and st.precision not in ("fp8", "mxfp8"):
        problems.append(f"--fp8-activations keeps activations in FP8 and needs --precision fp8 or mxfp8, not "
                        f"{st.precision}")
    if st.ep_fp8_dispatch and st.precision not in ("fp8", "mxfp8"):
        problems.append(f"--ep-fp8-dispatch dispatches the FP8 copies the expert GEMMs read and needs --precision "
                        f"fp8 or mxfp8, not {st.precision}")
    b16 = getattr(st, "bf16_layers_start", 0) + getattr(st, "bf16_layers_end", 0)  # [stop 57]
    if b16 and st.precision not in ("fp8", "mxfp8", "nvfp4"):
        problems.append(f"--bf16-layers keeps layers out of a quantised recipe and needs --precision fp8, mxfp8 or "
                        f"nvfp4, not {st.precision}")
    elif b16 and n_layers and b16 > n_layers:
        problems.append(f"--bf16-layers {st.bf16_layers_start} {st.bf16_layers_end}: "
                        f"{getattr(spec, 'name', None) or 'this model'} has {n_layers} layers; give at most "
                        f"{n_layers} in all")
    if getattr(st, "moe_router_padding", False) and st.precision not in ("fp8", "mxfp8"):  # [issue 17]
        problems.append(f"--moe-router-padding pads the experts' tokens for FP8 GEMMs and needs --precision fp8 or "
                        f"mxfp8, not {st.precision}")
    if problems:
        raise ScenarioError("; ".join(problems))


#: Default largest global batch when the user gives none: the largest global batch of a published recipe of
#: the kind, so that the plan never assumes a convergence it cannot promise. Sequences: 16M tokens (Llama 3
#: 405B's final batch, Meta 2024, sec. 3.4.1); images: 8,192 (Goyal et al., "Accurate, Large Minibatch SGD:
#: Training ImageNet in 1 Hour", 2017: linear scaling held to 8k).
DEFAULT_MAX_TOKENS_PER_BATCH = 16 * 1024 * 1024


DEFAULT_MAX_IMAGES_PER_BATCH = 8192


def default_max_global_batch(wl) -> int:
    """The largest global batch of a published recipe of the kind (samples): the default limit of plans and advice."""
    if wl.sample_unit == "sequence":
        return max(1, int(DEFAULT_MAX_TOKENS_PER_BATCH // wl.tokens_per_sample))
    return DEFAULT_MAX_IMAGES_PER_BATCH



def default_global_batch(max_global_batch: int) -> int:
    """The global batch the search holds when none is given: the largest power of two within the limit (the
    most micro-batches per step, so the smallest bubble, that the recipe allows)."""
    return 1 << (max(int(max_global_batch), 1).bit_length() - 1)

