"""The Streamlit frame around every page: navigation, the scenario sidebar, errors, downloads, timing.

The sidebar's widgets are bound to the URL query (``bind="query-params"``): the address bar always holds
the scenario (only values that differ from the defaults), so a link reopens the same page with the same
scenario. Hardware loading is cached (``st.cache_resource``); the scenario is validated once per rerun and
handed to the page through :func:`context`.

A calibration (``gpusim fit``'s file, loaded on the Calibration page) lives in the session under
:data:`CAL_KEY` and reaches every page through the context: while it is in use the sidebar offers the
*calibrated machine* as hardware (its own parameters, GPU, node and measured links, in a copy of the
database), and on a database GPU or node the parameters that transfer to that GPU model
(:meth:`gpusim.calibration.Calibration.apply`). Pages read ``ctx.params`` and ``ctx.db`` and key their
caches on ``ctx.cache_key``; :func:`interval` gives the calibration's interval for the scenario.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import io
import json
import math
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import streamlit as st
from pydantic import ValidationError

from gpusim import units
from gpusim.app_pages import analysis as A
from gpusim.app_pages.state import (
    ATTENTION_CHOICES,
    CALIBRATED,
    CROSS_ENTROPY_CHOICES,
    DEFAULTS,
    DISPATCHER_CHOICES,
    EP_OVERLAP_CHOICES,
    GRAPH_CHOICES_DENSE,
    GRAPH_CHOICES_MOE,
    OPTIMIZER_IMPLS,
    OPTIMIZERS,
    PRECISIONS,
    STRATEGY_KINDS,
    gpu_of,
    resolve,
    workload_from_state,
)
from gpusim.errors import GpusimError

HERE = Path(__file__).resolve().parent
BIND = "query-params"
#: session key of fitted ModelParams (and of their label) that replace the defaults on every page (plain
#: parameters, e.g. from a notebook; a calibration goes under CAL_KEY and takes precedence)
PARAMS_KEY = "_model_params"
PARAMS_LABEL_KEY = "_model_params_label"
#: session key of the calibration in use (a CalibrationInUse), and of the sidebar's hardware before it
CAL_KEY = "_calibration"
CAL_PREV_KEY = "_calibration_prev_hardware"
#: the sidebar widgets a calibration sets (and its clearing restores)
_HW_KEYS = ("hw", "gpus", "nodes")

#: (file, title, url path, icon) of each page, in menu order
PAGES: tuple[tuple[str, str, str, str], ...] = (
    ("page_step.py", "Step", "step", ":material/speed:"),
    ("page_scaling.py", "Scaling", "scaling", ":material/trending_up:"),
    ("page_batch.py", "Batch & utilisation", "batch", ":material/stacked_bar_chart:"),
    ("page_rooflines.py", "Rooflines", "rooflines", ":material/roofing:"),
    ("page_parallelism.py", "Parallelism", "parallelism", ":material/view_column:"),
    ("page_compare.py", "Compare", "compare", ":material/compare_arrows:"),
    ("page_plan.py", "Plan", "plan", ":material/calendar_month:"),
    ("page_topology.py", "Topology", "topology", ":material/lan:"),
    ("page_collectives.py", "Collectives", "collectives", ":material/hub:"),
    ("page_calibration.py", "Calibration", "calibration", ":material/tune:"),
)


@st.cache_resource(show_spinner=False)
def get_db():
    """The hardware database, loaded once per server process."""
    from gpusim.hwdb import load

    return load()


@dataclass
class CalibrationInUse:
    """A calibration put in use by the Calibration page: the :class:`gpusim.calibration.Calibration`, what
    to call it, and a digest of its document (part of cache keys)."""

    cal: Any
    label: str
    digest: str
    #: the profile directories / nccl-tests files it was fitted from in this session (None: loaded)
    fitted_from: list[str] | None = None

    @classmethod
    def of(cls, cal, label: str, fitted_from: list[str] | None = None) -> CalibrationInUse:
        text = json.dumps(cal.to_dict(), sort_keys=True, default=str)
        return cls(cal=cal, label=label, digest=hashlib.sha256(text.encode()).hexdigest()[:16],
                   fitted_from=fitted_from)

    @property
    def has_machine(self) -> bool:
        """Whether the calibration describes a machine it can predict on (the sidebar's 'calibrated')."""
        return self.cal.hardware is not None


@dataclass
class Context:
    """What the sidebar produced this rerun: the raw state, and the scenario or the reason there is none."""

    state: dict[str, Any]
    #: the database the scenario runs on: the shipped one, or a copy with the calibrated machine added
    db: Any
    scenario: Any = None
    error: str | None = None
    notes: list[str] = field(default_factory=list)
    #: the model parameters every page uses: the defaults, fitted ones put in the session under
    #: PARAMS_KEY, or a calibration's (for the calibrated machine, or what transfers to the sidebar's GPU)
    params: Any = None
    params_label: str = "default model parameters"
    #: the calibration in use (None: none), what it did for this scenario, and whether the scenario runs
    #: on the calibrated machine itself
    calibration: CalibrationInUse | None = None
    cal_notes: list[str] = field(default_factory=list)
    calibrated_machine: bool = False

    @property
    def params_key(self) -> str:
        """Part of every cache key, so that results follow the parameters in use."""
        return self.params.model_dump_json() if self.params is not None else ""

    @property
    def cache_key(self) -> str:
        """The key of every cached result: the state, the parameters and the calibration (whose machine
        is in ``db``)."""
        return (json.dumps(self.state, sort_keys=True, default=str) + self.params_key
                + (self.calibration.digest if self.calibration else ""))

    @property
    def gpu_id(self) -> str:
        if self.scenario is not None:
            return self.scenario.gpu or self.db.node(self.scenario.node).gpu
        return gpu_of(self.state, self.db)


def default_params():
    """The parameters without a calibration: plain ones put in the session under PARAMS_KEY, or the defaults."""
    from gpusim.params import DEFAULT_PARAMS

    return st.session_state.get(PARAMS_KEY) or DEFAULT_PARAMS


def calibration_in_use() -> CalibrationInUse | None:
    return st.session_state.get(CAL_KEY)


def use_calibration(cal, label: str, fitted_from: list[str] | None = None) -> CalibrationInUse:
    """Put a calibration in use on every page (call it from a widget callback, before the sidebar runs).

    A calibration that describes its machine moves the sidebar's hardware there (with its GPU and node
    counts); what the sidebar held before comes back with :func:`clear_calibration`."""
    inuse = CalibrationInUse.of(cal, label, fitted_from)
    ss = st.session_state
    if CAL_PREV_KEY not in ss:
        ss[CAL_PREV_KEY] = {k: ss.get(k, DEFAULTS[k]) for k in _HW_KEYS}
    ss[CAL_KEY] = inuse
    if inuse.has_machine:
        to_calibrated_machine(inuse)
    elif ss.get("hw") == CALIBRATED:  # the previous calibration's machine is gone
        _restore_hardware(ss[CAL_PREV_KEY])
    return inuse


def _restore_hardware(prev: dict) -> None:
    for k in _HW_KEYS:
        v = prev.get(k, DEFAULTS[k])
        st.session_state[k] = DEFAULTS[k] if v == CALIBRATED else v


def to_calibrated_machine(inuse: CalibrationInUse | None = None) -> None:
    """Point the sidebar at the calibrated machine, with its GPU and node counts (a widget callback)."""
    inuse = inuse or calibration_in_use()
    if inuse is None or not inuse.has_machine:
        return
    env = inuse.cal.env
    st.session_state.update(hw=CALIBRATED, gpus=int(env.n_ranks), nodes=int(env.n_nodes))


def clear_calibration() -> None:
    """Stop using the calibration (a widget callback): default parameters, and the sidebar's hardware as
    it was before the calibration was loaded."""
    ss = st.session_state
    ss.pop(CAL_KEY, None)
    prev = ss.pop(CAL_PREV_KEY, None) or {}
    if ss.get("hw") == CALIBRATED:  # on the calibrated machine: back to the hardware before the calibration
        _restore_hardware(prev)


def _hw_changed() -> None:
    """Choosing the calibrated machine in the sidebar also takes its GPU and node counts."""
    inuse = calibration_in_use()
    if st.session_state.get("hw") == CALIBRATED and inuse is not None and inuse.has_machine:
        to_calibrated_machine(inuse)


def navigation():
    pages = [st.Page(str(HERE / f), title=t, url_path=u if k else "home", icon=i, default=(k == 0))
             for k, (f, t, u, i) in enumerate(PAGES)]
    # Streamlit serves the default page at "/" only: the first page's own path ("/step", as the menu and shared
    # links name it) is the same script again, hidden from the menu
    f, t, u, i = PAGES[0]
    pages.append(st.Page(str(HERE / f), title=t, url_path=u, icon=i, visibility="hidden"))
    return st.navigation(pages, position="top")


#: session key of the URL parameters that were ignored this run (shown once in the sidebar)
URL_NOTICES_KEY = "_url_notices"
_URL_BAD_KEY = "_url_bad_numbers"


def number_input(where, label: str, min_value, max_value, value=None, *, key: str, **kwargs):
    """``where.number_input`` whose URL-bound value is checked first (gpusim.checks): a URL value that is not a
    finite number in the widget's range (``?batch=inf``, ``?nodes=1e400``, ``?plan_max_gpus=-inf``) is dropped
    from the URL with a notice, and the widget starts from its default, instead of Streamlit failing on it."""
    from gpusim.checks import Bound

    bad: set = st.session_state.setdefault(_URL_BAD_KEY, set())
    raw = st.query_params.get(key) if kwargs.get("bind") else None
    if raw is not None and key not in bad:
        whole = isinstance(min_value, int) and isinstance(max_value, int)
        bound = Bound(min_value, max_value, integer=whole)
        try:
            bound.parse_text(raw)
        except (ValueError, OverflowError):
            bad.add(key)
            del st.query_params[key]
            st.session_state.setdefault(URL_NOTICES_KEY, []).append(
                f"URL parameter {key}={raw[:40]!r} ignored: it must be {bound.describe()}")
    if key in bad:  # Streamlit would seed the widget from the page's first URL again: not bound this session
        kwargs.pop("bind", None)
    return where.number_input(label, min_value, max_value, value, key=key, **kwargs)


def url_notices(where=None) -> None:
    """Show (once) which URL parameters were ignored (in ``where``, a container, or here)."""
    for note in st.session_state.pop(URL_NOTICES_KEY, []):
        (where or st).warning(note, icon=":material/link_off:")


#: the options of each URL-bound choice widget (selectbox, segmented control, multiselect ...), by key, as the
#: pages offer them (:func:`offer`): what "did you mean" picks from
_CHOICES_KEY = "_url_choices"
#: session key of the scopes (the sidebar, each page) whose URL values were checked: on their first run in a session,
#: when the URL seeds their widgets (later runs follow the widgets, and the URL follows them)
_URL_CHECKED_KEY = "_url_checked"
_URL_SAID_KEY = "_url_said"


def offer(key: str, options):
    """Register ``options`` as the choices of the widget ``key`` (for :func:`check_url`'s "did you mean") and
    return them: ``st.selectbox("Model", shell.offer("model", ids), key="model", bind=BIND)``."""
    options = list(options)
    st.session_state.setdefault(_CHOICES_KEY, {})[key] = [str(o) for o in options]
    return options


def url_snapshot() -> dict[str, list[str]]:
    """The URL's query as it is before the widgets read it: ``{key: [values]}``."""
    return {k: st.query_params.get_all(k) for k in st.query_params.keys()}


def _taken(raws: list[str], value) -> bool:
    """Whether the widget's value is what the URL asked for."""
    if isinstance(value, (list, tuple, set)):
        have = {str(v) for v in value}
        want = [w for r in raws for w in (r.split(",") if r not in have else [r])]
        return all(w in have for w in want if w != "")
    raw = raws[-1] if raws else ""
    if value is None:
        return raw == ""
    if isinstance(value, bool):
        return raw.strip().lower() in (("true", "1", "yes", "on") if value else ("false", "0", "no", "off"))
    if isinstance(value, (int, float)):
        try:
            return math.isclose(float(raw), float(value), rel_tol=1e-9, abs_tol=0.0)
        except (TypeError, ValueError, OverflowError):
            return False
    return str(value) == raw


def _edits(a: str, b: str) -> int:
    """Edits from ``a`` to ``b``: insertions, deletions, substitutions and swaps of neighbours (the optimal string
    alignment distance; a swapped pair, 'modle' for 'model', is one edit)."""
    d = [[i + j if i * j == 0 else 0 for j in range(len(b) + 1)] for i in range(len(a) + 1)]
    for i in range(1, len(a) + 1):
        for j in range(1, len(b) + 1):
            d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] != b[j - 1]))
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                d[i][j] = min(d[i][j], d[i - 2][j - 2] + 1)
    return d[-1][-1]


