"""The model's track record: how far its predictions were from published measurements of runs like the one predicted.

A prediction is a number; a buyer also needs to know how far such numbers have been from real runs. ``gpusim
validate`` measures that per table (``validation/``); this module turns those tables into one *band* per kind of
prediction, and picks the band a prediction belongs to, so that ``gpusim predict``, ``sweep`` (its best layout),
``plan`` (its recommendation) and ``comm``, the Python API and the planner's pages print it under the number:

    track record: published MoE training runs with their stated layouts (runs on 6 GPU models): 91 measurements,
    median step time error 15.6%, p90 37.9%; the 30 held out of tuning: median 13.5%, p90 40.9%; measured a median
    14.9% slower than predicted, slower in 79% of them; 80% of the 30 held-out runs measured 0.59x to 1.08x the
    predicted speed (here: ...)

The bands (:data:`BAND_KEYS`) and the validation rows behind each:

- ``llm-moe``, ``llm-dense-bf16``, ``llm-dense-fp8``, ``llm-dense-bf16-blackwell``, ``llm-dense-fp8-blackwell``,
  ``llm-dense-nvfp4-blackwell`` [issue 17]:
  step time of the published training runs with their stated layouts (``validation/runs_*.csv``,
  :mod:`gpusim.validation_runs`, its regimes);
- ``llm-hybrid`` [issue 17]: step time of the published hybrid Mamba-Transformer runs with their stated layouts, the
  later releases' Nemotron 3 Nano and Super rows (``validation/later_releases.csv``, the ``hybrid`` regime: no curated table
  holds a hybrid run), the band a hybrid model's prediction gets whatever else it is (its MoE layers included);
- ``fsdp``: MFU of llm-foundry's published FSDP benchmark tables (:mod:`gpusim.validation_fsdp`);
- ``data-parallel``: throughput of the published multi-GPU data-parallel runs from the datasheet
  (``validation/measurements.csv``, :mod:`gpusim.validation`), ``data-parallel-anchored`` the same rows with the
  one-GPU throughput given (``--baseline-throughput``), ``single-gpu`` the one-GPU rows from the datasheet;
- ``collectives``: bus bandwidth of the published all-reduce and all-to-all sweeps of many systems, sizes from
  32 KiB (``validation/nccl_sweeps.csv``, :mod:`gpusim.validation_comm`);
- ``layout-search`` [issue 17]: what ``gpusim sweep`` promises: the MFU of the layout search's best layout for a
  published vendor-tuned dense recipe's GPUs, global batch, sequence and software, against the MFU the recipe
  measured with its own layout (``validation/runs_dense.csv`` and ``later_releases.csv``,
  :mod:`gpusim.validation_search`; the ratio ``gpusim validate`` reports, as measured speed / predicted speed).
  ``sweep`` prints it under a dense best layout beside the step-time band (``SweepResult.search_record``).
  ``layout-search-moe`` the same for the published MoE recipes (``validation/runs_moe.csv`` and the later releases'
  MoE rows, the expert-parallel degree searched too), under an MoE best layout; its ratio carries the MoE step-time
  error (``llm-moe``) as well as the search's own choice.
- ``what-if`` [stop 47]: what ``gpusim compare`` says a change of software settings at one layout is worth: the
  speed-up of the published A/B pairs (:mod:`gpusim.validation_ab`: two runs of one source and stated layout whose
  settings differ, and the comparisons published as two figures), as measured ratio / predicted ratio. ``compare``
  prints it under an LLM comparison that changes settings only (:func:`what_if_fields`).
- ``llm-memory`` [stop 55]: peak memory of the published runs with their stated layouts (PyTorch's peak allocated
  GiB on the fullest GPU, ``validation/runs_memory.csv``, :mod:`gpusim.validation_runs`), as measured / predicted
  memory (not a speed: :meth:`Band.line` words it as more or less memory, :meth:`Band.memory_range` carries it to a
  prediction). ``predict`` and ``sweep`` print it under an LLM layout's memory (``memory_record``), so a layout that
  fits with a few GiB to spare is read against how far such figures have been from real peaks.
- ``gpu-swap`` [stop 54]: what ``gpusim compare`` says moving one LLM layout to another GPU is worth: the speed-up of
  the published runs of one source at one layout on two GPUs (:func:`gpusim.validation_ab.gpu_swaps`), as measured
  ratio / predicted ratio. ``compare`` prints it under an LLM comparison that changes the GPU (or its node) only.

Each band holds every row of its table, open and held out together (how many were held out of tuning is stated,
with their own median and p90), the median and 90th percentile of the absolute error as the table defines it (step
time, throughput, MFU, bus bandwidth: the figures ``gpusim validate`` prints), and signed figures in a single
convention whatever the table, the ratio measured speed / predicted speed: its median less one
(``real_vs_predicted_speed_frac``; negative: real runs were slower than predicted), the share of rows that were
slower, and its 10th and 90th percentiles, the range 80% of the runs landed in, which the reports carry to the
prediction's own numbers (``speed_range``, ``time_range``, ``time_to_train_range``): from the held-out runs where at
least :data:`MIN_ROWS_FOR_RANGE` were held out, else from all of them (said so), and only where the band has that
many. The range is empirical (the model's misses on published runs of the kind, not a confidence interval of its
parameters: a calibration's interval is that), and it is the default model's: a calibrated prediction gets the band
without a range. Each band says what it covers (the GPUs or systems of its rows), and the data-parallel and one-GPU
bands that no run was held out of say that the model's defaults were chosen with them in view.

The bands live in a file of the package (:data:`BANDS_PATH`), written by ``make track-record`` (``python -m
gpusim.track_record --write``) from the validation tables of a checkout; a test recomputes them and fails when the
file no longer matches the model or the tables. This is a report, not a correction: no prediction is moved by its
band.
"""

