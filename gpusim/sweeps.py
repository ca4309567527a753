"""Sweeps: every sensible configuration at once, as a structure of arrays, through the same pure model.

A sweep is the cross product of

- **hardware options**: node templates from the database (``dgx-h100``, ``aws-p5-48xlarge`` ...) and GPUs in
  the database's usual node for them (``l4`` in a generic PCIe server), each with its GPUs per node and,
  optionally, another intra- or inter-node fabric;
- **node counts** (powers of two by default, up to ``max_gpus``);
- **strategy** (``ddp``, ZeRO stages, FSDP variants), **precision**, **activation checkpointing**,
  **CPU offload**;
- **per-GPU micro-batch** (by default the powers of two up to the largest that fits, which the model
  itself reports) and **gradient accumulation** (a list, or what reaches a target global batch).

How it is evaluated, without a Python loop per configuration:

1. each distinct (hardware option, GPUs per node, node count) is resolved once with
   :func:`gpusim.simulation.resolve_hardware` and :func:`gpusim.simulation.hardware_row`, into one row of a
   hardware table; the workload's and each precision's fields are computed once;
2. the configurations are index arrays into those tables (``np.repeat`` / ``np.tile``), gathered into the
   flat arrays of :class:`gpusim.model.step.StepInputs`;
3. :func:`gpusim.model.step.evaluate` runs on chunks of up to ``chunk_rows`` rows (one precision per chunk,
   so the per-layer-group arrays stay ``(1, K)`` and broadcast), with a progress callback between chunks.

A first, small pass at micro-batch 1 gives each (hardware, strategy, precision, checkpointing) row the
largest micro-batch that fits, so the automatic micro-batch axis only holds sizes that fit.

Configurations that cannot run are rows, not errors: ``feasible`` is False and ``reason`` says why
("does not fit in GPU memory ...", "global batch too large (4096 > limit 2048)", "aws-p5-48xlarge comes with 8
GPUs, not 4", "h100-sxm has no fp32 ...", "DataParallel runs in one process on one node"). Their model
columns are NaN where the model was not run.

The result is a :class:`pandas.DataFrame` with unit-suffixed columns (see :data:`COLUMNS`); the numbers
equal :func:`gpusim.simulation.simulate`'s for the same configuration (a test checks it), including
``speedup`` and ``scaling_efficiency_frac`` against one GPU of the same node at the same per-GPU batch.

pandas is imported inside :func:`sweep` only (it takes ~0.5 s), never at ``import gpusim``.
"""

from __future__ import annotations

import dataclasses
import math
import typing
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from gpusim import units
from gpusim.errors import GpusimError, ScenarioError
from gpusim.heap import retain_heap
from gpusim.model.step import BOTTLENECKS, BREAKDOWN_KEYS, evaluate
from gpusim.params import DEFAULT_PARAMS, ModelParams
from gpusim.rows import (AUTO_PRECISION_ORDER, ROW_FIELDS, STEP_FIELDS, HardwareTable, hardware_arrays,  # noqa: F401
                         matmul_cap_frac, not_offered_reason, option_scenario, partial_population_ok, precision_fields,
                         resolve_hardware_table, resolve_precision, table_inputs)
from gpusim.strategy import OPT_STATE_BYTES, PRECISION_ALIASES, STRATEGY_CODES, Precision, Strategy

#: the strategies a default sweep compares: DDP, the three ZeRO stages (ZeRO-3 = FSDP FULL_SHARD,
#: ZeRO-2 = FSDP SHARD_GRAD_OP, which the model evaluates identically) and FSDP HYBRID_SHARD.
DEFAULT_STRATEGIES = ("ddp", "zero1", "zero2", "zero3", "fsdp-hybrid")
#: largest micro-batch the automatic axis tries (an engineering cap: past ~1k samples per GPU utilisation has
#: long saturated and recipes do not use larger per-GPU batches).
MICRO_BATCH_CAP = 1024
#: default GPUs-per-node values for a GPU without a node template of its own (the generic PCIe hosts of the
#: database hold 4 or 8 cards)
GENERIC_GPUS_PER_NODE = (1, 2, 4, 8)
#: default largest cluster of a sweep (GPUs). A large single-tenant cloud reservation; pass ``max_gpus`` for
#: more (Llama 3 405B trained on 16,384 H100s, Meta 2024).
DEFAULT_MAX_GPUS = 4096
#: rows per model call (memory: ~60 float64 temporaries per row, so 2M rows is ~1 GB at peak)
DEFAULT_CHUNK_ROWS = 1_000_000

