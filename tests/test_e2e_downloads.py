"""Real-browser check of the Audit page's downloads (issue 26, item 5): after "Verdict table (CSV)", the next
download ("Items to look at again (CSV)") must arrive too — it used to hang with a spinner in half the sessions.
``python tests/test_e2e_downloads.py N [--rapid] [--big]`` runs N sessions against one server and prints how many
got both files (``--rapid``: the second button clicked before the first file arrives; ``--big``: a larger crowd)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from browser import BROWSER_ARGS, CHROMIUM, goto_page, no_exception, streamlit_server

from fusion_core.data.export import read_csv_export
from fusion_core.simulate.demo import crowd_demo

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.slow,
]  # the 20-session loop runs it as a script; every browser test runs under -m slow (the AppTest suite covers the pages)

TIMEOUT_MS = 60_000
DOWNLOAD_MS = 30_000
AUDIT_MS = 180_000  # the audit on a loaded 2-core machine


def audit_then_two_downloads(browser, url: str, csv: Path, n_rows: int, rapid: bool = False) -> tuple[int, int]:
    """One browser session: upload, run the audit, then the two downloads in a row; (verdict rows, item rows).
    ``rapid``: the second button is clicked right after the first, before its file arrives."""
    from playwright.sync_api import expect

    context = browser.new_context(viewport={"width": 1400, "height": 1000}, accept_downloads=True)
    step = "open the app"
    page = context.new_page()
    try:
        page.set_default_timeout(TIMEOUT_MS)
        page.goto(url, wait_until="domcontentloaded")
        page.get_by_role("heading", name="Annotator reliability audit").wait_for()
        step = "upload"
        goto_page(page, "Data", TIMEOUT_MS)
        page.get_by_role("tab", name="Upload responses").click()
        page.locator('[data-testid="stFileUploaderDropzoneInput"]').first.set_input_files(str(csv))
        page.get_by_role("button", name="Use these columns").click()
        expect(page.get_by_text(f"Loaded {n_rows:,} responses from the upload.")).to_be_visible()
        step = "audit"
        goto_page(page, "Audit summary", TIMEOUT_MS)
        page.get_by_role("button", name="Run audit").click()
        expect(page.get_by_role("heading", name="Every annotator, worst first")).to_be_visible(timeout=AUDIT_MS)
        if rapid:
            step = "two downloads clicked at once"
            got: list = []
            page.on("download", lambda d: got.append(d))
            page.get_by_role("button", name="Verdict table (CSV)").click()
            page.get_by_role("button", name="Items to look at again (CSV)").click()
            page.wait_for_timeout(DOWNLOAD_MS // 3)
            names = sorted(d.suggested_filename for d in got)
            assert names == ["audit-annotators.csv", "audit-items-to-review.csv"], names
            return len(read_csv_export(Path(got[0].path()))), len(read_csv_export(Path(got[1].path())))
        step = "first download (verdict table)"
        with page.expect_download(timeout=DOWNLOAD_MS) as first:
            page.get_by_role("button", name="Verdict table (CSV)").click()
        verdicts = read_csv_export(Path(first.value.path()))
        step = "second download (items to look at again)"
        with page.expect_download(timeout=DOWNLOAD_MS) as second:
            page.get_by_role("button", name="Items to look at again (CSV)").click()
        items = read_csv_export(Path(second.value.path()))
        no_exception(page)
        return len(verdicts), len(items)
    except Exception as exc:
        shown = page.locator('[data-testid="stDownloadButtonError"]').all_inner_texts()
        exc.add_note(f"failed at: {step}; download button errors shown: {shown}")
        raise
    finally:
        context.close()


def _crowd_csv(folder: Path, big: bool = False) -> tuple[Path, int]:
    """The demo crowd; ``big``: 5,000 items and 60 annotators (a longer page run, as on the reported crowd)."""
    if big:
        from fusion_core.simulate import dawid_skene

        responses = dawid_skene(n_items=5000, n_workers=60, n_classes=3, spammers=4, seed=0).responses
    else:
        responses = crowd_demo(0).responses
    csv = folder / "crowd.csv"
    responses.to_csv(csv, index=False)
    return csv, len(responses)


@pytest.fixture
def server():
    with streamlit_server("e2e-downloads-streamlit.log") as url:
        yield url


def test_two_audit_downloads_in_a_row_both_arrive(server, tmp_path):
    from playwright.sync_api import sync_playwright

    csv, n_rows = _crowd_csv(tmp_path)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=BROWSER_ARGS, headless=True)
        try:
            n_verdicts, n_items = audit_then_two_downloads(browser, server, csv, n_rows)
        finally:
            browser.close()
    assert n_verdicts == 24  # one row per annotator of the demo crowd
    assert n_items > 0


def main(n: int, rapid: bool = False, big: bool = False) -> int:
    """N sessions against one server; prints each outcome and the count with both files."""
    import tempfile

    from playwright.sync_api import Error as PlaywrightError
    from playwright.sync_api import sync_playwright

    ok = 0
    with tempfile.TemporaryDirectory() as tmp, streamlit_server("e2e-downloads-loop.log") as url:
        csv, n_rows = _crowd_csv(Path(tmp), big)
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=BROWSER_ARGS, headless=True)
            try:
                for i in range(n):
                    try:
                        got = audit_then_two_downloads(browser, url, csv, n_rows, rapid)
                        ok += 1
                        print(f"session {i + 1}: both downloads arrived {got}", flush=True)
                    except (PlaywrightError, AssertionError) as exc:
                        said = " | ".join([*str(exc).splitlines()[:2], *getattr(exc, "__notes__", [])])
                        print(f"session {i + 1}: FAILED {type(exc).__name__}: {said}", flush=True)
            finally:
                browser.close()
    print(f"both downloads arrived in {ok} of {n} sessions")
    return 0 if ok == n else 1


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 20, rapid="--rapid" in sys.argv, big="--big" in sys.argv))
