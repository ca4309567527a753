"""From a node's wiring to the bus bandwidth and latency collectives see (pure numpy).

Inside a node the ring runs at the slowest path it must take (nvidia-smi ``topo -m`` classes):

- ``nvswitch``: every GPU reaches every other at its full NVLink bandwidth;
- ``nvlink-mesh``: NVLink point-to-point (DGX-1 hybrid cube mesh): rings laid over NVLink;
- ``nvlink-bridge-pairs``: bridges join pairs; with more than two GPUs the ring also crosses PCIe;
- ``pcie-switch``: peer-to-peer through a PCIe switch (PIX/PXB);
- ``pcie-host``: through the CPU's root complex (PHB/NODE);
- ``pcie-cross-socket``: through the CPU-to-CPU link (SYS), the slowest PCIe path;
- without peer-to-peer (GeForce cards, or disabled), data is staged through host memory. Disabling it
  (``NCCL_P2P_DISABLE=1``) takes NVLink away too: NCCL's P2P transport "uses CUDA direct access between GPUs,
  using NVLink or PCI", and without it the SHM transport stages every intra-node transfer through host memory
  (NCCL documentation, Environment Variables: NCCL_P2P_DISABLE, NCCL_SHM_DISABLE).

Each path class has an efficiency (``ModelParams.busbw_eff_frac``): achievable bus bandwidth over the link's
per-direction bandwidth. Across nodes, the inter-node bus bandwidth is the node's total NIC bandwidth
times the network kind's efficiency, divided by the fabric's oversubscription.
"""

from __future__ import annotations

import numpy as np

from gpusim import units
from gpusim.params import PATH_CLASSES, ModelParams

TOPOLOGY_CODES = {"single": 0, "nvswitch": 1, "nvlink-mesh": 2, "nvlink-bridge-pairs": 3, "pcie-switch": 4,
                  "pcie-host": 5, "pcie-cross-socket": 6}
TOPOLOGY_NAMES = {v: k for k, v in TOPOLOGY_CODES.items()}
PATH_CODES = {name: i for i, name in enumerate(PATH_CLASSES)}
#: network link kinds (hwdb Link.kind) -> path class
NETWORK_PATH = {"infiniband": "infiniband", "roce": "roce", "ethernet": "ethernet", "cloud-fabric": "cloud-fabric"}


def eff_table(params: ModelParams) -> np.ndarray:
    """``busbw_eff_frac`` as an array indexed by :data:`PATH_CODES`."""
    return np.array([params.busbw_eff_frac[k] for k in PATH_CLASSES], dtype=np.float64)


def intra_node_busbw(topology, gpus_per_node, intra_link_bytes_per_s, pcie_bytes_per_s, socket_bytes_per_s, p2p,
                     eff):
    """Achievable ring bus bandwidth inside a node and the path class that limits it.

    ``eff`` is :func:`eff_table`. Returns ``(busbw_bytes_per_s, path_code)``; ``inf`` for one GPU per node.
    """
    t = np.asarray(topology)
    g = np.asarray(gpus_per_node, dtype=np.float64)
    link = np.asarray(intra_link_bytes_per_s, dtype=np.float64)
    pcie = np.asarray(pcie_bytes_per_s, dtype=np.float64)
    sock = np.asarray(socket_bytes_per_s, dtype=np.float64)
    p2p = np.asarray(p2p, dtype=bool)
    P = PATH_CODES

    staged = pcie * eff[P["host-staged"]]
    pcie_host = np.where(p2p, pcie * eff[P["pcie-host"]], staged)
    pcie_switch = np.where(p2p, pcie * eff[P["pcie-switch"]], staged)
    cross = np.where(p2p, np.minimum(pcie, sock) * eff[P["pcie-cross-socket"]], np.minimum(staged, sock))
    bridge = link * eff[P["nvlink-bridge"]]

    busbw = np.select(
        [t == 1, t == 2, t == 3, t == 4, t == 5, t == 6],
        [np.where(p2p, link * eff[P["nvswitch"]], staged), np.where(p2p, link * eff[P["nvlink-mesh"]], staged),
         np.where(p2p, np.where(g > 2, np.minimum(bridge, pcie_host), bridge), staged), pcie_switch, pcie_host,
         cross],
        default=np.inf)
    # [issue 18] without peer-to-peer every wiring stages through host memory, NVLink included (module docstring)
    path = np.select(
        [~p2p & (t >= 1) & (t <= 6), t == 1, t == 2, (t == 3) & ((g <= 2) | (bridge <= pcie_host)), t == 3,
         t == 4, t == 5, t == 6],
        [P["host-staged"], P["nvswitch"], P["nvlink-mesh"], P["nvlink-bridge"], P["pcie-host"], P["pcie-switch"],
         P["pcie-host"], P["pcie-cross-socket"]],
        default=-1)
    single = g <= 1
    return np.where(single, np.inf, busbw), np.where(single, -1, path)


