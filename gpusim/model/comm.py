"""Collective communication as NCCL runs it: algorithms x protocols, chosen by the lowest predicted time.

Bus bandwidth follows NVIDIA nccl-tests, ``doc/PERFORMANCE.md``: for a collective on ``n`` ranks moving
``S`` bytes (the nccl-tests "size"), ``algbw = S / t`` and ``busbw = algbw * factor`` with

- all-reduce ``2(n-1)/n``; reduce-scatter, all-gather and all-to-all ``(n-1)/n``; broadcast, reduce,
  send/recv ``1``.

**The size regime.** NCCL moves data with one of three protocols (NCCL ``src/graph/tuning.cc``,
``src/device/prims_*.h``): *LL* (8-byte flag per 8 bytes of data: lowest latency, half the link's
bandwidth), *LL128* (a flag per 128-byte line: ~92%, more latency) and *Simple* (bulk copies with
fences: all of the bandwidth, the highest per-hop latency, which is where its chunked pipelining shows). Its
tuner predicts every (algorithm, protocol) pair with

``t = base_lat(a, p) + hops(a, n, nodes) * hop_lat(a, p, level) + factor * S / (busbw * proto_frac(a, p))``

and runs the fastest; this module does the same with the same published constants (held in
:class:`~gpusim.params.ModelParams`, with NCCL's file as the source), on top of the link's own latency
and achievable bus bandwidth from the hardware database:

- *ring* (every collective): ``2(n-1)`` hops for all-reduce, ``n-1`` for the others; across nodes
  ``2 * nodes`` of the all-reduce hops cross the network (NCCL >= 2.19's ``nInterSteps``);
- *tree* (all-reduce across nodes): NCCL's double binary tree, ``2((g-1) intra + log2(nodes) inter)``
  hops, bus bandwidth ``tree_busbw_frac`` of the ring's, with NCCL's own mid-size correction table
  (``treeCorrectionFactor``: trees "are not perfectly sticking to the model for medium sizes");
- *nvls* (all-reduce in one NVSwitch domain with NVLink SHARP): the switch reduces, bus bandwidth
  ``nvls_gain_frac`` above the ring's (nccl-tests issue 212). Its start-up is NCCL's NVLS latency plus the
  fill of its pipeline: ``nvls_channels`` channels, each loop of which moves one chunk per rank of the NVLS domain
  (``src/device/all_reduce.h``: ``loopSize = nChannels * nvls->nHeads * chunkSize``), into the switch and out
  again, so the fill is ``2 x channels x ranks x chunk`` bytes [issue 18: it grows with the domain, 9x from 8 GPUs
  to an NVL72 rack], with chunks that NCCL shrinks for smaller messages (``src/enqueue.cc``: 128 KiB, 64 KiB below
  32 x concurrent ops x chunk, 32 KiB below 8x, 16 KiB below 2x; concurrent ops = channels x ranks). This is why
  NVLS wins only above tens of MiB although its peak is the highest; its gain over the ring is ``nvls_gain_frac``
  (measured on Hopper) x NCCL's per-architecture ``nvlsEfficiency`` relative to Hopper's (Blackwell 0.74 / 0.85);
- *nvls_tree* (NVLS inside each node, a tree across nodes; the NVLS kernel loop inside the node, so NVLS's pipeline
  fill too, [issue 18]) and *collnet* (InfiniBand SHARP: the switches
  reduce, so each node sends and receives the buffer once, up to twice the ring's inter-node bus bandwidth);
- a tree's network phase [issue 18]: between two nodes each node sends the buffer once per direction (the ring
  sends ``factor x S``), so its network term is ``factor x`` the NICs' bandwidth; beyond two nodes an interior node
  of the double binary tree carries about twice that, so ``factor / 2 x``. NCCL's tuner encodes the same
  (``src/graph/tuning.cc``: tree bandwidth ``bwIntra`` for ``nNodes <= 2``, ``bwInter`` beyond; NVLS-tree
  ``min(bwIntra, nNodes <= 2 ? bwInter : bwInter/2)`` with its 5/6 bus-to-algorithm ratio,
  ``ModelParams.nvls_tree_busbw_frac``). This is how two nodes over 8x 200 Gb/s GPUDirect-TCPXO reach a bus
  bandwidth above their NICs' total while four nodes of H100 gain nothing from NVLS-tree over the ring;
- *hierarchical* (forced only): reduce-scatter inside, all-reduce across, all-gather inside (Horovod).

**The host CPU** [issue 18]: NCCL's tuner tells Intel, AMD and other hosts apart (``src/graph/tuning.cc``). A ring
across nodes posts a network operation every step, so no step takes less than the host's network post overhead
(``getNetOverhead``: 1 us Intel, 2 us AMD, 1 us other; x3 for Simple; all-reduce, reduce-scatter, all-gather), and the
LL protocol's bandwidth cap across nodes is the host CPU's row of ``llMaxBws``, the GPU's only inside one node.

**Across nodes**, a ring sends ``factor * S`` out of every node through its NICs (NCCL spreads channels
over them), so the inter-node bus bandwidth is the node's total NIC bandwidth; the ring runs at the slower
of the two levels. **All-to-all** (expert parallelism) sends ``S/n`` to every peer at once: inside the
node at the GPU's link bandwidth (an NVSwitch is non-blocking; a full mesh uses every link), across nodes
through the GPU's share of the NICs, so it is bisection-bound: ``(n-g)/n * S`` per GPU over ``inter / g``.
**Send/recv** across nodes is one GPU's flow through its share of the NICs.

All functions are pure numpy on broadcastable arrays; ``n`` is the number of ranks.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

ALL_REDUCE, REDUCE_SCATTER, ALL_GATHER, BROADCAST, REDUCE, SEND_RECV, ALL_TO_ALL = range(7)
COLLECTIVES = {"all_reduce": ALL_REDUCE, "reduce_scatter": REDUCE_SCATTER, "all_gather": ALL_GATHER,
               "broadcast": BROADCAST, "reduce": REDUCE, "send_recv": SEND_RECV, "all_to_all": ALL_TO_ALL}

ALGO_NONE, ALGO_RING, ALGO_TREE, ALGO_NVLS, ALGO_HIER, ALGO_NVLS_TREE, ALGO_COLLNET, ALGO_P2P = range(8)
ALGORITHMS = {"none": ALGO_NONE, "ring": ALGO_RING, "tree": ALGO_TREE, "nvls": ALGO_NVLS, "hierarchical": ALGO_HIER,
              "nvls_tree": ALGO_NVLS_TREE, "collnet": ALGO_COLLNET, "p2p": ALGO_P2P}
ALGO_NAMES = {v: k for k, v in ALGORITHMS.items()}

#: [issue 18] the host CPU as NCCL's tuner tells them apart (``ncclTopoCpuType``): its network post overhead and, across
#: nodes, its LL bandwidth cap depend on it
HOST_INTEL, HOST_AMD, HOST_OTHER = 0, 1, 2
HOST_CPUS = {"intel": HOST_INTEL, "amd": HOST_AMD, "other": HOST_OTHER}
HOST_CPU_NAMES = {v: k for k, v in HOST_CPUS.items()}

PROTO_NONE, PROTO_LL, PROTO_LL128, PROTO_SIMPLE = -1, 0, 1, 2
PROTOCOLS = {"ll": PROTO_LL, "ll128": PROTO_LL128, "simple": PROTO_SIMPLE}
PROTO_NAMES = {v: k for k, v in PROTOCOLS.items()} | {PROTO_NONE: "-"}
_AUTO = -1

#: NCCL's ``treeCorrectionFactor`` (src/graph/tuning.cc, NCCL 2.19): tree bandwidth multiplier per power of two of
#: the size from 64 B to 256 MiB, per protocol (LL, LL128, Simple); 1 above.
TREE_CORRECTION = np.array([
    [1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0],
    [1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0],
    [.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9]])
_TREE_CORR = np.concatenate([TREE_CORRECTION, np.ones((3, 1))], axis=1)  # last column: above 256 MiB


@dataclass(frozen=True)
class Tuning:
    """The protocol constants of the tuner (seconds, fractions), one value per protocol (LL, LL128, Simple).

    Built from :class:`~gpusim.params.ModelParams` by :func:`tuning_from_params`; the defaults and their source
    (NCCL ``src/graph/tuning.cc``) are there.
    """

    ring_base_s: tuple[float, float, float]
    tree_base_s: tuple[float, float, float]
    intra_ring_hop_s: tuple[float, float, float]
    intra_tree_hop_s: tuple[float, float, float]
    inter_ring_hop_s: tuple[float, float, float]
    inter_tree_hop_s: tuple[float, float, float]
    ring_proto_frac: tuple[float, float, float]
    tree_proto_frac: tuple[float, float, float]
    nvls_channels: float
    nvls_chunk_bytes: float
    nvls_tree_hop_s: float
    collnet_latency_s: float
    collnet_busbw_frac: float
    #: [issue 18] per host CPU (:data:`HOST_CPUS` order): NCCL's network post overhead (the least time of a ring step
    #: across nodes; Simple pays ``net_overhead_simple_mult`` times it) and the LL cap across 2 and more than 2 nodes
    net_overhead_s: tuple[float, float, float]
    net_overhead_simple_mult: float
    ll_max_multi_node_busbw_bytes_per_s: tuple[tuple[float, float], ...]
    nvls_tree_busbw_frac: float = 5.0 / 6.0
    #: [issue 17] an all-to-all's in-node bus bandwidth / the ring's (ModelParams.a2a_intra_busbw_frac)
    a2a_intra_busbw_frac: float = 1.0

    def hop_extra(self, level: str, algo: str) -> np.ndarray:
        """Per-hop latency of each protocol beyond the link's own (LL) latency: NCCL's ``hwLat`` of the
        protocol minus its LL ring figure, so the hardware database's link latency carries the wire and this
        table carries the protocol's synchronisation and chunking."""
        table = getattr(self, f"{level}_{algo}_hop_s")
        ref = getattr(self, f"{level}_ring_hop_s")[0]
        return np.asarray(table, dtype=np.float64) - ref


