"""``Workload.from_torch``: measure a ``torch.nn.Module`` on one forward pass (torch is imported only
when it is called)."""

from __future__ import annotations

import math
from typing import Any

from gpusim.errors import ScenarioError
from gpusim.workload.core import ACT_BYTES, WEIGHT_BYTES, LayerGroup, Workload, Groups, slug

def measure_module(cls, module: Any, example_batch: Any, *, name: str | None = None, sample_unit: str | None = None,
                   tokens_per_sample: float | None = None, batch_size: int | None = None, device: str | None = None,
                   input_bytes_per_sample: float | None = None, h2d_bytes_per_sample: float | None = None,
                   preprocess_core_s_per_sample: float = 0.0, ckpt_blocks: Any = None, notes: str = "") -> Workload:
    """Measure one training-mode forward pass of ``module`` on ``example_batch``.

    * Parameters: ``sum(p.numel())``.
    * FLOPs: ``torch.utils.flop_counter.FlopCounterMode`` (per module internally), with formulas added
      through ``custom_mapping`` for the CPU flash-attention op (which has none in torch, so SDPA would
      count 0 on CPU); nothing is registered globally.
    * Kernels, bytes and groups: a ``TorchDispatchMode`` sees every aten op of the forward pass. View
      and allocation ops (``view``, ``t``, ``empty_like`` ...) are not kernels. Ops are grouped by type:
      matmul (a matrix product with a parameter operand), attention (SDPA ops, or a batched matrix
      product of two activations), conv, norm, embedding, pool, elementwise, other. Bytes are the
      op's activation inputs and outputs at 16 bits per floating-point element (integer tensors at
      their own size); parameter operands count as weight bytes.
    * Activation bytes: ``torch.autograd.graph.saved_tensors_hooks`` sees every tensor autograd keeps;
      each storage is counted once, parameters excluded, floating-point tensors scaled to 2 bytes per
      element (a model run in fp32 is reported as if its activations were 16-bit).
    * Checkpointed bytes: inputs of the checkpoint blocks (``ckpt_blocks``, default: the children of the
      ``nn.ModuleList``/``nn.Sequential`` holding most parameters, or the top-level children) + the saved
      bytes outside blocks; ``act_block_bytes_per_sample`` is the largest block's saved bytes.
    * Per sample: divided by the batch size (``batch_size`` or dim 0 of the first tensor).
    * ``device="meta"`` runs on the meta device (no memory): a module with real weights is deep-copied
      to meta first, and the batch is rebuilt as meta tensors. On meta (and on CPU with dropout), SDPA
      takes the unfused math path, so its ``s x s`` probabilities count as kept and its kernels count
      as several; on GPU a fused kernel would keep neither.
    """
    try:
        import torch
        from torch.utils._python_dispatch import TorchDispatchMode
        from torch.utils.flop_counter import FlopCounterMode, sdpa_backward_flop_count, sdpa_flop_count
        from torch.utils._pytree import tree_flatten, tree_map
    except ImportError as e:  # pragma: no cover - exercised only without torch
        raise ScenarioError("Workload.from_torch needs PyTorch (`pip install torch`)") from e
    import copy

    aten = torch.ops.aten
    if device is not None and str(device) == "meta":
        if any(p.device.type != "meta" for p in module.parameters()):
            module = copy.deepcopy(module).to("meta")
        example_batch = tree_map(lambda t: torch.empty_like(t, device="meta") if isinstance(t, torch.Tensor) else t,
                                 example_batch)
    elif device is not None:
        raise ScenarioError(f"from_torch: device must be None or 'meta' (got {device!r})")

    leaves = [t for t in tree_flatten(example_batch)[0] if isinstance(t, torch.Tensor)]
    if not leaves:
        raise ScenarioError("from_torch: example_batch must contain at least one tensor")
    first = leaves[0]
    b = int(batch_size or (first.shape[0] if first.dim() > 0 else 1))
    if b < 1:
        raise ScenarioError("from_torch: the batch dimension must be >= 1")

    params = list(module.parameters())
    n_params = float(sum(p.numel() for p in params))
    if n_params <= 0:
        raise ScenarioError("from_torch: the module has no parameters")
    param_storages = {_storage_key(p) for p in params}

    def elem_bytes(t) -> float:
        return ACT_BYTES if t.is_floating_point() else float(t.element_size())

    def _cpu_flash_fwd(q, k, v, *args, out_shape=None, **kwargs):
        return sdpa_flop_count(q, k, v)

    def _cpu_flash_bwd(grad, q, k, v, *args, out_shape=None, **kwargs):
        return sdpa_backward_flop_count(grad, q, k, v)

    custom = {}
    for op_name, fn in (("_scaled_dot_product_flash_attention_for_cpu", _cpu_flash_fwd),
                        ("_scaled_dot_product_flash_attention_for_cpu_backward", _cpu_flash_bwd)):
        op = getattr(aten, op_name, None)
        if op is not None:
            custom[op] = fn
    try:
        from torch.utils.flop_counter import flop_registry, shape_wrapper
        registry = {**flop_registry, **{k: shape_wrapper(v) for k, v in custom.items()}}
    except ImportError:  # pragma: no cover - an older torch: groups get no FLOPs, the total still does
        registry = {}

    groups = Groups()
    # metadata-only or allocation-only ops: no kernel
    free_ops = {"empty", "empty_like", "empty_strided", "detach", "alias", "lift_fresh", "new_empty",
                "new_empty_strided", "scalar_tensor", "_local_scalar_dense", "_unsafe_view", "_reshape_alias",
                "set_", "resize_"}

    class _Recorder(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            packet = func._overloadpacket
            op = packet.__name__
            if getattr(func, "is_view", False) or op in free_ops:
                return out
            flop = 0.0
            if packet in registry:
                try:
                    flop = float(registry[packet](*args, **kwargs, out_val=out))
                except Exception:  # an odd signature: leave the FLOPs to FlopCounterMode's total
                    flop = 0.0
            ins = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]
            outs = [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]
            w_in = [t for t in ins if _storage_key(t) in param_storages]
            a_in = [t for t in ins if _storage_key(t) not in param_storages]
            act_b = sum(t.numel() * elem_bytes(t) for t in a_in + outs)
            w_b = sum(t.numel() * WEIGHT_BYTES for t in w_in)
            kind = _op_kind(op, bool(w_in))
            groups.add(kind, f"{kind} ({op})" if kind == "other" else kind, 1, flop / b, act_b / b, w_b)
            return out

    saved: dict[Any, tuple[float, int | None]] = {}
    block_of: list[int | None] = [None]
    block_inputs = [0.0]

    def pack(t):
        key = _storage_key(t)
        if key not in param_storages and key not in saved:
            try:
                nbytes = float(t.untyped_storage().nbytes())
            except Exception:
                nbytes = float(t.numel() * t.element_size())
            if t.is_floating_point() and t.element_size() != ACT_BYTES:
                nbytes *= ACT_BYTES / t.element_size()
            saved[key] = (nbytes, block_of[0])
        return t

    blocks = list(ckpt_blocks) if ckpt_blocks is not None else _default_blocks(torch, module)
    hooks = []
    for i, blk in enumerate(blocks):
        def pre(mod, inp, i=i):
            block_of[0] = i
            block_inputs[0] += sum(t.numel() * elem_bytes(t) for t in tree_flatten(inp)[0]
                                   if isinstance(t, torch.Tensor))

        def post(mod, inp, out):
            block_of[0] = None
        hooks.append(blk.register_forward_pre_hook(pre))
        hooks.append(blk.register_forward_hook(post))

    was_training = module.training
    module.train()
    try:
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            with FlopCounterMode(display=False, depth=None, custom_mapping=custom) as fc, _Recorder():
                if isinstance(example_batch, dict):
                    module(**example_batch)
                elif isinstance(example_batch, (tuple, list)):
                    module(*example_batch)
                else:
                    module(example_batch)
    finally:
        for h in hooks:
            h.remove()
        module.train(was_training)

    total_flop = float(fc.get_total_flops()) / b
    layers = list(groups.build())
    rec_flop = sum(g.fwd_flop_per_sample for g in layers)
    if total_flop > 0 and not math.isclose(rec_flop, total_flop, rel_tol=1e-6):
        layers.append(LayerGroup("other", 1, max(total_flop - rec_flop, 0.0), 0.0, 0.0, "unattributed FLOPs"))
        total_flop = sum(g.fwd_flop_per_sample for g in layers)
    if total_flop <= 0:
        raise ScenarioError("from_torch: no FLOPs were counted (the forward pass ran no matmul or conv)")
    act_total = sum(v for v, _ in saved.values())
    per_block: dict[int | None, float] = {}
    for v, blk in saved.values():
        per_block[blk] = per_block.get(blk, 0.0) + v
    outside = per_block.pop(None, 0.0)
    act_block = max(per_block.values(), default=0.0)
    act_ckpt = block_inputs[0] + outside if blocks else act_total

    if sample_unit is None:
        seq_like = (not first.is_floating_point() and first.dim() == 2) or (first.is_floating_point() and first.dim() == 3)
        sample_unit = "sequence" if seq_like else "image"
    if tokens_per_sample is None:
        tokens_per_sample = float(first.shape[1]) if sample_unit == "sequence" and first.dim() >= 2 else 1.0
    batch_bytes = sum(t.numel() * t.element_size() for t in leaves) / b
    label = name or type(module).__name__
    return cls(
        id=slug(label), name=label, family="custom", sample_unit=sample_unit,
        tokens_per_sample=float(tokens_per_sample), params=n_params, fwd_flop_per_sample=total_flop,
        act_bytes_per_sample=max(act_total / b, 1.0), act_ckpt_bytes_per_sample=min(act_ckpt, act_total) / b,
        act_block_bytes_per_sample=act_block / b if blocks else None,
        input_bytes_per_sample=batch_bytes if input_bytes_per_sample is None else input_bytes_per_sample,
        h2d_bytes_per_sample=batch_bytes if h2d_bytes_per_sample is None else h2d_bytes_per_sample,
        preprocess_core_s_per_sample=preprocess_core_s_per_sample, layers=tuple(layers),
        sources=(f"measured with torch {torch.__version__} on {first.device.type} (FlopCounterMode, "
                 "saved_tensors_hooks, dispatch-mode op count)",),
        notes=notes or f"measured from {type(module).__name__} at batch {b}",
        param_tensors=sum(1 for p in params if p.requires_grad) or None)  # [issue 18] what an optimizer steps


