"""[issue 17] The experts' grouped GEMM against Transformer Engine's published grouped-GEMM benchmark
(validation/grouped_gemm.csv, gpusim.validation_grouped)."""

from __future__ import annotations

import csv
import json

import pytest

from gpusim import validation_grouped as VGG
from gpusim.errors import GpusimError


def test_every_row_is_predicted_and_the_throughput_follows_from_the_model_time(db):
    """Each row's TFLOP/s is 2 g m n k over the time of ceil(g / 4) rounds of min(g, 4) concurrent GEMMs, each timed
    by the layout model's GEMM function on the H100's sustained ceiling (hand-checked on the 16-group row)."""
    from gpusim.model.gemm import gemm_time_s
    from gpusim.params import DEFAULT_PARAMS as p

    rows = VGG.run(db=db)
    assert rows and all(not r.error and r.predicted_flop_per_s for r in rows)
    h100 = db.gpu("h100-sxm")
    one = gemm_time_s(2048, 768, 2048, h100.training_matmul_flop_per_s("bf16"), h100.memory_bytes_per_s,
                      float(h100.sm_count), elem_bytes=2.0, k_half=p.gemm_k_half_steps, mem_eff_frac=p.mem_eff_frac,
                      kernel_tail_s=p.kernel_tail_s, batch=4.0,
                      serial_epilogue=h100.architecture not in p.gemm_epilogue_overlap_archs)
    g16 = next(r for r in rows if r.groups == 16 and r.version == "2.7")
    assert g16.predicted_flop_per_s == pytest.approx(2 * 16 * 2048 * 768 * 2048 / (4 * float(one)))
    assert g16.measured_flop_per_s == pytest.approx(553.945e12)  # the table's TFLOP/s in SI
    assert g16.signed_frac == pytest.approx(g16.measured_flop_per_s / g16.predicted_flop_per_s - 1.0)


def test_fewer_tokens_per_expert_run_slower_per_flop(db):
    """The same FLOPs as 16 experts of 2,048 tokens run below 8 experts of 4,096 in the model (waves, tails, more
    rounds), as in the published table (553.9 against 627.9 TFLOP/s with TE 2.7)."""
    h100 = db.gpu("h100-sxm")
    t8 = VGG.grouped_forward_s(h100, 8, 4096, 768, 2048)
    t16 = VGG.grouped_forward_s(h100, 16, 2048, 768, 2048)
    assert t16 > t8


def test_the_summary_separates_the_te_releases(db):
    s = VGG.summarize(VGG.run(db=db))
    assert set(s["by_version"]) == {"2.2", "2.7"} and s["n"] == 4 and not s["errors"]


def test_a_bad_row_is_reported_not_raised(db, tmp_path):
    with open(VGG.default_csv()) as f:
        rows = list(csv.DictReader(f))
    rows[0]["implementation"] = "cutlass"
    rows[1]["m"] = "many"
    path = tmp_path / "g.csv"
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=VGG.COLUMNS)
        w.writeheader()
        w.writerows(rows)
    out = VGG.run(path, db=db)
    assert "cutlass" in out[0].error and "numbers" in out[1].error and not out[2].error
    assert VGG.summarize(out)["errors"] == [rows[0]["row_id"], rows[1]["row_id"]]


def test_a_runs_folder_without_the_table_gives_no_rows(db, tmp_path, monkeypatch):
    """$GPUSIM_RUNS_DIR names the folder of the validation tables: one without this table gives no rows, no error."""
    monkeypatch.setenv("GPUSIM_RUNS_DIR", str(tmp_path))
    assert VGG.default_csv() is None and VGG.run(db=db) == []


def test_a_file_without_the_columns_is_a_clear_error(tmp_path):
    path = tmp_path / "g.csv"
    path.write_text("row_id,gpu\nx,h100-sxm\n")
    with pytest.raises(GpusimError, match="measured_tflop_per_s"):
        VGG.load_rows(path)


def test_validate_json_carries_the_table(capsys):
    from gpusim.cli import main

    assert main(["validate", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)["grouped_gemm"]
    assert len(d["rows"]) == 4 and d["summary"]["by_version"]["2.7"]["n"] == 2
