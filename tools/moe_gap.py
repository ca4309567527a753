"""Where the published MoE runs' missing time sits: measured minus predicted step time per layer pass (issue 17).

For every open (not held-out) mixture-of-experts row of ``validation/runs_*.csv`` and ``validation/later_releases.csv``
this prints the step time gpusim misses, ``measured - predicted``, spread over the layer passes of one rank's step
(``micro-batches x layers / pp``; the pipeline bubble is not taken out), next to what might explain it: the tokens a
rank's micro-batch holds, its local experts, the host CPU's dispatch multiplier (Grace > 1), whether the run captures
the whole iteration in CUDA graphs (no CPU launches left), and gpusim's GPU time per layer pass. A gap that stays flat
while the tokens grow eightfold points at a fixed cost per layer pass; one that vanishes under full-iteration graphs
points at the CPU. Held-out rows are never read.

    python tools/moe_gap.py            # the table, then medians by model and the gap's rank correlations
    python tools/moe_gap.py --graph-pairs   # [stop 50] open rows that differ only in their CUDA-graph scope
    python tools/moe_gap.py --components    # [stop 52] the gap split over gpusim's parts of the layer pass

``--graph-pairs``: where one source measured the same MoE layout with and without full-iteration CUDA graphs (the
partial-graph run launches the dispatcher, the experts and the combine eagerly, after a host sync), the difference of
the two steps is what those eager launches cost, a direct measurement of the CPU side of the MoE layer that the
absolute errors mix with everything else. Printed per layer pass, measured and predicted, and predicted with
ModelParams ``launch_cpu_s`` (the CPU time of one eager operation, which sets the MoE layer's launches:
``gpusim.model.experts.moe_cpu_s``) scaled by 1, 2, 3, 4 and 6: a diagnostic of the mechanism, not a fit (nothing is set
from it).

``--components`` [stop 52]: which of gpusim's own parts of the layer pass the gap follows. Each row's gap is split by
non-negative least squares over gpusim's per-pass times of the layer's parts (attention, routed experts, expert-parallel
all-to-alls, router and permutation, the Mamba mixers of a hybrid, CPU launches; forward plus backward, ``SimulationResult.layer_s``) and a constant
per pass: ``gap ~ sum_k c_k part_k + c_0``, so ``c_k`` reads as the share of part ``k`` the runs took beyond gpusim's
figure and ``c_0`` as a cost per layer pass that none of the parts carries. Printed for all open rows and by GPU,
precision, CUDA-graph mode and model, with the share of the gap the fit explains (``1 - sum |residual| / sum |gap|``).
A lead for the mechanism to look for, never a correction: nothing is set from it (the parts are correlated, so a
coefficient can stand for a neighbour).
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
    precision: str = ""
    #: [stop 52] gpusim's per-pass times of the layer's parts (forward + backward): PARTS -> seconds
    parts_s: dict | None = None


#: [stop 52] the layer-pass parts ``--components`` splits the gap over: label -> the ``layer_s`` keys summed
PARTS = {"attention": ("attn_fwd_s", "attn_bwd_s"), "experts": ("experts_fwd_s", "experts_bwd_s"),
         "all-to-all": ("ep_fwd_s", "ep_bwd_s"), "routing": ("routing_fwd_s", "routing_bwd_s"),
         "mamba": ("mamba_fwd_s", "mamba_bwd_s"), "cpu": ("cpu_fwd_s", "cpu_bwd_s")}


def _open_rows():
    """The open (not held-out) step-time rows of the published-run tables and the later releases, as dicts."""
    from gpusim import validation_runs as V

    for path in [*V.default_paths(), V.later_releases_path()]:
        if path is None:
            continue
        with open(path, newline="") as f:
            for r in csv.DictReader(f):
                if not V.held_out(r) and r["metric"] not in V.MEMORY_METRICS:
                    yield r


def _moe_setup(r: dict, db):
    """``(RunRow, RowSetup)`` of a predicted MoE row with a measured step, else None."""
    from gpusim import validation_runs as V

    row = V.predict_row(r, db=db)
    if row.error or "moe" not in row.regimes or not row.measured_step_s:
        return None
    return row, V.row_setup(r, V.RunRow(run_id=row.run_id, source_id="", file="", holdout=False, model=row.model,
                                        gpu=row.gpu, gpus=0, layout="", precision="", metric="", measured=0.0,
                                        regimes=()), db)


def _layer_passes(setup) -> float:
    """Layer passes (micro-batches x layers of a stage) in one rank's step."""
    b = setup.base
    dp = b["gpus"] // (b["tp"] * b["pp"] * b["cp"])
    return b["global_batch"] // (dp * b["micro_batch"]) * setup.spec.n_layers / b["pp"]


