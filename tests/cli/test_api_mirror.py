"""[issue 19] The Python API mirrors the CLI: ``gpusim.<command>(**options).to_dict()`` equals
``gpusim <command> ... --json`` for the same options (apart from timings), several cases per command; the
options are named as the flags; the results are typed, with ``to_frame()`` for tables and decoded labels."""

from __future__ import annotations

import datetime as dt
import json

import pytest

import gpusim
from gpusim.cli import main
from gpusim.errors import GpusimError

LLM = ["--model", "llama3-8b", "--gpu", "h100-sxm", "--gpus", "16", "--nodes", "2", "--seq-len", "4096",
       "--global-batch", "64", "--precision", "bf16"]
LLM_KW = dict(model="llama3-8b", gpu="h100-sxm", gpus=16, nodes=2, seq_len=4096, global_batch=64, precision="bf16")

#: (command, CLI tokens without --json, the same as keyword arguments)
CASES = [
    ("predict", ["--model", "resnet50", "--gpu", "h100-sxm", "--gpus", "8", "--per-gpu-batch", "256"],
     dict(model="resnet50", gpu="h100-sxm", gpus=8, per_gpu_batch=256)),
    ("predict", ["--model", "bert-large", "--gpu", "a100-sxm4-80gb", "--gpus", "16", "--nodes", "2", "--strategy",
                 "zero2", "--per-gpu-batch", "32", "--seq-len", "512", "--checkpointing", "--no-pin-memory",
                 "--workers", "4"],
     dict(model="bert-large", gpu="a100-sxm4-80gb", gpus=16, nodes=2, strategy="zero2", per_gpu_batch=32, seq_len=512,
          checkpointing=True, no_pin_memory=True, workers=4)),
    ("predict", [*LLM, "--tp", "2", "--pp", "2", "--micro-batch", "1", "--recompute", "selective", "--no-sp",
                 "--strategy", "zero1"],
     dict(LLM_KW, tp=2, pp=2, micro_batch=1, recompute="selective", sp=False, strategy="zero1")),
    ("predict", ["--model", "mixtral-8x7b", "--gpu", "h100-sxm", "--gpus", "64", "--seq-len", "4096", "--tp", "2",
                 "--pp", "4", "--ep", "8", "--micro-batch", "1", "--global-batch", "256", "--precision", "bf16",
                 "--strategy", "zero1", "--recompute-modules", "core_attn", "moe_act"],
     dict(model="mixtral-8x7b", gpu="h100-sxm", gpus=64, seq_len=4096, tp=2, pp=4, ep=8, micro_batch=1,
          global_batch=256, precision="bf16", strategy="zero1", recompute_modules=["core_attn", "moe_act"])),
    ("scale", ["--model", "resnet50", "--gpu", "h100-sxm", "--gpus", "64", "--per-gpu-batch", "128"],
     dict(model="resnet50", gpu="h100-sxm", gpus=64, per_gpu_batch=128)),
    ("scale", ["--model", "resnet50", "--gpu", "a100-sxm4-80gb", "--gpus", "32", "--per-gpu-batch", "64", "--mode",
               "strong", "--global-batch", "2048", "--counts", "1,2,8,32"],
     dict(model="resnet50", gpu="a100-sxm4-80gb", gpus=32, per_gpu_batch=64, mode="strong", global_batch=2048,
          counts=[1, 2, 8, 32])),
    ("sweep", LLM, LLM_KW),
    ("sweep", [*LLM, "--tp", "2", "--recompute", "full"], dict(LLM_KW, tp=2, recompute="full")),
    ("sweep", ["--model", "llama3-8b", "--gpu", "h100-sxm", "--gpus", "7", "--seq-len", "4096", "--global-batch", "64"],
     dict(model="llama3-8b", gpu="h100-sxm", gpus=7, seq_len=4096, global_batch=64)),
    ("comm", ["--collective", "all_reduce", "--gpu", "h100-sxm", "--gpus", "8", "--bytes", "1GiB"],
     dict(collective="all_reduce", gpu="h100-sxm", gpus=8, bytes="1GiB")),
    ("comm", ["--collective", "all_gather", "--gpu", "a100-sxm4-80gb", "--gpus", "32", "--nodes", "4", "--bytes",
              "1MiB..64MiB", "--algorithm", "ring"],
     dict(collective="all_gather", gpu="a100-sxm4-80gb", gpus=32, nodes=4, bytes="1MiB..64MiB", algorithm="ring")),
    ("comm", ["--collective", "reduce_scatter", "--node", "dgx-h100", "--gpus", "8", "--bytes", "4096", "--bytes",
              "25MiB"],
     dict(collective="reduce_scatter", node="dgx-h100", gpus=8, bytes=["4096", "25MiB"])),
    ("plan", ["--model", "llama2-7b", "--tokens", "1e10", "--deadline", "30d", "--gpu", "h100-sxm", "--max-gpus",
              "64", "--no-progress"],
     dict(model="llama2-7b", tokens=1e10, deadline=dt.timedelta(days=30), gpu=["h100-sxm"], max_gpus=64,
          no_progress=True)),
    ("plan", ["--model", "resnet50", "--samples", "1.28M", "--epochs", "10", "--deadline", "1d", "--gpu",
              "a100-sxm4-80gb", "--max-gpus", "32", "--purchase", "--no-layout-search"],
     dict(model="resnet50", samples="1.28M", epochs=10, deadline="1d", gpu="a100-sxm4-80gb", max_gpus=32,
          purchase=True, no_layout_search=True)),
    ("plan", ["--model", "llama2-7b", "--tokens", "1e10", "--deadline", "1s", "--gpu", "h100-sxm", "--max-gpus", "16"],
     dict(model="llama2-7b", tokens=1e10, deadline="1s", gpu=["h100-sxm"], max_gpus=16)),
]

