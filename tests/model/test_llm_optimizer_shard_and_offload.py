"""[issue 17] The optimizer of an LLM layout: the routed experts' shard is the expert-data-parallel group's (Megatron-Core's
distributed optimizer keeps the experts in their own buffers, sharded over ``dp x tp / (ep x etp)`` ranks, as the memory
model counts them), so the step's time follows the same shard; and optimizer offload (``cpu_offload``, Megatron-Core
``--optimizer-cpu-offload``) takes the master weights and Adam states off the GPU on the layout path too."""

from __future__ import annotations

import pytest

from gpusim.scenario import Scenario
from gpusim.simulation import simulate

Q30 = dict(model="qwen3-30b-a3b", gpu="b200", gpus=8, micro_batch=1, global_batch=64, seq_len=4096,
           precision="bf16", kind="zero1")


def test_the_experts_optimizer_shard_is_the_expert_data_parallel_groups():
    """On 8 GPUs, ep 8 leaves each rank all the states of its 16 local experts (expert dp 1), ep 2 shards its 64
    local experts' states over an expert dp of 4: the same 16 experts' worth per rank either way, so the same step
    (the dense part is sharded over dp 8 in both). Counting the experts over dp, as before, gave the ep 8 rank a
    quarter of the ep 2 rank's expert states to step."""
    ep8 = simulate(Scenario.create(**Q30, ep=8), recommend=False)
    ep2 = simulate(Scenario.create(**Q30, ep=2), recommend=False)
    assert ep8.breakdown_s["optimizer_s"] == pytest.approx(ep2.breakdown_s["optimizer_s"], rel=0.01)
    assert ep8.memory_breakdown_bytes["optimizer"] == pytest.approx(ep2.memory_breakdown_bytes["optimizer"], rel=0.01)


def test_optimizer_offload_frees_the_states_on_the_layout_path():
    on = simulate(Scenario.create(**Q30, ep=8, cpu_offload=True), recommend=False)
    off = simulate(Scenario.create(**Q30, ep=8), recommend=False)
    assert off.memory_breakdown_bytes["optimizer"] > 0.0 and on.memory_breakdown_bytes["optimizer"] == 0.0
    for part in ("weights", "gradients", "activations"):  # the main gradients stay for the bucketed reduction
        assert on.memory_breakdown_bytes[part] == pytest.approx(off.memory_breakdown_bytes[part])
    assert on.memory_per_gpu_bytes == pytest.approx(off.memory_per_gpu_bytes - off.memory_breakdown_bytes["optimizer"])
    assert on.breakdown_s["optimizer_s"] > off.breakdown_s["optimizer_s"]  # the CPU's step and the copies
