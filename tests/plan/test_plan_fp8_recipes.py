"""[issue 17] `gpusim plan` and the data-parallel sweep take the FP8 recipes by the names predict takes them
(fp8-cs: per-tensor current scaling, NVIDIA's newer Hopper recipes; fp8-mx: MXFP8), and rank them as predict
predicts them."""

from __future__ import annotations

import pytest

from gpusim.cli import main
from gpusim.errors import ScenarioError
from gpusim.planning import plan
from gpusim.simulation import Scenario, simulate
from gpusim.sweeps import sweep


def _best_layout_row(df, precision):
    lay = df[(df["layout"].astype(str) != "") & df["feasible"] & (df["precision"] == precision)]
    assert len(lay), f"no feasible {precision} layout row"
    return lay.sort_values("step_s").iloc[0]


@pytest.fixture(scope="module")
def fp8_plan(db):
    return plan("llama3-8b", tokens=1e11, gpus=["h100-sxm"], max_gpus=16, precisions=("fp8", "fp8-cs"), db=db,
                checkpointing=(False,), strategies=("zero1",))


def test_plan_ranks_current_scaling_as_predict_predicts_it(fp8_plan, db):
    df = fp8_plan.table
    rows = {p: _best_layout_row(df, p) for p in ("fp8", "fp8-cs")}
    steps = {}
    for p, r in rows.items():
        scn = Scenario(model="llama3-8b", node=str(r["node"]), gpus=int(r["n_gpus"]), nodes=int(r["nodes"]),
                       kind="zero1", precision=p, tp=int(r["tp"]), pp=int(r["pp"]), vp=int(r["vp"]), cp=int(r["cp"]),
                       per_gpu_batch=int(r["micro_batch"]), global_batch=int(r["global_batch"]),
                       recompute=str(r["recompute"]), uneven_pp=True)
        assert scn.strategy.fp8_recipe == ("current" if p == "fp8-cs" else "delayed")
        steps[p] = simulate(scn, db=db).step_s
        assert steps[p] == pytest.approx(float(r["step_s"]), rel=1e-9), p
    # current scaling reduces each tensor's amax before quantising it: never faster than delayed scaling's history
    assert steps["fp8-cs"] >= steps["fp8"] * (1 - 1e-9)


def test_data_parallel_sweep_takes_the_recipe_names(db):
    df = sweep(model="resnet50", gpus=["h100-sxm"], node_counts=[1], precisions=["fp8-cs", "fp8"], db=db,
               strategies=["ddp"], micro_batches=[64])
    assert set(df["precision"]) == {"fp8-cs", "fp8"}
    # the data-parallel rows model the recipe through the FP8 peak alone: both names price the same GEMMs
    a, b = (df[df["precision"] == p].sort_values("n_gpus")["step_s"].to_numpy() for p in ("fp8-cs", "fp8"))
    assert a == pytest.approx(b, rel=1e-12)


def test_mxfp8_name_needs_microscaling_tensor_cores(db):
    df = sweep(model="resnet50", gpus=["h100-sxm"], node_counts=[1], precisions=["fp8-mx"], db=db,
               strategies=["ddp"], micro_batches=[64])
    assert not df["feasible"].any()
    assert df["reason"].str.contains("microscaling").all()


def test_unknown_precision_names_every_choice(db):
    with pytest.raises(ScenarioError, match="fp8-cs"):
        sweep(model="resnet50", gpus=["h100-sxm"], node_counts=[1], precisions=["fp9"], db=db)


def test_plan_cli_accepts_fp8_cs(capsys):
    rc = main(["plan", "--model", "llama3-8b", "--tokens", "1e10", "--gpu", "h100-sxm", "--max-gpus", "8",
               "--precision", "fp8-cs", "--no-progress"])
    out = capsys.readouterr().out
    assert rc == 0
    assert "fp8-cs" in out
