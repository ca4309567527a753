"""The CLI starts numpy with one OpenBLAS thread unless the user set the variable (gpusim.cli._one_blas_thread),
and does not pass its own choice on to the programs it launches."""

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
