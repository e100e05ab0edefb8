"""Numeric truth inference (continuous ratings, counts, coordinates): per-annotator bias and noise.

Model (the additive-bias, per-rater-variance model of continuous crowd ratings, e.g. Raykar et al. 2010 §4;
Welinder & Perona 2010): item i has a true value μ_i ~ N(m, τ²) and annotator j reports

    x_ij = μ_i + b_j + ε_ij,   ε_ij ~ N(0, σ_j²)                        (noise="gaussian")
    ε_ij ~ Student-t_ν(0, σ_j²) = N(0, σ_j²/u_ij), u_ij ~ Gamma(ν/2, ν/2)  (noise="student-t", robust)

Identifiability: a common shift of every bias is a shift of every true value, so the biases are centred after
each M-step: the mean bias of the ``reference`` annotators' responses (default: all responses) is 0, i.e.
Σ_j n_j b_j = 0 with n_j the responses of annotator j (an annotator with one wild response barely moves it).

EM through the shared driver with latent μ (and u).  Gaussian: the E-step is the exact Gaussian posterior of
μ_i (precision 1/τ² + Σ_j 1/σ_j², so the interval comes with it) and the objective is the exact marginal
log-likelihood.  Student-t: mean-field variational EM (q(μ_i) Gaussian, q(u_ij) Gamma with E[u] =
(ν + 1)/(ν + ((x − μ̂ − b)² + v)/σ²), the classic down-weighting of outlying responses); the objective is the
evidence lower bound, which every step increases.  M-step: b_j the weighted mean residual of annotator j,
σ_j² = (Σ E[u](residual² + v_i) + ν₀ s₀²)/(n_j + ν₀) with an inverse-gamma prior worth ν₀ = ``prior_strength``
pseudo-responses at the crowd's typical noise s₀² (keeps annotators with one or two responses from σ → 0),
m and τ² from the posterior moments.  Everything is vectorised with ``bincount`` over responses.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any, NamedTuple, Self

import numpy as np
import pandas as pd
from scipy.special import digamma, gammaln, ndtri

from fusion_core.data.numeric import NumericResponses, as_numeric_responses
from fusion_core.errors import AggregationWarning, UserInputError
from fusion_core.methods.em import EMRun, EMSettings, EStep, run_em
from fusion_core.methods.params import Choice, Declared, Float, Int, Object

_LOG_2PI = float(np.log(2 * np.pi))


@dataclass(frozen=True)
class NumericFit:
    """What :class:`NumericTruth` estimates, with the user's ids.

    ``truth`` (posterior mean of each item's true value), ``sd`` (posterior sd), ``interval_low`` /
    ``interval_high`` (central interval at ``level``: truth ± z·sd) are Series by task; ``bias`` (> 0: reports
    too high) and ``noise`` (σ_j, the sd of the annotator's errors) are Series by worker, in the data's units;
    ``response_weight`` (robust noise only) is E[u] per response in the order of the :class:`NumericResponses`
    (1 = an ordinary response, near 0 = treated as an outlier); ``truth_mean`` / ``truth_sd`` are m and τ of the
    prior on true values.  ``log_likelihood`` is the EM objective trace (marginal log-likelihood, or its lower
    bound for the robust model).
    """

    truth: pd.Series
    sd: pd.Series
    interval_low: pd.Series
    interval_high: pd.Series
    level: float
    bias: pd.Series
    noise: pd.Series
    response_weight: np.ndarray | None
    truth_mean: float
    truth_sd: float
    noise_model: str
    log_likelihood: list[float]
    n_iter: int
    converged: bool
    warnings: tuple[str, ...] = ()

    def items_frame(self) -> pd.DataFrame:
        """One row per task: truth, sd, interval_low, interval_high."""
        return pd.DataFrame(
            {"truth": self.truth, "sd": self.sd, "interval_low": self.interval_low, "interval_high": self.interval_high}
        )

    def annotators_frame(self) -> pd.DataFrame:
        """One row per worker: bias and noise."""
        return pd.DataFrame({"bias": self.bias, "noise": self.noise})


class NumericState(NamedTuple):
    """Model parameters: prior mean/variance of true values, bias and noise variance per annotator, and the Gamma
    rate of q(u) per response (None for Gaussian noise)."""

    mean: float
    spread: float
    bias: np.ndarray
    noise_var: np.ndarray
    rate: np.ndarray | None


@dataclass
class NumericModel:
    """The bias–noise model for the EM driver (module docstring)."""

    resp: NumericResponses
    df: float | None  # Student-t degrees of freedom ν, None for Gaussian noise
    prior_strength: float
    typical_var: float  # s₀²
    reference: np.ndarray  # bool per worker: the annotators whose mean bias is 0

    def u_moments(self, state: NumericState) -> tuple[np.ndarray, np.ndarray]:
        """E[u] and E[log u] per response (1 and 0 for Gaussian noise)."""
        if state.rate is None or self.df is None:
            return np.ones(self.resp.n_responses), np.zeros(self.resp.n_responses)
        a = (self.df + 1) / 2
        return a / state.rate, digamma(a) - np.log(state.rate)

    def e_step(self, state: NumericState, temperature: float = 1.0) -> EStep:
        r = self.resp
        w, lw = self.u_moments(state)
        prec_r = w / state.noise_var[r.worker]
        prec = 1.0 / state.spread + np.bincount(r.item, weights=prec_r, minlength=r.n_items)
        mu = (
            state.mean / state.spread + np.bincount(r.item, prec_r * (r.value - state.bias[r.worker]), r.n_items)
        ) / prec
        v = 1.0 / prec
        resid2 = (r.value - mu[r.item] - state.bias[r.worker]) ** 2 + v[r.item]
        obs = -0.5 * (_LOG_2PI + np.log(state.noise_var[r.worker]) - lw + w * resid2 / state.noise_var[r.worker])
        items = -0.5 * (_LOG_2PI + np.log(state.spread)) - ((mu - state.mean) ** 2 + v) / (2 * state.spread)
        entropy = 0.5 * (_LOG_2PI + 1.0 + np.log(v))
        elbo = float(obs.sum() + items.sum() + entropy.sum()) + self.log_prior(state)
        if state.rate is not None and self.df is not None:
            elbo += self._u_terms(state.rate, w, lw)
        return EStep(posterior=np.column_stack([mu, v]), log_likelihood=elbo, stats=(mu, v, state))

    def _u_terms(self, rate: np.ndarray, w: np.ndarray, lw: np.ndarray) -> float:
        """E_q[log p(u)] + H[q(u)] summed over responses (q(u) = Gamma(a, rate), p(u) = Gamma(ν/2, ν/2))."""
        nu = float(self.df or 0.0)
        a = (nu + 1) / 2
        log_p = nu / 2 * np.log(nu / 2) - gammaln(nu / 2) + (nu / 2 - 1) * lw - nu / 2 * w
        entropy = a - np.log(rate) + gammaln(a) + (1 - a) * digamma(a)
        return float((log_p + entropy).sum())

    def log_prior(self, state: NumericState) -> float:
        """Inverse-gamma prior on each σ_j² worth ν₀ pseudo-responses at s₀² (up to a constant)."""
        nu0 = self.prior_strength
        return float(-0.5 * nu0 * (np.log(state.noise_var) + self.typical_var / state.noise_var).sum())

    def m_step(self, stats: tuple[np.ndarray, np.ndarray, NumericState]) -> NumericState:
        mu, v, previous = stats
        r = self.resp
        w, _ = self.u_moments(previous)
        wsum = np.bincount(r.worker, weights=w, minlength=r.n_workers)
        bias = np.bincount(r.worker, w * (r.value - mu[r.item]), r.n_workers) / np.maximum(wsum, 1e-300)
        resid2 = (r.value - mu[r.item] - bias[r.worker]) ** 2 + v[r.item]
        nu0 = self.prior_strength
        ss = np.bincount(r.worker, w * resid2, r.n_workers) + nu0 * self.typical_var
        noise_var = np.maximum(ss / (r.responses_per_worker + nu0), 1e-12 * self.typical_var)
        mean = float(mu.mean())
        spread = max(float(((mu - mean) ** 2 + v).mean()), 1e-12 * self.typical_var)
        rate = None
        if self.df is not None:  # q(u) for the new parameters (coordinate ascent on the bound)
            rate = (self.df + resid2 / noise_var[r.worker]) / 2
        n = r.responses_per_worker[self.reference]
        shift = float(bias[self.reference] @ n / max(n.sum(), 1))  # identifiability: the likelihood is unchanged
        return NumericState(mean + shift, spread, bias - shift, noise_var, rate)

    def start(self) -> NumericState:
        """Item medians as first truth, then one M-step (robust weights from the residuals about the medians)."""
        r = self.resp
        med = item_medians(r)
        state0 = NumericState(0.0, 1.0, np.zeros(r.n_workers), np.full(r.n_workers, self.typical_var), None)
        if self.df is not None:
            resid2 = (r.value - med[r.item]) ** 2
            state0 = state0._replace(rate=(self.df + resid2 / self.typical_var) / 2)
        return self.m_step((med, np.zeros(r.n_items), state0))


def item_medians(resp: NumericResponses) -> np.ndarray:
    """Median of each item's values (vectorised: sort by item then value, average the middle pair)."""
    order = np.lexsort((resp.value, resp.item))
    vals = resp.value[order]
    n = resp.responses_per_item
    start = np.concatenate([[0], np.cumsum(n)[:-1]])
    safe = np.maximum(n, 1)
    lo = vals[np.minimum(start + (safe - 1) // 2, len(vals) - 1)]
    hi = vals[np.minimum(start + safe // 2, len(vals) - 1)]
    return np.where(n > 0, (lo + hi) / 2, np.nan)


def typical_noise_var(resp: NumericResponses) -> float:
    """s₀²: a robust pooled error variance, (1.4826 · median |x − item median|)² on items with ≥ 2 responses,
    corrected for the median's own spread; a tiny positive number when every item's values agree."""
    med = item_medians(resp)
    n = resp.responses_per_item[resp.item]
    multi = n >= 2
    if multi.any():
        dev = np.abs(resp.value[multi] - med[resp.item[multi]])
        s = 1.4826 * float(np.median(dev)) * float(np.sqrt(np.mean(n[multi] / (n[multi] - 1))))
        if s > 0:
            return s**2
    spread = float(np.var(resp.value))
    return spread * 1e-4 if spread > 0 else 1e-8


# ------------------------------------------------------------------------------------------ estimator
def _check_reference(value: Any) -> Any:
    if value is None:
        return value
    if isinstance(value, (list, tuple, pd.Index, np.ndarray)) and len(value) >= 1:
        return value
    raise ValueError("None (the average annotator) or a non-empty list of annotator ids")


class NumericTruth(Declared):
    """True value per item, and each annotator's bias and noise, from numeric ratings (module docstring).

    ``fit`` takes a :class:`~fusion_core.data.numeric.NumericResponses` or a long table ``task, worker, value``
    and sets ``result_`` (:class:`NumericFit`), ``truth_`` (Series by task), ``bias_`` and ``noise_`` (Series
    by worker).  ``noise='student-t'`` is the robust variant: a response far from the others is down-weighted
    (its weight is in ``result_.response_weight``) instead of pulling the truth and its annotator's bias.

    Examples
    --------
    >>> from fusion_core.simulate.ratings import numeric_ratings
    >>> sim = numeric_ratings(n_items=300, n_workers=12, seed=0)
    >>> m = NumericTruth().fit(sim.responses)
    >>> err = m.truth_ - sim.truth.reindex(m.truth_.index)
    >>> naive = sim.responses.groupby("task")["value"].mean() - sim.truth
    >>> bool((err**2).mean() < (naive**2).mean())
    True
    >>> bool(m.bias_.corr(sim.bias) > 0.95)
    True
    """

    params = {
        "noise": Choice(
            "gaussian",
            ("gaussian", "student-t"),
            help="Error model: 'gaussian', or 'student-t' (robust: outlying responses are down-weighted).",
        ),
        "df": Float(
            4.0, low=1.0, high=1000.0, help="Degrees of freedom ν of the Student-t noise (smaller = heavier tails)."
        ),
        "reference": Object(
            None,
            help="Annotators whose responses are unbiased on average (e.g. experts); None: all responses.",
            text="None or a non-empty list of annotator ids",
            check=_check_reference,
        ),
        "prior_strength": Float(
            1.0,
            low=0.0,
            high=1000.0,
            advanced=True,
            help="Pseudo-responses pulling each annotator's noise towards the crowd's typical noise.",
        ),
        "level": Float(0.95, low=0.0, high=1.0, low_open=True, high_open=True, help="Coverage of the intervals."),
        "tol": Float(1e-9, low=0.0, high=1.0, help="Stop when the relative change of the objective is below tol."),
        "max_iter": Int(1000, low=1, high=100_000, help="Maximum EM iterations."),
    }

    def fit(self, data: NumericResponses | pd.DataFrame) -> Self:
        """Estimate true values, biases and noise levels; returns ``self``."""
        self.validated_params()
        resp = as_numeric_responses(data)
        model = NumericModel(
            resp,
            float(self.df) if self.noise == "student-t" else None,
            float(self.prior_strength),
            typical_noise_var(resp),
            self._reference_mask(resp),
        )
        settings = EMSettings(tol=float(self.tol), max_iter=int(self.max_iter), name="numeric truth EM")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", AggregationWarning)
            run = run_em(model, model.start(), settings)
        notes = tuple(dict.fromkeys(str(w.message) for w in caught if issubclass(w.category, AggregationWarning)))
        for w in caught:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        self.responses_ = resp
        self.result_ = _numeric_fit(model, run, level=float(self.level), notes=notes)
        self.truth_ = self.result_.truth
        self.bias_ = self.result_.bias
        self.noise_ = self.result_.noise
        return self

    def fit_predict(self, data: NumericResponses | pd.DataFrame) -> pd.Series:
        return self.fit(data).truth_

    def _reference_mask(self, resp: NumericResponses) -> np.ndarray:
        if self.reference is None:
            return np.ones(resp.n_workers, dtype=bool)
        ids = pd.Index(list(self.reference))
        codes = resp.workers.get_indexer(ids)
        if (codes < 0).any():
            codes = np.where(codes < 0, pd.Index(resp.workers.astype(str)).get_indexer(ids.astype(str)), codes)
        if (codes < 0).any():
            raise UserInputError(
                f"reference annotators {[str(x) for x in ids[codes < 0]][:5]} gave no responses; name annotators "
                "that occur in the worker column."
            )
        mask = np.zeros(resp.n_workers, dtype=bool)
        mask[codes] = True
        return mask


def _numeric_fit(model: NumericModel, run: EMRun[NumericState], *, level: float, notes: tuple[str, ...]) -> NumericFit:
    resp, state = model.resp, run.state
    mu, v = run.posterior[:, 0], run.posterior[:, 1]
    sd = np.sqrt(v)
    z = float(ndtri(0.5 + level / 2))
    tasks = pd.Index(resp.items, name="task")
    workers = pd.Index(resp.workers, name="worker")
    weight = model.u_moments(state)[0] if state.rate is not None else None
    return NumericFit(
        truth=pd.Series(mu, index=tasks, name="truth"),
        sd=pd.Series(sd, index=tasks, name="sd"),
        interval_low=pd.Series(mu - z * sd, index=tasks, name="interval_low"),
        interval_high=pd.Series(mu + z * sd, index=tasks, name="interval_high"),
        level=level,
        bias=pd.Series(state.bias, index=workers, name="bias"),
        noise=pd.Series(np.sqrt(state.noise_var), index=workers, name="noise"),
        response_weight=weight,
        truth_mean=float(state.mean),
        truth_sd=float(np.sqrt(state.spread)),
        noise_model="gaussian" if model.df is None else "student-t",
        log_likelihood=[float(x) for x in run.log_likelihood],
        n_iter=int(run.n_iter),
        converged=bool(run.converged),
        warnings=notes,
    )
