"""Bottlenecks and recommendations, from the model's own numbers.

Every recommendation that proposes a change is backed by a what-if: the changed scenario is evaluated in
the same vectorised model call as the scenario itself (see :func:`gpusim.simulation.simulate`), and the
predicted gain is reported beside the advice. Advice that needs no what-if (learning-rate scaling, NUMA
pinning) follows from the scenario directly. The rules of thumb come from the two seed articles of the
project (per-GPU utilisation above 80%, DDP instead of DataParallel, 4-8 loader workers per GPU with
pinned memory, NVLink or a PCIe switch instead of paths through the CPU socket, FSDP when the model does not
fit, fewer GPUs when they idle, linear learning-rate scaling with warmup: Goyal et al., "Accurate, Large
Minibatch SGD: Training ImageNet in 1 Hour", 2017).
"""

from __future__ import annotations

import math

from gpusim import units

UTIL_TARGET_FRAC = 0.80  # the seeds' "keep GPUs above 80% utilisation"
EXPOSED_COMM_FRAC = 0.10
DATA_WAIT_FRAC = 0.05
LOW_EFFICIENCY_FRAC = 0.75
#: Goyal et al. 2017 (sec. 5): the linear learning-rate rule held for ResNet-50 up to a global batch of 8k and
#: broke down beyond it (layer-wise rules such as LARS, You et al. 2017, go further)
LINEAR_LR_MAX_GLOBAL_BATCH = 8192
#: what a recommendation acts on, by id: consistency with the bottleneck is checked against this (a property test)
ADDRESSES = {"use-ddp": "communication", "moe-layout": "compute",  # [issue 17]
             "more-workers": "data-loading", "pin-memory": "data-loading",
             "fabric-pcie-switch": "communication", "fabric-nvlink": "communication",
             "enable-p2p": "communication",  # [issue 18]
             "faster-network": "communication", "grad-accumulation": "communication", "fit-memory": "memory",
             "mixed-precision": "compute", "stragglers": "stragglers", "slow-gpu": "stragglers",
             "llm-cuda-graphs": "cpu-dispatch",  # [issue 17]
             "no-sync": "communication"}  # [issue 18]


def max_useful_global_batch(wl) -> int:
    """The largest global batch a published recipe of the kind trains at (sources in
    :data:`gpusim.planning.DEFAULT_MAX_TOKENS_PER_BATCH`): advice never proposes a larger one."""
    from gpusim.rules import default_max_global_batch

    return default_max_global_batch(wl)


def _pow2_at_most(x: float) -> int:
    return 1 << int(math.floor(math.log2(max(1.0, x))))


_MEMORY_VARIANTS = ("fsdp", "fsdp-ckpt", "ckpt", "half-batch", "fsdp-offload")
#: what-ifs for a configuration that does not fit even at its strategy's smallest memory: the same and the leaner
#: strategies at a per-GPU micro-batch of 1, with the accumulation that keeps the global batch (a language model's
#: per-GPU batch of a vision model's size needs this: its recipes run micro-batches of 1 to 4 sequences)
_MICRO_BATCH_ONE = (("b1", {}), ("ckpt-b1", {"activation_checkpointing": True}), ("fsdp-b1", {"kind": "fsdp-full"}),
                    ("fsdp-ckpt-b1", {"kind": "fsdp-full", "activation_checkpointing": True}))
_MEMORY_NAMES = _MEMORY_VARIANTS + tuple(name for name, _ in _MICRO_BATCH_ONE)
#: [issue 17] the strategy kinds the LLM layout path runs (Strategy refuses dp and fsdp-hybrid there)
LAYOUT_KINDS = ("ddp", "zero1", "zero2", "zero3", "fsdp-full", "fsdp-grad-op")
_NVLINK_WIRINGS = ("nvswitch", "nvlink-mesh", "nvlink-bridge-pairs")


