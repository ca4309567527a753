"""Validation of the model against published measurements (``shared/validation/measurements.csv``).

Each row of the CSV is mapped to a gpusim scenario (workload, GPU, fabric, precision, batch) by the
explicit tables below; rows that cannot be mapped are counted and listed with the reason, never dropped
silently. For throughput rows two predictions are made:

- **datasheet**: from hwdb figures and the default :class:`~gpusim.params.ModelParams` alone;
- **anchored**: multi-GPU rows with a measured one-GPU row of the same system, model, precision and
  per-GPU batch use that measurement as ``baseline_throughput`` (the model predicts only the scaling).

Beside the anchored error, the report gives the error of plain linear scaling (N x the one-GPU row), so
anyone can see what the model adds, and the error on rows that lose scaling (measured efficiency < 0.9),
where it matters (see the README of the validation folder).

Rows whose benchmark protocol did not train data-parallel (:data:`INDEPENDENT_REPLICAS`: every process trained its
own replica and exchanged no gradient) are predicted as what ran, ``n`` independent one-GPU runs on the same node,
and reported apart from the data-parallel scaling statistics, which they cannot test.

Rows whose figures were used to set a default parameter (``busbw_eff_frac`` for NVLink bridges and
NVSwitch, ``nvls_gain_frac``, ``matmul_eff_frac``; see :data:`gpusim.params.PROVENANCE`) are marked
``used_for_defaults`` and reported apart: they cannot validate the model. Bus-bandwidth rows are summarised
per source and per size decade over sizes of at least 32 KiB (:func:`busbw_summary`).
"""

from __future__ import annotations

import csv
import dataclasses
import functools
import math
import os
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from gpusim.errors import GpusimError

ENV_VAR = "GPUSIM_VALIDATION_CSV"

#: measurement ``model`` column -> (workload id, sequence length or None)
MODEL_MAP: dict[str, tuple[str, int | None]] = {
    "ResNet-50 v1.5": ("resnet50", None),
    "ResNet-50 v1.5 ImageNet 90 epochs": ("resnet50", None),
    "SSD300": ("ssd300", None),
    "BERT-base SQuAD fine-tune": ("bert-base", 384),
    "BERT-large SQuAD fine-tune": ("bert-large", 384),
    "GNMT v2": ("gnmt", None),
    "Transformer-XL base": ("transformer-xl-base", None),
    "Transformer-XL large": ("transformer-xl-large", None),
    "Inception V3": ("inception-v3", None),
    "ResNet-101": ("resnet101", None),
    "VGG-16": ("vgg16", None),
}

#: measurement ``gpu`` column -> hwdb GPU id
GPU_MAP: dict[str, str] = {
    "H100 80GB SXM5": "h100-sxm", "H100 80GB HBM3 (SXM, DGX H100)": "h100-sxm", "H100 80GB SXM": "h100-sxm",
    "NVIDIA H100 SXM": "h100-sxm", "H100 80GB PCIe Gen5": "h100-pcie", "H100 80GB PCIe": "h100-pcie",
    "A100 80GB SXM4": "a100-sxm4-80gb", "A100 80GB SXM4 (Selene DGX A100)": "a100-sxm4-80gb",
    "A100 80GB SXM4 (Selene)": "a100-sxm4-80gb", "NVIDIA A100 SXM": "a100-sxm4-80gb",
    "A100 40GB SXM4": "a100-sxm4-40gb", "A100 80GB PCIe": "a100-pcie-80gb", "A100 40GB PCIe": "a100-pcie-40gb",
    "NVIDIA A100 PCIe": "a100-pcie-80gb",
    # Lambda Cloud's V100 16GB: the form factor is not stated; its 8-GPU servers used SXM2 boards (see README)
    "V100 16GB": "v100-sxm2-16gb", "V100 16GB SXM2": "v100-sxm2-16gb", "V100 32GB SXM2": "v100-sxm2-32gb",
    "V100 32GB SXM3 (DGX-2H)": "v100-sxm3-32gb",
    "RTX 6000 Ada": "rtx-6000-ada", "RTX 3090": "rtx-3090", "RTX A6000": "rtx-a6000", "RTX 4090": "rtx-4090",
    "Quadro RTX 8000": "quadro-rtx-8000", "A10": "a10", "RTX 2080 Ti": "rtx-2080-ti",
    'Pascal (P100 presumed; docs say "Pascal GPUs")': "p100-pcie-16gb",
    "NVIDIA H200 SXM": "h200-sxm", "NVIDIA GH200 SXM": "gh200", "NVIDIA B200 SXM": "b200",
    "NVIDIA B300 SXM": "b300", "NVIDIA GB200 SXM": "gb200", "AMD MI300X": "mi300x", "AMD MI325X": "mi325x",
}

#: measurement ``interconnect`` column -> scenario fields (None: the GPU's usual node from hwdb)
FABRIC_MAP: dict[str, dict] = {
    "single GPU": {},
    "NVLink/NVSwitch (SXM HGX baseboard; inferred from name, not stated)": {},
    "PCIe (inferred; card GPU)": {},
    "PCIe (from name; NVLink bridges not stated)": {},
    "unspecified": {},
    "NVLink hybrid cube-mesh (DGX-1)": {"node": "dgx-1-v100"},
    "NVSwitch (DGX-2H)": {"node": "dgx-2h"},
    "NVSwitch (DGX A100)": {"node": "dgx-a100-80gb"},
    "NVSwitch NVLink4 (single node; NVLS likely active at large sizes)": {"node": "dgx-h100"},
    "NVSwitch NVLink4 with NVLink SHARP (NVLS)": {"node": "dgx-h100"},
    "NVSwitch NVLink4 without NVLS (NCCL_ALGO=RING or non-allreduce collectives)": {"node": "dgx-h100",
                                                                                   "algorithm": "ring"},
    "NVLink bridge (2-way) per issue title": {"intra": "nvlink2-bridge"},
    "NVLink bridge between 2 PCIe cards (P2P/direct pointer per NCCL log)": {"intra": "nvlink4-bridge"},
    "4 GPUs/server; RoCE-capable 25 Gbit/s network": {"inter": "eth-25g"},
}

