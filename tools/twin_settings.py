"""The curated 26.02 MoE rows predicted with the speed settings of their 26.02.01 twins (issue 17, stop 47).

The open MoE rows of ``validation/runs_moe.csv`` from the 26.02 Megatron-Bridge table (``MBRIDGE_2602``) carry only the
memory settings of the recipe entry they match (recomputed modules, the gradients' dtype). The 26.02.01 table's rows of
the same model, GPU, GPU count, layout and precision (``validation/later_releases.csv``, ``MBRIDGE_260201``) carry the
speed settings of their era's recipe as well: the dispatcher, the CUDA-graph scope, the EP overlap. This prints each
26.02 row's signed error as it is and with its twin's three settings added to its notes, and both medians of the
absolute error: how much the curated rows' figures owe to the settings they leave out. Held-out rows are never read.

    python tools/twin_settings.py
"""

from __future__ import annotations

import csv
import re
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

#: the twin's settings taken over (the ``key=value`` tokens of its notes)
SPEED_KEYS = ("moe_dispatcher", "cuda_graph_scope", "ep_overlap")
_LAYOUT = ("model", "gpu", "gpus", "tp", "pp", "vp", "cp", "ep", "micro_batch", "global_batch", "precision")


def twins(db=None) -> list[dict]:
    """One dict per open ``MBRIDGE_2602`` MoE row with an open 26.02.01 twin: its id, the settings taken over and the
    signed error before and after."""
    from gpusim import validation_runs as V
    from gpusim.hwdb import load

    db = db or load()
    with open(V.later_releases_path(), newline="") as f:
        later = {tuple(r[c] for c in _LAYOUT): r for r in csv.DictReader(f)
                 if r["source_id"] == "MBRIDGE_260201" and not V.held_out(r)}
    out = []
    for path in V.default_paths():
        with open(path, newline="") as f:
            for r in csv.DictReader(f):
                if r["source_id"] != "MBRIDGE_2602" or V.held_out(r) or "moe" not in V.regime(r):
                    continue
                twin = later.get(tuple(r[c] for c in _LAYOUT))
                if twin is None:
                    continue
                taken = dict(re.findall(r"\b(" + "|".join(SPEED_KEYS) + r")=([\w+]+)", twin["notes"]))
                before = V.predict_row(r, db=db)
                after = V.predict_row({**r, "notes": r["notes"] + " " + " ".join(f"{k}={v}" for k, v in taken.items())},
                                      db=db)
                if before.signed_frac is None or after.signed_frac is None:
                    continue
                out.append({"run_id": r["run_id"], "taken": taken, "before": before.signed_frac,
                            "after": after.signed_frac})
    return out


def main() -> int:
    rows = twins()
    for t in rows:
        print(f"{t['run_id']:28s} {t['before']:+7.1%} -> {t['after']:+7.1%}  "
              f"{' '.join(f'{k}={v}' for k, v in t['taken'].items()) or '(nothing to take)'}")
    if rows:
        print(f"{len(rows)} open 26.02 MoE rows with a 26.02.01 twin: median absolute error "
              f"{statistics.median(abs(t['before']) for t in rows):.1%} as they are, "
              f"{statistics.median(abs(t['after']) for t in rows):.1%} with the twin's speed settings")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
