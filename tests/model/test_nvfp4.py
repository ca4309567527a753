"""[issue 17] NVFP4 training (gpusim.model.fp8, mode NVFP4): the quantisation bytes of Transformer Engine's
NVFP4BlockScaling in closed form, the FP4 kernel ceiling, the weights' copies, the Blackwell-only precision, and
Transformer Engine's B300 GEMM profile as the test of the cast model."""

from __future__ import annotations

import numpy as np
import pytest

from gpusim import validation_gemm as VG
from gpusim.cli import main
from gpusim.errors import ScenarioError
from gpusim.hwdb import load
from gpusim.model import fp8 as FP8
from gpusim.params import DEFAULT_PARAMS as P
from gpusim.simulation import Scenario, simulate

L70 = dict(model="llama3-70b", seq_len=8192, gpu="gb200", gpus=64, nodes=16, kind="zero1", global_batch=256, per_gpu_batch=1,
           tp=2, pp=4, vp=5)


def test_cast_bytes_closed_form():
    # one quantisation of a bf16 input or gradient: the amax pass reads it (2), the row-wise cast reads it and writes
    # half a byte plus one E4M3 scale per 16 elements (2 + 9/16), the Hadamard-transformed column-wise cast the same
    assert FP8.CAST_BYTES[FP8.NVFP4] == 2.0 + 2.0 * (2.0 + 0.5 + 1.0 / 16.0) == 7.125
    # a weight: 16x16 blocks, no transform: the amax pass and one kernel writing both copies
    assert FP8.WEIGHT_CAST_BYTES[FP8.NVFP4] == 2.0 + 2.0 + 2.0 * 0.5625 == 5.125
    assert FP8.WEIGHT_CAST_BYTES[FP8.CURRENT] == FP8.CAST_BYTES[FP8.CURRENT]  # the FP8 recipes as before
    # TE cannot fuse the quantisation into the norm or the activation (the transform's amax): a separate full pass
    assert FP8.NORM_FUSED_BYTES[FP8.NVFP4] == FP8.ACT_FUSED_BYTES[FP8.NVFP4] == FP8.CAST_BYTES[FP8.NVFP4]
    # Llama 3 70B at tp 4, one 8192-token micro-batch (tests/model/test_fp8.py's layer): per token forward the attention
    # output (q/t 2048), the two norm outputs (2h 16384) and the activation output (f/t 7168); backward the gradients
    # from attention and the residual (18944) and the activation's gradient (2f/t 14336): every one a full 7.125 bytes
    T, h, q, kv, f, tp, rate = 8192.0, 8192.0, 8192.0, 1024.0, 28672.0, 4.0, 1e12
    fwd, bwd = FP8.layer_cast_s(FP8.NVFP4, T=T, h=h, q=q, kv=kv, f=f, up=2.0, tp=tp, mem_rate=rate, kernel_tail_s=0.0)
    assert float(fwd) == pytest.approx(T * 25600 * 7.125 / rate)
    assert float(bwd) == pytest.approx(T * 33280 * 7.125 / rate)
    assert float(FP8.weight_cast_s(FP8.NVFP4, 1e9, rate)) == pytest.approx(1e9 * 5.125 / rate)


def test_weights_operands_and_saved_inputs():
    # two FP4 copies with their scales beside the bf16 weight, even with fp8_param_gather and a sharded optimizer
    # (Megatron-Bridge's NVFP4 recipe has no FP4 parameter all-gather): 2 + 1.125; the gather stays bf16
    assert FP8.weight_copy_bytes_per_param(FP8.NVFP4) == 1.125
    assert float(FP8.weight_state_bytes(FP8.NVFP4, True, True)) == 3.125
    assert float(FP8.weight_state_bytes(FP8.MX, True, True)) == pytest.approx(2.0625)  # MXFP8 unchanged
    assert float(FP8.param_gather_bytes(FP8.NVFP4, True, True)) == 2.0
    assert FP8.operand_bytes(FP8.NVFP4) == 0.5625 and FP8.operand_bytes(FP8.CURRENT) == 1.0
    assert FP8.te_saved_input_bytes(FP8.NVFP4) == 0.5625
    assert FP8.tp_input_gather_bytes(FP8.NVFP4, 2.0) == (1.125, 0.5625)
    assert FP8.mode_code("nvfp4", "delayed", "10.0") == FP8.NVFP4


def test_fp4_ceiling_hand_worked():
    # B300: the sustained FP8 ceiling (3353.3 TFLOP/s burst x 0.823) times the measured kernel speed-up 1.81, below
    # its datasheet FP4 / FP8 ratio 13,125 / 4,500 = 2.917; a GPU whose datasheet ratio is smaller is capped by it
    assert P.nvfp4_gemm_speedup == pytest.approx(6.812 / 3.764, abs=5e-4)
    g = load().gpu("b300")
    c8 = g.training_matmul_flop_per_s("fp8")
    assert c8 == pytest.approx(3353.3e12 * 0.823)
    got = FP8.nvfp4_ceiling_flop_per_s(c8, g.peak_flop_per_s("fp4"), g.peak_flop_per_s("fp8"), P.nvfp4_gemm_speedup)
    assert float(got) == pytest.approx(c8 * 1.810)
    assert float(FP8.nvfp4_ceiling_flop_per_s(1e15, 3e15, 2e15, 1.81)) == pytest.approx(1.5e15)


