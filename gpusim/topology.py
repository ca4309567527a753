"""Parse ``nvidia-smi topo -m`` into links between GPUs, and say what the text shows.

``nvidia-smi topo -m`` prints a matrix: one row per GPU and NIC, one column per GPU and NIC, then
CPU/NUMA affinity columns, then a legend. Each cell is the *path class* between two devices, from
best to worst (the legend the driver prints):

========  ==================================================================================
``NV#``   a bonded set of # NVLinks (NV1 ... NV18)
``PIX``   at most a single PCIe bridge (one switch)
``PXB``   multiple PCIe bridges, without the PCIe host bridge (a tree of switches)
``PHB``   PCIe and a PCIe host bridge (typically the CPU's root complex)
``NODE``  PCIe and the interconnect between PCIe host bridges within a NUMA node
``SYS``   PCIe and the SMP interconnect between NUMA nodes (QPI/UPI, Infinity Fabric);
          drivers before ~2017 printed ``SOC`` for this, read here as ``SYS``
``X``     the device itself
========  ==================================================================================

:func:`parse_topo` copes with what real outputs look like: tab-separated cells padded with spaces
(``" X "``), the same table pasted with spaces instead of tabs, multi-word affinity headers
(``CPU Affinity``, ``NUMA Affinity``, ``GPU NUMA ID``), an empty cell between the last two affinity
values, NIC columns named ``NIC0``... with a ``NIC Legend:`` block (newer drivers) or named
``mlx5_0``... directly (older ones), ANSI bold/underline escapes, and the ``Legend:`` text.

:meth:`Topology.summary` maps the matrix to the node vocabulary of :mod:`gpusim.hardware`
(``IntraTopology``), and :meth:`Topology.warnings` says in sentences what may slow training down.
No torch here: the fit and the planner read topologies without it.

References
----------
NVIDIA, ``nvidia-smi`` manual page, ``topo -m`` / ``topo -p2p`` and their legends.
"""

from __future__ import annotations

import functools
import itertools
import re
from dataclasses import dataclass, field

from gpusim.errors import GpusimError

# Best to worst. NV is ordered further by its link count (more links are better).
PATH_ORDER: tuple[str, ...] = ("NV", "PIX", "PXB", "PHB", "NODE", "SYS")

# What each class means, for messages (the driver's legend, shortened).
PATH_MEANING: dict[str, str] = {
    "NV": "NVLink",
    "PIX": "at most one PCIe switch",
    "PXB": "several PCIe switches, no host bridge",
    "PHB": "the CPU's PCIe host bridge",
    "NODE": "PCIe plus the links between host bridges inside one NUMA node",
    "SYS": "PCIe plus the interconnect between CPU sockets (QPI/UPI/Infinity Fabric)",
}

# `nvidia-smi topo -p2p r|w|n|a|p` legend.
P2P_MEANING: dict[str, str] = {
    "OK": "supported",
    "CNS": "chipset not supported",
    "GNS": "GPU not supported",
    "TNS": "topology not supported",
    "NS": "not supported",
    "U": "unknown",
}

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_CELL = re.compile(r"^(X|NV(\d+)|PIX|PXB|PHB|NODE|SYS|SOC|N/A)$")
_P2P_CELL = re.compile(r"^(X|OK|CNS|GNS|TNS|NS|U)$")
_AFFINITY_HEADERS = ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")
_GPU_NAME = re.compile(r"^GPU(\d+)$")
_NIC_LEGEND = re.compile(r"^\s*(NIC\d+)\s*:\s*(\S+)\s*$")


class TopologyError(GpusimError, ValueError):
    """A text that is not a ``nvidia-smi topo -m`` matrix (the message says what is missing)."""


