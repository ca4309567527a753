"""[issue 17] Muon: what its step costs and keeps, per parameter of a transformer workload.

Muon (K. Jordan et al., "Muon: An optimizer for hidden layers in neural networks", 2024,
https://kellerjordan.github.io/posts/muon/; scaled to LLMs by J. Liu et al., "Muon is Scalable for LLM Training",
arXiv:2502.16982, which trained Moonlight; Kimi K2 and GLM-4.5 trained with it) is SGD with Nesterov momentum whose
update of each 2-D weight is orthogonalised by Newton-Schulz iterations. PyTorch's ``torch.optim.Muon``
(``torch/optim/_muon.py``, PyTorch 2.9 and later) runs, per 2-D parameter: ``buf.lerp_(grad)``, the Nesterov
``grad.lerp(buf)``, a bf16 copy transposed to be wide, a division by its norm, then ``ns_steps = 5`` iterations of
``A = X X^T``, ``B = b A + c A A`` (``addmm``), ``X = a X + B X`` (``addmm``), a decoupled weight decay and the update.
It keeps one state, the fp32 momentum buffer (Adam keeps two); the parameters it does not take (embeddings, the LM
head, norms and biases: "Muon should only be used for hidden weight layers", its docs and both papers) stay on AdamW.

Per parameter, with ``a`` the matrix's smaller side and ``b`` its larger: each iteration is ``2 a^2 b`` (the Gram
matrix) + ``2 a^3`` (its square) + ``2 a^2 b`` (the product with ``X``) FLOPs, so five iterations cost
``5 (4 a + 2 a^2 / b)`` FLOPs per weight, a GEMM workload in bf16 that the step adds to its memory traffic. Liu et al.
(section 2.3) put Muon's extra FLOPs under 1% of training at the batch sizes LLMs train at; the model here charges
them at the GPU's bf16 GEMM ceiling.

On a Megatron layout Muon runs as Megatron-Core's layer-wise distributed Muon (``dist_muon``: each data-parallel
rank orthogonalises whole matrices), whose gradients are all-reduced where the distributed optimizer reduce-scatters
them (``gpusim.model.step._distopt_comm``); the step's work is shared over the ranks as the distributed optimizer
shards Adam's. Not modelled: the Newton-Schulz GEMMs on a tensor-parallel shard instead of the whole matrix, and
Moonshot's MuonClip (QK-clip). The part shapes are those of :func:`gpusim.workload.flops.breakdown`: attention as ``d x q_dim``
matrices (its grouped key and value projections are narrower, so this is an upper bound there), the dense MLP
``d x d_ff``, each routed expert ``io x d_ff_expert`` (``io`` the LatentMoE width where there is one), the router
``d x n_experts``; the parts without a single shape (Mamba mixers, latent projections, multi-token prediction
modules, anything else) as ``d x d`` squares.
"""

from __future__ import annotations

#: Newton-Schulz iterations per step (``torch.optim.Muon``'s ``ns_steps`` default; Jordan's and Moonshot's five)
NS_STEPS = 5
#: the parts of :func:`gpusim.workload.flops.breakdown` that stay on AdamW (not hidden 2-D weights)
ADAMW_PARTS = frozenset({"embeddings", "lm head", "norms"})


def newton_schulz_flop(m: float, n: float, steps: int = NS_STEPS) -> float:
    """FLOPs of orthogonalising one ``m x n`` matrix by ``steps`` Newton-Schulz iterations (module docstring): with
    ``a = min(m, n)``, ``b = max(m, n)``, ``steps (4 a^2 b + 2 a^3)``. Hand-worked: a DeepSeek-style expert's
    ``2048 x 7168`` up-projection, 5 steps: ``5 (4 x 2048^2 x 7168 + 2 x 2048^3) = 6.872e11``."""
    a, b = float(min(m, n)), float(max(m, n))
    return steps * (4.0 * a * a * b + 2.0 * a ** 3)


def _part_shape(spec, part: str) -> tuple[float, float]:
    d = float(spec.d_model)
    if part == "attention":
        return d, float(spec.q_dim)
    if part == "mlp":
        return d, float(spec.ff_dim)
    if part == "experts":
        return float(spec.expert_io_dim), float(spec.expert_ff_dim)
    if part == "shared experts":
        return d, float(spec.shared_ff_dim)
    if part == "router":
        return d, float(spec.n_experts)
    return d, d


def muon_split(workload) -> tuple[float, float]:
    """``(share, flop_per_param)``: the share of ``workload``'s parameters Muon steps (the hidden 2-D weights; the
    rest stays on AdamW) and the Newton-Schulz FLOPs per such parameter (module docstring). Raises
    :class:`~gpusim.errors.ScenarioError` for a workload without the transformer shapes it needs."""
    from gpusim.errors import ScenarioError
    from gpusim.workload.flops import breakdown

    spec = getattr(workload, "transformer", None)
    parts = breakdown(workload) if spec is not None else []
    if not parts:
        raise ScenarioError(f"the Muon optimizer needs the shapes of the model's weight matrices, which gpusim knows for "
                            f"transformers (the catalogue's language models, a config.json); {workload.id!r} is not "
                            f"one: choose adam, adamw, sgd or sgd-momentum")
    muon = [(p["part"], float(p["params"])) for p in parts if p["part"] not in ADAMW_PARTS and p["params"] > 0]
    muon_params = sum(n for _, n in muon)
    if muon_params <= 0:
        raise ScenarioError(f"{workload.id!r} has no hidden 2-D weights for Muon to step: use adam or adamw")
    flop = 0.0
    for part, n in muon:
        m_, n_ = _part_shape(spec, part)
        flop += n * newton_schulz_flop(m_, n_) / (m_ * n_)
    return muon_params / float(workload.params), flop / muon_params
