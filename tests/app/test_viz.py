"""The figure builders of gpusim.viz, tested directly (no Streamlit): they draw what they are given, in the
units their axes name, and never produce figures that hang a browser."""

from __future__ import annotations

import json
import math

import pytest

from gpusim import units, viz

BREAKDOWN = {"compute_s": 0.050, "comm_exposed_s": 0.020, "data_wait_s": 0.0, "optimizer_s": 0.002, "sync_s": 0.001,
             "overhead_s": 0.001}


def _fig_json(fig) -> dict:
    return json.loads(fig.to_json())


def _no_binary(obj) -> None:
    """Trace data are plain lists (plotly 7 would write numpy arrays as base64 'bdata')."""
    if isinstance(obj, dict):
        assert "bdata" not in obj, obj
        for v in obj.values():
            _no_binary(v)
    elif isinstance(obj, list):
        for v in obj:
            _no_binary(v)


def _annotations_in_range(fig) -> None:
    """On a log axis an annotation's coordinate is log10 of the value: a raw data value there (e.g. 256)
    sends the axis to 1e256 and hangs the browser. Every annotation on a log axis must be a small exponent."""
    lay = fig.layout
    for ann in lay.annotations or ():
        for ax, ref, val in (("xaxis", ann.xref, ann.x), ("yaxis", ann.yref, ann.y)):
            if ref in (None, "paper") or val is None or "domain" in str(ref):
                continue
            axis = getattr(lay, ax + (ref[1:] if len(ref) > 1 else ""))
            if axis.type == "log":
                assert abs(float(val)) < 30, (ann.text, val)


def test_breakdown_figure_stacks_the_parts_in_ms():
    fig = viz.breakdown_figure(BREAKDOWN, single_gpu_step_s=0.052)
    bars = [t for t in fig.data if t.type == "bar"]
    assert [t.name for t in bars] == list(viz.BREAKDOWN_LABELS.values())
    assert sum(t.x[0] for t in bars) == pytest.approx(sum(BREAKDOWN.values()) / units.MS)
    assert bars[1].x[0] == pytest.approx(20.0)  # exposed communication, ms
    assert fig.layout.barmode == "stack"
    # the one-GPU reference line sits at 52 ms
    assert any(s.x0 == pytest.approx(52.0) for s in fig.layout.shapes)
    _no_binary(_fig_json(fig))


def test_memory_figure_marks_capacity_and_overflow():
    mem = {"weights": 10 * units.GIB, "gradients": 10 * units.GIB, "optimizer": 60 * units.GIB,
           "activations": 5 * units.GIB, "buffers": 0.5 * units.GIB, "overhead": 1 * units.GIB}
    fig = viz.memory_figure(mem, 80 * units.GIB)
    assert sum(t.x[0] for t in fig.data) == pytest.approx(86.5)
    assert fig.layout.shapes[0].x0 == pytest.approx(80.0)
    assert "does not fit" in fig.layout.annotations[0].text
    assert fig.layout.xaxis.range[1] >= 86.5  # the overflow is visible
    fits = viz.memory_figure({"weights": 1 * units.GIB}, 80 * units.GIB)
    assert "does not fit" not in fits.layout.annotations[0].text


def test_gains_figure_only_shows_advice_with_a_gain():
    recs = [{"id": "use-ddp", "gain_frac": 0.5}, {"id": "learning-rate", "gain_frac": None},
            {"id": "fewer-gpus", "gain_frac": -0.1}]
    fig = viz.gains_figure(recs)
    bar = fig.data[0]
    assert set(bar.y) == {"use-ddp", "fewer-gpus"}
    assert dict(zip(bar.y, bar.x)) == {"use-ddp": pytest.approx(50.0), "fewer-gpus": pytest.approx(-10.0)}


