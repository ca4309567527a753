"""FSDP (ZeRO-3) MFU on MosaicML llm-foundry's MPT training benchmark tables (issue 18, item 5).

``validation/runs_fsdp.csv`` holds one row per row of the four tables of llm-foundry's
``scripts/train/benchmarking/README.md`` (mosaicml/llm-foundry @ 061f2c7ce64e655100286584a7629e2a09f827ba): MPT
models of 125M to 70B parameters trained with PyTorch FSDP ``FULL_SHARD`` on H100 80GB (BF16 and FP8) and A100 80GB /
40GB, each row with its sequence length, GPU count, micro-batch, gradient accumulation, global batch, precision, FSDP
mixed-precision mode, activation checkpointing and the measured MFU, HFU and throughput. The columns, the mapping and
every assumption are in ``validation/README.md`` and in each row's ``notes``.

Each row is predicted with :func:`gpusim.simulation.simulate` at its stated layout (the way
:func:`gpusim.validation_runs.predict_row` predicts the published Megatron runs):

- ``FULL_SHARD`` is ``fsdp-full``, ``SHARD_GRAD_OP`` ``fsdp-grad-op``, ``HYBRID_SHARD`` ``fsdp-hybrid``,
  ``NO_SHARD`` ``ddp`` (:data:`SHARDING`; gpusim.strategy documents the equivalences).
- Activation checkpointing ``True`` is ``recompute="full"`` (llm-foundry checkpoints every MPT block, so the block's
  forward runs again in the backward pass), ``False`` is ``recompute="none"``. Both put the row on gpusim's per-GEMM
  transformer path (``Strategy.is_llm``), which FSDP is allowed on (``Strategy._check`` refuses only ``dp`` and
  ``fsdp-hybrid`` there), so every row of a table runs through the same model path.
- ``amp_bf16`` (FSDP mixed precision ``DEFAULT``: bf16 compute and parameter all-gathers, fp32 gradient reduction)
  is gpusim ``amp_bf16``; ``bf16`` with ``PURE`` (bf16 all-gathers and reductions) is gpusim ``bf16``; ``amp_fp8``
  is gpusim ``fp8`` with Transformer Engine's delayed scaling (Composer's ``get_precision_context`` builds
  ``DelayedScaling(fp8_format=HYBRID, amax_history_len=16, amax_compute_algo='max')`` when no config is given:
  mosaicml/composer ``composer/core/precision.py`` @ 02c872e43c708781bba06355a4e673557f3d5056) and the parameters
  gathered in bf16 (``fp8_param_gather=False``: FSDP gathers its bf16 compute copy; TE quantises inside each GEMM).
- The node is the row's hwdb template (``node``) with the row's ``inter`` / ``nics_per_node`` where given (the A100
  tables' 1600 Gbps RoCE as 8x ``roce-200g``).

The comparison is on llm-foundry's own MFU (:func:`llmfoundry_mfu`, the README's formula,
``(3 flops_per_seq + 3 attn_flops_per_seq) seq_per_sec / (gpu_num GPU_AVAILABLE_FLOPS)`` with
``flops_per_seq = 2 n_params seq_len`` and ``attn_flops_per_seq = n_layers 2 2 d_model seq_len^2``) with the row's
NumParams and Composer's peak (:data:`GPU_AVAILABLE_FLOPS`), fed gpusim's predicted step:
``seq_per_sec = global_batch / step_s``. The measured step is ``global_batch seq_len / Throughput (T/s)``. The
summary gives, for the open and the held-out rows apart and per GPU and precision, the median and 90th-percentile
absolute relative MFU error, the same for the step time, and the baseline the issue compares with: a constant
predictor equal to the open rows' median measured MFU, scored on the same rows.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

from gpusim.errors import GpusimError
from gpusim.stats import quantile

COLUMNS = ("run_id", "source_id", "source", "holdout", "model", "gpu", "node", "inter", "nics_per_node", "gpus",
           "seq_len", "micro_batch", "grad_accum", "global_batch", "precision", "mp_mode", "sharding",
           "activation_checkpointing", "cpu_offload", "attention", "measured_mfu", "measured_hfu", "measured_samples_per_s",
           "measured_tokens_per_s", "measured_tokens_per_s_per_gpu", "num_params", "notes")
#: [issue 18] the attention kernels a row may name (gpusim.strategy.Strategy.attention; empty: the GPU's native one)
ATTENTION = (None, "flash", "flash2", "triton", "unfused")
#: FSDP sharding strategy -> gpusim strategy kind (gpusim.strategy.StrategyKind)
SHARDING = {"FULL_SHARD": "fsdp-full", "SHARD_GRAD_OP": "fsdp-grad-op", "HYBRID_SHARD": "fsdp-hybrid",
            "NO_SHARD": "ddp"}
#: llm-foundry / Composer precision -> (gpusim precision, extra Strategy fields) (module docstring)
PRECISION = {"amp_bf16": ("amp_bf16", {}), "bf16": ("bf16", {}), "amp_fp16": ("amp_fp16", {}),
             "fp32": ("fp32", {}), "amp_fp8": ("fp8", {"fp8_recipe": "delayed", "fp8_param_gather": False})}
#: Composer's ``GPU_AVAILABLE_FLOPS`` (mosaicml/composer ``composer/callbacks/speed_monitor.py`` @
#: 54ccd188bd906641ef81d5b649660f60b5d3a460, the peak ``get_gpu_flops_available`` hands the SpeedMonitor's MFU), per
#: hwdb GPU id and Composer precision, FLOP/s: H100 SXM ``1.979e15 / 2`` (bf16) and ``3.958e15 / 2`` (fp8; "nvidia
#: publishes spec sheet with a 2x sparsity factor"), A100 (SXM and PCIe alike) 312e12 for fp16 / bf16
GPU_AVAILABLE_FLOPS = {
    "h100-sxm": {"amp_bf16": 1.979e15 / 2, "bf16": 1.979e15 / 2, "amp_fp16": 1.979e15 / 2, "amp_fp8": 3.958e15 / 2},
    "a100-sxm4-80gb": {"amp_bf16": 312e12, "bf16": 312e12, "amp_fp16": 312e12},
    "a100-sxm4-40gb": {"amp_bf16": 312e12, "bf16": 312e12, "amp_fp16": 312e12},
}
_TRUE = {"true": True, "1": True, "false": False, "0": False}


def default_csv() -> Path:
    return Path(__file__).resolve().parent.parent / "validation" / "runs_fsdp.csv"


def holdout_rule(run_id: str) -> bool:
    """The held-out quarter: ``int(sha1(run_id), 16) % 4 == 0`` (validation/README.md; set before any prediction)."""
    return int(hashlib.sha1(run_id.encode()).hexdigest(), 16) % 4 == 0


def llmfoundry_mfu(n_params: float, n_layers: float, d_model: float, seq_len: float, seq_per_s: float, gpus: float,
                   peak_flop_per_s: float) -> float:
    """llm-foundry's MFU (``scripts/train/benchmarking/README.md`` @ 061f2c7c, section "MFU"): three network
    operations (forward, backward, parameter gradient) of ``2 n_params`` FLOPs per token plus three of the attention
    ``n_layers 2 2 d_model seq_len^2`` per sequence, over ``gpus`` GPUs at Composer's peak (a fraction)."""
    flops_per_seq = 2.0 * n_params * seq_len
    attn_flops_per_seq = n_layers * 2.0 * 2.0 * d_model * seq_len ** 2
    return (3.0 * flops_per_seq + 3.0 * attn_flops_per_seq) * seq_per_s / (gpus * peak_flop_per_s)


