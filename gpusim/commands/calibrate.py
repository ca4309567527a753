"""``gpusim calibrate``: measure this machine (or cluster) so that the model's parameters can be fitted.

Runs the benchmarks of ``calibrate/`` (package ``gpusim.calibrate_bench``) under torchrun: GEMM,
memory copies, collectives, point-to-point, DDP steps and data loading. Records are appended to
``OUT/records.jsonl`` as they are measured, with the environment in ``OUT/meta.json`` (format:
:mod:`gpusim.profile`); ``gpusim fit OUT`` reads them.

torchrun runs in its own process session; an overall time limit (``--max-time``), Ctrl-C or a
SIGTERM stop the whole session (torchrun and every worker), and every distributed call inside has a
timeout (``--timeout``). When a rank fails or hangs, one message says which rank, where and why, and
that the records measured so far are intact (``--resume`` continues).

Multi-node: run the same command on every node with torchrun's rendezvous options
(``--nnodes 2 --node-rank I --master-addr HOST --master-port PORT``, or ``--rdzv-endpoint HOST:PORT
--rdzv-backend c10d --rdzv-id JOB``); under Slurm, e.g. ``srun --ntasks-per-node 1 gpusim calibrate
--nnodes $SLURM_NNODES --rdzv-endpoint $HEAD:29500 --rdzv-backend c10d --rdzv-id $SLURM_JOB_ID``.
Records and meta.json are written by global rank 0's node.
"""

from __future__ import annotations

ORDER = 40

BENCHES = ("gemm", "memory", "collectives", "p2p", "ddp", "dataloader")
_ALIASES = {"collective": "collectives", "ddp_step": "ddp", "data": "dataloader", "loader": "dataloader",
            "matmul": "gemm", "mem": "memory", "sendrecv": "p2p"}
PROGRESS = "@@gpusim@@ "  # the workers' progress lines (gpusim.calibrate_bench.run)
_RDZV = (("nnodes", "--nnodes"), ("node_rank", "--node_rank"), ("rdzv_endpoint", "--rdzv_endpoint"),
         ("rdzv_id", "--rdzv_id"), ("rdzv_backend", "--rdzv_backend"), ("master_addr", "--master_addr"),
         ("master_port", "--master_port"))


def register(sub) -> None:
    from gpusim.checks import Bound

    # processes per node: NVLink domains reach 72 GPUs; CPU (gloo) runs beyond a few hundred processes only
    # oversubscribe the machine
    nproc = Bound(1, 1024, integer=True)
    seconds = Bound(1, 30 * 86400, unit="s")
    p = sub.add_parser(
        "calibrate", help="measure this machine or cluster (GEMM, memory, collectives, DDP ...) for `gpusim fit`",
        description="Run the calibration benchmarks under torchrun and write a profile directory "
                    "(records.jsonl + meta.json) for `gpusim fit`. Needs torch: pip install 'gpusim[calibrate]'.",
        epilog="Multi-node: run the same command on every node with --nnodes/--node-rank/--master-addr/--master-port "
               "or --rdzv-endpoint/--rdzv-backend/--rdzv-id (passed to torchrun).")
    p.add_argument("--quick", action="store_true",
                   help="fewer sizes and repetitions: about a minute on 8 GPUs or on 2 CPU processes")
    p.add_argument("--nproc-per-node", type=nproc, metavar="N",
                   help="processes on this node (default: the number of GPUs; 2 without GPUs)")
    p.add_argument("--backend", choices=["nccl", "gloo"],
                   help="torch.distributed backend (default: nccl when torch sees CUDA GPUs, else gloo on CPU)")
    p.add_argument("--out", metavar="DIR", help="profile directory (default: ./gpusim-profile-<date>)")
    p.add_argument("--resume", action="store_true",
                   help="continue the profile in --out: keep its records, measure only what is missing")
    p.add_argument("--only", metavar="LIST", help=f"comma-separated benchmarks to run (of {','.join(BENCHES)})")
    p.add_argument("--skip", metavar="LIST", help="comma-separated benchmarks to leave out")
    p.add_argument("--timeout", type=seconds, metavar="S",
                   help="seconds any distributed call may wait for other ranks (default 120 with --quick, else 300)")
    p.add_argument("--max-time", type=Bound(0, 30 * 86400, unit="s"), metavar="S",
                   help="stop the whole run after this many seconds (default 900 with --quick, else 14400; 0: no limit)")
    p.add_argument("-v", "--verbose", action="store_true", help="also show torchrun's and the workers' own output")
    g = p.add_argument_group("torchrun rendezvous (multi-node; passed through)")
    g.add_argument("--nnodes", metavar="N", help="number of nodes, or MIN:MAX")
    g.add_argument("--node-rank", type=Bound(0, 100_000, integer=True), metavar="I",
                   help="this node's rank (static rendezvous)")
    g.add_argument("--rdzv-endpoint", metavar="HOST:PORT")
    g.add_argument("--rdzv-id", metavar="ID")
    g.add_argument("--rdzv-backend", metavar="NAME", help="e.g. c10d (with --rdzv-endpoint) or static")
    g.add_argument("--master-addr", metavar="HOST")
    g.add_argument("--master-port", type=Bound(1, 65535, integer=True), metavar="PORT")
    # test hooks (not shown in --help)
    import argparse

    p.add_argument("--inject-hang-rank", type=int, help=argparse.SUPPRESS)
    p.add_argument("--inject-hang-at", default="collectives", help=argparse.SUPPRESS)
    p.add_argument("--inject-mode", choices=["hang", "die"], default="hang", help=argparse.SUPPRESS)
    p.add_argument("--debug-point-delay", type=float, default=0.0, help=argparse.SUPPRESS)
    p.set_defaults(func=cmd_calibrate)


