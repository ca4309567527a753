"""[issue 17] The memory of FP8 runs as Megatron-Core and Transformer Engine keep it (gpusim.model.fp8): FP8 primary
weights with the distributed optimizer, the linear layers' inputs saved as their FP8 copies, the parameter all-gather
in FP8; and the GB200's sustained matmul clock. Closed forms on hand-worked cases."""

from __future__ import annotations

import numpy as np
import pytest

from gpusim.hwdb import load
from gpusim.model import fp8 as FP8
from gpusim.simulation import Scenario, simulate

E = 2.0  # 16-bit activations


def test_saved_input_delta_hand_worked():
    # T 4096, h 4096, o 4096, f 14336, tp 1, no sp, per-tensor FP8 (1 byte): the QKV input -T h, the output
    # projection's extra FP8 copy +T o, the FFN-up input -T h, the FFN-down input -T f: -4096 x 18432 bytes
    kw = dict(tokens=4096.0, h=4096.0, o_in=4096.0, f=14336.0, tp=1.0, sp=False, elem_bytes=E)
    for mode in (FP8.DELAYED, FP8.CURRENT, FP8.DELAYED_NTN, FP8.CURRENT_NTN):
        assert float(FP8.te_saved_input_delta_bytes(mode, **kw)) == pytest.approx(-4096.0 * 18432.0)
    # MXFP8 saves 1 + 1/32 bytes: -T h (1 - 1/32) + T o (1 + 1/32) - T h (1 - 1/32) - T f (1 - 1/32)
    c = 1.0 + 1.0 / 32.0
    want = 4096.0 * (4096.0 * (c - E) + 4096.0 * c + 4096.0 * (c - E) + 14336.0 * (c - E))
    assert float(FP8.te_saved_input_delta_bytes(FP8.MX, **kw)) == pytest.approx(want)
    assert FP8.te_saved_input_delta_bytes(FP8.NONE, **kw) == 0.0


def test_saved_input_delta_with_tp_sp_recomputed_norms_and_moe():
    # tp 4 with sequence parallelism: every term / 4; without sp the norm outputs are replicated (not / 4)
    T, h, o, f = 8192.0, 8192.0, 8192.0, 28672.0
    sp = FP8.te_saved_input_delta_bytes(FP8.DELAYED, tokens=T, h=h, o_in=o, f=f, tp=4.0, sp=True, elem_bytes=E)
    assert float(sp) == pytest.approx(T / 4.0 * (-h + o - h - f))
    nosp = FP8.te_saved_input_delta_bytes(FP8.DELAYED, tokens=T, h=h, o_in=o, f=f, tp=4.0, sp=False, elem_bytes=E)
    assert float(nosp) == pytest.approx(T * (-2.0 * h) + T / 4.0 * (o - f))
    # recomputed norms keep no norm output at all: only the projection copy and the FFN-down input change
    rn = FP8.te_saved_input_delta_bytes(FP8.DELAYED, tokens=T, h=h, o_in=o, f=f, tp=4.0, sp=True, elem_bytes=E,
                                        norms_recomputed=True)
    assert float(rn) == pytest.approx(T / 4.0 * (o - f))
    # an MoE layer (dense_ffn_frac 0): its routed experts are counted by gpusim.model.experts, only attention here
    moe = FP8.te_saved_input_delta_bytes(FP8.DELAYED, tokens=T, h=h, o_in=o, f=f, tp=4.0, sp=True, elem_bytes=E,
                                         dense_ffn_frac=0.0)
    assert float(moe) == pytest.approx(T / 4.0 * (-h + o))
    # vectorised over rows: a bf16 row next to an FP8 row
    both = FP8.te_saved_input_delta_bytes(np.array([FP8.NONE, FP8.DELAYED]), tokens=T, h=h, o_in=o, f=f, tp=4.0,
                                          sp=True, elem_bytes=E)
    assert both[0] == 0.0 and both[1] == pytest.approx(float(sp))


