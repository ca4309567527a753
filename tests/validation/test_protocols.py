"""Benchmarks that did not train data-parallel (issue 18): Lambda's v1 Transformer-XL runs launch DeepLearningExamples'
train.py without ``--multi_gpu ddp``, so every process trains its own replica and exchanges no gradient. Such rows are
predicted as what ran (n independent one-GPU runs on the node) and kept out of the data-parallel scaling statistics."""

from __future__ import annotations

import csv

import numpy as np
import pytest

from gpusim.validation import INDEPENDENT_REPLICAS, _replicas_reason, run, summarize

COLUMNS = ["source_id", "kind", "model", "gpu", "n_gpus", "n_nodes", "interconnect", "precision", "per_gpu_batch",
           "global_batch", "message_bytes", "value", "unit", "notes"]
NOTE = 'system row "{n}x RTX 4090"; v1 table'


def _row(model, n, value, unit="tokens/s", batch=24, source="LAMBDA_V1"):
    return {"source_id": source, "kind": "throughput", "model": model, "gpu": "RTX 4090", "n_gpus": str(n),
            "n_nodes": "1", "interconnect": "single GPU" if n == 1 else "PCIe (inferred; card GPU)",
            "precision": "amp_fp16", "per_gpu_batch": str(batch), "global_batch": str(batch * n),
            "message_bytes": "", "value": str(value), "unit": unit,
            "notes": NOTE.format(n=n) if n > 1 else 'system row "RTX 4090"; v1 table'}


@pytest.fixture(scope="module")
def rows_csv(tmp_path_factory):
    path = tmp_path_factory.mktemp("protocols") / "m.csv"
    rows = [_row("Transformer-XL base", 1, 40427), _row("Transformer-XL base", 2, 80755),
            _row("GNMT v2", 1, 159511, batch=256), _row("GNMT v2", 2, 210089, batch=256)]
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS)
        w.writeheader()
        w.writerows(rows)
    return path


def test_the_rule_names_lambdas_transformer_xl_multi_gpu_rows_only():
    assert _replicas_reason(_row("Transformer-XL base", 2, 1.0)) == INDEPENDENT_REPLICAS[("LAMBDA_V1", "Transformer-XL base")]
    assert _replicas_reason(_row("Transformer-XL large", 8, 1.0)) is not None
    assert _replicas_reason(_row("Transformer-XL base", 1, 1.0)) is None            # one GPU: nothing to exchange
    assert _replicas_reason(_row("GNMT v2", 2, 1.0)) is None                         # DLE GNMT trains with DDP
    assert _replicas_reason(_row("Transformer-XL base", 2, 1.0, source="DLE_GNMT_PT")) is None
    assert "--multi_gpu" in INDEPENDENT_REPLICAS[("LAMBDA_V1", "Transformer-XL base")]


def test_independent_replicas_are_n_one_gpu_runs(rows_csv, db):
    res = run(rows_csv, db=db)
    one, two, gnmt1, gnmt2 = res
    assert two.replicas_reason and not one.replicas_reason and not gnmt2.replicas_reason
    # datasheet: twice the modelled one-GPU throughput of the same node, batch and precision
    assert two.predicted == pytest.approx(2.0 * one.predicted, rel=1e-12)
    # anchored on the measured one-GPU row: exactly linear, since nothing is exchanged
    assert two.anchored == pytest.approx(2.0 * 40427, rel=1e-12)
    assert any("independent replicas" in a for a in two.assumptions)
    # the data-parallel rows keep their model: GNMT over host-staged PCIe (no P2P on a 4090) loses scaling
    assert gnmt2.anchored < 0.99 * 2.0 * 159511


