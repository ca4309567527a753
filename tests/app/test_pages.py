"""Every page of the planner under streamlit.testing.v1.AppTest: it runs without an exception, its charts
are there, and widgets move the numbers in the expected direction. Bad combinations give a message in the
page, never a traceback."""

from __future__ import annotations

import pytest
from app_helpers import figures, metrics, no_trouble, parse_ms, parse_num, run_app

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


# --------------------------------------------------------------------------------------------------
# Step
# --------------------------------------------------------------------------------------------------

def test_step_page_default():
    at = run_app("step")
    no_trouble(at)
    m = metrics(at)
    for label in ("Step time", "Samples/s", "Speedup vs 1 GPU", "Scaling efficiency", "MFU", "GPU busy"):
        assert label in m
    assert any(k.startswith("Memory per GPU") for k in m)
    figs = figures(at)
    assert "Where one training step goes" in figs and "Memory per GPU" in figs
    bars = [t for t in figs["Where one training step goes"]["data"] if t["type"] == "bar"]
    assert [t["name"] for t in bars][:2] == ["compute", "exposed communication"]
    assert any("Bottleneck" in s.value for s in [*at.success, *at.warning])
    assert len(at.get("download_button")) == 2
    # how far such predictions were from published runs (gpusim.track_record), under the numbers
    record = [c.value for c in at.caption if c.value.startswith("**Track record**")]
    assert len(record) == 1 and "measurements, median" in record[0] and "p90" in record[0]
    assert "the predicted speed" in record[0] and " Here: " in record[0] and "samples/s" in record[0]
    # [stop 55] the memory record speaks for LLM layouts only (the published peaks are Megatron runs')
    assert not any(c.value.startswith("**Memory record**") for c in at.caption)


def test_step_more_gpus_more_throughput_less_efficiency():
    at = run_app("step", {"model": "bert-large", "gpu": "l40s", "batch": "16", "gpus": "2"})
    no_trouble(at)
    m2 = metrics(at)
    at.number_input(key="gpus").set_value(8).run()
    no_trouble(at)
    m8 = metrics(at)
    assert parse_num(m8["Samples/s"]) > parse_num(m2["Samples/s"])
    assert parse_num(m8["Scaling efficiency"]) < parse_num(m2["Scaling efficiency"])


def test_step_larger_batch_busier_gpus_and_more_memory():
    at = run_app("step", {"batch": "8"})
    small = metrics(at)
    at.number_input(key="batch").set_value(256).run()
    no_trouble(at)
    large = metrics(at)
    assert parse_num(large["GPU busy"]) > parse_num(small["GPU busy"])
    assert parse_ms(large["Step time"]) > parse_ms(small["Step time"])
    mem = lambda m: next(v for k, v in m.items() if k.startswith("Memory per GPU"))
    assert parse_num(mem(large).split()[0]) > parse_num(mem(small).split()[0])


def test_step_slower_fabric_exposes_communication():
    at = run_app("step", {"model": "bert-large", "gpu": "l40s", "batch": "32"})
    fast = metrics(at)
    at.selectbox(key="fabric").select("pcie-cross-socket").run()
    no_trouble(at)
    slow = metrics(at)
    assert parse_ms(slow["Step time"]) > parse_ms(fast["Step time"])
    assert parse_num(slow["Scaling efficiency"]) < parse_num(fast["Scaling efficiency"])
    assert any("Bottleneck: communication" in w.value for w in at.warning)
    comm = next(t for t in figures(at)["Where one training step goes"]["data"] if t["name"] == "exposed communication")
    assert comm["x"][0] > 10.0  # ms


def test_step_dataparallel_recommends_ddp():
    at = run_app("step")
    ddp = metrics(at)
    at.selectbox(key="strategy").select("dp").run()
    no_trouble(at)
    assert parse_num(metrics(at)["Samples/s"]) < parse_num(ddp["Samples/s"])
    assert any("use-ddp" in md.value for md in at.markdown)
    gains = figures(at)["Predicted throughput change of each advice"]["data"][0]
    assert "use-ddp" in gains["y"]


