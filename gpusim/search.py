"""The search over LLM layouts: every valid (tp, cp, pp, vp, dp, micro-batch, recomputation) of a transformer on
given hardware, evaluated in one vectorised model call, infeasible layouts kept as rows with the reason.

Enumeration (for ``n`` GPUs, an NVLink domain of ``D`` GPUs, ``L`` layers, ``a`` heads, ``kv`` K/V heads, a
sequence of ``s`` tokens and a global batch of ``B`` sequences), the rules Megatron-LM checks at start-up:

- ``tp`` divides ``n`` and the heads; the K/V heads split over tp or are replicated (tp a multiple of them);
  ``tp <= D`` (tensor-parallel all-reduces on every layer stay in NVLink);
- ``cp`` a power of two dividing ``n / tp`` with ``s % (2 cp) == 0`` (the load-balanced causal split cuts the
  sequence into ``2 cp`` chunks); cp needs FlashAttention (ring attention is a FlashAttention kernel); with
  ``--cp-comm a2a`` (Ulysses) cp divides each tp rank's attention and K/V heads (a2a+p2p: the cp ranks of one
  NVLink domain do);
- ``pp`` divides ``n / (tp cp)``, at most ``L``; when ``pp`` does not divide ``L`` the stages are uneven (as
  Llama 3 405B's 126 layers on 16 stages) and every stage is charged the fullest stage's ``ceil(L / pp)``
  layers (conservative by at most one layer per stage), and ``vp`` chunks of ``ceil(L / (pp vp))`` layers each
  (``gpusim predict`` takes even splits only); ``vp > 1`` (interleaved 1F1B) needs ``pp > 1`` and a number of
  micro-batches that is a multiple of ``pp``;
- ``dp = n / (tp cp pp)``; ``micro_batch x dp`` divides ``B``; ``n_micro = B / (micro_batch dp)``;
- recomputation ``none``, ``selective`` or ``full``, and [issue 17] for a mixture-of-experts model the modules its
  tuned recipes recompute instead (:data:`MODULE_RECOMPUTES`: the norms and the experts' activation function, and
  MLA's up-projections where the model has them; [stop 53] or the norms and the whole MoE block, as the long-context
  recipes do), unless the scenario names its own modules;
- memory: the fullest stage fits in the GPU (evaluated by the model, the same code as ``gpusim predict``).

A layout's reason is the first rule it breaks, in the order above. The best layout is the feasible one with the
highest tokens per second (ties: less memory).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from gpusim import units
from gpusim.errors import ScenarioError
from gpusim.heap import retain_heap
from gpusim.model.memory import allocated_bytes
from gpusim.rows import fp8_fields, moe_fields  # noqa: F401  (row fields; re-exported for old callers)
from gpusim.rules import (OK, R_BATCH, R_DOMAIN, R_DUALPIPE, R_FLASH, R_HEADS, R_INTERLEAVE, R_KV,  # noqa: F401
                          R_MEMORY, R_SEQ, R_VP, REASONS, check_cp, check_dualpipe, check_ep, default_global_batch,
                          layout_reason_codes, nvlink_domain_gpus, padded_layers, transformer_of)
from gpusim.rules import (R_MAMBA, R_OFFLOAD, allocation_block, check_fused_mlp,  # [issue 17]
                          check_memory_saving, cli_flags, mamba_layout_bad, offload_layout_bad)
from gpusim.strategy import MODULE_SET_RECOMPUTES, Strategy


def _mask_model_rules(lay: dict, spec, offload_layers: int = 0) -> dict:
    """[issue 17] Mark the layouts a hybrid model's Mamba mixers cannot take (R_MAMBA) and those whose stages are too
    short for the activation offload asked for (R_OFFLOAD); unchanged without either."""
    if getattr(spec, "n_mamba_layers", 0):
        bad = (lay["reason"] == OK) & mamba_layout_bad(spec, lay["tp"], lay["cp"])
        lay["reason"] = np.where(bad, R_MAMBA, lay["reason"])
    if offload_layers:
        bad = (lay["reason"] == OK) & offload_layout_bad(offload_layers, lay["layers"], lay["pp"])
        lay["reason"] = np.where(bad, R_OFFLOAD, lay["reason"])
    return lay

RECOMPUTES = ("none", "selective", "full", *MODULE_SET_RECOMPUTES)
#: [issue 17] the recomputations of :data:`RECOMPUTES` past ``full``: Megatron-Core's selective recomputation of the
#: named modules (``--recompute-granularity selective --recompute-modules ...``, without ``core_attn``), the sets the
#: MoE performance recipes run (Megatron-Bridge ``scripts/performance/utils/overrides.py`` @00538e26
#: ``_set_recompute_overrides``; Qwen3 and GPT-OSS recipes ``layernorm moe_act``, DeepSeek-V3 ``mla_up_proj`` with
#: them, the recipe notes of ``validation/runs_moe.csv``). A layout's name spells the modules, and ``gpusim predict
#: --recompute layernorm+moe_act`` (the same as ``--recompute none --recompute-modules layernorm moe_act``,
#: :data:`gpusim.strategy.MODULE_SET_RECOMPUTES`) reproduces it
MODULE_RECOMPUTES = RECOMPUTES[3:]
#: layouts per model call. A call costs about 3 ms whatever its rows (groupings, the per-distinct evaluations of
#: gpusim.model.distinct, a few hundred numpy calls), then about 0.6 us per row; the model works in blocks of
#: gpusim.model.step.BLOCK_ROWS (65,536) rows, so a larger chunk only adds a concatenation. Measured with
#: benchmarks/layout_chunks.py on the rows real searches send (gpusim plan's layout rows for Llama 3 70B, 328k
#: distinct rows; gpusim sweep's calls for six jobs of 8B to 70B and an FP8 MoE, 92k rows), 2-core AMD EPYC, best of
#: 3, layouts per CPU-second: 4k rows per call 0.55-0.78M (plan) / 0.37-0.55M (sweep), 8k 0.93-0.97M / 0.68-0.80M,
#: 16k 1.24M / 0.91-0.95M, 32k 1.36-1.40M / 1.15-1.17M, 64k 1.35-1.50M / 1.32-1.42M, 128k 0.96-1.13M / 1.30M.
#: (benchmarks/layout_search.py repeats one job's 6,111 layouts to a million rows, so its large chunks also profit
#: from duplicates; it is not the measure here.)
CHUNK_ROWS = 65536


def chunks(n: int, rows: int = CHUNK_ROWS) -> list[slice]:
    """``n`` rows as the fewest blocks of at most ``rows``, of equal size (no small tail block)."""
    k = max(1, -(-int(n) // max(int(rows), 1)))
    edges = np.linspace(0, int(n), k + 1).astype(np.int64)
    return [slice(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:]) if b > a]
#: micro-batches the search tries (sequences per micro-batch; LLM recipes use 1-4 at 4k-8k tokens)
MICRO_BATCHES = (1, 2, 4, 8)
#: largest context-parallel degree tried (Llama 3 used cp 16 at 128k tokens)
MAX_CP = 32


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


#: [issue 12] the MoE options a layout search carries on its pins (Strategy fields of the same names)
MOE_PIN_FIELDS = ("ep_overlap", "moe_dispatcher", "ep_fp8_dispatch", "moe_router_padding", "moe_fused_mlp",
                  "moe_imbalance_frac", "moe_expert_skew_frac")
# [issue 17] The routing figures: 0.0 is a figure, and they change nothing at ep 1 (every rank holds every expert).
ROUTING_PIN_FIELDS = ("moe_imbalance_frac", "moe_expert_skew_frac")


@dataclass(frozen=True)
class Pins:
    """Degrees fixed by the user (None: searched)."""

    tp: int | None = None
    pp: int | None = None
    vp: int | None = None
    cp: int | None = None
    ep: int | None = None
    micro_batch: int | None = None
    recompute: str | None = None
    # [issue 12] the MoE all-to-all's options (not searched: None is the default system's, Megatron-Core's)
    ep_overlap: str | None = None
    moe_dispatcher: str | None = None
    ep_fp8_dispatch: bool | None = None
    moe_router_padding: bool | None = None  # [issue 17]
    moe_fused_mlp: bool | None = None  # [issue 17]
    moe_imbalance_frac: float | None = None  # [issue 17] (0.0 is a figure: perfectly balanced)
    moe_expert_skew_frac: float | None = None  # [issue 17]
    # [issue 17] CUDA-graph scopes (Strategy.cuda_graph_scope; not searched: empty is eager)
    cuda_graph_scope: tuple[str, ...] | None = None
    # [issue 17] the context-parallel exchange of the layouts with cp > 1 (Strategy.cp_comm; None: the scenario's)
    cp_comm: str | None = None
    # [issue 17] the loss's cross entropy of every layout (Strategy.cross_entropy; None: the scenario's, te)
    cross_entropy: str | None = None

    def __post_init__(self):
        """The named settings must be ones the model knows (the CLI's choices check them first; this guards the
        Python API, which builds Pins directly)."""
        from gpusim.model.context import CP_KINDS
        from gpusim.model.llm import CE_CODES

        for name, value, known in (("cross_entropy", self.cross_entropy, CE_CODES),
                                   ("cp_comm", self.cp_comm, CP_KINDS)):
            if value is not None and value not in known:
                raise ScenarioError(f"{name} {value!r} is not one of {', '.join(known)}")

    def moe_options(self) -> dict:
        """The MoE options set here, as Strategy fields."""
        return {k: v for k in MOE_PIN_FIELDS
                if (v := getattr(self, k)) is not None
                and (k in ROUTING_PIN_FIELDS or v not in (False, "none", "alltoall"))}

    def moe_option_fields(self) -> dict:
        """The row fields (gpusim.model.step.StepInputs) of :meth:`moe_options`."""
        from gpusim.model.dualpipe import EP_OVERLAPS
        from gpusim.model.experts import DISPATCHERS

        o = self.moe_options()
        out = {}
        if "ep_overlap" in o:
            out["ep_overlap"] = EP_OVERLAPS[o["ep_overlap"]]
        if "moe_dispatcher" in o:
            out["moe_dispatcher"] = DISPATCHERS[o["moe_dispatcher"]]
        if "ep_fp8_dispatch" in o:
            out["ep_fp8_dispatch"] = True
        if "moe_router_padding" in o:  # [issue 17]
            out["moe_router_padding"] = True
        if "moe_fused_mlp" in o:  # [issue 17]
            out["moe_fused_mlp"] = True
        if "moe_imbalance_frac" in o:  # [issue 17]
            out["moe_imbalance_frac"] = float(o["moe_imbalance_frac"])
        if "moe_expert_skew_frac" in o:  # [issue 17]
            out["moe_expert_skew_frac"] = float(o["moe_expert_skew_frac"])
        if self.cuda_graph_scope:  # [issue 17]
            from gpusim.model.graphs import scope_mask

            out["cuda_graphs"] = scope_mask(self.cuda_graph_scope)
        return out


def enumerate_layouts(*, n_gpus: int, domain: int, n_layers: int, n_heads: int, n_kv_heads: int, seq_len: int,
                      global_batch: int, flash: bool, pins: Pins = Pins(), micro_batches=MICRO_BATCHES,
                      recomputes=RECOMPUTES[:3], n_experts: int = 0, cp_a2a: bool = False,
                      cp_a2a_p2p: bool = False, block: int | None = None) -> dict[str, np.ndarray]:
    """Every candidate layout as integer arrays ``tp, cp, pp, vp, dp, micro_batch, n_micro, recompute, layers,
    reason`` (``layers``: the layers charged to the model, padded for uneven stages; ``reason`` an index into
    :data:`REASONS`, 0 for a layout that passes every rule before memory)."""
    n, L = int(n_gpus), int(n_layers)
    if pins.ep not in (None, 1) and not n_experts:
        raise ScenarioError(f"ep {pins.ep} applies to mixture-of-experts models; this model is dense (drop --ep)")
    if set(ROUTING_PIN_FIELDS) <= set(pins.moe_options()):  # [issue 17] one figure or the other
        raise ScenarioError("--moe-imbalance (the busiest rank's figure at one layout) and --moe-expert-skew (the "
                            "experts' skew, from which each layout's busiest rank follows) describe the same thing: "
                            "give one")
    if pins.moe_options() and not n_experts:
        flags = cli_flags(pins.moe_options())
        raise ScenarioError(f"{flags} applies to mixture-of-experts models; this model is dense (drop {flags})")

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
                vps = [1] if pp == 1 else _divisors(-(-L // pp))  # uneven stages: chunks of the padded stage
                # expert parallelism folds into the tp x cp x dp ranks and divides the experts
                eps = pick(pins.ep, [e for e in (1 << i for i in range(10))
                                     if n_experts and n_experts % e == 0 and (tp * cp * dp) % e == 0] or [1])
                for vp in pick(pins.vp, vps):
                    for ep in eps:
                        for mb in pick(pins.micro_batch, list(micro_batches)):
                            rows.append((tp, cp, pp, vp, dp, mb, ep))
    if not rows:
        raise ScenarioError(f"no layout of {n} GPUs matches the pinned degrees "
                            f"({', '.join(f'{k} {v}' for k, v in vars(pins).items() if v is not None)})")
    a = np.array(rows, dtype=np.int64)
    rc_names = pick(pins.recompute, list(recomputes))
    R = len(rc_names)
    a = np.repeat(a, R, axis=0)
    rc = np.tile(np.arange(R), len(rows))
    rc_codes = np.array([RECOMPUTES.index(r) for r in rc_names], dtype=np.int64)[rc]
    tp, cp, pp, vp, dp, mb, ep = a.T
    gb = int(global_batch)
    per_step = mb * dp
    n_micro = np.where(gb % per_step == 0, gb // np.maximum(per_step, 1), 0)
    reason = layout_reason_codes(tp=tp, cp=cp, pp=pp, vp=vp, n_micro=n_micro, n_heads=n_heads,
                                 n_kv_heads=n_kv_heads, domain=domain, tp_pinned=pins.tp is not None,
                                 seq_len=seq_len, flash=flash, dualpipe=pins.ep_overlap == "dualpipe",
                                 cp_a2a=cp_a2a, cp_a2a_p2p=cp_a2a_p2p, block=block)
    layers = padded_layers(L, pp, vp)  # padded to whole stages when uneven
    return {"tp": tp, "cp": cp, "pp": pp, "vp": vp, "dp": dp, "ep": ep, "micro_batch": mb, "n_micro": np.maximum(n_micro, 1),
            "recompute": rc_codes, "layers": layers, "uneven": layers != L, "reason": reason}


def _base_row(scenario, hw, wl, params, pins: Pins | None = None) -> dict:
    """The scenario's model row at tp = pp = cp = 1 (the layout fields are replaced per layout), with the MoE
    options of ``pins`` (the scenario's where ``pins`` leaves them unset)."""
    from gpusim.rows import scenario_row

    st = scenario.strategy
    opts = Pins(**{k: getattr(st, k) for k in MOE_PIN_FIELDS}
                | (pins or Pins()).moe_options())
    base = scenario.with_changes(tp=1, pp=1, vp=1, cp=1, ep=1, sp=None, per_gpu_batch=1, global_batch=None, accum=1,
                                 recompute="none", kind="zero1" if st.kind not in ("ddp", "zero1") else st.kind,
                                 ep_overlap="none")  # (DualPipe's rules hold per layout: see enumerate_layouts)
    return {**scenario_row(base, hw, wl, params), **opts.moe_option_fields()}


def layout_inputs(base: dict, lay: dict[str, np.ndarray]):
    """:class:`~gpusim.model.step.StepInputs` for every layout on one hardware row: the base row's fields as
    ``(1,)`` (or ``(1, K)``) arrays that broadcast against the layouts' ``(N,)`` degrees."""
    from gpusim.rows import stack_rows

    return with_layouts(stack_rows([base]), lay, _model_layers(base))


def _model_layers(base: dict) -> float:
    return float(base.get("model_layers", base["n_layers"]))


def with_layouts(inp, lay: dict[str, np.ndarray], model_layers: float):
    """``inp`` with the degrees of the layouts ``lay`` (arrays of one length) put in."""
    f = np.float64
    return inp.replace(tp=lay["tp"].astype(f), pp=lay["pp"].astype(f), vp=lay["vp"].astype(f), cp=lay["cp"].astype(f),
                       ep=lay["ep"].astype(f), micro_batch=lay["micro_batch"].astype(f),
                       accum=lay["n_micro"].astype(f), sp=lay["tp"] > 1,
                       **recompute_fields(lay["recompute"], inp),
                       n_layers=lay["layers"].astype(f), model_layers=np.asarray([model_layers]),
                       llm=np.asarray([True]))


def recompute_fields(codes, inp) -> dict[str, np.ndarray]:
    """[issue 17] The model's recomputation fields for :data:`RECOMPUTES` indices ``codes``: the granularity code
    (a module set runs with none, gpusim.model.llm's NONE) and the module flags, each set by the code or already by
    ``inp`` (the scenario's own ``--recompute-modules``); ``recompute_moe`` ([stop 53] ``layernorm+moe``) only where
    some row has it."""
    codes = np.asarray(codes)
    mod = codes >= len(RECOMPUTES) - len(MODULE_RECOMPUTES)
    mla = codes == RECOMPUTES.index("layernorm+moe_act+mla_up_proj")
    block = codes == RECOMPUTES.index("layernorm+moe")  # [stop 53] the whole MoE block (``moe`` module)
    out = {"recompute": np.where(mod, 0, codes),
           "recompute_norms": np.asarray(inp.recompute_norms, dtype=bool) | mod,
           "recompute_moe_act": np.asarray(inp.recompute_moe_act, dtype=bool) | (mod & ~block),
           "recompute_mla_up": np.asarray(inp.recompute_mla_up, dtype=bool) | mla}
    given = np.asarray(getattr(inp, "recompute_moe", False), dtype=bool)
    if np.any(block) or np.any(given):  # (the column joins the rows only where some layout has it: gpusim.model.step)
        out["recompute_moe"] = given | block
    return out


def search_recomputes(spec, strategy) -> tuple[str, ...]:
    """[issue 17] The recomputations a search tries for ``spec``: none, selective and full, and for a
    mixture-of-experts model its recipes' module set (:data:`MODULE_RECOMPUTES`, MLA's up-projections with it where
    the model has them) and [stop 53] the whole MoE block with the norms (``layernorm+moe``: Megatron-Core's ``moe``
    module, which the long-context recipes run where the experts' activations do not fit), unless ``strategy`` names
    modules of its own (then those ride on every layout)."""
    out = RECOMPUTES[:3]
    if getattr(spec, "n_experts", 0) and not strategy.recompute_modules:
        out += ("layernorm+moe_act+mla_up_proj" if getattr(spec, "mla", False) else "layernorm+moe_act",
                "layernorm+moe")  # [stop 53] the whole MoE block, as the long-context recipes recompute it
    return out


def check_recompute_pin(spec, pins: Pins) -> None:
    """[stop 53] A pinned module set (:data:`MODULE_RECOMPUTES`) obeys the rules ``gpusim predict`` applies to its
    modules (:func:`gpusim.rules.check_memory_saving`: ``moe`` or ``moe_act`` on a dense model, ``mla_up_proj``
    without MLA are refused with the fix), instead of naming layouts after modules the model does not have."""
    if pins.recompute in MODULE_RECOMPUTES:
        check_memory_saving(spec, Strategy(recompute=pins.recompute))


def search_layouts(scenario, *, db=None, params=None, pins: Pins | None = None, global_batch: int | None = None,
                   micro_batches=MICRO_BATCHES, recomputes=None) -> dict[str, Any]:
    """Every layout of ``scenario``'s workload on its hardware and GPU count. Returns ``{"layouts": arrays,
    "out": model outputs (NaN where a rule failed), "feasible", "reason": strings, "best": index or None,
    "order": feasible indices best first, "n": layouts}``. ``global_batch`` defaults to the scenario's;
    ``recomputes`` (names of :data:`RECOMPUTES`) to :func:`search_recomputes`."""
    from gpusim.hwdb import load
    from gpusim.model.step import evaluate
    from gpusim.params import DEFAULT_PARAMS
    from gpusim.rows import resolve_hardware, resolve_workload

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
    pins = pins or Pins()
    if pins.ep_overlap is None and scenario.strategy.ep_overlap != "none":
        pins = dataclasses.replace(pins, ep_overlap=scenario.strategy.ep_overlap)
    if pins.moe_fused_mlp or scenario.strategy.moe_fused_mlp:  # [issue 17] the rules of TE's fused grouped MLP
        check_fused_mlp(spec, scenario.strategy.model_copy(update={"moe_fused_mlp": True}), hw.gpu)
    check_recompute_pin(spec, pins)
    lay = enumerate_layouts(n_gpus=hw.n_gpus, domain=nvlink_domain_gpus(hw), n_layers=spec.n_layers,
                            n_heads=spec.n_heads, n_kv_heads=spec.n_kv_heads or spec.n_heads, seq_len=seq,
                            n_experts=int(getattr(spec, "n_experts", 0) or 0),
                            global_batch=gb, flash=bool(spec.flash_attention), pins=pins,
                            micro_batches=micro_batches,
                            recomputes=recomputes or search_recomputes(spec, scenario.strategy),
                            cp_a2a=(pins.cp_comm or scenario.strategy.cp_comm) == "a2a",
                            cp_a2a_p2p=(pins.cp_comm or scenario.strategy.cp_comm) == "a2a+p2p",
                            block=allocation_block(hw))
    lay = _mask_model_rules(lay, spec, scenario.strategy.activation_offload_layers)
    return evaluate_layouts(lay, _base_row(scenario, hw, wl, params, pins), hw.gpu.memory_bytes, params, evaluate)


def state_lower_bound_bytes(base: dict, lay: dict) -> np.ndarray:
    """A lower bound of a layout's memory per GPU: the transformer layers' weights, gradients and optimizer states
    on one stage (routed experts' optimizer states over the expert-data-parallel group), a part of what the model
    adds up. A layout over the GPU's memory by this bound alone is refused without running the model on it."""
    from gpusim.model.experts import moe_params_per_rank
    from gpusim.model.step import SHARD_STAGE

    lps = lay["layers"] / lay["pp"]
    tp = lay["tp"].astype(np.float64)
    delta, expert = (moe_params_per_rank({**base, "ep": lay["ep"]}, tp) if float(base.get("moe_frac", 0.0)) > 0
                     else (0.0, 0.0))
    per_rank = lps * (float(base["layer_params"]) / tp + delta)
    experts = lps * expert
    sharded = SHARD_STAGE[int(base["strategy"])] >= 1
    opt = (float(base["master_bytes_per_param"]) + float(base["opt_state_bytes_per_param"]))
    dp_group = (lay["dp"] * lay["cp"]) if sharded else 1.0
    edp = np.maximum(lay["dp"] * lay["cp"] * tp / lay["ep"], 1.0) if sharded else 1.0
    return (per_rank * (float(base["weight_bytes_per_param"]) + float(base["grad_bytes_per_param"]))
            + (per_rank - experts) * opt / dp_group + experts * opt / edp)


def evaluate_layouts(lay: dict, base: dict, capacity_bytes: float, params, evaluate=None) -> dict[str, Any]:
    """Run the model on the layouts that pass the rules and are not over memory by
    :func:`state_lower_bound_bytes` alone (one call), and attach the memory verdict."""
    from gpusim.rows import stack_rows

    if evaluate is None:
        from gpusim.model.step import evaluate
    retain_heap()  # blocks of temporaries reused, not faulted in afresh (gpusim.heap)
    N = len(lay["tp"])
    bound = state_lower_bound_bytes(base, lay)
    over = (lay["reason"] == OK) & (bound > capacity_bytes)
    ok = np.flatnonzero((lay["reason"] == OK) & ~over)
    keys = ("step_s", "throughput_samples_per_s", "mfu_frac", "memory_per_gpu_bytes", "fits_in_memory",
            "compute_s", "tp_comm_exposed_s", "cp_comm_exposed_s", "ep_comm_exposed_s", "pp_bubble_s", "pp_p2p_exposed_s",
            "dp_comm_exposed_s", "optimizer_s", "bottleneck_code", "memory_headroom_bytes")
    out = {k: np.full(N, np.nan) for k in (*keys, "memory_allocated_bytes")}
    one = stack_rows([base])
    for block in chunks(len(ok)):  # blocks the model evaluates whole (no concatenation of its outputs)
        sel = ok[block]
        res = evaluate(with_layouts(one, {k: v[sel] for k, v in lay.items()}, _model_layers(base)), params)
        for k in keys:
            out[k][sel] = np.broadcast_to(res[k], (len(sel),))
        # [stop 56] the allocator's share of the memory (what the published peaks measure: memory_record_fit)
        out["memory_allocated_bytes"][sel] = allocated_bytes(
            res["memory_weights_bytes"], res["memory_gradients_bytes"], res["memory_optimizer_bytes"],
            res["memory_buffers_bytes"], res["memory_activations_bytes"], params.fragmentation_frac)
    fits = np.nan_to_num(out["fits_in_memory"]).astype(bool)
    reason = np.where((lay["reason"] == OK) & ~fits, R_MEMORY, lay["reason"])
    feasible = reason == OK
    out["memory_lower_bound_bytes"] = np.where(over, bound, np.nan)
    seq = float(base["seq_len"])
    tokens = out["throughput_samples_per_s"] * seq
    out["tokens_per_s"] = tokens
    out["bubble_frac"] = out["pp_bubble_s"] / out["step_s"]
    out["headroom_bytes"] = capacity_bytes - out["memory_per_gpu_bytes"]
    out["spare_bytes"] = out["headroom_bytes"] - out["memory_headroom_bytes"]  # [issue 17] free beyond the headroom
    idx = np.flatnonzero(feasible)
    order = idx[np.lexsort((out["memory_per_gpu_bytes"][idx], -tokens[idx]))]
    return {"layouts": lay, "out": out, "feasible": feasible, "reason_code": reason,
            "best": int(order[0]) if len(order) else None, "order": order, "n": N,
            "capacity_bytes": capacity_bytes, "seq_len": seq, "domain": None}


def layout_name(lay: dict, i: int) -> str:
    """``tp 8 pp 8 cp 2 vp 8 dp 4 mb 1 selective``: the degrees of one layout."""
    parts = [f"tp {lay['tp'][i]}", f"pp {lay['pp'][i]}", f"cp {lay['cp'][i]}"]
    if lay["ep"][i] > 1:
        parts.append(f"ep {lay['ep'][i]}")
    if lay["vp"][i] > 1:
        parts.append(f"vp {lay['vp'][i]}")
    parts += [f"dp {lay['dp'][i]}", f"mb {lay['micro_batch'][i]}", f"recompute {RECOMPUTES[lay['recompute'][i]]}"]
    if "uneven" in lay and lay["uneven"][i]:
        parts.append(f"uneven stages (layers per chunk: {lay['layers'][i] // (lay['pp'][i] * lay['vp'][i])})")
    return " ".join(parts)


def reason_text(res: dict, i: int) -> str:
    code = int(res["reason_code"][i])
    if code == R_MEMORY:
        bound = res["out"].get("memory_lower_bound_bytes", np.full(i + 1, np.nan))[i]
        if np.isfinite(bound):
            return (f"does not fit in GPU memory (its weights, gradients and optimizer states alone take "
                    f"{units.format_bytes(bound)} of {units.format_bytes(res['capacity_bytes'])})")
        need = res["out"].get("memory_headroom_bytes", np.zeros(i + 1))[i]
        held = f" + the {units.format_bytes(need)} headroom" if need > 0 else ""  # [issue 17]
        return (f"does not fit in GPU memory ({units.format_bytes(res['out']['memory_per_gpu_bytes'][i])}{held} of "
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
    if lay["ep"][i] > 1 and "ep_comm_exposed_s" in o:
        bits.append(f"the expert all-to-alls expose {o['ep_comm_exposed_s'][i] / o['step_s'][i]:.0%} of the step")
    if o["memory_headroom_bytes"][i] > 0:
        bits.append(f"fits with {units.format_bytes(o['headroom_bytes'][i])} free "
                    f"({units.format_bytes(o['spare_bytes'][i])} beyond the "
                    f"{units.format_bytes(o['memory_headroom_bytes'][i])} headroom)")
    else:  # [issue 17] one NCCL communicator, which the memory counted already holds: no further headroom
        bits.append(f"fits with {units.format_bytes(o['headroom_bytes'][i])} free (its one NCCL communicator is in "
                    "the memory counted)")
    return ", ".join(bits)


#: [issue 17] Megatron-LM's argument defaults (megatron/training/arguments.py: --tensor-model-parallel-size,
#: --pipeline-model-parallel-size, --context-parallel-size 1, no virtual pipeline, no --recompute-granularity),
#: with micro-batch 1 (NeMo / Megatron-Bridge recipes' usual --micro-batch-size): pure data parallelism
FRAMEWORK_DEFAULTS = {"tp": 1, "pp": 1, "cp": 1, "vp": 1, "ep": 1, "micro_batch": 1, "recompute": 0}

#: why a degree beyond the defaults pays, by the part of the step or the memory it changes (Narayanan et al. SC'21,
#: Korthikanti et al. 2022)
_DEGREE_WHY = {"tp": "splits every layer's weights and activations over tp GPUs of the NVLink domain",
               "cp": "splits each sequence's activations and attention over cp GPUs",
               "pp": "splits the layers over pp stages (weights and activations per GPU / pp, at the cost of a bubble)",
               "vp": "interleaves vp chunks per stage (the bubble / vp)",
               "ep": "splits the experts over ep GPUs",
               "micro_batch": "larger GEMMs per kernel",
               "recompute": "recomputes activations in the backward pass instead of keeping them"}


def versus_defaults(res: dict) -> str:
    """[issue 17] How the best layout differs from :data:`FRAMEWORK_DEFAULTS` and why: which degrees changed, what
    each does, and the default's own verdict (does not fit with the headroom, or how much slower and by which part
    of the step)."""
    order = res["order"]
    if not len(order):
        return ""
    lay, o = res["layouts"], res["out"]
    b = int(order[0])
    sel = np.ones(len(lay["tp"]), dtype=bool)
    for k, v in FRAMEWORK_DEFAULTS.items():
        sel &= np.asarray(lay[k]) == v
    cands = np.flatnonzero(sel)
    diff = [k for k, v in FRAMEWORK_DEFAULTS.items() if int(lay[k][b]) != v]
    if not diff:
        return "the best layout is Megatron-LM's default (tp 1 pp 1 cp 1, micro-batch 1, no recomputation)"
    names = {"micro_batch": "micro-batch", "recompute": "recompute"}

    def val(k, i):
        return RECOMPUTES[int(lay[k][i])] if k == "recompute" else int(lay[k][i])

    changed = "; ".join(f"{names.get(k, k)} {FRAMEWORK_DEFAULTS[k] if k != 'recompute' else 'none'} -> {val(k, b)} "
                        f"({_DEGREE_WHY[k]})" for k in diff)
    text = f"vs Megatron-LM's defaults (tp 1 pp 1 cp 1, micro-batch 1, no recomputation): {changed}"
    if not len(cands):
        return text + "; the default layout is not a valid layout here"
    d = int(cands[0])
    if not res["feasible"][d]:
        return text + f"; the default {reason_text(res, d)}"
    gain = o["tokens_per_s"][b] / o["tokens_per_s"][d] - 1.0
    parts = ("compute_s", "tp_comm_exposed_s", "cp_comm_exposed_s", "ep_comm_exposed_s", "pp_bubble_s",
             "pp_p2p_exposed_s", "dp_comm_exposed_s", "optimizer_s")
    deltas = {k: float(o[k][d] - o[k][b]) for k in parts}
    k = max(deltas, key=deltas.get)
    return text + (f"; the default fits and is {gain:.1%} slower, most of it in {k.removesuffix('_s').replace('_', ' ')} "
                   f"({units.format_duration(deltas[k])} more per step)")


#: the degrees that make two layouts different ones (micro-batch and recomputation are tuning within a layout)
DEGREES = ("tp", "cp", "pp", "vp", "ep")


def next_distinct(lay: dict, order) -> int | None:
    """The best layout in ``order`` (indices, best first) whose degrees differ from the first's."""
    if not len(order):
        return None
    first = tuple(int(lay[k][order[0]]) for k in DEGREES)
    for i in order[1:]:
        if tuple(int(lay[k][i]) for k in DEGREES) != first:
            return int(i)
    return None


def explain_best(res: dict, domain: int) -> str:
    """``tp 8 pp 8 ...: the bubble is 6%, ...; 4% faster than tp 4 ... (bubble 12%, ...)``."""
    order = res["order"]
    if not len(order):
        return "no layout fits"
    lay, o = res["layouts"], res["out"]
    b = int(order[0])
    text = f"{layout_name(lay, b)}: {why(res, b, domain)}; MFU {o['mfu_frac'][b]:.1%}"
    nx = next_distinct(lay, order)
    if nx is not None:
        gain = o["tokens_per_s"][b] / o["tokens_per_s"][nx] - 1.0
        text += (f"; {gain:.1%} faster than the next best other layout, {layout_name(lay, nx)} "
                 f"({why(res, nx, domain)})")
    return text


def search_table(res: dict, top: int | None = None) -> list[dict]:
    """Rows of the search, best feasible first, then the infeasible with their reason."""
    idx = list(res["order"][:top] if top else res["order"])
    if top is None:
        idx += [int(i) for i in np.flatnonzero(~res["feasible"])]
    return [table_row(res, i) for i in idx]


def table_row(res: dict, i: int) -> dict:
    """One layout of a search as a row of :func:`search_table`."""
    lay, o = res["layouts"], res["out"]
    r = {k: int(lay[k][i]) for k in ("tp", "cp", "pp", "vp", "ep", "dp", "micro_batch", "n_micro")}
    r["recompute"] = RECOMPUTES[int(lay["recompute"][i])]
    r["feasible"] = bool(res["feasible"][i])
    r["reason"] = "" if r["feasible"] else reason_text(res, i)
    for k in ("step_s", "tokens_per_s", "mfu_frac", "memory_per_gpu_bytes", "bubble_frac", "cp_comm_exposed_s",
              "ep_comm_exposed_s", "tp_comm_exposed_s"):
        v = float(o[k][i])
        r[k] = None if math.isnan(v) else v
    return r


def record_fit(res: dict, allocated_ratio: float) -> int | None:
    """[stop 56] The fastest feasible layout of a search whose memory still fits its GPU when the allocator's share
    of it (``memory_allocated_bytes``: weights, gradients, optimizer states, buffers, activations) is
    ``allocated_ratio`` times the prediction and the rest (fragmentation allowance, CUDA context, NCCL buffers) as
    predicted: ``total + allocated x (ratio - 1) <= capacity``, the top of the memory record's range
    (:func:`gpusim.track_record.memory_record`, whose 90th percentile ratio the caller passes) against the GPU's
    memory, as its wording compares them. None when no feasible layout does. Hand-worked: capacity 80 GiB, ratio
    1.18; the fastest at 77 GiB of which 70 allocated tops at 89.6 GiB, the next at 66 GiB of which 60 allocated at
    76.8 GiB: the second."""
    o, idx = res["out"], np.asarray(res["order"], dtype=np.int64)
    if not len(idx):
        return None
    top_bytes = o["memory_per_gpu_bytes"][idx] + o["memory_allocated_bytes"][idx] * (float(allocated_ratio) - 1.0)
    ok = np.flatnonzero(top_bytes <= float(res["capacity_bytes"]))
    return int(idx[ok[0]]) if len(ok) else None


def layout_scenario(scenario, row, **changes):
    """The scenario :func:`gpusim.simulation.simulate` runs for one layout the search evaluated: ``scenario`` with
    the row's degrees (``tp``, ``cp``, ``pp``, ``vp``, ``ep``: a :func:`search_table` row, a plan row or a plan
    configuration), its ``micro_batch`` as the per-GPU batch and its ``recompute``, run as the search runs it:
    sequence parallelism wherever ``tp > 1`` (:func:`with_layouts`) and unequal stages where ``pp x vp`` does not
    divide the model's layers (:func:`enumerate_layouts` pads them, :func:`gpusim.rules.padded_layers`).
    ``changes`` (the global batch, MoE options the search was pinned to ...) go on top."""
    from gpusim.rows import resolve_workload

    tp, pp, vp = int(row["tp"]), int(row["pp"]), int(row["vp"])
    n_layers = int(transformer_of(resolve_workload(scenario)).n_layers)
    # ([issue 17] a module set, MODULE_RECOMPUTES, is a recomputation by name: Strategy reads it as its modules)
    return scenario.with_changes(**{"tp": tp, "cp": int(row["cp"]), "pp": pp, "vp": vp, "ep": int(row.get("ep") or 1),
                                    "per_gpu_batch": int(row["micro_batch"]), "recompute": str(row["recompute"]),
                                    "sp": tp > 1, "uneven_pp": bool(padded_layers(n_layers, pp, vp) != n_layers),
                                    **changes})


# ------------------------------------------------------------------------------------------------
# The search over hardware options and GPU counts (what `gpusim plan` adds for an LLM)
# ------------------------------------------------------------------------------------------------

#: columns the plan table gains for layout rows (empty / 0 for the data-parallel rows of gpusim.sweep)
LAYOUT_COLUMNS = ("layout", "tp", "cp", "pp", "vp", "ep", "recompute", "pp_bubble_frac", "layout_why")


def _varying_fields(inp) -> dict[str, np.ndarray]:
    """Fields of stacked hardware rows that differ between rows (the others broadcast from one row): gathering only
    these per layout keeps the model's inputs small."""
    out = {}
    for f in fields(inp):
        a = np.asarray(getattr(inp, f.name))
        if a.ndim == 0 or a.shape[0] == 1:
            continue
        same = np.all(a == a[:1]) if a.dtype != object else False
        if a.dtype.kind == "f":
            same = same or bool(np.all((a == a[:1]) | (np.isnan(a) & np.isnan(a[:1]))))
        if not same:
            out[f.name] = a
    return out


def _best_per_segment(score, segs, H: int) -> np.ndarray:
    """Index of the highest ``score`` (the first of equals) in each segment ``(owner, start, end)`` of consecutive
    rows, per owner ``0..H-1`` (-1 for an owner without rows)."""
    best = np.full(H, -1, dtype=np.int64)
    for h, a, b in segs:
        best[h] = a + int(np.argmax(score[a:b]))
    return best


#: the base-row fields :func:`state_lower_bound_bytes` reads (its result is shared by hardware rows that agree on them)
_BOUND_FIELDS = ("layer_params", "strategy", "weight_bytes_per_param", "grad_bytes_per_param", "master_bytes_per_param",
                 "opt_state_bytes_per_param", "moe_frac", "d_model", "n_experts", "expert_tp", "ffn_mats",
                 "expert_ff_dim", "moe_latent_dim", "shared_ff_dim", "ff_dim")


def plan_layout_rows(wl, options, counts_per_option, *, global_batch: int, precision: str = "auto", db, params,
                     pins: Pins | None = None, max_global_batch: int | None = None, progress=None,
                     chunk_rows: int | None = None):
    """One row per (hardware option, node count): the best layout there, with the columns of
    :data:`gpusim.sweeps.COLUMNS` plus :data:`LAYOUT_COLUMNS`, or the reason none fits. All layouts of all
    options go through the model in chunks of ``chunk_rows`` (one call each)."""
    import pandas as pd

    from gpusim.model.step import BOTTLENECKS, BREAKDOWN_KEYS, evaluate
    from gpusim.rows import option_scenario, resolve_hardware_table, resolve_precision, scenario_row, stack_rows
    from gpusim.sweeps import COLUMNS

    retain_heap()  # blocks of temporaries reused, not faulted in afresh (gpusim.heap)

    spec = transformer_of(wl)
    pins = pins or Pins()
    if pins.moe_options() and (not getattr(spec, "n_experts", 0)  # [issue 12] an error, not a reason on every row
                               or set(ROUTING_PIN_FIELDS) <= set(pins.moe_options())):
        check_ep(spec, ep=1, **pins.moe_options())
    check_recompute_pin(spec, pins)
    if pins.cuda_graph_scope:  # [issue 17] Megatron-Core's scope rules, and MoE scopes need MoE layers
        from gpusim.rows import cuda_graph_fields
        from gpusim.scenario import format_validation_error

        try:
            st = Strategy(cuda_graph_scope=pins.cuda_graph_scope)
        except ValueError as e:
            raise ScenarioError(format_validation_error(e)) from None
        cuda_graph_fields(spec, st, getattr(wl, "name", ""))
    chunk_rows = chunk_rows or CHUNK_ROWS
    seq = int(wl.tokens_per_sample)
    ht = resolve_hardware_table(wl, options, counts_per_option, db, params)
    H = len(ht.rows)
    base_rows: list[dict | None] = [None] * H
    prec: list[str | None] = [None] * H
    why_not: list[str | None] = list(ht.reason)
    cache: dict = {}
    for h in range(H):
        if ht.rows[h] is None or why_not[h]:
            continue
        pr = resolve_precision(ht.gpu[h], precision)
        if pr is None:
            why_not[h] = f"{ht.gpu[h].id} has no tensor-core precision for {precision}"
            continue
        key = (ht.option[h], ht.nodes[h] > 1, pr)
        if key not in cache:
            try:
                scn = option_scenario(wl, options[ht.option[h]], db, 2 if ht.nodes[h] > 1 else 1, kind="zero1",
                                    precision=pr, recompute="none", per_gpu_batch=1)
                cache[key] = scenario_row(scn, ht.hw[h], wl, params)
            except Exception as e:  # a precision the GPU lacks, ...: the row says so
                cache[key] = str(e)
        b = cache[key]
        if isinstance(b, str):
            why_not[h] = b
            continue
        if pins.moe_fused_mlp:  # [issue 17] TE's fused grouped MLP runs on some GPUs and precisions only
            try:
                check_fused_mlp(spec, Strategy(precision=pr, moe_fused_mlp=True), ht.gpu[h])
            except ScenarioError as e:
                why_not[h] = str(e)
                continue
        base_rows[h] = {**b, **ht.rows[h], **pins.moe_option_fields()}  # [issue 12] MoE options
        if pins.cp_comm:  # [issue 17] the exchange of the layouts with cp > 1
            from gpusim.model.context import CP_KINDS

            base_rows[h]["cp_kind"] = float(CP_KINDS[pins.cp_comm])
        if pins.cross_entropy:  # [issue 17] the loss's cross entropy (gpusim.model.llm.CROSS_ENTROPY_BYTES)
            from gpusim.model.llm import CE_CODES

            base_rows[h]["ce_code"] = float(CE_CODES[pins.cross_entropy])
        prec[h] = pr
    # ---- every layout of every hardware row ------------------------------------------------------------
    # Enumerated once per (GPUs, NVLink domain); the lower bound of the states once per enumeration and the base-row
    # fields it reads. Only the layouts that pass the rules and the bound are gathered: the rows the model runs on,
    # one contiguous segment per hardware row.
    enum_cache: dict = {}
    bound_cache: dict = {}
    picks, segs, N, M = [], [], 0, 0
    least_mem = np.full(H, np.nan)  # the least memory any layout needs (the bound where the bound refused it)
    for h in range(H):
        if base_rows[h] is None:
            continue
        n, dom = int(ht.rows[h]["n_gpus"]), nvlink_domain_gpus(ht.hw[h])
        block = allocation_block(ht.hw[h])
        k = (n, dom, block)
        if k not in enum_cache:
            try:
                full = enumerate_layouts(n_gpus=n, domain=dom, n_layers=spec.n_layers, n_heads=spec.n_heads,
                                         n_kv_heads=spec.n_kv_heads or spec.n_heads, seq_len=seq,
                                         n_experts=int(getattr(spec, "n_experts", 0) or 0),
                                         recomputes=search_recomputes(spec, Strategy()),  # [issue 17]
                                         global_batch=global_batch, flash=bool(spec.flash_attention), pins=pins,
                                         cp_a2a=pins.cp_comm == "a2a", cp_a2a_p2p=pins.cp_comm == "a2a+p2p",
                                         block=block)
                full = _mask_model_rules(full, spec)  # plan offloads nothing
                passed = np.flatnonzero(full["reason"] == OK)
                enum_cache[k] = (len(full["tp"]), {c: v[passed] for c, v in full.items()})
            except ScenarioError as e:
                enum_cache[k] = str(e)
        if isinstance(enum_cache[k], str):
            why_not[h] = enum_cache[k]
            continue
        n_all, cand = enum_cache[k]
        N += n_all
        bkey = (k, *(base_rows[h].get(f) for f in _BOUND_FIELDS))
        if bkey not in bound_cache:
            bound_cache[bkey] = state_lower_bound_bytes({f: base_rows[h][f] for f in _BOUND_FIELDS
                                                         if f in base_rows[h]}, cand)
        bound = np.broadcast_to(bound_cache[bkey], cand["tp"].shape)
        over = bound > ht.gpu[h].memory_bytes
        if over.any():
            least_mem[h] = bound[over].min()
        keep = np.flatnonzero(~over)
        if len(keep):
            picks.append((k, keep))
            segs.append((h, M, M + len(keep)))
            M += len(keep)
    keys = ("step_s", "throughput_samples_per_s", "throughput_per_gpu_samples_per_s", "mfu_frac", "gpu_util_frac",
            "memory_per_gpu_bytes", "max_micro_batch", "fits_in_memory", "bottleneck_code", *BREAKDOWN_KEYS,
            "comm_total_s", "loader_supply_samples_per_s", "pp_bubble_s", "cp_comm_exposed_s",
            "ep_comm_exposed_s")
    if M:
        lay = {c: np.concatenate([enum_cache[k][1][c][keep] for k, keep in picks]) for c in enum_cache[picks[0][0]][1]}
        owner = np.concatenate([np.full(e_ - s_, h, dtype=np.int64) for h, s_, e_ in segs])
        cap_row = np.array([ht.gpu[h].memory_bytes for h in range(H)], dtype=np.float64)
        present = [h for h, _, _ in segs]
        stacked = stack_rows([base_rows[h] for h in present])
        varying = _varying_fields(stacked)
        stacked = stacked.replace(**{f.name: np.asarray(getattr(stacked, f.name))[:1] for f in fields(stacked)
                                     if f.name not in varying and np.ndim(getattr(stacked, f.name)) > 0})
        row_of = np.full(H, -1, dtype=np.int64)
        row_of[present] = np.arange(len(present))

        def run_model(sel):
            """The model on rows ``sel`` (a slice: views of the layouts, or indices)."""
            rows = row_of[owner[sel]]
            inp = stacked.replace(**{c: v[rows] for c, v in varying.items()})
            return evaluate(with_layouts(inp, {c: v[sel] for c, v in lay.items()}, float(spec.n_layers)), params)

        # every layout: only what picks the best; the chosen rows' full outputs are evaluated again below
        thr = np.full(M, -np.inf)
        mem = np.full(M, np.nan)
        for block in chunks(M, chunk_rows):
            res = run_model(block)
            n_b = block.stop - block.start
            fit = np.broadcast_to(res["fits_in_memory"], (n_b,))
            thr[block] = np.where(fit, np.broadcast_to(res["throughput_samples_per_s"], (n_b,)), -np.inf)
            mem[block] = np.broadcast_to(res["memory_per_gpu_bytes"], (n_b,))
            if progress is not None:
                progress(block.stop, M)
        ok = np.isfinite(thr)
        # best per hardware row, then the best whose degrees differ from it (the next best other layout)
        best_of = _best_per_segment(thr, segs, H)
        key = np.zeros(M, dtype=np.int64)
        for c in DEGREES:
            key = key * 4096 + lay[c]
        other = key != key[best_of[owner]]
        second_of = _best_per_segment(np.where(other, thr, -np.inf), segs, H)
        for h, a, b in segs:
            least_mem[h] = np.fmin(least_mem[h], np.fmin.reduce(mem[a:b]))
        # the chosen layouts (each row's best and next best other) with all their outputs, as a small table
        chosen = np.unique(np.concatenate([best_of[best_of >= 0], second_of[second_of >= 0]]))
        chosen = chosen[ok[chosen]]
        at = {int(i): j for j, i in enumerate(chosen)}
        small = {"layouts": {c: v[chosen] for c, v in lay.items()}, "out": {}}
        if len(chosen):
            res = run_model(chosen)
            o = {c: np.broadcast_to(res[c], (len(chosen),)) for c in keys}
            free = cap_row[owner[chosen]] - o["memory_per_gpu_bytes"]
            small["out"] = {**o, "bubble_frac": o["pp_bubble_s"] / o["step_s"], "headroom_bytes": free,
                            "memory_headroom_bytes": np.broadcast_to(res["memory_headroom_bytes"], (len(chosen),)),
                            "spare_bytes": free - res["memory_headroom_bytes"]}  # [issue 17]
    else:
        lay, ok, best_of, second_of = None, None, np.full(H, -1), np.full(H, -1)
        at, small = {}, {"layouts": {}, "out": {}}
    # ---- the one-GPU reference of each best layout (same micro-batch and recomputation): speedup, efficiency --
    single = np.full(H, np.nan)
    with_best = [h for h in range(H) if why_not[h] is None and best_of[h] >= 0 and ok[best_of[h]]]
    if with_best:
        bi = best_of[with_best]
        one = stack_rows([{**base_rows[h], "n_gpus": 1.0, "n_nodes": 1.0} for h in with_best])
        one = one.replace(tp=np.ones(len(bi)), pp=np.ones(len(bi)), vp=np.ones(len(bi)), cp=np.ones(len(bi)),
                          micro_batch=lay["micro_batch"][bi].astype(np.float64), accum=np.ones(len(bi)),
                          sp=np.zeros(len(bi), dtype=bool), **recompute_fields(lay["recompute"][bi], one),
                          n_layers=np.full(len(bi), float(spec.n_layers)),
                          model_layers=np.full(len(bi), float(spec.n_layers)), llm=np.ones(len(bi), dtype=bool))
        one = one.replace(ep_overlap=np.zeros(len(bi)))  # [issue 12] (one GPU: no pipeline, no all-to-all)
        res1 = evaluate(one, params)
        # a one-GPU reference that does not fit in one GPU's memory is no reference: speedup and efficiency n/a
        # (NaN) rather than a 300% "efficiency" against a GPU that cannot hold the model (a 671B MoE)
        single[with_best] = np.where(np.asarray(res1["fits_in_memory"], dtype=bool),
                                     res1["step_s"] / lay["micro_batch"][bi], np.nan)  # seconds per sequence
    # ---- one table row per hardware row --------------------------------------------------------------------
    recs = []
    for h in range(H):
        opt = options[ht.option[h]]
        hw = ht.hw[h]
        node = hw.node if hw is not None else None
        g = opt.gpus_per_node
        r = {c: np.nan for c in COLUMNS}
        r.update({"node": node.id if node is not None else (opt.node or ""),
                  "node_kind": node.kind if node is not None else (db.node(opt.node).kind if opt.node else ""),
                  "gpu": ht.gpu[h].id, "gpus_per_node": g, "nodes": ht.nodes[h], "n_gpus": g * ht.nodes[h],
                  "intra_link": hw.intra_link.id if hw is not None and hw.intra_link is not None else "",
                  "inter_link": hw.inter_link.id if hw is not None and hw.inter_link is not None else "",
                  "strategy": "zero1", "precision": prec[h] or precision, "checkpointing": False,
                  "cpu_offload": False, "num_workers": -1, "feasible": False, "fits_in_memory": False,
                  "memory_capacity_bytes": ht.gpu[h].memory_bytes, "node_assumed": opt.node is None,
                  "cores_per_gpu": (ht.rows[h] or {}).get("cores_per_gpu", np.nan),
                  "storage_bytes_per_s_per_node": (ht.rows[h] or {}).get("storage_bytes_per_s_per_gpu", np.nan) * g,
                  "layout": "", "tp": 0, "cp": 0, "pp": 0, "vp": 0, "ep": 0, "recompute": "", "layout_why": "",
                  "micro_batch": 0, "accum": 0, "global_batch": global_batch, "reason": why_not[h] or ""})
        b = int(best_of[h])
        if why_not[h] is None and b >= 0 and ok[b]:
            out, sl, jb = small["out"], small["layouts"], at[b]
            for k in keys:
                if k in r:
                    r[k] = float(out[k][jb])
            dom = nvlink_domain_gpus(hw)
            text = f"{layout_name(sl, jb)}: {why(small, jb, dom)}"
            s2 = int(second_of[h])
            if s2 >= 0 and ok[s2]:
                j2 = at[s2]
                gain = out["throughput_samples_per_s"][jb] / out["throughput_samples_per_s"][j2] - 1.0
                text += (f"; {gain:.1%} faster than the next best other layout, {layout_name(sl, j2)} "
                         f"({why(small, j2, dom)})")
            b = jb  # below: the chosen table's index
            lay_b = sl
            speedup = float(out["throughput_samples_per_s"][b]) * single[h]
            r.update({"single_gpu_step_s": single[h] * float(lay_b["micro_batch"][b]), "speedup": speedup,
                      "scaling_efficiency_frac": speedup / (g * ht.nodes[h])})
            r.update({"feasible": True, "fits_in_memory": True, "layout": layout_name(lay_b, b),
                      "tp": int(lay_b["tp"][b]), "cp": int(lay_b["cp"][b]), "pp": int(lay_b["pp"][b]),
                      "vp": int(lay_b["vp"][b]), "ep": int(lay_b["ep"][b]),
                      "recompute": RECOMPUTES[int(lay_b["recompute"][b])],
                      "micro_batch": int(lay_b["micro_batch"][b]), "accum": int(lay_b["n_micro"][b]),
                      "pp_bubble_frac": float(out["pp_bubble_s"][b] / out["step_s"][b]), "layout_why": text,
                      "bottleneck": BOTTLENECKS[int(out["bottleneck_code"][b])], "reason": "",
                      "tokens_per_s": float(out["throughput_samples_per_s"][b]) * seq})
        elif why_not[h] is None:
            m = least_mem[h]
            r["reason"] = ("no layout fits in GPU memory" + (f" (the smallest needs at least {m / units.GIB:.1f} GiB of "
                                                              f"{ht.gpu[h].memory_bytes / units.GIB:.0f} GiB)"
                                                              if np.isfinite(m) else
                                                              " (no layout passes the divisibility rules)"))
        if max_global_batch is not None and r["feasible"] and global_batch > max_global_batch:
            r.update(feasible=False, reason=f"global batch too large ({global_batch} > limit {max_global_batch})")
        recs.append(r)
    df = pd.DataFrame(recs, columns=list(COLUMNS) + list(LAYOUT_COLUMNS))
    df.attrs["layout_rows"] = N
    return df


def layout_row_step_s(row, wl, option, db, params, *, ceiling_scale: float = 1.0) -> float:
    """The step time of one plan row's layout (columns tp, cp, pp, vp, recompute, micro_batch, accum) under
    ``params``, with the matmul ceilings (GEMMs and FlashAttention) scaled by ``ceiling_scale``: what the plan's
    sensitivity re-runs."""
    from gpusim.model.step import evaluate
    from gpusim.rows import option_scenario, resolve_hardware

    scn = option_scenario(wl, option, db, int(row["nodes"]), kind="zero1", precision=str(row["precision"]),
                        recompute="none", per_gpu_batch=1)
    hw = resolve_hardware(scn, db)
    L = int(wl.transformer.n_layers if getattr(wl, "transformer", None) is not None else
            _base_row(scn, hw, wl, params)["n_layers"])
    pp, vp = int(row["pp"]), int(row["vp"])
    lay = {"tp": np.array([int(row["tp"])]), "cp": np.array([int(row["cp"])]), "pp": np.array([pp]),
           "ep": np.array([int(row.get("ep", 1) or 1)]),
           "vp": np.array([vp]), "micro_batch": np.array([int(row["micro_batch"])]),
           "n_micro": np.array([int(row["accum"])]), "recompute": np.array([RECOMPUTES.index(str(row["recompute"]))]),
           "layers": np.array([padded_layers(L, pp, vp)]), "uneven": np.array([padded_layers(L, pp, vp) != L])}
    base = _base_row(scn, hw, wl, params)
    base["ceiling_flop_per_s"] = base["ceiling_flop_per_s"] * ceiling_scale
    params = params.replace(gemm_ceiling_frac=min(1.0, params.gemm_ceiling_frac * ceiling_scale),
                            flash_fwd_eff_frac=min(1.0, params.flash_fwd_eff_frac * ceiling_scale),
                            flash_bwd_eff_frac=min(1.0, params.flash_bwd_eff_frac * ceiling_scale))
    out = evaluate(layout_inputs(base, lay), params)
    return float(np.asarray(out["step_s"]).ravel()[0])
