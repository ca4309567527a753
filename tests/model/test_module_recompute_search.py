"""[issue 17] The layout search tries the recomputed modules the MoE recipes run (Megatron-Core's selective
recomputation of the norms and the experts' activation, MLA's up-projections with them): gpusim.search
MODULE_RECOMPUTES, search_recomputes, recompute_fields and layout_scenario."""

from __future__ import annotations

import numpy as np
import pytest

from gpusim import search as S
from gpusim.hwdb import load
from gpusim.scenario import Scenario
from gpusim.simulation import simulate
from gpusim.strategy import Strategy
from gpusim.workload import get_workload

DB = load()


def test_which_recomputations_a_search_tries():
    spec = lambda m: get_workload(m).transformer  # noqa: E731
    assert S.search_recomputes(spec("llama3-8b"), Strategy()) == ("none", "selective", "full")
    assert S.search_recomputes(spec("qwen3-30b-a3b"), Strategy()) == ("none", "selective", "full",
                                                                      "layernorm+moe_act", "layernorm+moe")
    assert S.search_recomputes(spec("deepseek-v3"), Strategy()) == ("none", "selective", "full",
                                                                    "layernorm+moe_act+mla_up_proj", "layernorm+moe")
    # modules the user names ride on every layout: no module set of the search's own beside them
    assert S.search_recomputes(spec("qwen3-30b-a3b"), Strategy(recompute="none", recompute_modules=("moe_act",))) \
        == ("none", "selective", "full")


def test_recompute_fields_hand_worked():
    """Codes 0-5 (none, selective, full, the three module sets): a module set runs at granularity none with its flags;
    flags the scenario already sets stay set. [stop 53] layernorm+moe (code 5) recomputes the norms and the whole MoE
    block, not moe_act (inside the block it changes nothing); the block's flag is a column only where a row has it."""
    class Inp:
        recompute_norms = np.array([False])
        recompute_moe_act = np.array([False])
        recompute_mla_up = np.array([False])

    f = S.recompute_fields(np.arange(6), Inp())
    assert f["recompute"].tolist() == [0, 1, 2, 0, 0, 0]
    assert f["recompute_norms"].tolist() == [False, False, False, True, True, True]
    assert f["recompute_moe_act"].tolist() == [False, False, False, True, True, False]
    assert f["recompute_mla_up"].tolist() == [False, False, False, False, True, False]
    assert f["recompute_moe"].tolist() == [False, False, False, False, False, True]
    assert "recompute_moe" not in S.recompute_fields(np.arange(5), Inp())
    Inp.recompute_mla_up = np.array([True])
    assert S.recompute_fields(np.arange(6), Inp())["recompute_mla_up"].all()


def _qwen235():
    return Scenario.create(model="qwen3-235b-a22b", gpu="h100-sxm", gpus=256, nodes=32, precision="bf16", kind="zero1",
                           global_batch=2048, seq_len=4096, recompute="none", per_gpu_batch=1)


def test_a_module_layout_is_what_predict_gives_and_the_search_finds_it_where_it_pays():
    """Qwen3-235B-A22B on 256 H100: its recipes recompute the norms and the experts' activation, which lets layouts
    fit without recomputing whole layers. The search's best with the module set is faster than the best without it,
    and simulating its layout with --recompute none --recompute-modules layernorm moe_act (layout_scenario) gives the
    search's own figure."""
    scn = _qwen235()
    res = S.search_layouts(scn, db=DB)
    rows = S.search_table(res, top=1)
    best = rows[0]
    assert best["recompute"] == "layernorm+moe_act"
    plain = S.search_layouts(scn, db=DB, recomputes=("none", "selective", "full"))
    assert best["tokens_per_s"] > S.search_table(plain, top=1)[0]["tokens_per_s"]
    again = S.layout_scenario(scn, best, global_batch=2048)
    assert again.strategy.recompute == "none" and again.strategy.recompute_modules == ("layernorm", "moe_act")
    sim = simulate(again, db=DB, recommend=False)
    assert sim.step_s == pytest.approx(best["step_s"], rel=1e-9)
    assert sim.memory_per_gpu_bytes == pytest.approx(best["memory_per_gpu_bytes"], rel=1e-9)


def test_a_dense_model_is_searched_as_before():
    scn = Scenario.create(model="llama3-8b", gpu="h100-sxm", gpus=8, precision="bf16", kind="zero1", global_batch=64,
                          seq_len=4096, recompute="none", per_gpu_batch=1)
    res = S.search_layouts(scn, db=DB)
    assert set(np.unique(res["layouts"]["recompute"]).tolist()) <= {0, 1, 2}


