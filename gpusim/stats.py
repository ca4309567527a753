"""Small statistics shared by the validation reports and the track record (no gpusim imports: any module may use it)."""

from __future__ import annotations

import math


def quantile(xs, q: float, *, empty=math.nan):
    """The ``q`` quantile of ``xs``, linearly interpolated between order statistics (numpy's default method);
    ``empty`` where there are no values. Hand-worked: ``quantile([1, 2, 3, 4], 0.9)`` = 3 + 0.7 x (4 - 3) = 3.7."""
    s = sorted(float(x) for x in xs)
    if not s:
        return empty
    pos = q * (len(s) - 1)
    lo = int(math.floor(pos))
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)