def nearest(word: str, options) -> str | None:
    """The option nearest to ``word`` ("did you mean"): fewest edits (:func:`_edits`), within a third of the longer
    string's length (at least 2 edits), ties broken by the nearer length (a swap keeps it: 'modle' is 'model' more
    likely than 'mode'), then difflib's similarity; None when nothing is that close."""
    import difflib

    best = None
    for o in map(str, options):
        n = _edits(word.lower(), o.lower())
        if n <= max(2, len(max(word, o, key=len)) // 3):
            key = (n, abs(len(word) - len(o)), -difflib.SequenceMatcher(None, word, o).ratio())
            if best is None or key < best[0]:
                best = (key, o)
    return best[1] if best else None


#: query parameters Streamlit itself reads (not settings of the planner)
_STREAMLIT_PARAMS = frozenset({"embed", "embed_options"})


@functools.lru_cache(maxsize=1)
def url_keys() -> frozenset[str]:
    """Every widget key of the sidebar and the pages (the names a URL can set), read from their source once."""
    return frozenset(m for f in HERE.glob("*.py") for m in re.findall(r'key="([a-z_0-9]+)"', f.read_text()))


def check_url(snapshot: dict[str, list[str]], scope: str) -> None:
    """After the widgets ran: every URL value a widget did not take (a typo in a choice, ``?model=llama3.1-70bb``,
    ``?gpu=h100sxm``; Streamlit drops those silently) gets a notice that names the value, what the page uses instead,
    and the nearest valid choice ("did you mean"), and a name no page knows (``?modle=``) the nearest name. Numbers
    out of range are :func:`number_input`'s (already said)."""
    ss = st.session_state
    checked: set = ss.setdefault(_URL_CHECKED_KEY, set())
    if scope in checked:
        return
    checked.add(scope)
    bad = ss.get(_URL_BAD_KEY, set())
    choices = ss.get(_CHOICES_KEY, {})
    if scope == "sidebar":  # names no page knows (?modle=...): said once, with the nearest name
        known = url_keys()
        for key in snapshot:
            if key not in known and key not in _STREAMLIT_PARAMS:
                near = nearest(key, sorted(known))
                ss.setdefault(URL_NOTICES_KEY, []).append(
                    f"URL parameter {key[:40]!r} ignored: no page has such a setting"
                    + (f"; did you mean {near!r}?" if near else "."))
    for key, raws in snapshot.items():
        if key in bad or key.startswith("_") or key not in ss or key in ss.get(_URL_SAID_KEY, set()):
            continue
        value = ss[key]
        if _taken(raws, value):
            continue
        opts = choices.get(key, [])
        have = {str(v) for v in value} if isinstance(value, (list, tuple, set)) else set()
        wrong = [w for r in raws for w in (r.split(",") if r not in opts else [r]) if w and w not in have] or raws
        for w in wrong[:3]:
            near = nearest(w, opts) if opts else None
            hint = (f"; did you mean {near!r}?" if near else
                    f"; it must be one of {', '.join(opts[:8])}{' ...' if len(opts) > 8 else ''}." if opts else ".")
            ss.setdefault(_URL_SAID_KEY, set()).add(key)
            uses = ", ".join(map(str, value)) if isinstance(value, (list, tuple, set)) else value
            ss.setdefault(URL_NOTICES_KEY, []).append(
                f"URL parameter {key}={w[:40]!r} ignored: not a valid choice{hint} The page uses {uses!r} instead.")


def _flop(flop: float) -> str:
    """A FLOP count without an exponent: 78.9 GFLOP / 1,315 TFLOP (never '1.315e+06 GFLOP')."""
    div, unit = ((units.TERA, "TFLOP") if flop >= 10 * units.TERA else (units.GIGA, "GFLOP") if flop >= units.GIGA
                 else (units.MEGA, "MFLOP"))
    v = flop / div
    return f"{v:,.0f} {unit}" if v >= 1000 else f"{v:.4g} {unit}"


def _default(key: str, options: list | None = None, fallback: Any = None):
    v = DEFAULTS[key]
    if options is not None and v not in options:
        return fallback if fallback is not None else options[0]
    return v


def _config_upload() -> tuple[dict | None, int | None]:
    """The sidebar's config.json upload box: the parsed config (kept in the session, not in the URL) and
    the sequence length, with a one-line summary of the model it describes, or the reason it cannot be used."""
    from gpusim.workload import SUPPORTED_MODEL_TYPES, Workload

    up = st.file_uploader("Hugging Face config.json", type=["json"], key="config_upload",
                          help="model_type one of: " + ", ".join(SUPPORTED_MODEL_TYPES))
    if up is None:
        st.info("Upload the config.json of the model (its Hugging Face repository has one).")
        return None, None
    try:
        cfg = json.loads(up.getvalue().decode("utf-8"))
        wl = Workload.from_config(cfg)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        st.error(f"{up.name}: not a JSON file ({e})")
        return None, None
    except GpusimError as e:
        st.error(str(e))
        return None, None
    seq = st.number_input("Sequence length (tokens)", 1, 10_000_000, None, key="seq", bind=BIND,
                    placeholder=f"{wl.seq_len} (assumed)")
    active = f" ({wl.params_active / units.GIGA:.3g} B active)" if wl.is_moe else ""
    st.caption(f"{wl.name}: {wl.params / units.GIGA:.3g} B parameters{active}, "
               f"{wl.fwd_flop_per_sample / wl.tokens_per_sample / units.GIGA:.4g} GFLOP forward per token. "
               + " ".join(f"Assumed: {a}." for a in wl.assumptions[:3]))
    return cfg, seq


def _graphs_select(moe: bool) -> str:
    """[issue 17] CUDA graphs (the CLI's ``--cuda-graph-scope``), for transformer models only: the scope sets
    Megatron-Core accepts, MoE ones for MoE models."""
    choices = GRAPH_CHOICES_MOE if moe else GRAPH_CHOICES_DENSE
    return st.selectbox("CUDA graphs", offer("graphs", choices), key="graphs", bind=BIND,
                        help="which parts of every layer run as captured CUDA graphs (Megatron-Core "
                             "--cuda-graph-scope): a captured part costs the CPU one graph replay instead of its "
                             "kernel launches, which matters where launches set the pace (small models, short "
                             "micro-batches, a Grace host). moe and full_iteration also drop the MoE dispatcher's "
                             "host sync. The graphs' own memory is not counted. Needs ddp, zero1/2/3 or fsdp-full / "
                             "fsdp-grad-op")


def _moe_selects(s: dict) -> None:
    """[issue 17] The MoE options (the CLI's ``--moe-dispatcher``, ``--ep-overlap``, ``--moe-fused-mlp``), for
    mixture-of-experts models only; they matter where the layout has ep > 1 (the Parallelism page searches them)."""
    s["dispatcher"] = st.selectbox("MoE token dispatcher", offer("dispatcher", DISPATCHER_CHOICES), key="dispatcher",
                                   bind=BIND, help="alltoall: Megatron-Core's default, one NCCL all-to-all of every "
                                                   "token copy; deepep: the flex dispatcher (DeepEP / HybridEP): once "
                                                   "per node over the network, forwarded over NVLink, its "
                                                   "permutation fused")
    s["ep_ov"] = st.selectbox("MoE all-to-all overlap", offer("ep_ov", EP_OVERLAP_CHOICES), key="ep_ov", bind=BIND,
                              help="none: the all-to-alls on the compute stream; 1f1b: Megatron-Core's EP overlap "
                                   "(--overlap-moe-expert-parallel-comm) under another micro-batch's compute; dualpipe: "
                                   "DeepSeek-V3's bidirectional pipeline (an even pp, no interleaving)")
    s["fused_mlp"] = st.checkbox("Fused grouped MLP (TE, MXFP8 on Blackwell)", key="fused_mlp", bind=BIND,
                                 help="the experts as Transformer Engine's CuTe DSL fused grouped MLP (Megatron-Core "
                                      "--use-transformer-engine-op-fuser): one kernel per GEMM over all local "
                                      "experts, the SwiGLU and its quantisation in the epilogues; needs precision "
                                      "mxfp8 on B200 / GB200 / B300 / GB300")
    s["moe_imb"] = number_input(st, "MoE routing imbalance", 0.0, 10.0, None, key="moe_imb", bind=BIND,
                                placeholder="balanced router (~1%)",
                                help="the busiest expert-parallel rank's routed tokens over the mean, minus 1, at "
                                     "every MoE layer (the CLI's --moe-imbalance); empty: a router balanced in "
                                     "expectation, as force-balanced benchmarks run. A learned router with Megatron-"
                                     "Core's auxiliary-loss-free bias measured 0.34 at the start of training and 0.21 "
                                     "after 18 steps on 64 GB200 at EP64 (marin-community/marin issue #7668). It "
                                     "matters where a layout has ep > 1 (the Parallelism page searches ep)")
    s["moe_skew"] = number_input(st, "MoE expert skew (CV)", 0.0, 10.0, None, key="moe_skew", bind=BIND,
                                 placeholder="balanced router",
                                 help="a learned router's popularity skew, the coefficient of variation of the "
                                      "experts' shares of the routed tokens (the CLI's --moe-expert-skew): the busiest "
                                      "rank follows from each layout's ep, more at a larger ep, so the Parallelism "
                                      "page's search weighs it. From the same measurement: 0.29 at the start of "
                                      "training, 0.18 after 18 steps. Trained checkpoints on real text (fine-tuning; "
                                      "arXiv 2605.20982): about 0.19-0.27 for MHA and Mamba-2 models, above 0.43 for "
                                      "MLA and gated-DeltaNet ones. Give this or the imbalance, not both")


#: [issue 17] the sidebar's multi-token prediction module sharing (Strategy.mtp_shared): the model's own (None), one
#: module for every pass (True: --mtp-shared) or a module per pass (False: --no-mtp-shared)
MTP_SHARING = ("model", "shared", "separate")


def _mtp_input(spec, s: dict) -> int | None:
    """[issue 17] The multi-token prediction modules trained with a language model that has them (the CLI's
    --mtp-layers; 0 trains without), offered where the model's config has some (DeepSeek-V3, Nemotron 3 Super), and
    whether the passes share one module (the CLI's --mtp-shared / --no-mtp-shared; :data:`MTP_SHARING`), stored in
    ``s["mtp_sh"]``."""
    n = number_input(st, "Multi-token prediction modules", 0, 16, None, key="mtp", bind=BIND,
                     placeholder=f"{spec.mtp_layers} (the model's)",
                     help="modules after the last layer, each one more layer of the model's last kind, a 2h -> h "
                          "projection and one more pass through the LM head with its own loss (DeepSeek-V3 report "
                          "section 2.2; Megatron-Core --mtp-num-layers), on the last pipeline stage; 0 trains "
                          "without them, as Megatron-Bridge's 25.11 DeepSeek-V3 table ran")
    # (no format_func: a URL-bound widget's query value is its option's label, so the options are their own labels)
    s["mtp_sh"] = st.selectbox("MTP module sharing", offer("mtp_sh", MTP_SHARING), key="mtp_sh", bind=BIND,
                               help="shared: every multi-token prediction pass runs one module's weights (Megatron-"
                                    "Core --mtp-use-repeated-layer, the CLI's --mtp-shared: Nemotron 3 Super's "
                                    "recipe trains 2 passes this way; the passes' compute and activations, one "
                                    "module's parameters and optimizer state); separate: a module per pass (the "
                                    "CLI's --no-mtp-shared); model: the model's own (its config.json's "
                                    "mtp_use_repeated_layer or mtp_share_layers)")
    return n


#: [stop 58] the precisions whose linear layers run quantised, so that some layers can be kept in BF16 (the CLI's
#: --bf16-layers refuses the others)
QUANTISED_PRECISIONS = ("fp8", "mxfp8", "nvfp4")


def _bf16_layers_inputs(spec, s: dict) -> None:
    """[stop 58] The layers kept in BF16 at the start and the end of a quantised transformer (the CLI's
    ``--bf16-layers START END``: Megatron-Core's ``--first-last-layers-bf16 --num-layers-at-start-in-bf16 N
    --num-layers-at-end-in-bf16 N``), stored in ``s["bf16_first"]`` and ``s["bf16_last"]``; each pipeline stage is
    charged for the BF16 layers it holds."""
    n = int(spec.n_layers)
    c1, c2 = st.columns(2)
    s["bf16_first"] = number_input(c1, "First layers in BF16", 0, n, None, key="bf16_first", bind=BIND,
                                   placeholder="0",
                                   help="the first N layers run their GEMMs in BF16 (no quantisation, no quantised "
                                        "weight copies): Megatron-Core --num-layers-at-start-in-bf16, the CLI's "
                                        "--bf16-layers START END")
    s["bf16_last"] = number_input(c2, "Last layers in BF16", 0, n, None, key="bf16_last", bind=BIND,
                                  placeholder="0",
                                  help="the last N layers in BF16 (Megatron-Core --num-layers-at-end-in-bf16): "
                                       "Megatron-Bridge's Llama 3 8B NVFP4 recipe keeps the last 4, Nemotron 3 "
                                       "Super's the last 14; its general FP8 current-scaling recipe 1 + 1")


def _attention_select() -> str:
    """[issue 17] The attention kernel (the CLI's ``--attention``); the sidebar offers it for transformer models
    only (other workloads have no attention to time and keep ``auto``)."""
    return st.selectbox("Attention kernel", offer("attn", ATTENTION_CHOICES), key="attn", bind=BIND,
                        help="auto: the model's own (a config.json's _attn_implementation: eager = unfused; else the "
                             "GPU's native fused kernel). flash: one fused kernel native to the GPU (FlashAttention-2 "
                             "on Ampere, cuDNN / FlashAttention-3 on Hopper and Blackwell); flash2: FlashAttention-2 "
                             "itself, slower than the native kernel on Hopper and Blackwell; triton: the Triton "
                             "FlashAttention of 2022-23 (MPT's attn_impl triton); unfused: Q K^T, softmax and A V "
                             "apart, the s x s scores kept (Megatron-LM before FlashAttention). flash2 and triton "
                             "time the model on the per-GEMM transformer path (ddp, zero1/2/3, fsdp-full, "
                             "fsdp-grad-op)")


def _cross_entropy_select() -> str:
    """[issue 17] The loss's cross entropy (the CLI's ``--cross-entropy``), for language models (a vocabulary-wide
    loss; encoders and classifiers keep the default)."""
    return st.selectbox("Loss cross entropy", offer("ce", CROSS_ENTROPY_CHOICES), key="ce", bind=BIND,
                        help="te: Transformer Engine's kernels (Megatron --cross-entropy-fusion-impl te): the bf16 "
                             "logits read twice and overwritten by their gradient, no fp32 copy (what tuned recipes "
                             "select); native: Megatron-Core's fused version, Megatron-Bridge's default (an fp32 copy "
                             "of the logits, 40 bytes per logit); unfused: Megatron-LM without "
                             "--cross-entropy-loss-fusion (52 bytes). It matters for large vocabularies over small "
                             "hidden sizes (LLM layouts)")


def sidebar() -> Context:
    """Render the scenario widgets (bound to the URL) and build the Scenario once."""
    db = get_db()
    from gpusim.workload import get_workload, workload_ids

    inuse = calibration_in_use()
    s: dict[str, Any] = {}
    tf_spec = None  # [stop 58] the workload's transformer, where it has one
    with st.sidebar:
        st.markdown("### Scenario")
        with st.expander("Workload", expanded=True):
            s["wl"] = st.segmented_control("Workload from", offer("wl", ["catalogue", "config.json", "custom"]), key="wl",
                                           bind=BIND, default=DEFAULTS["wl"], required=True,
                                           help="a catalogue model, a Hugging Face config.json you upload (llama, "
                                                "mixtral, qwen3_moe, deepseek_v3, gpt_oss, ...), or your own numbers")
            if s["wl"] == "config.json":
                s["config"], s["seq"] = _config_upload()
                if s["config"] is not None:
                    s["attn"] = _attention_select()
                    try:
                        spec = getattr(workload_from_state({**DEFAULTS, **s}), "transformer", None)
                    except GpusimError:  # said where the scenario is built
                        spec = None
                    if getattr(spec, "head", None) == "lm":  # a language model's loss over its vocabulary
                        s["ce"] = _cross_entropy_select()
                    s["graphs"] = _graphs_select(bool(getattr(spec, "n_experts", 0)))
                    if getattr(spec, "n_experts", 0):
                        _moe_selects(s)
                    if getattr(spec, "mtp_layers", 0):
                        s["mtp"] = _mtp_input(spec, s)
                    tf_spec = spec
            elif s["wl"] == "custom":
                s["params_m"] = number_input(st, "Parameters (millions)", 0.001, 1e7, DEFAULTS["params_m"], key="params_m",
                                                bind=BIND)
                s["gflop"] = number_input(st, "Forward GFLOP per sample", 1e-6, 1e9, DEFAULTS["gflop"], key="gflop",
                                             bind=BIND, help="multiply-add = 2 FLOPs; training costs ~3x this")
                s["act_mib"] = number_input(st, "Activation MiB kept per sample", 1e-3, 1e7, DEFAULTS["act_mib"],
                                               key="act_mib", bind=BIND)
                s["tokens"] = number_input(st, "Tokens per sample (1 = images)", 1, 10_000_000, DEFAULTS["tokens"],
                                              key="tokens", bind=BIND)
            else:
                ids = workload_ids()
                s["model"] = st.selectbox("Model", offer("model", ids), index=ids.index(_default("model", ids)), key="model", bind=BIND)
                try:
                    wl = get_workload(s["model"])
                    if wl.supports_seq_len:
                        s["seq"] = number_input(st, "Sequence length (tokens)", 1, 10_000_000, None, key="seq", bind=BIND,
                                                   placeholder=f"{wl.seq_len} (the model's)")
                    st.caption(f"{wl.name}: {wl.params / units.GIGA:.3g} B parameters, "
                               f"{_flop(wl.fwd_flop_per_sample)} forward per {wl.sample_unit}")
                    if getattr(wl, "transformer", None) is not None:
                        s["attn"] = _attention_select()
                        if wl.transformer.head == "lm":  # a language model's loss over its vocabulary
                            s["ce"] = _cross_entropy_select()
                        s["graphs"] = _graphs_select(bool(getattr(wl.transformer, "n_experts", 0)))
                        if getattr(wl.transformer, "n_experts", 0):
                            _moe_selects(s)
                        if getattr(wl.transformer, "mtp_layers", 0):
                            s["mtp"] = _mtp_input(wl.transformer, s)
                        tf_spec = wl.transformer
                except GpusimError as e:
                    st.error(str(e))
        with st.expander("Hardware", expanded=True):
            hw_options = ["gpu", "node"] + ([CALIBRATED] if inuse is not None and inuse.has_machine else [])
            s["hw"] = st.segmented_control("Describe by", offer("hw", hw_options), key="hw", bind=BIND, default=DEFAULTS["hw"],
                                           required=True, on_change=_hw_changed,
                                           help="a GPU and a fabric, or a node template (its GPU, fabric, CPUs, "
                                                "NICs)" + ("; calibrated: the machine the calibration in use "
                                                           "measured, with its measured links"
                                                           if CALIBRATED in hw_options else ""))
            if s["hw"] == CALIBRATED:
                hwd = inuse.cal.hardware
                st.caption(f"{hwd['node'].name}: {hwd['gpu'].id}, measured links (from the Calibration page)")
            elif s["hw"] == "node":
                nodes = sorted(db.nodes)
                s["node"] = st.selectbox("Node template", offer("node", nodes), index=nodes.index(_default("node", nodes)), key="node",
                                         bind=BIND)
                nd = db.node(s["node"])
                st.caption(f"{nd.gpus_per_node} x {nd.gpu}, {nd.intra_link} ({nd.intra_topology})"
                           + (f", {nd.nics_per_node} x {nd.nic_link}" if nd.nic_link else ""))
            else:
                gpus = sorted(db.gpus)
                s["gpu"] = st.selectbox("GPU", offer("gpu", gpus), index=gpus.index(_default("gpu", gpus)), key="gpu", bind=BIND)
            c1, c2 = st.columns(2)
            s["gpus"] = number_input(c1, "GPUs (total)", 1, 1_000_000, DEFAULTS["gpus"], key="gpus", bind=BIND)
            s["nodes"] = number_input(c2, "Nodes", 1, 100_000, DEFAULTS["nodes"], key="nodes", bind=BIND)
            if s["hw"] != CALIBRATED:  # the calibrated machine's fabric is what was measured
                fabrics = list(A.FABRICS)
                s["fabric"] = st.selectbox("Fabric inside a node", offer("fabric", fabrics), key="fabric", bind=BIND,
                                           help="; ".join(f"{k}: {v}" for k, v in A.FABRICS.items()))
                st.caption(A.FABRICS[s["fabric"]])
            if int(s["nodes"]) > 1:
                nets = ["auto", *A.network_ids(db)]
                s["net"] = st.selectbox("Network between nodes", offer("net", nets), key="net", bind=BIND,
                                        help="auto: the node's NICs, or InfiniBand of the GPU's era")
                s["nics"] = number_input(st, "NICs per node", 1, 72, None, key="nics", bind=BIND,
                                            placeholder="the node's")
        with st.expander("Strategy", expanded=True):
            s["strategy"] = st.selectbox("Strategy", offer("strategy", STRATEGY_KINDS),
                                         index=STRATEGY_KINDS.index(DEFAULTS["strategy"]), key="strategy", bind=BIND,
                                         help="dp: torch.nn.DataParallel; ddp: DistributedDataParallel; zero*/fsdp-*: "
                                              "sharded data parallel")
            s["precision"] = st.selectbox("Precision", offer("precision", PRECISIONS), index=PRECISIONS.index(DEFAULTS["precision"]),
                                          key="precision", bind=BIND)
            if tf_spec is not None and s["precision"] in QUANTISED_PRECISIONS:
                _bf16_layers_inputs(tf_spec, s)
            c1, c2 = st.columns(2)
            s["batch"] = number_input(c1, "Per-GPU batch", 1, 10_000_000, DEFAULTS["batch"], key="batch", bind=BIND,
                                         help="micro-batch per GPU, in samples")
            s["accum"] = number_input(c2, "Accum. steps", 1, 100_000, DEFAULTS["accum"], key="accum", bind=BIND,
                                         help="gradient accumulation steps per optimizer step")
            s["ckpt"] = st.checkbox("Activation checkpointing", key="ckpt", bind=BIND)
            s["optimizer"] = st.selectbox("Optimizer", offer("optimizer", OPTIMIZERS), index=OPTIMIZERS.index(DEFAULTS["optimizer"]),
                                          key="optimizer", bind=BIND)
            s["offload"] = st.checkbox("CPU offload (sharded strategies)", key="offload", bind=BIND)
        with st.expander("Data loader"):
            s["loader"] = st.checkbox("Include the DataLoader in the prediction", key="loader", bind=BIND,
                                      help="off: data already prepared; the loader it would need is reported")
            if s["loader"]:
                c1, c2 = st.columns(2)
                s["workers"] = number_input(c1, "Workers per GPU", 0, 256, DEFAULTS["workers"], key="workers", bind=BIND)
                s["pin"] = c2.checkbox("pin_memory", value=DEFAULTS["pin"], key="pin", bind=BIND)
                s["cores"] = number_input(st, "CPU cores per GPU", 0.1, 1024.0, None, key="cores", bind=BIND,
                                             placeholder="the node's")
                s["storage"] = number_input(st, "Storage GB/s per node", 0.01, 10000.0, None, key="storage", bind=BIND,
                                               placeholder="the node's")
        with st.expander("Advanced"):
            s["bucket"] = number_input(st, "DDP bucket (MiB)", 0.1, 4096.0, DEFAULTS["bucket"], key="bucket", bind=BIND,
                                       help="PyTorch DDP's bucket_cap_mb (the CLI's --bucket-mib); an LLM layout "
                                            "(tp, pp, cp or ep set) buckets as Megatron-Core does, max(40 M, 1 M x "
                                            "dp) parameters, and ignores it")
            s["sync_every"] = st.checkbox("All-reduce every accumulated micro-batch (no no_sync)", key="sync_every",
                                          bind=BIND,
                                          help="with accumulation steps > 1 under ddp or zero1: a training loop that "
                                               "never enters DDP's no_sync() reduces the gradients in every "
                                               "micro-batch's backward (the CLI's --sync-every-micro-batch)")
            s["opt_impl"] = st.selectbox("Optimizer implementation", offer("opt_impl", OPTIMIZER_IMPLS),
                                         index=OPTIMIZER_IMPLS.index(DEFAULTS["opt_impl"]), key="opt_impl", bind=BIND,
                                         help="foreach: PyTorch >= 2.0's default (multi-tensor kernels); fused: one "
                                              "fused kernel per group; forloop: torch.optim before 2.0 (or "
                                              "foreach=False), a few kernels per parameter tensor (dp/ddp; models "
                                              "that count their tensors: the CNNs, Workload.from_torch)")
            s["baseline"] = number_input(st, "Measured one-GPU samples/s", 0.001, 1e12, None, key="baseline", bind=BIND,
                                            placeholder="none",
                                            help="your own single-GPU throughput at this batch and precision: "
                                                 "replaces the modelled compute time")
            s["slow"] = st.slider("Slowest GPU's speed", 0.1, 1.0, DEFAULTS["slow"], 0.05, key="slow", bind=BIND,
                                  help="a throttled or older GPU sets everyone's pace")
            s["oversub"] = number_input(st, "Network oversubscription", 1.0, 16.0, DEFAULTS["oversub"], key="oversub",
                                           bind=BIND)
        st.caption("The address bar holds this scenario: copy it to share"
                   + (" (the calibration stays in this session)." if inuse is not None else "."))
        notes_box = st.container()

    state = {k: (DEFAULTS[k] if v is None and DEFAULTS[k] is not None else v) for k, v in s.items()}
    ctx = Context(state={**DEFAULTS, **state}, db=db, params=default_params(),
                  params_label=st.session_state.get(PARAMS_LABEL_KEY, "default model parameters"),
                  calibration=inuse)
    if inuse is not None:
        ctx.params_label = f"calibration {inuse.label}"
    try:
        r = resolve(ctx.state, db, calibration=inuse.cal if inuse else None, params=ctx.params)
        ctx.scenario, ctx.params, ctx.db = r.scenario, r.params, r.db
        ctx.cal_notes, ctx.calibrated_machine = r.notes, r.calibrated_machine
    except GpusimError as e:
        ctx.error = str(e)
    except ValidationError as e:  # a what-if the scenario's own checks let through
        from gpusim.simulation import format_validation_error

        ctx.error = format_validation_error(e)
    with notes_box:
        if inuse is not None:
            st.caption(f"Calibration in use: **{inuse.label}**" + "".join(f" · {n}" for n in ctx.cal_notes))
        elif st.session_state.get(PARAMS_KEY) is not None:
            st.caption(f"Model parameters: {ctx.params_label}")
    st.session_state["_ctx"] = ctx
    return ctx


#: CLI flags in gpusim's messages -> the sidebar's names for the same setting
_FLAG_NAMES = {"--seq-len": "Sequence length", "--nodes": "Nodes", "--node": "Node template", "--gpus": "GPUs (total)",
               "--gpu": "GPU", "--intra": "Fabric inside a node", "--inter": "Network between nodes",
               "--precision": "Precision", "--strategy": "Strategy", "--workers": "Data loader > Workers per GPU",
               "--per-gpu-batch": "Per-GPU batch", "--accum": "Accum. steps", "--nics": "NICs per node",
               "--baseline-throughput": "Advanced > Measured one-GPU samples/s",
               "--bf16-layers": "Strategy > First / Last layers in BF16"}  # [stop 58]
_FLAG_RE = re.compile(r"(?<![\w-])(" + "|".join(sorted(map(re.escape, _FLAG_NAMES), key=len, reverse=True)) + r")(?![\w-])")


def ui_text(message: str) -> str:
    """A gpusim message with its command-line flags named as the sidebar names them."""
    return _FLAG_RE.sub(lambda m: f"'{_FLAG_NAMES[m.group(1)]}'", message)


def context() -> Context:
    ctx = st.session_state.get("_ctx")
    if ctx is None:  # a page run on its own (never in the app): build the sidebar now
        ctx = sidebar()
    return ctx


def track_record_caption(band, key, *, calibrated: bool, here: str = "", lead: str = "**Track record**") -> None:
    """The "track record" caption under a page's prediction (gpusim.track_record.report_line), ``here`` being the
    band's range in the page's units (shown only where the band has one and the prediction is the default model's)."""
    from gpusim import track_record

    record = track_record.record_for(band, key, calibrated=calibrated)
    show_here = bool(here) and band is not None and band.has_range and not calibrated
    st.caption(f"{lead}: {track_record.report_line(record)}." + (f" Here: {here}." if show_here else ""),
               help="gpusim validate's figures for this kind of prediction (gpusim/track_record.py): the default "
                    "model's, before any calibration; a report, not a correction of the numbers above")


def result_track_record_caption(ctx: Context, res, workload, speed: float, unit: str) -> None:
    """:func:`track_record_caption` for a page's StepResult: its band (gpusim.track_record.band_for), with the band's
    range carried to ``speed`` (the page's throughput, in ``unit``)."""
    from gpusim import track_record

    band = track_record.band_for(res, workload)
    here = ""
    if band is not None:
        lo, hi = band.speed_range(speed)
        here = f"{fmt_count(lo)} to {fmt_count(hi)} {unit}"
    track_record_caption(band, track_record.band_key(res, workload), calibrated=not uses_default_model(ctx), here=here)


def memory_record_caption(res, params=None, layouts: str = "a layout with more free memory",
                          fit: dict | None = None) -> None:
    """[stop 55] The "memory record" caption under an LLM layout's prediction (``gpusim predict``'s and ``sweep``'s
    line: gpusim.track_record.memory_record): how far gpusim's memory figures were from the published runs' peaks, the
    range carried to this layout's memory against the GPU's; nothing for a prediction that is not an LLM layout."""
    from gpusim import track_record

    memory_caption(track_record.memory_record_for(res, params), layouts=layouts, fit=fit)


def memory_caption(rec: dict | None, what: str = "this layout", layouts: str = "a layout with more free memory",
                   fit: dict | None = None, where: str = "") -> None:
    """[stop 56] The "memory record" caption of a ``memory_record`` (:func:`memory_record_caption`; the Plan page's
    recommended layout, gpusim.planning.recommendation_memory_record); nothing without one. ``fit``
    (gpusim.track_record.memory_record_fit, searched ``where``): a second caption naming the fastest layout whose top
    of that range fits, as the CLI's second line."""
    from gpusim import track_record

    if not rec:
        return
    here = track_record.memory_here(rec, what, headroom="more room (the memory headroom)", layouts=layouts)
    st.caption(f"**Memory record**: {track_record.report_line(rec)}." + (f" Here: {here}." if here else ""),
               help="gpusim validate's peak-memory figures (validation/runs_memory.csv): PyTorch's peak allocated "
                    "against gpusim's allocator share; a report, not a correction of the memory above")
    fit_text = track_record.memory_fit_here(fit, where)
    if fit_text:
        st.caption(f"**Memory record**: {fit_text}.")


def uses_default_model(ctx: Context) -> bool:
    """Whether the page predicts with the default model (no calibration in use, no fitted parameters)."""
    from gpusim.params import ModelParams

    return ctx.calibration is None and (ctx.params is None or ctx.params == ModelParams())


def require_scenario() -> Context:
    """The context, or stop the page with the scenario's problem shown (never a traceback)."""
    ctx = context()
    if ctx.error:
        st.error(f"This scenario is not possible: {ui_text(ctx.error)}", icon=":material/error:")
        st.stop()
    return ctx


@contextlib.contextmanager
def guard(what: str = ""):
    """Show a GpusimError (or a pydantic error from a what-if) as a message in the page and stop."""
    try:
        yield
    except GpusimError as e:
        st.error(f"{what}{': ' if what else ''}{ui_text(str(e))}", icon=":material/error:")
        st.stop()
    except ValidationError as e:
        from gpusim.simulation import format_validation_error

        st.error(f"{what}{': ' if what else ''}{ui_text(format_validation_error(e))}", icon=":material/error:")
        st.stop()
    except Exception as e:  # a bug: one clean line in the page (the traceback goes to the server's log)
        import logging

        logging.getLogger("gpusim.app").exception("unexpected error in the planner")
        st.error(f"{what}{': ' if what else ''}gpusim failed unexpectedly ({type(e).__name__}); please report it "
                 "with the page's URL", icon=":material/bug_report:")
        st.stop()


@st.cache_data(show_spinner=False, max_entries=256)
def _interval(key: str, _cal, _scn, _db) -> dict:
    return dict(_cal.interval(_scn, _db))


def interval(ctx: Context) -> dict | None:
    """The calibration's interval (``Calibration.interval``: step time and throughput, ``level``,
    ``applies``) for the context's scenario, cached on ``ctx.cache_key``; None without a calibration."""
    if ctx.calibration is None or ctx.scenario is None:
        return None
    return _interval(ctx.cache_key, ctx.calibration.cal, ctx.scenario, ctx.db)


def chart(fig, key: str) -> None:
    st.plotly_chart(fig, key=key, config={"displaylogo": False})


def downloads(name: str, *, json_obj: Any = None, rows: list[dict] | None = None) -> None:
    """Download buttons: the result as JSON and as CSV (long format)."""
    import pandas as pd

    cols = st.columns(4)
    if json_obj is not None:
        cols[0].download_button("Download JSON", json.dumps(json_obj, indent=2, default=_json_default),
                                file_name=f"{name}.json", mime="application/json", key=f"dl_json_{name}",
                                icon=":material/download:")
    if rows:
        buf = io.StringIO()
        pd.DataFrame(rows).to_csv(buf, index=False)
        cols[1].download_button("Download CSV", buf.getvalue(), file_name=f"{name}.csv", mime="text/csv",
                                key=f"dl_csv_{name}", icon=":material/download:")


def _json_default(o):
    try:
        import numpy as np

        if isinstance(o, np.generic):
            return o.item()
    except ImportError:  # pragma: no cover
        pass
    return str(o)


def scenario_title(ctx: Context, strategy: str | None = None) -> str:
    """``llama3-70b on 64 x h100-sxm on 8 nodes · ddp, bf16, per-GPU batch 256``: the model, the hardware and the
    sidebar's strategy, or ``strategy`` in its place (a page that runs its own: the Parallelism page)."""
    scn = ctx.scenario
    st_ = scn.strategy
    wl = scn.model or "custom workload"
    where = f"{scn.gpus} x {ctx.gpu_id}" + (f" on {scn.nodes} nodes" if scn.nodes > 1 else "")
    fab = "" if ctx.state["fabric"] == "auto" or ctx.calibrated_machine else f", {A.FABRIC_SHORT[ctx.state['fabric']]}"
    if ctx.calibrated_machine:
        where += " (the calibrated machine)"
    elif scn.node:
        where += f" ({scn.node})"
    if strategy is not None:
        return f"{wl} on {where}{fab} · {strategy}"
    acc = f" x {st_.accum} accumulation" if st_.accum > 1 else ""
    return f"{wl} on {where}{fab} · {st_.kind}, {st_.precision}, per-GPU batch {st_.per_gpu_batch}{acc}"


def fmt_count(x: float) -> str:
    """A count for a metric tile: 29,840 / 1.23 M / 4.56 G."""
    if x >= units.GIGA:
        return f"{x / units.GIGA:.3g} G"
    if x >= 10 * units.MEGA:
        return f"{x / units.MEGA:.3g} M"
    if x >= 100:
        return f"{x:,.0f}"
    return f"{x:.3g}"


def fmt_usd(x: float) -> str:
    """US dollars for a metric tile: $950 / $29.0 k / $1.23 M."""
    if x >= units.MEGA:
        return f"${x / units.MEGA:.3g} M"
    if x >= 10 * units.KILO:
        return f"${x / units.KILO:.3g} k"
    return f"${x:,.0f}"


def footer(t0: float) -> None:
    ms = (time.perf_counter() - t0) * 1e3
    st.session_state["_rerun_ms"] = ms
    st.caption(f"gpusim · this page was computed in {ms:.0f} ms on the server")
