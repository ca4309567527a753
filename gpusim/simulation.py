"""One scenario in, one explained prediction out: ``simulate(Scenario(...)) -> StepResult``.

Stage 4 of the road (docs/ARCHITECTURE.md). The scenario (:mod:`gpusim.scenario`) is turned into rows by
:mod:`gpusim.rows`; the single-GPU baseline and the what-if variants behind the recommendations
(:mod:`gpusim.diagnose`) are more rows of the same arrays, so one call of the vectorised model answers all of
them (the same code path as a sweep). The names this module used to define (``Scenario``, ``resolve_hardware``,
``scenario_row``, ...) are re-exported from their stages so that ``gpusim.simulation.X`` keeps working.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from pydantic import ValidationError

from gpusim import units
from gpusim.diagnose import llm_variant_candidates, llm_variant_scenarios, recommendations, variant_scenarios
from gpusim.errors import GpusimError, ScenarioError
from gpusim.model import comm as C
from gpusim.model.step import BOTTLENECKS, BREAKDOWN_KEYS, LLM_BREAKDOWN_KEYS, evaluate
from gpusim.params import DEFAULT_PARAMS, ModelParams
from gpusim.rows import (Hardware, build_inputs, cached_row, concat_outputs, group_eff_frac, hardware_key,  # noqa: F401
                         hardware_row, llm_row, memory_saving_fields, path_name, peak_for, resolve_hardware,
                         resolve_workload, roofline_by_kind, row_result, scenario_row, single_gpu_scenario,
                         stack_rows)
from gpusim.rules import check_memory_saving, nvlink_domain_gpus, scenario_layout, transformer_of  # noqa: F401
from gpusim.scenario import Scenario, format_validation_error
from gpusim.strategy import Strategy

_single_gpu = single_gpu_scenario  # (the old private name, kept for the tests that call it)


# ------------------------------------------------------------------------------------------------
# Results
# ------------------------------------------------------------------------------------------------

#: how mfu_frac counts model FLOPs
MFU_CONVENTION = ("model FLOPs = 3 x forward (6 x parameters x tokens for the GEMMs, plus attention 4 s^2 q per layer "
                  "and sequence counted without the causal saving), recomputation not counted (PaLM appendix B; "
                  "NVIDIA Megatron-LM tables), over the dense datasheet peak of the precision")


@dataclass(frozen=True)
class StepResult:
    """A prediction for one scenario. Times in seconds, rates per second, sizes in bytes.

    ``breakdown_s`` parts sum to ``step_s``. ``speedup`` and ``scaling_efficiency_frac`` compare with the same
    GPU alone at the same per-GPU batch (weak scaling): ``efficiency = T1 / (N * TN)`` for equal work.
    """

    step_s: float
    throughput_samples_per_s: float
    throughput_per_gpu_samples_per_s: float
    speedup: float
    scaling_efficiency_frac: float
    mfu_frac: float
    gpu_util_frac: float
    memory_per_gpu_bytes: float
    memory_capacity_bytes: float
    fits_in_memory: bool
    max_micro_batch: int
    bottleneck: str
    breakdown_s: dict[str, float]
    detail: dict[str, float]
    memory_breakdown_bytes: dict[str, float]
    single_gpu_step_s: float
    single_gpu_throughput_samples_per_s: float
    global_batch: int
    n_gpus: int
    n_nodes: int
    intra_path: str | None
    inter_path: str | None
    recommendations: tuple[dict, ...] = ()
    assumptions: tuple[str, ...] = ()
    scenario: dict = field(default_factory=dict)
    # LLM views (tokens, model FLOPs as NVIDIA's tables count them, the layout)
    tokens_per_s: float | None = None
    tokens_per_s_per_gpu: float | None = None
    model_tflop_per_s_per_gpu: float | None = None
    mfu_flop_convention: str = MFU_CONVENTION
    parallelism: dict = field(default_factory=dict)
    memory_per_stage_bytes: dict = field(default_factory=dict)
    n_micro_batches: int = 1
    memory_headroom_bytes: float = 0.0  # [issue 17] memory the fit check leaves free (--memory-headroom)
    # [issue 17] LLM layouts: one transformer layer's seconds per micro-batch (gpusim.model.llm.layer_detail)
    layer_s: dict | None = None

    @property
    def throughput_tokens_per_s(self) -> float | None:
        """The old name of :attr:`tokens_per_s` (one name per quantity: issue 19)."""
        return self.tokens_per_s

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["recommendations"] = list(self.recommendations)
        d["assumptions"] = list(self.assumptions)
        return d


def simulate(scenario: Scenario | dict, *, db=None, params: ModelParams | None = None,
             recommend: bool = True) -> StepResult:
    """Predict one training step. ``scenario`` may be a :class:`Scenario` or a dict of its fields.

    Raises :class:`~gpusim.errors.GpusimError` (unknown ids, impossible configurations) with a message
    that says how to fix it.
    """
    from gpusim.hwdb import load

    scn = scenario if isinstance(scenario, Scenario) else Scenario.create(**scenario)
    db = db or load()
    params = params or DEFAULT_PARAMS
    wl = resolve_workload(scn)
    hw_cache: dict = {}  # hardware resolved once per distinct hardware: most what-ifs change only the strategy
    row = cached_row(scn, wl, db, params, hw_cache)
    hw = hw_cache[hardware_key(scn)][0]
    single_row = cached_row(_single_gpu(scn), wl, db, params, hw_cache)

    rows = [row, single_row]
    if scn.baseline_throughput:
        _apply_baseline(rows, scn, params)

    # an LLM layout's what-ifs do not depend on its result, only which of them are shown does: they are evaluated
    # with the layout in one call (rows are independent: vectorised equals one at a time)
    speculative = llm_variant_candidates(scn, hw) if recommend and scn.strategy.is_llm else []
    spec_rows = _variant_rows(scn, speculative, rows, wl, db, params, hw_cache)
    first = evaluate(stack_rows(rows + [r for _, _, r in spec_rows]), params)
    if speculative:
        wanted = {name for name, _ in llm_variant_scenarios(scn, hw, first, speculative)}
        keep = [j for j, (name, _, _) in enumerate(spec_rows) if name in wanted]
        var_rows = [spec_rows[j] for j in keep]
        idx = list(range(len(rows))) + [len(rows) + j for j in keep]  # the layout, its one-GPU row, the wanted
        total = len(rows) + len(spec_rows)
        out = {k: np.broadcast_to(v, (total,))[idx] for k, v in first.items()}
    else:
        variants = variant_scenarios(scn, hw, wl, first, db) if recommend else []
        var_rows = _variant_rows(scn, variants, rows, wl, db, params, hw_cache)
        # rows are independent (vectorised equals one at a time): the what-ifs are evaluated on their own
        out = concat_outputs(first, evaluate(stack_rows([r for _, _, r in var_rows]), params)) if var_rows else first
    res = _make_result(scn, hw, wl, out, 0, 1, row)
    if scn.strategy.is_llm:  # [issue 17] where one layer's time goes (predict's "one layer" lines)
        from gpusim.model.step import layer_detail

        res = dataclasses.replace(res, layer_s=layer_detail(stack_rows([row]), params))
    if recommend:
        recs = recommendations(scn, hw, wl, res, [(name, vscn, row_result(out, 2 + j))
                                                  for j, (name, vscn, _) in enumerate(var_rows)])
        res = dataclasses.replace(res, recommendations=tuple(recs))
    return res


#: [issue 17] the advice ``sweep`` and ``plan`` carry for their best layout and recommendation: settings they rank
#: under as given (the precision, Megatron-Core's MoE software settings, the loss's cross entropy) that would move the
#: answer
SOFTWARE_ADVICE_IDS = ("llm-fp8", "llm-nvfp4", "llm-moe-software", "llm-cross-entropy")  # [stop 57] NVFP4


def software_advice(scenario: Scenario, *, db=None, params: ModelParams | None = None) -> list[dict]:
    """[issue 17] :func:`simulate`'s advice on the settings ``sweep`` and ``plan`` rank under as given
    (:data:`SOFTWARE_ADVICE_IDS`: :mod:`gpusim.diagnose`'s ``llm-fp8``, FP8 training where the GPU has FP8 tensor
    cores, and ``llm-moe-software``, Megatron-Core's MoE software settings: the flex dispatcher, the EP all-to-all
    overlap, the fused grouped MLP, full-iteration CUDA graphs, and [issue 17] ``llm-cross-entropy``, Transformer
    Engine's loss where a layout was given another), each with its predicted gain; empty where none has anything to
    add."""
    found = simulate(scenario, db=db, params=params, recommend=True)
    return [r for r in found.recommendations if r["id"] in SOFTWARE_ADVICE_IDS]


#: how ``sweep`` and ``plan`` name each kind of advice they print
SOFTWARE_ADVICE_LABELS = {"llm-fp8": "FP8", "llm-nvfp4": "NVFP4", "llm-moe-software": "MoE software",
                          "llm-cross-entropy": "Loss cross entropy"}


def _variant_rows(scn: Scenario, variants, rows, wl, db, params: ModelParams, hw_cache: dict) -> list:
    """``(name, scenario, row)`` of each what-if that builds (an impossible one is left out)."""
    var_rows = []
    for name, vscn in variants:
        try:
            vrow = cached_row(vscn, wl, db, params, hw_cache)
        except GpusimError:
            continue
        if scn.baseline_throughput:
            vrow["compute_override_s"] = _rescaled_override(rows, vrow, params)
        var_rows.append((name, vscn, vrow))
    return var_rows


#: A measured one-GPU step implies a micro-batch of at least this share of its own per-micro-batch time, however much
#: of the step the modelled optimizer, overhead and data wait would take (a guard against a model that prices them
#: above what the measurement leaves; a judgement, not a measurement)
BASELINE_MIN_MICRO_FRAC = 0.3


def baseline_micro_s(measured_step_s: float, other_s: float, accum: int) -> float:
    """The micro-batch compute seconds a measured one-GPU step of ``accum`` micro-batches implies: the step less the
    modelled optimizer, overhead and data wait (``other_s``), over ``accum``; at least
    :data:`BASELINE_MIN_MICRO_FRAC` of ``measured_step_s / accum``."""
    return max((measured_step_s - other_s) / accum, BASELINE_MIN_MICRO_FRAC * measured_step_s / accum)


def _apply_baseline(rows: list[dict], scn: Scenario, params: ModelParams) -> None:
    """Replace the modelled micro-batch compute time by the one implied by a measured one-GPU throughput."""
    first = evaluate(stack_rows(rows), params)
    st = scn.strategy
    measured_step_s = st.per_gpu_batch * st.accum / scn.baseline_throughput
    other = float(first["optimizer_s"][1] + first["overhead_s"][1] + first["data_wait_s"][1])
    micro = baseline_micro_s(measured_step_s, other, st.accum)
    for r in rows:
        r["compute_override_s"] = micro
    rows[0]["_modelled_micro_s"] = float(first["micro_compute_s"][1])


def _rescaled_override(rows: list[dict], vrow: dict, params: ModelParams) -> float:
    """A variant with another batch or precision scales the measured time by the model's own ratio."""
    measured = rows[0]["compute_override_s"]
    one = evaluate(stack_rows([{**rows[1], "compute_override_s": math.nan},
                               {**vrow, "n_gpus": 1.0, "n_nodes": 1.0, "compute_override_s": math.nan}]), params)
    ratio = float(one["micro_compute_s"][1] / one["micro_compute_s"][0])
    return measured * ratio


#: [issue 17] the lower end of the peak-memory growth Megatron-Bridge's CUDA-graph guide gives for full-iteration graphs
#: ("full-iteration graphs can increase peak memory by 1.5-2x", skills/mbridge-perf-cuda-graphs/SKILL.md): a layout
#: whose modelled peak times this exceeds the GPU gets a warning (the graphs' memory itself is not modelled)
FULL_ITERATION_GRAPH_PEAK_MULT = 1.5


def host_staged_note(busbw_bytes_per_s: float) -> str:
    """[issue 18] What a prediction on the host-staged path (no GPU peer-to-peer: GeForce cards, NCCL_P2P_DISABLE, many
    VMs) assumes, and how to replace it: the bus bandwidth of NCCL's SHM transport differs from host to host by more
    than any other figure of the fabric (``gpusim.params.HOST_STAGED_SHM_ALL_REDUCE``)."""
    from gpusim.params import HOST_STAGED_SHM_ALL_REDUCE

    lo = min(m.busbw_gbyte_per_s for m in HOST_STAGED_SHM_ALL_REDUCE)
    hi = max(m.busbw_gbyte_per_s for m in HOST_STAGED_SHM_ALL_REDUCE)
    return (f"gradients are staged through host memory (no GPU peer-to-peer), whose all-reduce bus bandwidth differs "
            f"from host to host: {lo:.3g} to {hi:.3g} GB/s in {len(HOST_STAGED_SHM_ALL_REDUCE)} published NCCL SHM "
            f"sweeps; this prediction takes {units.format_rate_bytes(busbw_bytes_per_s)} (their median share of the "
            f"PCIe link, "
            f"or your calibration's): measure this host's with `gpusim calibrate` (or nccl-tests all_reduce_perf "
            f"with NCCL_P2P_DISABLE=1) and predict with --calibration")


def _make_result(scn: Scenario, hw: Hardware, wl, out: dict, i: int, base: int, row: dict) -> StepResult:
    r = row_result(out, i)
    b1 = row_result(out, base)
    thr = float(r["throughput_samples_per_s"])
    thr1 = float(b1["throughput_samples_per_s"])
    speedup = thr / thr1
    tokens = float(wl.tokens_per_sample) if getattr(wl, "sample_unit", "image") == "sequence" else None
    st = scn.strategy
    llm = bool(r.get("llm", False)) or st.is_llm
    breakdown = {k: float(r["comm_exposed_s" if k == "dp_comm_exposed_s" else k])
                 for k in (LLM_BREAKDOWN_KEYS if llm else BREAKDOWN_KEYS)}
    notes = hw.assumptions
    if hw.n_gpus > 1 and not bool(b1["fits_in_memory"]):
        if llm:  # [issue 17] as the layout search (plan, sweep) says it: no one-GPU reference, no efficiency
            speedup = math.nan
            notes += (f"scaling efficiency n/a: one GPU cannot hold the model at this micro-batch "
                      f"({row_result(out, base)['memory_per_gpu_bytes'] / units.GIB:.0f} GiB of "
                      f"{hw.gpu.memory_bytes / units.GIB:.0f} GiB), so there is no one-GPU reference",)
        else:
            notes += ("the one-GPU reference of speedup and efficiency does not fit in one GPU's memory: it is the "
                      "modelled time of that GPU as if it did",)
    if st.attention in ("flash2", "triton") and not st.model_copy(update={"attention": None}).is_llm:
        # [issue 17] the kernel's rate lives on the per-GEMM transformer path; the default (flash) of the same strategy
        # is timed on the aggregate roofline path, so compare kernels on one path
        notes += (f"attention {st.attention} times the model on the per-GEMM transformer path (gpusim.model.llm), "
                  f"the fused default on the aggregate roofline path; to compare kernels on one path, predict "
                  f"--attention flash with --recompute none",)
    if "attn_tile_frac" in row:  # [issue 17] say how much of the attention a window (or chunks) saves
        spec = transformer_of(wl)
        kind = "chunked attention (chunks of" if spec.attention_chunked else "sliding-window attention (a window of"
        notes += (f"{kind} {spec.attention_window} tokens) on {spec.n_window_attn_layers} of "
                  f"{spec.n_attn_layers} attention layers: the fused attention kernels visit "
                  f"{float(row['attn_tile_frac']):.0%} of the tiles a causal mask over {scn.seq_len or spec.seq_len} "
                  f"tokens would",)
    if st.cuda_graph_scope:  # [issue 17] what the graphs change, and what is not modelled (gpusim.model.graphs)
        notes += (f"CUDA graphs over {' '.join(st.cuda_graph_scope)}: each captured part of a layer costs the CPU one "
                  f"graph replay instead of its kernel launches"
                  + ("; the MoE dispatcher needs no host sync (static expert buffers, as Megatron's graph recipes "
                     "set them)" if {"moe", "full_iteration"} & set(st.cuda_graph_scope) else "")
                  + "; the graphs' static buffers and memory pool are not counted in the memory (Megatron-Bridge's "
                    "CUDA-graph guide: Transformer Engine's scoped graphs add a few GB, full-iteration graphs can "
                    "raise the peak 1.5-2x; keep --memory-headroom for them)",)
        need = float(r["memory_per_gpu_bytes"]) * FULL_ITERATION_GRAPH_PEAK_MULT
        if "full_iteration" in st.cuda_graph_scope and bool(r["fits_in_memory"]) and need > hw.gpu.memory_bytes:
            notes += (f"full-iteration CUDA graphs at the guide's lower figure (x{FULL_ITERATION_GRAPH_PEAK_MULT:g} "
                      f"the peak) would need {need / units.GIB:.0f} GiB of {hw.gpu.memory_bytes / units.GIB:.0f} GiB: "
                      f"this layout may not fit with them; per-layer scopes (--cuda-graph-scope attn mlp, or attn "
                      f"moe_router moe_preprocess) hold far less",)
    if hw.n_gpus > 1 and path_name(row["_intra_path"]) == "host-staged":
        notes += (host_staged_note(float(row["intra_busbw_bytes_per_s"])),)
    if speedup > hw.n_gpus * (1.0 + 1e-9):
        notes += (f"superlinear scaling ({speedup / hw.n_gpus:.0%} efficiency): {st.kind} shards the optimizer step "
                  f"(and memory) over the GPUs, which one GPU alone must do in full (ZeRO, SC'20, reports the same)",)
    return StepResult(
        step_s=float(r["step_s"]), throughput_samples_per_s=thr,
        throughput_per_gpu_samples_per_s=float(r["throughput_per_gpu_samples_per_s"]),
        speedup=speedup, scaling_efficiency_frac=speedup / hw.n_gpus, mfu_frac=float(r["mfu_frac"]),
        gpu_util_frac=float(r["gpu_util_frac"]), memory_per_gpu_bytes=float(r["memory_per_gpu_bytes"]),
        memory_capacity_bytes=hw.gpu.memory_bytes, fits_in_memory=bool(r["fits_in_memory"]),
        memory_headroom_bytes=float(r["memory_headroom_bytes"]),  # [issue 17]
        max_micro_batch=int(r["max_micro_batch"]), bottleneck=BOTTLENECKS[int(r["bottleneck_code"])],
        breakdown_s=breakdown,
        detail={k: float(r[k]) for k in ("comm_total_s", "comm_hidden_s", "comm_interference_s", "micro_compute_s",
                                         "fwd_s", "bwd_s", "gpu_busy_s", "cpu_dispatch_s", "roofline_s",
                                         "loader_supply_samples_per_s", "h2d_s", "grad_bytes", "allreduce_s")},
        memory_breakdown_bytes={k.removeprefix("memory_").removesuffix("_bytes"): float(r[k]) for k in
                                ("memory_weights_bytes", "memory_gradients_bytes", "memory_optimizer_bytes",
                                 "memory_activations_bytes", "memory_buffers_bytes", "memory_overhead_bytes")},
        single_gpu_step_s=float(b1["step_s"]), single_gpu_throughput_samples_per_s=thr1,
        global_batch=int(round(float(row["micro_batch"]) * float(row["accum"]) * float(r["dp_degree"]))),
        n_gpus=hw.n_gpus, n_nodes=hw.nodes,
        intra_path=path_name(row["_intra_path"]), inter_path=path_name(row["_inter_path"]),
        assumptions=notes,
        scenario={**scn.model_dump(mode="json", exclude={"workload"}), "workload_name": wl.name,
                  "gpu_resolved": hw.gpu.id, "node_resolved": hw.node.id if hw.node else None,
                  "intra_link_resolved": hw.intra_link.id if hw.intra_link else None,
                  "intra_topology_resolved": hw.topology, "p2p_resolved": hw.p2p,
                  "inter_link_resolved": hw.inter_link.id if hw.inter_link else None,
                  "nics_per_node_resolved": hw.nics_per_node},
        **_llm_views(r, row, hw, tokens, thr),
    )


def _llm_views(r: dict, row: dict, hw: Hardware, tokens: float | None, thr: float) -> dict:
    """Tokens, model TFLOP/s per GPU, the degrees and memory per stage of a result row."""
    dp = int(round(float(r["dp_degree"])))
    seq = float(row.get("seq_len", 0.0)) or tokens
    tps = thr * seq if seq else None
    out = {"tokens_per_s": tps, "tokens_per_s_per_gpu": tps / hw.n_gpus if tps else None,
           "model_tflop_per_s_per_gpu": units.flop_per_s_to_tflop_per_s(
               float(r["model_flop_per_step"]) / float(r["step_s"]) / hw.n_gpus),
           "parallelism": {"tp": int(row.get("tp", 1)), "pp": int(row.get("pp", 1)), "vp": int(row.get("vp", 1)),
                           "cp": int(row.get("cp", 1)), "ep": int(row.get("ep", 1)), "dp": dp},
           "n_micro_batches": int(row["accum"])}
    if row.get("llm"):
        out["memory_per_stage_bytes"] = {"first": float(r["memory_first_stage_bytes"]),
                                         "last": float(r["memory_last_stage_bytes"])}
        out["parallelism"]["sp"] = bool(row["sp"])
    return out


# ------------------------------------------------------------------------------------------------
# Curves and single collectives
# ------------------------------------------------------------------------------------------------

def scaling_curve(scenario: Scenario | dict, gpu_counts=None, *, mode: str = "weak", global_batch: int | None = None,
                  db=None, params: ModelParams | None = None, skipped: list | None = None) -> list[dict]:
    """Throughput, speedup and efficiency over GPU counts, in one vectorised model call.

    ``mode="weak"`` keeps the per-GPU batch; ``"strong"`` keeps the global batch (``global_batch``, default the
    scenario's) and divides it over the GPUs (counts that do not divide it are skipped). Node counts follow
    the scenario's GPUs per node (``gpus // nodes``) when it is split over nodes, else its node template's
    (so 64 H100 SXM fill 8 nodes of 8, not one node of 64). ``skipped``: a list that receives
    ``(gpus, reason)`` for every count left out.
    """
    from gpusim.hwdb import load

    scn = scenario if isinstance(scenario, Scenario) else Scenario.create(**scenario)
    db = db or load()
    params = params or DEFAULT_PARAMS
    per_node = scn.gpus // scn.nodes
    if scn.nodes == 1:  # not split by the user: as many per node as the node template holds
        try:
            one = resolve_hardware(scn.with_changes(gpus=1, nodes=1), db)
            if one.node is not None:
                per_node = one.node.gpus_per_node
        except (GpusimError, ValidationError):
            pass
    skipped = [] if skipped is None else skipped
    if gpu_counts is None:
        top = max(scn.gpus, 8)
        gpu_counts = sorted({1, 2, 4, 8, *(2**i for i in range(4, 20) if 2**i <= top), scn.gpus})
    st = scn.strategy
    gb = global_batch or st.per_gpu_batch * st.accum * scn.gpus
    wl = resolve_workload(scn)
    rows, meta = [], []
    for n in gpu_counts:
        nodes = max(1, math.ceil(n / per_node))
        if n % nodes:
            skipped.append((n, f"{n} GPUs do not split evenly over {nodes} nodes of up to {per_node}"))
            continue
        changes: dict[str, Any] = {"gpus": n, "nodes": nodes}
        if mode == "strong":
            if gb % (n * st.accum):
                skipped.append((n, f"the global batch {gb} does not divide over {n} GPUs x {st.accum} accumulation"))
                continue
            changes["per_gpu_batch"] = gb // (n * st.accum)
        if scn.strategy.kind == "dp" and nodes > 1:
            skipped.append((n, "DataParallel runs on one node"))
            continue
        try:
            v = scn.with_changes(**changes)
            hw = resolve_hardware(v, db)
            rows.append(scenario_row(v, hw, wl, params))
        except ValidationError as e:
            skipped.append((n, format_validation_error(e).removeprefix("invalid scenario: ")))
            continue
        except GpusimError as e:
            skipped.append((n, str(e)))
            continue
        meta.append((n, nodes, v.strategy.per_gpu_batch))
    if not rows:
        why = "; ".join(f"{n}: {r}" for n, r in skipped[:3])
        raise ScenarioError(f"no GPU count in the curve is possible for this scenario ({why})")
    if scn.baseline_throughput:
        single = [r for r, m in zip(rows, meta) if m[0] == 1]
        if single:
            tmp = [single[0], single[0]]
            _apply_baseline(tmp, scn.with_changes(per_gpu_batch=meta[0][2]) if mode == "strong" else scn, params)
            for r in rows:
                r["compute_override_s"] = _rescaled_override(tmp, r, params)
    out = evaluate(stack_rows(rows), params)
    thr = out["throughput_samples_per_s"]
    one = [i for i, m in enumerate(meta) if m[0] == 1]
    ref = thr[one[0]] if one else thr[0] / meta[0][0]
    result = []
    for i, (n, nodes, b) in enumerate(meta):
        result.append({"n_gpus": n, "n_nodes": nodes, "per_gpu_batch": b, "global_batch": b * st.accum * n,
                       "step_s": float(out["step_s"][i]), "throughput_samples_per_s": float(thr[i]),
                       "speedup": float(thr[i] / ref), "scaling_efficiency_frac": float(thr[i] / ref / n),
                       "fits_in_memory": bool(out["fits_in_memory"][i]),
                       "bottleneck": BOTTLENECKS[int(out["bottleneck_code"][i])],
                       **{k: float(out[k][i]) for k in BREAKDOWN_KEYS}})
    return result


def collective(collective_name: str, size_bytes, *, gpu: str | None = None, node: str | None = None, gpus: int = 8,
               nodes: int = 1, intra: str | None = None, inter: str | None = None, intra_topology: str | None = None,
               p2p: bool | None = None, nics_per_node: int | None = None, oversubscription: float = 1.0,
               algorithm: str = "auto", protocol: str = "auto", db=None,
               params: ModelParams | None = None, gpus_per_thread: int = 1,
               host_cpu: str | None = None) -> list[dict]:
    """Predicted time and bandwidths of one collective for each size (the ``gpusim comm`` answer).

    ``host_cpu``: ``"intel"``, ``"amd"`` or ``"other"`` in place of the vendor of the node's ``cpu_model`` (NCCL's
    tuner reads it across nodes: :mod:`gpusim.model.comm`, [issue 18]); None keeps the node's.

    ``gpus_per_thread``: GPUs one CPU thread launches the collective on (nccl-tests ``-g``; 1 for a process or a
    thread per GPU): the time is at least that many launches (:func:`gpusim.model.comm.thread_bound_time_s`)."""
    from gpusim.hwdb import load

    if collective_name not in C.COLLECTIVES:
        raise ScenarioError(f"unknown collective {collective_name!r}; one of {', '.join(C.COLLECTIVES)}")
    if algorithm != "auto" and (algorithm not in C.ALGORITHMS or algorithm == "none"):
        raise ScenarioError(f"unknown algorithm {algorithm!r}; one of auto, "
                            f"{', '.join(a for a in C.ALGORITHMS if a != 'none')}")
    if protocol != "auto" and protocol not in C.PROTOCOLS:
        raise ScenarioError(f"unknown protocol {protocol!r}; one of auto, {', '.join(C.PROTOCOLS)}")
    if host_cpu is not None and (not isinstance(host_cpu, str) or host_cpu not in C.HOST_CPUS):
        raise ScenarioError(f"unknown host CPU {host_cpu!r}; one of {', '.join(C.HOST_CPUS)} (NCCL's tuner tells only "
                            "Intel, AMD and other hosts apart; Arm hosts such as Grace are 'other')")
    from gpusim.checks import bound_of

    for name, v in (("gpus", gpus), ("nodes", nodes), ("nics_per_node", nics_per_node),
                    ("oversubscription", oversubscription)):  # the fields' ranges (model_construct skips them)
        if v is not None:
            try:
                bound_of(Scenario.model_fields[name]).check(v, f"--{name.replace('_', '-')}")
            except ValueError as e:
                raise ScenarioError(str(e)) from None
    gpu, node = gpu or None, node or None  # an empty id is no id
    db = db or load()
    params = params or DEFAULT_PARAMS
    try:  # a hardware-only scenario: no workload needed, so the full validator is bypassed
        scn = Scenario.model_construct(gpu=gpu, node=node, gpus=gpus, nodes=nodes, intra=intra, inter=inter,
                                       intra_topology=intra_topology, nics_per_node=nics_per_node,
                                       oversubscription=oversubscription, cpu_cores_per_gpu=None,
                                       storage_gbyte_per_s=None, p2p=p2p, strategy=Strategy())
        if gpu is None and node is None:
            raise ScenarioError("give a GPU (--gpu) or a node template (--node)")
        if gpus % nodes:
            raise ScenarioError(f"{gpus} GPUs cannot be split evenly over {nodes} nodes")
        hw = resolve_hardware(scn, db)
    except ValidationError as e:
        raise ScenarioError(format_validation_error(e)) from None
    g_node = hw.n_gpus // max(1, hw.nodes)
    if isinstance(gpus_per_thread, bool) or not isinstance(gpus_per_thread, (int, np.integer)) \
            or not 1 <= gpus_per_thread <= max(1, g_node):
        raise ScenarioError(f"--gpus-per-thread {gpus_per_thread!r}: a thread drives 1 to {g_node} GPUs of one node "
                            f"({hw.n_gpus} GPUs on {hw.nodes} node(s)); nccl-tests' -g value, 1 for one process per GPU")
    row = hardware_row(hw, params)
    if host_cpu is not None:
        row["host_cpu"] = float(C.HOST_CPUS[host_cpu])
    sizes = np.atleast_1d(np.asarray(size_bytes, dtype=np.float64))
    if np.any(sizes <= 0) or not np.all(np.isfinite(sizes)):
        raise ScenarioError("message sizes must be positive bytes")
    code = C.COLLECTIVES[collective_name]
    forced = -1 if algorithm == "auto" else C.ALGORITHMS[algorithm]
    comm_nodes = 1.0 if hw.in_nvlink_domain else float(hw.nodes)  # NCCL's MNNVL: one NVLink domain = one node
    t, algo, proto = C.collective_choice(
        code, sizes, float(hw.n_gpus), comm_nodes, row["intra_busbw_bytes_per_s"], row["intra_hop_s"],
        row["inter_busbw_bytes_per_s"], row["inter_hop_s"], row["nvls"], base_latency_s=params.coll_base_latency_s,
        nvls_gain_frac=params.nvls_gain_frac, nvls_latency_s=params.nvls_latency_s,
        tree_busbw_frac=params.tree_busbw_frac, algorithm=forced,
        protocol=-1 if protocol == "auto" else C.PROTOCOLS[protocol],
        # NCCL runs CollNet (SHARP) only when asked (NCCL_COLLNET_ENABLE=1 with the SHARP plugin; off by
        # default), so the tuner's automatic choice leaves it out and --algorithm collnet forces it
        sharp=row["_sharp"] and algorithm == "collnet",
        ll_max_busbw_bytes_per_s=row["_ll_max"], ll128=row["ll128"], tuning=C.tuning_from_params(params),
        host_cpu=int(row["host_cpu"]))
    t = C.thread_bound_time_s(t, gpus_per_thread, params.nccl_thread_launch_s)
    if not np.all(np.isfinite(t)):
        raise ScenarioError(f"{collective_name} cannot run with algorithm {algorithm!r} on this fabric "
                            f"({hw.n_gpus} GPUs on {hw.nodes} node(s)); use --algorithm auto")
    algbw = C.algbw_bytes_per_s(sizes, t)
    busbw = algbw * C.bus_factor(code, float(hw.n_gpus))
    shape = sizes.shape
    return [{"bytes": float(s), "time_s": float(ti), "algbw_bytes_per_s": float(a), "busbw_bytes_per_s": float(bb),
             "algorithm": C.ALGO_NAMES[int(al)], "protocol": C.PROTO_NAMES[int(pr)], "n_ranks": hw.n_gpus,
             "n_nodes": hw.nodes, "intra_path": path_name(row["_intra_path"]),
             "inter_path": path_name(row["_inter_path"]),
             "host_cpu": C.HOST_CPU_NAMES[int(row["host_cpu"])]}
            for s, ti, a, bb, al, pr in zip(sizes, np.broadcast_to(t, shape), np.broadcast_to(algbw, shape),
                                            np.broadcast_to(busbw, shape), np.broadcast_to(algo, shape),
                                            np.broadcast_to(proto, shape))]
