"""``gpusim sweep``: every LLM layout (tp, cp, pp, vp, dp, micro-batch, recomputation) of one scenario, searched in
one model call (gpusim.search); the degrees given on the command line are pinned, the others searched."""

from __future__ import annotations

ORDER = 25


def register(sub) -> None:
    from gpusim.checks import Bound
    from gpusim.commands._scenario import add_layout_args, add_scenario_args

    p = sub.add_parser("sweep", help="search every LLM layout (tp, cp, pp, vp, micro-batch, recomputation) of a job",
                       description="Enumerate every valid layout of an LLM on the given GPUs at a fixed global "
                                   "batch (--global-batch; default the largest power of two within 16M tokens), "
                                   "evaluate them all at once, and name the best and why it beats the next. "
                                   "--tp/--pp/--vp/--cp/--micro-batch/--recompute pin a degree.")
    add_scenario_args(p, batch_required=False)
    add_layout_args(p)
    p.add_argument("--top", type=Bound(1, 100_000, integer=True), default=15, help="feasible layouts shown (default 15)")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="every layout (feasible first) as JSON")
    out.add_argument("--csv", action="store_true", help="every layout as CSV")
    p.set_defaults(func=cmd_sweep, result=lambda a: sweep_result(a)[0], strategy="zero1")  # Megatron's distributed optimizer, as its LLM recipes


