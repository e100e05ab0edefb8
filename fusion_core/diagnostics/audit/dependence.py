"""Dependent annotators: how much of the crowd's agreement is evidence, and what the labels are worth if copies
count once (issue 21, item 4; docs/AUDIT.md, "Dependent annotators").

Every latent-class figure of the accuracy range takes the annotators' errors to be independent given the class:
that is what makes agreement evidence.  Annotators who copy one source, or classifiers trained on the same
features, err together; ``k`` copies of one annotator then count ``k`` times, the posterior follows the source's
mistakes with the confidence of ``k`` independent votes, and the model's figure overstates the labels' accuracy.

**Excess agreement per pair.**  Two annotators ``a``, ``b`` who share ``n_ab`` items agree on a share ``O_ab``
of them; chance agreement at their own label shares is ``E_ab = Σ_k r_a[k] r_b[k]``, and ``κ_ab = (O_ab − E_ab) /
(1 − E_ab)``.  If their errors are independent given the class and spread evenly, ``κ_ab = v_a v_b`` with ``v_a``
the annotator's skill above chance (the agreement of two noisy copies of the truth factorises; Dawid & Skene
1979's model with one coin per annotator): the pairs' agreements form a rank-one matrix.  ``v`` is fitted to the
pairs by weighted least squares (:func:`one_factor`), and a pair's predicted agreement is ``P_ab = E_ab + (1 −
E_ab) v_a v_b``; its **excess** ``ρ_ab = (O_ab − P_ab) / (1 − P_ab)`` is the share of the disagreements expected
between them that do not happen (0 for independent annotators, 1 for copies), tested by the score statistic
``z_ab = (O_ab − P_ab) / √(P_ab(1 − P_ab)/n_ab)``.  A pair has *excess agreement* when ``z_ab`` exceeds the
one-sided Bonferroni bound over the pairs tested (α = :data:`ALPHA`), they share at least :data:`MIN_SHARED`
items and ``ρ_ab ≥`` :data:`MIN_EXCESS`.

Which side of a disagreement between a tight group and the rest is the dependent one, agreement alone cannot say
(copies agree with each other as well as very good annotators do; the rest then looks like a group that shares the
truth).  The fit encodes one reading: a group of copies agrees with each other far more than their agreement with
everyone else implies.  It starts from medians (:func:`robust_factor`: each annotator's median ``κ`` with its
partners), which a group cannot pull towards itself unless it is most of an annotator's partners; then, in turn,
the pairs with excess agreement are linked into groups, the pairs inside a group leave the fit (their mutual
agreement says nothing of their skill), and the fit and the test are repeated until the groups are stable
(:data:`MAX_ROUNDS`).  When copies are most of the crowd, they define the factor and are not found (simulated:
``benchmarks/accuracy_honesty.py``, family ``classifier-ensemble-3class-majority``); the block test of
:mod:`.copy_block` reads the pairs the other way for them.

**The dependence-aware model.**  A response of annotator ``a`` on item ``i`` is weighted by
``1 / (1 + Σ_b ρ_ab)`` over the dependent partners ``b`` who answered ``i`` too — Kish's design effect
``1 + (k − 1) ρ`` of a cluster of ``k`` equally correlated members (Kish 1965, *Survey Sampling*, §5.4): ``k``
exact copies weigh as one annotator, independent ones keep weight 1.  The one-type model is refitted with these
weights on the log-likelihood (a composite likelihood, Varin, Reid & Firth 2011, *Statistica Sinica* 21) and on
the confusion counts, from the one-type optimum, and the chosen labels' accuracy under it, ``Σ_i q^dep_i[label_i] /
n`` with its Poisson-binomial interval, is one more plausible figure; ``shift`` = that figure − the one-type
figure is what counting copies once takes from (or adds to) the latent-class estimate.  With no dependent pair
nothing is fitted and nothing changes.  Errors that are not spread evenly (a shared bias towards one class)
also read as excess agreement: the weights then discount annotators who share a bias, which is the same
principle.  Cost: ``O(Σ_i n_i²)`` over the difficulty check's items (at most :data:`MAX_PAIRS` response pairs,
whole items of smallest id hash), least squares over the pairs, plus one weighted EM.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy import sparse, stats
from scipy.sparse import csgraph

from fusion_core.data.responses import Responses
from fusion_core.diagnostics.audit.items import label_quality
from fusion_core.methods.auto.folds import smallest_first

ALPHA = 0.05
"""Family-wise level of the pair tests (one-sided, Bonferroni over the pairs tested)."""
MIN_SHARED = 20
"""Fewest shared items for a pair to be tested."""
MIN_EXCESS = 0.3
"""Smallest excess ``ρ`` (share of the expected disagreements missing) of a dependent pair."""
MAX_PAIRS = 1_000_000
"""Response pairs read at most (whole items, smallest id hash first)."""
MAX_ROUNDS = 20
"""Trimming rounds of the one-factor fit at most."""
FLOOR = 1e-12


@dataclass(frozen=True)
class DependenceCheck:
    """The pair test and the dependence-aware figure (module docstring): ``pairs_tested``, ``pairs_dependent``
    and the annotators in a dependent pair (``annotators``, their ids); ``strongest``: up to five dependent pairs
    (ids and ``ρ``), largest excess first; ``weight_share``: the responses' weights' sum over the responses read
    (1 without dependence); ``accuracy``/``low``/``high`` the chosen labels' accuracy under the dependence-aware
    model (the one-type figure when no pair is dependent) and ``shift`` its difference from the one-type figure;
    ``iterations``, ``converged`` of its fit (0, True when none)."""

    pairs_tested: int
    pairs_dependent: int
    annotators: tuple[str, ...]
    strongest: tuple[tuple[str, str, float], ...]
    weight_share: float
    accuracy: float
    low: float
    high: float
    shift: float
    iterations: int = 0
    converged: bool = True

    @property
    def found(self) -> bool:
        return self.pairs_dependent > 0

    def summary(self) -> dict:
        """Plain JSON values (for ``summary.json``)."""
        return {
            "pairs_tested": self.pairs_tested,
            "pairs_with_excess_agreement": self.pairs_dependent,
            "annotators_in_such_pairs": list(self.annotators),
            "strongest_pairs": [{"a": a, "b": b, "excess": r} for a, b, r in self.strongest],
            "response_weight_share": self.weight_share,
            "accuracy_shared_agreement_counted_once": self.accuracy,
            "low": self.low,
            "high": self.high,
            "shift": self.shift,
            "iterations": self.iterations,
            "converged": self.converged,
        }


def response_pairs(item: np.ndarray, n: int, order_key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every pair of responses (indices ``r < s`` in item order) on the same item, items taken in ``order_key``
    order (per item) until :data:`MAX_PAIRS` pairs; vectorised (no loop over items)."""
    per_item = np.bincount(item, minlength=n)
    pairs = per_item * (per_item - 1) // 2
    keep = smallest_first(pairs, order_key, MAX_PAIRS) if pairs.sum() > MAX_PAIRS else np.ones(n, dtype=bool)
    sel = np.flatnonzero(keep[item])
    sel = sel[np.argsort(item[sel], kind="stable")]
    it = item[sel]
    starts = np.searchsorted(it, np.arange(n + 1))
    rank = np.arange(len(sel)) - starts[it]
    count = per_item[it] - 1 - rank  # partners after each response in its item
    first = np.repeat(np.arange(len(sel)), count)
    offset = np.arange(len(first)) - np.repeat(np.cumsum(count) - count, count)
    second = first + 1 + offset
    return sel[first], sel[second]


