"""Schema of the hardware database (``hwdb/*.yaml``): GPUs, links, nodes, clusters, prices, energy.

Files use human units with the unit in the key (``memory_gib``, ``memory_gbyte_per_s``,
``dense_tflop_per_s``, ``bandwidth_gbyte_per_s_per_direction``); the properties of these models turn
them into SI base units (``memory_bytes``, ``memory_bytes_per_s``, ``peak_flop_per_s(...)``) through
:mod:`gpusim.units`. Every entry carries ``sources``; every number an entry sets must be covered by the
``fields`` of at least one source, so no figure enters the database without a citation.

Plausibility bounds are deliberately loose (they span every GPU from a 2016 P100 to a 2025 B300 with
room to spare) but tight enough that a 1000x typo (GB/s written as MB/s, W as mW) is rejected with a
message naming the file, the entry and the field.
"""

from __future__ import annotations

import datetime as _dt
from typing import Annotated, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from gpusim import units

ID_PATTERN = r"^[a-z0-9][a-z0-9.+-]*[a-z0-9]$"
Id = Annotated[str, Field(pattern=ID_PATTERN, min_length=2, max_length=64)]

#: Precision keys of a datasheet (``dense_tflop_per_s``), all dense (no 2:4 sparsity).
DatasheetPrecision = Literal["fp64", "fp32", "tf32", "fp16", "bf16", "fp8", "fp4"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True, defer_build=True)


class Source(_Strict):
    """Where figures came from. ``fields`` names the entry's fields this source supports."""

    title: str = Field(min_length=3, description="document title, e.g. 'NVIDIA H100 Tensor Core GPU Datasheet'")
    url: str | None = Field(default=None, description="where to read it")
    fields: list[str] = Field(min_length=1, description="the entry's fields whose values this source gives")
    accessed: _dt.date | None = None
    primary: bool = Field(default=True, description="False for third-party pages that only relay a datasheet")
    estimate: bool = Field(default=False, description="True when the figures are an estimate derived from this source "
                                                      "(e.g. drive count x a drive's rating), not read from it")


class _Sourced(_Strict):
    """An entry whose numbers must each be covered by a source."""

    #: Fields that hold figures and must be cited when set (filled in by subclasses).
    _sourced_fields: ClassVar[tuple[str, ...]] = ()

    id: Id
    name: str = Field(min_length=2)
    sources: list[Source] = Field(min_length=1)
    notes: str | None = None

    @model_validator(mode="after")
    def _every_number_has_a_source(self):
        # a source may name a sub-field ("dense_tflop_per_s.fp16"): it counts for the field
        covered = {f.split(".", 1)[0] for s in self.sources for f in s.fields}
        unknown = covered - set(type(self).model_fields) - {"*"}
        if unknown:
            raise ValueError(f"sources name fields this entry does not have: {sorted(unknown)}")
        if "*" in covered:
            return self
        # a field counts once the file sets it to something other than its default (`nvls: false` needs no citation)
        fields = type(self).model_fields
        missing = [f for f in self._sourced_fields
                   if f in self.model_fields_set and getattr(self, f) is not None and f not in covered
                   and not (not fields[f].is_required() and getattr(self, f) == fields[f].default)]
        if missing:
            raise ValueError(f"figures without a source: {missing} (list them in a source's `fields`)")
        return self


# ------------------------------------------------------------------------------------------------
# GPUs
# ------------------------------------------------------------------------------------------------

class DenseTflops(_Strict):
    """Dense peak TFLOP/s per precision (tensor cores where the GPU has them; no sparsity).

    fp16 and bf16 are the figures with **fp32 accumulation**, as mixed-precision training uses. On
    GeForce cards NVIDIA also quotes a figure with fp16 accumulation that is twice as high: it does
    not belong here (see ``GPU.tensor_accumulate_note``).
    """

    fp64: float | None = Field(default=None, ge=0.01, le=200)
    fp32: float | None = Field(default=None, ge=0.5, le=300, description="non-tensor (SIMT) fp32")
    tf32: float | None = Field(default=None, ge=5, le=5000)
    fp16: float | None = Field(default=None, ge=5, le=10000)
    bf16: float | None = Field(default=None, ge=5, le=10000)
    fp8: float | None = Field(default=None, ge=20, le=20000)
    fp4: float | None = Field(default=None, ge=40, le=40000)

    @model_validator(mode="after")
    def _ordering(self):
        # Lower precision is never slower on the same chip: a swapped column is a typo.
        for lo, hi in (("fp16", "fp8"), ("bf16", "fp8"), ("fp8", "fp4"), ("tf32", "fp16"), ("tf32", "bf16")):
            a, b = getattr(self, lo), getattr(self, hi)
            if a is not None and b is not None and b < a * 0.99:
                raise ValueError(f"{hi} ({b}) below {lo} ({a}): check the columns")
        return self


