"""[issue 18, item 5] llm-foundry's MPT FSDP benchmark tables (validation/runs_fsdp.csv, gpusim.validation_fsdp)."""

import csv

import pytest

from gpusim import validation_fsdp as F
from gpusim import validation_runs as R
from gpusim.errors import GpusimError

COMMIT = "061f2c7ce64e655100286584a7629e2a09f827ba"


def _rows():
    with open(F.default_csv(), newline="") as fh:
        return list(csv.DictReader(fh))


@pytest.fixture(scope="module")
def results():
    return F.run()


def test_every_row_loads_with_its_source_and_the_schema():
    with open(F.default_csv(), newline="") as fh:
        assert tuple(next(csv.reader(fh))) == F.COLUMNS
    rows = F.load_rows()
    # the four tables of the README: H100 BF16 52, H100 FP8 10, A100 80GB 61, A100 40GB 78
    counts = {}
    for r in rows:
        counts[r["source_id"]] = counts.get(r["source_id"], 0) + 1
    assert counts == {"LLMF_H100_BF16": 52, "LLMF_H100_FP8": 10, "LLMF_A100_80GB": 61, "LLMF_A100_40GB": 78}
    ids = [r["run_id"] for r in rows]
    assert len(ids) == len(set(ids))
    assert all(COMMIT in r["source"] and "scripts/train/benchmarking/README.md" in r["source"] for r in rows)
    assert all(r["notes"].strip() and "node:" in r["notes"] and "model:" in r["notes"] for r in rows)
    assert all(int(r["micro_batch"]) * int(r["grad_accum"]) * int(r["gpus"]) == int(r["global_batch"]) for r in rows)


def test_holdout_column_is_the_stated_hash_rule():
    rows = _rows()
    for r in rows:
        assert (r["holdout"] == "1") == F.holdout_rule(r["run_id"]), r["run_id"]
    assert sum(r["holdout"] == "1" for r in rows) >= len(rows) / 5  # about a quarter (55 of 201)


def test_llmfoundry_mfu_hand_worked_reproduces_the_published_mfu():
    """llmf-h100-bf16-70b-s2048-g32-gb1024 (an open row): 28,242 tokens/s of 2048-token sequences on 32 H100,
    NumParams 64,862,437,376, 80 layers of width 8192. flops_per_seq = 2 x 64,862,437,376 x 2048 = 2.65677e14;
    attn_flops_per_seq = 80 x 2 x 2 x 8192 x 2048^2 = 1.09951e13; seq/s = 28242 / 2048 = 13.79004;
    (3 x 2.65677e14 + 3 x 1.09951e13) x 13.79004 = 1.14459e16 FLOP/s over 32 x 989.5e12 = 0.36148: the table's 36.15."""
    assert 2 * 64862437376 * 2048 == 265676543492096
    assert 80 * 2 * 2 * 8192 * 2048 ** 2 == 10995116277760
    mfu = F.llmfoundry_mfu(64862437376, 80, 8192, 2048, 28242 / 2048, 32, F.GPU_AVAILABLE_FLOPS["h100-sxm"]["amp_bf16"])
    assert mfu == pytest.approx(0.361481, abs=1e-6)
    assert round(100 * mfu, 2) == 36.15
    # the other peaks: H100 FP8 1979e12 (llmf-h100-fp8-3b-s2048-g8-gb480: 244,692 tokens/s, 27.7) and A100 312e12
    # (llmf-a100-40gb-purebf16-13b-s2048-g16-gb160: 31,900 tokens/s on 16 GPUs, 52.5)
    fp8 = F.llmfoundry_mfu(2651837440, 32, 2560, 2048, 244692 / 2048, 8, F.GPU_AVAILABLE_FLOPS["h100-sxm"]["amp_fp8"])
    assert fp8 == pytest.approx(0.277029, abs=1e-6)
    a100 = F.llmfoundry_mfu(12853954560, 40, 5120, 2048, 31900 / 2048, 16, F.GPU_AVAILABLE_FLOPS["a100-sxm4-40gb"]["bf16"])
    assert a100 == pytest.approx(0.525001, abs=1e-6)


def test_every_open_row_reproduces_its_printed_mfu_from_its_throughput():
    """The transcription and the formula together: each open row's T/s gives back its printed MFU within the
    rounding of its printed T/s (held-out rows are not read here)."""
    from gpusim.workload import get_workload

    for r in _rows():
        if r["holdout"] == "1":
            continue
        spec = get_workload(r["model"], seq_len=int(r["seq_len"])).transformer
        seq = int(r["seq_len"])
        m = F.llmfoundry_mfu(float(r["num_params"]), spec.n_layers, spec.d_model, seq,
                             float(r["measured_tokens_per_s"]) / seq, int(r["gpus"]),
                             F.GPU_AVAILABLE_FLOPS[r["gpu"]][r["precision"]])
        assert 100 * m == pytest.approx(float(r["measured_mfu"]), abs=0.05), r["run_id"]


def test_every_row_is_predicted(results):
    assert len(results) == len(_rows())
    assert [(r.run_id, r.error) for r in results if r.error] == []
    assert all(r.step_s > 0 and r.mfu_frac > 0 for r in results)
    assert all(r.layout.startswith("fsdp-full") for r in results)


def test_summary_constant_baseline_and_hidden_holdout(results, capsys):
    s = F.summarize(results)
    assert s["open"]["all"]["rows"] + s["holdout"]["all"]["rows"] == len(results)
    assert 0.3 < s["constant_mfu_frac"] < 0.7
    for part in ("open", "holdout"):
        st = s[part]["all"]
        assert st["predicted"] == st["rows"] and st["mfu_median_ape"] is not None
        assert st["constant_median_ape"] is not None
    dicts = F.to_dicts(results)
    assert all(d["hidden"] and d["measured_mfu_frac"] is None and d["mfu_frac"] is None and d["step_s"] is None
               for d in dicts if d["holdout"])
    assert all("hidden" not in d and d["mfu_frac"] is not None for d in dicts if not d["holdout"])
    assert all(d["mfu_frac"] is not None for d in F.to_dicts(results, holdout_rows=True))
    from gpusim.commands._common import print_table
    from gpusim.validation import fmt_pct

    F.print_section(results, print_table, fmt_pct)
    out = capsys.readouterr().out
    assert "held-out" in out and "constant predictor" in out
    assert "llmf-" not in out  # no row (held-out or not) printed one by one


def test_a_bad_csv_is_refused_and_a_bad_row_is_its_error(tmp_path):
    bad = tmp_path / "runs_fsdp.csv"
    bad.write_text("run_id,model\nx,mpt-1b\n")
    with pytest.raises(GpusimError, match="missing column"):
        F.load_rows(bad)
    row = dict(_rows()[0], sharding="SOMETHING_ELSE")
    assert "sharding" in F.predict_row(row).error
    row = dict(_rows()[0], precision="int4")
    assert "precision" in F.predict_row(row).error
    row = dict(_rows()[0], gpus="x")
    assert F.predict_row(row).error


def test_the_published_runs_table_does_not_read_the_fsdp_file():
    """runs_fsdp.csv has its own schema: gpusim.validation_runs (the runs_*.csv of the shared schema) skips it."""
    assert all(p.name != "runs_fsdp.csv" for p in R.default_paths())
    assert "runs_fsdp.csv" in R.OTHER_SCHEMA_FILES