from __future__ import annotations

import json
import math
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from gpusim.stats import quantile

#: the packaged bands (written by :func:`write`; read by :func:`load`)
BANDS_PATH = Path(__file__).with_name("data") / "track_record.json"

#: the bands in the order ``gpusim validate``'s tables come, with what each covers (the label a report prints)
BAND_KEYS: dict[str, str] = {
    "llm-moe": "published MoE training runs with their stated layouts",
    "llm-hybrid": "published hybrid Mamba-Transformer training runs with their stated layouts (Nemotron 3 Nano and Super)",
    "llm-dense-bf16": "published dense BF16 training runs with their stated layouts, not on Blackwell",
    "llm-dense-fp8": "published dense FP8 training runs with their stated layouts, not on Blackwell",
    "llm-dense-bf16-blackwell": "published dense BF16 training runs with their stated layouts on Blackwell",
    "llm-dense-fp8-blackwell": "published dense FP8 / MXFP8 training runs with their stated layouts on Blackwell",
    "llm-dense-nvfp4-blackwell": "published dense NVFP4 training runs with their stated layouts on Blackwell",
    "fsdp": "published FSDP (FULL_SHARD) benchmark runs (llm-foundry's tables)",
    "data-parallel": "published multi-GPU data-parallel runs, from the datasheet",
    "data-parallel-anchored": "published multi-GPU data-parallel runs, with their one-GPU throughput given",
    "single-gpu": "published one-GPU training runs, from the datasheet",
    "collectives": "published all-reduce and all-to-all sweeps across systems, sizes from 32 KiB",
    "layout-search": ("published vendor-tuned dense recipes against the layout search's best layout at their GPUs, "
                      "global batch and sequence"),
    "layout-search-moe": ("published vendor-tuned MoE recipes against the layout search's best layout at their GPUs, "
                          "global batch, sequence and MoE software"),
    "what-if": ("published A/B comparisons of software settings (two runs of one source and layout, one or two "
                "settings changed)"),
    "gpu-swap": "published runs of one source at one layout on two GPUs (the faster GPU's speed-up)",
    "llm-memory": "published peak memory of LLM training runs with their stated layouts (PyTorch's peak allocated)",
}
#: what each band's absolute error is measured on
QUANTITY = {"llm-moe": "step time", "llm-hybrid": "step time", "llm-dense-bf16": "step time",
            "llm-dense-fp8": "step time",
            "llm-dense-bf16-blackwell": "step time", "llm-dense-fp8-blackwell": "step time",
            "llm-dense-nvfp4-blackwell": "step time", "fsdp": "MFU",
            "data-parallel": "throughput", "data-parallel-anchored": "throughput", "single-gpu": "throughput",
            "collectives": "bus bandwidth", "layout-search": "MFU", "layout-search-moe": "MFU", "what-if": "speed-up",
            "gpu-swap": "speed-up", "llm-memory": "peak memory"}
#: [stop 55] the bands whose ratio is measured / predicted memory, not a speed (:meth:`Band.line`)
MEMORY_BANDS = ("llm-memory",)
#: bands whose table holds no held-out row and whose rows the model's defaults were chosen with in view (README,
#: Accuracy: "partly in-sample")
IN_SAMPLE = ("data-parallel", "data-parallel-anchored", "single-gpu")
#: precisions whose GEMMs run in FP8 (the published runs' dense-fp8 regimes)
_FP8 = ("fp8", "mxfp8")
#: strategy kinds of llm-foundry's FSDP tables (FULL_SHARD, gpusim.validation_fsdp.SHARDING) and the same sharding
#: of parameters, gradients and optimizer states by other names (ZeRO-3; HYBRID_SHARD inside each node)
_SHARDED = ("fsdp-full", "fsdp-hybrid", "zero3")
#: the fewest runs a band needs before a report carries its 10th-90th percentile range to a prediction (four runs
#: have no meaningful percentiles)
MIN_ROWS_FOR_RANGE = 10
#: the digits a band's fractions are stored with (a tenth of a percent: what the reports print)
_DIGITS = 4
#: what a report says where no band applies (:func:`none_reason`)
NO_RUNS = "none: gpusim's validation tables hold no published run of this kind"
MEASURED = "none needed: this prediction is your own measured one-GPU throughput"
UNAVAILABLE = ("unavailable: the packaged track record (gpusim/data/track_record.json) could not be read; reinstall "
               "gpusim, or run `make track-record` in a checkout")


