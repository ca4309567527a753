"""Speed devices that must not change a result: evaluation once per distinct row (gpusim.model.distinct) and
evaluate() in row blocks (gpusim.model.step.BLOCK_ROWS)."""

from __future__ import annotations

import numpy as np
import pytest

from gpusim.model import distinct as D
from gpusim.model import step as S
from gpusim.params import DEFAULT_PARAMS
from gpusim.simulation import Scenario, build_inputs, stack_rows


def _f(a, b, c):
    return a * b + np.sqrt(c), a - c


def test_per_distinct_equals_direct_on_a_grid():
    rng = np.random.default_rng(1)
    n = 5000
    a = rng.choice([1.0, 2.0, 4.0, 8.0], n)
    b = rng.choice([3.0, 5.0], n)
    c = np.full(n, 7.0)  # constant column
    got = D.per_distinct(_f, [a, b, c])
    want = _f(a, b, c)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.broadcast_to(g, (n,)), w)
    assert D.group_rows([a, b, c], n, 100)[1].size == 8


def test_per_distinct_falls_back_when_rows_are_distinct_and_groups_nan_as_one_value():
    rng = np.random.default_rng(2)
    n = 4000
    a = rng.random(n)  # all distinct
    b = np.where(rng.random(n) < 0.5, np.nan, 1.0)  # NaN (a default) is one value of its own: two groups
    assert D.group_rows([a], n, n // 4) is None
    inv, reps = D.group_rows([b], n, n // 4)
    assert reps.size == 2
    np.testing.assert_array_equal(b[reps][inv], b)  # NaN rows come back NaN, the others 1
    np.testing.assert_array_equal(D.per_distinct(lambda x, y: x + y, [a, b]), a + b)
    c = np.full(n, np.nan)  # an unset switch over every row: constant, it does not stop the grouping
    d = np.arange(n) % 3 * 1.0
    inv, reps = D.group_rows([c, d], n, n // 4)
    assert reps.size == 3
    np.testing.assert_array_equal(D.per_distinct(lambda x, y: x * y, [c, d]), c * d)


def test_group_rows_renumbers_correlated_columns():
    """Three columns of 6, 3 and 2 values make a radix of 36 but only 6 combinations: renumbered to fit 10."""
    n = 3000
    i = np.arange(n) % 6
    cols = [i * 1.0, (i // 2) * 1.0, (i % 2) * 1.0]
    inv, reps = D.group_rows(cols, n, 10)
    assert reps.size == 6
    for c in cols:
        np.testing.assert_array_equal(c[reps][inv], c)


def test_evaluate_in_blocks_equals_one_block(db, monkeypatch):
    rows = []
    for tp, pp, rc, sp, b in ((8, 1, "full", False, 1), (4, 2, "selective", True, 2), (2, 4, "none", False, 1),
                              (8, 8, "selective", True, 1), (1, 1, "full", False, 1)):
        scn = Scenario(model="llama2-7b", gpu="h100-sxm", gpus=64, nodes=8, precision="bf16", kind="zero1", tp=tp,
                       pp=pp, micro_batch=b, global_batch=256, seq_len=4096, recompute=rc, sp=sp)
        rows.append(build_inputs(scn, db)[2])
    inp = stack_rows(rows * 300)  # 1500 rows: per_distinct groups them
    whole = S.evaluate(inp, DEFAULT_PARAMS)
    monkeypatch.setattr(S, "BLOCK_ROWS", 7)
    blocked = S.evaluate(inp, DEFAULT_PARAMS)
    assert set(blocked) == set(whole)
    for key, v in whole.items():
        np.testing.assert_array_equal(np.broadcast_to(v, blocked[key].shape), blocked[key], err_msg=key)
    monkeypatch.setattr(D, "MIN_ROWS", 10**9)  # every function on every row
    direct = S.evaluate(inp, DEFAULT_PARAMS)
    for key in ("step_s", "tp_comm_exposed_s", "pp_p2p_exposed_s", "memory_per_gpu_bytes"):
        np.testing.assert_allclose(direct[key], blocked[key], rtol=1e-13, err_msg=key)
    assert whole["step_s"][0] == pytest.approx(S.evaluate(stack_rows(rows[:1]), DEFAULT_PARAMS)["step_s"][0], rel=1e-13)


@pytest.mark.parametrize("col", [
    np.arange(2000) % 3 == 0,  # bool: counted
    (np.arange(2000) % 5).astype(np.int64) - 2,  # int: counted from its minimum
    (np.arange(2000) % 4) * 0.5 + 1.0,  # non-integer floats: hashed
    (np.arange(2000) % 3) * 1e7,  # integers spanning more than a count: hashed
    (np.arange(2000) % 3).astype(np.float32) * 1e7 + 0.5,  # 32-bit floats: compared value by value
])
def test_column_codes_of_every_kind(col):
    inv, reps = D.group_rows([col], col.shape[0], 100)
    np.testing.assert_array_equal(col[reps][inv], col)
    assert reps.size == np.unique(col).size


@pytest.mark.parametrize("bits", [1, 2, 14])
def test_hashed_codes_fall_back_on_a_shared_slot(monkeypatch, bits):
    """Values that share a hash slot under every multiplier (a table of 2 or 4 slots for 7 values) are coded by the
    comparison passes instead: the same groups either way."""
    monkeypatch.setattr(D, "_HASH_BITS", bits)
    col = np.tile(np.array([0.1, 2.5, -3.0, 1e9, 7.25, 0.0, -0.0]), 300)
    codes, k = D._column_codes(col, 100)
    assert (D._hashed_codes(col, 100) is None) == (bits < 3)
    assert k in (6, 7)  # (0.0 and -0.0: one value compared, two bit patterns hashed)
    assert np.unique(codes[:5]).size == 5  # distinct values, distinct codes
    for c in range(k):
        assert np.unique(col[codes == c]).size == 1  # one value per code


def test_many_distinct_values_are_sorted_not_scanned():
    """A column of 65,536 distinct floats is coded (or rejected) by one sort, not a pass per value."""
    import time

    a = np.random.default_rng(3).random(65536) * 1e9
    t0 = time.process_time()
    assert D.group_rows([a], a.size, a.size // 4) is None
    inv, reps = D.group_rows([a], a.size, a.size)
    assert time.process_time() - t0 < 2.0
    np.testing.assert_array_equal(a[reps][inv], a)
    b = np.repeat(np.random.default_rng(4).random(100), 50)  # 100 values: past the comparison passes
    inv, reps = D.group_rows([b], b.size, 1000)
    assert reps.size == 100
    np.testing.assert_array_equal(b[reps][inv], b)
