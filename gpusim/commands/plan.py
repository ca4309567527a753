"""``gpusim plan``: what to rent or buy to train a model by a date, and what it costs."""

from __future__ import annotations

ORDER = 30

_EPILOG = """\
examples:
  gpusim plan --model llama2-7b --tokens 1e11 --deadline 72h
  gpusim plan --model llama2-7b --tokens 2T --budget 500000 --purchase --gpu h100-sxm a100-sxm4-80gb
  gpusim plan --model resnet50 --samples 1.28M --epochs 90 --deadline 1d --global-batch 256 --lr 0.1 --json

exit status: 0 with an answer, a recommendation or, when nothing meets the constraints, what came closest and
why (as `gpusim sweep` when no layout is feasible); 2 for bad input.
"""


def _plan(name: str, parse=None):
    """argparse type: the range of plan()'s input ``name`` (gpusim.planning.INPUT_BOUNDS)."""
    from gpusim.checks import FieldBound

    return FieldBound("gpusim.planning:INPUT_BOUNDS", name, parse=parse)


def _gbyte_per_s(text: str) -> float:
    from gpusim import units

    return float(text) * units.GB


def register(sub) -> None:
    import argparse

    from gpusim import units
    from gpusim.checks import Bound
    from gpusim.commands._scenario import (add_graph_args, add_moe_args, cp_comm_choices, scenario_type,
                                           strategy_type)

    p = sub.add_parser(
        "plan", help="time, cost and power to train: every configuration, the Pareto frontier, a recommendation",
        description="Sweep every configuration of the hardware database (node templates, node counts, strategies, "
                    "precisions, micro-batches), turn step times into whole training runs (checkpoints, evaluation, "
                    "failures), price them (cloud GPU-hours, or purchase capital plus energy) and recommend one, with "
                    "a bill of materials, a sensitivity view and learning-rate advice.",
        epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    w = p.add_argument_group("workload and amount of training")
    w.add_argument("--model", required=True, help="catalogue id (`gpusim models`), e.g. llama2-7b, resnet50, or the "
                   "path of a Hugging Face config.json")
    w.add_argument("--seq-len", type=scenario_type("seq_len"), help="sequence length for sequence models")
    from gpusim.commands._scenario import (OPTIMIZER_HELP, add_attention_arg, add_cross_entropy_arg, add_headroom_arg,
                                           add_mtp_arg, optimizer_choices)

    add_attention_arg(w)  # [issue 17]
    add_mtp_arg(w)  # [issue 17] multi-token prediction modules
    add_cross_entropy_arg(w)  # [issue 17] the LLM layouts' loss (a pin of the layout search)
    add_headroom_arg(w)
    amount = w.add_mutually_exclusive_group(required=True)
    amount.add_argument("--tokens", type=_plan("tokens", units.parse_count),
                        help="tokens to train on (sequence models), e.g. 1e11, 300B, 2T")
    amount.add_argument("--samples", type=_plan("samples", units.parse_count),
                        help="samples per epoch, e.g. 1281167 or 1.28M")
    w.add_argument("--epochs", type=_plan("epochs"), default=1.0, help="passes over --samples (or --tokens) (default 1)")
    c = p.add_argument_group("constraints")
    c.add_argument("--deadline", type=_plan("deadline_s", units.parse_duration_s),
                   help="train within this time, e.g. 72h, 14d, 2w")
    c.add_argument("--budget", type=_plan("budget_usd"), help="spend at most this many USD")
    c.add_argument("--gpu", nargs="+", action="extend", metavar="ID", help="candidate GPUs (default: all)")
    c.add_argument("--node", nargs="+", action="extend", metavar="ID", help="candidate node templates / instances")
    c.add_argument("--max-gpus", type=_plan("max_gpus"), help="largest cluster to consider (default 4096 GPUs)")
    c.add_argument("--max-global-batch", type=_plan("max_global_batch"),
                   help="largest global batch your recipe converges with (default: the largest published recipe's: "
                        "16M tokens for sequence models, 8192 images)")
    c.add_argument("--cloud", action="store_true", help="rent (default)")
    c.add_argument("--purchase", action="store_true", help="buy (both flags: compare renting with buying)")
    r = p.add_argument_group("recipe")
    r.add_argument("--global-batch", type=_plan("global_batch"),
                   help="your recipe's global batch: accumulation reaches it, and the "
                                                    "learning-rate advice starts from it")
    r.add_argument("--lr", type=_plan("reference_lr"), help="your recipe's learning rate at --global-batch")
    r.add_argument("--strategy", nargs="+", action="extend", metavar="S",
                   help="strategies to compare (default ddp zero1 zero2 zero3 fsdp-hybrid)")
    r.add_argument("--precision", nargs="+", action="extend", metavar="P",
                   help="precisions (default auto: bf16 mixed precision where the GPU has it): fp32, tf32, amp_fp16, "
                        "amp_bf16, bf16, fp8 (delayed scaling), fp8-cs (current scaling), mxfp8 / fp8-mx, nvfp4 (Blackwell "
                        "FP4 with NVFP4 block scaling)")
    r.add_argument("--no-activation-checkpointing", action="store_true",
                   help="do not consider activation checkpointing")
    r.add_argument("--workers", type=_plan("num_workers"),
                   help="DataLoader workers per GPU (default: the node's cores per GPU)")
    r.add_argument("--optimizer", choices=optimizer_choices(), default="adam", help=OPTIMIZER_HELP)
    pr = p.add_argument_group("prices and energy")
    pr.add_argument("--price-override", action="append", default=[], metavar="ID=USD",
                    help="cloud: USD per GPU-hour for a node or GPU id; purchase: USD per node (node id) or per GPU "
                         "(GPU id). Repeatable")
    pr.add_argument("--pricing", choices=("on-demand", "reserved-1y", "reserved-3y", "spot", "list", "street"),
                    help="preferred price kind where the database has several")
    pr.add_argument("--amortize", action="store_true",
                    help="purchase: rank by the run's share of the capital over --lifetime-years plus energy "
                         "(default: capital plus energy)")
    pr.add_argument("--lifetime-years", type=_plan("lifetime_years"), default=4.0, help="purchase amortisation (default 4)")
    pr.add_argument("--energy", metavar="ID", help="electricity entry of the database (default: `default`)")
    pr.add_argument("--usd-per-kwh", type=_plan("usd_per_kwh"), help="electricity price")
    pr.add_argument("--pue", type=_plan("pue"), help="data-centre PUE")
    a = p.add_argument_group("whole-run accounting")
    a.add_argument("--checkpoint-interval", type=_plan("checkpoint_interval_s", units.parse_duration_s),
                   help="e.g. 2h (default: Young's optimum for each configuration)")
    a.add_argument("--checkpoint-gbyte-per-s", type=_plan("checkpoint_write_bytes_per_s", _gbyte_per_s),
                   help="checkpoint write bandwidth, GB/s, all nodes together")
    a.add_argument("--failure-rate", type=_plan("failure_rate_per_gpu_hour"),
                   help="interruptions per GPU-hour (default 1.97e-5, Llama 3: 419 in 54 days on 16,384 H100)")
    a.add_argument("--restart", type=_plan("restart_s", units.parse_duration_s),
                   help="time to resume after an interruption (default 15min)")
    a.add_argument("--eval-overhead", type=_plan("eval_overhead_frac"),
                   help="evaluation time as a fraction of training (default 0.01)")
    lg = p.add_argument_group("LLM layouts (searched unless pinned)")  # [issue 12]
    for flag, what in (("--tp", "tensor-parallel degree"), ("--pp", "pipeline stages"), ("--vp", "chunks per stage"),
                       ("--cp", "context-parallel degree"), ("--ep", "expert-parallel degree")):
        lg.add_argument(flag, type=strategy_type(flag[2:]), help=f"pin the {what} of the layout search")
    add_moe_args(lg)  # [issue 12]
    add_graph_args(lg)  # [issue 17]
    lg.add_argument("--cp-comm", choices=cp_comm_choices(),
                    help="[issue 17] the context-parallel exchange of the layouts with cp > 1: ring attention "
                         "(default), all-gather, a2a (Ulysses) or a2a+p2p (Ulysses inside an NVLink domain, the ring "
                         "across), as predict's --cp-comm")
    lg.add_argument("--no-layout-search", action="store_true", help="data-parallel strategies only")
    o = p.add_argument_group("output")
    out = o.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="configurations, pareto, recommendation ... as JSON")
    out.add_argument("--csv", action="store_true", help="configurations as CSV")
    o.add_argument("--all", action="store_true",
                   help="with --json/--csv: every configuration evaluated (default: the best per hardware and count)")
    o.add_argument("--top", type=Bound(1, 100_000, integer=True), default=20,
                   help="Pareto rows shown in the table (default 20)")
    o.add_argument("--no-progress", action="store_true", help="no progress bar")
    o.add_argument("--calibration", metavar="FILE", help="calibration file from `gpusim fit`")
    p.set_defaults(func=cmd_plan, result=plan_result)


