"""[issue 17] The published-runs table (validation/runs_*.csv) and its report (gpusim.validation_runs)."""

import csv
import hashlib

import pytest

from gpusim import validation_runs as R
from gpusim.units import GIB
from gpusim.commands.validate import print_runs
from gpusim.errors import GpusimError


def _rows(path):
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def test_every_runs_file_has_the_schema_sources_and_a_held_out_quarter():
    paths = R.default_paths()
    assert any(p.name == "runs_dense.csv" for p in paths)
    for p in paths:
        rows = _rows(p)
        with open(p, newline="") as fh:
            assert tuple(next(csv.reader(fh))) == R.COLUMNS, p
        ids = [r["run_id"] for r in rows]
        assert len(ids) == len(set(ids)), f"{p}: run_id not unique"
        assert all(r["source"].strip() and r["source_id"].strip() for r in rows)
        assert all(r["metric"] in R.METRICS for r in rows)
        assert sum(r["holdout"] == "1" for r in rows) >= len(rows) / 4, f"{p}: hold out at least a quarter"


def test_dense_holdout_is_the_stated_hash_rule():
    """runs_dense.csv holds out sha1(run_id)[:8] mod 10 < 3, chosen before any prediction was looked at."""
    for r in _rows(R.default_dir() / "runs_dense.csv"):
        h = int(hashlib.sha1(r["run_id"].encode()).hexdigest()[:8], 16)
        assert (r["holdout"] == "1") == (h % 10 < 3), r["run_id"]


def test_measured_step_from_each_metric_hand_worked():
    # 1536 sequences of 8192 tokens at 813 tokens/s/GPU on 256 GPUs: 1536 * 8192 / (813 * 256) = 60.4576 s
    assert R._measured_step_s("tokens_per_s_per_gpu", 813.0, 1536, 8192, 256, None) == pytest.approx(60.4576, rel=1e-5)
    assert R._measured_step_s("step_time_s", 4.31, 64, 4096, 256, None) == 4.31
    # 8.6e18 model FLOPs per step at 400 TFLOP/s on 16384 GPUs: 8.6e18 / (4e14 * 16384) = 1.3123 s
    assert R._measured_step_s("model_tflop_per_s_per_gpu", 400.0, 1, 1, 16384, 8.6e18) == pytest.approx(1.31226, rel=1e-4)
    assert R._measured_step_s("model_tflop_per_s_per_gpu", 400.0, 1, 1, 16384, None) is None


def test_stats_closed_form():
    rows = []
    for i, e in enumerate((-0.10, 0.02, 0.05, 0.20, -0.01)):
        r = R.RunRow(run_id=str(i), source_id="X", file="f", holdout=False, model="m", gpu="g", gpus=1, layout="",
                     precision="bf16", metric="step_time_s", measured=1.0, regimes=("dense-bf16",),
                     step_s=1.0 + e, measured_step_s=1.0)
        rows.append(r)
    rows.append(R.RunRow(run_id="x", source_id="X", file="f", holdout=False, model="m", gpu="g", gpus=1, layout="",
                         precision="bf16", metric="step_time_s", measured=1.0, regimes=("dense-bf16",), error="no"))
    s = R.stats(rows)
    assert s["rows"] == 6 and s["predicted"] == 5
    # |errors| sorted 0.01 0.02 0.05 0.10 0.20: median 0.05; p90 at position 3.6: 0.10 + 0.6 * 0.10 = 0.16
    assert s["median_ape"] == pytest.approx(0.05)
    assert s["p90_ape"] == pytest.approx(0.16)
    assert s["median_signed"] == pytest.approx(0.02)


def test_regimes():
    base = {"ep": "1", "model": "llama3-8b"}
    assert R.regime({**base, "gpu": "h100-sxm", "precision": "bf16"}) == ("dense-bf16",)
    assert R.regime({**base, "gpu": "h100-sxm", "precision": "fp8"}) == ("dense-fp8",)
    assert R.regime({**base, "gpu": "gb200", "precision": "mxfp8"}) == ("blackwell", "dense-fp8-blackwell")
    # [stop 57] NVFP4 is its own dense regime, not FP8's
    assert R.regime({**base, "gpu": "gb300", "precision": "nvfp4"}) == ("blackwell", "dense-nvfp4-blackwell")
    assert "moe" in R.regime({"ep": "8", "model": "mixtral-8x7b", "gpu": "h100-sxm", "precision": "bf16"})


