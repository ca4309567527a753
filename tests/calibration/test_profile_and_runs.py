"""The calibration profile format and real runs of `gpusim calibrate` on this machine's CPU (gloo).

Real runs use the TOOLCHAIN.md pattern so that nothing can hang: each launcher runs in its own
process session, is killed as a whole group on a timeout, and every test has a pytest-timeout mark.
Checks are about shape and sanity (finite, positive, bigger messages get more bandwidth), never
absolute numbers: this machine is noisy.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from gpusim.errors import CalibrationError
from gpusim.profile import (RECORD_TYPES, load_profile, read_rank_files, read_records)

torch = pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[2]
KINDS = {"gemm", "memory", "collective", "p2p", "ddp_step", "dataloader", "skipped"}


def run_cli(args: list[str], timeout_s: float = 120) -> tuple[int, str, str, float]:
    """`python -m gpusim calibrate ARGS` in its own session; the whole group is killed on a timeout."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    t0 = time.monotonic()
    p = subprocess.Popen([sys.executable, "-m", "gpusim", "calibrate", *args], cwd=ROOT, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _killpg(p)
        out, err = p.communicate()
        pytest.fail(f"gpusim calibrate {' '.join(args)} did not finish in {timeout_s} s:\n{out}\n{err}")
    return p.returncode, out, err, time.monotonic() - t0


def _killpg(p: subprocess.Popen) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(p.pid, sig)
        except ProcessLookupError:
            return
        try:
            p.wait(timeout=5)
            return
        except subprocess.TimeoutExpired:
            continue


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie (exited, not yet reaped by its parent) counts as gone
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def _wait_workers_gone(out: Path, timeout_s: float = 30) -> None:
    """The worker pids recorded in the rank files must all end; kill any left (by pid) and fail."""
    pids = [s["pid"] for s in read_rank_files(out)]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.2)
    left = [p for p in pids if _alive(p)]
    for p in left:
        os.kill(p, signal.SIGKILL)
    assert not left, f"worker processes {left} outlived their launcher"


# ---- one real quick run, shared by several tests ---------------------------------------------------
@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    out = tmp_path_factory.mktemp("cal") / "profile"
    rc, so, se, dt = run_cli(["--quick", "--nproc-per-node", "2", "--out", str(out)], timeout_s=240)
    assert rc == 0, f"rc={rc}\n{so}\n{se}"
    return out, so, se, dt


@pytest.mark.timeout(300)
@pytest.mark.slow
def test_quick_run_produces_every_kind(quick):
    out, so, se, dt = quick
    prof = load_profile(out)
    assert prof.complete
    assert set(prof.counts()) == KINDS
    assert "next: gpusim fit" in so and "records" in so
    run = prof.meta.runs[-1]
    assert (run.backend, run.device, run.world_size, run.n_nodes, run.quick) == ("gloo", "cpu", 2, 1, True)
    node = run.nodes[0]
    assert node.torch == torch.__version__ and node.cpu_threads and node.date_utc and node.ram_bytes > 0
    assert [r.rank for r in run.ranks] == [0, 1]
    assert {r.run_id for r in prof.records} == {run.run_id}
    assert len({r.key for r in prof.records}) == len(prof.records)
    for r in prof.records:
        assert r.world_size == 2 and r.device == "cpu" and r.host
        for f, v in r.model_dump().items():
            if isinstance(v, float):
                assert math.isfinite(v), (r.key, f)
    # the numbers of a 2-process quick run take about a minute at most (TOOLCHAIN: ~5 s is torchrun)
    assert dt < 120


