"""Real-browser check (issue 22) that the audit shows the re-labelling plan and the reliability-over-time finding:
a crowd whose one annotator's accuracy drops half-way, uploaded with a time column, audited in the app (Streamlit
server + Playwright driving Debian's Chromium); the Audit page must show the drift answer, the per-annotator
chart and the plan in words, and the downloaded HTML report both sections.  Slow (a server, an audit and a
report): run with ``-m slow``.  Screenshots go to ``test-artifacts/``."""

from __future__ import annotations

import re

import pytest
from browser import ARTIFACTS, BROWSER_ARGS, CHROMIUM, goto_page, no_exception, open_app, streamlit_server

from fusion_core.simulate.drift import drift_crowd

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

TIMEOUT_MS = 180_000  # the upload and the audit take long on a loaded 2-core machine


@pytest.fixture
def server():
    with streamlit_server("e2e-plan-drift-streamlit.log") as url:
        yield url


def test_audit_shows_plan_and_drift_in_browser(server, tmp_path):
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=TIMEOUT_MS)
    sim = drift_crowd(n_items=600, n_workers=8, responses_per_item=5, n_classes=3, timestamps=True, seed=1)
    csv = tmp_path / "crowd-with-time.csv"
    sim.responses.to_csv(csv, index=False)

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=BROWSER_ARGS, headless=True)
        try:
            page = open_app(browser, server, TIMEOUT_MS)

            goto_page(page, "Data", TIMEOUT_MS)
            page.get_by_role("tab", name="Upload responses").click()
            page.locator('[data-testid="stFileUploaderDropzoneInput"]').first.set_input_files(str(csv))
            page.get_by_role("button", name="Use these columns").click()
            expect(page.get_by_text(f"Loaded {len(sim.responses):,} responses from the upload.")).to_be_visible()

            goto_page(page, "Audit summary", TIMEOUT_MS)
            page.get_by_role("button", name="Run audit").click()
            expect(page.get_by_role("heading", name="Whose reliability changed over time?")).to_be_visible()
            # the drift finding names the annotator whose accuracy fell
            finding = page.get_by_text(re.compile(rf"^{re.escape(sim.drifting)}.*accuracy fell from")).first
            expect(finding).to_be_visible()
            expect(page.get_by_role("heading", name="Reliability over time, per annotator")).to_be_visible()
            # the re-labelling plan in words, with the link to the Plan page
            expect(
                page.get_by_text(re.compile(r"more labels on [\d,]+ items the expected accuracy rises"))
            ).to_be_visible()
            expect(page.get_by_role("link", name=re.compile("Plan which labels to buy"))).to_be_visible()
            no_exception(page)
            page.set_viewport_size({"width": 1400, "height": 6000})
            page.screenshot(path=str(ARTIFACTS / "e2e-plan-drift-01-audit.png"), full_page=True)
            page.set_viewport_size({"width": 1400, "height": 1000})

            with page.expect_download() as dl:
                page.get_by_role("button", name="Download report (HTML)").click()
            report = tmp_path / "audit-report.html"
            dl.value.save_as(str(report))
        except Exception:
            page.screenshot(path=str(ARTIFACTS / "e2e-plan-drift-failed.png"), full_page=True)
            raise
        finally:
            browser.close()

        html = report.read_text(encoding="utf-8")
        assert "Which labels to buy next" in html and 'id="chart-plan"' in html
        assert "Reliability over time" in html and sim.drifting in html
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=BROWSER_ARGS, headless=True)
        try:
            page = browser.new_context(offline=True).new_page()
            page.goto(report.as_uri(), wait_until="load")
            expect(page.get_by_role("heading", name="Reliability over time")).to_be_visible()
            expect(page.get_by_role("heading", name=re.compile("Which labels to buy next"))).to_be_visible()
            expect(page.locator("#chart-plan .main-svg").first).to_be_attached()
            page.screenshot(path=str(ARTIFACTS / "e2e-plan-drift-02-report.png"), full_page=True)
        finally:
            browser.close()
