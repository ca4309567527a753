"""[issue 12] Memory-saving mechanisms (DeepSeek-V3 sections 3.2.3 and 3.3.2; Megatron-Core --recompute-modules):
recomputed norms and MLA up-projections, the routed experts' SwiGLU recomputed, the FP8 activation cache, BF16
optimizer moments. Closed forms on a hand-worked layer, properties through the model, bad input."""

from __future__ import annotations

import pytest

from gpusim.cli import main
from gpusim.errors import ScenarioError
from gpusim.model import fp8 as FP8
from gpusim.model.llm import activation_bytes_per_layer
from gpusim.simulation import Scenario, simulate
from gpusim.strategy import opt_state_bytes, opt_traffic_bytes

# a hand-worked layer: 4 tokens, h 8, 2 heads, q = kv = 8, gated FFN of 16 (2 up matrices), bf16, FlashAttention
LAYER = dict(s=4, b=1, h=8, a=2, q=8, kv=8, f=16, up_mats=2, tp=1, sp=False, recompute=0)
KW = dict(dropout=0.0, flash=True, elem_bytes=2.0)


def _kept(**kw):
    return float(activation_bytes_per_layer(**LAYER, **KW, **kw)[0])


def test_recomputed_norms_drop_their_outputs():
    # the QKV and FFN-up GEMM inputs (the norms' outputs): 2 x 2 bytes x 4 tokens x 8 = 128 bytes
    assert _kept() - _kept(norms=True) == pytest.approx(128.0)


def test_fp8_cache_closed_form():
    c = 1.0 + 4.0 / 128.0  # one byte + an fp32 scale per 1x128 tile
    # QKV and FFN-up inputs (2 x 4 x 8 elements) and the SwiGLU input + FFN-down input (4 x 16 x 3) at c bytes
    saved = 2 * 4 * 8 * (2 - c) + 4 * 16 * 3 * (2 - c)
    assert _kept() - _kept(cache_bytes=c) == pytest.approx(saved)
    # with the norms recomputed only the FFN part is left to cache
    assert _kept(norms=True) - _kept(norms=True, cache_bytes=c) == pytest.approx(4 * 16 * 3 * (2 - c))
    assert float(FP8.act_cache_bytes(FP8.DELAYED, True, 2.0)) == c
    assert float(FP8.act_cache_bytes(FP8.MX, True, 2.0)) == 1.0 + 1.0 / 32.0
    assert float(FP8.act_cache_bytes(FP8.NONE, True, 2.0)) == 2.0  # bf16 rows: no FP8 cache


def test_mla_up_projection_recompute_closed_form():
    mla = dict(mla=True, mla_latent=6.0, v_width=4.0)  # values 4 wide (heads x v_head_dim), latents 6 wide
    # MLA keeps the latents the up-projections read (2 x 4 x 6 = 48 bytes) and its values and the output
    # projection's input at the value width: against q = kv = 8, 2 x 4 x (6 - 4 - 4) = -16 bytes
    assert _kept(**mla) - _kept() == pytest.approx(-16.0)
    # recomputing the up-projections drops K, V and Q (8 + 4 + 8 = 20 wide): 2 x 4 x 20 = 160 bytes
    assert _kept(**mla) - _kept(mla_up=True, mla_q=True, **mla) == pytest.approx(160.0)


def test_full_recomputation_ignores_the_modules():
    full = dict(LAYER, recompute=2)
    base = float(activation_bytes_per_layer(**full, **KW)[0])
    assert float(activation_bytes_per_layer(**full, **KW, norms=True, cache_bytes=1.03)[0]) == base


def test_bf16_moments():
    assert opt_state_bytes("adam", "bf16") == 4.0 and opt_state_bytes("adam") == 8.0
    assert opt_traffic_bytes("adam", "bf16") == 28.0 - 8.0 and opt_traffic_bytes("adam") == 28.0


# ---- properties through the model ---------------------------------------------------------------------------
DSV3 = dict(model="deepseek-v3", seq_len=4096, gpu="h100-sxm", gpus=512, nodes=64, kind="zero1", global_batch=512,
            per_gpu_batch=1, tp=1, pp=8, ep=64, recompute="none", uneven_pp=True, precision="fp8")
LLAMA = dict(model="llama3-8b", seq_len=4096, gpu="h100-sxm", gpus=8, kind="zero1", global_batch=64, per_gpu_batch=1,
             tp=2, pp=2, recompute="none", precision="fp8")
OPTIONS = [dict(recompute_modules=("layernorm",)), dict(recompute_modules=("mla_up_proj",)),
           dict(recompute_modules=("moe_act",)), dict(fp8_activations=True), dict(opt_state_dtype="bf16"),
           dict(recompute_modules=("layernorm", "mla_up_proj", "moe_act"), fp8_activations=True,
                opt_state_dtype="bf16")]


