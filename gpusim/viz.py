"""Plotly figure builders for the planner (and notebooks): data in, :class:`plotly.graph_objects.Figure` out.

Every function here is pure: it takes plain numbers (SI units, the unit in the argument's name) that the
gpusim API returned, converts them to the units people read on an axis (ms, GiB, TFLOP/s, GB/s) with the
constants of :mod:`gpusim.units`, and draws them. Nothing here calls the model. Trace data are passed as
Python lists (not numpy arrays), so that a figure's JSON is readable as-is (plotly 7 would otherwise
encode arrays as base64 ``bdata``).

Colours are fixed per quantity (compute is always the same blue, exposed communication the same red ...)
so that charts on different pages read alike.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence

import plotly.graph_objects as go

from gpusim import units

# --- shared vocabulary -------------------------------------------------------------------------------

#: step-time parts (keys of StepResult.breakdown_s) -> what a person calls them
BREAKDOWN_LABELS: dict[str, str] = {
    "compute_s": "compute",
    "comm_exposed_s": "exposed communication",
    "data_wait_s": "data wait",
    "optimizer_s": "optimizer step",
    "sync_s": "sync and stragglers",
    "overhead_s": "fixed overhead",
}
#: an LLM layout's breakdown (gpusim.model.step.LLM_BREAKDOWN_KEYS)
LLM_BREAKDOWN_LABELS: dict[str, str] = {
    "compute_s": "compute",
    "tp_comm_exposed_s": "tensor-parallel communication",
    "pp_bubble_s": "pipeline bubble",
    "pp_p2p_exposed_s": "pipeline send/receive",
    "dp_comm_exposed_s": "data-parallel communication",
    **{k: v for k, v in BREAKDOWN_LABELS.items() if k not in ("compute_s", "comm_exposed_s")},
}
BREAKDOWN_COLORS: dict[str, str] = {
    "compute_s": "#4C78A8",
    "tp_comm_exposed_s": "#FF9DA6",
    "pp_bubble_s": "#BAB0AC",
    "pp_p2p_exposed_s": "#EECA3B",
    "dp_comm_exposed_s": "#E45756",
    "comm_exposed_s": "#E45756",
    "data_wait_s": "#F58518",
    "optimizer_s": "#72B7B2",
    "sync_s": "#B279A2",
    "overhead_s": "#9D9DA0",
}
LLM_ONLY_KEYS = ("tp_comm_exposed_s", "pp_bubble_s", "pp_p2p_exposed_s", "dp_comm_exposed_s")
MEMORY_LABELS: dict[str, str] = {
    "weights": "weights",
    "gradients": "gradients",
    "optimizer": "optimizer states",
    "activations": "activations",
    "buffers": "communication buffers",
    "overhead": "framework overhead",
}
MEMORY_COLORS: dict[str, str] = {
    "weights": "#4C78A8",
    "gradients": "#72B7B2",
    "optimizer": "#54A24B",
    "activations": "#F58518",
    "buffers": "#B279A2",
    "overhead": "#9D9DA0",
}
#: a qualitative palette for curves (one colour per fabric / strategy, in order)
SERIES_COLORS = ("#4C78A8", "#E45756", "#54A24B", "#F58518", "#B279A2", "#72B7B2", "#FF9DA6", "#9D755D",
                 "#EECA3B", "#BAB0AC")
IDEAL_COLOR = "#888888"
LIMIT_COLOR = "#D62728"
#: nvidia-smi path classes, best to worst, and their colours (green = NVLink ... red = across sockets)
PATH_COLORS: dict[str, str] = {"X": "#FFFFFF", "NV": "#1A9850", "PIX": "#91CF60", "PXB": "#D9EF8B",
                               "PHB": "#FEE08B", "NODE": "#FC8D59", "SYS": "#D73027"}

_MARGIN = {"l": 10, "r": 10, "t": 40, "b": 10}


def _f(x) -> float | None:
    """A JSON-friendly float: None for NaN/inf (plotly leaves a gap)."""
    x = float(x)
    return x if math.isfinite(x) else None


def _color(i: int) -> str:
    return SERIES_COLORS[i % len(SERIES_COLORS)]


def time_unit(max_s: float) -> tuple[float, str, str]:
    """``(divisor, unit, word)`` for times on an axis, chosen by the largest one: s from 2 s up, ms from 2 ms up,
    µs below (so that no tick or label needs an exponent: 5,700 ms is drawn as 5.7 s)."""
    a = abs(float(max_s)) if max_s is not None and math.isfinite(float(max_s)) else 0.0
    if a >= 2.0:
        return 1.0, "s", "seconds"
    if a >= 2 * units.MS:
        return units.MS, "ms", "milliseconds"
    return units.US, "µs", "microseconds"


def num(x: float) -> str:
    """Three significant digits without an exponent, thousands separated: 5,991 / 771 / 12.5 / 0.0163."""
    x = float(x)
    if not math.isfinite(x):
        return str(x)
    a = abs(x)
    if a >= 100:
        return f"{x:,.0f}"
    if a >= 10:
        return f"{x:.1f}"
    if a >= 1:
        return f"{x:.2f}"
    return f"{x:.3g}"


def tick(x: float) -> str:
    """A tick label without an exponent or trailing zeros: 0.5 / 2 / 50 / 2,000 / 100,000."""
    x = float(x)
    return f"{x:,.0f}" if abs(x) >= 1000 else f"{x:.3g}"


def log_ticks(lo: float, hi: float, *, fmt=None, most: int = 12) -> tuple[list[float], list[str]]:
    """Tick values and labels of a log axis from ``lo`` to ``hi``: every decade and the 2 and 5 in between
    (1, 2, 5, 10, 20 ...; 3s, then more, added while fewer than 3 fall in the span, so that a span under one decade
    still has labels); over ``most`` ticks, the
    decades only (every other decade past ``most`` decades); ``fmt`` writes a value (default :func:`tick`)."""
    fmt = fmt or tick
    if not (lo > 0 and hi > 0 and math.isfinite(lo) and math.isfinite(hi)):
        return [], []
    lo, hi = min(lo, hi), max(lo, hi)
    for mantissas in ((1, 2, 5), (1, 2, 3, 5), (1, 1.5, 2, 3, 4, 5, 7)):  # finer while under 3 ticks
        vals = []
        for d in range(math.floor(math.log10(lo)) - 1, math.ceil(math.log10(hi)) + 1):
            for m in mantissas:
                v = m * 10.0 ** d
                if lo / 1.0001 <= v <= hi * 1.0001:
                    vals.append(v)
        if len(vals) >= 3:
            break
    if len(vals) > most:  # many decades: the decades only
        vals = [v for v in vals if f"{v:.0e}".startswith("1")]
        while len(vals) > most:
            vals = vals[::2]
    return vals, [fmt(v) for v in vals]


def log_axis(values: Sequence[float], *, fmt=None, most: int = 12) -> dict:
    """Layout of a log axis over ``values``: :func:`log_ticks` where the data are, and the next tick beyond an end
    when it lies close to the data (20 below data from 21.7, so the labels bound them; not $500k above $210k, which
    would waste a third of the chart); the range to the data and those ticks, with a small margin. ``{}`` without
    positive values."""
    vals = [float(v) for v in values if v is not None and math.isfinite(float(v)) and float(v) > 0]
    if not vals:
        return {}
    lo, hi = min(vals), max(vals)
    tv, _ = log_ticks(lo, hi, most=most)
    decades = len(tv) > 3 and all(f"{v:.0e}".startswith("1") for v in tv)
    near = 1.35  # an outer tick this close to the data is worth the extra room (20 below 21.7; not 500k above 210k)
    if not tv or tv[0] > lo * 1.0001:
        below = [10.0 ** math.floor(math.log10(lo))] if decades else log_ticks(lo / 10, lo)[0][-1:]
        tv = [v for v in below if v >= lo / near or not tv] + tv
    if tv[-1] < hi / 1.0001:
        above = [10.0 ** math.ceil(math.log10(hi))] if decades else log_ticks(hi, hi * 10)[0][:1]
        tv = tv + [v for v in above if v <= hi * near or len(tv) < 2]
    a, b = math.log10(min(tv[0], lo)), math.log10(max(tv[-1], hi))
    pad = 0.03 * max(b - a, 0.1)
    return {"type": "log", "tickvals": tv, "ticktext": [(fmt or tick)(v) for v in tv], "range": [a - pad, b + pad]}


def si(x: float) -> str:
    """An SI-prefixed count for a tick: 500 / 2k / 10M / 1G / 100T."""
    x = float(x)
    for div, suf in ((units.PETA, "P"), (units.TERA, "T"), (units.GIGA, "G"), (units.MEGA, "M"),
                     (units.KILO, "k")):
        if abs(x) >= div:
            return f"{x / div:.3g}{suf}"
    return f"{x:.3g}"


def usd(x: float) -> str:
    """A dollar tick: $500 / $2k / $50k / $1.2M."""
    x = float(x)
    for div, suf in ((units.MEGA, "M"), (units.KILO, "k")):
        if abs(x) >= div:
            return f"${x / div:.3g}{suf}"
    return f"${x:.3g}"


def _vline(fig: go.Figure, x: float, *, text: str = "", log: bool = False, top: bool = True, anchor: str = "left",
           **line) -> None:
    """A vertical line at data ``x`` with a label. Plotly's ``add_vline(annotation_text=...)`` places the label
    at the raw value on a log axis (annotations take log10 there), which sends the axis range to 10**x and can
    hang the browser, so the label is added here."""
    fig.add_vline(x=x, **line)
    if text:
        fig.add_annotation(x=math.log10(x) if log else x, xref="x", y=1.0 if top else 0.0, yref="paper",
                           yanchor="bottom", xanchor=anchor, text=text, showarrow=False,
                           font={"size": 11, "color": line.get("line_color", IDEAL_COLOR)})


def _hline(fig: go.Figure, y: float, *, text: str = "", log: bool = False, **line) -> None:
    """A horizontal line at data ``y`` with a label at the right (see :func:`_vline`)."""
    fig.add_hline(y=y, **line)
    if text:
        fig.add_annotation(y=math.log10(y) if log else y, yref="y", x=1.0, xref="paper", xanchor="right",
                           yanchor="bottom", text=text, showarrow=False,
                           font={"size": 11, "color": line.get("line_color", IDEAL_COLOR)})


def _layout(fig: go.Figure, title: str, height: int, *, per_row: int = 3, **kw) -> go.Figure:
    """Title at the top left; the legend in rows along the bottom of the figure, below the x-axis title (a
    legend at the top would cover the title, one at the right would squeeze half-width charts)."""
    items = sum(1 for t in fig.data if t.showlegend is not False and t.name)
    rows = math.ceil(items / per_row) if items else 0
    legend_px = 22 * rows
    fig.update_layout(title={"text": title, "x": 0.0, "xanchor": "left"}, height=height + legend_px,
                      margin={**_MARGIN, "b": 60 + legend_px},
                      legend={"orientation": "h", "yref": "container", "y": 0.0, "yanchor": "bottom", "x": 0.0,
                              "xanchor": "left", "traceorder": "normal"},
                      **kw)
    return fig


# --- Step page ---------------------------------------------------------------------------------------

def breakdown_figure(breakdown_s: Mapping[str, float], *, single_gpu_step_s: float | None = None,
                     comm_hidden_s: float | None = None, interval_s: Sequence[float] | None = None,
                     interval_level: float = 0.9, title: str = "Where one training step goes") -> go.Figure:
    """A horizontal stacked bar of one step's parts in seconds, ms or µs by the step's length (:func:`time_unit`;
    compute, exposed communication,
    data wait, optimizer, sync and stragglers, overhead). ``single_gpu_step_s`` draws the same GPU's step
    alone at the same per-GPU batch as a dashed line (the ideal for weak scaling); ``comm_hidden_s`` adds a
    second bar with the communication that ran under the backward pass (it costs no time);
    ``interval_s = (lo, hi)`` (a calibration's interval of the step time, at ``interval_level``) is drawn
    as an error bar on the bar's end."""
    div, tu, word = time_unit(max(sum(breakdown_s.values()), float(single_gpu_step_s or 0.0)))
    total_ms = sum(breakdown_s.values()) / div
    fig = go.Figure()
    rows = ["this step"]
    llm = any(k in breakdown_s for k in LLM_ONLY_KEYS)  # an LLM layout's breakdown names its own parts
    for key, label in (LLM_BREAKDOWN_LABELS if llm else BREAKDOWN_LABELS).items():
        v = float(breakdown_s.get(key, 0.0))
        ms = v / div
        share = ms / total_ms if total_ms > 0 else 0.0
        fig.add_trace(go.Bar(
            x=[ms], y=rows, orientation="h", name=label, marker_color=BREAKDOWN_COLORS[key],
            text=[f"{label}<br>{num(ms)} {tu}" if share >= 0.12 else ""], textposition="inside",
            insidetextanchor="middle", hovertemplate=f"{label}: %{{x:,.4g}} {tu} ({share:.1%})<extra></extra>"))
    if comm_hidden_s is not None and comm_hidden_s > 0:
        fig.add_trace(go.Bar(
            x=[comm_hidden_s / div], y=["communication hidden<br>under backward"], orientation="h",
            name="hidden communication", marker_color=BREAKDOWN_COLORS["comm_exposed_s"], opacity=0.35,
            hovertemplate="hidden under the backward pass: %{x:,.4g} " + tu + "<extra></extra>"))
    if interval_s is not None:
        lo, hi = (float(v) / div for v in interval_s)
        fig.add_trace(go.Scatter(
            x=[total_ms], y=rows, mode="markers", name=f"{interval_level:.0%} interval (calibration)",
            marker={"color": "#000000", "size": 7, "symbol": "line-ns", "line": {"width": 2, "color": "#000000"}},
            error_x={"type": "data", "symmetric": False, "array": [max(hi - total_ms, 0.0)],
                     "arrayminus": [max(total_ms - lo, 0.0)], "color": "#000000", "thickness": 2, "width": 10},
            hovertemplate=(f"step {total_ms:.4g} {tu}; {interval_level:.0%} interval {lo:.4g}-{hi:.4g} {tu}"
                           "<extra>calibration</extra>")))
    if single_gpu_step_s is not None and math.isfinite(single_gpu_step_s):
        x1 = single_gpu_step_s / div
        _vline(fig, x1, text=f"one GPU alone: {num(x1)} {tu}", anchor="right", line_dash="dash", line_color=IDEAL_COLOR)
    fig.update_xaxes(title_text=f"{word} per optimizer step", rangemode="tozero", tickformat=",~g")
    fig.update_yaxes(autorange="reversed")
    return _layout(fig, title, 240 if len(rows) == 1 else 290, barmode="stack", showlegend=True)


def memory_figure(memory_breakdown_bytes: Mapping[str, float], capacity_bytes: float, *,
                  title: str = "Memory per GPU") -> go.Figure:
    """A stacked bar of what one GPU holds (GiB) against its capacity (red line)."""
    fig = go.Figure()
    total = sum(float(v) for v in memory_breakdown_bytes.values())
    for key, v in memory_breakdown_bytes.items():
        gib = float(v) / units.GIB
        fig.add_trace(go.Bar(x=[gib], y=["per GPU"], orientation="h", name=MEMORY_LABELS.get(key, key),
                             marker_color=MEMORY_COLORS.get(key),
                             hovertemplate=f"{MEMORY_LABELS.get(key, key)}: %{{x:.3g}} GiB<extra></extra>"))
    cap = capacity_bytes / units.GIB
    fits = total <= capacity_bytes
    _vline(fig, cap, text=f"capacity {cap:.4g} GiB" + ("" if fits else ": does not fit"), anchor="right",
           line_color=LIMIT_COLOR, line_width=3)
    fig.update_xaxes(title_text="GiB", range=[0, max(cap, total / units.GIB) * 1.08])
    return _layout(fig, title, 220, barmode="stack")


def gains_figure(recommendations: Sequence[Mapping], *, title: str = "Predicted throughput change of each advice"
                 ) -> go.Figure:
    """Horizontal bars of the predicted throughput change (percent) of the recommendations that carry one."""
    recs = [r for r in recommendations if r.get("gain_frac") is not None]
    names = [str(r["id"]) for r in recs][::-1]
    gains = [100.0 * float(r["gain_frac"]) for r in recs][::-1]
    fig = go.Figure(go.Bar(x=gains, y=names, orientation="h",
                           marker_color=["#54A24B" if g >= 0 else LIMIT_COLOR for g in gains],
                           text=[f"{g:+.0f}%" for g in gains], textposition="auto",
                           hovertemplate="%{y}: %{x:+.1f}% samples/s<extra></extra>"))
    fig.update_xaxes(title_text="throughput change (%)", zeroline=True)
    return _layout(fig, title, max(180, 60 + 40 * len(names)), showlegend=False)


# --- Scaling page ------------------------------------------------------------------------------------

def _curve_xy(rows: Sequence[Mapping], key: str, scale: float = 1.0):
    xs = [int(r["n_gpus"]) for r in rows]
    ys = [_f(float(r[key]) * scale) for r in rows]
    fits = [bool(r.get("fits_in_memory", True)) for r in rows]
    return xs, ys, fits


def _series(fig: go.Figure, curves: Mapping[str, Sequence[Mapping]], key: str, scale: float, unit: str) -> int:
    top = 1
    for i, (label, rows) in enumerate(curves.items()):
        if not rows:
            continue
        xs, ys, fits = _curve_xy(rows, key, scale)
        top = max(top, max(xs))
        fig.add_trace(go.Scatter(
            x=xs, y=ys, mode="lines+markers", name=label, line={"color": _color(i)},
            marker={"symbol": ["circle" if f else "x" for f in fits], "size": [8 if f else 11 for f in fits]},
            customdata=[[r.get("bottleneck", ""), r.get("per_gpu_batch", ""), "fits" if f else "does NOT fit"]
                        for r, f in zip(rows, fits)],
            hovertemplate=(f"{label}<br>%{{x}} GPUs: %{{y:.3g}}{unit}<br>bottleneck %{{customdata[0]}}, "
                           "batch/GPU %{customdata[1]}, %{customdata[2]}<extra></extra>")))
    return top


def speedup_figure(curves: Mapping[str, Sequence[Mapping]], *, title: str = "Speedup over one GPU") -> go.Figure:
    """Speedup vs GPU count (log-log) for several curves (rows of :func:`gpusim.simulation.scaling_curve`),
    with the ideal (linear) line. Points whose memory does not fit are drawn as crosses."""
    fig = go.Figure()
    top = _series(fig, curves, "speedup", 1.0, "x")
    ideal = [1, top]
    fig.add_trace(go.Scatter(x=ideal, y=ideal, mode="lines", name="ideal (linear)",
                             line={"color": IDEAL_COLOR, "dash": "dash"}, hoverinfo="skip"))
    fig.update_xaxes(title_text="GPUs", type="log", dtick=math.log10(2), tickformat="d")
    fig.update_yaxes(title_text="speedup (x)", type="log", dtick=math.log10(2), tickformat=".3~g")
    return _layout(fig, title, 420)


def efficiency_figure(curves: Mapping[str, Sequence[Mapping]], *, title: str = "Scaling efficiency",
                      target_frac: float | None = None) -> go.Figure:
    """Scaling efficiency (percent) vs GPU count, with the 100% line (and a target line if given)."""
    fig = go.Figure()
    top = _series(fig, curves, "scaling_efficiency_frac", 100.0, "%")
    fig.add_trace(go.Scatter(x=[1, top], y=[100.0, 100.0], mode="lines", name="ideal (100%)",
                             line={"color": IDEAL_COLOR, "dash": "dash"}, hoverinfo="skip"))
    if target_frac is not None:
        _hline(fig, 100.0 * target_frac, text=f"{target_frac:.0%}", line_dash="dot", line_color=LIMIT_COLOR)
    fig.update_xaxes(title_text="GPUs", type="log", dtick=math.log10(2), tickformat="d")
    fig.update_yaxes(title_text="efficiency (%)", rangemode="tozero")
    return _layout(fig, title, 420)


def breakdown_vs_gpus_figure(rows: Sequence[Mapping], *, title: str = "Step time by part vs GPU count") -> go.Figure:
    """Stacked bars of each part of the step for each GPU count of one scaling curve, in s, ms or µs by the
    longest step (:func:`time_unit`)."""
    fig = go.Figure()
    xs = [str(int(r["n_gpus"])) for r in rows]
    div, tu, _ = time_unit(max((sum(float(r.get(k, 0.0)) for k in BREAKDOWN_LABELS) for r in rows), default=0.0))
    for key, label in BREAKDOWN_LABELS.items():
        ys = [float(r.get(key, 0.0)) / div for r in rows]
        if not any(y > 0 for y in ys):
            continue
        fig.add_trace(go.Bar(x=xs, y=ys, name=label, marker_color=BREAKDOWN_COLORS[key],
                             hovertemplate=f"{label}: %{{y:,.4g}} {tu}<extra>%{{x}} GPUs</extra>"))
    fig.update_xaxes(title_text="GPUs", type="category")
    fig.update_yaxes(title_text=f"{tu} per optimizer step", tickformat=",~g")
    return _layout(fig, title, 380, barmode="stack")


# --- Batch page --------------------------------------------------------------------------------------

def _memory_limit(fig: go.Figure, max_micro_batch: int | None, xs: Sequence[int]) -> None:
    if max_micro_batch is None:
        return
    if max_micro_batch < 1:
        fig.add_annotation(text="no batch fits in memory", xref="paper", yref="paper", x=0.5, y=0.5,
                           showarrow=False, font={"color": LIMIT_COLOR, "size": 16})
        return
    _vline(fig, max_micro_batch, text=f"memory limit: {max_micro_batch}", log=True, line_color=LIMIT_COLOR,
           line_width=2)
    right = max(max(xs, default=max_micro_batch), max_micro_batch) * 2
    fig.add_vrect(x0=max_micro_batch, x1=right, fillcolor=LIMIT_COLOR, opacity=0.07, line_width=0)


def batch_throughput_figure(rows: Sequence[Mapping], *, max_micro_batch: int | None = None,
                            current_batch: int | None = None, title: str = "Throughput vs per-GPU batch"
                            ) -> go.Figure:
    """Samples/s (all GPUs) and per GPU vs the per-GPU micro-batch, with the largest batch that fits
    marked; batches that do not fit are drawn as crosses. ``rows``: dicts with ``per_gpu_batch``,
    ``throughput_samples_per_s``, ``throughput_per_gpu_samples_per_s``, ``fits_in_memory``."""
    xs = [int(r["per_gpu_batch"]) for r in rows]
    fits = [bool(r["fits_in_memory"]) for r in rows]
    sym = ["circle" if f else "x" for f in fits]
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=xs, y=[_f(r["throughput_samples_per_s"]) for r in rows], mode="lines+markers",
                             name="all GPUs", marker={"symbol": sym, "size": 8}, line={"color": _color(0)},
                             hovertemplate="batch %{x}: %{y:.4g} samples/s<extra>all GPUs</extra>"))
    fig.add_trace(go.Scatter(x=xs, y=[_f(r["throughput_per_gpu_samples_per_s"]) for r in rows],
                             mode="lines+markers", name="per GPU", marker={"symbol": sym, "size": 7},
                             line={"color": _color(2), "dash": "dot"},
                             hovertemplate="batch %{x}: %{y:.4g} samples/s<extra>per GPU</extra>"))
    _memory_limit(fig, max_micro_batch, xs)
    if current_batch:
        _vline(fig, current_batch, text=f"now: {current_batch}", log=True, top=False, line_dash="dash",
               line_color=IDEAL_COLOR)
    fig.update_xaxes(title_text="per-GPU batch (samples)", type="log", dtick=math.log10(2), tickformat="d")
    fig.update_yaxes(title_text="samples/s", rangemode="tozero")
    return _layout(fig, title, 400)


