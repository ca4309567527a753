"""ModelParams: the efficiencies and overheads the model cannot read off a datasheet.

Each has a default taken from a published measurement where one exists (``PROVENANCE`` names it) and is
what calibration (``gpusim fit``) replaces with the user's own measurements. Fractions end in ``_frac``,
times in ``_s``; dictionaries are keyed by precision name or path class.

Path classes (keys of ``busbw_eff_frac``) name how two GPUs or two nodes exchange data:
``nvswitch``, ``nvlink-mesh``, ``nvlink-bridge``, ``pcie-switch`` (PIX/PXB), ``pcie-host`` (PHB/NODE),
``pcie-cross-socket`` (SYS), ``host-staged`` (no peer-to-peer), and the network kinds ``infiniband``,
``roce``, ``ethernet``, ``cloud-fabric``. The fraction multiplies the link's per-direction bandwidth to
give the bus bandwidth (nccl-tests definition) a large all-reduce achieves over that path.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import NamedTuple

from pydantic import BaseModel, ConfigDict, Field, field_validator

from gpusim import units
from gpusim.fsutil import atomic_write_text

PATH_CLASSES = ("nvswitch", "nvlink-mesh", "nvlink-bridge", "pcie-switch", "pcie-host", "pcie-cross-socket",
                "host-staged", "infiniband", "roce", "ethernet", "cloud-fabric")

class ShmSweep(NamedTuple):
    """[issue 18] One published large-message NCCL all-reduce over the SHM transport (no GPU peer-to-peer)."""

    busbw_gbyte_per_s: float  #: the sweep's bus bandwidth at its largest sizes
    pcie_link: str  #: the hwdb link id of the GPUs' PCIe slot (its per-direction bandwidth is the ratio's base)
    source: str


#: [issue 18] Published large-message all-reduce bus bandwidths of NCCL's SHM transport (every transfer staged through
#: host memory, the path class ``host-staged``). The default ``busbw_eff_frac["host-staged"]`` is the median of
#: ``busbw / the PCIe link's per-direction bandwidth``, rounded to two digits (a test recomputes it from hwdb), one
#: entry per published sweep (two sweeps of one machine count twice; one per machine, each machine's median, gives
#: 0.41). None of these systems is in ``validation/``. Lambda's host-staged rows test the figure, though no longer
#: blind: their figures were computed at 0.31, 0.36 and 0.40 before the stop-38 sweeps were settled
#: (validation/README.md says so).
HOST_STAGED_SHM_ALL_REDUCE: tuple[ShmSweep, ...] = (
    ShmSweep(4.00, "pcie3-x16", "2x RTX 2080 Ti, PCIe 3.0 x16 behind one switch, peer-to-peer not supported (topo "
                                "-p2p NS), 128 MiB-1 GiB: Anthony-Hoo/Anthony-Hoo.github.io posts/AutoDL_Multi-GPU_"
                                "Interconnection_Test.md @37e805e8"),
    ShmSweep(3.86, "pcie4-x16", "2x A40 across a NODE boundary, NCCL_P2P_DISABLE=1, NCCL 2.16.2, 1-8 GiB, 'Avg bus "
                                "bandwidth: 3.85845': eugenesiow/LLM-Insights infrastructure/hardware/README.md @5aa5513a"),
    ShmSweep(5.20, "pcie4-x16", "4 GPUs of a DGX A100 640GB with NCCL_P2P_DISABLE=1 (NVSwitch unused), NCCL 2.16.2, "
                                "1-8 GiB: the same file"),
    ShmSweep(22.93, "pcie5-x16", "4 GPUs of a DGX H100 with NVLink disabled the same way, 1-8 GiB, 'Avg bus bandwidth: "
                                 "22.9255': the same file"),
    ShmSweep(37.64, "pcie5-x16", "4x RTX PRO 6000 Blackwell on one socket of an EPYC 9575F, PCIe 5.0, stock NCCL 2.29.7 "
                                 "'SHM/direct/direct', 128 MiB: NVIDIA/nccl pull request 2080"),
    # [issue 18, stop 38] five more, found by a search for every published SHM sweep (not for ones near a value)
    ShmSweep(1.35, "pcie4-x16", "4x A40 (GPUs 0,1 and 6,7 across a SYS boundary) with NCCL_P2P_DISABLE=1, -g 4, NCCL "
                                "2.16.2, 8 GiB (1.44 at 1 GiB): eugenesiow/LLM-Insights infrastructure/hardware/"
                                "README.md @5aa5513a, the file of the 2x A40 sweep above"),
    ShmSweep(28.0, "pcie5-x16", "8x GeForce RTX 5090 (no peer-to-peer) on 2x Xeon Platinum 8480+, ACS and SNC off, "
                                "driver 570.124.04, 1-8 GiB: '8 GPU max performance: bwbus 28GB/s', NVIDIA/nccl issue "
                                "1639 (the maintainer: 'On PCI systems, the performance you get is usually determined "
                                "by the bandwidth your CPU and memory can deliver')"),
    ShmSweep(35.0, "pcie5-x16", "4 of the same 8 RTX 5090: '4GPU max performance: bwbus 35GB/s', NVIDIA/nccl issue 1639"),
    ShmSweep(14.45, "pcie4-x16", "8x GeForce RTX 4090, stock driver (no peer-to-peer), 2x EPYC 7542, every pair SYS, "
                                 "128 MiB out of place (15.04 at 32 MiB): https://blog.chlc.cc/p/rtx4090-gpudirect-p2p-"
                                 "unlocked (2025-02-07; the row read by a helper, the system by me)"),
    ShmSweep(18.0, "pcie4-x16", "4x GeForce RTX 4090, no PCIe switch, one NUMA node: 'compared to SHM, got 18->22 "
                                "BUSBW' with peer-to-peer unlocked, NVIDIA/nccl issue 1603 (read by a helper)"),
)

_F = Field  # short alias for the many fields below


class ModelParams(BaseModel):
    """Fittable parameters of the analytical model (float64 SI units)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # --- compute ---------------------------------------------------------------------------------
    matmul_eff_frac: dict[str, float] = _F(
        default={"fp32": 0.75, "tf32": 0.70, "amp_fp16": 0.70, "amp_bf16": 0.70, "bf16": 0.70, "fp8": 0.60},
        description="achievable fraction of the dense datasheet peak for the matrix multiplies of training, per "
                    "precision (below the best-shape ceiling: training shapes are not the best shapes)")
    layer_kind_eff_frac: dict[str, float] = _F(
        default={"matmul": 1.0, "conv": 0.75, "attention": 0.60, "embedding": 1.0, "other": 0.8},
        description="compute-bound layer kinds relative to a large GEMM (convolutions and attention reach less)")
    gemm_ceiling_frac: float = _F(default=0.78, gt=0, le=1,
                                  description="best-shape matmul throughput / datasheet peak for a GPU without a "
                                              "measured achievable-matmul figure in the database")
    mxfp8_gemm_rate_frac: float = _F(default=0.951, gt=0, le=1,
                                     description="[issue 17] an MXFP8 (1x32 block-scaled) GEMM kernel's rate / a "
                                                 "per-tensor FP8 GEMM's on the same shapes")
    nvfp4_gemm_speedup: float = _F(default=1.810, ge=1, le=4,
                                   description="[issue 17] an NVFP4 GEMM kernel's rate over a per-tensor FP8 GEMM's on "
                                               "the same shapes (at most the GPU's datasheet FP4 / FP8 ratio: "
                                               "gpusim.model.fp8.nvfp4_ceiling_flop_per_s)")
    gemm_ceiling_flop_per_s: dict[str, float] = _F(
        default={}, description="measured best-shape matmul FLOP/s per datasheet precision key (fp16, bf16, fp8 ...) "
                                "that replaces the database's achievable-matmul figure (set by calibration)")
    gemm_k_half_steps: float = _F(default=64.0, ge=0, le=100000,
                                  description="GEMM reduction length at which a tile reaches half its steady rate "
                                              "(prologue, epilogue, pipeline fill): efficiency k / (k + k_half)")
    gemm_epilogue_overlap_archs: tuple[str, ...] = _F(
        default=("hopper", "blackwell"),
        description="GPU architectures whose GEMM kernels overlap a tile's epilogue (output write, accumulation) with "
                    "the next tile's main loop; on the others the output's bytes follow the FLOPs (gpusim.model.gemm)")
    flash_fwd_eff_frac: float = _F(default=0.80, gt=0, le=1,
                                   description="FlashAttention forward FLOP rate / the GPU's matmul ceiling")
    flash_bwd_eff_frac: float = _F(default=0.70, gt=0, le=1,
                                   description="FlashAttention backward FLOP rate / the GPU's matmul ceiling")
    # [issue 17] head dimension: a fused attention kernel's rate at head dim 64 against 128 (64 < d < 128 interpolated)
    flash_hdim64_fwd_frac: float = _F(default=497.0 / 648.0, gt=0, le=1,
                                      description="the GPU's native fused attention's forward rate at head dim 64 / "
                                                  "at head dim 128")
    flash_hdim64_bwd_frac: float = _F(default=474.0 / 561.0, gt=0, le=1,
                                      description="the native fused attention's backward rate at head dim 64 / 128")
    flash2_hdim64_fwd_frac: float = _F(default=324.0 / 370.0, gt=0, le=1,
                                       description="FlashAttention-2's forward rate at head dim 64 / 128 (flash2 "
                                                   "and triton rows)")
    flash2_hdim64_bwd_frac: float = _F(default=291.0 / 322.0, gt=0, le=1,
                                       description="FlashAttention-2's backward rate at head dim 64 / 128")
    # [issue 17] a causal fused attention kernel's rate by sequence length (gpusim.model.llm.causal_rate_frac)
    flash_causal_seq_tokens: list[float] = _F(
        default=[512.0, 1024.0, 2048.0, 4096.0, 8192.0, 16384.0],
        description="sequence lengths (tokens per kernel call) of the flash_causal_*_rate_frac tables")
    flash_causal_fwd_rate_frac: dict[str, list[float]] = _F(
        default={"fa2": [v / 370.0 for v in (191.0, 260.0, 298.0, 319.0, 333.0, 335.0)],
                 "hopper": [v / 648.0 for v in (292.0, 423.0, 521.0, 579.0, 602.0, 616.0)],
                 "blackwell": [v / 906.0 for v in (501.0, 501.0, 657.0, 770.0, 838.0, 872.0)]},
        description="a causal fused kernel's forward rate (FLOPs counting the causal half) at each length of "
                    "flash_causal_seq_tokens / the same kernel's unmasked rate at 16K tokens, per kernel family (fa2: "
                    "FlashAttention-2, Triton, the native kernel up to Ada; hopper, blackwell: the native kernels)")
    flash_causal_bwd_rate_frac: dict[str, list[float]] = _F(
        default={"fa2": [v / 322.0 * 287.1 / 290.6 for v in (214.0, 260.0, 291.0, 310.0, 318.0, 322.0)],
                 "hopper": [v / 561.0 * 531.6 / 553.9 for v in (316.0, 424.0, 501.0, 542.0, 559.0, 561.0)],
                 "blackwell": [v / 561.0 * 1208.6 / 1359.8 for v in (316.0, 424.0, 501.0, 542.0, 559.0, 561.0)]},
        description="the same for the backward pass")
    flash_block_tokens: float = _F(default=128.0, ge=16, le=1024,
                                   description="[issue 17] queries (and keys) per tile of a fused attention kernel: a "
                                               "sliding window or chunk costs the tiles it touches "
                                               "(gpusim.model.llm.attention_tile_frac)")
    # [issue 18] the attention kernel a run uses (Strategy.attention): FlashAttention-2 on the GPU generations
    # after the one it was written for, and the Triton FlashAttention of 2022-23 (gpusim.rows.attention_kernel_fields)
    flash2_slow_archs: tuple[str, ...] = _F(
        default=("hopper", "blackwell"),
        description="GPU architectures whose native fused attention kernels (TMA, wgmma / tcgen05) FlashAttention-2 "
                    "does not use: there it runs flash2_next_gen_slowdown times slower than the native kernel")
    flash2_next_gen_slowdown: float = _F(default=1.75, ge=1, le=10,
                                         description="time of FlashAttention-2 / time of the GPU's native fused "
                                                     "attention kernel, on flash2_slow_archs")
    flash_triton_fwd_slowdown: float = _F(default=1.4, ge=1, le=10,
                                          description="forward time of the Triton FlashAttention / FlashAttention-2's")
    flash_triton_bwd_slowdown: float = _F(default=2.0, ge=1, le=10,
                                          description="backward time of the Triton FlashAttention / "
                                                      "FlashAttention-2's")
    mem_eff_frac: float = _F(default=0.70, gt=0, le=1,
                             description="achievable fraction of memory bandwidth for streaming (elementwise) kernels")
    kernel_tail_s: float = _F(default=5e-6, ge=0, le=1e-3,
                              description="GPU time per kernel beyond its roofline time (launch latency, ramp-up and tail "
                                          "of a grid that does not fill the GPU)")
    launch_cpu_s: float = _F(default=13.48e-6, ge=0, le=1e-3,
                             description="CPU time to dispatch one operator in eager PyTorch (Python + dispatcher + launch)")
    step_overhead_s: float = _F(default=1e-3, ge=0, le=1.0,
                                description="fixed CPU work per optimizer step (zero_grad, loader next(), bookkeeping)")
    optimizer_kernels: float = _F(default=10.0, ge=0, le=100000,
                                  description="kernels of one (foreach/fused) optimizer step")

    # --- communication ---------------------------------------------------------------------------
    busbw_eff_frac: dict[str, float] = _F(
        default={"nvswitch": 0.82, "nvlink-mesh": 0.80, "nvlink-bridge": 0.40, "pcie-switch": 0.80,
                 "pcie-host": 0.65, "pcie-cross-socket": 0.40, "host-staged": 0.40,
                 "infiniband": 0.90, "roce": 0.85, "ethernet": 0.60, "cloud-fabric": 0.75},
        description="large-message all-reduce bus bandwidth / per-direction link bandwidth, per path class")
    nvls_gain_frac: float = _F(default=1.30, ge=1.0, le=3.0,
                               description="NVLink SHARP all-reduce bus bandwidth / ring bus bandwidth on NVSwitch gen 3+")
    nvls_latency_s: float = _F(default=23e-6, ge=0, le=1e-2,
                               description="NVLS all-reduce latency inside an NVSwitch domain (before its pipeline fill)")
    coll_base_latency_s: float = _F(default=3e-6, ge=0, le=1e-2,
                                    description="per-call cost of one collective (kernel launch, enqueue) beyond "
                                                "NCCL's per-algorithm base latency")
    tree_busbw_frac: float = _F(default=0.92, gt=0, le=1.0,
                                description="tree all-reduce bus bandwidth / ring bus bandwidth across nodes")
    nccl_base_latency_s: dict[str, list[float]] = _F(
        default={"ring": [6.6e-6, 14.0e-6, 8.4e-6], "tree": [6.8e-6, 14.0e-6, 0.0]},
        description="base latency of one collective per algorithm, per protocol (LL, LL128, Simple)")
    nccl_hop_latency_s: dict[str, list[float]] = _F(
        default={"intra-ring": [0.6e-6, 1.9e-6, 3.4e-6], "intra-tree": [0.6e-6, 1.25e-6, 28e-6],
                 "inter-ring": [2.7e-6, 4.0e-6, 14.0e-6], "inter-tree": [5.0e-6, 8.5e-6, 28e-6]},
        description="per-hop latency per level and algorithm, per protocol (LL, LL128, Simple); the difference to the "
                    "LL ring figure is added to the link's own latency")
    proto_busbw_frac: dict[str, list[float]] = _F(
        default={"ring": [0.5, 0.92, 1.0], "tree": [0.263158, 120.0 / 128.0, 1.0]},  # 1/3.8 to 6 digits
        description="bus bandwidth of each protocol (LL, LL128, Simple) / the Simple protocol's, per algorithm")
    ll_max_busbw_bytes_per_s: dict[str, list[float]] = _F(
        default={"volta": [39e9, 39e9, 20.4e9], "ampere": [87.7e9, 22.5e9, 19e9], "hopper": [141e9, 45e9, 35e9],
                 "blackwell": [282e9, 90e9, 70e9]},
        description="largest LL-protocol bus bandwidth per GPU architecture, for 1, 2 and more nodes (NVIDIA GPUs; "
                    "other architectures are not capped). Only the one-node column is read: across nodes NCCL takes "
                    "the cap by the host CPU's vendor (nccl_ll_max_multi_node_busbw_bytes_per_s) [issue 18]")
    nccl_ll_max_multi_node_busbw_bytes_per_s: dict[str, list[float]] = _F(
        default={"intel": [39e9, 20.4e9], "amd": [22.5e9, 19e9], "other": [39e9, 20.4e9]},
        description="[issue 18] NCCL's LL bus-bandwidth cap for a communicator across 2 and more than 2 nodes, by the "
                    "host CPU's vendor (NVIDIA GPUs; RCCL applies none)")
    nccl_net_overhead_s: dict[str, float] = _F(
        default={"intel": 1e-6, "amd": 2e-6, "other": 1e-6},
        description="[issue 18] NCCL's network post overhead by the host CPU's vendor: the least time of every step of "
                    "a ring that crosses nodes (LL and LL128; Simple pays nccl_net_overhead_simple_mult times it)")
    nccl_net_overhead_simple_mult: float = _F(default=3.0, ge=1.0, le=10.0,
                                              description="[issue 18] the Simple protocol's network post overhead / "
                                                          "LL's")
    ll128_compute_capabilities: list[str] = _F(
        default=["7.0", "8.0", "9.0", "10.0", "12.0"],
        description="NVIDIA compute capabilities on which NCCL enables the LL128 protocol by default (and only over "
                    "NVLink inside the node); elsewhere it runs LL and Simple only")
    ll128_amd_architectures: list[str] = _F(
        default=["cdna2"], description="AMD architectures on which RCCL enables LL128 by default")
    nvls_channels: float = _F(default=16.0, ge=1, le=64, description="channels (SMs) an NVLS all-reduce runs on")
    nccl_steps: float = _F(default=8.0, ge=1, le=64,
                           description="slots of a connection's buffer (NCCL_STEPS); no longer read by the model (since "
                                       "issue 18 the NVLS fill counts one chunk per rank of the NVLS domain, 8 on 8 "
                                       "GPUs), kept so that calibration files that carry it still load")
    nvls_chunk_bytes: float = _F(default=128.0 * units.KIB, gt=0, description="largest NVLS chunk")
    nvls_tree_hop_s: float = _F(default=14e-6, ge=0, le=1e-2,
                                description="NVLS-tree: per network hop beyond the link latency")
    collnet_latency_s: float = _F(default=30e-6, ge=0, le=1e-2,
                                  description="CollNet (InfiniBand SHARP) latency across the network")
    collnet_busbw_frac: float = _F(default=0.9, gt=0, le=1.0,
                                   description="CollNet bus bandwidth / twice the ring's inter-node bus bandwidth")
    # --- [issue 18] collectives per GPU generation and fabric (NCCL's topology and tuner facts) ----------
    nccl_nvlink_gbyte_per_s_per_link: dict[str, float] = _F(
        default={"6.0": 18.0, "7.0": 20.0, "8.0": 20.0, "8.6": 12.0, "9.0": 20.6, "10.0": 40.1},
        description="bandwidth NCCL's topology gives one NVLink link, by the GPU's compute capability (the largest "
                    "key at or below it; 8.6 only by exact match, as in NCCL): a ring through an NVSwitch gets "
                    "links_per_gpu x this (GB/s, 1e9 bytes/s)")
    nvls_tree_busbw_frac: float = _F(default=5.0 / 6.0, gt=0, le=1.0,
                                     description="NVLS-tree across nodes: algorithm bandwidth / the network's per-node "
                                                 "bandwidth at which it moves its bytes (NCCL's 5/6 for NVLS and NVLS-tree)")
    nvls_efficiency_frac: dict[str, float] = _F(
        default={"hopper": 0.85, "blackwell": 0.74},
        description="NCCL's NVLS bandwidth efficiency per GPU architecture (its tuner's nvlsEfficiency); nvls_gain_frac "
                    "was measured on Hopper, so another generation's NVLS gain over the ring is nvls_gain_frac x its "
                    "efficiency / Hopper's (an architecture not listed keeps Hopper's)")
    a2a_intra_busbw_frac: float = _F(default=0.896, gt=0, le=1,
                                     description="[issue 17] an all-to-all's bus bandwidth inside a node (NCCL's "
                                                 "point-to-point kernels, one flow per peer) / the all-reduce ring's "
                                                 "on the same links")
    xgmi_link_eff_frac: float = _F(default=0.75, gt=0, le=1,
                                   description="usable fraction of an AMD Infinity Fabric (xGMI) link's rated "
                                               "bandwidth (CRC and protocol overhead): a ring over a full xGMI mesh "
                                               "gets peers x per-link x this (replaces busbw_eff_frac['nvlink-mesh'])")
    nccl_thread_launch_s: float = _F(default=4.2e-6, ge=0, le=1e-3,
                                     description="CPU time for one thread to launch one GPU's part of a grouped "
                                                 "collective: a thread driving g GPUs (nccl-tests -g g) cannot start "
                                                 "collectives faster than one per g x this")
    busbw_override_bytes_per_s: dict[str, float] = _F(
        default={}, description="measured bus bandwidth per level ('intra-node', 'inter-node') that replaces "
                                "link x efficiency (set by calibration)")
    latency_override_s: dict[str, float] = _F(
        default={}, description="measured per-hop latency per level ('intra-node', 'inter-node') (set by calibration)")

    # --- overlap and synchronisation -------------------------------------------------------------
    overlap_frac: float = _F(default=0.90, ge=0, le=1,
                             description="fraction of the backward pass during which gradient communication can run")
    overlap_slowdown_frac: float = _F(default=0.50, ge=0, le=1,
                                      description="compute slowdown per unit of overlapped communication time "
                                                  "(communication kernels take SMs and memory bandwidth)")
    tp_overlap_frac: float = _F(default=0.0, ge=0, le=1,
                                description="fraction of tensor-parallel communication hidden under GEMMs "
                                            "(0: Megatron-LM without Transformer Engine's communication overlap)")
    ep_a2a_overlap_frac: float = _F(default=0.0, ge=0, le=1,
                                    description="fraction of the MoE dispatch/combine all-to-alls hidden under another "
                                                "micro-batch's compute (0: Megatron-Core's default, no A2A overlap)")
    ep_comm_sms: float = _F(default=20.0, ge=0, le=1024,
                            description="SMs the expert-parallel communication kernels hold while they run under "
                                        "another micro-batch's compute (ep_overlap 1f1b / dualpipe): that compute "
                                        "runs on the rest")
    pp_p2p_overlap_frac: float = _F(default=0.0, ge=0, le=1,
                                    description="fraction of the steady-state pipeline sends hidden under compute "
                                                "where the schedule does not overlap them itself (1F1B with vp = 1, "
                                                "or Strategy.pp_p2p_overlap off); 0: they block the schedule")
    pp_p2p_sms: float = _F(default=4.0, ge=0, le=1024,
                           description="[issue 17] SMs the NCCL send/receive kernels of one pipeline stage hold while "
                                       "they run beside its compute (overlap_p2p_comm): that compute runs on the rest")
    jitter_frac: float = _F(default=0.01, ge=0, le=1,
                            description="coefficient of variation of one rank's step time (clocks, OS noise)")
    slowest_gpu_speed_frac: float = _F(default=1.0, gt=0, le=1,
                                       description="speed of the slowest GPU relative to its datasheet (throttling, "
                                                   "a mixed or older card): every rank waits for it")
    dp_gil_frac: float = _F(default=1.0, ge=0, le=1,
                            description="DataParallel: fraction of each extra replica's forward dispatch serialised "
                                        "by the GIL (its forward replicas run in Python threads)")
    dp_replicate_s: float = _F(default=10e-6, ge=0, le=1e-3,
                               description="DataParallel: CPU time to replicate one module (about one per forward "
                                           "kernel) to one more GPU, paid every forward")

    # --- data pipeline ---------------------------------------------------------------------------
    h2d_pinned_eff_frac: float = _F(default=0.80, gt=0, le=1,
                                    description="host-to-device copy from pinned memory / PCIe per-direction bandwidth")
    h2d_pageable_eff_frac: float = _F(default=0.45, gt=0, le=1,
                                      description="host-to-device copy from pageable memory / PCIe per-direction bandwidth")
    loader_core_eff_frac: float = _F(default=0.90, gt=0, le=1,
                                     description="useful fraction of a loader worker's core (IPC, collation)")

    cpu_optimizer_bytes_per_s: float = _F(default=15e9, gt=0,
                                          description="CPU memory traffic an offloaded optimizer step sustains per GPU "
                                                      "(vectorised CPU Adam on a node's cores, shared by its GPUs)")

    # --- memory ----------------------------------------------------------------------------------
    framework_overhead_bytes: float = _F(default=1.0 * units.GIB, ge=0,
                                         description="CUDA context, cuBLAS/cuDNN workspaces: not available to tensors")
    comm_buffer_bytes: float = _F(default=0.5 * units.GIB, ge=0,
                                  description="NCCL buffers when more than one GPU")
    fragmentation_frac: float = _F(default=0.10, ge=0, le=1,
                                   description="allocator fragmentation as a fraction of activation memory")
    # [issue 17] (h17ceiling) CPU launch time of one transformer layer (gpusim.model.compute.layer_cpu_s)
    te_layer_cpu_fwd_s: float = _F(default=125.2e-6, ge=0, le=1.0,
                                   description="CPU time to launch one Megatron-Core + Transformer Engine layer's forward "
                                               "pass (one micro-batch) on an x86 DGX host")
    te_layer_cpu_bwd_s: float = _F(default=503.4e-6, ge=0, le=1.0,
                                   description="the same for its backward pass")
    te_layer_cpu_fp8_mult: float = _F(default=1.365, ge=1.0, le=10.0,
                                      description="a layer's CPU launch time in FP8 / in BF16 (TE's quantisation "
                                                  "bookkeeping)")
    # [issue 17] CPU time of Transformer Engine's CuTe DSL fused grouped MLP (gpusim.model.experts.fused_mlp_cpu_s)
    te_fused_moe_mlp_cpu_fwd_s: float = _F(default=436.2e-6, ge=0, le=1.0,
                                           description="CPU time of one fused grouped-MLP forward (64 local experts) on "
                                                       "an x86 DGX host")
    te_fused_moe_mlp_cpu_bwd_s: float = _F(default=763.4e-6, ge=0, le=1.0,
                                           description="the same for its backward pass")
    moe_expert_item_cpu_s: float = _F(default=2.0e-6, ge=0, le=1e-3,
                                      description="[stop 52] CPU time of one Python / C++ bookkeeping item of an MoE "
                                                  "layer's per-expert work on an x86 host (a view, an allocation, a "
                                                  "saved-tensor entry, a gradient hook: gpusim.model.experts."
                                                  "expert_items_cpu_s)")
    # [issue 17] (h17ceiling) memory a fit must leave free beyond the modelled use (gpusim.model.memory.headroom_bytes)
    nccl_communicator_bytes: float = _F(default=688e6, ge=0,
                                        description="GPU memory of each NCCL communicator a rank holds beyond the first "
                                                    "(comm_buffer_bytes counts one): the default memory headroom of a "
                                                    "layout that talks in several parallel groups")
    memory_headroom_bytes: float = _F(default=0.0, ge=0,
                                      description="memory every configuration must leave free on top of its "
                                                  "communicators' (--memory-headroom replaces both)")
    memory_headroom_frac: float = _F(default=0.0, ge=0, lt=1,
                                     description="the same as a fraction of the GPU's memory (the larger applies)")

    @field_validator("nccl_net_overhead_s", "nccl_ll_max_multi_node_busbw_bytes_per_s")
    @classmethod
    def _per_host_cpu(cls, v: dict, info):
        """[issue 18] Keys are host CPU vendors as NCCL's tuner tells them apart; a file that names only some keeps
        NCCL's figures for the others. Overheads: 0-1 ms; LL caps: two non-negative bytes/s (2 nodes, more)."""
        default = cls.model_fields[info.field_name].default
        bad = sorted(set(v) - set(default))
        if bad:
            raise ValueError(f"unknown host CPU {', '.join(map(repr, bad))}; one of {', '.join(default)}")
        for k, x in v.items():
            if info.field_name == "nccl_net_overhead_s":
                if not 0.0 <= float(x) <= 1e-3:
                    raise ValueError(f"{k}: {x} s is outside 0 to 1e-3 s (NCCL's figures are a few microseconds)")
            elif len(x) != 2 or any(float(c) < 0 for c in x):
                raise ValueError(f"{k}: give two non-negative bus bandwidths in bytes/s (2 nodes, more than 2), "
                                 f"not {x!r}")
        return {**default, **v}

    # --- helpers ---------------------------------------------------------------------------------
    def eff(self, precision: str) -> float:
        if precision == "mxfp8" and precision not in self.matmul_eff_frac:  # [issue 12] the FP8 tensor-core path
            precision = "fp8"
        if precision == "nvfp4" and precision not in self.matmul_eff_frac:  # [issue 17] the FP8 share of the FP4
            precision = "fp8"  # peak (gpusim.rows.matmul_cap_frac holds it to the FP4 kernels' rate)
        return self.matmul_eff_frac[precision]

    def replace(self, **changes) -> ModelParams:
        return self.model_copy(update=changes)

    def to_json_file(self, path: str | os.PathLike) -> None:
        """Write atomically (temp file + rename): a crash never leaves half a file."""
        atomic_write_text(path, self.model_dump_json(indent=2))

    @classmethod
    def from_json_file(cls, path: str | os.PathLike) -> ModelParams:
        return cls.model_validate(json.loads(Path(path).read_text()))


