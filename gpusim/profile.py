"""The calibration profile: what ``gpusim calibrate`` writes and ``gpusim fit`` reads.

A profile is a directory::

    meta.json        the runs that wrote it (arguments, environment capture, status), written atomically
    records.jsonl    one JSON object per line, appended and fsync'ed as each measurement finishes
    ranks/           per-rank progress and error files of the last run (diagnostics only)
    launcher.log     what torchrun and the workers printed (diagnostics only)

Every record has the common fields of :class:`_Record` (``bench`` names its kind), and a timed record
adds :class:`_Timed` (median time, spread, noise flag). The kinds and their own fields:

================  ==========================================================================================
``gemm``          :class:`GemmRecord`: C = A·B with A m×k, B k×n; ``flop`` = 2·m·n·k; per rank
``memory``        :class:`MemoryRecord`: device copies and host<->device copies; per rank
``collective``    :class:`CollectiveRecord`: all_reduce / reduce_scatter / all_gather / broadcast, nccl-tests
                  conventions for ``bytes``, ``algbw_bytes_per_s`` and ``busbw_bytes_per_s``
``p2p``           :class:`P2PRecord`: one-way send bandwidth between two ranks of a node
``ddp_step``      :class:`DdpStepRecord`: a training step of a reference workload, with the workload's
                  description so an analytical model can predict it without torch
``dataloader``    :class:`DataloaderRecord`: samples/s a ``torch.utils.data.DataLoader`` supplies
``skipped``       :class:`SkippedRecord`: a measurement that does not apply here, and why
================  ==========================================================================================

Conventions (DESIGN.md section 4): SI base units with the unit in the name; ``time_s`` is the median of
``reps`` timed repetitions (each rep times ``inner_iters`` back-to-back calls and divides, as nccl-tests
does); for measurements that involve several ranks it is the *slowest rank's* median. Spread:
``time_s_min``, ``time_s_p10``, ``time_s_p90``, ``time_s_max`` and ``rel_spread = (p90 - p10) / median``.
``noisy`` is True when the spread is high, too few repetitions ran, or the GPU throttled (thermal or
hardware slowdown) while measuring; ``noisy_reason`` says which. A fit should drop or down-weight noisy
records, never silently use them.

``world_size`` in every record is the number of processes of the calibration job; ``n_ranks`` is the
number that took part in the measured operation (a collective's group, a DDP group).

Collective sizes follow nccl-tests (doc/PERFORMANCE.md, NVIDIA/nccl-tests): ``bytes`` (S) is the size of
the whole array, i.e. for all_reduce and broadcast the buffer on each rank, for reduce_scatter the
*input* of each rank (n × the output), for all_gather the *output* of each rank (n × the input).
``algbw_bytes_per_s = bytes / time_s`` and ``busbw_bytes_per_s = algbw · factor`` with factor
all_reduce 2(n-1)/n, reduce_scatter and all_gather (n-1)/n, broadcast 1.

Reading: :func:`load_profile` validates everything, tolerates a truncated last line (a run killed while
writing), and raises :class:`gpusim.errors.CalibrationError` naming the file and line for anything else.
No torch import here: the fit runs without torch.
"""

from __future__ import annotations

import json
import math
import os
from collections import Counter
from pathlib import Path
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, field_validator

from gpusim.errors import CalibrationError

SCHEMA_VERSION = 1
FORMAT = "gpusim-profile"
META_FILE = "meta.json"
RECORDS_FILE = "records.jsonl"
RANKS_DIR = "ranks"
LOG_FILE = "launcher.log"

Precision = Literal["fp32", "tf32", "bf16", "fp16", "fp8"]
MemoryKind = Literal["device_copy", "h2d_pinned", "h2d_pageable", "d2h_pinned", "d2h_pageable"]
Collective = Literal["all_reduce", "reduce_scatter", "all_gather", "broadcast"]
Level = Literal["intra-node", "inter-node", "global"]
BenchKind = Literal["gemm", "memory", "collective", "p2p", "ddp_step", "dataloader", "skipped"]

