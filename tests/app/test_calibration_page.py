"""The Calibration page under AppTest, and a calibration in use on the other pages: loading a file (upload or a
path on the server) or fitting a profile on the fly shows the environment, the parameter table, the measured
vs fitted figures and the held-out steps; the Step and Plan pages then show the calibration's interval; the
clear button brings the defaults back; bad input is a message, never a traceback.

Fixtures (tests/app/fixtures, made by make_calibrations.py): ``h100_synthetic.json`` (8 x H100 over NVSwitch,
fitted to synthetic records), ``cpu_profile/`` (a real two-process gloo profile) and ``cpu_gloo.json`` (its fit).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from app_helpers import (
    PAGES,
    figures,
    metrics,
    no_trouble,
    parse_ms,
    parse_num,
    run_app,
)

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

FIX = Path(__file__).resolve().parent / "fixtures"
H100 = FIX / "h100_synthetic.json"
CPU_JSON = FIX / "cpu_gloo.json"
CPU_PROFILE = FIX / "cpu_profile"


def upload(at, path: Path, name: str | None = None, content: bytes | None = None):
    """Upload a file into the page's uploader (whatever its generation) and rerun."""
    up = at.file_uploader[0]
    up.upload(name or path.name, content if content is not None else path.read_bytes(), "application/json")
    return at.run()


def load_path(at, text: str):
    at.text_area(key="cal_path").input(text)
    at.button(key="cal_load").click()
    return at.run()


def in_use(at) -> bool:
    return any("In use on every page" in s.value for s in at.success)


def interval_caption(at) -> str | None:
    return next((c.value for c in at.caption if "90% interval" in c.value), None)


def test_page_without_calibration_says_how_to_make_one():
    at = run_app("calibration")
    no_trouble(at)
    assert any("gpusim calibrate" in i.value and "gpusim fit" in i.value for i in at.info)
    assert not at.get("plotly_chart") and not in_use(at)


def test_uploaded_calibration_shows_environment_parameters_figures_and_held_out_steps():
    at = upload(run_app("calibration"), H100)
    no_trouble(at)
    assert in_use(at)
    m = metrics(at)
    assert m["Device"] == "NVIDIA H100 80GB HBM3" and m["Ranks"] == "8" and m["Nodes"] == "1"
    assert m["Backend"] == "nccl" and m["Database GPU"] == "h100-sxm"
    assert m["Held-out DDP step error"] == "1.1%"
    # the parameter table: every fitted figure with a readable value and its std
    params = at.dataframe[0].value
    doc = json.loads(H100.read_text())
    assert list(params["parameter"]) == [f["name"] for f in doc["fitted"]]
    bf16 = params[params["parameter"] == "gemm.ceiling_flop_per_s.bf16"].iloc[0]
    assert bf16["value"].endswith("TFLOP/s") and bf16["± std"].startswith("± ")
    assert 0 < bf16["relative std"] < 0.05
    figs = figures(at)
    gemm = figs["GEMM throughput vs size"]
    measured = [t for t in gemm["data"] if t["mode"] == "markers"]
    assert [t["name"] for t in measured] == ["fp32", "tf32", "bf16"]
    assert all(t["x"] == sorted(t["x"]) for t in measured)
    bf16_line = next(t for t in gemm["data"] if t["mode"] == "lines" and t["legendgroup"] == "bf16")
    assert 700 < max(bf16_line["y"]) < 800  # TFLOP/s: the fitted ceiling (787 TFLOP/s) is approached
    coll = figs["Collectives (intra-node): bus bandwidth vs size"]
    names = {t["name"] for t in coll["data"] if t["mode"] == "markers"}
    assert {"all_reduce intra-node n=4", "all_reduce intra-node n=8", "broadcast intra-node n=8"} <= names
    assert coll["layout"]["xaxis"]["type"] == "log" and coll["layout"]["yaxis"]["type"] == "log"
    assert "Memory copy bandwidth vs size" in figs
    p2p = figs["Point-to-point bandwidth per pair"]["data"][0]
    assert any("SLOW" in t for t in p2p["text"])  # the 0 -> 3 pair of the fixture is slow
    held = figs["Held-out DDP steps: measured vs predicted"]
    assert [t["name"] for t in held["data"]][:2] == ["measured (median, p10-p90)", "predicted"]
    assert len(held["data"][0]["x"]) == 6
    assert any(md.value == "**held-out DDP step error: median 1.1% (n=6)**" for md in at.markdown)
    assert any("overlap_frac" in md.value for md in at.markdown)  # the fit's notes
    # the sidebar now describes the calibrated machine with its ranks
    assert at.segmented_control(key="hw").value == "calibrated"
    assert at.number_input(key="gpus").value == 8 and at.number_input(key="nodes").value == 1
    assert any("Calibration in use" in c.value and "h100_synthetic.json" in c.value for c in at.caption)


