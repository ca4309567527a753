"""Shared machinery of the benchmarks: the distributed context, timing, statistics, noise flags.

Timing follows nccl-tests and torch.utils.benchmark: warm up, then time ``reps`` repetitions, each of
``inner`` back-to-back calls divided by ``inner``; report the median and the spread. On GPUs a
repetition is bracketed by CUDA events on the current stream (``timer="events"``) or by host clocks
around ``torch.cuda.synchronize()`` (``timer="host"``, for host-bound work such as pageable copies);
on CPU by ``time.perf_counter``. How many repetitions and inner calls: from the time of the last
warm-up call, agreed across ranks (the slowest rank's), so that each point takes about ``target_s``.

Every distributed call made here goes through the process groups created with an explicit timeout;
``barrier()`` is gloo's ``monitored_barrier``, whose error names the ranks that did not arrive.
"""

from __future__ import annotations

import datetime as _dt
import math
import os
import socket
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
import torch.distributed as dist

# ---- budgets ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Budget:
    """How long to measure each point."""

    warmup: int  # untimed calls first (>= 2: the first call may set up communicators, kernels ...)
    min_reps: int
    max_reps: int
    target_s: float  # aim for about this much timed time per point
    min_block_s: float  # inner calls per repetition so one repetition lasts at least this
    max_inner: int


BUDGETS = {
    ("quick", "cpu"): Budget(warmup=2, min_reps=5, max_reps=15, target_s=0.15, min_block_s=0.002, max_inner=20),
    ("quick", "cuda"): Budget(warmup=3, min_reps=5, max_reps=20, target_s=0.05, min_block_s=0.0005, max_inner=50),
    ("full", "cpu"): Budget(warmup=3, min_reps=5, max_reps=30, target_s=0.5, min_block_s=0.005, max_inner=100),
    ("full", "cuda"): Budget(warmup=5, min_reps=10, max_reps=100, target_s=0.5, min_block_s=0.001, max_inner=200),
}

#: rel_spread above this flags a record noisy.
NOISY_REL_SPREAD = 0.3
#: NVML clock-event reasons that make a measurement noisy (power capping is steady-state behaviour
#: under load and is only recorded; thermal and hardware slowdowns are not).
NOISY_THROTTLE = {"sw_thermal_slowdown", "hw_thermal_slowdown", "hw_slowdown", "hw_power_brake_slowdown"}


# ---- statistics ---------------------------------------------------------------------------------