def _bench_list(text: str | None, flag: str) -> list[str]:
    from gpusim.errors import CalibrationError

    if not text:
        return []
    out = []
    for b in (x.strip().lower() for x in text.split(",")):
        if not b:
            continue
        b = _ALIASES.get(b, b)
        if b not in BENCHES:
            raise CalibrationError(f"{flag}: unknown benchmark {b!r}; choose from {', '.join(BENCHES)}")
        if b not in out:
            out.append(b)
    return out


def _multi_node(args) -> bool:
    return any(getattr(args, a) not in (None, "") for a, _ in _RDZV if a != "nnodes") or (
        args.nnodes not in (None, "", "1", "1:1"))


def _command_line(args, resume: bool | None = None) -> list[str]:
    """The gpusim command that reproduces this run (for meta.json and the --resume hint)."""
    cmd = ["gpusim", "calibrate"]
    if args.quick:
        cmd.append("--quick")
    for flag, v in (("--nproc-per-node", args.nproc_per_node), ("--backend", args.backend), ("--out", args.out),
                    ("--only", args.only), ("--skip", args.skip), ("--timeout", args.timeout),
                    ("--max-time", args.max_time)):
        if v not in (None, ""):
            cmd += [flag, f"{v:g}" if isinstance(v, float) else str(v)]
    for a, _ in _RDZV:
        v = getattr(args, a)
        if v not in (None, ""):
            cmd += ["--" + a.replace("_", "-"), str(v)]
    if resume if resume is not None else args.resume:
        cmd.append("--resume")
    return cmd


def worker_env(backend: str) -> dict[str, str]:
    """The environment of torchrun and its workers: the user's (not what this CLI process set for its own start,
    gpusim.cli.START_ENV_SET), unbuffered, and with gloo one OpenMP thread per process (they share the cores)."""
    import os

    from gpusim.cli import START_ENV_SET

    env = {k: v for k, v in os.environ.items() if k not in START_ENV_SET}
    env["PYTHONUNBUFFERED"] = "1"
    if backend == "gloo":
        env["OMP_NUM_THREADS"] = "1"
    return env


def _pdeathsig():  # pragma: no cover - runs in the child between fork and exec
    """Linux: torchrun gets SIGTERM if this launcher dies, even by SIGKILL, so no run is orphaned."""
    try:
        import ctypes
        import signal

        ctypes.CDLL(None).prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG
    except Exception:
        pass


