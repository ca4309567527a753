"""The model catalogue against published parameter and FLOP counts, and its invariants.

Published figures and where they come from:
* torchvision weights metadata (pytorch/vision, torchvision/models/*.py): ``num_params`` and ``_ops``
  (GMAC at the reference resolution).
* Papers: Brown et al. 2020 Table 2.1 (GPT-3), Radford et al. 2019 / released checkpoints (GPT-2),
  Devlin et al. 2019 (BERT 110M / 340M), Narayanan et al. 2021 Table 1 (Megatron GPT), Llama 2/3
  papers and model cards, Mistral 7B, MPT model cards.
"""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest

from gpusim.errors import GpusimError, ScenarioError, UnknownIdError
from gpusim.workload import (
    FAMILIES, LAYER_KINDS, LayerGroup, Workload, get_workload, list_workloads, workload_ids,
)

IDS = workload_ids()

# (id, published parameter count, relative tolerance, source)
PUBLISHED_PARAMS = [
    ("resnet50", 25_557_032, 0.001, "torchvision ResNet50_Weights num_params"),
    ("resnet101", 44_549_160, 0.001, "torchvision ResNet101_Weights num_params"),
    ("vgg16", 138_357_544, 0.001, "torchvision VGG16_Weights num_params"),
    ("inception-v3", 27_161_264, 0.001, "torchvision Inception_V3_Weights num_params (with aux head)"),
    ("vit-b-16", 86_567_656, 0.001, "torchvision ViT_B_16_Weights num_params"),
    ("vit-l-16", 304_326_632, 0.001, "torchvision ViT_L_16_Weights num_params"),
    ("mask-rcnn", 44_401_393, 0.01, "torchvision MaskRCNN_ResNet50_FPN_Weights num_params"),
    ("bert-base", 110e6, 0.02, "Devlin et al. 2019: 110M"),
    ("bert-large", 340e6, 0.02, "Devlin et al. 2019: 340M"),
    ("gpt2", 124e6, 0.01, "released GPT-2 small: 124M"),
    ("gpt2-medium", 355e6, 0.01, "released GPT-2 medium: 355M"),
    ("gpt2-large", 774e6, 0.01, "released GPT-2 large: 774M"),
    ("gpt2-xl", 1558e6, 0.01, "released GPT-2 XL: 1558M"),
    ("gpt3-125m", 125e6, 0.03, "Brown et al. 2020 Table 2.1"),
    ("gpt3-350m", 350e6, 0.03, "Brown et al. 2020 Table 2.1"),
    ("gpt3-760m", 760e6, 0.03, "Brown et al. 2020 Table 2.1"),
    ("gpt3-1.3b", 1.3e9, 0.03, "Brown et al. 2020 Table 2.1"),
    ("gpt3-2.7b", 2.7e9, 0.03, "Brown et al. 2020 Table 2.1"),
    ("gpt3-6.7b", 6.7e9, 0.03, "Brown et al. 2020 Table 2.1"),
    ("gpt3-13b", 13.0e9, 0.03, "Brown et al. 2020 Table 2.1"),
    ("gpt3-175b", 175.0e9, 0.03, "Brown et al. 2020 Table 2.1"),
    ("gpt-1.7b", 1.7e9, 0.03, "Narayanan et al. 2021 Table 1"),
    ("gpt-3.6b", 3.6e9, 0.03, "Narayanan et al. 2021 Table 1"),
    ("gpt-7.5b", 7.5e9, 0.03, "Narayanan et al. 2021 Table 1"),
    ("gpt-18b", 18.4e9, 0.01, "Narayanan et al. 2021 Table 1"),
    ("gpt-39b", 39.1e9, 0.01, "Narayanan et al. 2021 Table 1"),
    ("gpt-76b", 76.1e9, 0.01, "Narayanan et al. 2021 Table 1"),
    ("gpt-145b", 145.6e9, 0.01, "Narayanan et al. 2021 Table 1"),
    ("gpt-310b", 310.1e9, 0.01, "Narayanan et al. 2021 Table 1"),
    ("gpt-530b", 529.6e9, 0.01, "Narayanan et al. 2021 Table 1"),
    ("gpt-1t", 1008.0e9, 0.01, "Narayanan et al. 2021 Table 1"),
    ("llama2-7b", 6.74e9, 0.01, "Llama 2 model card (6.74B)"),
    ("llama2-13b", 13.0e9, 0.01, "Llama 2 model card (13.0B)"),
    ("llama2-70b", 69.0e9, 0.01, "Llama 2 model card (68.98B)"),
    ("llama3-8b", 8.03e9, 0.01, "Llama 3 model card (8.03B)"),
    ("llama3-70b", 70.6e9, 0.01, "Llama 3 model card (70.6B)"),
    ("llama3-405b", 405e9, 0.01, "Llama 3 herd paper (405B)"),
    ("mistral-7b", 7.24e9, 0.01, "Mistral 7B (7.24B)"),
    ("mpt-7b", 6.7e9, 0.02, "MPT-7B model card (6.7B)"),
    ("mpt-30b", 29.95e9, 0.01, "MPT-30B model card (29.95B)"),
]