def test_replica_rows_leave_the_data_parallel_statistics(rows_csv, db):
    res = run(rows_csv, db=db)
    o = summarize(res)["overall"]
    assert o["multi_gpu_throughput_rows"] == 1                    # the GNMT pair only
    assert o["anchored"]["n"] == 1
    ir = o["independent_replica_rows"]
    assert ir["n"] == 1 and ir["anchored"]["n"] == 1
    assert ir["anchored"]["median_ape"] == pytest.approx(abs(2 * 40427 / 80755 - 1), rel=1e-9)
    assert ir["measured_efficiency"]["median"] == pytest.approx(80755 / (2 * 40427), rel=1e-12)
    # both Transformer-XL rows (1 and 2 GPUs) ran Lambda's configuration; the GNMT rows ran the catalogue's
    txl = [r for r in res if r.model.startswith("Transformer-XL")]
    assert all(r.workload_as_run for r in txl) and not any(r.workload_as_run for r in res if r.model == "GNMT v2")
    assert o["as_run_workload_rows"]["n"] == 2
    assert o["as_run_workload_rows"]["median_ape"] == pytest.approx(float(np.median([r.ape() for r in txl])))


def test_data_parallel_prediction_of_the_same_row_would_exchange_gradients(db):
    """What the protocol changes: as DDP, Transformer-XL base's ~190M gradients cross host-staged PCIe every step and
    the model predicts lost scaling; as replicas it predicts none (the measured 2x RTX 4090 row: 0.999 of linear)."""
    from gpusim.simulation import Scenario, simulate

    ddp = simulate(Scenario.create(model="transformer-xl-base", gpu="rtx-4090", gpus=2, precision="amp_fp16",
                                   per_gpu_batch=24, baseline_throughput=40427 / 192), db=db, recommend=False)
    assert ddp.scaling_efficiency_frac < 0.9


def test_lambdas_transformer_xl_is_predicted_with_the_configuration_it_ran():
    """Lambda's scripts pass neither --config_file nor --adaptive to DLE's train.py: a full softmax over the whole
    WikiText-103 vocabulary, tied to the embedding; the large model at --tgt_len 256 --mem_len 256. Hand count of what
    that adds to the forward pass per token: the full head is 2 d V FLOPs, where the adaptive head computed the
    head cluster (19,997 words + 3 cluster logits) for every token and each tail only for its tokens."""
    from gpusim.validation import _as_run_workload
    from gpusim.workload import get_workload

    base_cat, base_run = get_workload("transformer-xl-base"), _as_run_workload("LAMBDA_V1", "Transformer-XL base")
    spec = base_run.transformer
    assert spec.head == "lm" and spec.tied_embeddings and not spec.adaptive_cutoffs
    assert base_run.tokens_per_sample == 192 == base_cat.tokens_per_sample
    d, V, s = 512, 267735, 192
    added = (base_run.fwd_flop_per_sample - base_cat.fwd_flop_per_sample) / s
    full_head = 2.0 * d * V
    assert 0.8 * full_head < added < full_head  # the adaptive head's cost is what is left
    large_run = _as_run_workload("LAMBDA_V1", "Transformer-XL large")
    assert large_run.tokens_per_sample == 256 and large_run.transformer.mem_len == 256


def test_lambda_transformer_xl_rows_say_which_configuration_was_predicted(db):
    res = run(db=db)
    txl = [r for r in res if r.source_id == "LAMBDA_V1" and r.model.startswith("Transformer-XL")]
    assert len(txl) >= 100
    assert all(any("full (tied) softmax" in a for a in r.assumptions) for r in txl if r.predicted is not None)


def test_the_replica_rule_and_the_nccl_protocol_of_a_sweep_row_are_apart(db):
    """A bus-bandwidth row's NCCL protocol (LL, LL128, Simple) is not a benchmark that trained replicas: the two were
    once one field, which put sweep rows' protocols in the --rows note column."""
    res = run(db=db)
    sweep = [r for r in res if r.kind == "busbw" and r.predicted is not None]
    assert sweep and all(r.replicas_reason is None for r in sweep)
    assert {r.protocol for r in sweep} <= {"ll", "ll128", "simple"}
    # Lambda's multi-GPU Transformer-XL rows: 76, and 4 more that their source flags (excluded from every statistic)
    assert sum(1 for r in res if r.replicas_reason and not r.flagged) == 76


