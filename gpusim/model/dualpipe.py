"""Expert-parallel all-to-all hidden under another micro-batch's compute: Megatron-Core's EP A2A overlap and
DeepSeek-V3's DualPipe (the scenario's ``ep_overlap``).

**Mechanism** (DeepSeek-AI, "DeepSeek-V3 Technical Report", arXiv:2412.19437, section 3.2.1 and Figure 4): the
forward chunk of one micro-batch and the backward chunk of another run as a pair, each one's dispatch and combine
all-to-alls under the other's attention and MLP computation. A pair whose all-to-alls take ``A`` and whose
computation takes ``W`` alone runs for ``max(W + s A, A)``: while the communication runs its kernels hold a share
``s`` of the SMs (DeepSeek-V3 section 3.2.2: 20 of the H800's 132 SMs; :attr:`~gpusim.params.ModelParams.ep_comm_sms`),
so the computation advances at ``1 - s`` of its speed meanwhile (:func:`overlapped_s`). The hidden part is thus
bounded by the computation it runs under, not a fixed fraction. The cost ``s A`` is reported with the exposed
all-to-all (as the data-parallel model reports its communication kernels' interference with the communication).

- ``none`` (0): no pairing: Megatron-Core's default (``--overlap-moe-expert-parallel-comm`` off).
- ``1f1b`` (1): Megatron-Core's EP A2A overlap (``--overlap-moe-expert-parallel-comm``, 2025), the
  1F1B-interleaved form: in the steady state of 1F1B the forward of micro-batch ``i + pp - 1`` pairs with the
  backward of micro-batch ``i``; the warm-up forwards and cool-down backwards of the critical (first) stage,
  ``pp - 1`` of each (``1`` with ``pp = 1``: a backward cannot pair with its own forward), over ``vp`` chunks when
  interleaved, run unpaired (:func:`paired_frac`). The pipeline bubble is 1F1B's. [issue 17] A pair hides each
  all-to-all only under the computation of its own phase of the layer (:func:`layer_pair_comm_s`, Megatron-Core's
  ``TransformerLayerSchedulePlan.run``), not under the step's whole computation.
- ``dualpipe`` (2): DeepSeek-V3's bidirectional pipeline (section 3.2.1, Figure 5, Table 2): micro-batches are
  fed from both ends, every chunk runs in an overlapped pair ("both all-to-all and PP communication can be fully
  hidden"), the steady-state pipeline sends hide in what is left of the pair's computation, and the bubble is
  ``(PP/2 - 1)(F&B + B - 3W)`` instead of 1F1B's ``(PP - 1)(F + B)`` (:func:`dualpipe_bubble_s`; ``F&B`` the
  pair's time, ``B`` a full backward chunk, ``W`` its weight-gradient part). It keeps two copies of the
  parameters (Table 2: 2x; each rank holds stage ``i`` of one direction and ``PP - 1 - i`` of the other) and
  ``PP + 1`` micro-batches of activations instead of ``PP`` (:data:`PARAM_COPIES`, :func:`activation_mult`).
  It needs an even ``pp``, an even number of micro-batches of at least ``pp`` and no interleaving
  (deepseek-ai/DualPipe README: "the pipeline stages and micro-batches be divisible by 2").

Pure numpy on broadcastable float64 arrays.
"""

from __future__ import annotations

import numpy as np

EP_OVERLAPS = {"none": 0, "1f1b": 1, "dualpipe": 2}
NONE, ONE_F_ONE_B, DUALPIPE = 0, 1, 2
#: copies of the parameters (and their gradients) a DualPipe rank keeps (DeepSeek-V3 Table 2)
PARAM_COPIES = 2.0
#: the weight-gradient part of a full backward chunk: the weight-gradient GEMM has the data-gradient GEMM's FLOPs
#: (Narayanan et al. SC'21; gpusim.model.llm), the assumption ``T_B = T_W`` of Qi et al., "Zero Bubble Pipeline
#: Parallelism" (ICLR 2024) section 2 with ``B`` the input-gradient part
WGRAD_FRAC = 0.5


def _f(a):
    return np.asarray(a, dtype=np.float64)


def overlapped_s(comm_s, compute_s, sm_frac):
    """``(exposed_s, interference_s)`` of ``comm_s`` of communication run concurrently with ``compute_s`` of
    computation while the communication kernels hold ``sm_frac`` of the SMs: the pair takes
    ``max(compute + sm_frac comm, comm)``, i.e. ``compute`` plus ``exposed + interference`` with
    ``exposed = max(comm - compute / (1 - s), 0)`` (communication outlasting the slowed computation) and
    ``interference = s min(comm, compute / (1 - s))`` (computation slowed while both run)."""
    A, W = _f(comm_s), _f(compute_s)
    s = np.clip(_f(sm_frac), 0.0, 0.99)
    window = W / (1.0 - s)
    return np.maximum(A - window, 0.0), s * np.minimum(A, window)


