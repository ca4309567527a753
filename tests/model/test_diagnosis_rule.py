"""The diagnosis follows from the breakdown by one rule, and every recommendation agrees with it."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hs

from gpusim.model.step import BOTTLENECK_SHARE_FRAC
from gpusim.simulation import Scenario, simulate

_LOSSES = (("comm_exposed_s", "communication"), ("data_wait_s", "data-loading"), ("optimizer_s", "optimizer"),
           ("sync_s", "stragglers"), ("overhead_s", "overhead"))


def expected_bottleneck(res) -> set[str]:
    if not res.fits_in_memory:
        return {"memory"}
    b = res.breakdown_s
    part, name = max(((b[k], n) for k, n in _LOSSES), key=lambda x: x[0])
    if part >= BOTTLENECK_SHARE_FRAC * res.step_s:
        return {name}
    return {"compute", "cpu-dispatch"}


scenarios = hs.fixed_dictionaries({
    "model": hs.sampled_from(["resnet50", "bert-large", "gpt2-xl", "llama2-7b"]),
    "gpu": hs.sampled_from(["h100-sxm", "a100-sxm4-80gb", "rtx-4090", "l40s", "v100-sxm2-16gb"]),
    "nodes": hs.sampled_from([1, 1, 2, 4]),
    "per_node": hs.sampled_from([1, 2, 4, 8]),
    "per_gpu_batch": hs.sampled_from([1, 4, 16, 64, 256]),
    "kind": hs.sampled_from(["ddp", "ddp", "fsdp-full", "zero2", "dp"]),
    "inter": hs.sampled_from([None, "eth-25g", "ib-ndr-400"]),
    "slowest_gpu_speed_frac": hs.sampled_from([1.0, 1.0, 0.5]),
    "num_workers": hs.sampled_from([None, 1, 8]),
})


@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(d=scenarios)
def test_bottleneck_and_advice_are_consistent(db, d):
    per_node = d.pop("per_node")
    if d["kind"] == "dp" and d["nodes"] > 1:
        d["kind"] = "ddp"
    if d["nodes"] == 1:
        d.pop("inter")
    kw = {k: v for k, v in d.items() if v is not None}
    kw["gpus"] = per_node * d["nodes"]
    kw["precision"] = "amp_fp16" if d["gpu"] == "v100-sxm2-16gb" else "amp_bf16"
    if d["model"] in ("bert-large", "gpt2-xl", "llama2-7b"):
        kw["seq_len"] = 512
    try:
        scn = Scenario.create(**kw)
        res = simulate(scn, db=db)
    except Exception as e:  # an impossible combination (e.g. a node that does not hold that many GPUs)
        from gpusim.errors import GpusimError

        assert isinstance(e, GpusimError), e
        return
    # 1. one rule
    assert res.bottleneck in expected_bottleneck(res), (res.bottleneck, res.breakdown_s)
    recs = res.recommendations
    # 2. no speed advice for a configuration that does not fit
    if not res.fits_in_memory:
        assert [r["id"] for r in recs] == ["fit-memory"], [r["id"] for r in recs]
    for r in recs:
        # 3. a recommendation that calls something dominant or the bottleneck names the bottleneck
        if "dominates" in r["message"] or "is the bottleneck" in r["message"] or "The bottleneck is" in r["message"]:
            assert r["addresses"] == res.bottleneck, (r["id"], r["message"], res.bottleneck)
        # 4. blaming launch overheads is for compute-bound steps only
        if "launch overheads" in r["message"]:
            assert res.bottleneck in ("compute", "cpu-dispatch"), (r["message"], res.bottleneck)
        # 5. no x1024: learning-rate advice for sequence models keeps the recipe's batch
        if r["id"] == "learning-rate" and kw.get("seq_len"):
            assert "linearly" not in r["message"]
    # 6. a proposed batch stays within what published recipes train at
    for r in recs:
        if r["id"] == "larger-batch":
            assert r["change"]["per_gpu_batch"] * res.n_gpus <= (16 * 2**20 // 512 if kw.get("seq_len") else 8192)


def test_the_issue_example_is_labelled_communication(db):
    """ResNet-50 on 4 nodes over 25 GbE: exposed communication >= 25% of the step is the bottleneck."""
    res = simulate(Scenario.create(model="resnet50", gpu="v100-sxm2-16gb", gpus=32, nodes=4, inter="eth-25g",
                                   per_gpu_batch=64, precision="amp_fp16"), db=db)
    share = res.breakdown_s["comm_exposed_s"] / res.step_s
    assert (res.bottleneck == "communication") == (share >= BOTTLENECK_SHARE_FRAC)
    if res.bottleneck == "communication":
        assert not any("launch overheads" in r["message"] for r in res.recommendations)
