"""Scenarios side by side, and which difference explains most of the gap.

:func:`compare` predicts two or more scenarios and, for every scenario after the first (the reference),

- lists the inputs that differ from the reference (flattened: ``gpu``, ``strategy.per_gpu_batch`` ...);
- attributes the throughput gap one change at a time: the reference with only that change applied is
  evaluated by the same model, and the change's effect is reported as samples/s and as a share of the gap.
  Changes that only make sense together (``gpus`` with ``nodes``) are applied together. Shares need not sum
  to 100%: changes interact (a faster network matters more at more nodes), and the remainder is reported as
  the interaction.

Scenarios come from :class:`gpusim.simulation.Scenario` objects, from keyword dicts, or from the JSON that
``gpusim predict --json`` prints (its ``scenario`` object is the scenario it ran: :func:`scenario_from_json`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from gpusim.errors import GpusimError, ScenarioError

#: inputs applied together when attributing a gap (a GPU count is only valid with its node count)
_GROUPS = (("gpus", "nodes"),)
#: inputs that are one choice together when they differ: the fabric inside a node is a link, its wiring and
#: whether peers talk directly (the planner's "Fabric inside a node" sets all three); only those that differ are named
_FABRIC = ("intra", "intra_topology", "p2p")
#: the figures shown side by side (key of StepResult.to_dict(), label, unit, higher is better?)
FIGURES = (("step_s", "step", "s", False), ("throughput_samples_per_s", "throughput", "samples/s", True),
           ("throughput_per_gpu_samples_per_s", "per GPU", "samples/s", True), ("speedup", "speedup", "x", True),
           ("scaling_efficiency_frac", "scaling efficiency", "frac", True), ("mfu_frac", "MFU", "frac", True),
           ("gpu_util_frac", "GPU busy", "frac", True), ("memory_per_gpu_bytes", "memory per GPU", "bytes", False),
           ("fits_in_memory", "fits", "", True), ("bottleneck", "bottleneck", "", None))


#: [issue 19] the figures an LLM comparison leads with: tokens per GPU and model FLOP/s, as NVIDIA's tables report
LLM_FIGURES = (("tokens_per_s_per_gpu", "tokens/s per GPU", "tokens/s", True),
               ("model_tflop_per_s_per_gpu", "model TFLOP/s per GPU", "TFLOP/s", True))


def is_llm(result: Mapping[str, Any]) -> bool:
    """A result (``StepResult.to_dict()``) of an LLM layout (it has memory per pipeline stage)."""
    return bool(result.get("memory_per_stage_bytes"))


def figures_for(results: Sequence[Mapping[str, Any]]) -> tuple:
    """The figures to show for these results: the LLM ones first when any is an LLM layout."""
    return (LLM_FIGURES + FIGURES) if any(is_llm(r) for r in results) else FIGURES


def scenario_from_json(doc: Mapping[str, Any], source: str = "JSON") -> tuple[Any, str | None]:
    """``(Scenario, calibration file or None)`` from the object ``gpusim predict --json`` printed."""
    from gpusim.simulation import Scenario

    scn = doc.get("scenario") if isinstance(doc, Mapping) else None
    if not isinstance(scn, Mapping):
        raise GpusimError(f"{source}: no \"scenario\" object: save one with `gpusim predict ... --json > FILE`")
    fields = {k: v for k, v in scn.items() if k in Scenario.model_fields and k != "workload"}
    try:
        return Scenario.create(**fields), doc.get("calibration_file")
    except ScenarioError as e:
        raise ScenarioError(f"{source}: {e}") from None


def flatten(scn) -> dict[str, Any]:
    """The scenario's inputs as ``{"gpu": ..., "strategy.per_gpu_batch": ...}`` (the workload object left out)."""
    d = scn.model_dump(exclude={"workload"})
    out = {k: v for k, v in d.items() if k != "strategy"}
    out.update({f"strategy.{k}": v for k, v in d["strategy"].items()})
    return out