_TUNING_CACHE: dict[int, tuple[object, Tuning]] = {}


def _per_host_cpu(p, name: str) -> list:
    """A per-host-CPU parameter in :data:`HOST_CPUS` order; a host the params leave out (``ModelParams.replace``
    skips the validator that fills it) keeps the field's default, NCCL's figure."""
    given, default = getattr(p, name), type(p).model_fields[name].default
    return [given.get(k, default[k]) for k in HOST_CPUS]


def tuning_from_params(p) -> Tuning:
    """:class:`Tuning` of a :class:`~gpusim.params.ModelParams` (cached per object: params are frozen)."""
    hit = _TUNING_CACHE.get(id(p))
    if hit is not None and hit[0] is p:
        return hit[1]
    h = p.nccl_hop_latency_s
    t = Tuning(ring_base_s=tuple(p.nccl_base_latency_s["ring"]), tree_base_s=tuple(p.nccl_base_latency_s["tree"]),
               intra_ring_hop_s=tuple(h["intra-ring"]), intra_tree_hop_s=tuple(h["intra-tree"]),
               inter_ring_hop_s=tuple(h["inter-ring"]), inter_tree_hop_s=tuple(h["inter-tree"]),
               ring_proto_frac=tuple(p.proto_busbw_frac["ring"]), tree_proto_frac=tuple(p.proto_busbw_frac["tree"]),
               nvls_channels=float(p.nvls_channels),
               nvls_chunk_bytes=float(p.nvls_chunk_bytes), nvls_tree_hop_s=float(p.nvls_tree_hop_s),
               collnet_latency_s=float(p.collnet_latency_s), collnet_busbw_frac=float(p.collnet_busbw_frac),
               nvls_tree_busbw_frac=float(p.nvls_tree_busbw_frac),
               a2a_intra_busbw_frac=float(p.a2a_intra_busbw_frac),
               net_overhead_s=tuple(float(v) for v in _per_host_cpu(p, "nccl_net_overhead_s")),
               net_overhead_simple_mult=float(p.nccl_net_overhead_simple_mult),
               ll_max_multi_node_busbw_bytes_per_s=tuple(
                   (float(a), float(b)) for a, b in _per_host_cpu(p, "nccl_ll_max_multi_node_busbw_bytes_per_s")))
    if len(_TUNING_CACHE) > 64:
        _TUNING_CACHE.clear()
    _TUNING_CACHE[id(p)] = (p, t)
    return t


