"""The wheel ships the hardware database: build it, install it in a fresh virtual environment, and run
`gpusim hw list` from outside the checkout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_wheel_installs_and_lists_the_database(tmp_path):
    dist = tmp_path / "dist"
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                        str(dist), str(ROOT)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    wheel = next(dist.glob("gpusim-*.whl"))

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    vpy = venv / "bin" / "python"
    site = subprocess.run([str(vpy), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    # the dependencies come from this environment; gpusim itself only from the wheel (a .pth adds the
    # dependencies' directory but not its editable-install hooks, which only site directories run)
    (Path(site) / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    # without PYTHONPATH: a checkout on it makes pip think gpusim is installed already and skip the wheel
    clean = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    r = subprocess.run([sys.executable, "-m", "pip", "--python", str(vpy), "install", "--no-deps", "-q", str(wheel)],
                       capture_output=True, text=True, timeout=300, env=clean)
    if r.returncode != 0:  # older pip without --python: unpack the wheel ourselves
        import zipfile

        zipfile.ZipFile(wheel).extractall(site)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "GPUSIM_HWDB", "GPUSIM_CACHE")}
    env["GPUSIM_CACHE_DIR"] = str(tmp_path / "user-cache")
    code = ("import gpusim, json, sys; from gpusim.cli import main; "
            "print(gpusim.__file__, file=sys.stderr); sys.exit(main(['hw', 'list', '--json']))")
    installed_before = sorted(p for p in Path(site).rglob("*") if "__pycache__" not in p.parts)
    r = subprocess.run([str(vpy), "-c", code], cwd=outside, capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    # [issue 20] the validated database is cached in the user's cache directory, never inside the installed
    # package (which may be read-only); a second start reads it back and prints the same
    assert len(list((tmp_path / "user-cache").glob("hwdb-*.pickle"))) == 1
    assert sorted(p for p in Path(site).rglob("*") if "__pycache__" not in p.parts) == installed_before
    again = subprocess.run([str(vpy), "-c", code], cwd=outside, capture_output=True, text=True, timeout=120, env=env)
    assert again.returncode == 0 and again.stdout == r.stdout
    assert str(ROOT) not in r.stderr, f"gpusim imported from the checkout, not the wheel: {r.stderr}"
    items = json.loads(r.stdout)
    kinds = [it["kind"] for it in items]
    assert kinds.count("gpu") >= 30 and kinds.count("link") >= 15 and kinds.count("node") >= 12
    assert all(str(ROOT) not in it["origin"] for it in items)
    # the model catalogue's data files ship in the wheel too (gpusim/workload/data/*.yaml)
    code = "import sys; from gpusim.cli import main; sys.exit(main(['models', '--json']))"
    r = subprocess.run([str(vpy), "-c", code], cwd=outside, capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    ids = [m["id"] for m in json.loads(r.stdout)]
    assert {"resnet50", "llama3.1-8b", "deepseek-v3", "mixtral-8x7b"} <= set(ids) and len(ids) >= 60
    # the track record ships too (gpusim/data/track_record.json): a prediction from the wheel reports its band
    code = ("import sys; from gpusim.cli import main; sys.exit(main(['predict', '--model', 'resnet50', '--gpu', "
            "'h100-sxm', '--gpus', '8', '--per-gpu-batch', '64', '--json']))")
    r = subprocess.run([str(vpy), "-c", code], cwd=outside, capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(r.stdout)["track_record"]["key"] == "data-parallel"
