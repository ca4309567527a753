"""How a CLI process starts (issue 20): numpy with one OpenBLAS thread and pydantic without its plugin scan unless
the user set the variables (and the CLI's choice is not passed on to programs it launches); only the named
subcommand's parser is built."""

from __future__ import annotations

import os
import subprocess
import sys

CODE = ("import os, sys; import gpusim.cli as c; c._quiet_start(); "
        "print(os.environ.get('OPENBLAS_NUM_THREADS'), os.environ.get('PYDANTIC_DISABLE_PLUGINS'), "
        "','.join(c.START_ENV_SET) or '-')")
VARS = ("OPENBLAS_NUM_THREADS", "PYDANTIC_DISABLE_PLUGINS")


def _run(extra_env: dict, code: str = CODE) -> str:
    env = {k: v for k, v in os.environ.items() if k not in VARS} | extra_env
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout


def test_one_thread_and_no_plugin_scan_by_default():
    assert _run({}).split() == ["1", "__all__", "OPENBLAS_NUM_THREADS,PYDANTIC_DISABLE_PLUGINS"]


def test_the_users_choice_is_kept_and_not_marked_as_ours():
    out = _run({"OPENBLAS_NUM_THREADS": "4", "PYDANTIC_DISABLE_PLUGINS": "some-plugin"})
    assert out.split() == ["4", "some-plugin", "-"]


def test_the_blas_pool_is_left_alone_once_numpy_is_imported():
    assert _run({}, "import numpy; " + CODE).split() == ["None", "__all__", "PYDANTIC_DISABLE_PLUGINS"]


def test_calibrate_launches_torchrun_with_the_users_environment(monkeypatch):
    import gpusim.cli as c
    from gpusim.commands.calibrate import worker_env

    monkeypatch.setattr(c, "START_ENV_SET", ("OPENBLAS_NUM_THREADS", "PYDANTIC_DISABLE_PLUGINS"))
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "1")
    monkeypatch.setenv("PYDANTIC_DISABLE_PLUGINS", "__all__")
    monkeypatch.setenv("GPUSIM_SOMETHING", "kept")
    env = worker_env("gloo")
    assert "OPENBLAS_NUM_THREADS" not in env and "PYDANTIC_DISABLE_PLUGINS" not in env
    assert env["GPUSIM_SOMETHING"] == "kept" and env["OMP_NUM_THREADS"] == "1" and env["PYTHONUNBUFFERED"] == "1"
    monkeypatch.setattr(c, "START_ENV_SET", ())  # the user's own setting travels
    assert worker_env("nccl")["OPENBLAS_NUM_THREADS"] == "1"


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