def _run(base, **kw):
    r = simulate(Scenario.create(**base, **kw))
    return r.memory_per_gpu_bytes, r.step_s


@pytest.mark.parametrize("opts", OPTIONS)
def test_each_option_saves_memory_and_recomputation_costs_time(opts):
    mem0, t0 = _run(DSV3)
    mem, t = _run(DSV3, **opts)
    assert mem < mem0
    if "opt_state_dtype" not in opts:  # (narrower moments also move fewer bytes in the optimizer step)
        assert t >= t0


@pytest.mark.parametrize("opts", [dict(recompute_modules=("layernorm",)), dict(fp8_activations=True),
                                  dict(recompute_modules=("mlp",))])
def test_dense_model_and_selective(opts):
    for rc in ("none", "selective"):
        mem0, t0 = _run(dict(LLAMA, recompute=rc))
        mem, t = _run(dict(LLAMA, recompute=rc), **opts)
        assert mem < mem0 and t >= t0


def test_core_attn_is_selective():
    a = simulate(Scenario.create(**dict(LLAMA, recompute=None), recompute_modules=("core_attn",)))
    b = simulate(Scenario.create(**dict(LLAMA, recompute="selective")))
    assert a.step_s == b.step_s and a.memory_per_gpu_bytes == b.memory_per_gpu_bytes


# ---- bad input --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kw, needle", [
    (dict(LLAMA, recompute_modules=("mla_up_proj",)), "multi-head latent attention"),
    (dict(LLAMA, recompute_modules=("moe_act",)), "mixture-of-experts"),
    (dict(LLAMA, precision="bf16", fp8_activations=True), "--precision fp8"),
    (dict(LLAMA, recompute="full", recompute_modules=("layernorm",)), "full recomputation"),
    (dict(model="qwen3-30b-a3b", gpu="h100-sxm", gpus=16, nodes=2, ep=16, per_gpu_batch=1, global_batch=64,
          kind="zero1", recompute_modules=("mlp",)), "every layer"),
])
def test_bad_input(kw, needle):
    with pytest.raises(ScenarioError, match=needle):
        simulate(Scenario.create(**kw))


@pytest.mark.parametrize("extra", [["--recompute-modules", "mla_up_proj"], ["--precision", "bf16", "--fp8-activations"],
                                   ["--recompute-modules", "moe"], ["--opt-state-dtype", "fp16"]])
def test_bad_flags_exit_2(capsys, extra):
    args = ["predict", "--model", "llama3-8b", "--gpu", "h100-sxm", "--gpus", "8", "--tp", "2", "--micro-batch", "1",
            "--seq-len", "4096", "--precision", "fp8", *extra]
    try:
        code = main(args)
    except SystemExit as e:
        code = e.code
    assert code == 2
    assert "Traceback" not in capsys.readouterr().err


# ---- [issue 17] the main-gradient dtype (Megatron-Core grad_reduce_in_fp32) -------------------------------------
def test_bf16_main_gradients_halve_the_gradient_buffer_and_its_reduction():
    """Megatron-Core allocates the main-gradient buffer as ``torch.float if grad_reduce_in_fp32 else param.dtype``:
    with bf16 it is 2 bytes per parameter of the stage instead of 4 (hand-worked: exactly half), the data-parallel
    reduce-scatter moves half the bytes (never more exposed time), and nothing else in memory changes."""
    base = dict(LLAMA, precision="bf16")
    fp32 = simulate(Scenario.create(**base))
    bf16 = simulate(Scenario.create(**base, grad_dtype="bf16"))
    g32, g16 = fp32.memory_breakdown_bytes["gradients"], bf16.memory_breakdown_bytes["gradients"]
    assert g16 == pytest.approx(g32 / 2.0)
    for k in ("weights", "optimizer", "activations", "overhead"):
        assert bf16.memory_breakdown_bytes[k] == pytest.approx(fp32.memory_breakdown_bytes[k])
    assert bf16.memory_per_gpu_bytes == pytest.approx(fp32.memory_per_gpu_bytes - g32 / 2.0)
    assert bf16.breakdown_s["dp_comm_exposed_s"] <= fp32.breakdown_s["dp_comm_exposed_s"]
    # the default is today's fp32 buffer
    assert simulate(Scenario.create(**base, grad_dtype="fp32")).memory_per_gpu_bytes == fp32.memory_per_gpu_bytes