@pytest.mark.timeout(300)
def test_quick_run_values_are_sane(quick):
    prof = load_profile(quick[0])
    gemm = prof.of("gemm")
    assert {g.precision for g in gemm} == {"fp32", "bf16"}
    assert {g.rank for g in gemm} == {0, 1}
    for g in gemm:
        assert g.flop == 2.0 * g.m * g.n * g.k and g.flop_per_s == pytest.approx(g.flop / g.time_s)
        assert g.time_s_min <= g.time_s_p10 <= g.time_s <= g.time_s_p90 <= g.time_s_max
    mem = prof.of("memory")
    assert {m.kind for m in mem} == {"device_copy"} and all(m.traffic_bytes == 2 * m.bytes for m in mem)
    skipped = {(s.of_bench, json.dumps(s.params, sort_keys=True)) for s in prof.of("skipped")}
    assert ("memory", '{"kind": "h2d_pinned"}') in skipped and any("no CUDA" in s.reason for s in prof.of("skipped"))

    coll = prof.of("collective")
    assert {c.collective for c in coll} == {"all_reduce", "reduce_scatter", "all_gather", "broadcast"}
    for c in coll:
        assert c.correct and c.n_ranks == 2 and c.level == "intra-node" and c.ranks == [0, 1]
        assert c.algbw_bytes_per_s == pytest.approx(c.bytes / c.time_s)
        factor = {"all_reduce": 1.0, "reduce_scatter": 0.5, "all_gather": 0.5, "broadcast": 1.0}[c.collective]
        assert c.busbw_bytes_per_s == pytest.approx(c.algbw_bytes_per_s * factor)
        assert c.time_s == max(c.rank_time_s) and len(c.rank_time_s) == 2
    for name in ("all_reduce", "reduce_scatter", "all_gather", "broadcast"):
        rs = sorted((c for c in coll if c.collective == name), key=lambda c: c.bytes)
        assert rs[-1].bytes >= 1000 * rs[0].bytes
        assert rs[-1].busbw_bytes_per_s > rs[0].busbw_bytes_per_s, name  # large messages beat tiny ones

    p2p = sorted(prof.of("p2p"), key=lambda r: r.bytes)
    assert [(r.src, r.dst) for r in p2p] == [(0, 1), (0, 1)] and p2p[0].path is None
    assert p2p[-1].bytes_per_s > p2p[0].bytes_per_s

    ddp = prof.of("ddp_step")
    by = Counter((d.workload, d.per_rank_batch, d.n_ranks, d.sync) for d in ddp)
    for wl in ("mlp", "transformer"):
        batches = {d.per_rank_batch for d in ddp if d.workload == wl}
        assert len(batches) == 2
        for b in batches:
            assert by[(wl, b, 1, False)] == 1 and by[(wl, b, 2, True)] == 1 and by[(wl, b, 2, False)] == 1
    mlp = next(d for d in ddp if d.workload == "mlp")
    # quick CPU MLP 256 -> 1024 -> 1024 -> 10: forward FLOPs 2*(256*1024 + 1024*1024 + 1024*10) per sample
    assert mlp.fwd_flop_per_sample == 2 * (256 * 1024 + 1024 * 1024 + 1024 * 10)
    assert mlp.params == 256 * 1024 + 1024 + 1024 * 1024 + 1024 + 1024 * 10 + 10
    assert mlp.grad_bytes == 4 * mlp.params and mlp.bucket_cap_mb == 25 and mlp.optimizer == "sgd-momentum"
    tr = next(d for d in ddp if d.workload == "transformer")
    assert tr.train_flop_per_sample == pytest.approx(3 * tr.fwd_flop_per_sample, rel=0.05)
    assert tr.act_bytes_per_sample > mlp.act_bytes_per_sample > 0 and tr.fwd_kernels > mlp.fwd_kernels >= 5
    for d in ddp:
        assert d.ddp_wrapped == (d.n_ranks > 1)
        assert d.samples_per_s == pytest.approx(d.n_ranks * d.per_rank_batch / d.time_s)

    dl = prof.of("dataloader")
    assert {(d.workers, d.pin_memory) for d in dl} == {(0, False), (2, False)}
    assert all(d.samples_per_s > 0 and d.sample_cost_s > 0 and d.rank in (0, 1) for d in dl)


