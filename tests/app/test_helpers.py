"""The planner's plain-Python helpers: page state -> Scenario, fabric variants, the curves the pages draw."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpusim.app_pages import analysis as A
from gpusim.app_pages.state import DEFAULTS, scenario_from_state
from gpusim.errors import GpusimError, ScenarioError
from gpusim.simulation import simulate


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
    assert [r["n_gpus"] for r in next(iter(curves.values()))] == [1, 2, 4, 8]


def test_dataparallel_stops_at_one_node_and_scales_worse(db):
    scn = scenario_from_state({"model": "resnet50", "batch": 64}, db)
    variants, _ = A.strategy_variants(A.per_node_base(scn), ["ddp", "dp", "fsdp-full"])
    curves, _ = A.curves(variants, A.gpu_counts(32), db=db)
    assert max(r["n_gpus"] for r in curves["dp"]) == 8
    assert max(r["n_gpus"] for r in curves["ddp"]) == 32
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
    assert all(r["per_gpu_batch"] * r["n_gpus"] == 512 for r in rows)


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


# --------------------------------------------------------------------------------------------------
# A calibration in the page state (tests/app/fixtures, made by make_calibrations.py)
# --------------------------------------------------------------------------------------------------

FIX = Path(__file__).resolve().parent / "fixtures"


@pytest.fixture(scope="module")
def h100_cal():
    from gpusim.calibration import load_calibration

    return load_calibration(FIX / "h100_synthetic.json")


@pytest.fixture(scope="module")
def cpu_cal():
    from gpusim.calibration import load_calibration

    return load_calibration(FIX / "cpu_gloo.json")


def test_resolve_on_the_calibrated_machine_uses_its_hardware_and_parameters(db, h100_cal):
    from gpusim.app_pages.state import resolve

    r = resolve({"hw": "calibrated", "gpus": 8, "nodes": 1, "fabric": "pcie-cross-socket"}, db, calibration=h100_cal)
    assert r.calibrated_machine and r.gpu_id == h100_cal.gpu_id == "calibrated-h100-sxm"
    assert r.scenario.node == h100_cal.node_id and r.params == h100_cal.params
    assert h100_cal.gpu_id in r.db.gpus and h100_cal.gpu_id not in db.gpus  # a copy; the shipped one is untouched
    assert r.scenario.intra is None  # the fabric widget does not apply: the measured links stay
    assert simulate(r.scenario, db=r.db, params=r.params).step_s > 0


def test_resolve_on_a_database_gpu_transfers_efficiencies(db, h100_cal, cpu_cal):
    from gpusim.app_pages.state import resolve
    from gpusim.params import DEFAULT_PARAMS

    r = resolve({"gpu": "a100-sxm4-80gb"}, db, calibration=h100_cal)
    assert not r.calibrated_machine and r.db is db and r.gpu_id == "a100-sxm4-80gb"
    assert r.params.matmul_eff_frac != DEFAULT_PARAMS.matmul_eff_frac
    assert not r.params.busbw_override_bytes_per_s  # the calibrated machine's links never transfer
    assert any("transferred to a100-sxm4-80gb" in n for n in r.notes)
    cpu = resolve({"gpu": "h100-sxm"}, db, calibration=cpu_cal)
    # nothing transfers: the parameters the fit started from (the defaults of the gpusim that wrote the file; a
    # default changed since, e.g. the Blackwell LL caps of issue 18, stays as the file has it)
    assert cpu.params == cpu_cal.base_params and any("do not transfer" in n for n in cpu.notes)
    plain = resolve({}, db)
    assert plain.params == DEFAULT_PARAMS and not plain.notes


def test_resolve_calibrated_without_a_calibration_says_what_to_do(db):
    from gpusim.app_pages.state import resolve

    with pytest.raises(ScenarioError, match="Calibration page"):
        resolve({"hw": "calibrated"}, db)


def test_measured_links_drop_fabric_variants(h100_cal):
    from gpusim.params import DEFAULT_PARAMS

    f, n, note = A.drop_measured_variants(["nvswitch", "pcie-switch"], ["ib-ndr-400"], h100_cal.params)
    assert f == [] and n == ["ib-ndr-400"] and "fabrics inside a node" in note  # only intra-node was measured
    assert A.drop_measured_variants(["nvswitch"], ["ib-ndr-400"], DEFAULT_PARAMS) == (["nvswitch"], ["ib-ndr-400"],
                                                                                     None)


def test_calibration_tables(h100_cal):
    rows = A.calibration_parameter_rows(h100_cal.to_dict()["fitted"])
    by = {r["parameter"]: r for r in rows}
    tail = by["gemm.kernel_tail_s"]
    assert tail["value"].endswith("µs") and tail["± std"].startswith("± ") and 0 < tail["relative std"] < 0.1
    assert by["compute.train_frac"]["value"] == f"{h100_cal.values['compute.train_frac']:.3g}"
    no_std = A.calibration_parameter_rows([{"name": "x", "value": 2.0, "std": None, "unit": "s", "sets": "", "block": "b",
                                            "records": 3, "noisy_records": 1}])[0]
    assert no_std["± std"] == "-" and no_std["relative std"] is None and no_std["records"] == "3 (1 noisy)"
    levels = A.collective_rows_by_level([{"group": "all_reduce inter-node n=2 nodes=2"},
                                         {"group": "all_reduce intra-node n=8"}, {"group": "broadcast global n=16"}])
    assert list(levels) == ["intra-node", "inter-node", "global"]
    held = A.held_out_table(h100_cal.held_out["records"])
    assert len(held) == 6 and held[0]["step"].endswith("x 8") and abs(held[0]["error"]) < 0.1


def test_plan_time_interval_brackets_the_time_to_train(db, h100_cal, cpu_cal):
    config = {"node": "dgx-h100", "gpu": "h100-sxm", "n_gpus": 8, "nodes": 1, "strategy": "ddp",
              "precision": "amp_bf16", "micro_batch": 64, "accum": 1, "checkpointing": False, "cpu_offload": False}
    scn = A.plan_scenario(config, {"model": "resnet50"})
    res = simulate(scn, db=db, params=h100_cal.params_for("h100-sxm", db), recommend=False)
    train_s = 1e6 / res.throughput_samples_per_s
    config.update(throughput_samples_per_s=res.throughput_samples_per_s, train_s=train_s, time_to_train_s=train_s + 100)
    band = A.plan_time_interval(h100_cal, config, {"model": "resnet50"}, db)
    assert band["lo_s"] < config["time_to_train_s"] < band["hi_s"]
    assert band["lo_frac"] < 0 < band["hi_frac"] and band["level"] == 0.9
    assert "note" in A.plan_time_interval(cpu_cal, config, {"model": "resnet50"}, db)  # nothing transfers from a CPU


def test_mtp_state_is_the_clis_mtp_layers(db):
    """[issue 17] The sidebar's "Multi-token prediction modules" is the CLI's --mtp-layers: unset keeps the model's
    own (DeepSeek-V3's one), 0 trains without it."""
    own = scenario_from_state({"model": "deepseek-v3"}, db)
    off = scenario_from_state({"model": "deepseek-v3", "mtp": 0}, db)
    assert own.strategy.mtp_layers is None and off.strategy.mtp_layers == 0
    with pytest.raises(ScenarioError, match="language models"):
        simulate(scenario_from_state({"model": "resnet50", "mtp": 1}, db), recommend=False)
    # "Module sharing" is the CLI's --mtp-shared / --no-mtp-shared: one module's state for two passes, or a module per
    # pass where the model's own config shares one (Nemotron 3 Super's recipe); "the model's own" passes nothing
    kw = dict(model="deepseek-v3", gpu="h100-sxm", gpus=64, nodes=8, strategy="zero1", batch=1, mtp=2)
    sep = simulate(scenario_from_state(kw, db), recommend=False)
    shared = simulate(scenario_from_state({**kw, "mtp_sh": "shared"}, db), recommend=False)
    assert scenario_from_state({**kw, "mtp_sh": "shared"}, db).strategy.mtp_shared is True
    assert scenario_from_state({**kw, "mtp_sh": "separate"}, db).strategy.mtp_shared is False
    assert scenario_from_state({**kw, "mtp_sh": "model"}, db).strategy.mtp_shared is None
    assert shared.memory_per_gpu_bytes < sep.memory_per_gpu_bytes
    assert simulate(scenario_from_state({**kw, "mtp_sh": "separate"}, db), recommend=False).memory_per_gpu_bytes \
        == sep.memory_per_gpu_bytes  # DeepSeek-V3's own modules are separate


def test_bf16_layers_state_is_the_clis_bf16_layers(db):
    """[stop 58] The sidebar's layers kept in BF16 reach the scenario as the CLI's --bf16-layers START END; unset
    keeps none, and a precision without quantised layers is refused with the CLI's message."""
    kw = dict(model="llama3-8b", gpu="b200", gpus=8, strategy="zero1", batch=1, precision="nvfp4")
    none = scenario_from_state(kw, db)
    kept = scenario_from_state({**kw, "bf16_first": 1, "bf16_last": 4}, db)
    assert (none.strategy.bf16_layers_start, none.strategy.bf16_layers_end) == (0, 0)
    assert (kept.strategy.bf16_layers_start, kept.strategy.bf16_layers_end) == (1, 4)
    assert simulate(kept, recommend=False).step_s > simulate(none, recommend=False).step_s
    with pytest.raises(ScenarioError, match="fp8"):
        simulate(scenario_from_state({**kw, "precision": "bf16", "bf16_last": 4}, db), recommend=False)
    # the sidebar names the setting where a message gives the CLI's flag
    from gpusim.app_pages.shell import ui_text
    assert "'Strategy > First / Last layers in BF16'" in ui_text("--bf16-layers 20 20: this model has 32 layers")
