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


def test_the_components_split_recovers_a_known_part_and_constant(load_tool):
    """[stop 52] ``--components``: gaps built as 0.5 x the experts' time + 1 ms per pass over rows whose parts vary
    independently come back as c_experts 0.5 and 1 ms per pass, every other part 0, the whole gap explained; a gap
    that no part follows (a constant) is not put on a part."""
    import numpy as np

    tool = load_tool("moe_gap")
    rng = np.random.default_rng(7)

    def row(gap_of):
        parts = {k: float(rng.uniform(0.5e-3, 8e-3)) for k in tool.PARTS}
        return tool.Gap(run_id="r", model="m", gpu="g", gap_per_pass_s=gap_of(parts), tokens_per_micro_batch=1.0,
                        local_experts=1.0, host_cpu_mult=1.0, full_graphs=False, gpu_per_pass_s=1e-3,
                        signed_frac=-0.1, parts_s=parts)

    rows = [row(lambda p: 0.5 * p["experts"] + 1e-3) for _ in range(40)]
    d = tool.decompose(rows)
    assert d["n"] == 40 and abs(d["coef"]["experts"] - 0.5) < 1e-6 and abs(d["coef"]["per pass"] - 1e-3) < 1e-9
    assert all(abs(d["coef"][k]) < 1e-6 for k in tool.PARTS if k != "experts")
    assert d["explained_frac"] > 0.999
    flat = tool.decompose([row(lambda p: 2e-3) for _ in range(40)])
    assert abs(flat["coef"]["per pass"] - 2e-3) < 1e-9 and all(abs(flat["coef"][k]) < 1e-6 for k in tool.PARTS)
    assert tool.decompose(rows[:5]) is None  # fewer rows than unknowns
    # every open row carries its parts, and the table prints a line for all rows
    lines = tool.components_lines(tool.gaps())
    assert lines[1].startswith("all open MoE rows")
