"""[issue 17] validation/ep_dispatch.csv: the Megatron-Core MoE paper's Table 7 (one dispatch and one combine of a
DeepSeek-V3-shaped MoE layer, HybridEP and NCCL's all-to-all, GB200 NVL72 and DGX H100, EP 8 to 64) against gpusim's
one all-to-all (gpusim.validation_ep)."""

from __future__ import annotations

import json

import pytest

from gpusim import validation_ep as VE
from gpusim.checks import read_csv
from gpusim.hwdb import load

DB = load()


def _rows():
    return read_csv(VE.default_csv(), VE.COLUMNS)


def test_the_table_as_the_paper_prints_it():
    rows = _rows()
    assert len(rows) == 32 and tuple(rows[0]) == VE.COLUMNS
    cells = {(r["gpu"], r["dispatcher"], int(r["ep"]), r["op"]): float(r["value_us"]) for r in rows}
    # spot checks against Table 7 (section 4.2.2): GB200 HybridEP dispatch at EP 8, H100 all-to-all combine at EP 64
    assert cells[("gb200", "deepep", 8, "dispatch")] == 391
    assert cells[("h100-sxm", "alltoall", 64, "combine")] == 8727
    assert {r["source_id"] for r in rows} == {"MCORE_MOE_2603_T7"} and all(r["holdout"] == "0" for r in rows)


def test_every_row_predicts_one_all_to_all_of_the_layer():
    rows = VE.run(db=DB)
    assert [r.row_id for r in rows if r.error] == []
    # a dispatch and a combine of one cell are the same exchange in gpusim (BF16 both ways)
    by = {}
    for r in rows:
        by.setdefault((r.gpu, r.dispatcher, r.ep), set()).add(r.predicted_s)
    assert all(len(v) == 1 for v in by.values())
    # the hierarchical dispatcher across H100 nodes beats NCCL's all-to-all, as the paper measured at every EP size
    for ep in (16, 32, 64):
        assert next(iter(by[("h100-sxm", "deepep", ep)])) < next(iter(by[("h100-sxm", "alltoall", ep)]))


def test_summary_is_the_rows_statistics():
    rows = [VE.EpRow("a", "g", "deepep", 8, "dispatch", False, 1.0, 1.1),
            VE.EpRow("b", "g", "deepep", 8, "combine", False, 1.0, 0.8),
            VE.EpRow("c", "g", "alltoall", 8, "dispatch", False, 2.0, 2.0)]
    s = VE.summarize(rows)
    assert s["all"]["median_ape"] == pytest.approx(0.1)
    assert s["all"]["median_signed"] == pytest.approx(0.0)
    assert s["groups"]["g deepep"]["predicted"] == 2


def test_validate_prints_and_reports_the_table(capsys):
    from gpusim.cli import main

    assert main(["validate", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)["ep_dispatch"]
    assert d["summary"]["all"]["predicted"] == 32 and len(d["rows"]) == 32
    assert main(["validate"]) == 0
    assert "Expert-parallel dispatch and combine" in capsys.readouterr().out


def test_a_bad_file_says_which_columns_are_missing(tmp_path):
    from gpusim.errors import GpusimError

    bad = tmp_path / "ep.csv"
    bad.write_text("row_id,gpu\nx,gb200\n")
    with pytest.raises(GpusimError, match="missing column"):
        VE.run(bad, db=DB)


def test_a_bad_row_comes_back_with_its_error():
    good = _rows()[0]
    for change, says in (({"ep": "eight"}, "unreadable"), ({"value_us": ""}, "unreadable"),
                         ({"value_us": "0"}, "positive"), ({"tokens": "4k"}, "unreadable"), ({"elem_bytes": "1"}, "16-bit"),
                         ({"gpu": "no-such-gpu"}, "no node template"), ({"dispatcher": "nccl"}, "not alltoall")):
        row = VE.predict({**good, **change}, db=DB)
        assert row.predicted_s is None and says in row.error, (change, row.error)
        assert row.signed_frac is None
