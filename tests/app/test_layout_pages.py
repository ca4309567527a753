"""[issue 12] The Plan page recommends LLM layouts (the layout search inside gpusim.plan)."""

from __future__ import annotations

import pytest
from app_helpers import no_trouble, run_app

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def test_plan_page_recommends_a_layout_for_an_llm():
    # (one GPU model: over the whole database the plan picks among the 2026-priced GPUs, whose winner may change)
    at = run_app("plan", {"model": "llama2-7b", "deadline_d": "14", "budget_usd": "100000", "plan_gpus": "h100-sxm"},
                 timeout=120)
    no_trouble(at)
    tables = [d.value for d in at.dataframe if "layout" in d.value.columns]
    assert tables and any(str(v).startswith("tp ") for t in tables for v in t["layout"])
    assert any(md.value.startswith("- layout tp") for md in at.markdown)
    # [stop 56] the recommended layout's memory against the published runs' peaks, as `gpusim plan` prints it
    mem = [c.value for c in at.caption if c.value.startswith("**Memory record**: published peak memory")]
    assert len(mem) == 1 and "for the recommended layout, of 80 GiB" in mem[0]


def test_plan_page_says_what_moe_software_would_add():
    """[issue 17] The recommendation gets predict's advice on FP8 and Megatron-Core's MoE software settings, as
    `gpusim plan` prints it (gpusim.planning.recommendation_software_advice)."""
    # (B200: on H100 at Lambda's 2026 price a ZeRO-3 data-parallel row wins, which is no layout to advise on)
    at = run_app("plan", {"model": "qwen3-235b-a22b", "tokens_b": "1000", "deadline_d": "60",
                          "plan_gpus": "b200"}, timeout=180)
    no_trouble(at)
    notes = [i.value for i in at.info if "for the recommendation" in i.value]
    assert any("**MoE software for the recommendation**" in n and "--moe-dispatcher" in n for n in notes)


def test_plan_page_ranks_the_precision_picked():
    """[issue 17] The Plan page takes the precisions to rank, as `gpusim plan --precision` does: FP8 with current
    scaling on H100 is recommended as fp8-cs, and the recommendation names it."""
    at = run_app("plan", {"model": "llama3-8b", "tokens_b": "100", "plan_gpus": "h100-sxm", "plan_prec": "fp8-cs"},
                 timeout=180)
    no_trouble(at)
    assert at.multiselect(key="plan_prec").value == ["fp8-cs"]
    assert at.success and "fp8-cs" in at.success[0].value
    tables = [d.value for d in at.dataframe if "precision" in d.value.columns]
    assert tables and all(set(t["precision"]) <= {"fp8-cs"} for t in tables)


def test_plan_page_names_the_layout_that_fits_the_memory_records_top():
    """[stop 56] Where the top of the recommended layout's memory record passes the GPU's memory, the Plan page names
    the fastest layout on that hardware whose top fits, as `gpusim plan` prints it
    (gpusim.planning.recommendation_memory_fit)."""
    import gpusim
    from gpusim.track_record import memory_fit_here

    at = run_app("plan", {"model": "llama3-70b", "tokens_b": "2000", "deadline_d": "60", "plan_gpus": "b200"},
                 timeout=180)
    no_trouble(at)
    fit = [c.value for c in at.caption if c.value.startswith("**Memory record**: the fastest layout on")]
    cli = gpusim.plan(model="llama3-70b", tokens="2T", deadline="60d", gpu=["b200"]).memory_record_fit
    assert cli and fit == [f"**Memory record**: {memory_fit_here(cli, ' on the recommended hardware')}."]
