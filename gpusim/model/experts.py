"""Expert parallelism (``ep``) for mixture-of-experts layers, as Megatron-Core's MoE layer runs it.

One MoE layer on one rank (Megatron-Core ``MoELayer`` with the all-to-all token dispatcher; Shazeer et al. 2017,
Lepikhin et al. "GShard" 2020, Fedus et al. "Switch Transformer" 2021 for capacity; DeepSeek-AI, "DeepSeek-V3
Technical Report" 2024 for shared and fine-grained experts):

- **Router**: a GEMM ``(n, E, h)`` on the rank's ``n`` tokens, then softmax/sigmoid and top-k over ``n E`` scores
  (memory-bound). With tensor parallelism the MoE layer's input is sequence-parallel, ``n = T / tp`` (Megatron
  requires sequence parallelism for MoE with tp > 1), ``T = b s / cp``.
- **Dispatch** (all-to-all over the EP group): every token copy goes to the rank holding its expert: each rank
  sends ``n k h e`` bytes, ``(ep - 1)/ep`` of it to other ranks (uniform routing); **combine** sends the expert
  outputs back, the same volume. The backward pass runs both again (the gradients): four all-to-alls per MoE
  layer and micro-batch.
- **Experts**: each rank holds ``E / ep`` experts, each split ``etp`` ways by expert tensor parallelism; the
  tokens per expert are ``n ep etp k / E`` (tokens per expert = tokens x top-k / experts), times the busiest
  rank's load over the mean (:func:`busiest_rank_load`: the sampling spread of a router balanced in expectation,
  or the capacity factor when experts are padded to capacity). The
  experts run as one grouped GEMM (Megatron ``--moe-grouped-gemm``, CUTLASS grouped GEMM) of ``E / ep``
  problems at their real shape ``(tokens per expert, f_e u / etp, h)`` and ``(tokens per expert, h, f_e / etp)``;
  with ``etp > 1`` the tokens are all-gathered and the outputs reduce-scattered over the etp group.
- **Load imbalance**: every MoE layer's all-to-all waits for the busiest rank of the EP group, which computes
  and receives more than the mean; see :func:`busiest_rank_load`.
- **Shared experts** run on every token like a dense FFN of width ``n_shared f_s`` split over tp.
- [issue 17] **Token permutation** at the byte counts of Megatron-Core's dispatcher kernels (:func:`permutation_bytes`:
  permute, chunk sort and unsort, unpermute; the same bytes backward), each of the router's and dispatcher's kernels
  paying the GPU's kernel tail (:data:`MOE_FIXED_GPU_KERNELS`).
- [issue 17] **FP8 expert casts**: Transformer Engine's grouped linear layers quantise each expert's input and output
  gradient in a separate pass over the routed tokens (:func:`expert_cast_bytes`), where the dense FFN fused them into
  its norm and activation.
- [issue 17] **Weight gradients** of the experts accumulate into the fp32 main gradient in the GEMM epilogue
  (:func:`wgrad_epilogue_bytes`): 8 bytes per weight element per micro-batch, which bounds a small expert's
  weight-gradient GEMM by memory.
- [issue 17] **Expert biases and a clamped GLU** (GPT-OSS) run as separate eager kernels around the experts' GEMMs
  (:func:`expert_extra_bytes`): the output bias times the routing probability per local expert, and the clamp of
  the fc1 output before the fused weighted activation.
- [issue 17] **The dispatcher's host sync** splits the forward into the launches after it and the GPU work before it
  (:func:`synced_forward_s`), which add where they do not hide each other.
- **Overlap**: Megatron-Core runs the all-to-alls on the compute stream by default (exposed); a fixed fraction
  ``ep_a2a_overlap_frac`` of it (a calibration's figure, default 0) hides here. The schedules that hide it under
  another micro-batch's compute (Megatron-Core's EP A2A overlap, DeepSeek-V3's DualPipe) are the scenario's
  ``ep_overlap`` and act on the step (:mod:`gpusim.model.dualpipe`).
- **Dispatcher** (``moe_dispatcher``): Megatron-Core's default ``alltoall`` dispatcher sends every token copy
  to its expert's rank with one NCCL all-to-all. DeepSeek-V3's (section 3.2.2; its open-source DeepEP library,
  Megatron-Core ``--moe-token-dispatcher-type flex --moe-enable-deepep``) is hierarchical: a token goes over
  InfiniBand once per node it is routed to (to the GPU of the same in-node index), and is forwarded over NVLink
  once to each GPU there that holds one of its experts, the two overlapped: :func:`hierarchical_dispatch_s`. Inside
  one NVLink domain it is a flat exchange of one row per (token, EP rank it reaches) [issue 17]: DeepEP's
  ``get_dispatch_layout`` (``is_token_in_rank``) and HybridEP send a token once per rank, not once per expert
  (:func:`expected_distinct_ranks`; the combine returns one row per rank the same way). With node-limited routing
  (DeepSeek-V3 section 2.1.2: at most ``M = 4`` nodes per token, the config's ``topk_group`` of ``n_group``
  groups) the nodes hit are at most ``M``.
- **FP8 dispatch** (``ep_fp8_dispatch``, DeepSeek-V3 section 3.3): when the layers train in FP8 the dispatch
  (forward) and the activation gradients before the down-projections (backward) travel in FP8 with one fp32
  scale per 1x128 tile; both combines stay in bf16.

The all-to-all is the collectives model's (:data:`gpusim.model.comm.ALL_TO_ALL`, NCCL's point-to-point
all-to-all: busbw factor ``(n - 1)/n``, the ``(n - d)/n`` of each rank's buffer that leaves its group of ``d``
fast-linked ranks goes over the rank's share of the NICs, the rest over NVLink), with the EP group's "nodes" being
the NVLink domains it spans (:func:`a2a_fabric`: on a GB200 NVL72 rack the 4-GPU trays share one 72-GPU domain).

Layers that are not MoE (DeepSeek-V3's first three) keep their dense FFN; a stage is charged the model's
fraction of MoE layers (``moe_frac``), i.e. the MoE layers spread evenly over the stages.

Pure numpy on broadcastable float64 arrays.
"""

from __future__ import annotations

import numpy as np

from gpusim.model import comm as C
from gpusim.model import fp8 as FP8
from gpusim.model import graphs as GRAPHS
from gpusim.model import placement as PLACE
from gpusim.model.sync import expected_max_std_normal
from gpusim.strategy import RECOMPUTE_CODES


def _f(a):
    return np.asarray(a, dtype=np.float64)


def tokens_per_expert(tokens, top_k, n_experts, ep=1.0, etp=1.0):
    """Tokens each expert of one rank computes, balanced: ``tokens x ep x etp x top_k / experts`` (``tokens``:
    the tokens one rank routes)."""
    return _f(tokens) * _f(ep) * _f(etp) * _f(top_k) / _f(n_experts)


def busiest_rank_load(tokens, top_k, n_experts, ep=1.0, etp=1.0, capacity=np.nan, imbalance_frac=np.nan,
                      skew_frac=np.nan):
    """Token copies the busiest rank of an EP group computes and receives in one MoE layer, over the mean.

    ``tokens``: the tokens one rank routes (per micro-batch); ``capacity``: the capacity factor (NaN: dropless);
    ``imbalance_frac``: a user's figure (busiest / mean - 1) that overrides the mechanism where ``ep > 1`` (NaN: none;
    ``--moe-imbalance``, :class:`gpusim.strategy.Strategy` ``moe_imbalance_frac``, has measured figures);
    ``skew_frac``: [issue 17] the coefficient of variation of the experts' shares of the routed tokens, a learned
    router's popularity skew (NaN or 0: a router balanced in expectation; ``--moe-expert-skew``).

    **Mechanism.** Even a router balanced in expectation (GShard's auxiliary loss, Lepikhin et al. 2020 section 2.2;
    Switch Transformer's, Fedus et al. 2021 section 2.2; DeepSeek-V3's auxiliary-loss-free bias, DeepSeek-AI 2024
    section 2.1.2, which balances the experts over a batch, not each micro-batch) sends each token to a random
    ``top_k``-subset of the ``E`` experts, so the copies that land on one rank's ``E / ep`` experts are a sum of
    hypergeometric counts: mean ``mu = tokens x etp x top_k`` (the etp group gathers its ranks' tokens), variance
    ``mu (1 - 1/ep)(E - k)/(E - 1)``. The ``ep`` loads sum to a constant, so they are ``sqrt(ep / (ep - 1))`` times
    the deviations of ``ep`` iid normals from their mean, and the expected busiest load is
    ``mu (1 + z_ep sqrt((E - k) / ((E - 1) mu)))`` with ``z_ep`` the expected maximum of ``ep`` standard normals
    (:func:`gpusim.model.sync.expected_max_std_normal`, by numerical integration: 1.42 at 8, 2.34 at 64). At the token
    counts of LLM training this is 1-3%: a lower bound on the imbalance of a real router. Measured: Megatron-Core
    with forced balance on 64 GB200 (EP64, 256 experts, top-8, 4096 tokens per rank) held the busiest EP rank at 1.013
    of the mean on average over the layers (marin-community/marin issue #7668); this formula gives 1.0128 there.

    **Skew** [issue 17]. A learned router sends more tokens to some experts than to others for the whole step: with
    the experts' shares spread with coefficient of variation ``c`` and placed on the ranks as Megatron-Core does
    (contiguous blocks of ``E / ep``, independent of popularity), a rank's mean share deviates by
    ``c^2 (ep - 1) / (E - 1)`` in variance (``E / ep`` drawn from ``E`` without replacement), so its iid equivalent
    adds ``c^2 ep / (E - 1)`` to the sampling variance above: the busiest rank is ``1 + z_ep sqrt(spread^2 + c^2 ep /
    (E - 1))``. The same skew weighs more at a larger ``ep`` (fewer experts per rank average it out). The marin
    measurement gives ``c``: a learned router with Megatron-Core's auxiliary-loss-free bias (update rate 1e-3) held the
    busiest rank at 1.338 at the start of training and 1.212 after 18 steps, ``c = 0.338 / (2.344 sqrt(64 / 255))
    = 0.288`` and ``0.181`` (normal extremes: a few very hot experts make it worse; those runs' worst layers read
    1.971 and 1.724).

    **Capacity.** With a capacity factor ``F`` the experts compute a fixed ``F x`` the mean, padded (GShard's and
    Switch's static ``[E, C, h]`` dispatch; Megatron-Core ``--moe-expert-capacity-factor`` with
    ``--moe-pad-expert-input-to-capacity``): load ``F``, which caps the imbalance (tokens beyond it are dropped) and
    pads below it. Dropless routing (MegaBlocks, Gale et al. 2022; Megatron-Core's default) computes every token:
    the load above. The step waits for the busiest rank at every MoE layer (its grouped GEMMs and the all-to-all
    volume it receives), so the factor applies to both.
    """
    E, k = _f(n_experts), _f(top_k)
    mu = _f(tokens) * _f(etp) * k
    spread2 = np.maximum(E - k, 0.0) / np.maximum((E - 1.0) * mu, 1e-300)
    c = np.nan_to_num(_f(skew_frac), nan=0.0)
    skew2 = c * c * _f(ep) / np.maximum(E - 1.0, 1.0)
    sampled = 1.0 + expected_max_std_normal(ep) * np.sqrt(spread2 + skew2)  # (the stragglers' figure: one table)
    user = _f(imbalance_frac)
    load = np.where(np.isfinite(user) & (_f(ep) > 1.0), 1.0 + user, sampled)  # one rank holds every expert: 1
    cap = _f(capacity)
    return np.where(np.isfinite(cap), cap, load)


