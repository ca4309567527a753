"""NCCL_P2P_DISABLE=1 (issue 18): NCCL's P2P transport "uses CUDA direct access between GPUs, using NVLink or PCI"
(NCCL documentation, Environment Variables), so without it every intra-node transfer goes through the SHM transport,
staged in host memory, whatever the wiring. Lambda's v1 harness ran its multi-GPU rows that way on the systems its
``.para`` files identify (gpusim.validation.NCCL_P2P_DISABLED_SYSTEMS)."""

from __future__ import annotations

import csv

import numpy as np
import pytest

from gpusim.model.fabric import PATH_CODES, TOPOLOGY_CODES, eff_table, intra_node_busbw
from gpusim.params import ModelParams
from gpusim.validation import NCCL_P2P_DISABLED_SYSTEMS, run

PCIE = 32e9
NVLINK = 300e9


def _busbw(topology, p2p, g=8):
    return intra_node_busbw(TOPOLOGY_CODES[topology], g, NVLINK, PCIE, 40e9, p2p, eff_table(ModelParams()))


@pytest.mark.parametrize("topology,g", [("nvswitch", 8), ("nvlink-mesh", 8), ("nvlink-bridge-pairs", 2),
                                        ("pcie-switch", 8), ("pcie-host", 8)])
def test_without_p2p_every_wiring_stages_through_host_memory(topology, g):
    eff = ModelParams().busbw_eff_frac
    bw, path = _busbw(topology, p2p=False, g=g)
    assert float(bw) == pytest.approx(PCIE * eff["host-staged"], rel=1e-12)
    assert int(path) == PATH_CODES["host-staged"]
    bw_p2p, path_p2p = _busbw(topology, p2p=True, g=g)
    assert int(path_p2p) != PATH_CODES["host-staged"] and float(bw_p2p) > float(bw)


def test_without_p2p_cross_socket_is_bounded_by_the_slower_of_staging_and_the_socket_link():
    bw, path = intra_node_busbw(TOPOLOGY_CODES["pcie-cross-socket"], 4, NVLINK, PCIE, 5e9, False,
                                eff_table(ModelParams()))
    assert float(bw) == pytest.approx(5e9) and int(path) == PATH_CODES["host-staged"]


def test_one_gpu_has_no_path_either_way():
    bw, path = _busbw("nvswitch", p2p=False, g=1)
    assert np.isinf(bw) and int(path) == -1


def test_the_no_p2p_flag_slows_an_nvswitch_all_reduce(db):
    from gpusim.scenario import Scenario
    from gpusim.simulation import simulate

    kw = dict(model="bert-large", gpu="a100-sxm4-80gb", node="dgx-a100-80gb", gpus=8, per_gpu_batch=8,
              precision="fp32")
    fast = simulate(Scenario.create(**kw), db=db, recommend=False)
    slow = simulate(Scenario.create(**kw, p2p=False), db=db, recommend=False)
    assert float(slow.step_s) > float(fast.step_s)
    assert float(slow.breakdown_s["comm_exposed_s"]) > float(fast.breakdown_s["comm_exposed_s"])


COLUMNS = ["source_id", "kind", "model", "gpu", "n_gpus", "n_nodes", "interconnect", "precision", "per_gpu_batch",
           "global_batch", "message_bytes", "value", "unit", "notes"]


def _row(system, n, value, gpu="A100 80GB SXM4"):
    return {"source_id": "LAMBDA_V1", "kind": "throughput", "model": "BERT-large SQuAD fine-tune", "gpu": gpu,
            "n_gpus": str(n), "n_nodes": "1",
            "interconnect": "single GPU" if n == 1 else "NVLink/NVSwitch (SXM HGX baseboard; inferred from name, not stated)",
            "precision": "fp32", "per_gpu_batch": "64", "global_batch": str(64 * n), "message_bytes": "",
            "value": str(value), "unit": "sequences/s", "notes": f'system row "{system}"; v1 table'}


def test_lambdas_listed_systems_run_without_p2p_and_others_keep_it(tmp_path, db):
    assert "2x A100 80GB SXM4" in NCCL_P2P_DISABLED_SYSTEMS and "2x H100 80GB SXM5" not in NCCL_P2P_DISABLED_SYSTEMS
    path = tmp_path / "m.csv"
    # the same GPU, batch and measurements: one system on the list, one (a vendor's row) not on it
    rows = [_row("A100 80GB SXM4", 1, 75.0), _row("2x A100 80GB SXM4", 2, 105.0),
            _row("Dell A100 80GB SXM4", 1, 75.0), _row("Dell 2x A100 80GB SXM4", 2, 105.0)]
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS)
        w.writeheader()
        w.writerows(rows)
    a1, a2, d1, d2 = run(path, db=db)
    assert any("NCCL_P2P_DISABLE" in a for a in a2.assumptions)
    assert not any("NCCL_P2P_DISABLE" in a for a in d2.assumptions + a1.assumptions + d1.assumptions)
    # the host-staged exchange costs the listed pair scaling that the same pair keeps over NVSwitch
    assert a2.anchored is not None and d2.anchored is not None
    assert a2.anchored < 0.97 * d2.anchored
    assert a2.predicted < d2.predicted


