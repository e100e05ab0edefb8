"""App benchmark: upload → results rendered, page switches, and server memory with concurrent sessions.

What is measured (printed below; run on a shared machine — the load average is printed with the figures):

1. **Upload → results rendered** at ``--responses`` (default 100k) and ``--big`` (default 1M) responses: the
   real page scripts run headless by ``streamlit.testing.v1.AppTest`` (no browser, no websocket): upload the CSV
   bytes on the Data page, press "Use these columns", open the Fit page, fit the preselected recommended method
   (``--method``, default ``auto``), render the Annotators and Items pages.  Each step is one script run.
   Browser-side drawing is not included (the e2e test covers the browser).
2. **Page switches at ``--switch`` responses** (default 300k; a comma-separated list, e.g. ``300000,1000000``)
   after the fit: every page visited twice; the first visit builds its tables and figures (cached per session),
   the second reuses them.  Target ≤ 2 s per page at 300k, ≤ 3 s at 1M.
3. **Memory with ``--sessions`` concurrent sessions** (default 10) on ``--session-responses`` (default 100k,
   two labels, method ``--session-method`` default ``sml-ds``): a real ``streamlit run app.py`` server
   subprocess; Playwright drives Debian's Chromium with one page per session, all at once: upload the CSV, map,
   fit, visit Annotators, Items, Compare and Cartels, close.  Printed: the server's RSS at baseline (after one
   finished warm-up session), its peak during the sessions (sampled every 100 ms; target ≤ 1 GB) and after the
   sessions end (``server.disconnectedSessionTTL`` is set to 5 s so closed sessions are dropped quickly;
   target: within 100 MB of the baseline).  (AppTest cannot run sessions concurrently in threads: it shares one
   script-run context.)

1b. **Upload → audit summary rendered** at ``--responses`` and ``--big`` (two labels): upload, map, open the Audit
   summary page, press "Run audit"; the step ends when the summary page has rendered (AppTest, as in 1.).

Run: ``python benchmarks/bench_app.py [--only upload,audit,switch,memory] [--responses 100000] [--big 1000000]``.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

from _common import make_parser

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PAGES = [
    "pages/1_Data.py",
    "pages/2_Fit.py",
    "pages/3_Annotators.py",
    "pages/4_Cartels.py",
    "pages/5_Items.py",
    "pages/6_Compare.py",
    "app.py",
]
RESULT_PAGES = ["pages/3_Annotators.py", "pages/5_Items.py", "pages/6_Compare.py", "pages/4_Cartels.py"]


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def payload(n_responses: int, n_classes: int = 3, seed: int = 0) -> bytes:
    from fusion_core.simulate import dawid_skene

    per_item = 5
    sim = dawid_skene(
        n_items=n_responses // per_item,
        n_workers=100,
        n_classes=n_classes,
        responses_per_item=per_item,
        spammers=10,
        worker_activity="zipf",
        seed=seed,
    )
    return sim.responses.to_csv(index=False).encode()


def _app():
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=1800)
    at.run()  # session start (loads the built-in demo): not part of the measurement
    from fusion_app.warmup import wait_warm_up

    warm = wait_warm_up()  # the server's start-up warm-up of the compiled kernels, done before users arrive
    if warm is not None:
        print(f"   (server start: compiled kernels warmed in {warm:.2f} s, not part of the measurement)")
    return at


def _check(at) -> None:
    if at.exception:
        raise RuntimeError([e.value for e in at.exception])


def upload_and_fit(at, data: bytes, method: str | None, steps: list | None = None) -> None:
    """Upload, map, fit (``method`` or the page's preselected one), timing each step into ``steps``."""

    def step(label, fn):
        t0 = time.perf_counter()
        fn()
        _check(at)
        if steps is not None:
            steps.append((label, time.perf_counter() - t0))

    at.switch_page("pages/1_Data.py").run()
    step(
        "upload CSV bytes (read + preview)",
        lambda: at.file_uploader(key="upload_responses").set_value(("export.csv", data, "text/csv")).run(),
    )
    step("map columns (code, validate, agreement, summary)", lambda: at.button(key="use_columns").click().run())
    loaded = at.session_state["fc_dataset"].responses.n_responses
    if at.error or loaded < 1000:
        raise RuntimeError(f"upload not loaded ({loaded} responses): {[e.value for e in at.error]}")
    step("open Fit page", lambda: at.switch_page("pages/2_Fit.py").run())
    if method is not None and at.multiselect(key="fit_methods").value != [method]:
        step(f"choose {method}", lambda: at.multiselect(key="fit_methods").set_value([method]).run())
    step("fit (page run incl. the fit)", lambda: at.button(key="fit_button").click().run())


def bench_upload(n: int, method: str | None) -> None:
    data = payload(n)
    at = _app()
    steps: list[tuple[str, float]] = []
    upload_and_fit(at, data, method, steps)
    for page in ("pages/3_Annotators.py", "pages/5_Items.py"):
        t0 = time.perf_counter()
        at.switch_page(page).run()
        _check(at)
        steps.append((f"render {page}", time.perf_counter() - t0))
    ss = at.session_state
    fitted = {k[1]: v.seconds for k, v in ss["fc_fits"].items()}
    total = sum(s for _, s in steps)
    print(f"\n1. upload → results rendered: {n:,} responses (CSV {len(data) / 1e6:.1f} MB), load {load()}")
    for label, s in steps:
        print(f"   {label:<52}{s:>8.2f} s")
    print(f"   {'TOTAL upload → Annotators + Items rendered':<52}{total:>8.2f} s   (of which the fit itself: {fitted})")


def bench_audit(n: int) -> None:
    """Upload → audit summary rendered: the Done-when figure of the audit issue (≤ 3 s at 100k, ≤ 8 s at 1M)."""
    data = payload(n, n_classes=2)
    at = _app()
    steps: list[tuple[str, float, float]] = []

    def step(label, fn):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        _check(at)
        steps.append((label, time.perf_counter() - t0, time.process_time() - c0))

    at.switch_page("pages/1_Data.py").run()
    step(
        "upload CSV bytes (read + preview)",
        lambda: at.file_uploader(key="upload_responses").set_value(("export.csv", data, "text/csv")).run(),
    )
    step("map columns (code, validate, agreement, summary)", lambda: at.button(key="use_columns").click().run())
    step("open Audit summary page", lambda: at.switch_page("pages/0_Audit.py").run())
    step(
        "Run audit (fit, agreement, cartels, verdicts, summary rendered)",
        lambda: at.button(key="audit_run").click().run(),
    )
    if at.session_state["fc_audit"] is None or not at.dataframe:
        raise RuntimeError("the audit summary did not render")
    total, cpu = sum(s[1] for s in steps), sum(s[2] for s in steps)
    target = 3.0 if n <= 100_000 else 8.0
    print(f"\n1b. upload → audit summary rendered: {n:,} responses (CSV {len(data) / 1e6:.1f} MB), load {load()}")
    print(f"   {'step':<66}{'wall':>8}  {'CPU':>8}  (CPU: all threads of this process; wall depends on load)")
    for label, s, c in steps:
        print(f"   {label:<66}{s:>8.2f} s{c:>8.2f} s")
    verdict = "PASS" if total <= target else "FAIL"
    print(
        f"   {'TOTAL upload → audit summary rendered':<66}{total:>8.2f} s{cpu:>8.2f} s   target ≤ {target:.0f} s: {verdict}"
    )


def bench_switch(n: int, method: str | None) -> None:
    data = payload(n)
    at = _app()
    upload_and_fit(at, data, method)
    fits = at.session_state["fc_fit_count"]
    rows: dict[str, list[float]] = {}
    for _ in range(2):
        for page in PAGES:
            t0 = time.perf_counter()
            at.switch_page(page).run()
            _check(at)
            rows.setdefault(page, []).append(time.perf_counter() - t0)
    loaded = at.session_state["fc_dataset"].responses.n_responses
    print(f"\n2. page switches after the fit: {n:,} responses ({loaded:,} loaded), load {load()}")
    target = 2.0 if n <= 300_000 else 3.0
    print(f"   {'page':<26}{'1st visit':>10}{'2nd visit':>10}   target ≤ {target:.0f} s")
    for page, (a, b) in rows.items():
        print(f"   {page:<26}{a:>9.2f}s{b:>9.2f}s   {'PASS' if max(a, b) <= target else 'FAIL'}")
    print(f"   fits before: {fits}, after: {at.session_state['fc_fit_count']} (page switches never refit)")


def _server(port: int, log_path: Path):
    import subprocess

    cmd = [sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true"]
    cmd += ["--server.address", "127.0.0.1", "--server.port", str(port), "--server.fileWatcherType", "none"]
    # sessions whose browser left are kept this long for a reconnect (default 120 s); shortened to measure sooner
    cmd += ["--server.disconnectedSessionTTL", "5", "--logger.level", "info"]
    env = dict(os.environ, STREAMLIT_BROWSER_GATHER_USAGE_STATS="false", PYTHONPATH=str(ROOT))
    log = open(log_path, "w")  # noqa: SIM115 (closed with the server)
    return subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)


def _server_rss_mb(pid: int) -> float:
    import psutil

    proc = psutil.Process(pid)
    return sum(p.memory_info().rss for p in [proc, *proc.children(recursive=True)]) / 2**20


async def _browser_session(browser, url: str, csv_path: Path, n: int, method: str, timeout: float) -> float:
    import re

    from playwright.async_api import expect

    page = await browser.new_page(viewport={"width": 1400, "height": 1000})
    page.set_default_timeout(timeout * 1000)
    t0 = time.perf_counter()

    async def goto(name: str) -> None:
        link = page.locator('[data-testid="stSidebar"] a', has_text=re.compile(rf"\d · {name}\s*$")).first
        await link.click()
        await page.get_by_role("heading", name=re.compile(name)).first.wait_for()

    try:
        await page.goto(url, wait_until="domcontentloaded")
        await page.get_by_role("heading", name="Annotator reliability audit").wait_for()
        await goto("Data")
        await page.get_by_role("tab", name="Upload responses").click()
        uploaded = page.locator('[data-testid="stFileChipName"]', has_text=csv_path.name)
        for _ in range(5):  # a file set while the page reruns can be lost (seen under load): set it again
            await page.locator('[data-testid="stFileUploaderDropzoneInput"]').first.set_input_files(str(csv_path))
            try:
                await uploaded.first.wait_for(timeout=30_000)
                break
            except Exception:
                continue
        await page.get_by_role("button", name="Use these columns").click()
        await page.get_by_text(f"Loaded {n:,} responses").wait_for()
        await goto("Fit")
        await page.get_by_text("Choose methods (for experts)").click()
        fit = page.get_by_role("button", name=re.compile("^Fit "))
        box = page.locator('[data-testid="stMultiSelect"] input').first
        for _ in range(10):  # drop the preselected recommended method (retried: clicks can land mid-rerun)
            await box.click()
            await page.keyboard.press("Backspace")
            await page.keyboard.press("Escape")  # (an open option list hides the rest of the page)
            try:
                await expect(fit).to_be_disabled(timeout=15_000)
                break
            except AssertionError:
                continue
        for _ in range(10):
            await box.click()
            await page.keyboard.type(f"{method} — ")  # filter the (virtualised) option list
            await page.get_by_role("option", name=re.compile(rf"^{re.escape(method)} — ")).click()
            await page.keyboard.press("Escape")
            try:
                await expect(fit).to_be_enabled(timeout=15_000)
                break
            except AssertionError:
                continue
        await page.get_by_role("button", name=re.compile("^Fit ")).click()
        await page.locator('[data-testid="stAlertContentSuccess"]', has_text="Fitted:").wait_for()
        for name in ("Annotators", "Items", "Compare", "Cartels"):
            await goto(name)
        return time.perf_counter() - t0
    except Exception:
        await page.screenshot(path=str(Path(os.environ.get("BENCH_SHOTS", "/tmp")) / "bench-app-failed.png"))
        raise
    finally:
        await page.close()


def bench_memory(n_sessions: int, n: int, method: str, timeout: float = 600) -> None:
    """Peak RSS of a real ``streamlit run`` server while ``n_sessions`` Chromium pages (Playwright) each upload,
    fit and visit every result page at the same time, and its RSS after they close."""
    import asyncio
    import socket
    import tempfile
    import urllib.request

    from playwright.async_api import async_playwright

    tmp = Path(tempfile.mkdtemp())
    csv_path, small = tmp / "crowd.csv", tmp / "warm.csv"
    csv_path.write_bytes(payload(n, n_classes=2, seed=1))
    small.write_bytes(payload(2_000, n_classes=2, seed=2))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = _server(port, tmp / "server.log")
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2):
                    break
            except OSError:
                time.sleep(0.3)
        peak = [0.0]
        stop = threading.Event()

        def sample() -> None:
            while not stop.is_set():
                peak[0] = max(peak[0], _server_rss_mb(proc.pid))
                time.sleep(0.1)

        async def run() -> tuple[float, list]:
            async with async_playwright() as pw:
                browser = await pw.chromium.launch(
                    executable_path="/usr/bin/chromium",
                    args=["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
                )
                await _browser_session(browser, url, small, 2_000, method, timeout)  # warm-up: imports
                await asyncio.sleep(8)  # its session expires (TTL 5 s)
                base = _server_rss_mb(proc.pid)
                peak[0] = base
                sampler = threading.Thread(target=sample, daemon=True)
                sampler.start()
                out = await asyncio.gather(
                    *[_browser_session(browser, url, csv_path, n, method, timeout) for _ in range(n_sessions)],
                    return_exceptions=True,
                )
                await browser.close()
                return base, out

        t0 = time.perf_counter()
        base, out = asyncio.run(run())
        wall = time.perf_counter() - t0
        time.sleep(45)  # sessions expire (TTL 5 s), their state is dropped, the app's trimmer runs (every 30 s)
        stop.set()
        after = _server_rss_mb(proc.pid)
        time.sleep(60)
        later = _server_rss_mb(proc.pid)
        failed = [repr(o) for o in out if isinstance(o, BaseException)]
        done = [o for o in out if not isinstance(o, BaseException)]
        print(
            f"\n3. memory: real server, {n_sessions} concurrent Chromium sessions × {n:,} responses ({method}), "
            f"{wall:.0f} s wall, load {load()}"
        )
        if done:
            print(f"   per-session time (upload, fit, 4 pages): median {sorted(done)[len(done) // 2]:.0f} s")
        print(f"   baseline RSS {base:8.0f} MB (server after one finished warm-up session)")
        print(f"   peak RSS     {peak[0]:8.0f} MB   target ≤ 1024 MB: {'PASS' if peak[0] <= 1024 else 'FAIL'}")
        print(
            f"   after end    {after:8.0f} MB   (+{after - base:.0f} MB)   target ≤ +100 MB: "
            f"{'PASS' if after - base <= 100 else 'FAIL'}"
        )
        print(f"   one minute later {later:.0f} MB (+{later - base:.0f} MB); server log: {tmp / 'server.log'}")
        if failed:
            print(f"   {len(failed)} session(s) failed: {failed[:2]}")
    finally:
        import signal

        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=20)


