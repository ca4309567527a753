"""Parallelism: the layouts of the sidebar's LLM on its hardware, from one layout search (gpusim.search) at the
page's global batch: a tp x pp heatmap (each cell the best layout the search found at that tp and pp, over cp, vp,
ep, micro-batch and recomputation), the table of the best layouts, and the chosen cell's breakdown and pipeline
schedule. The heatmap's star is the table's first row; the page's own settings (global batch, data-parallel
kind, and what it pins) are in its header."""

import typing

import streamlit as st

from gpusim import track_record, units, viz
from gpusim.app_pages import best_layouts, shell
from gpusim.diagnose import layer_lines
from gpusim.errors import GpusimError
from gpusim.parallelism import pipeline_schedule
from gpusim.search import layout_scenario
from gpusim.simulation import resolve_workload, simulate, transformer_of
from gpusim.strategy import CpComm

CP_COMMS = typing.get_args(CpComm)

ctx = shell.require_scenario()
scn = ctx.scenario
db = ctx.db
header = st.container()  # filled once the page's own settings are read

with shell.guard("cannot read the model"):
    wl = resolve_workload(scn)
spec = transformer_of(wl)
if spec is None:
    header.markdown(f"#### Parallelism · {shell.scenario_title(ctx)}")
    st.info(f"{wl.name} is not a transformer: tensor and pipeline parallelism apply to language models. Choose one "
            "in the sidebar (e.g. llama3-8b, llama3-70b, gpt3-175b).", icon=":material/info:")
    st.stop()

ANY = "any"
c1, c2, c3, c4, c5, c6 = st.columns([1, 1, 1, 1, 1, 1.2])
gb = int(shell.number_input(c1, "Global batch (sequences)", 1, 1_000_000, max(scn.gpus, 64), key="par_gb",
                            bind=shell.BIND))
recompute = c2.selectbox("Recomputation", shell.offer("par_recompute", [ANY, "selective", "none", "full"]),
                         key="par_recompute", bind=shell.BIND,
                         help="any: the search tries none, selective and full; or pin one")
vp = shell.number_input(c3, "Chunks per stage (vp)", 1, 64, None, key="par_vp", bind=shell.BIND, placeholder=ANY,
                        help="empty: the search tries every vp that divides the layers; > 1: interleaved 1F1B")
kind = c4.selectbox("Data parallel", shell.offer("par_kind", ["zero1", "ddp"]), key="par_kind", bind=shell.BIND,
                    help="zero1: Megatron's distributed optimizer; ddp: every replica keeps all optimizer states")
micro = c5.selectbox("Micro-batch", shell.offer("par_micro", [ANY, "1", "2", "4", "8"]), key="par_micro",
                     bind=shell.BIND,
                     help="any: the search tries 1, 2, 4 and 8; or pin one")
# [issue 17] how layouts with cp > 1 exchange the attention's inputs (the CLI's --cp-comm)
cp_comm = c6.selectbox("Context-parallel exchange", shell.offer("par_cp_comm", list(CP_COMMS)),
                       key="par_cp_comm", bind=shell.BIND,
                       help="ring: ring attention, K/V blocks passed point to point under the attention (Transformer "
                            "Engine p2p); all-gather: K/V gathered before the attention, not overlapped (Llama 3); "
                            "a2a: DeepSpeed-Ulysses all-to-alls over the heads, not overlapped, only where each tp "
                            "rank's attention and K/V heads divide by cp; a2a+p2p: Ulysses among the cp ranks of one "
                            "NVLink domain (their heads must divide by that count) and ring attention across domains")
pins = {"recompute": None if recompute == ANY else recompute, "vp": int(vp) if vp else None,
        "micro_batch": None if micro == ANY else int(micro)}
pinned = ", ".join(f"{name} {v}" for name, v in (("micro-batch", pins["micro_batch"]), ("recompute", pins["recompute"]),
                                                 ("vp", pins["vp"])) if v is not None)