def a2a_bytes_per_layer(tokens, top_k, d_model, elem_bytes):
    """Bytes one rank puts into one dispatch (or combine) all-to-all: ``tokens x top_k x h x e``."""
    return _f(tokens) * _f(top_k) * _f(d_model) * elem_bytes


DISPATCHERS = {"alltoall": 0, "deepep": 1}
ALLTOALL, DEEPEP = 0, 1
#: bytes per element of an FP8 dispatch: E4M3 + one fp32 scale per 1x128 tile (DeepSeek-V3 section 3.3.2)
FP8_DISPATCH_BYTES = 1.0 + 4.0 / 128.0


def expected_distinct_nodes(top_k, n_experts, n_nodes, max_nodes=np.inf):
    """Expected number of distinct nodes a token's ``top_k`` experts fall on, ``E`` experts spread evenly over
    ``N`` nodes, the experts a uniform ``k``-subset: ``N (1 - C(E - E/N, k) / C(E, k))`` (the chance a node holds
    none of the ``k``, by linearity of expectation), at most ``max_nodes`` (node-limited routing, DeepSeek-V3
    section 2.1.2). ``C(E - E/N, k) / C(E, k) = prod_{i<k} (E - E/N - i) / (E - i)``, evaluated with log-gamma."""
    from scipy.special import gammaln

    k, E, N = _f(top_k), _f(n_experts), np.maximum(_f(n_nodes), 1.0)
    rest = E - E / N  # experts on the other nodes
    with np.errstate(invalid="ignore"):
        log_none = gammaln(rest + 1.0) - gammaln(rest - k + 1.0) - gammaln(E + 1.0) + gammaln(E - k + 1.0)
    p_none = np.where(rest >= k, np.exp(log_none), 0.0)
    return np.minimum(N * (1.0 - p_none), np.maximum(_f(max_nodes), 1.0))


def max_nodes_of_groups(topk_groups, n_groups, n_nodes):
    """Nodes a token may reach when it may use ``topk_groups`` of ``n_groups`` expert groups (DeepSeek-V3's
    ``topk_group`` of ``n_group``) and the EP group spans ``n_nodes`` nodes: a group spans ``n_nodes / n_groups``
    nodes when there are more nodes than groups, one otherwise (groups aligned with nodes, as V3's 8 groups on
    its 8-node EP group). ``inf`` (no limit) where ``topk_groups`` is not finite."""
    M, G, N = _f(topk_groups), np.maximum(_f(n_groups), 1.0), _f(n_nodes)
    return np.where(np.isfinite(M), M * np.maximum(N / G, 1.0), np.inf)


def expected_distinct_ranks(top_k, n_experts, ep, topk_groups=np.inf, n_groups=1.0):
    """[issue 17] Expected EP ranks a token's ``top_k`` experts fall on, the ``E`` experts spread evenly over the
    ``ep`` ranks: :func:`expected_distinct_nodes` with the ranks as the nodes. With group-limited routing (DeepSeek-V3's
    ``topk_group`` ``M`` of ``n_group`` ``G`` groups) a token's experts lie in its ``M`` groups' ``M E / G`` experts,
    held by ``R`` ranks: ``M ep / G`` where groups span whole ranks (``ep >= G``), else the expected ranks ``M`` of
    ``G`` groups fall on when each rank holds ``G / ep`` of them (:func:`expected_distinct_nodes` again); the ``k`` experts
    then fall on :func:`expected_distinct_nodes` ``(k, M E / G, R)`` of those (the ``M`` groups' experts taken as spread
    evenly over the ``R`` ranks). DeepEP's and HybridEP's dispatch sends a token once to every rank that holds one of
    its experts (``get_dispatch_layout``'s ``is_token_in_rank`` / ``num_tokens_per_rank``, deepseek-ai/DeepEP), and the
    combine returns one row per such rank (Megatron-Core's ``MoEFlexTokenDispatcher`` unpermutes the local experts'
    outputs back to the received tokens before it), so this, not ``top_k``, is the rows per token they move.
    Hand-worked: top-8 of 256 experts on 8 ranks ``8 (1 - C(224, 8) / C(256, 8)) = 5.295``, on 64 ranks 7.676; with 4 of
    8 groups on 4 ranks the groups reach ``4 (1 - C(6, 4) / C(8, 4)) = 3.143`` ranks; one group per token, one rank."""
    k, E = _f(top_k), _f(n_experts)
    M, G, ep = _f(topk_groups), np.maximum(_f(n_groups), 1.0), np.maximum(_f(ep), 1.0)
    limited = np.isfinite(M) & (M < G)
    Mg = np.where(limited, M, G)
    ranks = np.where(ep >= G, ep * Mg / G, expected_distinct_nodes(Mg, G, ep))
    pool = np.where(limited, E * Mg / G, E)
    return np.where(limited, expected_distinct_nodes(k, pool, np.maximum(ranks, 1.0)),
                    expected_distinct_nodes(k, E, ep))


def hierarchical_dispatch_s(coll, *, tokens, top_k, n_experts, d_model, elem_bytes, ep, n_nodes, max_nodes,
                            nic_bytes_per_s, ranks_hit=None):
    """One hierarchical (DeepEP-style) dispatch or combine of one rank: ``(time_s, ib_bytes, nvlink_bytes)``.

    DeepSeek-V3 section 3.2.2: a token is sent over InfiniBand once to every *other* node it is routed to (the
    expected distinct nodes of :func:`expected_distinct_nodes` times ``(N - 1)/N``, the own node's share being
    reached over NVLink), ``tokens x that x h x e`` bytes through the GPU's share of the NICs; on arrival (and for
    the own node) it is forwarded over NVLink once to each GPU that holds one of its experts, ``tokens D h e (r - 1)/r``
    per GPU for ``r = ep / N`` EP ranks per node and ``D`` = ``ranks_hit``, the distinct EP ranks a token's experts fall
    on (:func:`expected_distinct_ranks`; default: without group limits) [issue 17: ``k`` copies before, as if each
    expert's copy travelled on its own]. DeepEP overlaps the two (a token forwarded while the next arrives),
    so the time is the larger. ``coll(kind, size, ranks, nodes[, inter])`` is the collectives model: the
    InfiniBand part is a :data:`~gpusim.model.comm.SEND_RECV` of the deduplicated bytes on the NIC share, the
    NVLink part an in-node :data:`~gpusim.model.comm.ALL_TO_ALL` over the ``r`` ranks."""
    N = np.maximum(_f(n_nodes), 1.0)
    r = _f(ep) / N
    per_copy = _f(tokens) * _f(d_model) * elem_bytes
    remote_nodes = expected_distinct_nodes(top_k, n_experts, N, max_nodes) * (N - 1.0) / N
    ib_bytes = per_copy * remote_nodes
    hit = expected_distinct_ranks(top_k, n_experts, ep) if ranks_hit is None else _f(ranks_hit)
    nvl_bytes = per_copy * hit
    ib = np.where(N > 1, coll(C.SEND_RECV, ib_bytes, 2.0, 2.0, _f(nic_bytes_per_s)), 0.0)
    nvl = coll(C.ALL_TO_ALL, nvl_bytes, r, 1.0)
    return np.maximum(ib, nvl), np.where(N > 1, ib_bytes, 0.0), nvl_bytes * (r - 1.0) / np.maximum(r, 1.0)


def ep_ranks_in_domain(ep, etp, domain, n_gpus, gpus_per_node):
    """EP ranks of the worst-placed rank's group that share its NVLink domain: the shared placement rule
    (:func:`gpusim.model.placement.group_placement`) for a group of ``ep`` ranks ``etp`` apart (Megatron-Core's
    experts' rank order ``etp-ep-edp-pp``) in the job's ``n_gpus`` allocated in NVLink-domain blocks (a 256-GPU job
    on NVL72 racks of 18 trays runs as 4 segments of 16 trays, Slurm ``--segment``: a 64-rank group sits in one)."""
    return PLACE.group_placement(ep, etp, n_gpus, gpus_per_node, domain)[0]


def a2a_fabric(ep, etp, domain, n_gpus, gpus_per_node, inter_busbw_bytes_per_s):
    """The EP group as :data:`gpusim.model.comm.ALL_TO_ALL` sees it: ``(n_nodes, inter_bytes_per_s)``.

    comm's "node" is a group of fast-linked ranks, so ``n_nodes`` = the NVLink domains the worst-placed rank's EP
    group spans (:func:`gpusim.model.placement.group_placement`), with ``r`` of its ranks in each; comm sends each
    rank's remote part through ``inter / r``, so ``inter`` = the NIC bandwidth of those ``r`` ranks, ``r x`` one
    GPU's share of its node's NICs (``inter_busbw_bytes_per_s / gpus_per_node``; an NVL72 tray's NICs serve its 4
    GPUs, not the rack's 72).
    """
    r, domains = PLACE.group_placement(ep, etp, n_gpus, gpus_per_node, domain)
    return domains, _f(inter_busbw_bytes_per_s) * PLACE.nic_share(r, gpus_per_node)


