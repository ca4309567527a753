"""Errors that reach a user: each one is a complete, readable message that says what is wrong and
how to fix it. The CLI prints ``str(error)`` on stderr and exits non-zero; the app shows it in the page.
"""

from __future__ import annotations

from collections.abc import Iterable


class GpusimError(Exception):
    """Base class: a problem with the user's input, files or environment (never a bug in gpusim)."""


class HardwareFileError(GpusimError):
    """A hardware database file is missing, unreadable, malformed or implausible."""


class UnknownIdError(GpusimError, KeyError):
    """An id (GPU, link, node, model ...) that is not in the database, with close matches."""

    def __init__(self, kind: str, wanted: str, known: Iterable[str], hint: str = ""):
        self.kind = kind
        self.wanted = wanted
        known = sorted(known)
        import difflib  # here: most starts raise no error (issue 20)

        close = difflib.get_close_matches(wanted.lower(), known, n=3, cutoff=0.5)
        if not close:  # substring matches catch "h100" -> "h100-sxm", "h100-pcie"
            close = [k for k in known if wanted.lower() in k][:3]
        msg = f"unknown {kind} {wanted!r}"
        if close:
            msg += f"; did you mean {' or '.join(repr(c) for c in close)}?"
        msg += hint or f" (`gpusim hw list --kind {kind}` lists them)"
        self.message = msg
        super().__init__(msg)

    def __str__(self) -> str:  # KeyError would add quotes
        return self.message


class ScenarioError(GpusimError, ValueError):
    """An impossible or inconsistent configuration (3 GPUs on 2 nodes, batch 0, ...)."""


class CalibrationError(GpusimError):
    """A calibration run or file that cannot be used."""
