"""Procurement: what to rent or buy to train a model by a date, what it costs, and what to measure first.

:func:`plan` sweeps every configuration the hardware database offers (:func:`gpusim.sweeps.sweep`), turns each
step time into a whole training run, prices it, and answers with

- per configuration: time to train (wall clock, with checkpoints, evaluation and failures), cost, energy,
  goodput, scaling efficiency, MFU, bottleneck;
- the Pareto frontier of time against cost (:func:`pareto_front`);
- a recommendation with its reasons in words a buyer can act on, the closest miss when nothing meets the
  constraints, a bill of materials for it (:func:`bill_of_materials`), the assumption that moves the answer
  most (:func:`sensitivity`) and learning-rate advice when the global batch grows (:func:`lr_advice`).

Whole-run accounting (:func:`run_accounting`)
--------------------------------------------
``wall = useful / (1 - lambda * loss)`` with

- ``useful = steps * step_s * (1 + eval_overhead_frac) + checkpoints * checkpoint_write_s + restart_s``
  (the job starts once, at the cost of a restart: launch, initialise, load);
- ``lambda = failure_rate_per_gpu_hour * n_gpus / 3600`` interruptions per second (failures grow with the
  cluster: a synchronous job stops when any GPU or its host does);
- ``loss = checkpoint_interval_s / 2 + restart_s``: on average half an interval of work is redone, plus the
  time to get going again;
- the checkpoint interval defaults to Young's optimum ``sqrt(2 * checkpoint_write_s * MTBF)`` (J. W. Young,
  "A first order approximation to the optimum checkpoint interval", CACM 17(9), 1974), MTBF = 1 / lambda.

This is the usual first-order model (failures as a Poisson process, lost work and restart per failure).
Where ``lambda * loss >= 1`` the run never finishes: the row is infeasible and says so.
``goodput_frac = steps * step_s / wall``.

Every constant below says where it comes from; estimates say so and can be overridden.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gpusim import units
from gpusim.errors import GpusimError, ScenarioError
from gpusim.rules import DEFAULT_MAX_IMAGES_PER_BATCH, DEFAULT_MAX_TOKENS_PER_BATCH, default_max_global_batch  # noqa: F401
from gpusim.strategy import MASTER_BYTES, OPT_STATE_BYTES, WEIGHT_BYTES, base_precision

# =================================================================================================
# Published figures and stated estimates
# =================================================================================================

#: Interruptions per GPU-hour. Meta, "The Llama 3 Herd of Models" (2024), section 3.3.4 and Table 5: 419
#: unexpected interruptions in a 54-day snapshot of Llama 3 405B pre-training on up to 16,384 H100 GPUs
#: (78% hardware: GPU 30.1%, HBM3 17.2% ...): 419 / (54 * 24 * 16,384) = 1.97e-5 per GPU-hour, one
#: interruption every ~3 hours at 16k GPUs. It counts whole-job interruptions (host, network and software
#: included), which is what a synchronous job feels; clusters with less mature operations fail more often
#: (the OPT-175B logbook records dozens of restarts in two months on ~1,000 A100s, Zhang et al. 2022), hence
#: the wide range in :func:`sensitivity`.
LLAMA3_UNEXPECTED_INTERRUPTIONS = 419
LLAMA3_SNAPSHOT_DAYS = 54
LLAMA3_GPUS = 16_384
FAILURE_RATE_PER_GPU_HOUR = LLAMA3_UNEXPECTED_INTERRUPTIONS / (LLAMA3_SNAPSHOT_DAYS * 24 * LLAMA3_GPUS)
FAILURE_SOURCE = ("Meta, 'The Llama 3 Herd of Models' (2024), sec. 3.3.4 / Table 5: 419 unexpected interruptions "
                  "in 54 days on 16,384 H100 GPUs = 1.97e-5 per GPU-hour")
#: Seconds from an interruption to training again: detect, requeue or replace the node, start the processes,
#: initialise NCCL, load the checkpoint, warm up. Estimate: about 11 min is reported as the median automatic
#: retry interval on a 504-GPU B200 production cluster (SKT/Upstage/Lablup/NVIDIA/VAST technical report,
#: 2025); loading a checkpoint and warming up add a few minutes. We use 15 min.
RESTART_S = 15 * units.MINUTE
#: Evaluation time as a fraction of training compute. Estimate: an evaluation pass is forward-only (about 1/3
#: of a training step's FLOPs per sample: 2N vs 6N, Kaplan et al. 2020) over held-out samples amounting to
#: ~3% of the training samples seen between evaluations -> ~1%.
EVAL_OVERHEAD_FRAC = 0.01
#: Sustained write / read bandwidth of data-centre NVMe SSDs (e.g. Samsung PM1733: 7.0 GB/s sequential read,
#: 3.8 GB/s write, datasheet): checkpoints are written at about half the node's read bandwidth.
CHECKPOINT_WRITE_FRAC_OF_READ = 0.5
#: Years over which purchased hardware is amortised when costs are given per run. Estimate: server GPUs are
#: depreciated over 4-6 years by cloud operators; a new GPU generation every ~2 years shortens useful life
#: for training. Change with ``lifetime_years``.
LIFETIME_YEARS = 4.0
#: Purchase of a node priced only by its GPUs: the rest of the server (CPUs, board, RAM, NICs, storage,
#: chassis, PSUs) as a fraction of the GPUs' price plus a base. Estimate: 8-GPU HGX H100 servers were
#: reported at about $300k in 2023 with the GPUs at ~$27.5k each (hwdb ``h100-sxm-street-2023``), leaving
#: ~25-35% for the rest; a workstation chassis, CPU, RAM and PSU cost a few thousand dollars.
SERVER_OVERHEAD_FRAC = 0.30
SERVER_BASE_USD = 5_000.0
#: Network per NIC port for multi-node purchases: the NIC, two transceivers or a cable, and the share of a
#: two-level non-blocking fat tree (three switch ports per endpoint). Estimate for 200-400 Gb/s InfiniBand
#: or Ethernet; single-node systems need none.
NETWORK_USD_PER_PORT = 3_000.0
#: Switch radix for the port count of the bill of materials: 64 ports (NVIDIA Quantum-2 QM9700 InfiniBand
#: switch: 64 NDR 400 Gb/s ports).
SWITCH_RADIX = 64

# --- power of a node (bill of materials and energy) ------------------------------------------------------
#: Server CPU power per socket. Current training servers use 250-400 W parts (Intel Xeon Platinum 8480+ 350 W
#: in DGX H100; AMD EPYC 9654 360 W); we use 300 W per socket.
CPU_W_PER_SOCKET = 300.0
#: DRAM power: ~10 W per 64 GiB DDR5 RDIMM under load (vendor DIMM power calculators put DDR4/DDR5 RDIMMs at
#: 5-12 W).
DRAM_W_PER_GIB = 10.0 / 64.0
#: A 200-400 Gb/s NIC (NVIDIA ConnectX-7: ~25 W typical).
NIC_W = 25.0
#: Fans, SSDs, NVSwitch chips, board and power-conversion losses as a fraction of GPUs + CPUs + DRAM + NICs.
#: Estimate; DGX H100 lists 10.2 kW maximum for 8 x 700 W GPUs, i.e. 4.6 kW for everything else at full fan
#: and PSU load, which ~15% plus the CPUs, DRAM and NICs above reaches only at typical load.
SYSTEM_OTHER_FRAC = 0.15
#: Power-supply headroom over the summed component power: 20-30% (power excursions of GPUs above TDP for
#: milliseconds; PSUs are most efficient at 50-80% load per the 80 PLUS curves). We size at 25%.
PSU_HEADROOM_FRAC = 0.25
#: CPU cores per GPU for data loading (the seed articles' 4-8 per GPU rule) and one for the training process.
CORES_PER_GPU_MIN = 4
CORES_PER_GPU_MAX = 8

#: warm-up for learning-rate scaling: Goyal et al. warm up over 5 epochs; LLM recipes over ~2,000 steps
#: (Touvron et al., "Llama 2", 2023, sec. 2.2).
WARMUP_EPOCHS = 5
WARMUP_STEPS_LM = 2000

MODES = ("cloud", "purchase", "both")
COST_BASES = ("capital", "amortized")


def _input_bounds() -> dict:
    from gpusim.checks import Bound

    dur = units.format_duration
    return {
        # plausibility limits of the inputs (no source needed beyond common sense: the largest published
        # pre-training runs are ~1e13-4e13 tokens and ~1e5 GPUs; nothing is priced above a trillion USD)
        "tokens": Bound(1, 1e16, unit="tokens"),
        "samples": Bound(1, 1e15, unit="samples"),
        "epochs": Bound(1e-3, 1e5),
        "deadline_s": Bound(1, 100 * 365 * units.DAY, shown=dur),
        "budget_usd": Bound(0.01, 1e12, unit="USD"),
        "max_global_batch": Bound(1, 1e9, integer=True),
        "global_batch": Bound(1, 1e9, integer=True),
        "reference_lr": Bound(1e-12, 100),
        "max_gpus": Bound(1, 1_000_000, integer=True),
        "lifetime_years": Bound(0.1, 50, unit="years"),
        "usd_per_kwh": Bound(0, 10, unit="USD per kWh"),
        "pue": Bound(1, 3),
        "checkpoint_interval_s": Bound(1, 365 * units.DAY, shown=dur),
        "checkpoint_write_bytes_per_s": Bound(units.MB, 1e15, shown=units.format_rate_bytes),
        "failure_rate_per_gpu_hour": Bound(0, 0.5, unit="interruptions per GPU-hour"),
        "restart_s": Bound(0, 30 * units.DAY, shown=dur),
        "eval_overhead_frac": Bound(0, 10),
        "price_usd": Bound(1e-6, 1e12, unit="USD"),
        "num_workers": Bound(0, 256, integer=True),
    }


#: the range of every numeric input of :func:`plan` (the CLI's flags check the same bounds)
INPUT_BOUNDS = _input_bounds()


class PlanError(ScenarioError):
    """Constraints or inputs of a plan that cannot be used (negative budget, no amount of training ...)."""


# =================================================================================================
# Pure helpers (numpy; testable without the database)
# =================================================================================================

def training_samples(workload, *, tokens: float | None = None, samples: float | None = None,
                     epochs: float = 1.0) -> float:
    """Samples to train on: ``tokens / tokens_per_sample`` for sequence models, else ``samples * epochs``."""
    if (tokens is None) == (samples is None):
        raise PlanError("give the amount of training as tokens (--tokens 1e11) or as samples (--samples N "
                        "[--epochs E]), not both")
    if epochs is None or not math.isfinite(epochs) or epochs <= 0:
        raise PlanError(f"epochs must be > 0 (got {epochs})")
    if tokens is not None:
        if not math.isfinite(tokens) or tokens <= 0:
            raise PlanError(f"tokens must be > 0 (got {tokens})")
        if workload.sample_unit != "sequence":
            raise PlanError(f"{workload.id} is trained on {workload.sample_unit}s, not tokens: give --samples N "
                            "[--epochs E]")
        return float(tokens) / float(workload.tokens_per_sample) * float(epochs)
    if not math.isfinite(samples) or samples <= 0:
        raise PlanError(f"samples must be > 0 (got {samples})")
    return float(samples) * float(epochs)


def checkpoint_bytes(params: float, precision: str, optimizer: str = "adam") -> float:
    """Bytes of one checkpoint: the weights as held in training, the fp32 master copy where there is one, and
    the optimizer states (:mod:`gpusim.strategy` tables; Adam in AMP: 4 + 8 = 12 bytes per parameter)."""
    precision = base_precision(precision)  # [issue 17] fp8-cs, fp8-mx
    return float(params) * (WEIGHT_BYTES[precision] + MASTER_BYTES[precision] + OPT_STATE_BYTES[optimizer])


def node_power_w(gpu_tdp_w, gpus_per_node, cpu_sockets=2, ram_gib=1024.0, nics=0):
    """Estimated power of one node at full training load, in watts (before PSU headroom and PUE): GPUs at
    TDP + CPU sockets + DRAM + NICs, plus :data:`SYSTEM_OTHER_FRAC` for the rest. Broadcasts."""
    parts = (np.asarray(gpu_tdp_w, dtype=np.float64) * gpus_per_node + CPU_W_PER_SOCKET * np.asarray(cpu_sockets)
             + DRAM_W_PER_GIB * np.asarray(ram_gib, dtype=np.float64) + NIC_W * np.asarray(nics))
    return parts * (1.0 + SYSTEM_OTHER_FRAC)


def young_interval_s(checkpoint_write_s, mtbf_s):
    """Young's (1974) optimum checkpoint interval ``sqrt(2 * write * MTBF)`` (inf without failures)."""
    return np.sqrt(2.0 * np.asarray(checkpoint_write_s, dtype=np.float64) * np.asarray(mtbf_s, dtype=np.float64))