@dataclass
class FsdpRow:
    """One published benchmark row with gpusim's prediction (times in s, MFU as fractions)."""

    run_id: str
    source_id: str
    holdout: bool
    model: str
    gpu: str
    precision: str
    gpus: int
    seq_len: int
    layout: str
    measured_mfu_frac: float
    measured_step_s: float | None = None
    step_s: float | None = None
    mfu_frac: float | None = None  # llm-foundry's MFU of gpusim's predicted step
    gpusim_mfu_frac: float | None = None  # gpusim's own MFU convention (simulation.MFU_CONVENTION)
    fits_in_memory: bool | None = None
    dominant: str = ""
    breakdown_s: dict = field(default_factory=dict)
    error: str = ""

    @property
    def group(self) -> str:
        return f"{self.gpu} {self.precision}"

    @property
    def mfu_signed_frac(self) -> float | None:
        """(predicted - measured) / measured MFU: positive = gpusim predicts a faster run than measured."""
        if self.mfu_frac is None or not self.measured_mfu_frac > 0:
            return None
        return self.mfu_frac / self.measured_mfu_frac - 1.0

    @property
    def step_signed_frac(self) -> float | None:
        """(predicted - measured) / measured step: positive = predicted slower than measured."""
        if self.step_s is None or not self.measured_step_s:
            return None
        return self.step_s / self.measured_step_s - 1.0


