"""Issue 18: collectives by GPU generation and fabric.

Closed forms worked by hand from NCCL's facts (src/graph/topo.h per-link NVLink bandwidth, src/graph/tuning.cc
tree / NVLS-tree rules); the algorithm NCCL's rules choose per fabric; partial NVSwitch nodes; the sweep file and its
validation module; `gpusim fit` on one system leaves the others' predictions alone; bad fabric input exits 2.
"""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from gpusim import validation_comm as VC
from gpusim.cli import main
from gpusim.hwdb import load
from gpusim.model import comm as C
from gpusim.model.fabric import nccl_nvlink_gbyte_per_s_per_link, nccl_nvswitch_busbw
from gpusim.params import DEFAULT_PARAMS as P
from gpusim.rows import hardware_row, resolve_hardware
from gpusim.scenario import Scenario
from gpusim.simulation import collective
from gpusim.strategy import Strategy

TABLE = P.nccl_nvlink_gbyte_per_s_per_link
KW = dict(base_latency_s=3e-6, nvls_gain_frac=1.3, nvls_latency_s=23e-6, tree_busbw_frac=0.92)


# --- per-generation table lookup (NCCL topo.cc ncclTopoGetNvbw) ------------------------------------------------------
@pytest.mark.parametrize("cc, gbps", [("6.0", 18.0), ("7.0", 20.0), ("7.5", 20.0), ("8.0", 20.0), ("8.6", 12.0),
                                      ("8.9", 20.0), ("9.0", 20.6), ("10.0", 40.1), ("10.3", 40.1), ("12.0", 40.1)])
def test_nvlink_per_link_bandwidth_by_compute_capability(cc, gbps):
    # 8.6 only by exact match (NCCL: compCap == 86); the others take the newest generation at or below them
    assert nccl_nvlink_gbyte_per_s_per_link(cc, TABLE) == gbps


def test_unknown_generation_has_no_figure():
    assert nccl_nvlink_gbyte_per_s_per_link(None, TABLE) is None
    assert nccl_nvlink_gbyte_per_s_per_link("5.2", TABLE) is None  # older than every key
    assert nccl_nvswitch_busbw(None, 20.6) is None and nccl_nvswitch_busbw(18, None) is None


def _hw(node, gpus, nodes=1):
    scn = Scenario.model_construct(gpu=None, node=node, gpus=gpus, nodes=nodes, intra=None, inter=None,
                                   intra_topology=None, nics_per_node=None, oversubscription=None,
                                   cpu_cores_per_gpu=None, storage_gbyte_per_s=None, p2p=None, strategy=Strategy())
    return resolve_hardware(scn, load())


@pytest.mark.parametrize("node, links, per_link", [("dgx-a100-80gb", 12, 20.0), ("dgx-h100", 18, 20.6),
                                                    ("hgx-h200-8", 18, 20.6), ("dgx-b200", 18, 40.1)])
def test_nvswitch_ring_gets_links_times_nccls_per_link_figure(node, links, per_link):
    row = hardware_row(_hw(node, 8), P)
    assert row["intra_busbw_bytes_per_s"] == pytest.approx(links * per_link * 1e9)


@pytest.mark.parametrize("g", [2, 3, 4, 5, 6, 7, 8])
def test_partial_nvswitch_node_keeps_each_gpus_links(g):
    # every GPU reaches the switches over all its links whatever the number of GPUs
    assert hardware_row(_hw("dgx-h100", g), P)["intra_busbw_bytes_per_s"] == pytest.approx(18 * 20.6e9)


@pytest.mark.parametrize("g", [2, 4, 6, 8])
def test_partial_node_ring_closed_form(g):
    """Ring / Simple on g GPUs of an NVSwitch node: 2(g-1) hops and 2(g-1)/g x S over the links' bus bandwidth."""
    tn = C.default_tuning()
    s, bw, hop = 2.0**28, 370.8e9, 0.47e-6
    t, a, p = C.collective_choice(C.ALL_REDUCE, s, g, 1, bw, hop, np.inf, 0.0, False, algorithm=C.ALGO_RING,
                                  protocol=C.PROTO_SIMPLE, **KW)
    steps = 2.0 * (g - 1)
    expect = (3e-6 + tn.ring_base_s[2] + steps * (hop + tn.hop_extra("intra", "ring")[2])
              + 2.0 * (g - 1) / g * s / bw)
    assert float(t) == pytest.approx(expect, rel=1e-12)
    # the bus bandwidth approaches the links' figure from below as the size grows, for every g
    busbw = C.bus_factor(C.ALL_REDUCE, g) * s / float(t)
    assert 0.9 * bw < busbw < bw


