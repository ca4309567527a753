"""The typed answers of the commands, shared by the CLI and the Python API (:mod:`gpusim.api`).

Each command builds one of these and prints ``to_dict()`` for ``--json``, so ``gpusim.<command>(...).to_dict()``
equals the command's JSON by construction (non-finite floats are ``None`` in both, as JSON has no NaN).
Results that are tables have ``to_frame()``: a pandas DataFrame with decoded labels (``"selective"``, not ``1``).

Names: inputs are named as the flags (``gpus``, ``nodes``: what you ask for); results count what they
describe as ``n_gpus`` and ``n_nodes`` (``StepResult``, the scaling rows, the layout rows, the plan rows);
throughput of tokens is ``tokens_per_s`` everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


def jsonable(obj: Any) -> Any:
    """``obj`` as the CLI prints it as JSON: numpy scalars and arrays as Python values, non-finite floats as None,
    tuples as lists, dates as ISO text, pydantic models as their JSON dump."""
    import datetime as dt
    import math

    import numpy as np

    if isinstance(obj, np.ndarray):
        return [jsonable(x) for x in obj.tolist()]
    if isinstance(obj, np.generic):
        obj = obj.item()
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, (dt.date, dt.datetime)):
        return obj.isoformat()
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(x) for x in obj]
    if hasattr(obj, "model_dump"):
        return jsonable(obj.model_dump(mode="json"))
    return obj


def _frame(rows: list[dict]):
    import pandas as pd

    return pd.DataFrame(rows)


@dataclass(frozen=True)
class PredictResult:
    """``gpusim predict``: the :class:`~gpusim.simulation.StepResult` (its fields are readable here directly:
    ``r.step_s``, ``r.tokens_per_s_per_gpu``), with the calibration's interval and the measured-vs-predicted
    explanation when asked for, and the track record of such predictions on published runs (``track_record``:
    :class:`gpusim.track_record.Band` as a dict, with the band's ``key``; None where gpusim's validation tables
    hold no run of this kind)."""

    step: Any
    interval: dict | None = None
    measured_vs_predicted: dict | None = None
    calibration_file: str | None = None
    track_record: dict | None = None  # how far such predictions were from published runs (gpusim.track_record)
    # [stop 55] an LLM layout's memory against the published peaks (gpusim.track_record.memory_record)
    memory_record: dict | None = None

    def __getattr__(self, name: str):
        if name == "step":  # (not set yet: unpickling)
            raise AttributeError(name)
        return getattr(self.step, name)

    def to_dict(self) -> dict:
        d = self.step.to_dict()
        if self.interval:
            d["interval"] = self.interval
        if self.measured_vs_predicted:
            d["measured_vs_predicted"] = self.measured_vs_predicted
        if self.calibration_file:  # with `scenario`, enough to replay this prediction (`gpusim compare FILE ...`)
            d["calibration_file"] = self.calibration_file
        if self.track_record:
            d["track_record"] = self.track_record
        if self.memory_record:
            d["memory_record"] = self.memory_record
        return jsonable(d)


@dataclass(frozen=True)
class ScaleResult:
    """``gpusim scale``: one row per GPU count (``n_gpus``, ``n_nodes``, ``per_gpu_batch``, ``global_batch``,
    ``step_s``, ``throughput_samples_per_s``, ``speedup``, ``scaling_efficiency_frac``, ``fits_in_memory``,
    ``bottleneck`` and the breakdown), and the counts left out with why (``skipped``: ``(n_gpus, reason)``)."""

    mode: str
    rows: list[dict]
    skipped: list = field(default_factory=list)

    def to_dict(self) -> list[dict]:
        """The rows, as ``gpusim scale --json`` prints them (a JSON list)."""
        return jsonable(self.rows)

    def to_frame(self):
        return _frame(self.to_dict())


@dataclass(frozen=True)
class SweepResult:
    """``gpusim sweep``: every layout of the job, best first (``layouts``: dicts with decoded ``recompute``
    and the ``reason`` an infeasible one breaks), the best (None when nothing is feasible, and ``explanation``
    says why), counts and the search time."""

    best: dict | None
    explanation: str
    layouts: list[dict]
    n_layouts: int
    n_feasible: int
    elapsed_s: float
    global_batch: int | None = None
    versus_defaults: str = ""  # [issue 17] how the best differs from Megatron-LM's defaults and why
    track_record: dict | None = None  # the best layout's kind on published runs (track_record.record_for; its range
    # throughput_range_tokens_per_s is of all GPUs together)
    # [issue 17] the layout search's best against published tuned recipes of its kind (track_record's "layout-search"
    # band for a dense transformer, "layout-search-moe" for an MoE one, none for a hybrid; its range mfu_range_frac is
    # the best layout's MFU carried to where 80% of them landed)
    search_record: dict | None = None
    # [issue 17] predict's advice for the best layout on the settings the search ran as given: FP8 training, and
    # Megatron-Core's MoE software settings for an MoE model (simulation.software_advice: dicts of id, message,
    # gain_frac, change); empty when they add nothing
    software_advice: tuple = ()
    # [stop 55] the best layout's memory against the published peaks (gpusim.track_record.memory_record)
    memory_record: dict | None = None
    # [stop 56] where the top of that record's range passes the GPU's memory: the fastest layout whose top still
    # fits, how much slower (gpusim.track_record.memory_record_fit); None where the best's top fits
    memory_record_fit: dict | None = None

    @property
    def feasible(self) -> bool:
        return self.best is not None

    def to_dict(self) -> dict:
        return jsonable({"best": self.best, "explanation": self.explanation, "versus_defaults": self.versus_defaults,
                         **({"track_record": self.track_record} if self.track_record else {}),
                         **({"search_record": self.search_record} if self.search_record else {}),
                         **({"memory_record": self.memory_record} if self.memory_record else {}),
                         **({"memory_record_fit": self.memory_record_fit} if self.memory_record_fit else {}),
                         **({"software_advice": list(self.software_advice)} if self.software_advice else {}),
                         "layouts": self.layouts,
                         "n_layouts": self.n_layouts, "n_feasible": self.n_feasible, "global_batch": self.global_batch,
                         "elapsed_s": self.elapsed_s})

    def to_frame(self):
        return _frame(jsonable(self.layouts))


@dataclass(frozen=True)
class PlanAnswer:
    """``gpusim plan``: the :class:`~gpusim.planning.PlanResult` (``recommendation``, ``table``, ``pareto``, ...
    readable here directly) as the command prints it (``every``: every configuration, as ``--all``)."""

    plan: Any
    every: bool = False
    interval: dict | None = None
    track_record: dict | None = None  # the recommended configuration's kind on published runs (track_record)
    # [issue 17] predict's advice for the recommended layout on the settings the plan ranked under as given: FP8
    # training, Megatron-Core's MoE software settings (planning.recommendation_software_advice); empty when none
    software_advice: tuple = ()
    # [stop 56] the recommended layout's memory against the published peaks (planning.recommendation_memory_record);
    # None unless the recommendation is an LLM layout
    memory_record: dict | None = None
    # [stop 56] where the top of that record's range passes the GPU's memory: the fastest layout on the recommended
    # hardware whose top still fits, its slowdown against the recommended layout (planning.recommendation_memory_fit)
    memory_record_fit: dict | None = None

    def __getattr__(self, name: str):
        if name == "plan":
            raise AttributeError(name)
        return getattr(self.plan, name)

    def to_dict(self) -> dict:
        d = self.plan.to_dict(every=self.every)
        if self.interval:
            d["recommendation"] = {**d["recommendation"], "time_to_train_interval_s": self.interval}
        if self.track_record:
            d["track_record"] = self.track_record
        if self.software_advice:
            d["recommendation"] = {**d["recommendation"], "software_advice": list(self.software_advice)}
        if self.memory_record:
            d["memory_record"] = self.memory_record
        if self.memory_record_fit:
            d["memory_record_fit"] = self.memory_record_fit
        return jsonable(d)

    def to_frame(self):
        """The configurations (best per hardware and node count; every one with ``every``), the JSON's columns
        first (:data:`gpusim.planning.CONFIG_COLUMNS`)."""
        from gpusim.planning import CONFIG_COLUMNS

        df = self.plan.configurations(every=self.every)
        cols = [c for c in CONFIG_COLUMNS if c in df.columns]
        return df[cols + [c for c in df.columns if c not in cols]].reset_index(drop=True)


@dataclass(frozen=True)
class CompareResult:
    """``gpusim compare``: ``names``, ``results`` (each scenario's ``StepResult.to_dict()``), ``inputs``,
    ``differs`` and ``gaps`` (each scenario's gap to the first, attributed one change at a time)."""

    data: dict

    def __getattr__(self, name: str):
        if name == "data":
            raise AttributeError(name)
        try:
            return self.data[name]
        except KeyError:
            raise AttributeError(name) from None

    def to_dict(self) -> dict:
        return jsonable(self.data)

    def to_frame(self):
        """The figures side by side: one row per scenario."""
        from gpusim.comparison import figures_for

        rows = []
        for name, r in zip(self.data["names"], self.data["results"]):
            rows.append({"name": name, **{key: r.get(key) for key, *_ in figures_for(self.data["results"])}})
        return _frame(rows)


@dataclass(frozen=True)
class CommResult:
    """``gpusim comm``: one row per message size (``bytes``, ``time_s``, ``algbw_bytes_per_s``,
    ``busbw_bytes_per_s``, ``algorithm``, ``protocol``, ``n_ranks``, ``n_nodes``, paths; with ``--measured``
    the measured bus bandwidth and the error), and the track record of the collectives model on published sweeps
    (``track_record``, :class:`gpusim.track_record.Band` as a dict; printed under the table, not part of
    ``to_dict()``, which keeps the command's JSON shape)."""

    rows: list[dict]
    track_record: dict | None = None

    def to_dict(self) -> dict | list[dict]:
        """As ``gpusim comm --json``: one object for one size, a list for several."""
        return jsonable(self.rows if len(self.rows) > 1 else self.rows[0])

    def to_frame(self):
        return _frame(jsonable(self.rows))