def test_weight_and_gather_bytes_per_param():
    # Hopper per-tensor: FP8 weight + its transpose (2) as the parameters, or the bf16 weight beside them (4)
    assert float(FP8.weight_state_bytes(FP8.DELAYED, True, True)) == 2.0
    assert float(FP8.weight_state_bytes(FP8.CURRENT, True, False)) == 4.0  # DDP: no FP8 primary weights
    assert float(FP8.weight_state_bytes(FP8.CURRENT, False, True)) == 4.0
    # Blackwell per-tensor (non-TN GEMMs, no transpose): 1 or 3; MXFP8 both orientations and their scales
    assert float(FP8.weight_state_bytes(FP8.CURRENT_NTN, True, True)) == 1.0
    assert float(FP8.weight_state_bytes(FP8.DELAYED_NTN, True, False)) == 3.0
    assert float(FP8.weight_state_bytes(FP8.MX, True, True)) == pytest.approx(2.0625)
    assert float(FP8.weight_state_bytes(FP8.MX, False, True)) == pytest.approx(4.0625)
    # the parameter all-gather: FP8 for per-tensor primary weights, bf16 for MXFP8 (gathered into the grad buffer)
    assert float(FP8.param_gather_bytes(FP8.CURRENT, True, True)) == 1.0
    assert float(FP8.param_gather_bytes(FP8.DELAYED_NTN, True, True)) == 1.0
    assert float(FP8.param_gather_bytes(FP8.MX, True, True)) == 2.0
    assert float(FP8.param_gather_bytes(FP8.CURRENT, True, False)) == 2.0
    assert float(FP8.param_gather_bytes(FP8.NONE, True, True)) == 2.0


L8 = dict(model="llama3-8b", seq_len=8192, gpu="h100-sxm", gpus=8, nodes=1, global_batch=128, per_gpu_batch=1,
          tp=1, pp=1, recompute="none")


def test_fp8_run_memory_end_to_end():
    # Llama 3 8B on 8 H100 with the distributed optimizer: the weights are the FP8 parameters and their transposes,
    # 2 bytes each (bf16 would be 2 as well, and DDP keeps 2 + 2); the saved activations shrink by 32 layers x the
    # closed form, times the 10% fragmentation allowance
    bf16 = simulate(Scenario(**L8, kind="zero1", precision="amp_bf16"))
    fp8 = simulate(Scenario(**L8, kind="zero1", precision="fp8"))
    ddp = simulate(Scenario(**L8, kind="ddp", precision="fp8"))
    w16 = bf16.memory_breakdown_bytes["weights"]
    assert fp8.memory_breakdown_bytes["weights"] == pytest.approx(w16, rel=1e-9)
    assert ddp.memory_breakdown_bytes["weights"] == pytest.approx(2.0 * w16, rel=1e-9)
    delta = float(FP8.te_saved_input_delta_bytes(FP8.DELAYED, tokens=8192.0, h=4096.0, o_in=4096.0, f=14336.0,
                                                 tp=1.0, sp=False, elem_bytes=E))
    got = fp8.memory_breakdown_bytes["activations"] - bf16.memory_breakdown_bytes["activations"]
    assert got == pytest.approx(32.0 * delta * 1.1, rel=1e-6)
    assert got < 0


def test_gb200_sustained_matmul_clock():
    # the B200's measured MSMF / MAMF (same die) applied to the GB200's measured best-shape burst
    gpu = load().gpu("gb200")
    assert gpu.training_matmul_flop_per_s("fp8") == pytest.approx(3615.6e12 * 0.832)
    assert gpu.training_matmul_flop_per_s("bf16") == pytest.approx(1822.0e12 * 0.828)


