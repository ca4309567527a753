"""Keep the model's freed temporaries in the process for the next block (glibc's malloc settings). No gpusim imports.

A model evaluation runs in blocks of :data:`gpusim.model.step.BLOCK_ROWS` rows and makes a few hundred float64
temporaries per block, 0.5 MB each, so that one block's freed temporaries serve the next. glibc's malloc defeats that
with its defaults (mallopt(3), "M_MMAP_THRESHOLD", "M_TRIM_THRESHOLD"): a request above the mmap threshold (128 KiB at
start, raised only as far as the largest chunk freed so far) gets fresh pages from ``mmap`` and returns them on
``free``, and whenever more than the trim threshold (twice the dynamic mmap threshold) lies free at the top of the
heap it goes back to the kernel. Either way the next block's temporaries are new pages, each zero-filled by the
kernel on its first touch. Measured on the project's 2-CPU machine (``benchmarks/layout_search.py``, three passes
over a million layouts): 0.89 M minor page faults and 1.9 s of system time under the defaults, more than the numpy
arithmetic; 52 k faults and 0.1 s with the two thresholds below; the peak resident memory the same (290 MiB).

:func:`retain_heap` sets the mmap threshold to :data:`MMAP_THRESHOLD_BYTES` (glibc's largest on 64-bit, which also
ends the dynamic adjustment) and the trim threshold to :data:`TRIM_THRESHOLD_BYTES` (a block's temporaries swing the
heap by more than 64 MiB and less than 256 MiB today: with 64 MiB the faults stay), once per process, where the C
library is glibc. The bulk evaluations call it (:func:`gpusim.search.evaluate_layouts`,
:func:`gpusim.search.plan_layout_rows`, the chunks of :mod:`gpusim.sweeps`, and the benchmarks that time them); the
pure model, :mod:`gpusim.model`, never touches the process. The cost: up to that much freed memory stays with the
process after a large evaluation instead of returning to the system. ``GPUSIM_KEEP_HEAP=0`` leaves the allocator as
it is. No result changes, only where the memory comes from.
"""

from __future__ import annotations

import ctypes
import os
import sys

#: mallopt(3)'s parameter numbers (glibc ``malloc.h``)
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3

#: requests up to this size come from the heap (glibc's ``DEFAULT_MMAP_THRESHOLD_MAX`` on 64-bit: 4 MiB x 8)
MMAP_THRESHOLD_BYTES = 32 * 2**20
#: free memory kept at the top of the heap before it is given back to the kernel
TRIM_THRESHOLD_BYTES = 512 * 2**20
#: the environment variable that, set to ``0``, leaves the allocator as it is
ENV = "GPUSIM_KEEP_HEAP"

_state: dict[str, bool] = {}


def _glibc_mallopt():
    """glibc's ``mallopt`` of this process, or None (another C library or platform)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None)
        libc.gnu_get_libc_version  # (glibc only: musl's mallopt accepts nothing)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return None
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    return mallopt


def retain_heap() -> bool:
    """Set glibc's mmap and trim thresholds (module docstring) once per process; True where they are set (glibc, and
    ``GPUSIM_KEEP_HEAP`` not ``0``). Later calls return the first call's answer without touching the allocator."""
    if "set" not in _state:
        mallopt = None if os.environ.get(ENV, "").strip() == "0" else _glibc_mallopt()
        _state["set"] = bool(mallopt is not None
                             and mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES) == 1
                             and mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES) == 1)
    return _state["set"]