#: compute streams Transformer Engine runs a grouped GEMM's (and a grouped quantisation's) per-expert kernels on:
#: ``get_num_compute_streams() { static constexpr int num_compute_streams = 4; }`` (NVIDIA/TransformerEngine
#: ``transformer_engine/common/util/multi_stream.cpp``)
TE_COMPUTE_STREAMS = 4.0
#: [stop 51] operations of one MoE layer's forward pass besides its expert GEMMs, counted from the code of the releases
#: the published runs used (megatron-core 0.15.3, cross-checked against 0.16.0; Transformer Engine 2.10.0, against
#: 2.11.0; the all-to-all dispatcher with the fused router and permutation kernels the performance recipes set, tp 1,
#: aux-loss balancing): the router (``router.py`` ``TopKRouter``, ``moe_utils.py``): its GEMM 1, TE's fused score
#: function + top-k 1, the aux loss's score kernel, ``routing_map.sum``, TE's aux-loss kernel, the tracker's division
#: and ``add_`` 5 (7); the dispatcher's preprocessing (``token_dispatcher.py`` ``MoEAlltoAllTokenDispatcher.preprocess``
#: / ``dispatch_preprocess``): the tokens-per-expert sums, splits and a strided ``.contiguous()`` 6, their all-gather
#: over the tp x ep group 1, four asynchronous device-to-host copies of the splits 4, TE's permutation (three Triton
#: passes building the row map, one permuting) 4 (15); then the blocking ``event.synchronize`` 1, the dispatch
#: all-to-alls of tokens and probabilities 2, TE's chunk sort 2 (Triton), the SwiGLU with probabilities 1 (one
#: Inductor kernel behind ``torch.compile``), the unsort's strided copy and TE's chunk sort 3, the combine all-to-all 1
#: and TE's unpermutation 1 (11): 33. Megatron-Bridge's benchmark runs force-balance the router
#: (``--moe-router-force-load-balancing``: ``RandomSTE``, a ``clone`` and a ``normal_``), two more not counted here:
#: training runs route naturally. Until stop 51 this was 21, a reading of the code's structure that counted the
#: device-to-host copies, the permutation's row map and the unsort as one operation each and left the load-balancing
#: bookkeeping out
MOE_FIXED_FWD_KERNELS = 33.0

#: [stop 51] operations of one MoE layer's backward pass besides its expert GEMMs (the same reading; autograd runs each
#: differentiable operation's gradient, the counts, gather, copies and sync have none): the aux loss's scaler (a fill
#: and a multiply) 2, TE's aux-loss, score and top-k backward kernels 3, the gradient sum of the logits (two consumers)
#: 1, the router GEMM's backward (two fp32 casts in, two bf16 casts out, data and weight GEMMs) 6 (router: 12); the
#: unpermutation's, unsort's and sort's gradients (Triton) 3, the three all-to-alls 3, the permutation's gradient 1,
#: the SwiGLU's backward 1 (Inductor), the gradient sum of the layer's input (router and dispatcher) 1: 21. Until
#: stop 51 gpusim ran the forward's 21 again
MOE_FIXED_BWD_KERNELS = 21.0


#: of :data:`MOE_FIXED_FWD_KERNELS`, the operations Megatron-Core's all-to-all dispatcher runs *before* its host sync
#: (``cuda_sync_point = "before_ep_alltoall"``, ``_maybe_dtoh_and_synchronize``): the router's 7 and the
#: preprocessing's 15 (22); the other 11 (the sync, the dispatch all-to-alls, chunk sort, activation, unsort, combine,
#: unpermutation) and the experts' GEMMs and quantisations follow it
MOE_PRESYNC_FWD_KERNELS = 22.0

#: [stop 51] Transformer Engine's MXFP8 grouped GEMM swizzles the scaling factors of its A and B operand lists before
#: the per-expert GEMMs (``te_general_grouped_gemm`` -> ``multi_tensor_swizzle_scaling_factors``: one launch per list):
#: 2 per grouped GEMM, two grouped GEMMs forward (fc1, fc2) and four backward (their data and weight gradients)
MXFP8_SWIZZLE_FWD_KERNELS, MXFP8_SWIZZLE_BWD_KERNELS = 4.0, 8.0


def synced_forward_s(gpu_post_s, cpu_post_s, gpu_pre_s, cpu_pre_s):
    """Forward seconds of one MoE layer whose dispatcher waits for the GPU once per forward (:func:`dispatcher_syncs`).

    Between two such syncs the CPU and the GPU start together (the sync drained the stream: PyTorch CUDA semantics,
    a device-to-host copy blocks the host until the queued kernels finish) and run one segment: the *post*-sync part
    of the MoE layer (dispatch all-to-all, the experts' per-expert GEMMs and quantisations, combine, unpermutation:
    many small launches) and then the *pre*-sync part of the next layer (norms, attention, router, the dispatcher's
    preprocessing: few, long kernels). The GPU cannot start a kernel before the CPU has launched it, so the segment
    ends at ``max(max(c_post, g_post) + g_pre, c_post + c_pre)``: where the post part is launch-bound and the pre
    part GPU-bound, the launches of the one and the GPU time of the other *add* instead of hiding each other, which
    the ``max(GPU, CPU)`` of a sync-free layer (:func:`gpusim.model.compute.layer_cpu_s`) would assume. Megatron-Core's
    CUDA-graph and sync-free MoE work exists for this (NVIDIA/Megatron-LM PR #3496: "The AlltoAll dispatcher and
    GroupedGEMM rely on CPU-resident tensors for token-expert assignments, which breaks CUDA graph capture due to host
    synchronizations"). Hand-worked: post 0.6 ms CPU / 0.2 ms GPU, pre 0.2 ms CPU / 0.3 ms GPU: 0.9 ms (sync-free
    0.8 ms)."""
    gP, cP, gQ, cQ = _f(gpu_post_s), _f(cpu_post_s), _f(gpu_pre_s), _f(cpu_pre_s)
    return np.maximum(np.maximum(cP, gP) + gQ, cP + cQ)


def grouped_gemm_rounds(local_experts):
    """``(rounds, concurrent)``: Transformer Engine's grouped GEMM (``GroupedLinear``, Megatron-Core's
    ``TEGroupedMLP`` under ``--moe-grouped-gemm``; ``multi_stream_cublas_gemm`` in
    ``transformer_engine/common/gemm/cublaslt_gemm.cu``: "For now, we only have multi-stream cublas backend") launches
    one cuBLAS GEMM per local expert, the ``i``-th on compute stream ``i mod 4`` (:data:`TE_COMPUTE_STREAMS`), so
    ``E / ep`` experts run as ``ceil(E_local / 4)`` rounds of ``min(E_local, 4)`` concurrent GEMMs: each round fills
    the SMs with its own tiles (wave quantisation per round) and pays its own kernel tail. Megatron-Core's MoE README:
    "``--moe-grouped-gemm``: when there are multiple experts per rank, launch multiple local GEMM kernels in multiple
    streams to improve the utilization"."""
    local = np.maximum(_f(local_experts), 1.0)
    return np.ceil(local / TE_COMPUTE_STREAMS), np.minimum(local, TE_COMPUTE_STREAMS)


def moe_forward_kernels(local_experts, fp8):
    """Operations one MoE layer's forward pass launches beyond the dense layer's modules (whose CPU time
    ``gpusim.model.compute.layer_cpu_s`` counts, the grouped fc1 and fc2 in place of the dense FC1 and FC2):
    :data:`MOE_FIXED_FWD_KERNELS`, two GEMMs per local expert (fc1, fc2: TE's grouped GEMM launches one cuBLAS GEMM
    each) and, with FP8, two quantisations per local expert (their inputs: TE's ``nvte_multi_tensor_quantize``, one
    kernel per tensor), besides TE's per-expert ``torch.empty`` and ``torch.split`` calls (TE issue #1499, not
    counted); [stop 51] MXFP8 adds its scale swizzles (:data:`MXFP8_SWIZZLE_FWD_KERNELS`)."""
    local = _f(local_experts)
    code = np.asarray(fp8)
    return (MOE_FIXED_FWD_KERNELS + 2.0 * local + np.where(code > 0, 2.0 * local, 0.0)
            + np.where(code == FP8.MX, MXFP8_SWIZZLE_FWD_KERNELS, 0.0))


def moe_cpu_s(local_experts, fp8, launch_s, cuda_graphs=0.0, extra_fwd=0.0, extra_bwd=0.0, fused=False):
    """``(forward, backward, forward before the host sync)`` CPU seconds one MoE layer adds to a dense layer's
    launches (one micro-batch): the forward's operations (:func:`moe_forward_kernels`) at ``launch_s`` each
    (ModelParams ``launch_cpu_s`` times the host's slowdown); the backward runs the router's and dispatcher's
    gradients (:data:`MOE_FIXED_BWD_KERNELS`) and two GEMMs per forward GEMM (data and weight gradients), with FP8
    one quantisation per expert GEMM's output gradient: ``fixed + 4 E_local (+ 2 E_local)`` (MXFP8 with its scale
    swizzles, :data:`MXFP8_SWIZZLE_BWD_KERNELS`); the first :data:`MOE_PRESYNC_FWD_KERNELS` of the forward precede
    the dispatcher's sync. [issue
    17] The CUDA-graph scopes ``cuda_graphs`` (gpusim.model.graphs) replace the operations they capture by one
    replay each (:func:`gpusim.model.graphs.moe_cpu_ops`). ``extra_fwd`` / ``extra_bwd``: further eager operations
    after the sync (the expert bias and GLU clamp kernels of :func:`expert_extra_bytes`). [issue 17] ``fused``
    (Transformer Engine's fused grouped MLP): no per-expert GEMM or quantisation launch and no separate activation
    operation (the op's own CPU time is :func:`fused_mlp_cpu_s`, which the caller adds)."""
    local = _f(local_experts)
    fp8_on = np.asarray(fp8) > 0
    mx = np.asarray(fp8) == FP8.MX
    fz = np.asarray(fused, dtype=bool)
    per_f = np.where(fz, -1.0, 2.0 * local + np.where(fp8_on, 2.0 * local, 0.0)
                     + np.where(mx, MXFP8_SWIZZLE_FWD_KERNELS, 0.0)) + _f(extra_fwd)
    per_b = np.where(fz, -1.0, 4.0 * local + np.where(fp8_on, 2.0 * local, 0.0)
                     + np.where(mx, MXFP8_SWIZZLE_BWD_KERNELS, 0.0)) + _f(extra_bwd)
    fwd, bwd, pre = GRAPHS.moe_cpu_ops(MOE_FIXED_FWD_KERNELS, MOE_FIXED_BWD_KERNELS, per_f, per_b,
                                       MOE_PRESYNC_FWD_KERNELS, cuda_graphs)
    return fwd * _f(launch_s), bwd * _f(launch_s), pre * _f(launch_s)