def _storage_key(t) -> Any:
    """Identity of a tensor's storage (works for meta tensors too, whose data pointers are all 0)."""
    try:
        return t.untyped_storage()._cdata
    except Exception:
        return id(t)


def _default_blocks(torch, module) -> list[Any]:
    """Children of the ``nn.ModuleList``/``nn.Sequential`` (the module itself included) holding the most
    parameters (the repeated layers), else the top-level children."""
    best, best_p = None, 0
    for m in module.modules():
        if isinstance(m, (torch.nn.ModuleList, torch.nn.Sequential)) and len(m) >= 2:
            p = sum(x.numel() for x in m.parameters())
            if p > best_p:
                best, best_p = m, p
    if best is not None:
        return list(best)
    return list(module.children())


_MATMUL_OPS = {"mm", "addmm", "bmm", "baddbmm", "matmul", "_scaled_mm", "addbmm", "linear", "dot", "mv", "addmv"}
_CONV_OPS = {"convolution", "_convolution", "cudnn_convolution", "convolution_overrideable", "_slow_conv2d_forward",
             "mkldnn_convolution", "conv2d", "conv1d", "conv3d", "_convolution_mode", "conv_transpose2d"}
_NORM_OPS = {"native_layer_norm", "native_batch_norm", "_native_batch_norm_legit", "_native_batch_norm_legit_functional",
             "_native_batch_norm_legit_no_training", "native_group_norm", "_fused_rms_norm", "rms_norm", "batch_norm",
             "layer_norm", "group_norm", "cudnn_batch_norm", "miopen_batch_norm"}
