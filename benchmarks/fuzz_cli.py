"""Fuzz the ``gpusim`` command line as a hostile user would, and count what goes wrong.

Every case is one invocation: a valid command of each subcommand with one or two flags replaced by a
hostile value (``inf``, ``nan``, ``1e-320``, ``1e400``, negative, huge, empty, garbage, a binary file, a
JSON nested 100,000 deep, a CSV with NaN, a 300-character path, a directory ...). A case is

- an **internal error** when the exit code is 3 or a Python traceback is printed,
- a **hang** when it runs past the time limit (``--limit-s``, default 20 s),
- a **bad figure** when it succeeds but prints ``inf``/``nan`` as a number, or NaN/Infinity in JSON, or ``null``
  for a figure that always has a value (``step_s``, ``throughput_samples_per_s``, ``time_to_train_s`` ...).

Run::

    .venv/bin/python benchmarks/fuzz_cli.py --cases 400 --seed 0

``tests/cli/test_cli_fuzz.py`` drives the same case builder with hypothesis. Cases run in-process
(``gpusim.cli.main``) under SIGALRM, except ``calibrate``, which runs in a subprocess session (it would
launch torchrun) and is killed with its process group at the limit.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

NUMBERS = ["inf", "-inf", "nan", "NaN", "1e-320", "5e-324", "1e400", "-1e400", "-1", "0", "-0", "1e30", "1e18",
           "100000", "1000000000", "0.5", "", "abc", "0x10", "1_000", "  7 ", "--", "1e30s", "-1h", "infs", "nanGiB",
           "1e-320MiB", "9" * 400]
DURATIONS = ["inf", "nan", "-1h", "1e30s", "0s", "1e-320s", "1e400d", "abc", "", "10", "2w"]
BYTES = ["inf", "nan", "-1GiB", "1e30GiB", "0", "1e-320", "abc", "", "1ZiB", "1,2", "1e400"]

#: (command, base argv, {flag: kind}) where kind is "num", "int", "dur", "bytes", "file", "path", "id", "list"
COMMANDS: list[tuple[str, list[str], dict[str, str]]] = [
    ("predict", ["predict", "--model", "resnet50", "--gpu", "h100-sxm", "--gpus", "8", "--per-gpu-batch", "64",
                 "--json"],
     {"--gpus": "int", "--nodes": "int", "--per-gpu-batch": "int", "--accum": "int", "--seq-len": "int",
      "--bucket-mib": "num", "--slowest-gpu-frac": "num", "--baseline-throughput": "num",
      "--measured-throughput": "num", "--oversubscription": "num", "--cpu-cores-per-gpu": "num",
      "--storage-gbyte-per-s": "num", "--workers": "int", "--nics-per-node": "int", "--calibration": "file",
      "--topo": "file", "--gpu": "id", "--model": "id"}),
    ("predict-text", ["predict", "--model", "bert-large", "--seq-len", "128", "--gpu", "a100-sxm4-80gb", "--gpus",
                      "16", "--nodes", "2", "--per-gpu-batch", "32"],
     {"--baseline-throughput": "num", "--measured-throughput": "num", "--slowest-gpu-frac": "num",
      "--bucket-mib": "num", "--accum": "int", "--nodes": "int"}),
    ("predict-llm", ["predict", "--model", "llama3-8b", "--gpu", "h100-sxm", "--gpus", "16", "--nodes", "2", "--tp", "4",
                     "--pp", "2", "--micro-batch", "1", "--global-batch", "16", "--seq-len", "4096", "--precision",
                     "bf16", "--json"],
     {"--tp": "int", "--pp": "int", "--vp": "int", "--cp": "int", "--ep": "int", "--expert-tp": "int",
      "--global-batch": "int", "--micro-batch": "int", "--moe-capacity-factor": "num", "--seq-len": "int",
      "--recompute": "id", "--model": "id"}),
    ("sweep", ["sweep", "--model", "llama3-8b", "--gpu", "h100-sxm", "--gpus", "16", "--nodes", "2", "--seq-len",
               "4096", "--global-batch", "32", "--json"],
     {"--tp": "int", "--pp": "int", "--cp": "int", "--top": "int", "--global-batch": "int", "--gpus": "int"}),
    ("compare", ["compare", "--model", "resnet50", "--gpu", "h100-sxm", "--gpus", "8", "--per-gpu-batch", "64",
                 "--vs", "--gpu", "a100-sxm4-80gb"],
     {"--per-gpu-batch": "int", "--gpus": "int", "--bucket-mib": "num", "--model": "id"}),
    ("scale", ["scale", "--model", "resnet50", "--gpu", "h100-sxm", "--gpus", "16", "--per-gpu-batch", "64",
               "--json"],
     {"--global-batch": "int", "--counts": "list", "--gpus": "int", "--per-gpu-batch": "int", "--mode": "id",
      "--bucket-mib": "num", "--nodes": "int"}),
    ("comm", ["comm", "--gpu", "h100-sxm", "--gpus", "8", "--bytes", "1GiB", "--json"],
     {"--bytes": "bytes", "--gpus": "int", "--nodes": "int", "--calibration": "file", "--gpu": "id"}),
    ("plan", ["plan", "--model", "resnet50", "--samples", "1.28M", "--epochs", "1", "--gpu", "h100-sxm",
              "--max-gpus", "16", "--no-progress", "--json"],
     {"--epochs": "num", "--budget": "num", "--deadline": "dur", "--max-gpus": "int", "--max-global-batch": "int",
      "--top": "int", "--usd-per-kwh": "num", "--pue": "num", "--restart": "dur", "--checkpoint-interval": "dur",
      "--checkpoint-gbyte-per-s": "num", "--failure-rate": "num", "--eval-overhead": "num",
      "--lifetime-years": "num", "--samples": "num", "--global-batch": "int", "--lr": "num", "--workers": "int",
      "--price-override": "override", "--calibration": "file"}),
    ("plan-text", ["plan", "--model", "llama2-7b", "--tokens", "1e9", "--gpu", "h100-sxm", "--max-gpus", "64",
                   "--no-progress"],
     {"--tokens": "num", "--budget": "num", "--deadline": "dur", "--top": "int", "--restart": "dur"}),
    ("topo", ["topo", "TOPO", "--gpu", "h100-sxm", "--json"], {"--bytes": "bytes", "file": "file", "--p2p": "file"}),
    ("validate", ["validate", "CSV", "--json"], {"file": "file", "--worst": "int", "--calibration": "file"}),
    ("fit", ["fit", "NCCL", "-o", "OUT"], {"file": "file", "-o": "path"}),
    ("hw", ["hw", "show", "h100-sxm"], {"id": "id"}),
    ("hw-validate", ["hw", "validate", "HWDIR"], {"dir": "hwdir"}),
    ("models", ["models", "--json"], {"--seq-len": "int", "--model": "id"}),
    # --max-time 10: a valid calibration ends by itself within the case's limit (calibrate_limit_s)
    ("calibrate", ["calibrate", "--quick", "--only", "gemm", "--max-time", "10", "--out", "OUT"],
     {"--nproc-per-node": "int", "--timeout": "num", "--master-port": "int", "--node-rank": "int", "--only": "list"}),
]
#: a calibrate case may run its --max-time of 10 s plus torch's start-up and torchrun's shutdown
CALIBRATE_LIMIT_S = 60.0


def make_files(root: Path) -> dict[str, Path]:
    """Hostile and valid input files under ``root``."""
    root.mkdir(parents=True, exist_ok=True)
    f: dict[str, Path] = {}

    def w(name, data):
        p = root / name
        (p.write_bytes if isinstance(data, bytes) else p.write_text)(data)
        f[name] = p

    w("binary.bin", bytes(range(256)) * 64)
    w("empty.txt", "")
    w("deep.json", "[" * 100_000 + "]" * 100_000)
    w("deep_obj.json", '{"a":' * 50_000 + "1" + "}" * 50_000)
    w("nan.json", '{"params": {"compute_eff": NaN}, "version": 1}')
    header = ("source_id,kind,model,gpu,n_gpus,n_nodes,interconnect,precision,per_gpu_batch,global_batch,"
              "message_bytes,value,unit,notes\n")
    w("nan.csv", header + "X,throughput,ResNet-50 v1.5,H100 SXM5,8,1,NVLink,amp_fp16,NaN,inf,,nan,images/s,x\n"
                 "X,throughput,ResNet-50 v1.5,H100 SXM5,1,1,single GPU,amp_fp16,,,,,images/s,x\n"
                 "X,throughput,ResNet-50 v1.5,H100 SXM5,inf,1,NVLink,amp_fp16,256,256,,1e400,images/s,x\n")
    w("header_only.csv", header)
    w("garbage.csv", "a,b\n1,2\n\x00\x01\n")
    nccl = {"nGpus": 8, "results": [{"name": "all_reduce", "size": 1024, "count": 256, "type": "float",
                                     "redop": "sum", "root": -1, "out": {"time": float("nan"), "algBw": "NaN",
                                                                        "busBw": float("inf"), "wrong": 0}}]}
    w("nccl_nan.json", json.dumps(nccl))
    w("nccl_empty.txt", "# nThread 1 nGpus 8\n# Avg bus bandwidth : 0\n")
    w("latin1.txt", "GPU0\tX\xe9".encode("latin-1"))
    n = 1000
    lines = ["\t" + "\t".join(f"GPU{i}" for i in range(n))]
    lines += [f"GPU{i}\t" + "\t".join("X" if i == j else "NV18" for j in range(n)) for i in range(n)]
    w("topo_1000.txt", "\n".join(lines) + "\n")
    w("topo8.txt", "\tGPU0\tGPU1\tGPU2\tGPU3\nGPU0\t X \tNV12\tSYS\tPIX\nGPU1\tNV12\t X \tSYS\tPIX\n"
                   "GPU2\tSYS\tSYS\t X \tNV12\nGPU3\tPIX\tPIX\tNV12\t X \n")
    (root / "profile_empty").mkdir(exist_ok=True)
    w("profile_empty/records.jsonl", "")
    (root / "profile_empty" / "meta.json").write_text("{}")
    f["profile_empty"] = root / "profile_empty"
    (root / "adir").mkdir(exist_ok=True)
    f["adir"] = root / "adir"
    long = root / ("x" * 300)
    f["long"] = long
    hw = root / "hw_bomb"
    hw.mkdir(exist_ok=True)
    # a "billion laughs" of 9**7 leaves in 300 bytes (kept at 7 levels so that an unprotected loader
    # fails slowly rather than exhausting the machine's memory)
    (hw / "bomb.yaml").write_text("a: &a [x,x,x,x,x,x,x,x,x]\n" + "".join(
        f"{c}: &{c} [{','.join('*' + p for _ in range(9))}]\n" for p, c in zip("abcdef", "bcdefg"))
        + "gpus: *g\n")
    f["hw_bomb"] = hw
    dup = root / "hw_dup"
    dup.mkdir(exist_ok=True)
    (dup / "g.yaml").write_text("gpus:\n  - id: x\n    memory_gib: 80\n    memory_gib: 8\n")
    f["hw_dup"] = dup
    bad = root / "hw_bin"
    bad.mkdir(exist_ok=True)
    (bad / "g.yaml").write_bytes(b"gpus:\n  - id: \xff\xfe\n    released: 2023-02-30\n")
    f["hw_bin"] = bad
    return f


def value_for(kind: str, rnd: random.Random, files: dict[str, Path], tmp: Path) -> str:
    anyfile = [str(p) for p in files.values()] + ["/nonexistent/x", "/dev/null", "/dev/zero", "-" * 3]
    if kind in ("num", "int"):
        return rnd.choice(NUMBERS)
    if kind == "dur":
        return rnd.choice(DURATIONS + NUMBERS[:8])
    if kind == "bytes":
        return rnd.choice(BYTES)
    if kind == "file":
        return rnd.choice(anyfile)
    if kind == "path":  # an output path: only ever inside tmp (never replace a real device here)
        return rnd.choice([str(tmp / "adir"), str(tmp / "x" / ("y" * 300)), str(tmp / "new.json"),
                           str(tmp / "no" / "such" / "dir.json"), str(tmp / "binary.bin")])
    if kind == "hwdir":
        return rnd.choice([str(files[k]) for k in ("hw_bomb", "hw_dup", "hw_bin", "adir", "binary.bin")])
    if kind == "list":
        return rnd.choice(["1,8,16,64", "0,1", "-1", "1e9", "a,b", "", ",,,", "1," * 200, "nan", "1000000"])
    if kind == "override":
        return rnd.choice(["aws-p5-48xlarge=inf", "x=nan", "=1", "a=b", "aws-p5-48xlarge=-1", "aws-p5-48xlarge=1e-320"])
    return rnd.choice(["", "X" * 300, "h100", "../../etc/passwd", "\x00", "rtx-4090", "nan"])


def build_case(rnd: random.Random, files: dict[str, Path], tmp: Path, command: str | None = None) -> list[str]:
    """One hostile invocation (argv without the program name)."""
    name, base, flags = rnd.choice([c for c in COMMANDS if command is None or c[0] == command])
    argv = [{"TOPO": str(files["topo8.txt"]), "CSV": str(files["nan.csv"]), "OUT": str(tmp / "out.json"),
             "NCCL": str(files["nccl_nan.json"]), "HWDIR": str(files["hw_dup"])}.get(a, a) for a in base]
    if name == "calibrate":
        argv[argv.index(str(tmp / "out.json"))] = str(tmp / "prof")
    for flag in rnd.sample(sorted(flags), k=min(len(flags), rnd.choice((1, 1, 2)))):
        v = value_for(flags[flag], rnd, files, tmp)
        if flag in ("file", "id", "dir"):  # the positional argument after the subcommand(s)
            pos = 2 if base[0] == "hw" else 1
            argv[pos] = v
        elif flag in argv:
            argv[argv.index(flag) + 1] = v
        else:
            argv += [flag, v]
    return argv


class _Timeout(BaseException):  # not an Exception: the CLI's catch-all must not swallow it
    pass


def _alarm(signum, frame):
    raise _Timeout()


_FIGURE = re.compile(r"(?<![\w.])(-?inf|nan)(?![\w])", re.IGNORECASE)
#: figures that always have a value (null in JSON would stand for inf or NaN); other keys may be null
#: for "not applicable" (tokens/s of an image model, a deadline not given)
_FIGURES = {"step_s", "throughput_samples_per_s", "throughput_per_gpu_samples_per_s", "speedup",
            "scaling_efficiency_frac", "mfu_frac", "gpu_util_frac", "memory_per_gpu_bytes", "time_to_train_s",
            "cost_usd", "time_s", "algbw_bytes_per_s", "busbw_bytes_per_s", "energy_kwh", "goodput_frac",
            "compute_s", "comm_exposed_s", "data_wait_s", "optimizer_s", "sync_s", "overhead_s"}


#: figures relative to one GPU: null by design, with a note that says why, where one GPU cannot hold the model
_ONE_GPU_REFERENCE = ("speedup", "scaling_efficiency_frac")
_NO_REFERENCE = "no one-GPU reference"


def bad_figures(argv: list[str], out: str) -> list[str]:
    """Figures printed as inf/nan, or null/NaN in JSON under a key that names a unit."""
    found = []
    if "--json" in argv and out.strip().startswith(("{", "[")):
        try:
            doc = json.loads(out, parse_constant=lambda c: found.append(f"JSON constant {c}"))
        except ValueError:
            return found + ["JSON output that does not parse"]

        def walk(x, key=""):
            if isinstance(x, dict):
                if x.get("feasible") is False or x.get("fits_in_memory") is False:
                    return  # an infeasible configuration is a row with a reason and no time (by design)
                for k, v in x.items():
                    walk(v, str(k))
            elif isinstance(x, list):
                for v in x:
                    walk(v, key)
            elif x is None and key in _FIGURES and not (key in _ONE_GPU_REFERENCE and _NO_REFERENCE in out):
                found.append(f"null {key}")
        walk(doc)
    else:
        found += [f"printed {m.group(1)}" for m in _FIGURE.finditer(out)][:3]
    return found


def run_case(argv: list[str], limit_s: float = 20.0) -> dict:
    """Run one invocation; returns rc, kind (ok, error, internal, hang, bad-figure), the output's tail and time."""
    t0 = time.perf_counter()
    if argv[0] == "calibrate":
        try:
            proc = subprocess.run([sys.executable, "-m", "gpusim", *argv], capture_output=True, text=True,
                                  timeout=max(limit_s, CALIBRATE_LIMIT_S), start_new_session=True)
            rc, out, err = proc.returncode, proc.stdout, proc.stderr
        except subprocess.TimeoutExpired as e:
            _killpg_of(e)
            return {"argv": argv, "rc": None, "kind": "hang", "tail": "", "wall_s": time.perf_counter() - t0}
    else:
        from gpusim.cli import main

        out_buf, err_buf = io.StringIO(), io.StringIO()
        old = signal.signal(signal.SIGALRM, _alarm)
        signal.setitimer(signal.ITIMER_REAL, limit_s)
        try:
            with contextlib.redirect_stdout(out_buf), contextlib.redirect_stderr(err_buf):
                try:
                    rc = main(list(argv))
                except SystemExit as e:
                    rc = e.code if isinstance(e.code, int) else (0 if e.code is None else 2)
                except _Timeout:
                    rc = None
                except Exception as e:  # an exception that escaped the CLI: a bug
                    import traceback

                    traceback.print_exc()
                    rc = f"raised {type(e).__name__}"
        except _Timeout:
            rc = None
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old)
        out, err = out_buf.getvalue(), err_buf.getvalue()
    wall = time.perf_counter() - t0
    text = out + err
    if rc is None:
        kind = "hang"
    elif rc == 3 or not isinstance(rc, int) or "Traceback (most recent call last)" in text:
        kind = "internal"
    elif rc == 0 and bad_figures(argv, out):
        kind = "bad-figure"
    elif rc == 0:
        kind = "ok"
    else:
        kind = "error"
    return {"argv": argv, "rc": rc, "kind": kind, "tail": (err or out)[-300:], "wall_s": wall,
            "bad": bad_figures(argv, out) if kind == "bad-figure" else []}