def layer_pair_comm_s(attn_f_s, attn_b_s, mlp_f_s, mlp_b_s, a2a_s, sm_frac):
    """[issue 17] ``(exposed_s, interference_s)`` of one MoE layer's four all-to-alls (dispatch and combine, forward
    and backward, ``a2a_s`` each) when Megatron-Core's EP A2A overlap runs the forward of that layer for one
    micro-batch beside its backward for another (``--overlap-moe-expert-parallel-comm``).

    ``TransformerLayerSchedulePlan.run`` (NVIDIA/Megatron-LM ``megatron/core/models/common/
    model_chunk_schedule_plan.py``) runs the pair in three phases on a compute and a communication stream::

        comm_stream: combine_bwd | dispatch_fwd -> dispatch_bwd  | combine_fwd
        comp_stream: attn_fwd    | mlp_bwd -> mlp_bwd_dw -> mlp_fwd | attn_bwd

    (``attn``: attention, norms, router and the dispatcher's preprocessing; ``mlp``: the experts and shared experts).
    Each phase ends when both streams are done, so an all-to-all hides only under its own phase's computation:
    phases 1 and 3 take :func:`overlapped_s` of one all-to-all against the attention's forward / backward; phase 2
    overlaps the two dispatches with the MLP's backward and forward, and its order adds two bounds: the forward MLP
    waits for its dispatch (``A + mlp_f``) and the backward dispatch for the MLP's data gradient (``mlp_bwd_data + A``,
    the data gradient taken as :data:`WGRAD_FRAC` of the backward's compute remaining). The four all-to-alls expose
    ``t1 + t2 + t3 - (attn_f + attn_b + mlp_f + mlp_b)``; the interference part is the SM share ``s`` of the computation
    they run under (as :func:`overlapped_s`). Where the computation of every phase outlasts its communication, only
    the interference remains; a layer whose all-to-alls are long against its attention exposes them in phases 1 and 3
    whatever the MLP's length, which the whole-step balance ``max(W + sA, A)`` would hide. Hand-worked (s = 0):
    attention 1 + 2, MLP 2 + 4, all-to-alls 1.5 each: phase 1 1.5, phase 2 max(6, 3, 1.5 + 2, 2 + 1.5) = 6, phase 3
    max(1.5, 2) = 2: 9.5 of 9 computation, 0.5 exposed of 6 (the whole-step balance: 0)."""
    af, ab, mf, mb = _f(attn_f_s), _f(attn_b_s), _f(mlp_f_s), _f(mlp_b_s)
    A = _f(a2a_s)
    e1, i1 = overlapped_s(A, af, sm_frac)
    e3, i3 = overlapped_s(A, ab, sm_frac)
    e2, i2 = overlapped_s(2.0 * A, mb + mf, sm_frac)
    t2 = np.maximum.reduce([mb + mf + e2 + i2, A + mf, (1.0 - WGRAD_FRAC) * mb + A])
    total = (af + e1 + i1) + t2 + (ab + e3 + i3) - (af + ab + mf + mb)
    interf = i1 + i2 + i3
    return np.maximum(total - interf, 0.0), interf


def paired_frac(mode, pp, vp, n_micro):
    """Fraction of the micro-batches whose chunks run in overlapped forward/backward pairs (module docstring)."""
    mode, pp, vp, m = np.asarray(mode), _f(pp), np.maximum(_f(vp), 1.0), np.maximum(_f(n_micro), 1.0)
    one_f = np.maximum(m - np.maximum(pp - 1.0, 1.0) / vp, 0.0) / m
    return np.where(mode == DUALPIPE, 1.0, np.where(mode == ONE_F_ONE_B, one_f, 0.0))


def dualpipe_bubble_s(pair_s, bwd_s, wgrad_s, pp):
    """DualPipe's bubble, ``(PP/2 - 1)(F&B + B - 3W)`` (DeepSeek-V3 Table 2), at least 0."""
    return np.maximum(_f(pp) / 2.0 - 1.0, 0.0) * np.maximum(_f(pair_s) + _f(bwd_s) - 3.0 * _f(wgrad_s), 0.0)


