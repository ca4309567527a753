"""Fit the model's parameters to measurements of one machine, and use them: ``gpusim fit``.

Measure like nccl-tests, fit like scikit-learn (DESIGN.md section 7). Inputs are a profile written by
``gpusim calibrate`` (:mod:`gpusim.profile`) and/or nccl-tests output (:mod:`gpusim.nccl_tests`). The
fit is a handful of small, separable least-squares problems, each solved with
``scipy.optimize.least_squares`` on **relative residuals** (log of fitted over measured time, which is
``(fitted - measured) / measured`` for small errors and symmetric for large ones) with bounds, in the
logarithm of each parameter (so every parameter stays positive and its uncertainty is relative).

Blocks, equations and what each sets (every time is per operation; ``w`` = record weight):

1. **GEMM** (:class:`~gpusim.profile.GemmRecord`): ``t = flop / C_p + t_k`` with one ceiling ``C_p`` per
   precision and one fixed time per kernel ``t_k`` (launch, ramp-up, tail: ``ModelParams.kernel_tail_s`` on
   a GPU). For a device in the hardware database (matched by :func:`match_gpu`) the ceiling is a fraction
   of the datasheet's dense peak; for a CPU or an unknown device the measured ceiling *becomes* the
   calibrated device's peak (efficiency 1 by construction; the datasheet is the measurement).
   ``matmul_eff_frac[p] = C_p / peak_p * train_frac`` where ``train_frac`` (block 5) says how far the
   layers of real training fall below the best-shape square GEMM; without DDP baselines it is 7/8, the
   ratio the shipped defaults use (``gpusim.params.PROVENANCE['matmul_eff_frac']``).
2. **Memory** (:class:`~gpusim.profile.MemoryRecord`): on the plateau (records of at least 1/8 of the
   largest size; smaller copies are latency- or cache-bound and only reported), ``t = traffic / B_k``
   per kind. ``device_copy`` -> ``mem_eff_frac = B / datasheet`` (or the device's memory bandwidth when
   unknown); ``h2d_pinned`` / ``h2d_pageable`` -> ``h2d_*_eff_frac = B / PCIe link``.
3. **Collectives** (profile :class:`~gpusim.profile.CollectiveRecord` and nccl-tests rows): the model's
   own collective model (:func:`gpusim.model.comm.collective_time_s`) with the protocol latency tables
   zeroed (:data:`MEASURED_PROTOCOLS`: a measured sweep already holds NCCL's protocol costs), i.e. for the ring
   ``t = base + steps(c, n) * hop + factor(c, n) * S / busbw`` with ring steps ``2(n-1)`` for all-reduce
   and ``n-1`` otherwise and the nccl-tests bus factors; ``hop`` per level (intra-node, inter-node; a
   multi-node "global" group uses both, as the model does) and ``busbw`` per level and collective. The model
   has one bus bandwidth per level, so it gets the **all-reduce** one (DDP's collective and nccl-tests'
   headline figure); the others are reported (gloo's reduce-scatter runs far below its all-reduce; NVLS
   speeds up only all-reduce; they are ``comm.<level>.busbw_bytes_per_s.<collective>``). ``base``
   (``coll_base_latency_s``) is fitted only when a level has groups of two or more sizes (otherwise it
   cannot be told from ``hop``) and kept at its default otherwise. If a split into a small- and a
   large-message regime (small messages use other NCCL protocols) lowers the Bayesian information
   criterion by more than 10, both regimes are fitted and reported, and the **large-message regime** (the
   one DDP's 25 MiB buckets fall in) goes to the model. On the calibrated machine the results become
   ``busbw_override_bytes_per_s`` / ``latency_override_s`` per level, with :data:`MEASURED_PROTOCOLS`. P2P records are reported per pair
   (slow pairs flagged), not fitted.
4. **Data loader** (:class:`~gpusim.profile.DataloaderRecord` with workers): ``loader_core_eff_frac`` =
   measured samples/s x CPU cost per sample / cores used (``gpusim.model.data``), a weighted mean.
5. **Compute-only DDP baselines** (:class:`~gpusim.profile.DdpStepRecord` with ``n_ranks == 1``: the
   plain module on every rank at once, no communication): the full model (:func:`gpusim.model.step.evaluate`
   on the calibrated machine) fitted for ``train_frac`` (above), the per-operator overhead (on a GPU
   ``launch_cpu_s``, the CPU's dispatch cost that runs ahead of the kernels; on a CPU device
   ``kernel_tail_s``, because there dispatch and compute run one after the other on the same core) and
   ``step_overhead_s``. Their timing spread gives the rank-to-rank jitter, which the model turns into
   straggler time (``gpusim.model.sync``: a synchronous step waits ``jitter x E[max of n normals]`` of the
   compute): ``jitter_frac`` = median over baselines of ``(p90 - median) / (1.2816 x median)``, the standard
   deviation of a normal variable read off the *upper* half of the 10-90 % range. Stragglers come from the
   slow tail only, and step times on a shared host are right-skewed (a rank is descheduled, never sped up),
   so the symmetric range would understate the wait. On this project's 2-core CPU a direct probe (a barrier
   after every unsynchronised DDP step) measured 1.9 ms of waiting on a 14 ms step; the upper-half estimate
   of the same steps gives 2.1 ms, the symmetric one 1.1 ms.

**Held out**: every multi-rank DDP step with ``sync=True`` (gradients all-reduced). Nothing fitted above
sees them; each is predicted with :func:`gpusim.simulation.simulate` on the calibrated machine from the
record's workload description (``Workload.custom``), per-rank batch, ranks, precision, bucket size and
optimizer, with synthetic data. The median absolute error over them is the honest test of the whole
model (``held-out DDP step error: median 7.3% (n=12)``). A second figure anchors each prediction on the
measured one-rank step of the same workload and batch (``--baseline-throughput``), which tests the
communication and synchronisation model alone. ``overlap_frac`` and ``overlap_slowdown_frac`` are *not*
fitted (the only records that inform them are the held-out ones): they keep their defaults.

Noisy records (``noisy=True``: high spread, too few repetitions, throttling) are kept with weight
:data:`NOISY_WEIGHT` (their residual counts as if their standard deviation were 1/0.3 = 3.3 times larger);
the report says how many there were.

Uncertainty: for each block the parameter covariance is ``s^2 (J^T J)^-1`` with ``J`` the Jacobian of the
weighted residuals at the solution (in log-parameter space) and ``s^2`` the residual variance
``sum(r^2) / (m - p)``; the standard deviation of a parameter is its value times the square root of the
diagonal (delta method). Parameters at a bound, or blocks with no more records than parameters, have no
usable uncertainty (reported as null). :meth:`Calibration.interval` propagates the covariance through
:func:`~gpusim.simulation.simulate` with sigma points: for each block, the step time at
``theta +- sqrt(lambda_k) v_k`` along each eigenvector of the covariance; the variance of ``log(step)``
is the sum of the squared half-differences, and the interval is ``step x exp(+-z sd)``.

The calibration file (JSON, written atomically) has: ``format`` ("gpusim-calibration"), ``version``,
``created_utc``, ``sources`` (the profiles and nccl-tests files, with run ids), ``environment`` (device
name and kind, ranks, nodes, hosts, backend, versions, CPU, the matched database GPU and the rule that
matched it), ``hardware`` (the calibrated machine as database entries: ``gpu``, ``node``, ``links``),
``params`` (the ModelParams of the calibrated machine), ``base_params`` (what the fit started from),
``values`` and ``std`` (every fitted figure in SI units and its standard deviation), ``fitted`` (the same
with unit, what it sets, block and record counts), ``covariance`` (per block, in log-parameter space),
``report`` (measured vs fitted for every benchmark, residuals by message size, regimes, p2p pairs, record
counts), ``held_out`` (per held-out step: measured, predicted, anchored, breakdown; and the error summary)
and ``notes``.

:meth:`Calibration.apply` turns a calibration into scenario inputs: without a GPU or node it points at the
calibrated machine (a copy of the database extended with its entries, its measured links as overrides);
with one it applies what transfers (:func:`transferred_params`).

References
----------
NVIDIA nccl-tests ``doc/PERFORMANCE.md`` (bus bandwidth); Thakur, Rabenseifner and Gropp, "Optimization of
Collective Communication Operations in MPICH", IJHPCA 2005 (alpha-beta); SciPy ``least_squares``
documentation (trust-region reflective, bounds); Bard, "Nonlinear Parameter Estimation", 1974
(covariance of least-squares estimates); Julier and Uhlmann, "Unscented filtering and nonlinear
estimation", Proc. IEEE 2004 (sigma points).
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import json
import math
import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from gpusim import units
from gpusim.errors import CalibrationError, GpusimError
from gpusim.params import DEFAULT_PARAMS, PATH_CLASSES, ModelParams

FORMAT = "gpusim-calibration"
VERSION = 1

#: a record whose measuring rank waited for a CPU more than this share of its timing window was measured with
#: more runnable threads than cores (``runqueue_wait_frac``, calibrate/harness.py): the fit's notes say so
CONTENDED_WAIT_FRAC = 0.25
#: residual weight of a record flagged noisy (1 for a clean one)
NOISY_WEIGHT = 0.3
#: ``train_frac`` without DDP baselines: the shipped defaults take 7/8 of the best-shape GEMM ceiling
DEFAULT_TRAIN_FRAC = 7.0 / 8.0
#: memory copies of at least this fraction of the largest measured size form the bandwidth plateau
PLATEAU_FRAC = 1.0 / 8.0
#: a two-regime collective fit must lower the BIC by more than this to be kept
REGIME_BIC_GAIN = 10.0
#: distinct message sizes each regime needs
MIN_REGIME_SIZES = 3
#: p2p pairs slower than this fraction of the median pair are flagged
SLOW_PAIR_FRAC = 0.7
#: interval level and its two-sided normal quantile
LEVEL = 0.9
#: the largest log-space spread an interval gives one direction of a fitted block: a factor of ten either way. A
#: direction the records barely inform (a pseudo-inverse's huge variance: a parameter that changes no residual, such
#: as a microsecond overhead next to millisecond steps) would otherwise perturb its parameters by factors like
#: exp(700), which overflow and mean nothing; the interval says which parameters were held to this.
INTERVAL_LOG_SD_CAP = math.log(10.0)
_Z = 1.6448536269514722
#: 90th percentile of a standard normal variable
_Z90 = 1.2815515655446004

#: gpusim precision -> profile GEMM precision (datasheet key) whose ceiling it uses
_GEMM_KEY = {"fp32": "fp32", "tf32": "tf32", "amp_fp16": "fp16", "amp_bf16": "bf16", "bf16": "bf16", "fp8": "fp8",
             "mxfp8": "fp8"}
_LEVELS = ("intra-node", "inter-node")


# =================================================================================================
# Device identification
# =================================================================================================

#: torch / NVML names that the token rule below cannot map (the name does not say the form factor)
KNOWN_NAMES: dict[str, str] = {
    "nvidia h100 80gb hbm3": "h100-sxm",
    "nvidia h100 sxm5 80gb": "h100-sxm",
    "nvidia h100": "h100-sxm",
    "nvidia h200": "h200-sxm",
    "nvidia h200 141gb hbm3e": "h200-sxm",
    "nvidia a100-sxm-80gb": "a100-sxm4-80gb",
    "nvidia a100 80gb pcie": "a100-pcie-80gb",
    "nvidia a100-pcie-80gb": "a100-pcie-80gb",
    "nvidia b200": "b200",
    "nvidia gb200": "gb200",
}
_VENDOR_WORDS = {"nvidia", "tesla", "geforce", "amd", "instinct", "generation", "graphics", "hbm3", "hbm3e", "hbm2e",
                 "hbm2", "gddr6", "gddr6x"}
_DISTINGUISHING_WORDS = {"ti", "super", "nvl", "pcie", "sxm", "ada", "max", "mobile", "laptop"}


def _tokens(text: str) -> list[str]:
    return [t for t in re.split(r"[^a-z0-9]+", text.lower()) if t]


def slug(text: str) -> str:
    """Lower-case hyphenated id fragment (``AMD EPYC 7B13`` -> ``amd-epyc-7b13``)."""
    s = "-".join(_tokens(text))[:40].strip("-")
    return s or "device"


def match_gpu(device_name: str, db, memory_bytes: float | None = None) -> tuple[str | None, str]:
    """The hardware-database GPU id for a torch/NVML device name, and the rule that matched.

    1. exact names in :data:`KNOWN_NAMES` (lower-case), for names that do not say the form factor
       (``NVIDIA H100 80GB HBM3`` is the SXM part; the PCIe card reports ``NVIDIA H100 PCIe``);
    2. tokens: an id matches when every token of the id (``a100``, ``sxm4``, ``80gb``) is a token of the
       name, and every distinguishing token of the name (a model number such as ``4090``, or ``ti``,
       ``super``, ``nvl``, ``pcie``, ``sxm``, ``ada``; memory sizes only when the id has one) is a token of
       the id; among several matches the one with the most id tokens wins, then the memory size closest
       to ``memory_bytes``.

    Returns ``(None, reason)`` for a CPU or a device the database does not hold.
    """
    name = " ".join(device_name.split()).lower()
    if name in KNOWN_NAMES and KNOWN_NAMES[name] in db.gpus:
        return KNOWN_NAMES[name], f"known name {device_name!r}"
    ntok = set(_tokens(name)) - _VENDOR_WORDS
    if not ntok:
        return None, f"{device_name!r} names no GPU model"
    distinguishing = {t for t in ntok if (any(c.isdigit() for c in t) and not re.fullmatch(r"\d+gb", t))
                      or t in _DISTINGUISHING_WORDS}
    mem_tokens = {t for t in ntok if re.fullmatch(r"\d+gb", t)}
    cands = []
    for gid, g in db.gpus.items():
        itok = set(_tokens(gid))
        if not itok <= ntok:
            continue
        if not distinguishing <= itok:
            continue
        id_mem = {t for t in itok if re.fullmatch(r"\d+gb", t)}
        if id_mem and mem_tokens and not id_mem <= mem_tokens:
            continue
        cands.append((gid, g))
    if not cands:
        return None, f"no database GPU matches {device_name!r}"
    best = max(len(_tokens(c[0])) for c in cands)
    cands = [c for c in cands if len(_tokens(c[0])) == best]
    if len(cands) > 1 and memory_bytes:
        cands.sort(key=lambda c: abs(c[1].memory_bytes - memory_bytes))
    return cands[0][0], f"tokens of {device_name!r}"


# =================================================================================================
# Inputs
# =================================================================================================

@dataclass
class Environment:
    """What was measured, on what (from the profile's meta.json or the nccl-tests headers)."""

    device_kind: str  # "cpu" | "cuda"
    device_name: str
    n_ranks: int
    n_nodes: int
    ranks_per_node: int
    hosts: list[str]
    backend: str | None = None
    versions: dict[str, Any] = field(default_factory=dict)
    cpu_model: str | None = None
    cpu_cores: int | None = None
    cpu_sockets: int | None = None
    ram_bytes: float | None = None
    gpu_memory_bytes: float | None = None
    pcie_generation: int | None = None
    pcie_width: int | None = None
    intra_topology: str | None = None
    #: [issue 18] the profile was measured with NCCL_P2P_DISABLE set: its intra-node collectives are host staging's
    p2p_disabled: bool = False
    matched_gpu: str | None = None
    match_rule: str = ""

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclass
class FitInputs:
    """Everything the fit reads: typed profile records, nccl-tests runs, the environment, provenance."""

    env: Environment
    records: list = field(default_factory=list)
    nccl_runs: list = field(default_factory=list)
    sources: list[dict] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def of(self, bench: str) -> list:
        return [r for r in self.records if r.bench == bench]


def _env_from_profile(prof, db) -> Environment:
    run = next((r for r in reversed(prof.meta.runs) if r.status == "complete"), prof.meta.runs[-1])
    node0 = run.nodes[0] if run.nodes else None
    names = [r.device_name for r in run.ranks if r.device_name] or ([g.name for g in node0.gpus] if node0 else [])
    if not names:
        names = [r.device_name for r in prof.records if getattr(r, "device_name", None)]
    device_name = names[0] if names else "unknown device"
    gpu0 = node0.gpus[0] if (node0 and node0.gpus) else None
    topo = (node0.topology or {}) if node0 else {}
    env = Environment(
        device_kind=run.device, device_name=device_name, n_ranks=run.world_size, n_nodes=run.n_nodes,
        ranks_per_node=run.local_world_size, hosts=[n.host for n in run.nodes], backend=run.backend,
        versions={k: getattr(node0, k, None) for k in ("torch", "cuda", "nccl", "cudnn", "driver", "python", "os")}
        if node0 else {},
        cpu_model=node0.cpu_model if node0 else None, cpu_cores=node0.cpu_cores if node0 else None,
        cpu_sockets=node0.cpu_sockets if node0 else None, ram_bytes=node0.ram_bytes if node0 else None,
        gpu_memory_bytes=gpu0.memory_total_bytes if gpu0 else None,
        pcie_generation=gpu0.pcie_generation if gpu0 else None, pcie_width=gpu0.pcie_width if gpu0 else None,
        intra_topology=topo.get("intra_topology") if run.local_world_size > 1 else "single")
    env.versions["gpusim"] = run.gpusim_version
    from gpusim.profile import nccl_p2p_disabled

    env.p2p_disabled = any(nccl_p2p_disabled(n.nccl_env) for n in run.nodes)
    if env.device_kind == "cuda":
        env.matched_gpu, env.match_rule = match_gpu(device_name, db, env.gpu_memory_bytes)
    else:
        env.match_rule = "CPU processes: the device is described by its own measurements"
    return env


def _env_from_nccl(run, db) -> Environment:
    name = run.device_names[0] if run.device_names else "unknown GPU"
    hosts = sorted(set(run.hosts)) or ["?"]
    per_node = max(1, run.n_ranks // max(1, len(hosts)))
    env = Environment(device_kind="cuda", device_name=name, n_ranks=run.n_ranks, n_nodes=len(hosts),
                      ranks_per_node=per_node, hosts=hosts, backend="nccl",
                      versions={"nccl": run.nccl_version})
    env.matched_gpu, env.match_rule = match_gpu(name, db)
    env.intra_topology = None
    return env


def read_inputs(paths: Sequence[str | Path], db=None) -> FitInputs:
    """Read profile directories and nccl-tests files (text or ``-J`` JSON) into :class:`FitInputs`."""
    from gpusim import nccl_tests
    from gpusim.profile import load_profile

    if db is None:
        from gpusim.hwdb import load

        db = load()
    if not paths:
        raise CalibrationError("give at least one profile directory (from `gpusim calibrate`) or nccl-tests output")
    profiles, runs, sources, warnings = [], [], [], []
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            prof = load_profile(p)
            profiles.append(prof)
            warnings += [f"{p}: {w}" for w in prof.warnings]
            sources.append({"path": str(p), "kind": "gpusim-profile", "runs": [r.run_id for r in prof.meta.runs],
                            "records": len(prof.records), "complete": prof.complete})
        elif p.is_file():
            if not nccl_tests.looks_like_nccl_tests(p):
                raise CalibrationError(f"{p}: neither a profile directory nor nccl-tests output (text with a "
                                       f"'#  size  count  type ...' table, or -J JSON)")
            got = nccl_tests.parse_file(p)
            for r in got:
                warnings += r.warnings
                if r.collective is None:
                    warnings.append(f"{p}: {r.binary} has no formula in the model; its rows are not used")
            runs += got
            sources.append({"path": str(p), "kind": "nccl-tests", "tests": [r.binary for r in got],
                            "rows": sum(len(r.rows) for r in got)})
        else:
            raise CalibrationError(f"{p}: no such file or directory")
    if profiles:
        env = _env_from_profile(profiles[0], db)
        for prof in profiles[1:]:
            other = _env_from_profile(prof, db)
            if other.device_name != env.device_name:
                warnings.append(f"{prof.path}: measured on {other.device_name!r}, the first profile on "
                                f"{env.device_name!r}: fitting them together assumes the same device")
    else:
        env = _env_from_nccl(runs[0], db)
    for r in runs:
        if r.device_names and r.device_names[0] != env.device_name:
            warnings.append(f"{r.source}: nccl-tests ran on {r.device_names[0]!r}, not {env.device_name!r}")
    records = [rec for prof in profiles for rec in prof.records]
    return FitInputs(env=env, records=records, nccl_runs=runs, sources=sources, warnings=warnings)


# =================================================================================================
# Least squares with uncertainties
# =================================================================================================

@dataclass
class BlockFit:
    """One least-squares problem: parameter names, values, log-space covariance and notes."""

    name: str
    names: list[str]
    values: np.ndarray
    log_cov: np.ndarray | None
    n_records: int
    n_noisy: int
    cost: float
    at_bound: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def std(self) -> dict[str, float | None]:
        out: dict[str, float | None] = {}
        for i, n in enumerate(self.names):
            if self.log_cov is None or n in self.at_bound or not np.isfinite(self.log_cov[i, i]):
                out[n] = None
            else:
                out[n] = float(self.values[i] * math.sqrt(max(self.log_cov[i, i], 0.0)))
        return out


def _solve(name: str, names: list[str], x0, lo, hi, residuals, n_records: int, n_noisy: int) -> BlockFit:
    """``least_squares`` in log-parameter space; covariance ``s^2 (J^T J)^-1`` (pseudo-inverse)."""
    from scipy.optimize import least_squares

    lx0, llo, lhi = np.log(np.asarray(x0, float)), np.log(np.asarray(lo, float)), np.log(np.asarray(hi, float))
    lx0 = np.clip(lx0, llo + 1e-9, lhi - 1e-9)
    res = least_squares(lambda lx: residuals(np.exp(lx)), lx0, bounds=(llo, lhi), method="trf", x_scale=1.0,
                        xtol=1e-12, ftol=1e-12, gtol=1e-12, max_nfev=2000)
    vals = np.exp(res.x)
    m, p = len(res.fun), len(names)
    at_bound = [n for n, x, a, b in zip(names, res.x, llo, lhi) if min(x - a, b - x) < 1e-6]
    cov = None
    notes = []
    if m > p:
        s2 = float(np.sum(res.fun**2) / (m - p))
        jtj = res.jac.T @ res.jac
        cov = np.linalg.pinv(jtj, rcond=1e-10) * s2
        # directions the data do not inform (singular J^T J) get no uncertainty
        free = [i for i, n in enumerate(names) if n not in at_bound]
        sv = np.linalg.svd(jtj[np.ix_(free, free)], compute_uv=False) if free else np.array([])
        if sv.size and sv[-1] < 1e-10 * max(sv[0], 1e-300):
            notes.append(f"{name}: the records do not determine every parameter independently (some are "
                         f"confounded); their uncertainties are not reliable")
    else:
        notes.append(f"{name}: {m} residuals for {p} parameters: no uncertainty can be estimated")
    if at_bound:
        notes.append(f"{name}: {', '.join(at_bound)} at a bound of the fit (no uncertainty)")
        if cov is not None:  # a parameter held at its bound does not vary: no spread along it
            for i, n in enumerate(names):
                if n in at_bound:
                    cov[i, :] = 0.0
                    cov[:, i] = 0.0
    return BlockFit(name=name, names=names, values=vals, log_cov=cov, n_records=n_records, n_noisy=n_noisy,
                    cost=float(res.cost), at_bound=at_bound, notes=notes)


def _weight(rec) -> float:
    return NOISY_WEIGHT if getattr(rec, "noisy", False) else 1.0


def _row(kind, group, label, x, x_unit, measured_s, fitted_s, n=1, n_noisy=0, used=True, **extra) -> dict:
    err = fitted_s / measured_s - 1.0 if (measured_s and math.isfinite(fitted_s)) else None
    return {"kind": kind, "group": group, "label": label, "x": x, "x_unit": x_unit, "measured_s": measured_s,
            "fitted_s": fitted_s, "error_frac": err, "n": n, "n_noisy": n_noisy, "used": used, **extra}


def _median(xs) -> float:
    return float(np.median(np.asarray(list(xs), dtype=float)))


# =================================================================================================
# 1. GEMM
# =================================================================================================

def fit_gemm(records) -> tuple[BlockFit | None, list[dict]]:
    """Per-precision ceiling ``C_p`` and one per-kernel time ``t_k``: ``t = flop / C_p + t_k``."""
    recs = [r for r in records if r.bench == "gemm"]
    if not recs:
        return None, []
    precs = sorted({r.precision for r in recs}, key=list(_GEMM_KEY.values()).index)
    names = [f"gemm.ceiling_flop_per_s.{p}" for p in precs] + ["gemm.kernel_tail_s"]
    pidx = np.array([precs.index(r.precision) for r in recs])
    flop = np.array([r.flop for r in recs])
    t = np.array([r.time_s for r in recs])
    w = np.array([_weight(r) for r in recs])
    x0 = [max(r.flop_per_s for r in recs if r.precision == p) for p in precs] + [max(0.05 * t.min(), 1e-8)]
    lo = [1e6] * len(precs) + [1e-10]
    hi = [1e19] * len(precs) + [1e-2]

    def resid(v):
        model = flop / v[pidx] + v[-1]
        return w * (np.log(model) - np.log(t))

    fit = _solve("gemm", names, x0, lo, hi, resid, len(recs), int(np.sum(w < 1)))
    v = fit.values
    rows = []
    groups: dict[tuple, list] = defaultdict(list)
    for r in recs:
        groups[(r.precision, r.m, r.n, r.k)].append(r)
    for (p, m, n, k), rs in sorted(groups.items(), key=lambda kv: (precs.index(kv[0][0]), kv[0][1] * kv[0][2] * kv[0][3])):
        f = rs[0].flop
        fitted = f / v[precs.index(p)] + v[-1]
        rows.append(_row("gemm", p, f"{p} {m}x{n}x{k}", f, "flop", _median(r.time_s for r in rs), float(fitted),
                         n=len(rs), n_noisy=sum(r.noisy for r in rs),
                         measured_rate=_median(r.flop_per_s for r in rs), fitted_rate=float(f / fitted),
                         rate_unit="flop/s"))
    return fit, rows


# =================================================================================================
# 2. Memory
# =================================================================================================

def fit_memory(records) -> tuple[BlockFit | None, list[dict]]:
    """Plateau bandwidth per copy kind: ``t = bytes / B`` (device copies count read + write traffic)."""
    recs = [r for r in records if r.bench == "memory" and r.kind in ("device_copy", "h2d_pinned", "h2d_pageable")]
    if not recs:
        return None, []
    kinds = [k for k in ("device_copy", "h2d_pinned", "h2d_pageable") if any(r.kind == k for r in recs)]
    biggest = {k: max(r.bytes for r in recs if r.kind == k) for k in kinds}
    used = [r for r in recs if r.bytes >= PLATEAU_FRAC * biggest[r.kind]]
    names = [f"memory.{k}_bytes_per_s" for k in kinds]
    kidx = np.array([kinds.index(r.kind) for r in used])
    traffic = np.array([float(r.traffic_bytes) for r in used])
    t = np.array([r.time_s for r in used])
    w = np.array([_weight(r) for r in used])
    x0 = [_median(r.traffic_bytes / r.time_s for r in used if r.kind == k) for k in kinds]

    def resid(v):
        return w * (np.log(traffic / v[kidx]) - np.log(t))

    fit = _solve("memory", names, x0, [1e6] * len(kinds), [1e14] * len(kinds), resid, len(used),
                 int(np.sum(w < 1)))
    if len(recs) > len(used):
        fit.notes.append(f"memory: {len(recs) - len(used)} copies below 1/8 of the largest size are latency- or "
                         f"cache-bound: reported, not fitted")
    rows = []
    groups: dict[tuple, list] = defaultdict(list)
    for r in recs:
        groups[(r.kind, r.bytes)].append(r)
    for (k, b), rs in sorted(groups.items(), key=lambda kv: (kinds.index(kv[0][0]), kv[0][1])):
        bw = fit.values[kinds.index(k)]
        fitted = rs[0].traffic_bytes / bw
        rows.append(_row("memory", k, f"{k} {units.format_bytes(b)}", float(b), "bytes", _median(r.time_s for r in rs),
                         float(fitted), n=len(rs), n_noisy=sum(r.noisy for r in rs),
                         used=b >= PLATEAU_FRAC * biggest[k],
                         measured_rate=_median(r.traffic_bytes / r.time_s for r in rs), fitted_rate=float(bw),
                         rate_unit="bytes/s (traffic)"))
    return fit, rows


# =================================================================================================
# 3. Collectives
# =================================================================================================

@dataclass(frozen=True)
class CollPoint:
    """One collective measurement, whatever it came from."""

    collective: str
    size_bytes: float
    n_ranks: int
    n_nodes: int
    level: str
    time_s: float
    weight: float
    source: str
    gpus_per_thread: int = 1  # nccl-tests -g: one thread launched it on this many GPUs

    @property
    def code(self) -> int:
        from gpusim.model.comm import COLLECTIVES

        return COLLECTIVES[self.collective]


def collective_points(inp: FitInputs) -> list[CollPoint]:
    pts = []
    for r in inp.of("collective"):
        pts.append(CollPoint(r.collective, float(r.bytes), r.n_ranks, r.n_nodes, r.level, r.time_s, _weight(r),
                             "profile"))
    for run in inp.nccl_runs:
        if run.collective is None or run.n_ranks < 2:
            continue
        for row in run.rows:
            if row.wrong:
                continue  # a wrong result is no measurement
            pts.append(CollPoint(run.collective, row.size_bytes, run.n_ranks, run.n_nodes, run.level, row.time_s, 1.0,
                                 Path(run.source).name, max(1, int(getattr(run, "gpus_per_thread", 1) or 1))))
    return pts


@dataclass
class LevelFit:
    """One level's fitted figures: a hop latency, and a bus bandwidth for all-reduce (``busbw``, what the
    model uses) with the other collectives' own bandwidths in ``by_coll`` (``busbw`` stands for all of
    them when the level has no all-reduce)."""

    busbw: float
    hop: float
    by_coll: dict[str, float] = field(default_factory=dict)

    def bw(self, coll: str) -> float:
        return self.by_coll.get(coll, self.busbw)


#: ModelParams fields a calibration from measured collectives sets: a measured sweep already contains NCCL's
#: protocol latencies (LL, LL128, Simple), so the fitted per-level hop latency and base latency are the whole
#: latency and the protocol tables add nothing; the large-message regime (Simple) is what goes to the model
MEASURED_PROTOCOLS: dict[str, Any] = {
    "nccl_base_latency_s": {"ring": [0.0, 0.0, 0.0], "tree": [0.0, 0.0, 0.0]},
    "nccl_hop_latency_s": {k: [0.0, 0.0, 0.0] for k in ("intra-ring", "intra-tree", "inter-ring", "inter-tree")},
    # [issue 18] the host's network post overhead is in the measured hops too
    "nccl_net_overhead_s": {"intel": 0.0, "amd": 0.0, "other": 0.0},
}


def _coll_model(pts: list[CollPoint], lv: dict[str, LevelFit], base: float, params: ModelParams):
    """Model times of ``pts`` (the model's own collective_time_s, ring/tree selection as in predictions, with the
    protocol latencies of :data:`MEASURED_PROTOCOLS`)."""
    from gpusim.model import comm as C

    tuning = _measured_tuning(params)

    out = np.empty(len(pts))
    intra, inter = lv.get("intra-node"), lv.get("inter-node")
    intra_hop = intra.hop if intra else (inter.hop if inter else 0.0)
    inter_hop = inter.hop if inter else intra_hop
    by: dict[str, list[int]] = defaultdict(list)
    for i, p in enumerate(pts):
        by[p.collective].append(i)
    for coll, idx in by.items():
        sel = [pts[i] for i in idx]
        intra_bw = intra.bw(coll) if intra else math.inf
        inter_bw = inter.bw(coll) if inter else math.inf
        if intra is None:  # no intra-node measurements: the ring's intra hops run at the network's pace
            intra_bw = inter_bw
        out[idx] = C.collective_time_s(
            C.COLLECTIVES[coll], np.array([p.size_bytes for p in sel]), np.array([float(p.n_ranks) for p in sel]),
            np.array([float(p.n_nodes) for p in sel]), intra_bw, intra_hop, inter_bw, inter_hop, False,
            base_latency_s=base, nvls_gain_frac=params.nvls_gain_frac, nvls_latency_s=params.nvls_latency_s,
            tree_busbw_frac=params.tree_busbw_frac, tuning=tuning)[0]
        # a run with one thread driving several GPUs (nccl-tests -g) is launch-bound at small sizes: the same floor as
        # in predictions, so the fitted latencies stay those of the fabric
        g = np.array([float(p.gpus_per_thread) for p in sel])
        if np.any(g > 1):
            out[idx] = C.thread_bound_time_s(out[idx], g, params.nccl_thread_launch_s)
    return out


_MEASURED_TUNING: dict[int, tuple[ModelParams, Any]] = {}


def _measured_tuning(params: ModelParams):
    """The collective tuning of ``params`` with :data:`MEASURED_PROTOCOLS` (cached per params object)."""
    from gpusim.model import comm as C

    hit = _MEASURED_TUNING.get(id(params))
    if hit is None or hit[0] is not params:
        if len(_MEASURED_TUNING) > 16:
            _MEASURED_TUNING.clear()
        hit = (params, C.tuning_from_params(params.replace(**MEASURED_PROTOCOLS)))
        _MEASURED_TUNING[id(params)] = hit
    return hit[1]


def _in_level(p: CollPoint, L: str) -> bool:
    return p.level == L or (L == "inter-node" and p.level == "global")


def _levels_of(pts: list[CollPoint]) -> list[str]:
    return [L for L in _LEVELS if any(_in_level(p, L) for p in pts)]


def _fit_levels(pts: list[CollPoint], fit_base: bool, params: ModelParams, tag: str):
    """Per level: one hop latency, one bus bandwidth per collective (all-reduce's is the model's)."""
    from gpusim.model.comm import bus_factor, ring_steps

    levels = _levels_of(pts)
    layout = []  # (name, level, collective or None for the level's main bandwidth / "hop")
    x0, lo, hi = [], [], []
    for L in levels:
        mine = [p for p in pts if _in_level(p, L)]
        colls = sorted({p.collective for p in mine})
        main = "all_reduce" if "all_reduce" in colls else None
        groups = [(main, [p for p in mine if main is None or p.collective == main])]
        groups += [(c, [p for p in mine if p.collective == c]) for c in colls if main is not None and c != main]
        for c, ps in groups:
            big = max(ps, key=lambda p: p.size_bytes)
            layout.append((f"comm.{L}.busbw_bytes_per_s" + ("" if c in (None, main) else f".{c}"), L,
                           "main" if c in (None, main) else c))
            x0.append(max(float(bus_factor(big.code, big.n_ranks)) * big.size_bytes / big.time_s, 1e4))
            lo.append(1e3)
            hi.append(1e14)
        small = min(mine, key=lambda p: p.size_bytes)
        layout.append((f"comm.{L}.hop_s", L, "hop"))
        x0.append(max(small.time_s / max(float(ring_steps(small.code, small.n_ranks)), 1.0) / 2.0, 1e-8))
        lo.append(1e-10)
        hi.append(10.0)
    if fit_base:
        layout.append(("comm.base_latency_s", None, "base"))
        x0.append(max(params.coll_base_latency_s, 1e-7))
        lo.append(1e-10)
        hi.append(10.0)
    names = [n for n, _, _ in layout]
    t = np.array([p.time_s for p in pts])
    w = np.array([p.weight for p in pts])

    def unpack(v):
        lv: dict[str, LevelFit] = {}
        for L in levels:
            lv[L] = LevelFit(busbw=0.0, hop=0.0)
        base = params.coll_base_latency_s
        for (n, L, what), x in zip(layout, v):
            if what == "main":
                lv[L].busbw = float(x)
            elif what == "hop":
                lv[L].hop = float(x)
            elif what == "base":
                base = float(x)
            else:
                lv[L].by_coll[what] = float(x)
        return lv, base

    def resid(v):
        lv, base = unpack(v)
        return w * (np.log(_coll_model(pts, lv, base, params)) - np.log(t))

    fit = _solve(tag, names, x0, lo, hi, resid, len(pts), int(np.sum(w < 1)))
    return fit, unpack(fit.values)


def _bic(cost: float, m: int, k: int) -> float:
    rss = max(2.0 * cost, 1e-300)
    return m * math.log(rss / m) + k * math.log(m)


def _fit_with_regimes(pts: list[CollPoint], params: ModelParams, tag: str):
    """One fit, or two message-size regimes when the Bayesian information criterion says so.

    A split is tried between every pair of neighbouring sizes that leaves each regime at least
    :data:`MIN_REGIME_SIZES` distinct sizes and twice as many points as parameters; the base latency stays
    as in the single fit. Returns ``(fit, lv, base, regimes, predict)``: ``lv`` the model's
    (large-message) per-level figures, ``predict(points)`` the fitted time of any points.
    """
    levels = _levels_of(pts)
    sizes_per_level = {L: {p.n_ranks for p in pts if p.level == L} for L in levels}
    fit_base = any(len(v) >= 2 for v in sizes_per_level.values())
    fit, (lv, base) = _fit_levels(pts, fit_base, params, tag)
    if not fit_base:
        fit.notes.append(f"{tag}: one group size per level, so the per-call base latency cannot be told from the "
                         f"per-hop latency: coll_base_latency_s kept at {params.coll_base_latency_s * 1e6:g} us")
    regimes: dict[str, Any] = {}
    sizes = sorted({p.size_bytes for p in pts})
    pb = params.replace(coll_base_latency_s=base)
    n_par = len(fit.names) - int(fit_base)
    best = None
    for i in range(MIN_REGIME_SIZES, len(sizes) - MIN_REGIME_SIZES + 1):
        cut = sizes[i]
        small = [p for p in pts if p.size_bytes < cut]
        large = [p for p in pts if p.size_bytes >= cut]
        if min(len(small), len(large)) < 2 * n_par or _levels_of(small) != levels or _levels_of(large) != levels:
            continue
        fs, (lv_s, _) = _fit_levels(small, False, pb, f"{tag} (small messages)")
        fl, (lv_l, _) = _fit_levels(large, False, pb, f"{tag} (large messages)")
        if len(fs.names) != n_par or len(fl.names) != n_par:
            continue  # a collective missing on one side: not the same model
        if best is None or fs.cost + fl.cost < best[0]:
            best = (fs.cost + fl.cost, cut, fs, fl, lv_s, lv_l)
    small_lv, cut = None, None
    if best is not None:
        m = len(pts)
        bic1 = _bic(fit.cost, m, len(fit.names))
        bic2 = _bic(best[0], m, 2 * n_par + int(fit_base))
        regimes = {"single_bic": bic1, "split_bic": bic2, "split_at_bytes": best[1], "kept": False}
        if bic1 - bic2 > REGIME_BIC_GAIN:
            _, cut, fs, fl, small_lv, lv_l = best
            regimes.update({"kept": True, "small": dict(zip(fs.names, map(float, fs.values))),
                            "large": dict(zip(fl.names, map(float, fl.values)))})
            notes = [n for n in fit.notes if "base latency" in n]
            fl.name = tag
            fl.notes = [*notes, (f"{tag}: two message-size regimes (split at {units.format_bytes(cut)}; BIC "
                                 f"{bic1:.1f} -> {bic2:.1f}); the large-message regime goes to the model")]
            if fit_base:
                fl.names.append("comm.base_latency_s")
                fl.values = np.append(fl.values, base)
                if fl.log_cov is not None and fit.log_cov is not None:
                    cov = np.zeros((len(fl.names), len(fl.names)))
                    cov[:-1, :-1] = fl.log_cov
                    cov[-1, -1] = fit.log_cov[-1, -1]
                    fl.log_cov = cov
            fit, lv = fl, lv_l

    def predict(points: list[CollPoint]) -> np.ndarray:
        out = _coll_model(points, lv, base, params)
        if small_lv is not None:
            small = np.array([p.size_bytes < cut for p in points])
            if small.any():
                out = np.where(small, _coll_model(points, small_lv, base, params), out)
        return out

    return fit, lv, base, regimes, predict


def fit_collectives(pts: list[CollPoint], params: ModelParams = DEFAULT_PARAMS):
    """Per-level hop latency and bus bandwidth (and the per-call base latency when it is identifiable).

    The model has one bus bandwidth and one hop latency per level for every collective. The fit shares
    the hop latency of a level between its collectives and gives each collective its own bus bandwidth;
    the model takes the **all-reduce** bandwidth (the collective of DDP, of the held-out steps, and
    nccl-tests' headline figure), or one bandwidth shared by all collectives when a level has no
    all-reduce. The others (``comm.<level>.busbw_bytes_per_s.<collective>``) are reported, so that a
    backend whose reduce-scatter or all-gather runs far below its all-reduce (gloo on CPUs; NVLS speeds
    up only all-reduce) shows it; every row's "fitted" time is what the model predicts with the
    level's figures.

    Returns ``(BlockFit | None, rows, extra)`` with ``extra = {"regimes": ...}``.
    """
    if not pts:
        return None, [], {}
    fit, lv, base, regimes, predict = _fit_with_regimes(pts, params, "collectives")
    model_lv = {L: LevelFit(busbw=f.busbw, hop=f.hop) for L, f in lv.items()}
    own = predict(pts)
    model = _coll_model(pts, model_lv, base, params)
    if regimes.get("kept"):
        cut = regimes["split_at_bytes"]
        model = np.where([p.size_bytes < cut for p in pts], own, model)
    rows = []
    groups: dict[tuple, list[int]] = defaultdict(list)
    for i, p in enumerate(pts):
        groups[(p.level, p.collective, p.n_ranks, p.n_nodes, p.source, p.size_bytes)].append(i)
    from gpusim.model.comm import bus_factor

    for (L, c, n, nn, src, s), idx in sorted(groups.items()):
        meas = _median(pts[i].time_s for i in idx)
        fit_t = float(model[idx[0]])
        f = float(bus_factor(pts[idx[0]].code, n))
        rows.append(_row("collective", f"{c} {L} n={n}" + (f" nodes={nn}" if nn > 1 else "") +
                         ("" if src == "profile" else f" ({src})"), f"{c} {units.format_bytes(s)}", s, "bytes", meas,
                         fit_t, n=len(idx), n_noisy=sum(pts[i].weight < 1 for i in idx),
                         own_fit_s=float(own[idx[0]]), measured_rate=f * s / meas, fitted_rate=f * s / fit_t,
                         rate_unit="bus bytes/s"))
    return fit, rows, {"regimes": regimes}


def residuals_by_size(rows: list[dict]) -> list[dict]:
    """Median relative error of the collective rows per level, collective and size bucket (where the model
    misses), model time vs measured."""
    out: dict[tuple, list[float]] = defaultdict(list)
    for r in rows:
        if r["kind"] != "collective" or r["error_frac"] is None:
            continue
        level = "inter-node" if "inter-node" in r["group"] else "global" if "global" in r["group"] else "intra-node"
        coll = r["group"].split(" ", 1)[0]
        # buckets of a factor 16 from 1 KiB: 1 KiB, 16 KiB, 256 KiB, 4 MiB, 64 MiB, 1 GiB ...
        k = max(0, math.floor(math.log(max(r["x"], 1.0) / units.KIB, 16)))
        out[(level, coll, units.KIB * 16.0**k)].append(r["error_frac"])
    return [{"level": L, "collective": c, "size_from_bytes": d, "median_error_frac": _median(v), "n": len(v)}
            for (L, c, d), v in sorted(out.items())]


def report_p2p(records) -> list[dict]:
    """Per pair: bandwidth at the largest size, time at the smallest; pairs below 70% of the median flagged."""
    recs = [r for r in records if r.bench == "p2p"]
    pairs: dict[tuple, list] = defaultdict(list)
    for r in recs:
        pairs[(r.host, r.src, r.dst)].append(r)
    out = []
    for (host, a, b), rs in sorted(pairs.items()):
        big = max(rs, key=lambda r: r.bytes)
        small = min(rs, key=lambda r: r.bytes)
        out.append({"host": host, "src": a, "dst": b, "path": big.path, "bytes": big.bytes,
                    "bytes_per_s": big.bytes_per_s, "small_bytes": small.bytes, "small_time_s": small.time_s,
                    "noisy": any(r.noisy for r in rs), "slow": False})
    if len(out) >= 2:
        med = _median(o["bytes_per_s"] for o in out)
        for o in out:
            o["slow"] = o["bytes_per_s"] < SLOW_PAIR_FRAC * med
    return out


# =================================================================================================
# 4. Data loader
# =================================================================================================

def fit_dataloader(records) -> tuple[BlockFit | None, list[dict]]:
    recs = [r for r in records if r.bench == "dataloader" and r.workers > 0]
    if not recs:
        return None, []
    cores = np.array([min(float(r.workers), r.cpu_cores_per_rank) for r in recs])
    rate = np.array([r.samples_per_s for r in recs])
    cost = np.array([r.sample_cost_s for r in recs])
    w = np.array([_weight(r) for r in recs])

    def resid(v):
        return w * (np.log(cores * v[0] / cost) - np.log(rate))

    fit = _solve("dataloader", ["data.loader_core_eff_frac"], [0.8], [1e-3], [1.0], resid, len(recs),
                 int(np.sum(w < 1)))
    rows = []
    for r, c in zip(recs, cores):
        fitted_rate = c * fit.values[0] / r.sample_cost_s
        rows.append(_row("dataloader", f"{r.workers} workers", f"{r.workers} workers batch {r.batch} rank {r.rank}",
                         float(r.workers), "workers", r.batch / r.samples_per_s, r.batch / fitted_rate,
                         n_noisy=int(r.noisy), measured_rate=r.samples_per_s, fitted_rate=fitted_rate,
                         rate_unit="samples/s"))
    return fit, rows


# =================================================================================================
# Hardware description and ModelParams from the fitted values
# =================================================================================================

def _pcie_link_id(env: Environment, gpu, db) -> str:
    if env.pcie_generation and env.pcie_width:
        lid = f"pcie{env.pcie_generation}-x{env.pcie_width}"
        if lid in db.links:
            return lid
    if gpu is not None:
        lid = db.pcie_link_id(gpu)
        if lid in db.links:
            return lid
    return "pcie4-x16" if "pcie4-x16" in db.links else next(i for i, lk in db.links.items() if lk.kind == "pcie")


_PATH_OF_TOPOLOGY = {"nvswitch": "nvswitch", "nvlink-mesh": "nvlink-mesh", "nvlink-bridge-pairs": "nvlink-bridge",
                     "pcie-switch": "pcie-switch", "pcie-host": "pcie-host", "pcie-cross-socket": "pcie-cross-socket"}


def _source(title: str):
    from gpusim.hardware import Source

    return Source.model_construct(title=title, url=None, fields=["*"], accessed=None, primary=True, estimate=False)


def build_hardware(values: dict[str, float], env: Environment, db) -> dict[str, Any]:
    """The calibrated machine as hardware-database entries (``gpu``, ``node``, ``links``).

    A device in the database keeps its datasheet (the efficiencies are relative to it), under the id
    ``calibrated-<id>``; a CPU or unknown device gets its measured GEMM ceilings as its dense peak and its
    measured copy bandwidth as its memory bandwidth. These entries are built with ``model_construct``
    because the database's plausibility bounds (meant to catch typos in datasheets, e.g. fp32 >= 0.5
    TFLOP/s) reject a CPU measured as a "GPU"; the values are measurements, not typos.
    """
    from gpusim.hardware import GPU, DenseTflops, Link, Node, Pcie

    known = db.gpus.get(env.matched_gpu) if env.matched_gpu else None
    src = [_source(f"gpusim fit: measured on {env.device_name} ({', '.join(env.hosts)})")]
    if known is not None:
        gpu = known.model_copy(update={"id": f"calibrated-{known.id}", "name": f"{known.name} (calibrated)",
                                       "sources": list(known.sources) + src})
    else:
        ceilings = {k.rsplit(".", 1)[1]: v for k, v in values.items() if k.startswith("gemm.ceiling_flop_per_s.")}
        if not ceilings:
            raise CalibrationError(f"the calibration has no GEMM measurements and {env.device_name!r} is not in the "
                                   f"hardware database, so the calibrated device cannot be described: predict with "
                                   f"--gpu ID (its efficiencies and links will be used)")
        mem_bw = values.get("memory.device_copy_bytes_per_s")
        ram = env.ram_bytes or 16 * units.GIB
        mem_bytes = env.gpu_memory_bytes or ram / max(env.ranks_per_node, 1)
        tfl = DenseTflops.model_construct(**{**{k: None for k in DenseTflops.model_fields},
                                             **{k: v / units.TERA for k, v in ceilings.items()}})
        is_cpu = env.device_kind == "cpu"
        gpu = GPU.model_construct(
            id=f"calibrated-{slug(env.device_name)}",
            name=f"{env.device_name} ({'CPU process' if is_cpu else 'device'} as measured by gpusim calibrate)",
            sources=src, notes="built by gpusim fit from the measured GEMM ceilings and copy bandwidth",
            vendor="nvidia" if not is_cpu else "intel", architecture="cpu" if is_cpu else "unknown",
            market="datacenter", form_factor="pcie", release_year=_dt.date.today().year,
            memory_gib=mem_bytes / units.GIB, memory_type=None,
            memory_gbyte_per_s=(mem_bw if mem_bw else 10e9) / units.GB, dense_tflop_per_s=tfl,
            tensor_accumulate_note=None, peer_link=None,
            pcie=Pcie.model_construct(generation=env.pcie_generation or 4, lanes=env.pcie_width or 16),
            p2p_pcie=True, tdp_w=100.0, sm_count=None)
    pcie_id = _pcie_link_id(env, known, db)
    links = {}
    topo = env.intra_topology if env.intra_topology not in (None, "single") else "pcie-host"
    intra_bw = values.get("comm.intra-node.busbw_bytes_per_s")
    intra_hop = values.get("comm.intra-node.hop_s")
    base_intra = db.links[pcie_id]
    if env.p2p_disabled:  # [issue 18] measured through host memory: the link is host staging, whatever the wiring
        kind, bw = "host-staged", base_intra.bandwidth_gbyte_per_s_per_direction
    elif topo in ("nvswitch", "nvlink-mesh", "nvlink-bridge-pairs") and known is not None and known.peer_link:
        kind, bw = {"nvswitch": "nvswitch", "nvlink-mesh": "nvlink-mesh"}.get(topo, "nvlink-bridge"), \
            known.peer_link.gbyte_per_s_per_direction
    else:
        kind, bw = ("host-staged" if env.device_kind == "cpu" else "pcie"), base_intra.bandwidth_gbyte_per_s_per_direction
    node_slug = slug(env.device_name)
    intra_id = f"calibrated-{node_slug}-intra"
    links[intra_id] = Link.model_construct(
        id=intra_id, name=f"intra-node path of the calibrated machine ({topo}; measured bus bandwidth "
                          f"{(intra_bw or 0) / units.GB:.3g} GB/s replaces link x efficiency)",
        sources=src, notes=None, kind=kind, scope="intra-node", generation=None,
        bandwidth_gbyte_per_s_per_direction=(intra_bw / units.GB) if intra_bw else bw,
        signalling_gbit_per_s=None, latency_us=(intra_hop or base_intra.latency_s) / units.US,
        nvls=False, in_network_reduction=False)
    nic_id = None
    if env.n_nodes > 1 or values.get("comm.inter-node.busbw_bytes_per_s"):
        nic_id = f"calibrated-{node_slug}-inter"
        inter_bw = values.get("comm.inter-node.busbw_bytes_per_s", 10e9)
        links[nic_id] = Link.model_construct(
            id=nic_id, name="network of the calibrated machine (measured inter-node bus bandwidth, all NICs of a node)",
            sources=src, notes=None, kind="ethernet", scope="inter-node", generation=None,
            bandwidth_gbyte_per_s_per_direction=inter_bw / units.GB, signalling_gbit_per_s=None,
            latency_us=values.get("comm.inter-node.hop_s", 5e-6) / units.US, nvls=False, in_network_reduction=False)
    g = max(env.ranks_per_node, 1)
    node = Node.model_construct(
        id=f"calibrated-{node_slug}-node", name=f"{g} x {env.device_name} on {env.hosts[0] if env.hosts else '?'} "
                                               f"(calibrated)",
        sources=src, notes="built by gpusim fit; storage bandwidth is not measured (3 GB/s assumed)",
        kind="server", gpu=gpu.id, gpus_per_node=g, intra_link=intra_id,
        intra_topology=topo if g > 1 else "single", pcie_link=pcie_id, p2p=not env.p2p_disabled, socket_link=None,
        nic_link=nic_id, nics_per_node=1 if nic_id else 0, cpu_model=env.cpu_model,
        cpu_cores=int(env.cpu_cores or max(g, 1) * 8), ram_gib=(env.ram_bytes or 64 * units.GIB) / units.GIB,
        numa_sockets=int(env.cpu_sockets or 1), storage_gbyte_per_s=3.0, max_power_w=None)
    return {"gpu": gpu, "node": node, "links": links}


def _peak(gpu, key: str) -> float | None:
    return gpu.peak_flop_per_s(key) if gpu is not None else None


def calibrated_params(values: dict[str, float], env: Environment, db, base: ModelParams = DEFAULT_PARAMS,
                      hardware: dict | None = None) -> ModelParams:
    """ModelParams for the calibrated machine itself (efficiencies, overheads, measured links)."""
    hw = hardware or build_hardware(values, env, db)
    gpu = hw["gpu"]
    upd: dict[str, Any] = {}
    train = values.get("compute.train_frac", DEFAULT_TRAIN_FRAC)
    eff = dict(base.matmul_eff_frac)
    for prec, key in _GEMM_KEY.items():
        c = values.get(f"gemm.ceiling_flop_per_s.{key}")
        peak = _peak(gpu, key)
        if c and peak:
            eff[prec] = c / peak * train
    upd["matmul_eff_frac"] = eff
    # the LLM layouts' per-GEMM model takes the measured ceiling itself (its shape effects are modelled)
    upd["gemm_ceiling_flop_per_s"] = {k: float(values[f"gemm.ceiling_flop_per_s.{k}"]) for k in _GEMM_KEY.values()
                                      if values.get(f"gemm.ceiling_flop_per_s.{k}")}
    if "memory.device_copy_bytes_per_s" in values:
        upd["mem_eff_frac"] = float(min(1.0, values["memory.device_copy_bytes_per_s"] / gpu.memory_bytes_per_s))
    pcie = db.links[hw["node"].pcie_link].bandwidth_bytes_per_s
    for k in ("h2d_pinned", "h2d_pageable"):
        if f"memory.{k}_bytes_per_s" in values:
            upd[f"{k}_eff_frac"] = float(min(1.0, values[f"memory.{k}_bytes_per_s"] / pcie))
    cpu = env.device_kind == "cpu"
    if "gemm.kernel_tail_s" in values and not cpu:
        upd["kernel_tail_s"] = min(values["gemm.kernel_tail_s"], 1e-3)
    if "compute.op_overhead_s" in values:
        upd["kernel_tail_s" if cpu else "launch_cpu_s"] = min(values["compute.op_overhead_s"], 1e-3)
    if cpu:
        # dispatch and compute run one after the other on a CPU: the whole per-operator cost is kernel_tail_s
        upd["launch_cpu_s"] = 0.0
        upd.setdefault("kernel_tail_s", min(values.get("gemm.kernel_tail_s", base.kernel_tail_s), 1e-3))
    if "compute.step_overhead_s" in values:
        upd["step_overhead_s"] = min(values["compute.step_overhead_s"], 1.0)
    if "sync.jitter_frac" in values:
        upd["jitter_frac"] = float(min(values["sync.jitter_frac"], 1.0))
    if "data.loader_core_eff_frac" in values:
        upd["loader_core_eff_frac"] = float(min(values["data.loader_core_eff_frac"], 1.0))
    if "comm.base_latency_s" in values:
        upd["coll_base_latency_s"] = min(values["comm.base_latency_s"], 1e-2)
    bw, lat = {}, {}
    for L in _LEVELS:
        if f"comm.{L}.busbw_bytes_per_s" in values:
            bw[L] = values[f"comm.{L}.busbw_bytes_per_s"]
            lat[L] = values[f"comm.{L}.hop_s"]
    upd["busbw_override_bytes_per_s"] = bw
    upd["latency_override_s"] = lat
    if bw:  # measured per-level figures already hold NCCL's protocol costs: no protocol latencies on top
        upd.update(MEASURED_PROTOCOLS)
    return ModelParams.model_validate({**base.model_dump(), **upd})


def transferred_params(values: dict[str, float], env: Environment, target_gpu: str, db,
                       base: ModelParams = DEFAULT_PARAMS) -> tuple[ModelParams, list[str]]:
    """ModelParams for another GPU (``--gpu``): what transfers from the calibrated machine, with notes.

    - same GPU model: matmul efficiencies (per measured precision, relative to the datasheet), memory and
      host-copy efficiencies, per-kernel and per-operator overheads, step overhead;
    - another GPU in the database: the same fractions of the datasheet, noted as transferred;
    - a CPU or unknown calibrated device: nothing device-specific (its efficiencies are relative to its
      own measured ceilings): defaults;
    - never the absolute bus bandwidths or latencies of the calibrated machine's links; the intra-node
      path class efficiency (``busbw_eff_frac``) when the calibrated GPUs' path class and link are known.
    """
    notes: list[str] = []
    src = env.matched_gpu
    if src is None:
        notes.append(f"calibration of {env.device_name!r} ({'CPU' if env.device_kind == 'cpu' else 'not in the database'})"
                     f": its efficiencies are relative to its own measured ceilings and do not transfer to "
                     f"{target_gpu}; default parameters used")
        return base, notes
    gsrc = db.gpus[src]
    upd: dict[str, Any] = {}
    train = values.get("compute.train_frac", DEFAULT_TRAIN_FRAC)
    eff = dict(base.matmul_eff_frac)
    moved = []
    for prec, key in _GEMM_KEY.items():
        c = values.get(f"gemm.ceiling_flop_per_s.{key}")
        peak = gsrc.peak_flop_per_s(key)
        if c and peak:
            eff[prec] = c / peak * train
            moved.append(prec)
    upd["matmul_eff_frac"] = eff
    if "memory.device_copy_bytes_per_s" in values:
        upd["mem_eff_frac"] = float(min(1.0, values["memory.device_copy_bytes_per_s"] / gsrc.memory_bytes_per_s))
        moved.append("memory")
    pcie = db.links[_pcie_link_id(env, gsrc, db)].bandwidth_bytes_per_s
    for k in ("h2d_pinned", "h2d_pageable"):
        if f"memory.{k}_bytes_per_s" in values:
            upd[f"{k}_eff_frac"] = float(min(1.0, values[f"memory.{k}_bytes_per_s"] / pcie))
    if "gemm.kernel_tail_s" in values:
        upd["kernel_tail_s"] = min(values["gemm.kernel_tail_s"], 1e-3)
    if "compute.op_overhead_s" in values:
        upd["launch_cpu_s"] = min(values["compute.op_overhead_s"], 1e-3)
    if "compute.step_overhead_s" in values:
        upd["step_overhead_s"] = min(values["compute.step_overhead_s"], 1.0)
    path = _PATH_OF_TOPOLOGY.get(env.intra_topology or "")
    if path and env.p2p_disabled:  # [issue 18] the measurement is host staging's (NCCL_P2P_DISABLE was set)
        path = "host-staged"
    if path and "comm.intra-node.busbw_bytes_per_s" in values:
        if path == "host-staged":
            link = pcie
        elif path in ("nvswitch", "nvlink-mesh", "nvlink-bridge") and gsrc.peer_link_bytes_per_s:
            link = gsrc.peer_link_bytes_per_s
        elif path.startswith("pcie"):
            link = pcie
        else:
            link = None
        if link:
            be = dict(base.busbw_eff_frac)
            be[path] = float(min(1.0, values["comm.intra-node.busbw_bytes_per_s"] / link))
            upd["busbw_eff_frac"] = be
            notes.append(f"intra-node {path} bus-bandwidth efficiency {be[path]:.2f} (measured busbw / link) "
                         f"transferred from the calibrated machine")
    if target_gpu == src:
        notes.append(f"efficiencies of the calibrated {src} applied ({', '.join(moved) or 'overheads only'})")
    else:
        notes.append(f"efficiencies measured on {src} transferred to {target_gpu} as fractions of its datasheet "
                     f"({', '.join(moved) or 'overheads only'}): an assumption, calibrate {target_gpu} to confirm")
    return ModelParams.model_validate({**base.model_dump(), **upd}), notes


def extended_db(db, hardware: dict):
    """A copy of ``db`` with the calibrated machine's entries added (the cached database is not touched)."""
    gpus = dict(db.gpus)
    nodes = dict(db.nodes)
    links = dict(db.links)
    gpus[hardware["gpu"].id] = hardware["gpu"]
    nodes[hardware["node"].id] = hardware["node"]
    links.update(hardware["links"])
    origin = dict(db.origin)
    for kind, e in (("gpu", hardware["gpu"]), ("node", hardware["node"]), *(("link", lk) for lk in hardware["links"].values())):
        origin[(kind, e.id)] = "calibration"
    return dataclasses.replace(db, gpus=gpus, nodes=nodes, links=links, origin=origin)


# =================================================================================================
# 5. DDP baselines and the held-out DDP steps
# =================================================================================================

def _optimizer_name(rec) -> str:
    o = rec.optimizer.lower().replace("_", "-")
    if o == "sgd" and "momentum" in (rec.workload_desc or "").lower():
        return "sgd-momentum"
    from typing import get_args

    from gpusim.strategy import Optimizer

    # (Muon needs a transformer's weight shapes, which the DDP baseline workloads built from torch modules lack:
    # gpusim.optimizers.muon_split; such a record is fitted as Adam, as any optimizer gpusim does not model)
    return o if o in get_args(Optimizer) and o != "muon" else "adam"


def ddp_scenario(rec, hw: dict, *, baseline_throughput: float | None = None):
    """The Scenario that predicts one DDP-step record on the calibrated machine.

    The workload is :meth:`gpusim.workload.Workload.custom` from the record's description; the record's
    activation bytes are measured in the training dtype, while a Workload counts 16-bit activations
    (the model scales by ``ACT_ELEM_BYTES / 2``), so they are divided by that factor here.
    """
    from gpusim.simulation import Scenario
    from gpusim.strategy import ACT_ELEM_BYTES
    from gpusim.workload import Workload

    prec = rec.precision if rec.precision in _GEMM_KEY else "fp32"
    wl = Workload.custom(params=rec.params, fwd_flop_per_sample=rec.fwd_flop_per_sample,
                         act_bytes_per_sample=max(rec.act_bytes_per_sample, 1.0) / (ACT_ELEM_BYTES[prec] / 2.0),
                         fwd_kernels=rec.fwd_kernels, name=f"{rec.workload} (calibration reference)")
    return Scenario.create(workload=wl, gpu=hw["gpu"].id, node=hw["node"].id, gpus=rec.n_ranks,
                           nodes=rec.n_nodes, per_gpu_batch=rec.per_rank_batch, precision=prec,
                           optimizer=_optimizer_name(rec), bucket_mib=rec.bucket_cap_mb, kind="ddp",
                           num_workers=None, baseline_throughput=baseline_throughput)


def _baseline_key(rec) -> tuple:
    return (rec.workload, rec.per_rank_batch, rec.precision)


def fit_baselines(records, values: dict[str, float], env: Environment, db, base: ModelParams):
    """``train_frac``, the per-operator overhead and ``step_overhead_s`` from the one-rank DDP baselines."""
    from gpusim.model.step import evaluate
    from gpusim.simulation import (
        resolve_hardware,
        resolve_workload,
        scenario_row,
        stack_rows,
    )

    recs = [r for r in records if r.bench == "ddp_step" and r.n_ranks == 1]
    notes = []
    if not recs:
        return None, [], notes
    hw = build_hardware(values, env, db)
    xdb = extended_db(db, hw)
    usable, scns = [], []
    for r in recs:
        key = _GEMM_KEY.get(r.precision)
        if key is None or hw["gpu"].peak_flop_per_s(key) is None:
            notes.append(f"baseline {r.workload} batch {r.per_rank_batch}: no {key} GEMM ceiling for {r.precision}")
            continue
        try:
            scn = ddp_scenario(r, hw)
        except GpusimError as e:
            notes.append(f"baseline {r.workload}: {e}")
            continue
        usable.append(r)
        scns.append((scn, resolve_hardware(scn, xdb), resolve_workload(scn)))
    if not usable:
        return None, [], notes
    t = np.array([r.time_s for r in usable])
    w = np.array([_weight(r) for r in usable])
    cpu = env.device_kind == "cpu"
    names = ["compute.train_frac", "compute.op_overhead_s", "compute.step_overhead_s"]

    def params_for(v) -> ModelParams:
        vals = {**values, "compute.train_frac": v[0], "compute.op_overhead_s": v[1],
                "compute.step_overhead_s": v[2]}
        return calibrated_params(vals, env, db, base, hardware=hw)

    def predict(v):
        p = params_for(v)
        rows = [scenario_row(s, h, wl, p) for s, h, wl in scns]
        return evaluate(stack_rows(rows), p)["step_s"]

    def resid(v):
        return w * (np.log(predict(v)) - np.log(t))

    x0 = [0.5, base.kernel_tail_s if cpu else base.launch_cpu_s, base.step_overhead_s]
    if len(usable) <= 2:  # too few to separate three parameters: keep the overheads at their defaults
        names = names[:1]

        def resid1(v):
            return resid([v[0], x0[1], x0[2]])

        fit = _solve("ddp-baselines", names, x0[:1], [1e-3], [4.0], resid1, len(usable), int(np.sum(w < 1)))
        fit.notes.append("ddp-baselines: two or fewer baselines: only train_frac fitted, overheads kept")
        full = [fit.values[0], x0[1], x0[2]]
    else:
        fit = _solve("ddp-baselines", names, x0, [1e-3, 1e-9, 1e-7], [4.0, 1e-3, 1.0], resid, len(usable),
                     int(np.sum(w < 1)))
        full = list(fit.values)
    pred = predict(full)
    rows = []
    for r, pr in zip(usable, pred):
        rows.append(_row("ddp_baseline", r.workload, f"{r.workload} batch {r.per_rank_batch} x1 "
                         f"({r.concurrent_ranks} concurrent)", float(r.per_rank_batch), "samples per rank",
                         r.time_s, float(pr), n_noisy=int(r.noisy)))
    # jitter: the slow half of each rank's step-time spread, as a coefficient of variation
    cv = [max(r.time_s_p90 - r.time_s, 0.0) / (_Z90 * r.time_s) for r in recs]
    jit = BlockFit(name="jitter", names=["sync.jitter_frac"], values=np.array([max(_median(cv), 1e-6)]),
                   log_cov=None, n_records=len(cv), n_noisy=sum(r.noisy for r in recs), cost=0.0)
    if len(cv) >= 2:
        # standard error of a median ~ 1.25 sigma / sqrt(n), in log space
        lcv = np.log(np.maximum(cv, 1e-6))
        jit.log_cov = np.array([[(1.2533 * np.std(lcv, ddof=1)) ** 2 / len(cv)]])
    return [fit, jit], rows, notes


def predict_held_out(records, values: dict[str, float], env: Environment, db, params: ModelParams,
                     hardware: dict) -> dict:
    """Predict every multi-rank ``sync=True`` DDP step (none of them was fitted) and summarise the errors."""
    from gpusim.simulation import simulate

    held = [r for r in records if r.bench == "ddp_step" and r.n_ranks > 1 and r.sync]
    base = {_baseline_key(r): r for r in records if r.bench == "ddp_step" and r.n_ranks == 1}
    nosync = {(r.workload, r.per_rank_batch, r.n_ranks, r.precision): r for r in records
              if r.bench == "ddp_step" and r.n_ranks > 1 and not r.sync}
    xdb = extended_db(db, hardware)
    rows, errs, anch_errs, skipped = [], [], [], []
    for r in held:
        try:
            res = simulate(ddp_scenario(r, hardware), db=xdb, params=params, recommend=False)
        except GpusimError as e:
            skipped.append(f"{r.workload} batch {r.per_rank_batch} n={r.n_ranks}: {e}")
            continue
        err = res.step_s / r.time_s - 1.0
        errs.append(err)
        row = {"workload": r.workload, "per_rank_batch": r.per_rank_batch, "n_ranks": r.n_ranks,
               "n_nodes": r.n_nodes, "precision": r.precision, "measured_s": r.time_s,
               "measured_p10_s": r.time_s_p10, "measured_p90_s": r.time_s_p90, "noisy": r.noisy,
               "runqueue_wait_frac": r.runqueue_wait_frac,
               "predicted_s": res.step_s, "error_frac": err, "predicted_breakdown_s": res.breakdown_s,
               "predicted_comm_total_s": res.detail["comm_total_s"]}
        b = base.get(_baseline_key(r))
        if b is not None:
            try:
                ares = simulate(ddp_scenario(r, hardware, baseline_throughput=b.per_rank_batch / b.time_s), db=xdb,
                                params=params, recommend=False)
                row["anchored_s"] = ares.step_s
                row["anchored_error_frac"] = ares.step_s / r.time_s - 1.0
                anch_errs.append(row["anchored_error_frac"])
            except GpusimError:
                pass
            row["measured_single_rank_s"] = b.time_s
        ns = nosync.get((r.workload, r.per_rank_batch, r.n_ranks, r.precision))
        if ns is not None:
            row["measured_no_sync_s"] = ns.time_s
        rows.append(row)
    waits = [row["runqueue_wait_frac"] for row in rows if row["runqueue_wait_frac"] is not None]
    return {"records": rows, "skipped": skipped, **_summary(errs), "anchored": _summary(anch_errs),
            "max_runqueue_wait_frac": max(waits) if waits else None}


def _summary(errs: list[float]) -> dict:
    if not errs:
        return {"n": 0, "median_abs_error_frac": None, "p90_abs_error_frac": None, "max_abs_error_frac": None,
                "median_error_frac": None}
    a = np.abs(np.asarray(errs))
    return {"n": len(errs), "median_abs_error_frac": float(np.median(a)),
            "p90_abs_error_frac": float(np.percentile(a, 90)), "max_abs_error_frac": float(a.max()),
            "median_error_frac": float(np.median(errs))}


# =================================================================================================
# The fit
# =================================================================================================

#: unit and the ModelParams field (or hardware figure) each fitted value sets
PARAM_INFO: dict[str, tuple[str, str]] = {
    "gemm.ceiling_flop_per_s": ("flop/s", "matmul_eff_frac (x datasheet peak) or the device's dense peak"),
    "gemm.kernel_tail_s": ("s", "kernel_tail_s (GPU)"),
    "memory.device_copy_bytes_per_s": ("bytes/s", "mem_eff_frac (x datasheet) or the device's memory bandwidth"),
    "memory.h2d_pinned_bytes_per_s": ("bytes/s", "h2d_pinned_eff_frac (x PCIe link)"),
    "memory.h2d_pageable_bytes_per_s": ("bytes/s", "h2d_pageable_eff_frac (x PCIe link)"),
    "comm.intra-node.busbw_bytes_per_s": ("bytes/s", "busbw_override_bytes_per_s['intra-node']"),
    "comm.intra-node.hop_s": ("s", "latency_override_s['intra-node']"),
    "comm.inter-node.busbw_bytes_per_s": ("bytes/s", "busbw_override_bytes_per_s['inter-node']"),
    "comm.inter-node.hop_s": ("s", "latency_override_s['inter-node']"),
    "comm.base_latency_s": ("s", "coll_base_latency_s"),
    "compute.train_frac": ("fraction", "matmul_eff_frac (x GEMM ceiling efficiency)"),
    "compute.op_overhead_s": ("s", "launch_cpu_s (GPU) / kernel_tail_s (CPU device)"),
    "compute.step_overhead_s": ("s", "step_overhead_s"),
    "sync.jitter_frac": ("fraction", "jitter_frac"),
    "data.loader_core_eff_frac": ("fraction", "loader_core_eff_frac"),
}


def _info(name: str) -> tuple[str, str]:
    if name.startswith("gemm.ceiling_flop_per_s."):
        return PARAM_INFO["gemm.ceiling_flop_per_s"]
    if re.fullmatch(r"comm\.[a-z-]+\.busbw_bytes_per_s\.[a-z_]+", name):
        return "bytes/s", "reported only (the model uses all_reduce's bus bandwidth)"
    return PARAM_INFO.get(name, ("", ""))


def fit(sources: Sequence[str | Path], *, db=None) -> Calibration:
    """Fit a calibration to profile directories and/or nccl-tests output files (see the module docstring)."""
    if db is None:
        from gpusim.hwdb import load

        db = load()
    return fit_inputs(read_inputs(sources, db), db=db)


def fit_inputs(inp: FitInputs, *, db=None, base: ModelParams = DEFAULT_PARAMS) -> Calibration:
    """The fit on already-read inputs (tests build :class:`FitInputs` directly)."""
    if db is None:
        from gpusim.hwdb import load

        db = load()
    env = inp.env
    blocks: list[BlockFit] = []
    report: dict[str, list] = {}
    notes: list[str] = list(inp.warnings)

    g, report["gemm"] = fit_gemm(inp.records)
    m, report["memory"] = fit_memory(inp.records)
    pts = collective_points(inp)
    c, report["collective"], coll_extra = fit_collectives(pts, base)
    d, report["dataloader"] = fit_dataloader(inp.records)
    for b in (g, m, c, d):
        if b is not None:
            blocks.append(b)
    if not blocks and not inp.records and not any(run.rows for run in inp.nccl_runs):
        where = ", ".join(str(s.get("path", s)) if isinstance(s, dict) else str(s) for s in inp.sources)
        raise CalibrationError(f"nothing to fit: {where or 'the input'} holds no measurements (an empty or "
                               "unfinished profile: `gpusim calibrate --resume --out DIR` measures what is missing)")
    values = {n: float(v) for b in blocks for n, v in zip(b.names, b.values)}
    if g is None and env.matched_gpu is None:
        notes.append("no GEMM records and the device is not in the database: compute cannot be calibrated")
    bl, report["ddp_baseline"], bl_notes = fit_baselines(inp.records, values, env, db, base) if (
        g is not None or env.matched_gpu) else (None, [], [])
    notes += bl_notes
    if bl:
        blocks += bl
        values.update({n: float(v) for b in bl for n, v in zip(b.names, b.values)})
    elif any(r.bench == "ddp_step" for r in inp.records):
        notes.append("no usable one-rank DDP baselines: train_frac kept at 7/8 (the defaults' ratio)")
    report["p2p"] = report_p2p(inp.records)
    report["collective_residuals_by_size"] = residuals_by_size(report["collective"])
    for b in blocks:
        notes += b.notes
    n_noisy = sum(1 for r in inp.records if getattr(r, "noisy", False))
    n_timed = sum(1 for r in inp.records if hasattr(r, "noisy"))
    if n_timed:
        notes.append(f"{n_noisy} of {n_timed} timed profile records were flagged noisy: kept with weight {NOISY_WEIGHT}")
    waited = [r for r in inp.records if (getattr(r, "runqueue_wait_frac", None) or 0.0) > CONTENDED_WAIT_FRAC]
    if waited:
        worst = max(waited, key=lambda r: r.runqueue_wait_frac)
        notes.append(f"{len(waited)} records were measured while a rank waited for a CPU more than "
                     f"{CONTENDED_WAIT_FRAC:.0%} of the time (worst {worst.runqueue_wait_frac:.0%}, {worst.bench}): "
                     "more threads were runnable than there were cores (the job's own communication threads, or "
                     "another process), and their times include that wait; on a shared machine, calibrate when it "
                     "is quiet")
    notes.append("overlap_frac and overlap_slowdown_frac are not fitted (only the held-out steps inform them): "
                 "defaults kept")

    try:
        hardware = build_hardware(values, env, db)
    except CalibrationError as e:
        hardware = None
        notes.append(str(e))
    if hardware is not None:
        params = calibrated_params(values, env, db, base, hardware=hardware)
        held = predict_held_out(inp.records, values, env, db, params, hardware)
    else:
        params = base
        held = {"records": [], "skipped": [], **_summary([]), "anchored": _summary([]), "max_runqueue_wait_frac": None}
    std = {}
    for b in blocks:
        std.update(b.std())
    fitted = [{"name": n, "value": values[n], "std": std.get(n), "unit": _info(n)[0], "sets": _info(n)[1],
               "block": b.name, "records": b.n_records, "noisy_records": b.n_noisy}
              for b in blocks for n in b.names]
    doc = {
        "format": FORMAT, "version": VERSION,
        "created_utc": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "sources": inp.sources,
        "environment": env.to_dict(),
        "hardware": _hardware_doc(hardware) if hardware else None,
        "params": params.model_dump(mode="json"),
        "base_params": base.model_dump(mode="json"),
        "values": values,
        "std": std,
        "fitted": fitted,
        "covariance": [{"block": b.name, "names": b.names,
                        "log_cov": None if b.log_cov is None else b.log_cov.tolist()} for b in blocks],
        "report": {**report, "collective_regimes": coll_extra.get("regimes", {}),
                   "records": _counts(inp)},
        "held_out": held,
        "notes": notes,
    }
    return Calibration(doc)


def _counts(inp: FitInputs) -> dict:
    out: dict[str, int] = defaultdict(int)
    for r in inp.records:
        out[r.bench] += 1
    out["nccl_tests_rows"] = sum(len(r.rows) for r in inp.nccl_runs)
    out["noisy"] = sum(1 for r in inp.records if getattr(r, "noisy", False))
    return dict(out)


def _hardware_doc(hw: dict) -> dict:
    def dump(e):
        d = {}
        for k in type(e).model_fields:
            v = getattr(e, k, None)
            d[k] = v.model_dump(mode="json") if hasattr(v, "model_dump") else (
                [x.model_dump(mode="json") for x in v] if isinstance(v, list) and v and hasattr(v[0], "model_dump")
                else v)
        return d

    return {"gpu": dump(hw["gpu"]), "node": dump(hw["node"]), "links": {k: dump(v) for k, v in hw["links"].items()}}


def _hardware_from_doc(d: dict) -> dict:
    from gpusim.hardware import GPU, DenseTflops, Link, Node, Pcie, PeerLink, Source

    def src(lst):
        return [Source.model_construct(**{"url": None, "accessed": None, "primary": True, "estimate": False, **s})
                for s in (lst or [])]

    g = dict(d["gpu"])
    g["sources"] = src(g.get("sources"))
    g["dense_tflop_per_s"] = DenseTflops.model_construct(**{**{k: None for k in DenseTflops.model_fields},
                                                            **(g.get("dense_tflop_per_s") or {})})
    g["pcie"] = Pcie.model_construct(**(g.get("pcie") or {"generation": 4, "lanes": 16}))
    g["peer_link"] = PeerLink.model_construct(**g["peer_link"]) if g.get("peer_link") else None
    n = dict(d["node"])
    n["sources"] = src(n.get("sources"))
    links = {}
    for k, v in (d.get("links") or {}).items():
        v = dict(v)
        v["sources"] = src(v.get("sources"))
        links[k] = Link.model_construct(**v)
    return {"gpu": GPU.model_construct(**g), "node": Node.model_construct(**n), "links": links}


# =================================================================================================
# The calibration file
# =================================================================================================

class Calibration:
    """A fitted calibration: the calibrated machine's parameters and hardware, the fit report and the
    held-out results. Created by :func:`fit`, read by :func:`load_calibration`.

    Attributes
    ----------
    params : ModelParams for the calibrated machine (measured links as overrides).
    values, std : fitted values and their standard deviations (None where not estimable), SI units.
    held_out : the held-out DDP-step predictions and their error summary.
    notes : what the fit assumed or could not do; ``applied_notes`` what the last :meth:`apply` did.
    """

    def __init__(self, doc: dict, path: str | None = None):
        self.doc = doc
        self.path = path
        self.params = ModelParams.model_validate(doc["params"])
        self.base_params = ModelParams.model_validate(doc.get("base_params") or {})
        self.values: dict[str, float] = {k: float(v) for k, v in doc["values"].items()}
        self.std: dict[str, float | None] = dict(doc.get("std") or {})
        self.env = Environment(**doc["environment"])
        self.hardware = _hardware_from_doc(doc["hardware"]) if doc.get("hardware") else None
        self.held_out = doc.get("held_out") or {}
        self.report = doc.get("report") or {}
        self.notes = list(doc.get("notes") or [])
        self.applied_notes: list[str] = []
        self._cov = [(c["block"], c["names"], None if c.get("log_cov") is None else np.asarray(c["log_cov"], float))
                     for c in doc.get("covariance") or []]

    # ---- ids ------------------------------------------------------------------------------------
    @property
    def gpu_id(self) -> str | None:
        return self.hardware["gpu"].id if self.hardware else None

    @property
    def node_id(self) -> str | None:
        return self.hardware["node"].id if self.hardware else None

    # ---- use ------------------------------------------------------------------------------------
    def apply(self, scenario_kwargs: dict, db) -> tuple[dict, ModelParams, Any]:
        """(kwargs, params, db) for a scenario: the calibrated machine when the kwargs name no GPU and no
        node; otherwise the named hardware with what transfers (see :func:`transferred_params`)."""
        kw = dict(scenario_kwargs)
        self.applied_notes = []
        if kw.get("gpu") is None and kw.get("node") is None:
            if self.hardware is None:
                raise CalibrationError(f"{self.path or 'this calibration'} does not describe a machine it can predict "
                                       f"on (no compute measurements for {self.env.device_name!r}): give --gpu ID")
            kw["gpu"] = self.gpu_id
            kw["node"] = self.node_id
            if kw.get("gpus") is None:
                kw["gpus"] = self.env.n_ranks
            if kw.get("nodes") is None:
                kw["nodes"] = max(1, -(-kw["gpus"] // self.hardware["node"].gpus_per_node))
            self.applied_notes.append(f"calibrated machine: {self.hardware['node'].name}")
            params = self.params
            if kw.get("p2p") is not None and bool(kw["p2p"]) == self.env.p2p_disabled:
                # [issue 18] peer-to-peer switched the other way than it was measured: the measured intra-node
                # collectives describe the other path, so the model's own path replaces them
                params = params.model_copy(update={
                    "busbw_override_bytes_per_s": {k: v for k, v in params.busbw_override_bytes_per_s.items()
                                                   if k != "intra-node"},
                    "latency_override_s": {k: v for k, v in params.latency_override_s.items() if k != "intra-node"}})
                self.applied_notes.append(
                    f"the intra-node collectives were measured with peer-to-peer "
                    f"{'off' if self.env.p2p_disabled else 'on'}; with it {'on' if kw['p2p'] else 'off'} their measured "
                    f"bus bandwidth is not used (the model's {'NVLink/PCIe' if kw['p2p'] else 'host-staged'} path is)")
            return kw, params, extended_db(db, self.hardware)
        target = kw.get("gpu") or db.node(kw["node"]).gpu
        target = db.gpu(target).id  # unknown ids: the database's "did you mean" error
        params, notes = transferred_params(self.values, self.env, target, db, self.base_params)
        self.applied_notes = notes
        return kw, params, db

    def params_for(self, gpu_id: str | None, db) -> ModelParams:
        """ModelParams for ``gpu_id`` (None: the calibrated machine) without building a scenario."""
        if gpu_id is None:
            return self.params
        return transferred_params(self.values, self.env, gpu_id, db, self.base_params)[0]

    def _params_with(self, values: dict, scn, db) -> tuple[ModelParams, Any]:
        on_cal = self.hardware is not None and (scn.gpu == self.gpu_id or (scn.gpu is None and scn.node == self.node_id))
        if on_cal:
            hw = build_hardware(values, self.env, db)
            # keep the stored ids (a ceiling sample changes the peak, not the id)
            return calibrated_params(values, self.env, db, self.base_params, hardware=hw), extended_db(db, hw)
        gpu = scn.gpu or db.node(scn.node).gpu
        return transferred_params(values, self.env, gpu, db, self.base_params)[0], db

    def interval(self, scenario, db, level: float = LEVEL) -> dict:
        """Interval of the step time and throughput from the fit's parameter uncertainty (sigma points).

        ``scenario`` is a :class:`~gpusim.simulation.Scenario` (or dict) after :meth:`apply`, ``db`` the
        database :meth:`apply` returned. Returns ``{"step_s": (lo, hi), "throughput_samples_per_s": (lo, hi),
        "level": 0.9, "sd_log_step": ..., "contributions": {block: sd}}``.
        """
        from gpusim.simulation import Scenario, simulate

        scn = scenario if isinstance(scenario, Scenario) else Scenario.create(**scenario)
        z = _Z if abs(level - LEVEL) < 1e-12 else _normal_quantile(0.5 + level / 2.0)
        base_db = _without_calibrated(db, self)

        def step(values) -> float:
            p, d = self._params_with(values, scn, base_db)
            return simulate(scn, db=d, params=p, recommend=False).step_s

        s0 = step(self.values)
        var = 0.0
        contrib = {}
        capped: set[str] = set()
        for block, names, cov in self._cov:
            if cov is None or not all(n in self.values for n in names):
                continue
            cov = np.where(np.isfinite(cov), cov, 0.0)
            lam, vec = np.linalg.eigh(0.5 * (cov + cov.T))
            bv = 0.0
            for k in range(len(lam)):
                if lam[k] <= 1e-14:
                    continue
                d = np.sqrt(lam[k]) * vec[:, k]
                widest = float(np.max(np.abs(d)))
                if widest > INTERVAL_LOG_SD_CAP:  # a direction the records do not determine: held to the cap
                    capped.update(n for n, dn in zip(names, d) if abs(dn) > INTERVAL_LOG_SD_CAP)
                    d = d * (INTERVAL_LOG_SD_CAP / widest)
                hi = dict(self.values)
                lo = dict(self.values)
                for n, dn in zip(names, d):
                    hi[n] = self.values[n] * math.exp(dn)
                    lo[n] = self.values[n] * math.exp(-dn)
                try:
                    half = 0.5 * (math.log(step(hi)) - math.log(step(lo)))
                except (GpusimError, ValueError):
                    continue
                bv += half * half
            if bv > 0:
                contrib[block] = math.sqrt(bv)
            var += bv
        sd = math.sqrt(var)
        lo_s, hi_s = s0 * math.exp(-z * sd), s0 * math.exp(z * sd)
        samples = scn.strategy.per_gpu_batch * scn.strategy.accum * scn.gpus
        out = {"step_s": (lo_s, hi_s), "throughput_samples_per_s": (samples / hi_s, samples / lo_s), "level": level,
               "sd_log_step": sd, "contributions": contrib, "applies": bool(contrib)}
        if not contrib:
            out["note"] = ("no fitted parameter of this calibration applies to this hardware: the interval has no "
                           "width from the fit")
        elif capped:
            out["note"] = (f"the calibration's records barely determine {', '.join(sorted(capped))}: their spread in "
                           f"this interval is held to a factor of ten either way, so the interval may be too narrow "
                           f"where they matter (add records that vary them to `gpusim fit`)")
        return out

    # ---- files ----------------------------------------------------------------------------------
    def to_dict(self) -> dict:
        return self.doc

    def save(self, path: str | Path) -> Path:
        """Write the calibration file atomically (temporary file + rename)."""
        from gpusim.fsutil import atomic_write_text

        text = json.dumps(_jsonable(self.doc), indent=1, allow_nan=False)
        try:
            return atomic_write_text(path, text + "\n")
        except OSError as e:
            raise CalibrationError(f"{path}: cannot write the calibration file: {e.strerror or e}") from None

    def held_out_line(self) -> str:
        """``held-out DDP step error: median 7.3% (n=12)`` (DESIGN.md section 6)."""
        h = self.held_out
        if not h or not h.get("n"):
            return "held-out DDP step error: none (the inputs have no multi-rank DDP steps to predict)"
        return f"held-out DDP step error: median {100 * h['median_abs_error_frac']:.1f}% (n={h['n']})"


def _without_calibrated(db, cal: Calibration):
    """``db`` as given to apply (the calibrated entries are rebuilt per sigma point)."""
    if cal.hardware is None or cal.gpu_id not in db.gpus:
        return db
    gpus = {k: v for k, v in db.gpus.items() if k != cal.gpu_id}
    nodes = {k: v for k, v in db.nodes.items() if k != cal.node_id}
    links = {k: v for k, v in db.links.items() if k not in cal.hardware["links"]}
    return dataclasses.replace(db, gpus=gpus, nodes=nodes, links=links)


def _normal_quantile(p: float) -> float:
    from scipy.stats import norm

    return float(norm.ppf(p))


def _jsonable(obj):
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return _jsonable(obj.tolist())
    if isinstance(obj, np.generic):
        obj = obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, (_dt.date, _dt.datetime)):
        return obj.isoformat()
    return obj


_REQUIRED = ("format", "version", "environment", "params", "values")


def load_calibration(path: str | Path) -> Calibration:
    """Read and validate a calibration file written by ``gpusim fit``.

    Raises :class:`~gpusim.errors.CalibrationError` with one readable message for a missing, unreadable,
    non-JSON, wrong-format, newer-version or inconsistent file.
    """
    from gpusim.checks import load_json
    from gpusim.errors import GpusimError

    p = Path(path)
    try:
        if p.is_dir():
            raise CalibrationError(f"{p}: a directory, not a calibration file (a profile directory goes to "
                                   f"`gpusim fit {p} -o calibration.json` first)")
        if not p.exists():
            raise CalibrationError(f"{p}: no such calibration file (create one with `gpusim fit PROFILE -o {p}`)")
    except OSError as e:  # a name too long for the system, a permission denied on the way
        raise CalibrationError(f"{str(p)[:80]}: cannot read: {e.strerror or e}") from None
    try:  # regular UTF-8 text of a sane size, JSON without NaN and not nested absurdly deep
        doc = load_json(p, "calibration file")
    except GpusimError as e:
        raise CalibrationError(f"not a calibration file: {e}") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise CalibrationError(f"{p}: not a gpusim calibration file (expected \"format\": \"{FORMAT}\"; a profile "
                               f"directory or nccl-tests output goes to `gpusim fit` first)")
    ver = doc.get("version")
    if not isinstance(ver, int):
        raise CalibrationError(f"{p}: calibration file without an integer \"version\"")
    if ver > VERSION:
        raise CalibrationError(f"{p}: calibration format version {ver} is newer than this gpusim understands "
                               f"({VERSION}); upgrade gpusim")
    missing = [k for k in _REQUIRED if k not in doc]
    if missing:
        raise CalibrationError(f"{p}: calibration file is missing {', '.join(missing)}")
    for key in ("environment", "params", "values", "hardware"):  # objects (hardware may be null)
        if key in doc and not isinstance(doc[key], dict) and not (key == "hardware" and doc[key] is None):
            raise CalibrationError(f"{p}: \"{key}\" must be a JSON object, not {type(doc[key]).__name__}: the file "
                                   "was edited or is not from `gpusim fit`")
    from pydantic import ValidationError

    try:
        cal = Calibration(doc, str(p))
    except ValidationError as e:
        first = e.errors()[0]
        loc = ".".join(str(x) for x in first["loc"]) or "params"
        raise CalibrationError(f"{p}: invalid calibration parameters: {loc}: {first['msg']}") from None
    except (KeyError, TypeError, ValueError) as e:
        raise CalibrationError(f"{p}: invalid calibration file ({type(e).__name__}: {e})") from None
    bad = [k for k, v in cal.values.items() if not (math.isfinite(v) and v > 0)]
    if bad:
        raise CalibrationError(f"{p}: fitted values must be finite and positive: {', '.join(bad)}")
    return cal


__all__ = [
    "PATH_CLASSES",
    "Calibration",
    "CalibrationError",
    "Environment",
    "FitInputs",
    "fit",
    "fit_inputs",
    "load_calibration",
    "match_gpu",
    "read_inputs",
]
