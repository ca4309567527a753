"""GPU check of the per-GEMM model (issue 11): prepared to run on one GPU in one go, a few minutes.

    .venv/bin/python benchmarks/gpu_llm_check.py --gpu h200-sxm [--out DIR] [--quick]
    .venv/bin/python benchmarks/gpu_llm_check.py --device cpu --small     # a smoke test of the script itself

1. GEMM sweep over the shapes a tensor-parallel Llama 3 8B and 70B layer produces (QKV, attention output, FFN
   up and down; forward, data-gradient and weight-gradient shapes) for tp 1, 2, 4, 8 and 2048-8192 tokens, bf16,
   timed with CUDA events after warm-up; beside each, ``gpusim.model.gemm.gemm_time_s`` with the hwdb GPU's
   measured ceiling and SM count.
2. One Llama-like layer (RMSNorm, GQA attention through ``scaled_dot_product_attention`` with a causal mask,
   SwiGLU FFN), forward + backward at micro-batch 1, against the model's per-layer forward + backward time
   (``gpusim.model.llm.llm_terms`` at tp 1, pp 1, no recomputation).

Writes ``gpu_llm_check.json`` (every measured and predicted time) to ``--out`` (default ``$OUT`` or ``.``) and
prints the median and worst errors.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import numpy as np

LLAMA = {"llama3-8b": dict(h=4096, a=32, kv=8, f=14336), "llama3-70b": dict(h=8192, a=64, kv=8, f=28672)}
SMALL = {"tiny": dict(h=256, a=4, kv=2, f=512)}


def _timer(device):
    import torch

    def run(fn, iters: int, warmup: int) -> float:
        for _ in range(warmup):
            fn()
        if device == "cuda":
            torch.cuda.synchronize()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(iters):
                fn()
            end.record()
            torch.cuda.synchronize()
            return start.elapsed_time(end) / 1e3 / iters
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        return (time.perf_counter() - t0) / iters
    return run


def gemm_shapes(models: dict, tps, tokens) -> list[tuple[str, int, int, int]]:
    out = []
    for name, d in models.items():
        h, q, kv, f = d["h"], d["h"], d["h"] * d["kv"] // d["a"], d["f"]
        for t in tps:
            if d["a"] % t or d["kv"] % t and t % d["kv"]:
                continue
            for T in tokens:
                for label, n_out, k_in in (("qkv", (q + 2 * kv) // t, h), ("out", h, q // t), ("up", 2 * f // t, h),
                                           ("down", h, f // t)):
                    tag = f"{name} tp{t} T{T} {label}"
                    out += [(tag + " fwd", T, n_out, k_in), (tag + " dgrad", T, k_in, n_out),
                            (tag + " wgrad", k_in, n_out, T)]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpu", default="h100-sxm", help="hwdb id of the GPU this runs on (its ceiling and SMs)")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--quick", action="store_true", help="fewer shapes and iterations")
    ap.add_argument("--small", action="store_true", help="tiny shapes (a CPU smoke test of the script)")
    args = ap.parse_args()

    import torch
    import torch.nn.functional as F

    from gpusim.hwdb import load
    from gpusim.model.gemm import gemm_time_s
    from gpusim.params import DEFAULT_PARAMS as P

    db = load()
    gpu = db.gpu(args.gpu)
    dev = args.device
    dtype = torch.bfloat16
    ceiling = gpu.achievable_matmul_flop_per_s("bf16") or P.gemm_ceiling_frac * gpu.peak_flop_per_s("bf16")
    sms = gpu.sm_count or 1
    hbm = gpu.memory_bytes_per_s
    if dev == "cuda":
        props = torch.cuda.get_device_properties(0)
        print(f"device: {props.name}, {props.multi_processor_count} SMs (hwdb {args.gpu}: {sms} SMs, "
              f"ceiling {ceiling / 1e12:.1f} TFLOP/s)")
    timer = _timer(dev)
    iters, warm = (5, 2) if args.quick or args.small else (20, 5)
    models = SMALL if args.small else LLAMA
    tokens = [128] if args.small else ([4096] if args.quick else [2048, 4096, 8192])
    tps = [1, 2] if args.small else [1, 2, 4, 8]

    # ---- 1. GEMM sweep ------------------------------------------------------------------------------
    rows = []
    for tag, m, n, k in gemm_shapes(models, tps, tokens):
        a = torch.randn(m, k, device=dev, dtype=dtype)
        b = torch.randn(k, n, device=dev, dtype=dtype)
        t = timer(lambda: torch.mm(a, b), iters, warm)
        pred = float(gemm_time_s(m, n, k, ceiling, hbm, sms, elem_bytes=2.0, k_half=P.gemm_k_half_steps,
                                 mem_eff_frac=P.mem_eff_frac, kernel_tail_s=P.kernel_tail_s))
        rows.append({"shape": tag, "m": m, "n": n, "k": k, "measured_s": t, "predicted_s": pred,
                     "measured_tflop_per_s": 2 * m * n * k / t / 1e12, "error_frac": pred / t - 1.0})
        del a, b
    errs = [abs(r["error_frac"]) for r in rows]
    print(f"GEMMs: {len(rows)} shapes, median |error| {statistics.median(errs):.1%}, worst {max(errs):.1%}")
    for r in sorted(rows, key=lambda r: -abs(r["error_frac"]))[:8]:
        print(f"  {r['shape']:<34} {r['m']}x{r['n']}x{r['k']}: measured {r['measured_tflop_per_s']:.1f} TFLOP/s, "
              f"predicted/measured {1 + r['error_frac']:.3f}")

    # ---- 2. one Llama-like layer, forward + backward -------------------------------------------------
    layer_rows = []
    for name, d in models.items():
        h, a, kvh, f = d["h"], d["a"], d["kv"], d["f"]
        dh = h // a
        s = 128 if args.small else 4096
        x = torch.randn(1, s, h, device=dev, dtype=dtype, requires_grad=True)
        w = {k: (torch.randn(*shape, device=dev, dtype=dtype) * 0.02).requires_grad_()
             for k, shape in (("qkv", (h, h + 2 * kvh * dh)), ("o", (h, h)), ("up", (h, 2 * f)), ("down", (f, h)))}
        g1 = torch.ones(h, device=dev, dtype=dtype, requires_grad=True)
        g2 = torch.ones(h, device=dev, dtype=dtype, requires_grad=True)

        def layer():
            y = F.rms_norm(x, (h,), g1)
            qkv = y @ w["qkv"]
            q, k, v = qkv.split([h, kvh * dh, kvh * dh], dim=-1)
            q = q.view(1, s, a, dh).transpose(1, 2)
            k = k.view(1, s, kvh, dh).transpose(1, 2).repeat_interleave(a // kvh, dim=1)
            v = v.view(1, s, kvh, dh).transpose(1, 2).repeat_interleave(a // kvh, dim=1)
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(1, s, h)
            x2 = x + o @ w["o"]
            gate, up = (F.rms_norm(x2, (h,), g2) @ w["up"]).chunk(2, dim=-1)
            out = x2 + (F.silu(gate) * up) @ w["down"]
            out.sum().backward()

        t = timer(layer, max(3, iters // 4), warm)
        from gpusim.model.llm import llm_terms

        x_in = {"n_layers": 1.0, "d_model": h, "n_heads": a, "q_dim": h, "kv_dim": kvh * dh, "ff_dim": f,
                "ffn_mats": 3.0, "vocab": 0.0, "seq_len": s, "tp": 1.0, "pp": 1.0, "vp": 1.0, "micro_batch": 1.0,
                "sp": False, "recompute": 0, "flash": dev == "cuda", "dropout": False, "rope": False, "untied": False,
                "layer_params": 0.0, "embed_params": 0.0, "grad_accum_fusion": True, "act_scale": 1.0,
                "mem_bytes_per_s": hbm, "sm_count": sms, "n_nodes": 1.0, "intra_busbw_bytes_per_s": 1e12,
                "intra_hop_s": 0.0, "inter_busbw_bytes_per_s": 1e12, "inter_hop_s": 0.0, "nvls": False,
                "ceiling_flop_per_s": ceiling, "n_micro": 1.0, "gpus_per_node": 1.0}
        with np.errstate(divide="ignore", invalid="ignore"):  # no vocabulary: the head's GEMM is empty
            lt = llm_terms({k: np.asarray(v) for k, v in x_in.items()}, P)
        pred = float(lt["stage_fwd_s"] + lt["stage_bwd_s"])
        layer_rows.append({"model": name, "seq_len": s, "measured_s": t, "predicted_s": pred,
                           "error_frac": pred / t - 1.0})
        print(f"one {name} layer, micro-batch 1 x {s} tokens, forward + backward: measured {t * 1e3:.2f} ms, "
              f"predicted {pred * 1e3:.2f} ms ({pred / t - 1:+.1%})")
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "gpu_llm_check.json")
    with open(path + ".tmp", "w") as fh:
        json.dump({"gpu": args.gpu, "device": dev, "gemms": rows, "layers": layer_rows}, fh, indent=1)
    os.replace(path + ".tmp", path)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
