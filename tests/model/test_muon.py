"""[issue 17] Muon (gpusim.optimizers): the Newton-Schulz FLOPs of one matrix and the Muon / AdamW split of a model by
hand, what it saves in memory and adds to the optimizer step against Adam, and bad input."""

from __future__ import annotations

import json

import pytest

import gpusim
from gpusim.cli import main
from gpusim.optimizers import muon_split, newton_schulz_flop
from gpusim.params import DEFAULT_PARAMS
from gpusim.simulation import Scenario, simulate
from gpusim.workload import get_workload


def test_newton_schulz_flops_by_hand():
    # 5 x (4 a^2 b + 2 a^3), a the smaller side: the same for a matrix and its transpose
    assert newton_schulz_flop(2048, 7168) == pytest.approx(5 * (4 * 2048**2 * 7168 + 2 * 2048**3), rel=1e-15)
    assert newton_schulz_flop(2048, 7168) == pytest.approx(6.872e11, rel=1e-3)
    assert newton_schulz_flop(7168, 2048) == newton_schulz_flop(2048, 7168)
    assert newton_schulz_flop(64, 64, steps=1) == 6 * 64**3


def test_llama3_8b_split_by_hand():
    """Llama 3 8B: AdamW takes the untied embedding and head (2 x 128256 x 4096) and the 2 x 32 + 1 RMSNorm weights;
    Muon the rest, attention as 4096 x 4096 matrices and the SwiGLU MLP as 4096 x 14336 ones."""
    w = get_workload("llama3-8b")
    h, V, L, f = 4096, 128256, 32, 14336
    adamw = 2 * V * h + (2 * L + 1) * h
    share, flop = muon_split(w)
    assert share == pytest.approx(1 - adamw / w.params, rel=1e-12)
    attn = L * (h * h * 2 + h * 1024 * 2)  # q, o and the grouped k, v (8 heads of 128)
    mlp = L * 3 * h * f
    by_hand = (attn * newton_schulz_flop(h, h) / (h * h) + mlp * newton_schulz_flop(h, f) / (h * f)) / (attn + mlp)
    assert flop == pytest.approx(by_hand, rel=1e-12)


def test_muon_keeps_one_state_and_adds_its_gemms(db):
    """ZeRO-1 over 8 H100: Muon's optimizer memory is Adam's less 4 bytes per Muon parameter over the 8 ranks; its step
    moves 8 bytes less per Muon parameter and adds the Newton-Schulz FLOPs at the bf16 GEMM ceiling."""
    kw = dict(model="llama3-8b", gpu="h100-sxm", gpus=8, per_gpu_batch=1, seq_len=8192, strategy="zero1",
              activation_checkpointing=True)
    adam = simulate(Scenario(**kw), db=db, recommend=False)
    muon = simulate(Scenario(**kw, optimizer="muon"), db=db, recommend=False)
    w = get_workload("llama3-8b", seq_len=8192)
    share, flop = muon_split(w)
    P_local = w.params / 8
    saved = 4.0 * share * P_local
    assert adam.memory_breakdown_bytes["optimizer"] - muon.memory_breakdown_bytes["optimizer"] == pytest.approx(
        saved, rel=1e-9)
    gpu = db.gpu("h100-sxm")
    p = DEFAULT_PARAMS
    extra = (-8.0 * share * P_local / (gpu.memory_bytes_per_s * p.mem_eff_frac)
             + share * flop * P_local / (p.gemm_ceiling_frac * gpu.peak_flop_per_s("bf16")))
    assert muon.breakdown_s["optimizer_s"] - adam.breakdown_s["optimizer_s"] == pytest.approx(extra, rel=1e-9)
    assert muon.step_s > adam.step_s and muon.memory_per_gpu_bytes < adam.memory_per_gpu_bytes


def test_muon_on_an_llm_layout_and_the_cli_is_the_api(capsys, db):
    """Kimi K2's published layout (256 GB300, ep 64): Muon's one state frees memory per GPU; the CLI's --optimizer muon
    gives the Python API's numbers."""
    kw = dict(model="kimi-k2", gpu="gb300", gpus=256, nodes=64, tp=1, pp=4, vp=4, ep=64, micro_batch=2,
              global_batch=4096, seq_len=4096, strategy="zero1", precision="mxfp8", uneven_pp=True)
    adam = simulate(Scenario.create(**kw), db=db, recommend=False)
    muon = simulate(Scenario.create(**kw, optimizer="muon"), db=db, recommend=False)
    assert muon.memory_breakdown_bytes["optimizer"] < adam.memory_breakdown_bytes["optimizer"]
    assert muon.breakdown_s["optimizer_s"] > adam.breakdown_s["optimizer_s"]
    api = gpusim.predict(model="llama3-8b", gpu="h100-sxm", gpus=8, per_gpu_batch=1, strategy="zero1",
                         optimizer="muon").to_dict()
    capsys.readouterr()
    assert main(["predict", "--model", "llama3-8b", "--gpu", "h100-sxm", "--gpus", "8", "--per-gpu-batch", "1",
                 "--strategy", "zero1", "--optimizer", "muon", "--json"]) == 0
    cli = json.loads(capsys.readouterr().out)
    assert cli["step_s"] == api["step_s"] and cli["memory_per_gpu_bytes"] == api["memory_per_gpu_bytes"]