# ---- robustness ----------------------------------------------------------------------------------
@pytest.mark.timeout(180)
@pytest.mark.slow
def test_killed_run_resumes_without_redoing(tmp_path):
    out = tmp_path / "p"
    args = ["--quick", "--nproc-per-node", "2", "--out", str(out), "--only", "gemm,memory,collectives"]
    p = subprocess.Popen([sys.executable, "-m", "gpusim", "calibrate", *args, "--debug-point-delay", "0.25"],
                         cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    rec = out / "records.jsonl"
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if rec.exists() and rec.read_bytes().count(b"\n") >= 8:
                break
            assert p.poll() is None, "the run ended before it could be killed"
            time.sleep(0.05)
        else:
            pytest.fail("no records appeared")
    finally:
        os.killpg(p.pid, signal.SIGKILL)  # the launcher's group; its torchrun session must follow it
        p.wait(timeout=10)
    _wait_workers_gone(out)
    before = rec.read_bytes()
    n_before = before.count(b"\n")
    with open(rec, "ab") as f:  # as if the kill had landed in the middle of a write
        f.write(b'{"bench":"gemm","key":"half-writ')
    prof = load_profile(out)
    assert not prof.complete and any("incomplete last line" in w for w in prof.warnings)
    assert len(prof.records) == n_before

    rc, so, se, _ = run_cli([*args, "--resume"], timeout_s=150)
    assert rc == 0, so + se
    assert "resuming:" in so
    after = rec.read_bytes()
    assert after.startswith(before)  # the partial line was cut, nothing earlier changed
    prof = load_profile(out)
    assert prof.complete
    runs = prof.meta.runs
    assert len(runs) == 2 and runs[0].status == "failed" and runs[1].status == "complete"
    first = {r.point for r in prof.records if r.run_id == runs[0].run_id}
    second = {r.point for r in prof.records if r.run_id == runs[1].run_id}
    assert first and second and not (first & second)  # nothing measured twice
    counts = prof.counts()
    assert counts["gemm"] == 12 and counts["collective"] == 16 and counts["memory"] == 6
    pts = Counter(r.point for r in prof.records)
    assert all(n == next(r.point_n for r in prof.records if r.point == p) for p, n in pts.items())


@pytest.mark.timeout(120)
@pytest.mark.slow
def test_hung_peer_ends_with_clear_error(tmp_path):
    out = tmp_path / "p"
    rc, so, se, dt = run_cli(["--quick", "--nproc-per-node", "2", "--out", str(out), "--only", "gemm,collectives",
                              "--timeout", "5", "--inject-hang-rank", "1"], timeout_s=90)
    assert rc == 2
    assert dt < 60, dt  # the 5 s timeout, torchrun start-up and the gemm points; not the 30 min default
    msg = se.strip().splitlines()[-1]
    assert msg.startswith("gpusim: error: calibration failed: rank 1 stopped responding during 'collectives:")
    assert "within --timeout 5 s" in msg and "--resume" in msg and "records measured so far are intact" in msg
    assert "Traceback" not in se
    _wait_workers_gone(out)
    prof = load_profile(out)  # the records so far are intact and readable
    assert prof.counts() == {"gemm": 12} and not prof.complete
    assert prof.meta.runs[-1].status == "failed" and "rank 1" in prof.meta.runs[-1].error


@pytest.mark.timeout(120)
@pytest.mark.slow
def test_overall_time_limit_stops_the_whole_run(tmp_path):
    out = tmp_path / "p"
    rc, so, se, dt = run_cli(["--quick", "--nproc-per-node", "2", "--out", str(out), "--only", "gemm",
                              "--max-time", "12", "--debug-point-delay", "3"], timeout_s=90)
    assert rc == 2 and dt < 45, (rc, dt, se)
    msg = se.strip().splitlines()[-1]
    assert "the run exceeded --max-time 12 s and was stopped" in msg and "--resume" in msg
    _wait_workers_gone(out)
    assert load_profile(out).counts().get("gemm", 0) >= 2  # what was measured is kept


@pytest.mark.timeout(120)
def test_single_process_without_torchrun(tmp_path):
    """The worker alone (a group of one): collectives and p2p become skipped records, DDP n=1 only."""
    out = tmp_path / "p"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(k, None)
    p = subprocess.run([sys.executable, "-m", "gpusim.calibrate_bench.run", "--out", str(out), "--quick",
                        "--only", "collectives,p2p,gemm"], cwd=ROOT, env=env, capture_output=True, text=True,
                       timeout=100, start_new_session=True)
    assert p.returncode == 0, p.stdout + p.stderr
    prof = load_profile(out)
    assert prof.complete and prof.counts() == {"skipped": 2, "gemm": 6}
    assert {s.of_bench for s in prof.of("skipped")} == {"collective", "p2p"}


# ---- CLI errors: one clear message, no traceback ---------------------------------------------------
def _cli(argv, capsys):
    from gpusim.cli import main

    rc = main(["calibrate", *argv])
    return rc, capsys.readouterr()


@pytest.mark.timeout(60)
def test_cli_refuses_bad_setups(tmp_path, capsys, monkeypatch):
    rc, cap = _cli(["--backend", "nccl", "--out", str(tmp_path / "x")], capsys)
    if not torch.cuda.is_available():
        assert rc == 2 and "needs CUDA GPUs" in cap.err and "--backend gloo" in cap.err
    rc, cap = _cli(["--resume", "--out", str(tmp_path / "nothing")], capsys)
    assert rc == 2 and "holds no profile to continue" in cap.err
    full = tmp_path / "full"
    full.mkdir()
    (full / "records.jsonl").write_text('{"a": 1}\n')
    rc, cap = _cli(["--out", str(full)], capsys)
    assert rc == 2 and "already holds a profile; add --resume" in cap.err
    rc, cap = _cli(["--only", "gemm,warp-drive", "--out", str(tmp_path / "y")], capsys)
    assert rc == 2 and "unknown benchmark 'warp-drive'" in cap.err
    rc, cap = _cli(["--nnodes", "2", "--out", str(tmp_path / "z")], capsys)
    assert rc == 2 and "--rdzv-endpoint" in cap.err

    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "torch" else real(name, *a))
    rc, cap = _cli(["--out", str(tmp_path / "w")], capsys)
    assert rc == 2 and "pip install 'gpusim[calibrate]'" in cap.err


