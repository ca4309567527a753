"""The planner's plain-Python helpers: page state -> Scenario, fabric variants, the curves the pages draw."""

from __future__ import annotations

import pytest

from gpusim.app_pages import analysis as A
from gpusim.app_pages.state import DEFAULTS, scenario_from_state
from gpusim.errors import GpusimError, ScenarioError
from gpusim.simulate import simulate


def test_default_state_is_a_valid_scenario(db):
    scn = scenario_from_state({}, db)
    assert scn.model == DEFAULTS["model"] and scn.gpu == DEFAULTS["gpu"] and scn.gpus == DEFAULTS["gpus"]
    assert scn.strategy.per_gpu_batch == DEFAULTS["batch"]
    assert scn.strategy.num_workers is None  # no loader unless asked


def test_state_units_are_converted_once(db):
    scn = scenario_from_state({"wl": "custom", "params_m": 350.0, "gflop": 20.0, "act_mib": 64.0, "tokens": 512,
                               "loader": True, "workers": 4, "storage": 2.5, "bucket": 50.0}, db)
    wl = scn.workload
    assert wl.params == pytest.approx(350e6)
    assert wl.fwd_flop_per_sample == pytest.approx(20e9)
    assert wl.act_bytes_per_sample == pytest.approx(64 * 2**20)
    assert wl.sample_unit == "sequence" and wl.tokens_per_sample == 512
    assert scn.strategy.num_workers == 4 and scn.storage_gbyte_per_s == 2.5 and scn.strategy.bucket_mib == 50.0


@pytest.mark.parametrize("state, words", [
    ({"gpus": 3, "nodes": 2}, "split evenly"),
    ({"strategy": "dp", "gpus": 16, "nodes": 2}, "DataParallel"),
    ({"gpu": "rtx-4090", "fabric": "nvswitch"}, "no NVLink"),
    ({"gpu": "h100-pcie", "fabric": "nvswitch"}, "not through an NVSwitch"),
    ({"gpu": "h100-sxm", "fabric": "nvlink"}, "NVSwitch"),
    ({"model": "resnet50", "seq": 512}, "fixed input size"),
    ({"strategy": "ddp", "offload": True}, "sharded strategy"),
    ({"gpu": "no-such-gpu"}, "unknown"),
])
def test_bad_combinations_raise_a_readable_gpusim_error(db, state, words):
    with pytest.raises(GpusimError, match=words):
        scn = scenario_from_state(state, db)
        simulate(scn, db=db)


def test_fabric_changes_use_database_links(db):
    assert A.fabric_changes(db, "h100-sxm", "auto") == {}
    nv = A.fabric_changes(db, "h100-sxm", "nvswitch")
    assert db.link(nv["intra"]).kind == "nvswitch"
    br = A.fabric_changes(db, "a100-pcie-80gb", "nvlink")
    assert db.link(br["intra"]).kind == "nvlink-bridge"
    assert db.link(br["intra"]).bandwidth_gbyte_per_s_per_direction == \
        db.gpu("a100-pcie-80gb").peer_link.gbyte_per_s_per_direction
    sock = A.fabric_changes(db, "l40s", "pcie-cross-socket")
    assert sock["intra_topology"] == "pcie-cross-socket" and db.link(sock["intra"]).kind == "pcie"
    assert A.fabric_changes(db, "l40s", "no-p2p")["p2p"] is False
    assert db.link(A.collective_fabric_kwargs(db, "l40s", "no-p2p")["intra"]).kind == "host-staged"
    assert "nvswitch" not in A.available_fabrics(db, "rtx-4090")
    with pytest.raises(ScenarioError):
        A.fabric_changes(db, "h100-sxm", "warp-drive")


def test_slower_fabric_never_scales_better(db):
    scn = scenario_from_state({"model": "bert-large", "gpu": "l40s", "batch": 16}, db)
    variants, skipped = A.fabric_variants(A.per_node_base(scn), db, ["pcie-switch", "pcie-cross-socket", "no-p2p"], [])
    assert not skipped
    curves, skipped = A.curves(variants, A.gpu_counts(8), db=db)
    eff = {label: rows[-1]["scaling_efficiency_frac"] for label, rows in curves.items()}
    assert eff["PCIe switch"] > eff["PCIe across sockets"] >= eff["no P2P (host-staged)"]
    assert [r["gpus"] for r in next(iter(curves.values()))] == [1, 2, 4, 8]


def test_dataparallel_stops_at_one_node_and_scales_worse(db):
    scn = scenario_from_state({"model": "resnet50", "batch": 64}, db)
    variants, _ = A.strategy_variants(A.per_node_base(scn), ["ddp", "dp", "fsdp-full"])
    curves, _ = A.curves(variants, A.gpu_counts(32), db=db)
    assert max(r["gpus"] for r in curves["dp"]) == 8
    assert max(r["gpus"] for r in curves["ddp"]) == 32
    assert curves["dp"][-1]["scaling_efficiency_frac"] < curves["ddp"][3]["scaling_efficiency_frac"]


