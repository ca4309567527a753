"""Collectives across systems: the model's bus bandwidth against published all-reduce and all-to-all sweeps, per system.

``validation/nccl_sweeps.csv`` holds nccl-tests / rccl-tests all-reduce sweeps of several systems (8x A100, 8x H200,
4 and 72 GPUs of GB200 NVL72, MI300X in one and two nodes, MI325X in 1-8 nodes, MI355X in two, H100 over
GPUDirect-TCPXO and RoCE, A100 over EFA and HDR InfiniBand, H200 and A100 in two OCI nodes over RoCE, a stated 8x B200
plateau), one row per message size, each with its source (``source_url``, commit where the source is a
file in a repository), and ``alltoall_perf`` results (``collective = all_to_all``: GB300 trays of one NVL72 rack,
MI355X in 1-4 nodes, 4 H100, 2x 8 A100 over RoCE). ``validation/README.md`` describes the columns. Each collective is
summarised on its own (:func:`summarize`: the all-reduce figures at the top level, as before the all-to-all rows came,
the others under ``by_collective``), so adding rows of one collective never moves another's figures.

The CSV's ``held_out`` column says whether a system's predictions were looked at while the collectives model was
being developed (``no``) or not (``yes``: nothing in the model was set or chosen with them in view); the two groups
are reported separately, and the held-out one is the test. No row of this file sets a default parameter.

Errors are absolute percentage errors of the predicted bus bandwidth (nccl-tests definition, ``2(n-1)/n`` x algbw
for all-reduce, ``(n-1)/n`` x algbw for all-to-all with algbw = one rank's whole buffer / time: NVIDIA/nccl-tests
``src/alltoall.cu``, ``AlltoAllGetBw``; sjeaugey in NVIDIA/nccl-tests issue 130), summarised over sizes of at least
:data:`MIN_BYTES` (smaller messages are latency-bound and a few microseconds of launch overhead dominate them).
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from gpusim import units
from gpusim.errors import GpusimError

#: smallest message size included in the error summaries (32 KiB)
MIN_BYTES = 32 * units.KIB

#: the collective whose summary is the top level of :func:`summarize` (the file held only all-reduce sweeps at first)
PRIMARY_COLLECTIVE = "all_reduce"

#: section titles of ``gpusim validate`` per collective
TITLES = {"all_reduce": "all-reduce bus bandwidth across systems",
          "all_to_all": "all-to-all bus bandwidth across systems"}

_COLUMNS = ("system", "source_id", "source_url", "collective", "gpu", "node", "gpus", "nodes", "inter", "nics_per_node",
            "size_bytes", "busbw_gbyte_per_s", "held_out")


def default_csv() -> Path:
    """The project's sweep file, ``validation/nccl_sweeps.csv``."""
    return Path(__file__).resolve().parent.parent / "validation" / "nccl_sweeps.csv"


@dataclass
class SweepRow:
    """One measured (or stated) size of one system's sweep with the model's prediction."""

    index: int
    system: str
    source_id: str
    gpus: int
    nodes: int
    size_bytes: float
    measured_gbyte_per_s: float
    held_out: bool
    collective: str = PRIMARY_COLLECTIVE
    kind: str = "measured"
    algorithm_reported: str = ""
    vendor: str = ""  # the GPU's vendor from the hardware database (held-out systems are reported per vendor)
    predicted_gbyte_per_s: float | None = None
    algorithm: str | None = None
    protocol: str | None = None
    error: str | None = None
    _: dict = field(default_factory=dict, repr=False)

    @property
    def ape(self) -> float | None:
        """Absolute percentage error as a fraction (None where not predicted)."""
        if self.predicted_gbyte_per_s is None or self.measured_gbyte_per_s <= 0:
            return None
        return abs(self.predicted_gbyte_per_s - self.measured_gbyte_per_s) / self.measured_gbyte_per_s


def load_rows(path: str | os.PathLike) -> list[dict]:
    """Rows of a sweep CSV; a missing column is a :class:`GpusimError` that names it."""
    from gpusim.checks import read_csv

    return read_csv(Path(path), _COLUMNS, "sweep CSV", "see validation/README.md")


def _params_for(params, gpu_id: str):
    return params(gpu_id) if callable(params) else params