def test_grad_dtype_closed_form_on_a_stage():
    """Hand-worked: DeepSeek-V3's fp32 main gradients on one stage are 4 bytes x the stage's parameters, bf16 2."""
    r32 = simulate(Scenario.create(**DSV3))
    r16 = simulate(Scenario.create(**DSV3, grad_dtype="bf16"))
    assert r16.memory_breakdown_bytes["gradients"] * 2.0 == pytest.approx(r32.memory_breakdown_bytes["gradients"])
    assert r32.memory_per_gpu_bytes - r16.memory_per_gpu_bytes == pytest.approx(
        r32.memory_breakdown_bytes["gradients"] / 2.0)


def test_bad_grad_dtype():
    with pytest.raises(ScenarioError, match="grad_dtype"):
        simulate(Scenario.create(**LLAMA, grad_dtype="fp16"))


@pytest.mark.parametrize("value", ["fp16", "float32"])
def test_bad_grad_dtype_flag_exits_2_with_the_choices(capsys, value):
    args = ["predict", "--model", "llama3-8b", "--gpu", "h100-sxm", "--gpus", "8", "--tp", "2", "--micro-batch", "1",
            "--seq-len", "4096", "--precision", "bf16", "--grad-dtype", value]
    try:
        code = main(args)
    except SystemExit as e:
        code = e.code
    err = capsys.readouterr().err
    assert code == 2 and "fp32" in err and "bf16" in err and "Traceback" not in err


def test_grad_dtype_flag_reaches_the_model(capsys):
    import json
    args = ["predict", "--model", "llama3-8b", "--gpu", "h100-sxm", "--gpus", "8", "--tp", "2", "--pp", "2",
            "--micro-batch", "1", "--global-batch", "64", "--seq-len", "4096", "--precision", "bf16",
            "--strategy", "zero1", "--json"]
    assert main(args) == 0
    g32 = json.loads(capsys.readouterr().out)["memory_breakdown_bytes"]["gradients"]
    assert main([*args, "--grad-dtype", "bf16"]) == 0
    g16 = json.loads(capsys.readouterr().out)["memory_breakdown_bytes"]["gradients"]
    assert g16 == pytest.approx(g32 / 2.0)


def test_bf16_main_gradient_accumulates_at_its_width():
    """With gradient-accumulation fusion the weight-gradient GEMM's epilogue reads and writes the main gradient: 4 + 4
    bytes per weight element for fp32, 2 + 2 for a bf16 buffer (the experts' GroupedLinear and the dense layers alike);
    without fusion a 16-bit gradient is written and nothing read."""
    from gpusim.model.experts import wgrad_epilogue_bytes

    assert tuple(map(float, wgrad_epilogue_bytes(True, 2.0))) == (4.0, 4.0)
    assert tuple(map(float, wgrad_epilogue_bytes(True, 2.0, 2.0))) == (2.0, 2.0)
    assert tuple(map(float, wgrad_epilogue_bytes(False, 2.0, 2.0))) == (2.0, 0.0)
    # through the model: the narrower buffer never makes a step slower (less epilogue traffic, half the DP bytes)
    for base in (DSV3, LLAMA):
        t32 = simulate(Scenario.create(**base)).step_s
        t16 = simulate(Scenario.create(**base, grad_dtype="bf16")).step_s
        assert t16 <= t32


def test_mlp_recompute_keeps_only_the_mlp_input_hand_worked():
    """[issue 17] Megatron-Core's ``mlp`` module: a dense layer keeps its MLP's input only. Llama 3 8B, one
    micro-batch of 4096 tokens, tp 1, pp 1, bf16: each of the 32 layers drops the SwiGLU input (2 x 14336) and the
    down-projection input (14336), 2 bytes each: 32 x 4096 x 3 x 14336 x 2 bytes, times the 10% fragmentation."""
    base = dict(model="llama3-8b", seq_len=4096, gpu="h100-sxm", gpus=8, kind="zero1", global_batch=8,
                per_gpu_batch=1, tp=1, pp=1, recompute="none", precision="bf16")
    a = simulate(Scenario.create(**base), recommend=False)
    b = simulate(Scenario.create(**base, recompute_modules=("mlp",)), recommend=False)
    saved = a.memory_breakdown_bytes["activations"] - b.memory_breakdown_bytes["activations"]
    assert saved == pytest.approx(32 * 4096 * 3 * 14336 * 2 * 1.10, rel=1e-9)
    assert b.step_s > a.step_s


