"""Mixture-of-experts structure as properties: what routing changes and what it must not."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpusim.workload import TransformerSpec, build_from_spec
from gpusim.workload.flops import breakdown, flops_per_token


@st.composite
def moe_specs(draw):
    heads = draw(st.sampled_from([2, 4, 8]))
    kv = draw(st.sampled_from([h for h in (1, 2, 4, 8) if heads % h == 0]))
    n_exp = draw(st.integers(2, 16))
    return TransformerSpec(
        n_layers=draw(st.integers(1, 6)), d_model=16 * heads, n_heads=heads, n_kv_heads=kv, vocab_size=draw(st.integers(10, 500)),
        seq_len=draw(st.integers(4, 256)), d_ff=draw(st.integers(8, 256)), gated_ffn=draw(st.booleans()),
        bias=draw(st.booleans()), norm="rmsnorm", dropout=False, flash_attention=True, tied_embeddings=draw(st.booleans()),
        n_experts=n_exp, top_k=draw(st.integers(1, n_exp)), expert_d_ff=draw(st.integers(8, 128)),
        n_shared_experts=draw(st.integers(0, 2)), first_k_dense=draw(st.integers(0, 2)),
        router_bias=draw(st.booleans()))


def _group(w, name):
    return sum(g.fwd_flop_per_sample for g in w.layers if g.name == name)


@settings(max_examples=40, deadline=None)
@given(moe_specs())
def test_routed_expert_flops_scale_with_top_k_and_params_do_not(spec):
    w = build_from_spec(spec)
    more = build_from_spec(dataclasses.replace(spec, top_k=spec.n_experts))
    assert more.params == w.params                                    # top-k moves no weight
    assert _group(more, "experts") == pytest.approx(_group(w, "experts") * spec.n_experts / spec.top_k, rel=1e-12)
    assert w.params_active <= more.params_active <= w.params
    if spec.n_moe_layers:
        assert w.params_active < w.params or spec.top_k == spec.n_experts


@settings(max_examples=40, deadline=None)
@given(moe_specs())
def test_more_experts_add_weights_but_only_router_flops(spec):
    w = build_from_spec(spec)
    w2 = build_from_spec(dataclasses.replace(spec, n_experts=spec.n_experts + 1))
    L_moe = spec.n_moe_layers
    assert w2.params - w.params == pytest.approx(L_moe * (spec.expert_params() + spec.d_model + spec.router_bias),
                                                 rel=1e-12)
    assert w2.fwd_flop_per_sample - w.fwd_flop_per_sample == pytest.approx(L_moe * 2 * spec.seq_len * spec.d_model,
                                                                           rel=1e-9, abs=1e-6)


@settings(max_examples=40, deadline=None)
@given(moe_specs())
def test_parts_add_up_and_conventions_agree(spec):
    w = build_from_spec(spec)
    parts = breakdown(w)
    assert sum(p["params"] for p in parts) == pytest.approx(w.params, rel=1e-12)
    assert sum(p["active_params"] for p in parts) == pytest.approx(w.params_active, rel=1e-12)
    assert sum(p["fwd_flop_per_token"] for p in parts) == pytest.approx(w.fwd_flop_per_sample / spec.seq_len, rel=1e-12)
    f = flops_per_token(spec)
    assert f["six_n_attention_flop_per_token"] == pytest.approx(3 * w.fwd_flop_per_sample / spec.seq_len, rel=1e-9)
    assert spec.n_moe_layers == spec.n_layers - min(spec.first_k_dense, spec.n_layers)


def test_capacity_factor_pads_expert_work():
    """GShard/Switch token dropping: experts compute capacity_factor x the routed tokens (Fedus et al. 2021)."""
    spec = TransformerSpec(4, 64, 4, 100, 32, d_ff=128, gated_ffn=True, n_experts=8, top_k=2, flash_attention=True)
    w = build_from_spec(spec)
    padded = build_from_spec(dataclasses.replace(spec, moe_capacity_factor=1.25))
    assert _group(padded, "experts") == pytest.approx(1.25 * _group(w, "experts"), rel=1e-12)
    assert padded.params == w.params


def test_capacity_padding_is_not_model_flops():
    """[issue 12] Padding to capacity is hardware work: the 6N count and the MFU numerator count the routed tokens."""
    from gpusim.workload.flops import model_fwd_flop_per_sample

    spec = TransformerSpec(4, 64, 4, 100, 32, d_ff=128, gated_ffn=True, n_experts=8, top_k=2, flash_attention=True)
    w = build_from_spec(spec)
    padded = build_from_spec(dataclasses.replace(spec, moe_capacity_factor=1.25))
    assert flops_per_token(padded.transformer) == flops_per_token(w.transformer)
    assert model_fwd_flop_per_sample(padded) == pytest.approx(w.fwd_flop_per_sample, rel=1e-12)
    assert padded.fwd_flop_per_sample > w.fwd_flop_per_sample  # (the hardware still computes the padding)
