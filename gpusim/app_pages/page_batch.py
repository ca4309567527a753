"""Batch and utilisation: throughput, GPU utilisation, MFU and scaling efficiency vs the per-GPU batch, with
the memory limit and the 80% utilisation target marked."""

import streamlit as st

from gpusim import viz
from gpusim.app_pages import analysis as A
from gpusim.app_pages import shell
from gpusim.diagnose import UTIL_TARGET_FRAC

ctx = shell.require_scenario()
scn = ctx.scenario
st.markdown(f"#### Batch and utilisation · {shell.scenario_title(ctx)}")


@st.cache_data(show_spinner=False, max_entries=64)
def _batch(key: str, _scn, _params, _db):
    db = _db
    # first pass learns the memory limit, second covers the batches up to a little beyond it
    rows, max_b = A.batch_curve(_scn, A.batch_candidates(_scn.strategy.per_gpu_batch), db=db, params=_params)
    want = A.batch_candidates(_scn.strategy.per_gpu_batch, max_b)
    if want != [r["per_gpu_batch"] for r in rows]:
        rows, max_b = A.batch_curve(_scn, want, db=db, params=_params)
    return rows, max_b


with shell.guard("cannot compute the batch curve"):
    rows, max_b = _batch(ctx.cache_key, scn, ctx.params, ctx.db)

cur = scn.strategy.per_gpu_batch
left, right = st.columns(2)
with left:
    shell.chart(viz.batch_throughput_figure(rows, max_micro_batch=max_b, current_batch=cur), key="fig_batch_tput")
with right:
    shell.chart(viz.batch_utilisation_figure(rows, util_target_frac=UTIL_TARGET_FRAC, max_micro_batch=max_b,
                                             current_batch=cur), key="fig_batch_util")

now = next(r for r in rows if r["per_gpu_batch"] == cur)
fitting = [r for r in rows if r["fits_in_memory"]]
above = [r for r in fitting if r["gpu_util_frac"] >= UTIL_TARGET_FRAC]
best = max(fitting, key=lambda r: r["throughput_samples_per_s"]) if fitting else None
c = st.columns(5)
c[0].metric("GPU busy now", f"{now['gpu_util_frac']:.0%}", help=f"batch {cur}; target {UTIL_TARGET_FRAC:.0%}")
c[1].metric(f"Smallest batch above {UTIL_TARGET_FRAC:.0%} busy", f"{above[0]['per_gpu_batch']:,}" if above else "none")
c[2].metric("Largest batch that fits", f"{max_b:,}" if max_b >= 1 else "none")
if best:
    gain = best["throughput_samples_per_s"] / now["throughput_samples_per_s"] - 1.0
    c[3].metric("Best batch that fits", f"{best['per_gpu_batch']:,}", delta=f"{gain:+.0%} samples/s vs now")
c[4].metric("Scaling efficiency now", f"{now['scaling_efficiency_frac']:.0%}")
st.caption("GPU busy = kernel time / step time (what `nvidia-smi` utilisation approximates). Small per-GPU batches "
           "leave the GPU waiting on kernel launches and communication; larger ones raise utilisation until memory "
           "runs out (crosses: does not fit). A larger global batch needs a rescaled learning rate with warm-up."
           + (" A measured one-GPU throughput applies to one batch only and is not used here." if scn.baseline_throughput
              else ""))
with st.expander("Table"):
    st.dataframe(rows, hide_index=True)
shell.downloads("gpusim-batch", json_obj={"max_micro_batch": max_b, "rows": rows}, rows=rows)
