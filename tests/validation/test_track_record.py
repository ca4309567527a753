"""The model's track record (gpusim.track_record): the packaged bands are what the validation tables give today, each
prediction is matched to the band of its kind, and predict / comm / the API report it."""

from __future__ import annotations

import dataclasses
import json

import pytest

from gpusim import track_record as T
from gpusim.scenario import Scenario
from gpusim.simulation import simulate


@pytest.fixture(scope="module")
def computed():
    return T.compute()


def test_packaged_bands_are_the_validation_tables_today(computed):
    """The file the package ships equals a fresh computation: a change of the model or of validation/ that moves any
    band must come with `make track-record` (a stale record would misreport the model's error)."""
    packaged = T.load()
    assert set(packaged) == set(computed), "run `make track-record`: the bands changed"
    for key, band in computed.items():
        assert T.same({key: band}, {key: packaged[key]}), (f"run `make track-record`: band {key!r} is {band} today, "
                                                           f"the packaged file says {packaged[key]}")
    # (T.same itself: a tenth of a rounding step agrees, a count or a whole rounding step more does not)
    b = computed["llm-moe"]
    assert T.same({"k": b}, {"k": dataclasses.replace(b, p90_abs_frac=b.p90_abs_frac + 1e-5)})
    assert not T.same({"k": b}, {"k": dataclasses.replace(b, p90_abs_frac=b.p90_abs_frac + 1e-3)})
    assert not T.same({"k": b}, {"k": dataclasses.replace(b, rows=b.rows + 1)})


def test_bands_agree_with_validates_own_figures(computed):
    """The bands are gpusim validate's figures, not a second computation that could drift from them."""
    from gpusim import validation as V
    from gpusim import validation_runs as VR

    o = V.summarize(V.run(V.default_csv()))["overall"]
    assert computed["data-parallel"].median_abs_frac == pytest.approx(o["datasheet"]["median_ape"], abs=1e-4)
    assert computed["data-parallel"].rows == o["datasheet"]["n"]
    assert computed["data-parallel-anchored"].p90_abs_frac == pytest.approx(o["anchored"]["p90_ape"], abs=1e-4)
    runs = VR.summarize(VR.run())
    moe = computed["llm-moe"]
    assert moe.held_out_rows == runs["holdout"]["moe"]["predicted"]
    assert moe.held_out_p90_abs_frac == pytest.approx(runs["holdout"]["moe"]["p90_ape"], abs=1e-4)
    assert moe.rows == runs["open"]["moe"]["predicted"] + runs["holdout"]["moe"]["predicted"]


def test_band_statistics_hand_worked():
    """Four rows: |errors| 0.1, 0.2, 0.3, 0.4 (median 0.25, p90 0.37 by linear interpolation), measured / predicted
    speed 0.8, 0.9, 1.1, 0.7 (median 0.85: measured 15% slower; slower in 3 of 4), the last two held out (median
    0.35, p90 0.39)."""
    b = T._band("llm-moe", [(0.1, 0.8, False), (0.2, 0.9, False), (0.3, 1.1, True), (0.4, 0.7, True)], "test",
                "runs on h100-sxm")
    assert (b.rows, b.median_abs_frac, b.p90_abs_frac) == (4, 0.25, 0.37)
    assert b.real_vs_predicted_speed_frac == pytest.approx(-0.15)
    assert b.slower_frac == 0.75
    assert (b.held_out_rows, b.held_out_median_abs_frac, b.held_out_p90_abs_frac) == (2, 0.35, 0.39)
    line = b.line()
    assert line.startswith("published MoE training runs with their stated layouts (runs on h100-sxm): 4 measurements")
    assert "median step time error 25.0%" in line and "p90 37.0%" in line
    assert "the 2 held out of tuning: median 35.0%, p90 39.0%" in line
    assert "a median 15.0% slower than predicted, slower in 75% of them" in line
    faster = T._band("collectives", [(0.2, 1.2, False)], "test")
    assert "20.0% faster than predicted, slower in 0% of them" in faster.line()
    assert "; none held out;" in faster.line()
    # a table the defaults were chosen with says so
    assert "none held out: the model's defaults were chosen with these rows in view" in \
        T._band("data-parallel", [(0.2, 1.2, False)], "test").line()
    assert T._band("fsdp", [], "test") is None
    # rows whose ratio is not a finite positive number (a zero prediction) are left out
    assert T._band("fsdp", [(0.1, float("nan"), False), (0.1, 0.9, False)], "test").rows == 1
    # the 80% range: 10th and 90th percentiles of measured / predicted speed (0.73 and 1.04 here), shown only with
    # enough runs behind it (four are too few)
    assert (b.speed_ratio_p10, b.speed_ratio_p90, b.range_rows, b.range_held_out) == (0.73, 1.04, 4, False)
    assert not b.has_range and "too few runs for an 80% range" in b.line()
    ten = T._band("llm-moe", [(0.1, 0.5 + 0.1 * i, False) for i in range(10)], "test")  # ratios 0.5 .. 1.4
    assert ten.has_range and (ten.speed_ratio_p10, ten.speed_ratio_p90) == (0.59, 1.31)
    assert "80% of them measured 0.59x to 1.31x the predicted speed" in ten.line()
    assert ten.speed_range(100.0) == pytest.approx((59.0, 131.0))
    assert ten.time_range(10.0) == pytest.approx((10.0 / 1.31, 10.0 / 0.59))
    # a plan: only the training steps (60 of the 100 h) move
    assert ten.time_to_train_range(100.0, 60.0) == pytest.approx((40.0 + 60.0 / 1.31, 40.0 + 60.0 / 0.59))
    # with ten held-out runs the range is theirs (ratios 1.0 .. 1.9), not the open ones' (0.5)
    mixed = T._band("llm-moe", [(0.5, 0.5, False)] * 10 + [(0.1, 1.0 + 0.1 * i, True) for i in range(10)], "test")
    assert mixed.range_held_out and mixed.range_rows == 10
    assert (mixed.speed_ratio_p10, mixed.speed_ratio_p90) == (1.09, 1.81)
    assert "80% of the 10 held-out runs measured 1.09x to 1.81x" in mixed.line()


