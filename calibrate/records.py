"""Writing a profile: JSON-lines records (append, flush, fsync each point), meta.json (atomic), and the
per-rank progress and error files the launcher reads to say which rank failed and where.

Only global rank 0 writes ``records.jsonl`` and ``meta.json``; every rank writes its own
``ranks/rank-NNNNN.json``. The format is defined, and validated before anything is written, by
:mod:`gpusim.profile`.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
import time
from pathlib import Path
from typing import Any

from gpusim.fsutil import atomic_write_text
from gpusim.profile import (FORMAT, META_FILE, RANKS_DIR, RECORDS_FILE, SCHEMA_VERSION, done_points,
                            parse_record, read_records)


def utc_now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


def _clean(obj: Any) -> Any:
    """JSON has no inf/NaN: they become None (the schema then rejects them where a number is required)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    return obj


def atomic_write_json(path: str | os.PathLike, obj: Any) -> None:
    """Write JSON atomically (temp file, fsync, rename): readers see the old file or the new one."""
    atomic_write_text(path, json.dumps(_clean(obj), indent=1, allow_nan=False) + "\n")


class RecordWriter:
    """Appends records to ``records.jsonl``: each call validates its records, writes them in one
    ``write``, flushes and fsyncs, so a killed run keeps every point it finished."""

    def __init__(self, out_dir: str | os.PathLike):
        self.path = Path(out_dir) / RECORDS_FILE
        self.count = 0

    def prepare(self) -> tuple[list[dict], set[str], list[str]]:
        """Existing records, the points complete in them, and warnings. A partial last line (a run
        killed while writing) is cut off so appending starts on a clean line."""
        records, warnings, good_end = read_records(self.path)
        if self.path.exists() and self.path.stat().st_size > good_end:
            with open(self.path, "r+b") as f:
                f.truncate(good_end)
                f.flush()
                os.fsync(f.fileno())
        return records, done_points(records), warnings

    def write(self, records: list[dict]) -> None:
        lines = []
        for r in records:
            r = _clean(r)
            parse_record(r, where=f"record {r.get('key')!r}")  # never write what the fit cannot read
            lines.append(json.dumps(r, allow_nan=False, separators=(",", ":")))
        data = ("\n".join(lines) + "\n").encode()
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            view = memoryview(data)
            while view:
                n = os.write(fd, view)
                view = view[n:]
            os.fsync(fd)
        finally:
            os.close(fd)
        self.count += len(records)


class MetaStore:
    """``meta.json``: the runs that wrote the profile. Rewritten atomically on every change."""

    def __init__(self, out_dir: str | os.PathLike):
        self.path = Path(out_dir) / META_FILE
        self.data: dict | None = None

    def load_or_new(self) -> dict:
        if self.path.exists():
            self.data = json.loads(self.path.read_text())
        else:
            self.data = {"format": FORMAT, "schema_version": SCHEMA_VERSION, "created_utc": utc_now(), "runs": []}
        return self.data

    def start_run(self, run: dict) -> None:
        assert self.data is not None
        self.data["runs"].append(run)
        self.save()

    def update_run(self, **fields: Any) -> None:
        assert self.data is not None and self.data["runs"]
        self.data["runs"][-1].update(fields)
        self.save()

    def save(self) -> None:
        atomic_write_json(self.path, self.data)


class RankFiles:
    """``ranks/rank-NNNNN.json``: where this rank is (updated at each point) and how it ended."""

    def __init__(self, out_dir: str | os.PathLike, rank: int, host: str):
        self.path = Path(out_dir) / RANKS_DIR / f"rank-{rank:05d}.json"
        self.state = {"rank": rank, "host": host, "pid": os.getpid(), "state": "starting", "bench": None,
                      "point": None, "started_utc": utc_now(), "t_unix": time.time(), "error": None,
                      "error_kind": None, "failed_ranks": None}
        self._write()

    def _write(self) -> None:
        try:
            atomic_write_json(self.path, self.state)
        except OSError:  # diagnostics must never end a run
            pass

    def progress(self, bench: str, point: str) -> None:
        self.state.update(state="running", bench=bench, point=point, t_unix=time.time())
        self._write()

    def done(self) -> None:
        self.state.update(state="done", t_unix=time.time())
        self._write()

    def error(self, message: str, kind: str, failed_ranks: list[int] | None = None) -> None:
        self.state.update(state="error", error=message, error_kind=kind, failed_ranks=failed_ranks,
                          t_unix=time.time())
        self._write()