def _killpg_of(e):
    # subprocess.run kills the child on timeout, not its session: find the session by the child's pid
    # (the child was its session leader; its pgid equals its pid) and end the group.
    proc = getattr(e, "process", None)
    pid = getattr(proc, "pid", None)
    if pid:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", type=int, default=400)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--limit-s", type=float, default=20.0)
    ap.add_argument("--command", help="fuzz only this entry of COMMANDS (e.g. predict, plan, calibrate)")
    ap.add_argument("--no-calibrate", action="store_true", help="leave out calibrate (subprocesses: slower)")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every failing case")
    ap.add_argument("--trace", action="store_true", help="print every case before it runs")
    ap.add_argument("--mem-limit-gib", type=float, default=6.0,
                    help="address-space limit of this process, so that a case reading /dev/zero fails with MemoryError "
                         "(counted as an internal error) instead of exhausting the machine")
    a = ap.parse_args(argv)
    import resource

    lim = int(a.mem_limit_gib * 2**30)
    resource.setrlimit(resource.RLIMIT_AS, (lim, lim))
    os.environ.setdefault("GPUSIM_NO_PROGRESS", "1")
    rnd = random.Random(a.seed)
    counts: dict[str, int] = {}
    failures = []
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="gpusim-fuzz-") as d:
        tmp = Path(d)
        files = make_files(tmp / "in")
        for _ in range(a.cases):
            cmd = a.command
            case = build_case(rnd, files, tmp, cmd)
            if a.no_calibrate and case[0] == "calibrate":
                continue
            if a.trace:
                print(f"case: gpusim {' '.join(case)[:200]}", flush=True)
            r = run_case(case, a.limit_s)
            counts[r["kind"]] = counts.get(r["kind"], 0) + 1
            if r["kind"] in ("internal", "hang", "bad-figure"):
                failures.append(r)
                if a.verbose:
                    print(f"{r['kind']:>10}: gpusim {' '.join(case)[:200]}\n            {r['tail'][-200:]!r} "
                          f"{r.get('bad') or ''}", flush=True)
    n = sum(counts.values())
    print(f"invocations {n}: ok {counts.get('ok', 0)}, clean errors (exit 2) {counts.get('error', 0)}, "
          f"internal errors {counts.get('internal', 0)}, hangs (> {a.limit_s:g} s) {counts.get('hang', 0)}, "
          f"bad figures {counts.get('bad-figure', 0)}; {time.perf_counter() - t0:.0f} s")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