# ---- the format: reading, tolerating, refusing ---------------------------------------------------
def _write_profile(d: Path, records: list[dict], meta: dict) -> None:
    d.mkdir(parents=True, exist_ok=True)
    (d / "meta.json").write_text(json.dumps(meta))
    (d / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))


@pytest.fixture(scope="module")
def sample(quick):
    out = quick[0]
    meta = json.loads((out / "meta.json").read_text())
    recs = [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines()]
    return meta, recs


def test_truncated_last_line_is_tolerated(tmp_path, sample):
    meta, recs = sample
    _write_profile(tmp_path / "p", recs[:5], meta)
    with open(tmp_path / "p" / "records.jsonl", "a") as f:
        f.write(json.dumps(recs[5])[:40])
    prof = load_profile(tmp_path / "p")
    assert len(prof.records) == 5
    assert any("records.jsonl:6: incomplete last line" in w for w in prof.warnings)


def test_corrupt_middle_line_names_file_and_line(tmp_path, sample):
    meta, recs = sample
    d = tmp_path / "p"
    _write_profile(d, recs[:5], meta)
    lines = (d / "records.jsonl").read_text().splitlines(keepends=True)
    lines[2] = lines[2][:30] + "\n"
    (d / "records.jsonl").write_text("".join(lines))
    with pytest.raises(CalibrationError, match=r"records\.jsonl:3: not a valid JSON record .* corrupt"):
        load_profile(d)


def test_invalid_records_and_meta_are_refused(tmp_path, sample):
    meta, recs = sample
    bad = dict(recs[0], time_s=-1.0)
    _write_profile(tmp_path / "a", [recs[1], bad], meta)
    with pytest.raises(CalibrationError, match=r"records\.jsonl:2: invalid record: .*time_s"):
        load_profile(tmp_path / "a")
    unknown = dict(recs[0], bench="quantum")
    _write_profile(tmp_path / "b", [unknown], meta)
    with pytest.raises(CalibrationError, match=r"records\.jsonl:1: invalid record"):
        load_profile(tmp_path / "b")
    alien = dict(recs[0], run_id="someone-else")
    _write_profile(tmp_path / "c", [alien], meta)
    with pytest.raises(CalibrationError, match="run_id 'someone-else' is not in meta.json"):
        load_profile(tmp_path / "c")
    _write_profile(tmp_path / "d", recs[:1], dict(meta, schema_version=99))
    with pytest.raises(CalibrationError, match="newer than this gpusim"):
        load_profile(tmp_path / "d")
    with pytest.raises(CalibrationError, match="no such profile directory"):
        load_profile(tmp_path / "missing")
    (tmp_path / "e").mkdir()
    with pytest.raises(CalibrationError, match="no meta.json: not a gpusim profile"):
        load_profile(tmp_path / "e")


