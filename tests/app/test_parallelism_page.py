"""The Parallelism page under AppTest, and its figures and schedule without Streamlit."""

from __future__ import annotations

import pytest
from app_helpers import figures, metrics, no_trouble, parse_num, run_app

from gpusim import viz
from gpusim.model.llm import pipeline_step_s
from gpusim.parallelism import layout_grid, pipeline_schedule
from gpusim.simulation import Scenario

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

LLAMA = {"model": "llama3-70b", "gpu": "h100-sxm", "gpus": "64", "nodes": "8", "precision": "bf16"}


def test_parallelism_page_shows_grid_breakdown_and_schedule():
    at = run_app("parallelism", LLAMA, timeout=120)
    no_trouble(at)
    figs = figures(at)
    heat = next(f for t, f in figs.items() if t.startswith("tokens/s per GPU over tp x pp"))
    text = [c for row in heat["data"][0]["text"] for c in row]
    assert any(c.startswith("★") for c in text)  # the best layout that fits
    assert any(c.startswith("✗") for c in text)  # layouts that are impossible or do not fit
    bd = figs["Where one training step goes (critical path)"]
    names = [t["name"] for t in bd["data"]]
    assert "pipeline bubble" in names and "tensor-parallel communication" in names
    assert any(t.startswith("Pipeline schedule") for t in figs)
    m = metrics(at)
    assert parse_num(m["Tokens/s"]) > 0 and "fits" in str(at.metric[4].proto.delta)
    assert any("Why" in e.label for e in at.expander)
    # [issue 17] where one layer's time goes, as gpusim predict says it
    layer = next(md.value for md in at.markdown if "one transformer layer, one micro-batch" in md.value)
    assert "GPU" in layer and "CPU launches" in layer and "sets the pace" in layer
    # how far such layouts' predictions were from published runs (gpusim.track_record)
    assert any(c.value.startswith("**Track record**: published dense") for c in at.caption)
    # [issue 17] the search's best layout also shows what such a best promised on the tuned recipes
    assert any(c.value.startswith("**Search record**: published vendor-tuned dense recipes") for c in at.caption)
    # [stop 55] and its memory against the published runs' peaks, with the range carried to this layout
    mem = [c.value for c in at.caption if c.value.startswith("**Memory record**: published peak memory")]
    assert len(mem) == 1 and "Here: a peak of " in mem[0]


def test_parallelism_page_full_recompute_lowers_memory():
    at = run_app("parallelism", LLAMA, timeout=120)
    at.selectbox(key="par_tp").select(8).run()
    at.selectbox(key="par_pp").select(4).run()
    sel = parse_num(metrics(at)["Memory per GPU (fullest stage)"].split()[0])
    at.selectbox(key="par_recompute").select("full").run()
    no_trouble(at)
    assert parse_num(metrics(at)["Memory per GPU (fullest stage)"].split()[0]) < sel


def test_parallelism_page_explains_a_model_that_is_not_a_transformer():
    at = run_app("parallelism", {"model": "resnet50"})
    no_trouble(at)
    assert any("not a transformer" in i.value for i in at.info)


def test_schedule_simulation_equals_the_closed_form_critical_path():
    for pp, vp, m in ((4, 1, 8), (4, 2, 8), (8, 3, 24), (1, 1, 4), (2, 1, 1)):
        s = pipeline_schedule(pp, vp, m, 1.0 / vp, 2.0 / vp)
        steady, bubble = pipeline_step_s(3.0, 3.0, 3.0, pp, vp, m)
        assert s["step_s"] == pytest.approx(float(steady + bubble))
        assert len(s["blocks"]) == 2 * pp * vp * m
        fig = viz.pipeline_schedule_figure(s)
        assert f"bubble {1 - s['busy_frac']:.0%}" in fig.layout.title.text


def test_layout_grid_marks_infeasible_cells_with_their_reason(db):
    scn = Scenario(model="llama3-70b", gpu="h100-sxm", gpus=64, nodes=8, precision="bf16", kind="zero1",
                   global_batch=128, seq_len=4096, recompute="selective")
    g = layout_grid(scn, [1, 4, 8, 16], [1, 4, 16], (1,), db=db)
    by = {(c["tp"], c["pp"]): c for c in g["cells"]}
    assert not by[(8, 16)]["feasible"] and "does not divide 64 GPUs" in by[(8, 16)]["reason"]
    assert not by[(16, 1)]["feasible"] and "NVLink domain" in by[(16, 1)]["reason"]
    assert by[(1, 1)]["feasible"] and not by[(1, 1)]["fits_in_memory"] and "does not fit" in by[(1, 1)]["reason"]
    best = g["cells"][g["best"]]
    assert best["fits_in_memory"]
    assert all(best["tokens_per_s"] >= c["tokens_per_s"] for c in g["cells"] if c["fits_in_memory"])
    fig = viz.layout_heatmap_figure(g["cells"], best=g["best"])
    assert fig.data[0].z[0][0] is None  # tp 1, pp 1 does not fit: left blank


def test_parallelism_page_has_the_best_layouts_table():
    """[issue 12] the search over tp, cp, pp, vp, ep, micro-batch and recomputation under the grid."""
    at = run_app("parallelism", LLAMA, timeout=120)
    no_trouble(at)
    table = next(d for d in at.dataframe if "cp" in d.value.columns and "ep" in d.value.columns)
    assert len(table.value) > 0 and (table.value["tokens/s per GPU"].diff().dropna() <= 1e-9).all()
    assert any("Best: tp" in c.value for c in at.caption)
    assert any("layouts are out" in e.label for e in at.expander)


def test_parallelism_page_names_the_layout_that_fits_the_memory_records_top():
    """[stop 56] Where the top of the best layout's memory record passes the GPU's memory (Llama 3 8B at 8K tokens on
    8 H100: 77.4 of 80 GiB, a peak of up to 90.8 GiB), the page names the fastest layout whose top still fits, the
    same layout and slowdown `gpusim sweep` prints (gpusim.track_record.memory_record_fit)."""
    import gpusim
    from gpusim.track_record import memory_fit_here

    at = run_app("parallelism", {"model": "llama3-8b", "gpu": "h100-sxm", "gpus": "8", "nodes": "1", "seq": "8192",
                                 "precision": "bf16", "par_gb": "128"}, timeout=120)
    no_trouble(at)
    fit = [c.value for c in at.caption if c.value.startswith("**Memory record**: the fastest layout")]
    cli = gpusim.sweep(model="llama3-8b", gpu="h100-sxm", gpus=8, seq_len=8192, global_batch=128).memory_record_fit
    assert cli and cli["layout"] and cli["slower_frac"] > 0
    assert fit == [f"**Memory record**: {memory_fit_here(cli)}."]
