"""The planner's compare view: pin, change the sidebar, see both and the change that explains the difference;
and the Step page's measured multi-GPU throughput."""

from __future__ import annotations

from app_helpers import PAGES, run_app


def test_pin_change_and_compare():
    at = run_app("compare", {"model": "resnet50", "hw": "gpu", "gpu": "a100-sxm4-80gb", "gpus": "32", "nodes": "4",
                             "batch": "64"})
    assert not at.exception, [e.value for e in at.exception]
    assert any("Pin the current scenario" in i.value for i in at.info)
    next(b for b in at.button if b.label == "Pin this scenario").click().run()
    at.number_input(key="batch").set_value(256).run()
    at.switch_page(PAGES["compare"]).run()
    assert not at.exception, [e.value for e in at.exception]
    text = " ".join(m.value for m in at.markdown)
    assert "per_gpu_batch 64 -> 256" in text and "samples/s" in text
    tables = [df.value for df in at.dataframe]
    assert any("per_gpu_batch" in str(t) for t in tables)


def test_step_page_explains_a_measured_throughput():
    at = run_app("step", {"model": "resnet50", "hw": "gpu", "gpu": "a100-sxm4-80gb", "gpus": "8", "batch": "128",
                          "measured": "5000"})
    assert not at.exception, [e.value for e in at.exception]
    text = " ".join(m.value for m in at.markdown)
    assert "measured 5,000 samples/s" in text and "would explain it" in text
