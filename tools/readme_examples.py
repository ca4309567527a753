"""Executable documentation: find the ``$ gpusim ...`` examples of README.md and docs/*.md, run them, compare
their shown output with what the command prints now, and (``--update``, ``make readme``) rewrite the shown output.

    .venv/bin/python tools/readme_examples.py            # check: one line per example, exit 1 on a mismatch
    .venv/bin/python tools/readme_examples.py --update   # rerun every example and rewrite its output in place

An example is a fenced block whose first line starts with ``$ gpusim `` (a trailing ``\\`` continues the command on
the next line); the lines after the command are its shown output. Commands run from the repository root as
``python -m gpusim ...`` at a terminal width of 140 columns (``COLUMNS=140``, no colour). The rules
(tests/docs/test_readme_examples.py applies them to every example):

- **Text** must be the same, line by line, after removing whitespace at line ends.
- **Numbers** may differ by :data:`RTOL` (2%) relative, or, when shown with decimals, by one unit in the last
  digit shown (rounding); so an integer below 50 (a count, a degree) must be the same. A
  number is a run of digits with optional thousands commas, decimals, exponent and sign (``1,064``, ``-34``,
  ``3.25e+04``).
- **Timings** (``in 0.30 s``, ``in 12 ms``: "in", a number, a time unit) depend on the machine and are not
  compared.
- **Elisions**: a line that is only ``...`` stands for any number of output lines (zero or more), so an output
  longer than a screen is shown as its first lines then ``...`` (a prefix match up to the ``...`` line), and a
  part from the middle as ``...``, the lines, ``...``. Inside a line, ``...`` stands for any text.
- **Not run**: a block preceded by the line ``<!-- docs-example: not run (REASON) -->`` is listed and skipped
  (for commands that need GPUs, a browser, minutes of time, or a server). Keep that list short.

``--update`` reruns every example and keeps the shown selection: each shown line is looked for in the new output
with numbers masked and replaced by the new line (an elided part of a line stays elided) unless it still
matches under the rules above (then it stays as it is, so that a rerun changes only what moved). A shown line
that is no longer printed is dropped, and the example is listed so that a person can choose its lines again.
The file is written atomically (a temporary file in the same directory, then a rename).
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: relative tolerance of every number in an example's output (model figures move when the model improves a
#: little; a larger change is a change the README must show)
RTOL = 0.02
#: seconds one example may run
TIMEOUT_S = 300

SKIP_MARKER = re.compile(r"^<!--\s*docs-example:\s*not run\s*\((?P<reason>[^)]*)\)\s*-->\s*$")
FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>```+|~~~+)(?P<info>.*)$")
NUMBER = r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?"
NUMBER_RE = re.compile(NUMBER)
TIMING_RE = re.compile(r"\bin " + NUMBER + r" ?(?:s|ms|µs|min)\b")
ELLIPSIS = "..."


def doc_files(root: Path = ROOT) -> list[Path]:
    """README.md and docs/*.md."""
    return [p for p in [root / "README.md", *sorted((root / "docs").glob("*.md"))] if p.is_file()]


@dataclass
class Example:
    """One ``$ gpusim ...`` block: where it is, the command, its shown output."""

    path: Path
    line: int  # 1-based line of the ``$`` in the file
    start: int  # 0-based index of the first line after the opening fence
    end: int  # 0-based index of the closing fence
    command: str  # as shown, continuation lines joined
    command_lines: int  # how many lines the command takes
    shown: list[str]
    skip_reason: str | None = None

    @property
    def argv(self) -> list[str]:
        return shlex.split(self.command)

    @property
    def where(self) -> str:
        try:
            rel = self.path.relative_to(ROOT)
        except ValueError:
            rel = self.path
        return f"{rel}:{self.line}"


def find_examples(path: Path) -> list[Example]:
    """Every fenced block of ``path`` whose first line is ``$ gpusim ...``."""
    lines = path.read_text(encoding="utf-8").splitlines()
    out: list[Example] = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence = m.group("fence")
        j = i + 1
        while j < len(lines) and not lines[j].strip().startswith(fence):
            j += 1
        body = lines[i + 1:j]
        if body and body[0].startswith("$ gpusim "):
            k = 0
            cmd = body[0][2:]
            while cmd.rstrip().endswith("\\") and k + 1 < len(body):
                k += 1
                cmd = cmd.rstrip()[:-1] + " " + body[k].strip()
            prev = lines[i - 1] if i > 0 else ""
            skip = SKIP_MARKER.match(prev.strip())
            out.append(Example(path, i + 2, i + 1, j, " ".join(cmd.split()), k + 1, body[k + 1:],
                               skip.group("reason") if skip else None))
        i = j + 1
    return out


def other_command_blocks(path: Path) -> list[tuple[int, bool]]:
    """Fenced blocks with commands that are not ``$ gpusim`` examples (``$ .venv/bin/python ...``, a ``bash``
    block of ``gpusim ...`` lines): (1-based line of the opening fence, whether the not-run marker precedes it).
    Each must carry the marker, so that what the tests do not run is a visible, short list."""
    lines = path.read_text(encoding="utf-8").splitlines()
    out = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        j = i + 1
        while j < len(lines) and not lines[j].strip().startswith(m.group("fence")):
            j += 1
        body = lines[i + 1:j]
        is_example = bool(body) and body[0].startswith("$ gpusim ")
        has_commands = any(ln.startswith("$ ") or ln.lstrip().startswith("gpusim ") for ln in body)
        if has_commands and not is_example:
            out.append((i + 1, bool(i > 0 and SKIP_MARKER.match(lines[i - 1].strip()))))
        i = j + 1
    return out


def all_examples(root: Path = ROOT) -> list[Example]:
    return [e for p in doc_files(root) for e in find_examples(p)]


def run_example(ex: Example) -> tuple[int, list[str]]:
    """Run the example's command as a user would (``python -m gpusim ARGS`` from the repository root); returns
    the exit code and the lines of stdout (whitespace at line ends removed)."""
    argv = ex.argv
    if argv[0] != "gpusim":
        raise ValueError(f"{ex.where}: only `gpusim ...` examples run, got {argv[0]!r}")
    env = {**os.environ, "COLUMNS": "140", "NO_COLOR": "1", "TERM": "dumb"}
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    r = subprocess.run([sys.executable, "-m", "gpusim", *argv[1:]], cwd=ROOT, capture_output=True, text=True,
                       timeout=TIMEOUT_S, env=env)
    out = [ln.rstrip() for ln in r.stdout.splitlines()]
    while out and not out[-1]:
        out.pop()
    if r.returncode:
        out += [f"[exit {r.returncode}] {ln}" for ln in r.stderr.splitlines()[-5:]]
    return r.returncode, out


# --- matching one shown line against one output line ------------------------------------------------------

def _last_unit(text: str) -> float:
    """One unit in the last digit shown: ``0.30`` -> 0.01, ``1,064`` -> 1, ``3.25e+04`` -> 100."""
    mant, _, exp = text.lower().partition("e")
    decimals = len(mant.split(".", 1)[1]) if "." in mant else 0
    return 10.0 ** (-decimals + (int(exp) if exp else 0))


def _to_float(text: str) -> float:
    return float(text.replace(",", ""))


def _pattern(shown: str, *, numbers: bool) -> tuple[re.Pattern, list[str]]:
    """A regex for an output line: text escaped, ``...`` as any text, timings as any timing, numbers captured
    (``numbers=False``: the same but every number matches any number, for the updater's masked match)."""
    parts: list[str] = []
    nums: list[str] = []
    pos = 0
    tokens = re.compile(re.escape(ELLIPSIS) + "|" + TIMING_RE.pattern + "|" + NUMBER)
    for m in tokens.finditer(shown):
        parts.append(re.escape(shown[pos:m.start()]))
        tok = m.group(0)
        if tok == ELLIPSIS:
            parts.append(".*?")
        elif TIMING_RE.fullmatch(tok):
            parts.append(TIMING_RE.pattern)
        else:
            parts.append(f"({NUMBER})")
            nums.append(tok)
        pos = m.end()
    parts.append(re.escape(shown[pos:]))
    return re.compile("".join(parts) + r"\Z"), nums


def numbers_close(shown: str, got: str, rtol: float = RTOL) -> bool:
    """Two numbers agree within ``rtol`` relative, or (a number with decimals) one unit in the last digit shown."""
    a, b = _to_float(shown), _to_float(got)
    # rounding: a decimal shown as 0.2 may become 0.3 when the value moves by a hair; an integer (a count, a
    # degree) gets no such allowance below 50, where 2% is less than one
    unit = _last_unit(shown) if ("." in shown or "e" in shown.lower()) else 0.0
    return abs(a - b) <= max(rtol * max(abs(a), abs(b)), unit * 1.000001)


def line_matches(shown: str, got: str, *, numbers: bool = True, rtol: float = RTOL) -> bool:
    """Does an output line match a shown line (text exactly, numbers within ``rtol``, ``...`` as any text)?"""
    shown, got = shown.rstrip(), got.rstrip()
    if shown == got:
        return True
    pat, nums = _pattern(shown, numbers=numbers)
    m = pat.match(got)
    if not m:
        return False
    if not numbers:
        return True
    return all(numbers_close(s, g, rtol) for s, g in zip(nums, m.groups(), strict=True))


# --- matching a shown block against the whole output ------------------------------------------------------

def _segments(shown: list[str]) -> list[list[str] | None]:
    """The shown lines split at ``...`` lines (None marks an elision)."""
    segs: list[list[str] | None] = []
    for ln in shown:
        if ln.strip() == ELLIPSIS:
            if not segs or segs[-1] is not None:
                segs.append(None)
        else:
            if not segs or segs[-1] is None:
                segs.append([])
            segs[-1].append(ln)
    return segs


def align(shown: list[str], output: list[str], *, numbers: bool = True, rtol: float = RTOL):
    """Match the shown block to the output: returns (index of the output line for each shown line, or None for
    ``...`` lines) or raises :class:`Mismatch` naming the first shown line that has no counterpart."""
    segs = _segments(shown)
    result: list[int | None] = []
    pos = 0

    def seg_at(seg: list[str], at: int) -> bool:
        return at + len(seg) <= len(output) and all(
            line_matches(s, output[at + k], numbers=numbers, rtol=rtol) for k, s in enumerate(seg))

    for n, seg in enumerate(segs):
        if seg is None:
            result.append(None)
            continue
        floating = n > 0 and segs[n - 1] is None  # after a `...`: anywhere further on
        last = n == len(segs) - 1
        if floating:
            cands = range(pos, len(output) - len(seg) + 1)
            at = next((a for a in cands if seg_at(seg, a)), None)
        else:
            at = pos if seg_at(seg, pos) else None
        if at is None:
            # name the first line that does not match, with the output line it was compared with
            base = pos if not floating else None
            for k, s in enumerate(seg):
                target = output[base + k] if base is not None and base + k < len(output) else None
                if target is None or not line_matches(s, target, numbers=numbers, rtol=rtol):
                    raise Mismatch(s, target, pos + k if target is not None else pos)
            raise Mismatch(seg[0], None, pos)
        result.extend(range(at, at + len(seg)))
        pos = at + len(seg)
        if last and pos != len(output):
            raise Mismatch(None, output[pos], pos)  # more output than shown, and no `...` at the end
    return result


class Mismatch(Exception):
    def __init__(self, shown: str | None, got: str | None, at: int):
        self.shown, self.got, self.at = shown, got, at
        if shown is None:
            msg = f"the output goes on after the last shown line (line {at + 1}: {got!r}); end the block with `...`"
        elif got is None:
            msg = f"shown line {shown!r} is not in the output (from output line {at + 1} on)"
        else:
            msg = f"output line {at + 1}:\n    shown: {shown!r}\n    now:   {got!r}"
        super().__init__(msg)


def check(ex: Example) -> str | None:
    """None when the example's shown output matches what its command prints now, else the reason."""
    rc, out = run_example(ex)
    if rc:
        return f"{ex.where}: `{ex.command}` exited {rc}:\n  " + "\n  ".join(out[-5:])
    try:
        align(ex.shown, out)
    except Mismatch as e:
        return f"{ex.where}: `{ex.command}`: {e}"
    return None


# --- the updater ------------------------------------------------------------------------------------------

def _keep_elided(shown: str, new: str) -> str:
    """The new line, with the parts that the shown line elided (``...`` inside it) elided again."""
    if ELLIPSIS not in shown or shown.strip() == ELLIPSIS:
        return new
    pieces = shown.split(ELLIPSIS)
    masked = [_pattern(piece, numbers=False)[0].pattern.removesuffix(r"\Z").replace(f"({NUMBER})", f"(?:{NUMBER})")
              for piece in pieces]
    m = re.match("(.*?)".join(masked) + r"\Z", new)
    if not m:
        return new
    out, pos = [], 0
    for g in range(1, len(pieces)):
        start, end = m.span(g)
        out.append(new[pos:start] + ELLIPSIS)
        pos = end
    out.append(new[pos:])
    return "".join(out)


def updated_block(ex: Example, out: list[str]) -> tuple[list[str], bool]:
    """New shown lines for an example: the same selection with the new values. Returns the lines and whether
    every shown line was found again.

    Each shown line is looked for, in order, in the new output with its numbers masked (so a moved figure is
    still the same line); a line found is replaced by the new one (kept as it is when it still matches under the
    rules, so that a rerun changes only what moved); a line no longer printed is dropped; a ``...`` is put
    wherever output lines are skipped. When no line is found at all, the block becomes the first lines of the
    new output (as many as were shown) and ``...``.
    """
    picked: list[tuple[str, int]] = []
    pos, lost = 0, 0
    for s in ex.shown:
        if s.strip() == ELLIPSIS:
            continue
        at = next((i for i in range(pos, len(out)) if line_matches(s, out[i], numbers=False)), None)
        if at is None:
            lost += 1
            continue
        picked.append((s if line_matches(s, out[at]) else _keep_elided(s, out[at]), at))
        pos = at + 1
    if not picked:
        n = max(len([s for s in ex.shown if s.strip() != ELLIPSIS]), 1)
        return out[:n] + ([ELLIPSIS] if len(out) > n else []), False
    block: list[str] = []
    prev = -1
    for text, at in picked:
        if at > prev + 1:
            block.append(ELLIPSIS)
        block.append(text)
        prev = at
    if prev < len(out) - 1:
        block.append(ELLIPSIS)
    return block, lost == 0


def update_file(path: Path, *, log=print) -> list[str]:
    """Rerun every example of ``path`` and rewrite its shown output; returns the examples whose selection was
    reset to a prefix (to review)."""
    examples = [e for e in find_examples(path) if e.skip_reason is None]
    lines = path.read_text(encoding="utf-8").splitlines()
    reset: list[str] = []
    # from the last block up, so that earlier line numbers stay valid
    for ex in sorted(examples, key=lambda e: e.start, reverse=True):
        rc, out = run_example(ex)
        if rc:
            log(f"{ex.where}: `{ex.command}` exited {rc}; left as it is:\n  " + "\n  ".join(out[-5:]))
            reset.append(ex.where + " (failed)")
            continue
        block, kept = updated_block(ex, out)
        first = ex.start + ex.command_lines
        lines[first:ex.end] = block
        log(f"{ex.where}: {'updated' if kept else 'updated; some shown lines are no longer printed (review it)'}")
        if not kept:
            reset.append(ex.where)
    text = "\n".join(lines) + "\n"
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, path.stat().st_mode & 0o777)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return reset


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--update", action="store_true", help="rewrite the shown outputs in place")
    ap.add_argument("files", nargs="*", type=Path, help="default: README.md and docs/*.md")
    args = ap.parse_args(argv)
    files = args.files or doc_files()
    if args.update:
        reset = [w for p in files for w in update_file(p)]
        if reset:
            print("choose the shown lines again for: " + ", ".join(reset))
        return 0
    bad = 0
    for p in files:
        for ex in find_examples(p):
            if ex.skip_reason is not None:
                print(f"{ex.where}: not run ({ex.skip_reason})")
                continue
            why = check(ex)
            print(why or f"{ex.where}: ok")
            bad += why is not None
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