def test_step_query_params_set_the_scenario():
    at = run_app("step", {"model": "gpt2", "gpu": "a100-sxm4-80gb", "gpus": "16", "nodes": "2", "precision": "amp_fp16",
                          "net": "eth-25g", "batch": "8"})
    no_trouble(at)
    assert at.selectbox(key="model").value == "gpt2"
    assert at.selectbox(key="gpu").value == "a100-sxm4-80gb"
    assert at.number_input(key="gpus").value == 16
    assert at.selectbox(key="net").value == "eth-25g"
    assert "16 x a100-sxm4-80gb on 2 nodes" in at.markdown[0].value


def test_step_invalid_query_values_fall_back_to_defaults():
    at = run_app("step", {"gpu": "no-such-gpu", "gpus": "lots"})
    no_trouble(at)
    assert at.selectbox(key="gpu").value == "h100-sxm"
    assert at.number_input(key="gpus").value == 8


@pytest.mark.parametrize("query, words", [
    ({"gpus": "3", "nodes": "2"}, "split evenly"),
    ({"strategy": "dp", "gpus": "16", "nodes": "2"}, "DataParallel"),
    ({"gpu": "rtx-4090", "fabric": "nvswitch"}, "no NVLink"),
    ({"gpu": "p100-pcie-16gb", "precision": "bf16"}, "bf16"),
    ({"offload": "true"}, "sharded"),
])
def test_step_bad_combinations_show_a_message(query, words):
    at = run_app("step", query)
    assert not at.exception
    assert at.error and words in at.error[0].value


def test_step_does_not_fit_shows_memory_and_fix():
    at = run_app("step", {"model": "llama2-7b", "batch": "8"})
    assert not at.exception
    assert any("Does not fit" in e.value for e in at.error)
    assert any("fit-memory" in md.value for md in at.markdown)


def test_step_custom_workload_and_node_template():
    # a small, compute-heavy custom model: doubling its FLOPs must cost throughput
    at = run_app("step", {"wl": "custom", "params_m": "20", "gflop": "100", "act_mib": "20", "hw": "node",
                          "node": "pcie-8x-dual-socket", "batch": "8"})
    no_trouble(at)
    assert "custom workload on 8 x rtx-6000-ada (pcie-8x-dual-socket)" in at.markdown[0].value
    before = parse_num(metrics(at)["Samples/s"])
    at.number_input(key="gflop").set_value(200.0).run()
    no_trouble(at)
    assert parse_num(metrics(at)["Samples/s"]) < before


def test_step_loader_can_starve_the_gpus():
    at = run_app("step", {"loader": "true", "workers": "1"})
    no_trouble(at)
    assert any("data-loading" in w.value for w in at.warning)
    starved = parse_num(metrics(at)["Samples/s"])
    at.number_input(key="workers").set_value(32).run()
    assert parse_num(metrics(at)["Samples/s"]) > starved


# --------------------------------------------------------------------------------------------------
# Scaling
# --------------------------------------------------------------------------------------------------

def test_scaling_page_fabrics_and_strategies():
    at = run_app("scaling", {"model": "bert-large", "gpu": "l40s", "batch": "16"})
    no_trouble(at)
    figs = figures(at)
    sp = figs["Speedup over one GPU, by fabric"]
    names = [t["name"] for t in sp["data"]]
    assert "ideal (linear)" in names
    assert any(n.startswith("PCIe switch") for n in names) and any(n.startswith("PCIe across sockets") for n in names)
    assert any(n.startswith("network eth-100g") for n in names)
    eff = {t["name"]: t["y"] for t in figs["Scaling efficiency, by fabric"]["data"]}
    assert eff["PCIe switch"][3] > eff["PCIe across sockets"][3]  # at 8 GPUs
    kinds = {t["name"]: t for t in figs["Speedup over one GPU, by strategy"]["data"]}
    assert {"ddp", "dp", "fsdp-full"} <= set(kinds)
    assert max(kinds["dp"]["x"]) == 8 and max(kinds["ddp"]["x"]) == 64
    assert "Step time by part vs GPU count" in figs