def _curve(eff: float, counts=(1, 2, 4, 8)):
    return [{"n_gpus": n, "speedup": n * (eff if n > 1 else 1.0), "scaling_efficiency_frac": eff if n > 1 else 1.0,
             "fits_in_memory": n < 8, "bottleneck": "compute", "per_gpu_batch": 32} for n in counts]


def test_speedup_and_efficiency_figures_have_the_ideal_line_and_mark_oom():
    curves = {"NVSwitch": _curve(0.95), "PCIe": _curve(0.5)}
    sp = viz.speedup_figure(curves)
    names = [t.name for t in sp.data]
    assert names == ["NVSwitch", "PCIe", "ideal (linear)"]
    assert list(sp.data[-1].x) == [1, 8] and list(sp.data[-1].y) == [1, 8]
    assert list(sp.data[1].y) == [1.0, 1.0, 2.0, 4.0]
    # the 8-GPU point does not fit: a cross
    assert list(sp.data[0].marker.symbol) == ["circle", "circle", "circle", "x"]
    assert sp.layout.xaxis.type == "log"
    ef = viz.efficiency_figure(curves, target_frac=0.75)
    assert list(ef.data[1].y) == [100.0, 50.0, 50.0, 50.0]
    assert list(ef.data[-1].y) == [100.0, 100.0]
    assert any(s.y0 == pytest.approx(75.0) for s in ef.layout.shapes)
    _annotations_in_range(sp)
    _annotations_in_range(ef)
    _no_binary(_fig_json(sp))


def test_breakdown_vs_gpus_skips_empty_parts():
    rows = [{"n_gpus": n, **BREAKDOWN, "comm_exposed_s": 0.001 * n} for n in (1, 2, 4)]
    fig = viz.breakdown_vs_gpus_figure(rows)
    names = [t.name for t in fig.data]
    assert "data wait" not in names and "compute" in names
    comm = next(t for t in fig.data if t.name == "exposed communication")
    assert list(comm.y) == pytest.approx([1.0, 2.0, 4.0])
    assert list(comm.x) == ["1", "2", "4"]


def _batch_rows():
    return [{"per_gpu_batch": b, "throughput_samples_per_s": 100.0 * b / (b + 8), "throughput_per_gpu_samples_per_s":
             12.5 * b / (b + 8), "gpu_util_frac": b / (b + 8), "scaling_efficiency_frac": 0.9, "mfu_frac": 0.3,
             "fits_in_memory": b <= 256} for b in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)]


def test_batch_figures_mark_memory_limit_and_target_on_log_axes():
    rows = _batch_rows()
    tp = viz.batch_throughput_figure(rows, max_micro_batch=300, current_batch=256)
    assert tp.layout.xaxis.type == "log"
    assert list(tp.data[0].x) == [r["per_gpu_batch"] for r in rows]
    assert tp.data[0].marker.symbol[-1] == "x" and tp.data[0].marker.symbol[0] == "circle"
    xs = sorted(s.x0 for s in tp.layout.shapes if s.type == "line")
    assert xs == [256, 300]
    texts = [a.text for a in tp.layout.annotations]
    assert "memory limit: 300" in texts and "now: 256" in texts
    _annotations_in_range(tp)
    ut = viz.batch_utilisation_figure(rows, util_target_frac=0.8, max_micro_batch=300, current_batch=256)
    assert [t.name for t in ut.data] == ["GPU busy (utilisation)", "scaling efficiency", "MFU"]
    assert ut.data[0].y[-1] == pytest.approx(100.0 * 512 / 520)
    assert any(s.y0 == pytest.approx(80.0) for s in ut.layout.shapes)
    _annotations_in_range(ut)
    nothing = viz.batch_throughput_figure(rows, max_micro_batch=0)
    assert any("no batch fits" in a.text for a in nothing.layout.annotations)