def default_tuning() -> Tuning:
    from gpusim.params import DEFAULT_PARAMS

    return tuning_from_params(DEFAULT_PARAMS)


def bus_factor(collective, n):
    """nccl-tests bus-bandwidth factor: busbw = algbw * factor (0 for one rank)."""
    n = np.asarray(n, dtype=np.float64)
    if np.ndim(collective) == 0:  # the common case: one collective over many scenarios
        c = int(collective)
        f = (2.0 * (n - 1.0) / n if c == ALL_REDUCE
             else (n - 1.0) / n if c in (REDUCE_SCATTER, ALL_GATHER, ALL_TO_ALL) else 1.0)
        return f * (n > 1)
    c = np.asarray(collective)
    ar = 2.0 * (n - 1.0) / n
    rs = (n - 1.0) / n
    return np.where(c == ALL_REDUCE, ar,
                    np.where((c == REDUCE_SCATTER) | (c == ALL_GATHER) | (c == ALL_TO_ALL), rs, 1.0)) * (n > 1)


def ring_steps(collective, n):
    """Sequential ring steps of a collective (latency hops); one for send/recv and all-to-all (all peers at once)."""
    n = np.asarray(n, dtype=np.float64)
    if np.ndim(collective) == 0:
        c = int(collective)
        return (2.0 * (n - 1.0) if c == ALL_REDUCE else (1.0 + 0.0 * n) if c in (SEND_RECV, ALL_TO_ALL)
                else n - 1.0)
    c = np.asarray(collective)
    return np.where(c == ALL_REDUCE, 2.0 * (n - 1.0), np.where((c == SEND_RECV) | (c == ALL_TO_ALL), 1.0, n - 1.0))


_NP = 4  # a choice is coded algorithm * _NP + protocol + 1 (protocol -1 = none)


def _keep_choice(t, code, cand_t, cand_code, ok=None, force=False):
    """Running minimum: keep ``cand_t`` (coded ``cand_code``) where it is faster (or forced) and ``ok``."""
    better = (cand_t < t) if not force else np.isfinite(cand_t)
    if ok is not None:
        better = better & ok
    return np.where(better, cand_t, t), np.where(better, cand_code, code)


