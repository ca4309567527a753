"""Checkpoint write bandwidth for the bill of materials: from the checkpoint interval and a time budget per
checkpoint, each with its source.

``write_bytes_per_s = checkpoint_bytes / budget_s`` with ``budget_s = budget_frac x interval_s``:

- **budget_frac** (:data:`CHECKPOINT_BUDGET_FRAC`, 1%): the share of the wall time that writing checkpoints may
  take. An estimate, stated as the plan's other overheads are (the same 1% as evaluation,
  :data:`gpusim.planning.EVAL_OVERHEAD_FRAC`); or a budget per checkpoint in seconds (``budget_s``).
- **interval_s**: the checkpoint interval given (``--checkpoint-interval``), or else Young's optimum
  ``sqrt(2 x write x MTBF)`` (J. W. Young, "A first order approximation to the optimum checkpoint interval",
  CACM 17(9), 1974) *for the write time of the budget itself*: ``write = f x sqrt(2 x write x MTBF)`` gives
  ``write = 2 f^2 MTBF`` and ``interval = 2 f MTBF``. MTBF is ``1 / (failure rate per GPU-hour x GPUs)``
  (the Llama 3 interruption rate by default, :data:`gpusim.planning.FAILURE_RATE_PER_GPU_HOUR`).

[issue 20] The former rule took 1% of the interval that the plan's accounting derived from its own, much faster,
assumed write (node-local NVMe, all nodes in parallel): Young's interval for a 0.3 s write is ~3 min, and 1% of
it asked 4.4 TiB to be written in 1.8 s, 2.8-11 TB/s of aggregate writes. Sized self-consistently, Llama 3 405B
on 4,096 H100 needs about 0.5 TB/s; Meta's storage fabric for Llama 3 on 16k H100 sustained 2 TB/s with a 7 TB/s
peak (Llama 3 paper, 2024, sec. 3.3.1), the same order per GPU.
"""

from __future__ import annotations

import math
from typing import Any

from gpusim import units

#: Share of the wall time that checkpoint writes may take (estimate; the same 1% as evaluation's overhead).
CHECKPOINT_BUDGET_FRAC = 0.01
BUDGET_SOURCE = (f"checkpoint writes take at most {CHECKPOINT_BUDGET_FRAC:.0%} of the wall time (estimate, as "
                 "evaluation's 1%)")
BUDGET_SOURCE_STATED = "the time budget per checkpoint given"
INTERVAL_SOURCE_YOUNG = "Young's optimum sqrt(2 x write x MTBF) for that write time (J. W. Young, CACM 17(9), 1974)"
INTERVAL_SOURCE_GIVEN = "the checkpoint interval given (--checkpoint-interval)"


def checkpoint_write_need(checkpoint_bytes: float, *, n_gpus: int, failure_rate_per_gpu_hour: float,
                          interval_s: float | None = None, budget_s: float | None = None,
                          budget_frac: float = CHECKPOINT_BUDGET_FRAC) -> dict[str, Any]:
    """The aggregate write bandwidth that writes one checkpoint (bytes) within its time budget (seconds).

    ``interval_s`` is a given checkpoint interval (else Young's optimum for the budget's write time, from the
    MTBF of ``n_gpus`` GPUs at ``failure_rate_per_gpu_hour``); ``budget_s`` a given time per checkpoint (else
    ``budget_frac`` of the interval). Returns ``write_bytes_per_s``, ``budget_s``, ``interval_s``, ``mtbf_s``
    and the sources of the budget and the interval in words; nan where no interval follows (no failures
    modelled and none given).
    """
    if budget_s is not None and not (float(budget_s) > 0 and math.isfinite(float(budget_s))):
        raise ValueError(f"the time budget per checkpoint must be a positive number of seconds, got {budget_s!r}")
    rate = float(failure_rate_per_gpu_hour) * max(int(n_gpus), 1)
    mtbf = units.HOUR / rate if rate > 0 else math.inf
    if budget_s is not None:
        budget = float(budget_s)
        interval = float(interval_s) if interval_s else math.sqrt(2.0 * budget * mtbf)
    elif interval_s:
        interval = float(interval_s)
        budget = budget_frac * interval
    else:
        budget, interval = 2.0 * budget_frac ** 2 * mtbf, 2.0 * budget_frac * mtbf
    ok = 0 < budget < math.inf
    return {
        "write_bytes_per_s": float(checkpoint_bytes) / budget if ok else math.nan,
        "budget_s": budget if ok else math.nan,
        "interval_s": interval if math.isfinite(interval) else math.nan,
        "mtbf_s": mtbf,
        "budget_source": BUDGET_SOURCE_STATED if budget_s is not None else BUDGET_SOURCE,
        "interval_source": INTERVAL_SOURCE_GIVEN if interval_s else INTERVAL_SOURCE_YOUNG,
    }


def describe(need: dict[str, Any]) -> str:
    """The rule in words: the budget, the interval and where each comes from."""
    if not math.isfinite(need["budget_s"]):
        return "no checkpoint interval follows (no failures modelled and no --checkpoint-interval)"
    mtbf = (f", MTBF {units.format_duration(need['mtbf_s'])}" if math.isfinite(need["mtbf_s"])
            and need["interval_source"] == INTERVAL_SOURCE_YOUNG else "")
    return (f"within {units.format_duration(need['budget_s'])} each ({need['budget_source']}) "
            f"every {units.format_duration(need['interval_s'])} ({need['interval_source']}{mtbf})")