#: [issue 18] Lambda's v1 benchmark (lambdal/deeplearning-benchmark) launches DeepLearningExamples' Transformer-XL with
#: ``python -m torch.distributed.launch --nproc_per_node=${NUM_GPU} train.py`` and the PARAMS of
#: ``pytorch/scripts/config_v1/config_pytorch_*.sh`` (e.g. config_pytorch_24GB.sh @188936494f1fd432758a4a462b94d0a805999c85,
#: config_pytorch_80GB.sh @357c49a7cc7eaff2c74614f7dbc4a72800ba350f; the launcher in benchmark_pytorch.sh
#: @f83874d86ed4aa636705641661509f480e8f653e), none of which passes ``--multi_gpu``; DLE's
#: ``PyTorch/LanguageModeling/Transformer-XL/pytorch/train.py`` (@09a17a0f3367ed0a5d87a4da12f3fb3a24cbb249) wraps the
#: model in DistributedDataParallel only ``if args.multi_gpu == 'ddp'`` (default None) and otherwise trains
#: ``para_model = model``: each process trains its own replica and no gradient is exchanged (the throughput it logs is
#: summed over ranks). These rows measure N independent one-GPU runs on one node, not data-parallel scaling.
_TXL_NO_DDP = ("independent replicas: Lambda's v1 benchmark runs DeepLearningExamples' Transformer-XL train.py under "
               "torch.distributed.launch without --multi_gpu ddp, so every process trains its own replica and no "
               "gradient is exchanged (lambdal/deeplearning-benchmark pytorch/scripts/config_v1; DLE train.py)")
#: (source_id, model column) -> why the multi-GPU rows of that benchmark trained independent replicas
INDEPENDENT_REPLICAS: dict[tuple[str, str], str] = {
    ("LAMBDA_V1", "Transformer-XL base"): _TXL_NO_DDP,
    ("LAMBDA_V1", "Transformer-XL large"): _TXL_NO_DDP,
}

#: [issue 18] Lambda v1 systems whose multi-GPU runs went with ``NCCL_P2P_DISABLE=1`` (NCCL's SHM transport: every
#: gradient exchange staged through host memory, NVLink unused). Lambda's ``pytorch/scripts/compile_results_pytorch.py``
#: (lambdal/deeplearning-benchmark @08d77c41c42f48de5598b48c77f3fbd1b6252348, ``gather_bs``) reads a result folder's
#: batch sizes only from its ``.para`` files, and the ``pytorch/pytorch-train-bs-fp32.csv`` it wrote at that commit
#: holds batch sizes for exactly these multi-GPU systems (its ``list_system_multiple``), so their folders held the
#: ``benchmark.para`` that only the later ``pytorch/scripts/benchmark_pytorch.sh`` family writes; that family
#: (@50f94679, @0a684b62) runs ``export NCCL_P2P_DISABLE=1`` before every task, the earlier script (@f83874d8) does
#: neither. Dated raw logs agree: the same GNMT FP32 job on 2x A100 80GB SXM4 with the same batches
#: (``2xA100_80GB_SXM4/PyTorch_gnmt_FP32/26-11-2021_11-13-02.txt`` vs ``2xA100_80GB_SXM4_v1/.../19-11-2022_19-34-28.txt``)
#: pays ~0.2 s more per iteration in the v1 run, and 2x RTX A6000 jumps between its 16-10-2022 and 15-12-2022 logs.
#: The H100 SXM5 systems were added to the table later by another script version and are not listed (their runs are
#: not known to have disabled it). "2x Ada A6000" of that list does not appear under that name in the rows; the rows'
#: "2x/4x/8x RTX 6000 Ada" systems may be it renamed, but no source read here says so, so they keep their fabric.
NCCL_P2P_DISABLED_SYSTEMS: frozenset[str] = frozenset({
    "LambdaCloud 2x V100 16GB", "2x RTX A6000", "2x RTX 3090", "2x RTX 4090", "2x A100 80GB PCIe", "2x A100 80GB SXM4",
    "2x H100 80GB PCIe Gen5", "LambdaCloud 4xV100 16GB", "4x A100 80GB SXM4", "4x H100 80GB PCIe Gen5",
    "LambdaCloud 8xV100 16GB", "8x A100 80GB SXM4", "8x H100 80GB PCIe Gen5"})
_P2P_DISABLED_WHY = ("NCCL_P2P_DISABLE=1 as Lambda's v1 harness ran it (gpusim.validation.NCCL_P2P_DISABLED_SYSTEMS): "
                     "gradients staged through host memory")


def _system_row(notes: str) -> str:
    """Lambda's system row as written in a row's notes ('2x A100 80GB SXM4'), or ''."""
    m = re.search(r'system row "([^"]+)"', notes or "")
    return m.group(1) if m else ""


