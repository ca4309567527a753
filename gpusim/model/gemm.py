"""Time of one GEMM from its shape: wave quantisation over the SMs, a size efficiency that saturates, and a
measured ceiling.

A GEMM ``C[m, n] = A[m, k] @ B[k, n]`` (``batch`` independent ones for batched GEMMs) does ``2 m n k`` FLOPs.
cuBLAS and CUTLASS split ``C`` into output tiles, one thread block per tile, and run them in *waves* of one
tile per SM; the last wave is partly empty, so the useful fraction of the GPU is
``waves / ceil(waves)`` (NVIDIA, "Matrix Multiplication Background User's Guide", Deep Learning
Performance documentation, sections "Tile quantization" and "Wave quantization"). The library picks the tile
among a few sizes; the model takes the best of :data:`TILES` for each shape, which is what its heuristics aim
for. Each tile walks ``k`` in steps; its prologue and epilogue cost about ``k_half`` steps, so a tile reaches
``k / (k + k_half)`` of its steady rate: short reductions (the attention ``Q K^T`` with ``k = d_head``, a
row-parallel GEMM split by a large ``tp``) run below peak.

**The epilogue.** After its main loop a tile writes its output; when it accumulates into the output (``beta = 1``,
e.g. a weight gradient added to an fp32 main gradient by Megatron-LM's ``--gradient-accumulation-fusion``: 4 bytes
read and 4 written per element) it first reads it. On Ampere and older GPUs cuBLAS and CUTLASS 2.x kernels run the
epilogue after the main loop in the same thread block (CUTLASS, "Efficient GEMM in CUDA", docs/efficient_gemm.md:
the main loop, then the epilogue, which loads the source matrix and stores the result), one large tile per SM: the
loads of the source wait on memory after the wave's FLOPs, while the stores drain under the next tile's main loop
(a store does not hold its thread block). So there ``t = max(flop, inputs + writes) + source reads``. Hopper's
warp-specialized kernels load the source with TMA in a producer warp ahead of the math (CUTLASS 3
``sm90_gemm_tma_warpspecialized_pingpong.hpp`` and its TMA epilogue; cuBLAS 12 on H100): there the reads are one
more stream of the roofline. The difference matters for GEMMs with a short reduction and a large accumulated output,
such as a weight gradient over one micro-batch of 2048 tokens.

The ceiling is the GPU's measured *maximum achievable matmul FLOPS* at the best shape (hwdb
``achievable_matmul_tflop_per_s``, from stas00/ml-engineering's MAMF table) or, for a GPU without that
measurement, ``gemm_ceiling_frac`` of the datasheet peak. A GEMM is also bounded by reading its operands and
writing its output once from HBM (the roofline; Williams et al., CACM 2009).

Pure numpy on broadcastable float64 arrays.
"""

from __future__ import annotations

import numpy as np

#: output tile shapes (rows x columns) the library chooses among: CUTLASS's and cuBLAS's common
#: tensor-core thread-block tiles (CUTLASS profiler defaults 128x128, 128x256 and 256x128)
TILES = ((128.0, 256.0), (256.0, 128.0), (128.0, 128.0))


