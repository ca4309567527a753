"""Issue 18: what the host CPU changes in NCCL's tuner (src/graph/tuning.cc, v2.19 @b6475625 and 2.2x).

- ``getNetOverhead``: 1 us on Intel, 2 us on AMD, 1 us otherwise; a ring across nodes takes at least that per step
  (x3 for Simple) for all-reduce, reduce-scatter and all-gather, not for broadcast and reduce, not inside one node;
- ``llMaxBws`` across nodes is read by the CPU's row (Intel / other: 39 GB/s for 2 nodes, 20.4 beyond; AMD: 22.5 and
  19.0), inside one node by the GPU's; RCCL (no cap) keeps none.

Every expected figure is worked by hand below from those constants.
"""

from __future__ import annotations

import numpy as np
import pytest

from gpusim.hwdb import load
from gpusim.model import comm as C
from gpusim.params import DEFAULT_PARAMS as P
from gpusim.rows import hardware_row, resolve_hardware
from gpusim.scenario import Scenario
from gpusim.strategy import Strategy

KW = dict(base_latency_s=3e-6, nvls_gain_frac=1.3, nvls_latency_s=23e-6, tree_busbw_frac=0.92)
HOP = 0.5e-6  # the link's own (LL) latency inside the node
TN = C.default_tuning()


def _ring(coll, size, n, nodes, proto, host, ll_max=np.inf, intra=1e12, inter=1e12):
    t, algo, p = C.collective_choice(coll, size, n, nodes, intra, HOP, inter, 5e-6, False, algorithm=C.ALGO_RING,
                                     protocol=proto, ll_max_busbw_bytes_per_s=ll_max, host_cpu=host, **KW)
    assert int(algo) == C.ALGO_RING and int(p) == proto
    return float(t)


@pytest.mark.parametrize("proto, intel_floor, amd_floor", [
    (C.PROTO_LL, 1e-6, 2e-6),
    # Simple: the link (0.5) + NCCL's Simple extra (3.4 - 0.6) = 3.3 us, above Intel's 3 x 1 us, below AMD's 3 x 2 us
    (C.PROTO_SIMPLE, 3.3e-6, 6e-6),
])
def test_ring_across_nodes_takes_at_least_the_hosts_net_overhead_per_intra_step(proto, intel_floor, amd_floor):
    # 16 ranks on 2 nodes: 2 x 15 = 30 all-reduce steps, 2 x 2 = 4 of them across nodes, 26 inside
    t_intel = _ring(C.ALL_REDUCE, 4096, 16, 2, proto, C.HOST_INTEL)
    t_amd = _ring(C.ALL_REDUCE, 4096, 16, 2, proto, C.HOST_AMD)
    assert t_amd - t_intel == pytest.approx(26 * (amd_floor - intel_floor), rel=1e-9)
    # the Intel LL step is the floor itself: 1 us against the link's 0.5 us (26 steps x 0.5 us more than without it)
    no_floor = C.Tuning(**{**TN.__dict__, "net_overhead_s": (0.0, 0.0, 0.0)})
    t_none = float(C.collective_choice(C.ALL_REDUCE, 4096, 16, 2, 1e12, HOP, 1e12, 5e-6, False,
                                       algorithm=C.ALGO_RING, protocol=proto, tuning=no_floor, **KW)[0])
    extra = 26 * (intel_floor - (HOP + TN.hop_extra("intra", "ring")[proto]))
    assert t_intel - t_none == pytest.approx(extra, rel=1e-9, abs=1e-15)


@pytest.mark.parametrize("coll, nodes", [(C.ALL_REDUCE, 1), (C.BROADCAST, 2), (C.REDUCE, 2)])
def test_no_net_overhead_inside_one_node_or_for_broadcast_and_reduce(coll, nodes):
    assert _ring(coll, 4096, 16, nodes, C.PROTO_LL, C.HOST_AMD) == _ring(coll, 4096, 16, nodes, C.PROTO_LL,
                                                                         C.HOST_INTEL)