#: Columns of the sweep table, in order. Units are in the names (seconds, bytes, fractions, counts).
COLUMNS = (
    "node", "node_kind", "gpu", "gpus_per_node", "nodes", "n_gpus", "intra_link", "inter_link", "strategy",
    "precision", "checkpointing", "cpu_offload", "micro_batch", "accum", "global_batch", "num_workers",
    "feasible", "reason", "fits_in_memory", "step_s", "throughput_samples_per_s", "tokens_per_s",
    "throughput_per_gpu_samples_per_s", "speedup", "scaling_efficiency_frac", "mfu_frac", "gpu_util_frac",
    "memory_per_gpu_bytes", "memory_capacity_bytes", "max_micro_batch", "bottleneck", *BREAKDOWN_KEYS,
    "comm_total_s", "loader_supply_samples_per_s", "single_gpu_step_s", "cores_per_gpu",
    "storage_bytes_per_s_per_node", "node_assumed",
)


@dataclass(frozen=True)
class HardwareOption:
    """One hardware offering before the node count: a node template (``node``) or a GPU in the database's
    usual node for it (``node=None``), with GPUs per node and optional fabric overrides (link ids)."""

    gpu: str
    gpus_per_node: int
    node: str | None = None
    intra: str | None = None
    inter: str | None = None


# ------------------------------------------------------------------------------------------------
# Candidate hardware
# ------------------------------------------------------------------------------------------------





def _as_list(x) -> list | None:
    if x is None:
        return None
    if isinstance(x, (str, int)):
        return [x]
    return list(x)


def hardware_options(db, *, gpus: Sequence[str] | None = None, nodes: Sequence[str] | None = None,
                     gpus_per_node: Sequence[int] | None = None, node_kinds: Iterable[str] | None = None,
                     intra: Sequence[str | None] = (None,), inter: Sequence[str | None] = (None,),
                     generic: bool = True) -> list[HardwareOption]:
    """The hardware options of a sweep.

    - ``nodes``: these templates (any kind).
    - ``gpus``: every template (of ``node_kinds``) that holds one of these GPUs; a GPU that no such template
      holds is placed in the database's usual node for it (``node=None``; generic PCIe hosts).
    - neither: every template of ``node_kinds`` (all by default) and, when ``generic``, every GPU that no
      template holds.

    ``gpus_per_node`` defaults to each template's own count (1, 2, 4, 8 for a GPU without a template); values
    a template cannot be bought with become infeasible rows later. Unknown ids raise
    :class:`~gpusim.errors.UnknownIdError` with close matches.
    """
    kinds = set(node_kinds) if node_kinds is not None else None
    gpn = [int(g) for g in _as_list(gpus_per_node)] if gpus_per_node is not None else None
    if gpn is not None and any(g < 1 for g in gpn):
        raise ScenarioError(f"GPUs per node must be >= 1 (got {gpn})")
    templates: list = []
    loose_gpus: list[str] = []
    for nid in _as_list(nodes) or []:
        templates.append(db.node(nid))
    gpu_ids = [db.gpu(g).id for g in _as_list(gpus) or []]
    if gpu_ids:
        for gid in gpu_ids:
            held = [n for n in db.nodes.values() if n.gpu == gid and (kinds is None or n.kind in kinds)]
            templates += [n for n in held if n not in templates]
            if not held:
                loose_gpus.append(gid)
    elif nodes is None:
        templates = [n for n in db.nodes.values() if kinds is None or n.kind in kinds]
        if generic:
            held = {n.gpu for n in db.nodes.values()}
            loose_gpus = [g for g in db.gpus if g not in held]
    for lk in [*intra, *inter]:
        if lk is not None:
            db.link(lk)
    out: list[HardwareOption] = []
    for n in templates:
        for g in (gpn or [n.gpus_per_node]):
            for a in intra:
                for b in inter:
                    out.append(HardwareOption(gpu=n.gpu, gpus_per_node=g, node=n.id, intra=a, inter=b))
    for gid in loose_gpus:
        for g in (gpn or GENERIC_GPUS_PER_NODE):
            for a in intra:
                for b in inter:
                    out.append(HardwareOption(gpu=gid, gpus_per_node=g, node=None, intra=a, inter=b))
    return out


def default_node_counts(gpus_per_node: int, max_gpus: int, max_nodes: int | None = None) -> list[int]:
    """Powers of two from 1 while ``nodes * gpus_per_node <= max_gpus`` (and ``nodes <= max_nodes``)."""
    top = max_gpus // max(gpus_per_node, 1)
    if max_nodes is not None:
        top = min(top, max_nodes)
    return [1 << i for i in range(0, 31) if (1 << i) <= top]




# ------------------------------------------------------------------------------------------------
# Tables: hardware rows, precision fields, workload fields
# ------------------------------------------------------------------------------------------------

















#: model outputs kept in the table
_KEEP = ("step_s", "throughput_samples_per_s", "throughput_per_gpu_samples_per_s", "mfu_frac", "gpu_util_frac",
         "memory_per_gpu_bytes", "max_micro_batch", "fits_in_memory", "bottleneck_code", *BREAKDOWN_KEYS,
         "comm_total_s", "loader_supply_samples_per_s")


