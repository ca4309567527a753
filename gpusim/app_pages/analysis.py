"""What the planner's pages draw, computed with gpusim's own API (no formulas of the model live here).

- fabric and network variants of a scenario (Scenario fields, never numbers);
- curves over GPU counts (:func:`gpusim.simulation.scaling_curve`, one vectorised call per variant);
- curves over the per-GPU batch (one vectorised model call for all batches);
- the points of the GPU roofline and the ceilings of the communication roofline;
- the expected all-reduce bandwidth of a parsed ``nvidia-smi topo -m``.

Everything returns plain dicts and lists (SI units, unit in the key) for :mod:`gpusim.viz` and for CSV/JSON.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
from pydantic import ValidationError

from gpusim.errors import GpusimError, ScenarioError
from gpusim.params import DEFAULT_PARAMS, ModelParams

#: intra-node fabrics the app offers (values of the ``fabric`` key) -> what a person calls them
FABRICS: dict[str, str] = {
    "auto": "usual for the GPU / node",
    "nvswitch": "NVSwitch (all-to-all NVLink)",
    "nvlink": "NVLink bridge or mesh",
    "pcie-switch": "PCIe through a switch (PIX/PXB)",
    "pcie-host": "PCIe through the CPU (PHB/NODE)",
    "pcie-cross-socket": "PCIe across CPU sockets (SYS)",
    "no-p2p": "no peer-to-peer (via host memory)",
}
#: short labels for legends
FABRIC_SHORT: dict[str, str] = {
    "auto": "usual fabric", "nvswitch": "NVSwitch", "nvlink": "NVLink bridge/mesh", "pcie-switch": "PCIe switch",
    "pcie-host": "PCIe via CPU", "pcie-cross-socket": "PCIe across sockets", "no-p2p": "no P2P (host-staged)",
}
#: the node vocabulary of gpusim.hardware.IntraTopology -> the app's fabric key
TOPOLOGY_TO_FABRIC: dict[str, str] = {
    "nvswitch": "nvswitch", "nvlink-mesh": "nvlink", "nvlink-bridge-pairs": "nvlink", "pcie-switch": "pcie-switch",
    "pcie-host": "pcie-host", "pcie-cross-socket": "pcie-cross-socket", "single": "auto",
}
_PCIE_FABRICS = ("pcie-switch", "pcie-host", "pcie-cross-socket")
#: the wiring of a scale-up link by its kind (gpusim.hardware.IntraTopology), as the model reads a link given alone
_LINK_TOPOLOGY = {"nvswitch": "nvswitch", "nvlink-mesh": "nvlink-mesh", "nvlink-bridge": "nvlink-bridge-pairs",
                  "infinity-fabric": "nvlink-mesh"}
_PEER_KINDS = {"switch": ("nvswitch",), "mesh": ("nvlink-mesh", "infinity-fabric"), "bridge": ("nvlink-bridge",),
               "direct": ("nvlink-bridge", "nvlink-mesh", "infinity-fabric")}


# ------------------------------------------------------------------------------------------------
# Fabrics
# ------------------------------------------------------------------------------------------------

def peer_link_id(db, gpu) -> str | None:
    """The intra-node link entry of the GPU's own scale-up link (NVLink / Infinity Fabric): the link of the
    same kind and generation whose bandwidth is closest to the GPU's. None for PCIe-only GPUs."""
    pl = gpu.peer_link
    if pl is None:
        return None
    kinds = _PEER_KINDS[pl.connection]
    cands = [lk for lk in db.links.values() if lk.scope == "intra-node" and lk.kind in kinds
             and str(lk.generation) == str(pl.generation)]
    if not cands:
        cands = [lk for lk in db.links.values() if lk.scope == "intra-node" and lk.kind in kinds]
    if not cands:
        return None
    return min(cands, key=lambda lk: (abs(lk.bandwidth_gbyte_per_s_per_direction - pl.gbyte_per_s_per_direction),
                                      lk.id)).id


