"""Rankings of options with bootstrap-over-prompts intervals, and bias-corrected win rates from a small gold subset
by prediction-powered inference (docs/JUDGES.md).

**Rankings.** Prompts are resampled with replacement B times (each prompt's judgements weighted by its draw
count, the same as copying them) and the model refitted from the full-data estimate; the interval of a strength
and of a rank are percentiles over the refits.

**Corrected win rates (PPI++).** The win rate of option s is the mean over comparisons involving s of
Y = 1 (s preferred), ½ (tie), 0, as a human would judge.  Given gold Y on a random subset of n items, and the
model's prediction f (the pairwise Dawid–Skene posterior P(s better) + ½ P(tie)) on every item, the
prediction-powered estimate (Angelopoulos et al. 2023, Science 382; power-tuned "PPI++", Angelopoulos, Duchi &
Zrnic 2023, arXiv:2311.01453, mean estimation) is

    θ̂ = Ȳ_gold + λ (f̄_unlabelled − f̄_gold),   Var = Var_gold(Y − λ f)/n + λ² Var_unlabelled(f)/N,
    λ = Cov_gold(Y, f) / ((1 + n/N) Var_gold(f)) clipped to [0, 1],

with a normal interval.  It is unbiased whatever the judges' biases (the gold items correct the predictions'
average error) and never much wider than the gold-only mean (λ = 0), narrower when f predicts Y well.  The plain
judge average (each item's mean vote for s, averaged) is reported beside it with its difference.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import norm

from fusion_core.data.pairwise import TIE, PairwiseResponses
from fusion_core.errors import UserInputError


@dataclass(frozen=True)
class RankingIntervals:
    """``table``: one row per option, strongest first: ``strength``, ``low``, ``high`` (percentile interval of the
    strength), ``rank``, ``rank_low``, ``rank_high``; ``level``, ``n_bootstrap``, ``method``; ``fit``: the
    full-data :class:`~fusion_core.methods.pairwise.PairwiseFit`."""

    table: pd.DataFrame
    level: float
    n_bootstrap: int
    method: str
    fit: Any


def ranking_intervals(
    data: PairwiseResponses, estimator: Any, *, n_bootstrap: int = 100, level: float = 0.9, random_state: int | None = 0
) -> RankingIntervals:
    """Fit ``estimator`` (a pairwise estimator, :data:`~fusion_core.methods.pairwise.PAIRWISE_METHODS`) and refit
    it on ``n_bootstrap`` resamples of the prompts (module docstring)."""
    if not 0 < level < 1:
        raise UserInputError(f"the interval level must be between 0 and 1; got {level}.")
    est = estimator.fit(data)
    fit = est.result_
    rng = np.random.default_rng(random_state)
    draws = rng.multinomial(data.n_prompts, np.full(data.n_prompts, 1.0 / data.n_prompts), size=n_bootstrap)
    boot = np.empty((n_bootstrap, data.n_options))
    for b in range(n_bootstrap):  # replicates, not responses
        refit = type(est)(**est.get_params()).set_params(tol=1e-6).fit(data, prompt_weight=draws[b].astype(float),
                                                                       init=est.state_)  # fmt: skip
        boot[b] = refit.result_.strength
    alpha = (1 - level) / 2
    ranks = (-boot).argsort(axis=1).argsort(axis=1) + 1
    table = fit.ranking()
    order = data.options.get_indexer(table.index)
    if n_bootstrap:
        table["low"] = np.quantile(boot, alpha, axis=0)[order]
        table["high"] = np.quantile(boot, 1 - alpha, axis=0)[order]
        table["rank_low"] = np.quantile(ranks, alpha, axis=0, method="lower")[order].astype(int)
        table["rank_high"] = np.quantile(ranks, 1 - alpha, axis=0, method="higher")[order].astype(int)
    return RankingIntervals(table=table, level=level, n_bootstrap=n_bootstrap, method=fit.method, fit=fit)


# ------------------------------------------------------------------------------------- prediction-powered inference
@dataclass(frozen=True)
class PPIEstimate:
    """One corrected mean: ``estimate`` with its ``low`` / ``high`` normal interval at ``level``, the tuning
    ``lam`` (0 = gold only), ``se``, and the gold-only mean with its interval for comparison."""

    estimate: float
    low: float
    high: float
    se: float
    lam: float
    gold_mean: float
    gold_low: float
    gold_high: float
    n_gold: int
    n_unlabelled: int
    level: float


def ppi_mean(y_gold: np.ndarray, f_gold: np.ndarray, f_unlabelled: np.ndarray, *, level: float = 0.9) -> PPIEstimate:
    """Power-tuned prediction-powered mean (module docstring): gold outcomes ``y_gold`` with the predictions on the
    same items ``f_gold``, and predictions on the unlabelled items ``f_unlabelled``.  Works for win rates, pass
    rates and mean scores alike.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> y = rng.random(2000) < 0.6
    >>> f = np.clip(y + rng.normal(0.1, 0.2, 2000), 0, 1)          # biased predictions (+0.1)
    >>> r = ppi_mean(y[:200].astype(float), f[:200], f[200:])
    >>> bool(r.low < 0.6 < r.high), bool(r.high - r.low < r.gold_high - r.gold_low)
    (True, True)
    """
    y, fg, fu = (np.asarray(a, dtype=float) for a in (y_gold, f_gold, f_unlabelled))
    n, N = len(y), len(fu)
    z = float(norm.ppf(0.5 + level / 2))
    if n < 2:
        nan = float("nan")
        return PPIEstimate(nan, nan, nan, nan, 0.0, nan, nan, nan, n, N, level)
    gold_mean = float(y.mean())
    gold_se = float(y.std(ddof=1) / np.sqrt(n))
    lam = 0.0
    if N >= 2 and fg.var(ddof=1) > 0:
        cov = float(np.cov(y, fg, ddof=1)[0, 1])
        lam = float(np.clip(cov / ((1 + n / N) * fg.var(ddof=1)), 0.0, 1.0))
    est = gold_mean + (lam * (fu.mean() - fg.mean()) if N else 0.0)
    var = float(np.var(y - lam * fg, ddof=1) / n + (lam**2 * fu.var(ddof=1) / N if N >= 2 else 0.0))
    se = float(np.sqrt(var))
    return PPIEstimate(est, est - z * se, est + z * se, se, lam, gold_mean, gold_mean - z * gold_se,
                       gold_mean + z * gold_se, n, N, level)  # fmt: skip


@dataclass(frozen=True)
class CorrectedWinRates:
    """``table``: one row per option: ``items``, ``gold``, ``judge_average`` (the plain panel vote), ``model``
    (mean of the model's predictions), ``corrected`` with ``low`` / ``high`` (PPI++), ``gold_only`` with
    ``gold_low`` / ``gold_high``, ``judge_bias`` = judge_average − corrected; ``level``."""

    table: pd.DataFrame
    level: float


def gold_items(
    data: PairwiseResponses, gold: pd.DataFrame, item_prompt: np.ndarray, lo: np.ndarray, hi: np.ndarray
) -> np.ndarray:
    """Gold preferences per comparison item in item coordinates (0 = lo better, 1 = hi better, 2 = tie; −1 =
    no gold).  ``gold`` has columns prompt, option_a, option_b, preference (as the judgements)."""
    g = gold.copy()
    if "judge" not in g.columns:
        g["judge"] = "gold"
    gd = PairwiseResponses.from_frame(g)
    p = data.prompts.get_indexer(gd.prompts.take(gd.prompt))
    a = data.options.get_indexer(gd.options.take(gd.option_a))
    b = data.options.get_indexer(gd.options.take(gd.option_b))
    if (p < 0).any() or (a < 0).any() or (b < 0).any():
        bad = int(np.flatnonzero((p < 0) | (a < 0) | (b < 0))[0])
        raise UserInputError(
            f"gold row {bad + 1} names a prompt or option that no judge compared; gold rows must be comparisons "
            "of the judged data."
        )
    y = gd.outcome.astype(np.int64)
    y_lo = np.where((a > b) & (y != TIE), 1 - y, y)
    key = (p.astype(np.int64) * data.n_options + np.minimum(a, b)) * data.n_options + np.maximum(a, b)
    item_key = (item_prompt * data.n_options + lo) * data.n_options + hi
    pos = pd.Index(item_key).get_indexer(key)
    if (pos < 0).any():
        raise UserInputError("a gold row's (prompt, option A, option B) was never judged; drop it or add judgements.")
    out = np.full(len(lo), -1, dtype=np.int64)
    out[pos] = y_lo
    return out


def corrected_win_rates(
    data: PairwiseResponses, fit: Any, gold: pd.DataFrame, *, level: float = 0.9
) -> CorrectedWinRates:
    """Each option's win rate from the judges, from the model, and corrected with the gold subset (module
    docstring).  ``fit``: a fitted :class:`~fusion_core.methods.pairwise.PairwiseDS` (its item posteriors are the
    predictions)."""
    res = fit.result_
    post, lo, hi = res.item_posterior, res.item_lo, res.item_hi
    y_item = gold_items(data, gold, res.item_prompt, lo, hi)
    f_lo = post[:, 0] + (0.5 * post[:, 2] if post.shape[1] == 3 else 0.0)
    vote = np.select([data.lo_outcome() == 0, data.lo_outcome() == 1], [1.0, 0.0], 0.5)
    item = fit.model_.item
    avg_lo = np.bincount(item, weights=vote, minlength=len(lo)) / np.maximum(np.bincount(item, minlength=len(lo)), 1)
    y_lo = np.select([y_item == 0, y_item == 1], [1.0, 0.0], 0.5)
    labelled = y_item >= 0
    if labelled.sum() < 2:
        raise UserInputError("the gold subset matches fewer than 2 judged comparisons; give more gold rows.")
    rows = []
    for s in range(data.n_options):  # options, not responses
        inv = hi == s  # from s's point of view: lo-coordinates flip when s is the item's hi option
        mine = (lo == s) | inv
        fs = np.where(inv, 1 - f_lo, f_lo)
        ys = np.where(inv, 1 - y_lo, y_lo)
        av = np.where(inv, 1 - avg_lo, avg_lo)
        r = ppi_mean(ys[mine & labelled], fs[mine & labelled], fs[mine & ~labelled], level=level)
        rows.append({
            "option": data.options[s], "items": int(mine.sum()), "gold": r.n_gold,
            "judge_average": float(av[mine].mean()) if mine.any() else np.nan,
            "model": float(fs[mine].mean()) if mine.any() else np.nan,
            "corrected": r.estimate, "low": r.low, "high": r.high,
            "gold_only": r.gold_mean, "gold_low": r.gold_low, "gold_high": r.gold_high,
        })  # fmt: skip
    table = pd.DataFrame(rows).set_index("option")
    table["judge_bias"] = table["judge_average"] - table["corrected"]
    return CorrectedWinRates(table=table.sort_values("corrected", ascending=False), level=level)