class PeerLink(_Strict):
    """The GPU's own scale-up link (NVLink, AMD Infinity Fabric), summed over its links."""

    technology: Literal["nvlink", "infinity-fabric"]
    generation: int = Field(ge=1, le=6)
    links: int | None = Field(default=None, ge=1, le=36)
    gbyte_per_s_per_direction: float = Field(ge=5, le=2000, description="sum over links, one direction")
    connection: Literal["switch", "mesh", "bridge", "direct"] = Field(
        description="how the links are normally wired: NVSwitch, point-to-point mesh, a bridge between cards")


class Pcie(_Strict):
    generation: int = Field(ge=2, le=7)
    lanes: Literal[1, 2, 4, 8, 16] = 16


class HostLink(_Strict):
    """A coherent CPU-GPU link that replaces PCIe for host copies (NVLink-C2C on Grace superchips)."""

    technology: Literal["nvlink-c2c", "infinity-fabric"]
    gbyte_per_s_per_direction: float = Field(ge=10, le=2000)


class GPU(_Sourced):
    """One GPU model. Figures are per GPU (a GH200 entry is its GPU part)."""

    _sourced_fields: ClassVar[tuple[str, ...]] = (
        "release_year", "memory_gib", "memory_gbyte_per_s", "dense_tflop_per_s", "peer_link", "pcie",
        "p2p_pcie", "tdp_w", "sm_count", "host_link", "achievable_matmul_tflop_per_s", "microscaling",
        "compute_capability", "sustained_matmul_frac", "host_cpu_dispatch_mult", "host_python_mult")

    vendor: Literal["nvidia", "amd", "intel"]
    architecture: str = Field(min_length=3, description="e.g. pascal, volta, turing, ampere, ada, hopper, blackwell, cdna3")
    compute_capability: str | None = Field(default=None, pattern=r"^[0-9]{1,2}\.[0-9]$",
                                           description="NVIDIA CUDA compute capability, e.g. 8.0 (A100), 8.6 (GA10x)")
    market: Literal["datacenter", "workstation", "consumer"]
    form_factor: Literal["sxm", "pcie", "oam", "superchip"]
    release_year: int = Field(ge=2010, le=2030)
    memory_gib: float = Field(ge=2, le=1024, description="capacity as marketed (the '80' of '80 GB')")
    memory_type: str | None = None
    memory_gbyte_per_s: float = Field(ge=100, le=20000)
    dense_tflop_per_s: DenseTflops
    tensor_accumulate_note: str | None = Field(
        default=None, description="required for consumer cards: which accumulate precision the fp16 figure uses")
    peer_link: PeerLink | None = None
    pcie: Pcie
    host_link: HostLink | None = Field(default=None, description="CPU-GPU link when it is not PCIe (superchips)")
    p2p_pcie: bool = Field(description="GPU-to-GPU peer-to-peer over PCIe enabled by the driver")
    tdp_w: float = Field(ge=30, le=2500)
    sm_count: int | None = Field(default=None, ge=1, le=1000)
    achievable_matmul_tflop_per_s: dict[Literal["fp16", "bf16", "fp8"], Annotated[float, Field(gt=0, le=100000)]] | None = Field(
        default=None, description="measured maximum achievable dense matmul throughput at the best shape (MAMF), "
                                  "a practical ceiling below the datasheet peak; fp16 defaults to the bf16 figure")

    # [issue 17] (h17ceiling) sustained clocks: what the tensor cores hold once saturated at the power limit
    sustained_matmul_frac: dict[Literal["fp16", "bf16", "fp8"], Annotated[float, Field(gt=0, le=1)]] | None = Field(
        default=None, description="maximum sustainable matmul FLOPS (MSMF: the best shape once the GPU is saturated "
                                  "at its power limit) / maximum achievable (MAMF: a boost-clock burst), from one "
                                  "measurement; scales achievable_matmul_tflop_per_s to what long GEMM streams in "
                                  "training hold; fp16 defaults to the bf16 figure")
    host_cpu_dispatch_mult: float | None = Field(default=None, gt=0, le=20, description="a superchip's host CPU "
                                                 "(Grace) time to launch a framework operator / an x86 DGX host's "
                                                 "(None: 1, an x86 host)")
    host_python_mult: float | None = Field(default=None, gt=0, le=20, description="[stop 52] a superchip's host CPU "
                                           "(Grace) time for Python-level framework bookkeeping (a call into an "
                                           "operator, a view, a hook) / an x86 DGX host's (None: 1)")

    microscaling: bool = Field(default=False, description="tensor cores take OCP microscaling formats (MXFP8 with a "
                                                         "shared scale per 32 elements): NVIDIA Blackwell")

    @model_validator(mode="after")
    def _consistency(self):
        if self.market == "consumer" and not self.tensor_accumulate_note:
            raise ValueError("consumer cards need `tensor_accumulate_note`: GeForce fp16 tensor throughput with "
                             "fp32 accumulation is half the fp16-accumulate figure; say which one is recorded")
        t = self.dense_tflop_per_s
        if t.fp32 is None and t.fp16 is None and t.bf16 is None:
            raise ValueError("dense_tflop_per_s needs at least fp32 or a half-precision figure")
        return self

    # --- SI views --------------------------------------------------------------------------------
    @property
    def memory_bytes(self) -> float:
        return units.gib_to_bytes(self.memory_gib)

    @property
    def memory_bytes_per_s(self) -> float:
        return units.gbyte_per_s_to_bytes_per_s(self.memory_gbyte_per_s)

    def peak_flop_per_s(self, key: str) -> float | None:
        """Dense peak for a datasheet precision key (``fp32``, ``tf32``, ``fp16``, ``bf16``, ``fp8``)."""
        v = getattr(self.dense_tflop_per_s, key)
        return None if v is None else units.tflop_per_s_to_flop_per_s(v)

    def achievable_matmul_flop_per_s(self, key: str) -> float | None:
        """Measured best-shape matmul FLOP/s for a datasheet precision key (fp16 falls back to bf16), or None."""
        t = self.achievable_matmul_tflop_per_s or {}
        v = t.get(key, t.get("bf16") if key == "fp16" else None)
        return None if v is None else units.tflop_per_s_to_flop_per_s(v)

    def training_matmul_flop_per_s(self, key: str) -> float | None:
        """[issue 17] The matmul ceiling of a training step's long GEMM streams: the measured best-shape figure
        (:meth:`achievable_matmul_flop_per_s`, a boost-clock burst) times the GPU's sustained fraction where one is
        measured (``sustained_matmul_frac``), else the burst figure itself (an upper bound); None without either."""
        burst = self.achievable_matmul_flop_per_s(key)
        t = self.sustained_matmul_frac or {}
        frac = t.get(key, t.get("bf16") if key == "fp16" else None)
        return None if burst is None else burst * (1.0 if frac is None else frac)

    @property
    def host_link_bytes_per_s(self) -> float | None:
        if self.host_link is None:
            return None
        return units.gbyte_per_s_to_bytes_per_s(self.host_link.gbyte_per_s_per_direction)

    @property
    def peer_link_bytes_per_s(self) -> float | None:
        if self.peer_link is None:
            return None
        return units.gbyte_per_s_to_bytes_per_s(self.peer_link.gbyte_per_s_per_direction)

    @property
    def tdp_watt(self) -> float:
        return float(self.tdp_w)


