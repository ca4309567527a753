"""[issue 20] Each planner page agrees with itself and with the CLI: the Parallelism page's header, heatmap, table,
metrics and schedule come from one search and one scenario; the Compare page's attribution is `gpusim compare`'s;
a URL value no widget takes is named in a notice with the nearest valid one; the Plan and Calibration charts' axes
carry readable labels."""

from __future__ import annotations

import json
import re

import pytest
from app_helpers import PAGES, figures, metrics, no_trouble, run_app

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

#: a non-default scenario: the sidebar says ddp and per-GPU batch 256 (its defaults), the page runs its own
LLAMA = {"model": "llama3-70b", "gpu": "h100-sxm", "gpus": "64", "nodes": "8", "precision": "bf16"}


def _header(at) -> str:
    return next(m.value for m in at.markdown if m.value.startswith("#### Parallelism"))


def _heatmap(at) -> dict:
    return next(f for t, f in figures(at).items() if "over tp x pp" in t)


def _star(heat: dict) -> tuple[int, int, str, str]:
    """(tp, pp, value text, hover) of the starred cell."""
    tr = heat["data"][0]
    for r, row in enumerate(tr["text"]):
        for k, c in enumerate(row):
            if c.startswith("★"):
                return int(tr["x"][k]), int(tr["y"][r]), c.removeprefix("★ "), tr["customdata"][r][k]
    raise AssertionError("no star")


def _table(at):
    return next(d.value for d in at.dataframe if "cp" in d.value.columns and "ep" in d.value.columns)


def test_parallelism_header_names_the_pages_own_strategy_not_the_sidebars():
    at = run_app("parallelism", LLAMA, timeout=120)
    no_trouble(at)
    head = _header(at)
    assert "zero1" in head and "global batch 64" in head and "searched" in head
    assert "per-GPU batch" not in head and "ddp" not in head
    at.selectbox(key="par_kind").select("ddp").run()
    at.selectbox(key="par_micro").select("2").run()
    head = _header(at)
    assert "ddp" in head and "micro-batch 2" in head and "zero1" not in head
    # the pinned micro-batch reaches the search: every row of the table has it
    assert set(_table(at)["micro-batch"]) == {2}


def test_parallelism_star_is_the_tables_first_row_and_the_metrics_are_its():
    at = run_app("parallelism", LLAMA, timeout=120)
    no_trouble(at)
    tp, pp, value, hover = _star(_heatmap(at))
    first = _table(at).iloc[0]
    assert (tp, pp) == (first["tp"], first["pp"])
    assert float(value.replace(",", "")) == pytest.approx(first["tokens/s per GPU"], rel=5e-4)
    assert f"cp {first['cp']} " in hover and f"vp {first['vp']} " in hover and f"recompute {first['recompute']}" in hover
    # every coloured cell is the best of its tp, pp in the table's search
    tr = _heatmap(at)["data"][0]
    cells = {(int(tr["x"][k]), int(tr["y"][r])): z for r, row in enumerate(tr["z"]) for k, z in enumerate(row)
             if z is not None}
    assert max(cells.values()) == pytest.approx(first["tokens/s per GPU"])
    # the inspected layout (by default the star) is simulated to the same figure
    m = metrics(at)
    assert float(m["Tokens/s per GPU"].replace(",", "")) == pytest.approx(first["tokens/s per GPU"], abs=1)
    assert any(md.value.startswith(f"**tp {tp} cp {first['cp']} pp {pp}") for md in at.markdown)


