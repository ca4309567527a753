"""One validation of numbers and files at the edge (CLI flags, API models, the planner's URL, input files).

Numbers: a :class:`Bound` says what a quantity may be (finite, its range, whole or not, its unit and how a
human writes it) and gives one message that states the range. The same bound serves

- the CLI: ``p.add_argument("--bucket-mib", type=Bound(1 / 1024, 4096, unit="MiB"))`` (argparse turns
  its message into ``gpusim: error: argument --bucket-mib: must be ... (got '1e-320')``, exit code 2);
- the API: :class:`FiniteModel` (pydantic) rejects inf and NaN in every float field, and any non-zero value
  of subnormal scale (below :data:`TINY_MAGNITUDE`), and :func:`format_validation_error` names the field's
  whole range from its ``ge``/``gt``/``le``/``lt`` constraints;
- the app: ``gpusim.app_pages.shell.number_input`` checks a URL-bound widget's value through a bound first.

Every positive quantity has a meaningful smallest value (a 1 KiB bucket, a 1% slow GPU), so a value like
``1e-320`` is out of range rather than a division by almost-zero deep inside the model.

Files: :func:`read_text` refuses what is not a regular, readable, UTF-8 text file of a sane size, with the
file's name in the message; :func:`load_json` adds a nesting-depth limit and refuses NaN/Infinity;
:func:`output_path` accepts only a regular file or a new path (never a device, a directory or a FIFO).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpusim.errors import GpusimError

#: the smallest magnitude a non-zero input may have: well above the float64 subnormal range (< 2.2e-308),
#: where reciprocals overflow to inf and products underflow to 0
TINY_MAGNITUDE = 1e-300
#: text input files (CSV, JSON, nvidia-smi output, nccl-tests output) larger than this are refused
MAX_TEXT_FILE_BYTES = 64 * 1024 * 1024
#: JSON documents nested deeper than this are refused (calibration files nest about 6 deep)
MAX_JSON_DEPTH = 64


def _num(x: float) -> str:
    if float(x).is_integer() and abs(x) < 1e15:
        return f"{int(x):,}"
    return f"{x:g}"


@dataclass(frozen=True)
class Bound:
    """A finite number in ``[lo, hi]`` (``lo_open``: ``> lo``), optionally whole, in ``unit``.

    ``parse`` reads a human value (e.g. :func:`gpusim.units.parse_bytes` for ``25MiB``); the bound then
    applies to the parsed value, in the parser's unit. Called on a string, a bound is an argparse ``type``.
    """

    lo: float | None = None
    hi: float | None = None
    lo_open: bool = False
    integer: bool = False
    unit: str = ""
    parse: Callable[[str], float] | None = None
    shown: Callable[[float], str] | None = None  # how to print lo and hi (default: plain numbers)

    def describe(self) -> str:
        """``"a whole number from 1 to 4,096"``, ``"a number > 0 and at most 16"`` ..."""
        kind = "a whole number" if self.integer else "a finite number"
        show = self.shown or _num
        unit = f" {self.unit}" if self.unit else ""
        if self.lo is not None and self.hi is not None and not self.lo_open:
            return f"{kind} from {show(self.lo)} to {show(self.hi)}{unit}"
        parts = []
        if self.lo is not None:
            parts.append(f"{'>' if self.lo_open else '>='} {show(self.lo)}")
        if self.hi is not None:
            parts.append(f"<= {show(self.hi)}")
        return f"{kind} {' and '.join(parts)}{unit}".rstrip()

    def check(self, value: Any, what: str | None = "value", got: Any = None) -> float | int:
        """The value as float (int when ``integer``); ``ValueError`` naming ``what`` and the range otherwise
        (``got``: the input as the user wrote it, when ``value`` was parsed from it)."""
        what = f"{what} " if what else ""
        got = value if got is None else got
        try:
            x = float(value)
        except (TypeError, ValueError, OverflowError):
            raise ValueError(f"{what}must be {self.describe()} (got {got!r})") from None
        ok = math.isfinite(x) and not (x != 0 and abs(x) < TINY_MAGNITUDE)
        if ok and self.lo is not None:
            ok = x > self.lo if self.lo_open else x >= self.lo
        if ok and self.hi is not None:
            ok = x <= self.hi
        if ok and self.integer:
            ok = x.is_integer()
        if not ok:
            raise ValueError(f"{what}must be {self.describe()} (got {got!r})")
        return int(x) if self.integer else x

    def parse_text(self, text: str, what: str | None = "value") -> float | int:
        s = str(text).strip()
        if self.parse is not None:
            try:
                value = self.parse(s)
            except (ValueError, OverflowError) as e:
                raise ValueError(f"{f'{what}: ' if what else ''}{e}; it must be {self.describe()}") from None
        elif self.integer:
            try:
                value = int(s.replace("_", ""))
            except ValueError:
                value = s  # "1e3" is a whole number too; check() decides
        else:
            value = s
        return self.check(value, what, got=text)

    def __call__(self, text: str) -> float | int:  # argparse ``type=``: its message follows "argument --flag: "
        try:
            return self.parse_text(text, None)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None



# ---- pydantic (imported on first use: the CLI's parser must start fast) ---------------------------------
def bound_of(field_info, unit: str = "") -> Bound | None:
    """The :class:`Bound` a pydantic field's ``ge``/``gt``/``le``/``lt`` constraints describe."""
    lo = hi = None
    lo_open = False
    for m in field_info.metadata:
        for attr, is_lo, opened in (("ge", True, False), ("gt", True, True), ("le", False, False), ("lt", False, True)):
            v = getattr(m, attr, None)
            if v is not None:
                if is_lo:
                    lo, lo_open = v, opened
                else:
                    hi = v
    if lo is None and hi is None:
        return None
    integer = field_info.annotation in (int, int | None)
    return Bound(lo, hi, lo_open=lo_open, integer=integer, unit=unit)