own = (f"{kind}, {scn.strategy.precision}, global batch {gb:,}, "
       + (f"cp exchange {cp_comm}, " if cp_comm != "ring" else "")
       + (f"{pinned} pinned, the rest searched" if pinned else "micro-batch, recomputation and vp searched"))
header.markdown(f"#### Parallelism · {shell.scenario_title(ctx, strategy=own)}")
st.caption("This page runs its own strategy (above): the sidebar's strategy and per-GPU batch do not apply here; "
           "the model, GPUs, nodes, fabric and precision come from the sidebar.")
value = st.segmented_control("Colour by", shell.offer("par_value", ["tokens/s per GPU", "memory per GPU", "MFU"]),
                             key="par_value",
                             default="tokens/s per GPU", required=True, bind=shell.BIND)

base = scn.with_changes(kind=kind, global_batch=gb, recompute=pins["recompute"] or "selective", vp=1,
                        cp_comm=cp_comm,
                        per_gpu_batch=pins["micro_batch"] or 1, activation_checkpointing=False, cpu_offload=False)
with shell.guard("cannot search the layouts"):
    out = best_layouts.search(ctx, base, gb, pins)
cells, best = best_layouts.cells(out, scn.gpus)

key, label = {"tokens/s per GPU": ("tokens_per_s_per_gpu", "tokens/s per GPU"),
              "memory per GPU": ("memory_gib", "GiB per GPU (fullest stage)"), "MFU": ("mfu_pct", "MFU %")}[value]
shell.chart(viz.layout_heatmap_figure(cells, value=key, label=label, best=best,
                                      title=f"{label} over tp x pp: each cell the best layout the search found there "
                                            "(★ = the table's first row)"),
            key="fig_layouts")
bad = [c for c in cells if not c["fits_in_memory"]]
if bad:
    with st.expander(f"Why {len(bad)} of {len(cells)} tp x pp cells have no layout that fits"):
        st.markdown("\n".join(f"- tp {c['tp']}, pp {c['pp']}: {c['reason']}" for c in bad))

best_layouts.render(ctx, base, gb, out, what="every tp x cp x pp x vp x ep x micro-batch x recomputation"
                    + (f" with {pinned}" if pinned else ""))

if best is None:
    st.warning("No layout fits in memory: try full recomputation, a smaller micro-batch, zero1, or more GPUs.",
               icon=":material/warning:")
    st.stop()

tps = sorted({c["tp"] for c in cells})
pps = sorted({c["pp"] for c in cells})
b = cells[best]
cl, cr = st.columns([1, 1])
tp_sel = cl.selectbox("Layout to inspect: tp", shell.offer("par_tp", tps), index=tps.index(b["tp"]), key="par_tp",
                      bind=shell.BIND)
pp_sel = cr.selectbox("pp", shell.offer("par_pp", pps), index=pps.index(b["pp"]), key="par_pp", bind=shell.BIND)
cell = next((c for c in cells if c["tp"] == tp_sel and c["pp"] == pp_sel and c.get("row")), None)
if cell is None:
    why = next((c["reason"] for c in cells if c["tp"] == tp_sel and c["pp"] == pp_sel), "the search has no such layout")
    st.info(f"tp {tp_sel}, pp {pp_sel}: no layout fits ({why}). Pick a coloured cell of the heatmap.",
            icon=":material/info:")
    st.stop()
r = cell["row"]
with shell.guard(f"tp {tp_sel}, pp {pp_sel} is not possible"):
    # the layout as the search ran it (unequal stages where pp x vp does not divide the layers: Llama 3 405B's 126
    # on 16 stages)
    chosen = layout_scenario(base, r)
    res = simulate(chosen, db=db, params=ctx.params)

st.markdown(f"**{cell['layout']}**" + (" · the best layout of the search" if cell is b else
                                       " · the best at this tp and pp"))