#: [stop 52] Python and C++ bookkeeping items of one local expert in one MoE layer, forward and backward, beyond its
#: launches (stop 51's reading of megatron-core 0.15.3 / Transformer Engine 2.10.0, validation/README.md, "The MoE
#: layer's operations, counted"): Transformer Engine's ``GroupedLinear`` splits its input into one view per expert, sets
#: each expert's quantizers, fetches each expert's weight (workspace) and bias, saves each expert's input, weight copies
#: and bias for the backward (``prepare_for_saving``), keeps each expert's ``main_grad``; its backward splits the
#: output gradient again, allocates or looks up each weight gradient, clears each saved input and runs Megatron-Core's
#: per-parameter gradient hook for each expert weight (``handle_custom_ddp_from_mcore``, the DDP buffer's
#: ``register_grad_ready``); ``general_grouped_gemm`` builds each GEMM's descriptors anew
MOE_EXPERT_ITEMS_FWD, MOE_EXPERT_ITEMS_BWD = 26.0, 38.0


def expert_items_cpu_s(local_experts, item_s, python_mult, cuda_graphs=0.0, fused=False):
    """[stop 52] ``(forward, backward)`` CPU seconds of one MoE layer's per-expert bookkeeping (one micro-batch):
    :data:`MOE_EXPERT_ITEMS_FWD` / ``_BWD`` items per local expert at ``item_s`` each (ModelParams
    ``moe_expert_item_cpu_s``, an x86 host's) times the host's Python-level multiplier (hwdb ``host_python_mult``:
    Grace runs Python-level work 1.135x an x86 host, not the 2.75x of a full launch, ``host_cpu_dispatch_mult``).
    None where the experts are captured in a CUDA graph (the sync-free ``moe`` / ``full_iteration`` scopes) or run as
    Transformer Engine's fused grouped MLP (its measured CPU time, :func:`fused_mlp_cpu_s`, holds its own per-expert
    work). Hand-worked: 16 local experts, 2 us, an x86 host: 26 x 16 x 2 = 832 us forward, 38 x 16 x 2 = 1216 us
    backward; on Grace 944.3 / 1380.2 us."""
    on = ~np.asarray(fused, dtype=bool) & ~GRAPHS.sync_free(_f(cuda_graphs))
    per = _f(local_experts) * _f(item_s) * _f(python_mult)
    return np.where(on, MOE_EXPERT_ITEMS_FWD * per, 0.0), np.where(on, MOE_EXPERT_ITEMS_BWD * per, 0.0)


#: [issue 17] shares of the fused grouped MLP's CPU time (TransformerEngine issue #2897, GB200, 64 experts) spent in
#: per-expert work, which scales with the local experts: forward, the weight quantizers' initialisation (~90 us) and
#: ``tex.get_device_pointer_for_data_and_scales`` (">100 us") of ~1.2 ms; backward, the weight-gradient tensor
#: allocations (~350 us) and ``clear_tensor_data`` (~200 us) of ~2.1 ms. The rest (the cuDNN kernels' launches,
#: tensor reshapes, the op fuser's bookkeeping) is taken as fixed
FUSED_MLP_CPU_PER_EXPERT_FWD_FRAC = 190.0 / 1200.0
FUSED_MLP_CPU_PER_EXPERT_BWD_FRAC = 550.0 / 2100.0
#: the local experts of TransformerEngine issue #2897's measurement
FUSED_MLP_CPU_REF_EXPERTS = 64.0


def fused_mlp_cpu_s(local_experts, fwd_ref_s, bwd_ref_s):
    """[issue 17] ``(forward, backward)`` CPU seconds of Transformer Engine's fused grouped MLP (one MoE layer, one
    micro-batch, reference host) with ``local_experts`` experts: the measured op costs ``fwd_ref_s`` / ``bwd_ref_s``
    at 64 experts (ModelParams ``te_fused_moe_mlp_cpu_fwd_s`` / ``_bwd_s``), their per-expert shares
    (:data:`FUSED_MLP_CPU_PER_EXPERT_FWD_FRAC`, ``_BWD_FRAC``) scaled to the local experts. Hand-worked, 16 experts:
    forward 436.2 x (1 - 0.1583 + 0.1583 x 16 / 64) = 384.4 us, backward 763.4 x (1 - 0.2619 x 0.75) = 613.5 us."""
    frac = _f(local_experts) / FUSED_MLP_CPU_REF_EXPERTS
    fwd = _f(fwd_ref_s) * (1.0 - FUSED_MLP_CPU_PER_EXPERT_FWD_FRAC + FUSED_MLP_CPU_PER_EXPERT_FWD_FRAC * frac)
    bwd = _f(bwd_ref_s) * (1.0 - FUSED_MLP_CPU_PER_EXPERT_BWD_FRAC + FUSED_MLP_CPU_PER_EXPERT_BWD_FRAC * frac)
    return fwd, bwd


def fused_mlp_terms(gemm, *, tpe, local, h, fe, up, e, both, w_out, w_src):
    """[issue 17] ``(forward, backward)`` GPU seconds of the routed experts' GEMMs under Transformer Engine's CuTe DSL
    fused grouped MLP (``ForwardGroupedMLP_CuTeGEMMSwiGLU_MXFP8`` / ``BackwardGroupedMLP_CuTeGEMMDSwiGLU_MXFP8`` in
    ``transformer_engine/pytorch/ops/fused/``, cuDNN front-end kernels; since ``grouped_mlp.py`` @6ce52594 one fusion
    that also takes GPT-OSS's clamped GLU, ``ScaledClampedQGeGLU``, and expert biases, whose costs
    :func:`expert_extra_bytes` gives; Megatron-Core ``--use-transformer-engine-op-fuser`` with
    ``--moe-mlp-glu-interleave-size 32``), one MoE layer and micro-batch. The SwiGLU named below stands for either GLU.

    Forward, two kernels over all ``local`` experts (dynamic tile scheduling over the groups' ``padded_offsets``,
    so one wave quantisation for all experts' tiles, ``batch = local``): ``grouped_gemm_glu`` (fc1, then the SwiGLU
    times the routing probability and the MXFP8 quantisation of the result in its epilogue: it writes the bf16 fc1
    output the backward keeps, ``e`` bytes per output element, and the row- and column-wise FP8 copies of fc2's input
    with their scales, ``both`` bytes per element of that input, ``up`` times fewer) and ``grouped_gemm_quant`` (fc2).
    Backward: ``grouped_gemm_dswiglu`` (fc2's data gradient, the SwiGLU's backward from the kept fc1 output, read in
    the epilogue, and the FP8 copies of fc1's output gradient, written: ``up e`` read and ``up both`` written per
    output element), one kernel over all experts; fc2's weight gradient and fc1's data and weight gradients still
    run as ``general_grouped_gemm`` (one cuBLAS GEMM per expert on TE's compute streams: :func:`grouped_gemm_rounds`).
    The SwiGLU's own passes and the separate quantisations of fc2's input and fc1's output gradient are gone (the
    caller drops them); fc1's input and fc2's output gradient are still quantised, each by one kernel over all
    experts (``tex.group_quantize``, ``tex.split_quantize``). Shapes per expert: ``tpe`` tokens, ``h`` hidden,
    ``fe`` the expert FFN width per expert-TP rank; ``gemm(m, n, k, batch, out_bytes=, src_bytes=)`` is the
    caller's GEMM (FP8 where the row trains in FP8). Memory: the fused forward keeps what the unfused MXFP8 path
    keeps (the bf16 fc1 output for the SwiGLU's backward, the column-wise FP8 copies of both GEMMs' inputs, the
    routing probabilities), so the activation memory is not changed."""
    rounds, conc = grouped_gemm_rounds(local)
    up_f = gemm(tpe, fe * up, h, local, out_bytes=e + both / up)
    dn_f = gemm(tpe, h, fe, local, out_bytes=e)
    dn_dgrad = gemm(tpe, fe, h, local, out_bytes=up * both, src_bytes=up * e)
    dn_wgrad = rounds * gemm(fe, h, tpe, conc, out_bytes=w_out, src_bytes=w_src)
    up_b = rounds * (gemm(tpe, h, fe * up, conc, out_bytes=e)
                     + gemm(h, fe * up, tpe, conc, out_bytes=w_out, src_bytes=w_src))
    return up_f + dn_f, dn_dgrad + dn_wgrad + up_b


def dispatcher_syncs(dispatcher, capacity, ep, local_experts):
    """Whether the layer's token dispatch makes the CPU wait for the GPU (one device-to-host sync per MoE layer
    forward). Megatron-Core's ``MoEAlltoAllTokenDispatcher.preprocess`` (``token_dispatcher.py``) needs the input and
    output splits of the all-to-all on the host: dropless with ``ep > 1`` (or several local experts) sets
    ``cuda_sync_point = "before_ep_alltoall"``, token-drop without padding ``"before_permutation_1"``; only
    drop-and-pad to a static capacity (gpusim's capacity factor pads) returns before any sync. DeepEP's normal
    dispatch kernels also wait on the host for the received token counts (DeepEP README: the normal kernels are not
    CUDA-graph compatible for that reason), so both dispatchers sync when dropless."""
    return ~np.isfinite(_f(capacity)) & ((_f(ep) > 1) | (_f(local_experts) > 1)) & (np.asarray(dispatcher) >= 0)


#: GPU kernels among :data:`MOE_FIXED_FWD_KERNELS` (the 33 less the four collectives, whose time is the collectives
#: model's: the tokens-per-expert gather, the two dispatch all-to-alls and the combine; and less the four
#: device-to-host copies and the host sync, which run no kernel) and :data:`MOE_FIXED_BWD_KERNELS` (the 21 less the
#: three all-to-alls): each pays the GPU's per-kernel launch and tail (ModelParams ``kernel_tail_s``) as the dense
#: layer's element-wise kernels do
MOE_FIXED_GPU_KERNELS = MOE_FIXED_FWD_KERNELS - 4.0 - 5.0
MOE_FIXED_GPU_KERNELS_BWD = MOE_FIXED_BWD_KERNELS - 3.0


