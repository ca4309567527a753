"""Every output of ``gpusim.model.step.evaluate`` on a fixed, varied set of inputs, saved or compared (a check run by hand
around a change that must not change results, such as a speed-up).

    PYTHONPATH=$PWD .venv/bin/python benchmarks/evaluate_reference.py save /tmp/evaluate_ref.npz
    PYTHONPATH=$PWD .venv/bin/python benchmarks/evaluate_reference.py check /tmp/evaluate_ref.npz

The cases: the layouts of benchmarks/layout_search.py (Llama 3 70B on 1,024 H100, zero1) as the search calls the
model (blocks of 16,384 distinct layouts), a few hundred of them (the direct path, below
``gpusim.model.distinct.MIN_ROWS``) and the same layouts repeated (the per-distinct path); the layouts of two MoE
models in FP8 (Qwen3-30B-A3B and DeepSeek-V3, ep > 1 among them); the random LLM rows of benchmarks/llm_speed.py
with and without a per-row bandwidth (all rows distinct); and data-parallel rows over every strategy
(benchmarks/model_speed.py's grid). ``check`` compares every array with ``rtol=1e-12`` (NaN equal to NaN) and exits 1
on the first difference.
"""

from __future__ import annotations

import os
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

BLOCK = 16384  # (fixed here, not gpusim.search.CHUNK_ROWS: the reference must not move when the chunk size does)


def _layout_cases(model, gpus, nodes, precision, db, pins=None):
    from gpusim.params import DEFAULT_PARAMS
    from gpusim.rules import nvlink_domain_gpus, transformer_of
    from gpusim.search import Pins, _base_row, enumerate_layouts, layout_inputs
    from gpusim.simulation import Scenario, resolve_hardware, resolve_workload

    scn = Scenario(model=model, seq_len=4096 if model != "llama3-70b" else 8192, gpu="h100-sxm", gpus=gpus,
                   nodes=nodes, kind="zero1", precision=precision)
    hw, wl = resolve_hardware(scn, db), resolve_workload(scn)
    spec = transformer_of(wl)
    pins = pins or Pins()
    lay = enumerate_layouts(n_gpus=gpus, domain=nvlink_domain_gpus(hw), n_layers=spec.n_layers, n_heads=spec.n_heads,
                            n_kv_heads=spec.n_kv_heads or spec.n_heads, seq_len=int(scn.seq_len),
                            n_experts=int(getattr(spec, "n_experts", 0) or 0), global_batch=1024,
                            flash=bool(spec.flash_attention), pins=pins)
    ok = np.flatnonzero(lay["reason"] == 0)
    base = _base_row(scn, hw, wl, DEFAULT_PARAMS, pins)
    return base, {k: v[ok] for k, v in lay.items()}


def cases():
    """``name -> StepInputs`` (deterministic)."""
    from gpusim.hwdb import load
    from gpusim.search import layout_inputs

    sys.path.insert(0, os.path.dirname(__file__))
    import llm_speed
    import model_speed

    db = load()
    out = {}
    base, lay = _layout_cases("llama3-70b", 1024, 128, "bf16", db)
    n = len(lay["tp"])
    for i in range(0, n, BLOCK):
        out[f"llama70b_block{i // BLOCK}"] = layout_inputs(base, {k: v[i:i + BLOCK] for k, v in lay.items()})
    out["llama70b_few"] = layout_inputs(base, {k: v[::max(1, n // 300)][:300] for k, v in lay.items()})
    rep = np.resize(np.arange(n), 40000)
    out["llama70b_repeated"] = layout_inputs(base, {k: v[rep] for k, v in lay.items()})
    for model, gpus, nodes in (("qwen3-30b-a3b", 256, 32), ("deepseek-v3", 1024, 128)):
        base, lay = _layout_cases(model, gpus, nodes, "fp8", db)
        n = len(lay["tp"])
        assert np.any(lay["ep"] > 1), model
        sel = np.arange(n) if n <= BLOCK else np.linspace(0, n - 1, BLOCK).astype(np.int64)
        out[f"{model}_fp8"] = layout_inputs(base, {k: v[sel] for k, v in lay.items()})
    out["llm_speed_rows"] = llm_speed._rows(20000, db)
    inp = llm_speed._rows(5000, db)
    bw = np.asarray(inp.inter_busbw_bytes_per_s, dtype=np.float64)
    out["llm_speed_all_distinct"] = inp.replace(inter_busbw_bytes_per_s=bw * np.linspace(0.5, 1.5, 5000))
    out["dp_grid"] = model_speed.grid(20000, "llama2-7b")
    out["dp_grid_small"] = model_speed.grid(300, "resnet50", seed=1)
    return out


def run():
    from gpusim.model.step import evaluate
    from gpusim.params import DEFAULT_PARAMS

    res = {}
    for name, inp in cases().items():
        t0 = time.process_time()
        out = evaluate(inp, DEFAULT_PARAMS)
        print(f"  {name}: {np.shape(out['step_s'])[0]} rows, {time.process_time() - t0:.3f} s CPU")
        for k, v in out.items():
            res[f"{name}/{k}"] = np.asarray(v)
    return res


def main() -> int:
    mode, path = sys.argv[1], sys.argv[2]
    res = run()
    if mode == "save":
        np.savez(path, **res)
        print(f"saved {len(res)} arrays to {path}")
        return 0
    ref = np.load(path)
    missing = sorted(set(ref.files) ^ set(res))
    if missing:
        print(f"keys differ: {missing[:10]}")
        return 1
    for k in ref.files:
        a, b = ref[k], res[k]
        try:
            assert (a.shape, a.dtype.kind) == (b.shape, b.dtype.kind), f"shape/kind {a.shape} {a.dtype} -> {b.shape} {b.dtype}"
            np.testing.assert_allclose(b, a, rtol=1e-12, atol=0, equal_nan=True, err_msg=k)
        except AssertionError as e:
            print(f"DIFFERENT {k}: {e}")
            return 1
    print(f"all {len(ref.files)} arrays equal (rtol 1e-12)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