@dataclass(frozen=True)
class FieldBound:
    """An argparse ``type`` that checks a flag against a pydantic field's range (``"gpusim.strategy:Strategy"``,
    ``"bucket_mib"``) or an entry of a table of bounds (``"gpusim.planning:INPUT_BOUNDS"``, ``"budget_usd"``),
    resolved when the flag is given (so ``--help`` stays fast), so that the API is the one source of the range."""

    model: str
    field: str
    unit: str = ""
    parse: Callable[[str], float] | None = None

    def bound(self) -> Bound:
        import dataclasses
        import importlib

        mod, _, name = self.model.partition(":")
        obj = getattr(importlib.import_module(mod), name)
        if isinstance(obj, dict):  # a table of bounds, e.g. gpusim.planning:INPUT_BOUNDS
            b = obj[self.field]
        else:  # a pydantic model: the field's constraints
            b = bound_of(obj.model_fields[self.field], self.unit) or Bound(unit=self.unit)
        return dataclasses.replace(b, parse=self.parse or b.parse)

    def __call__(self, text: str):
        return self.bound()(text)


def field_range(model_cls, loc: tuple) -> str | None:
    """The range of the field at ``loc`` in words (``"a whole number from 1 to 1,000,000"``)."""
    from pydantic import BaseModel

    cls, info = model_cls, None
    for part in loc:
        if cls is None or not isinstance(part, str) or part not in getattr(cls, "model_fields", {}):
            return None
        info = cls.model_fields[part]
        ann = info.annotation
        cls = ann if isinstance(ann, type) and issubclass(ann, BaseModel) else None
    b = bound_of(info) if info is not None else None
    return b.describe() if b else None


_RANGE_ERRORS = {"greater_than", "greater_than_equal", "less_than", "less_than_equal", "finite_number",
                 "float_parsing", "int_parsing", "int_from_float", "float_type", "int_type"}


def format_validation_error(e, model_cls=None, skip: tuple[str, ...] = ("strategy",),
                            prefix: str = "invalid scenario: ") -> str:
    """Every problem of a pydantic ``ValidationError`` on one line; numbers out of range say the whole range."""
    lines = []
    for err in e.errors():
        loc = ".".join(str(x) for x in err["loc"] if x not in skip)
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] in _RANGE_ERRORS:
            rng = field_range(model_cls, tuple(err["loc"]))
            if rng:
                msg = f"must be {rng} (got {err.get('input')!r})"
        lines.append(f"{loc}: {msg}" if loc else msg)
    return prefix + "; ".join(lines)


def _tiny_floats(obj: Any) -> bool:
    return isinstance(obj, float) and obj != 0 and abs(obj) < TINY_MAGNITUDE


def _finite_model():
    from pydantic import BaseModel, ConfigDict, model_validator

    class FiniteModel(BaseModel):
        """A pydantic model whose float fields are finite (no inf, no NaN) and never of subnormal scale."""

        model_config = ConfigDict(allow_inf_nan=False)

        @model_validator(mode="after")
        def _not_tiny(self):
            bad = [name for name in type(self).model_fields if _tiny_floats(getattr(self, name, None))]
            if bad:
                raise ValueError(f"{', '.join(bad)}: a non-zero value below {TINY_MAGNITUDE:g} is no meaningful "
                                 "quantity")
            return self

    FiniteModel.__module__ = __name__
    return FiniteModel


def __getattr__(name: str):
    if name == "FiniteModel":
        cls = _finite_model()
        globals()["FiniteModel"] = cls
        return cls
    raise AttributeError(name)


# ---- files ---------------------------------------------------------------------------------------------
def _oserror(path, e: OSError, doing: str = "cannot read") -> GpusimError:
    import errno

    if e.errno == errno.ENAMETOOLONG:
        return GpusimError(f"{str(path)[:60]}...: {doing}: the path is too long for this system")
    return GpusimError(f"{path}: {doing}: {e.strerror or e}")