def host_staged_link_id(db) -> str | None:
    """The database's link for transfers staged through host memory (no peer-to-peer)."""
    return next((lk.id for lk in db.links.values() if lk.kind == "host-staged"), None)


def fabric_changes(db, gpu_id: str, fabric: str) -> dict[str, Any]:
    """Scenario fields (``intra``, ``intra_topology``, ``p2p``) that put ``gpu_id`` on ``fabric``.

    Raises :class:`ScenarioError` when the GPU has no such fabric (an NVSwitch for a PCIe card ...)."""
    if fabric not in FABRICS:
        raise ScenarioError(f"unknown fabric {fabric!r}; one of {', '.join(FABRICS)}")
    if fabric == "auto":
        return {}
    gpu = db.gpu(gpu_id)
    if fabric in ("nvswitch", "nvlink"):
        pl = gpu.peer_link
        if pl is None:
            raise ScenarioError(f"{gpu_id} has no NVLink: choose a PCIe fabric")
        if fabric == "nvswitch" and pl.connection != "switch":
            raise ScenarioError(f"{gpu_id}'s {pl.technology} is wired as a {pl.connection}, not through an NVSwitch: "
                                "choose 'NVLink bridge or mesh'")
        if fabric == "nvlink" and pl.connection == "switch":
            raise ScenarioError(f"{gpu_id}'s NVLink goes through NVSwitch chips: choose 'NVSwitch'")
        link = peer_link_id(db, gpu)
        if link is None:
            raise ScenarioError(f"no link in the hardware database matches {gpu_id}'s {pl.technology}")
        # the wiring named (as `--intra-topology` would), not left to the link: what the model assumes for this
        # link kind anyway, said in the scenario, so a comparison reads "pcie-cross-socket -> nvswitch"
        return {"intra": link, "intra_topology": _LINK_TOPOLOGY[db.link(link).kind], "p2p": None}
    pcie = db.pcie_link_id(gpu)
    if fabric == "no-p2p":
        return {"intra": pcie, "intra_topology": "pcie-host", "p2p": False}
    return {"intra": pcie, "intra_topology": fabric, "p2p": None}


def collective_fabric_kwargs(db, gpu_id: str, fabric: str) -> dict[str, Any]:
    """``intra`` / ``intra_topology`` for :func:`gpusim.simulation.collective`: the host-staged link stands for "no
    peer-to-peer" on the page (``collective`` also takes ``p2p=False``, which stages any wiring through host memory)."""
    ch = fabric_changes(db, gpu_id, fabric)
    if ch.get("p2p") is False:
        staged = host_staged_link_id(db)
        if staged is None:
            raise ScenarioError("the hardware database has no host-staged link")
        return {"intra": staged, "intra_topology": None}
    return {k: ch.get(k) for k in ("intra", "intra_topology")}


def available_fabrics(db, gpu_id: str) -> list[str]:
    """The fabrics (keys of :data:`FABRICS`, without ``auto``) this GPU can be put on."""
    out = []
    for f in FABRICS:
        if f == "auto":
            continue
        try:
            fabric_changes(db, gpu_id, f)
        except GpusimError:
            continue
        out.append(f)
    return out


def network_ids(db) -> list[str]:
    """Inter-node links, fastest first."""
    nets = [lk for lk in db.links.values() if lk.scope == "inter-node"]
    return [lk.id for lk in sorted(nets, key=lambda lk: (-lk.bandwidth_bytes_per_s, lk.id))]


def _gpu_id(scn, db) -> str:
    return scn.gpu or db.node(scn.node).gpu


def _err(e: Exception) -> str:
    if isinstance(e, ValidationError):
        from gpusim.simulation import format_validation_error

        return format_validation_error(e)
    return str(e)


# ------------------------------------------------------------------------------------------------
# Curves over GPU counts
# ------------------------------------------------------------------------------------------------

