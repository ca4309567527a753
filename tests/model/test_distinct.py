"""Evaluating once per distinct row gives the same numbers as evaluating every row (collectives, stragglers)."""

import numpy as np

from gpusim.model import comm as C
from gpusim.model.distinct import per_distinct
from gpusim.model.sync import expected_max_std_normal
from gpusim.params import DEFAULT_PARAMS


def test_floats_inf_nan_and_flags_group_exactly():
    rng = np.random.default_rng(1)
    rows = 50_000
    a = 2.0 ** rng.integers(0, 11, rows)
    b = rng.choice([0.5, 1e9, np.inf], rows)
    c = rng.random(rows) < 0.5
    calls = []

    def fn(a, b, c):
        calls.append(np.shape(a))
        return a * 2.0 + b - c, a > b

    got = per_distinct(fn, [a, b, c])
    want = fn(a, b, c)
    assert calls[0][0] <= 11 * 3 * 2  # evaluated on the distinct rows only
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def test_stragglers_expected_maximum_per_distinct_rank_count():
    n = np.tile([1.0, 2.0, 8.0, 1024.0], 5000)
    np.testing.assert_array_equal(expected_max_std_normal(n), np.concatenate(
        [expected_max_std_normal(np.array([1.0, 2.0, 8.0, 1024.0]))] * 5000))


def test_collective_time_alone_equals_the_full_choice_on_a_sweep_grouped_or_not():
    """The step model's collective (time alone, grouped per distinct row) is the tuner's full choice row by row."""
    rng = np.random.default_rng(7)
    rows = 40_000
    n = 2.0 ** rng.integers(0, 11, rows)
    nodes = np.maximum(1.0, n / 8)
    size = rng.choice([1e3, 3.3e5, 2.6e7, 1.7e9], rows)
    ll_max = np.where(rng.random(rows) < 0.5, 5e10, np.inf)
    ll128 = rng.random(rows) < 0.5
    p = DEFAULT_PARAMS
    kw = dict(base_latency_s=p.coll_base_latency_s, nvls_gain_frac=p.nvls_gain_frac, nvls_latency_s=p.nvls_latency_s,
              tree_busbw_frac=p.tree_busbw_frac, tuning=C.tuning_from_params(p))
    args = [size, n, nodes, np.asarray(3.6e11), np.asarray(2e-6), np.asarray(4e11), np.asarray(5e-6),
            np.asarray([True])]
    for coll in (C.ALL_REDUCE, C.ALL_GATHER, C.REDUCE_SCATTER, C.SEND_RECV, C.ALL_TO_ALL):
        full, _, _ = C.collective_choice(coll, *args, ll_max_busbw_bytes_per_s=ll_max, ll128=ll128, **kw)
        grouped = per_distinct(lambda *a: C.collective_min_time_s(coll, *a[:8], ll_max_busbw_bytes_per_s=a[8],
                                                                  ll128=a[9], **kw), args + [ll_max, ll128])
        np.testing.assert_array_equal(grouped, full)
