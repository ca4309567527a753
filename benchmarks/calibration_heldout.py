"""Held-out DDP-step error of `gpusim calibrate --quick` + `gpusim fit` on this machine, over several runs.

    .venv/bin/python benchmarks/calibration_heldout.py [--runs 5] [--nproc-per-node 2]

Each run measures a fresh profile (on CPU: gloo processes), fits it, and reads the held-out DDP steps the fit
predicted without using them. Prints each run's median error and the pooled median over all held-out steps.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--nproc-per-node", type=int, default=2)
    args = ap.parse_args()
    pooled, per_run = [], []
    gpusim = [sys.executable, "-m", "gpusim"]
    for i in range(args.runs):
        with tempfile.TemporaryDirectory() as tmp:
            prof, cal = Path(tmp) / "profile", Path(tmp) / "cal.json"
            subprocess.run([*gpusim, "calibrate", "--quick", "--nproc-per-node", str(args.nproc_per_node), "--out",
                            str(prof)], check=True, stdout=subprocess.DEVNULL, timeout=900)
            subprocess.run([*gpusim, "fit", str(prof), "-o", str(cal)], check=True, stdout=subprocess.DEVNULL,
                           timeout=600)
            held = json.loads(cal.read_text())["held_out"]
            errs = [abs(r["error_frac"]) for r in held["records"] if r.get("error_frac") is not None]
            pooled += errs
            per_run.append(statistics.median(errs))
            print(f"run {i + 1}: held-out DDP step error median {100 * per_run[-1]:.1f}% (n={len(errs)})", flush=True)
    print(f"pooled over {args.runs} runs: held-out DDP step error median {100 * statistics.median(pooled):.1f}% "
          f"(n={len(pooled)}); per-run medians {min(per_run) * 100:.1f}%..{max(per_run) * 100:.1f}%")


if __name__ == "__main__":
    main()
