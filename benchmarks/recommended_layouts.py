"""The layout search's best layouts for the issue's models on an H100 and a GB200 cluster (closing-note table).

    .venv/bin/python benchmarks/recommended_layouts.py
"""

from __future__ import annotations

import time


def main() -> None:
    from gpusim.hwdb import load
    from gpusim.search import explain_best, search_layouts
    from gpusim.simulation import Scenario, nvlink_domain_gpus, resolve_hardware

    db = load()
    clusters = (("1024 x H100 (128 DGX H100)", dict(node="dgx-h100", gpus=1024, nodes=128)),
                ("1152 x GB200 (16 NVL72 racks)", dict(node="gb200-nvl72", gpus=1152, nodes=288)))
    jobs = (("llama3.1-405b", 8192, 2048), ("deepseek-v3", 4096, 15360), ("qwen3-235b-a22b", 4096, 4096))
    for model, seq, gb in jobs:
        for name, hw_kw in clusters:
            for precision in ("amp_bf16", "fp8"):
                scn = Scenario(model=model, seq_len=seq, kind="zero1", global_batch=gb, per_gpu_batch=1,
                               precision=precision, **hw_kw)
                t0 = time.perf_counter()
                res = search_layouts(scn, db=db)
                dt = time.perf_counter() - t0
                dom = nvlink_domain_gpus(resolve_hardware(scn, db))
                b = res["best"]
                head = f"{model} seq {seq} gb {gb} on {name}, {precision}: {res['n']} layouts in {dt:.2f} s"
                if b is None:
                    print(head + ": nothing fits")
                    continue
                o = res["out"]
                print(f"{head}\n  {o['tokens_per_s'][b] / hw_kw['gpus']:,.0f} tokens/s/GPU, MFU {o['mfu_frac'][b]:.1%} "
                      f"(of the {precision} peak)\n  {explain_best(res, dom)}")


if __name__ == "__main__":
    main()
