"""[issue 20, "The CLI"; issue 19 item 3] Frictions a newcomer met on the command line, each with the test that
would have caught it."""

from __future__ import annotations

import json

import pytest

from gpusim.cli import main

LLM = ["--model", "llama3-8b", "--gpu", "h100-sxm", "--gpus", "8", "--seq-len", "4096", "--global-batch", "64",
       "--precision", "bf16"]


def run(capsys, *args):
    capsys.readouterr()
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


# ---- predict: an LLM run needs no --per-gpu-batch, and a typo in the model is the error shown -------------------

def test_an_llm_layout_needs_no_per_gpu_batch(capsys):
    code, out, err = run(capsys, "predict", *LLM, "--tp", "2", "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["parallelism"]["tp"] == 2 and d["scenario"]["strategy"]["per_gpu_batch"] == 1
    assert d["global_batch"] == 64


@pytest.mark.parametrize("extra", [["--tp", "2"], []], ids=["llm", "data-parallel"])
def test_a_model_typo_is_the_error_shown_not_the_missing_batch(capsys, extra):
    args = ["predict", "--model", "llama3-8bb", "--gpu", "h100-sxm", "--gpus", "8", *extra]
    code, out, err = run(capsys, *args)
    assert code == 2
    assert "unknown model 'llama3-8bb'" in err and "did you mean" in err
    assert "required" not in err and "per-gpu-batch" not in err


def test_a_data_parallel_run_without_a_batch_says_which_flag(capsys):
    code, out, err = run(capsys, "predict", "--model", "resnet50", "--gpu", "h100-sxm", "--gpus", "8")
    assert code == 2 and "--per-gpu-batch" in err and len(err.strip().splitlines()) == 1


# ---- --nodes follows from the node template ------------------------------------------------------------------

@pytest.mark.parametrize("hw,gpus,nodes", [(["--gpu", "h100-sxm"], 64, 8), (["--node", "dgx-h100"], 16, 2),
                                           (["--gpu", "gb200"], 72, 18)])
def test_nodes_follow_from_the_gpus_per_node(capsys, db, hw, gpus, nodes):
    if hw[0] == "--gpu" and hw[1] not in db.gpus:
        pytest.skip(f"{hw[1]} not in this database")
    code, out, err = run(capsys, "predict", "--model", "resnet50", *hw, "--gpus", str(gpus), "--per-gpu-batch", "64",
                         "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["n_gpus"] == gpus and d["n_nodes"] == nodes


def test_an_explicit_node_count_is_kept(capsys):
    code, out, err = run(capsys, "predict", "--model", "resnet50", "--gpu", "h100-sxm", "--gpus", "64", "--nodes", "16",
                         "--per-gpu-batch", "64", "--json")
    assert code == 0, err
    assert json.loads(out)["n_nodes"] == 16


def test_scale_and_sweep_infer_the_nodes_too(capsys):
    code, out, err = run(capsys, "sweep", *LLM[:4], "--gpus", "16", *LLM[6:], "--json")
    assert code == 0, err
    assert json.loads(out)["n_feasible"] > 0


# ---- nothing feasible: exit 0 and the reason, in sweep and plan alike -------------------------------------------

def test_sweep_with_nothing_feasible_exits_0_with_the_reason(capsys):
    args = ["sweep", "--model", "llama3-70b", "--gpu", "h100-sxm", "--gpus", "7", "--seq-len", "4096",
            "--global-batch", "64"]
    code, out, err = run(capsys, *args)
    assert code == 0, err
    assert "no feasible layout" in out and "best:" in out
    assert "tokens/s/GPU" not in out  # no empty table
    code, out, err = run(capsys, *args, "--json")
    d = json.loads(out)
    assert code == 0 and d["best"] is None and d["n_feasible"] == 0 and d["n_layouts"] > 0 and d["explanation"]
    assert all(r["reason"] for r in d["layouts"])


def test_plan_with_nothing_feasible_exits_0_with_the_reason_in_json(capsys):
    code, out, err = run(capsys, "plan", "--model", "llama2-7b", "--tokens", "1e10", "--deadline", "1s", "--gpu",
                         "h100-sxm", "--max-gpus", "16", "--no-progress", "--json")
    assert code == 0, err
    rec = json.loads(out)["recommendation"]
    assert rec["status"] != "ok"


# ---- the LLM breakdown's communication total counts every collective it lists ----------------------------------

def test_llm_communication_total_counts_every_listed_collective(capsys, db):
    from gpusim import units
    from gpusim.commands.predict import comm_summary
    from gpusim.simulation import Scenario, simulate

    scn = Scenario(model="llama3-70b", gpu="h100-sxm", gpus=64, nodes=8, seq_len=4096, tp=8, pp=2, cp=2,
                   micro_batch=1, global_batch=128, precision="bf16", kind="zero1")
    res = simulate(scn, db=db)
    total_s, hidden_s = comm_summary(res)
    listed = {k: v for k, v in res.breakdown_s.items() if "comm" in k or "p2p" in k}
    assert {"tp_comm_exposed_s", "cp_comm_exposed_s", "pp_p2p_exposed_s", "dp_comm_exposed_s"} <= set(listed)
    assert res.breakdown_s["tp_comm_exposed_s"] > res.detail["comm_total_s"]  # the case the old line got wrong
    assert total_s >= sum(listed.values()) - 1e-12
    assert total_s == pytest.approx(sum(listed.values()) - listed["dp_comm_exposed_s"]
                                    + max(res.detail["comm_total_s"], listed["dp_comm_exposed_s"]))
    code, out, err = run(capsys, "predict", "--model", "llama3-70b", "--gpu", "h100-sxm", "--gpus", "64", "--nodes",
                         "8", "--seq-len", "4096", "--tp", "8", "--pp", "2", "--cp", "2", "--micro-batch", "1",
                         "--global-batch", "128", "--precision", "bf16", "--strategy", "zero1")
    assert code == 0, err
    assert f"communication {units.format_duration(total_s)} in total" in out


def test_data_parallel_communication_total_is_the_gradient_exchange(db):
    from gpusim.commands.predict import comm_summary
    from gpusim.simulation import Scenario, simulate

    res = simulate(Scenario(model="resnet50", gpu="h100-sxm", gpus=16, nodes=2, per_gpu_batch=64), db=db)
    total_s, hidden_s = comm_summary(res)
    assert total_s == pytest.approx(max(res.detail["comm_total_s"], res.breakdown_s["comm_exposed_s"]))
    assert hidden_s == res.detail["comm_hidden_s"]


# ---- compare takes every flag predict takes ----------------------------------------------------------------------

def test_compare_help_lists_the_layout_and_moe_flags(capsys):
    with pytest.raises(SystemExit) as e:
        main(["compare", "--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    for flag in ("--tp", "--pp", "--vp", "--cp", "--ep", "--global-batch", "--recompute", "--moe-dispatcher",
                 "--ep-overlap", "--per-gpu-batch", "--gpu", "--vs"):
        assert flag in out, flag


def test_compare_layouts_in_tokens_per_gpu_and_mfu(capsys):
    base = ["--model", "llama3-70b", "--gpu", "h100-sxm", "--gpus", "64", "--nodes", "8", "--seq-len", "4096",
            "--micro-batch", "1", "--global-batch", "256", "--precision", "bf16", "--strategy", "zero1"]
    code, out, err = run(capsys, "compare", *base, "--tp", "4", "--pp", "4", "--vs", "--tp", "2", "--pp", "8")
    assert code == 0, err
    assert "tokens/s per GPU" in out and "MFU" in out and "explains most" in out
    assert "tp 4 -> 2" in out and "pp 4 -> 8" in out
    code, out, err = run(capsys, "compare", *base, "--tp", "4", "--pp", "4", "--vs", "--tp", "2", "--pp", "8",
                         "--json")
    d = json.loads(out)
    assert [r["parallelism"]["tp"] for r in d["results"]] == [4, 2]
    g = d["gaps"][0]
    assert g["gap_tokens_per_s_per_gpu"] == pytest.approx(d["results"][1]["tokens_per_s_per_gpu"]
                                                          - d["results"][0]["tokens_per_s_per_gpu"])
    assert {tuple(c["inputs"]) for c in g["changes"]} >= {("strategy.tp",), ("strategy.pp",)}


def test_compare_moe_flags_are_taken(capsys):
    base = ["--model", "mixtral-8x7b", "--gpu", "h100-sxm", "--gpus", "64", "--seq-len", "4096", "--tp", "2",
            "--pp", "4", "--micro-batch", "1", "--global-batch", "256", "--precision", "bf16", "--strategy", "zero1"]
    code, out, err = run(capsys, "compare", *base, "--ep", "8", "--vs", "--ep", "4", "--json")
    assert code == 0, err
    assert [r["parallelism"]["ep"] for r in json.loads(out)["results"]] == [8, 4]


def test_an_empty_gpu_id_is_a_clean_error(capsys):
    # found by benchmarks/fuzz_cli.py: `--gpu ""` was an internal error (exit 3)
    code, out, err = run(capsys, "predict", "--model", "resnet50", "--gpu", "", "--gpus", "8", "--per-gpu-batch", "64")
    assert code == 2 and "give a GPU" in err


def test_a_global_batch_alone_does_not_make_a_cnn_an_llm_layout(capsys):
    code, out, err = run(capsys, "predict", "--model", "resnet50", "--gpu", "h100-sxm", "--gpus", "8", "--global-batch",
                         "1024")
    assert code == 2 and "--per-gpu-batch" in err
    code, out, err = run(capsys, "predict", *LLM, "--json")  # a transformer with --global-batch: micro-batch 1
    assert code == 0, err
    assert json.loads(out)["scenario"]["strategy"]["per_gpu_batch"] == 1