def test_mlp_recompute_costs_what_the_published_study_measured():
    """Megatron-Bridge's activation-recompute card (skills/nemo-mbridge-perf-activation-recompute/card.yaml
    @376a9cbf): Llama 3 70B SFT, 32 H100, FP8 current scaling, tp 4 pp 4 vp 5, MBS 1, GBS 32: [core_attn] ~704 and
    [mlp, core_attn] 586.8 TFLOP/s per GPU, a step 1.20x as long. gpusim: the MLP's forward again (two GEMMs, the
    SwiGLU, the sequence-parallel all-gather and reduce-scatter) in each backward; within 10 points of the measure."""
    base = dict(model="llama3-70b", gpu="h100-sxm", gpus=32, nodes=4, tp=4, pp=4, vp=5, per_gpu_batch=1,
                global_batch=32, seq_len=4096, precision="fp8", fp8_recipe="current", kind="zero1", grad_dtype="bf16",
                tp_comm_overlap=True, fp8_transpose_cache=False)
    a = simulate(Scenario.create(**base, recompute_modules=("core_attn",)), recommend=False)
    b = simulate(Scenario.create(**base, recompute_modules=("core_attn", "mlp")), recommend=False)
    assert 1.10 < b.step_s / a.step_s < 1.30


def _q30(mods=None, params=None, **kw):
    """[stop 52] Qwen3-30B-A3B on two DGX H100 (EP 8, one sequence of 4096 per micro-batch), bf16."""
    from gpusim.workload import get_workload

    base = dict(workload=get_workload("qwen3-30b-a3b", seq_len=4096), node="dgx-h100", gpus=16, nodes=2,
                kind="zero1", precision="bf16", tp=1, pp=1, ep=8, micro_batch=1, global_batch=256, seq_len=4096)
    return simulate(Scenario.create(**(base | kw), recompute_modules=mods), params=params, recommend=False)


def test_the_moe_module_keeps_only_the_blocks_input_and_reruns_it():
    """[stop 52] Megatron-Core's ``moe`` recompute module (the MoE block checkpointed on its input). Memory, hand-worked:
    each of the 48 MoE layers stops keeping the router's fp32 scores (4096 x 128 x 4), the dispatched tokens with
    their fp32 probabilities (R (2048 x 2 + 4)) and the experts' SwiGLU input and output (R x 768 x 2 x 3), with
    R = 4096 x 8 x the busiest rank's load; the one layer whose backward reruns its block holds them again: saved
    (48 - 1) x that x (1 + fragmentation). Time: the forward is unchanged; the backward reruns the block's
    all-to-alls (the exposed EP time doubles without the EP overlap) and its forward compute and launches."""
    from gpusim.model.experts import busiest_rank_load
    from gpusim.params import DEFAULT_PARAMS

    none, moe = _q30(), _q30(("moe",))
    R = 4096 * 8 * float(busiest_rank_load(4096, 8, 128, 8))
    keep = 4096 * 128 * 4 + R * (2048 * 2 + 4) + R * 768 * 2 * 3
    saved = none.memory_breakdown_bytes["activations"] - moe.memory_breakdown_bytes["activations"]
    assert saved == pytest.approx(47 * keep * (1 + DEFAULT_PARAMS.fragmentation_frac), rel=1e-9)
    a, b = none.layer_s, moe.layer_s
    for k in ("gpu_fwd_s", "cpu_fwd_s", "ep_fwd_s"):
        assert b[k] == pytest.approx(a[k])
    # (the exchanges a launch-bound layer's CPU lead hides: compared where the host costs nothing)
    free = DEFAULT_PARAMS.model_copy(update={"launch_cpu_s": 0.0, "moe_expert_item_cpu_s": 0.0,
                                             "te_layer_cpu_fwd_s": 0.0, "te_layer_cpu_bwd_s": 0.0})
    a0, b0 = _q30(params=free).layer_s, _q30(("moe",), params=free).layer_s
    assert b0["ep_bwd_s"] == pytest.approx(a0["ep_bwd_s"] + a0["ep_fwd_s"]) and a0["ep_fwd_s"] > 0
    assert b["recompute_bwd_s"] > 0.5 * a["experts_fwd_s"] and a["recompute_bwd_s"] == 0.0
    assert b["gpu_bwd_s"] - a["gpu_bwd_s"] == pytest.approx(b["recompute_bwd_s"] - a["recompute_bwd_s"])
    assert b["cpu_bwd_s"] > a["cpu_bwd_s"] and moe.step_s > none.step_s
    # a SwiGLU recomputed inside a recomputed block changes nothing more
    both = _q30(("moe", "moe_act"))
    assert both.step_s == pytest.approx(moe.step_s) and both.memory_breakdown_bytes == moe.memory_breakdown_bytes
    with pytest.raises(ScenarioError, match="full recomputation"):  # full recomputation reruns every module already
        _q30(("moe",), recompute="full")


def test_the_moe_module_on_a_dense_model_is_refused(capsys):
    code = main(["predict", "--model", "llama3-8b", "--gpu", "h100-sxm", "--gpus", "8", "--micro-batch", "1",
                 "--global-batch", "64", "--seq-len", "4096", "--recompute-modules", "moe"])
    err = capsys.readouterr()[1]
    assert code == 2 and "moe" in err and "dense" in err and "mlp" in err
