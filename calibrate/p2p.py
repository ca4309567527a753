"""Point-to-point bandwidth between every pair of ranks in a node (exposes NVLink vs PCIe vs SYS).

For each pair (a, b) of local ranks, a sends ``bytes`` to b ``inner`` times per repetition; both time
their side and the record keeps the slower median, so ``bytes_per_s = bytes / time_s`` is the one-way
rate a stream of messages achieves. The same local pair runs on every node at once (different
machines do not share the path). On GPUs the pair's ``nvidia-smi topo -m`` class is recorded.
"""

from __future__ import annotations

import itertools

import torch
import torch.distributed as dist

from gpusim.calibrate_bench.harness import Ctx, Point
from gpusim.units import KIB, MIB

BENCH = "p2p"


def sizes(ctx: Ctx) -> list[int]:
    if ctx.device_kind == "cuda":
        s = [64 * MIB] if ctx.quick else [64 * KIB, 1 * MIB, 16 * MIB, 256 * MIB]
    else:
        s = [4 * KIB, 16 * MIB] if ctx.quick else [4 * KIB, 64 * KIB, 1 * MIB, 16 * MIB, 64 * MIB]
    return [int(x) for x in s]


def plan(ctx: Ctx) -> list[Point]:
    local = min(len(n) for n in ctx.nodes)
    if local < 2:
        key = f"{ctx.key_prefix}/{BENCH}/single-rank-nodes"
        return [Point(BENCH, key, "p2p: one rank per node", lambda: _skipped(ctx, key))]
    pts = []
    for a, b in itertools.combinations(range(local), 2):
        for nbytes in sizes(ctx):
            key = f"{ctx.key_prefix}/{BENCH}/l{a}-l{b}/b{nbytes}"
            size = f"{nbytes / MIB:g} MiB" if nbytes >= MIB else f"{nbytes / KIB:g} KiB"
            label = f"local ranks {a}->{b} {size}"
            pts.append(Point(BENCH, key, label, lambda a=a, b=b, nb=nbytes: measure(ctx, a, b, nb)))
    return pts


def _skipped(ctx: Ctx, key: str) -> list[dict] | None:
    if ctx.rank != 0:
        return None
    return [{"bench": "skipped", "key": key, "of_bench": BENCH, "params": {"world_size": ctx.world},
             "reason": "every node runs one rank: no pair of ranks inside a node", "host": ctx.host,
             "device_name": ctx.device_name}]


def pair_path(ctx: Ctx, src: int, dst: int) -> str | None:
    """The topo class between the GPUs of two ranks of node 0, when nvidia-smi gave a matrix."""
    if ctx.topology is None:
        return None
    idx = {e["rank"]: e.get("nvml_index") for e in ctx.rank_env}
    i, j = idx.get(src), idx.get(dst)
    if i is None or j is None:
        return None
    try:
        p = ctx.topology.path(i, j)
    except KeyError:
        return None
    return p.label if p is not None else None


def measure(ctx: Ctx, a: int, b: int, nbytes: int) -> list[dict] | None:
    pairs = [(n[a], n[b]) for n in ctx.nodes]
    me = next(((s, d) for s, d in pairs if ctx.rank in (s, d)), None)
    fn = None
    if me is not None:
        src, dst = me
        buf = torch.ones(nbytes // 4, device=ctx.device, dtype=torch.float32)
        if ctx.rank == src:
            def fn():
                dist.send(buf, dst)
        else:
            def fn():
                dist.recv(buf, src)
    warmup, reps, inner = ctx.plan_reps(fn)
    result = None
    if fn is not None:
        th0 = ctx.throttle_reasons()
        times = ctx.time_calls(fn, reps, inner)
        result = ctx.timed_fields(times, warmup, inner, th0 + ctx.throttle_reasons())
    got = ctx.gather(result)
    if ctx.rank != 0:
        return None
    out = []
    size = (nbytes // 4) * 4
    for src, dst in pairs:
        slow = src if got[src]["time_s"] >= got[dst]["time_s"] else dst
        t = got[slow]
        out.append({"bench": "p2p", "ranks": [src, dst], "host": ctx.host_of(src),
                    "device_name": ctx.device_name_of(src), "src": src, "dst": dst, "bytes": size,
                    "bytes_per_s": size / t["time_s"], "path": pair_path(ctx, src, dst) if ctx.node_of(src) == 0 else None,
                    "concurrent_pairs": len(pairs), "backend": ctx.backend, **t})
    return out
