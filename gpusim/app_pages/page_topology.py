"""Topology: paste `nvidia-smi topo -m`; see the GPU-to-GPU matrix, the slow paths, and the all-reduce
bandwidth gpusim expects from it."""

import streamlit as st

from gpusim import units, viz
from gpusim.app_pages import analysis as A
from gpusim.app_pages import shell
from gpusim.topology import PATH_MEANING, parse_topo

#: an illustrative matrix (a dual-socket workstation with two NVLink-bridged pairs of cards), in the
#: format nvidia-smi prints; written for this page
EXAMPLE = """\
\tGPU0\tGPU1\tGPU2\tGPU3\tNIC0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID
GPU0\t X \tNV4\tSYS\tSYS\tNODE\t0-15,32-47\t0\t\tN/A
GPU1\tNV4\t X \tSYS\tSYS\tNODE\t0-15,32-47\t0\t\tN/A
GPU2\tSYS\tSYS\t X \tNV4\tSYS\t16-31,48-63\t1\t\tN/A
GPU3\tSYS\tSYS\tNV4\t X \tSYS\t16-31,48-63\t1\t\tN/A
NIC0\tNODE\tNODE\tSYS\tSYS\t X

Legend:

  X    = Self
  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)
  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node
  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)
  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)
  PIX  = Connection traversing at most a single PCIe bridge
  NV#  = Connection traversing a bonded set of # NVLinks

NIC Legend:

  NIC0: mlx5_0
"""

ctx = shell.context()
db = ctx.db
st.markdown("#### Topology: what `nvidia-smi topo -m` says about your machine")


def _load_example():
    st.session_state["topo_text"] = EXAMPLE


def _use_in_scenario(fabric: str, n: int):
    # callbacks run before the script, so the sidebar's widgets can still be changed here
    st.session_state["fabric"] = fabric
    st.session_state["gpus"] = n
    st.session_state["nodes"] = 1


left, right = st.columns([1.3, 1])
with left:
    text = st.text_area("Output of `nvidia-smi topo -m`", key="topo_text", height=230,
                        placeholder="Paste the matrix here (tabs or spaces are both fine)")
    st.button("Load an example", on_click=_load_example, icon=":material/content_paste:")
with right:
    p2p_text = st.text_area("Optional: output of `nvidia-smi topo -p2p r`", key="topo_p2p", height=120)
    st.caption("Run them on the machine. The GPU model comes from the sidebar "
               f"(now **{ctx.gpu_id}**): the matrix tells how the GPUs are wired, the GPU how fast each path is.")

if not text or not text.strip():
    st.info("Paste a matrix, or load the example, to see the paths, the warnings and the expected all-reduce "
            "bandwidth.", icon=":material/info:")
    st.stop()

with shell.guard("cannot read this matrix"):
    topo = parse_topo(text, p2p_text or None)
summary = topo.summary()
fabric = A.topology_fabric(topo)

left, right = st.columns([1, 1.2])
with left:
    names, labels = A.topology_matrix(topo)
    shell.chart(viz.topology_heatmap(names, labels), key="fig_topo")
with right:
    warnings = topo.warnings()
    if warnings:
        for w in warnings:
            st.warning(w, icon=":material/warning:")
    else:
        st.success("No slow paths between the GPUs.", icon=":material/check_circle:")
    c = st.columns([0.5, 1.5, 1])
    c[0].metric("GPUs", summary["n_gpus"])
    c[1].metric("Fabric", A.FABRIC_SHORT.get(fabric, fabric), help=f"nvidia-smi's matrix read as "
                f"'{summary['intra_topology']}'")
    c[2].metric("Worst hop, best ring", summary["best_ring_worst_path"] or "-",
                help=PATH_MEANING.get((summary["best_ring_worst_path"] or "").rstrip("0123456789"), ""))
    st.caption("Best ring: " + " → ".join(f"GPU{i}" for i in summary["best_ring_order"])
               + (f" · NUMA nodes {', '.join(summary['numa_nodes'])}" if summary["numa_nodes"] else "")
               + (f" · {summary['n_nics']} NIC(s)" if summary["n_nics"] else ""))
    if topo.n_gpus > 1:
        st.button(f"Use this fabric ({fabric}, {topo.n_gpus} GPUs) in the scenario", on_click=_use_in_scenario,
                  args=(fabric, topo.n_gpus), icon=":material/input:")

if topo.n_gpus > 1:
    with shell.guard("cannot estimate the all-reduce"):
        curves, notes = A.topology_allreduce(topo, ctx.gpu_id, db=db, params=ctx.params)
    st.markdown(f"##### Expected all-reduce over all {topo.n_gpus} GPUs ({ctx.gpu_id})")
    left, right = st.columns([2.2, 1])
    with left:
        shell.chart(viz.collective_bandwidth_figure(curves), key="fig_topo_allreduce")
    with right:
        mine = next(iter(curves.values()))
        big = mine[-1]
        st.metric(f"Bus bandwidth at {units.format_bytes(big['bytes'])}", units.format_rate_bytes(big["busbw_bytes_per_s"]),
                  help="nccl-tests' busbw: algbw x 2(n-1)/n for all-reduce; compare with all_reduce_perf")
        for label, rows in list(curves.items())[1:]:
            r = rows[-1]
            st.metric(label, units.format_rate_bytes(r["busbw_bytes_per_s"]),
                      delta=f"{r['busbw_bytes_per_s'] / big['busbw_bytes_per_s']:.1f}x", delta_color="off", delta_arrow="off")
        st.caption("Measure it with nccl-tests `all_reduce_perf -b 1K -e 4G -f 2 -g 1` under one process per GPU, "
                   "and calibrate gpusim with the result.")
    if notes:
        st.caption("Not shown: " + "; ".join(notes))
    rows = [{"fabric": k, **r} for k, v in curves.items() for r in v]
    shell.downloads("gpusim-topology", json_obj={"summary": summary, "warnings": warnings, "allreduce": curves},
                    rows=rows)
