"""[issue 17] The loss's vocabulary-parallel cross entropy by implementation (gpusim.model.llm.CROSS_ENTROPY_BYTES)."""

from __future__ import annotations

import numpy as np
import pytest

from gpusim.hwdb import load
from gpusim.model import llm as L
from gpusim.params import DEFAULT_PARAMS
from gpusim.scenario import Scenario
from gpusim.simulation import simulate
from gpusim.strategy import Strategy
from gpusim.workload import get_workload


def test_bytes_per_logit_counted_from_the_kernels():
    """te: the online softmax reads the bf16 logits (2), the backward reads and overwrites them (2 + 2); native: the
    fp32 copy with its maximum (2 + 4), exp in place (8), the sum (4), the division (8), the scaling (8), the cast
    back (4 + 2); unfused adds the separate maximum (4) and subtraction (8)."""
    assert L.CROSS_ENTROPY_BYTES["te"] == (2.0 + 2.0 + 2.0, 2.0)
    assert L.CROSS_ENTROPY_BYTES["native"] == ((2 + 4) + 8 + 4 + 8 + 8 + (4 + 2), 2.0 + 4.0)
    assert L.CROSS_ENTROPY_BYTES["unfused"][0] == L.CROSS_ENTROPY_BYTES["native"][0] + 4 + 8
    moved, held = L.cross_entropy_bytes(np.array([L.CE_CODES["te"], L.CE_CODES["native"], L.CE_CODES["unfused"]]))
    assert moved.tolist() == [6.0, 40.0, 52.0] and held.tolist() == [2.0, 6.0, 6.0]
    # the docstring's hand-worked figure: 16,384 tokens x 201,088 logits, native
    assert 40.0 * 16384 * 201088 == pytest.approx(1.32e11, rel=0.01)


def _scenario(**kw):
    wl = get_workload("gpt-oss-120b")
    return Scenario.create(workload=wl, gpu="h100-sxm", node="dgx-h100", gpus=8, nodes=1, kind="zero1",
                           precision="bf16", tp=1, pp=1, ep=8, micro_batch=1, global_batch=64, seq_len=4096, **kw)


def test_the_loss_costs_its_implementation_s_bytes_and_memory():
    """The step and the last stage's memory follow the implementation: native moves 34 more bytes per logit than te
    and holds an fp32 copy (4 bytes per logit) te does not; unfused moves 12 more than native."""
    db = load()
    te, nat, unf = (simulate(_scenario(cross_entropy=c), db=db, recommend=False) for c in ("te", "native", "unfused"))
    assert te.step_s < nat.step_s < unf.step_s
    logits = 4096 * 201088  # one micro-batch's logits on the one stage (tp 1), with the allocator's fragmentation
    frag = 1.0 + DEFAULT_PARAMS.fragmentation_frac
    assert nat.memory_per_gpu_bytes - te.memory_per_gpu_bytes == pytest.approx(4.0 * logits * frag, rel=1e-6)
    assert unf.memory_per_gpu_bytes == pytest.approx(nat.memory_per_gpu_bytes)


def test_the_default_is_transformer_engine_s_and_a_bad_name_is_refused():
    assert Strategy().cross_entropy == "te"
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="cross_entropy"):
        Strategy(cross_entropy="fused")


def test_the_cli_takes_the_implementation_and_refuses_an_unknown_one(capsys):
    from gpusim.cli import main

    argv = ["predict", "--model", "llama3-8b", "--gpu", "h100-sxm", "--gpus", "8", "--micro-batch", "1",
            "--global-batch", "64", "--seq-len", "4096"]
    assert main(argv + ["--cross-entropy", "unfused"]) == 0
    capsys.readouterr()
    with pytest.raises(SystemExit) as e:
        main(argv + ["--cross-entropy", "fused"])
    assert e.value.code == 2 and "invalid choice: 'fused'" in capsys.readouterr().err


def test_a_costly_cross_entropy_is_advised_with_its_own_what_if():
    """GPT-OSS-120B at pp 4 on 64 H100 (201,088 logits per token on the last stage) with Megatron-Core's native cross
    entropy: predict advises Transformer Engine's (llm-cross-entropy) at the gain its own what-if predicts; with te
    there is nothing to advise."""
    db = load()
    kw = dict(workload=get_workload("gpt-oss-120b"), gpu="h100-sxm", node="dgx-h100", gpus=64, nodes=8, pp=4, ep=8,
              kind="zero1", precision="bf16", micro_batch=1, global_batch=1280, seq_len=4096)

    def recs(**over):
        return {r["id"]: r for r in simulate(Scenario.create(**{**kw, **over}), db=db).recommendations}

    got = recs(cross_entropy="native")["llm-cross-entropy"]
    nat = simulate(Scenario.create(**kw, cross_entropy="native"), db=db, recommend=False)
    te = simulate(Scenario.create(**kw, cross_entropy="te"), db=db, recommend=False)
    assert got["gain_frac"] == pytest.approx(te.throughput_samples_per_s / nat.throughput_samples_per_s - 1, abs=1e-3)
    assert got["gain_frac"] > 0.03 and got["change"] == {"cross_entropy": "te"}
    assert "--cross-entropy te" in got["message"]
    assert "llm-cross-entropy" not in recs(cross_entropy="te")