def regular_file(path: str | os.PathLike, what: str = "file", max_bytes: int = MAX_TEXT_FILE_BYTES) -> Path:
    """``path`` as a Path if it is a regular file no larger than ``max_bytes``; GpusimError otherwise."""
    p = Path(path)
    try:
        st = p.stat()
    except OSError as e:
        raise _oserror(path, e) from None
    if stat.S_ISDIR(st.st_mode):
        raise GpusimError(f"{path}: is a directory, not a {what}")
    if not stat.S_ISREG(st.st_mode):
        raise GpusimError(f"{path}: is not a regular file (a device, pipe or socket), not a {what}")
    if st.st_size > max_bytes:
        raise GpusimError(f"{path}: {st.st_size:,} bytes is too large for a {what} (at most {max_bytes:,})")
    return p


def read_text(path: str | os.PathLike, what: str = "text file", max_bytes: int = MAX_TEXT_FILE_BYTES) -> str:
    """The text of a regular UTF-8 file; binary, oversized, unreadable or non-UTF-8 files are GpusimError."""
    p = regular_file(path, what, max_bytes)
    try:
        data = p.read_bytes()
    except OSError as e:
        raise _oserror(path, e) from None
    if b"\x00" in data:
        raise GpusimError(f"{path}: is a binary file, not a {what}")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data[:e.start].count(b"\n") + 1
        raise GpusimError(f"{path}: line {line}: not UTF-8 text (byte {data[e.start]:#04x}); save the {what} as "
                          "UTF-8") from None


def read_csv(path: str | os.PathLike, columns, what: str = "CSV file", hint: str = "") -> list[dict]:
    """The rows of a CSV file (:func:`read_text`'s checks) as dicts; a file that does not parse, or whose header lacks
    one of ``columns``, is a :class:`GpusimError` naming the file and the missing columns (``hint``: where the schema
    is described; the columns themselves where none is given)."""
    import csv
    import io

    text = read_text(path, what)
    try:
        reader = csv.DictReader(io.StringIO(text, newline=""))
        missing = [c for c in columns if c not in (reader.fieldnames or ())]
        if missing:
            raise GpusimError(f"{path}: missing column(s) {', '.join(missing)}; "
                              + (hint or f"the schema is {', '.join(columns)}"))
        return list(reader)
    except csv.Error as e:
        raise GpusimError(f"{path}: not a readable {what}: {e}") from None


def json_depth(doc: Any) -> int:
    """Nesting depth of a parsed JSON document (iterative: no recursion limit)."""
    depth, stack = 0, [(doc, 1)]
    while stack:
        x, d = stack.pop()
        if isinstance(x, (dict, list)):
            depth = max(depth, d)
            stack.extend((v, d + 1) for v in (x.values() if isinstance(x, dict) else x))
    return depth


def _no_constant(name: str):
    raise ValueError(f"{name} is not a number JSON allows")


def loads_json(text: str, source: str = "JSON", max_depth: int = MAX_JSON_DEPTH, allow_nan: bool = False) -> Any:
    """Parse JSON text; nesting deeper than ``max_depth``, syntax errors and (unless ``allow_nan``: files of
    other tools that write them, whose readers skip such values) NaN/Infinity are GpusimError."""
    try:
        doc = json.loads(text, **({} if allow_nan else {"parse_constant": _no_constant}))
    except RecursionError:
        raise GpusimError(f"{source}: JSON nested too deeply (at most {max_depth} levels)") from None
    except json.JSONDecodeError as e:
        raise GpusimError(f"{source}: not valid JSON: {e.msg} at line {e.lineno} column {e.colno}") from None
    except ValueError as e:
        raise GpusimError(f"{source}: {e}") from None
    if json_depth(doc) > max_depth:
        raise GpusimError(f"{source}: JSON nested too deeply (at most {max_depth} levels)")
    return doc


def load_json(path: str | os.PathLike, what: str = "JSON file", max_depth: int = MAX_JSON_DEPTH) -> Any:
    return loads_json(read_text(path, what), str(path), max_depth)


def finite_or_none(x: Any) -> float | None:
    """``float(x)`` when it is a finite number, else None (for values read from other tools' files)."""
    try:
        v = float(x)
    except (TypeError, ValueError, OverflowError):
        return None
    return v if math.isfinite(v) else None


def output_path(path: str | os.PathLike, flag: str = "-o") -> Path:
    """An output path that may be written: an existing regular file (replaced) or a new path.

    Refuses devices, directories, FIFOs and sockets (replacing ``/dev/null`` with a file would break the
    system), and paths whose name is too long.
    """
    p = Path(path)
    try:
        st = p.stat()
    except FileNotFoundError:
        try:
            os.statvfs(p.parent if str(p.parent) else ".")
        except FileNotFoundError:
            return p  # the parent is created when writing
        except OSError as e:
            raise _oserror(path, e, f"{flag}: cannot write") from None
        if len(p.name.encode()) > 255:
            raise GpusimError(f"{flag} {str(path)[:60]}...: the file name is too long for this system")
        return p
    except OSError as e:
        raise _oserror(path, e, f"{flag}: cannot write") from None
    if not stat.S_ISREG(st.st_mode):
        kind = "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file (a device, pipe or socket)"
        raise GpusimError(f"{flag} {path}: is {kind}; give the path of a new or existing regular file")
    return p
