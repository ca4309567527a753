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
url = shell.url_snapshot()  # the query before the widgets read it
page = shell.navigation()
shell.sidebar()
shell.check_url(url, "sidebar")  # URL values the sidebar's widgets did not take (?model=llama3.1-70bb ...)
shell.url_notices()  # and those it ignored (?batch=inf ...), said once
notices = st.container()  # the page's own widgets' notices go above the page
page.run()
shell.check_url(url, page.url_path or "home")
shell.url_notices(notices)
shell.footer(_T0)
