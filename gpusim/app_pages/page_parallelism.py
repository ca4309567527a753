"""Parallelism: tensor x pipeline layouts of the sidebar's LLM on its hardware (throughput and memory per cell,
the infeasible ones marked with why), the chosen layout's breakdown and its pipeline schedule."""

import streamlit as st

from gpusim import units, viz
from gpusim.app_pages import shell
from gpusim.errors import GpusimError
from gpusim.parallelism import layout_grid, pipeline_schedule
from gpusim.simulation import simulate, transformer_of

ctx = shell.require_scenario()
scn = ctx.scenario
db = ctx.db
st.markdown(f"#### Parallelism · {shell.scenario_title(ctx)}")

with shell.guard("cannot read the model"):
    from gpusim.simulation import resolve_workload

    wl = resolve_workload(scn)
spec = transformer_of(wl)
if spec is None:
    st.info(f"{wl.name} is not a transformer: tensor and pipeline parallelism apply to language models. Choose one "
            "in the sidebar (e.g. llama3-8b, llama3-70b, gpt3-175b).", icon=":material/info:")
    st.stop()

c1, c2, c3, c4, c5 = st.columns([1, 1, 1, 1, 1.2])
gb = c1.number_input("Global batch (sequences)", 1, 1_000_000, max(scn.gpus, 64), key="par_gb", bind=shell.BIND)
recompute = c2.selectbox("Recomputation", ["selective", "none", "full"], key="par_recompute", bind=shell.BIND)
vp = c3.number_input("Chunks per stage (vp)", 1, 64, 1, key="par_vp", bind=shell.BIND,
                     help="> 1: interleaved 1F1B (needs the layers divisible by pp x vp)")
kind = c4.selectbox("Data parallel", ["zero1", "ddp"], key="par_kind", bind=shell.BIND,
                    help="zero1: Megatron's distributed optimizer; ddp: every replica keeps all optimizer states")
micro = c5.selectbox("Micro-batch", [1, 2, 4, 8], key="par_micro", bind=shell.BIND)
st.caption("These settings replace the sidebar's strategy and per-GPU batch for this page; the model, GPUs, nodes, "
           "fabric and precision come from the sidebar.")
value = st.segmented_control("Colour by", ["tokens/s per GPU", "memory per GPU", "MFU"], key="par_value",
                             default="tokens/s per GPU", required=True, bind=shell.BIND)

top = [d for d in (1, 2, 4, 8, 16, 32, 64) if d <= scn.gpus]
domain = scn.gpus // scn.nodes
tps = [t for t in top if spec.n_heads % t == 0 and t <= 2 * domain]  # one step past the NVLink domain, to show it
pps = [p for p in top if spec.n_layers % p == 0]
base = scn.with_changes(kind=kind, global_batch=int(gb), recompute=recompute, vp=int(vp), per_gpu_batch=int(micro),
                        activation_checkpointing=False, cpu_offload=False)


@st.cache_data(show_spinner=False, max_entries=64)
def _grid(key: str, _base, _params, _db, tps: tuple, pps: tuple, micro: int):
    return layout_grid(_base, tps, pps, (micro,), db=_db, params=_params)


G = _grid(f"{ctx.cache_key}|{gb}|{recompute}|{vp}|{kind}|{micro}", base, ctx.params, db, tuple(tps), tuple(pps),
          int(micro))
cells, best = G["cells"], G["best"]
key, label = {"tokens/s per GPU": ("tokens_per_s_per_gpu", "tokens/s per GPU"),
              "memory per GPU": ("memory_gib", "GiB per GPU (fullest stage)"), "MFU": ("mfu_pct", "MFU %")}[value]
for c in cells:
    if c.get("memory_per_gpu_bytes") is not None:
        c["memory_gib"] = c["memory_per_gpu_bytes"] / units.GIB
        c["mfu_pct"] = 100.0 * c["mfu_frac"]