COMPARE_CASES = [
    (["--model", "resnet50", "--gpu", "a100-sxm4-80gb", "--gpus", "32", "--nodes", "4", "--inter", "eth-25g",
      "--per-gpu-batch", "64", "--vs", "--inter", "ib-hdr-200", "--vs", "--per-gpu-batch", "256"],
     [dict(model="resnet50", gpu="a100-sxm4-80gb", gpus=32, nodes=4, inter="eth-25g", per_gpu_batch=64),
      dict(inter="ib-hdr-200"), dict(per_gpu_batch=256)]),
    ([*LLM, "--tp", "4", "--pp", "2", "--strategy", "zero1", "--vs", "--tp", "2", "--pp", "4"],
     [dict(LLM_KW, tp=4, pp=2, strategy="zero1"), dict(tp=2, pp=4)]),
]


def _cli_json(capsys, command: str, tokens: list[str]):
    capsys.readouterr()
    code = main([command, *tokens, "--json"])
    out = capsys.readouterr().out
    assert code == 0, out
    return json.loads(out)


def _no_timings(obj):
    if isinstance(obj, dict):
        return {k: _no_timings(v) for k, v in obj.items() if k != "elapsed_s"}
    if isinstance(obj, list):
        return [_no_timings(v) for v in obj]
    return obj


@pytest.mark.parametrize("command,tokens,kwargs", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_api_equals_the_json_of_the_command(capsys, command, tokens, kwargs):
    api = getattr(gpusim, command)(**kwargs).to_dict()
    cli = _cli_json(capsys, command, tokens)
    assert _no_timings(api) == _no_timings(cli)


@pytest.mark.parametrize("tokens,scenarios", COMPARE_CASES, ids=["data-parallel", "llm-layout"])
def test_compare_api_equals_the_json_of_the_command(capsys, tokens, scenarios):
    api = gpusim.compare(*scenarios).to_dict()
    cli = _cli_json(capsys, "compare", tokens)
    assert api == cli
    assert len(api["results"]) == len(scenarios)


def test_results_are_typed_with_frames_and_decoded_labels():
    s = gpusim.sweep(**LLM_KW, recompute="selective")
    df = s.to_frame()
    assert set(df["recompute"]) == {"selective"}  # a label, not the integer code
    assert s.best is not None and s.best == s.layouts[0] and s.feasible
    assert len(df) == s.n_layouts
    r = gpusim.predict(**LLM_KW, tp=2, pp=2)
    assert r.parallelism["tp"] == 2 and r.n_gpus == 16 and r.tokens_per_s_per_gpu > 0  # StepResult's fields
    sc = gpusim.scale(model="resnet50", gpu="h100-sxm", gpus=16, per_gpu_batch=64, counts=[1, 16])
    assert list(sc.to_frame()["n_gpus"]) == [1, 16] and list(sc.to_frame()["n_nodes"]) == [1, 2]


def test_one_name_per_quantity():
    r = gpusim.predict(model="llama3-8b", gpu="h100-sxm", gpus=8, per_gpu_batch=1, seq_len=4096).to_dict()
    assert "tokens_per_s" in r and "throughput_tokens_per_s" not in r
    row = gpusim.scale(model="resnet50", gpu="h100-sxm", gpus=8, per_gpu_batch=64).to_dict()[0]
    assert "n_gpus" in row and "gpus" not in row and "nodes" not in row
    from gpusim.sweeps import COLUMNS

    assert "tokens_per_s" in COLUMNS and "throughput_tokens_per_s" not in COLUMNS


def test_deadline_as_text_or_timedelta_is_the_same_plan():
    kw = dict(model="llama2-7b", tokens=1e10, gpu=["h100-sxm"], max_gpus=32)
    a = _no_timings(gpusim.plan(**kw, deadline="30d").to_dict())
    b = _no_timings(gpusim.plan(**kw, deadline=dt.timedelta(days=30)).to_dict())
    assert a == b and a["inputs"]["deadline_s"] == 30 * 86400


def test_bad_options_raise_a_gpusim_error_naming_them():
    with pytest.raises(GpusimError, match="unknown option 'gpuz'"):
        gpusim.predict(model="resnet50", gpu="h100-sxm", gpuz=3, per_gpu_batch=8)
    with pytest.raises(GpusimError, match="did you mean"):
        gpusim.predict(model="resnet5", gpu="h100-sxm", per_gpu_batch=8)
    with pytest.raises(GpusimError, match="switch"):
        gpusim.predict(model="resnet50", gpu="h100-sxm", per_gpu_batch=8, checkpointing="yes")


def test_the_data_parallel_grid_has_its_own_name():
    df = gpusim.hardware_sweep("resnet50", gpus=["h100-sxm"], max_gpus=8, strategies=("ddp",))
    assert len(df) > 0 and {"n_gpus", "strategy", "step_s"} <= set(df.columns)
