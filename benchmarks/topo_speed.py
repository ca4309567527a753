"""Time `gpusim topo` (parse + summary + warnings) on synthetic `nvidia-smi topo -m` matrices of growing size.

The work should grow with the matrix (n^2 cells for n GPUs): the time per cell stays about constant.

    .venv/bin/python benchmarks/topo_speed.py
"""

from __future__ import annotations

import time

from gpusim.topology import parse_topo


def matrix(n: int) -> str:
    """n GPUs in NVLink pairs, PIX within a group of 4, SYS between halves (a mix of path classes)."""
    head = "\t" + "\t".join(f"GPU{i}" for i in range(n)) + "\tCPU Affinity\tNUMA Affinity"

    def cell(i, j):
        if i == j:
            return "X"
        if i // 2 == j // 2:
            return "NV12"
        if i // 4 == j // 4:
            return "PIX"
        return "SYS" if (i < n // 2) != (j < n // 2) else "NODE"
    rows = [f"GPU{i}\t" + "\t".join(cell(i, j) for j in range(n)) + f"\t0-63\t{int(i >= n // 2)}" for i in range(n)]
    return "\n".join([head, *rows]) + "\n"


def main() -> None:
    for n in (16, 32, 64, 128, 256):  # 256: the most `gpusim topo` reads (gpusim.topology)
        text = matrix(n)
        t0 = time.perf_counter()
        topo = parse_topo(text)
        topo.summary()
        topo.warnings()
        dt = time.perf_counter() - t0
        print(f"{n:5d} GPUs ({n * n:>9,} cells): {dt:7.3f} s  ({dt / (n * n) * 1e6:.2f} µs per cell)")


if __name__ == "__main__":
    main()