def _changes(ref: dict, other: dict) -> list[tuple[str, ...]]:
    keys = [k for k in ref if ref[k] != other.get(k)]
    groups, done = [], set()
    for g in _GROUPS:
        if any(k in keys for k in g):
            groups.append(tuple(k for k in g))
            done |= set(g)
    fabric = tuple(k for k in _FABRIC if k in keys and k not in done)
    if fabric:
        groups.append(fabric)
        done |= set(fabric)
    groups += [(k,) for k in keys if k not in done]
    return groups


def _apply(scn, other_flat: dict, keys: Sequence[str]):
    ch = {k.removeprefix("strategy."): other_flat[k] for k in keys}
    return scn.with_changes(**ch)


def compare(scenarios: Sequence[Any], *, names: Sequence[str] | None = None, db=None, params=None,
            params_each: Sequence[Any] | None = None) -> dict[str, Any]:
    """Predict every scenario and explain each one's gap to the first. Returns a JSON-ready dict:

    ``names``, ``results`` (``StepResult.to_dict()`` per scenario), ``inputs`` (flattened, per scenario),
    ``differs`` (input keys that differ anywhere), and ``gaps``: for each scenario after the first, its
    throughput ratio to the reference and ``changes``: ``[{"inputs": {key: [ref, other]}, "alone_samples_per_s",
    "effect_samples_per_s", "share_of_gap_frac", "note"}]`` sorted by effect, ``explains_most`` (the first), and
    ``interaction_samples_per_s`` (the part of the gap no single change explains), ``track_record`` [stop 47]
    (:func:`gpusim.track_record.what_if_record`: the published A/B comparisons' band, its range carried to the
    throughput ratio, where the scenarios are LLM layouts that differ in software settings only).
    """
    from gpusim import track_record as TR
    from gpusim.hwdb import load
    from gpusim.simulation import Scenario, simulate

    if len(scenarios) < 2:
        raise ScenarioError("compare needs at least two scenarios")
    scns = [s if isinstance(s, Scenario) else Scenario.create(**s) for s in scenarios]
    db = db or load()
    names = list(names) if names else [chr(ord("A") + i) if i < 26 else f"S{i}" for i in range(len(scns))]
    plist = list(params_each) if params_each is not None else [params] * len(scns)
    results = [simulate(s, db=db, params=p) for s, p in zip(scns, plist)]
    as_dicts = [r.to_dict() for r in results]
    flats = [flatten(s) for s in scns]
    differs = [k for k in flats[0] if any(f.get(k) != flats[0][k] for f in flats[1:])]
    ref, ref_res, ref_params = scns[0], results[0], plist[0]
    ref_thr = ref_res.throughput_samples_per_s
    gaps = []
    for i in range(1, len(scns)):
        name, res, flat = names[i], results[i], flats[i]
        gap = res.throughput_samples_per_s - ref_thr
        def attempt(keys) -> dict[str, Any]:
            entry: dict[str, Any] = {"inputs": {k: [flats[0][k], flat[k]] for k in keys}}
            try:
                alone = simulate(_apply(ref, flat, keys), db=db, params=ref_params, recommend=False)
                entry["alone_samples_per_s"] = alone.throughput_samples_per_s
                entry["alone_tokens_per_s_per_gpu"] = alone.tokens_per_s_per_gpu
                entry["effect_samples_per_s"] = alone.throughput_samples_per_s - ref_thr
                entry["share_of_gap_frac"] = (entry["effect_samples_per_s"] / gap) if gap else None
                entry["fits_in_memory"] = alone.fits_in_memory
                entry["note"] = None if alone.fits_in_memory else "does not fit in memory on its own"
            except (GpusimError, ValueError) as e:  # a change that is impossible on its own (e.g. dp across nodes)
                entry.update(alone_samples_per_s=None, alone_tokens_per_s_per_gpu=None, effect_samples_per_s=None, share_of_gap_frac=None,
                             fits_in_memory=None, note=f"not possible on its own: {str(e)[:160]}")
            return entry

        groups = _changes(flats[0], flat)
        rows = [attempt(keys) for keys in groups]
        # a change impossible on its own (an NVSwitch fabric for a PCIe card) is evaluated with the other change
        # it needs (the GPU that has NVLink): the smallest pair that is possible, reported as one joint change
        for j, entry in enumerate(list(rows)):
            if entry["effect_samples_per_s"] is not None:
                continue
            for other in groups:
                if other == groups[j]:
                    continue
                joint = attempt(tuple(groups[j]) + tuple(other))
                if joint["effect_samples_per_s"] is not None:
                    joint["note"] = "possible only together" + (f"; {joint['note']}" if joint["note"] else "")
                    rows.append(joint)
                    break
        if plist[i] is not ref_params:
            rows.append({"inputs": {"calibration": ["reference's", "its own"]}, "alone_samples_per_s": None,
                         "effect_samples_per_s": None, "share_of_gap_frac": None, "fits_in_memory": None,
                         "note": "the scenarios use different calibrations: part of the gap is the machines'"})
        rows.sort(key=lambda r: -abs(r["effect_samples_per_s"]) if r["effect_samples_per_s"] is not None else 0.0)
        explained = sum(r["effect_samples_per_s"] or 0.0 for r in rows
                        if len(r["inputs"]) == 1 or r["inputs"].keys() in [set(g) for g in groups])
        gaps.append({"name": name, "reference": names[0], "throughput_ratio": res.throughput_samples_per_s / ref_thr,
                     "gap_samples_per_s": gap,
                     "gap_tokens_per_s_per_gpu": (res.tokens_per_s_per_gpu - ref_res.tokens_per_s_per_gpu
                                                  if res.tokens_per_s_per_gpu is not None
                                                  and ref_res.tokens_per_s_per_gpu is not None else None),
                     "mfu_frac": [ref_res.mfu_frac, res.mfu_frac], "changes": rows,
                     "explains_most": rows[0] if rows and rows[0]["effect_samples_per_s"] is not None else None,
                     "interaction_samples_per_s": gap - explained,
                     # [stop 47] how far such a change's predicted speed-up was from published A/B comparisons
                     "track_record": TR.what_if_record(
                         [k for k in flats[0] if flat.get(k) != flats[0][k]],
                         llm=is_llm(as_dicts[0]) and is_llm(as_dicts[i]),
                         ratio=res.throughput_samples_per_s / ref_thr,
                         calibrated=any(x is not None for x in plist))})
    return {"names": names, "results": as_dicts, "inputs": flats, "differs": differs,
            "gaps": gaps}