def _parse_overrides(items) -> dict[str, float]:
    from gpusim.errors import ScenarioError

    out = {}
    for it in items or []:
        key, sep, val = str(it).partition("=")
        try:
            if not sep or not key.strip():
                raise ValueError
            out[key.strip().lower()] = float(val)
        except ValueError:
            raise ScenarioError(f"--price-override takes ID=USD, e.g. aws-p5-48xlarge=4.5 (got {it!r})") from None
    return out


def _calibrated(args, db):
    """(params, db) from --calibration, through gpusim.calibration when this installation has it."""
    from gpusim.errors import CalibrationError

    if not args.calibration:
        return None, db, None
    try:
        from gpusim.calibration import load_calibration
    except ImportError:
        raise CalibrationError("--calibration needs gpusim.calibration, which this installation does not have "
                               "(update gpusim, or plan without --calibration)") from None
    cal = load_calibration(args.calibration)
    gpus = sorted(set(args.gpu or []) | {db.node(n).gpu for n in (args.node or [])})
    if not gpus:
        if not cal.env.matched_gpu:
            raise CalibrationError(f"this calibration measured {cal.env.device_name!r}, which is not a GPU in the "
                                   "database: a plan over database hardware needs --gpu ID to transfer its "
                                   "efficiencies to")
        gpus = [cal.env.matched_gpu]
        args.gpu = gpus  # the calibration speaks for the GPU model it measured
    if len(gpus) > 1:
        raise CalibrationError(f"a calibration transfers to one GPU model at a time; --gpu/--node name {gpus}: plan "
                               "them one by one")
    # efficiencies and overheads transfer; the calibrated machine's own link bandwidths do not
    return cal.params_for(gpus[0], db), db, cal