def gpu_counts(max_gpus: int, extra: Iterable[int] = ()) -> list[int]:
    """1, 2, 4, ... up to ``max_gpus`` (and ``extra`` counts within it)."""
    counts = {1 << i for i in range(21) if (1 << i) <= max_gpus}
    counts |= {int(c) for c in extra if 1 <= int(c) <= max_gpus}
    return sorted(counts)


def per_node_base(scn, gpus_per_node: int | None = None):
    """The scenario reduced to one node of ``gpus_per_node`` GPUs (default: the scenario's), the base from
    which :func:`gpusim.simulation.scaling_curve` grows whole nodes."""
    g = gpus_per_node or scn.gpus // scn.nodes
    return scn.with_changes(gpus=g, nodes=1)


def fabric_variants(scn, db, fabrics: Sequence[str], networks: Sequence[str]) -> tuple[dict[str, Any], list[str]]:
    """Scenario variants on other intra-node fabrics and inter-node networks: ``({label: scenario}, [skipped
    with the reason])``."""
    gpu_id = _gpu_id(scn, db)
    out: dict[str, Any] = {}
    skipped: list[str] = []
    for f in fabrics:
        try:
            ch = fabric_changes(db, gpu_id, f)
            label = FABRIC_SHORT[f] + (f" ({ch['intra']})" if ch.get("intra") and f not in _PCIE_FABRICS + ("no-p2p",)
                                       else "")
            out[label] = scn.with_changes(**ch) if ch else scn
        except (GpusimError, ValidationError) as e:
            skipped.append(f"{FABRIC_SHORT.get(f, f)}: {_err(e)}")
    for net in networks:
        try:
            out[f"network {net}"] = scn.with_changes(inter=net)
        except (GpusimError, ValidationError) as e:
            skipped.append(f"network {net}: {_err(e)}")
    return out, skipped


def strategy_variants(scn, kinds: Sequence[str]) -> tuple[dict[str, Any], list[str]]:
    """Scenario variants with other strategies (DataParallel, DDP, FSDP ...)."""
    out: dict[str, Any] = {}
    skipped: list[str] = []
    for k in kinds:
        try:
            ch: dict[str, Any] = {"kind": k}
            if k in ("dp", "ddp") and scn.strategy.cpu_offload:
                ch["cpu_offload"] = False
            out[k] = scn.with_changes(**ch)
        except (GpusimError, ValidationError) as e:
            skipped.append(f"{k}: {_err(e)}")
    return out, skipped


def curves(variants: dict[str, Any], counts: Sequence[int], *, mode: str = "weak", global_batch: int | None = None,
           db=None, params: ModelParams | None = None) -> tuple[dict[str, list[dict]], list[str]]:
    """One :func:`gpusim.simulation.scaling_curve` per variant. DataParallel curves stop at one node (it runs
    in one process). Returns ``({label: rows}, [skipped with the reason])``."""
    from gpusim.simulation import scaling_curve

    out: dict[str, list[dict]] = {}
    skipped: list[str] = []
    for label, v in variants.items():
        try:
            rows = scaling_curve(v, list(counts), mode=mode, global_batch=global_batch, db=db, params=params)
        except (GpusimError, ValidationError) as e:
            skipped.append(f"{label}: {_err(e)}")
            continue
        out[label] = rows
    return out, skipped


def curves_table(curves_by_label: dict[str, list[dict]], column: str = "variant") -> list[dict]:
    """Long-format rows (one per variant and GPU count) for CSV."""
    return [{column: label, **r} for label, rows in curves_by_label.items() for r in rows]


# ------------------------------------------------------------------------------------------------
# Curve over the per-GPU batch
# ------------------------------------------------------------------------------------------------

def batch_candidates(current: int, max_micro_batch: int | None = None, *, top: int = 1 << 16) -> list[int]:
    """Powers of two from 1 to a little beyond the memory limit (and the current batch)."""
    hi = max(4 * current, 2 * (max_micro_batch or 1), 64)
    hi = min(hi, top)
    out = {1 << i for i in range(17) if (1 << i) <= hi}
    out.add(int(current))
    if max_micro_batch and 1 <= max_micro_batch <= top:
        out.add(int(max_micro_batch))
    return sorted(out)


