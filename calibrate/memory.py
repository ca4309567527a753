"""Memory bandwidth: large device copies, and host<->device copies from pinned and pageable memory.

``device_copy`` is ``dst.copy_(src)`` on one device (on CPU: a memcpy between two large tensors);
``bytes`` is the tensor size and ``traffic_bytes`` = 2 × bytes (read plus write), the figure to compare
with an HBM or DRAM datasheet. ``h2d_*`` / ``d2h_*`` copy between a GPU tensor and a host tensor that is
page-locked (pinned) or ordinary (pageable). All ranks copy at the same time, as when every GPU of a
node loads its batch; one record per rank. Timed with host clocks around ``torch.cuda.synchronize``,
because pageable copies are partly host work that device events would not see.
"""

from __future__ import annotations

import torch

from gpusim.calibrate_bench.harness import Ctx, Point
from gpusim.units import GIB, MIB

BENCH = "memory"
KINDS = ("device_copy", "h2d_pinned", "h2d_pageable", "d2h_pinned", "d2h_pageable")


def sizes(ctx: Ctx, kind: str) -> list[int]:
    if ctx.device_kind == "cuda":
        if kind == "device_copy":
            s = [256 * MIB, 1 * GIB] if ctx.quick else [1 * MIB, 4 * MIB, 16 * MIB, 64 * MIB, 256 * MIB, 1 * GIB, 4 * GIB]
        else:
            s = [64 * MIB, 256 * MIB] if ctx.quick else [1 * MIB, 4 * MIB, 16 * MIB, 64 * MIB, 256 * MIB, 1 * GIB]
    else:
        s = [1 * MIB, 16 * MIB, 64 * MIB] if ctx.quick else [1 * MIB, 4 * MIB, 16 * MIB, 64 * MIB, 256 * MIB]
    return [int(x) for x in s]


def plan(ctx: Ctx) -> list[Point]:
    pts = []
    for kind in KINDS:
        if kind != "device_copy" and ctx.device_kind != "cuda":
            key = f"{ctx.key_prefix}/{BENCH}/{kind}/not-applicable"
            pts.append(Point(BENCH, key, f"{kind}: no GPU", lambda kind=kind, key=key: _skipped(ctx, key, kind)))
            continue
        for nbytes in sizes(ctx, kind):
            key = f"{ctx.key_prefix}/{BENCH}/{kind}/b{nbytes}"
            pts.append(Point(BENCH, key, f"{kind} {_fmt(nbytes)}",
                             lambda kind=kind, nbytes=nbytes: measure(ctx, kind, nbytes)))
    return pts


def _fmt(nbytes: int) -> str:
    return f"{nbytes / GIB:g} GiB" if nbytes >= GIB else f"{nbytes / MIB:g} MiB"


def _skipped(ctx: Ctx, key: str, kind: str) -> list[dict] | None:
    if ctx.rank != 0:
        return None
    return [{"bench": "skipped", "key": key, "of_bench": BENCH, "params": {"kind": kind},
             "reason": "no CUDA device: host-to-device and device-to-host copies do not apply to CPU processes",
             "host": ctx.host, "device_name": ctx.device_name}]


def _buffers(ctx: Ctx, kind: str, nbytes: int):
    n = nbytes // 4
    g = torch.Generator(device=ctx.device).manual_seed(7 + ctx.rank)
    dev = torch.randn(n, device=ctx.device, generator=g)
    if kind == "device_copy":
        dst = torch.empty_like(dev)
        return lambda: dst.copy_(dev)
    pinned = kind.endswith("_pinned")
    host = torch.empty(n, dtype=torch.float32, pin_memory=pinned)
    host.copy_(dev.cpu())
    if kind.startswith("h2d"):
        return lambda: dev.copy_(host, non_blocking=pinned)
    return lambda: host.copy_(dev, non_blocking=pinned)


def measure(ctx: Ctx, kind: str, nbytes: int) -> list[dict] | None:
    fn = _buffers(ctx, kind, nbytes)
    warmup, reps, inner = ctx.plan_reps(fn, timer="host")
    th0 = ctx.throttle_reasons()
    times = ctx.time_calls(fn, reps, inner, timer="host")
    mine = ctx.timed_fields(times, warmup, inner, th0 + ctx.throttle_reasons())
    del fn
    got = ctx.gather(mine)
    if ctx.rank != 0:
        return None
    nb = (nbytes // 4) * 4
    traffic = 2 * nb if kind == "device_copy" else nb
    return [{"bench": BENCH, "rank": r, "host": ctx.host_of(r), "device_name": ctx.device_name_of(r),
             "kind": kind, "bytes": nb, "bytes_per_s": nb / t["time_s"], "traffic_bytes": traffic,
             "concurrent_ranks": ctx.world, **t} for r, t in enumerate(got)]
