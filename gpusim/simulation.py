"""One scenario in, one explained prediction out: ``simulate(Scenario(...)) -> StepResult``.

This is the edge where names become numbers: a :class:`Scenario` (validated by pydantic) is resolved
against the hardware database and the workload catalogue into a row of :class:`~gpusim.model.step.StepInputs`;
the single-GPU baseline and the what-if variants behind the recommendations are more rows of the same
arrays, so one call of the vectorised model answers all of them (the same code path as a sweep).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from pydantic import ConfigDict, Field, ValidationError, model_validator

from gpusim import units
from gpusim.checks import FiniteModel
from gpusim.errors import GpusimError, ScenarioError
from gpusim.hardware import GPU, IntraTopology, Link, Node
from gpusim.model import comm as C
from gpusim.model.context import CP_KINDS
from gpusim.workload.flops import model_fwd_flop_per_sample
from gpusim.model.fabric import (NETWORK_PATH, PATH_CODES, TOPOLOGY_CODES, eff_table, inter_node_busbw,
                                 intra_node_busbw)
from gpusim.model.step import BOTTLENECKS, BREAKDOWN_KEYS, LLM_BREAKDOWN_KEYS, StepInputs, evaluate
from gpusim.params import DEFAULT_PARAMS, PATH_CLASSES, ModelParams
from gpusim.strategy import (ACT_ELEM_BYTES, GATHER_BYTES, GRAD_BYTES, MASTER_BYTES, PEAK_KEY, WEIGHT_BYTES, Strategy,
                             opt_state_bytes, opt_traffic_bytes)

_STRATEGY_FIELDS = set(Strategy.model_fields)
#: the CLI's and DESIGN.md's flat names for strategy fields
_ALIASES = {"strategy_kind": "kind", "micro_batch": "per_gpu_batch"}


class Scenario(FiniteModel):
    """What to predict: workload, hardware, strategy. Strategy fields may be given flat
    (``Scenario(model="resnet50", gpu="h100-sxm", gpus=8, per_gpu_batch=256, precision="amp_bf16")``)."""

    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)

    model: str | None = Field(default=None, description="workload id from the catalogue (`gpusim models`)")
    workload: Any = Field(default=None, exclude=True, description="a gpusim.workload.Workload (instead of `model`)")
    seq_len: int | None = Field(default=None, ge=1, le=10_000_000)
    gpu: str | None = Field(default=None, description="GPU id; default the node template's GPU")
    node: str | None = Field(default=None, description="node template id (its GPU, fabric, CPUs, NICs)")
    gpus: int = Field(default=1, ge=1, le=1_000_000, description="total GPUs")
    nodes: int = Field(default=1, ge=1, le=100_000)
    intra: str | None = Field(default=None, description="intra-node link id (default: the GPU's usual fabric)")
    intra_topology: IntraTopology | None = None
    p2p: bool | None = Field(default=None, description="override peer-to-peer between GPUs")
    inter: str | None = Field(default=None, description="inter-node link id (default: the node's NICs)")
    nics_per_node: int | None = Field(default=None, ge=1, le=72)
    oversubscription: float = Field(default=1.0, ge=1.0, le=16.0)
    cpu_cores_per_gpu: float | None = Field(default=None, ge=0.01, le=1024)
    storage_gbyte_per_s: float | None = Field(default=None, ge=1e-3, le=10000, description="per node")
    strategy: Strategy = Field(default_factory=Strategy)
    baseline_throughput: float | None = Field(default=None, ge=1e-6, le=1e9,
                                              description="measured one-GPU samples/s at this per-GPU batch")
    slowest_gpu_speed_frac: float = Field(default=1.0, ge=0.01, le=1,
                                          description="speed of the slowest GPU relative to the others")

    @model_validator(mode="before")
    @classmethod
    def _flat_strategy(cls, data):
        if not isinstance(data, dict):
            return data
        data = dict(data)
        flat = {(_ALIASES.get(k, k)): data.pop(k) for k in list(data)
                if (_ALIASES.get(k, k)) in _STRATEGY_FIELDS and k != "strategy"}
        if "strategy" in data and isinstance(data["strategy"], str):
            flat.setdefault("kind", data.pop("strategy"))
        if flat:
            base = data.get("strategy") or {}
            if isinstance(base, Strategy):
                base = base.model_dump()
            data["strategy"] = {**base, **flat}
        return data

    @model_validator(mode="after")
    def _check(self):
        if (self.model is None) == (self.workload is None):
            raise ValueError("give exactly one of `model` (a catalogue id) or `workload`")
        if self.gpu is None and self.node is None:
            raise ValueError("give a GPU (`gpu`) or a node template (`node`)")
        if self.gpus % self.nodes:
            raise ValueError(f"{self.gpus} GPUs cannot be split evenly over {self.nodes} nodes "
                             f"(use a multiple of {self.nodes}, e.g. {self.nodes * max(1, self.gpus // self.nodes)})")
        if self.strategy.kind == "dp" and self.nodes > 1:
            raise ValueError("DataParallel (strategy 'dp') runs in one process on one node; use 'ddp' across nodes")
        return self

    def with_changes(self, **changes) -> Scenario:
        strat = {k: changes.pop(k) for k in list(changes) if k in _STRATEGY_FIELDS}
        data = self.model_dump(exclude={"workload"})
        data.update(changes)
        data["strategy"] = {**self.strategy.model_dump(), **strat}
        if self.workload is not None:
            data["workload"] = self.workload
        return Scenario.model_validate(data)

    @classmethod
    def create(cls, **kwargs) -> Scenario:
        """Like the constructor, but bad input raises :class:`ScenarioError` with every problem listed."""
        try:
            return cls.model_validate(kwargs)
        except ValidationError as e:
            raise ScenarioError(format_validation_error(e)) from None


def format_validation_error(e: ValidationError) -> str:
    """One line with every problem; a number out of range says the field's whole range."""
    from gpusim import checks

    return checks.format_validation_error(e, Scenario)


