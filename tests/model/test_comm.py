"""The collective model: protocols, algorithms, all-to-all, fabrics (closed forms and properties)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpusim.model import comm as C
from gpusim.params import DEFAULT_PARAMS

P = DEFAULT_PARAMS
KW = dict(base_latency_s=P.coll_base_latency_s, nvls_gain_frac=P.nvls_gain_frac, nvls_latency_s=P.nvls_latency_s,
          tree_busbw_frac=P.tree_busbw_frac)


def choice(kind, size, n, nodes=1, intra=370e9, hop=0.47e-6, inter=360e9, inter_hop=2.7e-6, nvls=False, **kw):
    return C.collective_choice(kind, size, n, nodes, intra, hop, inter, inter_hop, nvls, **{**KW, **kw})


def busbw(kind, size, n, **kw):
    t, _, _ = choice(kind, size, n, **kw)
    return C.bus_factor(kind, n) * np.asarray(size, dtype=float) / t


def test_all_to_all_bus_factor_and_volume():
    assert C.bus_factor(C.ALL_TO_ALL, 8) == pytest.approx(7 / 8)
    # inside a non-blocking switch: (n-1)/n of the buffer leaves each GPU at the link's bus bandwidth, of which NCCL's
    # point-to-point all-to-all reaches a2a_intra_busbw_frac of the ring's [issue 17]
    t, algo, proto = choice(C.ALL_TO_ALL, 1e10, 8, protocol=C.PROTO_SIMPLE)
    lat = P.coll_base_latency_s + P.nccl_base_latency_s["ring"][2] + 0.47e-6 + 2.8e-6
    assert float(t) == pytest.approx(lat + 7 / 8 * 1e10 / (370e9 * P.a2a_intra_busbw_frac))
    assert int(algo) == C.ALGO_P2P and int(proto) == C.PROTO_SIMPLE
    # across nodes it is bisection-bound: (n-g)/n of the buffer through each GPU's share of the NICs
    t2, _, _ = choice(C.ALL_TO_ALL, 1e10, 64, nodes=8, protocol=C.PROTO_SIMPLE)
    assert float(t2) == pytest.approx(56 / 64 * 1e10 / (360e9 / 8), rel=1e-3)


def test_protocol_limits_hold_at_the_extremes():
    # LL at most half the bus bandwidth, LL128 0.92, Simple all of it (one node, huge message)
    for proto, frac in ((C.PROTO_LL, 0.5), (C.PROTO_LL128, 0.92), (C.PROTO_SIMPLE, 1.0)):
        bb = busbw(C.ALL_REDUCE, 1e12, 8, protocol=proto)
        assert float(bb) == pytest.approx(370e9 * frac, rel=1e-3)
    # the LL cap of a GPU generation binds below its share
    assert float(busbw(C.ALL_REDUCE, 1e12, 8, protocol=C.PROTO_LL, ll_max_busbw_bytes_per_s=87.7e9)) == \
        pytest.approx(87.7e9, rel=1e-3)


def test_the_tuner_picks_ll_for_small_simple_for_large():
    _, _, small = choice(C.ALL_REDUCE, 4096, 8)
    _, _, large = choice(C.ALL_REDUCE, 4e9, 8)
    assert int(small) == C.PROTO_LL and int(large) == C.PROTO_SIMPLE


def test_auto_is_the_fastest_forced_choice():
    for size in (1e3, 1e5, 1e7, 1e9):
        t, _, _ = choice(C.ALL_REDUCE, size, 16, nodes=2, nvls=True, sharp=True)
        forced = [choice(C.ALL_REDUCE, size, 16, nodes=2, nvls=True, sharp=True, algorithm=a, protocol=p)[0]
                  for a in (C.ALGO_RING, C.ALGO_TREE) for p in (C.PROTO_LL, C.PROTO_LL128, C.PROTO_SIMPLE)]
        forced += [choice(C.ALL_REDUCE, size, 16, nodes=2, nvls=True, sharp=True, algorithm=a)[0]
                   for a in (C.ALGO_NVLS_TREE, C.ALGO_COLLNET)]
        assert float(t) == pytest.approx(min(float(x) for x in forced))


def test_nvls_wins_only_for_large_messages_and_beats_the_wire():
    _, a_mid, _ = choice(C.ALL_REDUCE, 2 * 2**20, 8, nvls=True)
    _, a_big, p_big = choice(C.ALL_REDUCE, 2**32, 8, nvls=True)
    assert int(a_mid) == C.ALGO_RING and int(a_big) == C.ALGO_NVLS and int(p_big) == C.PROTO_SIMPLE
    assert float(busbw(C.ALL_REDUCE, 2**34, 8, nvls=True)) > 370e9  # the switch reduces: above the ring's wire


def test_mid_size_messages_are_slower_than_one_alpha_beta_line():
    # the shape of published sweeps: busbw at 16 MiB well below half-way between the latency and the peak
    # line that fits 1 KiB, i.e. below an alpha-beta line through the small-message latency
    t_small, _, _ = choice(C.ALL_REDUCE, 1024, 8, nvls=True)
    peak = float(busbw(C.ALL_REDUCE, 2**34, 8, nvls=True))
    s = 16 * 2**20
    alpha_beta = C.bus_factor(C.ALL_REDUCE, 8) * s / (float(t_small) + C.bus_factor(C.ALL_REDUCE, 8) * s / peak)
    assert float(busbw(C.ALL_REDUCE, s, 8, nvls=True)) < 0.9 * alpha_beta


def test_one_rank_costs_nothing_for_every_collective():
    for kind in C.COLLECTIVES.values():
        t, algo, proto = choice(kind, 1e9, 1)
        assert float(t) == 0.0 and int(algo) == C.ALGO_NONE and int(proto) == C.PROTO_NONE


def test_sharp_lifts_multi_node_all_reduce_above_the_ring():
    ring = busbw(C.ALL_REDUCE, 2**34, 64, nodes=8, intra=900e9, inter=360e9)
    sharp = busbw(C.ALL_REDUCE, 2**34, 64, nodes=8, intra=900e9, inter=360e9, sharp=True)
    assert float(ring) == pytest.approx(360e9, rel=0.02)
    assert float(sharp) > 1.5 * float(ring)


def test_send_recv_across_nodes_uses_one_gpus_share_of_the_nics():
    t, _, _ = choice(C.SEND_RECV, 1e10, 16, nodes=2, protocol=C.PROTO_SIMPLE)
    assert float(t) == pytest.approx(1e10 / (360e9 / 8), rel=1e-3)


def test_forced_algorithm_that_cannot_run_is_infinite():
    t, _, _ = choice(C.ALL_REDUCE, 1e6, 8, algorithm=C.ALGO_TREE)  # tree needs several nodes
    assert not np.isfinite(float(t))


sizes = st.floats(min_value=1.0, max_value=1e11)
kinds = st.sampled_from(sorted(C.COLLECTIVES.values()))
layouts = st.sampled_from([(2, 1), (8, 1), (16, 2), (64, 8), (256, 32)])


@settings(max_examples=60, deadline=None)
@given(kind=kinds, size=sizes, layout=layouts, nvls=st.booleans(), sharp=st.booleans(),
       f=st.floats(min_value=1.01, max_value=10.0))
def test_more_bandwidth_is_never_slower(kind, size, layout, nvls, sharp, f):
    n, nodes = layout
    t0, _, _ = choice(kind, size, n, nodes=nodes, nvls=nvls, sharp=sharp)
    t1, _, _ = choice(kind, size, n, nodes=nodes, nvls=nvls, sharp=sharp, intra=370e9 * f, inter=360e9 * f)
    assert float(t1) <= float(t0) * (1 + 1e-12)


@settings(max_examples=60, deadline=None)
@given(kind=kinds, size=sizes, layout=layouts, nvls=st.booleans(), sharp=st.booleans(),
       g=st.floats(min_value=1.0, max_value=8.0))
def test_time_never_decreases_with_size(kind, size, layout, nvls, sharp, g):
    n, nodes = layout
    t0, _, _ = choice(kind, size, n, nodes=nodes, nvls=nvls, sharp=sharp)
    t1, _, _ = choice(kind, size * g, n, nodes=nodes, nvls=nvls, sharp=sharp)
    assert float(t1) >= float(t0) * (1 - 1e-12)


@settings(max_examples=60, deadline=None)
@given(kind=kinds, size=sizes, layout=layouts)
def test_busbw_never_above_the_wire_without_in_network_reduction(kind, size, layout):
    n, nodes = layout
    bb = busbw(kind, size, n, nodes=nodes, nvls=False, sharp=False)
    wire = 370e9 if nodes == 1 else 360e9
    if kind == C.SEND_RECV and nodes > 1:
        wire = 360e9 / (n / nodes)
    assert float(bb) <= wire * (1 + 1e-9)


def test_vectorised_equals_one_at_a_time():
    rng = np.random.default_rng(0)
    s = 10 ** rng.uniform(2, 10, 40)
    n = rng.choice([2.0, 8.0, 16.0, 64.0], 40)
    nodes = np.where(n > 8, n / 8, 1.0)
    intra = rng.uniform(20e9, 900e9, 40)
    nv = rng.random(40) > 0.5
    for kind in C.COLLECTIVES.values():
        t, a, p = C.collective_choice(kind, s, n, nodes, intra, 1e-6, 100e9, 3e-6, nv, sharp=True, **KW)
        for i in range(40):
            ti, ai, pi = C.collective_choice(kind, s[i], n[i], nodes[i], intra[i], 1e-6, 100e9, 3e-6, nv[i],
                                             sharp=True, **KW)
            assert float(ti) == pytest.approx(t[i]) and int(ai) == a[i] and int(pi) == p[i]


def test_collective_time_s_keeps_its_interface():
    t, algo = C.collective_time_s(C.ALL_REDUCE, 1e8, 8, 1, 370e9, 0.47e-6, 360e9, 2.7e-6, True, **KW)
    t2, a2, _ = choice(C.ALL_REDUCE, 1e8, 8, nvls=True)
    assert float(t) == float(t2) and int(algo) == int(a2)


def test_tree_uses_nccls_mid_size_correction():
    # Simple tree at 1 MiB: NCCL's treeCorrectionFactor[Simple][log2(2^20 / 64) = 14] = 0.5; 1 at 1 GiB
    def bw_term(size):
        t, _, _ = choice(C.ALL_REDUCE, size, 16, nodes=2, algorithm=C.ALGO_TREE, protocol=C.PROTO_SIMPLE)
        t0, _, _ = choice(C.ALL_REDUCE, 64.0, 16, nodes=2, algorithm=C.ALGO_TREE, protocol=C.PROTO_SIMPLE)
        return float(t) - float(t0)  # latency cancels (the 64 B bandwidth term is negligible)
    f = C.bus_factor(C.ALL_REDUCE, 16)
    # two nodes: the tree's network phase moves the buffer once per direction, so its term is f x the NICs' 360 GB/s
    ring_bw = min(370e9, 360e9 * f) * P.tree_busbw_frac
    assert bw_term(2.0**20) == pytest.approx(f * 2**20 / (ring_bw * 0.5), rel=1e-3)
    assert bw_term(2.0**30) == pytest.approx(f * 2**30 / ring_bw, rel=1e-3)


def test_the_step_models_time_only_path_is_the_automatic_choices_time():
    """`collective_min_time_s` (the step model's path: no record of which candidate won) gives exactly the time of
    the automatic choice, for every collective, over sizes, rank counts, nodes, NVLS, SHARP and the LL cap."""
    sizes = np.geomspace(1.0, 2.0**34, 60)
    for kind in C.COLLECTIVES.values():
        for n, nodes, nvls, sharp, ll in ((1, 1, False, False, np.inf), (8, 1, True, False, 141e9),
                                          (16, 2, True, True, 141e9), (64, 8, False, False, np.inf),
                                          (2, 2, False, True, 45e9)):
            args = (kind, sizes, n, nodes, 370e9, 0.47e-6, 360e9, 2.7e-6, nvls)
            kw = {**KW, "sharp": sharp, "ll_max_busbw_bytes_per_s": ll}
            full, _, _ = C.collective_choice(*args, **kw)
            np.testing.assert_array_equal(C.collective_min_time_s(*args, **kw), full)
