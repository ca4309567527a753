"""Speed of the LLM-layout model on one core.

    .venv/bin/python benchmarks/llm_speed.py [--rows 1000000] [--repeats 3]

1. LLM configurations per second through the vectorised model including memory: ``--rows`` rows of Llama 3 70B
   on H100 nodes with tp, pp, vp, micro-batch, recomputation and sequence parallelism varied per row,
   (a) through ``gpusim.model.llm.llm_terms`` (per-GEMM compute, TP and pipeline communication, the schedule,
   activations per stage) and (b) through the whole ``gpusim.model.step.evaluate`` (plus data-parallel
   communication, optimizer, data, stragglers, memory per stage and the bottleneck).
2. ``simulate()`` of one LLM scenario with its what-ifs (recommendations on), median of repeats.

The rows repeat about 540 distinct layouts, as a sweep's grid does; the model evaluates each distinct row once
(:mod:`gpusim.model.distinct`) and ``evaluate`` works in blocks of 65,536 rows. Rows that are all distinct take the
direct path: ``--all-distinct`` gives every row its own inter-node bandwidth to measure that case.

numpy runs these element-wise operations on one thread; OMP_NUM_THREADS=1 keeps BLAS from using more. Times are
CPU time of this process (``time.process_time``), which on a shared, loaded machine is closer to what one core
does than wall time; wall time is printed beside it for simulate().
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import numpy as np  # noqa: E402


def _rows(n: int, db):
    from gpusim.simulation import Scenario, build_inputs, stack_rows

    scn = Scenario(model="llama3-70b", gpu="h100-sxm", gpus=512, nodes=64, precision="bf16", kind="zero1", tp=8,
                   pp=4, micro_batch=1, global_batch=512, seq_len=8192, recompute="selective")
    inp = stack_rows([build_inputs(scn, db)[2]])
    rng = np.random.default_rng(0)
    tp = rng.choice([1.0, 2.0, 4.0, 8.0], n)
    pp = rng.choice([1.0, 2.0, 4.0, 8.0, 16.0], n)
    vp = np.where(pp > 1, rng.choice([1.0, 2.0, 5.0], n), 1.0)
    mb = rng.choice([1.0, 2.0, 4.0], n)
    dp = 512.0 / (tp * pp)
    changes = {"tp": tp, "pp": pp, "vp": vp, "micro_batch": mb, "accum": np.maximum(1.0, 512.0 / (mb * dp)),
               "recompute": rng.integers(0, 3, n), "sp": tp > 1}
    full = {}
    for f, v in vars(inp).items():
        a = np.asarray(v)
        full[f] = changes[f] if f in changes else (np.repeat(a, n, axis=0) if a.ndim >= 1 and a.shape[0] == 1
                                                   else a)
    return inp.replace(**full)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--all-distinct", action="store_true",
                    help="every row its own inter-node bandwidth (nothing repeats: the direct path)")
    args = ap.parse_args()

    from gpusim.hwdb import load
    from gpusim.model.step import _llm_inputs, evaluate
    from gpusim.model.llm import llm_terms
    from gpusim.params import DEFAULT_PARAMS as P
    from gpusim.simulation import simulate

    db = load()
    inp = _rows(args.rows, db)
    if args.all_distinct:
        bw = np.asarray(inp.inter_busbw_bytes_per_s, dtype=np.float64)
        inp = inp.replace(inter_busbw_bytes_per_s=bw * np.linspace(0.5, 1.5, args.rows))
    g = np.asarray(inp.n_gpus) / np.asarray(inp.n_nodes)
    x = _llm_inputs(inp, g, P)
    best_terms, best_eval = [], []
    for _ in range(args.repeats):
        t0 = time.process_time()
        with np.errstate(all="ignore"):
            llm_terms(x, P)
        best_terms.append(time.process_time() - t0)
        t0 = time.process_time()
        out = evaluate(inp, P)
        best_eval.append(time.process_time() - t0)
    assert np.all(np.isfinite(out["step_s"])) and out["step_s"].shape == (args.rows,)
    n = args.rows
    print(f"LLM configurations per second on one core ({n:,} rows, best of {args.repeats}):")
    print(f"  gpusim.model.llm.llm_terms (compute per GEMM, TP/PP communication, schedule, activations): "
          f"{n / min(best_terms):,.0f}/s")
    print(f"  gpusim.model.step.evaluate (the whole step and memory per stage):                          "
          f"{n / min(best_eval):,.0f}/s")

    kw = dict(model="llama3-70b", gpu="h100-sxm", gpus=64, nodes=8, tp=4, pp=4, vp=5, micro_batch=1,
              global_batch=128, seq_len=8192, precision="bf16", kind="zero1", recompute="selective")
    simulate(kw, db=db)  # warm caches (workload catalogue, hwdb lookups)
    for label, recommend in (("with its what-ifs", True), ("without what-ifs", False)):
        cpu, wall = [], []
        for _ in range(max(10, args.repeats * 5)):
            t0, w0 = time.process_time(), time.perf_counter()
            res = simulate(kw, db=db, recommend=recommend)
            cpu.append(time.process_time() - t0)
            wall.append(time.perf_counter() - w0)
        print(f"simulate() of Llama 3 70B on 64 x H100 (tp 4, pp 4, vp 5) {label} ({len(res.recommendations)} "
              f"recommendations): CPU median {statistics.median(cpu) * 1e3:.2f} ms, best {min(cpu) * 1e3:.2f} ms; "
              f"wall median {statistics.median(wall) * 1e3:.2f} ms")


if __name__ == "__main__":
    main()
