"""[issue 17] `predict` advises FP8 training where it pays off: the same layout with Transformer Engine's FP8
(per-tensor delayed scaling on Hopper and Ada, MXFP8 on Blackwell), its gain the model's own, said only where the
GPU has FP8 tensor cores, the layout fits and the gain is worth it."""

from __future__ import annotations

import pytest

from gpusim.diagnose import FP8_GAIN_FRAC
from gpusim.simulation import Scenario, simulate

H100 = dict(model="llama3-70b", gpu="h100-sxm", gpus=64, nodes=8, tp=8, pp=4, vp=5, micro_batch=1, global_batch=256,
            seq_len=8192, precision="bf16", kind="zero1")
GB200 = dict(H100, gpu="gb200", nodes=16, tp=2)


def _recs(**kw) -> dict:
    return {r["id"]: r for r in simulate(Scenario.create(**kw), recommend=True).recommendations}


@pytest.mark.parametrize("kw, change", [
    (H100, {"precision": "fp8"}),                             # Hopper: per-tensor (delayed) scaling
    (GB200, {"precision": "mxfp8"}),                          # Blackwell: 1x32 block scales
])
def test_the_gain_is_the_fp8_layouts_own(kw, change):
    rec = _recs(**kw)["llm-fp8"]
    assert rec["change"] == change
    base = simulate(Scenario.create(**kw), recommend=False).throughput_samples_per_s
    fp8 = simulate(Scenario.create(**{**kw, **change}), recommend=False).throughput_samples_per_s
    assert rec["gain_frac"] == pytest.approx(fp8 / base - 1.0, abs=1e-4)
    assert rec["gain_frac"] >= FP8_GAIN_FRAC
    assert ("--precision mxfp8" if change["precision"] == "mxfp8" else "--precision fp8:") in rec["message"]


def test_no_fp8_advice_without_fp8_tensor_cores_or_when_already_fp8():
    assert "llm-fp8" not in _recs(**dict(H100, gpu="a100-sxm4-80gb", tp=8, pp=8, vp=5))
    assert "llm-fp8" not in _recs(**dict(H100, precision="fp8"))
    assert "llm-fp8" not in _recs(**dict(GB200, precision="mxfp8"))
