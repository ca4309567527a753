"""Synchronisation: stragglers and a slow GPU.

A synchronous data-parallel step ends when the slowest rank is done. If each rank's compute time is
``T (1 + jitter * Z_i)`` with independent standard normal ``Z_i``, the step waits for
``T * jitter * E[max_i Z_i]``, which grows like ``sqrt(2 ln n)`` with the number of ranks ``n``
(expected maximum of n normals; e.g. David & Nagaraja, "Order Statistics", 3rd ed., 2003). A GPU that runs
at a fraction of its speed (thermal throttling, an older card in the mix) sets everyone's pace.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from gpusim.model.distinct import per_distinct


@functools.lru_cache(maxsize=1)
def _expected_max_table():
    """E[max of n standard normals] on a log grid of n, by numerical integration (computed once)."""
    # 1001 points: the integrand is smooth and vanishes at both ends, so the Riemann sum is already exact to
    # ~1e-10 (4001 points agree to 2e-10); with every n at once the table costs a few ms of a CLI start, not ~13
    x = np.linspace(-8.0, 12.0, 1001)
    dx = x[1] - x[0]
    phi = np.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)
    cdf = 0.5 * (1.0 + np.array([math.erf(v / math.sqrt(2.0)) for v in x]))
    log_cdf = np.log(np.maximum(cdf, 1e-300))
    # the rounded grid is sorted, so dropping repeats needs no np.unique (which imports numpy.ma: ~10-25 ms of a
    # CLI start, issue 20)
    ns = np.round(np.geomspace(1, 2**24, 400))
    ns = ns[np.concatenate(([True], np.diff(ns) > 0))]
    # E[max] = integral of x * n * phi(x) * cdf(x)^(n-1) dx, every n at once
    vals = ns * (np.exp(np.outer(ns - 1.0, log_cdf)) @ (x * phi)) * dx
    vals[0] = 0.0
    return np.log(ns), vals


def expected_max_std_normal(n):
    """E[max of n i.i.d. standard normals] (0 for n = 1; 0.564 for 2; 1.424 for 8; 3.4 for 1e4)."""
    log_n, vals = _expected_max_table()

    def table(m):
        return np.interp(np.log(np.maximum(np.asarray(m, dtype=np.float64), 1.0)), log_n, vals)

    return per_distinct(table, [n]) if np.ndim(n) == 1 else table(n)  # (a sweep's rank counts repeat)


def straggler_s(compute_s, n_ranks, jitter_frac, slowest_gpu_speed_frac):
    """Extra time per step spent waiting for the slowest rank."""
    compute_s = np.asarray(compute_s, dtype=np.float64)
    slow = compute_s * (1.0 / np.asarray(slowest_gpu_speed_frac, dtype=np.float64) - 1.0)
    jitter = compute_s * jitter_frac * expected_max_std_normal(n_ranks)
    return np.where(np.asarray(n_ranks) > 1, slow + jitter, 0.0)