@dataclass(frozen=True)
class Band:
    """One kind of prediction's track record (fractions, not percent)."""

    key: str
    label: str
    quantity: str
    coverage: str  # what the rows are ("runs on h100-sxm", "sweeps of 19 systems")
    rows: int
    median_abs_frac: float
    p90_abs_frac: float
    real_vs_predicted_speed_frac: float  # median of measured speed / predicted speed - 1 (< 0: real runs slower)
    slower_frac: float  # share of the rows whose real run was slower than predicted
    speed_ratio_p10: float  # 10th percentile of measured speed / predicted speed (of range_rows rows)
    speed_ratio_p90: float  # 90th percentile of the same: 80% of those rows lie between the two
    range_rows: int  # the rows the range is taken from: the held-out ones where enough, else all
    range_held_out: bool
    held_out_rows: int
    held_out_median_abs_frac: float | None
    held_out_p90_abs_frac: float | None
    source: str

    @property
    def has_range(self) -> bool:
        """Whether the range has enough runs behind it (:data:`MIN_ROWS_FOR_RANGE`) to be carried to a prediction."""
        return self.range_rows >= MIN_ROWS_FOR_RANGE

    def line(self, *, with_range: bool = True) -> str:
        """One sentence for a report (``gpusim predict``'s "track record" line)."""
        if self.held_out_rows:
            held = (f"; the {self.held_out_rows} held out of tuning: median {self.held_out_median_abs_frac:.1%}, "
                    f"p90 {self.held_out_p90_abs_frac:.1%}")
        elif self.key in IN_SAMPLE:
            held = "; none held out: the model's defaults were chosen with these rows in view"
        else:
            held = "; none held out"
        d = self.real_vs_predicted_speed_frac
        if self.key in MEMORY_BANDS:  # [stop 55] the ratio is measured / predicted memory
            sign = f"{abs(d):.1%} {'less' if d < 0 else 'more'} memory than predicted, more in " \
                   f"{1.0 - self.slower_frac:.0%} of them"
        else:
            sign = f"{abs(d):.1%} {'slower' if d < 0 else 'faster'} than predicted, slower in {self.slower_frac:.0%} " \
                   f"of them"
        out = (f"{self.label} ({self.coverage}): {self.rows} measurements, median {self.quantity} error "
               f"{self.median_abs_frac:.1%}, p90 {self.p90_abs_frac:.1%}{held}; measured a median {sign}")
        if with_range:
            out += "; " + (self.range_text() if self.has_range else "too few runs for an 80% range")
        return out

    def range_text(self) -> str:
        """The 80% range as ratios of the prediction ("80% of the 21 held-out runs measured 0.62x to 1.08x ...")."""
        which = f"the {self.range_rows} held-out runs" if self.range_held_out else "them"
        what = "peak memory" if self.key in MEMORY_BANDS else "speed"
        return (f"80% of {which} measured {self.speed_ratio_p10:.2f}x to {self.speed_ratio_p90:.2f}x the predicted "
                f"{what}")

    def to_dict(self) -> dict:
        return asdict(self)

    def record(self, *, calibrated: bool = False, **ranges: tuple[float, float]) -> dict:
        """What a result carries (``track_record`` of predict, sweep and plan): the band, whether the prediction was
        calibrated, and the ``ranges`` given (name -> (lo, hi), the 80% range carried to the prediction's numbers)
        where the band has a range and the prediction is the default model's."""
        out = {**self.to_dict(), "calibrated": bool(calibrated)}
        if self.has_range and not calibrated:
            out.update({k: [float(lo), float(hi)] for k, (lo, hi) in ranges.items()})
        return out

    def speed_range(self, speed: float) -> tuple[float, float]:
        """Where 80% of the published runs of this kind landed, carried to a predicted speed (a throughput, tokens
        per second, MFU): ``(speed x p10, speed x p90)`` of measured / predicted speed."""
        return speed * self.speed_ratio_p10, speed * self.speed_ratio_p90

    def memory_range(self, memory_bytes: float) -> tuple[float, float]:
        """[stop 55] Where 80% of the published peaks landed, carried to a predicted memory (a band of
        :data:`MEMORY_BANDS`, whose ratio is measured / predicted memory): ``(bytes x p10, bytes x p90)``."""
        return memory_bytes * self.speed_ratio_p10, memory_bytes * self.speed_ratio_p90

    def time_range(self, time_s: float) -> tuple[float, float]:
        """The same for a predicted time (a step, a training run): ``(time / p90, time / p10)``."""
        return time_s / self.speed_ratio_p90, time_s / self.speed_ratio_p10

    def time_to_train_range(self, time_to_train_s: float, train_s: float) -> tuple[float, float]:
        """A plan's time to train with only its training steps (``train_s`` of it) carried to the 80% range:
        checkpoints, evaluation and restarts keep their modelled time (as the calibration's interval does)."""
        lo, hi = self.time_range(train_s)
        rest = time_to_train_s - train_s
        return rest + lo, rest + hi


def _coverage(names: list[str], lead: str = "runs on", what: str = "GPU models") -> str:
    """``'runs on h100-sxm, h800-sxm'`` for up to three distinct names, ``'runs on 9 GPU models'`` beyond."""
    distinct = sorted(set(names))
    return f"{lead} {', '.join(distinct)}" if len(distinct) <= 3 else f"{lead} {len(distinct)} {what}"


def _band(key: str, rows: list[tuple[float, float, bool]], source: str, coverage: str = "") -> Band | None:
    """A band from ``(abs_error_frac, measured_speed / predicted_speed, held_out)`` per row (rows whose ratio is not
    a finite positive number are left out); None without rows."""
    rows = [x for x in rows if math.isfinite(x[1]) and x[1] > 0 and math.isfinite(x[0])]
    if not rows:
        return None
    errs = [e for e, _, _ in rows]
    ratios = [r for _, r, _ in rows]
    held = [e for e, _, h in rows if h]
    held_ratios = [r for _, r, h in rows if h]
    from_held = len(held_ratios) >= MIN_ROWS_FOR_RANGE
    span = held_ratios if from_held else ratios
    r = lambda x: None if x is None else round(float(x), _DIGITS)  # noqa: E731
    return Band(key=key, label=BAND_KEYS[key], quantity=QUANTITY[key], coverage=coverage, rows=len(rows),
                median_abs_frac=r(quantile(errs, 0.5)), p90_abs_frac=r(quantile(errs, 0.9)),
                real_vs_predicted_speed_frac=r(quantile(ratios, 0.5) - 1.0),
                slower_frac=r(sum(1 for x in ratios if x < 1.0) / len(ratios)),
                speed_ratio_p10=r(quantile(span, 0.1)), speed_ratio_p90=r(quantile(span, 0.9)),
                range_rows=len(span), range_held_out=from_held, held_out_rows=len(held),
                held_out_median_abs_frac=r(quantile(held, 0.5)) if held else None,
                held_out_p90_abs_frac=r(quantile(held, 0.9)) if held else None, source=source)