def run(path: str | os.PathLike | None = None, *, db=None, params=None) -> list[SweepRow]:
    """Predict every row of the sweep file (``params``: a ModelParams, or a callable gpu id -> ModelParams, as the
    calibration's per-GPU transfer in ``gpusim validate --calibration``). Rows are grouped by configuration so each
    system's sizes are predicted in one vectorised call."""
    from gpusim.hwdb import load
    from gpusim.simulation import collective

    db = db or load()
    rows = load_rows(path or default_csv())
    out: list[SweepRow] = []
    groups: dict[tuple, list[SweepRow]] = {}
    for i, r in enumerate(rows):
        try:
            res = SweepRow(index=i, system=r["system"], source_id=r["source_id"], gpus=int(r["gpus"]),
                           nodes=int(r["nodes"]), size_bytes=float(r["size_bytes"]),
                           measured_gbyte_per_s=float(r["busbw_gbyte_per_s"]),
                           held_out=r["held_out"].strip().lower() in ("yes", "true", "1"),
                           collective=r["collective"],
                           kind=r.get("kind", "measured") or "measured",
                           algorithm_reported=r.get("algorithm_reported", "") or "")
            gpu = db.gpus.get(r["gpu"]) if r.get("gpu") else None
            if gpu is None and r.get("node") in db.nodes:
                gpu = db.gpus.get(db.nodes[r["node"]].gpu)
            res.vendor = gpu.vendor if gpu is not None else ""
            per_thread = int(r.get("gpus_per_thread") or 1)  # nccl-tests -g (empty: a process per GPU)
        except (KeyError, ValueError) as e:
            raise GpusimError(f"row {i + 2} of {path or default_csv()}: bad value ({e}); see validation/README.md") \
                from None
        out.append(res)
        key = (r["collective"], r["gpu"], r["node"], res.gpus, res.nodes, r.get("intra") or None,
               r.get("intra_topology") or None, r["inter"] or None,
               int(r["nics_per_node"]) if r["nics_per_node"] else None, r.get("algorithm_forced") or "auto",
               per_thread)
        groups.setdefault(key, []).append(res)
    for (coll, gpu, node, gpus, nodes, intra, topo, inter, nics, algo, per_thread), members in groups.items():
        sizes = [m.size_bytes for m in members]
        try:
            pred = collective(coll, sizes, gpu=gpu or None, node=node or None, gpus=gpus, nodes=nodes, intra=intra,
                              intra_topology=topo, inter=inter, nics_per_node=nics, algorithm=algo, db=db,
                              params=_params_for(params, gpu), gpus_per_thread=per_thread)
        except GpusimError as e:
            for m in members:
                m.error = f"{type(e).__name__}: {e}"
            continue
        for m, p in zip(members, pred):
            m.predicted_gbyte_per_s = p["busbw_bytes_per_s"] / units.GB
            m.algorithm, m.protocol = p["algorithm"], p["protocol"]
    return out


def _stats(errors: list[float]) -> dict:
    if not errors:
        return {"n": 0, "median_ape": None, "p90_ape": None}
    e = np.asarray(errors)
    return {"n": int(e.size), "median_ape": float(np.median(e)), "p90_ape": float(np.percentile(e, 90))}


def summarize(results: list[SweepRow], min_bytes: float = MIN_BYTES) -> dict:
    """Per collective, per system and per group (held out / looked at): median and p90 APE over sizes >= ``min_bytes``,
    with the algorithms the model chose and the one the source reports where it says.

    The top level is the all-reduce summary (:data:`PRIMARY_COLLECTIVE`, the keys the file had before it held other
    collectives, computed from its rows alone); ``by_collective`` holds the same summary for every other collective
    present (e.g. ``all_to_all``)."""
    out = summarize_collective([r for r in results if r.collective == PRIMARY_COLLECTIVE], min_bytes)
    others = sorted({r.collective for r in results} - {PRIMARY_COLLECTIVE})
    out["by_collective"] = {c: summarize_collective([r for r in results if r.collective == c], min_bytes)
                            for c in others}
    return out


