"""Scaling: speedup and efficiency vs GPU count, for several fabrics and strategies at once; weak or strong."""

import streamlit as st

from gpusim import viz
from gpusim.app_pages import analysis as A
from gpusim.app_pages import shell
from gpusim.app_pages.state import STRATEGY_KINDS
from gpusim.diagnose import LOW_EFFICIENCY_FRAC

ctx = shell.require_scenario()
scn = ctx.scenario
db = ctx.db
BIND = shell.BIND

st.markdown(f"#### Scaling · {shell.scenario_title(ctx)}")
c1, c2, c3, c4 = st.columns([1.2, 1, 1, 1.2])
mode = c1.segmented_control("Scaling", shell.offer("mode", ["weak", "strong"]), default="weak", required=True, key="mode", bind=BIND,
                            help="weak: the per-GPU batch stays (the global batch grows); strong: the global batch "
                                 "stays and is divided over the GPUs")
max_gpus = c2.select_slider("Up to GPUs", shell.offer("max_gpus", [2 ** k for k in range(1, 15)]), value=64, key="max_gpus", bind=BIND)
per_node = shell.number_input(c3, "GPUs per node", 1, 576, None, key="per_node", bind=BIND,
                           placeholder=f"{scn.gpus // scn.nodes} (scenario)",
                           help="the curves add whole nodes of this many GPUs")
global_batch = None
if mode == "strong":
    global_batch = shell.number_input(c4, "Global batch (samples)", 1, 100_000_000, None, key="global_batch", bind=BIND,
                                   placeholder=f"{scn.strategy.per_gpu_batch * scn.strategy.accum * scn.gpus} (scenario)")

gpu_id = ctx.gpu_id
fabrics_all = [f for f in A.FABRICS if f != "auto"]
default_fabrics = [f for f in fabrics_all if f in A.available_fabrics(db, gpu_id)]
nets_all = A.network_ids(db)
c1, c2, c3 = st.columns([1.6, 1, 1])
fabrics = c1.multiselect("Fabrics inside a node", shell.offer("cmp_fabrics", fabrics_all), default=default_fabrics, key="cmp_fabrics", bind=BIND,
                         help="; ".join(f"{k}: {v}" for k, v in A.FABRICS.items() if k != "auto"))
networks = c2.multiselect("Networks between nodes", shell.offer("cmp_nets", nets_all),
                          default=[n for n in ("ib-ndr-400", "eth-100g") if n in nets_all], key="cmp_nets", bind=BIND)
kinds = c3.multiselect("Strategies", shell.offer("cmp_strategies", STRATEGY_KINDS),
                       default=["ddp", "dp", "fsdp-full"], key="cmp_strategies", bind=BIND)
fabrics, networks, measured_note = A.drop_measured_variants(fabrics, networks, ctx.params)
if measured_note:
    st.caption(measured_note)


@st.cache_data(show_spinner=False, max_entries=64)
def _curves(key: str, _scn, _params, _db, kind: str, selection: tuple, mode: str, max_gpus: int,
            per_node: int | None, global_batch: int | None):
    """Curves for one comparison; cached on the scenario (``key``: ctx.cache_key) and the page's choices."""
    db = _db
    base = A.per_node_base(_scn, per_node)
    if kind == "fabric":
        variants, skipped = A.fabric_variants(base, db, selection[0], selection[1])
    else:
        variants, skipped = A.strategy_variants(base, selection[0])
    counts = A.gpu_counts(max_gpus, [_scn.gpus])
    gb = global_batch or (_scn.strategy.per_gpu_batch * _scn.strategy.accum * _scn.gpus)
    out, skipped2 = A.curves(variants, counts, mode=mode, global_batch=gb if mode == "strong" else None, db=db,
                             params=_params)
    return out, skipped + skipped2


key = ctx.cache_key
with shell.guard("cannot compute the scaling curves"):
    by_fabric, skip_f = _curves(key, scn, ctx.params, db, "fabric", (tuple(fabrics), tuple(networks)), mode, max_gpus,
                                per_node, global_batch)
    by_kind, skip_k = _curves(key, scn, ctx.params, db, "strategy", (tuple(kinds),), mode, max_gpus, per_node,
                              global_batch)

what = "per-GPU batch kept" if mode == "weak" else "global batch kept, divided over the GPUs"
st.markdown(f"##### By fabric ({what})")
if by_fabric:
    left, right = st.columns(2)
    with left:
        shell.chart(viz.speedup_figure(by_fabric, title="Speedup over one GPU, by fabric"), key="fig_speedup_fabric")
    with right:
        shell.chart(viz.efficiency_figure(by_fabric, title="Scaling efficiency, by fabric",
                                          target_frac=LOW_EFFICIENCY_FRAC), key="fig_eff_fabric")
else:
    st.info("Pick at least one fabric or network.")
if skip_f:
    st.caption("Not shown: " + "; ".join(skip_f))

st.markdown("##### By strategy")
if by_kind:
    left, right = st.columns(2)
    with left:
        shell.chart(viz.speedup_figure(by_kind, title="Speedup over one GPU, by strategy"), key="fig_speedup_kind")
    with right:
        shell.chart(viz.efficiency_figure(by_kind, title="Scaling efficiency, by strategy",
                                          target_frac=LOW_EFFICIENCY_FRAC), key="fig_eff_kind")
    st.caption("DataParallel runs in one process, so its curve stops at one node. Crosses mark points that "
               "do not fit in GPU memory.")
else:
    st.info("Pick at least one strategy.")
if skip_k:
    st.caption("Not shown: " + "; ".join(skip_k))

# why: the parts of the step of the scenario's own configuration as GPUs are added
own = by_kind.get(scn.strategy.kind) or next(iter(by_fabric.values()), None)
if own:
    st.markdown("##### Why: the step's parts as GPUs are added (the scenario's fabric and strategy)")
    left, right = st.columns([2, 1])
    with left:
        shell.chart(viz.breakdown_vs_gpus_figure(own), key="fig_parts_vs_gpus")
    with right:
        last = own[-1]
        st.metric(f"Efficiency at {last['n_gpus']} GPUs", f"{last['scaling_efficiency_frac']:.0%}")
        st.metric(f"Speedup at {last['n_gpus']} GPUs", f"{last['speedup']:.3g}x")
        st.metric("Bottleneck there", last["bottleneck"])

rows = A.curves_table(by_fabric, "fabric") + A.curves_table(by_kind, "strategy")
shell.downloads("gpusim-scaling", json_obj={"mode": mode, "by_fabric": by_fabric, "by_strategy": by_kind}, rows=rows)
