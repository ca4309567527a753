"""Read the output of NVIDIA's nccl-tests (``all_reduce_perf`` and friends) as collective measurements.

Many teams already have nccl-tests sweeps of their machines; ``gpusim fit`` accepts them next to (or
instead of) a ``gpusim calibrate`` profile. Two forms are read:

**Text** (what the binaries print). The parts used::

    # Collective test starting: all_reduce_perf                        (newer versions)
    # nThread 1 nGpus 1 minBytes 8 maxBytes 17179869184 step: 2(factor) warmup iters: 5 iters: 20 ...
    # Using devices
    #  Rank  0 Group  0 Pid  12345 on   node-01 device  0 [0000:18:00] NVIDIA H100 80GB HBM3
    #  ...
    #                                                 out-of-place                       in-place
    #       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
    #        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
            1024           256     float     sum      -1    16.94    0.06    0.11      0    16.17    0.06    0.11      0

Columns are located by the header's names, so older versions (no ``root`` column, ``error`` instead
of ``#wrong``) and per-iteration columns (``-P``) read the same way; the **out-of-place** time is used
(the first ``time`` column), as the calibration benchmarks also time out-of-place collectives.
The number of ranks is the number of ``#  Rank`` lines, the number of nodes the number of distinct
host names on them. Lines that are not part of the table (``NCCL INFO`` logs, warnings) are skipped.
Which collective ran comes from the ``Collective test starting`` line, else from a command line in the
file (``all_gather_perf -b 8 ...``), else from the file name (``all_reduce_perf.txt``,
``allgather-2nodes.log`` ...).

**JSON** (``-J FILE`` / ``--output_file``, nccl-tests 2.17+; ``src/util.cu``, ``JSON_FILE_VERSION 2``)::

    {"version": 2, "args": ["./build/all_reduce_perf", "-b", "8", ...], "nccl_version": 22703,
     "config": {"nthreads": 1, "ngpus": 1, ..., "devices": [{"rank": 0, "hostname": "node-01",
                "device_info": "NVIDIA H100 80GB HBM3", ...}, ...]},
     "results": [{"size": 1024, "count": 256, "type": "float", "redop": "sum", "root": "    -1",
                  "out_of_place": {"time": 16.94, "alg_bw": 0.06, "bus_bw": 0.11, "nwrong": 0.0},
                  "in_place": {...}}, ...]}

``devices`` has one entry per process (each process drives ``nthreads x ngpus`` GPUs), so ranks =
``len(devices) x nthreads x ngpus``; the collective comes from ``args[0]``.

Units as in nccl-tests (doc/PERFORMANCE.md): ``size`` in bytes (the whole array: all-reduce and
broadcast buffer, all-gather output, reduce-scatter input), time in microseconds, bandwidths in GB/s
(1e9 bytes/s); converted here to seconds and bytes/s.

References
----------
NVIDIA/nccl-tests, ``README.md``, ``doc/PERFORMANCE.md``, ``src/common.cu`` and ``src/util.cu``
(writeDeviceReport, writeResultHeader, writeBenchmarkLine*).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from gpusim import units
from gpusim.errors import CalibrationError

#: nccl-tests binary stem -> gpusim collective name (None: read but not usable by the model)
#: (an underscore in a stem also matches a hyphen or nothing: ``allreduce``, ``all-reduce``)
BINARIES: dict[str, str | None] = {
    "all_reduce": "all_reduce", "all_gather": "all_gather", "reduce_scatter": "reduce_scatter",
    "broadcast": "broadcast", "bcast": "broadcast", "reduce": "reduce", "sendrecv": "send_recv",
    "alltoall": "all_to_all", "gather": None, "scatter": None, "hypercube": None,
}
#: the collectives the fit uses (gpusim.model.comm has bus factors and ring steps for them)
USABLE = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "send_recv")

_RANK_LINE = re.compile(r"^#\s*Rank\s+(?P<rank>\d+)\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+(?P<host>\S+)\s+"
                        r"device\s+\d+\s+\[[^\]]*\]\s*(?P<name>.*?)\s*$")
_STARTING = re.compile(r"Collective test starting:\s*(\S+)")
_BINARY_IN_TEXT = re.compile(r"([a-z_]+)_perf(?:_mpi)?\b")
_INT = re.compile(r"^\d+$")


@dataclass(frozen=True)
class NcclRow:
    """One size of a sweep (out-of-place columns), SI units."""

    size_bytes: float
    count: int
    dtype: str
    redop: str
    time_s: float
    algbw_bytes_per_s: float
    busbw_bytes_per_s: float
    wrong: float | None


@dataclass
class NcclTestsRun:
    """One table of one nccl-tests binary."""

    source: str
    collective: str | None  # gpusim name; None for tests the model has no formula for (alltoall ...)
    binary: str
    n_ranks: int
    hosts: list[str]
    device_names: list[str]
    rows: list[NcclRow] = field(default_factory=list)
    nccl_version: str | None = None
    warnings: list[str] = field(default_factory=list)
    gpus_per_thread: int = 1  # the header's "nGpus" (-g): GPUs one thread drives

    @property
    def n_nodes(self) -> int:
        return max(1, len(set(self.hosts)))

    @property
    def level(self) -> str:
        """``intra-node`` (one host), ``inter-node`` (one rank per host) or ``global`` (both)."""
        if self.n_nodes <= 1:
            return "intra-node"
        return "inter-node" if self.n_ranks == self.n_nodes else "global"


def _collective_from(name: str) -> tuple[str | None, str] | None:
    """(gpusim collective, binary stem) from a binary or file name, or None when it names none."""
    low = Path(name).name.lower()
    low = re.sub(r"\.(txt|log|out|json)$", "", low)
    # the longest stems first, so "all_reduce" wins over "reduce"
    for stem in sorted(BINARIES, key=len, reverse=True):
        pat = stem.replace("_", "[_-]?")
        if re.search(rf"(^|[^a-z]){pat}([^a-z]|$)", low):
            return BINARIES[stem], stem
    return None


def looks_like_nccl_tests(path: str | Path) -> bool:
    """True when the file looks like nccl-tests output (text table or ``-J`` JSON)."""
    p = Path(path)
    try:
        head = p.read_text(errors="replace")[:200_000]
    except OSError:
        return False
    s = head.lstrip()
    if s.startswith("{"):
        return '"results"' in head and ('"bus_bw"' in head or '"busbw"' in head or '"oop_busbw"' in head)
    return bool(re.search(r"^#\s+size\s+count\s+type", head, re.MULTILINE)) or "# Using devices" in head


def parse_file(path: str | Path) -> list[NcclTestsRun]:
    """Parse one nccl-tests output file (text or JSON). Raises CalibrationError with the file name."""
    from gpusim.checks import read_text
    from gpusim.errors import GpusimError

    p = Path(path)
    try:
        text = read_text(p, "nccl-tests output")
    except GpusimError as e:
        raise CalibrationError(str(e)) from None
    return parse_any(text, str(p))


def parse_any(text: str, source: str = "<text>") -> list[NcclTestsRun]:
    """Parse nccl-tests output given as text: a ``-J`` JSON document or the text tables."""
    if text.lstrip().startswith("{"):
        return [parse_json(text, source)]
    return parse_text(text, source)


# ---- text ---------------------------------------------------------------------------------------
def _header_columns(line: str) -> list[str] | None:
    toks = line.lstrip("#").split()
    if len(toks) >= 6 and toks[0] == "size" and toks[1] == "count" and "time" in toks[2:] + ["cputime"]:
        return toks
    if len(toks) >= 6 and toks[0] == "size" and toks[1] == "count" and "cputime" in toks:
        return ["time" if t == "cputime" else t for t in toks]
    return None


def _num(tok: str) -> float | None:
    try:
        v = float(tok)
    except ValueError:
        return None
    return v if math.isfinite(v) else None


def parse_text(text: str, source: str = "<text>") -> list[NcclTestsRun]:
    """Parse nccl-tests text output; one :class:`NcclTestsRun` per results table."""
    lines = [ln.rstrip("\n") for ln in text.splitlines()]
    runs: list[NcclTestsRun] = []
    binary_hint: tuple[str | None, str] | None = None
    ranks: dict[int, tuple[str, str]] = {}
    cols: list[str] | None = None
    cur: NcclTestsRun | None = None
    nccl_version = None
    gpus_per_thread = 1
    file_hint = _collective_from(source)

    def finish():
        nonlocal cur
        if cur is not None and cur.rows:
            runs.append(cur)
        cur = None

    for ln in lines:
        s = ln.strip()
        if not s:
            continue
        m = _STARTING.search(s)
        if m:
            finish()
            binary_hint = _collective_from(m.group(1))
            ranks = {}
            continue
        if s.startswith("# nThread"):
            finish()
            ranks = {}
            mg = re.search(r"nGpus\s+(\d+)", s)
            gpus_per_thread = max(1, int(mg.group(1))) if mg else 1
            continue
        mv = re.search(r"nccl-library=(\d+)|NCCL version (\S+)", s)
        if mv:
            nccl_version = mv.group(1) or mv.group(2)
        mr = _RANK_LINE.match(s)
        if mr:
            ranks[int(mr.group("rank"))] = (mr.group("host"), mr.group("name"))
            continue
        if s.startswith("#"):
            hc = _header_columns(s)
            if hc is not None:
                finish()
                cols = hc
                hint = binary_hint or _binary_in(lines) or file_hint
                if hint is None:
                    raise CalibrationError(
                        f"{source}: cannot tell which nccl-tests binary wrote this table (no 'Collective test "
                        f"starting' line, no command line, and the file name names none); name the file after "
                        f"the test, e.g. all_reduce_perf.txt")
                coll, stem = hint
                hosts = [h for _, (h, _) in sorted(ranks.items())]
                names = [d for _, (_, d) in sorted(ranks.items())]
                cur = NcclTestsRun(source=source, collective=coll, binary=f"{stem}_perf", n_ranks=len(ranks),
                                   hosts=hosts, device_names=names, nccl_version=nccl_version,
                                   gpus_per_thread=gpus_per_thread)
                if not ranks:
                    cur.warnings.append(f"{source}: no '#  Rank ... device' lines before the table: the number of "
                                        f"ranks is unknown")
            continue
        if cur is None or cols is None:
            continue
        toks = s.split()
        if len(toks) < 6 or not (_INT.match(toks[0]) and _INT.match(toks[1])):
            continue  # a log line in the middle of the table
        row = _row_from_tokens(toks, cols)
        if row is not None:
            cur.rows.append(row)
    finish()
    if not runs:
        raise CalibrationError(f"{source}: no nccl-tests results table found (expected a '#  size  count  type ...' "
                               f"header followed by rows)")
    return runs


def _binary_in(lines: list[str]) -> tuple[str | None, str] | None:
    for ln in lines:
        m = _BINARY_IN_TEXT.search(ln)
        if m:
            hit = _collective_from(m.group(1))
            if hit is not None:
                return hit
    return None


def _row_from_tokens(toks: list[str], cols: list[str]) -> NcclRow | None:
    # the header names every column; rows may carry extra trailing columns (timestamps)
    if len(toks) < len(cols) - 1:
        return None
    idx = {}
    for i, c in enumerate(cols):
        idx.setdefault(c, i)  # first occurrence = out-of-place
    try:
        size = float(toks[idx["size"]])
        count = int(toks[idx["count"]])
        t_us = _num(toks[idx["time"]])
        algbw = _num(toks[idx["algbw"]]) if "algbw" in idx else None
        busbw = _num(toks[idx["busbw"]]) if "busbw" in idx else None
    except (KeyError, IndexError, ValueError):
        return None
    if t_us is None or t_us <= 0 or size <= 0:
        return None
    wrong_col = idx.get("#wrong", idx.get("error"))
    wrong = _num(toks[wrong_col]) if wrong_col is not None and wrong_col < len(toks) else None
    time_s = t_us * units.US
    return NcclRow(size_bytes=size, count=count, dtype=toks[idx["type"]] if "type" in idx else "?",
                   redop=toks[idx["redop"]] if "redop" in idx else "?", time_s=time_s,
                   algbw_bytes_per_s=(algbw * units.GB) if algbw is not None else size / time_s,
                   busbw_bytes_per_s=(busbw * units.GB) if busbw is not None else math.nan, wrong=wrong)


# ---- JSON ---------------------------------------------------------------------------------------
def parse_json(text: str, source: str = "<json>") -> NcclTestsRun:
    """Parse nccl-tests ``-J`` JSON output (version 2 of its format)."""
    from gpusim.checks import finite_or_none, loads_json
    from gpusim.errors import GpusimError

    try:  # nccl-tests writes nan for a failed measurement: such rows are skipped below
        doc = loads_json(text, source, allow_nan=True)
    except GpusimError as e:
        raise CalibrationError(str(e)) from None
    if not isinstance(doc, dict) or not isinstance(doc.get("results"), list):
        raise CalibrationError(f"{source}: not nccl-tests JSON output (no 'results' list)")
    args = doc.get("args") or []
    hint = (_collective_from(str(args[0])) if args else None) or _collective_from(source)
    if hint is None:
        names = {str(r.get("experiment_name")) for r in doc["results"] if isinstance(r, dict)}
        for n in names:
            hint = _collective_from(re.sub(r"(?<=[a-z])(?=[A-Z])", "_", n))
            if hint:
                break
    if hint is None:
        raise CalibrationError(f"{source}: cannot tell which nccl-tests binary wrote this file ('args' is missing); "
                               f"name the file after the test, e.g. all_reduce_perf.json")
    coll, stem = hint
    cfg = doc.get("config") or {}
    devices = [d for d in (cfg.get("devices") or []) if isinstance(d, dict)]
    per_proc = int(min(4096, finite_or_none(cfg.get("nthreads", 1)) or 1)) * int(
        min(4096, finite_or_none(cfg.get("ngpus", 1)) or 1))
    n_ranks = len(devices) * per_proc
    hosts = [str(d.get("hostname", "?")) for d in devices for _ in range(per_proc)]
    names = [str(d.get("device_info", "")).strip() for d in devices for _ in range(per_proc)]
    run = NcclTestsRun(source=source, collective=coll, binary=f"{stem}_perf", n_ranks=n_ranks, hosts=hosts,
                       device_names=names, nccl_version=str(doc["nccl_version"]) if "nccl_version" in doc else None)
    if not devices:
        run.warnings.append(f"{source}: no config.devices: the number of ranks is unknown")
    for r in doc["results"]:
        if not isinstance(r, dict):
            continue
        oop = r.get("out_of_place") or r.get("in_place")
        if not isinstance(oop, dict):
            continue
        size = finite_or_none(r.get("size"))
        t_us = finite_or_none(oop.get("time", oop.get("cpu_time")))
        if size is None or t_us is None or not (size > 0 and t_us > 0):
            continue
        alg = finite_or_none(oop.get("alg_bw"))
        bus = finite_or_none(oop.get("bus_bw"))
        wrong = finite_or_none(oop.get("nwrong"))
        run.rows.append(NcclRow(
            size_bytes=size, count=int(finite_or_none(r.get("count")) or 0), dtype=str(r.get("type", "?")),
            redop=str(r.get("redop", "?")), time_s=t_us * units.US,
            algbw_bytes_per_s=alg * units.GB if alg is not None else size / (t_us * units.US),
            busbw_bytes_per_s=bus * units.GB if bus is not None else math.nan,
            wrong=wrong))
    if not run.rows:
        raise CalibrationError(f"{source}: the nccl-tests JSON has no usable results")
    return run
