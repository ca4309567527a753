"""[issue 17] Published A/B comparisons (gpusim.validation_ab): two runs of one source, one layout, one or two
settings changed; the speed-up the change gave against gpusim's."""

from __future__ import annotations

import json

import pytest

from gpusim import validation_ab as VAB
from gpusim import validation_runs as R


def _row(run_id, measured_s, predicted_s, *, source="S", holdout=False, metric="step_time_s"):
    return R.RunRow(run_id=run_id, source_id=source, file="runs_x.csv", holdout=holdout, model="m", gpu="b200",
                    gpus=8, layout="1/1/1/1 1/8", precision="bf16", metric=metric, measured=measured_s,
                    regimes=(), step_s=predicted_s, measured_step_s=measured_s)


LAYOUT = {"model": "m", "node": "dgx-b200", "gpus": 8, "nodes": 1, "kind": "zero1", "tp": 1, "pp": 1, "vp": 1,
          "cp": 1, "ep": 8, "expert_tp": 1, "micro_batch": 1, "global_batch": 8, "seq_len": 4096,
          "uneven_pp": False, "recompute": ""}


def test_settings_are_told_apart_from_the_layout():
    bf16 = {**LAYOUT, "precision": "bf16"}
    fp8 = {**LAYOUT, "precision": "fp8", "fp8_recipe": "current"}
    assert VAB.differing_settings(bf16, fp8) == {"precision"}  # the precision and its recipe: one setting
    assert VAB.differing_settings(bf16, {**bf16, "tp": 2}) is None  # another layout: no pair
    assert VAB.differing_settings(bf16, {**bf16, "made_up_field": 1}) is None  # a field no setting names: no pair
    graphs = {**fp8, "cuda_graph_scope": ("full_iteration",)}
    assert VAB.differing_settings(bf16, graphs) == {"precision", "cuda graphs"}
    assert VAB.differing_settings(bf16, dict(bf16)) == set()


def test_a_pair_is_oriented_slow_to_fast_with_both_speedups():
    """Hand-worked: measured 12 s (bf16) against 10 s (fp8): +20%; gpusim 11 s against 10 s: +10%; error -10 points."""
    a, b = _row("a", 12.0, 11.0), _row("b", 10.0, 10.0)
    ka, kb = {**LAYOUT, "precision": "bf16"}, {**LAYOUT, "precision": "fp8", "fp8_recipe": "current"}
    (p,) = VAB.pairs([(b, kb), (a, ka)])
    assert (p.slow_run, p.fast_run, p.setting) == ("a", "b", "precision")
    assert (p.slow_value, p.fast_value) == ("bf16", "fp8 current")
    assert p.measured_speedup_frac == pytest.approx(0.20)
    assert p.predicted_speedup_frac == pytest.approx(0.10)
    assert p.error_frac == pytest.approx(-0.10) and p.direction_ok is True
    # gpusim has the other run faster: the direction is wrong
    (q,) = VAB.pairs([(_row("a", 12.0, 9.0), ka), (b, kb)])
    assert q.direction_ok is False and q.predicted_speedup_frac == pytest.approx(-0.10)
    # a measured change inside the noise is not judged
    (n,) = VAB.pairs([(_row("a", 10.2, 9.0), ka), (b, kb)])
    assert n.direction_ok is None


def test_only_rows_of_one_source_with_few_changes_pair():
    k0 = {**LAYOUT, "precision": "bf16"}
    k3 = {**LAYOUT, "precision": "fp8", "cuda_graph_scope": ("full_iteration",), "moe_dispatcher": "deepep"}
    assert VAB.pairs([(_row("a", 12.0, 11.0, source="S1"), k0), (_row("b", 10.0, 10.0, source="S2"), k3)]) == []
    assert VAB.pairs([(_row("a", 12.0, 11.0), k0), (_row("b", 10.0, 10.0), k3)]) == []  # three settings at once
    assert VAB.pairs([(_row("a", 12.0, 11.0), k0), (_row("b", 10.0, 10.0), dict(k0))]) == []  # nothing changed
    mem = _row("b", 10.0, 10.0, metric="peak_allocated_gib")
    assert VAB.pairs([(_row("a", 12.0, 11.0), k0), (mem, {**k0, "precision": "fp8"})]) == []


