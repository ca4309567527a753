"""Hostile command lines over every subcommand (the case builder of benchmarks/fuzz_cli.py, driven by
hypothesis): never exit code 3, never a traceback, never inf/NaN printed as a figure or null for a figure in
JSON, every run under a time limit. `benchmarks/fuzz_cli.py --cases 400` runs the same cases at volume."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hs

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import fuzz_cli  # noqa: E402

LIMIT_S = 20.0
IN_PROCESS = sorted({name for name, _, _ in fuzz_cli.COMMANDS} - {"calibrate"})


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("fuzz")
    return tmp, fuzz_cli.make_files(tmp / "in")


@pytest.mark.parametrize("command", IN_PROCESS)
@settings(max_examples=12, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(seed=hs.integers(0, 2**32 - 1))
def test_no_internal_error_hang_or_bad_figure(files, command, seed):
    tmp, f = files
    argv = fuzz_cli.build_case(random.Random(seed), f, tmp, command)
    r = fuzz_cli.run_case(argv, LIMIT_S)
    assert r["kind"] in ("ok", "error"), (r["kind"], " ".join(argv)[:300], r["tail"], r.get("bad"))


@pytest.mark.parametrize("flags", [["--max-time", "nan"], ["--nproc-per-node", "100000"], ["--timeout", "inf"],
                                   ["--nproc-per-node", "-1"], ["--master-port", "1e9"], ["--max-time", "-1"]])
def test_calibrate_refuses_hostile_numbers_before_launching(files, flags, capsys):
    tmp, _ = files
    from gpusim.cli import main

    with pytest.raises(SystemExit) as e:
        main(["calibrate", "--quick", "--out", str(tmp / "prof"), *flags])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "must be" in err and "Traceback" not in err
    assert not (tmp / "prof").exists()  # nothing was launched or written


@pytest.mark.parametrize("argv, needle", [
    (["predict", "--model", "resnet50", "--gpu", "h100-sxm", "--per-gpu-batch", "8", "--bucket-mib=1e-320"],
     "--bucket-mib: must be a finite number from"),
    (["predict", "--model", "resnet50", "--gpu", "h100-sxm", "--per-gpu-batch", "8", "--gpus", "8",
      "--baseline-throughput=inf"], "--baseline-throughput: must be"),
    (["predict", "--model", "resnet50", "--gpu", "h100-sxm", "--per-gpu-batch", "8", "--gpus", "8",
      "--measured-throughput=inf"], "--measured-throughput: must be"),
    (["plan", "--model", "resnet50", "--samples", "1M", "--usd-per-kwh=inf"], "--usd-per-kwh: must be"),
    (["plan", "--model", "resnet50", "--samples", "1M", "--restart", "1e30s"], "--restart: must be"),
    (["plan", "--model", "resnet50", "--samples", "1M", "--top", "-1"], "--top: must be a whole number"),
    (["scale", "--model", "resnet50", "--gpu", "h100-sxm", "--per-gpu-batch", "8", "--global-batch", "-1"],
     "--global-batch: must be"),
])
def test_each_number_states_its_range(capsys, argv, needle):
    from gpusim.cli import main

    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    assert needle in capsys.readouterr().err


def test_fit_refuses_a_device_and_an_empty_profile(tmp_path, capsys):
    from gpusim.cli import main

    nccl = Path(__file__).resolve().parents[1] / "calibration" / "nccl_tests" / "all_reduce_perf_dgx_h100.txt"
    assert main(["fit", str(nccl), "-o", "/dev/null"]) == 2
    assert "not a regular file" in capsys.readouterr().err
    assert Path("/dev/null").is_char_device()
    prof = tmp_path / "prof"
    prof.mkdir()
    meta = Path(__file__).resolve().parents[1] / "app" / "fixtures" / "cpu_profile" / "meta.json"
    (prof / "meta.json").write_text(meta.read_text())
    (prof / "records.jsonl").write_text("")
    assert main(["fit", str(prof), "-o", str(tmp_path / "c.json")]) == 2
    assert "nothing to fit" in capsys.readouterr().err
    assert not (tmp_path / "c.json").exists()
