"""``gpusim models [--json] [--seq-len N] [--model ID]``: the model catalogue."""

from __future__ import annotations

ORDER = 15


def register(sub) -> None:
    p = sub.add_parser("models", help="list the model catalogue (parameters, FLOPs, activation memory)",
                       description="List the workloads gpusim knows: parameters, forward FLOPs and activation "
                                   "memory per sample (16-bit activations), and where the numbers come from. "
                                   "--model shows one entry with its roofline layer groups.")
    p.add_argument("--json", action="store_true", help="print JSON (every field, SI units, with sources)")
    p.add_argument("--seq-len", type=int, metavar="N",
                   help="evaluate sequence models at N tokens per sample (fixed-size models are unchanged)")
    p.add_argument("--model", metavar="ID", help="show one model with its layer groups")
    p.set_defaults(func=cmd_models)


def _at_seq_len(w, seq_len):
    return w.with_seq_len(seq_len) if seq_len is not None and w.supports_seq_len else w


def _si(x: float, unit: str) -> str:
    """``_si(6.74e9, "") == '6.74 G'`` (decimal prefixes for counts)."""
    from gpusim import units

    for scale, prefix in ((units.PETA, "P"), (units.TERA, "T"), (units.GIGA, "G"), (units.MEGA, "M"),
                          (units.KILO, "k")):
        if abs(x) >= scale:
            return f"{x / scale:.3g} {prefix}{unit}"
    return f"{x:.3g} {unit}".rstrip()


def _cite(source: str) -> str:
    """The short form of a source: 'He et al. 2016', 'NVIDIA DeepLearningExamples ...'."""
    short = source.split(",")[0].split(" (")[0]
    return short if len(short) <= 48 else short[:47] + "…"


def cmd_models(args) -> int:
    from gpusim.commands._common import fmt, print_json, print_table
    from gpusim.errors import ScenarioError
    from gpusim.units import GIGA, MB, format_bytes
    from gpusim.workload import get_workload, list_workloads

    if args.seq_len is not None and args.seq_len < 1:
        raise ScenarioError(f"--seq-len must be a positive integer (got {args.seq_len})")
    if args.model:
        w = get_workload(args.model)
        w = w.with_seq_len(args.seq_len) if args.seq_len is not None else w
        if args.json:
            print_json({**w.summary(), "layers": [g.__dict__ for g in w.layers]})
            return 0
        print(f"# {w.id}: {w.name} ({w.family}, per {w.sample_unit}"
              + (f", {w.tokens_per_sample:g} tokens" if w.sample_unit == "sequence" else "") + ")")
        print(f"params {w.params / 1e6:.4g} M · forward {w.fwd_flop_per_sample / GIGA:.4g} GFLOP/sample · "
              f"activations {w.act_bytes_per_sample / MB:.4g} MB/sample "
              f"({w.act_ckpt_bytes_per_sample / MB:.4g} MB checkpointed) · {w.fwd_kernels} forward kernels")
        rows = [[g.kind, g.name, g.count, fmt(g.fwd_flop_per_sample / GIGA, 4), fmt(g.fwd_bytes_per_sample / MB, 4),
                 fmt(g.weight_bytes / MB, 4)] for g in w.layers]
        print_table(rows, ["kind", "group", "kernels", "GFLOP/sample", "act MB/sample", "weight MB"],
                    justify=["left", "left", "right", "right", "right", "right"])
        for s in w.sources:
            print(f"source: {s}")
        if w.notes:
            print(f"notes: {w.notes}")
        return 0

    ws = [_at_seq_len(w, args.seq_len) for w in list_workloads()]
    if args.json:
        print_json([w.summary() for w in ws])
        return 0
    rows = [[w.id, w.name, w.family, _si(w.params, ""), "" if w.seq_len is None else w.seq_len,
             _si(w.fwd_flop_per_sample, "FLOP"), format_bytes(w.act_bytes_per_sample),
             format_bytes(w.act_ckpt_bytes_per_sample), _cite(w.sources[0])] for w in ws]
    print_table(rows, ["id", "name", "family", "params", "seq", "fwd/sample", "act/sample", "ckpt act/sample",
                       "source"],
                justify=["left", "left", "left", "right", "right", "right", "right", "right", "left"],
                title=f"models ({len(ws)})",
                caption="per sample (an image or a sequence of `seq` tokens); FLOPs count a multiply-add as 2; "
                        "activations kept for backward at 16 bits, without and with full checkpointing")
    return 0
