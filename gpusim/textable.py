"""Plain-text tables for long listings (``gpusim hw list``): aligned columns, no box drawing, no wrapping.

rich's tables measure and wrap every cell; for the ~150 rows of ``hw list`` that took ~0.5 s of a 0.9 s start
(issue 20's cold-start target is 0.3 s). A listing needs aligned columns only: each column is as wide as its
widest cell, columns are two spaces apart, numbers are right-aligned, and the free-text column goes last so that
a long entry runs past the end of its line instead of wrapping the table.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

_NUMBER = re.compile(r"^[-+]?\d[\d,]*(\.\d+)?([eE][-+]?\d+)?$")


def _is_number(text: str) -> bool:
    return bool(_NUMBER.match(text))


def render(rows: Sequence[Sequence[Any]], columns: Sequence[str], title: str | None = None) -> str:
    """The table as text: an optional title line, the header, a rule of dashes, one line per row. A column
    whose every non-empty cell is a number is right-aligned. Cells are ``str()`` of the values (None is empty)."""
    cells = [["" if v is None else str(v) for v in r] for r in rows]
    n = len(columns)
    widths = [max([len(columns[i]), *(len(r[i]) for r in cells)]) for i in range(n)]
    right = [bool(cells) and all(_is_number(r[i]) for r in cells if r[i]) and any(r[i] for r in cells)
             for i in range(n)]

    def line(values: Sequence[str]) -> str:
        parts = [v.rjust(w) if rj else v.ljust(w) for v, w, rj in zip(values, widths, right)]
        return "  ".join(parts).rstrip()

    out = [title] if title else []
    out.append(line(list(columns)))
    out.append("  ".join("-" * w for w in widths))
    out.extend(line(r) for r in cells)
    return "\n".join(out)
