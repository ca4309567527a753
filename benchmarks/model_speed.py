"""Scenarios per second through the vectorised model (one core), and the cost of one `simulate()`.

    .venv/bin/python benchmarks/model_speed.py [--rows 1000000] [--repeats 3]

Builds one million scenarios over GPU counts, per-GPU batches, strategies and accumulation for a real
workload and hardware row, then times `gpusim.model.step.evaluate` on them (best of N repeats). numpy is
single-threaded for these element-wise operations, so this is one core's figure.
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

from gpusim.hwdb import load  # noqa: E402
from gpusim.model.step import evaluate  # noqa: E402
from gpusim.params import DEFAULT_PARAMS  # noqa: E402
from gpusim.simulation import Scenario, build_inputs, simulate, stack_rows  # noqa: E402


def grid(rows: int, model: str, seed: int = 0):
    db = load()
    _, _, row = build_inputs(Scenario(model=model, node="dgx-h100", gpus=16, nodes=2, per_gpu_batch=32), db)
    inp = stack_rows([row])
    rng = np.random.default_rng(seed)
    n = 2.0 ** rng.integers(0, 11, rows)
    return inp.replace(
        n_gpus=n, n_nodes=np.maximum(1.0, n / 8), micro_batch=rng.integers(1, 512, rows).astype(float),
        accum=rng.choice([1.0, 2.0, 4.0, 8.0], rows), strategy=rng.integers(0, 6, rows),
        checkpointing=rng.random(rows) < 0.3)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--model", default="llama2-7b")
    args = ap.parse_args()
    inp = grid(args.rows, args.model)
    best = float("inf")
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        evaluate(inp, DEFAULT_PARAMS)
        best = min(best, time.perf_counter() - t0)
    print(f"vectorised model: {args.rows:,} scenarios in {best:.3f} s = {args.rows / best:,.0f} scenarios/s "
          f"(one core, {args.model}, best of {args.repeats})")

    db = load()
    scn = Scenario(model="resnet50", gpu="h100-sxm", gpus=8, per_gpu_batch=256)
    simulate(scn, db=db)
    t0 = time.perf_counter()
    k = 50
    for _ in range(k):
        simulate(scn, db=db)
    print(f"simulate() with recommendations: {(time.perf_counter() - t0) / k * 1e3:.1f} ms per scenario")


if __name__ == "__main__":
    main()