def _modelled(scn, db, params):
    """The scenario without a measured baseline (it applies to one batch only), its hardware and workload."""
    from gpusim.hwdb import load
    from gpusim.simulation import resolve_hardware, resolve_workload

    db = db or load()
    params = params or DEFAULT_PARAMS
    if scn.baseline_throughput:
        scn = scn.with_changes(baseline_throughput=None)
    return scn, resolve_hardware(scn, db), resolve_workload(scn), db, params


def batch_curve(scn, batches: Sequence[int], *, db=None, params: ModelParams | None = None
                ) -> tuple[list[dict], int]:
    """Throughput, utilisation, MFU, memory and scaling efficiency for each per-GPU batch, from one
    vectorised model call (the scenario's GPUs and the same GPU alone, for every batch).

    Returns ``(rows, max_micro_batch)``. A measured ``baseline_throughput`` applies to one batch only, so it
    is left out here.
    """
    from gpusim.model.step import BOTTLENECKS, evaluate
    from gpusim.simulation import (
        resolve_hardware,
        scenario_row,
        single_gpu_scenario,
        stack_rows,
    )

    scn, hw, wl, db, params = _modelled(scn, db, params)
    one = single_gpu_scenario(scn)
    hw1 = resolve_hardware(one, db)
    batches = [int(b) for b in batches]
    rows = [scenario_row(scn.with_changes(per_gpu_batch=b), hw, wl, params) for b in batches]
    rows += [scenario_row(one.with_changes(per_gpu_batch=b), hw1, wl, params) for b in batches]
    out = evaluate(stack_rows(rows), params)
    m = len(batches)
    thr = out["throughput_samples_per_s"]
    res = []
    for i, b in enumerate(batches):
        res.append({
            "per_gpu_batch": b, "global_batch": b * scn.strategy.accum * scn.gpus, "step_s": float(out["step_s"][i]),
            "throughput_samples_per_s": float(thr[i]),
            "throughput_per_gpu_samples_per_s": float(out["throughput_per_gpu_samples_per_s"][i]),
            "single_gpu_throughput_samples_per_s": float(thr[m + i]),
            "scaling_efficiency_frac": float(thr[i] / (scn.gpus * thr[m + i])),
            "gpu_util_frac": float(out["gpu_util_frac"][i]), "mfu_frac": float(out["mfu_frac"][i]),
            "memory_per_gpu_bytes": float(out["memory_per_gpu_bytes"][i]),
            "fits_in_memory": bool(out["fits_in_memory"][i]),
            "bottleneck": BOTTLENECKS[int(out["bottleneck_code"][i])],
        })
    return res, int(out["max_micro_batch"][0])


# ------------------------------------------------------------------------------------------------
# Rooflines
# ------------------------------------------------------------------------------------------------

