"""Scenario x hardware x workload -> the model's input rows: the one place where names become numbers.

Stage 2 of the road (docs/ARCHITECTURE.md). ``simulate()``, the data-parallel hardware grid
(:mod:`gpusim.sweeps`), the layout search (:mod:`gpusim.search`) and the what-ifs behind the advice all build
their rows of :class:`~gpusim.model.step.StepInputs` here:

- :func:`resolve_hardware` fills in what a scenario leaves unsaid (node, fabric, NICs, CPUs) -> :class:`Hardware`;
- :func:`hardware_row` and :func:`scenario_row` (with :func:`llm_row` for an LLM layout) are one row;
- :func:`stack_rows` stacks rows into arrays for one vectorised model call;
- :func:`resolve_hardware_table`, :func:`precision_fields`, :func:`hardware_arrays` and :func:`table_inputs`
  build the same rows in bulk for a grid of hardware options.

It imports the nouns and rules below it (:mod:`gpusim.scenario`, :mod:`gpusim.rules`) and the pure model.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from gpusim import units
from gpusim.errors import GpusimError, ScenarioError
from gpusim.hardware import GPU, Node
from gpusim.model.comm import HOST_CPUS
from gpusim.model.context import CP_KINDS
from gpusim.model.fabric import (NETWORK_PATH, PATH_CODES, TOPOLOGY_CODES, eff_table, gpu_nic_path_bytes_per_s,
                                 inter_node_busbw, intra_node_busbw, nccl_nvlink_gbyte_per_s_per_link,
                                 nccl_nvswitch_busbw)
from gpusim.model.graphs import scope_mask
from gpusim.model.llm import (CE_CODES, FLASH_BWD_FLOP_MULT, HOPPER, attention_tile_frac, causal_rate_frac,
                              kernel_tiles, query_block_overhead_tiles, window_time_frac)
from gpusim.model.step import StepInputs
from gpusim.workload.transformer import MTP_GROUP
from gpusim.params import DEFAULT_PARAMS, PATH_CLASSES, ModelParams
from gpusim.rules import nvlink_domain_gpus, padded_layers, scenario_layout, transformer_of
from gpusim.scenario import Hardware, Scenario, format_validation_error
from gpusim.strategy import (ACT_ELEM_BYTES, GATHER_BYTES, GRAD_BYTES, MASTER_BYTES, OPT_FORLOOP_OPS_PER_TENSOR,
                             PEAK_KEY, WEIGHT_BYTES, Strategy, base_precision, opt_state_bytes,
                             opt_traffic_bytes)
from gpusim.workload.flops import model_fwd_flop_per_sample

__all__ = ["Hardware", "resolve_hardware", "resolve_workload", "apply_attention",  # [issue 17] apply_attention
           "apply_mtp",  # [issue 17]
           "peak_for", "hardware_row", "scenario_row", "llm_row",
           "stack_rows", "build_inputs", "single_gpu_scenario", "transformer_of", "nvlink_domain_gpus"]

# ------------------------------------------------------------------------------------------------
# Hardware resolution and one row
# ------------------------------------------------------------------------------------------------



_TOPOLOGY_FOR_LINK = {"nvswitch": "nvswitch", "nvlink-mesh": "nvlink-mesh", "nvlink-bridge": "nvlink-bridge-pairs",
                      "infinity-fabric": "nvlink-mesh", "pcie": "pcie-host", "host-staged": "pcie-host",
                      "cpu-interconnect": "pcie-cross-socket"}


_NODE_KIND_PREFERENCE = {"server": 0, "rack": 1, "cloud-instance": 2, "workstation": 3}


#: generic templates (in hwdb/nodes) that a PCIe card without a node of its own is placed in
_GENERIC_PCIE_NODES = ("pcie-4x-host", "pcie-8x-switch")


#: the most PCIe cards gpusim places in one server without a node template saying so
_MAX_GENERIC_PCIE_GPUS = 16


#: when nothing says which network joins the nodes: InfiniBand of the GPU's era
_DEFAULT_IB = ((2022, "ib-ndr-400"), (2020, "ib-hdr-200"), (0, "ib-edr-100"))


def _default_node(db, gpu: GPU, gpus_per_node: int) -> Node | None:
    """The database's usual node for this GPU: one that holds it, with enough GPUs per node."""
    cands = [n for n in db.nodes.values() if n.gpu == gpu.id and n.gpus_per_node >= gpus_per_node]
    if cands:
        return min(cands, key=lambda n: (_NODE_KIND_PREFERENCE.get(n.kind, 9), n.gpus_per_node, n.id))
    generic = [db.nodes[i] for i in _GENERIC_PCIE_NODES if i in db.nodes and db.nodes[i].gpus_per_node >= gpus_per_node]
    return generic[0] if generic else None


def _generic_host(db) -> Node | None:
    """The generic PCIe server template whose CPUs and storage stand in when a scenario names no node."""
    cands = [db.nodes[i] for i in _GENERIC_PCIE_NODES if i in db.nodes]
    return max(cands, key=lambda n: n.gpus_per_node) if cands else None


def implied_nodes(db, *, gpus: int, gpu: str | None = None, node: str | None = None) -> int | None:
    """[issue 20] The node count the hardware implies for ``gpus`` GPUs when the user gives none: ``gpus`` over the
    GPUs per node of the node template (``node``), or of the GPU's own board for an SXM/OAM/superchip part (the
    node :func:`resolve_hardware` would insist on); None when one node holds them, when the count does not divide
    evenly (the scenario's own error then names the fix) or when nothing says (a PCIe card)."""
    if gpus <= 1 or not (gpu or node):
        return None
    if node:
        per_node = db.node(node).gpus_per_node
    else:
        g = db.gpu(gpu)
        own = [n for n in db.nodes.values() if n.gpu == g.id]
        if g.form_factor == "pcie" or not own:
            return None
        per_node = max(n.gpus_per_node for n in own)
    if gpus <= per_node or gpus % per_node:
        return None
    return gpus // per_node


def node_nics_for(node: Node, gpus_per_node: int) -> int:
    """[issue 18] NICs a job using ``gpus_per_node`` of a node template's GPUs drives: the template's NICs in
    proportion (at least one). NCCL gives each GPU the NICs nearest to it in the PCIe tree (``ncclTopoGetLocalNet``
    in NVIDIA NCCL ``src/graph/topo.cc``; rail-optimised nodes such as DGX H100 put one NIC on each GPU's PCIe
    switch), and GPUDirect RDMA moves the data between the GPU and a NIC as PCIe peer-to-peer transactions (NVIDIA,
    "GPUDirect RDMA" documentation), so the NICs of GPUs outside the job carry nothing of it."""
    if gpus_per_node >= node.gpus_per_node:
        return node.nics_per_node
    return max(1, round(node.nics_per_node * gpus_per_node / node.gpus_per_node))