def test_parallelism_bubble_is_one_number(db):
    """[issue 20] the text said a 14% bubble and the schedule chart 16%: the chart's title, the caption, the advice
    and the search's table give the model's one figure (pipeline bubble / step time)."""
    at = run_app("parallelism", {**LLAMA, "par_vp": "1", "par_micro": "1", "par_recompute": "selective", "par_gb": "32"},
                 timeout=120)
    at.selectbox(key="par_tp").select(4).run()
    at.selectbox(key="par_pp").select(8).run()  # few micro-batches over 8 stages: a bubble over 10%
    no_trouble(at)
    sched = next(t for t in figures(at) if t.startswith("Pipeline schedule"))
    chart = int(re.search(r"bubble (\d+)% of the step", sched).group(1))
    assert chart >= 5
    caption = next(c.value for c in at.caption if "pipeline bubble" in c.value and "x dp" in c.value)
    assert f"pipeline bubble {chart}% of the step" in caption
    advice = " ".join(md.value for md in at.markdown if "llm-bubble" in md.value)
    assert f"{chart}% pipeline bubble" in advice
    # the search's own row for this layout
    from gpusim.scenario import Scenario
    from gpusim.search import Pins, search_layouts, search_table

    scn = Scenario.create(model="llama3-70b", gpu="h100-sxm", gpus=64, nodes=8, precision="bf16", kind="zero1",
                          global_batch=32, recompute="selective", per_gpu_batch=1)
    rows = search_table(search_layouts(scn, db=db, global_batch=32, pins=Pins(vp=1, micro_batch=1,
                                                                               recompute="selective")))
    row = next(r for r in rows if r["feasible"] and (r["tp"], r["pp"]) == (4, 8))
    assert round(100 * row["bubble_frac"]) == chart


def test_parallelism_global_batch_change_reuses_the_cached_search(monkeypatch):
    """[issue 20] a change of global batch reran the whole page's model calls: the search is cached per scenario,
    batch and pins, so going back to a batch seen before runs no search."""
    import streamlit as st

    import gpusim.search as search

    calls = []
    real = search.search_layouts
    monkeypatch.setattr(search, "search_layouts", lambda *a, **k: calls.append(k.get("global_batch")) or real(*a, **k))
    st.cache_resource.clear()
    at = run_app("parallelism", {**LLAMA, "model": "llama3-8b", "gpus": "16", "nodes": "2"}, timeout=120)
    assert calls == [64]
    at.number_input(key="par_gb").set_value(128).run()
    at.number_input(key="par_gb").set_value(64).run()
    no_trouble(at)
    assert calls == [64, 128]
    assert "global batch 64" in _header(at)


# --- Compare -----------------------------------------------------------------------------------------------

L40S = {"model": "bert-large", "hw": "gpu", "gpu": "l40s", "batch": "32", "fabric": "pcie-cross-socket"}


def _pin_then(changes: dict[str, str]):
    at = run_app("compare", L40S)
    next(b for b in at.button if b.label == "Pin this scenario").click().run()
    for k, v in changes.items():
        at.selectbox(key=k).select(v).run()
    at.switch_page(PAGES["compare"]).run()
    no_trouble(at)
    return at


def _shares(at) -> dict[str, int]:
    out = {}
    for md in at.markdown:
        m = re.match(r"- (.*): [+-][\d,.]+ samples/s, (-?\d+)% of the difference", md.value)
        if m:
            out[m.group(1)] = int(m.group(2))
    return out


def test_compare_fabric_switch_is_named_and_attributed_as_the_cli_does(capsys):
    """[issue 20] after switching to H100 + NVSwitch the inputs read 'intra_topology pcie-cross-socket -> None', the
    listed changes explained 6% + 5% + 0% and one was still said to explain most."""
    at = _pin_then({"gpu": "h100-sxm", "fabric": "nvswitch"})
    inputs = next(d.value for d in at.dataframe if "pinned" in d.value.columns and "gpu" in list(d.value[""]))
    assert "None" not in inputs.to_string()
    assert dict(zip(inputs[""], inputs["current"]))["intra_topology"] == "nvswitch"
    page = _shares(at)
    from gpusim.cli import main

    assert main(["compare", "--model", "bert-large", "--gpu", "l40s", "--gpus", "8", "--per-gpu-batch", "32",
                 "--intra", "pcie4-x16", "--intra-topology", "pcie-cross-socket", "--vs", "--gpu", "h100-sxm",
                 "--intra", "nvlink4-nvswitch", "--intra-topology", "nvswitch", "--json"]) == 0
    from gpusim.comparison import change_text

    cli = {change_text(c): round(100 * c["share_of_gap_frac"])
           for c in json.loads(capsys.readouterr().out)["gaps"][0]["changes"] if c["share_of_gap_frac"] is not None}
    assert page == cli and page
    top = max(page, key=page.get)
    said = [s.value for s in at.success]
    assert said == [f"{top} explains most of the difference ({page[top]}%)."]