def rooflines(scn, *, db=None, params: ModelParams | None = None, fabrics: Sequence[str] = (),
              networks: Sequence[str] = ()) -> dict[str, Any]:
    """Everything the two roofline charts need, from one model evaluation of the scenario plus one
    :func:`gpusim.simulation.collective` call per interconnect.

    GPU roofline: the layer groups of one micro-batch (FLOPs, bytes moved, time from the model's own
    roofline) as points, the datasheet and achievable ceilings, and the whole step (model FLOPs / step time).
    Communication roofline: per GPU and optimizer step, training FLOPs per byte of gradient all-reduced; one
    ceiling per interconnect (all-reduce algorithm bandwidth for the scenario's gradient size and GPU count)
    and the scenario's own effective rate (gradient bytes / its communication time).
    """
    from gpusim.model.compute import (
        group_times_s,
        model_flop_per_sample,
        train_multiplier,
    )
    from gpusim.model.step import evaluate
    from gpusim.simulation import (
        collective,
        roofline_by_kind,
        scenario_row,
        stack_rows,
    )

    scn, hw, wl, db, params = _modelled(scn, db, params)
    row = scenario_row(scn, hw, wl, params)
    out = evaluate(stack_rows([row]), params)
    st = scn.strategy
    b = float(st.per_gpu_batch)

    # --- GPU roofline: the model's per-group roofline, one micro-batch (forward + backward) -------------
    kinds, _ = roofline_by_kind(wl)
    flop_g = np.asarray(row["group_flop_per_sample"]) * b
    weight_scale = row["gather_bytes_per_param"] / 2.0
    bytes_g = np.asarray(row["group_bytes_per_sample"]) * b * row["act_scale"] + np.asarray(row["group_weight_bytes"]) \
        * weight_scale
    t_g = group_times_s(b, row["group_flop_per_sample"], row["group_bytes_per_sample"], row["group_weight_bytes"],
                        row["group_eff_frac"], row["peak_flop_per_s"], row["mem_bytes_per_s"], params.mem_eff_frac,
                        row["act_scale"], weight_scale).reshape(-1)
    total_t = float(t_g.sum())
    counts: dict[str, int] = {}
    points, memory_only = [], []
    for k, f, by, t in zip(kinds, flop_g, bytes_g, t_g):
        counts[k] = counts.get(k, 0) + 1
        frac = float(t) / total_t if total_t > 0 else 0.0
        if f <= 0:
            memory_only.append({"kind": k, "time_frac": frac, "bytes": float(by)})
            continue
        points.append({"name": f"{k} #{counts[k]}" if kinds.count(k) > 1 else k, "kind": k,
                       "intensity_flop_per_byte": float(f / by), "flop_per_s": float(f / t), "time_frac": frac})
    peak = float(row["peak_flop_per_s"])
    mfu = float(out["mfu_frac"][0])
    mult = float(train_multiplier(st.activation_checkpointing))
    step_point = {"name": "whole step (model FLOPs / step time)", "symbol": "star",
                  "intensity_flop_per_byte": float(flop_g.sum() / bytes_g.sum()), "flop_per_s": mfu * peak}

    # --- communication roofline ------------------------------------------------------------------------
    grad_bytes = float(out["grad_bytes"][0])
    step_flop = float(model_flop_per_sample(wl.fwd_flop_per_sample)) * b * st.accum
    compute_s = float(out["compute_s"][0])
    comm_total_s = float(out["comm_total_s"][0])
    gpu_id = hw.gpu.id
    g = hw.gpus_per_node
    intra_n = max(2, g)
    ceilings: list[dict] = []
    skipped: list[str] = []
    for f in fabrics:
        try:
            kw = collective_fabric_kwargs(db, gpu_id, f)
            r = collective("all_reduce", [grad_bytes], gpu=gpu_id, gpus=intra_n, nodes=1, db=db, params=params, **kw)[0]
            ceilings.append({"label": f"{FABRIC_SHORT[f]}, {intra_n} GPUs", "algbw_bytes_per_s": r["algbw_bytes_per_s"],
                             "busbw_bytes_per_s": r["busbw_bytes_per_s"], "kind": "fabric", "key": f})
        except (GpusimError, ValidationError) as e:
            skipped.append(f"{FABRIC_SHORT.get(f, f)}: {_err(e)}")
    net_nodes = max(2, hw.nodes)
    for net in networks:
        try:
            kw = {"intra": hw.intra_link.id if hw.intra_link else None,
                  "intra_topology": hw.topology if hw.topology != "single" else None}
            r = collective("all_reduce", [grad_bytes], gpu=gpu_id, gpus=net_nodes * g, nodes=net_nodes, inter=net,
                           db=db, params=params, **kw)[0]
            ceilings.append({"label": f"{net}, {net_nodes} nodes x {g} GPUs", "algbw_bytes_per_s": r["algbw_bytes_per_s"],
                             "busbw_bytes_per_s": r["busbw_bytes_per_s"], "kind": "network", "key": net})
        except (GpusimError, ValidationError) as e:
            skipped.append(f"{net}: {_err(e)}")
    if hw.n_gpus > 1 and comm_total_s > 0:
        ceilings.append({"label": f"this scenario: {hw.n_gpus} GPUs, {st.kind} (effective)",
                         "algbw_bytes_per_s": grad_bytes / comm_total_s, "busbw_bytes_per_s": None,
                         "kind": "scenario", "key": "scenario", "current": True})
    return {
        "gpu": gpu_id, "precision": st.precision, "per_gpu_batch": st.per_gpu_batch,
        "peak_flop_per_s": peak, "achievable_flop_per_s": peak * params.eff(st.precision),
        "mem_bytes_per_s": hw.gpu.memory_bytes_per_s,
        "achievable_mem_bytes_per_s": hw.gpu.memory_bytes_per_s * params.mem_eff_frac,
        "points": points + [step_point], "memory_only_groups": memory_only,
        "train_flop_multiplier": mult,
        "comm": {
            "grad_bytes": grad_bytes, "step_flop_per_gpu": step_flop,
            "compute_flop_per_s": step_flop / compute_s if compute_s > 0 else math.nan,
            "intensity_flop_per_byte": step_flop / grad_bytes if grad_bytes > 0 else math.nan,
            "achieved_flop_per_s": mfu * peak, "comm_total_s": comm_total_s, "n_gpus": hw.n_gpus,
            "ceilings": ceilings, "skipped": skipped,
        },
    }