def _attention_and_headroom(args, db, params, kw: dict):
    """[issue 17] ``--attention``: the workload rebuilt with that attention (passed to plan() as ``workload``);
    ``--memory-headroom``: the ModelParams every fit check of the plan reads, refused when it is not smaller than
    every candidate GPU's memory. Returns (model id or None, params)."""
    from gpusim import units
    from gpusim.errors import ScenarioError
    from gpusim.params import DEFAULT_PARAMS

    model = args.model
    if getattr(args, "attention", None) in ("flash2", "triton"):  # [issue 18]
        raise ScenarioError(f"--attention {args.attention}: plan compares hardware with each GPU's native fused "
                            f"attention kernel (--attention flash); the rate of a given kernel on a given GPU is "
                            f"modelled by `gpusim predict`, `gpusim compare` and `gpusim sweep` (pass it there), "
                            f"or leave --attention out")
    if (getattr(args, "attention", None) or getattr(args, "mtp_layers", None) is not None
            or getattr(args, "mtp_shared", None) is not None):
        from gpusim.rows import apply_attention, apply_mtp
        from gpusim.workload import get_workload

        kw["workload"] = apply_mtp(apply_attention(get_workload(model, seq_len=args.seq_len), args.attention),
                                   getattr(args, "mtp_layers", None), getattr(args, "mtp_shared", None))  # [issue 17]
        model = None
    head = getattr(args, "memory_headroom", None)
    if head:
        gib = head.get("memory_headroom_gib")
        if gib is not None:
            ids = sorted(set(args.gpu or []) | {db.node(n).gpu for n in (args.node or [])}) or list(db.gpus)
            largest = max(db.gpu(g).memory_gib for g in ids)
            if gib >= largest:
                raise ScenarioError(f"memory headroom {gib:g} GiB is not smaller than the largest candidate GPU's "
                                f"{largest:g} GiB: nothing could fit; give less (e.g. --memory-headroom 2GiB, or a "
                                f"fraction such as 0.05)")
        params = (params or DEFAULT_PARAMS).replace(
            memory_headroom_bytes=units.gib_to_bytes(gib) if gib is not None else 0.0,
            memory_headroom_frac=head.get("memory_headroom_frac") or 0.0)
    return model, params


