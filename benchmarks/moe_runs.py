"""Predict the published MoE pretraining runs of ``validation/runs_moe.csv`` with their stated layouts and print the
error, the open rows and the held-out rows separately (issue 17, item 7).

Every row is predicted by the shared runs report's row predictor, :func:`gpusim.validation_runs.predict_row` (one
predictor for ``gpusim validate`` and this script): the system's node template (DGX H100 / B200 / B300, GB200 /
GB300 NVL72 racks), tp, pp, vp, cp, ep, etp, micro-batch, global batch, sequence length, precision, the
distributed optimizer of the Megatron-Bridge performance recipes, and the options of the notes' ``key=value``
tokens (``strategy=``, ``fp8_recipe=``, ``attention=``, ``tp_comm_overlap=``, ``router=force_balanced``,
``moe_capacity_factor=``, ``ep_overlap=``, ``moe_dispatcher=``: :data:`gpusim.validation_runs.OPTION_KEYS`). A
model whose layers do not split over ``pp x vp`` runs with unequal stages (``uneven_pp``), as the published
recipes split them.

Usage: ``python benchmarks/moe_runs.py [--csv validation/runs_moe.csv] [--rows] [--holdout-rows]``. The held-out
rows' individual errors are printed only with ``--holdout-rows`` (they are not to be looked at while modelling).
"""

from __future__ import annotations

import argparse
import csv
import math
import statistics
from pathlib import Path


def row_options(notes: str) -> dict:
    """The ``key=value`` tokens of a row's notes, as the shared runs report reads them."""
    from gpusim.validation_runs import options

    return options(notes)


def predict_row(r: dict, db=None):
    """The shared runs report's prediction of one row (:class:`gpusim.validation_runs.RunRow`: ``step_s``,
    ``measured_step_s``, ``predicted`` on the row's metric, ``signed_frac``, ``chosen``, ``error``)."""
    from gpusim.validation_runs import predict_row as shared

    return shared(r, file="runs_moe.csv", db=db)


def held_out(r: dict) -> bool:
    """Whether the shared runs report counts the row as held out (:func:`gpusim.validation_runs.held_out`)."""
    from gpusim.validation_runs import held_out as shared

    return shared(r)


def signed_step_error(metric: str, pred: float, meas: float) -> float:
    """Step-time error, positive = predicted slower: a throughput metric inverts."""
    return pred / meas - 1.0 if metric == "step_time_s" else meas / pred - 1.0


def _summary(errs):
    if not errs:
        return "n=0"
    a = sorted(abs(e) for e in errs)
    p90 = a[min(len(a) - 1, math.ceil(0.9 * len(a)) - 1)]
    return (f"n={len(a)} median |err| {100 * statistics.median(a):.1f}%, p90 {100 * p90:.1f}%, "
            f"median signed {100 * statistics.median(errs):+.1f}%")


def main(argv=None):
    from gpusim.hwdb import load

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--csv", default=str(Path(__file__).resolve().parent.parent / "validation" / "runs_moe.csv"))
    ap.add_argument("--rows", action="store_true", help="print the open rows one by one")
    ap.add_argument("--holdout-rows", action="store_true", help="print the held-out rows one by one too")
    a = ap.parse_args(argv)
    db = load()
    rows = list(csv.DictReader(open(a.csv, newline="")))
    part = {"0": [], "1": []}
    failed = {"0": [], "1": []}
    for r in rows:
        h = "1" if held_out(r) else "0"  # (a row seen before entry counts as open: validation_runs.held_out)
        show = a.rows and (h == "0" or a.holdout_rows)
        res = predict_row(r, db)
        if res.signed_frac is None:
            failed[h].append((r["run_id"], res.error or "no prediction"))
            if show:
                print(f"{r['run_id']:34s} not predicted: {res.error}")
            continue
        err = res.signed_frac
        part[h].append(err)
        if show:
            print(f"{r['run_id']:34s} {r['gpu']:9s} {r['tp']}/{r['pp']}/{r['vp'] or 1}/{r['cp']}/{r['ep']:>2s} "
                  f"mb {r['micro_batch']:>2s} gb {r['global_batch']:>5s} {r['precision']:6s} measured "
                  f"{res.measured:9.1f} predicted {res.predicted:9.1f}  step error {100 * err:+6.1f}% {res.chosen}")
    for h, name in (("0", "open"), ("1", "held out")):
        n = len(part[h]) + len(failed[h])
        print(f"{name:9s}: predicted {len(part[h])}/{n}; step time {_summary(part[h])}")
        for rid, msg in failed[h]:
            print(f"   not predicted {rid}: {msg[:160]}")


if __name__ == "__main__":
    main()