# (id, published forward multiply-adds per sample, relative tolerance, source)
PUBLISHED_GMAC = [
    ("resnet50", 4.089e9, 0.005, "torchvision _ops; He et al. 2016 quote 3.8 GMAC for v1 (stride on 1x1)"),
    ("resnet101", 7.801e9, 0.005, "torchvision _ops"),
    ("vgg16", 15.47e9, 0.005, "torchvision _ops"),
    ("inception-v3", 5.713e9, 0.005, "torchvision _ops (eval; we add the training-time aux head, +0.1%)"),
    ("vit-b-16", 17.564e9, 0.005, "torchvision _ops"),
    ("vit-l-16", 61.555e9, 0.005, "torchvision _ops"),
]


@pytest.mark.parametrize("model_id, published, rtol, source", PUBLISHED_PARAMS)
def test_params_match_published(model_id, published, rtol, source):
    w = get_workload(model_id)
    err = w.params / published - 1
    assert abs(err) <= rtol, f"{model_id}: {w.params:.5g} vs {published:.5g} ({source}): {err:+.2%}"


@pytest.mark.parametrize("model_id, published, rtol, source", PUBLISHED_GMAC)
def test_forward_flops_match_published(model_id, published, rtol, source):
    w = get_workload(model_id)
    err = w.fwd_flop_per_sample / (2 * published) - 1
    assert abs(err) <= rtol, f"{model_id}: {w.fwd_flop_per_sample / 2:.5g} MAC vs {published:.5g} ({source}): {err:+.2%}"


def test_resnet50_and_vgg16_headline_numbers():
    """The brief's figures: ResNet-50 25.6M params and ~8.2 GFLOP; VGG-16 138M and 15.5 GMAC."""
    r = get_workload("resnet50")
    assert r.params == pytest.approx(25.6e6, rel=0.01)
    assert r.fwd_flop_per_sample == pytest.approx(8.2e9, rel=0.02)
    v = get_workload("vgg16")
    assert v.params == pytest.approx(138e6, rel=0.01)
    assert v.fwd_flop_per_sample == pytest.approx(2 * 15.5e9, rel=0.01)


@pytest.mark.parametrize("model_id", IDS)
def test_every_entry_is_sourced_positive_and_consistent(model_id):
    w = get_workload(model_id)
    assert w.id == model_id
    assert w.sources and all(isinstance(s, str) and len(s) > 10 for s in w.sources)
    assert w.family in FAMILIES and w.sample_unit in ("image", "sequence")
    for f in ("tokens_per_sample", "params", "fwd_flop_per_sample", "act_bytes_per_sample",
              "act_ckpt_bytes_per_sample", "input_bytes_per_sample", "h2d_bytes_per_sample",
              "preprocess_core_s_per_sample"):
        v = getattr(w, f)
        assert isinstance(v, float) and math.isfinite(v) and v > 0, (f, v)
    assert w.act_ckpt_bytes_per_sample < w.act_bytes_per_sample
    assert w.layers and all(g.kind in LAYER_KINDS and g.count >= 1 for g in w.layers)
    assert sum(g.fwd_flop_per_sample for g in w.layers) == pytest.approx(w.fwd_flop_per_sample, rel=1e-12)
    assert w.fwd_kernels == sum(g.count for g in w.layers) > 0
    assert w.weight_bytes >= 2 * w.params * 0.5  # every weight is read at least once (tied/shared ones once)
    if w.sample_unit == "image":
        assert w.tokens_per_sample == 1.0
    else:
        assert w.tokens_per_sample > 1
    arrays = w.roofline_arrays()
    assert set(arrays) == {"fwd_flop_per_sample", "fwd_bytes_per_sample", "weight_bytes", "count"}
    for a in arrays.values():
        assert a.dtype == np.float64 and a.shape == (len(w.layers),) and np.all(np.isfinite(a)) and np.all(a >= 0)
    assert arrays["fwd_flop_per_sample"].sum() == pytest.approx(w.fwd_flop_per_sample, rel=1e-12)


