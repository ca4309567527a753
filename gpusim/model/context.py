"""Context parallelism (``cp``): one sequence split over ``cp`` ranks, attention computed across them.

Each rank holds ``s / cp`` tokens of every sequence: its GEMMs, norms, activations and tensor-parallel traffic
shrink by ``cp`` (the token count ``T = b s / cp``), while attention still relates every query to every earlier
key, so each rank must see the keys and values of the others. Three published ways and their hierarchy:

- **Ring attention** (Liu, Zaharia, Abbeel, "Ring Attention with Blockwise Transformers", 2023; Megatron-Core /
  Transformer Engine ``cp_comm_type="p2p"``): K/V blocks travel around the ring of ``cp`` ranks, point to
  point; ``cp - 1`` steps, each sending the local K/V block of ``b (s/cp) 2 kv / t`` elements to the next rank
  while the attention of the block received last runs, so a step exposes only ``max(0, send - compute)``. The
  backward pass sends the K/V blocks again together with their gradients ``dK, dV`` accumulated on the way:
  twice the forward volume (Transformer Engine ``AttnFuncWithCPAndKVP2P.backward``).
- **All-gather** (Llama 3, Dubey et al. 2024 section 3.3.2; TE ``cp_comm_type="all_gather"``): K/V are
  all-gathered over the cp group before attention and their gradients reduce-scattered after it; the
  collective is not overlapped (Llama 3 chose it for GQA's small K/V and for document masks).
- [issue 17] **All-to-all over heads** (DeepSpeed-Ulysses, Jacobs et al., arXiv:2309.14509, 2023, section 3; TE
  ``cp_comm_type="a2a"``, ``AttnFuncWithCPAndQKVOA2A``): an all-to-all turns each rank's ``s / cp`` tokens of all
  heads into all ``s`` tokens of ``1 / cp`` of the heads for Q, K and V, the attention runs locally over the whole
  sequence, and one more all-to-all returns its output; the backward pass runs the same four on dO, dQ, dK and dV.
  TE's docstring: "Like DeepSpeed Ulysses, scatter attention heads across the CP group, and gather to get full
  sequence of QKV"; its collectives are not overlapped with the attention. Each rank sends ``(cp - 1) / cp`` of
  ``b (s / cp) (2 q + 2 kv) / t`` elements per pass, less as ``cp`` grows (the ring sends
  ``(cp - 1) b (s / cp) 2 kv / t``, nearly constant, but under the attention, block by block).
  TE refuses it unless the attention heads and the K/V heads on each tp rank divide by ``cp``
  (:func:`gpusim.rules.check_cp`), so with GQA's few K/V heads it reaches a small ``cp`` only.
- [issue 17] **All-to-all inside, ring across** (TE ``cp_comm_type="a2a+p2p"``: "First applying a2a to QKV across
  each CP sub-group (e.g., via NVLink), then exchanging KV with p2p between sub-groups (e.g., via IBLink)";
  Megatron-Core ``--hierarchical-context-parallel-sizes``): gpusim takes the sub-group as the cp ranks one NVLink
  domain holds (``c1``, :func:`cp_group_nodes`) and rings over the ``c2 = cp / c1`` domains. The all-to-alls are
  Ulysses' over ``c1`` ranks (each rank's ``b (s / cp) width / t`` share); the ring then passes ``c2 - 1`` K/V blocks
  of ``s / c2`` tokens of ``1 / c1`` of the heads, the flat ring's block size, each under the attention of a block
  pair ``c1`` times the flat ring's, so less of it shows. The heads of each tp rank must divide by ``c1``.

**Causal load balancing** (Megatron-Core ``get_batch_on_this_cp_rank``; Llama 3 section 3.3.2): the sequence is
cut into ``2 cp`` chunks and rank ``r`` holds chunks ``r`` and ``2 cp - 1 - r``, so every rank does the same
half of the causal score matrix: ``2 b s (s / cp) q / t`` forward FLOPs. It needs ``s % (2 cp) == 0``.

The cp ranks sit inside the tensor-parallel groups' neighbours (Megatron's rank order tp, cp, dp, pp): the ring
stays in one NVLink domain while ``tp cp`` GPUs fit in it, and otherwise its slowest hop crosses the network
on each GPU's share of the node's NICs (all of a node's GPUs send at once).

Gradients are reduced, and the distributed optimizer shards, over the ``dp x cp`` ranks that hold the same
weights (Megatron ``get_data_parallel_group(with_context_parallel=True)``).

Pure numpy on broadcastable float64 arrays.
"""

