"""Calibration: load a calibration file (or fit a profile on the fly); what was measured, the fitted parameters
with their uncertainty, measured vs fitted per benchmark, the held-out DDP steps; and use it on every page.

Loading happens in widget callbacks (they run before the script, so they may move the sidebar to the
calibrated machine); a file that cannot be read leaves a message here, never a traceback."""

import tempfile
from pathlib import Path

import streamlit as st

from gpusim import units, viz
from gpusim.app_pages import analysis as A
from gpusim.app_pages import shell
from gpusim.app_pages.state import CALIBRATED
from gpusim.errors import GpusimError

#: session keys: the last loading problem, and the generation of the uploader (a new one after clearing)
ERROR_KEY = "_cal_error"
UPLOAD_GEN_KEY = "_cal_upload_gen"


def _upload_key() -> str:
    return f"cal_upload_{st.session_state.get(UPLOAD_GEN_KEY, 0)}"


def _failed(message: str) -> None:
    st.session_state[ERROR_KEY] = message


def _loaded(cal, label: str, fitted_from: list[str] | None = None) -> None:
    st.session_state.pop(ERROR_KEY, None)
    shell.use_calibration(cal, label, fitted_from)


def _load_upload() -> None:
    """Callback of the uploader: read the uploaded calibration file."""
    from gpusim.calibration import load_calibration

    f = st.session_state.get(_upload_key())
    if f is None:
        return
    name = Path(f.name).name
    try:
        text = f.getvalue().decode("utf-8")
    except UnicodeDecodeError:
        _failed(f"{name}: not a calibration file: it is not text (a calibration file is the JSON that "
                "`gpusim fit PROFILE -o calibration.json` writes)")
        return
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / name
        path.write_text(text)
        try:
            cal = load_calibration(path)
        except GpusimError as e:
            _failed(str(e).replace(str(path), name) + (" (a profile directory or nccl-tests output can be fitted "
                                                        "here: give its path on the right)"
                                                        if "not a gpusim calibration file" in str(e) else ""))
            return
        except Exception as e:  # noqa: BLE001  (a file the format checks let through but cannot be used)
            _failed(f"{name}: cannot use this calibration file ({type(e).__name__}: {e})")
            return
    cal.path = name
    _loaded(cal, name)


def _load_path() -> None:
    """Callback of the Load button: a calibration file, or profile directories / nccl-tests output to fit."""
    from gpusim.calibration import fit, load_calibration
    from gpusim.nccl_tests import looks_like_nccl_tests

    raw = st.session_state.get("cal_path") or ""
    paths = [Path(p.strip()).expanduser() for p in raw.splitlines() if p.strip()]
    if not paths:
        _failed("give the path of a calibration file, of a profile directory (from `gpusim calibrate`) or of "
                "nccl-tests output")
        return
    try:
        one = paths[0]
        if len(paths) == 1 and one.is_file() and not looks_like_nccl_tests(one):
            cal = load_calibration(one)
            _loaded(cal, one.name)
        else:
            missing = [str(p) for p in paths if not p.exists()]
            if missing:
                _failed(f"{', '.join(missing)}: no such file or directory (on the machine that runs the app)")
                return
            cal = fit([str(p) for p in paths], db=shell.get_db())
            label = "fit of " + ", ".join(p.name or str(p) for p in paths)
            _loaded(cal, label, [str(p) for p in paths])
    except GpusimError as e:
        _failed(str(e))
    except OSError as e:
        _failed(f"cannot read {e.filename or raw}: {e.strerror or e}")
    except Exception as e:  # noqa: BLE001  (input the format checks let through but the fit cannot use)
        _failed(f"cannot use {raw.strip()}: {type(e).__name__}: {e}")


def _clear() -> None:
    shell.clear_calibration()
    st.session_state.pop(ERROR_KEY, None)
    st.session_state[UPLOAD_GEN_KEY] = st.session_state.get(UPLOAD_GEN_KEY, 0) + 1


ctx = shell.context()
inuse = shell.calibration_in_use()
st.markdown("#### Calibration: fit gpusim to your own measurements")

left, right = st.columns(2)
with left:
    st.file_uploader("A calibration file (JSON from `gpusim fit`)", type=["json"], key=_upload_key(),
                     on_change=_load_upload,
                     help="`gpusim calibrate --out DIR` measures a machine; `gpusim fit DIR -o calibration.json` "
                          "fits the model to it")