def test_a_held_out_row_holds_its_pair_out_and_hides_its_figures():
    k0, k1 = {**LAYOUT, "precision": "bf16"}, {**LAYOUT, "precision": "mxfp8"}
    ab = VAB.pairs([(_row("a", 12.0, 11.0, holdout=True), k0), (_row("b", 10.0, 10.0), k1)])
    assert ab[0].holdout
    (hidden,) = VAB.to_dicts(ab)
    assert "measured_speedup_frac" not in hidden and "slow_run" not in hidden and hidden["setting"] == "precision"
    (shown,) = VAB.to_dicts(ab, holdout_rows=True)
    assert shown["measured_speedup_frac"] == pytest.approx(0.2)
    s = VAB.summarize(ab)
    assert s["open"]["all"]["pairs"] == 0 and s["held_out"]["all"]["pairs"] == 1
    assert s["held_out"]["settings"] == {"precision": {"pairs": 1}}  # one pair's own figures would show: a count


def test_the_project_tables_give_pairs_that_differ_in_their_settings_only(db):
    """Every pair found in the runs tables shares its source and layout; the DeepSeek-V3 BF16 / MXFP8 pair of the 25.11
    table on 256 GB300 is among them, its speed-up the two rows' measured steps."""
    runs = R.run(db=db) + R.run([R.later_releases_path()], db=db)
    ab = VAB.run(runs, db=db)
    assert ab and all(1 <= len(p.setting.split(" + ")) <= VAB.MAX_SETTINGS for p in ab)
    by_id = {r.run_id: r for r in runs}
    for p in ab:
        a, b = by_id[p.slow_run], by_id[p.fast_run]
        assert (a.source_id, a.model, a.gpu, a.gpus, a.layout) == (b.source_id, b.model, b.gpu, b.gpus, b.layout)
        assert a.measured_step_s >= b.measured_step_s
    dsv3 = next(p for p in ab if {p.slow_run, p.fast_run} == {"mb2511-gb300-dsv3-bf16", "mb2511-gb300-dsv3-mx"})
    assert dsv3.setting == "precision" and dsv3.slow_value == "bf16"
    assert dsv3.measured_speedup_frac == pytest.approx(
        by_id["mb2511-gb300-dsv3-bf16"].measured_step_s / by_id["mb2511-gb300-dsv3-mx"].measured_step_s - 1.0)


