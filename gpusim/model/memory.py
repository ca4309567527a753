"""GPU memory per rank per strategy, whether it fits, and the largest micro-batch that fits.

Model states follow the ZeRO paper (Rajbhandari et al., "ZeRO: Memory Optimizations Toward Training
Trillion Parameter Models", SC'20, section 3.1): mixed-precision Adam holds 16 bytes per parameter
(PyTorch AMP: fp32 weights 4 + fp32 gradients 4 + Adam m and v 8; DeepSpeed: fp16 weights 2 + fp16
gradients 2 + fp32 master weights, m and v 12). ZeRO stage 1 shards the optimizer states over the
data-parallel ranks, stage 2 also the gradients, stage 3 (FSDP FULL_SHARD) also the parameters.

Activations: the workload's bytes kept for the backward pass per sample (16-bit), times the micro-batch;
with full activation checkpointing only each block's input is kept plus one block's activations during
its recomputation (Chen et al., "Training Deep Nets with Sublinear Memory Cost", 2016).

Buffers: DDP keeps its gradient buckets as a copy of the gradients (``gradient_as_bucket_view=False``,
the PyTorch default); sharded strategies hold the gathered parameters of the units in flight (the
current one and the prefetched next one). Framework overhead (CUDA context, library workspaces) and NCCL
buffers are not available to tensors.
"""

from __future__ import annotations

import numpy as np

#: kernels per repeated block (a transformer layer, a ResNet bottleneck) used to estimate how many blocks
#: (FSDP units, gathered one at a time) a workload has from its kernel count.
KERNELS_PER_BLOCK = 20.0


def n_blocks(fwd_kernels):
    return np.maximum(1.0, np.asarray(fwd_kernels, dtype=np.float64) / KERNELS_PER_BLOCK)


def memory_per_gpu_bytes(*, params, act_bytes_per_sample, act_ckpt_bytes_per_sample, act_block_bytes_per_sample,
                         micro_batch, checkpointing,
                         act_scale, shard_stage, shard_ranks, weight_bytes_per_param, grad_bytes_per_param,
                         opt_bytes_per_param, master_bytes_per_param, gather_bytes_per_param, ddp_buckets,
                         cpu_offload, multi_gpu, fwd_kernels, framework_overhead_bytes, comm_buffer_bytes,
                         fragmentation_frac):
    """Bytes per GPU by category (dict of arrays) and their ``total``.

    ``shard_stage`` 0..3 (see module docstring), ``shard_ranks`` the ranks sharded over (all data-parallel
    ranks; the GPUs of one node for hybrid sharding). ``act_scale`` = activation element bytes / 2.
    """
    P = np.asarray(params, dtype=np.float64)
    stage = np.asarray(shard_stage)
    ranks = np.maximum(np.asarray(shard_ranks, dtype=np.float64), 1.0)
    offload = np.asarray(cpu_offload, dtype=bool)
    blocks = n_blocks(fwd_kernels)

    w_shard = np.where(stage >= 3, ranks, 1.0)
    g_shard = np.where(stage >= 2, ranks, 1.0)
    o_shard = np.where(stage >= 1, ranks, 1.0)

    weights = P * weight_bytes_per_param / w_shard
    grads = P * grad_bytes_per_param / g_shard
    optimizer = P * (opt_bytes_per_param + master_bytes_per_param) / o_shard
    # CPU offload moves optimizer states (and the fp32 master copy) and the gradient shard to host memory
    optimizer = np.where(offload, 0.0, optimizer)
    grads = np.where(offload, P * gather_bytes_per_param / g_shard, grads)

    acts_full = np.asarray(act_bytes_per_sample, dtype=np.float64) * act_scale
    # checkpointing keeps each block's input, plus one block's full activations while it is recomputed
    acts_ckpt = (np.asarray(act_ckpt_bytes_per_sample, dtype=np.float64)
                 + np.asarray(act_block_bytes_per_sample, dtype=np.float64)) * act_scale
    per_sample = np.where(np.asarray(checkpointing, dtype=bool), acts_ckpt, acts_full) * (1.0 + fragmentation_frac)
    activations = per_sample * micro_batch

    gathered = np.where(stage >= 3, 2.0 * P * gather_bytes_per_param / blocks, 0.0)
    buckets = np.where(np.asarray(ddp_buckets, dtype=bool), P * grad_bytes_per_param, 0.0)
    buffers = gathered + buckets
    overhead = framework_overhead_bytes + np.where(np.asarray(multi_gpu, dtype=bool), comm_buffer_bytes, 0.0)
    overhead = overhead + 0.0 * P

    total = weights + grads + optimizer + activations + buffers + overhead
    return {"weights": weights, "gradients": grads, "optimizer": optimizer, "activations": activations,
            "buffers": buffers, "overhead": overhead, "total": total, "activation_per_sample": per_sample}


def allocated_bytes(weights, gradients, optimizer, buffers, activations, fragmentation_frac):
    """[stop 56] What PyTorch's caching allocator reports as allocated (``torch.cuda.max_memory_allocated``) of a
    memory breakdown (:func:`memory_per_gpu_bytes`' categories): weights, gradients, optimizer states, buffers and
    the activations without the fragmentation allowance they carry (``fragmentation_frac``: reserved, not
    allocated); the CUDA context, library workspaces and NCCL buffers (``overhead``) are not the allocator's.
    Hand-worked: 4 + 8 + 24 + 0 GiB of states and 22 GiB of activations at 10% fragmentation -> 56 GiB."""
    f = np.asarray
    return (f(weights, dtype=np.float64) + f(gradients, dtype=np.float64) + f(optimizer, dtype=np.float64)
            + f(buffers, dtype=np.float64) + f(activations, dtype=np.float64) / (1.0 + fragmentation_frac))


