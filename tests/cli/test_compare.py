"""gpusim compare: flag sets and saved predictions side by side; the gap attributed one change at a time."""

from __future__ import annotations

import json

import pytest

from gpusim.cli import main
from gpusim.comparison import compare
from gpusim.simulation import Scenario, simulate

BASE = ["--model", "resnet50", "--gpu", "a100-sxm4-80gb", "--gpus", "32", "--nodes", "4", "--inter", "eth-25g",
        "--per-gpu-batch", "64"]


def test_compare_flag_sets_attributes_the_gap(capsys):
    assert main(["compare", *BASE, "--vs", "--inter", "ib-hdr-200", "--per-gpu-batch", "256", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["differs"] == ["inter", "strategy.per_gpu_batch"]
    g = out["gaps"][0]
    b = out["results"][1]["throughput_samples_per_s"]
    a = out["results"][0]["throughput_samples_per_s"]
    assert g["gap_samples_per_s"] == pytest.approx(b - a)
    # each change alone is the model's answer for the reference with only that change
    for ch in g["changes"]:
        (key, (old, new)), = ch["inputs"].items()
        changed = Scenario.create(model="resnet50", gpu="a100-sxm4-80gb", gpus=32, nodes=4, inter="eth-25g",
                                  per_gpu_batch=64).with_changes(**{key.removeprefix("strategy."): new})
        assert ch["alone_samples_per_s"] == pytest.approx(simulate(changed).throughput_samples_per_s)
    assert g["explains_most"] is g["changes"][0] or g["explains_most"] == g["changes"][0]
    assert abs(g["changes"][0]["effect_samples_per_s"]) >= abs(g["changes"][1]["effect_samples_per_s"])


def test_compare_replays_saved_predictions(tmp_path, capsys):
    files = []
    for i, extra in enumerate(([], ["--inter", "ib-hdr-200"])):
        assert main(["predict", *BASE, *extra, "--json"]) == 0
        f = tmp_path / f"run{i}.json"
        f.write_text(capsys.readouterr().out)
        files.append(str(f))
    assert main(["compare", *files]) == 0
    text = capsys.readouterr().out
    assert "run1 vs run0" in text and "inter eth-25g -> ib-hdr-200" in text and "100% of the gap" in text


@pytest.mark.parametrize("argv, needle", [
    (["compare", *BASE], "at least two scenarios"),
    (["compare", *BASE, "--vs"], "empty scenario"),
    (["compare", "/nonexistent.json", "/nonexistent2.json"], "No such file"),
])
def test_compare_bad_input(capsys, argv, needle):
    assert main(argv) == 2
    assert needle in capsys.readouterr().err


def test_gpus_and_nodes_change_together():
    a = Scenario.create(model="resnet50", gpu="h100-sxm", gpus=8, per_gpu_batch=64)
    b = a.with_changes(gpus=16, nodes=2)
    out = compare([a, b])
    assert [list(c["inputs"]) for c in out["gaps"][0]["changes"]] == [["gpus", "nodes"]]


def test_a_figure_that_is_not_a_number_shows_as_a_dash(capsys):
    """An LLM layout has no one-GPU run to compare with: its speedup and scaling efficiency are NaN, shown as '-'
    with no relative change (it used to read 'nanx (+nan%)')."""
    from gpusim.comparison import format_figure, relative_change

    assert format_figure("x", float("nan")) == "-" and format_figure("frac", float("inf")) == "-"
    assert relative_change(float("nan"), 2.0) == "" and relative_change(2.0, 3.0) == "+50%"
    assert relative_change(0.0, 3.0) == "" and relative_change(True, False) == ""
    llm = ["--model", "qwen3-30b-a3b", "--gpu", "gb200", "--gpus", "8", "--ep", "8", "--precision", "mxfp8",
           "--global-batch", "512", "--per-gpu-batch", "4", "--seq-len", "4096"]
    assert main(["compare", *llm, "--vs", "--moe-dispatcher", "deepep"]) == 0
    out = capsys.readouterr().out
    assert "nanx" not in out and "nan%" not in out and "speedup" in out


LLM = ["--model", "qwen3-30b-a3b", "--gpu", "gb200", "--gpus", "8", "--ep", "8", "--precision", "mxfp8",
       "--global-batch", "512", "--per-gpu-batch", "4", "--seq-len", "4096"]


def test_a_settings_change_carries_the_published_ab_track_record(capsys):
    """[stop 47] An LLM comparison that changes software settings only carries the what-if band (the published A/B
    pairs), its 80% range carried to the predicted throughput ratio; the CLI prints it."""
    from gpusim import track_record as TR

    assert main(["compare", *LLM, "--vs", "--moe-dispatcher", "deepep", "--json"]) == 0
    g = json.loads(capsys.readouterr().out)["gaps"][0]
    rec, band = g["track_record"], TR.load()["what-if"]
    assert rec["key"] == "what-if" and rec["rows"] == band.rows
    assert ("throughput_ratio_range" in rec) == band.has_range
    if band.has_range:
        assert rec["throughput_ratio_range"] == pytest.approx(list(band.speed_range(g["throughput_ratio"])))
    assert main(["compare", *LLM, "--vs", "--moe-dispatcher", "deepep"]) == 0
    assert "track record: published A/B comparisons" in capsys.readouterr().out


def test_a_layout_change_or_a_non_llm_comparison_says_why_it_has_no_ab_record(capsys):
    assert main(["compare", *LLM, "--vs", "--ep", "4", "--json"]) == 0
    rec = json.loads(capsys.readouterr().out)["gaps"][0]["track_record"]
    assert rec["key"] == "what-if" and "changes ep" in rec["reason"]
    assert main(["compare", *BASE, "--vs", "--inter", "ib-hdr-200", "--json"]) == 0
    rec = json.loads(capsys.readouterr().out)["gaps"][0]["track_record"]
    assert "LLM layouts" in rec["reason"]


def test_a_gpu_change_carries_the_gpu_swap_track_record(capsys):
    """[stop 54] An LLM comparison that moves the layout to another GPU only carries the gpu-swap band (published runs
    of one source at one layout on two GPUs), its 80% range carried to the predicted throughput ratio; the CLI
    prints it. The GPU and a degree changed together get neither band."""
    from gpusim import track_record as TR

    gpu = LLM[LLM.index("--gpu") + 1]
    other = "b200" if gpu != "b200" else "h100-sxm"
    assert main(["compare", *LLM, "--vs", "--gpu", other, "--json"]) == 0
    g = json.loads(capsys.readouterr().out)["gaps"][0]
    rec, band = g["track_record"], TR.load()["gpu-swap"]
    assert rec["key"] == "gpu-swap" and rec["rows"] == band.rows
    if band.has_range:
        assert rec["throughput_ratio_range"] == pytest.approx(list(band.speed_range(g["throughput_ratio"])))
    assert main(["compare", *LLM, "--vs", "--gpu", other]) == 0
    assert "track record: published runs of one source at one layout on two GPUs" in capsys.readouterr().out
    assert main(["compare", *LLM, "--vs", "--gpu", other, "--ep", "4", "--json"]) == 0
    rec = json.loads(capsys.readouterr().out)["gaps"][0]["track_record"]
    assert "reason" in rec and "ep" in rec["reason"]


def test_mfu_across_precisions_is_flagged(capsys):
    """[stop 57] MFU is over each precision's own datasheet peak: a comparison across precisions says so (and one
    within a precision does not)."""
    llm = ["--model", "llama3-70b", "--gpu", "gb200", "--gpus", "64", "--nodes", "16", "--tp", "2", "--pp", "4",
           "--micro-batch", "1", "--global-batch", "256", "--strategy", "zero1"]
    assert main(["compare", *llm, "--precision", "mxfp8", "--vs", "--precision", "nvfp4"]) == 0
    out = capsys.readouterr().out
    assert "own precision's dense datasheet peak (A: fp8, B: fp4)" in " ".join(out.split())
    assert main(["compare", *llm, "--precision", "mxfp8", "--vs", "--global-batch", "512"]) == 0
    assert "datasheet peak" not in capsys.readouterr().out
