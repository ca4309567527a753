"""The layout search inside `gpusim plan` and `gpusim sweep`: one best-layout row per hardware option and count,
the same numbers as predict, why it beats the next best, and pinned degrees."""

from __future__ import annotations

import json

import pytest

from gpusim.cli import main
from gpusim.planning import plan
from gpusim.search import Pins
from gpusim.simulation import Scenario, simulate


@pytest.fixture(scope="module")
def llm_plan(db):
    return plan("llama3-70b", tokens=1e12, gpus=["h100-sxm"], max_gpus=256, db=db, with_sensitivity=True,
                checkpointing=(False,), strategies=("zero3",))


def test_plan_has_layout_rows_that_predict_reproduces(llm_plan, db):
    df = llm_plan.table
    lay = df[df["layout"].astype(str) != ""]
    assert len(lay) and lay["feasible"].any()
    r = lay[lay["feasible"] & ~lay["node_assumed"].astype(bool)].iloc[-1]  # (an instance template, not a stand-in)
    scn = Scenario(model="llama3-70b", node=str(r["node"]), gpus=int(r["n_gpus"]), nodes=int(r["nodes"]), kind="zero1",
                   tp=int(r["tp"]), pp=int(r["pp"]), vp=int(r["vp"]), cp=int(r["cp"]), per_gpu_batch=int(r["micro_batch"]),
                   global_batch=int(r["global_batch"]), recompute=str(r["recompute"]), uneven_pp=True)
    assert simulate(scn, db=db).step_s == pytest.approx(float(r["step_s"]), rel=1e-9)
    assert r["global_batch"] == int(r["micro_batch"]) * int(r["accum"]) * int(r["n_gpus"]) // (
        int(r["tp"]) * int(r["pp"]) * int(r["cp"]))


def test_plan_recommends_a_layout_and_says_why(llm_plan):
    rec = llm_plan.recommendation
    assert rec["configuration"]["layout"]
    assert "Megatron tp" in rec["summary"]
    why = next(x for x in rec["reasons"] if x.startswith("layout "))
    assert "bubble" in why and "NVLink" in why and "free" in why and "headroom" in why and "faster than the next best" in why
    assert llm_plan.table.attrs["layout_rows"] > 1000


def test_a_small_cluster_without_a_fitting_layout_says_so(llm_plan):
    df = llm_plan.table
    one = df[(df["layout"].astype(str) == "") & (df["n_gpus"] == 8) & (df["strategy"].astype(str) == "zero1")]
    assert len(one) and not one["feasible"].any()
    assert one["reason"].astype(str).str.contains("no layout fits in GPU memory").all()


def test_pinned_degrees_hold(db):
    res = plan("llama3-70b", tokens=1e12, gpus=["h100-sxm"], max_gpus=128, db=db, with_sensitivity=False,
               strategies=("zero3",), checkpointing=(False,), layout_pins=Pins(tp=8))
    lay = res.table[(res.table["layout"].astype(str) != "") & res.table["feasible"]]
    assert len(lay) and set(lay["tp"]) == {8}


def test_sweep_cli_json_and_pins(capsys):
    code = main(["sweep", "--model", "llama3-70b", "--gpu", "h100-sxm", "--gpus", "64", "--nodes", "8",
                 "--seq-len", "8192", "--global-batch", "128", "--tp", "4", "--json"])
    d = json.loads(capsys.readouterr()[0])
    assert code == 0
    assert {r["tp"] for r in d["layouts"]} == {4}
    assert d["best"]["feasible"] and "faster than the next best" in d["explanation"]
    bad = [r for r in d["layouts"] if not r["feasible"]]
    assert bad and all(r["reason"] for r in bad)


def test_sweep_cli_chooses_a_global_batch_when_none_is_given(capsys):
    code = main(["sweep", "--model", "llama3-70b", "--gpu", "h100-sxm", "--gpus", "64", "--nodes", "8", "--json"])
    out, err = capsys.readouterr()
    d = json.loads(out)
    assert code == 0 and "global batch 2048 sequences" in err  # 16M tokens / 8192 = 2048
    b = d["best"]
    assert b["micro_batch"] * b["n_micro"] * b["dp"] == 2048


def test_plan_cli_pins_a_degree(capsys):
    code = main(["plan", "--model", "llama3-70b", "--tokens", "1e12", "--gpu", "h100-sxm", "--max-gpus", "64",
                 "--tp", "8", "--no-progress", "--json"])
    d = json.loads(capsys.readouterr()[0])
    assert code == 0
    rows = [r for r in d["configurations"] if r.get("layout")]
    assert rows and all(r["tp"] == 8 for r in rows)
    assert d["recommendation"]["configuration"]["layout"].startswith("tp 8 ")