def test_compare_says_no_change_explains_most_when_none_does():
    at = _pin_then({"gpu": "h100-sxm", "fabric": "auto"})
    shares = _shares(at)
    assert shares and max(shares.values()) < 50
    assert not at.success
    assert any("No change explains most of the difference on its own" in i.value for i in at.info)
    assert "auto" in " ".join(shares)  # the usual fabric is named 'auto', not None or '-'


# --- URL values not taken ------------------------------------------------------------------------------------

@pytest.mark.parametrize("page, query, wrong, near", [
    ("step", {"model": "llama3.1-70bb"}, "model='llama3.1-70bb'", "llama3.1-70b"),
    ("step", {"gpu": "h100sxm"}, "gpu='h100sxm'", "h100-sxm"),
    ("step", {"fabric": "nvswich"}, "fabric='nvswich'", "nvswitch"),
    ("parallelism", {"model": "llama3-8b", "par_recompute": "fulll"}, "par_recompute='fulll'", "full"),
    ("scaling", {"cmp_strategies": "dddp"}, "cmp_strategies='dddp'", "ddp"),
])
def test_a_url_value_not_taken_is_named_with_the_nearest_valid_one(page, query, wrong, near):
    at = run_app(page, query, timeout=120)
    assert not at.exception
    notes = [w.value for w in at.warning if "URL parameter" in w.value]
    assert any(wrong in n and f"did you mean {near!r}" in n for n in notes), notes


def test_valid_url_values_give_no_notice():
    at = run_app("step", {"model": "bert-large", "gpu": "l40s", "batch": "32", "fabric": "pcie-cross-socket",
                          "ckpt": "true", "slow": "0.5", "precision": "bf16"})
    no_trouble(at)
    assert not [w.value for w in at.warning if "URL parameter" in w.value]
    at = run_app("parallelism", {**LLAMA, "par_micro": "2", "par_recompute": "full", "par_gb": "128"}, timeout=120)
    assert not [w.value for w in at.warning if "URL parameter" in w.value]


# --- Plan and Calibration axes -------------------------------------------------------------------------------

def _inside(axis: dict, lo: float, hi: float) -> list[str]:
    return [t for v, t in zip(axis.get("tickvals", []), axis.get("ticktext", [])) if lo <= v <= hi]


@pytest.mark.slow
def test_plan_cost_axis_has_labels_within_the_points():
    """[issue 20] the log cost axis showed one label ($100k) for a 7B plan."""
    at = run_app("plan", {"model": "llama2-7b", "deadline_d": "14", "budget_usd": "100000"}, timeout=180)
    no_trouble(at)
    pareto = next(v for k, v in figures(at).items() if k.startswith("Time to train vs cost"))
    ys = [y for t in pareto["data"] for y in (t.get("y") or []) if y]
    ax = pareto["layout"]["yaxis"]
    if ax.get("type") == "log":
        assert len(_inside(ax, min(ys), max(ys + [100_000]))) >= 2, ax.get("ticktext")
    sens = figures(at)["What moves the answer most"]
    lows = [t for t in sens["data"] if t["name"].endswith("low end")]
    highs = [t for t in sens["data"] if t["name"].endswith("high end")]
    assert lows and highs and all(h["marker"].get("pattern") for h in highs)
    assert not any(lo["marker"].get("pattern") for lo in lows)


def test_calibration_gemm_axis_is_ticked_at_decades():
    from test_calibration_page import H100, upload

    at = upload(run_app("calibration"), H100)
    no_trouble(at)
    ax = figures(at)["GEMM throughput vs size"]["layout"]["xaxis"]
    tv = ax["tickvals"]
    assert len(tv) >= 2 and all(b / a >= 10 for a, b in zip(tv, tv[1:]))  # no 2s and 5s between to overlap