def test_calibration_changes_the_step_page_and_shows_an_interval():
    at = run_app("step")
    before = metrics(at)
    assert interval_caption(at) is None
    at.switch_page(PAGES["calibration"]).run()
    upload(at, H100)
    at.switch_page(PAGES["step"]).run()
    no_trouble(at)
    after = metrics(at)
    assert "(the calibrated machine)" in at.markdown[0].value
    assert after["Step time"] != before["Step time"] and after["MFU"] != before["MFU"]
    cap = interval_caption(at)
    assert cap and "samples/s" in cap
    lo, hi = (parse_num(x) for x in cap.split(": ", 1)[1].split(" samples/s")[0].split(" to "))
    assert lo < parse_num(after["Samples/s"]) < hi
    bars = figures(at)["Where one training step goes"]["data"]
    band = next(t for t in bars if t["name"].startswith("90% interval"))
    total = sum(t["x"][0] for t in bars if t["type"] == "bar")
    assert band["x"][0] == pytest.approx(total)
    assert band["error_x"]["array"][0] > 0 and band["error_x"]["arrayminus"][0] > 0
    assert parse_ms(after["Step time"]) == pytest.approx(total, rel=0.01)
    # the same calibration on the database's H100: efficiencies transfer, links do not; still an interval
    at.segmented_control(key="hw").set_value("gpu").run()
    no_trouble(at)
    on_db = metrics(at)
    assert on_db["Step time"] not in (before["Step time"], after["Step time"])
    assert interval_caption(at)
    assert any("efficiencies of the calibrated h100-sxm applied" in c.value for c in at.caption)


def test_clear_restores_the_defaults():
    at = run_app("step", {"model": "bert-large", "batch": "32", "gpus": "16", "nodes": "2"})
    before = metrics(at)
    at.switch_page(PAGES["calibration"]).run()
    upload(at, H100)
    assert at.segmented_control(key="hw").value == "calibrated" and at.number_input(key="gpus").value == 8
    at.button(key="cal_clear").click().run()
    no_trouble(at)
    assert not in_use(at) and at.info  # back to "no calibration"
    # the sidebar's hardware as it was before the calibration moved it to the calibrated machine
    assert at.segmented_control(key="hw").value == "gpu"
    assert at.number_input(key="gpus").value == 16 and at.number_input(key="nodes").value == 2
    assert not at.file_uploader[0].value  # a fresh uploader: the file does not come back
    at.switch_page(PAGES["step"]).run()
    no_trouble(at)
    assert metrics(at) == before
    assert interval_caption(at) is None
    assert not any("Calibration in use" in c.value for c in at.caption)


@pytest.mark.parametrize("name, content, words", [
    ("garbage.json", b"{not json", "not valid JSON"),
    ("binary.json", b"\xff\xfe\x00\x01", "not text"),
    ("other.json", b'{"format": "something-else", "version": 1}', "not a gpusim calibration file"),
    ("future.json", None, "newer than this gpusim"),
    ("broken.json", None, "invalid calibration"),
])
def test_bad_files_show_an_error_never_a_traceback(name, content, words):
    doc = json.loads(CPU_JSON.read_text())
    if name == "future.json":
        content = json.dumps({**doc, "version": 99}).encode()
    elif name == "broken.json":
        content = json.dumps({**doc, "environment": {"device": "?"}}).encode()
    at = upload(run_app("calibration"), CPU_JSON, name=name, content=content)
    assert not at.exception
    assert at.error and words in at.error[0].value and name in at.error[0].value
    assert not in_use(at) and not at.get("plotly_chart")


