"""Headless Chromium (Debian's ``chromium`` and ``chromium-driver``) driven by selenium, with the network blocked.

Fixture ``browser`` (session scoped): a selenium ``webdriver.Chrome`` started with ``--headless --no-sandbox
--disable-gpu --disable-quic --no-first-run --disable-background-networking --disable-component-update
--disable-sync``, a fresh ``--user-data-dir``, a proxy to nowhere (``127.0.0.1:9``, the discard port, with no
bypass) and, through the DevTools protocol, ``Network.setBlockedURLs`` for every scheme but ``file:`` and
``data:``. The browser log (console messages) and the performance log (every ``Network.requestWillBeSent``)
are kept so that a test can assert that no request left the file.

When chromium, chromedriver or selenium is missing, the tests that use it skip, saying which; with
``SERVEWATCH_REQUIRE_PEERS=1`` (or ``CI``; ``.ci/run`` sets it, and installs chromium + chromium-driver) they FAIL
with the reason instead, like the real server peers (``tests/support/llama_fixture.py``).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.llama_fixture import in_ci

BLOCKED = ["http://*", "https://*", "ws://*", "wss://*", "ftp://*", "chrome-extension://*"]
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-default-apps", "--disable-extensions", "--proxy-server=http://127.0.0.1:9",
         "--proxy-bypass-list=<-loopback>", "--window-size=1200,900", "--hide-scrollbars"]
SKIPPED: list[str] = []


def peers_required() -> bool:
    return in_ci() or os.environ.get("SERVEWATCH_REQUIRE_PEERS", "").strip().lower() in ("1", "true", "yes", "on")


def _unavailable(reason: str) -> None:
    msg = f"headless Chromium unavailable: {reason}"
    if msg not in SKIPPED:
        SKIPPED.append(msg)
    if peers_required():
        pytest.fail(msg + " (SERVEWATCH_REQUIRE_PEERS/CI is set: the browser tests are required; .ci/run installs "
                    "chromium and chromium-driver with apt-get)", pytrace=False)
    pytest.skip(msg)


def _find(*names: str) -> str | None:
    for n in names:
        p = shutil.which(n) or (f"/usr/bin/{n}" if Path(f"/usr/bin/{n}").is_file() else None)
        if p:
            return p
    return None


def browser_binaries() -> tuple[str, str]:
    """(chromium, chromedriver) paths; skip (locally) or fail (CI) when either is missing."""
    chromium = _find("chromium", "chromium-browser")
    driver = _find("chromedriver")
    if chromium is None:
        _unavailable("no chromium on PATH (Debian: apt-get install chromium)")
    if driver is None:
        _unavailable("no chromedriver on PATH (Debian: apt-get install chromium-driver)")
    return chromium, driver  # type: ignore[return-value]


class Browser:
    """One headless Chromium; ``open(path)`` loads a file and returns what it did."""

    def __init__(self, driver) -> None:
        self.driver = driver

    def open(self, path: Path, timeout_s: float = 60.0) -> dict:
        """Load ``path`` (file://), wait until its start-up script has run, and return ``{"console": [...],
        "requests": [urls], "blocked": [urls the block refused], "render_ms": ms}``. The logs are drained before, so each page's are its own."""
        from selenium.webdriver.support.ui import WebDriverWait

        d = self.driver
        d.get_log("browser")
        d.get_log("performance")
        d.get(path.resolve().as_uri())
        WebDriverWait(d, timeout_s).until(
            lambda drv: drv.execute_script("return document.readyState") == "complete"
            and drv.execute_script("return document.body.getAttribute('data-charts-ready')") is not None)
        render_ms = d.execute_script(
            "var n=performance.getEntriesByType('navigation')[0]; return n ? n.loadEventEnd - n.startTime : null;")
        console = d.get_log("browser")
        requests, ids, blocked = [], {}, []
        for entry in d.get_log("performance"):
            msg = json.loads(entry["message"])["message"]
            if msg.get("method") == "Network.requestWillBeSent":
                requests.append(msg["params"]["request"]["url"])
                ids[msg["params"]["requestId"]] = msg["params"]["request"]["url"]
            elif msg.get("method") == "Network.loadingFailed" and msg["params"].get("blockedReason"):
                blocked.append(ids.get(msg["params"]["requestId"]))
        return {"console": console, "requests": requests, "blocked": blocked, "render_ms": render_ms}

    def screenshot(self, out: Path) -> None:
        """A PNG of the whole page (the window grown to the page's height through the DevTools protocol)."""
        d = self.driver
        height = int(d.execute_script("return Math.ceil(document.documentElement.scrollHeight)"))
        d.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                          {"width": 1200, "height": min(height, 16000), "deviceScaleFactor": 1, "mobile": False})
        try:
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(d.get_screenshot_as_png())
        finally:
            d.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


@pytest.fixture(scope="session")
def browser(tmp_path_factory) -> Iterator[Browser]:
    chromium, driver_path = browser_binaries()
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except Exception as exc:  # ImportError, or a broken install
        _unavailable(f"selenium is not importable ({type(exc).__name__}: {exc}); pip install 'selenium>=4.20'")
    opts = webdriver.ChromeOptions()
    opts.binary_location = chromium
    for flag in FLAGS:
        opts.add_argument(flag)
    opts.add_argument(f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}")
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    log = tmp_path_factory.mktemp("chromedriver") / "chromedriver.log"
    try:
        drv = webdriver.Chrome(service=Service(executable_path=driver_path, log_output=str(log)), options=opts)
    except Exception as exc:
        tail = log.read_text(errors="replace")[-1500:] if log.exists() else ""
        _unavailable(f"chromedriver could not start chromium ({type(exc).__name__}: {str(exc)[:300]}) {tail}")
    try:
        drv.execute_cdp_cmd("Network.enable", {})
        drv.execute_cdp_cmd("Network.setBlockedURLs", {"urls": BLOCKED})
        yield Browser(drv)
    finally:
        drv.quit()


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:  # noqa: ARG001
    """Why the browser tests did not run, once at the end of the session."""
    if SKIPPED:
        terminalreporter.section("browser tests")
        for line in SKIPPED:
            terminalreporter.write_line(line + ("  -> the tests that need it FAILED" if peers_required()
                                                else "  -> the tests that need it were SKIPPED"))
