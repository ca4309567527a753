"""Explain a measured throughput with the model: what would have to be true for the prediction to match.

Stage 5 of the road (docs/ARCHITECTURE.md): it asks :func:`gpusim.simulation.simulate` (one stage below) with
changed scenarios and parameters, so it sits above it, beside the sweeps.
"""

from __future__ import annotations

from gpusim import units
from gpusim.params import DEFAULT_PARAMS
from gpusim.simulation import simulate


def _solve(fn, target: float, lo: float, hi: float, iters: int = 40) -> float | None:
    """Bisection for x in [lo, hi] with fn(x) == target, fn increasing in x; None if target is out of range."""
    flo, fhi = fn(lo), fn(hi)
    if not (min(flo, fhi) <= target <= max(flo, fhi)):
        return None
    for _ in range(iters):
        mid = 0.5 * (lo + hi)
        if (fn(mid) < target) == (flo < fhi):
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def explain_measurement(scn, res, measured_samples_per_s: float, *, db=None, params=None) -> dict:
    """Compare a measured multi-GPU throughput with the prediction, and size what would explain the gap.

    Each candidate is solved with the model itself: the speed of one slow GPU (throttling, a mismatched card),
    the fraction of the modelled bus bandwidth (a slow path, a misconfigured NCCL), and the loader supply
    rate that would each bring the prediction down to the measurement on its own.
    """

    params = params or DEFAULT_PARAMS
    predicted = res.throughput_samples_per_s
    n = res.n_gpus
    linear = n * res.single_gpu_throughput_samples_per_s
    ratio = measured_samples_per_s / predicted
    out = {"measured_samples_per_s": measured_samples_per_s, "predicted_samples_per_s": predicted,
           "linear_samples_per_s": linear, "measured_over_predicted": ratio, "candidates": {}, "explanation": []}
    lines = out["explanation"]
    lines.append(f"measured {measured_samples_per_s:,.4g} samples/s; gpusim predicts {predicted:,.4g} "
                 f"({ratio - 1:+.0%}); linear scaling from one GPU would be {linear:,.4g}")
    if abs(ratio - 1.0) <= 0.10:
        lost = 1.0 - predicted / linear
        lines.append(f"the model explains the measurement: it loses {lost:.0%} to linear scaling, mostly in "
                     f"{res.bottleneck if res.bottleneck != 'compute' else 'exposed communication and waiting'} "
                     "(see the breakdown above)")
        return out
    if ratio > 1.0:
        lines.append("faster than predicted: the model's compute efficiency for this workload is conservative. Pass "
                     "your one-GPU throughput with --baseline-throughput, or calibrate (`gpusim calibrate`, `gpusim fit`)")
        return out

    def thr(**changes) -> float:
        v = scn.with_changes(**changes) if changes else scn
        return simulate(v, db=db, params=params, recommend=False).throughput_samples_per_s

    slow = _solve(lambda f: thr(slowest_gpu_speed_frac=f), measured_samples_per_s, 0.05, 1.0) if n > 1 else None
    if slow is not None:
        out["candidates"]["slowest_gpu_speed_frac"] = slow
        lines.append(f"one GPU running at {slow:.0%} of its speed would explain it (throttling, power capping, a "
                     "different card): check `nvidia-smi -q -d CLOCK,PERFORMANCE` on every GPU during training")

    def with_bus(scale: float) -> float:
        p2 = params.replace(busbw_eff_frac={k: v * scale for k, v in params.busbw_eff_frac.items()},
                            busbw_override_bytes_per_s={k: v * scale for k, v in
                                                        params.busbw_override_bytes_per_s.items()})
        return simulate(scn, db=db, params=p2, recommend=False).throughput_samples_per_s

    if n > 1:
        bus = _solve(with_bus, measured_samples_per_s, 0.005, 1.0)
        if bus is not None:
            out["candidates"]["bus_bandwidth_frac"] = bus
            lines.append(f"gradient exchange at {bus:.0%} of the bus bandwidth the model assumes would explain it: "
                         "measure it (`all_reduce_perf` from nccl-tests, or `gpusim calibrate`) and look for SYS paths "
                         "(`gpusim topo`), disabled peer-to-peer or NCCL falling back to sockets")
    st = scn.strategy
    step_measured = n * st.per_gpu_batch * st.accum / measured_samples_per_s
    extra_s = step_measured - res.step_s
    if extra_s > 0:
        per_gpu_supply = st.per_gpu_batch * st.accum / step_measured
        out["candidates"]["loader_samples_per_s_per_gpu"] = per_gpu_supply
        lines.append(f"a data pipeline that delivers only {per_gpu_supply:,.4g} samples/s per GPU would explain it "
                     f"({units.format_duration(extra_s)} of waiting per step): time one pass over the DataLoader alone, "
                     "raise num_workers, use pin_memory")
    if scn.baseline_throughput is None:
        lines.append("the one-GPU compute may itself be slower than modelled: measure one GPU and pass "
                     "--baseline-throughput, so that only the multi-GPU part is left to explain")
    return out

