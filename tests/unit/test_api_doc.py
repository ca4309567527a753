"""docs/API.md's Python examples run as they are shown (the procurement script of issue 19)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "API.md"
README = Path(__file__).resolve().parents[2] / "README.md"


def _blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)


def test_the_readme_shows_the_same_script():
    """The README's Python section is docs/API.md's procurement script (run below), not a copy that can drift."""
    readme = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert _blocks()[-1] in readme


def test_the_doc_has_a_script():
    assert _blocks() and "gpusim.plan(" in _blocks()[-1]


@pytest.mark.slow
@pytest.mark.parametrize("i", range(len(_blocks())))
def test_python_blocks_run(i, capsys):
    exec(compile(_blocks()[i], f"{DOC}:block{i}", "exec"), {"__name__": "__doc_example__"})
    out = capsys.readouterr().out
    assert "tokens/s per GPU" in out and ("Rent" in out or "Buy" in out) and "layouts fit" in out
