"""Compute time of one training micro-batch on one GPU: a per-layer-group roofline plus launch overheads.

Roofline (Williams, Waterman, Patterson, "Roofline: an insightful visual performance model for multicore
architectures", CACM 2009): a kernel takes ``max(flop / achievable_flop_per_s, bytes / achievable_bytes_per_s)``.
It is applied per layer group (matmul, conv, attention, elementwise, norm ...) and summed, so that
compute-bound and memory-bound layers each get their own ceiling.

Training multiplies the forward pass: the backward pass costs about twice the forward FLOPs (a gradient
for the input and one for the weights) and, for memory-bound layers, about twice the forward traffic;
full activation recomputation adds one more forward (Korthikanti et al., "Reducing Activation
Recomputation in Large Transformer Models", 2022, section 5: 4x instead of 3x forward FLOPs).

Small batches leave the GPU idle for two reasons, both modelled as fixed costs per kernel, so that
utilisation rises with the per-GPU batch and saturates:

- GPU side, ``kernel_tail_s``: launch latency and the ramp/tail of grids that do not fill every SM;
- CPU side, ``launch_cpu_s``: eager PyTorch dispatches each operator from Python. The GPU runs
  asynchronously, so a step takes the longer of GPU time and CPU dispatch time.

All functions are pure numpy on broadcastable float64 arrays.
"""

from __future__ import annotations

import numpy as np

#: training = forward + backward (2x forward): FLOP and byte multipliers, and kernels
TRAIN_MULT = 3.0
RECOMPUTE_EXTRA = 1.0


def train_multiplier(recompute) -> np.ndarray:
    """3 without activation recomputation, 4 with it (forward run again during backward)."""
    return TRAIN_MULT + RECOMPUTE_EXTRA * np.asarray(recompute, dtype=np.float64)


def group_times_s(micro_batch, group_flop_per_sample, group_bytes_per_sample, group_weight_bytes,
                  group_eff_frac, peak_flop_per_s, mem_bytes_per_s, mem_eff_frac, act_scale, weight_scale):
    """Roofline time of each layer group for one forward pass of ``micro_batch`` samples.

    Shapes: per-scenario arrays ``(n,)``; per-group arrays ``(n, K)`` or ``(1, K)``. Returns ``(n, K)``.
    ``group_bytes_per_sample`` and ``group_weight_bytes`` are at 2 bytes per element; ``act_scale`` and
    ``weight_scale`` rescale them to the precision's element size (2 for fp32).
    """
    b = np.asarray(micro_batch, dtype=np.float64)[..., None]
    inv_flop_rate = 1.0 / (np.asarray(peak_flop_per_s, dtype=np.float64)[..., None] * group_eff_frac)
    inv_byte_rate = (1.0 / (np.asarray(mem_bytes_per_s, dtype=np.float64) * mem_eff_frac))[..., None]
    t_flop = b * group_flop_per_sample
    t_flop *= inv_flop_rate
    t_mem = b * group_bytes_per_sample
    t_mem *= np.asarray(act_scale, dtype=np.float64)[..., None]
    t_mem += group_weight_bytes * np.asarray(weight_scale, dtype=np.float64)[..., None]
    t_mem *= inv_byte_rate
    return np.maximum(t_flop, t_mem, out=t_flop)


