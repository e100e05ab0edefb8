"""The realised accuracy gain of extra responses, simulated with the refit: the plan's interval (:mod:`.plan`).

*Realised gain*: after the extra responses are bought the method is refitted on all responses, and
``G = (1/n) Σ_i ([a_i = z_i] − [b_i = z_i])`` over all n items — ``b`` the fit's labels, ``a`` the refit's, ``z``
the truth.  The value of information (:mod:`.voi`) predicts ``E[G]`` from the planned items alone, with the
annotators' matrices held fixed; but the refit re-estimates the matrices, so labels of items that got nothing
flip, and the matrices (fitted on a few responses per annotator) are themselves uncertain.  Neither is in
:func:`.voi.gain_variance`, whose interval covered the realised gain in 35–71 % of the replay rounds.

:func:`refit_gain` simulates ``G`` (a parametric bootstrap, Efron & Tibshirani 1993 §6.5, drawing from the
posterior predictive, Gelman et al. BDA §6.3).  Each draw:

1. every annotator's confusion rows from their Dirichlet posterior — the predictive rows of :mod:`.predictive`
   as the mean, ``n_w π_k + K β`` as the concentration (β the held-out shrinkage; an annotator the fit has not
   seen answers like the crowd) — the estimation error of the matrices;
2. the truth ``z`` from the items' posterior under those rows;
3. the extra responses from the drawn rows at ``z``;
4. the refit: Dawid–Skene EM (eq. 11 M-step, estimated class prior, the fit's ``smoothing``) warm-started at the
   fit's matrices, on the responses plus the drawn ones, :data:`ITERATIONS` steps;
5. ``G`` from the refit's labels ``a``, the fit's ``b`` and ``z``.

Errors correlated given the truth (``dependence`` = τ > 0): a *common shock* — each item draws a shared label
``u ~ Γ̄[z]`` from the crowd's row at its truth, and each response copies ``u`` with probability ``ρ = √τ``, else
answers from its annotator's row (``τ`` is the responses' intraclass correlation given the truth, the excess of a
pair's agreement over the independent prediction divided by ``Σ_k q_k (1 − Σ_l Γ̄[k, l]²)``; design effect
``1 + (m − 1) τ``, Kish 1965).  Steps 2–3 then draw ``(z, u)`` from the items' joint posterior under the shock
(:func:`_shock_log_joint`) and let each extra response copy ``u`` with probability ``ρ``: a response that repeats
what the item's others say is worth less, so the simulated gain falls (planted shock, ``tests/test_refit_gain.py``:
over 40 seeds the simulated mean is 1.2–1.8 pt above the realised gain with the planted τ, 2.7–4.0 pt with 0 — the
fitted rows absorb the shock, which the draws then add again: docs/PLAN.md).  τ is an input,
not estimated: the fitted matrices absorb a common shock (agreement looks like accuracy), so the excess agreement
under them is ≈ 0 whatever τ (``benchmarks/dependence_check.py``, docs/PLAN.md); the default 0 is the
independence of the model.

The interval (:attr:`RefitGain.sd`) adds to the draws' spread a misspecification allowance: the posterior the
truth is drawn from is over-confident where errors are correlated given the truth (the model cannot express it,
and a held-out check cannot see it — :mod:`.predictive`), so each label the refit changes counts as a ±1 of
unknown sign (variance ≤ 1, a bound for any truth).  The number of changes is the larger of the simulated
refits' and, when ``refit`` is given, the method's own refit on one draw (EM from its own start moves more labels
of untouched items than the warm-started simulation); :func:`change_ratio` (observed ÷ predicted label changes,
cross-fitted) scales it up if the model under-predicts changes on held-out responses.

The draws are stacked as blocks of one sparse response matrix (draws × items rows), so a step is two
sparse–dense products for all of them (no loop over responses or draws; chunks of draws bound the memory).
Cost: draws × iterations × (responses + extra) × K multiply-adds — :func:`draws_for` lowers the draws to keep it
under :data:`WORK` — plus one fit of the method when ``refit`` is given (0.04–0.14 s CPU per replay round on
108–807-item crowds with it; docs/PLAN.md).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
import pandas as pd
import scipy.sparse as sp

from fusion_core.data.responses import Responses
from fusion_core.diagnostics.predictive import (
    ShrunkFit,
    community_em,
    crowd_confusion,
    expected_counts,
    item_log_joint,
    model_confusion,
    predictive_confusion,
)
from fusion_core.methods.numerics import normalize_rows, safe_log
from fusion_core.methods.results import FitResult

#: simulated refits per interval (fewer on large data: :func:`draws_for`); fewest worth reporting
DRAWS = 32
MIN_DRAWS = 16
#: EM steps of each simulated refit (warm-started at the fit)
ITERATIONS = 10
#: most multiply-adds (draws × iterations × responses × K) one interval may cost (~0.5 s of numpy): ~100k
#: responses at K = 3 get the fewest draws, more get the model's interval
WORK = 1.5e8
#: most stacked responses built at once (memory: ~50 bytes each)
CHUNK_RESPONSES = 2_000_000


@dataclass(frozen=True)
class RefitGain:
    """Simulated realised gains (module docstring), one per draw: ``draws`` over all items, ``untouched`` the part
    from items that got no extra response (the refit moving other labels), ``changed`` the labels each simulated
    refit changed (touched, untouched items); ``ratio`` the predictive check (:func:`change_ratio`);
    ``refit_changed`` the labels the method's own refit changed on one draw (touched, untouched), when run."""

    draws: np.ndarray
    untouched: np.ndarray
    changed: np.ndarray  # draws × 2: labels the refit changed on items that got responses, and on the others
    n_items: int
    ratio: float = 1.0  # change_ratio: label changes observed ÷ predicted, leave one response out
    refit_changed: tuple[int, int] | None = None  # labels the method's own refit changed (touched, other items)
    tau: float = 0.0  # the common shock's intraclass correlation the draws were made with (refit_gain's dependence)

    @property
    def mean(self) -> float:
        return float(self.draws.mean()) if len(self.draws) else 0.0

    @property
    def changes(self) -> float:
        """Labels the refit is expected to change: the simulated refits' mean, or the method's own refit when it
        changed more (EM on sparse data drifts along flat directions: a refit from its own start moves more labels
        of untouched items than a warm-started one)."""
        sim = float(self.changed.sum(axis=1).mean()) if len(self.changed) else 0.0
        return max(sim, float(sum(self.refit_changed))) if self.refit_changed is not None else sim

    @property
    def sd(self) -> float:
        """``√(Var(draws) + max(1, ratio) · changes / n²)``: the simulated spread plus the misspecification
        allowance — each label the refit changes may turn out right or wrong whatever the posterior says
        (``Var Δ_i ≤ E[Δ_i²] ≤ P(label i changes)`` for any truth), scaled up when the predictive check
        (:func:`change_ratio`) sees more changes than the model predicts."""
        if len(self.draws) == 0:
            return 0.0
        return float(np.sqrt(self.draws.var() + max(1.0, self.ratio) * self.changes / self.n_items**2))

    def interval(self, level: float = 0.9) -> tuple[float, float]:
        """``mean ± z · sd`` (normal approximation to a sum over many items)."""
        z = NormalDist().inv_cdf(0.5 + level / 2)
        return self.mean - z * self.sd, self.mean + z * self.sd