def resolve_hardware(scn: Scenario, db) -> Hardware:
    """Fill in the fabric, CPUs and NICs a scenario leaves unsaid, from its node or the GPU's usual node."""
    notes: list[str] = []
    g = scn.gpus // scn.nodes
    node = db.node(scn.node) if scn.node else None
    gpu = db.gpu(scn.gpu) if scn.gpu else db.gpu(node.gpu)
    if node is not None and g > node.gpus_per_node:
        raise ScenarioError(f"node {node.id!r} holds {node.gpus_per_node} GPUs, but {scn.gpus} GPUs on {scn.nodes} "
                            f"node(s) puts {g} in each: use --nodes {math.ceil(scn.gpus / node.gpus_per_node)} or more")
    if node is None:
        node = _default_node(db, gpu, g)
        own = [n for n in db.nodes.values() if n.gpu == gpu.id]
        if (node is None or node.id in _GENERIC_PCIE_NODES) and own and gpu.form_factor != "pcie" and not scn.intra:
            # an SXM/OAM/superchip part only comes in its own boards (a GB200 node is a 4-GPU tray)
            big = min(own, key=lambda n: (-n.gpus_per_node, _NODE_KIND_PREFERENCE.get(n.kind, 9), n.id))
            dom = (f" (its NVLink domain spans {big.nvlink_domain_gpus} GPUs)"
                   if big.nvlink_domain_gpus and big.nvlink_domain_gpus > big.gpus_per_node else "")
            raise ScenarioError(f"{g} x {gpu.id} in one node: node {big.id!r} holds {big.gpus_per_node}{dom}; use "
                                f"--nodes {math.ceil(scn.gpus / big.gpus_per_node)}")
        if node is not None:
            notes.append(f"node template {node.id!r} assumed (the usual node for {gpu.id}; set --node to change)")
    if node is not None and node.gpu != gpu.id:
        notes.append(f"node {node.id!r} with its {node.gpu} replaced by {gpu.id}")

    pcie_link = db.link(node.pcie_link) if (node is not None and node.pcie_link) else db.link(db.pcie_link_id(gpu))
    if scn.intra:
        intra = db.link(scn.intra)
        if intra.scope != "intra-node":
            raise ScenarioError(f"--intra {intra.id!r} is a network link; give it as --inter")
        topology = scn.intra_topology or _TOPOLOGY_FOR_LINK.get(intra.kind, "pcie-host")
        p2p = intra.kind != "host-staged"
        if intra.kind == "pcie":
            pcie_link = intra
    elif node is not None:
        intra = db.link(node.intra_link)
        topology = scn.intra_topology or node.intra_topology
        p2p = node.p2p
    else:
        if g > _MAX_GENERIC_PCIE_GPUS:
            raise ScenarioError(f"no node in the database holds {g} x {gpu.id}: spread them over more nodes "
                                f"(e.g. --nodes {math.ceil(scn.gpus / 8)}) or name a node template with --node")
        intra, topology, p2p = pcie_link, scn.intra_topology or "pcie-host", gpu.p2p_pcie
        notes.append(f"{gpu.id} on PCIe through the CPU's root complex assumed (no node template for it)")
    if topology.startswith("pcie") and not gpu.p2p_pcie and scn.p2p is None and p2p:
        p2p = False
        notes.append(f"{gpu.id} has no PCIe peer-to-peer: transfers staged through host memory")
    if scn.p2p is not None:
        p2p = scn.p2p
    nvlink_topology = topology in ("nvswitch", "nvlink-mesh", "nvlink-bridge-pairs")
    if nvlink_topology and gpu.peer_link is None:
        raise ScenarioError(f"{gpu.id} has no NVLink; choose a PCIe fabric (e.g. --intra {pcie_link.id})")
    if scn.intra_topology and not scn.intra and intra is not None:
        # a topology override without a link: take the link that wiring uses for this GPU
        if nvlink_topology and intra.kind not in ("nvswitch", "nvlink-mesh", "nvlink-bridge", "infinity-fabric"):
            peer = db.peer_link_id(gpu)
            if peer is None:
                raise ScenarioError(f"no NVLink link for {gpu.id} in the database; give one with --intra")
            intra = db.link(peer)
            notes.append(f"{intra.id} used for the {topology} wiring")
        elif topology.startswith("pcie") and intra.kind != "pcie":
            intra = pcie_link
    if g == 1:
        topology = "single"
    socket_link = None
    if topology == "pcie-cross-socket":
        sid = node.socket_link if (node is not None and node.socket_link) else ("upi" if "upi" in db.links else None)
        socket_link = db.link(sid) if sid else None

    inter, nics = None, 0
    if scn.nodes > 1:
        if scn.inter:
            inter = db.link(scn.inter)
            if inter.scope != "inter-node":
                raise ScenarioError(f"--inter {inter.id!r} is an intra-node link; give it as --intra")
        elif node is not None and node.nic_link:
            inter = db.link(node.nic_link)
        else:
            lid = next(i for year, i in _DEFAULT_IB if gpu.release_year >= year)
            if lid not in db.links:
                raise ScenarioError("several nodes need a network: give --inter LINK (`gpusim hw list --kind link`)")
            inter = db.link(lid)
            notes.append(f"nodes joined by {inter.id} assumed (set --inter to change)")
        node_nics = node is not None and node.nic_link and not scn.inter  # the template's own NICs carry the job
        nics = scn.nics_per_node or (node_nics_for(node, g) if node_nics else 0) or g
        if node_nics and not scn.nics_per_node and g < node.gpus_per_node:
            notes.append(f"{g} of the node's {node.gpus_per_node} GPUs use their own NICs: {nics} of its "
                         f"{node.nics_per_node} (set --nics-per-node to change)")
    # CPU cores and storage come from the node; without one, from the database's generic PCIe server
    host = node if node is not None else _generic_host(db)
    if host is None and not (scn.cpu_cores_per_gpu and scn.storage_gbyte_per_s):
        raise ScenarioError(f"no node in the database describes the CPUs and storage around {g} x {gpu.id}: give "
                            "--node, or --cpu-cores-per-gpu and --storage-gbyte-per-s")
    if node is None and host is not None:
        notes.append(f"CPU cores and storage per GPU of {host.id!r} assumed (set --cpu-cores-per-gpu, "
                     "--storage-gbyte-per-s)")
    cores = scn.cpu_cores_per_gpu or host.cpu_cores / host.gpus_per_node
    storage = (scn.storage_gbyte_per_s * units.GB if scn.storage_gbyte_per_s
               else host.storage_bytes_per_s / host.gpus_per_node * g)
    return Hardware(gpu=gpu, gpus_per_node=g, nodes=scn.nodes, intra_link=intra, topology=topology, p2p=p2p,
                    pcie_link=pcie_link, socket_link=socket_link, inter_link=inter, nics_per_node=nics,
                    oversubscription=scn.oversubscription, cpu_cores_per_gpu=cores,
                    storage_bytes_per_s_per_node=storage, node=node, assumptions=tuple(notes),
                    nvlink_domain_gpus=node.nvlink_domain_gpus if (node is not None and not scn.intra) else None,
                    staged_link=(intra if intra is not None and intra.kind == "host-staged"
                                 else db.links.get("host-staged")) if not p2p else None)


def apply_mtp(workload, layers: int | None, shared: bool | None = None):
    """[issue 17] ``workload`` trained with ``layers`` multi-token prediction modules (Strategy.mtp_layers; None or
    the model's own depth: unchanged), their passes sharing one module's weights where ``shared``
    (Strategy.mtp_shared; None: the model's own), rebuilt from its spec by the same builder as
    :func:`apply_attention`."""
    if layers is None and shared is None:
        return workload
    spec = transformer_of(workload)
    if spec is None or spec.head != "lm":
        if not layers and not shared:
            return workload
        flag = f"--mtp-layers {layers}" if layers else "--mtp-shared"
        raise ScenarioError(f"{flag}: multi-token prediction applies to language models with an LM head; "
                            f"{workload.id!r} is not one (leave {flag.split()[0]} out)")
    d = spec.mtp_layers if layers is None else int(layers)
    s = spec.mtp_shared if shared is None else bool(shared)
    if spec.mtp_layers == d and spec.mtp_shared == s:
        return workload
    kept = tuple(a for a in workload.assumptions if not a.startswith("num_nextn_predict_layers"))
    what = f"{d} multi-token prediction module(s) (--mtp-layers)" if not s else \
        f"{d} multi-token prediction pass(es) through one shared module (--mtp-layers, --mtp-shared)"
    return _rebuilt(workload, dataclasses.replace(spec, mtp_layers=d, mtp_shared=s), kept, what)


def resolve_workload(scn: Scenario):
    st = scn.strategy
    if scn.workload is not None:
        w = scn.workload
        return apply_mtp(apply_attention(w.with_seq_len(scn.seq_len) if scn.seq_len else w, st.attention),
                         st.mtp_layers, st.mtp_shared)
    from gpusim.workload import get_workload

    return apply_mtp(apply_attention(get_workload(scn.model, seq_len=scn.seq_len), st.attention), st.mtp_layers,
                     st.mtp_shared)


def apply_attention(workload, attention: str | None):
    """[issue 17] ``workload`` with its attention run as ``attention`` (``"flash"``: one fused kernel that keeps
    the softmax statistics; ``"unfused"``: ``Q K^T``, softmax, ``A V`` as separate kernels with the ``s x s`` scores
    kept, as Megatron-LM ran before FlashAttention); None or the workload's own implementation: unchanged. The
    transformer is rebuilt from its spec by the same builder (FLOPs, kernels, activation bytes), at the same
    sequence length, with the same data-loading figures."""
    if attention is None:
        return workload
    spec = transformer_of(workload)
    if spec is None:
        raise ScenarioError(f"--attention {attention} applies to transformer models; {workload.id!r} is not one "
                            f"(leave --attention out)")
    flash = attention != "unfused"  # [issue 18] flash2 and triton are fused kernels too (their rate: the row's fields)
    if bool(spec.flash_attention) == flash:
        return workload
    return _rebuilt(workload, dataclasses.replace(spec, flash_attention=flash), tuple(workload.assumptions),
                    f"attention {attention} (--attention)")


def _rebuilt(workload, spec, assumptions: tuple[str, ...], note: str):
    """``workload`` rebuilt from a changed transformer ``spec`` by the same builder (FLOPs, kernels, activation bytes),
    at the same sequence length, with the same data-loading figures, its ``assumptions`` and ``note`` added."""
    from gpusim.workload import build_transformer
    from gpusim.workload.transformer import EntryInfo

    info = EntryInfo(workload.id, workload.name, workload.family, tuple(workload.sources), workload.notes,
                     assumptions=assumptions + (note,))
    seq = int(workload.tokens_per_sample) if workload.sample_unit == "sequence" else None
    out = build_transformer(info, spec, seq)
    return dataclasses.replace(out, input_bytes_per_sample=workload.input_bytes_per_sample,
                               h2d_bytes_per_sample=workload.h2d_bytes_per_sample,
                               preprocess_core_s_per_sample=workload.preprocess_core_s_per_sample)


_MEMORY_BOUND_KINDS = {"elementwise", "norm", "pool"}


#: the layer group of a transformer's fused attention kernels (gpusim.workload.transformer.build_transformer)
FUSED_ATTENTION_GROUP = "attention (fused)"


