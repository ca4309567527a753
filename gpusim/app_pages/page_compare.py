"""Compare: pin the current scenario, change something in the sidebar, and see both side by side, with the
change that explains most of the difference (gpusim.comparison: every change evaluated by the model on its own)."""

import streamlit as st

from gpusim.app_pages import shell
from gpusim.comparison import change_text, compare, figures_for, format_figure, relative_change
from gpusim.track_record import report_line

PIN_KEY = "_pinned_scenario"

ctx = shell.require_scenario()
st.markdown(f"#### Compare · {shell.scenario_title(ctx)}")
pinned = st.session_state.get(PIN_KEY)
c = st.columns([1, 1, 3])
if c[0].button("Pin this scenario", icon=":material/push_pin:", help="keep it as the reference, then change the "
               "sidebar: this page shows both"):
    st.session_state[PIN_KEY] = pinned = (ctx.scenario, ctx.params, shell.scenario_title(ctx))
if pinned is not None and c[1].button("Unpin", icon=":material/close:"):
    st.session_state.pop(PIN_KEY, None)
    pinned = None
if pinned is None:
    st.info("Pin the current scenario, then change anything in the sidebar (GPU, network, batch, strategy ...): "
            "this page then shows the pinned and the current scenario side by side, and which change explains most "
            "of the difference.", icon=":material/push_pin:")
    st.stop()

ref_scn, ref_params, ref_title = pinned
with shell.guard("cannot compare these scenarios"):
    out = compare([ref_scn, ctx.scenario], names=["pinned", "current"], db=ctx.db,
                  params_each=[ref_params, ctx.params])
st.caption(f"pinned: {ref_title}")
res = out["results"]


def _show(v) -> str:
    """An input as the sidebar says it: None is "auto", the GPU's (or node's) usual choice."""
    return "auto" if v is None else str(v)


def _change(ch) -> str:
    """``gpu l40s -> h100-sxm, intra_topology pcie-cross-socket -> auto`` (change_text with None as auto)."""
    return change_text({"inputs": {k: ["auto" if v is None else v for v in ab] for k, ab in ch["inputs"].items()}})


rows = [{"": k.removeprefix("strategy."), "pinned": _show(out["inputs"][0][k]), "current": _show(out["inputs"][1][k])}
        for k in out["differs"]]
if not rows:
    st.info("The current scenario is the pinned one: change something in the sidebar.")
figs = []
for key, label, unit, higher in figures_for(res):
    a, b = res[0][key], res[1][key]
    rel = relative_change(a, b)
    figs.append({"": label, "pinned": format_figure(unit, a), "current": format_figure(unit, b), "change": rel})
left, right = st.columns([1, 1.4])
with left:
    st.markdown("**Inputs that differ**")
    st.dataframe(rows, hide_index=True, width="stretch")
with right:
    st.markdown("**Predicted**")
    st.dataframe(figs, hide_index=True, width="stretch")
g = out["gaps"][0]
st.markdown(f"**Current vs pinned: throughput x{g['throughput_ratio']:.3g} ({g['gap_samples_per_s']:+,.4g} samples/s).** "
            "One change at a time on the pinned scenario (gpusim.comparison.compare, the attribution `gpusim compare` "
            "prints):")
for ch in g["changes"]:
    if ch["effect_samples_per_s"] is None:
        st.markdown(f"- {_change(ch)}: {shell.ui_text(ch['note'] or '')}")
    else:
        share = f", {ch['share_of_gap_frac']:.0%} of the difference" if ch["share_of_gap_frac"] is not None else ""
        st.markdown(f"- {_change(ch)}: {ch['effect_samples_per_s']:+,.4g} samples/s{share}"
                    + (f" ({ch['note']})" if ch["note"] else ""))
top = g["explains_most"]
if top is not None and len(g["changes"]) > 1:
    frac = top["share_of_gap_frac"]
    if frac is not None and frac >= 0.5:
        st.success(f"{_change(top)} explains most of the difference ({frac:.0%}).", icon=":material/insights:")
    else:
        st.info(f"No change explains most of the difference on its own: the largest, {_change(top)}, gives "
                + (f"{frac:.0%}" if frac is not None else "a part")
                + f"; the changes together add {g['interaction_samples_per_s']:+,.4g} samples/s beyond the sum of "
                "their separate effects (they interact).", icon=":material/insights:")
rec = g.get("track_record")
if rec and "reason" not in rec:  # [stop 47] how far such a change's speed-up was from published A/B comparisons
    lo, hi = rec.get("throughput_ratio_range") or (None, None)
    here = f"current at x{lo:.2f} to x{hi:.2f} the pinned speed" if lo is not None else None
    st.caption("Track record: " + shell.ui_text(report_line(rec, here=here)))
shell.downloads("gpusim-compare", json_obj=out)
