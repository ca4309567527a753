"""[issue 17] An MoE model predicted on the data-parallel path is told what the layout path, where Megatron-Core's
expert layer is modelled, predicts for the same configuration (diagnose's ``moe-layout``)."""

from __future__ import annotations

import pytest

import gpusim

JOB = dict(model="qwen3-30b-a3b", gpu="h100-sxm", gpus=8, micro_batch=1, global_batch=64, seq_len=4096)


def _advice(result, rid):
    return {r["id"]: r for r in result.to_dict()["recommendations"]}.get(rid)


def test_the_data_parallel_path_names_the_layout_paths_prediction():
    dp = gpusim.predict(**JOB, strategy="zero3", checkpointing=True)
    assert dp.fits_in_memory and not dp.to_dict().get("memory_per_stage_bytes")  # (the data-parallel path)
    adv = _advice(dp, "moe-layout")
    assert adv is not None and adv["change"] == {"recompute": "full"}
    layout = gpusim.predict(**JOB, strategy="zero3", recompute="full")
    assert layout.throughput_samples_per_s / dp.throughput_samples_per_s - 1.0 == pytest.approx(adv["gain_frac"],
                                                                                                abs=1e-4)
    assert "--recompute full" in adv["message"]


def test_no_such_advice_where_it_does_not_apply():
    assert _advice(gpusim.predict(**JOB, strategy="zero3", recompute="full"), "moe-layout") is None  # layout path
    dense = gpusim.predict(**{**JOB, "model": "llama3-8b"}, strategy="zero3", checkpointing=True)
    assert _advice(dense, "moe-layout") is None