#: [issue 18] the workload as a benchmark ran it, where that differs from the catalogue entry: (source_id, model column)
#: -> (catalogue id, TransformerSpec changes, why). Lambda's v1 runs of DeepLearningExamples' Transformer-XL pass no
#: ``--config_file`` (so none of DLE's wt103_base/large.yaml) and no ``--adaptive``: train.py's defaults then build
#: a full softmax over the 267,735-word WikiText-103 vocabulary, tied to the input embedding (``cutoffs = []``, div_val
#: 1), where the catalogue entries (DLE's yaml configurations) use the adaptive softmax; Lambda's large model is run
#: with ``--tgt_len 256 --mem_len 256`` (the yaml's 384 / 384). Sources: lambdal/deeplearning-benchmark
#: pytorch/scripts/config_v1/config_pytorch_24GB.sh @188936494f1fd432758a4a462b94d0a805999c85 and
#: config_pytorch_80GB.sh @357c49a7cc7eaff2c74614f7dbc4a72800ba350f (PyTorch_transformerxl{base,large}_FP{16,32}_PARAMS);
#: NVIDIA/DeepLearningExamples PyTorch/LanguageModeling/Transformer-XL/pytorch/train.py
#: @09a17a0f3367ed0a5d87a4da12f3fb3a24cbb249 (``--adaptive`` store_true, ``cutoffs = []`` unless it is set).
_FULL_SOFTMAX = {"head": "lm", "tied_embeddings": True, "adaptive_cutoffs": (), "adaptive_cluster_frac": (),
                 "adaptive_div_val": 1}
_LAMBDA_TXL = ("as Lambda's v1 benchmark ran it: DLE train.py's defaults, a full (tied) softmax over the 267,735-word "
               "vocabulary instead of the adaptive softmax of DLE's yaml configurations")
AS_RUN_WORKLOADS: dict[tuple[str, str], tuple[str, dict, str]] = {
    ("LAMBDA_V1", "Transformer-XL base"): ("transformer-xl-base", _FULL_SOFTMAX, _LAMBDA_TXL),
    ("LAMBDA_V1", "Transformer-XL large"): ("transformer-xl-large",
                                            {**_FULL_SOFTMAX, "seq_len": 256, "mem_len": 256},
                                            _LAMBDA_TXL + "; --tgt_len 256 --mem_len 256"),
}

#: [issue 18] benchmarks that hold the global batch fixed while the GPU count changes, so the per-GPU batch accumulates
#: gradients over ``global / (batch x gpus)`` iterations and the optimizer runs once per that many (the table's form is
#: on :data:`AS_RUN_GLOBAL_BATCH` below). NVIDIA DLE GNMT v2 (PyTorch/Translation/GNMT README, the 20.06
#: "Training performance benchmark": ``train.py --seed 2 --train-global-batch-size 1024 --epochs 1 --math fp16`` on
#: 1, 4 or 8 GPUs, ``--train-global-batch-size 2048`` on 16; train.py ``set_iter_size``: ``train_iter_size =
#: global_bs // (bs * world_size)``; seq2seq/train/trainer.py: ``update = True`` only ``if i % self.iter_size ==
#: self.iter_size - 1``, and the optimizer (clipping, Adam, the AMP master-weight copy) runs only on updates, while
#: every iteration's tokens count in the throughput). At batch 128 the 1-GPU run accumulates 8 iterations per update,
#: 4 GPUs 2, 8 and 16 GPUs none: the update that 1 GPU spreads over 8 iterations, 8 GPUs pay every iteration. The
#: same trainer (@0053b4b8) wraps the model in ``apex.parallel.DistributedDataParallel`` and runs every iteration's
#: backward through it, with no ``no_sync`` / ``disable_allreduce``: the gradients are all-reduced every iteration
#: (Strategy ``sync_every_micro_batch``).
_DLE_GNMT_GLOBAL = ("as DLE's GNMT benchmark ran it: --train-global-batch-size 1024 (2048 on 16 GPUs) at batch 128 per "
                    "GPU, so gradients accumulate over 1024 / (128 x GPUs) iterations, all-reduced in every one of "
                    "them (apex DDP, no no_sync), and the optimizer runs once per that many (README 20.06; train.py "
                    "set_iter_size; seq2seq/train/trainer.py)")
#: NVIDIA DLE ResNet-50 v1.5 (PyTorch/Classification/ConvNets): configs.yml gives resnet50 on DGX1V AMP and on
#: DGXA100 AMP and TF32 ``resnet_params_2k`` (``optimizer_batch_size: 2048``) with ``batch_size: 256`` (@097c7ff9, and
#: the same in the earlier version a reader found at @d58ccd79); main.py: ``tbs = args.world_size * args.batch_size``,
#: ``batch_size_multiplier = int(args.optimizer_batch_size / tbs)``; image_classification/training.py:
#: ``optimizer_step = ((i + 1) % batch_size_multiplier) == 0`` gates the optimizer and GradScaler step, while
#: ``train.total_ips`` counts every iteration. So one GPU steps the optimizer every 8 iterations, eight GPUs every one.
#: (DGX1V FP32 is left out: the two versions give it 896 or 2048 over its batch of 112.)
_DLE_RN50_GLOBAL = ("as DLE's ResNet-50 benchmark ran it: optimizer_batch_size 2048 (configs.yml resnet_params_2k) at "
                    "batch 256, so main.py's batch_size_multiplier accumulates 2048 / (256 x GPUs) iterations per "
                    "optimizer step")
#: (source_id, model column) -> (global batch at each GPU count, Strategy changes, why, precisions it holds for or None)
AS_RUN_GLOBAL_BATCH: dict[tuple[str, str], tuple[dict[int, int], dict, str, tuple[str, ...] | None]] = {
    ("DLE_GNMT_PT", "GNMT v2"): ({1: 1024, 4: 1024, 8: 1024, 16: 2048}, {"sync_every_micro_batch": True},
                                 _DLE_GNMT_GLOBAL, None),
    ("DLE_RN50_PT", "ResNet-50 v1.5"): ({1: 2048, 8: 2048}, {"sync_every_micro_batch": True}, _DLE_RN50_GLOBAL,
                                        ("amp_fp16", "tf32")),
}

