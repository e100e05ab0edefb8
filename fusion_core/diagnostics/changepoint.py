"""A single change in an annotator's accuracy: the scan and its calibration (docs/AUDIT.md, *Over time*).

Each annotator's responses, in time order, carry scores ``u_r`` (:func:`fusion_core.diagnostics.drift.efficient_scores`:
the efficient score of its accuracy given the others' posterior).  For a split after the k-th of n responses the
standardised cumulative sum

    Z²(k) = (S_k − k S/n)² / (σ̂² k (n − k) / n),     S_k = u_1 + … + u_k,

is the score (Rao) statistic of "two accuracies" against "one" (Horváth & Hušková; the Gaussian mean-shift
likelihood ratio, Hinkley 1970).  The scan takes its maximum over the splits that leave ``min_segment`` responses on
each side and fall between two different times.  Calibration, for the family of annotators tested:

* *screen* — Siegmund's (1985) approximation of the maximum of the standardised bridge over [t0, t1]:
  ``P(max Z > b) ≈ 2 [b φ(b) · ½ log(t1(1 − t0) / (t0(1 − t1))) + 1 − Φ(b)]`` (the scan is an Ornstein–
  Uhlenbeck process on the log-odds time scale; the continuous maximum bounds the discrete one);
* *permutation* — every annotator whose screening p-value is below 20 times the Bonferroni threshold gets an exact
  permutation p-value ``(1 + #{max Z²* ≥ max Z²}) / (B + 1)`` with B large enough to resolve the threshold
  (shuffling the scores over the same time order is exact under "no change": the scores are then exchangeable),
  stopped early once it cannot reach the threshold (Besag & Clifford 1991).

All annotators are scanned at once (cumulative sums over the responses sorted by annotator, then time); the
permutations are one ``rng.permuted`` per chunk.  Deterministic given the seed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

SCREEN_FACTOR = 20.0
"""Annotators whose screening p-value is below this many Bonferroni thresholds get a permutation p-value."""
CHUNK = 500_000
"""Scores per permutation chunk (B rows × n responses), to bound memory."""


@dataclass(frozen=True)
class Scan:
    """The scan per annotator (arrays of length ``n_workers``): responses scanned ``n``, ``tested`` (at least one
    allowed split), the maximum ``statistic`` and its split ``split`` (responses before the change, −1 when not
    tested), ``p_value`` (NaN when not tested) and whether it came from permutations (``permuted``)."""

    n: np.ndarray
    tested: np.ndarray
    statistic: np.ndarray
    split: np.ndarray
    p_value: np.ndarray
    permuted: np.ndarray
    n_permutations: int


def _z2(
    s1: np.ndarray, n1: np.ndarray, s: np.ndarray | float, n: np.ndarray | float, var: np.ndarray | float
) -> np.ndarray:
    """Squared standardised CUSUM ``(S_k − k S/n)² / (σ² k (n − k)/n)`` (broadcasting)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        out = (s1 - n1 * s / n) ** 2 / (var * n1 * (n - n1) / n)
    return np.nan_to_num(out, nan=0.0, posinf=0.0)