def _dle_gnmt(n, value, precision="amp_fp16"):
    return {"source_id": "DLE_GNMT_PT", "kind": "throughput", "model": "GNMT v2", "gpu": "V100 16GB SXM2",
            "n_gpus": str(n), "n_nodes": "1",
            "interconnect": "single GPU" if n == 1 else "NVLink hybrid cube-mesh (DGX-1)",
            "precision": precision, "per_gpu_batch": "128", "global_batch": str(128 * n), "message_bytes": "",
            "value": str(value), "unit": "tokens/s",
            "notes": "NVIDIA DGX-1 (8x V100 16GB); pytorch-20.06-py3; averaged over an epoch; global batch derived"}


def test_dle_gnmt_rows_run_the_benchmarks_fixed_global_batch(tmp_path, db):
    """[issue 18] DLE's GNMT benchmark holds the global batch at 1024 (README: --train-global-batch-size 1024 on 1, 4
    and 8 GPUs): at batch 128 the 1-GPU run accumulates 8 iterations per update, 4 GPUs 2, 8 GPUs none, every iteration
    all-reduced (apex DDP, no no_sync). Each row is predicted so, and the anchored prediction reads the 1-GPU
    measurement at its own 8 accumulation steps: with the update spread over fewer iterations, 8 GPUs scale worse
    than the same runs without accumulation would."""
    from gpusim.simulation import Scenario, simulate
    from gpusim.validation import AS_RUN_GLOBAL_BATCH, as_run_accum, baseline_at_accum, _scenario_kwargs
    from gpusim.validation import RowResult

    assert [as_run_accum(_dle_gnmt(n, 1.0), n, 128) for n in (1, 4, 8)] == [8, 2, 1]
    assert as_run_accum(_row("GNMT v2", 2, 1.0, batch=256), 2, 256) is None  # Lambda's GNMT: its own protocol
    kw = _scenario_kwargs(_dle_gnmt(4, 1.0), RowResult(0, "", "", "", "", 0, 0.0, ""), db)
    assert kw["accum"] == 2 and kw["sync_every_micro_batch"] is True
    assert AS_RUN_GLOBAL_BATCH[("DLE_GNMT_PT", "GNMT v2")][0][16] == 2048
    # the 1-GPU baseline at 8 accumulation steps, read at 2: the update now falls on every second iteration
    thr1 = 76438.0 / 45.0  # samples/s (GNMT_TOKENS_PER_PAIR tokens per pair)
    at2 = baseline_at_accum(kw, thr1, 8, db, None)
    assert at2 < thr1
    assert baseline_at_accum(kw, thr1, 2, db, None) == pytest.approx(thr1, rel=1e-9)  # same accumulation: as is
    one = simulate(Scenario.create(**{**kw, "gpus": 1, "nodes": 1, "accum": 8}), db=db, recommend=False)
    two = simulate(Scenario.create(**{**kw, "gpus": 1, "nodes": 1, "accum": 2}), db=db, recommend=False)
    other = [sum(r.breakdown_s[k] for k in ("optimizer_s", "overhead_s", "data_wait_s")) for r in (one, two)]
    micro = (128 * 8 / thr1 - other[0]) / 8
    assert at2 == pytest.approx(128 * 2 / (2 * micro + other[1]), rel=1e-9)
    # in the statistics: the 8-GPU row's anchored prediction loses the update's amortisation
    path = tmp_path / "m.csv"
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS)
        w.writeheader()
        w.writerows([_dle_gnmt(1, 76438), _dle_gnmt(8, 447832)])
    (r8,) = [r for r in run(path, db=db) if r.n_gpus == 8]
    assert r8.anchored is not None and r8.predicted_efficiency < 0.85
    assert any("--train-global-batch-size 1024" in a for a in r8.assumptions)


