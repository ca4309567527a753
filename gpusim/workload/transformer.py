"""Transformers, decoder or encoder, dense or mixture-of-experts: :class:`TransformerSpec` and the one
parametric builder :func:`build_transformer` (conventions in :mod:`gpusim.workload.core`).

References
----------
* Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer Models"
  (arXiv:2205.05198), Sec. 4.1: activation bytes per layer.
* Narayanan et al. 2021 (SC'21), Appendix: FLOPs of a GPT layer.
* Shazeer et al. 2017 (sparsely-gated MoE), Fedus et al. 2021 (Switch Transformer, capacity factor),
  Jiang et al. 2024 (Mixtral, arXiv:2401.04088): routed experts with a top-k router.
* DeepSeek-AI 2024, "DeepSeek-V2" (arXiv:2405.04434) Sec. 2.1 (multi-head latent attention) and 2.2
  (DeepSeekMoE: shared + fine-grained routed experts); "DeepSeek-V3" (arXiv:2412.19437).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from gpusim.errors import ScenarioError
from gpusim.workload.core import (ACT_BYTES, INDEX_BYTES, LOSS_BYTES, MASK_BYTES, WEIGHT_BYTES, Workload, Groups,
                                  text_pipeline)

#: [issue 17] the layer groups of the multi-token prediction modules (build_transformer; TransformerSpec.mtp_layers)
MTP_GROUP = "multi-token prediction"

#: Switch Transformer's training capacity factor (Fedus et al. 2021, Sec. 2.2 and Table 1: 1.25 in their
#: largest runs, "capacity factor 1.0-1.25" recommended). Only used when a spec sets
#: ``moe_capacity_factor``; None (the default) is dropless routing as Megatron-Core defaults to
#: (``moe_expert_capacity_factor=None``) and as Mixtral, DeepSeek-V3 and Qwen3 train.
SWITCH_CAPACITY_FACTOR = 1.25

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

    Mixture of experts (all default to a dense model):

    n_experts : routed experts per MoE layer (0: dense).
    top_k : routed experts each token goes to.
    expert_d_ff : FFN width of one routed expert (default ``d_ff``).
    n_shared_experts, shared_expert_d_ff : always-on shared experts and the width of each (default
        ``expert_d_ff``; DeepSeek-V2/V3, Qwen2-MoE).
    shared_expert_gate : a sigmoid gate ``h -> 1`` on the shared expert output (Qwen2-MoE).
    moe_latent_dim : [stop 48] LatentMoE (Nemotron 3 Super / Ultra, ``moe_latent_size``): the routed experts work in a
        latent width ``l < d_model``: the router reads the full hidden state, ``fc1_latent_proj`` ``h -> l`` projects
        the token before the dispatch, each expert maps ``l -> expert_d_ff -> l``, the combined result is projected
        back by ``fc2_latent_proj`` ``l -> h``; the shared experts keep the full width (transformers'
        ``NemotronHMoE``). None: the experts read and write ``d_model``.
    first_k_dense, moe_layer_freq : layer ``i`` is an MoE layer when ``i >= first_k_dense`` and
        ``i % moe_layer_freq == 0`` (DeepSeek's ``first_k_dense_replace``/``moe_layer_freq``, Megatron's
        ``--moe-layer-freq``); the others use a dense FFN of width ``d_ff``.
    dense_layers : further layer indices with a dense FFN (Qwen2-MoE's ``mlp_only_layers``).
    router_bias : the router's linear layer has a bias (GPT-OSS; DeepSeek-V3's score-correction bias).
    moe_capacity_factor : expert capacity as a multiple of the balanced load (GShard/Switch token
        dropping: experts compute ``capacity_factor x`` the routed tokens, padded); None: dropless.
    moe_imbalance_frac : the busiest expert-parallel rank's load over the balanced load, minus 1, as a
        user's override (None: from the routing statistics, :func:`gpusim.model.experts.busiest_rank_load`).
        Kept here for the parallelism model; it does not change FLOPs per token.
    moe_n_groups, moe_topk_groups : node-limited (group-limited) routing: the experts form ``moe_n_groups`` groups
        and a token's top-k are chosen within its best ``moe_topk_groups`` (DeepSeek-V3's ``n_group`` 8 and
        ``topk_group`` 4, section 2.1.2: at most 4 nodes per token). None: no limit. Used by the flex (DeepEP /
        HybridEP) dispatcher: the nodes a token crosses the network to
        (:func:`gpusim.model.experts.hierarchical_dispatch_s`) and the EP ranks it is sent to (:func:`gpusim.model.experts.expected_distinct_ranks`); no effect on FLOPs.

    Multi-head latent attention (DeepSeek-V2/V3; ``kv_lora_rank > 0`` turns it on):

    q_lora_rank : rank of the query down-projection (None: a full ``h -> heads*(nope+rope)`` query).
    kv_lora_rank : rank of the joint key/value compression.
    qk_nope_head_dim, qk_rope_head_dim, v_head_dim : per-head widths of the non-rotary and rotary
        query/key parts and of the value.

    Other architecture details:

    window_layers : indices of the layers that use ``attention_window`` (None: every layer; Gemma 2 and
        GPT-OSS alternate sliding and full layers).
    attention_chunked : [issue 17] the window is a chunk (Llama 4: a query attends to the keys of its own chunk of
        ``attention_window`` tokens), not a sliding window; the step model counts the attention kernel's tiles of
        each (gpusim.model.llm.attention_tile_frac).
    activation : the FFN non-linearity (``"gelu"``, ``"gelu_tanh"``, ``"silu"``, ``"relu"``,
        ``"relu2"`` squared ReLU); None: SiLU when gated, else GELU. Elementwise: no FLOPs by convention.
    layer_norms : normalisation layers per transformer layer (2; Gemma 2 has 4, Falcon-7B's parallel
        block 1).
    qk_norm : an RMSNorm over ``d_head`` on queries and keys (Qwen3, OLMo 2): ``2 * d_head`` weights.
    attn_bias : ``"qkv"`` (biases on Q, K, V only, Qwen2) or ``"all"``/``"none"``; None follows ``bias``.
    attention_sinks : one learned sink logit per head and layer (GPT-OSS).
    glu_clamp : [issue 17] the gated FFN's inputs are clamped before the activation (GPT-OSS's ``swiglu_limit``, 7.0:
        the gate to at most the limit, the linear half to plus or minus it); None: no clamp. No FLOPs by convention;
        the step model charges the clamp's memory passes where the framework runs it as separate kernels
        (:func:`gpusim.model.experts.expert_extra_bytes`).
    vocab_multiple : the embedding and LM head are padded to a multiple of this (Megatron-LM's
        ``make_vocab_size_divisible_by``, 128 by default there; 1 = ``vocab_size`` as given).
    mtp_layers : [issue 17] multi-token prediction depth ``D`` (DeepSeek-AI, "DeepSeek-V3 Technical Report",
        arXiv:2412.19437, section 2.2; Megatron-Core ``--mtp-num-layers``, ``MultiTokenPredictionLayer`` in
        ``megatron/core/transformer/multi_token_prediction.py``; a config.json's ``num_nextn_predict_layers``): after
        the last layer, ``D`` sequential modules each predict one token further ahead. Module ``k`` normalises the
        previous depth's hidden states and the embeddings of the tokens ``k`` ahead (``hnorm``, ``enorm``: RMSNorms),
        concatenates them and projects ``2h -> h`` (``eh_proj``, no bias), runs one transformer layer of the model's
        last layer kind (:meth:`mtp_block_spec`), a final norm, and the LM head shared with the main model, with its
        own cross-entropy loss. The embedding and the head are shared (no parameters of their own); the module's
        parameters are :meth:`mtp_params`. 0: none (or trained without it).
    mtp_shared : [issue 17] the ``mtp_layers`` passes run one module's weights again (Megatron-Core
        ``TransformerConfig.mtp_use_repeated_layer``, "use a single MTP layer repeatedly": Megatron-Bridge's
        Nemotron 3 Super recipe trains ``mtp_num_layers = 2`` through its config's one module; a config.json's
        ``mtp_use_repeated_layer`` or ``mtp_share_layers``): the FLOPs, activations and losses of ``mtp_layers``
        passes, the parameters (and their gradients and optimizer state) of one module.

    [issue 17] Hybrid Mamba-Transformer models (Nemotron-H, Jamba; :mod:`gpusim.workload.ssm`):

    mixers : one character per layer, its token mixer: ``"A"`` attention, ``"M"`` a Mamba mixer, ``"-"`` none
        (None: attention in every layer). Nemotron-H's ``hybrid_override_pattern`` ``M``/``*``/``-`` maps to
        ``M``/``A``/``-``; Jamba's ``attn_layer_period/offset`` to ``A`` at ``i % period == offset``, else ``M``.
    ffns : one character per layer: ``"F"`` an FFN (dense, or routed experts where :meth:`is_moe_layer`), ``"-"``
        none (None: an FFN in every layer). Nemotron-H's blocks hold one mixer or one MLP each.
    mamba_version : 2 (Mamba-2 / SSD, Nemotron-H) or 1 (selective scan, Jamba).
    mamba_expand, mamba_state, mamba_head_dim, mamba_groups, mamba_conv, mamba_chunk, mamba_dt_rank : the inner
        width ``d = expand h``, state size ``N``, Mamba-2's head width ``P`` and ``B``/``C`` groups ``G``, the causal
        convolution's width ``K``, the SSD chunk ``Q``, Mamba-1's ``dt`` rank ``R``.
    mamba_conv_bias, mamba_proj_bias, mamba_inner_norms : biases of the convolution / projections; Jamba's RMSNorms
        on ``dt``, ``B`` and ``C``.
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
    # --- mixture of experts
    n_experts: int = 0
    top_k: int = 0
    expert_d_ff: int | None = None
    n_shared_experts: int = 0
    shared_expert_d_ff: int | None = None
    shared_expert_gate: bool = False
    first_k_dense: int = 0
    moe_layer_freq: int = 1
    dense_layers: tuple[int, ...] = ()
    router_bias: bool = False
    moe_latent_dim: int | None = None
    moe_capacity_factor: float | None = None
    moe_imbalance_frac: float | None = None
    moe_n_groups: int | None = None
    moe_topk_groups: int | None = None
    # --- multi-head latent attention
    q_lora_rank: int | None = None
    kv_lora_rank: int = 0
    qk_nope_head_dim: int = 0
    qk_rope_head_dim: int = 0
    v_head_dim: int = 0
    # --- other details
    window_layers: tuple[int, ...] | None = None
    attention_chunked: bool = False
    activation: str | None = None
    layer_norms: int = 2
    qk_norm: bool = False
    attn_bias: Literal["none", "qkv", "all"] | None = None
    attention_sinks: bool = False
    glu_clamp: float | None = None
    vocab_multiple: int = 1
    mtp_layers: int = 0
    mtp_shared: bool = False
    # --- hybrid Mamba-Transformer [issue 17]
    mixers: str | None = None
    ffns: str | None = None
    mamba_version: int = 2
    mamba_expand: float = 2.0
    mamba_state: int = 0
    mamba_head_dim: int = 64
    mamba_groups: int = 1
    mamba_conv: int = 4
    mamba_chunk: int = 256
    mamba_dt_rank: int = 0
    mamba_conv_bias: bool = True
    mamba_proj_bias: bool = False
    mamba_inner_norms: bool = False

    def __post_init__(self):
        for f in ("n_layers", "d_model", "n_heads", "seq_len"):
            v = getattr(self, f)
            if isinstance(v, bool) or int(v) != v or v < 1:
                raise ScenarioError(f"transformer {f} must be a positive integer (got {v!r})")
        if self.n_experts:
            if not 1 <= self.top_k <= self.n_experts:
                raise ScenarioError(f"top_k (experts per token) must be between 1 and n_experts={self.n_experts} "
                                    f"(got {self.top_k})")
        if self.n_kv_heads is not None and (self.n_kv_heads < 1 or self.n_heads % self.n_kv_heads):
            raise ScenarioError(f"n_kv_heads must divide n_heads={self.n_heads} (got {self.n_kv_heads})")
        w = self.attention_window
        if w is not None and (isinstance(w, bool) or not isinstance(w, (int, float)) or int(w) != w or w < 1):
            raise ScenarioError(f"attention_window (the keys a query may see) must be a positive integer or None for "
                                f"full attention (got {w!r})")
        lat = self.moe_latent_dim
        if lat is not None and (isinstance(lat, bool) or int(lat) != lat or not 1 <= lat <= self.d_model
                                or not self.n_experts):
            raise ScenarioError(f"moe_latent_dim (LatentMoE's expert width) must be an integer between 1 and d_model="
                                f"{self.d_model} on a mixture-of-experts model, or None (got {lat!r}, n_experts="
                                f"{self.n_experts})")
        if self.moe_capacity_factor is not None and not self.moe_capacity_factor > 0:
            raise ScenarioError(f"moe_capacity_factor must be > 0 or None (got {self.moe_capacity_factor})")
        d = self.mtp_layers  # [issue 17] multi-token prediction modules need an LM head to predict with
        if isinstance(d, bool) or not isinstance(d, int) or not 0 <= d <= 16:
            raise ScenarioError(f"mtp_layers (multi-token prediction depth) must be a whole number from 0 to 16 "
                                f"(got {d!r})")
        if not isinstance(self.mtp_shared, bool):
            raise ScenarioError(f"mtp_shared (one multi-token prediction module run mtp_layers times) must be True or "
                                f"False (got {self.mtp_shared!r})")
        if d and (self.head != "lm" or self.image_size):
            raise ScenarioError(f"mtp_layers {d}: multi-token prediction needs a language-model head (this model's "
                                f"head is {self.head!r}); use 0")
        if self.glu_clamp is not None and (not self.glu_clamp > 0 or not self.gated_ffn):  # [issue 17]
            raise ScenarioError(f"glu_clamp (the clamp of a gated FFN's inputs) must be > 0 on a gated FFN, or None "
                                f"(got {self.glu_clamp!r}, gated_ffn={self.gated_ffn})")
        for f in ("dense_layers", "window_layers"):
            v = getattr(self, f)
            if v is not None:
                object.__setattr__(self, f, tuple(int(i) for i in v))
        object.__setattr__(self, "adaptive_cutoffs", tuple(self.adaptive_cutoffs))
        object.__setattr__(self, "adaptive_cluster_frac", tuple(self.adaptive_cluster_frac))
        self._check_hybrid()

    def _check_hybrid(self):
        """[issue 17] The per-layer pattern of a hybrid model, with a message that says how to fix it."""
        for f, chars in (("mixers", "AM-"), ("ffns", "F-")):
            v = getattr(self, f)
            if v is None:
                continue
            if len(v) != self.n_layers or set(v) - set(chars):
                raise ScenarioError(f"{f} must hold one of {', '.join(repr(c) for c in chars)} per layer, "
                                    f"{self.n_layers} characters in all (got {v!r}, {len(v)} characters)")
        if self.n_mamba_layers:
            if self.mamba_version not in (1, 2):
                raise ScenarioError(f"mamba_version must be 1 (Mamba) or 2 (Mamba-2) (got {self.mamba_version!r})")
            if self.mamba_state < 1 or self.mamba_conv < 1 or not self.mamba_expand > 0:
                raise ScenarioError(f"a Mamba mixer needs a state size >= 1, a convolution width >= 1 and an "
                                    f"expansion > 0 (got state {self.mamba_state}, conv {self.mamba_conv}, expand "
                                    f"{self.mamba_expand})")
            if self.mamba_version == 2:
                d = self.mamba_d_inner
                if self.mamba_head_dim < 1 or d % self.mamba_head_dim or self.mamba_groups < 1 \
                        or self.mamba_heads % self.mamba_groups or self.mamba_chunk < 1:
                    raise ScenarioError(f"a Mamba-2 mixer's inner width {d:g} must split into heads of "
                                        f"mamba_head_dim={self.mamba_head_dim}, the heads into n_groups="
                                        f"{self.mamba_groups} groups, with a chunk_size >= 1 (got chunk "
                                        f"{self.mamba_chunk})")
            elif self.mamba_dt_rank < 1:
                raise ScenarioError(f"a Mamba-1 mixer needs mamba_dt_rank >= 1 (got {self.mamba_dt_rank})")


    # --- derived widths ----------------------------------------------------------------------------
    @property
    def q_dim(self) -> float:
        """Query width summed over heads (MLA: heads x (nope + rope))."""
        if self.mla:
            return float(self.n_heads * (self.qk_nope_head_dim + self.qk_rope_head_dim))
        return float(self.n_heads * self.d_head) if self.d_head else float(self.d_model)

    @property
    def kv_dim(self) -> float:
        """Key (= value) width summed over the key/value heads (MLA: the keys expanded per head)."""
        if self.mla:
            return self.q_dim
        return self.q_dim * (self.n_kv_heads or self.n_heads) / self.n_heads

    @property
    def v_dim(self) -> float:
        """Value (= attention output) width summed over heads."""
        if self.mla:
            return float(self.n_heads * self.v_head_dim)
        return self.q_dim

    @property
    def ff_dim(self) -> float:
        return float(self.d_ff or 4 * self.d_model)

    @property
    def mla(self) -> bool:
        """Multi-head latent attention (DeepSeek-V2/V3)."""
        return self.kv_lora_rank > 0

    @property
    def moe(self) -> bool:
        return self.n_experts > 0

    @property
    def expert_ff_dim(self) -> float:
        return float(self.expert_d_ff or self.ff_dim)

    @property
    def expert_bias(self) -> bool:
        """[issue 17] The routed experts' linear layers carry biases (GPT-OSS: ``mlp_bias``)."""
        return self.moe and bool(self.bias if self.mlp_bias is None else self.mlp_bias)

    @property
    def shared_ff_dim(self) -> float:
        """Width of all shared experts together (they run on every token)."""
        return float(self.n_shared_experts * (self.shared_expert_d_ff or self.expert_ff_dim))

    @property
    def padded_vocab(self) -> float:
        m = max(1, int(self.vocab_multiple))
        return float(math.ceil(self.vocab_size / m) * m)

    @property
    def activation_kind(self) -> str:
        return self.activation or ("silu" if self.gated_ffn else "gelu")

    @functools.cached_property
    def _dense_set(self) -> frozenset[int]:
        return frozenset(self.dense_layers)

    @functools.cached_property
    def _window_set(self) -> frozenset[int] | None:
        return None if self.window_layers is None else frozenset(self.window_layers)

    def is_moe_layer(self, i: int) -> bool:
        """Layer ``i`` (0-based) has routed experts."""
        return (self.moe and i >= self.first_k_dense and i % max(1, self.moe_layer_freq) == 0
                and i not in self._dense_set and self.has_ffn(i))

    # --- hybrid Mamba-Transformer [issue 17] ---------------------------------------------------------
    @property
    def hybrid(self) -> bool:
        """Layers differ in kind (a mixer or FFN pattern is given)."""
        return self.mixers is not None or self.ffns is not None

    def has_ffn(self, i: int) -> bool:
        return self.ffns is None or self.ffns[i] == "F"

    def mixer(self, i: int) -> str:
        return "A" if self.mixers is None else self.mixers[i]

    @property
    def n_attn_layers(self) -> int:
        return self.n_layers if self.mixers is None else self.mixers.count("A")

    @property
    def n_mamba_layers(self) -> int:
        return 0 if self.mixers is None else self.mixers.count("M")

    @property
    def n_ffn_layers(self) -> int:
        return self.n_layers if self.ffns is None else self.ffns.count("F")

    @property
    def mamba_d_inner(self) -> float:
        return float(self.mamba_expand * self.d_model)

    @property
    def mamba_heads(self) -> float:
        """Mamba-2 heads ``d / P`` (Mamba-1: its ``d`` channels, each a head of one)."""
        return self.mamba_d_inner / self.mamba_head_dim if self.mamba_version == 2 else self.mamba_d_inner

    def mamba_params(self) -> float:
        """Parameters of one Mamba mixer (:mod:`gpusim.workload.ssm`)."""
        from gpusim.workload import ssm
        h = self.d_model
        if self.mamba_version == 2:
            return float(ssm.mamba2_params(h, self.mamba_expand, self.mamba_head_dim, self.mamba_state,
                                           self.mamba_groups, self.mamba_conv))
        return float(ssm.mamba1_params(h, self.mamba_expand, self.mamba_state, self.mamba_conv, self.mamba_dt_rank,
                                       conv_bias=self.mamba_conv_bias, proj_bias=self.mamba_proj_bias,
                                       inner_norms=self.mamba_inner_norms))

    def mamba_fwd_flop_per_token(self) -> float:
        """Forward FLOPs per token of one Mamba mixer (:mod:`gpusim.workload.ssm`)."""
        from gpusim.workload import ssm
        h = self.d_model
        if self.mamba_version == 2:
            return float(ssm.mamba2_fwd_flop_per_token(h, self.mamba_expand, self.mamba_head_dim, self.mamba_state,
                                                       self.mamba_groups, self.mamba_conv, self.mamba_chunk))
        return float(ssm.mamba1_fwd_flop_per_token(h, self.mamba_expand, self.mamba_state, self.mamba_conv,
                                                   self.mamba_dt_rank))

    def mean_layer_params(self) -> float:
        """Parameters of the model's layers over their number (the layout model's average layer; dense experts
        counted as :meth:`layer_params` counts them)."""
        if not self.hybrid:
            return self.layer_params()
        total = self.n_attn_layers * self.attn_params() + self.n_mamba_layers * self.mamba_params() \
            + self.n_ffn_layers * self.mlp_params() + self.n_layers * self.layer_norms * self._norm_params()
        return total / self.n_layers

    def is_window_layer(self, i: int) -> bool:
        """Layer ``i`` uses the sliding window ``attention_window``."""
        return bool(self.attention_window) and (self._window_set is None or i in self._window_set)

    @functools.cached_property
    def n_moe_layers(self) -> int:
        """Layers with routed experts (counted, not enumerated: a config may claim a million layers)."""
        if not self.moe:
            return 0
        if self.ffns is not None:   # [issue 17] a hybrid's pattern has one character per layer: enumerate
            return sum(1 for i in range(self.n_layers) if self.is_moe_layer(i))
        L, k, f = self.n_layers, min(self.first_k_dense, self.n_layers), max(1, self.moe_layer_freq)
        multiples = (L - 1) // f - (k - 1) // f if k > 0 else (L - 1) // f + 1   # i in [k, L) with i % f == 0
        return multiples - sum(1 for d in self._dense_set if k <= d < L and d % f == 0)

    @functools.cached_property
    def n_window_layers(self) -> int:
        if not self.attention_window:
            return 0
        if self._window_set is None:
            return self.n_layers
        return sum(1 for i in self._window_set if 0 <= i < self.n_layers)

    @property
    def n_window_attn_layers(self) -> int:
        """[issue 17] Attention layers that use the window (a hybrid's window list may name its other layers)."""
        return min(self.n_window_layers, self.n_attn_layers)

    # --- parameters --------------------------------------------------------------------------------
    def attn_params(self) -> float:
        """Parameters of one layer's attention (Q, K, V, output; MLA's low-rank projections and their
        norms; Transformer-XL's r_net; Qwen3's q/k norms; GPT-OSS's sinks)."""
        h, qd, kvd = float(self.d_model), self.q_dim, self.kv_dim
        bias = self.attn_bias or ("all" if self.bias else "none")
        if self.mla:
            ql, kvl, rope = self.q_lora_rank, float(self.kv_lora_rank), float(self.qk_rope_head_dim)
            q = (h * ql + ql + ql * qd) if ql else h * qd
            attn = q + h * (kvl + rope) + kvl + kvl * (self.n_heads * (self.qk_nope_head_dim + self.v_head_dim)) \
                + self.v_dim * h
        else:
            attn = h * qd + 2 * h * kvd + qd * h
        if bias == "all":
            attn += qd + 2 * kvd + h
        elif bias == "qkv":
            attn += qd + 2 * kvd
        if self.qk_norm:
            attn += 2.0 * (self.d_head or self.d_model // self.n_heads)
        if self.attention_sinks:
            attn += float(self.n_heads)
        return attn + (h * qd if self.rel_pos else 0.0)

    def _ffn_params(self, f: float, h: float | None = None) -> float:
        """An FFN of width ``f`` reading and writing ``h`` (default ``d_model``)."""
        h = float(self.d_model if h is None else h)
        bias = self.bias if self.mlp_bias is None else self.mlp_bias
        if self.gated_ffn:
            return 3 * h * f + ((2 * f + h) if bias else 0.0)
        return 2 * h * f + ((f + h) if bias else 0.0)

    def mlp_params(self) -> float:
        """Parameters of one layer's dense FFN."""
        return self._ffn_params(self.ff_dim)

    def router_params(self) -> float:
        return float(self.d_model * self.n_experts + (self.n_experts if self.router_bias else 0))

    def shared_params(self) -> float:
        """Shared experts (and their gate) of one MoE layer."""
        if not self.n_shared_experts:
            return 0.0
        return self._ffn_params(self.shared_ff_dim) + (float(self.d_model) if self.shared_expert_gate else 0.0)

    @property
    def expert_io_dim(self) -> float:
        """[stop 48] The width a routed expert reads and writes: the LatentMoE latent, else ``d_model``."""
        return float(self.moe_latent_dim or self.d_model)

    def expert_params(self) -> float:
        """One routed expert (``expert_io_dim -> expert_d_ff -> expert_io_dim``)."""
        return self._ffn_params(self.expert_ff_dim, self.expert_io_dim)

    def latent_proj_params(self) -> float:
        """[stop 48] LatentMoE's ``fc1_latent_proj`` and ``fc2_latent_proj`` of one MoE layer (0 without a latent)."""
        if not self.moe_latent_dim:
            return 0.0
        bias = self.bias if self.mlp_bias is None else self.mlp_bias
        h, lat = float(self.d_model), float(self.moe_latent_dim)
        return 2 * h * lat + ((lat + h) if bias else 0.0)

    def moe_params(self, active: bool = False) -> float:
        """One MoE layer's FFN: router + routed experts (all, or the ``top_k`` a token uses) + shared + LatentMoE's
        projections."""
        n = self.top_k if active else self.n_experts
        return self.router_params() + n * self.expert_params() + self.shared_params() + self.latent_proj_params()

    def layer_params(self, i: int | None = None, active: bool = False) -> float:
        """Parameters of one transformer layer (attention, FFN or experts, norms); ``i`` picks the layer
        (default: a dense layer)."""
        ffn = self.moe_params(active) if i is not None and self.is_moe_layer(i) else self.mlp_params()
        if i is not None and self.hybrid:   # [issue 17] a hybrid layer holds its own mixer and FFN (or none)
            mix = {"A": self.attn_params(), "M": self.mamba_params(), "-": 0.0}[self.mixer(i)]
            return mix + (ffn if self.has_ffn(i) else 0.0) + self.layer_norms * self._norm_params()
        return self.attn_params() + ffn + self.layer_norms * self._norm_params()

    def _norm_params(self) -> float:
        return (2.0 if self.norm == "layernorm" else 1.0) * self.d_model

    # --- multi-token prediction [issue 17] -----------------------------------------------------------
    def mtp_block_spec(self) -> TransformerSpec:
        """The transformer layer of one multi-token prediction module, as a one-layer model of this one's shapes:
        Megatron-Core builds it from the decoder's last layer spec (``get_mtp_layer_spec`` over the last layer's
        ``TransformerLayer``: DeepSeek-V3's is an MoE layer with MLA); a hybrid model's is an attention layer with
        the FFN of its routed-expert layers where it has them (Megatron-Bridge's Nemotron-H MTP pattern ``*E``), else
        with its dense FFN. Its embedding and LM head stand for the shared ones the module uses."""
        last = self.n_layers - 1
        if self.hybrid:
            moe, win = self.n_moe_layers > 0, False
        else:
            moe, win = self.is_moe_layer(last), self.is_window_layer(last)
        return dataclasses.replace(self, n_layers=1, mixers=None, ffns=None, first_k_dense=0 if moe else 1,
                                   moe_layer_freq=1, dense_layers=(), window_layers=None if win else (),
                                   mtp_layers=0, mtp_shared=False, extra_params=0.0, final_norm=True)

    def mtp_params(self, active: bool = False) -> float:
        """Parameters of the multi-token prediction modules (all ``mtp_layers`` of them): each one transformer layer
        (:meth:`mtp_block_spec`; its routed experts all, or the ``top_k`` a token uses), ``eh_proj`` ``2h x h`` and
        three norms (``enorm``, ``hnorm``, ``final_layernorm``); the embedding and LM head are the model's. With
        ``mtp_shared`` the passes share one module's (:meth:`mtp_param_modules`)."""
        if not self.mtp_layers:
            return 0.0
        block = self.mtp_block_spec()
        h = float(self.d_model)
        return self.mtp_param_modules * (block.layer_params(0, active) + 2.0 * h * h + 3.0 * self._norm_params())

    @property
    def mtp_param_modules(self) -> int:
        """[issue 17] Multi-token prediction modules with weights of their own: ``mtp_layers``, or one where the
        passes share it (``mtp_shared``)."""
        return min(self.mtp_layers, 1) if self.mtp_shared else self.mtp_layers

    def _adaptive_clusters(self) -> list[tuple[float, float]]:
        """(size, width) of each adaptive-softmax cluster, head first."""
        ends = [0, *self.adaptive_cutoffs, self.vocab_size]
        return [(float(ends[i + 1] - ends[i]), float(self.d_model // (self.adaptive_div_val ** i)))
                for i in range(len(ends) - 1)]


@dataclass(frozen=True)
class EntryInfo:
    """Catalogue metadata of one entry."""

    id: str
    name: str
    family: str
    sources: tuple[str, ...]
    notes: str = ""
    pipeline: Callable[[float], dict[str, float]] | None = None  # tokens -> data pipeline fields
    assumptions: tuple[str, ...] = ()


def _ffn_costs(tokens: float, h: float, f: float, gated: bool) -> tuple[float, float, int, float, float]:
    """One FFN on ``tokens`` tokens: (FLOPs, GEMM activation bytes, activation kernels, activation
    bytes, bytes kept for backward)."""
    E = ACT_BYTES
    n_mlp = 3 if gated else 2
    flop = 2 * tokens * h * f * n_mlp
    mm_b = E * ((2 * tokens * h + 3 * tokens * f + tokens * h) if gated else (2 * tokens * h + 2 * tokens * f))
    ew_k = 2 if gated else 1
    ew_b = E * (2 * tokens * f + 3 * tokens * f) if gated else E * 2 * tokens * f
    keep = E * tokens * h + (4 * E * tokens * f if gated else 2 * E * tokens * f)
    return flop, mm_b, ew_k, ew_b, keep


def build_transformer(info: EntryInfo, spec: TransformerSpec, seq_len: int | None = None) -> Workload:
    """Params, FLOPs, layer groups and activation memory of a transformer (see the module docstring).

    FLOPs per sample (forward, s queries, k keys per query, L layers):
    projections ``2 s h (q + 2 kv) + 2 s q h``, attention scores ``2 * 2 s k q`` (QK^T and AV; a third
    for Transformer-XL's relative term), FFN ``2 s h f * (2 | 3)``, the head ``2 s h V``. An MoE layer
    adds the router ``2 s h E`` and runs ``top_k`` experts of width ``f_e`` per token (times the
    capacity factor when tokens are padded to capacity) plus the shared experts. Every matrix product
    is counted in full (no causal halving), the convention of Chowdhery et al. 2022 (App. B) and of
    ``torch.utils.flop_counter``. Layers differ (dense/MoE FFN, sliding/full attention): each kind of
    layer is computed once and multiplied by how many there are.
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
    qd, kvd, vd, f, V = spec.q_dim, spec.kv_dim, spec.v_dim, spec.ff_dim, spec.padded_vocab
    mem = float(spec.mem_len)
    sk = s + mem                                     # keys (and values) per query
    attn_drop = spec.dropout if spec.attn_dropout is None else spec.attn_dropout
    n_score_mm = 3 if spec.rel_pos else 2
    qkv_tokens = sk if spec.rel_pos else s           # Transformer-XL projects memory and segment together
    norm_p = spec._norm_params()
    E = ACT_BYTES
    L_moe = spec.n_moe_layers
    L_dense = spec.n_ffn_layers - L_moe          # [issue 17] a hybrid's layers without an FFN have neither
    L_attn, L_mamba = spec.n_attn_layers, spec.n_mamba_layers
    L_win = spec.n_window_attn_layers
    # (layers, keys per query) of the full and the sliding-window layers
    attn_classes = [(n, k) for n, k in ((L_attn - L_win, sk), (L_win, min(sk, float(spec.attention_window or sk))))
                    if n > 0]

    # --- parameters --------------------------------------------------------------------------------
    attn_p = spec.attn_params()
    layer_norm_p = spec.layer_norms * norm_p
    if spec.hybrid:   # [issue 17] each kind of mixer and FFN counted by its own layers
        layers_p = L_attn * attn_p + L_mamba * spec.mamba_params() + L_dense * spec.mlp_params() + L * layer_norm_p
        layers_active_p = layers_p
        if L_moe:
            layers_p += L_moe * spec.moe_params()
            layers_active_p += L_moe * spec.moe_params(active=True)
    else:
        layers_p = L_dense * (attn_p + spec.mlp_params() + layer_norm_p)
        layers_active_p = layers_p
        if L_moe:
            layers_p += L_moe * (attn_p + spec.moe_params() + layer_norm_p)
            layers_active_p += L_moe * (attn_p + spec.moe_params(active=True) + layer_norm_p)
    nonlayer_p = spec.extra_params + (norm_p if spec.final_norm else 0.0)
    head_flop_per_token = 0.0
    head_weight_bytes = 0.0
    g = Groups()

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

    # --- attention of the L layers -----------------------------------------------------------------
    if spec.mla:
        ql, kvl = float(spec.q_lora_rank or 0), float(spec.kv_lora_rank)
        rope = float(spec.qk_rope_head_dim)
        kv_b = kvl * a * (spec.qk_nope_head_dim + spec.v_head_dim)
        proj_w = ((h * ql + ql * qd) if ql else h * qd) + h * (kvl + rope) + kv_b + vd * h
        n_proj = (2 if ql else 1) + 2 + 1
        proj_bytes = E * s * ((h + ql + ql + qd) if ql else (h + qd)) + E * s * (h + kvl + rope + kvl) \
            + E * s * (kvl + a * (spec.qk_nope_head_dim + spec.v_head_dim)) + E * s * (vd + h)
        g.add("matmul", "attention projections", L_attn * n_proj, L_attn * 2 * s * proj_w, L_attn * proj_bytes,
              L_attn * WEIGHT_BYTES * attn_p)
        g.add("norm", "norms", L_attn * (2 if ql else 1), 0.0, L_attn * E * 2 * s * (ql + kvl),
              L_attn * WEIGHT_BYTES * (ql + kvl))
    else:
        n_qkv = 1 if spec.fused_qkv else 3
        g.add("matmul", "attention projections", L_attn * (n_qkv + 1 + (1 if spec.rel_pos else 0)),
              L_attn * (2 * qkv_tokens * h * (qd + 2 * kvd) + 2 * s * qd * h),
              L_attn * E * (n_qkv * qkv_tokens * h + qkv_tokens * (qd + 2 * kvd) + s * qd + s * h),
              L_attn * WEIGHT_BYTES * attn_p)
    keep_mamba = 0.0
    if L_mamba:   # [issue 17] the Mamba mixers: projections, causal conv1d, the scan, the gate (gpusim.workload.ssm)
        keep_mamba = _mamba_groups(g, spec, s, L_mamba)
    for n_l, keys in attn_classes:
        # QK^T over the query/key width, AV over the value width (a third score matmul for Transformer-XL)
        att_flop = n_l * 2 * s * keys * (qd * (n_score_mm - 1) + vd)
        if spec.flash_attention:
            g.add("attention", "attention (fused)", n_l, att_flop,
                  n_l * (E * (s * qd + s * vd + sk * kvd + sk * (vd if spec.mla else kvd)) + LOSS_BYTES * a * s))
        else:
            scores = a * s * keys
            g.add("attention", "attention scores and context", n_l * n_score_mm, att_flop,
                  n_l * E * ((n_score_mm - 1) * (s * qd + sk * qd + scores) + (scores + sk * qd + s * qd)))
            n_sm = 3 + (1 if attn_drop else 0) + (2 if spec.rel_pos else 0)   # scale, mask, softmax (+dropout, +add/shift)
            g.add("elementwise", "attention softmax, mask, dropout", n_l * n_sm, 0.0,
                  n_l * (E * 2 * scores * n_sm + (MASK_BYTES * scores if attn_drop else 0.0)))

    # --- FFNs: dense layers, then MoE layers ---------------------------------------------------------
    n_mlp = 3 if spec.gated_ffn else 2
    ffn_ew_k = 0.0
    ffn_ew_b = 0.0
    keep_dense = keep_moe = 0.0
    if L_dense:
        flop, mm_b, ew_k, ew_b, keep_dense = _ffn_costs(s, h, f, spec.gated_ffn)
        g.add("matmul", "mlp", L_dense * n_mlp, L_dense * flop, L_dense * mm_b, L_dense * WEIGHT_BYTES * spec.mlp_params())
        ffn_ew_k += L_dense * ew_k
        ffn_ew_b += L_dense * ew_b
    if L_moe:
        cf = spec.moe_capacity_factor or 1.0
        routed = s * spec.top_k * cf                                  # token-expert pairs computed
        n_e = float(spec.n_experts)
        g.add("matmul", "router", L_moe, L_moe * 2 * s * h * n_e, L_moe * E * (s * h + s * n_e),
              L_moe * WEIGHT_BYTES * spec.router_params())
        # softmax/sigmoid + top-k over the router logits; permute tokens to experts and back (Megatron-Core's
        # alltoall dispatcher: permute, sort, unpermute + weighted combine)
        hx = spec.expert_io_dim  # [stop 48] LatentMoE: the tokens travel and the experts work at the latent width
        g.add("elementwise", "moe routing and permutation", L_moe * 5, 0.0,
              L_moe * (E * 4 * s * n_e + E * 2 * 2 * routed * hx + E * routed * hx))
        e_flop, e_mm_b, e_ew_k, e_ew_b, e_keep = _ffn_costs(routed, hx, spec.expert_ff_dim, spec.gated_ffn)
        if spec.moe_latent_dim:  # fc1_latent_proj h -> l before the dispatch, fc2_latent_proj l -> h after the combine
            lat = float(spec.moe_latent_dim)
            g.add("matmul", "latent projections", L_moe * 2, L_moe * 2 * 2 * s * h * lat,
                  L_moe * E * 2 * (s * h + s * lat), L_moe * WEIGHT_BYTES * spec.latent_proj_params())
            e_keep += E * s * lat                                     # fc2_latent_proj's input
        # grouped GEMM: one kernel per expert matrix for all experts (Megatron --moe-grouped-gemm)
        g.add("matmul", "experts", L_moe * n_mlp, L_moe * e_flop, L_moe * e_mm_b,
              L_moe * WEIGHT_BYTES * spec.n_experts * spec.expert_params())
        ffn_ew_k += L_moe * e_ew_k
        ffn_ew_b += L_moe * e_ew_b
        keep_moe = e_keep + E * s * n_e + INDEX_BYTES * s * spec.top_k   # + router logits, top-k indices (int64)
        if spec.n_shared_experts:
            s_flop, s_mm_b, s_ew_k, s_ew_b, s_keep = _ffn_costs(s, h, spec.shared_ff_dim, spec.gated_ffn)
            g.add("matmul", "shared experts", L_moe * n_mlp, L_moe * s_flop, L_moe * s_mm_b,
                  L_moe * WEIGHT_BYTES * spec.shared_params())
            ffn_ew_k += L_moe * s_ew_k
            ffn_ew_b += L_moe * s_ew_b
            keep_moe += s_keep - E * s * h                             # the shared expert reads the same input
    ew_k = 2 + (2 if spec.dropout else 0) + (10 if spec.rope else 0) + (0 if spec.flash_attention else 1)
    ew_b = 2 * E * 3 * s * h \
        + (2 * (E * 2 * s * h + MASK_BYTES * s * h) if spec.dropout else 0.0) \
        + (E * 5 * 2 * (s * qd + s * kvd) if spec.rope else 0.0) + (0.0 if spec.flash_attention else E * 2 * s * qd)
    if spec.hybrid:   # [issue 17] one residual add (and dropout) per mixer or FFN; rotary and softmax on attention
        blocks = (L_attn + L_mamba + spec.n_ffn_layers) / 2.0
        rope_k, rope_b = (10 if spec.rope else 0), (E * 5 * 2 * (s * qd + s * kvd) if spec.rope else 0.0)
        sm_k, sm_b = (0 if spec.flash_attention else 1), (0.0 if spec.flash_attention else E * 2 * s * qd)
        res_k, res_b = ew_k - rope_k - sm_k, ew_b - rope_b - sm_b
        g.add("elementwise", "activation, residual, dropout", blocks * res_k + L_attn * (rope_k + sm_k) + ffn_ew_k,
              0.0, blocks * res_b + L_attn * (rope_b + sm_b) + ffn_ew_b)
    else:
        g.add("elementwise", "activation, residual, dropout", L * ew_k + ffn_ew_k, 0.0, L * ew_b + ffn_ew_b)
    n_norm = spec.layer_norms * L + (1 if spec.final_norm else 0)
    g.add("norm", "norms", n_norm, 0.0, n_norm * E * 2 * s * h, n_norm * WEIGHT_BYTES * norm_p)
    if spec.qk_norm:
        g.add("norm", "norms", 2 * L_attn, 0.0, L_attn * E * 2 * s * (qd + kvd), L_attn * WEIGHT_BYTES * 2 * (qd / a))

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
    # --- [issue 17] multi-token prediction: D modules after the last layer (TransformerSpec.mtp_layers) -----------
    mtp = None
    if spec.mtp_layers:
        D = float(spec.mtp_layers)
        # one module = the one-layer model of its transformer layer (its embedding lookup and LM head + loss stand
        # for the shared ones the module runs again), plus eh_proj 2h -> h on the concatenation and hnorm / enorm
        mtp = build_transformer(info, spec.mtp_block_spec(), int(s))
        for lg in mtp.layers:
            g.add(lg.kind, MTP_GROUP, D * lg.count, D * lg.fwd_flop_per_sample, D * lg.fwd_bytes_per_sample,
                  D * lg.weight_bytes)  # (shared passes, mtp_shared, read the one module's weights each time)
        g.add("matmul", MTP_GROUP, D, D * 2 * s * 2 * h * h, D * E * (s * 2 * h + s * h), D * WEIGHT_BYTES * 2 * h * h)
        g.add("norm", MTP_GROUP, 2 * D, 0.0, D * E * 2 * 2 * s * h, D * WEIGHT_BYTES * 2 * norm_p)
        g.add("elementwise", MTP_GROUP, D, 0.0, D * E * 2 * 2 * s * h)  # the concatenation [enorm(e), hnorm(h)]
    params = layers_p + nonlayer_p + spec.mtp_params()
    active_params = layers_active_p + nonlayer_p + spec.mtp_params(active=True) if L_moe else None
    fwd_flop = g.total_flop()

    # --- activation memory (Korthikanti et al. 2022, generalised term by term) ----------------------
    def attn_keep(keys: float) -> float:
        b = spec.layer_norms * E * s * h                         # inputs of the norms (4sh for two)
        b += E * qkv_tokens * h                                  # QKV input (norm output)
        if spec.mla:
            ql_, kvl_ = float(spec.q_lora_rank or 0), float(spec.kv_lora_rank)
            b += E * 2 * s * (ql_ + kvl_)                        # latent q and kv: norm inputs and outputs
        if spec.flash_attention:
            b += E * (s * qd + 2 * sk * kvd + s * vd) + LOSS_BYTES * a * s   # Q, K, V, O, logsumexp
        else:
            b += E * (s * qd + 2 * sk * qd + s * qd)            # Q, K, V (expanded to a heads), context
            b += E * a * s * keys * (n_score_mm - 1)            # softmax output (+ TXL's biased query ~ 0)
            if attn_drop:
                b += (MASK_BYTES + E) * a * s * keys            # dropout mask and dropped probabilities
            if spec.rel_pos:
                b += E * s * qd                                 # second biased query (r_r_bias)
        if spec.qk_norm:
            b += E * s * (qd + kvd)                             # q/k norm inputs
        if spec.dropout:
            b += 2 * MASK_BYTES * s * h                         # residual dropout masks
        return b

    ffn_classes = [(n, kp) for n, kp in ((L_dense, keep_dense), (L_moe, keep_moe)) if n > 0]
    act_layers = 0.0
    act_layer = 0.0                                             # the largest layer (the checkpointing transient)
    for n_l, keys in attn_classes:
        act_layers += n_l * attn_keep(keys)
    for n_l, kp in ffn_classes:
        act_layers += n_l * kp
    if spec.hybrid:   # [issue 17] Mamba mixers' state; the norm inputs of the layers without attention
        act_layers += L_mamba * keep_mamba + (L - L_attn) * spec.layer_norms * E * s * h
        act_layer = max([attn_keep(k) for _, k in attn_classes] + [keep_mamba]) \
            + max([kp for _, kp in ffn_classes] + [0.0])
    else:
        act_layer = max(attn_keep(k) for _, k in attn_classes) + max(kp for _, kp in ffn_classes)
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
    act = act_layers + act_other
    act_ckpt = L * E * s * h + act_other
    if mtp is not None:  # [issue 17] each module keeps its layer's, its head's and its loss's bytes, and its inputs
        D = float(spec.mtp_layers)
        act += D * (mtp.act_bytes_per_sample + E * s * (2 * h + 2 * h))
        act_ckpt += D * mtp.act_ckpt_bytes_per_sample
        act_layer = max(act_layer, mtp.act_block_bytes_per_sample)

    tokens = 1.0 if vit else s
    pipe = info.pipeline(s) if info.pipeline else text_pipeline(s, spec.vocab_size, 2)
    rebuild = None if vit else functools.partial(build_transformer, info, spec)
    return Workload(
        id=info.id, name=info.name, family=info.family, sample_unit="image" if vit else "sequence",
        tokens_per_sample=tokens, params=params, fwd_flop_per_sample=fwd_flop,
        act_bytes_per_sample=act, act_ckpt_bytes_per_sample=act_ckpt, act_block_bytes_per_sample=act_layer,
        layers=g.build(),
        sources=info.sources, seq_len_default=None if vit else spec.seq_len, notes=info.notes,
        _rebuild=rebuild, transformer=spec, active_params=active_params, assumptions=info.assumptions, **pipe)


def _mamba_groups(g: Groups, spec: TransformerSpec, s: float, n: int) -> float:
    """[issue 17] Add ``n`` Mamba mixers on ``s`` tokens to ``g``; returns the bytes one keeps for the backward pass.

    Mamba-2 (Dao & Gu 2024; :mod:`gpusim.workload.ssm`): in_proj ``h -> 2 d + 2 G N + nh`` and out_proj ``d -> h`` as
    GEMMs, the depthwise causal conv1d over ``d + 2 G N`` channels, the chunked scan (SSD) by its FLOPs and the bytes
    it reads and writes, the gated RMSNorm. Mamba-1 (Gu & Dao 2023): in_proj ``h -> 2 d``, x_proj ``d -> R + 2 N``,
    dt_proj ``R -> d``, out_proj, the conv over ``d`` channels and the selective scan (``9 d N`` FLOPs per token).
    Kept for the backward pass: the in_proj input and output, the conv output, the scan output and the gate's
    input, the out_proj input (16-bit); not Mamba-2's chunk states, which the fused kernel (mamba_ssm's
    ``mamba_chunk_scan_combined``) recomputes in the backward pass (:mod:`gpusim.model.hybrid`).
    """
    from gpusim.workload import ssm
    E = ACT_BYTES
    h, d, N = float(spec.d_model), spec.mamba_d_inner, float(spec.mamba_state)
    wp = spec.mamba_params()
    if spec.mamba_version == 2:
        G, nh = float(spec.mamba_groups), spec.mamba_heads
        _, _, width = (float(v) for v in ssm.mamba2_dims(h, spec.mamba_expand, spec.mamba_head_dim, N, G))
        conv_ch = d + 2 * G * N
        proj_flop = 2 * s * h * width + 2 * s * d * h
        g.add("matmul", "mamba projections", 2 * n, n * proj_flop, n * E * s * (h + width + d + h), n * WEIGHT_BYTES * wp)
        scan_bytes = E * s * (conv_ch + nh + 2 * d)       # read x, B, C, dt; write y (and the D skip)
        keep = E * s * (h + width + conv_ch + 3 * d)
    else:
        R = float(spec.mamba_dt_rank)
        conv_ch = d
        proj_flop = 2 * s * (2 * d * h + d * (R + 2 * N) + R * d + d * h)
        g.add("matmul", "mamba projections", 4 * n, n * proj_flop,
              n * E * s * (h + 2 * d + d + (R + 2 * N) + R + d + d + h), n * WEIGHT_BYTES * wp)
        scan_bytes = E * s * (3 * d + 2 * N + d)          # read x, dt, z, B, C; write y
        keep = E * s * (h + 2 * d + d + (R + 2 * N) + 3 * d)
    g.add("conv", "mamba causal conv1d", n, n * 2 * s * spec.mamba_conv * conv_ch, n * E * 2 * s * conv_ch,
          n * WEIGHT_BYTES * conv_ch * (spec.mamba_conv + 1))
    scan_flop = s * (spec.mamba_fwd_flop_per_token() - proj_flop / s - 2 * spec.mamba_conv * conv_ch)
    g.add("attention", "mamba selective scan", n, n * scan_flop, n * scan_bytes, 0.0)
    g.add("elementwise", "mamba gate and norm", 2 * n, 0.0, n * E * s * 5 * d)
    return keep


def _cluster_fracs(spec: TransformerSpec) -> tuple[float, ...]:
    """Fraction of tokens whose target falls in each adaptive-softmax cluster, head first."""
    tails = tuple(spec.adaptive_cluster_frac)
    return (1.0 - sum(tails), *tails)


_Info = EntryInfo  # the old private name, for code written before it became public
