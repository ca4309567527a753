"""Plan: deadline, budget and amount of training -> time vs cost, the best configurations, the bill of materials.

Wired to :func:`gpusim.plan`; while that module is not installed the page says so."""

import importlib.util
import json

import streamlit as st

from gpusim import track_record, units, viz
from gpusim.app_pages import shell

st.markdown("#### Plan: what to rent or buy to train in time and on budget")
if importlib.util.find_spec("gpusim.planning") is None:
    st.info("The procurement planner (`gpusim.plan`) is not installed yet, so this page has nothing to show. "
            "When it lands, this page takes a deadline, a budget and the amount of training (tokens or samples) "
            "and draws the time-vs-cost Pareto chart, the table of best configurations and the bill of materials.",
            icon=":material/hourglass_empty:")
    st.stop()

from gpusim.app_pages.state import PRECISIONS, workload_from_state
from gpusim.errors import GpusimError
from gpusim.workload import get_workload

ctx = shell.context()
db = shell.get_db()  # plans are over database hardware (a calibrated machine's own links never transfer)
state = ctx.state
BIND = shell.BIND
#: the precisions the page offers: the planner's (strategy.Precision), "auto" (resolved per GPU) and FP8 with current
#: scaling by gpusim plan's --precision name for it
PLAN_PRECISIONS = ("auto", *PRECISIONS, "fp8-cs")

with shell.guard("cannot read the workload"):
    custom = workload_from_state(state)
    wl = custom if custom is not None else get_workload(state["model"], seq_len=state.get("seq") or None)
st.caption(f"Workload from the sidebar: **{wl.name}** ({wl.params / units.GIGA:.3g} B parameters"
           + (f", {int(wl.tokens_per_sample)} tokens per sequence" if wl.sample_unit == "sequence" else "")
           + "). Hardware: every GPU and node in the database (or the ones picked below).")

with st.form("plan_form", border=True):
    c = st.columns([1.2, 0.8, 1, 1, 1.2])
    if wl.sample_unit == "sequence":
        amount = shell.number_input(c[0], "Training tokens (billions)", 1e-6, 1e9, 100.0, key="tokens_b", bind=BIND)
        epochs = 1.0
    else:
        amount = shell.number_input(c[0], "Training samples (millions)", 1e-6, 1e9, 1.28, key="samples_m", bind=BIND,
                                   help="per epoch (ImageNet-1k: 1.28 M)")
        epochs = shell.number_input(c[1], "Epochs", 0.01, 1e5, 90.0, key="epochs", bind=BIND)
    deadline_d = shell.number_input(c[2], "Deadline (days)", 0.001, 1e5, None, key="deadline_d", bind=BIND,
                                   placeholder="none")
    budget = shell.number_input(c[3], "Budget (USD)", 1.0, 1e12, None, key="budget_usd", bind=BIND, placeholder="none")
    mode = c[4].segmented_control("Rent or buy", shell.offer("plan_mode", ["cloud", "purchase", "both"]), default="cloud", required=True,
                                  key="plan_mode", bind=BIND)
    c = st.columns([2, 1, 1])
    gpus = c[0].multiselect("Only these GPUs", shell.offer("plan_gpus", sorted(db.gpus)), key="plan_gpus", bind=BIND, placeholder="all GPUs")
    max_gpus = shell.number_input(c[1], "At most GPUs", 1, 1_000_000, None, key="plan_max_gpus", bind=BIND,
                                 placeholder="default")
    max_gb = shell.number_input(c[2], "Largest global batch", 1, 100_000_000, None, key="plan_max_gb", bind=BIND,
                               placeholder="the largest published recipe's",
                               help="samples (sequences) per optimizer step your recipe converges with")
    # [issue 17] FP8 is where Hopper and Blackwell training goes: rank it here as `gpusim plan --precision` does
    precs = st.multiselect("Precisions", shell.offer("plan_prec", PLAN_PRECISIONS), key="plan_prec", bind=BIND,
                           placeholder="auto: bf16 mixed precision where the GPU has it",
                           help="each precision picked gets its own rows and the plan ranks them together: fp8 is "
                                "Transformer Engine's per-tensor delayed scaling, fp8-cs its current scaling "
                                "(NVIDIA's newer Hopper recipes), mxfp8 the MXFP8 block scaling of Blackwell, nvfp4 "
                                "Blackwell's FP4 with NVFP4 block scaling (a GPU "
                                "without a precision's tensor cores gets no row for it)")
    st.form_submit_button("Plan", type="primary", icon=":material/calculate:")


