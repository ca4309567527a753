"""NVLS bandwidth per GPU generation: NCCL's nvlsEfficiency (Hopper 0.85, Blackwell 0.74) [issue 18].

Hand-worked: ``nvls_gain_frac`` (1.30) was measured on 8x H100, whose ring through the NVSwitch runs at NCCL's
18 links x 20.6 GB/s = 370.8 GB/s, so a 64 GiB NVLS all-reduce reaches 370.8 x 1.30 = 482.0 GB/s. On B200 the ring is
18 x 40.1 = 721.8 GB/s and the NVLS gain is 1.30 x 0.74 / 0.85 = 1.1318, so NVLS reaches 816.9 GB/s (not
721.8 x 1.30 = 938.3). The ring itself does not change.
"""

from __future__ import annotations

import numpy as np
import pytest

from gpusim.model import comm as C
from gpusim.params import DEFAULT_PARAMS, PROVENANCE
from gpusim.simulation import collective

BIG = 2.0**36  # 64 GiB: latency and pipeline fill are negligible next to the transfer


def busbw(gpu, db, algorithm="nvls", params=None):
    return collective("all_reduce", [BIG], gpu=gpu, gpus=8, db=db, algorithm=algorithm,
                      params=params)[0]["busbw_bytes_per_s"]


def test_defaults_are_nccls_table():
    assert DEFAULT_PARAMS.nvls_efficiency_frac == {"hopper": 0.85, "blackwell": 0.74}
    assert "nvlsEfficiency" in PROVENANCE["nvls_efficiency_frac"]


def test_hopper_keeps_the_measured_gain(db):
    assert busbw("h100-sxm", db) == pytest.approx(370.8e9 * 1.30, rel=0.003)


def test_blackwell_nvls_gain_is_scaled_by_the_efficiency_ratio(db):
    assert busbw("b200", db) == pytest.approx(721.8e9 * 1.30 * 0.74 / 0.85, rel=0.003)
    assert busbw("b200", db, algorithm="ring") == pytest.approx(721.8e9, rel=0.003)


def test_the_table_is_a_parameter(db):
    p = DEFAULT_PARAMS.replace(nvls_efficiency_frac={"hopper": 0.85, "blackwell": 0.85})
    assert busbw("b200", db, params=p) == pytest.approx(721.8e9 * 1.30, rel=0.003)


def test_kernel_reads_nvls_as_the_gain_factor():
    kw = dict(base_latency_s=0.0, nvls_gain_frac=1.3, nvls_latency_s=0.0, tree_busbw_frac=0.92,
              algorithm=C.ALGORITHMS["nvls"])
    s, n, bw = np.array([BIG]), 8.0, 100e9
    t_true, _ = C.collective_time_s(C.ALL_REDUCE, s, n, 1.0, bw, 0.0, np.inf, 0.0, True, **kw)
    t_half, _ = C.collective_time_s(C.ALL_REDUCE, s, n, 1.0, bw, 0.0, np.inf, 0.0, 0.5, **kw)
    t_mixed, _ = C.collective_time_s(C.ALL_REDUCE, np.array([BIG, BIG]), n, 1.0, bw, 0.0, np.inf, 0.0,
                                     np.array([1.0, 0.5]), **kw)
    f = 2 * 7 / 8
    fill = 2 * 16 * 8 * 128 * 1024  # two phases x 16 channels x 8 steps x 128 KiB chunks
    assert t_true[0] == pytest.approx(f * (BIG + fill) / (bw * 1.3))
    assert t_half[0] == pytest.approx(2.0 * t_true[0])
    assert t_mixed == pytest.approx([t_true[0], t_half[0]])


@pytest.mark.parametrize("ranks", [8, 72])
def test_nvls_pipeline_fill_is_one_loop_of_every_rank_in_and_out(ranks):
    """NCCL's NVLS loop moves one chunk per rank of the domain (all_reduce.h: loopSize = nChannels x nHeads x
    chunkSize): the fill is 2 x 16 channels x ranks x 128 KiB at 8 GiB (where NCCL keeps the largest chunk for both
    8 and 72 ranks: 8 GiB >= 32 x 16 x 72 x 128 KiB = 4.8 GB). On 8 GPUs it is the 2 x 16 x 8 x 128 KiB of before."""
    s, bw = 2.0**33, 100e9
    t, _ = C.collective_time_s(C.ALL_REDUCE, np.array([s]), float(ranks), 1.0, bw, 0.0, np.inf, 0.0, True,
                               base_latency_s=0.0, nvls_gain_frac=1.3, nvls_latency_s=0.0, tree_busbw_frac=0.92,
                               algorithm=C.ALGORITHMS["nvls"])
    f = 2 * (ranks - 1) / ranks
    assert t[0] == pytest.approx(f * (s + 2 * 16 * ranks * 131072) / (bw * 1.3))