# ------------------------------------------------------------------------------------------------
# Links
# ------------------------------------------------------------------------------------------------

LinkKind = Literal[
    "pcie",            # PCI Express, one x16 (or xN) port
    "nvlink-bridge",   # NVLink bridge between two (or four) add-in cards
    "nvlink-mesh",     # NVLink wired point-to-point on a board (DGX-1 hybrid cube mesh)
    "nvswitch",        # NVLink through NVSwitch chips: every GPU reaches every other at full per-GPU bandwidth
    "infinity-fabric", # AMD GPU-to-GPU links
    "cpu-interconnect",# UPI / xGMI between CPU sockets
    "host-staged",     # no peer-to-peer: GPU -> host memory -> GPU
    "infiniband",
    "roce",            # RDMA over Converged Ethernet
    "ethernet",        # TCP/IP sockets
    "cloud-fabric",    # AWS EFA, GCP GPUDirect-TCPX(O), ...
]


class Link(_Sourced):
    """A link class. ``bandwidth_gbyte_per_s_per_direction`` is per GPU port for intra-node links
    (one GPU's NVLink total, one PCIe x16 slot) and per NIC port for network links."""

    _sourced_fields: ClassVar[tuple[str, ...]] = (
        "bandwidth_gbyte_per_s_per_direction", "signalling_gbit_per_s", "latency_us", "nvls", "in_network_reduction",
        "mesh_peers", "links_per_gpu", "nccl_protocols", "nccl_nvls_enable")

    kind: LinkKind
    scope: Literal["intra-node", "inter-node"]
    generation: str | None = None
    bandwidth_gbyte_per_s_per_direction: float = Field(ge=0.1, le=2000)
    signalling_gbit_per_s: float | None = Field(default=None, ge=1, le=16000,
                                                description="line rate as marketed (400 for NDR)")
    latency_us: float = Field(ge=0.05, le=1000, description="one-way small-message latency, software included")
    nvls: bool = Field(default=False, description="NVLink SHARP: the switch reduces in-network (NVSwitch gen 3+)")
    in_network_reduction: bool = Field(default=False, description="InfiniBand SHARP or similar")
    mesh_peers: int | None = Field(default=None, ge=1, le=64,
                                   description="point-to-point mesh: the GPU's bandwidth is split evenly over links to "
                                               "this many peers (one xGMI link per pair on MI300X: 7), so a collective "
                                               "over g GPUs gets min(g-1, mesh_peers) / mesh_peers of it")
    # [issue 18] collectives per NVLink generation
    links_per_gpu: int | None = Field(default=None, ge=1, le=64,
                                      description="NVLink links per GPU (12 on A100, 18 on H100 and B200): NCCL's topology "
                                                  "gives each link a per-generation bandwidth (ModelParams."
                                                  "nccl_nvlink_gbyte_per_s_per_link), so a ring gets links x that")
    # [issue 18] a network transport whose required NCCL configuration narrows NCCL's choice (cloud fabrics)
    nccl_protocols: list[Literal["ll", "ll128", "simple"]] | None = Field(
        default=None, min_length=1,
        description="NCCL protocols the transport's required configuration allows across nodes (NCCL_PROTO); "
                    "empty: NCCL's own choice")
    nccl_nvls_enable: bool = Field(
        default=True, description="False where the transport's required configuration sets NCCL_NVLS_ENABLE=0 "
                                  "(no NVLS or NVLS-tree on jobs that cross nodes over it)")

    @model_validator(mode="after")
    def _consistency(self):
        inter = self.kind in ("infiniband", "roce", "ethernet", "cloud-fabric")
        if inter != (self.scope == "inter-node"):
            raise ValueError(f"a {self.kind} link has scope {'inter-node' if inter else 'intra-node'}")
        if self.signalling_gbit_per_s is not None:
            # payload can't beat the line rate; > 3x below it is a unit slip (Gb/s vs GB/s)
            line_gbyte = self.signalling_gbit_per_s / units.BITS_PER_BYTE
            if not (line_gbyte / 3.0 <= self.bandwidth_gbyte_per_s_per_direction <= line_gbyte * 1.05):
                raise ValueError(
                    f"bandwidth_gbyte_per_s_per_direction {self.bandwidth_gbyte_per_s_per_direction} does not "
                    f"match signalling_gbit_per_s {self.signalling_gbit_per_s} (= {line_gbyte:g} GB/s): GB/s vs Gb/s?")
        return self

    @property
    def bandwidth_bytes_per_s(self) -> float:
        return units.gbyte_per_s_to_bytes_per_s(self.bandwidth_gbyte_per_s_per_direction)

    @property
    def latency_s(self) -> float:
        return units.us_to_s(self.latency_us)


