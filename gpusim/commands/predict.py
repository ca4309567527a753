"""``gpusim predict`` (one scenario, explained) and ``gpusim scale`` (the scaling curve)."""

from __future__ import annotations

ORDER = 20


def register(sub) -> None:
    from gpusim.checks import Bound
    from gpusim.commands._scenario import scenario_type, add_scenario_args

    p = sub.add_parser("predict", help="predict one training step and explain what holds it back",
                       description="Predict the step time, throughput, scaling efficiency, MFU and memory of one "
                                   "data-parallel training scenario, with its bottleneck and recommendations.")
    add_scenario_args(p)
    from gpusim.commands._scenario import add_layout_args

    add_layout_args(p)
    p.add_argument("--measured-throughput", type=scenario_type("baseline_throughput", "samples/s"), metavar="SAMPLES_PER_S",
                   help="your measured throughput of this multi-GPU job (all GPUs): gpusim says how much of the gap "
                        "to linear scaling its model explains, and what would explain the rest")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_predict, result=lambda a: predict_result(a)[0])

    s = sub.add_parser("scale", help="throughput, speedup and efficiency over GPU counts",
                       description="The scaling curve of a scenario: weak scaling keeps the per-GPU batch, strong "
                                   "scaling keeps the global batch.")
    add_scenario_args(s)
    s.add_argument("--mode", choices=("weak", "strong"), default="weak")
    s.add_argument("--counts", help="comma-separated GPU counts (default 1, 2, 4, 8 ... up to --gpus)")
    s.add_argument("--global-batch", type=Bound(1, 1e9, integer=True),
                   help="strong scaling: the fixed global batch (default per-GPU x GPUs)")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_scale, result=scale_result)


def _interval(cal, scn, db, params):
    if cal is None or not hasattr(cal, "interval"):
        return None
    return cal.interval(scn, db)


def predict_result(args):
    """The answer of ``gpusim predict`` for parsed flags (also :func:`gpusim.predict`): a PredictResult."""
    from gpusim.commands._scenario import resolve
    from gpusim.results import PredictResult
    from gpusim.simulation import simulate

    scn, db, params, cal = resolve(args)
    res = simulate(scn, db=db, params=params)
    interval = _interval(cal, scn, db, params)
    gap = None
    if args.measured_throughput is not None:
        from gpusim.measurement import explain_measurement

        gap = explain_measurement(scn, res, args.measured_throughput, db=db, params=params)
    from gpusim import track_record
    from gpusim.rows import resolve_workload

    wl = resolve_workload(scn)
    band = track_record.band_for(res, wl)
    record = track_record.record_for(  # the band, and where 80% of its runs landed carried to this prediction
        band, track_record.band_key(res, wl), calibrated=cal is not None,
        **({} if band is None else {"throughput_range_samples_per_s": band.speed_range(res.throughput_samples_per_s),
                                    "step_range_s": band.time_range(res.step_s)}))
    memory = track_record.memory_record_for(res, params)  # [stop 55] an LLM layout's memory against published peaks
    return PredictResult(res, interval=interval or None, measured_vs_predicted=gap or None,
                         calibration_file=str(args.calibration) if args.calibration else None,
                         track_record=record, memory_record=memory), cal


def cmd_predict(args) -> int:
    from gpusim.commands._common import print_json, print_memory_record, print_track_record, range_text

    out, cal = predict_result(args)
    if args.json:
        print_json(out.to_dict())
        return 0
    print_report(out.step, out.interval)
    from gpusim import units

    tput = range_text(out.track_record, "throughput_range_samples_per_s",
                      lambda lo, hi: f"{units.format_count(lo)} to {units.format_count(hi)} samples/s")
    step = range_text(out.track_record, "step_range_s",
                      lambda lo, hi: f"a step of {units.format_duration(lo)} to {units.format_duration(hi)}")
    print_track_record(out.track_record, here=f"{tput}, {step}" if tput and step else None, anchor_hint=True)
    # [stop 56] a single layout's prediction runs no search: say which command names one that fits
    print_memory_record(out.memory_record, layouts="a layout with more free memory (gpusim sweep with the same model, "
                        "GPUs and global batch names the fastest whose top of that range fits)")
    for note in getattr(cal, "applied_notes", None) or []:
        print(f"calibration: {note}")
    if out.measured_vs_predicted:
        print("measured vs predicted:")
        for line in out.measured_vs_predicted["explanation"]:
            print(f"  {line}")
    return 0