@pytest.mark.parametrize("model_id", IDS)
def test_flops_are_about_two_per_param_per_token_or_more(model_id):
    """A dense forward pass does at least ~2 FLOPs per weight per token that the weight touches:
    a sanity bound that catches unit slips (a factor 1e3 or a forgotten 2). For a mixture of experts the
    weights a token touches are its active parameters (``params_active``, which is ``params`` for a dense model)."""
    w = get_workload(model_id)
    if w.sample_unit == "sequence":
        per_token = w.fwd_flop_per_sample / w.tokens_per_sample
        assert 0.5 * w.params_active < per_token < 30 * w.params_active
    else:
        assert w.fwd_flop_per_sample > 0.5 * w.params_active


def test_matmul_and_conv_carry_all_flops():
    for w in list_workloads():
        compute = sum(g.fwd_flop_per_sample for g in w.layers if g.kind in ("matmul", "conv", "attention"))
        assert compute == pytest.approx(w.fwd_flop_per_sample, rel=1e-12), w.id


def test_unknown_id_suggests_close_matches():
    with pytest.raises(UnknownIdError) as e:
        get_workload("lama2-7b")
    msg = str(e.value)
    assert "unknown model 'lama2-7b'" in msg and "did you mean" in msg and "'llama2-7b'" in msg
    assert isinstance(e.value, KeyError) and isinstance(e.value, GpusimError)
    with pytest.raises(UnknownIdError, match="did you mean.*'resnet50'"):
        get_workload("resnet5")


def test_ids_are_lower_case_hyphenated_and_aliases_resolve():
    for i in IDS:
        assert i == i.lower() and " " not in i and "_" not in i
    assert get_workload("ResNet-50").id == "resnet50"
    assert get_workload("LLAMA2-7B").id == "llama2-7b"
    assert len(set(IDS)) == len(IDS) >= 40


def test_catalogue_covers_the_validation_models():
    for i in ("resnet50", "resnet101", "inception-v3", "vgg16", "ssd300", "mask-rcnn", "vit-b-16", "vit-l-16",
              "bert-base", "bert-large", "gnmt", "transformer-xl-base", "transformer-xl-large", "gpt2", "gpt2-xl",
              "gpt3-125m", "gpt3-175b", "llama2-70b", "llama3-405b", "mistral-7b", "mpt-7b", "mpt-30b",
              "gpt-1.7b", "gpt-1t", "gpt-22b", "gpt-530b"):
        assert i in IDS
    assert "mpt-70b" not in IDS  # MosaicML released no 70B model


def test_fixed_size_models_refuse_a_sequence_length():
    w = get_workload("resnet50")
    assert not w.supports_seq_len and w.seq_len is None and w.seq_len_default is None
    with pytest.raises(ScenarioError, match="fixed input size"):
        w.with_seq_len(128)
    with pytest.raises(ValueError):
        get_workload("vit-b-16", seq_len=512)


def test_bad_sequence_lengths_are_rejected():
    for bad in (0, -3, 1.5, True):
        with pytest.raises(ScenarioError):
            get_workload("gpt2", seq_len=bad)
        with pytest.raises(ScenarioError):
            get_workload("gpt2").with_seq_len(bad)


def test_seq_len_defaults():
    assert get_workload("bert-large").seq_len == 128
    assert get_workload("bert-large", seq_len=384).tokens_per_sample == 384
    assert get_workload("gpt3-175b").seq_len == 2048
    assert get_workload("llama2-7b").seq_len == 4096
    assert get_workload("llama3-8b").seq_len == 8192
    assert get_workload("transformer-xl-large").seq_len == 384
    assert get_workload("gnmt").tokens_per_sample == 45


def test_gnmt_is_a_sentence_pair_model():
    w = get_workload("gnmt")
    assert w.family == "rnn" and w.sample_unit == "sequence"
    assert 150e6 < w.params < 170e6   # ~160M: 4+4 LSTM layers of 1024, 32k shared vocab
    w2 = w.with_seq_len(90)           # twice the tokens per pair
    assert w2.tokens_per_sample == 90
    # LSTM and classifier FLOPs double; attention (pairs of source x target tokens) quadruples
    att = lambda x: sum(g.fwd_flop_per_sample for g in x.layers if g.kind == "attention")  # noqa: E731
    assert att(w2) == pytest.approx(4 * att(w), rel=1e-9)
    assert (w2.fwd_flop_per_sample - att(w2)) == pytest.approx(2 * (w.fwd_flop_per_sample - att(w)), rel=1e-9)


def test_data_pipeline_figures():
    r = get_workload("resnet50")
    assert r.input_bytes_per_sample == pytest.approx(110e3)          # mean ImageNet JPEG
    assert r.h2d_bytes_per_sample == 3 * 224 * 224                   # uint8 decoded crop
    assert 1e-3 < r.preprocess_core_s_per_sample < 20e-3
    g = get_workload("gpt2")
    assert g.input_bytes_per_sample == 2 * 1024                      # uint16 token ids
    assert g.h2d_bytes_per_sample == 2 * 8 * 1024                    # int64 inputs and labels
    assert g.preprocess_core_s_per_sample < 1e-3
    assert get_workload("llama3-8b").input_bytes_per_sample == 4 * 8192  # vocab > 65536: int32


