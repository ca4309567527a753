"""The model's track record: how far its predictions were from published measurements of runs like the one predicted.

A prediction is a number; a buyer also needs to know how far such numbers have been from real runs. ``gpusim
validate`` measures that per table (``validation/``); this module turns those tables into one *band* per kind of
prediction, and picks the band a prediction belongs to, so that ``gpusim predict``, ``sweep`` (its best layout),
``plan`` (its recommendation) and ``comm``, the Python API and the planner's pages print it under the number:

    track record: published MoE training runs with their stated layouts: 81 measurements, median step time error
    15.7%, p90 37.8%; the 21 held out of tuning: median 15.7%, p90 51.6%; measured a median 15.5% slower than
    predicted, slower in 79% of them

The bands (:data:`BAND_KEYS`) and the validation rows behind each:

- ``llm-moe``, ``llm-dense-bf16``, ``llm-dense-fp8``, ``llm-dense-bf16-blackwell``, ``llm-dense-fp8-blackwell``:
  step time of the published training runs with their stated layouts (``validation/runs_*.csv``,
  :mod:`gpusim.validation_runs`, its regimes);
- ``fsdp``: MFU of llm-foundry's published FSDP benchmark tables (:mod:`gpusim.validation_fsdp`);
- ``data-parallel``: throughput of the published multi-GPU data-parallel runs from the datasheet
  (``validation/measurements.csv``, :mod:`gpusim.validation`), ``data-parallel-anchored`` the same rows with the
  one-GPU throughput given (``--baseline-throughput``), ``single-gpu`` the one-GPU rows from the datasheet;
- ``collectives``: bus bandwidth of the published all-reduce and all-to-all sweeps of many systems, sizes from
  32 KiB (``validation/nccl_sweeps.csv``, :mod:`gpusim.validation_comm`).

Each band holds every row of its table, open and held out together (how many were held out of tuning is stated,
with their own median and p90), the median and 90th percentile of the absolute error as the table defines it (step
time, throughput, MFU, bus bandwidth: the figures ``gpusim validate`` prints), and signed figures in a single
convention whatever the table, the ratio measured speed / predicted speed: its median less one
(``real_vs_predicted_speed_frac``; negative: real runs were slower than predicted), the share of rows that were
slower, and its 10th and 90th percentiles, the range 80% of the runs landed in, which the reports carry to the
prediction's own numbers (``speed_range``, ``time_range``, ``time_to_train_range``) where the band has at least
:data:`MIN_ROWS_FOR_RANGE` runs. The range is empirical (the model's misses on published runs of the kind, not a
confidence interval of the model's parameters: a calibration's interval is that).

The bands live in a file of the package (:data:`BANDS_PATH`), written by ``make track-record`` (``python -m
gpusim.track_record --write``) from the validation tables of a checkout; a test recomputes them and fails when the
file no longer matches the model or the tables. This is a report, not a correction: no prediction is moved by its
band.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

#: the packaged bands (written by :func:`write`; read by :func:`load`)
BANDS_PATH = Path(__file__).with_name("data") / "track_record.json"

#: the bands in the order ``gpusim validate``'s tables come, with what each covers (the label a report prints)
BAND_KEYS: dict[str, str] = {
    "llm-moe": "published MoE training runs with their stated layouts",
    "llm-dense-bf16": "published dense BF16 training runs with their stated layouts (Hopper and older)",
    "llm-dense-fp8": "published dense FP8 training runs with their stated layouts (Hopper and older)",
    "llm-dense-bf16-blackwell": "published dense BF16 training runs with their stated layouts on Blackwell",
    "llm-dense-fp8-blackwell": "published dense FP8 / MXFP8 training runs with their stated layouts on Blackwell",
    "fsdp": "published FSDP (ZeRO-3) benchmark runs (llm-foundry's tables)",
    "data-parallel": "published multi-GPU data-parallel runs, from the datasheet",
    "data-parallel-anchored": "published multi-GPU data-parallel runs, with their one-GPU throughput given",
    "single-gpu": "published one-GPU training runs, from the datasheet",
    "collectives": "published all-reduce and all-to-all sweeps across systems, sizes from 32 KiB",
}
#: what each band's absolute error is measured on
QUANTITY = {"llm-moe": "step time", "llm-dense-bf16": "step time", "llm-dense-fp8": "step time",
            "llm-dense-bf16-blackwell": "step time", "llm-dense-fp8-blackwell": "step time", "fsdp": "MFU",
            "data-parallel": "throughput", "data-parallel-anchored": "throughput", "single-gpu": "throughput",
            "collectives": "bus bandwidth"}
#: precisions whose GEMMs run in FP8 (the published runs' dense-fp8 regimes)
_FP8 = ("fp8", "mxfp8")
#: strategy kinds the FSDP tables cover (gpusim.validation_fsdp.SHARDING) and ZeRO-3, the same sharding
_SHARDED = ("fsdp-full", "fsdp-grad-op", "fsdp-hybrid", "zero3")
#: the fewest runs a band needs before a report carries its 10th-90th percentile range to a prediction (four runs
#: have no meaningful percentiles)
MIN_ROWS_FOR_RANGE = 10
#: the digits a band's fractions are stored with (a tenth of a percent: what the reports print)
_DIGITS = 4


@dataclass(frozen=True)
class Band:
    """One kind of prediction's track record (fractions, not percent)."""

    key: str
    label: str
    quantity: str
    rows: int
    median_abs_frac: float
    p90_abs_frac: float
    real_vs_predicted_speed_frac: float  # median of measured speed / predicted speed - 1 (< 0: real runs slower)
    slower_frac: float  # share of the rows whose real run was slower than predicted
    speed_ratio_p10: float  # 10th percentile of measured speed / predicted speed
    speed_ratio_p90: float  # 90th percentile of the same: 80% of the rows lie between the two
    held_out_rows: int
    held_out_median_abs_frac: float | None
    held_out_p90_abs_frac: float | None
    source: str

    def line(self) -> str:
        """One sentence for a report (``gpusim predict``'s "track record" line)."""
        held = (f"; the {self.held_out_rows} held out of tuning: median {self.held_out_median_abs_frac:.1%}, "
                f"p90 {self.held_out_p90_abs_frac:.1%}" if self.held_out_rows else "")
        d = self.real_vs_predicted_speed_frac
        spread = self.range_text() if self.has_range else "too few runs for an 80% range"
        direction = (f"measured a median {abs(d):.1%} {'slower' if d < 0 else 'faster'} than predicted, slower in "
                     f"{self.slower_frac:.0%} of them; {spread}")
        return (f"{self.label}: {self.rows} measurements, median {self.quantity} error {self.median_abs_frac:.1%}, "
                f"p90 {self.p90_abs_frac:.1%}{held}; {direction}")

    def to_dict(self) -> dict:
        return asdict(self)

    @property
    def has_range(self) -> bool:
        """Whether the band has enough runs (:data:`MIN_ROWS_FOR_RANGE`) for its 80% range to be carried."""
        return self.rows >= MIN_ROWS_FOR_RANGE

    def speed_range(self, speed: float) -> tuple[float, float]:
        """Where 80% of the published runs of this kind landed, carried to a predicted speed (a throughput, tokens
        per second, MFU): ``(speed x p10, speed x p90)`` of measured / predicted speed."""
        return speed * self.speed_ratio_p10, speed * self.speed_ratio_p90

    def time_range(self, time_s: float) -> tuple[float, float]:
        """The same for a predicted time (a step, a training run): ``(time / p90, time / p10)``."""
        return time_s / self.speed_ratio_p90, time_s / self.speed_ratio_p10

    def time_to_train_range(self, time_to_train_s: float, train_s: float) -> tuple[float, float]:
        """A plan's time to train with only its training steps (``train_s`` of it) carried to the 80% range:
        checkpoints, evaluation and restarts keep their modelled time (as the calibration's interval does)."""
        lo, hi = self.time_range(train_s)
        rest = time_to_train_s - train_s
        return rest + lo, rest + hi

    def range_text(self) -> str:
        """The 80% range as ratios of the prediction ("0.62x to 1.08x the predicted speed")."""
        return (f"80% of them measured {self.speed_ratio_p10:.2f}x to {self.speed_ratio_p90:.2f}x the predicted "
                f"speed")


