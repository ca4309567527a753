"""The planner in a real browser: `streamlit run app.py` on a free localhost port, driven by Playwright with
Debian's Chromium (/usr/bin/chromium; `.ci/run` installs it). Every page is loaded from its URL, waited for
until its Plotly charts have drawn, screenshotted, and checked: the charts have drawn axes and traces, the page
shows no exception, and a widget change reaches the URL (shareable scenarios).

Screenshots go to a temporary folder; set GPUSIM_SCREENSHOT_DIR to keep them (e.g. ``docs/``).
Skipped when Chromium is absent, except under CI (env var CI set), where that is a failure.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from app_helpers import APP, ROOT

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"]
#: url path, query, a button to press first (or None), minimum number of drawn charts, a text the page must show
PAGES = [
    ("", "model=bert-large&gpu=l40s&batch=32&fabric=pcie-cross-socket", None, 3, "Bottleneck: communication"),
    ("scaling", "model=bert-large&gpu=l40s&batch=32", None, 5, "By fabric"),
    ("batch", "", None, 2, "Largest batch that fits"),
    ("rooflines", "model=bert-large&gpu=l40s&batch=32", None, 2, "Communication roofline"),
    ("parallelism", "model=llama3-70b&gpu=h100-sxm&gpus=64&nodes=8&precision=bf16", None, 3, "Pipeline schedule"),
    ("plan", "model=llama2-7b&deadline_d=14&budget_usd=100000", None, 2, "Bill of materials"),
    ("topology", "gpu=rtx-a6000", "Load an example", 2, "Expected all-reduce over all 4 GPUs"),
]  # the Calibration page: test_calibration_upload_reaches_every_page
#: the calibration the browser uploads (8 x H100 fitted to synthetic records; see fixtures/make_calibrations.py)
CALIBRATION = Path(__file__).resolve().parent / "fixtures" / "h100_synthetic.json"

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def _chromium_or_skip() -> None:
    if Path(CHROMIUM).exists():
        return
    msg = f"{CHROMIUM} not found: install Debian's chromium (apt-get install -y chromium; .ci/run does)"
    if os.environ.get("CI"):
        pytest.fail(msg + " - required under CI")
    pytest.skip(msg)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server():
    _chromium_or_skip()
    pytest.importorskip("playwright.sync_api")
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", str(APP), "--server.headless", "true", "--server.port", str(port),
         "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none"],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 60
        while True:
            try:
                if urllib.request.urlopen(f"{url}/_stcore/health", timeout=2).read() == b"ok":
                    break
            except OSError:
                pass
            if proc.poll() is not None or time.time() > deadline:
                raise RuntimeError(f"streamlit did not start: {proc.stderr.read().decode()[-2000:]}")
            time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        yield b
        b.close()


def _keep(shot: Path) -> None:
    keep = os.environ.get("GPUSIM_SCREENSHOT_DIR")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(keep) / shot.name)


def _charts_drawn(page, name: str) -> int:
    charts = page.locator(".js-plotly-plot")
    for i in range(charts.count()):
        chart = charts.nth(i)
        # drawn: an SVG with axes ticks or a heatmap/bar/scatter layer with content
        assert chart.locator(".main-svg").count() >= 1
        assert chart.locator(".xtick, .ytick, .trace, .point").count() > 0, f"chart {i} on {name} has nothing drawn"
    return charts.count()


def _settle(page, n_charts: int) -> None:
    """Wait until the script has finished and the charts have drawn."""
    page.wait_for_selector('[data-testid="stApp"]', timeout=30_000)
    if n_charts:
        page.wait_for_function(f"document.querySelectorAll('.js-plotly-plot .main-svg').length >= {n_charts}",
                               timeout=60_000)
    page.wait_for_function("!document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=60_000)
    page.wait_for_timeout(800)  # let plotly finish its transitions


@pytest.mark.parametrize("path, query, press, n_charts, text", PAGES, ids=[p[0] or "step" for p in PAGES])
def test_page_renders_in_chromium(server, browser, tmp_path, path, query, press, n_charts, text):
    page = browser.new_page(viewport={"width": 1500, "height": 1150})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(f"{server}/{path}" + (f"?{query}" if query else ""), timeout=60_000)
    if press:
        _settle(page, 0)
        page.get_by_role("button", name=press).click()
    _settle(page, n_charts)
    name = path or "step"
    shot = tmp_path / f"screenshot-{name}.png"
    page.screenshot(path=str(shot), full_page=True)
    _keep(shot)
    assert page.locator('[data-testid="stException"]').count() == 0
    assert page.get_by_text(text).first.is_visible()
    assert _charts_drawn(page, name) >= n_charts
    assert shot.stat().st_size > 30_000, "screenshot looks blank (Streamlit's skeleton only)"
    assert not errors, errors
    page.close()


def test_widget_change_reaches_the_url_and_the_numbers(server, browser):
    page = browser.new_page(viewport={"width": 1500, "height": 1100})
    page.goto(f"{server}/?model=bert-large&gpu=l40s&batch=32", timeout=60_000)
    _settle(page, 2)

    def step_time() -> str:
        return page.locator('[data-testid="stMetric"]').filter(has_text="Step time") \
            .locator('[data-testid="stMetricValue"]').inner_text()

    before = step_time()
    box = page.get_by_role("combobox", name="Fabric inside a node")
    box.click()
    page.get_by_role("option", name="pcie-cross-socket", exact=True).click()
    page.wait_for_function("location.search.includes('fabric=pcie-cross-socket')", timeout=30_000)
    page.wait_for_selector("text=Bottleneck: communication", timeout=30_000)
    _settle(page, 2)
    after = step_time()
    assert after != before
    # the URL reopens the same scenario in a fresh page
    shared = page.url
    other = browser.new_page(viewport={"width": 1500, "height": 1100})
    other.goto(shared, timeout=60_000)
    _settle(other, 2)
    assert other.get_by_text("Bottleneck: communication").first.is_visible()
    other.close()
    page.close()


#: wide enough for every page's link in the top navigation (narrower windows fold the last ones into "N more")
NAV_WIDTH = 1900


def test_calibration_upload_reaches_every_page(server, browser, tmp_path):
    """Upload a calibration file on the Calibration page: its tables and figures draw (screenshot of the whole
    page), the Step page then shows the interval, and clearing brings the defaults back."""
    page = browser.new_page(viewport={"width": NAV_WIDTH, "height": 1150})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(f"{server}/calibration", timeout=60_000)
    _settle(page, 0)
    page.wait_for_selector("text=No calibration in use", timeout=60_000)  # a cold server renders it late
    assert page.get_by_text("No calibration in use").first.is_visible()
    page.locator('[data-testid="stFileUploader"] input[type="file"]').set_input_files(str(CALIBRATION))
    page.wait_for_selector("text=In use on every page", timeout=60_000)
    _settle(page, 5)
    # the page is taller than the window and scrolls inside Streamlit's main block: grow the window to it
    height = page.evaluate("document.querySelector('[data-testid=\"stMain\"]').scrollHeight")
    page.set_viewport_size({"width": NAV_WIDTH, "height": min(max(int(height), 1150), 6000)})
    _settle(page, 5)
    shot = tmp_path / "screenshot-calibration.png"
    page.screenshot(path=str(shot), full_page=True)
    _keep(shot)
    assert page.locator('[data-testid="stException"]').count() == 0
    for text in ("What was measured", "Fitted parameters", "held-out DDP step error: median 1.1% (n=6)",
                 "GEMM throughput vs size", "Point-to-point bandwidth per pair", "Notes of the fit"):
        assert page.get_by_text(text).first.is_visible(), text
    assert _charts_drawn(page, "calibration") >= 5
    assert shot.stat().st_size > 100_000, "screenshot looks blank"
    # every page uses it: the Step page runs on the calibrated machine and shows the interval as an error bar
    page.set_viewport_size({"width": NAV_WIDTH, "height": 1150})
    page.get_by_role("link", name="Step").first.click()
    page.wait_for_selector("text=(the calibrated machine)", timeout=60_000)
    _settle(page, 2)
    assert page.get_by_text("90% interval").first.is_visible()
    assert page.locator(".js-plotly-plot .errorbar").count() >= 1
    # clearing on the Calibration page restores the defaults
    page.get_by_role("link", name="Calibration").first.click()
    page.get_by_role("button", name="Clear calibration").click()
    page.wait_for_selector("text=No calibration in use", timeout=60_000)
    page.get_by_role("link", name="Step").first.click()
    page.wait_for_selector("text=8 x h100-sxm", timeout=60_000)
    _settle(page, 2)
    assert page.get_by_text("90% interval").count() == 0
    assert not errors, errors
    page.close()


def test_step_path_and_a_hostile_url_in_chromium(server, browser):
    """`/step` (the menu's own path of the first page) is served, and a URL value no widget can hold is dropped
    with a notice instead of a traceback."""
    page = browser.new_page()
    try:
        page.goto(f"{server}/step?batch=inf&nodes=1e400")
        _settle(page, 1)
        body = page.inner_text("body")
        assert "Page not found" not in body
        assert "batch='inf' ignored" in body and "Traceback" not in body
        assert page.locator('[data-testid="stException"]').count() == 0
    finally:
        page.close()


# --- [issue 20] pages with a non-default scenario: what the user reads --------------------------------------------

def _open(browser, server, path: str, n_charts: int, width: int = 1500, height: int = 1150):
    page = browser.new_page(viewport={"width": width, "height": height})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(f"{server}/{path}", timeout=60_000)
    _settle(page, n_charts)
    return page, errors


def _shot(page, tmp_path, name: str) -> Path:
    height = page.evaluate("document.querySelector('[data-testid=\"stMain\"]').scrollHeight")
    page.set_viewport_size({"width": page.viewport_size["width"], "height": min(max(int(height), 1150), 6000)})
    page.wait_for_timeout(800)
    shot = tmp_path / f"screenshot-{name}.png"
    page.screenshot(path=str(shot), full_page=True)
    _keep(shot)
    return shot


def test_parallelism_page_reads_its_own_scenario_and_one_best_layout(server, browser, tmp_path):
    """The header names the page's strategy (ddp, global batch 128), not the sidebar's; the heatmap's star, the
    inspected layout and its metric give the same tokens/s per GPU."""
    page, errors = _open(browser, server, "parallelism?model=llama3-70b&gpu=h100-sxm&gpus=64&nodes=8&precision=bf16"
                                          "&par_kind=ddp&par_gb=128", 3)
    try:
        body = page.inner_text("body")
        assert "Parallelism · llama3-70b on 64 x h100-sxm on 8 nodes · ddp, bf16, global batch 128" in body
        assert "per-GPU batch 256" not in body
        assert "the best layout of the search" in body
        star = page.locator(".js-plotly-plot text", has_text="★").first.text_content()
        value = star.removeprefix("★").strip()
        tile = page.locator('[data-testid="stMetric"]').filter(has_text="Tokens/s per GPU") \
            .locator('[data-testid="stMetricValue"]').inner_text()
        assert float(value.replace(",", "")) == pytest.approx(float(tile.replace(",", "")), abs=1.0)
        assert "e+" not in (page.locator(".js-plotly-plot").nth(1).text_content() or "")  # the breakdown in s, no exponent
        assert re.search(r"Pipeline schedule.*\(bubble \d+% of the step\)", body)
        shot = _shot(page, tmp_path, "parallelism-issue20")
        assert shot.stat().st_size > 30_000
        assert page.locator('[data-testid="stException"]').count() == 0 and not errors, errors
    finally:
        page.close()


def test_url_typos_are_named_with_the_nearest_choice(server, browser):
    page, errors = _open(browser, server, "?model=llama3.1-70bb&gpu=h100sxm", 1)
    try:
        body = page.inner_text("body")
        assert "model='llama3.1-70bb' ignored" in body and "did you mean 'llama3.1-70b'?" in body
        assert "gpu='h100sxm' ignored" in body and "did you mean 'h100-sxm'?" in body
        assert not errors, errors
    finally:
        page.close()


def test_compare_page_attributes_a_gpu_and_fabric_switch(server, browser, tmp_path):
    """Pin L40S on PCIe across sockets, switch to H100 + NVSwitch: the fabric is one change, possible only with the
    GPU, and the joint change explains the difference (what `gpusim compare` prints)."""
    page, errors = _open(browser, server, "compare?model=bert-large&gpu=l40s&batch=32&fabric=pcie-cross-socket", 0)
    try:
        page.get_by_role("button", name="Pin this scenario").click()
        page.wait_for_selector("text=Unpin", timeout=30_000)
        # h100-sxm is the default GPU: the URL drops gpu= for it
        for label, option, url_now in (("GPU", "h100-sxm", "!location.search.includes('gpu=l40s')"),
                                       ("Fabric inside a node", "nvswitch", "location.search.includes('fabric=nvswitch')")):
            page.get_by_role("combobox", name=label).click()
            page.keyboard.type(option)  # long lists are virtualised: filter to the option first
            page.get_by_role("option", name=option, exact=True).click()
            page.wait_for_function(url_now, timeout=30_000)
            _settle(page, 0)
        page.wait_for_selector("text=possible only together", timeout=60_000)
        body = page.inner_text("body")
        # (Streamlit's markdown draws -> as an arrow)
        assert "intra pcie4-x16 → nvlink4-nvswitch, intra_topology pcie-cross-socket → nvswitch" in body
        assert "explains most of the difference (100%)" in body
        assert "→ None" not in body and "→ -" not in body
        _shot(page, tmp_path, "compare-issue20")
        assert not errors, errors
    finally:
        page.close()


def test_plan_page_axes_have_labels(server, browser, tmp_path):
    page, errors = _open(browser, server, "plan?model=llama2-7b&deadline_d=14&budget_usd=100000", 2)
    try:
        pareto = page.locator(".js-plotly-plot").filter(has_text="Time to train vs cost").first
        ylabels = [t for t in pareto.locator(".ytick text").all_text_contents() if t.strip()]
        xlabels = [t for t in pareto.locator(".xtick text").all_text_contents() if t.strip()]
        assert len(ylabels) >= 2 and all(t.startswith("$") for t in ylabels), ylabels
        assert len(xlabels) >= 2, xlabels
        sens = page.locator(".js-plotly-plot").filter(has_text="What moves the answer most").first
        assert sens.locator(".legendtext").count() == 4
        _shot(page, tmp_path, "plan-issue20")
        assert not errors, errors
    finally:
        page.close()