def test_sweep_cli_ep_on_a_dense_model_is_refused(capsys):
    code = main(["sweep", "--model", "llama3-70b", "--gpu", "h100-sxm", "--gpus", "64", "--nodes", "8",
                 "--global-batch", "128", "--ep", "8"])
    err = capsys.readouterr()[1]
    assert code == 2 and "dense" in err and len(err.strip().splitlines()) == 1


def test_one_progress_bar_over_the_sweep_and_the_layout_search(db):
    calls = []
    res = plan("llama3-8b", tokens=1e11, gpus=["h100-sxm"], max_gpus=32, db=db, with_sensitivity=False,
               strategies=("zero3",), checkpointing=(False,), progress=lambda d, t: calls.append((d, t)))
    assert res.table.attrs["layout_rows"] > 0
    done, total = calls[-1]
    assert done == total and total > res.table.attrs.get("model_rows", 0)
    assert all(b[0] >= a[0] for a, b in zip(calls, calls[1:]))  # never goes back


def test_each_plan_row_holds_the_best_layout_the_search_finds_there(llm_plan, db):
    from gpusim.search import search_layouts

    df = llm_plan.table
    rows = df[(df["layout"].astype(str) != "") & df["feasible"]]
    assert len(rows) >= 2
    for _, r in rows.iloc[[0, -1]].iterrows():
        scn = Scenario(model="llama3-70b", node=str(r["node"]), gpus=int(r["n_gpus"]), nodes=int(r["nodes"]),
                       kind="zero1", precision=str(r["precision"]), global_batch=int(r["global_batch"]))
        res = search_layouts(scn, db=db)
        best = res["best"]
        assert float(res["out"]["throughput_samples_per_s"][best]) == pytest.approx(
            float(r["throughput_samples_per_s"]), rel=1e-9)


def test_the_plan_is_the_same_in_any_block_size(db, monkeypatch):
    import gpusim.search as S

    def run():
        t = plan("llama3-70b", tokens=1e12, gpus=["h100-sxm"], max_gpus=64, db=db, with_sensitivity=False,
                 strategies=("zero3",), checkpointing=(False,)).table
        return t[t["layout"].astype(str) != ""][["layout", "step_s", "reason", "layout_why"]].reset_index(drop=True)

    whole = run()
    monkeypatch.setattr(S, "CHUNK_ROWS", 777)
    assert run().equals(whole)
    assert [(s.start, s.stop) for s in S.chunks(10, 4)] == [(0, 3), (3, 6), (6, 10)]


def test_layout_scenario_reproduces_every_searched_layout_even_and_uneven(db):
    """search.layout_scenario is how sweep, plan and the app rebuild a searched layout for simulate(): it must be the
    layout the search evaluated, uneven stages (Llama 3 70B's 80 layers over pp x vp that do not divide them) included."""
    from gpusim.search import layout_scenario, search_layouts, search_table

    scn = Scenario(model="llama3-70b", gpu="h100-sxm", gpus=96, nodes=12, kind="zero1", global_batch=384)
    rows = [r for r in search_table(search_layouts(scn, db=db)) if r["feasible"]]
    uneven = [r for r in rows if 80 % (r["pp"] * r["vp"]) != 0]
    even = [r for r in rows if 80 % (r["pp"] * r["vp"]) == 0]
    assert uneven and even
    for r in uneven[:3] + even[:3]:
        chosen = layout_scenario(scn, r)
        assert chosen.strategy.uneven_pp == (r in uneven)
        assert simulate(chosen, db=db).step_s == pytest.approx(r["step_s"], rel=1e-9), r


def test_why_names_the_headroom_or_the_one_communicator(db):
    """[issue 17] A layout with communicators beyond the first carries their memory as headroom and says so; a
    data-parallel-only layout has one communicator, which the memory counted holds: it says that, not "0 B headroom"."""
    from gpusim.search import search_layouts, why

    scn = Scenario(model="llama2-7b", gpu="h100-sxm", gpus=8, nodes=1, kind="zero1", global_batch=64)
    res = search_layouts(scn, db=db)
    lay = res["layouts"]
    dp_only = [i for i in res["order"] if lay["tp"][i] == lay["pp"][i] == lay["cp"][i] == 1]
    split = [i for i in res["order"] if lay["tp"][i] > 1 or lay["pp"][i] > 1]
    assert dp_only and split
    for i in dp_only[:3]:
        text = why(res, i, 8)
        assert "its one NCCL communicator is in the memory counted" in text and "0 B headroom" not in text
    for i in split[:3]:
        text = why(res, i, 8)
        assert "beyond the" in text and "headroom)" in text
