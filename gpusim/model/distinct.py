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


#: integer-valued columns spanning at most this many values are coded by counting (degrees, codes, flags)
_COUNT_SPAN = 4096
#: other columns are coded by one comparison pass per value up to this many values, then by sorting
_COMPARE_VALUES = 32
#: 64-bit columns are first coded by hashing their bit patterns into a table of this many slots (a power of two)
_HASH_BITS = 14
#: odd 64-bit multipliers of the multiplicative hash (Knuth, TAOCP vol. 3, section 6.4: the golden ratio's 2^64
#: fraction, and the splitmix64 finaliser's constant), one tried after the other
_HASH_MULTS = (np.uint64(0x9E3779B97F4A7C15), np.uint64(0xBF58476D1CE4E5B9))


def _renumbered(ints: np.ndarray, span: int, max_k: int):
    """``(codes, k)``: the non-negative integers ``ints`` (below ``span``) renumbered 0..k-1 in order of value, by
    counting; ``(None, 0)`` when more than ``max_k`` values occur."""
    present = np.flatnonzero(np.bincount(ints, minlength=span))
    if present.size > max_k:
        return None, 0
    if present.size == span:  # every value occurs: the integers are the codes already
        return ints, span
    lut = np.zeros(span, dtype=np.intp)
    lut[present] = np.arange(present.size)
    return np.take(lut, ints), present.size  # (take: faster than fancy indexing for a 1-D gather)


def _hashed_codes(a: np.ndarray, max_k: int):
    """``(codes, k)`` of a 64-bit column by a multiplicative hash of its bit patterns (a fixed number of passes,
    whatever the number of values, where the comparison passes cost one pass per value); ``None`` when two values
    share a slot under every multiplier (the caller codes the column another way); ``(None, 0)`` over ``max_k`` values.
    Rows in one code hold the same bits, so the same value (a value of two bit patterns, 0.0 and -0.0, takes two
    codes: the grouping is then finer, still exact)."""
    bits = a.view(np.uint64)
    slots = 1 << _HASH_BITS
    shift = np.uint64(64 - _HASH_BITS)
    for mult in _HASH_MULTS:
        h = bits * mult  # (modulo 2^64)
        h >>= shift
        h = h.view(np.int64)  # (below 2^_HASH_BITS: the same values, no copy)
        table = np.empty(slots, dtype=np.uint64)
        table[h] = bits  # (one row of each slot wins; every other row of that slot must hold the same bits)
        if not np.array_equal(table[h], bits):
            continue
        return _renumbered(h, slots, max_k)
    return None


def _column_codes(a: np.ndarray, max_k: int):
    """``(codes, k)``: an integer code per row for the ``k`` distinct values of the 1-D ``a``; ``(None, 1)`` when
    ``a`` is constant; ``(None, 0)`` when it has more than ``max_k`` values. NaN rows are one value of their own (NaN
    marks "the default" in the model's inputs: rows alike but for which NaN they hold compute alike), so a column of
    NaN defaults, such as an unset switch repeated over every row, is constant and does not stop the grouping."""
    if a.dtype.kind == "b":
        a = a.view(np.uint8)
    lo, hi = a.min(), a.max()
    if lo == hi:
        return None, 1
    if lo != lo or hi != hi:  # NaN somewhere
        nan = np.isnan(a)
        if nan.all():
            return None, 1
        rest, k = _column_codes(a[~nan], max_k - 1)
        if k == 0:
            return None, 0
        codes = np.zeros(a.shape[0], dtype=np.intp)
        codes[~nan] = 1 if rest is None else rest + 1
        return codes, k + 1
    if hi - lo <= _COUNT_SPAN:
        if a.dtype.kind in "iu":
            ai = (a - lo).astype(np.intp, copy=False)
        else:
            shifted = a - lo
            ai = shifted.astype(np.intp)
            if not np.array_equal(ai, shifted):
                ai = None
        if ai is not None:
            return _renumbered(ai, int(hi - lo) + 1, max_k)
    if a.dtype.itemsize == 8 and a.dtype.kind in "fiu":
        hashed = _hashed_codes(a, max_k)
        if hashed is not None:
            return hashed
    codes = np.zeros(a.shape[0], dtype=np.intp)
    idx = np.flatnonzero(a != a[0])
    k = 1
    while idx.size:
        if k >= min(max_k, _COMPARE_VALUES):  # many values: one sort instead of a pass per value
            uniq, codes = np.unique(a, return_inverse=True)
            return (codes.reshape(-1), uniq.size) if uniq.size <= max_k else (None, 0)
        rest = a[idx]
        same = rest == rest[0]
        codes[idx[same]] = k
        idx = idx[~same]
        k += 1
    return codes, k


def _combine(code, radix, c, k, max_groups):
    """Mixed-radix ``code * k + c``, renumbered to the combinations that occur when the radix passes ``max_groups``."""
    code = code * k + c
    radix *= k
    if radix <= max_groups:
        return code, radix
    if radix <= 4 * code.shape[0]:
        return _renumbered(code, radix, max_groups)
    uniq, code = np.unique(code, return_inverse=True)
    return (code, uniq.size) if uniq.size <= max_groups else (None, 0)


