"""[issue 17] The fused attention core's rate against the Megatron-Core MoE paper's Table 9.

``validation/attention_rates.csv`` holds the paper's cuDNN fused-attention throughput at DeepSeek-V3's multi-head latent
attention shape (NVIDIA, "Scalable Training of Mixture-of-Experts Models with Megatron Core", arXiv:2603.07685, section
6, Table 9: forward and backward TFLOPS on Hopper and Blackwell at 4K and 16K tokens). gpusim's rate for the same call
is the attention core's FLOPs, as :mod:`gpusim.model.llm` counts them (the causal half of ``2 s^2 (q + o)``; the
backward 2.5x), over its predicted time (``layer_s["attn_fwd_s"]`` / ``["attn_bwd_s"]`` of DeepSeek-V3 at tp 1, one
sequence per micro-batch). The table names the architecture, not the GPU: H100 SXM and GB200 are assumed. A report,
not a setting: no parameter is set from it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

from gpusim import units

COLUMNS = ("row_id", "source_id", "source", "holdout", "gpu", "model", "seq_len", "pass", "tflop_per_s", "notes")
FILE = "attention_rates.csv"


@dataclass
class AttentionRow:
    row_id: str
    gpu: str
    seq_len: int
    pass_: str
    measured_flop_per_s: float
    predicted_flop_per_s: float | None = None
    error: str = ""

    @property
    def signed_frac(self) -> float | None:
        """Predicted time / measured time - 1 (= measured rate / predicted rate - 1): positive = predicted slower."""
        if self.predicted_flop_per_s is None:
            return None
        return self.measured_flop_per_s / self.predicted_flop_per_s - 1.0


def default_csv() -> Path | None:
    """``validation/attention_rates.csv`` (the runs tables' folder), or None."""
    from gpusim import validation_runs as R

    return R.table_csv(FILE)


def predict(r: dict, *, db, params=None) -> AttentionRow:
    """gpusim's rate of the row's attention call; never raises: a row it cannot run comes back with ``error``."""
    from gpusim import validation_runs as R
    from gpusim.errors import GpusimError
    from gpusim.model.llm import FLASH_BWD_FLOP_MULT
    from gpusim.scenario import Scenario
    from gpusim.simulation import simulate
    from gpusim.workload import get_workload

    out = AttentionRow(row_id=r.get("row_id", ""), gpu=r.get("gpu", ""), seq_len=0, pass_=r.get("pass", ""),
                       measured_flop_per_s=float("nan"))
    try:
        out.seq_len, out.measured_flop_per_s = int(r["seq_len"]), units.tflop_per_s_to_flop_per_s(float(r["tflop_per_s"]))
    except (KeyError, ValueError) as e:
        out.error = f"unreadable row: {e}"
        return out
    if out.pass_ not in ("forward", "backward") or not out.measured_flop_per_s > 0 or out.seq_len < 1:
        out.error = "pass must be forward or backward, tflop_per_s and seq_len positive"
        return out
    node = R.NODE_FOR_GPU.get(out.gpu)
    if node is None:
        out.error = f"no node template for GPU {out.gpu!r}"
        return out
    try:
        wl = get_workload(r.get("model") or "deepseek-v3", seq_len=out.seq_len)
        spec = wl.transformer
        per_node = db.node(node).gpus_per_node
        ep = 8 if getattr(spec, "n_experts", 0) else 1
        sc = Scenario.create(workload=wl, node=node, gpus=ep, nodes=max(1, -(-ep // per_node)), kind="zero1",
                             precision="bf16", ep=ep, micro_batch=1, global_batch=ep, seq_len=out.seq_len)
        res = simulate(sc, db=db, params=params, recommend=False)
    except GpusimError as e:
        out.error = str(e)
        return out
    q, o = spec.q_dim, spec.v_dim  # query and value widths over the heads (MLA: 128 x 192 and 128 x 128)
    flop_fwd = 0.5 * 2.0 * out.seq_len * out.seq_len * (q + o)  # the causal half, one sequence, tp 1
    if out.pass_ == "forward":
        out.predicted_flop_per_s = flop_fwd / float(res.layer_s["attn_fwd_s"])
    else:
        out.predicted_flop_per_s = FLASH_BWD_FLOP_MULT * flop_fwd / float(res.layer_s["attn_bwd_s"])
    return out


def run(path=None, *, db=None, params=None) -> list[AttentionRow]:
    """:func:`predict` over every row of ``path`` (default :func:`default_csv`); a file without the schema's columns
    raises :class:`~gpusim.errors.GpusimError` naming them."""
    from gpusim import validation_runs as R

    return R.predict_table(path or default_csv(), COLUMNS, FILE, predict, db=db, params=params)


def summarize(rows: list[AttentionRow]) -> dict:
    """Median (and p90) absolute and median signed error, all rows and per GPU."""
    from gpusim import validation_runs as R

    def stats(rs):
        return {"rows": len(rs), **R.signed_error_stats(r.signed_frac for r in rs)}

    gpus = sorted({r.gpu for r in rows})
    return {"all": stats(rows), "gpus": {g: stats([r for r in rows if r.gpu == g]) for g in gpus}}


def to_dicts(rows: list[AttentionRow]) -> list[dict]:
    """Row dicts for ``--json`` (all rows are open)."""
    return [{**asdict(r), "pass": r.pass_, "signed_frac": r.signed_frac} for r in rows]


def print_section(rows: list[AttentionRow], print_table, fmt_pct) -> None:
    """The table and summary ``gpusim validate`` prints."""
    if not rows:
        return
    table = [[r.gpu, r.seq_len, r.pass_, f"{units.flop_per_s_to_tflop_per_s(r.measured_flop_per_s):.0f}",
              "" if r.predicted_flop_per_s is None else f"{units.flop_per_s_to_tflop_per_s(r.predicted_flop_per_s):.0f}",
              "" if r.signed_frac is None else f"{r.signed_frac:+.0%}", r.error[:50]] for r in rows]
    print_table(table, ["GPU", "tokens", "pass", "measured TFLOP/s", "gpusim TFLOP/s", "error", ""],
                title="Fused attention at DeepSeek-V3's shape (validation/attention_rates.csv: the Megatron-Core MoE "
                      "paper's Table 9, cuDNN; error > 0: predicted slower)", justify=["left"] + ["right"] * 5 + ["left"])
    s = summarize(rows)
    print("attention core: " + ", ".join(f"{g} median {fmt_pct(v['median_ape'])} (signed {v['median_signed']:+.1%})"
                                         for g, v in s["gpus"].items() if v["predicted"])
          + " (open; not used to set anything)")


# ---- [issue 17] cuDNN's own fused-attention training benchmark -------------------------------------------------------

#: ``validation/attention_cudnn.csv``: cuDNN's published fused-attention training benchmark (github.com/NVIDIA/
#: cudnn-frontend ``benchmark/attention_training``, result CSVs of 2026-09), bf16, causal, the non-deterministic
#: backward, at two shapes: its ``llama3.1`` preset (64 query / 8 key-value heads of 128) and its ``gpt_oss`` preset
#: (128 / 128 heads of 64, a sliding window of 128 keys), batch 2, on GB200, GB300 and H200; the 16K-token rows held
#: out of everything (a rule fixed before any prediction)
CUDNN_FILE = "attention_cudnn.csv"
CUDNN_COLUMNS = ("row_id", "source_id", "source", "holdout", "gpu", "config", "batch", "q_heads", "kv_heads",
                 "head_dim", "window", "seq_len", "pass", "time_ms", "tflop_per_s", "notes")
#: the model whose attention call has each preset's shape (the workload's other layers are not read)
CUDNN_MODELS = {"llama31": "llama3-70b", "gptoss": "validation/configs/cudnn-bench-swa128.json"}


@dataclass
class KernelRow:
    row_id: str
    gpu: str
    config: str
    seq_len: int
    pass_: str
    holdout: bool
    measured_s: float
    predicted_s: float | None = None
    error: str = ""

    @property
    def signed_frac(self) -> float | None:
        """Predicted time / measured time - 1: positive = predicted slower."""
        if self.predicted_s is None:
            return None
        return self.predicted_s / self.measured_s - 1.0


def cudnn_csv() -> Path | None:
    """``validation/attention_cudnn.csv`` (the runs tables' folder), or None."""
    from gpusim import validation_runs as R

    return R.table_csv(CUDNN_FILE)


def predict_cudnn(r: dict, *, db, params=None) -> KernelRow:
    """gpusim's time for one row of cuDNN's benchmark: the attention core of one layer (``layer_s["attn_fwd_s"]`` or
    ``["attn_bwd_s"]``) of the preset's model at tp 1 with the row's batch as the micro-batch, so the call covers the
    benchmark's batch x heads at its sequence. The model must have the row's heads and head dimension (checked: a
    mismatch is the row's error). Never raises."""
    from gpusim import validation_runs as R
    from gpusim.errors import GpusimError
    from gpusim.scenario import Scenario
    from gpusim.simulation import simulate
    from gpusim.workload import get_workload

    out = KernelRow(row_id=r.get("row_id", ""), gpu=r.get("gpu", ""), config=r.get("config", ""), seq_len=0,
                    pass_=r.get("pass", ""), holdout=str(r.get("holdout", "0")).strip() == "1",
                    measured_s=float("nan"))
    try:
        out.seq_len, batch = int(r["seq_len"]), int(r["batch"])
        heads, d_head = int(r["q_heads"]), int(r["head_dim"])
        out.measured_s = float(r["time_ms"]) * 1e-3
        window = int(r["window"]) if (r.get("window") or "").strip() else None
    except (KeyError, ValueError) as e:
        out.error = f"unreadable row: {e}"
        return out
    if out.pass_ not in ("fwd", "bwd") or not out.measured_s > 0 or out.seq_len < 1 or batch < 1:
        out.error = "pass must be fwd or bwd, time_ms, seq_len and batch positive"
        return out
    model, node = CUDNN_MODELS.get(out.config), R.NODE_FOR_GPU.get(out.gpu)
    if model is None or node is None:
        out.error = f"no model for config {out.config!r} or no node template for GPU {out.gpu!r}"
        return out
    try:
        wl = get_workload(model, seq_len=out.seq_len)
        spec = wl.transformer
        model_d_head = spec.d_head or spec.d_model // spec.n_heads
        if (spec.n_heads, model_d_head, spec.attention_window) != (heads, d_head, window):
            out.error = (f"{model} has {spec.n_heads} heads of {model_d_head} (window {spec.attention_window}), "
                         f"the row {heads} of {d_head} (window {window})")
            return out
        sc = Scenario.create(workload=wl, node=node, gpus=1, nodes=1, kind="zero1", precision="bf16",
                             recompute="none", micro_batch=batch, global_batch=batch,
                             seq_len=out.seq_len)  # (a recompute mode: the LLM layout path, whose layer_s it reads)
        res = simulate(sc, db=db, params=params, recommend=False)
    except GpusimError as e:
        out.error = str(e)
        return out
    out.predicted_s = float(res.layer_s["attn_fwd_s" if out.pass_ == "fwd" else "attn_bwd_s"])
    return out


def run_cudnn(path=None, *, db=None, params=None) -> list[KernelRow]:
    """:func:`predict_cudnn` over every row of ``path`` (default :func:`cudnn_csv`); a file without the schema's
    columns raises :class:`~gpusim.errors.GpusimError` naming them."""
    from gpusim import validation_runs as R

    return R.predict_table(path or cudnn_csv(), CUDNN_COLUMNS, CUDNN_FILE, predict_cudnn, db=db, params=params)


def summarize_cudnn(rows: list[KernelRow]) -> dict:
    """Median / p90 absolute and median signed time error, open and held-out rows apart, each per GPU and preset."""
    from gpusim import validation_runs as R

    def stats(rs):
        return {"rows": len(rs), **R.signed_error_stats(r.signed_frac for r in rs)}

    out = {}
    for name, part in (("open", [r for r in rows if not r.holdout]), ("held_out", [r for r in rows if r.holdout])):
        keys = sorted({(r.gpu, r.config) for r in part})
        out[name] = {"all": stats(part),
                     "groups": {f"{g} {c}": stats([r for r in part if (r.gpu, r.config) == (g, c)]) for g, c in keys}}
    return out


def cudnn_to_dicts(rows: list[KernelRow]) -> list[dict]:
    """Row dicts for ``--json``."""
    return [{**asdict(r), "pass": r.pass_, "signed_frac": r.signed_frac} for r in rows]


def print_cudnn_section(rows: list[KernelRow], print_table, fmt_pct, show_holdout: bool = False) -> None:
    """The table and summary ``gpusim validate`` prints (held-out rows' figures only with ``show_holdout``)."""
    if not rows:
        return

    def cells(r):
        hide = r.holdout and not show_holdout
        return [r.gpu, r.config, r.seq_len, r.pass_, "yes" if r.holdout else "",
                "hidden" if hide else f"{r.measured_s * 1e3:.3f}",
                "" if r.predicted_s is None or hide else f"{r.predicted_s * 1e3:.3f}",
                "" if r.signed_frac is None or hide else f"{r.signed_frac:+.0%}", r.error[:50]]

    print_table([cells(r) for r in rows], ["GPU", "preset", "tokens", "pass", "held", "measured ms", "gpusim ms",
                                           "error", ""],
                title="Fused attention, cuDNN's training benchmark (validation/attention_cudnn.csv: bf16, causal, "
                      "batch 2; llama31 = 64/8 heads of 128, gptoss = 128 heads of 64 with a 128-key window; "
                      "error > 0: predicted slower)", justify=["left", "left"] + ["right"] * 6 + ["left"])
    s = summarize_cudnn(rows)
    for name in ("open", "held_out"):
        part = s[name]
        if not part["all"]["rows"]:
            continue
        groups = ", ".join(f"{k} {fmt_pct(v['median_ape'])} (signed {v['median_signed']:+.1%})"
                           for k, v in part["groups"].items() if v["predicted"])
        a = part["all"]
        print(f"attention kernels, {name.replace('_', '-')}: {a['predicted']} of {a['rows']} predicted, median "
              f"{fmt_pct(a['median_ape'])}, p90 {fmt_pct(a['p90_ape'])}, signed {a['median_signed']:+.1%}; {groups} "
              f"(not used to set anything)")
