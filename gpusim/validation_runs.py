"""Published large-model training runs (``validation/runs_*.csv``) predicted with their stated layouts.

Every ``validation/runs_*.csv`` of the repository is read (``runs_dense.csv``, ``runs_moe.csv``, ...): one row per
published run with its source, model, GPU, GPU count, every parallel degree the source states, micro-batch, global
batch, sequence length, precision and the measured figure (the schema is in ``validation/README.md``). Each row is
predicted as it ran:

- The node is the GPU's system as the source names it (:data:`NODE_FOR_GPU`: DGX H100, HGX H800, HGX/DGX B200 and
  B300, and for GB200/GB300 the NVL72 rack's compute trays of 4 GPUs with the rack's 72-GPU NVLink domain).
- Options the schema has no column for are read from ``key=value`` tokens in the row's notes: ``strategy=``
  (``zero1`` = Megatron's distributed optimizer, the default of the NeMo/Megatron-Bridge performance recipes;
  ``fsdp`` = Megatron-FSDP), ``fp8_recipe=`` (``delayed`` | ``current``).
  ``seen_before_entry=1`` [stop 51] (gpusim's prediction of the run was seen before the row was entered: counted
  with the open rows whatever its file's hold-out rule says, :func:`held_out`),
  ``bf16_layers_start=N`` / ``bf16_layers_end=N`` [stop 57] (Megatron-Core ``--first-last-layers-bf16``: the first / last
  N layers outside the FP8 or NVFP4 recipe; Strategy ``bf16_layers_start`` / ``bf16_layers_end``),
  ``ddp_bucket_size=N`` [stop 58] (Megatron-Core ``--ddp-bucket-size``: parameters per gradient bucket; Strategy
  ``ddp_bucket_params``),
  ``attention=`` (``flash`` | ``unfused``: the attention kernel; NeMo and Megatron-Bridge run Transformer Engine's
  fused attention, which some catalogue entries of older models do not assume), ``tp_comm_overlap=1`` (Transformer
  Engine's userbuffers TP overlap, which the NeMo / Megatron-Bridge performance recipes switch on for their tp > 1
  layouts: ``COMM_OVERLAP_CONFIG_MAP`` of Megatron-Bridge's ``scripts/performance`` configs). The MoE ones:
  ``router=force_balanced`` (the Megatron-Bridge performance tables: "we force-balance the token distribution
  among experts": Megatron-Core's random router logits, so only the sampling spread of a uniform router:
  ``gpusim.model.experts.busiest_rank_load``), ``moe_capacity_factor=`` (token-drop runs, experts padded to capacity),
  ``ep_overlap=`` (``1f1b`` | ``dualpipe``: Megatron-Core's EP A2A overlap or DualPipe) and ``moe_dispatcher=``
  (``alltoall`` | ``deepep``), as the Scenario fields of the same names. [issue 17] ``cpu_offloading_num_layers=N``
  (the recipe's Megatron-Core activation offload of N layers to host memory): Scenario ``activation_offload_layers``.
  [issue 17] ``overlap_p2p_comm=0|1`` (a run that states whether its interleaved schedule overlapped the sends between
  stages; without it, Megatron-Core's default: on with vp > 1): Scenario ``pp_p2p_overlap``. [issue 17]
  ``cp_comm=p2p|all_gather|a2a|a2a+p2p`` (the context-parallel exchange a run's source states, Transformer Engine's
  ``cp_comm_type`` names; without it, the ring): Scenario ``cp_comm``. [issue 17] ``cross_entropy=te|native|unfused``
  (the loss's cross entropy the recipe runs; without it, gpusim's default te, what tuned recipes select): Scenario
  ``cross_entropy``. [issue 17] ``mtp_num_layers=N`` (the multi-token prediction modules the run trained, Megatron-Core
  ``--mtp-num-layers``; without it, the model's own: DeepSeek-V3's one, as Megatron-Bridge's recipe sets it): Scenario
  ``mtp_layers``; ``mtp_use_repeated_layer=0|1`` (Megatron-Core's option: the passes through one shared module):
  Scenario ``mtp_shared``.
  [issue 17] The memory settings a run's recipe states: ``recompute_modules=`` (Megatron-Core ``recompute_modules``,
  several joined with ``+``: ``mla_up_proj+moe_act``; Scenario ``recompute_modules``), ``grad_reduce_in_fp32=0|1``
  (Megatron-Core's DDP option: 0 = the main gradients and their data-parallel reduction in the parameters' bf16,
  Scenario ``grad_dtype``), ``opt_state_dtype=fp32|bf16`` and ``fp8_activations=0|1``; ``optimizer=adam|adamw|muon``
  (the recipe's optimizer, Scenario ``optimizer``; Adam without it, as Megatron's default). [issue 17]
  ``cuda_graph_scope=`` (the CUDA graphs a run's source states, Megatron-Core's scope names joined with ``+``:
  ``attn+moe_router+moe_preprocess``, ``full_iteration``): Scenario ``cuda_graph_scope``; a row that states none runs
  eager, as gpusim's default. ``disable_parameter_transpose_cache=1`` (Megatron-Core's option: the FP8 weights'
  transposes are not kept over the micro-batches): Scenario ``fp8_transpose_cache`` False. **Matching rule** for the
  Megatron-Bridge performance tables: the stored recipe files (``scripts/performance/configs/<family>/
  *workload_base_configs.py`` and ``*_llm_pretrain.py``) are not necessarily the versions the table ran, so a recipe
  entry's settings go into a row's notes only where the entry is the row's model, GPU and precision and its stated
  layout (num_gpus, tp, pp, vp, ep, micro-batch, global batch; the file's defaults where it states none) equals the
  row's; the notes name the file and the commit read. A row no stored entry matches keeps Megatron-Core's defaults
  (nothing recomputed, fp32 main gradients). The same rule for every row, held-out ones included.
- What the source does not state takes Megatron-Core's default and is printed as such: no recomputation
  (``recompute_granularity`` unset), the micro-batch 1, ``vp`` 1. A run that gpusim's memory model says does not fit
  is still predicted (it ran) and flagged: the memory model is checked elsewhere. A model whose layers do not
  split evenly over ``pp x vp`` is run with unequal stages (``uneven_pp``), as Megatron-Core's published recipes do
  (``account_for_embedding_in_pipeline_split`` / ``..._loss_...``).
- The measured figure is compared on its own metric: step seconds directly; tokens/s/GPU as
  ``global_batch x seq_len / (step x gpus)``; model TFLOP/s/GPU with the FLOP count of the framework that measured
  it where the row states it, ``flop_count=megatron`` (Megatron-LM's ``num_floating_point_operations``, which
  counts the causal half of the attention core: :func:`gpusim.workload.flops.flops_per_token`), else with gpusim's
  model FLOPs (a source whose count differs shows up as an error: its notes say so).

**Peak memory** [issue 17]: a row whose metric is ``peak_allocated_gib`` states the peak memory PyTorch's caching
allocator reported on the run's fullest GPU (``torch.cuda.max_memory_allocated``, Megatron's "max allocated"); it is
compared with :func:`allocated_bytes` of the same prediction (weights, gradients, optimizer states and activations,
without the allocator's fragmentation and the CUDA context), in its own regime ``memory`` and its own table. The
sources print these figures as "GB" or "GiB" from byte counts divided by 1024 x 1024 x 1024 (Megatron's memory report
divides by 1024 x 1024 for its "MB"): the rows take them as GiB; read as decimal GB every measured figure would be
7.4% lower.

The report groups rows by regime (:func:`regime`: dense BF16 Hopper, dense FP8 Hopper, Blackwell, MoE; a row is in
every regime it belongs to) and gives, per regime and separately for the held-out rows (``holdout = 1``), the
predicted count, the median and 90th-percentile absolute error and the median signed error (positive = predicted
slower than measured).
"""