def test_a_profile_directory_is_fitted_on_the_fly_and_a_cpu_fit_stays_on_its_machine():
    at = load_path(run_app("calibration", {"batch": "32"}), str(CPU_PROFILE))  # 256 would not fit in its RAM
    no_trouble(at)
    assert in_use(at) and any("fit of cpu_profile" in s.value for s in at.success)
    m = metrics(at)
    assert m["Database GPU"] == "none" and m["Backend"] == "gloo" and m["Ranks"] == "2"
    figs = figures(at)
    assert {"GEMM throughput vs size", "Memory copy bandwidth vs size", "Point-to-point bandwidth per pair",
            "Held-out DDP steps: measured vs predicted"} <= set(figs)
    assert figs["GEMM throughput vs size"]["layout"]["yaxis"]["title"]["text"] == "GFLOP/s"  # a CPU
    assert at.number_input(key="gpus").value == 2
    at.switch_page(PAGES["step"]).run()
    no_trouble(at)
    assert "2 x calibrated-amd-epyc (the calibrated machine)" in at.markdown[0].value
    assert interval_caption(at)
    # a CPU's efficiencies are relative to its own ceilings: nothing transfers to a database GPU
    at.segmented_control(key="hw").set_value("gpu").run()
    no_trouble(at)
    assert any("do not transfer to h100-sxm" in c.value for c in at.caption)
    assert any("no fitted parameter of this calibration applies" in c.value for c in at.caption)


@pytest.mark.parametrize("text, words", [
    ("/no/such/profile", "no such file or directory"),
    (str(FIX), "not a gpusim profile"),
    ("", "give the path"),
])
def test_bad_paths_show_an_error(text, words):
    at = run_app("calibration")
    if text:
        at = load_path(at, text)
    else:
        at.button(key="cal_load").click().run()
    assert not at.exception
    assert at.error and words in at.error[0].value.lower()
    assert not in_use(at)


def test_a_binary_file_path_is_an_error(tmp_path):
    blob = tmp_path / "calibration.json"
    blob.write_bytes(bytes(range(256)))
    at = load_path(run_app("calibration"), str(blob))
    assert not at.exception
    assert at.error and "binary file" in at.error[0].value and not in_use(at)


def test_a_calibration_file_path_is_loaded():
    at = load_path(run_app("calibration"), str(CPU_JSON))
    no_trouble(at)
    assert in_use(at) and any("cpu_gloo.json" in s.value for s in at.success)


@pytest.mark.parametrize("fixture", [H100, CPU_JSON], ids=["h100", "cpu"])
def test_every_page_runs_on_the_calibrated_machine(fixture):
    at = upload(run_app("calibration", {"batch": "32"}), fixture)
    assert at.segmented_control(key="hw").value == "calibrated"
    for page in ("step", "scaling", "batch", "rooflines", "topology"):
        at.switch_page(PAGES[page]).run()
        assert not at.exception, (page, [e.value for e in at.exception])
        assert not at.error, (page, [e.value for e in at.error])
        if page != "topology":
            assert at.get("plotly_chart"), page


def test_plan_page_carries_the_interval_to_the_time_to_train():
    pytest.importorskip("gpusim.planning")
    at = upload(run_app("calibration", {"model": "llama2-7b", "deadline_d": "30"}), H100)
    at.switch_page(PAGES["plan"]).run()
    no_trouble(at)
    assert any("Calibration in use (h100_synthetic.json) on h100-sxm" in c.value for c in at.caption)
    assert next(k for k in metrics(at) if k.startswith("GPUs")) == "GPUs (h100-sxm)"
    band = next(c.value for c in at.caption if "With the calibration's uncertainty" in c.value)
    assert "90% interval" in band and " to " in band


def test_a_calibration_without_a_machine_applies_to_database_gpus_only():
    at = upload(run_app("calibration"), H100)
    assert at.segmented_control(key="hw").value == "calibrated"
    doc = json.loads(H100.read_text())
    at = upload(at, H100, name="no_machine.json", content=json.dumps({**doc, "hardware": None}).encode())
    no_trouble(at)
    hw = at.segmented_control(key="hw")
    assert hw.value == "gpu" and "calibrated" not in hw.options  # the previous machine is gone from the sidebar
    assert any("does not describe a machine" in w.value for w in at.warning)
    at.switch_page(PAGES["step"]).run()
    no_trouble(at)
    assert interval_caption(at) and any("no_machine.json" in c.value for c in at.caption)


def test_plan_page_says_a_cpu_calibration_does_not_transfer():
    pytest.importorskip("gpusim.planning")
    at = upload(run_app("calibration", {"model": "llama2-7b", "deadline_d": "30"}), CPU_JSON)
    at.switch_page(PAGES["plan"]).run()
    no_trouble(at)
    assert any("do not transfer to database GPUs" in c.value for c in at.caption)
    assert not any("With the calibration's uncertainty" in c.value for c in at.caption)