def test_gpu_roofline_is_min_of_peak_and_bandwidth():
    fig = viz.gpu_roofline_figure(peak_flop_per_s=1000e12, achievable_flop_per_s=800e12, mem_bytes_per_s=4e12,
                                  achievable_mem_bytes_per_s=3.2e12,
                                  points=[{"name": "matmul", "intensity_flop_per_byte": 500.0, "flop_per_s": 700e12,
                                           "time_frac": 0.5},
                                          {"name": "attention", "intensity_flop_per_byte": 20.0, "flop_per_s": 60e12}])
    ds = next(t for t in fig.data if t.name == "datasheet roofline")
    for x, y in zip(ds.x, ds.y):
        assert y == pytest.approx(min(1000.0, x * 4e12 / units.TERA))
    assert 250.0 in list(ds.x)  # the ridge point is a vertex
    pts = {t.name: t for t in fig.data if t.mode == "markers"}
    assert pts["matmul"].y[0] == pytest.approx(700.0) and pts["attention"].x[0] == 20.0
    assert pts["matmul"].marker.size > pts["attention"].marker.size
    _annotations_in_range(fig)


def test_comm_roofline_one_ceiling_per_interconnect():
    ceilings = [{"label": "NVSwitch", "algbw_bytes_per_s": 200e9}, {"label": "PCIe", "algbw_bytes_per_s": 10e9},
                {"label": "this scenario", "algbw_bytes_per_s": 150e9, "current": True}]
    fig = viz.comm_roofline_figure(compute_flop_per_s=100e12, ceilings=ceilings, peak_flop_per_s=900e12,
                                   point={"name": "w", "intensity_flop_per_byte": 1e4, "flop_per_s": 90e12})
    lines = {t.name: t for t in fig.data}
    pcie = lines["PCIe"]
    # the slope meets the roof at compute / bandwidth = 1e4 FLOP/byte
    assert 1e4 in [pytest.approx(x) for x in pcie.x]
    for x, y in zip(pcie.x, pcie.y):
        assert y == pytest.approx(min(100.0, x * 10e9 / units.TERA))
    assert lines["this scenario"].line.width > lines["PCIe"].line.width
    assert lines["w"].y[0] == pytest.approx(90.0)
    assert fig.layout.xaxis.type == "log" and fig.layout.yaxis.type == "log"


def test_topology_heatmap_orders_paths_best_to_worst():
    names = ["GPU0", "GPU1", "GPU2"]
    labels = [["X", "NV12", "SYS"], ["NV12", "X", "PIX"], ["SYS", "PIX", "X"]]
    fig = viz.topology_heatmap(names, labels)
    hm = fig.data[0]
    z = [list(r) for r in hm.z]
    assert z[0][0] is None
    assert z[0][1] < z[1][2] < z[0][2]  # NVLink < PIX < SYS
    assert [list(r) for r in hm.text] == labels
    ticks = list(hm.colorbar.ticktext)
    assert ticks[0] == "NV" and ticks[-1] == "SYS"


def test_collective_bandwidth_figure_in_gb_per_s():
    rows = [{"bytes": float(1 << k), "busbw_bytes_per_s": 1e9 * k, "time_s": 1e-5 * k, "algorithm": "ring"}
            for k in (10, 20, 30)]
    fig = viz.collective_bandwidth_figure({"this machine": rows})
    assert list(fig.data[0].y) == pytest.approx([10.0, 20.0, 30.0])
    assert fig.layout.xaxis.type == "log"


def test_pareto_figure_limits_on_log_axes():
    pts = [{"time_s": d * units.DAY, "cost_usd": 1000.0 / d, "label": f"{d} days"} for d in (1, 2, 4, 8)]
    fig = viz.pareto_figure(pts, frontier=pts[:2], deadline_s=3 * units.DAY, budget_usd=500.0)
    assert list(fig.data[0].x) == pytest.approx([1, 2, 4, 8])
    assert fig.data[1].name == "Pareto frontier"
    _annotations_in_range(fig)
    ann = {a.text: a for a in fig.layout.annotations}
    assert ann["deadline"].x == pytest.approx(math.log10(3.0))


