"""What is trained: the :class:`Workload` noun, the model catalogue and :meth:`Workload.from_torch`.

A workload says, per training *sample* (one image, or one sequence), how much work a forward pass
is and how much memory it keeps for the backward pass, plus a per-layer-group table for a roofline
(``max(flop / peak, bytes / bandwidth)`` per group) and what the data loader must supply.

Units and conventions (used by every number in this module)
----------------------------------------------------------
* FLOPs count a multiply-add as 2. Only matrix products (matmul, convolution, attention ``QK^T`` and
  ``AV``) carry FLOPs; normalisation, activation functions, softmax, pooling and other memory-bound
  kernels are given 0 FLOPs and are described by the bytes they move. This is the convention of the
  published counts (torchvision's ``_ops``, He et al. 2016, Kaplan et al. 2020 "6N", the MFU
  definition of Chowdhery et al. 2022 Appendix B) and of ``torch.utils.flop_counter``.
* Activations are 16-bit (2 bytes per element); weights are read at 2 bytes per parameter. Masks of
  dropout are 1 byte per element (PyTorch keeps them as ``bool``), max-pool indices 8 bytes (int64),
  the log-probabilities kept by the cross-entropy loss 4 bytes (fp32, as mixed-precision recipes
  compute the loss in fp32).
* ``fwd_bytes_per_sample`` of a group is activation bytes read + written by its kernels in one forward
  pass, per sample, without cache reuse across kernels; ``weight_bytes`` is what those kernels read of
  the weights per forward pass (independent of batch).
* ``count`` of a group is the number of kernels it launches in one forward pass of eager PyTorch
  (independent of batch). Assumptions: conv, batch-norm, ReLU, pooling, add, concat, dropout and each
  linear layer are one kernel each (a conv+bn+relu is 3); a normalisation layer (LayerNorm or RMSNorm)
  is one fused kernel; a dense transformer layer launches 18 kernels with unfused attention and
  dropout (GPT-2/BERT style: norm, QKV, scores, scale, mask, softmax, dropout, context, head-merge
  copy, out-projection, dropout, residual add, norm, fc1, GELU, fc2, dropout, add) and 24 with a
  fused (flash) attention kernel, separate Q/K/V projections, rotary embeddings (5 kernels each for Q
  and K) and a SwiGLU MLP (Llama style). Backward launches roughly twice as many.
* Activation memory kept for backward follows Korthikanti et al. 2022, "Reducing Activation
  Recomputation in Large Transformer Models" (arXiv:2205.05198), Section 4.1: a transformer layer
  keeps ``s*h*(34 + 5*a*s/h)`` bytes per sequence at 16 bits without tensor parallelism, and ``2*s*h``
  with full activation recomputation (only the layer input). :func:`build_transformer` generalises the
  derivation term by term (FFN width, gated FFN, grouped-query attention, no dropout, fused attention
  that keeps the softmax statistics instead of the ``s x s`` probabilities) and reduces exactly to
  their formula for a GPT layer. For CNNs the stored bytes come from the shapes: each op keeps what
  its backward needs (conv and batch-norm their input, ReLU its output, max-pool its input and
  indices), counted once per tensor.
* ``act_ckpt_bytes_per_sample`` (full activation checkpointing) = the input of every checkpointed
  block (transformer layer, ResNet bottleneck, ...; Korthikanti's ``2*s*h`` per layer) + whatever
  lies outside the blocks and is not recomputed (embedding, final norm, head, loss). During the
  backward pass one block at a time is rematerialised on top of this: that transient is
  ``act_block_bytes_per_sample`` (the largest block's activations), kept separate so that a memory
  model adds it once.

References
----------
* He et al. 2016, "Deep Residual Learning for Image Recognition" (CVPR), Table 1.
* NVIDIA DeepLearningExamples (DLE): PyTorch/Classification/ConvNets/resnet50v1.5, PyTorch/Detection/SSD
  (``ssd/model.py``), PyTorch/Translation/GNMT (README), PyTorch/LanguageModeling/Transformer-XL
  (``wt103_base.yaml``, ``wt103_large.yaml``, README "Model architecture").
* torchvision weights metadata (``num_params``, ``_ops`` in GMAC), pytorch/vision ``torchvision/models``.
* Brown et al. 2020, "Language Models are Few-Shot Learners", Table 2.1.
* Touvron et al. 2023, "Llama 2" (Table 1, model card); Meta 2024, "The Llama 3 Herd of Models", Table 3.
* Jiang et al. 2023, "Mistral 7B", Table 1. MosaicML 2023, MPT-7B / MPT-30B model cards.
* Narayanan et al. 2021 (SC'21), "Efficient Large-Scale Language Model Training on GPU Clusters Using
  Megatron-LM", Table 1; Korthikanti et al. 2022, Table 3.
* Devlin et al. 2019 (BERT); Dosovitskiy et al. 2021 (ViT), Table 1; Dai et al. 2019 (Transformer-XL);
  Wu et al. 2016 (GNMT); Szegedy et al. 2016 (Inception-v3); Simonyan & Zisserman 2015 (VGG);
  Liu et al. 2016 (SSD); He et al. 2017 (Mask R-CNN); Lin et al. 2017 (FPN).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from gpusim.errors import ScenarioError, UnknownIdError
from gpusim.units import KB, MS, US

__all__ = [
    "LayerGroup", "Workload", "TransformerSpec", "get_workload", "list_workloads", "workload_ids",
    "transformer_spec", "build_from_spec",
    "LAYER_KINDS", "FAMILIES", "SAMPLE_UNITS",
]

LAYER_KINDS = ("matmul", "conv", "attention", "elementwise", "norm", "embedding", "pool", "other")
FAMILIES = ("cnn", "detection", "encoder", "decoder-lm", "rnn", "vit", "custom")
SAMPLE_UNITS = ("image", "sequence")

ACT_BYTES = 2.0      # 16-bit activations
WEIGHT_BYTES = 2.0   # 16-bit weights as read by the forward kernels
MASK_BYTES = 1.0     # dropout masks (bool)
INDEX_BYTES = 8.0    # int64 indices (max-pool)
LOSS_BYTES = 4.0     # fp32 log-probabilities kept by the loss

# --- data pipeline figures -------------------------------------------------------------------------
#: Mean ImageNet-1k training JPEG: 1,281,167 files, ~140 GB (tensorpack "Efficient DataFlow" tutorial,
#: docs/tutorial/efficient-dataflow.md: "1.28 million images ... JPEG compressed ... 140G in total").
IMAGENET_JPEG_BYTES = 110.0 * KB
#: Mean COCO 2017 training JPEG: "2017 Train images [118K/18GB]" (cocodataset.org/#download): 18e9 / 118,287.
COCO_JPEG_BYTES = 152.0 * KB
#: CPU core-seconds to decode one ImageNet JPEG and apply RandomResizedCrop(224) + flip + to-tensor in
#: a PyTorch DataLoader worker (Pillow/libjpeg-turbo). Decode alone of an ImageNet-validation JPEG runs
#: at 540-730 images/s on one thread of 2023-24 server CPUs with Pillow (1.4-1.9 ms; ternaus
#: imread_benchmark README, arXiv:2605.08731); resize-crop, flip, tensor conversion, collation and
#: Python overhead roughly triple that. Cross-checks: tensorpack's tutorial feeds 1-2k images/s from 25
#: worker processes with heavier augmentation (12-25 ms per image per core); NVIDIA's DLE ResNet-50
#: README moves decoding to the GPU (DALI) on DGX A100 because ~128 CPU cores cannot feed 8 GPUs at
#: ~20k images/s (>6 ms per image per core). We use 6 ms; calibrate for your CPU.
IMAGENET_PREPROCESS_CORE_S = 6.0 * MS
#: Detection augmentation (SSD random crop + colour jitter + resize 300, COCO-sized JPEG): ~10 ms;
#: Mask R-CNN (decode, resize to 800 px short side, flip, float conversion of ~2.6 Mpixel): ~12 ms.
#: Estimates scaled from the ImageNet figure by pixel counts; calibrate.
SSD_PREPROCESS_CORE_S = 10.0 * MS
MASKRCNN_PREPROCESS_CORE_S = 12.0 * MS
#: Text from pre-tokenised files: index, slice and collate token ids. ~0.1 µs per token plus ~10 µs per
#: sample of Python overhead in the loader (estimate; tokenising raw text on the fly costs ~1 µs/token).
TEXT_CORE_S_PER_TOKEN = 0.1 * US
TEXT_CORE_S_PER_SAMPLE = 10.0 * US


def _image_pipeline(jpeg_bytes: float, c: int, h: int, w: int, elem_bytes: float, core_s: float,
                    extra_h2d_bytes: float = 0.0) -> dict[str, float]:
    return {"input_bytes_per_sample": jpeg_bytes,
            "h2d_bytes_per_sample": c * h * w * elem_bytes + extra_h2d_bytes,
            "preprocess_core_s_per_sample": core_s}


def _text_pipeline(tokens: float, vocab: int, n_int64_tensors: int) -> dict[str, float]:
    """Token ids stored as uint16 (vocab <= 65536) or int32 on disk, copied as int64 tensors
    (inputs, labels, masks ...: ``n_int64_tensors`` of them) to the GPU."""
    stored = 2.0 if vocab <= 65536 else 4.0
    return {"input_bytes_per_sample": tokens * stored,
            "h2d_bytes_per_sample": tokens * 8.0 * n_int64_tensors,
            "preprocess_core_s_per_sample": TEXT_CORE_S_PER_SAMPLE + tokens * TEXT_CORE_S_PER_TOKEN}


# =================================================================================================
# The nouns
# =================================================================================================

def _check_number(what: str, value: float, *, positive: bool = False) -> float:
    v = float(value)
    if not math.isfinite(v) or v < 0 or (positive and v == 0):
        need = "> 0" if positive else ">= 0"
        raise ScenarioError(f"{what} must be finite and {need} (got {value!r})")
    return v


@dataclass(frozen=True)
class LayerGroup:
    """Layers of one kind, summed over the network, for a per-layer roofline.

    A network usually has several groups of the same ``kind`` (``name`` tells them apart, e.g. the
    convolutions of each ResNet stage), so that groups of very different arithmetic intensity are not
    merged.

    Attributes
    ----------
    kind : one of ``LAYER_KINDS``.
    count : kernels this group launches in one forward pass (independent of batch).
    fwd_flop_per_sample : FLOPs (multiply-add = 2) per sample in the forward pass.
    fwd_bytes_per_sample : activation bytes read + written per sample in the forward pass, 16-bit.
    weight_bytes : weight bytes read per forward pass at 2 bytes/parameter (independent of batch).
    name : what the group is ("conv layer3", "attention projections", ...).
    """

    kind: str
    count: int
    fwd_flop_per_sample: float
    fwd_bytes_per_sample: float
    weight_bytes: float
    name: str = ""

    def __post_init__(self):
        if self.kind not in LAYER_KINDS:
            raise ScenarioError(f"layer group kind must be one of {', '.join(LAYER_KINDS)} (got {self.kind!r})")
        if int(self.count) != self.count or self.count < 1:
            raise ScenarioError(f"layer group {self.name or self.kind!r}: count must be an integer >= 1 "
                                f"(got {self.count!r})")
        object.__setattr__(self, "count", int(self.count))
        for f in ("fwd_flop_per_sample", "fwd_bytes_per_sample", "weight_bytes"):
            object.__setattr__(self, f, _check_number(f"layer group {self.name or self.kind!r}: {f}",
                                                      getattr(self, f)))


@dataclass(frozen=True)
class Workload:
    """What is trained, per sample (one image or one sequence).

    Attributes
    ----------
    id, name : catalogue id (lower-case, hyphenated) and display name.
    family : one of ``FAMILIES``.
    sample_unit : ``"image"`` or ``"sequence"``; throughput is counted in these.
    tokens_per_sample : tokens in one sample (sequence length; mean tokens per sentence pair for GNMT);
        1.0 for images.
    params : parameter count.
    fwd_flop_per_sample : forward FLOPs per sample (multiply-add = 2), the sum over ``layers``.
    act_bytes_per_sample : activation bytes kept for the backward pass per sample (16-bit activations,
        no checkpointing).
    act_ckpt_bytes_per_sample : the same with full activation checkpointing: block (layer) inputs and
        the non-recomputed head/loss activations; excludes the one-block transient below.
    act_block_bytes_per_sample : activations of the largest checkpointed block (rematerialised one at a
        time during the backward pass with checkpointing), or None when unknown.
    input_bytes_per_sample : bytes read from storage per sample (encoded JPEG, token ids).
    h2d_bytes_per_sample : bytes copied host-to-device per sample (the decoded batch tensor).
    preprocess_core_s_per_sample : CPU core-seconds to decode/augment one sample in a typical loader.
    layers : roofline groups; their FLOPs sum to ``fwd_flop_per_sample``.
    sources : where the architecture numbers come from.
    seq_len_default : the default sequence length for sequence models (None for fixed-size inputs).
    notes : approximations and assumptions.
    """

    id: str
    name: str
    family: str
    sample_unit: str
    tokens_per_sample: float
    params: float
    fwd_flop_per_sample: float
    act_bytes_per_sample: float
    act_ckpt_bytes_per_sample: float
    input_bytes_per_sample: float
    h2d_bytes_per_sample: float
    preprocess_core_s_per_sample: float
    layers: tuple[LayerGroup, ...]
    sources: tuple[str, ...]
    seq_len_default: int | None = None
    notes: str = ""
    act_block_bytes_per_sample: float | None = None
    _rebuild: Callable[[int], Workload] | None = field(default=None, repr=False, compare=False)

    def __post_init__(self):
        if self.family not in FAMILIES:
            raise ScenarioError(f"workload family must be one of {', '.join(FAMILIES)} (got {self.family!r})")
        if self.sample_unit not in SAMPLE_UNITS:
            raise ScenarioError(f"sample_unit must be 'image' or 'sequence' (got {self.sample_unit!r})")
        for f in ("tokens_per_sample", "params", "fwd_flop_per_sample", "act_bytes_per_sample"):
            object.__setattr__(self, f, _check_number(f"{self.id}: {f}", getattr(self, f), positive=True))
        for f in ("act_ckpt_bytes_per_sample", "input_bytes_per_sample", "h2d_bytes_per_sample",
                  "preprocess_core_s_per_sample"):
            object.__setattr__(self, f, _check_number(f"{self.id}: {f}", getattr(self, f)))
        layers = tuple(self.layers)
        if not layers or not all(isinstance(g, LayerGroup) for g in layers):
            raise ScenarioError(f"{self.id}: layers must be a non-empty sequence of LayerGroup")
        object.__setattr__(self, "layers", layers)
        total = sum(g.fwd_flop_per_sample for g in layers)
        if not math.isclose(total, self.fwd_flop_per_sample, rel_tol=1e-9, abs_tol=1e-6):
            raise ScenarioError(f"{self.id}: the layer groups' FLOPs ({total:.6g}) do not sum to "
                                f"fwd_flop_per_sample ({self.fwd_flop_per_sample:.6g})")
        if self.act_block_bytes_per_sample is not None:
            object.__setattr__(self, "act_block_bytes_per_sample",
                               _check_number(f"{self.id}: act_block_bytes_per_sample", self.act_block_bytes_per_sample))
        sources = (self.sources,) if isinstance(self.sources, str) else tuple(self.sources)
        object.__setattr__(self, "sources", sources)
        if self.seq_len_default is not None and (int(self.seq_len_default) != self.seq_len_default
                                                 or self.seq_len_default < 1):
            raise ScenarioError(f"{self.id}: seq_len_default must be a positive integer or None")

    # --- derived, read-only ------------------------------------------------------------------------
    @property
    def fwd_kernels(self) -> int:
        """Kernels launched by one forward pass (sum of the groups' counts)."""
        return int(sum(g.count for g in self.layers))

    @property
    def weight_bytes(self) -> float:
        """Weight bytes read by one forward pass (sum over groups, 16-bit)."""
        return float(sum(g.weight_bytes for g in self.layers))

    @property
    def fwd_bytes_per_sample(self) -> float:
        """Activation bytes read + written per sample by one forward pass (sum over groups)."""
        return float(sum(g.fwd_bytes_per_sample for g in self.layers))

    @property
    def seq_len(self) -> int | None:
        """The sequence length this workload was evaluated at (None for fixed-size inputs)."""
        return None if self.seq_len_default is None else int(round(self.tokens_per_sample))

    @property
    def supports_seq_len(self) -> bool:
        return self._rebuild is not None

    def with_seq_len(self, seq_len: int) -> Workload:
        """The same model re-evaluated at another sequence length: attention FLOPs and the attention
        activations grow quadratically, everything else per sample linearly.

        Raises :class:`gpusim.errors.ScenarioError` (a ``ValueError``) for fixed-size models.
        """
        if self._rebuild is None:
            raise ScenarioError(f"model {self.id!r} has a fixed input size; --seq-len applies only to "
                                f"sequence models (e.g. bert-large, gpt2, llama2-7b)")
        if isinstance(seq_len, bool) or int(seq_len) != seq_len or seq_len < 1:
            raise ScenarioError(f"sequence length must be a positive integer (got {seq_len!r})")
        return self._rebuild(int(seq_len))

    def roofline_arrays(self) -> dict[str, np.ndarray]:
        """One entry per group, float64 arrays of shape (K,): ``fwd_flop_per_sample``,
        ``fwd_bytes_per_sample``, ``weight_bytes``, ``count``."""
        return {
            "fwd_flop_per_sample": np.array([g.fwd_flop_per_sample for g in self.layers], dtype=np.float64),
            "fwd_bytes_per_sample": np.array([g.fwd_bytes_per_sample for g in self.layers], dtype=np.float64),
            "weight_bytes": np.array([g.weight_bytes for g in self.layers], dtype=np.float64),
            "count": np.array([g.count for g in self.layers], dtype=np.float64),
        }

    def summary(self) -> dict[str, Any]:
        """The key numbers, JSON-ready (SI units, unit in the key)."""
        return {
            "id": self.id, "name": self.name, "family": self.family, "sample_unit": self.sample_unit,
            "tokens_per_sample": self.tokens_per_sample, "seq_len": self.seq_len, "params": self.params,
            "fwd_flop_per_sample": self.fwd_flop_per_sample, "act_bytes_per_sample": self.act_bytes_per_sample,
            "act_ckpt_bytes_per_sample": self.act_ckpt_bytes_per_sample,
            "act_block_bytes_per_sample": self.act_block_bytes_per_sample,
            "input_bytes_per_sample": self.input_bytes_per_sample, "h2d_bytes_per_sample": self.h2d_bytes_per_sample,
            "preprocess_core_s_per_sample": self.preprocess_core_s_per_sample, "fwd_kernels": self.fwd_kernels,
            "weight_bytes": self.weight_bytes, "sources": list(self.sources), "notes": self.notes,
        }

    # --- constructors ------------------------------------------------------------------------------
    @classmethod
    def custom(cls, *, params: float, fwd_flop_per_sample: float, act_bytes_per_sample: float,
               name: str = "custom", id: str | None = None, family: str = "custom",
               sample_unit: str | None = None, tokens_per_sample: float | None = None,
               act_ckpt_bytes_per_sample: float | None = None, act_block_bytes_per_sample: float | None = None,
               input_bytes_per_sample: float | None = None,
               h2d_bytes_per_sample: float | None = None, preprocess_core_s_per_sample: float | None = None,
               fwd_kernels: int = 150, notes: str = "", sources: Sequence[str] = ("user-supplied numbers",)
               ) -> Workload:
        """A workload from numbers you know.

        Defaults for what you do not give:

        * ``sample_unit``: ``"sequence"`` when ``tokens_per_sample`` > 1 is given, else ``"image"``.
        * ``act_ckpt_bytes_per_sample``: 1/10 of ``act_bytes_per_sample`` (a transformer keeps
          ~2/(34 + 5as/h) of a layer's activations per layer plus its head; a CNN ~1/3-1/2);
          ``act_block_bytes_per_sample`` unknown (None) unless given.
        * data pipeline: an ImageNet JPEG (110 kB), a 3x224x224 uint8 copy and 6 ms of CPU per image;
          or, for sequences, token ids (4 bytes each stored, 2 int64 tensors copied) and ~0.1 µs/token.
        * layers: one ``matmul`` group with all FLOPs, reading all weights once, moving
          ``act_bytes_per_sample`` (its inputs and outputs are the kept activations), and one
          ``elementwise`` group (0 FLOPs) that reads and writes the activations once more
          (``2 * act_bytes_per_sample``); ``fwd_kernels`` (default 150, a mid-sized eager network)
          are split 1/3 matmul, 2/3 elementwise.
        """
        params = _check_number("params", params, positive=True)
        flop = _check_number("fwd_flop_per_sample", fwd_flop_per_sample, positive=True)
        act = _check_number("act_bytes_per_sample", act_bytes_per_sample, positive=True)
        tokens = 1.0 if tokens_per_sample is None else _check_number("tokens_per_sample", tokens_per_sample,
                                                                     positive=True)
        unit = sample_unit or ("sequence" if tokens > 1 else "image")
        if unit == "sequence":
            pipe = {"input_bytes_per_sample": 4.0 * tokens, "h2d_bytes_per_sample": 16.0 * tokens,
                    "preprocess_core_s_per_sample": TEXT_CORE_S_PER_SAMPLE + tokens * TEXT_CORE_S_PER_TOKEN}
        else:
            pipe = _image_pipeline(IMAGENET_JPEG_BYTES, 3, 224, 224, 1.0, IMAGENET_PREPROCESS_CORE_S)
        for k, v in (("input_bytes_per_sample", input_bytes_per_sample),
                     ("h2d_bytes_per_sample", h2d_bytes_per_sample),
                     ("preprocess_core_s_per_sample", preprocess_core_s_per_sample)):
            if v is not None:
                pipe[k] = v
        kernels = max(2, int(fwd_kernels))
        n_mm = max(1, kernels // 3)
        layers = (LayerGroup("matmul", n_mm, flop, act, WEIGHT_BYTES * params, "matmuls (all FLOPs)"),
                  LayerGroup("elementwise", kernels - n_mm, 0.0, 2.0 * act, 0.0, "elementwise and norms"))
        return cls(id=id or _slug(name), name=name, family=family, sample_unit=unit,
                   tokens_per_sample=tokens, params=params, fwd_flop_per_sample=flop,
                   act_bytes_per_sample=act,
                   act_ckpt_bytes_per_sample=act / 10.0 if act_ckpt_bytes_per_sample is None else act_ckpt_bytes_per_sample,
                   act_block_bytes_per_sample=act_block_bytes_per_sample,
                   layers=layers, sources=tuple(sources), notes=notes, **pipe)

    @classmethod
    def from_torch(cls, module: Any, example_batch: Any, *, name: str | None = None,
                   sample_unit: str | None = None, tokens_per_sample: float | None = None,
                   batch_size: int | None = None, device: str | None = None,
                   input_bytes_per_sample: float | None = None, h2d_bytes_per_sample: float | None = None,
                   preprocess_core_s_per_sample: float = 0.0, ckpt_blocks: Sequence[Any] | None = None,
                   notes: str = "") -> Workload:
        """Measure a ``torch.nn.Module`` on one forward pass of ``example_batch`` (see
        :func:`_from_torch` for what is counted and how)."""
        return _from_torch(cls, module, example_batch, name=name, sample_unit=sample_unit,
                           tokens_per_sample=tokens_per_sample, batch_size=batch_size, device=device,
                           input_bytes_per_sample=input_bytes_per_sample,
                           h2d_bytes_per_sample=h2d_bytes_per_sample,
                           preprocess_core_s_per_sample=preprocess_core_s_per_sample,
                           ckpt_blocks=ckpt_blocks, notes=notes)


def _slug(name: str) -> str:
    s = "".join(ch.lower() if ch.isalnum() or ch == "." else "-" for ch in name.strip())
    while "--" in s:
        s = s.replace("--", "-")
    return s.strip("-") or "custom"


class _Groups:
    """Accumulates (kind, name) -> LayerGroup figures in insertion order."""

    def __init__(self):
        self._g: dict[tuple[str, str], list[float]] = {}

    def add(self, kind: str, name: str, count: float = 1, flop: float = 0.0, bytes_: float = 0.0,
            weight_bytes: float = 0.0) -> None:
        g = self._g.setdefault((kind, name), [0.0, 0.0, 0.0, 0.0])
        g[0] += count
        g[1] += flop
        g[2] += bytes_
        g[3] += weight_bytes

    def build(self) -> tuple[LayerGroup, ...]:
        return tuple(LayerGroup(kind, int(round(c)), f, b, w, name)
                     for (kind, name), (c, f, b, w) in self._g.items() if round(c) >= 1)

    def total_flop(self) -> float:
        return float(sum(v[1] for v in self._g.values()))


# =================================================================================================
# Transformers: one parametric builder
# =================================================================================================

@dataclass(frozen=True)
class TransformerSpec:
    """A dense transformer, decoder or encoder, described by its hyper-parameters.

    Attributes
    ----------
    n_layers, d_model, n_heads : L, h, a.
    vocab_size : V (0 for ViT).
    seq_len : default tokens per sample.
    n_kv_heads : key/value heads (grouped-query attention); default ``n_heads``.
    d_head : per-head width; default: the attention width equals ``d_model``.
    d_ff : FFN width; default ``4 * d_model``.
    gated_ffn : SwiGLU-style FFN with three matrices (gate, up, down).
    tied_embeddings : the LM head reuses the token embedding (no extra parameters).
    learned_pos, max_positions : a learned absolute position table of ``max_positions`` rows.
    bias : linear layers carry biases.
    norm : ``"layernorm"`` (weight + bias), ``"layernorm_nobias"`` or ``"rmsnorm"``.
    dropout, attn_dropout : dropout on residual branches / on attention probabilities (masks kept).
    flash_attention : fused attention kernel that keeps the softmax statistics (4 bytes per query and
        head) instead of the ``a x s x s`` probabilities.
    rope : rotary position embeddings (kernels only, no parameters).
    fused_qkv : one QKV projection (else three).
    attention_window : sliding-window attention; each query attends to at most this many keys.
    head : ``"lm"`` (vocabulary projection + cross-entropy), ``"qa"`` (SQuAD start/end span head),
        ``"cls"`` (classifier on one token, ``n_classes``), ``"adaptive"`` (adaptive softmax).
    extra_params : parameters not described by the fields (e.g. BERT's token types and pooler).
    embedding_norm : a LayerNorm on the embeddings (BERT).
    final_norm : a norm after the last layer (pre-LN models); post-LN models (BERT, Transformer-XL) have none.
    token_types : rows of a token-type (segment) embedding (BERT: 2).
    mlp_bias : FFN biases when they differ from ``bias`` (Transformer-XL: biases in the FFN only).
    mem_len, rel_pos : Transformer-XL recurrence memory (keys = ``seq_len + mem_len``) and relative
        positions (an extra projection per layer and an extra ``Q R^T`` score matmul).
    adaptive_cutoffs, adaptive_div_val, adaptive_cluster_frac : adaptive softmax/embedding
        (Grave et al. 2017; Baevski & Auli 2019): cluster boundaries, width divisor per cluster and the
        fraction of tokens whose target lies in each tail cluster.
    image_size, patch_size, in_channels : a ViT: ``(image_size/patch_size)^2`` patches plus a class token.
    """

    n_layers: int
    d_model: int
    n_heads: int
    vocab_size: int
    seq_len: int
    n_kv_heads: int | None = None
    d_head: int | None = None
    d_ff: int | None = None
    gated_ffn: bool = False
    tied_embeddings: bool = True
    learned_pos: bool = False
    max_positions: int | None = None
    bias: bool = True
    norm: Literal["layernorm", "layernorm_nobias", "rmsnorm"] = "layernorm"
    dropout: bool = True
    attn_dropout: bool | None = None
    flash_attention: bool = False
    rope: bool = False
    fused_qkv: bool = True
    attention_window: int | None = None
    head: Literal["lm", "qa", "cls", "adaptive"] = "lm"
    n_classes: int = 0
    extra_params: float = 0.0
    embedding_norm: bool = False
    final_norm: bool = True
    token_types: int = 0
    mlp_bias: bool | None = None
    mem_len: int = 0
    rel_pos: bool = False
    adaptive_cutoffs: tuple[int, ...] = ()
    adaptive_div_val: int = 1
    adaptive_cluster_frac: tuple[float, ...] = ()
    image_size: int = 0
    patch_size: int = 0
    in_channels: int = 3

    @property
    def q_dim(self) -> float:
        return float(self.n_heads * self.d_head) if self.d_head else float(self.d_model)

    @property
    def kv_dim(self) -> float:
        return self.q_dim * (self.n_kv_heads or self.n_heads) / self.n_heads

    @property
    def ff_dim(self) -> float:
        return float(self.d_ff or 4 * self.d_model)

    def attn_params(self) -> float:
        """Parameters of one layer's attention projections (Q, K, V, output; Transformer-XL's r_net)."""
        h, qd, kvd = float(self.d_model), self.q_dim, self.kv_dim
        attn = h * qd + 2 * h * kvd + qd * h + ((qd + 2 * kvd + h) if self.bias else 0.0)
        return attn + (h * qd if self.rel_pos else 0.0)

    def mlp_params(self) -> float:
        """Parameters of one layer's FFN."""
        h, f = float(self.d_model), self.ff_dim
        bias = self.bias if self.mlp_bias is None else self.mlp_bias
        if self.gated_ffn:
            return 3 * h * f + ((2 * f + h) if bias else 0.0)
        return 2 * h * f + ((f + h) if bias else 0.0)

    def layer_params(self) -> float:
        """Parameters of one transformer layer (attention, FFN, two norms)."""
        return self.attn_params() + self.mlp_params() + 2 * self._norm_params()

    def _norm_params(self) -> float:
        return (2.0 if self.norm == "layernorm" else 1.0) * self.d_model

    def _adaptive_clusters(self) -> list[tuple[float, float]]:
        """(size, width) of each adaptive-softmax cluster, head first."""
        ends = [0, *self.adaptive_cutoffs, self.vocab_size]
        return [(float(ends[i + 1] - ends[i]), float(self.d_model // (self.adaptive_div_val ** i)))
                for i in range(len(ends) - 1)]


@dataclass(frozen=True)
class _Info:
    """Catalogue metadata of one entry."""

    id: str
    name: str
    family: str
    sources: tuple[str, ...]
    notes: str = ""
    pipeline: Callable[[float], dict[str, float]] | None = None  # tokens -> data pipeline fields


def build_transformer(info: _Info, spec: TransformerSpec, seq_len: int | None = None) -> Workload:
    """Params, FLOPs, layer groups and activation memory of a transformer (see the module docstring).

    FLOPs per sample (forward, s queries, k keys per query, L layers):
    projections ``2 s h (q + 2 kv) + 2 s q h``, attention scores ``2 * 2 s k q`` (QK^T and AV; a third
    for Transformer-XL's relative term), FFN ``2 s h f * (2 | 3)``, the head ``2 s h V``.
    """
    vit = spec.image_size > 0
    if vit:
        n_patch = (spec.image_size // spec.patch_size) ** 2
        s = float(n_patch + 1)
        if seq_len is not None and seq_len != int(s):
            raise ScenarioError(f"{info.id} has a fixed number of tokens ({int(s)}: patches + class token)")
    else:
        s = float(seq_len or spec.seq_len)
    L, h, a = spec.n_layers, float(spec.d_model), float(spec.n_heads)
    qd, kvd, f, V = spec.q_dim, spec.kv_dim, spec.ff_dim, float(spec.vocab_size)
    mem = float(spec.mem_len)
    sk = s + mem                                     # keys (and values) per query
    keys = min(sk, float(spec.attention_window)) if spec.attention_window else sk
    attn_drop = spec.dropout if spec.attn_dropout is None else spec.attn_dropout
    n_score_mm = 3 if spec.rel_pos else 2
    qkv_tokens = sk if spec.rel_pos else s           # Transformer-XL projects memory and segment together
    norm_p = spec._norm_params()
    E = ACT_BYTES

    # --- parameters --------------------------------------------------------------------------------
    layer_p = spec.layer_params()
    attn_p, mlp_p = spec.attn_params(), spec.mlp_params()
    nonlayer_p = spec.extra_params + (norm_p if spec.final_norm else 0.0)
    head_flop_per_token = 0.0
    head_weight_bytes = 0.0
    g = _Groups()

    # --- embeddings (input side) -------------------------------------------------------------------
    if vit:
        p2c = spec.in_channels * spec.patch_size ** 2
        patch_p = p2c * h + h
        nonlayer_p += patch_p + h + s * h   # patch conv, class token, position table
        img = float(spec.in_channels * spec.image_size ** 2)
        g.add("conv", "patch embedding", 1, 2 * n_patch * p2c * h, E * (img + n_patch * h), WEIGHT_BYTES * patch_p)
        g.add("elementwise", "class token + positions", 2, 0.0, E * (2 * s * h + 3 * s * h), WEIGHT_BYTES * s * h)
    elif spec.head == "adaptive":
        clusters = spec._adaptive_clusters()
        for i, (size, width) in enumerate(clusters):
            nonlayer_p += size * width + (width * h if width != h else 0.0)
        n_c = len(clusters)
        g.add("embedding", "adaptive embedding", 2 * n_c, 0.0, E * 4 * s * h, 0.0)
        proj_flop = sum(2 * frac * s * width * h for frac, (_, width) in
                        zip(_cluster_fracs(spec), clusters) if width != h)
        g.add("matmul", "adaptive embedding projections", max(1, n_c - 1), proj_flop, E * 2 * s * h,
              WEIGHT_BYTES * sum(width * h for _, width in clusters if width != h))
    else:
        nonlayer_p += V * h + spec.token_types * h
        n_emb = 1 + (1 if spec.learned_pos else 0) + (1 if spec.token_types else 0)
        g.add("embedding", "token/position embedding", n_emb, 0.0, E * 2 * s * h * n_emb, 0.0)
        if n_emb > 1:
            g.add("elementwise", "activation, residual, dropout", n_emb - 1, 0.0, E * 3 * s * h * (n_emb - 1))
    if spec.learned_pos and not vit:
        nonlayer_p += float(spec.max_positions or spec.seq_len) * h
    if spec.embedding_norm:
        nonlayer_p += 2 * h
        g.add("norm", "norms", 1, 0.0, E * 2 * s * h, WEIGHT_BYTES * 2 * h)
    if spec.dropout:
        g.add("elementwise", "activation, residual, dropout", 1, 0.0, E * 2 * s * h + MASK_BYTES * s * h)

    # --- the L layers ------------------------------------------------------------------------------
    n_qkv = 1 if spec.fused_qkv else 3
    g.add("matmul", "attention projections", L * (n_qkv + 1 + (1 if spec.rel_pos else 0)),
          L * (2 * qkv_tokens * h * (qd + 2 * kvd) + 2 * s * qd * h),
          L * E * (n_qkv * qkv_tokens * h + qkv_tokens * (qd + 2 * kvd) + s * qd + s * h),
          L * WEIGHT_BYTES * attn_p)
    att_flop = L * 2 * n_score_mm * s * keys * qd
    if spec.flash_attention:
        g.add("attention", "attention (fused)", L, att_flop,
              L * (E * (2 * s * qd + 2 * sk * kvd) + LOSS_BYTES * a * s))
    else:
        scores = a * s * keys
        g.add("attention", "attention scores and context", L * n_score_mm, att_flop,
              L * E * ((n_score_mm - 1) * (s * qd + sk * qd + scores) + (scores + sk * qd + s * qd)))
        n_sm = 3 + (1 if attn_drop else 0) + (2 if spec.rel_pos else 0)   # scale, mask, softmax (+dropout, +add/shift)
        g.add("elementwise", "attention softmax, mask, dropout", L * n_sm, 0.0,
              L * (E * 2 * scores * n_sm + (MASK_BYTES * scores if attn_drop else 0.0)))
    n_mlp = 3 if spec.gated_ffn else 2
    g.add("matmul", "mlp", L * n_mlp, L * 2 * s * h * f * n_mlp,
          L * E * ((2 * s * h + 3 * s * f + s * h) if spec.gated_ffn else (2 * s * h + 2 * s * f)),
          L * WEIGHT_BYTES * mlp_p)
    ew_k = (2 if spec.gated_ffn else 1) + 2 + (2 if spec.dropout else 0) + (10 if spec.rope else 0) \
        + (0 if spec.flash_attention else 1)
    ew_b = (E * (2 * s * f + 3 * s * f) if spec.gated_ffn else E * 2 * s * f) + 2 * E * 3 * s * h \
        + (2 * (E * 2 * s * h + MASK_BYTES * s * h) if spec.dropout else 0.0) \
        + (E * 5 * 2 * (s * qd + s * kvd) if spec.rope else 0.0) + (0.0 if spec.flash_attention else E * 2 * s * qd)
    g.add("elementwise", "activation, residual, dropout", L * ew_k, 0.0, L * ew_b)
    n_norm = 2 * L + (1 if spec.final_norm else 0)
    g.add("norm", "norms", n_norm, 0.0, n_norm * E * 2 * s * h, n_norm * WEIGHT_BYTES * norm_p)

    # --- head and loss -----------------------------------------------------------------------------
    if spec.head == "lm":
        if not spec.tied_embeddings:
            nonlayer_p += V * h
        head_flop_per_token = 2 * h * V
        head_weight_bytes = WEIGHT_BYTES * V * h
        g.add("matmul", "lm head", 1, s * head_flop_per_token, E * (s * h + s * V), head_weight_bytes)
        g.add("elementwise", "loss", 3, 0.0, s * V * (E + LOSS_BYTES) + s * V * 2 * LOSS_BYTES)
    elif spec.head == "qa":
        nonlayer_p += 2 * h + 2
        g.add("matmul", "task head", 1, s * 2 * h * 2, E * (s * h + 2 * s), WEIGHT_BYTES * 2 * h)
        g.add("elementwise", "loss", 3, 0.0, 14 * s * 2)
    elif spec.head == "cls":
        nonlayer_p += h * spec.n_classes + spec.n_classes
        g.add("matmul", "task head", 1, 2 * h * spec.n_classes, E * (h + spec.n_classes),
              WEIGHT_BYTES * h * spec.n_classes)
        g.add("elementwise", "loss", 3, 0.0, 14.0 * spec.n_classes)
    elif spec.head == "adaptive":
        clusters = spec._adaptive_clusters()
        n_c = len(clusters) - 1
        nonlayer_p += n_c * h + n_c + V   # cluster logits, output biases (weights tied to the embedding)
        head_size = clusters[0][0] + n_c
        head_flop_per_token = 2 * h * head_size
        tail_flop, tail_bytes, tail_w = 0.0, 0.0, 0.0
        for frac, (size, width) in zip(_cluster_fracs(spec)[1:], clusters[1:]):
            tail_flop += frac * (2 * size * width + (2 * h * width if width != h else 0.0))
            tail_bytes += frac * s * (E * (width + size) + LOSS_BYTES * 3 * size)
            tail_w += WEIGHT_BYTES * size * width
        head_flop_per_token += tail_flop
        g.add("matmul", "lm head (adaptive softmax)", 1 + 2 * n_c, s * head_flop_per_token,
              E * (s * h + s * head_size) + tail_bytes, WEIGHT_BYTES * head_size * h + tail_w)
        g.add("elementwise", "loss", 6 + 4 * n_c, 0.0, s * head_size * (E + 3 * LOSS_BYTES) + tail_bytes)
    params = L * layer_p + nonlayer_p
    fwd_flop = g.total_flop()

    # --- activation memory (Korthikanti et al. 2022, generalised term by term) ----------------------
    act_layer = 2 * E * s * h                                   # inputs of the two norms (4sh)
    act_layer += E * qkv_tokens * h                             # QKV input (norm output)
    if spec.flash_attention:
        act_layer += E * (s * qd + 2 * sk * kvd + s * qd) + LOSS_BYTES * a * s   # Q, K, V, O, logsumexp
    else:
        act_layer += E * (s * qd + 2 * sk * qd + s * qd)        # Q, K, V (expanded to a heads), context
        act_layer += E * a * s * keys * (n_score_mm - 1)        # softmax output (+ TXL's biased query ~ 0)
        if attn_drop:
            act_layer += (MASK_BYTES + E) * a * s * keys        # dropout mask and dropped probabilities
        if spec.rel_pos:
            act_layer += E * s * qd                             # second biased query (r_r_bias)
    if spec.dropout:
        act_layer += 2 * MASK_BYTES * s * h                     # residual dropout masks
    act_layer += E * s * h + (4 * E * s * f if spec.gated_ffn else 2 * E * s * f)  # MLP input, hidden
    act_other = E * s * h if spec.final_norm else 0.0           # final norm input
    if spec.dropout:
        act_other += MASK_BYTES * s * h
    if spec.embedding_norm:
        act_other += E * s * h
    if vit:
        act_other += E * spec.in_channels * spec.image_size ** 2 + E * h   # conv input, class token out
    if spec.head == "lm":
        act_other += E * s * h + LOSS_BYTES * s * V
    elif spec.head == "qa":
        act_other += E * s * h + LOSS_BYTES * 2 * s
    elif spec.head == "cls":
        act_other += E * h + LOSS_BYTES * spec.n_classes
    elif spec.head == "adaptive":
        clusters = spec._adaptive_clusters()
        act_other += E * s * h + LOSS_BYTES * s * (clusters[0][0] + len(clusters) - 1)
        act_other += sum(frac * s * (E * width + LOSS_BYTES * size)
                         for frac, (size, width) in zip(_cluster_fracs(spec)[1:], clusters[1:]))
    act = L * act_layer + act_other
    act_ckpt = L * E * s * h + act_other

    tokens = 1.0 if vit else s
    pipe = info.pipeline(s) if info.pipeline else _text_pipeline(s, spec.vocab_size, 2)
    rebuild = None if vit else functools.partial(build_transformer, info, spec)
    return Workload(
        id=info.id, name=info.name, family=info.family, sample_unit="image" if vit else "sequence",
        tokens_per_sample=tokens, params=params, fwd_flop_per_sample=fwd_flop,
        act_bytes_per_sample=act, act_ckpt_bytes_per_sample=act_ckpt, act_block_bytes_per_sample=act_layer,
        layers=g.build(),
        sources=info.sources, seq_len_default=None if vit else spec.seq_len, notes=info.notes,
        _rebuild=rebuild, **pipe)


def _cluster_fracs(spec: TransformerSpec) -> tuple[float, ...]:
    """Fraction of tokens whose target falls in each adaptive-softmax cluster, head first."""
    tails = tuple(spec.adaptive_cluster_frac)
    return (1.0 - sum(tails), *tails)


# =================================================================================================
# CNNs: one small shape-propagation builder
# =================================================================================================

@dataclass(frozen=True)
class _T:
    """An activation tensor of one sample: ``n`` instances (RoIs) of ``c x h x w``."""

    c: int
    h: int
    w: int
    n: float
    id: int

    @property
    def numel(self) -> float:
        return self.n * self.c * self.h * self.w


def _pair(v: int | tuple[int, int]) -> tuple[int, int]:
    return (v, v) if isinstance(v, int) else (int(v[0]), int(v[1]))


class _Net:
    """Propagates shapes through conv/bn/relu/pool/linear/add/cat and accumulates, per sample:
    parameters, layer groups (kind x stage), and the bytes each op keeps for its backward pass.

    Saved bytes are counted once per tensor. ``begin_block``/``end_block`` mark checkpoint segments
    (a bottleneck, an Inception module ...)."""

    def __init__(self):
        self.params = 0.0
        self.groups = _Groups()
        self.stage = "stem"
        self._next = 0
        self._saved: dict[int, tuple[float, str | None]] = {}
        self._extra: list[tuple[float, str | None]] = []
        self._block: str | None = None
        self._block_inputs = 0.0
        self._nblocks = 0

    # -- bookkeeping ---------------------------------------------------------------------------------
    def _new(self, c: int, h: int, w: int, n: float = 1.0) -> _T:
        self._next += 1
        if c < 1 or h < 1 or w < 1:
            raise ValueError(f"shape collapsed to {c}x{h}x{w} in stage {self.stage}")
        return _T(int(c), int(h), int(w), float(n), self._next)

    def _save(self, t: _T) -> None:
        if t.id not in self._saved:
            self._saved[t.id] = (ACT_BYTES * t.numel, self._block)

    def _save_bytes(self, b: float) -> None:
        self._extra.append((b, self._block))

    def begin_block(self, x: _T) -> None:
        self._nblocks += 1
        self._block = f"b{self._nblocks}"
        self._block_inputs += ACT_BYTES * x.numel

    def end_block(self) -> None:
        self._block = None

    def act_bytes(self) -> float:
        return sum(b for b, _ in self._saved.values()) + sum(b for b, _ in self._extra)

    def _per_block(self) -> tuple[float, float]:
        """(saved bytes outside blocks, saved bytes of the largest block)."""
        per_block: dict[str | None, float] = {}
        for b, blk in [*self._saved.values(), *self._extra]:
            per_block[blk] = per_block.get(blk, 0.0) + b
        outside = per_block.pop(None, 0.0)
        return outside, max(per_block.values(), default=0.0)

    def act_ckpt_bytes(self) -> float:
        return self._block_inputs + self._per_block()[0]

    def act_block_bytes(self) -> float:
        return self._per_block()[1]

    # -- ops -----------------------------------------------------------------------------------------
    def input(self, c: int, h: int, w: int) -> _T:
        return self._new(c, h, w)

    def conv(self, x: _T, cout: int, k: int | tuple[int, int], s: int = 1, p: int | tuple[int, int] = 0,
             bias: bool = False, groups: int = 1, transposed: bool = False) -> _T:
        kh, kw = _pair(k)
        ph, pw = _pair(p)
        if transposed:   # stride-s transposed conv with k == s (Mask R-CNN's upsampler)
            ho, wo = (x.h - 1) * s - 2 * ph + kh, (x.w - 1) * s - 2 * pw + kw
        else:
            ho, wo = (x.h + 2 * ph - kh) // s + 1, (x.w + 2 * pw - kw) // s + 1
        y = self._new(cout, ho, wo, x.n)
        n_p = (x.c // groups) * kh * kw * cout + (cout if bias else 0)
        self.params += n_p
        flop = 2.0 * (x.c // groups) * kh * kw * cout * (x.h * x.w if transposed else ho * wo) * x.n
        self.groups.add("conv", f"conv {self.stage}", 1, flop, ACT_BYTES * (x.numel + y.numel), WEIGHT_BYTES * n_p)
        self._save(x)
        return y

    def bn(self, x: _T, frozen: bool = False) -> _T:
        """Batch norm in training mode (reads its input twice: statistics, then normalise), or a frozen
        one (a per-channel affine with buffers, as detection backbones use)."""
        y = self._new(x.c, x.h, x.w, x.n)
        if frozen:
            self.groups.add("elementwise", f"elementwise {self.stage}", 1, 0.0, ACT_BYTES * 2 * x.numel)
            return y
        self.params += 2 * x.c
        self.groups.add("norm", f"batchnorm {self.stage}", 1, 0.0, ACT_BYTES * 3 * x.numel, WEIGHT_BYTES * 2 * x.c)
        self._save(x)
        return y

    def relu(self, x: _T) -> _T:
        """In-place ReLU: keeps its output (the same tensor the next conv keeps)."""
        self.groups.add("elementwise", f"elementwise {self.stage}", 1, 0.0, ACT_BYTES * 2 * x.numel)
        self._save(x)
        return x

    def cbr(self, x: _T, cout: int, k: int | tuple[int, int], s: int = 1, p: int | tuple[int, int] = 0,
            relu: bool = True, frozen_bn: bool = False) -> _T:
        y = self.bn(self.conv(x, cout, k, s, p), frozen=frozen_bn)
        return self.relu(y) if relu else y

    def maxpool(self, x: _T, k: int, s: int, p: int = 0) -> _T:
        y = self._new(x.c, (x.h + 2 * p - k) // s + 1, (x.w + 2 * p - k) // s + 1, x.n)
        self.groups.add("pool", f"pool {self.stage}", 1, 0.0, ACT_BYTES * (x.numel + y.numel) + INDEX_BYTES * y.numel)
        self._save(x)
        self._save_bytes(INDEX_BYTES * y.numel)
        return y

    def avgpool(self, x: _T, k: int, s: int, p: int = 0) -> _T:
        y = self._new(x.c, (x.h + 2 * p - k) // s + 1, (x.w + 2 * p - k) // s + 1, x.n)
        self.groups.add("pool", f"pool {self.stage}", 1, 0.0, ACT_BYTES * (x.numel + y.numel))
        return y

    def gap(self, x: _T) -> _T:
        """Global average pooling (keeps nothing: its backward needs only the shape)."""
        y = self._new(x.c, 1, 1, x.n)
        self.groups.add("pool", f"pool {self.stage}", 1, 0.0, ACT_BYTES * (x.numel + y.numel))
        return y

    def linear(self, x: _T, out: int, bias: bool = True) -> _T:
        fan_in = x.c * x.h * x.w
        y = self._new(out, 1, 1, x.n)
        n_p = fan_in * out + (out if bias else 0)
        self.params += n_p
        self.groups.add("matmul", f"linear {self.stage}", 1, 2.0 * fan_in * out * x.n,
                        ACT_BYTES * (x.numel + y.numel), WEIGHT_BYTES * n_p)
        self._save(x)
        return y

    def add(self, a: _T, b: _T) -> _T:
        y = self._new(a.c, a.h, a.w, a.n)
        self.groups.add("elementwise", f"elementwise {self.stage}", 1, 0.0, ACT_BYTES * 3 * a.numel)
        return y

    def cat(self, xs: Sequence[_T]) -> _T:
        y = self._new(sum(x.c for x in xs), xs[0].h, xs[0].w, xs[0].n)
        self.groups.add("elementwise", f"elementwise {self.stage}", 1, 0.0, ACT_BYTES * 2 * y.numel)
        return y

    def dropout(self, x: _T) -> _T:
        y = self._new(x.c, x.h, x.w, x.n)
        self.groups.add("elementwise", f"elementwise {self.stage}", 1, 0.0,
                        ACT_BYTES * 2 * x.numel + MASK_BYTES * x.numel)
        self._save_bytes(MASK_BYTES * x.numel)
        return y

    def upsample2x(self, x: _T, h: int, w: int) -> _T:
        y = self._new(x.c, h, w, x.n)
        self.groups.add("elementwise", f"elementwise {self.stage}", 1, 0.0, ACT_BYTES * (x.numel + y.numel))
        return y

    def roi_align(self, levels: Sequence[_T], out_hw: int, n_rois: float) -> _T:
        """Multi-scale RoIAlign: ``n_rois`` crops of ``c x out_hw x out_hw`` per image, bilinear with
        2x2 samples per bin (reads ~4 values per output), one kernel per pyramid level."""
        y = self._new(levels[0].c, out_hw, out_hw, n_rois)
        self.groups.add("pool", f"pool {self.stage}", len(levels), 0.0, ACT_BYTES * 5 * y.numel)
        return y

    def loss(self, n_logits: float, count: int, extra_bytes: float = 0.0) -> None:
        """A softmax/BCE loss over ``n_logits`` values per sample, computed in fp32."""
        self.groups.add("elementwise", f"loss {self.stage}", count, 0.0,
                        n_logits * (ACT_BYTES + 3 * LOSS_BYTES) + extra_bytes)
        self._save_bytes(LOSS_BYTES * n_logits)

    def other(self, name: str, count: int, bytes_: float) -> None:
        self.groups.add("other", name, count, 0.0, bytes_)

    def workload(self, info: _Info, pipeline: dict[str, float]) -> Workload:
        return Workload(id=info.id, name=info.name, family=info.family, sample_unit="image",
                        tokens_per_sample=1.0, params=self.params, fwd_flop_per_sample=self.groups.total_flop(),
                        act_bytes_per_sample=self.act_bytes(), act_ckpt_bytes_per_sample=self.act_ckpt_bytes(),
                        act_block_bytes_per_sample=self.act_block_bytes(),
                        layers=self.groups.build(), sources=info.sources, notes=info.notes, **pipeline)


def _bottleneck(net: _Net, x: _T, width: int, stride: int, downsample: bool, frozen_bn: bool = False) -> _T:
    """ResNet v1.5 bottleneck (stride on the 3x3 conv, as in NVIDIA DLE and torchvision)."""
    net.begin_block(x)
    y = net.cbr(x, width, 1, frozen_bn=frozen_bn)
    y = net.cbr(y, width, 3, stride, 1, frozen_bn=frozen_bn)
    y = net.cbr(y, 4 * width, 1, relu=False, frozen_bn=frozen_bn)
    sc = net.cbr(x, 4 * width, 1, stride, relu=False, frozen_bn=frozen_bn) if downsample else x
    out = net.relu(net.add(y, sc))
    net.end_block()
    return out


def _resnet_trunk(net: _Net, x: _T, blocks: Sequence[int], n_stages: int = 4,
                  strides: Sequence[int] = (1, 2, 2, 2), frozen_bn: bool = False) -> list[_T]:
    """Stem + the first ``n_stages`` stages; returns each stage's output."""
    net.stage = "stem"
    x = net.cbr(x, 64, 7, 2, 3, frozen_bn=frozen_bn)
    x = net.maxpool(x, 3, 2, 1)
    outs = []
    cin = 64
    for i in range(n_stages):
        width = 64 * 2 ** i
        net.stage = f"layer{i + 1}"
        for j in range(blocks[i]):
            x = _bottleneck(net, x, width, strides[i] if j == 0 else 1,
                            downsample=(j == 0 and (strides[i] != 1 or cin != 4 * width)), frozen_bn=frozen_bn)
            cin = 4 * width
        outs.append(x)
    return outs


def build_resnet(info: _Info, blocks: Sequence[int], image: int = 224) -> Workload:
    """ResNet-50/101 v1.5 (He et al. 2016 Table 1; stride-2 on the 3x3 conv as in NVIDIA DLE v1.5)."""
    net = _Net()
    x = net.input(3, image, image)
    x = _resnet_trunk(net, x, blocks)[-1]
    net.stage = "head"
    x = net.linear(net.gap(x), 1000)
    net.loss(1000, 3)
    return net.workload(info, _image_pipeline(IMAGENET_JPEG_BYTES, 3, image, image, 1.0, IMAGENET_PREPROCESS_CORE_S))


def build_vgg16(info: _Info) -> Workload:
    """VGG-16, configuration D of Simonyan & Zisserman 2015 (Table 1), no batch norm, 224x224."""
    net = _Net()
    x = net.input(3, 224, 224)
    cfg = [[64, 64], [128, 128], [256, 256, 256], [512, 512, 512], [512, 512, 512]]
    for i, widths in enumerate(cfg):
        net.stage = f"block{i + 1}"
        net.begin_block(x)
        for c in widths:
            x = net.relu(net.conv(x, c, 3, 1, 1, bias=True))
        x = net.maxpool(x, 2, 2)
        net.end_block()
    net.stage = "classifier"
    x = net.dropout(net.relu(net.linear(x, 4096)))
    x = net.dropout(net.relu(net.linear(x, 4096)))
    net.linear(x, 1000)
    net.loss(1000, 3)
    return net.workload(info, _image_pipeline(IMAGENET_JPEG_BYTES, 3, 224, 224, 1.0, IMAGENET_PREPROCESS_CORE_S))


def build_inception_v3(info: _Info) -> Workload:
    """Inception-v3 (Szegedy et al. 2016, Table 1 and Figures 5-7) at 299x299 with the auxiliary
    classifier active in training. Module widths as in the reference implementations (Mixed_5b..7c);
    every conv is conv (no bias) + BN + ReLU."""
    net = _Net()

    def c(x, cout, k, s=1, p=0):
        return net.cbr(x, cout, k, s, p)

    x = net.input(3, 299, 299)
    net.stage = "stem"
    x = c(x, 32, 3, 2)
    x = c(x, 32, 3)
    x = c(x, 64, 3, 1, 1)
    x = net.maxpool(x, 3, 2)
    x = c(x, 80, 1)
    x = c(x, 192, 3)
    x = net.maxpool(x, 3, 2)
    net.stage = "35x35"
    for pool_feat in (32, 64, 64):           # Mixed_5b, 5c, 5d (module A, Fig. 5)
        net.begin_block(x)
        b1 = c(x, 64, 1)
        b5 = c(c(x, 48, 1), 64, 5, 1, 2)
        b3 = c(c(c(x, 64, 1), 96, 3, 1, 1), 96, 3, 1, 1)
        bp = c(net.avgpool(x, 3, 1, 1), pool_feat, 1)
        x = net.cat([b1, b5, b3, bp])
        net.end_block()
    net.begin_block(x)                        # Mixed_6a (grid reduction)
    b3 = c(x, 384, 3, 2)
    b3d = c(c(c(x, 64, 1), 96, 3, 1, 1), 96, 3, 2)
    x = net.cat([b3, b3d, net.maxpool(x, 3, 2)])
    net.end_block()
    net.stage = "17x17"
    for c7 in (128, 160, 160, 192):          # Mixed_6b..6e (module B, Fig. 6, n = 7)
        net.begin_block(x)
        b1 = c(x, 192, 1)
        b7 = c(c(c(x, c7, 1), c7, (1, 7), 1, (0, 3)), 192, (7, 1), 1, (3, 0))
        bd = c(x, c7, 1)
        bd = c(bd, c7, (7, 1), 1, (3, 0))
        bd = c(bd, c7, (1, 7), 1, (0, 3))
        bd = c(bd, c7, (7, 1), 1, (3, 0))
        bd = c(bd, 192, (1, 7), 1, (0, 3))
        bp = c(net.avgpool(x, 3, 1, 1), 192, 1)
        x = net.cat([b1, b7, bd, bp])
        net.end_block()
    net.stage = "aux"                         # auxiliary classifier on the 17x17 grid
    a = net.avgpool(x, 5, 3)
    a = c(a, 128, 1)
    a = c(a, 768, 5)
    net.linear(net.gap(a), 1000)
    net.loss(1000, 3)
    net.stage = "17x17"
    net.begin_block(x)                        # Mixed_7a (grid reduction)
    b3 = c(c(x, 192, 1), 320, 3, 2)
    b7 = c(c(c(c(x, 192, 1), 192, (1, 7), 1, (0, 3)), 192, (7, 1), 1, (3, 0)), 192, 3, 2)
    x = net.cat([b3, b7, net.maxpool(x, 3, 2)])
    net.end_block()
    net.stage = "8x8"
    for _ in range(2):                        # Mixed_7b, 7c (module C, Fig. 7)
        net.begin_block(x)
        b1 = c(x, 320, 1)
        b3 = c(x, 384, 1)
        b3 = net.cat([c(b3, 384, (1, 3), 1, (0, 1)), c(b3, 384, (3, 1), 1, (1, 0))])
        bd = c(c(x, 448, 1), 384, 3, 1, 1)
        bd = net.cat([c(bd, 384, (1, 3), 1, (0, 1)), c(bd, 384, (3, 1), 1, (1, 0))])
        bp = c(net.avgpool(x, 3, 1, 1), 192, 1)
        x = net.cat([b1, b3, bd, bp])
        net.end_block()
    net.stage = "head"
    x = net.dropout(net.gap(x))
    net.linear(x, 1000)
    net.loss(1000, 3)
    return net.workload(info, _image_pipeline(IMAGENET_JPEG_BYTES, 3, 299, 299, 1.0, IMAGENET_PREPROCESS_CORE_S))


def build_ssd300(info: _Info) -> Workload:
    """SSD300 with a ResNet-50 backbone as in NVIDIA DLE ``ssd/model.py``: the ResNet-50 stem and
    layers 1-3 with the first block of layer 3 at stride 1 (38x38x1024 from a 300x300 input), five
    extra blocks (1x1 conv + BN + ReLU, 3x3 conv + BN + ReLU) down to 1x1, and 3x3 localisation
    (4 per box) and confidence (81 classes per box) heads on the six maps with [4, 6, 6, 6, 4, 4]
    default boxes per cell: 8732 boxes."""
    net = _Net()
    x = net.input(3, 300, 300)
    feats = [_resnet_trunk(net, x, (3, 4, 6), n_stages=3, strides=(1, 2, 1))[-1]]
    net.stage = "extra"
    mids = (256, 256, 128, 128, 128)
    outs = (512, 512, 256, 256, 256)
    x = feats[0]
    for i, (mid, out) in enumerate(zip(mids, outs)):
        net.begin_block(x)
        y = net.cbr(x, mid, 1)
        x = net.cbr(y, out, 3, 2, 1) if i < 3 else net.cbr(y, out, 3, 1, 0)
        net.end_block()
        feats.append(x)
    net.stage = "heads"
    n_boxes = 0
    for nd, fm in zip((4, 6, 6, 6, 4, 4), feats):
        net.conv(fm, nd * 4, 3, 1, 1, bias=True)
        net.conv(fm, nd * 81, 3, 1, 1, bias=True)
        n_boxes += nd * fm.h * fm.w
    net.groups.add("elementwise", "elementwise heads", 4, 0.0, ACT_BYTES * 2 * 2 * n_boxes * 85)  # reshape+cat
    net.loss(n_boxes * 81, 12, extra_bytes=LOSS_BYTES * n_boxes * 4 * 6)
    net.other("hard negative mining (sorts)", 6, n_boxes * (LOSS_BYTES + INDEX_BYTES) * 4)
    # uint8 image is copied by DALI/the native loader after decode; boxes+labels encoded per default box
    pipe = _image_pipeline(COCO_JPEG_BYTES, 3, 300, 300, 4.0, SSD_PREPROCESS_CORE_S,
                           extra_h2d_bytes=n_boxes * (4 * 4 + 8))
    return net.workload(info, pipe)


def build_mask_rcnn(info: _Info, height: int = 800, width: int = 1088, rois: int = 512,
                    mask_rois: int = 128) -> Workload:
    """Mask R-CNN with a ResNet-50-FPN backbone (He et al. 2017; Lin et al. 2017), training, one image
    of ``height x width`` (COCO images resized to an 800-pixel short side, padded to a multiple of 32).

    Approximations: frozen batch norm in the backbone (its affine is elementwise, no parameters), all
    backbone stages trainable for the FLOP count; the RPN head runs on P2-P6 (3 anchors per cell);
    ``rois`` sampled proposals per image go through RoIAlign (7x7) and the two-FC box head; the mask
    head (4 conv3x3 + deconv + 1x1 to 81 classes at 28x28) runs on ``mask_rois`` positive RoIs (the
    cap set by a 25% positive fraction of 512). Anchor decoding, top-k, NMS and box matching are
    lumped into one ``other`` group of ~200 small kernels."""
    net = _Net()
    x = net.input(3, height, width)
    c2, c3, c4, c5 = _resnet_trunk(net, x, (3, 4, 6, 3), frozen_bn=True)
    net.stage = "fpn"
    lat = [net.conv(c, 256, 1, bias=True) for c in (c2, c3, c4, c5)]
    tops = [lat[3]]
    for lt in reversed(lat[:3]):
        tops.insert(0, net.add(lt, net.upsample2x(tops[0], lt.h, lt.w)))
    ps = [net.conv(t, 256, 3, 1, 1, bias=True) for t in tops]
    ps.append(net.maxpool(ps[-1], 1, 2))      # P6 by subsampling P5
    net.stage = "rpn"
    n_anchors = 0
    for p in ps:
        t = net.relu(net.conv(p, 256, 3, 1, 1, bias=True))
        net.conv(t, 3, 1, bias=True)
        net.conv(t, 12, 1, bias=True)
        n_anchors += 3 * p.h * p.w
    # the shared RPN conv has one set of weights: undo the four extra copies counted above
    net.params -= 4 * (9 * 256 * 256 + 256 + 256 * 3 + 3 + 256 * 12 + 12)
    net.loss(n_anchors, 6, extra_bytes=LOSS_BYTES * n_anchors * 4 * 4)
    net.other("anchors, top-k, NMS, matching", 200, n_anchors * 5 * LOSS_BYTES * 8)
    net.stage = "box head"
    r = net.roi_align(ps[:4], 7, rois)
    r = net.relu(net.linear(r, 1024))
    r = net.relu(net.linear(r, 1024))
    net.linear(r, 81)
    net.linear(r, 81 * 4)
    net.loss(rois * 81, 4, extra_bytes=LOSS_BYTES * rois * 4 * 4)
    net.stage = "mask head"
    m = net.roi_align(ps[:4], 14, mask_rois)
    for _ in range(4):
        m = net.relu(net.conv(m, 256, 3, 1, 1, bias=True))
    m = net.relu(net.conv(m, 256, 2, 2, bias=True, transposed=True))
    net.conv(m, 81, 1, bias=True)
    net.loss(mask_rois * 28 * 28, 4)          # BCE on the ground-truth class's mask only
    pipe = _image_pipeline(COCO_JPEG_BYTES, 3, height, width, 4.0, MASKRCNN_PREPROCESS_CORE_S)
    return net.workload(info, pipe)


# =================================================================================================
# GNMT v2 (LSTM encoder-decoder with attention)
# =================================================================================================

#: Mean tokens (source + target) per WMT16 en-de training sentence pair as GNMT's tokens/s counts them.
#: Derivation: NVIDIA DLE GNMT README (pytorch-19.01, DGX-1): 1 V100, AMP, 66,050 tokens/s and
#: 264.4 min for 6 epochs (incl. evaluation) give <= 1.75e8 tokens per epoch; 8 GPUs: 387,282 tokens/s,
#: 46.2 min -> 1.79e8. The training set is WMT16 en-de (~4.5M pairs, tensorflow/nmt wmt16_en_de.sh)
#: filtered to <= 50 BPE tokens per side (--max-length-train 50), which we take as ~3.9-4.0M pairs:
#: 1.75e8 / 3.9e6 = ~45 tokens per pair (~22.5 per side; the trainer counts src + tgt - 1). Uncertain
#: by about +-15% (the pair count after filtering is not published in the README).
GNMT_TOKENS_PER_PAIR = 45.0


def build_gnmt(info: _Info, tokens_per_pair: int | float | None = None, hidden: int = 1024,
               vocab: int = 32320, n_layers: int = 4) -> Workload:
    """GNMT v2 as in NVIDIA DLE: shared 32k-BPE embeddings (vocabulary padded to 32320), a 4-layer
    LSTM encoder (first layer bidirectional, residual connections from layer 3), a 4-layer decoder
    whose first layer feeds normalised Bahdanau attention, the context concatenated to the inputs of
    layers 2-4, and a linear classifier; hidden size 1024. A sample is a sentence pair; source and
    target are each half of ``tokens_per_pair``.

    FLOPs per token of an LSTM layer: ``2 * 4H * (I + H)``. Kernels: cuDNN LSTM launches about two
    kernels per time step and layer (recurrent GEMM + cell), the recurrent weights being re-read each
    step (the ``lstm recurrent`` group's ``weight_bytes`` grows with the length)."""
    T = float(tokens_per_pair or GNMT_TOKENS_PER_PAIR)
    ls = lt = T / 2.0
    steps_s, steps_t = math.ceil(ls), math.ceil(lt)
    H, V = float(hidden), float(vocab)
    E = ACT_BYTES
    g = _Groups()
    params = V * H                                                   # shared embedding
    # (input width, directions, tokens, steps) of each LSTM layer
    enc = [(H, 2, ls, steps_s), (2 * H, 1, ls, steps_s)] + [(H, 1, ls, steps_s)] * (n_layers - 2)
    dec = [(H, 1, lt, steps_t)] + [(2 * H, 1, lt, steps_t)] * (n_layers - 1)
    act = 0.0
    layer_acts = []
    for i_w, dirs, toks, steps in enc + dec:
        params += dirs * (4 * H * (i_w + H) + 8 * H)
        g.add("matmul", "lstm input projections", dirs, dirs * toks * 2 * 4 * H * i_w,
              dirs * E * toks * (i_w + 4 * H), dirs * WEIGHT_BYTES * 4 * H * i_w)
        g.add("matmul", "lstm recurrent", dirs * steps, dirs * toks * 2 * 4 * H * H,
              dirs * E * toks * (H + 4 * H), dirs * steps * WEIGHT_BYTES * 4 * H * H)
        g.add("elementwise", "lstm cells", dirs * steps, 0.0, dirs * E * toks * (4 * H + 2 * H + 2 * H))
        a = dirs * toks * (E * i_w + E * 6 * H) + MASK_BYTES * toks * i_w   # input, gates/cell/hidden, dropout mask
        layer_acts.append(a)
        act += a
    # attention (decoder layer-1 output as query over the encoder outputs)
    params += 2 * H * H + H + 1 + H                                  # W_q, W_k, v, norm scalar, bias
    g.add("matmul", "attention projections", 2, 2 * H * H * (ls + lt), E * 2 * H * (ls + lt), WEIGHT_BYTES * 2 * H * H)
    pairs = ls * lt
    g.add("elementwise", "attention additive scores", 3, 0.0, E * 3 * 2 * pairs * H)
    g.add("attention", "attention scores and context", 2, 2 * pairs * H * 2,
          E * (pairs * H + pairs + pairs + ls * H + lt * H))
    g.add("elementwise", "attention softmax, mask", 3, 0.0, E * 2 * 3 * pairs)
    act_att = E * (pairs * H + ls * H + lt * H + 2 * pairs)
    act += act_att
    # classifier and label-smoothed cross-entropy
    params += H * V + V
    g.add("matmul", "classifier", 1, 2 * H * V * lt, E * lt * (H + V), WEIGHT_BYTES * H * V)
    g.add("elementwise", "loss", 4, 0.0, lt * V * (E + 3 * LOSS_BYTES))
    act_head = E * lt * H + LOSS_BYTES * lt * V
    act += act_head
    g.add("embedding", "embeddings", 2, 0.0, E * 2 * H * (ls + lt))
    g.add("elementwise", "dropout, concat, residual", 2 * n_layers + 3 * (n_layers - 1) + 4, 0.0,
          E * H * (ls + lt) * (3 * n_layers + 4))
    act_ckpt = sum(E * toks * i_w for i_w, dirs, toks, _ in enc + dec) + act_att + act_head
    rebuild = functools.partial(_gnmt_rebuild, info)
    pipe = {"input_bytes_per_sample": T * 2.0, "h2d_bytes_per_sample": T * 8.0 + 16.0,
            "preprocess_core_s_per_sample": TEXT_CORE_S_PER_SAMPLE + T * TEXT_CORE_S_PER_TOKEN}
    return Workload(id=info.id, name=info.name, family="rnn", sample_unit="sequence", tokens_per_sample=T,
                    params=params, fwd_flop_per_sample=g.total_flop(), act_bytes_per_sample=act,
                    act_ckpt_bytes_per_sample=act_ckpt, act_block_bytes_per_sample=max(layer_acts),
                    layers=g.build(), sources=info.sources,
                    seq_len_default=int(round(GNMT_TOKENS_PER_PAIR)), notes=info.notes, _rebuild=rebuild, **pipe)


def _gnmt_rebuild(info: _Info, seq_len: int) -> Workload:
    return build_gnmt(info, seq_len)


# =================================================================================================
# The catalogue
# =================================================================================================

_KORTHIKANTI = ("Korthikanti et al. 2022, 'Reducing Activation Recomputation in Large Transformer Models', "
                "arXiv:2205.05198, Sec. 4.1 (activation bytes per layer s*h*(34+5*a*s/h))")
_TV = "pytorch/vision torchvision/models weights metadata (num_params, _ops in GMAC)"
_CATALOGUE: dict[str, Callable[[int | None], Workload]] = {}
_ALIASES: dict[str, str] = {}
_SPECS: dict[str, tuple[_Info, TransformerSpec]] = {}


def _register(model_id: str, builder: Callable[[int | None], Workload], aliases: Iterable[str] = ()) -> None:
    _CATALOGUE[model_id] = builder
    for a in aliases:
        _ALIASES[a] = model_id


def _fixed(fn: Callable[[], Workload]) -> Callable[[int | None], Workload]:
    def build(seq_len: int | None = None) -> Workload:
        w = fn()
        if seq_len is not None:
            w.with_seq_len(seq_len)   # raises the readable error
        return w
    return build


def _tx(model_id: str, name: str, family: str, spec: TransformerSpec, sources: Sequence[str], notes: str = "",
        pipeline: Callable[[float], dict[str, float]] | None = None, aliases: Iterable[str] = ()) -> None:
    info = _Info(model_id, name, family, (*sources, _KORTHIKANTI), notes, pipeline)
    _SPECS[model_id] = (info, spec)
    _register(model_id, functools.partial(build_transformer, info, spec), aliases)


def _imagenet_pipe(_: float) -> dict[str, float]:
    return _image_pipeline(IMAGENET_JPEG_BYTES, 3, 224, 224, 1.0, IMAGENET_PREPROCESS_CORE_S)


def _lm_pipe(vocab: int, s: float) -> dict[str, float]:
    return _text_pipeline(s, vocab, 2)


def _squad_pipe(s: float) -> dict[str, float]:
    # input ids, segment ids and mask as int64, plus start/end positions
    d = _text_pipeline(s, 30522, 3)
    d["h2d_bytes_per_sample"] += 16.0
    return d


def _populate() -> None:
    # --- CNNs --------------------------------------------------------------------------------------
    dle_rn50 = ("NVIDIA DeepLearningExamples PyTorch/Classification/ConvNets/resnet50v1.5 (v1.5: stride 2 "
                "on the 3x3 conv of each downsampling bottleneck)")
    _register("resnet50", _fixed(lambda: build_resnet(_Info(
        "resnet50", "ResNet-50 v1.5", "cnn",
        ("He et al. 2016, 'Deep Residual Learning for Image Recognition', Table 1", dle_rn50,
         _TV + ": 25,557,032 params, 4.089 GMAC"),
        "224x224, batch-norm in training mode, 1000 classes."), (3, 4, 6, 3))), aliases=("resnet-50", "rn50"))
    _register("resnet101", _fixed(lambda: build_resnet(_Info(
        "resnet101", "ResNet-101 v1.5", "cnn",
        ("He et al. 2016, Table 1", dle_rn50, _TV + ": 44,549,160 params, 7.801 GMAC"),
        "224x224, v1.5 strides."), (3, 4, 23, 3))), aliases=("resnet-101",))
    _register("vgg16", _fixed(lambda: build_vgg16(_Info(
        "vgg16", "VGG-16", "cnn",
        ("Simonyan & Zisserman 2015, 'Very Deep Convolutional Networks', Table 1 config D and Table 2 "
         "(138M params)", _TV + ": 138,357,544 params, 15.47 GMAC"),
        "224x224, no batch norm, dropout 0.5 in the classifier."))), aliases=("vgg-16",))
    _register("inception-v3", _fixed(lambda: build_inception_v3(_Info(
        "inception-v3", "Inception-v3", "cnn",
        ("Szegedy et al. 2016, 'Rethinking the Inception Architecture for Computer Vision', Table 1, "
         "Figs. 5-7", _TV + ": 27,161,264 params (with the auxiliary head), 5.713 GMAC"),
        "299x299, auxiliary classifier active in training; module widths of the reference "
        "implementations (the paper's Table 1 gives only the grid sizes)."))), aliases=("inception3", "inceptionv3"))
    _register("ssd300", _fixed(lambda: build_ssd300(_Info(
        "ssd300", "SSD300 (ResNet-50)", "detection",
        ("Liu et al. 2016, 'SSD: Single Shot MultiBox Detector'",
         "NVIDIA DeepLearningExamples PyTorch/Detection/SSD ssd/model.py (ResNet-50 to conv4_x, stride 1 in "
         "conv4_x, extra blocks [256,256,128,128,128] -> [512,512,256,256,256], 81 classes, 8732 boxes)"),
        "300x300 COCO; the loss keeps fp32 log-probabilities of all 8732x81 box-class scores; the "
        "image tensor is assumed copied as float32 (normalised on the CPU)."))), aliases=("ssd",))
    _register("mask-rcnn", _fixed(lambda: build_mask_rcnn(_Info(
        "mask-rcnn", "Mask R-CNN (ResNet-50-FPN)", "detection",
        ("He et al. 2017, 'Mask R-CNN'", "Lin et al. 2017, 'Feature Pyramid Networks for Object Detection'",
         _TV + ": maskrcnn_resnet50_fpn 44,401,393 params"),
        "APPROXIMATE: one 800x1088 image; 512 sampled RoIs in the box head, 128 positive RoIs in the "
        "mask head (the cap); frozen batch norm; RPN proposal ops lumped as ~200 'other' kernels; "
        "the float32 image tensor is what is copied to the GPU."))), aliases=("maskrcnn", "mask-rcnn-r50-fpn"))

    # --- vision transformers -----------------------------------------------------------------------
    vit_src = ("Dosovitskiy et al. 2021, 'An Image is Worth 16x16 Words', Table 1",)
    vit_note = "224x224, 16x16 patches + class token = 197 tokens; no dropout; fused (flash) attention."
    _tx("vit-b-16", "ViT-B/16", "vit", TransformerSpec(12, 768, 12, 0, 197, dropout=False, flash_attention=True,
        head="cls", n_classes=1000, image_size=224, patch_size=16),
        (*vit_src, _TV + ": 86,567,656 params, 17.564 GMAC"), vit_note, _imagenet_pipe, aliases=("vit-b16", "vit-base"))
    _tx("vit-l-16", "ViT-L/16", "vit", TransformerSpec(24, 1024, 16, 0, 197, dropout=False, flash_attention=True,
        head="cls", n_classes=1000, image_size=224, patch_size=16),
        (*vit_src, _TV + ": 304,326,632 params, 61.555 GMAC"), vit_note, _imagenet_pipe, aliases=("vit-l16", "vit-large"))

    # --- encoders ----------------------------------------------------------------------------------
    bert_src = ("Devlin et al. 2019, 'BERT', Sec. 3 (BERT-base L12 H768 A12 110M; BERT-large L24 H1024 A16 340M)",
                "NVIDIA DeepLearningExamples PyTorch/LanguageModeling/BERT (SQuAD fine-tuning, seq 384)")
    bert_note = ("SQuAD fine-tuning model: encoder + span head (no MLM head); vocab 30522, 512 positions, "
                 "2 token types, pooler parameters counted; default seq 128 (the validation rows use 384).")
    for mid, L, h, a in (("bert-base", 12, 768, 12), ("bert-large", 24, 1024, 16)):
        _tx(mid, f"BERT-{mid.split('-')[1]}", "encoder", TransformerSpec(
            L, h, a, 30522, 128, learned_pos=True, max_positions=512, head="qa", embedding_norm=True, final_norm=False,
            token_types=2, extra_params=h * h + h), bert_src, bert_note, _squad_pipe)

    # --- GNMT --------------------------------------------------------------------------------------
    gnmt_info = _Info("gnmt", "GNMT v2", "rnn",
                      ("Wu et al. 2016, 'Google's Neural Machine Translation System'",
                       "NVIDIA DeepLearningExamples PyTorch/Translation/GNMT README (GNMT v2: 4+4 LSTM layers, "
                       "1024 units, first encoder layer bidirectional, residual from layer 3, normalised "
                       "Bahdanau attention fed to decoder layers 2-4, shared 32k BPE vocabulary)"),
                      f"A sample is a WMT16 en-de sentence pair of {GNMT_TOKENS_PER_PAIR:g} tokens (source + "
                      "target, the unit of DLE's tokens/s; derived from DLE's tokens/s x time-to-train, "
                      "+-15%); --seq-len sets tokens per pair. Padding within buckets is not counted.")
    _register("gnmt", lambda seq_len=None: build_gnmt(gnmt_info, seq_len), aliases=("gnmt-v2", "gnmt2"))

    # --- Transformer-XL (NVIDIA DLE configs) -------------------------------------------------------
    txl_src = ("Dai et al. 2019, 'Transformer-XL'",
               "NVIDIA DeepLearningExamples PyTorch/LanguageModeling/Transformer-XL pytorch/wt103_base.yaml and "
               "wt103_large.yaml (base: L16 d512 8x64 heads d_inner 2048 tgt_len=mem_len=192; large: L18 d1024 "
               "16x64 heads d_inner 4096 tgt_len=mem_len=384, div_val 4; vocab 267735, cutoffs "
               "19997/39997/199997, tied adaptive embeddings)")
    txl_note = ("WikiText-103 word-level LM; seq = tgt_len, keys = tgt_len + mem_len; QKV computed for memory "
                "and segment; the relative-position projection (shared across the batch) is not counted per "
                "sample. APPROXIMATE adaptive softmax: tail clusters hold 5.3%, 12.3% and 2.2% of tokens "
                "(Zipf's law over the 267,735-word vocabulary).")
    zipf = (0.053, 0.123, 0.022)
    _tx("transformer-xl-base", "Transformer-XL base", "decoder-lm", TransformerSpec(
        16, 512, 8, 267735, 192, d_head=64, d_ff=2048, bias=False, dropout=True, attn_dropout=False,
        head="adaptive", mem_len=192, rel_pos=True, final_norm=False, adaptive_cutoffs=(19997, 39997, 199997),
        adaptive_div_val=1, adaptive_cluster_frac=zipf, mlp_bias=True, extra_params=2 * 512),
        txl_src, txl_note, functools.partial(_lm_pipe, 267735), aliases=("txl-base",))
    _tx("transformer-xl-large", "Transformer-XL large", "decoder-lm", TransformerSpec(
        18, 1024, 16, 267735, 384, d_head=64, d_ff=4096, bias=False, dropout=True, attn_dropout=True,
        head="adaptive", mem_len=384, rel_pos=True, final_norm=False, adaptive_cutoffs=(19997, 39997, 199997),
        adaptive_div_val=4, adaptive_cluster_frac=zipf, mlp_bias=True, extra_params=2 * 1024),
        txl_src, txl_note, functools.partial(_lm_pipe, 267735), aliases=("txl-large",))

    # --- GPT-2 -------------------------------------------------------------------------------------
    gpt2_src = ("Radford et al. 2019, 'Language Models are Unsupervised Multitask Learners', Table 2 "
                "(117M/345M/762M/1542M as printed; 124M/355M/774M/1558M as released)",)
    gpt2_note = "vocab 50257, 1024 positions, tied embeddings, dropout 0.1, unfused attention (Korthikanti's formula)."
    for mid, name, L, h in (("gpt2", "GPT-2 (124M)", 12, 768), ("gpt2-medium", "GPT-2 medium (355M)", 24, 1024),
                            ("gpt2-large", "GPT-2 large (774M)", 36, 1280), ("gpt2-xl", "GPT-2 XL (1.5B)", 48, 1600)):
        _tx(mid, name, "decoder-lm", TransformerSpec(L, h, h // 64, 50257, 1024, learned_pos=True, max_positions=1024),
            gpt2_src, gpt2_note, aliases=(mid.replace("gpt2", "gpt-2"),))

    # --- GPT-3 family (Brown et al. 2020 Table 2.1) -------------------------------------------------
    gpt3_src = ("Brown et al. 2020, 'Language Models are Few-Shot Learners', Table 2.1 (n_layers, d_model, "
                "n_heads; context 2048)",)
    gpt3_note = ("vocab 50257, 2048 positions, tied embeddings, FFN 4*d_model, dense attention everywhere (the "
                 "paper alternates dense and locally banded sparse layers; counted as dense), dropout and "
                 "unfused attention as in Korthikanti's formula.")
    for mid, name, L, h, a, note in (
            ("gpt3-125m", "GPT-3 Small (125M)", 12, 768, 12, ""),
            ("gpt3-350m", "GPT-3 Medium (350M)", 24, 1024, 16, ""),
            ("gpt3-760m", "GPT-3 Large (760M)", 24, 1536, 16, ""),
            ("gpt3-1.3b", "GPT-3 XL (1.3B)", 24, 2048, 24, " Table 2.1 lists d_head 128 for 24 heads, which "
             "does not match d_model 2048; the attention width is taken as d_model (matches 1.3B)."),
            ("gpt3-2.7b", "GPT-3 2.7B", 32, 2560, 32, ""),
            ("gpt3-6.7b", "GPT-3 6.7B", 32, 4096, 32, ""),
            ("gpt3-13b", "GPT-3 13B", 40, 5120, 40, " Table 2.1 prints d_model 5140; 40 heads x 128 = 5120 is used."),
            ("gpt3-175b", "GPT-3 175B", 96, 12288, 96, "")):
        _tx(mid, name, "decoder-lm", TransformerSpec(L, h, a, 50257, 2048, learned_pos=True, max_positions=2048),
            gpt3_src, gpt3_note + note)

    # --- Megatron-LM GPT configurations (validation rows) ---------------------------------------------
    meg_src = ("Narayanan et al. 2021 (SC'21), 'Efficient Large-Scale Language Model Training on GPU Clusters "
               "Using Megatron-LM', Table 1 (heads, hidden, layers; vocab 51200, seq 2048)",)
    meg_note = ("Megatron-LM GPT: vocab 51200, seq 2048, learned positions, tied embeddings, dropout, "
                "unfused attention (Korthikanti's formula applies exactly).")
    for mid, name, L, h, a in (("gpt-1.7b", "GPT 1.7B (Megatron)", 24, 2304, 24),
                               ("gpt-3.6b", "GPT 3.6B (Megatron)", 30, 3072, 32),
                               ("gpt-7.5b", "GPT 7.5B (Megatron)", 36, 4096, 32),
                               ("gpt-18b", "GPT 18.4B (Megatron)", 40, 6144, 48),
                               ("gpt-39b", "GPT 39.1B (Megatron)", 48, 8192, 64),
                               ("gpt-76b", "GPT 76.1B (Megatron)", 60, 10240, 80),
                               ("gpt-145b", "GPT 145.6B (Megatron)", 80, 12288, 96),
                               ("gpt-310b", "GPT 310.1B (Megatron)", 96, 16384, 128),
                               ("gpt-530b", "GPT 529.6B (Megatron)", 105, 20480, 128),
                               ("gpt-1t", "GPT 1T (Megatron)", 128, 25600, 160)):
        _tx(mid, name, "decoder-lm", TransformerSpec(L, h, a, 51200, 2048, learned_pos=True, max_positions=2048),
            meg_src, meg_note)
    kor_src = ("Korthikanti et al. 2022, Table 3 (22B: 64 heads, h 6144, 48 layers; 175B: 96, 12288, 96; "
               "vocab 51200, seq 2048)",)
    for mid, name, L, h, a in (("gpt-22b", "GPT 22B (Megatron)", 48, 6144, 64),
                               ("gpt-175b", "GPT 175B (Megatron)", 96, 12288, 96)):
        _tx(mid, name, "decoder-lm", TransformerSpec(L, h, a, 51200, 2048, learned_pos=True, max_positions=2048),
            kor_src, meg_note)

    # --- Llama 2 / Llama 3 / Mistral / MPT ---------------------------------------------------------
    modern = dict(bias=False, norm="rmsnorm", dropout=False, flash_attention=True, rope=True, fused_qkv=False,
                  gated_ffn=True, tied_embeddings=False)
    l2_src = ("Touvron et al. 2023, 'Llama 2: Open Foundation and Fine-Tuned Chat Models', Table 1 and "
              "Sec. 2.2 (context 4096, GQA for 70B); Llama 2 model card / params.json (FFN widths 11008, "
              "13824, 28672; vocab 32000)",)
    l_note = ("RMSNorm, rotary embeddings, SwiGLU FFN, untied output layer, no biases, no dropout, fused "
              "(flash) attention: the s x s probabilities are not kept.")
    for mid, name, L, h, a, kv, f in (("llama2-7b", "Llama 2 7B", 32, 4096, 32, 32, 11008),
                                      ("llama2-13b", "Llama 2 13B", 40, 5120, 40, 40, 13824),
                                      ("llama2-70b", "Llama 2 70B", 80, 8192, 64, 8, 28672)):
        _tx(mid, name, "decoder-lm", TransformerSpec(L, h, a, 32000, 4096, n_kv_heads=kv, d_ff=f, **modern),
            l2_src, l_note, aliases=(mid.replace("llama2", "llama-2"),))
    l3_src = ("Llama Team, Meta 2024, 'The Llama 3 Herd of Models', Table 3 (layers, model dim, FFN dim, heads, "
              "8 KV heads, vocab 128,256); context 8192 in pre-training",)
    for mid, name, L, h, a, f in (("llama3-8b", "Llama 3 8B", 32, 4096, 32, 14336),
                                  ("llama3-70b", "Llama 3 70B", 80, 8192, 64, 28672),
                                  ("llama3-405b", "Llama 3 405B", 126, 16384, 128, 53248)):
        _tx(mid, name, "decoder-lm", TransformerSpec(L, h, a, 128256, 8192, n_kv_heads=8, d_ff=f, **modern),
            l3_src, l_note, aliases=(mid.replace("llama3", "llama-3"),))
    _tx("mistral-7b", "Mistral 7B", "decoder-lm", TransformerSpec(
        32, 4096, 32, 32000, 8192, n_kv_heads=8, d_ff=14336, attention_window=4096, **modern),
        ("Jiang et al. 2023, 'Mistral 7B', Table 1 (dim 4096, 32 layers, 32 heads, 8 KV heads, hidden 14336, "
         "window 4096, context 8192, vocab 32000)",),
        l_note + " Sliding-window attention: each query attends to at most 4096 keys.")
    mpt = dict(bias=False, norm="layernorm_nobias", dropout=False, flash_attention=True, tied_embeddings=True)
    _tx("mpt-7b", "MPT-7B", "decoder-lm", TransformerSpec(32, 4096, 32, 50432, 2048, **mpt),
        ("MosaicML 2023, MPT-7B model card and blog 'Introducing MPT-7B' (d_model 4096, 32 layers, 32 heads, "
         "expansion 4, vocab 50432, seq 2048, ALiBi, 6.7B params)",),
        "ALiBi (no position parameters), LayerNorm without bias, no biases, tied embeddings, no dropout, fused attention.")
    _tx("mpt-30b", "MPT-30B", "decoder-lm", TransformerSpec(48, 7168, 64, 50432, 8192, **mpt),
        ("MosaicML 2023, MPT-30B model card (d_model 7168, 48 layers, 64 heads, expansion 4, vocab 50432, "
         "seq 8192, 29.95B params)",),
        "ALiBi, LayerNorm without bias, tied embeddings, no dropout, fused attention. (There is no released "
        "MPT-70B; the MPT family stops at 30B.)")


_populate()


def transformer_spec(model_id: str) -> TransformerSpec | None:
    """The :class:`TransformerSpec` behind a catalogue transformer (None for other models)."""
    key = _ALIASES.get(model_id.lower(), model_id.lower())
    return _SPECS[key][1] if key in _SPECS else None


def build_from_spec(spec: TransformerSpec, *, id: str = "custom-transformer", name: str | None = None,
                    family: str = "decoder-lm", seq_len: int | None = None,
                    sources: Sequence[str] = ("user-supplied TransformerSpec",), notes: str = "") -> Workload:
    """A workload for your own transformer hyper-parameters (same builder as the catalogue)."""
    info = _Info(id, name or id, family, (*sources, _KORTHIKANTI), notes)
    return build_transformer(info, spec, seq_len)


def workload_ids() -> list[str]:
    """Catalogue ids in catalogue order."""
    return list(_CATALOGUE)


@functools.lru_cache(maxsize=256)
def _get(model_id: str, seq_len: int | None) -> Workload:
    w = _CATALOGUE[model_id](None)
    if seq_len is not None and seq_len != w.seq_len:
        w = w.with_seq_len(seq_len)
    return w


def get_workload(model_id: str, seq_len: int | None = None) -> Workload:
    """The catalogue entry ``model_id`` (case-insensitive; a few aliases such as ``resnet-50``),
    evaluated at ``seq_len`` for sequence models.

    Raises :class:`gpusim.errors.UnknownIdError` with close matches for an unknown id, and
    :class:`gpusim.errors.ScenarioError` for ``seq_len`` on a fixed-size model.
    """
    key = str(model_id).strip().lower()
    key = _ALIASES.get(key, key)
    if key not in _CATALOGUE:
        raise UnknownIdError("model", str(model_id), _CATALOGUE, hint=" (`gpusim models` lists them)")
    if seq_len is not None and (isinstance(seq_len, bool) or int(seq_len) != seq_len or seq_len < 1):
        raise ScenarioError(f"sequence length must be a positive integer (got {seq_len!r})")
    return _get(key, None if seq_len is None else int(seq_len))


def list_workloads() -> list[Workload]:
    """Every catalogue entry at its default sequence length, in catalogue order."""
    return [get_workload(i) for i in _CATALOGUE]


# =================================================================================================
# from_torch: measure a module
# =================================================================================================

def _from_torch(cls, module, example_batch, *, name, sample_unit, tokens_per_sample, batch_size, device,
                input_bytes_per_sample, h2d_bytes_per_sample, preprocess_core_s_per_sample, ckpt_blocks,
                notes) -> Workload:
    """Measure one training-mode forward pass of ``module`` on ``example_batch``.

    * Parameters: ``sum(p.numel())``.
    * FLOPs: ``torch.utils.flop_counter.FlopCounterMode`` (per module internally), with formulas added
      through ``custom_mapping`` for the CPU flash-attention op (which has none in torch, so SDPA would
      count 0 on CPU); nothing is registered globally.
    * Kernels, bytes and groups: a ``TorchDispatchMode`` sees every aten op of the forward pass. View
      and allocation ops (``view``, ``t``, ``empty_like`` ...) are not kernels. Ops are grouped by type:
      matmul (a matrix product with a parameter operand), attention (SDPA ops, or a batched matrix
      product of two activations), conv, norm, embedding, pool, elementwise, other. Bytes are the
      op's activation inputs and outputs at 16 bits per floating-point element (integer tensors at
      their own size); parameter operands count as weight bytes.
    * Activation bytes: ``torch.autograd.graph.saved_tensors_hooks`` sees every tensor autograd keeps;
      each storage is counted once, parameters excluded, floating-point tensors scaled to 2 bytes per
      element (a model run in fp32 is reported as if its activations were 16-bit).
    * Checkpointed bytes: inputs of the checkpoint blocks (``ckpt_blocks``, default: the children of the
      ``nn.ModuleList``/``nn.Sequential`` holding most parameters, or the top-level children) + the saved
      bytes outside blocks; ``act_block_bytes_per_sample`` is the largest block's saved bytes.
    * Per sample: divided by the batch size (``batch_size`` or dim 0 of the first tensor).
    * ``device="meta"`` runs on the meta device (no memory): a module with real weights is deep-copied
      to meta first, and the batch is rebuilt as meta tensors. On meta (and on CPU with dropout), SDPA
      takes the unfused math path, so its ``s x s`` probabilities count as kept and its kernels count
      as several; on GPU a fused kernel would keep neither.
    """
    try:
        import torch
        from torch.utils._python_dispatch import TorchDispatchMode
        from torch.utils.flop_counter import FlopCounterMode, sdpa_backward_flop_count, sdpa_flop_count
        from torch.utils._pytree import tree_flatten, tree_map
    except ImportError as e:  # pragma: no cover - exercised only without torch
        raise ScenarioError("Workload.from_torch needs PyTorch (`pip install torch`)") from e
    import copy

    aten = torch.ops.aten
    if device is not None and str(device) == "meta":
        if any(p.device.type != "meta" for p in module.parameters()):
            module = copy.deepcopy(module).to("meta")
        example_batch = tree_map(lambda t: torch.empty_like(t, device="meta") if isinstance(t, torch.Tensor) else t,
                                 example_batch)
    elif device is not None:
        raise ScenarioError(f"from_torch: device must be None or 'meta' (got {device!r})")

    leaves = [t for t in tree_flatten(example_batch)[0] if isinstance(t, torch.Tensor)]
    if not leaves:
        raise ScenarioError("from_torch: example_batch must contain at least one tensor")
    first = leaves[0]
    b = int(batch_size or (first.shape[0] if first.dim() > 0 else 1))
    if b < 1:
        raise ScenarioError("from_torch: the batch dimension must be >= 1")

    params = list(module.parameters())
    n_params = float(sum(p.numel() for p in params))
    if n_params <= 0:
        raise ScenarioError("from_torch: the module has no parameters")
    param_storages = {_storage_key(p) for p in params}

    def elem_bytes(t) -> float:
        return ACT_BYTES if t.is_floating_point() else float(t.element_size())

    def _cpu_flash_fwd(q, k, v, *args, out_shape=None, **kwargs):
        return sdpa_flop_count(q, k, v)

    def _cpu_flash_bwd(grad, q, k, v, *args, out_shape=None, **kwargs):
        return sdpa_backward_flop_count(grad, q, k, v)

    custom = {}
    for op_name, fn in (("_scaled_dot_product_flash_attention_for_cpu", _cpu_flash_fwd),
                        ("_scaled_dot_product_flash_attention_for_cpu_backward", _cpu_flash_bwd)):
        op = getattr(aten, op_name, None)
        if op is not None:
            custom[op] = fn
    try:
        from torch.utils.flop_counter import flop_registry, shape_wrapper
        registry = {**flop_registry, **{k: shape_wrapper(v) for k, v in custom.items()}}
    except ImportError:  # pragma: no cover - an older torch: groups get no FLOPs, the total still does
        registry = {}

    groups = _Groups()
    # metadata-only or allocation-only ops: no kernel
    free_ops = {"empty", "empty_like", "empty_strided", "detach", "alias", "lift_fresh", "new_empty",
                "new_empty_strided", "scalar_tensor", "_local_scalar_dense", "_unsafe_view", "_reshape_alias",
                "set_", "resize_"}

    class _Recorder(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            packet = func._overloadpacket
            op = packet.__name__
            if getattr(func, "is_view", False) or op in free_ops:
                return out
            flop = 0.0
            if packet in registry:
                try:
                    flop = float(registry[packet](*args, **kwargs, out_val=out))
                except Exception:  # an odd signature: leave the FLOPs to FlopCounterMode's total
                    flop = 0.0
            ins = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]
            outs = [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]
            w_in = [t for t in ins if _storage_key(t) in param_storages]
            a_in = [t for t in ins if _storage_key(t) not in param_storages]
            act_b = sum(t.numel() * elem_bytes(t) for t in a_in + outs)
            w_b = sum(t.numel() * WEIGHT_BYTES for t in w_in)
            kind = _op_kind(op, bool(w_in))
            groups.add(kind, f"{kind} ({op})" if kind == "other" else kind, 1, flop / b, act_b / b, w_b)
            return out

    saved: dict[Any, tuple[float, int | None]] = {}
    block_of: list[int | None] = [None]
    block_inputs = [0.0]

    def pack(t):
        key = _storage_key(t)
        if key not in param_storages and key not in saved:
            try:
                nbytes = float(t.untyped_storage().nbytes())
            except Exception:
                nbytes = float(t.numel() * t.element_size())
            if t.is_floating_point() and t.element_size() != ACT_BYTES:
                nbytes *= ACT_BYTES / t.element_size()
            saved[key] = (nbytes, block_of[0])
        return t

    blocks = list(ckpt_blocks) if ckpt_blocks is not None else _default_blocks(torch, module)
    hooks = []
    for i, blk in enumerate(blocks):
        def pre(mod, inp, i=i):
            block_of[0] = i
            block_inputs[0] += sum(t.numel() * elem_bytes(t) for t in tree_flatten(inp)[0]
                                   if isinstance(t, torch.Tensor))

        def post(mod, inp, out):
            block_of[0] = None
        hooks.append(blk.register_forward_pre_hook(pre))
        hooks.append(blk.register_forward_hook(post))

    was_training = module.training
    module.train()
    try:
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            with FlopCounterMode(display=False, depth=None, custom_mapping=custom) as fc, _Recorder():
                if isinstance(example_batch, dict):
                    module(**example_batch)
                elif isinstance(example_batch, (tuple, list)):
                    module(*example_batch)
                else:
                    module(example_batch)
    finally:
        for h in hooks:
            h.remove()
        module.train(was_training)

    total_flop = float(fc.get_total_flops()) / b
    layers = list(groups.build())
    rec_flop = sum(g.fwd_flop_per_sample for g in layers)
    if total_flop > 0 and not math.isclose(rec_flop, total_flop, rel_tol=1e-6):
        layers.append(LayerGroup("other", 1, max(total_flop - rec_flop, 0.0), 0.0, 0.0, "unattributed FLOPs"))
        total_flop = sum(g.fwd_flop_per_sample for g in layers)
    if total_flop <= 0:
        raise ScenarioError("from_torch: no FLOPs were counted (the forward pass ran no matmul or conv)")
    act_total = sum(v for v, _ in saved.values())
    per_block: dict[int | None, float] = {}
    for v, blk in saved.values():
        per_block[blk] = per_block.get(blk, 0.0) + v
    outside = per_block.pop(None, 0.0)
    act_block = max(per_block.values(), default=0.0)
    act_ckpt = block_inputs[0] + outside if blocks else act_total

    if sample_unit is None:
        seq_like = (not first.is_floating_point() and first.dim() == 2) or (first.is_floating_point() and first.dim() == 3)
        sample_unit = "sequence" if seq_like else "image"
    if tokens_per_sample is None:
        tokens_per_sample = float(first.shape[1]) if sample_unit == "sequence" and first.dim() >= 2 else 1.0
    batch_bytes = sum(t.numel() * t.element_size() for t in leaves) / b
    label = name or type(module).__name__
    return cls(
        id=_slug(label), name=label, family="custom", sample_unit=sample_unit,
        tokens_per_sample=float(tokens_per_sample), params=n_params, fwd_flop_per_sample=total_flop,
        act_bytes_per_sample=max(act_total / b, 1.0), act_ckpt_bytes_per_sample=min(act_ckpt, act_total) / b,
        act_block_bytes_per_sample=act_block / b if blocks else None,
        input_bytes_per_sample=batch_bytes if input_bytes_per_sample is None else input_bytes_per_sample,
        h2d_bytes_per_sample=batch_bytes if h2d_bytes_per_sample is None else h2d_bytes_per_sample,
        preprocess_core_s_per_sample=preprocess_core_s_per_sample, layers=tuple(layers),
        sources=(f"measured with torch {torch.__version__} on {first.device.type} (FlopCounterMode, "
                 "saved_tensors_hooks, dispatch-mode op count)",),
        notes=notes or f"measured from {type(module).__name__} at batch {b}")


def _storage_key(t) -> Any:
    """Identity of a tensor's storage (works for meta tensors too, whose data pointers are all 0)."""
    try:
        return t.untyped_storage()._cdata
    except Exception:
        return id(t)


def _default_blocks(torch, module) -> list[Any]:
    """Children of the ``nn.ModuleList``/``nn.Sequential`` (the module itself included) holding the most
    parameters (the repeated layers), else the top-level children."""
    best, best_p = None, 0
    for m in module.modules():
        if isinstance(m, (torch.nn.ModuleList, torch.nn.Sequential)) and len(m) >= 2:
            p = sum(x.numel() for x in m.parameters())
            if p > best_p:
                best, best_p = m, p
    if best is not None:
        return list(best)
    return list(module.children())


_MATMUL_OPS = {"mm", "addmm", "bmm", "baddbmm", "matmul", "_scaled_mm", "addbmm", "linear", "dot", "mv", "addmv"}
_CONV_OPS = {"convolution", "_convolution", "cudnn_convolution", "convolution_overrideable", "_slow_conv2d_forward",
             "mkldnn_convolution", "conv2d", "conv1d", "conv3d", "_convolution_mode", "conv_transpose2d"}
_NORM_OPS = {"native_layer_norm", "native_batch_norm", "_native_batch_norm_legit", "_native_batch_norm_legit_functional",
             "_native_batch_norm_legit_no_training", "native_group_norm", "_fused_rms_norm", "rms_norm", "batch_norm",
             "layer_norm", "group_norm", "cudnn_batch_norm", "miopen_batch_norm"}
_EMB_OPS = {"embedding", "embedding_bag", "_embedding_bag", "index_select"}
_POOL_OPS = {"max_pool2d_with_indices", "max_pool2d", "avg_pool2d", "_adaptive_avg_pool2d", "adaptive_avg_pool2d",
             "adaptive_max_pool2d", "max_pool3d_with_indices", "avg_pool3d", "_adaptive_avg_pool3d", "max_pool1d",
             "avg_pool1d", "mean"}


def _op_kind(op: str, has_weight: bool) -> str:
    if "attention" in op:
        return "attention"
    if op in _MATMUL_OPS:
        return "matmul" if has_weight else "attention"
    if op in _CONV_OPS:
        return "conv"
    if op in _NORM_OPS:
        return "norm"
    if op in _EMB_OPS:
        return "embedding"
    if op in _POOL_OPS:
        return "pool"
    if op.endswith("_") or op in {"add", "sub", "mul", "div", "relu", "gelu", "silu", "sigmoid", "tanh", "where",
                                  "_softmax", "_safe_softmax", "_log_softmax", "softmax", "log_softmax",
                                  "native_dropout", "bernoulli", "clone", "_to_copy", "copy", "cat", "pow",
                                  "rsqrt", "neg", "exp", "masked_fill", "threshold_backward", "hardtanh",
                                  "leaky_relu", "elu", "_unsafe_view", "fill", "zeros_like", "ones_like",
                                  "zeros", "ones", "full", "tril", "triu", "arange", "expand_copy", "erf"}:
        return "elementwise"
    return "other"
