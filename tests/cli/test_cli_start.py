"""How a CLI process starts (issue 20): numpy with one OpenBLAS thread unless the user set the variable (and the
choice is not passed on to programs the CLI launches); only the named subcommand's parser is built."""

from __future__ import annotations

import os
import subprocess
import sys

CODE = ("import os, sys; import gpusim.cli as c; c._one_blas_thread(); "
        "print(os.environ.get('OPENBLAS_NUM_THREADS'), c.BLAS_ENV_SET)")


def _run(extra_env: dict, code: str = CODE) -> str:
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"} | extra_env
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout


def test_one_thread_by_default():
    assert _run({}).split()[0] == "1"
    assert "OPENBLAS_NUM_THREADS" in _run({})


def test_the_users_choice_is_kept_and_not_marked_as_ours():
    out = _run({"OPENBLAS_NUM_THREADS": "4"})
    assert out.strip() == "4 ()"


def test_nothing_changes_once_numpy_is_imported():
    out = _run({}, "import numpy; " + CODE)
    assert out.strip() == "None ()"


def test_the_command_line_names_its_subcommand():
    from gpusim.cli import _subcommand

    assert _subcommand(["predict", "--model", "x"]) == "predict"
    assert _subcommand(["--hwdb", "predict", "hw", "list"]) == "hw"  # a --hwdb value is no command
    assert _subcommand(["--hwdb=d", "scale"]) == "scale"
    assert _subcommand(["--version"]) is None and _subcommand([]) is None


def test_one_command_is_built_and_an_unknown_one_still_lists_every_choice():
    from gpusim.cli import build_parser

    def choices(p):
        return set(next(a for a in p._actions if a.dest == "command").choices)

    every = choices(build_parser())
    assert {"predict", "scale", "hw", "sweep", "calibrate"} <= every
    assert choices(build_parser("scale")) == {"predict", "scale"}  # predict.py registers both
    assert choices(build_parser("hw")) == {"hw"}
    assert choices(build_parser("no-such")) == every