def test_a_module_set_name_reads_as_those_modules():
    """The search's names for a module set are accepted wherever a recomputation is (the Python API, the CLI's
    --recompute): none with those modules, selective where core_attn is one; an unknown name is refused."""
    s = Strategy(recompute="layernorm+moe_act")
    assert (s.recompute, s.recompute_modules) == ("none", ("layernorm", "moe_act"))
    s = Strategy(recompute="core_attn+moe_act")
    assert (s.recompute, s.recompute_modules) == ("selective", ("moe_act",))
    with pytest.raises(ValueError):
        Strategy(recompute="layernorm+warp_drive")
    import gpusim

    job = dict(model="qwen3-30b-a3b", gpu="h100-sxm", gpus=8, ep=8, micro_batch=1, global_batch=64, seq_len=4096)
    by_name = gpusim.predict(**job, recompute="layernorm+moe_act")
    by_flags = gpusim.predict(**job, recompute="none", recompute_modules=["layernorm", "moe_act"])
    assert by_name.step_s == by_flags.step_s and by_name.memory_per_gpu_bytes == by_flags.memory_per_gpu_bytes


def test_the_cli_takes_a_module_set_and_refuses_an_unknown_one(capsys):
    from gpusim.cli import main

    argv = ["predict", "--model", "qwen3-30b-a3b", "--gpu", "h100-sxm", "--gpus", "8", "--ep", "8", "--micro-batch",
            "1", "--global-batch", "64", "--seq-len", "4096"]
    assert main(argv + ["--recompute", "layernorm+moe_act"]) == 0
    capsys.readouterr()
    with pytest.raises(SystemExit) as e:
        main(argv + ["--recompute", "layernorm+warp_drive"])
    assert e.value.code == 2 and "invalid choice" in capsys.readouterr().err


def test_the_search_recomputes_the_whole_moe_block_where_the_published_long_context_layout_needs_it():
    """[stop 53] Megatron-MoE-ModelZoo's long-context Qwen3-235B-A22B runs (256 H100, 32K tokens, TP 4 CP 2 PP 8 EP 8,
    one sequence per micro-batch) recompute the norms and the whole MoE block (--recompute-modules layernorm moe). With
    that layout pinned, the search picks the same module set: the experts' activation alone does not fit, and the
    block is faster than recomputing whole layers (the best without it). Its layout, simulated as layout_scenario
    names it, gives the search's own step and memory."""
    scn = Scenario.create(model="qwen3-235b-a22b", gpu="h100-sxm", gpus=256, nodes=32, precision="bf16", kind="zero1",
                          global_batch=256, seq_len=32768, recompute="none", per_gpu_batch=1)
    pins = S.Pins(tp=4, cp=2, pp=8, ep=8, micro_batch=1)
    best = S.search_table(S.search_layouts(scn, db=DB, pins=pins), top=1)[0]
    assert best["recompute"] == "layernorm+moe"
    without = S.search_table(S.search_layouts(scn, db=DB, pins=pins, recomputes=S.RECOMPUTES[:4]), top=1)[0]
    assert without["recompute"] == "full" and best["tokens_per_s"] > without["tokens_per_s"]
    again = S.layout_scenario(scn, best, global_batch=256)
    assert (again.strategy.recompute, again.strategy.recompute_modules) == ("none", ("layernorm", "moe"))
    sim = simulate(again, db=DB, recommend=False)
    assert sim.step_s == pytest.approx(best["step_s"], rel=1e-9)
    assert sim.memory_per_gpu_bytes == pytest.approx(best["memory_per_gpu_bytes"], rel=1e-9)


def test_a_pinned_module_set_obeys_the_rules_predict_applies(capsys):
    """[stop 53] A search pinned to a module set the model cannot run (the MoE block or the experts' activation on a
    dense model) is refused with predict's message, from the Python API and the CLI (exit 2), instead of returning
    layouts named after modules the model does not have."""
    from gpusim.cli import main
    from gpusim.errors import ScenarioError

    scn = Scenario.create(model="llama3-8b", gpu="h100-sxm", gpus=8, precision="bf16", kind="zero1", global_batch=64,
                          seq_len=4096, recompute="none", per_gpu_batch=1)
    for name in ("layernorm+moe", "layernorm+moe_act"):
        with pytest.raises(ScenarioError, match="dense"):
            S.search_layouts(scn, db=DB, pins=S.Pins(recompute=name))
    argv = ["sweep", "--model", "llama3-8b", "--gpu", "h100-sxm", "--gpus", "8", "--global-batch", "64",
            "--seq-len", "4096", "--recompute", "layernorm+moe"]
    assert main(argv) == 2
    assert "MoE block" in capsys.readouterr().err
    from gpusim.planning import plan  # the procurement plan's layout search takes the same pins

    with pytest.raises(ScenarioError, match="MoE block"):
        plan("llama3-8b", tokens=1e9, gpus=["h100-sxm"], layout_pins=S.Pins(recompute="layernorm+moe"))
    # an MoE model takes it
    moe = Scenario.create(model="qwen3-30b-a3b", gpu="h100-sxm", gpus=8, precision="bf16", kind="zero1",
                          global_batch=64, seq_len=4096, recompute="none", per_gpu_batch=1)
    res = S.search_layouts(moe, db=DB, pins=S.Pins(recompute="layernorm+moe"))
    assert res["best"] is not None