def attention_kernel_frac(workload, seq_len, params: ModelParams, family: int | None = None) -> float:
    """[issue 17] The work of a decoder's fused attention kernels / the FLOPs its workload counts for them (every
    query against every key it may see, no causal halving: gpusim.workload.transformer.build_transformer). A causal
    language model's kernel (FlashAttention) visits only the ``n (n + 1) / 2`` tiles of ``n = ceil(s / B)`` a side
    that the causal mask leaves non-empty, and a sliding window or chunks only theirs
    (:func:`gpusim.model.llm.attention_tile_frac`), of ``s x k`` counted per layer. 1 for encoders (BERT, ViT:
    bidirectional, every tile) and for unfused attention (the full score matrix, masked). [issue 17] The causal
    kernel's time per FLOP at this length against its unmasked long-sequence rate (the diagonal tiles computed whole,
    the blocks' unequal work, a short sequence's fixed costs: :func:`gpusim.model.llm.causal_rate_frac` of the GPU's
    kernel ``family``, Hopper's native kernel by default), forward and backward weighted by their FLOPs (1 : 2.5),
    divides the work as the per-GEMM path's rate does. Hand-worked (Hopper, ``s = 8192``, no window): forward 602 /
    648, backward 559 / 561 x 531.6 / 553.9: 3.5 / (1 / 0.9290 + 2.5 / 0.9563) = 0.9483, so 0.5 / 0.9483 = 0.527.
    [issue 17] A window's layers pay their tiles and each query block's fixed work, forward and backward apart
    (:func:`gpusim.model.llm.window_time_frac`), as the layout path charges them."""
    spec = transformer_of(workload)
    if spec is None or not spec.flash_attention or spec.head != "lm" or spec.mem_len or not spec.n_attn_layers:
        return 1.0
    fam = HOPPER if family is None else family
    w = window_fields(spec, seq_len, params)
    f, b = causal_rate_frac(float(seq_len), fam, params)
    c_f, c_b = query_block_overhead_tiles(fam, params)
    args = [w.get(k, d) for k, d in (("attn_win_share", 0.0), ("attn_win_tiles_frac", 1.0),
                                     ("attn_qblock_per_tile", 0.0))]
    wf, wb = float(window_time_frac(*args, c_f)), float(window_time_frac(*args, c_b))
    per_flop = (wf / float(f) + FLASH_BWD_FLOP_MULT * wb / float(b)) / (1.0 + FLASH_BWD_FLOP_MULT)
    return float(0.5 * per_flop / w.get("attn_key_frac", 1.0))


def roofline_by_kind(workload, attn_kernel_frac: float = 1.0) -> tuple[tuple[str, ...], dict[str, np.ndarray]]:
    """The workload's layer groups for the model's roofline, with memory-bound kinds merged.

    Elementwise, normalisation and pooling layers are always bound by memory traffic, so summing them per
    kind is exact (``sum(max(f/P, b/B)) = sum(b)/B`` when ``f/P`` never wins); compute kinds (matmul, conv,
    attention ...) keep their groups, so each keeps its own roofline. This keeps the arrays narrow for sweeps.
    [issue 17] ``attn_kernel_frac`` scales the fused attention group's FLOPs to the work its kernel does
    (:func:`attention_kernel_frac`); the workload's FLOPs, which MFU counts, stay as they are.
    """
    kinds: list[str] = []
    out: dict[str, list[float]] = {k: [] for k in ("fwd_flop_per_sample", "fwd_bytes_per_sample", "weight_bytes",
                                                   "count")}
    merged: dict[str, int] = {}
    for g in workload.layers:
        if g.kind in _MEMORY_BOUND_KINDS and g.kind in merged:
            i = merged[g.kind]
        else:
            i = len(kinds)
            kinds.append(g.kind)
            for v in out.values():
                v.append(0.0)
            if g.kind in _MEMORY_BOUND_KINDS:
                merged[g.kind] = i
        fused = g.kind == "attention" and g.name == FUSED_ATTENTION_GROUP
        out["fwd_flop_per_sample"][i] += g.fwd_flop_per_sample * (attn_kernel_frac if fused else 1.0)
        out["fwd_bytes_per_sample"][i] += g.fwd_bytes_per_sample
        out["weight_bytes"][i] += g.weight_bytes
        out["count"][i] += g.count
    return tuple(kinds), {k: np.asarray(v, dtype=np.float64) for k, v in out.items()}


def group_eff_frac(kinds, precision: str, params: ModelParams) -> np.ndarray:
    """Achievable fraction of peak per layer kind: the precision's GEMM efficiency times the kind's."""
    base = params.eff(precision)
    table = params.layer_kind_eff_frac
    return np.array([base * (1.0 if k in _MEMORY_BOUND_KINDS else table.get(k, table.get("other", 1.0)))
                     for k in kinds], dtype=np.float64)


_PRECISION_FOR_KEY = {"fp32": "fp32", "tf32": "tf32", "fp16": "amp_fp16", "bf16": "amp_bf16", "fp8": "fp8"}


def matmul_cap_frac(gpu: GPU, precision: str, params: ModelParams) -> float:
    """[issue 17] What a data-parallel row's layer-group efficiencies are multiplied by so that its matmuls never run
    faster than the GPU's own sustained matmul rate: ``min(1, sustained / (peak x matmul_eff_frac))``.

    The data-parallel path runs the matmuls of real layers at ``matmul_eff_frac`` of the datasheet peak (0.70 for
    16-bit: 7/8 of H100's and A100's best-shape ceilings, ModelParams' provenance). That fraction is below the
    sustained rate on the GPUs it was set on (H100 SXM 705.5 of 989.5 TFLOP/s = 0.713, A100 0.869), but above it on
    GPUs whose measured ceilings sit lower under their datasheet peaks (stas00/ml-engineering's MAMF and MSMF tables,
    hwdb ``achievable_matmul_tflop_per_s`` and ``sustained_matmul_frac``): B200 1444.9 of 2250 = 0.642, GB200 0.603,
    MI300X 0.498. There the rows ran faster than the GPU's best GEMM, which no training step does. The sustained rate
    is the calibrated ceiling where a calibration measured one (ModelParams ``gemm_ceiling_flop_per_s``, as the
    layout path takes it), else the database's; a GPU with neither is not capped. Hand-worked, MI300X bf16:
    651.7 / (1307.4 x 0.70) = 0.712."""
    base = base_precision(precision)
    key = PEAK_KEY[base]
    peak = peak_for(gpu, base)
    sustained = params.gemm_ceiling_flop_per_s.get(key) or gpu.training_matmul_flop_per_s(key)
    if base == "nvfp4":  # [issue 17] the FP4 kernels' rate: the FP8 one scaled
        sustained = nvfp4_ceiling_for(gpu, params, measured_only=True)
    if not sustained or not peak:
        return 1.0
    return float(min(1.0, sustained / (peak * params.eff(base))))


def nvfp4_ceiling_for(gpu: GPU, params: ModelParams, *, measured_only: bool = False) -> float | None:
    """[stop 57] The NVFP4 GEMM ceiling of ``gpu`` (FLOP/s): its FP8 training ceiling (a calibration's, else the
    database's sustained figure, else ``gemm_ceiling_frac`` of the FP8 peak unless ``measured_only``) scaled by
    :func:`gpusim.model.fp8.nvfp4_ceiling_flop_per_s`; None without an FP8 ceiling (``measured_only``)."""
    from gpusim.model import fp8 as FP8

    peak8 = gpu.peak_flop_per_s("fp8")
    c8 = params.gemm_ceiling_flop_per_s.get("fp8") or gpu.training_matmul_flop_per_s("fp8")
    if not c8 and not measured_only and peak8:
        c8 = params.gemm_ceiling_frac * peak8
    if not c8 or not peak8:
        return None
    return float(FP8.nvfp4_ceiling_flop_per_s(c8, gpu.peak_flop_per_s("fp4"), peak8, params.nvfp4_gemm_speedup))


def peak_for(gpu: GPU, precision: str) -> float:
    """Dense peak FLOP/s of the precision's matmuls. AMP fp16 on a GPU without a 16-bit matmul path
    faster than fp32 (Pascal) runs at the fp32 rate."""
    precision = base_precision(precision)  # [issue 17] fp8-cs, fp8-mx: their base precision
    key = PEAK_KEY[precision]
    if precision == "mxfp8" and not gpu.microscaling:  # (every path: the data-parallel one reads only this peak)
        raise ScenarioError(f"mxfp8 needs tensor cores with microscaling formats (NVIDIA Blackwell); {gpu.id} has "
                            f"none: use --precision fp8 (per-tensor scaling)")
    if precision == "nvfp4" and (not gpu.microscaling or gpu.vendor != "nvidia"
                                 or gpu.peak_flop_per_s("fp4") is None):  # [issue 17]
        raise ScenarioError(f"nvfp4 needs NVIDIA Blackwell tensor cores with block-scaled FP4 and an FP4 peak in the "
                            f"hardware database; {gpu.id} has none: use --precision "
                            f"{'mxfp8' if gpu.microscaling else 'fp8'}")
    peak = gpu.peak_flop_per_s(key)
    if peak is None and precision == "amp_fp16" and gpu.architecture in ("pascal",):
        peak = gpu.peak_flop_per_s("fp32")
    if peak is None:
        have = [_PRECISION_FOR_KEY[k] for k in ("fp32", "tf32", "fp16", "bf16", "fp8")
                if gpu.peak_flop_per_s(k) is not None]
        raise ScenarioError(f"{gpu.id} has no {key} throughput in the database (precision {precision!r}); "
                            f"use --precision {' or '.join(have)}")
    return peak


