"""DDP training steps of the reference workloads, so compute, communication and overlap can be separated.

For each workload and per-rank batch:

- ``n_ranks = 1``: the plain module (not DDP-wrapped) on every rank at the same time: compute only,
  with the same contention for host cores and memory as the DDP runs;
- for each DDP group size n (the whole job; in full mode also 2, 4, ... ranks of node 0): the module
  under ``DistributedDataParallel(bucket_cap_mb=25)``, once with normal steps (``sync=True``: gradient
  buckets all-reduced during backward) and once inside ``no_sync()`` (``sync=False``: no communication).

A step is ``zero_grad``, forward, cross-entropy, backward, optimizer step, timed per step (CUDA events
on GPUs), after warm-up steps (DDP rebuilds its buckets after the first iteration; optimizers create
their state at the first step). ``time_s`` is the slowest rank's median. The records also carry the
workload description from :func:`gpusim.calibrate_bench.workloads.describe`.
"""

from __future__ import annotations

import contextlib

import torch
from torch.nn.parallel import DistributedDataParallel as DDP

from gpusim.calibrate_bench.harness import Ctx, Point
from gpusim.calibrate_bench.workloads import Workload, describe, loss_of, workloads

BENCH = "ddp"
BUCKET_CAP_MB = 25.0  # torch's default; recorded in every record


def ddp_sizes(ctx: Ctx) -> list[int]:
    """DDP group sizes: the job; in full mode also powers of two inside node 0."""
    sizes = []
    if not ctx.quick:
        s = 2
        while s < min(len(ctx.nodes[0]), ctx.world):
            sizes.append(s)
            s *= 2
    if ctx.world >= 2:
        sizes.append(ctx.world)
    return sizes


class _Cache:
    """The model of the last (workload, group) measured, so points of one configuration share it."""

    def __init__(self):
        self.key = None
        self.value = None
        self.descs: dict[str, dict] = {}

    def get(self, key, make):
        if key != self.key:
            self.value = None
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
            self.value = make()
            self.key = key
        return self.value


def plan(ctx: Ctx) -> list[Point]:
    cache = _Cache()
    pts = []
    for w in workloads(ctx):
        for b in w.batches:
            key = f"{ctx.key_prefix}/{BENCH}/{w.name}/b{b}/n1"
            pts.append(Point(BENCH, key, f"{w.name} batch {b} single rank",
                             lambda w=w, b=b: measure(ctx, cache, w, b, 1, True)))
        for n in ddp_sizes(ctx):
            for b in w.batches:
                for sync in (True, False):
                    key = f"{ctx.key_prefix}/{BENCH}/{w.name}/b{b}/n{n}/{'sync' if sync else 'nosync'}"
                    label = f"{w.name} batch {b} DDP n={n} {'sync' if sync else 'no_sync'}"
                    pts.append(Point(BENCH, key, label, lambda w=w, b=b, n=n, s=sync: measure(ctx, cache, w, b, n, s)))
    return pts


def _desc(ctx: Ctx, cache: _Cache, w: Workload) -> dict:
    if w.name not in cache.descs:
        cache.descs[w.name] = describe(w, ctx.device)
    return cache.descs[w.name]


def measure(ctx: Ctx, cache: _Cache, w: Workload, batch: int, n: int, sync: bool) -> list[dict] | None:
    members = list(range(ctx.world)) if n == 1 else sorted(r for node in ctx.nodes for r in node)[:n]
    wrapped = n > 1
    pg = ctx.group(members) if wrapped else None  # every rank creates the group
    desc = _desc(ctx, cache, w) if ctx.rank == 0 else None
    fn = None
    if ctx.rank in members:
        def make():
            torch.manual_seed(0)
            module = w.build()
            model = DDP(module, process_group=pg, bucket_cap_mb=BUCKET_CAP_MB,
                        device_ids=[ctx.device.index] if ctx.device_kind == "cuda" else None) if wrapped else module
            return model, w.make_optimizer(model.parameters())

        model, opt = cache.get((w.name, n, tuple(members)), make)
        g = torch.Generator(device=ctx.device).manual_seed(100 + ctx.rank)
        x, y = w.batch(batch, g)

        def fn():
            opt.zero_grad(set_to_none=True)
            cm = model.no_sync() if (wrapped and not sync) else contextlib.nullcontext()
            with cm:
                with w.autocast(ctx.device):
                    loss = loss_of(model(x), y)
                loss.backward()
            opt.step()
    warmup, reps, inner = ctx.plan_reps(fn, max_inner=1, warmup=ctx.budget.warmup + 1)
    result = None
    if fn is not None:
        th0 = ctx.throttle_reasons()
        times = ctx.time_calls(fn, reps, 1)
        result = ctx.timed_fields(times, warmup, 1, th0 + ctx.throttle_reasons())
    got = ctx.gather(result)
    if ctx.rank != 0:
        return None
    slowest = max(members, key=lambda r: got[r]["time_s"])
    t = got[slowest]
    return [{
        "bench": "ddp_step", "ranks": members, "host": ctx.host_of(members[0]),
        "device_name": ctx.device_name_of(members[0]), **desc, "per_rank_batch": batch, "n_ranks": n,
        "n_nodes": len({ctx.node_of(r) for r in members}) if wrapped else 1, "sync": bool(sync and wrapped),
        "ddp_wrapped": wrapped, "concurrent_ranks": len(members),
        "samples_per_s": n * batch / t["time_s"], "bucket_cap_mb": BUCKET_CAP_MB,
        "rank_time_s": [got[r]["time_s"] for r in members], "backend": ctx.backend, **t,
    }]