with right:
    st.text_area("Or paths on this machine (one per line)", key="cal_path", height=68,
                 placeholder="a calibration file, a profile directory, or nccl-tests output",
                 help="a profile directory from `gpusim calibrate` or nccl-tests output (text or -J JSON) is fitted "
                      "here with gpusim.calibration.fit; a calibration file is loaded")
    st.button("Load / fit", key="cal_load", on_click=_load_path, icon=":material/upload_file:")

err = st.session_state.pop(ERROR_KEY, None)
if err:
    st.error(f"Cannot load this calibration: {err}", icon=":material/error:")

if inuse is None:
    st.info("No calibration in use: every page uses the model's default parameters (published measurements, named "
            "in `gpusim/params.py`). Measure your machine with `gpusim calibrate --out DIR` (one process per GPU "
            "under torchrun; `--quick` takes seconds on CPUs), fit it with `gpusim fit DIR -o calibration.json`, "
            "and load the file here (or give DIR on the right to fit it now).", icon=":material/tune:")
    st.stop()

cal = inuse.cal
doc = cal.to_dict()
env = cal.env

# --- in use -----------------------------------------------------------------------------------------
if ctx.calibrated_machine:
    where = f"runs on the calibrated machine ({cal.hardware['node'].name})."
elif ctx.scenario is not None:
    where = f"runs on {ctx.gpu_id}: " + "; ".join(ctx.cal_notes) + "."
else:
    where = "has a problem: see the other pages."
st.success(f"**In use on every page:** {inuse.label}. The sidebar's scenario {where}", icon=":material/check_circle:")
c = st.columns([1, 1.6, 3])
c[0].button("Clear calibration", key="cal_clear", on_click=_clear, icon=":material/delete:",
            help="back to the default parameters and the hardware the sidebar had before")
if inuse.has_machine and ctx.state.get("hw") != CALIBRATED:
    c[1].button(f"Predict on the calibrated machine ({env.n_ranks} x {cal.gpu_id})", key="cal_machine",
                on_click=shell.to_calibrated_machine, icon=":material/memory:")

# --- environment ------------------------------------------------------------------------------------
st.markdown("##### What was measured")
c = st.columns([3.2, 0.6, 0.6, 0.8, 1.3, 1.5])
c[0].metric("Device", env.device_name, help=f"{env.device_kind}; {env.match_rule}")
c[1].metric("Ranks", f"{env.n_ranks}", help=f"{env.ranks_per_node} per node")
c[2].metric("Nodes", f"{env.n_nodes}", help=", ".join(env.hosts))
c[3].metric("Backend", env.backend or "?")
c[4].metric("Database GPU", env.matched_gpu or "none",
            help=env.match_rule + ("" if env.matched_gpu else ": efficiencies are relative to the device's own "
                                                                "measured ceilings and do not transfer to other GPUs"))
h = cal.held_out or {}
c[5].metric("Held-out DDP step error", f"{100 * h['median_abs_error_frac']:.1f}%" if h.get("n") else "none",
            help="median |predicted / measured - 1| over the multi-rank DDP steps that the fit never saw")
versions = ", ".join(f"{k} {v}" for k, v in (env.versions or {}).items() if v)
st.caption(f"{env.device_kind.upper()} · {env.ranks_per_node} rank(s) per node on {', '.join(env.hosts)}"
           + (f" · CPU {env.cpu_model} ({env.cpu_cores} cores)" if env.cpu_model else "")
           + (f" · {versions}" if versions else "")
           + f" · sources: {', '.join(str(s.get('path')) for s in doc.get('sources') or [])}"
           + (f" · fitted {doc['created_utc']}" if doc.get("created_utc") else ""))
if inuse.fitted_from:
    st.caption(f"Fitted in this session from {', '.join(inuse.fitted_from)} with gpusim.calibration.fit (what "
               "`gpusim fit` does): download its JSON at the bottom of the page to keep it.")
if cal.hardware is not None:
    st.caption(f"The calibrated machine: {cal.hardware['node'].name} (GPU entry `{cal.gpu_id}`, node "
               f"`{cal.node_id}`); on another GPU only the efficiencies and overheads transfer, never its links.")
else:
    st.warning("This calibration does not describe a machine to predict on (no compute measurements for an unknown "
               "device): it applies to database GPUs only.", icon=":material/warning:")

