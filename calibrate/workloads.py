"""Reference workloads for the DDP step benchmark, and their description for the analytical model.

Two small models that bracket what data-parallel training looks like: ``mlp`` (few, large matmuls;
little activation memory; SGD with momentum) and ``transformer`` (a pre-LN GPT-style encoder on token
ids: embeddings, attention, GELU MLP, a vocabulary head; AdamW; bf16 autocast on GPUs). Sizes are
CPU-sized on CPU and in quick mode.

:func:`describe` measures what the model needs to predict a step without torch: parameter count,
gradient bytes, forward and training FLOPs per sample (``torch.utils.flop_counter.FlopCounterMode``;
attention is counted through the math SDPA path, because the fused CPU kernel has no FLOP formula),
activation bytes per sample (tensors saved for backward, parameters excluded, each storage once),
and the aten operators one forward dispatches (``fwd_ops``) and those that are not views
(``fwd_kernels``, a proxy for kernel launches).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

from gpusim.calibrate_bench.harness import Ctx


@dataclass(frozen=True)
class Workload:
    name: str
    desc: str
    build: Callable[[], nn.Module]
    batch: Callable[[int, torch.Generator], tuple[torch.Tensor, torch.Tensor]]
    optimizer: str  # gpusim optimizer names: "sgd-momentum" | "adamw"
    precision: str  # "fp32" | "amp_bf16" | "amp_fp16"
    batches: tuple[int, ...]  # per-rank batches to measure

    def make_optimizer(self, params) -> torch.optim.Optimizer:
        if self.optimizer == "sgd-momentum":
            return torch.optim.SGD(params, lr=1e-3, momentum=0.9)
        return torch.optim.AdamW(params, lr=1e-4)

    def autocast(self, device: torch.device):
        if self.precision == "fp32":
            return contextlib.nullcontext()
        dt = torch.bfloat16 if self.precision == "amp_bf16" else torch.float16
        return torch.autocast(device_type=device.type, dtype=dt)


class MLP(nn.Module):
    def __init__(self, d_in: int, hidden: int, depth: int, classes: int):
        super().__init__()
        layers: list[nn.Module] = [nn.Linear(d_in, hidden), nn.ReLU()]
        for _ in range(depth - 1):
            layers += [nn.Linear(hidden, hidden), nn.ReLU()]
        layers.append(nn.Linear(hidden, classes))
        self.net = nn.Sequential(*layers)

    def forward(self, x):
        return self.net(x)


class Block(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.ln2 = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, 4 * dim)
        self.fc2 = nn.Linear(4 * dim, dim)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v)  # not causal: FlopCounterMode would not discount a mask
        x = x + self.proj(a.transpose(1, 2).reshape(b, s, d))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class TinyGPT(nn.Module):
    def __init__(self, vocab: int, seq: int, dim: int, heads: int, layers: int):
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(seq, dim)
        self.blocks = nn.ModuleList(Block(dim, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)

    def forward(self, idx):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.ln(x))


def workloads(ctx: Ctx) -> list[Workload]:
    dev = ctx.device
    cuda = ctx.device_kind == "cuda"
    if cuda:
        mlp = dict(d_in=1024, hidden=4096, depth=4, classes=1000)
        gpt = dict(vocab=32768, seq=512, dim=1024, heads=16, layers=8)
        mlp_b, gpt_b = ((256, 1024), (4, 16)) if ctx.quick else ((64, 256, 1024), (2, 8, 32))
        gpt_prec = "amp_bf16" if torch.cuda.is_bf16_supported() else "amp_fp16"
    else:
        mlp = dict(d_in=256, hidden=1024, depth=2, classes=10) if ctx.quick else dict(d_in=512, hidden=2048, depth=2, classes=10)
        gpt = dict(vocab=512, seq=64, dim=128, heads=4, layers=2) if ctx.quick else dict(vocab=1024, seq=128, dim=128, heads=4, layers=4)
        mlp_b, gpt_b = ((16, 64), (4, 16)) if ctx.quick else ((16, 64, 256), (4, 16, 32))
        gpt_prec = "fp32"

    def mlp_batch(n: int, g: torch.Generator):
        x = torch.randn(n, mlp["d_in"], device=dev, generator=g)
        y = torch.randint(0, mlp["classes"], (n,), device=dev, generator=g)
        return x, y

    def gpt_batch(n: int, g: torch.Generator):
        x = torch.randint(0, gpt["vocab"], (n, gpt["seq"]), device=dev, generator=g)
        y = torch.randint(0, gpt["vocab"], (n, gpt["seq"]), device=dev, generator=g)
        return x, y

    return [
        Workload("mlp", "MLP " + " ".join(f"{k}={v}" for k, v in mlp.items()) + ", cross-entropy, SGD momentum",
                 lambda: MLP(**mlp).to(dev), mlp_batch, "sgd-momentum", "fp32", mlp_b),
        Workload("transformer", "pre-LN GPT encoder " + " ".join(f"{k}={v}" for k, v in gpt.items())
                 + ", token cross-entropy, AdamW", lambda: TinyGPT(**gpt).to(dev), gpt_batch, "adamw", gpt_prec, gpt_b),
    ]


def loss_of(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(out.reshape(-1, out.shape[-1]).float(), y.reshape(-1))


class _OpCounter(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops = 0
        self.kernels = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops += 1
        if not getattr(func, "is_view", False) and func.__name__.split(".")[0] not in ("detach", "alias", "lift_fresh"):
            self.kernels += 1
        return func(*args, **(kwargs or {}))


def describe(w: Workload, device: torch.device, batch: int = 2) -> dict:
    """The workload's numbers for the analytical model (see the module docstring)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.utils.flop_counter import FlopCounterMode

    torch.manual_seed(0)
    model = w.build()
    model.train()
    g = torch.Generator(device=device).manual_seed(0)
    x, y = w.batch(batch, g)
    params = sum(p.numel() for p in model.parameters() if p.requires_grad)
    grad_bytes = sum(p.numel() * p.element_size() for p in model.parameters() if p.requires_grad)

    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as fc:
        with w.autocast(device):
            loss = loss_of(model(x), y)
    fwd = fc.get_total_flops()
    model.zero_grad(set_to_none=True)
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as fc:
        with w.autocast(device):
            loss = loss_of(model(x), y)
        loss.backward()
    train = fc.get_total_flops()
    model.zero_grad(set_to_none=True)

    param_ptrs = {p.untyped_storage().data_ptr() for p in model.parameters()}
    saved: dict[int, int] = {}

    def pack(t: torch.Tensor):
        try:
            st = t.untyped_storage()
            if st.data_ptr() not in param_ptrs:
                saved[st.data_ptr()] = st.nbytes()
        except (RuntimeError, NotImplementedError):
            pass
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        with w.autocast(device):
            loss = loss_of(model(x), y)
    act = sum(saved.values())
    del loss

    counter = _OpCounter()
    with counter:
        with w.autocast(device):
            model(x)
    return {
        "workload": w.name, "workload_desc": w.desc, "params": int(params), "grad_bytes": int(grad_bytes),
        "fwd_flop_per_sample": fwd / batch, "train_flop_per_sample": train / batch,
        "act_bytes_per_sample": act / batch, "fwd_kernels": counter.kernels, "fwd_ops": counter.ops,
        "optimizer": w.optimizer, "precision": w.precision,
        "param_dtype": str(next(model.parameters()).dtype).replace("torch.", ""),
    }
