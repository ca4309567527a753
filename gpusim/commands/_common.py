"""Helpers shared by the CLI commands: database loading, JSON and table output."""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from typing import Any


class Parser(argparse.ArgumentParser):
    """argparse's parser whose usage errors are one line plus where to look (exit code 2)."""

    def error(self, message):
        self.exit(2, f"gpusim: error: {message} (see `{self.prog} --help`)\n")


def parse_flag(parse, text, flag: str):
    """Parse a human value (``units.parse_bytes``, ``parse_duration_s``, ``parse_count``) given to ``flag``;
    None stays None; a bad value is a ScenarioError naming the flag."""
    from gpusim.errors import ScenarioError

    if text is None:
        return None
    try:
        return parse(text)
    except ValueError as e:
        raise ScenarioError(f"{flag}: {e}") from None


def load_db(args):
    from gpusim.hwdb import load

    return load(getattr(args, "hwdb", None) or [])


def _jsonable(obj: Any):
    """One JSON conversion for the CLI and the API (``gpusim.results.jsonable``), so --json and to_dict() agree."""
    from gpusim.results import jsonable

    return jsonable(obj)


def print_json(obj: Any) -> None:
    """Print JSON; non-finite floats become null (JSON has no inf/NaN)."""
    json.dump(_jsonable(obj), sys.stdout, indent=2, allow_nan=False)
    sys.stdout.write("\n")


def range_text(record: dict | None, key: str, fmt) -> str | None:
    """``fmt(lo, hi)`` of a result's ``track_record[key]`` (the band's 80% range carried to one of the prediction's
    numbers), or None where the record carries no such range (no band, too few runs, a calibrated prediction)."""
    span = (record or {}).get(key)
    return fmt(*span) if span else None


def print_track_record(record: dict | None, *, here: str | None = None, anchor_hint: bool = False) -> None:
    """The "track record" line under a prediction (gpusim.track_record.report_line): how far gpusim's predictions of
    this kind were from published measurements, or why there is no such figure."""
    from gpusim.track_record import report_line

    print(f"track record: {report_line(record, here=here, anchor_hint=anchor_hint)}")


def print_table(rows: Sequence[Sequence[Any]], columns: Sequence[str], title: str | None = None,
                justify: Sequence[str] | None = None, caption: str | None = None) -> None:
    """A readable table with rich (imported only here, so other commands stay fast)."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title, caption=caption, show_lines=False, header_style="bold")
    for i, c in enumerate(columns):
        table.add_column(c, justify=(justify[i] if justify else "left"), overflow="fold")
    for r in rows:
        table.add_row(*["" if v is None else str(v) for v in r])
    Console(width=max(140, Console().width)).print(table)


def fmt(x: float | None, digits: int = 3) -> str:
    if x is None:
        return ""
    if isinstance(x, float) and not math.isfinite(x):
        return "inf"
    return f"{x:.{digits}g}"


def print_memory_record(record: dict | None, what: str = "this layout",
                        layouts: str = "a layout with more free memory", fit: dict | None = None,
                        where: str = "") -> None:
    """[stop 55] The "memory record" line under an LLM layout's memory (gpusim.track_record.memory_record): how far
    gpusim's memory figures were from the published runs' peaks, and the 80% range carried to ``what``'s memory
    against the GPU's capacity; nothing where the prediction is not an LLM layout. [stop 56] ``fit``
    (gpusim.track_record.memory_record_fit, searched ``where``): a second line naming the fastest layout whose top of
    that range fits."""
    if not record:
        return
    from gpusim.track_record import memory_fit_here, memory_here, report_line

    here = memory_here(record, what, headroom="more room (--memory-headroom)", layouts=layouts)
    print(f"memory record: {report_line(record, here=here)}")
    fit_text = memory_fit_here(fit, where)
    if fit_text:
        print(f"memory record: {fit_text}")