from __future__ import annotations

import csv
import dataclasses
import os
import re
import typing
from dataclasses import asdict, dataclass
from pathlib import Path

from gpusim import units
from gpusim.strategy import OPT_STATE_DTYPE_BYTES, CpComm, CrossEntropy, CudaGraphScope, RecomputeModule
from gpusim.stats import quantile

COLUMNS = ("run_id", "source_id", "source", "holdout", "model", "gpu", "gpus", "gpus_per_node", "tp", "pp", "vp", "cp",
           "ep", "etp", "micro_batch", "global_batch", "seq_len", "precision", "recompute", "metric", "value", "unit",
           "notes")
METRICS = ("step_time_s", "tokens_per_s_per_gpu", "model_tflop_per_s_per_gpu", "peak_allocated_gib")
#: [issue 17] metrics of the GPU memory a run held, not of its speed (module docstring, *Peak memory*)
MEMORY_METRICS = ("peak_allocated_gib",)
#: the hwdb node template each published system ran on (the DGX/HGX board or the NVL72 rack's compute tray)
NODE_FOR_GPU = {"h100-sxm": "dgx-h100", "h200-sxm": "hgx-h200-8", "b200": "dgx-b200", "b300": "dgx-b300",
                "gb200": "gb200-nvl72", "gb300": "gb300-nvl72", "a100-sxm4-80gb": "dgx-a100-80gb",
                "h800-sxm": "hgx-h800-8"}
BLACKWELL = ("b200", "b300", "gb200", "gb300")
STRATEGY_ALIASES = {"zero1": "zero1", "distopt": "zero1", "ddp": "ddp", "fsdp": "fsdp-full", "fsdp-full": "fsdp-full"}
ENV_VAR = "GPUSIM_RUNS_DIR"
#: the ``key=value`` options of a row's notes; a value may hold one decimal point followed by digits (``1.25``), so
#: a sentence's full stop after a word value is not read as part of it
OPTION_KEYS = ("strategy", "fp8_recipe", "attention", "tp_comm_overlap", "router", "moe_capacity_factor",
               "ep_overlap", "moe_dispatcher", "cpu_offloading_num_layers", "overlap_p2p_comm",
               "recompute_modules", "grad_reduce_in_fp32", "opt_state_dtype", "fp8_activations",
               "cuda_graph_scope", "disable_parameter_transpose_cache",
               "moe_router_padding_for_fp8", "cutedsl_fused_grouped_mlp", "flop_count", "cp_comm",
               "cross_entropy", "mtp_num_layers", "mtp_use_repeated_layer", "optimizer",  # [issue 17]
               "seen_before_entry",  # [stop 51]
               "bf16_layers_start", "bf16_layers_end",  # [stop 57] Megatron-Core's first / last layers in bf16
               "ddp_bucket_size")  # [stop 58] Megatron-Core --ddp-bucket-size (parameters per bucket)