from __future__ import annotations

import numpy as np

from gpusim.model import comm as C

RING, ALL_GATHER, A2A, A2A_P2P = 0, 1, 2, 3
CP_KINDS = {"ring": RING, "p2p": RING, "all-gather": ALL_GATHER, "all_gather": ALL_GATHER, "a2a": A2A,
            "a2a+p2p": A2A_P2P}


def _f(a):
    return np.asarray(a, dtype=np.float64)


def kv_block_bytes(micro_batch, seq_len, kv_dim, elem_bytes, tp, cp):
    """Bytes of one rank's K and V block: ``b (s / cp) 2 kv e / t`` (GQA's K/V heads split over tp as far as
    there are heads; replicated beyond)."""
    return _f(micro_batch) * _f(seq_len) / _f(cp) * 2.0 * _f(kv_dim) * elem_bytes / _f(tp)


def ring_bytes_per_layer(micro_batch, seq_len, kv_dim, elem_bytes, tp, cp):
    """Bytes each rank sends in one layer's ring attention, ``(forward, backward)``: ``cp - 1`` K/V blocks
    forward; K/V and dK/dV, twice that, backward."""
    fwd = (_f(cp) - 1.0) * kv_block_bytes(micro_batch, seq_len, kv_dim, elem_bytes, tp, cp)
    return fwd, 2.0 * fwd


def cp_group_nodes(tp, cp, gpus_per_node):
    """(cp ranks per node, nodes the cp group spans): ranks ``tp`` apart, as many as the node holds."""
    per_node = np.minimum(_f(cp), np.maximum(_f(gpus_per_node) / _f(tp), 1.0))
    return per_node, _f(cp) / per_node


def hier_inner_ranks(cp, tp, block):
    """[issue 17] The all-to-all sub-group of a2a+p2p: the largest power-of-two share of the ``cp`` ranks (``tp``
    apart) that one NVLink allocation block of ``block`` GPUs holds, ``gcd(cp, 2^floor(log2(max(block / tp, 1))))``,
    so that it divides ``cp`` (Megatron-Core's ``--hierarchical-context-parallel-sizes c1 c2`` needs ``c1 c2 = cp``).
    Hand-worked: cp 16, tp 8 in a 64-GPU block: 8; an 8-GPU node at tp 2: 4; at tp 8: 1 (the plain ring). The rules
    (:func:`gpusim.rules.check_cp`) and the model take it from here."""
    lim = np.maximum(np.floor(_f(block) / np.maximum(_f(tp), 1.0)), 1.0)
    pow2 = np.exp2(np.floor(np.log2(lim))).astype(np.int64)
    return np.gcd(np.rint(_f(cp)).astype(np.int64), pow2).astype(np.float64)