def print_report(res, interval=None) -> None:
    from rich.console import Console
    from rich.table import Table

    from gpusim import units

    con = Console(width=max(110, Console().width), highlight=False)
    sc = res.scenario
    st = sc["strategy"]
    con.print(f"[bold]{sc['workload_name']}[/] on {res.n_gpus} x {sc['gpu_resolved']}"
              f"{f' ({res.n_nodes} nodes)' if res.n_nodes > 1 else ''}, {st['kind']}, {st['precision']}, "
              f"per-GPU batch {st['per_gpu_batch']}" + (f" x {st['accum']} accumulation" if st["accum"] > 1 else "")
              + f", global batch {res.global_batch}")
    fabric = sc.get("intra_link_resolved") or "-"
    con.print(f"fabric: {fabric} ({sc['intra_topology_resolved']}, path class {res.intra_path or '-'})"
              + (f"; network {sc['inter_link_resolved']} x {sc['nics_per_node_resolved']} per node"
                 if sc.get("inter_link_resolved") else ""))
    t = Table(show_header=False, box=None, pad_edge=False)
    t.add_column(style="bold")
    t.add_column()
    tput = f"{res.throughput_samples_per_s:,.4g} samples/s ({res.throughput_per_gpu_samples_per_s:,.4g} per GPU)"
    if res.tokens_per_s:
        tput += f" = {res.tokens_per_s:,.4g} tokens/s"
    no_interval = None
    if interval:
        lo, hi = interval["throughput_samples_per_s"]
        # [issue 20] a calibration that does not apply here (a CPU one used with --gpu h100-sxm) has an interval
        # of zero width: say why there is none instead of printing "[90% interval X .. X]"
        if interval.get("applies", True) and hi > lo * (1 + 1e-9):
            tput += f"  \\[{interval.get('level', 0.9):.0%} interval {lo:,.4g} .. {hi:,.4g}]"
        else:
            no_interval = interval.get("note") or "the calibration's fitted parameters do not move this prediction"
    t.add_row("step", units.format_duration(res.step_s))
    t.add_row("throughput", tput)
    if no_interval:
        t.add_row("interval", f"none: {no_interval}")
    elif interval and interval.get("note"):  # an interval with a caveat (a parameter the records barely determine)
        t.add_row("interval", interval["note"])
    if res.speedup == res.speedup:
        t.add_row("speedup", f"{res.speedup:.3g}x over one GPU ({res.single_gpu_throughput_samples_per_s:,.4g} "
                             f"samples/s); scaling efficiency {res.scaling_efficiency_frac:.0%}")
    else:  # [issue 17] an LLM layout whose one-GPU form does not fit: no reference (as plan and sweep say it)
        t.add_row("speedup", "n/a (one GPU cannot hold the model: no one-GPU reference); scaling efficiency n/a")
    t.add_row("MFU / GPU busy", f"{res.mfu_frac:.1%} / {res.gpu_util_frac:.0%}")
    fits = "fits" if res.fits_in_memory else "[red]DOES NOT FIT[/]"
    held = (f", {units.format_bytes(res.memory_headroom_bytes)} of which must stay free (--memory-headroom)"
            if res.memory_headroom_bytes > 0 else "")  # [issue 17]
    t.add_row("memory per GPU", f"{units.format_bytes(res.memory_per_gpu_bytes)} of "
                                f"{units.format_bytes(res.memory_capacity_bytes)}{held}: {fits} (largest micro-batch "
                                f"that fits: {res.max_micro_batch})")
    t.add_row("bottleneck", f"[bold]{res.bottleneck}[/]")
    if res.memory_per_stage_bytes:  # an LLM layout
        par = res.parallelism
        t.add_row("layout", f"tp {par['tp']} x pp {par['pp']} (vp {par['vp']}, "
                            f"{'interleaved 1F1B' if par['vp'] > 1 else '1F1B'})"
                            + (f" x cp {par['cp']}" if par.get("cp", 1) > 1 else "")  # [issue 12]
                            + f" x dp {par['dp']}" + (f" (ep {par['ep']})" if par.get("ep", 1) > 1 else "")
                            + ", sequence parallelism "
                            f"{'on' if par.get('sp') else 'off'}, {res.n_micro_batches} micro-batches per step")
        t.add_row("tokens", f"{res.tokens_per_s:,.4g} tokens/s ({res.tokens_per_s_per_gpu:,.4g} per GPU); "
                            f"{res.model_tflop_per_s_per_gpu:.4g} model TFLOP/s per GPU")
        t.add_row("memory per stage", ", ".join(f"{k} {units.format_bytes(v)}"
                                                for k, v in res.memory_per_stage_bytes.items()))
    con.print(t)
    con.print("breakdown of one step:")
    width = 50
    for k, v in res.breakdown_s.items():
        share = v / res.step_s
        bar = "█" * int(round(share * width))
        con.print(f"  {k.removesuffix('_s'):<14} {units.format_duration(v):>10}  {share:6.1%} {bar}")
    total_s, hidden_s = comm_summary(res)
    con.print(f"  (communication {units.format_duration(total_s)} in total, "
              f"{units.format_duration(hidden_s)} hidden under the backward pass)")
    from gpusim.diagnose import layer_lines

    for line in layer_lines(getattr(res, "layer_s", None)):  # [issue 17]
        con.print(line)
    if res.recommendations:
        con.print("recommendations:")
        for r in res.recommendations:
            tag = {"high": "[red]![/]", "medium": "[yellow]*[/]", "info": "[blue]i[/]"}[r["severity"]]
            con.print(f" {tag} {r['message']}")
    for a in res.assumptions:
        con.print(f"[dim]assumed: {a}[/]")