def test_measured_vs_fitted_pairs_markers_and_lines():
    fig = viz.measured_vs_fitted_figure({"all_reduce": {"x": [1, 2], "measured": [1.0, 2.0], "fitted": [1.1, 1.9],
                                                        "used": [False, True]},
                                         "broadcast": {"x": [1, 2], "measured": [3.0, 4.0], "fitted": [3.0, 4.0]}},
                                        x_title="bytes", y_title="s", y_scale=0.5)
    assert [t.mode for t in fig.data] == ["markers", "lines"] * 2
    measured, fitted = fig.data[0], fig.data[1]
    assert measured.marker.line.color == fitted.line.color != fig.data[3].line.color
    # one legend entry per benchmark toggles both of its traces
    assert measured.legendgroup == fitted.legendgroup == "all_reduce" and fitted.showlegend is False
    # a point the fit left out is hollow; values are divided by y_scale
    assert list(measured.marker.color) == ["rgba(0,0,0,0)", measured.marker.line.color]
    assert list(fitted.y) == pytest.approx([2.2, 3.8])
    _no_binary(_fig_json(fig))


def _gemm_rows():
    rows = []
    for prec, ceiling in (("fp32", 50e12), ("bf16", 800e12)):
        for s_ in (512, 2048, 8192):
            flop = 2.0 * s_**3
            fitted_t = flop / ceiling + 6e-6
            rows.append({"kind": "gemm", "group": prec, "label": f"{prec} {s_}x{s_}x{s_}", "x": flop,
                         "measured_s": fitted_t * 1.02, "fitted_s": fitted_t, "error_frac": 1 / 1.02 - 1,
                         "used": True, "measured_rate": flop / (fitted_t * 1.02), "fitted_rate": flop / fitted_t})
    return rows


def test_gemm_fit_figure_one_colour_per_precision_in_tflops():
    rows = _gemm_rows()
    fig = viz.gemm_fit_figure(rows[::-1])  # any order in, sorted by size out
    measured = [t for t in fig.data if t.mode == "markers"]
    assert [t.name for t in measured] == ["bf16", "fp32"]
    bf16_line = next(t for t in fig.data if t.mode == "lines" and t.legendgroup == "bf16")
    assert list(bf16_line.x) == sorted(bf16_line.x)
    want = [r["fitted_rate"] / units.TERA for r in rows if r["group"] == "bf16"]
    assert list(bf16_line.y) == pytest.approx(want)
    assert max(bf16_line.y) < 800.0  # the kernel time keeps every call below the ceiling
    assert fig.layout.yaxis.title.text == "TFLOP/s" and fig.layout.xaxis.type == "log"
    # a CPU's GFLOP/s ceilings are shown in GFLOP/s
    cpu = viz.gemm_fit_figure([{**r, "measured_rate": r["measured_rate"] / 1e4, "fitted_rate": r["fitted_rate"] / 1e4}
                               for r in rows])
    assert cpu.layout.yaxis.title.text == "GFLOP/s"