def plan_result(args):
    """The answer of ``gpusim plan`` for parsed flags (also :func:`gpusim.plan`): a PlanAnswer."""
    from gpusim.commands._common import load_db
    from gpusim.planning import plan
    from gpusim.results import PlanAnswer

    db = load_db(args)
    params, db, cal = _calibrated(args, db)
    mode = "both" if (args.cloud and args.purchase) else ("purchase" if args.purchase else "cloud")
    kw = {}
    if args.failure_rate is not None:
        kw["failure_rate_per_gpu_hour"] = args.failure_rate
    if args.restart is not None:
        kw["restart_s"] = args.restart
    if args.eval_overhead is not None:
        kw["eval_overhead_frac"] = args.eval_overhead
    if args.precision:
        kw["precisions"] = args.precision
    if args.strategy:
        kw["strategies"] = args.strategy
    if args.no_activation_checkpointing:
        kw["checkpointing"] = (False,)
    if args.workers is not None:
        kw["num_workers"] = args.workers
    from gpusim.commands._scenario import MOE_OPTIONS

    pins = {k: getattr(args, k) for k in ("tp", "pp", "vp", "cp", "ep", "cp_comm", "cross_entropy", *MOE_OPTIONS)
            if getattr(args, k, None) is not None}
    if getattr(args, "cuda_graph_scope", None):  # [issue 17]
        pins["cuda_graph_scope"] = tuple(dict.fromkeys(args.cuda_graph_scope))
    if pins:  # [issue 12]
        from gpusim.search import Pins

        kw["layout_pins"] = Pins(**pins)
    if args.no_layout_search:
        kw["layouts"] = False

    model, params = _attention_and_headroom(args, db, params, kw)  # [issue 17]
    progress, stop = _progress(args)
    try:
        res = plan(model, seq_len=args.seq_len, tokens=args.tokens, samples=args.samples, epochs=args.epochs,
                   deadline_s=args.deadline, budget_usd=args.budget,
                   max_global_batch=args.max_global_batch, global_batch=args.global_batch, reference_lr=args.lr,
                   gpus=args.gpu, nodes=args.node, max_gpus=args.max_gpus, mode=mode, pricing=args.pricing,
                   price_overrides=_parse_overrides(args.price_override),
                   cost_basis="amortized" if args.amortize else "capital", lifetime_years=args.lifetime_years,
                   energy=args.energy, usd_per_kwh=args.usd_per_kwh, pue=args.pue, optimizer=args.optimizer,
                   checkpoint_interval_s=args.checkpoint_interval,
                   checkpoint_write_bytes_per_s=args.checkpoint_gbyte_per_s,
                   db=db, params=params, progress=progress, **kw)
    finally:
        stop()
    interval = _time_interval(cal, res, args, db) if cal is not None else None
    record = _track_record(res, kw.get("workload") or model, calibrated=cal is not None)
    advice: list = []
    memory = fit = None
    if res.ok:  # [issue 17] what FP8 and the MoE software settings would add to the recommended layout
        from gpusim.planning import (recommendation_memory_fit, recommendation_memory_record,
                                     recommendation_software_advice)
        from gpusim.workload import get_workload

        wl = kw.get("workload") or get_workload(model, seq_len=args.seq_len)
        software = {k: v for k, v in pins.items() if k not in ("tp", "pp", "vp", "cp", "ep")}
        config = res.recommendation["configuration"]
        advice = recommendation_software_advice(config, wl, db, params, software)
        # [stop 56] the recommended layout's memory against the published runs' peaks, as predict and sweep print it
        memory = recommendation_memory_record(config, wl, db, params, software)
        # [stop 56] where that record's top passes the GPU: the fastest layout on that hardware whose top fits
        fit = recommendation_memory_fit(config, wl, db, params, software, kw.get("layout_pins"), memory)
    return PlanAnswer(res, every=bool(args.all), interval=interval or None, track_record=record,
                      software_advice=tuple(advice), memory_record=memory, memory_record_fit=fit)


