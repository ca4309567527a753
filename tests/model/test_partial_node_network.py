"""Jobs that use some of a node's GPUs across several nodes (issue 18, item 3: "the NIC bandwidth per GPU and its PCIe
path"): the job drives the NICs of its own GPUs, and each GPU reaches them over its own PCIe link (GPUDirect RDMA is
PCIe peer-to-peer), so one GPU per node cannot use a DGX's eight 400 Gb/s NICs. Full nodes are unchanged."""

from __future__ import annotations

import numpy as np
import pytest

from gpusim.model.fabric import PATH_CODES, eff_table, gpu_nic_path_bytes_per_s
from gpusim.params import DEFAULT_PARAMS
from gpusim.rows import hardware_row, node_nics_for, resolve_hardware
from gpusim.scenario import Scenario

GB = 1e9


def test_a_job_drives_the_nics_of_its_own_gpus(db):
    dgx = db.node("dgx-h100")                # 8 GPUs, 8 NICs: one per GPU
    assert [node_nics_for(dgx, g) for g in (1, 2, 4, 8)] == [1, 2, 4, 8]
    p5 = db.node("aws-p5-48xlarge")          # 8 GPUs, 32 EFA interfaces: four per GPU
    assert node_nics_for(p5, 1) == 4 and node_nics_for(p5, 8) == 32
    hw = resolve_hardware(Scenario.create(model="resnet50", node="dgx-h100", gpus=2, nodes=2), db)
    assert hw.gpus_per_node == 1 and hw.nics_per_node == 1
    assert any("1 of the node's 8 GPUs use their own NICs" in a for a in hw.assumptions)
    # a stated NIC count is the user's: kept
    hw4 = resolve_hardware(Scenario.create(model="resnet50", node="dgx-h100", gpus=2, nodes=2, nics_per_node=4), db)
    assert hw4.nics_per_node == 4


def test_one_gpu_cannot_put_more_than_its_pcie_link_into_the_network(db):
    """Hand-worked: an H100 on PCIe 5.0 x16 (63 GB/s per direction) through its PCIe switch (path class efficiency
    0.80) reaches its NICs at 50.4 GB/s; four NDR NICs would carry 4 x 50 x 0.90 = 180 GB/s."""
    eff = eff_table(DEFAULT_PARAMS)
    assert eff[PATH_CODES["pcie-switch"]] == pytest.approx(0.80)
    hw = resolve_hardware(Scenario.create(model="resnet50", node="dgx-h100", gpus=2, nodes=2, nics_per_node=4), db)
    row = hardware_row(hw, DEFAULT_PARAMS)
    assert row["inter_busbw_bytes_per_s"] == pytest.approx(1 * 63.0 * GB * 0.80)
    assert float(gpu_nic_path_bytes_per_s(1, 63.0 * GB, eff)) == pytest.approx(50.4 * GB)


def test_a_full_rail_optimised_node_is_bound_by_its_nics_as_before(db):
    """8 GPUs x 63 GB/s x 0.80 = 403 GB/s of PCIe against 8 NDR NICs x 50 x 0.90 = 360 GB/s: the NICs bind."""
    hw = resolve_hardware(Scenario.create(model="resnet50", node="dgx-h100", gpus=16, nodes=2), db)
    row = hardware_row(hw, DEFAULT_PARAMS)
    assert hw.nics_per_node == 8
    assert row["inter_busbw_bytes_per_s"] == pytest.approx(8 * 50.0 * GB * 0.90)


def test_two_nodes_of_one_gpu_all_reduce_at_one_nic():
    import gpusim

    one = gpusim.comm(collective="all_reduce", bytes=4 * 2**30, gpu="h100-sxm", gpus=2, nodes=2)
    busbw = one.rows[0]["busbw_bytes_per_s"]
    assert 0.8 * 45 * GB < busbw <= 50.4 * GB   # one NDR NIC (50 x 0.90 = 45 GB/s), at most the PCIe path
    full = gpusim.comm(collective="all_reduce", bytes=4 * 2**30, gpu="h100-sxm", gpus=16, nodes=2)
    assert full.rows[0]["busbw_bytes_per_s"] > 5 * busbw
    assert np.isfinite(busbw)


def test_more_gpus_per_node_bring_more_nics_as_measured():
    """NVIDIA/nccl issue 1250 (2024, nodes of 8 H100, SLURM allocating 1, 2 or 4 GPUs on each of 2 nodes): a 1 GB
    all-reduce took ~0.27 s, ~0.13 s and ~0.067 s, halving as the GPUs per node double (their network is slower than
    a DGX's; the ratios are the test). With every node's NICs given to the job, as before, the time would rise with
    the GPUs instead."""
    import gpusim

    t = [gpusim.comm(collective="all_reduce", bytes=1e9, gpu="h100-sxm", gpus=2 * g, nodes=2).rows[0]["time_s"]
         for g in (1, 2, 4)]
    for a, b in zip(t, t[1:]):
        assert 0.4 < b / a < 0.65, t