#: [issue 18] the optimizer a benchmark's own code ran, where the rows name the code and its container: NVIDIA DLE
#: ResNet-50 v1.5 builds ``torch.optim.SGD`` with momentum and weight decay (image_classification/optimizers.py
#: ``get_sgd_optimizer``, both stored versions, @4f2c6922 and the one that imports ``from torch import optim``), and
#: every DLE_RN50_PT row ran the pytorch-21.03 NGC container (PyTorch 1.9), whose SGD steps the parameter tensors one
#: by one (the multi-tensor ``foreach`` path became the CUDA default in PyTorch 2.0) and whose ``zero_grad`` zeroes
#: each gradient (``set_to_none=False``): Strategy ``optimizer_impl="forloop"``. Not modelled: the loop skips the
#: weight-decay add on the 106 batch-norm tensors (``bn_weight_decay`` off), 699 kernels a step where gpusim counts 805.
#: DLE GNMT v2 (train.py @0053b4b8: ``--optimizer`` default ``Adam``, ``opt_config = {'optimizer', 'lr'}``, so no
#: weight decay; seq2seq/train/trainer.py: ``torch.optim.__dict__[opt_name](params, ...)``, over the model's 44
#: parameter tensors or, in AMP, apex amp O2's per-tensor fp32 master copies) in the pytorch-20.06 container (PyTorch
#: 1.6): the same loop. Not modelled: ``clip_grad_norm_`` (``--grad-clip 5``) adds a norm per tensor every update.
AS_RUN_OPTIMIZER: dict[tuple[str, str], tuple[dict, str]] = {
    ("DLE_GNMT_PT", "GNMT v2"): (
        {"optimizer": "adam", "optimizer_impl": "forloop"},
        "as DLE's GNMT code ran it: torch.optim.Adam (train.py --optimizer Adam, trainer.py) in PyTorch 1.6 "
        "(pytorch-20.06), which loops over the 44 parameter tensors (--optimizer-impl forloop)"),
    ("DLE_RN50_PT", "ResNet-50 v1.5"): (
        {"optimizer": "sgd-momentum", "optimizer_impl": "forloop"},
        "as DLE's ResNet-50 code ran it: torch.optim.SGD with momentum (optimizers.py get_sgd_optimizer) in "
        "PyTorch 1.9 (pytorch-21.03), which loops over the 161 parameter tensors (--optimizer-impl forloop)"),
}

#: tf_cnn_benchmarks' default per-GPU batch for the Horovod 2017 rows (not stated in the source)
HOROVOD_BATCH = {"inception-v3": 64, "resnet101": 64, "vgg16": 32}
#: ImageNet-1k training set (Russakovsky et al., IJCV 2015) for the time-to-train rows
IMAGENET_TRAIN_SAMPLES = 1_281_167
DLE_RN50_BATCH = 256  # per GPU; the DLE table does not state it (its README's default for AMP)

_AMPERE_AND_LATER = ("ampere", "ada", "hopper", "blackwell")
#: NCCL_TESTS_ISSUE_212 sets busbw_eff_frac['nvswitch'] and nvls_gain_frac, 194 and 44 busbw_eff_frac['nvlink-bridge'],
#: STAS_MAMF matmul_eff_frac. The DGXC_NCCL sweep sets none: the size regime comes from NCCL's own constants (see
#: gpusim.params.PROVENANCE), so it is a test (the form of the NVLS pipeline fill was checked against it: README).
_USED_FOR_DEFAULTS = {"NCCL_TESTS_ISSUE_212", "NCCL_TESTS_ISSUE_194", "NCCL_TESTS_ISSUE_44", "STAS_MAMF"}
#: the quality bar for bus bandwidth counts sizes from 32 KiB up (smaller messages are pure latency)
BUSBW_MIN_BYTES = 32 * 1024


def default_csv() -> Path | None:
    if os.environ.get(ENV_VAR):
        return Path(os.environ[ENV_VAR])
    here = Path(__file__).resolve().parent.parent
    for cand in (here / "validation" / "measurements.csv",  # the copy kept in the repository
                 here.parent / "shared" / "validation" / "measurements.csv"):
        if cand.is_file():
            return cand
    return None


@dataclass
class RowResult:
    index: int
    source_id: str
    kind: str
    model: str
    gpu: str
    n_gpus: int
    measured: float
    unit: str
    predicted: float | None = None
    anchored: float | None = None
    linear: float | None = None
    one_gpu_measured: float | None = None
    reason: str | None = None
    flagged: str | None = None
    replicas_reason: str | None = None  # [issue 18] why the benchmark trained independent replicas
    workload_as_run: str | None = None  # [issue 18] the benchmark's own configuration of the model (AS_RUN_WORKLOADS)
    used_for_defaults: bool = False
    units_per_sample: float = 1.0
    memory_frac: float | None = None  # predicted memory per GPU / capacity (the measured run fitted)
    message_bytes: float | None = None  # busbw rows: the message size predicted at
    algorithm: str | None = None  # busbw rows: the algorithm and protocol the model picked
    protocol: str | None = None
    assumptions: list[str] = field(default_factory=list)

    def ape(self, which: str = "predicted") -> float | None:
        v = getattr(self, which)
        if v is None or not self.measured:
            return None
        return abs(v - self.measured) / abs(self.measured)

    @property
    def measured_efficiency(self) -> float | None:
        if self.one_gpu_measured is None or self.n_gpus <= 1:
            return None
        return self.measured / (self.n_gpus * self.one_gpu_measured)

    @property
    def predicted_efficiency(self) -> float | None:
        if self.anchored is None or self.one_gpu_measured is None:
            return None
        return self.anchored / (self.n_gpus * self.one_gpu_measured)


def _system_key(notes: str) -> str:
    """Lambda's system row without the GPU count: 'Dell 2x H100 80GB SXM5' -> 'Dell H100 80GB SXM5'."""
    return re.sub(r"\b\d+x\s*", "", _system_row(notes)).strip()  # ('LambdaCloud 4xV100 16GB' too)