@pytest.mark.parametrize("args, words", [
    (["--model", "resnet50", "--per-gpu-batch", "64"], "needs the shapes of the model's weight matrices"),
    (["--model", "llama3-8b", "--per-gpu-batch", "1", "--strategy", "zero1", "--cpu-offload"],
     "leave cpu_offload off with optimizer muon"),
])
def test_bad_muon_input_exits_2_with_the_fix(capsys, args, words):
    code = main(["predict", "--gpu", "h100-sxm", "--gpus", "8", "--optimizer", "muon", *args])
    assert code == 2 and words in capsys.readouterr().err


def test_a_runs_optimizer_token(db, run_row):
    from gpusim.validation_runs import predict_row

    row = run_row(notes="strategy=zero1; optimizer=muon")
    muon, adam = predict_row(row, db=db), predict_row({**row, "notes": "strategy=zero1"}, db=db)
    assert not muon.error and muon.step_s > adam.step_s
    bad = predict_row({**row, "notes": "strategy=zero1; optimizer=lion"}, db=db)
    assert "optimizer='lion' in the notes is not adam, adamw or muon" in bad.error


def test_dist_muon_all_reduces_the_gradients_closed_form():
    """Megatron-Core's layer-wise Muon all-reduces the gradient buckets where the distributed optimizer
    reduce-scatters them. With a stub collective of 1 ns per byte for a reduce-scatter or all-gather and 2 ns for an
    all-reduce (a ring moves twice the bytes), 10 buckets of 100 B each side, no overlap: Adam's step exposes
    1000 + 1000 ns, Muon's 2000 + 1000 ns; with long windows only the last gradient bucket (200 ns for Muon) and the
    first parameter bucket (100 ns) stay exposed."""
    import numpy as np

    from gpusim.model import comm as C
    from gpusim.model.distinct import Distinct
    from gpusim.model.step import _distopt_comm

    def coll(kind, x, *fabric):
        return np.asarray(x, dtype=float) * (2e-9 if kind == C.ALL_REDUCE else 1e-9)

    one = np.ones(1)
    fabric = dict.fromkeys(("n", "nodes", "intra", "intra_hop", "inter", "inter_hop", "nvls", "ll_max", "ll128",
                            "host_cpu"), one)

    def ctx(window, ar):
        return {"G": 1000.0 * one, "W": 1000.0 * one, "bucket": 100.0 * one, "bwd_s": window * one,
                "fwd_ov_s": window * one, "grad_ar": np.array([ar]), **fabric}

    assert _distopt_comm(ctx(0.0, False), coll, Distinct(), 1.0)[0] == pytest.approx(2000e-9)
    assert _distopt_comm(ctx(0.0, True), coll, Distinct(), 1.0)[0] == pytest.approx(3000e-9)
    assert _distopt_comm(ctx(1.0, True), coll, Distinct(), 1.0)[0] == pytest.approx(300e-9)
    assert _distopt_comm(ctx(1.0, True), coll, Distinct(), 1.0)[2] == pytest.approx(3000e-9)


def test_muon_layouts_move_more_gradient_bytes(db):
    """On an LLM layout (ZeRO-1, bf16 gradients so that gradients and parameters are the same bytes) Muon's
    data-parallel traffic is Adam's plus one more reduce-scatter's worth: between 1.3x and 1.5x of Adam's."""
    kw = dict(model="llama3-8b", gpu="h100-sxm", gpus=16, nodes=2, tp=1, pp=1, micro_batch=1, global_batch=64,
              seq_len=8192, strategy="zero1", grad_dtype="bf16")
    adam = simulate(Scenario.create(**kw), db=db, recommend=False).detail["comm_total_s"]
    muon = simulate(Scenario.create(**kw, optimizer="muon"), db=db, recommend=False).detail["comm_total_s"]
    assert 1.3 < muon / adam <= 1.5