def test_nvl72_rack_fill_makes_512mib_slower_than_8gib(db):
    """The 72-GPU fill (2 x 16 x 72 x 32 KiB = 75.5 MB at 512 MiB, where NCCL shrinks the chunk to 32 KiB; 302 MB of
    128 KiB chunks at 8 GiB) on top of the NVLS latency (3 + 23 us) and Blackwell's NVLS bandwidth
    (721.8 x 1.30 x 0.74 / 0.85 = 816.9 GB/s): busbw = f S / (26 us + f (S + fill) / 816.9 GB/s)."""
    sizes = [2.0**29, 2.0**33]
    out = collective("all_reduce", sizes, node="gb200-nvl72", gpus=72, nodes=18, db=db)
    f, peak, lat = 2 * 71 / 72, 721.8e9 * 1.30 * 0.74 / 0.85, 26e-6
    for o, s, chunk in zip(out, sizes, (32768, 131072)):
        assert o["algorithm"] == "nvls"
        expected = f * s / (lat + f * (s + 2 * 16 * 72 * chunk) / peak)
        assert o["busbw_bytes_per_s"] == pytest.approx(expected, rel=0.003)


def test_a_message_shorter_than_one_loop_fills_only_itself():
    """1 MiB on 8 ranks: NCCL shrinks the chunk to 16 KiB (1 MiB < 2 x 16 x 8 x 32 KiB), so one loop of the 16 channels
    is 16 x 8 x 16 KiB = 2 MiB, more than the message; the last (only) loop's chunk shrinks to the remainder
    (all_reduce.h lastChunkSize), so the message goes in and out once: fill 2 x 1 MiB, t = f x 3 S / (bw x 1.3)."""
    s, bw = 2.0**20, 100e9
    t, _ = C.collective_time_s(C.ALL_REDUCE, np.array([s]), 8.0, 1.0, bw, 0.0, np.inf, 0.0, True,
                               base_latency_s=0.0, nvls_gain_frac=1.3, nvls_latency_s=0.0, tree_busbw_frac=0.92,
                               algorithm=C.ALGORITHMS["nvls"])
    assert t[0] == pytest.approx(2 * 7 / 8 * 3 * s / (bw * 1.3))


@pytest.mark.parametrize("nodes, s, chunk", [
    (2, 2.0**33, 131072),   # 8 GiB on 2 nodes: NCCL's 128 KiB NVLS chunk
    (2, 2.0**23, 65536),    # 8 MiB < 4 x 128 ops x 128 KiB = 64 MiB: 64 KiB (not below 1 x 128 x 64 KiB = 8 MiB)
    (2, 2.0**22, 32768),    # 4 MiB < 8 MiB: 32 KiB
    (4, 2.0**33, 65536),    # from 4 nodes the NVLS-tree chunk is at most 64 KiB (NCCL_NVLSTREE_MAX_CHUNKSIZE unset)
])
def test_nvls_tree_fills_the_same_nvls_loop_inside_each_node(nodes, s, chunk):
    """NVLS-tree runs NCCL's NVLS kernel loop inside each node (all_reduce.h, NVLS_TREE: loopCount = nHeads x chunkCount
    per channel), so it pays the NVLS fill, 2 x min(16 channels x 8 ranks x chunk, S), with the chunk of NCCL's NVLS_TREE
    rule (enqueue.cc calcCollChunking), over the NVLS-tree bandwidth min(intra x 1.3, inter x f x 5/6 / (1 or 2))."""
    intra, inter = 370.8e9, 400e9
    n = 8.0 * nodes
    f = 2 * (n - 1) / n
    bw = min(intra * 1.3, inter * f * 5 / 6 / (1.0 if nodes <= 2 else 2.0))
    t, _ = C.collective_time_s(C.ALL_REDUCE, np.array([s]), n, float(nodes), intra, 0.0, inter, 0.0, True,
                               base_latency_s=0.0, nvls_gain_frac=1.3, nvls_latency_s=0.0, tree_busbw_frac=0.92,
                               algorithm=C.ALGORITHMS["nvls_tree"])
    lat = 2.0 * np.log2(nodes) * DEFAULT_PARAMS.nvls_tree_hop_s  # up and down the tree of nodes
    assert t[0] == pytest.approx(lat + f * (s + 2 * min(16 * 8 * chunk, s)) / bw)