def test_profile_helpers(quick):
    prof = load_profile(quick[0])
    assert set(RECORD_TYPES) == KINDS
    rows = prof.table("collective")
    assert rows and {"bytes", "busbw_bytes_per_s", "n_ranks", "level"} <= set(rows[0])
    with pytest.raises(CalibrationError, match="unknown record kind"):
        prof.of("gemms")
    assert prof.run(prof.meta.runs[0].run_id).status == "complete"


def test_writer_cuts_a_partial_line_and_validates(tmp_path, sample):
    from gpusim.calibrate_bench.records import RecordWriter

    meta, recs = sample
    w = RecordWriter(tmp_path)
    w.write(recs[:3])
    with open(w.path, "ab") as f:
        f.write(b'{"half":')
    records, done, warnings = w.prepare()
    assert len(records) == 3 and warnings
    assert w.path.read_bytes().endswith(b"}\n")
    assert {r["point"] for r in recs[:3] if sum(x["point"] == r["point"] for x in recs[:3]) >= r["point_n"]} == done
    with pytest.raises(CalibrationError, match="invalid record"):
        w.write([dict(recs[0], flop_per_s=float("nan"))])
    assert len(read_records(w.path)[0]) == 3  # nothing half-written after a refused record


def test_summary_statistics():
    from gpusim.calibrate_bench.harness import noise_flags, summarize

    s = summarize([3.0, 1.0, 2.0, 4.0, 5.0])
    assert (s["time_s"], s["time_s_min"], s["time_s_max"], s["reps"]) == (3.0, 1.0, 5.0, 5)
    assert s["time_s_p10"] == pytest.approx(1.4) and s["time_s_p90"] == pytest.approx(4.6)
    assert s["rel_spread"] == pytest.approx(3.2 / 3.0)
    noisy, why = noise_flags(s, 5, [])
    assert noisy and "high spread" in why
    quiet = summarize([1.0, 1.01, 0.99, 1.0])
    assert noise_flags(quiet, 3, ["sw_power_cap"]) == (False, None)
    assert noise_flags(quiet, 3, ["hw_thermal_slowdown"])[0]


# ---- environment capture pieces that need a GPU machine, run here against stand-ins -------------------
def test_nvml_wrapper_decodes_a_stub(monkeypatch):
    import types

    from gpusim.calibrate_bench.env import Nvml

    pci = {0: types.SimpleNamespace(busId=b"00000000:07:00.0"), 1: types.SimpleNamespace(busId=b"00000000:0B:00.0")}
    stub = types.SimpleNamespace(
        nvmlInit=lambda: None, nvmlDeviceGetCount=lambda: 2, nvmlDeviceGetHandleByIndex=lambda i: i,
        nvmlDeviceGetPciInfo=lambda h: pci[h], nvmlDeviceGetName=lambda h: b"NVIDIA H100 80GB HBM3",
        nvmlDeviceGetCurrentClocksEventReasons=lambda h: 0x4 | 0x40,
        nvmlDeviceGetPowerUsage=lambda h: 312_000, nvmlDeviceGetEnforcedPowerLimit=lambda h: 700_000,
        nvmlDeviceGetClockInfo=lambda h, c: 1980, nvmlSystemGetDriverVersion=lambda: "580.159.03",
        nvmlDeviceGetTemperature=lambda h, s: 61,
        nvmlDeviceGetMemoryInfo=lambda h: (_ for _ in ()).throw(RuntimeError("NVML_ERROR_NOT_SUPPORTED")),
    )
    monkeypatch.setitem(sys.modules, "pynvml", stub)
    nv = Nvml.try_open()
    assert nv is not None and nv.count() == 2
    assert nv.index_of_bus_id("0000:0b:00.0") == 1 and nv.index_of_bus_id("0000:99:00.0") is None
    assert nv.throttle_reasons(0) == ["sw_power_cap", "hw_thermal_slowdown"]
    g = nv.gpu(1)
    assert (g["name"], g["power_w"], g["power_limit_w"], g["temperature_c"]) == ("NVIDIA H100 80GB HBM3", 312.0, 700.0, 61)
    assert g["memory_total_bytes"] is None and g["pcie_generation"] is None  # failing or missing calls: None
    assert nv.driver() == "580.159.03"


