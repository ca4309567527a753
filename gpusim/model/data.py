"""The data pipeline: how fast the loader can supply samples, and how long the GPU waits for them.

A PyTorch ``DataLoader`` with ``num_workers > 0`` prepares batches in worker processes while the GPU
trains (prefetching), so loading costs nothing until it is slower than the step: then the step waits
for the difference. With ``num_workers == 0`` loading runs in the training process and adds to every
step. Supply is limited by CPU cores (decode and augmentation, core-seconds per sample; only as many
workers as the cores per GPU can run at once) and by storage read bandwidth shared by the node's GPUs.
Host-to-device copies from pinned memory run asynchronously (``non_blocking=True``); from pageable
memory they are synchronous and slower (staged through a pinned bounce buffer by the driver; M. Harris,
"How to Optimize Data Transfers in CUDA C/C++", NVIDIA Developer Blog, 2012).
"""

from __future__ import annotations

import numpy as np


def loader_supply_samples_per_s(num_workers, cores_per_gpu, preprocess_core_s_per_sample, input_bytes_per_sample,
                                storage_bytes_per_s_per_gpu, loader_core_eff_frac):
    """Samples per second one GPU's loader can deliver (workers > 0).

    Returns ``(samples_per_s, cpu_limited)``: the supply, and whether CPU (not storage) limits it.
    """
    workers = np.maximum(np.asarray(num_workers, dtype=np.float64), 1.0)
    cores = np.minimum(workers, np.asarray(cores_per_gpu, dtype=np.float64))
    with np.errstate(divide="ignore"):
        cpu_rate = cores * loader_core_eff_frac / np.asarray(preprocess_core_s_per_sample, dtype=np.float64)
        storage_rate = np.asarray(storage_bytes_per_s_per_gpu, dtype=np.float64) / np.asarray(
            input_bytes_per_sample, dtype=np.float64)
    return np.minimum(cpu_rate, storage_rate), cpu_rate <= storage_rate


def data_times_s(micro_batch, busy_s, num_workers, pin_memory, cores_per_gpu, preprocess_core_s_per_sample,
                 input_bytes_per_sample, h2d_bytes_per_sample, storage_bytes_per_s_per_gpu, pcie_bytes_per_s, *,
                 loader_core_eff_frac, h2d_pinned_eff_frac, h2d_pageable_eff_frac):
    """Per micro-batch: time the GPU waits for data, and the loader's supply rate.

    ``num_workers < 0`` means synthetic data (nothing to load). ``busy_s`` is the rest of the micro-batch's
    time, which prefetching workers can hide loading behind.
    Returns a dict of arrays: ``wait_s``, ``supply_samples_per_s``, ``h2d_s``, ``cpu_limited``.
    """
    b = np.asarray(micro_batch, dtype=np.float64)
    w = np.asarray(num_workers, dtype=np.float64)
    synthetic = w < 0
    if synthetic.all():  # synthetic data on every row (the LLM layout search): nothing to load, the same result
        shape = np.broadcast(b, busy_s, w, pin_memory, cores_per_gpu, preprocess_core_s_per_sample,
                             input_bytes_per_sample, h2d_bytes_per_sample, storage_bytes_per_s_per_gpu,
                             pcie_bytes_per_s).shape
        zero = np.zeros(shape)
        return {"wait_s": zero, "supply_samples_per_s": np.full(shape, np.inf), "h2d_s": zero.copy(),
                "cpu_limited": np.zeros(shape, dtype=bool)}
    supply, cpu_limited = loader_supply_samples_per_s(w, cores_per_gpu, preprocess_core_s_per_sample,
                                                      input_bytes_per_sample, storage_bytes_per_s_per_gpu,
                                                      loader_core_eff_frac)
    pinned = np.asarray(pin_memory, dtype=bool)
    h2d_rate = np.asarray(pcie_bytes_per_s, dtype=np.float64) * np.where(pinned, h2d_pinned_eff_frac,
                                                                          h2d_pageable_eff_frac)
    h2d_s = b * np.asarray(h2d_bytes_per_sample, dtype=np.float64) / h2d_rate
    load_s = b / supply
    # in-process loading (workers == 0): one core, not overlapped
    with np.errstate(divide="ignore"):
        inline_s = b * (np.asarray(preprocess_core_s_per_sample, dtype=np.float64)
                        + np.asarray(input_bytes_per_sample, dtype=np.float64)
                        / np.asarray(storage_bytes_per_s_per_gpu, dtype=np.float64))
    overlapped_wait = np.maximum(0.0, load_s - busy_s)
    wait = np.where(w == 0, inline_s, overlapped_wait)
    # pageable copies block the training process; pinned + non_blocking ones hide under compute
    wait = wait + np.where(pinned, np.maximum(0.0, h2d_s - busy_s), h2d_s)
    wait = np.where(synthetic, 0.0, wait)
    supply = np.where(synthetic, np.inf, np.where(w == 0, b / np.maximum(inline_s, 1e-30), supply))
    return {"wait_s": wait, "supply_samples_per_s": supply, "h2d_s": np.where(synthetic, 0.0, h2d_s),
            "cpu_limited": cpu_limited & ~synthetic}
