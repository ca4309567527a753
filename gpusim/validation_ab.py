"""[issue 17] Published A/B comparisons: what one software setting does to a step, measured against what gpusim says.

A row of the published-runs tables (``validation/runs_*.csv``, ``validation/later_releases.csv``) carries the error of
everything gpusim gets wrong about its run at once. Two rows of one source (the same ``source_id``: one publication, one
container) that state the same model, GPU, GPU count, degrees, micro-batch, global batch and sequence, and whose
scenarios differ in one setting (or two, named together: :data:`MAX_SETTINGS`), isolate that setting: the precision
(BF16 / FP8 / MXFP8 and its scaling recipe), the MoE dispatcher, the expert-parallel overlap, the CUDA-graph scope,
the recomputation, the router, ...
The measured speed-up ``t_A / t_B - 1`` (``A``: the slower run) is then compared with gpusim's ``p_A / p_B - 1`` for
the same two scenarios. A mechanism that is right moves the prediction as far as the measurement moved, whatever the
absolute error both rows share (issue 17 item 2: "The FP8/BF16 step-time ratio is a number the model must get right per
GPU generation").

Pairs are found, not listed: every pair of step-time rows of one source whose scenarios (:func:`scenario_key`, built
from :func:`gpusim.validation_runs.row_setup`, the settings each row's notes state) agree on the layout and differ in
the fields of one or two settings (:data:`SETTINGS`) is a pair. A pair with a held-out row is held out: only its
summary is printed. Nothing in gpusim was set from these pairs. The peak-memory rows pair by the same rule
(:func:`memory_pairs`), the comparisons published as two figures come from ``validation/ab_published.csv``
(:func:`published_pairs`).

**Release steps** [stop 47] (:func:`release_steps`): the Megatron-Bridge performance tables measured many layouts in
release after release. Each layout's step from one release table to the next is a comparison of the same kind with
the container changed as well: where the rows state no setting differently, the measured change is the container's
alone (gpusim predicts none), the spread any row's error inherits; where the newer recipe turned a setting on, gpusim's
speed-up from the settings alone is set against the measured one.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass

from gpusim.stats import quantile

#: the scenario fields that make the layout: a pair agrees on all of them
LAYOUT_FIELDS = ("model", "node", "gpus", "nodes", "kind", "tp", "pp", "vp", "cp", "ep", "expert_tp", "micro_batch",
                 "global_batch", "seq_len", "uneven_pp")
#: the settings a pair may differ in, each with the scenario fields it moves together (the precision and its FP8
#: recipe are one setting; the stated recomputation and its modules are another)
SETTINGS = {
    "precision": ("precision", "fp8_recipe"),
    "recompute": ("recompute", "recompute_modules"),
    "cuda graphs": ("cuda_graph_scope",),
    "dispatcher": ("moe_dispatcher",),
    "EP overlap": ("ep_overlap",),
    "router": ("router",),
    "fused expert MLP": ("moe_fused_mlp",),
    "attention": ("flash_attention",),
    "gradient dtype": ("grad_dtype",),
    "FP8 activations": ("fp8_activations",),
    "FP8 transpose cache": ("fp8_transpose_cache",),
    "router padding": ("moe_router_padding",),
    "TP overlap": ("tp_comm_overlap",),
    "cross entropy": ("cross_entropy",),
    "capacity factor": ("moe_capacity_factor",),
    "activation offload": ("activation_offload_layers",),
    "CP exchange": ("cp_comm",),
    "PP overlap": ("pp_p2p_overlap",),
    "optimizer state dtype": ("opt_state_dtype",),
}
_FIELD_SETTING = {f: name for name, fields in SETTINGS.items() for f in fields}
#: the most settings a pair may differ in: two runs that change two settings at once (FP8 and the CUDA graphs that
#: came with it) still test the two mechanisms together; the table names both
MAX_SETTINGS = 2
#: a measured speed-up smaller than this is "no change" for the direction check (run-to-run noise of the tables)
NOISE_FRAC = 0.03


def scenario_key(row: dict, setup) -> dict:
    """The fields a pair is matched on: the layout (:data:`LAYOUT_FIELDS`) and every setting's fields, from a row of
    the runs tables and its :class:`gpusim.validation_runs.RowSetup`. A setting the row does not state, or states at
    its default (:class:`gpusim.strategy.Strategy`'s: ``ep_overlap=none`` is no overlap), is absent."""
    from gpusim.strategy import Strategy

    defaults = {n: f.default for n, f in Strategy.model_fields.items() if n not in LAYOUT_FIELDS}

    def is_default(k, v) -> bool:
        if k not in defaults:
            return False
        d = defaults[k]
        return v == d or (v in (None, ()) and d in (None, ()))

    key = {k: v for k, v in setup.base.items() if k != "workload" and not is_default(k, v)}
    key["model"] = row["model"]
    key["recompute"] = setup.stated_rc or ""
    if setup.spec is not None:
        key["flash_attention"] = bool(setup.spec.flash_attention)
    if "router" in setup.opts:
        key["router"] = setup.opts["router"]
    return key


def differing_settings(a: dict, b: dict) -> set[str] | None:
    """The settings (:data:`SETTINGS` names) in which two scenario keys differ, or None where they differ in the layout
    or in a field no setting names (not a clean A/B pair)."""
    out = set()
    for f in set(a) | set(b):
        if a.get(f) == b.get(f):
            continue
        if f in LAYOUT_FIELDS or f not in _FIELD_SETTING:
            return None
        out.add(_FIELD_SETTING[f])
    return out


@dataclass
class AbPair:
    setting: str
    source_id: str
    model: str
    gpu: str
    gpus: int
    layout: str
    slow_run: str  # A: the run measured slower
    fast_run: str  # B
    slow_value: str  # the setting's value in A and in B, as the scenarios hold it
    fast_value: str
    holdout: bool
    measured_speedup_frac: float  # t_A / t_B - 1 >= 0
    predicted_speedup_frac: float  # gpusim's p_A / p_B - 1 (< 0: gpusim says B is the slower)

    @property
    def error_frac(self) -> float:
        """Predicted speed-up minus measured (fractions; > 0: gpusim credits the setting with more than it gave)."""
        return self.predicted_speedup_frac - self.measured_speedup_frac

    @property
    def direction_ok(self) -> bool | None:
        """Whether gpusim has the faster run faster; None where the measured speed-up is within :data:`NOISE_FRAC`."""
        if self.measured_speedup_frac < NOISE_FRAC:
            return None
        return self.predicted_speedup_frac > 0.0


def _value(key: dict, setting: str) -> str:
    """The value of one setting (or of each of a compound's, joined with ``; ``) in a scenario key; a field the key
    leaves out shows :class:`gpusim.strategy.Strategy`'s default where it names one (``alltoall``), else ``none``."""
    from gpusim.strategy import Strategy

    def shown(f):
        v = key.get(f)
        if v in (None, "", ()) and f in Strategy.model_fields and f != "fp8_recipe":
            v = Strategy.model_fields[f].default
        return "+".join(v) if isinstance(v, tuple) else ("" if v in (None, "", ()) else str(v))

    out = []
    for name in setting.split(" + "):
        out.append(" ".join(t for t in (shown(f) for f in SETTINGS[name]) if t) or "none")
    return "; ".join(out)


def _matched(usable, measure):
    """``(setting, (A, key A), (B, key B))`` for every two of ``usable`` (``(RunRow, scenario key)``) of one source
    whose scenarios differ in one or two settings (:func:`differing_settings`), ``A`` the one with the larger
    ``measure`` (its step, or the memory it held)."""
    for i, (ra, ka) in enumerate(usable):
        for rb, kb in usable[i + 1:]:
            if ra.source_id != rb.source_id:
                continue
            diff = differing_settings(ka, kb)
            if not diff or len(diff) > MAX_SETTINGS:
                continue
            a, b = sorted([(ra, ka), (rb, kb)], key=lambda x: -measure(x[0]))
            yield " + ".join(sorted(diff)), a, b


def pairs(items) -> list[AbPair]:
    """The A/B pairs of ``items``: ``(RunRow, scenario key)`` of step-time rows, predicted or not (rows without a
    prediction or a measured step are skipped). Pure: the key of each row comes from :func:`scenario_key`."""
    usable = [(r, k) for r, k in items if not r.is_memory and r.step_s and r.measured_step_s]
    return [AbPair(setting=setting, source_id=slow.source_id, model=str(slow.model).rsplit("/", 1)[-1], gpu=slow.gpu,
                   gpus=slow.gpus, layout=slow.layout, slow_run=slow.run_id, fast_run=fast.run_id,
                   slow_value=_value(ks, setting), fast_value=_value(kf, setting), holdout=slow.holdout or fast.holdout,
                   measured_speedup_frac=slow.measured_step_s / fast.measured_step_s - 1.0,
                   predicted_speedup_frac=slow.step_s / fast.step_s - 1.0)
            for setting, (slow, ks), (fast, kf) in _matched(usable, lambda r: r.measured_step_s)]


# ---- [stop 47] what one setting does to a run's peak memory -------------------------------------------------------

#: a measured saving smaller than this is "no change" for the direction check (the cards print GiB to 0.1-0.01)
MEMORY_NOISE_BYTES = 0.25 * 1024.0**3


@dataclass
class AbMemoryPair:
    setting: str
    source_id: str
    model: str
    gpu: str
    gpus: int
    layout: str
    more_run: str  # A: the run that held more memory
    less_run: str  # B
    more_value: str  # the setting's value in A and in B
    less_value: str
    holdout: bool
    measured_saving_bytes: float  # A's peak allocated memory less B's, as measured (>= 0)
    predicted_saving_bytes: float  # the same of gpusim's predictions of the two (< 0: gpusim says B holds more)

    @property
    def error_bytes(self) -> float:
        """Predicted saving minus measured (> 0: gpusim credits the setting with more memory than it saved)."""
        return self.predicted_saving_bytes - self.measured_saving_bytes

    @property
    def direction_ok(self) -> bool | None:
        """Whether gpusim has the run that held less memory lower; None within :data:`MEMORY_NOISE_BYTES`."""
        if self.measured_saving_bytes < MEMORY_NOISE_BYTES:
            return None
        return self.predicted_saving_bytes > 0.0


def memory_pairs(items) -> list[AbMemoryPair]:
    """The A/B pairs of the peak-memory rows (``validation/runs_memory.csv``) among ``items`` (``(RunRow, scenario
    key)``), by the rule of :func:`pairs`: what one or two settings (recomputed modules, above all) do to the peak
    memory a run held, measured against gpusim's allocated bytes for the two scenarios."""
    from gpusim import units

    usable = [(r, k) for r, k in items if r.is_memory and r.predicted is not None and r.measured]
    return [AbMemoryPair(setting=setting, source_id=more.source_id, model=str(more.model).rsplit("/", 1)[-1],
                         gpu=more.gpu, gpus=more.gpus, layout=more.layout, more_run=more.run_id, less_run=less.run_id,
                         more_value=_value(km, setting), less_value=_value(kl, setting),
                         holdout=more.holdout or less.holdout,
                         measured_saving_bytes=(more.measured - less.measured) * units.GIB,
                         predicted_saving_bytes=(more.predicted - less.predicted) * units.GIB)
            for setting, (more, km), (less, kl) in _matched(usable, lambda r: r.measured)]


def summarize_memory(ab: list[AbMemoryPair]) -> dict:
    """Per part (open, held out): pairs, the median absolute error of the saving (bytes), the median measured and
    predicted savings, and how many pairs whose measured saving exceeds :data:`MEMORY_NOISE_BYTES` gpusim orders
    the same way."""
    out = {}
    for part, held in (("open", False), ("held_out", True)):
        ps = [p for p in ab if p.holdout == held]
        judged = [p.direction_ok for p in ps if p.direction_ok is not None]
        out[part] = {"pairs": len(ps), "median_abs_error_bytes": quantile([abs(p.error_bytes) for p in ps], 0.5),
                     "median_measured_saving_bytes": quantile([p.measured_saving_bytes for p in ps], 0.5),
                     "median_predicted_saving_bytes": quantile([p.predicted_saving_bytes for p in ps], 0.5),
                     "direction_judged": len(judged), "direction_right": sum(judged)}
    return out


def print_memory(ab: list[AbMemoryPair], print_table, *, holdout_rows: bool = False) -> None:
    """The peak-memory pairs (open; held-out ones with ``holdout_rows``) and the summary."""
    if not ab:
        return
    gib = 1024.0**3
    shown = [p for p in ab if holdout_rows or not p.holdout]
    table = [[p.setting, p.model[:18], p.gpu, p.gpus, p.layout, "yes" if p.holdout else "",
              f"{p.more_value} -> {p.less_value}", f"{p.measured_saving_bytes / gib:+.2f}",
              f"{p.predicted_saving_bytes / gib:+.2f}", f"{p.error_bytes / gib:+.2f}"]
             for p in sorted(shown, key=lambda p: (p.model, p.setting, p.more_run))]
    if table:
        print_table(table, ["setting", "model", "GPU", "GPUs", "tp/pp/vp/cp(/ep) mb/gb", "held",
                            "more -> less memory", "measured saving GiB", "gpusim GiB", "error GiB"],
                    title="Peak memory, one setting changed (validation/runs_memory.csv pairs): the memory the change "
                          "saved, measured and as gpusim predicts it",
                    justify=["left", "left", "left", "right", "left", "left", "left"] + ["right"] * 3)
    s = summarize_memory(ab)
    for part, label in (("open", "open"), ("held_out", "held-out")):
        a = s[part]
        if not a["pairs"]:
            continue
        print(f"peak-memory A/B pairs, {label}: {a['pairs']}; the saving's error median "
              f"{a['median_abs_error_bytes'] / gib:.2f} GiB (measured median "
              f"{a['median_measured_saving_bytes'] / gib:.2f} "
              f"GiB, gpusim {a['median_predicted_saving_bytes'] / gib:.2f}); the run that held less ordered right in "
              f"{a['direction_right']} of {a['direction_judged']} pairs whose saving exceeds "
              f"{MEMORY_NOISE_BYTES / gib:.2f} GiB (not used to set anything)")


def scenario_items(results, *, paths=None, db=None) -> list[tuple]:
    """``(RunRow, scenario key)`` of every predicted row of ``results`` (:class:`gpusim.validation_runs.RunRow` of the
    runs tables ``paths``, default every ``validation/runs_*.csv`` and the later releases, as ``gpusim validate``
    predicted them): each row's scenario is rebuilt from its table's row (no new simulation)."""
    from gpusim import validation_runs as R
    from gpusim.hwdb import load

    if not results:
        return []
    db = db or load()
    paths = [*R.default_paths(), R.later_releases_path()] if paths is None else paths
    by_file = {}
    for f, row in R.read_rows([p for p in paths if p is not None]):
        by_file[(f, row["run_id"])] = row
    items = []
    for r in results:
        row = by_file.get((r.file, r.run_id))
        if row is None or r.error:
            continue
        scratch = R.RunRow(run_id=r.run_id, source_id=r.source_id, file=r.file, holdout=r.holdout, model=r.model,
                           gpu=r.gpu, gpus=r.gpus, layout=r.layout, precision=r.precision, metric=r.metric,
                           measured=r.measured, regimes=r.regimes)
        setup = R.row_setup(row, scratch, db)
        if setup is not None:
            items.append((r, scenario_key(row, setup)))
    return items


def run(results, *, paths=None, db=None) -> list[AbPair]:
    """The A/B pairs among ``results`` (:func:`scenario_items`)."""
    return pairs(scenario_items(results, paths=paths, db=db))


# ---- [stop 54] the same published layout on two GPUs ---------------------------------------------------------------

#: the scenario fields two runs on different GPUs may differ in besides their software settings: the GPU, the node
#: template it comes in and the node count that follows from it
SWAP_FIELDS = ("gpu", "node", "nodes")


@dataclass
class SwapPair(AbPair):
    """[stop 54] Two runs of one source (one release table) with the same model, GPU count, degrees, micro-batch,
    global batch, sequence and precision on two GPUs (``slow_value`` / ``fast_value``: the GPUs). The measured
    speed-up of the faster GPU against gpusim's for the same two scenarios, each with the settings its own row states
    (a GPU's recipe may differ in a setting: gpusim predicts each row as it ran), and against the datasheet's answer,
    the ratio of the two GPUs' dense peaks at the run's precision (``datasheet_speedup_frac``)."""

    datasheet_speedup_frac: float = math.nan

    @property
    def datasheet_error_frac(self) -> float:
        """The datasheet's speed-up minus the measured one (fractions)."""
        return self.datasheet_speedup_frac - self.measured_speedup_frac


def _peak_flop_per_s(db, gpu: str, precision: str) -> float:
    """The GPU's dense peak FLOP/s at a run's precision (hwdb), NaN for a GPU the database does not know."""
    from gpusim.errors import UnknownIdError
    from gpusim.rows import PEAK_KEY

    try:
        v = db.gpu(gpu).peak_flop_per_s(PEAK_KEY.get(precision, "bf16"))
    except UnknownIdError:  # no datasheet figure to compare with
        return math.nan
    return math.nan if v is None else float(v)


def gpu_swaps(items, *, db=None) -> list[SwapPair]:
    """[stop 54] The GPU swaps among ``items`` (``(RunRow, scenario key)`` of step-time rows, :func:`scenario_items`):
    every two rows of one source whose scenario keys agree on the layout (:data:`LAYOUT_FIELDS` but the node) and the
    precision and whose GPUs differ (the GPU or node template, :data:`SWAP_FIELDS`); settings may differ. The slower
    run (``slow_run``) is the one measured slower; a pair with a held-out row is held out. Hand-worked: 4,040 and
    5,003 tokens/s per GPU on GB200 and GB300 at one layout measure a +23.8% speed-up; gpusim's steps 1.00 s and
    0.80 s predict +25.0%: an error of +1.2 points."""
    from gpusim.hwdb import load

    db = db or load()
    same = tuple(f for f in LAYOUT_FIELDS if f not in SWAP_FIELDS) + ("precision", "fp8_recipe")
    usable = [(r, k) for r, k in items if not r.is_memory and r.step_s and r.measured_step_s]
    out = []
    for i, (ra, ka) in enumerate(usable):
        for rb, kb in usable[i + 1:]:
            if ra.source_id != rb.source_id or ra.gpu == rb.gpu:
                continue
            if any(ka.get(f) != kb.get(f) for f in same):
                continue
            slow, fast = sorted([ra, rb], key=lambda r: -r.measured_step_s)
            peak_slow = _peak_flop_per_s(db, slow.gpu, slow.precision)
            peak_fast = _peak_flop_per_s(db, fast.gpu, fast.precision)
            out.append(SwapPair(setting="GPU", source_id=slow.source_id, model=str(slow.model).rsplit("/", 1)[-1],
                                gpu=f"{slow.gpu} -> {fast.gpu}", gpus=slow.gpus, layout=slow.layout,
                                slow_run=slow.run_id, fast_run=fast.run_id, slow_value=slow.gpu, fast_value=fast.gpu,
                                holdout=slow.holdout or fast.holdout,
                                measured_speedup_frac=slow.measured_step_s / fast.measured_step_s - 1.0,
                                predicted_speedup_frac=slow.step_s / fast.step_s - 1.0,
                                datasheet_speedup_frac=peak_fast / peak_slow - 1.0))
    return out


def summarize_swaps(swaps: list[SwapPair]) -> dict:
    """[stop 54] Per part (open, held out): pairs, the median and 90th-percentile absolute error of gpusim's speed-up
    and of the datasheet's (fraction points), the median signed errors, and how many pairs whose measured speed-up
    exceeds :data:`NOISE_FRAC` each orders the same way (the datasheet calls equal peaks a tie: not right)."""
    def block(ps):
        judged = [p for p in ps if p.direction_ok is not None]
        return {"pairs": len(ps),
                "median_abs_error_frac": quantile([abs(p.error_frac) for p in ps], 0.5),
                "p90_abs_error_frac": quantile([abs(p.error_frac) for p in ps], 0.9),
                "median_signed_error_frac": quantile([p.error_frac for p in ps], 0.5),
                "datasheet_median_abs_error_frac": quantile([abs(p.datasheet_error_frac) for p in ps], 0.5),
                "datasheet_p90_abs_error_frac": quantile([abs(p.datasheet_error_frac) for p in ps], 0.9),
                "median_measured_speedup_frac": quantile([p.measured_speedup_frac for p in ps], 0.5),
                "direction_judged": len(judged), "direction_right": sum(bool(p.direction_ok) for p in judged),
                "datasheet_direction_right": sum(p.datasheet_speedup_frac > 0.0 for p in judged)}

    return {part: block([p for p in swaps if p.holdout == held]) for part, held in (("open", False),
                                                                                     ("held_out", True))}


def print_swaps(swaps: list[SwapPair], print_table, *, holdout_rows: bool = False) -> None:
    """[stop 54] The GPU-swap table (open pairs; held-out ones with ``holdout_rows``) and its summary lines."""
    if not swaps:
        return
    shown = [p for p in swaps if holdout_rows or not p.holdout]
    table = [[p.source_id, p.model[:18], p.gpu, p.gpus, p.layout, "yes" if p.holdout else "",
              f"{p.measured_speedup_frac:+.1%}", f"{p.predicted_speedup_frac:+.1%}", f"{p.error_frac * 100:+.1f}",
              f"{p.datasheet_speedup_frac:+.1%}"]
             for p in sorted(shown, key=lambda p: (p.gpu, p.model, p.source_id))]
    print_table(table, ["source", "model", "slower -> faster GPU", "GPUs", "tp/pp/vp/cp(/ep) mb/gb", "held",
                        "measured speed-up", "gpusim speed-up", "error (pts)", "datasheet speed-up"],
                title="The same published layout on two GPUs (one source, one model, precision and layout): the "
                      "faster GPU's speed-up, measured, as gpusim predicts it and as the dense peaks say",
                justify=["left"] * 3 + ["right", "left", "left"] + ["right"] * 4)
    s = summarize_swaps(swaps)
    for part, label in (("open", "open"), ("held_out", "held-out")):
        a = s[part]
        if not a["pairs"]:
            continue
        print(f"GPU swaps, {label}: {a['pairs']} pairs; speed-up error median {a['median_abs_error_frac'] * 100:.1f} "
              f"points, p90 {a['p90_abs_error_frac'] * 100:.1f} (signed {a['median_signed_error_frac'] * 100:+.1f}; "
              f"measured median {a['median_measured_speedup_frac']:+.1%}); the datasheet's peak ratio: median "
              f"{a['datasheet_median_abs_error_frac'] * 100:.1f} points, "
              f"p90 {a['datasheet_p90_abs_error_frac'] * 100:.1f}; "
              f"faster GPU named right by gpusim in {a['direction_right']} and by the datasheet in "
              f"{a['datasheet_direction_right']} of {a['direction_judged']} pairs whose measured speed-up exceeds "
              f"{NOISE_FRAC:.0%} (not used to set anything)")

# ---- [stop 47] comparisons published as two figures of one setup ---------------------------------------------------

#: ``validation/ab_published.csv``: a source's A/B comparison given as two figures of one setup (the same layout and
#: settings, ``notes_common``, but for ``a_notes`` / ``b_notes``), where the source states no run of its own to enter
#: as a row of the runs tables (TFLOP/s only, an unstated container): only the ratio of the two figures is compared
PUBLISHED_FILE = "ab_published.csv"
PUBLISHED_COLUMNS = ("pair_id", "source_id", "source", "holdout", "model", "gpu", "gpus", "gpus_per_node", "tp", "pp",
                     "vp", "cp", "ep", "etp", "micro_batch", "global_batch", "seq_len", "precision", "recompute",
                     "metric", "unit", "notes_common", "a_notes", "a_value", "b_notes", "b_value", "notes")


def published_pairs(path=None, *, db=None) -> tuple[list[AbPair], list[str]]:
    """``(pairs, errors)`` of ``validation/ab_published.csv`` (or ``path``; no file, nothing): each row's two sides
    become two rows of the runs tables' schema (``run_id`` = ``pair_id/a``, ``/b``; the notes ``notes_common`` and the
    side's own), predicted by :func:`gpusim.validation_runs.predict_row` and paired as :func:`pairs` pairs the tables'
    rows. A row whose sides cannot be predicted, or differ in the layout or in more than :data:`MAX_SETTINGS` settings,
    is an error naming the row, not an exception."""
    from gpusim import validation_runs as R
    from gpusim.hwdb import load

    path = R.table_csv(PUBLISHED_FILE) if path is None else path
    if path is None:
        return [], []
    rows = [r for _, r in R.read_rows([path], columns=PUBLISHED_COLUMNS, id_column="pair_id")]
    db = db or load()
    out, errors = [], []
    for r in rows:
        items = []
        for side in ("a", "b"):
            row = {c: r.get(c, "") for c in R.COLUMNS if c in r}
            row.update(run_id=f"{r['pair_id']}/{side}", value=r[f"{side}_value"],
                       notes=f"{r['notes_common']} {r[f'{side}_notes']}")
            try:
                pred = R.predict_row(row, file=PUBLISHED_FILE, db=db)
            except (ValueError, KeyError) as e:  # a value that is not a number, a column left empty
                errors.append(f"{r['pair_id']}: side {side}: {e}")
                break
            setup = R.row_setup(row, R.RunRow(run_id="", source_id="", file="", holdout=False, model=r["model"],
                                              gpu=r["gpu"], gpus=0, layout="", precision="", metric="", measured=0.0,
                                              regimes=()), db)
            if pred.error or setup is None:
                errors.append(f"{r['pair_id']}: side {side}: {pred.error or 'not predicted'}")
                break
            items.append((pred, scenario_key(row, setup)))
        else:
            found = pairs(items)
            if not found:
                errors.append(f"{r['pair_id']}: its two sides differ in nothing gpusim models, in the layout or in "
                              f"more than {MAX_SETTINGS} settings")
            out += found
    return out, errors


# ---- [stop 47] one layout from one Megatron-Bridge release to the next -------------------------------------------

#: the Megatron-Bridge performance tables, one ``source_id`` per release: ``MBRIDGE_2509`` (25.09) ...
#: ``MBRIDGE_260801`` (26.08.01)
_RELEASE = re.compile(r"^MBRIDGE_(\d{4})(\d{2})?$")


def release_order(source_id: str) -> tuple[int, int] | None:
    """``(YYMM, patch)`` of a Megatron-Bridge release table's ``source_id`` (``MBRIDGE_260401`` -> ``(2604, 1)``), or
    None for any other source."""
    m = _RELEASE.match(source_id or "")
    return None if m is None else (int(m.group(1)), int(m.group(2) or 0))


def _release_name(order: tuple[int, int]) -> str:
    yymm, patch = order
    return f"{yymm // 100}.{yymm % 100:02d}" + (f".{patch:02d}" if patch else "")


@dataclass
class ReleaseStep:
    model: str
    gpu: str
    gpus: int
    layout: str
    precision: str
    older_run: str
    newer_run: str
    older_release: str
    newer_release: str
    settings: str  # the settings the newer release's row states differently ("": the container alone)
    holdout: bool
    measured_speedup_frac: float  # t_older / t_newer - 1 (< 0: the newer release ran slower)
    predicted_speedup_frac: float  # gpusim's p_older / p_newer - 1: 0 where no stated setting changed

    @property
    def error_frac(self) -> float:
        return self.predicted_speedup_frac - self.measured_speedup_frac


def release_steps(items) -> list[ReleaseStep]:
    """Each layout's step from one Megatron-Bridge release table to the next that measured it: rows of two release
    sources (:func:`release_order`) with the same model, stated layout and precision, consecutive in release order,
    whose scenarios differ in nothing but settings (:func:`differing_settings`, any number of them). The measured
    speed-up carries the container's change too; gpusim's carries only the settings the rows state, so a step with no
    stated change measures the container alone (gpusim: 0)."""
    groups: dict[tuple, list] = {}
    for r, k in items:
        order = release_order(r.source_id)
        if order is None or r.is_memory or not r.step_s or not r.measured_step_s:
            continue
        layout = tuple(k.get(f) for f in LAYOUT_FIELDS) + (k.get("precision"), k.get("fp8_recipe"))
        groups.setdefault(layout, []).append((order, r, k))
    out = []
    for rows in groups.values():
        rows.sort(key=lambda x: x[0])
        for (oa, ra, ka), (ob, rb, kb) in zip(rows, rows[1:]):
            if oa == ob:
                continue
            diff = differing_settings(ka, kb)
            if diff is None:
                continue
            out.append(ReleaseStep(model=str(ra.model).rsplit("/", 1)[-1], gpu=ra.gpu, gpus=ra.gpus, layout=ra.layout,
                                   precision=ra.precision, older_run=ra.run_id, newer_run=rb.run_id,
                                   older_release=_release_name(oa), newer_release=_release_name(ob),
                                   settings=" + ".join(sorted(diff)), holdout=ra.holdout or rb.holdout,
                                   measured_speedup_frac=ra.measured_step_s / rb.measured_step_s - 1.0,
                                   predicted_speedup_frac=ra.step_s / rb.step_s - 1.0))
    return out


def summarize_releases(steps: list[ReleaseStep]) -> dict:
    """Per part (open, held out): the steps that changed no stated setting (the container alone: the median and
    90th percentile of the measured change's size, gpusim 0) and those that did (median measured and predicted
    speed-ups, median absolute error in fraction points)."""
    out = {}
    for part, held in (("open", False), ("held_out", True)):
        ps = [p for p in steps if p.holdout == held]
        same, moved = [p for p in ps if not p.settings], [p for p in ps if p.settings]
        sizes = [abs(p.measured_speedup_frac) for p in same]
        out[part] = {
            "container_only": {"steps": len(same), "median_abs_change_frac": quantile(sizes, 0.5),
                               "p90_abs_change_frac": quantile(sizes, 0.9)},
            "settings_changed": {
                "steps": len(moved),
                "median_measured_speedup_frac": quantile([p.measured_speedup_frac for p in moved], 0.5),
                "median_predicted_speedup_frac": quantile([p.predicted_speedup_frac for p in moved], 0.5),
                "median_abs_error_frac": quantile([abs(p.error_frac) for p in moved], 0.5)}}
    return out


def releases_to_dicts(steps: list[ReleaseStep], *, holdout_rows: bool = False) -> list[dict]:
    """One dict per step; a held-out step's runs and speed-ups only with ``holdout_rows``."""
    out = []
    for p in steps:
        d = {**asdict(p), "error_frac": p.error_frac}
        if p.holdout and not holdout_rows:
            d = {k: d[k] for k in ("model", "gpu", "gpus", "layout", "precision", "older_release", "newer_release",
                                   "settings", "holdout")}
        out.append(d)
    return out


def print_releases(steps: list[ReleaseStep], print_table, *, holdout_rows: bool = False) -> None:
    """The release steps that changed a stated setting (open; held-out ones with ``holdout_rows``) and the summary."""
    if not steps:
        return
    shown = [p for p in steps if p.settings and (holdout_rows or not p.holdout)]
    table = [[p.model[:18], p.gpu, p.gpus, p.layout, p.precision, "yes" if p.holdout else "",
              f"{p.older_release} -> {p.newer_release}", p.settings, f"{p.measured_speedup_frac:+.1%}",
              f"{p.predicted_speedup_frac:+.1%}", f"{p.error_frac * 100:+.1f}"]
             for p in sorted(shown, key=lambda p: (p.model, p.gpu, p.layout, p.older_release))]
    if table:
        print_table(table, ["model", "GPU", "GPUs", "tp/pp/vp/cp(/ep) mb/gb", "prec", "held", "releases",
                            "settings changed", "measured speed-up", "gpusim speed-up", "error (pts)"],
                    title="One layout from one Megatron-Bridge release to the next, where the newer recipe changed a "
                          "stated setting: the speed-up measured (container and settings) and gpusim's (settings)",
                    justify=["left", "left", "right", "left", "left", "left", "left", "left"] + ["right"] * 3)
    s = summarize_releases(steps)
    for part, label in (("open", "open"), ("held_out", "held-out")):
        c, m = s[part]["container_only"], s[part]["settings_changed"]
        if not (c["steps"] or m["steps"]):
            continue
        print(f"release to release, {label}: {c['steps']} steps with no stated setting changed (the container alone: "
              f"measured change median {c['median_abs_change_frac']:.1%}, p90 {c['p90_abs_change_frac']:.1%}; gpusim "
              f"0) and {m['steps']} with settings changed (measured speed-up median "
              f"{m['median_measured_speedup_frac']:+.1%}, gpusim {m['median_predicted_speedup_frac']:+.1%}, error "
              f"median {m['median_abs_error_frac'] * 100:.1f} points)")


def summarize(ab: list[AbPair]) -> dict:
    """Per part (open, held out) and per setting: pairs, the median absolute error of the speed-up (fraction points),
    the median measured and predicted speed-ups, and how many pairs whose measured speed-up exceeds
    :data:`NOISE_FRAC` gpusim orders the same way (held-out settings: their pair counts only)."""
    def block(ps):
        judged = [p.direction_ok for p in ps if p.direction_ok is not None]
        return {"pairs": len(ps), "median_abs_error_frac": quantile([abs(p.error_frac) for p in ps], 0.5),
                "median_measured_speedup_frac": quantile([p.measured_speedup_frac for p in ps], 0.5),
                "median_predicted_speedup_frac": quantile([p.predicted_speedup_frac for p in ps], 0.5),
                "direction_judged": len(judged), "direction_right": sum(judged)}

    out = {}
    for part, held in (("open", False), ("held_out", True)):
        ps = [p for p in ab if p.holdout == held]
        per = {s: [p for p in ps if p.setting == s] for s in sorted({p.setting for p in ps})}
        # a held-out setting's figures would be one pair's own where it has one: its count only
        out[part] = {"all": block(ps), "settings": {s: {"pairs": len(v)} if held else block(v) for s, v in per.items()}}
    return out


def to_dicts(ab: list, *, holdout_rows: bool = False) -> list[dict]:
    """One dict per pair (:class:`AbPair` or :class:`AbMemoryPair`); a held-out pair's runs, values, speed-ups or
    savings only with ``holdout_rows``."""
    out = []
    for p in ab:
        err = {"error_bytes": p.error_bytes} if isinstance(p, AbMemoryPair) else {"error_frac": p.error_frac}
        d = {**asdict(p), **err, "direction_ok": p.direction_ok}
        if p.holdout and not holdout_rows:
            d = {k: d[k] for k in ("setting", "source_id", "model", "gpu", "gpus", "layout", "holdout")}
        out.append(d)
    return out


def print_section(ab: list[AbPair], print_table, *, holdout_rows: bool = False) -> None:
    """The A/B table (open pairs; held-out ones with ``holdout_rows``) and its summary lines."""
    if not ab:
        return
    shown = [p for p in ab if holdout_rows or not p.holdout]
    table = [[p.setting, p.source_id, p.model[:18], p.gpu, p.gpus, p.layout, "yes" if p.holdout else "",
              f"{p.slow_value} -> {p.fast_value}", f"{p.measured_speedup_frac:+.1%}",
              f"{p.predicted_speedup_frac:+.1%}", f"{p.error_frac * 100:+.1f}"]
             for p in sorted(shown, key=lambda p: (p.setting, p.source_id, p.model, p.gpu))]
    print_table(table, ["setting", "source", "model", "GPU", "GPUs", "tp/pp/vp/cp(/ep) mb/gb", "held",
                        "slower -> faster run", "measured speed-up", "gpusim speed-up", "error (pts)"],
                title="Published A/B comparisons (two runs of one source, one layout, one setting changed): the "
                      "speed-up the change gave, measured and as gpusim predicts it",
                justify=["left"] * 4 + ["right", "left", "left", "left"] + ["right"] * 3)
    s = summarize(ab)
    for part, label in (("open", "open"), ("held_out", "held-out")):
        a = s[part]["all"]
        if not a["pairs"]:
            continue
        per = ", ".join(f"{name} {v['pairs']}" + ("" if part == "held_out" else
                                                   f" (median error {v['median_abs_error_frac'] * 100:.1f} pts)")
                        for name, v in s[part]["settings"].items())
        print(f"A/B pairs, {label}: {a['pairs']}; speed-up error median {a['median_abs_error_frac'] * 100:.1f} points "
              f"(measured median {a['median_measured_speedup_frac']:+.1%}, "
              f"gpusim {a['median_predicted_speedup_frac']:+.1%}); "
              f"faster run ordered right in {a['direction_right']} of {a['direction_judged']} pairs whose measured "
              f"speed-up exceeds {NOISE_FRAC:.0%}; by setting: {per} (not used to set anything)")
