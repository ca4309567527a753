"""gpusim.heap: the allocator settings are asked for once, where glibc is the C library, and can be refused."""

import subprocess
import sys

import numpy as np

from gpusim import heap


def _in_fresh_process(code: str, env_value: str | None) -> str:
    import os

    env = dict(os.environ)
    env.pop(heap.ENV, None)
    if env_value is not None:
        env[heap.ENV] = env_value
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True,
                          timeout=120).stdout.strip()


def test_opting_out_leaves_the_allocator_alone():
    code = ("import gpusim.heap as H\n"
            "calls = []\n"
            "H._glibc_mallopt = lambda: (lambda *a: calls.append(a) or 1)\n"
            "print(H.retain_heap(), len(calls))")
    assert _in_fresh_process(code, "0") == "False 0"
    assert _in_fresh_process(code, None) == "True 2"  # both thresholds asked for


def test_asked_once_per_process_and_false_where_mallopt_refuses():
    code = ("import gpusim.heap as H\n"
            "calls = []\n"
            "H._glibc_mallopt = lambda: (lambda *a: calls.append(a) or 0)\n"
            "print(H.retain_heap(), H.retain_heap(), len(calls))")
    assert _in_fresh_process(code, None) == "False False 1"  # the first refusal stops; the answer is remembered


def test_the_settings_asked_for_are_glibcs_mmap_and_trim_thresholds():
    code = ("import gpusim.heap as H\n"
            "calls = []\n"
            "H._glibc_mallopt = lambda: (lambda *a: calls.append(a) or 1)\n"
            "H.retain_heap(); print(calls)")
    assert _in_fresh_process(code, None) == str([(-3, heap.MMAP_THRESHOLD_BYTES), (-1, heap.TRIM_THRESHOLD_BYTES)])
    assert heap.MMAP_THRESHOLD_BYTES == 32 * 2**20  # glibc's largest mmap threshold on 64-bit


def test_a_layout_search_asks_for_the_settings_and_the_pure_model_does_not(monkeypatch):
    """gpusim.search's layout evaluation asks for the heap settings before its model calls; the model itself never
    does (tests/unit/test_architecture.py keeps os and ctypes out of gpusim.model)."""
    import gpusim.search as S
    from gpusim.hwdb import load
    from gpusim.params import DEFAULT_PARAMS
    from gpusim.simulation import Scenario, resolve_hardware, resolve_workload

    order = []
    monkeypatch.setattr(S, "retain_heap", lambda: order.append("heap") or True)
    from gpusim.model.step import evaluate

    def model(inp, p):
        order.append("model")
        return evaluate(inp, p)

    scn = Scenario(model="llama3-8b", seq_len=4096, gpu="h100-sxm", gpus=8, nodes=1, kind="zero1")
    db = load()
    hw, wl = resolve_hardware(scn, db), resolve_workload(scn)
    lay = S.enumerate_layouts(n_gpus=8, domain=8, n_layers=32, n_heads=32, n_kv_heads=8, seq_len=4096,
                              global_batch=64, flash=True, pins=S.Pins())
    out = S.evaluate_layouts(lay, S._base_row(scn, hw, wl, DEFAULT_PARAMS), 80e9, DEFAULT_PARAMS, evaluate=model)
    assert order[0] == "heap" and order.count("heap") == 1 and "model" in order
    assert out["best"] is not None and np.isfinite(out["out"]["step_s"]).any()


def test_glibc_accepts_the_settings():
    """On glibc the real mallopt takes both thresholds (a value glibc refuses, such as an mmap threshold above its
    64-bit maximum, would make retain_heap answer False)."""
    import pytest

    if heap._glibc_mallopt() is None:
        pytest.skip("the C library is not glibc")
    assert _in_fresh_process("import gpusim.heap as H; print(H.retain_heap())", None) == "True"
    assert _in_fresh_process("import gpusim.heap as H; print(H.retain_heap())", "0") == "False"
