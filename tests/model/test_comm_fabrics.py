"""Collectives on real fabrics from the hardware database, and `gpusim comm` (sweeps, --measured, bad input)."""

from __future__ import annotations

import json

import pytest

from gpusim.cli import main
from gpusim.errors import ScenarioError
from gpusim.simulation import collective


def busbw(name, size, **kw):
    return collective(name, [size], **kw)[0]["busbw_bytes_per_s"]


def test_xgmi_mesh_two_gpus_get_one_link_eight_get_seven(db):
    link = db.link("infinity-fabric-mi300x")
    per_pair = link.bandwidth_bytes_per_s / link.mesh_peers
    two = busbw("all_reduce", 2**32, gpu="mi300x", gpus=2, db=db)
    eight = busbw("all_reduce", 2**32, gpu="mi300x", gpus=8, db=db)
    assert two <= per_pair and two > 0.5 * per_pair
    assert eight == pytest.approx(7 * two, rel=0.02)


def test_nvl72_trays_talk_over_nvlink_inside_the_domain(db):
    inside = busbw("all_reduce", 2**34, gpu="gb200", gpus=72, nodes=18, db=db)
    one_tray = busbw("all_reduce", 2**34, gpu="gb200", gpus=4, nodes=1, db=db)
    two_racks = busbw("all_reduce", 2**34, gpu="gb200", gpus=144, nodes=36, db=db)
    nic_tray = 4 * db.link("ib-ndr-400").bandwidth_bytes_per_s
    assert inside > nic_tray * 2  # NVLink speed across trays, NVLS in the domain
    assert inside == pytest.approx(one_tray, rel=0.05)
    assert two_racks < inside
    # a job that is not a multiple of 72 still runs (64 trays of 4)
    r = collective("all_reduce", [2**30], gpu="gb200", gpus=256, nodes=64, db=db)[0]
    assert r["time_s"] > 0 and r["n_nodes"] == 64


def test_all_to_all_full_inside_a_switch_bisection_bound_across_nodes(db):
    inside = busbw("all_to_all", 2**32, node="dgx-h100", gpus=8, db=db)
    across = busbw("all_to_all", 2**32, node="dgx-h100", gpus=64, nodes=8, db=db)
    per_gpu_nic = db.link("ib-ndr-400").bandwidth_bytes_per_s
    assert inside > 5 * per_gpu_nic
    assert across < 1.2 * per_gpu_nic


def test_every_row_names_its_algorithm_and_protocol(db):
    for name in ("all_reduce", "reduce_scatter", "all_gather", "broadcast", "reduce", "send_recv", "all_to_all"):
        rows = collective(name, [1024.0, 2.0**30], node="dgx-h100", gpus=16, nodes=2, db=db)
        assert all(r["algorithm"] not in ("none", "") and r["protocol"] in ("ll", "ll128", "simple") for r in rows)


def test_collective_bad_input_is_a_clear_error(db):
    with pytest.raises(ScenarioError, match="positive"):
        collective("all_reduce", [0.0], gpu="h100-sxm", gpus=8, db=db)
    with pytest.raises(ScenarioError, match="unknown collective"):
        collective("allreduce", [1.0], gpu="h100-sxm", gpus=8, db=db)
    with pytest.raises(ScenarioError, match="cannot run"):
        collective("all_reduce", [1e6], gpu="h100-sxm", gpus=8, algorithm="tree", db=db)