def test_validate_prints_and_carries_the_pairs(capsys):
    from gpusim.cli import main

    assert main(["validate", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)["ab_effects"]
    assert d["summary"]["open"]["all"]["pairs"] == sum(not r["holdout"] for r in d["rows"]) > 0
    assert all("measured_speedup_frac" not in r for r in d["rows"] if r["holdout"])
    steps = d["release_steps"]
    s = steps["summary"]["open"]
    assert s["container_only"]["steps"] + s["settings_changed"]["steps"] == sum(not r["holdout"] for r in steps["rows"])
    assert all("measured_speedup_frac" not in r for r in steps["rows"] if r["holdout"])
    mem = d["memory"]
    assert mem["summary"]["open"]["pairs"] == sum(not r["holdout"] for r in mem["rows"]) > 0
    assert all("measured_saving_bytes" not in r for r in mem["rows"] if r["holdout"])


def test_a_setting_stated_at_its_default_is_no_difference(db):
    """``ep_overlap=none`` (or ``grad_reduce_in_fp32=1``) in one row's notes and nothing in the other's is the same
    scenario: Strategy's defaults."""
    import csv
    import re

    with open(R.later_releases_path()) as f:
        row = next(r for r in csv.DictReader(f) if r["holdout"] != "1" and r["precision"] == "bf16")
    bare = re.sub(r"\b(ep_overlap|grad_reduce_in_fp32)=\w+", "", row["notes"])
    stated, plain = {**row, "notes": bare + " ep_overlap=none grad_reduce_in_fp32=1"}, {**row, "notes": bare}

    def key(r):
        out = R.RunRow(run_id=r["run_id"], source_id="", file="", holdout=False, model=r["model"], gpu=r["gpu"],
                       gpus=0, layout="", precision="", metric="", measured=0.0, regimes=())
        return VAB.scenario_key(r, R.row_setup(r, out, db))

    assert "ep_overlap" not in key(stated) and "grad_dtype" not in key(stated)
    assert VAB.differing_settings(key(stated), key(plain)) == set()
    overlapped = {**row, "notes": bare + " ep_overlap=1f1b"}
    assert VAB.differing_settings(key(overlapped), key(plain)) == {"EP overlap"}


def test_release_order_reads_the_megatron_bridge_table_ids():
    assert VAB.release_order("MBRIDGE_2602") == (2602, 0) and VAB.release_order("MBRIDGE_260401") == (2604, 1)
    assert VAB.release_order("MBRIDGE_CARD") is None and VAB.release_order("MLM_PR_5728") is None


def test_release_steps_chain_consecutive_releases_of_one_layout():
    """Three releases of one layout give two steps, oldest first: 26.02 -> 26.02.01 with nothing stated differently
    (the container alone: gpusim 0), 26.02.01 -> 26.04 with the dispatcher changed; hand-worked speed-ups."""
    k = {**LAYOUT, "precision": "mxfp8"}
    rows = [(_row("c", 9.0, 8.0, source="MBRIDGE_2604"), {**k, "moe_dispatcher": "deepep"}),
            (_row("a", 10.0, 10.0, source="MBRIDGE_2602"), k),
            (_row("b", 9.5, 10.0, source="MBRIDGE_260201"), dict(k)),
            (_row("x", 5.0, 5.0, source="MBRIDGE_CARD"), k)]  # not a release table: ignored
    first, second = sorted(VAB.release_steps(rows), key=lambda s: s.older_release)
    assert (first.older_release, first.newer_release, first.settings) == ("26.02", "26.02.01", "")
    assert first.measured_speedup_frac == pytest.approx(10.0 / 9.5 - 1.0) and first.predicted_speedup_frac == 0.0
    assert (second.older_run, second.newer_run, second.settings) == ("b", "c", "dispatcher")
    assert second.measured_speedup_frac == pytest.approx(9.5 / 9.0 - 1.0)
    assert second.predicted_speedup_frac == pytest.approx(10.0 / 8.0 - 1.0)
    s = VAB.summarize_releases([first, second])["open"]
    assert s["container_only"]["steps"] == 1 and s["settings_changed"]["steps"] == 1
    assert s["settings_changed"]["median_abs_error_frac"] == pytest.approx(abs(0.25 - (9.5 / 9.0 - 1.0)))


def test_a_release_step_with_a_held_out_row_hides_its_figures():
    k = {**LAYOUT, "precision": "bf16"}
    steps = VAB.release_steps([(_row("a", 10.0, 10.0, source="MBRIDGE_2602", holdout=True), k),
                               (_row("b", 9.0, 10.0, source="MBRIDGE_2604"), k)])
    (d,) = VAB.releases_to_dicts(steps)
    assert d["holdout"] and "measured_speedup_frac" not in d and "older_run" not in d


def test_published_comparisons_pair_their_two_figures(db):
    """validation/ab_published.csv: Megatron-Bridge PR #3561's dispatcher comparison, GPT-OSS-120B on 64 GB200: the
    all-to-all run's 423.6 TFLOP/s against HybridEP's 406.6 is a 4.18% speed-up over HybridEP."""
    ab, errors = VAB.published_pairs(db=db)
    assert not errors
    bf16 = next(p for p in ab if p.slow_run == "pr3561-gb200-oss-bf16-dispatcher/b")
    assert bf16.setting == "dispatcher" and (bf16.slow_value, bf16.fast_value) == ("deepep", "alltoall")
    assert bf16.measured_speedup_frac == pytest.approx(423.6 / 406.6 - 1.0)
    assert bf16.source_id == "MBRIDGE_PR_3561" and not bf16.holdout


def test_a_bad_published_row_is_an_error_not_an_exception(db, tmp_path):
    import csv

    from gpusim.errors import GpusimError

    with open(R.table_csv(VAB.PUBLISHED_FILE), newline="") as f:
        rows = list(csv.DictReader(f))[:2]  # (the first two pairs: both broken below)
    rows[0]["b_value"] = "fast"
    rows[1]["b_notes"] = rows[1]["a_notes"]  # the two sides the same: nothing to compare
    path = tmp_path / "ab.csv"
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=VAB.PUBLISHED_COLUMNS)
        w.writeheader()
        w.writerows(rows)
    ab, errors = VAB.published_pairs(path, db=db)
    assert ab == [] and len(errors) == 2
    assert errors[0].startswith(rows[0]["pair_id"]) and "differ in nothing" in errors[1]
    bad = tmp_path / "short.csv"
    bad.write_text("pair_id,model\nx,gpt-oss-120b\n")
    with pytest.raises(GpusimError, match="a_value"):
        VAB.published_pairs(bad, db=db)


