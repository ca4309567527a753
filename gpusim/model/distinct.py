"""Evaluate an elementwise function once per distinct combination of the inputs that vary across rows.

A sweep is a grid: each varying column holds a few distinct values (degrees 1, 2, 4, 8; micro-batches 1, 2, 4), so
an expensive elementwise function of a few columns (a GEMM's time from its shape and the GPU, a collective's time from
its message size, group and fabric) takes far fewer distinct values than there are rows. :func:`per_distinct` finds
the distinct combinations (integer codes per column, combined in mixed radix), evaluates the function on one
representative row of each, and gathers the results back to every row. The function must be elementwise (row ``i``
of its result depends only on row ``i`` of its inputs); the result is then identical to evaluating it on all rows.

Pure numpy; no state.
"""

from __future__ import annotations

import numpy as np

#: below this many rows a function is evaluated directly (finding the groups would cost more than it saves)
MIN_ROWS = 512


def _column_codes(a: np.ndarray, max_k: int):
    """``(codes, k)``: an integer code per row for the ``k`` distinct values of the 1-D ``a``; ``(None, 1)`` when
    ``a`` is constant; ``(None, 0)`` when it has more than ``max_k`` values or values that equal nothing (NaN)."""
    first = a[0]
    idx = np.flatnonzero(a != first)
    if idx.size == 0:
        return None, 1 if first == first else 0
    codes = np.zeros(a.shape[0], dtype=np.intp)
    k = 1
    while idx.size:
        if k >= max_k:
            return None, 0
        rest = a[idx]
        same = rest == rest[0]
        if not same[0]:  # NaN
            return None, 0
        codes[idx[same]] = k
        idx = idx[~same]
        k += 1
    return codes, k


def group_rows(arrays, rows: int, max_groups: int):
    """Rows with equal values in every array of ``arrays`` (each broadcastable to ``(rows,)``).

    Returns ``(inverse, reps)``: the group of each row (``(rows,)`` integers) and one row of each group, or ``None``
    when there are more than ``max_groups`` groups.
    """
    code, radix, seen = None, 1, set()
    for a in arrays:
        a = np.asarray(a)
        if a.ndim == 0 or a.shape[0] == 1 or id(a) in seen:
            continue
        seen.add(id(a))
        c, k = _column_codes(a, max_groups + 1)
        if k == 0:
            return None
        if c is None:
            continue
        if code is None:
            code, radix = c, k
            continue
        code = code * k + c
        radix *= k
        if radix > max_groups:  # renumber the combinations that occur
            uniq, code = np.unique(code, return_inverse=True)
            if uniq.size > max_groups:
                return None
            radix = uniq.size
    if code is None:
        return np.zeros(rows, dtype=np.intp), np.zeros(1, dtype=np.intp)
    present = np.flatnonzero(np.bincount(code, minlength=radix))
    rep_of_code = np.empty(radix, dtype=np.intp)
    rep_of_code[code] = np.arange(code.shape[0])  # some row of each combination (all its rows are equal)
    if present.size == radix:
        return code, rep_of_code
    lut = np.zeros(radix, dtype=np.intp)
    lut[present] = np.arange(present.size)
    return lut[code], rep_of_code[present]


def per_distinct(fn, arrays: list, *, max_frac: float = 0.25):
    """``fn(*arrays)`` evaluated once per distinct row of ``arrays`` and gathered back to every row.

    ``arrays`` are 0-d or 1-D (``(1,)`` or ``(rows,)``) numeric arrays; ``fn`` is elementwise and returns one array
    or a tuple of arrays broadcastable to ``(rows,)``. Falls back to ``fn(*arrays)`` for few rows or when more than
    ``max_frac`` of the rows are distinct.
    """
    arrs = [np.asarray(a) for a in arrays]
    rows = max((a.shape[0] for a in arrs if a.ndim >= 1), default=1)
    if rows < MIN_ROWS or any(a.ndim > 1 for a in arrs):
        return fn(*arrs)
    groups = group_rows(arrs, rows, max(1, int(max_frac * rows)))
    if groups is None:
        return fn(*arrs)
    inverse, reps = groups
    out = fn(*(a[reps] if a.ndim == 1 and a.shape[0] == rows else a for a in arrs))

    def back(v):
        v = np.asarray(v)
        if v.ndim == 0:
            return np.broadcast_to(v, (rows,))
        if v.shape[0] == 1 and reps.size != 1:
            return np.broadcast_to(v, (rows,) + v.shape[1:])
        return v[inverse]

    return tuple(back(v) for v in out) if isinstance(out, tuple) else back(out)