def batch_utilisation_figure(rows: Sequence[Mapping], *, util_target_frac: float, max_micro_batch: int | None = None,
                             current_batch: int | None = None,
                             title: str = "GPU utilisation and scaling efficiency vs per-GPU batch") -> go.Figure:
    """Estimated GPU utilisation (busy fraction of the step), MFU and scaling efficiency (percent) vs the
    per-GPU batch, with the utilisation target line (the seed articles' 80%)."""
    xs = [int(r["per_gpu_batch"]) for r in rows]
    fig = go.Figure()
    for i, (key, label) in enumerate((("gpu_util_frac", "GPU busy (utilisation)"),
                                      ("scaling_efficiency_frac", "scaling efficiency"), ("mfu_frac", "MFU"))):
        if all(key in r for r in rows):
            fig.add_trace(go.Scatter(x=xs, y=[_f(100.0 * float(r[key])) for r in rows], mode="lines+markers",
                                     name=label, line={"color": _color(i)},
                                     hovertemplate=f"batch %{{x}}: %{{y:.3g}}%<extra>{label}</extra>"))
    _hline(fig, 100.0 * util_target_frac, text=f"{util_target_frac:.0%} utilisation target", line_dash="dot",
           line_color=LIMIT_COLOR)
    _memory_limit(fig, max_micro_batch, xs)
    if current_batch:
        fig.add_vline(x=current_batch, line_dash="dash", line_color=IDEAL_COLOR)
    fig.update_xaxes(title_text="per-GPU batch (samples)", type="log", dtick=math.log10(2), tickformat="d")
    fig.update_yaxes(title_text="percent", range=[0, 105])
    return _layout(fig, title, 400)