def test_tp_input_gather_bytes_and_backward_closed_form():
    from gpusim.model.llm import beside_gemm_s, tp_backward_s, tp_userbuffers_s

    assert tuple(map(float, FP8.tp_input_gather_bytes(FP8.CURRENT, 2.0))) == (1.0, 1.0)
    assert tuple(map(float, FP8.tp_input_gather_bytes(FP8.MX, 2.0))) == (2.0625, 1.03125)
    assert tuple(map(float, FP8.tp_input_gather_bytes(FP8.NONE, 2.0))) == (2.0, 2.0)
    # sequence parallelism, synchronous backward: two output-gradient all-gathers (16-bit), two input re-gathers (the
    # FP8 copies: ag_in) and two reduce-scatters; asynchronous: the re-gathers beside the data-gradient GEMMs
    ar, ag, ag8, rs = 3.0, 1.0, 0.5, 1.0
    g = dict(dgrad_qkv_s=0.2, wgrad_qkv_s=5.0, dgrad_up_s=0.2, wgrad_up_s=5.0, slowdown_frac=0.1)
    assert float(tp_backward_s(ar, ag, rs, True, False, ag_in=ag8, **g)) == pytest.approx(2 * ag + 2 * ag8 + 2 * rs)
    want = (2 * ag + 2 * float(beside_gemm_s(ag8, 0.2, 0.1)) + 2 * float(beside_gemm_s(rs, 5.0, 0.1)))
    assert float(tp_backward_s(ar, ag, rs, True, True, ag_in=ag8, **g)) == pytest.approx(want)
    # without ag_in the 16-bit figures (unchanged for bf16 rows)
    assert float(tp_backward_s(ar, ag, rs, True, False, **g)) == pytest.approx(4 * ag + 2 * rs)
    t = [1.0] * 23
    f16, b16 = tp_userbuffers_s(ag, rs, 4.0, t, 0.0)
    f8, b8 = tp_userbuffers_s(ag, rs, 4.0, t, 0.0, ag8, ag8)
    # each GEMM (1 s) hides its collective but its first of tp chunks: ag / 4 exposed per all-gather
    assert float(f16 - f8) == pytest.approx(2 * (ag - ag8) / 4.0)
    assert float(b16) == pytest.approx(float(b8))  # the re-gathers hide under 1 s GEMMs either way (no slowdown)


def test_activation_offload_closed_form():
    from gpusim.model.memory import activation_offload_terms

    gone, exposed = activation_offload_terms(40.0, 80.0, 3.9e9, 180e9, 0.010, 0.020)
    c = 3.9e9 / 180e9
    assert float(gone) == 39.0
    assert float(exposed) == pytest.approx(40.0 * ((c - 0.010) + (c - 0.020)))
    # copies shorter than the layers they hide under cost nothing; more layers than the stage holds are capped
    gone, exposed = activation_offload_terms(200.0, 80.0, 1e9, 180e9, 0.010, 0.020)
    assert float(gone) == 79.0 and float(exposed) == 0.0
    gone, exposed = activation_offload_terms(0.0, 80.0, 3.9e9, 180e9, 0.010, 0.020)
    assert float(gone) == 0.0 and float(exposed) == 0.0


def test_activation_offload_end_to_end():
    # Llama 3 70B under Megatron-FSDP on 64 GB200 (the Megatron-Bridge recipe offloads 40 of 80 layers): n layers
    # offloaded take (n - 1) layers' saved activations off the GPU (one is in transit), linearly in n
    base = dict(model="llama3-70b", seq_len=8192, gpu="gb200", gpus=64, nodes=16, node="gb200-nvl72",
                kind="fsdp-full", global_batch=256, per_gpu_batch=2, tp=1, pp=1, recompute="none", precision="fp8-cs")
    acts = {n: simulate(Scenario(**base, activation_offload_layers=n)) for n in (0, 1, 21, 40)}
    a = {n: r.memory_breakdown_bytes["activations"] for n, r in acts.items()}
    assert a[1] == pytest.approx(a[0], rel=1e-12)
    per_layer = (a[0] - a[40]) / 39.0
    assert per_layer > 0
    assert (a[0] - a[21]) / 20.0 == pytest.approx(per_layer, rel=1e-9)
    assert acts[40].step_s >= acts[0].step_s  # a copy is never faster than none