# --- algorithm choice per fabric, hand-worked -----------------------------------------------------------------------
def _auto(nodes, inter, nvls=True, size=2.0**33, g=8):
    t, a, _ = C.collective_choice(C.ALL_REDUCE, size, g * nodes, nodes, 370e9, 0.47e-6, inter, 2.7e-6, nvls, **KW)
    return C.ALGO_NAMES[int(a)], C.bus_factor(C.ALL_REDUCE, g * nodes) * size / float(t)


def test_two_nodes_with_nvls_run_nvls_tree_bound_by_the_switch():
    # NVLS-tree: min(370 x 1.3, 400 x 2(n-1)/n x 5/6 = 625) = 481 GB/s; ring min(370, 400) = 370; tree 0.92 x 370
    algo, busbw = _auto(2, 400e9)
    assert algo == "nvls_tree" and busbw == pytest.approx(481e9, rel=0.02)


def test_four_nodes_with_nvls_fall_back_to_the_ring():
    # beyond two nodes the tree's network phase carries twice as much: NVLS-tree min(481, 400 x 31/32 x 5/6 = 323),
    # tree min(370, 400 x 31/32) x 0.92 = 340, ring min(370, 400) = 370 -> ring (NCCL issue 1221: NVLS gains nothing)
    algo, busbw = _auto(4, 400e9)
    assert algo == "ring" and busbw == pytest.approx(370e9, rel=0.02)


def test_two_nodes_on_slow_nics_run_the_tree_above_the_nics_total():
    # no NVLS, 150 GB/s of NICs per node: tree min(370, 150 x 1.875) x 0.92 = 259 GB/s, ring 150: the tree's bus
    # bandwidth exceeds the NICs' total (nccl-tests issue 22: "can exceed the actual available peak BW ... on 2 nodes")
    algo, busbw = _auto(2, 150e9, nvls=False)
    assert algo == "tree" and busbw == pytest.approx(0.92 * 150e9 * 1.875, rel=0.02)
    assert busbw > 150e9


def test_between_two_nodes_sharp_cannot_lift_the_network_term():
    # no NVLS, NVLink ring 240 GB/s, 180 GB/s of NICs per node, 8 GiB (tree correction 1). Two nodes: the tree's network
    # phase carries each node's buffer once per direction, as CollNet does, so both are bound by the NVLink chain
    # (NCCL tuning.cc: bw = nNodes <= 2 || collnet ? bwIntra : bwInter): tree 0.92 x min(240, 180 x 1.875) = 220.8,
    # CollNet min(240, 2 x 180 x 0.9 = 324) = 240. Eight nodes: the tree's interior nodes carry twice that, tree
    # 0.92 x min(240, 180 x 1.984 / 2) = 164, ring min(240, 180) = 180, CollNet still 240.
    def bus(nodes, algo):
        n = 8 * nodes
        t, _ = C.collective_time_s(C.ALL_REDUCE, 2.0**33, n, nodes, 240e9, 0.47e-6, 180e9, 2.7e-6, False, sharp=True,
                                   algorithm=C.ALGORITHMS[algo], protocol=C.PROTO_SIMPLE, **KW)
        return C.bus_factor(C.ALL_REDUCE, n) * 2.0**33 / float(t)
    assert bus(2, "tree") == pytest.approx(0.92 * 240e9, rel=0.01)
    assert bus(2, "collnet") == pytest.approx(240e9, rel=0.01)
    assert bus(8, "tree") == pytest.approx(0.92 * 180e9 * (2 * 63 / 64) / 2, rel=0.01)
    assert bus(8, "ring") == pytest.approx(180e9, rel=0.01)
    assert bus(8, "collnet") == pytest.approx(240e9, rel=0.01)


def test_one_nvlink_domain_runs_nvls():
    out = collective("all_reduce", [2.0**32], node="gb200-nvl72", gpus=72, nodes=18)
    assert out[0]["algorithm"] == "nvls"


def test_across_real_fabrics_the_algorithms_follow_nccls_rules():
    two = collective("all_reduce", [2.0**32], node="hgx-h100-8", gpus=16, nodes=2, inter="roce-400g")
    four = collective("all_reduce", [2.0**32], node="hgx-h100-8", gpus=32, nodes=4, inter="roce-400g")
    tcpxo = collective("all_reduce", [2.0**33], node="gcp-a3-megagpu-8g", gpus=16, nodes=2)
    assert (two[0]["algorithm"], four[0]["algorithm"]) == ("nvls_tree", "ring")
    assert tcpxo[0]["algorithm"] == "tree"


def test_blackwell_ll_cap_is_twice_hoppers():
    caps = P.ll_max_busbw_bytes_per_s
    assert caps["blackwell"] == [2 * x for x in caps["hopper"]]