def one_factor(
    a: np.ndarray, b: np.ndarray, kappa: np.ndarray, n: np.ndarray, W: int, *, iterations: int = 500
) -> np.ndarray:
    """``v`` minimising ``Σ n_ab (κ_ab − v_a v_b)²`` over the pairs given (alternating least squares: every
    ``v_a`` updated in closed form given the others, averaged with its previous value; annotators without a pair
    keep 0)."""
    deg = np.bincount(a, weights=n, minlength=W) + np.bincount(b, weights=n, minlength=W)
    v = (np.bincount(a, weights=n * kappa, minlength=W) + np.bincount(b, weights=n * kappa, minlength=W)) / np.maximum(
        deg, 1e-12
    )
    v = np.sqrt(np.clip(v, 1e-4, 1.0)) * (deg > 0)
    for _ in range(iterations):  # ALS sweeps, not responses
        num = np.bincount(a, weights=n * kappa * v[b], minlength=W) + np.bincount(
            b, weights=n * kappa * v[a], minlength=W
        )
        den = np.bincount(a, weights=n * v[b] ** 2, minlength=W) + np.bincount(b, weights=n * v[a] ** 2, minlength=W)
        # the plain update maps a scale c of the solution to 1/c; the average of the two converges (Heron's rule)
        new = 0.5 * (v + np.where(den > 1e-12, num / np.maximum(den, 1e-12), 0.0))
        if np.max(np.abs(new - v)) < 1e-8:
            return new
        v = new
    return v