def test_no_nvls_and_no_nvlink_rack_without_p2p():
    from gpusim.simulation import collective

    on = collective("all_reduce", 2.0**30, node="hgx-h100-8", gpus=8)[0]
    off = collective("all_reduce", 2.0**30, node="hgx-h100-8", gpus=8, p2p=False)[0]
    assert on["algorithm"] == "nvls" and off["algorithm"] == "ring" and off["intra_path"] == "host-staged"
    # the published DGX H100 sweep with NCCL_P2P_DISABLE=1 (22.9 GB/s on 4 GPUs) is host staging's order, not NVLS's
    assert off["busbw_bytes_per_s"] < 0.1 * on["busbw_bytes_per_s"]
    # an NVL72 rack's trays share no host memory: without P2P they exchange over their NICs
    rack = collective("all_reduce", 2.0**30, node="gb200-nvl72", gpus=16, nodes=4, p2p=False)[0]
    assert rack["intra_path"] == "host-staged" and rack["inter_path"] == "infiniband"
    assert collective("all_reduce", 2.0**30, node="gb200-nvl72", gpus=16, nodes=4)[0]["inter_path"] == "nvswitch"


def test_without_p2p_a_hop_costs_host_memorys_latency(db):
    from gpusim.params import ModelParams as MP
    from gpusim.rows import hardware_row, resolve_hardware
    from gpusim.scenario import Scenario

    kw = dict(model="bert-large", gpu="h100-sxm", node="hgx-h100-8", gpus=8, per_gpu_batch=8)
    on = hardware_row(resolve_hardware(Scenario.create(**kw), db), MP())
    off = hardware_row(resolve_hardware(Scenario.create(**kw, p2p=False), db), MP())
    assert off["intra_hop_s"] == pytest.approx(db.link("host-staged").latency_s)
    assert off["intra_hop_s"] > 5 * on["intra_hop_s"]


def test_predict_advises_re_enabling_p2p_on_an_nvlink_node(db):
    from gpusim.scenario import Scenario
    from gpusim.simulation import simulate

    kw = dict(model="bert-large", gpu="a100-sxm4-80gb", node="dgx-a100-80gb", gpus=8, per_gpu_batch=8,
              precision="fp32")
    off = simulate(Scenario.create(**kw, p2p=False), db=db)
    rec = {r["id"]: r for r in off.recommendations}
    assert "enable-p2p" in rec and rec["enable-p2p"]["change"] == {"p2p": True}
    assert rec["enable-p2p"]["gain_frac"] > 0.03 and "NCCL_P2P_DISABLE" in rec["enable-p2p"]["message"]
    on = simulate(Scenario.create(**kw), db=db)
    assert "enable-p2p" not in {r["id"] for r in on.recommendations}


def test_the_host_staged_default_is_the_median_of_its_published_measurements(db):
    from gpusim.params import HOST_STAGED_SHM_ALL_REDUCE, PROVENANCE

    ratios = [m.busbw_gbyte_per_s * 1e9 / db.link(m.pcie_link).bandwidth_bytes_per_s
              for m in HOST_STAGED_SHM_ALL_REDUCE]
    assert len(ratios) >= 5 and all(0.0 < r < 1.0 for r in ratios)
    assert ModelParams().busbw_eff_frac["host-staged"] == pytest.approx(round(float(np.median(ratios)), 2))
    assert "HOST_STAGED_SHM_ALL_REDUCE" in PROVENANCE["busbw_eff_frac"]


def test_an_llm_layout_without_p2p_gets_the_advice_too(db):
    from gpusim.scenario import Scenario
    from gpusim.simulation import simulate

    kw = dict(model="llama3-8b", gpu="h100-sxm", node="hgx-h100-8", gpus=8, tp=2, global_batch=64, kind="zero1",
              micro_batch=1)
    off = simulate(Scenario.create(**kw, p2p=False), db=db)
    rec = {r["id"]: r for r in off.recommendations}
    assert "enable-p2p" in rec and rec["enable-p2p"]["change"] == {"p2p": True}
    on = simulate(Scenario.create(**kw), db=db)
    assert rec["enable-p2p"]["gain_frac"] == pytest.approx(off.step_s / on.step_s - 1.0, abs=1e-4)  # (rounded)
    assert "enable-p2p" not in {r["id"] for r in on.recommendations}


def test_a_host_staged_prediction_says_how_far_hosts_differ_and_how_to_measure_it(db):
    """[issue 18] The SHM transport's bus bandwidth differs 14-fold between the published sweeps: a prediction on that
    path names the range and the figure it took, and how to replace it; one with peer-to-peer does not."""
    from gpusim.params import HOST_STAGED_SHM_ALL_REDUCE
    from gpusim.scenario import Scenario
    from gpusim.simulation import simulate

    kw = dict(model="bert-large", seq_len=128, gpu="rtx-4090", gpus=4, per_gpu_batch=16, precision="amp_fp16")
    res = simulate(Scenario.create(**kw), db=db, recommend=False)
    assert res.intra_path == "host-staged"
    note = next(a for a in res.assumptions if a.startswith("gradients are staged through host memory"))
    lo = min(m.busbw_gbyte_per_s for m in HOST_STAGED_SHM_ALL_REDUCE)
    assert f"{lo:.3g} to " in note and f"in {len(HOST_STAGED_SHM_ALL_REDUCE)} published" in note
    pcie = db.link("pcie4-x16").bandwidth_bytes_per_s
    taken = ModelParams().busbw_eff_frac["host-staged"] * pcie / 1e9
    assert f"takes {taken:.3g} GB/s" in note and "gpusim calibrate" in note and "NCCL_P2P_DISABLE=1" in note
    on = simulate(Scenario.create(**{**kw, "gpu": "h100-sxm", "gpus": 8}), db=db, recommend=False)
    assert not any(a.startswith("gradients are staged") for a in on.assumptions)
    one = simulate(Scenario.create(**{**kw, "gpus": 1}), db=db, recommend=False)
    assert not any(a.startswith("gradients are staged") for a in one.assumptions)
