"""``gpusim fit``: fit the model to a calibration profile and/or nccl-tests output; write a calibration file."""

from __future__ import annotations

ORDER = 45


def register(sub) -> None:
    p = sub.add_parser(
        "fit", help="fit the model to measurements (a `gpusim calibrate` profile, nccl-tests output)",
        description="Fit the model's efficiencies, overheads and link figures to a profile written by `gpusim "
                    "calibrate` and/or the output of NVIDIA's nccl-tests (all_reduce_perf and friends, text or -J "
                    "JSON). Prints measured vs fitted for every benchmark, the fitted parameters with their "
                    "uncertainty, and the error of the DDP steps that were held out of the fit and predicted. "
                    "The calibration file it writes is accepted by `predict`, `scale`, `comm`, `plan`, `validate` "
                    "and the app (--calibration FILE).")
    p.add_argument("sources", nargs="+", metavar="DIR_OR_NCCL_TESTS_OUTPUT",
                   help="profile directories and/or nccl-tests output files")
    p.add_argument("-o", "--output", required=True, metavar="FILE", help="calibration file to write (JSON)")
    p.add_argument("--json", action="store_true", help="print the calibration document as JSON instead of tables")
    p.set_defaults(func=cmd_fit)


def cmd_fit(args) -> int:
    from gpusim.calibration import fit
    from gpusim.commands._common import load_db, print_json

    from gpusim.checks import output_path

    output_path(args.output, "-o")  # before minutes of fitting: a device, a directory or a FIFO is refused
    db = load_db(args)
    cal = fit(args.sources, db=db)
    path = cal.save(args.output)
    if args.json:
        print_json(cal.to_dict())
        return 0
    print_report(cal)
    print(f"wrote {path}")
    return 0


# ---- report -----------------------------------------------------------------------------------------
def _fmt_value(v: float | None, unit: str) -> str:
    from gpusim import units

    if v is None:
        return "-"
    if unit == "s":
        return units.format_duration(v)
    if unit == "bytes/s":
        return units.format_rate_bytes(v)
    if unit == "flop/s":
        return units.format_flop_rate(v)
    if unit == "fraction":
        return f"{v:.3g}"
    return f"{v:.4g}"


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:+.0f}%"


def _rate(v: float | None, unit: str) -> str:
    from gpusim import units

    if v is None:
        return ""
    if "flop" in unit:
        return units.format_flop_rate(v)
    if "bytes" in unit:
        return units.format_rate_bytes(v)
    return f"{v:,.4g}"