def load_rows(path=None) -> list[dict]:
    """The CSV's rows; a file without the schema's columns raises :class:`GpusimError` naming the missing ones."""
    from gpusim.checks import read_csv

    path = path or default_csv()
    rows = read_csv(path, COLUMNS, "FSDP runs CSV",
                    f"the schema is {', '.join(COLUMNS)} (validation/README.md, runs_fsdp.csv)")
    return [r for r in rows if (r.get("run_id") or "").strip()]


def _flag(v: str, name: str) -> bool:
    key = (v or "").strip().lower()
    if key not in _TRUE:
        raise GpusimError(f"{name} {v!r} is not True or False")
    return _TRUE[key]


def predict_row(r: dict, *, db=None, params=None) -> FsdpRow:
    """Predict one benchmark row at its stated layout (module docstring). Never raises for a bad row: the row comes
    back with ``error`` set and no prediction."""
    from gpusim.scenario import Scenario
    from gpusim.simulation import simulate
    from gpusim.workload import get_workload

    out = FsdpRow(run_id=r.get("run_id", ""), source_id=r.get("source_id", ""),
                  holdout=str(r.get("holdout", "")).strip() == "1", model=r.get("model", ""), gpu=r.get("gpu", ""),
                  precision=(r.get("precision") or "").strip(), gpus=0, seq_len=0, layout="",
                  measured_mfu_frac=math.nan)
    try:
        gpus, seq = int(r["gpus"]), int(r["seq_len"])
        mb, accum, gb = int(r["micro_batch"]), int(r["grad_accum"]), int(r["global_batch"])
        out.gpus, out.seq_len = gpus, seq
        out.measured_mfu_frac = float(r["measured_mfu"]) / 100.0  # printed in percent
        tokens_per_s = float(r["measured_tokens_per_s"])
        n_params = float(r["num_params"])
    except (KeyError, ValueError) as e:
        out.error = f"gpus, seq_len, micro_batch, grad_accum, global_batch, measured_mfu, measured_tokens_per_s and " \
                    f"num_params must be numbers ({e})"
        return out
    try:
        ac = _flag(r.get("activation_checkpointing", ""), "activation_checkpointing")
        offload = _flag(r.get("cpu_offload", ""), "cpu_offload")
        sharding = (r.get("sharding") or "").strip().upper()
        if sharding not in SHARDING:
            raise GpusimError(f"sharding {sharding!r} is not one of {', '.join(SHARDING)}")
        if out.precision not in PRECISION:
            raise GpusimError(f"precision {out.precision!r} is not one of {', '.join(PRECISION)}")
        peak = GPU_AVAILABLE_FLOPS.get(out.gpu, {}).get(out.precision)
        if peak is None:
            raise GpusimError(f"no Composer GPU_AVAILABLE_FLOPS entry for {out.gpu!r} {out.precision!r}")
        attention = (r.get("attention") or "").strip() or None  # [issue 18] the run's attention kernel
        if attention not in ATTENTION:
            raise GpusimError(f"attention {attention!r} is not one of {', '.join(a for a in ATTENTION if a)}")
        if mb * accum * gpus != gb:
            raise GpusimError(f"micro_batch {mb} x grad_accum {accum} x gpus {gpus} is not global_batch {gb}")
    except GpusimError as e:
        out.error = str(e)
        return out
    prec, extra = PRECISION[out.precision]
    out.layout = f"{SHARDING[sharding]} mb {mb} x {accum} = {gb}" + (" rc full" if ac else "") + (f" attn {attention}" if attention else "")
    out.measured_step_s = gb * seq / tokens_per_s if tokens_per_s > 0 else None
    try:
        wl = get_workload(r["model"], seq_len=seq)
        spec = wl.transformer
        node = r["node"].strip()
        per_node = (db.node(node).gpus_per_node if db is not None else None)
        if per_node is None:
            from gpusim.hwdb import load

            db = load()
            per_node = db.node(node).gpus_per_node
        base = dict(workload=wl, node=node, gpus=gpus, nodes=max(1, gpus // per_node), kind=SHARDING[sharding],
                    precision=prec, micro_batch=mb, global_batch=gb, seq_len=seq,
                    recompute="full" if ac else "none", cpu_offload=offload, attention=attention, **extra)
        if (r.get("inter") or "").strip():
            base["inter"] = r["inter"].strip()
        if (r.get("nics_per_node") or "").strip():
            base["nics_per_node"] = int(r["nics_per_node"])
        res = simulate(Scenario.create(**base), db=db, params=params, recommend=False)
    except (GpusimError, KeyError, ValueError) as e:
        out.error = str(e)
        return out
    out.step_s = float(res.step_s)
    out.fits_in_memory = bool(res.fits_in_memory)
    out.gpusim_mfu_frac = float(res.mfu_frac)
    out.breakdown_s = {k: float(v) for k, v in res.breakdown_s.items()}
    out.dominant = max(out.breakdown_s, key=out.breakdown_s.get) if out.breakdown_s else ""
    out.mfu_frac = llmfoundry_mfu(n_params, spec.n_layers, spec.d_model, seq, gb / out.step_s, gpus, peak)
    return out


def run(path=None, *, db=None, params=None) -> list[FsdpRow]:
    """Every row of ``runs_fsdp.csv`` (or ``path``) predicted; a bad row comes back with ``error`` set."""
    from gpusim.hwdb import load

    rows = load_rows(path)
    db = db or load()
    return [predict_row(r, db=db, params=params(r.get("gpu")) if callable(params) else params) for r in rows]


def stats(rows: list[FsdpRow], constant_mfu_frac: float | None) -> dict:
    """MFU and step errors of ``rows`` (absolute relative: median, p90; signed median) and the constant predictor's
    MFU errors on the same rows."""
    pred = [r for r in rows if r.mfu_signed_frac is not None]
    mfu = [abs(r.mfu_signed_frac) for r in pred]
    step = [abs(r.step_signed_frac) for r in pred if r.step_signed_frac is not None]
    const = ([abs(constant_mfu_frac / r.measured_mfu_frac - 1.0) for r in rows if r.measured_mfu_frac > 0]
             if constant_mfu_frac is not None else [])

    def q(xs, level):
        return quantile(xs, level, empty=None)

    return {"rows": len(rows), "predicted": len(pred),
            "mfu_median_ape": q(mfu, 0.5), "mfu_p90_ape": q(mfu, 0.9),
            "mfu_median_signed": q([r.mfu_signed_frac for r in pred], 0.5),
            "step_median_ape": q(step, 0.5), "step_p90_ape": q(step, 0.9),
            "constant_median_ape": q(const, 0.5), "constant_p90_ape": q(const, 0.9),
            "beats_constant": None if not mfu or not const else q(mfu, 0.5) < q(const, 0.5)}


def summarize(results: list[FsdpRow]) -> dict:
    """``{"constant_mfu_frac", "open": {group: stats}, "holdout": {group: stats}, "errors": [run_id, ...]}``, group
    ``all`` and one per ``"<gpu> <precision>"``. The constant is the open rows' median measured MFU."""
    open_rows = [r for r in results if not r.holdout]
    const = quantile([r.measured_mfu_frac for r in open_rows if r.measured_mfu_frac > 0], 0.5, empty=None)
    out: dict = {"constant_mfu_frac": const, "errors": [r.run_id for r in results if r.error]}
    for part, sel in (("open", lambda r: not r.holdout), ("holdout", lambda r: r.holdout)):
        rows = [r for r in results if sel(r)]
        d = {"all": stats(rows, const)}
        for g in sorted({r.group for r in rows}):
            d[g] = stats([r for r in rows if r.group == g], const)
        out[part] = d
    return out


#: what a held-out row keeps hidden unless asked for (its measurement, its prediction and their errors)
HIDDEN_FIELDS = ("measured_mfu_frac", "measured_step_s", "step_s", "mfu_frac", "gpusim_mfu_frac", "breakdown_s",
                 "dominant", "mfu_signed_frac", "step_signed_frac")


def to_dicts(results: list[FsdpRow], holdout_rows: bool = False) -> list[dict]:
    """Every row as a dict; a held-out row's measurement, prediction and errors are None (``"hidden": true``) unless
    ``holdout_rows``: whoever models against this table must not read them (the summary carries their errors)."""
    out = []
    for r in results:
        d = {**asdict(r), "mfu_signed_frac": r.mfu_signed_frac, "step_signed_frac": r.step_signed_frac}
        if r.holdout and not holdout_rows:
            d.update(dict.fromkeys(HIDDEN_FIELDS), hidden=True)
        out.append(d)
    return out


def print_section(results: list[FsdpRow], print_table, fmt_pct) -> None:
    """The ``gpusim validate`` section: MFU and step errors per GPU and precision, open and held-out rows apart,
    beside the constant predictor (held-out rows as a summary only)."""
    if not results:
        return
    s = summarize(results)
    rows = []
    for part in ("open", "holdout"):
        for g, st in s[part].items():
            if not st["rows"]:
                continue
            rows.append([part if part == "open" else "held-out", g, f"{st['predicted']}/{st['rows']}",
                         fmt_pct(st["mfu_median_ape"]), fmt_pct(st["mfu_p90_ape"]),
                         "-" if st["mfu_median_signed"] is None else f"{st['mfu_median_signed']:+.1%}",
                         fmt_pct(st["step_median_ape"]), fmt_pct(st["constant_median_ape"]),
                         fmt_pct(st["constant_p90_ape"])])
    print_table(rows, ["rows", "GPU precision", "predicted", "MFU median", "MFU p90", "MFU signed", "step median",
                       "const median", "const p90"],
                title="FSDP MFU on llm-foundry's MPT benchmark tables (validation/runs_fsdp.csv; llm-foundry's MFU "
                      "formula and Composer's peaks; signed > 0: predicted faster)",
                justify=["left", "left", "right", "right", "right", "right", "right", "right", "right"])
    const = s["constant_mfu_frac"]
    print(f"  constant predictor: the open rows' median measured MFU, {fmt_pct(const)}")
    if s["errors"]:
        print(f"  not predicted: {', '.join(s['errors'])}")
