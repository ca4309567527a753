"""[issue 17] validation/attention_cudnn.csv: cuDNN's fused-attention training benchmark (github.com/NVIDIA/
cudnn-frontend benchmark/attention_training) against gpusim's attention core (gpusim.validation_attention)."""

from __future__ import annotations

import pytest

from gpusim import validation_attention as VA
from gpusim.checks import read_csv
from gpusim.hwdb import load

DB = load()


def _rows():
    return read_csv(VA.cudnn_csv(), VA.CUDNN_COLUMNS)


def _pairs(s: int, window: str) -> int:
    """(query, key) pairs a causal mask (top-left aligned) keeps, with a sliding window of ``window`` keys if given:
    the benchmark's flops.py count."""
    if not window:
        return s * (s + 1) // 2
    w = int(window)
    return w * (w + 1) // 2 + (s - w) * w


def test_every_row_s_time_and_rate_agree_with_its_shape():
    """The table's two figures are the benchmark's own and tie to each other: 4 b h pairs d FLOPs forward (2.5x
    backward) over time_ms give tflop_per_s within 1% on every row (a transcription check); the 16K rows are the
    held-out ones."""
    rows = _rows()
    assert len(rows) == 48 and {r["gpu"] for r in rows} == {"gb200", "gb300", "h200-sxm"}
    for r in rows:
        flop = 4 * int(r["batch"]) * int(r["q_heads"]) * _pairs(int(r["seq_len"]), r["window"]) * int(r["head_dim"])
        flop *= 2.5 if r["pass"] == "bwd" else 1.0
        assert flop / (float(r["time_ms"]) * 1e-3) / 1e12 == pytest.approx(float(r["tflop_per_s"]), rel=0.01), r
        assert (r["holdout"] == "1") == (r["seq_len"] == "16384"), r["row_id"]


def test_the_prediction_is_the_layer_s_attention_core_of_the_preset_s_shape():
    from gpusim.scenario import Scenario
    from gpusim.simulation import simulate
    from gpusim.workload import get_workload

    row = next(r for r in _rows() if r["row_id"] == "cudnn-llama31-gb200-4k-bwd")
    got = VA.predict_cudnn(row, db=DB)
    sc = Scenario.create(workload=get_workload("llama3-70b", seq_len=4096), node="gb200-nvl72", gpus=1, nodes=1,
                         kind="zero1", precision="bf16", recompute="none", micro_batch=2, global_batch=2,
                         seq_len=4096)
    t = simulate(sc, db=DB, recommend=False).layer_s["attn_bwd_s"]
    assert got.predicted_s == pytest.approx(t, rel=1e-12) and got.measured_s == pytest.approx(1.248e-3)
    assert got.signed_frac == pytest.approx(t / 1.248e-3 - 1.0)
    windowed = VA.predict_cudnn(next(r for r in _rows() if r["row_id"] == "cudnn-gptoss-gb200-4k-fwd"), db=DB)
    assert windowed.predicted_s is not None and not windowed.error


def test_bad_rows_are_errors_and_held_out_rows_stay_hidden(capsys):
    good = next(r for r in _rows() if r["row_id"] == "cudnn-llama31-h200-sxm-4k-fwd")
    for change in ({"time_ms": "x"}, {"pass": "sideways"}, {"gpu": "no-such-gpu"}, {"config": "gpt5"},
                   {"head_dim": "64"}, {"window": "4096"}):
        r = VA.predict_cudnn({**good, **change}, db=DB)
        assert r.predicted_s is None and r.error, change
    import json

    from gpusim.cli import main

    assert main(["validate", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)["attention_kernels"]
    assert d["summary"]["open"]["all"]["predicted"] == 36 and d["summary"]["held_out"]["all"]["predicted"] == 12
    assert len(d["rows"]) == 36 and not any(r["holdout"] for r in d["rows"])