def _res(**kw):
    base = dict(model="resnet50", gpu="h100-sxm", gpus=8, per_gpu_batch=64)
    base.update(kw)
    return simulate(Scenario.create(**base), recommend=False)


@pytest.mark.parametrize("kw, key", [
    ({}, "data-parallel"),
    ({"baseline_throughput": 3000.0}, "data-parallel-anchored"),
    ({"gpus": 1}, "single-gpu"),
    ({"model": "llama3.1-8b", "tp": 2, "micro_batch": 1, "global_batch": 64, "seq_len": 4096, "precision": "bf16",
      "per_gpu_batch": None}, "llm-dense-bf16"),
    ({"model": "llama3.1-8b", "tp": 2, "micro_batch": 1, "global_batch": 64, "seq_len": 4096, "precision": "fp8",
      "per_gpu_batch": None}, "llm-dense-fp8"),
    ({"model": "llama3.1-8b", "gpu": "b200", "tp": 2, "micro_batch": 1, "global_batch": 64, "seq_len": 4096,
      "precision": "fp8", "per_gpu_batch": None}, "llm-dense-fp8-blackwell"),
    ({"model": "qwen3-30b-a3b", "ep": 8, "micro_batch": 1, "global_batch": 64, "seq_len": 4096,
      "precision": "bf16", "per_gpu_batch": None}, "llm-moe"),
    # recomputation puts FSDP on the per-GEMM path (an LLM result) without splitting the model: still FSDP's band
    ({"model": "llama3.1-8b", "kind": "fsdp-full", "recompute": "full", "micro_batch": 1, "global_batch": 64,
      "seq_len": 2048, "precision": "bf16", "per_gpu_batch": None}, "fsdp"),
    # an MoE model on plain data parallelism is an MoE prediction (as the published runs' regimes count it)
    ({"model": "qwen3-30b-a3b", "seq_len": 4096, "precision": "bf16", "per_gpu_batch": 1}, "llm-moe"),
    # one GPU whose throughput the user gave: the prediction is the measurement, no band
    ({"gpus": 1, "baseline_throughput": 3000.0}, None),
])
def test_each_prediction_gets_the_band_of_its_kind(kw, key):
    kw = {k: v for k, v in kw.items() if v is not None}
    if "micro_batch" in kw:
        kw.pop("per_gpu_batch", None)
        base = dict(model="resnet50", gpu="h100-sxm", gpus=8)
        base.update(kw)
        res = simulate(Scenario.create(**base), recommend=False)
    else:
        res = _res(**kw)
    from gpusim.rows import resolve_workload

    scn_kw = {k: v for k, v in kw.items()}
    wl = resolve_workload(Scenario.create(**{"model": "resnet50", "gpu": "h100-sxm", "gpus": 8, **scn_kw}))
    assert T.band_key(res, wl) == key


