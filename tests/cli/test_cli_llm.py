"""`gpusim predict` with an LLM layout: the documented JSON fields, and clear errors for impossible layouts."""

from __future__ import annotations

import json

import pytest

from gpusim.cli import main

LLAMA70 = ["predict", "--model", "llama3-70b", "--gpu", "h100-sxm", "--gpus", "64", "--nodes", "8", "--seq-len",
           "4096", "--precision", "bf16", "--strategy", "zero1"]


def run(capsys, *args):
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_predict_llm_json_has_the_documented_fields(capsys):
    code, out, _ = run(capsys, *LLAMA70, "--tp", "4", "--pp", "4", "--vp", "5", "--micro-batch", "1",
                       "--global-batch", "128", "--recompute", "selective", "--json")
    assert code == 0
    d = json.loads(out)
    for key in ("step_s", "tokens_per_s", "tokens_per_s_per_gpu", "model_tflop_per_s_per_gpu", "mfu_frac",
                "mfu_flop_convention", "memory_per_gpu_bytes", "memory_per_stage_bytes", "fits_in_memory",
                "bottleneck", "recommendations"):
        assert key in d, key
    assert d["parallelism"] == {"tp": 4, "pp": 4, "vp": 5, "cp": 1, "ep": 1, "dp": 4, "sp": True}
    bd = d["breakdown_s"]
    for key in ("compute_s", "tp_comm_exposed_s", "pp_bubble_s", "pp_p2p_exposed_s", "dp_comm_exposed_s",
                "optimizer_s"):
        assert key in bd
    assert sum(bd.values()) == pytest.approx(d["step_s"], rel=1e-9)
    assert d["tokens_per_s"] == pytest.approx(128 * 4096 / d["step_s"], rel=1e-9)
    assert d["global_batch"] == 128 and d["n_micro_batches"] == 32
    assert d["memory_per_gpu_bytes"] == max(d["memory_per_stage_bytes"].values())


def test_per_gpu_batch_is_the_old_name_of_micro_batch(capsys):
    a = run(capsys, *LLAMA70, "--tp", "8", "--pp", "2", "--micro-batch", "2", "--global-batch", "64", "--json")
    b = run(capsys, *LLAMA70, "--tp", "8", "--pp", "2", "--per-gpu-batch", "2", "--global-batch", "64", "--json")
    assert a[0] == b[0] == 0 and json.loads(a[1])["step_s"] == json.loads(b[1])["step_s"]


def test_sp_defaults_on_with_tp_and_can_be_turned_off(capsys):
    on = json.loads(run(capsys, *LLAMA70, "--tp", "8", "--pp", "2", "--micro-batch", "1", "--json")[1])
    off = json.loads(run(capsys, *LLAMA70, "--tp", "8", "--pp", "2", "--micro-batch", "1", "--no-sp", "--json")[1])
    assert on["parallelism"]["sp"] is True and off["parallelism"]["sp"] is False
    assert off["memory_breakdown_bytes"]["activations"] > on["memory_breakdown_bytes"]["activations"]


@pytest.mark.parametrize("flags, words", [
    (["--tp", "3", "--pp", "4", "--micro-batch", "1"], ["does not divide 64 GPUs", "attention heads", "tp could be"]),
    (["--tp", "8", "--pp", "2", "--micro-batch", "3", "--global-batch", "128"],
     ["does not divide the global batch", "micro-batch could be"]),
    (["--tp", "128", "--pp", "1", "--micro-batch", "1", "--gpus", "128", "--nodes", "16"],
     ["64 attention heads are not divisible by tp 128"]),
    (["--tp", "8", "--pp", "3", "--micro-batch", "1", "--gpus", "48", "--nodes", "6"], ["80 layers"]),
    (["--tp", "8", "--pp", "4", "--strategy", "fsdp-full", "--micro-batch", "1"], ["zero1"]),
])
def test_impossible_layouts_say_what_would_work(capsys, flags, words):
    code, out, err = run(capsys, *LLAMA70, *flags)
    assert code == 2 and out == ""
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    for w in words:
        assert w in err, (w, err)


def test_a_data_parallel_global_batch_sets_the_accumulation(capsys):
    base = ["predict", "--model", "llama2-7b", "--gpu", "h100-sxm", "--gpus", "8", "--seq-len", "2048",
            "--micro-batch", "2", "--json"]
    a = json.loads(run(capsys, *base, "--global-batch", "64")[1])
    b = json.loads(run(capsys, *base, "--accum", "4")[1])
    assert a["step_s"] == b["step_s"] and a["global_batch"] == 64 and a["n_micro_batches"] == 4
    assert a["breakdown_s"].keys() == b["breakdown_s"].keys() and "tp_comm_exposed_s" not in a["breakdown_s"]


