"""Layout: how an LLM's training is split over GPUs (the parallel degrees), checked once.

Modelled on torchtitan's ``ParallelDims`` and Megatron-Core's ``ModelParallelConfig``: a small frozen object
that holds the degrees, derives the data-parallel degree from the GPU count, and checks in one place that
every factor fits, with one message that names all of them.

- ``tp`` tensor parallelism (Megatron column/row-parallel attention and MLP, vocab-parallel embedding and
  head); ``sp`` sequence parallelism on top (norms and dropout split along the sequence);
- ``pp`` pipeline stages; ``vp`` model chunks per stage (interleaved 1F1B when ``vp > 1``);
- ``cp`` context and ``ep`` expert parallelism (1 here: reserved for later issues);
- ``dp = gpus / (tp * pp * cp)`` data-parallel replicas (DDP, the distributed optimizer or FSDP on top);
- ``micro_batch`` sequences per micro-batch, ``n_micro = global_batch / (micro_batch * dp)`` per step;
- ``recompute`` ``none | selective | full`` (Korthikanti et al. 2022); ``schedule`` ``1f1b | interleaved``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from gpusim.errors import ScenarioError

Recompute = Literal["none", "selective", "full"]
Schedule = Literal["1f1b", "interleaved"]


def _divisors(n: int, upto: int | None = None) -> list[int]:
    return [d for d in range(1, (upto or n) + 1) if n % d == 0]


@dataclass(frozen=True)
class Layout:
    """The parallel degrees of one LLM training job (all integers >= 1)."""

    tp: int = 1
    pp: int = 1
    vp: int = 1
    cp: int = 1
    ep: int = 1
    dp: int = 1
    sp: bool = False
    micro_batch: int = 1
    n_micro: int = 1
    recompute: Recompute = "none"

    @property
    def schedule(self) -> Schedule:
        return "interleaved" if self.vp > 1 else "1f1b"

    @property
    def gpus(self) -> int:
        return self.tp * self.pp * self.cp * self.dp

    @property
    def global_batch(self) -> int:
        return self.micro_batch * self.n_micro * self.dp

    def degrees(self) -> dict[str, int]:
        return {"tp": self.tp, "pp": self.pp, "vp": self.vp, "cp": self.cp, "ep": self.ep, "dp": self.dp}

    @classmethod
    def create(cls, *, gpus: int, tp: int = 1, pp: int = 1, vp: int = 1, cp: int = 1, ep: int = 1,
               sp: bool | None = None, micro_batch: int = 1, global_batch: int | None = None,
               accum: int | None = None, recompute: Recompute = "none", n_layers: int | None = None,
               n_heads: int | None = None, n_kv_heads: int | None = None, nvlink_domain_gpus: int | None = None,
               force_tp: bool = False) -> Layout:
        """Check every factor and derive ``dp`` and the micro-batches per step; raise one
        :class:`ScenarioError` that lists every problem and what would work."""
        problems: list[str] = []
        for name, v in (("tp", tp), ("pp", pp), ("vp", vp), ("cp", cp), ("ep", ep), ("micro_batch", micro_batch)):
            if not isinstance(v, int) or v < 1:
                raise ScenarioError(f"{name} must be a positive integer (got {v!r})")
        model_par = tp * pp * cp
        dp = gpus // model_par if gpus % model_par == 0 else 0
        if not dp:
            ok = [t for t in _divisors(gpus, min(gpus, 64)) if gpus % (t * pp * cp) == 0]
            problems.append(f"tp {tp} x pp {pp} x cp {cp} = {model_par} does not divide {gpus} GPUs"
                            + (f" (with pp {pp}, tp could be {', '.join(map(str, ok))})" if ok else ""))
        if n_heads is not None and n_heads % tp:
            problems.append(f"{n_heads} attention heads are not divisible by tp {tp} "
                            f"(tp could be {', '.join(map(str, _divisors(n_heads, min(n_heads, 64))))})")
        kv = n_kv_heads if n_kv_heads is not None else n_heads
        if kv is not None and kv % tp and tp % kv:
            problems.append(f"{kv} key/value heads cannot be split over tp {tp} (tp must divide them or be a "
                            f"multiple of them)")
        if n_layers is not None and n_layers % (pp * vp):
            ok = [v for v in _divisors(n_layers // pp) if n_layers % (pp * v) == 0] if n_layers % pp == 0 else []
            problems.append(f"{n_layers} layers are not divisible by pp {pp} x vp {vp} = {pp * vp}"
                            + (f" (with pp {pp}, vp could be {', '.join(map(str, ok[:8]))})" if ok else
                               f" (pp could be {', '.join(map(str, _divisors(n_layers, min(n_layers, 64))))})")
                            + f"; add --uneven-pp to run {n_layers} layers over {pp * vp} unequal stage chunks, as "
                              "published runs do (Megatron-Core --decoder-first/last-pipeline-num-layers, e.g. "
                              "DeepSeek-V3's 61 layers on pp 16)")
        if vp > 1 and pp == 1:
            problems.append("vp > 1 (interleaved schedule) needs pp > 1")
        if nvlink_domain_gpus and tp > nvlink_domain_gpus and not force_tp:
            problems.append(f"tp {tp} crosses the NVLink domain of {nvlink_domain_gpus} GPUs: its all-reduces would "
                            f"run over the network (use tp <= {nvlink_domain_gpus}, or force it)")
        n_micro = 1
        if dp:
            if global_batch is not None:
                per_step = micro_batch * dp
                if global_batch % per_step:
                    ok = [b for b in _divisors(max(global_batch // dp, 1), 64) if global_batch % (b * dp) == 0]
                    problems.append(f"micro-batch {micro_batch} x dp {dp} = {per_step} does not divide the global "
                                    f"batch {global_batch}" + (f" (micro-batch could be {', '.join(map(str, ok))})"
                                                               if ok else f" (use a multiple of {dp})"))
                else:
                    n_micro = global_batch // per_step
            elif accum is not None:
                n_micro = accum
        if problems:
            raise ScenarioError(f"impossible layout on {gpus} GPUs (tp {tp}, pp {pp}, vp {vp}, cp {cp}, "
                                f"dp {dp or gpus / model_par:g}, micro-batch {micro_batch}"
                                + (f", global batch {global_batch}" if global_batch is not None else "")
                                + "): " + "; ".join(problems))
        return cls(tp=tp, pp=pp, vp=vp, cp=cp, ep=ep, dp=dp, sp=(tp > 1) if sp is None else bool(sp and tp > 1),
                   micro_batch=micro_batch, n_micro=n_micro, recompute=recompute)