def test_scaling_page_strong_mode_and_range():
    at = run_app("scaling", {"batch": "64"})
    at.segmented_control(key="mode").set_value("strong").run()
    no_trouble(at)
    at.select_slider(key="max_gpus").set_value(16).run()
    no_trouble(at)
    sp = figures(at)["Speedup over one GPU, by strategy"]
    ddp = next(t for t in sp["data"] if t["name"] == "ddp")
    assert max(ddp["x"]) == 16
    # strong scaling: speedup below the ideal, per-GPU batch shrinking
    assert ddp["y"][-1] < 16
    batches = [c[1] for c in ddp["customdata"]]
    assert batches == sorted(batches, reverse=True)


def test_scaling_page_reports_impossible_fabrics():
    at = run_app("scaling", {"gpu": "rtx-4090"})
    no_trouble(at)
    at.multiselect(key="cmp_fabrics").select("nvswitch").run()
    assert not at.exception
    assert any("no NVLink" in c.value for c in at.caption)


# --------------------------------------------------------------------------------------------------
# Batch and utilisation
# --------------------------------------------------------------------------------------------------

def test_batch_page_curves_and_limits():
    at = run_app("batch")
    no_trouble(at)
    figs = figures(at)
    tp = figs["Throughput vs per-GPU batch"]
    xs = tp["data"][0]["x"]
    assert xs == sorted(xs) and xs[0] == 1
    util = next(t for t in figs["GPU utilisation and scaling efficiency vs per-GPU batch"]["data"]
                if t["name"].startswith("GPU busy"))
    assert util["y"] == sorted(util["y"])
    texts = [a["text"] for a in tp["layout"]["annotations"]]
    assert any(t.startswith("memory limit") for t in texts)
    m = metrics(at)
    assert parse_num(m["Largest batch that fits"]) > 256


def test_batch_page_memory_limit_follows_the_gpu():
    at = run_app("batch")
    big = parse_num(metrics(at)["Largest batch that fits"])
    at.selectbox(key="gpu").select("rtx-3080").run()
    no_trouble(at)
    assert parse_num(metrics(at)["Largest batch that fits"]) < big


# --------------------------------------------------------------------------------------------------
# Rooflines
# --------------------------------------------------------------------------------------------------

def test_rooflines_page():
    at = run_app("rooflines", {"model": "bert-large", "gpu": "l40s", "batch": "16"})
    no_trouble(at)
    figs = figures(at)
    gpu = next(v for k, v in figs.items() if k.startswith("Roofline of l40s"))
    assert any(t["name"] == "achievable roofline" for t in gpu["data"])
    assert any(t.get("mode") == "markers" and t["name"].startswith("matmul") for t in gpu["data"])
    comm = figs["Communication roofline"]
    names = [t["name"] for t in comm["data"]]
    assert any(n.startswith("PCIe across sockets") for n in names)
    assert any(n.startswith("this scenario") for n in names)
    assert "this workload" in names


def test_rooflines_more_batch_more_flops_per_byte():
    at = run_app("rooflines", {"model": "bert-large", "batch": "8"})
    low = parse_num(metrics(at)["FLOPs per byte communicated"])
    at.number_input(key="batch").set_value(32).run()
    no_trouble(at)
    assert parse_num(metrics(at)["FLOPs per byte communicated"]) == pytest.approx(4 * low, rel=0.02)


# --------------------------------------------------------------------------------------------------
# Topology
# --------------------------------------------------------------------------------------------------

def test_topology_page_example_and_apply():
    at = run_app("topology", {"gpu": "rtx-a6000"})
    no_trouble(at)
    assert at.info  # asks for a matrix
    at.button[0].click().run()  # load the example
    no_trouble(at)
    figs = figures(at)
    assert "GPU-to-GPU paths (nvidia-smi topo -m)" in figs
    hm = figs["GPU-to-GPU paths (nvidia-smi topo -m)"]["data"][0]
    assert hm["text"][0][1] == "NV4" and hm["text"][0][2] == "SYS"
    assert any("SYS" in w.value for w in at.warning)
    ar = figs["Expected all-reduce bandwidth"]
    assert ar["data"][0]["name"].startswith("this machine")
    # apply the fabric to the scenario: the sidebar follows
    at.button[1].click().run()
    assert at.selectbox(key="fabric").value == "nvlink"
    assert at.number_input(key="gpus").value == 4


