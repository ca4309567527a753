"""LLM layouts over a grid and the pipeline schedule of one: what the planner's Parallelism page shows.

- :func:`layout_grid` evaluates every (tp, pp, micro-batch) cell of a scenario in one vectorised model call;
  a cell the layout check refuses, or whose fullest stage does not fit, is kept as data with the reason.
- :func:`pipeline_schedule` lays out the blocks of one step of 1F1B or interleaved 1F1B (Narayanan et al.
  SC'21, figure 4): each stage runs its forward and backward passes in the schedule's order, each pass as
  soon as its input has arrived from the neighbouring stage, so the picture shows the warm-up, the steady
  state and the bubble.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gpusim import units
from gpusim.errors import GpusimError


def layout_grid(scenario, tps, pps, micro_batches=(1,), *, db=None, params=None) -> dict[str, Any]:
    """Rows for every (tp, pp, micro-batch) of ``scenario`` (its vp, recomputation, global batch ... kept).

    Returns ``{"cells": [...], "best": index or None}``; each cell has ``tp, pp, micro_batch, feasible,
    fits_in_memory, reason`` and, when feasible, ``step_s, tokens_per_s, tokens_per_s_per_gpu,
    memory_per_gpu_bytes, mfu_frac, bottleneck``.
    """
    from pydantic import ValidationError

    from gpusim.hwdb import load
    from gpusim.model.step import BOTTLENECKS, evaluate
    from gpusim.params import DEFAULT_PARAMS
    from gpusim.rows import resolve_hardware, resolve_workload, scenario_row, stack_rows

    db = db or load()
    params = params or DEFAULT_PARAMS
    wl = resolve_workload(scenario)
    cells: list[dict] = []
    rows, where = [], []
    for pp in pps:
        for tp in tps:
            for mb in micro_batches:
                cell = {"tp": int(tp), "pp": int(pp), "micro_batch": int(mb), "feasible": False,
                        "fits_in_memory": False, "reason": ""}
                try:
                    v = scenario.with_changes(tp=int(tp), pp=int(pp), per_gpu_batch=int(mb),
                                              vp=scenario.strategy.vp if pp > 1 else 1,
                                              recompute=scenario.strategy.recompute_mode)
                    hw = resolve_hardware(v, db)
                    rows.append(scenario_row(v, hw, wl, params))
                    where.append(len(cells))
                    cell["feasible"] = True
                except (GpusimError, ValidationError) as e:
                    msg = str(e)
                    cell["reason"] = msg.split("): ", 1)[-1] if "impossible layout" in msg else msg
                cells.append(cell)
    if rows:
        out = evaluate(stack_rows(rows), params)
        seq = np.array([r["seq_len"] for r in rows])
        n = np.array([r["n_gpus"] for r in rows])
        cap = np.array([r["mem_capacity_bytes"] for r in rows])
        for j, i in enumerate(where):
            tokens = float(out["throughput_samples_per_s"][j] * seq[j])
            fits = bool(out["fits_in_memory"][j])
            cells[i].update({
                "step_s": float(out["step_s"][j]), "tokens_per_s": tokens, "tokens_per_s_per_gpu": tokens / float(n[j]),
                "memory_per_gpu_bytes": float(out["memory_per_gpu_bytes"][j]), "mfu_frac": float(out["mfu_frac"][j]),
                "fits_in_memory": fits, "bottleneck": BOTTLENECKS[int(out["bottleneck_code"][j])],
                "pp_bubble_frac": float(out["pp_bubble_s"][j] / out["step_s"][j])})
            if not fits:
                cells[i]["reason"] = (f"does not fit: {units.format_bytes(cells[i]['memory_per_gpu_bytes'])} of "
                                      f"{units.format_bytes(float(cap[j]))}")
    ok = [i for i, c in enumerate(cells) if c["feasible"] and c["fits_in_memory"]]
    best = max(ok, key=lambda i: cells[i]["tokens_per_s"]) if ok else None
    return {"cells": cells, "best": best}


def _stage_order(stage: int, pp: int, vp: int, m: int) -> list[tuple[str, int, int]]:
    """The (kind, micro-batch, chunk) passes one stage runs, in Megatron's 1F1B / interleaved order."""
    total = m * vp
    if vp == 1:
        warm = min(pp - stage - 1, m)
    else:
        warm = min((pp - stage - 1) * 2 + (vp - 1) * pp, total)

    def fwd(k):  # k-th forward pass of this stage: groups of pp micro-batches per chunk
        return ("F", (k // (pp * vp)) * pp + k % pp, (k // pp) % vp)

    def bwd(k):
        return ("B", (k // (pp * vp)) * pp + k % pp, vp - 1 - (k // pp) % vp)

    order = [fwd(k) for k in range(warm)]
    f, b = warm, 0
    while f < total:
        order.append(fwd(f))
        f += 1
        order.append(bwd(b))
        b += 1
    order += [bwd(k) for k in range(b, total)]
    return order


def pipeline_schedule(pp: int, vp: int, n_micro: int, fwd_s, bwd_s, p2p_s: float = 0.0) -> dict[str, Any]:
    """Blocks of one step: ``{"blocks": [{stage, kind, micro_batch, chunk, start_s, end_s}], "step_s",
    "busy_frac"}``. ``fwd_s``/``bwd_s``: one chunk's forward/backward time on each stage (scalars or per-stage
    sequences); ``p2p_s``: one send between stages. Interleaving needs ``n_micro`` to be a multiple of ``pp``
    (as Megatron-LM requires)."""
    if vp > 1 and n_micro % pp:
        raise GpusimError(f"the interleaved schedule needs the micro-batches per step ({n_micro}) to be a multiple "
                          f"of pp ({pp})")
    tf = np.broadcast_to(np.asarray(fwd_s, dtype=np.float64), (pp,))
    tb = np.broadcast_to(np.asarray(bwd_s, dtype=np.float64), (pp,))
    orders = [_stage_order(s, pp, vp, n_micro) for s in range(pp)]
    done: dict[tuple[str, int, int, int], float] = {}
    free = [0.0] * pp
    pos = [0] * pp
    blocks = []
    remaining = sum(len(o) for o in orders)
    while remaining:
        progressed = False
        for s in range(pp):
            while pos[s] < len(orders[s]):
                kind, mb, c = orders[s][pos[s]]
                if kind == "F":
                    dep = (("F", mb, c, s - 1) if s > 0 else ("F", mb, c - 1, pp - 1) if c > 0 else None)
                else:
                    dep = (("B", mb, c, s + 1) if s < pp - 1 else ("B", mb, c + 1, 0) if c < vp - 1
                           else ("F", mb, c, s))
                if dep is not None and dep not in done:
                    break
                ready = 0.0 if dep is None else done[dep] + (p2p_s if dep[3] != s else 0.0)
                start = max(free[s], ready)
                end = start + (tf[s] if kind == "F" else tb[s])
                done[(kind, mb, c, s)] = end
                free[s] = end
                blocks.append({"stage": s, "kind": kind, "micro_batch": mb, "chunk": c, "start_s": start,
                               "end_s": end})
                pos[s] += 1
                remaining -= 1
                progressed = True
        if not progressed:  # cannot happen for a valid schedule; never hang on a bad one
            raise GpusimError("the pipeline schedule deadlocked (inconsistent stage orders)")
    step = max(b["end_s"] for b in blocks)
    busy = sum(b["end_s"] - b["start_s"] for b in blocks) / (pp * step)
    return {"blocks": blocks, "step_s": step, "busy_frac": busy, "pp": pp, "vp": vp, "n_micro": n_micro}
