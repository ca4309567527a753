"""Evaluating once per distinct row gives the same numbers as evaluating every row."""

import numpy as np
import pytest

from gpusim.model import comm as C
from gpusim.model.distinct import MIN_ROWS, distinct_rows, on_distinct_rows
from gpusim.params import DEFAULT_PARAMS


def _calls():
    calls = []

    def fn(a, b, c=0.0):
        calls.append(np.shape(a))
        return a * 2.0 + b - c, a > b

    return fn, calls


def test_same_result_and_smaller_call_on_repeating_rows():
    rng = np.random.default_rng(1)
    rows = 50_000
    a = 2.0 ** rng.integers(0, 11, rows)  # integer-valued: coded by value
    b = rng.choice([0.5, 1e9, np.inf, np.nan], rows)  # floats, inf and NaN: hashed
    c = rng.random(rows) < 0.5
    fn, calls = _calls()
    got = on_distinct_rows(fn, (a, b), {"c": c})
    want = fn(a, b, c=c)
    assert calls[0][0] <= 11 * 4 * 2  # evaluated on the distinct rows only
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)  # bit for bit, NaN in the same places


def test_broadcast_arguments_pass_through_and_rows_are_mapped_back():
    rows = MIN_ROWS * 2
    a = np.tile([1.0, 3.0, 7.0], rows // 3 + 1)[:rows]
    fn, calls = _calls()
    got = on_distinct_rows(fn, (a, np.asarray([2.0])))
    assert calls[0] == (3,)
    np.testing.assert_array_equal(got[0], a * 2.0 + 2.0)
    inv, rep = distinct_rows([a], rows)
    np.testing.assert_array_equal(a[rep][inv], a)


@pytest.mark.parametrize("rows", [10, MIN_ROWS * 2])
def test_runs_directly_when_small_or_all_distinct(rows):
    a = np.arange(rows, dtype=np.float64) + 0.5  # every row distinct
    fn, calls = _calls()
    got = on_distinct_rows(fn, (a, 1.0))
    assert calls == [(rows,)]
    np.testing.assert_array_equal(got[0], a * 2.0 + 1.0)


def test_two_dimensional_arguments_run_directly():
    a = np.ones((MIN_ROWS * 2, 3))
    fn, calls = _calls()
    on_distinct_rows(fn, (a, 1.0))
    assert calls == [a.shape]


def test_collective_time_alone_equals_the_full_choice_on_a_sweep():
    """The step model's collective (time alone, on distinct rows) is the tuner's full choice row by row."""
    rng = np.random.default_rng(7)
    rows = 40_000
    n = 2.0 ** rng.integers(0, 11, rows)
    nodes = np.maximum(1.0, n / 8)
    size = rng.choice([1e3, 3.3e5, 2.6e7, 1.7e9], rows)
    tn = C.tuning_from_params(DEFAULT_PARAMS)
    kw = dict(base_latency_s=DEFAULT_PARAMS.coll_base_latency_s, nvls_gain_frac=DEFAULT_PARAMS.nvls_gain_frac,
              nvls_latency_s=DEFAULT_PARAMS.nvls_latency_s, tree_busbw_frac=DEFAULT_PARAMS.tree_busbw_frac,
              tuning=tn, ll_max_busbw_bytes_per_s=np.where(rng.random(rows) < 0.5, 5e10, np.inf))
    intra = 3.6e11
    args = (size, n, nodes, intra, 2e-6, 4e11, 5e-6, np.asarray([True]))
    for coll in (C.ALL_REDUCE, C.ALL_GATHER, C.REDUCE_SCATTER, C.SEND_RECV, C.ALL_TO_ALL):
        fast = C.collective_min_time_s(coll, *args, **kw)
        full, _, _ = C.collective_choice(coll, *args, **kw)
        np.testing.assert_array_equal(fast, full)
