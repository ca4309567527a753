"""The Python API that mirrors the CLI: one function per command, options named as its flags.

::

    import gpusim
    r = gpusim.predict(model="llama3-70b", gpu="h100-sxm", gpus=64, nodes=8, tp=4, pp=4, micro_batch=1,
                       global_batch=256, seq_len=4096, precision="bf16", strategy="zero1")
    r.tokens_per_s_per_gpu, r.to_dict()          # to_dict() == `gpusim predict ... --json`
    s = gpusim.sweep(model="llama3-70b", gpu="h100-sxm", gpus=64, nodes=8, global_batch=256, seq_len=4096)
    s.best, s.to_frame()                         # the layout search, as `gpusim sweep`
    p = gpusim.plan(model="llama2-7b", tokens=1e11, deadline="90d")   # or deadline=datetime.timedelta(days=90)
    gpusim.compare(dict(model="llama3-70b", gpu="h100-sxm", gpus=64, nodes=8, tp=4, pp=4, global_batch=256),
                   dict(tp=2, pp=8))             # each later scenario changes only what it names, as --vs
    gpusim.comm(collective="all_reduce", gpu="h100-sxm", gpus=8, bytes="1GiB")
    gpusim.scale(model="resnet50", gpu="h100-sxm", gpus=64, per_gpu_batch=256)

How the options become the command's: each keyword is the flag without its dashes (``per_gpu_batch`` for
``--per-gpu-batch``, its other name ``micro_batch`` too); ``True`` sets a switch (``checkpointing=True``),
``False`` turns off a ``--x/--no-x`` pair (``sp=False``); a list gives a flag that takes several values
(``gpu=["h100-sxm", "a100-sxm4-80gb"]``); a :class:`datetime.timedelta` is a duration. The options are then
parsed by the command's own parser and answered by the command's own function, so defaults, checks, error
messages and the result are the CLI's: ``gpusim.<command>(**options).to_dict()`` equals
``gpusim <command> ... --json`` (apart from timings). Bad input raises :class:`gpusim.errors.GpusimError`.

The data-parallel hardware grid (every GPU x node count x strategy, one table) is :func:`hardware_sweep`
(``gpusim.sweeps.sweep``); :func:`gpusim.simulate` and :func:`gpusim.scaling_curve` take a Scenario.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib
from collections.abc import Mapping
from typing import Any

from gpusim.commands import module_name
from gpusim.commands._common import Parser
from gpusim.errors import ScenarioError

#: command -> the module that registers it
COMMAND_MODULES = {c: module_name(c) for c in ("predict", "scale", "sweep", "plan", "compare", "comm")}


class _RaisingParser(Parser):
    """The command's parser, whose usage errors raise (a script gets an exception, not an exit)."""

    def error(self, message):
        raise ScenarioError(f"{self.prog}: {message}")

    def exit(self, status=0, message=None):
        if status:
            raise ScenarioError((message or f"{self.prog}: exit {status}").strip())
        raise ScenarioError(f"{self.prog}: --help is for the command line; see help(gpusim.{self.prog.split()[-1]})")


def command_parser(command: str) -> argparse.ArgumentParser:
    """The argparse parser of ``gpusim <command>`` (the same ``register()`` the CLI calls)."""
    if command not in COMMAND_MODULES:
        raise ScenarioError(f"unknown command {command!r}; one of {', '.join(COMMAND_MODULES)}")
    root = _RaisingParser(prog="gpusim")
    sub = root.add_subparsers(dest="command", parser_class=_RaisingParser)
    importlib.import_module(COMMAND_MODULES[command]).register(sub)
    return sub.choices[command]


def _actions(parser) -> dict[str, argparse.Action]:
    """keyword -> action: each option's dest and each of its long names without dashes."""
    out: dict[str, argparse.Action] = {}
    for a in parser._actions:  # argparse keeps no public list of its actions
        if not a.option_strings or isinstance(a, argparse._HelpAction):
            continue
        for name in a.option_strings:
            if name.startswith("--"):
                key = name[2:].replace("-", "_")
                if not key.startswith("no_") or key == a.dest or a.dest.startswith("no_"):
                    out.setdefault(key, a)
        out.setdefault(a.dest, a)
    return out


def _text(value: Any) -> str:
    if isinstance(value, dt.timedelta):
        return repr(value.total_seconds())
    if isinstance(value, float):
        return repr(value)
    return str(value)