def _track_record(res, model, *, calibrated: bool) -> dict | None:
    """How far predictions of the recommended configuration's kind were from published runs (gpusim.track_record),
    with where 80% of them landed carried to its time to train (only its training steps scaled)."""
    from gpusim import track_record
    from gpusim.workload import get_workload

    if not res.ok:
        return None
    try:
        wl = get_workload(model) if isinstance(model, str) else model
    except Exception:  # noqa: BLE001 - the plan already resolved the model; without it, no MoE test
        wl = None
    c = res.recommendation["configuration"]
    key = track_record.configuration_key(c, wl)
    band = None if key is None else track_record.load().get(key)
    return track_record.record_for(band, key, calibrated=calibrated, **(
        {} if band is None else {"time_to_train_range_s": band.time_to_train_range(c["time_to_train_s"], c["train_s"])}))


def cmd_plan(args) -> int:
    """Nothing feasible is an answer, not an error (DESIGN.md: infeasible configurations are data): exit 0 with
    the reason in the text and in ``recommendation.status``/``recommendation.reason`` of the JSON, as ``sweep``."""
    import sys

    from gpusim import units
    from gpusim.commands._common import print_json

    out = plan_result(args)
    res, interval = out.plan, out.interval
    if args.json:
        print_json(out.to_dict())
    elif args.csv:
        cfg = res.configurations(every=args.all)
        cfg.to_csv(sys.stdout, index=False, float_format="%.6g")
    else:
        print_plan(res, top=args.top)
        if out.software_advice:  # [issue 17]
            from gpusim.simulation import SOFTWARE_ADVICE_LABELS

            for a in out.software_advice:
                print(f"{SOFTWARE_ADVICE_LABELS[a['id']]} for the recommendation: {a['message']}")
            prec = res.recommendation["configuration"]["precision"]
            # ([stop 57] NVFP4's advice ranks under the same precision as FP8's; the loss's cross entropy as given)
            given = {"llm-fp8": prec, "llm-nvfp4": prec, "llm-moe-software": "Megatron-Core's default MoE settings",
                     "llm-cross-entropy": "the cross entropy given"}
            named = dict.fromkeys(given.get(a["id"], a["id"]) for a in out.software_advice)
            print(f"This plan ranked the hardware with {' and '.join(named)}; "
                  "run it again with the flags above to rank with them.")
        if res.ok:
            from gpusim.commands._common import print_track_record, range_text

            print_track_record(out.track_record, here=range_text(
                out.track_record, "time_to_train_range_s",
                lambda lo, hi: f"{units.format_duration(lo)} to {units.format_duration(hi)} to train, its training "
                               f"steps scaled, checkpoints, evaluation and restarts as modelled"))
            from gpusim.commands._common import print_memory_record

            print_memory_record(out.memory_record, "the recommended layout", fit=out.memory_record_fit,  # [stop 56]
                                where=" on the recommended hardware")
        if interval and "note" in interval:
            print(f"calibration: {interval['note']}")
        elif interval:
            print(f"with the calibration's uncertainty ({interval['level']:.0%} interval): the training steps take "
                  f"{units.format_duration(interval['lo'])} to {units.format_duration(interval['hi'])} of the "
                  f"{units.format_duration(res.recommendation['configuration']['time_to_train_s'])} to train")
    return 0