def test_memory_and_collective_figures_are_log_log_with_byte_ticks():
    mem = [{"group": "device_copy", "label": f"device_copy {b}", "x": float(b), "measured_rate": r, "fitted_rate": 3e12,
            "used": b >= 1 << 30, "error_frac": 0.0} for b, r in ((1 << 26, 1.5e12), (1 << 30, 2.9e12),
                                                                   (1 << 32, 3.0e12))]
    mem += [{"group": "h2d_pinned", "label": "h2d", "x": float(1 << 30), "measured_rate": 50e9, "fitted_rate": 52e9,
             "used": True, "error_frac": 0.04}]
    fig = viz.memory_fit_figure(mem)
    assert fig.layout.yaxis.type == "log" and fig.layout.xaxis.type == "log"
    assert fig.layout.yaxis.title.text == "bandwidth (GB/s)"
    assert list(fig.layout.xaxis.ticktext) == ["64 MiB", "1 GiB", "4 GiB"]
    dev = fig.data[0]
    assert dev.marker.color[0] == "rgba(0,0,0,0)" and dev.marker.color[1] != "rgba(0,0,0,0)"
    assert list(fig.data[1].y) == pytest.approx([3000.0] * 3)
    coll = [{"group": f"all_reduce intra-node n={n}", "label": f"all_reduce {k}", "x": float(1 << k),
             "measured_rate": 1e6 * 2**k / n, "fitted_rate": 1e6 * 2**k / n, "error_frac": 0.0}
            for n in (4, 8) for k in range(10, 31, 4)]
    fig = viz.collective_fit_figure(coll)
    assert [t.name for t in fig.data if t.showlegend is not False] == ["all_reduce intra-node n=4",
                                                                        "all_reduce intra-node n=8"]
    assert fig.layout.yaxis.type == "log"  # decades apart: decade ticks, written without an exponent
    assert all(math.log10(v).is_integer() for v in fig.layout.yaxis.tickvals)
    assert "e" not in "".join(fig.layout.yaxis.ticktext)
    assert fig.layout.xaxis.ticktext[0] == "1 KiB"
    _no_binary(_fig_json(fig))


def test_p2p_figure_flags_slow_pairs_against_the_median():
    pairs = [{"host": "a", "src": 0, "dst": d, "path": "NV18", "bytes": 1 << 26, "bytes_per_s": bw,
              "small_bytes": 4096, "small_time_s": 5e-6, "slow": bw < 300e9}
             for d, bw in ((1, 370e9), (2, 360e9), (3, 200e9))]
    fig = viz.p2p_figure(pairs)
    bar = fig.data[0]
    assert list(bar.y) == ["0 → 1 (NV18)", "0 → 2 (NV18)", "0 → 3 (NV18)"]
    assert list(bar.x) == pytest.approx([370.0, 360.0, 200.0])
    assert bar.marker.color[2] == viz.LIMIT_COLOR and bar.marker.color[0] != viz.LIMIT_COLOR
    assert "SLOW" in bar.text[2] and "SLOW" not in bar.text[0]
    assert fig.layout.shapes[0].x0 == pytest.approx(360.0)  # the median pair


def test_held_out_figure_measured_range_and_predictions():
    recs = [{"workload": "mlp", "per_rank_batch": 8, "n_ranks": 8, "measured_s": 0.010, "measured_p10_s": 0.009,
             "measured_p90_s": 0.012, "predicted_s": 0.011, "error_frac": 0.1, "anchored_s": 0.0105},
            {"workload": "gpt", "per_rank_batch": 4, "n_ranks": 8, "measured_s": 0.040, "measured_p10_s": 0.039,
             "measured_p90_s": 0.041, "predicted_s": 0.036, "error_frac": -0.1, "label": "gpt b4"}]
    fig = viz.held_out_figure(recs)
    meas, pred, anch = fig.data
    assert list(meas.x) == ["mlp b8 ×8", "gpt b4"]
    assert list(meas.y) == pytest.approx([10.0, 40.0])
    assert list(meas.error_y.array) == pytest.approx([2.0, 1.0]) and list(meas.error_y.arrayminus) == pytest.approx(
        [1.0, 1.0])
    assert list(pred.y) == pytest.approx([11.0, 36.0])
    assert anch.y[0] == pytest.approx(10.5) and anch.y[1] is None
    assert fig.layout.barmode == "group"
    only = viz.held_out_figure(recs[1:])
    assert len(only.data) == 2  # no anchored predictions, no third bar


def test_breakdown_figure_draws_the_interval_on_the_bar_end():
    fig = viz.breakdown_figure(BREAKDOWN, interval_s=(0.070, 0.080), interval_level=0.9)
    band = next(t for t in fig.data if t.type == "scatter")
    total = sum(BREAKDOWN.values()) / units.MS
    assert band.name == "90% interval (calibration)" and band.x[0] == pytest.approx(total)
    assert band.error_x.array[0] == pytest.approx(80.0 - total) and band.error_x.arrayminus[0] == pytest.approx(
        total - 70.0)
    assert not any(t.type == "scatter" for t in viz.breakdown_figure(BREAKDOWN).data)