def test_a_loop_without_no_sync_all_reduces_every_micro_batch(db):
    """[issue 18] sync_every_micro_batch: DDP all-reduces in every accumulated micro-batch's backward, accum times the
    communication of the no_sync loop; the same at accum 1; and predict advises no_sync()."""
    from gpusim.simulation import Scenario, simulate

    base = dict(model="bert-large", gpu="a100-sxm4-80gb", gpus=8, per_gpu_batch=8, kind="ddp", accum=4,
                intra_topology="pcie-host")
    once = simulate(Scenario.create(**base), db=db)
    every = simulate(Scenario.create(**base, sync_every_micro_batch=True), db=db)
    assert every.breakdown_s["comm_exposed_s"] == pytest.approx(4 * once.breakdown_s["comm_exposed_s"], rel=1e-9)
    assert every.breakdown_s["compute_s"] == pytest.approx(once.breakdown_s["compute_s"], rel=1e-12)
    assert any(r["id"] == "no-sync" and r["change"] == {"sync_every_micro_batch": False}
               for r in every.recommendations)
    assert not any(r["id"] == "no-sync" for r in once.recommendations)
    one = {**base, "accum": 1}
    assert simulate(Scenario.create(**one, sync_every_micro_batch=True), db=db, recommend=False).step_s == \
        pytest.approx(simulate(Scenario.create(**one), db=db, recommend=False).step_s, rel=1e-12)


def test_dle_resnet50_amp_and_tf32_rows_step_the_optimizer_every_8_iterations_on_one_gpu():
    """[issue 18] DLE's ResNet-50 (configs.yml resnet_params_2k: optimizer_batch_size 2048 at batch 256 on DGX1V AMP and
    DGXA100 AMP/TF32; main.py batch_size_multiplier = optimizer_batch_size / (world_size x batch)): 8 accumulation
    steps at 1 GPU, 1 at 8; the V100 FP32 rows, whose config versions disagree, keep none."""
    from gpusim.validation import as_run_accum

    row = {"source_id": "DLE_RN50_PT", "model": "ResNet-50 v1.5", "precision": "amp_fp16"}
    assert [as_run_accum(row, n, 256) for n in (1, 8)] == [8, 1]
    assert as_run_accum({**row, "precision": "tf32"}, 1, 256) == 8
    assert as_run_accum({**row, "precision": "fp32"}, 1, 256) is None
    assert as_run_accum({**row, "model": "ResNet-50 v1.5 ImageNet 90 epochs"}, 1, 256) is None


def test_dle_rows_run_the_optimizer_loop_their_code_and_container_ran(db):
    """[issue 18] DLE's ResNet-50 (torch.optim.SGD with momentum, pytorch-21.03) and GNMT (torch.optim.Adam,
    pytorch-20.06) step their parameter tensors in PyTorch 1.x's loop: the rows are predicted with
    optimizer_impl="forloop" and say so; Lambda's rows keep the default."""
    from gpusim.simulation import Scenario, simulate
    from gpusim.validation import RowResult, _scenario_kwargs
    from gpusim.workload.catalogue import get_workload

    res = RowResult(0, "", "", "", "", 0, 0.0, "")
    kw = _scenario_kwargs(_dle_gnmt(8, 1.0), res, db)
    assert kw["optimizer_impl"] == "forloop" and kw["optimizer"] == "adam"
    assert any("44 parameter tensors" in a for a in res.assumptions)
    assert get_workload("gnmt").param_tensors == 44  # embedding, 9 LSTM directions x 4, attention 5, classifier 2
    rn50 = {"source_id": "DLE_RN50_PT", "kind": "throughput", "model": "ResNet-50 v1.5", "gpu": "A100 80GB SXM4",
            "n_gpus": "8", "n_nodes": "1", "interconnect": "NVSwitch (DGX A100)", "precision": "amp_fp16",
            "per_gpu_batch": "", "value": "1", "unit": "images/s", "notes": "pytorch-21.03 NGC"}
    kw_rn = _scenario_kwargs(rn50, RowResult(0, "", "", "", "", 0, 0.0, ""), db)
    assert kw_rn["optimizer_impl"] == "forloop" and kw_rn["optimizer"] == "sgd-momentum"
    lam = _scenario_kwargs(_row("GNMT v2", 2, 1.0, batch=256), RowResult(0, "", "", "", "", 0, 0.0, ""), db)
    assert "optimizer_impl" not in lam
    # the loop costs the 8-GPU GNMT run 396 launches per update more than the default few
    loop = simulate(Scenario.create(**kw), db=db, recommend=False)
    multi = simulate(Scenario.create(**{**kw, "optimizer_impl": "foreach"}), db=db, recommend=False)
    assert loop.breakdown_s["optimizer_s"] > multi.breakdown_s["optimizer_s"] + 300 * 5e-6