def hardware_row(hw: Hardware, params: ModelParams) -> dict[str, float]:
    """The hardware part of a row: achievable bus bandwidths and latencies (calibration overrides win)."""
    eff = eff_table(params)
    if hw.intra_link is not None and hw.intra_link.kind == "infinity-fabric":
        # [issue 18] an AMD xGMI mesh carries its usable fraction of each link (RCCL topo.h, ROCm blog), in place of
        # the NVLink mesh's efficiency
        eff[PATH_CODES["nvlink-mesh"]] = params.xgmi_link_eff_frac
    g = hw.gpus_per_node
    link_bw = hw.intra_link.bandwidth_bytes_per_s if hw.intra_link else math.inf
    peers = hw.intra_link.mesh_peers if hw.intra_link else None
    if peers and hw.topology == "nvlink-mesh":  # a point-to-point mesh: g GPUs use g-1 of the GPU's links
        link_bw *= min(g - 1, peers) / peers
    sock = hw.socket_link.bandwidth_bytes_per_s if hw.socket_link else math.inf
    intra_bw, path = intra_node_busbw(TOPOLOGY_CODES[hw.topology], g, link_bw, hw.pcie_link.bandwidth_bytes_per_s,
                                      sock, hw.p2p, eff)
    if hw.topology == "nvswitch" and hw.intra_link is not None and g > 1 and hw.p2p:  # [issue 18] NCCL's NVLink
        nv = nccl_nvswitch_busbw(hw.intra_link.links_per_gpu, nccl_nvlink_gbyte_per_s_per_link(
            hw.gpu.compute_capability if hw.gpu.vendor == "nvidia" else None, params.nccl_nvlink_gbyte_per_s_per_link))
        intra_bw = intra_bw if nv is None else nv
    intra_hop = hw.intra_link.latency_s if hw.intra_link else 0.0
    if hw.topology == "nvlink-bridge-pairs" and g > 2:
        intra_hop = max(intra_hop, hw.pcie_link.latency_s)
    if not hw.p2p and hw.staged_link is not None:  # [issue 18] every hop goes through host memory (SHM)
        intra_hop = max(intra_hop, hw.staged_link.latency_s)
    if hw.inter_link is not None:
        net_path = PATH_CODES[NETWORK_PATH[hw.inter_link.kind]]
        inter_bw = inter_node_busbw(hw.inter_link.bandwidth_bytes_per_s, hw.nics_per_node, net_path,
                                    hw.oversubscription, eff)
        # [issue 18] a GPU's network traffic crosses its own PCIe link to the NICs (GPUDirect RDMA: PCIe
        # peer-to-peer), so a node's GPUs of the job cannot put more than their PCIe links carry into the network
        inter_bw = min(inter_bw, gpu_nic_path_bytes_per_s(g, hw.pcie_link.bandwidth_bytes_per_s, eff))
        inter_hop = hw.inter_link.latency_s
    else:
        inter_bw, inter_hop, net_path = math.inf, 0.0, -1
    if hw.in_nvlink_domain:  # trays of one NVLink domain: every hop between them is NVLink too
        inter_bw, inter_hop, net_path = intra_bw, intra_hop, path
    ov_bw, ov_lat = params.busbw_override_bytes_per_s, params.latency_override_s
    intra_bw = ov_bw.get("intra-node", float(intra_bw)) if g > 1 else float(intra_bw)
    inter_bw = ov_bw.get("inter-node", float(inter_bw)) if hw.nodes > 1 else float(inter_bw)
    intra_hop = ov_lat.get("intra-node", intra_hop)
    inter_hop = ov_lat.get("inter-node", inter_hop)
    row = {
        "mem_bytes_per_s": hw.gpu.memory_bytes_per_s, "mem_capacity_bytes": hw.gpu.memory_bytes,
        "n_gpus": float(hw.n_gpus), "n_nodes": float(hw.nodes),
        "intra_busbw_bytes_per_s": float(intra_bw), "intra_hop_s": float(intra_hop),
        "inter_busbw_bytes_per_s": float(inter_bw), "inter_hop_s": float(inter_hop),
        "nvls": _nvls(hw, params),
        # host copies and CPU offload use the CPU-GPU link: PCIe, or NVLink-C2C on superchips
        "pcie_bytes_per_s": max(hw.pcie_link.bandwidth_bytes_per_s, hw.gpu.host_link_bytes_per_s or 0.0),
        "cores_per_gpu": float(hw.cpu_cores_per_gpu),
        "storage_bytes_per_s_per_gpu": hw.storage_bytes_per_s_per_node / g,
        "cpu_optimizer_bytes_per_s": params.cpu_optimizer_bytes_per_s,
        "_intra_path": int(path), "_inter_path": int(net_path),
        "_ll_max": _ll_max(hw, params),
        "host_cpu": float(_host_cpu(hw)),
        "ll128": _ll128(hw, int(path), params),
        "_sharp": bool(hw.inter_link is not None and hw.nodes > 1 and hw.inter_link.in_network_reduction),
    }
    _transport_config(row, hw)
    row["ll_max_busbw_bytes_per_s"] = row["_ll_max"]  # the step model's copy
    return row


def _transport_config(row: dict, hw: Hardware) -> None:
    """[issue 18] A network transport whose required NCCL configuration narrows NCCL's choice (the link's
    ``nccl_protocols`` / ``nccl_nvls_enable``, e.g. GPUDirect-TCPXO: NCCL_PROTO=Simple, NCCL_NVLS_ENABLE=0) applies to
    jobs that cross nodes over it: no LL (its cap set to 0, which the collectives model reads as "cannot run"), no
    LL128, no NVLS / NVLS-tree. Jobs inside one node or one NVLink domain keep NCCL's own choice."""
    link = hw.inter_link
    if link is None or hw.nodes <= 1 or hw.in_nvlink_domain:
        return
    if link.nccl_protocols is not None:
        if "ll" not in link.nccl_protocols:
            row["_ll_max"] = 0.0
        if "ll128" not in link.nccl_protocols:
            row["ll128"] = False
    if not link.nccl_nvls_enable:
        row["nvls"] = False


_NVLINK_PATHS = frozenset(PATH_CODES[k] for k in ("nvswitch", "nvlink-mesh", "nvlink-bridge"))


def _ll128(hw: Hardware, intra_path: int, params: ModelParams) -> bool:
    """Whether NCCL (RCCL) runs the LL128 protocol here by default: on the GPU generations it was validated on, and
    only where the ring inside the node runs over GPU links (NVLink, xGMI), not PCIe (``ModelParams`` has the
    rule's source). A GPU entry without a compute capability keeps LL128."""
    if intra_path != -1 and intra_path not in _NVLINK_PATHS:  # -1: one GPU per node, no ring inside it
        return False
    if hw.gpu.vendor == "nvidia":
        cc = hw.gpu.compute_capability
        return cc is None or cc in params.ll128_compute_capabilities
    if hw.gpu.vendor == "amd":
        return hw.gpu.architecture in params.ll128_amd_architectures
    return True


def _nvls(hw: Hardware, params: ModelParams) -> float:
    """0 where the node's switch cannot reduce (no NVLink SHARP); otherwise NVLS's bandwidth relative to Hopper's, on
    which ``nvls_gain_frac`` was measured: NCCL's per-architecture ``nvlsEfficiency`` ratio ([issue 18],
    ``ModelParams.nvls_efficiency_frac``; 0.74 / 0.85 on Blackwell). The collectives model reads it as the factor on
    NVLS's gain over the ring."""
    # [issue 18] not without peer-to-peer: 4 GPUs of a DGX H100 with NCCL_P2P_DISABLE=1 all-reduce at 22.9 GB/s, host
    # staging's rate, not NVLS's (params.HOST_STAGED_SHM_ALL_REDUCE)
    if not (hw.intra_link is not None and hw.intra_link.nvls and hw.topology == "nvswitch" and hw.p2p):
        return 0.0
    eff = params.nvls_efficiency_frac
    ref = eff.get("hopper")
    mine = eff.get(hw.gpu.architecture) if hw.gpu.vendor == "nvidia" else None
    return float(mine / ref) if (mine and ref) else 1.0


def _ll_max(hw: Hardware, params: ModelParams) -> float:
    """NCCL's LL bus-bandwidth cap for this GPU generation inside one node (inf where none is known, as for RCCL);
    the collectives model takes the host CPU's cap for communicators across nodes ([issue 18], NCCL's rule)."""
    caps = params.ll_max_busbw_bytes_per_s.get(hw.gpu.architecture) if hw.gpu.vendor == "nvidia" else None
    return float(caps[0]) if caps else math.inf


def _host_cpu(hw: Hardware) -> int:
    """[issue 18] The nodes' host CPU as NCCL's tuner tells them apart (a code of
    :data:`gpusim.model.comm.HOST_CPUS`): Intel, AMD, or other (Arm, unknown: NCCL's default branch)."""
    return HOST_CPUS[hw.node.cpu_vendor if hw.node is not None else "other"]


def _block_bytes(workload) -> float:
    """Activations of the block being recomputed under checkpointing; estimated from the kernel count
    (about 20 kernels per block) when the workload does not give it."""
    from gpusim.model.memory import n_blocks

    block = getattr(workload, "act_block_bytes_per_sample", None)
    if block is not None:
        return float(block)
    return float(workload.act_bytes_per_sample / n_blocks(workload.fwd_kernels))