def gaps(db=None) -> list[Gap]:
    """One :class:`Gap` per open MoE row that gpusim predicts (the published runs, then the later releases)."""
    from gpusim.hwdb import load
    from gpusim.scenario import Scenario
    from gpusim.simulation import simulate

    db = db or load()
    out = []
    for r in _open_rows():
        got = _moe_setup(r, db)
        if got is None:
            continue
        row, setup = got
        b = setup.base
        res = simulate(Scenario.create(**b, recompute=setup.stated_rc or "none"), db=db, recommend=False)
        passes = _layer_passes(setup)
        lay = res.layer_s or {}
        out.append(Gap(run_id=row.run_id, model=str(row.model).rsplit("/", 1)[-1], gpu=row.gpu,
                       gap_per_pass_s=(row.measured_step_s - res.step_s) / passes,
                       tokens_per_micro_batch=b["micro_batch"] * b["seq_len"] / (b["tp"] * b["cp"]),
                       local_experts=setup.spec.n_experts / b["ep"],
                       host_cpu_mult=float(db.gpu(row.gpu).host_cpu_dispatch_mult or 1.0),
                       full_graphs="full_iteration" in (b.get("cuda_graph_scope") or ()),
                       gpu_per_pass_s=lay.get("gpu_fwd_s", 0.0) + lay.get("gpu_bwd_s", 0.0),
                       signed_frac=res.step_s / row.measured_step_s - 1.0, precision=str(b.get("precision", "")),
                       parts_s={k: sum(float(lay.get(c, 0.0)) for c in cols) for k, cols in PARTS.items()}))
    return out


def decompose(rows: list[Gap], const_s: float = 1e-3) -> dict | None:
    """[stop 52] Non-negative least squares of the rows' gaps per pass on gpusim's per-pass parts (:data:`PARTS`) and a
    constant (module docstring, ``--components``): ``{"n", "coef": {part: c_k, "per pass": c_0 seconds},
    "explained_frac"}``; None with fewer rows than unknowns. Hand-worked: gaps ``0.5 x experts + 1 ms`` on rows whose
    parts vary independently give back ``c_experts = 0.5``, ``c_0 = 1 ms`` and every other ``c_k = 0``."""
    import numpy as np
    from scipy.optimize import nnls

    names = list(PARTS)
    if len(rows) < len(names) + 1:
        return None
    X = np.array([[g.parts_s[k] for k in names] + [const_s] for g in rows])
    y = np.array([g.gap_per_pass_s for g in rows])
    scale = np.maximum(np.abs(X).max(axis=0), 1e-300)  # columns of one scale: nnls's tolerance is absolute
    c, _ = nnls(X / scale, y)
    c = c / scale
    resid = y - X @ c
    coef = {k: float(v) for k, v in zip(names, c[:-1])}
    coef["per pass"] = float(c[-1] * const_s)
    return {"n": len(rows), "coef": coef,
            "explained_frac": float(1.0 - np.abs(resid).sum() / max(np.abs(y).sum(), 1e-300))}