def test_comm_sweep_prints_a_row_per_doubling(capsys):
    assert main(["comm", "--gpu", "h100-sxm", "--gpus", "8", "--bytes", "1KiB..1MiB", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["bytes"] for r in rows] == [float(2 ** k) for k in range(10, 21)]
    assert {"algorithm", "protocol", "busbw_bytes_per_s"} <= set(rows[0])


NCCL_TEXT = """# nThread 1 nGpus 1 minBytes 1024 maxBytes 1073741824 step: 2(factor) warmup iters: 5 iters: 20
#  Rank  0 Group  0 Pid   1 on     node0 device  0 [0x18] NVIDIA H100 80GB HBM3
#  Rank  1 Group  0 Pid   2 on     node0 device  1 [0x2a] NVIDIA H100 80GB HBM3
#  Rank  2 Group  0 Pid   3 on     node0 device  2 [0x3a] NVIDIA H100 80GB HBM3
#  Rank  3 Group  0 Pid   4 on     node0 device  3 [0x5d] NVIDIA H100 80GB HBM3
#  Rank  4 Group  0 Pid   5 on     node0 device  4 [0x9a] NVIDIA H100 80GB HBM3
#  Rank  5 Group  0 Pid   6 on     node0 device  5 [0xab] NVIDIA H100 80GB HBM3
#  Rank  6 Group  0 Pid   7 on     node0 device  6 [0xba] NVIDIA H100 80GB HBM3
#  Rank  7 Group  0 Pid   8 on     node0 device  7 [0xdb] NVIDIA H100 80GB HBM3
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
     1048576        262144     float     sum      -1    27.37   38.31   67.04      0    26.93   38.94   68.14      0
    67108864      16777216     float     sum      -1    324.7  206.67  361.67      0    324.7  206.68  361.68      0
  1073741824     268435456     float     sum      -1   4029.4  266.48  466.33      0   4016.4  267.34  467.85      0
"""


def test_comm_measured_prints_the_error_per_size(tmp_path, capsys):
    f = tmp_path / "all_reduce_perf.txt"
    f.write_text(NCCL_TEXT)
    assert main(["comm", "--node", "dgx-h100", "--gpus", "8", "--measured", str(f), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["bytes"] for r in rows] == [1048576.0, 67108864.0, 1073741824.0]
    assert all(abs(r["error_frac"]) < 0.25 for r in rows)
    assert main(["comm", "--node", "dgx-h100", "--gpus", "8", "--measured", str(f)]) == 0
    assert "median |error|" in capsys.readouterr().out


@pytest.mark.parametrize("flags, needle", [(["--bytes", "0"], "positive"), (["--bytes", "1GiB..1KiB"], "sweep"),
                                           (["--bytes", "lots"], "size")])
def test_comm_bad_sizes_exit_2_with_a_message(capsys, flags, needle):
    assert main(["comm", "--gpu", "h100-sxm", "--gpus", "8", *flags]) == 2
    assert needle in capsys.readouterr().err


def test_oversubscribed_fat_tree_halves_cross_node_bandwidth(capsys):
    args = ["comm", "--node", "dgx-h100", "--gpus", "16", "--nodes", "2", "--inter", "roce-400g", "--bytes", "16GiB",
            "--algorithm", "ring", "--json"]  # the ring is network-bound (two nodes' NVLS-tree is NVLS-bound here)
    assert main(args) == 0
    full = json.loads(capsys.readouterr().out)["busbw_bytes_per_s"]
    assert main([*args, "--oversubscription", "2"]) == 0
    half = json.loads(capsys.readouterr().out)["busbw_bytes_per_s"]
    assert half == pytest.approx(full / 2, rel=0.05)
    assert main([*args, "--oversubscription", "0.5"]) == 2


def test_nvlink_domain_schema_rejects_a_domain_smaller_than_the_node(db):
    from pydantic import ValidationError

    from gpusim.hardware import Node

    data = db.node("gb200-nvl72").model_dump()
    assert data["nvlink_domain_gpus"] == 72 and data["gpus_per_node"] == 4
    with pytest.raises(ValidationError, match="below gpus_per_node"):
        Node.model_validate({**data, "nvlink_domain_gpus": 2})


def test_a_board_gpu_beyond_its_node_asks_for_more_nodes(db):
    with pytest.raises(ScenarioError, match=r"holds 4 \(its NVLink domain spans 72 GPUs\); use --nodes 18"):
        collective("all_reduce", [1e6], gpu="gb200", gpus=72, nodes=1, db=db)



def test_collnet_is_opt_in_as_in_nccl_and_the_ll_cap_reaches_the_step_model():
    """NCCL runs CollNet (InfiniBand SHARP) only when it is enabled (NCCL_COLLNET_ENABLE=1 and the SHARP
    plugin), so the automatic choice never picks it; forced on a SHARP fabric it runs and lifts a large
    multi-node all-reduce above the ring/tree. NCCL's LL bandwidth cap is a hardware input of the step model."""
    from gpusim.simulation import Scenario, build_inputs

    auto = collective("all_reduce", [2**30], gpu="h100-sxm", gpus=64, nodes=8, inter="ib-ndr-400")
    forced = collective("all_reduce", [2**30], gpu="h100-sxm", gpus=64, nodes=8, inter="ib-ndr-400",
                        algorithm="collnet")
    assert auto[0]["algorithm"] != "collnet" and forced[0]["algorithm"] == "collnet"
    assert forced[0]["busbw_bytes_per_s"] > auto[0]["busbw_bytes_per_s"]
    with pytest.raises(ScenarioError, match="cannot run"):
        collective("all_reduce", [2**30], gpu="h100-sxm", gpus=64, nodes=8, inter="roce-400g", algorithm="collnet")
    row = build_inputs(Scenario(model="bert-large", seq_len=128, gpu="h100-sxm", gpus=16, nodes=2,
                                per_gpu_batch=8))[2]
    assert 0 < row["ll_max_busbw_bytes_per_s"] < float("inf")