def _keep_time(t, code, cand_t, cand_code, ok=None, force=False):
    """Running minimum of the times alone (the automatic choice, when nobody asks which candidate won)."""
    return np.minimum(t, cand_t if ok is None else np.where(ok, cand_t, np.inf)), code



def collective_choice(collective, size_bytes, n_ranks, n_nodes, intra_busbw_bytes_per_s, intra_hop_s,
                      inter_busbw_bytes_per_s, inter_hop_s, nvls, *, base_latency_s, nvls_gain_frac, nvls_latency_s,
                      tree_busbw_frac, algorithm=_AUTO, protocol=_AUTO, sharp=False, ll_max_busbw_bytes_per_s=np.inf,
                      ll128=True, tuning: Tuning | None = None, time_only: bool = False, host_cpu=HOST_INTEL):
    """Time of one collective and the (algorithm, protocol) NCCL's tuner would run.

    Arguments as :func:`collective_time_s`. Returns ``(time_s, algorithm_code, protocol_code)`` arrays
    (protocol codes from :data:`PROTOCOLS`; :data:`PROTO_NONE` for one rank and the forced hierarchical form).
    ``time_only`` (automatic choice only): the running minimum of the times without tracking which candidate won
    (what the step model needs; the codes come back as ``None``).
    """
    time_only = time_only and algorithm == _AUTO
    keep = _keep_time if time_only else _keep_choice
    tn = tuning or default_tuning()
    c = int(collective)
    s = np.asarray(size_bytes, dtype=np.float64)
    n = np.asarray(n_ranks, dtype=np.float64)
    nodes = np.maximum(np.asarray(n_nodes, dtype=np.float64), 1.0)
    multi = nodes > 1
    any_multi = bool(np.any(multi))
    g = n / nodes
    f = bus_factor(c, n)
    intra = np.asarray(intra_busbw_bytes_per_s, dtype=np.float64)
    inter = np.asarray(inter_busbw_bytes_per_s, dtype=np.float64)
    ihop = np.asarray(intra_hop_s, dtype=np.float64)
    ohop = np.asarray(inter_hop_s, dtype=np.float64)
    forced = algorithm != _AUTO
    protos = (PROTO_LL, PROTO_LL128, PROTO_SIMPLE) if protocol == _AUTO else (protocol,)
    # LL128 where NCCL enables it by default (asked for by name, as NCCL_PROTO=LL128 does, it runs anywhere)
    l128 = np.asarray(ll128, dtype=bool) if protocol == _AUTO else np.asarray(True)
    if not np.any(l128):
        protos = tuple(q for q in protos if q != PROTO_LL128)
    ok128 = None if np.all(l128) else l128

    ll_cap = np.asarray(ll_max_busbw_bytes_per_s, dtype=np.float64)
    if any_multi:
        # [issue 18] across nodes NCCL caps LL by the host CPU's row of llMaxBws, not the GPU's ("for multi-node, we
        # look at CPU type"); a GPU without a cap (RCCL) or a transport that cannot run LL (0) keeps its own
        caps = np.asarray(tn.ll_max_multi_node_busbw_bytes_per_s, dtype=np.float64)
        host_cap = caps[np.asarray(host_cpu, dtype=np.int64), np.where(nodes <= 2.0, 0, 1)]
        ll_cap = np.where(multi & np.isfinite(ll_cap) & (ll_cap > 0), host_cap, ll_cap)
    # an LL cap of 0: LL cannot run there (a transport whose required configuration leaves it out, NCCL_PROTO);
    # a protocol asked for by name runs anyway, as NCCL_PROTO=LL would
    okll = None if (protocol != _AUTO or np.all(ll_cap > 0)) else ll_cap > 0
    if protocol != _AUTO:
        ll_cap = np.where(ll_cap > 0, ll_cap, np.inf)
    if okll is not None and not np.any(okll):
        protos = tuple(q for q in protos if q != PROTO_LL)

    def okp(p, ok=None):
        """Rows where protocol ``p`` may run (and ``ok``)."""
        gate = ok128 if p == PROTO_LL128 else okll if p == PROTO_LL else None
        if gate is None:
            return ok
        return gate if ok is None else ok & gate
    simple_ok = PROTO_SIMPLE in protos
    x_intra_ring, x_inter_ring = tn.hop_extra("intra", "ring"), tn.hop_extra("inter", "ring")
    shape = np.broadcast_shapes(np.shape(s), np.shape(n), np.shape(nodes), np.shape(intra), np.shape(inter),
                                np.shape(ihop), np.shape(ohop))
    t = np.full(shape, np.inf)
    code = np.full(shape, ALGO_RING * _NP + PROTO_SIMPLE + 1)
    base = base_latency_s
    fs = f * s

    def proto_bw(bw, p):
        """Bus bandwidth of protocol ``p`` on a Simple-protocol bus bandwidth ``bw``; LL capped by NCCL's llMaxBws.

        An LL cap of 0 (a transport that cannot run LL, e.g. TCPXO) gives a bandwidth of 0 and so an infinite time;
        that candidate is masked out: NaN here keeps the division by it from warning (a NaN time is never kept)."""
        out = bw * tn.ring_proto_frac[p]
        if p != PROTO_LL:
            return out
        out = np.minimum(out, ll_cap)
        return np.where(out > 0, out, np.nan) if np.any(out <= 0) else out

    if c in (SEND_RECV, ALL_TO_ALL):
        # point to point: every peer at once, one hop; across nodes each GPU's flow uses its share of the NICs
        if c == SEND_RECV:
            vol = s / np.where(multi, inter / g, intra) if any_multi else s / intra
        else:
            # [issue 17] NCCL's point-to-point all-to-all reaches a2a_intra_busbw_frac of the ring's in-node bandwidth
            # (DeepEP's and HybridEP's in-node exchanges, which call this too, by assumption: ModelParams' source)
            in_node = np.where(g > 1, (g - 1.0) / n * s / (intra * tn.a2a_intra_busbw_frac), 0.0)
            vol = np.maximum(in_node, (n - g) / n * s * g / inter) if any_multi else in_node
        for p in protos if (not forced or algorithm == ALGO_P2P) else ():
            hop = np.where(multi, ohop + x_inter_ring[p], ihop + x_intra_ring[p]) if any_multi else ihop + x_intra_ring[p]
            bwf = tn.ring_proto_frac[p]
            xfer = np.maximum(vol / bwf, s / ll_cap) if p == PROTO_LL else vol / bwf
            cand = base + tn.ring_base_s[p] + hop + xfer
            t, code = keep(t, code, cand, ALGO_P2P * _NP + p + 1, okp(p))
    else:
        # ring: (steps - inter_steps) hops inside nodes, inter_steps across
        steps = ring_steps(c, n)
        if any_multi:
            inter_steps = np.where(multi, 2.0 * nodes if c == ALL_REDUCE else nodes - (c != BROADCAST and c != REDUCE),
                                   0.0)
            inter_steps = np.minimum(inter_steps, steps)
            intra_steps = steps - inter_steps
            ring_bw = np.where(multi, np.minimum(intra, inter), intra)
        else:
            intra_steps, inter_steps, ring_bw = steps, 0.0, intra
        if not forced or algorithm == ALGO_RING:
            # [issue 18] a ring across nodes posts a network operation every step, so no step takes less than NCCL's
            # network post overhead of the host CPU (tuning.cc: "Inter-node rings still have to launch nsteps * net
            # overhead", intraLat = max(intraLat, netOverhead), x3 for Simple; not for broadcast and reduce)
            post = (np.asarray(tn.net_overhead_s, dtype=np.float64)[np.asarray(host_cpu, dtype=np.int64)]
                    if any_multi and c not in (BROADCAST, REDUCE) else None)
            for p in protos:
                intra_hop_p = ihop + x_intra_ring[p]
                if post is not None:
                    floor = post * (tn.net_overhead_simple_mult if p == PROTO_SIMPLE else 1.0)
                    intra_hop_p = np.where(multi, np.maximum(intra_hop_p, floor), intra_hop_p)
                cand = (base + tn.ring_base_s[p] + intra_steps * intra_hop_p + inter_steps * (ohop + x_inter_ring[p])
                        + fs / proto_bw(ring_bw, p))
                t, code = keep(t, code, cand, ALGO_RING * _NP + p + 1, okp(p))

        if c == ALL_REDUCE:
            # nvls: 0 / False where the switch cannot reduce; otherwise NVLS's bandwidth relative to the generation
            # nvls_gain_frac was measured on (1 = Hopper; NCCL's per-architecture nvlsEfficiency ratio, from the row
            # layer), so the NVLS gain over the ring is nvls_gain_frac x that
            nvf = np.asarray(nvls, dtype=np.float64)
            nv = nvf > 0
            gain = nvls_gain_frac * np.where(nv, nvf, 1.0)
            # NVLS inside one NVSwitch domain: NCCL's NVLS latency plus the fill of its chunk pipeline
            if simple_ok and (not forced or algorithm == ALGO_NVLS) and np.any(nv & ~multi):
                # two pipelined phases (scatter into the switch, multicast gather out of it), each filling one loop
                # of every channel: a loop moves nHeads chunks (one per rank of the NVLS domain; NCCL
                # src/device/all_reduce.h, NVLS: loopSize = nChannels * nvls->nHeads * chunkSize) [issue 18]; on 8
                # GPUs this equals the NCCL_STEPS = 8 slots the earlier form counted
                # a message shorter than one loop moves only itself: NCCL shrinks the last loop's chunk to the
                # remainder over the heads (all_reduce.h: lastChunkSize = divUp(remCount, nHeads), 16 KiB aligned)
                fill = _nvls_fill_bytes(s, g, tn)
                cand = base + nvls_latency_s + f * (s + fill) / (intra * gain)
                t, code = keep(t, code, cand, ALGO_NVLS * _NP + PROTO_SIMPLE + 1, nv & ~multi, forced)
            if any_multi:
                # [issue 18] what a tree's network phase costs in bus-bandwidth terms: a node sends (and receives) the
                # buffer once per direction between two nodes, about twice beyond (interior nodes of the double binary
                # tree), where a ring sends factor x S; NCCL's rules say the same (tuning.cc: the tree's bandwidth is
                # bwIntra for nNodes <= 2, bwInter beyond; NVLS-tree's network term bwInter, halved beyond 2 nodes)
                tree_net = np.where(f > 0, f, 1.0) / np.where(nodes <= 2.0, 1.0, 2.0)  # f = 0: one rank (time 0)
                # NCCL's double binary tree across nodes, chains inside
                if not forced or algorithm == ALGO_TREE:
                    _, e = np.frexp(np.maximum(s, 64.0) / 64.0)
                    idx = np.minimum(e - 1, TREE_CORRECTION.shape[1])  # floor(log2(size / 64)), capped
                    x_intra_tree, x_inter_tree = tn.hop_extra("intra", "tree"), tn.hop_extra("inter", "tree")
                    log_nodes = np.log2(nodes)
                    lat0 = 2.0 * ((g - 1.0) * ihop + log_nodes * ohop)
                    tree_bw = np.minimum(intra, inter * tree_net) * tree_busbw_frac
                    for p in protos:
                        corr = _TREE_CORR[p][idx]
                        lat = lat0 + 2.0 * ((g - 1.0) * x_intra_tree[p] + log_nodes * x_inter_tree[p])
                        cand = base + tn.tree_base_s[p] + lat + fs / (tree_bw * tn.tree_proto_frac[p] * corr)
                        t, code = keep(t, code, cand, ALGO_TREE * _NP + p + 1, okp(p, multi))
                # NVLS inside each node, tree across (Simple only)
                if simple_ok and (not forced or algorithm == ALGO_NVLS_TREE) and np.any(nv & multi):
                    # the same NVLS kernel loop inside each node (NCCL src/device/all_reduce.h, NVLS_TREE: loopCount =
                    # nvls->nHeads * chunkCount per channel), so the same pipeline fill as NVLS's [issue 18]
                    bw = np.minimum(intra * gain, inter * tree_net * tn.nvls_tree_busbw_frac)
                    cand = (base + nvls_latency_s + 2.0 * np.log2(nodes) * (ohop + tn.nvls_tree_hop_s)
                            + f * (s + _nvls_fill_bytes(s, g, tn, nodes)) / bw)
                    t, code = keep(t, code, cand, ALGO_NVLS_TREE * _NP + PROTO_SIMPLE + 1, nv & multi, forced)
                # InfiniBand SHARP (CollNet): each node sends the buffer up once and receives it once
                sh = np.asarray(sharp, dtype=bool)
                if simple_ok and (not forced or algorithm == ALGO_COLLNET) and np.any(sh & multi):
                    bw = np.minimum(intra, 2.0 * inter * tn.collnet_busbw_frac)
                    cand = (base + 2.0 * (g - 1.0) * (ihop + x_intra_ring[PROTO_SIMPLE]) + ohop + tn.collnet_latency_s
                            + fs / bw)
                    t, code = keep(t, code, cand, ALGO_COLLNET * _NP + PROTO_SIMPLE + 1, sh & multi, forced)
                # hierarchical (two-level): forced only
                if algorithm == ALGO_HIER:
                    hier_t = hierarchical_all_reduce_s(s, g, nodes, intra, ihop, inter, ohop, base)
                    t, code = keep(t, code, hier_t, ALGO_HIER * _NP, multi, True)

    single = n <= 1
    if time_only:
        return np.where(single, 0.0, t), None, None
    algo, proto = np.divmod(code, _NP)
    return np.where(single, 0.0, t), np.where(single, ALGO_NONE, algo), np.where(single, PROTO_NONE, proto - 1)


