"""The Streamlit planner's pages and the plain-Python helpers behind them.

- :mod:`gpusim.app_pages.state`: the page state (what the URL query holds) and how it becomes a Scenario;
- :mod:`gpusim.app_pages.analysis`: curves and comparisons the pages draw, built from gpusim's API;
- :mod:`gpusim.app_pages.shell`: the Streamlit frame: navigation, the scenario sidebar, errors, downloads;
- ``page_*.py``: one script per page, run by ``st.navigation`` from ``app.py``.

Only ``shell`` and the page scripts import Streamlit; ``state`` and ``analysis`` are tested without it.
"""
