"""plan(): hand-calculated time and cost, feasibility, Pareto, monotonic recommendations, clear answers to bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpusim.errors import UnknownIdError
from gpusim.planning import (CPU_W_PER_SOCKET, DRAM_W_PER_GIB, NETWORK_USD_PER_PORT, NIC_W, SERVER_BASE_USD,
                         SERVER_OVERHEAD_FRAC, SYSTEM_OTHER_FRAC, PlanError, plan, recommend)
from gpusim.simulation import Scenario, simulate

SMALL = dict(strategies=("ddp", "zero3"), checkpointing=(False,), max_gpus=32)


@pytest.fixture(scope="module")
def cloud_plan(db):
    return plan("gpt3-1.3b", tokens=2e9, gpus=["a100-sxm4-40gb", "h100-sxm", "v100-sxm2-16gb"], db=db, **SMALL)


@pytest.fixture(scope="module")
def cloud_table(cloud_plan):
    return cloud_plan.table


def test_cloud_cost_and_time_match_a_hand_calculation(db):
    res = plan("resnet50", samples=1_000_000, nodes=["aws-p4d-24xlarge"], strategies=("ddp",),
               precisions=("amp_bf16",), checkpointing=(False,), num_workers=None, max_gpus=16,
               failure_rate_per_gpu_hour=0.0, eval_overhead_frac=0.0, restart_s=600.0, db=db, with_sensitivity=False)
    df = res.table
    row = df[(df.nodes == 2) & (df.micro_batch == 64)].iloc[0]
    step = simulate(Scenario(model="resnet50", node="aws-p4d-24xlarge", gpus=16, nodes=2, per_gpu_batch=64,
                             precision="amp_bf16"), db=db, recommend=False).step_s
    steps = math.ceil(1_000_000 / (16 * 64))
    node = db.node("aws-p4d-24xlarge")
    params = float(row.checkpoint_bytes) / 12.0  # AMP + Adam: 4 + 8 bytes per parameter
    from gpusim.workload import get_workload

    assert params == pytest.approx(get_workload("resnet50").params)
    write_s = 12.0 * params / (0.5 * node.storage_gbyte_per_s * 1e9)  # DDP: one node writes
    wall = steps * step + write_s + 600.0  # no failures: one final checkpoint; one start
    price = db.price("aws-p4d-24xlarge-us-east-1-2023")
    cost = price.usd_per_hour / price.gpus * 16 * wall / 3600.0
    assert row.feasible
    assert row.time_to_train_s == pytest.approx(wall, rel=1e-9)
    assert row.cost_usd == pytest.approx(cost, rel=1e-9)
    assert row.price_date == price.date.isoformat()
    kwh = (400 * 8 + CPU_W_PER_SOCKET * node.numa_sockets + DRAM_W_PER_GIB * node.ram_gib + NIC_W * node.nics_per_node
           ) * (1 + SYSTEM_OTHER_FRAC) * 2 * wall / 3.6e6 * db.default_energy().pue
    assert row.energy_kwh == pytest.approx(kwh, rel=1e-9)


def test_purchase_cost_matches_a_hand_calculation(db):
    res = plan("resnet50", samples=1_000_000, nodes=["dgx-a100-40gb", "hgx-h100-8"], mode="purchase",
               strategies=("ddp",), precisions=("amp_bf16",), checkpointing=(False,), max_gpus=16, db=db,
               with_sensitivity=False)
    df = res.table
    en = db.default_energy()
    r = df[(df.node == "dgx-a100-40gb") & (df.nodes == 2) & df.feasible].iloc[0]
    node = db.node("dgx-a100-40gb")
    capital = 2 * 199000 + NETWORK_USD_PER_PORT * node.nics_per_node * 2
    power = (400 * 8 + CPU_W_PER_SOCKET * node.numa_sockets + DRAM_W_PER_GIB * node.ram_gib
             + NIC_W * node.nics_per_node) * (1 + SYSTEM_OTHER_FRAC)
    energy_usd = power * 2 * r.time_to_train_s / 3.6e6 * en.pue * en.usd_per_kwh
    assert r.capital_usd == pytest.approx(capital)
    assert r.energy_usd == pytest.approx(energy_usd, rel=1e-9)
    assert r.cost_usd == pytest.approx(capital + energy_usd, rel=1e-9)
    assert r.amortized_cost_usd == pytest.approx(capital * r.time_to_train_s / (4 * 365.25 * 86400) + energy_usd,
                                                 rel=1e-9)
    # no system price for the HGX H100: GPU street price x 8 + documented server overhead
    h = df[(df.node == "hgx-h100-8") & (df.nodes == 1) & df.feasible].iloc[0]
    gpu_usd = db.price("h100-sxm-street-2023").usd
    assert h.capital_usd == pytest.approx(8 * gpu_usd * (1 + SERVER_OVERHEAD_FRAC) + SERVER_BASE_USD)


def test_price_override_scales_cost(db):
    kw = dict(samples=2_000_000, nodes=["aws-p4d-24xlarge"], strategies=("ddp",), checkpointing=(False,), max_gpus=16,
              db=db, with_sensitivity=False)
    a = plan("resnet50", **kw).table
    b = plan("resnet50", price_overrides={"aws-p4d-24xlarge": 2.0}, **kw).table
    ok = a.feasible.to_numpy()
    ratio = (b.cost_usd / a.cost_usd)[ok]
    assert np.allclose(ratio, 2.0 / a.usd_per_gpu_hour[ok])
    assert (b.price_source[ok] == "override aws-p4d-24xlarge").all()


def test_configurations_that_do_not_fit_are_never_feasible(cloud_plan):
    df = cloud_plan.table
    assert (~df.fits_in_memory).any()
    assert not (df.feasible & ~df.fits_in_memory).any()
    assert not (df.pareto & ~df.fits_in_memory).any()
    assert not (df.feasible & (df.global_batch > cloud_plan.inputs["max_global_batch"])).any()
    feas = df[df.feasible]
    assert np.isfinite(feas.time_to_train_s).all() and np.isfinite(feas.cost_usd).all()
    assert (df[~df.feasible].reason != "").all()


def test_plan_pareto_is_non_dominated_and_complete(cloud_plan):
    df = cloud_plan.table
    feas = df[df.feasible]
    t, c = feas.time_to_train_s.to_numpy(), feas.cost_usd.to_numpy()
    front = feas.pareto.to_numpy()
    assert front.any() and len(cloud_plan.pareto) == front.sum()
    ft, fc = t[front], c[front]
    for i in range(len(ft)):  # no frontier point dominates another
        assert not np.any((ft <= ft[i]) & (fc <= fc[i]) & ((ft < ft[i]) | (fc < fc[i])))
    for i in np.nonzero(~front)[0]:  # every other feasible point is dominated by a frontier point
        assert np.any((ft <= t[i]) & (fc <= c[i]) & ((ft < t[i]) | (fc < c[i])))
    assert (np.diff(cloud_plan.pareto.time_to_train_s) >= 0).all()
    assert (np.diff(cloud_plan.pareto.cost_usd) <= 0).all()


def _best(df, **kw):
    r = recommend(df, **kw)
    if r["status"] != "ok":
        return None
    return df.loc[r["row"]]


def test_larger_budget_never_gives_a_slower_best_plan(cloud_table):
    costs = np.sort(cloud_table.cost_usd.dropna().to_numpy())
    budgets = np.unique(np.quantile(costs, np.linspace(0, 1, 25)))
    prev = math.inf
    for b in budgets:
        best = _best(cloud_table, budget_usd=float(b))
        assert best is not None
        assert best.cost_usd <= b
        assert best.time_to_train_s <= prev
        prev = best.time_to_train_s


def test_later_deadline_never_gives_a_more_expensive_cheapest_plan(cloud_table):
    times = np.sort(cloud_table.time_to_train_s.dropna().to_numpy())
    deadlines = np.unique(np.quantile(times, np.linspace(0, 1, 25)))
    prev = math.inf
    for d in deadlines:
        best = _best(cloud_table, deadline_s=float(d))
        assert best is not None and best.time_to_train_s <= d
        assert best.cost_usd <= prev
        prev = best.cost_usd


@settings(max_examples=60, deadline=None)
@given(st.floats(0, 1), st.floats(0, 1), st.floats(0, 1))
def test_monotonic_with_both_constraints(cloud_table, q_deadline, q_budget, q_more):
    times = cloud_table.time_to_train_s.dropna().to_numpy()
    costs = cloud_table.cost_usd.dropna().to_numpy()
    d = float(np.quantile(times, q_deadline))
    b = float(np.quantile(costs, q_budget))
    base = _best(cloud_table, deadline_s=d, budget_usd=b)
    richer = _best(cloud_table, deadline_s=d, budget_usd=b * (1 + q_more))
    later = _best(cloud_table, deadline_s=d * (1 + q_more), budget_usd=b)
    if base is not None:
        assert richer is not None and richer.time_to_train_s <= base.time_to_train_s
        assert later is not None and later.cost_usd <= base.cost_usd


def test_monotonic_through_plan(db):
    kw = dict(tokens=1e9, gpus=["a100-sxm4-40gb"], db=db, with_sensitivity=False, **SMALL)
    a = plan("gpt2", budget_usd=60.0, **kw)
    b = plan("gpt2", budget_usd=600.0, **kw)
    assert a.ok and b.ok
    assert b.recommendation["configuration"]["time_to_train_s"] <= a.recommendation["configuration"]["time_to_train_s"]
    c = plan("gpt2", deadline_s=3 * 3600.0, **kw)
    d = plan("gpt2", deadline_s=30 * 3600.0, **kw)
    assert c.ok and d.ok
    assert d.recommendation["configuration"]["cost_usd"] <= c.recommendation["configuration"]["cost_usd"]


def test_recommendation_reasons_bom_sensitivity(cloud_plan):
    rec = cloud_plan.recommendation
    assert rec["status"] == "ok"
    assert rec["summary"].startswith("Rent ")
    assert any("scaling efficiency" in r for r in rec["reasons"])
    cfg = rec["configuration"]
    assert cfg["feasible"] and cfg["mode"] == "cloud"
    items = {it["item"]: it for it in cloud_plan.bom["items"]}
    psu = items["power supply per node"]
    assert 1.2 * psu["component_w"] <= psu["value_w"] <= 1.3 * psu["component_w"]
    g = cloud_plan.bom["gpus_per_node"]
    assert items["CPU cores per node"]["value"] >= 4 * g
    assert items["system RAM per node"]["value_gib"] >= g * 16  # at least the GPUs' memory
    sens = cloud_plan.sensitivity
    assert [s["swing_frac"] for s in sens] == sorted((s["swing_frac"] for s in sens), reverse=True)
    util = next(s for s in sens if s["assumption"].startswith("GPU utilisation"))
    assert util["time_low_frac"] > 0 > util["time_high_frac"]  # lower utilisation: slower
    fail = next(s for s in sens if s["assumption"] == "failure rate")
    assert fail["time_low_frac"] >= 0 >= fail["time_high_frac"]
    d = cloud_plan.to_dict()
    for k in ("configurations", "pareto", "recommendation", "sensitivity", "bom", "lr", "prices", "assumptions"):
        assert k in d
    assert all(p["date"] for p in d["prices"])


def test_deadline_nothing_meets_says_what_was_closest(db):
    res = plan("gpt2", tokens=1e10, deadline_s=1.0, gpus=["a100-sxm4-40gb"], db=db, **SMALL)
    rec = res.recommendation
    assert rec["status"] == "no-plan" and not res.ok
    assert "deadline" in rec["summary"]
    closest = rec["closest"]["deadline"]
    feas = res.table[res.table.feasible]
    assert closest["time_to_train_s"] == pytest.approx(feas.time_to_train_s.min())
    assert any("closest to the deadline" in r for r in rec["reasons"])


def test_budget_nothing_meets_says_what_was_closest(db):
    res = plan("gpt2", tokens=1e10, budget_usd=0.01, gpus=["a100-sxm4-40gb"], db=db, **SMALL)
    rec = res.recommendation
    assert rec["status"] == "no-plan"
    assert rec["closest"]["budget"]["cost_usd"] == pytest.approx(res.table.cost_usd.min())
    assert "budget" in rec["summary"]


def test_growing_global_batch_gets_lr_advice(db):
    res = plan("resnet50", samples=1.28e6, epochs=2, nodes=["dgx-a100-40gb"], mode="purchase", global_batch=256,
               reference_lr=0.1, strategies=("ddp",), checkpointing=(False,), max_gpus=64, db=db,
               with_sensitivity=False)
    cfg = res.recommendation["configuration"]
    assert cfg["global_batch"] >= 256
    if cfg["global_batch"] > 256:
        assert res.lr["linear_lr"] == pytest.approx(0.1 * cfg["global_batch"] / 256)
        assert any("learning rate" in r for r in res.recommendation["reasons"])


@pytest.mark.parametrize("kwargs,match", [
    (dict(budget_usd=-5.0), "budget"),
    (dict(budget_usd=0.0), "budget"),
    (dict(deadline_s=-1.0), "deadline"),
    (dict(max_global_batch=0), "max global batch"),
    (dict(mode="lease"), "mode"),
    (dict(failure_rate_per_gpu_hour=-1.0), "failure rate"),
    (dict(price_overrides={"aws-p4d-24xlarge": -3.0}), "price override"),
    (dict(global_batch=1024, max_global_batch=512), "over the maximum"),
])
def test_bad_constraints_are_clear(db, kwargs, match):
    with pytest.raises(PlanError, match=match):
        plan("gpt2", tokens=1e9, gpus=["a100-sxm4-40gb"], db=db, **kwargs)


def test_unknown_ids_suggest_close_matches(db):
    with pytest.raises(UnknownIdError, match="did you mean"):
        plan("gpt2", tokens=1e9, gpus=["a100"], db=db)
    with pytest.raises(UnknownIdError, match="did you mean"):
        plan("gpt2", tokens=1e9, price_overrides={"aws-p5-48xl": 3.0}, db=db)
    with pytest.raises(UnknownIdError):
        plan("gpt-7", tokens=1e9, db=db)


def test_node_of_the_wrong_mode_is_explained(db):
    with pytest.raises(PlanError, match="cloud-instance"):
        plan("gpt2", tokens=1e9, nodes=["aws-p5-48xlarge"], mode="purchase", db=db)


def test_unpriced_hardware_says_how_to_price_it(db):
    res = plan("gpt2", tokens=1e9, nodes=["azure-nd96isr-h100-v5"], db=db, with_sensitivity=False, **SMALL)
    if not db.prices_for(node="azure-nd96isr-h100-v5", kind="cloud"):
        assert res.recommendation["status"] == "nothing-feasible"
        assert res.table.reason.str.contains("--price-override azure-nd96isr-h100-v5=").any()
        res2 = plan("gpt2", tokens=1e9, nodes=["azure-nd96isr-h100-v5"], db=db, with_sensitivity=False,
                    price_overrides={"azure-nd96isr-h100-v5": 10.0}, **SMALL)
        assert res2.ok


def test_whole_database_plan_is_fast(db):
    import time

    t = time.perf_counter()
    res = plan("llama2-7b", tokens=1e11, mode="both", db=db)
    assert time.perf_counter() - t < 30
    assert len(res.table) > 5000 and res.ok


def test_per_gpu_cloud_offer_from_a_user_price_file(tmp_path):
    """A GPU priced per GPU-hour in the cloud (no instance template) is planned in the database's usual node."""
    from gpusim.hwdb import load

    (tmp_path / "prices.yaml").write_text(
        "prices:\n"
        "  - id: test-l4-per-gpu\n"
        "    name: a per-GPU L4 offer (test)\n"
        "    kind: cloud\n"
        "    gpu: l4\n"
        "    gpus: 1\n"
        "    usd_per_hour: 0.80\n"
        "    date: 2025-01-01\n"
        "    sources:\n"
        "      - title: test figure\n"
        "        fields: [usd_per_hour]\n")
    db = load([tmp_path], use_env=False)
    res = plan("gpt2", tokens=1e9, gpus=["l4"], db=db, with_sensitivity=False, **SMALL)
    assert res.ok
    cfg = res.recommendation["configuration"]
    assert cfg["gpu"] == "l4" and cfg["node_assumed"] and cfg["usd_per_gpu_hour"] == pytest.approx(0.8)
    assert cfg["cost_usd"] == pytest.approx(0.8 * cfg["n_gpus"] * cfg["time_to_train_s"] / 3600)
    assert any("stands in" in r for r in res.recommendation["reasons"])