def activation_mult(mode, pp, vp=1.0):
    """Activations held by the first stage relative to 1F1B's ``pp`` micro-batches: ``(PP + 1) / PP`` for DualPipe
    (DeepSeek-V3 Table 2). [issue 17] Megatron-Core's EP A2A overlap in the interleaved schedule warms up one more
    model chunk (megatron/core/pipeline_parallel/schedules.py, forward_backward_pipelining_with_interleaving: ``if
    overlap_moe_expert_parallel_comm: num_warmup_microbatches += 1``), so the first stage holds ``pp vp + pp``
    chunk-micro-batches instead of ``pp vp + pp - 1`` (Narayanan et al. SC'21's ``pp (1 + (pp - 1) / (pp vp))``
    micro-batches, gpusim.model.llm): ``(pp vp + pp) / (pp vp + pp - 1)`` for ``1f1b`` with ``vp > 1`` (hand-worked:
    pp 4, vp 2 -> 12 / 11); the non-interleaved form is left at 1 (the source shown is the interleaved schedule's).
    1 otherwise."""
    pp = np.maximum(_f(pp), 1.0)
    vp = np.maximum(_f(vp), 1.0)
    chunks = pp * vp + pp - 1.0
    one_f = np.where(vp > 1.0, (chunks + 1.0) / chunks, 1.0)
    mode = np.asarray(mode)
    return np.where(mode == DUALPIPE, (pp + 1.0) / pp, np.where(mode == ONE_F_ONE_B, one_f, 1.0))


def step_terms(mode, lt: dict, *, pp, vp, n_micro, sm_frac, p2p_overlap_frac) -> dict:
    """The step parts the schedule changes, from :func:`gpusim.model.llm.llm_terms`'s ``lt`` (which carries the
    per-layer pair fractions of :func:`layer_pair_comm_s`):
    ``ep_comm_exposed_s`` (exposed all-to-all + the SM interference), ``pp_p2p_exposed_s`` and ``pp_bubble_s``
    (per optimizer step). Rows with ``mode`` 0 keep ``lt``'s values."""
    mode = np.asarray(mode)
    pp, vp, m = _f(pp), _f(vp), np.maximum(_f(n_micro), 1.0)
    ep, comp = _f(lt["ep_comm_exposed_s"]), _f(lt["compute_s"])
    pf = paired_frac(mode, pp, vp, m)
    # DualPipe: the whole chunk pair's balance (overlapped_s); [issue 17] 1f1b: Megatron-Core's per-layer phases,
    # ``lt``'s exposed and interference fractions of the layer's all-to-alls (layer_pair_comm_s)
    exp, interf = overlapped_s(pf * ep, pf * comp, sm_frac)
    one_f = mode == ONE_F_ONE_B
    exp = np.where(one_f, pf * ep * _f(lt["ep_pair_exposed_frac"]), exp)
    interf = np.where(one_f, pf * ep * _f(lt["ep_pair_interf_frac"]), interf)
    ep_new = (1.0 - pf) * ep + exp + interf
    # DualPipe: the steady-state sends hide in what is left of the pairs' computation
    left = np.maximum(pf * comp / (1.0 - np.clip(_f(sm_frac), 0.0, 0.99)) - pf * ep, 0.0)
    p2p = _f(lt["pp_p2p_exposed_s"])
    ov = _f(p2p_overlap_frac)
    sends = 2.0 * (m + pp - 1.0) - 2.0 * m * ov
    steady = p2p * 2.0 * m * (1.0 - ov) / np.maximum(sends, 1e-300)
    dual = mode == DUALPIPE
    p2p_new = np.where(dual, p2p - np.minimum(steady, left), p2p)
    # DualPipe's bubble from one middle stage's chunks (each rank holds a stage of both directions, so the embedding
    # of one and the head of the other share a rank): F&B = the pair's time with its all-to-all overlapped
    F, B = _f(lt["stage_fwd_s"]), _f(lt["stage_bwd_s"])
    a_mb = ep / m  # one stage's all-to-alls of one micro-batch
    other = np.maximum(_f(lt["mid_stage_s"]) - a_mb - F - B, 0.0)  # TP/CP exchanges, gradient accumulation
    e1, i1 = overlapped_s(a_mb, F + B, sm_frac)
    pair = F + B + other + e1 + i1
    bubble = np.where(dual, dualpipe_bubble_s(pair, B, WGRAD_FRAC * B, pp), _f(lt["pp_bubble_s"]))
    on = mode > 0
    return {"ep_comm_exposed_s": np.where(on, ep_new, ep), "pp_p2p_exposed_s": p2p_new, "pp_bubble_s": bubble}
