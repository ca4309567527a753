"""``gpusim topo FILE``: read `nvidia-smi topo -m`, warn about slow paths, and say what all-reduce to expect."""

from __future__ import annotations

ORDER = 27


def register(sub) -> None:
    p = sub.add_parser("topo", help="read `nvidia-smi topo -m`: slow paths and the all-reduce to expect",
                       description="Parse the output of `nvidia-smi topo -m` (and optionally `nvidia-smi topo -p2p r`), "
                                   "warn about paths that will slow gradient exchange (SYS, missing peer-to-peer, "
                                   "partial NVLink), and, given the GPU model, predict the all-reduce bus bandwidth.")
    p.add_argument("file", help="a file with the output of `nvidia-smi topo -m` ('-' for standard input)")
    p.add_argument("--p2p", metavar="FILE", help="the output of `nvidia-smi topo -p2p r` (peer-to-peer read support)")
    p.add_argument("--gpu", help="GPU id, to predict the all-reduce this topology gives (`gpusim hw list --kind gpu`)")
    p.add_argument("--bytes", default="1GiB", help="all-reduce message size for the prediction (default 1GiB)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_topo)


def read_text(path: str) -> str:
    import sys

    from gpusim.checks import read_text as read_checked

    if path == "-":
        return sys.stdin.read(64 * 1024 * 1024)
    return read_checked(path, "`nvidia-smi topo -m` output")


def load_topology(path: str, p2p_path: str | None = None):
    from gpusim.topology import parse_topo

    return parse_topo(read_text(path), read_text(p2p_path) if p2p_path else None)


def scenario_fields(topo) -> dict:
    """Scenario fields a parsed topology fixes: how the GPUs are wired and whether they have peer-to-peer."""
    summ = topo.summary()
    fields = {"intra_topology": summ["intra_topology"] if summ["intra_topology"] != "single" else None}
    if summ.get("p2p_unsupported_pairs"):
        fields["p2p"] = False
    return fields


def cmd_topo(args) -> int:
    from gpusim import units
    from gpusim.commands._common import load_db, parse_flag, print_json
    from gpusim.simulation import collective

    topo = load_topology(args.file, args.p2p)
    summ = topo.summary()
    warnings = topo.warnings()
    out = {"summary": summ, "warnings": warnings}
    if args.gpu:
        size = parse_flag(units.parse_bytes, args.bytes, "--bytes")
        fields = scenario_fields(topo)
        db = load_db(args)
        rows = collective("all_reduce", [size], gpu=args.gpu, gpus=max(1, summ["n_gpus"]), nodes=1,
                          intra_topology=fields["intra_topology"], p2p=fields.get("p2p"), db=db)
        out["all_reduce"] = rows[0]
    if args.json:
        print_json(out)
        return 0
    print(f"{summ['n_gpus']} GPUs, {summ['n_nics']} NICs; gpusim reads this as intra_topology "
          f"'{summ['intra_topology']}'")
    print("GPU pairs by path: " + ", ".join(f"{k} x{v}" for k, v in sorted(summ["gpu_pair_paths"].items())))
    if summ.get("best_ring_worst_path"):
        print(f"best ring {summ['best_ring_order']}: slowest hop {summ['best_ring_worst_path']}")
    for w in warnings:
        print(f"warning: {w}")
    if not warnings:
        print("no warnings: every GPU pair has a direct path")
    if "all_reduce" in out:
        r = out["all_reduce"]
        print(f"expected all-reduce of {units.format_bytes(r['bytes'])} on {r['n_ranks']} x {args.gpu}: "
              f"{units.format_duration(r['time_s'])}, bus bandwidth {units.format_rate_bytes(r['busbw_bytes_per_s'])} "
              f"({r['algorithm']}, path class {r['intra_path']})")
    return 0
