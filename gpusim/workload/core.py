"""What is trained: the :class:`Workload` noun and :class:`LayerGroup` (the catalogue, the builders,
:meth:`Workload.from_config` and :meth:`Workload.from_torch` live in the sibling modules).

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

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gpusim.errors import ScenarioError
from gpusim.units import KB, MS, US


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


def image_pipeline(jpeg_bytes: float, c: int, h: int, w: int, elem_bytes: float, core_s: float,
                    extra_h2d_bytes: float = 0.0) -> dict[str, float]:
    return {"input_bytes_per_sample": jpeg_bytes,
            "h2d_bytes_per_sample": c * h * w * elem_bytes + extra_h2d_bytes,
            "preprocess_core_s_per_sample": core_s}


def text_pipeline(tokens: float, vocab: int, n_int64_tensors: int) -> dict[str, float]:
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
    transformer : the :class:`gpusim.workload.TransformerSpec` it was built from (GEMM shapes: ``d_model``,
        ``n_heads``, ``n_kv_heads``, ``d_head``, ``d_ff``, ``gated_ffn``, ``vocab_size``, ``n_layers``,
        experts ...), or None for CNNs, GNMT, custom and measured workloads.
    active_params : parameters that take part in one token's forward pass (a mixture of experts
        counts only the routed ``top_k`` experts); None means all of ``params`` (dense models).
    assumptions : what was assumed because a config did not say (from :meth:`from_config`).
    param_tensors : [issue 18] the number of parameter tensors (``len(list(model.parameters()))``: a conv's
        weight, a batch norm's weight and bias, ...), which a for-loop optimizer steps one by one
        (:class:`gpusim.strategy.Strategy` ``optimizer_impl``); None where the builder does not count them.
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
    transformer: Any = None
    active_params: float | None = None
    assumptions: tuple[str, ...] = ()
    param_tensors: int | None = None

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
        if self.active_params is not None:
            object.__setattr__(self, "active_params", _check_number(f"{self.id}: active_params",
                                                                    self.active_params, positive=True))
            if self.active_params > self.params * (1 + 1e-12):
                raise ScenarioError(f"{self.id}: active_params ({self.active_params:.6g}) exceeds params "
                                    f"({self.params:.6g})")
        object.__setattr__(self, "assumptions", tuple(self.assumptions))
        if self.param_tensors is not None and (isinstance(self.param_tensors, bool)
                                               or not isinstance(self.param_tensors, int) or self.param_tensors < 1):
            raise ScenarioError(f"{self.id}: param_tensors must be a positive integer (got {self.param_tensors!r})")
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
    def params_active(self) -> float:
        """Parameters used per token: ``active_params`` for a mixture of experts, else ``params``."""
        return self.params if self.active_params is None else float(self.active_params)

    @property
    def is_moe(self) -> bool:
        """A mixture-of-experts model (some parameters are idle for a given token)."""
        return self.active_params is not None and self.active_params < self.params

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
            "active_params": self.params_active,
            "fwd_flop_per_sample": self.fwd_flop_per_sample, "act_bytes_per_sample": self.act_bytes_per_sample,
            "act_ckpt_bytes_per_sample": self.act_ckpt_bytes_per_sample,
            "act_block_bytes_per_sample": self.act_block_bytes_per_sample,
            "input_bytes_per_sample": self.input_bytes_per_sample, "h2d_bytes_per_sample": self.h2d_bytes_per_sample,
            "preprocess_core_s_per_sample": self.preprocess_core_s_per_sample, "fwd_kernels": self.fwd_kernels,
            "weight_bytes": self.weight_bytes, "sources": list(self.sources), "notes": self.notes,
            "assumptions": list(self.assumptions),
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
            pipe = image_pipeline(IMAGENET_JPEG_BYTES, 3, 224, 224, 1.0, IMAGENET_PREPROCESS_CORE_S)
        for k, v in (("input_bytes_per_sample", input_bytes_per_sample),
                     ("h2d_bytes_per_sample", h2d_bytes_per_sample),
                     ("preprocess_core_s_per_sample", preprocess_core_s_per_sample)):
            if v is not None:
                pipe[k] = v
        kernels = max(2, int(fwd_kernels))
        n_mm = max(1, kernels // 3)
        layers = (LayerGroup("matmul", n_mm, flop, act, WEIGHT_BYTES * params, "matmuls (all FLOPs)"),
                  LayerGroup("elementwise", kernels - n_mm, 0.0, 2.0 * act, 0.0, "elementwise and norms"))
        return cls(id=id or slug(name), name=name, family=family, sample_unit=unit,
                   tokens_per_sample=tokens, params=params, fwd_flop_per_sample=flop,
                   act_bytes_per_sample=act,
                   act_ckpt_bytes_per_sample=act / 10.0 if act_ckpt_bytes_per_sample is None else act_ckpt_bytes_per_sample,
                   act_block_bytes_per_sample=act_block_bytes_per_sample,
                   layers=layers, sources=tuple(sources), notes=notes, **pipe)

    # ``Workload.from_config`` and ``Workload.from_torch`` are attached by the package (gpusim/workload/__init__.py)
    # from their builder modules: the noun does not import its builders (docs/ARCHITECTURE.md)


def slug(name: str) -> str:
    s = "".join(ch.lower() if ch.isalnum() or ch == "." else "-" for ch in name.strip())
    while "--" in s:
        s = s.replace("--", "-")
    return s.strip("-") or "custom"


class Groups:
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




# the old private names, for code written before they became public
_slug, _Groups, _image_pipeline, _text_pipeline = slug, Groups, image_pipeline, text_pipeline