def summarize_collective(results: list[SweepRow], min_bytes: float = MIN_BYTES) -> dict:
    """:func:`summarize` for rows of one collective (the caller selects them)."""
    systems: dict[str, dict] = {}
    for r in results:
        s = systems.setdefault(r.system, {"system": r.system, "source_id": r.source_id, "held_out": r.held_out,
                                          "gpus": set(), "nodes": set(), "errors": [], "algorithms": set(),
                                          "reported": set(), "algorithm_mismatches": 0, "unpredicted": 0})
        s["gpus"].add(r.gpus)
        s["nodes"].add(r.nodes)
        if r.ape is None:
            s["unpredicted"] += 1
            continue
        if r.algorithm_reported:
            reported = r.algorithm_reported.split(" ")[0]
            s["reported"].add(reported)
            s["algorithm_mismatches"] += int(reported != r.algorithm and r.size_bytes >= min_bytes)
        if r.size_bytes >= min_bytes:
            s["errors"].append(r.ape)
            s["algorithms"].add(r.algorithm)
    out = []
    for s in systems.values():
        out.append({**{k: v for k, v in s.items() if k not in ("errors", "gpus", "nodes", "algorithms", "reported")},
                    "gpus": sorted(s["gpus"]), "nodes": sorted(s["nodes"]), "algorithms": sorted(s["algorithms"]),
                    "reported": sorted(s["reported"]), **_stats(s["errors"])})

    def group(flag: bool, vendor: str | None = None) -> dict:
        errs = [r.ape for r in results if r.held_out == flag and r.ape is not None and r.size_bytes >= min_bytes
                and (vendor is None or r.vendor == vendor)]
        names = {r.system for r in results if r.held_out == flag and (vendor is None or r.vendor == vendor)}
        return {**_stats(errs), "systems": len(names)}
    vendors = sorted({r.vendor for r in results if r.held_out and r.vendor})
    return {"min_bytes": min_bytes, "systems": out, "held_out": group(True), "looked_at": group(False),
            "held_out_by_vendor": {v: group(True, v) for v in vendors}}


def to_dicts(results: list[SweepRow]) -> list[dict]:
    out = []
    for r in results:
        d = asdict(r)
        d.pop("_", None)
        d["ape"] = r.ape
        out.append(d)
    return out


def print_section(results: list[SweepRow], print_table, fmt_pct) -> None:
    """The ``gpusim validate`` sections, one per collective (all-reduce first): one line per system, then the held-out
    and looked-at groups."""
    if not results:
        return
    summary = summarize(results)
    if any(r.collective == PRIMARY_COLLECTIVE for r in results):
        _print_summary(PRIMARY_COLLECTIVE, summary, print_table, fmt_pct)
    for coll, s in summary["by_collective"].items():
        _print_summary(coll, s, print_table, fmt_pct)


def _print_summary(collective: str, summary: dict, print_table, fmt_pct) -> None:
    table = []
    for s in sorted(summary["systems"], key=lambda s: (not s["held_out"], s["system"])):
        table.append([s["system"], "yes" if s["held_out"] else "no", ",".join(map(str, s["gpus"])),
                      ",".join(map(str, s["nodes"])), s["n"], fmt_pct(s["median_ape"]), fmt_pct(s["p90_ape"]),
                      "/".join(s["algorithms"]),
                      ("/".join(s["reported"]) + (f" ({s['algorithm_mismatches']} differ)" if s["algorithm_mismatches"]
                                                   else "")) if s["reported"] else "",
                      s["source_id"]])
    print_table(table, ["system", "held out", "GPUs", "nodes", "sizes", "median", "p90", "algorithm (model)",
                        "reported", "source"],
                title=f"{TITLES.get(collective, collective + ' bus bandwidth across systems')} "
                      f"(validation/nccl_sweeps.csv, sizes >= {summary['min_bytes'] / units.KIB:g} KiB)",
                justify=["left", "left", "right", "right", "right", "right", "right", "left", "left", "left"])
    for name, key in (("held-out systems", "held_out"), ("systems looked at while developing", "looked_at")):
        g = summary[key]
        print(f"  {name}: median {fmt_pct(g['median_ape'])}, p90 {fmt_pct(g['p90_ape'])} "
              f"(n={g['n']} sizes, {g['systems']} systems)")
        if key == "held_out":
            for vendor, gv in summary["held_out_by_vendor"].items():
                print(f"    held-out {vendor} systems: median {fmt_pct(gv['median_ape'])}, p90 {fmt_pct(gv['p90_ape'])} "
                      f"(n={gv['n']} sizes, {gv['systems']} systems)")