@dataclass(frozen=True, order=False)
class Path:
    """The path class between two devices: ``kind`` in :data:`PATH_ORDER` (or ``"X"``), with the
    number of bonded NVLinks for ``NV``."""

    kind: str
    nvlinks: int = 0

    @property
    def label(self) -> str:
        """As nvidia-smi prints it: ``NV12``, ``PIX``, ``SYS`` ..."""
        return f"NV{self.nvlinks}" if self.kind == "NV" else self.kind

    @property
    def badness(self) -> tuple[int, int]:
        """Sort key, smaller is better: class rank, then fewer NVLinks is worse."""
        if self.kind == "X":
            return (-1, 0)
        return (PATH_ORDER.index(self.kind), -self.nvlinks)

    @property
    def is_nvlink(self) -> bool:
        return self.kind == "NV"

    def __str__(self) -> str:
        return self.label

    @classmethod
    def parse(cls, cell: str) -> Path | None:
        """``"NV12"`` -> Path("NV", 12); ``"SOC"`` -> SYS; ``"N/A"`` -> None."""
        return _parse_path(cell)

    @classmethod
    def _parse(cls, cell: str) -> Path | None:
        m = _CELL.match(cell.strip())
        if not m:
            raise TopologyError(f"not a path class: {cell!r} (expected X, NV#, PIX, PXB, PHB, NODE or SYS)")
        tok = m.group(1)
        if tok == "N/A":
            return None
        if m.group(2):
            return cls("NV", int(m.group(2)))
        if tok == "SOC":
            return cls("SYS")
        return cls(tok)


@functools.lru_cache(maxsize=256)  # a matrix has n^2 cells but only a handful of distinct ones
def _parse_path(cell: str) -> Path | None:
    return Path._parse(cell)


#: ``nvidia-smi topo -m`` shows the devices of one node: the largest nodes have 8-16 GPUs and as many NICs
#: (NVL72 racks are 18 nodes of 4 GPUs). Far more rows is not one node's output.
MAX_DEVICES = 256


@dataclass(frozen=True)
class Device:
    """A row of the matrix: a GPU (``GPU3``) or a NIC (``NIC0`` / ``mlx5_0``)."""

    name: str
    kind: str  # "gpu" | "nic"
    index: int  # GPU index as nvidia-smi numbers it; NIC position among the NIC columns
    alias: str | None = None  # NIC device name from the "NIC Legend" (mlx5_0)
    cpu_affinity: str | None = None
    numa_affinity: str | None = None
    gpu_numa_id: str | None = None


@dataclass(frozen=True)
class Link:
    """The path between two GPUs (``a < b``, nvidia-smi indices)."""

    a: int
    b: int
    path: Path