def _ratio(num, den) -> float:
    return float(num) / float(den) if den else math.nan


def compute(db=None, *, dp=None, runs=None, fsdp=None, sweeps=None, searched=None,
            searched_moe=None, later=None, ab=None, swaps=None) -> dict[str, Band]:
    """Every band from the validation tables of this checkout (the model's defaults, no calibration): what
    ``gpusim validate`` measures, row by row. ``dp``, ``runs``, ``fsdp``, ``sweeps``: the results of
    :func:`gpusim.validation.run`, :func:`gpusim.validation_runs.run`, :func:`gpusim.validation_fsdp.run` and
    :func:`gpusim.validation_comm.run` on the default tables where the caller has them already (``gpusim validate``),
    ``searched`` :func:`gpusim.validation_search.run` over the curated dense runs and the later releases together,
    ``searched_moe`` [issue 17] the same over the MoE runs and the later releases' MoE rows, ``later`` [issue 17]
    :func:`gpusim.validation_runs.run` over the later releases (their hybrid rows), ``ab`` [stop 47] the A/B pairs
    (:func:`gpusim.validation_ab.run` over both and the published pairs), ``swaps`` [stop 54] the GPU swaps
    (:func:`gpusim.validation_ab.gpu_swaps` over both); None computes them.
    Bands whose table is missing (an installed package without the ``validation/`` folder) are left out."""
    from gpusim import validation as V
    from gpusim import validation_comm as VC
    from gpusim import validation_fsdp as VF
    from gpusim import validation_runs as VR
    from gpusim.hwdb import load

    db = db or load()
    out: dict[str, Band] = {}

    def put(band: Band | None) -> None:
        if band is not None:
            out[band.key] = band

    if runs is None:
        runs = VR.run(db=db) if VR.default_paths() else []
    if later is None:  # [issue 17] the later releases: their hybrid rows are the only hybrid runs
        path = VR.later_releases_path()
        later = VR.run([path], db=db) if path else []
    for key, rows, source in (("llm-moe", runs, "validation/runs_*.csv"),
                              ("llm-hybrid", later, "validation/later_releases.csv"),
                              ("llm-dense-bf16", runs, "validation/runs_*.csv"),
                              ("llm-dense-fp8", runs, "validation/runs_*.csv"),
                              ("llm-dense-bf16-blackwell", runs, "validation/runs_*.csv"),
                              ("llm-dense-fp8-blackwell", runs, "validation/runs_*.csv"),
                              ("llm-dense-nvfp4-blackwell", runs, "validation/runs_*.csv")):
        regime = key.removeprefix("llm-")
        sel = [r for r in rows if regime in r.regimes and not r.is_memory and r.signed_frac is not None]
        # step time: speed ratio = predicted step / measured step
        put(_band(key, [(r.ape, 1.0 + r.signed_frac, r.holdout) for r in sel], f"{source} (gpusim.validation_runs)",
                  _coverage([r.gpu for r in sel])))

    # [stop 55] peak memory: ratio = measured / predicted memory
    mem = [r for r in runs if r.is_memory and r.signed_frac is not None]
    put(_band("llm-memory", [(r.ape, _ratio(1.0, 1.0 + r.signed_frac), r.holdout) for r in mem],
              "validation/runs_memory.csv (gpusim.validation_runs)", _coverage([r.gpu for r in mem])))

    if fsdp is None:
        fsdp_csv = VF.default_csv()
        fsdp = VF.run(fsdp_csv, db=db) if fsdp_csv and Path(fsdp_csv).is_file() else []
    sel = [r for r in fsdp if r.mfu_signed_frac is not None]
    # MFU: speed ratio = measured MFU / predicted MFU
    put(_band("fsdp", [(abs(r.mfu_signed_frac), _ratio(1.0, 1.0 + r.mfu_signed_frac), r.holdout) for r in sel],
              "validation/runs_fsdp.csv (gpusim.validation_fsdp)", _coverage([r.gpu for r in sel])))

    if dp is None:
        csv = V.default_csv()
        dp = V.run(csv, db=db) if csv else []
    tput = [r for r in dp if r.kind == "throughput" and not r.flagged and not r.replicas_reason and not
            r.used_for_defaults]
    src = "validation/measurements.csv (gpusim.validation)"
    multi = [r for r in tput if r.n_gpus > 1]
    pred = [r for r in multi if r.predicted]
    put(_band("data-parallel", [(r.ape(), _ratio(r.measured, r.predicted), False) for r in pred], src,
              _coverage([r.gpu for r in pred])))
    anch = [r for r in multi if r.anchored]
    put(_band("data-parallel-anchored", [(r.ape("anchored"), _ratio(r.measured, r.anchored), False) for r in anch],
              src, _coverage([r.gpu for r in anch])))
    one = [r for r in tput if r.n_gpus == 1 and r.predicted]
    put(_band("single-gpu", [(r.ape(), _ratio(r.measured, r.predicted), False) for r in one], src,
              _coverage([r.gpu for r in one])))

    if sweeps is None:
        sweeps_csv = VC.default_csv()
        sweeps = VC.run(sweeps_csv, db=db) if sweeps_csv and Path(sweeps_csv).is_file() else []
    sel = [r for r in sweeps if r.ape is not None and r.size_bytes >= VC.MIN_BYTES]
    put(_band("collectives", [(r.ape, _ratio(r.measured_gbyte_per_s, r.predicted_gbyte_per_s), r.held_out)
                              for r in sel], "validation/nccl_sweeps.csv (gpusim.validation_comm)",
              _coverage([r.system for r in sel], "sweeps of", "systems")))

    def search(kind: str) -> list:  # [issue 17] the layout search against the tuned recipes of a kind
        from gpusim import validation_search as VS

        later = VR.later_releases_path()
        paths = VS.default_paths(kind) + ([later] if later else [])
        return VS.run(paths, db=db, kind=kind) if paths else []

    searched = search("dense") if searched is None else searched
    searched_moe = search("moe") if searched_moe is None else searched_moe
    for key, rows, table in (("layout-search", searched, "runs_dense.csv"), ("layout-search-moe", searched_moe,
                                                                             "runs_moe.csv")):
        sel = [r for r in rows if r.best_step_s and r.measured_step_s]
        # MFU: best predicted / measured = measured step / best step; speed ratio = best step / measured step
        put(_band(key, [(abs(r.measured_step_s / r.best_step_s - 1.0), r.best_step_s / r.measured_step_s,
                         r.holdout) for r in sel],
                  f"validation/{table} and later_releases.csv (gpusim.validation_search)",
                  _coverage([r.gpu for r in sel])))

    if ab is None:  # [stop 47] the A/B pairs of the runs tables and the comparisons published as two figures
        from gpusim import validation_ab as VAB

        ab = VAB.run(list(runs) + list(later), db=db) + VAB.published_pairs(db=db)[0]
    # a change's speed-up: speed ratio = measured (1 + speed-up) / predicted (1 + speed-up)
    put(_band("what-if", [(abs((1.0 + p.predicted_speedup_frac) / (1.0 + p.measured_speedup_frac) - 1.0),
                           (1.0 + p.measured_speedup_frac) / (1.0 + p.predicted_speedup_frac), p.holdout) for p in ab],
              "validation/runs_*.csv, later_releases.csv and ab_published.csv (gpusim.validation_ab)",
              _coverage([p.gpu for p in ab])))
    if swaps is None:  # [stop 54] the same published layout on two GPUs
        from gpusim import validation_ab as VAB

        swaps = VAB.gpu_swaps(VAB.scenario_items(list(runs) + list(later), db=db), db=db)
    put(_band("gpu-swap", [(abs((1.0 + p.predicted_speedup_frac) / (1.0 + p.measured_speedup_frac) - 1.0),
                            (1.0 + p.measured_speedup_frac) / (1.0 + p.predicted_speedup_frac), p.holdout)
                           for p in swaps],
              "validation/runs_*.csv and later_releases.csv (gpusim.validation_ab.gpu_swaps)",
              _coverage([g for p in swaps for g in (p.slow_value, p.fast_value)])))
    return out


