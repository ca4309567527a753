"""Model FLOPs per token of a transformer, in the two conventions published numbers use.

* ``six_n_attention``: ``6 N_active + 6 * sum over layers of 2 k (d_qk + d_v)`` per token, the PaLM
  convention (Chowdhery et al. 2022, Appendix B: ``6N + 12 L H Q T``) that Kaplan et al. 2020 ("6N")
  and nanoGPT's ``estimate_mfu`` follow. ``N_active`` counts the weights that multiply activations in a
  matrix product for one token: every projection, the active experts and the router, and the LM head
  (tied or not); embedding lookups, norms and biases are not matrix products. Attention is counted
  in full over the ``k`` keys a query sees (``min(seq_len, window)``; no causal halving). This is 3x the
  forward count of :func:`gpusim.workload.transformer.build_transformer`, and what gpusim's
  ``mfu_frac`` divides by (``TRAIN_MULT x fwd_flop_per_sample``, :mod:`gpusim.model.compute`).
* ``megatron``: NVIDIA Megatron-LM's ``num_floating_point_operations(args, batch_size)``
  (``megatron/training/training.py``, ``transformer_flops``, 2025): ``3 x 2 x`` the GEMMs of the
  Q/K/V/O projections (MLA: the low-rank ones), of the dense FFN layers, of ``top_k`` routed experts
  plus the shared experts in MoE layers, of the logit layer at the padded vocabulary, and the attention
  core with a causal mask (``seq_len / 2`` keys per query); no router, no biases, no sliding window.
  NVIDIA's published Megatron/NeMo TFLOP/s per GPU and MFU figures use this count.
"""

from __future__ import annotations

from gpusim.workload.transformer import MTP_GROUP, TransformerSpec

#: What ``mfu_frac`` in gpusim's results divides by.
MFU_CONVENTION = ("six_n_attention (3 x gpusim's forward count: 6 N_active + attention over all keys, "
                  "PaLM App. B); Megatron-LM's count halves attention for the causal mask")


def _matmul_weights_per_token(spec: TransformerSpec) -> float:
    """Active matrix-product weights per token summed over the layers and the head (no embeddings,
    norms or biases)."""
    h, L = float(spec.d_model), spec.n_layers
    if spec.mla:
        ql, kvl, a = float(spec.q_lora_rank or 0), float(spec.kv_lora_rank), float(spec.n_heads)
        attn = ((h * ql + ql * spec.q_dim) if ql else h * spec.q_dim) + h * (kvl + spec.qk_rope_head_dim) \
            + kvl * a * (spec.qk_nope_head_dim + spec.v_head_dim) + spec.v_dim * h
    else:
        attn = 2 * h * spec.q_dim + 2 * h * spec.kv_dim
    n_mm = 3 if spec.gated_ffn else 2
    dense_ffn = n_mm * h * spec.ff_dim
    # model FLOPs count the routed tokens only: capacity padding is work the hardware does, not the model's
    # [stop 48] LatentMoE: the routed experts at the latent width, and its two projections h <-> l
    moe_ffn = (n_mm * (spec.top_k * spec.expert_io_dim * spec.expert_ff_dim + h * spec.shared_ff_dim)
               + 2 * h * float(spec.moe_latent_dim or 0)
               + h * spec.n_experts + (h if spec.shared_expert_gate and spec.n_shared_experts else 0.0))
    L_moe = spec.n_moe_layers
    head = h * spec.padded_vocab if spec.head == "lm" else 0.0
    if spec.hybrid:  # [issue 17] each layer's own mixer (attention or Mamba's projections) and FFN (or none)
        return (spec.n_attn_layers * attn + spec.n_mamba_layers * _mamba_matmul_weights(spec)
                + (spec.n_ffn_layers - L_moe) * dense_ffn + L_moe * moe_ffn + head)
    return L * attn + (L - L_moe) * dense_ffn + L_moe * moe_ffn + head


def _mamba_matmul_weights(spec: TransformerSpec) -> float:
    """[issue 17] Matrix-product weights of one Mamba mixer: Mamba-2's in_proj ``h (2 d + 2 G N + nh)`` and out_proj
    ``d h``; Mamba-1's in_proj ``2 d h``, x_proj ``d (R + 2 N)``, dt_proj ``R d`` and out_proj ``d h``."""
    h, d, N = float(spec.d_model), spec.mamba_d_inner, float(spec.mamba_state)
    if spec.mamba_version == 2:
        return h * (2 * d + 2 * spec.mamba_groups * N + spec.mamba_heads) + d * h
    R = float(spec.mamba_dt_rank)
    return 2 * d * h + d * (R + 2 * N) + R * d + d * h


def _mamba_other_fwd_flop(spec: TransformerSpec) -> float:
    """[issue 17] Forward FLOPs per token of one Mamba mixer outside its matrix products (conv1d, scan)."""
    return spec.mamba_fwd_flop_per_token() - 2 * _mamba_matmul_weights(spec)