def test_a_kind_without_published_runs_has_no_band_and_says_so(capsys):
    """gpusim's tables hold no dense BF16 run on Blackwell: predict says there is none (and the JSON why) rather than
    borrowing another kind's; one GPU with its measured throughput needs none."""
    from gpusim.cli import main

    flags = ["predict", "--model", "llama3.1-8b", "--gpu", "b200", "--gpus", "8", "--tp", "2", "--micro-batch", "1",
             "--global-batch", "64", "--precision", "bf16"]
    assert main(flags) == 0
    assert "track record: none: gpusim's validation tables hold no published run of this kind" in \
        capsys.readouterr().out
    assert main([*flags, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["track_record"] == {"key": "llm-dense-bf16-blackwell",
                                                                   "reason": T.NO_RUNS}
    assert main(["predict", "--model", "resnet50", "--gpu", "h100-sxm", "--gpus", "1", "--per-gpu-batch", "64",
                 "--baseline-throughput", "3000"]) == 0
    out = capsys.readouterr().out
    assert f"track record: {T.MEASURED}" in out and "(here: " not in out


def test_a_calibrated_prediction_gets_the_band_without_a_range(capsys):
    """The bands are the default model's misses: a calibrated prediction gets them with that caveat and no range
    (its calibration's interval is its uncertainty)."""
    from pathlib import Path

    from gpusim.cli import main

    cal = Path(__file__).resolve().parents[1] / "app" / "fixtures" / "h100_synthetic.json"
    flags = ["predict", "--model", "resnet50", "--gpu", "h100-sxm", "--gpus", "8", "--per-gpu-batch", "64",
             "--calibration", str(cal)]
    assert main([*flags, "--json"]) == 0
    rec = json.loads(capsys.readouterr().out)["track_record"]
    assert rec["calibrated"] is True and "throughput_range_samples_per_s" not in rec
    assert main(flags) == 0
    out = capsys.readouterr().out
    assert "before your calibration, so no range is carried" in out and "(here: " not in out
    assert "80% of them measured" not in out


def test_comm_says_when_its_band_does_not_cover_the_question(capsys):
    from gpusim.cli import main

    for flags in (["--gpu", "h100-sxm", "--gpus", "8", "--bytes", "4KiB"],  # all below the sweeps' 32 KiB
                  ["--gpu", "rtx-4090", "--gpus", "4", "--bytes", "64MiB"],  # host-staged: no SHM system swept
                  ["--gpu", "h100-sxm", "--gpus", "8", "--bytes", "64MiB", "--collective", "broadcast"]):
        assert main(["comm", *flags]) == 0
        assert "track record: none: gpusim's collective sweeps hold no run of this kind" in capsys.readouterr().out


def test_a_newer_or_older_packaged_file(tmp_path, monkeypatch, capsys):
    """A field the band does not know (a newer file) is ignored; a band missing one (an older file) is dropped; no
    readable bands at all is said as such, not as 'no published run of this kind'."""
    raw = json.loads(T.BANDS_PATH.read_text())
    raw["bands"]["llm-moe"]["a_newer_field"] = 1
    del raw["bands"]["fsdp"]["coverage"]
    path = tmp_path / "r.json"
    path.write_text(json.dumps(raw))
    got = T.load(path)
    assert got["llm-moe"] == T.load()["llm-moe"] and "fsdp" not in got
    monkeypatch.setattr(T, "load", lambda path=None: {})
    assert T.none_reason("llm-moe") == T.UNAVAILABLE and T.report_line(None) == T.UNAVAILABLE


def test_write_is_atomic_and_reads_back(tmp_path, computed):
    path = T.write(tmp_path / "record.json", computed)
    assert T.load(path) == computed
    assert [p.name for p in tmp_path.iterdir()] == ["record.json"]  # no temporary file left behind
    assert list(json.loads(path.read_text())["bands"]) == [k for k in T.BAND_KEYS if k in computed]


def test_a_missing_or_broken_file_gives_no_bands(tmp_path):
    assert T.load(tmp_path / "absent.json") == {}
    bad = tmp_path / "bad.json"
    bad.write_text('{"bands": {"llm-moe": {"key": "llm-moe"}}}')
    assert T.load(bad) == {}


def test_predict_and_the_api_report_the_band(capsys):
    import gpusim
    from gpusim.cli import main

    assert main(["predict", "--model", "resnet50", "--gpu", "h100-sxm", "--gpus", "8", "--per-gpu-batch", "64",
                 "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["track_record"]["key"] == "data-parallel"
    band = T.load()["data-parallel"]
    assert T.band_from_dict(d["track_record"]) == band and d["track_record"]["calibrated"] is False
    assert d["track_record"]["throughput_range_samples_per_s"] == pytest.approx(
        list(band.speed_range(d["throughput_samples_per_s"])))
    assert d["track_record"]["step_range_s"] == pytest.approx(list(band.time_range(d["step_s"])))
    assert main(["predict", "--model", "resnet50", "--gpu", "h100-sxm", "--gpus", "8", "--per-gpu-batch", "64"]) == 0
    out = capsys.readouterr().out
    anchored = T.load()["data-parallel-anchored"]
    assert "track record: published multi-GPU data-parallel runs, from the datasheet" in out
    assert "the predicted speed (here: " in out and " samples/s, a step of " in out
    assert f"(--baseline-throughput) such predictions were within a median {anchored.median_abs_frac:.1%}" in out
    r = gpusim.predict(model="qwen3-30b-a3b", gpu="b200", gpus=8, ep=8, micro_batch=1, global_batch=64)
    assert r.track_record["key"] == "llm-moe" and r.to_dict()["track_record"]["key"] == "llm-moe"


def test_comm_prints_the_collectives_band(capsys):
    from gpusim.cli import main

    assert main(["comm", "--gpu", "h100-sxm", "--gpus", "16", "--nodes", "2", "--bytes", "64MiB"]) == 0
    out = capsys.readouterr().out
    assert "track record: published all-reduce and all-to-all sweeps across systems" in out
    assert main(["comm", "--gpu", "h100-sxm", "--gpus", "8", "--bytes", "64MiB", "--json"]) == 0
    assert "track_record" not in json.loads(capsys.readouterr().out)  # the JSON keeps its shape (one row)


def test_sweep_reports_the_band_of_its_best_layout(capsys):
    """The layout search's best is an LLM layout: MoE where the model has experts, else dense of its precision."""
    import gpusim

    moe = gpusim.sweep(model="qwen3-30b-a3b", gpu="gb200", gpus=8, global_batch=512)
    assert moe.track_record["key"] == "llm-moe" and moe.to_dict()["track_record"] == moe.track_record
    dense = gpusim.sweep(model="llama3.1-8b", gpu="h100-sxm", gpus=8, global_batch=128, precision="fp8")
    assert dense.track_record["key"] == "llm-dense-fp8"
    lo, hi = moe.track_record["throughput_range_tokens_per_s"]
    assert lo < moe.best["tokens_per_s"] < hi
    from gpusim.cli import main

    assert main(["sweep", "--model", "llama3.1-8b", "--gpu", "h100-sxm", "--gpus", "8", "--global-batch", "128"]) == 0
    out = capsys.readouterr().out
    assert "track record: published dense BF16 training runs" in out
    # [issue 17] a sweep also says what the search's best promised on the tuned recipes of its kind: the dense
    # recipes' band for a dense model, the MoE recipes' for an MoE one
    assert "search record: published vendor-tuned dense recipes" in out and "MFU for the best layout" in out
    assert dense.search_record["key"] == "layout-search" and "search_record" in dense.to_dict()
    lo, hi = dense.search_record["mfu_range_frac"]
    assert lo < dense.best["mfu_frac"] < hi
    assert moe.search_record["key"] == "layout-search-moe" and "search_record" in moe.to_dict()
    lo, hi = moe.search_record["mfu_range_frac"]
    assert lo < hi and lo < moe.best["mfu_frac"]
    assert main(["sweep", "--model", "qwen3-30b-a3b", "--gpu", "gb200", "--gpus", "8", "--global-batch", "512"]) == 0
    assert "search record: published vendor-tuned MoE recipes" in capsys.readouterr().out


def test_the_layout_search_band_hand_worked():
    """[issue 17] The search's band from its rows: best layout's MFU / measured MFU = measured step / best step
    (error |ratio - 1|), and the speed ratio measured / predicted = best step / measured step. Rows: best 1.0 s
    against measured 1.1, 0.95 and 1.0 s (the last held out): errors 0.1, 0.05, 0.0; speed ratios 0.909, 1.053, 1;
    one of three measured slower than the best promised."""
    from gpusim.validation_search import SearchRow

    def row(best, measured, held):
        return SearchRow(run_id="r", source_id="s", holdout=held, model="m", gpu="h100-sxm", gpus=8,
                         precision="bf16", stated_layout="1/1/1/1", best_step_s=best, measured_step_s=measured)

    searched = [row(1.0, 1.1, False), row(1.0, 0.95, False), row(1.0, 1.0, True), row(None, 1.0, False)]
    bands = T.compute(dp=[], runs=[], fsdp=[], sweeps=[], searched=searched, searched_moe=[], later=[], ab=[])
    b = bands["layout-search"]
    assert (b.rows, b.held_out_rows, b.quantity) == (3, 1, "MFU")
    assert b.median_abs_frac == pytest.approx(0.05)  # of 0.1, 0.05 and 0
    assert b.real_vs_predicted_speed_frac == pytest.approx(0.0)  # median speed ratio 1.0
    assert b.slower_frac == pytest.approx(1 / 3, abs=1e-4)  # (stored to four digits)
    assert "layout-search-moe" not in bands
    assert set(T.compute(dp=[], runs=[], fsdp=[], sweeps=[], searched=[], searched_moe=[], later=[], ab=[])) == set()
    # [issue 17] the MoE recipes' rows make their own band by the same rule, apart from the dense one
    moe = T.compute(dp=[], runs=[], fsdp=[], sweeps=[], searched=[], searched_moe=searched, later=[], ab=[])
    assert set(moe) == {"layout-search-moe"} and moe["layout-search-moe"].median_abs_frac == pytest.approx(0.05)


def test_key_for_hand_cases():
    k = T.key_for
    assert k(llm=False, moe=False, precision="bf16", gpu="h100-sxm", n_gpus=8, kind="fsdp-full") == "fsdp"
    # FSDP with tensor parallelism is an LLM layout, not llm-foundry's FSDP
    assert k(llm=True, moe=False, precision="bf16", gpu="h100-sxm", n_gpus=8, kind="fsdp-full",
             split=True) == "llm-dense-bf16"
    assert k(llm=True, moe=True, precision="mxfp8", gpu="gb200", n_gpus=8) == "llm-moe"
    assert k(llm=True, moe=False, precision="mxfp8", gpu="gb300", n_gpus=64) == "llm-dense-fp8-blackwell"
    assert k(llm=True, moe=False, precision="nvfp4", gpu="gb300", n_gpus=64) == "llm-dense-nvfp4-blackwell"  # [stop 57]
    assert k(llm=False, moe=False, precision="amp_fp16", gpu="a100-sxm4-80gb", n_gpus=1) == "single-gpu"
    assert k(llm=False, moe=False, precision="fp32", gpu="v100-sxm2-16gb", n_gpus=4, anchored=True) == \
        "data-parallel-anchored"
    # FULL_SHARD and HYBRID_SHARD (and ZeRO-3) are llm-foundry's sharding; SHARD_GRAD_OP is ZeRO-2's, data parallel
    assert k(llm=False, moe=False, precision="bf16", gpu="h100-sxm", n_gpus=16, kind="fsdp-hybrid") == "fsdp"
    assert k(llm=False, moe=False, precision="bf16", gpu="h100-sxm", n_gpus=16, kind="fsdp-grad-op") == \
        "data-parallel"
    assert k(llm=False, moe=True, precision="bf16", gpu="h100-sxm", n_gpus=16, kind="fsdp-full") == "llm-moe"
    assert k(llm=False, moe=False, precision="bf16", gpu="h100-sxm", n_gpus=1, anchored=True) is None


def test_plan_reports_the_band_of_its_recommendation(capsys):
    import gpusim
    from gpusim.cli import main

    # (a deadline one GPU cannot meet: the recommendation is data-parallel, the key this test reads)
    dp = gpusim.plan(model="resnet50", epochs=90, samples=1.28e6, deadline="8h")
    assert dp.track_record["key"] == "data-parallel" and dp.to_dict()["track_record"] == dp.track_record
    c = dp.recommendation["configuration"]
    lo, hi = dp.track_record["time_to_train_range_s"]
    assert lo < c["time_to_train_s"] < hi  # the band's runs landed on both sides of the prediction
    assert main(["plan", "--model", "resnet50", "--epochs", "90", "--samples", "1.28e6", "--deadline", "8h"]) == 0
    out = capsys.readouterr().out
    # plan takes no one-GPU throughput: no hint to give one
    assert "track record: published multi-GPU data-parallel runs" in out and "--baseline-throughput" not in out


def test_validate_prints_the_bands_and_says_when_the_packaged_file_is_stale(capsys, monkeypatch):
    """gpusim validate shows the bands from the rows it just predicted, and warns while the packaged file (what the
    reports print) differs from them."""
    from gpusim.cli import main

    assert main(["validate", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert set(d["track_record"]) == set(T.load())
    assert d["track_record"]["data-parallel"]["rows"] == d["overall"]["datasheet"]["n"]
    stale = {k: dataclasses.replace(b, rows=b.rows + 1) for k, b in T.load().items()}
    monkeypatch.setattr(T, "load", lambda path=None: stale)
    assert main(["validate"]) == 0
    out = capsys.readouterr().out
    assert "track record per kind of prediction" in out and "run `make track-record`" in out
    # a user's CSV is not the project's tables with the model's defaults: no track record from it
    from pathlib import Path

    csv = Path(__file__).resolve().parents[2] / "validation" / "measurements.csv"
    assert main(["validate", "--json", str(csv)]) == 0
    assert json.loads(capsys.readouterr().out)["track_record"] is None


def test_the_writer_refuses_a_path_it_cannot_write_with_a_message(capsys):
    assert T.main(["--write", "/dev/null"]) == 2
    err = capsys.readouterr().err
    assert "error: output /dev/null: is not a regular file" in err and "Traceback" not in err


def test_the_search_band_speaks_for_dense_transformers_only():
    """[issue 17] The layout-search band is of dense transformer recipes: no MoE model, no hybrid Mamba model; an MoE
    transformer's search has the MoE recipes' band, a hybrid model's none."""
    from pathlib import Path

    from gpusim.workload import get_workload

    configs = Path(__file__).parents[1] / "workload" / "configs"
    assert T.search_band_key(get_workload("llama3-8b")) == "layout-search"
    assert T.search_band_key(get_workload("qwen3-30b-a3b")) == "layout-search-moe"
    assert T.search_band_key(get_workload("llama3-8b"), ep=2) == "layout-search-moe"
    assert T.search_band_key(get_workload(str(configs / "nemotron-3-nano-30b-a3b.json"))) is None
    assert T.search_band_key(get_workload(str(configs / "nemotron-h-8b.json"))) is None
    assert T.search_band_key(None) is None


def test_a_hybrid_model_gets_the_hybrid_band_whatever_else_it_is():
    """[issue 17] A hybrid Mamba-Transformer model's prediction is judged by the published hybrid runs (the later
    releases' Nemotron 3 Nano rows), not by the MoE or dense runs, on any path; the band is built from the later
    releases' hybrid rows alone, by the same rule as the others (hand-worked: errors 0.2 and 0.3 and 0.1 held out,
    all measured slower)."""
    from pathlib import Path

    from gpusim.validation_runs import RunRow
    from gpusim.workload import get_workload

    k = T.key_for
    assert k(llm=True, moe=True, precision="mxfp8", gpu="gb200", n_gpus=8, hybrid=True) == "llm-hybrid"
    assert k(llm=False, moe=False, precision="bf16", gpu="h100-sxm", n_gpus=8, hybrid=True) == "llm-hybrid"
    assert k(llm=True, moe=True, precision="mxfp8", gpu="gb200", n_gpus=8) == "llm-moe"
    configs = Path(__file__).parents[1] / "workload" / "configs"
    assert T.is_hybrid(get_workload(str(configs / "nemotron-3-nano-30b-a3b.json")))
    assert not T.is_hybrid(get_workload("qwen3-30b-a3b")) and not T.is_hybrid(None)

    def row(signed, held, regimes=("moe", "blackwell", "hybrid")):
        r = RunRow(run_id="r", source_id="s", file="f", holdout=held, model="m", gpu="gb200", gpus=8, layout="",
                   precision="mxfp8", metric="step_time_s", measured=1.0, regimes=regimes, predicted=1.0 + signed,
                   step_s=1.0 + signed, measured_step_s=1.0)
        return r

    later = [row(-0.2, False), row(-0.3, False), row(-0.1, True), row(-0.5, False, ("moe", "blackwell"))]
    b = T.compute(dp=[], runs=[], fsdp=[], sweeps=[], searched=[], searched_moe=[], later=later, ab=[])
    assert set(b) == {"llm-hybrid"} and b["llm-hybrid"].rows == 3 and b["llm-hybrid"].held_out_rows == 1
    assert b["llm-hybrid"].median_abs_frac == pytest.approx(0.2)
    assert b["llm-hybrid"].slower_frac == pytest.approx(1.0)


def test_predict_of_a_hybrid_model_prints_the_hybrid_band(capsys):
    from pathlib import Path

    from gpusim.cli import main

    cfg = Path(__file__).parents[1] / "workload" / "configs" / "nemotron-3-nano-30b-a3b.json"
    assert main(["predict", "--model", str(cfg), "--gpu", "b200", "--gpus", "8", "--ep", "8", "--micro-batch", "2",
                 "--global-batch", "512", "--seq-len", "8192", "--precision", "mxfp8"]) == 0
    out = capsys.readouterr().out
    assert "track record: published hybrid Mamba-Transformer training runs" in out
    assert "published MoE training runs" not in out


def test_the_what_if_band_hand_worked():
    """[stop 47] The A/B pairs' band: a pair measured +20% and predicted +10% has a speed ratio 1.2 / 1.1 and an
    error |1.1 / 1.2 - 1| = 8.33%; one measured +10% and predicted +10%: 1.0 and 0."""
    from gpusim.validation_ab import AbPair

    def pair(measured, predicted, held=False):
        return AbPair(setting="precision", source_id="s", model="m", gpu="b200", gpus=8, layout="", slow_run="a",
                      fast_run="b", slow_value="bf16", fast_value="mxfp8", holdout=held,
                      measured_speedup_frac=measured, predicted_speedup_frac=predicted)

    b = T.compute(dp=[], runs=[], fsdp=[], sweeps=[], searched=[], searched_moe=[], later=[],
                  ab=[pair(0.2, 0.1), pair(0.1, 0.1, held=True)])["what-if"]
    assert (b.rows, b.held_out_rows, b.quantity) == (2, 1, "speed-up")
    assert b.median_abs_frac == pytest.approx((1.0 - 1.1 / 1.2) / 2, abs=1e-4)
    assert b.real_vs_predicted_speed_frac == pytest.approx((1.2 / 1.1 + 1.0) / 2 - 1.0, abs=1e-4)
    assert set(T.compute(dp=[], runs=[], fsdp=[], sweeps=[], searched=[], searched_moe=[], later=[], ab=[])) == set()


def test_the_memory_band_hand_worked(monkeypatch):
    """[stop 55] The peak-memory band's ratio is measured / predicted memory: three rows measured 1.1x, 1.2x and
    0.9x the predicted peak (median 1.1: a median 10% more memory, more in 2 of 3), worded as memory, not speed; its
    range moves the allocator's share only: 70 GiB of which 60 allocated, ratios 1.01-1.18 -> 70.6 to 80.8 GiB."""
    b = T._band("llm-memory", [(0.1 / 1.1, 1.1, False), (0.2 / 1.2, 1.2, True), (0.1 / 0.9, 0.9, False)], "test",
                "runs on h100-sxm")
    assert b.real_vs_predicted_speed_frac == pytest.approx(0.1) and b.slower_frac == pytest.approx(1 / 3, abs=1e-4)
    line = b.line()
    assert "a median 10.0% more memory than predicted, more in 67% of them" in line
    assert "slower" not in line and "faster" not in line and "too few runs" in line
    band = dataclasses.replace(b, speed_ratio_p10=1.01, speed_ratio_p90=1.18, range_rows=14)
    assert "measured 1.01x to 1.18x the predicted peak memory" in band.line()
    monkeypatch.setattr(T, "load", lambda path=None: {"llm-memory": band})
    gib = 2.0 ** 30
    rec = T.memory_record(70 * gib, 60 * gib, 80 * gib, llm=True)
    assert rec["memory_range_bytes"] == pytest.approx([(10 + 60 * 1.01) * gib, (10 + 60 * 1.18) * gib])
    assert rec["capacity_bytes"] == 80 * gib and rec["key"] == "llm-memory"
    # in words, with what to do where the top of the range passes the GPU's memory (80.8 > 80 GiB), and without it
    # where it does not (a 96 GiB GPU)
    assert T.memory_here(rec, "x", headroom="room") == ("a peak of 70.6 GiB to 80.8 GiB for x, of 80 GiB; past the "
                                                        "GPU's memory at the top of that range: leave room or take a "
                                                        "layout with more free memory")
    roomy = T.memory_record(70 * gib, 60 * gib, 96 * gib, llm=True)
    assert T.memory_here(roomy, "x") == "a peak of 70.6 GiB to 80.8 GiB for x, of 96 GiB"
    assert T.memory_here(None, "x") is None
    assert T.memory_record(70 * gib, 60 * gib, 80 * gib, llm=False) is None  # not an LLM layout: no band speaks
    assert T.memory_record(float("nan"), 60 * gib, 80 * gib, llm=True) is None


def test_the_memory_band_is_validates_peak_memory_table(computed):
    """[stop 55] The band's figures are gpusim validate's peak-memory rows (validation/runs_memory.csv)."""
    from gpusim import validation_runs as VR

    rows = [r for r in VR.run() if r.is_memory and r.signed_frac is not None]
    band = computed["llm-memory"]
    assert band.rows == len(rows) and band.held_out_rows == sum(r.holdout for r in rows)
    assert band.median_abs_frac == pytest.approx(sorted(r.ape for r in rows)[len(rows) // 2], abs=0.02)
    # measured / predicted memory: more than predicted where gpusim's figure was low (signed < 0)
    assert band.slower_frac == pytest.approx(sum(r.signed_frac > 0 for r in rows) / len(rows), abs=1e-4)


def test_predict_and_sweep_report_the_memory_band_of_an_llm_layout(capsys):
    """[stop 55] predict and sweep carry the memory band under an LLM layout (JSON ``memory_record``, the text's
    "memory record" line with the range against the GPU's memory), the API the same; a CNN gets none."""
    import gpusim
    from gpusim.cli import main
    from gpusim.validation_runs import allocated_bytes

    r = gpusim.predict(model="llama3-8b", gpu="h100-sxm", gpus=8, tp=2, micro_batch=1, global_batch=64)
    rec = r.memory_record
    band = T.load()["llm-memory"]
    alloc = allocated_bytes(r.step)
    rest = r.memory_per_gpu_bytes - alloc
    assert rec["memory_range_bytes"] == pytest.approx([rest + alloc * band.speed_ratio_p10,
                                                       rest + alloc * band.speed_ratio_p90])
    assert rec["capacity_bytes"] == r.memory_capacity_bytes and r.to_dict()["memory_record"] == rec
    assert gpusim.predict(model="resnet50", gpu="h100-sxm", gpus=8, per_gpu_batch=64).memory_record is None
    assert main(["predict", "--model", "llama3-8b", "--gpu", "h100-sxm", "--gpus", "8", "--tp", "2", "--micro-batch", "1",
                 "--global-batch", "64"]) == 0
    assert "memory record: published peak memory of LLM training runs" in capsys.readouterr().out
    s = gpusim.sweep(model="llama3.1-8b", gpu="h100-sxm", gpus=8, global_batch=128)
    lo, hi = s.memory_record["memory_range_bytes"]
    assert lo < hi and s.to_dict()["memory_record"] == s.memory_record
    assert lo >= s.best["memory_per_gpu_bytes"] * 0.99  # the published peaks ran above gpusim's figure
    assert main(["sweep", "--model", "llama3.1-8b", "--gpu", "h100-sxm", "--gpus", "8", "--global-batch", "128"]) == 0
    out = capsys.readouterr().out
    assert "memory record: " in out and "for the best layout, of 80 GiB" in out


def test_plan_reports_the_memory_band_of_its_recommended_layout(capsys):
    """[stop 56] plan carries the memory band of its recommended LLM layout as predict and sweep do (JSON
    ``memory_record``, the API the same, the text's line); the range is the band carried to the recommended row's own
    memory (the layout rebuilt: its allocator share plus the rest gives the row's memory back); a plan that
    recommends no layout (a CNN) gets none, and a configuration the rebuild does not reproduce gets none."""
    import gpusim
    from gpusim.cli import main
    from gpusim.hwdb import load
    from gpusim.planning import recommendation_memory_record
    from gpusim.workload import get_workload

    kw = dict(model="llama3-8b", seq_len=8192, tokens="1T", deadline="30d", gpu=["h100-sxm"])
    p = gpusim.plan(**kw)
    cfg = p.recommendation["configuration"]
    assert cfg["layout"]
    rec = p.memory_record
    band = T.load()["llm-memory"]
    lo, hi = rec["memory_range_bytes"]
    alloc = (hi - lo) / (band.speed_ratio_p90 - band.speed_ratio_p10)
    rest = lo - alloc * band.speed_ratio_p10
    assert 0 < alloc <= cfg["memory_per_gpu_bytes"]
    assert rest + alloc == pytest.approx(cfg["memory_per_gpu_bytes"], rel=1e-6)
    assert rec["capacity_bytes"] == cfg["memory_capacity_bytes"] and p.to_dict()["memory_record"] == rec
    # a configuration that does not rebuild to its own throughput is not answered for
    wl = get_workload("llama3-8b", seq_len=8192)
    assert recommendation_memory_record({**cfg, "throughput_samples_per_s": cfg["throughput_samples_per_s"] * 1.5},
                                        wl, load()) is None
    assert recommendation_memory_record({**cfg, "layout": ""}, wl, load()) is None
    cnn = gpusim.plan(model="resnet50", samples="1.28M", epochs=1, deadline="1d", gpu=["h100-sxm"])
    assert cnn.memory_record is None and "memory_record" not in cnn.to_dict()
    assert main(["plan", "--model", "llama3-8b", "--seq-len", "8192", "--tokens", "1T", "--deadline", "30d", "--gpu",
                 "h100-sxm", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "memory record: published peak memory of LLM training runs" in out
    assert "for the recommended layout, of 80 GiB" in out


def test_memory_fit_wording():
    """[stop 56] memory_fit_here: the named layout with its slowdown (or speed-up against a plan's own layout), and
    what to do where no layout searched fits; nothing without a fit."""
    from gpusim.track_record import memory_fit_here

    gib = 2.0**30
    base = {"allocated_ratio": 1.18, "capacity_bytes": 80 * gib}
    fit = {**base, "layout": "tp 1 pp 1 cp 4", "slower_frac": 0.035, "memory_range_top_bytes": 79.3 * gib}
    assert memory_fit_here(fit) == ("the fastest layout whose top of that range fits: tp 1 pp 1 cp 4, 3.5% slower "
                                    "(a peak of up to 79.3 GiB of 80 GiB)")
    assert "4.0% faster" in memory_fit_here({**fit, "slower_frac": -0.04}, " on the recommended hardware")
    assert memory_fit_here({**base, "layout": None}, " on the recommended hardware").startswith(
        "no layout searched on the recommended hardware keeps the top of that range (1.18x the allocator's share) "
        "within 80 GiB")
    assert memory_fit_here(None) is None


def test_record_fit_hand_worked():
    """[stop 56] gpusim.search.record_fit: the fastest feasible layout whose memory with the allocator's share at the
    record's top ratio still fits (the docstring's case: 77 GiB of which 70 allocated tops at 89.6 GiB; 66 of which 60
    at 76.8 GiB)."""
    import numpy as np

    from gpusim.search import record_fit

    gib = 2.0**30
    res = {"out": {"memory_per_gpu_bytes": np.array([77.0, 66.0, 40.0]) * gib,
                   "memory_allocated_bytes": np.array([70.0, 60.0, 30.0]) * gib},
           "order": np.array([0, 1]), "capacity_bytes": 80 * gib}  # layout 2 infeasible: not in the order
    assert record_fit(res, 1.18) == 1
    assert record_fit(res, 1.0) == 0  # the prediction as it stands: the best
    assert record_fit(res, 1.3) is None  # 66 + 60 x 0.3 = 84 GiB: none
    assert record_fit({**res, "order": np.array([], dtype=np.int64)}, 1.18) is None


def test_sweep_names_the_fastest_layout_whose_memory_record_fits(capsys):
    """[stop 56] Where the best layout's memory record tops out past the GPU's memory, sweep names the fastest layout
    whose top still fits (JSON ``memory_record_fit``, the API the same, a second "memory record" line): that layout's
    own record (predict) tops within the GPU, every faster layout of the search tops past it, and a roomy case (a
    best whose top fits) gets none."""
    import numpy as np

    import gpusim
    from gpusim.cli import main
    from gpusim.hwdb import load
    from gpusim.scenario import Scenario
    from gpusim.search import search_layouts

    kw = dict(model="llama3-8b", gpu="h100-sxm", gpus=8, seq_len=8192, global_batch=128)
    s = gpusim.sweep(**kw)
    fit = s.memory_record_fit
    assert s.memory_record["memory_range_bytes"][1] > s.memory_record["capacity_bytes"]
    assert fit and fit["layout"] and 0 < fit["slower_frac"] < 1 and s.to_dict()["memory_record_fit"] == fit
    row = fit["row"]
    p = gpusim.predict(model="llama3-8b", gpu="h100-sxm", gpus=8, seq_len=8192, global_batch=128, tp=row["tp"],
                       pp=row["pp"], cp=row["cp"], vp=row["vp"], micro_batch=row["micro_batch"],
                       recompute=row["recompute"], strategy="zero1")
    top = p.memory_record["memory_range_bytes"][1]
    assert top == pytest.approx(fit["memory_range_top_bytes"], rel=1e-6) and top <= fit["capacity_bytes"]
    assert p.tokens_per_s_per_gpu == pytest.approx(row["tokens_per_s"] / 8, rel=1e-6)
    res = search_layouts(Scenario(model="llama3-8b", seq_len=8192, gpu="h100-sxm", gpus=8, nodes=1, kind="zero1"),
                         db=load(), global_batch=128)
    o, order = res["out"], np.asarray(res["order"])
    tops = o["memory_per_gpu_bytes"] + o["memory_allocated_bytes"] * (fit["allocated_ratio"] - 1.0)
    faster = order[o["tokens_per_s"][order] > row["tokens_per_s"]]
    assert len(faster) and (tops[faster] > res["capacity_bytes"]).all()
    assert main(["sweep", *[f"--{k.replace('_', '-')}={v}" for k, v in kw.items()]]) == 0
    out = capsys.readouterr().out
    assert f"memory record: the fastest layout whose top of that range fits: {fit['layout']}, " in out
    # predict of the best layout (one layout, no search) says which command names one that fits
    b = s.best
    assert main(["predict", "--model", "llama3-8b", "--gpu", "h100-sxm", "--gpus", "8", "--seq-len", "8192",
                 "--global-batch", "128", "--strategy", "zero1", "--tp", str(b["tp"]), "--pp", str(b["pp"]), "--cp",
                 str(b["cp"]), "--micro-batch", str(b["micro_batch"]), "--recompute", b["recompute"]]) == 0
    assert ("take a layout with more free memory (gpusim sweep with the same model, GPUs and global batch names the "
            "fastest whose top of that range fits)" in capsys.readouterr().out)
    roomy = gpusim.sweep(model="llama2-7b", gpu="h100-sxm", gpus=8, global_batch=64)
    assert roomy.memory_record["memory_range_bytes"][1] <= roomy.memory_record["capacity_bytes"]
    assert roomy.memory_record_fit is None and "memory_record_fit" not in roomy.to_dict()


def test_plan_names_the_fastest_layout_whose_memory_record_fits(capsys):
    """[stop 56] Where the top of the plan's recommended layout's memory record passes its GPU's memory (Llama 3 70B
    on B200: 155.7 of 180 GiB, up to 183 GiB), plan names the fastest layout on the recommended hardware whose top
    still fits, its slowdown against the recommended layout (JSON and API ``memory_record_fit``, a CLI line):
    `gpusim predict` of that layout on that hardware gives the same top, within the GPU, and the same speed."""
    import gpusim
    from gpusim.cli import main

    p = gpusim.plan(model="llama3-70b", tokens="2T", deadline="60d", gpu=["b200"])
    cfg, rec, fit = p.recommendation["configuration"], p.memory_record, p.memory_record_fit
    assert rec["memory_range_bytes"][1] > rec["capacity_bytes"]
    assert fit and fit["layout"] and fit["layout"] != cfg["layout"] and p.to_dict()["memory_record_fit"] == fit
    row = fit["row"]
    q = gpusim.predict(model="llama3-70b", gpu="b200", gpus=cfg["n_gpus"], nodes=cfg["nodes"], strategy=cfg["strategy"],
                       precision=cfg["precision"], global_batch=cfg["global_batch"], tp=row["tp"], pp=row["pp"],
                       cp=row["cp"], vp=row["vp"], micro_batch=row["micro_batch"], recompute=row["recompute"])
    top = q.memory_record["memory_range_bytes"][1]
    assert top == pytest.approx(fit["memory_range_top_bytes"], rel=1e-6) and top <= fit["capacity_bytes"]
    assert fit["slower_frac"] == pytest.approx(1 - q.throughput_samples_per_s / cfg["throughput_samples_per_s"],
                                               abs=1e-6)
    assert main(["plan", "--model", "llama3-70b", "--tokens", "2T", "--deadline", "60d", "--gpu", "b200",
                 "--no-progress"]) == 0
    assert (f"memory record: the fastest layout on the recommended hardware whose top of that range fits: "
            f"{fit['layout']}, " in capsys.readouterr().out)
