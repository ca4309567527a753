"""[issue 17] Sliding-window and chunked attention in the LLM step model: the fused kernel's tiles against a brute-force
count of the tiles a mask leaves non-empty, hand-worked fractions, and the step's attention time scaled by exactly
that fraction (unfused attention, which masks a full score matrix, unchanged)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from gpusim.model.llm import HOPPER, attention_tile_frac, causal_rate_frac, query_block_overhead_tiles
from gpusim.params import DEFAULT_PARAMS
from gpusim.simulation import Scenario, build_inputs, simulate


def _brute_tiles(s: int, block: int, window: int | None, chunked: bool) -> int:
    """Tiles (query block, key block) holding at least one (query i, key j) the mask keeps: causal ``j <= i``, a
    sliding window ``j >= i - w`` (FlashAttention's window_size_left), or the same chunk ``j // w == i // w``."""
    i = np.arange(s)[:, None]
    j = np.arange(s)[None, :]
    keep = j <= i
    if window:
        keep &= (j // window == i // window) if chunked else (j >= i - window)
    n = math.ceil(s / block)
    pad = np.zeros((n * block, n * block), dtype=bool)
    pad[:s, :s] = keep
    return int(pad.reshape(n, block, n, block).any(axis=(1, 3)).sum())


@pytest.mark.parametrize("s,block,window,chunked", [
    (1000, 64, 1, False), (1000, 64, 63, False), (1000, 64, 64, False), (1000, 64, 100, False),
    (1000, 64, 300, False), (777, 128, 128, False), (1000, 64, 64, True), (1000, 64, 192, True),
    (1024, 128, 256, True)])
def test_tile_fraction_matches_a_brute_force_count(s, block, window, chunked):
    """(Chunks are tiled each from its own first token, as a kernel tiles the sequences of a packed batch; with
    chunks a multiple of the tile, as Llama 4's 8192, that is the global grid the brute force counts.)"""
    expected = _brute_tiles(s, block, window, chunked) / _brute_tiles(s, block, None, False)
    assert attention_tile_frac(s, window, block, chunked=chunked) == pytest.approx(expected, rel=1e-12)


def test_tile_fraction_hand_worked():
    # s = 512, 128-token tiles: a causal mask visits 1 + 2 + 3 + 4 = 10 tiles; a 128-key window 1 + 2 + 2 + 2 = 7;
    # chunks of 256: 3 + 3 = 6; the window on half the layers: 0.5 + 0.5 x 0.7
    assert attention_tile_frac(512, 128, 128) == pytest.approx(0.7)
    assert attention_tile_frac(512, 256, 128, chunked=True) == pytest.approx(0.6)
    assert attention_tile_frac(512, 128, 128, window_layer_frac=0.5) == pytest.approx(0.85)
    # no window, a window that holds the sequence, no windowed layer: the causal kernel
    for args in ((512, None, 128), (512, 512, 128), (512, 4096, 128)):
        assert attention_tile_frac(*args) == 1.0
    assert attention_tile_frac(512, 128, 128, window_layer_frac=0.0) == 1.0


def _scenario(workload, seq_len=8192):
    return Scenario.create(workload=workload, gpu="h100-sxm", gpus=1, kind="ddp", precision="bf16", micro_batch=1,
                           global_batch=1, seq_len=seq_len, recompute="none", tp=1, pp=1)


def _without_window(workload):
    from gpusim.rows import transformer_of
    from gpusim.workload import build_transformer
    from gpusim.workload.transformer import EntryInfo

    spec = transformer_of(workload)
    info = EntryInfo(workload.id, workload.name, workload.family, tuple(workload.sources), workload.notes)
    return build_transformer(info, dataclasses.replace(spec, attention_window=None, window_layers=None),
                             int(workload.tokens_per_sample))


def test_the_step_charges_the_windowed_tiles_and_every_query_block_s_work(db):
    """Mistral 7B (a 4096-key window on every layer) at 8192 tokens on one GPU: the compute difference against the
    same model without its window is every layer's flash forward and backward time times (1 - the window's time
    fraction): its tiles plus each query block's fixed work, against the causal call's (gpusim.model.llm
    window_time_frac with query_block_overhead_tiles of H100's kernel), by the closed form of gpusim.model.llm."""
    from gpusim.workload import get_workload

    p = DEFAULT_PARAMS
    wl = get_workload("mistral-7b", seq_len=8192)
    spec = wl.transformer
    frac = attention_tile_frac(8192, spec.attention_window, p.flash_block_tokens)
    assert 0.6 < frac < 0.9  # 64 tiles a side, a window of 32: 33 + ... tiles
    windowed = simulate(_scenario(wl), db=db, params=p, recommend=False)
    full = simulate(_scenario(_without_window(wl)), db=db, params=p, recommend=False)
    _, _, row = build_inputs(_scenario(wl), db=db, params=p)
    assert row["attn_tile_frac"] == pytest.approx(frac)
    ceiling = row["ceiling_flop_per_s"]
    if not math.isfinite(ceiling):
        ceiling = p.gemm_ceiling_frac * row["peak_flop_per_s"]
    s, q = 8192.0, float(spec.q_dim)
    attn_flop = 2.0 * s * s * (q + q)
    f, b = causal_rate_frac(s, HOPPER, DEFAULT_PARAMS)  # the causal kernel's rate at 8192 tokens (H100's native kernel)
    fwd_s = 0.5 * attn_flop / (ceiling * p.flash_fwd_eff_frac * f)
    bwd_s = 2.5 * 0.5 * attn_flop / (ceiling * p.flash_bwd_eff_frac * b)
    n = 8192 / p.flash_block_tokens
    causal_tiles = n * (n + 1) / 2
    assert row["attn_win_tiles_frac"] == pytest.approx(frac) and row["attn_qblock_per_tile"] == pytest.approx(
        n / causal_tiles)
    c_f, c_b = (float(c) for c in query_block_overhead_tiles(HOPPER, p))
    wf = (frac + c_f * n / causal_tiles) / (1 + c_f * n / causal_tiles)
    wb = (frac + c_b * n / causal_tiles) / (1 + c_b * n / causal_tiles)
    assert frac < wb < wf < 1.0  # the blocks' fixed work keeps more of the time than the tiles alone
    expected = spec.n_layers * ((1.0 - wf) * fwd_s + (1.0 - wb) * bwd_s)
    got = float(full.breakdown_s["compute_s"]) - float(windowed.breakdown_s["compute_s"])
    assert got == pytest.approx(expected, rel=1e-6)
    said = [a for a in windowed.assumptions if a.startswith("sliding-window attention")]
    assert len(said) == 1 and f"{frac:.0%} of the tiles" in said[0] and "32 of 32 attention layers" in said[0]
    assert not any("window" in a for a in full.assumptions)


def test_a_causal_kernel_runs_at_its_causal_rate(db):
    """Llama 2 7B at 4096 tokens on one H100: every layer's flash time is the causal half of the scores at the
    native kernel's causal rate for 4096 tokens (gpusim.model.llm.causal_rate_frac: FlashAttention-3 forward 579 of
    648 TFLOP/s, backward 542 of 561 x 531.6 / 553.9); the tile size no longer enters a plain causal mask."""
    from gpusim.workload import get_workload

    wl = get_workload("llama2-7b", seq_len=4096)
    sc = _scenario(wl, 4096)
    coarse = DEFAULT_PARAMS
    fine = DEFAULT_PARAMS.model_copy(update={"flash_block_tokens": 16.0})
    t_coarse = float(simulate(sc, db=db, params=coarse, recommend=False).breakdown_s["compute_s"])
    t_fine = float(simulate(sc, db=db, params=fine, recommend=False).breakdown_s["compute_s"])
    assert t_coarse == pytest.approx(t_fine, rel=1e-12)
    slow = coarse.model_copy(update={"flash_fwd_eff_frac": coarse.flash_fwd_eff_frac / 2})
    t_slow = float(simulate(sc, db=db, params=slow, recommend=False).breakdown_s["compute_s"])
    _, _, row = build_inputs(sc, db=db, params=coarse)
    ceiling = row["ceiling_flop_per_s"]
    if not math.isfinite(ceiling):
        ceiling = coarse.gemm_ceiling_frac * row["peak_flop_per_s"]
    s, q = 4096.0, float(wl.transformer.q_dim)
    half = 0.5 * 2.0 * s * s * (q + q)
    # halving the forward rate adds one more forward's time per layer, at the causal rate of 4096 tokens
    expected = wl.transformer.n_layers * half / (ceiling * coarse.flash_fwd_eff_frac * (579.0 / 648.0))
    assert t_slow - t_coarse == pytest.approx(expected, rel=1e-6)


def test_no_gain_within_the_window_or_with_unfused_attention(db):
    from gpusim.rows import apply_attention
    from gpusim.workload import get_workload

    p = DEFAULT_PARAMS
    short = get_workload("mistral-7b", seq_len=4096)  # the window holds the whole sequence
    _, _, row = build_inputs(_scenario(short, 4096), db=db, params=p)
    assert "attn_tile_frac" not in row
    unfused = apply_attention(get_workload("mistral-7b", seq_len=8192), "unfused")
    _, _, row = build_inputs(_scenario(unfused), db=db, params=p)
    assert "attn_tile_frac" not in row


def test_llama4_chunks_are_counted_as_chunks():
    """Llama 4's chunked attention (from its config.json) reaches the step model as chunks, not a sliding window:
    at four chunks a sequence its three RoPE layers in four cost a quarter of a causal mask's tiles (plus the
    diagonal), a sliding window of the same size about twice that."""
    from pathlib import Path

    from gpusim.workload.from_config import spec_from_config

    cfg = Path(__file__).resolve().parents[1] / "workload" / "configs" / "llama4-scout-17b-16e.json"
    spec = spec_from_config(str(cfg))[0]
    assert spec.attention_chunked and spec.attention_window == 8192
    chunked = attention_tile_frac(32768, 8192, 128, chunked=True)
    sliding = attention_tile_frac(32768, 8192, 128)
    n, c = 32768 // 128, 8192 // 128
    assert chunked == pytest.approx(4 * c * (c + 1) / (n * (n + 1)))
    assert sliding > 1.6 * chunked


def test_data_parallel_path_charges_a_causal_kernel_its_tiles(db):
    """The data-parallel (per-layer-group) path: a decoder's fused attention group counts every query against every
    key (no causal halving, the count MFU uses); its time is charged for the causal half at the causal kernel's rate
    (gpusim.model.llm.causal_rate_frac: 0.5 / 0.9483 at 8192 tokens on Hopper), while the MFU's FLOPs stay the
    workload's."""
    from gpusim.rows import FUSED_ATTENTION_GROUP, attention_kernel_frac, roofline_by_kind
    from gpusim.workload import get_workload

    p = DEFAULT_PARAMS
    wl = get_workload("llama3-8b", seq_len=8192)
    frac = attention_kernel_frac(wl, 8192, p)
    rate = 3.5 / (1 / (602 / 648) + 2.5 / (559 / 561 * 531.6 / 553.9))
    assert frac == pytest.approx(0.5 / rate) and rate == pytest.approx(0.9483, abs=1e-4)
    kinds, plain = roofline_by_kind(wl)
    _, scaled = roofline_by_kind(wl, frac)
    i = [g.name for g in wl.layers if g.kind == "attention"].index(FUSED_ATTENTION_GROUP)
    j = [k for k, kind in enumerate(kinds) if kind == "attention"][i]
    assert scaled["fwd_flop_per_sample"][j] == pytest.approx(frac * plain["fwd_flop_per_sample"][j])
    others = np.arange(len(kinds)) != j
    assert np.array_equal(scaled["fwd_flop_per_sample"][others], plain["fwd_flop_per_sample"][others])
    sc = Scenario.create(workload=wl, gpu="h100-sxm", gpus=8, kind="ddp", precision="bf16", micro_batch=1,
                         global_batch=8, seq_len=8192)
    _, _, row = build_inputs(sc, db=db, params=p)
    assert row["fwd_flop_per_sample"] == pytest.approx(wl.fwd_flop_per_sample)  # MFU's count unchanged


def test_kernel_fraction_hand_worked_and_where_it_does_not_apply():
    from gpusim.rows import apply_attention, attention_kernel_frac
    from gpusim.workload import get_workload

    p = DEFAULT_PARAMS
    # s = 512: the causal kernel's half of the scores at its 512-token rate (FlashAttention-3 forward 292 of 648,
    # backward 316 of 561 x 531.6 / 553.9), FlashAttention-2's on Ampere (191 of 370, 214 of 322 x 287.1 / 290.6)
    from gpusim.model.llm import FA2

    l512 = get_workload("llama3-8b", seq_len=512)
    hop = 3.5 / (648 / 292 + 2.5 * 561 / 316 * 553.9 / 531.6)
    assert attention_kernel_frac(l512, 512, p) == pytest.approx(0.5 / hop)
    fa2 = 3.5 / (370 / 191 + 2.5 * 322 / 214 * 290.6 / 287.1)
    assert attention_kernel_frac(l512, 512, p, FA2) == pytest.approx(0.5 / fa2)
    # bidirectional encoders visit every tile; an unfused kernel computes the full score matrix
    assert attention_kernel_frac(get_workload("bert-large"), 512, p) == 1.0
    assert attention_kernel_frac(apply_attention(get_workload("llama3-8b", seq_len=512), "unfused"), 512, p) == 1.0
    # Mistral 7B at 8192 tokens, a 4096-key window on every layer: counted 4096 keys per query (half the causal
    # count); the kernel visits the window's tiles and pays each of its 64 query blocks' fixed work, c_f forward and
    # c_b backward tiles (gpusim.model.llm.window_time_frac), against the causal call's tiles and blocks
    wl = get_workload("mistral-7b", seq_len=8192)
    n, c = 64, 32
    tiles = sum(min(m, c) + 1 for m in range(n))  # query block m visits blocks max(0, m - 32) .. m
    causal_tiles = 64 * 65 / 2
    c_f, c_b = (float(v) for v in query_block_overhead_tiles(HOPPER, p))
    wf, wb = ((tiles + k * n) / (causal_tiles + k * n) for k in (c_f, c_b))
    f, b = 602 / 648, 559 / 561 * 531.6 / 553.9  # the causal kernel's rates at 8192 tokens
    assert attention_kernel_frac(wl, 8192, p) == pytest.approx(0.5 * (wf / f + 2.5 * wb / b) / 3.5 * 2)


@pytest.mark.parametrize("window", [0, -5, 3.5, True, "128"])
def test_a_bad_window_is_a_clear_error(window):
    from gpusim.errors import ScenarioError
    from gpusim.workload import get_workload

    spec = get_workload("mistral-7b").transformer
    with pytest.raises(ScenarioError, match="attention_window .* must be a positive integer or None"):
        dataclasses.replace(spec, attention_window=window)


@pytest.mark.parametrize("model, seq", [("mistral-7b", 8192), ("mistral-7b", 4096), ("llama3-8b", 8192)])
def test_both_paths_count_the_same_model_flops(db, model, seq):
    """MFU's count is the workload's (gpusim.workload.flops: a window's keys on its layers) on the per-GEMM path as on
    the data-parallel path: MFU x step, the model FLOPs over the GPUs' peak, is the same on both (Mistral's 4096-key
    window at 8192 tokens is where the per-GEMM path once counted every key)."""
    from gpusim.workload import get_workload

    wl = get_workload(model, seq_len=seq)
    common = dict(workload=wl, gpu="h100-sxm", gpus=1, kind="ddp", precision="bf16", micro_batch=1, global_batch=1,
                  seq_len=seq)
    llm = simulate(Scenario.create(**common, tp=1, pp=1, recompute="none"), db=db, recommend=False)
    dp = simulate(Scenario.create(**common), db=db, recommend=False)
    assert llm.mfu_frac * llm.step_s == pytest.approx(dp.mfu_frac * dp.step_s, rel=1e-12)


def test_a_query_block_s_fixed_work_follows_from_the_causal_tables():
    """The closed form of query_block_overhead_tiles on its docstring's hand-worked cases (B = 128): Blackwell's forward
    table (501 at 1K, 872 at 16K) gives c = 36 x 8256 x (1 - rho) / (rho x 8256 x 8 - 36 x 128) = 3.79 tiles, Hopper's
    forward 2.28, both backward tables 1.60; the model it implies, T / (T + c n), reproduces the rest of Blackwell's
    forward table within 4%; a window's time fraction on the docstring's 4096-token case is 0.284."""
    import numpy as np

    from gpusim.model.llm import BLACKWELL, window_time_frac

    p = DEFAULT_PARAMS
    c_f, c_b = query_block_overhead_tiles(np.array([HOPPER, BLACKWELL]), p)
    rho = 501.0 / 872.0
    assert c_f[1] == pytest.approx(36 * 8256 * (1 - rho) / (rho * 8256 * 8 - 36 * 128), rel=1e-9)
    assert c_f[1] == pytest.approx(3.79, abs=0.01) and c_f[0] == pytest.approx(2.28, abs=0.01)
    assert c_b[0] == pytest.approx(1.60, abs=0.01) and c_b[1] == pytest.approx(c_b[0])
    for s, table in ((2048, 657.0), (4096, 770.0), (8192, 838.0)):
        n = s / 128
        t = n * (n + 1) / 2
        implied = (t / (t + c_f[1] * n)) / (8256 / (8256 + c_f[1] * 128))
        assert implied == pytest.approx(table / 872.0, rel=0.04), s
    assert window_time_frac(1.0, 63 / 528, 32 / 528, 3.79) == pytest.approx(0.284, abs=0.001)
    assert window_time_frac(0.0, 63 / 528, 32 / 528, 3.79) == 1.0  # no windowed layer: the causal call
