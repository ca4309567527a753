"""Matrix multiply: achievable FLOP/s against size and precision.

C[m,n] = A[m,k] · B[k,n] with random inputs (never zeros: they can run faster than real data),
``flop = 2·m·n·k``. Every rank multiplies at the same time, as in data-parallel training, and each
rank's result is one record. Precisions: fp32 with TF32 off, tf32 (fp32 tensors with
``torch.set_float32_matmul_precision("high")``), bf16, fp16, and fp8 (e4m3 through
``torch._scaled_mm``, bf16 output) where the GPU has it; on CPU fp32 and bf16 (fp16 matmul on CPU is
an emulation path, not a training configuration).
"""

from __future__ import annotations

import torch

from gpusim.calibrate_bench.harness import Ctx, Point

BENCH = "gemm"

_DTYPES = {"fp32": torch.float32, "tf32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def shapes(ctx: Ctx) -> list[tuple[int, int, int]]:
    if ctx.device_kind == "cuda":
        sq = [1024, 4096, 8192] if ctx.quick else [256, 512, 1024, 2048, 4096, 8192, 16384]
        extra = [] if ctx.quick else [(8192, 12288, 4096), (8192, 4096, 16384)]  # transformer-like layers
    else:
        sq = [128, 256, 512] if ctx.quick else [64, 128, 256, 512, 1024, 2048]
        extra = [] if ctx.quick else [(2048, 768, 3072)]
    return [(s, s, s) for s in sq] + list(extra)


def precisions(ctx: Ctx) -> list[str]:
    if ctx.device_kind == "cuda":
        return ["fp32", "tf32", "bf16", "fp16", "fp8"]
    return ["fp32", "bf16"]


def fp8_unsupported_reason(ctx: Ctx) -> str | None:
    if ctx.device_kind != "cuda":
        return "fp8 matmul needs a GPU with fp8 tensor cores"
    if not hasattr(torch, "float8_e4m3fn") or not hasattr(torch, "_scaled_mm"):
        return f"torch {torch.__version__} has no float8 matmul (torch._scaled_mm)"
    cap = torch.cuda.get_device_capability(ctx.device)
    if cap < (8, 9):
        return f"compute capability {cap[0]}.{cap[1]} has no fp8 tensor cores (needs 8.9+: Ada, Hopper or newer)"
    return None


def plan(ctx: Ctx) -> list[Point]:
    pts = []
    fp8_reason = fp8_unsupported_reason(ctx)
    for prec in precisions(ctx):
        if prec == "fp8" and fp8_reason:
            key = f"{ctx.key_prefix}/{BENCH}/fp8/unsupported"
            pts.append(Point(BENCH, key, "fp8: not supported here",
                             lambda r=fp8_reason, k=key: _skipped(ctx, k, r)))
            continue
        for m, n, k in shapes(ctx):
            key = f"{ctx.key_prefix}/{BENCH}/{prec}/m{m}/n{n}/k{k}"
            pts.append(Point(BENCH, key, f"{prec} {m}x{n}x{k}",
                             lambda p=prec, m=m, n=n, k=k: measure(ctx, p, m, n, k)))
    return pts


def _skipped(ctx: Ctx, key: str, reason: str) -> list[dict] | None:
    if ctx.rank != 0:
        return None
    return [{"bench": "skipped", "key": key, "of_bench": BENCH, "params": {"precision": "fp8"},
             "reason": reason, "host": ctx.host, "device_name": ctx.device_name}]


def _operands(ctx: Ctx, prec: str, m: int, n: int, k: int):
    g = torch.Generator(device=ctx.device).manual_seed(1234 + ctx.rank)
    a = torch.randn(m, k, device=ctx.device, generator=g)
    b = torch.randn(k, n, device=ctx.device, generator=g)
    if prec == "fp8":
        f8 = torch.float8_e4m3fn
        a8 = a.to(f8)
        b8 = b.t().contiguous().to(f8).t()  # _scaled_mm wants the second operand column-major
        one = torch.ones((), device=ctx.device, dtype=torch.float32)
        return (lambda: torch._scaled_mm(a8, b8, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)), "float8_e4m3fn"
    dt = _DTYPES[prec]
    a, b = a.to(dt), b.to(dt)
    c = torch.empty(m, n, device=ctx.device, dtype=dt)
    return (lambda: torch.mm(a, b, out=c)), str(dt).replace("torch.", "")


def measure(ctx: Ctx, prec: str, m: int, n: int, k: int) -> list[dict] | None:
    old = torch.get_float32_matmul_precision()
    err = None
    try:
        torch.set_float32_matmul_precision("high" if prec == "tf32" else "highest")
        try:
            fn, dtype = _operands(ctx, prec, m, n, k)
            fn()
        except RuntimeError as e:  # e.g. fp8 kernel missing for this shape or build
            fn, dtype, err = None, "", f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
        if not ctx.all_true(err is None):
            msg = ctx.gather(err)
            if ctx.rank != 0:
                return None
            reason = next((x for x in msg if x), "failed on another rank")
            return [{"bench": "skipped", "key": f"{ctx.key_prefix}/{BENCH}/{prec}/m{m}/n{n}/k{k}",
                     "of_bench": BENCH, "params": {"precision": prec, "m": m, "n": n, "k": k},
                     "reason": reason, "host": ctx.host, "device_name": ctx.device_name}]
        warmup, reps, inner = ctx.plan_reps(fn)
        th0 = ctx.throttle_reasons()
        times = ctx.time_calls(fn, reps, inner)
        throttle = th0 + ctx.throttle_reasons()
        mine = ctx.timed_fields(times, warmup, inner, throttle)
    finally:
        torch.set_float32_matmul_precision(old)
    got = ctx.gather(mine)
    if ctx.rank != 0:
        return None
    flop = 2.0 * m * n * k
    out = []
    for r, t in enumerate(got):
        out.append({"bench": BENCH, "rank": r, "host": ctx.host_of(r), "device_name": ctx.device_name_of(r),
                    "m": m, "n": n, "k": k, "precision": prec, "dtype": dtype, "flop": flop,
                    "flop_per_s": flop / t["time_s"], "concurrent_ranks": ctx.world, **t})
    return out
