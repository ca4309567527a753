"""``from_config`` and ``from_torch`` agree on parameters and forward FLOPs for small models built in torch
from the same config (a Llama-style dense model with grouped-query attention and a Mixtral-style
mixture of experts), on CPU."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402
from torch.nn import functional as F  # noqa: E402

from gpusim.workload import Workload, from_config  # noqa: E402

DENSE = {"model_type": "llama", "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
         "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 128, "max_position_embeddings": 32,
         "tie_word_embeddings": False}
MOE = {**DENSE, "model_type": "mixtral", "num_local_experts": 4, "num_experts_per_tok": 2}


class _SwiGLU(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.gate, self.up, self.down = nn.Linear(h, f, bias=False), nn.Linear(h, f, bias=False), nn.Linear(f, h, bias=False)

    def forward(self, x):
        return self.down(F.silu(self.gate(x)) * self.up(x))


class _MoE(nn.Module):
    """Top-k routing that runs each expert on the tokens routed to it (what a dropless MoE computes)."""

    def __init__(self, h, f, n, k):
        super().__init__()
        self.k, self.router = k, nn.Linear(h, n, bias=False)
        self.experts = nn.ModuleList(_SwiGLU(h, f) for _ in range(n))

    def forward(self, x):
        flat = x.reshape(-1, x.shape[-1])
        weights, idx = torch.topk(F.softmax(self.router(flat), dim=-1), self.k, dim=-1)
        out = torch.zeros_like(flat)
        for e, expert in enumerate(self.experts):
            rows, slot = torch.nonzero(idx == e, as_tuple=True)
            if rows.numel():
                out = out.index_add(0, rows, expert(flat[rows]) * weights[rows, slot, None])
        return out.reshape(x.shape)


class _Layer(nn.Module):
    def __init__(self, c):
        super().__init__()
        h, a, kv = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"]
        d = h // a
        self.a, self.kv, self.d = a, kv, d
        self.n1, self.n2 = nn.RMSNorm(h), nn.RMSNorm(h)
        self.q, self.k, self.v = nn.Linear(h, a * d, bias=False), nn.Linear(h, kv * d, bias=False), nn.Linear(h, kv * d, bias=False)
        self.o = nn.Linear(a * d, h, bias=False)
        f = c["intermediate_size"]
        self.mlp = _MoE(h, f, c["num_local_experts"], c["num_experts_per_tok"]) if "num_local_experts" in c \
            else _SwiGLU(h, f)

    def forward(self, x):
        b, s, _ = x.shape
        y = self.n1(x)
        q = self.q(y).view(b, s, self.a, self.d).transpose(1, 2)
        k = self.k(y).view(b, s, self.kv, self.d).transpose(1, 2).repeat_interleave(self.a // self.kv, dim=1)
        v = self.v(y).view(b, s, self.kv, self.d).transpose(1, 2).repeat_interleave(self.a // self.kv, dim=1)
        att = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, s, -1)
        x = x + self.o(att)
        return x + self.mlp(self.n2(x))


class _LM(nn.Module):
    def __init__(self, c):
        super().__init__()
        h = c["hidden_size"]
        self.emb = nn.Embedding(c["vocab_size"], h)
        self.layers = nn.ModuleList(_Layer(c) for _ in range(c["num_hidden_layers"]))
        self.norm = nn.RMSNorm(h)
        self.head = nn.Linear(h, c["vocab_size"], bias=False)

    def forward(self, ids):
        x = self.emb(ids)
        for layer in self.layers:
            x = layer(x)
        return self.head(self.norm(x))


@pytest.mark.parametrize("config", [DENSE, MOE], ids=["dense-gqa", "moe"])
def test_from_config_agrees_with_from_torch(config):
    torch.manual_seed(0)
    s, b = 16, 2
    model = _LM(config)
    measured = Workload.from_torch(model, torch.randint(0, config["vocab_size"], (b, s)))
    built = from_config(config, seq_len=s)
    assert built.params == measured.params
    # the measured forward pass runs exactly top_k experts per token, as the built count assumes
    assert built.fwd_flop_per_sample == pytest.approx(measured.fwd_flop_per_sample, rel=1e-9)
    if "num_local_experts" in config:
        assert built.params_active < built.params
