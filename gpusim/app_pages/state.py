"""The planner's page state: widget keys (which are also the URL query names), their defaults, and how
a state becomes a :class:`gpusim.simulation.Scenario`.

The keys are short because they travel in shared links (``?model=bert-large&gpus=16&fabric=pcie-cross-socket``).
Numbers a person types are in the unit named by the key (``params_m``: millions of parameters,
``gflop``: GFLOP per sample, ``act_mib``: MiB per sample, ``storage``: GB/s per node, ``bucket``: MiB);
they are converted here, with :mod:`gpusim.units`, and nowhere else in the app.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, get_args

from gpusim import units
from gpusim.errors import ScenarioError
from gpusim.strategy import Attention, Optimizer, OptimizerImpl, Precision, Strategy, StrategyKind

STRATEGY_KINDS: tuple[str, ...] = get_args(StrategyKind)
PRECISIONS: tuple[str, ...] = get_args(Precision)
OPTIMIZERS: tuple[str, ...] = get_args(Optimizer)
OPTIMIZER_IMPLS: tuple[str, ...] = get_args(OptimizerImpl)  # [issue 18] the CLI's --optimizer-impl
#: [issue 17] the sidebar's attention-kernel choices: "auto" (the model's own: a config.json's
#: _attn_implementation, else the GPU's native fused kernel) and every Strategy.attention value
ATTENTION_CHOICES: tuple[str, ...] = ("auto", *get_args(Attention))
#: [issue 17] the sidebar's cross-entropy choices (the CLI's --cross-entropy; Strategy.cross_entropy)
CROSS_ENTROPY_CHOICES: tuple[str, ...] = get_args(Strategy.model_fields["cross_entropy"].annotation)
#: [issue 17] the sidebar's CUDA-graph choices (the CLI's --cuda-graph-scope, space-separated as on the command line): the sets
#: Megatron-Bridge's recipes use, for dense and for MoE transformers ("eager": no graphs)
GRAPH_CHOICES_DENSE: tuple[str, ...] = ("eager", "attn", "attn mlp", "full_iteration")
GRAPH_CHOICES_MOE: tuple[str, ...] = ("eager", "attn", "attn moe_router moe_preprocess", "moe", "full_iteration")
#: [issue 17] the sidebar's MoE choices for MoE transformers (the CLI's --moe-dispatcher and --ep-overlap)
DISPATCHER_CHOICES: tuple[str, ...] = get_args(Strategy.model_fields["moe_dispatcher"].annotation)
EP_OVERLAP_CHOICES: tuple[str, ...] = get_args(Strategy.model_fields["ep_overlap"].annotation)

_SF = Strategy.model_fields

#: every sidebar widget's key and default; the URL query holds the keys whose value differs from these
DEFAULTS: dict[str, Any] = {
    # workload
    "wl": "catalogue",          # "catalogue" | "config.json" (an uploaded Hugging Face config) | "custom"
    "model": "resnet50",
    "seq": None,                # sequence length; None: the model's own
    "params_m": 100.0,          # custom: parameters, millions
    "gflop": 10.0,              # custom: forward GFLOP per sample
    "act_mib": 100.0,           # custom: activation MiB kept per sample
    "tokens": 1,                # custom: tokens per sample (1: images)
    "config": None,             # config.json: the uploaded config as a dict (session only, not in the URL)
    "attn": "auto",             # attention kernel (Strategy.attention); "auto": the model's own
    "graphs": "eager",          # CUDA-graph scopes (Strategy.cuda_graph_scope), space-separated; "eager": none
    "ce": _SF["cross_entropy"].default,  # [issue 17] the loss's cross entropy (Strategy.cross_entropy)
    "dispatcher": "alltoall",   # MoE models: token dispatcher (Strategy.moe_dispatcher)
    "ep_ov": "none",            # MoE models: all-to-all overlap (Strategy.ep_overlap)
    "fused_mlp": False,         # MoE models: TE's fused grouped MLP (Strategy.moe_fused_mlp)
    "moe_imb": None,            # MoE models: routing imbalance (Strategy.moe_imbalance_frac); None: balanced router
    "moe_skew": None,           # MoE models: experts' popularity skew (Strategy.moe_expert_skew_frac); None: balanced
    "mtp": None,                # [issue 17] multi-token prediction modules (Strategy.mtp_layers); None: the model's own
    "mtp_sh": "model",          # [issue 17] their passes share one module (Strategy.mtp_shared): shell.MTP_SHARING
    "bf16_first": None,         # [stop 58] fp8/mxfp8/nvfp4: first N layers in BF16 (Strategy.bf16_layers_start)
    "bf16_last": None,          # [stop 58] ... and the last N (Strategy.bf16_layers_end); None: 0, as the CLI's default
    # hardware
    "hw": "gpu",                # "gpu" | "node" | "calibrated" (the machine of the calibration in use)
    "gpu": "h100-sxm",
    "node": "dgx-h100",
    "gpus": 8,
    "nodes": 1,
    "fabric": "auto",           # a key of gpusim.app_pages.analysis.FABRICS
    "net": "auto",              # an inter-node link id, or "auto"
    "nics": None,               # NICs per node; None: the node's
    # strategy
    "strategy": _SF["kind"].default,
    "precision": _SF["precision"].default,
    "batch": 256,
    "accum": _SF["accum"].default,
    "ckpt": _SF["activation_checkpointing"].default,
    "optimizer": _SF["optimizer"].default,
    "offload": _SF["cpu_offload"].default,
    # data loader
    "loader": False,            # include a DataLoader in the prediction
    "workers": 8,
    "pin": _SF["pin_memory"].default,
    "cores": None,              # CPU cores per GPU; None: the node's
    "storage": None,            # GB/s per node; None: the node's
    # advanced
    "bucket": _SF["bucket_mib"].default,
    "sync_every": _SF["sync_every_micro_batch"].default,  # [issue 18] DDP all-reduce every micro-batch
    "opt_impl": _SF["optimizer_impl"].default,  # [issue 18] foreach / fused / forloop
    "baseline": None,           # measured one-GPU samples/s at this batch
    "slow": 1.0,                # slowest GPU's speed fraction
    "oversub": 1.0,             # network oversubscription
}


#: ``hw`` value of the calibrated machine (offered only while a calibration with hardware is in use)
CALIBRATED = "calibrated"


def gpu_of(state: dict, db) -> str:
    """The GPU id the state runs on (the node template's GPU in node mode; the sidebar's GPU for the
    calibrated machine, whose id only the calibration knows: see :attr:`Resolved.gpu_id`)."""
    if state.get("hw") == "node":
        return db.node(state["node"]).gpu
    return state["gpu"]


def workload_from_state(state: dict):
    """The custom workload described by the state's numbers or uploaded config.json, or None in
    catalogue mode."""
    from gpusim.workload import Workload

    if state.get("wl") == "config.json":
        if not state.get("config"):
            raise ScenarioError("upload a config.json in the sidebar (or pick a catalogue model)")
        return Workload.from_config(state["config"], seq_len=int(state["seq"]) if state.get("seq") else None)
    if state.get("wl") != "custom":
        return None

    tokens = state.get("tokens") or 1
    return Workload.custom(params=float(state["params_m"]) * units.MEGA,
                           fwd_flop_per_sample=float(state["gflop"]) * units.GIGA,
                           act_bytes_per_sample=float(state["act_mib"]) * units.MIB,
                           tokens_per_sample=float(tokens) if tokens > 1 else None, name="custom workload")


def scenario_kwargs(state: dict, db) -> dict[str, Any]:
    """Scenario fields from a page state (raises :class:`ScenarioError` for impossible fabrics)."""
    from gpusim.app_pages.analysis import fabric_changes

    s = {**DEFAULTS, **state}
    kw: dict[str, Any] = {}
    wl = workload_from_state(s)
    if wl is not None:
        kw["workload"] = wl
    else:
        kw["model"] = s["model"]
        if s.get("seq"):
            kw["seq_len"] = int(s["seq"])
    if s.get("attn") and s["attn"] != "auto":  # [issue 17] the attention kernel, as the CLI's --attention
        kw["attention"] = s["attn"]
    if s.get("ce") and s["ce"] != DEFAULTS["ce"]:  # [issue 17] as the CLI's --cross-entropy
        kw["cross_entropy"] = s["ce"]
    if s.get("graphs") and s["graphs"] != "eager":  # [issue 17] as the CLI's --cuda-graph-scope
        kw["cuda_graph_scope"] = [g for g in str(s["graphs"]).split() if g]
    # [issue 17] the MoE options, as the CLI's --moe-dispatcher, --ep-overlap and --moe-fused-mlp (MoE models only:
    # the sidebar offers them there, and a dense model's URL carrying them is refused with the CLI's message)
    if s.get("dispatcher") and s["dispatcher"] != "alltoall":
        kw["moe_dispatcher"] = s["dispatcher"]
    if s.get("ep_ov") and s["ep_ov"] != "none":
        kw["ep_overlap"] = s["ep_ov"]
    if s.get("fused_mlp"):
        kw["moe_fused_mlp"] = True
    if s.get("moe_imb") is not None:  # [issue 17] as the CLI's --moe-imbalance (0 is a figure: perfectly balanced)
        kw["moe_imbalance_frac"] = float(s["moe_imb"])
    if s.get("moe_skew") is not None:  # [issue 17] as the CLI's --moe-expert-skew
        kw["moe_expert_skew_frac"] = float(s["moe_skew"])
    if s.get("mtp") is not None:  # [issue 17] as the CLI's --mtp-layers
        kw["mtp_layers"] = int(s["mtp"])
    if s.get("mtp_sh") in ("shared", "separate"):  # [issue 17] as the CLI's --mtp-shared / --no-mtp-shared
        kw["mtp_shared"] = s["mtp_sh"] == "shared"
    if s.get("bf16_first") or s.get("bf16_last"):  # [stop 58] as the CLI's --bf16-layers START END
        kw["bf16_layers_start"] = int(s.get("bf16_first") or 0)
        kw["bf16_layers_end"] = int(s.get("bf16_last") or 0)
    if s["hw"] == "node":
        kw["node"] = s["node"]
    elif s["hw"] != CALIBRATED:  # the calibrated machine: no GPU or node (Calibration.apply adds its own)
        kw["gpu"] = s["gpu"]
    kw["gpus"] = int(s["gpus"])
    kw["nodes"] = int(s["nodes"])
    if s["hw"] != CALIBRATED:  # the calibrated machine keeps its measured links
        kw.update(fabric_changes(db, gpu_of(s, db), s["fabric"]))
    if s["net"] and s["net"] != "auto":
        kw["inter"] = s["net"]
    if s.get("nics"):
        kw["nics_per_node"] = int(s["nics"])
    if float(s["oversub"]) != 1.0:
        kw["oversubscription"] = float(s["oversub"])
    kw.update(kind=s["strategy"], precision=s["precision"], per_gpu_batch=int(s["batch"]), accum=int(s["accum"]),
              activation_checkpointing=bool(s["ckpt"]), optimizer=s["optimizer"], cpu_offload=bool(s["offload"]),
              bucket_mib=float(s["bucket"]), sync_every_micro_batch=bool(s.get("sync_every", False)),
              optimizer_impl=s.get("opt_impl", DEFAULTS["opt_impl"]))
    if s["loader"]:
        kw.update(num_workers=int(s["workers"]), pin_memory=bool(s["pin"]))
        if s.get("cores"):
            kw["cpu_cores_per_gpu"] = float(s["cores"])
        if s.get("storage"):
            kw["storage_gbyte_per_s"] = float(s["storage"])
    if s.get("baseline"):
        kw["baseline_throughput"] = float(s["baseline"])
    if float(s["slow"]) != 1.0:
        kw["slowest_gpu_speed_frac"] = float(s["slow"])
    return kw


def scenario_from_state(state: dict, db):
    """The :class:`~gpusim.simulation.Scenario` a page state describes. Every problem (unknown ids, 3 GPUs on
    2 nodes, DataParallel across nodes, a fabric the GPU lacks ...) raises a
    :class:`~gpusim.errors.GpusimError` whose message says how to fix it."""
    return resolve(state, db).scenario


@dataclass
class Resolved:
    """A page state made concrete: the scenario, the parameters and the database to evaluate it with.

    Without a calibration: the given parameters (the defaults) and the shipped database. With one
    (:class:`gpusim.calibration.Calibration`), what :meth:`~gpusim.calibration.Calibration.apply` returns:
    on the calibrated machine (``hw == "calibrated"``) its own parameters and a copy of the database that
    holds its GPU, node and links; on a database GPU or node, what transfers to that GPU model.
    ``notes`` say what the calibration did (or why nothing transferred)."""

    scenario: Any
    params: Any
    db: Any
    notes: list[str] = field(default_factory=list)
    calibrated_machine: bool = False

    @property
    def gpu_id(self) -> str:
        scn = self.scenario
        return scn.gpu or self.db.node(scn.node).gpu


def resolve(state: dict, db, *, calibration=None, params=None) -> Resolved:
    """The scenario of a page state, with the parameters and database it runs on (see :class:`Resolved`).

    Raises :class:`~gpusim.errors.GpusimError` (with a message that names the sidebar's widgets) for every
    impossible state, including the calibrated machine without a calibration that describes one."""
    from gpusim.params import DEFAULT_PARAMS
    from gpusim.simulation import Scenario

    s = {**DEFAULTS, **state}
    on_cal = s["hw"] == CALIBRATED
    if on_cal and (calibration is None or calibration.hardware is None):
        raise ScenarioError("no calibration with a machine to predict on is in use: load one on the Calibration "
                            "page, or describe the hardware by gpu or node")
    kw = scenario_kwargs(s, db)
    if kw.get("cpu_offload") and kw.get("kind") in ("dp", "ddp"):
        raise ScenarioError(f"CPU offload needs a sharded strategy (zero1/2/3 or fsdp-*), not {kw['kind']!r}: "
                            "pick one under Strategy, or untick CPU offload")
    notes: list[str] = []
    if calibration is not None:
        kw, params, db = calibration.apply(kw, db)
        notes = list(calibration.applied_notes)
    return Resolved(scenario=Scenario.create(**kw), params=params or DEFAULT_PARAMS, db=db, notes=notes,
                    calibrated_machine=on_cal)