@dataclass
class Topology:
    """A parsed ``nvidia-smi topo -m``. GPU indices are nvidia-smi's (PCI bus order)."""

    gpus: list[Device]
    nics: list[Device]
    paths: dict[tuple[str, str], Path | None]
    legend: dict[str, str] = field(default_factory=dict)
    p2p: dict[tuple[int, int], str] | None = None  # from `nvidia-smi topo -p2p r`, when given
    notes: list[str] = field(default_factory=list)  # oddities met while parsing

    # ---- lookups -------------------------------------------------------------------------------
    @property
    def n_gpus(self) -> int:
        return len(self.gpus)

    @functools.cached_property
    def _by_index(self) -> dict[int, Device]:
        return {g.index: g for g in self.gpus}

    def _gpu(self, i: int) -> Device:
        try:
            return self._by_index[i]
        except KeyError:
            raise KeyError(f"no GPU{i} in this topology (GPUs: {[g.index for g in self.gpus]})") from None

    def path(self, i: int, j: int) -> Path | None:
        """Path class between GPU ``i`` and GPU ``j`` (nvidia-smi indices)."""
        a, b = self._gpu(i).name, self._gpu(j).name
        p = self.paths.get((a, b))
        return p if p is not None else self.paths.get((b, a))

    def nic_path(self, gpu: int, nic: int) -> Path | None:
        g = self._gpu(gpu).name
        n = self.nics[nic].name
        p = self.paths.get((g, n))
        return p if p is not None else self.paths.get((n, g))

    def links(self) -> list[Link]:
        """Every GPU pair once, with its path."""
        return list(self._links)

    @functools.cached_property
    def _links(self) -> tuple[Link, ...]:
        out = []
        idx = [g.index for g in self.gpus]
        for a, b in itertools.combinations(idx, 2):
            p = self.path(a, b)
            if p is not None:
                out.append(Link(a, b, p))
        return tuple(out)

    def nearest_nic(self, gpu: int) -> tuple[int, Path] | None:
        """The NIC with the best path from ``gpu``, or None without NICs."""
        best = None
        for k in range(len(self.nics)):
            p = self.nic_path(gpu, k)
            if p is not None and (best is None or p.badness < best[1].badness):
                best = (k, p)
        return best

    # ---- rings ---------------------------------------------------------------------------------
    def ring_worst(self, order: list[int]) -> Path | None:
        """Worst hop on the ring ``order[0] -> order[1] -> ... -> order[0]``."""
        if len(order) < 2:
            return None
        hops = [self.path(order[k], order[(k + 1) % len(order)]) for k in range(len(order))]
        hops = [h for h in hops if h is not None]
        return max(hops, key=lambda p: p.badness) if hops else None

    def best_ring(self) -> tuple[list[int], Path | None]:
        """The ring over all GPUs whose worst hop is best (NCCL searches rings like this).

        Exhaustive up to 10 GPUs (9!/2 orders); above that, a greedy nearest-neighbour ring (n^2 lookups,
        linear in the matrix). Computed once per topology (summary and warnings share it).
        """
        order, worst = self._best_ring
        return list(order), worst

    @functools.cached_property
    def _best_ring(self) -> tuple[list[int], Path | None]:
        idx = [g.index for g in self.gpus]
        if len(idx) < 2:
            return idx, None
        if len(idx) <= 10:
            best_order, best_worst = idx, self.ring_worst(idx)
            first, rest = idx[0], idx[1:]
            for perm in itertools.permutations(rest):
                if perm and perm[0] > perm[-1]:  # each ring once, not also reversed
                    continue
                order = [first, *perm]
                w = self.ring_worst(order)
                if w is not None and (best_worst is None or w.badness < best_worst.badness):
                    best_order, best_worst = order, w
            return best_order, best_worst
        order, left = [idx[0]], set(idx[1:])
        while left:
            cur = order[-1]

            def key(j, cur=cur):
                p = self.path(cur, j)
                return (p.badness if p else (99, 0), j)
            nxt = min(left, key=key)
            order.append(nxt)
            left.remove(nxt)
        return order, self.ring_worst(order)

    # ---- the node vocabulary -------------------------------------------------------------------
    def intra_topology(self) -> str:
        """One of gpusim.hardware.IntraTopology.

        Rules (documented choices where the matrix is ambiguous):
        - one GPU: ``single``;
        - NVLink between every pair: two GPUs are ``nvlink-bridge-pairs`` (a bridge), three or more
          are ``nvswitch`` (all-to-all NVLink with equal bonds behaves like a switch for the model);
        - NVLink only within disjoint pairs: ``nvlink-bridge-pairs``;
        - NVLink between some other pairs (DGX-1 hybrid cube mesh): ``nvlink-mesh``;
        - no NVLink: by the worst GPU-GPU path, SYS -> ``pcie-cross-socket``, PHB or NODE ->
          ``pcie-host``, PIX or PXB -> ``pcie-switch``.
        """
        n = self.n_gpus
        if n <= 1:
            return "single"
        links = self.links()
        nv = [lk for lk in links if lk.path.is_nvlink]
        if nv:
            if len(nv) == len(links) == n * (n - 1) // 2:
                return "nvlink-bridge-pairs" if n == 2 else "nvswitch"
            degree: dict[int, int] = {}
            for lk in nv:
                degree[lk.a] = degree.get(lk.a, 0) + 1
                degree[lk.b] = degree.get(lk.b, 0) + 1
            if max(degree.values()) <= 1:
                return "nvlink-bridge-pairs"
            return "nvlink-mesh"
        worst = max((lk.path for lk in links), key=lambda p: p.badness, default=None)
        if worst is None:
            return "pcie-host"
        if worst.kind == "SYS":
            return "pcie-cross-socket"
        if worst.kind in ("PHB", "NODE"):
            return "pcie-host"
        return "pcie-switch"

    def summary(self) -> dict:
        """Key facts for the node schema and the calibration profile (JSON-ready)."""
        idx = [g.index for g in self.gpus]
        links = self.links()
        nv = [lk for lk in links if lk.path.is_nvlink]
        ring = self.ring_worst(idx)
        best_order, best = self.best_ring()
        numa = sorted({g.numa_affinity for g in self.gpus if g.numa_affinity not in (None, "N/A")})
        counts: dict[str, int] = {}
        for lk in links:
            counts[lk.path.label] = counts.get(lk.path.label, 0) + 1
        out = {
            "n_gpus": self.n_gpus,
            "n_nics": len(self.nics),
            "intra_topology": self.intra_topology(),
            "ring_order": idx,
            "ring_worst_path": ring.label if ring else None,
            "best_ring_order": best_order,
            "best_ring_worst_path": best.label if best else None,
            "gpu_pair_paths": counts,
            "nvlink_pairs": len(nv),
            "gpu_pairs": len(links),
            "min_nvlinks": min((lk.path.nvlinks for lk in nv), default=0),
            "max_nvlinks": max((lk.path.nvlinks for lk in nv), default=0),
            "numa_nodes": numa,
            "sys_pairs": [[lk.a, lk.b] for lk in links if lk.path.kind == "SYS"],
            "nearest_nic_path": {},
            "p2p_unsupported_pairs": None,
        }
        if self.nics:
            for i in idx:
                nn = self.nearest_nic(i)
                out["nearest_nic_path"][str(i)] = nn[1].label if nn else None
        if self.p2p is not None:
            out["p2p_unsupported_pairs"] = sorted([list(k) for k, v in self.p2p.items() if v != "OK"])
        return out

    def warnings(self) -> list[str]:
        """What the matrix shows that slows multi-GPU training, as sentences (empty when nothing)."""
        out: list[str] = list(self.notes)
        n = self.n_gpus
        if n < 2:
            return out
        links = self.links()
        nv = [lk for lk in links if lk.path.is_nvlink]
        best_order, best = self.best_ring()
        ring_txt = "->".join(f"GPU{i}" for i in best_order)

        if best is not None and best.kind == "SYS":
            sys_pairs = [lk for lk in links if lk.path.kind == "SYS"]
            ex = ", ".join(f"GPU{lk.a}-GPU{lk.b}" for lk in sys_pairs[:3])
            more = f" and {len(sys_pairs) - 3} more pairs" if len(sys_pairs) > 3 else ""
            out.append(
                f"{len(sys_pairs)} GPU pairs ({ex}{more}) connect through SYS: their traffic crosses the "
                f"interconnect between CPU sockets (QPI/UPI/Infinity Fabric). Every ring over all {n} GPUs "
                f"has a SYS hop, so gradient all-reduce over all of them runs at that speed; keep "
                f"communicating GPUs on one socket, or expect SYS bandwidth.")
        if nv and best is not None and not best.is_nvlink:
            pairs = ", ".join(f"GPU{lk.a}-GPU{lk.b}" for lk in nv[:4]) + (" ..." if len(nv) > 4 else "")
            out.append(
                f"NVLink joins only some GPU pairs ({pairs}); the best ring over all {n} GPUs "
                f"({ring_txt}) still has a {best.label} hop ({PATH_MEANING[best.kind]}), so all-reduce over "
                f"all GPUs runs at PCIe speed, not NVLink speed.")
        if nv:
            widths = sorted({lk.path.nvlinks for lk in nv})
            if len(widths) > 1:
                out.append(
                    f"NVLink bonds differ in width (NV{widths[0]} to NV{widths[-1]}): pairs joined by fewer links "
                    f"get proportionally less bandwidth.")
        if self.p2p is not None:
            bad = sorted((k, v) for k, v in self.p2p.items() if v != "OK")
            if bad:
                ex = ", ".join(f"GPU{a}-GPU{b} ({v}: {P2P_MEANING.get(v, v)})" for (a, b), v in bad[:3])
                more = f" and {len(bad) - 3} more" if len(bad) > 3 else ""
                out.append(
                    f"Peer-to-peer is not available between {ex}{more}: their transfers are staged "
                    f"through host memory, which costs bandwidth and latency.")
        if self.nics:
            far = []
            for g in self.gpus:
                nn = self.nearest_nic(g.index)
                if nn is not None and nn[1].kind == "SYS":
                    far.append(g.index)
            if far:
                one = len(far) == 1
                out.append(
                    f"GPU{', GPU'.join(map(str, far))} {'has' if one else 'have'} no NIC on "
                    f"{'its' if one else 'their'} CPU socket (nearest path SYS): inter-node traffic "
                    f"from {'it' if one else 'them'} crosses the socket interconnect, and "
                    f"GPUDirect RDMA is slow or off on such paths.")
        asym = []
        names = [g.name for g in self.gpus]
        for a, b in itertools.combinations(names, 2):
            p, q = self.paths.get((a, b)), self.paths.get((b, a))
            if p is not None and q is not None and p != q:
                asym.append(f"{a}-{b} {p.label} vs {q.label}")
        if asym:
            out.append(f"The matrix is not symmetric ({'; '.join(asym[:3])}): the text may be edited or "
                       f"truncated; the row's value was used.")
        return out


