"""Predict the published MoE pretraining runs of ``validation/runs_moe.csv`` with their stated layouts and print the
error, the open rows and the held-out rows separately (issue 17, item 7).

Each row runs through ``gpusim.simulate(Scenario(...))`` as the source states it: the system's node template
(DGX H100 / B200 / B300, GB200 / GB300 NVL72 racks), tp, pp, vp, cp, ep, micro-batch, global batch, sequence length,
precision, and the distributed optimizer of the Megatron-Bridge performance recipes. Options the schema has no
column for come from ``key=value`` tokens in the notes (:func:`row_options`): ``strategy=``, ``fp8_recipe=``,
``attention=`` (as ``gpusim.validation_runs`` reads them) and the MoE ones, ``router=force_balanced`` (the
Megatron-Bridge tables: "we force-balance the token distribution among experts": no routing imbalance),
``moe_capacity_factor=`` (token-drop runs), ``ep_overlap=`` and ``moe_dispatcher=``. A model whose layers do not
split over ``pp x vp`` runs with unequal stages (``uneven_pp``), as the published recipes split them.

Usage: ``python benchmarks/moe_runs.py [--csv validation/runs_moe.csv] [--rows] [--holdout-rows]``. The held-out
rows' individual errors are printed only with ``--holdout-rows`` (they are not to be looked at while modelling).
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import math
import re
import statistics
from pathlib import Path

NODE_FOR_GPU = {"h100-sxm": "dgx-h100", "h200-sxm": "hgx-h200-8", "b200": "dgx-b200", "b300": "dgx-b300",
                "gb200": "gb200-nvl72", "gb300": "gb300-nvl72", "a100-sxm4-80gb": "dgx-a100-80gb"}
STRATEGY = {"zero1": "zero1", "distopt": "zero1", "ddp": "ddp", "fsdp": "fsdp-full"}
_TOKEN = re.compile(r"\b(strategy|fp8_recipe|attention|router|moe_capacity_factor|ep_overlap|moe_dispatcher)="
                    r"([A-Za-z0-9_.\-]+)")


def row_options(notes: str) -> dict:
    """The ``key=value`` tokens of a row's notes (module docstring)."""
    return dict(_TOKEN.findall(notes or ""))


def _int(v, default=1):
    v = (v or "").strip()
    return int(float(v)) if v else default


def predict_row(r: dict, db=None):
    """(predicted tokens/s/GPU or step seconds on the row's metric, measured, note) for one row; raises
    :class:`gpusim.errors.GpusimError` when the row cannot be predicted."""
    from gpusim.simulation import Scenario, simulate
    from gpusim.workload import build_from_spec, get_workload

    opts = row_options(r.get("notes", ""))
    tp, pp, cp, ep, etp, vp = (_int(r.get(k)) for k in ("tp", "pp", "cp", "ep", "etp", "vp"))
    gpus, gb, seq, mb = _int(r["gpus"]), _int(r["global_batch"]), _int(r["seq_len"]), _int(r.get("micro_batch"))
    wl = get_workload(r["model"], seq_len=seq)
    spec = wl.transformer
    changes = {}
    if opts.get("router") == "force_balanced":
        changes["moe_imbalance_frac"] = 0.0
    if "attention" in opts and spec.flash_attention != (opts["attention"] == "flash"):
        changes["flash_attention"] = opts["attention"] == "flash"
    if changes:
        wl = build_from_spec(dataclasses.replace(spec, seq_len=seq, **changes), id=wl.id, name=wl.name)
    node = NODE_FOR_GPU[r["gpu"]]
    per_node = db.node(node).gpus_per_node
    kw = dict(workload=wl, node=node, gpus=gpus, nodes=max(1, gpus // per_node),
              kind=STRATEGY.get(opts.get("strategy", "zero1"), "zero1"), precision=r["precision"].strip(), tp=tp,
              pp=pp, vp=vp, cp=cp, ep=ep, expert_tp=etp, micro_batch=mb, global_batch=gb, seq_len=seq,
              uneven_pp=spec.n_layers % (pp * vp) != 0, recompute=(r.get("recompute") or "none").strip())
    if "fp8_recipe" in opts and r["precision"].startswith("fp8"):
        kw["fp8_recipe"] = opts["fp8_recipe"]
    if "moe_capacity_factor" in opts:
        kw["moe_capacity_factor"] = float(opts["moe_capacity_factor"])
    for k in ("ep_overlap", "moe_dispatcher"):
        if k in opts:
            kw[k] = opts[k]
    res = simulate(Scenario.create(**kw), db=db, recommend=False)
    step = float(res.step_s)
    metric = r["metric"]
    if metric == "tokens_per_s_per_gpu":
        pred = gb * seq / (step * gpus)
    elif metric == "step_time_s":
        pred = step
    else:
        pred = float(res.model_tflop_per_s_per_gpu)
    return pred, float(r["value"]), ("" if res.fits_in_memory else "no fit (gpusim)"), res


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
    from gpusim.errors import GpusimError
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
        h = r["holdout"].strip()
        try:
            pred, meas, note, _ = predict_row(r, db)
        except (GpusimError, KeyError, ValueError) as e:
            failed[h].append((r["run_id"], str(e)))
            if a.rows and (h == "0" or a.holdout_rows):
                print(f"{r['run_id']:34s} not predicted: {e}")
            continue
        err = signed_step_error(r["metric"], pred, meas)
        part[h].append(err)
        if a.rows and (h == "0" or a.holdout_rows):
            print(f"{r['run_id']:34s} {r['gpu']:9s} {r['tp']}/{r['pp']}/{r['vp'] or 1}/{r['cp']}/{r['ep']:>2s} "
                  f"mb {r['micro_batch']:>2s} gb {r['global_batch']:>5s} {r['precision']:6s} measured {meas:9.1f} "
                  f"predicted {pred:9.1f}  step error {100 * err:+6.1f}% {note}")
    for h, name in (("0", "open"), ("1", "held out")):
        n = len(part[h]) + len(failed[h])
        print(f"{name:9s}: predicted {len(part[h])}/{n}; step time {_summary(part[h])}")
        for rid, msg in failed[h]:
            print(f"   not predicted {rid}: {msg[:160]}")


if __name__ == "__main__":
    main()
