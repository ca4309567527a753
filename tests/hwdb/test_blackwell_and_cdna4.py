"""Blackwell (B200, B300, GB200, GB300) and CDNA 4 (MI355X) entries against the vendors' own aggregates.

NVIDIA quotes HGX/DGX figures for 8 GPUs and NVL72 figures for 72, mostly "with sparsity"; AMD quotes per-GPU peaks
that follow from compute units x clock x rate per CU. The per-GPU dense figures in ``hwdb/gpus`` must multiply back
to those published totals, and the nodes built from them must add up to the racks and platforms they describe. The
totals below are the published figures named in each test (see the ``sources`` of the entries); nothing here is
derived from the YAML itself.
"""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from gpusim.hardware import Node
from gpusim.hwdb import load

NVL72_GPUS = 72


@pytest.fixture(scope="module")
def db():
    return load(use_env=False)


# ------------------------------------------------------------------------------------------------
# GPUs: per-GPU dense figures against the published totals
# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("gpu_id", "key", "gpus", "sparse", "total_tflop"), [
    # NVIDIA HGX table, B200 and B300 columns (8 GPUs; FP8 and FP16/BF16 with sparsity)
    ("b200", "fp8", 8, True, 72_000), ("b200", "bf16", 8, True, 36_000), ("b200", "tf32", 8, True, 18_000),
    ("b300", "fp8", 8, True, 72_000), ("b300", "bf16", 8, True, 36_000), ("b300", "fp64", 8, False, 10),
    # NVIDIA GB300 NVL72 table (72 GPUs): FP4 1,080 PF dense; FP8/FP6 720 PF, FP16/BF16 360 PF, TF32 180 PF sparse
    ("gb300", "fp4", 72, False, 1_080_000), ("gb300", "fp8", 72, True, 720_000),
    ("gb300", "bf16", 72, True, 360_000), ("gb300", "tf32", 72, True, 180_000),
    # NVIDIA GB200 NVL72 table: FP8 720 PF, FP16/BF16 360 PF with sparsity
    ("gb200", "fp8", 72, True, 720_000), ("gb200", "bf16", 72, True, 360_000),
])
def test_dense_figures_multiply_back_to_the_published_totals(db, gpu_id, key, gpus, sparse, total_tflop):
    dense = getattr(db.gpu(gpu_id).dense_tflop_per_s, key)
    assert dense is not None, f"{gpu_id}.{key} unset"
    assert dense * gpus * (2 if sparse else 1) == pytest.approx(total_tflop, rel=0.01)


def test_gb300_rack_memory_adds_up(db):
    """GB300 NVL72: up to 20 TB HBM3e at 576 TB/s over 72 GPUs (288 GB x 72 = 20.7 TB, 'up to 20 TB')."""
    g = db.gpu("gb300")
    assert g.memory_gbyte_per_s * NVL72_GPUS == pytest.approx(576_000, rel=0.01)
    assert 20_000 <= g.memory_gib * NVL72_GPUS <= 21_000


def test_blackwell_ultra_keeps_training_peaks_and_raises_fp4(db):
    """Blackwell Ultra raised dense FP4 (1.5x on the Grace part) and cut FP64, not BF16: B300 = B200 and
    GB300 = GB200 at BF16 (the Grace parts run at a higher power limit than the HGX parts)."""
    b200, b300, gb200, gb300 = (db.gpu(i) for i in ("b200", "b300", "gb200", "gb300"))
    assert b300.dense_tflop_per_s.bf16 == b200.dense_tflop_per_s.bf16
    assert gb300.dense_tflop_per_s.bf16 == gb200.dense_tflop_per_s.bf16
    assert gb300.dense_tflop_per_s.fp4 == pytest.approx(1.5 * gb200.dense_tflop_per_s.fp4)
    assert b300.dense_tflop_per_s.fp64 < 0.05 * b200.dense_tflop_per_s.fp64, "B300 cut FP64 to ~1.25 TF"
    assert gb300.sm_count == b300.sm_count == b200.sm_count, "one die configuration (see notes: gb300 is an estimate)"


def test_mi355x_peaks_follow_from_compute_units(db):
    """256 CUs at 2.4 GHz; CDNA 4 matrix cores do 8,192 FP8 FLOP per CU per clock (AMD, ISSCC 2026), FP16/BF16 half
    of that, MXFP4 twice; FP32 vector 256 FLOP/CU/clock, FP64 half of that."""
    g = db.gpu("mi355x")
    clock_hz = 2.4e9
    per_cu_fp8 = 8192
    fp8 = g.sm_count * per_cu_fp8 * clock_hz / 1e12
    t = g.dense_tflop_per_s
    assert t.fp8 == pytest.approx(fp8, rel=1e-3)
    assert t.fp16 == t.bf16 == pytest.approx(fp8 / 2, rel=1e-3)
    assert t.fp4 == pytest.approx(2 * fp8, rel=1e-3)
    assert t.fp32 == pytest.approx(g.sm_count * 256 * clock_hz / 1e12, rel=1e-3)
    assert t.fp64 == pytest.approx(t.fp32 / 2, rel=1e-3)
    assert t.tf32 is None, "CDNA 4 has no TF32 matrix instruction"