inuse = ctx.calibration
params, cal_note, cal_target = ctx.params, None, None
if inuse is not None:
    # a calibration transfers to one GPU model at a time (as `gpusim plan --calibration` does)
    cal = inuse.cal
    if cal.env.matched_gpu is None:
        params = shell.default_params()
        cal_note = (f"The calibration in use ({inuse.label}) measured {cal.env.device_name}, "
                    f"{'CPU processes' if cal.env.device_kind == 'cpu' else 'a device not in the database'}: its "
                    "efficiencies are relative to its own ceilings and do not transfer to database GPUs, so the plan "
                    "uses the default parameters.")
    elif len(gpus) > 1:
        params = shell.default_params()
        cal_note = (f"The calibration in use ({inuse.label}) transfers to one GPU model at a time: these {len(gpus)} "
                    "GPUs are planned with the default parameters; pick one GPU to use it.")
    else:
        target = gpus[0] if gpus else cal.env.matched_gpu
        with shell.guard("cannot apply the calibration"):
            _, params, _ = cal.apply({"gpu": target}, db)
        cal_target = target
        cal_note = f"Calibration in use ({inuse.label}) on {target}: " + "; ".join(cal.applied_notes) + "."
        if not gpus:
            gpus = [target]
            cal_note += " Only this GPU model is planned; pick others under 'Only these GPUs'."
    st.caption(cal_note)


@st.cache_data(show_spinner=False, max_entries=16)
def _plan(key: str, _wl, _params, kwargs: dict):
    from gpusim.planning import plan  # (gpusim.plan is the CLI's mirror; the page passes a Workload and arrays)

    res = plan(**({"workload": _wl} if state.get("wl") == "custom" else
                  {"model": state["model"], "seq_len": state.get("seq") or None}), db=shell.get_db(),
               params=_params, **kwargs)
    return res.to_dict(), res.to_dict(every=False)["configurations"]


kwargs = {"mode": mode, "precisions": tuple(precs) or ("auto",),
          "deadline_s": deadline_d * units.DAY if deadline_d else None,
          "budget_usd": float(budget) if budget else None, "gpus": list(gpus) or None,
          "max_gpus": int(max_gpus) if max_gpus else None, "max_global_batch": int(max_gb) if max_gb else None}
if wl.sample_unit == "sequence":
    kwargs["tokens"] = float(amount) * units.GIGA
else:
    kwargs.update(samples=float(amount) * units.MEGA, epochs=float(epochs))
key = json.dumps({"wl": {k: state.get(k) for k in ("wl", "model", "seq", "params_m", "gflop", "act_mib", "tokens")},
                  **kwargs}, sort_keys=True, default=str) + params.model_dump_json()
with st.spinner("Evaluating every configuration ..."), shell.guard("cannot plan this"):
    plan, configs = _plan(key, wl, params, kwargs)

rec = plan["recommendation"]
status = rec["status"]
if status == "ok":
    st.success(rec["summary"], icon=":material/check_circle:")
elif status == "no-plan":
    st.warning(rec["summary"], icon=":material/warning:")
else:
    st.error(rec.get("summary", "No configuration can run this training."), icon=":material/error:")

best = rec.get("configuration")


@st.cache_data(show_spinner=False, max_entries=64)
def _software_advice(key: str, config: dict, _wl, _params):
    """[issue 17] What FP8 and Megatron-Core's MoE software settings would add to the recommendation
    (gpusim.planning.recommendation_software_advice)."""
    from gpusim.planning import recommendation_software_advice

    return recommendation_software_advice(config, _wl, shell.get_db(), _params)