def run_accounting(*, step_s, global_batch, n_gpus, total_samples, checkpoint_write_s, failure_rate_per_gpu_hour,
                   restart_s=RESTART_S, checkpoint_interval_s=None, eval_overhead_frac=EVAL_OVERHEAD_FRAC):
    """Whole-run time of every configuration (arrays broadcast). See the module docstring for the model.

    Returns a dict of arrays: ``steps``, ``train_s`` (steps x step), ``eval_s``, ``checkpoints``,
    ``checkpoint_s``, ``checkpoint_interval_s``, ``failures``, ``lost_s`` (redone work and restarts after
    interruptions), ``wall_s`` (inf where failures outpace progress), ``goodput_frac``. The first start of the
    job costs one ``restart_s``.
    """
    step_s = np.asarray(step_s, dtype=np.float64)
    gb = np.asarray(global_batch, dtype=np.float64)
    n = np.asarray(n_gpus, dtype=np.float64)
    write_s = np.asarray(checkpoint_write_s, dtype=np.float64)
    steps = np.ceil(float(total_samples) / gb)
    train_s = steps * step_s
    eval_s = eval_overhead_frac * train_s
    lam = float(failure_rate_per_gpu_hour) * n / units.HOUR  # interruptions per second
    with np.errstate(divide="ignore", invalid="ignore"):
        mtbf_s = np.where(lam > 0, 1.0 / np.where(lam > 0, lam, 1.0), np.inf)
        if checkpoint_interval_s is None:
            interval = np.maximum(young_interval_s(write_s, mtbf_s), write_s)
        else:
            interval = np.broadcast_to(np.asarray(float(checkpoint_interval_s)), np.broadcast(step_s, n).shape)
        # periodic checkpoints during the run, and one at the end
        checkpoints = np.where(np.isfinite(interval), np.floor(train_s / interval), 0.0) + 1.0
        checkpoint_s = checkpoints * write_s
        useful_s = train_s + eval_s + checkpoint_s + float(restart_s)  # the first start costs a restart
        loss_s = np.where(np.isfinite(interval), interval / 2.0, 0.0) + float(restart_s)
        load = lam * loss_s
        wall_s = np.where(load < 1.0, useful_s / (1.0 - load), np.inf)
        failures = lam * wall_s
        lost_s = wall_s - useful_s
        goodput = train_s / wall_s
    return {"steps": steps, "train_s": train_s, "eval_s": eval_s, "checkpoints": checkpoints,
            "checkpoint_s": checkpoint_s, "checkpoint_interval_s": np.broadcast_to(interval, np.shape(train_s)),
            "failures": failures, "lost_s": lost_s, "wall_s": wall_s, "goodput_frac": goodput}


def pareto_front(time_s, cost_usd) -> np.ndarray:
    """Mask of the points no other point dominates (no other is at most as slow and as costly, and strictly
    better in one). Non-finite points are never on the front. Exact duplicates are all kept. O(n log n)."""
    t = np.asarray(time_s, dtype=np.float64)
    c = np.asarray(cost_usd, dtype=np.float64)
    ok = np.isfinite(t) & np.isfinite(c)
    out = np.zeros(t.shape, dtype=bool)
    idx = np.nonzero(ok)[0]
    if len(idx) == 0:
        return out
    order = idx[np.lexsort((c[idx], t[idx]))]
    ts, cs = t[order], c[order]
    # groups of equal time: the first of each group has the group's lowest cost
    new_group = np.r_[True, ts[1:] != ts[:-1]]
    gid = np.cumsum(new_group) - 1
    group_min = cs[new_group]
    # lowest cost among strictly faster points (groups before this one)
    prev_min = np.r_[np.inf, np.minimum.accumulate(group_min)[:-1]]
    dominated = (prev_min[gid] <= cs) | (group_min[gid] < cs)
    out[order] = ~dominated
    return out


def lr_advice(global_batch: int, *, reference_global_batch: int | None = None, reference_lr: float | None = None,
              max_global_batch: int | None = None, sample_unit: str = "sequence", steps: float | None = None,
              steps_per_epoch: float | None = None) -> dict[str, Any]:
    """Learning rate for a grown global batch: the linear scaling rule with gradual warm-up (Goyal et al.,
    "Accurate, Large Minibatch SGD", 2017), the square-root rule as the Adam alternative (Malladi et al.,
    "On the SDEs and Scaling Rules for Adaptive Gradient Algorithms", NeurIPS 2022), and warnings."""
    out: dict[str, Any] = {"global_batch": int(global_batch), "reference_global_batch": reference_global_batch,
                           "reference_lr": reference_lr, "warnings": []}
    if reference_global_batch:
        factor = global_batch / reference_global_batch
        out["batch_factor"] = factor
        if reference_lr is not None:
            out["linear_lr"] = reference_lr * factor
            out["sqrt_lr"] = reference_lr * math.sqrt(factor)
        if sample_unit == "sequence":
            warm = WARMUP_STEPS_LM
            how = f"over the first {warm:,} steps (Llama 2 recipe)"
        else:
            warm = WARMUP_EPOCHS * steps_per_epoch if steps_per_epoch else None
            how = f"over the first {WARMUP_EPOCHS} epochs (Goyal et al. 2017)"
        if steps and warm and warm > 0.1 * steps:
            warm = 0.1 * steps
            how = "over the first 10% of the run (the recipe's warm-up is longer than that)"
        out["warmup_steps"] = int(math.ceil(warm)) if warm else None
        if out["warmup_steps"]:
            how += f": about {out['warmup_steps']:,} steps"
        sqrt_note = "with the square-root rule often used for Adam"
        if factor > 1:
            if reference_lr is not None:
                lr_txt = (f" from {reference_lr:g} to {reference_lr * factor:.3g} (linear rule; "
                          f"{reference_lr * math.sqrt(factor):.3g} {sqrt_note})")
            else:
                lr_txt = f" by {factor:g}x (linear rule; {math.sqrt(factor):.3g}x {sqrt_note})"
            out["advice"] = (f"the global batch grows {factor:g}x over your {reference_global_batch}: scale the "
                             f"learning rate{lr_txt} and warm it up linearly {how}")
            if factor > 32:
                out["warnings"].append(
                    f"{factor:g}x the reference batch: linear scaling was shown to hold up to 32x (8k images) by "
                    "Goyal et al.; past the critical batch size (McCandlish et al. 2018) more samples are needed for "
                    "the same loss, which this plan does not model")
        elif factor < 1:
            out["advice"] = (f"the global batch is {factor:.3g}x your {reference_global_batch}: scale the learning "
                             "rate down in proportion (linear rule)")
        else:
            out["advice"] = "the global batch equals your reference: keep the learning rate"
    else:
        out["advice"] = ("no reference batch given (--global-batch): if this global batch is larger than the one your "
                         "learning rate was tuned for, scale the learning rate by the ratio and warm it up")
    if max_global_batch is not None and global_batch > max_global_batch:
        out["warnings"].append(f"global batch {global_batch} exceeds your limit {max_global_batch}")
    return out


# =================================================================================================
# Prices
# =================================================================================================

@dataclass(frozen=True)
class PriceInfo:
    """What a hardware option costs: per GPU-hour in the cloud, or capital per node when bought."""

    mode: str
    usd_per_gpu_hour: float = math.nan
    capital_usd_per_node: float = math.nan
    source: str = ""
    date: str = ""
    note: str = ""


_PRICING_ORDER = ("on-demand", "reserved-1y", "reserved-3y", "spot", "list", "street")


def _pick(prices, pricing: str | None):
    if not prices:
        return None
    pref = [pricing] if pricing else []
    pref += [p for p in _PRICING_ORDER if p not in pref]
    # the asked pricing first, then the newest figure; [issue 17] among offers of one date (two providers' pages read
    # the same day), the cheaper per GPU, not the one that comes first in the file
    return sorted(prices, key=lambda p: (pref.index(p.pricing) if p.pricing in pref else 99,
                                         -p.date.toordinal(),
                                         (p.usd_per_gpu_hour if p.kind == "cloud" else (p.usd or 0.0) / p.gpus)))[0]


def price_for(db, *, mode: str, node, gpu, gpus_per_node: int, assumed: bool, pricing: str | None = None,
              overrides: Mapping[str, float] | None = None) -> PriceInfo:
    """The price of one hardware option in ``mode``.

    Cloud: the node's cloud price per GPU-hour (instance price / GPUs); for a GPU in the database's usual node
    (``assumed``), a per-GPU cloud offer for that GPU. Purchase: the node's system price (pro rata for a
    partly populated PCIe server), else the GPU's price x GPUs + server overhead
    (:data:`SERVER_OVERHEAD_FRAC` x GPUs + :data:`SERVER_BASE_USD`). ``overrides`` (id -> USD) win: USD per
    GPU-hour in the cloud; USD per node for a node id, per GPU for a GPU id when buying.
    """
    ov = {k.lower(): v for k, v in (overrides or {}).items()}
    nid = None if assumed or node is None else node.id
    if mode == "cloud":
        for key in ([nid] if nid else []) + [gpu.id]:
            if key and key in ov and (key == nid or assumed or nid is None or key == gpu.id):
                return PriceInfo("cloud", usd_per_gpu_hour=float(ov[key]), source=f"override {key}", date="override")
        if nid:
            p = _pick(db.prices_for(node=nid, kind="cloud"), pricing)
        else:  # [issue 17] a per-GPU quote, or an offer for an instance of this many GPUs
            offers = [q for q in db.prices_for(gpu=gpu.id, kind="cloud") if q.node is None]
            p = _pick([q for q in offers if q.gpus in (1, gpus_per_node)] or offers, pricing)
        if p is None:
            what = nid or gpu.id
            return PriceInfo("cloud", note=f"no cloud price for {what} in the database (give --price-override "
                                           f"{what}=USD_PER_GPU_HOUR)")
        return PriceInfo("cloud", usd_per_gpu_hour=p.usd_per_gpu_hour, source=p.id, date=p.date.isoformat(),
                         note=f"{p.pricing} {p.provider or ''} {p.region or ''}".strip())
    # purchase
    g = gpus_per_node
    if nid and nid in ov:
        return PriceInfo("purchase", capital_usd_per_node=float(ov[nid]), source=f"override {nid}", date="override")
    if nid:
        p = _pick(db.prices_for(node=nid, kind="purchase"), pricing)
        if p is not None and (g == node.gpus_per_node or gpu.id not in ov):
            usd = p.usd * (g / p.gpus if g != p.gpus else 1.0)
            note = p.pricing + ("" if g == p.gpus else f", pro rata for {g} of {p.gpus} GPUs")
            return PriceInfo("purchase", capital_usd_per_node=usd, source=p.id, date=p.date.isoformat(), note=note)
    if gpu.id in ov:
        gpu_usd, src, date = float(ov[gpu.id]), f"override {gpu.id}", "override"
    else:
        p = _pick([q for q in db.prices_for(gpu=gpu.id, kind="purchase") if q.node is None], pricing)
        if p is None:
            what = nid or gpu.id
            return PriceInfo("purchase", note=f"no purchase price for {what} or its GPU {gpu.id} in the database "
                                              f"(give --price-override {gpu.id}=USD_PER_GPU or {what}=USD_PER_NODE)")
        gpu_usd, src, date = p.usd / p.gpus, p.id, p.date.isoformat()
    usd = g * gpu_usd * (1.0 + SERVER_OVERHEAD_FRAC) + SERVER_BASE_USD
    return PriceInfo("purchase", capital_usd_per_node=usd, source=src, date=date,
                     note=f"{g} x GPU {gpu_usd:,.0f} USD + server overhead {SERVER_OVERHEAD_FRAC:.0%} + "
                          f"{SERVER_BASE_USD:,.0f} USD (estimate)")