def inter_node_busbw(nic_bytes_per_s, nics_per_node, network_path_code, oversubscription, eff):
    """Bus bandwidth out of one node: all its GPU NICs times the network's efficiency, over the
    fabric's oversubscription (1 = non-blocking)."""
    e = eff[np.asarray(network_path_code, dtype=np.int64)]
    return (np.asarray(nic_bytes_per_s, dtype=np.float64) * np.asarray(nics_per_node, dtype=np.float64) * e
            / np.asarray(oversubscription, dtype=np.float64))


def gpu_nic_path_bytes_per_s(gpus_per_node, pcie_bytes_per_s, eff):
    """[issue 18] The most one node's GPUs of a job can put into the network: each GPU reaches its NICs over its own
    PCIe link (GPUDirect RDMA moves the data between GPU and NIC as PCIe peer-to-peer transactions, through the PCIe
    switch they share: path class ``pcie-switch``; NVIDIA NCCL's topology search bounds a network channel by the
    bandwidth of the GPU-to-NIC path, ``src/graph/search.cc``), so ``g x PCIe x eff``. A full node of a rail-optimised
    design (one 400 Gb/s NIC per PCIe 5.0 x16 GPU) is bound by its NICs, not by this; one GPU driving a node's four or
    eight NICs is bound by it. ``eff`` is :func:`eff_table`."""
    return (np.asarray(gpus_per_node, dtype=np.float64) * np.asarray(pcie_bytes_per_s, dtype=np.float64)
            * eff[PATH_CODES["pcie-switch"]])


def nccl_nvlink_gbyte_per_s_per_link(compute_capability: str | None, table: dict[str, float]) -> float | None:
    """NCCL's bandwidth of one NVLink link for a GPU of this compute capability (GB/s), or ``None``.

    NCCL ``src/graph/topo.cc`` ``ncclTopoGetNvbw``: the figure of the newest generation at or below the GPU's
    (``SM100`` for 10.x, ``SM90`` for 9.x, ``SM80`` for 8.x) except ``SM86`` (GA10x), which only 8.6 takes.
    ``table`` is ``ModelParams.nccl_nvlink_gbyte_per_s_per_link`` (keys ``"major.minor"``).
    """
    if not compute_capability:
        return None
    if compute_capability in table:
        return float(table[compute_capability])

    def key(cc: str) -> tuple[int, int]:
        major, minor = cc.split(".")
        return int(major), int(minor)
    mine = key(compute_capability)
    below = [k for k in table if k.endswith(".0") and key(k) <= mine]
    return float(table[max(below, key=key)]) if below else None


def nccl_nvswitch_busbw(links_per_gpu, per_link_gbyte_per_s) -> float | None:
    """Ring bus bandwidth through an NVSwitch as NCCL's topology search finds it: every GPU reaches the switch over
    all its links, so ``links x per-link`` bytes/s whatever the number of GPUs (2 to all of them: a partial node
    keeps each GPU's links). ``None`` where either figure is unknown (the link x efficiency rule applies)."""
    if not links_per_gpu or per_link_gbyte_per_s is None:
        return None
    return units.gbyte_per_s_to_bytes_per_s(float(links_per_gpu) * float(per_link_gbyte_per_s))