@st.cache_data(show_spinner=False, max_entries=64)
def _memory_record(key: str, config: dict, _wl, _params):
    """[stop 56] The recommended layout's memory against the published runs' peaks
    (gpusim.planning.recommendation_memory_record)."""
    from gpusim.planning import recommendation_memory_record

    return recommendation_memory_record(config, _wl, shell.get_db(), _params)


@st.cache_data(show_spinner=False, max_entries=64)
def _memory_fit(key: str, config: dict, _wl, _params, memory: dict | None):
    """[stop 56] Where that record's top passes the GPU's memory: the fastest layout on the recommended hardware whose
    top fits (gpusim.planning.recommendation_memory_fit)."""
    from gpusim.planning import recommendation_memory_fit

    return recommendation_memory_fit(config, _wl, shell.get_db(), _params, memory=memory)


@st.cache_data(show_spinner=False, max_entries=64)
def _time_interval(key: str, _cal, config: dict, _wl, seq):
    from gpusim.app_pages.analysis import plan_time_interval

    wkw = {"workload": _wl} if state.get("wl") == "custom" else {"model": state["model"], "seq_len": seq}
    return plan_time_interval(_cal, config, wkw, shell.get_db())


band = None
if best and cal_target is not None:
    try:
        band = _time_interval(key + inuse.digest + json.dumps(best, sort_keys=True, default=str), inuse.cal,
                              best, wl, state.get("seq") or None)
    except GpusimError as e:  # the plan stands; only its interval is missing
        band = {"note": f"no interval for the recommended configuration ({e})"}
if best:
    c = st.columns(6)
    band_text = ""
    if band and "lo_s" in band:
        band_text = (f"{band['level']:.0%} interval from the calibration: {units.format_duration(band['lo_s'])} to "
                     f"{units.format_duration(band['hi_s'])}")
    c[0].metric("Time to train", units.format_duration(best["time_to_train_s"]), help=band_text or None)
    c[1].metric("Cost", shell.fmt_usd(best["cost_usd"]), help=f"{best['cost_usd']:,.0f} USD")
    c[2].metric(f"GPUs ({best['gpu']})", f"{best['n_gpus']:,}", help=f"{best['nodes']} x {best['node']}")
    eff = best.get("scaling_efficiency_frac")
    c[3].metric("Scaling efficiency", "n/a" if eff is None or eff != eff else f"{eff:.0%}",
                help="n/a: one GPU cannot hold the model, so there is no one-GPU reference")
    c[4].metric("MFU", f"{best['mfu_frac']:.0%}")
    c[5].metric("Goodput", f"{best['goodput_frac']:.0%}", help="useful training time / wall time, after "
                                                              "checkpoints, evaluation and expected failures")
    if band and "lo_s" in band:
        st.caption(f"**With the calibration's uncertainty** ({band['level']:.0%} interval), the recommended "
                   f"configuration's time to train is {units.format_duration(band['lo_s'])} to "
                   f"{units.format_duration(band['hi_s'])} ({100 * band['lo_frac']:+.0f}% / "
                   f"{100 * band['hi_frac']:+.0f}%): its training steps' throughput interval, carried as time ∝ "
                   "1 / throughput (checkpoints, evaluation and restarts keep their modelled time).")
    elif band:
        st.caption(f"Calibration: {band['note']}.")
    _key = track_record.configuration_key(best, wl)  # how far such predictions were from published runs
    _record = None if _key is None else track_record.load().get(_key)
    _here = ""
    if _record is not None:  # carried to the training steps' part of the time to train
        _lo, _hi = _record.time_to_train_range(best["time_to_train_s"], best["train_s"])
        _here = (f"{units.format_duration(_lo)} to {units.format_duration(_hi)} to train (the training steps scaled; "
                 "checkpoints, evaluation and restarts as modelled)")
    shell.track_record_caption(_record, _key, calibrated=not shell.uses_default_model(ctx), here=_here,
                               lead="**Track record** of the recommended configuration's kind")
    # [stop 56] the recommended layout's memory against the published peaks, as `gpusim plan` prints it
    _mkey = key + json.dumps(best, sort_keys=True, default=str)
    _memory = _memory_record(_mkey, best, wl, params)
    shell.memory_caption(_memory, "the recommended layout", fit=_memory_fit(_mkey, best, wl, params, _memory),
                         where=" on the recommended hardware")
    from gpusim.simulation import SOFTWARE_ADVICE_LABELS

    for _a in _software_advice(_mkey, best, wl, params):  # [issue 17]
        st.info(f"**{SOFTWARE_ADVICE_LABELS[_a['id']]} for the recommendation**: {_a['message']} This plan ranked "
                "the hardware without it (pick the precision above, or `gpusim plan` with --precision and the MoE "
                "flags, to rank with it).",
                icon=":material/tune:")