def _precision(raw: str, gpu, notes: list[str]) -> str:
    if raw == "fp32" and gpu.architecture in _AMPERE_AND_LATER:
        notes.append("'fp32' on Ampere or later read as TF32 (the NGC containers' default)")
        return "tf32"
    if raw in ("fp32", "tf32", "amp_fp16", "amp_bf16", "bf16", "fp8"):
        return raw
    if raw == "mixed":
        return "amp_bf16"
    raise ValueError(f"precision {raw!r}")


#: numeric columns: each is empty or a finite number in its range (checked on loading, with the line)
_NUMERIC_COLUMNS = {"n_gpus": (1, 1e6), "n_nodes": (1, 1e5), "per_gpu_batch": (1, 1e8), "global_batch": (1, 1e10),
                    "message_bytes": (0, 1e15), "value": (0, 1e18)}


def load_rows(path: str | os.PathLike) -> list[dict]:
    import io

    from gpusim.checks import Bound, read_text

    p = Path(path)
    if not p.exists():
        raise GpusimError(f"{p}: no such file (give a CSV with the columns of shared/validation/measurements.csv)")
    text = read_text(p, "measurement CSV")
    try:
        rows = list(csv.DictReader(io.StringIO(text, newline="")))
    except csv.Error as e:
        raise GpusimError(f"{p}: not a readable CSV: {e}") from None
    need = {"source_id", "kind", "model", "gpu", "n_gpus", "n_nodes", "interconnect", "precision", "per_gpu_batch",
            "value", "unit"}
    if not rows:
        raise GpusimError(f"{p}: no measurement rows (a header with the columns of "
                          "shared/validation/measurements.csv, then one row per measurement)")
    if not need <= set(rows[0]):
        raise GpusimError(f"{p}: missing columns {sorted(need - set(rows[0]))}")
    for line, r in enumerate(rows, start=2):
        for col, (lo, hi) in _NUMERIC_COLUMNS.items():
            v = (r.get(col) or "").strip()
            if v:
                try:
                    Bound(lo, hi).check(v, f"column {col}")
                except ValueError as e:
                    raise GpusimError(f"{p}: line {line}: {e}; leave it empty when unknown") from None
        if not (r.get("value") or "").strip():
            raise GpusimError(f"{p}: line {line}: column value is empty (every row needs its measured value)")
    return rows


def _num(x: str) -> float | None:
    try:
        return float(x) if x not in ("", None) else None
    except ValueError:
        return None


def run(path=None, *, db=None, params=None) -> list[RowResult]:
    """Predict every row of the CSV that can be mapped. Returns one RowResult per row.

    ``params`` is a :class:`ModelParams` for every row, or a function of the row's GPU id returning one
    (a calibration transfers differently to each GPU model).
    """
    from gpusim.hwdb import load
    from gpusim.params import DEFAULT_PARAMS

    path = path or default_csv()
    if path is None:
        raise GpusimError("no validation CSV found: pass one (`gpusim validate FILE`) or set $" + ENV_VAR)
    rows = load_rows(path)
    db = db or load()
    params = params or DEFAULT_PARAMS
    params_for = params if callable(params) else (lambda gpu_id: params)
    results = [_predict_row(i, r, db, params_for(GPU_MAP.get(r["gpu"]))) for i, r in enumerate(rows)]
    _anchor(results, rows, db, params_for)
    return results


def _base(i: int, r: dict) -> RowResult:
    return RowResult(index=i, source_id=r["source_id"], kind=r["kind"], model=r["model"], gpu=r["gpu"],
                     n_gpus=int(_num(r["n_gpus"]) or 0), measured=_num(r["value"]) or 0.0, unit=r["unit"],
                     flagged="source marks this row WARNING" if "WARNING" in (r.get("notes") or "") else None,
                     replicas_reason=_replicas_reason(r),
                     used_for_defaults=r["source_id"] in _USED_FOR_DEFAULTS)


def _replicas_reason(r: dict) -> str | None:
    """Why a multi-GPU throughput row did not train data-parallel (:data:`INDEPENDENT_REPLICAS`), else None."""
    if r.get("kind") != "throughput" or (_num(r.get("n_gpus", "")) or 1) <= 1:
        return None
    return INDEPENDENT_REPLICAS.get((r.get("source_id"), r.get("model")))