def _quantile(xs: list[float], q: float) -> float:
    """Linear-interpolated quantile (numpy's default, as gpusim validate's figures)."""
    return float(np.quantile(np.asarray(xs, dtype=np.float64), q))


def _band(key: str, rows: list[tuple[float, float, bool]], source: str) -> Band | None:
    """A band from ``(abs_error_frac, measured_speed / predicted_speed, held_out)`` per row; None without rows."""
    if not rows:
        return None
    errs = [e for e, _, _ in rows]
    ratios = [r for _, r, _ in rows]
    held = [e for e, _, h in rows if h]
    r = lambda x: None if x is None else round(float(x), _DIGITS)  # noqa: E731
    return Band(key=key, label=BAND_KEYS[key], quantity=QUANTITY[key], rows=len(rows),
                median_abs_frac=r(_quantile(errs, 0.5)), p90_abs_frac=r(_quantile(errs, 0.9)),
                real_vs_predicted_speed_frac=r(_quantile(ratios, 0.5) - 1.0),
                slower_frac=r(sum(1 for x in ratios if x < 1.0) / len(ratios)),
                speed_ratio_p10=r(_quantile(ratios, 0.1)), speed_ratio_p90=r(_quantile(ratios, 0.9)),
                held_out_rows=len(held),
                held_out_median_abs_frac=r(_quantile(held, 0.5)) if held else None,
                held_out_p90_abs_frac=r(_quantile(held, 0.9)) if held else None, source=source)


