"""``Workload.from_config``: published parameter counts from published configs, hand-calculated FLOPs,
the MoE/MLA/window structure, and clear errors for bad input.

The fixtures in ``configs/`` are the published ``config.json`` values of each model (the fields
gpusim reads plus a few it ignores), one or more per supported ``model_type``.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from gpusim.errors import ScenarioError
from gpusim.workload import SUPPORTED_MODEL_TYPES, Workload, flops_per_token, from_config, get_workload
from gpusim.workload.from_config import spec_from_config

CONFIGS = Path(__file__).parent / "configs"


def _cfg(name: str) -> dict:
    return json.loads((CONFIGS / f"{name}.json").read_text())


def _emb(w: Workload) -> float:
    return w.transformer.padded_vocab * w.transformer.d_model


# (fixture, published total, source of the total)
PUBLISHED_TOTAL = [
    ("llama3.1-8b", 8.03e9, "Llama 3.1 8B model card: 8.03B"),
    ("llama3.1-70b", 70.6e9, "Llama 3.1 70B model card: 70.6B"),
    ("llama3.1-405b", 405e9, "Llama 3 herd paper (arXiv:2407.21783) Table 3: 405B"),
    ("mistral-7b", 7.24e9, "Jiang et al. 2023, Mistral 7B: 7.24B"),
    ("mixtral-8x7b", 46.7e9, "Jiang et al. 2024, Mixtral of Experts (arXiv:2401.04088): 46.7B total"),
    ("mixtral-8x22b", 141e9, "Mistral AI, 'Cheaper, Better, Faster, Stronger' (2024-04-17): 141B"),
    ("deepseek-v3", 671e9, "DeepSeek-V3 technical report (arXiv:2412.19437): 671B total"),
    ("deepseek-v2-lite", 15.7e9, "DeepSeek-V2 paper (arXiv:2405.04434) App. B: V2-Lite 15.7B"),
    ("qwen3-30b-a3b", 30.5e9, "Qwen3-30B-A3B model card: 30.5B total"),
    ("qwen3-235b-a22b", 235e9, "Qwen3-235B-A22B model card: 235B total"),
    ("qwen3-8b", 8.2e9, "Qwen3-8B model card: 8.2B"),
    ("qwen1.5-moe-a2.7b", 14.3e9, "Qwen1.5-MoE-A2.7B model card: 14.3B total"),
    ("qwen2-7b", 7.62e9, "Qwen2-7B model card: 7.62B (Qwen2 technical report arXiv:2407.10671 Table 1: 7B)"),
    ("gpt-oss-120b", 116.83e9, "gpt-oss model card (arXiv:2508.10925) Table 1: 116.83B"),
    ("gpt-oss-20b", 20.91e9, "gpt-oss model card (arXiv:2508.10925) Table 1: 20.91B"),
    ("glm-4.5-air", 106e9, "GLM-4.5 report (arXiv:2508.06471) and model card: GLM-4.5-Air 106B total"),
    ("nemotron-4-340b", 341.0e9, "Nemotron-4 340B report (arXiv:2406.11704): 9.4B embedding + 331.6B non-embedding"),
    ("nemotron-4-15b", 15.7e9, "Nemotron-4 15B report (arXiv:2402.16819): 3.2B embedding + 12.5B non-embedding"),
    ("gemma-7b", 8.538e9, "Gemma report (arXiv:2403.08295) Table 2: 786,825,216 embedding + 7,751,248,896 non-embedding"),
    ("gemma2-9b", 9.242e9, "Gemma 2 report (arXiv:2408.00118) Table 2: 917,504,000 embedding + 8,324,201,984 non-embedding"),
    ("phi3-mini-4k", 3.8e9, "Phi-3 report (arXiv:2404.14219): phi-3-mini 3.8B"),
    ("pythia-1.4b", 1_414_647_808, "Biderman et al. 2023, Pythia, Table 1: 1,414,647,808"),
    ("gpt2", 124_439_808, "the released GPT-2 small checkpoint: 124,439,808"),
    ("mpt-7b", 6.7e9, "MPT-7B model card: 6.7B"),
    ("bert-base-uncased", 110e6, "Devlin et al. 2019: BERT-base 110M"),
]

# (fixture, published active parameters, convention of the figure, source)
PUBLISHED_ACTIVE = [
    ("mixtral-8x7b", 12.9e9, "all", "Mixtral of Experts (arXiv:2401.04088): 12.9B active"),
    ("mixtral-8x22b", 39e9, "all", "Mistral AI 2024-04-17: 39B active"),
    ("deepseek-v3", 37e9, "all", "DeepSeek-V3 report: 37B activated per token"),
    ("qwen3-30b-a3b", 3.3e9, "all", "Qwen3-30B-A3B model card: 3.3B activated"),
    ("qwen3-235b-a22b", 22e9, "all", "Qwen3-235B-A22B model card: 22B activated"),
    ("qwen1.5-moe-a2.7b", 2.7e9, "all", "Qwen1.5-MoE-A2.7B model card: 2.7B activated"),
    # OpenAI's table counts the unembedding but not the embedding table (only one row is read per token)
    ("gpt-oss-120b", 5.13e9, "no-input-embedding", "gpt-oss model card Table 1: 5.13B active"),
    ("gpt-oss-20b", 3.61e9, "no-input-embedding", "gpt-oss model card Table 1: 3.61B active"),
    # with the input embedding the count is 2.66B: DeepSeek's 2.4B leaves it out
    ("deepseek-v2-lite", 2.4e9, "no-input-embedding", "DeepSeek-V2 paper App. B: V2-Lite 2.4B activated"),
    # [issue 17] Z.ai counts neither embedding nor LM head (GLM-4.5's 32B activated is its layers' 32.1B)
    ("glm-4.5-air", 12e9, "no-embeddings", "GLM-4.5 report (arXiv:2508.06471): GLM-4.5-Air 12B active"),
]


@pytest.mark.parametrize("name, published, source", PUBLISHED_TOTAL)
def test_total_params_match_published_within_1pct(name, published, source):
    w = from_config(CONFIGS / f"{name}.json")
    # [issue 17] published counts leave the multi-token prediction modules out (DeepSeek-V3 report section 2.2 and
    # its Hugging Face card: 671B of main model weights and 14B of MTP module weights)
    main = w.params - w.transformer.mtp_params()
    err = main / published - 1
    assert abs(err) <= 0.01, f"{name}: {main:.5g} vs {published:.5g} ({source}): {err:+.2%}"


@pytest.mark.parametrize("name, published, convention, source", PUBLISHED_ACTIVE)
def test_active_params_match_published_within_3pct(name, published, convention, source):
    w = from_config(CONFIGS / f"{name}.json")
    assert w.is_moe and w.params_active < w.params
    active = (w.params_active - w.transformer.mtp_params(active=True)  # [issue 17] (the published count's)
              - {"all": 0.0, "no-input-embedding": _emb(w), "no-embeddings": 2.0 * _emb(w)}[convention])
    err = active / published - 1
    assert abs(err) <= 0.03, f"{name}: {active:.5g} vs {published:.5g} ({source}): {err:+.2%}"


def test_nemotron_embedding_and_non_embedding_parts():
    """Both Nemotron-4 reports give the split: 15B: 3.2B + 12.5B; 340B: 9.4B + 331.6B (untied input and
    output embeddings of a 256,000-token vocabulary)."""
    for name, emb, rest in (("nemotron-4-15b", 3.2e9, 12.5e9), ("nemotron-4-340b", 9.4e9, 331.6e9)):
        w = from_config(CONFIGS / f"{name}.json")
        assert 2 * _emb(w) == pytest.approx(emb, rel=0.02)
        assert w.params - 2 * _emb(w) == pytest.approx(rest, rel=0.01)


def test_every_supported_model_type_has_a_fixture_that_builds():
    types = {}
    for p in sorted([*CONFIGS.glob("*.json"), *CONFIGS.glob("*.yaml")]):
        w = from_config(p)
        types.setdefault(spec_from_config(p)[3]["model_type"], w)
        assert w.transformer is not None and w.params > 0 and w.sources and w.assumptions
    assert set(types) == set(SUPPORTED_MODEL_TYPES) and len(SUPPORTED_MODEL_TYPES) >= 19


@pytest.mark.parametrize("model_id, fixture", [("llama3.1-8b", "llama3.1-8b"), ("mixtral-8x7b", "mixtral-8x7b"),
                                               ("deepseek-v3", "deepseek-v3"), ("gpt-oss-120b", "gpt-oss-120b"),
                                               ("qwen3-30b-a3b", "qwen3-30b-a3b"), ("nemotron-4-340b", "nemotron-4-340b")])
def test_catalogue_entries_equal_their_config(model_id, fixture):
    cat = get_workload(model_id, seq_len=2048)
    cfg = from_config(CONFIGS / f"{fixture}.json", seq_len=2048)
    assert cat.params == cfg.params and cat.params_active == cfg.params_active
    assert cat.fwd_flop_per_sample == cfg.fwd_flop_per_sample
    assert cat.transformer == dataclasses.replace(cfg.transformer, seq_len=cat.transformer.seq_len)


def test_path_works_wherever_an_id_does(tmp_path):
    d = tmp_path / "my-model"
    d.mkdir()
    (d / "config.json").write_text((CONFIGS / "qwen3-8b.json").read_text())
    by_file = get_workload(str(d / "config.json"), seq_len=1024)
    by_dir = get_workload(str(d), seq_len=1024)
    assert by_file.params == by_dir.params and by_file.tokens_per_sample == 1024
    assert by_file.with_seq_len(512).tokens_per_sample == 512
    assert by_file.id == "qwen3-8b" and "config.json" in by_file.sources[0]


# --- FLOPs against hand calculations ---------------------------------------------------------------

def test_dense_flops_gpt2_by_hand():
    """GPT-2 small, s = 1024, h = 768, L = 12, V = 50257, FFN 4h, forward per token:
    per layer QKV + out 8 h^2 = 4,718,592, MLP 16 h^2 = 9,437,184, attention 4 s h = 3,145,728 (QK^T and AV
    over all 1024 keys); head 2 h V = 77,194,752. Total 12 * 17,301,504 + 77,194,752 = 284,812,800."""
    w = from_config(CONFIGS / "gpt2.json", seq_len=1024)
    assert w.fwd_flop_per_sample / 1024 == pytest.approx(284_812_800, rel=0.01)


def test_gqa_flops_llama31_8b_by_hand():
    """Llama 3.1 8B at s = 8192: q = 32 x 128 = 4096, kv = 8 x 128 = 1024, f = 14336, V = 128256.
    Per layer per token: projections 2 (h q + 2 h kv + q h) = 83,886,080; attention 2 * 2 s q = 134,217,728;
    SwiGLU 2 * 3 h f = 352,321,536; sum 570,425,344. x 32 layers + head 2 h V = 1,050,673,152:
    19,304,284,160 forward FLOPs per token."""
    w = from_config(CONFIGS / "llama3.1-8b.json", seq_len=8192)
    assert w.fwd_flop_per_sample / 8192 == pytest.approx(19_304_284_160, rel=0.01)


def test_moe_flops_mixtral_by_hand():
    """Mixtral 8x7B at s = 4096, only the 2 routed experts count: per layer per token projections
    83,886,080 (as Llama: h = 4096, kv 1024), attention 2 * 2 * 4096 * 4096 = 67,108,864, router
    2 h E = 65,536, two experts 2 * 2 * 3 h f = 704,643,072: 855,703,552. x 32 + head 2 * 4096 * 32000
    = 262,144,000: 27,644,657,664 forward FLOPs per token (the 8 experts of the total would give ~3.3x)."""
    w = from_config(CONFIGS / "mixtral-8x7b.json", seq_len=4096)
    assert w.fwd_flop_per_sample / 4096 == pytest.approx(27_644_657_664, rel=0.01)
    experts = sum(g.fwd_flop_per_sample for g in w.layers if g.name == "experts")
    assert experts / 4096 == pytest.approx(32 * 2 * 2 * 3 * 4096 * 14336, rel=1e-12)


@pytest.mark.parametrize("name", ["gpt2", "llama3.1-8b", "mixtral-8x7b", "deepseek-v3", "gpt-oss-20b",
                                  "qwen3-30b-a3b", "gemma2-9b"])
def test_six_n_convention_is_three_times_the_builders_forward_count(name):
    """Two codes, one convention: flops_per_token's 6 N_active + attention equals 3x the builder's
    layer-by-layer forward count (all matrix products, biases and norms aside)."""
    w = from_config(CONFIGS / f"{name}.json", seq_len=1024)
    f = flops_per_token(w.transformer, 1024)
    assert f["six_n_attention_flop_per_token"] == pytest.approx(3 * w.fwd_flop_per_sample / 1024, rel=1e-9)
    assert f["megatron_flop_per_token"] < f["six_n_attention_flop_per_token"] * 1.001   # causal halving, no router
    assert "six_n_attention" in f["mfu_uses"]


def test_megatron_convention_by_hand_for_llama():
    """Megatron-LM num_floating_point_operations for Llama 3.1 8B (swiglu, GQA 8 groups, s = 8192, no
    vocab padding beyond 128256): per token 6 [h (q + 2 kv) + q h + q s (causal: s/2 keys, 2 matmuls)
    + 3 h f] per layer + 6 h V = 6 [(25,165,824 + 16,777,216 + 33,554,432 + 176,160,768) x 32
    + 525,336,576] = 6 x 8,578,400,256 = 51,470,401,536."""
    w = from_config(CONFIGS / "llama3.1-8b.json", seq_len=8192)
    assert flops_per_token(w.transformer, 8192)["megatron_flop_per_token"] == pytest.approx(51_470_401_536, rel=1e-9)


def test_sliding_window_layers_see_fewer_keys():
    """GPT-OSS alternates a 128-token window and full attention: at s = 4096 half the layers see 4096 keys,
    half 128."""
    w = from_config(CONFIGS / "gpt-oss-20b.json", seq_len=4096)
    spec = w.transformer
    assert spec.n_window_layers == 12 and spec.attention_window == 128
    att = sum(g.fwd_flop_per_sample for g in w.layers if g.kind == "attention")
    assert att == pytest.approx(2 * 4096 * (4096 + 128) * 12 * 2 * spec.q_dim, rel=1e-12)


def test_deepseek_v3_structure():
    w = from_config(CONFIGS / "deepseek-v3.json")
    s = w.transformer
    assert s.mla and s.n_moe_layers == 58 and [s.is_moe_layer(i) for i in range(4)] == [False, False, False, True]
    assert s.q_dim == 128 * 192 and s.v_dim == 128 * 128 and s.shared_ff_dim == 2048
    names = {g.name for g in w.layers}
    assert {"experts", "shared experts", "router", "mlp"} <= names
    # [issue 17] its multi-token prediction module is trained with it (num_nextn_predict_layers 1), and said so
    assert s.mtp_layers == 1 and any("multi-token prediction" in a for a in w.assumptions)
    assert "multi-token prediction" in names


def test_assumptions_are_reported():
    cfg = _cfg("llama3.1-8b")
    del cfg["num_key_value_heads"], cfg["tie_word_embeddings"]
    w = from_config(cfg)
    text = " ".join(w.assumptions)
    assert "num_key_value_heads absent: 32 assumed" in text and "tie_word_embeddings absent: False" in text
    assert w.transformer.n_kv_heads == 32 and "sequence length 4096" in text


# --- bad input: a clear message naming the field ---------------------------------------------------

@pytest.mark.parametrize("change, match", [
    ({"hidden_size": "4096"}, "field 'hidden_size' must be an integer"),
    ({"num_hidden_layers": -2}, "field 'num_hidden_layers' must be >= 1"),
    ({"intermediate_size": 14336.5}, "field 'intermediate_size' must be an integer"),
    ({"tie_word_embeddings": "no"}, "field 'tie_word_embeddings' must be true or false"),
    ({"model_type": "llama9"}, "model_type 'llama9' is not supported"),
    ({"num_key_value_heads": 5}, "n_kv_heads must divide n_heads"),
    ({"intermediate_size": None}, "missing field 'intermediate_size'"),
])
def test_bad_configs_name_the_field(change, match):
    cfg = {**_cfg("llama3.1-8b"), **change}
    with pytest.raises(ScenarioError, match=match):
        from_config(cfg)


def test_bad_files(tmp_path):
    with pytest.raises(ScenarioError, match="cannot read model config"):
        from_config(tmp_path / "nope.json")
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(ScenarioError, match="not valid JSON"):
        from_config(tmp_path / "bad.json")
    (tmp_path / "list.json").write_text("[1, 2]")
    with pytest.raises(ScenarioError, match="must hold a JSON object"):
        from_config(tmp_path / "list.json")
    (tmp_path / "nomt.json").write_text("{}")
    with pytest.raises(ScenarioError, match="missing field 'model_type'"):
        from_config(tmp_path / "nomt.json")
    with pytest.raises(ScenarioError, match="cannot read model config"):
        get_workload(str(tmp_path / "missing" / "config.json"))
    with pytest.raises(ScenarioError, match="learned positions"):
        from_config(CONFIGS / "gpt2.json", seq_len=2048)
    cfg = {**_cfg("mixtral-8x7b"), "num_experts_per_tok": 9}
    with pytest.raises(ScenarioError, match="top_k"):
        from_config(cfg)


def test_megatron_and_nemo_recipes():
    """A NeMo launcher recipe (YAML with ${...} interpolations, vocabulary from the GPT-2 tokenizer) and a
    Megatron-LM argument set give the same model as the catalogue entry / Hugging Face config."""
    nemo = from_config(CONFIGS / "nemo-gpt3-5b.yaml")
    cat = get_workload("gpt3-5b-nemo")
    assert nemo.params == cat.params and nemo.seq_len == 2048 and nemo.transformer.padded_vocab == 50304
    assert any("interpolation" in a for a in nemo.assumptions)
    meg = from_config(CONFIGS / "megatron-qwen3-30b-a3b.json", seq_len=1024)
    hf = from_config(CONFIGS / "qwen3-30b-a3b.json", seq_len=1024)
    assert (meg.params, meg.params_active, meg.fwd_flop_per_sample) == (hf.params, hf.params_active,
                                                                        hf.fwd_flop_per_sample)


def test_gemma3_sparse_config_reads_the_class_defaults_and_five_local_layers_to_one_global():
    """[issue 17] Gemma 3 12B's released config leaves out every field equal to Gemma3TextConfig's default: read as
    those, it has the published 10,759M non-embedding parameters (Gemma 3 report, Table 1), 48 layers of which every
    sixth attends globally (layers 5, 11, ..., 47) and the other 40 through a 1024-key window; the multimodal and the
    text-only layouts read the same; layer_types, where given, decides."""
    full = from_config(CONFIGS / "gemma3-12b-it.json", seq_len=32768)
    text = from_config(CONFIGS / "gemma3-12b-text.json", seq_len=32768)
    spec = full.transformer
    assert text.transformer == spec and text.params == full.params
    assert (spec.n_layers, spec.d_head, spec.vocab_size, spec.attention_window) == (48, 256, 262_208, 1024)
    assert spec.qk_norm and spec.layer_norms == 4 and spec.tied_embeddings
    assert spec.window_layers == tuple(i for i in range(48) if (i + 1) % 6)
    assert full.params - spec.vocab_size * spec.d_model == pytest.approx(10_759e6, rel=5e-4)
    assert any("vision tower is not counted" in a for a in full.assumptions)
    assert not any("max_position_embeddings absent: None" in a for a in full.assumptions)
    raw = json.loads((CONFIGS / "gemma3-12b-text.json").read_text())
    types = ["full_attention" if i % 2 else "sliding_attention" for i in range(48)]
    spec2 = spec_from_config({**raw, "layer_types": types})[0]
    assert spec2.window_layers == tuple(range(0, 48, 2))
    assert spec_from_config({**raw, "sliding_window": None})[0].attention_window is None


def test_gemma3_text_config_that_is_not_an_object_is_a_clear_error():
    raw = json.loads((CONFIGS / "gemma3-12b-it.json").read_text())
    with pytest.raises(ScenarioError, match="text_config.*must be an object"):
        spec_from_config({**raw, "text_config": "gemma3_text"})
