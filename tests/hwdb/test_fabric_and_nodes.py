"""Links, nodes, clusters, prices and energy in the shipped hardware database.

These check the figures against each other and against the physics they stand for (encoding overheads, line
rates, what a topology needs), so that a typo or a mis-filed entry fails here rather than in a prediction.
"""

from __future__ import annotations

import datetime as dt

import pytest

from gpusim.hwdb import load

NETWORK_KINDS = {"infiniband", "roce", "ethernet", "cloud-fabric"}

#: ids other code builds by name or the brief asks for; renaming one must be deliberate
REQUIRED_LINKS = {
    "pcie3-x16", "pcie4-x16", "pcie5-x16", "pcie6-x16",
    "nvlink1-mesh", "nvlink2-mesh", "nvlink2-nvswitch", "nvlink3-nvswitch", "nvlink4-nvswitch", "nvlink5-nvswitch",
    "nvlink5-nvl72", "nvlink2-bridge", "nvlink3-bridge", "nvlink4-bridge",
    "infinity-fabric-mi250x", "infinity-fabric-mi300x", "infinity-fabric-mi355x", "upi", "xgmi-cpu", "host-staged",
    "ib-edr-100", "ib-hdr-200", "ib-ndr-400", "ib-xdr-800", "eth-10g", "eth-25g", "eth-100g",
    "roce-100g", "roce-200g", "roce-400g", "roce-800g", "aws-efa-100", "aws-efa-v2-100",
    "gcp-gpudirect-tcpx", "gcp-gpudirect-tcpxo",
}
REQUIRED_NODES = {
    "dgx-1-p100", "dgx-1-v100", "dgx-2", "dgx-2h", "dgx-a100-40gb", "dgx-a100-80gb", "dgx-h100", "dgx-b200",
    "hgx-h100-8", "hgx-h200-8", "gb200-nvl72", "mi300x-8-oam",
    "hgx-b200-8", "dgx-b300", "hgx-b300-8", "gb300-nvl72", "mi355x-8-oam",
    "pcie-8x-switch", "pcie-4x-host", "pcie-8x-dual-socket", "ws-2x-nvlink-bridge", "ws-4x-rtx-4090",
    "aws-p3-16xlarge", "aws-p3dn-24xlarge", "aws-p4d-24xlarge", "aws-p4de-24xlarge", "aws-p5-48xlarge",
    "aws-p5e-48xlarge", "gcp-a2-highgpu-8g", "gcp-a2-ultragpu-8g", "gcp-a3-highgpu-8g", "gcp-a3-megagpu-8g",
    "azure-nd96asr-v4", "azure-nd96amsr-a100-v4", "azure-nd96isr-h100-v5",
}

#: cloud instances with no on-demand price in the database, and why. Shrink this list, never grow it quietly.
UNPRICED_CLOUD_INSTANCES = {
    "aws-p5e-48xlarge": "sold through EC2 Capacity Blocks at launch; no dated on-demand figure found",
    "azure-nd96asr-v4": "no Azure pay-as-you-go figure with an honest date found",
    "azure-nd96amsr-a100-v4": "no Azure pay-as-you-go figure with an honest date found",
    "azure-nd96isr-h100-v5": "no Azure pay-as-you-go figure with an honest date found",
}

#: intra-node topology -> link kinds that can carry it
TOPOLOGY_LINK_KINDS = {
    "nvswitch": {"nvswitch"},
    "nvlink-mesh": {"nvlink-mesh", "infinity-fabric"},
    "nvlink-bridge-pairs": {"nvlink-bridge"},
    "pcie-switch": {"pcie"},
    "pcie-host": {"pcie", "host-staged"},
    "pcie-cross-socket": {"pcie", "host-staged"},
    "single": {"pcie", "nvswitch", "nvlink-mesh", "nvlink-bridge", "infinity-fabric", "host-staged"},
}


