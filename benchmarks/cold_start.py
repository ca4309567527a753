"""Cold-start wall time of the CLI: `gpusim hw list` and `gpusim predict --json`, beside `python -c "import numpy"`.

    .venv/bin/python benchmarks/cold_start.py [--repeats 7]

Each figure is the median of N fresh processes with the bytecode cached (a warm-up run of each command first,
with ``PYTHONDONTWRITEBYTECODE`` removed so that ``__pycache__`` is written, and the hardware database cache
filled). The runs are interleaved (numpy, then each command, N rounds), so that the reference sees the same load.
Target (issue 20): each command <= 0.3 s on a quiet machine or, on a loaded one, within 2.5x of the numpy
import measured beside it. Each line also gives the processes' CPU time (user + system, from
``getrusage(RUSAGE_CHILDREN)``), which other processes competing for the cores inflate far less than the wall
time: on a busy machine it is the steadier figure to compare changes by.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

TARGET_S = 0.3
TARGET_X_NUMPY = 2.5

#: the installed ``gpusim`` command (the console script next to this interpreter), as a user runs it; ``python -m
#: gpusim`` where it is missing (runpy costs that form ~5 ms more)
_SCRIPT = Path(sys.executable).with_name("gpusim")
GPUSIM = [str(_SCRIPT)] if _SCRIPT.is_file() else [sys.executable, "-m", "gpusim"]
REFERENCE = ("python -c 'import numpy'", [sys.executable, "-c", "import numpy"])
COMMANDS = {
    "gpusim --version": [*GPUSIM, "--version"],
    "gpusim hw list": [*GPUSIM, "hw", "list"],
    "gpusim predict (resnet50, 8x h100-sxm, --json)": [*GPUSIM, "predict", "--model", "resnet50", "--gpu", "h100-sxm",
                                                       "--gpus", "8", "--per-gpu-batch", "256", "--json"],
}
CHECKED = ("gpusim hw list", "gpusim predict (resnet50, 8x h100-sxm, --json)")


def _run(argv: list[str], env: dict) -> tuple[float, float]:
    """(wall seconds, CPU seconds: user + system) of one fresh process."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, env=env)
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    every = {REFERENCE[0]: REFERENCE[1], **COMMANDS}
    print(f"gpusim runs as: {' '.join(GPUSIM)}")
    for argv in every.values():  # warm-up: writes __pycache__ and the hwdb cache
        _run(argv, env)
    times: dict[str, list[float]] = {name: [] for name in every}
    cpu: dict[str, list[float]] = {name: [] for name in every}
    for _ in range(args.repeats):
        for name, argv in every.items():
            wall, c = _run(argv, env)
            times[name].append(wall)
            cpu[name].append(c)
    ref = statistics.median(times[REFERENCE[0]])
    ref_cpu = statistics.median(cpu[REFERENCE[0]])
    for name, t in times.items():
        med, med_cpu = statistics.median(t), statistics.median(cpu[name])
        print(f"{name}: median {med * 1e3:.0f} ms, min {min(t) * 1e3:.0f} ms ({args.repeats} fresh processes)"
              + ("" if name == REFERENCE[0] else f", {med / ref:.2f}x the numpy import")
              + f"; CPU time (user + system) median {med_cpu * 1e3:.0f} ms"
              + ("" if name == REFERENCE[0] else f", {med_cpu / ref_cpu:.2f}x the numpy import's"))
    for name in CHECKED:
        med = statistics.median(times[name])
        ok = med <= TARGET_S or med <= TARGET_X_NUMPY * ref
        print(f"Cold-start target {name}: median <= {TARGET_S:.1f} s or <= {TARGET_X_NUMPY}x numpy import "
              f"({TARGET_X_NUMPY * ref * 1e3:.0f} ms here): {'met' if ok else 'NOT met'}")


if __name__ == "__main__":
    main()