# ---- parsing ------------------------------------------------------------------------------------
def _clean_lines(text: str) -> list[str]:
    text = _ANSI.sub("", text).replace("\r\n", "\n").replace("\r", "\n")
    return text.split("\n")


def _is_path_token(tok: str) -> bool:
    return bool(_CELL.match(tok)) or bool(_P2P_CELL.match(tok))


def _header_columns(line: str) -> tuple[list[str], list[str]]:
    """Device column names and affinity column names of a header line."""
    affinity: list[str] = []
    if "\t" in line:
        cells = [c.strip() for c in line.split("\t")]
        cells = [c for c in cells if c]
        devices = []
        for c in cells:
            if c in _AFFINITY_HEADERS:
                affinity.append(c)
            elif " " in c:  # an unknown multi-word header: treat as an affinity-like column
                affinity.append(c)
            else:
                devices.append(c)
        return devices, affinity
    # Space-separated (pasted): device names are the tokens before the first affinity header.
    rest = line.strip()
    devices = []
    while rest:
        hit = next((h for h in _AFFINITY_HEADERS if rest.startswith(h)), None)
        if hit:
            affinity.append(hit)
            rest = rest[len(hit):].strip()
            continue
        tok, _, rest = rest.partition(" ")
        rest = rest.strip()
        if affinity:  # unknown words after the affinity headers: ignore
            continue
        devices.append(tok)
    return devices, affinity