# --- bad fabric input ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("flags, needle", [(["--inter", "nvlink4-nvswitch"], "--intra"),
                                           (["--intra", "ib-ndr-400"], "--inter"),
                                           (["--inter", "no-such-link"], "hw list"),
                                           (["--nics-per-node", "0"], "between")])
def test_bad_fabric_input_exits_2_with_the_fix(capsys, flags, needle):
    assert main(["comm", "--node", "dgx-h100", "--gpus", "16", "--nodes", "2", *flags, "--bytes", "1GiB"]) == 2
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err


# --- the sweep file and its validation module -----------------------------------------------------------------------
def test_every_sweep_row_names_its_source_and_a_known_system():
    rows = VC.load_rows(VC.default_csv())
    db = load()
    assert len({r["system"] for r in rows}) >= 10
    for r in rows:
        assert r["source_url"].startswith("https://"), r
        assert r["held_out"] in ("yes", "no")
        assert (r["node"] in db.nodes) or (r["gpu"] in db.gpus), r
        assert float(r["busbw_gbyte_per_s"]) > 0 and float(r["size_bytes"]) > 0


def test_every_sweep_row_is_predicted():
    res = VC.run()
    assert res and all(r.predicted_gbyte_per_s is not None for r in res), [r.error for r in res if r.error][:3]
    forced = {r.system for r in res if r.algorithm_reported.startswith("ring (NCCL_ALGO")}
    assert all(r.algorithm == "ring" for r in res if r.system in forced)


def test_summary_separates_held_out_from_looked_at(tmp_path):
    path = tmp_path / "s.csv"
    cols = ["system", "source_id", "source_url", "collective", "gpu", "node", "gpus", "nodes", "intra",
            "intra_topology", "inter", "nics_per_node", "size_bytes", "busbw_gbyte_per_s", "held_out"]
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(cols)
        w.writerow(["a", "X", "https://x", "all_reduce", "h100-sxm", "dgx-h100", 8, 1, "", "", "", "", 2**30, 400, "yes"])
        w.writerow(["b", "Y", "https://y", "all_reduce", "h100-sxm", "dgx-h100", 8, 1, "", "", "", "", 2**30, 500, "no"])
        w.writerow(["b", "Y", "https://y", "all_reduce", "h100-sxm", "dgx-h100", 8, 1, "", "", "", "", 1024, 1, "no"])
    res = VC.run(path)
    s = VC.summarize(res)
    pred = res[0].predicted_gbyte_per_s
    assert s["held_out"]["n"] == 1 and s["held_out"]["median_ape"] == pytest.approx(abs(pred - 400) / 400)
    assert s["looked_at"]["n"] == 1  # the 1 KiB row is below the 32 KiB floor
    assert s["looked_at"]["median_ape"] == pytest.approx(abs(pred - 500) / 500)


def test_held_out_systems_are_reported_per_vendor(tmp_path):
    # the vendor comes from the hardware database (the GPU of the row, or of its node template), not from names
    path = tmp_path / "s.csv"
    cols = ["system", "source_id", "source_url", "collective", "gpu", "node", "gpus", "nodes", "intra",
            "intra_topology", "inter", "nics_per_node", "size_bytes", "busbw_gbyte_per_s", "held_out"]
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(cols)
        w.writerow(["n", "X", "https://x", "all_reduce", "", "dgx-h100", 8, 1, "", "", "", "", 2**30, 400, "yes"])
        w.writerow(["a", "Y", "https://y", "all_reduce", "mi300x", "", 8, 1, "", "", "", "", 2**30, 100, "yes"])
        w.writerow(["a", "Y", "https://y", "all_reduce", "mi300x", "", 8, 1, "", "", "", "", 2**31, 100, "yes"])
    res = VC.run(path)
    assert [r.vendor for r in res] == ["nvidia", "amd", "amd"]
    by = VC.summarize(res)["held_out_by_vendor"]
    assert set(by) == {"nvidia", "amd"}
    assert (by["nvidia"]["n"], by["nvidia"]["systems"], by["amd"]["n"], by["amd"]["systems"]) == (1, 1, 2, 1)
    assert by["nvidia"]["median_ape"] == pytest.approx(abs(res[0].predicted_gbyte_per_s - 400) / 400)