def optimizer_fields(st: Strategy, workload) -> dict[str, float]:
    """The optimizer's state bytes, step traffic and [issue 17] Newton-Schulz FLOPs per parameter. Muon steps the
    hidden 2-D weights (one fp32 momentum, 20 bytes of traffic, the orthogonalisation's GEMMs) and AdamW the rest
    (embeddings, head, norms), in the proportion of the model's parts (:func:`gpusim.optimizers.muon_split`); the other
    optimizers step every parameter alike and do no GEMMs. (Muon's per-tensor launches, 25 per matrix in
    ``torch.optim.Muon``, are not counted: a few milliseconds per step.)"""
    dt = st.opt_state_dtype
    state, traffic = opt_state_bytes(st.optimizer, dt), opt_traffic_bytes(st.optimizer, dt)
    if st.optimizer != "muon":
        return {"opt_state_bytes_per_param": state, "opt_traffic_bytes_per_param": traffic, "opt_flop_per_param": 0.0}
    from gpusim.optimizers import muon_split

    share, flop = muon_split(workload)
    rest = 1.0 - share
    return {"opt_state_bytes_per_param": share * state + rest * opt_state_bytes("adamw", dt),
            "opt_traffic_bytes_per_param": share * traffic + rest * opt_traffic_bytes("adamw", dt),
            "opt_flop_per_param": share * flop}


def optimizer_step_kernels(st: Strategy, workload) -> float:
    """[issue 18] Kernels one optimizer step launches on the data-parallel path, or NaN for the multi-tensor and
    fused implementations (ModelParams ``optimizer_kernels``, a few per step whatever the model). The for-loop
    optimizer (``optimizer_impl="forloop"``: torch.optim before PyTorch 2.0) launches
    :data:`gpusim.strategy.OPT_FORLOOP_OPS_PER_TENSOR` kernels per parameter tensor, each a CPU launch of its own:
    ResNet-50's 161 tensors under SGD with momentum are 805 kernels a step. Raises :class:`ScenarioError` where the
    workload does not count its tensors."""
    if st.optimizer_impl != "forloop":
        return math.nan
    if workload.param_tensors is None:
        raise ScenarioError(f"--optimizer-impl forloop steps every parameter tensor one by one, and {workload.id!r} "
                            f"does not count its parameter tensors (the CNN catalogue entries and models read with "
                            f"Workload.from_torch do): use --optimizer-impl foreach or fused, or describe the model "
                            f"with gpusim.Workload.from_torch")
    return OPT_FORLOOP_OPS_PER_TENSOR[st.optimizer] * float(workload.param_tensors)


def scenario_row(scn: Scenario, hw: Hardware, workload, params: ModelParams,
                 hw_row: dict[str, Any] | None = None) -> dict[str, Any]:
    """One row of model inputs; ``hw_row`` (from :func:`hardware_row` for the same ``hw``) saves recomputing it."""
    st = scn.strategy
    pr = st.precision
    # [issue 17] a causal decoder's fused attention kernels skip the masked tiles at their causal rate
    # (attention_kernel_frac). The data-parallel path's layer groups do not depend on the GPU (a sweep builds them once
    # per precision: precision_fields), so they take Hopper's native kernel's curve on every GPU; the per-GEMM path
    # takes each GPU's kernel family
    kinds, ga = roofline_by_kind(workload, attention_kernel_frac(workload, workload.tokens_per_sample, params))
    row = dict(hw_row) if hw_row is not None else hardware_row(hw, params)
    row.update({
        "peak_flop_per_s": peak_for(hw.gpu, pr),
        "params": float(workload.params), "fwd_flop_per_sample": model_fwd_flop_per_sample(workload),  # MFU's count
        "act_bytes_per_sample": float(workload.act_bytes_per_sample),
        "act_ckpt_bytes_per_sample": float(workload.act_ckpt_bytes_per_sample),
        "act_block_bytes_per_sample": _block_bytes(workload),
        "input_bytes_per_sample": float(workload.input_bytes_per_sample),
        "h2d_bytes_per_sample": float(workload.h2d_bytes_per_sample),
        "preprocess_core_s_per_sample": float(workload.preprocess_core_s_per_sample),
        "group_flop_per_sample": ga["fwd_flop_per_sample"], "group_bytes_per_sample": ga["fwd_bytes_per_sample"],
        "group_weight_bytes": ga["weight_bytes"], "group_count": ga["count"],
        "group_eff_frac": group_eff_frac(kinds, pr, params),
        "matmul_cap_frac": matmul_cap_frac(hw.gpu, pr, params),  # [issue 17]
        "strategy": st.code, "micro_batch": float(st.per_gpu_batch), "accum": float(st.accum),
        "sync_every_micro": bool(st.sync_every_micro_batch),  # [issue 18]
        "checkpointing": st.activation_checkpointing, "cpu_offload": st.cpu_offload, "bucket_bytes": st.bucket_bytes,
        "num_workers": -1.0 if st.num_workers is None else float(st.num_workers), "pin_memory": st.pin_memory,
        "act_scale": ACT_ELEM_BYTES[pr] / 2.0, "weight_bytes_per_param": WEIGHT_BYTES[pr],
        "grad_bytes_per_param": GRAD_BYTES[pr], "gather_bytes_per_param": GATHER_BYTES[pr],
        "master_bytes_per_param": MASTER_BYTES[pr], **optimizer_fields(st, workload),  # [issue 17] Muon's mix
        "opt_kernels": optimizer_step_kernels(st, workload),  # [issue 18]
        "compute_override_s": math.nan, "slowest_speed_frac": scn.slowest_gpu_speed_frac,
        **headroom_fields(st, hw.gpu),  # [issue 17]
    })
    if not st.is_llm and (st.moe_imbalance_frac is not None or st.moe_expert_skew_frac is not None):
        # [issue 17] one EP rank: nothing to wait for, but a dense model or both figures are still refused
        from gpusim.rules import check_ep, transformer_of

        check_ep(transformer_of(workload), ep=1, moe_imbalance_frac=st.moe_imbalance_frac,
                 moe_expert_skew_frac=st.moe_expert_skew_frac)
    if st.is_llm:
        row.update(llm_row(scn, hw, workload, params))
    elif st.global_batch is not None:  # data parallel with a global batch: accumulation = global / (micro x GPUs)
        from gpusim.layout import Layout

        row["accum"] = float(Layout.create(gpus=hw.n_gpus, micro_batch=st.per_gpu_batch,
                                           global_batch=st.global_batch).n_micro)
    return row


def headroom_fields(st, gpu) -> dict:
    """[issue 17] The row's own memory headroom (``--memory-headroom``; NaN: the ModelParams default), refused when it
    leaves no memory at all on ``gpu``."""
    if st.memory_headroom_gib is None and st.memory_headroom_frac is None:
        return {}
    if st.memory_headroom_gib is not None and units.gib_to_bytes(st.memory_headroom_gib) >= gpu.memory_bytes:
        raise ScenarioError(f"memory headroom {st.memory_headroom_gib:g} GiB is not smaller than the {gpu.id}'s "
                            f"{gpu.memory_gib:g} GiB of memory: nothing could fit; give less (e.g. --memory-headroom "
                            f"2GiB, or a fraction such as 0.05)")
    return {"mem_headroom_bytes": math.nan if st.memory_headroom_gib is None
            else units.gib_to_bytes(st.memory_headroom_gib),
            "mem_headroom_frac": math.nan if st.memory_headroom_frac is None else float(st.memory_headroom_frac)}


def memory_saving_fields(spec, st) -> dict:
    """[issue 12] Row fields of the recomputed modules and the FP8 activation cache (gpusim.model.llm), and MLA's
    up-projection shapes (zero without MLA): the latents' widths and the up-projections' output widths."""
    mods = st.recompute_modules or ()
    out = {"recompute_norms": "layernorm" in mods, "recompute_mla_up": "mla_up_proj" in mods,
           "recompute_moe_act": "moe_act" in mods, "recompute_mlp": "mlp" in mods,  # [issue 17]
           "recompute_moe": "moe" in mods,  # [stop 52]
           "fp8_act": bool(st.fp8_activations),
           "act_offload_layers": float(st.activation_offload_layers)}  # [issue 17]
    if getattr(spec, "mla", False):
        a = float(spec.n_heads)
        ql = float(spec.q_lora_rank or 0)
        out |= {"mla_q_lora": ql, "mla_kv_lora": float(spec.kv_lora_rank),
                "mla_kv_up": a * (spec.qk_nope_head_dim + spec.v_head_dim),
                "mla_kv_a": float(spec.kv_lora_rank + spec.qk_rope_head_dim), "v_dim": float(spec.v_dim)}
    return out