def wave_efficiency_frac(m, n, sm_count, batch=1.0):
    """Best over :data:`TILES` of ``waves / ceil(waves)`` for the output tiles of ``batch`` GEMMs of ``m x n``."""
    m = np.asarray(m, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    inv_sms = 1.0 / np.asarray(sm_count, dtype=np.float64)
    # useful area / computed area (tile quantisation) x waves / ceil(waves) (wave quantisation) simplifies to
    # m n batch / (tm tn sms ceil(waves)): the best tile minimises tm tn ceil(waves)
    cost = None
    for tm, tn in TILES:
        tiles = np.ceil(m * (1.0 / tm)) * np.ceil(n * (1.0 / tn))
        if np.ndim(batch) or batch != 1.0:
            tiles = tiles * batch
        c = np.ceil(tiles * inv_sms) * (tm * tn)
        cost = c if cost is None else np.minimum(cost, c)
    return (m * n * batch * inv_sms) / cost


def gemm_time_s(m, n, k, ceiling_flop_per_s, mem_bytes_per_s, sm_count, *, elem_bytes, k_half, mem_eff_frac,
                kernel_tail_s, batch=1.0, out_bytes=None, src_bytes=0.0, serial_epilogue=False):
    """Seconds for ``batch`` GEMMs of ``(m, n, k)``: the FLOPs at the achievable rate against the bytes at the memory
    bandwidth, plus the kernel tail.

    ``achievable = ceiling * wave_efficiency * k / (k + k_half)``; the GEMM reads ``elem_bytes (m k + k n)`` of inputs
    and writes ``out_bytes m n`` (default ``elem_bytes``) and, accumulating into its output, reads ``src_bytes m n``
    (default 0). With ``serial_epilogue`` (broadcastable bool; module docstring)
    ``t = max(flop, inputs + writes) + source``, else ``t = max(flop, inputs + writes + source)``.
    """
    m = np.asarray(m, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    k = np.asarray(k, dtype=np.float64)
    flop = 2.0 * m * n * k * batch
    rate = ceiling_flop_per_s * wave_efficiency_frac(m, n, sm_count, batch) * (k / (k + k_half))
    t_flop = flop / rate
    bw = mem_bytes_per_s * mem_eff_frac
    mn = m * n * batch
    t_mem = (elem_bytes * (m * k + k * n) * batch + (elem_bytes if out_bytes is None else out_bytes) * mn) / bw
    if not np.any(src_bytes):
        return np.maximum(t_flop, t_mem) + kernel_tail_s
    t_src = src_bytes * mn / bw
    serial = np.asarray(serial_epilogue, dtype=bool)
    return np.where(serial, np.maximum(t_flop, t_mem) + t_src, np.maximum(t_flop, t_mem + t_src)) + kernel_tail_s


def fp8_k_half(k_half, ceiling16_flop_per_s, ceiling8_flop_per_s):
    """[issue 17] The prologue/epilogue length of an FP8 GEMM tile in k-steps of its own main loop.

    A tile's fixed cost (filling the shared-memory pipeline, converting the fp32 accumulators and storing the
    16-bit output tile: CUTLASS "Efficient GEMM in CUDA", the mainloop/epilogue split) moves the same bytes at
    the same memory and latency speed whatever the operand type, while the FP8 main loop runs each k-step at the
    FP8 tensor-core rate (about twice the 16-bit one). Counted in k-steps of the faster loop it is therefore
    ``k_half x ceiling8 / ceiling16`` long: short reductions lose more of the FP8 rate, one reason the FP8
    speed-up is smaller for narrow models (Megatron-Bridge's performance guide: "speedup is lower for small hidden
    sizes where linear layers are a smaller fraction of total compute")."""
    return np.asarray(k_half, dtype=np.float64) * (np.asarray(ceiling8_flop_per_s, dtype=np.float64)
                                                   / np.asarray(ceiling16_flop_per_s, dtype=np.float64))


def gemm_efficiency_frac(m, n, k, peak_flop_per_s, ceiling_flop_per_s, mem_bytes_per_s, sm_count, *, elem_bytes,
                         k_half, mem_eff_frac, kernel_tail_s, batch=1.0, src_bytes=0.0, serial_epilogue=False):
    """Achieved fraction of the datasheet peak of one GEMM shape (what a GEMM sweep measures)."""
    t = gemm_time_s(m, n, k, ceiling_flop_per_s, mem_bytes_per_s, sm_count, elem_bytes=elem_bytes, k_half=k_half,
                    mem_eff_frac=mem_eff_frac, kernel_tail_s=kernel_tail_s, batch=batch, src_bytes=src_bytes,
                    serial_epilogue=serial_epilogue)
    return 2.0 * np.asarray(m, dtype=np.float64) * n * k * batch / (t * peak_flop_per_s)
