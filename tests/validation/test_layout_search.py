"""[issue 17] The layout search against the tuned recipes (gpusim.validation_search): the best layout gpusim sweep
finds for a published run's GPUs, batch and sequence, its predicted MFU over the MFU the tuned recipe measured."""

from __future__ import annotations

import csv
import json

import pytest

from gpusim import validation_runs as R
from gpusim import validation_search as VS
from gpusim.hwdb import load

DB = load()

# a row shaped like a published run (Llama 3 8B FP8 on 8 H100 at tp 1 pp 1, micro-batch 1; its figure is made up)
ROW = {"run_id": "t-h100-8b", "source_id": "TEST", "source": "test", "holdout": "0", "model": "llama3-8b",
       "gpu": "h100-sxm", "gpus": "8", "gpus_per_node": "8", "tp": "1", "pp": "1", "vp": "1", "cp": "1", "ep": "",
       "etp": "", "micro_batch": "1", "global_batch": "128", "seq_len": "4096", "precision": "fp8", "recompute": "",
       "metric": "step_time_s", "value": "4.5", "unit": "s", "notes": "strategy=zero1"}


def test_the_ratio_is_the_measured_step_over_the_best_predicted_step():
    row = VS.search_row(ROW, db=DB)
    assert row.error == "" and row.best_layout
    assert row.ratio == pytest.approx(4.5 / row.best_step_s, rel=1e-12)
    # both MFUs count the same FLOPs over the same peak: the recipe's is the best's scaled by the step times
    assert row.measured_mfu_frac == pytest.approx(row.best_mfu_frac * row.best_step_s / 4.5, rel=1e-12)
    assert row.spare_bytes >= 0.0  # never less free memory than the headroom
    assert row.layouts > row.feasible > 0


def test_the_best_is_never_slower_than_the_recipes_own_layout_when_that_fits():
    """The recipe's layout (tp 1 pp 1 cp 1, micro-batch 1, nothing recomputed) is one of the searched layouts, and
    it fits here, so the search's best is at least as fast as the model's prediction of it."""
    stated = R.predict_row(ROW, db=DB)
    assert "no fit" not in stated.chosen
    row = VS.search_row(ROW, db=DB)
    assert row.best_step_s <= stated.step_s * (1 + 1e-12)
    assert row.best_vs_stated_frac == pytest.approx(stated.step_s / row.best_step_s - 1.0)


def test_moe_and_memory_rows_are_not_searched_and_a_bad_row_says_why():
    assert VS.search_row({**ROW, "model": "qwen3-30b-a3b", "ep": "8"}, db=DB) is None
    assert VS.search_row({**ROW, "metric": "peak_allocated_gib", "value": "60", "unit": "GiB"}, db=DB) is None
    bad = VS.search_row({**ROW, "gpu": "no-such-gpu"}, db=DB)
    assert bad.ratio is None and "no node template" in bad.error
    assert VS.search_row(ROW, db=DB, kind="moe") is None  # a dense row is not an MoE one
    with pytest.raises(ValueError, match="not one of dense, moe"):
        VS.search_row(ROW, db=DB, kind="hybrid")


# [issue 17] an MoE row shaped like a published run (Qwen3-30B-A3B MXFP8 on 8 GB200, ep 8, micro-batch 4, the flex
# dispatcher; its figure is made up)
MOE_ROW = {**ROW, "run_id": "t-gb200-q30", "model": "qwen3-30b-a3b", "gpu": "gb200", "gpus_per_node": "72", "ep": "8",
           "micro_batch": "4", "global_batch": "512", "precision": "mxfp8", "value": "9.0",
           "notes": "strategy=zero1; moe_dispatcher=deepep"}


def test_an_moe_row_is_searched_over_the_expert_degree_with_its_software_kept():
    """The MoE search keeps the row's MoE software (here the flex dispatcher) and searches ep with the other degrees:
    the recipe's own layout (tp 1 pp 1, ep 8, micro-batch 4) is among the searched ones and fits, so the best is at
    least as fast as the model's prediction of it, and the ratio is the measured step over the best step."""
    stated = R.predict_row(MOE_ROW, db=DB)
    assert stated.error == "" and "no fit" not in stated.chosen
    row = VS.search_row(MOE_ROW, db=DB, kind="moe")
    assert row.error == "" and row.best_layout and row.spare_bytes >= 0.0
    assert row.best_step_s <= stated.step_s * (1 + 1e-12)
    assert row.ratio == pytest.approx(9.0 / row.best_step_s, rel=1e-12)
    assert VS.search_row(MOE_ROW, db=DB) is None  # not a dense row
    # the search ran the row's dispatcher: with the default all-to-all its best is slower
    a2a = VS.search_row({**MOE_ROW, "notes": "strategy=zero1"}, db=DB, kind="moe")
    assert a2a.best_step_s > row.best_step_s


def test_short_layout_names_the_expert_degree_where_experts_are_split():
    import numpy as np

    lay = {k: np.array([v]) for k, v in dict(tp=1, pp=2, vp=4, cp=1, ep=8, micro_batch=2, recompute=0,
                                              uneven=False).items()}
    assert VS.short_layout(lay, 0) == "1/2/4/1/8 mb 2"
    lay["ep"] = np.array([1])
    assert VS.short_layout(lay, 0) == "1/2/4/1 mb 2"


def _row(ratio, spare, holdout=False, stated=None):
    return VS.SearchRow(run_id="r", source_id="s", holdout=holdout, model="m", gpu="g", gpus=8, precision="bf16",
                        stated_layout="1/1/1/1 1/8", best_layout="1/1/1/1 mb 1", best_step_s=1.0,
                        measured_step_s=ratio, best_mfu_frac=0.5, stated_step_s=stated, spare_bytes=spare)