def test_another_runs_file_drops_in_and_a_bad_header_is_refused(tmp_path):
    src = R.default_dir() / "runs_dense.csv"
    rows = _rows(src)[:1]
    for name in ("runs_dense.csv", "runs_moe.csv"):
        with open(tmp_path / name, "w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=R.COLUMNS)
            w.writeheader()
            w.writerows({**rows[0], "run_id": name} for _ in range(1))
    got = R.read_rows(sorted(tmp_path.glob("runs_*.csv")))
    assert [f for f, _ in got] == ["runs_dense.csv", "runs_moe.csv"]
    (tmp_path / "runs_bad.csv").write_text("run_id,model\nx,llama3-8b\n")
    with pytest.raises(GpusimError, match="missing column"):
        R.read_rows([tmp_path / "runs_bad.csv"])


def test_the_dense_table_is_predicted_and_reported(capsys):
    res = R.run([R.default_dir() / "runs_dense.csv"])
    assert len(res) == len(_rows(R.default_dir() / "runs_dense.csv"))
    assert sum(r.ape is not None for r in res) >= 0.95 * len(res), [(r.run_id, r.error) for r in res if r.error]
    summ = R.summarize(res)
    # a good share of the rows entered blind is held out (stop 51: rows whose prediction was seen before they were
    # entered, seen_before_entry=1, count with the open rows and not in the base). The hash rule holds out 3 in 10 in
    # expectation; the floor is a fifth, not a quarter, since stop 58's 18 MLPerf rows drew 3 (13 of 57 blind rows)
    # and holding out more of them after their open predictions were seen would not be blind
    blind = [r for r in _rows(R.default_dir() / "runs_dense.csv") if "seen_before_entry=1" not in r["notes"]]
    assert summ["holdout"]["all"]["rows"] >= len(blind) / 5
    table, lines = R.report(res, holdout_rows=False, holdout_summary=False)
    assert not any(x.startswith("held-out") for x in lines) and any(x.startswith("open all:") for x in lines)
    # [stop 58] each source's open rows' median signed error, its count leaving the held-out rows out
    per_source = [x for x in lines if x.startswith("open rows per source")]
    assert len(per_source) == 1
    v50 = [r for r in res if r.source_id == "MLPERF_TRAINING_V50"]
    n_open = sum(not r.holdout for r in v50)
    assert 0 < n_open < len(v50) and "MLPERF_TRAINING_V50 " in per_source[0]
    assert per_source[0].split("MLPERF_TRAINING_V50 ")[1].split(")")[0].endswith(f"(n={n_open}")
    assert all(row[9] == "hidden" for row, r in zip(table, res) if r.holdout)
    # a held-out row's measurement is hidden too (whoever models against the table must not read it), in the JSON alike
    assert all(row[7] in ("hidden", "") and row[8] == "" for row, r in zip(table, res) if r.holdout)
    assert any(row[7] == "hidden" for row in table)
    dicts = R.to_dicts(res)
    assert all(d["hidden"] and d["measured"] is None and d["measured_step_s"] is None and d["step_s"] is None
               for d in dicts if d["holdout"])
    assert all("hidden" not in d and d["measured"] is not None for d in dicts if not d["holdout"])
    assert all(d["measured"] is not None for d in R.to_dicts(res, holdout_rows=True))
    print_runs(res)
    assert "held-out all:" in capsys.readouterr().out


def test_recipe_memory_settings_in_the_notes_reach_the_scenario():
    """[issue 17] recompute_modules= (joined with +), grad_reduce_in_fp32=, opt_state_dtype=, fp8_activations= in a
    row's notes predict exactly as the Scenario with those fields; a bad value is the row's error, not a crash."""
    from gpusim.hwdb import load
    from gpusim.simulation import Scenario, simulate

    db = load()
    row = {"run_id": "t", "source_id": "T", "source": "test", "holdout": "0", "model": "deepseek-v3", "gpu": "b200",
           "gpus": "256", "gpus_per_node": "8", "tp": "1", "pp": "16", "vp": "", "cp": "1", "ep": "8", "etp": "",
           "micro_batch": "1", "global_batch": "2048", "seq_len": "4096", "precision": "fp8", "recompute": "",
           "metric": "step_time_s", "value": "10", "unit": "s", "notes": ""}
    notes = ("recompute_modules=mla_up_proj+moe_act; grad_reduce_in_fp32=0 (a recipe); opt_state_dtype=bf16; "
             "fp8_activations=1")
    assert R.options(notes) == {"recompute_modules": "mla_up_proj+moe_act", "grad_reduce_in_fp32": "0",
                                "opt_state_dtype": "bf16", "fp8_activations": "1"}
    got = R.predict_row(dict(row, notes=notes), db=db)
    assert not got.error and "rc mla_up_proj+moe_act" in got.chosen
    want = simulate(Scenario.create(workload=R._workload("deepseek-v3", 4096), node="dgx-b200", gpus=256, nodes=32,
                                    kind="zero1", precision="fp8", tp=1, pp=16, vp=1, cp=1, ep=8, expert_tp=1,
                                    micro_batch=1, global_batch=2048, seq_len=4096, uneven_pp=True, recompute="none",
                                    recompute_modules=("mla_up_proj", "moe_act"), grad_dtype="bf16",
                                    opt_state_dtype="bf16", fp8_activations=True), db=db, recommend=False)
    assert got.step_s == pytest.approx(float(want.step_s))
    plain = R.predict_row(row, db=db)
    assert plain.chosen.startswith("uneven pp, rc none") and plain.step_s != got.step_s
    for bad, needle in (("recompute_modules=moe_layer", "recompute_modules"), ("grad_reduce_in_fp32=2", "not 0 or 1"),
                        ("opt_state_dtype=fp16", "fp32 or bf16"), ("fp8_activations=yes", "not 0 or 1")):
        res = R.predict_row(dict(row, notes=bad), db=db)
        assert needle in res.error and res.step_s is None, bad


def test_cuda_graph_scopes_in_the_notes_reach_the_scenario():
    """[issue 17] cuda_graph_scope= (Megatron-Core's scope names joined with +) in a row's notes predicts exactly as the
    Scenario with those scopes; an unknown scope, or a set Megatron-Core refuses, is the row's error."""
    from gpusim.hwdb import load
    from gpusim.simulation import Scenario, simulate

    db = load()
    row = {"run_id": "t", "source_id": "T", "source": "test", "holdout": "0", "model": "qwen3-30b-a3b", "gpu": "gb200",
           "gpus": "8", "gpus_per_node": "72", "tp": "1", "pp": "1", "vp": "", "cp": "1", "ep": "8", "etp": "",
           "micro_batch": "1", "global_batch": "256", "seq_len": "4096", "precision": "bf16", "recompute": "",
           "metric": "step_time_s", "value": "10", "unit": "s", "notes": ""}
    notes = "TE CUDA graphs (cuda_graph_scope=attn+moe_router+moe_preprocess); a sentence."
    assert R.options(notes) == {"cuda_graph_scope": "attn+moe_router+moe_preprocess"}
    got = R.predict_row(dict(row, notes=notes), db=db)
    assert not got.error
    want = simulate(Scenario.create(workload=R._workload("qwen3-30b-a3b", 4096), node="gb200-nvl72", gpus=8, nodes=2,
                                    kind="zero1", precision="bf16", tp=1, pp=1, vp=1, cp=1, ep=8, expert_tp=1,
                                    micro_batch=1, global_batch=256, seq_len=4096, recompute="none",
                                    cuda_graph_scope=("attn", "moe_router", "moe_preprocess")), db=db, recommend=False)
    assert got.step_s == pytest.approx(float(want.step_s))
    for bad, needle in (("cuda_graph_scope=layer", "not one of"), ("cuda_graph_scope=moe_preprocess", "moe_router")):
        res = R.predict_row(dict(row, notes=bad), db=db)
        assert needle in res.error and res.step_s is None, bad


def test_peak_memory_rows_are_their_own_regime_compared_in_allocated_bytes(capsys):
    """[issue 17] validation/runs_memory.csv: the published peak allocated memory of runs with their stated layouts,
    compared with what PyTorch's allocator holds (no fragmentation, no CUDA context), in the regime ``memory`` only."""
    path = R.default_dir() / "runs_memory.csv"
    res = R.run([path])
    assert len(res) == len(_rows(path)) and all(r.is_memory and r.regimes == ("memory",) for r in res)
    assert all(r.predicted is not None for r in res), [(r.run_id, r.error) for r in res if r.error]
    for r in res:  # signed error in memory: predicted GiB / measured GiB - 1
        assert r.signed_frac == pytest.approx(r.predicted / r.measured - 1.0)
    summ = R.summarize(res)
    assert summ["open"]["all"]["rows"] == 0  # the step-time summary does not take memory rows
    assert summ["open"]["memory"]["predicted"] + summ["holdout"]["memory"]["predicted"] == len(res)
    step_table, step_lines = R.report(res)
    assert step_table == [] and not any("memory" in x for x in step_lines)
    table, lines = R.memory_report(res, holdout_summary=False)
    assert len(table) == len(res) and all(row[7] == "hidden" for row, r in zip(table, res) if r.holdout)
    assert [x.split(":")[0] for x in lines] == ["open peak memory"]
    print_runs(res)
    out = capsys.readouterr().out
    assert "Published peak memory" in out and "held-out peak memory:" in out


def test_allocated_bytes_leaves_out_fragmentation_and_the_cuda_context():
    class Res:  # a prediction's memory breakdown, GiB
        memory_breakdown_bytes = {"weights": 4 * GIB, "gradients": 4 * GIB, "optimizer": 12 * GIB,
                                  "buffers": 0.0, "activations": 11 * GIB, "overhead": 1.5 * GIB}

    # 4 + 4 + 12 + 11 / 1.10 (the default 10% fragmentation is reserved, not allocated) = 30 GiB
    assert R.allocated_bytes(Res()) / GIB == pytest.approx(30.0)


def test_a_tflops_row_converts_with_the_count_of_the_framework_that_logged_it():
    """[issue 17] ``flop_count=megatron``: a Megatron-LM TFLOP/s/GPU figure stands for the tokens of Megatron-LM's own
    count (``num_floating_point_operations``: the attention core over seq / 2 keys), hand-worked for Qwen3-235B-A22B at
    seq 4096 (h 4096, 94 layers, q 8192, kv 512, top-8 experts of 1536, vocabulary 151936):
    6 x (94 x (4096 x 36864 + 4096 x 9216 + 8192 x 4096 + 8192 x 4096) + 4096 x 151936) = 148,034,813,952 FLOP per
    token (Megatron-Bridge publishes 148.04 G). Without the token gpusim's own count (attention in full) converts it;
    an unknown count is the row's error."""
    from gpusim.hwdb import load

    db = load()
    row = {"run_id": "t", "source_id": "T", "source": "test", "holdout": "0", "model": "qwen3-235b-a22b",
           "gpu": "gb200", "gpus": "128", "gpus_per_node": "72", "tp": "2", "pp": "1", "vp": "", "cp": "1", "ep": "16",
           "etp": "", "micro_batch": "1", "global_batch": "1024", "seq_len": "4096", "precision": "bf16",
           "recompute": "", "metric": "model_tflop_per_s_per_gpu", "value": "600", "unit": "TFLOP/s/GPU", "notes": ""}
    per_token = 6 * (94 * (4096 * 36864 + 4096 * 9216 + 8192 * 4096 + 8192 * 4096) + 4096 * 151936)
    assert per_token == 148_034_813_952
    meg = R.predict_row(dict(row, notes="Megatron-LM's W&B figure: flop_count=megatron."), db=db)
    assert not meg.error
    assert meg.measured_step_s == pytest.approx(per_token * 1024 * 4096 / (600e12 * 128), rel=1e-9)
    own = R.predict_row(row, db=db)
    assert own.step_s == pytest.approx(meg.step_s)  # the prediction is the same; only the measured step differs
    assert own.measured_step_s > 1.1 * meg.measured_step_s  # gpusim counts the attention core in full
    bad = R.predict_row(dict(row, notes="flop_count=palm"), db=db)
    assert "flop_count" in bad.error and bad.step_s is None


def _run_row(**over) -> dict:
    """A runs-table row on H100 SXM in bf16 stated by step time, with the fields ``over`` gives."""
    row = {"run_id": "t", "source_id": "T", "source": "test", "holdout": "0", "model": "", "gpu": "h100-sxm",
           "gpus": "8", "gpus_per_node": "8", "tp": "1", "pp": "1", "vp": "", "cp": "1", "ep": "", "etp": "",
           "micro_batch": "1", "global_batch": "8", "seq_len": "4096", "precision": "bf16", "recompute": "",
           "metric": "step_time_s", "value": "10", "unit": "s", "notes": ""}
    return {**row, **over}


def test_the_cp_exchange_a_source_states_reaches_the_scenario():
    """[issue 17] cp_comm= (Transformer Engine's cp_comm_type names: p2p, all_gather, a2a, a2a+p2p) in a row's notes
    predicts as the Scenario with that exchange (the Llama 3 cp16 row: the paper's all-gather); a bad value is the
    row's error."""
    from gpusim.hwdb import load

    db = load()
    row = _run_row(model="llama3-70b", gpus="64", tp="8", pp="2", cp="4", global_batch="16", seq_len="32768")
    ring = R.predict_row(row, db=db)
    ag = R.predict_row(dict(row, notes="the paper's CP (cp_comm=all_gather)."), db=db)
    p2p = R.predict_row(dict(row, notes="cp_comm=p2p"), db=db)
    assert not ring.error and not ag.error and p2p.step_s == pytest.approx(ring.step_s)
    assert ag.step_s > ring.step_s  # the gather is exposed; the ring hides under the attention
    bad = R.predict_row(dict(row, notes="cp_comm=ulysses"), db=db)
    assert "cp_comm" in bad.error and bad.step_s is None


def test_the_cross_entropy_a_recipe_runs_reaches_the_scenario():
    """[issue 17] cross_entropy= (te, native, unfused) in a row's notes predicts with that loss implementation; a row
    without it takes gpusim's default (te); a bad value is the row's error."""
    from gpusim.hwdb import load

    db = load()
    row = _run_row(model="llama3-8b", gpus="8", tp="1", pp="1", cp="1", global_batch="64", seq_len="8192")
    plain = R.predict_row(row, db=db)
    te = R.predict_row(dict(row, notes="cross_entropy=te"), db=db)
    native = R.predict_row(dict(row, notes="the provider's default (cross_entropy=native)."), db=db)
    assert not plain.error and not native.error and te.step_s == pytest.approx(plain.step_s)
    assert native.step_s > plain.step_s
    bad = R.predict_row(dict(row, notes="cross_entropy=liger"), db=db)
    assert "cross_entropy" in bad.error and bad.step_s is None


def test_a_row_seen_before_entry_is_never_counted_as_held_out():
    """[stop 51] A row whose prediction was seen before it was entered (``seen_before_entry=1``) counts with the open
    rows whatever its file's hold-out rule files it as; the token changes nothing else."""
    row = {"holdout": "1", "notes": "strategy=zero1; seen_before_entry=1 (predicted before entry)"}
    assert not R.held_out(row)
    assert R.held_out({**row, "notes": "strategy=zero1"})
    assert not R.held_out({**row, "holdout": "0"})
    assert R.held_out({**row, "notes": "seen_before_entry=0"})
    # the dgxc-benchmarking Nemotron-H rows: the hash rule holds two of them out, the token counts all seven open
    rows = [r for r in _rows(R.default_dir() / "runs_dense.csv") if r["source_id"] == "DGXC_NEMOTRONH"]
    assert len(rows) == 7 and sum(r["holdout"] == "1" for r in rows) == 2
    assert not any(R.held_out(r) for r in rows)