def test_predict_moe_without_a_one_gpu_reference_says_efficiency_na(capsys):
    """[issue 17] A 671B MoE cannot be held by one GPU: predict, like plan and sweep, gives no speedup and no
    scaling efficiency (JSON null, text "n/a") instead of a superlinear figure against a GPU that cannot hold it;
    a model whose one-GPU form fits keeps a finite efficiency."""
    flags = ["--gpu", "gb200", "--gpus", "256", "--tp", "1", "--pp", "4", "--vp", "4", "--ep", "64",
             "--micro-batch", "1", "--global-batch", "2048", "--seq-len", "4096", "--precision", "fp8", "--uneven-pp"]
    code, out, _ = run(capsys, "predict", "--model", "deepseek-v3", *flags, "--json")
    d = json.loads(out)
    assert code == 0 and d["speedup"] is None and d["scaling_efficiency_frac"] is None
    assert any("no one-GPU reference" in a for a in d["assumptions"])
    code, out, _ = run(capsys, "predict", "--model", "deepseek-v3", *flags)
    assert code == 0 and "scaling efficiency n/a" in out and "nan" not in out.lower().replace("nano", "")
    code, out, _ = run(capsys, "predict", "--model", "gpt3-350m", "--gpu", "h100-sxm", "--gpus", "8", "--tp", "2",
                    "--micro-batch", "1", "--global-batch", "64", "--seq-len", "1024", "--precision", "bf16", "--json")
    d = json.loads(out)
    assert code == 0 and 0 < d["scaling_efficiency_frac"] <= 1.5


def test_predict_tells_where_one_layer_goes(capsys):
    """[issue 17] An LLM layout's JSON carries one layer's parts (layer_s) and the text says them; the parts are
    consistent with the step: a layer takes at least its GPU time and at least its CPU launches (with no host sync
    in a dense model), the named parts fit in the GPU's time, and one stage's layers fit in the step's compute."""
    code, out, _ = run(capsys, *LLAMA70, "--tp", "8", "--pp", "1", "--micro-batch", "1", "--global-batch", "16",
                       "--json")
    assert code == 0
    d = json.loads(out)
    ls = d["layer_s"]
    for pas in ("fwd", "bwd"):
        assert ls[f"layer_{pas}_s"] >= max(ls[f"gpu_{pas}_s"], ls[f"cpu_{pas}_s"]) * (1 - 1e-12)
        assert ls[f"attn_{pas}_s"] + ls[f"experts_{pas}_s"] <= ls[f"gpu_{pas}_s"]
    assert ls["moe_layer_frac"] == 0.0 and ls["host_sync_flag"] == 0.0 and ls["tp_fwd_s"] > 0
    layers, micro = 80, d["n_micro_batches"]
    assert d["breakdown_s"]["compute_s"] >= layers * micro * (ls["layer_fwd_s"] + ls["layer_bwd_s"]) * (1 - 1e-9)
    code, out, _ = run(capsys, "predict", "--model", "qwen3-30b-a3b", "--gpu", "b200", "--gpus", "8", "--ep", "8",
                       "--precision", "bf16", "--global-batch", "64", "--seq-len", "4096")
    assert code == 0
    assert "one transformer layer, one micro-batch" in out and "MoE experts" in out and "one MoE all-to-all" in out
    # a data-parallel row has no layer parts
    code, out, _ = run(capsys, "predict", "--model", "bert-large", "--gpu", "a100-sxm4-80gb", "--gpus", "8",
                       "--per-gpu-batch", "16", "--json")
    assert code == 0 and json.loads(out)["layer_s"] is None


QWEN30 = ["predict", "--model", "qwen3-30b-a3b", "--gpu", "h100-sxm", "--gpus", "16", "--nodes", "2", "--seq-len",
          "4096", "--precision", "bf16", "--strategy", "zero1", "--micro-batch", "1", "--global-batch", "256"]


