"""[issue 20] Executable documentation: every ``$ gpusim ...`` example of README.md and docs/*.md reproduces.

The rules are in ``tools/readme_examples.py`` (and the README's Contributing section): text exactly after
removing whitespace at line ends; numbers within RTOL = 2% relative or one unit of the last digit shown; timings
("in 0.30 s") not compared; a ``...`` line stands for any number of output lines, ``...`` inside a line for
any text; a block preceded by ``<!-- docs-example: not run (REASON) -->`` is not run. After a change to the
model, ``make readme`` rewrites the shown outputs.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("readme_examples", ROOT / "tools" / "readme_examples.py")
rx = importlib.util.module_from_spec(_spec)
sys.modules["readme_examples"] = rx
_spec.loader.exec_module(rx)

EXAMPLES = rx.all_examples(ROOT)


def test_the_tolerance_is_the_stated_one():
    assert rx.RTOL == 0.02
    assert "2% relative" in (ROOT / "README.md").read_text()


# --- the matcher on hand-made cases -------------------------------------------------------------------------

@pytest.mark.parametrize("shown,got,ok", [
    ("step 252 ms", "step 252 ms", True),
    ("step 252 ms", "step 256 ms", True),  # 1.6%
    ("step 252 ms", "step 258 ms", False),  # 2.4%
    ("step 252 ms", "step 252 µs", False),  # text differs
    ("efficiency 0.2%", "efficiency 0.3%", True),  # one unit of the last digit (rounding)
    ("efficiency 0.2%", "efficiency 0.4%", False),
    ("predicts 1,064 (-34%)", "predicts 1,059 (-34%)", True),
    ("predicts 1,064 (-34%)", "predicts 1,064 (+34%)", False),  # sign
    ("3.25e+04 tokens/s", "3.236e+04 tokens/s", True),
    ("3.25e+04 tokens/s", "3.25e+05 tokens/s", False),
    ("3 configurations in 0.30 s", "3 configurations in 12.5 s", True),  # timing not compared
    ("3 configurations in 0.30 s", "4 configurations in 0.30 s", False),  # a count is
    ("deadline 7 days, ...", "deadline 7 days, up to 4,096 GPUs", True),
    ("most ...: get a quote", "most (cost +25%): get a quote", True),
    ("most ...: get a quote", "most (cost +25%): get a price", False),
    ("tp 4 x pp 4", "tp 4 x pp 4   ", True),  # line-end whitespace
    ("tp 4 x pp 4", "tp 4  x pp 4", False),  # inner whitespace is text
])
def test_line_rules(shown, got, ok):
    assert rx.line_matches(shown, got) is ok


def test_block_rules():
    out = ["head", "a 1", "b 2", "c 3", "tail"]
    assert rx.align(["head", "a 1", "..."], out) == [0, 1, None]  # prefix up to the `...` line
    assert rx.align(["...", "b 2", "c 3", "..."], out) == [None, 2, 3, None]  # a part from the middle
    assert rx.align(["head", "...", "tail"], out) == [0, None, 4]
    assert rx.align(["...", "tail"], out) == [None, 4]
    with pytest.raises(rx.Mismatch, match="goes on after the last shown line"):
        rx.align(["head", "a 1"], out)  # shorter than the output without a final `...`
    with pytest.raises(rx.Mismatch, match="output line 2"):
        rx.align(["head", "a 9", "..."], out)
    with pytest.raises(rx.Mismatch, match="not in the output"):
        rx.align(["...", "c 3", "b 2", "..."], out)  # order matters
    with pytest.raises(rx.Mismatch):
        rx.align(["...", "b 2", "...", "a 1", "..."], out)


def test_updater_keeps_the_selection_and_elisions():
    ex = rx.Example(Path("x.md"), 1, 0, 0, "gpusim x", 1, ["head", "...", "b 2 and ...", "..."])
    new, kept = rx.updated_block(ex, ["head", "zzz", "b 7 and more text", "tail"])
    assert kept and new == ["head", "...", "b 7 and ...", "..."]
    # a line still within the rules is kept as shown (no churn from timings or 1% moves)
    ex2 = rx.Example(Path("x.md"), 1, 0, 0, "gpusim x", 1, ["done 100 rows in 0.30 s", "b 2.00"])
    new, kept = rx.updated_block(ex2, ["done 100 rows in 9.99 s", "b 2.01"])
    assert kept and new == ["done 100 rows in 0.30 s", "b 2.00"]
    # a shown line no longer printed is dropped (and reported), the rest of the selection stays
    ex3 = rx.Example(Path("x.md"), 1, 0, 0, "gpusim x", 1, ["a 1", "b 2", "c 3", "..."])
    new, kept = rx.updated_block(ex3, ["a 5", "c 6", "d"])
    assert not kept and new == ["a 5", "c 6", "..."]
    new, kept = rx.updated_block(ex3, ["a 5", "x", "c 6"])  # output skipped between two shown lines: `...`
    assert not kept and new == ["a 5", "...", "c 6"]
    new, kept = rx.updated_block(ex, ["completely", "different"])
    assert not kept and new == ["completely", "different"]


# --- the documents ------------------------------------------------------------------------------------------

def test_there_are_examples_and_few_are_skipped():
    assert len(EXAMPLES) >= 5
    skipped = [e for e in EXAMPLES if e.skip_reason is not None]
    assert len(skipped) <= 3, [e.where for e in skipped]


@pytest.mark.parametrize("path", rx.doc_files(ROOT), ids=lambda p: p.name)
def test_every_other_command_block_is_marked_not_run(path):
    unmarked = [line for line, marked in rx.other_command_blocks(path) if not marked]
    assert not unmarked, (f"{path.name}: command blocks at lines {unmarked} are not `$ gpusim` examples: mark "
                          "them `<!-- docs-example: not run (REASON) -->` or make them runnable")


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("ex", [e for e in EXAMPLES if e.skip_reason is None], ids=lambda e: e.where)
def test_example_reproduces(ex):
    why = rx.check(ex)
    assert why is None, why + "\n(after a deliberate change to the model: `make readme`)"


@pytest.mark.timeout(300)
def test_update_rewrites_a_stale_example_atomically(tmp_path, monkeypatch):
    doc = tmp_path / "doc.md"
    doc.write_text("intro\n\n```text\n$ gpusim comm --collective all_reduce --gpu h100-sxm --gpus 8 --bytes 1GiB\n"
                   "...\n│ 1 GiB │ 9.99 ms │ 100 GB/s │ 100 GB/s │ nvls      │ simple   │\n...\n```\n\nend\n")
    (ex,) = rx.find_examples(doc)
    assert rx.check(ex) is not None  # stale
    replaced = []
    real_replace = rx.os.replace
    monkeypatch.setattr(rx.os, "replace", lambda a, b: (replaced.append((a, b)), real_replace(a, b)))
    assert rx.update_file(doc, log=lambda *_: None) == []
    assert replaced and Path(replaced[0][1]) == doc and Path(replaced[0][0]).parent == tmp_path
    (ex,) = rx.find_examples(doc)
    assert rx.check(ex) is None
    text = doc.read_text()
    assert text.startswith("intro\n") and text.endswith("```\n\nend\n") and "9.99 ms" not in text


def test_prose_counts_agree_with_the_code(db):
    """A count in the prose is either absent or the code's (issue 20: "48 GPUs / 42 links / 35 nodes vs 46/41/30")."""
    from gpusim.workload.from_config import SUPPORTED_MODEL_TYPES

    text = " ".join(p.read_text() for p in rx.doc_files(ROOT))
    truth = {"GPUs": len(db.gpus), "links": len(db.links), "nodes": len(db.nodes),
             "architectures": len(SUPPORTED_MODEL_TYPES)}
    for word, n in truth.items():
        # "holds 46 GPUs (" / "of 19 architectures": a count of the database or catalogue, not "8 GPUs" of a job
        for m in re.finditer(rf"\b(?:holds|of|knows|lists) (\d+) {word} \(", text):
            assert int(m.group(1)) == n, f"the docs say {m.group(0)!r}; the code has {n}"
    assert not re.search(r"\b(?:two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|\d+) pages\b", text), \
        "the number of app pages is stated in the prose: leave it out (it changes with the app)"
