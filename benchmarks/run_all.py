"""Run every benchmark of ``make bench`` one after another, print all their figures, then one summary.

    .venv/bin/python benchmarks/run_all.py [--only NAME ...]

A benchmark reports figures; it is not a test. A line of its output that contains "NOT met" is a target
missed: it is repeated in the summary and does not stop the run (exit 0). The exit code is non-zero only when
a benchmark itself failed (a crash, an import error), so that a broken benchmark is still noticed.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

#: run apart from ``make bench``: minutes of calibration, the CLI fuzzer (``make fuzz``), and a GPU's check
#: (``--device cpu --small`` smoke-tests it)
#: and the by-hand check that a speed-up changed no result (``evaluate_reference.py save|check PATH``)
RUN_APART = ("calibration_heldout.py", "fuzz_cli.py", "gpu_llm_check.py", "evaluate_reference.py")
#: (script, arguments): the order of ``make bench``: every other script of benchmarks/
BENCHMARKS = [
    ("model_speed.py", []),
    ("cold_start.py", []),
    ("sweep.py", []),
    ("app_rerun.py", []),
    ("llm_speed.py", ["--rows", "200000"]),
    ("layout_search.py", []),
    ("layout_chunks.py", ["--repeats", "2"]),
    ("ceiling_recipes.py", []),
    ("moe_runs.py", []),
    ("recommended_layouts.py", []),
    ("topo_speed.py", []),
]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="+", metavar="NAME", help="only these scripts (e.g. cold_start.py)")
    args = ap.parse_args(argv)
    chosen = [(s, a) for s, a in BENCHMARKS if not args.only or s in args.only or s.removesuffix(".py") in args.only]
    missed: list[str] = []
    failed: list[str] = []
    for script, extra in chosen:
        print(f"\n=== {script} {' '.join(extra)}".rstrip(), flush=True)
        t0 = time.perf_counter()
        proc = subprocess.Popen([sys.executable, str(HERE / script), *extra], stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, bufsize=1)
        assert proc.stdout is not None
        for line in proc.stdout:
            sys.stdout.write(line)
            sys.stdout.flush()
            if "NOT met" in line:
                missed.append(f"{script}: {line.strip()}")
        rc = proc.wait()
        print(f"--- {script}: {time.perf_counter() - t0:.1f} s" + (f", exit {rc}" if rc else ""), flush=True)
        if rc:
            failed.append(f"{script}: exit {rc}")
    print("\n=== summary")
    print(f"{len(chosen)} benchmarks run; {len(missed)} target{'s' * (len(missed) != 1)} missed"
          f"{', ' + str(len(failed)) + ' failed' if failed else ''}")
    for m in missed:
        print(f"  target missed: {m}")
    for f in failed:
        print(f"  FAILED: {f}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