def model_fwd_flop_per_sample(workload) -> float:
    """Forward model FLOPs of one sample of ``workload``: its FLOPs without the experts' capacity padding (a
    capacity factor ``F`` pads the experts' GEMMs to ``F x`` the routed tokens, GShard/Switch: hardware work, not
    model FLOPs, so MFU does not rise with ``F``). Equal to ``fwd_flop_per_sample`` for every other workload."""
    cf = getattr(getattr(workload, "transformer", None), "moe_capacity_factor", None)
    if not cf:
        return float(workload.fwd_flop_per_sample)
    experts = sum(g.fwd_flop_per_sample for g in workload.layers if g.name == "experts")
    return float(workload.fwd_flop_per_sample - experts * (1.0 - 1.0 / cf))


def flops_per_token(spec: TransformerSpec, seq_len: int | None = None) -> dict[str, float | str]:
    """Training (forward + backward) FLOPs per token of ``spec`` at ``seq_len`` tokens per sequence, in
    both conventions (see the module docstring), with the attention part of each."""
    s = float(seq_len or spec.seq_len)
    L = spec.n_layers
    # --- 6 N + attention (full, windowed where the model has a window) --------------------------------
    n_win = spec.n_window_layers
    keys_full, keys_win = s + spec.mem_len, min(s + spec.mem_len, float(spec.attention_window or s))
    per_key = 2 * (spec.q_dim + spec.v_dim)                     # QK^T and AV, forward, per key
    n_attn = spec.n_attn_layers
    n_win = spec.n_window_attn_layers
    attn_6n = 3 * per_key * ((n_attn - n_win) * keys_full + n_win * keys_win)
    six_n = 6 * _matmul_weights_per_token(spec)
    if spec.n_mamba_layers:  # [issue 17] the Mamba mixers' conv and scan, 3x forward, beside 6 N
        six_n_mamba = 3 * spec.n_mamba_layers * _mamba_other_fwd_flop(spec)
        attn_6n += six_n_mamba
    # --- Megatron-LM -----------------------------------------------------------------------------------
    h = float(spec.d_model)
    ffn_mult = 3 if spec.gated_ffn else 2
    if spec.mla:
        a = float(spec.n_heads)
        qk, rope, v = float(spec.qk_nope_head_dim), float(spec.qk_rope_head_dim), float(spec.v_head_dim)
        q_term = (spec.q_lora_rank * (h + a * (qk + rope) + 1)) if spec.q_lora_rank else h * a * (qk + rope)
        proj = q_term + spec.kv_lora_rank * (h + a * (qk + v) + 1) + h * rope + a * v * h
        core = s * a * (qk + rope) / 2 + s * a * v / 2
    else:
        qd, kvd = spec.q_dim, spec.kv_dim
        proj = h * (qd + 2 * kvd) + qd * h
        core = qd * s / 2 * 2
    L_moe = spec.n_moe_layers
    L_ffn = spec.n_ffn_layers
    mlp = (h * spec.ff_dim * ffn_mult * (L_ffn - L_moe)
           + (spec.expert_io_dim * spec.expert_ff_dim * spec.top_k * ffn_mult + h * spec.shared_ff_dim * ffn_mult
              + 2 * h * float(spec.moe_latent_dim or 0)) * L_moe)
    logit = h * spec.padded_vocab
    megatron = 6 * (mlp + n_attn * (proj + core) + logit)
    if spec.n_mamba_layers:
        # [issue 17] Megatron-LM's mamba_layer_flops (megatron/training/training.py, hybrid_flops), forward x 3:
        # in_proj 2 s h (2 d + 2 G N + nh), scan 7 s d N, out_proj 2 s d h (Mamba-1 read with G = 1, nh = 0 and
        # its x_proj and dt_proj added)
        d, N = spec.mamba_d_inner, float(spec.mamba_state)
        if spec.mamba_version == 2:
            mm = 2 * h * (2 * d + 2 * spec.mamba_groups * N + spec.mamba_heads) + 2 * d * h
        else:
            mm = 2 * _mamba_matmul_weights(spec)
        megatron += 3 * spec.n_mamba_layers * (mm + 7 * d * N)
    megatron_attn = 6 * n_attn * core
    if spec.mtp_layers:
        # [issue 17] the multi-token prediction modules: each one layer of the model's last kind and one more pass
        # through the shared LM head (the one-layer block's own count holds both), eh_proj's 2h x h weights, and in
        # Megatron-LM's count its three norms as 3h "weights" (training.py: ``3 * 2 * mtp_num_layers * (3 *
        # hidden_size + 2 * hidden_size * hidden_size)`` beside ``hidden_size * padded_vocab_size * (mtp_num_layers
        # + 1)`` for the logits)
        D = spec.mtp_layers
        blk = flops_per_token(spec.mtp_block_spec(), seq_len)
        six_n += D * (blk["six_n_flop_per_token"] + 6 * 2 * h * h)
        attn_6n += D * blk["six_n_attention_part_flop_per_token"]
        megatron += D * (blk["megatron_flop_per_token"] + 6 * (3 * h + 2 * h * h))
        megatron_attn += D * blk["megatron_attention_part_flop_per_token"]
    return {
        "six_n_attention_flop_per_token": six_n + attn_6n,
        "six_n_flop_per_token": six_n,
        "six_n_attention_part_flop_per_token": attn_6n,
        "megatron_flop_per_token": megatron,
        "megatron_attention_part_flop_per_token": megatron_attn,
        "mfu_uses": MFU_CONVENTION,
    }


