"""``gpusim comm``: what a collective should cost on given hardware (nccl-tests bus bandwidth terms)."""

from __future__ import annotations

ORDER = 25

_COLLECTIVES = ("all_reduce", "reduce_scatter", "all_gather", "broadcast", "reduce", "send_recv", "all_to_all")


def register(sub) -> None:
    p = sub.add_parser("comm", help="predicted time and bus bandwidth of a collective",
                       description="Time, algorithm bandwidth and bus bandwidth (nccl-tests definitions) of one "
                                   "collective per message size, with the algorithm and protocol NCCL's tuner would "
                                   "pick; --measured puts an nccl-tests output beside it.")
    p.add_argument("--collective", default="all_reduce", choices=_COLLECTIVES)
    p.add_argument("--gpu")
    p.add_argument("--node")
    p.add_argument("--gpus", type=int, default=8)
    p.add_argument("--nodes", type=int, default=1)
    p.add_argument("--intra")
    p.add_argument("--intra-topology", choices=("nvswitch", "nvlink-mesh", "nvlink-bridge-pairs", "pcie-switch",
                                                "pcie-host", "pcie-cross-socket"))
    p.add_argument("--inter")
    p.add_argument("--nics-per-node", type=int, metavar="N", help="NICs per node used by the GPUs (default: the node's)")
    p.add_argument("--oversubscription", type=float, default=1.0, metavar="X",
                   help="network oversubscription (fat tree: 1 = non-blocking, 2 = half the bisection)")
    p.add_argument("--algorithm", default="auto",
                   choices=("auto", "ring", "tree", "nvls", "nvls_tree", "collnet", "hierarchical", "p2p"))
    p.add_argument("--protocol", default="auto", choices=("auto", "ll", "ll128", "simple"))
    p.add_argument("--host-cpu", choices=("intel", "amd", "other"),
                   help="the nodes' host CPU as NCCL's tuner reads it (default: from the node's cpu_model; 'other' "
                        "for Arm such as Grace): across nodes it sets the network post overhead of every ring step "
                        "and the LL protocol's bandwidth cap")
    p.add_argument("--gpus-per-thread", type=int, metavar="G",
                   help="GPUs one CPU thread launches the collective on (nccl-tests -g; default: the --measured "
                        "file's nGpus, else 1 = a process per GPU): small messages are then CPU-bound")
    p.add_argument("--bytes", action="append", metavar="SIZE",
                   help="message size: 1073741824, 25MiB, 1GB; a list (1MiB,64MiB) or a sweep doubling from one size "
                        "to another (1KiB..16GiB); repeatable. Default: the sizes of --measured, else 1KiB..16GiB")
    p.add_argument("--measured", metavar="FILE",
                   help="nccl-tests output (text or -J JSON) to print beside the prediction, with the error per size")
    p.add_argument("--calibration", metavar="FILE")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_comm, result=lambda a: comm_result(a)[0])


def parse_sizes(items: list[str]) -> list[float]:
    """Sizes from ``--bytes`` values: single sizes, comma lists and ``A..B`` doubling sweeps (both ends included)."""
    from gpusim import units
    from gpusim.commands._common import parse_flag
    from gpusim.errors import ScenarioError

    out: list[float] = []
    for item in items:
        for part in item.split(","):
            if ".." in part:
                lo_s, hi_s = part.split("..", 1)
                lo, hi = parse_flag(units.parse_bytes, lo_s, "--bytes"), parse_flag(units.parse_bytes, hi_s, "--bytes")
                if lo <= 0 or hi < lo:
                    raise ScenarioError(f"--bytes {part!r}: a sweep needs 0 < start <= end (e.g. 1KiB..16GiB)")
                if hi / lo > 2.0 ** 60:
                    raise ScenarioError(f"--bytes {part!r}: too many sizes (at most 60 doublings)")
                s = lo
                while s <= hi * (1 + 1e-12):
                    out.append(s)
                    s *= 2.0
            else:
                out.append(parse_flag(units.parse_bytes, part, "--bytes"))
    if any(s <= 0 for s in out):
        raise ScenarioError("--bytes: message sizes must be positive (e.g. 4096, 25MiB, 1KiB..1GiB)")
    return out


def _measured(path: str, collective: str):
    from gpusim.errors import ScenarioError
    from gpusim.nccl_tests import parse_file

    runs = parse_file(path)
    usable = [r for r in runs if r.rows and (r.collective in (None, collective))]
    if not usable:
        names = sorted({r.collective or r.binary for r in runs})
        raise ScenarioError(f"--measured {path}: no {collective} table in it (found: {', '.join(names) or 'none'}); "
                            "pass --collective to match the file")
    return usable[0]


