"""Collectives over a geometric size sweep, per level, with nccl-tests' time, algbw and busbw.

For each collective (all_reduce, reduce_scatter, all_gather, broadcast), each group layout and each
size: build the buffers, run the collective once on known values and check the result exactly
(``correct``), warm up, time ``reps`` × ``inner`` calls on every member, and report the slowest
member's median. Sizes and bandwidths follow nccl-tests (doc/PERFORMANCE.md): ``bytes`` S is the whole
array (reduce_scatter: each rank's input; all_gather: each rank's output), ``algbw = S / t``,
``busbw = algbw × factor`` with factor 2(n-1)/n (all_reduce), (n-1)/n (reduce_scatter, all_gather),
1 (broadcast). fp32 elements; sizes are rounded down to a multiple of 4·n bytes where the collective
splits the array in n parts, as nccl-tests does.

Levels (sub-groups of the job): ``intra-node`` (the ranks of one node; every node's group runs at the
same time; in full mode also the first 2, 4, ... ranks of node 0 alone), ``inter-node`` (one rank per
node with the same local rank: one group per local rank, all at once, as the inter-node phase of a
hierarchical all-reduce runs; in full mode also one such group alone) and ``global`` (every rank; only
recorded with several nodes, since on one node it is the intra-node group).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist

from gpusim.calibrate_bench.harness import Ctx, Point
from gpusim.profile import busbw_factor
from gpusim.units import KIB, MIB

BENCH = "collectives"
COLLECTIVES = ("all_reduce", "reduce_scatter", "all_gather", "broadcast")

_reduce_scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
_all_gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor


@dataclass(frozen=True)
class GroupSpec:
    """Groups that run one measurement at the same time (disjoint, equal size)."""

    level: str
    groups: tuple[tuple[int, ...], ...]

    @property
    def n_ranks(self) -> int:
        return len(self.groups[0])

    @property
    def tag(self) -> str:
        return f"{self.level}/n{self.n_ranks}x{len(self.groups)}"


def group_specs(ctx: Ctx, subsizes: bool) -> list[GroupSpec]:
    """The group layouts to measure (see the module docstring)."""
    nodes = ctx.nodes
    local = min(len(n) for n in nodes)
    specs: list[GroupSpec] = []
    if local >= 2:
        if subsizes:
            s = 2
            while s < local:
                specs.append(GroupSpec("intra-node", (tuple(nodes[0][:s]),)))
                s *= 2
        specs.append(GroupSpec("intra-node", tuple(tuple(n[:local]) for n in nodes)))
    if len(nodes) >= 2:
        rails = tuple(tuple(n[lr] for n in nodes) for lr in range(local))
        if subsizes and local > 1:
            specs.append(GroupSpec("inter-node", rails[:1]))
        specs.append(GroupSpec("inter-node", rails))
        if local > 1:  # with one rank per node the global group is the inter-node group
            specs.append(GroupSpec("global", (tuple(r for n in nodes for r in n),)))
    return specs


def sizes(ctx: Ctx) -> list[int]:
    if ctx.device_kind == "cuda":
        s = [8 * KIB, 1 * MIB, 32 * MIB, 256 * MIB] if ctx.quick else [2 ** p for p in range(10, 32, 2)]
    else:
        s = [4 * KIB, 64 * KIB, 1 * MIB, 8 * MIB] if ctx.quick else [2 ** p for p in range(12, 27, 2)]
    return [int(x) for x in s]


def plan(ctx: Ctx) -> list[Point]:
    specs = group_specs(ctx, subsizes=not ctx.quick)
    if not specs:
        key = f"{ctx.key_prefix}/{BENCH}/single-rank"
        return [Point(BENCH, key, "collectives: one rank only", lambda: _skipped(ctx, key))]
    pts = []
    for spec in specs:
        for coll in COLLECTIVES:
            for nbytes in sizes(ctx):
                key = f"{ctx.key_prefix}/{BENCH}/{spec.tag}/{coll}/b{nbytes}"
                label = f"{coll} {spec.level} n={spec.n_ranks}{'x' + str(len(spec.groups)) if len(spec.groups) > 1 else ''} {_fmt(nbytes)}"
                pts.append(Point(BENCH, key, label, lambda s=spec, c=coll, b=nbytes: measure(ctx, s, c, b)))
    return pts


def _fmt(nbytes: int) -> str:
    return f"{nbytes / MIB:g} MiB" if nbytes >= MIB else f"{nbytes / KIB:g} KiB"


def _skipped(ctx: Ctx, key: str) -> list[dict] | None:
    if ctx.rank != 0:
        return None
    return [{"bench": "skipped", "key": key, "of_bench": "collective", "params": {"world_size": ctx.world},
             "reason": "a single rank: collectives need two or more", "host": ctx.host,
             "device_name": ctx.device_name}]


def element_count(coll: str, nbytes: int, n: int) -> int:
    count = max(nbytes // 4, 1)
    if coll in ("reduce_scatter", "all_gather"):
        count = max(count - count % n, n)
    return count


def _setup(ctx: Ctx, coll: str, members: tuple[int, ...], pg, count: int):
    """Buffers, an exact correctness check, and the timed call, for this rank in this group."""
    n = len(members)
    gr = members.index(ctx.rank)
    dev = ctx.device
    f32 = torch.float32
    if coll == "all_reduce":
        x = torch.full((count,), float(gr % 7 + 1), device=dev, dtype=f32)
        dist.all_reduce(x, group=pg)
        ok = bool(torch.all(x == float(sum(g % 7 + 1 for g in range(n)))).item())
        x.zero_()  # timed calls sum in place; values do not change the communication, zeros do not overflow
        return ok, (lambda: dist.all_reduce(x, group=pg))
    if coll == "reduce_scatter":
        c = count // n
        inp = torch.empty((n, c), device=dev, dtype=f32)
        for k in range(n):
            inp[k].fill_(float((gr + k) % 7 + 1))
        out = torch.empty((c,), device=dev, dtype=f32)
        inp = inp.reshape(-1)
        _reduce_scatter(out, inp, group=pg)
        ok = bool(torch.all(out == float(sum((g + gr) % 7 + 1 for g in range(n)))).item())
        return ok, (lambda: _reduce_scatter(out, inp, group=pg))
    if coll == "all_gather":
        c = count // n
        inp = torch.full((c,), float(gr % 251 + 1), device=dev, dtype=f32)
        out = torch.zeros((count,), device=dev, dtype=f32)
        _all_gather(out, inp, group=pg)
        expect = torch.repeat_interleave(torch.arange(n, device=dev, dtype=f32) % 251 + 1, c)
        ok = bool(torch.equal(out, expect))
        return ok, (lambda: _all_gather(out, inp, group=pg))
    if coll == "broadcast":
        src = members[0]
        x = torch.full((count,), 42.0 if ctx.rank == src else 0.0, device=dev, dtype=f32)
        dist.broadcast(x, src=src, group=pg)
        ok = bool(torch.all(x == 42.0).item())
        return ok, (lambda: dist.broadcast(x, src=src, group=pg))
    raise ValueError(coll)


def measure(ctx: Ctx, spec: GroupSpec, coll: str, nbytes: int) -> list[dict] | None:
    pgs = [ctx.group(list(g)) for g in spec.groups]  # every rank creates every group, in order
    mine = next((i for i, g in enumerate(spec.groups) if ctx.rank in g), None)
    n = spec.n_ranks
    count = element_count(coll, nbytes, n)
    fn, ok = None, True
    if mine is not None:
        ok, fn = _setup(ctx, coll, spec.groups[mine], pgs[mine], count)
        ctx.sync()
    warmup, reps, inner = ctx.plan_reps(fn)
    result = None
    if fn is not None:
        th0 = ctx.throttle_reasons()
        times = ctx.time_calls(fn, reps, inner)
        result = {"t": ctx.timed_fields(times, warmup, inner, th0 + ctx.throttle_reasons()), "ok": ok}
    got = ctx.gather(result)
    if ctx.rank != 0:
        return None
    members = sorted(r for g in spec.groups for r in g)
    slowest = max(members, key=lambda r: got[r]["t"]["time_s"])
    t = got[slowest]["t"]
    size = count * 4
    factor = busbw_factor(coll, n)
    algbw = size / t["time_s"]
    first = list(spec.groups[0])
    return [{
        "bench": "collective", "ranks": first, "host": ctx.host_of(first[0]), "device_name": ctx.device_name_of(first[0]),
        "collective": coll, "bytes": size, "dtype": "float32", "n_ranks": n,
        "n_nodes": len({ctx.node_of(r) for r in first}), "level": spec.level,
        "concurrent_groups": len(spec.groups), "algbw_bytes_per_s": algbw, "busbw_bytes_per_s": algbw * factor,
        "busbw_factor": factor, "correct": all(got[r]["ok"] for r in members),
        "rank_time_s": [got[r]["t"]["time_s"] for r in members], "slowest_rank": slowest,
        "backend": ctx.backend, **t,
    }]
