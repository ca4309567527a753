"""Multi-head latent attention (DeepSeek-V2/V3) at its real shapes: latents down, keys/values and queries up, values
of their own width (DeepSeek-AI, "DeepSeek-V2", 2024, section 2.1.2)."""

from __future__ import annotations

import numpy as np
import pytest

from gpusim.model.llm import llm_terms
from gpusim.model.step import _llm_inputs
from gpusim.params import DEFAULT_PARAMS
from gpusim.simulation import Scenario, build_inputs, stack_rows


def _terms(model, **kw):
    scn = Scenario.create(model=model, gpu="h100-sxm", gpus=64, nodes=8, tp=kw.pop("tp", 1), pp=8, micro_batch=1,
                          global_batch=64, seq_len=4096, kind="zero1", uneven_pp=True, **kw)
    _, wl, row = build_inputs(scn)
    inp = stack_rows([row])
    x = _llm_inputs(inp, np.asarray(inp.n_gpus) / np.asarray(inp.n_nodes), DEFAULT_PARAMS)
    with np.errstate(all="ignore"):
        return llm_terms(x, DEFAULT_PARAMS), x, wl


@pytest.mark.parametrize("model, kw", [("deepseek-v3", {"ep": 8}), ("llama3-70b", {}), ("qwen3-235b-a22b", {"ep": 8})])
def test_model_flops_of_the_layout_model_equal_the_workloads(model, kw):
    """The layout model's forward FLOPs per sequence are the workload's own count (MLA's down/up projections and its
    value width included; GQA's narrower keys and values)."""
    lt, _, wl = _terms(model, **kw)
    assert float(lt["model_fwd_flop_per_sample"][0]) == pytest.approx(wl.fwd_flop_per_sample, rel=1e-9)


def test_mla_gemm_columns_only_for_mla_rows_and_fewer_flops_than_the_query_wide_layout():
    """Columns 17-22 (the up-projections) run only where a row has latents; MLA's attention GEMMs take less time than
    treating its 24,576-wide queries as a multi-head layout with keys and values as wide (the old approximation)."""
    from gpusim.model.llm import layer_gemm_times_s

    f64 = lambda v: np.asarray([float(v)] * 2)  # noqa: E731  (two rows: MLA, then the same shapes without it)
    T, h, a, q = f64(4096), f64(7168), f64(128), f64(24576)
    common = dict(s=f64(4096), h=h, a=a, q=q, kv=q, f=f64(18432), up=f64(2), V=f64(129280), tp=f64(1), b=f64(1),
                  ceil_rate=f64(7.9e14), hbm=f64(3.35e12), sms=f64(132), e=f64(2), fp8=np.zeros(2),
                  ceil8=f64(1.5e15), fused_wgrad=np.ones(2, bool), serial_epilogue=np.zeros(2, bool))
    t = layer_gemm_times_s(T, **common, o=np.array([16384.0, 24576.0]), q_lora=np.array([1536.0, 0.0]),
                           kv_a=np.array([576.0, 0.0]), kv_lora=np.array([512.0, 0.0]),
                           kv_up=np.array([32768.0, 0.0]), p=DEFAULT_PARAMS)
    assert len(t) == 23
    extra = np.array([t[j] for j in range(17, 23)])
    assert np.all(extra[:, 0] > 0) and np.all(extra[:, 1] == 0)
    attn = sum(t[j] for j in (0, 1, 2, 3, 4, 5, 17, 18, 19, 20, 21, 22))
    assert attn[0] < 0.5 * attn[1]