def test_summary_hand_worked():
    rows = [_row(0.90, 2e9, stated=1.1), _row(1.00, 1e9, stated=1.0), _row(1.05, 3e9), _row(1.20, 5e8),
            _row(1.00, -1.0, holdout=True)]
    s = VS.summarize(rows)
    o = s["open"]
    assert o["rows"] == o["searched"] == 4
    assert o["median_ratio"] == pytest.approx(1.025)  # (1.00 + 1.05) / 2
    assert o["p10_ratio"] == pytest.approx(0.90 + 0.3 * 0.10)  # position 0.3 between 0.90 and 1.00
    assert o["in_band"] == 2  # 1.00 and 1.05 in 0.95-1.08
    assert o["min_spare_bytes"] == 5e8 and o["below_headroom"] == 0
    assert o["median_best_vs_stated_frac"] == pytest.approx(0.05)  # (+10% and 0%)
    assert s["held_out"]["below_headroom"] == 1
    text = "\n".join(VS.summary_lines(s))
    assert "median 1.025" in text and "2 of 4 within 0.95-1.08" in text


def test_held_out_ratios_are_hidden_unless_asked():
    rows = [_row(1.0, 1e9, holdout=True), _row(1.1, 1e9)]
    d = VS.to_dicts(rows)
    assert d[0]["hidden"] and d[0]["ratio"] is None and d[0]["measured_step_s"] is None
    assert not d[1]["hidden"] and d[1]["ratio"] == pytest.approx(1.1)
    assert VS.to_dicts(rows, holdout_rows=True)[0]["ratio"] == pytest.approx(1.0)
    assert "hidden" in VS.table_rows(rows)[0]


def test_validate_reports_the_search_on_every_dense_run(capsys):
    from gpusim.cli import main

    assert main(["validate", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)["layout_search"]
    with open(VS.default_paths()[0], newline="") as fh:
        # (stop 51: runs_dense.csv holds hybrid Mamba-Transformer rows too, which the search leaves out: row_kind)
        dense = [r for r in csv.DictReader(fh) if VS.row_kind(R.regime(r)) == "dense"]
    rows = d["rows"]
    assert {r["run_id"] for r in rows} == {r["run_id"] for r in dense}
    assert all(r["error"] == "" and r["best_layout"] for r in rows)
    # the bar's second half: no best layout holds less free memory than the headroom
    assert all(r["spare_bytes"] >= 0 for r in rows)
    s = d["summary"]
    assert s["open"]["searched"] + s["held_out"]["searched"] == len(dense)
    assert s["open"]["below_headroom"] == s["held_out"]["below_headroom"] == 0
    assert d["later_releases"]["summary"]["open"]["searched"] > 0
    assert all(r["hidden"] and r["ratio"] is None for r in rows if r["holdout"])
    # [issue 17] every MoE run too (none hybrid), reported apart, with the same hiding and the headroom kept
    with open(VS.default_paths("moe")[0], newline="") as fh:
        moe = [r for r in csv.DictReader(fh) if VS.row_kind(R.regime(r)) == "moe"]
    m = d["moe"]
    assert {r["run_id"] for r in m["rows"]} == {r["run_id"] for r in moe}
    assert all(r["error"] == "" and r["best_layout"] and r["spare_bytes"] >= 0 for r in m["rows"])
    assert all(r["hidden"] and r["ratio"] is None for r in m["rows"] if r["holdout"])
    assert m["summary"]["open"]["searched"] + m["summary"]["held_out"]["searched"] == len(moe)
    later = m["later_releases"]["rows"]
    assert later and not any("nemotron" in r["model"] for r in later)  # the hybrid Nano rows are in neither


def test_narayanan_table1_rows_are_searched_with_the_software_of_2021():
    """[issue 17] The ten GPT rows of Narayanan et al. SC'21 Table 1: the authors' own layout (full recomputation,
    their tp, pp, vp, micro-batch) is among the searched ones, so where it fits the search's best is at least as fast
    as the model's prediction of it; the measured step is the paper's FLOPs over its TFLOP/s."""
    from gpusim import validation_llm as V

    rows = VS.run_table1(db=DB)
    assert len(rows) == 10 and all(r.error == "" and r.best_layout for r in rows)
    assert all(r.spare_bytes >= 0 for r in rows)
    assert all(r.best_vs_stated_frac >= -1e-12 for r in rows)
    assert not any("selective" in r.best_layout for r in rows)  # not offered in 2021
    with open(V.default_csv(), newline="") as fh:
        first = next(r for r in csv.DictReader(fh) if r["source_id"] == V.TABLE1)
    row = next(r for r in rows if r.model == first["model"])
    assert row.measured_step_s == pytest.approx(
        V.paper_flop_per_iteration(first) / (float(first["value"]) * 1e12 * int(first["gpus"])))


def test_unreadable_rows_come_back_with_an_error_not_a_traceback():
    bad = VS.search_row({**ROW, "value": "n/a"}, db=DB)
    assert bad.ratio is None and "unreadable row" in bad.error
    from gpusim import validation_llm as V

    with open(V.default_csv(), newline="") as fh:
        first = next(r for r in csv.DictReader(fh) if r["source_id"] == V.TABLE1)
    for change in ({"value": "n/a"}, {"gpus": ""}, {"value": "0"}):
        row = VS.search_table1_row({**first, **change}, db=DB)
        assert row.ratio is None and row.error, change
