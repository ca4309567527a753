"""[stop 54] The same published layout on two GPUs (gpusim.validation_ab.gpu_swaps): the faster GPU's measured
speed-up against gpusim's and against the datasheet's peak ratio, the ``gpu-swap`` track-record band, and what
``gpusim compare`` prints under a comparison that changes the GPU alone."""

from __future__ import annotations

import math

import pytest

from gpusim import track_record as TR
from gpusim import validation_ab as VAB
from gpusim import validation_runs as R


def _row(run_id, gpu, measured_s, predicted_s, *, source="S", holdout=False, precision="fp8"):
    return R.RunRow(run_id=run_id, source_id=source, file="runs_x.csv", holdout=holdout, model="llama3-70b", gpu=gpu,
                    gpus=64, layout="1/1/1/1 2/256", precision=precision, metric="tokens_per_s_per_gpu",
                    measured=1.0, regimes=(), step_s=predicted_s, measured_step_s=measured_s)


KEY = {"model": "llama3-70b", "gpus": 64, "nodes": 16, "kind": "zero1", "tp": 1, "pp": 1, "vp": 1, "cp": 1,
       "ep": 1, "expert_tp": 1, "micro_batch": 2, "global_batch": 256, "seq_len": 8192, "uneven_pp": False,
       "precision": "fp8", "fp8_recipe": "current", "recompute": ""}


def test_a_swap_is_oriented_slow_to_fast_with_the_datasheet_beside_it():
    """Hand-worked (the docstring's): 4,040 and 5,003 tokens/s per GPU on GB200 and GB300 at one layout are steps in
    the ratio 5003 / 4040: a measured +23.8%; gpusim's steps 1.00 s and 0.80 s: +25.0%, an error of +1.2 points; the
    two GPUs' dense FP8 peaks are equal (5,000 TFLOP/s): the datasheet says +0%."""
    gb200 = _row("a", "gb200", 5003.0 / 4040.0, 1.00)
    gb300 = _row("b", "gb300", 1.0, 0.80)
    # a GPU's recipe may differ in a setting (here the activation offload): still a swap
    (p,) = VAB.gpu_swaps([(gb300, {**KEY, "node": "gb300-nvl72", "activation_offload_layers": 20}),
                          (gb200, {**KEY, "node": "gb200-nvl72", "activation_offload_layers": 40})])
    assert (p.slow_run, p.fast_run, p.slow_value, p.fast_value) == ("a", "b", "gb200", "gb300")
    assert p.measured_speedup_frac == pytest.approx(5003.0 / 4040.0 - 1.0)
    assert p.predicted_speedup_frac == pytest.approx(0.25)
    assert p.error_frac * 100 == pytest.approx(1.2, abs=0.05)
    assert p.datasheet_speedup_frac == pytest.approx(0.0)
    assert p.datasheet_error_frac == pytest.approx(-p.measured_speedup_frac)
    assert p.direction_ok is True


def test_only_one_source_one_layout_one_precision_and_two_gpus_pair():
    a, b = _row("a", "gb200", 1.2, 1.0), _row("b", "gb300", 1.0, 0.8)
    ka, kb = {**KEY, "node": "gb200-nvl72"}, {**KEY, "node": "gb300-nvl72"}
    assert VAB.gpu_swaps([(a, ka), (_row("b", "gb300", 1.0, 0.8, source="T"), kb)]) == []  # two sources
    assert VAB.gpu_swaps([(a, ka), (b, {**kb, "tp": 2})]) == []  # another layout
    assert VAB.gpu_swaps([(a, ka), (b, {**kb, "seq_len": 4096})]) == []  # another sequence
    assert VAB.gpu_swaps([(a, ka), (b, {**kb, "precision": "mxfp8", "fp8_recipe": "mxfp8"})]) == []  # precision
    assert VAB.gpu_swaps([(a, ka), (_row("b", "gb200", 1.0, 0.8), dict(ka))]) == []  # one GPU: an A/B pair's job
    unpredicted = _row("b", "gb300", 1.0, None)
    assert VAB.gpu_swaps([(a, ka), (unpredicted, kb)]) == []


