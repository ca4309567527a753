"""FP8 training (gpusim.model.fp8): cast bytes in closed form, which recipe costs what, memory of the FP8 weight
copies, aliases and the Blackwell-only MXFP8."""

from __future__ import annotations

import numpy as np
import pytest

from gpusim.cli import main
from gpusim.errors import ScenarioError
from gpusim.model import fp8 as FP8
from gpusim.simulation import Scenario, simulate
from gpusim.strategy import Strategy

L70 = dict(model="llama3-70b", seq_len=8192, gpu="b200", gpus=64, nodes=8, kind="zero1", global_batch=128,
           per_gpu_batch=1, tp=4, pp=4, vp=5, recompute="selective")


def test_cast_bytes_closed_form():
    # [issue 17] one layer of Llama 3 70B at tp 4, one 8192-token micro-batch. Per token: the attention output q/t = 2048
    # elements and the gradients from attention and the residual stream (q + 2kv)/t + 2h = 2560 + 16384 = 18944 go
    # through a separate cast_transpose (delayed 4 bytes, current 6); the two norm outputs 2h = 16384, the activation
    # output f/t = 7168 and its gradient 2f/t = 14336 are quantised inside the kernel that makes them (delayed: +1
    # byte over its 16-bit write, current: 4). Delayed forward 2048*4 + (16384 + 7168)*1 = 31744 bytes per token,
    # backward 18944*4 + 14336 = 90112; current forward 2048*6 + 23552*4 = 106496, backward 18944*6 + 14336*4 = 171008.
    T, h, q, kv, f, tp, rate = 8192.0, 8192.0, 8192.0, 1024.0, 28672.0, 4.0, 1e12
    fwd, bwd = FP8.layer_cast_s(FP8.DELAYED, T=T, h=h, q=q, kv=kv, f=f, up=2.0, tp=tp, mem_rate=rate, kernel_tail_s=0.0)
    assert float(fwd) == pytest.approx(T * 31744 / rate)
    assert float(bwd) == pytest.approx(T * 90112 / rate)
    cf, cb = FP8.layer_cast_s(FP8.CURRENT, T=T, h=h, q=q, kv=kv, f=f, up=2.0, tp=tp, mem_rate=rate, kernel_tail_s=0.0)
    assert float(cf) == pytest.approx(T * 106496 / rate)
    assert float(cb) == pytest.approx(T * 171008 / rate)
    # non-TN GEMMs (Blackwell) need no transposed copy: a fused delayed-scaling cast writes 1 byte where 2 were charged
    nf, _ = FP8.layer_cast_s(FP8.DELAYED_NTN, T=T, h=h, q=q, kv=kv, f=f, up=2.0, tp=tp, mem_rate=rate,
                             kernel_tail_s=0.0)
    assert float(nf) == pytest.approx(T * (2048 * 3 - 23552) / rate)
    none, _ = FP8.layer_cast_s(FP8.NONE, T=T, h=h, q=q, kv=kv, f=f, up=2.0, tp=tp, mem_rate=rate, kernel_tail_s=1e-6)
    assert float(none) == 0.0


def test_fused_cast_bytes_follow_te_kernels():
    # [issue 17] a fused cast never costs more than the separate pass it replaces, and current scaling's fused cast
    # saves exactly the amax read (2 bytes) that the separate pass makes
    for m in (FP8.DELAYED, FP8.CURRENT, FP8.MX, FP8.DELAYED_NTN, FP8.CURRENT_NTN):
        assert FP8.NORM_FUSED_BYTES[m] <= FP8.CAST_BYTES[m]
        assert FP8.ACT_FUSED_BYTES[m] <= FP8.CAST_BYTES[m]
    assert FP8.CAST_BYTES[FP8.CURRENT] - FP8.NORM_FUSED_BYTES[FP8.CURRENT] == 2.0
    assert FP8.CAST_BYTES[FP8.CURRENT_NTN] - FP8.ACT_FUSED_BYTES[FP8.CURRENT_NTN] == 2.0
    assert FP8.NORM_FUSED_BYTES[FP8.MX] == FP8.CAST_BYTES[FP8.MX]  # TE's MXFP8 norm is unfused