def options_to_argv(command: str, options: Mapping[str, Any], parser=None) -> list[str]:
    """The command-line tokens of ``options`` for ``gpusim <command>`` (see the module docstring)."""
    parser = parser or command_parser(command)
    actions = _actions(parser)
    argv: list[str] = []
    for key, value in options.items():
        if value is None:
            continue
        a = actions.get(key)
        if a is None:
            known = sorted(k for k in actions if k != "json")
            raise ScenarioError(f"gpusim.{command}(): unknown option {key!r}; its options are the flags of "
                                f"`gpusim {command}`: {', '.join(known)}")
        flag = next(s for s in a.option_strings if s.startswith("--"))
        if isinstance(a, argparse.BooleanOptionalAction):
            argv.append(flag if value else "--no-" + flag[2:])
        elif a.nargs == 0:  # a switch (store_true / store_const)
            if not isinstance(value, bool):
                raise ScenarioError(f"gpusim.{command}(): {key} is a switch: give True or False (got {value!r})")
            if value:
                argv.append(flag)
        elif isinstance(value, (list, tuple, set)):
            items = [_text(v) for v in value]
            if a.nargs in ("+", "*") or isinstance(a, argparse._ExtendAction):
                argv += [flag, *items]
            elif isinstance(a.nargs, int) and a.nargs > 1:  # [stop 57] a flag of a fixed count (--bf16-layers S E)
                if len(items) != a.nargs:
                    raise ScenarioError(f"gpusim.{command}(): {key} takes {a.nargs} values (got {value!r})")
                argv += [flag, *items]
            elif isinstance(a, argparse._AppendAction):
                for it in items:
                    argv += [flag, it]
            else:
                raise ScenarioError(f"gpusim.{command}(): {key} takes one value (got {value!r})")
        else:
            argv += [flag, _text(value)]
    return argv


def _answer(command: str, options: Mapping[str, Any], positional: list[str] | None = None,
            hwdb: Any = None):
    parser = command_parser(command)
    argv = options_to_argv(command, options, parser)
    if "json" in _actions(parser):
        argv.append("--json")  # the JSON path of the command (no table printed; sweep prints no notice)
    args = parser.parse_args([*(positional or []), *argv])
    args.hwdb = [str(h) for h in ([hwdb] if isinstance(hwdb, (str, bytes)) else (hwdb or []))]
    args.quiet = True
    return args.result(args)


def predict(*, hwdb=None, **options):
    """``gpusim predict``: one scenario, explained. Returns a :class:`~gpusim.results.PredictResult` (the
    StepResult's fields readable on it; ``to_dict()`` is the command's JSON)."""
    return _answer("predict", options, hwdb=hwdb)


def scale(*, hwdb=None, **options):
    """``gpusim scale``: throughput, speedup and efficiency over GPU counts (``counts=[1, 8, 64]`` or "1,8,64").
    Returns a :class:`~gpusim.results.ScaleResult` (``rows``, ``to_frame()``)."""
    if isinstance(options.get("counts"), (list, tuple)):
        options = {**options, "counts": ",".join(str(int(c)) for c in options["counts"])}
    return _answer("scale", options, hwdb=hwdb)


def sweep(*, hwdb=None, **options):
    """``gpusim sweep``: every LLM layout of a job, searched in one model call; the degrees given are pinned.
    Returns a :class:`~gpusim.results.SweepResult` (``best``, ``layouts``, ``to_frame()``)."""
    return _answer("sweep", options, hwdb=hwdb)


def plan(*, hwdb=None, **options):
    """``gpusim plan``: what to rent or buy to train by a deadline (``deadline="90d"`` or a timedelta), and what it
    costs. Returns a :class:`~gpusim.results.PlanAnswer` (``recommendation``, ``pareto``, ``to_frame()``)."""
    return _answer("plan", options, hwdb=hwdb)


def comm(*, hwdb=None, **options):
    """``gpusim comm``: time and bus bandwidth of a collective per message size (``bytes="1GiB"``, a list of sizes,
    or ``"1KiB..1GiB"``). Returns a :class:`~gpusim.results.CommResult` (``rows``, ``to_frame()``)."""
    if isinstance(options.get("bytes"), (int, float)):
        options = {**options, "bytes": [options["bytes"]]}
    return _answer("comm", options, hwdb=hwdb)


def compare(*scenarios, hwdb=None):
    """``gpusim compare``: two or more scenarios side by side, and which difference explains most of the gap.

    Each scenario is a dict of ``predict``'s options (each after the first changes only what it names, as the
    CLI's ``--vs``; ``name=`` names its column) or the path of a saved ``gpusim predict --json`` file. Returns a
    :class:`~gpusim.results.CompareResult`."""
    if len(scenarios) == 1 and isinstance(scenarios[0], (list, tuple)):
        scenarios = tuple(scenarios[0])
    sub = command_parser("predict")  # compare's scenario flags are predict's (gpusim.commands.compare)
    tokens: list[str] = []
    for i, s in enumerate(scenarios):
        if i:
            tokens.append("--vs")
        if isinstance(s, Mapping):
            tokens += options_to_argv("compare", s, sub) if "name" not in s else [
                *options_to_argv("compare", {k: v for k, v in s.items() if k != "name"}, sub), "--name", str(s["name"])]
        else:
            tokens.append(str(s))
    return _answer("compare", {}, positional=tokens, hwdb=hwdb)


def hardware_sweep(model=None, **kwargs):
    """The data-parallel hardware grid: every GPU x node template x node count x strategy x precision x
    micro-batch of the database as one table (:func:`gpusim.sweeps.sweep`; the plan's data-parallel rows)."""
    from gpusim.sweeps import sweep as _grid

    return _grid(model, **kwargs)
