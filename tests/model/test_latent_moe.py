"""[stop 48] LatentMoE (Nemotron 3 Super / Ultra, ``moe_latent_size``): the router reads the full width, the experts,
their dispatch and their all-to-all work at the latent width, and two projections ``h <-> l`` surround them.
Closed forms on hand-worked cases, the equivalence with a model whose width is the latent, the Super config, bad
input."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from gpusim.cli import main
from gpusim.errors import ScenarioError
from gpusim.model import experts as EXP
from gpusim.params import DEFAULT_PARAMS
from gpusim.workload import get_workload
from gpusim.workload.transformer import TransformerSpec

CONFIGS = Path(__file__).resolve().parents[1] / "workload" / "configs"
SUPER = CONFIGS / "nemotron-3-super-120b-a12b.json"


def _x(**kw):
    x = {"moe_frac": 1.0, "d_model": 4096.0, "n_experts": 64.0, "top_k": 4.0, "expert_ff_dim": 1024.0,
         "shared_ff_dim": 0.0, "ff_dim": 0.0, "ffn_mats": 2.0, "ep": 8.0, "expert_tp": 1.0, "moe_capacity": np.nan,
         "moe_imbalance_frac": 0.0, "gpus_per_node": 8.0, "n_nodes": 1.0, "inter_busbw_bytes_per_s": 400e9}
    x.update(kw)
    return x


def _terms(x, coll):
    flop = []

    def gemm(m, n, k, batch=1.0, **kw):
        flop.append(2.0 * np.asarray(m) * n * k * batch)
        return 2.0 * np.asarray(m) * n * k * batch / 1e15  # 1 PFLOP/s, no memory bound: time = FLOPs

    out = EXP.moe_layer_terms(x, DEFAULT_PARAMS, gemm=gemm, T=4096.0, tp=1.0, e=2.0, mem_rate=1e12, domain=8.0,
                              g=8.0, coll=coll)
    return out, flop


def test_latent_experts_params_per_rank_hand_worked():
    # 64 experts of 1024 on ep 8: 8 local experts of l x f x 2 matrices; router h E; the projections 2 h l
    h, lat, E, f = 4096.0, 1024.0, 64.0, 1024.0
    delta, expert = EXP.moe_params_per_rank(_x(moe_latent_dim=lat), 1.0)
    assert float(expert) == pytest.approx(8 * lat * f * 2)
    assert float(delta) == pytest.approx(h * E + 8 * lat * f * 2 + 2 * h * lat)
    _, full = EXP.moe_params_per_rank(_x(), 1.0)
    assert float(full) == pytest.approx(8 * h * f * 2)


def test_the_all_to_all_carries_latent_wide_tokens():
    # what the collectives model is asked to move: tokens x top-k x width x 2 bytes, at the latent width
    sizes = []

    def coll(kind, size, *a, **k):
        sizes.append(float(np.max(size)))
        return 0.0

    _terms(_x(moe_latent_dim=1024.0), coll)
    lat_bytes = max(sizes)
    sizes.clear()
    _terms(_x(), coll)
    assert lat_bytes == pytest.approx(max(sizes) * 1024.0 / 4096.0, rel=1e-12)
    # the rank's whole buffer (the collectives model takes the share that stays on the rank out): T k l e
    assert lat_bytes == pytest.approx(4096 * 4 * 1024 * 2, rel=1e-12)


def test_latent_layer_is_a_narrow_moe_plus_two_projections_and_a_full_width_router():
    # with GEMM time = FLOPs: the latent layer's forward GEMM FLOPs are a d_model = l layer's expert FLOPs, the router
    # at the full width, and the projections 2 x 2 T h l
    h, lat, T, E, k, f = 4096.0, 1024.0, 4096.0, 64.0, 4.0, 1024.0
    _, flop = _terms(_x(moe_latent_dim=lat), lambda *a, **kw: 0.0)
    _, narrow = _terms(_x(d_model=lat), lambda *a, **kw: 0.0)
    # every GEMM the narrow layer runs, the latent one runs too, except the router (h E instead of l E)
    router_lat, router_h = 2 * T * E * lat, 2 * T * E * h
    proj = 2 * 2 * T * h * lat
    total_lat = sum(float(np.sum(v)) for v in flop)
    total_narrow = sum(float(np.sum(v)) for v in narrow)
    # forward and backward of each GEMM (the backward's two GEMMs are twice the forward's): 3 x the forward FLOPs
    assert total_lat - total_narrow == pytest.approx(3 * (router_h - router_lat + proj), rel=1e-9)
    # and the experts' forward FLOPs are T k x (2 l f) x 2 matrices, as the model FLOPs count them
    x = _x(moe_latent_dim=lat)
    assert float(EXP.moe_flop_delta_per_token(x)) == pytest.approx(2 * h * E + 2 * 2 * k * lat * f + 4 * h * lat)


def test_nemotron_3_super_config_loads_with_its_latent():
    wl = get_workload(str(SUPER))
    sp = wl.transformer
    assert sp.moe_latent_dim == 1024 and sp.expert_io_dim == 1024.0
    assert (sp.n_mamba_layers, sp.n_moe_layers, sp.n_attn_layers) == (40, 40, 8)
    emb = 2 * sp.d_model * sp.vocab_size
    total = sum(sp.layer_params(i) for i in range(sp.n_layers)) + emb
    active = sum(sp.layer_params(i, active=True) for i in range(sp.n_layers)) + emb
    # published: 120B total, 12B active ("Nemotron-3-Super-120B-A12B"); the MTP layer is not counted
    assert 118e9 < total < 123e9
    assert 11.5e9 < active < 13.5e9
    # a routed expert maps the 1024-wide latent: 2 x 1024 x 2688 weights, not 2 x 4096 x 2688
    assert sp.expert_params() == 2 * 1024 * 2688
    assert sp.latent_proj_params() == 2 * 4096 * 1024
    # `gpusim models show` names the projections as their own part, which adds up with the others
    from gpusim.workload.flops import breakdown

    parts = {r["part"]: r for r in breakdown(wl)}
    assert parts["latent projections"]["params"] == 40 * 2 * 4096 * 1024
    assert parts["latent projections"]["fwd_flop_per_token"] == pytest.approx(40 * 2 * 2 * 4096 * 1024)
    assert not any(p.startswith("other") for p in parts)


def test_latent_moe_predicts_faster_and_lighter_than_the_same_model_at_full_width(tmp_path, capsys):
    cfg = json.loads(SUPER.read_text())
    assert main(["predict", "--model", str(SUPER), "--gpu", "gb300", "--gpus", "64", "--ep", "64", "--strategy", "zero1",
                 "--micro-batch", "1", "--global-batch", "512", "--seq-len", "8192", "--precision", "mxfp8",
                 "--json"]) == 0
    lat = json.loads(capsys.readouterr().out)
    full = tmp_path / "config.json"  # the same model with its experts at the full width
    full.write_text(json.dumps({k: v for k, v in cfg.items() if k != "moe_latent_size"}))
    assert main(["predict", "--model", str(full), "--gpu", "gb300", "--gpus", "64", "--ep", "64", "--strategy",
                 "zero1", "--micro-batch", "1", "--global-batch", "512", "--seq-len", "8192", "--precision",
                 "mxfp8", "--json"]) == 0
    wide = json.loads(capsys.readouterr().out)
    assert lat["step_s"] < wide["step_s"]
    assert lat["breakdown_s"]["ep_comm_exposed_s"] < wide["breakdown_s"]["ep_comm_exposed_s"]
    assert lat["memory_per_gpu_bytes"] < wide["memory_per_gpu_bytes"]


def test_bad_latent_input_is_refused():
    base = dict(n_layers=2, d_model=1024, n_heads=8, seq_len=128, vocab_size=1000, d_ff=4096)
    with pytest.raises(ScenarioError, match="moe_latent_dim"):
        TransformerSpec(**base, n_experts=8, top_k=2, moe_latent_dim=2048)
    with pytest.raises(ScenarioError, match="mixture-of-experts"):
        TransformerSpec(**base, moe_latent_dim=512)


def test_cli_latent_wider_than_the_model_exits_2(tmp_path, capsys):
    cfg = json.loads(SUPER.read_text())
    cfg["moe_latent_size"] = 8192
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    assert main(["predict", "--model", str(path), "--gpu", "gb300", "--gpus", "64", "--ep", "64"]) == 2
    err = capsys.readouterr().err
    assert "moe_latent_size" in err and "hidden_size=4096" in err
