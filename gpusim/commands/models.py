"""``gpusim models [--json] [--seq-len N] [--model ID]``: the model catalogue; ``gpusim models show
ID_OR_PATH [--seq-len N] [--json]``: one model (a catalogue id or a Hugging Face config.json) in detail."""

from __future__ import annotations

import argparse

ORDER = 15


def register(sub) -> None:
    p = sub.add_parser("models", help="list the model catalogue; `models show ID_OR_PATH` explains one model",
                       usage="gpusim models [--json] [--seq-len N] [--model ID]\n"
                             "       gpusim models show ID_OR_CONFIG_JSON [--seq-len N] [--json]",
                       description="List the workloads gpusim knows: parameters, forward FLOPs and activation "
                                   "memory per sample (16-bit activations), and where the numbers come from. "
                                   "`models show ID_OR_PATH` (or --model) shows one model, a catalogue id or a "
                                   "Hugging Face config.json: parameters (total and active), the per-layer "
                                   "breakdown, FLOPs per token in both conventions, activation bytes and what "
                                   "was assumed.")
    p.add_argument("action", nargs="?", choices=["show"], help=argparse.SUPPRESS)
    p.add_argument("target", nargs="?", metavar="ID_OR_PATH", help=argparse.SUPPRESS)
    p.add_argument("--json", action="store_true", help="print JSON (every field, SI units, with sources)")
    from gpusim.commands._scenario import scenario_type

    p.add_argument("--seq-len", type=scenario_type("seq_len"), metavar="N",
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
    if args.action == "show" and not args.target:
        raise ScenarioError("`gpusim models show` needs a model: a catalogue id (`gpusim models` lists them) or "
                            "the path of a config.json")
    if args.target and args.action != "show":
        raise ScenarioError(f"unknown models action {args.target!r}: use `gpusim models show ID_OR_PATH`")
    target = args.target or args.model
    if target:
        w = get_workload(target)
        w = w.with_seq_len(args.seq_len) if args.seq_len is not None else w
        return _show(w, args.json)

    ws = [_at_seq_len(w, args.seq_len) for w in list_workloads()]
    if args.json:
        print_json([w.summary() for w in ws])
        return 0
    rows = [[w.id, w.name, w.family, _si(w.params, "") + (f" ({_si(w.params_active, '')} active)" if w.is_moe else ""),
             "" if w.seq_len is None else w.seq_len,
             _si(w.fwd_flop_per_sample, "FLOP"), format_bytes(w.act_bytes_per_sample),
             format_bytes(w.act_ckpt_bytes_per_sample), _cite(w.sources[0])] for w in ws]
    print_table(rows, ["id", "name", "family", "params", "seq", "fwd/sample", "act/sample", "ckpt act/sample",
                       "source"],
                justify=["left", "left", "left", "right", "right", "right", "right", "right", "left"],
                title=f"models ({len(ws)})",
                caption="per sample (an image or a sequence of `seq` tokens); FLOPs count a multiply-add as 2; "
                        "activations kept for backward at 16 bits, without and with full checkpointing")
    return 0


def _show(w, as_json: bool) -> int:
    """One model: totals, the per-part breakdown, FLOPs per token in both conventions, layer groups,
    assumptions and sources."""
    import dataclasses

    from gpusim.commands._common import fmt, print_json, print_table
    from gpusim.units import GIGA, MB, format_bytes
    from gpusim.workload.flops import breakdown, flops_per_token

    spec = w.transformer
    per_token = w.tokens_per_sample if w.sample_unit == "sequence" else 1.0
    conv = flops_per_token(spec, w.seq_len) if spec is not None and w.seq_len else None
    parts = breakdown(w)
    if as_json:
        data = {**w.summary(), "layers": [g.__dict__ for g in w.layers], "breakdown": parts,
                "fwd_flop_per_token": w.fwd_flop_per_sample / per_token,
                "act_bytes_per_token": w.act_bytes_per_sample / per_token,
                "flops_per_token": conv,
                "transformer": None if spec is None else dataclasses.asdict(spec)}
        print_json(data)
        return 0
    unit = f", {w.tokens_per_sample:g} tokens" if w.sample_unit == "sequence" else ""
    print(f"# {w.id}: {w.name} ({w.family}, per {w.sample_unit}{unit})")
    if w.is_moe:
        print(f"parameters     {_si(w.params, '')} total ({w.params:,.0f}), {_si(w.params_active, '')} active per token "
              f"({spec.n_experts} experts, top-{spec.top_k}, {spec.n_shared_experts} shared; "
              f"{spec.n_moe_layers} of {spec.n_layers} layers are MoE)")
        cf = spec.moe_capacity_factor
        print("routing        " + (f"capacity factor {cf:g}: experts compute {cf:g}x the routed tokens (padded)" if cf
                                   else "dropless top-k (no capacity factor, Megatron-Core's default); experts "
                                        "assumed evenly loaded"))
    else:
        print(f"parameters     {_si(w.params, '')} ({w.params:,.0f})")
    mtp = getattr(spec, "mtp_layers", 0) or 0
    if mtp:  # [issue 17] the published counts leave the multi-token prediction modules out
        what = (f"{mtp} multi-token prediction pass(es) through one shared module" if getattr(spec, "mtp_shared", False)
                else f"{mtp} multi-token prediction module(s)")
        print(f"mtp            {what} trained with the model: "
              f"{_si(spec.mtp_params(), '')} parameters beside the model's {_si(w.params - spec.mtp_params(), '')} "
              f"(the count models are published by), {_si(spec.mtp_params(active=True), '')} active per token "
              f"(predict, sweep, plan: --mtp-layers 0 to train without)")
    per = "token" if w.sample_unit == "sequence" else w.sample_unit
    whole = f" ({w.fwd_flop_per_sample / GIGA:.4g} GFLOP per sample)" if per == "token" else ""
    print(f"forward        {_si(w.fwd_flop_per_sample / per_token, 'FLOP')} per {per}{whole}, "
          f"{w.fwd_kernels} forward kernels")
    if conv:
        print(f"training       {_si(conv['six_n_attention_flop_per_token'], 'FLOP')} per token as 6*N(active) + "
              f"attention (MFU in gpusim uses this); {_si(conv['megatron_flop_per_token'], 'FLOP')} as Megatron-LM's "
              f"num_floating_point_operations counts them (causal attention halved; NVIDIA's published TFLOP/s)")
    print(f"activations    {format_bytes(w.act_bytes_per_sample / per_token)} per {per} kept for backward, "
          f"{format_bytes(w.act_ckpt_bytes_per_sample / per_token)} with full checkpointing "
          f"({w.act_bytes_per_sample / MB:.4g} MB per sample)")
    if parts:
        moe = w.is_moe
        rows = [[r["part"], r["layers"] or "", _si(r["params"], ""), *([_si(r["active_params"], "")] if moe else []),
                 _si(r["fwd_flop_per_token"], "FLOP")] for r in parts]
        print_table(rows, ["part", "layers", "params", *(["active"] if moe else []), "fwd/token"],
                    justify=["left", "right", "right", *(["right"] if moe else []), "right"],
                    title="per part (summed over its layers)")
    rows = [[g.kind, g.name, g.count, fmt(g.fwd_flop_per_sample / GIGA, 4), fmt(g.fwd_bytes_per_sample / MB, 4),
             fmt(g.weight_bytes / MB, 4)] for g in w.layers]
    print_table(rows, ["kind", "group", "kernels", "GFLOP/sample", "act MB/sample", "weight MB"],
                justify=["left", "left", "right", "right", "right", "right"], title="roofline layer groups")
    for a in w.assumptions:
        print(f"assumed: {a}")
    for s in w.sources:
        print(f"source: {s}")
    if w.notes and not w.assumptions:
        print(f"notes: {w.notes}")
    return 0
