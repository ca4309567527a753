"""``gpusim hw list | show ID | validate DIR``: browse and check the hardware database."""

from __future__ import annotations

ORDER = 10

KINDS = ("gpu", "link", "node", "cluster", "price", "energy")


def register(sub) -> None:
    p = sub.add_parser("hw", help="browse and validate the hardware database",
                       description="Browse the hardware database (GPUs, links, nodes, clusters, prices) "
                                   "and validate your own hardware files.")
    hw = p.add_subparsers(dest="hw_command", metavar="ACTION")

    ls = hw.add_parser("list", help="list entries with their key figures")
    ls.add_argument("--kind", choices=KINDS, help="only this kind")
    ls.add_argument("--json", action="store_true", help="print JSON (every field, with sources)")
    ls.set_defaults(func=cmd_list)

    show = hw.add_parser("show", help="every field of one entry, with its sources")
    show.add_argument("id")
    show.add_argument("--json", action="store_true")
    show.set_defaults(func=cmd_show)

    val = hw.add_parser("validate", help="validate a directory of your own YAML files")
    val.add_argument("dir")
    val.set_defaults(func=cmd_validate)
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])


def _summary(kind: str, e, db) -> dict:
    """The key numbers of one entry, in the units of the files."""
    if kind == "gpu":
        t = e.dense_tflop_per_s
        return {"memory_gib": e.memory_gib, "memory_gbyte_per_s": e.memory_gbyte_per_s,
                "bf16_or_fp16_tflop_per_s": t.bf16 or t.fp16, "fp32_tflop_per_s": t.fp32,
                "peer_link_gbyte_per_s_per_direction": e.peer_link.gbyte_per_s_per_direction if e.peer_link else None,
                "pcie": f"gen{e.pcie.generation} x{e.pcie.lanes}", "tdp_w": e.tdp_w, "release_year": e.release_year}
    if kind == "link":
        return {"link_kind": e.kind, "bandwidth_gbyte_per_s_per_direction": e.bandwidth_gbyte_per_s_per_direction,
                "latency_us": e.latency_us, "scope": e.scope}
    if kind == "node":
        return {"gpu": e.gpu, "gpus_per_node": e.gpus_per_node, "intra_link": e.intra_link,
                "intra_topology": e.intra_topology, "nic_link": e.nic_link, "nics_per_node": e.nics_per_node,
                "cpu_cores": e.cpu_cores, "ram_gib": e.ram_gib}
    if kind == "cluster":
        return {"node": e.node, "max_nodes": e.max_nodes, "inter_link": e.inter_link,
                "oversubscription": e.oversubscription}
    if kind == "price":
        return {"price_kind": e.kind, "node": e.node, "gpu": e.gpu, "usd_per_gpu_hour": e.usd_per_gpu_hour,
                "usd": e.usd, "pricing": e.pricing, "date": e.date.isoformat()}
    if kind == "energy":
        return {"usd_per_kwh": e.usd_per_kwh, "pue": e.pue, "date": e.date.isoformat()}
    raise AssertionError(kind)


def cmd_list(args) -> int:
    from gpusim.commands._common import load_db, print_json

    db = load_db(args)
    rows = [(kind, e) for kind, e in db.entries(args.kind)]
    if args.json:
        print_json([{"kind": kind, "id": e.id, "name": e.name, **_summary(kind, e, db),
                     "sources": [s.model_dump(mode="json", exclude_none=True) for s in e.sources],
                     "origin": db.origin[(kind, e.id)]} for kind, e in rows])
        return 0
    from gpusim.textable import render

    kinds = [args.kind] if args.kind else list(KINDS)
    printed = False
    for kind in kinds:
        entries = [e for k, e in rows if k == kind]
        if not entries:
            continue
        first = _summary(kind, entries[0], db)
        # [issue 20] plain aligned text, the name last (gpusim.textable): rich's wrapped tables took ~0.5 s here
        cols = ["id", *(_HEADERS.get(k, k) for k in first), "name"]
        table_rows = [[e.id, *(_fmt(v) for v in _summary(kind, e, db).values()), e.name] for e in entries]
        if printed:
            print()
        print(render(table_rows, cols, title=f"{kind} ({len(entries)})"))
        printed = True
    return 0


_HEADERS = {
    "memory_gib": "mem GiB", "memory_gbyte_per_s": "mem GB/s", "bf16_or_fp16_tflop_per_s": "bf16/fp16 TFLOP/s",
    "fp32_tflop_per_s": "fp32 TFLOP/s", "peer_link_gbyte_per_s_per_direction": "NVLink GB/s/dir",
    "tdp_w": "TDP W", "release_year": "year", "bandwidth_gbyte_per_s_per_direction": "GB/s/dir",
    "latency_us": "latency µs", "gpus_per_node": "GPUs", "intra_topology": "topology", "nics_per_node": "NICs",
    "cpu_cores": "cores", "ram_gib": "RAM GiB", "link_kind": "kind", "price_kind": "kind", "usd_per_gpu_hour": "USD/GPU-h", "usd_per_kwh": "USD/kWh",
}


def _fmt(v):
    if isinstance(v, float):
        return f"{v:g}"
    return v


def cmd_show(args) -> int:
    import yaml

    from gpusim.commands._common import load_db, print_json

    db = load_db(args)
    kind, entry = db.find(args.id)
    data = entry.model_dump(mode="json", exclude_none=True)
    data["sources"] = data.pop("sources")  # last: the figures first, then where they came from
    if args.json:
        print_json({"kind": kind, **data, "origin": db.origin[(kind, entry.id)]})
        return 0
    print(f"# {kind} {entry.id}  (from {db.origin[(kind, entry.id)]})")
    print(yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=110).rstrip())
    return 0


def cmd_validate(args) -> int:
    from pathlib import Path

    from gpusim.errors import HardwareFileError
    from gpusim.hwdb import validate_dir

    d = Path(args.dir)
    if not d.exists():
        raise HardwareFileError(f"{d}: no such file or directory")
    db = validate_dir(d)
    mine = [(k, i) for (k, i), origin in db.origin.items() if Path(origin).resolve().is_relative_to(d.resolve())]
    over = [o for o in db.overridden if (o[0], o[1]) in mine]
    print(f"{d}: OK, {len(mine)} entr{'y' if len(mine) == 1 else 'ies'} valid"
          + (f"; overriding shipped {', '.join(f'{k} {i!r}' for k, i, _ in over)}" if over else ""))
    return 0
