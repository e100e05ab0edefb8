"""Real-browser end-to-end test: Streamlit server + Playwright driving Debian's Chromium.

Starts ``streamlit run app.py`` on a free loopback port, uploads a CSV, maps the columns, fits
Dawid–Skene, and checks that the confusion heatmap and the posterior table render.  Screenshots go to
``test-artifacts/``.  Skips with a reason when /usr/bin/chromium or Playwright is absent.
"""

from __future__ import annotations

import re

import pytest
from browser import ARTIFACTS, BROWSER_ARGS, CHROMIUM, goto_page, no_exception, streamlit_server

from fusion_core.simulate import dawid_skene

pytestmark = pytest.mark.e2e

TIMEOUT_MS = 30_000


@pytest.fixture
def server():
    with streamlit_server("e2e-streamlit.log") as url:
        yield url


def _goto_page(page, name: str) -> None:
    goto_page(page, name, TIMEOUT_MS)


def _pick_option(page, typed: str, option: re.Pattern[str], attempts: int = 3) -> None:
    """Pick one option of the first multiselect by typing a filter into it.

    Streamlit's option list is virtualised (only visible options exist in the DOM), so the list is
    filtered down by typing; on a loaded machine the first keystrokes can arrive before the list has
    opened, so the filter is retyped until the option shows.
    """
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    box = page.locator('[data-testid="stMultiSelect"] input').first
    for attempt in range(attempts):
        box.click()
        box.fill("")
        box.press_sequentially(typed, delay=20)
        try:
            page.get_by_role("option", name=option).first.click(timeout=TIMEOUT_MS // attempts)
            return
        except PlaywrightTimeout:
            if attempt == attempts - 1:
                raise
            page.keyboard.press("Escape")


def _until(act, shown, attempts: int = 2) -> None:
    """Repeat ``act`` until ``shown`` is visible: an action that lands while a rerun is replacing the page can be
    lost on a loaded machine."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    for attempt in range(attempts):
        act()
        try:
            shown.first.wait_for(timeout=TIMEOUT_MS)
            return
        except PlaywrightTimeout:
            if attempt == attempts - 1:
                raise


def _click_until(page, button, shown, attempts: int = 2) -> None:
    """Click ``button`` until ``shown`` is visible (the fit results are cached, so a second click refits nothing)."""
    _until(button.click, shown, attempts)


def _upload_until(page, path, shown, attempts: int = 2) -> None:
    """Attach ``path`` to the first file uploader until ``shown`` is visible: a file set while the page is still
    rerunning after a navigation can land on an uploader that the rerun then replaces."""

    def attach() -> None:
        page.locator('[data-testid="stFileUploaderDropzoneInput"]').first.set_input_files(str(path))

    _until(attach, shown, attempts)


@pytest.mark.slow
def test_upload_fit_and_explore(server, tmp_path):
    from playwright.sync_api import expect, sync_playwright

    sim = dawid_skene(
        n_items=400, n_workers=12, n_classes=3, responses_per_item=5, labels=["cat", "dog", "<b>bird</b>"], seed=11
    )
    csv = tmp_path / "export.csv"
    sim.responses.rename(columns={"task": "item_id", "worker": "annotator", "label": "answer"}).to_csv(csv, index=False)
    good = tmp_path / "clean.csv"
    sim.responses.assign(label=sim.responses["label"].str.replace("<b>bird</b>", "bird", regex=False)).rename(
        columns={"task": "item_id", "worker": "annotator", "label": "answer"}
    ).to_csv(good, index=False)

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=BROWSER_ARGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.set_default_timeout(TIMEOUT_MS)
            expect.set_options(timeout=TIMEOUT_MS)  # uploads and fits take seconds on a loaded CI machine
            page.goto(server, wait_until="domcontentloaded")
            page.get_by_role("heading", name="Annotator reliability audit").wait_for()
            expect(page.locator('[data-testid="stPlotlyChart"]').first).to_be_visible()
            page.screenshot(path=str(ARTIFACTS / "e2e-01-home-demo.png"), full_page=True)

            _goto_page(page, "Cartels")  # the built-in demo is a binary crowd with a simulated cartel
            page.get_by_role("button", name="Detect cartels").click()
            expect(page.locator('[data-testid="stPlotlyChart"]', has_text="scree").first).to_be_visible()
            expect(page.get_by_text("annotators who agree with each other beyond")).to_be_visible()
            no_exception(page)
            page.screenshot(path=str(ARTIFACTS / "e2e-01b-cartels-demo.png"), full_page=True)

            _goto_page(page, "Data")
            page.get_by_role("tab", name="Upload responses").click()
            # a label with HTML markup is refused with one clear message; the demo data stays loaded
            _upload_until(page, csv, page.get_by_text(re.compile(r"Map the columns of\s*export")))
            page.get_by_role("button", name="Use these columns").click()
            expect(page.locator('[data-testid="stAlertContentError"]')).to_have_count(1)
            expect(page.locator('[data-testid="stAlertContentError"]')).to_contain_text("HTML markup")
            assert page.locator("b", has_text="bird").count() == 0  # shown as text, never rendered
            page.screenshot(path=str(ARTIFACTS / "e2e-02-html-label-refused.png"), full_page=True)

            _upload_until(page, good, page.get_by_text(re.compile(r"Map the columns of\s*clean")))
            page.get_by_role("button", name="Use these columns").click()
            expect(page.get_by_text("Loaded 2,000 responses from the upload.")).to_be_visible()
            no_exception(page)
            page.screenshot(path=str(ARTIFACTS / "e2e-03-data-uploaded.png"), full_page=True)

            _goto_page(page, "Fit")
            expect(page.get_by_text("Recommended: auto")).to_be_visible()  # preselected, in plain words
            page.get_by_text("Choose methods (for experts)").click()
            _pick_option(page, "ds — Learns", re.compile(r"^ds — "))
            page.keyboard.press("Escape")
            expect(page.get_by_text("ds parameters")).to_be_visible()  # the rerun after the pick has finished
            fitted = page.locator('[data-testid="stAlertContentSuccess"]', has_text="Fitted: auto, ds")
            _click_until(page, page.get_by_role("button", name="Fit selected methods"), fitted)
            expect(page.get_by_role("heading", name="Results in this session")).to_be_visible()
            no_exception(page)
            page.screenshot(path=str(ARTIFACTS / "e2e-04-fit.png"), full_page=True)

            _goto_page(page, "Annotators")
            heat = page.locator('[data-testid="stPlotlyChart"]', has_text="Confusion matrices")
            expect(heat.first).to_be_visible()
            expect(heat.first.get_by_text("true", exact=True).first).to_be_attached()  # y axis: true class (rows)
            expect(heat.first.get_by_text("reported", exact=True).first).to_be_attached()  # x axis: reported
            no_exception(page)
            heat.first.scroll_into_view_if_needed()
            page.screenshot(path=str(ARTIFACTS / "e2e-05-annotators.png"), full_page=True)

            _goto_page(page, "Items")
            expect(page.get_by_role("heading", name="Posterior table")).to_be_visible()
            table = page.locator('[data-testid="stDataFrame"]').first
            expect(table).to_be_visible()
            no_exception(page)
            page.screenshot(path=str(ARTIFACTS / "e2e-06-items.png"), full_page=True)
        finally:
            browser.close()
