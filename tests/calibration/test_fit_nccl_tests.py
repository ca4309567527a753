"""nccl-tests output (text and -J JSON) as collective measurements for `gpusim fit`.

Fixtures are described in nccl_tests/README.md: one real DGX H100 all-reduce sweep and two synthetic files
with known bus bandwidth and latency.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from gpusim.calibration import fit, load_calibration
from gpusim.errors import CalibrationError
from gpusim.nccl_tests import looks_like_nccl_tests, parse_file, parse_json, parse_text

HERE = Path(__file__).parent / "nccl_tests"
DGX = HERE / "all_reduce_perf_dgx_h100.txt"
AG_JSON = HERE / "all_gather_perf_2nodes.json"
RS_OLD = HERE / "reduce_scatter-v100-pcie.log"


def test_dgx_text_table():
    (run,) = parse_file(DGX)
    assert run.collective == "all_reduce" and run.binary == "all_reduce_perf"
    assert run.n_ranks == 8 and run.n_nodes == 1 and run.level == "intra-node"
    assert run.device_names[0] == "NVIDIA H100 80GB HBM3" and run.nccl_version == "21903"
    assert len(run.rows) == 25
    first, last = run.rows[0], run.rows[-1]
    assert first.size_bytes == 1024 and first.time_s == pytest.approx(16.94e-6)  # out-of-place, not in-place
    assert last.size_bytes == 16 * 2**30 and last.busbw_bytes_per_s == pytest.approx(479.99e9, rel=1e-3)


@pytest.mark.timeout(120)
def test_dgx_fit_finds_the_bus_bandwidth_plateau(db, tmp_path):
    cal = fit([DGX], db=db)
    (run,) = parse_file(DGX)
    plateau = float(np.median([r.busbw_bytes_per_s for r in run.rows[-4:]]))  # 4-16 GiB: 473-480 GB/s
    got = cal.values["comm.intra-node.busbw_bytes_per_s"]
    assert abs(got / plateau - 1) < 0.05, (got, plateau)
    assert cal.std["comm.intra-node.busbw_bytes_per_s"] < 0.05 * got
    # the sweep crosses NCCL's protocols: two message-size regimes are kept and the large one goes to the model
    assert cal.report["collective_regimes"]["kept"]
    assert cal.params.busbw_override_bytes_per_s["intra-node"] == got
    assert cal.env.matched_gpu == "h100-sxm" and cal.env.n_ranks == 8
    # every size is reported, with the residuals by size
    assert len(cal.report["collective"]) == 25
    assert cal.report["collective_residuals_by_size"]
    assert cal.held_out_line() == "held-out DDP step error: none (the inputs have no multi-rank DDP steps to predict)"
    # a calibration from nccl-tests alone still describes the machine: 8 H100 with the measured fabric
    kw, _params, xdb = cal.apply({"model": "resnet50", "gpu": None, "node": None, "per_gpu_batch": 64}, db)
    assert kw["gpus"] == 8 and xdb.gpu(kw["gpu"]).peak_flop_per_s("bf16") == db.gpu("h100-sxm").peak_flop_per_s("bf16")
    path = cal.save(tmp_path / "cal.json")
    assert load_calibration(path).values == pytest.approx(cal.values)


@pytest.mark.timeout(120)
def test_json_two_nodes_is_an_inter_node_measurement(db):
    run = parse_file(AG_JSON)[0]
    assert run.collective == "all_gather" and run.n_ranks == 16 and run.n_nodes == 2 and run.level == "global"
    assert len(run.rows) == 12
    cal = fit([AG_JSON], db=db)
    assert cal.values["comm.inter-node.busbw_bytes_per_s"] == pytest.approx(45e9, rel=0.03)
    assert cal.values["comm.inter-node.hop_s"] == pytest.approx(6e-6, rel=0.1)
    assert cal.env.n_nodes == 2 and cal.env.ranks_per_node == 8
    kw, params, xdb = cal.apply({"model": "resnet50", "gpu": None, "node": None, "per_gpu_batch": 64}, db)
    assert kw["gpus"] == 16 and kw["nodes"] == 2
    assert params.busbw_override_bytes_per_s["inter-node"] == pytest.approx(45e9, rel=0.03)
    assert xdb.node(kw["node"]).nic_link in xdb.links


@pytest.mark.timeout(120)
def test_old_text_format_with_log_lines_named_by_its_file(db):
    (run,) = parse_file(RS_OLD)
    assert run.collective == "reduce_scatter" and run.n_ranks == 4 and run.n_nodes == 1
    assert len(run.rows) == 11  # the NCCL INFO lines inside the table are skipped
    assert run.device_names == ["Tesla V100-PCIE-32GB"] * 4
    cal = fit([RS_OLD], db=db)
    assert cal.env.matched_gpu == "v100-pcie-32gb"
    assert cal.values["comm.intra-node.busbw_bytes_per_s"] == pytest.approx(20e9, rel=0.03)
    # one group size: only the whole latency (base + 3 hops = 38 us in the generator) is identifiable
    assert cal.params.coll_base_latency_s + 3 * cal.values["comm.intra-node.hop_s"] == pytest.approx(38e-6, rel=0.05)


HEADER = """# Collective test starting: {binary}
# nThread 1 nGpus 2 minBytes 1024 maxBytes 4096 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0
#
# Using devices
#  Rank  0 Group  0 Pid   1000 on     host-a device  0 [0000:18:00] NVIDIA A100-SXM4-80GB
#  Rank  1 Group  0 Pid   1000 on     host-a device  1 [0000:2a:00] NVIDIA A100-SXM4-80GB
#
"""


def test_per_iteration_columns_and_wrong_results():
    text = HEADER.format(binary="broadcast_perf") + """\