def robust_factor(a: np.ndarray, b: np.ndarray, kappa: np.ndarray, W: int) -> np.ndarray:
    """A start for the one-factor fit that a tight group cannot pull towards itself: under ``κ_ab = v_a v_b``
    each annotator's median agreement ``u_a = median_b κ_ab`` is ``v_a`` times a constant ``m``, and ``m² =
    median_ab u_a u_b / κ_ab``; medians, so a group of copies moves neither unless it is most of the partners."""
    both = np.concatenate([a, b])
    k2 = np.concatenate([kappa, kappa])
    order = np.lexsort((k2, both))
    both, k2 = both[order], k2[order]
    starts = np.searchsorted(both, np.arange(W + 1))
    count = np.diff(starts)
    u = np.zeros(W)
    has = count > 0
    lo_mid = starts[:-1] + (count - 1) // 2
    hi_mid = starts[:-1] + count // 2
    u[has] = 0.5 * (k2[np.minimum(lo_mid[has], len(k2) - 1)] + k2[np.minimum(hi_mid[has], len(k2) - 1)])
    ok = np.abs(kappa) > 1e-6
    m2 = float(np.median(u[a[ok]] * u[b[ok]] / kappa[ok])) if ok.any() else 1.0
    return u / np.sqrt(max(m2, 1e-6))


@dataclass(frozen=True)
class PairAgreement:
    """Agreement per pair of annotators who share items (module docstring): the response pairs read (``r``,
    ``s``, response indices) and the pair each belongs to (``pair``); per pair, its annotators ``pa < pb`` (codes),
    the items they share, their observed agreement, chance agreement at their own label shares and ``kappa``;
    ``tested``: pairs sharing at least :data:`MIN_SHARED` items."""

    r: np.ndarray
    s: np.ndarray
    pair: np.ndarray
    pa: np.ndarray
    pb: np.ndarray
    shared: np.ndarray
    observed: np.ndarray
    chance: np.ndarray
    kappa: np.ndarray
    tested: np.ndarray


def pair_agreement(resp: Responses, item: np.ndarray, n: int, order_key: np.ndarray) -> PairAgreement | None:
    """Every pair's agreement statistics on ``resp`` (responses of ``n`` items coded ``item``, read in
    ``order_key`` order up to :data:`MAX_PAIRS` response pairs); None without a pair of two annotators."""
    K, W = resp.n_classes, resp.n_workers
    r, s = response_pairs(item, n, order_key)
    a, b = resp.worker[r], resp.worker[s]
    ok = a != b  # an annotator's repeated response is no pair
    r, s, a, b = r[ok], s[ok], a[ok], b[ok]
    if len(r) == 0:
        return None
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    keys, pair = np.unique(lo.astype(np.int64) * W + hi, return_inverse=True)
    pa, pb = keys // W, keys % W
    shared = np.bincount(pair).astype(float)
    observed = np.bincount(pair, weights=(resp.label[r] == resp.label[s]).astype(float)) / shared
    shares = np.bincount(resp.worker * K + resp.label, minlength=W * K).reshape(W, K).astype(float)
    shares /= np.maximum(shares.sum(axis=1, keepdims=True), 1.0)
    chance = np.clip((shares[pa] * shares[pb]).sum(axis=1), 0.0, 1.0 - 1e-6)
    kappa = (observed - chance) / (1.0 - chance)
    return PairAgreement(r, s, pair, pa, pb, shared, observed, chance, kappa, shared >= MIN_SHARED)