# ------------------------------------------------------------------------------------------------
# Nodes and clusters
# ------------------------------------------------------------------------------------------------

IntraTopology = Literal[
    "nvswitch",            # all GPUs on NVSwitch (DGX/HGX A100, H100, B200; NVL72)
    "nvlink-mesh",         # DGX-1 style hybrid cube mesh
    "nvlink-bridge-pairs", # pairs of cards joined by bridges; pairs talk over PCIe
    "pcie-switch",         # PCIe switch(es) under one CPU: nvidia-smi shows PIX/PXB
    "pcie-host",           # through the CPU's root complex, one socket: PHB/NODE
    "pcie-cross-socket",   # GPUs split over two CPU sockets: some pairs are SYS
    "single",              # one GPU
]


class Node(_Sourced):
    """A server, workstation, cloud instance or rack-scale NVLink domain."""

    _sourced_fields: ClassVar[tuple[str, ...]] = (
        "gpus_per_node", "nvlink_domain_gpus", "nics_per_node", "cpu_cores", "ram_gib", "numa_sockets", "storage_gbyte_per_s",
        "max_power_w")

    kind: Literal["server", "workstation", "cloud-instance", "rack"]
    gpu: Id
    gpus_per_node: int = Field(ge=1, le=576)
    nvlink_domain_gpus: int | None = Field(
        default=None, ge=1, le=576,
        description="GPUs reachable over NVLink/NVSwitch from one GPU when the domain spans several nodes (a GB200 "
                    "NVL72 compute tray of 4 GPUs sits in a 72-GPU NVLink domain); None = the node's own GPU count")
    intra_link: Id = Field(description="link id between GPUs inside the node (nvswitch, pcie, bridge ...)")
    intra_topology: IntraTopology
    pcie_link: Id | None = Field(default=None, description="PCIe link of the GPU slots (host copies, and GPU pairs "
                                                           "not joined by the intra link); default from the GPU")
    p2p: bool = Field(default=True, description="peer-to-peer between GPUs enabled (False: staged through host memory)")
    socket_link: Id | None = Field(default=None, description="CPU-to-CPU link crossed by SYS paths")
    nic_link: Id | None = Field(default=None, description="network link of each NIC used by the GPUs")
    nics_per_node: int = Field(default=0, ge=0, le=72)
    cpu_model: str | None = None
    cpu_cores: int = Field(ge=1, le=8192, description="physical cores, all sockets (a GB200 NVL72 rack has 2,592)")
    ram_gib: float = Field(ge=4, le=65536)
    numa_sockets: int = Field(ge=1, le=128, description="CPU sockets (NUMA nodes of CPUs); 36 Grace CPUs in an NVL72")
    storage_gbyte_per_s: float = Field(ge=0.05, le=2000, description="local read bandwidth for training data")
    max_power_w: float | None = Field(default=None, ge=100, le=200000)

    @property
    def cpu_vendor(self) -> Literal["intel", "amd", "other"]:
        """The host CPU's vendor as NCCL's tuner reads it (``ncclTopoCpuType``: x86 Intel, x86 AMD, anything else),
        from ``cpu_model``; a node without one counts as "other" (NCCL's default branch) [issue 18]."""
        model = (self.cpu_model or "").lower()
        if "intel" in model or "xeon" in model:
            return "intel"
        if "amd" in model or "epyc" in model or "threadripper" in model:
            return "amd"
        return "other"

    @model_validator(mode="after")
    def _consistency(self):
        if self.intra_topology == "single" and self.gpus_per_node != 1:
            raise ValueError("intra_topology 'single' needs gpus_per_node 1")
        if self.intra_topology == "pcie-cross-socket" and self.numa_sockets < 2:
            raise ValueError("intra_topology 'pcie-cross-socket' needs numa_sockets >= 2")
        if self.nvlink_domain_gpus is not None and self.nvlink_domain_gpus < self.gpus_per_node:
            raise ValueError(f"nvlink_domain_gpus {self.nvlink_domain_gpus} is below gpus_per_node {self.gpus_per_node}")
        if (self.nic_link is None) != (self.nics_per_node == 0):
            raise ValueError("give both nic_link and nics_per_node > 0, or neither")
        return self

    @property
    def ram_bytes(self) -> float:
        return units.gib_to_bytes(self.ram_gib)

    @property
    def storage_bytes_per_s(self) -> float:
        return units.gbyte_per_s_to_bytes_per_s(self.storage_gbyte_per_s)