def nccl_communicators(tp, pp, cp, dp, ep):
    """[issue 17] NCCL communicators a rank holds: one per parallel group of more than one rank it talks in (tensor,
    pipeline, context, data and expert parallelism; ``dp`` here excludes ``cp``). A data-parallel job holds one, a
    single GPU none. Hand-worked: tp 1 pp 1 cp 2 dp 4 -> 2; tp 4 pp 4 cp 2 dp 2 -> 4; DDP on 8 GPUs -> 1."""
    return sum((np.asarray(d, dtype=np.float64) > 1).astype(np.float64) for d in (tp, pp, cp, dp, ep))


def headroom_bytes(capacity_bytes, row_bytes, row_frac, default_bytes, default_frac, communicators=0.0,
                   communicator_bytes=0.0):
    """[issue 17] Bytes of GPU memory a configuration must leave free beyond what it is predicted to use.

    A row that sets its own headroom (``row_bytes`` and/or ``row_frac`` finite: ``--memory-headroom``) gets
    ``row_bytes + row_frac x capacity`` (NaN counts as 0). The others get the memory of the NCCL communicators beyond
    the first (which ``comm_buffer_bytes`` already counts), ``(communicators - 1)+ x communicator_bytes``, plus
    ``max(default_bytes, default_frac x capacity)`` (:class:`gpusim.params.ModelParams` ``nccl_communicator_bytes``,
    ``memory_headroom_bytes``, ``memory_headroom_frac``, whose sources are given there). Hand-worked: 80 GiB, row 0.05
    -> 4 GiB; no row figure, 3 communicators of 688 MB, defaults 0 -> 1.376 GB."""
    cap = np.asarray(capacity_bytes, dtype=np.float64)
    rb = np.asarray(row_bytes, dtype=np.float64)
    rf = np.asarray(row_frac, dtype=np.float64)
    own = np.isfinite(rb) | np.isfinite(rf)
    extra = np.maximum(np.asarray(communicators, dtype=np.float64) - 1.0, 0.0) * communicator_bytes
    return np.where(own, np.nan_to_num(rb) + np.nan_to_num(rf) * cap,
                    np.maximum(default_bytes, default_frac * cap) + extra)


def fits_in_memory(total_bytes, capacity_bytes, headroom=0.0):
    """[issue 17] A configuration fits when what it uses plus the headroom is within the GPU's memory:
    ``total + headroom <= capacity``."""
    return np.asarray(total_bytes, dtype=np.float64) + headroom <= np.asarray(capacity_bytes, dtype=np.float64)


def max_micro_batch(mem: dict, capacity_bytes, headroom=0.0):
    """Largest micro-batch whose memory fits in ``capacity_bytes`` less ``headroom`` (0 if even the model states do
    not)."""
    fixed = mem["total"] - mem["activations"]
    room = np.asarray(capacity_bytes, dtype=np.float64) - headroom - fixed
    with np.errstate(divide="ignore", invalid="ignore"):
        b = np.floor(room / mem["activation_per_sample"])
    return np.where(room > 0, np.maximum(b, 0.0), 0.0)


def activation_offload_terms(offload_layers, layers, layer_bytes, host_bytes_per_s, layer_fwd_s, layer_bwd_s):
    """[issue 17] Activation offloading to host memory (Megatron-Core ``cpu_offloading`` /
    ``cpu_offloading_num_layers``: "the number of transformer layers for which activations has to be offloaded",
    asynchronously, through Transformer Engine's ``get_cpu_offload_context``; the Megatron-Bridge performance recipes
    set it for Megatron-FSDP runs on GB200/GB300, whose Grace memory is on NVLink-C2C).

    ``n = min(offload_layers, layers)`` layers of a stage copy their saved activations (``layer_bytes`` each, one
    micro-batch) to the host while the next layer computes, and copy them back while the layer after them runs its
    backward (TE prefetches one layer ahead). The GPU then holds the other ``layers - n`` layers' activations plus the
    one layer in transit: ``(n - 1)+`` layers fewer. A copy longer than the layer it hides under is exposed:
    ``n (max(0, c - t_fwd) + max(0, c - t_bwd))`` seconds per micro-batch with ``c = layer_bytes / host_bytes_per_s``.

    Returns ``(layers no longer resident, exposed seconds per micro-batch)``. Hand-worked: 40 of 80 layers of 3.9 GB
    at 180 GB/s (c = 21.7 ms) under layers of 10 ms forward and 20 ms backward -> 39 layers off the GPU and
    40 x (11.7 + 1.7) ms = 0.533 s."""
    L = np.asarray(layers, dtype=np.float64)
    n = np.minimum(np.asarray(offload_layers, dtype=np.float64), L)
    c = np.asarray(layer_bytes, dtype=np.float64) / np.asarray(host_bytes_per_s, dtype=np.float64)
    exposed = n * (np.maximum(c - layer_fwd_s, 0.0) + np.maximum(c - layer_bwd_s, 0.0))
    return np.maximum(n - 1.0, 0.0), np.where(n > 0, exposed, 0.0)