def breakdown(workload) -> list[dict[str, float | int | str]]:
    """Per-part parameters and forward FLOPs per token of a transformer workload: embeddings,
    attention, dense MLP, router, routed experts (total and active), shared experts, norms, LM head.

    Each row: ``part``, ``layers`` (how many layers have it, 0 outside the layers), ``params``,
    ``active_params`` and ``fwd_flop_per_token`` (summed over those layers; from the workload's layer
    groups, so the rows' FLOPs add up to ``fwd_flop_per_sample / tokens``)."""
    spec = workload.transformer
    if spec is None:
        return []
    tokens = workload.tokens_per_sample if workload.sample_unit == "sequence" else 1.0
    flop: dict[str, float] = {}
    part_of = {"attention projections": "attention", "attention (fused)": "attention",
               "attention scores and context": "attention", "mlp": "mlp", "router": "router",
               "experts": "experts", "shared experts": "shared experts", "lm head": "lm head",
               "latent projections": "latent projections", MTP_GROUP: MTP_GROUP,
               "mamba projections": "mamba", "mamba causal conv1d": "mamba", "mamba selective scan": "mamba"}
    for g in workload.layers:
        part = part_of.get(g.name, "lm head" if g.name.startswith("lm head") else "other")
        flop[part] = flop.get(part, 0.0) + g.fwd_flop_per_sample / tokens
    L, L_moe = spec.n_layers, spec.n_moe_layers
    h, V = float(spec.d_model), spec.padded_vocab
    emb = V * h + spec.token_types * h + (float(spec.max_positions or spec.seq_len) * h if spec.learned_pos else 0.0)
    head = V * h if spec.head == "lm" and not spec.tied_embeddings else 0.0
    norms = L * spec.layer_norms * spec._norm_params() + (spec._norm_params() if spec.final_norm else 0.0)
    La, Lf = spec.n_attn_layers, spec.n_ffn_layers  # [issue 17] a hybrid's layers of each kind
    rows = [("embeddings", 0, emb, emb), ("attention", La, La * spec.attn_params(), La * spec.attn_params())]
    if spec.n_mamba_layers:
        Lm = spec.n_mamba_layers
        rows.append(("mamba", Lm, Lm * spec.mamba_params(), Lm * spec.mamba_params()))
    if Lf - L_moe:
        rows.append(("mlp", Lf - L_moe, (Lf - L_moe) * spec.mlp_params(), (Lf - L_moe) * spec.mlp_params()))
    if L_moe:
        rows.append(("router", L_moe, L_moe * spec.router_params(), L_moe * spec.router_params()))
        rows.append(("experts", L_moe, L_moe * spec.n_experts * spec.expert_params(),
                     L_moe * spec.top_k * spec.expert_params()))
        if spec.n_shared_experts:
            rows.append(("shared experts", L_moe, L_moe * spec.shared_params(), L_moe * spec.shared_params()))
        if spec.moe_latent_dim:  # [stop 48] LatentMoE's fc1_latent_proj and fc2_latent_proj
            lp = L_moe * spec.latent_proj_params()
            rows.append(("latent projections", L_moe, lp, lp))
    rows.append(("norms", 0, norms, norms))
    rows.append(("lm head", 0, head, head))
    if spec.mtp_layers:  # [issue 17] the multi-token prediction modules (their FLOPs include the shared head's pass)
        rows.append((MTP_GROUP, spec.mtp_layers, spec.mtp_params(), spec.mtp_params(active=True)))
    known = sum(r[2] for r in rows)
    out = [{"part": p, "layers": n, "params": tp, "active_params": ap, "fwd_flop_per_token": flop.pop(p, 0.0)}
           for p, n, tp, ap in rows]
    rest_flop = sum(flop.values())
    if abs(workload.params - known) > 0.5 or rest_flop:
        rest = workload.params - known
        out.append({"part": "other (task head, pooler, ViT patches ...)", "layers": 0, "params": rest,
                    "active_params": rest, "fwd_flop_per_token": rest_flop})
    return out