def test_node_env_reads_nvidia_smi_topo(tmp_path, monkeypatch):
    from gpusim.calibrate_bench.env import node_env

    topo = Path(__file__).parent / "topo" / "pcie8_dual_socket.txt"
    fake = tmp_path / "nvidia-smi"
    fake.write_text(f'#!/bin/sh\nif [ "$2" = "-m" ]; then cat "{topo}"; else exit 1; fi\n')
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    env = node_env("h", 0, [0, 1], None, "cpu")
    assert env["topo_text"].startswith("#") and env["topo_p2p_text"] is None
    assert env["topology"]["intra_topology"] == "pcie-cross-socket"
    assert any("SYS" in w for w in env["topology_warnings"])
    assert env["cpu_threads"] == os.cpu_count() and env["torch"] == torch.__version__


def test_node_env_records_nccl_settings_and_warns_without_p2p(monkeypatch):
    """[issue 18] NCCL_* variables are part of what was measured: NCCL_P2P_DISABLE stages the intra-node collectives
    through host memory, so the environment records them and warns."""
    from gpusim.calibrate_bench.env import node_env

    monkeypatch.setenv("NCCL_P2P_DISABLE", "1")
    monkeypatch.setenv("NCCL_DEBUG", "WARN")
    env = node_env("h", 0, [0, 1], None, "cpu")
    assert env["nccl_env"]["NCCL_P2P_DISABLE"] == "1" and env["nccl_env"]["NCCL_DEBUG"] == "WARN"
    assert any("NCCL_P2P_DISABLE" in w for w in env["topology_warnings"])
    monkeypatch.delenv("NCCL_P2P_DISABLE")
    env = node_env("h", 0, [0, 1], None, "cpu")
    assert "NCCL_P2P_DISABLE" not in env["nccl_env"]
    assert not any("NCCL_P2P_DISABLE" in w for w in env["topology_warnings"])


def test_p2p_pair_path_from_topology():
    import types

    from gpusim.calibrate_bench.p2p import pair_path
    from gpusim.topology import parse_topo

    t = parse_topo((Path(__file__).parent / "topo" / "dgx1v.txt").read_text())
    ctx = types.SimpleNamespace(topology=t, rank_env=[{"rank": r, "nvml_index": r} for r in range(8)])
    assert pair_path(ctx, 0, 3) == "NV2" and pair_path(ctx, 0, 5) == "SYS"
    ctx.rank_env = [{"rank": 0, "nvml_index": None}, {"rank": 1, "nvml_index": 1}]
    assert pair_path(ctx, 0, 1) is None


# ---- GPU path (skipped where torch sees no CUDA device) ----------------------------------------------
gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@pytest.mark.gpu
@gpu
@pytest.mark.timeout(600)
def test_gpu_quick_run(tmp_path):
    n = min(torch.cuda.device_count(), 8)
    out = tmp_path / "p"
    rc, so, se, _ = run_cli(["--quick", "--nproc-per-node", str(n), "--out", str(out),
                             "--only", "gemm,memory,collectives,p2p,ddp"], timeout_s=540)
    assert rc == 0, so + se
    prof = load_profile(out)
    run = prof.meta.runs[-1]
    assert run.backend == "nccl" and run.device == "cuda"
    node = run.nodes[0]
    assert node.gpus and node.gpus[0].name and node.cuda
    mem = {m.kind for m in prof.of("memory")}
    assert mem == {"device_copy", "h2d_pinned", "h2d_pageable", "d2h_pinned", "d2h_pageable"}
    gemm = prof.of("gemm")
    best = {p: max(g.flop_per_s for g in gemm if g.precision == p) for p in {g.precision for g in gemm}}
    assert best["bf16"] > best["fp32"]
    pinned = max(m.bytes_per_s for m in prof.of("memory") if m.kind == "h2d_pinned")
    assert pinned > 1e9
    if n >= 2:
        coll = prof.of("collective")
        assert coll and all(c.correct for c in coll)
        assert prof.of("p2p") and all(p.bytes_per_s > 0 for p in prof.of("p2p"))
    ddp = prof.of("ddp_step")
    assert any(d.precision.startswith("amp_") for d in ddp)
