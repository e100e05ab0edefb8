"""Benchmark (b): Dawid–Skene on 10M responses (2M items, 1,000 workers, K = 4, 5 per item), 50 iterations.

Prints data generation time, fit seconds, seconds per iteration and peak RSS of the whole process
(simulated data included).  Run: python benchmarks/bench_ds_large.py
"""

from __future__ import annotations

import time

from _common import make_parser, peak_rss_mb

from fusion_core import Responses
from fusion_core.methods import DawidSkene
from fusion_core.metrics import accuracy
from fusion_core.simulate import dawid_skene


def main(items: int = 2_000_000, workers: int = 1000, iters: int = 50) -> None:
    t0 = time.perf_counter()
    sim = dawid_skene(n_items=items, n_workers=workers, n_classes=4, responses_per_item=5, seed=0)
    gen = time.perf_counter() - t0
    t0 = time.perf_counter()
    resp = Responses.from_frame(sim.responses)
    _ = resp.counts  # build the sparse matrix EM uses
    coding = time.perf_counter() - t0
    t0 = time.perf_counter()
    est = DawidSkene(max_iter=iters, tol=0.0).fit(resp)
    em = time.perf_counter() - t0
    print(f"responses: {len(sim.responses):,}; simulate {gen:.1f} s")
    print(
        f"validation + coding + sparse build: {coding:.2f} s; EM: {em:.2f} s for {est.n_iter_} iterations "
        f"({em / est.n_iter_:.3f} s/iter); total {coding + em:.2f} s; accuracy {accuracy(est.labels_, sim.truth):.4f}"
    )
    print(f"peak RSS: {peak_rss_mb() / 1024:.2f} GB")


if __name__ == "__main__":
    make_parser(__doc__).parse_args()
    main()