def same(a: dict[str, Band], b: dict[str, Band], tol: float = 2e-4) -> bool:
    """Whether two sets of bands agree (counts exactly, fractions within ``tol``: a rounding step of the stored
    digits, which another machine's last float bit may tip)."""
    if set(a) != set(b):
        return False
    for k in a:
        for f in Band.__dataclass_fields__:
            x, y = getattr(a[k], f), getattr(b[k], f)
            if isinstance(x, float) and isinstance(y, float):
                if abs(x - y) > tol:
                    return False
            elif x != y:
                return False
    return True


def to_json(bands: dict[str, Band]) -> str:
    """The file :data:`BANDS_PATH` holds: ``{"bands": {key: band}}`` in :data:`BAND_KEYS` order."""
    ordered = {k: bands[k].to_dict() for k in BAND_KEYS if k in bands}
    return json.dumps({"about": "gpusim's track record on published measurements: gpusim/track_record.py; "
                                "regenerate with `make track-record`", "bands": ordered}, indent=1) + "\n"


def write(path: str | Path = BANDS_PATH, bands: dict[str, Band] | None = None, db=None) -> Path:
    """Write ``bands`` (default: :func:`compute`) atomically to ``path`` (never a half-written file); the next
    :func:`load` reads it again."""
    global _CACHE
    from gpusim.fsutil import atomic_write_text

    out = atomic_write_text(path, to_json(compute(db) if bands is None else bands))
    _CACHE = None
    return out


_CACHE: dict[str, Band] | None = None


def band_from_dict(d: dict) -> Band | None:
    """A band from its JSON object (the packaged file, or a result's ``track_record``): fields it does not know (a
    newer file, a result's ranges) are ignored; one missing a field (an older file) gives None."""
    known = {k: v for k, v in d.items() if k in Band.__dataclass_fields__}
    try:
        return Band(**known)
    except TypeError:
        return None


def load(path: str | Path | None = None) -> dict[str, Band]:
    """The packaged bands (``{}`` where the file is missing or unreadable: a report then says the track record is
    unavailable, :func:`none_reason`)."""
    global _CACHE
    if path is None and _CACHE is not None:
        return _CACHE
    p = Path(path) if path is not None else BANDS_PATH
    try:
        raw = json.loads(p.read_text(encoding="utf-8"))["bands"]
        bands = {k: b for k, b in ((k, band_from_dict(v)) for k, v in raw.items() if k in BAND_KEYS) if b is not None}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        bands = {}
    if path is None:
        _CACHE = bands
    return bands


def is_moe(workload=None, ep: int = 1) -> bool:
    """Whether a prediction is of a mixture-of-experts model (as :func:`gpusim.validation_runs.regime` counts the
    published runs: the model has experts, or the run splits them, ``ep > 1``)."""
    return bool(getattr(getattr(workload, "transformer", None), "n_experts", 0)) or int(ep or 1) > 1