def sweep_result(args):
    """The answer of ``gpusim sweep`` for parsed flags (also :func:`gpusim.sweep`): a SweepResult."""
    import sys
    import time

    from gpusim.commands._scenario import resolve
    from gpusim.errors import ScenarioError
    from gpusim.results import SweepResult
    from gpusim.rows import resolve_hardware, resolve_workload
    from gpusim.rules import DEFAULT_MAX_TOKENS_PER_BATCH, default_global_batch, nvlink_domain_gpus, transformer_of
    from gpusim.search import Pins, explain_best, search_layouts, search_table, versus_defaults

    chosen_gb = not args.global_batch
    from gpusim.commands._scenario import MOE_OPTIONS

    searched = ("tp", "pp", "vp", "cp", "ep", "recompute", *MOE_OPTIONS)  # [issue 12] MoE options ride on the pins
    pinned = {k: getattr(args, k, None) for k in searched}
    pins = Pins(micro_batch=args.per_gpu_batch, **pinned)
    # the scenario itself is built at tp = pp = cp = 1 (the search replaces the degrees)
    for k in searched:
        setattr(args, k, None)
    if args.per_gpu_batch is None:
        args.per_gpu_batch = 1
    args.strategy = "zero1" if args.strategy not in ("ddp", "zero1") else args.strategy
    scn, db, params, cal = resolve(args)
    if chosen_gb:  # the largest power of two within the plan's default limit (16M tokens, Llama 3 405B's batch)
        if transformer_of(resolve_workload(scn)) is None:  # say it before choosing a batch for it
            raise ScenarioError(f"the layout search needs a transformer; {scn.model or 'this workload'!r} is not one")
        args.global_batch = default_global_batch(DEFAULT_MAX_TOKENS_PER_BATCH // int(resolve_workload(scn).tokens_per_sample))
        if not getattr(args, "quiet", False):
            print(f"global batch {args.global_batch} sequences (the largest power of two within "
                  f"{DEFAULT_MAX_TOKENS_PER_BATCH / 2**20:.0f}M tokens; set --global-batch for your recipe's)",
                  file=sys.stderr)
    t0 = time.perf_counter()
    res = search_layouts(scn, db=db, params=params, pins=pins, global_batch=args.global_batch)
    elapsed = time.perf_counter() - t0
    hw = resolve_hardware(scn, db)
    domain = nvlink_domain_gpus(hw)
    rows = search_table(res)
    best = rows[0] if res["best"] is not None else None
    record = search = None
    from gpusim import track_record

    if best is not None:  # the best layout's kind: an LLM layout, MoE where the model has experts
        key = track_record.key_for(llm=True, moe=track_record.is_moe(resolve_workload(scn), int(best["ep"])),
                                   precision=scn.strategy.precision, gpu=hw.gpu.id, n_gpus=scn.gpus,
                                   kind=scn.strategy.kind, split=True,
                                   hybrid=track_record.is_hybrid(resolve_workload(scn)))
        band = track_record.load().get(key)
        record = track_record.record_for(band, key, calibrated=cal is not None, **(
            {} if band is None else {"throughput_range_tokens_per_s": band.speed_range(float(best["tokens_per_s"]))}))
        skey = track_record.search_band_key(resolve_workload(scn), int(best["ep"]))
        if skey is not None:
            # [issue 17] what the search's best promised on the tuned recipes of the kind (dense or MoE transformers)
            sband = track_record.load().get(skey)
            search = track_record.record_for(sband, skey, calibrated=cal is not None, **(
                {} if sband is None else {"mfu_range_frac": sband.speed_range(float(best["mfu_frac"]))}))
    moe_pins = {k: pinned[k] for k in MOE_OPTIONS if pinned[k] is not None}
    memory = None if best is None else best_memory_record(scn, best, int(args.global_batch), db, params, moe_pins)
    # [stop 56] where the record's top passes the GPU's memory: the fastest layout whose top still fits
    fit = track_record.memory_record_fit(res, memory)
    advice: list = []
    if best is not None:  # [issue 17] what FP8 and the MoE software settings would add to the best layout
        advice = software_advice(scn, best, int(args.global_batch), db, params, moe_pins)
    out = SweepResult(best=best, explanation=explain_best(res, domain),
                      layouts=rows, n_layouts=int(res["n"]), n_feasible=int(res["feasible"].sum()), elapsed_s=elapsed,
                      global_batch=int(args.global_batch),
                      versus_defaults=versus_defaults(res) if res["best"] is not None else "",  # [issue 17]
                      track_record=record, search_record=search, software_advice=tuple(advice),
                      memory_record=memory, memory_record_fit=fit)
    return out, scn


def best_memory_record(scn, best: dict, global_batch: int, db, params, moe_pins: dict) -> dict | None:
    """[stop 55] The best layout's ``memory_record`` (:func:`gpusim.track_record.memory_record`): its memory
    against the published runs' peaks, from the layout's own prediction (the search's rows carry the total, not the
    allocator's share the band is measured on). None where the scenario cannot take the layout back (as
    :func:`software_advice`)."""
    from gpusim import track_record
    from gpusim.errors import GpusimError
    from gpusim.search import layout_scenario
    from gpusim.simulation import simulate

    try:
        res = simulate(layout_scenario(scn, best, global_batch=global_batch, **moe_pins), db=db, params=params,
                       recommend=False)
    except (GpusimError, ValueError):  # (pydantic's ValidationError is a ValueError)
        return None
    return track_record.memory_record_for(res, params)


def software_advice(scn, best: dict, global_batch: int, db, params, moe_pins: dict) -> list[dict]:
    """[issue 17] ``gpusim predict``'s advice for the search's best layout on the settings the search ran as given
    (:func:`gpusim.simulation.software_advice`: FP8 training where the GPU has FP8 tensor cores; Megatron-Core's MoE
    software settings for an MoE model), each with its gain; empty where it has nothing to add. The search runs the
    precision and MoE settings the scenario gives (BF16 and Megatron-Core's defaults unless given), so its best
    layout is the best under them; this says what the others would add to it. ``moe_pins``: the MoE options the
    user gave the search (they ride on its pins, not on ``scn``). A layout the scenario cannot take back (a rule
    :func:`gpusim.simulation.simulate` holds and the search does not) gets no advice rather than failing the search's
    answer."""
    from gpusim.errors import GpusimError
    from gpusim.search import layout_scenario
    from gpusim.simulation import software_advice as advice_for

    try:
        return advice_for(layout_scenario(scn, best, global_batch=global_batch, **moe_pins), db=db, params=params)
    except (GpusimError, ValueError):  # (pydantic's ValidationError is a ValueError)
        return []


def cmd_sweep(args) -> int:
    import sys

    from gpusim import units
    from gpusim.commands._common import print_json, print_table

    out, scn = sweep_result(args)
    rows = out.layouts
    if args.json:
        print_json(out.to_dict())
        return 0
    if args.csv:
        import csv

        w = csv.DictWriter(sys.stdout, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
        return 0
    top = rows[: min(args.top, out.n_feasible)]
    if top:
        print_table([[r["tp"], r["cp"], r["pp"], r["vp"], r["ep"], r["dp"], r["micro_batch"], r["recompute"],
                      f"{r['tokens_per_s'] / scn.gpus:,.0f}", f"{r['mfu_frac']:.1%}", f"{r['bubble_frac']:.1%}",
                      f"{r['memory_per_gpu_bytes'] / units.GIB:.1f}"] for r in top],
                    ["tp", "cp", "pp", "vp", "ep", "dp", "mb", "recompute", "tokens/s/GPU", "MFU", "bubble", "GiB/GPU"],
                    title=f"best layouts of {scn.model or 'the workload'} on {scn.gpus} GPUs, global batch "
                          f"{args.global_batch}")
    else:  # nothing feasible is an answer (exit 0), not an error: say so instead of an empty table
        print(f"no feasible layout of {scn.model or 'the workload'} on {scn.gpus} GPUs at global batch "
              f"{args.global_batch}")
    counts: dict[str, int] = {}
    for r in rows:
        if not r["feasible"]:
            key = r["reason"].split(" (")[0]
            counts[key] = counts.get(key, 0) + 1
    print(f"{out.n_layouts} layouts, {out.n_feasible} feasible, searched in {out.elapsed_s * 1e3:.0f} ms"
          + ("; infeasible: " + "; ".join(f"{v} {k}" for k, v in sorted(counts.items(), key=lambda kv: -kv[1]))
             if counts else ""))
    print(f"best: {out.explanation}")
    if out.versus_defaults:  # [issue 17]
        print(out.versus_defaults)
    if out.software_advice:  # [issue 17] what FP8 and the MoE software settings would add to the best layout
        from gpusim.simulation import SOFTWARE_ADVICE_LABELS

        for a in out.software_advice:
            print(f"{SOFTWARE_ADVICE_LABELS[a['id']]} for the best layout: {a['message']}")
    if out.best is not None:
        from gpusim.commands._common import print_track_record, range_text

        print_track_record(out.track_record, here=range_text(
            out.track_record, "throughput_range_tokens_per_s",
            lambda lo, hi: f"{units.format_count(lo / scn.gpus)} to {units.format_count(hi / scn.gpus)} tokens/s per "
                           f"GPU for the best layout"))
        if out.search_record:  # [issue 17] the search's own record: its best against what tuned recipes reached
            from gpusim.track_record import report_line

            here = range_text(out.search_record, "mfu_range_frac",
                              lambda lo, hi: f"{lo:.1%} to {hi:.1%} MFU for the best layout")
            print(f"search record: {report_line(out.search_record, here=here)}")
        from gpusim.commands._common import print_memory_record

        print_memory_record(out.memory_record, "the best layout", fit=out.memory_record_fit)
    return 0
