"""Copies that are most of the crowd: a tight block of annotators the pair test cannot see, and what the labels are
worth if the block is one source (issue 21, item 4; docs/AUDIT.md, "Copies that are most of the crowd").

The pair test (:mod:`.dependence`) reads the crowd one way: whoever is most of everyone's partners defines the
factor, and what agrees beyond it is dependent.  When copies of one source (an ensemble of classifiers trained on
the same features, a team sharing one tool) are most of the crowd, they *are* that factor: they agree with each
other nearly always, the latent class of every fit follows their source, and the independent annotators look like
the noisy ones.  Agreement cannot say which side is right, but it can show that the pairs do not lie along one
factor: if the block's members were independent, their agreement with each other would follow from their
agreement with the others.

**The block.**  Over the pairs the pair test reads (``κ_ab``, :class:`~.dependence.PairAgreement`), a block is grown
from the pair that agrees most, adding each time the annotator whose agreement with the block (pair-weighted mean
``κ``) is highest (average linkage); among the nested blocks the one whose inner agreement exceeds its agreement
with the rest by most is the candidate.  It must have at least :data:`MIN_MEMBERS` members (two are a pair, the
pair test's domain) and give most of the responses read (more than :data:`MOST`: the reading the pair test cannot
make); each member must share a tested pair with an annotator outside, and the others must agree with each other
beyond chance (pooled over their tested pairs, at the test's bound below), else the members' skills are not read
from them (spammers outside a block of good annotators fix no scale).

**The test.**  The one-factor model (``κ_ab = v_a v_b``, :func:`~.dependence.one_factor`) is fitted on every tested
pair *but* the block's inner ones: each member's skill is then read from its agreement with the others only, and
the block's inner pairs are predicted by it.  The block is one of copies when most of its inner
pairs agree beyond that prediction by the pair test's own rule (score test, Bonferroni over all the pairs tested,
``ρ_ab ≥`` :data:`~.dependence.MIN_EXCESS`).  Independent annotators keep rank one on any block (none found on
Dawid–Skene crowds, ``tests/test_copy_block.py``).  A block the pair test flagged too is tested the same way: the
pair test weighs it by its pairs' excess (its own reading), this check counts it once.

**The figure.**  Under the hypothesis that the block is one source, each member's response on item ``i`` weighs
``1 / k_i`` (``k_i`` members answered ``i``): the block counts as one annotator (Kish's design effect with ``ρ = 1``,
as :mod:`.dependence` weighs a flagged pair).  The one-type model is refitted with these weights (a composite
likelihood) from its optimum (the block-led one: the weighted fit leaves it within a few steps; a start from the
block-free factor's skills reached the same figure on the simulated crowds).  The chosen labels' accuracy under it,
with its Poisson-binomial interval, joins the range, and since the responses support both readings equally, the
accuracy cannot be estimated from them (:mod:`.safety`).  Cost: one least-squares fit over the pairs, a greedy
pass over the annotators in tested pairs (at most :data:`MAX_ANNOTATORS`, most responses first), one weighted EM
when a block is found.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy import stats

from fusion_core.data.responses import Responses
from fusion_core.diagnostics.audit.dependence import ALPHA, MIN_EXCESS, PairAgreement, one_factor
from fusion_core.diagnostics.audit.items import label_quality

MAX_ANNOTATORS = 1000
"""Annotators in tested pairs the block is grown over at most (those with most responses)."""
MIN_MEMBERS = 3
"""Fewest members of a block (two annotators are a pair: the pair test's domain)."""
MOST = 0.5
"""Share of the responses read a block must give, more than this: copies that are most of the crowd."""


@dataclass(frozen=True)
class CopyBlock:
    """The block test and its figure (module docstring): ``annotators`` the block's ids, ``responses_share`` the
    share of the responses read that are theirs, ``inner_pairs`` their tested pairs and ``inner_dependent`` those
    agreeing beyond the block-free factor's prediction, ``inner_excess`` their median ``ρ``; ``accuracy``/``low``/
    ``high`` the chosen labels' accuracy with the block counted as one source, ``iterations``/``converged`` of its
    fit."""

    annotators: tuple[str, ...]
    responses_share: float
    inner_pairs: int
    inner_dependent: int
    inner_excess: float
    accuracy: float
    low: float
    high: float
    iterations: int
    converged: bool

    def summary(self) -> dict:
        """Plain JSON values (for ``summary.json``)."""
        return {
            "annotators": list(self.annotators),
            "responses_share": self.responses_share,
            "inner_pairs_tested": self.inner_pairs,
            "inner_pairs_with_excess_agreement": self.inner_dependent,
            "inner_excess_median": self.inner_excess,
            "accuracy_block_as_one_source": self.accuracy,
            "low": self.low,
            "high": self.high,
            "iterations": self.iterations,
            "converged": self.converged,
        }


def grow_block(pa: np.ndarray, pb: np.ndarray, kappa: np.ndarray, shared: np.ndarray, m: int) -> np.ndarray:
    """The candidate block (module docstring) over ``m`` annotators coded 0 … m − 1 and their pairs: a boolean mask
    (all False when none has two members and two outsiders)."""
    kn = np.zeros((m, m))
    nn = np.zeros((m, m))
    kn[pa, pb] = kn[pb, pa] = kappa * shared
    nn[pa, pb] = nn[pb, pa] = shared
    block = np.zeros(m, dtype=bool)
    if m < 4 or len(pa) == 0:
        return block
    top = int(np.argmax(kappa))
    block[[pa[top], pb[top]]] = True
    link_k, link_n = kn[:, block].sum(axis=1), nn[:, block].sum(axis=1)
    inner_k, inner_n = float(kappa[top] * shared[top]), float(shared[top])
    tot_k, tot_n = kn.sum(axis=1), nn.sum(axis=1)
    best, best_gap, order = 2, -np.inf, [int(pa[top]), int(pb[top])]
    for size in range(2, m - 1):  # one step per annotator added (≤ MAX_ANNOTATORS), vectors over annotators
        cross_k = float(tot_k[block].sum() - 2 * inner_k)
        cross_n = float(tot_n[block].sum() - 2 * inner_n)
        if cross_n > 0:
            gap = inner_k / inner_n - cross_k / cross_n
            if gap > best_gap:
                best, best_gap = size, gap
        score = np.where(~block & (link_n > 0), link_k / np.maximum(link_n, 1e-12), -np.inf)
        nxt = int(np.argmax(score))
        if not np.isfinite(score[nxt]):
            break
        inner_k += float(link_k[nxt])
        inner_n += float(link_n[nxt])
        block[nxt] = True
        order.append(nxt)
        link_k += kn[:, nxt]
        link_n += nn[:, nxt]
    out = np.zeros(m, dtype=bool)
    out[order[:best]] = True
    return out


def copy_block_check(
    resp: Responses,
    item: np.ndarray,
    n: int,
    pairs: PairAgreement | None,
    *,
    label: np.ndarray,
    refit: Callable[[np.ndarray], tuple[np.ndarray, int, bool]],
    level: float = 0.9,
) -> CopyBlock | None:
    """The block test (module docstring) on ``resp`` (responses of ``n`` items coded ``item``) from the pair test's
    ``pairs``, for the chosen ``label`` (codes of the ``n`` items); ``refit(weights)`` refits the one-type model
    with per-response weights (from its optimum) and returns (posterior, iterations, converged).  None when no block
    of copies is found."""
    if pairs is None or not pairs.tested.any():
        return None
    W = resp.n_workers
    t = np.flatnonzero(pairs.tested)
    pa, pb, kappa, shared = pairs.pa[t], pairs.pb[t], pairs.kappa[t], pairs.shared[t]
    observed, chance = pairs.observed[t], pairs.chance[t]
    active = np.unique(np.concatenate([pa, pb]))
    if len(active) > MAX_ANNOTATORS:  # the annotators with most responses (ties: code order)
        per = resp.responses_per_worker[active]
        active = np.sort(active[np.argsort(-per, kind="stable")[:MAX_ANNOTATORS]])
        keep = np.isin(pa, active) & np.isin(pb, active)
        pa, pb, kappa, shared, observed, chance = (x[keep] for x in (pa, pb, kappa, shared, observed, chance))
    code = np.full(W, -1)
    code[active] = np.arange(len(active))
    block = np.zeros(W, dtype=bool)
    block[active[grow_block(code[pa], code[pb], kappa, shared, len(active))]] = True
    inner = block[pa] & block[pb]
    rest = ~block[pa] & ~block[pb]
    cross = block[pa] != block[pb]
    members = np.flatnonzero(block)
    in_block = block[resp.worker]
    # a block: at least MIN_MEMBERS, most of the responses, and every member's skill read from pairs with the rest
    # (cross pairs; the rest's own pairs fix the factor's scale)
    linked = np.bincount(np.where(block[pa], pa, pb)[cross], minlength=W)[members] > 0
    if len(members) < MIN_MEMBERS or in_block.mean() <= MOST or not linked.all() or rest.sum() == 0:
        return None
    bound = float(stats.norm.isf(ALPHA / int(pairs.tested.sum())))
    # the others must agree with each other beyond chance (pooled over their pairs, the same bound): without it
    # (spammers outside a block of good annotators) their pairs fix no scale and the members' skills are not read
    m_rest = float(shared[rest].sum())
    o_rest, c_rest = float(shared[rest] @ observed[rest]) / m_rest, float(shared[rest] @ chance[rest]) / m_rest
    if (o_rest - c_rest) / np.sqrt(max(c_rest * (1.0 - c_rest), 1e-6) / m_rest) <= bound:
        return None
    fit = ~inner
    v = one_factor(pa[fit], pb[fit], kappa[fit], shared[fit], W)
    predicted = chance + (1.0 - chance) * np.clip(v[pa] * v[pb], -1.0, 1.0)
    excess = (observed - predicted) / np.maximum(1.0 - predicted, 1e-9)
    z = (observed - predicted) / np.sqrt(np.maximum(predicted * (1.0 - predicted), 1e-6) / shared)
    dependent = inner & (z > bound) & (excess >= MIN_EXCESS)
    n_inner, n_dep = int(inner.sum()), int(dependent.sum())
    if 2 * n_dep <= n_inner:
        return None
    names = resp.workers.astype(str)
    k_item = np.bincount(item[in_block], minlength=n)
    weight = np.where(in_block, 1.0 / np.maximum(k_item[item], 1), 1.0)
    posterior, iterations, converged = refit(weight)
    own = label_quality(posterior, np.asarray(label, dtype=np.int64), level)
    return CopyBlock(
        annotators=tuple(names[members]),
        responses_share=float(in_block.mean()),
        inner_pairs=n_inner,
        inner_dependent=n_dep,
        inner_excess=float(np.median(excess[inner])),
        accuracy=own.accuracy,
        low=own.low,
        high=own.high,
        iterations=iterations,
        converged=converged,
    )