def cp_layer_comm_s(x: dict, p, *, attn_f_s, attn_b_s, kv_bytes_elem, tp, g,
                    domain=None, v_width=None, o_width=None) -> tuple[np.ndarray, np.ndarray]:
    """Exposed seconds of one layer's context-parallel communication, ``(forward, backward)``, per micro-batch.

    ``attn_f_s`` / ``attn_b_s``: the rank's attention-core time of the layer (all of its ``cp`` blocks), under
    which the ring's sends hide block by block. ``x`` holds ``cp``, ``cp_kind``, ``micro_batch``, ``seq_len``,
    ``kv_dim`` and the fabric arrays of :func:`gpusim.model.llm.llm_terms`; ``g`` GPUs per node (sharing its NICs),
    ``domain`` GPUs per NVLink domain (default ``g``; a GB200 NVL72 rack's 72 over trays of 4). ``v_width`` /
    ``o_width``: the values' and the attention output's widths over the heads for Ulysses' all-to-alls (default
    ``kv_dim`` and ``q_dim``; MLA's ``v_dim`` for both).
    """
    cp = _f(x.get("cp", 1.0))
    if not np.any(cp > 1):
        z = np.zeros(np.shape(cp))
        return z, z
    kind = np.asarray(x.get("cp_kind", RING))
    b, s, kv = _f(x["micro_batch"]), _f(x["seq_len"]), _f(x["kv_dim"])
    intra, inter = _f(x["intra_busbw_bytes_per_s"]), _f(x["inter_busbw_bytes_per_s"])
    blk = g if domain is None else domain
    per_node, nodes = cp_group_nodes(tp, cp, blk)
    cross = nodes > 1
    # [issue 17] a2a+p2p's sub-group (c1, inside one allocation block) and the c2 = cp / c1 blocks its ring spans
    c1 = hier_inner_ranks(cp, tp, blk) if np.any(kind == A2A_P2P) else cp
    c2 = cp / c1

    def coll(kind_code, size, ranks, nn, a, bw):
        return C.collective_min_time_s(kind_code, size, ranks, nn, a, x["intra_hop_s"], bw, x["inter_hop_s"], x["nvls"],
                                   base_latency_s=p.coll_base_latency_s, nvls_gain_frac=p.nvls_gain_frac,
                                   nvls_latency_s=p.nvls_latency_s, tree_busbw_frac=p.tree_busbw_frac,
                                   ll_max_busbw_bytes_per_s=x.get("ll_max_busbw_bytes_per_s", np.inf),
                                   ll128=x.get("ll128", True), tuning=C.tuning_from_params(p),
                                   host_cpu=x.get("host_cpu", C.HOST_INTEL))

    block = kv_block_bytes(b, s, kv, kv_bytes_elem, tp, cp)
    ring_f = ring_b = ag = rs = 0.0
    hier = kind == A2A_P2P
    if np.any((kind == RING) | hier):
        # ring: one block per step to the next rank; the slowest hop sets the pace of the lock-step ring. [issue 17]
        # a2a+p2p rings over its c2 sub-groups only, each step under c1 times the flat ring's attention
        ring_cross = np.where(hier, c2 > 1, cross)
        link = np.where(ring_cross, inter / g, intra)
        send = coll(C.SEND_RECV, block, 2.0, np.where(ring_cross, 2.0, 1.0), link, link)
        members = np.where(hier, c2, cp)
        steps = members - 1.0
        step_f = attn_f_s / members  # load balanced: every step is one block pair of equal (half-causal) work
        step_b = attn_b_s / members
        ring_f = steps * np.maximum(send - step_f, 0.0)
        ring_b = steps * np.maximum(2.0 * send - step_b, 0.0)  # K/V again and dK/dV
    if np.any(kind == ALL_GATHER):
        # all-gather of K/V before attention, reduce-scatter of dK/dV after it, not overlapped; the group's share
        # of the NICs is its ranks per node over the node's GPUs
        full_kv = block * cp
        ag = coll(C.ALL_GATHER, full_kv, cp, nodes, intra, inter * per_node / g)
        rs = coll(C.REDUCE_SCATTER, full_kv, cp, nodes, intra, inter * per_node / g)
    a2a = 0.0
    if np.any((kind == A2A) | hier):
        # [issue 17] Ulysses: Q, K, V and the output each cross the cp group in their own all-to-all, not overlapped;
        # a2a+p2p: across its c1 ranks inside one allocation block only
        ranks = np.where(hier, c1, cp)
        q = _f(x["q_dim"])
        a2a = a2a_pass_s(coll, b, s, q, kv, kv_bytes_elem, tp, cp, np.where(hier, 1.0, nodes), intra,
                         inter * per_node / g, ranks=np.maximum(ranks, 2.0),
                         v_dim=kv if v_width is None else v_width, o_dim=q if o_width is None else o_width)
        a2a = np.where(ranks > 1, a2a, 0.0)
    on = cp > 1
    a2a_ring_f, a2a_ring_b = a2a + ring_f, a2a + ring_b
    fwd = np.where(on, np.where(kind == ALL_GATHER, ag, np.where(kind == A2A, a2a,
                                                                 np.where(hier, a2a_ring_f, ring_f))), 0.0)
    # the backward pass re-gathers K/V (all-gather) or runs the same four all-to-alls on the gradients (a2a)
    bwd = np.where(on, np.where(kind == ALL_GATHER, ag + rs, np.where(kind == A2A, a2a,
                                                                      np.where(hier, a2a_ring_b, ring_b))), 0.0)
    return fwd, bwd