def test_a_url_name_no_page_knows_is_named_with_the_nearest_one():
    at = run_app("step", {"modle": "llama3-8b", "batch": "32"})
    assert not at.exception
    notes = [w.value for w in at.warning if "URL parameter" in w.value]
    assert notes == ["URL parameter 'modle' ignored: no page has such a setting; did you mean 'model'?"]
    # a page's own setting on another page is no typo
    at = run_app("step", {"par_gb": "128"})
    assert not [w.value for w in at.warning if "URL parameter" in w.value]


def test_nearest_counts_a_swap_as_one_edit_and_refuses_far_guesses(db):
    from gpusim.app_pages.shell import nearest, url_keys

    assert nearest("h100sxm", sorted(db.gpus)) == "h100-sxm"
    assert nearest("modle", sorted(url_keys())) == "model"
    assert nearest("H100-SXM", sorted(db.gpus)) == "h100-sxm"
    assert nearest("warp-drive", ["nvswitch", "pcie-switch"]) is None


@pytest.mark.parametrize("query", [
    {"model": "llama3.1-405b", "gpu": "h100-sxm", "gpus": "16384", "nodes": "2048", "precision": "bf16"},  # 126 layers
    {"model": "deepseek-v3", "gpu": "h100-sxm", "gpus": "2048", "nodes": "256", "precision": "fp8"},  # 61, MoE
], ids=["llama3.1-405b", "deepseek-v3"])
def test_parallelism_best_layout_with_uneven_stages_is_inspected_as_searched(query):
    """The search splits layers unevenly (126 layers on pp 16 x vp 8); the inspected layout is the same layout
    (``uneven_pp``), not an error, and simulates to the star's figure."""
    at = run_app("parallelism", query, timeout=180)
    no_trouble(at)
    _, _, value, _ = _star(_heatmap(at))
    first = _table(at).iloc[0]
    assert float(value.replace(",", "")) == pytest.approx(first["tokens/s per GPU"], rel=5e-4)
    tile = metrics(at)["Tokens/s per GPU"]
    assert float(tile.replace(",", "")) == pytest.approx(first["tokens/s per GPU"], rel=5e-3)
    # [issue 17] the best layout's search record is of the recipes of its kind: MoE recipes for DeepSeek-V3
    kind = "MoE" if query["model"] == "deepseek-v3" else "dense"
    assert any(c.value.startswith(f"**Search record**: published vendor-tuned {kind} recipes") for c in at.caption)


def test_parallelism_inspects_a_module_recompute_layout_as_searched():
    """[issue 17] An MoE model's best layout recomputes its recipes' modules (Qwen3-235B-A22B on 256 H100: the norms
    and the experts' activation); the page's table names it so and the inspected layout is that layout, simulating
    to the table's figure."""
    at = run_app("parallelism", {"model": "qwen3-235b-a22b", "gpu": "h100-sxm", "gpus": "256", "nodes": "32",
                                 "precision": "bf16", "par_gb": "2048"}, timeout=180)
    no_trouble(at)
    first = _table(at).iloc[0]
    assert first["recompute"] == "layernorm+moe_act"
    tile = metrics(at)["Tokens/s per GPU"]
    assert float(tile.replace(",", "")) == pytest.approx(first["tokens/s per GPU"], rel=5e-3)