def dependence_check(
    resp: Responses,
    item: np.ndarray,
    n: int,
    *,
    label: np.ndarray,
    order_key: np.ndarray,
    one_type_accuracy: float,
    refit: Callable[[np.ndarray], tuple[np.ndarray, int, bool]],
    level: float = 0.9,
    pairs: PairAgreement | None = None,
) -> DependenceCheck | None:
    """The check (module docstring) on ``resp`` (responses of ``n`` items coded ``item``), for the chosen
    ``label`` (codes of the ``n`` items), ``one_type_accuracy`` the one-type fit's figure for them;
    ``refit(weights)`` refits the one-type model with per-response weights and returns (posterior, iterations,
    converged); ``pairs`` the pair statistics when already computed (:func:`pair_agreement`).  None without a pair
    to test."""
    W = resp.n_workers
    pairs = pair_agreement(resp, item, n, order_key) if pairs is None else pairs
    if pairs is None:
        return None
    r, s, pair, pa, pb = pairs.r, pairs.s, pairs.pair, pairs.pa, pairs.pb
    shared, observed, chance, kappa, tested = pairs.shared, pairs.observed, pairs.chance, pairs.kappa, pairs.tested
    n_tested = int(tested.sum())
    if n_tested == 0:
        return None
    bound = float(stats.norm.isf(ALPHA / n_tested))
    dependent = np.zeros(len(pa), dtype=bool)
    excess = np.zeros(len(pa))
    within = np.zeros(len(pa), dtype=bool)  # both ends in one group of dependent annotators
    v = robust_factor(pa[tested], pb[tested], kappa[tested], W)
    for step in range(MAX_ROUNDS):  # trimming rounds, not responses
        if step:
            fit = tested & ~within
            v = one_factor(pa[fit], pb[fit], kappa[fit], shared[fit], W)
        predicted = chance + (1.0 - chance) * np.clip(v[pa] * v[pb], -1.0, 1.0)
        excess = (observed - predicted) / np.maximum(1.0 - predicted, 1e-9)
        # the score test: the agreement's binomial spread under the null, at the predicted agreement
        z = (observed - predicted) / np.sqrt(np.maximum(predicted * (1.0 - predicted), 1e-6) / shared)
        dependent = tested & (z > bound) & (excess >= MIN_EXCESS)
        graph = sparse.coo_matrix((np.ones(int(dependent.sum())), (pa[dependent], pb[dependent])), shape=(W, W))
        _, group = csgraph.connected_components(graph, directed=False)
        grouped = np.bincount(group, minlength=W)[group] > 1
        now = grouped[pa] & grouped[pb] & (group[pa] == group[pb])
        if np.array_equal(now, within):
            break
        within = now
    names = resp.workers.astype(str)
    if not dependent.any():
        return DependenceCheck(n_tested, 0, (), (), 1.0, one_type_accuracy, one_type_accuracy, one_type_accuracy, 0.0)
    rho = np.where(dependent, np.clip(excess, 0.0, 1.0), 0.0)[pair]
    load = 1.0 + np.bincount(r, weights=rho, minlength=resp.n_responses)
    load += np.bincount(s, weights=rho, minlength=resp.n_responses)
    weight = 1.0 / load
    posterior, iterations, converged = refit(weight)
    own = label_quality(posterior, label, level)
    dep = np.flatnonzero(dependent)
    top = dep[np.argsort(-excess[dep], kind="stable")[:5]]
    members = np.unique(np.concatenate([pa[dep], pb[dep]]))
    return DependenceCheck(
        pairs_tested=n_tested,
        pairs_dependent=int(dependent.sum()),
        annotators=tuple(names[members]),
        strongest=tuple((str(names[pa[j]]), str(names[pb[j]]), float(excess[j])) for j in top),
        weight_share=float(weight.mean()),
        accuracy=own.accuracy,
        low=own.low,
        high=own.high,
        shift=own.accuracy - one_type_accuracy,
        iterations=iterations,
        converged=converged,
    )
