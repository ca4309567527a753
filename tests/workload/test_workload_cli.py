"""``gpusim models``: the catalogue on the command line."""

from __future__ import annotations

import json

import pytest

from gpusim.cli import main
from gpusim.workload import workload_ids


def _run(capsys, *argv):
    try:
        rc = main(list(argv))
    except SystemExit as e:  # argparse's usage errors (flags out of range) exit 2 from the parser
        rc = e.code
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_models_json_lists_every_entry_with_sources(capsys):
    rc, out, _ = _run(capsys, "models", "--json")
    assert rc == 0
    rows = json.loads(out)
    assert [r["id"] for r in rows] == workload_ids()
    r50 = next(r for r in rows if r["id"] == "resnet50")
    assert r50["params"] == 25_557_032 and r50["sources"] and r50["seq_len"] is None
    assert r50["fwd_flop_per_sample"] == pytest.approx(8.18e9, rel=0.01)
    for r in rows:
        assert r["params"] > 0 and r["fwd_flop_per_sample"] > 0 and r["act_bytes_per_sample"] > 0 and r["sources"]


def test_models_seq_len_applies_to_sequence_models_only(capsys):
    rc, out, _ = _run(capsys, "models", "--json", "--seq-len", "512")
    assert rc == 0
    rows = {r["id"]: r for r in json.loads(out)}
    assert rows["gpt2"]["seq_len"] == 512 and rows["llama2-7b"]["tokens_per_sample"] == 512
    assert rows["resnet50"]["seq_len"] is None and rows["vit-b-16"]["tokens_per_sample"] == 1.0


def test_models_table(capsys):
    rc, out, _ = _run(capsys, "models")
    assert rc == 0
    for text in ("resnet50", "llama3-405b", "He et al. 2016", "GFLOP", "MiB"):
        assert text in out


def test_models_show_one(capsys):
    rc, out, _ = _run(capsys, "models", "--model", "bert-large", "--seq-len", "384")
    assert rc == 0
    assert "bert-large" in out and "384 tokens" in out and "attention" in out and "source:" in out
    rc, out, _ = _run(capsys, "models", "--model", "resnet50", "--json")
    data = json.loads(out)
    assert rc == 0 and data["id"] == "resnet50" and len(data["layers"]) >= 5
    assert sum(g["fwd_flop_per_sample"] for g in data["layers"]) == pytest.approx(data["fwd_flop_per_sample"])


def test_models_errors_are_one_line(capsys):
    rc, _, err = _run(capsys, "models", "--model", "lama2-7b")
    assert rc == 2 and "did you mean 'llama2-7b'" in err and err.count("\n") == 1
    rc, _, err = _run(capsys, "models", "--model", "resnet50", "--seq-len", "128")
    assert rc == 2 and "fixed input size" in err
    rc, _, err = _run(capsys, "models", "--seq-len", "0")
    assert rc == 2 and "from 1 to" in err
