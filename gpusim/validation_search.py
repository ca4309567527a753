"""[issue 17] The layout search against the tuned recipes: does ``gpusim sweep`` promise more than a tuned run reaches?

For every dense published run of :mod:`gpusim.validation_runs` (``validation/runs_dense.csv``; the dense rows of the
later releases, ``validation/later_releases.csv``, reported apart), the layout search
(:func:`gpusim.search.search_layouts`, what ``gpusim sweep`` runs) is given the run's GPUs, global batch, sequence
length, precision and software settings (the options of its notes: CUDA graphs, FP8 recipe, gradient dtype, ...) and
searches tp, pp, vp, cp, the micro-batch
and the recomputation, as a user planning the same job would. Its best layout's predicted MFU is set against the MFU
the tuned recipe measured with the same GPUs, batch and sequence:

``ratio = predicted MFU of the search's best layout / measured MFU of the recipe = measured step / best step``

(both MFUs count gpusim's model FLOPs over the GPU's peak, which cancel). A ratio above 1 is the search promising more
than the vendor's tuned run reached; below 1, less (the search found nothing as fast as the recipe: the model charges
the recipe's layout too much, or its memory model rejects it). Issue 17's bar: the median ratio within 0.95-1.08, and
no best layout with less free memory than ``--memory-headroom`` (its ``spare`` below zero: the search admits only layouts
that fit with it, so this holds by construction and the report gives the room left); the held-out rows are
reported apart, with their ratios hidden unless asked for (a ratio gives away the measured step).

[issue 17] The mixture-of-experts runs (``validation/runs_moe.csv`` and the later releases' MoE rows; not the hybrid
Mamba-Transformer ones) are searched the same way, the expert-parallel degree searched too and the run's MoE software
kept as its notes state it, and reported apart: the bar is for dense models, and an MoE ratio carries the MoE
step-time error of the stated layouts besides the search's own choice.

Pure reporting: nothing is tuned against it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

from gpusim import units
from gpusim.stats import quantile

#: issue 17's band for the median ratio (predicted MFU of the best layout / measured MFU of the tuned recipe)
BAND = (0.95, 1.08)


@dataclass
class SearchRow:
    run_id: str
    source_id: str
    holdout: bool
    model: str
    gpu: str
    gpus: int
    precision: str
    stated_layout: str
    best_layout: str = ""
    best_step_s: float | None = None
    measured_step_s: float | None = None
    best_mfu_frac: float | None = None
    stated_step_s: float | None = None
    spare_bytes: float | None = None
    layouts: int = 0
    feasible: int = 0
    error: str = ""

    @property
    def ratio(self) -> float | None:
        """Predicted MFU of the best layout / the recipe's measured MFU (= measured step / best predicted step)."""
        if self.best_step_s is None or self.measured_step_s is None:
            return None
        return self.measured_step_s / self.best_step_s

    @property
    def measured_mfu_frac(self) -> float | None:
        r = self.ratio
        return None if r is None or self.best_mfu_frac is None else self.best_mfu_frac / r

    @property
    def best_vs_stated_frac(self) -> float | None:
        """How much faster the model predicts its best layout than the recipe's own (0: the recipe's is the best)."""
        if self.best_step_s is None or self.stated_step_s is None:
            return None
        return self.stated_step_s / self.best_step_s - 1.0


#: the kinds of published run the search is set against: dense transformers, and [issue 17] mixture-of-experts
#: transformers (without Mamba mixers: hybrid models are reported by neither)
KINDS = ("dense", "moe")


def row_kind(regimes) -> str | None:
    """Which of :data:`KINDS` a published step-time row of ``regimes`` (:func:`gpusim.validation_runs.regime`) is;
    None for a peak-memory row or a hybrid Mamba-Transformer one."""
    if "memory" in regimes or "hybrid" in regimes:
        return None
    return "moe" if "moe" in regimes else "dense"