def test_a_held_out_row_holds_the_swap_out_and_the_summary_keeps_the_parts_apart():
    a, b = _row("a", "b200", 1.3, 1.0), _row("b", "gb200", 1.0, 0.9, holdout=True)
    c, d = _row("c", "b200", 1.1, 1.0, source="T"), _row("d", "b300", 1.0, 1.0, source="T")
    swaps = VAB.gpu_swaps([(a, {**KEY, "node": "dgx-b200"}), (b, {**KEY, "node": "gb200-nvl72"}),
                           (c, {**KEY, "node": "dgx-b200"}), (d, {**KEY, "node": "dgx-b300"})])
    held = {p.slow_run: p.holdout for p in swaps}
    assert held == {"a": True, "c": False}
    s = VAB.summarize_swaps(swaps)
    assert s["open"]["pairs"] == 1 and s["held_out"]["pairs"] == 1
    # open: measured +10%, gpusim +0% (it calls the two GPUs equal), the datasheet +0% (equal FP8 peaks)
    assert s["open"]["median_abs_error_frac"] == pytest.approx(0.10)
    assert s["open"]["datasheet_median_abs_error_frac"] == pytest.approx(0.10)
    assert (s["open"]["direction_judged"], s["open"]["direction_right"], s["open"]["datasheet_direction_right"]) \
        == (1, 0, 0)
    # a held-out pair's runs and figures stay out of the rows unless asked for
    shown = {d["slow_run"] if "slow_run" in d else None for d in VAB.to_dicts(swaps)}
    assert shown == {"c", None}


def test_the_datasheet_figure_is_the_dense_peak_at_the_runs_precision():
    from gpusim.hwdb import load

    db = load()
    assert VAB._peak_flop_per_s(db, "gb200", "mxfp8") == pytest.approx(5000e12)  # MXFP8 at the FP8 peak
    assert VAB._peak_flop_per_s(db, "b200", "bf16") == pytest.approx(2250e12)
    assert math.isnan(VAB._peak_flop_per_s(db, "no-such-gpu", "bf16"))


def test_compare_names_the_gpu_swap_band_for_a_gpu_change_only():
    band = TR.load().get("gpu-swap")
    assert band is not None and band.rows >= 10  # the packaged band from validation/ (make track-record)
    rec = TR.what_if_record(["gpu"], llm=True, ratio=2.0)
    assert rec["key"] == "gpu-swap" and "reason" not in rec
    lo, hi = rec["throughput_ratio_range"]
    assert lo < 2.0 < hi
    assert TR.what_if_record(["node", "nodes"], llm=True, ratio=1.2)["key"] == "gpu-swap"
    # the GPU and a degree together: neither band applies, and the reason says what else changed
    mixed = TR.what_if_record(["gpu", "strategy.tp"], llm=True, ratio=1.2)
    assert mixed["key"] == "what-if" and "tp" in mixed["reason"]
    assert TR.what_if_record(["gpu"], llm=False, ratio=1.2)["key"] == "what-if"  # not an LLM layout
    # a settings-only change still gets the A/B band
    assert TR.what_if_record(["strategy.moe_dispatcher"], llm=True, ratio=1.1)["key"] == "what-if"


def test_validate_prints_the_swaps_on_the_projects_tables():
    """The packaged tables hold same-layout pairs on two GPUs, open and held out; gpusim orders the faster GPU of
    every open pair whose measured speed-up is above the noise at least as often as the datasheet does."""
    from gpusim.hwdb import load

    db = load()
    runs = R.run(db=db)
    later = R.run([R.later_releases_path()], db=db) if R.later_releases_path() else []
    swaps = VAB.gpu_swaps(VAB.scenario_items(runs + later, db=db), db=db)
    s = VAB.summarize_swaps(swaps)
    assert s["open"]["pairs"] >= 5 and s["held_out"]["pairs"] >= 5
    assert s["open"]["direction_right"] >= s["open"]["datasheet_direction_right"]
    band = TR.compute(db, runs=runs, later=later, ab=[], swaps=swaps, dp=[], fsdp=[], sweeps=[], searched=[],
                      searched_moe=[])["gpu-swap"]
    assert band.rows == len(swaps) and band.held_out_rows == sum(p.holdout for p in swaps)