def _kill_group(proc, grace_s: float = 10.0) -> None:
    """SIGTERM the launcher's session (torchrun and every worker), then SIGKILL what is left."""
    import os
    import signal
    import subprocess

    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        return
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass


def cmd_calibrate(args) -> int:
    import datetime as dt
    import importlib.util
    import json
    import os
    import queue
    import signal
    import sys
    import threading
    import time
    from pathlib import Path

    from gpusim.errors import CalibrationError
    from gpusim.profile import LOG_FILE, META_FILE, RECORDS_FILE

    if importlib.util.find_spec("torch") is None:
        raise CalibrationError("calibration needs torch, which is not installed: pip install 'gpusim[calibrate]'")
    only = _bench_list(args.only, "--only") or list(BENCHES)
    skip = _bench_list(args.skip, "--skip")
    benches = [b for b in only if b not in skip]
    if not benches:
        raise CalibrationError("--only/--skip leave no benchmark to run")

    import torch

    cuda = torch.cuda.is_available()
    backend = args.backend or ("nccl" if cuda else "gloo")
    n_gpus = torch.cuda.device_count() if cuda else 0
    if backend == "nccl" and not cuda:
        raise CalibrationError("--backend nccl needs CUDA GPUs, and torch sees none here "
                               f"(torch {torch.__version__}); use --backend gloo to calibrate CPU processes")
    if backend == "nccl" and not torch.distributed.is_nccl_available():
        raise CalibrationError(f"this torch build ({torch.__version__}) has no NCCL; use --backend gloo")
    nproc = args.nproc_per_node or (n_gpus if backend == "nccl" else 2)
    if nproc < 1:
        raise CalibrationError("--nproc-per-node must be at least 1")
    if backend == "nccl" and nproc > n_gpus:
        raise CalibrationError(f"--nproc-per-node {nproc} but torch sees {n_gpus} GPU(s) here; "
                               f"NCCL needs one GPU per process")
    cores = os.cpu_count() or 1
    if backend == "gloo" and nproc > 4 * cores:
        raise CalibrationError(f"--nproc-per-node {nproc} CPU processes on {cores} cores would only measure the "
                               f"oversubscription; use at most {4 * cores}")
    multi = _multi_node(args)
    if multi and not (args.rdzv_endpoint or args.master_addr):
        raise CalibrationError("multi-node runs need where to meet: --rdzv-endpoint HOST:PORT (with --rdzv-backend c10d) "
                               "or --master-addr HOST --master-port PORT, the same on every node")
    timeout_s = args.timeout or (120.0 if args.quick else 300.0)
    if timeout_s <= 0:
        raise CalibrationError("--timeout must be positive")
    max_time = (900.0 if args.quick else 14400.0) if args.max_time is None else args.max_time

    out = Path(args.out or f"gpusim-profile-{dt.date.today().isoformat()}")
    args.out = str(out)
    leader = not multi or args.node_rank in (None, 0)
    has_profile = (out / RECORDS_FILE).exists() and (out / RECORDS_FILE).stat().st_size > 0
    if leader and args.resume and not (out / META_FILE).exists():
        raise CalibrationError(f"--resume: {out} holds no profile to continue (no {META_FILE}); "
                               f"leave out --resume to start one there")
    if leader and not args.resume and has_profile:
        raise CalibrationError(f"{out} already holds a profile; add --resume to continue it, "
                               f"or choose another --out")
    try:
        out.mkdir(parents=True, exist_ok=True)
        log = open(out / LOG_FILE, "a", encoding="utf-8", errors="replace")  # noqa: SIM115
    except OSError as e:
        raise CalibrationError(f"cannot write the profile directory {out}: {e.strerror or e}") from None

    cmd = [sys.executable, "-m", "torch.distributed.run"]
    if multi:
        for a, flag in _RDZV:
            v = getattr(args, a)
            if v not in (None, ""):
                cmd += [flag, str(v)]
    else:
        cmd += ["--standalone", "--nnodes", "1"]
    cmd += ["--nproc_per_node", str(nproc), "--max_restarts", "0", "-m", "gpusim.calibrate_bench.run",
            "--out", str(out), "--backend", backend, "--only", ",".join(benches), "--timeout", f"{timeout_s:g}",
            "--launcher-argv", json.dumps(_command_line(args)), "--launcher-pid", str(os.getpid())]
    if args.quick:
        cmd.append("--quick")
    if args.resume:
        cmd.append("--resume")
    if args.inject_hang_rank is not None:
        cmd += ["--inject-hang-rank", str(args.inject_hang_rank), "--inject-hang-at", args.inject_hang_at,
                "--inject-mode", args.inject_mode]
    if args.debug_point_delay:
        cmd += ["--debug-point-delay", f"{args.debug_point_delay:g}"]

    env = worker_env(backend)

    where = (f"{nproc} process{'es' if nproc > 1 else ''} on this node"
             + (f", nodes {args.nnodes}" if multi and args.nnodes else ""))
    print(f"gpusim calibrate: {where}, backend {backend} on {'GPU' if backend == 'nccl' else 'CPU'}, "
          f"{'quick' if args.quick else 'full'} mode, benchmarks {','.join(benches)}; profile -> {out} "
          f"(calls time out after {timeout_s:g} s{f', whole run after {max_time:g} s' if max_time else ''})",
          flush=True)

    import subprocess

    t_launch = time.time()
    log.write(f"==== {dt.datetime.now().isoformat(timespec='seconds')} {' '.join(cmd)}\n")
    log.flush()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            text=True, bufsize=1, errors="replace", env=env, start_new_session=True,
                            preexec_fn=_pdeathsig if sys.platform.startswith("linux") else None)
    lines: queue.Queue = queue.Queue()

    def pump():
        for line in proc.stdout:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=pump, name="gpusim-calibrate-output", daemon=True).start()

    class _Stop(Exception):
        pass

    def on_signal(signum, frame):
        raise _Stop(signal.Signals(signum).name)

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGHUP)}
    deadline = time.monotonic() + max_time if max_time else None
    timed_out = False
    worker_errors: list[str] = []
    try:
        eof_by = None
        while True:
            try:
                line = lines.get(timeout=0.25)
            except queue.Empty:
                line = ""
            if line is None:
                break
            if line:
                log.write(line)
                log.flush()
                if line.startswith(PROGRESS):
                    print(line[len(PROGRESS):].rstrip("\n"), flush=True)
                else:
                    if line.startswith("gpusim calibrate: rank"):
                        worker_errors.append(line.strip())
                    if args.verbose:
                        sys.stderr.write(line)
            if deadline is not None and not timed_out and time.monotonic() > deadline:
                timed_out = True
                _kill_group(proc)
                eof_by = time.monotonic() + 10
            if eof_by is not None and time.monotonic() > eof_by:
                break  # something outside the session holds the pipe; do not wait for it
        rc = proc.wait()
    except (KeyboardInterrupt, _Stop) as e:
        _kill_group(proc)
        log.write(f"==== stopped by {e or 'Ctrl-C'}\n")
        log.close()
        n = _count_records(out)
        print(f"gpusim calibrate: stopped; {n} records measured so far are kept in {out / RECORDS_FILE}; "
              f"`{' '.join(_command_line(args, resume=True))}` continues", file=sys.stderr)
        if isinstance(e, KeyboardInterrupt):
            raise
        return 143
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    log.write(f"==== exit {rc}{' (stopped: --max-time)' if timed_out else ''}\n")
    log.close()
    elapsed = time.time() - t_launch

    if rc == 0 and not timed_out and leader:
        return _report_success(out, elapsed)
    if rc == 0 and not timed_out:
        print(f"gpusim calibrate: this node's ranks finished in {elapsed:.0f} s; the profile is written on the "
              f"node of global rank 0", flush=True)
        return 0
    raise CalibrationError(_diagnose(out, args, rc, timed_out, max_time, timeout_s, t_launch, worker_errors))


