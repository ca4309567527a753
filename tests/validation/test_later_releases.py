"""[stop 38] validation/later_releases.csv: the Megatron-Bridge performance tables of the releases after the curated
ones, as published (gpusim.validation_runs.LATER_RELEASES_FILE), reported apart by gpusim validate."""

from __future__ import annotations

import csv
import hashlib

import pytest

from gpusim import validation_runs as R


def _rows():
    with open(R.later_releases_path(), newline="") as fh:
        return list(csv.DictReader(fh))


def test_the_file_has_the_runs_schema_its_sources_and_the_stated_held_out_rule():
    path = R.later_releases_path()
    assert path is not None and path.name == R.LATER_RELEASES_FILE
    assert path not in R.default_paths()  # not mixed into the curated tables' figures
    with open(path, newline="") as fh:
        assert tuple(next(csv.reader(fh))) == R.COLUMNS
    rows = _rows()
    ids = [r["run_id"] for r in rows]
    assert len(ids) == len(set(ids)) and len(rows) >= 100
    curated = {r["run_id"] for p in R.default_paths() for r in csv.DictReader(open(p, newline=""))}
    assert not set(ids) & curated
    assert all("performance-summary" in r["source"] and r["source_id"].startswith("MBRIDGE_") for r in rows)
    # held out: sha1(run_id)[:8] mod 10 < 3, runs_dense.csv's rule, set before any row was predicted
    for r in rows:
        h = int(hashlib.sha1(r["run_id"].encode()).hexdigest()[:8], 16)
        assert (r["holdout"] == "1") == (h % 10 < 3), r["run_id"]
    assert sum(r["holdout"] == "1" for r in rows) >= len(rows) / 4


def test_every_row_predicts_with_its_stated_layout():
    res = R.run([R.later_releases_path()])
    assert [r.run_id for r in res if r.error] == []
    assert all(r.step_s > 0 and r.measured_step_s > 0 for r in res)


def test_validate_reports_them_apart(capsys):
    import json

    from gpusim.cli import main

    assert main(["validate", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    later = d["later_releases"]
    assert later["summary"]["open"]["all"]["rows"] + later["summary"]["holdout"]["all"]["rows"] == len(_rows())
    # a held-out row's measurement, prediction and error are hidden without --show-holdout
    held = [r for r in later["rows"] if r["holdout"]]
    assert held and all(r["hidden"] and r["step_s"] is None and r["signed_frac"] is None for r in held)
    # and they are not in the curated tables' figures
    assert not any(r["run_id"].startswith(("mb2604", "mb2606", "mb2608", "mb260201"))
                   for r in d["published_runs"]["rows"])
    # [stop 42] the spread of one stated layout's measurements over the open rows of both tables
    rep = d["repeated_layouts"]
    assert rep["layouts"] > 0 and rep["rows"] >= 2 * rep["layouts"] and rep["p90_spread_frac"] >= rep["median_spread_frac"]


def test_rows_naming_a_config_path_predict_from_any_working_directory(tmp_path, monkeypatch):
    """The tables name config.json paths relative to the repository root (tests/workload/configs/...): gpusim
    validate run elsewhere reads the same files, not 'cannot read model config' rows."""
    monkeypatch.chdir(tmp_path)
    rows = R.run([*R.default_paths(), R.later_releases_path()])
    named = [r for r in rows if r.model.endswith(".json")]
    assert named and [r.run_id for r in named if r.error] == []


def test_the_spread_of_one_stated_layouts_measurements():
    """[stop 42] repeated_layouts: the slowest over the fastest measured step of a stated layout that appears in more
    than one open row; held-out rows and peak-memory rows stay out, and a layout measured once is not a repeat."""
    from gpusim.validation_runs import MEMORY_METRICS, RunRow, repeated_layouts

    def row(run, step, *, holdout=False, layout="1/1/1/1/8 4/512", metric="tokens_per_s_per_gpu"):
        return RunRow(run_id=run, source_id="S", file="f", holdout=holdout, model="m", gpu="gb200", gpus=8,
                      layout=layout, precision="mxfp8", metric=metric, measured=1.0, regimes=("moe",),
                      measured_step_s=step)

    rows = [row("a", 10.0), row("b", 12.0), row("c", 11.0),        # one layout, three open rows: 12 / 10 - 1
            row("d", 30.0, holdout=True),                           # held out: its measurement stays out
            row("e", 5.0, layout="1/2/1/1/8 4/512"), row("f", 6.0, layout="1/2/1/1/8 4/512"),  # 6 / 5 - 1
            row("g", 7.0, layout="2/1/1/1/8 4/512"),                # measured once: not a repeat
            row("h", 99.0, metric=next(iter(MEMORY_METRICS)))]      # a peak-memory row
    rep = repeated_layouts(rows)
    assert rep["layouts"] == 2 and rep["rows"] == 5
    assert rep["median_spread_frac"] == pytest.approx((0.2 + 0.2) / 2)
    assert repeated_layouts([row("x", 3.0)])["layouts"] == 0
