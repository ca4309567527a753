"""`gpusim plan`: table, --json, --csv, exit codes and one-line errors."""

from __future__ import annotations

import csv
import importlib.util
import io
import json

import pytest

from gpusim.cli import main

FAST = ["--model", "gpt2", "--tokens", "1e9", "--gpu", "a100-sxm4-40gb", "--max-gpus", "16", "--strategy", "ddp",
        "zero3", "--no-progress"]


def run(capsys, *args):
    try:
        code = main(list(args))
    except SystemExit as e:  # argparse's usage errors (flags out of range) exit 2 from the parser
        code = e.code
    out, err = capsys.readouterr()
    return code, out, err


def test_table_output(capsys):
    code, out, err = run(capsys, "plan", *FAST, "--deadline", "10h")
    assert code == 0, err
    assert "Pareto frontier" in out and "Recommendation" in out
    assert "Bill of materials" in out and "Sensitivity" in out
    assert "prices:" in out and "assumed:" in out


def test_json_output(capsys):
    code, out, err = run(capsys, "plan", *FAST, "--budget", "500", "--json")
    assert code == 0, err
    d = json.loads(out)
    for k in ("configurations", "pareto", "recommendation", "sensitivity", "bom", "lr", "prices", "inputs"):
        assert k in d
    assert d["recommendation"]["status"] == "ok"
    assert d["recommendation"]["configuration"]["cost_usd"] <= 500
    assert d["configurations_evaluated"] >= len(d["configurations"]) > 0
    assert all(c["time_to_train_s"] > 0 for c in d["pareto"])
    # --all lists every configuration evaluated
    code, out2, _ = run(capsys, "plan", *FAST, "--json", "--all")
    assert len(json.loads(out2)["configurations"]) == d["configurations_evaluated"]


def test_csv_output(capsys):
    code, out, err = run(capsys, "plan", *FAST, "--csv")
    assert code == 0, err
    rows = list(csv.DictReader(io.StringIO(out)))
    assert rows and {"time_to_train_s", "cost_usd", "feasible", "reason", "node", "strategy"} <= set(rows[0])


def test_deadline_nothing_meets_exits_0_with_the_closest(capsys):
    """[issue 20] nothing feasible is an answer (exit 0, the reason printed), as for `gpusim sweep`."""
    code, out, err = run(capsys, "plan", *FAST, "--deadline", "1s")
    assert code == 0
    assert "No configuration meets the constraints" in out and "closest to the deadline" in out
    assert "Traceback" not in out + err


@pytest.mark.parametrize("args,match", [
    (["--budget", "-5"], "budget"),
    (["--deadline", "soon"], "--deadline"),
    (["--gpu", "h100"], "did you mean"),
    (["--price-override", "aws-p4d-24xlarge"], "ID=USD"),
    (["--price-override", "nonexistent-node=3"], "unknown"),
])
def test_bad_input_is_one_line_exit_2(capsys, args, match):
    code, out, err = run(capsys, "plan", *FAST, *args)
    assert code == 2
    assert match in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_tokens_or_samples_required(capsys):
    with pytest.raises(SystemExit) as e:
        main(["plan", "--model", "gpt2"])
    assert e.value.code == 2
    code, out, err = run(capsys, "plan", "--model", "resnet50", "--tokens", "1e9", "--no-progress")
    assert code == 2 and "--samples" in err


def test_purchase_and_both_modes(capsys):
    code, out, err = run(capsys, "plan", "--model", "gpt2", "--tokens", "1e9", "--gpu", "h100-sxm", "--max-gpus", "16",
                         "--purchase", "--json", "--no-progress")
    assert code == 0, err
    d = json.loads(out)
    assert d["recommendation"]["configuration"]["mode"] == "purchase"
    assert d["recommendation"]["configuration"]["capital_usd"] > 0
    code, out, err = run(capsys, "plan", "--model", "gpt2", "--tokens", "1e9", "--gpu", "h100-sxm", "--max-gpus", "16",
                         "--cloud", "--purchase", "--json", "--no-progress")
    assert code == 0, err
    modes = {c["mode"] for c in json.loads(out)["configurations"]}
    assert modes == {"cloud", "purchase"}


def test_calibration_flag(capsys, tmp_path):
    f = tmp_path / "cal.json"
    f.write_text("{}")
    code, out, err = run(capsys, "plan", *FAST, "--calibration", str(f))
    if importlib.util.find_spec("gpusim.calibration") is None:
        assert code == 2 and "gpusim.calibration" in err
    else:
        assert code in (0, 1, 2) and "Traceback" not in err


def test_a_plan_where_nothing_runs_says_why_instead_of_failing(capsys):
    # every GB300 configuration is refused (no cloud price, 8 GPUs asked of a 4-GPU tray): the rows keep the precision
    # they were asked for ("auto"), which once raised KeyError: 'auto' in the checkpoint sizing (an internal error).
    # (GB200 was the case until it got a dated cloud price in 2026; GB300 has none.)
    code, out, err = run(capsys, "plan", "--model", "gpt3-125m", "--tokens", "1e10", "--deadline", "30d", "--gpu",
                         "gb300", "--max-gpus", "16", "--seq-len", "2048", "--no-progress")
    assert code == 0, err
    assert "No configuration can run this training" in out and "no cloud price for gb300" in out
    assert "internal error" not in err


def test_cuda_graph_scopes_reach_the_layout_search_and_are_checked(capsys):
    base = ["plan", "--model", "gpt3-125m", "--tokens", "1e10", "--deadline", "30d", "--gpu", "gb200", "--max-gpus",
            "8", "--seq-len", "2048", "--price-override", "gb200=6", "--no-progress"]
    code, out, err = run(capsys, *base, "--cuda-graph-scope", "full_iteration", "--tp", "1", "--json")
    assert code == 0, err
    got = json.loads(out)
    assert got["inputs"]["layout_pins"] == {"tp": 1, "cuda_graph_scope": ["full_iteration"]}
    assert "layout search pinned to tp 1, cuda graph scope full_iteration" in got["assumptions"]
    code, out, err = run(capsys, *base, "--cuda-graph-scope", "moe_router")
    assert code == 2 and "has none" in err
    code, out, err = run(capsys, *base, "--cuda-graph-scope", "full_iteration", "attn")
    assert code == 2 and "takes no other scope" in err