def test_moe_imbalance_paces_every_moe_layer_and_is_refused_where_it_cannot_apply(capsys):
    """[issue 17] --moe-imbalance FRAC: the busiest EP rank carries 1 + FRAC of the mean routed tokens (its grouped
    GEMMs and the all-to-all volume it receives) at every MoE layer; the default is a balanced router's sampling
    spread (about 1%). The layer lines say which load paced the layer; one EP rank has nothing to wait for; a dense
    model and a negative figure exit 2 with the fix."""
    import gpusim.api as api

    code, out, _ = run(capsys, *QWEN30, "--ep", "16", "--json")
    base = json.loads(out)
    code2, out2, _ = run(capsys, *QWEN30, "--ep", "16", "--moe-imbalance", "0.212", "--json")
    skew = json.loads(out2)
    assert code == code2 == 0
    assert skew["layer_s"]["ep_busiest_load"] == pytest.approx(1.212)
    assert 1.0 < base["layer_s"]["ep_busiest_load"] < 1.03
    for k in ("compute_s", "ep_comm_exposed_s"):
        assert skew["breakdown_s"][k] > base["breakdown_s"][k], k
    assert skew["step_s"] > base["step_s"]
    # the routed experts' time grows with the load; the attention core does not
    assert skew["layer_s"]["experts_fwd_s"] > base["layer_s"]["experts_fwd_s"]
    assert skew["layer_s"]["attn_fwd_s"] == pytest.approx(base["layer_s"]["attn_fwd_s"])
    code, out, _ = run(capsys, *QWEN30, "--ep", "16", "--moe-imbalance", "0.212")
    assert code == 0 and "1.212x the mean routed tokens" in out
    # the Python API is the same call
    assert api.predict(model="qwen3-30b-a3b", gpu="h100-sxm", gpus=16, nodes=2, seq_len=4096, precision="bf16",
                       strategy="zero1", micro_batch=1, global_batch=256, ep=16,
                       moe_imbalance_frac=0.212).step_s == pytest.approx(skew["step_s"])
    # one EP rank holds every expert: nothing to wait for
    one = [json.loads(run(capsys, *QWEN30, "--recompute", "none", *extra, "--json")[1])["step_s"] for extra in
           ((), ("--moe-imbalance", "0.5"))]  # (--recompute: the per-GEMM path both times)
    assert one[0] == pytest.approx(one[1])
    code, _, err = run(capsys, *LLAMA70, "--tp", "8", "--global-batch", "64", "--moe-imbalance", "0.2")
    assert code == 2 and "--moe-imbalance applies only to mixture-of-experts models" in err
    with pytest.raises(SystemExit) as e:  # argparse's own exit
        run(capsys, *QWEN30, "--ep", "16", "--moe-imbalance", "-0.1")
    assert e.value.code == 2 and "--moe-imbalance: must be a finite number from 0 to 10" in capsys.readouterr().err


def test_sweep_carries_the_moe_imbalance_to_every_layout(capsys):
    """[issue 17] sweep --moe-imbalance: the figure rides on the search's pins to every layout with ep > 1, so the
    best layout's throughput is lower than without it, and the pinned run agrees with predict."""
    args = ["sweep", "--model", "qwen3-30b-a3b", "--gpu", "h100-sxm", "--gpus", "16", "--nodes", "2",
            "--global-batch", "256", "--ep", "16", "--json"]
    code, out, _ = run(capsys, *args)
    code2, out2, _ = run(capsys, *args, "--moe-imbalance", "0.3")
    assert code == code2 == 0
    plain, skew = json.loads(out), json.loads(out2)
    best = max(r["tokens_per_s"] for r in plain["layouts"] if r["feasible"])
    best_skew = max(r["tokens_per_s"] for r in skew["layouts"] if r["feasible"])
    assert best_skew < best


def test_moe_expert_skew_costs_more_at_a_larger_ep_in_the_search(capsys):
    """[issue 17] --moe-expert-skew CV: the busiest rank follows from each layout's ep, so the search's best layout
    at ep 16 loses more throughput to the skew than at ep 2; predict names the load; it and --moe-imbalance are one
    figure or the other."""
    from gpusim.search import Pins, search_layouts
    from gpusim.simulation import Scenario

    scn = Scenario(model="qwen3-30b-a3b", gpu="h100-sxm", gpus=16, nodes=2, seq_len=4096, kind="zero1",
                   global_batch=256, per_gpu_batch=1)

    def best_by_ep(pins):
        res = search_layouts(scn, pins=pins, micro_batches=(1,), recomputes=("none",))
        lay, out = res["layouts"], res["out"]
        return {int(e): max(float(t) for t, ee, ok in zip(out["tokens_per_s"], lay["ep"], res["feasible"])
                           if ok and ee == e) for e in (2, 16)}

    plain, skew = best_by_ep(Pins()), best_by_ep(Pins(moe_expert_skew_frac=0.3))
    assert skew[2] < plain[2] and skew[16] < plain[16]
    assert skew[16] / plain[16] < skew[2] / plain[2]
    code, out, _ = run(capsys, *QWEN30, "--ep", "8", "--moe-expert-skew", "0.181")
    assert code == 0 and "1.065x the mean routed tokens" in out  # 1 + 1.4236 sqrt(spread^2 + 0.181^2 x 8 / 127)
    code, _, err = run(capsys, *QWEN30, "--ep", "8", "--moe-expert-skew", "0.2", "--moe-imbalance", "0.2")
    assert code == 2 and "give one" in err