# ------------------------------------------------------------------------------------------------
# Hardware resolution
# ------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Hardware:
    """The concrete hardware a scenario runs on, with the defaults that were filled in."""

    gpu: GPU
    gpus_per_node: int
    nodes: int
    intra_link: Link | None
    topology: str
    p2p: bool
    pcie_link: Link
    socket_link: Link | None
    inter_link: Link | None
    nics_per_node: int
    oversubscription: float
    cpu_cores_per_gpu: float
    storage_bytes_per_s_per_node: float
    node: Node | None
    assumptions: tuple[str, ...] = ()
    nvlink_domain_gpus: int | None = None

    @property
    def in_nvlink_domain(self) -> bool:
        """Every rank reaches every other over NVLink although they span several nodes (an NVL72 rack's trays)."""
        return (self.nodes > 1 and self.nvlink_domain_gpus is not None and self.n_gpus <= self.nvlink_domain_gpus
                and self.topology == "nvswitch")

    @property
    def n_gpus(self) -> int:
        return self.gpus_per_node * self.nodes


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
        nics = scn.nics_per_node or (node.nics_per_node if (node is not None and node.nic_link and not scn.inter
                                                            ) else 0) or g
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
                    nvlink_domain_gpus=node.nvlink_domain_gpus if (node is not None and not scn.intra) else None)


def resolve_workload(scn: Scenario):
    if scn.workload is not None:
        w = scn.workload
        return w.with_seq_len(scn.seq_len) if scn.seq_len else w
    from gpusim.workload import get_workload

    return get_workload(scn.model, seq_len=scn.seq_len)


# ------------------------------------------------------------------------------------------------
# Rows of model inputs
# ------------------------------------------------------------------------------------------------

_MEMORY_BOUND_KINDS = {"elementwise", "norm", "pool"}


def roofline_by_kind(workload) -> tuple[tuple[str, ...], dict[str, np.ndarray]]:
    """The workload's layer groups for the model's roofline, with memory-bound kinds merged.

    Elementwise, normalisation and pooling layers are always bound by memory traffic, so summing them per
    kind is exact (``sum(max(f/P, b/B)) = sum(b)/B`` when ``f/P`` never wins); compute kinds (matmul, conv,
    attention ...) keep their groups, so each keeps its own roofline. This keeps the arrays narrow for sweeps.
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
        out["fwd_flop_per_sample"][i] += g.fwd_flop_per_sample
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


def peak_for(gpu: GPU, precision: str) -> float:
    """Dense peak FLOP/s of the precision's matmuls. AMP fp16 on a GPU without a 16-bit matmul path
    faster than fp32 (Pascal) runs at the fp32 rate."""
    key = PEAK_KEY[precision]
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
    g = hw.gpus_per_node
    link_bw = hw.intra_link.bandwidth_bytes_per_s if hw.intra_link else math.inf
    peers = hw.intra_link.mesh_peers if hw.intra_link else None
    if peers and hw.topology == "nvlink-mesh":  # a point-to-point mesh: g GPUs use g-1 of the GPU's links
        link_bw *= min(g - 1, peers) / peers
    sock = hw.socket_link.bandwidth_bytes_per_s if hw.socket_link else math.inf
    intra_bw, path = intra_node_busbw(TOPOLOGY_CODES[hw.topology], g, link_bw, hw.pcie_link.bandwidth_bytes_per_s,
                                      sock, hw.p2p, eff)
    intra_hop = hw.intra_link.latency_s if hw.intra_link else 0.0
    if hw.topology == "nvlink-bridge-pairs" and g > 2:
        intra_hop = max(intra_hop, hw.pcie_link.latency_s)
    if hw.inter_link is not None:
        net_path = PATH_CODES[NETWORK_PATH[hw.inter_link.kind]]
        inter_bw = inter_node_busbw(hw.inter_link.bandwidth_bytes_per_s, hw.nics_per_node, net_path,
                                    hw.oversubscription, eff)
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
        "nvls": bool(hw.intra_link is not None and hw.intra_link.nvls and hw.topology == "nvswitch"),
        # host copies and CPU offload use the CPU-GPU link: PCIe, or NVLink-C2C on superchips
        "pcie_bytes_per_s": max(hw.pcie_link.bandwidth_bytes_per_s, hw.gpu.host_link_bytes_per_s or 0.0),
        "cores_per_gpu": float(hw.cpu_cores_per_gpu),
        "storage_bytes_per_s_per_gpu": hw.storage_bytes_per_s_per_node / g,
        "cpu_optimizer_bytes_per_s": params.cpu_optimizer_bytes_per_s,
        "_intra_path": int(path), "_inter_path": int(net_path),
        "_ll_max": _ll_max(hw, params),
        "ll128": _ll128(hw, int(path), params),
        "_sharp": bool(hw.inter_link is not None and hw.nodes > 1 and hw.inter_link.in_network_reduction),
    }
    row["ll_max_busbw_bytes_per_s"] = row["_ll_max"]  # the step model's copy
    return row


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


def _ll_max(hw: Hardware, params: ModelParams) -> float:
    """NCCL's LL bus-bandwidth cap for this GPU generation and node count (inf where none is known)."""
    caps = params.ll_max_busbw_bytes_per_s.get(hw.gpu.architecture) if hw.gpu.vendor == "nvidia" else None
    return float(caps[min(hw.nodes, 3) - 1]) if caps else math.inf


