"""App benchmark: upload → results rendered, page switches, and server memory with concurrent sessions.

What is measured (printed below; run on a shared machine — the load average is printed with the figures):

1. **Upload → results rendered** at ``--responses`` (default 100k) and ``--big`` (default 1M) responses: the
   real page scripts run headless by ``streamlit.testing.v1.AppTest`` (no browser, no websocket): upload the CSV
   bytes on the Data page, press "Use these columns", open the Fit page, fit the preselected recommended method
   (``--method``, default ``auto``), render the Annotators and Items pages.  Each step is one script run.
   Browser-side drawing is not included (the e2e test covers the browser).
2. **Page switches at ``--switch`` responses** (default 300k) after the fit: every page visited twice; the first
   visit builds its tables and figures (cached per session), the second reuses them.  Target ≤ 2 s per page.
3. **Memory with ``--sessions`` concurrent sessions** (default 10) on ``--session-responses`` (default 100k,
   two labels, method ``--session-method`` default ``sml-ds``): each session in its own thread uploads, maps,
   fits and visits every result page, as the server runs sessions in threads of one process.  Printed: the
   process RSS at baseline (imports and one finished warm-up session), its peak during the sessions (sampled
   every 50 ms; target ≤ 1 GB) and after the sessions end (their state dropped, ``gc.collect()``), before and
   after ``malloc_trim`` (target: within 100 MB of the baseline).

Run: ``python benchmarks/bench_app.py [--only upload,switch,memory] [--responses 100000] [--big 1000000]``.
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import os
import sys
import threading
import time
from pathlib import Path

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


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


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
    print(f"\n2. page switches after the fit: {n:,} responses, load {load()}")
    print(f"   {'page':<26}{'1st visit':>10}{'2nd visit':>10}   target ≤ 2 s")
    for page, (a, b) in rows.items():
        print(f"   {page:<26}{a:>9.2f}s{b:>9.2f}s   {'PASS' if max(a, b) <= 2 else 'FAIL'}")
    print(f"   fits before: {fits}, after: {at.session_state['fc_fit_count']} (page switches never refit)")


def _session(data: bytes, method: str, errors: list) -> None:
    try:
        at = _app()
        upload_and_fit(at, data, method)
        for page in RESULT_PAGES:
            at.switch_page(page).run()
            _check(at)
        del at
    except Exception as exc:  # reported below; one failing session must not hide the figures of the others
        errors.append(repr(exc))


def bench_memory(n_sessions: int, n: int, method: str) -> None:
    data = payload(n, n_classes=2, seed=1)
    errors: list[str] = []
    _session(payload(2_000, n_classes=2), method, errors)  # warm-up: imports, first-run caches
    gc.collect()
    base = rss_mb()
    peak = [base]
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            peak[0] = max(peak[0], rss_mb())
            time.sleep(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    t0 = time.perf_counter()
    threads = [threading.Thread(target=_session, args=(data, method, errors)) for _ in range(n_sessions)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    stop.set()
    sampler.join()
    gc.collect()
    time.sleep(1.0)
    after = rss_mb()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
        trimmed = rss_mb()
    except OSError:
        trimmed = float("nan")
    print(
        f"\n3. memory: {n_sessions} concurrent sessions × {n:,} responses ({method}), {wall:.1f} s wall, load {load()}"
    )
    print(f"   baseline RSS {base:8.0f} MB")
    print(f"   peak RSS     {peak[0]:8.0f} MB   target ≤ 1024 MB: {'PASS' if peak[0] <= 1024 else 'FAIL'}")
    print(
        f"   after end    {after:8.0f} MB   (+{after - base:.0f} MB; after malloc_trim {trimmed:.0f} MB, "
        f"+{trimmed - base:.0f} MB)   target ≤ +100 MB: {'PASS' if min(after, trimmed) - base <= 100 else 'FAIL'}"
    )
    if errors:
        print(f"   {len(errors)} session(s) failed: {errors[:3]}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default="upload,switch,memory")
    ap.add_argument("--responses", type=int, default=100_000)
    ap.add_argument("--big", type=int, default=1_000_000)
    ap.add_argument("--switch", type=int, default=300_000)
    ap.add_argument("--method", default=None, help="method to fit (default: the Fit page's preselected one)")
    ap.add_argument("--sessions", type=int, default=10)
    ap.add_argument("--session-responses", type=int, default=100_000)
    ap.add_argument("--session-method", default="sml-ds")
    args = ap.parse_args()
    only = set(args.only.split(","))
    print(f"load average at start: {load()} (2 shared cores: figures are under load)")
    if "upload" in only:
        for n in (args.responses, args.big):
            if n:
                bench_upload(n, args.method)
    if "switch" in only and args.switch:
        bench_switch(args.switch, args.method)
    if "memory" in only and args.sessions:
        bench_memory(args.sessions, args.session_responses, args.session_method)


if __name__ == "__main__":
    main()