def components_lines(rows: list[Gap]) -> list[str]:
    """[stop 52] ``--components``' table: the decomposition for all rows, then by GPU, precision, graph mode, model."""
    groups = [("all open MoE rows", rows)]
    for label, key in (("GPU", lambda g: g.gpu), ("precision", lambda g: g.precision),
                       ("CUDA graphs", lambda g: "full iteration" if g.full_graphs else "eager or partial"),
                       ("model", lambda g: g.model)):
        for v in sorted({key(g) for g in rows}):
            groups.append((f"{label} {v}", [g for g in rows if key(g) == v]))
    out = [f"{'rows':40s} {'n':>4s} " + " ".join(f"{k:>10s}" for k in PARTS) + f" {'ms/pass':>8s} {'explained':>9s}"]
    for name, sel in groups:
        d = decompose(sel)
        if d is None:
            continue
        c = d["coef"]
        out.append(f"{name[:40]:40s} {d['n']:4d} " + " ".join(f"{c[k]:+10.2f}" for k in PARTS)
                   + f" {c['per pass'] * 1e3:+8.2f} {d['explained_frac']:9.0%}")
    return out


def _rank_corr(a, b) -> float:
    import numpy as np
    from scipy.stats import spearmanr

    return float(spearmanr(np.asarray(a), np.asarray(b)).statistic)


def graph_pairs(db=None, scales=(1.0, 2.0, 3.0, 4.0, 6.0)) -> list[dict]:
    """[stop 50] One dict per pair of open MoE rows of one source with the same model, GPU, GPU count, layout, batches
    and precision whose CUDA-graph scope differs (module docstring): ids, layer passes per step and the step
    difference (partial minus full) measured and predicted at each ``launch_cpu_s`` scale."""
    from gpusim.hwdb import load
    from gpusim.params import DEFAULT_PARAMS
    from gpusim.scenario import Scenario
    from gpusim.simulation import simulate

    db = db or load()
    key_cols = ("source_id", "model", "gpu", "gpus", "tp", "pp", "vp", "cp", "ep", "etp", "micro_batch",
                "global_batch", "seq_len", "precision")
    groups: dict[tuple, list] = {}
    for r in _open_rows():
        groups.setdefault(tuple(r[c] for c in key_cols), []).append(r)
    out = []
    for rows in groups.values():
        setups = [x for x in (_moe_setup(r, db) for r in rows) if x is not None]
        full = [x for x in setups if "full_iteration" in (x[1].base.get("cuda_graph_scope") or ())]
        part = [x for x in setups if "full_iteration" not in (x[1].base.get("cuda_graph_scope") or ())]
        for (pr, ps), (fr, fs) in ((a, b) for a in part for b in full):
            passes = _layer_passes(fs)
            pred = []
            for k in scales:
                p = DEFAULT_PARAMS.model_copy(update={"launch_cpu_s": DEFAULT_PARAMS.launch_cpu_s * k})
                st = [simulate(Scenario.create(**s.base, recompute=s.stated_rc or "none"), db=db, params=p,
                               recommend=False).step_s for s in (ps, fs)]
                pred.append((k, (st[0] - st[1]) / passes))
            out.append({"partial": pr.run_id, "full": fr.run_id, "passes": passes,
                        "measured_per_pass_s": (pr.measured_step_s - fr.measured_step_s) / passes,
                        "predicted_per_pass_s": pred, "partial_scope": ps.base.get("cuda_graph_scope") or ()})
    return out


def main() -> int:
    import numpy as np

    if "--components" in sys.argv[1:]:
        print("the open MoE rows' gap per layer pass ~ sum of c x gpusim's part (forward + backward) + a constant "
              "(non-negative least squares; a lead, nothing is set from it)")
        for line in components_lines(gaps()):
            print(line)
        return 0
    if "--graph-pairs" in sys.argv[1:]:
        for g in graph_pairs():
            print(f"{g['partial']} (graphs: {'+'.join(g['partial_scope']) or 'none'}) - {g['full']}: "
                  f"{g['passes']:.0f} layer passes; per pass measured {g['measured_per_pass_s'] * 1e3:+.2f} ms, "
                  "predicted " + ", ".join(f"{v * 1e3:+.2f} ms (launch_cpu_s x{k:g})"
                                           for k, v in g["predicted_per_pass_s"]))
        return 0
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