def _block_bytes(workload) -> float:
    """Activations of the block being recomputed under checkpointing; estimated from the kernel count
    (about 20 kernels per block) when the workload does not give it."""
    from gpusim.model.memory import n_blocks

    block = getattr(workload, "act_block_bytes_per_sample", None)
    if block is not None:
        return float(block)
    return float(workload.act_bytes_per_sample / n_blocks(workload.fwd_kernels))


def scenario_row(scn: Scenario, hw: Hardware, workload, params: ModelParams,
                 hw_row: dict[str, Any] | None = None) -> dict[str, Any]:
    """One row of model inputs; ``hw_row`` (from :func:`hardware_row` for the same ``hw``) saves recomputing it."""
    st = scn.strategy
    pr = st.precision
    kinds, ga = roofline_by_kind(workload)
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
        "strategy": st.code, "micro_batch": float(st.per_gpu_batch), "accum": float(st.accum),
        "checkpointing": st.activation_checkpointing, "cpu_offload": st.cpu_offload, "bucket_bytes": st.bucket_bytes,
        "num_workers": -1.0 if st.num_workers is None else float(st.num_workers), "pin_memory": st.pin_memory,
        "act_scale": ACT_ELEM_BYTES[pr] / 2.0, "weight_bytes_per_param": WEIGHT_BYTES[pr],
        "grad_bytes_per_param": GRAD_BYTES[pr], "gather_bytes_per_param": GATHER_BYTES[pr],
        "master_bytes_per_param": MASTER_BYTES[pr], "opt_state_bytes_per_param": opt_state_bytes(st.optimizer, st.opt_state_dtype),
        "opt_traffic_bytes_per_param": opt_traffic_bytes(st.optimizer, st.opt_state_dtype),
        "compute_override_s": math.nan, "slowest_speed_frac": scn.slowest_gpu_speed_frac,
    })
    if st.is_llm:
        row.update(llm_row(scn, hw, workload, params))
    elif st.global_batch is not None:  # data parallel with a global batch: accumulation = global / (micro x GPUs)
        from gpusim.layout import Layout

        row["accum"] = float(Layout.create(gpus=hw.n_gpus, micro_batch=st.per_gpu_batch,
                                           global_batch=st.global_batch).n_micro)
    return row


def transformer_of(workload):
    """The TransformerSpec behind a workload, or None (CNNs, GNMT, custom and measured workloads)."""
    return getattr(workload, "transformer", None)


def nvlink_domain_gpus(hw: Hardware) -> int:
    """GPUs that share one NVLink (or PCIe) domain: tensor parallelism should stay inside it."""
    return int(getattr(hw.node, "nvlink_domain_gpus", None) or hw.gpus_per_node)