def _changes(
    item: np.ndarray, worker: np.ndarray, label: np.ndarray, confusion: np.ndarray, prior: np.ndarray, *, n_items: int
) -> tuple[float, float]:
    """Label changes one response makes (observed, predicted), leave one response out: observed, the label with the
    response differs from the label without it; predicted, ``Σ_l P(l | others) [argmax_k q^{-r}_k Γ_w[k, l] ≠
    argmax q^{-r}]``."""
    k = confusion.shape[-1]
    lg, tot = item_log_joint(item, worker, label, confusion, prior, n_items=n_items)
    loo = tot[item] - lg
    was = loo.argmax(axis=1)
    observed = float((tot[item].argmax(axis=1) != was).sum())
    q = np.exp(loo - loo.max(axis=1, keepdims=True))
    q /= q.sum(axis=1, keepdims=True)
    predicted = 0.0
    for c in range(k):  # outcome: the response is c
        g = confusion[worker, :, c]  # responses × K (true)
        predicted += float(((q * g).sum(axis=1) * ((loo + safe_log(g)).argmax(axis=1) != was)).sum())
    return observed, predicted


def cross_fitted(
    item: np.ndarray,
    worker: np.ndarray,
    label: np.ndarray,
    posterior: np.ndarray,
    fold: np.ndarray,
    *,
    towards: np.ndarray,
    strength: float,
    n_workers: int,
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Per fold of items (``fold`` True, then False): the mask of its responses and the matrices they are scored
    by, one M-step from the fit's ``posterior`` on the *other* fold's responses (expected counts), shrunk towards
    ``towards`` with ``strength`` pseudo-responses per row as the plan's: ``(counts + s·towards) / (rows + s)``."""
    for f in (True, False):
        fit_r = fold[item] != f
        counts = expected_counts(item[fit_r], worker[fit_r], label[fit_r], posterior, n_workers=n_workers)
        yield ~fit_r, normalize_rows(counts + strength * towards[None])


def change_ratio(
    item: np.ndarray,
    worker: np.ndarray,
    label: np.ndarray,
    posterior: np.ndarray,
    prior: np.ndarray,
    *,
    towards: np.ndarray,
    strength: float,
    n_workers: int,
    seed: int = 0,
) -> float:
    """Label changes one response makes, observed ÷ predicted by the model, cross-fitted (a predictive check):
    two folds of items; each fold's responses are scored by matrices from the *other* fold's expected counts
    (one M-step from the fit's ``posterior``, shrunk towards ``towards`` with ``strength`` pseudo-responses per
    row as the plan's), each response given its item's other responses (:func:`_changes`).  An over-confident
    model (errors correlated given the truth, rows fitted on few responses) predicts fewer changes than happen:
    the ratio exceeds 1.  1 when nothing is predicted."""
    n = posterior.shape[0]
    fold = np.less(np.random.default_rng(seed).random(n), 0.5)
    observed = predicted = 0.0
    for held, conf in cross_fitted(
        item, worker, label, posterior, fold, towards=towards, strength=strength, n_workers=n_workers
    ):
        o, p = _changes(item[held], worker[held], label[held], conf, prior, n_items=n)
        observed += o
        predicted += p
    return observed / predicted if predicted > 0 else 1.0


def _shock_log_joint(
    a_old: sp.csr_matrix, gam: np.ndarray, logq: np.ndarray, center: np.ndarray, rho: float
) -> np.ndarray:
    """Items' log joint of (truth z, shock u) under the common shock (module docstring): ``log π_z + log Γ̄[z, u]
    + Σ_s log(ρ [l_s = u] + (1 − ρ) Γ_s[z, l_s])`` up to a constant, from ``logq`` (``log π_z + Σ_s log Γ_s[z,
    l_s]``, stacked draws × items rows) and a sparse product per value of ``u`` (a loop over classes): the
    responses that say ``u`` gain ``log(ρ + (1 − ρ) Γ_s[z, u]) − log((1 − ρ) Γ_s[z, u])``.  Rows × K² (z, u)."""
    nb, n_w2, k, _ = gam.shape
    lift = safe_log(rho + (1 - rho) * gam) - safe_log((1 - rho) * gam)  # draw × worker × true × reported
    out = np.repeat(logq[:, :, None], k, axis=2) + safe_log(center)[None]
    for u in range(k):
        flat = np.zeros((nb, n_w2, k, k))  # (draw, worker, reported) × true, non-zero where reported = u
        flat[:, :, u, :] = lift[:, :, :, u]
        out[:, :, u] += np.asarray(a_old @ flat.reshape(nb * n_w2 * k, k))
    return out.reshape(len(logq), k * k)


def draws_for(n_responses: int, k: int, draws: int = DRAWS) -> int:
    """Draws affordable within :data:`WORK` (at most ``draws``; 0 when not even :data:`MIN_DRAWS` are)."""
    per = ITERATIONS * max(n_responses, 1) * k
    fit = int(min(draws, WORK // per))
    return fit if fit >= MIN_DRAWS else 0


def _concentration(
    resp_item: np.ndarray,
    resp_worker: np.ndarray,
    label: np.ndarray,
    fit: FitResult,
    prior_count: float | str,
    *,
    shrunk: ShrunkFit | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, float, np.ndarray]:
    """The annotators' predictive rows as Dirichlet concentrations (workers × true × reported), the crowd's matrix,
    the class prior and the prior's strength per row (an annotator the fit has not seen: the crowd's matrix with it) — with
    ``prior_count="auto"`` the plan's own model (:func:`.predictive.community_em`, as :func:`.predictive.predictive_model`:
    the shrunk model's fixed point, its strength and class prior), so the interval and the plan's expected gain reason
    with the same model; the refit (step 4) still starts from the fit's matrices and class prior."""
    conf, prior, _ = model_confusion(fit)
    n_w, k = conf.shape[0], conf.shape[-1]
    ok = resp_worker >= 0
    seen = np.bincount(resp_worker[ok], minlength=n_w).astype(float)
    center = crowd_confusion(conf, prior, seen)
    rows = seen[:, None] * prior[None, :]  # workers × true: responses per row
    if prior_count == "auto":  # the plan's own model (:func:`.predictive.community_em`): its rows and class prior
        if shrunk is None:
            post = np.clip(np.asarray(fit.posterior, float), 0.0, 1.0)
            shrunk = community_em(resp_item[ok], resp_worker[ok], label[ok], post, prior, n_workers=n_w)
        mean, prior, beta, crowd = shrunk.confusion, shrunk.class_prior, shrunk.strength, shrunk.crowd
        center = crowd_confusion(mean, prior, seen)
        towards = center if crowd else np.full((k, k), 1.0 / k)
        rows = seen[:, None] * prior[None, :]
        strength = k * beta
    else:
        beta = float(prior_count)
        towards = np.full((k, k), 1.0 / k)
        mean = predictive_confusion(conf, prior, seen, beta)
        strength = k * beta
    conc = mean * (rows + strength)[:, :, None]
    return np.maximum(conc, 1e-3), center, prior, strength, towards


def refit_gain(
    resp: Responses,
    fit: FitResult,
    tasks: pd.Index | np.ndarray,
    annotators: pd.Index | np.ndarray,
    *,
    prior_count: float | str = "auto",
    draws: int = DRAWS,
    seed: int = 0,
    refit: Callable[[pd.DataFrame], FitResult] | None = None,
    dependence: float = 0.0,
    shrunk: ShrunkFit | None = None,
) -> RefitGain:
    """Simulated realised accuracy gains of buying one response from ``annotators[j]`` on ``tasks[j]`` (ids as
    in the fit; annotators the fit has not seen answer like the crowd), with the refit (module docstring);
    ``dependence``: the intraclass correlation τ ∈ [0, 1) of a common shock (module docstring; 0: independent);
    ``shrunk``: the plan's fit of the shrunk model on the same responses (:func:`.predictive.predictive_model`), else
    fitted here.
    ``draws`` is lowered to keep the cost within :data:`WORK`; none (empty result) when not even
    :data:`MIN_DRAWS` fit."""
    items = pd.Index(fit.items)
    workers = pd.Index(fit.workers)
    n, k, n_w = len(items), len(fit.classes), len(workers)
    r_item = items.get_indexer(resp.items)[resp.item]
    r_worker = workers.get_indexer(resp.workers)[resp.worker]
    r_label = pd.Index(fit.classes).get_indexer(resp.classes)[resp.label]
    keep = (r_item >= 0) & (r_worker >= 0) & (r_label >= 0)
    r_item, r_worker, r_label = r_item[keep], r_worker[keep], r_label[keep]
    p_item = items.get_indexer(pd.Index(tasks))
    p_ids = pd.Index(annotators)
    p_worker = workers.get_indexer(p_ids)
    if (p_item < 0).any():
        raise ValueError("refit_gain: tasks not in the fit")
    new_ids = pd.Index(p_ids[p_worker < 0]).unique()
    p_worker = np.where(p_worker >= 0, p_worker, n_w + new_ids.get_indexer(p_ids))
    n_w2 = n_w + len(new_ids)
    m, r = len(p_item), len(r_item)
    draws = draws_for(r + m, k, draws)
    if draws == 0 or n == 0:
        return RefitGain(np.zeros(0), np.zeros(0), np.zeros((0, 2)), n)

    conc, center, prior, strength, towards = _concentration(r_item, r_worker, r_label, fit, prior_count, shrunk=shrunk)
    start, fit_prior, _ = model_confusion(fit)  # the refit starts from the fit (step 4)
    start = np.concatenate([start, np.repeat(center[None], len(new_ids), axis=0)])
    unseen = np.maximum(center * max(strength, 1.0), 1e-3)
    conc = np.concatenate([conc, np.repeat(unseen[None], len(new_ids), axis=0)])
    smoothing = float(fit.params.get("smoothing", 0.0) or 0.0)
    before = np.asarray(fit.label_codes)
    touched = np.zeros(n, bool)
    touched[p_item] = True
    rng = np.random.default_rng(seed)
    gains, rest, changed = [], [], []
    tau = float(dependence)
    if not 0.0 <= tau < 1.0:
        raise ValueError(f"refit_gain: dependence must be in [0, 1); got {dependence!r}")
    rho = float(np.sqrt(tau))
    chunk = max(1, CHUNK_RESPONSES // max(r + m, n * k * k if rho > 0 else 1, 1))
    for b0 in range(0, draws, chunk):
        nb = min(chunk, draws - b0)
        # 1. matrices from their Dirichlet posterior (gamma draws normalised)
        if strength > 0:
            gam = normalize_rows(rng.gamma(np.broadcast_to(conc, (nb, *conc.shape))))  # nb × W2 × K × K
        else:  # no prior (prior_count 0): the fitted rows taken as exact
            gam = np.broadcast_to(normalize_rows(conc), (nb, *conc.shape))
        log_g = safe_log(gam)
        # 2. the truth from the items' posterior under the drawn rows
        off_i = (np.arange(nb) * n)[:, None]
        off_w = (np.arange(nb) * n_w2)[:, None]
        rows_old = (off_i + r_item[None]).ravel()
        cols_old = ((off_w + r_worker[None]) * k + r_label[None]).ravel()
        a_old = sp.csr_matrix((np.ones(len(rows_old)), (rows_old, cols_old)), shape=(nb * n, nb * n_w2 * k))
        flat = log_g.transpose(0, 1, 3, 2).reshape(nb * n_w2 * k, k)  # (draw, worker, reported) × true
        logq = np.asarray(a_old @ flat) + safe_log(prior)[None]
        if rho > 0:  # the truth and the item's common shock u jointly: items × (true, u)
            logq = _shock_log_joint(a_old, gam, logq, center, rho)
        logq -= logq.max(axis=1, keepdims=True)
        q = np.exp(logq)
        q /= q.sum(axis=1, keepdims=True)
        cell = np.minimum((rng.random((nb * n, 1)) > np.cumsum(q, axis=1)).sum(axis=1), q.shape[1] - 1)
        truth = (cell // k if rho > 0 else cell).reshape(nb, n)
        # 3. the extra responses from the drawn rows at the truth (copying the item's shock with probability ρ)
        probs = gam[np.arange(nb)[:, None], p_worker[None], truth[:, p_item]]  # nb × m × K
        lab = np.minimum((rng.random((nb, m, 1)) > np.cumsum(probs, axis=2)).sum(axis=2), k - 1)
        if rho > 0:
            lab = np.where(rng.random((nb, m)) < rho, (cell % k).reshape(nb, n)[:, p_item], lab)
        rows = np.concatenate([rows_old, (off_i + p_item[None]).ravel()])
        cols = np.concatenate([cols_old, ((off_w + p_worker[None]) * k + lab).ravel()])
        a = sp.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(nb * n, nb * n_w2 * k))
        at = a.T.tocsr()
        # 4. the refit: EM warm-started at the fit's matrices
        conf = np.broadcast_to(start, (nb, *start.shape))
        pri = np.broadcast_to(np.asarray(fit_prior, float), (nb, k))
        for it in range(ITERATIONS + 1):
            flat = safe_log(conf).transpose(0, 1, 3, 2).reshape(nb * n_w2 * k, k)
            logq = np.asarray(a @ flat) + np.repeat(safe_log(pri), n, axis=0)
            logq -= logq.max(axis=1, keepdims=True)
            q = np.exp(logq)
            q /= q.sum(axis=1, keepdims=True)
            if it == ITERATIONS:
                break
            counts = np.asarray(at @ q).reshape(nb, n_w2, k, k).transpose(0, 1, 3, 2)  # draw × worker × true × rep
            conf = normalize_rows(counts, smoothing)
            pri = q.reshape(nb, n, k).sum(axis=1) + 1e-12
            pri = pri / pri.sum(axis=1, keepdims=True)
        after = q.argmax(axis=1).reshape(nb, n)
        # 5. the realised gain against the drawn truth
        delta = (after == truth).astype(float) - (before[None] == truth)
        gains.append(delta.mean(axis=1))
        rest.append(delta[:, ~touched].sum(axis=1) / n)
        if b0 == 0:
            first = lab[0]
        moved = after != before[None]
        changed.append(np.stack([moved[:, touched].sum(axis=1), moved[:, ~touched].sum(axis=1)], axis=1))
    refit_changed = None
    if refit is not None:  # the method itself, refitted once on the responses plus the first draw's
        extra = pd.DataFrame({"task": items.take(p_item), "worker": p_ids, "label": pd.Index(fit.classes).take(first)})
        new = refit(pd.concat([resp.to_frame()[["task", "worker", "label"]], extra], ignore_index=True))
        moved = new.labels.reindex(items).to_numpy() != fit.labels.to_numpy()
        refit_changed = (int(moved[touched].sum()), int(moved[~touched].sum()))
    post = np.clip(np.asarray(fit.posterior, float), 0.0, 1.0)
    ratio = change_ratio(r_item, r_worker, r_label, post, fit_prior, towards=towards, strength=strength, n_workers=n_w)
    return RefitGain(np.concatenate(gains), np.concatenate(rest), np.concatenate(changed), n, ratio, refit_changed, tau)


__all__ = ["DRAWS", "ITERATIONS", "MIN_DRAWS", "WORK", "RefitGain", "draws_for", "refit_gain"]