def test_topology_page_bad_text_is_a_message():
    at = run_app("topology")
    at.text_area(key="topo_text").input("this is not a matrix").run()
    assert not at.exception
    assert at.error and "GPU0" in at.error[0].value


# --------------------------------------------------------------------------------------------------
# Plan (real when its module lands; a plain message until then). Calibration: test_calibration_page.py
# --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("page, module", [("plan", "gpusim.planning")])
def test_pending_pages_say_what_they_need(page, module):
    import importlib.util

    at = run_app(page)
    assert not at.exception
    if importlib.util.find_spec(module) is None:
        assert any("not installed yet" in i.value for i in at.info)
        assert not at.get("plotly_chart")


def test_every_page_shows_server_time():
    at = run_app("step")
    assert any("computed in" in c.value for c in at.caption)


# --------------------------------------------------------------------------------------------------
# Plan (wired to gpusim.plan)
# --------------------------------------------------------------------------------------------------

needs_plan = pytest.mark.skipif(__import__("importlib.util").util.find_spec("gpusim.planning") is None,
                                reason="gpusim.planning is not installed yet")


def _plan_metrics(at) -> tuple[float, float, int]:
    from gpusim import units

    m = metrics(at)
    t = m["Time to train"]
    v, unit = t.split()
    seconds = float(v) * {"s": 1.0, "min": units.MINUTE, "h": units.HOUR, "days": units.DAY, "d": units.DAY}[unit]
    cost = m["Cost"].replace("$", "").replace(",", "").split()
    usd = float(cost[0]) * ({"k": 1e3, "M": 1e6}[cost[1]] if len(cost) > 1 else 1.0)
    gpus = int(next(v for k, v in m.items() if k.startswith("GPUs")).replace(",", ""))
    return seconds, usd, gpus


@needs_plan
def test_plan_page_recommends_and_draws():
    at = run_app("plan", {"model": "llama2-7b", "deadline_d": "14", "budget_usd": "100000"})
    no_trouble(at)
    assert at.success and "trains in" in at.success[0].value
    figs = figures(at)
    pareto = next(v for k, v in figs.items() if k.startswith("Time to train vs cost"))
    names = [t["name"] for t in pareto["data"]]
    assert {"configurations", "Pareto frontier", "recommended"} <= set(names)
    assert "What moves the answer most" in figs
    seconds, usd, _ = _plan_metrics(at)
    assert seconds <= 14 * 86400 and usd <= 100_000
    assert any("Bill of materials" in md.value for md in at.markdown)
    assert len(at.dataframe) >= 2
    # how far predictions of the recommendation's kind were from published runs (gpusim.track_record)
    # (over the whole database a B200 layout row wins at a neocloud's per-GPU price: a kind with no published run yet,
    # which the caption says instead of a band)
    lead = "**Track record** of the recommended configuration's kind: "
    rec = [c.value for c in at.caption if c.value.startswith(lead)]
    assert rec and (rec[0].startswith(lead + "published") or
                    rec[0].startswith(lead + "none: gpusim's validation tables hold no published run of this kind"))


@needs_plan
def test_plan_tighter_deadline_costs_more_and_is_faster():
    at = run_app("plan", {"model": "llama2-7b", "deadline_d": "14"})
    slow_t, slow_usd, slow_n = _plan_metrics(at)
    at.number_input(key="deadline_d").set_value(2.0)
    at.get("form_submit_button")[0].click()  # the form applies on submit
    at.run()
    no_trouble(at)
    fast_t, fast_usd, fast_n = _plan_metrics(at)
    assert fast_t <= 2 * 86400 < slow_t
    assert fast_usd >= slow_usd and fast_n > slow_n


@needs_plan
def test_plan_impossible_deadline_says_what_came_closest():
    at = run_app("plan", {"model": "llama2-70b", "deadline_d": "0.01"})
    assert not at.exception
    assert at.warning and "No configuration meets" in at.warning[0].value


@needs_plan
def test_plan_custom_workload_in_samples():
    at = run_app("plan", {"wl": "custom", "params_m": "50", "gflop": "5", "act_mib": "30", "samples_m": "10",
                          "epochs": "5"})
    no_trouble(at)
    assert at.success