#: (a value may join several names with ``+``: ``recompute_modules=mla_up_proj+moe_act``)
_TOKEN = re.compile(r"\b(" + "|".join(OPTION_KEYS) + r")=([A-Za-z0-9_\-+]+(?:\.[0-9]+)?)")
#: [issue 17] Megatron-Core recompute modules gpusim models (Strategy.recompute_modules)
RECOMPUTE_MODULES = typing.get_args(RecomputeModule)
#: [issue 17] Megatron-Core CUDA-graph scopes (Strategy.cuda_graph_scope)
CUDA_GRAPH_SCOPES = typing.get_args(CudaGraphScope)
_BOOL = {"1": True, "true": True, "on": True, "0": False, "false": False, "off": False}


def default_dir() -> Path | None:
    """The folder holding ``runs_*.csv``: ``$GPUSIM_RUNS_DIR``, else the repository's ``validation/``."""
    if os.environ.get(ENV_VAR):
        return Path(os.environ[ENV_VAR])
    here = Path(__file__).resolve().parent.parent / "validation"
    return here if here.is_dir() else None


def table_csv(name: str) -> Path | None:
    """The component table ``name`` (``attention_rates.csv``, ``ep_dispatch.csv``) in the runs tables' folder
    (:func:`default_dir`: ``$GPUSIM_RUNS_DIR`` or the repository's ``validation/``), or None where it is not there."""
    d = default_dir()
    p = d / name if d else None
    return p if p and p.is_file() else None


#: ``runs_*.csv`` files of another schema, read by their own module (``runs_fsdp.csv``: gpusim.validation_fsdp)
OTHER_SCHEMA_FILES = frozenset({"runs_fsdp.csv"})


def default_paths() -> list[Path]:
    d = default_dir()
    return sorted(p for p in d.glob("runs_*.csv") if p.name not in OTHER_SCHEMA_FILES) if d is not None else []


#: [stop 38] the Megatron-Bridge performance tables of the releases after the curated ones (26.02.01 to 26.08.01), as
#: published: the stated layouts with the 26.02 rows' conventions and the software settings of a recipe of each
#: release's era where one states the row's layout (validation/README.md). Reported apart from the curated
#: runs_*.csv, not mixed into their figures or the track record
LATER_RELEASES_FILE = "later_releases.csv"


def later_releases_path() -> Path | None:
    """``validation/later_releases.csv`` where the checkout has it."""
    d = default_dir()
    p = d / LATER_RELEASES_FILE if d is not None else None
    return p if p is not None and p.is_file() else None


def later_releases_lines(results: list[RunRow]) -> list[str]:
    """[stop 38] The later releases' summary: open and held-out rows per regime (:func:`summarize`), and the median
    signed error of each release's rows (open ones only, as the held-out rows are reported in summary alone)."""
    from gpusim.validation import fmt_pct

    lines = []
    summ = summarize(results)
    for part in ("open", "holdout"):
        for g, st in summ[part].items():
            if st["rows"] and g != "memory":
                lines.append(f"  {'held-out' if part == 'holdout' else 'open'} {g}: {st['predicted']} of {st['rows']} "
                             f"predicted, median {fmt_pct(st['median_ape'])}, p90 {fmt_pct(st['p90_ape'])}, median "
                             f"signed {format_signed(st['median_signed'])}")
    for part, sel in (("open", lambda r: not r.holdout), ("held-out", lambda r: r.holdout)):
        rest = [r for r in results if sel(r) and not r.is_memory and "hybrid" not in r.regimes]
        if len(rest) < len([r for r in results if sel(r) and not r.is_memory]):
            st = stats(rest)
            lines.append(f"  {part} all but hybrid: {st['predicted']} of {st['rows']} predicted, median "
                         f"{fmt_pct(st['median_ape'])}, p90 {fmt_pct(st['p90_ape'])}, median signed "
                         f"{format_signed(st['median_signed'])}")
    line = open_by_source_line(results, "  open rows per release", strip="MBRIDGE_")
    return lines + ([line] if line else [])


def open_by_source_line(results, label: str, *, strip: str = "") -> str:
    """[stop 58] ``label``, then the median signed step-time error of each source's open rows (``source_id``, less the
    prefix ``strip``), or ``""`` where there are none. Held-out rows are left out: they are reported in summary only."""
    by_source: dict[str, list[float]] = {}
    for r in results:
        if not r.holdout and not r.is_memory and r.signed_frac is not None:
            by_source.setdefault(r.source_id, []).append(r.signed_frac)
    if not by_source:
        return ""
    return f"{label}, median signed (error > 0: predicted slower): " + ", ".join(
        f"{k.removeprefix(strip)} {format_signed(quantile(v, 0.5))} (n={len(v)})" for k, v in sorted(by_source.items()))


@dataclass
class RunRow:
    run_id: str
    source_id: str
    file: str
    holdout: bool
    model: str
    gpu: str
    gpus: int
    layout: str
    precision: str
    metric: str
    measured: float
    regimes: tuple[str, ...]
    predicted: float | None = None
    step_s: float | None = None
    measured_step_s: float | None = None
    chosen: str = ""
    error: str = ""

    @property
    def is_memory(self) -> bool:
        """[issue 17] A peak-memory row (:data:`MEMORY_METRICS`), not a step-time one."""
        return self.metric in MEMORY_METRICS

    @property
    def signed_frac(self) -> float | None:
        """(predicted - measured) / measured in step time: positive = predicted slower than measured; for a
        peak-memory row in memory: positive = predicted more memory than the run held."""
        if self.is_memory:
            return None if self.predicted is None else self.predicted / self.measured - 1.0
        if self.step_s is None or self.measured_step_s is None:
            return None
        return self.step_s / self.measured_step_s - 1.0

    @property
    def ape(self) -> float | None:
        s = self.signed_frac
        return None if s is None else abs(s)


