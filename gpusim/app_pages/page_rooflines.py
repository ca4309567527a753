"""Rooflines: the GPU roofline with the workload's layer groups on it, and the communication roofline
(attainable FLOP/s vs FLOPs per byte communicated, one ceiling per interconnect)."""

import streamlit as st

from gpusim import units, viz
from gpusim.app_pages import analysis as A
from gpusim.app_pages import shell

ctx = shell.require_scenario()
scn = ctx.scenario
db = ctx.db
st.markdown(f"#### Rooflines · {shell.scenario_title(ctx)}")

gpu_id = ctx.gpu_id
fabrics_all = [f for f in A.FABRICS if f != "auto"]
nets_all = A.network_ids(db)
c1, c2 = st.columns([1.6, 1])
fabrics = c1.multiselect("Interconnects inside a node", shell.offer("roof_fabrics", fabrics_all), default=A.available_fabrics(db, gpu_id),
                         key="roof_fabrics", bind=shell.BIND)
networks = c2.multiselect("Networks between nodes", shell.offer("roof_nets", nets_all),
                          default=[n for n in ("ib-ndr-400", "roce-100g", "eth-25g") if n in nets_all],
                          key="roof_nets", bind=shell.BIND)
fabrics, networks, measured_note = A.drop_measured_variants(fabrics, networks, ctx.params)
if measured_note:
    st.caption(measured_note)


@st.cache_data(show_spinner=False, max_entries=64)
def _roof(key: str, _scn, _params, _db, fabrics: tuple, networks: tuple):
    return A.rooflines(_scn, db=_db, params=_params, fabrics=fabrics, networks=networks)


with shell.guard("cannot compute the rooflines"):
    R = _roof(ctx.cache_key, scn, ctx.params, db, tuple(fabrics), tuple(networks))

st.markdown("##### The GPU: is the workload limited by arithmetic or by memory bandwidth?")
left, right = st.columns([2.2, 1])
with left:
    shell.chart(viz.gpu_roofline_figure(
        peak_flop_per_s=R["peak_flop_per_s"], achievable_flop_per_s=R["achievable_flop_per_s"],
        mem_bytes_per_s=R["mem_bytes_per_s"], achievable_mem_bytes_per_s=R["achievable_mem_bytes_per_s"],
        points=R["points"], gpu_label=f"{gpu_id} ({R['precision']}, batch {R['per_gpu_batch']})"), key="fig_roofline")
with right:
    ridge = R["peak_flop_per_s"] / R["mem_bytes_per_s"]
    st.metric("Dense peak", units.format_flop_rate(R["peak_flop_per_s"]),
              delta=f"achievable {units.format_flop_rate(R['achievable_flop_per_s'])}", delta_color="off", delta_arrow="off")
    st.metric("Memory bandwidth", units.format_rate_bytes(R["mem_bytes_per_s"]))
    st.metric("Ridge point", f"{ridge:.3g} FLOP/byte", help="below it a kernel is memory-bound")
    step_pt = R["points"][-1]
    st.metric("Whole step", units.format_flop_rate(step_pt["flop_per_s"]),
              delta=f"{step_pt['flop_per_s'] / R['peak_flop_per_s']:.1%} of peak (MFU)", delta_color="off", delta_arrow="off")
    mem_only = R["memory_only_groups"]
    if mem_only:
        share = sum(g["time_frac"] for g in mem_only)
        st.caption(f"Kernels without matrix FLOPs ({', '.join(g['kind'] for g in mem_only)}) sit at zero intensity, "
                   f"off the chart: {share:.0%} of the GPU's roofline time, bound by memory bandwidth.")
st.caption("Each point is a group of layers for one micro-batch (marker size: its share of the compute time). "
           "The whole step also pays for what the roofline does not see: launches, communication, data, sync.")

st.markdown("##### The interconnect: can gradient synchronisation keep up with the arithmetic?")
comm = R["comm"]
left, right = st.columns([2.2, 1])
with left:
    point = None
    if comm["n_gpus"] > 1:
        point = {"name": "this workload", "intensity_flop_per_byte": comm["intensity_flop_per_byte"],
                 "flop_per_s": comm["achieved_flop_per_s"]}
    shell.chart(viz.comm_roofline_figure(compute_flop_per_s=comm["compute_flop_per_s"], ceilings=comm["ceilings"],
                                         point=point, peak_flop_per_s=R["peak_flop_per_s"]), key="fig_comm_roofline")
with right:
    st.metric("Gradient per step", units.format_bytes(comm["grad_bytes"]))
    st.metric("FLOPs per byte communicated", shell.fmt_count(comm["intensity_flop_per_byte"]),
              help="training FLOPs per GPU per optimizer step / gradient bytes all-reduced")
    st.metric("Compute alone", units.format_flop_rate(comm["compute_flop_per_s"]),
              help="this workload's FLOP/s per GPU without any communication")
    if comm["n_gpus"] > 1:
        st.metric("Predicted", units.format_flop_rate(comm["achieved_flop_per_s"]), help="per GPU, whole step")
    else:
        st.info("One GPU: nothing to communicate. Set more GPUs in the sidebar to place the workload here.")
st.caption("A ceiling is min(compute alone, FLOPs per byte x all-reduce algorithm bandwidth) for the scenario's "
           "gradient size. Right of where an interconnect's slope meets the roof, its communication can hide under "
           "compute; left of it, steps wait for the interconnect. Larger per-GPU batches or accumulation move the "
           "workload right; FSDP/ZeRO-3 moves about 1.5x the bytes.")
if comm["skipped"]:
    st.caption("Not shown: " + "; ".join(comm["skipped"]))
rows = [{"chart": "gpu", **{k: v for k, v in p.items() if k != "symbol"}} for p in R["points"]] + \
       [{"chart": "comm", **c} for c in comm["ceilings"]]
shell.downloads("gpusim-rooflines", json_obj=R, rows=rows)
