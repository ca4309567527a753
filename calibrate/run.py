"""The benchmark worker: ``torchrun ... -m gpusim.calibrate_bench.run --out DIR [--quick] ...``.

Normally started by ``gpusim calibrate``, which builds the torchrun command line. Each rank:

1. initialises the process group with an explicit timeout (and a gloo control group for barriers and
   result gathering, also on NCCL), finds the node layout, captures its environment;
2. rank 0 reads an existing profile when resuming (cutting a half-written last line), creates the run in
   ``meta.json`` and shares the set of finished points with every rank;
3. for each selected benchmark and each of its points not yet done: every rank records its progress in
   ``ranks/rank-N.json``, passes a monitored barrier (whose error names a rank that does not arrive),
   measures, and rank 0 appends the point's records to ``records.jsonl`` (flushed and fsync'ed);
4. on any error a rank writes what happened to its rank file, rank 0 marks the run failed in
   ``meta.json``, and the process exits non-zero without waiting on peers (torchrun then stops the rest).

Progress lines for the launcher are printed by rank 0 on stdout, prefixed with ``@@gpusim@@``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import threading
import time
import traceback
import uuid

BENCHES = ("gemm", "memory", "collectives", "p2p", "ddp", "dataloader")
PROGRESS = "@@gpusim@@ "


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="gpusim.calibrate_bench.run", description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--backend", choices=["nccl", "gloo"], default=None)
    p.add_argument("--only", default=",".join(BENCHES))
    p.add_argument("--timeout", type=float, default=None, help="seconds any distributed call may wait")
    p.add_argument("--resume", action="store_true")
    p.add_argument("--launcher-argv", default=None, help="JSON list: the gpusim command line, for meta.json")
    p.add_argument("--launcher-pid", type=int, default=None, help="exit if this process dies")
    p.add_argument("--inject-hang-rank", type=int, default=None, help=argparse.SUPPRESS)
    p.add_argument("--inject-hang-at", default="collectives", help=argparse.SUPPRESS)
    p.add_argument("--inject-mode", choices=["hang", "die"], default="hang", help=argparse.SUPPRESS)
    p.add_argument("--debug-point-delay", type=float, default=0.0, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    a.only = [b.strip() for b in a.only.split(",") if b.strip()]
    bad = [b for b in a.only if b not in BENCHES]
    if bad:
        p.error(f"unknown benchmark(s) {', '.join(bad)}; choose from {', '.join(BENCHES)}")
    if a.timeout is None:
        a.timeout = 120.0 if a.quick else 300.0
    return a


def say(text: str) -> None:
    print(PROGRESS + text, flush=True)


def classify(exc: BaseException) -> tuple[str, str, list[int] | None]:
    """(kind, message, failed ranks) of an exception, for the rank file and the launcher."""
    text = str(exc).strip()
    first = text.splitlines()[0] if text else type(exc).__name__
    m = re.search(r"Ranks? ([\d, ]+) failed to pass monitoredBarrier in (\d+) ms", text)
    if m:
        ranks = [int(x) for x in re.findall(r"\d+", m.group(1))]
        who = f"rank{'s' if len(ranks) > 1 else ''} {', '.join(map(str, ranks))}"
        return "barrier", f"{who} did not reach the barrier within {int(m.group(2)) / 1e3:g} s (hung or died)", ranks
    if re.search(r"monitoredBarrier|check rank 0 logs", text):
        return "peer", "lost contact with rank 0 while waiting at a barrier", None
    if re.search(r"[Tt]imed out|[Tt]imeout|timeout", text):
        return "timeout", f"timed out waiting for other ranks ({first[:300]})", None
    if re.search(r"Connection (reset|closed)|Broken pipe|peer|ECONNRESET|NCCL communicator was aborted", text):
        return "peer", f"lost the connection to another rank, which probably died ({first[:300]})", None
    if isinstance(exc, MemoryError) or "out of memory" in text.lower():
        return "error", f"out of memory: {first[:300]}", None
    return "error", f"{type(exc).__name__}: {first[:500]}", None


def _watch_launcher(pid: int) -> None:
    """Exit if the launching ``gpusim calibrate`` disappears (killed with SIGKILL): no orphan runs."""
    def loop():
        while True:
            time.sleep(1.0)
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                os._exit(3)
            except PermissionError:
                pass
    threading.Thread(target=loop, name="gpusim-launcher-watch", daemon=True).start()


def _summary_line(recs: list[dict]) -> str:
    r = recs[0]
    b = r["bench"]
    if b == "skipped":
        return f"skipped: {r['reason']}"
    noisy = " (noisy)" if any(x.get("noisy") for x in recs) else ""
    if b == "gemm":
        v = sorted(x["flop_per_s"] for x in recs)[len(recs) // 2]
        return f"{v / 1e9:.3g} GFLOP/s{noisy}"
    if b == "memory":
        v = sorted(x["bytes_per_s"] for x in recs)[len(recs) // 2]
        return f"{v / 1e9:.3g} GB/s{noisy}"
    if b == "collective":
        return (f"{r['time_s'] * 1e6:.4g} us, busbw {r['busbw_bytes_per_s'] / 1e9:.3g} GB/s"
                f"{'' if r['correct'] else ', WRONG RESULT'}{noisy}")
    if b == "p2p":
        return ", ".join(f"{x['src']}->{x['dst']} {x['bytes_per_s'] / 1e9:.3g} GB/s"
                         + (f" [{x['path']}]" if x.get("path") else "") for x in recs) + noisy
    if b == "ddp_step":
        return f"{r['time_s'] * 1e3:.4g} ms/step, {r['samples_per_s']:.4g} samples/s{noisy}"
    if b == "dataloader":
        v = sorted(x["samples_per_s"] for x in recs)[len(recs) // 2]
        return f"{v:.4g} samples/s per rank{noisy}"
    return ""


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    if args.launcher_pid:
        _watch_launcher(args.launcher_pid)

    import torch  # after argument errors, which should be fast

    from gpusim.calibrate_bench.harness import Ctx, env_int, hostname, init_distributed
    from gpusim.calibrate_bench.records import RankFiles

    rank = env_int("RANK", 0)
    host = hostname()
    files = RankFiles(args.out, rank, host)
    state: dict = {"meta": None, "ctx": None}
    try:
        backend = args.backend or ("nccl" if torch.cuda.is_available() else "gloo")
        if backend == "nccl" and not torch.cuda.is_available():
            raise RuntimeError("backend nccl needs CUDA GPUs, and torch sees none here; use --backend gloo")
        local_rank = env_int("LOCAL_RANK", 0)
        if backend == "nccl":
            torch.cuda.set_device(local_rank)
            device = torch.device("cuda", local_rank)
        else:
            device = torch.device("cpu")
            torch.set_num_threads(max(1, env_int("OMP_NUM_THREADS", 1)))
        files.progress("init", f"init_process_group({backend}, timeout={args.timeout:g} s)")
        rank, world, ctrl = init_distributed(backend, args.timeout)
        import datetime as _dt

        ctx = Ctx(rank=rank, world=world, local_rank=local_rank, local_world=env_int("LOCAL_WORLD_SIZE", 1),
                  node_rank=env_int("GROUP_RANK", 0), host=host, backend=backend, device=device, quick=args.quick,
                  timeout=_dt.timedelta(seconds=args.timeout), ctrl=ctrl)
        state["ctx"] = ctx
        run(ctx, args, files, state)
        files.done()
        sys.stdout.flush()
        import torch.distributed as dist

        dist.destroy_process_group()
        return 0
    except BaseException as e:  # noqa: BLE001 - report every failure, then leave without waiting on peers
        kind, msg, failed = classify(e)
        where = files.state.get("point") or files.state.get("bench") or "start-up"
        if kind == "error" and os.environ.get("GPUSIM_DEBUG"):
            traceback.print_exc()
        files.error(msg, kind, failed)
        print(f"gpusim calibrate: rank {rank}: {msg} (during {where})", file=sys.stderr, flush=True)
        meta = state.get("meta")
        if meta is not None:
            try:
                from gpusim.calibrate_bench.records import utc_now

                meta.update_run(status="failed", finished_utc=utc_now(),
                                error=f"rank {rank}: {msg} (during {where})",
                                records_written=state.get("written", 0))
            except Exception:
                pass
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(1)


def run(ctx, args, files, state) -> None:
    import importlib

    import gpusim
    from gpusim.calibrate_bench import env as envmod
    from gpusim.calibrate_bench.records import MetaStore, RecordWriter, utc_now
    from gpusim.topology import TopologyError, parse_topo

    # --- layout: which ranks share a node -------------------------------------------------------
    nvml = envmod.Nvml.try_open() if ctx.device_kind == "cuda" else None
    ctx.nvml = nvml
    if nvml is not None:
        mine = envmod.rank_env(ctx.rank, ctx.local_rank, ctx.node_rank, ctx.host, ctx.device, nvml)
        if mine.get("nvml_index") is not None:
            ctx.nvml_handle = nvml.handle(mine["nvml_index"])
    else:
        mine = envmod.rank_env(ctx.rank, ctx.local_rank, ctx.node_rank, ctx.host, ctx.device, None)
    all_env = ctx.gather(mine)
    all_env = ctx.bcast(all_env)
    by_node: dict = {}
    for e in all_env:  # torchrun's GROUP_RANK tells nodes apart, also several "nodes" on one host
        by_node.setdefault((e["node_rank"], e["host"]), []).append(e["rank"])
    ctx.nodes = sorted((sorted(v) for v in by_node.values()), key=lambda rs: rs[0])
    ctx.rank_env = all_env
    ctx.device_name = mine["device_name"]

    # --- environment, once per node ---------------------------------------------------------------
    first_of_node = min(next(rs for rs in ctx.nodes if ctx.rank in rs))
    node = (envmod.node_env(ctx.host, ctx.node_of(ctx.rank), next(rs for rs in ctx.nodes if ctx.rank in rs),
                            nvml, ctx.device_kind) if ctx.rank == first_of_node else None)
    nodes = ctx.gather(node)
    if ctx.rank == 0:
        nodes = [n for n in nodes if n is not None]
        topo_text = nodes[0].get("topo_text") if nodes else None
        p2p_text = nodes[0].get("topo_p2p_text") if nodes else None
    else:
        topo_text = p2p_text = None
    topo_text, p2p_text = ctx.bcast((topo_text, p2p_text))
    if topo_text:
        try:
            ctx.topology = parse_topo(topo_text, p2p_text)
        except TopologyError:
            ctx.topology = None

    # --- the profile: resume state, run entry -----------------------------------------------------
    done: set[str] = set()
    writer = None
    if ctx.rank == 0:
        writer = RecordWriter(args.out)
        meta = MetaStore(args.out)
        existing, done, warnings = writer.prepare() if args.resume else ([], set(), [])
        if not args.resume and (existing or writer.path.exists() and writer.path.stat().st_size):
            raise RuntimeError(f"{args.out} already holds records; pass --resume to continue it")
        meta.load_or_new()
        if not args.resume:
            meta.data["runs"] = []
        for r in meta.data["runs"]:  # a run killed outright could not say so itself
            if r.get("status") == "running":
                r.update(status="failed", error=r.get("error") or "ended without recording its end (killed?)")
        for w in warnings:
            say(f"note: {w}")
        run_id = f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{uuid.uuid4().hex[:6]}"
        launcher_argv = json.loads(args.launcher_argv) if args.launcher_argv else sys.argv
        meta.start_run({
            "run_id": run_id, "started_utc": utc_now(), "finished_utc": None, "status": "running", "error": None,
            "argv": [str(a) for a in launcher_argv],
            "args": {k: v for k, v in vars(args).items() if not k.startswith(("inject", "debug", "launcher"))},
            "quick": bool(args.quick), "benches": list(args.only), "backend": ctx.backend, "device": ctx.device_kind,
            "world_size": ctx.world, "n_nodes": ctx.n_nodes, "local_world_size": min(len(n) for n in ctx.nodes),
            "timeout_s": args.timeout, "gpusim_version": getattr(gpusim, "__version__", "unknown"),
            "nodes": nodes, "ranks": all_env, "records_written": 0,
        })
        state["meta"] = meta
        if args.resume and done:
            say(f"resuming: {len(done)} points already measured are kept")
        say(f"run {run_id}: {ctx.world} rank(s) on {ctx.n_nodes} node(s), backend {ctx.backend}, "
            f"device {ctx.device_name}, {'quick' if args.quick else 'full'} mode")
        for n in nodes:
            for w in n.get("topology_warnings") or []:
                say(f"topology ({n['host']}): {w}")
    else:
        run_id = None
    run_id, done = ctx.bcast((run_id, sorted(done)))
    done = set(done)

    # --- the benchmarks -----------------------------------------------------------------------------
    written = 0
    for bench in args.only:
        mod = importlib.import_module(f"gpusim.calibrate_bench.{bench}")
        points = mod.plan(ctx)
        todo = [p for p in points if p.key not in done]
        if ctx.rank == 0:
            say(f"[{bench}] {len(todo)} of {len(points)} points to measure")
        for p in todo:
            files.progress(bench, f"{bench}: {p.label}")
            if args.inject_hang_rank == ctx.rank and args.inject_hang_at == bench:  # test hooks
                files.progress(bench, f"{bench}: {p.label} (injected {args.inject_mode})")
                if args.inject_mode == "die":
                    os._exit(9)  # a peer that vanishes without a word
                while True:  # a peer that stops responding outside any collective
                    time.sleep(3600)
            ctx.barrier()
            recs = p.run()
            if ctx.rank == 0:
                recs = recs or []
                now = time.time()
                for i, r in enumerate(recs):
                    r.setdefault("device", ctx.device_kind)
                    r.setdefault("device_name", ctx.device_name)
                    r.setdefault("host", ctx.host)
                    r["point"] = p.key
                    r["point_n"] = len(recs)
                    r["run_id"] = run_id
                    r["world_size"] = ctx.world
                    r["t_unix"] = now
                    if len(recs) == 1:
                        r["key"] = p.key
                    else:
                        r["key"] = p.key + (f"/r{r['rank']}" if r.get("rank") is not None
                                            else f"/{r['src']}-{r['dst']}" if "src" in r else f"/{i}")
                writer.write(recs)
                written += len(recs)
                state["written"] = written
                say(f"[{bench}] {p.label}: {_summary_line(recs)}")
                if args.debug_point_delay:
                    time.sleep(args.debug_point_delay)
    ctx.barrier()
    if ctx.rank == 0:
        state["meta"].update_run(status="complete", finished_utc=utc_now(), records_written=written)
        say(f"done: {written} records written to {os.path.join(args.out, 'records.jsonl')}")


if __name__ == "__main__":
    sys.exit(main())