# --- parameters -------------------------------------------------------------------------------------
st.markdown("##### Fitted parameters (± one standard deviation)")
param_rows = A.calibration_parameter_rows(doc.get("fitted") or [])
st.dataframe(param_rows, hide_index=True, height="content", column_config={
    "relative std": st.column_config.NumberColumn(format="percent"),
    "sets": st.column_config.TextColumn(width="large")})
st.caption("Uncertainty from each least-squares block's covariance (s² (JᵀJ)⁻¹); '-' where the records cannot "
           "determine it (a parameter at a bound, or no more records than parameters). The Step and Plan pages "
           "carry it to intervals.")

# --- measured vs fitted -----------------------------------------------------------------------------
rep = cal.report or {}
st.markdown("##### Measured vs fitted")
figs = []
if rep.get("gemm"):
    figs.append(("fig_cal_gemm", viz.gemm_fit_figure(rep["gemm"])))
if rep.get("memory"):
    figs.append(("fig_cal_memory", viz.memory_fit_figure(rep["memory"])))
for level, rows in A.collective_rows_by_level(rep.get("collective") or []).items():
    figs.append((f"fig_cal_coll_{level}", viz.collective_fit_figure(
        rows, title=f"Collectives ({level}): bus bandwidth vs size")))
if rep.get("p2p"):
    figs.append(("fig_cal_p2p", viz.p2p_figure(rep["p2p"])))
if not figs:
    st.info("The calibration's report has no benchmark rows to draw.")
for i in range(0, len(figs), 2):
    cols = st.columns(2)
    for col, (key, fig) in zip(cols, figs[i:i + 2]):
        with col:
            shell.chart(fig, key=key)
reg = rep.get("collective_regimes") or {}
st.caption("Dots: measured medians (hollow: left out of the fit, e.g. copies below the bandwidth plateau); lines: "
           "the fitted model at the same sizes. Collectives use the model's own formula with the level's fitted hop "
           "latency and all-reduce bus bandwidth (the other collectives' own bandwidths are in the table above); "
           "red pairs are well below the median pair."
           + (f" Collectives have two message-size regimes, split at {units.format_bytes(reg['split_at_bytes'])}; the "
              "model takes the large-message one (where DDP's buckets fall)." if reg.get("kept") else ""))
tables = [(kind, title) for kind, title in (("dataloader", "Data loader"),
                                            ("ddp_baseline", "One-rank DDP baselines (compute only)")) if rep.get(kind)]
if tables:
    cols = st.columns(len(tables))
    for col, (kind, title) in zip(cols, tables):
        with col:
            st.markdown(f"**{title}**")
            st.dataframe(A.fit_table(rep[kind]), hide_index=True,
                         column_config={"error": st.column_config.NumberColumn(format="percent")})

# --- held out ---------------------------------------------------------------------------------------
st.markdown("##### Held-out DDP steps: the honest test")
st.markdown(f"**{cal.held_out_line()}**")
anch = h.get("anchored") or {}
if h.get("n"):
    st.caption(f"Nothing the fit used saw these steps: each is predicted from its workload's description on the "
               f"calibrated machine. Spread: p90 {100 * h['p90_abs_error_frac']:.1f}%, max "
               f"{100 * h['max_abs_error_frac']:.1f}%, median signed {100 * h['median_error_frac']:+.1f}%."
               + (f" Anchored on the measured one-rank step (tests communication and synchronisation only): median "
                  f"{100 * anch['median_abs_error_frac']:.1f}% (n={anch['n']})." if anch.get("n") else ""))
    recs = [{**r, "label": A.held_out_label(r, short=True)} for r in h.get("records") or []]
    left, right = st.columns([1.3, 1])
    with left:
        shell.chart(viz.held_out_figure(recs), key="fig_cal_held_out")
    with right:
        st.dataframe(A.held_out_table(h.get("records") or []), hide_index=True, column_config={
            "error": st.column_config.NumberColumn(format="percent"),
            "anchored error": st.column_config.NumberColumn(format="percent"),
            "measured (ms)": st.column_config.NumberColumn(format="%.3g"),
            "predicted (ms)": st.column_config.NumberColumn(format="%.3g"),
            "anchored on 1 rank (ms)": st.column_config.NumberColumn(format="%.3g")})
for s in h.get("skipped") or []:
    st.caption(f"Not predicted: {s}")

# --- notes ------------------------------------------------------------------------------------------
if cal.notes:
    st.markdown("##### Notes of the fit")
    st.markdown("\n".join(f"- {n}" for n in cal.notes))

shell.downloads("gpusim-calibration", json_obj=doc, rows=param_rows)
