"""Workload.from_torch: parameters, FLOPs, kernels, groups and activation bytes measured from a module."""

from __future__ import annotations

import resource

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")
nn = torch.nn

from gpusim.workload import Workload  # noqa: E402


def _kind(w, kind, attr="fwd_flop_per_sample"):
    return sum(getattr(g, attr) for g in w.layers if g.kind == kind)


def test_mlp_matches_closed_form():
    d_in, d_h, d_out, b = 512, 2048, 256, 32
    mlp = nn.Sequential(nn.Linear(d_in, d_h), nn.ReLU(), nn.Linear(d_h, d_out))
    w = Workload.from_torch(mlp, torch.randn(b, d_in), name="MLP")
    assert w.params == d_in * d_h + d_h + d_h * d_out + d_out
    assert w.fwd_flop_per_sample == 2 * (d_in * d_h + d_h * d_out)
    assert _kind(w, "matmul") == w.fwd_flop_per_sample
    # kept for backward: the input of each Linear (x and the ReLU output, which ReLU also keeps): 16-bit
    assert w.act_bytes_per_sample == 2 * (d_in + d_h)
    assert w.fwd_kernels == 3                       # addmm, relu, addmm
    assert _kind(w, "matmul", "weight_bytes") == 2 * w.params
    assert w.family == "custom" and w.id == "mlp" and w.name == "MLP"
    assert w.h2d_bytes_per_sample == 4 * d_in       # the fp32 example tensor, per sample
    assert mlp.training                             # left as it was
    assert w.param_tensors == 4                     # [issue 18] two weights, two biases: what an optimizer steps
    mlp[0].bias.requires_grad_(False)
    assert Workload.from_torch(mlp, torch.randn(b, d_in)).param_tensors == 3  # a frozen tensor is not stepped


@settings(deadline=None, max_examples=15)
@given(i=st.integers(1, 256), o=st.integers(1, 256), b=st.integers(1, 16))
def test_linear_flops_property(i, o, b):
    w = Workload.from_torch(nn.Linear(i, o), torch.randn(b, i))
    assert w.fwd_flop_per_sample == 2 * i * o
    assert w.params == i * o + o


def test_transformer_layer_counts_attention():
    """nn.TransformerEncoderLayer (B4 S128 E256, 8 heads, FFN 1024) in train mode: the analytic forward is
    872,415,232 FLOPs (TOOLCHAIN.md section 3), of which QK^T and AV are 2*2*B*S^2*E."""
    b, s, e = 4, 128, 256
    layer = nn.TransformerEncoderLayer(e, 8, 1024, batch_first=True)
    layer.eval()   # from_torch must still measure the training path, not the fused inference path
    w = Workload.from_torch(layer, torch.randn(b, s, e))
    assert w.fwd_flop_per_sample * b == 872_415_232
    assert _kind(w, "attention") * b == 2 * 2 * b * s * s * e > 0
    assert w.sample_unit == "sequence" and w.tokens_per_sample == s
    assert not layer.training
    assert {g.kind for g in w.layers} >= {"matmul", "attention", "norm", "elementwise"}


def test_sdpa_block_on_cpu_counts_fused_attention():
    """Without dropout, CPU SDPA runs the flash kernel, which torch's counter leaves at 0 FLOPs."""
    class Block(nn.Module):
        def __init__(self, d=128, heads=4):
            super().__init__()
            self.norm, self.qkv, self.out, self.heads = nn.LayerNorm(d), nn.Linear(d, 3 * d), nn.Linear(d, d), heads

        def forward(self, x):
            b, s, d = x.shape
            q, k, v = self.qkv(self.norm(x)).view(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
            y = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
            return x + self.out(y.transpose(1, 2).reshape(b, s, d))

    b, s, d = 2, 64, 128
    w = Workload.from_torch(Block(d), torch.randn(b, s, d))
    assert _kind(w, "attention") == 2 * 2 * s * s * d
    assert w.fwd_flop_per_sample == 2 * s * (d * 3 * d + d * d) + 2 * 2 * s * s * d


def test_token_model_is_a_sequence_and_ckpt_blocks_work():
    class TinyLM(nn.Module):
        def __init__(self, v=1000, d=64, n=3):
            super().__init__()
            self.emb = nn.Embedding(v, d)
            self.layers = nn.ModuleList(nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
                                        for _ in range(n))
            self.head = nn.Linear(d, v, bias=False)

        def forward(self, ids):
            x = self.emb(ids)
            for layer in self.layers:
                x = x + layer(x)
            return self.head(x)

    b, s, d, v = 2, 32, 64, 1000
    w = Workload.from_torch(TinyLM(v, d), torch.randint(0, v, (b, s)))
    assert w.sample_unit == "sequence" and w.tokens_per_sample == s
    assert w.fwd_flop_per_sample == 3 * 2 * s * (d * 4 * d * 2) + 2 * s * d * v
    assert _kind(w, "embedding", "count") == 1
    # checkpointing keeps each layer's input (s*d at 16 bits) plus what lies outside the layers
    per_layer = w.act_block_bytes_per_sample
    assert per_layer == pytest.approx(2 * s * (d + 4 * d + 4 * d))   # Linear in, GELU in, Linear in
    assert w.act_ckpt_bytes_per_sample == pytest.approx(w.act_bytes_per_sample - 3 * per_layer + 3 * 2 * s * d)
    assert w.h2d_bytes_per_sample == 8 * s                            # int64 ids


def test_fp32_activations_are_reported_at_16_bits():
    m = nn.Sequential(nn.Linear(100, 100), nn.Tanh(), nn.Linear(100, 10))
    w32 = Workload.from_torch(m, torch.randn(8, 100))
    w16 = Workload.from_torch(m.to(torch.bfloat16), torch.randn(8, 100, dtype=torch.bfloat16))
    # the input of the first Linear, and the Tanh output (kept by Tanh and by the second Linear: one tensor)
    assert w32.act_bytes_per_sample == w16.act_bytes_per_sample == 2 * (100 + 100)


def test_meta_device_option_leaves_the_module_alone():
    m = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 64))
    w = Workload.from_torch(m, torch.randn(4, 64), device="meta")
    assert w.fwd_flop_per_sample == 2 * 2 * 64 * 64
    assert all(p.device.type == "cpu" for p in m.parameters())
    with pytest.raises(ValueError, match="meta"):
        Workload.from_torch(m, torch.randn(4, 64), device="cuda:7")