def test_fold_keeps_the_best_rows_each_cells_best_and_every_reason(db):
    """best_layouts.fold (what the page keeps of a search) against the search's full table."""
    from collections import Counter

    from gpusim.app_pages.best_layouts import fold
    from gpusim.scenario import Scenario
    from gpusim.search import search_layouts, search_table

    scn = Scenario.create(model="llama3-70b", gpu="h100-sxm", gpus=64, nodes=8, precision="bf16", kind="zero1",
                          global_batch=128, recompute="selective", per_gpu_batch=1)
    res = search_layouts(scn, db=db, global_batch=128)
    full = search_table(res)
    f = fold(res, top=5)
    good = [r for r in full if r["feasible"]]
    assert f["rows"][:5] == good[:5]
    best_at = {}
    for r in good:
        best_at.setdefault((r["tp"], r["pp"]), r)
    assert {(r["tp"], r["pp"]) for r in f["rows"]} == set(best_at)
    assert all(best_at[(r["tp"], r["pp"])] == r for r in f["rows"] if r not in good[:5])
    bad = [r for r in full if not r["feasible"]]
    assert sum(f["out_counts"].values()) == len(bad)
    for (tp, pp), reasons in f["cell_reasons"].items():
        assert (tp, pp) not in best_at
        at = [r for r in bad if (r["tp"], r["pp"]) == (tp, pp)]
        assert sum(n for _, n, _ in reasons) == len(at)
        assert reasons[0][2] in {r["reason"] for r in at}  # an example of the most common reason, in full
    assert Counter(r["reason"].split(" (")[0] for r in bad if r["reason"].startswith("does not fit")) \
        == Counter({k: v for k, v in f["out_counts"].items() if k.startswith("does not fit")})


def test_parallelism_search_with_the_ulysses_exchange_keeps_its_head_rule():
    """[issue 17] The page's "Context-parallel exchange" reaches the layout search as the CLI's --cp-comm does:
    with a2a (Ulysses) no layout in the table splits Llama 3 70B's 8 K/V heads (and 64 attention heads) over a tp x cp
    that does not divide them, while the ring's search at the same sequence length does use such a layout."""
    from gpusim.rules import ulysses_heads_ok

    query = {**LLAMA, "seq": "16384", "par_gb": "32", "par_recompute": "selective", "par_micro": "1"}
    ring = run_app("parallelism", query, timeout=120)
    no_trouble(ring)
    assert ring.selectbox(key="par_cp_comm").value == "ring"
    rt = _table(ring)
    assert any(not ulysses_heads_ok(64, 8, int(t), int(c)) for t, c in zip(rt["tp"], rt["cp"]))
    at = run_app("parallelism", {**query, "par_cp_comm": "a2a"}, timeout=120)
    no_trouble(at)
    assert at.selectbox(key="par_cp_comm").value == "a2a" and "cp exchange a2a" in _header(at)
    t = _table(at)
    assert len(t) and all(ulysses_heads_ok(64, 8, int(tp), int(cp)) for tp, cp in zip(t["tp"], t["cp"]))


def test_parallelism_search_carries_the_sidebars_moe_imbalance():
    """[issue 17] The sidebar's "MoE routing imbalance" (the CLI's --moe-imbalance) reaches the layout search: every
    layout with ep > 1 waits for a busiest rank 1.3x the mean, so the table's best throughput drops; a dense model is
    not offered it."""
    query = {"model": "qwen3-30b-a3b", "gpu": "h100-sxm", "gpus": "16", "nodes": "2", "precision": "bf16",
             "par_gb": "256", "par_recompute": "none", "par_micro": "1"}
    plain = run_app("parallelism", query, timeout=120)
    no_trouble(plain)
    skew = run_app("parallelism", {**query, "moe_imb": "0.3"}, timeout=120)
    no_trouble(skew)
    assert skew.number_input(key="moe_imb").value == pytest.approx(0.3)
    pt, st_ = _table(plain), _table(skew)
    assert st_["tokens/s per GPU"].max() < pt["tokens/s per GPU"].max()
    cv = run_app("parallelism", {**query, "moe_skew": "0.3"}, timeout=120)  # the experts' skew, per layout's ep
    no_trouble(cv)
    assert _table(cv)["tokens/s per GPU"].max() < pt["tokens/s per GPU"].max()
    both = run_app("parallelism", {**query, "moe_skew": "0.3", "moe_imb": "0.2"}, timeout=120)
    assert not both.exception and any("give one" in e.value for e in both.error)
    dense = run_app("step", {"model": "llama3-8b", "batch": "1", "strategy": "fsdp-full"})
    assert not dense.exception and "moe_imb" not in [n.key for n in dense.number_input]
