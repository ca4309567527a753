"""Evaluate a pure element-wise function once per distinct row of its per-row arguments.

A sweep of a million scenarios holds far fewer distinct collectives: the ranks and nodes of a collective take a
handful of values (GPU counts are powers of two or multiples of a node), the link figures one per hardware row and
the message sizes one per model and bucket. The collective model costs some eighty array operations a call; finding
the distinct rows costs about ten, so :func:`on_distinct_rows` codes the arguments that vary per row, evaluates the
function on one representative row per distinct combination and spreads the results back. The results are the same
numbers bit for bit (the same operations on the same values); where nearly every row is distinct the function runs
on the full arrays as before.

Integer-valued columns with a small range (rank and node counts, flags) are coded by their value; other columns by
:func:`pandas.factorize` (a hash table, linear time; ``numpy.unique`` sorts).
"""

from __future__ import annotations

import numpy as np

#: below this many rows the function runs directly (finding distinct rows would cost more than it saves)
MIN_ROWS = 4096
#: run directly when more than this fraction of the rows are distinct (nothing to save)
MAX_DISTINCT_FRAC = 0.25
#: rows sampled first to judge whether coding the columns can pay off
SAMPLE_ROWS = 256


def _codes(a: np.ndarray) -> tuple[np.ndarray, int]:
    """Codes ``0..k-1`` of a 1-D array's values and ``k`` (codes need not all occur)."""
    if a.dtype == bool:
        return a.astype(np.int64), 2
    if a.dtype.kind in "iu":
        ai = a.astype(np.int64, copy=False)
    else:
        with np.errstate(invalid="ignore"):
            ai = a.astype(np.int64)
        if not np.array_equal(ai, a):  # fractional, huge, inf or NaN values: hash them
            ai = None
    if ai is not None:
        lo, hi = int(ai.min()), int(ai.max())
        if hi - lo < max(4 * len(a), 1 << 16):
            return ai - lo, hi - lo + 1
    import pandas as pd  # a dependency of gpusim; imported here, as only float columns need it

    codes, uniques = pd.factorize(a, use_na_sentinel=False)
    return codes.astype(np.int64, copy=False), len(uniques)


def distinct_rows(args, rows: int):
    """``(inverse, representatives)`` of the distinct rows over the ``(rows,)``-shaped arrays in ``args``:
    row ``i`` equals row ``representatives[inverse[i]]`` in every argument. ``None`` when not worth it."""
    # a column that repeats one value (a hardware row broadcast to a sweep) distinguishes nothing
    varying = [a for a in (np.asarray(a) for a in args if np.shape(a) == (rows,))
               if not (a[0] == a[-1] and np.all(a == a[0]))]
    if not varying:
        return np.zeros(rows, dtype=np.int64), np.zeros(1, dtype=np.int64)
    # a strided sample of rows that are nearly all distinct says the whole will be too: skip the coding's cost
    sample = np.linspace(0, rows - 1, SAMPLE_ROWS).astype(np.int64)
    if len(np.unique(np.stack([a[sample] for a in varying], axis=1), axis=0)) > 0.75 * SAMPLE_ROWS:
        return None
    key, radix = None, 1
    for a in varying:
        codes, k = _codes(a)
        if key is None:
            key, radix = codes, k
            continue
        if radix * k >= 1 << 62:  # keep the mixed-radix key in int64: compress what there is first
            key, radix = _compress(key, radix)
        key = key + codes * radix
        radix *= k
    inverse, m = _compress(key, radix)
    if m > MAX_DISTINCT_FRAC * rows:
        return None
    representatives = np.empty(m, dtype=np.int64)
    representatives[inverse] = np.arange(rows)
    return inverse, representatives


def _compress(key: np.ndarray, radix: int) -> tuple[np.ndarray, int]:
    """Dense codes ``0..m-1`` of an int64 key with values below ``radix``, and ``m``."""
    if radix <= max(4 * len(key), 1 << 16):
        present = np.flatnonzero(np.bincount(key, minlength=radix))
        lookup = np.empty(radix, dtype=np.int64)
        lookup[present] = np.arange(len(present))
        return lookup[key], len(present)
    import pandas as pd

    codes, uniques = pd.factorize(key)
    return codes.astype(np.int64, copy=False), len(uniques)


def on_distinct_rows(fn, args: tuple, kwargs: dict | None = None):
    """``fn(*args, **kwargs)`` for an element-wise ``fn`` of broadcastable 0-d / 1-d arrays, evaluated once per
    distinct row (the arguments in ``kwargs`` may vary per row too). Returns what ``fn`` returns (an array or a
    tuple of arrays)."""
    kwargs = kwargs or {}
    shapes = [np.shape(a) for a in args] + [np.shape(v) for v in kwargs.values()]
    if any(len(s) > 1 for s in shapes):
        return fn(*args, **kwargs)
    rows = max((s[0] for s in shapes if s), default=0)
    if rows < MIN_ROWS or any(s and s[0] not in (1, rows) for s in shapes):
        return fn(*args, **kwargs)
    found = distinct_rows(list(args) + list(kwargs.values()), rows)
    if found is None:
        return fn(*args, **kwargs)
    inverse, rep = found

    def small(a):
        return np.asarray(a)[rep] if np.shape(a) == (rows,) else a

    out = fn(*(small(a) for a in args), **{k: small(v) for k, v in kwargs.items()})

    def spread(o):
        o = np.asarray(o)
        return o[inverse] if np.shape(o) == (len(rep),) else np.broadcast_to(o, (rows,)).copy()

    return tuple(spread(o) for o in out) if isinstance(out, tuple) else spread(out)
