"""Collective communication cost in bus-bandwidth terms (alpha-beta model).

Definitions follow NVIDIA nccl-tests, ``doc/PERFORMANCE.md``: for a collective on ``n`` ranks moving
``S`` bytes (the nccl-tests "size"), ``algbw = S / t`` and ``busbw = algbw * factor`` with

- all-reduce ``2(n-1)/n``; reduce-scatter and all-gather ``(n-1)/n``; broadcast, reduce, send/recv ``1``.

Bus bandwidth is what a link must sustain, independent of ``n``, so a collective's time is
``t = latency + factor * S / busbw``. Latency is a per-call cost plus one per-hop latency per ring step
(``2(n-1)`` for a ring all-reduce, ``2 log2(nodes)`` across nodes for NCCL's double binary tree;
Thakur, Rabenseifner, Gropp, "Optimization of Collective Communication Operations in MPICH", IJHPCA 2005).

Across nodes, a ring that spans ``N`` nodes sends the whole ``factor * S`` out of every node through its
NICs (NCCL spreads its channels over them), so the inter-node bus bandwidth is the node's total NIC
bandwidth; the ring runs at the slower of the intra- and inter-node bus bandwidths. A two-level
(hierarchical) all-reduce does reduce-scatter inside the node, all-reduce across nodes over each GPU's share
of the NICs, and all-gather inside the node (Horovod's hierarchical all-reduce; Jia et al. 2018).

NVLink SHARP (NVLS) on third-generation NVSwitch reduces in the switch: all-reduce bus bandwidth rises
above the ring's (nccl-tests issue 212: ~480 vs ~370 GB/s on 8x H100).

All functions are pure numpy on broadcastable arrays; ``n`` is the number of ranks.
"""

from __future__ import annotations

import numpy as np

ALL_REDUCE, REDUCE_SCATTER, ALL_GATHER, BROADCAST, REDUCE, SEND_RECV = range(6)
COLLECTIVES = {"all_reduce": ALL_REDUCE, "reduce_scatter": REDUCE_SCATTER, "all_gather": ALL_GATHER,
               "broadcast": BROADCAST, "reduce": REDUCE, "send_recv": SEND_RECV}

ALGO_NONE, ALGO_RING, ALGO_TREE, ALGO_NVLS, ALGO_HIER = range(5)
ALGORITHMS = {"none": ALGO_NONE, "ring": ALGO_RING, "tree": ALGO_TREE, "nvls": ALGO_NVLS, "hierarchical": ALGO_HIER}
ALGO_NAMES = {v: k for k, v in ALGORITHMS.items()}
_AUTO = -1


def bus_factor(collective, n):
    """nccl-tests bus-bandwidth factor: busbw = algbw * factor."""
    n = np.asarray(n, dtype=np.float64)
    if np.ndim(collective) == 0:  # the common case: one collective over many scenarios
        c = int(collective)
        f = 2.0 * (n - 1.0) / n if c == ALL_REDUCE else (n - 1.0) / n if c in (REDUCE_SCATTER, ALL_GATHER) else 1.0
        return f * (n > 1)
    c = np.asarray(collective)
    ar = 2.0 * (n - 1.0) / n
    rs = (n - 1.0) / n
    return np.where(c == ALL_REDUCE, ar, np.where((c == REDUCE_SCATTER) | (c == ALL_GATHER), rs, 1.0)) * (n > 1)


def ring_steps(collective, n):
    """Sequential ring steps of a collective (latency hops)."""
    n = np.asarray(n, dtype=np.float64)
    if np.ndim(collective) == 0:
        c = int(collective)
        return 2.0 * (n - 1.0) if c == ALL_REDUCE else (1.0 + 0.0 * n) if c == SEND_RECV else n - 1.0
    c = np.asarray(collective)
    return np.where(c == ALL_REDUCE, 2.0 * (n - 1.0), np.where(c == SEND_RECV, 1.0, n - 1.0))