class Distinct:
    """Groups rows by the values of arrays, remembering each array's codes and each tuple's groups (by identity),
    so that the functions of one model evaluation that share inputs find their groups once. Hold one per
    evaluation: it keeps the arrays it has seen alive."""

    def __init__(self, max_frac: float = 0.25):
        self.max_frac = max_frac
        self._codes: dict[int, tuple] = {}
        self._groups: dict[tuple, tuple] = {}
        self._prefixes: dict[tuple, tuple | None] = {}  # the combined codes of a leading run of varying columns

    def _column(self, a, max_groups):
        hit = self._codes.get(id(a))
        if hit is None:
            hit = (a, *_column_codes(a, max_groups + 1))
            self._codes[id(a)] = hit
        return hit[1], hit[2]

    def group_rows(self, arrays, rows: int):
        """``(inverse, reps)`` as :func:`group_rows`, or ``None`` when more than ``max_frac`` of the rows differ."""
        key = tuple(id(a) for a in arrays)
        if key in self._groups:
            return self._groups[key][1]
        max_groups = max(1, int(self.max_frac * rows))
        code, radix, seen, out = None, 1, set(), None
        prefix: tuple = (max_groups,)
        for a in arrays:
            if a.ndim == 0 or a.shape[0] == 1 or id(a) in seen:
                continue
            seen.add(id(a))
            prefix += (id(a),)
            if prefix in self._prefixes:  # (a call whose columns begin with another's: combined once)
                hit = self._prefixes[prefix]
                if hit is None:
                    break
                code, radix = hit
                continue
            c, k = self._column(a, max_groups)
            if k == 0:
                self._prefixes[prefix] = None
                break
            if c is None:
                pass
            elif code is None:
                code, radix = c, k
            else:
                code, radix = _combine(code, radix, c, k, max_groups)
                if code is None:
                    self._prefixes[prefix] = None
                    break
            self._prefixes[prefix] = (code, radix)
        else:
            out = _groups_of(code, radix, rows)
        self._groups[key] = (arrays, out)  # (the arrays kept alive: their ids stay theirs while the key is held)
        return out

    def __call__(self, fn, arrays: list):
        """``fn(*arrays)`` once per distinct row of ``arrays``, gathered back to every row (see :func:`per_distinct`)."""
        arrs = [np.asarray(a) for a in arrays]
        rows = max((a.shape[0] for a in arrs if a.ndim >= 1), default=1)
        if rows < MIN_ROWS or any(a.ndim > 1 for a in arrs):
            return fn(*arrs)
        groups = self.group_rows(arrs, rows)
        if groups is None:
            return fn(*arrs)
        inverse, reps = groups
        out = fn(*(a[reps] if a.ndim == 1 and a.shape[0] == rows else a for a in arrs))

        def back(v):
            v = np.asarray(v)
            if v.ndim == 0 or (v.shape[0] == 1 and reps.size != 1):
                return v  # the same for every row: broadcasts as it would have
            if v.ndim == 1 and v.dtype.kind in "fiub" and v[0] == v[-1] and (v == v[0]).all():
                return np.broadcast_to(v[:1], (rows,))  # one value in every group: a read-only view, no gather
            return np.take(v, inverse, axis=0)  # (= v[inverse], faster)

        return tuple(back(v) for v in out) if isinstance(out, tuple) else back(out)


def _groups_of(code, radix, rows):
    if code is None:
        return np.zeros(rows, dtype=np.intp), np.zeros(1, dtype=np.intp)
    present = np.flatnonzero(np.bincount(code, minlength=radix))
    rep_of_code = np.empty(radix, dtype=np.intp)
    rep_of_code[code] = np.arange(code.shape[0])  # some row of each combination (all its rows are equal)
    if present.size == radix:
        return code, rep_of_code
    lut = np.zeros(radix, dtype=np.intp)
    lut[present] = np.arange(present.size)
    return np.take(lut, code), rep_of_code[present]


def group_rows(arrays, rows: int, max_groups: int):
    """Rows with equal values in every array of ``arrays`` (each broadcastable to ``(rows,)``).

    Returns ``(inverse, reps)``: the group of each row (``(rows,)`` integers) and one row of each group, or ``None``
    when there are more than ``max_groups`` groups.
    """
    return Distinct((max_groups + 0.5) / rows).group_rows([np.asarray(a) for a in arrays], rows)


def per_distinct(fn, arrays: list, *, max_frac: float = 0.25):
    """``fn(*arrays)`` evaluated once per distinct row of ``arrays`` and gathered back to every row.

    ``arrays`` are 0-d or 1-D (``(1,)`` or ``(rows,)``) numeric arrays; ``fn`` is elementwise and returns one array
    or a tuple of arrays broadcastable to ``(rows,)``. Falls back to ``fn(*arrays)`` for few rows or when more than
    ``max_frac`` of the rows are distinct.
    """
    return Distinct(max_frac)(fn, arrays)