#                                              out-of-place (+ per-iteration)                                in-place (+ per-iteration)
#       size         count      type   redop    root     time   algbw   busbw  #wrong    i_min    i_max    i_p99    i_cv%     time   algbw   busbw  #wrong    i_min    i_max    i_p99    i_cv%
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)     (us)     (us)      (%)     (us)  (GB/s)  (GB/s)             (us)     (us)     (us)      (%)
        1024           256     float    none       0    10.00    0.10    0.10       0     9.00    12.00    12.00     3.00    10.50    0.10    0.10       0     9.00    12.00    12.00     3.00
        2048           512     float    none       0    11.00    0.19    0.19       2    10.00    13.00    13.00     3.00    11.50    0.18    0.18       0    10.00    13.00    13.00     3.00
        4096          1024     float    none       0    12.00    0.34    0.34       0    11.00    14.00    14.00     3.00    12.50    0.33    0.33       0    11.00    14.00    14.00     3.00
"""
    (run,) = parse_text(text, "bcast.txt")
    assert run.collective == "broadcast" and run.n_ranks == 2
    assert [r.time_s for r in run.rows] == pytest.approx([10e-6, 11e-6, 12e-6])
    assert run.rows[1].wrong == 2  # the fit drops rows with wrong results


def test_unusable_or_unknown_tests_are_reported(tmp_path, db):
    text = HEADER.format(binary="gather_perf") + """\
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
        1024           128     float    none      -1    10.00    0.10    0.05      0    10.00    0.10    0.05      0
"""
    (run,) = parse_text(text, "x.txt")
    assert run.collective is None and run.binary == "gather_perf"
    # all-to-all is read as such (gpusim comm --measured compares it), though the fit does not use it
    (a2a,) = parse_text(text.replace("gather_perf", "alltoall_perf"), "y.txt")
    assert a2a.collective == "all_to_all"
    p = tmp_path / "a2a.txt"
    p.write_text(text)
    with_ar = fit([p, DGX], db=db)
    assert any("no formula in the model" in n for n in with_ar.notes)
    no_hint = text.replace("# Collective test starting: gather_perf\n", "")
    with pytest.raises(CalibrationError, match="cannot tell which nccl-tests binary"):
        parse_text(no_hint, "results.txt")
    with pytest.raises(CalibrationError, match="no nccl-tests results table"):
        parse_text("# just a comment\n", "empty.txt")


def test_json_variants_and_errors():
    doc = json.loads(AG_JSON.read_text())
    for r in doc["results"]:
        r["out_of_place"] = None  # trace-replay style: only in-place results
    run = parse_json(json.dumps(doc), "ag.json")
    assert len(run.rows) == 12 and run.rows[0].time_s == pytest.approx(doc["results"][0]["in_place"]["time"] * 1e-6)
    doc["args"] = []
    with pytest.raises(CalibrationError, match="cannot tell which nccl-tests binary"):
        parse_json(json.dumps(doc), "results.json")
    assert parse_json(json.dumps(doc), "all_gather_perf.json").collective == "all_gather"
    with pytest.raises(CalibrationError, match="no 'results' list"):
        parse_json('{"version": 2}', "x.json")
    with pytest.raises(CalibrationError, match="not valid JSON"):
        parse_json("{", "x.json")


def test_sniffing(tmp_path):
    assert looks_like_nccl_tests(DGX) and looks_like_nccl_tests(AG_JSON) and looks_like_nccl_tests(RS_OLD)
    p = tmp_path / "notes.txt"
    p.write_text("# size of my dataset\nhello\n")
    assert not looks_like_nccl_tests(p)
    (tmp_path / "other.json").write_text('{"results": []}')
    assert not looks_like_nccl_tests(tmp_path / "other.json")
