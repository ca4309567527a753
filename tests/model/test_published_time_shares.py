"""[issue 17] The share of a DeepSeek-V3 step that gpusim gives the expert-parallel all-to-all, against the shares the
Megatron-Core MoE paper states (NVIDIA, arXiv:2603.07685 v2, section 4.2): "When EP stays within the NVLink domain
(e.g., DeepSeek-V3 with EP64 on GB200 NVL72), the overhead is around 20%; when EP crosses node boundaries (e.g.,
DeepSeek-V3 with EP64 on H100 across nodes), it rises to 40-60%", and after DeepEP it "can still account for 30-40%
of iteration time" (section 4.2.3). The layouts are the paper's (Table 17: 1024 H100 at tp 2, pp 8, vp 4, ep 64; 256
GB200 at tp 1, pp 4, vp 4, ep 64; micro-batch 1, global batch 8192, 4096 tokens), without EP overlap or CUDA graphs
(the shares describe the exchange before it is hidden). "Around 20%" is read as 20% +- a third. Nothing in the model
was set from these figures; they were checked after the dispatcher's per-rank rows were added.

The same paper (section 1.2) on one MoE layer: "Token routing and permutation ... add ~9% to layer execution time even
after optimization"; gpusim's routing (router, the tokens' permutation to and from the experts, the dispatcher's small
kernels: ``layer_s["routing_*_s"]``) against its layer's GPU time, at the same layouts with the flex dispatcher the
paper's recipes use; "~9%" read as 9% +- a third. Checked after the routing terms were modelled, with nothing set
from it."""

from __future__ import annotations

import pytest

from gpusim.simulation import Scenario, simulate

H100 = dict(model="deepseek-v3", gpu="h100-sxm", gpus=1024, nodes=128, tp=2, pp=8, vp=4, ep=64, micro_batch=1,
            global_batch=8192, seq_len=4096, precision="fp8", kind="zero1", uneven_pp=True)
GB200 = dict(model="deepseek-v3", gpu="gb200", gpus=256, nodes=64, tp=1, pp=4, vp=4, ep=64, micro_batch=1, global_batch=8192,
             seq_len=4096, precision="mxfp8", kind="zero1", uneven_pp=True)


def _share(**kw) -> float:
    res = simulate(Scenario.create(**kw), recommend=False)
    return res.breakdown_s["ep_comm_exposed_s"] / res.step_s


@pytest.mark.parametrize("kw, low, high", [
    (dict(H100), 0.40, 0.60),                                  # all-to-all across 8 nodes: "40-60%"
    (dict(H100, moe_dispatcher="deepep"), 0.30, 0.40),         # DeepEP: "30-40%"
    (dict(GB200), 0.20 * 2 / 3, 0.20 * 4 / 3),                 # EP inside the NVL72 domain: "around 20%"
])
def test_the_all_to_all_share_of_a_deepseek_v3_step(kw, low, high):
    assert low <= _share(**kw) <= high


def _routing_share(**kw) -> float:
    d = simulate(Scenario.create(**kw), recommend=False).layer_s
    return (d["routing_fwd_s"] + d["routing_bwd_s"]) / (d["gpu_fwd_s"] + d["gpu_bwd_s"])


@pytest.mark.parametrize("kw", [dict(H100, moe_dispatcher="deepep"), dict(GB200, moe_dispatcher="deepep")])
def test_the_routing_and_permutation_share_of_a_deepseek_v3_layer(kw):
    # (averaged over the layers, 58 of DeepSeek-V3's 61 MoE: within 5% of an MoE layer's own share)
    assert 0.09 * 2 / 3 <= _routing_share(**kw) <= 0.09 * 4 / 3
    # the all-to-all dispatcher permutes every token's k copies and sorts the chunks by expert: more than the flex
    # dispatcher's one row per rank reached
    assert _routing_share(**{**kw, "moe_dispatcher": "alltoall"}) > _routing_share(**kw)