def _int(v, default=1) -> int:
    v = (v or "").strip()
    return int(float(v)) if v else default


def regime(r: dict) -> tuple[str, ...]:
    """The regimes a row belongs to: ``moe`` (ep > 1 or an MoE model), ``blackwell`` (B200/B300/GB200/GB300), and for
    dense rows on other GPUs ``dense-bf16`` or ``dense-fp8`` (fp8 and mxfp8; [issue 17] ``dense-nvfp4`` for NVFP4,
    Blackwell only); ``hybrid`` besides for a model with
    Mamba mixers [stop 38]; a peak-memory row is in ``memory`` alone (its error is of memory, not of step time)."""
    if (r.get("metric") or "").strip() in MEMORY_METRICS:
        return ("memory",)
    out = []
    moe = _int(r.get("ep")) > 1 or _is_moe(r["model"])
    if moe:
        out.append("moe")
    if r["gpu"] in BLACKWELL:
        out.append("blackwell")
    if not moe:
        pr = r["precision"].strip().lower()
        fp8 = pr in ("fp8", "mxfp8", "fp8-cs", "fp8-mx")
        kind = "dense-nvfp4" if pr == "nvfp4" else "dense-fp8" if fp8 else "dense-bf16"  # [issue 17] NVFP4 apart
        out.append(kind + ("" if r["gpu"] not in BLACKWELL else "-blackwell"))
    if _spec_count(r["model"], "n_mamba_layers"):  # [stop 38] a hybrid Mamba-Transformer model
        out.append("hybrid")
    return tuple(out)


def _spec_count(model: str, field: str) -> int:
    """A count of the model's transformer spec (0 for an unknown model, which predict_row reports)."""
    try:
        wl = _workload(model, None)
    except Exception:  # noqa: BLE001 - an unknown model is reported by predict_row
        return 0
    return int(getattr(getattr(wl, "transformer", None), field, 0) or 0)


def _is_moe(model: str) -> bool:
    return bool(_spec_count(model, "n_experts"))


def _model_ref(model: str) -> str:
    """A row's model as gpusim reads it: a catalogue id as it stands; a relative config.json path (the tables name
    ``tests/workload/configs/...``) from the repository root, so that ``gpusim validate`` reads the same file from any
    working directory."""
    if not model.endswith(".json") or Path(model).is_absolute():
        return model
    root = Path(__file__).resolve().parent.parent / model
    return str(root) if root.is_file() else model


def _workload(model: str, seq_len: int | None):
    from gpusim.workload import get_workload

    ref = _model_ref(model)
    return get_workload(ref, seq_len=seq_len) if seq_len else get_workload(ref)


def options(notes: str) -> dict:
    """The ``key=value`` tokens of a row's notes (:data:`OPTION_KEYS`; the module docstring says what each does)."""
    out = {}
    for key, val in _TOKEN.findall(notes or ""):
        out[key] = val
    return out


def held_out(r: dict, opts: dict | None = None) -> bool:
    """Whether a row counts as held out: its ``holdout`` column (a file's hold-out rule, ``validation/README.md``),
    unless its notes say ``seen_before_entry=1`` [stop 51]: gpusim's prediction of the run was seen before the row was
    entered, so whatever rule files it as held out, it is counted with the open rows (a held-out figure must be blind)."""
    opts = options(r.get("notes", "")) if opts is None else opts
    return str(r.get("holdout")).strip() == "1" and not _BOOL.get(str(opts.get("seen_before_entry", "0")).lower(), False)


def _measured_step_s(metric: str, value: float, gb: int, seq: int, gpus: int, model_flop_per_step: float | None):
    if metric == "step_time_s":
        return value
    if metric == "tokens_per_s_per_gpu":
        return gb * seq / (value * gpus)
    if metric == "model_tflop_per_s_per_gpu":
        return None if model_flop_per_step is None else model_flop_per_step / (value * 1e12 * gpus)
    return None


@dataclass
class RowSetup:
    """What one published run states, as :func:`row_setup` reads it: the Scenario's fields (``base``, without the
    recomputation), the stated recomputation, the defaults taken for what it does not state (``chosen``), its notes'
    options and its workload."""

    base: dict
    stated_rc: str
    chosen: list
    opts: dict
    wl: object
    spec: object
    gpus: int
    global_batch: int
    seq_len: int
    micro_batch_stated: str


