"""The layout search (gpusim.search) on the planner's pages: the best layouts of the sidebar's LLM at a global batch,
over tp, cp, pp, vp, ep, micro-batch and recomputation, with why the best beats the next and why the rest are out.

One search serves the whole Parallelism page: :func:`search` runs it once per scenario, global batch and pins
(cached), :func:`cells` folds its rows into the tp x pp heatmap (each cell: the best row of the search at that tp
and pp), and :func:`render` draws its table. So the heatmap's best cell is the table's first row.
"""

from __future__ import annotations

from collections import Counter

import streamlit as st

from gpusim import units
from gpusim.rules import R_MEMORY, REASONS

#: the pins the page offers (keys of gpusim.search.Pins), in the order the page names them
PIN_FIELDS = ("micro_batch", "recompute", "vp")
#: how the search words a layout that is out for memory, before its figures
MEMORY_REASON = REASONS[R_MEMORY]


# cache_resource: the rows are shared, not copied per rerun (nothing here or in the page changes them)
@st.cache_resource(show_spinner=False, max_entries=64)
def _search(key: str, _scenario, _db, _params, global_batch: int, pins: tuple) -> dict:
    from gpusim.search import Pins, explain_best, search_layouts, search_table
    from gpusim.simulation import nvlink_domain_gpus, resolve_hardware

    res = search_layouts(_scenario, db=_db, params=_params, global_batch=global_batch, pins=Pins(**dict(pins)))
    domain = nvlink_domain_gpus(resolve_hardware(_scenario, _db))
    return {"rows": search_table(res), "explanation": explain_best(res, domain), "n": res["n"],
            "feasible": int(res["feasible"].sum()), "domain": domain}


def search(ctx, scenario, global_batch: int, pins: dict | None = None) -> dict:
    """The search of ``scenario``'s layouts at ``global_batch`` with ``pins`` (``{field: value}`` of
    :class:`gpusim.search.Pins`, None values left out), cached on the scenario, the batch and the pins:
    ``{"rows": search_table rows (best feasible first), "explanation", "n", "feasible", "domain"}``."""
    pins_t = tuple(sorted((k, v) for k, v in (pins or {}).items() if v is not None))
    st_ = scenario.strategy
    key = "|".join(map(str, (ctx.cache_key, scenario.model_dump_json(exclude={"workload"}), global_batch, pins_t,
                             st_.kind, st_.precision)))
    return _search(key, scenario, ctx.db, ctx.params, int(global_batch), pins_t)


def layout_label(r: dict) -> str:
    """``tp 2 cp 4 pp 8 vp 5 (dp 1), micro-batch 1, recompute none`` for one search row."""
    ep = f" ep {r['ep']}" if r["ep"] > 1 else ""
    return (f"tp {r['tp']} cp {r['cp']} pp {r['pp']} vp {r['vp']}{ep} (dp {r['dp']}), micro-batch {r['micro_batch']}, "
            f"recompute {r['recompute']}")


def cells(rows: list[dict], n_gpus: int) -> tuple[list[dict], int | None]:
    """The tp x pp heatmap's cells from the search's rows: each (tp, pp) the search tried is one cell holding its
    best feasible row (``tokens_per_s_per_gpu``, ``memory_gib``, ``mfu_pct`` and the whole layout as ``layout``),
    or, when none there fits, the most common reason; ``fits_in_memory`` is False when every row there was out for
    memory. Returns ``(cells, index of the best cell)``: the best cell holds the search's first row."""
    best_at: dict[tuple[int, int], dict] = {}
    why: dict[tuple[int, int], Counter] = {}
    example: dict[tuple[int, str], str] = {}  # (cell, kind of reason) -> the first full reason of that kind
    for r in rows:  # best feasible first, so the first feasible row of a (tp, pp) is its best
        k = (r["tp"], r["pp"])
        if r["feasible"]:
            best_at.setdefault(k, r)
        else:
            kind = r["reason"].split(" (")[0]
            why.setdefault(k, Counter())[kind] += 1
            example.setdefault((k, kind), r["reason"])
    keys = sorted(set(best_at) | set(why), key=lambda k: (k[1], k[0]))
    out, best = [], None
    top = next((r for r in rows if r["feasible"]), None)
    for k in keys:
        tp, pp = k
        r = best_at.get(k)
        if r is not None:
            out.append({"tp": tp, "pp": pp, "micro_batch": r["micro_batch"], "feasible": True, "fits_in_memory": True,
                        "reason": "", "layout": layout_label(r), "row": r,
                        "tokens_per_s_per_gpu": r["tokens_per_s"] / n_gpus,
                        "memory_gib": r["memory_per_gpu_bytes"] / units.GIB, "mfu_pct": 100.0 * r["mfu_frac"]})
            if r is top:
                best = len(out) - 1
        else:
            reasons = why[k]
            kind, n = reasons.most_common(1)[0]
            memory = set(reasons) == {MEMORY_REASON}
            rest = sum(reasons.values()) - n
            out.append({"tp": tp, "pp": pp, "micro_batch": None, "feasible": memory, "fits_in_memory": False,
                        "reason": example[(k, kind)] + (f"; {rest:,} more layouts at this tp, pp are out for other "
                                                        "reasons" if rest else "")})
    return out, best


def render(ctx, scenario, global_batch: int, out: dict | None = None, *, top: int = 15, what: str = "") -> dict | None:
    """Draw the best-layouts table for ``scenario`` (its hardware and GPU count) at ``global_batch``: the search
    ``out`` (of :func:`search`), or a search without pins; ``what`` says what the search covered."""
    from gpusim.errors import GpusimError

    st.markdown(f"##### Best layouts ({what or 'every tp x cp x pp x vp x ep x micro-batch x recomputation'}, "
                f"global batch {global_batch:,})")
    if out is None:
        try:
            out = search(ctx, scenario, global_batch)
        except GpusimError as e:
            st.info(str(e))
            return None
    rows = out["rows"]
    good = [r for r in rows if r["feasible"]][:top]
    st.caption(f"{out['n']:,} layouts searched, {out['feasible']:,} fit. " + (f"Best: {out['explanation']}."
                                                                             if good else "None fits."))
    if good:
        st.dataframe([{"tp": r["tp"], "cp": r["cp"], "pp": r["pp"], "vp": r["vp"], "ep": r["ep"], "dp": r["dp"],
                       "micro-batch": r["micro_batch"], "recompute": r["recompute"],
                       "tokens/s per GPU": r["tokens_per_s"] / scenario.gpus, "MFU": r["mfu_frac"],
                       "bubble": r["bubble_frac"], "GiB per GPU": r["memory_per_gpu_bytes"] / units.GIB}
                      for r in good], hide_index=True, key="best_layouts_table",
                     column_config={"MFU": st.column_config.NumberColumn(format="percent"),
                                    "bubble": st.column_config.NumberColumn(format="percent"),
                                    "tokens/s per GPU": st.column_config.NumberColumn(format="%,.0f"),
                                    "GiB per GPU": st.column_config.NumberColumn(format="%.1f")})
    counts: dict[str, int] = {}
    for r in rows:
        if not r["feasible"]:
            k = r["reason"].split(" (")[0]
            counts[k] = counts.get(k, 0) + 1
    if counts:
        with st.expander(f"Why {sum(counts.values()):,} layouts are out"):
            st.markdown("\n".join(f"- {v:,}: {k}" for k, v in sorted(counts.items(), key=lambda kv: -kv[1])))
    return out