def _mem_row(run_id, measured_gib, predicted_gib, *, holdout=False):
    return R.RunRow(run_id=run_id, source_id="S", file="runs_memory.csv", holdout=holdout, model="m", gpu="h100-sxm",
                    gpus=32, layout="4/4/5/1 1/32", precision="fp8", metric="peak_allocated_gib",
                    measured=measured_gib, regimes=("memory",), predicted=predicted_gib)


def test_memory_pairs_set_the_measured_saving_against_gpusims():
    """Hand-worked: recomputing the MLP saved 59.6 - 55.6 = 4.0 GiB as measured; gpusim's two predictions 50 and 40
    GiB say 10: +6 GiB of error. Step-time rows are not memory pairs."""
    from gpusim import units

    k0 = {**LAYOUT, "recompute": "selective", "recompute_modules": ("core_attn",)}
    k1 = {**LAYOUT, "recompute": "selective", "recompute_modules": ("mlp", "core_attn")}
    (p,) = VAB.memory_pairs([(_mem_row("a", 59.6, 50.0), k0), (_mem_row("b", 55.6, 40.0), k1),
                             (_row("c", 10.0, 9.0), k0)])
    assert (p.setting, p.more_run, p.less_run) == ("recompute", "a", "b")
    assert p.measured_saving_bytes == pytest.approx(4.0 * units.GIB)
    assert p.error_bytes == pytest.approx(6.0 * units.GIB) and p.direction_ok is True
    (q,) = VAB.memory_pairs([(_mem_row("a", 59.6, 50.0), k0), (_mem_row("b", 59.5, 40.0, holdout=True), k1)])
    assert q.direction_ok is None and q.holdout  # 0.1 GiB: within the noise
    (d,) = VAB.to_dicts([q])
    assert "measured_saving_bytes" not in d and VAB.summarize_memory([q])["held_out"]["pairs"] == 1


def test_the_memory_table_gives_pairs_of_one_layout(db):
    runs = R.run(db=db)
    pairs = VAB.memory_pairs(VAB.scenario_items(runs, db=db))
    by_id = {r.run_id: r for r in runs}
    assert pairs and all(by_id[p.more_run].layout == by_id[p.less_run].layout for p in pairs)
    mlp = next(p for p in pairs if {p.more_run, p.less_run} == {"msk-l70sft-tp4pp4vp5", "ark-l70sft-rc-mlp-attn"})
    assert mlp.setting == "recompute" and mlp.measured_saving_bytes > 0