def row_setup(r: dict, out: RunRow, db) -> RowSetup | None:
    """The scenario of one published run with its stated layout and the software settings of its notes (module
    docstring). On a row it cannot read it sets ``out.error`` and returns None."""
    from gpusim.errors import GpusimError

    tp, pp, cp, ep, etp = (_int(r.get(k)) for k in ("tp", "pp", "cp", "ep", "etp"))
    vp = _int(r.get("vp"))
    gpus, gb, seq = _int(r["gpus"]), _int(r["global_batch"]), _int(r["seq_len"])
    mb_stated = (r.get("micro_batch") or "").strip()
    mb = _int(mb_stated)
    opts = options(r.get("notes", ""))
    prec = r["precision"].strip().lower()
    node = NODE_FOR_GPU.get(r["gpu"])
    if node is None:
        out.error = f"no node template for GPU {r['gpu']!r} (known: {', '.join(NODE_FOR_GPU)})"
        return None
    try:
        wl = _workload(r["model"], seq)
    except GpusimError as e:
        out.error = str(e)
        return None
    if opts.get("flop_count", "gpusim") not in ("gpusim", "megatron"):
        out.error = f"flop_count={opts['flop_count']!r} in the notes is not gpusim or megatron"
        return None
    per_node = db.node(node).gpus_per_node
    kind = STRATEGY_ALIASES.get(opts.get("strategy", "zero1"), "zero1")
    stated_rc = (r.get("recompute") or "").strip().lower()
    chosen = []
    spec = getattr(wl, "transformer", None)
    changes = {}
    if spec is not None and "attention" in opts and spec.flash_attention != (opts["attention"] == "flash"):
        changes["flash_attention"] = opts["attention"] == "flash"
    # ``router=force_balanced`` (the tables force-balance the tokens: Megatron-Core's --moe-router-force-load-balancing)
    # replaces the router's logits by fresh normal draws per token (``RandomSTE`` / ``apply_random_logits`` in
    # megatron/core/transformer/moe/moe_utils.py, "random logits of router for load-balanced benchmark"): every token's
    # top-k is then a uniform random k-subset, exactly the sampling spread of experts.busiest_rank_load, which the row
    # keeps (balanced in expectation, not per micro-batch)
    if changes:
        from gpusim.workload import build_from_spec

        wl = build_from_spec(dataclasses.replace(spec, seq_len=seq, **changes), id=wl.id, name=wl.name)
    layers = getattr(getattr(wl, "transformer", None), "n_layers", None)
    uneven = bool(layers) and layers % (pp * vp) != 0
    if uneven:
        chosen.append("uneven pp")
    base = dict(workload=wl, node=node, gpus=gpus, nodes=max(1, gpus // per_node), kind=kind, precision=prec, tp=tp,
                pp=pp, vp=vp, cp=cp, ep=ep, expert_tp=etp, micro_batch=mb, global_batch=gb, seq_len=seq,
                uneven_pp=uneven)
    if opts.get("tp_comm_overlap") in ("1", "true", "on") and tp > 1:
        base["tp_comm_overlap"] = True
    if prec.startswith("fp8") and "fp8_recipe" in opts:
        base["fp8_recipe"] = opts["fp8_recipe"]
    try:
        if "moe_capacity_factor" in opts:
            base["moe_capacity_factor"] = float(opts["moe_capacity_factor"])
    except ValueError:
        out.error = f"moe_capacity_factor={opts['moe_capacity_factor']!r} in the notes is not a number"
        return None
    for key in ("ep_overlap", "moe_dispatcher"):
        if key in opts:
            base[key] = opts[key]
    if "cross_entropy" in opts:  # [issue 17] the loss's cross entropy the recipe runs (Strategy.cross_entropy)
        if opts["cross_entropy"] not in typing.get_args(CrossEntropy):
            out.error = f"cross_entropy={opts['cross_entropy']!r} in the notes is not te, native or unfused"
            return None
        base["cross_entropy"] = opts["cross_entropy"]
    if "cp_comm" in opts:  # [issue 17] the context-parallel exchange the source states (TE's cp_comm_type names)
        cp_kind = {"p2p": "ring", "all_gather": "all-gather"}.get(opts["cp_comm"], opts["cp_comm"])
        if cp_kind not in typing.get_args(CpComm):
            out.error = f"cp_comm={opts['cp_comm']!r} in the notes is not p2p, all_gather, a2a or a2a+p2p"
            return None
        base["cp_comm"] = cp_kind
    if "overlap_p2p_comm" in opts:  # [issue 17]
        if opts["overlap_p2p_comm"].lower() not in _BOOL:
            out.error = f"overlap_p2p_comm={opts['overlap_p2p_comm']!r} in the notes is not 0 or 1"
            return None
        base["pp_p2p_overlap"] = _BOOL[opts["overlap_p2p_comm"].lower()]
    if "ddp_bucket_size" in opts:  # [stop 58] the run's gradient buckets (Strategy.ddp_bucket_params)
        try:
            base["ddp_bucket_params"] = float(int(opts["ddp_bucket_size"]))
        except ValueError:
            out.error = f"ddp_bucket_size={opts['ddp_bucket_size']!r} in the notes is not a count of parameters"
            return None
    if "cpu_offloading_num_layers" in opts:  # [issue 17]
        try:
            base["activation_offload_layers"] = int(opts["cpu_offloading_num_layers"])
        except ValueError:
            out.error = f"cpu_offloading_num_layers={opts['cpu_offloading_num_layers']!r} in the notes is not a count"
            return None
    # [issue 17] the recipe's memory settings (module docstring: where a recipe's stated layout equals the row's)
    for key, allowed in (("recompute_modules", RECOMPUTE_MODULES), ("cuda_graph_scope", CUDA_GRAPH_SCOPES)):
        if key in opts:  # '+'-joined names; cuda_graph_scope: the run's CUDA graphs as its source states them
            names = tuple(m for m in opts[key].split("+") if m)
            bad = [m for m in names if m not in allowed]
            if bad or not names:
                out.error = (f"{key}={opts[key]!r} in the notes: {', '.join(bad) or 'empty'} "
                             f"not one of {', '.join(allowed)} (join several with '+')")
                return None
            base[key] = names
    for key, field, values in (("grad_reduce_in_fp32", "grad_dtype", {True: "fp32", False: "bf16"}),
                               ("fp8_activations", "fp8_activations", {True: True, False: False}),
                               ("disable_parameter_transpose_cache", "fp8_transpose_cache", {True: False, False: True}),
                               ("moe_router_padding_for_fp8", "moe_router_padding", {True: True, False: False}),
                               # [issue 17] TE's CuTe DSL fused grouped MLP (NVTE_CUTEDSL_FUSED_GROUPED_MLP=1 with
                               # Megatron-Core's op fuser and 32-wide GLU interleaving)
                               ("cutedsl_fused_grouped_mlp", "moe_fused_mlp", {True: True, False: False}),
                               # [issue 17] the MTP passes through one shared module (Strategy.mtp_shared)
                               ("mtp_use_repeated_layer", "mtp_shared", {True: True, False: False})):
        if key in opts:
            if opts[key].lower() not in _BOOL:
                out.error = f"{key}={opts[key]!r} in the notes is not 0 or 1"
                return None
            base[field] = values[_BOOL[opts[key].lower()]]
    for key in ("bf16_layers_start", "bf16_layers_end"):  # [stop 57] layers kept out of the FP8 / NVFP4 recipe
        if key in opts:
            if not opts[key].isdigit():
                out.error = f"{key}={opts[key]!r} in the notes is not a count of layers"
                return None
            base[key] = int(opts[key])
    if "mtp_num_layers" in opts:  # [issue 17] the multi-token prediction modules the run trained (Strategy.mtp_layers)
        v = opts["mtp_num_layers"]
        if not v.isdigit() or int(v) > 16:
            out.error = f"mtp_num_layers={v!r} in the notes is not a count from 0 to 16"
            return None
        base["mtp_layers"] = int(v)
    if "optimizer" in opts:  # [issue 17] the optimizer the run's recipe trains with (Kimi K2's Muon)
        if opts["optimizer"] not in ("adam", "adamw", "muon"):
            out.error = f"optimizer={opts['optimizer']!r} in the notes is not adam, adamw or muon"
            return None
        base["optimizer"] = opts["optimizer"]
    if "opt_state_dtype" in opts:
        if opts["opt_state_dtype"] not in OPT_STATE_DTYPE_BYTES:
            out.error = f"opt_state_dtype={opts['opt_state_dtype']!r} in the notes is not fp32 or bf16"
            return None
        base["opt_state_dtype"] = opts["opt_state_dtype"]
    return RowSetup(base=base, stated_rc=stated_rc, chosen=chosen, opts=opts, wl=wl, spec=spec, gpus=gpus,
                    global_batch=gb, seq_len=seq, micro_batch_stated=mb_stated)


def predict_row(r: dict, *, file: str = "", db=None, params=None) -> RunRow:
    """Predict one published run with its stated layout (module docstring). Never raises for a bad row: the row
    comes back with ``error`` set and no prediction."""
    from gpusim.errors import GpusimError
    from gpusim.scenario import Scenario
    from gpusim.simulation import simulate

    tp, pp, cp, ep, etp = (_int(r.get(k)) for k in ("tp", "pp", "cp", "ep", "etp"))
    vp = _int(r.get("vp"))
    gpus, gb, seq = _int(r["gpus"]), _int(r["global_batch"]), _int(r["seq_len"])
    mb_stated = (r.get("micro_batch") or "").strip()
    mb = _int(mb_stated)
    metric = r["metric"].strip()
    opts = options(r.get("notes", ""))
    prec = r["precision"].strip().lower()
    layout = f"{tp}/{pp}/{vp}/{cp}" + (f"/{ep}" if ep > 1 else "") + f" {mb}/{gb}"
    out = RunRow(run_id=r["run_id"], source_id=r["source_id"], file=file, holdout=held_out(r, opts),
                 model=r["model"], gpu=r["gpu"], gpus=gpus, layout=layout, precision=prec, metric=metric,
                 measured=float(r["value"]), regimes=regime(r))
    if metric not in METRICS:
        out.error = f"metric {metric!r} is not one of {', '.join(METRICS)}"
        return out
    setup = row_setup(r, out, db)
    if setup is None:
        return out
    base, stated_rc, chosen, opts, wl, spec = (setup.base, setup.stated_rc, setup.chosen, setup.opts, setup.wl,
                                               setup.spec)
    mods = base.get("recompute_modules", ())
    try:
        res = simulate(Scenario.create(**base, recompute=stated_rc or "none"), db=db, params=params, recommend=False)
    except GpusimError as e:
        out.error = str(e)
        return out
    if not stated_rc:
        chosen.append("rc " + "+".join(m for m in mods if m != "core_attn") if mods else "rc none")
    if not mb_stated:
        chosen.append("mb 1")
    if not res.fits_in_memory:
        chosen.append("no fit (gpusim)")
    out.chosen = ", ".join(chosen)
    out.step_s = float(res.step_s)
    tflop = res.model_tflop_per_s_per_gpu
    flop_step = None if tflop is None else tflop * 1e12 * gpus * out.step_s
    if opts.get("flop_count") == "megatron" and spec is not None:
        # [issue 17] the source's TFLOP/s is Megatron-LM's own count (megatron/training/training.py
        # num_floating_point_operations: the attention core over seq_len / 2 keys, "causal mask (only half of the mask
        # is non-zero)"): the tokens it stands for follow from that count, not gpusim's
        from gpusim.workload.flops import flops_per_token

        flop_step = flops_per_token(wl.transformer, seq)["megatron_flop_per_token"] * gb * seq
    out.measured_step_s = _measured_step_s(metric, out.measured, gb, seq, gpus,
                                           None if flop_step is None else float(flop_step))
    if metric in MEMORY_METRICS:
        out.predicted = allocated_bytes(res, params) / units.GIB
    elif metric == "step_time_s":
        out.predicted = out.step_s
    elif metric == "tokens_per_s_per_gpu":
        out.predicted = gb * seq / (out.step_s * gpus)
    elif tflop is not None:
        out.predicted = float(tflop)
    return out


def allocated_bytes(res, params=None) -> float:
    """[issue 17] What PyTorch's caching allocator would report as the peak allocated memory of the fullest GPU
    (``torch.cuda.max_memory_allocated``): gpusim's weights, gradients, optimizer states and activations, without the
    allocator's fragmentation (``ModelParams.fragmentation_frac``, which gpusim adds to the activations for the fit
    check: it is reserved, not allocated) and without the CUDA context, library workspaces and NCCL buffers
    (``overhead``: not the allocator's)."""
    from gpusim.model.memory import allocated_bytes as allocator_share
    from gpusim.params import DEFAULT_PARAMS

    m = res.memory_breakdown_bytes
    return float(allocator_share(m["weights"], m["gradients"], m["optimizer"], m["buffers"], m["activations"],
                                 (params or DEFAULT_PARAMS).fragmentation_frac))


def read_rows(paths, *, columns=COLUMNS, id_column: str = "run_id") -> list[tuple[str, dict]]:
    """``(file name, row dict)`` of every row of ``paths`` with an ``id_column``; a file whose header lacks one of
    ``columns`` (default the runs tables' schema) raises :class:`~gpusim.errors.GpusimError` naming the missing
    columns."""
    from gpusim.errors import GpusimError

    out = []
    for p in paths:
        with open(p, newline="") as fh:
            rd = csv.DictReader(fh)
            missing = [c for c in columns if c not in (rd.fieldnames or ())]
            if missing:
                raise GpusimError(f"{p}: missing column(s) {', '.join(missing)}; the schema is "
                                  f"{', '.join(columns)} (validation/README.md)")
            out += [(Path(p).name, row) for row in rd if (row.get(id_column) or "").strip()]
    return out


def run(paths=None, *, db=None, params=None) -> list[RunRow]:
    from gpusim.hwdb import load

    paths = default_paths() if paths is None else list(paths)
    if not paths:
        return []
    db = db or load()
    return [predict_row(r, file=f, db=db, params=params(r["gpu"]) if callable(params) else params)
            for f, r in read_rows(paths)]


def repeated_layouts(results: list[RunRow]) -> dict:
    """[stop 42] How far apart the measurements of one stated layout are when it appears in more than one open row (the
    same model, GPU, GPU count, degrees, batches and precision in another release, source or software setting):
    ``layouts`` such layouts over ``rows`` rows, and the median and 90th percentile of each layout's slowest over
    fastest measured step, minus 1. What a row's stated layout leaves out (the container, the software settings a
    source does not state) moves its measurement this much, and a prediction from the layout alone cannot follow it.
    Measurements only, of open rows (the held-out rows' measurements stay out)."""
    groups: dict[tuple, list[float]] = {}
    for r in results:
        if r.holdout or r.is_memory or not r.measured_step_s:
            continue
        groups.setdefault((r.model, r.gpu, r.gpus, r.layout, r.precision), []).append(r.measured_step_s)
    spreads = [max(v) / min(v) - 1.0 for v in groups.values() if len(v) > 1]
    return {"layouts": len(spreads), "rows": sum(len(v) for v in groups.values() if len(v) > 1),
            "median_spread_frac": quantile(spreads, 0.5), "p90_spread_frac": quantile(spreads, 0.9)}


def signed_error_stats(signed) -> dict:
    """``predicted``, ``median_ape``, ``p90_ape`` and ``median_signed`` of the signed fractional errors given (None
    entries skipped; None figures when there are none): the summary the component tables (gpusim.validation_ep,
    gpusim.validation_attention) report."""
    s = [float(x) for x in signed if x is not None]
    errs = [abs(x) for x in s]
    return {"predicted": len(s), "median_ape": quantile(errs, 0.5) if s else None,
            "p90_ape": quantile(errs, 0.9) if s else None, "median_signed": quantile(s, 0.5) if s else None}


def predict_table(path, columns, what: str, predict, *, db=None, params=None) -> list:
    """``predict(row, db=db, params=params)`` over every row of the CSV at ``path`` (None: no table, no rows), read
    with its schema's columns checked (:func:`gpusim.checks.read_csv`: a file without them raises
    :class:`~gpusim.errors.GpusimError` naming them); ``db`` defaults to the packaged hardware database."""
    from gpusim.checks import read_csv
    from gpusim.hwdb import load

    if path is None:
        return []
    db = db or load()
    return [predict(r, db=db, params=params) for r in read_csv(path, columns, what)]


def stats(rows: list[RunRow]) -> dict:
    """``rows``, ``predicted``, ``predicted_frac``, ``median_ape``, ``p90_ape``, ``median_signed`` (None when empty)."""
    pred = [r for r in rows if r.ape is not None]
    errs = [r.ape for r in pred]
    signed = [r.signed_frac for r in pred]
    return {"rows": len(rows), "predicted": len(pred), "predicted_frac": len(pred) / len(rows) if rows else None,
            "median_ape": quantile(errs, 0.5) if errs else None, "p90_ape": quantile(errs, 0.9) if errs else None,
            "median_signed": quantile(signed, 0.5) if signed else None}


REGIMES = ("dense-bf16", "dense-fp8", "dense-bf16-blackwell", "dense-fp8-blackwell", "dense-nvfp4-blackwell",
           "blackwell", "moe", "hybrid",
           "memory")


def summarize(results: list[RunRow]) -> dict:
    """Per regime and overall, for the rows that may be looked at (``open``) and the held-out ones (``holdout``)."""
    out = {}
    for part, sel in (("open", lambda r: not r.holdout), ("holdout", lambda r: r.holdout)):
        rows = [r for r in results if sel(r)]
        d = {"all": stats([r for r in rows if not r.is_memory])}  # step time; peak memory is its own regime
        for g in REGIMES:
            rg = [r for r in rows if g in r.regimes]
            if rg:
                d[g] = stats(rg)
        out[part] = d
    return out


def format_signed(x) -> str:
    return "-" if x is None else f"{100 * x:+.1f}%"


#: what a held-out row keeps hidden unless asked for (its measurement, its prediction and their error)
HIDDEN_FIELDS = ("measured", "measured_step_s", "predicted", "step_s", "signed_frac", "ape")


def to_dicts(results: list[RunRow], *, holdout_rows: bool = False) -> list[dict]:
    """Every row as a dict; a held-out row's measurement, prediction and error are None (``"hidden": true``) unless
    ``holdout_rows``: whoever models against this table must not read them (the summaries carry their errors)."""
    out = []
    for r in results:
        d = {**asdict(r), "signed_frac": r.signed_frac, "ape": r.ape}
        if r.holdout and not holdout_rows:
            d.update(dict.fromkeys(HIDDEN_FIELDS), hidden=True)
        out.append(d)
    return out


TABLE_COLUMNS = ("run", "held", "model", "GPU", "GPUs", "tp/pp/vp/cp(/ep) mb/gb", "prec", "meas s", "pred s", "error",
                 "assumed / why not")


def _report(results, *, memory: bool, holdout_rows: bool, holdout_summary: bool):
    """The table rows and summary lines of the step-time rows (``memory`` False) or of the peak-memory rows."""
    from gpusim.validation import fmt_pct

    table = []
    for r in results:
        if r.is_memory != memory:
            continue
        show = holdout_rows or not r.holdout
        meas, pred = (r.measured, r.predicted) if memory else (r.measured_step_s, r.step_s)
        table.append([r.run_id, "yes" if r.holdout else "", r.model, r.gpu, r.gpus, r.layout, r.precision,
                      (f"{meas:.4g}" if show else "hidden") if meas else "",
                      f"{pred:.4g}" if (pred is not None and show) else "",
                      fmt_pct(r.signed_frac) if show and r.signed_frac is not None else ("hidden" if not show else ""),
                      r.chosen if not r.error else r.error[:70]])
    lines = []
    summ = summarize(results)
    for part in ("open", "holdout"):
        if part == "holdout" and not holdout_summary:
            continue
        for g, st in summ[part].items():
            if st["rows"] and (g == "memory") == memory:
                lines.append(f"{'held-out' if part == 'holdout' else 'open'} {'peak memory' if memory else g}: "
                             f"{st['predicted']} of {st['rows']} predicted, median {fmt_pct(st['median_ape'])}, p90 "
                             f"{fmt_pct(st['p90_ape'])}, median signed {format_signed(st['median_signed'])}")
    if not memory:  # [stop 58] which sources lean which way (open rows only)
        line = open_by_source_line(results, "open rows per source")
        if line:
            lines.append(line)
    return table, lines


def report(results: list[RunRow], *, holdout_rows: bool = False, holdout_summary: bool = True):
    """``(table rows, summary lines)`` for printing: every step-time row (a held-out row's measurement, prediction and
    error only with ``holdout_rows``) and one line per regime for the open rows and, with ``holdout_summary``, the
    held-out rows (peak-memory rows: :func:`memory_report`)."""
    return _report(results, memory=False, holdout_rows=holdout_rows, holdout_summary=holdout_summary)


MEMORY_COLUMNS = ("run", "held", "model", "GPU", "GPUs", "tp/pp/vp/cp(/ep) mb/gb", "prec", "meas GiB", "pred GiB",
                  "error", "assumed / why not")


def memory_report(results: list[RunRow], *, holdout_rows: bool = False, holdout_summary: bool = True):
    """[issue 17] ``(table rows, summary lines)`` of the peak-memory rows: measured and predicted allocated GiB
    (:func:`allocated_bytes`), a held-out row's figures only with ``holdout_rows``."""
    return _report(results, memory=True, holdout_rows=holdout_rows, holdout_summary=holdout_summary)