# ------------------------------------------------------------------------------------------------
# Topology
# ------------------------------------------------------------------------------------------------

#: all-reduce message sizes for the topology page: 1 KiB ... 4 GiB, a factor 2 apart
ALLREDUCE_SIZES_BYTES: tuple[float, ...] = tuple(float(1 << k) for k in range(10, 33))


def topology_matrix(topo) -> tuple[list[str], list[list[str]]]:
    """GPU names and the GPU x GPU matrix of path labels (``X`` on the diagonal, ``?`` where missing)."""
    idx = [g.index for g in topo.gpus]
    names = [g.name for g in topo.gpus]
    labels = []
    for i in idx:
        row = []
        for j in idx:
            if i == j:
                row.append("X")
            else:
                p = topo.path(i, j)
                row.append(p.label if p is not None else "?")
        labels.append(row)
    return names, labels


def topology_fabric(topo) -> str:
    """The app's fabric key for a parsed topology (peer-to-peer failures make it ``no-p2p``)."""
    s = topo.summary()
    if s.get("p2p_unsupported_pairs"):
        return "no-p2p"
    return TOPOLOGY_TO_FABRIC.get(s["intra_topology"], "auto")


def topology_allreduce(topo, gpu_id: str, *, db=None, params: ModelParams | None = None,
                       sizes: Sequence[float] = ALLREDUCE_SIZES_BYTES, compare: bool = True
                       ) -> tuple[dict[str, list[dict]], list[str]]:
    """Expected all-reduce over every GPU of the matrix, for each message size: ``({label: rows}, notes)``.

    The matrix gives the fabric (its ``intra_topology``); ``gpu_id`` gives the link speeds. With ``compare``,
    the same GPUs on their best other fabrics are added for reference.
    """
    from gpusim.hwdb import load
    from gpusim.simulation import collective

    db = db or load()
    n = topo.n_gpus
    if n < 2:
        raise ScenarioError("one GPU: there is nothing to all-reduce (paste a matrix with two or more GPUs)")
    fabric = topology_fabric(topo)
    notes: list[str] = []
    out: dict[str, list[dict]] = {}
    try:
        kw = collective_fabric_kwargs(db, gpu_id, fabric)
    except ScenarioError as e:
        raise ScenarioError(f"the matrix shows {FABRICS[fabric]}, but {e} (pick the GPU this machine has in the "
                            "sidebar)") from None
    out[f"this machine: {FABRIC_SHORT[fabric]}"] = collective("all_reduce", list(sizes), gpu=gpu_id, gpus=n, nodes=1,
                                                              db=db, params=params, **kw)
    if compare:
        for other in available_fabrics(db, gpu_id):
            if other == fabric or other == "no-p2p" or (other == "pcie-host" and fabric != "pcie-cross-socket"):
                continue
            try:
                kw = collective_fabric_kwargs(db, gpu_id, other)
                out[f"same GPUs on {FABRIC_SHORT[other]}"] = collective("all_reduce", list(sizes), gpu=gpu_id, gpus=n,
                                                                       nodes=1, db=db, params=params, **kw)
            except (GpusimError, ValidationError) as e:
                notes.append(f"{FABRIC_SHORT[other]}: {_err(e)}")
    return out, notes


