"""[issue 17] The routed experts' grouped GEMM against published grouped-GEMM benchmarks (item 1: "the grouped GEMM at
its real shape").

``validation/grouped_gemm.csv`` holds published throughputs of Transformer Engine's grouped GEMM (the path
Megatron-Core's ``TEGroupedMLP`` runs under ``--moe-grouped-gemm``: one cuBLAS GEMM per expert on four compute
streams) at fine-grained MoE shapes: ``groups`` GEMMs of ``m`` rows (the tokens an expert receives), ``n`` outputs and
``k`` inputs each. Each row is predicted by the functions the layout model's experts use
(:func:`gpusim.model.experts.grouped_gemm_rounds`: ``ceil(groups / 4)`` rounds of ``min(groups, 4)`` concurrent GEMMs,
each round timed by :func:`gpusim.model.gemm.gemm_time_s` on the GPU's sustained 16-bit training ceiling, its SMs and
memory bandwidth, with the kernel tail), and compared as TFLOP/s (``2 groups m n k`` over the time). Nothing in gpusim
was set from these rows. The benchmarks time the forward GEMM only; the backward's data- and weight-gradient GEMMs
(the weight gradient's ``k`` is the expert's tokens) are not covered.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from gpusim import units
from gpusim.errors import GpusimError

COLUMNS = ("row_id", "source_id", "source", "gpu", "dtype", "implementation", "version", "groups", "m", "n", "k",
           "measured_tflop_per_s", "notes")
#: the implementations gpusim models (Transformer Engine's default multi-stream cuBLAS path)
IMPLEMENTATIONS = ("te-multistream",)
#: bytes per element of the 16-bit dtypes the rows may state
DTYPE_BYTES = {"bf16": 2.0, "fp16": 2.0}


#: the table's file name in the runs tables' folder (gpusim.validation_runs.table_csv)
FILE = "grouped_gemm.csv"


def default_csv() -> Path | None:
    """``validation/grouped_gemm.csv`` (the runs tables' folder, ``$GPUSIM_RUNS_DIR`` where set), or None."""
    from gpusim import validation_runs as R

    return R.table_csv(FILE)


@dataclass
class GroupedRow:
    row_id: str
    gpu: str
    version: str
    groups: int
    m: float
    n: float
    k: float
    measured_flop_per_s: float
    predicted_flop_per_s: float | None = None
    error: str = ""

    @property
    def signed_frac(self) -> float | None:
        """Predicted time over measured, less one (= measured rate / predicted rate - 1; > 0: predicted slower), as
        the other kernel tables report."""
        if self.predicted_flop_per_s is None:
            return None
        return self.measured_flop_per_s / self.predicted_flop_per_s - 1.0


def load_rows(path: str | os.PathLike) -> list[dict]:
    """The CSV's rows; a file without the expected columns raises :class:`GpusimError` naming the missing ones."""
    from gpusim.checks import read_csv

    return read_csv(path, COLUMNS, "grouped GEMM CSV", f"expected {', '.join(COLUMNS)}")


def grouped_forward_s(gpu, groups, m, n, k, *, elem_bytes: float = 2.0, params=None) -> float:
    """Seconds of ``groups`` forward GEMMs ``(m, n, k)`` run as Transformer Engine's grouped GEMM on ``gpu`` (a
    :class:`gpusim.hardware.GPU`), as the layout model times the routed experts'
    (:func:`gpusim.model.experts.moe_layer_terms`). Hand-worked (H100, 16 groups): 4 rounds of 4 concurrent GEMMs."""
    from gpusim.model.experts import grouped_gemm_rounds
    from gpusim.model.gemm import gemm_time_s
    from gpusim.params import DEFAULT_PARAMS

    p = params or DEFAULT_PARAMS
    ceiling = p.gemm_ceiling_flop_per_s.get("bf16") or gpu.training_matmul_flop_per_s("bf16")
    if ceiling is None:
        raise GpusimError(f"{gpu.id} has no 16-bit matmul ceiling in the hardware database")
    rounds, conc = grouped_gemm_rounds(groups)
    t = gemm_time_s(m, n, k, ceiling, gpu.memory_bytes_per_s, float(gpu.sm_count or 1), elem_bytes=elem_bytes,
                    k_half=p.gemm_k_half_steps, mem_eff_frac=p.mem_eff_frac, kernel_tail_s=p.kernel_tail_s,
                    batch=conc, serial_epilogue=gpu.architecture not in p.gemm_epilogue_overlap_archs)
    return float(np.asarray(rounds * t))


def run(path=None, *, db=None, params=None) -> list[GroupedRow]:
    """Every row of the CSV with the model's prediction (a bad row comes back with ``error`` set); no rows where the
    table is not there (a ``$GPUSIM_RUNS_DIR`` without it, an installed package without ``validation/``)."""
    from gpusim.hwdb import load

    path = path or default_csv()
    if path is None:
        return []
    db = db or load()
    results = []
    for r in load_rows(path):
        row = GroupedRow(row_id=r["row_id"], gpu=r["gpu"], version=r["version"], groups=0, m=float("nan"),
                         n=float("nan"), k=float("nan"), measured_flop_per_s=float("nan"))
        results.append(row)
        try:
            try:
                row.groups = int(r["groups"])
                row.m, row.n, row.k = (float(r[c]) for c in ("m", "n", "k"))
                row.measured_flop_per_s = float(r["measured_tflop_per_s"]) * units.TERA  # the table's TFLOP/s
            except ValueError:
                raise GpusimError(f"groups, m, n, k and measured_tflop_per_s must be numbers (got {r['groups']!r}, "
                                  f"{r['m']!r}, {r['n']!r}, {r['k']!r}, {r['measured_tflop_per_s']!r})")
            if r["implementation"] not in IMPLEMENTATIONS or r["dtype"] not in DTYPE_BYTES:
                raise GpusimError(f"implementation {r['implementation']!r} or dtype {r['dtype']!r} is not modelled "
                                  f"(implementations {IMPLEMENTATIONS}, dtypes {tuple(DTYPE_BYTES)})")
            if row.groups < 1 or min(row.m, row.n, row.k) <= 0:
                raise GpusimError(f"groups {row.groups} and m, n, k must be positive")
            t = grouped_forward_s(db.gpu(row.gpu), row.groups, row.m, row.n, row.k,
                                  elem_bytes=DTYPE_BYTES[r["dtype"]], params=params)
            row.predicted_flop_per_s = 2.0 * row.groups * row.m * row.n * row.k / t
        except (GpusimError, KeyError) as e:
            row.error = str(e)
    return results


def _stats(s: list[float]) -> dict:
    a = np.abs(np.asarray(s, dtype=np.float64))
    return {"n": len(s), "median_ape": float(np.median(a)) if s else None, "max_ape": float(a.max()) if s else None,
            "median_signed": float(np.median(s)) if s else None}


def summarize(results: list[GroupedRow]) -> dict:
    """Median and largest absolute error of the predicted rows and their median signed error, in all and per
    Transformer Engine version (a release's grouped GEMM is what a container of its era runs)."""
    done = [r for r in results if r.signed_frac is not None]
    versions = sorted({r.version for r in done})
    return {**_stats([r.signed_frac for r in done]),
            "by_version": {v: _stats([r.signed_frac for r in done if r.version == v]) for v in versions},
            "errors": [r.row_id for r in results if r.error]}


def to_dicts(results: list[GroupedRow]) -> list[dict]:
    return [{**asdict(r), "signed_frac": r.signed_frac} for r in results]


def print_section(results: list[GroupedRow], print_table, fmt_pct) -> None:
    """The ``gpusim validate`` section: every row, then the summary."""
    if not results:
        return
    rows = [[r.gpu, r.version, f"{r.groups} x ({r.m:.0f}, {r.n:.0f}, {r.k:.0f})",
             f"{r.measured_flop_per_s / units.TERA:.0f}",
             "" if r.predicted_flop_per_s is None else f"{r.predicted_flop_per_s / units.TERA:.0f}",
             "" if r.signed_frac is None else f"{r.signed_frac:+.0%}"] for r in results]
    print_table(rows, ["GPU", "TE", "groups x (m, n, k)", "measured TFLOP/s", "gpusim TFLOP/s", "error"],
                title="the experts' grouped GEMM, Transformer Engine's multi-stream path, forward "
                      "(validation/grouped_gemm.csv; error > 0: predicted slower)",
                justify=["left", "left", "left", "right", "right", "right"])
    s = summarize(results)
    for v, g in s["by_version"].items():
        print(f"  grouped GEMM, TE {v}: {g['n']} rows, median {fmt_pct(g['median_ape'])}, max {fmt_pct(g['max_ape'])}, "
              f"median signed {g['median_signed']:+.1%} (not used to set anything)")
    if s["errors"]:
        print(f"  not predicted: {', '.join(s['errors'])}")