@pytest.fixture(scope="module")
def db():
    return load(use_env=False)


def _pcie_of(db, node):
    return db.link(node.pcie_link) if node.pcie_link else db.link(db.pcie_link_id(db.gpu(node.gpu)))


def test_database_loads_with_enough_links_and_nodes(db):
    assert len(db.links) >= 15
    assert len(db.nodes) >= 12
    assert REQUIRED_LINKS <= set(db.links), sorted(REQUIRED_LINKS - set(db.links))
    assert REQUIRED_NODES <= set(db.nodes), sorted(REQUIRED_NODES - set(db.nodes))


def test_every_gpu_has_its_pcie_link(db):
    for g in db.gpus.values():
        assert db.pcie_link_id(g) in db.links, g.id


@pytest.mark.parametrize("gen, payload_per_lane_gbyte", [
    (3, 8 * 128 / 130 / 8), (4, 16 * 128 / 130 / 8), (5, 32 * 128 / 130 / 8), (6, 64 * 242 / 256 / 8)])
def test_pcie_is_the_line_rate_after_encoding(db, gen, payload_per_lane_gbyte):
    found = [link for link in db.links.values() if link.kind == "pcie" and link.id.startswith(f"pcie{gen}-x")]
    assert found, f"no PCIe {gen} link"
    for link in found:
        lanes = int(link.id.split("-x")[1])
        assert link.bandwidth_gbyte_per_s_per_direction == pytest.approx(payload_per_lane_gbyte * lanes, rel=0.01), link.id
        assert link.signalling_gbit_per_s == pytest.approx(lanes * {3: 8, 4: 16, 5: 32, 6: 64}[gen]), link.id


def test_each_pcie_generation_doubles(db):
    bw = [db.link(f"pcie{g}-x16").bandwidth_gbyte_per_s_per_direction for g in (3, 4, 5, 6)]
    for slower, faster in zip(bw, bw[1:]):
        assert 1.8 < faster / slower < 2.1


def test_network_bandwidth_matches_signalling(db):
    """A network port's data rate is its marketed rate / 8, within 5 % (the schema only catches 3x slips)."""
    nets = [link for link in db.links.values() if link.kind in NETWORK_KINDS]
    assert len(nets) >= 10
    for link in nets:
        assert link.scope == "inter-node", link.id
        assert link.signalling_gbit_per_s is not None, link.id
        assert link.bandwidth_gbyte_per_s_per_direction * 8 == pytest.approx(link.signalling_gbit_per_s, rel=0.05), link.id


def test_link_names_state_their_rate(db):
    """`ib-ndr-400`, `roce-200g`, `eth-25g`, `aws-efa-100`: the number in the id is the port rate in Gb/s."""
    for link in db.links.values():
        if link.kind in NETWORK_KINDS and link.id.split("-")[-1].rstrip("g").isdigit():
            assert float(link.id.split("-")[-1].rstrip("g")) == link.signalling_gbit_per_s, link.id


@pytest.mark.parametrize("switch, pcie", [
    ("nvlink2-nvswitch", "pcie3-x16"), ("nvlink3-nvswitch", "pcie4-x16"),
    ("nvlink4-nvswitch", "pcie5-x16"), ("nvlink5-nvswitch", "pcie6-x16"), ("nvlink5-nvl72", "pcie6-x16")])
def test_nvswitch_faster_than_pcie_of_its_era(db, switch, pcie):
    assert db.link(switch).bandwidth_gbyte_per_s_per_direction > 4 * db.link(pcie).bandwidth_gbyte_per_s_per_direction


def test_nvlink_generations_never_slow_down(db):
    order = ["nvlink2-nvswitch", "nvlink3-nvswitch", "nvlink4-nvswitch", "nvlink5-nvswitch"]
    bws = [db.link(i).bandwidth_gbyte_per_s_per_direction for i in order]
    assert bws == sorted(bws) and len(set(bws)) == len(bws)


