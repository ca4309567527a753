"""One CPU thread driving several GPUs (nccl-tests ``-g``): small collectives become launch-bound [issue 18].

Hand-worked: with ``g`` GPUs per thread each iteration takes ``max(t, g x nccl_thread_launch_s)``
(NVIDIA/nccl-tests issue 123: 33.7 us for a tiny 8-GPU all-reduce with -g 8 on DGX A100 = 8 x 4.2 us).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from gpusim.cli import main
from gpusim.errors import ScenarioError
from gpusim.model.comm import thread_bound_time_s
from gpusim.nccl_tests import parse_text
from gpusim.params import DEFAULT_PARAMS, PROVENANCE
from gpusim.simulation import collective

LAUNCH_S = DEFAULT_PARAMS.nccl_thread_launch_s


def test_the_default_is_the_published_8_gpu_time_over_8():
    assert LAUNCH_S == pytest.approx(33.7e-6 / 8, rel=0.01)
    assert "nccl-tests/issues/123" in PROVENANCE["nccl_thread_launch_s"]


def test_closed_form_floor():
    t = thread_bound_time_s(np.array([0.0, 1e-6, 20e-6, 1e-3]), 8, 4.2e-6)
    np.testing.assert_allclose(t, [0.0, 33.6e-6, 33.6e-6, 1e-3])  # one rank (0 s) stays 0
    np.testing.assert_allclose(thread_bound_time_s(np.array([1e-6]), 1, 4.2e-6), [4.2e-6])


def test_a_tiny_all_reduce_from_one_thread_costs_one_launch_per_gpu(db):
    one = collective("all_reduce", [8.0, 2.0**30], gpu="a100-sxm4-80gb", gpus=8, db=db)
    eight = collective("all_reduce", [8.0, 2.0**30], gpu="a100-sxm4-80gb", gpus=8, gpus_per_thread=8, db=db)
    assert one[0]["time_s"] < 8 * LAUNCH_S  # the GPUs alone would be faster than eight launches
    assert eight[0]["time_s"] == pytest.approx(8 * LAUNCH_S, rel=1e-12)
    assert eight[1]["time_s"] == pytest.approx(one[1]["time_s"], rel=1e-12)  # 1 GiB: the GPUs are the bottleneck
    four = collective("all_reduce", [8.0], gpu="a100-sxm4-80gb", gpus=8, gpus_per_thread=4, db=db)[0]
    assert four["time_s"] == pytest.approx(max(one[0]["time_s"], 4 * LAUNCH_S), rel=1e-12)


@pytest.mark.parametrize("g", [0, 9, 2.5, True])
def test_bad_gpus_per_thread_is_a_scenario_error(db, g):
    with pytest.raises(ScenarioError, match="gpus-per-thread"):
        collective("all_reduce", [1024.0], gpu="h100-sxm", gpus=8, gpus_per_thread=g, db=db)


def test_gpus_per_thread_counts_gpus_of_one_node(db):
    with pytest.raises(ScenarioError, match="1 to 8 GPUs"):
        collective("all_reduce", [1024.0], gpu="h100-sxm", gpus=16, nodes=2, gpus_per_thread=16, db=db)


def test_comm_flag_exits_2_with_the_fix(capsys):
    assert main(["comm", "--gpu", "h100-sxm", "--gpus", "8", "--gpus-per-thread", "9", "--bytes", "1KiB"]) == 2
    err = capsys.readouterr().err
    assert "1 to 8 GPUs" in err and "-g" in err


HEADER_G8 = """# nThread 1 nGpus 8 minBytes 8 maxBytes 1024 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1
#
# Using devices
""" + "".join(f"#  Rank  {i} Group  0 Pid   1 on     node0 device  {i} [0x{i}a] NVIDIA A100-SXM4-80GB\n"
              for i in range(8)) + """#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
        1024           256     float     sum      -1    40.00    0.03    0.04      0    40.00    0.03    0.04      0
"""


def test_nccl_tests_header_gives_gpus_per_thread_and_comm_uses_it(tmp_path, capsys):
    run = parse_text(HEADER_G8, "all_reduce_perf.txt")[0]
    assert run.gpus_per_thread == 8 and run.n_ranks == 8
    f = tmp_path / "all_reduce_perf.txt"
    f.write_text(HEADER_G8)
    assert main(["comm", "--gpu", "a100-sxm4-80gb", "--gpus", "8", "--measured", str(f), "--json"]) == 0
    row = json.loads(capsys.readouterr().out)  # one size: one object
    assert row["time_s"] == pytest.approx(8 * LAUNCH_S, rel=1e-12)
    # --gpus-per-thread overrides the file
    assert main(["comm", "--gpu", "a100-sxm4-80gb", "--gpus", "8", "--measured", str(f), "--gpus-per-thread", "1",
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["time_s"] < 8 * LAUNCH_S


def test_sweep_csv_column_sets_the_floor(tmp_path, db):
    from gpusim import validation_comm as vc

    head = ("system,source_id,source_url,collective,gpu,node,gpus,nodes,intra,intra_topology,inter,nics_per_node,"
            "gpus_per_thread,size_bytes,busbw_gbyte_per_s,held_out\n")
    f = tmp_path / "s.csv"
    f.write_text(head + "x,S,u,all_reduce,a100-sxm4-80gb,,8,1,,,,,8,1024,0.04,no\n"
                        "y,S,u,all_reduce,a100-sxm4-80gb,,8,1,,,,,,1024,0.04,no\n")
    x, y = vc.run(f, db=db)
    t_x = 1024 / (x.predicted_gbyte_per_s * 1e9 / 1.75)
    assert t_x == pytest.approx(8 * LAUNCH_S, rel=1e-9)
    assert y.predicted_gbyte_per_s > x.predicted_gbyte_per_s  # empty: one process per GPU
    f.write_text(head + "x,S,u,all_reduce,a100-sxm4-80gb,,8,1,,,,,two,1024,0.04,no\n")
    with pytest.raises(Exception, match="row 2"):
        vc.run(f, db=db)


def test_the_fit_models_a_g_run_with_the_same_floor():
    from gpusim.calibration import CollPoint, LevelFit, _coll_model

    lv = {"intra-node": LevelFit(busbw=200e9, hop=1e-6)}
    pts = [CollPoint("all_reduce", 1024.0, 8, 1, "intra-node", 1.0, 1.0, "x", g) for g in (1, 8)]
    one, eight = _coll_model(pts, lv, 0.0, DEFAULT_PARAMS)
    assert one < 8 * LAUNCH_S  # 14 hops of 1 us plus 1 KiB at 200 GB/s
    assert eight == pytest.approx(8 * LAUNCH_S, rel=1e-12)