def test_lists_are_cached_and_immutable():
    a, b = get_workload("gpt2"), get_workload("gpt2")
    assert a is b
    import dataclasses

    with pytest.raises(dataclasses.FrozenInstanceError):
        a.params = 1.0  # frozen
    assert [w.id for w in list_workloads()] == IDS


def test_workload_rejects_inconsistent_numbers():
    g = (LayerGroup("matmul", 1, 10.0, 1.0, 1.0),)
    with pytest.raises(ScenarioError, match="do not sum"):
        Workload(id="x", name="x", family="custom", sample_unit="image", tokens_per_sample=1.0, params=1.0,
                 fwd_flop_per_sample=11.0, act_bytes_per_sample=1.0, act_ckpt_bytes_per_sample=0.5,
                 input_bytes_per_sample=0.0, h2d_bytes_per_sample=0.0, preprocess_core_s_per_sample=0.0,
                 layers=g, sources=("test",))
    with pytest.raises(ScenarioError, match="family"):
        Workload(id="x", name="x", family="gan", sample_unit="image", tokens_per_sample=1.0, params=1.0,
                 fwd_flop_per_sample=10.0, act_bytes_per_sample=1.0, act_ckpt_bytes_per_sample=0.5,
                 input_bytes_per_sample=0.0, h2d_bytes_per_sample=0.0, preprocess_core_s_per_sample=0.0,
                 layers=g, sources=("test",))
    with pytest.raises(ScenarioError, match="kind"):
        LayerGroup("fft", 1, 0.0, 0.0, 0.0)
    with pytest.raises(ScenarioError, match="finite"):
        LayerGroup("matmul", 1, float("nan"), 0.0, 0.0)
    with pytest.raises(ScenarioError, match="layers"):
        Workload(id="x", name="x", family="custom", sample_unit="image", tokens_per_sample=1.0, params=1.0,
                 fwd_flop_per_sample=10.0, act_bytes_per_sample=1.0, act_ckpt_bytes_per_sample=0.5,
                 input_bytes_per_sample=0.0, h2d_bytes_per_sample=0.0, preprocess_core_s_per_sample=0.0,
                 layers=(), sources=("test",))


def test_custom_workload_defaults():
    w = Workload.custom(params=1e9, fwd_flop_per_sample=2e12, act_bytes_per_sample=4e9, name="My LM",
                        tokens_per_sample=1024)
    assert w.id == "my-lm" and w.family == "custom" and w.sample_unit == "sequence"
    assert w.act_ckpt_bytes_per_sample == pytest.approx(0.4e9) and w.act_block_bytes_per_sample is None
    assert [g.kind for g in w.layers] == ["matmul", "elementwise"]
    assert w.layers[0].fwd_flop_per_sample == 2e12 and w.layers[0].weight_bytes == 2e9
    assert w.layers[1].fwd_bytes_per_sample == 8e9 and w.fwd_kernels == 150
    assert w.h2d_bytes_per_sample == 16 * 1024
    assert not w.supports_seq_len
    img = Workload.custom(params=1e7, fwd_flop_per_sample=1e9, act_bytes_per_sample=1e7,
                          act_ckpt_bytes_per_sample=2e6, preprocess_core_s_per_sample=0.01, fwd_kernels=30)
    assert img.sample_unit == "image" and img.tokens_per_sample == 1.0
    assert img.act_ckpt_bytes_per_sample == 2e6 and img.preprocess_core_s_per_sample == 0.01
    assert img.fwd_kernels == 30
    with pytest.raises(ScenarioError):
        Workload.custom(params=-1, fwd_flop_per_sample=1e9, act_bytes_per_sample=1e7)


def test_importable_without_torch():
    code = ("import sys; sys.modules['torch'] = None\n"
            "import gpusim.workload as w\n"
            "assert 'torch' not in [m for m in sys.modules if sys.modules[m] is not None and m == 'torch']\n"
            "print(len(w.list_workloads()))\n"
            "try:\n"
            "    w.Workload.from_torch(object(), None)\n"
            "except w.ScenarioError as e:\n"
            "    print('needs torch' if 'PyTorch' in str(e) else e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [str(len(IDS)), "needs", "torch"]


def test_workloads_pickle_with_their_rebuild():
    """Sweeps may ship workloads to worker processes: every entry pickles, and keeps with_seq_len."""
    import pickle

    for w in list_workloads():
        w2 = pickle.loads(pickle.dumps(w))
        assert w2 == w
        if w.supports_seq_len:
            assert w2.with_seq_len(77).tokens_per_sample == 77