def search_row(r: dict, *, db, params=None, kind: str = "dense") -> SearchRow | None:
    """The layout search for one published run (module docstring); None for a row that is not a step-time row of
    ``kind`` (:data:`KINDS`, :func:`row_kind`: dense, or [issue 17] mixture-of-experts, where the search also
    searches the expert-parallel degree and keeps the run's MoE software: its dispatcher, CUDA graphs, gradient
    dtype, ... as its notes state them). Never raises for a bad row: it comes back with ``error`` set."""
    from gpusim import validation_runs as R
    from gpusim.errors import GpusimError
    from gpusim.scenario import Scenario
    from gpusim.search import search_layouts

    if kind not in KINDS:
        raise ValueError(f"kind {kind!r} is not one of {', '.join(KINDS)}")
    try:
        stated = R.predict_row(r, db=db, params=params)
    except (KeyError, ValueError) as e:  # a figure or a degree that does not parse
        return SearchRow(run_id=r.get("run_id", ""), source_id=r.get("source_id", ""),
                         holdout=R.held_out(r), model=r.get("model", ""), gpu=r.get("gpu", ""),
                         gpus=0, precision=r.get("precision", ""), stated_layout="", error=f"unreadable row: {e}")
    if row_kind(stated.regimes) != kind:
        return None
    out = SearchRow(run_id=stated.run_id, source_id=stated.source_id, holdout=stated.holdout, model=stated.model,
                    gpu=stated.gpu, gpus=stated.gpus, precision=stated.precision, stated_layout=stated.layout,
                    measured_step_s=stated.measured_step_s, stated_step_s=stated.step_s, error=stated.error)
    if stated.error:
        return out
    setup = R.row_setup(r, stated, db)
    if setup is None:  # (predict_row read the same row without an error: not expected)
        out.error = stated.error or "the row's scenario could not be read"
        return out
    try:
        scenario = Scenario.create(**setup.base, recompute=setup.stated_rc or "none")
        res = search_layouts(scenario, db=db, params=params, global_batch=setup.global_batch)
    except GpusimError as e:
        out.error = str(e)
        return out
    _fill(out, res)
    return out


def search_table1_row(r: dict, *, db, params=None) -> SearchRow | None:
    """[issue 17] The layout search for one row of Narayanan et al. SC'21 Table 1 (``validation/llm_parallel.csv``,
    ``NARAYANAN_2021_TAB1``: GPT models of 1.7B to 1T on 32 to 3072 A100, the layouts the authors chose, TFLOP/s per
    GPU in their own FLOP count, eq. 3): the measured step is the paper's FLOPs per iteration over its TFLOP/s and GPUs,
    the recipe's own layout is :mod:`gpusim.validation_llm`'s prediction, and the search keeps the row's GPUs, batch,
    sequence, precision and the software of 2021 (:func:`gpusim.validation_llm.row_scenario`; the recomputation searched
    among what Megatron-LM offered then, none or full). None for other rows."""
    from gpusim import validation_llm as V
    from gpusim.errors import GpusimError
    from gpusim.search import search_layouts

    if r.get("source_id") != V.TABLE1 or r.get("kind") != "tflops_per_gpu":
        return None
    out = SearchRow(run_id=f"tab1-{r.get('model', '').lower().replace(' ', '-')}", source_id=r["source_id"],
                    holdout=False, model=r.get("model", ""), gpu=db.node(V.NODE).gpu, gpus=0,
                    precision=r.get("precision", ""), stated_layout="")
    try:
        out.gpus = gpus = int(r["gpus"])
        tflops = float(r["value"])
        measured = V.paper_flop_per_iteration(r) / (units.tflop_per_s_to_flop_per_s(tflops) * gpus)
        stated = V.predict_row(r, db, params)
    except (KeyError, ValueError, ZeroDivisionError, GpusimError) as e:
        out.error = f"unreadable row: {e}"
        return out
    out.stated_layout = f"{r['tp']}/{r['pp']}/{stated.vp}/1 {stated.micro_batch}/{r['global_batch']}"
    out.measured_step_s, out.stated_step_s, out.error = measured, stated.step_s, stated.error
    if not measured > 0:
        out.error = "the row's TFLOP/s must be positive"
        return out
    if stated.error or stated.step_s is None:
        out.error = out.error or "the paper's layout could not be predicted"
        return out
    try:
        scenario = V.row_scenario(r, V.workload_from_row(r), int(r["tp"]), int(r["pp"]), stated.vp,
                                  stated.micro_batch)
        # the recomputations Megatron-LM offered in 2021 (--checkpoint-activations or nothing: selective
        # recomputation came with Korthikanti et al. 2022)
        res = search_layouts(scenario, db=db, params=params, global_batch=int(r["global_batch"]),
                             recomputes=("none", "full"))
    except GpusimError as e:
        out.error = str(e)
        return out
    _fill(out, res)
    return out


def _fill(out: SearchRow, res: dict) -> None:
    """The search's counts and best layout into ``out`` (``error`` when nothing fits)."""
    out.layouts, out.feasible = int(res["n"]), int(res["feasible"].sum())
    b = res["best"]
    if b is None:
        out.error = "no layout fits in GPU memory"
        return
    o = res["out"]
    out.best_layout = short_layout(res["layouts"], b)
    out.best_step_s = float(o["step_s"][b])
    out.best_mfu_frac = float(o["mfu_frac"][b])
    out.spare_bytes = float(o["spare_bytes"][b])