def siegmund_p(statistic: np.ndarray, first: np.ndarray, last: np.ndarray, n: np.ndarray) -> np.ndarray:
    """Screening p-value of a maximum Z² over splits ``first``…``last`` of ``n`` responses (module docstring)."""
    b = np.sqrt(np.maximum(statistic, 0.0))
    t0, t1 = first / np.maximum(n, 1), last / np.maximum(n, 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        length = 0.5 * np.log(t1 * (1.0 - t0) / (t0 * (1.0 - t1)))
    length = np.nan_to_num(np.maximum(length, 0.0))
    p = 2.0 * (b * stats.norm.pdf(b) * length + stats.norm.sf(b))
    return np.minimum(p, 1.0)


def scan(
    worker: np.ndarray,
    time: np.ndarray,
    score: np.ndarray,
    n_workers: int,
    *,
    min_segment: int,
    alpha: float,
    rng: np.random.Generator,
    n_permutations: int | None = None,
    settled: np.ndarray | None = None,
) -> Scan:
    """Scan every annotator's time-ordered ``score`` for one change in its mean (module docstring); annotators
    ``settled`` (a mask) get no permutation p-value (the caller keeps an earlier one)."""
    order = np.lexsort((time, worker))
    ws, ts, xs = worker[order], time[order], score[order].astype(float)
    n = np.bincount(ws, minlength=n_workers)
    starts = np.concatenate([[0], np.cumsum(n)[:-1]])
    pos = np.arange(len(ws)) - starts[ws]
    k = (pos + 1).astype(float)  # responses before a split right after this one
    csum = np.cumsum(xs)
    base = np.where(starts > 0, csum[np.maximum(starts - 1, 0)], 0.0)
    s1 = csum - base[ws]
    total = np.bincount(ws, weights=xs, minlength=n_workers)
    nf = n.astype(float)
    last_in_group = pos == n[ws] - 1
    distinct_next = np.zeros(len(ws), dtype=bool)
    distinct_next[:-1] = ts[1:] > ts[:-1]
    allowed = (k >= min_segment) & (nf[ws] - k >= min_segment) & distinct_next & ~last_in_group
    sq = np.bincount(ws, weights=xs * xs, minlength=n_workers)
    var = np.maximum(sq / np.maximum(nf, 1) - (total / np.maximum(nf, 1)) ** 2, 1e-12)
    lr = np.where(allowed, _z2(s1, k, total[ws], nf[ws], var[ws]), -np.inf)

    tested = np.bincount(ws[allowed], minlength=n_workers) > 0
    best = np.lexsort((-lr, ws))  # the first entry of each annotator is its maximum
    head = best[starts[n > 0]]
    statistic = np.full(n_workers, np.nan)
    split = np.full(n_workers, -1, dtype=np.int64)
    has = np.flatnonzero(n > 0)
    statistic[has] = np.where(np.isfinite(lr[head]), lr[head], np.nan)
    split[has] = np.where(np.isfinite(lr[head]), pos[head] + 1, -1)
    first = np.full(n_workers, np.inf)
    last = np.full(n_workers, -np.inf)
    np.minimum.at(first, ws[allowed], k[allowed])
    np.maximum.at(last, ws[allowed], k[allowed])

    p = np.full(n_workers, np.nan)
    p[tested] = siegmund_p(statistic[tested], first[tested], last[tested], nf[tested])
    m = int(tested.sum())
    permuted = np.zeros(n_workers, dtype=bool)
    threshold = alpha / max(m, 1)
    b_perm = int(n_permutations or min(max(int(np.ceil(SCREEN_FACTOR * m / alpha)), 999), 19_999))
    screened = tested & (p <= SCREEN_FACTOR * threshold)
    if settled is not None:
        screened &= ~settled
    for j in np.flatnonzero(screened):
        rows = slice(starts[j], starts[j] + n[j])
        p[j] = _permutation_p(
            xs[rows],
            allowed[rows],
            observed=statistic[j],
            b=b_perm,
            rng=rng,
            var=float(var[j]),
            threshold=threshold,
        )
        permuted[j] = True
    return Scan(n, tested, statistic, split, p, permuted, b_perm)


def _permutation_p(
    x: np.ndarray,
    allowed: np.ndarray,
    *,
    observed: float,
    b: int,
    rng: np.random.Generator,
    var: float,
    threshold: float,
) -> float:
    """Permutation p-value of one annotator's maximum statistic (the scores shuffled over the same time order).
    Stops early (Besag & Clifford 1991) once the exceedances rule out ``p ≤ threshold``; the p-value is then
    exceedances / permutations drawn, above the threshold either way."""
    limit = int(np.floor(threshold * (b + 1)))  # p ≤ threshold needs at most limit − 1 exceedances
    n = len(x)
    cols = np.flatnonzero(allowed)
    k = (cols + 1).astype(float)
    total = float(x.sum())
    exceed, done = 0, 0
    chunk = max(1, CHUNK // max(n, 1))
    while done < b:
        rows = min(chunk, b - done)
        perm = rng.permuted(np.broadcast_to(x, (rows, n)), axis=1)
        s1 = np.cumsum(perm, axis=1)[:, cols]
        stat = _z2(s1, k[None, :], total, float(n), var).max(axis=1)
        exceed += int((stat >= observed - 1e-9 * max(1.0, observed)).sum())
        done += rows
        if exceed >= limit and done < b:
            return max(exceed / done, (1.0 + exceed) / (b + 1.0))
    return (1.0 + exceed) / (b + 1.0)


__all__ = ["Scan", "scan", "siegmund_p"]
