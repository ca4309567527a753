"""FP8 and BF16 GEMMs of one transformer layer against Transformer Engine's published GEMM profile (issue 17, item 2).

``validation/te_gemm_profile.csv`` holds the per-layer GEMM times that NVIDIA's Transformer Engine documentation
publishes for one model configuration (hidden 4096, MLP intermediate 16384, 32 heads, 15,872 tokens per GEMM) on a
B300 and an H200 NVL, per precision recipe (BF16, FP8 per-tensor current scaling, FP8 delayed scaling, MXFP8) and
per pass (forward, data gradient, weight gradient; the B300 forward also per GEMM), measured two ways
(``docs/examples/gemm_profiling/gemm_profiling.rst``, ``benchmarks/gemm/benchmark_gemm.py``):

- ``prequant``: the operands quantised once before the timed loop: the GEMM kernels alone;
- ``autocast``: each GEMM's inputs quantised before every call, as TE does in training: kernels plus casts.

Each row is predicted with the functions the layout model itself uses: the layer's GEMMs
(:func:`gpusim.model.llm.layer_gemm_times_s`, the GPU's BF16 and FP8 training matmul ceilings from hwdb, its SMs and
memory bandwidth, FP8 forward GEMMs with fast accumulation where the GPU has that mode) and, for ``autocast``, one
quantisation per operand per GEMM at the recipe's bytes per element (:data:`gpusim.model.fp8.CAST_BYTES`: per-tensor
current scaling reads the tensor twice, MXFP8 writes rowwise and columnwise copies and their E8M0 scales) plus one
kernel tail each. The benchmark quantises both operands of every GEMM (the weight too, which training caches over the
micro-batches), so ``autocast`` tests the cast kernels' cost, not training's cast count. The ceilings are the ones
predictions use, the sustained (power-limited) rate where hwdb has one (B300: 0.80-0.82 of the burst figure); the
benchmark's 100 timed iterations are shorter than a training step's GEMM stream, so they may run nearer the boost
clock: on B300 the measured times sit between the sustained prediction (which leans slow) and the burst one
(``layer_times_s(sustained=False)``: 10-16% fast).

One parameter of gpusim was set from this table, after the FP8 model was built: ModelParams ``mxfp8_gemm_rate_frac``
(0.951), the B300's MXFP8 kernels' rate against its per-tensor FP8 kernels', from the pre-quantised MXFP8 and FP8-CS
rows (:data:`USED_FOR_DEFAULTS`); [issue 17] and a second when NVFP4 was added: ``nvfp4_gemm_speedup`` (1.810), the
NVFP4 kernels' rate over the FP8-CS ones, from the pre-quantised NVFP4 rows.
Every other row is a test row: the NVFP4 autocast rows test the NVFP4 quantisation model (the amax pass, the row-wise
cast and the Hadamard-transformed column-wise cast of every input and gradient, :data:`gpusim.model.fp8.CAST_BYTES`).
The report gives the absolute error per GPU and mode and the FP8 / BF16 GEMM-time ratio per GPU generation, measured
against predicted: the number the issue asks the model to get right per generation.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from gpusim.errors import GpusimError

COLUMNS = ("row_id", "source_id", "source", "gpu", "mode", "precision", "pass", "op", "tokens", "hidden",
           "ffn_hidden", "measured_ms", "notes")
MODES = ("prequant", "autocast")
PASSES = ("fprop", "dgrad", "wgrad")
#: the four linear layers of the profiled layer and their (out, in) widths as multiples of (hidden, ffn_hidden)
OPS = ("qkv", "attn_out", "mlp_up", "mlp_down")
#: gpusim precision and FP8 recipe of each profiled recipe
PRECISIONS = {"bf16": ("bf16", None), "fp8-cs": ("fp8", "current"), "fp8-delayed": ("fp8", "delayed"),
              "mxfp8": ("mxfp8", None), "nvfp4": ("nvfp4", None)}
#: columns of :func:`gpusim.model.llm.layer_gemm_times_s`: (forward, data gradient, weight gradient) per linear layer
_COLUMN = {op: (3 * i, 3 * i + 1, 3 * i + 2) for i, op in enumerate(OPS)}


#: [issue 17] rows a default was set from: the pre-quantised B300 MXFP8 (and the FP8-CS kernels they are divided by)
#: set ModelParams ``mxfp8_gemm_rate_frac``; they are still predicted and reported, but are not a test of that ratio
USED_FOR_DEFAULTS = frozenset(f"te-b300-prequant-{r}-{p}-all" for r in ("mxfp8", "fp8-cs", "nvfp4")
                              for p in PASSES)


def default_csv() -> Path:
    return Path(__file__).resolve().parent.parent / "validation" / "te_gemm_profile.csv"


@dataclass
class GemmRow:
    """One published time (ms) with the model's prediction (ms)."""

    row_id: str
    gpu: str
    mode: str
    precision: str
    pass_: str
    op: str
    measured_ms: float
    predicted_ms: float | None = None
    gemm_ms: float | None = None  # the GEMM kernels alone (the rest of an autocast row is casts)
    error: str | None = None

    @property
    def signed_frac(self) -> float | None:
        if self.predicted_ms is None or not self.measured_ms > 0:
            return None
        return self.predicted_ms / self.measured_ms - 1.0