def collective_time_s(collective, size_bytes, n_ranks, n_nodes, intra_busbw_bytes_per_s, intra_hop_s,
                      inter_busbw_bytes_per_s, inter_hop_s, nvls, *, base_latency_s, nvls_gain_frac,
                      nvls_latency_s, tree_busbw_frac, algorithm=_AUTO):
    """Time of one collective and the algorithm NCCL-like selection picks (min over ring, tree, NVLS).

    Parameters
    ----------
    collective : code from :data:`COLLECTIVES`
    size_bytes : payload, nccl-tests convention (all-reduce: the buffer; all-gather: the output buffer)
    n_ranks, n_nodes : ranks in the collective and nodes they span (ranks split evenly)
    intra_busbw_bytes_per_s : achievable ring bus bandwidth inside a node
    inter_busbw_bytes_per_s : achievable bus bandwidth out of one node (all its NICs together)
    intra_hop_s, inter_hop_s : per-step latency inside / between nodes
    nvls : the node's switch reduces in-network (NVLink SHARP)
    algorithm : ``-1`` auto, or a code from :data:`ALGORITHMS` to force one

    Returns ``(time_s, algorithm_code)``, both arrays.
    """
    c = np.asarray(collective)
    s = np.asarray(size_bytes, dtype=np.float64)
    n = np.asarray(n_ranks, dtype=np.float64)
    nodes = np.maximum(np.asarray(n_nodes, dtype=np.float64), 1.0)
    multi = nodes > 1
    f = bus_factor(c, n)
    intra = np.asarray(intra_busbw_bytes_per_s, dtype=np.float64)
    inter = np.asarray(inter_busbw_bytes_per_s, dtype=np.float64)
    is_ar = (c == ALL_REDUCE)
    any_multi = bool(np.any(multi))

    # ring: every step crosses one link; a pass over the ring has (n - nodes) intra and `nodes` inter hops
    steps = ring_steps(c, n)
    if any_multi:
        hop = np.where(multi, ((n - nodes) * intra_hop_s + nodes * inter_hop_s) / n, intra_hop_s)
        ring_busbw = np.where(multi, np.minimum(intra, inter), intra)
    else:
        hop, ring_busbw = intra_hop_s, intra
    t = base_latency_s + steps * hop + f * s / ring_busbw
    algo = np.full(np.shape(t), ALGO_RING)
    forced = algorithm != _AUTO

    # NVLS: all-reduce reduced in the NVSwitch (inside a node; across nodes combined with the inter-node ring)
    if (not forced or algorithm == ALGO_NVLS) and np.any(is_ar):
        nvls_ok = is_ar & np.asarray(nvls, dtype=bool)
        if np.any(nvls_ok):
            nvls_busbw = np.minimum(intra * nvls_gain_frac, np.where(multi, inter, np.inf))
            nvls_t = (base_latency_s + nvls_latency_s + 2.0 * intra_hop_s + 2.0 * multi * inter_hop_s
                      + f * s / nvls_busbw)
            better = nvls_ok & ((nvls_t < t) | forced)
            t, algo = np.where(better, nvls_t, t), np.where(better, ALGO_NVLS, algo)

    # double binary tree across nodes (NCCL), chains inside nodes: log latency, slightly lower bandwidth
    if (not forced or algorithm == ALGO_TREE) and any_multi and np.any(is_ar):
        g = n / nodes
        tree_lat = 2.0 * (np.log2(nodes) * inter_hop_s + (g - 1.0) * intra_hop_s)
        tree_t = base_latency_s + tree_lat + f * s / (ring_busbw * tree_busbw_frac)
        better = is_ar & multi & ((tree_t < t) | forced)
        t, algo = np.where(better, tree_t, t), np.where(better, ALGO_TREE, algo)

    # hierarchical (two-level): RS inside, AR across nodes on each GPU's NIC share, AG inside (forced only)
    if algorithm == ALGO_HIER and any_multi:
        g = n / nodes
        hier_t = hierarchical_all_reduce_s(s, g, nodes, intra, intra_hop_s, inter, inter_hop_s, base_latency_s)
        ok = is_ar & multi
        t, algo = np.where(ok, hier_t, t), np.where(ok, ALGO_HIER, algo)

    single = n <= 1
    return np.where(single, 0.0, t), np.where(single, ALGO_NONE, algo)


def hierarchical_all_reduce_s(size_bytes, g, nodes, intra_busbw, intra_hop_s, inter_busbw_node, inter_hop_s,
                              base_latency_s):
    """Two-level all-reduce: reduce-scatter among the ``g`` GPUs of a node, all-reduce of each GPU's
    ``S/g`` shard across ``nodes`` over its share ``inter_busbw_node / g`` of the NICs, all-gather inside."""
    rs_ag = 2.0 * (base_latency_s + (g - 1.0) * intra_hop_s + (g - 1.0) / g * size_bytes / intra_busbw)
    inter_share = inter_busbw_node / g
    cross = base_latency_s + 2.0 * (nodes - 1.0) * inter_hop_s + 2.0 * (nodes - 1.0) / nodes * (size_bytes / g) / inter_share
    return np.where(g > 1, rs_ag, 0.0) + np.where(nodes > 1, cross, 0.0)


def bucketed_time_s(total_bytes, bucket_bytes, time_fn):
    """Time to run a collective over ``total_bytes`` split into buckets of ``bucket_bytes``.

    ``time_fn(size)`` is the time of one collective of ``size`` bytes. Returns ``(total_s, last_bucket_s)``:
    DDP launches each full bucket as it fills; the last (possibly partial) one starts only when the backward
    pass ends, so it can never be hidden.
    """
    total = np.asarray(total_bytes, dtype=np.float64)
    bucket = np.minimum(np.asarray(bucket_bytes, dtype=np.float64), np.maximum(total, 1.0))
    full = np.floor(total / bucket)
    rem = total - full * bucket
    t_full = time_fn(bucket)
    t_rem = np.where(rem > 0, time_fn(np.maximum(rem, 1.0)), 0.0)
    last = np.where(rem > 0, t_rem, t_full)
    return full * t_full + t_rem, np.where(total > 0, last, 0.0)


def algbw_bytes_per_s(size_bytes, time_s):
    """nccl-tests algorithm bandwidth S / t (inf where t = 0)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(time_s > 0, np.asarray(size_bytes, dtype=np.float64) / time_s, np.inf)