def scenario_layout(scn: Scenario, hw: Hardware, workload):
    """The checked :class:`~gpusim.layout.Layout` of an LLM scenario (raises ScenarioError with every factor)."""
    from gpusim.layout import Layout

    st = scn.strategy
    spec = transformer_of(workload)
    if spec is None:
        raise ScenarioError(f"tensor/pipeline parallelism and recomputation modes need a transformer; {workload.id!r} "
                            f"is not one (use tp 1, pp 1 and --checkpointing)")
    if scn.baseline_throughput:
        raise ScenarioError("--baseline-throughput is a one-GPU measurement and cannot be combined with tp/pp layouts")
    from gpusim.search import check_cp, check_dualpipe, check_ep, padded_layers  # [issue 12] cp, ep, uneven

    check_cp(seq_len=scn.seq_len or spec.seq_len, cp=st.cp, flash=bool(spec.flash_attention), tp=st.tp,
             domain=nvlink_domain_gpus(hw))
    model_par = st.tp * st.pp * st.cp
    check_ep(spec, ep=st.ep, expert_tp=st.expert_tp, capacity=st.moe_capacity_factor, tp=st.tp, cp=st.cp,
             ep_overlap=st.ep_overlap, moe_dispatcher=st.moe_dispatcher, ep_fp8_dispatch=st.ep_fp8_dispatch,
             dp=hw.n_gpus // model_par if hw.n_gpus % model_par == 0 else None)
    n_layers = padded_layers(spec.n_layers, st.pp, st.vp) if st.uneven_pp else spec.n_layers
    lay = Layout.create(gpus=hw.n_gpus, tp=st.tp, pp=st.pp, vp=st.vp, cp=st.cp, sp=st.sp,
                               micro_batch=st.per_gpu_batch,
                               global_batch=st.global_batch, accum=st.accum, recompute=st.recompute_mode,
                               n_layers=n_layers, n_heads=spec.n_heads, n_kv_heads=spec.n_kv_heads or spec.n_heads,
                               nvlink_domain_gpus=nvlink_domain_gpus(hw), force_tp=st.force_tp)
    check_dualpipe(st.ep_overlap, pp=lay.pp, vp=lay.vp, n_micro=lay.n_micro)  # [issue 12]
    check_memory_saving(spec, st)
    return spec, lay


def check_memory_saving(spec, st) -> None:
    """[issue 12] The memory-saving options need what they act on; raises ScenarioError naming the fix."""
    problems = []
    mods = st.recompute_modules or ()
    if "mla_up_proj" in mods and not getattr(spec, "mla", False):
        problems.append(f"--recompute-modules mla_up_proj needs multi-head latent attention (DeepSeek-V2/V3); "
                        f"{getattr(spec, 'name', None) or 'this model'} has none")
    if "moe_act" in mods and not getattr(spec, "n_experts", 0):
        problems.append(f"--recompute-modules moe_act needs a mixture-of-experts model; {getattr(spec, 'name', None) or 'this model'} "
                        f"is dense")
    if st.fp8_activations and st.precision not in ("fp8", "mxfp8"):
        problems.append(f"--fp8-activations keeps activations in FP8 and needs --precision fp8 or mxfp8, not "
                        f"{st.precision}")
    if st.ep_fp8_dispatch and st.precision not in ("fp8", "mxfp8"):
        problems.append(f"--ep-fp8-dispatch dispatches the FP8 copies the expert GEMMs read and needs --precision "
                        f"fp8 or mxfp8, not {st.precision}")
    if problems:
        raise ScenarioError("; ".join(problems))


def memory_saving_fields(spec, st) -> dict:
    """[issue 12] Row fields of the recomputed modules and the FP8 activation cache (gpusim.model.llm), and MLA's
    up-projection shapes (zero without MLA): the latents' widths and the up-projections' output widths."""
    mods = st.recompute_modules or ()
    out = {"recompute_norms": "layernorm" in mods, "recompute_mla_up": "mla_up_proj" in mods,
           "recompute_moe_act": "moe_act" in mods, "fp8_act": bool(st.fp8_activations)}
    if getattr(spec, "mla", False):
        a = float(spec.n_heads)
        ql = float(spec.q_lora_rank or 0)
        out |= {"mla_q_lora": ql, "mla_kv_lora": float(spec.kv_lora_rank),
                "mla_kv_up": a * (spec.qk_nope_head_dim + spec.v_head_dim),
                "mla_kv_a": float(spec.kv_lora_rank + spec.qk_rope_head_dim), "v_dim": float(spec.v_dim)}
    return out


def llm_row(scn: Scenario, hw: Hardware, workload, params: ModelParams = DEFAULT_PARAMS) -> dict[str, Any]:
    """The LLM-layout part of a row: degrees, the transformer's shape, the GEMM ceiling, Megatron's state bytes."""
    from gpusim.search import fp8_fields, moe_fields, padded_layers  # [issue 12]
    from gpusim.strategy import MEGATRON_OPT_EXTRA_BYTES, RECOMPUTE_CODES

    st = scn.strategy
    spec, lay = scenario_layout(scn, hw, workload)
    pr = st.precision
    h = float(spec.d_model)
    embed = spec.vocab_size * h + ((spec.max_positions or spec.seq_len) * h if spec.learned_pos else 0.0)
    key = PEAK_KEY[pr]
    # a calibration's measured ceiling, else the database's measured best-shape figure, else (NaN) a fraction of peak
    ceiling = params.gemm_ceiling_flop_per_s.get(key) or hw.gpu.achievable_matmul_flop_per_s(key)
    half = GATHER_BYTES[pr] == 2
    return {
        "llm": True, "tp": float(lay.tp), "pp": float(lay.pp), "vp": float(lay.vp), "sp": lay.sp,
        "cp": float(lay.cp), "cp_kind": CP_KINDS[st.cp_comm],  # [issue 12]
        "nvlink_domain_gpus": float(nvlink_domain_gpus(hw)), **moe_fields(spec, st),
        "recompute": RECOMPUTE_CODES[lay.recompute], "dp_overlap": 1.0 if st.overlap_grad_reduce else 0.0,
        "grad_accum_fusion": st.grad_accum_fusion, "tp_async_bwd": st.tp_async_bwd,
        "tp_comm_overlap": st.tp_comm_overlap,  # [issue 17]
        "accum": float(lay.n_micro), "micro_batch": float(lay.micro_batch),
        "n_layers": float(padded_layers(spec.n_layers, lay.pp, lay.vp) if st.uneven_pp else spec.n_layers),
        "model_layers": float(spec.n_layers), "d_model": h, "n_heads": float(spec.n_heads), "q_dim": spec.q_dim,
        "kv_dim": spec.kv_dim, "ff_dim": spec.ff_dim, "ffn_mats": 3.0 if spec.gated_ffn else 2.0,
        "vocab": float(spec.vocab_size), "seq_len": float(scn.seq_len or spec.seq_len), "dropout": bool(spec.dropout),
        "flash": bool(spec.flash_attention), "rope": bool(spec.rope), "untied": not spec.tied_embeddings,
        "layer_params": float(spec.layer_params()), "embed_params": float(embed),
        "ceiling_flop_per_s": math.nan if ceiling is None else ceiling, "sm_count": float(hw.gpu.sm_count or 1),
        "gemm_serial_epilogue": hw.gpu.architecture not in params.gemm_epilogue_overlap_archs,
        # Megatron mixed precision: 16-bit weights, fp32 main gradients, fp32 master copy (+ the optimizer's states)
        "weight_bytes_per_param": float(GATHER_BYTES[pr]), "grad_bytes_per_param": 4.0,
        "master_bytes_per_param": 4.0 if half else 0.0,
        "opt_traffic_bytes_per_param": opt_traffic_bytes(st.optimizer, st.opt_state_dtype) + MEGATRON_OPT_EXTRA_BYTES[pr],
        **memory_saving_fields(spec, st),  # [issue 12] recompute modules, FP8 activation cache
        **fp8_fields(hw, st, params, ceiling),  # [issue 12] FP8 recipes: ceilings, cast mode, weight copies
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


# ------------------------------------------------------------------------------------------------
# Results
# ------------------------------------------------------------------------------------------------

#: how mfu_frac counts model FLOPs
MFU_CONVENTION = ("model FLOPs = 3 x forward (6 x parameters x tokens for the GEMMs, plus attention 4 s^2 q per layer "
                  "and sequence counted without the causal saving), recomputation not counted (PaLM appendix B; "
                  "NVIDIA Megatron-LM tables), over the dense datasheet peak of the precision")


@dataclass(frozen=True)
class StepResult:
    """A prediction for one scenario. Times in seconds, rates per second, sizes in bytes.

    ``breakdown_s`` parts sum to ``step_s``. ``speedup`` and ``scaling_efficiency_frac`` compare with the same
    GPU alone at the same per-GPU batch (weak scaling): ``efficiency = T1 / (N * TN)`` for equal work.
    """

    step_s: float
    throughput_samples_per_s: float
    throughput_per_gpu_samples_per_s: float
    throughput_tokens_per_s: float | None
    speedup: float
    scaling_efficiency_frac: float
    mfu_frac: float
    gpu_util_frac: float
    memory_per_gpu_bytes: float
    memory_capacity_bytes: float
    fits_in_memory: bool
    max_micro_batch: int
    bottleneck: str
    breakdown_s: dict[str, float]
    detail: dict[str, float]
    memory_breakdown_bytes: dict[str, float]
    single_gpu_step_s: float
    single_gpu_throughput_samples_per_s: float
    global_batch: int
    n_gpus: int
    n_nodes: int
    intra_path: str | None
    inter_path: str | None
    recommendations: tuple[dict, ...] = ()
    assumptions: tuple[str, ...] = ()
    scenario: dict = field(default_factory=dict)
    # LLM views (tokens, model FLOPs as NVIDIA's tables count them, the layout)
    tokens_per_s: float | None = None
    tokens_per_s_per_gpu: float | None = None
    model_tflop_per_s_per_gpu: float | None = None
    mfu_flop_convention: str = MFU_CONVENTION
    parallelism: dict = field(default_factory=dict)
    memory_per_stage_bytes: dict = field(default_factory=dict)
    n_micro_batches: int = 1

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["recommendations"] = list(self.recommendations)
        d["assumptions"] = list(self.assumptions)
        return d


def _row_result(out: dict, i: int) -> dict[str, float]:
    return {k: (v[i] if np.ndim(v) else v) for k, v in out.items()}


def _path_name(code: int) -> str | None:
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


def simulate(scenario: Scenario | dict, *, db=None, params: ModelParams | None = None,
             recommend: bool = True) -> StepResult:
    """Predict one training step. ``scenario`` may be a :class:`Scenario` or a dict of its fields.

    Raises :class:`~gpusim.errors.GpusimError` (unknown ids, impossible configurations) with a message
    that says how to fix it.
    """
    from gpusim.diagnose import llm_variant_candidates, llm_variant_scenarios, recommendations, variant_scenarios
    from gpusim.hwdb import load

    scn = scenario if isinstance(scenario, Scenario) else Scenario.create(**scenario)
    db = db or load()
    params = params or DEFAULT_PARAMS
    wl = resolve_workload(scn)
    hw_cache: dict = {}  # hardware resolved once per distinct hardware: most what-ifs change only the strategy
    row = _cached_row(scn, wl, db, params, hw_cache)
    hw = hw_cache[_hardware_key(scn)][0]
    single_row = _cached_row(_single_gpu(scn), wl, db, params, hw_cache)

    rows = [row, single_row]
    if scn.baseline_throughput:
        _apply_baseline(rows, scn, params)

    # an LLM layout's what-ifs do not depend on its result, only which of them are shown does: they are evaluated
    # with the layout in one call (rows are independent: vectorised equals one at a time)
    speculative = llm_variant_candidates(scn, hw) if recommend and scn.strategy.is_llm else []
    spec_rows = _variant_rows(scn, speculative, rows, wl, db, params, hw_cache)
    first = evaluate(stack_rows(rows + [r for _, _, r in spec_rows]), params)
    if speculative:
        wanted = {name for name, _ in llm_variant_scenarios(scn, hw, first, speculative)}
        keep = [j for j, (name, _, _) in enumerate(spec_rows) if name in wanted]
        var_rows = [spec_rows[j] for j in keep]
        idx = list(range(len(rows))) + [len(rows) + j for j in keep]  # the layout, its one-GPU row, the wanted
        total = len(rows) + len(spec_rows)
        out = {k: np.broadcast_to(v, (total,))[idx] for k, v in first.items()}
    else:
        variants = variant_scenarios(scn, hw, wl, first, db) if recommend else []
        var_rows = _variant_rows(scn, variants, rows, wl, db, params, hw_cache)
        # rows are independent (vectorised equals one at a time): the what-ifs are evaluated on their own
        out = _concat_rows(first, evaluate(stack_rows([r for _, _, r in var_rows]), params)) if var_rows else first
    res = _make_result(scn, hw, wl, out, 0, 1, row)
    if recommend:
        recs = recommendations(scn, hw, wl, res, [(name, vscn, _row_result(out, 2 + j))
                                                  for j, (name, vscn, _) in enumerate(var_rows)])
        res = dataclasses.replace(res, recommendations=tuple(recs))
    return res


def _cached_row(scn: Scenario, wl, db, params: ModelParams, hw_cache: dict) -> dict:
    """:func:`scenario_row` of ``scn``, its hardware resolved once per distinct hardware (``hw_cache``)."""
    key = _hardware_key(scn)
    if key not in hw_cache:
        hw = resolve_hardware(scn, db)
        hw_cache[key] = (hw, hardware_row(hw, params))
    hw, hw_row = hw_cache[key]
    return scenario_row(scn, hw, wl, params, hw_row=hw_row)


def _variant_rows(scn: Scenario, variants, rows, wl, db, params: ModelParams, hw_cache: dict) -> list:
    """``(name, scenario, row)`` of each what-if that builds (an impossible one is left out)."""
    var_rows = []
    for name, vscn in variants:
        try:
            vrow = _cached_row(vscn, wl, db, params, hw_cache)
        except GpusimError:
            continue
        if scn.baseline_throughput:
            vrow["compute_override_s"] = _rescaled_override(rows, vrow, params)
        var_rows.append((name, vscn, vrow))
    return var_rows


_HARDWARE_FIELDS = ("gpu", "node", "gpus", "nodes", "intra", "intra_topology", "p2p", "inter", "nics_per_node",
                    "oversubscription", "cpu_cores_per_gpu", "storage_gbyte_per_s")


def _hardware_key(scn: Scenario) -> tuple:
    """The scenario fields :func:`resolve_hardware` reads."""
    return tuple(getattr(scn, f) for f in _HARDWARE_FIELDS)


def _concat_rows(a: dict, b: dict) -> dict:
    """The outputs of two evaluate() calls as one, rows of ``a`` first."""
    na = len(np.atleast_1d(a["step_s"]))
    nb = len(np.atleast_1d(b["step_s"]))
    return {k: np.concatenate([np.broadcast_to(a[k], (na,)), np.broadcast_to(b[k], (nb,))]) for k in a}


def _apply_baseline(rows: list[dict], scn: Scenario, params: ModelParams) -> None:
    """Replace the modelled micro-batch compute time by the one implied by a measured one-GPU throughput."""
    first = evaluate(stack_rows(rows), params)
    st = scn.strategy
    measured_step_s = st.per_gpu_batch * st.accum / scn.baseline_throughput
    other = float(first["optimizer_s"][1] + first["overhead_s"][1] + first["data_wait_s"][1])
    micro = max((measured_step_s - other) / st.accum, 0.3 * measured_step_s / st.accum)
    for r in rows:
        r["compute_override_s"] = micro
    rows[0]["_modelled_micro_s"] = float(first["micro_compute_s"][1])


def _rescaled_override(rows: list[dict], vrow: dict, params: ModelParams) -> float:
    """A variant with another batch or precision scales the measured time by the model's own ratio."""
    measured = rows[0]["compute_override_s"]
    one = evaluate(stack_rows([{**rows[1], "compute_override_s": math.nan},
                               {**vrow, "n_gpus": 1.0, "n_nodes": 1.0, "compute_override_s": math.nan}]), params)
    ratio = float(one["micro_compute_s"][1] / one["micro_compute_s"][0])
    return measured * ratio


def _make_result(scn: Scenario, hw: Hardware, wl, out: dict, i: int, base: int, row: dict) -> StepResult:
    r = _row_result(out, i)
    b1 = _row_result(out, base)
    thr = float(r["throughput_samples_per_s"])
    thr1 = float(b1["throughput_samples_per_s"])
    speedup = thr / thr1
    tokens = float(wl.tokens_per_sample) if getattr(wl, "sample_unit", "image") == "sequence" else None
    st = scn.strategy
    llm = bool(r.get("llm", False)) or st.is_llm
    breakdown = {k: float(r["comm_exposed_s" if k == "dp_comm_exposed_s" else k])
                 for k in (LLM_BREAKDOWN_KEYS if llm else BREAKDOWN_KEYS)}
    notes = hw.assumptions
    if hw.n_gpus > 1 and not bool(b1["fits_in_memory"]):
        notes += ("the one-GPU reference of speedup and efficiency does not fit in one GPU's memory: it is the "
                  "modelled time of that GPU as if it did",)
    if speedup > hw.n_gpus * (1.0 + 1e-9):
        notes += (f"superlinear scaling ({speedup / hw.n_gpus:.0%} efficiency): {st.kind} shards the optimizer step "
                  f"(and memory) over the GPUs, which one GPU alone must do in full (ZeRO, SC'20, reports the same)",)
    return StepResult(
        step_s=float(r["step_s"]), throughput_samples_per_s=thr,
        throughput_per_gpu_samples_per_s=float(r["throughput_per_gpu_samples_per_s"]),
        throughput_tokens_per_s=thr * tokens if tokens else None,
        speedup=speedup, scaling_efficiency_frac=speedup / hw.n_gpus, mfu_frac=float(r["mfu_frac"]),
        gpu_util_frac=float(r["gpu_util_frac"]), memory_per_gpu_bytes=float(r["memory_per_gpu_bytes"]),
        memory_capacity_bytes=hw.gpu.memory_bytes, fits_in_memory=bool(r["fits_in_memory"]),
        max_micro_batch=int(r["max_micro_batch"]), bottleneck=BOTTLENECKS[int(r["bottleneck_code"])],
        breakdown_s=breakdown,
        detail={k: float(r[k]) for k in ("comm_total_s", "comm_hidden_s", "comm_interference_s", "micro_compute_s",
                                         "fwd_s", "bwd_s", "gpu_busy_s", "cpu_dispatch_s", "roofline_s",
                                         "loader_supply_samples_per_s", "h2d_s", "grad_bytes", "allreduce_s")},
        memory_breakdown_bytes={k.removeprefix("memory_").removesuffix("_bytes"): float(r[k]) for k in
                                ("memory_weights_bytes", "memory_gradients_bytes", "memory_optimizer_bytes",
                                 "memory_activations_bytes", "memory_buffers_bytes", "memory_overhead_bytes")},
        single_gpu_step_s=float(b1["step_s"]), single_gpu_throughput_samples_per_s=thr1,
        global_batch=int(round(float(row["micro_batch"]) * float(row["accum"]) * float(r["dp_degree"]))),
        n_gpus=hw.n_gpus, n_nodes=hw.nodes,
        intra_path=_path_name(row["_intra_path"]), inter_path=_path_name(row["_inter_path"]),
        assumptions=notes,
        scenario={**scn.model_dump(mode="json", exclude={"workload"}), "workload_name": wl.name,
                  "gpu_resolved": hw.gpu.id, "node_resolved": hw.node.id if hw.node else None,
                  "intra_link_resolved": hw.intra_link.id if hw.intra_link else None,
                  "intra_topology_resolved": hw.topology, "p2p_resolved": hw.p2p,
                  "inter_link_resolved": hw.inter_link.id if hw.inter_link else None,
                  "nics_per_node_resolved": hw.nics_per_node},
        **_llm_views(r, row, hw, tokens, thr),
    )


def _llm_views(r: dict, row: dict, hw: Hardware, tokens: float | None, thr: float) -> dict:
    """Tokens, model TFLOP/s per GPU, the degrees and memory per stage of a result row."""
    dp = int(round(float(r["dp_degree"])))
    seq = float(row.get("seq_len", 0.0)) or tokens
    tps = thr * seq if seq else None
    out = {"tokens_per_s": tps, "tokens_per_s_per_gpu": tps / hw.n_gpus if tps else None,
           "model_tflop_per_s_per_gpu": units.flop_per_s_to_tflop_per_s(
               float(r["model_flop_per_step"]) / float(r["step_s"]) / hw.n_gpus),
           "parallelism": {"tp": int(row.get("tp", 1)), "pp": int(row.get("pp", 1)), "vp": int(row.get("vp", 1)),
                           "cp": int(row.get("cp", 1)), "ep": int(row.get("ep", 1)), "dp": dp},
           "n_micro_batches": int(row["accum"])}
    if row.get("llm"):
        out["memory_per_stage_bytes"] = {"first": float(r["memory_first_stage_bytes"]),
                                         "last": float(r["memory_last_stage_bytes"])}
        out["parallelism"]["sp"] = bool(row["sp"])
    return out


# ------------------------------------------------------------------------------------------------
# Curves and single collectives
# ------------------------------------------------------------------------------------------------

def scaling_curve(scenario: Scenario | dict, gpu_counts=None, *, mode: str = "weak", global_batch: int | None = None,
                  db=None, params: ModelParams | None = None, skipped: list | None = None) -> list[dict]:
    """Throughput, speedup and efficiency over GPU counts, in one vectorised model call.

    ``mode="weak"`` keeps the per-GPU batch; ``"strong"`` keeps the global batch (``global_batch``, default the
    scenario's) and divides it over the GPUs (counts that do not divide it are skipped). Node counts follow
    the scenario's GPUs per node (``gpus // nodes``) when it is split over nodes, else its node template's
    (so 64 H100 SXM fill 8 nodes of 8, not one node of 64). ``skipped``: a list that receives
    ``(gpus, reason)`` for every count left out.
    """
    from gpusim.hwdb import load

    scn = scenario if isinstance(scenario, Scenario) else Scenario.create(**scenario)
    db = db or load()
    params = params or DEFAULT_PARAMS
    per_node = scn.gpus // scn.nodes
    if scn.nodes == 1:  # not split by the user: as many per node as the node template holds
        try:
            one = resolve_hardware(scn.with_changes(gpus=1, nodes=1), db)
            if one.node is not None:
                per_node = one.node.gpus_per_node
        except (GpusimError, ValidationError):
            pass
    skipped = [] if skipped is None else skipped
    if gpu_counts is None:
        top = max(scn.gpus, 8)
        gpu_counts = sorted({1, 2, 4, 8, *(2**i for i in range(4, 20) if 2**i <= top), scn.gpus})
    st = scn.strategy
    gb = global_batch or st.per_gpu_batch * st.accum * scn.gpus
    wl = resolve_workload(scn)
    rows, meta = [], []
    for n in gpu_counts:
        nodes = max(1, math.ceil(n / per_node))
        if n % nodes:
            skipped.append((n, f"{n} GPUs do not split evenly over {nodes} nodes of up to {per_node}"))
            continue
        changes: dict[str, Any] = {"gpus": n, "nodes": nodes}
        if mode == "strong":
            if gb % (n * st.accum):
                skipped.append((n, f"the global batch {gb} does not divide over {n} GPUs x {st.accum} accumulation"))
                continue
            changes["per_gpu_batch"] = gb // (n * st.accum)
        if scn.strategy.kind == "dp" and nodes > 1:
            skipped.append((n, "DataParallel runs on one node"))
            continue
        try:
            v = scn.with_changes(**changes)
            hw = resolve_hardware(v, db)
            rows.append(scenario_row(v, hw, wl, params))
        except ValidationError as e:
            skipped.append((n, format_validation_error(e).removeprefix("invalid scenario: ")))
            continue
        except GpusimError as e:
            skipped.append((n, str(e)))
            continue
        meta.append((n, nodes, v.strategy.per_gpu_batch))
    if not rows:
        why = "; ".join(f"{n}: {r}" for n, r in skipped[:3])
        raise ScenarioError(f"no GPU count in the curve is possible for this scenario ({why})")
    if scn.baseline_throughput:
        single = [r for r, m in zip(rows, meta) if m[0] == 1]
        if single:
            tmp = [single[0], single[0]]
            _apply_baseline(tmp, scn.with_changes(per_gpu_batch=meta[0][2]) if mode == "strong" else scn, params)
            for r in rows:
                r["compute_override_s"] = _rescaled_override(tmp, r, params)
    out = evaluate(stack_rows(rows), params)
    thr = out["throughput_samples_per_s"]
    one = [i for i, m in enumerate(meta) if m[0] == 1]
    ref = thr[one[0]] if one else thr[0] / meta[0][0]
    result = []
    for i, (n, nodes, b) in enumerate(meta):
        result.append({"gpus": n, "nodes": nodes, "per_gpu_batch": b, "global_batch": b * st.accum * n,
                       "step_s": float(out["step_s"][i]), "throughput_samples_per_s": float(thr[i]),
                       "speedup": float(thr[i] / ref), "scaling_efficiency_frac": float(thr[i] / ref / n),
                       "fits_in_memory": bool(out["fits_in_memory"][i]),
                       "bottleneck": BOTTLENECKS[int(out["bottleneck_code"][i])],
                       **{k: float(out[k][i]) for k in BREAKDOWN_KEYS}})
    return result


def collective(collective_name: str, size_bytes, *, gpu: str | None = None, node: str | None = None, gpus: int = 8,
               nodes: int = 1, intra: str | None = None, inter: str | None = None, intra_topology: str | None = None,
               p2p: bool | None = None, nics_per_node: int | None = None, oversubscription: float = 1.0,
               algorithm: str = "auto", protocol: str = "auto", db=None,
               params: ModelParams | None = None) -> list[dict]:
    """Predicted time and bandwidths of one collective for each size (the ``gpusim comm`` answer)."""
    from gpusim.hwdb import load

    if collective_name not in C.COLLECTIVES:
        raise ScenarioError(f"unknown collective {collective_name!r}; one of {', '.join(C.COLLECTIVES)}")
    if algorithm != "auto" and (algorithm not in C.ALGORITHMS or algorithm == "none"):
        raise ScenarioError(f"unknown algorithm {algorithm!r}; one of auto, "
                            f"{', '.join(a for a in C.ALGORITHMS if a != 'none')}")
    if protocol != "auto" and protocol not in C.PROTOCOLS:
        raise ScenarioError(f"unknown protocol {protocol!r}; one of auto, {', '.join(C.PROTOCOLS)}")
    from gpusim.checks import bound_of

    for name, v in (("gpus", gpus), ("nodes", nodes), ("nics_per_node", nics_per_node),
                    ("oversubscription", oversubscription)):  # the fields' ranges (model_construct skips them)
        if v is not None:
            try:
                bound_of(Scenario.model_fields[name]).check(v, f"--{name.replace('_', '-')}")
            except ValueError as e:
                raise ScenarioError(str(e)) from None
    gpu, node = gpu or None, node or None  # an empty id is no id
    db = db or load()
    params = params or DEFAULT_PARAMS
    try:  # a hardware-only scenario: no workload needed, so the full validator is bypassed
        scn = Scenario.model_construct(gpu=gpu, node=node, gpus=gpus, nodes=nodes, intra=intra, inter=inter,
                                       intra_topology=intra_topology, nics_per_node=nics_per_node,
                                       oversubscription=oversubscription, cpu_cores_per_gpu=None,
                                       storage_gbyte_per_s=None, p2p=p2p, strategy=Strategy())
        if gpu is None and node is None:
            raise ScenarioError("give a GPU (--gpu) or a node template (--node)")
        if gpus % nodes:
            raise ScenarioError(f"{gpus} GPUs cannot be split evenly over {nodes} nodes")
        hw = resolve_hardware(scn, db)
    except ValidationError as e:
        raise ScenarioError(format_validation_error(e)) from None
    row = hardware_row(hw, params)
    sizes = np.atleast_1d(np.asarray(size_bytes, dtype=np.float64))
    if np.any(sizes <= 0) or not np.all(np.isfinite(sizes)):
        raise ScenarioError("message sizes must be positive bytes")
    code = C.COLLECTIVES[collective_name]
    forced = -1 if algorithm == "auto" else C.ALGORITHMS[algorithm]
    comm_nodes = 1.0 if hw.in_nvlink_domain else float(hw.nodes)  # NCCL's MNNVL: one NVLink domain = one node
    t, algo, proto = C.collective_choice(
        code, sizes, float(hw.n_gpus), comm_nodes, row["intra_busbw_bytes_per_s"], row["intra_hop_s"],
        row["inter_busbw_bytes_per_s"], row["inter_hop_s"], row["nvls"], base_latency_s=params.coll_base_latency_s,
        nvls_gain_frac=params.nvls_gain_frac, nvls_latency_s=params.nvls_latency_s,
        tree_busbw_frac=params.tree_busbw_frac, algorithm=forced,
        protocol=-1 if protocol == "auto" else C.PROTOCOLS[protocol],
        # NCCL runs CollNet (SHARP) only when asked (NCCL_COLLNET_ENABLE=1 with the SHARP plugin; off by
        # default), so the tuner's automatic choice leaves it out and --algorithm collnet forces it
        sharp=row["_sharp"] and algorithm == "collnet",
        ll_max_busbw_bytes_per_s=row["_ll_max"], ll128=row["ll128"], tuning=C.tuning_from_params(params))
    if not np.all(np.isfinite(t)):
        raise ScenarioError(f"{collective_name} cannot run with algorithm {algorithm!r} on this fabric "
                            f"({hw.n_gpus} GPUs on {hw.nodes} node(s)); use --algorithm auto")
    algbw = C.algbw_bytes_per_s(sizes, t)
    busbw = algbw * C.bus_factor(code, float(hw.n_gpus))
    shape = sizes.shape
    return [{"bytes": float(s), "time_s": float(ti), "algbw_bytes_per_s": float(a), "busbw_bytes_per_s": float(bb),
             "algorithm": C.ALGO_NAMES[int(al)], "protocol": C.PROTO_NAMES[int(pr)], "n_ranks": hw.n_gpus,
             "n_nodes": hw.nodes, "intra_path": _path_name(row["_intra_path"]),
             "inter_path": _path_name(row["_inter_path"])}
            for s, ti, a, bb, al, pr in zip(sizes, np.broadcast_to(t, shape), np.broadcast_to(algbw, shape),
                                            np.broadcast_to(busbw, shape), np.broadcast_to(algo, shape),
                                            np.broadcast_to(proto, shape))]
