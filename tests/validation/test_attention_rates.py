"""[issue 17] validation/attention_rates.csv: the Megatron-Core MoE paper's Table 9 (cuDNN fused attention at
DeepSeek-V3's shape on Hopper and Blackwell, 4K and 16K tokens) against gpusim's attention-core rate
(gpusim.validation_attention)."""

from __future__ import annotations

import json

import pytest

from gpusim import validation_attention as VA
from gpusim.checks import read_csv
from gpusim.hwdb import load
from gpusim.model.llm import FLASH_BWD_FLOP_MULT

DB = load()


def _rows():
    return read_csv(VA.default_csv(), VA.COLUMNS)


def test_the_table_as_the_paper_prints_it():
    rows = _rows()
    assert len(rows) == 8 and tuple(rows[0]) == VA.COLUMNS
    cells = {(r["gpu"], int(r["seq_len"]), r["pass"]): float(r["tflop_per_s"]) for r in rows}
    assert cells[("h100-sxm", 4096, "forward")] == 553 and cells[("gb200", 16384, "backward")] == 1298


def test_the_rate_is_the_causal_half_of_the_mla_attention_over_its_predicted_time():
    """DeepSeek-V3: 128 heads, query/key 192 wide, value 128: the forward's causal half at 4096 tokens is
    4096^2 x 128 x (192 + 128) = 6.87e11 FLOP, the backward 2.5x that."""
    from gpusim.scenario import Scenario
    from gpusim.simulation import simulate
    from gpusim.workload import get_workload

    row = next(r for r in _rows() if r["gpu"] == "h100-sxm" and r["seq_len"] == "4096" and r["pass"] == "backward")
    got = VA.predict(row, db=DB)
    sc = Scenario.create(workload=get_workload("deepseek-v3", seq_len=4096), node="dgx-h100", gpus=8, kind="zero1",
                         precision="bf16", ep=8, micro_batch=1, global_batch=8, seq_len=4096)
    t = simulate(sc, db=DB, recommend=False).layer_s["attn_bwd_s"]
    flop = 4096**2 * 128 * (192 + 128)
    assert flop == pytest.approx(6.87e11, rel=1e-3)
    assert got.predicted_flop_per_s == pytest.approx(FLASH_BWD_FLOP_MULT * flop / t, rel=1e-9)
    assert got.signed_frac == pytest.approx(422e12 / got.predicted_flop_per_s - 1.0)


def test_bad_rows_and_validate(capsys):
    good = _rows()[0]
    for change in ({"tflop_per_s": "x"}, {"pass": "sideways"}, {"gpu": "no-such-gpu"}, {"seq_len": "0"}):
        r = VA.predict({**good, **change}, db=DB)
        assert r.predicted_flop_per_s is None and r.error, change
    from gpusim.cli import main

    assert main(["validate", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)["attention_rates"]
    assert d["summary"]["all"]["predicted"] == 8
