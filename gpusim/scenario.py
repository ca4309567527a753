"""The scenario noun: what to predict (workload, hardware, strategy), validated once at the edge.

Stage 1 of the road (docs/ARCHITECTURE.md): it imports only the nouns below it (strategy, hardware, checks).
The rules that need the workload or the hardware as well live in :mod:`gpusim.rules`. :class:`Hardware` is the
resolved hardware of a scenario (filled in by :func:`gpusim.rows.resolve_hardware`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import ConfigDict, Field, ValidationError, model_validator

from gpusim.checks import FiniteModel
from gpusim.errors import ScenarioError
from gpusim.hardware import GPU, IntraTopology, Link, Node
from gpusim.strategy import Strategy

STRATEGY_FIELDS = set(Strategy.model_fields)


#: the CLI's and DESIGN.md's flat names for strategy fields
FLAT_ALIASES = {"strategy_kind": "kind", "micro_batch": "per_gpu_batch"}


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
        flat = {(FLAT_ALIASES.get(k, k)): data.pop(k) for k in list(data)
                if (FLAT_ALIASES.get(k, k)) in STRATEGY_FIELDS and k != "strategy"}
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
        if not self.gpu and not self.node:  # (an empty id is no id)
            raise ValueError("give a GPU (`gpu`) or a node template (`node`)")
        if self.gpus % self.nodes:
            raise ValueError(f"{self.gpus} GPUs cannot be split evenly over {self.nodes} nodes "
                             f"(use a multiple of {self.nodes}, e.g. {self.nodes * max(1, self.gpus // self.nodes)})")
        if self.strategy.kind == "dp" and self.nodes > 1:
            raise ValueError("DataParallel (strategy 'dp') runs in one process on one node; use 'ddp' across nodes")
        return self

    def with_changes(self, **changes) -> Scenario:
        strat = {k: changes.pop(k) for k in list(changes) if k in STRATEGY_FIELDS}
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
    #: [issue 18] the host-memory path NCCL's SHM transport takes without peer-to-peer (its per-hop latency)
    staged_link: Link | None = None

    @property
    def in_nvlink_domain(self) -> bool:
        """Every rank reaches every other over NVLink although they span several nodes (an NVL72 rack's trays).
        Not without peer-to-peer ([issue 18]): NCCL_P2P_DISABLE takes NVLink away, host memory is shared only inside
        one tray, so the trays exchange over their NICs like separate nodes."""
        return (self.nodes > 1 and self.nvlink_domain_gpus is not None and self.n_gpus <= self.nvlink_domain_gpus
                and self.topology == "nvswitch" and self.p2p)

    @property
    def n_gpus(self) -> int:
        return self.gpus_per_node * self.nodes