def _find_header(lines: list[str], first: str = "GPU0") -> int:
    for i, line in enumerate(lines):
        toks = line.split()
        if len(toks) >= 2 and toks[0] == first and not _is_path_token(toks[1]):
            return i
        if len(toks) == 1 and toks[0] == first:  # a single-GPU matrix without affinity columns
            return i
    raise TopologyError(
        "no `nvidia-smi topo -m` matrix found: expected a header line starting with GPU0 "
        "(e.g. 'GPU0  GPU1  CPU Affinity') followed by one row per GPU")


def _parse_matrix(lines: list[str], cell_ok) -> tuple[list[str], list[str], dict[str, list[str]], dict[str, list[str]]]:
    h = _find_header(lines)
    devices, affinity = _header_columns(lines[h])
    if len(devices) > MAX_DEVICES:
        raise TopologyError(f"the matrix header names {len(devices):,} devices; `nvidia-smi topo -m` shows one node's "
                            f"GPUs and NICs (a few dozen at most; gpusim reads up to {MAX_DEVICES:,}): give the output "
                            "of one node")
    known = set(devices)
    rows: dict[str, list[str]] = {}
    extra: dict[str, list[str]] = {}
    for line in lines[h + 1:]:
        toks = line.split()
        if not toks:
            if rows:
                break
            continue
        if toks[0].rstrip(":") in ("Legend", "NIC"):
            break
        label = toks[0]
        if label not in known:
            if rows:
                break
            continue
        vals = toks[1:1 + len(devices)]
        if len(vals) < len(devices):
            raise TopologyError(
                f"row {label} has {len(vals)} cells but the header names {len(devices)} devices "
                f"({' '.join(devices)}): the matrix is truncated or its columns were merged")
        for v in vals:
            if not cell_ok(v):
                raise TopologyError(f"row {label}: {v!r} is not a path class")
        rows[label] = vals
        extra[label] = toks[1 + len(devices):]
    missing = [d for d in devices if _GPU_NAME.match(d) and d not in rows]
    if missing:
        raise TopologyError(f"the header names {', '.join(missing)} but no row for "
                            f"{'it' if len(missing) == 1 else 'them'} follows: the matrix is truncated")
    return devices, affinity, rows, extra