def test_routing_figures_at_one_ep_rank_keep_the_data_parallel_path_and_their_rules(capsys):
    """[issue 17] --moe-imbalance / --moe-expert-skew change nothing where one EP rank holds every expert (the run stays
    on its own path, the same step); a dense model is still refused; both figures at once are refused in predict,
    sweep and plan alike."""
    dp = ["predict", "--model", "qwen3-30b-a3b", "--gpu", "h100-sxm", "--gpus", "8", "--per-gpu-batch", "1",
          "--strategy", "fsdp-full", "--json"]
    plain = json.loads(run(capsys, *dp)[1])
    assert json.loads(run(capsys, *dp, "--moe-imbalance", "0.3")[1])["step_s"] == pytest.approx(plain["step_s"])
    code, _, err = run(capsys, "predict", "--model", "resnet50", "--gpu", "h100-sxm", "--gpus", "8",
                       "--per-gpu-batch", "64", "--moe-expert-skew", "0.2")
    assert code == 2 and "--moe-expert-skew applies only to mixture-of-experts models" in err
    both = ("--moe-imbalance", "0.2", "--moe-expert-skew", "0.2")
    for cmd in (["sweep", "--model", "qwen3-30b-a3b", "--gpu", "h100-sxm", "--gpus", "16", "--global-batch", "256"],
                ["plan", "--model", "qwen3-30b-a3b", "--tokens", "1e9", "--gpu", "h100-sxm", "--max-gpus", "16"]):
        code, _, err = run(capsys, *cmd, *both)
        assert code == 2 and "give one" in err, cmd


def test_routing_figures_name_their_own_flags_and_leave_the_plans_data_parallel_rows(capsys):
    """[issue 17] A dense model refuses a routing figure in sweep and plan by the flag the user typed (not the Strategy
    field's name), and plan keeps its data-parallel rows with a routing figure: at ep 1 it changes nothing, unlike
    --moe-fused-mlp, which those rows cannot model."""
    import gpusim

    for cmd in (["sweep", "--model", "llama3-8b", "--gpu", "h100-sxm", "--gpus", "16", "--global-batch", "256"],
                ["plan", "--model", "llama3-8b", "--tokens", "1e9", "--gpu", "h100-sxm", "--max-gpus", "16"]):
        for flag in ("--moe-imbalance", "--moe-expert-skew"):
            code, _, err = run(capsys, *cmd, flag, "0.2")
            assert code == 2 and f"drop {flag})" in err and "-frac" not in err, (cmd, flag, err)
    frame = gpusim.plan(model="qwen3-30b-a3b", tokens="1e9", gpu=["h100-sxm"], max_gpus=16,
                        moe_imbalance_frac=0.3).to_frame()
    dp = frame[frame["layout"] == ""]  # (whether one fits is the memory model's answer, not this test's)
    assert len(dp) and not dp["reason"].str.contains("do not model").any(), dp[["feasible", "reason"]]


def test_sync_every_micro_batch_is_refused_where_it_is_not_modelled(capsys):
    """[issue 18] --sync-every-micro-batch models a data-parallel ddp / zero1 loop without no_sync(): an LLM layout
    (Megatron reduces once per step) or a sharded strategy exits 2 with the fix."""
    code, _, err = run(capsys, *LLAMA70, "--tp", "8", "--global-batch", "64", "--sync-every-micro-batch")
    assert code == 2 and "sync-every-micro-batch" in err and "LLM layout" in err
    code, _, err = run(capsys, "predict", "--model", "resnet50", "--gpu", "h100-sxm", "--gpus", "8", "--per-gpu-batch",
                       "64", "--strategy", "fsdp-full", "--accum", "2", "--sync-every-micro-batch")
    assert code == 2 and "'fsdp-full'" in err


