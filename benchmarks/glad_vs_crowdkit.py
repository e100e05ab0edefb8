"""GLAD parity with crowd-kit's ``GLAD`` (issue 21 item 6): accuracy on gold and time per dataset, both with their
defaults, plus the number of EM iterations each ran.

Our ``glad`` optimises crowd-kit's target (α ~ N(1, 1), log β ~ N(1, 1), equal fixed class priors, start at
α = 1, log β = 1) to convergence.  crowd-kit stops at the first iteration where its per-cell expected
complete-data log-likelihood does not rise by ``tol``; ``--converged N`` also runs crowd-kit with that rule
switched off (``tol=-inf``, ``n_iter=N``) to show where its own EM goes (youtube_lf: 0.870 after its two default
iterations, 0.548 once run on, the same labelling as ours).

Run: python benchmarks/glad_vs_crowdkit.py [--datasets rte,youtube_lf] [--converged 60] [--skip-crowdkit]
crowd-kit is an optional extra (``pip install -e .[bench]``); without it only our figures are printed.
"""

from __future__ import annotations

import time
import warnings

import numpy as np
from _common import categorical_datasets, load, make_parser


def accuracy(labels, truth) -> float:
    return float((labels.reindex(truth.index).astype(str) == truth.astype(str)).mean())


def ours(answers, truth) -> tuple[float, float, str]:
    from fusion_core.methods import create

    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        g = create("glad").fit(answers)
    sec = time.perf_counter() - t0
    return accuracy(g.labels_, truth), sec, f"{g.n_iter_}{'' if g.result_.converged else ' (not converged)'}"


def crowdkit(answers, truth, **kw) -> tuple[float, float, str]:
    from crowdkit.aggregation import GLAD

    t0 = time.perf_counter()
    g = GLAD(**kw)
    labels = g.fit_predict(answers)
    return accuracy(labels, truth), time.perf_counter() - t0, str(len(g.loss_history_))


def main() -> None:
    ap = make_parser(__doc__)
    ap.add_argument("--datasets", default="", help="comma-separated names (default: every crowd/ensemble set)")
    ap.add_argument(
        "--converged", type=int, default=0, help="also run crowd-kit with tol=-inf for this many iterations"
    )
    ap.add_argument("--skip-crowdkit", action="store_true", help="print our figures only")
    args = ap.parse_args()
    names = [n for n in args.datasets.split(",") if n] or categorical_datasets()
    if not names:
        print("no datasets found (../shared/datasets is absent)")
        return
    from fusion_core.simulate import dawid_skene

    warm = dawid_skene(n_items=50, n_workers=5, n_classes=2, seed=0)  # the first fit pays for imports; not timed
    ours(warm.responses, warm.truth)  # (was the first set's first 50 rows: one annotator on magic_ensemble)
    have_ck = not args.skip_crowdkit
    if have_ck:
        try:
            import crowdkit
        except ImportError:
            have_ck = False
            print("crowd-kit not installed (pip install -e .[bench]); printing fusion_core only")
    head = f"{'dataset':<16}{'glad':>8}{'s':>8}{'iters':>8}"
    if have_ck:
        head += f"{'ck GLAD':>9}{'s':>8}{'iters':>7}{'diff pt':>9}"
        if args.converged:
            head += f"{'ck run on':>11}"
    print(head)
    diffs = []
    for name in names:
        answers, truth = load(name)
        acc, sec, its = ours(answers, truth)
        line = f"{name:<16}{acc:>8.4f}{sec:>8.2f}{its:>8}"
        if have_ck:
            ck_acc, ck_sec, ck_its = crowdkit(answers, truth)
            diffs.append(100 * (acc - ck_acc))
            line += f"{ck_acc:>9.4f}{ck_sec:>8.2f}{ck_its:>7}{diffs[-1]:>+9.2f}"
            if args.converged:
                line += f"{crowdkit(answers, truth, tol=-np.inf, n_iter=args.converged)[0]:>11.4f}"
        print(line, flush=True)
    if diffs:
        d = np.asarray(diffs)
        print(f"mean difference {d.mean():+.2f} pt; within 0.5 pt on {(np.abs(d) <= 0.5).sum()} of {len(d)}")


if __name__ == "__main__":
    main()
