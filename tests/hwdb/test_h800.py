"""The H800 (export variant of H100 SXM): the GH100 die with 8 NVLink links instead of 18 (hwdb/gpus/nvidia-hopper.yaml,
hwdb/links/nvlink.yaml, hwdb/nodes/hgx-and-racks.yaml) and the published runs that ran on it."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from gpusim.hwdb import load
from gpusim.params import DEFAULT_PARAMS
from gpusim.rows import hardware_row, resolve_hardware
from gpusim.scenario import Scenario
from gpusim.strategy import Strategy

ROOT = Path(__file__).resolve().parents[2]


def _row(node):
    db = load()
    scn = Scenario.model_construct(gpu=None, node=node, gpus=8, nodes=1, intra=None, inter=None, intra_topology=None,
                                   nics_per_node=None, oversubscription=1.0, cpu_cores_per_gpu=None,
                                   storage_gbyte_per_s=None, p2p=None, strategy=Strategy())
    return hardware_row(resolve_hardware(scn, db), DEFAULT_PARAMS)


def test_h800_is_h100_but_for_nvlink_and_fp64():
    db = load()
    h800, h100 = db.gpu("h800-sxm"), db.gpu("h100-sxm")
    for field in ("sm_count", "memory_gib", "memory_gbyte_per_s", "compute_capability", "tdp_w"):
        assert getattr(h800, field) == getattr(h100, field), field
    for prec in ("bf16", "fp8", "tf32"):
        assert getattr(h800.dense_tflop_per_s, prec) == getattr(h100.dense_tflop_per_s, prec)
    assert h800.dense_tflop_per_s.fp64 == 1
    assert (h800.peer_link.links, h800.peer_link.gbyte_per_s_per_direction) == (8, 200)


def test_nvswitch_ring_bandwidth_is_nccls_per_link_figure_times_8_links():
    """NCCL's Hopper NVLink figure per link times the links: 8 x 20.6 = 164.8 GB/s on H800 (DeepSeek-V3's
    'NVLink 160 GB/s'), 18 x 20.6 = 370.8 GB/s on H100, so an all-reduce inside the node has 8/18 of H100's bus
    bandwidth."""
    per_link = DEFAULT_PARAMS.nccl_nvlink_gbyte_per_s_per_link["9.0"]
    h800, h100 = _row("hgx-h800-8"), _row("hgx-h100-8")
    assert h800["intra_busbw_bytes_per_s"] == pytest.approx(8 * per_link * 1e9)
    assert h800["intra_busbw_bytes_per_s"] / h100["intra_busbw_bytes_per_s"] == pytest.approx(8 / 18)
    assert 155e9 < h800["intra_busbw_bytes_per_s"] < 170e9


def test_every_h800_run_is_predicted_on_the_h800():
    rows = list(csv.DictReader(open(ROOT / "validation" / "runs_moe.csv", newline="")))
    h800 = [r for r in rows if "H800" in r["source"] or "h800" in r["run_id"]]
    assert len(h800) >= 5
    assert all(r["gpu"] == "h800-sxm" for r in h800), [r["run_id"] for r in h800 if r["gpu"] != "h800-sxm"]
