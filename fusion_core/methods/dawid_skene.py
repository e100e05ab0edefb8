"""Dawid–Skene EM (full confusion matrices) and its one-coin variant.

Traganitis & Giannakis §3.1 (``papers/traganitis-giannakis-sequential-networked.txt``), spec
``sequential-networked.md`` §2.1: E-step eq. (9) with log priors, M-step eq. (11), priors
``π_k = (1/N) Σ_n q_nk``.  Missing responses contribute nothing (spec §1.4).

Implementation: with the sparse count matrix ``A`` (items × workers·K) of :class:`Responses`, the
E-step's unary log-likelihood is ``L = A @ log Γ`` and the M-step's expected counts are ``Aᵀ @ q``: two
sparse–dense products per iteration, O(|responses|·K), no Python loop over responses.
"""

from __future__ import annotations

import numpy as np

from fusion_core.data.responses import Responses
from fusion_core.errors import UserInputError
from fusion_core.methods.base import Aggregator, Fit, clamp_gold, initial_posterior, log_normalize, safe_log
from fusion_core.methods.registry import register

_EM_PARAMS = {
    "smoothing": {"low": 0.0, "high": 100.0, "help": "Dirichlet pseudo-count added to every confusion count (0 = plain ML)."},
    "estimate_priors": {"help": "Estimate class priors (Dawid & Skene); off = equal priors as in the paper's §3.1."},
    "init": {"kind": "object", "help": "'mv' (soft majority vote) or initial posteriors (items × K array or task × label DataFrame).", "advanced": True},
    "tol": {"low": 0.0, "high": 1.0, "help": "Stop when the relative change of the log-likelihood is below tol."},
    "max_iter": {"low": 1, "high": 10000, "help": "Maximum EM iterations."},
    "anneal": {"kind": "object", "help": "Deterministic annealing (multilabel.md §7): False (default), True/'default' or a dict of schedule settings. Off by default: on sparse data it can reach higher training likelihood but lower accuracy; compare by held-out likelihood.", "advanced": True},
    "n_restarts": {"low": 0, "high": 100, "help": "Extra EM runs from random posteriors; the run with the best final log-likelihood is kept.", "advanced": True},
    "random_state": {"kind": "int", "help": "Seed for the random restarts.", "advanced": True},
}


def expected_counts(resp: Responses, posterior: np.ndarray) -> np.ndarray:
    """M-step statistics ``C[w, k, l] = Σ_n q_nk · #(w said l on n)`` as ``workers × true × reported``."""
    k = resp.n_classes
    c = resp.counts_t @ posterior  # (W·K_reported) × K_true
    return c.reshape(resp.n_workers, k, k).transpose(0, 2, 1)


def normalize_confusion(counts: np.ndarray, smoothing: float) -> np.ndarray:
    """Rows (true class) of ``counts + smoothing`` normalised to probabilities; empty rows become uniform."""
    k = counts.shape[-1]
    c = counts + smoothing
    tot = c.sum(axis=-1, keepdims=True)
    return np.where(tot > 0, c / np.where(tot > 0, tot, 1.0), 1.0 / k)


def unary_log_likelihood(resp: Responses, confusion: np.ndarray) -> np.ndarray:
    """``L[n, k] = Σ_{responses (w, l) on n} log Γ_w[k, l]`` (spec §2.0), items × K."""
    k = resp.n_classes
    log_g = safe_log(confusion).transpose(0, 2, 1).reshape(resp.n_workers * k, k)
    return np.asarray(resp.counts @ log_g)


def e_step(
    resp: Responses,
    confusion: np.ndarray,
    class_prior: np.ndarray,
    gold: tuple[np.ndarray, np.ndarray] | None = None,
    temperature: float = 1.0,
) -> tuple[np.ndarray, float]:
    """Posteriors (eq. 9 with log priors) and the observed-data log-likelihood ``Σ_n log Σ_k π_k e^{L_nk}``.

    Gold items are clamped to their class and contribute their complete-data term.  ``temperature`` > 1
    flattens the posterior (deterministic annealing); the returned log-likelihood is always at T = 1.
    """
    joint = unary_log_likelihood(resp, confusion) + safe_log(class_prior)[None, :]
    post, lognorm = log_normalize(joint)
    ll_terms = lognorm
    if temperature != 1.0:
        post, _ = log_normalize(joint / temperature)
    if gold is not None and len(gold[0]):
        ll_terms = ll_terms.copy()
        ll_terms[gold[0]] = joint[gold[0], gold[1]]
        clamp_gold(post, gold)
    return post, float(ll_terms.sum())