# =================================================================================================
# Bill of materials
# =================================================================================================

def bill_of_materials(config: Mapping[str, Any], db, workload, *, checkpoint_interval_s: float | None = None,
                      optimizer: str = "adam", checkpoint_budget_s: float | None = None,
                      failure_rate_per_gpu_hour: float = FAILURE_RATE_PER_GPU_HOUR) -> dict[str, Any]:
    """Sizing of one configuration (a row of the plan table): per node power supply, CPU cores, system RAM,
    storage bandwidth, network ports; each item with its rule.

    - **Power supply**: GPUs at TDP + CPU sockets x :data:`CPU_W_PER_SOCKET` + DRAM + NICs, plus
      :data:`SYSTEM_OTHER_FRAC`, then :data:`PSU_HEADROOM_FRAC` headroom (20-30% rule). The vendor's maximum,
      where the database has one, is shown beside it.
    - **CPU cores**: :data:`CORES_PER_GPU_MIN`-:data:`CORES_PER_GPU_MAX` per GPU for data loading, or what the
      loader model needs at the predicted throughput (core-seconds per sample / useful fraction of a core), plus
      one per GPU for the training process, whichever is more.
    - **System RAM**: at least the node's total GPU memory (pinned staging buffers, checkpoint staging,
      dataset page cache), plus the optimizer states a CPU-offload strategy keeps on the host.
    - **Storage**: read bandwidth the data pipeline needs at the predicted throughput (bytes per sample from
      the workload), and the write bandwidth that writes one checkpoint within its time budget
      (:func:`gpusim.checkpoint_sizing.checkpoint_write_need`: 1% of the checkpoint interval, the interval
      given or Young's optimum for that write time; ``checkpoint_budget_s`` states another), with the sources.
    - **Network**: one NIC port per GPU for multi-node training (rail-optimised, as in DGX SuperPOD) unless the
      node template says otherwise; switches for a two-level non-blocking fat tree of :data:`SWITCH_RADIX`-port
      switches (leaves use half their ports for uplinks).
    """
    gpu = db.gpu(config["gpu"])
    node = db.node(config["node"]) if config.get("node") else None
    g = int(config["gpus_per_node"])
    nodes = int(config["nodes"])
    sockets = node.numa_sockets if node else 2
    ram_have = node.ram_gib if node else None
    nics = (node.nics_per_node or g) if (node and nodes > 1) else (g if nodes > 1 else 0)
    est_w = float(node_power_w(gpu.tdp_w, g, sockets, ram_have or g * gpu.memory_gib, nics))
    psu_w = est_w * (1.0 + PSU_HEADROOM_FRAC)
    items: list[dict[str, Any]] = []
    items.append({
        "item": "power supply per node", "value_w": psu_w, "component_w": est_w,
        "vendor_max_w": node.max_power_w if node else None,
        "rule": f"{g} x {gpu.tdp_w:g} W GPU TDP + {sockets} x {CPU_W_PER_SOCKET:g} W CPU + DRAM + {nics} NICs, "
                f"+{SYSTEM_OTHER_FRAC:.0%} fans/storage/losses, +{PSU_HEADROOM_FRAC:.0%} headroom"})
    thr_node = float(config.get("throughput_samples_per_s", math.nan)) / max(nodes, 1)
    need_cores_loader = thr_node * float(workload.preprocess_core_s_per_sample) / 0.9 if math.isfinite(thr_node) else 0
    cores_rule = max(CORES_PER_GPU_MIN * g, math.ceil(need_cores_loader) + g)
    have_cores = node.cpu_cores if node else None
    items.append({
        "item": "CPU cores per node", "value": cores_rule, "recommended_max": max(CORES_PER_GPU_MAX * g, cores_rule),
        "loader_needs": math.ceil(need_cores_loader), "node_has": have_cores,
        "ok": None if have_cores is None else have_cores >= cores_rule,
        "rule": f"{CORES_PER_GPU_MIN}-{CORES_PER_GPU_MAX} per GPU for data loading, or the loader's need at "
                f"{thr_node:,.4g} samples/s per node ({workload.preprocess_core_s_per_sample * 1e3:.3g} ms of CPU per "
                "sample) + 1 per GPU for training, whichever is more"})
    gpu_mem_gib = g * gpu.memory_gib
    offload = bool(config.get("cpu_offload", False))
    off_gib = 0.0
    if offload:
        prec = base_precision(str(config.get("precision", "amp_bf16")))
        off_gib = (float(workload.params) * (OPT_STATE_BYTES[optimizer] + max(MASTER_BYTES[prec], 4.0))
                   / max(nodes, 1) / units.GIB)
    ram_need = gpu_mem_gib + off_gib
    items.append({
        "item": "system RAM per node", "value_gib": ram_need, "node_has_gib": ram_have,
        "ok": None if ram_have is None else ram_have >= ram_need,
        "rule": "at least the node's total GPU memory" + (" + the optimizer states offloaded to the host"
                                                          if offload else "")})
    read_bps = thr_node * float(workload.input_bytes_per_sample) if math.isfinite(thr_node) else math.nan
    ck_bytes = checkpoint_bytes(workload.params, str(config.get("precision", "amp_bf16")), optimizer)
    # [issue 20] sized from the interval and a time budget per checkpoint (gpusim.checkpoint_sizing), not 1% of
    # a Young interval that is short exactly when writes are fast
    from gpusim.checkpoint_sizing import checkpoint_write_need, describe

    ck_need = checkpoint_write_need(ck_bytes, n_gpus=g * nodes, failure_rate_per_gpu_hour=failure_rate_per_gpu_hour,
                                    interval_s=checkpoint_interval_s, budget_s=checkpoint_budget_s)
    items.append({
        "item": "storage bandwidth", "read_bytes_per_s_per_node": read_bps,
        "checkpoint_write_bytes_per_s": ck_need["write_bytes_per_s"], "checkpoint_bytes": ck_bytes,
        "checkpoint_budget_s": ck_need["budget_s"], "checkpoint_interval_s": ck_need["interval_s"],
        "checkpoint_budget_source": ck_need["budget_source"],
        "checkpoint_interval_source": ck_need["interval_source"],
        "node_has_bytes_per_s": node.storage_bytes_per_s if node else None,
        "rule": "data read at the predicted throughput x bytes per sample; checkpoint writes (all nodes together) "
                + describe(ck_need)})
    ports = nics * nodes
    if nodes > 1:
        down = SWITCH_RADIX // 2
        leaves = math.ceil(ports / down) if ports > SWITCH_RADIX else 1
        spines = 0 if leaves == 1 else math.ceil(leaves * down / SWITCH_RADIX)
    else:
        leaves = spines = 0
    link = node.nic_link if node else None
    items.append({
        "item": "network", "nic_ports_per_node": nics, "nic_link": link, "endpoint_ports": ports,
        "leaf_switches": leaves, "spine_switches": spines,
        "rule": ("one NIC port per GPU (rail-optimised) unless the node template says otherwise; two-level "
                 f"non-blocking fat tree of {SWITCH_RADIX}-port switches") if nodes > 1 else "single node: no fabric"})
    return {"nodes": nodes, "gpus_per_node": g, "gpu": gpu.id, "node": node.id if node else None, "items": items}


# =================================================================================================
# The plan
# =================================================================================================

def bom_line(it: Mapping[str, Any], warn: Callable[[str], str] = lambda t: t.upper()) -> str:
    """One bill-of-materials item (:func:`bill_of_materials`) in words, for the CLI and the app: its sizing,
    what the node has (``warn`` marks a shortfall) and the rule it follows."""
    name = it["item"]
    if name.startswith("power"):
        vendor = f" (vendor maximum {it['vendor_max_w'] / 1000:.3g} kW)" if it.get("vendor_max_w") else ""
        return (f"power supply: {it['value_w'] / 1000:.3g} kW ({it['component_w'] / 1000:.3g} kW of components){vendor}"
                f" - {it['rule']}")
    if name.startswith("CPU"):
        have = f"; the node has {it['node_has']}" + ("" if it["ok"] else " " + warn("(too few)")) if it["node_has"] else ""
        return f"CPU cores: at least {it['value']} (up to {it['recommended_max']}){have} - {it['rule']}"
    if name.startswith("system RAM"):
        have = (f"; the node has {it['node_has_gib']:,.0f} GiB" + ("" if it["ok"] else " " + warn("(too little)"))
                if it["node_has_gib"] else "")
        return f"system RAM: at least {it['value_gib']:,.0f} GiB{have} - {it['rule']}"
    if name.startswith("storage"):
        return (f"storage: read {units.format_rate_bytes(it['read_bytes_per_s_per_node'])} per node for data; write "
                f"{units.format_rate_bytes(it['checkpoint_write_bytes_per_s'])} in total for "
                f"{units.format_bytes(it['checkpoint_bytes'])} checkpoints - {it['rule']}")
    if name.startswith("network"):
        if not it["endpoint_ports"]:
            return "network: single node, no fabric needed"
        return (f"network: {it['nic_ports_per_node']} x {it['nic_link']} ports per node, {it['endpoint_ports']} in "
                f"all; {it['leaf_switches']} leaf + {it['spine_switches']} spine switches - {it['rule']}")
    return str(it)