def _time_interval(cal, res, args, db) -> dict | None:
    """The recommended configuration's time to train, with the calibration's throughput interval applied to its
    training steps (checkpoints, evaluation and restarts keep their modelled time)."""
    from gpusim.simulation import Scenario

    if not res.ok:
        return None
    c = res.recommendation["configuration"]
    scn = Scenario.create(model=args.model, seq_len=args.seq_len, node=c["node"], gpu=c["gpu"], gpus=c["n_gpus"],
                          nodes=c["nodes"], kind=c["strategy"], precision=c["precision"], per_gpu_batch=c["micro_batch"],
                          accum=c["accum"], activation_checkpointing=c["checkpointing"], cpu_offload=c["cpu_offload"])
    iv = cal.interval(scn, db)
    if iv.get("applies") is False:
        return {"level": iv.get("level", 0.9), "note": iv.get("note") or "the calibration does not apply here"}
    lo_thr, hi_thr = iv["throughput_samples_per_s"]
    thr, train_s, total = c["throughput_samples_per_s"], c["train_s"], c["time_to_train_s"]
    return {"level": iv.get("level", 0.9), "lo": total - train_s + train_s * thr / hi_thr,
            "hi": total - train_s + train_s * thr / lo_thr}


def _progress(args):
    """A rich progress bar on stderr for large sweeps (only on a terminal)."""
    import sys

    if args.no_progress or not sys.stderr.isatty():
        return None, lambda: None
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    prog = Progress(TextColumn("evaluating configurations"), BarColumn(),
                    TextColumn("{task.completed:,}/{task.total:,}"), TimeElapsedColumn(), console=Console(stderr=True),
                    transient=True)
    state = {"task": None}

    def cb(done, total):
        if state["task"] is None:
            prog.start()
            state["task"] = prog.add_task("sweep", total=total)
        prog.update(state["task"], completed=done, total=total)

    def stop():
        if state["task"] is not None:
            prog.stop()

    return cb, stop


def _money(x) -> str:
    import math

    return "" if x is None or not math.isfinite(x) else (f"{x:,.0f}" if abs(x) >= 100 else f"{x:,.2f}")