def test_fp8_recipes_order_and_memory():
    bf16 = simulate(Scenario(**L70, precision="amp_bf16"))
    delayed = simulate(Scenario(**L70, precision="fp8"))
    current = simulate(Scenario(**L70, precision="fp8-cs"))
    mx = simulate(Scenario(**L70, precision="mxfp8"))
    assert delayed.step_s < bf16.step_s  # GEMM-bound layers: the FP8 ceiling is twice the bf16 one on B200
    assert delayed.step_s < current.step_s  # the extra amax pass
    # [issue 17] MXFP8 quantises both orientations (its 1x32 blocks run along the reduction), per-tensor FP8 on B200
    # only the rowwise one (non-TN GEMMs): MXFP8 a little slower, by its casts and (with the distributed optimizer and
    # tp 4) by its all-gathers: the parameters in bf16 against FP8, the sequence-parallel inputs with both orientations
    # (test_fp8_memory.py)
    assert delayed.step_s < mx.step_s < 1.08 * delayed.step_s
    # [issue 17] B200's FP8 GEMMs take non-TN layouts (TE is_non_tn_fp8_gemm_supported): one FP8 weight copy, no
    # transpose. With the distributed optimizer that copy is the parameter itself (fp8_param_gather, Megatron-Bridge's
    # FP8 recipes): 1 byte against bf16's 2; without it 2 + 1 (on H100 2 + 2, test_fp8_gemm_shape.py)
    w16 = bf16.memory_breakdown_bytes["weights"]
    assert delayed.memory_breakdown_bytes["weights"] == pytest.approx(0.5 * w16, rel=1e-9)
    kept16 = simulate(Scenario(**L70, precision="fp8", fp8_param_gather=False))
    assert kept16.memory_breakdown_bytes["weights"] == pytest.approx(1.5 * w16, rel=1e-9)


def test_mxfp8_refused_on_hopper_on_the_data_parallel_path_too(capsys):
    """[issue 17] The data-parallel path (no tp/pp layout) reads only the FP8 peak: it refuses mxfp8 on a GPU without
    microscaling as the LLM path does, so `predict` and `plan` never recommend mxfp8 on H100."""
    code = main(["predict", "--model", "llama3-8b", "--node", "dgx-h100", "--gpus", "8", "--precision", "mxfp8",
                 "--per-gpu-batch", "2"])
    err = capsys.readouterr()[1]
    assert code == 2 and "microscaling" in err and "--precision fp8" in err
    assert main(["predict", "--model", "llama3-8b", "--node", "dgx-b200", "--gpus", "8", "--precision", "mxfp8",
                 "--per-gpu-batch", "2"]) == 0


def test_aliases_and_blackwell_only_mxfp8(capsys):
    assert Strategy(precision="fp8-cs").precision == "fp8" and Strategy(precision="fp8-cs").fp8_recipe == "current"
    assert Strategy(precision="fp8-mx").precision == "mxfp8"
    with pytest.raises(ScenarioError, match="microscaling"):
        simulate(Scenario(**{**L70, "gpu": "h100-sxm"}, precision="mxfp8"))
    code = main(["predict", "--model", "llama3-70b", "--gpu", "h100-sxm", "--gpus", "64", "--nodes", "8", "--strategy",
                 "zero1", "--tp", "8", "--micro-batch", "1", "--precision", "fp8-mx"])
    err = capsys.readouterr()[1]
    assert code == 2 and "microscaling" in err and len(err.strip().splitlines()) == 1


def test_fp8_gemms_at_the_fp8_ceiling_attention_in_bf16():
    """Doubling only the FP8 ceiling speeds the fp8 step up; the bf16 parts (attention, head) do not move."""
    from gpusim.model.step import evaluate
    from gpusim.params import DEFAULT_PARAMS
    from gpusim.simulation import build_inputs, stack_rows

    inp = stack_rows([build_inputs(Scenario(**L70, precision="fp8"))[2]])
    base = float(evaluate(inp, DEFAULT_PARAMS)["compute_s"][0])
    fast8 = float(evaluate(inp.replace(fp8_ceiling_flop_per_s=np.asarray(inp.fp8_ceiling_flop_per_s) * 2),
                           DEFAULT_PARAMS)["compute_s"][0])
    fast16 = float(evaluate(inp.replace(ceiling_flop_per_s=np.asarray(inp.ceiling_flop_per_s) * 2),
                            DEFAULT_PARAMS)["compute_s"][0])
    assert fast8 < base and fast16 < base  # both parts matter
    assert base - fast8 > base - fast16  # the linear layers dominate a 70B layer
