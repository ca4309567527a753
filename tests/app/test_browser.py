"""The planner in a real browser: `streamlit run app.py` on a free localhost port, driven by Playwright with
Debian's Chromium (/usr/bin/chromium; `.ci/run` installs it). Every page is loaded from its URL, waited for
until its Plotly charts have drawn, screenshotted, and checked: the charts have drawn axes and traces, the page
shows no exception, and a widget change reaches the URL (shareable scenarios).

Screenshots go to a temporary folder; set GPUSIM_SCREENSHOT_DIR to keep them (e.g. ``docs/``).
Skipped when Chromium is absent, except under CI (env var CI set), where that is a failure.
"""

from __future__ import annotations

import os
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