def _evaluate_chunked(idx: dict[str, np.ndarray], prec_of_row: np.ndarray, precisions: list[str], hw_arr, precf,
                      params, chunk_rows, progress, done0, total, keep=_KEEP):
    """Evaluate rows ``idx`` (dict of per-row arrays) precision by precision, in chunks; returns dict of arrays."""
    n = len(prec_of_row)
    retain_heap()  # blocks of temporaries reused, not faulted in afresh (gpusim.heap)
    # every row is written below
    out = {k: (np.zeros(n, dtype=bool) if k == "fits_in_memory" else np.empty(n)) for k in keep}
    done = done0
    for pi, p in enumerate(precisions):
        rows = np.nonzero(prec_of_row == pi)[0]
        contiguous = len(rows) > 0 and rows[-1] - rows[0] + 1 == len(rows)
        for start in range(0, len(rows), chunk_rows):
            if contiguous:  # a slice: views, no copies
                sel = slice(int(rows[0]) + start, int(rows[0]) + min(start + chunk_rows, len(rows)))
                n_sel = sel.stop - sel.start
            else:
                sel = rows[start:start + chunk_rows]
                n_sel = len(sel)
            sub = {k: v[sel] for k, v in idx.items()}
            res = evaluate(table_inputs(sub, hw_arr, precf[p]), params)
            for k in keep:
                out[k][sel] = np.broadcast_to(res[k], (n_sel,))
            done += n_sel
            if progress is not None:
                progress(done, total)
    return out


# ------------------------------------------------------------------------------------------------
# The sweep
# ------------------------------------------------------------------------------------------------

class _Reasons:
    """Messages of infeasible rows, by integer code (0 = feasible, the empty message)."""

    def __init__(self):
        self.messages: list[str] = [""]
        self._code: dict[str, int] = {"": 0}

    def code(self, message: str | None) -> int:
        if not message:
            return 0
        if message not in self._code:
            self._code[message] = len(self.messages)
            self.messages.append(message)
        return self._code[message]


def _pow2_upto(m: np.ndarray) -> np.ndarray:
    """How many powers of two 1, 2, 4 ... are <= m (0 where m < 1)."""
    m = np.asarray(m, dtype=np.float64)
    with np.errstate(divide="ignore"):
        return np.where(m >= 1, np.floor(np.log2(np.maximum(m, 1.0)) + 1e-9) + 1, 0).astype(np.int64)