def is_hybrid(workload=None) -> bool:
    """[issue 17] Whether a prediction is of a hybrid Mamba-Transformer model (as :func:`gpusim.validation_runs.regime`
    counts the published runs: the model has Mamba mixers)."""
    return bool(getattr(getattr(workload, "transformer", None), "n_mamba_layers", 0))


def search_band_key(workload=None, ep: int = 1) -> str | None:
    """[issue 17] The band of a layout search of ``workload`` (:data:`BAND_KEYS`): ``layout-search`` for a dense
    transformer, ``layout-search-moe`` for a mixture-of-experts one (:func:`is_moe`), None without a transformer or
    with Mamba layers (no hybrid recipe is behind either band)."""
    spec = getattr(workload, "transformer", None)
    if spec is None or getattr(spec, "n_mamba_layers", 0):
        return None
    return "layout-search-moe" if is_moe(workload, ep) else "layout-search"


def key_for(*, llm: bool, moe: bool, precision: str, gpu: str, n_gpus: int, kind: str = "ddp", split: bool = False,
            anchored: bool = False, hybrid: bool = False) -> str | None:
    """Which band a prediction belongs to (:data:`BAND_KEYS`), from what it is; None where none applies (one GPU
    whose throughput the user gave: the prediction is that measurement).

    [issue 17] A hybrid Mamba-Transformer model (``hybrid``: :func:`is_hybrid`) is ``llm-hybrid`` whatever else it is
    (the published hybrid runs are MoE LLM layouts too, and no other band's rows hold a Mamba mixer). A
    mixture-of-experts model (``moe``: :func:`is_moe`) is ``llm-moe`` however it is parallelised (the published MoE
    runs are all of that kind). Sharded data parallelism (FSDP FULL_SHARD or HYBRID_SHARD, ZeRO-3) without tensor,
    pipeline, context or expert parallelism (``split``) is ``fsdp`` (llm-foundry's tables run it with and without
    activation checkpointing, which puts it on the per-GEMM path too). An LLM layout (``llm``: ``Strategy.is_llm``,
    a result with per-stage memory) is dense BF16, FP8 (FP8 and MXFP8 GEMMs) or [issue 17] NVFP4, on Blackwell (B200, B300, GB200,
    GB300) or not, as :func:`gpusim.validation_runs.regime` splits the published runs. Otherwise one GPU is
    ``single-gpu`` and data parallelism ``data-parallel``, ``-anchored`` when the one-GPU throughput is given."""
    from gpusim.validation_runs import BLACKWELL

    if n_gpus <= 1 and anchored:
        return None
    if hybrid:
        return "llm-hybrid"
    if moe:
        return "llm-moe"
    if kind in _SHARDED and not split:
        return "fsdp"
    if llm:
        kind = "nvfp4" if precision == "nvfp4" else "fp8" if precision in _FP8 else "bf16"  # [issue 17]
        return f"llm-dense-{kind}" + ("-blackwell" if gpu in BLACKWELL else "")
    if n_gpus <= 1:
        return "single-gpu"
    return "data-parallel-anchored" if anchored else "data-parallel"


def memory_record(memory_bytes: float, allocated_bytes: float, capacity_bytes: float, *, llm: bool) -> dict | None:
    """[stop 55] An LLM layout's ``memory_record``: the ``llm-memory`` band, with its 80% range carried to the
    prediction (``memory_range_bytes``) and the GPU's capacity beside it (``capacity_bytes``); None for a prediction
    that is not an LLM layout (the band's runs are all Megatron LLM layouts) or without a finite memory.

    The band compares the allocator's share (``allocated_bytes``: weights, gradients, optimizer states, activations;
    :func:`gpusim.validation_runs.allocated_bytes`) with PyTorch's peak allocated, so the range moves that share and
    keeps the rest of ``memory_bytes`` (the fragmentation allowance, the CUDA context and communication buffers) as
    predicted: ``(memory - allocated) + allocated x (p10, p90)``. Hand-worked: 70 GiB of which 60 allocated, ratios
    1.01-1.18 -> 70.6 to 80.8 GiB. A calibration fits no memory parameter (gpusim.calibration), so the range is
    carried whether or not the speed was calibrated."""
    if not llm or not (math.isfinite(memory_bytes) and math.isfinite(allocated_bytes)) or memory_bytes <= 0:
        return None
    band = load().get("llm-memory")
    if band is None:
        return record_for(None, "llm-memory")
    rest = memory_bytes - allocated_bytes
    lo, hi = band.memory_range(allocated_bytes)
    out = band.record(memory_range_bytes=(rest + lo, rest + hi))
    out["capacity_bytes"] = float(capacity_bytes)
    return out


def memory_record_for(result, params=None) -> dict | None:
    """[stop 55] :func:`memory_record` of a :class:`~gpusim.simulation.StepResult`: its memory, its allocator share
    (:func:`gpusim.validation_runs.allocated_bytes` with ``params``' fragmentation allowance) and its GPU's capacity;
    None unless it is an LLM layout (a result with per-stage memory)."""
    from gpusim.validation_runs import allocated_bytes

    return memory_record(result.memory_per_gpu_bytes, allocated_bytes(result, params), result.memory_capacity_bytes,
                         llm=bool(result.memory_per_stage_bytes))