#: NCCL's chunk for NVLS-tree (src/enqueue.cc calcCollChunking, NVLS_TREE branch, NVIDIA/nccl @5d3ab08b): the NVLS chunk,
#: at most 64 KiB from 4 nodes on (NCCL_NVLSTREE_MAX_CHUNKSIZE unset), then (multiple of concurrent ops x chunk below
#: which it shrinks, the chunk it shrinks to) in order
_NVLS_TREE_SHRINK = ((32.0, 256.0 * 1024), (16.0, 128.0 * 1024), (4.0, 64.0 * 1024), (1.0, 32.0 * 1024))
_NVLS_TREE_MAX_CHUNK_4_NODES_BYTES = 64.0 * 1024


def _nvls_fill_bytes(s, g, tn: Tuning, nodes=None):
    """Bytes the NVLS (and NVLS-tree) pipeline moves before its first chunk completes: two phases (into the switch,
    out of it), each one loop of every channel, a loop holding one chunk per rank of the NVLS domain (NCCL
    ``src/device/all_reduce.h``: ``loopSize = nChannels * nvls->nHeads * chunkSize``; NVLS_TREE: ``loopCount =
    nvls->nHeads * chunkCount`` per channel); a message shorter than one loop fills only itself. The chunk is NCCL's
    for smaller messages: NVLS (``nodes`` None; ``src/enqueue.cc``) 128 KiB, 64 KiB below 32 x concurrent ops x chunk,
    32 KiB below 8x, 16 KiB below 2x, concurrent ops = channels x ranks; NVLS-tree across ``nodes`` nodes
    (:data:`_NVLS_TREE_SHRINK`) its own rule."""
    ops = tn.nvls_channels * g
    chunk = np.full(np.shape(s), tn.nvls_chunk_bytes)
    if nodes is None:
        for mult, cap in ((32.0, tn.nvls_chunk_bytes / 2), (8.0, tn.nvls_chunk_bytes / 4),
                          (2.0, tn.nvls_chunk_bytes / 8)):
            chunk = np.where(s < mult * ops * chunk, np.minimum(chunk, cap), chunk)
    else:
        chunk = np.where(np.asarray(nodes) >= 4.0, np.minimum(chunk, _NVLS_TREE_MAX_CHUNK_4_NODES_BYTES), chunk)
        for mult, cap in _NVLS_TREE_SHRINK:
            chunk = np.where((s < mult * ops * chunk) & (chunk > cap), cap, chunk)
    return 2.0 * np.minimum(tn.nvls_channels * np.maximum(g, 1.0) * chunk, s)