def attention_call_tokens(seq_len, cp, kind, c1):
    """[issue 17] The query tokens one attention kernel call of a rank sees: ``s / cp`` for the ring and the
    all-gather (the rank's own chunk), ``s`` for Ulysses (every token of ``1 / cp`` of the heads), ``s / c2`` for
    a2a+p2p (its sub-group's ``c1`` chunks, :func:`hier_inner_ranks`, ``c2 = cp / c1``)."""
    s, cp, kind = _f(seq_len), _f(cp), np.asarray(kind)
    return np.where(kind == A2A, s, np.where(kind == A2A_P2P, s * _f(c1) / cp, s / cp))


def a2a_tensor_bytes(micro_batch, seq_len, width, elem_bytes, tp, cp):
    """[issue 17] Bytes of one rank's share of a ``width``-wide activation (Q or the attention output: ``q``; K or V:
    ``kv``) that one Ulysses all-to-all redistributes: ``b (s / cp) width e / t`` (the same before and after: ``s / cp``
    tokens of every local head, or ``s`` tokens of ``1 / cp`` of them)."""
    return _f(micro_batch) * _f(seq_len) / _f(cp) * _f(width) * elem_bytes / _f(tp)


def a2a_pass_s(coll, micro_batch, seq_len, q_dim, kv_dim, elem_bytes, tp, cp, nodes, intra, inter_share, ranks=None,
               v_dim=None, o_dim=None):
    """[issue 17] Seconds of one pass's Ulysses all-to-alls (forward: Q, K, V, output; backward: dO, dQ, dK, dV; the
    same four sizes: Q ``q_dim``, K ``kv_dim``, V ``v_dim`` (default ``kv_dim``; MLA's value width) and the output
    ``o_dim`` (default ``q_dim``; MLA's value width)) over ``ranks`` (default ``cp``; a2a+p2p: the sub-group):
    ``coll(kind, bytes, ranks, nodes, intra bw, inter bw)`` prices each one. Hand-worked, Llama 3
    70B (q 8192, kv 1024), b 1, s 32768, bf16, tp 2, cp 4: Q and O 1 x 8192 x 8192 x 2 / 2 = 64 MiB each, K and V 8
    MiB each, 144 MiB per pass, of which each rank sends 3/4."""
    n = cp if ranks is None else ranks
    widths = (q_dim, kv_dim, kv_dim if v_dim is None else v_dim, q_dim if o_dim is None else o_dim)
    return sum(coll(C.ALL_TO_ALL, a2a_tensor_bytes(micro_batch, seq_len, w, elem_bytes, tp, cp), n, nodes, intra,
                    inter_share) for w in widths)
