"""[issue 19] Imports that cannot be shadowed: after the editable install the Makefile makes, a script run from a
folder that holds a directory named ``gpusim`` (a clone, an empty folder) still imports the real package.

setuptools' default editable install maps pyproject's ``package-dir`` (``gpusim.hwdb_data`` -> ``hwdb/``) with a
meta-path finder that Python consults after its path finder, which returns a namespace package for any folder
named ``gpusim`` on ``sys.path`` (the script's folder first): ``module 'gpusim' has no attribute 'simulate'``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ("import gpusim, sys\n"
          "print(gpusim.__file__)\n"
          "import gpusim.hwdb_data, gpusim.calibrate_bench\n"
          "from gpusim.cli import main\n"
          "sys.exit(main(['predict', '--model', 'resnet50', '--gpu', 'h100-sxm', '--per-gpu-batch', '64', '--json']) "
          "if callable(gpusim.simulate) else 5)\n")


def _makefile_install_options() -> list[str]:
    """The options the Makefile gives ``pip install -e`` (every such line must give the same)."""
    lines = [ln for ln in (ROOT / "Makefile").read_text().splitlines() if "install" in ln and " -e " in ln]
    assert lines, "the Makefile has no editable install"
    opts = {tuple(re.findall(r"--config-settings[= ]\S+", ln)) for ln in lines}
    assert len(opts) == 1, f"the Makefile's editable installs differ: {lines}"
    return [tok for o in next(iter(opts)) for tok in o.replace("--config-settings ", "--config-settings=").split()]


def test_the_makefile_installs_with_a_plain_path_entry():
    assert any("editable_mode=compat" in o for o in _makefile_install_options())


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_folder_named_gpusim_does_not_shadow_the_editable_install(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    vpy = venv / "bin" / "python"
    site = subprocess.run([str(vpy), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    # the dependencies from this environment (a .pth adds their folder, not this environment's own gpusim hooks)
    (Path(site) / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    r = subprocess.run([sys.executable, "-m", "pip", "--python", str(vpy), "install", "--no-deps",
                        "--no-build-isolation", "-q", *_makefile_install_options(), "-e", str(ROOT)],
                       capture_output=True, text=True, timeout=400)
    if r.returncode != 0 and "no such option: --python" in r.stderr:
        pytest.skip("this pip cannot install into another environment (--python)")
    assert r.returncode == 0, r.stderr[-2000:]

    work = tmp_path / "work"
    (work / "gpusim").mkdir(parents=True)  # the trap: an empty folder named like the package
    (work / "script.py").write_text(SCRIPT)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "GPUSIM_HWDB")}
    for cmd in ([str(vpy), "script.py"], [str(vpy), "-c", SCRIPT]):
        r = subprocess.run(cmd, cwd=work, capture_output=True, text=True, timeout=120, env=env)
        assert r.returncode == 0, r.stderr[-2000:]
        first = r.stdout.splitlines()[0]
        assert first == str(ROOT / "gpusim" / "__init__.py"), first
        assert '"step_s"' in r.stdout