def permutation_bytes(tokens, recv_tokens, top_k, d_model, elem_bytes, *, sort_chunks, dispatcher=ALLTOALL,
                      ranks_hit=None):
    """HBM bytes of one MoE layer's token (un)permutation in one pass (the forward; the backward moves the same:
    each kernel's gradient is the reverse gather/scatter), for one rank.

    Megatron-Core's all-to-all dispatcher (``MoEAlltoAllTokenDispatcher`` in
    ``megatron/core/transformer/moe/token_dispatcher.py``; the fused kernels of ``--moe-permute-fusion``, Transformer
    Engine's ``moe_permute_with_probs`` / ``moe_unpermute`` and ``moe_sort_chunks_by_index``):

    - **permute** the rank's ``n`` tokens into ``n k`` expert-ordered copies before the dispatch: read ``n h e``,
      write ``n k h e``, with each copy's fp32 routing probability (``4 n k``);
    - **sort chunks** after the dispatch when the rank holds several experts and ``ep > 1`` (``dispatch_postprocess``:
      ``sort_chunks_by_idxs`` reorders the received ``r`` copies from source-rank-major to expert-major): read and write
      ``r h e`` and the probabilities (``8 r``); the combine's **unsort** moves the expert outputs back: ``2 r h e``;
    - **unpermute** after the combine: read the ``n k`` returned copies, write the ``n`` summed tokens.

    ``n = tokens`` (the rank's own), ``r = recv_tokens`` (the copies it computes). The hierarchical dispatcher
    (DeepEP / HybridEP: ``MoEFlexTokenDispatcher``) receives deduplicated tokens, ``n D`` rows on average for ``D`` =
    ``ranks_hit`` (:func:`expected_distinct_ranks`; default ``k``), and permutes them to its experts after the dispatch
    (read ``n D``, write ``r`` rows) and back before the combine (read ``r``, write ``n D``): ``2 (n D + r) h e``
    (``4 r h e`` where ``D = k`` and ``r = n k``, i.e. without expert tensor parallelism).
    Hand-worked (all-to-all, ``n = 4096``, ``k = 8``, ``r = n k``, ``h = 2048``, bf16, sorted):
    ``(2 x 4096 x 9 + 4 x 32768) x 2048 x 2 + 4 x 4096 x 8 + 8 x 32768 = 8.3925e8`` bytes, against the
    ``4 r h e = 5.3687e8`` of one read and write of the copies before and after the experts."""
    n, r, k = _f(tokens), _f(recv_tokens), _f(top_k)
    he = _f(d_model) * elem_bytes
    sort = np.asarray(sort_chunks, dtype=bool)
    a2a = (2.0 * n * (1.0 + k) + np.where(sort, 4.0 * r, 0.0)) * he + 4.0 * n * k + np.where(sort, 8.0 * r, 0.0)
    hit = k if ranks_hit is None else _f(ranks_hit)
    flex = 2.0 * (n * hit + r) * he
    return np.where(np.asarray(dispatcher) == DEEPEP, flex, a2a)


def sorts_chunks(dispatcher, ep, local_experts):
    """Whether the all-to-all dispatcher reorders the received tokens by local expert (``ep > 1`` and more than one
    local expert: ``MoEAlltoAllTokenDispatcher`` builds ``sort_input_by_local_experts`` only then)."""
    return (np.asarray(dispatcher) == ALLTOALL) & (_f(ep) > 1) & (_f(local_experts) > 1)


def expert_cast_bytes(mode, *, T, recv_tokens, h, f, fe, fs, up, tp, etp, hx=None):
    """``(forward, backward)`` bytes of the FP8 quantisations an MoE layer makes against the dense FFN's (per rank and
    micro-batch; zero without FP8).

    Transformer Engine's ``GroupedLinear`` quantises each expert's input itself (``tex.split_quantize`` over the
    ``m_splits``: one separate quantisation per expert, :data:`gpusim.model.fp8.CAST_BYTES` per element): the fc1 input
    is the permuted tokens (``r h``: no norm kernel to fuse the cast into, the pre-MLP norm's bf16 output also feeds the
    router), the fc2 input the output of Megatron-Core's fused ``weighted_bias_swiglu`` (``r f_e / etp``: a bf16 write,
    ``TEGroupedMLP`` in ``megatron/core/transformer/moe/experts.py``); backward, the output gradients entering the two
    data-gradient GEMMs (``r h`` after the combine's backward, ``r f_e u / etp`` after the activation's). The dense
    FFN they replace had the FC1 input cast fused into its norm and the FC2 input and FC1 output-gradient casts fused
    into its activation (:func:`gpusim.model.fp8.layer_cast_s`), and the FC2 output gradient cast separately. Shared
    experts keep the dense FFN's fused casts at their width ``f_s`` and take the norm's fusion (without them the
    norm's fused cast is gone). Hand-worked (MXFP8, ``T = 4096``, ``r = 32768``, ``h = 2048``, ``f = 6144``,
    ``f_e = 768``, no shared experts, ``u = 2``, ``tp = etp = 1``): cast ``4 + 2/32``, norm-fused ``4 + 2/32``,
    act-fused ``2/32`` bytes; forward ``32768 x 2816 x 4.0625 - 4096 x 6144 x 0.0625 - 4096 x 2048 x 4.0625``
    = 3.3921e8 bytes, backward ``32768 x 3584 x 4.0625 - 4096 x 12288 x 0.0625 - 4096 x 2048 x 4.0625`` = 4.3988e8."""
    code = np.asarray(mode)
    per, norm, act = FP8.cast_bytes_per_elem(code), FP8.norm_fused_bytes_per_elem(code), FP8.act_fused_bytes_per_elem(code)
    r, T = _f(recv_tokens), _f(T)
    h, f, fe, fs, up, tp, etp = (_f(v) for v in (h, f, fe, fs, up, tp, etp))
    hx = h if hx is None else _f(hx)  # [stop 48] the experts' input and output width (LatentMoE's latent)
    shared = fs > 0
    fwd = (r * (hx + fe / etp) * per + T * fs / tp * act
           - T * f / tp * act - np.where(shared, 0.0, T * h * norm))
    bwd = (r * (hx + fe * up / etp) * per + T * fs * up / tp * act
           - T * f * up / tp * act - np.where(shared, 0.0, T * h * per))
    on = code > 0
    return np.where(on, fwd, 0.0), np.where(on, bwd, 0.0)


def expert_extra_bytes(routed_tokens, d_model, expert_ff_local, local_experts, elem_bytes, *, bias, clamp,
                       fused=False):
    """[issue 17] What an MoE layer's expert biases and clamped GLU add, per rank and micro-batch, as Megatron-Core's
    ``TEGroupedMLP`` runs them without the fused grouped-MLP kernels (``megatron/core/transformer/moe/experts.py``,
    ``megatron/core/fusions/fused_bias_geglu.py``): ``(fwd_bytes, bwd_bytes, clamp_fwd_bytes, kept_bytes,
    fwd_kernels, bwd_kernels)``, HBM bytes and GPU kernels; ``clamp_fwd_bytes`` is the part a ``moe_act``
    recomputation runs again in the backward pass; ``kept_bytes`` the activation memory added (none under
    ``moe_act``, which recomputes the clamp).

    - **Clamp** (``activation_func_clamp_value``, GPT-OSS's ``swiglu_limit``): ``weighted_bias_quick_geglu_impl``
      chunks the fc1 output ``[r, 2 f]``, clamps both halves and concatenates them in eager PyTorch before its
      compiled weighted-GeGLU kernel (which :func:`moe_layer_terms` charges): two clamps (each reads and writes
      ``r f e``) and the concatenation (reads and writes ``2 r f e``): ``8 r f e`` bytes, 3 kernels. Backward: each
      clamp's gradient reads the output gradient and the clamp's input and writes the input gradient (``3 r f e``
      each), and the chunk's gradient concatenates the halves (``4 r f e``): ``10 r f e``, 3 kernels. The clamp's
      input (``2 r f e``) is kept for its gradient besides the clamped copy the GeGLU function keeps.
    - **Bias** (``add_bias_linear`` on the experts, GPT-OSS): fc2 skips its bias (``skip_bias_add=True``) and
      ``TEGroupedMLP._apply_bias`` adds bias x routing probability per local expert in eager PyTorch: a multiply
      (writes ``r_e h e``), an add (reads two, writes one) and the concatenation of the experts' outputs (reads,
      writes): ``6 r h e``, ``2 E_local + 1`` kernels. Backward: the multiply's gradients, ``g p`` summed over the
      tokens for the bias and ``g b`` summed over ``h`` for the probability (each writes, reads back and reads the
      gradient: ``3 r h e``): ``6 r h e``, ``4 E_local`` kernels. fc1's bias is added in the grouped GEMM's
      epilogue (``skip_bias_add=False``) and its gradient in the weight-gradient GEMM's: nothing extra.

    **Fused** (``fused``: Transformer Engine's CuTe DSL grouped MLP, :func:`fused_mlp_terms`; its newest
    ``transformer_engine/pytorch/ops/fused/grouped_mlp.py`` @6ce52594 fuses ``ScaledClampedQGeGLU``, GPT-OSS's
    clamped GLU, and hands both GEMMs their biases, ``_pack_grouped_linear_bias_for_cudnn`` -> ``bias_tensor``): the
    clamp runs in fc1's GLU epilogue and the biases in the GEMMs' epilogues, so no forward pass and nothing kept;
    fc1's bias gradient comes out of the backward GLU kernel's epilogue (cuDNN's
    ``BlockScaledMoEGroupedGemmDgluDbiasKernel``, named in NVIDIA/cudnn-frontend issue 256), and fc2's bias and
    routing-probability gradients from one Triton kernel that reads fc2's output gradient once
    (``compute_grouped_dbias_dscales``): ``r h e`` bytes, 1 kernel, backward only.

    ``r``: the rank's routed token copies, ``f``: one expert's FFN width on this rank (``f_e / etp``), ``h``: the
    model width, ``e``: bytes per element. Hand-worked (GPT-OSS-120B, EP 64, micro-batch 4 x 4096: ``r = 65536``,
    ``f = h = 2880``, two local experts, bf16): forward ``14 x 65536 x 2880 x 2 = 5.28e9`` bytes, 8 kernels;
    backward ``16 x ... = 6.04e9`` bytes, 11 kernels; clamp forward ``3.02e9``; kept ``7.55e8``; fused: forward 0,
    backward ``65536 x 2880 x 2 = 3.77e8`` bytes and 1 kernel."""
    r, h, f, loc = _f(routed_tokens), _f(d_model), _f(expert_ff_local), _f(local_experts)
    b_on, c_on = np.asarray(bias, dtype=bool), np.asarray(clamp, dtype=bool)
    fz = np.asarray(fused, dtype=bool)
    clamp_f = np.where(c_on & ~fz, 8.0 * r * f * elem_bytes, 0.0)
    fwd = clamp_f + np.where(b_on & ~fz, 6.0 * r * h * elem_bytes, 0.0)
    bwd = np.where(fz, np.where(b_on, r * h * elem_bytes, 0.0),
                   np.where(c_on, 10.0 * r * f * elem_bytes, 0.0) + np.where(b_on, 6.0 * r * h * elem_bytes, 0.0))
    kept = np.where(c_on & ~fz, 2.0 * r * f * elem_bytes, 0.0)
    k_f = np.where(fz, 0.0, np.where(c_on, 3.0, 0.0) + np.where(b_on, 2.0 * loc + 1.0, 0.0))
    k_b = np.where(fz, np.where(b_on, 1.0, 0.0), np.where(c_on, 3.0, 0.0) + np.where(b_on, 4.0 * loc, 0.0))
    return fwd, bwd, clamp_f, kept, k_f, k_b