# --- Rooflines page ----------------------------------------------------------------------------------

def _log_span(values: Sequence[float], pad: float = 4.0) -> tuple[float, float]:
    vals = [v for v in values if v is not None and v > 0 and math.isfinite(v)]
    lo, hi = min(vals), max(vals)
    return lo / pad, hi * pad


def gpu_roofline_figure(*, peak_flop_per_s: float, achievable_flop_per_s: float, mem_bytes_per_s: float,
                        achievable_mem_bytes_per_s: float, points: Sequence[Mapping], gpu_label: str = "GPU",
                        title: str | None = None) -> go.Figure:
    """The roofline of one GPU (Williams et al., CACM 2009): attainable FLOP/s = min(peak, intensity x memory
    bandwidth), as datasheet and achievable ceilings, with the workload's points on it. Each point is a dict
    with ``name``, ``intensity_flop_per_byte``, ``flop_per_s`` and optionally ``time_frac`` (marker size)
    and ``kind``."""
    xs_pts = [float(p["intensity_flop_per_byte"]) for p in points]
    ridge = peak_flop_per_s / mem_bytes_per_s
    x0, x1 = _log_span([*xs_pts, ridge, achievable_flop_per_s / achievable_mem_bytes_per_s], pad=8.0)
    fig = go.Figure()
    for label, peak, bw, dash in (("datasheet", peak_flop_per_s, mem_bytes_per_s, "dash"),
                                  ("achievable", achievable_flop_per_s, achievable_mem_bytes_per_s, "solid")):
        r = peak / bw
        xs = [x0, r, x1] if x0 < r < x1 else [x0, x1]
        ys = [min(peak, x * bw) / units.TERA for x in xs]
        fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", name=f"{label} roofline",
                                 line={"color": IDEAL_COLOR if dash == "dash" else "#333333", "dash": dash},
                                 hovertemplate=f"{label}: %{{y:.4g}} TFLOP/s at %{{x:.3g}} FLOP/byte<extra></extra>"))
    fig.add_annotation(x=math.log10(ridge), y=math.log10(peak_flop_per_s / units.TERA),
                       text=f"ridge {ridge:.3g} FLOP/byte", showarrow=True, ax=40, ay=-30)
    for i, p in enumerate(points):
        frac = float(p.get("time_frac", 0.0) or 0.0)
        fig.add_trace(go.Scatter(
            x=[float(p["intensity_flop_per_byte"])], y=[float(p["flop_per_s"]) / units.TERA], mode="markers",
            name=str(p["name"]), marker={"size": 10 + 30 * math.sqrt(max(frac, 0.0)), "color": _color(i + 1),
                                         "symbol": p.get("symbol", "circle"), "line": {"width": 1, "color": "#333"}},
            hovertemplate=(f"{p['name']}<br>%{{x:.3g}} FLOP/byte, %{{y:.4g}} TFLOP/s"
                           + (f"<br>{frac:.0%} of compute time" if "time_frac" in p else "") + "<extra></extra>")))
    fig.update_xaxes(title_text="arithmetic intensity (FLOP per byte of GPU memory traffic)", type="log", dtick=1)
    fig.update_yaxes(title_text="TFLOP/s", type="log", dtick=1)
    return _layout(fig, title or f"Roofline of {gpu_label}", 460)


