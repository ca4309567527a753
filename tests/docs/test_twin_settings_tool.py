"""tools/twin_settings.py: the curated 26.02 MoE rows predicted with their 26.02.01 twins' speed settings."""

from __future__ import annotations

import csv


def test_open_rows_only_and_nothing_taken_changes_nothing(db, load_tool):
    from gpusim import validation_runs as V

    rows = load_tool("twin_settings").twins(db)
    held = set()
    for path in [*V.default_paths(), V.later_releases_path()]:
        with open(path, newline="") as f:
            held |= {r["run_id"] for r in csv.DictReader(f) if str(r.get("holdout")).strip() == "1"}
    assert rows and not held & {t["run_id"] for t in rows}
    assert all(t["run_id"].startswith("mb2602-") for t in rows)
    # a twin with no speed setting leaves the prediction as it was; HybridEP in its place makes it faster (more negative)
    assert all(t["after"] == t["before"] for t in rows if not t["taken"])
    q30 = next(t for t in rows if t["run_id"] == "mb2602-gb200-q30-mx")
    assert q30["taken"].get("moe_dispatcher") == "deepep" and q30["after"] < q30["before"]
