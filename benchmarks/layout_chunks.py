"""Layouts per CPU-second of the model calls of real layout searches, by the rows per call (gpusim.search.CHUNK_ROWS).

    PYTHONPATH=$PWD .venv/bin/python benchmarks/layout_chunks.py [--chunks 4096,8192,16384,32768,65536] [--repeats 3]

benchmarks/layout_search.py repeats the 6,111 valid layouts of one job to fill a million rows, so a large chunk holds
each layout several times and the model's per-distinct evaluation (gpusim.model.distinct) profits from duplicates a
real search does not have. Here the rows are the ones real searches send:

1. ``gpusim plan``'s layout rows (gpusim.search.plan_layout_rows): every layout of every hardware option and node
   count for Llama 3 70B (all distinct: other hardware, other GPU counts), in chunks of the given size;
2. ``gpusim sweep``'s call (gpusim.search.search_layouts): every layout of a job, for three models (dense 8B and 70B,
   MoE Qwen3-30B-A3B in FP8) at 256 to 8,192 H100 GPUs, in chunks of the given size (a search of fewer layouts than
   the chunk is one call whatever the size).

Only the time inside ``gpusim.model.step.evaluate`` is counted (CPU time of this process), best of ``--repeats``.
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

SWEEPS = (("llama3-8b", "bf16", (256, 2048)), ("llama3-70b", "bf16", (1024, 8192)),
          ("qwen3-30b-a3b", "fp8", (512, 4096)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chunks", default="4096,8192,16384,32768,65536")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()

    import gpusim.model.step as ST
    import gpusim.search as S
    from gpusim.hwdb import load
    from gpusim.planning import plan
    from gpusim.simulation import Scenario

    calls: list[tuple[int, float]] = []
    evaluate = ST.evaluate

    def timed(inp, p):
        t0 = time.process_time()
        out = evaluate(inp, p)
        if np.all(np.asarray(inp.llm)):
            calls.append((ST.n_rows(inp), time.process_time() - t0))
        return out

    ST.evaluate = timed
    db = load()
    jobs = [Scenario(model=m, seq_len=4096 if m != "llama3-70b" else 8192, gpu="h100-sxm", gpus=n, nodes=n // 8,
                     kind="zero1", precision=pr, global_batch=1024) for m, pr, counts in SWEEPS for n in counts]

    def measure(run):
        best_rows, best_s = 0, float("inf")
        for _ in range(args.repeats):
            calls.clear()
            run()
            best_rows, best_s = sum(r for r, _ in calls), min(best_s, sum(t for _, t in calls))
        return best_rows, len(calls), best_s

    print(f"rows per call: plan (Llama 3 70B, every option) | sweep ({len(jobs)} jobs) -- layouts per CPU-second")
    for chunk in (int(c) for c in args.chunks.split(",")):
        S.CHUNK_ROWS = chunk
        S.chunks.__defaults__ = (chunk,)
        r1, n1, t1 = measure(lambda: plan("llama3-70b", tokens=1e12, db=db, layouts=True, with_sensitivity=False))
        r2, n2, t2 = measure(lambda: [S.search_layouts(j, db=db) for j in jobs])
        print(f"{chunk:7d}: plan {r1 / t1:11,.0f} ({r1} rows, {n1} calls) | sweep {r2 / t2:11,.0f} ({r2} rows, {n2} calls)")


if __name__ == "__main__":
    main()