def _count_records(out) -> int:
    from gpusim.errors import CalibrationError
    from gpusim.profile import RECORDS_FILE, read_records

    try:
        return len(read_records(out / RECORDS_FILE)[0])
    except CalibrationError:
        return 0


def _report_success(out, elapsed: float) -> int:
    from gpusim.profile import load_profile

    prof = load_profile(out)
    counts = prof.counts()
    noisy = sum(1 for r in prof.records if getattr(r, "noisy", False))
    wrong = sum(1 for r in prof.of("collective") if not r.correct)
    parts = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
    print(f"gpusim calibrate: done in {elapsed:.0f} s: {len(prof.records)} records ({parts}) in {out}", flush=True)
    if noisy:
        print(f"  {noisy} records are flagged noisy (high spread or throttling; see noisy_reason): "
              f"the fit leaves them out or weights them down", flush=True)
    if wrong:
        print(f"  warning: {wrong} collective results were WRONG (correct=false): check the GPUs/NCCL", flush=True)
    print(f"  next: gpusim fit {out} -o calibration.json", flush=True)
    return 0


def _diagnose(out, args, rc: int, timed_out: bool, max_time: float, timeout_s: float, t_launch: float,
              worker_errors: list[str]) -> str:
    """One message: which rank failed, where and why, and where the records so far are."""
    from gpusim.profile import LOG_FILE, RECORDS_FILE, read_rank_files

    states = [s for s in read_rank_files(out) if float(s.get("t_unix") or 0) >= t_launch - 1]
    by_rank = {s.get("rank"): s for s in states}

    def where(s: dict | None) -> str:
        if not s:
            return "an unknown place"
        return f"'{s.get('point') or s.get('bench') or 'start-up'}'"

    errs = [s for s in states if s.get("state") == "error"]
    own = [s for s in errs if s.get("error_kind") == "error"]
    barrier = [s for s in errs if s.get("error_kind") == "barrier"]
    silent = [s for s in states if s.get("state") in ("starting", "running")]
    parts: list[str] = []
    if timed_out:
        at = "; ".join(f"rank {s['rank']} at {where(s)}" for s in silent[:4])
        parts.append(f"the run exceeded --max-time {max_time:g} s and was stopped" + (f" ({at})" if at else ""))
    elif own:
        for s in own[:3]:
            parts.append(f"rank {s['rank']} ({s.get('host')}) failed during {where(s)}: {s.get('error')}")
    elif barrier:
        s = barrier[0]
        failed = s.get("failed_ranks") or []
        for r in failed:
            parts.append(f"rank {r} stopped responding during {where(by_rank.get(r))}: it did not reach the "
                         f"next barrier within --timeout {timeout_s:g} s (hung or died); rank {s['rank']} waited for it")
        if not failed:
            parts.append(f"rank {s['rank']}: {s.get('error')}")
    elif errs:
        if silent:
            for s in silent[:3]:
                parts.append(f"rank {s['rank']} ({s.get('host')}) stopped responding during {where(s)} without "
                             f"reporting an error (hung, or killed)")
        e = errs[0]
        parts.append(f"rank {e['rank']} {e.get('error')} during {where(e)}")
    elif silent:
        for s in silent[:3]:
            parts.append(f"rank {s['rank']} ({s.get('host')}) ended during {where(s)} without reporting an "
                         f"error (killed, e.g. out of host memory?)")
    else:
        tail = _log_tail(out / LOG_FILE)
        parts.append(f"torchrun exited with code {rc} before the benchmarks started"
                     + (f": {tail}" if tail else ""))
    if not parts and worker_errors:
        parts.append(worker_errors[0])
    n = _count_records(out)
    resume = " ".join(_command_line(args, resume=True))
    return (f"calibration failed: {'; '.join(parts)}. {n} records measured so far are intact in "
            f"{out / RECORDS_FILE}; `{resume}` continues from there (full log: {out / LOG_FILE})")


def _log_tail(path) -> str:
    """The most telling line of the launcher log (an Error/Exception line, else the last line)."""
    try:
        lines = [ln.strip() for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    lines = [ln for ln in lines if not ln.startswith("====")]
    for ln in reversed(lines[-60:]):
        if ("Error" in ln or "error:" in ln) and "ChildFailedError" not in ln and not ln.startswith("raise"):
            return ln[:300]
    return lines[-1][:300] if lines else ""