def load_rows(path: str | os.PathLike) -> list[dict]:
    """The CSV's rows; a file without the expected columns raises :class:`GpusimError` naming the missing ones."""
    from gpusim.checks import read_csv

    return read_csv(path, COLUMNS, "GEMM profile CSV", f"expected {', '.join(COLUMNS)}")


def layer_times_s(gpu, precision: str, recipe: str | None, *, tokens: float, hidden: float, ffn_hidden: float,
                  params=None, sustained: bool = True) -> dict:
    """``{(op, pass): (gemm_s, cast_s)}`` for the four linear layers of one layer of ``tokens`` tokens on ``gpu`` (a
    :class:`gpusim.hardware.GPU`): the model's GEMM time and, for FP8, the time of quantising both operands once."""
    from gpusim.model import fp8 as FP8
    from gpusim.model.gemm import fp8_fprop_ceiling_flop_per_s
    from gpusim.model.llm import layer_gemm_times_s
    from gpusim.params import DEFAULT_PARAMS

    p = params or DEFAULT_PARAMS
    key = "fp8" if precision in ("fp8", "mxfp8", "nvfp4") else "bf16"
    peak16, peak = gpu.peak_flop_per_s("bf16"), gpu.peak_flop_per_s(key)
    if peak16 is None or peak is None:
        raise GpusimError(f"{gpu.id} has no {key} peak in the hardware database")
    # the model's own ceilings: the power-limited sustained rate of a training step's long GEMM streams
    # (GPU.training_matmul_flop_per_s); ``sustained=False`` takes the best-shape boost-clock burst figure instead
    ceiling = gpu.training_matmul_flop_per_s if sustained else gpu.achievable_matmul_flop_per_s
    c16 = p.gemm_ceiling_flop_per_s.get("bf16") or ceiling("bf16") or p.gemm_ceiling_frac * peak16
    c8 = p.gemm_ceiling_flop_per_s.get(key) or ceiling(key) or p.gemm_ceiling_frac * peak
    if precision in ("mxfp8", "nvfp4") and not gpu.microscaling:
        raise GpusimError(f"{gpu.id} has no microscaling tensor cores: {precision.upper()} rows need a Blackwell GPU")
    mode = FP8.NONE if key == "bf16" else FP8.mode_code(precision, recipe or "delayed", gpu.compute_capability)
    c8 = float(FP8.gemm_ceiling_flop_per_s(mode, c8, p.mxfp8_gemm_rate_frac))  # [issue 17] MXFP8's kernel rate
    if mode == FP8.NVFP4:  # [issue 17] the FP4 kernels' rate (fp8.nvfp4_ceiling_flop_per_s)
        peak4 = gpu.peak_flop_per_s("fp4")
        if peak4 is None:
            raise GpusimError(f"{gpu.id} has no fp4 peak in the hardware database")
        c8 = float(FP8.nvfp4_ceiling_flop_per_s(c8, peak4, peak, p.nvfp4_gemm_speedup))
    ceil8_fwd = fp8_fprop_ceiling_flop_per_s(mode == FP8.DELAYED, mode == FP8.CURRENT, c8, c16, peak / peak16)
    h, f, T = float(hidden), float(ffn_hidden), float(tokens)
    a = np.asarray  # the model's functions take arrays (one row here)
    # (sequence 512, 32 heads and a 32,000 vocabulary only shape the attention core and LM head columns, unread here)
    t = layer_gemm_times_s(a(T), a(512.0), a(h), a(32.0), a(h), a(h), a(f), a(1.0), a(32000.0), a(1.0), a(1.0),
                           a(c16), a(gpu.memory_bytes_per_s), a(float(gpu.sm_count or 1)), a(2.0), a(mode), a(c8),
                           a(False), a(gpu.architecture not in p.gemm_epilogue_overlap_archs), ceil8_fwd=a(ceil8_fwd),
                           p=p)
    shapes = {"qkv": (3.0 * h, h), "attn_out": (h, h), "mlp_up": (f, h), "mlp_down": (h, f)}  # (out, in)
    cast_b = float(FP8.cast_bytes_per_elem(mode))
    # [issue 17] a weight's quantisation (NVFP4: 16x16 blocks, no Hadamard transform: fp8.WEIGHT_CAST_BYTES)
    cast_w = float(FP8.WEIGHT_CAST_BYTES.get(int(mode), cast_b))
    bw = gpu.memory_bytes_per_s * p.mem_eff_frac
    out = {}
    for op, (n, k) in shapes.items():
        # (activation or gradient elements, weight elements) quantised per GEMM
        operands = {"fprop": (T * k, k * n), "dgrad": (T * n, k * n), "wgrad": (T * k + T * n, 0.0)}
        for j, pas in enumerate(PASSES):
            act, wt = operands[pas]
            cast = 0.0 if mode == FP8.NONE else (act * cast_b + wt * cast_w) / bw + 2.0 * p.kernel_tail_s
            out[(op, pas)] = (float(np.asarray(t[_COLUMN[op][j]])), cast)
    return out