def _label(r: dict) -> str:
    return f"{r['n_gpus']} x {r['gpu']} · {r['node']} · {r.get('layout') or r['strategy']}"


feasible = [r for r in configs if r.get("feasible")]
for r in feasible + plan["pareto"] + ([best] if best else []):
    r["label"] = _label(r)
left, right = st.columns([1.6, 1])
with left:
    if feasible:
        shell.chart(viz.pareto_figure(feasible, time_key="time_to_train_s", frontier=plan["pareto"],
                                      deadline_s=kwargs["deadline_s"], budget_usd=kwargs["budget_usd"],
                                      highlight=best, title="Time to train vs cost (best setting per hardware)"),
                    key="fig_pareto")
    else:
        st.info("No configuration is feasible: nothing to draw.")
with right:
    st.markdown("**Why**")
    for line in rec.get("reasons", []):
        st.markdown(f"- {line}")
    if plan.get("sensitivity"):
        shell.chart(viz.sensitivity_figure(plan["sensitivity"]), key="fig_sensitivity")


def _table(rows: list[dict]) -> list[dict]:
    return [{"mode": r["mode"], "node": r["node"], "GPUs": r["n_gpus"], "GPU": r["gpu"], "strategy": r["strategy"],
             "layout": r.get("layout") or "",  # [issue 12] the best Megatron layout of an LLM row
             "precision": r["precision"], "micro-batch": r["micro_batch"], "accum": r["accum"],
             "global batch": r["global_batch"],
             "time to train": (None if r.get("time_to_train_s") is None
                               else units.format_duration(r["time_to_train_s"])),
             "cost (USD)": r.get("cost_usd"), "USD/GPU-h": r.get("usd_per_gpu_hour"),
             "efficiency": r.get("scaling_efficiency_frac"), "MFU": r.get("mfu_frac"),
             "bottleneck": r.get("bottleneck"), "feasible": r.get("feasible"), "reason": r.get("reason")}
            for r in rows]


_COLS = {"cost (USD)": st.column_config.NumberColumn(format="%,.0f"),
         "USD/GPU-h": st.column_config.NumberColumn(format="%.3g"),
         "efficiency": st.column_config.NumberColumn(format="percent"), "MFU": st.column_config.NumberColumn(format="percent")}
st.markdown("##### The best configurations (the Pareto frontier: nothing else is both faster and cheaper)")
st.dataframe(_table(plan["pareto"]), hide_index=True, column_config=_COLS)
with st.expander(f"Every hardware option ({len(configs)} rows, {plan['configurations_evaluated']:,} configurations "
                 "evaluated)"):
    st.dataframe(_table(configs), hide_index=True, column_config=_COLS)

bom = plan.get("bom")
if bom:
    st.markdown(f"##### Bill of materials: {bom['nodes']} x {bom['node'] or 'node'} ({bom['gpus_per_node']} x "
                f"{bom['gpu']} each)")
    from gpusim.planning import bom_line

    for it in bom["items"]:  # the same sentences as `gpusim plan` prints (no raw keys)
        st.markdown(f"- {bom_line(it, warn=lambda t: f'**{t}**')}")

with st.expander("Assumptions and prices"):
    for a in plan.get("assumptions", []):
        st.markdown(f"- {a}")
    st.dataframe(plan.get("prices", []), hide_index=True)
st.caption(f"Planned in {plan.get('elapsed_s', 0.0):.2f} s (cached for the same inputs).")
shell.downloads("gpusim-plan", json_obj=plan, rows=configs)
