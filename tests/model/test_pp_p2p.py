"""[issue 17] Sends between pipeline stages as Megatron-Core runs them: synchronous in 1F1B (and in the SC'21 / 2022
codes of the paper tables), overlapped with the next chunk's compute in the interleaved schedule's steady state
(``overlap_p2p_comm``): closed forms on hand-worked cases, and the wiring through Scenario and the validations."""

from __future__ import annotations

import csv
import math

import numpy as np
import pytest

from gpusim.model.llm import pp_p2p_exposed_s
from gpusim.simulation import Scenario, simulate
from gpusim.workload import get_workload

MS = 1e-3


def test_synchronous_sends_closed_form():
    # pp 4, vp 1, m 8: 2 (8 + 3) = 22 sends of 1 ms on the critical path; half the steady-state ones hidden (the
    # ModelParams fraction): 22 - 8 = 14
    kw = dict(chunk_fwd_s=3 * MS, chunk_bwd_s=6 * MS, slowdown_frac=0.1)
    assert pp_p2p_exposed_s(1 * MS, 0.0, 4, 1, 8, False, **kw) == pytest.approx(22 * MS, rel=1e-12)
    assert pp_p2p_exposed_s(1 * MS, 0.0, 4, 1, 8, False, hidden_frac=0.5, **kw) == pytest.approx(14 * MS, rel=1e-12)
    # interleaved without the overlap (the paper tables' code): 2 (2 x 8 + 3) = 38 sends; a regather of 0.5 ms each
    assert pp_p2p_exposed_s(1 * MS, 0.5 * MS, 4, 2, 8, False, **kw) == pytest.approx(38 * 1.5 * MS, rel=1e-12)
    # one stage: no sends
    assert pp_p2p_exposed_s(1 * MS, 0.0, 1, 1, 8, False, **kw) == 0.0


def test_overlapped_sends_closed_form():
    # pp 4, vp 2, m 8; a 1 ms send beside a 6 ms backward chunk and a 3 ms forward chunk, 10% of the SMs held:
    # each beside-pair costs 0.1 + 0.1 ms; fill and drain 2 x 3 sends of 1 ms: 6 + 16 x 0.2 = 9.2 ms (38 ms without)
    kw = dict(chunk_fwd_s=3 * MS, chunk_bwd_s=6 * MS, slowdown_frac=0.1)
    assert pp_p2p_exposed_s(1 * MS, 0.0, 4, 2, 8, True, **kw) == pytest.approx(9.2 * MS, rel=1e-12)
    # a 5 ms send outlasts the forward chunk by 2 ms and hides under the backward one (no SM share): pair 2 ms;
    # 2 x 3 x 5 + 16 x 2 = 62 ms (190 without)
    kw0 = dict(kw, slowdown_frac=0.0)
    assert pp_p2p_exposed_s(5 * MS, 0.0, 4, 2, 8, True, **kw0) == pytest.approx(62 * MS, rel=1e-12)
    assert pp_p2p_exposed_s(5 * MS, 0.0, 4, 2, 8, False, **kw0) == pytest.approx(190 * MS, rel=1e-12)
    # the regather after each receive stays on the compute stream: + 2 x 3 x 0.5 + 16 x 2 x 0.5 = 19 ms
    assert pp_p2p_exposed_s(5 * MS, 0.5 * MS, 4, 2, 8, True, **kw0) == pytest.approx(81 * MS, rel=1e-12)


def test_overlap_never_exposes_more_than_blocking_sends():
    rng = np.random.default_rng(17)
    p2p, chunk_f, chunk_b = (rng.uniform(1e-5, 1e-2, 500) for _ in range(3))
    pp, vp, m = rng.integers(2, 33, 500), rng.integers(1, 9, 500), rng.integers(1, 400, 500)
    kw = dict(chunk_fwd_s=chunk_f, chunk_bwd_s=chunk_b, slowdown_frac=rng.uniform(0.0, 1.0, 500))
    assert np.all(pp_p2p_exposed_s(p2p, 0.0, pp, vp, m, True, **kw)
                  <= pp_p2p_exposed_s(p2p, 0.0, pp, vp, m, False, **kw) * (1 + 1e-12))