def run(path=None, *, db=None, params=None) -> list[GemmRow]:
    """Every row of the profile CSV with the model's prediction (a bad row comes back with ``error`` set)."""
    from gpusim.hwdb import load

    db = db or load()
    cache: dict = {}
    results = []
    for r in load_rows(path or default_csv()):
        row = GemmRow(row_id=r["row_id"], gpu=r["gpu"], mode=r["mode"], precision=r["precision"], pass_=r["pass"],
                      op=r["op"], measured_ms=float("nan"))
        results.append(row)
        try:
            try:
                row.measured_ms = float(r["measured_ms"])
                sizes = tuple(float(r[c]) for c in ("tokens", "hidden", "ffn_hidden"))
            except ValueError:
                raise GpusimError(f"measured_ms, tokens, hidden and ffn_hidden must be numbers (got "
                                  f"{r['measured_ms']!r}, {r['tokens']!r}, {r['hidden']!r}, {r['ffn_hidden']!r})")
            if row.mode not in MODES or row.pass_ not in PASSES or row.precision not in PRECISIONS:
                raise GpusimError(f"mode {row.mode!r}, pass {row.pass_!r} or precision {row.precision!r} unknown "
                                  f"(modes {MODES}, passes {PASSES}, precisions {tuple(PRECISIONS)})")
            if row.op != "all" and row.op not in OPS:
                raise GpusimError(f"op {row.op!r} is not 'all' or one of {OPS}")
            k = (row.gpu, row.precision, *sizes)
            if k not in cache:
                prec, recipe = PRECISIONS[row.precision]
                cache[k] = layer_times_s(db.gpu(row.gpu), prec, recipe, tokens=sizes[0], hidden=sizes[1],
                                         ffn_hidden=sizes[2], params=params)
            times = cache[k]
            ops = OPS if row.op == "all" else (row.op,)
            gemm = sum(times[(op, row.pass_)][0] for op in ops)
            cast = sum(times[(op, row.pass_)][1] for op in ops) if row.mode == "autocast" else 0.0
            row.gemm_ms, row.predicted_ms = gemm * 1e3, (gemm + cast) * 1e3
        except (GpusimError, KeyError, ValueError) as e:
            row.error = str(e)
    return results