def test_custom_workload_object(db):
    from gpusim.workload import Workload

    wl = Workload.custom(params=3e8, fwd_flop_per_sample=2 * 3e8 * 1024, act_bytes_per_sample=2e8,
                         tokens_per_sample=1024, name="my-lm")
    res = plan(workload=wl, tokens=1e9, gpus=["a100-sxm4-40gb"], db=db, with_sensitivity=False, **SMALL)
    assert res.ok and res.inputs["workload"] == "my-lm"
    assert res.inputs["total_samples"] == pytest.approx(1e9 / 1024)


def test_a_price_override_plans_a_gpu_the_database_does_not_price(db):
    """[issue 17] --price-override GPU=... for a GPU with no dated price in the database puts it in the plan (it was
    silently dropped unless --gpu named it too), and the plan names the data-centre GPUs it left out unpriced."""
    from gpusim.planning import unpriced_gpus

    # the case: no cloud price for MI355X or GB300 (B200 and GB200 were the case until the 2026 prices; see
    # tests/hwdb/test_prices_2026.py)
    assert not [p for p in db.prices_for(gpu="mi355x", kind="cloud")]
    assert not [p for p in db.prices_for(gpu="gb300", kind="cloud")]
    kw = dict(tokens=1e9, db=db, with_sensitivity=False, **SMALL)
    base = plan("gpt2", **kw)
    assert "mi355x" not in set(base.table.gpu)
    left = [a for a in base.assumptions if a.startswith("not planned, for lack of a dated cloud price")]
    assert left and "mi355x" in left[0] and "gb300" in left[0] and "--price-override" in left[0]
    quoted = plan("gpt2", price_overrides={"mi355x": 4.0}, **kw)
    rows = quoted.table[quoted.table.gpu == "mi355x"]
    assert len(rows) and (rows.price_source == "override mi355x").all()
    assert np.allclose(rows.usd_per_gpu_hour[rows.feasible], 4.0)
    named = [a.split(": ", 1)[1].split(" (")[0].split(", ") for a in quoted.assumptions if a.startswith("not planned")]
    assert named and "mi355x" not in named[0] and "gb300" in named[0]
    # a plan over chosen GPUs or nodes names nothing else
    assert unpriced_gpus(db, "cloud", set(), ["h100-sxm"], None) == ""


def test_every_precision_asked_for_gets_its_layout_rows(db):
    """[issue 17] A plan over BF16 and FP8 searches the layouts of both (it searched the first precision's only), so
    the cheapest FP8 layout can win where it is cheaper."""
    res = plan("llama3-8b", tokens=1e11, deadline_s=30 * 86400, gpus=["h100-sxm"], precisions=("amp_bf16", "fp8"),
               db=db, with_sensitivity=False)
    lay = res.table[res.table.layout != ""]
    per = lay.groupby("precision", observed=True).size()
    assert per.get("amp_bf16", 0) > 0 and per.get("fp8", 0) == per.get("amp_bf16", 0)
    only_bf16 = plan("llama3-8b", tokens=1e11, deadline_s=30 * 86400, gpus=["h100-sxm"], precisions=("amp_bf16",),
                     db=db, with_sensitivity=False)
    both_cost = res.recommendation["configuration"]["cost_usd"]
    assert both_cost <= only_bf16.recommendation["configuration"]["cost_usd"] + 1e-6  # more choice is never dearer