def comm_roofline_figure(*, compute_flop_per_s: float, ceilings: Sequence[Mapping], point: Mapping | None = None,
                         peak_flop_per_s: float | None = None, title: str = "Communication roofline") -> go.Figure:
    """Attainable FLOP/s per GPU vs FLOPs per byte communicated (the gradient all-reduce size), one
    ceiling per interconnect: ``min(compute, intensity x algbw)`` with the all-reduce algorithm bandwidth
    ``algbw_bytes_per_s`` of each ``ceilings`` entry (``label``, ``algbw_bytes_per_s``, optional ``current``).
    Communication that fully overlaps compute can reach the roof; below the slope, a step waits for the network.
    ``point``: ``name``, ``intensity_flop_per_byte``, ``flop_per_s`` (the workload as predicted)."""
    xs_all = [compute_flop_per_s / float(c["algbw_bytes_per_s"]) for c in ceilings
              if float(c["algbw_bytes_per_s"]) > 0]
    if point is not None:
        xs_all.append(float(point["intensity_flop_per_byte"]))
    x0, x1 = _log_span(xs_all or [1.0], pad=10.0)
    fig = go.Figure()
    if peak_flop_per_s is not None:
        fig.add_trace(go.Scatter(x=[x0, x1], y=[peak_flop_per_s / units.TERA] * 2, mode="lines",
                                 name="datasheet peak", line={"color": IDEAL_COLOR, "dash": "dash"},
                                 hoverinfo="skip"))
    fig.add_trace(go.Scatter(x=[x0, x1], y=[compute_flop_per_s / units.TERA] * 2, mode="lines",
                             name="compute alone (no communication)", line={"color": "#333333"},
                             hovertemplate="compute alone: %{y:.4g} TFLOP/s<extra></extra>"))
    for i, c in enumerate(ceilings):
        bw = float(c["algbw_bytes_per_s"])
        if bw <= 0:
            continue
        r = compute_flop_per_s / bw
        xs = [x0, r, x1] if x0 < r < x1 else [x0, x1]
        ys = [min(compute_flop_per_s, x * bw) / units.TERA for x in xs]
        current = bool(c.get("current"))
        fig.add_trace(go.Scatter(
            x=xs, y=ys, mode="lines", name=str(c["label"]),
            line={"color": _color(i), "width": 4 if current else 2, "dash": "solid" if current else "dot"},
            hovertemplate=(f"{c['label']}: all-reduce {bw / units.GB:.3g} GB/s algbw"
                           "<br>%{x:.3g} FLOP/byte -> %{y:.4g} TFLOP/s<extra></extra>")))
    if point is not None:
        fig.add_trace(go.Scatter(x=[float(point["intensity_flop_per_byte"])], y=[float(point["flop_per_s"]) / units.TERA],
                                 mode="markers+text", name=str(point["name"]), text=[str(point["name"])],
                                 textposition="top center",
                                 marker={"size": 16, "symbol": "star", "color": "#000000"},
                                 hovertemplate="%{x:.3g} FLOP/byte, %{y:.4g} TFLOP/s per GPU<extra>predicted</extra>"))
    fig.update_xaxes(title_text="FLOPs per byte communicated (training FLOPs per GPU per step / all-reduce bytes)",
                     type="log", dtick=1)
    fig.update_yaxes(title_text="TFLOP/s per GPU", type="log", dtick=1)
    return _layout(fig, title, 480)