def _stats(xs: list[float]) -> dict:
    if not xs:
        return {"n": 0, "median_ape": None, "max_ape": None}
    a = np.abs(np.asarray(xs))
    return {"n": len(xs), "median_ape": float(np.median(a)), "max_ape": float(a.max())}


def summarize(results: list[GemmRow]) -> dict:
    """Per (GPU, mode): the absolute error of the rows; per (GPU, mode, FP8 recipe): the layer's FP8 / BF16 GEMM
    time ratio (the three passes summed), measured and predicted."""
    groups: dict = {}
    for r in results:
        if r.signed_frac is not None:
            groups.setdefault((r.gpu, r.mode), []).append(r.signed_frac)
    per = [{"gpu": g, "mode": m, **_stats(v), "median_signed": float(np.median(v))} for (g, m), v in groups.items()]
    totals: dict = {}
    for r in results:
        if r.predicted_ms is not None:
            t = totals.setdefault((r.gpu, r.mode, r.precision), [0.0, 0.0, set()])
            t[0] += r.measured_ms
            t[1] += r.predicted_ms
            t[2].add(r.pass_)
    ratios = []
    for (g, m, prec), (meas, pred, passes) in sorted(totals.items()):
        base = totals.get((g, m, "bf16"))
        if prec == "bf16" or base is None or passes != set(PASSES) or base[2] != set(PASSES):
            continue
        ratios.append({"gpu": g, "mode": m, "precision": prec, "measured_ratio": meas / base[0],
                       "predicted_ratio": pred / base[1]})
    return {"groups": per, "ratios": ratios, "all": _stats([r.signed_frac for r in results if r.signed_frac is not None]),
            "errors": [r.row_id for r in results if r.error]}


def to_dicts(results: list[GemmRow]) -> list[dict]:
    out = []
    for r in results:
        d = asdict(r)
        d["pass"] = d.pop("pass_")
        d["signed_frac"] = r.signed_frac
        out.append(d)
    return out


def print_section(results: list[GemmRow], print_table, fmt_pct) -> None:
    """The ``gpusim validate`` section: per GPU and mode, then the FP8 / BF16 ratios."""
    if not results:
        return
    s = summarize(results)
    rows = [[g["gpu"], g["mode"], g["n"], fmt_pct(g["median_ape"]), fmt_pct(g["max_ape"]),
             f"{g['median_signed']:+.1%}"] for g in s["groups"]]
    print_table(rows, ["GPU", "mode", "rows", "median", "max", "median signed"],
                title="one layer's GEMMs against Transformer Engine's GEMM profile (validation/te_gemm_profile.csv; "
                      "error > 0: predicted slower)", justify=["left", "left", "right", "right", "right", "right"])
    a = s["all"]
    print(f"  all rows: median {fmt_pct(a['median_ape'])}, max {fmt_pct(a['max_ape'])} (n={a['n']}; the B300 "
          f"pre-quantised MXFP8 / NVFP4 / FP8-CS kernel rows set mxfp8_gemm_rate_frac and nvfp4_gemm_speedup, "
          f"{len(USED_FOR_DEFAULTS)} rows)")
    for q in s["ratios"]:
        print(f"  {q['gpu']} {q['mode']}: {q['precision']} / bf16 layer GEMM time: measured {q['measured_ratio']:.3f}, "
              f"predicted {q['predicted_ratio']:.3f}")
    if s["errors"]:
        print(f"  not predicted: {', '.join(s['errors'])}")
