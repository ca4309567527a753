"""``Workload.from_config``: a transformer from a Hugging Face style ``config.json``.

Each supported ``model_type`` has a small reader that maps the config's fields (named as in the
``transformers`` configuration class of that architecture) onto :class:`TransformerSpec`. A field the
architecture needs and the file lacks is either an error naming the field, or, where ``transformers``
itself has a default, that default, written into the workload's ``assumptions`` so that
``gpusim models show`` says what was assumed. Every number is type-checked: a string, a negative or
a fractional size is an error naming the field.

What every reader assumes (also listed in ``assumptions``): training runs with a fused (flash)
attention kernel, as PyTorch SDPA / FlashAttention do; the sequence length is ``--seq-len``, else
``max_position_embeddings`` capped at :data:`DEFAULT_SEQ_CAP`; dropout is on when the config's
dropout probabilities are above 0.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpusim.errors import ScenarioError
from gpusim.workload.core import Workload, slug
from gpusim.workload.transformer import TransformerSpec, EntryInfo, build_transformer

#: Default tokens per sequence when ``--seq-len`` is not given: the model's context, at most this
#: (long-context models pre-train most tokens at 4k-8k: Llama 3 herd paper Sec. 3.4.1, 8,192; 4,096 is
#: the common pre-training length of Llama 2, Mistral and the Megatron/NeMo recipes).
DEFAULT_SEQ_CAP = 4096

_MISSING = object()

#: Plausibility limits on config integers: sizes fit the int32 indices of torch and transformers; no
#: published transformer has more than a few hundred layers (the largest in the catalogue: 128).
MAX_SIZE = 2**31 - 1
MAX_LAYERS = 10_000
_LAYER_FIELDS = frozenset({"num_hidden_layers", "n_layer", "n_layers", "num_layers"})


class _Cfg:
    """Typed access to a config dict; every default taken is recorded as an assumption."""

    def __init__(self, raw: dict[str, Any], where: str, model_type: str):
        self.raw, self.where, self.model_type = raw, where, model_type
        self.assumptions: list[str] = []

    def _fail(self, name: str, what: str) -> ScenarioError:
        return ScenarioError(f"{self.where}: field {name!r} {what} (model_type {self.model_type!r})")

    def has(self, name: str) -> bool:
        return self.raw.get(name) is not None

    def get(self, name: str, default: Any = _MISSING, why: str = "") -> Any:
        if self.raw.get(name) is not None:
            return self.raw[name]
        if default is _MISSING:
            raise ScenarioError(f"{self.where}: missing field {name!r}, which a {self.model_type!r} model needs "
                                f"(add it to the config)")
        self.assumptions.append(f"{name} absent: {default!r} assumed" + (f" ({why})" if why else ""))
        return default

    def int(self, name: str, default: Any = _MISSING, *, minimum: int = 1, why: str = "") -> int:
        v = self.get(name, default, why)
        if v is None:
            return v
        if isinstance(v, bool) or not isinstance(v, (int, float)) or (isinstance(v, float) and not v.is_integer()):
            raise self._fail(name, f"must be an integer (got {v!r})")
        if v < minimum:
            raise self._fail(name, f"must be >= {minimum} (got {v!r})")
        maximum = MAX_LAYERS if name in _LAYER_FIELDS else MAX_SIZE
        if v > maximum:
            raise self._fail(name, f"must be <= {maximum:,} (got {v!r}); is it a typo?")
        return int(v)

    def opt_int(self, name: str, *, minimum: int = 1) -> int | None:
        """An integer that may be absent or null (then None, which the architecture means as 'off')."""
        return self.int(name, minimum=minimum) if self.has(name) else None

    def float(self, name: str, default: Any = _MISSING, *, why: str = "") -> float:
        v = self.get(name, default, why)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
            raise self._fail(name, f"must be a number >= 0 (got {v!r})")
        return float(v)

    def bool(self, name: str, default: Any = _MISSING, *, why: str = "") -> bool:
        v = self.get(name, default, why)
        if not isinstance(v, bool):
            raise self._fail(name, f"must be true or false (got {v!r})")
        return v

    def str(self, name: str, default: Any = _MISSING, *, why: str = "") -> str:
        v = self.get(name, default, why)
        if not isinstance(v, str):
            raise self._fail(name, f"must be a string (got {v!r})")
        return v

    def int_list(self, name: str, *, minimum: int = 0) -> list[int]:
        v = self.raw.get(name)
        if v is None:
            return []
        if not isinstance(v, list) or any(isinstance(x, bool) or not isinstance(x, int) or x < minimum for x in v):
            raise self._fail(name, f"must be a list of integers >= {minimum} (got {v!r})")
        return list(v)

    def sub(self, name: str) -> _Cfg:
        v = self.raw.get(name) or {}
        if not isinstance(v, dict):
            raise self._fail(name, f"must be an object (got {v!r})")
        c = _Cfg(v, f"{self.where} {name}", self.model_type)
        c.assumptions = self.assumptions
        return c

    def dropout(self, *names: str) -> bool:
        """Dropout is on when any of the named probabilities is > 0 (absent counts as 0)."""
        return any(self.float(n) > 0 for n in names if self.has(n))


# --- shared pieces ----------------------------------------------------------------------------------

_MODERN = dict(norm="rmsnorm", rope=True, fused_qkv=False, gated_ffn=True, flash_attention=True)


def _window_layers(c: _Cfg, n_layers: int) -> tuple[int, ...] | None:
    """Layers with sliding-window attention from ``layer_types`` (transformers >= 4.53), else None (all)."""
    types = c.raw.get("layer_types")
    if types is None:
        return None
    if not isinstance(types, list) or len(types) != n_layers or any(not isinstance(t, str) for t in types):
        raise c._fail("layer_types", f"must be a list of {n_layers} strings, one per layer (got {types!r})")
    return tuple(i for i, t in enumerate(types) if t == "sliding_attention")


def _decoder(c: _Cfg, *, tie_default: bool, kv_from: str = "num_key_value_heads") -> dict[str, Any]:
    """Fields every Llama-like decoder config shares (names as in ``LlamaConfig``)."""
    L = c.int("num_hidden_layers")
    h = c.int("hidden_size")
    a = c.int("num_attention_heads")
    kv = c.int(kv_from, a, why="no grouped-query attention: one key/value head per query head")
    d_head = c.int("head_dim") if c.has("head_dim") else h // a
    spec = dict(n_layers=L, d_model=h, n_heads=a, n_kv_heads=kv, d_head=d_head,
                d_ff=c.int("intermediate_size"), vocab_size=c.int("vocab_size"),
                tied_embeddings=c.bool("tie_word_embeddings", tie_default,
                                       why=f"the {c.model_type} configuration default"),
                bias=c.bool("attention_bias", False, why="the configuration default"),
                dropout=c.dropout("attention_dropout", "hidden_dropout", "resid_pdrop"),
                **_MODERN)
    if c.has("mlp_bias") and c.bool("mlp_bias") != spec["bias"]:
        spec["mlp_bias"] = c.bool("mlp_bias")
    window = c.opt_int("sliding_window")
    if window:
        spec["attention_window"] = window
        spec["window_layers"] = _window_layers(c, L)
    return spec


def _llama(c: _Cfg) -> dict[str, Any]:
    return _decoder(c, tie_default=False)


def _mixtral(c: _Cfg) -> dict[str, Any]:
    spec = _decoder(c, tie_default=False)
    spec.update(n_experts=c.int("num_local_experts"), top_k=c.int("num_experts_per_tok"))
    return spec


def _qwen2(c: _Cfg) -> dict[str, Any]:
    spec = _decoder(c, tie_default=False)
    spec["attn_bias"] = "qkv"        # Qwen2Attention: q/k/v projections with bias, o_proj without
    spec.pop("attention_window", None)
    spec.pop("window_layers", None)
    if c.bool("use_sliding_window", False, why="Qwen2Config default"):
        L = spec["n_layers"]
        spec["attention_window"] = c.int("sliding_window")
        first = c.int("max_window_layers", L, minimum=0)
        spec["window_layers"] = _window_layers(c, L) or tuple(range(first, L))
    return spec


def _qwen3(c: _Cfg) -> dict[str, Any]:
    spec = _qwen2(c)
    spec["attn_bias"] = "all" if c.bool("attention_bias", False, why="Qwen3Config default") else "none"
    spec["qk_norm"] = True           # Qwen3Attention: RMSNorm over head_dim on q and k
    return spec


def _moe_qwen(c: _Cfg, spec: dict[str, Any]) -> dict[str, Any]:
    L = spec["n_layers"]
    step = c.int("decoder_sparse_step", 1, why="every layer is an MoE layer")
    only = set(c.int_list("mlp_only_layers"))
    # Qwen2-MoE/Qwen3-MoE: layer i is sparse when i not in mlp_only_layers and (i + 1) % step == 0
    dense = tuple(i for i in range(L) if i in only or (i + 1) % step)
    spec.update(n_experts=c.int("num_experts"), top_k=c.int("num_experts_per_tok"),
                expert_d_ff=c.int("moe_intermediate_size"), dense_layers=dense)
    return spec


def _qwen2_moe(c: _Cfg) -> dict[str, Any]:
    spec = _moe_qwen(c, _qwen2(c))
    shared = c.int("shared_expert_intermediate_size", 0, minimum=0, why="no shared expert")
    if shared:
        spec.update(n_shared_experts=1, shared_expert_d_ff=shared, shared_expert_gate=True)
    return spec


def _qwen3_moe(c: _Cfg) -> dict[str, Any]:
    return _moe_qwen(c, _qwen3(c))


def _glm4_moe(c: _Cfg) -> dict[str, Any]:
    """[issue 17] Z.ai's GLM-4.5 / 4.6 (transformers' ``Glm4MoeConfig``): grouped-query attention whose ``head_dim`` is
    its own (96 heads of 128 over a 4096-wide model in GLM-4.5-Air), biases on the query, key and value projections
    only (``attention_bias``; ``o_proj`` and the MLPs have none), per-head query/key RMSNorms where ``use_qk_norm``,
    rotary embeddings on ``partial_rotary_factor`` of each head (a kernel detail: no FLOPs or parameters), and
    DeepSeek-V3's MoE: ``first_k_dense_replace`` dense layers of ``intermediate_size``, then ``n_routed_experts`` of
    ``moe_intermediate_size`` (top ``num_experts_per_tok``, a sigmoid router with a score-correction bias) and
    ``n_shared_experts``, group-limited where ``n_group`` > 1, and ``num_nextn_predict_layers`` multi-token prediction
    modules (TransformerSpec.mtp_layers)."""
    spec = _decoder(c, tie_default=False)
    qkv = c.bool("attention_bias", False, why="Glm4MoeConfig default")
    spec.update(bias=False, attn_bias="qkv" if qkv else "none",
                qk_norm=c.bool("use_qk_norm", False, why="Glm4MoeConfig default"),
                n_experts=c.int("n_routed_experts"), top_k=c.int("num_experts_per_tok"),
                expert_d_ff=c.int("moe_intermediate_size"),
                n_shared_experts=c.int("n_shared_experts", 0, minimum=0, why="no shared experts"),
                first_k_dense=c.int("first_k_dense_replace", 0, minimum=0, why="no dense layers first"),
                router_bias=True)  # Glm4MoeTopkRouter carries e_score_correction_bias
    spec.pop("mlp_bias", None)
    groups = c.opt_int("n_group")
    if groups and groups > 1:
        spec.update(moe_n_groups=groups, moe_topk_groups=c.int("topk_group"))
    _mtp(c, spec, default=0)
    return spec


def _deepseek(c: _Cfg, v3: bool) -> dict[str, Any]:
    L = c.int("num_hidden_layers")
    h = c.int("hidden_size")
    a = c.int("num_attention_heads")
    spec = dict(n_layers=L, d_model=h, n_heads=a, d_ff=c.int("intermediate_size"), vocab_size=c.int("vocab_size"),
                tied_embeddings=c.bool("tie_word_embeddings", False, why="DeepseekV3Config default"),
                bias=c.bool("attention_bias", False, why="DeepseekV3Config default"), dropout=False,
                q_lora_rank=c.opt_int("q_lora_rank"), kv_lora_rank=c.int("kv_lora_rank"),
                qk_nope_head_dim=c.int("qk_nope_head_dim"), qk_rope_head_dim=c.int("qk_rope_head_dim"),
                v_head_dim=c.int("v_head_dim"), **_MODERN)
    n_routed = c.opt_int("n_routed_experts")
    if n_routed:
        spec.update(n_experts=n_routed, top_k=c.int("num_experts_per_tok"),
                    expert_d_ff=c.int("moe_intermediate_size"),
                    n_shared_experts=c.int("n_shared_experts", 0, minimum=0, why="no shared experts"),
                    first_k_dense=c.int("first_k_dense_replace", 0, minimum=0, why="no dense layers first"),
                    moe_layer_freq=c.int("moe_layer_freq", 1, why="every layer after the dense ones"),
                    router_bias=v3)   # DeepSeek-V3's gate carries e_score_correction_bias
        groups = c.opt_int("n_group")
        if groups and groups > 1:  # group-limited routing (DeepSeek-V2/V3 "device/node-limited routing")
            spec.update(moe_n_groups=groups, moe_topk_groups=c.int("topk_group"))
    _mtp(c, spec, default=0)
    return spec


def _mtp(c: _Cfg, spec: dict[str, Any], *, default: int, key: str = "num_nextn_predict_layers") -> None:
    """[issue 17] ``num_nextn_predict_layers`` (a Megatron recipe's ``mtp_num_layers``: ``key``): the multi-token
    prediction modules (TransformerSpec.mtp_layers), trained with the model as its published recipes do (DeepSeek-V3
    report section 2.2; Megatron-Bridge's DeepSeek-V3 recipe sets ``mtp_num_layers = 1``); ``--mtp-layers 0`` trains
    without them. A config.json's count is noted among the assumptions (the published parameter counts leave the
    modules out); a recipe's is its own setting."""
    d = c.int(key, default, minimum=0, why="no multi-token prediction module")
    if d:
        if d > 16:
            raise c._fail(key, f"at most 16 multi-token prediction modules are modelled (got {d})")
        spec["mtp_layers"] = d
        if key == "num_nextn_predict_layers":
            c.assumptions.append(f"num_nextn_predict_layers: {d} multi-token prediction module(s) trained with the "
                                 f"model after its last layer (the published parameter count leaves them out; "
                                 f"--mtp-layers 0 trains without them)")
        _mtp_shared(c, spec)


def _mtp_shared(c: _Cfg, spec: dict[str, Any]) -> None:
    """[issue 17] ``mtp_use_repeated_layer`` (Megatron-Core's name, as Qwen3.5's and Megatron recipes write it) or
    ``mtp_share_layers`` (the name Megatron-Bridge's bridges read from some Hugging Face configs): the multi-token
    prediction passes run one module's weights (TransformerSpec.mtp_shared)."""
    for key in ("mtp_use_repeated_layer", "mtp_share_layers"):
        v = c.raw.get(key)
        if v is None:
            continue
        if not isinstance(v, bool):
            raise c._fail(key, f"must be true or false (got {v!r})")
        spec["mtp_shared"] = v
        return


def _gpt_oss(c: _Cfg) -> dict[str, Any]:
    spec = _decoder(c, tie_default=False)
    spec.update(n_experts=c.int("num_local_experts"),
                top_k=c.int("num_experts_per_tok") if c.has("num_experts_per_tok") else c.int("experts_per_token"),
                bias=c.bool("attention_bias", True, why="GptOssConfig default"),
                router_bias=True, attention_sinks=True)   # GptOssTopKRouter has a bias; one sink logit per head
    spec["mlp_bias"] = True                               # experts carry gate_up and down biases
    # [issue 17] the clamped SwiGLU: gate clamped to <= limit, linear half to +-limit (transformers' GptOssExperts)
    spec["glu_clamp"] = c.float("swiglu_limit", 7.0, why="GptOssConfig default")
    return spec


def _llama4(c: _Cfg) -> dict[str, Any]:
    """Llama 4 (Hugging Face ``Llama4Config`` / ``Llama4TextConfig``, transformers ``models/llama4``): the text
    model's fields sit under ``text_config`` (``model_type: llama4``) or at the top (``llama4_text``).

    - **Interleaved dense and MoE layers**: ``moe_layers`` (default ``range(step - 1, L, step)`` with
      ``interleave_moe_layer_step``: every layer for Scout, every second for Maverick); the dense layers' MLP is
      ``intermediate_size_mlp`` wide, the routed experts' ``intermediate_size``.
    - **Shared expert**: ``Llama4TextMoe`` adds one shared expert of ``intermediate_size`` on every token; the
      router is a sigmoid over ``num_local_experts`` with top ``num_experts_per_tok`` (1).
    - **Chunked attention**: the RoPE layers (``no_rope_layers[i] == 1``; default three of every four) attend
      within chunks of ``attention_chunk_size``; the NoPE layers attend globally. Counted as a window of the chunk
      size on those layers: exact while the sequence is no longer than a chunk, an upper bound beyond (a chunk's
      queries see on average half of it). ``use_qk_norm``: a weightless L2 norm of q and k (not counted).
    """
    t = c.sub("text_config") if isinstance(c.raw.get("text_config"), dict) else c
    spec = _decoder(t, tie_default=False)
    L = spec["n_layers"]
    step = t.int("interleave_moe_layer_step", 1, why="every layer an MoE layer")
    moe = set(t.int_list("moe_layers")) if t.has("moe_layers") else set(range(step - 1, L, step))
    if any(i >= L for i in moe):
        raise t._fail("moe_layers", f"must list layer indices below num_hidden_layers {L} (got {sorted(moe)})")
    fe = t.int("intermediate_size")
    spec.update(d_ff=t.int("intermediate_size_mlp", fe, why="dense layers as wide as the experts"),
                n_experts=t.int("num_local_experts"), top_k=t.int("num_experts_per_tok", 1, why="Llama4 default"),
                expert_d_ff=fe, n_shared_experts=1, shared_expert_d_ff=fe,
                dense_layers=tuple(i for i in range(L) if i not in moe))
    if t.bool("use_qk_norm", True, why="Llama4TextConfig default"):
        # Llama4TextL2Norm has no weight (unlike Qwen3's RMSNorm on q and k): no parameters; its elementwise cost
        # is left out
        c.assumptions.append("use_qk_norm: Llama 4's weightless L2 norm of q and k is not counted")
    chunk = t.opt_int("attention_chunk_size")
    if chunk:
        rope = t.int_list("no_rope_layers") or [int((i + 1) % 4 != 0) for i in range(L)]
        if len(rope) != L:
            raise t._fail("no_rope_layers", f"must list {L} flags, one per layer (got {len(rope)})")
        spec["attention_window"] = chunk
        spec["attention_chunked"] = True
        spec["window_layers"] = tuple(i for i, r in enumerate(rope) if r)
        c.assumptions.append(f"chunked attention ({chunk} tokens) on the RoPE layers: model FLOPs count a window of "
                             f"{chunk} keys (exact up to one chunk; an upper bound beyond), the step time the "
                             f"attention kernel's tiles of each chunk")
    max_pos = t.int("max_position_embeddings", None, why="no position limit known")
    if max_pos:
        spec["max_positions"] = max_pos
    spec["seq_len"] = min(max_pos, DEFAULT_SEQ_CAP) if max_pos else DEFAULT_SEQ_CAP
    c.assumptions.append(f"sequence length {spec['seq_len']} unless --seq-len is given (text_config "
                         f"max_position_embeddings {max_pos}, capped at {DEFAULT_SEQ_CAP})")
    return spec


def _gemma(c: _Cfg) -> dict[str, Any]:
    spec = _decoder(c, tie_default=True)
    spec["activation"] = "gelu_tanh"                      # GeGLU
    return spec


def _gemma2(c: _Cfg) -> dict[str, Any]:
    spec = _gemma(c)
    spec["layer_norms"] = 4                               # pre/post attention and pre/post feed-forward norms
    if spec.get("attention_window") and spec.get("window_layers") is None:
        # Gemma2DecoderLayer: even layers use the sliding window, odd layers full attention
        spec["window_layers"] = tuple(range(0, spec["n_layers"], 2))
        c.assumptions.append("no layer_types: even layers sliding, odd layers full (Gemma 2's alternation)")
    return spec


#: [issue 17] ``Gemma3TextConfig``'s defaults (huggingface/transformers
#: ``src/transformers/models/gemma3/configuration_gemma3.py``): Gemma 3's released config.json files leave out every
#: field equal to them, so a sparse ``text_config`` reads as these
_GEMMA3_DEFAULTS = dict(num_hidden_layers=26, hidden_size=2304, intermediate_size=9216, num_attention_heads=8,
                        num_key_value_heads=4, head_dim=256, vocab_size=262_208, max_position_embeddings=131_072,
                        sliding_window=4096, sliding_window_pattern=6)


def _gemma3(c: _Cfg) -> dict[str, Any]:
    """[issue 17] Gemma 3 (``gemma3_text``, or ``gemma3`` with the text model under ``text_config``; the SigLIP vision
    tower is not counted). Every field absent from the config takes ``Gemma3TextConfig``'s default
    (:data:`_GEMMA3_DEFAULTS`, each named in the assumptions). Gemma 2's four norms per layer and GeGLU, a weightless
    scale on queries and keys (``q_norm`` / ``k_norm`` RMSNorms with weights: ``qk_norm``), and five sliding-window
    layers to one global: layer ``i`` slides unless ``(i + 1) % sliding_window_pattern == 0``
    (``Gemma3Attention.is_sliding``), or as ``layer_types`` lists them."""
    # a text_config that is not an object is an error (Cfg.sub), not a model read from the defaults
    t = c.sub("text_config") if c.raw.get("text_config") is not None else c
    why = "Gemma3TextConfig default"
    d = {k: t.int(k, v, why=why) for k, v in _GEMMA3_DEFAULTS.items() if k != "sliding_window"}
    L = d["num_hidden_layers"]
    spec = dict(n_layers=L, d_model=d["hidden_size"], n_heads=d["num_attention_heads"],
                n_kv_heads=d["num_key_value_heads"], d_head=d["head_dim"], d_ff=d["intermediate_size"],
                vocab_size=d["vocab_size"], tied_embeddings=t.bool("tie_word_embeddings", True, why=why),
                bias=t.bool("attention_bias", False, why=why), dropout=t.dropout("attention_dropout"), **_MODERN)
    spec.update(activation="gelu_tanh", layer_norms=4, qk_norm=True)
    # an explicit null turns the window off; an absent field is the class default
    window = (None if "sliding_window" in t.raw and t.raw["sliding_window"] is None
              else t.int("sliding_window", _GEMMA3_DEFAULTS["sliding_window"], why=why))
    if window:
        p = d["sliding_window_pattern"]
        spec["attention_window"] = window
        spec["window_layers"] = _window_layers(t, L) or tuple(i for i in range(L) if (i + 1) % p)
    max_pos = d["max_position_embeddings"]
    spec["max_positions"] = max_pos
    spec["seq_len"] = min(max_pos, DEFAULT_SEQ_CAP)
    c.assumptions.append(f"sequence length {spec['seq_len']} unless --seq-len is given (max_position_embeddings "
                         f"{max_pos}, capped at {DEFAULT_SEQ_CAP})")
    if c is not t:
        c.assumptions.append("gemma3: the text model only (text_config); the SigLIP vision tower is not counted")
    return spec


def _phi3(c: _Cfg) -> dict[str, Any]:
    spec = _decoder(c, tie_default=False)
    spec["fused_qkv"] = True                              # qkv_proj and gate_up_proj are fused
    return spec


def _nemotron(c: _Cfg) -> dict[str, Any]:
    spec = _decoder(c, tie_default=False)
    spec.update(gated_ffn=False, activation="relu2", norm="layernorm",
                mlp_bias=c.bool("mlp_bias", False, why="NemotronConfig default"))
    return spec


def _gpt2(c: _Cfg) -> dict[str, Any]:
    h = c.int("n_embd")
    n_pos = c.int("n_positions")
    return dict(n_layers=c.int("n_layer"), d_model=h, n_heads=c.int("n_head"), vocab_size=c.int("vocab_size"),
                d_ff=c.int("n_inner", 4 * h, why="4 x n_embd") if "n_inner" in c.raw else 4 * h,
                learned_pos=True, max_positions=n_pos, tied_embeddings=True, flash_attention=True,
                dropout=c.dropout("resid_pdrop", "embd_pdrop"), attn_dropout=c.dropout("attn_pdrop"),
                activation="gelu_tanh")


def _gpt_neox(c: _Cfg) -> dict[str, Any]:
    return dict(n_layers=c.int("num_hidden_layers"), d_model=c.int("hidden_size"),
                n_heads=c.int("num_attention_heads"), d_ff=c.int("intermediate_size"),
                vocab_size=c.int("vocab_size"), rope=True, flash_attention=True,
                tied_embeddings=c.bool("tie_word_embeddings", False, why="GPTNeoXConfig default"),
                bias=c.bool("attention_bias", True, why="GPTNeoXConfig default"),
                dropout=c.dropout("hidden_dropout", "attention_dropout"))


def _mpt(c: _Cfg) -> dict[str, Any]:
    attn, ffn = c.sub("attn_config"), c.sub("ffn_config")
    h, a = c.int("d_model"), c.int("n_heads")
    no_bias = c.bool("no_bias", False, why="llm-foundry MPTConfig default: biases on")
    ffn_type = ffn.str("ffn_type", "mptmlp", why="plain GELU MLP") if "ffn_type" in ffn.raw else "mptmlp"
    if ffn_type not in ("mptmlp", "mptglu"):
        raise c._fail("ffn_config.ffn_type", f"must be 'mptmlp' or 'mptglu' (got {ffn_type!r})")
    ratio = c.float("expansion_ratio", 4, why="MPTConfig default")
    alibi = attn.bool("alibi", False, why="MPTConfig default") if "alibi" in attn.raw else False
    learned = c.bool("learned_pos_emb", True, why="MPTConfig default") and not alibi
    return dict(n_layers=c.int("n_layers"), d_model=h, n_heads=a, vocab_size=c.int("vocab_size"),
                n_kv_heads=attn.int("kv_n_heads", a, why="multi-head attention") if "kv_n_heads" in attn.raw else a,
                d_ff=int(round(ratio * h)), gated_ffn=ffn_type == "mptglu", bias=not no_bias,
                norm="layernorm_nobias" if no_bias else "layernorm", tied_embeddings=True, flash_attention=True,
                learned_pos=learned, max_positions=c.int("max_seq_len"),
                dropout=c.dropout("resid_pdrop", "emb_pdrop"))


def _falcon(c: _Cfg) -> dict[str, Any]:
    h, a = c.int("hidden_size"), c.int("num_attention_heads")
    new_arch = c.bool("new_decoder_architecture", False, why="FalconConfig default")
    if new_arch:
        kv = c.int("num_kv_heads", a, why="FalconConfig default")
    else:
        kv = 1 if c.bool("multi_query", True, why="FalconConfig default") else a
    parallel = c.bool("parallel_attn", True, why="FalconConfig default")
    return dict(n_layers=c.int("num_hidden_layers"), d_model=h, n_heads=a, n_kv_heads=kv,
                d_ff=c.int("ffn_hidden_size", 4 * h, why="4 x hidden_size"), vocab_size=c.int("vocab_size"),
                bias=c.bool("bias", False, why="FalconConfig default"),
                rope=not c.bool("alibi", False, why="FalconConfig default"),
                tied_embeddings=c.bool("tie_word_embeddings", True, why="FalconConfig default"),
                layer_norms=2 if new_arch or not parallel else 1, flash_attention=True,
                dropout=c.dropout("hidden_dropout", "attention_dropout"))


def _bert(c: _Cfg) -> dict[str, Any]:
    h, V = c.int("hidden_size"), c.int("vocab_size")
    c.assumptions.append("bert: masked-LM head (transform dense + LayerNorm, decoder tied to the embedding, "
                         "output bias) and pooler counted, as BertForPreTraining without the 2-way NSP head")
    return dict(n_layers=c.int("num_hidden_layers"), d_model=h, n_heads=c.int("num_attention_heads"),
                d_ff=c.int("intermediate_size"), vocab_size=V, learned_pos=True,
                max_positions=c.int("max_position_embeddings"), token_types=c.int("type_vocab_size", 2, minimum=0,
                                                                                    why="BertConfig default"),
                embedding_norm=True, final_norm=False, tied_embeddings=True, flash_attention=True,
                dropout=c.dropout("hidden_dropout_prob"), attn_dropout=c.dropout("attention_probs_dropout_prob"),
                extra_params=float((h * h + h) + (h * h + h + 2 * h) + V))


def _megatron(c: _Cfg) -> dict[str, Any]:
    """A Megatron-LM / NeMo recipe: Megatron's argument names (``num_layers``, ``hidden_size``,
    ``ffn_hidden_size``, ``num_query_groups``, ``num_experts``, ``moe_router_topk`` ...) with Megatron-LM's
    defaults (``megatron/training/arguments.py``), as a flat mapping or under NeMo's ``model:``."""
    for k, v in list(c.raw.items()):   # NeMo's ${...} interpolations: the value is not known here
        if isinstance(v, str) and "${" in v:
            c.raw = {**c.raw, k: None}
            c.assumptions.append(f"{k} is an interpolation ({v}); Megatron-LM's default used")
    h, a = c.int("hidden_size"), c.int("num_attention_heads")
    act = str(c.raw.get("activation") or ("swiglu" if c.raw.get("swiglu") else "gelu")).lower()
    gated = act in ("swiglu", "geglu", "fast-swiglu", "reglu")
    f_default = int(4 * h * 2 / 3 / 64) * 64 if gated else 4 * h     # arguments.py: swiglu shrinks 4h by 2/3
    untie = c.bool("untie_embeddings_and_output_weights", False, why="Megatron-LM default") \
        if "untie_embeddings_and_output_weights" in c.raw else \
        not c.bool("share_embeddings_and_output_weights", True, why="NeMo default")
    bias = c.bool("add_bias_linear", True, why="Megatron-LM default") if "add_bias_linear" in c.raw else \
        (not c.bool("disable_bias_linear", False, why="Megatron-LM default") if "disable_bias_linear" in c.raw
         else c.bool("bias", True, why="Megatron-LM default: biases on"))
    pos = str(c.raw.get("position_embedding_type") or "learned_absolute")
    norm = str(c.raw.get("normalization") or "LayerNorm").lower()
    if "vocab_size" in c.raw or "padded_vocab_size" in c.raw:
        vocab = c.int("padded_vocab_size") if c.has("padded_vocab_size") else c.int("vocab_size")
    elif str((c.raw.get("tokenizer") or {}).get("type", "")) == "GPT2BPETokenizer":
        vocab = 50257
        c.assumptions.append("vocab_size from tokenizer GPT2BPETokenizer: 50257")
    else:
        vocab = c.int("vocab_size")
    kv = c.int("num_query_groups") if c.has("num_query_groups") else a
    spec = dict(n_layers=c.int("num_layers"), d_model=h, n_heads=a, n_kv_heads=kv,
                d_head=c.int("kv_channels") if c.has("kv_channels") else None,
                d_ff=c.int("ffn_hidden_size", f_default, why="Megatron-LM default"), vocab_size=vocab,
                vocab_multiple=c.int("make_vocab_size_divisible_by", 128, why="Megatron-LM default"),
                gated_ffn=gated, activation="relu2" if act == "squared-relu" else None, bias=bias,
                norm="rmsnorm" if "rms" in norm else "layernorm", tied_embeddings=not untie,
                learned_pos=pos == "learned_absolute", rope=pos == "rope", flash_attention=True,
                dropout=c.dropout("hidden_dropout", "attention_dropout"), qk_norm=bool(c.raw.get("qk_layernorm")))
    for key in ("seq_length", "encoder_seq_length"):
        if c.has(key):
            spec["seq_len"] = c.int(key)
            break
    if c.has("num_experts"):
        freq = c.raw.get("moe_layer_freq", 1)
        if not isinstance(freq, int) or isinstance(freq, bool):
            raise c._fail("moe_layer_freq", f"must be an integer here (got {freq!r})")
        shared = c.int("moe_shared_expert_intermediate_size", 0, minimum=0, why="no shared expert")
        spec.update(n_experts=c.int("num_experts"), top_k=c.int("moe_router_topk", 2, why="Megatron-LM default"),
                    expert_d_ff=c.int("moe_ffn_hidden_size", spec["d_ff"], why="ffn_hidden_size"),
                    moe_layer_freq=freq, n_shared_experts=1 if shared else 0, shared_expert_d_ff=shared or None)
    if c.raw.get("mtp_num_layers") is not None:  # [issue 17] (Megatron-Core --mtp-num-layers; None: off)
        _mtp(c, spec, default=0, key="mtp_num_layers")
    return spec


def _nemotron_h(c: _Cfg) -> dict[str, Any]:
    """[issue 17] NVIDIA Nemotron-H (``NemotronHConfig``): ``hybrid_override_pattern`` holds one block per layer,
    ``M`` a Mamba-2 mixer, ``*`` attention, ``-`` an MLP (squared ReLU, not gated), ``E`` a mixture-of-experts block
    (Nemotron 3 Nano: ``n_routed_experts`` experts of ``moe_intermediate_size``, top ``num_experts_per_tok``, plus
    ``n_shared_experts`` of ``moe_shared_expert_intermediate_size``; squared-ReLU experts like the MLP; sigmoid router
    with a score-correction bias; transformers' ``NemotronHConfig`` / ``NemotronHMOE``; [stop 48] Nemotron 3 Super's
    ``moe_latent_size``: LatentMoE, :attr:`gpusim.workload.transformer.TransformerSpec.moe_latent_dim`); one RMSNorm
    per block; the attention has no position embedding (Nemotron-H report, arXiv 2504.03624, section 2.1)."""
    L = c.int("num_hidden_layers")
    h = c.int("hidden_size")
    pattern = c.str("hybrid_override_pattern")
    if len(pattern) != L or set(pattern) - set("M*-E"):
        other = "".join(sorted(set(pattern) - set("M*-E")))
        raise c._fail("hybrid_override_pattern", f"must hold one of 'M' (Mamba-2), '*' (attention), '-' (MLP), 'E' "
                      f"(mixture of experts) per layer, num_hidden_layers={L} characters (got {len(pattern)} "
                      f"characters{', other letters: ' + other if other else ''}); fix the pattern or num_hidden_layers")
    a = c.int("num_attention_heads")
    d_head = c.int("attention_head_dim") if c.has("attention_head_dim") else c.int("head_dim", h // a)
    heads, P = c.int("mamba_num_heads"), c.int("mamba_head_dim")
    bias = c.bool("use_bias", False, why="NemotronHConfig default")
    spec = dict(n_layers=L, d_model=h, n_heads=a, n_kv_heads=c.int("num_key_value_heads", a), d_head=d_head,
                d_ff=c.int("intermediate_size"), vocab_size=c.int("vocab_size"),
                tied_embeddings=c.bool("tie_word_embeddings", False, why="NemotronHConfig default"),
                bias=c.bool("attention_bias", bias, why="use_bias"), mlp_bias=c.bool("mlp_bias", bias, why="use_bias"),
                dropout=c.dropout("attention_dropout", "hidden_dropout"), norm="rmsnorm", rope=False, fused_qkv=False,
                gated_ffn=False, activation=c.str("mlp_hidden_act", "relu2", why="NemotronHConfig default"),
                flash_attention=True, layer_norms=1,
                mixers="".join({"M": "M", "*": "A", "-": "-", "E": "-"}[ch] for ch in pattern),
                ffns="".join("F" if ch in "-E" else "-" for ch in pattern),
                mamba_version=2, mamba_expand=heads * P / h, mamba_state=c.int("ssm_state_size"), mamba_head_dim=P,
                mamba_groups=c.int("n_groups", 1), mamba_conv=c.int("conv_kernel", 4),
                mamba_chunk=c.int("chunk_size", 256, why="NemotronHConfig default"),
                mamba_conv_bias=c.bool("use_conv_bias", True, why="NemotronHConfig default"),
                mamba_proj_bias=c.bool("mamba_proj_bias", False, why="NemotronHConfig default"))
    if "E" in pattern:
        shared = c.int("n_shared_experts", 0, minimum=0, why="no shared expert")
        spec.update(n_experts=c.int("n_routed_experts"), top_k=c.int("num_experts_per_tok"),
                    expert_d_ff=c.int("moe_intermediate_size"), moe_layer_freq=1,
                    dense_layers=tuple(i for i, ch in enumerate(pattern) if ch == "-"),
                    n_shared_experts=shared, router_bias=True,  # NemotronHTopkRouter's e_score_correction_bias
                    shared_expert_d_ff=(c.int("moe_shared_expert_intermediate_size") if shared else None))
        groups = c.opt_int("n_group")
        if groups and groups > 1:
            spec.update(moe_n_groups=groups, moe_topk_groups=c.int("topk_group"))
        latent = c.opt_int("moe_latent_size")  # [stop 48] LatentMoE (Nemotron 3 Super / Ultra)
        if latent:
            if latent > h:
                raise c._fail("moe_latent_size", f"LatentMoE's expert width must not exceed hidden_size={h} "
                              f"(got {latent})")
            spec["moe_latent_dim"] = latent
    _mtp(c, spec, default=0)
    c.assumptions.append("no rotary or other position embedding in the attention layers (Nemotron-H)")
    return spec


def _jamba(c: _Cfg) -> dict[str, Any]:
    """[issue 17] AI21 Jamba (``JambaConfig``; Lieber et al., arXiv 2403.19887): every layer holds a mixer and an
    FFN; attention where ``i % attn_layer_period == attn_layer_offset``, else a Mamba-1 mixer; routed experts where
    ``i % expert_layer_period == expert_layer_offset``, else a dense SwiGLU MLP; no position embedding."""
    L = c.int("num_hidden_layers")
    h = c.int("hidden_size")
    ap, ao = c.int("attn_layer_period", 8), c.int("attn_layer_offset", 4, minimum=0)
    ep, eo = c.int("expert_layer_period", 2), c.int("expert_layer_offset", 1, minimum=0)
    for name, off, per in (("attn_layer_offset", ao, ap), ("expert_layer_offset", eo, ep)):
        if off >= per:
            raise c._fail(name, f"must be smaller than its period {per} (got {off}); no layer would match")
    n_exp = c.int("num_experts", 1)
    rank = c.get("mamba_dt_rank", "auto")
    dt_rank = math.ceil(h / 16) if rank == "auto" else c.int("mamba_dt_rank")
    spec = dict(_decoder(c, tie_default=False), rope=False,
                mixers="".join("A" if i % ap == ao else "M" for i in range(L)),
                mamba_version=1, mamba_expand=float(c.int("mamba_expand", 2)), mamba_state=c.int("mamba_d_state", 16),
                mamba_conv=c.int("mamba_d_conv", 4), mamba_dt_rank=dt_rank,
                mamba_conv_bias=c.bool("mamba_conv_bias", True, why="JambaConfig default"),
                mamba_proj_bias=c.bool("mamba_proj_bias", False, why="JambaConfig default"), mamba_inner_norms=True)
    spec.pop("attention_window", None)
    spec.pop("window_layers", None)
    if n_exp > 1:
        spec.update(n_experts=n_exp, top_k=c.int("num_experts_per_tok", 2), moe_layer_freq=1,
                    dense_layers=tuple(i for i in range(L) if i % ep != eo))
    c.assumptions.append("no rotary or other position embedding in the attention layers (Jamba)")
    return spec


#: model_type -> reader (a Megatron/NeMo recipe has no model_type: ``megatron`` is detected).
_READERS: dict[str, Callable[[_Cfg], dict[str, Any]]] = {
    "llama": _llama,
    "mistral": _llama,
    "mixtral": _mixtral,
    "qwen2": _qwen2,
    "qwen2_moe": _qwen2_moe,
    "qwen3": _qwen3,
    "qwen3_moe": _qwen3_moe,
    "deepseek_v2": lambda c: _deepseek(c, v3=False),
    "deepseek_v3": lambda c: _deepseek(c, v3=True),
    "kimi_k2": lambda c: _deepseek(c, v3=True),  # [issue 17] Moonshot's Kimi K2: DeepseekV3ForCausalLM
    "glm4_moe": _glm4_moe,  # [issue 17] GLM-4.5 / 4.6
    "gpt2": _gpt2,
    "gpt_neox": _gpt_neox,
    "gpt_oss": _gpt_oss,
    "llama4": _llama4,
    "llama4_text": _llama4,
    "mpt": _mpt,
    "falcon": _falcon,
    "gemma": _gemma,
    "gemma2": _gemma2,
    "gemma3": _gemma3,  # [issue 17]
    "gemma3_text": _gemma3,
    "phi3": _phi3,
    "nemotron": _nemotron,
    "nemotron_h": _nemotron_h,  # [issue 17] hybrid Mamba-Transformer models
    "jamba": _jamba,
    "bert": _bert,
    "megatron": _megatron,
}
#: families other than decoder-lm, and position-limit fields other than max_position_embeddings
_FAMILY = {"bert": "encoder"}
_POS_KEY = {"gpt2": "n_positions", "mpt": "max_seq_len"}

SUPPORTED_MODEL_TYPES: tuple[str, ...] = tuple(_READERS)


def read_config(config: Any) -> tuple[dict[str, Any], str]:
    """The config dict and a label for messages, from a path (a config.json, or a Megatron/NeMo recipe in
    JSON or YAML), a directory holding config.json, or a dict."""
    if isinstance(config, dict):
        return config, "config"
    if not isinstance(config, (str, Path)):
        raise ScenarioError(f"a model config must be a path or a dict (got {type(config).__name__})")
    p = Path(config).expanduser()
    if p.is_dir():
        p = p / "config.json"
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        reason = getattr(e, "strerror", None) or str(e)
        raise ScenarioError(f"cannot read model config {str(p)!r}: {reason}") from None
    if p.suffix.lower() in (".yaml", ".yml"):
        import yaml

        try:
            raw = yaml.safe_load(text)
        except yaml.YAMLError as e:
            raise ScenarioError(f"{p}: not valid YAML ({str(e).splitlines()[0]})") from None
        return _recipe(raw, p)
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as e:
        raise ScenarioError(f"{p}: not valid JSON ({e.msg} at line {e.lineno}, column {e.colno})") from None
    if not isinstance(raw, dict):
        raise ScenarioError(f"{p}: a config.json must hold a JSON object (got {type(raw).__name__})")
    return raw, str(p)


def _recipe(raw: Any, p: Path) -> tuple[dict[str, Any], str]:
    """A NeMo recipe keeps the architecture under ``model:``; a Megatron argument file is flat."""
    if not isinstance(raw, dict):
        raise ScenarioError(f"{p}: a model config must hold a mapping (got {type(raw).__name__})")
    if isinstance(raw.get("model"), dict) and "num_layers" in raw["model"]:
        raw = raw["model"]
    return raw, str(p)


#: [issue 17] transformers' ``_attn_implementation`` values: eager runs Q K^T, softmax and A V as separate kernels
#: (the s x s scores kept for the backward pass); sdpa and the flash kernels fuse them
ATTN_IMPLEMENTATIONS = {"eager": False, "sdpa": True, "flash_attention_2": True, "flash_attention_3": True}


def _attn_implementation(c: _Cfg, default: bool) -> bool:
    """[issue 17] Whether the config's ``_attn_implementation`` (as transformers writes it; ``attn_implementation``,
    the ``from_pretrained`` argument's name, too) runs fused attention; absent: ``default`` (the reader's). An unknown
    value is an error that lists the known ones."""
    key = next((k for k in ("_attn_implementation", "attn_implementation") if c.has(k)), None)
    if key is None:
        return default
    v = c.raw[key]
    if v not in ATTN_IMPLEMENTATIONS:
        raise c._fail(key, f"is {v!r}, not one of {', '.join(ATTN_IMPLEMENTATIONS)} (eager = unfused attention, the "
                      f"others fused; or drop the field and pass --attention flash|unfused)")
    if not ATTN_IMPLEMENTATIONS[v]:
        c.assumptions.append("_attn_implementation eager: unfused attention, the s x s scores kept")
    if v == "flash_attention_2":  # [issue 18] the kernel's own rate is a run option (Strategy.attention)
        c.assumptions.append("_attn_implementation flash_attention_2: timed as the GPU's native fused kernel; on "
                             "Hopper and Blackwell FlashAttention-2 itself is slower: pass --attention flash2")
    return ATTN_IMPLEMENTATIONS[v]


def spec_from_config(config: Any) -> tuple[TransformerSpec, str, list[str], dict[str, Any], str]:
    """(spec, family, assumptions, raw dict, label) of a config; errors name the field."""
    raw, where = read_config(config)
    mt = raw.get("model_type")
    if mt is None and "num_layers" in raw and "hidden_size" in raw:
        mt = "megatron"            # Megatron-LM / NeMo argument names
        raw = {**raw, "model_type": mt}
    if mt is None:
        raise ScenarioError(f"{where}: missing field 'model_type' (one of {', '.join(SUPPORTED_MODEL_TYPES)})")
    if not isinstance(mt, str) or mt not in _READERS:
        raise ScenarioError(f"{where}: model_type {mt!r} is not supported (supported: "
                            f"{', '.join(SUPPORTED_MODEL_TYPES)}); describe the model with one of them or use "
                            f"Workload.from_torch")
    reader, family = _READERS[mt], _FAMILY.get(mt, "decoder-lm")
    pos_key = _POS_KEY.get(mt, "max_position_embeddings")
    c = _Cfg(raw, where, mt)
    kw = reader(c)
    # a reader that found the position limit itself (a nested text_config) has set max_positions
    max_pos = kw.get("max_positions") or c.int(pos_key, None, why="no position limit known")
    if "seq_len" not in kw:        # a recipe that names its training length keeps it
        kw["seq_len"] = min(max_pos, DEFAULT_SEQ_CAP) if max_pos else DEFAULT_SEQ_CAP
        c.assumptions.append(f"sequence length {kw['seq_len']} unless --seq-len is given "
                             f"({pos_key} {max_pos}, capped at {DEFAULT_SEQ_CAP})")
    kw["flash_attention"] = _attn_implementation(c, bool(kw.get("flash_attention")))  # [issue 17]
    if kw.get("flash_attention"):
        c.assumptions.append("fused (flash) attention: the s x s attention probabilities are not kept")
    kw["max_positions"] = kw.get("max_positions") or max_pos
    try:
        spec = TransformerSpec(**kw)
    except ScenarioError as e:
        raise ScenarioError(f"{where}: {e}") from None
    return spec, family, c.assumptions, raw, where


def from_config(config: Any, *, seq_len: int | None = None, name: str | None = None) -> Workload:
    """The workload of the transformer a ``config.json`` describes (a path, a directory with a
    config.json, or the parsed dict), at ``seq_len`` tokens per sequence.

    Supported ``model_type`` values: :data:`SUPPORTED_MODEL_TYPES`. Raises
    :class:`gpusim.errors.ScenarioError` naming the field for an unreadable file, invalid JSON, an
    unknown ``model_type``, a missing field, a wrong type or a negative size.
    """
    spec, family, assumptions, raw, where = spec_from_config(config)
    if seq_len is not None:
        if isinstance(seq_len, bool) or int(seq_len) != seq_len or seq_len < 1:
            raise ScenarioError(f"sequence length must be a positive integer (got {seq_len!r})")
        if spec.learned_pos and spec.max_positions and seq_len > spec.max_positions:
            raise ScenarioError(f"{where}: --seq-len {seq_len} exceeds the {spec.max_positions} learned positions "
                                f"of this model")
    file_label = "" if where == "config" else (Path(where).parent.name if Path(where).name == "config.json"
                                                 else Path(where).stem)
    label = name or raw.get("_name_or_path") or file_label or raw["model_type"]
    label = str(label).rstrip("/").split("/")[-1] or raw["model_type"]
    info = EntryInfo(slug(label), label, family,
                 (f"config.json ({where}, model_type {raw['model_type']!r}) read by gpusim.workload.from_config",),
                 "built from a config.json; assumptions: " + "; ".join(assumptions), assumptions=tuple(assumptions))
    return build_transformer(info, spec, seq_len)