def compute(db=None, *, dp=None, runs=None, fsdp=None, sweeps=None) -> dict[str, Band]:
    """Every band from the validation tables of this checkout (the model's defaults, no calibration): what
    ``gpusim validate`` measures, row by row. ``dp``, ``runs``, ``fsdp``, ``sweeps``: the results of
    :func:`gpusim.validation.run`, :func:`gpusim.validation_runs.run`, :func:`gpusim.validation_fsdp.run` and
    :func:`gpusim.validation_comm.run` on the default tables where the caller has them already (``gpusim validate``);
    None computes them. Bands whose table is missing (an installed package without the ``validation/`` folder) are
    left out."""
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
    for key in ("llm-moe", "llm-dense-bf16", "llm-dense-fp8", "llm-dense-bf16-blackwell", "llm-dense-fp8-blackwell"):
        regime = key.removeprefix("llm-")
        sel = [r for r in runs if regime in r.regimes and not r.is_memory and r.signed_frac is not None]
        # step time: speed ratio = predicted step / measured step
        put(_band(key, [(r.ape, 1.0 + r.signed_frac, r.holdout) for r in sel],
                  "validation/runs_*.csv (gpusim.validation_runs)"))

    if fsdp is None:
        fsdp_csv = VF.default_csv()
        fsdp = VF.run(fsdp_csv, db=db) if fsdp_csv and Path(fsdp_csv).is_file() else []
    sel = [r for r in fsdp if r.mfu_signed_frac is not None]
    # MFU: speed ratio = measured MFU / predicted MFU
    put(_band("fsdp", [(abs(r.mfu_signed_frac), 1.0 / (1.0 + r.mfu_signed_frac), r.holdout) for r in sel],
              "validation/runs_fsdp.csv (gpusim.validation_fsdp)"))

    if dp is None:
        csv = V.default_csv()
        dp = V.run(csv, db=db) if csv else []
    tput = [r for r in dp if r.kind == "throughput" and not r.flagged and not r.replicas_reason and not
            r.used_for_defaults]
    src = "validation/measurements.csv (gpusim.validation)"
    multi = [r for r in tput if r.n_gpus > 1]
    put(_band("data-parallel", [(r.ape(), r.measured / r.predicted, False) for r in multi if r.predicted],
              src))
    put(_band("data-parallel-anchored", [(r.ape("anchored"), r.measured / r.anchored, False) for r in multi
                                         if r.anchored], src))
    put(_band("single-gpu", [(r.ape(), r.measured / r.predicted, False) for r in tput
                             if r.n_gpus == 1 and r.predicted], src))

    if sweeps is None:
        sweeps_csv = VC.default_csv()
        sweeps = VC.run(sweeps_csv, db=db) if sweeps_csv and Path(sweeps_csv).is_file() else []
    sel = [r for r in sweeps if r.ape is not None and r.size_bytes >= VC.MIN_BYTES]
    put(_band("collectives", [(r.ape, r.measured_gbyte_per_s / r.predicted_gbyte_per_s, r.held_out) for r in sel],
              "validation/nccl_sweeps.csv (gpusim.validation_comm)"))
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
    """Write ``bands`` (default: :func:`compute`) atomically to ``path`` (never a half-written file)."""
    from gpusim.fsutil import atomic_write_text

    return atomic_write_text(path, to_json(compute(db) if bands is None else bands))


_CACHE: dict[str, Band] | None = None