def main() -> None:
    ap = make_parser(__doc__)
    ap.add_argument("--only", default="upload,audit,switch,memory")
    ap.add_argument("--responses", type=int, default=100_000)
    ap.add_argument("--big", type=int, default=1_000_000)
    ap.add_argument("--switch", default="300000", help="comma-separated sizes, e.g. 300000,1000000")
    ap.add_argument("--method", default=None, help="method to fit (default: the Fit page's preselected one)")
    ap.add_argument("--sessions", type=int, default=10)
    ap.add_argument("--session-responses", type=int, default=100_000)
    ap.add_argument("--session-method", default="sml-ds")
    ap.add_argument("--session-timeout", type=float, default=600, help="seconds per browser step")
    args = ap.parse_args()
    only = set(args.only.split(","))
    print(f"load average at start: {load()} (2 shared cores: figures are under load)")
    if "upload" in only:
        for n in (args.responses, args.big):
            if n:
                bench_upload(n, args.method)
    if "audit" in only:
        for n in (args.responses, args.big):
            if n:
                bench_audit(n)
    if "switch" in only:
        for n in (int(x) for x in args.switch.split(",") if x):
            bench_switch(n, args.method)
    if "memory" in only and args.sessions:
        bench_memory(args.sessions, args.session_responses, args.session_method, args.session_timeout)


if __name__ == "__main__":
    main()