_EMB_OPS = {"embedding", "embedding_bag", "_embedding_bag", "index_select"}
_POOL_OPS = {"max_pool2d_with_indices", "max_pool2d", "avg_pool2d", "_adaptive_avg_pool2d", "adaptive_avg_pool2d",
             "adaptive_max_pool2d", "max_pool3d_with_indices", "avg_pool3d", "_adaptive_avg_pool3d", "max_pool1d",
             "avg_pool1d", "mean"}


def _op_kind(op: str, has_weight: bool) -> str:
    if "attention" in op:
        return "attention"
    if op in _MATMUL_OPS:
        return "matmul" if has_weight else "attention"
    if op in _CONV_OPS:
        return "conv"
    if op in _NORM_OPS:
        return "norm"
    if op in _EMB_OPS:
        return "embedding"
    if op in _POOL_OPS:
        return "pool"
    if op.endswith("_") or op in {"add", "sub", "mul", "div", "relu", "gelu", "silu", "sigmoid", "tanh", "where",
                                  "_softmax", "_safe_softmax", "_log_softmax", "softmax", "log_softmax",
                                  "native_dropout", "bernoulli", "clone", "_to_copy", "copy", "cat", "pow",
                                  "rsqrt", "neg", "exp", "masked_fill", "threshold_backward", "hardtanh",
                                  "leaky_relu", "elu", "_unsafe_view", "fill", "zeros_like", "ones_like",
                                  "zeros", "ones", "full", "tril", "triu", "arange", "expand_copy", "erf"}:
        return "elementwise"
    return "other"



_from_torch = measure_module  # the old private name
