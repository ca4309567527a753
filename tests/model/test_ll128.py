"""NCCL enables LL128 only over NVLink on the GPU generations it was validated on (ModelParams cites the rule)."""

from __future__ import annotations

import numpy as np
import pytest

from gpusim.hwdb import load
from gpusim.params import DEFAULT_PARAMS
from gpusim.simulation import Scenario, collective, hardware_row, resolve_hardware

SIZES = 2.0 ** np.arange(10, 31)  # 1 KiB .. 1 GiB


def _row(**kw):
    return hardware_row(resolve_hardware(Scenario.model_construct(**{
        "gpu": None, "node": None, "gpus": 8, "nodes": 1, "intra": None, "inter": None, "intra_topology": None,
        "nics_per_node": None, "oversubscription": 1.0, "cpu_cores_per_gpu": None, "storage_gbyte_per_s": None,
        "p2p": None, **kw}), load()), DEFAULT_PARAMS)


@pytest.mark.parametrize("kw, expected", [
    ({"node": "dgx-h100"}, True),                       # Hopper (9.0) behind NVSwitch
    ({"gpu": "v100-sxm2-32gb", "gpus": 8}, True),       # Volta (7.0) NVLink mesh
    ({"gpu": "a100-pcie-80gb", "gpus": 4}, False),      # 8.0, but the ring crosses PCIe
    ({"gpu": "rtx-3090", "gpus": 2}, False),            # NVLink bridge, but compute capability 8.6
    ({"gpu": "l40s", "gpus": 4}, False),                # Ada (8.9) on PCIe
    ({"gpu": "b300", "gpus": 8}, False),                # 10.3 is not in NCCL's list
    ({"gpu": "mi300x", "gpus": 8}, False),              # RCCL: LL128 on CDNA2 only
    ({"gpu": "mi250x", "gpus": 4, "intra_topology": "nvlink-mesh"}, True),  # CDNA2 over Infinity Fabric
])
def test_which_systems_run_ll128(kw, expected):
    assert _row(**kw)["ll128"] is expected


def test_ll128_is_never_chosen_where_nccl_disables_it_and_is_chosen_somewhere_where_it_runs():
    off = collective("all_reduce", SIZES, gpu="rtx-3090", gpus=2)
    assert {r["protocol"] for r in off} <= {"ll", "simple"}
    on = collective("all_reduce", SIZES, node="dgx-h100")
    assert "ll128" in {r["protocol"] for r in on}


def test_naming_the_protocol_runs_it_anyway():
    """NCCL_PROTO=LL128 forces it on any system, as --protocol ll128 does."""
    forced = collective("all_reduce", SIZES, gpu="rtx-3090", gpus=2, protocol="ll128")
    assert {r["protocol"] for r in forced} == {"ll128"}


def test_dropping_ll128_never_makes_a_collective_faster():
    from gpusim.model import comm as C

    p = DEFAULT_PARAMS
    kw = dict(base_latency_s=p.coll_base_latency_s, nvls_gain_frac=p.nvls_gain_frac, nvls_latency_s=p.nvls_latency_s,
              tree_busbw_frac=p.tree_busbw_frac, tuning=C.tuning_from_params(p))
    for coll in (C.ALL_REDUCE, C.ALL_GATHER, C.SEND_RECV):
        args = (SIZES, 16.0, 2.0, 3.6e11, 2e-6, 4e11, 5e-6, False)
        with_ll128 = C.collective_time_s(coll, *args, ll128=True, **kw)[0]
        without = C.collective_time_s(coll, *args, ll128=False, **kw)[0]
        assert np.all(without >= with_ll128)
        mixed = C.collective_time_s(coll, *args, ll128=np.arange(len(SIZES)) % 2 == 0, **kw)[0]
        np.testing.assert_array_equal(mixed, np.where(np.arange(len(SIZES)) % 2 == 0, with_ll128, without))
