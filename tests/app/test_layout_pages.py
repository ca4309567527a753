"""[issue 12] The Plan page recommends LLM layouts (the layout search inside gpusim.plan)."""

from __future__ import annotations

import pytest
from app_helpers import no_trouble, run_app

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def test_plan_page_recommends_a_layout_for_an_llm():
    at = run_app("plan", {"model": "llama2-7b", "deadline_d": "14", "budget_usd": "100000"}, timeout=120)
    no_trouble(at)
    tables = [d.value for d in at.dataframe if "layout" in d.value.columns]
    assert tables and any(str(v).startswith("tp ") for t in tables for v in t["layout"])
    assert any(md.value.startswith("- layout tp") for md in at.markdown)
