"""[stop 52] The per-expert host bookkeeping of an eager MoE layer (gpusim.model.experts.expert_items_cpu_s): the items a
launch count does not see (Transformer Engine GroupedLinear's per-expert views, quantizer and weight lookups,
saved tensors, weight-gradient handling and Megatron-Core's per-parameter gradient hooks), at a measured per-item
CPU time and the host's Python-level multiplier (Grace 1.135x an x86 host, not a full launch's 2.75x)."""

from __future__ import annotations

import pytest

from gpusim.model import experts as E
from gpusim.model import graphs as G
from gpusim.params import DEFAULT_PARAMS
from gpusim.simulation import Scenario, simulate


def test_closed_form_hand_worked():
    f, b = E.expert_items_cpu_s(16, 2e-6, 1.0)
    assert float(f) == pytest.approx(26 * 16 * 2e-6) and float(f) == pytest.approx(832e-6)
    assert float(b) == pytest.approx(38 * 16 * 2e-6) and float(b) == pytest.approx(1216e-6)
    fg, bg = E.expert_items_cpu_s(16, 2e-6, 1.135)
    assert float(fg) == pytest.approx(944.32e-6) and float(bg) == pytest.approx(1380.16e-6)
    # captured by a sync-free graph scope, or run as the fused grouped MLP (its own measured CPU time): none
    for scopes in (("moe",), ("full_iteration",)):
        code = G.scope_mask(scopes)
        assert E.expert_items_cpu_s(16, 2e-6, 1.0, cuda_graphs=code) == (0.0, 0.0)
    assert E.expert_items_cpu_s(16, 2e-6, 1.0, fused=True) == (0.0, 0.0)
    # the router and preprocessing scopes leave the experts eager: all of it stays
    partial = G.scope_mask(("attn", "moe_router", "moe_preprocess"))
    assert float(E.expert_items_cpu_s(16, 2e-6, 1.0, cuda_graphs=partial)[0]) == pytest.approx(832e-6)


def test_the_layer_cpu_carries_the_items_at_the_hosts_python_multiplier(db):
    """Qwen3-30B-A3B (every layer MoE, 128 experts) at EP 8: 16 local experts. The layer's forward CPU grows by exactly
    26 x 16 x 2 us on an x86 B200 host and by that x 1.135 on a Grace GB200 (hwdb host_python_mult), not by the
    2.751 of a full launch."""
    gb = db.gpu("gb200")
    assert gb.host_python_mult == pytest.approx(1.135) and gb.host_python_mult < gb.host_cpu_dispatch_mult
    assert db.gpu("b200").host_python_mult is None
    none = DEFAULT_PARAMS.model_copy(update={"moe_expert_item_cpu_s": 0.0})
    for gpu, nodes, mult in (("b200", 1, 1.0), ("gb200", 2, 1.135)):
        kw = dict(model="qwen3-30b-a3b", gpu=gpu, gpus=8, nodes=nodes, ep=8, micro_batch=1, global_batch=64,
                  precision="bf16", kind="zero1", seq_len=4096)
        with_items = simulate(Scenario.create(**kw), db=db, recommend=False).layer_s
        without = simulate(Scenario.create(**kw), db=db, params=none, recommend=False).layer_s
        assert with_items["cpu_fwd_s"] - without["cpu_fwd_s"] == pytest.approx(26 * 16 * 2e-6 * mult, rel=1e-9)
        assert with_items["cpu_bwd_s"] - without["cpu_bwd_s"] == pytest.approx(38 * 16 * 2e-6 * mult, rel=1e-9)