def run_table1(path=None, *, db=None, params=None) -> list[SearchRow]:
    """:func:`search_table1_row` over ``validation/llm_parallel.csv``'s Table 1 rows."""
    import csv

    from gpusim import validation_llm as V
    from gpusim.hwdb import load

    path = path or V.default_csv()
    if path is None:
        return []
    db = db or load()
    with open(path, newline="") as fh:
        rows = list(csv.DictReader(fh))
    return [x for r in rows if (x := search_table1_row(r, db=db, params=params)) is not None]


def short_layout(lay: dict, i: int) -> str:
    """``4/8/5/1 mb 1 rc selective`` (tp/pp/vp/cp, ``/ep`` where experts are split, micro-batch, recomputation;
    ``uneven`` for unequal stages): layout ``i`` in the published runs' own notation (their table's
    ``tp/pp/vp/cp(/ep) mb/gb`` column)."""
    from gpusim.search import RECOMPUTES

    rc = RECOMPUTES[lay["recompute"][i]]
    ep = int(lay["ep"][i]) if "ep" in lay else 1
    text = (f"{lay['tp'][i]}/{lay['pp'][i]}/{lay['vp'][i]}/{lay['cp'][i]}" + (f"/{ep}" if ep > 1 else "")
            + f" mb {lay['micro_batch'][i]}" + ("" if rc == "none" else f" rc {rc}"))
    return text + (" uneven" if "uneven" in lay and lay["uneven"][i] else "")


def run(paths, *, db=None, params=None, kind: str = "dense") -> list[SearchRow]:
    """:func:`search_row` over every row of ``paths`` (the step-time rows of ``kind``: dense, or mixture-of-experts)."""
    from gpusim import validation_runs as R
    from gpusim.hwdb import load

    db = db or load()
    out = []
    for _file, r in R.read_rows(paths):
        row = search_row(r, db=db, params=params, kind=kind)
        if row is not None:
            out.append(row)
    return out


def default_paths(kind: str = "dense") -> list[Path]:
    """The curated runs of ``kind``: ``validation/runs_dense.csv``, or [issue 17] ``validation/runs_moe.csv``."""
    from gpusim import validation_runs as R

    d = R.default_dir()
    p = d / f"runs_{kind}.csv" if d else None
    return [p] if p and p.is_file() else []


def summarize(rows: list[SearchRow]) -> dict:
    """Per part (``open``, ``held_out``): rows, searched, the median and 10th-90th percentile ratio, how many ratios
    lie in :data:`BAND`, the least spare memory of a best layout (bytes beyond the headroom) and how many bests hold
    less than the headroom, and the median predicted gain of the best layout over the recipe's own."""
    out = {}
    for part, sel in (("open", lambda r: not r.holdout), ("held_out", lambda r: r.holdout)):
        rs = [r for r in rows if sel(r)]
        ratios = sorted(r.ratio for r in rs if r.ratio is not None)
        spares = [r.spare_bytes for r in rs if r.spare_bytes is not None]
        gains = [g for r in rs if (g := r.best_vs_stated_frac) is not None]
        out[part] = {"rows": len(rs), "searched": len(ratios),
                     "median_ratio": quantile(ratios, 0.5, empty=None), "p10_ratio": quantile(ratios, 0.1, empty=None),
                     "p90_ratio": quantile(ratios, 0.9, empty=None),
                     "in_band": sum(BAND[0] <= x <= BAND[1] for x in ratios),
                     "min_spare_bytes": min(spares) if spares else None,
                     "below_headroom": sum(s < 0 for s in spares),
                     "median_best_vs_stated_frac": quantile(gains, 0.5, empty=None)}
    return {"band": list(BAND), **out}


def to_dicts(rows: list[SearchRow], *, holdout_rows: bool = False) -> list[dict]:
    """Row dicts for ``--json``; a held-out row's measured figures and ratio are withheld unless ``holdout_rows``."""
    out = []
    for r in rows:
        d = {**asdict(r), "ratio": r.ratio, "measured_mfu_frac": r.measured_mfu_frac,
             "best_vs_stated_frac": r.best_vs_stated_frac}
        d["hidden"] = r.holdout and not holdout_rows
        if d["hidden"]:
            for k in ("measured_step_s", "ratio", "measured_mfu_frac"):
                d[k] = None
        out.append(d)
    return out