@pytest.mark.parametrize("coll", [C.REDUCE_SCATTER, C.ALL_GATHER])
def test_reduce_scatter_and_all_gather_rings_pay_it_too(coll):
    # 16 ranks, 2 nodes: 15 steps, 1 across nodes (nodes - 1), 14 inside, each 1 us more on AMD than on Intel (LL)
    diff = _ring(coll, 4096, 16, 2, C.PROTO_LL, C.HOST_AMD) - _ring(coll, 4096, 16, 2, C.PROTO_LL, C.HOST_INTEL)
    assert diff == pytest.approx(14 * 1e-6, rel=1e-9)


@pytest.mark.parametrize("host, nodes, cap", [(C.HOST_INTEL, 2, 39e9), (C.HOST_INTEL, 4, 20.4e9),
                                              (C.HOST_AMD, 2, 22.5e9), (C.HOST_AMD, 3, 19e9),
                                              (C.HOST_OTHER, 2, 39e9), (C.HOST_OTHER, 8, 20.4e9)])
def test_ll_cap_across_nodes_is_the_host_cpus_row(host, nodes, cap):
    # a large LL ring on very fast links: the bandwidth term is f x S / cap; a one-node cap of 141 GB/s (Hopper) is
    # replaced across nodes; the latency part is the same with the cap at infinity minus the bandwidth term
    size, n = 2.0**30, 8 * nodes
    f = 2 * (n - 1) / n
    t = _ring(C.ALL_REDUCE, size, n, nodes, C.PROTO_LL, host, ll_max=141e9)
    lat = _ring(C.ALL_REDUCE, 8.0, n, nodes, C.PROTO_LL, host, ll_max=141e9) - f * 8.0 / cap
    assert t - lat == pytest.approx(f * size / cap, rel=1e-6)


def test_ll_cap_inside_one_node_is_the_gpus_and_rccl_has_none():
    size, n, f = 2.0**30, 8, 2 * 7 / 8
    lat = _ring(C.ALL_REDUCE, 8.0, n, 1, C.PROTO_LL, C.HOST_AMD, ll_max=141e9) - f * 8.0 / 141e9
    assert _ring(C.ALL_REDUCE, size, n, 1, C.PROTO_LL, C.HOST_AMD, ll_max=141e9) - lat == pytest.approx(
        f * size / 141e9, rel=1e-6)
    # no cap (an AMD GPU under RCCL): across nodes the link's LL rate (half of 1 TB/s) stays
    t = _ring(C.ALL_REDUCE, size, 16, 2, C.PROTO_LL, C.HOST_AMD)
    t0 = _ring(C.ALL_REDUCE, 8.0, 16, 2, C.PROTO_LL, C.HOST_AMD)
    assert t - t0 == pytest.approx(2 * 15 / 16 * (size - 8.0) / 0.5e12, rel=1e-6)


def test_a_transport_that_cannot_run_ll_still_cannot_across_nodes():
    t, _, p = C.collective_choice(C.ALL_REDUCE, 4096.0, 16, 2, 1e12, HOP, 1e12, 5e-6, False,
                                  ll_max_busbw_bytes_per_s=0.0, host_cpu=C.HOST_AMD, **KW)
    assert int(p) != C.PROTO_LL and np.isfinite(t)


def _hw(node, gpus, nodes=1):
    scn = Scenario.model_construct(gpu=None, node=node, gpus=gpus, nodes=nodes, intra=None, inter=None,
                                   intra_topology=None, nics_per_node=None, oversubscription=None,
                                   cpu_cores_per_gpu=None, storage_gbyte_per_s=None, p2p=None, strategy=Strategy())
    return resolve_hardware(scn, load())


@pytest.mark.parametrize("node, vendor", [("aws-p5-48xlarge", "amd"), ("dgx-h100", "intel"),
                                          ("dgx-a100-80gb", "amd"), ("gb200-nvl72", "other"),
                                          ("mi355x-8-oam", "amd"), ("aws-p4de-24xlarge", "intel")])
def test_hardware_rows_carry_the_hosts_cpu_vendor(node, vendor):
    db = load()
    assert db.nodes[node].cpu_vendor == vendor
    row = hardware_row(_hw(node, 16 if node != "gb200-nvl72" else 8, nodes=2), P)
    assert int(row["host_cpu"]) == C.HOST_CPUS[vendor]


def test_the_row_keeps_the_gpus_one_node_ll_cap_for_every_node_count():
    for nodes in (1, 2, 4):
        row = hardware_row(_hw("dgx-h100", 8 * nodes, nodes=nodes), P)
        assert row["_ll_max"] == P.ll_max_busbw_bytes_per_s["hopper"][0]