@dataclass
class PlanResult:
    """A plan. ``table``: every configuration evaluated (pandas DataFrame, unit-suffixed columns); ``pareto``:
    its time-vs-cost frontier; ``recommendation``: what to do and why (dict); plus sensitivity, bill of
    materials, learning-rate advice, the inputs and the assumptions behind the numbers."""

    table: Any
    pareto: Any
    recommendation: dict[str, Any]
    sensitivity: list[dict[str, Any]] = field(default_factory=list)
    bom: dict[str, Any] | None = None
    lr: dict[str, Any] | None = None
    inputs: dict[str, Any] = field(default_factory=dict)
    assumptions: list[str] = field(default_factory=list)
    prices: list[dict[str, Any]] = field(default_factory=list)
    elapsed_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.recommendation.get("status") == "ok"

    def configurations(self, every: bool = False):
        """The best (fastest, hence cheapest) feasible row per hardware and node count, and for hardware with
        no feasible row its first reason; every row with ``every``."""
        return self.table if every else best_per_hardware(self.table)

    def to_dict(self, every: bool = False) -> dict[str, Any]:
        cfg = self.configurations(every)
        return {"inputs": self.inputs, "recommendation": self.recommendation,
                "pareto": _records(self.pareto), "configurations": _records(cfg),
                "configurations_evaluated": int(len(self.table)), "sensitivity": self.sensitivity, "bom": self.bom,
                "lr": self.lr, "prices": self.prices, "assumptions": self.assumptions, "elapsed_s": self.elapsed_s}


#: columns shown for a configuration in JSON and the recommendation
CONFIG_COLUMNS = ("mode", "node", "node_kind", "gpu", "gpus_per_node", "nodes", "n_gpus", "strategy", "precision",
                  "checkpointing", "cpu_offload", "micro_batch", "accum", "global_batch", "feasible", "reason",
                  "meets_deadline", "within_budget", "time_to_train_s", "cost_usd", "capital_usd", "energy_usd",
                  "amortized_cost_usd", "energy_kwh", "usd_per_gpu_hour", "price_source", "price_date",
                  "step_s", "throughput_samples_per_s", "tokens_per_s", "scaling_efficiency_frac",
                  "mfu_frac",
                  "bottleneck", "memory_per_gpu_bytes", "memory_capacity_bytes", "steps", "train_s", "eval_s",
                  "checkpoint_s", "checkpoint_interval_s", "checkpoints", "failures", "lost_s", "goodput_frac",
                  "node_power_w", "node_assumed",
                  "layout", "tp", "cp", "pp", "vp", "ep", "recompute", "pp_bubble_frac", "layout_why")  # [issue 12] layouts


def recommendation_scenario(config: Mapping[str, Any], workload, db, params=None,
                            software: Mapping[str, Any] | None = None):
    """[stop 56] A plan's recommended configuration (``config``: ``recommendation["configuration"]``) that is an LLM
    layout of ``workload``, rebuilt as the :class:`~gpusim.simulation.Scenario` it was ranked as, with the precision and
    software settings the plan was given (``software``: the MoE options and CUDA-graph scope it was pinned to), and
    that scenario's :class:`~gpusim.simulation.StepResult`: ``(scenario, result)``. None when the configuration is not
    a layout, or when the rebuild is not exact: its predicted throughput must match the plan row's within 1% (an
    answer about a different scenario would be about something else). The per-layout figures a plan row does not
    carry (the allocator's share of memory, predict's software advice) are read from it."""
    from gpusim.rows import option_scenario
    from gpusim.search import layout_scenario
    from gpusim.simulation import simulate
    from gpusim.sweeps import HardwareOption

    if not config or not config.get("layout") or getattr(workload, "transformer", None) is None:
        return None
    opt = HardwareOption(gpu=str(config["gpu"]), gpus_per_node=int(config["gpus_per_node"]),
                         node=None if config["node_assumed"] else str(config["node"]))
    try:
        scn = layout_scenario(option_scenario(workload, opt, db, int(config["nodes"]), kind=str(config["strategy"]),
                                              precision=str(config["precision"]), recompute="none", per_gpu_batch=1,
                                              global_batch=int(config["global_batch"]), **dict(software or {})),
                              config)
        res = simulate(scn, db=db, params=params, recommend=False)
    except (GpusimError, ValueError, KeyError):  # a configuration this rebuild cannot express (pydantic's
        return None                                # ValidationError is a ValueError): no answer rather than a wrong one
    if abs(res.throughput_samples_per_s / float(config["throughput_samples_per_s"]) - 1.0) > 0.01:
        return None
    return scn, res


def recommendation_software_advice(config: Mapping[str, Any], workload, db, params=None,
                                   software: Mapping[str, Any] | None = None) -> list[dict]:
    """[issue 17] For a plan whose recommended configuration (``config``: ``recommendation["configuration"]``) is an
    LLM layout of ``workload``: :func:`gpusim.simulation.software_advice` for it, i.e. what FP8 training and
    Megatron-Core's MoE software settings would add. The plan ranks hardware under the precision and settings it is
    given (``software``: the MoE options and CUDA-graph scope it was pinned to; Megatron-Core's defaults otherwise),
    and they gain more on some hardware than on other (MXFP8 on Blackwell against per-tensor FP8 on Hopper;
    full-iteration graphs hide a slow Grace host's launches; the fused grouped MLP is Blackwell MXFP8), so the answer
    also tells the user to rank with them. Empty when the configuration is not a layout, when the advice has nothing
    to add, or when the configuration cannot be rebuilt exactly (:func:`recommendation_scenario`)."""
    from gpusim.simulation import software_advice

    rebuilt = recommendation_scenario(config, workload, db, params, software)
    if rebuilt is None:
        return []
    try:
        return software_advice(rebuilt[0], db=db, params=params)
    except (GpusimError, ValueError, KeyError):
        return []


def recommendation_memory_record(config: Mapping[str, Any], workload, db, params=None,
                                 software: Mapping[str, Any] | None = None) -> dict | None:
    """[stop 56] The ``memory_record`` of a plan's recommended LLM layout (:func:`gpusim.track_record.memory_record`,
    as ``gpusim predict`` and ``sweep`` print it): how far gpusim's memory figures were from the published runs'
    peaks, their 80% range carried to this layout's memory against its GPU's. A plan row carries the layout's total
    memory, not the allocator's share the band is measured on, so the layout is rebuilt
    (:func:`recommendation_scenario`); None when it is not a layout or cannot be rebuilt exactly."""
    from gpusim import track_record

    rebuilt = recommendation_scenario(config, workload, db, params, software)
    return None if rebuilt is None else track_record.memory_record_for(rebuilt[1], params)


def recommendation_memory_fit(config: Mapping[str, Any], workload, db, params=None,
                              software: Mapping[str, Any] | None = None, pins=None,
                              memory: dict | None = None) -> dict | None:
    """[stop 56] Where the top of the recommended layout's ``memory`` record (:func:`recommendation_memory_record`)
    passes its GPU's memory: the fastest layout of a layout search on the recommended hardware, at its global batch
    and under the plan's ``pins`` (:class:`gpusim.search.Pins`), whose top still fits
    (:func:`gpusim.track_record.memory_record_fit`), its slowdown against the recommended layout's own speed. None
    where the record's top fits, or without a record or a rebuild."""
    from gpusim import track_record
    from gpusim.search import Pins, search_layouts

    span = (memory or {}).get("memory_range_bytes")
    if not span or span[1] <= float(memory["capacity_bytes"]):
        return None
    rebuilt = recommendation_scenario(config, workload, db, params, software)
    if rebuilt is None:
        return None
    try:
        res = search_layouts(rebuilt[0], db=db, params=params, pins=pins or Pins(),
                             global_batch=int(config["global_batch"]))
    except (GpusimError, ValueError):
        return None
    return track_record.memory_record_fit(
        res, memory, reference_tokens_per_s=float(config["throughput_samples_per_s"]) * float(res["seq_len"]))


def _records(df) -> list[dict[str, Any]]:
    if df is None or len(df) == 0:
        return []
    cols = [c for c in CONFIG_COLUMNS if c in df.columns] + [c for c in df.columns if c not in CONFIG_COLUMNS]
    out = []
    for rec in df[cols].to_dict(orient="records"):
        out.append({k: _py(v) for k, v in rec.items()})
    return out


def _py(v):
    if isinstance(v, (np.generic,)):
        v = v.item()
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def best_per_hardware(df):
    """One row per (mode, node, gpu, GPUs per node, nodes): the feasible row with the shortest time to train
    (within one hardware and count, cost grows with time, so it is also the cheapest), else the first row."""
    if len(df) == 0:
        return df
    keys = ["mode", "node", "gpu", "gpus_per_node", "nodes"]
    d = df.assign(_t=np.where(df["feasible"].to_numpy(), df["time_to_train_s"].to_numpy(), np.inf),
                  _f=~df["feasible"].to_numpy())
    d = d.sort_values(["_f", "_t"], kind="stable")
    d = d.drop_duplicates(keys, keep="first")
    return d.drop(columns=["_t", "_f"]).sort_values(["mode", "node", "gpu", "gpus_per_node", "nodes"]).reset_index(
        drop=True)


def _plan_options(db, mode: str, gpus, nodes, pricing, overrides: Mapping[str, float] | None = None):
    """Hardware options for a mode and, per option, its mode. A GPU given a price override counts as priced (the
    override is what the user asked to plan with)."""
    from gpusim.sweeps import GENERIC_GPUS_PER_NODE, HardwareOption, hardware_options

    overridden = {k.lower() for k in (overrides or {})}

    kinds = {"cloud": ("cloud-instance",), "purchase": ("server", "workstation", "rack")}
    out: list[tuple[Any, str]] = []
    modes = ("cloud", "purchase") if mode == "both" else (mode,)
    if nodes:
        for opt in hardware_options(db, nodes=nodes):
            nk = db.node(opt.node).kind
            m = "cloud" if nk == "cloud-instance" else "purchase"
            if m in modes:
                out.append((opt, m))
            else:
                raise PlanError(f"node {opt.node!r} is a {nk}: it is priced for {m}, not {mode} "
                                f"(use --{m} or --cloud --purchase)")
    gpu_list = [db.gpu(g).id for g in (gpus or [])]
    if nodes and not gpus:
        return out
    for m in modes:
        held_by_kind = {n.gpu for n in db.nodes.values() if n.kind in kinds[m]}
        opts = hardware_options(db, gpus=gpu_list or None, node_kinds=kinds[m], generic=False)
        out += [(o, m) for o in opts if (o, m) not in out]
        # GPUs not in a template of this mode's kinds: in the database's usual node, if priced per GPU (or asked).
        # [issue 17] In the cloud a GPU a template holds gets the usual node too where it has a per-GPU offer (an H200
        # rented per GPU-hour from a neocloud while the database's H200 cloud instance, AWS p5e, has no on-demand
        # price): the offer is for that GPU in an HGX-class server, not for the instance. (A purchase template is
        # priced from the GPU's price already, price_for: the usual node would repeat its rows.)
        cand = gpu_list or list(db.gpus)
        for gid in cand:
            per_gpu = any(p.node is None for p in db.prices_for(gpu=gid, kind=m))
            if gid in held_by_kind and not (per_gpu and m == "cloud"):
                continue
            priced = per_gpu or gid in overridden
            if not priced and gid not in gpu_list:
                continue
            cap = max([n.gpus_per_node for n in db.nodes.values() if n.gpu == gid] + [8])
            # [issue 17] an offer quoted for a whole instance of n GPUs (CoreWeave's 4-GPU GB200 tray, Lambda's 8x
            # B200) rents n GPUs at a time; a per-GPU quote (gpus 1), or the user's own price, any count
            sizes = {p.gpus for p in db.prices_for(gpu=gid, kind=m) if p.node is None}
            any_size = m != "cloud" or gid in overridden or not sizes or 1 in sizes
            for g in GENERIC_GPUS_PER_NODE:
                if g <= cap and (any_size or g in sizes):
                    out.append((HardwareOption(gpu=gid, gpus_per_node=g, node=None), m))
    return out




