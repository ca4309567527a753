"""Collectives: the bus bandwidth NCCL should reach on the sidebar's hardware, per collective and message size
(with the algorithm and protocol its tuner would pick), and an uploaded nccl-tests output drawn on top."""

import streamlit as st

from gpusim import units, viz
from gpusim.app_pages import shell
from gpusim.errors import GpusimError

NAMES = ("all_reduce", "reduce_scatter", "all_gather", "broadcast", "reduce", "send_recv", "all_to_all")
SIZES = [float(2 ** k) for k in range(10, 35)]  # 1 KiB .. 16 GiB, as all_reduce_perf -b 1K -e 16G -f 2

ctx = shell.require_scenario()
scn = ctx.scenario
st.markdown(f"#### Collectives · {scn.gpus} x {ctx.gpu_id} on {scn.nodes} node(s)")
left, right = st.columns([1.4, 1])
names = left.multiselect("Collectives", shell.offer("coll_names", NAMES), default=["all_reduce", "all_gather", "all_to_all"], key="coll_names",
                         bind=shell.BIND)
upload = right.file_uploader("nccl-tests output to compare (text or -J JSON)", key="coll_measured",
                             type=["txt", "log", "out", "json"])


@st.cache_data(show_spinner=False, max_entries=64)
def _curves(key: str, _scn, _params, _db, names: tuple) -> dict:
    from gpusim.simulation import collective

    kw = dict(gpu=_scn.gpu, node=_scn.node, gpus=_scn.gpus, nodes=_scn.nodes, intra=_scn.intra, inter=_scn.inter,
              intra_topology=_scn.intra_topology, p2p=_scn.p2p, nics_per_node=_scn.nics_per_node,
              oversubscription=_scn.oversubscription, db=_db, params=_params)
    return {name: collective(name, SIZES, **kw) for name in names}


if not names:
    st.info("Choose one or more collectives.", icon=":material/info:")
    st.stop()
if scn.gpus < 2:
    st.info("One GPU: there is nothing to communicate (set two or more GPUs in the sidebar).", icon=":material/info:")
    st.stop()
with shell.guard("cannot predict the collectives"):
    curves = _curves(ctx.cache_key, scn, ctx.params, ctx.db, tuple(names))

measured = {}
if upload is not None:
    from gpusim.nccl_tests import parse_any

    try:
        runs = parse_any(upload.getvalue().decode("utf-8", errors="replace"), upload.name)
    except GpusimError as e:
        st.error(f"cannot read {upload.name}: {shell.ui_text(str(e))}", icon=":material/error:")
        runs = []
    for r in runs:
        if r.rows:
            measured[f"measured {r.collective or r.binary} ({r.n_ranks} ranks)"] = [
                {"bytes": x.size_bytes, "busbw_bytes_per_s": x.busbw_bytes_per_s} for x in r.rows]
    if runs and not measured:
        st.warning(f"{upload.name} holds no nccl-tests table with sizes.", icon=":material/warning:")

shell.chart(viz.collective_bandwidth_figure(curves, title="Predicted bus bandwidth per collective",
                                            measured=measured), key="fig_collectives")
st.caption("Bus bandwidth as nccl-tests defines it (algbw x 2(n-1)/n for all-reduce, x (n-1)/n for reduce-scatter, "
           "all-gather and all-to-all). NVLS and SHARP reduce in the switch, so their all-reduce can exceed the wire.")
rows = [{"collective": name, "size": units.format_bytes(r["bytes"]), "time": units.format_duration(r["time_s"]),
         "busbw": units.format_rate_bytes(r["busbw_bytes_per_s"]), "algorithm": r["algorithm"],
         "protocol": r["protocol"]} for name, rs in curves.items() for r in rs[::4]]
st.dataframe(rows, hide_index=True)
shell.downloads("gpusim-collectives", json_obj={"predicted": curves, "measured": measured},
                rows=[{"collective": k, **r} for k, v in curves.items() for r in v])
