"""The sweep engine: rows equal simulate(), infeasible configurations are rows with reasons, grids are right."""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest

from gpusim.errors import ScenarioError, UnknownIdError
from gpusim.simulation import Scenario, simulate
from gpusim.sweeps import COLUMNS, HardwareOption, default_node_counts, hardware_options, not_offered_reason, sweep


@pytest.fixture(scope="module")
def resnet_grid(db):
    return sweep("resnet50", nodes=["dgx-a100-80gb", "pcie-8x-switch", "ws-4x-rtx-4090"], gpus=["l4"],
                 strategies=("dp", "ddp", "zero2", "fsdp-hybrid"), precisions=("auto", "fp32"),
                 checkpointing=(False, True), micro_batches=(32, 256), accum=(1, 2), num_workers="auto",
                 node_counts=(1, 2), gpus_per_node=(4, 8), db=db)


@pytest.fixture(scope="module")
def llama_grid(db):
    return sweep("llama2-7b", nodes=["dgx-h100", "aws-p4d-24xlarge", "ws-4x-rtx-4090"], checkpointing=(False, True),
                 max_gpus=64, max_global_batch=96, db=db)


def _scenario(row, model):
    kw = dict(model=model, gpus=int(row.n_gpus), nodes=int(row.nodes), kind=row.strategy, precision=row.precision,
              per_gpu_batch=int(row.micro_batch), accum=int(row.accum),
              activation_checkpointing=bool(row.checkpointing), cpu_offload=bool(row.cpu_offload))
    if row.num_workers >= 0:
        kw["num_workers"] = int(row.num_workers)
    if row.node_assumed:
        kw["gpu"] = row.gpu
    else:
        kw["node"] = row.node
    return Scenario(**kw)


@pytest.mark.parametrize("grid,model", [("resnet_grid", "resnet50"), ("llama_grid", "llama2-7b")])
def test_rows_equal_simulate(request, db, grid, model):
    df = request.getfixturevalue(grid)
    ran = df[np.isfinite(df["step_s"])]
    assert len(ran) > 20
    for _, r in ran.sample(min(25, len(ran)), random_state=1).iterrows():
        res = simulate(_scenario(r, model), db=db, recommend=False)
        assert res.step_s == pytest.approx(r.step_s, rel=1e-12)
        assert res.throughput_samples_per_s == pytest.approx(r.throughput_samples_per_s, rel=1e-12)
        assert res.scaling_efficiency_frac == pytest.approx(r.scaling_efficiency_frac, rel=1e-12)
        assert res.mfu_frac == pytest.approx(r.mfu_frac, rel=1e-12)
        assert res.memory_per_gpu_bytes == pytest.approx(r.memory_per_gpu_bytes, rel=1e-12)
        assert res.fits_in_memory == bool(r.fits_in_memory)
        assert res.max_micro_batch == int(r.max_micro_batch)
        assert res.bottleneck == r.bottleneck
        assert res.global_batch == int(r.global_batch)
        for k, v in res.breakdown_s.items():
            assert v == pytest.approx(r[k], rel=1e-12, abs=1e-15)


def test_columns_and_units(resnet_grid):
    assert list(resnet_grid.columns) == list(COLUMNS)
    for c in resnet_grid.columns:
        if c in ("step_s", "compute_s", "memory_per_gpu_bytes", "mfu_frac", "throughput_samples_per_s"):
            assert c.endswith(("_s", "_bytes", "_frac", "_per_s"))


def test_infeasible_rows_have_reasons_and_no_feasible_row_is_impossible(resnet_grid, llama_grid):
    for df in (resnet_grid, llama_grid):
        feas = df[df.feasible]
        assert (feas.reason == "").all()
        assert feas.fits_in_memory.all()
        assert (feas.memory_per_gpu_bytes <= feas.memory_capacity_bytes).all()
        assert np.isfinite(feas.step_s).all()
        bad = df[~df.feasible]
        assert (bad.reason != "").all()
        # a configuration that does not fit is never feasible
        assert not (df.feasible & ~df.fits_in_memory).any()
    r = resnet_grid
    assert (r[r.reason.str.contains("not offered")].gpus_per_node == 4).all()
    assert r.reason.str.contains("holds 4 GPUs, not 8").any()
    offered = ~r.reason.str.contains("not offered|holds")
    dp_multi = r[(r.strategy == "dp") & (r.nodes > 1) & offered]
    assert len(dp_multi) and (~dp_multi.feasible).all()
    assert dp_multi.reason.str.contains("one process").all()
    assert llama_grid.reason.str.startswith("does not fit").any()


def test_global_batch_limit(llama_grid):
    over = llama_grid.global_batch > 96
    assert over.any()
    assert not (llama_grid.feasible & over).any()
    assert llama_grid[over & llama_grid.fits_in_memory].reason.str.contains("> limit 96", regex=False).all()


def test_auto_micro_batches_are_powers_of_two_up_to_the_largest_that_fits(llama_grid):
    ran = llama_grid[np.isfinite(llama_grid.step_s)]
    for _, g in ran.groupby(["node", "nodes", "strategy", "checkpointing"], observed=True):
        mb = sorted(g.micro_batch.unique())
        max_b = int(g.max_micro_batch.iloc[0])
        if max_b >= 1:
            top = 1 << int(math.floor(math.log2(min(max_b, 1024))))
            assert mb == [1 << i for i in range(int(math.log2(top)) + 1)]
            assert g.fits_in_memory.all()
        else:
            assert mb == [1] and not g.fits_in_memory.any()