def sig(x: float) -> str:
    """4 significant digits without an exponent for everyday magnitudes: 47,450 / 1,483 / 0.5123."""
    return f"{x:,.0f}" if abs(x) >= 1000 else f"{x:.4g}"


def signed(x: float) -> str:
    """``+1,341`` / ``-12.5``."""
    return ("+" if x >= 0 else "-") + sig(abs(x))


def is_number(v: Any) -> bool:
    """A finite int or float, not a bool: a figure that can be compared (an LLM layout's one-GPU speedup is NaN)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def relative_change(ref: Any, v: Any) -> str:
    """``+21%``: ``v`` against ``ref``; empty where either is not a number (:func:`is_number`) or ``ref`` is 0."""
    return f"{v / ref - 1:+.0%}" if is_number(ref) and is_number(v) and ref else ""


def format_figure(unit: str, v: Any) -> str:
    """One cell of the side-by-side table (units of :data:`FIGURES`); a figure that is not a number (NaN: no
    one-GPU run to compare with) shows as ``-``."""
    from gpusim import units

    if isinstance(v, bool):
        return "yes" if v else "NO"
    if isinstance(v, str) or v is None:
        return str(v)
    if not math.isfinite(v):
        return "-"
    return {"s": units.format_duration, "bytes": units.format_bytes, "frac": lambda x: f"{x:.0%}",
            "x": lambda x: f"{x:.3g}x"}.get(unit, sig)(v)


def change_text(entry: Mapping[str, Any]) -> str:
    """``gpu h100-sxm -> a100-sxm4-80gb`` for one attributed change."""
    def show(v):
        if isinstance(v, float) and math.isfinite(v) and v.is_integer():
            return f"{int(v)}"
        return "-" if v is None else str(v)
    return ", ".join(f"{k.removeprefix('strategy.')} {show(a)} -> {show(b)}" for k, (a, b) in entry["inputs"].items())
