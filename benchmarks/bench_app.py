"""App benchmark: 100k responses from upload (CSV bytes) to rendered Dawid–Skene results; no refit on page switches.

What is measured (printed below):
1. AppTest path — the real page scripts run headless by ``streamlit.testing.v1.AppTest`` (no browser, no
   websocket): upload the CSV bytes on the Data page (read + preview), press "Use these columns" (coding,
   validation, agreement statistics, summary figures), fit DS on the Fit page, render the Annotators page
   (skill ranking + confusion small multiples + table) and the Items page (posterior table of every item +
   histogram).  Each step is one script run; the sum is "upload → rendered DS results".
   Browser-side drawing is not included (the e2e test covers the browser).
2. Library path — the same calls the pages make, without Streamlit: read_table → Responses.from_frame →
   DS fit → figures + item table.
3. Page switches after the fit: every page visited twice; the session's fit counter must not move.

Run: ``python benchmarks/bench_app.py [--responses 100000]``.
"""

from __future__ import annotations

import argparse
import io
import sys
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


def _timed(label: str, fn, rows: list) -> object:
    t0 = time.perf_counter()
    out = fn()
    rows.append((label, time.perf_counter() - t0))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--responses", type=int, default=100_000)
    args = ap.parse_args()

    from streamlit.testing.v1 import AppTest

    from fusion_core.simulate import dawid_skene

    per_item, n_workers = 5, 100
    sim = dawid_skene(
        n_items=args.responses // per_item,
        n_workers=n_workers,
        n_classes=3,
        responses_per_item=per_item,
        spammers=10,
        worker_activity="zipf",
        seed=0,
    )
    payload = sim.responses.to_csv(index=False).encode()
    print(
        f"data: {len(sim.responses):,} responses, {args.responses // per_item:,} items, {n_workers} annotators, "
        f"3 labels; CSV {len(payload) / 1e6:.2f} MB"
    )

    # ---------------------------------------------------------------- 1. AppTest path
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300)
    at.run()  # session start (loads the built-in demo) — not part of the measurement
    at.switch_page("pages/1_Data.py").run()
    steps: list[tuple[str, float]] = []
    _timed(
        "upload CSV bytes (read + preview)",
        lambda: at.file_uploader(key="upload_responses").set_value(("export.csv", payload, "text/csv")).run(),
        steps,
    )
    _timed(
        "map columns (code + validate + agreement + summary)", lambda: at.button(key="use_columns").click().run(), steps
    )
    assert at.session_state["fc_dataset"].responses.n_responses == len(sim.responses), [e.value for e in at.error]
    _timed("open Fit page", lambda: at.switch_page("pages/2_Fit.py").run(), steps)
    _timed("choose ds", lambda: at.multiselect(key="fit_methods").set_value(["ds"]).run(), steps)
    _timed("fit DS (page run incl. fit)", lambda: at.button(key="fit_button").click().run(), steps)
    _timed("render Annotators page", lambda: at.switch_page("pages/3_Annotators.py").run(), steps)
    _timed("render Items page", lambda: at.switch_page("pages/5_Items.py").run(), steps)
    assert not at.exception, [e.value for e in at.exception]
    fit_seconds = at.session_state["fc_fits"][at.session_state["fc_active"]["ds"]].seconds
    total = sum(s for _, s in steps)
    print("\n1. AppTest path (page scripts run headless)")
    print(f"{'step':<55}{'seconds':>9}")
    for label, s in steps:
        print(f"{label:<55}{s:>9.3f}")
    print(f"{'TOTAL upload → rendered DS results':<55}{total:>9.3f}   target < 3 s: {'PASS' if total < 3 else 'FAIL'}")
    print(f"(of which DS EM itself: {fit_seconds:.3f} s)")

    # ---------------------------------------------------------------- 3. page switches
    count = at.session_state["fc_fit_count"]
    switch_rows = []
    for _ in range(2):
        for page in PAGES:
            t0 = time.perf_counter()
            at.switch_page(page).run()
            switch_rows.append((page, time.perf_counter() - t0))
    assert not at.exception
    after = at.session_state["fc_fit_count"]
    print("\n3. page switches after the fit (each page twice)")
    print(
        f"fits before: {count}, after {len(switch_rows)} page switches: {after} -> {'no refit' if after == count else 'REFIT!'}"
    )
    print(
        f"slowest switch: {max(s for _, s in switch_rows):.3f} s ({max(switch_rows, key=lambda r: r[1])[0]}); "
        f"median {sorted(s for _, s in switch_rows)[len(switch_rows) // 2]:.3f} s"
    )

    # ---------------------------------------------------------------- 2. library path
    from fusion_core.data.loading import read_table
    from fusion_core.data.responses import Responses
    from fusion_core.diagnostics.tables import annotator_table, item_table
    from fusion_core.methods import create
    from fusion_core.plots import confusion_small_multiples, posterior_histogram, skill_ranking

    lib: list[tuple[str, float]] = []
    table = _timed("read_table (CSV bytes)", lambda: read_table(io.BytesIO(payload), name="export.csv"), lib)
    resp = _timed("Responses.from_frame", lambda: Responses.from_frame(table), lib)
    est = _timed("DawidSkene().fit", lambda: create("ds").fit(resp), lib)
    _timed(
        "figures (skills, 8 confusions, histogram)",
        lambda: (skill_ranking(est), confusion_small_multiples(est, max_panels=8), posterior_histogram(est)),
        lib,
    )
    _timed(
        "item + annotator tables",
        lambda: (item_table(est.result_, resp), annotator_table(est.result_, resp)),
        lib,
    )
    print("\n2. library path (the calls the pages make, no Streamlit)")
    for label, s in lib:
        print(f"{label:<55}{s:>9.3f}")
    print(f"{'TOTAL':<55}{sum(s for _, s in lib):>9.3f}")


if __name__ == "__main__":
    main()