def _scenario_kwargs(r: dict, res: RowResult, db) -> dict | None:
    """Scenario fields for a throughput-like row, or None with res.reason set."""
    model = MODEL_MAP.get(r["model"])
    gpu_id = GPU_MAP.get(r["gpu"])
    if model is None:
        res.reason = f"model {r['model']!r} not in the catalogue map"
        return None
    if gpu_id is None or gpu_id not in db.gpus:
        res.reason = f"GPU {r['gpu']!r} not mapped"
        return None
    fabric = FABRIC_MAP.get(r["interconnect"])
    if fabric is None:
        res.reason = f"interconnect {r['interconnect']!r} not mapped"
        return None
    n = int(_num(r["n_gpus"]) or 1)
    nodes = int(_num(r["n_nodes"]) or 1)
    gpu = db.gpus[gpu_id]
    try:
        precision = _precision(r["precision"], gpu, res.assumptions)
    except ValueError:
        res.reason = f"precision {r['precision']!r} not mapped"
        return None
    batch = _num(r["per_gpu_batch"])
    wl_id, seq = model
    if batch is None:
        batch = HOROVOD_BATCH.get(wl_id) if r["source_id"] == "HOROVOD_DOCS_2017" else DLE_RN50_BATCH
        res.assumptions.append(f"per-GPU batch {batch} assumed (not in the source)")
    kw = {"model": wl_id, "seq_len": seq, "gpu": gpu_id, "gpus": n, "nodes": nodes, "precision": precision,
          "per_gpu_batch": max(1, int(round(batch))), "num_workers": None}
    accum = as_run_accum(r, n, kw["per_gpu_batch"])
    if accum:  # [issue 18] the benchmark's fixed global batch: gradient accumulation (AS_RUN_GLOBAL_BATCH)
        _, extra, why, _ = AS_RUN_GLOBAL_BATCH[(r["source_id"], r["model"])]
        kw.update(accum=accum, **extra)
        res.assumptions.append(f"{why}: {accum} per update here")
    opt = AS_RUN_OPTIMIZER.get((r["source_id"], r["model"]))
    if opt is not None:  # [issue 18] the optimizer the benchmark's code ran
        kw.update(opt[0])
        res.assumptions.append(opt[1])
    as_run = AS_RUN_WORKLOADS.get((r["source_id"], r["model"]))
    if as_run is not None:  # [issue 18] the benchmark's own configuration of the model
        del kw["model"], kw["seq_len"]
        kw["workload"] = _as_run_workload(r["source_id"], r["model"])
        res.workload_as_run = as_run[2]
        res.assumptions.append(as_run[2])
    kw.update({k: v for k, v in fabric.items() if k != "algorithm"})
    if (n > 1 and r["source_id"] == "LAMBDA_V1" and _system_row(r.get("notes", "")) in NCCL_P2P_DISABLED_SYSTEMS
            and not _replicas_reason(r)):  # (independent replicas exchange nothing)
        kw["p2p"] = False  # [issue 18] the harness disabled NCCL's peer-to-peer transport
        res.assumptions.append(_P2P_DISABLED_WHY)
    return kw


def as_run_accum(r: dict, n: int, batch: int) -> int | None:
    """[issue 18] The gradient-accumulation steps of a row whose benchmark held the global batch fixed
    (:data:`AS_RUN_GLOBAL_BATCH`), else None."""
    entry = AS_RUN_GLOBAL_BATCH.get((r.get("source_id"), r.get("model")))
    if (entry is None or n not in entry[0] or entry[0][n] % (batch * n)
            or (entry[3] is not None and r.get("precision") not in entry[3])):
        return None
    return entry[0][n] // (batch * n)


def baseline_at_accum(kw: dict, thr1: float, accum_1: int, db, params) -> float:
    """[issue 18] A one-GPU throughput measured with ``accum_1`` accumulation steps per update, as the throughput the
    same GPU would reach at ``kw``'s accumulation: the micro-batch time it implies (the step less the modelled
    optimizer, overhead and data wait, over ``accum_1``, as :func:`gpusim.simulation._apply_baseline` reads a
    baseline) with the update spread over ``kw``'s accumulation steps instead."""
    from gpusim.simulation import Scenario, baseline_micro_s, simulate

    b, acc = kw["per_gpu_batch"], kw.get("accum", 1)

    def other(a: int) -> float:
        out = simulate(Scenario.create(**{**kw, "gpus": 1, "nodes": 1, "accum": a}), db=db, params=params,
                       recommend=False)
        return sum(float(out.breakdown_s[k]) for k in ("optimizer_s", "overhead_s", "data_wait_s"))

    micro = baseline_micro_s(b * accum_1 / thr1, other(accum_1), accum_1)
    return b * acc / (micro * acc + other(acc))


def _as_run_job(kw: dict, res: RowResult) -> tuple[dict, int]:
    """[issue 18] The scenario a row's benchmark ran and how many copies of it: a row of
    :data:`INDEPENDENT_REPLICAS` is ``n`` independent one-GPU runs; any other row is its own scenario, once."""
    if not res.replicas_reason:
        return kw, 1
    return {**kw, "gpus": 1, "nodes": 1}, res.n_gpus


@functools.lru_cache(maxsize=16)
def _as_run_workload(source_id: str, model: str):
    """The workload of :data:`AS_RUN_WORKLOADS` for a (source, model) pair, built once."""
    from gpusim.workload import build_from_spec, get_workload

    wl_id, changes, _why = AS_RUN_WORKLOADS[(source_id, model)]
    base = get_workload(wl_id)
    return build_from_spec(dataclasses.replace(base.transformer, **changes), id=f"{wl_id}-{source_id.lower()}",
                           name=f"{base.name} ({source_id} configuration)", family=base.family,
                           sources=(*base.sources, "AS_RUN_WORKLOADS in gpusim/validation.py"))


def _units_per_sample(unit: str, wl) -> float | None:
    u = unit.lower()
    if u.startswith("images/s") or u.startswith("sequences/s"):
        return 1.0
    if u.startswith("tokens/s"):
        return float(wl.tokens_per_sample)
    return None