shell.chart(viz.layout_heatmap_figure(cells, value=key, label=label, best=best,
                                      title=f"{label} over tp x pp (micro-batch {micro}; ★ the best that fits)"),
            key="fig_layouts")
bad = [c for c in cells if not c["feasible"] or not c["fits_in_memory"]]
if bad:
    with st.expander(f"Why {len(bad)} of {len(cells)} layouts are out"):
        st.markdown("\n".join(f"- tp {c['tp']}, pp {c['pp']}: {c['reason']}" for c in bad))

# [issue 12] the search over every layout, context and expert parallelism included
from gpusim.app_pages import best_layouts  # noqa: E402

best_layouts.render(ctx, base, int(gb))

if best is None:
    st.warning("No layout on this grid fits in memory: try full recomputation, a smaller micro-batch, zero1, or more "
               "GPUs.", icon=":material/warning:")
    st.stop()

b = cells[best]
cl, cr = st.columns([1, 1])
tp_sel = cl.selectbox("Layout to inspect: tp", tps, index=tps.index(b["tp"]), key="par_tp", bind=shell.BIND)
pp_sel = cr.selectbox("pp", pps, index=pps.index(b["pp"]), key="par_pp", bind=shell.BIND)
with shell.guard(f"tp {tp_sel}, pp {pp_sel} is not possible"):
    chosen = base.with_changes(tp=int(tp_sel), pp=int(pp_sel), vp=int(vp) if pp_sel > 1 else 1)
    res = simulate(chosen, db=db, params=ctx.params)

m = st.columns(5)
m[0].metric("Step time", units.format_duration(res.step_s))
m[1].metric("Tokens/s", shell.fmt_count(res.tokens_per_s))
m[2].metric("Tokens/s per GPU", shell.fmt_count(res.tokens_per_s_per_gpu))
m[3].metric("MFU", f"{res.mfu_frac:.1%}", help=res.mfu_flop_convention)
m[4].metric("Memory per GPU (fullest stage)", units.format_bytes(res.memory_per_gpu_bytes),
            delta="fits" if res.fits_in_memory else "does not fit", delta_color="normal" if res.fits_in_memory
            else "inverse", delta_arrow="off")
par = res.parallelism
st.caption(f"tp {par['tp']} x pp {par['pp']} (vp {par['vp']}) x dp {par['dp']}, sequence parallelism "
           f"{'on' if par.get('sp') else 'off'}, {res.n_micro_batches} micro-batches of {micro} per step; "
           f"bottleneck: {res.bottleneck}")
shell.chart(viz.breakdown_figure(res.breakdown_s, title="Where one training step goes (critical path)"),
            key="fig_par_breakdown")
for r in res.recommendations:
    if r["id"].startswith("llm-"):
        st.markdown(f"- **{r['id']}**: {r['message']}")

d = res.detail
n_micro = res.n_micro_batches
pp_n, vp_n = par["pp"], par["vp"]
try:
    show_m = n_micro if n_micro * vp_n <= 256 else max(pp_n, (256 // vp_n) // pp_n * pp_n)
    sched = pipeline_schedule(pp_n, vp_n, show_m, d["fwd_s"] / vp_n, d["bwd_s"] / vp_n)
    note = "" if show_m == n_micro else f" (first {show_m} of {n_micro} micro-batches)"
    shell.chart(viz.pipeline_schedule_figure(sched, title=f"Pipeline schedule{note}"), key="fig_schedule")
    st.caption("Each bar is one micro-batch's forward or backward pass through a stage's chunk (the middle stages' "
               "times; communication not drawn). White space is the pipeline bubble: warm-up and cool-down, "
               "(pp - 1) / (vp x micro-batches) of the steady state.")
except GpusimError as e:
    st.info(str(e))
shell.downloads("gpusim-parallelism", json_obj={"grid": G, "chosen": res.to_dict()}, rows=cells)