def _percentile(sorted_xs: list[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default), on a sorted list."""
    if len(sorted_xs) == 1:
        return sorted_xs[0]
    pos = (len(sorted_xs) - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_xs) - 1)
    return sorted_xs[lo] + (sorted_xs[hi] - sorted_xs[lo]) * (pos - lo)


def summarize(times: list[float]) -> dict:
    """Median, spread and count of per-call times (seconds)."""
    xs = sorted(float(t) for t in times)
    if not xs:
        raise ValueError("no times to summarize")
    med = _percentile(xs, 0.5)
    p10, p90 = _percentile(xs, 0.1), _percentile(xs, 0.9)
    return {
        "time_s": med, "time_s_min": xs[0], "time_s_p10": p10, "time_s_p90": p90, "time_s_max": xs[-1],
        "rel_spread": (p90 - p10) / med if med > 0 else float("inf"), "reps": len(xs),
    }


def noise_flags(stats: dict, min_reps: int, throttle: list[str]) -> tuple[bool, str | None]:
    reasons = []
    if stats["rel_spread"] > NOISY_REL_SPREAD:
        reasons.append(f"high spread: (p90-p10)/median = {stats['rel_spread']:.2f} > {NOISY_REL_SPREAD}")
    if stats["reps"] < min(3, min_reps):
        reasons.append(f"only {stats['reps']} repetitions")
    bad = sorted(set(throttle) & NOISY_THROTTLE)
    if bad:
        reasons.append("GPU throttled while measuring: " + ", ".join(bad))
    return bool(reasons), ("; ".join(reasons) or None)


# ---- the context ----------------------------------------------------------------------------------


@dataclass
class Point:
    """One measurement point: run on every rank; returns the records (rank 0) or None (others)."""

    bench: str
    key: str
    label: str
    run: Callable[[], list[dict] | None]


@dataclass
class Ctx:
    """What every benchmark needs: ranks, nodes, device, process groups, budget, timing helpers."""

    rank: int
    world: int
    local_rank: int
    local_world: int
    node_rank: int
    host: str
    backend: str
    device: torch.device
    quick: bool
    timeout: _dt.timedelta
    ctrl: Any  # gloo process group over all ranks, for control traffic (barriers, gathers)
    nodes: list[list[int]] = field(default_factory=list)  # node index -> its ranks, sorted
    device_name: str = ""
    rank_env: list[dict] = field(default_factory=list)  # every rank's RankEnv dict (all ranks know it)
    topology: Any = None  # gpusim.topology.Topology of node 0, when nvidia-smi printed one
    nvml: Any = None  # calibrate.env.Nvml or None
    nvml_handle: Any = None
    _groups: dict = field(default_factory=dict)
    _rq_window: tuple[float, float] | None = None  # (run-queue wait, wall) of the last time_calls, seconds

    @property
    def device_kind(self) -> str:
        return self.device.type

    @property
    def budget(self) -> Budget:
        return BUDGETS[("quick" if self.quick else "full", self.device_kind)]

    @property
    def n_nodes(self) -> int:
        return len(self.nodes)

    @property
    def key_prefix(self) -> str:
        """Prefix of every point key: a resumed run with another backend or size measures afresh."""
        return f"{self.backend}/w{self.world}/n{self.n_nodes}"

    def node_of(self, rank: int) -> int:
        for i, rs in enumerate(self.nodes):
            if rank in rs:
                return i
        raise KeyError(rank)

    def host_of(self, rank: int) -> str:
        for e in self.rank_env:
            if e["rank"] == rank:
                return e["host"]
        return self.host

    def device_name_of(self, rank: int) -> str:
        for e in self.rank_env:
            if e["rank"] == rank:
                return e.get("device_name") or self.device_name
        return self.device_name

    # ---- distributed helpers (all on the gloo control group, with its timeout) -------------------
    def barrier(self) -> None:
        if self.world > 1:
            dist.monitored_barrier(group=self.ctrl, timeout=self.timeout, wait_all_ranks=True)

    def gather(self, obj: Any) -> list | None:
        """Every rank's ``obj`` on rank 0 (None elsewhere)."""
        if self.world == 1:
            return [obj]
        out = [None] * self.world if self.rank == 0 else None
        dist.gather_object(obj, out, dst=0, group=self.ctrl)
        return out

    def bcast(self, obj: Any) -> Any:
        """Rank 0's ``obj`` on every rank."""
        if self.world == 1:
            return obj
        box = [obj if self.rank == 0 else None]
        dist.broadcast_object_list(box, src=0, group=self.ctrl)
        return box[0]

    def max_all(self, x: float) -> float:
        if self.world == 1:
            return x
        t = torch.tensor([float(x)], dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX, group=self.ctrl)
        return float(t.item())

    def all_true(self, ok: bool) -> bool:
        if self.world == 1:
            return ok
        t = torch.tensor([0 if ok else 1], dtype=torch.int64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX, group=self.ctrl)
        return int(t.item()) == 0

    def group(self, ranks: list[int]):
        """A process group of the main backend over ``ranks``; created once, by all ranks, in call order.

        Every rank must call this for every group in the same order (torch.distributed requires it).
        The whole world is the default group.
        """
        ranks = sorted(ranks)
        if len(ranks) == self.world:
            return dist.group.WORLD
        key = tuple(ranks)
        if key not in self._groups:
            self._groups[key] = dist.new_group(ranks, timeout=self.timeout)
        return self._groups[key]

    def sync(self) -> None:
        if self.device_kind == "cuda":
            torch.cuda.synchronize(self.device)

    # ---- throttling ------------------------------------------------------------------------------
    def throttle_reasons(self) -> list[str]:
        if self.nvml is None or self.nvml_handle is None:
            return []
        return self.nvml.throttle_reasons(self.nvml_handle)

    # ---- timing ----------------------------------------------------------------------------------
    def time_calls(self, fn: Callable[[], Any], reps: int, inner: int = 1, timer: str = "auto") -> list[float]:
        """Per-call seconds of ``reps`` repetitions of ``inner`` back-to-back ``fn()`` calls."""
        if timer == "auto":
            timer = "events" if self.device_kind == "cuda" else "host"
        out: list[float] = []
        rq0, w0 = runqueue_wait_s(), time.perf_counter()
        try:
            return self._time_calls(fn, reps, inner, timer, out)
        finally:
            rq1 = runqueue_wait_s()
            self._rq_window = (rq1 - rq0, time.perf_counter() - w0) if rq0 is not None and rq1 is not None else None

    def _time_calls(self, fn, reps: int, inner: int, timer: str, out: list[float]) -> list[float]:
        if timer == "events":
            starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
            ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
            for i in range(reps):
                starts[i].record()
                for _ in range(inner):
                    fn()
                ends[i].record()
            torch.cuda.synchronize(self.device)
            for s, e in zip(starts, ends):
                out.append(s.elapsed_time(e) / 1e3 / inner)  # elapsed_time is in milliseconds
            return out
        for _ in range(reps):
            self.sync()
            t0 = time.perf_counter()
            for _ in range(inner):
                fn()
            self.sync()
            out.append((time.perf_counter() - t0) / inner)
        return out

    def plan_reps(self, fn: Callable[[], Any] | None, agree: bool = True, timer: str = "auto",
                  max_inner: int | None = None, warmup: int | None = None) -> tuple[int, int, int]:
        """Warm up with ``fn`` (None: a non-member rank of a group measurement, contributes 0) and
        choose (warmup, reps, inner); with ``agree`` every rank must call it and gets the same answer."""
        b = self.budget
        w = b.warmup if warmup is None else warmup
        t_call = 0.0
        if fn is not None:
            for _ in range(max(w - 1, 0)):
                fn()
            t_call = self.time_calls(fn, 1, 1, timer)[0]
        if agree:
            t_call = self.max_all(t_call)
        t_call = max(t_call, 1e-7)
        inner = int(min(max(1, math.ceil(b.min_block_s / t_call)), max_inner or b.max_inner))
        reps = int(min(max(b.min_reps, math.ceil(b.target_s / (t_call * inner))), b.max_reps))
        return w, reps, inner

    def timed_fields(self, times: list[float], warmup: int, inner: int, throttle: list[str]) -> dict:
        st = summarize(times)
        noisy, why = noise_flags(st, self.budget.min_reps, throttle)
        extra = {}
        if self._rq_window is not None and self._rq_window[1] > 0:
            extra["runqueue_wait_frac"] = self._rq_window[0] / self._rq_window[1]
        self._rq_window = None  # one window per record: a record timed otherwise (data loading) gets none
        return {**st, "inner_iters": inner, "warmup": warmup, "noisy": noisy, "noisy_reason": why,
                "throttle_reasons": sorted(set(throttle)), **extra}


def runqueue_wait_s() -> float | None:
    """Seconds this process's threads have spent runnable but waiting for a CPU (Linux
    ``/proc/self/task/*/schedstat``, second field, nanoseconds; kernel Documentation/scheduler/sched-stats.rst);
    None where the kernel does not expose it. Over a timing window, wait / wall is how much of the window the
    process's threads could not run: more runnable threads than cores (gloo's own threads beside the ranks on a small
    machine, or another process), the contention a CPU calibration must not mistake for the cost of the work."""
    total_ns = 0
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return None
    for tid in tasks:
        try:
            with open(f"/proc/self/task/{tid}/schedstat") as f:
                total_ns += int(f.read().split()[1])
        except (OSError, ValueError, IndexError):  # a thread that ended meanwhile
            continue
    return total_ns / 1e9


# ---- initialisation ---------------------------------------------------------------------------------


def env_int(name: str, default: int) -> int:
    v = os.environ.get(name)
    try:
        return int(v) if v not in (None, "") else default
    except ValueError:
        return default


def init_distributed(backend: str, timeout_s: float) -> tuple[int, int, Any]:
    """init_process_group with an explicit timeout (torchrun's env:// when launched by it, else a
    one-process group); returns (rank, world, ctrl group)."""
    timeout = _dt.timedelta(seconds=timeout_s)
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        kw: dict = {}
        if backend == "nccl":
            kw["device_id"] = torch.device("cuda", env_int("LOCAL_RANK", 0))
        dist.init_process_group(backend, timeout=timeout, **kw)
    else:  # run directly, not under torchrun: a group of one
        dist.init_process_group(backend, store=dist.HashStore(), rank=0, world_size=1, timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    ctrl = dist.group.WORLD if backend == "gloo" else dist.new_group(backend="gloo", timeout=timeout)
    return rank, world, ctrl


def hostname() -> str:
    return socket.gethostname()