@pytest.mark.parametrize(("gpu_id", "per_link_both_directions"), [("mi300x", 128), ("mi355x", 153.6)])
def test_infinity_fabric_is_seven_links_one_per_peer(db, gpu_id, per_link_both_directions):
    g = db.gpu(gpu_id)
    assert g.peer_link.links == 7
    assert g.peer_link.gbyte_per_s_per_direction == pytest.approx(7 * per_link_both_directions / 2)


def test_new_datacenter_gpus_have_sm_counts(db):
    for gpu_id in ("b200", "b300", "gb300", "mi300x", "mi325x", "mi355x"):
        assert db.gpu(gpu_id).sm_count, gpu_id


# ------------------------------------------------------------------------------------------------
# Nodes
# ------------------------------------------------------------------------------------------------

NEW_NODES = ("hgx-b200-8", "dgx-b300", "hgx-b300-8", "gb300-nvl72", "mi355x-8-oam")


@pytest.mark.parametrize("node_id", NEW_NODES)
def test_new_nodes_resolve(db, node_id):
    n = db.node(node_id)
    gpu, intra, nic = db.gpu(n.gpu), db.link(n.intra_link), db.link(n.nic_link)
    assert intra.scope == "intra-node" and nic.scope == "inter-node"
    assert gpu.peer_link.gbyte_per_s_per_direction == pytest.approx(intra.bandwidth_gbyte_per_s_per_direction)
    assert n.nics_per_node == n.gpus_per_node, f"{node_id}: one NIC per GPU"


def test_gb300_nvl72_is_a_tray_in_a_72_gpu_nvlink_domain(db):
    """NVIDIA GB300 NVL72: 72 GPUs and 36 Grace CPUs with 2,592 cores in 18 compute trays, 72 ConnectX-8 NICs."""
    tray = db.node("gb300-nvl72")
    assert tray.gpus_per_node == 4
    assert tray.nvlink_domain_gpus == NVL72_GPUS
    assert NVL72_GPUS % tray.gpus_per_node == 0
    trays = NVL72_GPUS // tray.gpus_per_node
    assert trays == 18
    assert trays * tray.cpu_cores == 2592
    assert trays * tray.numa_sockets == 36
    assert trays * tray.nics_per_node == 72
    assert db.link(tray.intra_link).nvls, "NVLink Switch trays reduce in the switch"


def test_nvlink_domain_holds_whole_nodes(db):
    for n in db.nodes.values():
        domain = n.nvlink_domain_gpus or n.gpus_per_node
        assert domain >= n.gpus_per_node and domain % n.gpus_per_node == 0, n.id


#: a minimal tray for schema checks (figures arbitrary; only validation is exercised)
_TRAY = dict(id="t-tray", name="test tray", kind="server", gpu="gb300", gpus_per_node=4, intra_link="nvlink5-nvl72",
             intra_topology="nvswitch", cpu_cores=144, ram_gib=960, numa_sockets=2, storage_gbyte_per_s=10)
_TRAY_FIELDS = ["gpus_per_node", "cpu_cores", "ram_gib", "numa_sockets", "storage_gbyte_per_s"]


def _source(*extra):
    return [{"title": "a test", "fields": [*_TRAY_FIELDS, *extra]}]


def test_nvlink_domain_must_be_positive():
    assert Node(**_TRAY, sources=_source()).nvlink_domain_gpus is None
    assert Node(**_TRAY, nvlink_domain_gpus=72, sources=_source("nvlink_domain_gpus")).nvlink_domain_gpus == 72
    with pytest.raises(ValidationError):
        Node(**_TRAY, nvlink_domain_gpus=0, sources=_source("nvlink_domain_gpus"))


def test_nvlink_domain_needs_a_source():
    with pytest.raises(ValidationError, match="nvlink_domain_gpus"):
        Node(**_TRAY, nvlink_domain_gpus=72, sources=_source())


@pytest.mark.parametrize(("node_id", "gbit_per_gpu"), [
    ("gb300-nvl72", 800), ("dgx-b300", 800), ("hgx-b300-8", 800), ("hgx-b200-8", 400), ("mi355x-8-oam", 400)])
def test_network_per_gpu(db, node_id, gbit_per_gpu):
    """ConnectX-8 (800 Gb/s) per GPU on Blackwell Ultra; ConnectX-7 / Pollara 400 (400 Gb/s) on B200 and MI355X."""
    n = db.node(node_id)
    assert db.link(n.nic_link).signalling_gbit_per_s * n.nics_per_node / n.gpus_per_node == gbit_per_gpu


def test_mi355x_platform_pairs_get_one_link(db):
    """Full mesh: each pair of MI355X shares one 153.6 GB/s link (76.8 GB/s per direction), 1/7 of the aggregate."""
    n = db.node("mi355x-8-oam")
    link = db.link(n.intra_link)
    assert n.intra_topology == "nvlink-mesh"
    assert link.bandwidth_gbyte_per_s_per_direction / (n.gpus_per_node - 1) == pytest.approx(76.8)