def load(path: str | Path | None = None) -> dict[str, Band]:
    """The packaged bands (``{}`` where the file is missing or unreadable: a report then prints no track record)."""
    global _CACHE
    if path is None and _CACHE is not None:
        return _CACHE
    p = Path(path) if path is not None else BANDS_PATH
    try:
        raw = json.loads(p.read_text(encoding="utf-8"))["bands"]
        bands = {k: Band(**v) for k, v in raw.items() if k in BAND_KEYS}
    except (OSError, ValueError, KeyError, TypeError):
        bands = {}
    if path is None:
        _CACHE = bands
    return bands


def key_for(*, llm: bool, moe: bool, precision: str, gpu: str, n_gpus: int, kind: str = "ddp", split: bool = False,
            anchored: bool = False) -> str:
    """Which band a prediction belongs to (:data:`BAND_KEYS`), from what it is.

    Sharded data parallelism (FSDP, ZeRO-3) without tensor, pipeline, context or expert parallelism (``split``) is
    ``fsdp`` (llm-foundry's tables run it with and without activation checkpointing, which puts it on the per-GEMM
    path too). An LLM layout (``llm``: ``Strategy.is_llm``, a result with per-stage memory) is an MoE run where a
    layer has experts (``moe``), else dense BF16 or FP8 (FP8 and MXFP8 GEMMs), on Blackwell (B200, B300, GB200,
    GB300) or not, as :func:`gpusim.validation_runs.regime` splits the published runs. Otherwise one GPU is
    ``single-gpu`` and data parallelism ``data-parallel``, ``-anchored`` when the one-GPU throughput is given."""
    from gpusim.validation_runs import BLACKWELL

    if kind in _SHARDED and not split:
        return "fsdp"
    if llm:
        if moe:
            return "llm-moe"
        return f"llm-dense-{'fp8' if precision in _FP8 else 'bf16'}" + ("-blackwell" if gpu in BLACKWELL else "")
    if n_gpus <= 1:
        return "single-gpu"
    return "data-parallel-anchored" if anchored else "data-parallel"


def band_key(result) -> str:
    """:func:`key_for` of a :class:`~gpusim.simulation.StepResult`: an MoE layer shows in ``ep > 1`` or in the
    layer's MoE share (``layer_s["moe_layer_frac"]``)."""
    sc = result.scenario
    st = sc["strategy"]
    par = result.parallelism or {}
    return key_for(llm=bool(result.memory_per_stage_bytes), precision=st.get("precision", ""),
                   moe=par.get("ep", 1) > 1 or (result.layer_s or {}).get("moe_layer_frac", 0.0) > 0.0,
                   gpu=sc.get("gpu_resolved", ""), n_gpus=result.n_gpus, kind=st.get("kind", "ddp"),
                   split=any(par.get(k, 1) > 1 for k in ("tp", "pp", "cp", "ep")),
                   anchored=bool(sc.get("baseline_throughput")))


def band_for_configuration(config: dict, workload=None) -> Band | None:
    """The packaged band of a plan's configuration (a row of ``gpusim plan``: ``strategy``, ``precision``, ``gpu``,
    ``n_gpus``, ``layout`` and the degrees where it chose an LLM layout); ``workload`` (a Workload) tells an MoE
    model."""
    spec = getattr(workload, "transformer", None)
    deg = {k: int(config.get(k) or 1) for k in ("tp", "pp", "cp", "ep")}
    return load().get(key_for(llm=bool(config.get("layout")), moe=bool(getattr(spec, "n_experts", 0)) or deg["ep"] > 1,
                              precision=str(config.get("precision", "")), gpu=str(config.get("gpu", "")),
                              n_gpus=int(config.get("n_gpus") or 1), kind=str(config.get("strategy", "ddp")),
                              split=any(v > 1 for v in deg.values())))


def band_for(result) -> Band | None:
    """The packaged band of a StepResult's kind (None where the file has none)."""
    return load().get(band_key(result))


def main(argv: list[str] | None = None) -> int:
    """``python -m gpusim.track_record [--write] [PATH]``: print the bands, or write them (default
    :data:`BANDS_PATH`)."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m gpusim.track_record", description=main.__doc__)
    ap.add_argument("--write", nargs="?", const=str(BANDS_PATH), metavar="PATH",
                    help="write the bands as JSON (default: the packaged file)")
    args = ap.parse_args(argv)
    bands = compute()
    if args.write:
        print(f"wrote {write(args.write, bands)}")
    for b in bands.values():
        print(f"{b.key}: {b.line()}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
