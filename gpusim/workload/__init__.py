"""What is trained: the :class:`Workload` noun, the model catalogue, the transformer builder with
:meth:`Workload.from_config`, the CNN builders and :meth:`Workload.from_torch`.

One module each:

* :mod:`gpusim.workload.core`: :class:`Workload`, :class:`LayerGroup`, the unit conventions and the data
  pipeline figures;
* :mod:`gpusim.workload.transformer`: :class:`TransformerSpec` (dense and mixture-of-experts) and
  :func:`build_transformer`;
* :mod:`gpusim.workload.flops`: model FLOPs per token in the two published conventions;
* :mod:`gpusim.workload.from_config`: Hugging Face ``config.json`` -> :class:`TransformerSpec`;
* :mod:`gpusim.workload.cnn`, :mod:`gpusim.workload.rnn`: CNN and GNMT builders;
* :mod:`gpusim.workload.catalogue`: the sourced data files in ``data/`` and the lookups;
* :mod:`gpusim.workload.from_torch`: measuring a ``torch.nn.Module``.
"""

from gpusim.errors import ScenarioError, UnknownIdError
from gpusim.workload.core import (ACT_BYTES, COCO_JPEG_BYTES, FAMILIES, IMAGENET_JPEG_BYTES,
                                  IMAGENET_PREPROCESS_CORE_S, INDEX_BYTES, LAYER_KINDS, LOSS_BYTES, MASK_BYTES,
                                  MASKRCNN_PREPROCESS_CORE_S, SAMPLE_UNITS, SSD_PREPROCESS_CORE_S,
                                  TEXT_CORE_S_PER_SAMPLE, TEXT_CORE_S_PER_TOKEN, WEIGHT_BYTES, LayerGroup, Workload)
from gpusim.workload.transformer import SWITCH_CAPACITY_FACTOR, TransformerSpec, build_transformer
from gpusim.workload.cnn import build_inception_v3, build_mask_rcnn, build_resnet, build_ssd300, build_vgg16
from gpusim.workload.rnn import GNMT_TOKENS_PER_PAIR, build_gnmt
from gpusim.workload.catalogue import (build_from_spec, get_workload, is_config_path, list_workloads,
                                       transformer_spec, workload_ids)
from gpusim.workload.flops import flops_per_token
from gpusim.workload.from_config import SUPPORTED_MODEL_TYPES, from_config
from gpusim.workload.from_torch import measure_module


def _workload_from_config(cls, config, *, seq_len: int | None = None, name: str | None = None) -> Workload:
    """A transformer from a Hugging Face style ``config.json`` (a path, or the parsed dict); see
    :func:`gpusim.workload.from_config.from_config` for the supported ``model_type`` values and what
    is assumed when a field is absent (listed in ``assumptions``)."""
    return from_config(config, seq_len=seq_len, name=name)


# The noun's constructors from its builders, attached here, one stage above both (docs/ARCHITECTURE.md): the
# noun (core.py) does not import its builders, which import it. Importing any gpusim.workload module runs this.
Workload.from_config = classmethod(_workload_from_config)
Workload.from_torch = classmethod(measure_module)

__all__ = [
    "LayerGroup", "Workload", "TransformerSpec", "get_workload", "list_workloads", "workload_ids",
    "transformer_spec", "build_from_spec", "build_transformer", "from_config", "flops_per_token",
    "is_config_path", "SUPPORTED_MODEL_TYPES", "LAYER_KINDS", "FAMILIES", "SAMPLE_UNITS",
    "ScenarioError", "UnknownIdError",
]
