"""Benchmark: the one-click audit (``run_audit``) and its HTML report on simulated binary crowds of 100k, 300k and
1M responses (zipf-active annotators, a few spammers and adversaries), and the verdict oracle on the app's demo.

Prints per size: seconds per audit stage (fit, agreement, cartel check, verdicts), the time to build the page's
figures and tables, the report's build time and size, the verdict counts and peak RSS; then the demo oracle over
``--seeds`` seeds (share of spammers, adversaries and cartel members flagged with their verdict, share of honest
annotators flagged).  Figures depend on machine load: ``uptime`` is printed first.
Run: python benchmarks/bench_audit.py [--sizes 100000 300000 1000000] [--seeds 30]
"""

from __future__ import annotations

import os
import time

import numpy as np
import pandas as pd
from _common import make_parser, peak_rss_mb

from fusion_core.data.dataset import make_dataset
from fusion_core.data.responses import Responses
from fusion_core.diagnostics.audit import ACCEPTABLE, ADVERSARIAL, DEPENDENT, SPAMMER, findings, run_audit
from fusion_core.plots.audit import audit_figures
from fusion_core.report import report_html
from fusion_core.simulate import dawid_skene
from fusion_core.simulate.demo import crowd_demo


def size_run(n: int) -> None:
    sim = dawid_skene(
        n_items=n // 5,
        n_workers=max(200, n // 400),
        n_classes=2,
        responses_per_item=5,
        spammers=10,
        adversarial=5,
        worker_activity="zipf",
        seed=1,
    )
    resp = Responses.from_frame(sim.responses)
    t0 = time.perf_counter()
    audit = run_audit(resp)
    total = time.perf_counter() - t0
    stages = ", ".join(f"{t.stage} {t.seconds:.1f} s" for t in audit.timings)
    t0 = time.perf_counter()
    audit_figures(audit)
    findings(audit)
    audit.annotators.frame()
    audit.review.frame()
    audit.review.changes()
    page = time.perf_counter() - t0
    t0 = time.perf_counter()
    html = report_html(audit)
    rep = time.perf_counter() - t0
    counts = {k: int(v) for k, v in audit.annotators.counts().items() if v}
    print(
        f"{resp.n_responses:>9,} responses, {resp.n_workers} annotators: audit {total:.1f} s ({stages}); "
        f"figures+tables {page:.2f} s; report {rep:.2f} s, {len(html.encode()) / 1e6:.1f} MB; cartel check "
        f"{audit.cartel.status}; verdicts {counts}; peak RSS {peak_rss_mb():.0f} MB"
    )


def oracle(seeds: int) -> None:
    hits: dict[str, list[bool]] = {"spammer": [], "adversary": [], "cartel": []}
    honest: list[bool] = []
    for seed in range(seeds):
        demo = crowd_demo(seed)
        ds = make_dataset(Responses.from_frame(demo.responses), name="demo", source="demo", roles=demo.roles)
        audit = run_audit(ds, random_state=seed)
        roles = demo.roles
        v = pd.Series(audit.annotators.verdict, index=audit.annotators.workers).reindex(roles.index)
        hits["spammer"] += list(v[roles == "spammer"] == SPAMMER)
        hits["adversary"] += list(v[roles == "adversary"] == ADVERSARIAL)
        hits["cartel"] += list(v[roles.str.startswith("cartel")] == DEPENDENT)
        honest += list(~v[roles == "honest"].isin(ACCEPTABLE))
    rates = ", ".join(f"{k} {sum(x)}/{len(x)} ({np.mean(x):.3f})" for k, x in hits.items())
    print(f"demo oracle over {seeds} seeds: flagged {rates}; honest flagged {sum(honest)}/{len(honest)}")


def main() -> None:
    p = make_parser(__doc__)
    p.add_argument("--sizes", type=int, nargs="*", default=[100_000, 300_000, 1_000_000])
    p.add_argument("--seeds", type=int, default=30)
    args = p.parse_args()
    print("load:", os.popen("uptime").read().strip())
    for n in args.sizes:
        size_run(n)
    if args.seeds:
        oracle(args.seeds)


if __name__ == "__main__":
    main()
