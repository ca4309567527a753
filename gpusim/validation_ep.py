"""[issue 17] Expert-parallel dispatch and combine latencies against the Megatron-Core MoE paper's Table 7.

``validation/ep_dispatch.csv`` holds the paper's measured latency of one dispatch and one combine (NVIDIA, "Scalable
Training of Mixture-of-Experts Models with Megatron Core", arXiv:2603.07685, section 4.2.2, Table 7: hidden size 7168,
sequence length 4096, 256 experts; HybridEP and NCCL's all-to-all on GB200 NVL72 and DGX H100 at EP 8 to 64). gpusim
predicts each with the MoE layer the table describes (DeepSeek-V3's shape and routing as its Megatron-Core recipes set
it: 4096 tokens per rank, top-8 of 256 experts in 8 groups with a token's experts in 4 of them, BF16 tokens, each rank
one sequence of one micro-batch, ``gpus = ep``; the table states the hidden size, sequence length and experts only,
and the rows carry the rest as columns) on the
system's node template, and reads one all-to-all (:func:`gpusim.model.experts.moe_layer_terms`'s ``a2a_s``: the
dispatcher's time of one dispatch or combine, the busiest rank's). The HybridEP rows run gpusim's flex dispatcher
(``moe_dispatcher=deepep``): inside one NVLink domain a flat exchange of one row per (token, EP rank it reaches), across
nodes the hierarchical one.

These rows were looked at while the dispatcher's per-rank deduplication and ``ModelParams.a2a_intra_busbw_frac`` were
modelled (the latter is set from the open all-to-all sweeps, not from these rows): the table is reported as open.
"""

from __future__ import annotations

import dataclasses
from dataclasses import asdict, dataclass
from pathlib import Path

from gpusim import units

COLUMNS = ("row_id", "source_id", "source", "holdout", "gpu", "dispatcher", "ep", "op", "tokens", "d_model",
           "n_experts", "top_k", "n_groups", "topk_groups", "elem_bytes", "value_us", "notes")
FILE = "ep_dispatch.csv"


@dataclass
class EpRow:
    row_id: str
    gpu: str
    dispatcher: str
    ep: int
    op: str
    holdout: bool
    measured_s: float
    predicted_s: float | None = None
    error: str = ""

    @property
    def signed_frac(self) -> float | None:
        """(predicted - measured) / measured: positive = predicted slower."""
        return None if self.predicted_s is None else self.predicted_s / self.measured_s - 1.0


def default_csv() -> Path | None:
    """``validation/ep_dispatch.csv`` (the runs tables' folder, ``GPUSIM_RUNS_DIR`` or the repository's), or None."""
    from gpusim import validation_runs as R

    return R.table_csv(FILE)


def _workload(tokens: int, d_model: int, n_experts: int, top_k: int, n_groups: int | None, topk_groups: int | None):
    """DeepSeek-V3's transformer with the row's MoE shape and routing groups (None: not limited), at ``tokens`` per
    sequence."""
    from gpusim.workload import build_from_spec, get_workload

    base = get_workload("deepseek-v3", seq_len=tokens)
    spec = dataclasses.replace(base.transformer, seq_len=tokens, d_model=d_model, n_experts=n_experts, top_k=top_k,
                               moe_n_groups=n_groups, moe_topk_groups=topk_groups)
    return build_from_spec(spec, id="ep-dispatch-table", name="MoE layer of Table 7")