def plan(model: str | None = None, *, workload=None, seq_len: int | None = None, tokens: float | None = None,
         samples: float | None = None, epochs: float = 1.0, deadline_s: float | None = None,
         budget_usd: float | None = None, max_global_batch: int | None = None, global_batch: int | None = None,
         reference_lr: float | None = None, gpus: Sequence[str] | None = None, nodes: Sequence[str] | None = None,
         max_gpus: int | None = None, mode: str = "cloud", pricing: str | None = None,
         price_overrides: Mapping[str, float] | None = None, cost_basis: str = "capital",
         lifetime_years: float = LIFETIME_YEARS, energy: str | None = None, usd_per_kwh: float | None = None,
         pue: float | None = None, strategies: Sequence[str] | None = None, precisions: Sequence[str] = ("auto",),
         checkpointing: Sequence[bool] = (False, True), num_workers: int | str | None = "auto",
         optimizer: str = "adam", checkpoint_interval_s: float | None = None,
         checkpoint_write_bytes_per_s: float | None = None,
         failure_rate_per_gpu_hour: float = FAILURE_RATE_PER_GPU_HOUR, restart_s: float = RESTART_S,
         eval_overhead_frac: float = EVAL_OVERHEAD_FRAC, db=None, params=None,
         progress: Callable[[int, int], None] | None = None, with_sensitivity: bool = True,
         layouts: bool | None = None, layout_pins=None) -> PlanResult:
    """Plan the training of a workload: every configuration's time, cost and energy; the Pareto frontier; a
    recommendation. See the module docstring; arguments:

    - amount: ``tokens`` (sequence models) or ``samples`` x ``epochs``;
    - constraints: ``deadline_s``, ``budget_usd``, ``max_global_batch`` (default: the largest published
      recipe's, see :data:`DEFAULT_MAX_TOKENS_PER_BATCH`), ``gpus`` / ``nodes`` (candidates), ``max_gpus``
      (default :data:`gpusim.sweeps.DEFAULT_MAX_GPUS`), ``mode`` ``"cloud"``, ``"purchase"`` or ``"both"``;
    - recipe: ``global_batch`` (accumulation reaches it; with ``reference_lr`` it anchors the learning-rate
      advice), ``strategies``, ``precisions``, ``checkpointing``, ``num_workers`` (``"auto"``: the node's cores
      per GPU feed the loader), ``optimizer``;
    - prices: hwdb prices (``pricing`` preference, e.g. ``"on-demand"``), ``price_overrides`` (id -> USD per
      GPU-hour in the cloud; USD per node or per GPU when buying), ``cost_basis`` for purchases (``"capital"``:
      capital + energy of the run; ``"amortized"``: capital x run / ``lifetime_years`` + energy), electricity
      from hwdb ``energy`` (default entry) or ``usd_per_kwh`` / ``pue``;
    - LLM layouts (issue 12): ``layouts`` (default: on for a transformer language model) also searches every
      Megatron layout (tp, cp, pp, vp, micro-batch, recomputation; :mod:`gpusim.search`) on each hardware option
      and count, one row per (option, count) with the best layout and why; ``layout_pins`` (a
      :class:`gpusim.search.Pins`) fixes degrees;
    - run accounting: ``checkpoint_interval_s`` (default Young's optimum), ``checkpoint_write_bytes_per_s``
      (all nodes together; default :data:`CHECKPOINT_WRITE_FRAC_OF_READ` x the node's storage, every node
      writing its shard for sharded strategies, one node for DDP), ``failure_rate_per_gpu_hour``,
      ``restart_s``, ``eval_overhead_frac``.

    Bad constraints raise :class:`PlanError`; unknown ids raise :class:`gpusim.errors.UnknownIdError`. A
    deadline or budget that nothing meets is not an error: the recommendation says what came closest.
    """
    import time

    from gpusim.hwdb import load
    from gpusim.params import DEFAULT_PARAMS
    from gpusim.sweeps import DEFAULT_MAX_GPUS, DEFAULT_STRATEGIES, sweep

    t0 = time.perf_counter()
    db = db or load()
    params = params or DEFAULT_PARAMS
    # ---- inputs ------------------------------------------------------------------------------------------
    if mode not in MODES:
        raise PlanError(f"mode must be one of {', '.join(MODES)} (got {mode!r})")
    if cost_basis not in COST_BASES:
        raise PlanError(f"cost basis must be one of {', '.join(COST_BASES)} (got {cost_basis!r})")
    given = dict(tokens=tokens, samples=samples, epochs=epochs, deadline_s=deadline_s, budget_usd=budget_usd,
                 max_global_batch=max_global_batch, global_batch=global_batch, reference_lr=reference_lr,
                 max_gpus=max_gpus, lifetime_years=lifetime_years, usd_per_kwh=usd_per_kwh, pue=pue,
                 checkpoint_interval_s=checkpoint_interval_s, checkpoint_write_bytes_per_s=checkpoint_write_bytes_per_s,
                 failure_rate_per_gpu_hour=failure_rate_per_gpu_hour, restart_s=restart_s,
                 eval_overhead_frac=eval_overhead_frac,
                 num_workers=num_workers if isinstance(num_workers, (int, float)) else None)
    for name, v in given.items():
        if v is not None:
            try:
                words = name.removesuffix("_s").removesuffix("_usd").removesuffix("_frac").replace("_", " ")
                INPUT_BOUNDS[name].check(v, f"the {words}")
            except ValueError as e:
                raise PlanError(str(e)) from None
    if global_batch and max_global_batch and global_batch > max_global_batch:
        raise PlanError(f"the target global batch {global_batch} is over the maximum {max_global_batch}")
    for k, v in (price_overrides or {}).items():
        try:
            INPUT_BOUNDS["price_usd"].check(v, f"price override for {k!r}")
        except ValueError as e:
            raise PlanError(str(e)) from None
        db.find(k)  # unknown ids say so, with close matches
    if (model is None) == (workload is None):
        raise PlanError("give exactly one of `model` (a catalogue id) or `workload`")
    if model is not None:
        from gpusim.workload import get_workload

        wl = get_workload(model, seq_len=seq_len)
    else:
        wl = workload.with_seq_len(seq_len) if seq_len else workload
    total_samples = training_samples(wl, tokens=tokens, samples=samples, epochs=epochs)
    max_gb_given = max_global_batch is not None
    if max_global_batch is None:
        max_global_batch = max(default_max_global_batch(wl), global_batch or 1)
    if energy and energy not in db.energy:
        raise PlanError(f"unknown energy entry {energy!r}; one of {', '.join(db.energy)}")
    en = db.energy[energy] if energy else db.default_energy()
    kwh_usd = float(usd_per_kwh) if usd_per_kwh is not None else en.usd_per_kwh
    pue_v = float(pue) if pue is not None else en.pue
    max_gpus = int(max_gpus or DEFAULT_MAX_GPUS)

    # ---- sweep -------------------------------------------------------------------------------------------
    opts = _plan_options(db, mode, gpus, nodes, pricing, price_overrides)
    if not opts:
        raise PlanError(f"no hardware to plan with in mode {mode!r} for the GPUs/nodes given")
    seen: dict[Any, str] = {}
    for o, m in opts:
        seen.setdefault(o, m)
    options = list(seen)
    df = sweep(workload=wl, options=options, max_gpus=max_gpus, strategies=strategies or DEFAULT_STRATEGIES,
               precisions=precisions, checkpointing=checkpointing, global_batch=global_batch,
               max_global_batch=max_global_batch, num_workers=num_workers, optimizer=optimizer, db=db, params=params,
               progress=progress)
    df = _with_layout_rows(df, wl, options, max_gpus=max_gpus, global_batch=global_batch,
                           max_global_batch=max_global_batch, precisions=precisions, db=db, params=params,
                           progress=progress, layouts=layouts, pins=layout_pins)
    df = _add_run_columns(df, db, wl, seen, options, mode=mode, total_samples=total_samples, pricing=pricing,
                          price_overrides=price_overrides, cost_basis=cost_basis, lifetime_years=lifetime_years,
                          usd_per_kwh=kwh_usd, pue=pue_v, optimizer=optimizer,
                          checkpoint_interval_s=checkpoint_interval_s,
                          checkpoint_write_bytes_per_s=checkpoint_write_bytes_per_s,
                          failure_rate_per_gpu_hour=failure_rate_per_gpu_hour, restart_s=restart_s,
                          eval_overhead_frac=eval_overhead_frac, deadline_s=deadline_s, budget_usd=budget_usd)
    feas = df["feasible"].to_numpy()
    # the frontier is of what the constraints allow (a purchase over the budget is no option); when nothing
    # meets them, of every feasible configuration, so that the closest misses are still shown
    allowed = feas & df["within_budget"].to_numpy() & df["meets_deadline"].to_numpy()
    on = allowed if allowed.any() else feas
    front = pareto_front(np.where(on, df["time_to_train_s"].to_numpy(), np.nan),
                         np.where(on, df["cost_usd"].to_numpy(), np.nan))
    df["pareto"] = front
    pareto = df[front].sort_values(["time_to_train_s", "cost_usd"]).reset_index(drop=True)

    inputs = {"workload": wl.id, "workload_name": wl.name, "sample_unit": wl.sample_unit,
              "tokens_per_sample": float(wl.tokens_per_sample), "params": float(wl.params),
              "total_samples": total_samples, "tokens": tokens, "samples": samples, "epochs": epochs,
              "deadline_s": deadline_s, "budget_usd": budget_usd, "max_global_batch": max_global_batch,
              "max_global_batch_default": not max_gb_given, "global_batch": global_batch, "reference_lr": reference_lr,
              "gpus": list(gpus or []), "nodes": list(nodes or []), "max_gpus": max_gpus, "mode": mode,
              "cost_basis": cost_basis, "lifetime_years": lifetime_years, "usd_per_kwh": kwh_usd, "pue": pue_v,
              "failure_rate_per_gpu_hour": failure_rate_per_gpu_hour, "restart_s": restart_s,
              "checkpoint_interval_s": checkpoint_interval_s,
              "checkpoint_write_bytes_per_s": checkpoint_write_bytes_per_s,
              "eval_overhead_frac": eval_overhead_frac, "price_overrides": dict(price_overrides or {}),
              # the layout options the search held fixed (degrees, MoE options, CUDA-graph scopes)
              "layout_pins": {k: (list(v) if isinstance(v, tuple) else v) for k, v in vars(layout_pins).items()
                              if v is not None} if layout_pins is not None else {}}
    rec = recommend(df, deadline_s=deadline_s, budget_usd=budget_usd, mode=mode, max_gpus=max_gpus,
                    max_global_batch=max_global_batch, cost_basis=cost_basis, lifetime_years=lifetime_years, db=db)
    result = PlanResult(table=df, pareto=pareto, recommendation=rec, inputs=inputs)
    result.assumptions = _assumptions(inputs, en, max_gb_given, wl)
    left = unpriced_gpus(db, mode, {o.gpu for o in options}, gpus, nodes)  # [issue 17]
    if left:
        result.assumptions.append(left)
    result.prices = _prices_used(df)
    best = rec.get("configuration")
    if best is not None:
        bi = rec["row"]
        row = df.loc[bi]
        result.lr = lr_advice(int(row["global_batch"]), reference_global_batch=global_batch,
                              reference_lr=reference_lr, max_global_batch=max_global_batch,
                              sample_unit=wl.sample_unit, steps=float(row["steps"]),
                              steps_per_epoch=(total_samples / epochs / float(row["global_batch"]))
                              if samples is not None else None)
        result.bom = bill_of_materials(row.to_dict(), db, wl, optimizer=optimizer,
                                       checkpoint_interval_s=checkpoint_interval_s,
                                       failure_rate_per_gpu_hour=failure_rate_per_gpu_hour)
        if with_sensitivity:
            result.sensitivity = sensitivity(row, db=db, workload=wl, params=params, inputs=inputs,
                                             options=options, optimizer=optimizer)
            if result.sensitivity:
                top = result.sensitivity[0]
                rec["reasons"].append(
                    f"before signing: {top['assumption']} moves this answer most (time "
                    f"{top['time_low_frac']:+.0%}/{top['time_high_frac']:+.0%}, cost {top['cost_low_frac']:+.0%}/"
                    f"{top['cost_high_frac']:+.0%} over {top['range']}): {top['action']}")
                model_top = next((x for x in result.sensitivity if x["assumption"] != top["assumption"]
                                  and x["swing_frac"] > 0.05 and x is not top), None)
                if model_top is not None:
                    rec["reasons"].append(f"next: {model_top['assumption']} ({model_top['swing_frac']:.0%} swing): "
                                          f"{model_top['action']}")
        if result.lr and result.lr.get("batch_factor", 1) > 1:
            rec["reasons"].append(result.lr["advice"])
    result.elapsed_s = time.perf_counter() - t0
    return result