def test_nvls_only_from_third_generation_nvswitch(db):
    assert not db.link("nvlink2-nvswitch").nvls and not db.link("nvlink3-nvswitch").nvls
    assert db.link("nvlink4-nvswitch").nvls and db.link("nvlink5-nvswitch").nvls and db.link("nvlink5-nvl72").nvls


def test_latency_ordering(db):
    """NVLink hop < PCIe hop < RDMA network hop < host-staged copy and TCP sockets."""
    nv, pcie = db.link("nvlink4-nvswitch").latency_us, db.link("pcie5-x16").latency_us
    ib = db.link("ib-ndr-400").latency_us
    assert nv < pcie < ib < db.link("host-staged").latency_us
    assert ib < db.link("eth-100g").latency_us


def test_host_staged_is_slower_than_any_p2p_pcie_gen4(db):
    assert db.link("host-staged").bandwidth_gbyte_per_s_per_direction < db.link("pcie4-x16").bandwidth_gbyte_per_s_per_direction


def test_node_bandwidths_are_positive(db):
    for n in db.nodes.values():
        intra = db.link(n.intra_link)
        assert intra.scope == "intra-node", n.id
        assert intra.bandwidth_gbyte_per_s_per_direction > 0, n.id
        assert n.nic_link is not None, f"{n.id}: every node in the shipped database names its network"
        nic = db.link(n.nic_link)
        assert nic.scope == "inter-node", n.id
        per_gpu = nic.bandwidth_gbyte_per_s_per_direction * n.nics_per_node / n.gpus_per_node
        assert per_gpu > 0, n.id


def test_topology_matches_intra_link(db):
    for n in db.nodes.values():
        kind = db.link(n.intra_link).kind
        assert kind in TOPOLOGY_LINK_KINDS[n.intra_topology], f"{n.id}: {n.intra_topology} over a {kind} link"
        if n.intra_topology == "pcie-cross-socket":
            assert n.socket_link and db.link(n.socket_link).kind == "cpu-interconnect", n.id
        if not n.p2p:
            assert kind == "host-staged", f"{n.id}: p2p is off, so GPUs talk through host memory"
        if kind == "host-staged":
            assert not n.p2p, n.id


def test_nvlink_nodes_use_gpus_with_that_link(db):
    """An NVSwitch/mesh/bridge node must hold GPUs whose own peer link is at least as fast (no typo'd pairing)."""
    for n in db.nodes.values():
        link = db.link(n.intra_link)
        if link.kind in {"nvswitch", "nvlink-mesh", "nvlink-bridge", "infinity-fabric"}:
            gpu = db.gpu(n.gpu)
            assert gpu.peer_link is not None, n.id
            assert gpu.peer_link.gbyte_per_s_per_direction >= link.bandwidth_gbyte_per_s_per_direction * 0.99, n.id


def test_pcie_nodes_no_faster_than_the_gpu_slot(db):
    for n in db.nodes.values():
        if db.link(n.intra_link).kind == "pcie":
            gpu_slot = db.link(db.pcie_link_id(db.gpu(n.gpu)))
            assert db.link(n.intra_link).bandwidth_gbyte_per_s_per_direction <= gpu_slot.bandwidth_gbyte_per_s_per_direction, n.id


def test_consumer_cards_without_p2p_are_not_given_it(db):
    for n in db.nodes.values():
        gpu = db.gpu(n.gpu)
        if n.intra_topology.startswith("pcie") and not gpu.p2p_pcie:
            assert not n.p2p, f"{n.id}: {gpu.id} has no PCIe peer-to-peer"


def test_node_resources_are_plausible(db):
    for n in db.nodes.values():
        assert 1 <= n.cpu_cores / n.gpus_per_node <= 64, n.id
        assert n.ram_gib >= 0.5 * n.gpus_per_node * db.gpu(n.gpu).memory_gib or n.kind == "workstation", n.id
        assert 0.1 <= n.storage_gbyte_per_s / n.gpus_per_node <= 20, n.id


