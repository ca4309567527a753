"""The layout search (gpusim.search) on the planner's pages: the best layouts of the sidebar's LLM at a global batch,
over tp, cp, pp, vp, ep, micro-batch and recomputation, with why the best beats the next and why the rest are out.

One search serves the whole Parallelism page: :func:`search` runs it once per scenario, global batch and pins
(cached) and keeps what the page shows (:func:`fold`: the best rows, the best row at each tp x pp, why the rest are
out), :func:`cells` makes the tp x pp heatmap of it (each cell: the best row of the search at that tp and pp), and
:func:`render` draws its table. So the heatmap's best cell is the table's first row.
"""

from __future__ import annotations

import streamlit as st

from gpusim import units
from gpusim.rules import R_MEMORY, REASONS

#: the pins the page offers (keys of gpusim.search.Pins), in the order the page names them
PIN_FIELDS = ("micro_batch", "recompute", "vp")
#: how the search words a layout that is out for memory, before its figures
MEMORY_REASON = REASONS[R_MEMORY]


#: rows of the table the page shows (best first)
TOP = 15


# cache_resource: the result is shared, not copied per rerun (nothing here or in the page changes it)
@st.cache_resource(show_spinner=False, max_entries=64)
def _search(key: str, _scenario, _db, _params, global_batch: int, pins: tuple) -> dict:
    from gpusim.search import Pins, explain_best, search_layouts

    res = search_layouts(_scenario, db=_db, params=_params, global_batch=global_batch, pins=Pins(**dict(pins)))
    from gpusim.simulation import nvlink_domain_gpus, resolve_hardware
    from gpusim.track_record import memory_record_fit

    domain = nvlink_domain_gpus(resolve_hardware(_scenario, _db))
    return {**fold(res), "explanation": explain_best(res, domain), "n": res["n"],
            "feasible": int(res["feasible"].sum()), "domain": domain,
            "memory_fit": memory_record_fit(res)}  # [stop 56] the fastest layout whose memory record's top fits


def fold(res: dict, top: int = TOP) -> dict:
    """What the page shows of a search (``gpusim.search.search_layouts``), without a row per layout (a MoE search
    has 40,000 of them): ``rows``, the search's table rows (``search_table``) of the ``top`` best layouts and of the
    best layout at every tp x pp, best first; ``cell_reasons``, for every tp x pp where nothing fits,
    ``[(reason, count, example)]`` most common first (``example``: the full reason of one such layout); and
    ``out_counts``, ``{reason: layouts}`` over every layout that is out."""
    import numpy as np

    from gpusim.search import reason_text, search_table

    lay, order, code = res["layouts"], np.asarray(res["order"], dtype=np.int64), res["reason_code"]
    tp, pp = lay["tp"].astype(np.int64), lay["pp"].astype(np.int64)
    pair = tp * (int(pp.max(initial=1)) + 1) + pp
    _, first = np.unique(pair[order], return_index=True)  # the first (best) feasible layout of each tp x pp
    keep = np.union1d(np.arange(min(top, len(order))), first)  # ranks in the order, ascending = best first
    rows = search_table({**res, "order": order[keep]}, top=len(keep))
    out_idx = np.flatnonzero(~res["feasible"])
    out_counts: dict[str, int] = {}
    for c, n in zip(*np.unique(code[out_idx], return_counts=True)):
        out_counts[REASONS[int(c)]] = int(n)
    cell_reasons: dict[tuple[int, int], list] = {}
    fits = set(pair[order].tolist())
    for pv in np.unique(pair[out_idx]):
        if int(pv) in fits:
            continue
        at = out_idx[pair[out_idx] == pv]
        codes, counts = np.unique(code[at], return_counts=True)
        ranked = sorted(zip(codes.tolist(), counts.tolist()), key=lambda cn: -cn[1])
        cell_reasons[(int(tp[at[0]]), int(pp[at[0]]))] = [
            (REASONS[c], n, reason_text(res, int(at[code[at] == c][0]))) for c, n in ranked]
    return {"rows": rows, "cell_reasons": cell_reasons, "out_counts": out_counts}


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


def cells(out: dict, n_gpus: int) -> tuple[list[dict], int | None]:
    """The tp x pp heatmap's cells from a search (:func:`search`): each (tp, pp) the search tried is one cell holding
    its best feasible row (``tokens_per_s_per_gpu``, ``memory_gib``, ``mfu_pct`` and the whole layout as ``layout``),
    or, when none there fits, the most common reason; ``fits_in_memory`` is False when every layout there was out
    for memory. Returns ``(cells, index of the best cell)``: the best cell holds the search's first row."""
    best_at: dict[tuple[int, int], dict] = {}
    for r in out["rows"]:  # best first, so the first row of a (tp, pp) is its best
        best_at.setdefault((r["tp"], r["pp"]), r)
    why = out["cell_reasons"]
    keys = sorted(set(best_at) | set(why), key=lambda k: (k[1], k[0]))
    top = out["rows"][0] if out["rows"] else None
    cells_, best = [], None
    for k in keys:
        tp, pp = k
        r = best_at.get(k)
        if r is not None:
            cells_.append({"tp": tp, "pp": pp, "micro_batch": r["micro_batch"], "feasible": True, "fits_in_memory": True,
                           "reason": "", "layout": layout_label(r), "row": r,
                           "tokens_per_s_per_gpu": r["tokens_per_s"] / n_gpus,
                           "memory_gib": r["memory_per_gpu_bytes"] / units.GIB, "mfu_pct": 100.0 * r["mfu_frac"]})
            if r is top:
                best = len(cells_) - 1
        else:
            reasons = why[k]
            _, n, example = reasons[0]
            rest = sum(c for _, c, _ in reasons) - n
            cells_.append({"tp": tp, "pp": pp, "micro_batch": None, "feasible": {r for r, _, _ in reasons} == {MEMORY_REASON},
                           "fits_in_memory": False,
                           "reason": example + (f"; {rest:,} more layouts at this tp, pp are out for other reasons"
                                                if rest else "")})
    return cells_, best


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
    good = out["rows"][:top]
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
    counts = out["out_counts"]
    if counts:
        with st.expander(f"Why {sum(counts.values()):,} layouts are out"):
            st.markdown("\n".join(f"- {v:,}: {k}" for k, v in sorted(counts.items(), key=lambda kv: -kv[1])))
    return out
