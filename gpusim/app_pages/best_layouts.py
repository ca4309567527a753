"""The layout search (gpusim.search) on the planner's pages: the best layouts of the sidebar's LLM at a global batch,
over tp, cp, pp, vp, ep, micro-batch and recomputation, with why the best beats the next and why the rest are out."""

from __future__ import annotations

import streamlit as st

from gpusim import units


@st.cache_data(show_spinner=False, max_entries=32)
def _search(key: str, _scenario, _db, _params, global_batch: int):
    from gpusim.search import explain_best, search_layouts, search_table
    from gpusim.simulation import nvlink_domain_gpus, resolve_hardware

    res = search_layouts(_scenario, db=_db, params=_params, global_batch=global_batch)
    domain = nvlink_domain_gpus(resolve_hardware(_scenario, _db))
    return {"rows": search_table(res), "explanation": explain_best(res, domain), "n": res["n"],
            "feasible": int(res["feasible"].sum())}


def render(ctx, scenario, global_batch: int, *, top: int = 15) -> dict | None:
    """Draw the best-layouts table for ``scenario`` (its hardware and GPU count) at ``global_batch``."""
    from gpusim.errors import GpusimError

    st.markdown(f"##### Best layouts (every tp x cp x pp x vp x ep x micro-batch x recomputation, global batch "
                f"{global_batch})")
    try:
        out = _search(f"{ctx.cache_key}|search|{global_batch}|{scenario.strategy.precision}", scenario, ctx.db,
                      ctx.params, int(global_batch))
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