def test_nan_and_inf_become_gaps():
    rows = [{"n_gpus": 1, "speedup": 1.0, "scaling_efficiency_frac": 1.0},
            {"n_gpus": 2, "speedup": float("nan"), "scaling_efficiency_frac": float("inf")}]
    fig = viz.speedup_figure({"a": rows})
    assert fig.data[0].y[1] is None
    json.dumps(_fig_json(fig))  # serialisable


# --- issue 20: readable axes with units -------------------------------------------------------------------

def _labels(axis) -> list[str]:
    return [str(t) for t in (axis.ticktext or [])]


def test_time_unit_and_numbers_never_need_an_exponent():
    assert viz.time_unit(8.35)[1] == "s" and viz.time_unit(0.0686)[1] == "ms" and viz.time_unit(3e-4)[1] == "µs"
    assert viz.time_unit(1.5)[1] == "ms"  # 1,500 ms reads better than 1.5 s beside ms steps; 2 s and up in s
    for x in (5991.2, 771.5, 12.49, 1.234, 0.0163, 123456.0):
        assert "e" not in viz.num(x)
    assert viz.num(5991.2) == "5,991"


def test_an_llm_step_of_seconds_is_drawn_in_seconds():
    """[issue 20] an 8 s step was labelled '5.99e+03 ms' inside its bar."""
    bd = {"compute_s": 5.99, "tp_comm_exposed_s": 0.77, "pp_bubble_s": 1.35, "pp_p2p_exposed_s": 0.06,
          "dp_comm_exposed_s": 0.016, "optimizer_s": 0.02, "sync_s": 0.14, "overhead_s": 0.001}
    fig = viz.breakdown_figure(bd)
    assert fig.layout.xaxis.title.text == "seconds per optimizer step"
    assert sum(t.x[0] for t in fig.data) == pytest.approx(sum(bd.values()))
    texts = " ".join(t.text[0] for t in fig.data if t.text and t.text[0])
    assert "compute<br>5.99 s" in texts and "e+" not in texts
    short = viz.breakdown_figure(BREAKDOWN)
    assert short.layout.xaxis.title.text == "milliseconds per optimizer step"


def test_schedule_title_quotes_the_bubble_it_is_given():
    from gpusim.parallelism import pipeline_schedule

    s = pipeline_schedule(8, 1, 32, 0.054, 0.116)
    drawn = 1 - s["busy_frac"]
    fig = viz.pipeline_schedule_figure(s, bubble_frac=0.162)
    assert "bubble 16% of the step" in fig.layout.title.text and f"{drawn:.0%}" not in fig.layout.title.text
    assert fig.layout.xaxis.title.text == "time in the step (s)" if s["step_s"] >= 2 else "time in the step (ms)"


def _ticks_in(axis, lo: float, hi: float) -> list[str]:
    return [t for v, t in zip(axis.tickvals, axis.ticktext) if lo <= v <= hi]


@pytest.mark.parametrize("costs, days", [
    ((21_000.0, 35_600.0, 48_000.0, 140_000.0), (3.8, 5.1, 9.0, 2.1)),      # a 7B plan: one decade
    ((9.0e6, 1.4e7, 2.7e7, 6.1e7), (40.0, 60.0, 90.0, 30.0)),              # a 405B plan: tens of millions
    ((1.0e3, 1.0e5, 1.0e7), (1.0, 10.0, 100.0)),                           # many decades
])
def test_pareto_cost_axis_labels_at_least_two_ticks_within_the_data(costs, days):
    """[issue 20] the log cost axis had one label ($100k) for a 7B plan and none for 405B."""
    pts = [{"time_s": d * units.DAY, "cost_usd": c, "label": str(i)} for i, (c, d) in enumerate(zip(costs, days))]
    fig = viz.pareto_figure(pts, frontier=pts[:2])
    for axis, lo, hi in ((fig.layout.yaxis, min(costs), max(costs)), (fig.layout.xaxis, min(days), max(days))):
        if axis.type == "log":
            inside = _ticks_in(axis, lo, hi)
            assert len(inside) >= 2, (axis.title.text, list(axis.ticktext))
            assert all("e" not in t for t in axis.ticktext)
        else:
            assert axis.type == "linear" and hi / lo < 3
    assert all(t.startswith("$") for t in _labels(fig.layout.yaxis))


