"""``gpusim comm``: what a collective should cost on given hardware (nccl-tests bus bandwidth terms)."""

from __future__ import annotations

ORDER = 25


def register(sub) -> None:
    p = sub.add_parser("comm", help="predicted time and bus bandwidth of a collective",
                       description="Time, algorithm bandwidth and bus bandwidth (nccl-tests definitions) of one "
                                   "collective per message size.")
    p.add_argument("--collective", default="all_reduce",
                   choices=("all_reduce", "reduce_scatter", "all_gather", "broadcast", "reduce", "send_recv"))
    p.add_argument("--gpu")
    p.add_argument("--node")
    p.add_argument("--gpus", type=int, default=8)
    p.add_argument("--nodes", type=int, default=1)
    p.add_argument("--intra")
    p.add_argument("--intra-topology", choices=("nvswitch", "nvlink-mesh", "nvlink-bridge-pairs", "pcie-switch",
                                                "pcie-host", "pcie-cross-socket"))
    p.add_argument("--inter")
    p.add_argument("--algorithm", default="auto", choices=("auto", "ring", "tree", "nvls", "hierarchical"))
    p.add_argument("--bytes", action="append", required=True, metavar="SIZE",
                   help="message size: 1073741824, 25MiB, 1GB (repeatable; comma-separated lists allowed)")
    p.add_argument("--calibration", metavar="FILE")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_comm)


def cmd_comm(args) -> int:
    from gpusim import units
    from gpusim.commands._common import load_db, parse_flag, print_json, print_table
    from gpusim.errors import ScenarioError
    from gpusim.simulate import collective

    sizes = [parse_flag(units.parse_bytes, part, "--bytes") for item in args.bytes for part in item.split(",")]
    if args.gpus < 1 or args.nodes < 1:
        raise ScenarioError("--gpus and --nodes must be at least 1")
    db = load_db(args)
    params = None
    if args.calibration:
        from gpusim.calibration import load_calibration

        cal = load_calibration(args.calibration)
        kw, params, db = cal.apply({"gpu": args.gpu, "node": args.node}, db)
        args.gpu, args.node = kw.get("gpu"), kw.get("node")
    rows = collective(args.collective, sizes, gpu=args.gpu, node=args.node, gpus=args.gpus, nodes=args.nodes,
                      intra=args.intra, inter=args.inter, intra_topology=args.intra_topology, algorithm=args.algorithm,
                      db=db, params=params)
    if args.json:
        print_json(rows if len(rows) > 1 else rows[0])
        return 0
    table = [[units.format_bytes(r["bytes"]), units.format_duration(r["time_s"]),
              units.format_rate_bytes(r["algbw_bytes_per_s"]), units.format_rate_bytes(r["busbw_bytes_per_s"]),
              r["algorithm"]] for r in rows]
    r0 = rows[0]
    print_table(table, ["size", "time", "algbw", "busbw", "algorithm"],
                title=f"{args.collective} on {r0['n_ranks']} GPUs ({r0['n_nodes']} node(s); intra {r0['intra_path']}, "
                      f"inter {r0['inter_path'] or '-'})", justify=["right"] * 4 + ["left"])
    return 0