def test_nvfp4_step_faster_than_mxfp8_by_less_than_its_kernels():
    mx = simulate(Scenario(**L70, precision="mxfp8"))
    fp4 = simulate(Scenario(**L70, precision="nvfp4"))
    bf16 = simulate(Scenario(**L70, precision="bf16"))
    # the GEMMs run up to 1.81x faster; attention, norms, communication and the heavier casts do not
    assert fp4.step_s < mx.step_s < bf16.step_s
    assert mx.step_s / fp4.step_s < P.nvfp4_gemm_speedup / P.mxfp8_gemm_rate_frac
    # MFU is over the precision's own datasheet peak (FP4 here)
    g = load().gpu("gb200")
    assert fp4.mfu_frac * g.peak_flop_per_s("fp4") == pytest.approx(
        mx.mfu_frac * g.peak_flop_per_s("fp8") * mx.step_s / fp4.step_s, rel=1e-9)


def test_nvfp4_refused_off_blackwell_with_the_fix(capsys):
    with pytest.raises(ScenarioError, match="nvfp4 needs NVIDIA Blackwell"):
        simulate(Scenario(**{**L70, "gpu": "h100-sxm"}, precision="nvfp4"))
    for argv in (["--tp", "8", "--micro-batch", "1", "--global-batch", "64"], ["--per-gpu-batch", "2"]):
        code = main(["predict", "--model", "llama3-8b", "--gpu", "h100-sxm", "--gpus", "8", "--precision", "nvfp4",
                     *argv])
        err = capsys.readouterr()[1]
        assert code == 2 and "nvfp4 needs NVIDIA Blackwell" in err and "--precision fp8" in err
        assert len(err.strip().splitlines()) == 1
    assert main(["predict", "--model", "llama3-8b", "--gpu", "b200", "--gpus", "8", "--precision", "nvfp4",
                 "--micro-batch", "1", "--global-batch", "64"]) == 0


def test_te_profile_nvfp4_rows():
    """The three pre-quantised NVFP4 rows set nvfp4_gemm_speedup (named as such); the autocast rows, kernels plus every
    operand quantised per GEMM, test the cast model: the layer's NVFP4 / BF16 GEMM time within 10% of the measured
    ratio (0.506)."""
    results = VG.run()
    assert {f"te-b300-prequant-nvfp4-{p}-all" for p in VG.PASSES} <= VG.USED_FOR_DEFAULTS
    ratio = {(q["mode"], q["precision"]): q for q in VG.summarize(results)["ratios"] if q["gpu"] == "b300"}
    auto = ratio[("autocast", "nvfp4")]
    assert auto["measured_ratio"] == pytest.approx((1.932 + 2.189 + 2.331) / 12.758, abs=1e-3)
    assert auto["predicted_ratio"] == pytest.approx(auto["measured_ratio"], rel=0.10)
    # the quantisation costs what the guide's autocast-minus-kernels gap says it does, to within a third
    rows = {r.row_id: r for r in results}
    cast_pred = sum(rows[f"te-b300-autocast-nvfp4-{p}-all"].predicted_ms - rows[f"te-b300-autocast-nvfp4-{p}-all"].gemm_ms
                    for p in ("dgrad", "wgrad"))
    cast_meas = (2.189 - 1.305) + (2.331 - 1.205)
    assert cast_pred == pytest.approx(cast_meas, rel=1 / 3)
    assert np.isfinite(cast_pred)


def test_nvfp4_prediction_carries_its_own_track_record(capsys):
    """An NVFP4 layout's report takes the published NVFP4 runs' band, not FP8's (gpusim.track_record.key_for)."""
    assert main(["predict", "--model", "llama3-70b", "--gpu", "gb200", "--gpus", "64", "--nodes", "16", "--tp", "2",
                 "--pp", "4", "--vp", "5", "--micro-batch", "1", "--global-batch", "256", "--seq-len", "8192",
                 "--strategy", "zero1", "--precision", "nvfp4"]) == 0
    out = capsys.readouterr()[0]
    assert "published dense NVFP4 training runs" in out


def test_bf16_stage_fracs_hand_worked():
    """[stop 57] Megatron-Core --first-last-layers-bf16: the share of bf16 layers per pipeline stage."""
    from gpusim.model.llm import bf16_stage_fracs

    first, mid, last = (float(v) for v in bf16_stage_fracs(1, 1, 80, 80, 4))
    assert (first, mid, last) == pytest.approx((0.05, 0.0, 0.05))
    one = [float(v) for v in bf16_stage_fracs(0, 14, 88, 88, 1)]
    assert one == pytest.approx([14 / 88] * 3)
    # 40 of 80 at the end on pp 4: the last stage all bf16, the 20 beyond it spread over the 2 middle stages
    assert [float(v) for v in bf16_stage_fracs(0, 40, 80, 80, 4)] == pytest.approx([0.0, 0.5, 1.0])


