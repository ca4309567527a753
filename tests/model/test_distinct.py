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


def test_contiguous_integers_are_their_own_codes_and_gaps_are_renumbered():
    """A column whose values fill their span is coded by the values themselves (no renumbering pass); one with gaps is
    renumbered 0..k-1 in order of value; both group exactly."""
    from gpusim.model.distinct import _column_codes

    a = np.tile([3.0, 4.0, 5.0, 6.0], 1000)  # every value of 3..6 occurs
    codes, k = _column_codes(a, 100)
    assert k == 4 and np.array_equal(codes, (a - 3.0).astype(np.intp))
    gaps = np.tile([1.0, 2.0, 8.0, 64.0], 1000)  # tp-like degrees: 4 values in a span of 64
    codes, k = _column_codes(gaps, 100)
    assert k == 4 and set(codes[:4].tolist()) == {0, 1, 2, 3}
    np.testing.assert_array_equal(codes, np.tile([0, 1, 2, 3], 1000))


def test_an_output_the_same_in_every_group_comes_back_as_a_read_only_view_of_the_same_values():
    """An output equal in every group is returned as a broadcast view (no gather): the same values as the direct
    evaluation, one per row, and not writable (a caller that wrote into it would write into every row)."""
    rows = 20_000
    tp = np.tile([1.0, 2.0, 4.0, 8.0], rows // 4)

    def fn(tp):
        return tp * 2.0, np.zeros_like(tp), np.full_like(tp, np.nan)

    got = per_distinct(fn, [tp])
    want = fn(tp)
    for g, w in zip(got, want):
        assert g.shape == (rows,)
        np.testing.assert_array_equal(g, w)
    assert got[0].flags.writeable  # varies: gathered into a new array
    assert not got[1].flags.writeable and got[1].strides == (0,)  # constant: a view of one value
    assert got[2].flags.writeable  # NaN never equals itself: gathered, as before