def fp8_padding_bytes(routed_tokens, d_model, elem_bytes, pads):
    """[issue 17] ``(fwd_bytes, bwd_bytes, kernels)`` per rank and micro-batch (kernels per pass) of the FP8 row
    padding around an MoE layer's experts: FP8 / MXFP8 GEMMs need each expert's token count to be a multiple of 16 /
    32, and with the all-to-all dispatcher Megatron-Core's ``TEGroupedMLP.forward`` pads the dispatched tokens and
    their probabilities (``Fp8Padding``) before fc1 and strips the padding off fc2's output (``Fp8Unpadding``) unless
    ``moe_router_padding_for_fp8`` padded the routing map instead (``skip_routed_expert_padding``; DeepEP and HybridEP
    fuse it into their permutation; a sync-free layer under the ``moe`` / ``full_iteration`` graph scopes cannot read
    the counts on the host, so its recipes pad in the router). Transformer Engine's ``Fp8Padding`` / ``Fp8Unpadding``
    (``transformer_engine/pytorch/module/fp8_padding.py``, ``fp8_unpadding.py``) copy the rows in one kernel each
    (``tex.fused_multi_row_padding`` / ``_unpadding``): the tokens ``r h e`` read and written twice forward, and the
    gradients twice backward; the fp32 probabilities (``4 r`` read and written) once each way. ``pads``: where it
    applies (FP8 layers, the all-to-all dispatcher, no router padding). Hand-worked (``r = 131072``, ``h = 2048``,
    bf16): ``4 x 131072 x 2048 x 2 + 8 x 131072 = 2.148e9`` bytes each way, 3 kernels."""
    r = _f(routed_tokens)
    on = np.asarray(pads, dtype=bool)
    b = np.where(on, 4.0 * r * _f(d_model) * elem_bytes + 8.0 * r, 0.0)
    return b, b, np.where(on, 3.0, 0.0)


def wgrad_epilogue_bytes(grad_accum_fusion, elem_bytes, main_bytes=4.0):
    """``(out_bytes, src_bytes)`` per weight element of one weight-gradient GEMM: accumulated into the fp32 main
    gradient in the GEMM's epilogue with gradient-accumulation fusion (write 4, read 4, or ``main_bytes`` 2 each for a
    bf16 main gradient, [issue 17] Strategy.grad_dtype: Megatron-LM's
    ``--gradient-accumulation-fusion``; Transformer Engine ``GroupedLinear(fuse_wgrad_accumulation=True)`` for the
    experts), else a 16-bit gradient written (``elem_bytes``, nothing read; the separate accumulation kernel is
    :mod:`gpusim.model.llm`'s). For an expert whose ``k``-dimension is its few hundred tokens this traffic, ``8 h f_e``
    bytes per GEMM whatever the tokens, can outweigh the GEMM's FLOPs: ``2 m h f_e`` FLOPs over ``8 h f_e`` bytes is
    ``m / 4`` FLOP per byte, below an H100's FP8 ridge (about 600) for ``m`` < 2,400 tokens per expert."""
    fused = np.asarray(grad_accum_fusion, dtype=bool)
    main = _f(main_bytes)  # [issue 17] 2 for a bf16 main-gradient buffer (Strategy.grad_dtype)
    return np.where(fused, main, _f(elem_bytes)), np.where(fused, main, 0.0)


def moe_params_per_rank(x: dict, tp):
    """Parameters per rank of the FFN of one layer, averaged over the layers, against the dense FFN's
    (``delta``), and the routed experts' part (``expert``): router ``h E``, shared experts / tp, ``E / ep``
    experts / etp."""
    moe_frac = _f(x.get("moe_frac", 0.0))
    h, E = _f(x["d_model"]), _f(x["n_experts"])
    ep, etp = _f(x.get("ep", 1.0)), _f(x.get("expert_tp", 1.0))
    mats = _f(x["ffn_mats"])
    lat = _f(x.get("moe_latent_dim", 0.0))  # [stop 48] LatentMoE: experts at the latent width, two projections
    expert_rank = E / ep * np.where(lat > 0, lat, h) * _f(x["expert_ff_dim"]) * mats / etp
    moe_rank = h * E + h * _f(x["shared_ff_dim"]) * mats / tp + expert_rank + 2.0 * h * lat
    return moe_frac * (moe_rank - h * _f(x["ff_dim"]) * mats / tp), moe_frac * expert_rank