# --- Topology page -----------------------------------------------------------------------------------

def topology_heatmap(names: Sequence[str], labels: Sequence[Sequence[str]], *,
                     title: str = "GPU-to-GPU paths (nvidia-smi topo -m)") -> go.Figure:
    """The GPU x GPU matrix of path classes as a heatmap, best (NVLink, green) to worst (SYS, red).
    ``labels[i][j]`` is what nvidia-smi prints (``X``, ``NV18``, ``PIX``, ``SYS`` ...)."""
    order = [k for k in PATH_COLORS if k != "X"]
    def rank(lbl: str) -> float | None:
        if lbl == "X":
            return None
        kind = "NV" if lbl.startswith("NV") else lbl
        return float(order.index(kind)) if kind in order else None
    z = [[rank(c) for c in row] for row in labels]
    n = len(order)
    # a discrete colour scale: one band per path class
    scale = []
    for i, k in enumerate(order):
        scale += [[i / n, PATH_COLORS[k]], [(i + 1) / n, PATH_COLORS[k]]]
    fig = go.Figure(go.Heatmap(
        z=z, x=list(names), y=list(names), text=[list(r) for r in labels], texttemplate="%{text}",
        colorscale=scale, zmin=-0.5, zmax=n - 0.5, xgap=2, ygap=2,
        colorbar={"tickvals": list(range(n)), "ticktext": order, "title": {"text": "path"}},
        hovertemplate="%{y} -> %{x}: %{text}<extra></extra>"))
    fig.update_yaxes(autorange="reversed")
    size = 140 + 42 * len(names)
    return _layout(fig, title, max(320, size))


def collective_bandwidth_figure(curves: Mapping[str, Sequence[Mapping]], *, title: str = "Expected all-reduce bandwidth",
                                value: str = "busbw_bytes_per_s",
                                measured: Mapping[str, Sequence[Mapping]] | None = None) -> go.Figure:
    """Bus bandwidth (GB/s, nccl-tests definition) vs message size for the rows of
    :func:`gpusim.simulation.collective`, one curve per label (the algorithm and protocol in the hover), and
    optionally measured points (rows with ``bytes`` and ``busbw_bytes_per_s``, e.g. an nccl-tests output) as
    markers on top."""
    fig = go.Figure()
    for i, (label, rows) in enumerate(curves.items()):
        fig.add_trace(go.Scatter(
            x=[float(r["bytes"]) for r in rows], y=[float(r[value]) / units.GB for r in rows],
            mode="lines+markers", name=label, line={"color": _color(i)},
            customdata=[[float(r["time_s"]) / units.US, r.get("algorithm", ""), r.get("protocol", "")] for r in rows],
            hovertemplate=("%{x:.3s}B: %{y:.3g} GB/s<br>%{customdata[0]:.4g} µs, %{customdata[1]} "
                           f"%{{customdata[2]}}<extra>{label}</extra>")))
    for j, (label, rows) in enumerate((measured or {}).items()):
        fig.add_trace(go.Scatter(
            x=[float(r["bytes"]) for r in rows], y=[float(r["busbw_bytes_per_s"]) / units.GB for r in rows],
            mode="markers", name=label, marker={"symbol": "x", "size": 9, "color": _color(len(curves) + j)},
            hovertemplate=f"%{{x:.3s}}B: %{{y:.3g}} GB/s measured<extra>{label}</extra>"))
    fig.update_xaxes(title_text="message size (bytes)", type="log", exponentformat="SI")
    fig.update_yaxes(title_text="bus bandwidth (GB/s)" if value == "busbw_bytes_per_s" else "GB/s", rangemode="tozero")
    return _layout(fig, title, 400)


# --- Plan page ---------------------------------------------------------------------------------------