def test_target_global_batch_sets_accumulation(db):
    df = sweep("resnet50", nodes=["dgx-a100-80gb"], node_counts=(1, 2, 4), strategies=("ddp",),
               micro_batches=(16, 64, 256), global_batch=2048, db=db)
    ran = df[np.isfinite(df.step_s)]
    assert len(ran) == 9
    for _, r in ran.iterrows():
        per_step = r.n_gpus * r.micro_batch
        assert r.accum == max(1, math.ceil(2048 / per_step))
        assert r.global_batch == r.n_gpus * r.micro_batch * r.accum
        assert r.global_batch >= 2048 or per_step > 2048


def test_options_and_counts(db):
    opts = hardware_options(db, gpus=["h100-sxm"])
    assert {o.node for o in opts} == {n.id for n in db.nodes.values() if n.gpu == "h100-sxm"}
    loose = hardware_options(db, gpus=["l4"])
    assert loose and all(o.node is None for o in loose)
    assert {o.gpus_per_node for o in loose} == {1, 2, 4, 8}
    assert default_node_counts(8, 64) == [1, 2, 4, 8]
    assert default_node_counts(8, 7) == []
    assert not_offered_reason(db.node("aws-p5-48xlarge"), 4)
    assert not_offered_reason(db.node("pcie-8x-switch"), 4) is None
    assert not_offered_reason(db.node("pcie-8x-switch"), 16)


def test_unsupported_precision_is_a_row(db):
    df = sweep("resnet50", gpus=["v100-sxm2-16gb"], precisions=("amp_bf16",), node_counts=(1,), db=db)
    assert len(df) and not df.feasible.any()
    assert df.reason.str.contains("bf16").all()
    auto = sweep("resnet50", gpus=["v100-sxm2-16gb"], node_counts=(1,), strategies=("ddp",), db=db)
    assert set(auto.precision.astype(str)) == {"amp_fp16"}


def test_bad_inputs_are_clear_errors(db):
    with pytest.raises(UnknownIdError, match="did you mean"):
        sweep("resnet50", gpus=["h100"], db=db)
    with pytest.raises(UnknownIdError):
        sweep("resnet50", nodes=["dgx-h1000"], db=db)
    with pytest.raises(ScenarioError, match="strategy"):
        sweep("resnet50", nodes=["dgx-h100"], strategies=("zero4",), db=db)
    with pytest.raises(ScenarioError, match="micro-batches"):
        sweep("resnet50", nodes=["dgx-h100"], micro_batches=(0,), db=db)
    with pytest.raises(ScenarioError):
        sweep("resnet50", nodes=["dgx-h100"], max_global_batch=0, db=db)


def test_progress_reports_every_row(db):
    calls = []
    df = sweep("resnet50", nodes=["dgx-h100"], node_counts=(1, 2), chunk_rows=7, db=db,
               progress=lambda done, total: calls.append((done, total)))
    assert calls and calls[-1][0] == calls[-1][1] == df.attrs["model_rows"]
    assert [c[0] for c in calls] == sorted(c[0] for c in calls)


def test_explicit_options_and_fabric_override(db):
    a = sweep("bert-large", options=[HardwareOption(gpu="a100-pcie-80gb", gpus_per_node=8, node="pcie-8x-switch")],
              node_counts=(2,), strategies=("ddp",), micro_batches=(8,), db=db)
    b = sweep("bert-large", options=[HardwareOption(gpu="a100-pcie-80gb", gpus_per_node=8, node="pcie-8x-switch",
                                                    inter="ib-ndr-400")],
              node_counts=(2,), strategies=("ddp",), micro_batches=(8,), db=db)
    assert b.inter_link.iloc[0] == "ib-ndr-400"
    assert b.step_s.iloc[0] <= a.step_s.iloc[0]  # a faster network is never slower


def test_import_gpusim_does_not_import_pandas():
    code = "import sys, gpusim, gpusim.sweeps, gpusim.planning; print('pandas' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def test_public_functions_stay_callable_after_every_module_is_imported():
    """No module of the package shares a name with a public function (importing the module would rebind the
    package attribute to it: ``from gpusim import simulate`` then ``simulate(...)`` raised "'module' object is not
    callable")."""
    code = ("import pkgutil, importlib, gpusim\n"
            "from gpusim import Scenario, simulate, sweep, plan, scaling_curve, collective\n"
            "mods = {m.name for m in pkgutil.iter_modules(gpusim.__path__)}\n"
            "for m in sorted(mods - {'__main__'}): importlib.import_module('gpusim.' + m)\n"
            "clash = sorted(set(gpusim.__all__) & mods)\n"
            "print(clash, all(callable(getattr(gpusim, n)) for n in ('simulate', 'sweep', 'plan', 'scaling_curve')),\n"
            "      callable(simulate), simulate is gpusim.simulate)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["[]", "True", "True", "True"]


def test_max_gpus_below_one_node_is_an_infeasible_row(db):
    df = sweep("resnet50", nodes=["dgx-h100"], max_gpus=4, strategies=("ddp",), db=db)
    assert len(df) and not df.feasible.any()
    assert df.reason.str.contains("more than the maximum of 4").all()
    # explicit node counts without max_gpus are not limited
    df = sweep("resnet50", nodes=["dgx-h100"], node_counts=(1024,), strategies=("ddp",), micro_batches=(64,), db=db)
    assert df.feasible.all() and (df.n_gpus == 8192).all()