def test_multi_billion_parameter_model_on_meta_allocates_nothing():
    """A ~3.2B-parameter stack built on the meta device (12.9 GB in fp32 if it were real)."""
    d, f, n = 4096, 16384, 24
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with torch.device("meta"):
        model = nn.Sequential(*[nn.Sequential(nn.Linear(d, f, bias=False), nn.GELU(), nn.Linear(f, d, bias=False))
                                for _ in range(n)])
        x = torch.randn(8, 512, d)
    w = Workload.from_torch(model, x)
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert w.params == n * 2 * d * f > 3e9
    assert w.fwd_flop_per_sample == 2 * w.params * 512
    assert w.tokens_per_sample == 512
    assert w.act_bytes_per_sample == pytest.approx(n * 2 * 512 * (d + f + f))
    assert grown_kib < 1_000_000   # well under the 12.9 GB the weights would need


def test_rejects_bad_input():
    with pytest.raises(ValueError, match="tensor"):
        Workload.from_torch(nn.Linear(2, 2), [1, 2, 3])
    with pytest.raises(ValueError, match="no parameters"):
        Workload.from_torch(nn.ReLU(), torch.randn(2, 2))


class _GPTBlock(nn.Module):
    """A pre-LN GPT block written out by hand (no dropout), with unfused or fused (SDPA) attention."""

    def __init__(self, h, heads, fused):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(h), nn.LayerNorm(h)
        self.qkv, self.proj = nn.Linear(h, 3 * h), nn.Linear(h, h)
        self.fc1, self.fc2 = nn.Linear(h, 4 * h), nn.Linear(4 * h, h)
        self.heads, self.fused = heads, fused

    def forward(self, x):
        b, s, h = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, s, 3, self.heads, h // self.heads).permute(2, 0, 3, 1, 4)
        if self.fused:
            y = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            att = (q @ k.transpose(-1, -2)) * (h // self.heads) ** -0.5
            att = att.masked_fill(torch.ones(s, s, dtype=torch.bool).triu(1), float("-inf")).softmax(-1)
            y = att @ v
        x = x + self.proj(y.transpose(1, 2).reshape(b, s, h))
        return x + self.fc2(nn.functional.gelu(self.fc1(self.ln2(x))))


class _GPTStack(nn.Module):
    def __init__(self, n, h, heads, fused):
        super().__init__()
        self.layers = nn.ModuleList(_GPTBlock(h, heads, fused) for _ in range(n))

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


@pytest.mark.parametrize("fused", [False, True])
def test_measured_layer_matches_the_analytic_builder(fused):
    """Cross-check of the two halves of this module: what autograd keeps for one hand-written GPT layer
    (measured) against the generalised Korthikanti formula of the catalogue builder (analytic)."""
    from gpusim.workload import TransformerSpec, build_from_spec

    b, s, h, heads = 2, 64, 128, 4
    measured = Workload.from_torch(_GPTStack(2, h, heads, fused), torch.randn(b, s, h))
    analytic = build_from_spec(TransformerSpec(2, h, heads, 1000, s, dropout=False, flash_attention=fused))
    layer_flop = sum(g.fwd_flop_per_sample for g in analytic.layers if g.name != "lm head")
    assert measured.fwd_flop_per_sample == pytest.approx(layer_flop, rel=1e-12)
    # within 1%: the measured side also keeps the causal mask and the LayerNorm statistics
    assert measured.act_block_bytes_per_sample == pytest.approx(analytic.act_block_bytes_per_sample, rel=0.01)
