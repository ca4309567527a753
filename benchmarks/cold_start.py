"""Cold-start wall time of the CLI: `gpusim hw list` and `gpusim predict` (median of N fresh processes).

    .venv/bin/python benchmarks/cold_start.py [--repeats 7]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

COMMANDS = {
    "gpusim --version": ["--version"],
    "gpusim hw list": ["hw", "list"],
    "gpusim predict (resnet50, 8x h100-sxm, --json)": ["predict", "--model", "resnet50", "--gpu", "h100-sxm",
                                                       "--gpus", "8", "--per-gpu-batch", "256", "--json"],
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args()
    for name, argv in COMMANDS.items():
        times = []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-m", "gpusim", *argv], check=True, stdout=subprocess.DEVNULL)
            times.append(time.perf_counter() - t0)
        print(f"{name}: median {statistics.median(times) * 1e3:.0f} ms, min {min(times) * 1e3:.0f} ms "
              f"({args.repeats} fresh processes)")


if __name__ == "__main__":
    main()