def comm_result(args):
    """The answer of ``gpusim comm`` for parsed flags (also :func:`gpusim.comm`): a CommResult, and the measured run."""
    from gpusim.commands._common import load_db
    from gpusim.errors import ScenarioError
    from gpusim.results import CommResult
    from gpusim.simulation import collective

    if args.gpus < 1 or args.nodes < 1:
        raise ScenarioError("--gpus and --nodes must be at least 1")
    if args.nics_per_node is not None and not 1 <= args.nics_per_node <= 72:
        raise ScenarioError("--nics-per-node must be between 1 and 72")
    if not 1.0 <= args.oversubscription <= 16.0:
        raise ScenarioError("--oversubscription must be between 1 (non-blocking) and 16")
    run = _measured(args.measured, args.collective) if args.measured else None
    if args.bytes:
        sizes = parse_sizes(args.bytes)
    elif run is not None:
        sizes = [r.size_bytes for r in run.rows if r.size_bytes > 0]
    else:
        sizes = parse_sizes(["1KiB..16GiB"])
    db = load_db(args)
    params = None
    if args.calibration:
        from gpusim.calibration import load_calibration

        cal = load_calibration(args.calibration)
        kw, params, db = cal.apply({"gpu": args.gpu, "node": args.node}, db)
        args.gpu, args.node = kw.get("gpu"), kw.get("node")
    rows = collective(args.collective, sizes, gpu=args.gpu, node=args.node, gpus=args.gpus, nodes=args.nodes,
                      intra=args.intra, inter=args.inter, intra_topology=args.intra_topology,
                      nics_per_node=args.nics_per_node, oversubscription=args.oversubscription, algorithm=args.algorithm,
                      protocol=args.protocol, db=db, params=params, host_cpu=getattr(args, "host_cpu", None),
                      gpus_per_thread=(args.gpus_per_thread if getattr(args, "gpus_per_thread", None) is not None
                                       else run.gpus_per_thread if run is not None else 1))
    if run is not None:
        by_size = {r.size_bytes: r for r in run.rows}
        for r in rows:
            m = by_size.get(r["bytes"])
            r["measured_busbw_bytes_per_s"] = m.busbw_bytes_per_s if m else None
            r["error_frac"] = (r["busbw_bytes_per_s"] / m.busbw_bytes_per_s - 1.0
                               if m and m.busbw_bytes_per_s > 0 else None)
    from gpusim import track_record

    # the band's sweeps are all-reduce and all-to-all ones from 32 KiB, of systems with GPU peer-to-peer: no band
    # for other collectives, for sizes all below that, or for a host-staged path (no SHM system among the sweeps)
    from gpusim.validation_comm import MIN_BYTES

    covered = (args.collective in ("all_reduce", "all_to_all") and any(r["bytes"] >= MIN_BYTES for r in rows)
               and not any(r.get("intra_path") == "host-staged" for r in rows))
    if covered:
        record = track_record.record_for(track_record.load().get("collectives"), "collectives")
    else:
        record = {"key": "collectives", "reason": "none: gpusim's collective sweeps hold no run of this kind (they "
                                                  "are all-reduce and all-to-all sweeps from 32 KiB of systems with "
                                                  "GPU peer-to-peer)"}
    return CommResult(rows, track_record=record), run


def cmd_comm(args) -> int:
    from gpusim import units
    from gpusim.commands._common import print_json, print_table

    out, run = comm_result(args)
    rows = out.rows
    if args.json:
        print_json(out.to_dict())
        return 0
    head = ["size", "time", "algbw", "busbw", "algorithm", "protocol"]
    table = [[units.format_bytes(r["bytes"]), units.format_duration(r["time_s"]),
              units.format_rate_bytes(r["algbw_bytes_per_s"]), units.format_rate_bytes(r["busbw_bytes_per_s"]),
              r["algorithm"], r["protocol"]] for r in rows]
    if run is not None:
        head += ["measured busbw", "error"]
        for line, r in zip(table, rows):
            m = r["measured_busbw_bytes_per_s"]
            line += [units.format_rate_bytes(m) if m else "-",
                     f"{100 * r['error_frac']:+.0f}%" if r["error_frac"] is not None else "-"]
    r0 = rows[0]
    print_table(table, head,
                title=f"{args.collective} on {r0['n_ranks']} GPUs ({r0['n_nodes']} node(s); intra {r0['intra_path']}, "
                      f"inter {r0['inter_path'] or '-'}" + (f"; host CPU {r0['host_cpu']}" if r0["n_nodes"] > 1 else "")
                      + ")", justify=["right"] * 4 + ["left"] * 2 + ["right"] * 2)
    if run is not None:
        errs = sorted(abs(r["error_frac"]) for r in rows if r["error_frac"] is not None)
        if errs:
            mid = errs[len(errs) // 2] if len(errs) % 2 else 0.5 * (errs[len(errs) // 2 - 1] + errs[len(errs) // 2])
            print(f"measured {run.source}: {len(errs)} sizes, median |error| {100 * mid:.1f}%, "
                  f"largest {100 * errs[-1]:.1f}%")
    from gpusim.commands._common import print_track_record

    print_track_record(out.track_record)
    return 0
