"""gpusim.topology on `nvidia-smi topo -m` outputs of several machine types (fixtures in topo/, each with
a comment saying where its layout comes from), the real format's quirks, and the warnings."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import get_args

import pytest

from gpusim.hardware import IntraTopology
from gpusim.topology import Path as TPath
from gpusim.topology import TopologyError, parse_p2p, parse_topo

TOPO = Path(__file__).parent / "topo"


def load(name: str, p2p: str | None = None):
    return parse_topo((TOPO / name).read_text(), (TOPO / p2p).read_text() if p2p else None)


# name, p2p file, n_gpus, n_nics, intra_topology, index-order ring worst, best ring worst, warning patterns
CASES = [
    ("dgx1v.txt", None, 8, 4, "nvlink-mesh", "SYS", "NV2", [r"NVLink bonds differ in width \(NV1 to NV2\)"]),
    ("dgx_a100.txt", None, 8, 10, "nvswitch", "NV12", "NV12", []),
    ("dgx_h100.txt", None, 8, 12, "nvswitch", "NV18", "NV18", []),
    ("pcie8_dual_socket.txt", None, 8, 1, "pcie-cross-socket", "SYS", "SYS",
     [r"16 GPU pairs .* connect through SYS", r"GPU4, GPU5, GPU6, GPU7 have no NIC on their CPU socket"]),
    ("rtx3090_nvlink_bridge.txt", None, 2, 0, "nvlink-bridge-pairs", "NV4", "NV4", []),
    ("rtx4090_x4.txt", "rtx4090_x4_p2p.txt", 4, 0, "pcie-host", "NODE", "NODE",
     [r"Peer-to-peer is not available between GPU0-GPU1 \(NS: not supported\)"]),
]


@pytest.mark.parametrize("name,p2p,n_gpus,n_nics,intra,ring,best,warns", CASES, ids=[c[0] for c in CASES])
def test_machine_types(name, p2p, n_gpus, n_nics, intra, ring, best, warns):
    t = load(name, p2p)
    s = t.summary()
    assert s["n_gpus"] == n_gpus and s["n_nics"] == n_nics
    assert s["intra_topology"] == intra
    assert s["intra_topology"] in get_args(IntraTopology)  # the node schema's vocabulary
    assert s["ring_worst_path"] == ring
    assert s["best_ring_worst_path"] == best
    assert sorted(s["best_ring_order"]) == list(range(n_gpus))
    json.dumps(s)  # JSON-ready, for meta.json
    w = t.warnings()
    for pat in warns:
        assert any(re.search(pat, x) for x in w), (pat, w)
    if not warns:
        assert w == []
    # symmetric reading: every GPU pair has one path, the same both ways
    for lk in t.links():
        assert t.path(lk.a, lk.b) == t.path(lk.b, lk.a)
    assert len(t.links()) == n_gpus * (n_gpus - 1) // 2


def test_dgx1v_mesh_details():
    t = load("dgx1v.txt")
    assert t.path(0, 1) == TPath("NV", 1) and t.path(0, 3) == TPath("NV", 2) and t.path(0, 5).kind == "SYS"
    s = t.summary()
    assert s["gpu_pair_paths"] == {"NV1": 8, "NV2": 8, "SYS": 12}
    assert (s["min_nvlinks"], s["max_nvlinks"]) == (1, 2)
    # NCCL's double-bonded ring exists: every hop of the best ring is NV2
    order = s["best_ring_order"]
    assert all(t.path(order[i], order[(i + 1) % 8]) == TPath("NV", 2) for i in range(8))
    assert t.gpus[0].cpu_affinity == "0-19,40-59" and t.gpus[0].numa_affinity is None  # old driver: no NUMA column
    assert [n.name for n in t.nics] == ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"]
    assert t.nearest_nic(5) == (2, TPath("PIX"))


def test_dgx_a100_affinity_and_nics():
    t = load("dgx_a100.txt")
    g = {x.index: x for x in t.gpus}
    assert (g[0].cpu_affinity, g[0].numa_affinity) == ("48-63,176-191", "3")
    assert (g[4].cpu_affinity, g[4].numa_affinity) == ("112-127,240-255", "7")
    assert t.summary()["numa_nodes"] == ["1", "3", "5", "7"]
    assert t.summary()["nearest_nic_path"] == {str(i): "PXB" for i in range(8)}
    assert t.nic_path(0, 4).kind == "SYS"  # the storage NIC sits on another NUMA node


def test_dgx_h100_new_format_quirks():
    text = (TOPO / "dgx_h100.txt").read_text()
    assert "\x1b[4m" in text and "0\t\tN/A" in text  # the fixture carries both quirks
    t = parse_topo(text)
    assert [n.name for n in t.nics][:2] == ["NIC0", "NIC1"]
    assert [n.alias for n in t.nics] == [f"mlx5_{k}" for k in range(12)]  # from the NIC Legend
    g0 = t.gpus[0]
    assert (g0.cpu_affinity, g0.numa_affinity, g0.gpu_numa_id) == ("0-55,112-167", "0", "N/A")
    assert t.gpus[7].numa_affinity == "1"
    assert t.nearest_nic(1) == (3, TPath("PXB"))


def test_spaces_and_tabs_read_the_same():
    tabbed = (TOPO / "dgx_h100.txt").read_text()
    spaced = "\n".join(re.sub(r"\t+", "    ", ln) for ln in tabbed.splitlines())
    a, b = parse_topo(tabbed), parse_topo(spaced)
    assert a.summary() == b.summary()
    assert a.gpus == b.gpus
    spaced_pcie = parse_topo((TOPO / "pcie8_dual_socket.txt").read_text())  # written with spaces
    assert spaced_pcie.gpus[4].cpu_affinity == "24-47,72-95" and spaced_pcie.gpus[4].gpu_numa_id == "N/A"
    assert spaced_pcie.path(0, 1).kind == "PIX" and spaced_pcie.path(0, 2).kind == "PXB"


def test_legacy_soc_and_single_gpu():
    old = ("        GPU0    GPU1    GPU2    GPU3    CPU Affinity\n"
           "GPU0     X      PIX     SOC     SOC     0-11,24-35\n"
           "GPU1    PIX      X      SOC     SOC     0-11,24-35\n"
           "GPU2    SOC     SOC      X      PIX     12-23,36-47\n"
           "GPU3    SOC     SOC     PIX      X      12-23,36-47\n\n"
           "Legend:\n\n  X   = Self\n  SOC  = Connection traversing a socket-level link (e.g. QPI)\n")
    t = parse_topo(old)
    assert t.path(0, 2).kind == "SYS"
    assert t.intra_topology() == "pcie-cross-socket"
    one = parse_topo("\tGPU0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\nGPU0\t X \t0-15\t0\t\tN/A\n")
    assert one.n_gpus == 1 and one.intra_topology() == "single" and one.warnings() == []
    assert one.summary()["ring_worst_path"] is None


def test_bridge_pairs_with_pcie_between_warns():
    text = ("\tGPU0\tGPU1\tGPU2\tGPU3\tCPU Affinity\tNUMA Affinity\n"
            "GPU0\t X \tNV4\tPHB\tPHB\t0-31\t0\n"
            "GPU1\tNV4\t X \tPHB\tPHB\t0-31\t0\n"
            "GPU2\tPHB\tPHB\t X \tNV4\t0-31\t0\n"
            "GPU3\tPHB\tPHB\tNV4\t X \t0-31\t0\n")
    t = parse_topo(text)
    assert t.intra_topology() == "nvlink-bridge-pairs"
    assert t.summary()["best_ring_worst_path"] == "PHB"
    assert any("NVLink joins only some GPU pairs" in w and "PCIe speed" in w for w in t.warnings())


def test_asymmetric_matrix_is_reported():
    text = ("\tGPU0\tGPU1\tGPU2\n"
            "GPU0\t X \tPIX\tPXB\n"
            "GPU1\tPIX\t X \tPXB\n"
            "GPU2\tPHB\tPXB\t X \n")
    t = parse_topo(text)
    assert any("not symmetric" in w and "GPU0-GPU2" in w for w in t.warnings())


def test_p2p_matrix():
    p = parse_p2p((TOPO / "rtx4090_x4_p2p.txt").read_text())
    assert p == {(i, j): "NS" for i in range(4) for j in range(i + 1, 4)}
    ok = parse_p2p("\tGPU0\tGPU1\nGPU0\tX\tOK\nGPU1\tOK\tX\n")
    assert ok == {(0, 1): "OK"}
    t = parse_topo((TOPO / "rtx4090_x4.txt").read_text(), "\tGPU0\tGPU1\tGPU2\tGPU3\n" + "".join(
        f"GPU{i}\t" + "\t".join("X" if i == j else "OK" for j in range(4)) + "\n" for i in range(4)))
    assert t.warnings() == [] and t.summary()["p2p_unsupported_pairs"] == []


@pytest.mark.parametrize("text,msg", [
    ("", "empty"),
    ("nvidia-smi: command not found\n", "no `nvidia-smi topo -m` matrix"),
    ("\tGPU0\tGPU1\nGPU0\t X \tNV4\n", "no row for it"),
    ("\tGPU0\tGPU1\nGPU0\t X \nGPU1\tNV4\t X \n", "row GPU0 has 1 cells"),
    ("\tGPU0\tGPU1\nGPU0\t X \tFOO\nGPU1\tFOO\t X \n", "'FOO' is not a path class"),
])
def test_parse_errors_are_clear(text, msg):
    with pytest.raises(TopologyError, match=re.escape(msg)):
        parse_topo(text)


def test_no_torch_import():
    code = ("import sys, gpusim.topology, gpusim.profile; "
            "assert 'torch' not in sys.modules, 'torch imported'")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_an_implausibly_large_matrix_is_refused_and_large_ones_parse_linearly():
    import sys
    import time
    from pathlib import Path

    import pytest

    from gpusim.topology import MAX_DEVICES, TopologyError, parse_topo

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    from topo_speed import matrix

    with pytest.raises(TopologyError, match="one node"):
        parse_topo(matrix(MAX_DEVICES + 1))
    t0 = time.perf_counter()
    topo = parse_topo(matrix(128))
    s = topo.summary()
    topo.warnings()
    assert s["n_gpus"] == 128 and s["gpu_pairs"] == 128 * 127 // 2
    assert time.perf_counter() - t0 < 10.0  # was minutes-scale superlinear; benchmarks/topo_speed.py times it