def summary_lines(summary: dict, *, label: str = "") -> list[str]:
    """The report's lines for one table's summary (:func:`summarize`)."""
    lo, hi = summary["band"]
    lines = []
    for part, name in (("open", "open"), ("held_out", "held-out")):
        s = summary[part]
        if not s["rows"]:
            continue
        if not s["searched"]:
            lines.append(f"  {label}{name}: {s['rows']} rows, none searched")
            continue
        spare = s["min_spare_bytes"]
        gain = s["median_best_vs_stated_frac"]
        lines.append(
            f"  {label}{name}: {s['searched']} of {s['rows']} searched; best layout's predicted MFU / the recipe's "
            f"measured MFU: median {s['median_ratio']:.3f} (10th-90th percentile {s['p10_ratio']:.3f}-"
            f"{s['p90_ratio']:.3f}), {s['in_band']} of {s['searched']} within {lo:g}-{hi:g}; least free memory of a "
            f"best layout beyond the headroom {units.format_bytes(spare) if spare is not None else '-'} "
            f"({s['below_headroom']} below it); the best predicted a median "
            f"{'-' if gain is None else f'{gain:+.1%}'} faster than the recipe's own layout")
    return lines


def table_rows(rows: list[SearchRow], *, holdout_rows: bool = False) -> list[list]:
    """One table row per run: the recipe's layout, the search's best, the ratio (hidden for held-out rows unless
    ``holdout_rows``) and the best layout's spare memory."""
    out = []
    for r in rows:
        hide = r.holdout and not holdout_rows
        ratio = r.ratio
        out.append([r.run_id, "yes" if r.holdout else "", r.model, r.gpu, r.gpus, r.precision, r.stated_layout,
                    r.best_layout or r.error[:60],
                    "" if r.best_mfu_frac is None else f"{r.best_mfu_frac:.1%}",
                    "hidden" if hide else ("" if r.measured_mfu_frac is None else f"{r.measured_mfu_frac:.1%}"),
                    "hidden" if hide else ("" if ratio is None else f"{ratio:.3f}"),
                    "" if r.best_vs_stated_frac is None else f"{r.best_vs_stated_frac:+.1%}",
                    "" if r.spare_bytes is None else units.format_bytes(r.spare_bytes)])
    return out


TABLE_COLUMNS = ("run", "held", "model", "GPU", "GPUs", "prec", "recipe tp/pp/vp/cp mb/gb", "search's best tp/pp/vp/cp",
                 "best MFU", "recipe MFU", "ratio", "best vs recipe (pred)", "free beyond headroom")


def print_section(rows: list[SearchRow], later: list[SearchRow], print_table, *, holdout_rows: bool = False,
                  table1: list[SearchRow] | None = None, moe: list[SearchRow] | None = None,
                  moe_later: list[SearchRow] | None = None) -> None:
    """The tables and summaries ``gpusim validate`` prints (``moe``, ``moe_later``: [issue 17] the MoE runs')."""

    def table(rs, title, heading):
        print_table(table_rows(rs, holdout_rows=holdout_rows), list(TABLE_COLUMNS), title=title,
                    justify=["left", "left", "left", "left", "right", "left", "left", "left"] + ["right"] * 5)
        print(heading)
        for line in summary_lines(summarize(rs)):
            print(line)

    def apart(rs, heading):
        print(heading)
        for line in summary_lines(summarize(rs), label="  "):
            print(line)

    if rows:
        table(rows, "The layout search against the tuned recipes (dense runs of validation/runs_dense.csv): the best "
                    "layout gpusim sweep finds at the run's GPUs, batch and sequence, its predicted MFU over the "
                    "recipe's measured MFU (ratio > 1: the search promises more than the tuned run reached)",
              "layout search vs tuned recipes (dense published runs):")
    if later:
        apart(later, "  the later releases' dense rows (validation/later_releases.csv, reported apart):")
    if table1:
        apart(table1, "  Narayanan et al. SC'21 Table 1 (validation/llm_parallel.csv: GPT 1.7B-1T on 32-3072 A100, the "
                      "authors' layouts; looked at while the model was built):")
    if moe:
        table(moe, "The layout search against the tuned MoE recipes (validation/runs_moe.csv, reported apart): the "
                   "best layout gpusim sweep finds at the run's GPUs, batch, sequence and MoE software, expert "
                   "parallelism searched too; the recipe columns are tp/pp/vp/cp/ep",
              "layout search vs tuned recipes (published MoE runs: the ratio carries the MoE step-time error too):")
    if moe_later:
        apart(moe_later, "  the later releases' MoE rows (validation/later_releases.csv, reported apart):")
