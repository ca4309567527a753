"""``gpusim compare``: two or more scenarios side by side, and which difference explains most of the gap."""

from __future__ import annotations

ORDER = 22

_EPILOG = """\
scenarios are given as flag sets separated by --vs (each later set changes only what it names, on top of
the first), or as JSON files saved by `gpusim predict ... --json > FILE`, or both:
  gpusim compare --model resnet50 --gpu a100-sxm4-80gb --gpus 32 --nodes 4 --inter eth-25g --per-gpu-batch 64 \\
                 --vs --inter ib-hdr-200 --vs --per-gpu-batch 256
  gpusim compare run-a.json run-b.json
"""


import argparse

_NEED_TWO = ("compare needs at least two scenarios: flag sets separated by --vs, or saved `gpusim predict --json` "
             "files (see `gpusim compare --help`)")


def register(sub) -> None:
    p = sub.add_parser("compare", help="scenarios side by side, and which difference explains most of the gap",
                       usage="gpusim compare [--json] FLAGS_OR_FILE... [--vs FLAGS_OR_FILE...]...",
                       description="Predict two or more scenarios, print them side by side with the inputs that "
                                   "differ highlighted, and attribute each scenario's throughput gap to the first "
                                   "one change at a time (every change evaluated by the model on its own).",
                       epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--json", action="store_true", help="print the comparison as JSON")
    p.add_argument("items", nargs="*", metavar="SCENARIO",
                   help="flag sets separated by --vs, and/or files from `gpusim predict --json`")
    # every flag of `gpusim predict` (listed here for --help; parsed per --vs chunk by _scenario_parser)
    from gpusim.commands._scenario import add_layout_args, add_scenario_args

    add_scenario_args(p, batch_required=False)
    add_layout_args(p)
    p.add_argument("--name", help="a name for this scenario's column (default A, B, C ...)")
    p.set_defaults(func=cmd_compare, result=compare_result)
    p.__class__ = _RawItems  # the scenario flags are parsed per --vs chunk, not by this parser


class _RawItems(argparse.ArgumentParser):
    """Keeps every token (flags of the scenarios included, in order) as ``items``; only --json and --help are
    this parser's own."""

    def parse_known_args(self, args=None, namespace=None):
        args = list(args or [])
        if args in (["-h"], ["--help"]):
            return super().parse_known_args(args, namespace)
        ns = namespace or argparse.Namespace()
        ns.json = "--json" in args
        ns.items = [a for a in args if a != "--json"]
        for k, v in self._defaults.items():
            setattr(ns, k, v)
        return ns, []

    def error(self, message):
        self.exit(2, f"gpusim: error: {message} (see `{self.prog} --help`)\n")


def _scenario_parser():
    import argparse

    from gpusim.commands._common import Parser as _Parser
    from gpusim.commands._scenario import add_scenario_args

    from gpusim.commands._scenario import add_layout_args

    p = _Parser(prog="gpusim compare", add_help=False, argument_default=None)
    add_scenario_args(p, batch_required=False)
    add_layout_args(p)  # [issue 19] compare takes every flag predict takes
    p.add_argument("--name", help=argparse.SUPPRESS)
    return p


def _split(items: list[str]) -> list[list[str]]:
    chunks, cur = [], []
    for tok in items:
        if tok == "--vs":
            chunks.append(cur)
            cur = []
        else:
            cur.append(tok)
    chunks.append(cur)
    return chunks


def flatten_kwargs(scn) -> dict:
    d = scn.model_dump(exclude={"workload"})
    return {**{k: v for k, v in d.items() if k != "strategy"}, **d["strategy"]}


def parse_items(items: list[str], db, hwdb_dirs):
    """Scenarios, names and per-scenario params from the command line (see the epilog)."""
    from pathlib import Path

    from gpusim.checks import load_json
    from gpusim.commands._scenario import resolve
    from gpusim.comparison import scenario_from_json
    from gpusim.errors import ScenarioError

    if not items:
        raise ScenarioError(_NEED_TWO)
    scns, names, params = [], [], []
    base: list[str] | None = None
    parser = _scenario_parser()
    for chunk in _split(items):
        if not chunk:
            raise ScenarioError("compare: an empty scenario (two --vs in a row, or --vs at an end)")
        if all(not t.startswith("-") for t in chunk):  # one or more saved predictions
            for f in chunk:
                scn, cal_file = scenario_from_json(load_json(f, "saved prediction"), f)
                p = None
                if cal_file:  # the prediction was made with a calibration: replay it with the same parameters
                    from gpusim.calibration import load_calibration

                    _, p, _ = load_calibration(cal_file).apply(flatten_kwargs(scn), db)
                scns.append(scn)
                names.append(Path(f).stem)
                params.append(p)
            continue
        tokens = chunk if base is None else base + chunk
        if base is None:
            base = chunk
        ns = parser.parse_args(tokens)
        if ns.model is None:
            raise ScenarioError("compare: the first flag set needs --model (and --gpu or --node)")
        ns.hwdb = hwdb_dirs
        scn, _, p, _ = resolve(ns)
        scns.append(scn)
        names.append(ns.name or chr(ord("A") + len(names)))
        params.append(p)
    if len(scns) < 2:
        raise ScenarioError(_NEED_TWO)
    return scns, names, params


def compare_result(args):
    """The answer of ``gpusim compare`` for parsed flags (also :func:`gpusim.compare`): a CompareResult."""
    from gpusim.commands._common import load_db
    from gpusim.comparison import compare
    from gpusim.results import CompareResult

    db = load_db(args)
    scns, names, params = parse_items(list(args.items or []), db, getattr(args, "hwdb", None))
    return CompareResult(compare(scns, names=names, db=db, params_each=params))


def cmd_compare(args) -> int:
    from gpusim.commands._common import print_json

    out = compare_result(args)
    if args.json:
        print_json(out.to_dict())
        return 0
    print_comparison(out.data)
    return 0


def print_comparison(out: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    from gpusim.comparison import change_text, figures_for, format_figure, is_llm, is_number, relative_change, signed
    from gpusim.track_record import report_line

    con = Console(width=max(110, Console().width), highlight=False)
    names, results, flats = out["names"], out["results"], out["inputs"]
    t = Table(title="scenarios side by side (differences in yellow; figures against the first: green better, "
                    "red worse)", header_style="bold")
    t.add_column("")
    for n in names:
        t.add_column(n, justify="right")
    t.add_row("[bold]inputs that differ[/]", *[""] * len(names))
    for k in out["differs"]:
        t.add_row(k.removeprefix("strategy."),
                  *[(f"[yellow]{f.get(k)}[/]" if i and f.get(k) != flats[0].get(k) else str(f.get(k)))
                    for i, f in enumerate(flats)])
    t.add_row("[bold]predicted[/]", *[""] * len(names))
    for key, label, unit, higher in figures_for(results):
        cells = []
        for i, r in enumerate(results):
            v, v0 = r[key], results[0][key]
            text = format_figure(unit, v)
            if i and higher is not None and v != v0 and (isinstance(v, bool) or is_number(v) and is_number(v0)):
                better = (v > v0) == higher
                rel = relative_change(v0, v) if not isinstance(v, bool) else ""
                text = f"[{'green' if better else 'red'}]{text}{f' ({rel})' if rel else ''}[/]"
            elif i and higher is None and v != v0:
                text = f"[yellow]{text}[/]"
            cells.append(text)
        t.add_row(label, *cells)
    for part in results[0]["breakdown_s"]:
        t.add_row(f"  {part.removesuffix('_s')}",
                  *[f"{format_figure('s', r['breakdown_s'][part])} ({r['breakdown_s'][part] / r['step_s']:.0%})"
                    for r in results])
    con.print(t)
    # [stop 57] MFU is over each precision's own datasheet peak: across precisions it does not rank the scenarios
    from gpusim.strategy import PEAK_KEY, base_precision

    peaks = [PEAK_KEY.get(base_precision(str(f.get("strategy.precision"))), "?") for f in flats]
    if len(set(peaks)) > 1:
        con.print("MFU is over each scenario's own precision's dense datasheet peak (" + ", ".join(
            f"{n}: {k}" for n, k in zip(names, peaks)) + "): across precisions compare the throughput, not the MFU")
    llm = is_llm(results[0])
    ref_tok = results[0].get("tokens_per_s_per_gpu")
    for g in out["gaps"]:
        if llm and g.get("gap_tokens_per_s_per_gpu") is not None:  # [issue 19] LLMs in tokens/s per GPU and MFU
            m0, m1 = g["mfu_frac"]
            con.print(f"[bold]{g['name']} vs {g['reference']}[/]: tokens/s per GPU x{g['throughput_ratio']:.3g} "
                      f"({signed(g['gap_tokens_per_s_per_gpu'])}), MFU {m0:.1%} -> {m1:.1%}; one change at a time on "
                      f"{g['reference']}:")
        else:
            con.print(f"[bold]{g['name']} vs {g['reference']}[/]: throughput x{g['throughput_ratio']:.3g} "
                      f"({signed(g['gap_samples_per_s'])} samples/s); one change at a time on {g['reference']}:")
        for c in g["changes"]:
            if c["effect_samples_per_s"] is None:
                con.print(f"  {change_text(c)}: {c['note']}")
                continue
            share = f", {c['share_of_gap_frac']:.0%} of the gap" if c["share_of_gap_frac"] is not None else ""
            note = f" ({c['note']})" if c["note"] else ""
            if llm and c.get("alone_tokens_per_s_per_gpu") is not None and ref_tok is not None:
                effect = f"{signed(c['alone_tokens_per_s_per_gpu'] - ref_tok)} tokens/s per GPU"
            else:
                effect = f"{signed(c['effect_samples_per_s'])} samples/s"
            con.print(f"  {change_text(c)}: {effect}{share}{note}")
        if g["explains_most"] is not None and len(g["changes"]) > 1:
            gap = g["gap_samples_per_s"]
            joint = (f"{g['interaction_samples_per_s'] / gap:+.0%} of the gap" if llm and gap
                     else f"{signed(g['interaction_samples_per_s'])} samples/s")
            con.print(f"  -> [bold]{change_text(g['explains_most'])}[/] explains most of the gap; the changes "
                      f"together add {joint} beyond the sum of their separate effects")
        rec = g.get("track_record")
        if rec and "reason" not in rec:  # [stop 47] the published A/B comparisons' band (track_record.what_if_record)
            lo, hi = rec.get("throughput_ratio_range") or (None, None)
            here = f"{g['name']} at x{lo:.2f} to x{hi:.2f} {g['reference']}'s speed" if lo is not None else None
            con.print(f"  track record: {report_line(rec, here=here)}", markup=False)