def llm_row(scn: Scenario, hw: Hardware, workload, params: ModelParams = DEFAULT_PARAMS) -> dict[str, Any]:
    """The LLM-layout part of a row: degrees, the transformer's shape, the GEMM ceiling, Megatron's state bytes."""
    from gpusim.strategy import GRAD_DTYPE_BYTES, MEGATRON_OPT_EXTRA_BYTES, RECOMPUTE_CODES

    st = scn.strategy
    spec, lay = scenario_layout(scn, hw, workload)
    pr = st.precision
    h = float(spec.d_model)
    embed = spec.vocab_size * h + ((spec.max_positions or spec.seq_len) * h if spec.learned_pos else 0.0)
    key = PEAK_KEY[pr]
    # a calibration's measured ceiling, else the database's measured best-shape figure, else (NaN) a fraction of peak
    # [issue 17] long GEMM streams hold the power-limited sustained rate where one is measured (GPU.training_matmul_...)
    ceiling = params.gemm_ceiling_flop_per_s.get(key) or hw.gpu.training_matmul_flop_per_s(key)
    half = GATHER_BYTES[pr] == 2
    opt = optimizer_fields(st, workload)  # [issue 17] Muon's mix with AdamW
    # [issue 17] Megatron-Core's Muon (dist_muon) all-reduces the gradients: gpusim.model.step._distopt_comm
    opt["grad_allreduce"] = st.optimizer == "muon"
    return {
        "llm": True, "tp": float(lay.tp), "pp": float(lay.pp), "vp": float(lay.vp), "sp": lay.sp,
        "cp": float(lay.cp), "cp_kind": CP_KINDS[st.cp_comm],  # [issue 12]
        "nvlink_domain_gpus": float(nvlink_domain_gpus(hw)), **moe_fields(spec, st),
        "recompute": RECOMPUTE_CODES[lay.recompute], "dp_overlap": 1.0 if st.overlap_grad_reduce else 0.0,
        "ddp_bucket_params": np.nan if st.ddp_bucket_params is None else float(st.ddp_bucket_params),  # [stop 58]
        "grad_accum_fusion": st.grad_accum_fusion, "tp_async_bwd": st.tp_async_bwd,
        "ce_code": float(CE_CODES[st.cross_entropy]),  # [issue 17] the loss's cross entropy
        "tp_comm_overlap": st.tp_comm_overlap,  # [issue 17]
        "pp_p2p_overlap": np.nan if st.pp_p2p_overlap is None else float(st.pp_p2p_overlap),  # [issue 17]
        "accum": float(lay.n_micro), "micro_batch": float(lay.micro_batch),
        "n_layers": float(padded_layers(spec.n_layers, lay.pp, lay.vp) if st.uneven_pp else spec.n_layers),
        "model_layers": float(spec.n_layers), "mtp_layers": float(spec.mtp_layers),  # [issue 17] (llm.stage_layers)
        "mtp_param_modules": float(spec.mtp_param_modules),  # [issue 17] one where the passes share it (mtp_shared)
        # [issue 17] the multi-token prediction modules' forward FLOPs per sample (the workload's layer groups)
        "mtp_fwd_flop": float(sum(g.fwd_flop_per_sample for g in getattr(workload, "layers", ())
                                  if g.name == MTP_GROUP)),
        "d_model": h, "n_heads": float(spec.n_heads), "q_dim": spec.q_dim,
        "kv_dim": spec.kv_dim, "ff_dim": spec.ff_dim, "ffn_mats": 3.0 if spec.gated_ffn else 2.0,
        "vocab": float(spec.vocab_size), "seq_len": float(scn.seq_len or spec.seq_len), "dropout": bool(spec.dropout),
        "flash": bool(spec.flash_attention), "rope": bool(spec.rope), "qk_norm": bool(spec.qk_norm),  # [issue 17]
        "untied": not spec.tied_embeddings,
        "layer_params": float(spec.mean_layer_params() if getattr(spec, "hybrid", False) else spec.layer_params()),
        "embed_params": float(embed), **hybrid_fields(spec),  # [issue 17]
        "ceiling_flop_per_s": math.nan if ceiling is None else ceiling, "sm_count": float(hw.gpu.sm_count or 1),
        "gemm_serial_epilogue": hw.gpu.architecture not in params.gemm_epilogue_overlap_archs,
        # Megatron mixed precision: 16-bit weights, fp32 main gradients, fp32 master copy (+ the optimizer's states)
        "weight_bytes_per_param": float(GATHER_BYTES[pr]), "grad_bytes_per_param": GRAD_DTYPE_BYTES[st.grad_dtype],  # [issue 17]
        "master_bytes_per_param": 4.0 if half else 0.0,
        "opt_traffic_bytes_per_param": opt.pop("opt_traffic_bytes_per_param") + MEGATRON_OPT_EXTRA_BYTES[pr], **opt,
        "host_cpu_mult": float(hw.gpu.host_cpu_dispatch_mult or 1.0),  # [issue 17] a superchip's Grace host
        "host_python_mult": float(hw.gpu.host_python_mult or 1.0),  # [stop 52] its Python-level bookkeeping
        **memory_saving_fields(spec, st),  # [issue 12] recompute modules, FP8 activation cache
        **fp8_fields(hw, st, params, ceiling, spec.n_layers),  # [issue 12] FP8 recipes: ceilings, casts, weights
        **attention_kernel_fields(hw.gpu, st.attention, params),  # [issue 18] the attention kernel's rate
        **window_fields(spec, scn.seq_len or spec.seq_len, params),  # [issue 17] sliding-window / chunked attention
        **cuda_graph_fields(spec, st, getattr(workload, "name", "")),  # [issue 17] CUDA graphs
    }


_DEFAULT_INPUTS = {f.name: f.default_factory().item() for f in dataclasses.fields(StepInputs)
                   if f.default_factory is not dataclasses.MISSING}


def stack_rows(rows: list[dict[str, Any]]) -> StepInputs:
    names = [f.name for f in dataclasses.fields(StepInputs)]
    out = {}
    for name in names:
        if not any(name in r for r in rows):
            continue  # a field with a default (the LLM layout's: the data-parallel case)
        vals = [r[name] if name in r else _DEFAULT_INPUTS[name] for r in rows]
        if isinstance(vals[0], np.ndarray) and vals[0].ndim:  # layer groups: pad to the widest with empty groups
            width = max(v.shape[-1] for v in vals)
            fill = 1.0 if name == "group_eff_frac" else 0.0
            if all(v.shape[-1] == width for v in vals):
                out[name] = np.stack(vals)
            else:
                out[name] = np.stack([np.pad(v, (0, width - v.shape[-1]), constant_values=fill) for v in vals])
        else:
            out[name] = np.asarray(vals)
    return StepInputs(**out)


def row_result(out: dict, i: int) -> dict[str, float]:
    return {k: (v[i] if np.ndim(v) else v) for k, v in out.items()}


def path_name(code: int) -> str | None:
    return PATH_CLASSES[code] if code >= 0 else None


def build_inputs(scn: Scenario, db=None, params: ModelParams | None = None, workload=None):
    """Resolve a scenario into (hardware, workload, row dict). Raises GpusimError subclasses on bad input."""
    from gpusim.hwdb import load

    db = db or load()
    params = params or DEFAULT_PARAMS
    hw = resolve_hardware(scn, db)
    wl = workload if workload is not None else resolve_workload(scn)
    return hw, wl, scenario_row(scn, hw, wl, params)


