"""What the AppTest (headless Streamlit) tests share: the app started on its home page, and page switches that
fail on any exception the page raised."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("streamlit.testing.v1")
from streamlit import config as st_config
from streamlit.testing.v1 import AppTest

st_config.set_option("client.showErrorDetails", True)
ROOT = Path(__file__).resolve().parents[1]


def start_app(timeout: float = 180) -> AppTest:
    """The app after its first run (the built-in demo loaded), with no exception."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=timeout)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def go(at: AppTest, page: str) -> AppTest:
    """Switch to ``page`` and run it; no exception."""
    at.switch_page(page).run()
    assert not at.exception, f"{page}: {[e.value for e in at.exception]}"
    return at