def _group_arange(counts: np.ndarray) -> np.ndarray:
    """[0..c0-1, 0..c1-1, ...] for counts c."""
    total = int(counts.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    starts = np.repeat(np.cumsum(counts) - counts, counts)
    return np.arange(total, dtype=np.int64) - starts


def sweep(model: str | None = None, *, workload=None, seq_len: int | None = None,
          gpus: Sequence[str] | str | None = None, nodes: Sequence[str] | str | None = None,
          gpus_per_node: Sequence[int] | int | None = None, node_counts: Sequence[int] | None = None,
          max_gpus: int | None = None, max_nodes: int | None = None, node_kinds: Iterable[str] | None = None,
          intra: Sequence[str | None] = (None,), inter: Sequence[str | None] = (None,),
          strategies: Sequence[str] = DEFAULT_STRATEGIES, precisions: Sequence[str] = ("auto",),
          checkpointing: Sequence[bool] = (False,), cpu_offload: Sequence[bool] = (False,),
          micro_batches: Sequence[int] | None = None, micro_batch_cap: int = MICRO_BATCH_CAP,
          accum: Sequence[int] = (1,), global_batch: int | None = None, max_global_batch: int | None = None,
          num_workers: int | str | None = None, optimizer: str = "adam", bucket_mib: float = 25.0,
          options: Sequence[HardwareOption] | None = None, db=None, params: ModelParams | None = None,
          chunk_rows: int = DEFAULT_CHUNK_ROWS, progress: Callable[[int, int], None] | None = None,
          baseline: bool = True):
    """Evaluate a grid of configurations; returns a :class:`pandas.DataFrame` (columns :data:`COLUMNS`).

    Parameters
    ----------
    model, workload, seq_len : the workload: a catalogue id or a :class:`gpusim.workload.Workload`.
    gpus, nodes, gpus_per_node, node_kinds, intra, inter : the hardware options (see :func:`hardware_options`);
        or ``options`` directly.
    node_counts : node counts (default powers of two up to ``max_gpus`` GPUs, default :data:`DEFAULT_MAX_GPUS`, and
        ``max_nodes`` nodes). A configuration with more GPUs than ``max_gpus`` (one node of 8 when ``max_gpus``
        is 4; explicit node counts beyond it when ``max_gpus`` is given) is an infeasible row.
    strategies, precisions, checkpointing, cpu_offload : lists of values. ``"auto"`` precision picks bf16
        mixed precision where the GPU has it (see :data:`AUTO_PRECISION_ORDER`).
    micro_batches : per-GPU micro-batches; default the powers of two up to the largest that fits (at most
        ``micro_batch_cap``); when nothing fits, one row at micro-batch 1 says so.
    accum : gradient accumulation steps; ignored when ``global_batch`` is given: then each row accumulates
        ``ceil(global_batch / (n_gpus * micro_batch))`` micro-batches (at least 1), so the global batch is
        the target or, where one micro-batch per GPU already exceeds it, larger.
    max_global_batch : rows with a larger global batch are infeasible ("global batch too large").
    num_workers : DataLoader workers per GPU: None = data already prepared (no loader), an int, or
        ``"auto"`` = as many as the node has cores per GPU (what the node's CPUs can feed).
    progress : called as ``progress(rows_done, rows_total)`` after every chunk.
    baseline : also evaluate one GPU of the same node at the same per-GPU batch, for ``speedup`` and
        ``scaling_efficiency_frac`` (as :func:`gpusim.simulation.simulate` reports them).
    """
    import pandas as pd

    from gpusim.hwdb import load
    from gpusim.rows import peak_for

    db = db or load()
    params = params or DEFAULT_PARAMS
    if (model is None) == (workload is None):
        raise ScenarioError("give exactly one of `model` (a catalogue id) or `workload`")
    if model is not None:
        from gpusim.workload import get_workload

        wl = get_workload(model, seq_len=seq_len)
    else:
        wl = workload.with_seq_len(seq_len) if seq_len else workload
    strategies = [str(s) for s in _as_list(strategies)]
    for s in strategies:
        if s not in STRATEGY_CODES:
            raise ScenarioError(f"unknown strategy {s!r}; one of {', '.join(STRATEGY_CODES)}")
    precisions_in = [str(p) for p in _as_list(precisions)]
    known = ("auto", *typing.get_args(Precision), *PRECISION_ALIASES)
    for p in precisions_in:  # [issue 17] the FP8 recipes' names (fp8-cs: current scaling) as predict takes them
        if p not in known:
            raise ScenarioError(f"unknown precision {p!r}; one of {', '.join(known)}")
    if optimizer not in OPT_STATE_BYTES:
        raise ScenarioError(f"unknown optimizer {optimizer!r}; one of {', '.join(OPT_STATE_BYTES)}")
    limit_gpus = max_gpus is not None or node_counts is None
    max_gpus = DEFAULT_MAX_GPUS if max_gpus is None else int(max_gpus)
    if max_gpus < 1:
        raise ScenarioError(f"max_gpus must be >= 1 (got {max_gpus})")
    if global_batch is not None and global_batch < 1:
        raise ScenarioError(f"the target global batch must be >= 1 (got {global_batch})")
    if max_global_batch is not None and max_global_batch < 1:
        raise ScenarioError(f"the maximum global batch must be >= 1 (got {max_global_batch})")
    mbs = None if micro_batches is None else sorted({int(b) for b in _as_list(micro_batches)})
    if mbs is not None and (not mbs or mbs[0] < 1):
        raise ScenarioError(f"micro-batches must be >= 1 (got {micro_batches})")
    acc = sorted({int(k) for k in _as_list(accum)})
    if not acc or acc[0] < 1:
        raise ScenarioError(f"accumulation steps must be >= 1 (got {accum})")
    if isinstance(num_workers, str) and num_workers != "auto":
        raise ScenarioError(f"num_workers must be None, an integer or 'auto' (got {num_workers!r})")
    Strategy(bucket_mib=bucket_mib)  # validates the bucket size

    if options is None:
        options = hardware_options(db, gpus=gpus, nodes=nodes, gpus_per_node=gpus_per_node, node_kinds=node_kinds,
                                   intra=_as_list(intra) or [None], inter=_as_list(inter) or [None])
    options = list(options)
    if not options:
        raise ScenarioError("no hardware to sweep: no node template or GPU matches the selection")
    if node_counts is not None:
        nc = sorted({int(c) for c in _as_list(node_counts)})
        if not nc or nc[0] < 1:
            raise ScenarioError(f"node counts must be >= 1 (got {node_counts})")
        counts = [nc for _ in options]
    else:
        counts = [default_node_counts(o.gpus_per_node, max_gpus, max_nodes) or [1] for o in options]

    # ---- hardware table --------------------------------------------------------------------------
    ht = resolve_hardware_table(wl, options, counts, db, params)
    H = len(ht.rows)
    hw_arr = hardware_arrays(ht.rows)
    cores_h = hw_arr.get("cores_per_gpu", np.full(H, np.nan))
    storage_h = hw_arr.get("storage_bytes_per_s_per_gpu", np.full(H, np.nan))
    hw_resolved = np.array([r is not None for r in ht.rows], dtype=bool)

    # ---- precisions per hardware row ("auto" resolves per GPU) -------------------------------------
    prec_names: list[str] = []
    hp_h, hp_p, hp_peak, hp_cap, hp_reason = [], [], [], [], []
    gpu_auto: dict[str, str | None] = {}
    for h in range(H):
        gpu = ht.gpu[h]
        seen = set()
        for p in precisions_in:
            if p == "auto":
                if gpu.id not in gpu_auto:
                    gpu_auto[gpu.id] = resolve_precision(gpu, "auto")
                rp = gpu_auto[gpu.id] or "fp32"
            else:
                rp = p
            if rp in seen:
                continue
            seen.add(rp)
            if rp not in prec_names:
                prec_names.append(rp)
            try:
                peak, why = peak_for(gpu, rp), None
                cap = matmul_cap_frac(gpu, rp, params)  # [issue 17] never above the GPU's sustained matmul rate
            except ScenarioError as e:
                peak, cap, why = math.nan, 1.0, str(e)
            hp_h.append(h)
            hp_p.append(prec_names.index(rp))
            hp_peak.append(peak)
            hp_cap.append(cap)
            hp_reason.append(why)
    # precision-major order: the rows of one precision are contiguous, so chunks are slices (no copies)
    order = np.lexsort((np.array(hp_h, dtype=np.int64), np.array(hp_p, dtype=np.int64)))
    hp_h = np.array(hp_h, dtype=np.int64)[order]
    hp_p = np.array(hp_p, dtype=np.int64)[order]
    hp_peak = np.array(hp_peak, dtype=np.float64)[order]
    hp_cap = np.array(hp_cap, dtype=np.float64)[order]
    hp_reason = [hp_reason[i] for i in order]
    precf = precision_fields(wl, prec_names, ht.hw, tuple(hw_arr), optimizer, bucket_mib, params)

    # reasons are integer codes into a list of messages (0 = feasible), so millions of rows cost no strings
    reasons = _Reasons()

    # ---- level A: (hardware, precision) x strategy x checkpointing x offload, at micro-batch 1 --------------
    S, C, O = len(strategies), len(checkpointing), len(cpu_offload)
    nA = len(hp_h) * S * C * O
    a_hp = np.repeat(np.arange(len(hp_h)), S * C * O)
    rest = np.tile(np.arange(S * C * O), len(hp_h))
    a_s, a_c, a_o = rest // (C * O), (rest // O) % C, rest % O
    s_codes = np.array([STRATEGY_CODES[s] for s in strategies])
    ck_vals = np.array([bool(c) for c in checkpointing])
    off_vals = np.array([bool(o) for o in cpu_offload])
    a_h = hp_h[a_hp]
    a_nodes = np.array(ht.nodes, dtype=np.int64)[a_h]
    a_g = np.array([options[o].gpus_per_node for o in ht.option], dtype=np.int64)[a_h]
    a_n = a_g * a_nodes

    hw_code = np.array([reasons.code(r) for r in ht.reason], dtype=np.int64)
    hp_code = np.array([reasons.code(r) for r in hp_reason], dtype=np.int64)
    reason_a = hw_code[a_h]
    reason_a = np.where(reason_a == 0, hp_code[a_hp], reason_a)
    is_dp = np.array([s == "dp" for s in strategies])[a_s]
    reason_a = np.where((reason_a == 0) & is_dp & (a_nodes > 1),
                        reasons.code("DataParallel (dp) runs in one process on one node; use ddp across nodes"),
                        reason_a)
    if limit_gpus:
        too_many = (reason_a == 0) & (a_n > max_gpus)
        if too_many.any():
            vals, inv = np.unique(a_n[too_many], return_inverse=True)
            codes = np.array([reasons.code(f"{int(v)} GPUs, more than the maximum of {max_gpus}") for v in vals])
            reason_a[np.nonzero(too_many)[0]] = codes[inv.ravel()]
    sharded = np.array([s not in ("dp", "ddp") for s in strategies])[a_s]
    reason_a = np.where((reason_a == 0) & off_vals[a_o] & ~sharded,
                        reasons.code("CPU offload needs a sharded strategy (zero1/2/3 or fsdp-*)"), reason_a)

    if num_workers is None:
        w_h = np.full(H, -1.0)
    elif num_workers == "auto":
        w_h = np.floor(np.nan_to_num(cores_h, nan=1.0)).clip(min=1.0)
    else:
        if int(num_workers) < 0:
            raise ScenarioError(f"num_workers must be >= 0 (got {num_workers})")
        w_h = np.full(H, float(num_workers))

    runnable_a = (reason_a == 0) & hw_resolved[a_h]
    ra = np.nonzero(runnable_a)[0]
    idx_a = {"h": a_h[ra], "peak": hp_peak[a_hp[ra]], "cap": hp_cap[a_hp[ra]], "strategy": s_codes[a_s[ra]],
             "micro_batch": np.ones(len(ra)), "accum": np.ones(len(ra)), "checkpointing": ck_vals[a_c[ra]],
             "cpu_offload": off_vals[a_o[ra]], "num_workers": w_h[a_h[ra]]}
    pass1 = _evaluate_chunked(idx_a, hp_p[a_hp[ra]], prec_names, hw_arr, precf,
                              params, chunk_rows, None, 0, 0, keep=("max_micro_batch",))
    max_b_a = np.zeros(nA)
    max_b_a[ra] = pass1["max_micro_batch"]

    # ---- level B: micro-batches and accumulation --------------------------------------------------------
    if mbs is None:
        nb = _pow2_upto(np.minimum(max_b_a, micro_batch_cap))
        nb = np.where(runnable_a, np.maximum(nb, 1), 1)  # nothing fits (or not runnable): one row at b = 1
        b_a = np.repeat(np.arange(nA), nb)
        b_mb = (2.0 ** _group_arange(nb))
    else:
        reps = np.where(runnable_a, len(mbs), 1)
        b_a = np.repeat(np.arange(nA), reps)
        b_mb = np.where(runnable_a[b_a], np.array(mbs, dtype=np.float64)[_group_arange(reps)], 1.0)
    b_n = a_n[b_a].astype(np.float64)
    if global_batch is not None:
        b_k = np.maximum(1.0, np.ceil(global_batch / (b_n * b_mb)))
    else:
        K = len(acc)
        rep = np.where(runnable_a[b_a], K, 1)
        b_a, b_mb, b_n = np.repeat(b_a, rep), np.repeat(b_mb, rep), np.repeat(b_n, rep)
        b_k = np.array(acc, dtype=np.float64)[_group_arange(rep)]
    N = len(b_a)
    gb = b_n * b_mb * b_k

    reason = reason_a[b_a]
    run = runnable_a[b_a]
    bi = np.nonzero(run)[0]
    all_run = len(bi) == N
    sel = slice(None) if all_run else bi
    b_ab = b_a[sel]
    prec_b = hp_p[a_hp[b_a]]
    idx_b = {"h": a_h[b_ab], "peak": hp_peak[a_hp[b_ab]], "cap": hp_cap[a_hp[b_ab]], "strategy": s_codes[a_s[b_ab]],
             "micro_batch": b_mb[sel], "accum": b_k[sel], "checkpointing": ck_vals[a_c[b_ab]],
             "cpu_offload": off_vals[a_o[b_ab]], "num_workers": w_h[a_h[b_ab]]}
    total = len(bi)
    res_run = _evaluate_chunked(idx_b, prec_b[sel], prec_names, hw_arr, precf,
                                params, chunk_rows, progress, 0, total)
    if all_run:
        res = res_run
    else:
        res = {k: (np.zeros(N, dtype=bool) if k == "fits_in_memory" else np.full(N, np.nan)) for k in _KEEP}
        for k in _KEEP:
            res[k][bi] = res_run[k]

    # ---- one-GPU baseline (same node, strategy, precision, batch) for speedup and efficiency ---------------
    single_step = np.full(N, np.nan)
    single_thr = np.full(N, np.nan)
    if baseline and total:
        single_step, single_thr = _baseline(wl, options, ht, a_h, a_s, a_c, a_o, a_hp, hp_peak, hp_cap, hp_p, b_a, bi,
                                            b_mb, b_k, w_h, s_codes, strategies, ck_vals, off_vals, prec_names,
                                            precf, params, chunk_rows, db, N)

    # ---- feasibility -------------------------------------------------------------------------------------
    fits = res["fits_in_memory"]
    cap_h = np.array([g.memory_bytes for g in ht.gpu], dtype=np.float64)
    mem = res["memory_per_gpu_bytes"]
    nofit = run & ~fits
    if nofit.any():
        # one message per distinct (memory needed to 0.1 GiB, capacity): formatted once each
        idxs = np.nonzero(nofit)[0]
        need = np.round(mem[idxs] / units.GIB * 10.0).astype(np.int64)
        caps, cap_i = np.unique(cap_h, return_inverse=True)
        key = need * len(caps) + cap_i.ravel()[a_h[b_a[idxs]]]
        keys, inv = _unique_inverse(key)
        codes = np.array([reasons.code(f"does not fit in GPU memory ({k // len(caps) / 10:.1f} GiB needed of "
                                       f"{caps[k % len(caps)] / units.GIB:.0f} GiB)") for k in keys], dtype=np.int64)
        reason[idxs] = codes[inv.ravel()]
    if max_global_batch is not None:
        over = (reason == 0) & (gb > max_global_batch)
        if over.any():
            idxs = np.nonzero(over)[0]
            vals, inv = _unique_inverse(gb[idxs])
            codes = np.array([reasons.code(f"global batch too large ({int(x)} > limit {max_global_batch})")
                              for x in vals], dtype=np.int64)
            reason[idxs] = codes[inv.ravel()]
    feasible = reason == 0

    # ---- table ------------------------------------------------------------------------------------------
    opt_idx = np.array(ht.option, dtype=np.int64)[a_h[b_a]]
    node_ids = [(ht.hw[h].node.id if (ht.hw[h] is not None and ht.hw[h].node is not None)
                 else (options[ht.option[h]].node or "")) for h in range(H)]
    node_kind = [(ht.hw[h].node.kind if (ht.hw[h] is not None and ht.hw[h].node is not None)
                  else (db.node(options[ht.option[h]].node).kind if options[ht.option[h]].node else ""))
                 for h in range(H)]
    intra_ids = [(ht.hw[h].intra_link.id if ht.hw[h] is not None and ht.hw[h].intra_link is not None else "")
                 for h in range(H)]
    inter_ids = [(ht.hw[h].inter_link.id if ht.hw[h] is not None and ht.hw[h].inter_link is not None else "")
                 for h in range(H)]
    assumed = np.array([options[ht.option[h]].node is None for h in range(H)], dtype=bool)
    hb = a_h[b_a]

    def cat(values: list[str], codes: np.ndarray):
        cats, inv = np.unique(np.array(values, dtype=object).astype(str), return_inverse=True)
        return pd.Categorical.from_codes(inv[codes], categories=cats)

    tokens = float(wl.tokens_per_sample) if wl.sample_unit == "sequence" else math.nan
    bott = res["bottleneck_code"]
    bott_codes = np.where(np.isfinite(bott), bott, -1).astype(np.int64)
    bott_names = np.array(list(BOTTLENECKS) + [""], dtype=object)
    thr = res["throughput_samples_per_s"]
    with np.errstate(invalid="ignore", divide="ignore"):
        speedup = thr / single_thr
    data = {
        "node": cat(node_ids, hb), "node_kind": cat(node_kind, hb),
        "gpu": cat([g.id for g in ht.gpu], hb),
        "gpus_per_node": np.array([options[o].gpus_per_node for o in range(len(options))], dtype=np.int64)[opt_idx],
        "nodes": a_nodes[b_a], "n_gpus": a_n[b_a],
        "intra_link": cat(intra_ids, hb), "inter_link": cat(inter_ids, hb),
        "strategy": pd.Categorical.from_codes(a_s[b_a], categories=list(strategies)),
        "precision": pd.Categorical.from_codes(prec_b, categories=prec_names),
        "checkpointing": ck_vals[a_c[b_a]], "cpu_offload": off_vals[a_o[b_a]],
        "micro_batch": b_mb.astype(np.int64), "accum": b_k.astype(np.int64), "global_batch": gb.astype(np.int64),
        "num_workers": w_h[hb].astype(np.int64),
        "feasible": feasible, "reason": pd.Categorical.from_codes(reason, categories=reasons.messages),
        "fits_in_memory": fits,
        "step_s": res["step_s"], "throughput_samples_per_s": thr, "tokens_per_s": thr * tokens,
        "throughput_per_gpu_samples_per_s": res["throughput_per_gpu_samples_per_s"],
        "speedup": speedup, "scaling_efficiency_frac": speedup / a_n[b_a],
        "mfu_frac": res["mfu_frac"], "gpu_util_frac": res["gpu_util_frac"],
        "memory_per_gpu_bytes": mem, "memory_capacity_bytes": cap_h[hb],
        "max_micro_batch": res["max_micro_batch"],
        "bottleneck": pd.Categorical.from_codes(np.where(bott_codes < 0, len(BOTTLENECKS), bott_codes),
                                                categories=list(bott_names)),
        **{k: res[k] for k in BREAKDOWN_KEYS},
        "comm_total_s": res["comm_total_s"], "loader_supply_samples_per_s": res["loader_supply_samples_per_s"],
        "single_gpu_step_s": single_step, "cores_per_gpu": cores_h[hb],
        "storage_bytes_per_s_per_node": (storage_h
                                         * np.array([options[o].gpus_per_node for o in ht.option]))[hb],
        "node_assumed": assumed[hb],
    }
    df = pd.DataFrame(data, columns=list(COLUMNS), copy=False)  # no consolidation copy (~0.5 s per million rows)
    df.attrs["workload"] = wl.id
    df.attrs["workload_name"] = wl.name
    df.attrs["sample_unit"] = wl.sample_unit
    df.attrs["tokens_per_sample"] = float(wl.tokens_per_sample)
    df.attrs["model_rows"] = int(total)
    return df


def _baseline(wl, options, ht, a_h, a_s, a_c, a_o, a_hp, hp_peak, hp_cap, hp_p, b_a, bi, b_mb, b_k, w_h, s_codes,
              strategies, ck_vals, off_vals, prec_names, precf, params, chunk_rows, db, N):
    """Step time and throughput of one GPU of each row's node at the same strategy (dp -> ddp, as simulate does),
    precision and batch: distinct rows only."""
    from gpusim.rows import hardware_row, resolve_hardware

    # single-GPU hardware row per option
    single_rows = []
    for opt in options:
        try:
            scn = option_scenario(wl, dataclasses.replace(opt, gpus_per_node=1), db, 1)
            single_rows.append(hardware_row(resolve_hardware(scn, db), params))
        except (GpusimError, ValueError):
            single_rows.append(None)
    s_arr = hardware_arrays(single_rows)

    opt_of_h = np.array(ht.option, dtype=np.int64)
    rows = bi
    o = opt_of_h[a_h[b_a[rows]]]
    ddp = STRATEGY_CODES["ddp"]
    sc = s_codes[a_s[b_a[rows]]]
    sc = np.where(sc == STRATEGY_CODES["dp"], ddp, sc)
    hp = a_hp[b_a[rows]]
    # distinct (precision, option, strategy, ckpt, offload, b, k, workers) as one mixed-radix integer key; the
    # precision is the most significant digit so that each precision's rows come out contiguous
    def small_index(v):
        vals = np.unique(v[:: max(1, len(v) // 4096)])
        i = np.searchsorted(vals, v)
        if not np.array_equal(vals[np.minimum(i, len(vals) - 1)], v):  # the sample missed a value: exact
            return np.unique(v, return_inverse=True)[1].ravel()
        return i

    w_idx_h = np.unique(w_h, return_inverse=True)[1].ravel()
    parts = [hp_p[hp], o, sc, a_c[b_a[rows]], a_o[b_a[rows]], small_index(b_mb[rows]), small_index(b_k[rows]),
             w_idx_h[a_h[b_a[rows]]]]
    dims = [int(p.max()) + 1 if len(p) else 1 for p in parts]
    key = np.ravel_multi_index(parts, dims)
    first, inv = _first_and_inverse(key, int(np.prod(dims, dtype=np.float64)))
    fr = rows[first]
    idx = {"h": o[first], "peak": hp_peak[hp[first]], "cap": hp_cap[hp[first]], "strategy": sc[first],
           "micro_batch": b_mb[fr],
           "accum": b_k[fr], "checkpointing": ck_vals[a_c[b_a[fr]]], "cpu_offload": off_vals[a_o[b_a[fr]]],
           "num_workers": w_h[a_h[b_a[fr]]]}
    out = _evaluate_chunked(idx, hp_p[hp[first]], prec_names, s_arr, precf, params,
                            chunk_rows, None, 0, 0, keep=("step_s", "throughput_samples_per_s"))
    step = np.full(N, np.nan)
    thr = np.full(N, np.nan)
    step[rows] = out["step_s"][inv]
    thr[rows] = out["throughput_samples_per_s"][inv]
    return step, thr


def _unique_inverse(values: np.ndarray):
    """``np.unique(values, return_inverse=True)`` for integer-valued arrays, without sorting when their range is
    small (a dense table); falls back to ``np.unique`` otherwise."""
    v = np.asarray(values)
    if len(v) == 0 or not np.all(np.isfinite(v)):
        return np.unique(v, return_inverse=True)
    lo, hi = int(v.min()), int(v.max())
    iv = v.astype(np.int64)
    if hi - lo > 50_000_000 or not np.array_equal(iv, v):
        return np.unique(v, return_inverse=True)
    present = np.zeros(hi - lo + 1, dtype=bool)
    present[iv - lo] = True
    uniq = np.flatnonzero(present)
    slot = np.zeros(hi - lo + 1, dtype=np.int64)
    slot[uniq] = np.arange(len(uniq))
    return (uniq + lo).astype(v.dtype), slot[iv - lo]


def _first_and_inverse(key: np.ndarray, size: int):
    """First index of each distinct key (in key order) and each element's position among them, like
    ``np.unique(key, return_index=True, return_inverse=True)`` but without sorting when the keys are small
    integers (a dense table of ``size`` slots), which is the common case here."""
    if size > 50_000_000 or len(key) == 0:
        _, first, inv = np.unique(key, return_index=True, return_inverse=True)
        return first, inv.ravel()
    first_of = np.full(size, -1, dtype=np.int64)
    first_of[key[::-1]] = np.arange(len(key) - 1, -1, -1)  # later writes win: the first occurrence
    uniq = np.flatnonzero(first_of >= 0)
    slot = np.zeros(size, dtype=np.int64)
    slot[uniq] = np.arange(len(uniq))
    return first_of[uniq], slot[key]

