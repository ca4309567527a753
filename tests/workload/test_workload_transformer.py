"""The parametric transformer builder against closed forms (Korthikanti et al. 2022; Narayanan et al.
2021) and its behaviour in the sequence length."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpusim.workload import TransformerSpec, build_from_spec, get_workload, transformer_spec


def _kind_flop(w, kind):
    return sum(g.fwd_flop_per_sample for g in w.layers if g.kind == kind)


def _per_layer(spec, attr):
    one = build_from_spec(dataclasses.replace(spec, n_layers=1))
    two = build_from_spec(dataclasses.replace(spec, n_layers=2))
    return getattr(two, attr) - getattr(one, attr)


@pytest.mark.parametrize("model_id", ["gpt-175b", "gpt-1.7b", "gpt3-13b", "gpt2", "bert-large", "gpt-1t"])
def test_activation_bytes_per_layer_is_korthikanti(model_id):
    """Korthikanti et al. 2022 Sec. 4.1: s*h*(34 + 5*a*s/h) bytes per layer per sequence (16-bit, no tensor
    parallelism), 2*s*h with full recomputation."""
    spec = transformer_spec(model_id)
    s, h, a = spec.seq_len, spec.d_model, spec.n_heads
    assert _per_layer(spec, "act_bytes_per_sample") == pytest.approx(s * h * (34 + 5 * a * s / h), rel=1e-12)
    assert _per_layer(spec, "act_ckpt_bytes_per_sample") == pytest.approx(2 * s * h, rel=1e-12)
    w = build_from_spec(spec)
    assert w.act_block_bytes_per_sample == pytest.approx(s * h * (34 + 5 * a * s / h), rel=1e-12)


def test_fused_attention_drops_the_quadratic_activation_term():
    spec = transformer_spec("llama2-7b")
    s, h = spec.seq_len, spec.d_model
    per_layer = _per_layer(spec, "act_bytes_per_sample")
    # Q, K, V, O and the norms/inputs are O(s*h); the MLP keeps 4 tensors of s*f; softmax stats 4*a*s
    expected = 2 * (2 * s * h + s * h + s * h + 2 * s * h + s * h + s * h + 4 * s * spec.ff_dim) + 4 * spec.n_heads * s
    assert per_layer == pytest.approx(expected, rel=1e-12)
    doubled = _per_layer(dataclasses.replace(spec, seq_len=2 * s), "act_bytes_per_sample")
    assert doubled == pytest.approx(2 * per_layer, rel=1e-12)  # linear in s


@pytest.mark.parametrize("model_id", ["gpt-145b", "gpt-1.7b", "gpt-530b", "gpt-22b"])
def test_megatron_flop_formula(model_id):
    """Narayanan et al. 2021 eq. (3): a training step with activation recomputation does
    96*B*s*l*h^2*(1 + s/(6h) + V/(16*l*h)) FLOPs, i.e. 4 passes over the layers and 3 over the logit layer."""
    spec = transformer_spec(model_id)
    w = get_workload(model_id)
    s, L, h, V = spec.seq_len, spec.n_layers, spec.d_model, spec.vocab_size
    head = next(g.fwd_flop_per_sample for g in w.layers if g.name == "lm head")
    ours = 4 * (w.fwd_flop_per_sample - head) + 3 * head
    megatron = 96 * s * L * h**2 * (1 + s / (6 * h) + V / (16 * L * h))
    assert ours == pytest.approx(megatron, rel=1e-12)


def test_megatron_param_formula():
    """Narayanan et al. 2021 eq. (2): P = 12*l*h^2*(1 + 13/(12h) + (V + s)/(12*l*h)) (+ the final norm)."""
    for mid in ("gpt-1.7b", "gpt-18b", "gpt-145b", "gpt-1t"):
        spec = transformer_spec(mid)
        L, h, V, s = spec.n_layers, spec.d_model, spec.vocab_size, spec.seq_len
        formula = 12 * L * h**2 * (1 + 13 / (12 * h) + (V + s) / (12 * L * h))
        assert get_workload(mid).params == pytest.approx(formula + 2 * h, rel=1e-12)


def test_attention_flops_are_4_s_squared_h_per_layer():
    spec = transformer_spec("gpt3-175b")
    w = get_workload("gpt3-175b")
    s, h, L = spec.seq_len, spec.d_model, spec.n_layers
    assert _kind_flop(w, "attention") == pytest.approx(L * 2 * 2 * s * s * h, rel=1e-12)
    # the rest is 2 FLOPs per non-embedding weight per token, plus the LM head
    n_layer_weights = L * 12 * h * h
    assert _kind_flop(w, "matmul") == pytest.approx(2 * s * (n_layer_weights + h * spec.vocab_size), rel=1e-12)


@pytest.mark.parametrize("model_id", ["gpt2", "bert-large", "gpt3-175b", "llama2-70b", "llama3-8b", "mpt-7b"])
@pytest.mark.parametrize("factor", [2, 3])
def test_with_seq_len_attention_quadratic_rest_linear(model_id, factor):
    w = get_workload(model_id)
    s = w.seq_len
    w2 = w.with_seq_len(s * factor)
    assert w2.tokens_per_sample == s * factor and w2.seq_len == s * factor and w2.params == w.params
    for g1, g2 in zip(w.layers, w2.layers):
        assert (g1.kind, g1.name, g1.count) == (g2.kind, g2.name, g2.count)
        assert g2.weight_bytes == g1.weight_bytes
        scale = factor**2 if g1.kind == "attention" else factor
        assert g2.fwd_flop_per_sample == pytest.approx(scale * g1.fwd_flop_per_sample, rel=1e-12), g1.name
    assert w2.input_bytes_per_sample == pytest.approx(factor * w.input_bytes_per_sample)
    assert w2.h2d_bytes_per_sample == pytest.approx(factor * w.h2d_bytes_per_sample, rel=0.01)  # + fixed labels
    assert get_workload(model_id, seq_len=s * factor) == w2


def test_with_seq_len_activations_quadratic_only_without_fused_attention():
    def acts(mid, s):
        return get_workload(mid, seq_len=s).act_bytes_per_sample
    # f(s) = a*s + b*s^2  ->  f(2s) - 2 f(s) = 2 b s^2 > 0 (unfused) and == 0 (fused)
    assert acts("gpt2", 2048) - 2 * acts("gpt2", 1024) > 0.5 * acts("gpt2", 1024)
    assert acts("llama2-7b", 8192) == pytest.approx(2 * acts("llama2-7b", 4096), rel=1e-12)


def test_sliding_window_caps_attention():
    w = get_workload("mistral-7b")       # window 4096 at seq 8192
    full = dataclasses.replace(transformer_spec("mistral-7b"), attention_window=None)
    assert _kind_flop(w, "attention") == pytest.approx(_kind_flop(build_from_spec(full), "attention") / 2, rel=1e-12)
    short = w.with_seq_len(2048)         # shorter than the window: no cap
    assert _kind_flop(short, "attention") == pytest.approx(_kind_flop(w, "attention") / 8, rel=1e-12)


def test_gqa_shrinks_kv_projections_only():
    spec = transformer_spec("llama2-70b")
    mha = dataclasses.replace(spec, n_kv_heads=None)
    h, L = spec.d_model, spec.n_layers
    kvd = h * 8 / 64
    assert build_from_spec(mha).params - get_workload("llama2-70b").params == pytest.approx(L * 2 * h * (h - kvd))
    assert _kind_flop(build_from_spec(mha), "attention") == _kind_flop(get_workload("llama2-70b"), "attention")


def test_llama_layer_has_24_kernels_and_gpt_layer_18():
    for mid, per_layer in (("llama2-7b", 24), ("gpt-1.7b", 18), ("bert-base", 18)):
        spec = transformer_spec(mid)
        one = build_from_spec(dataclasses.replace(spec, n_layers=1))
        two = build_from_spec(dataclasses.replace(spec, n_layers=2))
        assert two.fwd_kernels - one.fwd_kernels == per_layer, mid


def test_vit_is_an_image_model_with_197_tokens():
    w = get_workload("vit-b-16")
    assert w.sample_unit == "image" and w.tokens_per_sample == 1.0 and w.seq_len is None
    assert not w.supports_seq_len
    assert _kind_flop(w, "attention") == pytest.approx(12 * 4 * 197**2 * 768, rel=1e-12)


@settings(deadline=None, max_examples=60)
@given(L=st.integers(1, 8), heads=st.sampled_from([1, 2, 4, 8]), d_head=st.sampled_from([16, 32, 64]),
       kv_div=st.sampled_from([1, 2, 4]), ff_mult=st.integers(1, 6), vocab=st.integers(100, 70000),
       s=st.integers(1, 4096), gated=st.booleans(), flash=st.booleans(), dropout=st.booleans(),
       bias=st.booleans(), tied=st.booleans(), head=st.sampled_from(["lm", "qa", "cls"]))
def test_builder_invariants(L, heads, d_head, kv_div, ff_mult, vocab, s, gated, flash, dropout, bias, tied, head):
    kv = max(1, heads // kv_div)
    h = heads * d_head
    spec = TransformerSpec(L, h, heads, vocab, s, n_kv_heads=kv, d_ff=ff_mult * h, gated_ffn=gated,
                           flash_attention=flash, dropout=dropout, bias=bias, tied_embeddings=tied, head=head,
                           n_classes=10, learned_pos=not flash, max_positions=s)
    w = build_from_spec(spec, family="encoder" if head != "lm" else "decoder-lm")
    assert sum(g.fwd_flop_per_sample for g in w.layers) == pytest.approx(w.fwd_flop_per_sample, rel=1e-12)
    # closed-form matmul FLOPs: projections + FFN per layer, plus the head
    kvd = kv * d_head
    per_tok = 2 * (h * (h + 2 * kvd) + h * h) + 2 * h * ff_mult * h * (3 if gated else 2)
    head_flop = {"lm": 2 * s * h * vocab, "qa": 2 * s * h * 2, "cls": 2 * h * 10}[head]
    assert _kind_flop(w, "matmul") == pytest.approx(L * s * per_tok + head_flop, rel=1e-12)
    assert _kind_flop(w, "attention") == pytest.approx(L * 4 * s * s * h, rel=1e-12)
    assert 0 < w.act_ckpt_bytes_per_sample < w.act_bytes_per_sample
    assert w.act_block_bytes_per_sample > 0
    longer = w.with_seq_len(s + 1)
    assert longer.fwd_flop_per_sample > w.fwd_flop_per_sample
    assert longer.act_bytes_per_sample > w.act_bytes_per_sample