def moe_layer_terms(x: dict, p, *, gemm, T, tp, e, mem_rate, domain, g, coll) -> dict:
    """The change an MoE layer makes to one layer's forward/backward time, memory and parameters per rank,
    averaged over the layers (``moe_frac`` of them are MoE): ``delta_f_s``, ``delta_b_s`` (compute, replacing the
    dense FFN; ``delta_f_s`` includes ``sync_f_s``, the dispatcher's host-sync round trip), ``cpu_f_s``,
    ``cpu_b_s`` (the CPU launch time the MoE layer adds to the dense layer's, :func:`moe_cpu_s`, which
    :mod:`gpusim.model.llm` sets against the GPU time as for every layer), ``ep_f_s``, ``ep_b_s`` (exposed
    all-to-all), ``delta_params`` (per rank, per layer),
    ``expert_params`` (the routed experts per rank, per layer: sharded over the expert-data-parallel group),
    ``delta_act_bytes`` (per layer and micro-batch). All zero for a dense row. ``coll(kind, size, ranks, nodes[,
    inter])`` is the collectives model's time on the row's fabric (``inter``: another inter-node bandwidth)."""
    moe_frac = _f(x.get("moe_frac", 0.0))
    zero = np.zeros(np.shape(moe_frac))
    if not np.any(moe_frac > 0):
        return dict.fromkeys(("delta_f_s", "delta_b_s", "ep_f_s", "ep_b_s", "delta_params", "expert_params",
                              "delta_act_bytes", "cpu_f_s", "cpu_b_s"), zero)
    h = _f(x["d_model"])
    E, k = _f(x["n_experts"]), _f(x["top_k"])
    fe, fs, fd = _f(x["expert_ff_dim"]), _f(x["shared_ff_dim"]), _f(x["ff_dim"])
    # [stop 48] LatentMoE: the router reads the full width h; the dispatched tokens, the experts' inputs and outputs,
    # their permutations, all-to-alls and FP8 copies are ``lat`` wide (hx below)
    lat = _f(x.get("moe_latent_dim", 0.0))
    hx = np.where(lat > 0, lat, h)
    up = _f(x["ffn_mats"]) - 1.0
    ep, etp = _f(x.get("ep", 1.0)), _f(x.get("expert_tp", 1.0))

    # [issue 17] every GEMM writes a 16-bit output; a weight gradient with gradient-accumulation fusion (Megatron-Core
    # --gradient-accumulation-fusion; TE GroupedLinear's fuse_wgrad_accumulation for the experts) accumulates into the
    # fp32 main gradient: reads 4 and writes 4 bytes per weight element each micro-batch (wgrad_epilogue_bytes), as
    # gpusim.model.llm charges the dense layer's
    w_out, w_src = wgrad_epilogue_bytes(x.get("grad_accum_fusion", True), e, x.get("grad_bytes_per_param", 4.0))

    def linear(m_rows, n_out, k_in, batch=1.0):
        fw = gemm(m_rows, n_out, k_in, batch, out_bytes=e)
        return fw, (gemm(m_rows, k_in, n_out, batch, out_bytes=e)
                    + gemm(k_in, n_out, m_rows, batch, out_bytes=w_out, src_bytes=w_src))

    # the dense FFN the MoE layer replaces (as gpusim.model.llm computes it)
    d_up_f, d_up_b = linear(T, fd * up / tp, h)
    d_dn_f, d_dn_b = linear(T, h, fd / tp)
    dense_act = T * fd / tp * e * (up + 1.0) / mem_rate
    dense_f = d_up_f + d_dn_f + dense_act
    dense_b = d_up_b + d_dn_b + 2.0 * dense_act
    # router on the sequence-parallel tokens
    n_tok = T / tp
    r_f, r_b = linear(n_tok, E, h)
    score_bytes = n_tok * E * 4.0 * 3.0  # fp32 logits: read, probabilities written, top-k read
    router_f = r_f + score_bytes / mem_rate
    router_b = r_b + 2.0 * score_bytes / mem_rate
    # routed experts: grouped GEMM over the E / ep local experts at the busiest rank's load
    load = busiest_rank_load(n_tok, k, E, ep, etp, x["moe_capacity"], x["moe_imbalance_frac"],
                             x.get("moe_expert_skew_frac", np.nan))
    tpe = tokens_per_expert(n_tok, k, E, ep, etp) * load
    local = E / ep
    rounds, conc = grouped_gemm_rounds(local)  # TE's grouped GEMM: per-expert cuBLAS GEMMs on 4 streams
    x_up_f, x_up_b = linear(tpe, fe * up / etp, hx, conc)
    x_dn_f, x_dn_b = linear(tpe, hx, fe / etp, conc)
    x_up_f, x_up_b, x_dn_f, x_dn_b = (rounds * t for t in (x_up_f, x_up_b, x_dn_f, x_dn_b))
    routed_tokens = tpe * local
    # [issue 17] the dispatcher's (un)permutations as Megatron-Core runs them (permutation_bytes), the same bytes
    # backward; the router's, permutations' and splits' kernels each pay the GPU's kernel tail (MOE_FIXED_GPU_KERNELS)
    dispatcher = np.asarray(x.get("moe_dispatcher", ALLTOALL))
    # [issue 17] the flex dispatcher moves one row per (token, EP rank holding one of its experts)
    hit = expected_distinct_ranks(k, E, ep, x.get("moe_topk_groups", np.inf), x.get("moe_n_groups", 1.0))
    perm_bytes = permutation_bytes(n_tok, routed_tokens, k, hx, e,
                                   sort_chunks=sorts_chunks(dispatcher, ep, local), dispatcher=dispatcher,
                                   ranks_hit=hit * load)
    x_act = routed_tokens * fe / etp * e * (up + 1.0)
    fixed_tail = MOE_FIXED_GPU_KERNELS * p.kernel_tail_s
    fixed_tail_b = MOE_FIXED_GPU_KERNELS_BWD * p.kernel_tail_s
    fp8_code = np.asarray(x.get("fp8_mode", 0))
    # [issue 17] Transformer Engine's fused grouped MLP (fused_mlp_terms): its GEMMs replace the grouped ones, the
    # SwiGLU's passes and two of the four per-expert quantisations (MXFP8 only: gpusim.rules.check_fused_mlp)
    fused = np.asarray(x.get("moe_fused_mlp", False), dtype=bool) & (fp8_code == FP8.MX)
    if np.any(fused):
        both = FP8.cast_bytes_per_elem(fp8_code) - e  # the row- and column-wise FP8 copies and scales, written
        fz_f, fz_b = fused_mlp_terms(gemm, tpe=tpe, local=local, h=hx, fe=fe / etp, up=up, e=e, both=both,
                                     w_out=w_out, w_src=w_src)
        x_up_f = np.where(fused, fz_f, x_up_f)
        x_dn_f = np.where(fused, 0.0, x_dn_f)
        x_up_b = np.where(fused, fz_b, x_up_b)
        x_dn_b = np.where(fused, 0.0, x_dn_b)
        x_act = np.where(fused, 0.0, x_act)
    experts_f = x_up_f + x_dn_f + (x_act + perm_bytes) / mem_rate + fixed_tail
    experts_b = x_up_b + x_dn_b + (2.0 * x_act + perm_bytes) / mem_rate + fixed_tail_b
    # [issue 17] FP8: the experts' inputs and output gradients quantised by separate per-expert kernels
    # (expert_cast_bytes), each a kernel of its own; the fused grouped MLP quantises fc2's input and fc1's output
    # gradient in its GEMMs' epilogues and the other two by one kernel over all experts each
    if np.any(fp8_code > 0):
        cast_f, cast_b = expert_cast_bytes(fp8_code, T=T, recv_tokens=routed_tokens, h=h, f=fd, fe=fe, fs=fs, up=up,
                                           tp=tp, etp=etp, hx=hx)
        if np.any(fused):
            per = FP8.cast_bytes_per_elem(fp8_code)
            cast_f = cast_f - np.where(fused, routed_tokens * fe / etp * per, 0.0)
            cast_b = cast_b - np.where(fused, routed_tokens * fe * up / etp * per, 0.0)
        quant_tail = np.where(fp8_code > 0, np.where(fused, 1.0, 2.0 * local) * p.kernel_tail_s, 0.0)
        # [stop 51] the grouped GEMMs' MXFP8 scale swizzles (MXFP8_SWIZZLE_*_KERNELS), small kernels: their tails
        swz = (fp8_code == FP8.MX) & ~fused
        experts_f = experts_f + cast_f / mem_rate + quant_tail + np.where(swz, MXFP8_SWIZZLE_FWD_KERNELS, 0.0) * p.kernel_tail_s
        experts_b = experts_b + cast_b / mem_rate + quant_tail + np.where(swz, MXFP8_SWIZZLE_BWD_KERNELS, 0.0) * p.kernel_tail_s
        # [issue 17] the FP8 row padding of the all-to-all dispatcher's tokens (fp8_padding_bytes)
        # (not under the sync-free graph scopes: TEGroupedMLP's padding reads the token counts on the host, which a
        # captured, sync-free layer cannot; its recipes pad in the router or the fused dispatch instead)
        pads = ((fp8_code > 0) & (dispatcher == ALLTOALL) & ~GRAPHS.sync_free(_f(x.get("cuda_graphs", 0.0)))
                & ~np.asarray(x.get("moe_router_padding", False), dtype=bool))
        pad_f, pad_b, pad_k = fp8_padding_bytes(routed_tokens, hx, e, pads)
        experts_f = experts_f + pad_f / mem_rate + pad_k * p.kernel_tail_s
        experts_b = experts_b + pad_b / mem_rate + pad_k * p.kernel_tail_s
    # [issue 17] the experts' output bias (times the routing probability, per expert) and the GLU clamp, eager kernels
    bias_on = np.asarray(x.get("moe_expert_bias", False), dtype=bool)
    clamp_on = np.asarray(x.get("moe_glu_clamp", False), dtype=bool)
    extra_f_ops = extra_b_ops = clamp_f = extra_keep = 0.0
    if np.any(fp8_code > 0):  # [issue 17] the FP8 padding's kernels, launched after the sync
        extra_f_ops = extra_b_ops = pad_k
    if np.any(bias_on | clamp_on):
        xb_f, xb_b, clamp_f, extra_keep, xk_f, xk_b = expert_extra_bytes(
            routed_tokens, hx, fe / etp, local, e, bias=bias_on, clamp=clamp_on, fused=fused)
        experts_f = experts_f + xb_f / mem_rate + xk_f * p.kernel_tail_s
        experts_b = experts_b + xb_b / mem_rate + xk_b * p.kernel_tail_s
        extra_f_ops, extra_b_ops = extra_f_ops + xk_f, extra_b_ops + xk_b
    # shared experts: a dense FFN of width fs on every token, tp-split
    s_up_f, s_up_b = linear(T, fs * up / tp, h)
    s_dn_f, s_dn_b = linear(T, h, fs / tp)
    s_act = T * fs / tp * e * (up + 1.0) / mem_rate
    has_shared = fs > 0
    shared_f = np.where(has_shared, s_up_f + s_dn_f + s_act, 0.0)
    shared_b = np.where(has_shared, s_up_b + s_dn_b + 2.0 * s_act, 0.0)
    # [stop 48] LatentMoE's projections on the rank's tokens (weights replicated): fc1_latent_proj h -> lat before the
    # dispatch, fc2_latent_proj lat -> h after the combine (a linear layer's forward and backward each)
    has_lat = lat > 0
    if np.any(has_lat):
        l1_f, l1_b = linear(n_tok, lat, h)
        l2_f, l2_b = linear(n_tok, h, lat)
        lat_f, lat_b = np.where(has_lat, l1_f + l2_f, 0.0), np.where(has_lat, l1_b + l2_b, 0.0)
        extra_f_ops = extra_f_ops + np.where(has_lat, 2.0, 0.0)
        extra_b_ops = extra_b_ops + np.where(has_lat, 4.0, 0.0)
    else:
        lat_f = lat_b = 0.0
    moe_f = router_f + experts_f + shared_f + lat_f
    moe_b = router_b + experts_b + shared_b + lat_b
    # all-to-all dispatch + combine (forward), the same backward (their gradients); expert-TP gathers and scatters
    # the tokens. What the busiest rank receives (dispatch) and sends (combine) is ``load`` times the mean.
    a2a_nodes, a2a_inter = a2a_fabric(ep, etp, domain, _f(x["gpus_per_node"]) * _f(x["n_nodes"]), g,
                                      x["inter_busbw_bytes_per_s"])
    fp8_disp = np.asarray(x.get("ep_fp8_dispatch", False), dtype=bool) & (np.asarray(x.get("fp8_mode", 0)) > 0)
    e_disp = np.where(fp8_disp, FP8_DISPATCH_BYTES, e)
    hier = (np.asarray(x.get("moe_dispatcher", ALLTOALL)) == DEEPEP) & (a2a_nodes > 1)
    max_nodes = max_nodes_of_groups(x.get("moe_topk_groups", np.inf), x.get("moe_n_groups", 1.0), a2a_nodes)

    flex = np.asarray(x.get("moe_dispatcher", ALLTOALL)) == DEEPEP
    rows = np.where(flex, hit, k)  # [issue 17] rows per token: DeepEP / HybridEP send a token once per rank it reaches

    def one_a2a(elem):
        flat = coll(C.ALL_TO_ALL, a2a_bytes_per_layer(n_tok, rows, hx, elem) * load, ep, a2a_nodes, a2a_inter)
        if not np.any(hier):
            return flat
        tree, _, _ = hierarchical_dispatch_s(coll, tokens=n_tok * load, top_k=k, n_experts=E, d_model=hx,
                                             elem_bytes=elem, ep=ep, n_nodes=a2a_nodes,
                                             max_nodes=max_nodes, nic_bytes_per_s=a2a_inter / (ep / a2a_nodes),
                                             ranks_hit=hit)
        return np.where(hier, tree, flat)

    a2a_combine = one_a2a(e)
    a2a_dispatch = np.where(fp8_disp, one_a2a(e_disp), a2a_combine) if np.any(fp8_disp) else a2a_combine
    a2a = 0.5 * (a2a_dispatch + a2a_combine)
    etp_nodes = np.maximum(1.0, etp / domain)
    etp_comm = np.where(etp > 1, coll(C.REDUCE_SCATTER, routed_tokens * hx * e, etp, etp_nodes)  # outputs
                        + coll(C.ALL_GATHER, routed_tokens * hx * e, etp, etp_nodes), 0.0)  # inputs
    hidden = 1.0 - p.ep_a2a_overlap_frac
    ep_f = (2.0 * a2a + etp_comm) * hidden
    ep_b = (2.0 * a2a + etp_comm) * hidden
    # [issue 17] the MoE layer's CPU launches and the dispatcher's host sync (one round trip per forward)
    host = _f(x.get("host_cpu_mult", 1.0))
    graphs = _f(x.get("cuda_graphs", 0.0))  # [issue 17] CUDA-graph scopes (gpusim.model.graphs)
    cpu_f, cpu_b, pre_cpu_f = moe_cpu_s(local, fp8_code, p.launch_cpu_s * host, graphs, extra_f_ops, extra_b_ops,
                                        fused=fused)
    if np.any(fused):  # [issue 17] the fused op's own CPU time in place of the grouped linear layers' modules
        ff, fb = fused_mlp_cpu_s(local, p.te_fused_moe_mlp_cpu_fwd_s, p.te_fused_moe_mlp_cpu_bwd_s)
        keep = ~GRAPHS.sync_free(graphs)  # (``moe`` and ``full_iteration`` capture it)
        mlp_f = (1.0 - GRAPHS.ATTN_CPU_SHARE_FWD) * p.te_layer_cpu_fwd_s * p.te_layer_cpu_fp8_mult
        mlp_b = (1.0 - GRAPHS.ATTN_CPU_SHARE_BWD) * p.te_layer_cpu_bwd_s * p.te_layer_cpu_fp8_mult
        cpu_f = cpu_f + np.where(fused & keep, np.maximum(ff - mlp_f, 0.0) * host, 0.0)
        cpu_b = cpu_b + np.where(fused & keep, np.maximum(fb - mlp_b, 0.0) * host, 0.0)
    # [stop 52] the per-expert bookkeeping the launch counts do not see (expert_items_cpu_s), after the host sync
    it_f, it_b = expert_items_cpu_s(local, p.moe_expert_item_cpu_s, _f(x.get("host_python_mult", 1.0)), graphs,
                                    fused)
    cpu_f, cpu_b = cpu_f + it_f, cpu_b + it_b
    syncs = dispatcher_syncs(x.get("moe_dispatcher", ALLTOALL), x["moe_capacity"], ep, local) & ~GRAPHS.sync_free(graphs)
    sync_f = np.where(syncs, p.launch_cpu_s * host, 0.0)
    moe_f = moe_f + sync_f
    # [issue 17] the part of the layer after the sync: its GPU time and its CPU launches (synced_forward_s)
    post_gpu_f = experts_f + shared_f + (np.where(has_lat, l2_f, 0.0) if np.any(has_lat) else 0.0)
    post_cpu_f = cpu_f - pre_cpu_f
    delta_params, expert_params = moe_params_per_rank(x, tp)
    # activations kept for backward: the dense FFN's against router scores, the dispatched tokens (fc1's input, once:
    # Megatron-Core multiplies the routing probabilities inside the experts' activation, ``activation_func_with_probs``
    # in megatron/core/transformer/moe/experts.py, so the unpermutation keeps no token copy, and permutation and
    # all-to-all backward need only the routing map and the splits), their probabilities (fp32), the expert
    # activations and the shared experts'
    dense_keep = T / tp * e * fd * (up + 1.0)
    moe_keep = (n_tok * E * 4.0 + routed_tokens * (hx * e + 4.0) + routed_tokens * e * fe / etp * (up + 1.0)
                + T / tp * e * fs * (up + 1.0) + n_tok * lat * e)  # [stop 48] fc2_latent_proj's input
    delta_act = moe_frac * (moe_keep - dense_keep)
    delta_f, delta_b = moe_frac * (moe_f - dense_f), moe_frac * (moe_b - dense_b)
    # [issue 12] memory saving (gpusim.model.llm.activation_bytes_per_layer): with the FP8 activation cache the
    # dispatched tokens (the experts' up-projection input), the SwiGLU inputs and the down-projection inputs of the
    # routed and shared experts are kept at ``c`` bytes (DeepSeek-V3 section 3.3.2; the experts' outputs awaiting the
    # combine stay 16-bit); ``moe_act`` (Megatron-Core --recompute-modules moe_act, DeepSeek-V3 section 3.3.2
    # "recompute its output") keeps no routed SwiGLU output and runs the SwiGLU again in the backward pass. The
    # dense FFN's saving, which gpusim.model.llm took for every layer, is given back for the MoE layers.
    rc_full = np.asarray(x.get("recompute", 0)) == RECOMPUTE_CODES["full"]
    # [stop 52] Megatron-Core's ``moe`` recompute module (gpusim.strategy.RecomputeModule): the block keeps its input
    # only, so nothing below applies to it (a SwiGLU recomputed inside a recomputed block changes nothing more)
    moe_rc = np.asarray(x.get("recompute_moe", False), dtype=bool) & ~rc_full
    fp8_mode = np.asarray(x.get("fp8_mode", 0))
    fp8_act = np.asarray(x.get("fp8_act", False), dtype=bool) & (fp8_mode > 0)
    moe_act = np.asarray(x.get("recompute_moe_act", False), dtype=bool) & ~rc_full & ~moe_rc
    if np.any(fp8_act) or np.any(moe_act):
        c = FP8.act_cache_bytes(fp8_mode, fp8_act, e)
        fe_local = fe / etp
        moe_saved = (routed_tokens * hx * (e - c) + routed_tokens * fe_local * ((e - c) * up + np.where(moe_act, e, e - c))
                     + T / tp * fs * (e - c) * (up + 1.0))
        dense_saved = T / tp * fd * (e - c) * (up + 1.0)
        delta_act = delta_act - moe_frac * (moe_saved - dense_saved)
        # forward: the SwiGLU inputs quantised (read e, write c) where cached in FP8; backward: moe_act's SwiGLU again
        cast = np.where(fp8_act, (routed_tokens * fe_local + T / tp * (fs - fd)) * up * (e + c) / mem_rate, 0.0)
        delta_f = delta_f + moe_frac * cast
        delta_b = delta_b + moe_frac * np.where(moe_act, x_act / mem_rate + p.kernel_tail_s, 0.0) \
            + np.where(rc_full, moe_frac * cast, 0.0)
    if np.any(bias_on | clamp_on):  # [issue 17] moe_act runs the clamp again in the backward and keeps no clamp input
        delta_b = delta_b + moe_frac * np.where(moe_act & clamp_on, clamp_f / mem_rate + 3.0 * p.kernel_tail_s, 0.0)
        delta_act = delta_act + moe_frac * np.where(moe_act, 0.0, extra_keep)
    # [issue 17] FP8 under Transformer Engine (not the FP8 activation cache above): the experts' GroupedLinear layers
    # keep FP8 copies of their inputs (fp8.te_moe_saved_input_delta_bytes), as gpusim.model.llm counts the dense ones'
    te_mode = np.where(fp8_act, FP8.NONE, fp8_mode)
    if np.any(te_mode > 0):
        delta_act = delta_act + moe_frac * FP8.te_moe_saved_input_delta_bytes(
            te_mode, routed_tokens=routed_tokens, tokens=T / tp, h=h, fe_local=fe / etp, fs=fs, elem_bytes=e,
            moe_act=moe_act, hx=hx)
    # [stop 52] the ``moe`` recompute module: ``tensor_parallel.checkpoint`` of the MoE block keeps only its input, the
    # pre-MLP norm's output (counted by gpusim.model.llm as the dense FFN-up input); none of ``moe_keep`` nor the FP8
    # copies; the dense FFN internals llm counted for every layer (``dense_keep``, at the FP8 cache's size where it
    # caches them) are given back. The block's activations exist once more, for the one layer whose backward reruns
    # it (``moe_rc_buf_bytes``, as full recomputation's buffer); its forward runs again in the backward pass
    # (``moe_fwd_s``, the router, experts, shared experts and the dispatcher's host sync; the all-to-alls and CPU
    # launches are ``ep_f_s`` / ``cpu_f_s`` again: gpusim.model.llm adds them)
    if np.any(moe_rc):
        dense_counted = dense_keep
        if np.any(fp8_act):
            c0 = FP8.act_cache_bytes(fp8_mode, fp8_act, e)
            dense_counted = dense_keep - np.where(fp8_act, T / tp * fd * (e - c0) * (up + 1.0), 0.0)
        delta_act = np.where(moe_rc, -moe_frac * dense_counted, delta_act)
    return {"delta_f_s": delta_f, "delta_b_s": delta_b,
            # [stop 52] the ``moe`` recompute module's rerun forward and the buffer it holds (computed where it is on)
            "moe_rc": moe_rc & (moe_frac > 0), "moe_fwd_s": moe_frac * moe_f,
            "moe_rc_buf_bytes": np.where(moe_rc & (moe_frac > 0), moe_keep, 0.0),
            "ep_f_s": moe_frac * ep_f, "ep_b_s": moe_frac * ep_b, "delta_params": delta_params,
            "expert_params": expert_params, "delta_act_bytes": delta_act,
            "tokens_per_expert": tpe, "a2a_s": a2a, "sync_f_s": moe_frac * sync_f, "busiest_load": load,
            "cpu_f_s": moe_frac * cpu_f, "cpu_b_s": moe_frac * cpu_b,
            "syncs": syncs & (moe_frac > 0), "post_gpu_f_s": moe_frac * post_gpu_f,
            # [issue 17] one MoE layer's expert computation (routed + shared experts; the "mlp" node of Megatron-Core's
            # EP A2A overlap, gpusim.model.dualpipe.layer_pair_comm_s), forward and backward, not averaged over layers
            "mlp_f_s": experts_f + shared_f, "mlp_b_s": experts_b + shared_b,
            "post_cpu_f_s": moe_frac * post_cpu_f,
            # [issue 17] one MoE layer's token routing and permutation (the Megatron-Core MoE paper's "token routing
            # and permutation", arXiv:2603.07685 section 1.2): the router (gating GEMM, scores, top-k), the
            # (un)permutations and the dispatcher's small kernels; the last two are part of ``mlp_*_s``
            "route_f_s": router_f + perm_bytes / mem_rate + fixed_tail,
            "route_b_s": router_b + perm_bytes / mem_rate + fixed_tail_b}


def moe_flop_delta_per_token(x: dict):
    """Model FLOPs of one token's FFN in an MoE layer against the dense FFN's, forward, averaged over layers:
    router ``2 h E`` + ``top_k`` experts + shared experts - dense FFN (matmuls counted in full)."""
    moe_frac = _f(x.get("moe_frac", 0.0))
    if not np.any(moe_frac > 0):
        return np.zeros(np.shape(moe_frac))
    h = _f(x["d_model"])
    mats = _f(x["ffn_mats"])
    k, E = _f(x["top_k"]), _f(x["n_experts"])
    lat = _f(x.get("moe_latent_dim", 0.0))  # [stop 48] LatentMoE: experts at the latent width, two projections
    moe = (2.0 * h * E + 2.0 * mats * (k * np.where(lat > 0, lat, h) * _f(x["expert_ff_dim"])
                                       + h * _f(x["shared_ff_dim"])) + 4.0 * h * lat)
    return moe_frac * (moe - 2.0 * h * mats * _f(x["ff_dim"]))
