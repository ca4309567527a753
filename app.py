"""gpusim's what-if planner (`make app`, i.e. `streamlit run app.py`).

Only wiring lives here: the navigation, the scenario sidebar and a timing footer. Pages are scripts in
gpusim/app_pages/ (widgets -> gpusim API -> gpusim.viz figures); formulas and hardware numbers live in
gpusim itself.
"""

import time

_T0 = time.perf_counter()

import streamlit as st

from gpusim.app_pages import shell

st.set_page_config(page_title="gpusim planner", page_icon=":material/memory:", layout="wide")
page = shell.navigation()
shell.sidebar()
shell.url_notices()  # URL parameters the sidebar ignored (?batch=inf ...), said once
page.run()
shell.url_notices()  # and those of the page's own widgets
shell.footer(_T0)