def _predict_row(i: int, r: dict, db, params) -> RowResult:
    from gpusim.simulation import Scenario, resolve_workload, simulate

    res = _base(i, r)
    kind = r["kind"]
    try:
        if kind == "busbw":
            return _predict_busbw(r, res, db, params)
        if kind in ("mfu", "tflops_per_gpu") and r["source_id"].startswith("MEGATRON"):
            # the same Megatron runs are in validation/llm_parallel.csv with their full layouts (tp, pp, vp, micro-
            # and global batch): the LLM table below predicts them; these rows lack the layout
            res.reason = ("a tensor/pipeline-parallel Megatron run without its layout here: predicted in the LLM "
                          "layouts table (validation/llm_parallel.csv holds the same runs with their layouts)")
            return res
        if kind == "tflops_per_gpu":
            gpu_id = GPU_MAP.get(r["gpu"])
            if gpu_id is None or gpu_id not in db.gpus:
                res.reason = f"GPU {r['gpu']!r} not in the database"
                return res
            key = "fp8" if r["precision"] == "fp8" else "bf16"
            peak = db.gpus[gpu_id].peak_flop_per_s(key)
            if peak is None:
                res.reason = f"no {key} peak for {gpu_id}"
                return res
            res.predicted = peak * params.matmul_eff_frac["fp8" if key == "fp8" else "amp_bf16"] / 1e12
            return res
        if kind not in ("throughput", "time_to_train", "scaling_efficiency"):
            res.reason = f"kind {kind!r} not predicted"
            return res
        kw = _scenario_kwargs(r, res, db)
        if kw is None:
            return res
        kw, replicas = _as_run_job(kw, res)
        scn = Scenario.create(**kw)
        out = simulate(scn, db=db, params=params, recommend=False)
        assumed_batch = _num(r["per_gpu_batch"]) is None
        while assumed_batch and not out.fits_in_memory and scn.strategy.per_gpu_batch > 1:
            scn = scn.with_changes(per_gpu_batch=scn.strategy.per_gpu_batch // 2)
            out = simulate(scn, db=db, params=params, recommend=False)
            res.assumptions.append(f"assumed batch halved to {scn.strategy.per_gpu_batch} to fit in memory")
        wl = resolve_workload(scn)
        if kind == "throughput":  # with an assumed batch too (it was predicted as 100 x efficiency before)
            if not assumed_batch:  # the memory check needs the batch the measurement ran
                res.memory_frac = out.memory_per_gpu_bytes / out.memory_capacity_bytes
            per = _units_per_sample(r["unit"], wl)
            if per is None:
                res.reason = f"unit {r['unit']!r} not understood"
                return res
            res.units_per_sample = per
            res.predicted = replicas * out.throughput_samples_per_s * per
            if res.replicas_reason:
                res.assumptions.append(res.replicas_reason)
        elif kind == "time_to_train":
            epochs = 90
            res.predicted = epochs * IMAGENET_TRAIN_SAMPLES / out.throughput_samples_per_s / 3600.0
            res.assumptions.append("90 epochs of ImageNet-1k, training steps only (no evaluation)")
        else:  # scaling_efficiency in %
            res.predicted = 100.0 * out.scaling_efficiency_frac
        res.assumptions.extend(out.assumptions)
    except GpusimError as e:
        res.reason = f"{type(e).__name__}: {e}"
    return res


def _predict_busbw(r: dict, res: RowResult, db, params) -> RowResult:
    from gpusim.simulation import collective

    gpu_id = GPU_MAP.get(r["gpu"])
    fabric = FABRIC_MAP.get(r["interconnect"])
    size = _num(r["message_bytes"])
    n = int(_num(r["n_gpus"]) or 0)
    if gpu_id is None or fabric is None:
        res.reason = "GPU or interconnect not mapped"
        return res
    if size is None:
        size = 16 * 2**30  # stated expectations are large-message figures
        res.assumptions.append("a large (16 GiB) message assumed: the source states a plateau")
    if n < 2:
        n = 2
        res.n_gpus = 2
        res.assumptions.append("2 GPUs (the source's -g 2 / two cards)")
    out = collective("all_reduce", [size], gpu=gpu_id, node=fabric.get("node"), gpus=n, nodes=1,
                     intra=fabric.get("intra"), algorithm=fabric.get("algorithm", "auto"), db=db, params=params)
    res.predicted = out[0]["busbw_bytes_per_s"] / 1e9
    res.message_bytes, res.algorithm, res.protocol = size, out[0]["algorithm"], out[0]["protocol"]
    return res


def _anchor(results: list[RowResult], rows: list[dict], db, params_for) -> None:
    """Anchored predictions: multi-GPU rows with a measured one-GPU row of the same configuration."""
    from gpusim.simulation import Scenario, simulate

    def key(r: dict):
        return (r["source_id"], _system_key(r.get("notes") or ""), r["model"], r["gpu"], r["precision"],
                r["per_gpu_batch"])

    singles = {key(r): res for r, res in zip(rows, results)
               if r["kind"] == "throughput" and res.n_gpus == 1 and res.measured}
    for r, res in zip(rows, results):
        if r["kind"] != "throughput" or res.n_gpus <= 1:
            continue
        one = singles.get(key(r))
        if one is None:
            continue
        res.one_gpu_measured = one.measured
        res.linear = one.measured * res.n_gpus
        if res.reason:
            continue
        kw = _scenario_kwargs(r, RowResult(0, "", "", "", "", 0, 0.0, ""), db)
        per = res.units_per_sample
        kw, replicas = _as_run_job(kw, res)
        try:
            base = one.measured / per
            accum_1 = as_run_accum(rows[one.index], 1, kw["per_gpu_batch"]) or 1
            if accum_1 != kw.get("accum", 1):  # [issue 18] the one-GPU run accumulated differently (fixed global)
                base = baseline_at_accum(kw, base, accum_1, db, params_for(kw["gpu"]))
            out = simulate(Scenario.create(**kw, baseline_throughput=base), db=db,
                           params=params_for(kw["gpu"]), recommend=False)
            res.anchored = replicas * out.throughput_samples_per_s * per
        except GpusimError as e:
            res.reason = f"anchored: {e}"


# ------------------------------------------------------------------------------------------------
# Summary statistics
# ------------------------------------------------------------------------------------------------

def _stats(errors: list[float]) -> dict:
    if not errors:
        return {"n": 0, "median_ape": None, "p90_ape": None}
    a = np.asarray(errors)
    return {"n": int(a.size), "median_ape": float(np.median(a)), "p90_ape": float(np.percentile(a, 90))}


def _spread(values: list[float]) -> dict:
    """Median, smallest and largest of some values (None when there are none)."""
    if not values:
        return {"n": 0, "median": None, "min": None, "max": None}
    a = np.asarray(values, dtype=np.float64)
    return {"n": int(a.size), "median": float(np.median(a)), "min": float(a.min()), "max": float(a.max())}


def summarize(results: list[RowResult]) -> dict:
    """Per (source, kind): rows, predicted, unmapped, datasheet and anchored error; plus the scaling rows."""
    groups: dict[tuple[str, str], list[RowResult]] = defaultdict(list)
    for r in results:
        groups[(r.source_id, r.kind)].append(r)
    per_group = []
    for (src, kind), rs in sorted(groups.items()):
        predicted = [r for r in rs if r.predicted is not None]
        per_group.append({
            "source_id": src, "kind": kind, "rows": len(rs), "predicted": len(predicted),
            "unmapped": len(rs) - len(predicted), "used_for_defaults": any(r.used_for_defaults for r in rs),
            "datasheet": _stats([r.ape() for r in predicted]),
            "anchored": _stats([r.ape("anchored") for r in rs if r.anchored is not None and _data_parallel(r)]),
            "linear": _stats([r.ape("linear") for r in rs if r.anchored is not None and _data_parallel(r)]),
        })
    multi = [r for r in results if r.kind == "throughput" and r.n_gpus > 1 and _data_parallel(r)]
    replicas = [r for r in results if r.kind == "throughput" and r.n_gpus > 1 and r.replicas_reason and not r.flagged]
    anchored = [r for r in multi if r.anchored is not None]
    losing = [r for r in anchored if (r.measured_efficiency or 1.0) < 0.9]
    eff_err = [abs(r.predicted_efficiency - r.measured_efficiency) for r in anchored]
    eff_err_linear = [abs(1.0 - r.measured_efficiency) for r in anchored]
    overall = {
        "multi_gpu_throughput_rows": len(multi),
        "datasheet": _stats([r.ape() for r in multi if r.predicted is not None]),
        "anchored": _stats([r.ape("anchored") for r in anchored]),
        "linear": _stats([r.ape("linear") for r in anchored]),
        "losing_scaling_anchored": _stats([r.ape("anchored") for r in losing]),
        "losing_scaling_linear": _stats([r.ape("linear") for r in losing]),
        "efficiency_abs_error": _stats(eff_err),
        "efficiency_abs_error_linear": _stats(eff_err_linear),
        "flagged_rows_excluded": sum(1 for r in results if r.flagged and r.kind == "throughput" and r.n_gpus > 1),
        # [issue 18] rows predicted with the configuration their benchmark ran (AS_RUN_WORKLOADS), every GPU count
        "as_run_workload_rows": _stats([r.ape() for r in results if r.workload_as_run and r.kind == "throughput"
                                        and r.predicted is not None]),
        # [issue 18] rows whose benchmark trained independent replicas: predicted as such, reported apart
        "independent_replica_rows": {
            "n": len(replicas),
            "datasheet": _stats([r.ape() for r in replicas if r.predicted is not None]),
            "anchored": _stats([r.ape("anchored") for r in replicas if r.anchored is not None]),
            "measured_efficiency": _spread([r.measured_efficiency for r in replicas
                                            if r.measured_efficiency is not None]),
        },
    }
    mem = [r.memory_frac for r in results if r.memory_frac is not None]
    over = [m for m in mem if m > 1.0]
    overall["memory"] = {
        "configurations": len(mem), "predicted_to_fit": len(mem) - len(over),
        "median_overestimate_frac": float(np.median(over)) - 1.0 if over else None,
        "max_overestimate_frac": max(over) - 1.0 if over else None,
    }
    overall["busbw"] = busbw_summary(results)
    unmapped = [{"index": r.index, "source_id": r.source_id, "kind": r.kind, "model": r.model, "gpu": r.gpu,
                 "reason": r.reason} for r in results if r.predicted is None]
    return {"groups": per_group, "overall": overall, "unmapped": unmapped}


def _decade(size: float) -> str:
    k = math.floor(math.log10(size))
    return f"1e{k}-1e{k + 1} B"


def busbw_summary(results: list[RowResult], min_bytes: float = BUSBW_MIN_BYTES) -> dict:
    """Bus-bandwidth error over the rows that test the model (not used for defaults, sizes >= ``min_bytes``):
    overall, per source and per size decade (decimal: 1e4-1e5 B, ...)."""
    rows = [r for r in results if r.kind == "busbw" and r.predicted is not None and not r.used_for_defaults
            and (r.message_bytes or 0) >= min_bytes]
    by_src: dict[str, list[float]] = defaultdict(list)
    by_dec: dict[tuple[float, str], list[float]] = defaultdict(list)
    for r in rows:
        by_src[r.source_id].append(r.ape())
        lo = 10 ** math.floor(math.log10(r.message_bytes))
        by_dec[(lo, _decade(r.message_bytes))].append(r.ape())
    return {"min_bytes": min_bytes, "all": _stats([r.ape() for r in rows]),
            "sources": {k: _stats(v) for k, v in sorted(by_src.items())},
            "decades": [{"decade": name, **_stats(v)} for (_, name), v in sorted(by_dec.items())],
            "excluded_used_for_defaults": sum(1 for r in results if r.kind == "busbw" and r.used_for_defaults)}


def _data_parallel(r: RowResult) -> bool:
    """A row of the data-parallel scaling statistics: not flagged by its source, and its benchmark exchanged
    gradients (not one of :data:`INDEPENDENT_REPLICAS`)."""
    return not r.flagged and not r.replicas_reason


def worst_rows(results: list[RowResult], which: str = "anchored", n: int = 10) -> list[RowResult]:
    scored = [r for r in results if r.ape(which) is not None and _data_parallel(r) and r.kind == "throughput"]
    return sorted(scored, key=lambda r: -r.ape(which))[:n]


def fmt_pct(x: float | None) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:.1f}%"
