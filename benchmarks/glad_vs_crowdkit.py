"""GLAD parity with crowd-kit's ``GLAD`` (issue 21 item 6): accuracy on gold and time per dataset, both with their
defaults, plus the number of EM iterations each ran; and our drop-in ``stop="crowdkit"`` beside them.

Our ``glad`` optimises crowd-kit's target (α ~ N(1, 1), log β ~ N(1, 1), equal fixed class priors, start at
α = 1, log β = 1) to convergence.  crowd-kit stops at the first iteration where its per-cell expected
complete-data log-likelihood does not rise by ``tol``; ``--converged N`` also runs crowd-kit with that rule
switched off (``tol=-inf``, ``n_iter=N``) to show where its own EM goes (youtube_lf: 0.870 after its two default
iterations, 0.548 once run on, the same labelling as ours).  ``glad(stop="crowdkit")`` runs crowd-kit's loop
exactly (columns "ck-mode": accuracy, iterations, and "same" = share of items whose label equals crowd-kit's).

crowd-kit on magic_ensemble takes ~10 min of CPU: it is skipped unless ``--crowdkit-all`` (docs/PEER_MODELS.md
has its figure, 0.7943 after 22 iterations).

Run: python benchmarks/glad_vs_crowdkit.py [--datasets rte,youtube_lf] [--converged 60] [--skip-crowdkit]
     [--crowdkit-all]
crowd-kit is an optional extra (``pip install -e .[bench]``); without it only our figures are printed.
"""

from __future__ import annotations

import time
import warnings

import numpy as np
from _common import categorical_datasets, load, make_parser


def accuracy(labels, truth) -> float:
    return float((labels.reindex(truth.index).astype(str) == truth.astype(str)).mean())


SLOW_FOR_CROWDKIT = ("magic_ensemble",)


def ours(answers, truth, **kw):
    """(accuracy, seconds, iterations text, labels) of our ``glad`` with parameters ``kw``."""
    from fusion_core.methods import create

    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        g = create("glad", **kw).fit(answers)
    sec = time.perf_counter() - t0
    its = f"{g.n_iter_}{'' if g.result_.converged else '*'}"
    return accuracy(g.labels_, truth), sec, its, g.labels_


def crowdkit(answers, truth, **kw):
    """(accuracy, seconds, iterations text, labels) of crowd-kit's ``GLAD`` with parameters ``kw``."""
    from crowdkit.aggregation import GLAD

    t0 = time.perf_counter()
    g = GLAD(**kw)
    labels = g.fit_predict(answers)
    return accuracy(labels, truth), time.perf_counter() - t0, str(len(g.loss_history_)), labels


def main() -> None:
    ap = make_parser(__doc__)
    ap.add_argument("--datasets", default="", help="comma-separated names (default: every crowd/ensemble set)")
    ap.add_argument(
        "--converged", type=int, default=0, help="also run crowd-kit with tol=-inf for this many iterations"
    )
    ap.add_argument("--skip-crowdkit", action="store_true", help="print our figures only")
    ap.add_argument("--crowdkit-all", action="store_true", help="also run crowd-kit on " + ", ".join(SLOW_FOR_CROWDKIT))
    args = ap.parse_args()
    names = [n for n in args.datasets.split(",") if n] or categorical_datasets()
    if not names:
        print("no datasets found (../shared/datasets is absent)")
        return
    from fusion_core.simulate import dawid_skene

    warm = dawid_skene(n_items=50, n_workers=5, n_classes=2, seed=0)  # the first fit pays for imports; not timed
    ours(warm.responses, warm.truth)  # (was the first set's first 50 rows: one annotator on magic_ensemble)
    ours(warm.responses, warm.truth, stop="crowdkit")
    have_ck = not args.skip_crowdkit
    if have_ck:
        import importlib.util

        if importlib.util.find_spec("crowdkit") is None:  # (an `import crowdkit` here would shadow crowdkit())
            have_ck = False
            print("crowd-kit not installed (pip install -e .[bench]); printing fusion_core only")
    head = f"{'dataset':<16}{'glad':>8}{'s':>7}{'iters':>6}{'ck-mode':>9}{'s':>7}{'iters':>6}"
    if have_ck:
        head += f"{'ck GLAD':>9}{'s':>8}{'iters':>6}{'glad-ck':>9}{'mode-ck':>9}{'same':>8}"
        if args.converged:
            head += f"{'ck run on':>11}"
    print(head)
    diffs, mode_diffs = [], []
    for name in names:
        answers, truth = load(name)
        acc, sec, its, _ = ours(answers, truth)
        m_acc, m_sec, m_its, m_labels = ours(answers, truth, stop="crowdkit")
        line = f"{name:<16}{acc:>8.4f}{sec:>7.2f}{its:>6}{m_acc:>9.4f}{m_sec:>7.2f}{m_its:>6}"
        if have_ck and (args.crowdkit_all or name not in SLOW_FOR_CROWDKIT):
            ck_acc, ck_sec, ck_its, ck_labels = crowdkit(answers, truth)
            diffs.append(100 * (acc - ck_acc))
            mode_diffs.append(100 * (m_acc - ck_acc))
            same = float((m_labels.astype(str) == ck_labels.reindex(m_labels.index).astype(str)).mean())
            line += f"{ck_acc:>9.4f}{ck_sec:>8.1f}{ck_its:>6}{diffs[-1]:>+9.2f}{mode_diffs[-1]:>+9.2f}{same:>8.4f}"
            if args.converged:
                line += f"{crowdkit(answers, truth, tol=-np.inf, n_iter=args.converged)[0]:>11.4f}"
        elif have_ck:
            line += "   crowd-kit skipped (~10 min CPU; --crowdkit-all runs it)"
        print(line, flush=True)
    print("iterations: * = not converged (ck-mode: stopped by crowd-kit's rule on a falling Q/(N·K), or its n_iter)")
    for label, ds in (("glad (optimum)", diffs), ("glad stop='crowdkit'", mode_diffs)):
        if ds:
            d = np.asarray(ds)
            print(
                f"{label}: mean difference to crowd-kit {d.mean():+.2f} pt; within 0.5 pt on "
                f"{(np.abs(d) <= 0.5).sum()} of {len(d)}"
            )


if __name__ == "__main__":
    main()