def parse_topo(text: str, p2p_text: str | None = None) -> Topology:
    """Parse the output of ``nvidia-smi topo -m`` (and optionally ``nvidia-smi topo -p2p r``).

    Raises :class:`TopologyError` with what is wrong when the text is not such a matrix.
    """
    if not text or not text.strip():
        raise TopologyError("empty topology text (run `nvidia-smi topo -m` on the machine)")
    lines = _clean_lines(text)
    devices, affinity, rows, extra = _parse_matrix(lines, lambda v: bool(_CELL.match(v)))

    legend: dict[str, str] = {}
    for line in lines:
        m = _NIC_LEGEND.match(line)
        if m:
            legend[m.group(1)] = m.group(2)

    gpus, nics = [], []
    nic_pos = 0
    notes: list[str] = []
    for d in devices:
        m = _GPU_NAME.match(d)
        vals = extra.get(d, [])
        aff = dict(zip(affinity, vals))
        if len(vals) > len(affinity) and m:
            notes.append(f"row {d} has {len(vals) - len(affinity)} value(s) more than the affinity headers; "
                         f"the extra ones were ignored")
        if m:
            gpus.append(Device(d, "gpu", int(m.group(1)), None, aff.get("CPU Affinity"),
                               aff.get("NUMA Affinity"), aff.get("GPU NUMA ID")))
        else:
            nics.append(Device(d, "nic", nic_pos, legend.get(d, d)))
            nic_pos += 1
    if not gpus:
        raise TopologyError("the matrix has no GPU rows")

    paths: dict[tuple[str, str], Path | None] = {}
    for r, vals in rows.items():
        for c, v in zip(devices, vals):
            if r != c:
                paths[(r, c)] = Path.parse(v)
    topo = Topology(gpus=gpus, nics=nics, paths=paths, legend=legend, notes=notes)
    if p2p_text:
        topo.p2p = parse_p2p(p2p_text)
    return topo


def parse_p2p(text: str) -> dict[tuple[int, int], str]:
    """Parse ``nvidia-smi topo -p2p r`` (or w/n/a/p): {(i, j) with i < j: "OK" | "NS" | "CNS" ...}."""
    lines = _clean_lines(text)
    devices, _, rows, _ = _parse_matrix(lines, lambda v: bool(_P2P_CELL.match(v)))
    out: dict[tuple[int, int], str] = {}
    for r, vals in rows.items():
        mr = _GPU_NAME.match(r)
        if not mr:
            continue
        for c, v in zip(devices, vals):
            mc = _GPU_NAME.match(c)
            if not mc or v == "X":
                continue
            i, j = sorted((int(mr.group(1)), int(mc.group(1))))
            if (i, j) not in out or v != "OK":  # either direction failing counts
                out[(i, j)] = v
    return out
