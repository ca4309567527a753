"""Where a parallel group's ranks sit on the NVLink domains: one rule for tp, cp, ep, dp and pp groups.

**Rank order.** Megatron-Core numbers the ranks of a job in the order ``tp-cp-ep-dp-pp``, tp fastest
(``megatron/core/parallel_state.py``, ``initialize_model_parallel(order="tp-cp-ep-dp-pp")`` and its
``RankGenerator``): the dense layers' generator has ``ep = 1`` (so a data-parallel group, which with the
distributed optimizer is the ``dp x cp`` group that shares a stage's weights, takes every ``tp``-th rank), the
experts' generator is ``etp-ep-edp-pp`` (an expert-parallel group is ``ep`` ranks ``etp`` apart), and a pipeline
group takes every ``n / pp``-th rank. So every group is ``size`` ranks ``stride`` apart, and the groups of one
kind tile the job in runs of ``size x stride`` consecutive ranks (:data:`STRIDES` lists them).

**Allocation.** Ranks are laid over the job's nodes in order (``torchrun`` / Slurm: ``gpus_per_node`` consecutive
ranks per node, nodes in allocation order), and on a multi-node NVLink domain (a GB200/GB300 NVL72 rack: 18 trays
of 4 GPUs) a scheduler allocates the job's nodes in blocks that each sit inside one domain: Slurm's
``topology/block`` plugin (SchedMD, topology.conf(5) / topology.yaml, Slurm 23.11) keeps a job of at most one
block's nodes inside one block, and ``sbatch --segment=N`` splits a larger job into segments of ``N`` nodes, each
inside one block; NVIDIA's guidance for NVL72 ("Achieving peak system and workload efficiency on NVIDIA GB200
NVL72 with Slurm block scheduling", NVIDIA technical blog, 2025) recommends a segment of 16 nodes for jobs of
128 GPUs and more, so that a 64-node job runs as 4 segments of 16 trays in 4 racks. :func:`allocation_block_gpus`
takes the segment as the largest divisor of the job's node count that fits in one domain (16 of 64 nodes; 18 of
36: two full racks; 1 on an 8-GPU HGX board, where the domain is the node).

**Placement.** A group of ``size`` ranks ``stride`` apart inside blocks of ``B`` GPUs has
``k = min(size, max(floor(B / stride), 1))`` members in each block it touches and spans ``ceil(size / k)``
blocks (:func:`group_placement`), unless its run of ``size x stride`` ranks fits in a block but does not tile it
(``B mod (size x stride) != 0``): then the worst-placed group straddles two blocks, ``size / 2`` members in each.
The collectives model sees a group as ``domains`` "nodes" of ``k`` ranks each; the ``k`` members of one domain
send through their own NICs, ``k / gpus_per_node`` of one node's inter-node bandwidth (:func:`nic_share`).

Pure numpy on broadcastable float64 arrays.
"""

from __future__ import annotations

import numpy as np

from gpusim.model.distinct import per_distinct

#: the rank stride of each group in Megatron-Core's order (``n``: the job's GPUs): ``tp`` 1, ``cp`` tp, ``ep``
#: etp (the experts' generator), ``dp`` tp (the dp x cp group of the distributed optimizer), ``pp`` n / pp
STRIDES = {"tp": "1", "cp": "tp", "ep": "etp", "dp": "tp", "pp": "n / pp"}


def _f(a):
    return np.asarray(a, dtype=np.float64)


def allocation_block_gpus(n_gpus, gpus_per_node, domain_gpus):
    """GPUs of one allocation block (module docstring): the whole job when it fits in one NVLink domain, otherwise
    ``gpus_per_node`` times the largest divisor of the job's node count (``ceil(n_gpus / gpus_per_node)``) that
    is at most the domain's nodes (``floor(domain_gpus / gpus_per_node)``, at least 1)."""
    n, g, d = _f(n_gpus), _f(gpus_per_node), _f(domain_gpus)
    nodes = np.maximum(np.ceil(n / g), 1.0)
    dom_nodes = np.maximum(np.floor(d / g), 1.0)
    top = int(np.max(dom_nodes)) if np.size(dom_nodes) else 1
    cand = np.arange(1.0, top + 1.0)  # a handful (18 on NVL72): broadcast against every row
    ok = (np.mod(nodes[..., None], cand) == 0) & (cand <= dom_nodes[..., None])
    seg = np.max(np.where(ok, cand, 1.0), axis=-1)
    return np.where(n <= d, n, seg * g)


def group_placement(size, stride, n_gpus, gpus_per_node, domain_gpus):
    """``(members per domain, domains spanned)`` of the worst-placed group of ``size`` ranks ``stride`` apart
    (module docstring; :data:`STRIDES` gives each group's stride). Evaluated once per distinct row (a sweep's
    layouts share one job size and fabric: the allocation block once per distinct one,
    :func:`gpusim.model.distinct.per_distinct`)."""
    hw = [_f(a) for a in (n_gpus, gpus_per_node, domain_gpus)]
    B = per_distinct(allocation_block_gpus, hw) if all(a.ndim <= 1 for a in hw) else allocation_block_gpus(*hw)
    size, stride = np.maximum(_f(size), 1.0), np.maximum(_f(stride), 1.0)
    k = np.minimum(size, np.maximum(np.floor(B / stride), 1.0))
    domains = np.ceil(size / k)
    span = size * stride
    fits = (span <= B) & (span < hw[0]) & (size > 1)  # a group inside one block of several (the job spans blocks)
    if not np.any(fits):  # (the common case of a sweep: skip the remainder test on every row)
        return k, domains
    straddle = fits & (np.mod(B, span) != 0)
    return np.where(straddle, size / 2.0, k), np.where(straddle, 2.0, domains)


def nic_share(members_per_domain, gpus_per_node):
    """The fraction of one node's inter-node bandwidth a group's members in one domain send through:
    ``k / gpus_per_node`` (each GPU has its share of its node's NICs; an NVL72 tray's NICs serve its 4 GPUs)."""
    return _f(members_per_domain) / _f(gpus_per_node)
