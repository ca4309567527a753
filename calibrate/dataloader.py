"""Data-loader throughput: samples/s a ``DataLoader`` supplies with 0..k workers, pinned or not.

The dataset is synthetic and CPU-bound like image decoding: each sample draws ``WORK_ELEMS`` normal
numbers (seeded by its index), takes their sine and sums them (a fixed amount of work whose time in
the main process alone is recorded as ``sample_cost_s``), and returns a float32 tensor of
``sample_bytes``. Every rank runs its own loader at the same time, as in training, so workers compete
for the node's cores (``cpu_cores_per_rank``). On GPUs each batch is also copied to the device
(``non_blocking`` when pinned), the host-to-device part of the supply.
"""

from __future__ import annotations

import os
import time

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from gpusim.calibrate_bench.harness import Ctx, Point, summarize

BENCH = "dataloader"
SAMPLE_SHAPE = (3, 64, 64)  # float32: 48 KiB per sample
WORK_ELEMS = 20_000


class SyntheticDataset(Dataset):
    def __init__(self, n: int, work_elems: int = WORK_ELEMS, shape: tuple[int, ...] = SAMPLE_SHAPE):
        self.n = n
        self.work_elems = work_elems
        self.shape = shape

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        rng = np.random.default_rng(i)
        v = float(np.sin(rng.standard_normal(self.work_elems)).sum())
        return torch.full(self.shape, v, dtype=torch.float32), i


def sample_cost_s(ds: SyntheticDataset, n: int = 30) -> float:
    ds[0]
    ts = []
    for i in range(n):
        t0 = time.perf_counter()
        ds[i]
        ts.append(time.perf_counter() - t0)
    return summarize(ts)["time_s"]


def configs(ctx: Ctx) -> list[tuple[int, bool]]:
    cores = max(1, (os.cpu_count() or 1) // max(1, len(ctx.nodes[0])))
    workers = [0, 2] if ctx.quick else sorted({0, 1, 2, 4, 8, min(16, 2 * cores)} & set(range(0, 2 * cores + 2)))
    pins = [False, True] if ctx.device_kind == "cuda" else [False]
    return [(w, p) for w in workers for p in pins]


def plan(ctx: Ctx) -> list[Point]:
    batch, n_batches = (32, 12) if ctx.quick else (64, 40)
    pts = []
    for w, pin in configs(ctx):
        key = f"{ctx.key_prefix}/{BENCH}/w{w}/pin{int(pin)}/b{batch}"
        pts.append(Point(BENCH, key, f"{w} workers{' pinned' if pin else ''} batch {batch}",
                         lambda w=w, pin=pin: measure(ctx, w, pin, batch, n_batches)))
    return pts


def measure(ctx: Ctx, workers: int, pin: bool, batch: int, n_batches: int) -> list[dict] | None:
    skip = 2  # the first batches include worker start-up and prefetch fill
    ds = SyntheticDataset(batch * n_batches)
    cost = sample_cost_s(ds)
    ctx.barrier()  # start all loaders together
    loader = DataLoader(ds, batch_size=batch, num_workers=workers, pin_memory=pin, shuffle=False,
                        timeout=ctx.timeout.total_seconds() if workers else 0)
    cuda = ctx.device_kind == "cuda"
    t0 = time.perf_counter()
    arrivals = []
    for x, _ in loader:
        if cuda:
            x = x.to(ctx.device, non_blocking=pin)
            torch.cuda.synchronize(ctx.device)
        arrivals.append(time.perf_counter())
    del loader
    startup = arrivals[0] - t0
    gaps = [b - a for a, b in zip(arrivals[skip - 1:], arrivals[skip:])]
    th = ctx.throttle_reasons()
    mine = ctx.timed_fields(gaps, skip, 1, th)
    mine.update(samples_per_s=batch * len(gaps) / sum(gaps), sample_cost_s=cost, startup_s=startup)
    got = ctx.gather(mine)
    if ctx.rank != 0:
        return None
    cores = (os.cpu_count() or 1) / max(1, len(ctx.nodes[0]))
    return [{"bench": BENCH, "rank": r, "host": ctx.host_of(r), "device_name": ctx.device_name_of(r),
             "workers": workers, "pin_memory": pin, "batch": batch, "n_batches": n_batches,
             "sample_bytes": int(np.prod(SAMPLE_SHAPE)) * 4, "to_device": cuda, "concurrent_ranks": ctx.world,
             "cpu_cores_per_rank": cores, **t} for r, t in enumerate(got)]