def test_error_messages_name_the_sidebar_widgets():
    at = run_app("step", {"hw": "node", "node": "dgx-h100", "gpus": "16"})
    assert not at.exception
    assert at.error and "'Nodes'" in at.error[0].value and "--nodes" not in at.error[0].value


@pytest.mark.parametrize("page, label", [("step", "Step time"), ("batch", "GPU busy now"), ("rooflines", "Compute alone")])
def test_model_parameters_in_the_session_reach_every_page(page, label):
    """Fitted parameters (what the Calibration page will put in the session) replace the defaults everywhere."""
    from gpusim.app_pages.shell import PARAMS_KEY, PARAMS_LABEL_KEY
    from gpusim.params import DEFAULT_PARAMS

    at = run_app(page)
    before = metrics(at)[label]
    slow = DEFAULT_PARAMS.replace(matmul_eff_frac={k: v / 4 for k, v in DEFAULT_PARAMS.matmul_eff_frac.items()},
                                  kernel_tail_s=DEFAULT_PARAMS.kernel_tail_s * 10)
    at.session_state[PARAMS_KEY] = slow
    at.session_state[PARAMS_LABEL_KEY] = "test fit"
    at.run()
    no_trouble(at)
    assert metrics(at)[label] != before
    assert any("test fit" in c.value for c in at.caption)


def test_step_attention_kernel_is_an_input_for_transformers_only():
    """[issue 17] The sidebar's attention kernel reaches the prediction as the CLI's --attention does: unfused
    attention keeps the s x s scores, so it is slower than the fused kernel; a CNN offers no such choice."""
    query = {"model": "llama2-7b", "gpu": "h100-sxm", "gpus": "8", "batch": "1", "seq": "4096",
             "strategy": "fsdp-full", "precision": "bf16"}
    at = run_app("step", {**query, "attn": "flash"})
    no_trouble(at)
    assert at.selectbox(key="attn").value == "flash"
    fused = parse_ms(metrics(at)["Step time"])
    at.selectbox(key="attn").set_value("unfused").run()
    no_trouble(at)
    assert parse_ms(metrics(at)["Step time"]) > 1.05 * fused
    cnn = run_app("step", {"model": "resnet50"})
    no_trouble(cnn)
    assert "attn" not in [s.key for s in cnn.selectbox]


def test_step_cuda_graphs_are_an_input_for_transformers_only():
    """[issue 17] The sidebar's CUDA graphs reach the prediction as the CLI's --cuda-graph-scope does: GPT-3 125M at
    one sequence per GPU on GB200 is launch-bound, so full-iteration graphs shorten its step; a dense model is not
    offered the MoE scopes, an MoE model is; a CNN offers no such choice."""
    query = {"model": "gpt3-125m", "gpu": "gb200", "gpus": "8", "nodes": "2", "batch": "1", "seq": "2048",
             "strategy": "zero1", "precision": "bf16"}
    at = run_app("step", query)
    no_trouble(at)
    box = at.selectbox(key="graphs")
    assert box.value == "eager" and "attn moe_router moe_preprocess" not in box.options
    eager = parse_ms(metrics(at)["Step time"])
    box.set_value("full_iteration").run()
    no_trouble(at)
    assert parse_ms(metrics(at)["Step time"]) < 0.8 * eager
    moe = run_app("step", {"model": "qwen3-30b-a3b", "gpu": "gb200", "gpus": "8", "nodes": "2", "batch": "1",
                           "strategy": "fsdp-full", "graphs": "attn moe_router moe_preprocess"})
    no_trouble(moe)
    assert moe.selectbox(key="graphs").value == "attn moe_router moe_preprocess"
    cnn = run_app("step", {"model": "resnet50"})
    no_trouble(cnn)
    assert "graphs" not in [s.key for s in cnn.selectbox]


