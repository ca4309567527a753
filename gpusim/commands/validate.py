"""``gpusim validate``: the model against published measurements, with honest error figures."""

from __future__ import annotations

ORDER = 50


def register(sub) -> None:
    from gpusim.checks import Bound

    p = sub.add_parser("validate", help="compare predictions with published measurements",
                       description="Run the model over shared/validation/measurements.csv (or your CSV with the same "
                                   "columns) and print, per source and kind, how many rows it could predict and the "
                                   "median and 90th-percentile absolute percentage error, from datasheet alone and "
                                   "anchored on each configuration's measured one-GPU row.")
    p.add_argument("csv", nargs="*", help="measurement CSV(s) (default: the project's validation set)")
    p.add_argument("--calibration", metavar="FILE", help="use a calibration file's parameters")
    p.add_argument("--rows", action="store_true", help="print every row's measured and predicted values")
    p.add_argument("--worst", type=Bound(0, 100_000, integer=True), default=8,
                   help="list the N worst anchored rows (default 8)")
    p.add_argument("--llm-csv", metavar="FILE", help="LLM layout rows (default: validation/llm_parallel.csv; "
                                                     "'none' to skip)")
    p.add_argument("--sweeps-csv", metavar="FILE", help="all-reduce and all-to-all sweeps across systems (default: "
                                                       "validation/nccl_sweeps.csv; 'none' to skip)")
    p.add_argument("--gemm-csv", metavar="FILE", help="[issue 17] one layer's GEMMs against Transformer Engine's "
                                                     "published GEMM profile (default: validation/te_gemm_profile.csv; "
                                                     "'none' to skip)")
    p.add_argument("--runs", metavar="CSV", nargs="*", default=None,
                   help="published training runs (default: every validation/runs_*.csv; give no file to skip)")
    p.add_argument("--show-holdout", action="store_true",
                   help="also print the held-out runs' measurements, predictions and errors row by row (with --json "
                        "too; their summary is always printed)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_validate)


def _runs_results(args, db, params):
    """[issue 17] The published training runs of validation/runs_*.csv (gpusim.validation_runs)."""
    from gpusim import validation_runs as R

    runs = getattr(args, "runs", None)
    if runs is not None and not runs:
        return []
    if runs is None and args.csv:  # a user's CSV alone: the project's tables are not mixed in
        return []
    return R.run(runs, db=db, params=params)


def _later_results(args, db, params):
    """[stop 38] The later Megatron-Bridge releases (validation/later_releases.csv), reported apart; only with the
    project's own tables (no --csv, no --runs)."""
    from gpusim import validation_runs as R

    if args.csv or getattr(args, "runs", None) is not None:
        return []
    path = R.later_releases_path()
    return R.run([path], db=db, params=params) if path else []


def _ab_results(args, runs, later, db):
    """[issue 17] The published A/B comparisons among the runs tables' rows and each layout's steps from one
    Megatron-Bridge release to the next (gpusim.validation_ab): no new simulation, the rows' own predictions."""
    from gpusim import validation_ab as VAB
    from gpusim import validation_runs as R

    paths = list(getattr(args, "runs", None) or R.default_paths()) + ([R.later_releases_path()] if later else [])
    items = VAB.scenario_items(list(runs or []) + list(later or []), paths=paths, db=db)
    # the comparisons published as two figures (validation/ab_published.csv), with the project's own tables only
    published, errors = VAB.published_pairs(db=db) if later else ([], [])
    # [stop 54] the same published layout on two GPUs
    return (VAB.pairs(items) + published, VAB.release_steps(items), errors, VAB.memory_pairs(items),
            VAB.gpu_swaps(items, db=db))


def _search_results(args, db, params):
    """[issue 17] The layout search against the tuned recipes (gpusim.validation_search): the curated dense runs and,
    apart, the later releases' dense rows, Narayanan et al.'s Table 1, and the MoE runs with the later releases' MoE
    rows apart; only with the project's own tables and the model's defaults."""
    from gpusim import validation_runs as R
    from gpusim import validation_search as VS

    if args.csv or getattr(args, "runs", None) is not None or (params is not None and callable(params)):
        return [], [], [], [], []
    later = R.later_releases_path()

    def of(paths, kind):
        return VS.run(paths, db=db, params=params, kind=kind) if paths else []

    return (of(VS.default_paths(), "dense"), of([later] if later else [], "dense"), VS.run_table1(db=db, params=params),
            of(VS.default_paths("moe"), "moe"), of([later] if later else [], "moe"))


def _ep_results(args, db, params):
    """[issue 17] The Megatron-Core MoE paper's dispatch and combine latencies (gpusim.validation_ep); only with the
    project's own tables and the model's defaults."""
    from gpusim import validation_ep as VE

    if args.csv or (params is not None and callable(params)):
        return []
    return VE.run(db=db, params=params)


def _attention_results(args, db, params):
    """[issue 17] The Megatron-Core MoE paper's fused-attention rates (gpusim.validation_attention); only with the
    project's own tables and the model's defaults."""
    from gpusim import validation_attention as VA

    if args.csv or (params is not None and callable(params)):
        return []
    return VA.run(db=db, params=params)


def _attention_cudnn_results(args, db, params):
    """[issue 17] cuDNN's fused-attention training benchmark (gpusim.validation_attention.run_cudnn); only with the
    project's own tables and the model's defaults."""
    from gpusim import validation_attention as VA

    if args.csv or (params is not None and callable(params)):
        return []
    return VA.run_cudnn(db=db, params=params)


def _llm_results(args, db, params):
    """The LLM-layout rows (Korthikanti Table 5, Narayanan Table 1) with gpusim's errors."""
    from gpusim import validation_llm as V

    if getattr(args, "llm_csv", None) == "none" or (args.csv and not getattr(args, "llm_csv", None)):
        return []
    path = getattr(args, "llm_csv", None) or V.default_csv()
    if params is not None and callable(params):
        params = params(V.GPU_ID)
    return V.run(path, db=db, params=params)


def _sweep_results(args, db, params):
    """The collective sweeps across systems (validation/nccl_sweeps.csv: all-reduce and all-to-all rows) with gpusim's
    predictions."""
    from gpusim import validation_comm as VC

    choice = getattr(args, "sweeps_csv", None)
    if choice == "none" or (args.csv and not choice):
        return []
    return VC.run(choice or VC.default_csv(), db=db, params=params)


def _gemm_results(args, db, params):
    """[issue 17] The layer GEMMs of Transformer Engine's GEMM profile (gpusim.validation_gemm)."""
    from gpusim import validation_gemm as VG

    choice = getattr(args, "gemm_csv", None)
    if choice == "none" or (args.csv and not choice):
        return []
    if params is not None and callable(params):  # a calibration: the parameters of the profile's GPUs are not the user's
        params = None
    return VG.run(choice or VG.default_csv(), db=db, params=params)


def _grouped_results(args, db, params):
    """[issue 17] The experts' grouped GEMM against published grouped-GEMM benchmarks (gpusim.validation_grouped);
    only with the project's own tables and the model's defaults."""
    from gpusim import validation_grouped as VGG

    if args.csv or (params is not None and callable(params)):
        return []
    return VGG.run(db=db, params=params)


def _fsdp_results(args, db, params):
    """[issue 18] llm-foundry's published FSDP benchmark rows (gpusim.validation_fsdp); skipped with a given --csv."""
    from gpusim import validation_fsdp as VF

    if args.csv or (params is not None and callable(params)):
        return []
    return VF.run(VF.default_csv(), db=db, params=params)


def _track_record(args, db, results, runs, fsdp, sweeps, searched=None, searched_moe=None, later=None, ab=None,
                  swaps=None):
    """The model's track record per kind of prediction (gpusim.track_record) from the results just computed, where
    they are the project's own tables with the model's defaults (no user CSV, no calibration, no other run files):
    the bands ``predict``, ``sweep``, ``plan`` and ``comm`` print. None otherwise."""
    if args.csv or args.calibration or getattr(args, "runs", None) is not None or getattr(args, "sweeps_csv", None):
        return None
    from gpusim import track_record

    return track_record.compute(db, dp=results, runs=runs, fsdp=fsdp, sweeps=sweeps, searched=searched,
                                searched_moe=searched_moe, later=later, ab=ab, swaps=swaps)


def print_track_record_table(record, print_table) -> None:
    """The bands as a table, and whether the packaged file (what the reports print) still matches them."""
    from gpusim import track_record
    from gpusim.validation import fmt_pct

    rows = [[b.key, b.quantity, b.rows, fmt_pct(b.median_abs_frac), fmt_pct(b.p90_abs_frac),
             f"{b.held_out_rows}: {fmt_pct(b.held_out_median_abs_frac)} / {fmt_pct(b.held_out_p90_abs_frac)}"
             if b.held_out_rows else "-", f"{b.real_vs_predicted_speed_frac:+.1%}", f"{b.slower_frac:.0%}",
             (f"{b.speed_ratio_p10:.2f}x-{b.speed_ratio_p90:.2f}x ({'held out' if b.range_held_out else 'all'})"
              if b.has_range else "too few")]
            for b in record.values()]
    print_table(rows, ["kind", "error in", "rows", "median", "p90", "held out: median / p90", "measured / predicted "
                       "speed - 1 (median)", "slower", "80% of runs"],
                title="track record per kind of prediction (what predict, sweep, plan and comm print under a number)",
                justify=["left", "left"] + ["right"] * 7)
    if not track_record.same(record, track_record.load()):
        print("note: the packaged track record (gpusim/data/track_record.json) differs from these figures: run "
              "`make track-record`")


def print_llm(results) -> None:
    from gpusim.commands._common import print_table
    from gpusim.validation import fmt_pct
    from gpusim import validation_llm as V

    if not results:
        return
    rows = []
    for r in results:
        rows.append([r.source_id, r.model, r.gpus, f"{r.tp}/{r.pp}/{r.vp}", r.micro_batch, r.global_batch, r.recompute,
                     "sp" if r.sp else "", f"{r.measured:g}", "" if r.predicted is None else f"{r.predicted:.4g}",
                     "" if r.signed_frac is None else f"{r.signed_frac:+.1%}", r.chosen or r.error[:60]])
    print_table(rows, ["source", "model", "GPUs", "tp/pp/vp", "micro", "global", "recompute", "", "measured",
                       "predicted", "error", "chosen by gpusim's search"],
                title="LLM layouts (validation/llm_parallel.csv): Table 5 step s/iteration, Table 1 TFLOP/s per GPU",
                justify=["left", "left"] + ["right"] * 9 + ["left"])
    for sid, g in V.summarize(results).items():
        print(f"{sid}: {g['predicted']} of {g['rows']} rows, mean abs error {fmt_pct(g['mean_ape'])}, median "
              f"{fmt_pct(g['median_ape'])}, max {fmt_pct(g['max_ape'])}")


def print_runs(results, *, holdout_rows: bool = False, holdout_summary: bool = True) -> None:
    """[issue 17] The published-runs table and its per-regime summary (gpusim.validation_runs.report)."""
    from gpusim.commands._common import print_table
    from gpusim import validation_runs as R

    if not results:
        return
    for report, columns, title in (
            (R.report, R.TABLE_COLUMNS, "Published training runs (validation/runs_*.csv): step time with the stated "
                                        "layout (error > 0: predicted slower)"),
            (R.memory_report, R.MEMORY_COLUMNS, "Published peak memory (validation/runs_memory.csv): PyTorch's peak "
                                                "allocated GiB on the fullest GPU with the stated layout (error > 0: "
                                                "predicted more)")):  # [issue 17] the second: memory rows
        table, lines = report(results, holdout_rows=holdout_rows, holdout_summary=holdout_summary)
        if table:
            print_table(table, list(columns), title=title,
                        justify=["left"] * 4 + ["right", "left", "left", "right", "right", "right", "left"])
        for line in lines:
            print(line)


def cmd_validate(args) -> int:
    from dataclasses import asdict

    from gpusim.commands._common import load_db, print_json, print_table
    from gpusim.validation import default_csv, fmt_pct, run, summarize, worst_rows

    db = load_db(args)
    params = None
    if args.calibration:
        from gpusim.calibration import load_calibration

        cal = load_calibration(args.calibration)
        cache: dict = {}

        def params(gpu_id):  # what transfers to each row's GPU (never the calibrated machine's links)
            if gpu_id not in cache:
                cache[gpu_id] = cal.params_for(gpu_id, db)
            return cache[gpu_id]
    paths = args.csv or [default_csv()]
    results = []
    for path in paths:
        results += run(path, db=db, params=params)
    summary = summarize(results)
    llm = _llm_results(args, db, params)
    sweeps = _sweep_results(args, db, params)  # [issue 18] collectives across systems
    runs = _runs_results(args, db, params)
    gemms = _gemm_results(args, db, params)
    grouped = _grouped_results(args, db, params)  # [issue 17]
    fsdp = _fsdp_results(args, db, params)
    later = _later_results(args, db, params)
    ab, steps, ab_errors, ab_memory, swaps = _ab_results(args, runs, later, db)  # [issue 17]
    searched, searched_later, searched_t1, searched_moe, searched_moe_later = _search_results(args, db, params)
    record = _track_record(args, db, results, runs, fsdp, sweeps, searched + searched_later,
                           searched_moe + searched_moe_later, later, ab, swaps)
    ep_rows = _ep_results(args, db, params)
    attn_rows = _attention_results(args, db, params)
    kernel_rows = _attention_cudnn_results(args, db, params)
    if args.json:
        from gpusim import validation_comm as VC
        from gpusim import validation_fsdp as VF
        from gpusim import validation_gemm as VG
        from gpusim import validation_grouped as VGG
        from gpusim import validation_llm as V
        from gpusim import validation_runs as R
        from gpusim import validation_attention as VA
        from gpusim import validation_ep as VE
        from gpusim import validation_search as VS
        from gpusim import validation_ab as VAB

        print_json({**summary, "rows": [asdict(r) for r in results],
                    "llm_parallel": {"summary": V.summarize(llm), "rows": V.to_dicts(llm)},
                    "nccl_sweeps": {"summary": VC.summarize(sweeps), "rows": VC.to_dicts(sweeps)},
                    "te_gemm_profile": {"summary": VG.summarize(gemms), "rows": VG.to_dicts(gemms)},
                    "grouped_gemm": {"summary": VGG.summarize(grouped), "rows": VGG.to_dicts(grouped)},
                    "fsdp_runs": {"summary": VF.summarize(fsdp),
                                  "rows": VF.to_dicts(fsdp, holdout_rows=args.show_holdout)},
                    "published_runs": {"summary": R.summarize(runs),
                                           "rows": R.to_dicts(runs, holdout_rows=args.show_holdout)},
                    "track_record": {k: b.to_dict() for k, b in record.items()} if record else None,
                    "later_releases": {"summary": R.summarize(later),
                                       "rows": R.to_dicts(later, holdout_rows=args.show_holdout)},
                    "repeated_layouts": R.repeated_layouts(list(runs) + list(later)),  # [stop 42]
                    "ab_effects": {"summary": VAB.summarize(ab),  # [issue 17]
                                   "rows": VAB.to_dicts(ab, holdout_rows=args.show_holdout),
                                   "errors": ab_errors,
                                   "memory": {"summary": VAB.summarize_memory(ab_memory),
                                              "rows": VAB.to_dicts(ab_memory,
                                                                          holdout_rows=args.show_holdout)},
                                   "release_steps": {"summary": VAB.summarize_releases(steps),
                                                     "rows": VAB.releases_to_dicts(
                                                         steps, holdout_rows=args.show_holdout)}},
                    "gpu_swaps": {"summary": VAB.summarize_swaps(swaps),  # [stop 54]
                                  "rows": VAB.to_dicts(swaps, holdout_rows=args.show_holdout)},
                    "ep_dispatch": {"summary": VE.summarize(ep_rows), "rows": VE.to_dicts(ep_rows)},
                    "attention_rates": {"summary": VA.summarize(attn_rows), "rows": VA.to_dicts(attn_rows)},
                    "attention_kernels": {"summary": VA.summarize_cudnn(kernel_rows),  # [issue 17]
                                          "rows": [d for d in VA.cudnn_to_dicts(kernel_rows)
                                                   if args.show_holdout or not d["holdout"]]},
                    "layout_search": {"summary": VS.summarize(searched),
                                      "rows": VS.to_dicts(searched, holdout_rows=args.show_holdout),
                                      "later_releases": {"summary": VS.summarize(searched_later),
                                                         "rows": VS.to_dicts(searched_later,
                                                                             holdout_rows=args.show_holdout)},
                                      "narayanan_table1": {"summary": VS.summarize(searched_t1),
                                                           "rows": VS.to_dicts(searched_t1)},
                                      # [issue 17] the MoE runs, reported apart
                                      "moe": {"summary": VS.summarize(searched_moe),
                                              "rows": VS.to_dicts(searched_moe, holdout_rows=args.show_holdout),
                                              "later_releases": {
                                                  "summary": VS.summarize(searched_moe_later),
                                                  "rows": VS.to_dicts(searched_moe_later,
                                                                      holdout_rows=args.show_holdout)}}}})
        return 0
    table = []
    for g in summary["groups"]:
        table.append([g["source_id"] + (" *" if g["used_for_defaults"] else ""), g["kind"], g["rows"], g["predicted"],
                      g["unmapped"], fmt_pct(g["datasheet"]["median_ape"]), fmt_pct(g["datasheet"]["p90_ape"]),
                      g["anchored"]["n"] or "", fmt_pct(g["anchored"]["median_ape"]), fmt_pct(g["anchored"]["p90_ape"]),
                      fmt_pct(g["linear"]["median_ape"]), fmt_pct(g["linear"]["p90_ape"])])
    print_table(table, ["source", "kind", "rows", "predicted", "unmapped", "datasheet med", "datasheet p90",
                        "anchored n", "anchored med", "anchored p90", "linear med", "linear p90"],
                title="gpusim validate: absolute percentage error per source and kind",
                caption="* rows used to set a default parameter: not a test of the model",
                justify=["left", "left"] + ["right"] * 10)
    o = summary["overall"]
    ir = o["independent_replica_rows"]
    print(f"multi-GPU throughput rows: {o['multi_gpu_throughput_rows']} "
          f"(source-flagged rows excluded: {o['flagged_rows_excluded']}; rows whose benchmark trained independent "
          f"replicas, reported below: {ir['n']})")
    print(f"  datasheet alone:   median {fmt_pct(o['datasheet']['median_ape'])}, p90 {fmt_pct(o['datasheet']['p90_ape'])} "
          f"(n={o['datasheet']['n']})")
    print(f"  anchored on 1 GPU: median {fmt_pct(o['anchored']['median_ape'])}, p90 {fmt_pct(o['anchored']['p90_ape'])} "
          f"(n={o['anchored']['n']}); linear scaling: median {fmt_pct(o['linear']['median_ape'])}, "
          f"p90 {fmt_pct(o['linear']['p90_ape'])}")
    print(f"  rows losing scaling (measured efficiency < 0.9): anchored median "
          f"{fmt_pct(o['losing_scaling_anchored']['median_ape'])} vs linear "
          f"{fmt_pct(o['losing_scaling_linear']['median_ape'])} (n={o['losing_scaling_anchored']['n']})")
    print(f"  scaling efficiency, absolute error: median {fmt_pct(o['efficiency_abs_error']['median_ape'])}, p90 "
          f"{fmt_pct(o['efficiency_abs_error']['p90_ape'])} (linear scaling assumes 100%: median "
          f"{fmt_pct(o['efficiency_abs_error_linear']['median_ape'])}, p90 "
          f"{fmt_pct(o['efficiency_abs_error_linear']['p90_ape'])})")
    if ir["n"]:
        eff = ir["measured_efficiency"]
        print(f"  independent replicas (no gradient exchange; predicted as n one-GPU runs): anchored median "
              f"{fmt_pct(ir['anchored']['median_ape'])}, p90 {fmt_pct(ir['anchored']['p90_ape'])} "
              f"(n={ir['anchored']['n']}); measured efficiency median {fmt_pct(eff['median'])}, "
              f"{fmt_pct(eff['min'])}-{fmt_pct(eff['max'])}; datasheet median {fmt_pct(ir['datasheet']['median_ape'])}")
    ar = o["as_run_workload_rows"]
    if ar["n"]:
        print(f"  rows predicted with the model configuration their benchmark ran (AS_RUN_WORKLOADS; 1 GPU and more): "
              f"datasheet median {fmt_pct(ar['median_ape'])}, p90 {fmt_pct(ar['p90_ape'])} (n={ar['n']})")
    m = o["memory"]
    if m["configurations"]:
        print(f"  memory: every measured configuration ran, so it fitted; gpusim predicts {m['predicted_to_fit']} of "
              f"{m['configurations']} fit" + (f" (the others by a median {fmt_pct(m['median_overestimate_frac'])} over "
                                              f"capacity, at most {fmt_pct(m['max_overestimate_frac'])})"
                                              if m["median_overestimate_frac"] is not None else ""))
    bb = o["busbw"]
    if bb["all"]["n"]:
        parts = ", ".join(f"{k} {fmt_pct(v['median_ape'])}/{fmt_pct(v['p90_ape'])} (n={v['n']})"
                          for k, v in bb["sources"].items())
        print(f"bus bandwidth, sizes >= {bb['min_bytes'] / 1024:g} KiB, rows not used for defaults: median "
              f"{fmt_pct(bb['all']['median_ape'])}, p90 {fmt_pct(bb['all']['p90_ape'])} (n={bb['all']['n']}; "
              f"{bb['excluded_used_for_defaults']} rows that set defaults excluded)")
        print(f"  per source (median/p90): {parts}")
        print("  per size decade (median/p90): " + ", ".join(
            f"{d['decade']} {fmt_pct(d['median_ape'])}/{fmt_pct(d['p90_ape'])} (n={d['n']})" for d in bb["decades"]))
    if sweeps:
        from gpusim.validation_comm import print_section

        print_section(sweeps, print_table, fmt_pct)
    if ep_rows:
        from gpusim.validation_ep import print_section as print_ep

        print_ep(ep_rows, print_table, fmt_pct)
    if attn_rows:
        from gpusim.validation_attention import print_section as print_attention

        print_attention(attn_rows, print_table, fmt_pct)
    if kernel_rows:
        from gpusim.validation_attention import print_cudnn_section

        print_cudnn_section(kernel_rows, print_table, fmt_pct, show_holdout=args.show_holdout)
    worst = worst_rows(results, "anchored", args.worst)
    if worst:
        print("worst anchored rows:")
        for r in worst:
            print(f"  #{r.index} {r.source_id} {r.model} {r.gpu} x{r.n_gpus}: measured {r.measured:g}, anchored "
                  f"{r.anchored:.4g} ({fmt_pct(r.ape('anchored'))}), linear {r.linear:.4g}, measured efficiency "
                  f"{fmt_pct(r.measured_efficiency)}")
    print(f"unmapped rows: {len(summary['unmapped'])}")
    reasons: dict[str, int] = {}
    for u in summary["unmapped"]:
        reasons[u["reason"]] = reasons.get(u["reason"], 0) + 1
    for reason, count in sorted(reasons.items(), key=lambda x: -x[1]):
        print(f"  {count} x {reason}")
    print_llm(llm)
    if gemms:
        from gpusim.validation_gemm import print_section as print_gemms

        print_gemms(gemms, print_table, fmt_pct)
    if grouped:
        from gpusim.validation_grouped import print_section as print_grouped

        print_grouped(grouped, print_table, fmt_pct)
    if fsdp:
        from gpusim.validation_fsdp import print_section as print_fsdp

        print_fsdp(fsdp, print_table, fmt_pct)
    if runs:
        from gpusim import validation_runs as R

        print_runs(runs, holdout_rows=getattr(args, "show_holdout", False))
    if later:
        from gpusim import validation_runs as R

        print("later Megatron-Bridge releases (validation/later_releases.csv: 26.02.01 to 26.08.01 as published, with "
              "the software settings of a recipe of each release's era where one states the row's layout; reported "
              "apart, not in the figures above or the track record):")
        for line in R.later_releases_lines(later):
            print(line)
    if runs or later:  # [stop 42] the spread of one stated layout's measurements: part of any row's error
        from gpusim import validation_runs as R

        rep = R.repeated_layouts(list(runs or []) + list(later or []))
        if rep["layouts"]:
            print(f"the same stated layout measured in more than one open row (another release, source or software "
                  f"setting): {rep['layouts']} layouts in {rep['rows']} rows; the slowest measurement over the fastest, "
                  f"median +{rep['median_spread_frac']:.1%}, p90 +{rep['p90_spread_frac']:.1%}: the settings a layout "
                  f"does not state (the container, CUDA graphs, the dispatcher ...) move a measurement this much; "
                  f"gpusim reads some of them from each row's notes, not all")
    if ab or steps or ab_memory:  # [issue 17] what one setting does, whatever error both rows of a pair share
        from gpusim.validation_ab import print_memory, print_releases
        from gpusim.validation_ab import print_section as print_ab

        print_ab(ab, print_table, holdout_rows=getattr(args, "show_holdout", False))
        for err in ab_errors:
            print(f"validation/ab_published.csv: not compared: {err}")
        print_releases(steps, print_table, holdout_rows=getattr(args, "show_holdout", False))
        print_memory(ab_memory, print_table, holdout_rows=getattr(args, "show_holdout", False))
    if swaps:  # [stop 54] the same published layout on two GPUs
        from gpusim.validation_ab import print_swaps

        print_swaps(swaps, print_table, holdout_rows=getattr(args, "show_holdout", False))
    if searched or searched_later or searched_t1 or searched_moe or searched_moe_later:
        from gpusim import validation_search as VS

        VS.print_section(searched, searched_later, print_table, holdout_rows=getattr(args, "show_holdout", False),
                         table1=searched_t1, moe=searched_moe, moe_later=searched_moe_later)
    if record:
        print_track_record_table(record, print_table)
    if args.rows:
        rows = [[r.index, r.source_id, r.kind, r.model, r.gpu, r.n_gpus, f"{r.measured:g}",
                 "" if r.predicted is None else f"{r.predicted:.4g}", "" if r.anchored is None else f"{r.anchored:.4g}",
                 fmt_pct(r.ape()), fmt_pct(r.ape("anchored")), r.reason or r.flagged or r.replicas_reason or ""]
                for r in results]
        print_table(rows, ["#", "source", "kind", "model", "gpu", "n", "measured", "datasheet", "anchored",
                           "err", "anch err", "note"])
    return 0
