"""The search over LLM layouts: every valid (tp, cp, pp, vp, dp, micro-batch, recomputation) of a transformer on
given hardware, evaluated in one vectorised model call, infeasible layouts kept as rows with the reason.

Enumeration (for ``n`` GPUs, an NVLink domain of ``D`` GPUs, ``L`` layers, ``a`` heads, ``kv`` K/V heads, a
sequence of ``s`` tokens and a global batch of ``B`` sequences), the rules Megatron-LM checks at start-up:

- ``tp`` divides ``n`` and the heads; the K/V heads split over tp or are replicated (tp a multiple of them);
  ``tp <= D`` (tensor-parallel all-reduces on every layer stay in NVLink);
- ``cp`` a power of two dividing ``n / tp`` with ``s % (2 cp) == 0`` (the load-balanced causal split cuts the
  sequence into ``2 cp`` chunks); cp needs FlashAttention (ring attention is a FlashAttention kernel);
- ``pp`` divides ``n / (tp cp)``, at most ``L``; when ``pp`` does not divide ``L`` the stages are uneven (as
  Llama 3 405B's 126 layers on 16 stages) and every stage is charged the fullest stage's ``ceil(L / pp)``
  layers (conservative by at most one layer per stage); ``vp > 1`` (interleaved 1F1B) needs ``pp > 1``,
  ``L % (pp vp) == 0`` and a number of micro-batches that is a multiple of ``pp``;
- ``dp = n / (tp cp pp)``; ``micro_batch x dp`` divides ``B``; ``n_micro = B / (micro_batch dp)``;
- recomputation ``none``, ``selective`` or ``full``;
- memory: the fullest stage fits in the GPU (evaluated by the model, the same code as ``gpusim predict``).

A layout's reason is the first rule it breaks, in the order above. The best layout is the feasible one with the
highest tokens per second (ties: less memory).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from gpusim import units
from gpusim.errors import ScenarioError

RECOMPUTES = ("none", "selective", "full")
#: micro-batches the search tries (sequences per micro-batch; LLM recipes use 1-4 at 4k-8k tokens)
MICRO_BATCHES = (1, 2, 4, 8)
#: largest context-parallel degree tried (Llama 3 used cp 16 at 128k tokens)
MAX_CP = 32

REASONS = ("", "tp does not divide the attention heads", "the K/V heads cannot be split over tp",
           "tp crosses the NVLink domain", "the sequence is not divisible by 2 x cp (load-balanced ring)",
           "cp needs FlashAttention", "vp needs pp > 1 and layers divisible by pp x vp",
           "micro-batch x dp does not divide the global batch",
           "interleaving needs the micro-batches per step to be a multiple of pp", "does not fit in GPU memory")
OK, R_HEADS, R_KV, R_DOMAIN, R_SEQ, R_FLASH, R_VP, R_BATCH, R_INTERLEAVE, R_MEMORY = range(len(REASONS))


def check_cp(*, seq_len: int, cp: int, flash: bool, tp: int = 1, domain: int | None = None) -> None:
    """The context-parallel rules for one scenario (the search's rules R_SEQ and R_FLASH); raises ScenarioError."""
    if cp == 1:
        return
    problems = []
    if seq_len % (2 * cp):
        ok = [c for c in (2, 4, 8, 16, 32) if seq_len % (2 * c) == 0]
        problems.append(f"cp {cp} needs the sequence ({seq_len} tokens) to be divisible by 2 x cp = {2 * cp} for the "
                        f"load-balanced causal split" + (f" (cp could be {', '.join(map(str, ok))})" if ok else ""))
    if not flash:
        problems.append("context parallelism (ring attention) needs FlashAttention; this model's attention is unfused")
    if problems:
        raise ScenarioError(f"impossible context parallelism (cp {cp}): " + "; ".join(problems))


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


@dataclass(frozen=True)
class Pins:
    """Degrees fixed by the user (None: searched)."""

    tp: int | None = None
    pp: int | None = None
    vp: int | None = None
    cp: int | None = None
    micro_batch: int | None = None
    recompute: str | None = None


def enumerate_layouts(*, n_gpus: int, domain: int, n_layers: int, n_heads: int, n_kv_heads: int, seq_len: int,
                      global_batch: int, flash: bool, pins: Pins = Pins(), micro_batches=MICRO_BATCHES,
                      recomputes=RECOMPUTES) -> dict[str, np.ndarray]:
    """Every candidate layout as integer arrays ``tp, cp, pp, vp, dp, micro_batch, n_micro, recompute, layers,
    reason`` (``layers``: the layers charged to the model, padded for uneven stages; ``reason`` an index into
    :data:`REASONS`, 0 for a layout that passes every rule before memory)."""
    n, L = int(n_gpus), int(n_layers)

    def pick(pin, values):
        return [pin] if pin is not None else values

    tps = pick(pins.tp, [t for t in _divisors(n) if t <= max(domain, 1) or pins.tp])
    cps = pick(pins.cp, [c for c in (1 << i for i in range(6)) if c <= MAX_CP])
    rows = []
    for tp in tps:
        for cp in cps:
            if n % (tp * cp):
                continue
            rest = n // (tp * cp)
            for pp in pick(pins.pp, [p for p in _divisors(rest) if p <= L]):
                if rest % pp:
                    continue
                dp = rest // pp
                vps = [1] if pp == 1 or L % pp else [v for v in _divisors(L // pp)]
                for vp in pick(pins.vp, vps):
                    for mb in pick(pins.micro_batch, list(micro_batches)):
                        rows.append((tp, cp, pp, vp, dp, mb))
    if not rows:
        raise ScenarioError(f"no layout of {n} GPUs matches the pinned degrees "
                            f"({', '.join(f'{k} {v}' for k, v in vars(pins).items() if v is not None)})")
    a = np.array(rows, dtype=np.int64)
    rc_names = pick(pins.recompute, list(recomputes))
    R = len(rc_names)
    a = np.repeat(a, R, axis=0)
    rc = np.tile(np.arange(R), len(rows))
    rc_codes = np.array([RECOMPUTES.index(r) for r in rc_names], dtype=np.int64)[rc]
    tp, cp, pp, vp, dp, mb = a.T
    gb = int(global_batch)
    per_step = mb * dp
    n_micro = np.where(gb % per_step == 0, gb // np.maximum(per_step, 1), 0)
    kv = n_kv_heads or n_heads
    reason = np.zeros(len(tp), dtype=np.int64)
    checks = ((n_heads % tp != 0, R_HEADS), ((kv % tp != 0) & (tp % kv != 0), R_KV),
              ((tp > domain) & (pins.tp is None), R_DOMAIN),
              ((seq_len % (2 * cp) != 0) & (cp > 1), R_SEQ), ((cp > 1) & (not flash), R_FLASH),
              ((vp > 1) & ((pp == 1) | (L % (pp * vp) != 0)), R_VP), (n_micro == 0, R_BATCH),
              ((vp > 1) & (n_micro % pp != 0), R_INTERLEAVE))
    for bad, code in reversed(checks):  # the first rule broken wins
        reason = np.where(bad, code, reason)
    layers = -(-L // (pp * vp)) * pp * vp  # padded to whole stages when uneven
    return {"tp": tp, "cp": cp, "pp": pp, "vp": vp, "dp": dp, "micro_batch": mb, "n_micro": np.maximum(n_micro, 1),
            "recompute": rc_codes, "layers": layers, "reason": reason}


def _base_row(scenario, hw, wl, params) -> dict:
    """The scenario's model row at tp = pp = cp = 1 (the layout fields are replaced per layout)."""
    from gpusim.simulate import scenario_row

    base = scenario.with_changes(tp=1, pp=1, vp=1, cp=1, sp=None, per_gpu_batch=1, global_batch=None, accum=1,
                                 recompute="none", kind="zero1" if scenario.strategy.kind not in ("ddp", "zero1")
                                 else scenario.strategy.kind)
    return scenario_row(base, hw, wl, params)


def layout_inputs(base: dict, lay: dict[str, np.ndarray]):
    """:class:`~gpusim.model.step.StepInputs` for every layout on one hardware row: the base row's fields as
    ``(1,)`` (or ``(1, K)``) arrays that broadcast against the layouts' ``(N,)`` degrees."""
    from gpusim.simulate import stack_rows

    inp = stack_rows([base])
    return inp.replace(tp=lay["tp"].astype(np.float64), pp=lay["pp"].astype(np.float64),
                       vp=lay["vp"].astype(np.float64), cp=lay["cp"].astype(np.float64),
                       micro_batch=lay["micro_batch"].astype(np.float64), accum=lay["n_micro"].astype(np.float64),
                       sp=lay["tp"] > 1, recompute=lay["recompute"], n_layers=lay["layers"].astype(np.float64),
                       model_layers=np.asarray([float(base["n_layers"])]), llm=np.asarray([True]))


def search_layouts(scenario, *, db=None, params=None, pins: Pins | None = None, global_batch: int | None = None,
                   micro_batches=MICRO_BATCHES, recomputes=RECOMPUTES) -> dict[str, Any]:
    """Every layout of ``scenario``'s workload on its hardware and GPU count. Returns ``{"layouts": arrays,
    "out": model outputs (NaN where a rule failed), "feasible", "reason": strings, "best": index or None,
    "order": feasible indices best first, "n": layouts}``. ``global_batch`` defaults to the scenario's."""
    from gpusim.hwdb import load
    from gpusim.model.step import evaluate
    from gpusim.params import DEFAULT_PARAMS
    from gpusim.simulate import nvlink_domain_gpus, resolve_hardware, resolve_workload, transformer_of

    db = db or load()
    params = params or DEFAULT_PARAMS
    wl = resolve_workload(scenario)
    spec = transformer_of(wl)
    if spec is None:
        raise ScenarioError(f"the layout search needs a transformer; {wl.id!r} is not one")
    hw = resolve_hardware(scenario, db)
    seq = int(scenario.seq_len or spec.seq_len)
    gb = int(global_batch or scenario.strategy.global_batch or 0)
    if gb < 1:
        raise ScenarioError("the layout search holds the global batch fixed: give --global-batch (sequences per step)")
    lay = enumerate_layouts(n_gpus=hw.n_gpus, domain=nvlink_domain_gpus(hw), n_layers=spec.n_layers,
                            n_heads=spec.n_heads, n_kv_heads=spec.n_kv_heads or spec.n_heads, seq_len=seq,
                            global_batch=gb, flash=bool(spec.flash_attention), pins=pins or Pins(),
                            micro_batches=micro_batches, recomputes=recomputes)
    return evaluate_layouts(lay, _base_row(scenario, hw, wl, params), hw.gpu.memory_bytes, params, evaluate)


def evaluate_layouts(lay: dict, base: dict, capacity_bytes: float, params, evaluate=None) -> dict[str, Any]:
    """Run the model on the layouts that pass the rules (one call) and attach the memory verdict."""
    if evaluate is None:
        from gpusim.model.step import evaluate
    N = len(lay["tp"])
    ok = np.flatnonzero(lay["reason"] == OK)
    keys = ("step_s", "throughput_samples_per_s", "mfu_frac", "memory_per_gpu_bytes", "fits_in_memory",
            "compute_s", "tp_comm_exposed_s", "cp_comm_exposed_s", "pp_bubble_s", "pp_p2p_exposed_s",
            "dp_comm_exposed_s", "optimizer_s", "bottleneck_code")
    out = {k: np.full(N, np.nan) for k in keys}
    if len(ok):
        sub = {k: v[ok] for k, v in lay.items()}
        res = evaluate(layout_inputs(base, sub), params)
        for k in keys:
            out[k][ok] = np.broadcast_to(res[k], (len(ok),))
    fits = np.nan_to_num(out["fits_in_memory"]).astype(bool)
    reason = np.where((lay["reason"] == OK) & ~fits, R_MEMORY, lay["reason"])
    feasible = reason == OK
    seq = float(base["seq_len"])
    tokens = out["throughput_samples_per_s"] * seq
    out["tokens_per_s"] = tokens
    out["bubble_frac"] = out["pp_bubble_s"] / out["step_s"]
    out["headroom_bytes"] = capacity_bytes - out["memory_per_gpu_bytes"]
    idx = np.flatnonzero(feasible)
    order = idx[np.lexsort((out["memory_per_gpu_bytes"][idx], -tokens[idx]))]
    return {"layouts": lay, "out": out, "feasible": feasible, "reason_code": reason,
            "best": int(order[0]) if len(order) else None, "order": order, "n": N,
            "capacity_bytes": capacity_bytes, "seq_len": seq, "domain": None}


def layout_name(lay: dict, i: int) -> str:
    """``tp 8 pp 8 cp 2 vp 8 dp 4 mb 1 selective``: the degrees of one layout."""
    parts = [f"tp {lay['tp'][i]}", f"pp {lay['pp'][i]}", f"cp {lay['cp'][i]}"]
    if lay["vp"][i] > 1:
        parts.append(f"vp {lay['vp'][i]}")
    parts += [f"dp {lay['dp'][i]}", f"mb {lay['micro_batch'][i]}", f"recompute {RECOMPUTES[lay['recompute'][i]]}"]
    return " ".join(parts)


def reason_text(res: dict, i: int) -> str:
    code = int(res["reason_code"][i])
    if code == R_MEMORY:
        return (f"does not fit in GPU memory ({units.format_bytes(res['out']['memory_per_gpu_bytes'][i])} of "
                f"{units.format_bytes(res['capacity_bytes'])})")
    return REASONS[code]


def why(res: dict, i: int, domain: int) -> str:
    """The facts that make layout ``i`` what it is: bubble, where TP runs, cp exchange, memory headroom."""
    lay, o = res["layouts"], res["out"]
    tp = int(lay["tp"][i])
    bits = [f"the bubble is {o['bubble_frac'][i]:.0%}",
            f"TP traffic stays in NVLink (tp {tp} of a {domain}-GPU domain)" if tp <= domain
            else f"TP crosses the NVLink domain (tp {tp} > {domain})"]
    if lay["cp"][i] > 1:
        bits.append(f"cp exchange exposes {o['cp_comm_exposed_s'][i] / o['step_s'][i]:.0%} of the step")
    bits.append(f"fits with {units.format_bytes(o['headroom_bytes'][i])} to spare")
    return ", ".join(bits)


def explain_best(res: dict, domain: int) -> str:
    """``tp 8 pp 8 ...: the bubble is 6%, ...; 4% faster than tp 4 ... (bubble 12%, ...)``."""
    order = res["order"]
    if not len(order):
        return "no layout fits"
    lay, o = res["layouts"], res["out"]
    b = int(order[0])
    text = f"{layout_name(lay, b)}: {why(res, b, domain)}; MFU {o['mfu_frac'][b]:.1%}"
    if len(order) > 1:
        nx = int(order[1])
        gain = o["tokens_per_s"][b] / o["tokens_per_s"][nx] - 1.0
        text += f"; {gain:.1%} faster than the next best, {layout_name(lay, nx)} ({why(res, nx, domain)})"
    return text


def search_table(res: dict, top: int | None = None) -> list[dict]:
    """Rows of the search, best feasible first, then the infeasible with their reason."""
    lay, o = res["layouts"], res["out"]
    idx = list(res["order"][:top] if top else res["order"])
    if top is None:
        idx += [int(i) for i in np.flatnonzero(~res["feasible"])]
    rows = []
    for i in idx:
        r = {k: int(lay[k][i]) for k in ("tp", "cp", "pp", "vp", "dp", "micro_batch", "n_micro")}
        r["recompute"] = RECOMPUTES[int(lay["recompute"][i])]
        r["feasible"] = bool(res["feasible"][i])
        r["reason"] = "" if r["feasible"] else reason_text(res, i)
        for k in ("step_s", "tokens_per_s", "mfu_frac", "memory_per_gpu_bytes", "bubble_frac", "cp_comm_exposed_s",
                  "tp_comm_exposed_s"):
            v = float(o[k][i])
            r[k] = None if math.isnan(v) else v
        rows.append(r)
    return rows