def _with_layout_rows(df, wl, options, *, max_gpus, global_batch, max_global_batch, precisions, db, params, progress,
                      layouts, pins):
    """[issue 12] The sweep's data-parallel rows plus, for a transformer language model, one row per hardware
    option and node count with the best Megatron layout there (gpusim.search.plan_layout_rows)."""
    from gpusim.rules import transformer_of

    if layouts is None:
        layouts = wl.sample_unit == "sequence" and transformer_of(wl) is not None
    if not layouts:
        return df
    import pandas as pd

    from gpusim.rules import cli_flags, default_global_batch
    from gpusim.search import LAYOUT_COLUMNS, ROUTING_PIN_FIELDS, plan_layout_rows
    from gpusim.sweeps import default_node_counts

    done = {"n": int(df.attrs.get("model_rows", len(df)))}

    def cb(k, total):  # one progress bar over both stages
        if progress is not None:
            progress(done["n"] + k, done["n"] + total)

    gb = int(global_batch or default_global_batch(max_global_batch))
    counts = [default_node_counts(o.gpus_per_node, max_gpus) for o in options]
    # [issue 17] the data-parallel rows (ep 1) cannot honour an MoE option, the layout rows do; the routing figures
    # change nothing at ep 1, so they leave the data-parallel rows as they are
    moe_pins = [k for k in (pins.moe_options() if pins is not None else {}) if k not in ROUTING_PIN_FIELDS]
    if moe_pins and len(df):
        flags = cli_flags(moe_pins)
        df["reason"] = np.where(df["feasible"].to_numpy(), f"the data-parallel rows do not model {flags}: see the "
                                f"layout rows", df["reason"].to_numpy().astype(object))
        df["feasible"] = False
    # [issue 17] every precision asked for gets its layout rows (the best layout of each precision on each option and
    # count), so a plan over BF16 and FP8 ranks both (it searched the first one's layouts only)
    parts = []
    for prec in dict.fromkeys(precisions or ("auto",)):
        part = plan_layout_rows(wl, options, counts, global_batch=gb, precision=prec, db=db, params=params,
                                pins=pins, max_global_batch=max_global_batch, progress=cb)
        done["n"] += int(part.attrs.get("layout_rows", 0))
        parts.append(part)
    lay = pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0]
    lay.attrs = {"layout_rows": sum(int(p.attrs.get("layout_rows", 0)) for p in parts)}
    attrs = dict(df.attrs)
    for c in LAYOUT_COLUMNS:
        df[c] = "" if c in ("layout", "recompute", "layout_why") else 0
    out = pd.concat([df, lay], ignore_index=True)
    out.attrs = {**attrs, "layout_rows": lay.attrs.get("layout_rows", 0)}
    return out


def _add_run_columns(df, db, wl, option_mode, options, *, mode, total_samples, pricing, price_overrides, cost_basis,
                     lifetime_years, usd_per_kwh, pue, optimizer, checkpoint_interval_s, checkpoint_write_bytes_per_s,
                     failure_rate_per_gpu_hour, restart_s, eval_overhead_frac, deadline_s, budget_usd):
    """Prices, energy and whole-run accounting for every row (vectorised over rows, a Python loop over the few
    distinct hardware options only)."""
    import pandas as pd

    n = len(df)
    # ---- per hardware option: mode, price, node power ----------------------------------------------------
    key_cols = ["node", "gpu", "gpus_per_node", "node_assumed"]
    grp = df.groupby(key_cols, observed=True, sort=False).ngroup().to_numpy()
    firsts = df.groupby(key_cols, observed=True, sort=False).head(1)
    ng = int(grp.max()) + 1 if n else 0
    g_mode = np.empty(ng, dtype=object)
    g_gpuh = np.full(ng, np.nan)
    g_cap = np.full(ng, np.nan)
    g_src = np.empty(ng, dtype=object)
    g_date = np.empty(ng, dtype=object)
    g_note = np.empty(ng, dtype=object)
    g_pw = np.full(ng, np.nan)
    g_nics = np.zeros(ng)
    opt_mode = {(o.node, o.gpu, o.gpus_per_node): m for o, m in option_mode.items()}
    for i, (_, r) in zip(grp[firsts.index.to_numpy()], firsts.iterrows()):
        gpu = db.gpu(r["gpu"])
        node = db.node(r["node"]) if r["node"] else None
        assumed = bool(r["node_assumed"])
        m = opt_mode.get((None if assumed else r["node"], r["gpu"], int(r["gpus_per_node"])))
        if m is None:
            m = "cloud" if (node is not None and node.kind == "cloud-instance") else "purchase"
        g_mode[i] = m
        pi = price_for(db, mode=m, node=node, gpu=gpu, gpus_per_node=int(r["gpus_per_node"]), assumed=assumed,
                       pricing=pricing, overrides=price_overrides)
        g_gpuh[i], g_cap[i], g_src[i], g_date[i], g_note[i] = (pi.usd_per_gpu_hour, pi.capital_usd_per_node, pi.source,
                                                               pi.date, pi.note)
        g = int(r["gpus_per_node"])
        sockets = node.numa_sockets if node else 2
        ram = node.ram_gib if node else g * gpu.memory_gib
        nics = (node.nics_per_node or g) if node else g
        g_nics[i] = nics
        g_pw[i] = float(node_power_w(gpu.tdp_w, g, sockets, ram, nics))
    modes_row = g_mode[grp] if n else np.array([], dtype=object)
    is_cloud = modes_row == "cloud"
    usd_gpuh = g_gpuh[grp]
    cap_node = g_cap[grp]
    nodes = df["nodes"].to_numpy().astype(np.float64)
    n_gpus = df["n_gpus"].to_numpy().astype(np.float64)
    multi = nodes > 1
    # ---- checkpoints ----------------------------------------------------------------------------------------
    prec = df["precision"].astype(str).to_numpy()
    # (a row no configuration runs on keeps the precision it was asked for, e.g. "auto": its checkpoint is NaN)
    per_param = {p: checkpoint_bytes(1.0, p, optimizer) if base_precision(p) in WEIGHT_BYTES else math.nan
                 for p in set(prec)}
    ck_bytes = float(wl.params) * np.array([per_param[p] for p in prec]) if n else np.zeros(0)
    sharded = df["strategy"].astype(str).isin(["zero1", "zero2", "zero3", "fsdp-full", "fsdp-grad-op",
                                               "fsdp-hybrid"]).to_numpy()
    if checkpoint_write_bytes_per_s is not None:
        write_bps = np.full(n, float(checkpoint_write_bytes_per_s))
    else:
        node_write = CHECKPOINT_WRITE_FRAC_OF_READ * df["storage_bytes_per_s_per_node"].to_numpy()
        write_bps = node_write * np.where(sharded, nodes, 1.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        write_s = ck_bytes / write_bps
    acc = run_accounting(step_s=df["step_s"].to_numpy(), global_batch=df["global_batch"].to_numpy(), n_gpus=n_gpus,
                         total_samples=total_samples, checkpoint_write_s=write_s,
                         failure_rate_per_gpu_hour=failure_rate_per_gpu_hour, restart_s=restart_s,
                         checkpoint_interval_s=checkpoint_interval_s, eval_overhead_frac=eval_overhead_frac)
    wall = acc["wall_s"]
    hours = wall / units.HOUR
    # ---- energy and cost ------------------------------------------------------------------------------------
    pw = g_pw[grp] * nodes
    energy_kwh = pw * wall / units.KWH * pue
    energy_usd = energy_kwh * usd_per_kwh
    net_usd = np.where(multi, NETWORK_USD_PER_PORT * g_nics[grp] * nodes, 0.0)
    capital = np.where(is_cloud, 0.0, cap_node * nodes + net_usd)
    lifetime_s = lifetime_years * 365.25 * units.DAY
    amort = np.where(is_cloud, np.nan, capital * wall / lifetime_s + energy_usd)
    cloud_cost = usd_gpuh * n_gpus * hours
    if cost_basis == "amortized":
        buy_cost = amort
    else:
        buy_cost = capital + energy_usd
    cost = np.where(is_cloud, cloud_cost, buy_cost)
    # ---- feasibility -------------------------------------------------------------------------------------------
    reason = df["reason"].to_numpy().astype(object)
    feasible = df["feasible"].to_numpy().copy()
    no_price = feasible & ~np.isfinite(np.where(is_cloud, usd_gpuh, cap_node))
    if no_price.any():
        reason[no_price] = g_note[grp][no_price]
        feasible &= ~no_price
    stuck = feasible & ~np.isfinite(wall)
    if stuck.any():
        reason[stuck] = [f"interruptions every {units.format_duration(units.HOUR / (failure_rate_per_gpu_hour * k))} "
                         f"on {int(k)} GPUs outpace checkpointing and restarts: the run never finishes"
                         for k in n_gpus[stuck]]
        feasible &= ~stuck
    out = df.assign(
        mode=pd.Categorical(modes_row, categories=["cloud", "purchase"]), feasible=feasible, reason=reason.astype(str),
        time_to_train_s=np.where(feasible, wall, np.nan), cost_usd=np.where(feasible, cost, np.nan),
        capital_usd=np.where(is_cloud, np.nan, capital), energy_usd=energy_usd, amortized_cost_usd=amort,
        energy_kwh=energy_kwh, usd_per_gpu_hour=np.where(is_cloud, usd_gpuh, np.nan),
        capital_usd_per_node=np.where(is_cloud, np.nan, cap_node),
        price_source=g_src[grp].astype(str), price_date=g_date[grp].astype(str), node_power_w=g_pw[grp],
        checkpoint_bytes=ck_bytes, checkpoint_write_s=write_s, **acc)
    out["meets_deadline"] = feasible & ((out["time_to_train_s"].to_numpy() <= deadline_s) if deadline_s else True)
    out["within_budget"] = feasible & ((out["cost_usd"].to_numpy() <= budget_usd) if budget_usd else True)
    return out


def _usd(x: float) -> str:
    """USD for people: whole dollars from 100 on, cents below."""
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:,.2f}"


