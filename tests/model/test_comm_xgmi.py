"""AMD Infinity Fabric (xGMI) meshes at the usable 75% of each link's rated bandwidth [issue 18].

Hand-worked: MI300X links are 64 GB/s per direction, usable ~48 GB/s (AMD ROCm blog; RCCL topo.h GFX94X_XGMI_WIDTH
48.0); a ring over g GPUs of the 8-GPU mesh uses g-1 of the 7 links: 2 GPUs 48 GB/s, 8 GPUs 7 x 48 = 336 GB/s.
"""

from __future__ import annotations

import pytest

from gpusim.params import DEFAULT_PARAMS, PROVENANCE
from gpusim.simulation import collective

BIG = 2.0**36  # 64 GiB: latency is negligible next to the transfer


def busbw(gpu, gpus, db):
    return collective("all_reduce", [BIG], gpu=gpu, gpus=gpus, db=db, algorithm="ring")[0]["busbw_bytes_per_s"]


def test_default_is_amds_published_usable_fraction():
    assert DEFAULT_PARAMS.xgmi_link_eff_frac == pytest.approx(48.0 / 64.0)
    assert "GFX94X_XGMI_WIDTH 48.0" in PROVENANCE["xgmi_link_eff_frac"]


@pytest.mark.parametrize("gpus, expected_gbyte_per_s", [(2, 48.0), (4, 144.0), (8, 336.0)])
def test_mi300x_ring_gets_g_minus_1_usable_links(db, gpus, expected_gbyte_per_s):
    assert busbw("mi300x", gpus, db) == pytest.approx(expected_gbyte_per_s * 1e9, rel=0.005)


def test_mi355x_mesh_has_seven_peers_too(db):
    assert db.link("infinity-fabric-mi355x").mesh_peers == 7
    assert busbw("mi355x", 2, db) == pytest.approx(76.8e9 * 0.75, rel=0.005)
    assert busbw("mi355x", 8, db) == pytest.approx(7 * 76.8e9 * 0.75, rel=0.005)


def test_the_fraction_is_a_parameter(db):
    p = DEFAULT_PARAMS.replace(xgmi_link_eff_frac=0.5)
    got = collective("all_reduce", [BIG], gpu="mi300x", gpus=8, db=db, algorithm="ring", params=p)[0]
    assert got["busbw_bytes_per_s"] == pytest.approx(7 * 32e9, rel=0.005)