def test_plan_searches_layouts_under_the_cp_exchange_asked_for(capsys):
    """[issue 17] plan --cp-comm a2a: every layout it reports with cp > 1 obeys Ulysses' head rule (Llama 3 70B's 8
    K/V heads over tp x cp) and is timed with Ulysses' exposed all-to-alls (the same layout's step differs from the
    ring's), as predict's --cp-comm would; an unknown exchange is argparse's error."""
    from gpusim.rules import ulysses_heads_ok

    args = ["plan", "--model", "llama3-70b", "--tokens", "1e9", "--gpu", "h100-sxm", "--max-gpus", "64",
            "--seq-len", "32768", "--json"]
    code, out, _ = run(capsys, *args, "--cp-comm", "a2a")
    assert code == 0
    cfg = [r for r in json.loads(out)["configurations"] if (r.get("cp") or 1) > 1]
    assert cfg and all(ulysses_heads_ok(64, 8, int(r["tp"]), int(r["cp"])) for r in cfg)
    ring = {(r["node"], r["n_gpus"], r["layout"]): r["step_s"]
            for r in json.loads(run(capsys, *args)[1])["configurations"] if (r.get("cp") or 1) > 1}
    same = [(r["step_s"], ring[(r["node"], r["n_gpus"], r["layout"])]) for r in cfg
            if (r["node"], r["n_gpus"], r["layout"]) in ring]
    assert same and all(a != pytest.approx(b, rel=1e-9) for a, b in same)
    with pytest.raises(SystemExit):
        run(capsys, *args, "--cp-comm", "ulysses")


def test_plan_searches_layouts_under_the_cross_entropy_asked_for(capsys):
    """[issue 17] plan --cross-entropy native: every LLM layout is timed with Megatron-Core's native loss (the same
    layout is slower than under the default te, whose 6 bytes per logit are the fewest), the answer says what te
    would gain on the recommendation, as predict / sweep / compare do; an unknown loss is argparse's error."""
    args = ["plan", "--model", "llama3-8b", "--tokens", "1e9", "--gpu", "h100-sxm", "--max-gpus", "16", "--json"]
    code, out, _ = run(capsys, *args, "--cross-entropy", "native")
    assert code == 0
    native = json.loads(out)
    assert native["inputs"]["layout_pins"] == {"cross_entropy": "native"}
    te = {(r["node"], r["n_gpus"], r["layout"]): r["step_s"]
          for r in json.loads(run(capsys, *args)[1])["configurations"] if r.get("layout")}
    same = [(r["step_s"], te[(r["node"], r["n_gpus"], r["layout"])]) for r in native["configurations"]
            if r.get("layout") and (r["node"], r["n_gpus"], r["layout"]) in te]
    assert same and all(a > b for a, b in same), same[:3]
    assert [a["id"] for a in native["recommendation"]["software_advice"]].count("llm-cross-entropy") == 1
    with pytest.raises(SystemExit):
        run(capsys, *args, "--cross-entropy", "fused")


def test_sweep_says_what_te_would_gain_on_its_best_layout():
    """[issue 17] sweep --cross-entropy native: its best layout's advice names Transformer Engine's loss (the same
    advice plan gives), and the default te has nothing of that kind to say."""
    import gpusim

    kw = dict(model="llama3-8b", gpu="h100-sxm", gpus=8, global_batch=128, seq_len=8192)
    assert "llm-cross-entropy" in [a["id"] for a in gpusim.sweep(**kw, cross_entropy="native").software_advice]
    assert "llm-cross-entropy" not in [a["id"] for a in gpusim.sweep(**kw).software_advice]


def test_layout_pins_built_by_hand_refuse_an_unknown_setting():
    """[issue 17] gpusim.search.Pins, which the Python API builds directly, names a bad loss or context-parallel
    exchange in a ScenarioError instead of failing later inside the search."""
    from gpusim.errors import ScenarioError
    from gpusim.search import Pins

    with pytest.raises(ScenarioError, match="cross_entropy 'fused' is not one of te, native, unfused"):
        Pins(cross_entropy="fused")
    with pytest.raises(ScenarioError, match="cp_comm 'ulysses'"):
        Pins(cp_comm="ulysses")
    assert Pins(cross_entropy="native", cp_comm="a2a").cross_entropy == "native"
