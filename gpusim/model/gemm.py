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
                kernel_tail_s, batch=1.0):
    """Seconds for ``batch`` GEMMs of ``(m, n, k)``: ``max(flop / achievable, bytes / bandwidth) + tail``.

    ``achievable = ceiling * wave_efficiency * k / (k + k_half)``; ``bytes = elem_bytes (m k + k n + m n)``.
    """
    m = np.asarray(m, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    k = np.asarray(k, dtype=np.float64)
    flop = 2.0 * m * n * k * batch
    rate = ceiling_flop_per_s * wave_efficiency_frac(m, n, sm_count, batch) * (k / (k + k_half))
    t_flop = flop / rate
    t_mem = elem_bytes * (m * k + k * n + m * n) * batch / (mem_bytes_per_s * mem_eff_frac)
    return np.maximum(t_flop, t_mem) + kernel_tail_s


def gemm_efficiency_frac(m, n, k, peak_flop_per_s, ceiling_flop_per_s, mem_bytes_per_s, sm_count, *, elem_bytes,
                         k_half, mem_eff_frac, kernel_tail_s, batch=1.0):
    """Achieved fraction of the datasheet peak of one GEMM shape (what a GEMM sweep measures)."""
    t = gemm_time_s(m, n, k, ceiling_flop_per_s, mem_bytes_per_s, sm_count, elem_bytes=elem_bytes, k_half=k_half,
                    mem_eff_frac=mem_eff_frac, kernel_tail_s=kernel_tail_s, batch=batch)
    return 2.0 * np.asarray(m, dtype=np.float64) * n * k * batch / (t * peak_flop_per_s)