def flat_dict(d: dict, prefix: str = "") -> dict[str, Any]:
    """Nested dicts flattened to ``a.b`` keys (lists joined), for a one-row CSV."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flat_dict(v, key + "."))
        elif isinstance(v, (list, tuple)):
            out[key] = " | ".join(str(x.get("message", x)) if isinstance(x, dict) else str(x) for x in v)
        else:
            out[key] = v
    return out


# ------------------------------------------------------------------------------------------------
# Calibration
# ------------------------------------------------------------------------------------------------

def format_fitted(value: float | None, unit: str) -> str:
    """A fitted figure in the unit people read (``110 GFLOP/s``, ``231 µs``, ``0.474``); ``-`` for None."""
    from gpusim import units

    if value is None:
        return "-"
    if unit == "s":
        return units.format_duration(value)
    if unit == "bytes/s":
        return units.format_rate_bytes(value)
    if unit == "flop/s":
        return units.format_flop_rate(value)
    return f"{value:.3g}"


def calibration_parameter_rows(fitted: Sequence[dict]) -> list[dict]:
    """The calibration file's ``fitted`` entries as table rows: value and ± std in readable units, the
    relative std (None where the fit could not estimate one), what each sets, and its records."""
    rows = []
    for f in fitted:
        std, value = f.get("std"), f["value"]
        rows.append({"parameter": f["name"], "value": format_fitted(value, f["unit"]),
                     "± std": "-" if std is None else "± " + format_fitted(std, f["unit"]),
                     "relative std": (std / value) if (std is not None and value) else None,
                     "sets": f["sets"], "block": f["block"],
                     "records": f"{f['records']}" + (f" ({f['noisy_records']} noisy)" if f.get("noisy_records") else "")})
    return rows


def collective_level(group: str) -> str:
    """The level of a collective report row's ``group`` (``all_reduce intra-node n=8``)."""
    for level in ("inter-node", "global", "intra-node"):
        if f" {level}" in group:
            return level
    return "intra-node"


def collective_rows_by_level(rows: Sequence[dict]) -> dict[str, list[dict]]:
    """The calibration report's collective rows split by level (intra-node first)."""
    out: dict[str, list[dict]] = {}
    for r in rows:
        out.setdefault(collective_level(str(r["group"])), []).append(r)
    order = ("intra-node", "inter-node", "global")
    return {k: out[k] for k in order if k in out}


def fit_table(rows: Sequence[dict]) -> list[dict]:
    """Report rows of one benchmark kind (data loader, one-rank DDP baselines ...) as a table."""
    from gpusim import units

    return [{"benchmark": r["label"], "n": r.get("n", 1), "noisy": r.get("n_noisy", 0),
             "measured": units.format_duration(r["measured_s"]), "fitted": units.format_duration(r["fitted_s"]),
             "error": r.get("error_frac"), "fitted?": bool(r.get("used", True))} for r in rows]


def held_out_table(records: Sequence[dict]) -> list[dict]:
    """The held-out DDP steps (``Calibration.held_out['records']``) as table rows (ms)."""
    from gpusim import units

    out = []
    for r in records:
        out.append({"step": held_out_label(r), "precision": r.get("precision"),
                    "measured (ms)": r["measured_s"] / units.MS,
                    "p10-p90 (ms)": f"{r['measured_p10_s'] / units.MS:.3g}-{r['measured_p90_s'] / units.MS:.3g}",
                    "predicted (ms)": r["predicted_s"] / units.MS, "error": r["error_frac"],
                    "anchored on 1 rank (ms)": r["anchored_s"] / units.MS if r.get("anchored_s") else None,
                    "anchored error": r.get("anchored_error_frac"), "noisy": bool(r.get("noisy"))})
    return out