def _describe(row, cost_basis: str = "capital", lifetime_years: float = LIFETIME_YEARS) -> str:
    """One sentence a buyer can act on."""
    nodes, g, n = int(row["nodes"]), int(row["gpus_per_node"]), int(row["n_gpus"])
    node = str(row["node"])
    hw = (f"{nodes} x {node}" if not row["node_assumed"] else f"{nodes} node{'s' * (nodes > 1)} of {g} x {row['gpu']} "
          f"(as in {node})")
    verb = "Rent" if row["mode"] == "cloud" else "Buy"
    t = units.format_duration(float(row["time_to_train_s"]))
    if row["mode"] == "cloud":
        money = (f"{_usd(row['cost_usd'])} USD at {row['usd_per_gpu_hour']:.3g} USD per GPU-hour "
                 f"({row['price_source']}, {row['price_date']})")
    else:
        money = (f"capital {_usd(row['capital_usd'])} USD ({row['price_source']}, {row['price_date']}) + energy "
                 f"{_usd(row['energy_usd'])} USD for the run; {_usd(row['amortized_cost_usd'])} USD per run amortised "
                 f"over {lifetime_years:g} years")
    if row.get("layout"):  # [issue 12] a Megatron layout row
        return (f"{verb} {hw} ({n} x {row['gpu']}): trains in {t} for {money}; run it with Megatron {row['layout']}, "
                f"{row['precision']}, distributed optimizer, {int(row['accum'])} micro-batches of "
                f"{int(row['micro_batch'])} per step, global batch {int(row['global_batch'])}.")
    recipe = (f"{row['strategy']}, {row['precision']}{', activation checkpointing' if row['checkpointing'] else ''}, "
              f"micro-batch {int(row['micro_batch'])}" + (f" x {int(row['accum'])} accumulation" if row["accum"] > 1
                                                          else "") + f", global batch {int(row['global_batch'])}")
    return f"{verb} {hw} ({n} x {row['gpu']}): trains in {t} for {money}; run it with {recipe}."


def recommend(df, *, deadline_s=None, budget_usd=None, mode="cloud", max_gpus=None, max_global_batch=None,
              cost_basis="capital", lifetime_years=LIFETIME_YEARS, db=None) -> dict[str, Any]:
    """Pick a configuration and say why.

    - deadline (and budget): the cheapest configuration that meets both (ties: the faster);
    - budget only: the fastest within budget (ties: the cheaper);
    - neither: the Pareto point with the smallest product of time and cost relative to the fastest and the
      cheapest (the best balance; the fastest and the cheapest are given as alternatives).

    When nothing meets the constraints, ``status`` is ``"no-plan"`` and ``closest`` says what came nearest
    and what to change. When nothing is feasible at all, ``status`` is ``"nothing-feasible"`` with the reasons
    counted.
    """
    feas = df["feasible"].to_numpy()
    t = df["time_to_train_s"].to_numpy()
    c = df["cost_usd"].to_numpy()
    out: dict[str, Any] = {"status": "ok", "reasons": [], "rule": "", "configuration": None, "row": None,
                           "alternatives": {}, "closest": {}}
    if not feas.any():
        # count by kind of reason (the text before its details in parentheses), with one example each
        reasons = df["reason"].astype(str)
        kind = reasons.str.split(" (", n=1, regex=False).str[0]
        counts = kind.value_counts().head(6)
        examples = {k: reasons[kind == k].iloc[0] for k in counts.index}
        out["status"] = "nothing-feasible"
        out["summary"] = "No configuration can run this training: " + "; ".join(
            f"{k} ({v:,} configurations)" for k, v in counts.items()) + "."
        out["reasons"] = [f"{v:,} configurations: {examples[k]}" for k, v in counts.items()]
        return out

    def pick(mask, primary, secondary):
        cand = np.nonzero(mask)[0]
        if len(cand) == 0:
            return None
        order = np.lexsort((secondary[cand], primary[cand]))
        return int(cand[order[0]])

    fastest = pick(feas, t, c)
    cheapest = pick(feas, c, t)
    meets_d = feas & (t <= deadline_s) if deadline_s else feas
    meets_b = feas & (c <= budget_usd) if budget_usd else feas
    both = meets_d & meets_b
    if deadline_s:
        best = pick(both, c, t)
        out["rule"] = "the cheapest configuration that meets the deadline" + (" and the budget" if budget_usd else "")
    elif budget_usd:
        best = pick(both, t, c)
        out["rule"] = "the fastest configuration within the budget"
    else:
        front = df["pareto"].to_numpy() if "pareto" in df else pareto_front(np.where(feas, t, np.nan),
                                                                                np.where(feas, c, np.nan))
        score = np.where(front, (t / t[fastest]) * (c / c[cheapest]), np.inf)
        best = int(np.argmin(score))
        out["rule"] = ("the best balance of time and cost on the Pareto frontier, as no deadline or budget was "
                       "given (smallest product of time and cost relative to the fastest and the cheapest)")
    cols = [k for k in CONFIG_COLUMNS if k in df.columns]

    def rec(i):
        return {k: _py(v) for k, v in df.iloc[i][cols].to_dict().items()}

    out["alternatives"] = {"fastest": rec(fastest), "cheapest": rec(cheapest)}
    if best is None:
        out["status"] = "no-plan"
        lines: list[str] = []
        head: list[str] = []
        if deadline_s and not meets_d.any():
            r = df.iloc[fastest]
            head.append(f"the fastest configuration takes {r['time_to_train_s'] / deadline_s:.2f}x the deadline of "
                        f"{units.format_duration(deadline_s)}")
            lines.append(f"closest to the deadline: {_describe(r, cost_basis, lifetime_years)}")
            if r.get("layout"):  # [issue 12]
                lines.append(f"its layout {r['layout_why']}")
            out["closest"]["deadline"] = rec(fastest)
            n_max = int(df["n_gpus"].max())
            if int(r["n_gpus"]) >= n_max and max_gpus and n_max >= max_gpus / 2:
                lines.append(f"the fastest uses the most GPUs allowed: raise --max-gpus (now {max_gpus}) or extend the "
                             "deadline")
            over = df["reason"].str.startswith("global batch").sum()
            if over:
                lines.append(f"{over} configurations were over the global-batch limit {max_global_batch}: a larger "
                             "--max-global-batch (if your recipe converges with it) allows more GPUs")
        if budget_usd and not meets_b.any():
            r = df.iloc[cheapest]
            head.append(f"the cheapest configuration costs {r['cost_usd'] / budget_usd:.2f}x the budget of "
                        f"{_usd(budget_usd)} USD")
            lines.append(f"closest to the budget: {_describe(r, cost_basis, lifetime_years)}")
            out["closest"]["budget"] = rec(cheapest)
        if deadline_s and budget_usd and meets_d.any() and meets_b.any():
            i = pick(meets_d, c, t)
            j = pick(meets_b, t, c)
            head.append("the deadline and the budget cannot both be met")
            lines.append(f"meeting the deadline costs at least "
                         f"{_usd(c[i])} USD ({c[i] / budget_usd:.2f}x the budget); within the budget the fastest takes "
                         f"{units.format_duration(t[j])} ({t[j] / deadline_s:.2f}x the deadline)")
            out["closest"]["deadline"] = rec(i)
            out["closest"]["budget"] = rec(j)
        out["summary"] = "No configuration meets the constraints: " + "; ".join(head) + "."
        out["reasons"] = lines
        return out
    r = df.iloc[best]
    out["row"] = df.index[best]
    out["configuration"] = rec(best)
    out["summary"] = _describe(r, cost_basis, lifetime_years)
    reasons = [f"chosen as {out['rule']}"]
    if deadline_s:
        reasons.append(f"finishes {units.format_duration(deadline_s - r['time_to_train_s'])} before the deadline "
                       f"({units.format_duration(deadline_s)})")
    if budget_usd:
        reasons.append(f"{_usd(budget_usd - r['cost_usd'])} USD under the budget ({_usd(budget_usd)} USD)")
    # the alternatives named are within the constraints too (never an $80M purchase under a $20k budget)
    fastest_ok = pick(meets_b, t, c) if budget_usd else fastest
    cheapest_ok = pick(meets_d, c, t) if deadline_s else cheapest
    for i, what, within in ((fastest_ok, "fastest", " within the budget" if budget_usd else ""),
                            (cheapest_ok, "cheapest", " that meets the deadline" if deadline_s else "")):
        if i is not None and i != best:
            f = df.iloc[i]
            reasons.append(f"the {what} option{within} ({int(f['n_gpus'])} x {f['gpu']} on {f['node']}) takes "
                           f"{units.format_duration(f['time_to_train_s'])} for {_usd(f['cost_usd'])} USD")
    if r.get("layout"):  # [issue 12] why this layout beats the next best on the same hardware
        reasons.append(f"layout {r['layout_why']}")
    eff = r["scaling_efficiency_frac"]
    reasons.append((f"scaling efficiency {eff:.0%}, " if eff == eff else "scaling efficiency n/a (one GPU cannot "
                    "hold the model: no one-GPU reference), " if r.get("layout") else "") + f"MFU {r['mfu_frac']:.0%}, bottleneck: "
                   f"{r['bottleneck']}; {goodput_text(r)}")
    reasons.append(f"memory per GPU {r['memory_per_gpu_bytes'] / units.GIB:.1f} of "
                   f"{r['memory_capacity_bytes'] / units.GIB:.0f} GiB")
    if str(r.get("precision")) == "nvfp4":  # [stop 57] the speed is the model's; whether the loss holds is not
        reasons.append("nvfp4: the least proven training precision; NVIDIA's recipe (arXiv 2509.25149) keeps some "
                       "layers in BF16 (--bf16-layers START END) and was shown on one 12B model against FP8: compare "
                       "the loss on your own model before committing the run")
    if db is not None:
        gpu = db.gpu(str(r["gpu"]))
        if gpu.market == "consumer" and r["mode"] == "purchase":
            reasons.append(f"{gpu.id} is a consumer card: the GeForce driver licence excludes data-centre deployment "
                           "(\"No Datacenter Deployment\" clause): fine in an office or lab, check before putting "
                           "it in a data centre")
        if r["mode"] == "cloud" and int(r["n_gpus"]) >= 512:
            reasons.append(f"{int(r['n_gpus']):,} GPUs at once are rarely available on demand: reserve the capacity "
                           "ahead (reserved instances or capacity blocks), at the price you reserve at")
        if bool(r["node_assumed"]):
            if r["mode"] == "cloud":  # [issue 17] a per-GPU offer: the provider's server is not in the database
                reasons.append(f"priced per GPU-hour ({r.get('price_source') or 'a per-GPU offer'}), not as an "
                               f"instance of the database: the {r['node']} template (its CPUs, fabric, NICs) stands in "
                               f"for the provider's server; check its NVLink domain and network before renting")
            else:
                reasons.append(f"no node template of the database holds {int(r['gpus_per_node'])} x {gpu.id}: the "
                               f"{r['node']} template (its CPUs, fabric, NICs) stands in for the server you would "
                               "build")
    out["reasons"] = reasons
    return out