def test_step_cross_entropy_is_an_input_for_transformers_only():
    """[issue 17] The sidebar's loss cross entropy reaches the prediction as the CLI's --cross-entropy does: GPT-3 125M
    (50,257 logits per token over a 768-wide model) on an LLM layout (CUDA graphs put it there) is slower with
    Megatron-Core's native cross entropy than with Transformer Engine's, the default; a CNN and an encoder (BERT's
    question-answering head) offer no such choice."""
    query = {"model": "gpt3-125m", "gpu": "gb200", "gpus": "8", "nodes": "2", "batch": "1", "seq": "2048",
             "strategy": "zero1", "precision": "bf16", "graphs": "full_iteration"}
    at = run_app("step", query)
    no_trouble(at)
    box = at.selectbox(key="ce")
    assert box.value == "te" and set(box.options) == {"te", "native", "unfused"}
    te = parse_ms(metrics(at)["Step time"])
    box.set_value("native").run()
    no_trouble(at)
    assert parse_ms(metrics(at)["Step time"]) > 1.02 * te
    for other in ("resnet50", "bert-large"):
        at = run_app("step", {"model": other})
        no_trouble(at)
        assert "ce" not in [s.key for s in at.selectbox], other


def test_step_moe_options_are_inputs_for_moe_models_only():
    """[issue 17] The sidebar's MoE options reach the prediction as the CLI's --moe-fused-mlp / --moe-dispatcher /
    --ep-overlap do: Qwen3-30B-A3B in MXFP8 on B200 is faster with TE's fused grouped MLP; on H100 the same URL says
    what the option needs instead of failing; a dense model is not offered them."""
    query = {"model": "qwen3-30b-a3b", "hw": "node", "node": "dgx-b200", "gpus": "8", "batch": "1", "seq": "4096",
             "strategy": "fsdp-full", "precision": "mxfp8", "dispatcher": "deepep"}  # (the per-GEMM path either way)
    at = run_app("step", query)
    no_trouble(at)
    assert at.checkbox(key="fused_mlp").value is False and at.selectbox(key="dispatcher").value == "deepep"
    grouped = parse_ms(metrics(at)["Step time"])
    at.checkbox(key="fused_mlp").check().run()
    no_trouble(at)
    assert parse_ms(metrics(at)["Step time"]) < grouped
    hopper = run_app("step", {**query, "node": "dgx-h100", "precision": "fp8", "fused_mlp": "true"})
    assert not hopper.exception
    assert hopper.error and "--moe-fused-mlp needs" in hopper.error[0].value
    dense = run_app("step", {"model": "llama3-8b", "batch": "1", "strategy": "fsdp-full"})
    no_trouble(dense)
    assert "fused_mlp" not in [c.key for c in dense.checkbox]
    assert "dispatcher" not in [b.key for b in dense.selectbox]


def test_step_attention_kernel_on_a_strategy_that_cannot_time_it_says_what_to_choose():
    at = run_app("step", {"model": "llama2-7b", "strategy": "dp", "attn": "flash2", "batch": "1"})
    assert not at.exception
    assert at.error and "per-GEMM" in at.error[0].value


def test_step_all_reduce_every_micro_batch_is_an_input():
    """[issue 18] The sidebar's "All-reduce every accumulated micro-batch" (the CLI's --sync-every-micro-batch): with
    4 accumulation steps over host-staged PCIe the exposed exchange grows 4x, the step slows, and the advice names
    no_sync()."""
    query = {"model": "bert-large", "gpu": "a100-sxm4-80gb", "gpus": "8", "batch": "8", "accum": "4",
             "fabric": "pcie-host"}
    at = run_app("step", query)
    no_trouble(at)
    assert at.checkbox(key="sync_every").value is False
    once = parse_ms(metrics(at)["Step time"])
    at.checkbox(key="sync_every").check().run()
    no_trouble(at)
    assert parse_ms(metrics(at)["Step time"]) > 1.5 * once
    assert any("no_sync()" in m.value for m in at.markdown)