#: nccl-tests bus-bandwidth factors (doc/PERFORMANCE.md, "Summary"), as functions of n ranks.
BUSBW_FACTOR = {
    "all_reduce": lambda n: 2.0 * (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
}


def _finite_positive(v: float | None) -> float | None:
    if v is not None and not (math.isfinite(v) and v > 0):
        raise ValueError(f"must be finite and > 0 (got {v})")
    return v


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _Record(_Model):
    """Fields of every record."""

    bench: BenchKind
    key: str = Field(description="unique id of this record in the profile")
    point: str = Field(description="id of the measurement point; --resume skips points already complete")
    point_n: int = Field(ge=1, description="how many records the point wrote (all ranks' records of one point)")
    run_id: str = Field(description="the run in meta.json that measured it")
    world_size: int = Field(ge=1, description="processes in the calibration job")
    host: str = Field(description="host name of the (first) rank that measured it")
    rank: int | None = Field(default=None, ge=0, description="the rank, for per-rank measurements")
    ranks: list[int] | None = Field(default=None, description="the ranks that took part, for group measurements")
    device: Literal["cpu", "cuda"] = Field(description="where the measured work ran")
    device_name: str = Field(description="GPU name (torch) or CPU model")
    t_unix: float = Field(description="when the record was written (seconds since the epoch)")


class _Timed(_Record):
    """Fields of every timed record."""

    time_s: float = Field(description="median time of one operation (slowest rank's median for group ops)")
    time_s_min: float
    time_s_p10: float
    time_s_p90: float
    time_s_max: float
    rel_spread: float = Field(ge=0, description="(p90 - p10) / median")
    reps: int = Field(ge=1, description="timed repetitions")
    inner_iters: int = Field(ge=1, description="back-to-back operations per repetition (time is per operation)")
    warmup: int = Field(ge=0, description="untimed operations before timing")
    noisy: bool
    noisy_reason: str | None = None
    throttle_reasons: list[str] = Field(default_factory=list,
                                        description="NVML clock-event reasons seen while measuring (GPU only)")
    runqueue_wait_frac: float | None = Field(
        default=None, ge=0,
        description="share of the timing window the measuring rank's threads spent runnable but waiting for a CPU "
                    "(Linux schedstat; can exceed 1 with several threads): more runnable threads than cores, the "
                    "job's own communication threads or another process (None where not measured)")

    @field_validator("time_s", "time_s_min", "time_s_p10", "time_s_p90", "time_s_max")
    @classmethod
    def _positive_time(cls, v: float) -> float:
        return _finite_positive(v)


class GemmRecord(_Timed):
    """Matrix multiply C[m,n] = A[m,k] · B[k,n], inputs random. ``flop = 2·m·n·k``.

    ``precision``: fp32 (TF32 off), tf32 (fp32 tensors, TF32 tensor cores allowed), bf16, fp16, fp8
    (e4m3 inputs through ``torch._scaled_mm``, bf16 output). All ranks measure at the same time (as
    in training), one record per rank; ``concurrent_ranks`` says how many ran together.
    """

    bench: Literal["gemm"] = "gemm"
    m: int = Field(ge=1)
    n: int = Field(ge=1)
    k: int = Field(ge=1)
    precision: Precision
    dtype: str = Field(description="torch dtype of the inputs")
    flop: float = Field(gt=0)
    flop_per_s: float = Field(gt=0)
    concurrent_ranks: int = Field(ge=1)


class MemoryRecord(_Timed):
    """A copy of ``bytes`` bytes. ``bytes_per_s = bytes / time_s``.

    ``device_copy``: device to device on one GPU (on CPU: a memcpy of a large tensor);
    ``traffic_bytes`` counts device-memory bytes read plus written (2 × ``bytes`` for device_copy,
    ``bytes`` for host<->device), so ``traffic_bytes / time_s`` compares with an HBM datasheet figure.
    h2d/d2h: host to device / device to host, from pinned (page-locked) or pageable host memory.
    """

    bench: Literal["memory"] = "memory"
    kind: MemoryKind
    bytes: int = Field(gt=0)
    bytes_per_s: float = Field(gt=0)
    traffic_bytes: int = Field(gt=0)
    concurrent_ranks: int = Field(ge=1)


class CollectiveRecord(_Timed):
    """One collective over a group of ``n_ranks`` ranks (see the module docstring for ``bytes``).

    ``level``: ``intra-node`` (all ranks of a node, or the first ``n_ranks`` of node 0), ``inter-node``
    (one rank per node, same local rank), ``global`` (all ranks, when there are several nodes; on one
    node the whole job is recorded as ``intra-node``). ``concurrent_groups`` groups ran at once (e.g.
    every node's intra-node group; one inter-node group per local rank); ``ranks`` is the first group.
    ``time_s`` is the slowest participating rank's median; ``rank_time_s`` every participant's median.
    """

    bench: Literal["collective"] = "collective"
    collective: Collective
    bytes: int = Field(gt=0)
    dtype: str
    n_ranks: int = Field(ge=2)
    n_nodes: int = Field(ge=1, description="nodes spanned by one group")
    level: Level
    concurrent_groups: int = Field(ge=1)
    algbw_bytes_per_s: float = Field(gt=0)
    busbw_bytes_per_s: float = Field(gt=0)
    busbw_factor: float = Field(gt=0)
    correct: bool
    rank_time_s: list[float]
    slowest_rank: int = Field(ge=0)
    backend: str


class P2PRecord(_Timed):
    """``src`` sends ``bytes`` to ``dst`` repeatedly (one direction); ``bytes_per_s = bytes / time_s``.

    Pairs are ranks of one node; ``path`` is the ``nvidia-smi topo -m`` class between their GPUs
    (``NV12``, ``PIX``, ``SYS`` ...) when known, else None (e.g. CPU processes).
    ``concurrent_pairs``: the same local pair measured on every node at once.
    """

    bench: Literal["p2p"] = "p2p"
    src: int = Field(ge=0)
    dst: int = Field(ge=0)
    bytes: int = Field(gt=0)
    bytes_per_s: float = Field(gt=0)
    path: str | None = None
    concurrent_pairs: int = Field(ge=1)
    backend: str


class DdpStepRecord(_Timed):
    """One training step (zero_grad, forward, loss, backward, optimizer step) of a reference workload.

    ``n_ranks`` ranks train together under ``DistributedDataParallel`` (``ddp_wrapped``); ``sync`` is
    False for steps inside ``no_sync()`` (no gradient all-reduce: compute plus DDP bookkeeping only)
    and for the unwrapped single-rank steps (nothing to synchronise).
    ``n_ranks == 1`` records are the plain module, not wrapped, on every rank at once
    (``concurrent_ranks``): the compute-only baseline. So: compute = T(n=1); DDP overhead without
    communication = T(sync=False) - T(n=1); exposed communication = T(sync=True) - T(sync=False).

    The workload description lets a model predict the step without torch:
    ``params``; ``grad_bytes`` (gradients all-reduced per step); ``fwd_flop_per_sample`` and
    ``train_flop_per_sample`` (forward, and forward+backward, counted by
    ``torch.utils.flop_counter.FlopCounterMode``, attention counted through the math SDPA path);
    ``act_bytes_per_sample`` (tensors saved for backward, parameters excluded); ``fwd_kernels``
    (aten operators dispatched in one forward that are not views) and ``fwd_ops`` (all of them);
    ``bucket_cap_mb`` (DDP's bucket size, MiB), ``optimizer``, ``precision`` (fp32 or amp_bf16/amp_fp16),
    ``param_dtype``.
    """

    bench: Literal["ddp_step"] = "ddp_step"
    workload: str
    workload_desc: str
    per_rank_batch: int = Field(ge=1)
    n_ranks: int = Field(ge=1)
    n_nodes: int = Field(ge=1)
    sync: bool
    ddp_wrapped: bool
    concurrent_ranks: int = Field(ge=1)
    samples_per_s: float = Field(gt=0, description="n_ranks × per_rank_batch / time_s")
    params: int = Field(gt=0)
    grad_bytes: int = Field(gt=0)
    fwd_flop_per_sample: float = Field(gt=0)
    train_flop_per_sample: float = Field(gt=0)
    act_bytes_per_sample: float = Field(ge=0)
    fwd_kernels: int = Field(ge=1)
    fwd_ops: int = Field(ge=1)
    bucket_cap_mb: float = Field(gt=0)
    optimizer: str
    precision: str
    param_dtype: str
    rank_time_s: list[float]
    backend: str


class DataloaderRecord(_Timed):
    """A ``DataLoader`` over a synthetic dataset; ``time_s`` is the median time per batch in steady state.

    Each sample is a float32 tensor of ``sample_bytes`` made with a fixed amount of CPU work that takes
    ``sample_cost_s`` in the main process alone (the synthetic decode/augment cost). ``samples_per_s``
    is the steady-state rate (after the first batches) of this rank; every rank ran its own loader at
    the same time (``concurrent_ranks``), as in training. ``startup_s``: time to the first batch
    (worker start-up). ``to_device``: batches were also copied to the GPU (non_blocking when pinned).
    """

    bench: Literal["dataloader"] = "dataloader"
    workers: int = Field(ge=0)
    pin_memory: bool
    batch: int = Field(ge=1)
    n_batches: int = Field(ge=1)
    samples_per_s: float = Field(gt=0)
    sample_bytes: int = Field(gt=0)
    sample_cost_s: float = Field(gt=0)
    startup_s: float = Field(ge=0)
    to_device: bool
    concurrent_ranks: int = Field(ge=1)
    cpu_cores_per_rank: float = Field(gt=0)


class SkippedRecord(_Record):
    """A measurement that does not apply here (fp8 on a GPU without it, host<->device copies on CPU ...)."""

    bench: Literal["skipped"] = "skipped"
    of_bench: str
    params: dict[str, Any]
    reason: str


Record = Annotated[
    Union[GemmRecord, MemoryRecord, CollectiveRecord, P2PRecord, DdpStepRecord, DataloaderRecord, SkippedRecord],
    Field(discriminator="bench"),
]
_RECORD = TypeAdapter(Record)

RECORD_TYPES: dict[str, type[_Record]] = {
    "gemm": GemmRecord, "memory": MemoryRecord, "collective": CollectiveRecord, "p2p": P2PRecord,
    "ddp_step": DdpStepRecord, "dataloader": DataloaderRecord, "skipped": SkippedRecord,
}


# ---- meta ---------------------------------------------------------------------------------------
class _Loose(BaseModel):
    """Environment capture: known fields typed, anything else kept (drivers and tools vary)."""

    model_config = ConfigDict(extra="allow", frozen=True)


class GpuEnv(_Loose):
    index: int
    name: str
    memory_total_bytes: int | None = None
    compute_capability: str | None = None
    multiprocessors: int | None = None
    pci_bus_id: str | None = None
    nvml_index: int | None = None
    uuid: str | None = None
    clocks_sm_mhz: int | None = None
    clocks_mem_mhz: int | None = None
    clocks_sm_max_mhz: int | None = None
    clocks_mem_max_mhz: int | None = None
    temperature_c: float | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    throttle_reasons: list[str] = Field(default_factory=list)
    pcie_generation: int | None = None
    pcie_width: int | None = None


def nccl_p2p_disabled(nccl_env: dict | None) -> bool:
    """[issue 18] Whether NCCL's peer-to-peer transport is off in a node's NCCL_* variables: NCCL_P2P_DISABLE set to a
    non-zero value (NCCL documentation, Environment Variables: "Define and set to 1 to disable direct GPU-to-GPU (P2P)
    communication"; it disables NVLink as well as PCIe peer access)."""
    v = (nccl_env or {}).get("NCCL_P2P_DISABLE")
    return v is not None and str(v).strip() not in ("", "0")


class NodeEnv(_Loose):
    """One machine of the job."""

    host: str
    node_rank: int
    ranks: list[int]
    date_utc: str
    os: str | None = None
    python: str | None = None
    torch: str | None = None
    cuda: str | None = None
    nccl: str | None = None
    cudnn: str | None = None
    driver: str | None = None
    cpu_model: str | None = None
    cpu_sockets: int | None = None
    cpu_cores: int | None = Field(default=None, description="physical cores, all sockets")
    cpu_threads: int | None = Field(default=None, description="logical CPUs")
    cpu_capability: str | None = None
    ram_bytes: int | None = None
    torch_threads: int | None = None
    gpus: list[GpuEnv] = Field(default_factory=list)
    nvml: bool = False
    topo_text: str | None = Field(default=None, description="`nvidia-smi topo -m` as printed")
    topo_p2p_text: str | None = Field(default=None, description="`nvidia-smi topo -p2p r` as printed")
    topology: dict[str, Any] | None = Field(default=None, description="gpusim.topology summary of topo_text")
    topology_warnings: list[str] = Field(default_factory=list)
    nccl_env: dict[str, str] = Field(default_factory=dict, description="[issue 18] the NCCL_* environment variables "
                                                                       "set on the node when it was measured")


class RankEnv(_Loose):
    rank: int
    local_rank: int
    node_rank: int
    host: str
    pid: int
    device: str
    device_name: str | None = Field(default=None, description="GPU name (torch) or CPU model")
    gpu_index: int | None = Field(default=None, description="torch CUDA device index")
    nvml_index: int | None = Field(default=None, description="nvidia-smi index (topo matrix)")


class RunMeta(_Model):
    """One invocation of the benchmarks (a resumed profile has several)."""

    run_id: str
    started_utc: str
    finished_utc: str | None = None
    status: Literal["running", "complete", "failed"]
    error: str | None = None
    argv: list[str]
    args: dict[str, Any]
    quick: bool
    benches: list[str]
    backend: str
    device: Literal["cpu", "cuda"]
    world_size: int = Field(ge=1)
    n_nodes: int = Field(ge=1)
    local_world_size: int = Field(ge=1)
    timeout_s: float = Field(gt=0)
    gpusim_version: str
    nodes: list[NodeEnv]
    ranks: list[RankEnv]
    records_written: int = Field(default=0, ge=0)


class ProfileMeta(_Model):
    format: Literal["gpusim-profile"] = FORMAT
    schema_version: int
    created_utc: str
    runs: list[RunMeta]


class Profile(BaseModel):
    """A loaded profile: ``meta``, ``records`` (validated, in file order) and ``warnings``."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    path: Path
    meta: ProfileMeta
    records: list[Record]
    warnings: list[str] = Field(default_factory=list)

    @property
    def complete(self) -> bool:
        """True when the last run finished (not killed, not failed)."""
        return bool(self.meta.runs) and self.meta.runs[-1].status == "complete"

    def of(self, bench: str) -> list:
        """Records of one kind, e.g. ``profile.of("collective")``."""
        if bench not in RECORD_TYPES:
            raise CalibrationError(f"unknown record kind {bench!r}; kinds: {', '.join(RECORD_TYPES)}")
        return [r for r in self.records if r.bench == bench]

    def counts(self) -> dict[str, int]:
        return dict(Counter(r.bench for r in self.records))

    def run(self, run_id: str) -> RunMeta:
        for r in self.meta.runs:
            if r.run_id == run_id:
                return r
        raise KeyError(run_id)

    def table(self, bench: str) -> list[dict]:
        """Records of one kind as plain dicts (``pandas.DataFrame(profile.table("gemm"))``)."""
        return [r.model_dump() for r in self.of(bench)]


def parse_record(obj: dict, where: str = "record") -> _Record:
    """Validate one record dict; raises CalibrationError naming ``where`` and every bad field."""
    try:
        return _RECORD.validate_python(obj)
    except ValidationError as e:
        raise CalibrationError(f"{where}: invalid record: {_fmt_errors(e)}") from None


def _fmt_errors(e: ValidationError) -> str:
    parts = []
    for err in e.errors()[:8]:
        loc = ".".join(str(x) for x in err["loc"])
        inp = err.get("input")
        got = "" if isinstance(inp, dict) else f" (got {inp!r})"
        parts.append(f"{loc}: {err['msg']}{got}")
    more = f" (+{len(e.errors()) - 8} more)" if len(e.errors()) > 8 else ""
    return "; ".join(parts) + more


def read_records(path: str | os.PathLike) -> tuple[list[dict], list[str], int]:
    """Read a records file as dicts.

    Returns (records, warnings, good_end) where ``good_end`` is the byte offset just after the last
    complete line. A last line without its newline that is not valid JSON is a run killed while writing:
    it is dropped with a warning (``--resume`` truncates the file to ``good_end``). Any other bad line
    raises CalibrationError naming the file and line.
    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return [], [], 0
    except OSError as e:
        raise CalibrationError(f"{path}: cannot read: {e.strerror or e}") from None
    out: list[dict] = []
    warnings: list[str] = []
    lines = data.split(b"\n")
    offset = good_end = 0
    for i, raw in enumerate(lines, start=1):
        terminated = i < len(lines)  # split() leaves the text after the last newline as the last item
        if raw.strip():
            try:
                obj = json.loads(raw)
                if not isinstance(obj, dict):
                    raise ValueError("not a JSON object")
            except (ValueError, UnicodeDecodeError) as e:
                if not terminated:  # no newline after it: the writer was killed mid-line
                    warnings.append(f"{path}:{i}: incomplete last line ({len(raw)} bytes) ignored: "
                                    f"the run was killed while writing it")
                    break
                raise CalibrationError(
                    f"{path}:{i}: not a valid JSON record ({e}); the file is corrupt. Fix or delete that "
                    f"line (or run the benchmarks again into a new directory)") from None
            out.append(obj)
        offset += len(raw) + (1 if terminated else 0)
        good_end = offset
    return out, warnings, good_end


def read_meta(directory: str | os.PathLike) -> ProfileMeta:
    d = Path(directory)
    p = d / META_FILE
    try:
        raw = json.loads(p.read_text())
    except FileNotFoundError:
        raise CalibrationError(
            f"{d}: no {META_FILE}: not a gpusim profile directory (or its run died before it started); "
            f"create one with `gpusim calibrate --out {d}`") from None
    except (ValueError, OSError) as e:
        raise CalibrationError(f"{p}: not valid JSON ({e})") from None
    if isinstance(raw, dict):
        ver = raw.get("schema_version")
        if isinstance(ver, int) and ver > SCHEMA_VERSION:
            raise CalibrationError(f"{p}: profile schema version {ver} is newer than this gpusim understands "
                                   f"({SCHEMA_VERSION}); upgrade gpusim")
    try:
        return ProfileMeta.model_validate(raw)
    except ValidationError as e:
        raise CalibrationError(f"{p}: invalid profile metadata: {_fmt_errors(e)}") from None


def load_profile(directory: str | os.PathLike) -> Profile:
    """Read and validate a profile directory written by ``gpusim calibrate``.

    Raises :class:`~gpusim.errors.CalibrationError` (one readable message, with file and line) when the
    directory is missing, is not a profile, or holds an invalid record. A truncated last line is
    dropped and reported in ``Profile.warnings``, as are runs that did not complete.
    """
    d = Path(directory)
    if not d.is_dir():
        raise CalibrationError(f"{d}: no such profile directory")
    meta = read_meta(d)
    rec_path = d / RECORDS_FILE
    raw, warnings, _ = read_records(rec_path)
    records = []
    keys: dict[str, int] = {}
    run_ids = {r.run_id for r in meta.runs}
    line_of = _line_numbers(rec_path) if raw else []
    for i, obj in enumerate(raw):
        where = f"{rec_path}:{line_of[i] if i < len(line_of) else i + 1}"
        rec = parse_record(obj, where)
        if rec.run_id not in run_ids:
            raise CalibrationError(f"{where}: run_id {rec.run_id!r} is not in {META_FILE} "
                                   f"(records from another profile were mixed in?)")
        if rec.key in keys:
            warnings.append(f"{where}: record {rec.key!r} repeats line {keys[rec.key]}; the later one is kept")
            records = [r for r in records if r.key != rec.key]
        keys[rec.key] = line_of[i] if i < len(line_of) else i + 1
        records.append(rec)
    if meta.runs and meta.runs[-1].status != "complete":
        last = meta.runs[-1]
        why = f": {last.error}" if last.error else " (killed?)"
        warnings.append(f"the last run ({last.run_id}) did not complete{why}; "
                        f"`gpusim calibrate --resume --out {d}` continues it")
    noisy = sum(1 for r in records if getattr(r, "noisy", False))
    if noisy:
        warnings.append(f"{noisy} of {len(records)} records are flagged noisy (see noisy_reason)")
    return Profile(path=d, meta=meta, records=records, warnings=warnings)


def _line_numbers(path: Path) -> list[int]:
    """1-based line numbers of the non-blank lines (to name lines in errors)."""
    out = []
    with open(path, "rb") as f:
        for i, line in enumerate(f, start=1):
            if line.strip():
                out.append(i)
    return out


def done_points(records: list[dict]) -> set[str]:
    """Points whose records are all present (``point_n`` of them): what ``--resume`` skips."""
    seen: Counter = Counter()
    need: dict[str, int] = {}
    for r in records:
        p = r.get("point")
        if isinstance(p, str):
            seen[p] += 1
            need[p] = int(r.get("point_n", 1))
    return {p for p, c in seen.items() if c >= need[p]}


def busbw_factor(collective: str, n_ranks: int) -> float:
    """nccl-tests bus-bandwidth correction factor (doc/PERFORMANCE.md)."""
    return BUSBW_FACTOR[collective](n_ranks)


def read_rank_files(directory: str | os.PathLike) -> list[dict]:
    """The per-rank state files of the last run (``ranks/rank-NNNNN.json``: rank, host, pid, state
    running|done|error, bench, point, error, error_kind, failed_ranks), sorted by rank. Diagnostics for
    the launcher; unreadable files are skipped."""
    d = Path(directory) / RANKS_DIR
    out = []
    if d.is_dir():
        for p in sorted(d.glob("rank-*.json")):
            try:
                obj = json.loads(p.read_text())
            except (OSError, ValueError):
                continue
            if isinstance(obj, dict):
                out.append(obj)
    return sorted(out, key=lambda s: s.get("rank", 0))
