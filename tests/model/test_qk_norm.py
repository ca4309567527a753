"""[issue 17] The per-head RMSNorms on queries and keys (Qwen3, OLMo 2, Gemma 3; Megatron-Core ``qk_layernorm``):
their bytes, kernels and kept inputs, worked by hand, and what they add to a layer and to a Qwen3 prediction."""

from __future__ import annotations

import numpy as np
import pytest

from gpusim.model.llm import FULL, NONE, SELECTIVE, activation_bytes_per_layer, qk_norm_bytes
from gpusim.model.step import evaluate, layer_detail
from gpusim.params import DEFAULT_PARAMS
from gpusim.simulation import Scenario, build_inputs, stack_rows
from gpusim.workload import TransformerSpec, build_from_spec


def test_bytes_and_kernels_by_hand():
    # Qwen3-30B-A3B: 32 query heads and 4 key heads of 128; 16,384 tokens on one rank, bf16
    b, k = qk_norm_bytes(True, T=16384.0, q=4096.0, kv=512.0, tp=1.0, elem_bytes=2.0)
    assert b == 2 * 2 * 16384 * (4096 + 512) == 301_989_888
    assert k == 2.0
    b4, _ = qk_norm_bytes(True, T=16384.0, q=4096.0, kv=512.0, tp=4.0, elem_bytes=2.0)
    assert b4 == b / 4  # the heads are split over the tensor-parallel ranks
    assert qk_norm_bytes(False, T=16384.0, q=4096.0, kv=512.0, tp=1.0, elem_bytes=2.0) == (0.0, 0.0)


@pytest.mark.parametrize("rc, extra", [(NONE, 1.0), (SELECTIVE, 1.0), (FULL, 0.0)])
def test_the_norms_keep_their_inputs(rc, extra):
    s, b, h, a, q, kv, f, tp = 4096.0, 2.0, 2048.0, 32.0, 4096.0, 512.0, 6144.0, 2.0
    kw = dict(dropout=False, flash=True, elem_bytes=2.0)
    with_qk, _ = activation_bytes_per_layer(s, b, h, a, q, kv, f, 2.0, tp, True, rc, qk_norm=True, **kw)
    without, _ = activation_bytes_per_layer(s, b, h, a, q, kv, f, 2.0, tp, True, rc, qk_norm=False, **kw)
    # the queries' and keys' inputs to the norms, split by heads over tp: 2 x 4096 x 2 x 4608 / 2 bytes
    assert float(with_qk - without) == pytest.approx(extra * 2.0 * s * b * (q + kv) / tp)


def _dense_qwen_like(qk: bool):
    spec = TransformerSpec(n_layers=8, d_model=2048, n_heads=32, n_kv_heads=4, d_head=128, vocab_size=151936,
                           seq_len=4096, d_ff=6144, gated_ffn=True, rope=True, qk_norm=qk)
    return build_from_spec(spec, id=f"qk-{qk}")


def test_a_layer_pays_the_bytes_at_the_memory_rate_and_the_kernel_tails(db):
    rows = []
    for qk in (False, True):
        scn = Scenario(workload=_dense_qwen_like(qk), gpu="h100-sxm", gpus=8, tp=2, pp=1, micro_batch=2,
                       global_batch=64, precision="bf16", kind="zero1")
        rows.append(build_inputs(scn, db)[2])
    off, on = (layer_detail(stack_rows([r]), DEFAULT_PARAMS) for r in rows)
    p = DEFAULT_PARAMS
    hbm = db.gpu("h100-sxm").memory_bytes_per_s
    T, q, kv, tp = 2 * 4096.0, 4096.0, 512.0, 2.0
    fwd = 2 * 2 * T * (q + kv) / tp / (hbm * p.mem_eff_frac) + 2 * p.kernel_tail_s
    assert on["gpu_fwd_s"] - off["gpu_fwd_s"] == pytest.approx(fwd, rel=1e-9)
    assert on["gpu_bwd_s"] - off["gpu_bwd_s"] == pytest.approx(2 * fwd, rel=1e-9)  # read twice, as the other norms


def test_a_qwen3_prediction_counts_them(db):
    base = dict(model="qwen3-30b-a3b", gpu="gb200", gpus=8, nodes=2, ep=8, micro_batch=4, global_batch=512,
                seq_len=4096, precision="bf16", kind="zero1")
    row = build_inputs(Scenario(**base), db)[2]
    inp = stack_rows([row, row])
    inp = inp.replace(qk_norm=np.array([False, True]))
    out = evaluate(inp, DEFAULT_PARAMS)
    assert bool(np.asarray(row["qk_norm"] if isinstance(row, dict) else row.qk_norm).ravel()[0])
    assert out["step_s"][1] > out["step_s"][0]
    assert out["step_s"][1] < 1.05 * out["step_s"][0]  # a few percent at most: memory-bound kernels beside GEMMs