def print_report(cal) -> None:
    from gpusim import units
    from gpusim.commands._common import print_table

    d = cal.to_dict()
    env = d["environment"]
    rep = d["report"]
    dev = env["device_name"]
    match = f" = {env['matched_gpu']}" if env.get("matched_gpu") else (" (CPU processes)" if env["device_kind"] == "cpu"
                                                                        else " (not in the hardware database)")
    print(f"gpusim fit: {env['n_ranks']} rank(s) of {dev}{match} on {env['n_nodes']} node(s), backend "
          f"{env.get('backend') or '?'}; sources: {', '.join(s['path'] for s in d['sources'])}")
    counts = rep.get("records", {})
    print("records: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()) if v))

    def table(kind, title, cols=("benchmark", "n", "measured", "fitted", "error", "measured rate", "fitted rate")):
        rows = rep.get(kind) or []
        if not rows:
            return
        out = []
        ncol = len(cols)
        for r in rows:
            noisy = f" ({r['n_noisy']} noisy)" if r.get("n_noisy") else ""
            out.append([r["group"] + " " + r["label"].split(" ", 1)[-1] if kind == "collective" else r["label"],
                        f"{r['n']}{noisy}", units.format_duration(r["measured_s"]), units.format_duration(r["fitted_s"]),
                        _pct(r["error_frac"]) + ("" if r.get("used", True) else " (not fitted)"),
                        _rate(r.get("measured_rate"), r.get("rate_unit", "")),
                        _rate(r.get("fitted_rate"), r.get("rate_unit", ""))][:ncol])
        print_table(out, list(cols), title=title, justify=["left"] + ["right"] * (ncol - 1))

    table("gemm", "GEMM: t = flop / ceiling + kernel time")
    table("memory", "memory copies: t = traffic / bandwidth (plateau sizes fitted)")
    table("collective", "collectives: model time with the level's fitted bus bandwidth and hop latency",
          cols=("collective", "n", "measured", "model", "error", "measured busbw", "model busbw"))
    by_size = rep.get("collective_residuals_by_size") or []
    for key in sorted({(r["level"], r["collective"]) for r in by_size}):
        print(f"{key[1]} {key[0]}: model vs measured by message size (median): " + "; ".join(
            f">= {units.format_bytes(r['size_from_bytes'])} {_pct(r['median_error_frac'])}"
            for r in by_size if (r["level"], r["collective"]) == key))
    reg = rep.get("collective_regimes") or {}
    if reg.get("kept"):
        print(f"two message-size regimes, split at {units.format_bytes(reg['split_at_bytes'])}: small messages "
              + ", ".join(f"{k.split('.', 1)[1]} {_fmt_value(v, 'bytes/s' if 'bytes_per_s' in k else 's')}"
                          for k, v in reg["small"].items()))
    p2p = rep.get("p2p") or []
    if p2p:
        print_table([[f"{r['src']} -> {r['dst']}", r["host"], r.get("path") or "-", units.format_bytes(r["bytes"]),
                      units.format_rate_bytes(r["bytes_per_s"]), units.format_duration(r["small_time_s"]),
                      "SLOW" if r["slow"] else ""] for r in p2p],
                    ["pair", "host", "path", "size", "bandwidth", f"time at {units.format_bytes(p2p[0]['small_bytes'])}",
                     "flag"], title="point-to-point (one direction, per pair)")
    table("dataloader", "data loader: samples/s = cores x loader_core_eff_frac / CPU cost per sample")
    table("ddp_baseline", "one-rank DDP baselines (compute only): the full model on the calibrated machine",
          cols=("workload", "n", "measured", "fitted", "error"))

    prow = []
    for f in d["fitted"]:
        std = f["std"]
        rel = f" ({100 * std / f['value']:.0f}%)" if std is not None and f["value"] else ""
        prow.append([f["name"], _fmt_value(f["value"], f["unit"]), ("± " + _fmt_value(std, f["unit"]) + rel)
                     if std is not None else "-", f["sets"], f"{f['records']}" + (f" ({f['noisy_records']} noisy)"
                                                                                   if f["noisy_records"] else "")])
    if prow:
        print_table(prow, ["parameter", "value", "± std", "sets", "records"], title="fitted parameters")

    h = d["held_out"]
    if h.get("records"):
        rows = []
        for r in h["records"]:
            rows.append([f"{r['workload']} batch {r['per_rank_batch']} x {r['n_ranks']}"
                         + (f" ({r['n_nodes']} nodes)" if r["n_nodes"] > 1 else ""),
                         f"{units.format_duration(r['measured_s'])} ({units.format_duration(r['measured_p10_s'])}-"
                         f"{units.format_duration(r['measured_p90_s'])})" + (" noisy" if r["noisy"] else ""),
                         units.format_duration(r["predicted_s"]), _pct(r["error_frac"]),
                         units.format_duration(r["anchored_s"]) + f" ({_pct(r['anchored_error_frac'])})"
                         if r.get("anchored_s") else "-",
                         units.format_duration(r["measured_single_rank_s"]) if r.get("measured_single_rank_s") else "-",
                         units.format_duration(r["measured_no_sync_s"]) if r.get("measured_no_sync_s") else "-"])
        print_table(rows, ["held-out DDP step", "measured median (p10-p90)", "predicted", "error",
                           "anchored on 1 rank", "measured 1 rank", "measured no_sync"],
                    title="held-out DDP steps (sync=True; not used by the fit)",
                    justify=["left", "right", "right", "right", "right", "right", "right"])
    for s in h.get("skipped") or []:
        print(f"  not predicted: {s}")
    print(cal.held_out_line())
    a = h.get("anchored") or {}
    if a.get("n"):
        print(f"  anchored on the measured one-rank step (tests communication and synchronisation only): median "
              f"{100 * a['median_abs_error_frac']:.1f}% (n={a['n']})")
    if h.get("n"):
        print(f"  spread: p90 {100 * h['p90_abs_error_frac']:.1f}%, max {100 * h['max_abs_error_frac']:.1f}%, median "
              f"signed {100 * h['median_error_frac']:+.1f}%")
    for n in d.get("notes") or []:
        print(f"note: {n}")