def single_gpu_scenario(scn: Scenario) -> Scenario:
    """The one-GPU reference of a scenario (speedup and efficiency are relative to it): the same GPU, batch and
    strategy on one GPU (DataParallel's one-GPU form is plain training, as DDP's is)."""
    kind = "ddp" if scn.strategy.kind == "dp" else scn.strategy.kind
    if scn.strategy.global_batch is not None and not scn.strategy.is_llm:  # the same accumulation, on one GPU
        st = scn.strategy
        return scn.with_changes(gpus=1, nodes=1, kind=kind, global_batch=None,
                                accum=max(1, st.global_batch // (st.per_gpu_batch * scn.gpus)))
    if scn.strategy.is_llm:  # one GPU runs the whole model: no tensor or pipeline split, one micro-batch per step
        return scn.with_changes(gpus=1, nodes=1, kind=kind, tp=1, pp=1, vp=1, cp=1, ep=1, expert_tp=1, global_batch=None, accum=1,
                                ep_overlap="none",  # [issue 12] (no pipeline, no all-to-all to overlap)
                                recompute=scn.strategy.recompute_mode)
    return scn.with_changes(gpus=1, nodes=1, kind=kind)


_single_gpu = single_gpu_scenario


def cached_row(scn: Scenario, wl, db, params: ModelParams, hw_cache: dict) -> dict:
    """:func:`scenario_row` of ``scn``, its hardware resolved once per distinct hardware (``hw_cache``)."""
    key = hardware_key(scn)
    if key not in hw_cache:
        hw = resolve_hardware(scn, db)
        hw_cache[key] = (hw, hardware_row(hw, params))
    hw, hw_row = hw_cache[key]
    return scenario_row(scn, hw, wl, params, hw_row=hw_row)


HARDWARE_FIELDS = ("gpu", "node", "gpus", "nodes", "intra", "intra_topology", "p2p", "inter", "nics_per_node",
                    "oversubscription", "cpu_cores_per_gpu", "storage_gbyte_per_s")


def hardware_key(scn: Scenario) -> tuple:
    """The scenario fields :func:`resolve_hardware` reads."""
    return tuple(getattr(scn, f) for f in HARDWARE_FIELDS)


def concat_outputs(a: dict, b: dict) -> dict:
    """The outputs of two evaluate() calls as one, rows of ``a`` first."""
    na = len(np.atleast_1d(a["step_s"]))
    nb = len(np.atleast_1d(b["step_s"]))
    return {k: np.concatenate([np.broadcast_to(a[k], (na,)), np.broadcast_to(b[k], (nb,))]) for k in a}


# ------------------------------------------------------------------------------------------------
# Row fields of mixture-of-experts and FP8 (used by llm_row and the layout search)
# ------------------------------------------------------------------------------------------------

def hybrid_fields(spec) -> dict:
    """[issue 17] The hybrid Mamba-Transformer fields of a model row (gpusim.model.hybrid); empty for a transformer
    with attention and an FFN in every layer."""
    if not getattr(spec, "hybrid", False):
        return {}
    L = float(spec.n_layers)
    out = {"attn_frac": spec.n_attn_layers / L, "ffn_frac": spec.n_ffn_layers / L,
           "mamba_frac": spec.n_mamba_layers / L}
    if spec.n_mamba_layers:
        out |= {"mamba_version": float(spec.mamba_version), "mamba_d_inner": spec.mamba_d_inner,
                "mamba_state": float(spec.mamba_state), "mamba_heads": float(spec.mamba_heads),
                "mamba_groups": float(spec.mamba_groups), "mamba_conv": float(spec.mamba_conv),
                "mamba_chunk": float(spec.mamba_chunk), "mamba_dt_rank": float(spec.mamba_dt_rank),
                "mamba_flop_per_token": spec.mamba_fwd_flop_per_token()}
    return out


def _imbalance_frac(spec, strategy) -> float:
    """[issue 17] The busiest EP rank's load over the mean, minus 1: the run's (Strategy ``moe_imbalance_frac``, the
    CLI's ``--moe-imbalance``), else the model's, else NaN (the routing statistics of a balanced router)."""
    if getattr(strategy, "moe_imbalance_frac", None) is not None:
        return float(strategy.moe_imbalance_frac)
    if getattr(strategy, "moe_expert_skew_frac", None) is not None:  # the run's skew decides, not the model's figure
        return float("nan")
    return float("nan") if spec.moe_imbalance_frac is None else float(spec.moe_imbalance_frac)


def moe_fields(spec, strategy) -> dict:
    """The mixture-of-experts fields of a model row (gpusim.model.experts); zero for a dense model."""
    if not getattr(spec, "n_experts", 0):
        return {}
    from gpusim.model.dualpipe import EP_OVERLAPS
    from gpusim.model.experts import DISPATCHERS

    cap = strategy.moe_capacity_factor if strategy.moe_capacity_factor is not None else spec.moe_capacity_factor
    groups = getattr(spec, "moe_n_groups", None)
    limit = getattr(spec, "moe_topk_groups", None)
    return {"ep": float(strategy.ep), "expert_tp": float(strategy.expert_tp),
            "ep_overlap": EP_OVERLAPS[strategy.ep_overlap], "moe_dispatcher": DISPATCHERS[strategy.moe_dispatcher],
            "ep_fp8_dispatch": bool(strategy.ep_fp8_dispatch),
            "moe_router_padding": bool(strategy.moe_router_padding),  # [issue 17]
            "moe_fused_mlp": bool(strategy.moe_fused_mlp),  # [issue 17]
            "moe_n_groups": float(groups or 1), "moe_topk_groups": float(limit) if limit else float("inf"),
            "moe_frac": spec.n_moe_layers / spec.n_layers, "n_experts": float(spec.n_experts),
            "top_k": float(spec.top_k), "expert_ff_dim": float(spec.expert_ff_dim),
            "moe_latent_dim": float(spec.moe_latent_dim or 0),  # [stop 48] LatentMoE
            "shared_ff_dim": float(spec.shared_ff_dim), "moe_capacity": float("nan") if cap is None else float(cap),
            "moe_imbalance_frac": _imbalance_frac(spec, strategy),
            "moe_expert_skew_frac": float("nan") if getattr(strategy, "moe_expert_skew_frac", None) is None
            else float(strategy.moe_expert_skew_frac),  # [issue 17]
            # [issue 17] the experts' output bias and clamped GLU, which Megatron-Core runs as separate kernels
            "moe_expert_bias": bool(spec.expert_bias), "moe_glu_clamp": spec.glu_clamp is not None}


def attention_kernel_slowdown(gpu: GPU, attention: str | None, params: ModelParams) -> tuple[float, float]:
    """[issue 18] (forward, backward) time of the fused attention kernel ``attention`` / the time of the fused
    kernel native to ``gpu``'s generation, which ``flash_fwd_eff_frac`` / ``flash_bwd_eff_frac`` describe.

    - ``flash`` (and None, unfused): 1, 1.
    - ``flash2``: FlashAttention-2 is the native kernel up to Ampere / Ada; on ``flash2_slow_archs`` (Hopper,
      Blackwell) it uses none of their new tensor-core instructions and takes ``flash2_next_gen_slowdown`` times
      as long (FlashAttention-2 section 4.1; FlashAttention-3 abstract: 1.5-2.0x).
    - ``triton``: FlashAttention-2's time times ``flash_triton_fwd_slowdown`` / ``flash_triton_bwd_slowdown``
      (FlashAttention-2 section 4.1 on A100: 1.3-1.5x forward, 2x backward). The Triton of 2022-23 had no Hopper
      instructions either, so on Hopper and Blackwell the FlashAttention-2 factor applies as well.
    """
    if attention not in ("flash2", "triton"):
        return 1.0, 1.0
    gen = params.flash2_next_gen_slowdown if gpu.architecture in params.flash2_slow_archs else 1.0
    if attention == "flash2":
        return gen, gen
    return gen * params.flash_triton_fwd_slowdown, gen * params.flash_triton_bwd_slowdown


def window_fields(spec, seq_len, params: ModelParams) -> dict:
    """[issue 17] The row fields of a model whose attention layers (some or all) use a sliding window or chunks: the
    keys per query its model FLOPs count, as a share of the sequence (``attn_key_frac``: the window's on its layers,
    as gpusim.workload.flops counts them for MFU), and the fused kernel's work against a plain causal mask
    (``attn_tile_frac``, gpusim.model.llm.attention_tile_frac; unfused attention computes every score); none
    otherwise."""
    w = getattr(spec, "attention_window", None)
    if not w or w >= seq_len or not spec.n_attn_layers:
        return {}
    share = spec.n_window_attn_layers / spec.n_attn_layers
    out = {"attn_key_frac": 1.0 - share + share * float(w) / float(seq_len)}
    if spec.flash_attention:
        out["attn_tile_frac"] = attention_tile_frac(float(seq_len), float(w), params.flash_block_tokens,
                                                    chunked=bool(spec.attention_chunked), window_layer_frac=share)
        # [issue 17] the windowed layers' tiles and query blocks against a causal call's (llm.window_time_frac)
        causal = kernel_tiles(float(seq_len), None, params.flash_block_tokens, False)
        out["attn_win_share"] = share
        out["attn_win_tiles_frac"] = kernel_tiles(float(seq_len), float(w), params.flash_block_tokens,
                                                   bool(spec.attention_chunked)) / causal
        out["attn_qblock_per_tile"] = math.ceil(float(seq_len) / params.flash_block_tokens) / causal
    return out


def cuda_graph_fields(spec, st, model_name: str = "") -> dict:
    """[issue 17] The row field of the strategy's CUDA-graph scopes (gpusim.model.graphs; none when eager). The MoE
    scopes capture an MoE layer's parts, so they need a mixture-of-experts model."""
    if not st.cuda_graph_scope:
        return {}
    moe = {"moe", "moe_router", "moe_preprocess"} & set(st.cuda_graph_scope)
    if moe and not getattr(spec, "n_moe_layers", 0):
        raise ScenarioError(f"cuda graph scope {' '.join(sorted(moe))} captures the MoE layers, and "
                            f"{model_name or 'this model'} has none: use attn and mlp (or full_iteration)")
    return {"cuda_graphs": scope_mask(st.cuda_graph_scope)}


def attention_kernel_fields(gpu: GPU, attention: str | None, params: ModelParams) -> dict:
    """The row fields of :func:`attention_kernel_slowdown` (none for the native kernel of Hopper and later: a sweep
    there carries none), and [issue 17] ``attn_fa2``: the kernel is FlashAttention-2's design (flash2 or triton, or
    the native kernel before Hopper), whose rate falls less at head dim 64 (gpusim.model.llm.head_dim_rate_frac)."""
    fwd, bwd = attention_kernel_slowdown(gpu, attention, params)
    out = {} if fwd == bwd == 1.0 else {"attn_fwd_slow": fwd, "attn_bwd_slow": bwd}
    if attention in ("flash2", "triton") or gpu.architecture not in params.flash2_slow_archs:
        out["attn_fa2"] = True
    elif gpu.architecture == "blackwell":  # [issue 17] cuDNN's causal rate curve (gpusim.model.llm.causal_rate_frac)
        out["attn_blackwell"] = True
    return out


def fp8_fields(hw, strategy, params, fp8_ceiling, n_layers: int = 0) -> dict:
    """The FP8 fields of an LLM row (gpusim.model.fp8): the recipe, the FP8 and bf16 matmul ceilings, the bf16
    peak, and the weights' FP8 copies; empty for the other precisions. [stop 57] With layers kept in bf16
    (Strategy ``bf16_layers_start`` / ``_end`` of the model's ``n_layers``) their share of the weights has no
    quantised copy and gathers 16-bit parameters."""
    from gpusim.model import fp8 as FP8
    from gpusim.strategy import GATHER_BYTES

    pr = strategy.precision
    if pr not in ("fp8", "mxfp8", "nvfp4"):
        return {}
    if pr == "mxfp8" and not hw.gpu.microscaling:
        raise ScenarioError(f"mxfp8 needs tensor cores with microscaling formats (NVIDIA Blackwell); {hw.gpu.id} has "
                            f"none: use --precision fp8 (per-tensor scaling)")
    mode = FP8.mode_code(pr, strategy.fp8_recipe, hw.gpu.compute_capability)  # [issue 17] non-TN FP8 GEMMs
    c16 = params.gemm_ceiling_flop_per_s.get("bf16") or hw.gpu.training_matmul_flop_per_s("bf16")  # [issue 17]
    peak16 = hw.gpu.peak_flop_per_s("bf16")
    nan = float("nan")
    if pr == "nvfp4":  # [issue 17] the FP8 kernel ceiling scaled to FP4
        peak_for(hw.gpu, pr)  # (the GPU check and its message)
        fp8_ceiling = nvfp4_ceiling_for(hw.gpu, params)
    b16 = strategy.bf16_layers_start + strategy.bf16_layers_end
    q16 = min(1.0, b16 / n_layers) if n_layers > 0 else 0.0  # [stop 57] the weights' bf16 share
    w16 = GATHER_BYTES[pr]
    return {"fp8_mode": mode, "ceiling_flop_per_s": nan if c16 is None else c16,
            "fp8_ceiling_flop_per_s": nan if fp8_ceiling is None else fp8_ceiling,
            "peak16_flop_per_s": nan if peak16 is None else peak16,
            # [issue 17] FP8 primary weights with a sharded optimizer (gpusim.model.fp8.weight_state_bytes)
            "weight_bytes_per_param": (1.0 - q16) * float(FP8.weight_state_bytes(
                mode, strategy.fp8_param_gather, strategy.shard_stage >= 1, w16, strategy.fp8_transpose_cache))
            + q16 * w16,
            "fp8_retranspose_bytes": float(FP8.retranspose_bytes_per_param(mode, strategy.fp8_transpose_cache)),
            "gather_bytes_per_param": (1.0 - q16) * float(FP8.param_gather_bytes(
                mode, strategy.fp8_param_gather, strategy.shard_stage >= 1, w16)) + q16 * w16,
            "bf16_layers_start": float(strategy.bf16_layers_start), "bf16_layers_end": float(strategy.bf16_layers_end)}


# ------------------------------------------------------------------------------------------------
# Rows in bulk for a grid of hardware options (the sweep, the plan's layout rows)
# ------------------------------------------------------------------------------------------------

#: ``precision="auto"``: bf16 mixed precision where the GPU has bf16 tensor cores, else fp16 mixed precision,
#: else fp32 (the usual choice of recipes since Ampere; Pascal and Volta have no bf16).
AUTO_PRECISION_ORDER = ("amp_bf16", "amp_fp16", "fp32")


def partial_population_ok(node) -> bool:
    """Whether a node template can be bought or rented with fewer GPUs than it holds.

    Cloud instances and rack systems come as listed; NVSwitch and OAM baseboards (HGX, DGX, MI300X
    platforms) are sold populated with all their GPUs (NVIDIA HGX and AMD Instinct platform are 4- or 8-GPU
    boards). PCIe servers and workstations take any number of cards up to their slots.
    """
    if node.kind in ("cloud-instance", "rack"):
        return False
    return node.intra_topology not in ("nvswitch", "nvlink-mesh")


def not_offered_reason(node, g: int) -> str | None:
    """Why ``g`` GPUs per node of template ``node`` is not something one can buy or rent (None if it is)."""
    if g > node.gpus_per_node:
        return f"{node.id} holds {node.gpus_per_node} GPUs, not {g}"
    if g < node.gpus_per_node and not partial_population_ok(node):
        what = "comes with" if node.kind in ("cloud-instance", "rack") else "is a baseboard of"
        return f"{node.id} {what} {node.gpus_per_node} GPUs, not offered with {g}"
    return None


def resolve_precision(gpu, precision: str) -> str | None:
    """``"auto"`` to the first of :data:`AUTO_PRECISION_ORDER` the GPU has a peak for; other names pass."""

    if precision != "auto":
        return precision
    for p in AUTO_PRECISION_ORDER:
        try:
            peak_for(gpu, p)
            return p
        except ScenarioError:
            continue
    return None


#: StepInputs fields set per configuration by the sweep; every other field comes from the hardware row
#: (simulate.hardware_row), the peak of the precision on the GPU, or -- constant for one workload, precision
#: and optimizer -- from simulate.scenario_row itself, so the rows are exactly simulate()'s.
ROW_FIELDS = ("strategy", "micro_batch", "accum", "checkpointing", "cpu_offload", "num_workers")


STEP_FIELDS = tuple(f.name for f in dataclasses.fields(StepInputs))
#: StepInputs fields of one GPU and precision together, which a sweep sets per (hardware row, precision) from its index
#: arrays (``peak``, ``cap``), not per precision (:func:`precision_fields`)
PER_HARDWARE_PRECISION = ("peak_flop_per_s", "matmul_cap_frac")


@dataclass
class HardwareTable:
    """One row per (option, GPUs per node, node count): resolved hardware, or the reason it is not offered."""

    option: list[int]
    nodes: list[int]
    rows: list[dict | None]
    hw: list[Any]
    reason: list[str | None]
    gpu: list[Any]


def option_scenario(wl, opt, db, n_nodes: int, **strategy):
    """The scenario of hardware option ``opt`` (a :class:`gpusim.sweeps.HardwareOption`) on ``n_nodes`` nodes."""
    node_gpu = db.node(opt.node).gpu if opt.node else None
    return Scenario(workload=wl, node=opt.node, gpu=None if (opt.node and node_gpu == opt.gpu) else opt.gpu,
                    gpus=opt.gpus_per_node * n_nodes, nodes=n_nodes, intra=opt.intra, inter=opt.inter, **strategy)


def resolve_hardware_table(wl, options, counts_per_option, db, params) -> HardwareTable:
    """Resolve each (option, node count) once. Rows for 2+ nodes differ only in the counts (the inter-node
    link and its bus bandwidth do not depend on how many nodes), so one resolution at 2 nodes serves all."""
    from pydantic import ValidationError  # (pydantic is imported by the scenario anyway)


    t = HardwareTable([], [], [], [], [], [])
    for oi, opt in enumerate(options):
        gpu = db.gpu(opt.gpu)
        node = db.node(opt.node) if opt.node else None
        offer = not_offered_reason(node, opt.gpus_per_node) if node is not None else None
        cache: dict[bool, tuple] = {}
        for nn in counts_per_option[oi]:
            t.option.append(oi)
            t.nodes.append(nn)
            t.gpu.append(gpu)
            key = nn > 1
            if key not in cache:
                try:
                    scn = option_scenario(wl, opt, db, 2 if key else 1)
                    hw = resolve_hardware(scn, db)
                    cache[key] = (hw, hardware_row(hw, params), None)
                except ValidationError as e:
                    cache[key] = (None, None, format_validation_error(e).removeprefix("invalid scenario: "))
                except GpusimError as e:
                    cache[key] = (None, None, str(e))
            hw, row, err = cache[key]
            if row is not None:
                row = dict(row, n_gpus=float(opt.gpus_per_node * nn), n_nodes=float(nn))
                hw = dataclasses.replace(hw, nodes=nn)
            t.hw.append(hw)
            t.rows.append(row)
            t.reason.append(offer or err)
    return t


def precision_fields(wl, precisions: Sequence[str], hws: Sequence[Any], hw_fields: Sequence[str], optimizer: str,
                      bucket_mib: float, params) -> dict[str, dict]:
    """Per precision: every StepInputs field that is neither hardware nor per-configuration, taken from
    :func:`gpusim.simulation.scenario_row` on a GPU that has the precision (arrays of shape ``(1, K)`` or scalars)."""

    out: dict[str, dict] = {}
    for p in precisions:
        rep = None
        for hw in hws:
            if hw is None:
                continue
            try:
                peak_for(hw.gpu, p)
            except ScenarioError:
                continue
            rep = hw
            break
        if rep is None:
            continue
        row = scenario_row(_ScnShim(p, optimizer, bucket_mib), rep, wl, params)
        d = {}
        for k in STEP_FIELDS:
            if k in hw_fields or k in ROW_FIELDS or k in PER_HARDWARE_PRECISION or k not in row:
                continue  # (fields a data-parallel row leaves at their defaults: the LLM layout's)
            v = row[k]
            d[k] = v[None, :] if isinstance(v, np.ndarray) and v.ndim == 1 else np.asarray(v)
        out[p] = d
    return out


class _ScnShim:
    """The parts of a Scenario that scenario_row reads besides the hardware: the strategy and the slowest GPU."""

    def __init__(self, precision: str, optimizer: str, bucket_mib: float):
        self.strategy = Strategy(precision=precision, optimizer=optimizer, bucket_mib=bucket_mib)
        self.slowest_gpu_speed_frac = 1.0


def hardware_arrays(rows: Sequence[dict | None]) -> dict[str, np.ndarray]:
    """Hardware rows (dicts from simulate.hardware_row, or None) as arrays of the StepInputs fields they hold."""
    first = next((r for r in rows if r is not None), None)
    if first is None:
        return {}
    out = {}
    for k, v in first.items():
        if k not in STEP_FIELDS:
            continue
        if isinstance(v, (bool, np.bool_)):
            out[k] = np.array([bool(r[k]) if r is not None else False for r in rows])
        else:
            out[k] = np.array([float(r[k]) if r is not None else np.nan for r in rows], dtype=np.float64)
    return out


def table_inputs(idx: dict[str, np.ndarray], hw_arr: dict[str, np.ndarray], prec: dict) -> StepInputs:
    """StepInputs for rows given by index arrays: ``h`` (hardware row), ``peak`` and the per-row fields."""
    h = idx["h"]
    d: dict[str, Any] = {k: v[h] for k, v in hw_arr.items()}
    d["peak_flop_per_s"] = idx["peak"]
    if "cap" in idx:  # [issue 17] per hardware row and precision, as the peak
        d["matmul_cap_frac"] = idx["cap"]
    for k in ROW_FIELDS:
        d[k] = idx[k]
    d.update(prec)
    return StepInputs(**d)

