"""Server-side time of a planner rerun after a widget change, per page.

Runs app.py in-process with streamlit.testing.v1.AppTest (the same script runner the server uses, without the
websocket), changes one widget to a new value each time (so no cache is hit), and prints the median and the
90th percentile of the rerun wall time. Target: under 200 ms for the Step page.

    .venv/bin/python benchmarks/app_rerun.py [--reruns 20]
"""

from __future__ import annotations

import argparse
import logging
import statistics
import time
from pathlib import Path

APP = str(Path(__file__).resolve().parents[1] / "app.py")
TARGET_MS = 200.0

#: page script, widget kind, key, values to cycle through (a new value each rerun)
CASES = [
    ("step", None, "number_input", "batch", list(range(64, 64 + 200))),
    ("step", None, "selectbox", "fabric", ["pcie-switch", "pcie-cross-socket", "pcie-host", "no-p2p"]),
    ("scaling", "gpusim/app_pages/page_scaling.py", "number_input", "batch", list(range(64, 64 + 200))),
    ("batch", "gpusim/app_pages/page_batch.py", "number_input", "batch", list(range(64, 64 + 200))),
    ("rooflines", "gpusim/app_pages/page_rooflines.py", "number_input", "batch", list(range(64, 64 + 200))),
]


def measure(page: str | None, kind: str, key: str, values: list, reruns: int) -> list[float]:
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(APP, default_timeout=120).run()
    if page:
        at.switch_page(page).run()
    widget = getattr(at, kind)(key=key)
    times = []
    for i in range(reruns + 2):
        v = values[i % len(values)]
        if kind == "selectbox":
            widget.select(v)
        else:
            widget.set_value(v)
        t0 = time.perf_counter()
        at.run()
        dt = (time.perf_counter() - t0) * 1e3
        if at.exception:
            raise RuntimeError(at.exception[0].value)
        widget = getattr(at, kind)(key=key)
        if i >= 2:  # the first reruns warm imports and caches
            times.append(dt)
    return times


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reruns", type=int, default=20)
    args = ap.parse_args()
    logging.getLogger("streamlit").setLevel(logging.ERROR)
    print(f"{'page':<10} {'widget change':<22} {'median ms':>10} {'p90 ms':>8}")
    ok = True
    for name, page, kind, key, values in CASES:
        t = sorted(measure(page, kind, key, values, args.reruns))
        med = statistics.median(t)
        p90 = t[int(0.9 * (len(t) - 1))]
        print(f"{name:<10} {kind + ' ' + key:<22} {med:>10.1f} {p90:>8.1f}")
        if name == "step":
            ok &= med < TARGET_MS
    print(f"Step page target: median under {TARGET_MS:.0f} ms: {'met' if ok else 'NOT met'}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