class Cluster(_Sourced):
    """Many identical nodes joined by a network (a SuperPOD, a cloud cluster)."""

    _sourced_fields: ClassVar[tuple[str, ...]] = ("max_nodes", "oversubscription")

    node: Id
    max_nodes: int = Field(ge=1, le=100000)
    inter_link: Id | None = Field(default=None, description="network link; default the node's nic_link")
    network_topology: Literal["fat-tree", "rail-optimized", "dragonfly", "torus", "single-switch"] = "fat-tree"
    oversubscription: float = Field(default=1.0, ge=1.0, le=16.0, description="1 = non-blocking")


# ------------------------------------------------------------------------------------------------
# Prices and energy
# ------------------------------------------------------------------------------------------------

class Price(_Sourced):
    """What a GPU-hour costs in a cloud (``kind: cloud``) or what hardware costs to buy (``purchase``).

    Prices age: ``date`` is when the figure was read and is shown wherever the price is used.
    """

    _sourced_fields: ClassVar[tuple[str, ...]] = ("usd_per_hour", "usd")

    kind: Literal["cloud", "purchase"]
    node: Id | None = Field(default=None, description="the instance or server priced")
    gpu: Id | None = Field(default=None, description="the GPU priced (purchase of a card, or per-GPU cloud offers)")
    gpus: int = Field(default=1, ge=1, le=576, description="GPUs the price covers")
    provider: str | None = None
    region: str | None = None
    pricing: Literal["on-demand", "reserved-1y", "reserved-3y", "spot", "capacity-block", "list", "street"] = "on-demand"
    usd_per_hour: float | None = Field(default=None, ge=0.01, le=20000, description="cloud: whole instance")
    usd: float | None = Field(default=None, ge=50, le=50_000_000, description="purchase: the whole item")
    date: _dt.date

    @model_validator(mode="after")
    def _consistency(self):
        if (self.node is None) == (self.gpu is None):
            raise ValueError("a price names exactly one of `node` or `gpu`")
        if self.kind == "cloud" and self.usd_per_hour is None:
            raise ValueError("a cloud price needs usd_per_hour")
        if self.kind == "purchase" and self.usd is None:
            raise ValueError("a purchase price needs usd")
        if self.kind == "cloud" and self.usd_per_hour / self.gpus > 200:
            raise ValueError(f"{self.usd_per_hour / self.gpus:g} USD per GPU-hour is implausible: check `gpus`")
        return self

    @property
    def usd_per_gpu_hour(self) -> float | None:
        return None if self.usd_per_hour is None else self.usd_per_hour / self.gpus


class Energy(_Sourced):
    """Electricity price and data-centre overhead (PUE) used for purchase plans."""

    _sourced_fields: ClassVar[tuple[str, ...]] = ("usd_per_kwh", "pue")

    usd_per_kwh: float = Field(ge=0.01, le=2.0)
    pue: float = Field(ge=1.0, le=3.0, description="power usage effectiveness: facility / IT power")
    date: _dt.date


class HwdbFile(_Strict):
    """One YAML file: any of these lists."""

    gpus: list[dict] = []
    links: list[dict] = []
    nodes: list[dict] = []
    clusters: list[dict] = []
    prices: list[dict] = []
    energy: list[dict] = []

    @field_validator("*", mode="before")
    @classmethod
    def _none_is_empty(cls, v):
        return [] if v is None else v


#: The list key in a file -> (entry model, singular name used in messages and `--kind`)
SECTIONS: dict[str, tuple[type[_Sourced], str]] = {
    "gpus": (GPU, "gpu"),
    "links": (Link, "link"),
    "nodes": (Node, "node"),
    "clusters": (Cluster, "cluster"),
    "prices": (Price, "price"),
    "energy": (Energy, "energy"),
}