def test_known_nic_bandwidth_per_gpu(db):
    """A few that the literature quotes: DGX A100 200 Gb/s per GPU, DGX H100 400, p5 4x100, p4d 400/8."""
    def per_gpu_gbit(node_id):
        n = db.node(node_id)
        return db.link(n.nic_link).signalling_gbit_per_s * n.nics_per_node / n.gpus_per_node

    assert per_gpu_gbit("dgx-a100-80gb") == 200
    assert per_gpu_gbit("dgx-h100") == 400
    assert per_gpu_gbit("aws-p5-48xlarge") == 400
    assert per_gpu_gbit("aws-p4d-24xlarge") == 50
    assert per_gpu_gbit("gcp-a3-megagpu-8g") == 200
    assert per_gpu_gbit("gcp-a3-highgpu-8g") == 100
    assert per_gpu_gbit("gb200-nvl72") == 400


def test_clusters_reference_networked_nodes(db):
    assert len(db.clusters) >= 3
    for c in db.clusters.values():
        node = db.node(c.node)
        link = db.link(c.inter_link or node.nic_link)
        assert link.scope == "inter-node", c.id
        assert c.max_nodes * node.gpus_per_node >= 1000, c.id


def test_every_cloud_instance_has_a_cloud_price(db):
    cloud_nodes = {n.id for n in db.nodes.values() if n.kind == "cloud-instance"}
    priced = {p.node for p in db.prices.values() if p.kind == "cloud" and p.node}
    assert set(UNPRICED_CLOUD_INSTANCES) <= cloud_nodes, "exemption for a node that no longer exists"
    missing = cloud_nodes - priced - set(UNPRICED_CLOUD_INSTANCES)
    assert not missing, sorted(missing)
    stale = priced & set(UNPRICED_CLOUD_INSTANCES)
    assert not stale, f"priced now, drop from UNPRICED_CLOUD_INSTANCES: {sorted(stale)}"


def test_cloud_prices_match_their_instances(db):
    for p in db.prices.values():
        if p.kind != "cloud":
            continue
        assert 0.3 <= p.usd_per_gpu_hour <= 20, p.id
        if p.node is None:
            # a per-GPU cloud offer with no instance template (2026 neocloud prices): planning puts the GPU in the
            # database's usual node, so there is no instance to match; the GPU must exist and the seller be named
            assert db.gpu(p.gpu).id == p.gpu, p.id
            assert p.provider, p.id
            continue
        node = db.node(p.node)
        assert node.kind == "cloud-instance", p.id
        assert p.gpus == node.gpus_per_node, p.id
        assert p.provider and p.region, p.id


def test_every_price_is_dated_and_sourced(db):
    today = dt.date.today()
    assert len([p for p in db.prices.values() if p.kind == "purchase"]) >= 5
    for p in db.prices.values():
        assert dt.date(2015, 1, 1) <= p.date <= today, p.id
        assert p.sources and all(s.title for s in p.sources), p.id
        if p.kind == "purchase" and p.node:
            node = db.node(p.node)
            # a node's price, or the price of the whole NVLink rack the node is a tray of (GB200 NVL72: 72 GPUs,
            # 4 per tray; planning.price_for takes it pro rata)
            assert p.gpus in (node.gpus_per_node, node.nvlink_domain_gpus), p.id


def test_energy_default_exists_and_is_sourced(db):
    e = db.default_energy()
    assert e.id == "default"
    assert 0.03 <= e.usd_per_kwh <= 0.30
    assert 1.05 <= e.pue <= 2.0
    assert e.date <= dt.date.today()
    assert all(s.title.lower() != "placeholder" for s in e.sources)
    covered = {f for s in e.sources if s.url for f in s.fields}
    assert {"usd_per_kwh", "pue"} <= covered, "each energy figure needs a source with an address"