def test_bf16_layers_slow_the_stage_that_holds_them(capsys):
    base = dict(L70, precision="nvfp4")
    fp4 = simulate(Scenario(**base)).step_s
    two = simulate(Scenario(**base, bf16_layers_start=1, bf16_layers_end=1)).step_s
    last_stage = simulate(Scenario(**base, bf16_layers_end=20)).step_s  # pp 4: the whole last stage in bf16
    more = simulate(Scenario(**base, bf16_layers_end=40)).step_s  # the rest on middle stages: not the slowest
    bf16 = simulate(Scenario(**dict(L70, precision="bf16"))).step_s
    assert fp4 < two < last_stage < bf16
    assert more == pytest.approx(last_stage, rel=0.02)
    # one of the 20 layers of the first and last stage: about a twentieth of a layer's FP4-vs-BF16 gap more
    assert two / fp4 - 1 < (last_stage / fp4 - 1) / 10
    for argv, want in ((["--precision", "bf16", "--bf16-layers", "1", "1"], "needs --precision fp8, mxfp8 or nvfp4"),
                       (["--precision", "nvfp4", "--bf16-layers", "50", "40"], "80 layers")):
        code = main(["predict", "--model", "llama3-70b", "--gpu", "gb200", "--gpus", "64", "--nodes", "16", "--tp",
                     "2", "--pp", "4", "--micro-batch", "1", "--global-batch", "256", *argv])
        err = capsys.readouterr()[1]
        assert code == 2 and want in err and len(err.strip().splitlines()) == 1


def test_nvfp4_advice_on_blackwell_only_with_its_own_gain():
    """[stop 57] predict's llm-nvfp4 advice: the same layout in NVFP4, its gain the model's own, on Blackwell only,
    with the recipe's caveat (layers kept in bf16, the loss to compare)."""
    from gpusim.diagnose import FP8_GAIN_FRAC

    kw = dict(L70, precision="mxfp8")
    recs = {r["id"]: r for r in simulate(Scenario(**kw), recommend=True).recommendations}
    rec = recs["llm-nvfp4"]
    base = simulate(Scenario(**kw)).throughput_samples_per_s
    fp4 = simulate(Scenario(**{**kw, "precision": "nvfp4"})).throughput_samples_per_s
    assert rec["gain_frac"] == pytest.approx(fp4 / base - 1.0, abs=1e-4) and rec["gain_frac"] >= FP8_GAIN_FRAC
    assert rec["change"] == {"precision": "nvfp4"} and "--bf16-layers" in rec["message"] and "MXFP8" in rec["message"]
    hopper = dict(kw, gpu="h100-sxm", nodes=8, tp=8, precision="fp8")
    assert "llm-nvfp4" not in {r["id"] for r in simulate(Scenario(**hopper), recommend=True).recommendations}
    done = {r["id"] for r in simulate(Scenario(**dict(L70, precision="nvfp4")), recommend=True).recommendations}
    assert "llm-nvfp4" not in done


def test_plan_recommending_nvfp4_says_the_loss_is_yours_to_check(capsys):
    """[stop 57] A plan whose recommendation trains in NVFP4 carries the caveat among its reasons."""
    assert main(["plan", "--model", "llama3-70b", "--tokens", "1T", "--deadline", "30d", "--precision", "nvfp4",
                 "--gpu", "b200", "--no-progress"]) == 0
    out = capsys.readouterr()[0]
    assert "run it with" in out and "nvfp4" in out.split("Recommendation:")[1].split("\n")[1]
    assert "nvfp4: the least proven training precision" in out and "--bf16-layers" in out


def test_python_api_is_the_clis_twin_for_bf16_layers():
    """[stop 57] gpusim.predict(bf16_layers=[S, E]) is `gpusim predict --bf16-layers S E`: same step; a wrong count is
    a clear error."""
    import gpusim.api as A

    kw = dict(model="llama3-70b", gpu="gb200", gpus=64, nodes=16, tp=2, pp=4, vp=5, micro_batch=1, global_batch=256,
              precision="nvfp4", strategy="zero1")
    got = A.predict(**kw, bf16_layers=[1, 1]).step_s
    want = simulate(Scenario(**dict(L70, precision="nvfp4"), bf16_layers_start=1, bf16_layers_end=1)).step_s
    assert got == pytest.approx(want, rel=1e-12) and got > A.predict(**kw).step_s
    with pytest.raises(ScenarioError, match="bf16_layers takes 2 values"):
        A.predict(**kw, bf16_layers=[1])


def test_bf16_layers_on_a_model_without_transformer_layers_names_the_flag(capsys):
    """[stop 57] --bf16-layers puts a scenario on the LLM layout path; a CNN is refused naming that flag."""
    code = main(["predict", "--model", "resnet50", "--gpu", "b200", "--gpus", "8", "--per-gpu-batch", "32",
                 "--precision", "nvfp4", "--bf16-layers", "1", "1"])
    err = capsys.readouterr()[1]
    assert code == 2 and "--bf16-layers 1 1 needs a transformer" in err and len(err.strip().splitlines()) == 1
