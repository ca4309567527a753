"""Step: one scenario, one model call: where the step goes, how fast, how well it scales, does it fit, why."""

import math

import streamlit as st

from gpusim import units, viz
from gpusim.app_pages import shell
from gpusim.app_pages.analysis import flat_dict
from gpusim.errors import GpusimError
from gpusim.simulation import resolve_workload, simulate

ctx = shell.require_scenario()
st.markdown(f"#### {shell.scenario_title(ctx)}")

with shell.guard("cannot predict this scenario"):
    res = simulate(ctx.scenario, db=ctx.db, params=ctx.params)  # the page's one model call (the what-ifs ride along in it)
try:
    iv = shell.interval(ctx)  # None without a calibration; cached per scenario
except GpusimError as e:  # the prediction stands; only its interval is missing
    iv = {"applies": False, "note": f"no interval for this scenario ({shell.ui_text(str(e))})"}
band = iv if iv is not None and iv.get("applies", True) else None

_ICON = {"high": ":material/priority_high:", "medium": ":material/lightbulb:", "info": ":material/info:"}
bn = res.bottleneck
bn_text = {"compute": "the GPUs' arithmetic (compute): this is where you want to be",
           "cpu-dispatch": "Python/CPU dispatch of kernels: the GPU waits for the CPU (batch too small?)",
           "communication": "gradient communication between GPUs",
           "data-loading": "the data loader: GPUs wait for batches",
           "optimizer": "the optimizer step",
           "stragglers": "waiting for the slowest GPU",
           "overhead": "fixed per-step overhead",
           "memory": "memory: it does not fit on the GPU"}.get(bn, bn)
(st.success if bn == "compute" else st.error if bn == "memory" else st.warning)(
    f"**Bottleneck: {bn}** — {bn_text}", icon=":material/troubleshoot:")

left, right = st.columns([2.3, 1])
with left:
    shell.chart(viz.breakdown_figure(res.breakdown_s, single_gpu_step_s=res.single_gpu_step_s if res.n_gpus > 1 else None,
                                     interval_s=band["step_s"] if band else None,
                                     interval_level=band["level"] if band else 0.9), key="fig_breakdown")
    d = res.detail
    st.caption(f"Communication {units.format_duration(d['comm_total_s'])} per step in total, "
               f"{units.format_duration(d['comm_hidden_s'])} of it hidden under the backward pass"
               + (f" (which it slows by {units.format_duration(d['comm_interference_s'])}, counted as exposed)"
                  if d["comm_interference_s"] > 0 else "")
               + f"; GPU kernels {units.format_duration(d['gpu_busy_s'])}, CPU dispatch "
               f"{units.format_duration(d['cpu_dispatch_s'])}.")
with right:
    c1, c2 = st.columns(2)
    step_band = tput_band = ""
    if band:
        lo, hi = band["step_s"]
        step_band = f"; {band['level']:.0%} interval {units.format_duration(lo)} to {units.format_duration(hi)}"
        lo, hi = band["throughput_samples_per_s"]
        tput_band = f"; {band['level']:.0%} interval {shell.fmt_count(lo)} to {shell.fmt_count(hi)}"
    c1.metric("Step time", units.format_duration(res.step_s),
              help="one optimizer step (all accumulation micro-batches)" + step_band)
    tput = shell.fmt_count(res.throughput_samples_per_s)
    c2.metric("Samples/s", tput, help=f"{res.throughput_per_gpu_samples_per_s:,.4g} per GPU"
              + (f"; {shell.fmt_count(res.tokens_per_s)} tokens/s" if res.tokens_per_s else "")
              + tput_band)
    if band:
        lo, hi = band["throughput_samples_per_s"]
        slo, shi = band["step_s"]
        st.caption(f"**{band['level']:.0%} interval** from the calibration's parameter uncertainty: "
                   f"{shell.fmt_count(lo)} to {shell.fmt_count(hi)} samples/s, step "
                   f"{units.format_duration(slo)} to {units.format_duration(shi)}.")
    elif iv is not None:
        st.caption(f"Calibration: {iv.get('note') or 'no interval for this hardware'}.")
    # how far such predictions were from published runs
    shell.result_track_record_caption(ctx, res, resolve_workload(ctx.scenario), res.throughput_samples_per_s,
                                      "samples/s")
    # [stop 55] an LLM layout's memory against the published peaks ([stop 56] and where to find one that fits)
    shell.memory_record_caption(res, ctx.params, layouts="a layout with more free memory (the Parallelism page names "
                                                         "the fastest whose top of that range fits)")
    # n/a (nan) when the one-GPU reference does not fit in one GPU: there is nothing to compare with
    no_ref = not math.isfinite(res.speedup)
    c1.metric("Speedup vs 1 GPU", "n/a" if no_ref else f"{res.speedup:.3g}x", help=f"ideal: {res.n_gpus}x" + (
        "; n/a: the one-GPU reference does not fit in one GPU's memory" if no_ref else ""))
    c2.metric("Scaling efficiency", "n/a" if no_ref else f"{res.scaling_efficiency_frac:.0%}",
              help="T1 / (N x TN) at the same per-GPU batch")
    c1.metric("MFU", f"{res.mfu_frac:.1%}", help="model FLOPs / (step time x GPUs x dense peak)")
    c2.metric("GPU busy", f"{res.gpu_util_frac:.0%}", help="estimated utilisation: kernel time / step time; "
                                                          "aim above 80%")
    if res.tokens_per_s:
        st.caption(f"{shell.fmt_count(res.tokens_per_s)} tokens/s · global batch {res.global_batch}")
    else:
        st.caption(f"{res.throughput_per_gpu_samples_per_s:,.4g} samples/s per GPU · global batch {res.global_batch}")

