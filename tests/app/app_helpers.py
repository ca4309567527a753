"""Helpers of the planner tests: run the app on a page, read its figures and metrics."""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
APP = ROOT / "app.py"
PAGES = {name: f"gpusim/app_pages/page_{name}.py"
         for name in ("step", "scaling", "batch", "rooflines", "compare", "parallelism", "plan", "topology",
                      "calibration")}


def run_app(page: str = "step", query: dict | None = None, timeout: float = 60):
    """An AppTest of app.py on ``page`` (after one run of the default page, as a browser would)."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(APP), default_timeout=timeout)
    for k, v in (query or {}).items():
        at.query_params[k] = str(v)
    at.run()
    if page != "step":
        at.switch_page(PAGES[page]).run()
    return at


def figures(at) -> dict[str, dict]:
    """The page's plotly figures as JSON, by title."""
    out = {}
    for el in at.get("plotly_chart"):
        fig = json.loads(el.proto.spec)
        title = fig.get("layout", {}).get("title", {}).get("text", "")
        out[title] = fig
    return out


def metrics(at) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def no_trouble(at) -> None:
    """No exception element and no error box in the page."""
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


def parse_ms(text: str) -> float:
    """'68.6 ms' / '1.2 s' / '950 µs' -> milliseconds."""
    v, unit = text.split()
    return float(v) * {"s": 1e3, "ms": 1.0, "µs": 1e-3, "us": 1e-3, "min": 6e4}[unit]


def parse_num(text: str) -> float:
    """'29,840' / '1.23 M' / '7.87x' / '98%' -> float."""
    t = text.replace(",", "").replace("x", "").strip()
    if t.endswith("%"):
        return float(t[:-1]) / 100.0
    mult = {"G": 1e9, "M": 1e6}
    parts = t.split()
    if len(parts) == 2 and parts[1] in mult:
        return float(parts[0]) * mult[parts[1]]
    return float(parts[0])