#: Where each default comes from (shown by `gpusim predict --explain` and the app).
PROVENANCE: dict[str, str] = {
    "matmul_eff_frac": "ceiling from 'Maximum achievable matmul FLOPS' (stas00/ml-engineering, "
                       "compute/accelerator/README.md): H100 SXM bf16 794.5 of 989.5 TFLOP/s = 0.80, fp8 1402.6 of "
                       "1979 = 0.71, A100 SXM bf16 271.2 of 312 = 0.87 at the best shapes; the defaults take 7/8 of "
                       "that ceiling for the smaller shapes of real layers, a value chosen with the published "
                       "single-GPU training rows of shared/validation in view (disclosed in `gpusim validate`'s "
                       "README section). Calibrate for your models.",
    "mxfp8_gemm_rate_frac": "[issue 17] NVIDIA/TransformerEngine docs/examples/gemm_profiling/gemm_profiling.rst "
                            "@8f2e63578e103ce1d41503102f47504c129b94d2, B300 with the operands pre-quantised (GEMM "
                            "kernels alone), the 12 GEMMs of one layer of its 5B config: FP8 current scaling 6.812 ms "
                            "against MXFP8 7.161 ms per layer, 6.812 / 7.161 = 0.951 (the block scales the kernel loads "
                            "and applies per 32 elements of K). The three MXFP8 pre-quantised rows of "
                            "validation/te_gemm_profile.csv are therefore used for this default (gpusim validate says "
                            "so). A second, smaller figure: marin-community/marin issue #7282 (GB200, cuDNN block-scaled "
                            "dot under XLA) measured GEMM-only MXFP8 at 1.33x BF16 against per-tensor FP8's 1.35x "
                            "(0.985)",
    "nvfp4_gemm_speedup": "[issue 17] NVIDIA/TransformerEngine docs/examples/gemm_profiling/gemm_profiling.rst "
                          "@8f2e63578e103ce1d41503102f47504c129b94d2, B300 with the operands pre-quantised (GEMM kernels "
                          "alone), the 12 GEMMs of one layer of its 5B config: FP8 current scaling 6.812 ms against "
                          "NVFP4 3.764 ms per layer, 6.812 / 3.764 = 1.810, where hwdb's B300 datasheet figures give "
                          "FP4 / FP8 = 13,125 / 4,500 = 2.917 (the guide: 'well short of the theoretical 2-3x from the "
                          "hardware spec'). Carried to the other Blackwell parts as a kernel-rate ratio against their "
                          "own FP8 kernels, as mxfp8_gemm_rate_frac is, capped by their datasheet ratio (B200 / GB200: "
                          "2.0): the alternative, the same share of each part's datasheet ratio (0.62), would give "
                          "B200 / GB200 FP4 kernels 1.24x their FP8 ones; the choice between the two was made with the "
                          "four NVFP4 rows of Megatron-Bridge's 26.02 table in view (validation/README.md says so). The "
                          "three NVFP4 pre-quantised rows of validation/te_gemm_profile.csv are therefore used for this "
                          "default; its NVFP4 autocast rows (kernels and quantisation) test the cast model",
    "gemm_ceiling_frac": "median of the efficiency column (measured best-shape matmul / datasheet peak) of the "
                         "STAS_MAMF rows (stas00/ml-engineering MAMF table: NVIDIA bf16 0.73-0.87, fp8 0.71-0.78); "
                         "used only for GPUs without their own achievable_matmul_tflop_per_s in hwdb",
    "gemm_k_half_steps": "engineering estimate (a tile's prologue and epilogue cost about one 64-deep k-block of "
                         "its main loop); the wave and tile quantisation it multiplies follow NVIDIA's 'Matrix "
                         "Multiplication Background User's Guide'. Fit it with a GEMM sweep",
    "gemm_epilogue_overlap_archs": "CUTLASS 'Efficient GEMM in CUDA' (docs/efficient_gemm.md): an Ampere-style kernel "
                                   "runs its epilogue after the main loop in the same thread block; CUTLASS 3 "
                                   "sm90_gemm_tma_warpspecialized_pingpong.hpp (Hopper, and the Blackwell kernels after "
                                   "it) overlaps one tile's epilogue with another's main loop. Added after comparing "
                                   "Korthikanti et al. 2022 Table 5 (all eight rows) and Table 4 (22B per layer): the "
                                   "b = 1 rows, whose weight-gradient GEMMs reduce over 2048 tokens into fp32 main "
                                   "gradients, were 2-9% too fast",
    "flash_fwd_eff_frac": "Dao, 'FlashAttention-2' (2023), section 4.1: forward up to 73% of A100 peak, i.e. 0.84 of "
                          "the A100 MAMF ceiling (271/312); 0.80 for typical head dims and sequence lengths",
    "flash_bwd_eff_frac": "Dao, 'FlashAttention-2' (2023), section 4.1: backward up to 63% of A100 peak = 0.72 of the "
                          "MAMF ceiling; 0.70",
    "flash_hdim64_fwd_frac": "[issue 17] Shah et al., 'FlashAttention-3' (2024), Fig. 5a and 5c (H100 SXM5, 16K "
                             "tokens per batch, hidden 2048, non-causal): FlashAttention-3 forward 497 TFLOP/s at head "
                             "dim 64, 648 at 128 (cuDNN 413 / 595 in the same figures): thinner Q K^T and P V products "
                             "per softmax element",
    "flash_hdim64_bwd_frac": "[issue 17] the same paper, Fig. 6a and 6b (backward, non-causal, 16K): FlashAttention-3 "
                             "474 TFLOP/s at head dim 64, 561 at 128 (cuDNN 433 / 516)",
    "flash2_hdim64_fwd_frac": "[issue 17] the same figures' FlashAttention-2 bars: forward 324 at head dim 64, 370 at 128",
    "flash2_hdim64_bwd_frac": "[issue 17] the same figures' FlashAttention-2 bars: backward 291 at head dim 64, 322 at 128",
    "flash_causal_seq_tokens": "[issue 17] the sequence lengths of the FlashAttention-3 paper's Figs. 5 and 6 (512 ... "
                               "16K tokens, batch x sequence 16K)",
    "flash_causal_fwd_rate_frac": "[issue 17] Shah et al., 'FlashAttention-3' (2024), Fig. 5 (H100 SXM5, head dim 128, 16 "
                                  "heads, batch x sequence 16K), TFLOP/s with the causal mask at 512 ... 16K tokens: "
                                  "FlashAttention-2 191 / 260 / 298 / 319 / 333 / 335 against 370 unmasked at 16K (fa2), "
                                  "FlashAttention-3 292 / 423 / 521 / 579 / 602 / 616 against 648 (hopper); blackwell: "
                                  "cuDNN on B200 at head dim 64, Dao-AILab/flash-attention PR #2605's tables (1K ... 16K, "
                                  "batch x sequence 32K) 501 / 657 / 770 / 838 / 872 against 906 unmasked at 16K, 512 "
                                  "tokens taken as 1K's. Short sequences fall: every query block pays its prologue and "
                                  "epilogue over fewer key blocks, and the mask gives the blocks unequal work",
    "flash_causal_bwd_rate_frac": "[issue 17] the FlashAttention-3 paper, Fig. 6 (backward, unmasked, same sizes): "
                                  "FlashAttention-2 214 / 260 / 291 / 310 / 318 / 322, FlashAttention-3 316 / 424 / 501 / "
                                  "542 / 559 / 561 TFLOP/s, times the causal / unmasked backward ratio measured at 8K "
                                  "(Dao-AILab/flash-attention PR #1791, H100: FlashAttention-2 287.1 / 290.6, "
                                  "FlashAttention-3 531.6 / 553.9) at every length; blackwell: FlashAttention-3's shape "
                                  "times FlashAttention-4's 8K causal / unmasked backward ratio on SM100 (PR #2280: "
                                  "1208.6 / 1359.8 TFLOP/s), the only Blackwell backward pair found",
    "flash_block_tokens": "[issue 17] FlashAttention-2's kernels (Dao-AILab/flash-attention csrc/flash_attn/src/"
                          "flash_fwd_kernel.h) visit key blocks n_block_min = max(0, (m_block kBlockM - "
                          "window_size_left) / kBlockN) to n_block_max = ceil((m_block + 1) kBlockM / kBlockN) for a "
                          "causal local (sliding-window) mask, skipping the rest (README 2.3: 'Local (i.e., sliding "
                          "window) attention'); the block sides differ by kernel, head dimension and GPU, and 128 is "
                          "an assumption of their order (a smaller key block makes a window a little cheaper)",
    "flash2_slow_archs": "[issue 18] Dao, 'FlashAttention-2' (2023), section 4.1: on H100 the same implementation runs "
                         "'using no special instructions to make use of new features such as TMA and 4th-gen Tensor "
                         "Cores'; Blackwell's tcgen05 tensor cores are likewise outside its Ampere-style kernels",
    "flash2_next_gen_slowdown": "[issue 18] Dao, 'FlashAttention-2' (2023), section 4.1: up to 335 TFLOPs/s on H100 "
                                "without the new instructions, 'by using new instructions, we can obtain another "
                                "1.5x-2x speedup on H100 GPUs'; Shah et al., 'FlashAttention-3' (2024), abstract: "
                                "FlashAttention-3 is 1.5-2.0x faster than FlashAttention-2 on H100 in FP16. 1.75, the "
                                "middle of both ranges",
    "flash_triton_fwd_slowdown": "[issue 18] Dao, 'FlashAttention-2' (2023), section 4.1: 'FlashAttention-2 is around "
                                 "1.3-1.5x faster than FlashAttention in Triton in the forward pass' (A100); 1.4, the "
                                 "middle",
    "flash_triton_bwd_slowdown": "[issue 18] Dao, 'FlashAttention-2' (2023), section 4.1: '... and around 2x faster in "
                                 "the backward pass' (A100)",
    "tp_overlap_frac": "Megatron-LM as in Narayanan et al. SC'21 and Korthikanti et al. 2022 runs the tensor-parallel "
                       "all-reduces on the critical path; Transformer Engine's userbuffer overlap hides part "
                       "(set it for such runs)",
    "ep_a2a_overlap_frac": "Megatron-Core's default runs the token dispatcher's all-to-alls on the compute stream "
                           "(exposed); DeepSeek-V3's DualPipe (DeepSeek-AI 2024, section 3.2.1) and Megatron-Core's "
                           "EP A2A overlap hide nearly all of it under another micro-batch's compute: set ~1 for those",
    "ep_comm_sms": "DeepSeek-AI 2024, 'DeepSeek-V3 Technical Report', section 3.2.2: 20 of the H800's 132 SMs are "
                   "dedicated to the dispatch/combine communication while it overlaps computation",
    "pp_p2p_overlap_frac": "Megatron-Core's non-interleaved 1F1B schedule posts each step's sends and receives "
                           "together and waits for them (batch_p2p_comm; overlap_p2p_comm is only implemented in the "
                           "interleaved schedule, which gpusim.model.llm.pp_p2p_exposed_s models by itself): they "
                           "block the schedule",
    "pp_p2p_sms": "a stage in the interleaved steady state has a send/receive with each neighbour stage in flight (two "
                  "peers) and NCCL runs a point-to-point transfer over the network on NCCL_NCHANNELS_PER_NET_PEER "
                  "channels of one thread block each, 2 by default (NCCL environment-variable documentation; users "
                  "report send/recv running on 2-8 SMs, NVIDIA/nccl issue 1680): 2 x 2 = 4 SMs",
    "gemm_ceiling_flop_per_s": "set by calibration (the GEMM sweep's fitted ceiling per precision); empty by default: "
                               "the database's achievable_matmul_tflop_per_s (STAS_MAMF rows) is used",
    "llm_rows_looked_at": "All 18 rows of validation/llm_parallel.csv (Korthikanti 2022 Table 5, Narayanan SC'21 "
                          "Table 1) were looked at while developing the LLM layouts: `gpusim validate` prints them. "
                          "No default above was set or changed to match them. Three modelling decisions came "
                          "after seeing them, each a mechanism of Megatron-LM's code: the backward GEMMs by their own "
                          "shapes (made Table 5 slightly worse), gradient-accumulation fusion as a Strategy option, "
                          "off for the SC'21 (April 2021) rows as the Megatron-LM of that time had it (Table 1 "
                          "median 9.4% -> 5.5%), and the mixed-precision optimizer's passes beside Adam "
                          "(strategy.MEGATRON_OPT_EXTRA_BYTES; Table 5 mean 5.4% -> 4.8%). Issue 11, second "
                          "pass (all 18 rows again, and Korthikanti Table 4, the 22B model's per-layer forward and "
                          "backward times with and without sp / selective / full recomputation, as a cross-check "
                          "outside the CSV): two mechanisms of the 2022 code, no constant changed: the "
                          "weight-gradient GEMM's fp32 accumulation read after the main loop on Ampere "
                          "(gemm_epilogue_overlap_archs; Table 5 mean 4.3% -> 2.0%, max 8.9% -> 4.4%) and the "
                          "backward TP collectives beside the gradient GEMMs (Strategy.tp_async_bwd, off for the "
                          "SC'21 rows like the fusion; Table 5 mean 2.0% -> 1.7%). Table 4's per-layer times were used as "
                          "recalled from the paper, not from a file in this repository (unverified; they are not a "
                          "test). Table 1 is unchanged (median 5.0%)",
    "layer_kind_eff_frac": "engineering estimate: convolutions and attention reach a lower fraction of peak than "
                           "large GEMMs (calibrate with a DDP-step profile)",
    "mem_eff_frac": "engineering estimate: eager PyTorch elementwise and normalisation kernels (forward and backward) "
                    "reach well below the ~90% of bandwidth that STREAM-like copies do; 0.7 was chosen with the "
                    "published single-GPU rows in view (ResNet-50 throughput tracks memory bandwidth across GPUs)",
    "kernel_tail_s": "engineering estimate of per-kernel launch latency and grid ramp/tail (a few microseconds)",
    "launch_cpu_s": "[stop 50] measured: one eager PyTorch operation with its kernel launch, a torch.nn.Linear "
                    "forward (BF16, hidden 2048, 8192 tokens), takes 13.48 us of CPU time on an x86 DGX H100 host "
                    "(Xeon Platinum 8480C; NVIDIA/TransformerEngine issue #2053, 'High CPU overhead on Grace "
                    "systems', 2025-08: 37.08 us on GB200's Grace, the ratio of hwdb's host_cpu_dispatch_mult). Until "
                    "stop 50 the default was 8 us, an order of magnitude (H. He, 'Making Deep Learning Go Brrrr From "
                    "First Principles', 2022: microseconds per op; the CUDA driver's launch alone takes 'about 4-6 us' "
                    "per kernel: 'pegainfer (3): From Launch Overhead to CUDA Graph', "
                    "https://susun-blog.com/blog/pegainfer-3-cuda-graph, RTX 5070 Ti, CUDA 13, and Python and the "
                    "dispatcher add to it). LLM layouts' dense modules use te_layer_cpu_fwd_s / _bwd_s instead; their "
                    "MoE operations, CUDA-graph replays and host syncs take this figure",
    "busbw_eff_frac": "nvswitch: 370 GB/s ring busbw of 450 GB/s per direction on 8x H100 (nccl-tests issue 212, "
                      "NVIDIA); nvlink-bridge: ~116 GB/s on 2x H100 PCIe with bridge (nccl-tests issue 194) and "
                      "~21 GB/s on 2x RTX 2080 Ti (issue 44) = ~0.4 of per-direction; host-staged: [issue 18] the median "
                      "of HOST_STAGED_SHM_ALL_REDUCE (ten published NCCL SHM all-reduce sweeps, 0.04 to 0.60 of the "
                      "PCIe link: the host CPU's handling of two-way PCIe traffic and of GPU reads from host memory "
                      "varies from machine to machine, so a prediction on this path says so and asks for a "
                      "calibration; was an estimate of 0.35, then 0.25 from the first five sweeps); other PCIe and network classes: engineering estimates "
                      "(calibrate with `gpusim calibrate`)",
    "nvls_gain_frac": "480 vs 370 GB/s busbw with and without NVLS on 8x H100 (nccl-tests issue 212, NVIDIA); those two "
                      "rows are therefore marked as used for defaults in `gpusim validate`",
    "nvls_latency_s": "NVIDIA NCCL src/graph/tuning.cc (v2.19, commit b6475625fbcaa2c3c0e50eed2fa1255d7514d4a2): hwLat[NVLINK][NVLS][Simple] = 23 us, baseLat 0",
    "nvls_efficiency_frac": "[issue 18] NVIDIA NCCL's tuner (src/graph/tuning.cc from 2.23, src/tuning/nvls.cc in later "
                            "releases): 'static const float nvlsEfficiency[NCCL_NUM_COMPCAPS] = { 0.0f (Volta), 0.0f "
                            "(Ampere), 0.85f (Hopper), 0.74f (Blackwell) }', the only architecture-dependent factor of "
                            "its NVLS bandwidth (intraBw = bwIntra x nvlsEfficiency x (nChannels-1)/nChannels, x2 for "
                            "all-reduce); taken from public walkthroughs of that source that quote the table and the "
                            "formula, not read in NVIDIA's file itself (check against src/tuning/nvls.cc)",
    "a2a_intra_busbw_frac": "[issue 17] the median of measured / predicted-at-the-ring's-efficiency bus bandwidth over "
                            "the 7 open in-node all-to-all rows (4 systems) of validation/nccl_sweeps.csv (sizes 0.5-16 "
                            "GiB, where "
                            "latency is negligible): 4x GB300 0.867 / 0.870, 8x GB300 over 2 trays 0.943 / 0.950 (OCI "
                            "gpu-quickstarts GB300 README), 4x H100 0.916 (NVIDIA/nccl issue 2169), 8x MI355X 0.895 / "
                            "0.896 (OCI gpu-quickstarts MI355X README): 0.896; the held-out 64x GB300 over 16 trays "
                            "reads 0.900 / 0.925. NCCL's all-to-all is one send/recv pair per peer (point-to-point "
                            "channels and chunks), not the ring's pipelined channels, and reaches less of the links; "
                            "set 2026-12-06 with the Megatron-Core MoE paper's Table 7 dispatch latencies in view (GB200 "
                            "NCCL all-to-all 15-29% slower than gpusim's at EP 8-64 before it). Applied also to DeepEP's "
                            "and HybridEP's in-node exchanges (the flex dispatcher's flat exchange and the NVLink leg of "
                            "its hierarchical one) by assumption: they are not NCCL kernels and no sweep of theirs was "
                            "found; Table 7's in-node HybridEP latencies sit within -22% to +1% of gpusim's with it",
    "xgmi_link_eff_frac": "AMD ROCm blog 'Understanding RCCL Bandwidth and xGMI Performance on AMD Instinct MI300X' "
                          "(J. Kolla, P. Alizadeh, G. Lee, 2025-03-02, https://rocm.blogs.amd.com/software-tools-"
                          "optimization/mi300x-rccl-xgmi/README.html): 64 GB/s rated per link, 'CRC bit correction and "
                          "protocol overhead ... reduce the usable bandwidth to approximately 48 GB/s per link ... about "
                          "75%'; RCCL's topology uses the same figures (ROCm/rocm-systems projects/rccl/src/graph/topo.h "
                          "at 03a89144e7d85d6824d0e27fabf9736814617f63: GFX94X_XGMI_WIDTH 48.0, MI200_XGMI_WIDTH 36.0 "
                          "= 0.72 of MI250X's 50 GB/s links)",
    "nccl_thread_launch_s": "NVIDIA/nccl-tests issue 123 (https://github.com/NVIDIA/nccl-tests/issues/123), DGX A100: "
                            "an 8-128 B all-reduce on 8 GPUs driven by one thread (-g 8, ring, 1 channel) takes 33.7 us "
                            "against ~21 us with a thread per GPU (-t 8); NCCL's maintainer (sjeaugey): 'when you run "
                            "with -g NUM_GPUS, all GPUs are handled by a single thread ... the CPU is the bottleneck'; "
                            "33.7 us / 8 GPUs = 4.2 us per GPU (the 2-GPU -g run, 10 us, is GPU-bound: 2 x 4.2 < 10)",
    "coll_base_latency_s": "engineering estimate of a CUDA kernel launch plus NCCL's host-side enqueue (a few "
                           "microseconds); calibration fits it",
    "tree_busbw_frac": "NVIDIA NCCL src/graph/tuning.cc (v2.19, commit b6475625fbcaa2c3c0e50eed2fa1255d7514d4a2): tree busBw = 0.92 x the ring's",
    "nccl_base_latency_s": "NVIDIA NCCL src/graph/tuning.cc (v2.19, commit b6475625fbcaa2c3c0e50eed2fa1255d7514d4a2): baseLat (Tree 6.8/14.0/0, Ring 6.6/14.0/8.4 us for LL/LL128/Simple)",
    "nccl_hop_latency_s": "NVIDIA NCCL src/graph/tuning.cc (v2.19, commit b6475625fbcaa2c3c0e50eed2fa1255d7514d4a2): hwLat NVLINK row (Tree .6/1.25/28, Ring .6/1.9/3.4 us) for inside a node and NET "
                          "row (Tree 5.0/8.5/28, Ring 2.7/4.0/14.0 us) across nodes; the Simple figures include the "
                          "chunk latency of its pipeline",
    "proto_busbw_frac": "NVIDIA NCCL src/graph/tuning.cc (v2.19, commit b6475625fbcaa2c3c0e50eed2fa1255d7514d4a2) and later (2.2x): Ring LL = 1/2 of the bus bandwidth (8-byte flag per 8 bytes), LL128 "
                        "0.92 (120 of 128 bytes), Tree LL 1/3.8, Tree LL128 120/128",
    "ll_max_busbw_bytes_per_s": "NVIDIA NCCL src/graph/tuning.cc llMaxBws (GB/s; Volta {39, 39, 20.4}, Ampere "
                                "{87.7, 22.5, 19.0}, Hopper {141, 45, 35} in NCCL 2.2x; NCCL 2.19 had 87.7 for Hopper "
                                "too). Blackwell {2 x 141, 2 x 45, 2 x 35}: ncclTunerConstantsDefaults.llMaxBws of "
                                "the NCCL src/graph/tuning.cc that has a Blackwell row (2.27+, with the tuner-plugin "
                                "constants table)",
    "nccl_nvlink_gbyte_per_s_per_link": "NVIDIA NCCL src/graph/topo.h (v2.19, commit "
                                        "b6475625fbcaa2c3c0e50eed2fa1255d7514d4a2, and unchanged in 2.2x): SM60_NVLINK_BW "
                                        "18.0, SM70 20.0, SM80 20.0, SM86 12.0, SM90 20.6, SM100 40.1 GB/s per link; "
                                        "src/graph/topo.cc ncclTopoGetNvbw picks SM100 for compute capability >= 10.0, "
                                        "SM90 >= 9.0, SM86 == 8.6, SM80 >= 8.0, SM70 >= 7.0, else SM60. A ring through "
                                        "an NVSwitch sums them over the GPU's links (ncclTopoSearch fills channels up to "
                                        "the GPU-to-NVSwitch bandwidth): 18 x 20.6 = 370.8 GB/s on H100, which NVIDIA "
                                        "quotes as the ring busbw (~370 GB/s, nccl-tests issue 212); 12 x 20 = 240 on "
                                        "A100, 18 x 40.1 = 721.8 on B200",
    "nvls_tree_busbw_frac": "NVIDIA NCCL src/graph/tuning.cc (v2.19, commit b6475625fbcaa2c3c0e50eed2fa1255d7514d4a2): "
                            "'else if (a == NCCL_ALGO_NVLS || a == NCCL_ALGO_NVLS_TREE) ratio *= 5.0/6.0' (bus to "
                            "algorithm bandwidth), with bw = min(bwIntra, nNodes <= 2 ? bwInter : bwInter/2) for NVLS-tree",
    "nccl_ll_max_multi_node_busbw_bytes_per_s": "NVIDIA NCCL src/graph/tuning.cc (v2.19, commit "
                                                "b6475625fbcaa2c3c0e50eed2fa1255d7514d4a2): 'LL: for single node, we look "
                                                "at GPU type; for multi-node, we look at CPU type': index1 = nNodes == 1 ? "
                                                "compCapIndex : cpuVendor == AMD ? 1 : 0, so across nodes llMaxBws' rows "
                                                "'Volta-N1/Intel-N2/Intel-N4' {39, 39, 20.4} and 'Ampere-N1/AMD-N2/AMD-N4' "
                                                "{87.7, 22.5, 19.0} GB/s; unchanged in ncclTuningGetConstantsIndexes of "
                                                "NCCL 2.2x (AMD or mixed hosts: row 1). RCCL's ring LL takes its own "
                                                "bwRatio tables instead (ROCm/rccl src/graph/tuning.cc), so no cap there",
    "nccl_net_overhead_s": "NVIDIA NCCL src/graph/tuning.cc (v2.19, commit b6475625fbcaa2c3c0e50eed2fa1255d7514d4a2) "
                           "getNetOverhead, 'Network post overhead': 1.0 us on x86 Intel, 2.0 us on x86 AMD, 1.0 us "
                           "otherwise; ncclTopoTuneModel: 'Inter-node rings still have to launch nsteps * net "
                           "overhead', intraLat = max(intraLat, netOverhead) for every ring step of an all-reduce, "
                           "reduce-scatter or all-gather across nodes. The same in NCCL 2.2x (src/graph/tuning/ring "
                           "model, ncclTuningRingModelInit) and in ROCm RCCL's tuning.cc",
    "nccl_net_overhead_simple_mult": "NVIDIA NCCL src/graph/tuning.cc (v2.19, commit "
                                     "b6475625fbcaa2c3c0e50eed2fa1255d7514d4a2): 'if (p == NCCL_PROTO_SIMPLE) netOverhead "
                                     "*= 3'",
    "ll128_compute_capabilities": "NVIDIA NCCL src/graph/tuning.cc ncclTopoTuneModel (2.2x): 'Enable LL128 by default "
                                  "only on Volta/Ampere/Hopper/Blackwell+NVLink. Other cases are not tested and may cause "
                                  "silent data corruption': typeIntra <= PATH_NVB, equal compute capabilities, and "
                                  "minCompCap 70, 80, 90, 100 or 120 (so not 7.5, 8.6, 8.9 or 10.3)",
    "ll128_amd_architectures": "ROCm RCCL src/graph/tuning.cc: 'Enable LL128 by default only on gfx90a' (MI200, CDNA2) "
                               "with its tuning table",
    "nvls_channels": "NVIDIA NCCL src/enqueue.cc: 'NVLS should not need more than 16 channels to get peak BW' "
                     "(nc = comm->nvlsChannels, 16 by default on H100)",
    "nccl_steps": "NVIDIA NCCL src/include/device.h: NCCL_STEPS 8 (slots of a connection's buffer in flight)",
    "nvls_chunk_bytes": "NVIDIA NCCL src/enqueue.cc computeColl: NVLS chunk at most 131072 bytes, halved to 64/32/16 "
                        "KiB below 32/8/2 x (channels x heads x chunk)",
    "nvls_tree_hop_s": "NVIDIA NCCL src/graph/tuning.cc (v2.19, commit b6475625fbcaa2c3c0e50eed2fa1255d7514d4a2): hwLat[NET][NVLS_TREE][Simple] = 14 us",
    "collnet_latency_s": "NVIDIA NCCL src/graph/tuning.cc (v2.19, commit b6475625fbcaa2c3c0e50eed2fa1255d7514d4a2): hwLat[NET][COLLNET_CHAIN][Simple] = 30 us",
    "collnet_busbw_frac": "NVIDIA NCCL src/graph/tuning.cc (v2.19, commit b6475625fbcaa2c3c0e50eed2fa1255d7514d4a2) (earlier versions): CollNet busBw x 0.9",
    "overlap_slowdown_frac": "(also the cost of a tensor-parallel collective run beside a gradient GEMM, "
                             "llm.beside_gemm_s) communication kernels running beside compute contend for SMs and memory bandwidth, so "
                             "overlap hides only part of them (Yu and Pericas, 'Resource-aware Computation-"
                             "Communication Overlap for multi-GPU ML Workloads', arXiv 2606.09200: controlling the "
                             "contention cut execution time by up to 25.5%). 0.5 was compared on the validation set "
                             "(0.1 and 0.5: the anchored error on rows that lose scaling fell from 23% to 18.5%)",
    "dp_gil_frac": "DataParallel runs each replica's forward in a Python thread (torch.nn.parallel.parallel_apply), "
                   "serialised by the GIL; its backward runs in autograd's C++ device threads (PyTorch docs, "
                   "'DataParallel' and 'CUDA semantics: use DistributedDataParallel instead of DataParallel')",
    "dp_replicate_s": "engineering estimate of torch.nn.parallel.replicate's per-module Python cost (calibrate)",
    "overlap_frac": "engineering estimate; DDP overlaps bucket all-reduces with the backward pass "
                    "(Li et al., 'PyTorch Distributed', VLDB 2020)",
    "cpu_optimizer_bytes_per_s": "engineering estimate for a vectorised CPU Adam (Ren et al., 'ZeRO-Offload', "
                                 "USENIX ATC 2021, describe such an optimizer); calibrate for offload plans",
    "te_layer_cpu_fwd_s": "[issue 17] Transformer Engine's measured CPU time per module on GB200 (Grace), BF16 "
                          "(NVIDIA/TransformerEngine PR #3523, 'before' column): Linear forward 59.19 us, forward + "
                          "backward 311.30 us; LayerNormLinear 83.48 / 397.73 us. A Megatron-Core layer launches two "
                          "LayerNormLinear (QKV, FC1), two Linear (projection, FC2) and the attention module, taken as "
                          "one more Linear (an assumption): forward 2 x 83.48 + 3 x 59.19 = 344.5 us, forward + "
                          "backward 2 x 397.73 + 3 x 311.30 = 1729.4 us on Grace; an x86 DGX H100 host (Xeon Platinum "
                          "8480C) launches a torch Linear forward in 13.48 us against 37.08 us on GB200 "
                          "(NVIDIA/TransformerEngine issue #2053): / 2.751 = 125.2 us forward",
    "te_layer_cpu_bwd_s": "[issue 17] (1729.4 - 344.5) / 2.751 = 503.4 us on an x86 host (see te_layer_cpu_fwd_s)",
    "te_fused_moe_mlp_cpu_fwd_s": "[issue 17] NVIDIA/TransformerEngine issue #2897 ('Reduce CPU overhead in grouped MLP "
                                  "block', 2026-04-16): the fused ForwardGroupedMLP_CuTeGEMMSwiGLU_MXFP8 / "
                                  "BackwardGroupedMLP_CuTeGEMMDSwiGLU_MXFP8 ops 'on GB200 with 64 experts and 128 hidden "
                                  "size ... the forward pass takes ~1.2 ms and the backward pass takes ~2.1 ms' (a "
                                  "CPU-bound benchmark); on the x86 reference host 1.2 ms / 2.751 (the Grace/x86 ratio "
                                  "of te_layer_cpu_fwd_s) = 436.2 us",
    "te_fused_moe_mlp_cpu_bwd_s": "[issue 17] 2.1 ms / 2.751 = 763.4 us (see te_fused_moe_mlp_cpu_fwd_s)",
    "moe_expert_item_cpu_s": "[stop 52] measured: a torch.empty allocate-and-free on an x64 B200 host 'stayed around 2.15 "
                             "us' (NVIDIA/cutlass issue #3275, 2026-07-22: 'Nothing+Alloc 2.01 us'); 'Overhead for torch "
                             "functions consuming tensors is on the order of 2 us' (pytorch/pytorch PR #34645, 2020); "
                             "2.0 us taken for every item (views and saved-tensor entries cost less, gradient hooks "
                             "more: an assumption of their mix)",
    "te_layer_cpu_fp8_mult": "[issue 17] NVIDIA/TransformerEngine PR #3523 (GB200): MXFP8 / BF16 forward + backward CPU "
                             "time, Linear 440.93 / 311.30, LayerNormLinear 518.67 / 397.73; for the layer above "
                             "(2 x 518.67 + 3 x 440.93) / 1729.4 = 1.365",
    "nccl_communicator_bytes": "[issue 17] the model counts one NCCL communicator (comm_buffer_bytes, 0.5 GiB), the "
                               "CUDA context and cuBLAS workspaces (framework_overhead_bytes, 1 GiB) and 10% "
                               "fragmentation of activations; a Megatron layout holds a communicator per parallel group "
                               "it talks in (gpusim.model.memory.nccl_communicators), and each takes GPU memory on "
                               "every rank: 544 MB (2 ranks) to 688 MB (more) per process group that ran an all-reduce "
                               "on 4 A100 with NVLink (NVIDIA/nccl issue #964, 2023); the larger is taken. NCCL's "
                               "answer in NVIDIA/nccl #864 / #986: memory grows with communicators and channels "
                               "(~1.6 GB after one communicator and ~6 GB after three were reported there, with NVLS, "
                               "which NeMo-Framework-Launcher PR #127 turns off 'for memory saving')",
    "memory_headroom_bytes": "[issue 17] 0: beyond the communicators the model counts, no flat margin is assumed by "
                             "default (the allocator's fragmentation is fragmentation_frac); --memory-headroom 2GiB "
                             "asks for one (it then replaces the communicators' share)",
    "memory_headroom_frac": "[issue 17] 0 by default (what NCCL and the CUDA context take does not grow with the GPU's "
                            "memory); --memory-headroom 0.05 asks for 5%",
    "h2d_pageable_eff_frac": "pageable copies run at roughly half the pinned rate (M. Harris, 'How to Optimize "
                             "Data Transfers in CUDA C/C++', NVIDIA Developer Blog, 2012)",
}


DEFAULT_PARAMS = ModelParams()