def test_cli_flags(capsys):
    import json

    from gpusim.cli import main

    args = ["predict", "--model", "llama3-8b", "--gpu", "h100-sxm", "--gpus", "8", "--seq-len", "8192", "--tp", "1",
            "--micro-batch", "1", "--global-batch", "128", "--precision", "fp8", "--strategy", "zero1",
            "--recompute", "none", "--json"]
    out = {}
    for name, extra in (("default", []), ("bf16_weights", ["--no-fp8-param-gather"]),
                        ("offload", ["--activation-offload-layers", "8"])):
        assert main(args + extra) == 0
        out[name] = json.loads(capsys.readouterr().out)
    w = {k: v["memory_breakdown_bytes"]["weights"] for k, v in out.items()}
    assert w["bf16_weights"] == pytest.approx(2.0 * w["default"], rel=1e-9)  # 2 + 2 against the FP8 2 per parameter
    a = {k: v["memory_breakdown_bytes"]["activations"] for k, v in out.items()}
    # pp 1: the one stage also holds the logits at the loss (the default te cross entropy keeps the bf16 logits
    # alone: 2 T V bytes, +10% fragmentation; gpusim.model.llm.CROSS_ENTROPY_BYTES); 7 of its 32 layers leave the GPU
    from gpusim.model.llm import CROSS_ENTROPY_BYTES

    logits = CROSS_ENTROPY_BYTES["te"][1] * 8192 * 128256 * 1.1
    assert a["offload"] - logits == pytest.approx((a["default"] - logits) * 25.0 / 32.0, rel=1e-9)


def test_offloading_every_layer_of_a_stage_exits_2_with_the_limit(capsys):
    from gpusim.cli import main

    args = ["predict", "--model", "llama3-8b", "--gpu", "h100-sxm", "--gpus", "8", "--tp", "1", "--pp", "2",
            "--global-batch", "64", "--strategy", "zero1"]
    assert main(args + ["--activation-offload-layers", "16"]) == 2
    err = capsys.readouterr().err
    assert "holds 16 layers (32 over pp 2) and can offload at most 15" in err
    assert main(args + ["--activation-offload-layers", "15"]) == 0


