"""What the real-browser tests share: Debian's Chromium, a Streamlit server of the app on a free loopback port,
and page helpers.  The tests skip with a reason when /usr/bin/chromium or Playwright is absent."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM = Path("/usr/bin/chromium")
BROWSER_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_healthy(url: str, proc: subprocess.Popen, log: Path, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"streamlit exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.3)
    raise TimeoutError(f"streamlit did not become healthy within {timeout:.0f}s:\n{log.read_text()[-3000:]}")


@contextlib.contextmanager
def streamlit_server(log_name: str) -> Iterator[str]:
    """``streamlit run app.py`` on a free loopback port (its log in ``test-artifacts/log_name``); yields its URL
    once healthy and stops the whole process group afterwards.  Skips without Chromium or Playwright."""
    if not CHROMIUM.exists():
        pytest.skip("Debian Chromium is not installed at /usr/bin/chromium (apt-get install chromium)")
    pytest.importorskip("playwright.sync_api", reason="Playwright for Python is not installed")
    ARTIFACTS.mkdir(exist_ok=True)
    port = _free_port()
    log = ARTIFACTS / log_name
    env = dict(os.environ, STREAMLIT_BROWSER_GATHER_USAGE_STATS="false")
    cmd = [sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true"]
    cmd += ["--server.address", "127.0.0.1", "--server.port", str(port), "--server.fileWatcherType", "none"]
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(url, proc, log)
        yield url
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=10)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


def open_app(browser, url: str, timeout_ms: float):
    """A new page on the app at ``url`` (downloads accepted), once its home heading shows."""
    page = browser.new_page(viewport={"width": 1400, "height": 1000}, accept_downloads=True)
    page.set_default_timeout(timeout_ms)
    page.goto(url, wait_until="domcontentloaded")
    page.get_by_role("heading", name="Annotator reliability audit").wait_for()
    return page


def goto_page(page, name: str, timeout_ms: float) -> None:
    """Click the sidebar link whose text ends with ``name`` and wait for a heading naming it."""
    page.locator('[data-testid="stSidebar"] a', has_text=re.compile(rf"{name}\s*$")).first.click()
    page.get_by_role("heading", name=re.compile(name)).first.wait_for(timeout=timeout_ms)


def no_exception(page) -> None:
    assert page.locator('[data-testid="stException"]').count() == 0