def test_pareto_narrow_range_is_linear_with_the_limits_on_it():
    pts = [{"time_s": d * units.DAY, "cost_usd": c, "label": ""} for c, d in ((20_000.0, 4.0), (26_000.0, 5.0))]
    fig = viz.pareto_figure(pts, deadline_s=6 * units.DAY, budget_usd=30_000.0)
    assert fig.layout.yaxis.type == "linear" and fig.layout.xaxis.type == "linear"
    ann = {a.text: a for a in fig.layout.annotations}
    assert ann["deadline"].x == pytest.approx(6.0) and ann["budget"].y == pytest.approx(30_000.0)


def test_log_ticks_1_2_5_per_decade_and_decades_when_many():
    v, t = viz.log_ticks(15_000, 150_000, fmt=viz.usd)
    assert v == [20_000, 50_000, 100_000] and t == ["$20k", "$50k", "$100k"]
    v, _ = viz.log_ticks(1.0, 1e12, most=7)
    assert len(v) <= 7 and all(math.log10(x).is_integer() for x in v)
    ratios = [b / a for a, b in zip(v, v[1:])]
    assert all(r >= 10 for r in ratios)


def test_sensitivity_low_and_high_ends_have_distinct_swatches():
    """[issue 20] the legend showed one swatch for both ends (the same colour at two opacities)."""
    rows = [{"assumption": "MFU", "range": "-20%..+20%", "swing_frac": 0.4, "cost_low_frac": 0.25,
             "cost_high_frac": -0.17, "time_low_frac": 0.25, "time_high_frac": -0.17}]
    fig = viz.sensitivity_figure(rows)
    by = {t.name: t for t in fig.data}
    for what in ("cost", "time to train"):
        low, high = by[f"{what}, low end"], by[f"{what}, high end"]
        assert (low.marker.pattern.shape or "") != (high.marker.pattern.shape or "")
        assert low.marker.color != high.marker.color


def test_gemm_axis_ticks_are_decades_that_cannot_overlap():
    """[issue 20] the GEMM chart's minor tick labels (2, 5 between decades) overlapped."""
    fig = viz.gemm_fit_figure(_gemm_rows())
    xs = [r["x"] for r in _gemm_rows()]
    tv = list(fig.layout.xaxis.tickvals)
    assert len(tv) >= 2 and all(b / a >= 10 for a, b in zip(tv, tv[1:]))
    assert min(xs) / 10 <= tv[0] and tv[-1] <= max(xs) * 10
    assert all("e" not in t for t in fig.layout.xaxis.ticktext)


def test_log_axis_labels_the_data_and_adds_only_near_outer_ticks():
    ax = viz.log_axis([21.7, 54.5, 2980.0])
    assert ax["tickvals"][0] == 20.0 and ax["tickvals"][-1] == 2000.0  # 20 is close below; 5,000 too far above
    lo, hi = ax["range"]
    assert lo <= math.log10(20.0) and hi >= math.log10(2980.0)  # the data and the ticks are all in range
    ax = viz.log_axis([21_000.0, 210_000.0], fmt=viz.usd)
    assert ax["ticktext"] == ["$20k", "$50k", "$100k", "$200k"]
    assert viz.log_axis([0.0, -1.0]) == {}
