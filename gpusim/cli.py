"""The ``gpusim`` command line: a thin shell over the Python API.

Each subcommand lives in ``gpusim/commands/<name>.py`` and exposes ``ORDER`` (its place in ``--help``)
and ``register(subparsers)``, which adds its parser and sets ``func(args) -> int``. Modules there are
discovered, so adding a command touches no other file. Command modules import their heavy
dependencies inside ``func``, so that ``gpusim --help`` and ``gpusim hw list`` start fast.

Errors: a :class:`gpusim.errors.GpusimError` (bad input, unknown id, invalid file) is printed as one
message on stderr with exit code 2; anything else is reported as an internal error with exit code 3
and no traceback, unless ``GPUSIM_DEBUG=1``.
"""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import sys


def _commands(only: str | None = None):
    """The command modules, in ``--help`` order; with ``only`` (a subcommand name), just the module that
    registers it when there is one (a start then imports and builds one parser, not fifteen: ~30 ms of a cold
    start, issue 20)."""
    import gpusim.commands as pkg

    names = [f"{pkg.__name__}.{m.name}" for m in pkgutil.iter_modules(pkg.__path__) if not m.name.startswith("_")]
    if only is not None and pkg.module_name(only) in names:
        names = [pkg.module_name(only)]
    mods = [importlib.import_module(n) for n in names]
    return sorted(mods, key=lambda m: (getattr(m, "ORDER", 100), m.__name__))


def _subcommand(argv: list[str]) -> str | None:
    """The subcommand named on a command line (the first word that is neither an option nor the value of
    ``--hwdb``), or None."""
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--":
            return argv[i + 1] if i + 1 < len(argv) else None
        if a == "--hwdb":
            i += 2
            continue
        if not a.startswith("-"):
            return a
        i += 1
    return None


from gpusim.commands._common import Parser as _Parser  # noqa: E402  (argparse's errors as one line)


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole command line; with ``only``, the global options and just that subcommand (what
    :func:`main` parses a command line with: an unknown name still gets every command, for its error)."""
    from gpusim import __version__

    parser = _Parser(
        prog="gpusim",
        description="Predict and explain multi-GPU training performance before you buy, rent or tune GPUs.",
    )
    parser.add_argument("--version", action="version", version=f"gpusim {__version__}")
    parser.add_argument("--hwdb", action="append", default=[], metavar="DIR",
                        help="a directory of your own hardware YAML files that add to or override the shipped "
                             "database (repeatable; also $GPUSIM_HWDB)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for mod in _commands(only):
        mod.register(sub)
    return parser


#: the environment variables :func:`main` set for this process (so that launchers of other programs,
#: ``gpusim calibrate``'s torchrun, can give them the user's environment instead)
START_ENV_SET: tuple[str, ...] = ()


def _quiet_start() -> None:
    """Two start-up costs a CLI process does not need, each skipped unless the user set the variable:

    - ``OPENBLAS_NUM_THREADS=1``: the model's arrays are small and elementwise, and the pool numpy's OpenBLAS
      starts at import (one thread per core, spinning while it waits) only competes with the main thread; on 2
      busy cores it cost ~10% of a `gpusim predict` start (benchmarks/cold_start.py). No effect once numpy is
      imported (the library read its variables then).
    - ``PYDANTIC_DISABLE_PLUGINS=__all__``: pydantic otherwise scans the entry points of every installed
      distribution for plugins when it builds its first validator (~7 ms with this project's environment);
      gpusim's validation uses none.
    """
    global START_ENV_SET
    set_now = []
    if "numpy" not in sys.modules and "OPENBLAS_NUM_THREADS" not in os.environ:
        os.environ["OPENBLAS_NUM_THREADS"] = "1"
        set_now.append("OPENBLAS_NUM_THREADS")
    if "PYDANTIC_DISABLE_PLUGINS" not in os.environ:
        os.environ["PYDANTIC_DISABLE_PLUGINS"] = "__all__"
        set_now.append("PYDANTIC_DISABLE_PLUGINS")
    START_ENV_SET = tuple(set_now)


def main(argv: list[str] | None = None) -> int:
    from gpusim.errors import GpusimError

    _quiet_start()
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(_subcommand(argv))
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 0 if args.command is None else 2
    try:
        return int(args.func(args) or 0)
    except GpusimError as e:
        print(f"gpusim: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("gpusim: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `gpusim ... | head`
        try:
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115
        except OSError:
            pass
        return 0
    except OSError as e:  # a path the system refuses (too long, permission denied ...): the user's input
        if e.filename is None or os.environ.get("GPUSIM_DEBUG"):
            raise
        name = str(e.filename)
        print(f"gpusim: error: {name if len(name) <= 80 else name[:60] + '...'}: {e.strerror or e}", file=sys.stderr)
        return 2
    except MemoryError:
        print("gpusim: error: out of memory (is an input file or a flag far larger than intended?)", file=sys.stderr)
        return 2
    except Exception as e:  # a bug: say so in one line, keep the traceback for GPUSIM_DEBUG=1
        if os.environ.get("GPUSIM_DEBUG"):
            raise
        print(f"gpusim: internal error: {type(e).__name__}: {e} "
              "(please report it; rerun with GPUSIM_DEBUG=1 for the traceback)", file=sys.stderr)
        return 3


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