def test_the_search_refuses_the_layouts_whose_stages_are_too_short_to_offload_from():
    import numpy as np

    from gpusim.rules import R_OFFLOAD
    from gpusim.search import search_layouts

    scn = Scenario(model="llama3-8b", gpu="h100-sxm", gpus=16, nodes=2, kind="zero1", global_batch=64,
                   per_gpu_batch=1, activation_offload_layers=20)
    res = search_layouts(scn)
    lay = res["layouts"]
    short = res["reason_code"] == R_OFFLOAD
    assert short.any() and np.all(lay["layers"][short] // lay["pp"][short] <= 20)
    ok = np.asarray(res["feasible"], dtype=bool)
    assert ok.any() and np.all(lay["layers"][ok] // lay["pp"][ok] > 20)


def test_moe_saved_input_delta_hand_worked():
    """[issue 17] The experts' TE GroupedLinear layers keep FP8 copies of their inputs (fp8.te_moe_saved_input_delta_
    bytes): 32,768 routed copies of h 7168 into experts of 2048, 4096 tokens, one shared expert of 2048, per-tensor
    FP8 (1 byte): -32768 (7168 + 2048) + 4096 (7168 - 2048) = -281,018,368 bytes."""
    kw = dict(routed_tokens=32768.0, tokens=4096.0, h=7168.0, fe_local=2048.0, fs=2048.0, elem_bytes=E)
    assert float(FP8.te_moe_saved_input_delta_bytes(FP8.CURRENT, **kw)) == pytest.approx(-281_018_368.0)
    # moe_act: fc2 keeps its 16-bit input, which the recompute discards: no fc2 term at all
    assert float(FP8.te_moe_saved_input_delta_bytes(FP8.CURRENT, moe_act=True, **kw)) == pytest.approx(
        -32768.0 * 7168.0 + 4096.0 * (7168.0 - 2048.0))
    # no shared expert: the routed terms only; MXFP8 keeps 1 + 1/32 bytes per element
    c = 1.0 + 1.0 / 32.0
    assert float(FP8.te_moe_saved_input_delta_bytes(FP8.MX, **dict(kw, fs=0.0))) == pytest.approx(
        32768.0 * (7168.0 + 2048.0) * (c - E))
    assert FP8.te_moe_saved_input_delta_bytes(FP8.NONE, **kw) == 0.0


def test_fp8_moe_run_keeps_less_than_its_bf16_accounting():
    """Through the model: an FP8 MoE run (Qwen3-30B-A3B, 48 of its 128 experts' copies per token on 8 B200) keeps
    less than its bf16 twin once the experts' inputs are FP8 copies too (0.83x; counting only the dense layers' FP8
    copies it kept 1.02x the bf16 run's activations)."""
    base = dict(model="qwen3-30b-a3b", seq_len=4096, gpu="b200", gpus=8, kind="zero1", global_batch=64,
                per_gpu_batch=1, ep=8, recompute="none")
    bf16 = simulate(Scenario.create(**base, precision="bf16"))
    fp8 = simulate(Scenario.create(**base, precision="fp8"))
    a16 = bf16.memory_breakdown_bytes["activations"]
    a8 = fp8.memory_breakdown_bytes["activations"]
    assert a8 < 0.9 * a16


def test_without_the_transpose_cache_hopper_keeps_one_byte_and_re_makes_the_transpose():
    """[issue 17] Megatron-Core disable_parameter_transpose_cache: on Hopper per-tensor FP8 the weights' transposes are
    not kept (1 byte per weight less) and every backward pass re-makes them (read 1 + write 1 byte per weight); the
    other modes keep no such transpose, and nothing changes for them."""
    assert float(FP8.weight_state_bytes(FP8.CURRENT, True, True, transpose_cache=False)) == 1.0
    assert float(FP8.weight_state_bytes(FP8.DELAYED, False, True, transpose_cache=False)) == 3.0
    for mode in (FP8.CURRENT_NTN, FP8.MX):
        assert float(FP8.weight_state_bytes(mode, True, True, transpose_cache=False)) == float(
            FP8.weight_state_bytes(mode, True, True))
        assert float(FP8.retranspose_bytes_per_param(mode, False)) == 0.0
    assert FP8.retranspose_bytes_per_param(np.array([FP8.DELAYED, FP8.CURRENT, FP8.NONE]), False).tolist() == [2, 2, 0]
    assert float(FP8.retranspose_bytes_per_param(FP8.CURRENT, True)) == 0.0
    # Llama 3 70B, tp 4 pp 4 on 32 H100 (Megatron-Bridge's SFT layout): the first stage's weights shrink by one byte
    # per parameter; the step grows by re-reading and re-writing them each micro-batch: 2 bytes x 4.4 G parameters of
    # the stage at about 2.8 TB/s, 3 ms a micro-batch, 16 micro-batches in a 2.6 s step: about 2%
    db = load()
    base = dict(model="llama3-70b", gpu="h100-sxm", gpus=32, nodes=4, tp=4, pp=4, vp=5, per_gpu_batch=1,
                global_batch=32, seq_len=4096, precision="fp8", fp8_recipe="current", kind="zero1")
    on = simulate(Scenario.create(**base), db=db, recommend=False)
    off = simulate(Scenario.create(**base, fp8_transpose_cache=False), db=db, recommend=False)
    assert off.memory_breakdown_bytes["weights"] == pytest.approx(on.memory_breakdown_bytes["weights"] / 2.0)
    assert 1.01 < off.step_s / on.step_s < 1.04
    mx = dict(base, gpu="b200", gpus=32, nodes=4, precision="mxfp8")
    assert simulate(Scenario.create(**mx, fp8_transpose_cache=False), db=db, recommend=False).step_s == pytest.approx(
        simulate(Scenario.create(**mx), db=db, recommend=False).step_s)