def collective_time_s(collective, size_bytes, n_ranks, n_nodes, intra_busbw_bytes_per_s, intra_hop_s,
                      inter_busbw_bytes_per_s, inter_hop_s, nvls, *, base_latency_s, nvls_gain_frac,
                      nvls_latency_s, tree_busbw_frac, algorithm=_AUTO, protocol=_AUTO, sharp=False,
                      ll_max_busbw_bytes_per_s=np.inf, ll128=True, tuning: Tuning | None = None, host_cpu=HOST_INTEL):
    """Time of one collective and the algorithm NCCL's tuner picks (min over algorithms and protocols).

    Parameters
    ----------
    collective : code from :data:`COLLECTIVES`
    size_bytes : payload, nccl-tests convention (all-reduce: the buffer; all-gather: the output buffer;
        all-to-all: each rank's send buffer)
    n_ranks, n_nodes : ranks in the collective and nodes they span (ranks split evenly). For send/recv across
        nodes the flow is one GPU's through its share ``inter / (n_ranks / n_nodes)`` of the node's NICs: for
        pipeline stages on different nodes pass the GPUs of both stages' nodes (all send at once), not 2
    intra_busbw_bytes_per_s : achievable (Simple-protocol) ring bus bandwidth inside a node
    inter_busbw_bytes_per_s : achievable bus bandwidth out of one node (all its NICs together)
    intra_hop_s, inter_hop_s : per-hop latency of the links inside / between nodes (the LL protocol's figure)
    nvls : the node's switch reduces in-network (NVLink SHARP): False / 0 where not; True / 1 for a Hopper-generation
        switch; another positive number scales NVLS's bandwidth gain over the ring (``nvls_gain_frac x nvls``: NCCL's
        per-architecture ``nvlsEfficiency`` relative to Hopper's, which the row layer supplies, [issue 18])
    base_latency_s : per-call cost (launch, enqueue) beyond NCCL's per-algorithm base latency
    nvls_gain_frac, nvls_latency_s, tree_busbw_frac : see :class:`~gpusim.params.ModelParams`
    algorithm, protocol : ``-1`` auto, or a code from :data:`ALGORITHMS` / :data:`PROTOCOLS` to force one
    sharp : the network reduces in its switches (InfiniBand SHARP): enables CollNet for all-reduce
    ll_max_busbw_bytes_per_s : NCCL's cap on the LL protocol's bus bandwidth for this GPU generation inside one node
        (inf: none, as with RCCL); 0 where LL cannot run (the automatic choice leaves it out). Across nodes a finite
        cap is replaced by the host CPU's (NCCL reads the CPU's row of llMaxBws there)
    tuning : :class:`Tuning` (default: from :data:`gpusim.params.DEFAULT_PARAMS`)
    host_cpu : code from :data:`HOST_CPUS` of the nodes' CPUs: sets NCCL's network post overhead (the least time of
        a ring step across nodes) and the LL cap across nodes [issue 18]

    Returns ``(time_s, algorithm_code)``, both arrays.
    """
    t, algo, _ = collective_choice(collective, size_bytes, n_ranks, n_nodes, intra_busbw_bytes_per_s, intra_hop_s,
                                   inter_busbw_bytes_per_s, inter_hop_s, nvls, base_latency_s=base_latency_s,
                                   nvls_gain_frac=nvls_gain_frac, nvls_latency_s=nvls_latency_s,
                                   tree_busbw_frac=tree_busbw_frac, algorithm=algorithm, protocol=protocol,
                                   sharp=sharp, ll_max_busbw_bytes_per_s=ll_max_busbw_bytes_per_s, ll128=ll128,
                                   tuning=tuning, host_cpu=host_cpu)
    return t, algo