def test_a_sweep_file_without_a_column_is_refused_with_the_column_named(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text("system,gpu\na,h100-sxm\n")
    with pytest.raises(Exception, match="missing column"):
        VC.load_rows(path)


def test_fit_on_one_system_changes_no_other_systems_prediction(tmp_path, capsys):
    """`gpusim fit` on the DGX H100 nccl-tests sweep: every system of nccl_sweeps.csv (H100 machines included) is
    predicted exactly as before, while the calibrated machine itself is predicted differently."""
    from pathlib import Path

    from gpusim.calibration import load_calibration

    sweep = Path(__file__).resolve().parents[1] / "calibration" / "nccl_tests" / "all_reduce_perf_dgx_h100.txt"
    out = tmp_path / "cal.json"
    assert main(["fit", str(sweep), "-o", str(out)]) == 0
    capsys.readouterr()
    db = load()
    cal = load_calibration(out)
    before = VC.run(db=db)
    after = VC.run(db=db, params=lambda gpu: cal.params_for(gpu, db))
    assert [r.predicted_gbyte_per_s for r in after] == [r.predicted_gbyte_per_s for r in before]
    own = collective("all_reduce", [2.0**20], node="dgx-h100", gpus=8, db=db, params=cal.params_for(None, db))
    default = collective("all_reduce", [2.0**20], node="dgx-h100", gpus=8, db=db)
    assert own[0]["time_s"] != default[0]["time_s"]
    json.loads(out.read_text())  # a readable calibration file


# --- a transport's required NCCL configuration (GPUDirect-TCPXO: NCCL_PROTO=Simple, NCCL_NVLS_ENABLE=0) -------------
def test_an_ll_cap_of_zero_means_ll_cannot_run_unless_asked_for():
    s = np.array([1024.0, 65536.0])
    _, _, proto = C.collective_choice(C.ALL_REDUCE, s, 16, 2, 370e9, 0.47e-6, 200e9, 2.7e-6, False,
                                      ll_max_busbw_bytes_per_s=np.inf, **KW)
    assert int(proto[0]) == C.PROTO_LL  # tiny messages: LL where it may run
    t, _, proto = C.collective_choice(C.ALL_REDUCE, s, 16, 2, 370e9, 0.47e-6, 200e9, 2.7e-6, False,
                                      ll_max_busbw_bytes_per_s=0.0, **KW)
    assert C.PROTO_LL not in set(proto.tolist()) and np.all(np.isfinite(t))
    forced, _, _ = C.collective_choice(C.ALL_REDUCE, s, 16, 2, 370e9, 0.47e-6, 200e9, 2.7e-6, False,
                                       protocol=C.PROTO_LL, ll_max_busbw_bytes_per_s=0.0, **KW)
    assert np.all(np.isfinite(forced))  # NCCL_PROTO=LL by name runs anyway


def test_tcpxo_jobs_across_nodes_run_simple_ring_or_tree_without_nvls():
    db = load()
    link = db.links["gcp-gpudirect-tcpxo"]
    assert link.nccl_protocols == ["simple"] and link.nccl_nvls_enable is False
    out = collective("all_reduce", [2.0**10, 2.0**20, 2.0**24, 2.0**33], node="gcp-a3-megagpu-8g", gpus=16, nodes=2)
    assert {o["protocol"] for o in out} == {"simple"}
    assert {o["algorithm"] for o in out} <= {"ring", "tree"}
    # inside one A3 Mega node the transport is not used: NCCL's own choice (NVLS for large messages)
    one = collective("all_reduce", [2.0**33], node="gcp-a3-megagpu-8g", gpus=8, nodes=1)
    assert one[0]["algorithm"] == "nvls"
    # the same node on an RDMA network keeps NVLS-tree and LL for small messages
    ib = collective("all_reduce", [2.0**10, 2.0**33], node="gcp-a3-megagpu-8g", gpus=16, nodes=2, inter="ib-ndr-400")
    assert ib[0]["protocol"] == "ll" and ib[1]["algorithm"] == "nvls_tree"


def test_first_generation_efa_runs_simple_only_across_nodes():
    """AWS's NCCL plugin sets NCCL_PROTO=simple on p3dn/p4d/p4de (aws-ofi-nccl src/platform-aws.c): a small all-reduce
    across two p4de nodes pays the Simple protocol's latency, several times the LL figure it would pay on InfiniBand."""
    db = load()
    assert db.links["aws-efa-100"].nccl_protocols == ["simple"]
    assert db.links["aws-efa-v2-100"].nccl_protocols is None  # p5: the plugin leaves NCCL's choice (RDMA protocol)
    sizes = [2.0**15, 2.0**20, 2.0**30]
    efa = collective("all_reduce", sizes, node="aws-p4de-24xlarge", gpus=16, nodes=2, db=db)
    assert {o["protocol"] for o in efa} == {"simple"}
    ib = collective("all_reduce", sizes, node="aws-p4de-24xlarge", gpus=16, nodes=2, inter="ib-hdr-200", db=db)
    assert ib[0]["protocol"] == "ll"
    assert efa[0]["time_s"] > 2.0 * ib[0]["time_s"]
    # one node does not use the network transport: NCCL's own choice there
    one = collective("all_reduce", [2.0**15], node="aws-p4de-24xlarge", gpus=8, nodes=1, db=db)
    assert one[0]["protocol"] == "ll"