def memory_here(record: dict | None, what: str, *, headroom: str = "more headroom",
                layouts: str = "a layout with more free memory") -> str | None:
    """[stop 55] The ``memory_record``'s range in words ("a peak of 78.1 GiB to 90.8 GiB for the best layout, of 80
    GiB"), with what to do where the top of the range passes the GPU's memory (``headroom``: how the front end names
    the setting; ``layouts``: [stop 56] where to find another layout); None where the record carries no range."""
    from gpusim import units

    span = (record or {}).get("memory_range_bytes")
    if not span:
        return None
    lo, hi = span
    cap = float(record.get("capacity_bytes", math.nan))
    out = f"a peak of {units.format_bytes(lo)} to {units.format_bytes(hi)} for {what}, of {units.format_bytes(cap)}"
    if hi > cap:  # the runs' error repeated here would not fit: say what to do
        out += f"; past the GPU's memory at the top of that range: leave {headroom} or take {layouts}"
    return out


def memory_record_fit(res: dict, memory: dict | None = None, *,
                      reference_tokens_per_s: float | None = None) -> dict | None:
    """[stop 56] Where the top of the best layout's memory record passes its GPU's memory (the published peaks ran
    up to the band's 90th percentile ratio above gpusim's allocator share): the fastest layout of the same search
    whose top still fits (:func:`gpusim.search.record_fit`), with how much slower it is, so the warning comes with
    a layout to take. ``{"layout": None, ...}`` when no layout searched fits that way; None where the best's top
    fits, or where there is no record. ``res``: :func:`gpusim.search.search_layouts`' answer (the best's top is read
    off its own figures); ``memory``: the best layout's :func:`memory_record` where the caller printed one (None
    where that record's top fits, so the two lines never disagree); ``reference_tokens_per_s``: the speed the
    slowdown is against where the layout the record is about is not the search's best (a plan's recommended layout,
    whose layout rows search a different set: the fitting layout may then be the search's best, or faster)."""
    from gpusim.search import layout_name, record_fit, table_row

    band = load().get("llm-memory")
    best = res.get("best")
    if band is None or best is None:
        return None
    span = (memory or {}).get("memory_range_bytes")
    if memory is not None and (not span or span[1] <= float(memory["capacity_bytes"])):
        return None
    ratio = float(band.speed_ratio_p90)
    i = record_fit(res, ratio)
    if i == best and reference_tokens_per_s is None:  # the search's own figures put the best's top within the GPU
        return None
    out = {"allocated_ratio": ratio, "capacity_bytes": float(res["capacity_bytes"])}
    if i is None:
        return {**out, "layout": None}
    o = res["out"]
    tokens_per_s = float(o["tokens_per_s"][i])
    ref_tokens_per_s = float(o["tokens_per_s"][best] if reference_tokens_per_s is None else reference_tokens_per_s)
    top_bytes = float(o["memory_per_gpu_bytes"][i] + o["memory_allocated_bytes"][i] * (ratio - 1.0))
    return {**out, "layout": layout_name(res["layouts"], i), "row": table_row(res, i),
            "slower_frac": 1.0 - tokens_per_s / ref_tokens_per_s, "memory_range_top_bytes": top_bytes}


def memory_fit_here(fit: dict | None, where: str = "") -> str | None:
    """[stop 56] :func:`memory_record_fit` in words (the CLI's second "memory record" line, the planner's
    caption; ``where``: what was searched, e.g. " on the recommended hardware"); None without one."""
    from gpusim import units

    if not fit:
        return None
    if fit["layout"] is None:
        return (f"no layout searched{where} keeps the top of that range ({fit['allocated_ratio']:.2f}x the allocator's "
                f"share) within {units.format_bytes(fit['capacity_bytes'])}: more GPUs, GPUs with more memory, or a "
                "search with fewer pinned degrees would")
    d = fit["slower_frac"]
    return (f"the fastest layout{where} whose top of that range fits: {fit['layout']}, {abs(d):.1%} "
            f"{'slower' if d >= 0 else 'faster'} (a peak of up to {units.format_bytes(fit['memory_range_top_bytes'])} "
            f"of {units.format_bytes(fit['capacity_bytes'])})")


def band_key(result, workload=None) -> str | None:
    """:func:`key_for` of a :class:`~gpusim.simulation.StepResult`; ``workload`` (the scenario's Workload) tells an
    MoE model on any path (without it, only ``ep > 1`` or the layer's MoE share, ``layer_s["moe_layer_frac"]``, of
    an LLM layout shows one)."""
    sc = result.scenario
    st = sc["strategy"]
    par = result.parallelism or {}
    moe = is_moe(workload, par.get("ep", 1)) or (result.layer_s or {}).get("moe_layer_frac", 0.0) > 0.0
    return key_for(llm=bool(result.memory_per_stage_bytes), precision=st.get("precision", ""), moe=moe,
                   gpu=sc.get("gpu_resolved", ""), n_gpus=result.n_gpus, kind=st.get("kind", "ddp"),
                   split=any(par.get(k, 1) > 1 for k in ("tp", "pp", "cp", "ep")),
                   anchored=bool(sc.get("baseline_throughput")), hybrid=is_hybrid(workload))


def configuration_key(config: dict, workload=None) -> str | None:
    """:func:`key_for` of a plan's configuration (a row of ``gpusim plan``: ``strategy``, ``precision``, ``gpu``,
    ``n_gpus``, ``layout`` and the degrees where it chose an LLM layout); ``workload`` (a Workload) tells an MoE
    model."""
    deg = {k: int(config.get(k) or 1) for k in ("tp", "pp", "cp", "ep")}
    return key_for(llm=bool(config.get("layout")), moe=is_moe(workload, deg["ep"]),
                   precision=str(config.get("precision", "")), gpu=str(config.get("gpu", "")),
                   n_gpus=int(config.get("n_gpus") or 1), kind=str(config.get("strategy", "ddp")),
                   split=any(v > 1 for v in deg.values()), hybrid=is_hybrid(workload))