def collective_min_time_s(collective, size_bytes, n_ranks, n_nodes, intra_busbw_bytes_per_s, intra_hop_s,
                          inter_busbw_bytes_per_s, inter_hop_s, nvls, **kw):
    """The time alone of :func:`collective_time_s` with the automatic choice (what the step model uses): the same
    candidates, without tracking which one wins (faster on large arrays; callers evaluate it once per distinct row,
    :mod:`gpusim.model.distinct`)."""
    return collective_choice(collective, size_bytes, n_ranks, n_nodes, intra_busbw_bytes_per_s, intra_hop_s,
                             inter_busbw_bytes_per_s, inter_hop_s, nvls, time_only=True, **kw)[0]


def hierarchical_all_reduce_s(size_bytes, g, nodes, intra_busbw, intra_hop_s, inter_busbw_node, inter_hop_s,
                              base_latency_s):
    """Two-level all-reduce: reduce-scatter among the ``g`` GPUs of a node, all-reduce of each GPU's
    ``S/g`` shard across ``nodes`` over its share ``inter_busbw_node / g`` of the NICs, all-gather inside."""
    rs_ag = 2.0 * (base_latency_s + (g - 1.0) * intra_hop_s + (g - 1.0) / g * size_bytes / intra_busbw)
    inter_share = inter_busbw_node / g
    cross = base_latency_s + 2.0 * (nodes - 1.0) * inter_hop_s + 2.0 * (nodes - 1.0) / nodes * (size_bytes / g) / inter_share
    return np.where(g > 1, rs_ag, 0.0) + np.where(nodes > 1, cross, 0.0)