def micro_batch_compute(micro_batch, groups: dict, group_eff_frac, peak_flop_per_s, mem_bytes_per_s, *,
                        mem_eff_frac, kernel_tail_s, launch_cpu_s, act_scale, weight_scale, recompute,
                        fwd_dispatch_mult=1.0, speed_frac=1.0, fwd_kernels=None):
    """Forward + backward time of one micro-batch on one GPU.

    Parameters
    ----------
    groups : dict with ``fwd_flop_per_sample``, ``fwd_bytes_per_sample``, ``weight_bytes``, ``count`` (n|1, K)
    group_eff_frac : (n|1, K) achievable fraction of ``peak_flop_per_s`` per group
    fwd_dispatch_mult : CPU dispatch multiplier of the forward pass (DataParallel: one Python process runs every
        replica's forward in threads under the GIL; its backward runs in autograd's per-device C++ threads)
    speed_frac : the GPU's speed relative to its datasheet (throttling)

    Returns
    -------
    dict of (n,) arrays: ``gpu_s`` (kernel time), ``roofline_s`` (without per-kernel overheads),
    ``cpu_dispatch_s``, ``compute_s`` = max(gpu, cpu) for the forward plus the same for the backward,
    ``fwd_s``, ``bwd_s`` (its two parts), ``kernels`` per micro-batch.
    """
    mult = train_multiplier(recompute)
    per_group = group_times_s(micro_batch, groups["fwd_flop_per_sample"], groups["fwd_bytes_per_sample"],
                              groups["weight_bytes"], group_eff_frac, peak_flop_per_s, mem_bytes_per_s,
                              mem_eff_frac, act_scale, weight_scale)
    roofline_s = per_group.sum(axis=-1) * mult / speed_frac
    if fwd_kernels is None:
        fwd_kernels = np.asarray(groups["count"], dtype=np.float64).sum(axis=-1)
    kernels = fwd_kernels * mult
    gpu_s = roofline_s + kernels * kernel_tail_s
    gpu_fwd = gpu_s / mult
    cpu_fwd = kernels / mult * launch_cpu_s * fwd_dispatch_mult
    cpu_bwd = kernels * (1.0 - 1.0 / mult) * launch_cpu_s
    fwd_s = np.maximum(gpu_fwd, cpu_fwd)
    bwd_s = np.maximum(gpu_s - gpu_fwd, cpu_bwd)
    return {"gpu_s": gpu_s, "roofline_s": roofline_s, "cpu_dispatch_s": cpu_fwd + cpu_bwd, "compute_s": fwd_s + bwd_s,
            "fwd_s": fwd_s, "bwd_s": bwd_s, "kernels": kernels + 0.0 * gpu_s}


def layer_cpu_s(fwd_cpu_s, bwd_cpu_s, host_mult, fp8_mult, recompute_full):
    """[issue 17] CPU seconds one thread spends launching a transformer layer's forward and its backward (one
    micro-batch): the framework's per-layer cost on the reference host times the host's slowdown and the FP8 modules'
    extra work; full recomputation launches the forward again in the backward pass. Returns ``(fwd_s, bwd_s)``.

    The GPU runs asynchronously, so a layer takes ``max(GPU time, CPU time)`` for each pass: nothing while its kernels
    are long, the launches' pace where they are short (small layers, small micro-batches, a slow host CPU). The
    defaults (ModelParams ``te_layer_cpu_fwd_s``, ``te_layer_cpu_bwd_s``, ``te_layer_cpu_fp8_mult``; GPU
    ``host_cpu_dispatch_mult``) are Transformer Engine's measured module costs, with their sources. Hand-worked:
    125 us and 503 us on an x86 host, a Grace host 2.751x, FP8 1.365x: forward 125 x 2.751 x 1.365 = 470 us."""
    f = np.asarray(fwd_cpu_s, dtype=np.float64) * host_mult * fp8_mult
    b = np.asarray(bwd_cpu_s, dtype=np.float64) * host_mult * fp8_mult
    return f, b + np.where(np.asarray(recompute_full, dtype=bool), f, 0.0)


def optimizer_step_s(params_local, traffic_bytes_per_param, mem_bytes_per_s, mem_eff_frac, n_kernels,
                     kernel_overhead_s):
    """The optimizer step is memory-bound: every local parameter's weights, gradient and states are read
    and written once (fused/foreach kernels), e.g. 28 bytes per parameter for fp32 Adam."""
    return params_local * traffic_bytes_per_param / (mem_bytes_per_s * mem_eff_frac) + n_kernels * kernel_overhead_s


def model_flop_per_sample(fwd_flop_per_sample):
    """Model FLOPs of one training sample (3x forward, recomputation not counted), as MFU defines them
    (Chowdhery et al., "PaLM", 2022, appendix B)."""
    return TRAIN_MULT * np.asarray(fwd_flop_per_sample, dtype=np.float64)