def pareto_figure(points: Sequence[Mapping], *, time_key: str = "time_s", cost_key: str = "cost_usd",
                  label_key: str = "label", frontier: Sequence[Mapping] | None = None,
                  deadline_s: float | None = None, budget_usd: float | None = None,
                  highlight: Mapping | None = None, title: str = "Time to train vs cost") -> go.Figure:
    """Every evaluated configuration as a point (time vs US dollars), the Pareto frontier as a line, the
    deadline and budget as limits, and the recommended configuration (``highlight``) as a star. Time is in
    minutes, hours or days, whichever the typical configuration takes; both axes are log, ticked at 1, 2 and 5 of
    every decade (1, 2, 5, 10 ...; $1k, $2k, $5k ...), or linear when the values span less than a factor of 3."""
    times = sorted(float(p[time_key]) for p in points if math.isfinite(float(p[time_key] or math.inf)))
    typical = times[len(times) // 2] if times else units.DAY
    div, unit = ((units.MINUTE, "minutes") if typical < 2 * units.HOUR else
                 (units.HOUR, "hours") if typical < 3 * units.DAY else (units.DAY, "days"))
    fig = go.Figure()
    fig.add_trace(go.Scatter(
        x=[_f(float(p[time_key]) / div) for p in points], y=[_f(p[cost_key]) for p in points],
        mode="markers", name="configurations", marker={"color": _color(0), "size": 7, "opacity": 0.55},
        text=[str(p.get(label_key, "")) for p in points],
        hovertemplate=f"%{{text}}<br>%{{x:.3g}} {unit}, $%{{y:,.0f}}<extra></extra>"))
    if frontier:
        fr = sorted(frontier, key=lambda p: float(p[time_key]))
        fig.add_trace(go.Scatter(
            x=[_f(float(p[time_key]) / div) for p in fr], y=[_f(p[cost_key]) for p in fr],
            mode="lines+markers", name="Pareto frontier", line={"color": LIMIT_COLOR, "width": 3},
            text=[str(p.get(label_key, "")) for p in fr],
            hovertemplate=f"%{{text}}<br>%{{x:.3g}} {unit}, $%{{y:,.0f}}<extra>frontier</extra>"))
    if highlight is not None:
        fig.add_trace(go.Scatter(
            x=[_f(float(highlight[time_key]) / div)], y=[_f(highlight[cost_key])], mode="markers",
            name="recommended", text=[str(highlight.get(label_key, ""))],
            marker={"symbol": "star", "size": 18, "color": "#000000", "line": {"width": 1, "color": "#FFFFFF"}},
            hovertemplate=f"%{{text}}<br>%{{x:.3g}} {unit}, $%{{y:,.0f}}<extra>recommended</extra>"))
    xs = [float(p[time_key]) / div for p in points] + ([deadline_s / div] if deadline_s else [])
    ys = [float(p[cost_key]) for p in points] + ([float(budget_usd)] if budget_usd else [])
    x_log = _ticked_axis(fig, "x", xs, fmt=tick, title=f"time to train ({unit})", linear_format=",~g")
    y_log = _ticked_axis(fig, "y", ys, fmt=usd, title="cost (USD)", linear_format="$,~s")
    if deadline_s:
        _vline(fig, deadline_s / div, text="deadline", log=x_log, line_dash="dash", line_color=LIMIT_COLOR)
    if budget_usd:
        _hline(fig, budget_usd, text="budget", log=y_log, line_dash="dash", line_color=LIMIT_COLOR)
    return _layout(fig, title, 460)


def _ticked_axis(fig: go.Figure, axis: str, values: Sequence[float], *, fmt, title: str,
                 linear_format: str) -> bool:
    """A log axis ticked at 1, 2, 5 x every decade (:func:`log_ticks`, labels written by ``fmt``) over the values,
    its range the values' with a margin, or a linear axis (``linear_format``) when the values span less than
    a factor of 3, where a log axis would show one label or none. Returns whether the axis is log."""
    vals = [float(v) for v in values if v is not None and math.isfinite(float(v)) and float(v) > 0]
    update = fig.update_xaxes if axis == "x" else fig.update_yaxes
    if not vals or max(vals) / min(vals) < 3.0:
        update(title_text=title, type="linear", tickformat=linear_format, rangemode="tozero")
        return False
    update(title_text=title, **log_axis(vals, fmt=fmt))  # labels where the data are, and one beyond each end
    return True


def sensitivity_figure(rows: Sequence[Mapping], *, title: str = "What moves the answer most") -> go.Figure:
    """A tornado chart: for each assumption (rows of ``PlanResult.sensitivity``), the change of the cost and of
    the time to train (percent) at the low (solid) and the high (hatched) end of its range, largest swing on top."""
    rows = sorted(rows, key=lambda r: float(r.get("swing_frac", 0.0)))
    names = [f"{r['assumption']} ({r['range']})" for r in rows]
    fig = go.Figure()
    for key, label, color in (("cost", "cost", _color(1)), ("time", "time to train", _color(0))):
        # the low end solid, the high end hatched in the same colour: two swatches a legend tells apart
        for end, marker in (("low", {"color": color}),
                            ("high", {"color": "#FFFFFF", "line": {"color": color, "width": 1.5},
                                      "pattern": {"shape": "/", "fgcolor": color, "solidity": 0.45}})):
            fig.add_trace(go.Bar(
                x=[100.0 * float(r[f"{key}_{end}_frac"]) for r in rows], y=names, orientation="h",
                name=f"{label}, {end} end", marker=marker,
                hovertemplate=f"%{{y}}<br>{label}: %{{x:+.1f}}%<extra>{end} end</extra>"))
    fig.update_xaxes(title_text="change (%)", zeroline=True, zerolinewidth=2)
    return _layout(fig, title, max(220, 80 + 45 * len(rows)), barmode="group", per_row=2)


# --- Calibration page --------------------------------------------------------------------------------

#: colour of a slow point-to-point pair (the limit colour) and of the others
P2P_COLOR = "#4C78A8"


def _rate_scale(values: Sequence[float], kind: str) -> tuple[float, str]:
    """The divisor and unit for rates on an axis: TFLOP/s or GFLOP/s, GB/s or MB/s, by the largest value."""
    top = max((abs(float(v)) for v in values if v is not None and math.isfinite(float(v))), default=0.0)
    if kind == "flop":
        return (units.TERA, "TFLOP/s") if top >= units.TERA else (units.GIGA, "GFLOP/s")
    return (units.GB, "GB/s") if top >= units.GB else (units.MB, "MB/s")


def _byte_ticks(fig: go.Figure, xs: Sequence[float], most: int = 8) -> None:
    """Ticks of a log bytes axis at the measured sizes (at most ``most`` of them), written 4 KiB / 1 GiB."""
    vals = sorted({float(x) for x in xs if x and x > 0})
    if not vals:
        return
    step = max(1, math.ceil(len(vals) / most))
    vals = vals[::step]
    fig.update_xaxes(tickvals=vals, ticktext=[units.format_bytes(v) for v in vals])


def measured_vs_fitted_figure(curves: Mapping[str, Mapping[str, Sequence]], *, x_title: str, y_title: str,
                              title: str = "Measured vs fitted", log_x: bool = True, log_y: bool = False,
                              y_scale: float = 1.0, unit: str = "", bytes_x: bool = False) -> go.Figure:
    """For each benchmark label: ``{"x": [...], "measured": [...], "fitted": [...]}`` (optionally ``"used"``:
    whether each point was fitted, and ``"text"``: a hover label per point) as markers (measured) and a line
    (fitted) of the same colour; a point the fit left out is drawn hollow. Values are divided by
    ``y_scale`` (``unit`` names the result in hovers). One legend entry per label toggles both traces.
    ``bytes_x``: the x values are sizes in bytes, ticked at the measured sizes (4 KiB, 1 GiB)."""
    fig = go.Figure()
    for i, (label, c) in enumerate(curves.items()):
        xs = [float(x) for x in c["x"]]
        meas = [_f(float(v) / y_scale) if v is not None else None for v in c["measured"]]
        fitted = [_f(float(v) / y_scale) if v is not None else None for v in c["fitted"]]
        used = [bool(u) for u in c.get("used", [True] * len(xs))]
        text = [str(t) for t in c.get("text", [label] * len(xs))]
        color = _color(i)
        fig.add_trace(go.Scatter(
            x=xs, y=meas, mode="markers", name=str(label), legendgroup=str(label),
            marker={"color": [color if u else "rgba(0,0,0,0)" for u in used], "size": 9,
                    "line": {"color": color, "width": 1.5}, "symbol": "circle"},
            text=text, customdata=[["fitted" if u else "not fitted"] for u in used],
            hovertemplate=f"%{{text}}<br>measured %{{y:.4g}} {unit} (%{{customdata[0]}})<extra>{label}</extra>"))
        fig.add_trace(go.Scatter(
            x=xs, y=fitted, mode="lines", name=f"{label} fitted", legendgroup=str(label), showlegend=False,
            line={"color": color, "width": 2}, text=text,
            hovertemplate=f"%{{text}}<br>fitted %{{y:.4g}} {unit}<extra>{label}</extra>"))
    fig.update_xaxes(title_text=x_title, type="log" if log_x else "linear", exponentformat="SI", tickformat="~s")
    all_x = [float(x) for c in curves.values() for x in c["x"]]
    if bytes_x:
        _byte_ticks(fig, all_x)
    elif log_x and all_x:  # explicit ticks: plotly labels the 2s and 5s between decades too, and they overlap
        fig.update_xaxes(**log_axis(all_x, fmt=si, most=7))
    fig.update_yaxes(title_text=y_title, type="log" if log_y else "linear",
                     **({} if log_y else {"rangemode": "tozero"}))
    if log_y:
        ys = [v for tr in fig.data for v in tr.y if v is not None and v > 0]
        if ys:
            fig.update_yaxes(**log_axis(ys, most=7))
    return _layout(fig, title, 380, per_row=4)


def _by_group(rows: Sequence[Mapping], x_key: str = "x", key=lambda r: str(r["group"])) -> dict[str, list[Mapping]]:
    out: dict[str, list[Mapping]] = {}
    for r in rows:
        out.setdefault(key(r), []).append(r)
    return {k: sorted(v, key=lambda r: float(r[x_key])) for k, v in out.items()}


def _err_text(r: Mapping) -> str:
    e = r.get("error_frac")
    return f"{r['label']} (fit {100 * float(e):+.0f}%)" if e is not None else str(r["label"])


#: the calibration figures' titles are short (two figures share a row); a caption says dots = measured
def gemm_fit_figure(rows: Sequence[Mapping], *, title: str = "GEMM throughput vs size") -> go.Figure:
    """Matrix-multiply throughput vs the FLOPs of one call, one colour per precision: the calibration
    report's ``gemm`` rows (``group`` = precision, ``x`` = FLOPs, ``measured_rate`` / ``fitted_rate`` in
    FLOP/s). The fitted curve is ``flop / (flop / ceiling + kernel time)``: it rises to the ceiling."""
    scale, unit = _rate_scale([r["measured_rate"] for r in rows] + [r["fitted_rate"] for r in rows], "flop")
    curves = {p: {"x": [r["x"] for r in g], "measured": [r["measured_rate"] for r in g],
                  "fitted": [r["fitted_rate"] for r in g], "used": [r.get("used", True) for r in g],
                  "text": [_err_text(r) for r in g]} for p, g in _by_group(rows).items()}
    return measured_vs_fitted_figure(curves, x_title="FLOPs per matrix multiply", y_title=unit, title=title,
                                     y_scale=scale, unit=unit)


def memory_fit_figure(rows: Sequence[Mapping], *, title: str = "Memory copy bandwidth vs size") -> go.Figure:
    """Copy bandwidth (traffic bytes per second) vs copy size per kind (device copy, host to device pinned
    and pageable): the report's ``memory`` rows, log-log (device and host copies are decades apart). The fit
    is one bandwidth per kind over the plateau; smaller copies (hollow) were not fitted."""
    scale, unit = _rate_scale([r["measured_rate"] for r in rows] + [r["fitted_rate"] for r in rows], "bytes")
    curves = {k: {"x": [r["x"] for r in g], "measured": [r["measured_rate"] for r in g],
                  "fitted": [r["fitted_rate"] for r in g], "used": [r.get("used", True) for r in g],
                  "text": [_err_text(r) for r in g]} for k, g in _by_group(rows).items()}
    return measured_vs_fitted_figure(curves, x_title="copy size", y_title=f"bandwidth ({unit})", title=title,
                                     y_scale=scale, unit=unit, log_y=True, bytes_x=True)


def collective_fit_figure(rows: Sequence[Mapping], *, title: str = "Collectives: bus bandwidth vs message size"
                          ) -> go.Figure:
    """Bus bandwidth (nccl-tests' definition) vs message size for each collective and group of the
    calibration report's ``collective`` rows (``group`` like ``all_reduce intra-node n=8``): measured
    points and the model's curve with the fitted hop latency and bus bandwidth (log-log: small messages
    are latency-bound)."""
    scale, unit = _rate_scale([r["measured_rate"] for r in rows] + [r["fitted_rate"] for r in rows], "bytes")
    curves = {k: {"x": [r["x"] for r in g], "measured": [r["measured_rate"] for r in g],
                  "fitted": [r["fitted_rate"] for r in g], "used": [r.get("used", True) for r in g],
                  "text": [_err_text(r) for r in g]} for k, g in _by_group(rows).items()}
    return measured_vs_fitted_figure(curves, x_title="message size", y_title=f"bus bandwidth ({unit})",
                                     title=title, y_scale=scale, unit=unit, log_y=True, bytes_x=True)


def p2p_figure(pairs: Sequence[Mapping], *, title: str = "Point-to-point bandwidth per pair") -> go.Figure:
    """One bar per sending pair (``src -> dst``, its ``nvidia-smi`` path class when known) with the
    bandwidth at the largest message; pairs flagged ``slow`` (well below the median pair) in red."""
    scale, unit = _rate_scale([p["bytes_per_s"] for p in pairs], "bytes")
    names = [f"{p['src']} → {p['dst']}" + (f" ({p['path']})" if p.get("path") else "")
             + (f" @{p['host']}" if len({q.get('host') for q in pairs}) > 1 else "") for p in pairs]
    bw = [float(p["bytes_per_s"]) / scale for p in pairs]
    fig = go.Figure(go.Bar(
        x=bw, y=names, orientation="h", marker_color=[LIMIT_COLOR if p.get("slow") else P2P_COLOR for p in pairs],
        text=[f"{b:.3g} {unit}" + (" SLOW" if p.get("slow") else "") for b, p in zip(bw, pairs)],
        textposition="auto", showlegend=False,
        customdata=[[units.format_bytes(float(p["bytes"])), units.format_duration(float(p["small_time_s"])),
                     units.format_bytes(float(p["small_bytes"]))] for p in pairs],
        hovertemplate=(f"%{{y}}: %{{x:.4g}} {unit} at %{{customdata[0]}}<br>%{{customdata[1]}} for "
                       "%{customdata[2]}<extra></extra>")))
    if len(bw) >= 2:
        med = statistics.median(bw)
        _vline(fig, med, text=f"median {med:.3g} {unit}", anchor="right", line_dash="dash", line_color=IDEAL_COLOR)
    fig.update_xaxes(title_text=f"bandwidth, one direction ({unit})", rangemode="tozero")
    fig.update_yaxes(autorange="reversed")
    return _layout(fig, title, max(200, 90 + 34 * len(names)), showlegend=False)


def held_out_figure(records: Sequence[Mapping], *, title: str = "Held-out DDP steps: measured vs predicted"
                    ) -> go.Figure:
    """Grouped bars per held-out multi-rank DDP step (ms): measured median with its p10-p90 range as an
    error bar, the prediction, and the prediction anchored on the measured one-rank step when there is one.
    ``records``: ``Calibration.held_out['records']`` (``label`` names a bar; default: workload, batch, ranks)."""
    labels = [str(r.get("label") or f"{r['workload']} b{r['per_rank_batch']} ×{r['n_ranks']}") for r in records]
    meas = [float(r["measured_s"]) / units.MS for r in records]
    fig = go.Figure()
    fig.add_trace(go.Bar(
        x=labels, y=meas, name="measured (median, p10-p90)", marker_color=IDEAL_COLOR,
        error_y={"type": "data", "symmetric": False,
                 "array": [max(float(r["measured_p90_s"]) / units.MS - m, 0.0) for r, m in zip(records, meas)],
                 "arrayminus": [max(m - float(r["measured_p10_s"]) / units.MS, 0.0) for r, m in zip(records, meas)]},
        hovertemplate="%{x}: measured %{y:.4g} ms<extra></extra>"))
    fig.add_trace(go.Bar(
        x=labels, y=[float(r["predicted_s"]) / units.MS for r in records], name="predicted", marker_color=_color(0),
        customdata=[[100.0 * float(r["error_frac"])] for r in records],
        hovertemplate="%{x}: predicted %{y:.4g} ms (%{customdata[0]:+.0f}%)<extra></extra>"))
    if any(r.get("anchored_s") for r in records):
        fig.add_trace(go.Bar(
            x=labels, y=[_f(float(r["anchored_s"]) / units.MS) if r.get("anchored_s") else None for r in records],
            name="predicted from the measured 1-rank step", marker_color=_color(5),
            hovertemplate="%{x}: anchored %{y:.4g} ms<extra></extra>"))
    fig.update_xaxes(type="category")
    fig.update_yaxes(title_text="ms per step", rangemode="tozero")
    return _layout(fig, title, 380, barmode="group")


# --- Parallelism page --------------------------------------------------------------------------------

def layout_heatmap_figure(cells: Sequence[Mapping], *, value: str = "tokens_per_s_per_gpu",
                          label: str = "tokens/s per GPU", title: str = "Throughput over tp x pp",
                          best: int | None = None) -> go.Figure:
    """A tp x pp heatmap of ``value``: cells of :func:`gpusim.parallelism.layout_grid` (one micro-batch each) or
    of the layout search folded per tp x pp (``gpusim.app_pages.best_layouts.cells``: a cell's ``layout`` names the
    best layout there, shown in the hover); infeasible cells are blank with their reason in the hover and an x,
    cells that do not fit are marked; ``best`` (an index of ``cells``) gets a star."""
    tps = sorted({int(c["tp"]) for c in cells})
    pps = sorted({int(c["pp"]) for c in cells})
    z = [[None] * len(tps) for _ in pps]
    text = [[""] * len(tps) for _ in pps]
    hover = [[""] * len(tps) for _ in pps]
    for i, c in enumerate(cells):
        r, k = pps.index(int(c["pp"])), tps.index(int(c["tp"]))
        if c.get("feasible") and c.get(value) is not None:
            v = float(c[value])
            z[r][k] = v if c.get("fits_in_memory") else None
            mark = "★ " if best is not None and i == best else ""
            text[r][k] = (f"{mark}{v:,.4g}" if c.get("fits_in_memory") else "✗ memory")
        else:
            text[r][k] = "✗"
        hover[r][k] = ((f"{c['layout']}<br>" if c.get("layout") else
                        f"tp {c['tp']}, pp {c['pp']}" + (f", micro-batch {c['micro_batch']}" if c.get("micro_batch")
                                                         else "") + "<br>")
                       + (f"{label}: {float(c[value]):,.4g}<br>" if c.get(value) is not None else "")
                       + (c.get("reason") or "fits"))
    fig = go.Figure(go.Heatmap(
        z=z, x=[str(t) for t in tps], y=[str(p) for p in pps], text=text, texttemplate="%{text}",
        customdata=hover, hovertemplate="%{customdata}<extra></extra>", colorscale="Viridis", xgap=2, ygap=2,
        colorbar={"title": {"text": label}}))
    fig.update_xaxes(title_text="tensor-parallel degree tp", type="category")
    fig.update_yaxes(title_text="pipeline stages pp", type="category")
    return _layout(fig, title, 120 + 48 * len(pps))


SCHEDULE_COLORS = {"F": "#4C78A8", "B": "#72B7B2"}


def pipeline_schedule_figure(schedule: Mapping, *, title: str = "Pipeline schedule of one step",
                             bubble_frac: float | None = None) -> go.Figure:
    """Stages x time: one bar per forward (F) and backward (B) pass of a micro-batch (and chunk), from
    :func:`gpusim.parallelism.pipeline_schedule`; the gaps are the bubble. The title gives the bubble's share:
    ``bubble_frac`` when given (the model's own figure, ``pp_bubble_s / step_s``, the one the advice and the
    layout table quote), else the idle share of the drawn schedule. Time in s or ms by the step (:func:`time_unit`)."""
    fig = go.Figure()
    div, unit, _ = time_unit(schedule["step_s"])
    scale = 1.0 / div
    for kind, name in (("F", "forward"), ("B", "backward")):
        bl = [b for b in schedule["blocks"] if b["kind"] == kind]
        fig.add_trace(go.Bar(
            x=[(b["end_s"] - b["start_s"]) * scale for b in bl], base=[b["start_s"] * scale for b in bl],
            y=[f"stage {b['stage']}" for b in bl], orientation="h", name=name, marker_color=SCHEDULE_COLORS[kind],
            marker_line={"width": 0.5, "color": "#FFFFFF"},
            text=[str(b["micro_batch"]) if schedule["n_micro"] * schedule["vp"] <= 32 else "" for b in bl],
            textposition="inside", insidetextanchor="middle",
            customdata=[[b["micro_batch"], b["chunk"], b["end_s"] * scale] for b in bl],
            hovertemplate=f"{name} of micro-batch %{{customdata[0]}}, chunk %{{customdata[1]}}<br>"
                          f"%{{base:,.4g}}-%{{customdata[2]:,.4g}} {unit}<extra></extra>"))
    fig.update_xaxes(title_text=f"time in the step ({unit})", rangemode="tozero", tickformat=",~g")
    fig.update_yaxes(autorange="reversed", type="category")
    bubble = (1 - schedule["busy_frac"]) if bubble_frac is None else float(bubble_frac)
    what = "" if bubble_frac is None else " of the step"
    return _layout(fig, f"{title} (bubble {bubble:.0%}{what})", 120 + 34 * schedule["pp"], barmode="overlay")