def test_step_optimizer_implementation_is_an_input():
    """[issue 18] The sidebar's "Optimizer implementation" (the CLI's --optimizer-impl): torch.optim's per-tensor loop
    on ResNet-50 (161 tensors) lengthens the step by its launches and the advice names the multi-tensor path; a model
    that does not count its tensors gets the fix, not a traceback."""
    query = {"model": "resnet50", "gpu": "a100-sxm4-80gb", "gpus": "8", "batch": "64", "optimizer": "sgd-momentum"}
    at = run_app("step", query)
    no_trouble(at)
    assert at.selectbox(key="opt_impl").value == "foreach"
    once = parse_ms(metrics(at)["Step time"])
    at.selectbox(key="opt_impl").set_value("forloop").run()
    no_trouble(at)
    assert parse_ms(metrics(at)["Step time"]) > once + 3.0  # 805 launches at 8 us: about 6 ms
    assert any("foreach" in m.value for m in at.markdown)
    bert = run_app("step", {"model": "bert-large", "gpu": "a100-sxm4-80gb", "gpus": "8", "batch": "8",
                            "opt_impl": "forloop"})
    assert not bert.exception
    assert bert.error and "parameter tensors" in bert.error[0].value


def test_step_offers_the_models_multi_token_prediction_modules():
    """[issue 17] A model trained with multi-token prediction modules (DeepSeek-V3: one) gets the sidebar's
    "Multi-token prediction modules" (the CLI's --mtp-layers); 0 trains without them and the page says so in its
    parameters; a model without them is not offered it."""
    query = {"model": "deepseek-v3", "gpu": "h100-sxm", "gpus": "8", "batch": "1", "strategy": "fsdp-full",
             "seq": "1024"}
    own = run_app("step", query, timeout=120)  # (671B on 8 GPUs: the page says it does not fit, and still predicts)
    assert not own.exception
    assert own.number_input(key="mtp").value is None
    assert own.selectbox(key="mtp_sh").value == "model"  # the CLI's --mtp-shared / --no-mtp-shared: unset
    # the sharing is a three-way choice: a module per pass is taken from the URL (the CLI's --no-mtp-shared), and a
    # link from before it was one (stop 50's checkbox, mtp_sh=true) is named and falls back to the model's own
    sep = run_app("step", {**query, "mtp_sh": "separate"}, timeout=120)
    assert not sep.exception and sep.selectbox(key="mtp_sh").value == "separate"
    assert not [w.value for w in sep.warning if "URL parameter" in w.value]
    old_link = run_app("step", {**query, "mtp_sh": "true"}, timeout=120)
    assert old_link.selectbox(key="mtp_sh").value == "model"
    assert any("mtp_sh='true' ignored" in w.value for w in old_link.warning if "URL parameter" in w.value)
    off = run_app("step", {**query, "mtp": "0"}, timeout=120)
    assert not off.exception
    assert off.number_input(key="mtp").value == 0
    assert metrics(off) != metrics(own)
    dense = run_app("step", {"model": "llama3-8b", "batch": "1", "strategy": "fsdp-full"})
    assert not dense.exception and "mtp" not in [n.key for n in dense.number_input]
    assert "mtp_sh" not in [c.key for c in dense.selectbox]


def test_step_offers_bf16_layers_for_quantised_transformers_only():
    """[stop 58] The sidebar's "First / Last layers in BF16" are the CLI's --bf16-layers START END, offered where a
    transformer runs quantised (fp8, mxfp8, nvfp4): Llama 3 8B in NVFP4 on 8 B200 with its last 4 layers in BF16
    (Megatron-Bridge's Llama 3 8B NVFP4 recipe) takes longer per step than all in NVFP4; in BF16, or for a CNN, the
    inputs are not offered."""
    query = {"model": "llama3-8b", "gpu": "b200", "gpus": "8", "batch": "1", "seq": "8192", "strategy": "zero1",
             "precision": "nvfp4"}
    at = run_app("step", query)
    no_trouble(at)
    assert at.number_input(key="bf16_first").value is None and at.number_input(key="bf16_last").value is None
    all_fp4 = parse_ms(metrics(at)["Step time"])
    at.number_input(key="bf16_last").set_value(4).run()
    no_trouble(at)
    assert parse_ms(metrics(at)["Step time"]) > all_fp4
    bf16 = run_app("step", {**query, "precision": "bf16"})
    no_trouble(bf16)
    assert "bf16_last" not in [n.key for n in bf16.number_input]
    cnn = run_app("step", {"model": "resnet50", "precision": "fp8", "gpu": "h100-sxm"})
    assert not cnn.exception and "bf16_first" not in [n.key for n in cnn.number_input]