def band_for_configuration(config: dict, workload=None) -> Band | None:
    """The packaged band of a plan's configuration (:func:`configuration_key`)."""
    key = configuration_key(config, workload)
    return None if key is None else load().get(key)


def band_for(result, workload=None) -> Band | None:
    """The packaged band of a StepResult's kind (:func:`band_key`; None where none applies or the file has none)."""
    key = band_key(result, workload)
    return None if key is None else load().get(key)


def what_if_fields() -> frozenset[str]:
    """[stop 47] The scenario inputs (``gpusim.comparison.flatten`` keys) a ``what-if`` comparison may change: the
    Strategy fields of the settings the published A/B pairs change at one layout (:data:`gpusim.validation_ab.SETTINGS`;
    their ``router``, force-balanced or not, is the scenario's routing imbalance and skew)."""
    from gpusim.strategy import Strategy
    from gpusim.validation_ab import SETTINGS

    fields = {f for group in SETTINGS.values() for f in group} | {"moe_imbalance_frac", "moe_expert_skew_frac"}
    return frozenset(f"strategy.{f}" for f in fields if f in Strategy.model_fields)


def what_if_record(changed: list[str], *, llm: bool, ratio: float, calibrated: bool = False) -> dict:
    """The ``track_record`` of one ``gpusim compare`` gap: the ``what-if`` band with its 80% range carried to the
    predicted throughput ``ratio`` where the comparison is of LLM layouts and ``changed`` (the inputs that differ)
    are all software settings (:func:`what_if_fields`); [stop 54] the ``gpu-swap`` band where they are the GPU (its
    node template, the node count: :data:`gpusim.validation_ab.SWAP_FIELDS`) alone; else ``{"key": "what-if",
    "reason": ...}`` saying why no band applies."""
    allowed = what_if_fields()
    other = sorted(k.removeprefix("strategy.") for k in changed if k not in allowed)
    if not llm:
        return {"key": "what-if", "reason": "none: the published A/B comparisons are of LLM layouts; this is not one"}
    from gpusim.validation_ab import SWAP_FIELDS

    if set(changed) <= set(SWAP_FIELDS) and {"gpu", "node"} & set(changed):
        # [stop 54] the layout moved to another GPU: the published same-layout pairs on two GPUs
        band = load().get("gpu-swap")
        return record_for(band, "gpu-swap", calibrated=calibrated,
                          throughput_ratio_range=band.speed_range(ratio) if band else (ratio, ratio))
    if other:
        return {"key": "what-if", "reason": f"none: the published A/B comparisons change software settings at one "
                                            f"layout; this comparison changes {', '.join(other)}"}
    band = load().get("what-if")
    return record_for(band, "what-if", calibrated=calibrated,
                      throughput_ratio_range=band.speed_range(ratio) if band else (ratio, ratio))


def none_reason(key: str | None) -> str:
    """What a report says where a prediction of kind ``key`` has no band: the prediction is the user's own
    measurement (``key`` None), the packaged file is missing or unreadable, or no published run is of this kind."""
    if key is None:
        return MEASURED
    if not load():
        return UNAVAILABLE
    return NO_RUNS


def record_for(band: Band | None, key: str | None, *, calibrated: bool = False, **ranges) -> dict:
    """A result's ``track_record``: the band with its ranges (:meth:`Band.record`), or, where none applies, the kind
    and why (``{"key": ..., "reason": ...}``: :func:`none_reason`)."""
    if band is None:
        return {"key": key, "reason": none_reason(key)}
    return band.record(calibrated=calibrated, **ranges)


def report_line(record: dict | None, *, here: str | None = None, anchor_hint: bool = False) -> str:
    """The text a report prints after "track record:" for a result's ``track_record`` (:func:`record_for`): the
    band's sentence, ``here`` (its range in the command's units) where the record carries a range, the default
    model's caveat where the prediction was calibrated; ``anchor_hint``: a data-parallel prediction from the
    datasheet also says how close such predictions came with the one-GPU throughput given (where the command takes
    ``--baseline-throughput``)."""
    if not record:
        return UNAVAILABLE
    if "reason" in record:
        return str(record["reason"])
    band = band_from_dict(record)
    if band is None:
        return UNAVAILABLE
    calibrated = bool(record.get("calibrated"))
    line = band.line(with_range=not calibrated)
    if here and not calibrated and band.has_range:
        line += f" (here: {here})"
    anchored = load().get("data-parallel-anchored") if anchor_hint and band.key == "data-parallel" else None
    if anchored:  # the one figure that shrinks the error most: say so
        line += (f"; with your one-GPU throughput given (--baseline-throughput) such predictions were within a "
                 f"median {anchored.median_abs_frac:.1%}, p90 {anchored.p90_abs_frac:.1%}")
    if calibrated:
        line += ("; these are the default model's figures, before your calibration, so no range is carried to this "
                 "calibrated prediction (the calibration's own interval is its uncertainty)")
    return line


def main(argv: list[str] | None = None) -> int:
    """``python -m gpusim.track_record [--write] [PATH]``: print the bands, or write them (default
    :data:`BANDS_PATH`)."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m gpusim.track_record", description=main.__doc__)
    ap.add_argument("--write", nargs="?", const=str(BANDS_PATH), metavar="PATH",
                    help="write the bands as JSON (default: the packaged file)")
    args = ap.parse_args(argv)
    from gpusim.errors import GpusimError

    try:
        bands = compute()
        if args.write:
            print(f"wrote {write(args.write, bands)}")
    except GpusimError as e:  # a path that cannot be written: the message, not a traceback
        print(f"python -m gpusim.track_record: error: {e}", file=sys.stderr)
        return 2
    for b in bands.values():
        print(f"{b.key}: {b.line()}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