def predict(r: dict, *, db, params=None) -> EpRow:
    """gpusim's one dispatch (or combine) of the row's EP group; never raises: a row it cannot run has ``error``."""
    from gpusim import validation_runs as R
    from gpusim.errors import GpusimError
    from gpusim.scenario import Scenario
    from gpusim.simulation import simulate

    out = EpRow(row_id=r.get("row_id", ""), gpu=r.get("gpu", ""), dispatcher=r.get("dispatcher", ""), ep=0,
                op=r.get("op", ""), holdout=str(r.get("holdout")).strip() == "1", measured_s=float("nan"))
    try:
        out.ep, out.measured_s = int(r["ep"]), units.us_to_s(float(r["value_us"]))
        tokens, d_model, n_experts, top_k = (int(r[k]) for k in ("tokens", "d_model", "n_experts", "top_k"))
        elem = float(r.get("elem_bytes") or 2)
        groups, limit = ((r.get(k) or "").strip() for k in ("n_groups", "topk_groups"))
        groups_n, limit_n = (int(groups) if groups else None), (int(limit) if limit else None)
    except (KeyError, ValueError) as e:
        out.error = f"unreadable row: {e}"
        return out
    if not (out.measured_s > 0 and out.ep >= 1):
        out.error = "value_us and ep must be positive"
        return out
    if r["dispatcher"] not in ("alltoall", "deepep"):
        out.error = f"dispatcher {r['dispatcher']!r} is not alltoall or deepep"
        return out
    ep = out.ep
    node = R.NODE_FOR_GPU.get(r["gpu"])
    if node is None:
        out.error = f"no node template for GPU {r['gpu']!r}"
        return out
    if elem != 2.0:
        out.error = "only 16-bit tokens are modelled here"
        return out
    try:
        wl = _workload(tokens, d_model, n_experts, top_k, groups_n, limit_n)
        per_node = db.node(node).gpus_per_node
        sc = Scenario.create(workload=wl, node=node, gpus=ep, nodes=max(1, -(-ep // per_node)), kind="zero1",
                             precision="bf16", ep=ep, micro_batch=1, global_batch=ep, seq_len=tokens,
                             moe_dispatcher=r["dispatcher"])
        res = simulate(sc, db=db, params=params, recommend=False)
    except GpusimError as e:
        out.error = str(e)
        return out
    out.predicted_s = float(res.layer_s["a2a_s"])
    return out


def run(path=None, *, db=None, params=None) -> list[EpRow]:
    """:func:`predict` over every row of ``path`` (default: :func:`default_csv`); a file without the schema's columns
    raises :class:`~gpusim.errors.GpusimError` naming them."""
    from gpusim import validation_runs as R

    return R.predict_table(path or default_csv(), COLUMNS, FILE, predict, db=db, params=params)


def _stats(rows: list[EpRow]) -> dict:
    from gpusim import validation_runs as R

    return {"rows": len(rows), **R.signed_error_stats(r.signed_frac for r in rows)}


def summarize(rows: list[EpRow]) -> dict:
    """All rows, and per (GPU, dispatcher)."""
    groups: dict[str, list[EpRow]] = {}
    for r in rows:
        groups.setdefault(f"{r.gpu} {r.dispatcher}", []).append(r)
    return {"all": _stats(rows), "groups": {k: _stats(v) for k, v in groups.items()}}


def to_dicts(rows: list[EpRow]) -> list[dict]:
    """Row dicts for ``--json`` (every row is open: the table holds none out)."""
    return [{**asdict(r), "signed_frac": r.signed_frac} for r in rows]


def print_section(rows: list[EpRow], print_table, fmt_pct) -> None:
    """The table (one line per system, dispatcher and EP size) and the summary ``gpusim validate`` prints."""
    if not rows:
        return
    table = []
    by_cell: dict[tuple, dict] = {}
    for r in rows:
        by_cell.setdefault((r.gpu, r.dispatcher, r.ep), {})[r.op] = r
    for (gpu, disp, ep), ops in by_cell.items():
        d, c = ops.get("dispatch"), ops.get("combine")
        pred = next((o.predicted_s for o in (d, c) if o is not None and o.predicted_s is not None), None)
        table.append([gpu, "HybridEP (flex)" if disp == "deepep" else "all-to-all", ep,
                      f"{d.measured_s / units.US:.0f}" if d else "", f"{c.measured_s / units.US:.0f}" if c else "",
                      "" if pred is None else f"{pred / units.US:.0f}",
                      " / ".join(f"{o.signed_frac:+.0%}" for o in (d, c) if o is not None and o.signed_frac is not None)
                      or next((o.error[:50] for o in (d, c) if o is not None), "")])
    print_table(table, ["GPU", "dispatcher", "EP", "dispatch us", "combine us", "gpusim us",
                        "error (dispatch / combine)"],
                title="Expert-parallel dispatch and combine (validation/ep_dispatch.csv: the Megatron-Core MoE paper's "
                      "Table 7; error > 0: predicted slower)", justify=["left", "left"] + ["right"] * 5)
    s = summarize(rows)
    a = s["all"]
    print(f"EP dispatch/combine: {a['predicted']} of {a['rows']} predicted, median {fmt_pct(a['median_ape'])}, p90 "
          f"{fmt_pct(a['p90_ape'])}, median signed {a['median_signed']:+.1%} (open: looked at while the dispatcher was "
          f"modelled); " + ", ".join(f"{k} {fmt_pct(g['median_ape'])}" for k, g in s["groups"].items()))