def goodput_text(r) -> str:
    """``goodput 13%: start-up 15 min (75% of the wall time), checkpoints ...``: what the wall time beyond
    training goes to, largest first (the start-up is the ``restart_s`` the first start costs)."""
    wall = float(r["wall_s"])
    if not math.isfinite(wall) or wall <= 0:
        return f"goodput {float(r['goodput_frac']):.0%}"
    startup = max(0.0, wall - float(r["train_s"]) - float(r["eval_s"]) - float(r["checkpoint_s"]) - float(r["lost_s"]))
    parts = [("start-up", startup), (f"{int(r['checkpoints'])} checkpoint writes", float(r["checkpoint_s"])),
             ("evaluation", float(r["eval_s"])),
             (f"{float(r['failures']):.1f} expected interruptions (redone work and restarts)", float(r["lost_s"]))]
    parts = sorted((p for p in parts if p[1] > 0.005 * wall), key=lambda p: -p[1])
    text = f"goodput {float(r['goodput_frac']):.0%}"
    if parts:
        text += " (the rest of the wall time: " + ", ".join(
            f"{name} {units.format_duration(s)} = {s / wall:.0%}" for name, s in parts) + ")"
    return text


#: form factors of the data-centre training GPUs a plan names when it leaves them out for lack of a price
DATACENTER_FORM_FACTORS = ("sxm", "oam", "superchip")


def unpriced_gpus(db, mode: str, planned: set, gpus, nodes) -> str:
    """[issue 17] The data-centre GPUs (:data:`DATACENTER_FORM_FACTORS`) of the database that a plan left out because
    the database holds no dated price for them in its mode (and none was given), as one sentence with the fix; ""
    when none was left out or the user chose the GPUs or nodes. A plan can only rank what it can price: without this
    a 2026 plan would drop B200, B300, GB200 and GB300 without a word."""
    if gpus or nodes:
        return ""
    kinds = {"cloud": ("cloud",), "purchase": ("purchase",), "both": ("cloud", "purchase")}[mode]
    left = sorted(g.id for g in db.gpus.values()
                  if g.form_factor in DATACENTER_FORM_FACTORS and g.id not in planned)
    if not left:
        return ""
    what = " or ".join(f"{k} price" for k in kinds)
    unit = {"cloud": "USD per GPU-hour", "purchase": "USD per GPU", "both": "USD per GPU-hour or per GPU"}[mode]
    return (f"not planned, for lack of a dated {what} in the database: {', '.join(left)} (--price-override "
            f"GPU=PRICE, {unit}, plans one at your own quote, e.g. --price-override {left[0]}=...)")


def _assumptions(inputs, en, max_gb_given, wl) -> list[str]:
    a = [f"failure rate {inputs['failure_rate_per_gpu_hour']:.3g} interruptions per GPU-hour"
         + (f" ({FAILURE_SOURCE})" if inputs["failure_rate_per_gpu_hour"] == FAILURE_RATE_PER_GPU_HOUR else ""),
         f"restart after an interruption: {units.format_duration(inputs['restart_s'])} (estimate); lost work: half a "
         "checkpoint interval per interruption",
         "checkpoint interval: " + (units.format_duration(inputs["checkpoint_interval_s"])
                                    if inputs["checkpoint_interval_s"] else
                                    "Young's optimum sqrt(2 x write time x MTBF) per configuration"),
         "checkpoint writes: " + (units.format_rate_bytes(inputs["checkpoint_write_bytes_per_s"])
                                  if inputs["checkpoint_write_bytes_per_s"] else
                                  f"{CHECKPOINT_WRITE_FRAC_OF_READ:g} x the node's storage read bandwidth, all nodes "
                                  "in parallel for sharded strategies, one node for DDP"),
         f"evaluation adds {inputs['eval_overhead_frac']:.0%} of training compute",
         f"electricity {inputs['usd_per_kwh']:.3g} USD/kWh at PUE {inputs['pue']:.2f} ({en.id}, {en.date})",
         "energy: GPUs at TDP plus CPUs, DRAM, NICs and 15% for the rest of the node (an upper estimate)",
         f"purchases: {inputs['cost_basis']} cost basis; hardware outlives one run - amortised figures use a "
         f"{inputs['lifetime_years']:g}-year life"]
    if not max_gb_given:
        a.append(f"global batch limited to {inputs['max_global_batch']:,} "
                 + ("sequences (16M tokens, Llama 3 405B's largest)" if wl.sample_unit == "sequence"
                    else "images (Goyal et al. 2017)")
                 + " - set --max-global-batch for your recipe")
    a.append("time to train counts samples, not convergence: a larger global batch may need more samples "
             "(not modelled)")
    if inputs.get("layout_pins"):
        a.append("layout search pinned to " + ", ".join(
            f"{k.replace('_', ' ')} {' '.join(map(str, v)) if isinstance(v, list) else v}"
            for k, v in inputs["layout_pins"].items()))
    return a


def _prices_used(df) -> list[dict[str, Any]]:
    if len(df) == 0:
        return []
    d = df[df["price_source"] != ""].drop_duplicates(["price_source"])
    return [{"source": r["price_source"], "date": r["price_date"], "mode": str(r["mode"]), "node": str(r["node"]),
             "gpu": str(r["gpu"]), "usd_per_gpu_hour": _py(r["usd_per_gpu_hour"]),
             "capital_usd_per_node": _py(r["capital_usd_per_node"])} for _, r in d.iterrows()]


# =================================================================================================
# Sensitivity
# =================================================================================================

#: (name, what it scales, low factor, high factor, range in words). Ranges: achievable fraction of peak +-20%
#: (MFU differs by that much between frameworks and kernels for the same model); bus bandwidth 0.5-1.5x
#: (measured NCCL bus bandwidth varies that much with topology, tuning and congestion); price +-25% (spot,
#: reserved and regional prices straddle on-demand by more); failure rate 0.5-3x (Llama 3's mature 16k-GPU
#: operation vs younger clusters); restart 0.5-2x; checkpoint write bandwidth 0.5-2x; electricity +-50%
#: (US state industrial averages range 6.6-18.6 cents/kWh, EIA 2023).
SENSITIVITY_RANGES = (
    ("GPU utilisation (achievable fraction of peak)", "utilisation", 0.8, 1.2, "-20%/+20%",
     "measure the single-GPU throughput of your model (gpusim calibrate, or --baseline-throughput in predict)"),
    ("network and NVLink bandwidth", "bandwidth", 0.5, 1.5, "0.5x/1.5x",
     "measure all-reduce bus bandwidth on the offered nodes (nccl-tests, gpusim calibrate)"),
    ("price", "price", 1.25, 0.75, "+25%/-25%", "get a firm quote (reserved, spot or volume pricing)"),
    ("failure rate", "failure", 3.0, 0.5, "3x/0.5x", "ask the provider for its interruption rate at this scale"),
    ("restart time", "restart", 2.0, 0.5, "2x/0.5x", "time a restart from a checkpoint on the offered cluster"),
    ("checkpoint write bandwidth", "ckpt_bw", 0.5, 2.0, "0.5x/2x", "measure the storage write bandwidth"),
    ("electricity price", "electricity", 1.5, 0.5, "+50%/-50%", "confirm the electricity tariff and PUE of the site"),
)


def sensitivity(row, *, db, workload, params, inputs: Mapping[str, Any], options, optimizer="adam") -> list[dict]:
    """How much each assumption moves the recommended configuration's time to train and cost.

    Model assumptions (utilisation, bandwidth) re-run the model on that configuration with scaled
    :class:`~gpusim.params.ModelParams`; run and price assumptions redo the accounting. Sorted by the largest
    relative swing of time or cost, so the first is what to measure before signing. The "low" case is the
    pessimistic end of each range.
    """
    from gpusim.sweeps import HardwareOption, sweep

    base_t, base_c = float(row["time_to_train_s"]), float(row["cost_usd"])
    opt = HardwareOption(gpu=str(row["gpu"]), gpus_per_node=int(row["gpus_per_node"]),
                         node=None if row["node_assumed"] else str(row["node"]))
    is_cloud = row["mode"] == "cloud"

    def model_step(p):
        if row.get("layout"):  # [issue 12] a Megatron layout row re-runs its layout
            from gpusim.search import layout_row_step_s

            k = next(iter(params.matmul_eff_frac), None)  # the utilisation case scales every matmul fraction alike
            scale = p.matmul_eff_frac[k] / params.matmul_eff_frac[k] if k else 1.0
            return layout_row_step_s(row, workload, opt, db, p, ceiling_scale=scale)
        d = sweep(workload=workload, options=[opt], node_counts=[int(row["nodes"])], strategies=[str(row["strategy"])],
                  precisions=[str(row["precision"])], checkpointing=[bool(row["checkpointing"])],
                  cpu_offload=[bool(row["cpu_offload"])], micro_batches=[int(row["micro_batch"])],
                  accum=[int(row["accum"])], num_workers=int(row["num_workers"]) if row["num_workers"] >= 0 else None,
                  optimizer=optimizer, db=db, params=p, baseline=False)
        return float(d["step_s"].iloc[0])

    def run(step_s=None, price=1.0, failure=1.0, restart=1.0, ckpt_bw=1.0, electricity=1.0):
        st = float(row["step_s"]) if step_s is None else step_s
        acc = run_accounting(step_s=st, global_batch=float(row["global_batch"]), n_gpus=float(row["n_gpus"]),
                             total_samples=inputs["total_samples"],
                             checkpoint_write_s=float(row["checkpoint_write_s"]) / ckpt_bw,
                             failure_rate_per_gpu_hour=inputs["failure_rate_per_gpu_hour"] * failure,
                             restart_s=inputs["restart_s"] * restart,
                             checkpoint_interval_s=inputs["checkpoint_interval_s"],
                             eval_overhead_frac=inputs["eval_overhead_frac"])
        wall = float(acc["wall_s"])
        if is_cloud:
            cost = float(row["usd_per_gpu_hour"]) * price * float(row["n_gpus"]) * wall / units.HOUR
        else:
            energy = float(row["node_power_w"]) * float(row["nodes"]) * wall / units.KWH * inputs["pue"] * \
                inputs["usd_per_kwh"] * electricity
            cap = float(row["capital_usd"]) * price
            cost = (cap * wall / (inputs["lifetime_years"] * 365.25 * units.DAY) + energy
                    if inputs["cost_basis"] == "amortized" else cap + energy)
        return wall, cost

    out = []
    for name, what, lo, hi, rng, action in SENSITIVITY_RANGES:
        if what == "electricity" and is_cloud:
            continue
        if what == "bandwidth" and int(row["n_gpus"]) == 1:
            continue
        vals = []
        for f in (lo, hi):
            if what == "utilisation":
                p = params.replace(matmul_eff_frac={k: min(1.0, v * f) for k, v in params.matmul_eff_frac.items()})
                vals.append(run(step_s=model_step(p)))
            elif what == "bandwidth":
                p = params.replace(busbw_eff_frac={k: min(1.0, v * f) for k, v in params.busbw_eff_frac.items()},
                                   busbw_override_bytes_per_s={k: v * f for k, v in
                                                               params.busbw_override_bytes_per_s.items()})
                vals.append(run(step_s=model_step(p)))
            else:
                vals.append(run(**{what: f}))
        (tl, cl), (th, ch) = vals
        out.append({"assumption": name, "range": rng, "action": action, "time_low_s": tl, "time_high_s": th,
                    "cost_low_usd": cl, "cost_high_usd": ch, "time_low_frac": tl / base_t - 1,
                    "time_high_frac": th / base_t - 1, "cost_low_frac": cl / base_c - 1, "cost_high_frac": ch / base_c - 1,
                    "swing_frac": max(abs(tl - th) / base_t, abs(cl - ch) / base_c)})
    out.sort(key=lambda d: -d["swing_frac"])
    return out