m = st.columns(5)
m[0].metric("Step time", units.format_duration(res.step_s))
m[1].metric("Tokens/s", shell.fmt_count(res.tokens_per_s))
m[2].metric("Tokens/s per GPU", shell.fmt_count(res.tokens_per_s_per_gpu))
m[3].metric("MFU", f"{res.mfu_frac:.1%}", help=res.mfu_flop_convention)
m[4].metric("Memory per GPU (fullest stage)", units.format_bytes(res.memory_per_gpu_bytes),
            delta="fits" if res.fits_in_memory else "does not fit", delta_color="normal" if res.fits_in_memory
            else "inverse", delta_arrow="off")
par = res.parallelism
bubble_frac = res.breakdown_s.get("pp_bubble_s", 0.0) / res.step_s if res.step_s > 0 else 0.0
st.caption(f"tp {par['tp']} x cp {par.get('cp', 1)} x pp {par['pp']} (vp {par['vp']}) x dp {par['dp']}, sequence "
           f"parallelism {'on' if par.get('sp') else 'off'}, {res.n_micro_batches} micro-batches of "
           f"{r['micro_batch']} per step; pipeline bubble {bubble_frac:.0%} of the step; bottleneck: {res.bottleneck}")
# how far such layouts' predictions were from published runs
shell.result_track_record_caption(ctx, res, resolve_workload(chosen), res.tokens_per_s_per_gpu, "tokens/s per GPU")
# [stop 55] the layout's memory against the published peaks; [stop 56] under the search's best, where that range's
# top passes the GPU, the fastest layout whose top still fits
shell.memory_record_caption(res, ctx.params, fit=out.get("memory_fit") if cell is b else None)
_skey = track_record.search_band_key(resolve_workload(chosen), int(r["ep"]))
if cell is b and _skey is not None:
    # [issue 17] what the search's best promised on published tuned recipes of the kind (gpusim sweep's "search record")
    _sband = track_record.load().get(_skey)
    _here = "" if _sband is None else "{:.1%} to {:.1%} MFU".format(*_sband.speed_range(res.mfu_frac))
    shell.track_record_caption(_sband, _skey, calibrated=not shell.uses_default_model(ctx), here=_here,
                               lead="**Search record**")
shell.chart(viz.breakdown_figure(res.breakdown_s, title="Where one training step goes (critical path)"),
            key="fig_par_breakdown")
lines = layer_lines(res.layer_s)  # [issue 17] where one layer's time goes
if lines:
    st.markdown(f"**{lines[0]}**\n\n" + "\n".join(f"- {ln.strip()}" for ln in lines[1:]))
for rec in res.recommendations:
    if rec["id"].startswith("llm-"):
        st.markdown(f"- **{rec['id']}**: {rec['message']}")

d = res.detail
n_micro = res.n_micro_batches
pp_n, vp_n = par["pp"], par["vp"]
try:
    # at most 64 passes per stage drawn (more are hairlines, and a heavy figure to send on every rerun)
    show_m = n_micro if n_micro * vp_n <= 64 else max(pp_n, (64 // vp_n) // pp_n * pp_n)
    sched = pipeline_schedule(pp_n, vp_n, show_m, d["fwd_s"] / vp_n, d["bwd_s"] / vp_n)
    note = "" if show_m == n_micro else f", the first {show_m} of {n_micro} micro-batches"
    shell.chart(viz.pipeline_schedule_figure(sched, title=f"Pipeline schedule{note}", bubble_frac=bubble_frac),
                key="fig_schedule")
    st.caption("Each bar is one micro-batch's forward or backward pass through a stage's chunk (the middle stages' "
               "compute; communication not drawn). White space is the pipeline bubble: warm-up and cool-down, "
               "(pp - 1) / (vp x micro-batches) of the steady state. The bubble in the title is the model's share "
               "of the whole step (pipeline bubble / step time), the figure the advice and the table give.")
except GpusimError as e:
    st.info(str(e))
shell.downloads("gpusim-parallelism", json_obj={"search": {k: v for k, v in out.items()
                                                           if k not in ("rows", "cell_reasons")},
                                                "cells": [{k: v for k, v in c.items() if k != "row"} for c in cells],
                                                "chosen": res.to_dict()},
                rows=[{k: v for k, v in c.items() if k != "row"} for c in cells])