def test_network_variants_matter_only_across_nodes(db):
    scn = scenario_from_state({"model": "bert-large", "batch": 32}, db)
    variants, _ = A.fabric_variants(A.per_node_base(scn), db, [], ["ib-ndr-400", "eth-10g"])
    curves, _ = A.curves(variants, A.gpu_counts(64), db=db)
    ib, eth = curves["network ib-ndr-400"], curves["network eth-10g"]
    assert ib[3]["throughput_samples_per_s"] == pytest.approx(eth[3]["throughput_samples_per_s"])  # 8 GPUs, 1 node
    assert ib[-1]["throughput_samples_per_s"] > eth[-1]["throughput_samples_per_s"]  # 64 GPUs, 8 nodes


def test_strong_scaling_divides_the_global_batch(db):
    scn = scenario_from_state({"model": "resnet50", "batch": 64}, db)
    curves, _ = A.curves({"ddp": A.per_node_base(scn)}, A.gpu_counts(16), mode="strong", global_batch=512, db=db)
    rows = curves["ddp"]
    assert all(r["per_gpu_batch"] * r["gpus"] == 512 for r in rows)


def test_batch_curve_utilisation_rises_and_memory_limit_matches_simulate(db):
    scn = scenario_from_state({"model": "resnet50", "batch": 64}, db)
    rows, max_b = A.batch_curve(scn, A.batch_candidates(64, 1000), db=db)
    util = [r["gpu_util_frac"] for r in rows]
    assert util == sorted(util)
    assert max_b == simulate(scn, db=db, recommend=False).max_micro_batch
    assert all(r["fits_in_memory"] == (r["per_gpu_batch"] <= max_b) for r in rows)
    at_64 = next(r for r in rows if r["per_gpu_batch"] == 64)
    res = simulate(scn, db=db, recommend=False)
    assert at_64["throughput_samples_per_s"] == pytest.approx(res.throughput_samples_per_s, rel=1e-9)
    assert at_64["scaling_efficiency_frac"] == pytest.approx(res.scaling_efficiency_frac, rel=1e-9)


def test_batch_candidates_cover_current_and_limit():
    c = A.batch_candidates(48, 1740)
    assert 48 in c and 1740 in c and c == sorted(c) and c[0] == 1 and c[-1] >= 1740


def test_rooflines_points_sit_under_the_roof(db):
    scn = scenario_from_state({"model": "bert-large", "gpu": "l40s", "batch": 16}, db)
    R = A.rooflines(scn, db=db, fabrics=["pcie-switch", "pcie-cross-socket"], networks=["eth-25g"])
    for p in R["points"]:
        roof = min(R["achievable_flop_per_s"], p["intensity_flop_per_byte"] * R["mem_bytes_per_s"])
        assert p["flop_per_s"] <= roof * (1 + 1e-9), p
    res = simulate(scn, db=db, recommend=False)
    assert R["points"][-1]["flop_per_s"] == pytest.approx(res.mfu_frac * R["peak_flop_per_s"])
    comm = R["comm"]
    bw = {c["key"]: c["algbw_bytes_per_s"] for c in comm["ceilings"]}
    assert bw["pcie-switch"] > bw["pcie-cross-socket"]
    # the predicted point never beats its own scenario's ceiling (step >= communication time)
    assert comm["achieved_flop_per_s"] <= comm["intensity_flop_per_byte"] * bw["scenario"] * (1 + 1e-9)
    assert comm["achieved_flop_per_s"] <= comm["compute_flop_per_s"] * (1 + 1e-9)


EXAMPLE_DUAL_SOCKET = """\
\tGPU0\tGPU1\tGPU2\tGPU3\tCPU Affinity\tNUMA Affinity
GPU0\t X \tPIX\tSYS\tSYS\t0-15\t0
GPU1\tPIX\t X \tSYS\tSYS\t0-15\t0
GPU2\tSYS\tSYS\t X \tPIX\t16-31\t1
GPU3\tSYS\tSYS\tPIX\t X \t16-31\t1
"""


def test_topology_helpers(db):
    from gpusim.topology import parse_topo

    topo = parse_topo(EXAMPLE_DUAL_SOCKET)
    names, labels = A.topology_matrix(topo)
    assert names == ["GPU0", "GPU1", "GPU2", "GPU3"]
    assert labels[0] == ["X", "PIX", "SYS", "SYS"]
    assert A.topology_fabric(topo) == "pcie-cross-socket"
    curves, _ = A.topology_allreduce(topo, "l40s", db=db)
    mine = next(iter(curves.values()))
    busbw = [r["busbw_bytes_per_s"] for r in mine]
    assert busbw[-1] > busbw[0]  # large messages reach the bandwidth, small ones pay latency
    assert curves["same GPUs on PCIe switch"][-1]["busbw_bytes_per_s"] > busbw[-1]
    with pytest.raises(ScenarioError, match="NVLink"):
        A.topology_allreduce(parse_topo(EXAMPLE_DUAL_SOCKET.replace("PIX", "NV4")), "h100-sxm", db=db)


def test_flat_dict_for_csv():
    d = A.flat_dict({"a": 1, "b": {"c": 2}, "r": [{"message": "x"}, {"message": "y"}]})
    assert d == {"a": 1, "b.c": 2, "r": "x | y"}


def test_messages_name_the_sidebar_not_the_cli():
    from gpusim.app_pages.shell import ui_text

    msg = "use --nodes 2 or more; set --node to change; use --precision fp32 (--gpus-per-node stays)"
    out = ui_text(msg)
    assert "'Nodes' 2" in out and "'Node template'" in out and "'Precision' fp32" in out
    assert "--gpus-per-node" in out  # an unknown flag is left alone