def scale_result(args):
    """The answer of ``gpusim scale`` for parsed flags (also :func:`gpusim.scale`): a ScaleResult."""
    from gpusim.commands._scenario import resolve
    from gpusim.errors import ScenarioError
    from gpusim.results import ScaleResult
    from gpusim.simulation import scaling_curve

    scn, db, params, _ = resolve(args)
    counts = None
    if args.counts:
        try:
            counts = sorted({int(x) for x in str(args.counts).split(",") if x.strip()})
        except ValueError:
            raise ScenarioError(f"--counts must be comma-separated integers (got {args.counts!r})") from None
        if not counts or min(counts) < 1:
            raise ScenarioError("--counts must be positive integers")
    skipped: list = []
    rows = scaling_curve(scn, counts, mode=args.mode, global_batch=args.global_batch, db=db, params=params,
                         skipped=skipped)
    return ScaleResult(args.mode, rows, skipped)


def comm_summary(res) -> tuple[float, float]:
    """``(total_s, hidden_s)`` of the communication a breakdown lists: every exposed collective of it (tp, cp, ep,
    pipeline p2p and data parallel) plus the part of the data-parallel gradient exchange hidden under the backward
    pass (the model reports tp/cp/ep/p2p only as exposed time). [issue 20] it used to print only the
    data-parallel total, less than tp_comm_exposed alone for a large tp."""
    d, b = res.detail, res.breakdown_s
    dp_exposed = b.get("dp_comm_exposed_s", b.get("comm_exposed_s", 0.0))
    others = sum(v for k, v in b.items() if k != "dp_comm_exposed_s" and k != "comm_exposed_s"
                 and ("comm" in k or "p2p" in k))
    dp_total = max(float(d["comm_total_s"]), float(dp_exposed))
    return others + dp_total, float(d["comm_hidden_s"])


def cmd_scale(args) -> int:
    from gpusim.commands._common import print_json, print_table

    out = scale_result(args)
    if args.json:
        print_json(out.to_dict())
        return 0
    from gpusim import units

    rows = out.rows
    table = [[r["n_gpus"], r["n_nodes"], r["per_gpu_batch"], r["global_batch"], units.format_duration(r["step_s"]),
              f"{r['throughput_samples_per_s']:,.4g}", f"{r['speedup']:.3g}x", f"{r['scaling_efficiency_frac']:.0%}",
              r["bottleneck"] + ("" if r["fits_in_memory"] else " (does not fit)")] for r in rows]
    print_table(table, ["GPUs", "nodes", "batch/GPU", "global batch", "step", "samples/s", "speedup", "efficiency",
                        "bottleneck"], title=f"{args.mode} scaling: {args.model}", justify=["right"] * 8 + ["left"])
    return 0
