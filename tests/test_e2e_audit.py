"""Real-browser end-to-end test of the one-click audit: Streamlit server + Playwright driving Debian's Chromium.

Uploads the demo crowd as a CSV, runs the audit, checks the verdict table (through its CSV download), downloads
the HTML report and opens it offline (file://, every network request blocked) to check that every chart
rendered.  Screenshots go to ``test-artifacts/``.  Skips with a reason when /usr/bin/chromium or Playwright is
absent.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from browser import ARTIFACTS, BROWSER_ARGS, CHROMIUM, goto_page, no_exception, open_app, streamlit_server

from fusion_core.data.export import read_csv_export
from fusion_core.diagnostics.audit import DEPENDENT
from fusion_core.simulate.demo import crowd_demo

pytestmark = [pytest.mark.e2e, pytest.mark.slow]  # a Streamlit server and Chromium: ~20 s of the default suite's budget

TIMEOUT_MS = 60_000


@pytest.fixture
def server():
    with streamlit_server("e2e-audit-streamlit.log") as url:
        yield url


def _sidebar(page, name: str) -> None:
    goto_page(page, name, TIMEOUT_MS)


def test_upload_audit_verdicts_and_offline_report(server, tmp_path):
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=TIMEOUT_MS)  # the audit takes seconds on a loaded machine
    demo = crowd_demo(0)
    csv = tmp_path / "crowd.csv"
    demo.responses.to_csv(csv, index=False)
    roles = demo.roles

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=BROWSER_ARGS, headless=True)
        try:
            page = open_app(browser, server, TIMEOUT_MS)

            _sidebar(page, "Data")
            page.get_by_role("tab", name="Upload responses").click()
            page.locator('[data-testid="stFileUploaderDropzoneInput"]').first.set_input_files(str(csv))
            page.get_by_role("button", name="Use these columns").click()
            expect(page.get_by_text(f"Loaded {len(demo.responses):,} responses from the upload.")).to_be_visible()

            _sidebar(page, "Audit summary")
            expect(page.get_by_text("Press Run audit to audit the current data.")).to_be_visible()
            page.screenshot(path=str(ARTIFACTS / "e2e-audit-01-before.png"), full_page=True)
            page.get_by_role("button", name="Run audit").click()
            expect(page.get_by_role("heading", name="Whom can I trust?")).to_be_visible()
            expect(page.get_by_role("heading", name="Every annotator, worst first")).to_be_visible()
            expect(page.locator('[data-testid="stPlotlyChart"]')).to_have_count(7)
            expect(page.locator('[data-testid="stDataFrame"]').first).to_be_visible()
            expect(page.get_by_text("24 of 24 annotators")).to_be_visible()
            no_exception(page)
            page.set_viewport_size({"width": 1400, "height": 5200})  # Streamlit scrolls inside its own container
            page.screenshot(path=str(ARTIFACTS / "e2e-audit-02-after.png"), full_page=True)
            page.set_viewport_size({"width": 1400, "height": 1000})

            # the verdict table, read through its formula-safe CSV download
            with page.expect_download() as dl:
                page.get_by_role("button", name="Verdict table (CSV)").click()
            table = read_csv_export(Path(dl.value.path())).set_index("annotator")
            assert len(table) == 24 and table["verdict"].iloc[0] != "reliable"
            by_role = table["verdict"].groupby(roles.reindex(table.index).to_numpy()).agg(lambda v: set(v))
            assert by_role["spammer"] == {"near chance (spammer)"}
            assert by_role["adversary"] == {"worse than chance (adversarial)"}
            assert by_role["cartel 1"] == {DEPENDENT}
            assert by_role["honest"] <= {"reliable", "noisy"}

            # search narrows the table to one annotator
            page.get_by_label("Search annotators").fill("w12")
            page.get_by_label("Search annotators").press("Enter")
            expect(page.get_by_text("1 of 24 annotators")).to_be_visible()

            with page.expect_download() as dl:
                page.get_by_role("button", name="Download report (HTML)").click()
            report = tmp_path / "audit-report.html"
            dl.value.save_as(str(report))
        finally:
            browser.close()

        # the report, opened from disk with the network blocked
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=BROWSER_ARGS, headless=True)
        try:
            context = browser.new_context(offline=True, viewport={"width": 1200, "height": 900})
            fetched: list[str] = []
            context.route(
                re.compile(r"^(https?|wss?)://"), lambda route: (fetched.append(route.request.url), route.abort())
            )
            page = context.new_page()
            page.set_default_timeout(TIMEOUT_MS)
            page.goto(report.as_uri(), wait_until="load")
            charts = page.locator('div[id^="chart-"]')
            n = charts.count()
            assert n == 8  # the seven audit charts and the re-labelling plan's
            for i in range(n):
                expect(charts.nth(i).locator(".main-svg").first).to_be_attached()
            assert page.locator(".plotly").count() >= n
            expect(page.get_by_role("heading", name="Whom can I trust?")).to_be_visible()
            expect(page.locator("table", has_text=DEPENDENT).first).to_be_visible()
            assert fetched == []  # nothing was requested from the network
            page.screenshot(path=str(ARTIFACTS / "e2e-audit-03-report-offline.png"), full_page=True)
        finally:
            browser.close()
    size = report.stat().st_size
    print(f"report size {size / 1e6:.2f} MB")
    assert report.read_text(encoding="utf-8").count("<table") >= 4  # candidates, annotators, items, changes