def print_plan(res, top: int = 20) -> None:
    from rich.console import Console
    from rich.table import Table

    from gpusim import units
    from gpusim.planning import bom_line

    con = Console(width=max(150, Console().width), highlight=False)
    inp = res.inputs
    amount = (f"{inp['tokens']:.3g} tokens ({inp['total_samples']:,.0f} sequences of {inp['tokens_per_sample']:g})"
              if inp["tokens"] else f"{inp['samples']:,.0f} samples x {inp['epochs']:g} epochs")
    cons = [f"mode {inp['mode']}"]
    if inp["deadline_s"]:
        cons.append(f"deadline {units.format_duration(inp['deadline_s'])}")
    if inp["budget_usd"]:
        cons.append(f"budget {inp['budget_usd']:,.0f} USD")
    cons.append(f"up to {inp['max_gpus']:,} GPUs")
    cons.append(f"global batch <= {inp['max_global_batch']:,}")
    con.print(f"[bold]{inp['workload_name']}[/] ({inp['params'] / units.GIGA:.3g}B parameters): {amount}; " + ", ".join(cons))
    df = res.table
    n_lay = int(df.attrs.get("layout_rows", 0))  # [issue 12]
    if n_lay:
        con.print(f"searched {n_lay:,} LLM layouts (tp, cp, pp, vp, ep, micro-batch, recomputation); each hardware row "
                  "below holds its best")
    con.print(f"evaluated {len(df):,} configurations ({int(df['feasible'].sum()):,} feasible, "
              f"{len(res.pareto)} on the time-cost frontier) in {res.elapsed_s:.2f} s")

    if len(res.pareto):
        t = Table(title="Pareto frontier: time to train vs cost", header_style="bold", show_lines=False)
        for col, just in (("time", "right"), ("cost USD", "right"), ("hardware", "left"), ("GPUs", "right"),
                          ("recipe", "left"), ("batch", "right"), ("MFU", "right"), ("scaling", "right"),
                          ("goodput", "right"), ("bottleneck", "left"), ("price of", "left")):
            t.add_column(col, justify=just, no_wrap=col in ("time", "cost USD", "recipe", "price of"))
        pf = res.pareto
        if len(pf) > top:  # keep the ends and an even spread between
            import numpy as np

            keep = np.unique(np.round(np.linspace(0, len(pf) - 1, top)).astype(int))
            pf = pf.iloc[keep]
        for i, r in pf.iterrows():
            hw = (f"{int(r['nodes'])} x {r['node']}" if not r["node_assumed"]
                  else f"{int(r['nodes'])} x {int(r['gpus_per_node'])} {r['gpu']} ({r['node']})")
            hw = ("rent " if r["mode"] == "cloud" else "buy ") + hw
            recipe = (f"{r['strategy']} {r['precision']}{' ckpt' if r['checkpointing'] else ''} "
                      f"b{int(r['micro_batch'])}" + (f"x{int(r['accum'])}" if r["accum"] > 1 else ""))
            if r.get("layout"):  # [issue 12] a Megatron layout row
                recipe = (f"tp{int(r['tp'])} pp{int(r['pp'])} cp{int(r['cp'])}" + (f" vp{int(r['vp'])}" if r["vp"] > 1
                                                                                   else "")
                          + f" b{int(r['micro_batch'])}x{int(r['accum'])} {r['recompute']} {r['precision']}")
            mark = ""
            cfg = res.recommendation.get("configuration")
            if cfg and all(cfg.get(k) == _scalar(r[k]) for k in ("node", "gpu", "nodes", "strategy", "precision",
                                                                  "micro_batch", "accum", "checkpointing")):
                mark = " [bold green]<- recommended[/]"
            t.add_row(units.format_duration(r["time_to_train_s"]), _money(r["cost_usd"]), hw + mark,
                      f"{int(r['n_gpus']):,}", recipe, f"{int(r['global_batch']):,}", f"{r['mfu_frac']:.0%}",
                      f"{r['scaling_efficiency_frac']:.0%}" if r["scaling_efficiency_frac"] == r["scaling_efficiency_frac"]
                      else "-", f"{r['goodput_frac']:.0%}", str(r["bottleneck"]),
                      str(r["price_date"]))
        con.print(t)

    rec = res.recommendation
    colour = {"ok": "green", "no-plan": "yellow", "nothing-feasible": "red"}[rec["status"]]
    con.print(f"\n[bold {colour}]Recommendation[/]: {rec['summary']}")
    for line in rec["reasons"]:
        con.print(f"  - {line}")
    if res.bom:
        con.print("\n[bold]Bill of materials[/] (per node unless stated)")
        for it in res.bom["items"]:
            con.print(f"  - {bom_line(it, warn=lambda t: f'[red]{t}[/]')}")
    if res.sensitivity:
        st = Table(title="Sensitivity of the recommendation (pessimistic / optimistic end of each range)",
                   header_style="bold")
        for col in ("assumption", "range", "time", "cost"):
            st.add_column(col, justify="left" if col in ("assumption", "range") else "right")
        for s in res.sensitivity:
            st.add_row(s["assumption"], s["range"], f"{s['time_low_frac']:+.0%} / {s['time_high_frac']:+.0%}",
                       f"{s['cost_low_frac']:+.0%} / {s['cost_high_frac']:+.0%}")
        con.print(st)
    if res.lr:
        con.print(f"[bold]Learning rate[/]: {res.lr['advice']}")
        for w in res.lr.get("warnings", []):
            con.print(f"  [yellow]warning[/]: {w}")
    if res.prices:
        used = sorted({(p["source"], p["date"]) for p in res.prices})
        con.print("[dim]prices: " + "; ".join(f"{s} ({d})" for s, d in used[:12])
                  + (f" and {len(used) - 12} more" if len(used) > 12 else "") + "[/]")
    for a in res.assumptions:
        con.print(f"[dim]assumed: {a}[/]")


def _scalar(v):
    import numpy as np

    return v.item() if isinstance(v, np.generic) else v