def _llama70b(**kw):
    base = dict(workload=get_workload("llama3-70b", seq_len=8192), node="dgx-h100", gpus=64, nodes=8, kind="zero1",
                precision="bf16", tp=4, pp=8, vp=5, micro_batch=1, global_batch=128, recompute="none")
    base.update(kw)
    return Scenario.create(**base)


def test_megatron_default_overlaps_interleaved_sends_only(db):
    on = simulate(_llama70b(), db=db, recommend=False).breakdown_s
    off = simulate(_llama70b(pp_p2p_overlap=False), db=db, recommend=False).breakdown_s
    assert on["pp_p2p_exposed_s"] < 0.5 * off["pp_p2p_exposed_s"]
    # only the p2p term moves
    for key in ("compute_s", "pp_bubble_s", "tp_comm_exposed_s"):
        assert on[key] == pytest.approx(off[key], rel=1e-12)
    # 1F1B (vp 1) has no overlap whatever the flag says (Megatron-Core's non-interleaved schedule)
    a = simulate(_llama70b(vp=1, pp_p2p_overlap=True), db=db, recommend=False).breakdown_s
    b = simulate(_llama70b(vp=1, pp_p2p_overlap=False), db=db, recommend=False).breakdown_s
    assert a["pp_p2p_exposed_s"] == b["pp_p2p_exposed_s"] > 0.0


def test_paper_tables_run_without_the_overlap():
    from gpusim import validation_llm as VL

    row = {"gpus": "512", "gpus_per_node": "8", "precision": "amp_fp16", "global_batch": "1536", "recompute": "full",
           "sequence_parallel": "false", "source_id": VL.TABLE1}
    scn = VL.row_scenario(row, get_workload("llama3-8b"), 8, 2, 8, 8)
    assert scn.strategy.pp_p2p_overlap is False


def test_meta_rows_state_the_papers_interleaving():
    from gpusim.validation_runs import default_dir

    rows = [r for r in csv.DictReader(open(default_dir() / "runs_dense.csv", newline=""))
            if r["run_id"] in ("meta-llama3-405b-16k", "meta-llama3-405b-16k-cp16")]
    assert len(rows) == 2
    for r in rows:
        assert r["vp"] == "8" and "with V pipeline stages on one pipeline rank" in r["notes"]
        assert 126 + 2 == int(r["pp"]) * int(r["vp"])  # the deduction the note states: one layer per chunk
    assert not math.isnan(float(rows[0]["value"]))


def test_cli_no_overlap_p2p_comm_flag(capsys):
    from gpusim.cli import main

    base = ["predict", "--model", "llama3-70b", "--gpu", "h100-sxm", "--gpus", "64", "--nodes", "8", "--tp", "4",
            "--pp", "8", "--vp", "5", "--micro-batch", "1", "--global-batch", "128", "--seq-len", "8192",
            "--precision", "bf16", "--strategy", "zero1", "--json"]
    import json

    assert main(base) == 0
    on = json.loads(capsys.readouterr().out)["breakdown_s"]["pp_p2p_exposed_s"]
    assert main(base + ["--no-overlap-p2p-comm"]) == 0
    off = json.loads(capsys.readouterr().out)["breakdown_s"]["pp_p2p_exposed_s"]
    assert off > 2.0 * on > 0.0


def test_runs_notes_option_overlap_p2p_comm(db, run_row):
    from gpusim.validation_runs import options, predict_row

    assert options("stated overlap_p2p_comm=0; strategy=zero1") == {"overlap_p2p_comm": "0", "strategy": "zero1"}
    row = run_row(model="llama3-70b", gpus=64, tp=4, pp=8, vp=5, ep=1)
    on = predict_row(row, db=db)
    off = predict_row(dict(row, notes="strategy=zero1; overlap_p2p_comm=0"), db=db)
    assert off.step_s > on.step_s
    assert "not 0 or 1" in predict_row(dict(row, notes="overlap_p2p_comm=maybe"), db=db).error