def m_step(
    resp: Responses, posterior: np.ndarray, smoothing: float, estimate_priors: bool, one_coin: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """Confusion matrices (eq. 11, plus optional Dirichlet smoothing) and class priors from posteriors."""
    k = resp.n_classes
    counts = expected_counts(resp, posterior)
    if one_coin:
        correct = np.einsum("wkk->w", counts)
        total = counts.sum(axis=(1, 2))
        acc = (correct + smoothing) / np.maximum(total + 2 * smoothing, 1e-300)
        acc = np.where(total + 2 * smoothing > 0, acc, 1.0 / k)
        off = (1.0 - acc) / (k - 1)
        conf = np.repeat(off[:, None, None], k, axis=1).repeat(k, axis=2)
        idx = np.arange(k)
        conf[:, idx, idx] = acc[:, None]
    else:
        conf = normalize_confusion(counts, smoothing)
    if estimate_priors:
        prior = posterior.sum(axis=0) + 1e-12
        prior = prior / prior.sum()
    else:
        prior = np.full(k, 1.0 / k)
    return conf, prior


def log_dirichlet_prior(confusion: np.ndarray, smoothing: float) -> float:
    """The MAP objective's extra term ``α Σ log Γ`` (so the trace stays monotone with smoothing > 0)."""
    return float(smoothing * safe_log(confusion).sum()) if smoothing > 0 else 0.0


def run_em(
    resp: Responses,
    posterior: np.ndarray,
    *,
    smoothing: float,
    estimate_priors: bool,
    tol: float,
    max_iter: int,
    gold=None,
    one_coin: bool = False,
    temperatures: list[float] | None = None,
) -> Fit:
    """EM from initial posteriors: M-step first, then E-step, until the log-likelihood settles.

    ``temperatures`` (optional, decreasing to 1) runs tempered E-steps first (deterministic annealing);
    the convergence test only starts once T = 1.
    """
    q = clamp_gold(posterior.copy(), gold)
    trace: list[float] = []
    converged = False
    schedule = list(temperatures or [])
    it = 0
    conf = prior = None
    for it in range(1, max_iter + len(schedule) + 1):
        temp = schedule[it - 1] if it <= len(schedule) else 1.0
        conf, prior = m_step(resp, q, smoothing, estimate_priors, one_coin)
        q, ll = e_step(resp, conf, prior, gold, temperature=temp)
        ll += log_dirichlet_prior(conf, smoothing)
        trace.append(ll)
        if temp == 1.0 and len(trace) >= 2 and it > len(schedule) + 1:
            if abs(trace[-1] - trace[-2]) <= tol * max(1.0, abs(trace[-1])):
                converged = True
                break
        if it - len(schedule) >= max_iter:
            break
    return Fit(
        posterior=q,
        confusion=conf,
        class_prior=prior,
        log_likelihood=trace,
        n_iter=it,
        converged=converged,
    )


class _EMBase(Aggregator):
    one_coin = False

    def __init__(
        self,
        smoothing: float = 0.0,
        estimate_priors: bool = True,
        init="mv",
        tol: float = 1e-7,
        max_iter: int = 500,
        anneal=False,
        n_restarts: int = 0,
        random_state: int = 0,
    ):
        self.smoothing = smoothing
        self.estimate_priors = estimate_priors
        self.init = init
        self.tol = tol
        self.max_iter = max_iter
        self.anneal = anneal
        self.n_restarts = n_restarts
        self.random_state = random_state

    def _check_params(self) -> None:
        if not (self.smoothing >= 0):
            raise UserInputError(f"smoothing must be ≥ 0, got {self.smoothing}.")
        if not (self.tol >= 0):
            raise UserInputError(f"tol must be ≥ 0, got {self.tol}.")
        if int(self.max_iter) < 1:
            raise UserInputError(f"max_iter must be ≥ 1, got {self.max_iter}.")

    def _fit(self, responses, *, gold, graph, context) -> Fit:
        self._check_params()
        q0 = initial_posterior(responses, self.init)
        if int(self.n_restarts) < 0:
            raise UserInputError(f"n_restarts must be ≥ 0, got {self.n_restarts}.")
        starts = [q0]
        if int(self.n_restarts) > 0:  # random posteriors (Dirichlet(1) rows), seeded
            rng = np.random.default_rng(self.random_state)
            starts += [rng.dirichlet(np.ones(responses.n_classes), size=responses.n_items) for _ in range(int(self.n_restarts))]
        runs = [self._run_one(responses, q, gold) for q in starts]
        finals = [f.log_likelihood[-1] if f.log_likelihood else -np.inf for f in runs]
        best = int(np.argmax(finals))
        fit = runs[best]
        if len(runs) > 1:
            fit.extras["restart_log_likelihoods"] = np.asarray(finals, dtype=float)
            fit.extras["restart_best"] = best
        return fit

    def _run_one(self, responses, q0, gold) -> Fit:
        """One EM run from posteriors ``q0``, annealed first when ``anneal`` is set (multilabel.md §7.4)."""
        ann = None
        from fusion_core.annealing import anneal_dawid_skene, resolve_schedule

        schedule = resolve_schedule(self.anneal)
        if schedule is not None:
            ann = anneal_dawid_skene(
                responses,
                q0,
                smoothing=float(self.smoothing),
                estimate_priors=bool(self.estimate_priors),
                one_coin=self.one_coin,
                gold=gold,
                schedule=schedule,
            )
            q0 = ann.posterior
        fit = run_em(
            responses,
            q0,
            smoothing=float(self.smoothing),
            estimate_priors=bool(self.estimate_priors),
            tol=float(self.tol),
            max_iter=int(self.max_iter),
            gold=gold,
            one_coin=self.one_coin,
        )
        if ann is not None:
            from fusion_core.annealing import majority_alignment

            perm = majority_alignment(responses, fit.posterior)
            if not np.array_equal(perm, np.arange(len(perm))):
                import warnings

                from fusion_core.errors import AggregationWarning

                warnings.warn(
                    f"annealed EM: the best matching of its classes to majority-vote labels is {perm.tolist()}, not the identity (possible label switching).",
                    AggregationWarning,
                )
            fit.extras["majority_alignment"] = perm
            fit.extras["temperatures"] = np.asarray(ann.temperatures + [1.0] * len(fit.log_likelihood))
            fit.extras["anneal_T0"] = ann.T0
            fit.extras["anneal_restarts"] = ann.restarts
            fit.extras["anneal_fell_back"] = ann.fell_back
            fit.extras["anneal_free_energy"] = np.asarray([r["F"] for r in ann.trace])
            fit.extras["anneal_log_likelihood"] = np.asarray([r["ll"] for r in ann.trace])
        return fit


@register(
    "ds",
    summary="Dawid–Skene EM: a full confusion matrix per annotator and class priors.",
    family="dawid_skene",
    params=_EM_PARAMS,
    reference="Dawid & Skene 1979; Traganitis & Giannakis §3.1, eqs. (8)–(11).",
)
class DawidSkene(_EMBase):
    """Dawid–Skene EM.  ``confusion_[w]`` has rows = true class, columns = reported label (sums to 1 per row).

    Parameters: ``smoothing`` (Dirichlet pseudo-count, 0 = plain ML), ``estimate_priors``, ``init`` ('mv' or
    posteriors), ``tol`` (relative log-likelihood change), ``max_iter``.  Gold labels passed to ``fit`` via
    ``true_labels=`` are clamped.
    """


@register(
    "ds1",
    summary="One-coin Dawid–Skene: one accuracy per annotator, errors spread evenly over other labels.",
    family="dawid_skene",
    params=_EM_PARAMS,
    reference="One-coin model (e.g. Zhang et al. 2014); EM as Traganitis & Giannakis §3.1 with Γ_w = a_w I + (1−a_w)/(K−1)(11ᵀ−I).",
)
class OneCoinDawidSkene(_EMBase):
    """One-coin Dawid–Skene: ``Γ_w[k, k] = a_w``, ``Γ_w[k, l] = (1 − a_w)/(K − 1)`` for l ≠ k.

    Far fewer parameters than full DS, which helps on sparse crowds where most workers answer a handful
    of items.  M-step: ``a_w`` = expected fraction of worker w's responses that are correct.
    """

    one_coin = True

    def __init__(
        self,
        smoothing: float = 0.0,
        estimate_priors: bool = False,
        init="mv",
        tol: float = 1e-7,
        max_iter: int = 500,
        anneal=False,
        n_restarts: int = 0,
        random_state: int = 0,
    ):
        # Equal priors by default (ZenCrowd's one-coin model): with estimated priors the one-coin model
        # can explain asymmetric workers by a collapsed prior (bluebirds: prior 0.97/0.03, accuracy 0.58).
        super().__init__(smoothing, estimate_priors, init, tol, max_iter, anneal, n_restarts, random_state)