left, right = st.columns([2.3, 1])
with left:
    shell.chart(viz.memory_figure(res.memory_breakdown_bytes, res.memory_capacity_bytes), key="fig_memory")
with right:
    st.metric(f"Memory per GPU (of {units.format_bytes(res.memory_capacity_bytes)})",
              units.format_bytes(res.memory_per_gpu_bytes))
    if res.fits_in_memory:
        st.metric("Largest per-GPU batch that fits", f"{res.max_micro_batch:,}")
    else:
        st.error(f"Does not fit: needs {units.format_bytes(res.memory_per_gpu_bytes)} per GPU, "
                 f"{units.format_bytes(res.memory_capacity_bytes)} available.")

st.markdown("##### What to change")
recs = list(res.recommendations)
with_gain = [r for r in recs if r.get("gain_frac") is not None]
if with_gain:
    left, right = st.columns([1, 1.4])
    with left:
        shell.chart(viz.gains_figure(recs), key="fig_gains")
    box = right
else:
    box = st.container()
with box:
    if not recs:
        st.info("Nothing to change: the model finds no bottleneck worth fixing.")
    for r in recs:
        gain = f" **({r['gain_frac']:+.0%})**" if r.get("gain_frac") is not None else ""
        st.markdown(f"{_ICON.get(r['severity'], '')} `{r['id']}`{gain} {shell.ui_text(r['message'])}")

st.markdown("##### Measured it already?")
measured = shell.number_input(st, "Measured throughput of this multi-GPU job (samples/s, all GPUs)", 1e-6, 1e9, None,
                              key="measured", bind=shell.BIND, placeholder="e.g. from your training log",
                              help="gpusim sizes what would explain the difference from its prediction, each candidate "
                                   "solved with the model (a throttled GPU, slow gradient exchange, a slow loader)")
if measured:
    from gpusim.measurement import explain_measurement

    with shell.guard("cannot explain this measurement"):
        gap = explain_measurement(ctx.scenario, res, float(measured), db=ctx.db, params=ctx.params)
    for line in gap["explanation"]:
        st.markdown(f"- {shell.ui_text(line)}")

if res.assumptions:
    st.caption("Assumed: " + shell.ui_text("; ".join(res.assumptions)))
sc = res.scenario
st.caption(f"Resolved: {sc['gpu_resolved']}, node {sc['node_resolved'] or '-'}, intra-node "
           f"{sc['intra_link_resolved'] or '-'} ({sc['intra_topology_resolved']}, path {res.intra_path or '-'}, "
           f"peer-to-peer {'on' if sc['p2p_resolved'] else 'off'})"
           + (f", network {sc['inter_link_resolved']} x {sc['nics_per_node_resolved']} per node"
              if sc.get("inter_link_resolved") else ""))
result = res.to_dict()
shell.downloads("gpusim-step", json_obj=result, rows=[flat_dict(result)])