# --- the override a user gives (`gpusim comm --host-cpu`, `gpusim.comm(host_cpu=...)`) --------------------------------

def _comm_rows(capsys, *extra):
    import json

    from gpusim.cli import main

    capsys.readouterr()
    code = main(["comm", "--node", "hgx-h100-8", "--gpus", "16", "--nodes", "2", "--bytes", "64KiB",
                 "--algorithm", "ring", "--protocol", "ll", "--json", *extra])
    out = capsys.readouterr().out
    assert code == 0, out
    d = json.loads(out)
    return d if isinstance(d, list) else [d]  # one size prints one object


def test_host_cpu_flag_replaces_the_nodes_vendor(capsys):
    """An Intel node (hgx-h100-8) told it has AMD hosts: the LL ring's 28 intra-node steps across 2 nodes each rise
    from max(link + LL extra, 1 us) to max(link + LL extra, 2 us) and the LL cap falls from 39 to 22.5 GB/s, so the
    time grows; 'other' is Intel's figures (NCCL's default branch), so it equals the node's own."""
    own = _comm_rows(capsys)[0]
    amd = _comm_rows(capsys, "--host-cpu", "amd")[0]
    other = _comm_rows(capsys, "--host-cpu", "other")[0]
    assert own["host_cpu"] == "intel" and amd["host_cpu"] == "amd" and other["host_cpu"] == "other"
    assert amd["time_s"] > own["time_s"]
    assert other["time_s"] == pytest.approx(own["time_s"], rel=1e-12)


def test_host_cpu_api_is_the_commands_twin(capsys):
    import gpusim

    api = gpusim.comm(node="hgx-h100-8", gpus=16, nodes=2, bytes="64KiB", algorithm="ring", protocol="ll",
                      host_cpu="amd").to_dict()
    cli = _comm_rows(capsys, "--host-cpu", "amd")
    rows = api if isinstance(api, list) else api.get("rows", [api])
    assert [r["time_s"] for r in rows] == [r["time_s"] for r in cli]


def test_unknown_host_cpu_is_a_clear_error(capsys):
    from gpusim.cli import main
    from gpusim.errors import ScenarioError
    from gpusim.simulation import collective

    with pytest.raises(SystemExit) as e:
        main(["comm", "--node", "hgx-h100-8", "--host-cpu", "arm"])
    assert e.value.code == 2
    assert "--host-cpu" in capsys.readouterr().err
    with pytest.raises(ScenarioError, match="Grace are 'other'"):
        collective("all_reduce", [1e6], node="hgx-h100-8", gpus=16, nodes=2, host_cpu="arm")


# --- the per-host parameters a calibration or params file may give ---------------------------------------------------

def test_a_params_file_naming_some_hosts_keeps_nccls_figures_for_the_others():
    from gpusim.params import ModelParams

    p = ModelParams.model_validate({"nccl_net_overhead_s": {"amd": 5e-6}})
    assert p.nccl_net_overhead_s == {"intel": 1e-6, "amd": 5e-6, "other": 1e-6}
    assert C.tuning_from_params(p).net_overhead_s == (1e-6, 5e-6, 1e-6)
    # replace() skips validation: the tuner still fills the hosts it leaves out from the field's default
    q = P.replace(nccl_ll_max_multi_node_busbw_bytes_per_s={"other": [1e9, 2e9]})
    assert C.tuning_from_params(q).ll_max_multi_node_busbw_bytes_per_s == ((39e9, 20.4e9), (22.5e9, 19e9), (1e9, 2e9))


@pytest.mark.parametrize("field,value,words", [
    ("nccl_net_overhead_s", {"arm": 1e-6}, "unknown host CPU 'arm'"),
    ("nccl_net_overhead_s", {"intel": 1.0}, "outside 0 to 1e-3 s"),
    ("nccl_ll_max_multi_node_busbw_bytes_per_s", {"amd": [22.5e9]}, "two non-negative bus bandwidths"),
])
def test_bad_per_host_parameters_say_what_is_wrong(field, value, words):
    from pydantic import ValidationError

    from gpusim.params import ModelParams

    with pytest.raises(ValidationError, match=words):
        ModelParams.model_validate({field: value})