def thread_bound_time_s(time_s, gpus_per_thread, thread_launch_s):
    """Time per collective when one CPU thread launches it on ``gpus_per_thread`` GPUs, back to back.

    nccl-tests run with ``-g g`` (one thread drives ``g`` GPUs, the layout of a single-process benchmark) launches each
    iteration's collective GPU by GPU from that thread while the GPUs run the previous one, so an iteration takes
    ``max(time_s, g x thread_launch_s)``: small messages become CPU-bound (NVIDIA/nccl-tests issue 123: "when you run
    with -g NUM_GPUS, all GPUs are handled by a single thread and that causes extra latency as the CPU is the
    bottleneck"). With a thread or a process per GPU (``g = 1``, DDP's layout) the floor is one launch, below any
    collective's time. ``time_s = 0`` (one rank) stays 0.
    """
    t = np.asarray(time_s, dtype=np.float64)
    floor = np.asarray(gpus_per_thread, dtype=np.float64) * float(thread_launch_s)
    return np.where(t > 0, np.maximum(t, floor), t)


def bucketed_time_s(total_bytes, bucket_bytes, time_fn, *, one_call=False):
    """Time to run a collective over ``total_bytes`` split into buckets of ``bucket_bytes``.

    ``time_fn(size)`` is the time of one collective of ``size`` bytes. Returns ``(total_s, last_bucket_s)``:
    DDP launches each full bucket as it fills; the last (possibly partial) one starts only when the backward
    pass ends, so it can never be hidden. ``one_call``: ``time_fn`` is elementwise and broadcasts, and is called
    once on the full and the last bucket's sizes stacked on a new leading axis (the same times, one call).
    """
    total = np.asarray(total_bytes, dtype=np.float64)
    bucket = np.minimum(np.asarray(bucket_bytes, dtype=np.float64), np.maximum(total, 1.0))
    full = np.floor(total / bucket)
    rem = total - full * bucket
    if one_call:
        t_full, t_last = time_fn(np.stack(np.broadcast_arrays(bucket, np.maximum(rem, 1.0))))
        t_rem = np.where(rem > 0, t_last, 0.0)
    else:
        t_full = time_fn(bucket)
        t_rem = np.where(rem > 0, time_fn(np.maximum(rem, 1.0)), 0.0)
    last = np.where(rem > 0, t_rem, t_full)
    return full * t_full + t_rem, np.where(total > 0, last, 0.0)


def algbw_bytes_per_s(size_bytes, time_s):
    """nccl-tests algorithm bandwidth S / t (inf where t = 0)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(time_s > 0, np.asarray(size_bytes, dtype=np.float64) / time_s, np.inf)