def held_out_label(r: dict, short: bool = False) -> str:
    """``transformer batch 16 x 8`` (and the nodes when more than one); short: ``transformer b16 ×8``."""
    if short:
        return (f"{r['workload']} b{r['per_rank_batch']} ×{r['n_ranks']}"
                + (f" ({r['n_nodes']}n)" if r.get("n_nodes", 1) > 1 else ""))
    return (f"{r['workload']} batch {r['per_rank_batch']} x {r['n_ranks']}"
            + (f" ({r['n_nodes']} nodes)" if r.get("n_nodes", 1) > 1 else ""))


def plan_scenario(config: dict, workload_kwargs: dict):
    """The Scenario of one configuration of a :func:`gpusim.plan` result (a ``configurations`` row)."""
    from gpusim.simulation import Scenario

    return Scenario.create(**workload_kwargs, node=config["node"], gpu=config["gpu"], gpus=config["n_gpus"],
                           nodes=config["nodes"], kind=config["strategy"], precision=config["precision"],
                           per_gpu_batch=config["micro_batch"], accum=config["accum"],
                           activation_checkpointing=config["checkpointing"], cpu_offload=config["cpu_offload"])


def plan_time_interval(cal, config: dict, workload_kwargs: dict, db) -> dict:
    """The calibration's interval carried to a plan configuration's time to train.

    ``Calibration.interval`` gives the throughput interval of the configuration's scenario; the training
    steps' time scales as 1 / throughput, while checkpoints, evaluation and restarts keep their modelled
    time (as ``gpusim plan --calibration`` reports it). Returns ``{"level", "lo_s", "hi_s", "lo_frac",
    "hi_frac"}`` (relative changes of the time to train), or ``{"level", "note"}`` when the calibration's
    fitted parameters do not reach this hardware."""
    iv = cal.interval(plan_scenario(config, workload_kwargs), db)
    level = iv.get("level", 0.9)
    if not iv.get("applies", True):
        return {"level": level, "note": iv.get("note") or "the calibration does not apply to this hardware"}
    lo_thr, hi_thr = iv["throughput_samples_per_s"]
    thr, train_s, total = (float(config["throughput_samples_per_s"]), float(config["train_s"]),
                           float(config["time_to_train_s"]))
    lo = total - train_s + train_s * thr / hi_thr
    hi = total - train_s + train_s * thr / lo_thr
    return {"level": level, "lo_s": lo, "hi_s": hi, "lo_frac": lo / total - 1.0, "hi_frac": hi / total - 1.0}


def drop_measured_variants(fabrics: Sequence[str], networks: Sequence[str], params: ModelParams | None
                           ) -> tuple[list[str], list[str], str | None]:
    """Fabric and network variants that can differ under ``params``: a calibrated machine's measured bus
    bandwidth (``busbw_override_bytes_per_s`` per level) replaces every link of that level, so comparing
    fabrics (or networks) there would draw the same curve again and again. Returns the variants left and a
    note saying what was left out, or None."""
    measured = set((params.busbw_override_bytes_per_s if params is not None else {}) or {})
    fabrics, networks = list(fabrics), list(networks)
    dropped = []
    if "intra-node" in measured and fabrics:
        dropped.append("fabrics inside a node")
        fabrics = []
    if "inter-node" in measured and networks:
        dropped.append("networks between nodes")
        networks = []
    if not dropped:
        return fabrics, networks, None
    return fabrics, networks, (f"The calibrated machine's {' and '.join(dropped)} are its measured bus bandwidth, the "
                               "same whatever the link: to compare them, describe the hardware by gpu or node in the "
                               "sidebar (the calibration's efficiencies transfer).")
