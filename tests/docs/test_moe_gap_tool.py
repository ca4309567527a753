"""tools/moe_gap.py: the open MoE rows' missing time per layer pass (a diagnostic for issue 17's MoE regime)."""

from __future__ import annotations

import csv


def test_the_tool_reads_open_moe_rows_only_and_signs_the_gap_as_the_error(db, load_tool):
    from gpusim import validation_runs as V

    rows = load_tool("moe_gap").gaps(db)
    held = set()
    for path in [*V.default_paths(), V.later_releases_path()]:
        with open(path, newline="") as f:
            held |= {r["run_id"] for r in csv.DictReader(f) if str(r.get("holdout")).strip() == "1"}
    ids = [g.run_id for g in rows]
    assert ids and not held & set(ids) and len(ids) == len(set(ids))
    # a row predicted too fast (error < 0) misses time (gap > 0), and the reverse
    assert all((g.gap_per_pass_s > 0) == (g.signed_frac < 0) for g in rows if abs(g.signed_frac) > 1e-9)
    assert all(g.local_experts >= 1 and g.tokens_per_micro_batch > 0 and g.gpu_per_pass_s > 0 for g in rows)