def variant_scenarios(scn, hw, wl, out, db) -> list[tuple[str, object]]:
    """What-ifs worth evaluating for this scenario (row 0 of ``out``; row 1 is the one-GPU baseline)."""
    st = scn.strategy
    v: list[tuple[str, object]] = []
    step = float(out["step_s"][0])
    fits = bool(out["fits_in_memory"][0])
    max_b = int(out["max_micro_batch"][0])
    n = hw.n_gpus

    def add(name, **changes):
        if not fits and name not in _MEMORY_NAMES:  # no speed advice for what does not run: only what fits
            return
        try:
            v.append((name, scn.with_changes(**changes)))
        except Exception:  # an impossible what-if is simply not offered
            pass

    if st.is_llm:  # an LLM layout has its own what-ifs (recomputation, degrees, interleaving, batch)
        return llm_variant_scenarios(scn, hw, out)
    if st.kind == "dp" and n > 1:
        add("ddp", kind="ddp")
    util = float(out["gpu_util_frac"][0])
    cap_b = max_useful_global_batch(wl) // max(1, n * st.accum)  # the batch people train at, not beyond
    if (fits and min(max_b, cap_b) > st.per_gpu_batch
            and (util < UTIL_TARGET_FRAC or int(out["bottleneck_code"][0]) == 1)):
        add("batch", per_gpu_batch=_pow2_at_most(min(max_b, cap_b, 4 * st.per_gpu_batch)))
    if fits and n > 1 and scn.slowest_gpu_speed_frac < 1.0 and hw.nodes == 1:
        add("slow-gpu", gpus=n - 1, slowest_gpu_speed_frac=1.0)
    if st.num_workers is not None and float(out["data_wait_s"][0]) > DATA_WAIT_FRAC * step:
        add("workers", num_workers=max(st.num_workers, min(16, int(hw.cpu_cores_per_gpu))), pin_memory=True)
    if st.num_workers is not None and not st.pin_memory:
        add("pin", pin_memory=True)
    comm_frac = float(out["comm_exposed_s"][0]) / step
    if hw.gpus_per_node > 1 and comm_frac > EXPOSED_COMM_FRAC:
        # [issue 18] NVLink wiring with peer-to-peer disabled (NCCL_P2P_DISABLE=1): the node's own links are unused
        if not hw.p2p and hw.topology in _NVLINK_WIRINGS:
            add("p2p", p2p=True)
        # a PCIe switch with peer-to-peer helps only cards whose driver allows peer-to-peer (not GeForce)
        elif hw.gpu.p2p_pcie and (hw.topology in ("pcie-cross-socket", "pcie-host") or not hw.p2p):
            add("pcie-switch", intra_topology="pcie-switch", p2p=True, intra=None, node=None, gpu=hw.gpu.id)
        nv = [nd for nd in db.nodes.values() if nd.gpu == hw.gpu.id and nd.gpus_per_node >= hw.gpus_per_node
              and nd.intra_topology in ("nvswitch", "nvlink-mesh", "nvlink-bridge-pairs")
              and (hw.node is None or nd.id != hw.node.id)]
        if nv and hw.topology not in ("nvswitch", "nvlink-mesh"):
            best = min(nv, key=lambda nd: ({"nvswitch": 0, "nvlink-mesh": 1}.get(nd.intra_topology, 2), nd.id))
            add("nvlink", node=best.id, intra=None, intra_topology=None, p2p=None)
    if hw.nodes > 1 and comm_frac > EXPOSED_COMM_FRAC and hw.inter_link is not None:
        faster = [lk for lk in db.links.values() if lk.scope == "inter-node" and lk.kind == "infiniband"
                  and lk.bandwidth_bytes_per_s > 1.5 * hw.inter_link.bandwidth_bytes_per_s]
        if faster:
            best = min(faster, key=lambda lk: lk.bandwidth_bytes_per_s)
            add("network", inter=best.id, nics_per_node=max(hw.nics_per_node, hw.gpus_per_node))
    if st.sync_every_micro_batch and st.accum > 1 and n > 1 and st.kind in ("ddp", "zero1"):  # [issue 18]
        add("no-sync", sync_every_micro_batch=False)
    if st.optimizer_impl == "forloop":  # [issue 18] torch.optim's per-tensor loop: the multi-tensor kernels instead
        add("foreach", optimizer_impl="foreach")
    if comm_frac > 2 * EXPOSED_COMM_FRAC and st.kind in ("ddp", "zero1", "dp") and n > 1:
        add("accum", accum=st.accum * 4)
    if not fits:
        for name, ch in (("fsdp", {"kind": "fsdp-full"}),
                         ("fsdp-ckpt", {"kind": "fsdp-full", "activation_checkpointing": True}),
                         ("ckpt", {"activation_checkpointing": True}),
                         ("half-batch", {"per_gpu_batch": max(1, st.per_gpu_batch // 2), "accum": st.accum * 2}),
                         ("fsdp-offload", {"kind": "fsdp-full", "activation_checkpointing": True, "cpu_offload": True})):
            if st.kind == ch.get("kind") and not ch.get("activation_checkpointing") and "per_gpu_batch" not in ch:
                continue
            add(name, **ch)
        if st.per_gpu_batch > 1:
            for name, ch in _MICRO_BATCH_ONE:
                ckpt = ch.get("activation_checkpointing", st.activation_checkpointing)
                if name != "b1" and ch.get("kind", st.kind) == st.kind and ckpt == st.activation_checkpointing:
                    continue  # the same as "b1"
                add(name, **ch, per_gpu_batch=1, accum=st.accum * st.per_gpu_batch)
    eff = float(out["throughput_samples_per_s"][0]) / (n * float(out["throughput_samples_per_s"][1]))
    if n > 1 and eff < LOW_EFFICIENCY_FRAC:
        for m in sorted({max(1, n // 2), max(1, n // 4)}):
            if m < n:
                nodes = max(1, math.ceil(m / hw.gpus_per_node))
                if m % nodes == 0:
                    add(f"fewer-{m}", gpus=m, nodes=nodes)
    if st.precision in ("fp32", "tf32"):
        if hw.gpu.dense_tflop_per_s.bf16:
            add("amp", precision="amp_bf16")
        elif hw.gpu.dense_tflop_per_s.fp16:
            add("amp", precision="amp_fp16")
    if getattr(getattr(wl, "transformer", None), "n_experts", 0) and st.kind in LAYOUT_KINDS:
        # [issue 17] an MoE model on the data-parallel path: the same configuration where the expert layer is modelled
        add("moe-layout", recompute="full" if st.activation_checkpointing else "none", activation_checkpointing=False)
    return v


# ------------------------------------------------------------------------------------------------
# LLM layouts (tensor, sequence and pipeline parallelism)
# ------------------------------------------------------------------------------------------------

BUBBLE_FRAC = 0.10
TP_COMM_FRAC = 0.10
#: [issue 17] the least gain of CUDA graphs worth a recommendation (below it the layout is not launch-bound)
GRAPHS_GAIN_FRAC = 0.03
#: [stop 51] an eager MoE layer's host launches at this share of its GPU work or more (gpusim's own layer figures) on an
#: x86 host: the launch-bound regime of the ``llm-moe-host-bound`` caution. 0.8: the open rows gpusim found near or past
#: launch-bound (8 B200 at one sequence per GPU, host 1.2x GPU) were 48-53% slower than predicted, those well below it
#: (0.3-0.6x) 8-32% (validation/README.md). [stop 52] With the per-expert bookkeeping (experts.expert_items_cpu_s) the
#: 14 open eager x86 MoE rows at or past the line measured a median 1.24x gpusim's step (1.03x-2.0x), the 57 below it
#: 1.17x (measured step / predicted step, past the line and below it: ``X86_MOE_LAUNCH_BOUND_STEP_RATIO``, quoted by the
#: caution; tests/model/test_moe_software_advice.py recomputes them from the validation tables). [stop 57] With the
#: later releases' Nemotron 3 Super NVFP4 rows (two B300 ones past the line, 1.20x and 1.04x): 16 past it, a median
#: 1.18x (1.03x-2.0x); 59 below it, 1.17x
X86_MOE_LAUNCH_BOUND_FRAC = 0.8
X86_MOE_LAUNCH_BOUND_STEP_RATIO = (1.18, 1.17)
#: [stop 52] the ``llm-moe-routing`` information's measured range: the open forced-balance / dropless pairs of one
#: layout in Megatron-MoE-ModelZoo's long-context table (Qwen3-235B-A22B on 256 H100: 335 / 277 TFLOPS at 32K tokens,
#: 368 / 320 at 64K, one FLOP count: 1.209x and 1.150x the step; validation/runs_moe.csv, MOE_MODELZOO). The source's
#: 16K and 128K pairs each have a held-out row and are not quoted (tests/model/test_moe_software_advice.py recomputes it)
NATURAL_ROUTING_SLOWDOWN_FRAC = (0.150, 0.209)
#: [stop 53] the ``llm-attention-sinks`` caution's measured figures: the open published runs of GPT-OSS-120B (learnable
#: attention sinks, alternating 128-token sliding windows, biased experts, a clamped GLU; Megatron-Bridge 25.11-26.08
#: performance tables, H100 to GB300: 25 rows of runs_moe.csv and later_releases.csv) took a median 1.39x gpusim's step
#: (measured / predicted): ``(median, smallest, largest but one, largest)``; [stop 58] 1.38x and 1.55x before four of
#: those rows took their recipe family's bf16 gradient reduction (validation/README.md). No part of gpusim accounts
#: for it (tools/moe_gap.py --components: only the attention part correlates; no measurement of the sink kernels was
#: found); tests/model/test_moe_software_advice.py recomputes these from the validation tables
ATTENTION_SINK_STEP_RATIO = (1.39, 1.16, 1.67, 2.48)
#: [issue 17] the smallest predicted gain for which padding the MoE routing map for FP8 is advised (a what-if of a
#: Megatron-Core flag: below it the copies are a small part of the step)
PADDING_GAIN_FRAC = 0.02
#: [issue 17] the least predicted gain of Transformer Engine's cross entropy over the layout's (a what-if of one
#: Megatron flag: below it the loss is a small part of the step)
CROSS_ENTROPY_GAIN_FRAC = 0.01
#: [stop 58] the bucket the ``llm-ddp-buckets`` what-if tries (parameters): 768 Mi, what NVIDIA's MLPerf Training
#: Llama 3.1 8B config for 512 GB300 sets (BUCKET_SIZE 768000000) and Megatron-Bridge's MLPerf-parity override of its
#: Llama 3 recipes (comm_overlap.bucket_size = 768 * 1024 * 1024, scripts/performance/configs/llama/
#: llama3_llm_pretrain.py @2a0d46e2); said where it gains at least GRAPHS_GAIN_FRAC
LARGE_DDP_BUCKET_PARAMS = 768.0 * 1024 * 1024
_LLM_FIT = ("llm-selective", "llm-full", "llm-tp", "llm-pp", "llm-zero1", "llm-sp")
#: [stop 38] the least predicted gain of Megatron-Core's MoE software settings (flex dispatcher, EP overlap, fused
#: grouped MLP, full-iteration CUDA graphs, together) worth a recommendation
MOE_STACK_GAIN_FRAC = 0.05
#: [issue 17] the least predicted gain of training the layers' GEMMs in FP8 (Hopper, Ada: per-tensor (delayed)
#: scaling; Blackwell: MXFP8) instead of BF16 worth a recommendation
FP8_GAIN_FRAC = 0.05
#: [stop 38] the MoE what-ifs, each one Megatron-Core setting, and what a recommendation calls it
MOE_SETTINGS = {"llm-moe-flex": "the flex dispatcher (HybridEP / DeepEP: --moe-dispatcher deepep)",
                "llm-moe-ep-overlap": "the all-to-all hidden under the other micro-batch's compute (--ep-overlap 1f1b)",
                "llm-moe-fused-mlp": "Transformer Engine's fused grouped MLP (--moe-fused-mlp)"}


def llm_variant_candidates(scn, hw) -> list[tuple[str, object]]:
    """Every what-if :func:`llm_variant_scenarios` may choose for an LLM layout, before looking at its result:
    recomputation, more tp or pp, interleaving, a larger global batch, the distributed optimizer, sequence
    parallelism (each kept only if the layout check accepts it later). ``simulate()`` evaluates them with the
    layout itself in one call and keeps those the result asks for."""
    from gpusim.rules import nvlink_domain_gpus

    st = scn.strategy
    v: list[tuple[str, object]] = []

    def add(name, **changes):
        try:
            v.append((name, scn.with_changes(**changes)))
        except Exception:
            pass

    if st.recompute_mode == "none":
        add("llm-selective", recompute="selective")
    if st.recompute_mode != "full":
        add("llm-full", recompute="full")
    if st.kind == "ddp":
        add("llm-zero1", kind="zero1")
    if st.tp > 1 and not st.sp_on:
        add("llm-sp", sp=True)
    if 2 * st.tp <= nvlink_domain_gpus(hw):
        add("llm-tp", tp=2 * st.tp)
    add("llm-pp", pp=2 * st.pp)
    add("llm-vp", vp=2 * st.vp)
    dp = max(1, hw.n_gpus // (st.tp * st.pp * st.cp))
    add("llm-batch", global_batch=2 * (st.global_batch or dp * st.per_gpu_batch * st.accum))
    if st.tp > 1:
        add("llm-tp-half", tp=st.tp // 2, pp=st.pp * 2)
    if not st.cuda_graph_scope:  # [issue 17] what the CPU's launches cost: the same layout under CUDA graphs
        add("llm-graphs", cuda_graph_scope=("full_iteration",))
    if (st.precision in ("fp8", "mxfp8") and st.moe_dispatcher == "alltoall" and not st.moe_router_padding
            and not ({"moe", "full_iteration"} & set(st.cuda_graph_scope or ()))):
        # [issue 17] the experts' FP8 row padding copies (gpusim.model.experts.fp8_padding_bytes); a dense model's
        # variant does not build and is left out
        add("llm-router-padding", moe_router_padding=True)
    if st.precision in ("bf16", "amp_bf16") and hw.gpu.peak_flop_per_s("fp8"):
        # [issue 17] the same layout in FP8 as Transformer Engine trains it: MXFP8 where the tensor cores take
        # microscaling formats (Blackwell), else per-tensor scaling (--precision fp8: delayed scaling, the recipe
        # every command takes; current scaling, NVIDIA's newer Hopper recipes' "FP8-CS", is predict's fp8-cs)
        add("llm-fp8", precision="mxfp8" if hw.gpu.microscaling else "fp8")
    if (st.precision in ("bf16", "amp_bf16", "fp8", "mxfp8") and hw.gpu.vendor == "nvidia" and hw.gpu.microscaling
            and hw.gpu.peak_flop_per_s("fp4")):
        # [stop 57] the same layout in NVFP4 (Transformer Engine's NVFP4BlockScaling, gpusim.model.fp8), Blackwell only
        add("llm-nvfp4", precision="nvfp4")
    if st.cross_entropy != "te":  # [issue 17] the loss's cross entropy (gpusim.model.llm.CROSS_ENTROPY_BYTES)
        add("llm-cross-entropy", cross_entropy="te")
    if st.ddp_bucket_params is None and st.overlap_grad_reduce and hw.n_gpus > st.tp * st.pp:
        # [stop 58] fewer, larger gradient buckets (Megatron-Core --ddp-bucket-size): each bucket's reduce-scatter and
        # all-gather pays the data-parallel ring's latency once (gpusim.model.step.megatron_bucket_params)
        add("llm-ddp-buckets", ddp_bucket_params=LARGE_DDP_BUCKET_PARAMS)
    if hw.n_gpus > 1 and not hw.p2p and hw.topology in _NVLINK_WIRINGS:  # [issue 18] NCCL_P2P_DISABLE on NVLink
        add("p2p", p2p=True)
    if st.ep > 1:  # [stop 38] Megatron-Core's MoE software settings, one at a time and together
        stack: dict = {}
        if st.moe_dispatcher == "alltoall":
            add("llm-moe-flex", moe_dispatcher="deepep")
            stack["moe_dispatcher"] = "deepep"
        if st.ep_overlap == "none":
            add("llm-moe-ep-overlap", ep_overlap="1f1b")
            stack["ep_overlap"] = "1f1b"
        fused = not st.moe_fused_mlp and _fused_mlp_runs(scn, hw)  # (where Transformer Engine registers it)
        if fused:
            add("llm-moe-fused-mlp", moe_fused_mlp=True)
            stack["moe_fused_mlp"] = True
        if not ({"moe", "full_iteration"} & set(st.cuda_graph_scope or ())):
            stack["cuda_graph_scope"] = ("full_iteration",)
        if stack:
            add("llm-moe-stack", **stack)
    return v


def _fused_mlp_runs(scn, hw) -> bool:
    """[stop 38] Whether Transformer Engine's fused grouped MLP runs for this layout (:func:`gpusim.rules.
    check_fused_mlp`: MXFP8, SM 10.x, a gated FFN, dimensions that are multiples of 64, no expert TP)."""
    from gpusim.errors import ScenarioError
    from gpusim.rules import check_fused_mlp

    spec = _transformer(scn)
    if spec is None:
        return False
    try:
        check_fused_mlp(spec, scn.strategy.model_copy(update={"moe_fused_mlp": True}), hw.gpu)
    except ScenarioError:
        return False
    return True


def llm_variant_scenarios(scn, hw, out, candidates=None) -> list[tuple[str, object]]:
    """The what-ifs of :func:`llm_variant_candidates` that the layout's result (row 0 of ``out``) asks for: how to fit
    when it does not; more tp while its communication is small; interleaving and a larger batch against a large
    bubble; less tp when its communication is large."""
    step = float(out["step_s"][0])
    fits = bool(out["fits_in_memory"][0])
    tp_small = float(out["tp_comm_exposed_s"][0]) < TP_COMM_FRAC * step
    bubble = float(out["pp_bubble_s"][0]) > BUBBLE_FRAC * step
    wanted = {"llm-selective": not fits, "llm-full": not fits, "llm-zero1": not fits, "llm-sp": not fits,
              "llm-tp": not fits or tp_small, "llm-pp": not fits, "llm-vp": bubble, "llm-batch": bubble,
              "llm-tp-half": float(out["tp_comm_exposed_s"][0]) > TP_COMM_FRAC * step,
              "llm-graphs": True, "llm-router-padding": True, "llm-fp8": True,  # [issue 17] said only where they gain
              "llm-nvfp4": True,  # [stop 57]
              "llm-cross-entropy": True,  # [issue 17]
              # [stop 58] larger gradient buckets, where the data-parallel exchange shows in the step
              "llm-ddp-buckets": float(out["dp_comm_exposed_s"][0]) > EXPOSED_COMM_FRAC * step,
              "p2p": True,  # [issue 18] peer-to-peer back on an NVLink node (llm_variant_candidates offers it only there)
              # [stop 38] MoE software settings: said only where together they gain
              "llm-moe-flex": True, "llm-moe-ep-overlap": True, "llm-moe-fused-mlp": True, "llm-moe-stack": True}
    return [(name, vscn) for name, vscn in (candidates if candidates is not None else llm_variant_candidates(scn, hw))
            if wanted[name]]


def _headroom_words(res) -> str:
    """[issue 17] ``" (with 2 GiB that must stay free, of 80 GiB)"``: what the fit check held back."""
    head = getattr(res, "memory_headroom_bytes", 0.0)
    return (f" (with the {units.format_bytes(head)} that must stay free, of "
            f"{units.format_bytes(res.memory_capacity_bytes)})" if head else "")


def _transformer(scn):
    """The scenario's transformer shape (None for another workload)."""
    from gpusim.rows import resolve_workload
    from gpusim.rules import transformer_of

    return transformer_of(resolve_workload(scn))


def _has_attention_sinks(scn) -> bool:
    """[stop 53] Whether the scenario's model has learnable attention sinks (GPT-OSS's ``sinks``, one logit per head:
    :class:`gpusim.workload.transformer.TransformerSpec` ``attention_sinks``)."""
    return bool(getattr(_transformer(scn), "attention_sinks", False))


def llm_recommendations(scn, hw, res, variants, rec) -> None:
    """Advice for an LLM layout from its breakdown and what-ifs (``rec`` adds one recommendation)."""
    from gpusim.rules import nvlink_domain_gpus

    st = scn.strategy
    step = res.step_s
    thr = res.throughput_samples_per_s
    by = {name: (vscn, r) for name, vscn, r in variants}
    par = res.parallelism
    domain = nvlink_domain_gpus(hw)
    if not res.fits_in_memory:  # a layout that does not fit gets only how to fit (the one rule)
        fitting = [(name, vscn, r) for name, vscn, r in variants if name in _LLM_FIT and bool(r["fits_in_memory"])]
        if fitting:
            name, vscn, r = max(fitting, key=lambda x: float(x[2]["throughput_samples_per_s"]))
            vs = vscn.strategy
            what = {"llm-selective": "selective recomputation", "llm-full": "full recomputation",
                    "llm-tp": f"tp {vs.tp}", "llm-pp": f"pp {vs.pp}", "llm-zero1": "the distributed optimizer (zero1)",
                    "llm-sp": "sequence parallelism"}[name]
            rec("llm-fit-memory", f"The fullest pipeline stage needs {units.format_bytes(res.memory_per_gpu_bytes)} per "
                                  f"GPU{_headroom_words(res)}: {what} fits ({units.format_bytes(float(r['memory_per_gpu_bytes']))}) at "
                                  f"{float(r['throughput_samples_per_s']) / thr - 1:+.0%} throughput.", None,
                {k: getattr(vs, k) for k in ("tp", "pp", "recompute", "kind", "sp")}, "high")
        else:
            rec("llm-fit-memory", f"The fullest pipeline stage needs {units.format_bytes(res.memory_per_gpu_bytes)} per "
                                  f"GPU{_headroom_words(res)} and no recomputation, tensor- or pipeline-parallel variant tried fits: add GPUs "
                                  f"(more pipeline stages), use GPUs with more memory, or a smaller micro-batch.",
                None, {}, "high")
        return
    if st.tp > domain:
        rec("llm-tp-domain", f"tp {st.tp} crosses the NVLink domain of {domain} GPUs: its per-layer all-reduces run "
                             f"over the network. Keep tp <= {domain} and add pipeline stages instead.", None,
            {"tp": domain}, "high")
    bubble = res.breakdown_s.get("pp_bubble_s", 0.0)
    if bubble > BUBBLE_FRAC * step:
        m = res.n_micro_batches
        parts = []
        for name, label in (("llm-batch", "doubling the global batch"), ("llm-vp", f"vp {2 * st.vp} (interleaved)")):
            if name in by:
                parts.append(f"{label}: {_gain(thr, by[name][1]):+.0%}")
        rec("llm-bubble", f"pp {par['pp']} with {m} micro-batches (vp {par['vp']}) leaves a {bubble / step:.0%} "
                          f"pipeline bubble: raise the global batch or interleave"
                          + (f" ({'; '.join(parts)})" if parts else "") + ".", None, {}, "high" if bubble > 0.25 * step
            else "medium")
    if "llm-graphs" in by:  # [issue 17] launch-bound layers (small kernels, a slow host CPU, MoE host syncs)
        # (a full-iteration graph's sync-free MoE layers pad in the router: that part is the padding advice's, so
        # the graphs' own gain is measured from the router-padded variant where there is one)
        base_thr = float(by["llm-router-padding"][1]["throughput_samples_per_s"]) if "llm-router-padding" in by else thr
        g = _gain(base_thr, by["llm-graphs"][1])
        if g >= GRAPHS_GAIN_FRAC:
            rec("llm-cuda-graphs", f"The CPU's kernel launches (and any MoE dispatcher host sync) set the pace of this "
                                   f"layout's layers: CUDA graphs over the whole iteration (Megatron-Core "
                                   f"--cuda-graph-impl local --cuda-graph-scope full_iteration; for MoE layers with "
                                   f"static expert buffers) are predicted {g:+.0%}; per-layer scopes (--cuda-graph-scope "
                                   f"attn mlp, or attn moe_router moe_preprocess) take part of it.", g,
                {"cuda_graph_scope": ["full_iteration"]}, "high" if g >= 0.15 else "medium")
        elif (res.layer_s or {}).get("moe_layer_frac", 0.0) > 0 and (hw.gpu.host_cpu_dispatch_mult or 1.0) > 1.0:
            # [stop 40] an eager MoE layout on a Grace superchip: published runs gained more from CUDA graphs than
            # gpusim's CPU model predicts (validation/README.md, "Two component figures of the Megatron-Core MoE paper")
            rec("llm-cuda-graphs-grace", f"CUDA graphs are predicted {g:+.0%} here, but gpusim under-counts an eager MoE "
                                         f"layer's host time on Grace: published GB200 runs gained 10% from per-layer "
                                         f"graphs (DeepSeek-V3, attn moe_router moe_preprocess: the Megatron-Core MoE "
                                         f"paper, section 4.3.6) and ran 38% more tokens per second with full-iteration "
                                         f"graphs and static expert buffers (Qwen3-235B on 128 GB200, Megatron-LM PR "
                                         f"#5728). Measure with and without --cuda-graph-scope before ruling them out.",
                g, {"cuda_graph_scope": ["full_iteration"]}, "info")
    lay = res.layer_s or {}
    if (lay.get("moe_layer_frac", 0.0) > 0 and (hw.gpu.host_cpu_dispatch_mult or 1.0) <= 1.0
            and not ({"moe", "full_iteration"} & set(st.cuda_graph_scope or ()))):
        # [stop 51] an eager MoE layer that gpusim itself finds launch-bound on an x86 host: the regime where published
        # runs were slowest against gpusim (validation/README.md, "The MoE layer's operations, counted")
        cpu = lay.get("cpu_fwd_s", 0.0) + lay.get("cpu_bwd_s", 0.0)
        gpu = lay.get("gpu_fwd_s", 0.0) + lay.get("gpu_bwd_s", 0.0)
        if gpu > 0 and cpu >= X86_MOE_LAUNCH_BOUND_FRAC * gpu:
            rec("llm-moe-host-bound", f"gpusim counts {cpu * 1e3:.2f} ms of host launches against {gpu * 1e3:.2f} ms of "
                                      f"GPU work per layer and micro-batch here: an eager MoE layer this small is "
                                      f"launch-bound, the regime in which published runs were slowest against gpusim "
                                      f"(the open published runs past this line measured a median "
                                      f"{X86_MOE_LAUNCH_BOUND_STEP_RATIO[0]:.2f}x its step time and up to 2x, those "
                                      f"below it {X86_MOE_LAUNCH_BOUND_STEP_RATIO[1]:.2f}x; Megatron-Bridge 25.11 / "
                                      f"26.02: Qwen3-30B-A3B in MXFP8 on 8 "
                                      f"B200 at one 4,096-token sequence per GPU took 8.8-9.2 ms per layer pass "
                                      f"against 6.7 predicted). Read this step time as optimistic; more tokens per "
                                      f"micro-batch or CUDA graphs (--cuda-graph-scope) leave the regime.", None, {},
                "info")
    if (lay.get("moe_layer_frac", 0.0) > 0 and st.ep > 1 and st.moe_capacity_factor is None
            and st.moe_imbalance_frac is None and st.moe_expert_skew_frac is None):
        # [stop 52] dropless expert parallelism with no routing figure given: gpusim's router is balanced in
        # expectation, what the vendor benchmarks force; published natural-routing runs were slower (validation/README.md)
        load = lay.get("ep_busiest_load", 1.0)
        rec("llm-moe-routing", f"This step assumes a router balanced in expectation, as the published benchmarks force it "
                               f"(Megatron-Core --moe-router-force-load-balancing): the busiest expert-parallel rank "
                               f"carries {load:.3f}x the mean tokens, the sampling spread alone. A learned router "
                               f"routes unevenly, and every MoE layer waits for its busiest rank: dropless runs with "
                               f"natural routing took {NATURAL_ROUTING_SLOWDOWN_FRAC[0]:.0%}-"
                               f"{NATURAL_ROUTING_SLOWDOWN_FRAC[1]:.0%} longer than force-balanced runs of "
                               f"the same layout (Qwen3-235B-A22B on 256 H100 at 32K and 64K tokens, "
                               f"Megatron-MoE-ModelZoo), and a learned router from a random start 2.1x over its first "
                               f"100 steps (marin-community/marin #7668). To predict your router, give its imbalance: "
                               f"--moe-expert-skew (that learned router measured 0.29 at the start, 0.18 after 18 "
                               f"steps) or --moe-imbalance, or a --moe-capacity-factor that caps it.", None, {}, "info")
    if _has_attention_sinks(scn):
        # [stop 53] GPT-OSS-class attention: the family gpusim misses most consistently (validation/README.md)
        med, lo, hi, top = ATTENTION_SINK_STEP_RATIO
        rec("llm-attention-sinks", f"This model's attention has learnable sinks (one softmax offset per head: GPT-OSS). "
                                   f"Its published Megatron-Bridge runs (H100 to GB300, 25.11-26.08) took a median "
                                   f"{med:.2f}x the step time gpusim predicts for their stated layouts "
                                   f"({lo:.2f}x-{hi:.2f}x, one {top:.2f}x), and no part of gpusim's model accounts for "
                                   f"it: the sink-aware fused attention kernels are the suspect, with no published "
                                   f"measurement of them. Read this step as optimistic by about that much, and measure "
                                   f"before buying on it.",
            None, {}, "info")
    if "llm-ddp-buckets" in by:  # [stop 58] the data-parallel collectives' per-bucket latency
        g = _gain(thr, by["llm-ddp-buckets"][1])
        if g >= GRAPHS_GAIN_FRAC:
            rec("llm-ddp-buckets", f"The data-parallel reduce-scatters and all-gathers are exposed for "
                                   f"{float(res.breakdown_s['dp_comm_exposed_s']) / res.step_s:.0%} of the step, "
                                   f"bucket by bucket, and each of Megatron-Core's default buckets (max(40M, 1M x dp) "
                                   f"parameters) pays the ring's latency again: larger buckets (Megatron-Core "
                                   f"--ddp-bucket-size 805306368, 768 Mi parameters, as NVIDIA's MLPerf Llama 3.1 8B "
                                   f"config sets) are predicted {g:+.0%}; they hide less of the exchange under the "
                                   f"backward pass, so measure a few sizes.", g,
                {"ddp_bucket_params": LARGE_DDP_BUCKET_PARAMS}, "high" if g >= 0.15 else "medium")
    if "llm-cross-entropy" in by:  # [issue 17] the loss's passes over the logits
        g = _gain(thr, by["llm-cross-entropy"][1])
        if g >= CROSS_ENTROPY_GAIN_FRAC:
            rec("llm-cross-entropy", f"The loss runs {st.cross_entropy} cross entropy over the logits "
                                     f"({'an fp32 copy and ' if st.cross_entropy in ('native', 'unfused') else ''}"
                                     f"several passes of the vocabulary per token): Transformer Engine's kernels "
                                     f"(Megatron --cross-entropy-loss-fusion --cross-entropy-fusion-impl te, gpusim "
                                     f"--cross-entropy te) read the bf16 logits twice and write their gradient in "
                                     f"place, predicted {g:+.0%}; a large vocabulary over a small hidden size gains "
                                     f"most.", g, {"cross_entropy": "te"}, "medium" if g >= 0.03 else "info")
    if "llm-router-padding" in by:  # [issue 17] the experts' FP8 row padding copies
        g = _gain(thr, by["llm-router-padding"][1])
        if g >= PADDING_GAIN_FRAC:
            rec("llm-moe-router-padding", f"With the all-to-all dispatcher every FP8 MoE layer copies its dispatched "
                                          f"tokens into a padded buffer before the experts and back after them "
                                          f"(Transformer Engine Fp8Padding / Fp8Unpadding): padding the routing map "
                                          f"instead (Megatron-Core --moe-router-padding-for-fp8, gpusim "
                                          f"--moe-router-padding) is predicted {g:+.0%}; the flex dispatcher "
                                          f"(DeepEP / HybridEP, --moe-dispatcher deepep) pads inside its "
                                          f"permutation too.", g, {"moe_router_padding": True},
                "medium" if g >= 0.05 else "info")
    if "llm-moe-stack" in by and bool(by["llm-moe-stack"][1]["fits_in_memory"]):  # [stop 38]
        vs = by["llm-moe-stack"][0].strategy
        g = _gain(thr, by["llm-moe-stack"][1])
        if g >= MOE_STACK_GAIN_FRAC:
            parts = [f"{label} {_gain(thr, by[name][1]):+.0%}" for name, label in MOE_SETTINGS.items()
                     if name in by and bool(by[name][1]["fits_in_memory"])]
            graphs = "full_iteration" in (vs.cuda_graph_scope or ()) and "full_iteration" not in (st.cuda_graph_scope or ())
            rec("llm-moe-software", "Megatron-Core's MoE software settings are off in this layout: "
                + "; ".join(parts) + (f"; with them{' and full-iteration CUDA graphs' if graphs else ''} together "
                                      f"{g:+.0%}") + ". NVIDIA's recipes turned them on between the 26.04 and 26.06 "
                "containers, whose published MoE runs got faster with them (gpusim validate, later Megatron-Bridge "
                "releases); full-iteration graphs need static expert buffers and raise the peak memory.", g,
                {k: getattr(vs, k) for k in ("moe_dispatcher", "ep_overlap", "moe_fused_mlp", "cuda_graph_scope")},
                "high" if g >= 0.15 else "medium")
    if "llm-fp8" in by and bool(by["llm-fp8"][1]["fits_in_memory"]):  # [issue 17] FP8 training
        vs = by["llm-fp8"][0].strategy
        g = _gain(thr, by["llm-fp8"][1])
        if g >= FP8_GAIN_FRAC:
            mx = vs.precision == "mxfp8"
            rec("llm-fp8", "Training the layers' GEMMs in "
                + ("MXFP8 (1x32 block scales; --precision mxfp8)" if mx else
                   "FP8 with per-tensor scaling (--precision fp8: Transformer Engine's delayed scaling)")
                + f" instead of BF16 is predicted {g:+.0%} on this layout, Transformer Engine's quantisation kernels "
                  "included; attention, norms, communication and the optimizer stay in BF16 and FP32. NVIDIA's "
                  "published pretraining recipes (Llama 3, Nemotron, DeepSeek-V3, Qwen3) train in it; check the "
                  "loss against BF16 on your own model before a long run.", g,
                {"precision": vs.precision},
                "high" if g >= 0.2 else "medium")
    if "llm-nvfp4" in by and bool(by["llm-nvfp4"][1]["fits_in_memory"]):  # [stop 57] NVFP4 training on Blackwell
        g = _gain(thr, by["llm-nvfp4"][1])
        if g >= FP8_GAIN_FRAC:
            now = {"mxfp8": "MXFP8", "fp8": "FP8"}.get(st.precision, "BF16")
            rec("llm-nvfp4", "Training the layers' GEMMs in NVFP4 (--precision nvfp4: FP4 with one E4M3 scale per 16 "
                f"elements, Transformer Engine's NVFP4 recipe) instead of {now} is predicted {g:+.0%} on this layout, "
                "its quantisation kernels (amax, row-wise and Hadamard-transformed column-wise casts) included. "
                "NVIDIA's NVFP4 pretraining recipe (arXiv 2509.25149: a 12B model over 10T tokens close to FP8's loss) "
                "keeps some layers in BF16 (--bf16-layers START END; Megatron-Bridge's Llama 3 8B NVFP4 recipe keeps "
                "the last 4, Nemotron 3 Super's the last 14): FP4 is the least proven of the training precisions, "
                "so compare the loss on your own model before a long run.", g, {"precision": "nvfp4"},
                "medium")
    tpc = res.breakdown_s.get("tp_comm_exposed_s", 0.0)
    if tpc > TP_COMM_FRAC * step:
        g = _gain(thr, by["llm-tp-half"][1]) if "llm-tp-half" in by else None
        rec("llm-tp-comm", f"Tensor-parallel all-reduces are exposed for {tpc / step:.0%} of the step (tp {st.tp}): "
                           + (f"tp {st.tp // 2} with pp {st.pp * 2} is predicted {g:+.0%}; " if g is not None else "")
                           + "overlapping them with the GEMMs (Transformer Engine) hides part.", g,
            {"tp": st.tp // 2, "pp": st.pp * 2} if g is not None else {}, "medium")


def _gain(base_thr: float, var: dict) -> float:
    return float(var["throughput_samples_per_s"]) / base_thr - 1.0






def loader_cores_needed(samples_per_s_per_gpu: float, preprocess_core_s_per_sample: float,
                        loader_core_eff_frac: float) -> float:
    """CPU cores one GPU's loader needs to keep up with it."""
    return samples_per_s_per_gpu * preprocess_core_s_per_sample / loader_core_eff_frac


def _loader_requirement(res, hw, wl, rec) -> None:
    """Without a loader in the scenario, say what loader the predicted speed needs and whether the node has it."""
    from gpusim.params import DEFAULT_PARAMS

    per_gpu = res.throughput_per_gpu_samples_per_s
    cores = loader_cores_needed(per_gpu, wl.preprocess_core_s_per_sample, DEFAULT_PARAMS.loader_core_eff_frac)
    storage_need = per_gpu * hw.gpus_per_node * wl.input_bytes_per_sample
    have = hw.cpu_cores_per_gpu
    short_cpu = cores > have
    short_storage = storage_need > hw.storage_bytes_per_s_per_node
    msg = (f"Data pipeline: at {per_gpu:.4g} samples/s per GPU the loader needs about "
           f"{'< 0.1' if cores < 0.1 else f'{cores:.1f}'} CPU cores per GPU "
           f"(num_workers >= {max(1, math.ceil(cores))}, pin_memory=True) and {units.format_rate_bytes(storage_need)} of "
           f"storage reads per node; the node has {have:.3g} cores per GPU and "
           f"{units.format_rate_bytes(hw.storage_bytes_per_s_per_node)}.")
    if short_cpu:
        msg += " The CPUs cannot keep up: decode and augment on the GPU (NVIDIA DALI) or pre-process offline."
    if short_storage:
        msg += " Storage cannot keep up: local NVMe, caching in RAM, or smaller encoded samples."
    rec("data-pipeline", msg + " (Set --workers to include the loader in the prediction.)", None,
        {"num_workers": max(1, math.ceil(cores))}, "high" if (short_cpu or short_storage) else "info")


def _lr_message(res, hw, st, wl) -> str:
    """Learning-rate advice for a global batch n times the one-GPU batch, by the kind of training."""
    k = hw.n_gpus
    base = f"The global batch is {res.global_batch:,} ({k}x the one-GPU batch of {st.per_gpu_batch * st.accum})"
    sqrt_rule = (f"the square-root rule for Adam (x{math.sqrt(k):.3g} for {k}x) with a warm-up is the starting "
                 "point (Malladi et al., 2022)")
    if wl.sample_unit == "sequence":
        # LLM pre-training recipes fix the batch in tokens and tune the learning rate for it; for Adam the
        # square-root rule is the scaling rule with theory behind it (Malladi et al., NeurIPS 2022)
        return (f"{base}. Language-model recipes set the learning rate for their global batch (e.g. 4M tokens for "
                "Llama 2): keep your recipe's global batch and its learning rate, reaching that batch with the "
                f"per-GPU batch and accumulation, rather than rescaling. If the batch must change, {sqrt_rule}.")
    if st.optimizer in ("adam", "adamw"):
        return f"{base}: {sqrt_rule}; watch the loss curve."
    msg = (f"{base}: scale the learning rate linearly (x{k}) with a warm-up over the first epochs, and watch the "
           "loss curve (Goyal et al., 2017).")
    if res.global_batch > LINEAR_LR_MAX_GLOBAL_BATCH:
        msg += (f" Beyond a global batch of {LINEAR_LR_MAX_GLOBAL_BATCH:,} the linear rule stopped working in that "
                "study: use a layer-wise rule (LARS, You et al., 2017) or a smaller global batch.")
    return msg


_LEAN = {"b1": "The same strategy", "ckpt-b1": "Activation checkpointing", "fsdp-b1": "FSDP FULL_SHARD (ZeRO-3)",
         "fsdp-ckpt-b1": "FSDP FULL_SHARD with activation checkpointing"}


def _largest_divisor_at_most(n: int, cap: int) -> int:
    """The largest divisor of ``n`` that is at most ``cap`` (at least 1)."""
    return max((d for d in range(1, min(n, max(1, cap)) + 1) if n % d == 0), default=1)


def _micro_batch_advice(res, hw, st, small, rec) -> None:
    """How a configuration fits when no strategy fits at its per-GPU batch: the fastest of the strategies at a
    micro-batch of 1 with the accumulation that keeps the global batch, and the largest micro-batch that fits there."""
    name, vscn, r = max(small, key=lambda x: float(x[2]["throughput_samples_per_s"]))
    per_gpu = st.per_gpu_batch * st.accum  # samples per GPU and step: kept
    mb = _largest_divisor_at_most(per_gpu, int(r["max_micro_batch"]))
    larger = (f"; micro-batches up to {int(r['max_micro_batch'])} fit with it, so --micro-batch {mb} "
              f"--accum {per_gpu // mb} keeps the global batch with fewer, faster steps" if mb > 1 else "")
    rec("fit-memory", f"Needs {units.format_bytes(res.memory_per_gpu_bytes)} per GPU but {hw.gpu.id} has "
                      f"{units.format_bytes(res.memory_capacity_bytes)}: a per-GPU batch of {st.per_gpu_batch} "
                      f"does not fit under any strategy. {_LEAN[name]} with a micro-batch of 1 and {per_gpu}x gradient "
                      f"accumulation (the same global batch of {res.global_batch:,}) fits "
                      f"({units.format_bytes(float(r['memory_per_gpu_bytes']))} per GPU) at "
                      f"{float(r['throughput_samples_per_s']):.4g} samples/s{larger}.", None,
        {"strategy": vscn.strategy.kind, "activation_checkpointing": vscn.strategy.activation_checkpointing,
         "cpu_offload": vscn.strategy.cpu_offload, "per_gpu_batch": mb, "accum": per_gpu // mb}, "high")


def _memory_advice(res, hw, st, variants, rec) -> None:
    """What makes a configuration that does not fit in memory fit (the only advice it gets)."""
    fitting = [(name, vscn, r) for name, vscn, r in variants
               if name in _MEMORY_VARIANTS and bool(r["fits_in_memory"])]
    need = res.memory_per_gpu_bytes
    # only where nothing fits at this micro-batch: the strategies at a micro-batch of 1 (_MICRO_BATCH_ONE)
    small = [(name, vscn, r) for name, vscn, r in variants
             if name in dict(_MICRO_BATCH_ONE) and bool(r["fits_in_memory"])]
    if not fitting and small:
        _micro_batch_advice(res, hw, st, small, rec)
    elif fitting:
        name, vscn, r = max(fitting, key=lambda x: float(x[2]["throughput_samples_per_s"]))
        what = {"fsdp": "FSDP FULL_SHARD (ZeRO-3)", "fsdp-ckpt": "FSDP FULL_SHARD with activation checkpointing",
                "ckpt": "activation checkpointing", "half-batch": "half the per-GPU batch with 2x accumulation",
                "fsdp-offload": "FSDP with CPU offload and activation checkpointing"}[name]
        rec("fit-memory", f"Needs {units.format_bytes(need)} per GPU but {hw.gpu.id} has "
                          f"{units.format_bytes(res.memory_capacity_bytes)}: it does not fit. {what} fits "
                          f"({units.format_bytes(float(r['memory_per_gpu_bytes']))} per GPU) at "
                          f"{float(r['throughput_samples_per_s']):.4g} samples/s.", None,
            {"strategy": vscn.strategy.kind, "activation_checkpointing": vscn.strategy.activation_checkpointing,
             "cpu_offload": vscn.strategy.cpu_offload, "per_gpu_batch": vscn.strategy.per_gpu_batch}, "high")
    else:
        rec("fit-memory", f"Needs {units.format_bytes(need)} per GPU but {hw.gpu.id} has "
                          f"{units.format_bytes(res.memory_capacity_bytes)}, and no sharding or checkpointing "
                          f"variant fits at this GPU count: add GPUs, use GPUs with more memory, or add tensor/"
                          f"pipeline parallelism.", None, {}, "high")


def recommendations(scn, hw, wl, res, variants) -> list[dict]:
    """Advice with the predicted gain of each change. ``variants``: ``(name, scenario, result row)``."""
    st = scn.strategy
    thr = res.throughput_samples_per_s
    step = res.step_s
    recs: list[dict] = []
    by = {name: (vscn, r) for name, vscn, r in variants}

    def rec(rid, message, gain=None, change=None, severity="medium", addresses=None):
        recs.append({"id": rid, "severity": severity, "message": message,
                     "gain_frac": None if gain is None else round(gain, 4), "change": change or {},
                     "addresses": addresses or ADDRESSES.get(rid)})

    if not res.fits_in_memory:  # a configuration that does not run gets no speed advice: only how to fit
        if st.is_llm:
            llm_recommendations(scn, hw, res, variants, rec)
        else:
            _memory_advice(res, hw, st, variants, rec)
        return recs

    if "moe-layout" in by:  # [issue 17]
        vr = by["moe-layout"][1]
        g = _gain(thr, vr)
        flag = "--recompute full" if st.activation_checkpointing else "--recompute none"
        rec("moe-layout", "This mixture-of-experts model is predicted on the data-parallel path, which runs its "
                          "experts as dense GEMMs of the active parameters: no router, token permutation, grouped-GEMM "
                          "shapes, per-expert launches or host sync. The layout path models Megatron-Core's expert "
                          "layer (the published MoE runs of gpusim's track record are predicted there) and predicts "
                          f"the same configuration at {units.format_duration(float(vr['step_s']))} per step "
                          f"({g:+.0%} throughput): give {flag}, or --ep to split the experts, to predict it there.",
            g, {"recompute": by["moe-layout"][0].strategy.recompute}, "medium" if abs(g) >= 0.05 else "info")
    if "ddp" in by:
        g = _gain(thr, by["ddp"][1])
        rec("use-ddp", f"DataParallel drives all {hw.n_gpus} GPUs from one Python process and reduces every "
                       f"gradient through GPU 0 without overlap; DistributedDataParallel (one process per GPU, "
                       f"launched with torchrun) is predicted {g:+.0%} throughput.", g, {"strategy": "ddp"}, "high")
    if "batch" in by:
        vb = by["batch"][0].strategy.per_gpu_batch
        g = _gain(thr, by["batch"][1])
        if g > 0.03:
            # the mechanism named follows the bottleneck: a larger batch hides launch overheads when the step is
            # compute-bound, and amortises each gradient exchange (or other fixed cost) over more samples otherwise
            if res.bottleneck in ("compute", "cpu-dispatch"):
                why = (f"GPUs are busy {res.gpu_util_frac:.0%} of the step (target > {UTIL_TARGET_FRAC:.0%}): per-GPU "
                       f"batch {st.per_gpu_batch} is too small to hide per-kernel and launch overheads.")
            else:
                why = (f"The bottleneck is {res.bottleneck}: a per-GPU batch larger than {st.per_gpu_batch} spreads "
                       "each step's fixed cost (gradient exchange, waiting) over more samples.")
            rec("larger-batch", f"{why} Batch {vb} fits in memory (largest that fits: {res.max_micro_batch}; "
                                f"at most {max_useful_global_batch(wl):,} {wl.sample_unit}s per global batch, the "
                                f"largest published recipe's) and is predicted {g:+.0%} throughput (scale the "
                                "learning rate with the batch).", g,
                {"per_gpu_batch": vb}, "high" if g > 0.2 else "medium", addresses=res.bottleneck)
    if "slow-gpu" in by:
        g = _gain(thr, by["slow-gpu"][1])
        rec("slow-gpu", f"One GPU runs at {scn.slowest_gpu_speed_frac:.0%} of the others' speed and every synchronous "
                        "step waits for it. Find it (`nvidia-smi -q -d PERFORMANCE,CLOCK,TEMPERATURE` shows each GPU's "
                        "clocks and throttle reasons: thermal, power cap, a lower-clocked model) and fix its cooling "
                        f"or power limit, or leave it out (CUDA_VISIBLE_DEVICES without it): the other {hw.n_gpus - 1} "
                        f"GPUs are predicted {g:+.0%} throughput.", g, {"gpus": hw.n_gpus - 1},
            "high" if g > 0 else "medium")
    if "workers" in by:
        vs = by["workers"][0].strategy
        g = _gain(thr, by["workers"][1])
        share = res.breakdown_s["data_wait_s"] / step
        rec("more-workers", f"The GPUs wait for data {share:.0%} of the step: the loader supplies "
                            f"{res.detail['loader_supply_samples_per_s']:.4g} samples/s per GPU. With num_workers="
                            f"{vs.num_workers} and pin_memory=True: {g:+.0%}. If the CPU is the limit, decode on the GPU "
                            f"(NVIDIA DALI) or pre-process offline; if storage is, use local NVMe and sharded formats "
                            f"(WebDataset, TFRecord).", g, {"num_workers": vs.num_workers, "pin_memory": True},
            "high" if share > 0.2 else "medium")
    if "pin" in by and "workers" not in by:
        g = _gain(thr, by["pin"][1])
        if g > 0.01:
            rec("pin-memory", f"pin_memory=False makes host-to-device copies synchronous and slower: pin_memory=True "
                              f"with non_blocking copies is predicted {g:+.0%}.", g, {"pin_memory": True})
    if "p2p" in by:  # [issue 18]
        g = _gain(thr, by["p2p"][1])
        if g > 0.03:
            exposed = sum(float(t) for k, t in res.breakdown_s.items()  # (an LLM layout names each kind)
                          if k == "comm_exposed_s" or k.endswith("_comm_exposed_s"))
            rec("enable-p2p", f"Peer-to-peer is disabled, so NCCL stages every collective through host memory "
                              f"(its SHM transport) and the node's {hw.topology} links carry none of it; "
                              f"communication is exposed for {exposed / step:.0%} of the step. "
                              "Unset NCCL_P2P_DISABLE (and check `nvidia-smi topo -p2p r` shows OK between the GPUs): "
                              f"{g:+.0%}.", g, {"p2p": True}, "high" if g > 0.2 else "medium")
    for name, label in (("pcie-switch", "one CPU socket behind a PCIe switch with peer-to-peer"),
                        ("nvlink", "NVLink")):
        if name in by:
            g = _gain(thr, by[name][1])
            if g > 0.03:
                path = res.intra_path or hw.topology
                node = by[name][0].node
                rec(f"fabric-{name}", f"Gradient exchange is exposed for {res.breakdown_s['comm_exposed_s'] / step:.0%} "
                                      f"of the step over {path} paths. GPUs on {label}"
                                      f"{f' (node {node})' if node else ''} are predicted {g:+.0%}. "
                                      "Check `nvidia-smi topo -m`: SYS between GPUs means traffic crosses the CPU socket.",
                    g, {"intra_topology": "pcie-switch", "p2p": True} if name == "pcie-switch" else {"node": node},
                    "high" if g > 0.2 else "medium")
    if "network" in by:
        g = _gain(thr, by["network"][1])
        if g > 0.03:
            link = by["network"][0].inter
            rec("faster-network", f"Inter-node communication over {hw.inter_link.id} ({hw.nics_per_node} NIC(s) per "
                                  f"node) is exposed; {link} with one NIC per GPU is predicted {g:+.0%}.", g,
                {"inter": link})
    if "no-sync" in by:  # [issue 18]
        g = _gain(thr, by["no-sync"][1])
        if g > 0.01:
            rec("no-sync", f"Every one of the {st.accum} accumulated micro-batches all-reduces the gradients: run the "
                           f"first {st.accum - 1} under DDP's no_sync() (`with model.no_sync():` around their forward "
                           f"and backward) so only the last one reduces: {g:+.0%}, the same updates.", g,
                {"sync_every_micro_batch": False}, "high" if g > 0.1 else "medium")
    if "foreach" in by:  # [issue 18]
        g = _gain(thr, by["foreach"][1])
        if g > 0.01:
            rec("optimizer-foreach", f"The {st.optimizer} step loops over the parameter tensors and launches a few "
                                     f"kernels for each: the multi-tensor implementation (PyTorch >= 2.0's default "
                                     f"on CUDA; `foreach=True` or `fused=True` in torch.optim, apex's Fused "
                                     f"optimizers before) launches a few for all of them: {g:+.0%}, the same updates.",
                g, {"optimizer_impl": "foreach"}, "high" if g > 0.1 else "medium")
    if "accum" in by:
        g = _gain(thr, by["accum"][1])
        if g > 0.03:
            share = res.breakdown_s["comm_exposed_s"] / step
            lead = ("Communication is the bottleneck" if res.bottleneck == "communication"
                    else f"Exposed communication takes {share:.0%} of the step")
            rec("grad-accumulation", f"{lead}: accumulating {by['accum'][0].strategy.accum} "
                                     f"micro-batches per optimizer step synchronises gradients 4x less often: "
                                     f"{g:+.0%} (the global batch grows 4x: rescale the learning rate).", g,
                {"accum": by["accum"][0].strategy.accum})
    fewer = [(name, r) for name, _, r in variants if name.startswith("fewer-")]
    if fewer and res.scaling_efficiency_frac < LOW_EFFICIENCY_FRAC:
        best_name, best = max(fewer, key=lambda x: float(x[1]["throughput_samples_per_s"]) / int(x[0].split("-")[1]))
        m = int(best_name.split("-")[1])
        keep = float(best["throughput_samples_per_s"]) / thr
        slow = (f" Keep the card running at {scn.slowest_gpu_speed_frac:.0%} speed out of those {m} (see the "
                "slow-GPU advice)." if scn.slowest_gpu_speed_frac < 1.0 else "")
        rec("fewer-gpus", f"Scaling efficiency is {res.scaling_efficiency_frac:.0%}: each GPU idles much of the step. "
                          f"{m} GPU(s) would deliver {keep:.0%} of this throughput with {m / hw.n_gpus:.0%} of the "
                          f"hardware; use the rest for another job, or fix the bottleneck ({res.bottleneck}) first."
                          + slow, None, {"gpus": m}, "high" if keep > 0.8 else "medium")
    if "amp" in by:
        g = _gain(thr, by["amp"][1])
        if g > 0.05:
            rec("mixed-precision", f"{st.precision} leaves the tensor cores' 16-bit throughput unused: automatic mixed "
                                   f"precision ({by['amp'][0].strategy.precision}) is predicted {g:+.0%} and halves "
                                   "activation memory.", g, {"precision": by["amp"][0].strategy.precision})
    if st.num_workers is None:
        _loader_requirement(res, hw, wl, rec)
    if res.breakdown_s["sync_s"] > 0.05 * step:
        slow = (f" (this scenario has one GPU at {scn.slowest_gpu_speed_frac:.0%} of the others' speed: that card)"
                if scn.slowest_gpu_speed_frac < 1.0 else "")
        rec("stragglers", f"Waiting for the slowest GPU costs {res.breakdown_s['sync_s'] / step:.0%} of the step{slow}: "
                          "check each GPU's clocks and throttle reasons (`nvidia-smi -q -d CLOCK,PERFORMANCE`), cooling, "
                          "and that all GPUs are the same model.", None, {}, "medium")
    if hw.topology == "pcie-cross-socket":
        rec("numa", "GPUs sit behind two CPU sockets: bind each rank to its GPU's NUMA node (e.g. `numactl "
                    "--cpunodebind`), and keep gradient-heavy groups on one socket.", None, {}, "info")
    if hw.n_gpus > 1 and st.kind != "dp" and not st.is_llm:
        rec("learning-rate", _lr_message(res, hw, st, wl), None, {}, "info")
    if st.is_llm:
        llm_recommendations(scn, hw, res, variants, rec)
    order = {"high": 0, "medium": 1, "info": 2}
    recs.sort(key=lambda r: (order[r["severity"]], -(r["gain_frac"] or 0.0)))
    return recs


def layer_lines(d: dict | None) -> list[str]:
    """[issue 17] The lines on one transformer layer of an LLM layout that ``gpusim predict`` and the planner's
    Parallelism page show (StepResult.layer_s, gpusim.model.llm.layer_detail): per micro-batch, averaged over the
    layers, the GPU's time and the parts named, the CPU's launches, which sets the pace, and the exposed
    communication."""
    if not d:
        return []
    dur = units.format_duration

    def parts(pas: str) -> str:
        named = [("attention core", d[f"attn_{pas}_s"])]
        if d.get(f"mamba_{pas}_s", 0.0) > 0:  # [issue 17] a hybrid model's Mamba mixers
            named.append(("Mamba mixers", d[f"mamba_{pas}_s"]))
        if d["moe_layer_frac"] > 0:
            fused = " (TE's fused grouped MLP)" if d.get("fused_mlp_flag", 0.0) > 0 else ""
            named.append((f"MoE experts{fused}", d[f"experts_{pas}_s"]))
        if pas == "bwd" and d["recompute_bwd_s"] > 0:
            named.append(("recomputation", d["recompute_bwd_s"]))
        return ", ".join(f"{n} {dur(v)}" for n, v in named)

    out = ["one transformer layer, one micro-batch (averaged over the layers):"]
    for pas, name in (("fwd", "forward"), ("bwd", "backward")):
        gpu, cpu, took = d[f"gpu_{pas}_s"], d[f"cpu_{pas}_s"], d[f"layer_{pas}_s"]
        pace = "the CPU's launches set the pace" if took > gpu * 1.005 else "the GPU sets the pace"
        out.append(f"  {name:<9} GPU {dur(gpu)} ({parts(pas)}); CPU launches {dur(cpu)}: {dur(took)}, {pace}")
    comm = [(n, d[f"{k}_fwd_s"], d[f"{k}_bwd_s"]) for k, n in (("tp", "tensor parallel"), ("cp", "context parallel"),
                                                       ("ep", "expert all-to-all")) if d[f"{k}_fwd_s"] + d[f"{k}_bwd_s"] > 0]
    if comm:
        out.append("  exposed communication (forward / backward): "
                   + "; ".join(f"{n} {dur(f)} / {dur(b)}" for n, f, b in comm))
    route = d.get("routing_fwd_s", 0.0) + d.get("routing_bwd_s", 0.0)
    if d["moe_layer_frac"] > 0 and route > 0:  # [issue 17] the paper's "token routing and permutation"
        out.append(f"  token routing and permutation (router, the tokens' permutation to and from the experts, the "
                   f"dispatcher's small kernels): {dur(d['routing_fwd_s'])} / {dur(d['routing_bwd_s'])}, "
                   f"{route / max(d['gpu_fwd_s'] + d['gpu_bwd_s'], 1e-30):.0%} of the average layer's GPU time")
    if d["moe_layer_frac"] > 0 and d.get("ep_busiest_load", 1.0) > 1.0:  # [issue 17]
        out.append(f"  the busiest expert-parallel rank computes and receives {d['ep_busiest_load']:.3f}x the mean "
                   f"routed tokens (the router's sampling spread, --moe-expert-skew or --moe-imbalance, or the "
                   f"capacity factor's padding), and every MoE layer waits for it")
    if d["moe_layer_frac"] > 0 and d["a2a_s"] > 0:
        out.append(f"  one MoE all-to-all takes {dur(d['a2a_s'])} (four per MoE layer: dispatch and combine, forward "
                   f"and backward)" + ("; the dispatcher waits on the host for the token counts once per forward, "
                                       "so the CPU cannot run ahead across MoE layers" if d["host_sync_flag"] > 0 else ""))
    return out
