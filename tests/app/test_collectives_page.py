"""The Collectives page and its figure: predicted bus bandwidth per collective, measured points on top."""

from __future__ import annotations

import pytest
from app_helpers import APP, figures, no_trouble

from gpusim import viz

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def test_collective_figure_draws_measured_points_on_top():
    rows = [{"bytes": float(1 << k), "busbw_bytes_per_s": 1e9 * k, "time_s": 1e-5 * k, "algorithm": "ring",
             "protocol": "ll"} for k in (10, 20, 30)]
    fig = viz.collective_bandwidth_figure({"all_reduce": rows},
                                          measured={"measured": [{"bytes": 1024.0, "busbw_bytes_per_s": 5e9}]})
    assert [t.mode for t in fig.data] == ["lines+markers", "markers"]
    assert list(fig.data[1].y) == pytest.approx([5.0])


def test_collectives_page_shows_every_chosen_collective():
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(APP), default_timeout=60)
    at.query_params["gpu"] = "h100-sxm"
    at.query_params["gpus"] = "8"
    at.run()
    at.switch_page("gpusim/app_pages/page_collectives.py").run()
    no_trouble(at)
    fig = figures(at)["Predicted bus bandwidth per collective"]
    names = [t["name"] for t in fig["data"]]
    assert names == ["all_reduce", "all_gather", "all_to_all"]
    ar = fig["data"][0]["y"]
    assert ar[-1] > ar[0] * 100  # latency-bound at 1 KiB, bandwidth-bound at 16 GiB
