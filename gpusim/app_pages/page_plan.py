"""Plan: deadline, budget and amount of training -> time vs cost, the best configurations, the bill of materials.

Appears when the procurement planner (``gpusim.plan``) is installed; until then the page says so."""

import importlib.util

import streamlit as st

st.markdown("#### Plan: what to buy or rent to train in time and on budget")
if importlib.util.find_spec("gpusim.plan") is None:
    st.info("The procurement planner (`gpusim.plan`) is not installed yet, so this page has nothing to show. "
            "When it lands, this page takes a deadline, a budget and the amount of training (tokens or samples) "
            "and draws the time-vs-cost Pareto chart, the table of best configurations and the bill of materials.",
            icon=":material/hourglass_empty:")
else:
    st.warning("`gpusim.plan` is installed, but this page is not wired to it yet: use `gpusim plan --help` on the "
               "command line meanwhile.", icon=":material/construction:")
