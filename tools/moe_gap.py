"""Where the published MoE runs' missing time sits: measured minus predicted step time per layer pass (issue 17).

For every open (not held-out) mixture-of-experts row of ``validation/runs_*.csv`` and ``validation/later_releases.csv``
this prints the step time gpusim misses, ``measured - predicted``, spread over the layer passes of one rank's step
(``micro-batches x layers / pp``; the pipeline bubble is not taken out), next to what might explain it: the tokens a
rank's micro-batch holds, its local experts, the host CPU's dispatch multiplier (Grace > 1), whether the run captures
the whole iteration in CUDA graphs (no CPU launches left), and gpusim's GPU time per layer pass. A gap that stays flat
while the tokens grow eightfold points at a fixed cost per layer pass; one that vanishes under full-iteration graphs
points at the CPU. Held-out rows are never read.

    python tools/moe_gap.py            # the table, then medians by model and the gap's rank correlations
"""

from __future__ import annotations

import csv
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


@dataclass
class Gap:
    run_id: str
    model: str
    gpu: str
    gap_per_pass_s: float
    tokens_per_micro_batch: float
    local_experts: float
    host_cpu_mult: float
    full_graphs: bool
    gpu_per_pass_s: float
    signed_frac: float


def gaps(db=None) -> list[Gap]:
    """One :class:`Gap` per open MoE row that gpusim predicts (the published runs, then the later releases)."""
    from gpusim import validation_runs as V
    from gpusim.hwdb import load
    from gpusim.scenario import Scenario
    from gpusim.simulation import simulate

    db = db or load()
    out = []
    for path in [*V.default_paths(), V.later_releases_path()]:
        if path is None:
            continue
        with open(path, newline="") as f:
            for r in csv.DictReader(f):
                if str(r.get("holdout")).strip() == "1" or r["metric"] in V.MEMORY_METRICS:
                    continue
                row = V.predict_row(r, db=db)
                if row.error or "moe" not in row.regimes or not row.measured_step_s:
                    continue
                setup = V.row_setup(r, V.RunRow(run_id=row.run_id, source_id="", file="", holdout=False,
                                                model=row.model, gpu=row.gpu, gpus=0, layout="", precision="",
                                                metric="", measured=0.0, regimes=()), db)
                b = setup.base
                res = simulate(Scenario.create(**b, recompute=setup.stated_rc or "none"), db=db, recommend=False)
                dp = b["gpus"] // (b["tp"] * b["pp"] * b["cp"])
                passes = b["global_batch"] // (dp * b["micro_batch"]) * setup.spec.n_layers / b["pp"]
                lay = res.layer_s or {}
                out.append(Gap(run_id=row.run_id, model=str(row.model).rsplit("/", 1)[-1], gpu=row.gpu,
                               gap_per_pass_s=(row.measured_step_s - res.step_s) / passes,
                               tokens_per_micro_batch=b["micro_batch"] * b["seq_len"] / (b["tp"] * b["cp"]),
                               local_experts=setup.spec.n_experts / b["ep"],
                               host_cpu_mult=float(db.gpu(row.gpu).host_cpu_dispatch_mult or 1.0),
                               full_graphs="full_iteration" in (b.get("cuda_graph_scope") or ()),
                               gpu_per_pass_s=lay.get("gpu_fwd_s", 0.0) + lay.get("gpu_bwd_s", 0.0),
                               signed_frac=res.step_s / row.measured_step_s - 1.0))
    return out


def _rank_corr(a, b) -> float:
    import numpy as np
    from scipy.stats import spearmanr

    return float(spearmanr(np.asarray(a), np.asarray(b)).statistic)


def main() -> int:
    import numpy as np

    rows = sorted(gaps(), key=lambda g: g.gap_per_pass_s)
    print(f"{'run':36s} {'model':24s} {'GPU':9s} {'gap ms':>7s} {'tokens':>7s} {'local':>5s} {'host':>5s} "
          f"{'full':>4s} {'GPU ms':>7s} {'error':>7s}")
    for g in rows:
        print(f"{g.run_id[:36]:36s} {g.model[:24]:24s} {g.gpu:9s} {g.gap_per_pass_s * 1e3:+7.2f} "
              f"{g.tokens_per_micro_batch:7.0f} {g.local_experts:5.0f} {g.host_cpu_mult:5.2f} {int(g.full_graphs):4d} "
              f"{g.gpu_per_pass_s * 1e3:7.2f} {g.signed_frac:+7.1%}")
    print(f"\n{len(rows)} open MoE rows; median gap per layer pass by model (ms):")
    for model in sorted({g.model for g in rows}):
        xs = [g.gap_per_pass_s * 1e3 for g in rows if g.model == model]
        print(f"  {model:32s} n={len(xs):3d} median {np.median(xs):+.2f}")
    graphs = [g.gap_per_pass_s * 1e3 for g in rows if g.full_graphs]
    if graphs:
        print(f"  rows with full-iteration CUDA graphs (no CPU launches): n={len(graphs)} median {np.median(graphs):+.2f}")
    gp = [g.gap_per_pass_s for g in rows]
    print("rank correlation of the gap with: tokens per micro-batch "
          f"{_rank_corr(gp, [g.tokens_per_micro_batch for g in rows]):+.2f}, local experts "
          f"{_rank_corr(gp, [g.local_experts for g in rows]):+.2f}, host multiplier "
          f"{_rank_corr(gp, [g.host_cpu_mult for g in rows]):+.2f}, gpusim's GPU time per pass "
          f"{_rank_corr(gp, [g.gpu_per_pass_s for g in rows]):+.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
