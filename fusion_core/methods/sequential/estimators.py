"""Sequence-aware estimators: ``hmm-em`` (Alg. 2 + Alg. 1), ``hmm-mm`` (Alg. 2) and ``hmm-mv`` (MV + Alg. 1).

Traganitis & Giannakis §4 and App. A, spec ``sequential-networked.md`` §2.3 with its [FIX]es (transition
``T[next, prev]``, lagged moments never across sequences, the n = 1 emission in the joint (19)).  [OURS]: the
Dawid–Skene start, ``init='best'`` (the start with the highest log-likelihood after a short Baum–Welch run),
the annotator-Markov emission and ``emission='auto'`` (see :mod:`.emission`, :mod:`.selection`).
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import pandas as pd

from fusion_core.data.responses import Responses
from fusion_core.errors import UserInputError
from fusion_core.methods.base import Aggregator, Gold
from fusion_core.methods.em import EMRun
from fusion_core.methods.moment_matching import MM_PARAMS, mm_settings
from fusion_core.methods.params import Choice, Float, Int, Param, Seed
from fusion_core.methods.registry import register
from fusion_core.methods.results import Fit, FitResult, Restarts, SequenceModel
from fusion_core.methods.sequential.emission import ResponseContext, context_subset, previous_own_label
from fusion_core.methods.sequential.inference import SequenceLayout, layout_from_responses
from fusion_core.methods.sequential.model import HMMState, baum_welch, evaluate, hmm_viterbi
from fusion_core.methods.sequential.selection import select_emission
from fusion_core.methods.sequential.starts import ds_posterior, ds_start, mm_start, mv_start, stationary_or_mean
from fusion_core.methods.sequential.transitions import LAG_PAIRS
from fusion_core.methods.ties import argmax_ties, class_priority

INIT_STARTS = {"mm": ("mm",), "mv": ("mv",), "ds": ("ds",), "best": ("mm", "mv", "ds")}
BURN_IN = 20  # init='best': Baum–Welch iterations from every start before the best one is run to convergence

DECODE = Choice(
    "viterbi", ("viterbi", "posterior"), help="Final labels: Viterbi path (the paper) or per-token posterior argmax."
)
SMOOTHING = Float(0.01, low=0.0, high=100.0, help="Dirichlet pseudo-count on confusion and transition counts (P5).")
EM_MAX_ITER = Int(500, low=1, high=10_000, help="Maximum Baum–Welch iterations.")
EMISSION_HELP = (
    "Annotator model in Baum–Welch: independent per token (paper eq. 39), depending on the annotator's own previous "
    "label ([OURS]; errors that run over a whole span), or 'auto': the one with the higher held-out likelihood."
)
CONTEXT_PRIOR = Float(
    50.0,
    low=0.0,
    high=10_000.0,
    advanced=True,
    help="emission='markov': Dirichlet strength β pulling each previous-label row towards the annotator's overall confusion.",
)
LAG = Choice(
    "upper", LAG_PAIRS, advanced=True, help="Annotator pairs in the transition moments (22): m<m' (paper), m≠m', all."
)


def start_prob_param(default: str) -> Param:
    return Choice(
        default, ("stationary", "uniform", "estimate"), help="p0: stationary π̂, uniform, or re-estimated by EM (P7)."
    )


def tol_param(with_mm: bool) -> Param:
    extra = " (also the moment-matching tolerance on max |ΔΓ|)" if with_mm else ""
    return Float(
        1e-7,
        low=0.0,
        high=1.0,
        advanced=True,
        help=f"Baum–Welch stops when the relative change of its objective is below tol{extra}.",
    )


class SequentialBase(Aggregator):
    """Shared fitting of the HMM methods (see the subclasses).

    Fitted: ``transition_`` (DataFrame, rows = next label, columns = previous label; column-stochastic, the paper's
    ``T[k_next, k_prev]``), ``start_prob_`` (Series), ``viterbi_`` (Series by task), ``probas_`` = per-token
    forward–backward posteriors, ``labels_`` = the Viterbi path when ``decode='viterbi'`` else the posterior argmax
    (``result_.hard_labels``).  ``result_.sequence`` holds the transition matrix, p0, the Viterbi path and the
    emission used.  Gold labels (``true_labels=``) are clamped: forward–backward and Viterbi condition on them.
    """

    row_order_sensitive = True  # sums over responses in row order decided near-ties (issue 25 item 6)

    refine: ClassVar[bool] = True
    default_start: ClassVar[str] = "mm"
    emission: str = "independent"  # declared as a parameter by the methods that refine
    # declared parameters (set by the generated __init__; some only in the methods that use them)
    decode: str
    start_prob: str
    smoothing: float
    tol: float
    em_max_iter: int
    context_prior: float
    lag_pairs: str
    random_state: int | None

    def starts(self) -> tuple[str, ...]:
        return INIT_STARTS[self.default_start]

    def _bw(self) -> dict[str, Any]:
        return {
            "smoothing": float(self.smoothing),
            "start_mode": self.start_prob,
            "tol": float(self.tol),
            "max_iter": int(self.em_max_iter),
            "context_prior": float(self.context_prior),
        }

    def _fit(self, responses: Responses, *, gold: Gold | None, graph: Any, context: Any) -> Fit:
        layout = layout_from_responses(responses)
        cache: dict[int, tuple[Responses, np.ndarray]] = {}  # Dawid–Skene posteriors per response set (one fit)

        def ds_start_of(resp: Responses) -> HMMState:
            if id(resp) not in cache:
                cache[id(resp)] = (resp, ds_posterior(resp, tol=float(self.tol), gold=gold))
            return ds_start(resp, layout, cache[id(resp)][1], self.start_prob)

        emission = self.emission if self.refine else "independent"
        details: dict[str, Any] = {}
        previous = previous_own_label(responses, layout) if emission != "independent" else None
        if emission == "auto" and previous is not None:
            emission, scores = select_emission(
                responses,
                layout,
                previous,
                ds_start_of=ds_start_of,
                bw=self._bw(),
                random_state=self.random_state,
                gold=gold,
            )
            details["emission_heldout_log_likelihood"] = scores
        ctx = None
        mu = None
        if emission == "markov" and previous is not None:
            ctx = context_subset(responses, previous, np.ones(responses.n_responses, dtype=bool))
            mu = ds_start_of(responses).confusion  # one Dirichlet prior for every start
        run, restarts, start_details = self._run_starts(
            responses, layout, ctx=ctx, mu=mu, gold=gold, ds_start_of=ds_start_of
        )
        details.update(start_details, emission=emission)
        if not self.refine:  # no EM: the fit has converged when moment matching has
            run.converged = bool(details.get("mm_converged", True))
        return self._result(
            responses, layout, run, ctx=ctx, gold=gold, emission=emission, restarts=restarts, details=details
        )

    def _start(
        self, kind: str, resp: Responses, layout: SequenceLayout, gold: Gold | None, ds_start_of: Any
    ) -> tuple[HMMState, dict[str, Any]]:
        if kind == "mm":
            return mm_start(
                resp, layout, start_prob=self.start_prob, lag_pairs=self.lag_pairs, mm=mm_settings(self), gold=gold
            )
        if kind == "ds":
            return ds_start_of(resp), {}
        return mv_start(resp, layout, self.start_prob, gold), {}

    def _refine(
        self,
        resp: Responses,
        layout: SequenceLayout,
        state: HMMState,
        *,
        ctx: ResponseContext | None,
        mu: np.ndarray | None,
        gold: Gold | None,
        max_iter: int,
        warn: bool,
        name: str = "",
    ) -> EMRun[HMMState]:
        """Alg. 1 (Baum–Welch) from ``state``, or just the E-step when this method does not refine."""
        if not self.refine:
            return evaluate(resp, layout, state, gold)
        bw = {**self._bw(), "max_iter": max_iter}
        name = name or f"{self.method_name} Baum–Welch"
        return baum_welch(resp, layout, state, context=ctx, prior_mean=mu, gold=gold, name=name, warn=warn, **bw)

    def _run_starts(
        self,
        resp: Responses,
        layout: SequenceLayout,
        *,
        ctx: ResponseContext | None,
        mu: np.ndarray | None,
        gold: Gold | None,
        ds_start_of: Any,
    ) -> tuple[EMRun[HMMState], Restarts | None, dict[str, Any]]:
        """Every start of :meth:`starts`; with several, ``BURN_IN`` Baum–Welch iterations from each, the one with the
        highest observed log-likelihood log Pr(F) (ties: the earlier start) then runs to convergence."""
        starts = self.starts()
        total = int(self.em_max_iter) if self.refine else 0
        burn = min(BURN_IN, total) if len(starts) > 1 and self.refine else total
        runs: list[tuple[str, EMRun[HMMState], dict[str, Any]]] = []
        failed: dict[str, str] = {}
        for kind in starts:
            try:
                state, ex = self._start(kind, resp, layout, gold, ds_start_of)
            except UserInputError as err:
                if len(starts) == 1:
                    raise
                failed[kind] = str(err)
                continue
            run = self._refine(resp, layout, state, ctx=ctx, mu=mu, gold=gold, max_iter=burn, warn=burn == total)
            runs.append((kind, run, ex))
        if not runs:
            raise UserInputError("; ".join(failed.values()))
        scores = np.array([r.estep.stats.log_evidence for _, r, _ in runs])
        best = max(range(len(runs)), key=lambda i: scores[i])  # first of equal scores
        kind, run, ex = runs[best]
        if burn < total and not run.converged:  # short runs from every start, then the best one to convergence
            name = f"{self.method_name} Baum–Welch (after {burn} iterations from each start)"
            more = self._refine(
                resp, layout, run.state, ctx=ctx, mu=mu, gold=gold, max_iter=total - burn, warn=True, name=name
            )
            run = chain_runs(run, more)
        details = {**ex, "init_used": kind, **({"init_failed": failed} if failed else {})}
        restarts = None
        if len(starts) > 1:
            restarts = Restarts(log_likelihoods=scores, best=best, labels=tuple(k for k, _, _ in runs))
        return run, restarts, details

    def _result(
        self,
        resp: Responses,
        layout: SequenceLayout,
        run: EMRun[HMMState],
        *,
        ctx: ResponseContext | None,
        gold: Gold | None,
        emission: str,
        restarts: Restarts | None,
        details: dict[str, Any],
    ) -> Fit:
        state, post = run.state, run.posterior
        rank = class_priority(resp)
        ctx_used = ctx if state.context_confusion is not None else None
        vit = hmm_viterbi(resp, layout, state, ctx_used, gold, rank=rank)
        hard = vit.copy() if self.decode == "viterbi" else argmax_ties(post, rank)
        if state.context_confusion is not None:
            details["context_confusion"] = state.context_confusion
        return Fit(
            posterior=post,
            confusion=state.confusion,
            class_prior=stationary_or_mean(state.transition, post),
            log_likelihood=run.log_likelihood,
            n_iter=run.n_iter,
            converged=run.converged,
            hard_labels=hard,
            sequence=SequenceModel(state.transition, state.start, vit, emission=emission),
            restarts=restarts,
            details=details,
        )

    def _set_fitted(self, resp: Responses, fit: Fit, seconds: float) -> None:
        super()._set_fitted(resp, fit, seconds)
        self.transition_, self.start_prob_, self.viterbi_ = sequence_attributes(self.result_)


def chain_runs(first: EMRun[HMMState], more: EMRun[HMMState]) -> EMRun[HMMState]:
    """A run continued by ``more`` (started from ``first``'s state): traces and iteration counts concatenated."""
    return EMRun(
        state=more.state,
        estep=more.estep,
        log_likelihood=first.log_likelihood + more.log_likelihood,
        n_iter=first.n_iter + more.n_iter,
        converged=more.converged,
    )


def sequence_attributes(result: FitResult) -> tuple[pd.DataFrame, pd.Series, pd.Series]:
    """``transition_`` (next × previous), ``start_prob_`` and ``viterbi_`` from ``result.sequence``."""
    seq = result.sequence
    if seq is None or seq.viterbi is None:
        raise ValueError("a sequence model result needs its transition matrix and Viterbi path")
    classes = result.classes
    transition = pd.DataFrame(
        seq.transition, index=pd.Index(classes, name="next"), columns=pd.Index(classes, name="previous")
    )
    start = pd.Series(seq.start_prob, index=pd.Index(classes, name="label"), name="start_prob")
    vit = pd.Series(classes.take(seq.viterbi), index=result.task_index, name="label")
    return transition, start, vit


@register(
    "hmm-em",
    title="Sequence model (hidden Markov chain, EM)",
    summary="Sequence-aware EM: Baum–Welch from the best of moment-matching / majority-vote / Dawid–Skene starts, "
    "annotators modelled with their own previous label, Viterbi.",
    inputs=("sequence",),
    family="sequential",
    reference="Traganitis & Giannakis Alg. 2 + Alg. 1 (§4, App. A), with the spec's orientation [FIX]es; "
    "emission='markov' [OURS].",
)
class HMMEM(SequentialBase):
    """Alg. 2 + Alg. 1 (the default sequential method) → Viterbi.

    Defaults [OURS] (the paper's pipeline is ``init='mm', emission='independent', start_prob='stationary'``):
    ``init='best'`` runs 20 Baum–Welch iterations from the MM (Alg. 2), MV and DS starts and continues the one with
    the highest observed log-likelihood (``result_.restarts``: the starts and their log-likelihoods);
    ``emission='auto'`` picks, by held-out likelihood, between the paper's emission and 'markov' (each annotator's
    label may depend on its own previous label); ``start_prob='estimate'`` re-estimates p0 (standard Baum–Welch;
    sequences rarely start like the stationary chain, e.g. never inside an entity).  See :class:`SequentialBase`
    for the fitted attributes.

    Examples
    --------
    >>> from fusion_core.simulate.sequential import hmm_chain
    >>> sim = hmm_chain(n_sequences=30, length=20, seed=0)
    >>> est = HMMEM().fit(sim.responses)
    >>> bool((est.labels_ == sim.truth.reindex(est.labels_.index)).mean() > 0.8)
    True
    >>> est.transition_.shape
    (4, 4)
    """

    params: ClassVar[dict[str, Param]] = {
        "init": Choice(
            "best",
            tuple(INIT_STARTS),
            help="EM start: the highest-likelihood of the three (default), moment matching (the paper's Alg. 2), "
            "majority vote, or Dawid–Skene.",
        ),
        "decode": DECODE,
        "start_prob": start_prob_param("estimate"),
        "smoothing": SMOOTHING,
        "em_max_iter": EM_MAX_ITER,
        "emission": Choice("auto", ("independent", "markov", "auto"), help=EMISSION_HELP),
        "context_prior": CONTEXT_PRIOR,
        "lag_pairs": LAG,
        **MM_PARAMS,
        "tol": tol_param(with_mm=True),
    }

    init: str

    def starts(self) -> tuple[str, ...]:
        return INIT_STARTS[self.init]


@register(
    "hmm-mm",
    title="Sequence model by moments (no EM)",
    summary="Sequence-aware moment matching: MM confusions, transition matrix from lagged moments, Viterbi (no EM).",
    inputs=("sequence",),
    family="sequential",
    reference="Traganitis & Giannakis Alg. 2 (§4.2, eqs. (20)–(23)).",
)
class HMMMomentMatching(SequentialBase):
    """Alg. 2 without refinement; ``probas_`` are forward–backward posteriors under the moment-matching parameters.
    See :class:`SequentialBase` for the fitted attributes.

    Examples
    --------
    >>> from fusion_core.simulate.sequential import hmm_chain
    >>> sim = hmm_chain(n_sequences=60, length=30, seed=0)
    >>> est = HMMMomentMatching().fit(sim.responses)
    >>> bool((est.labels_ == sim.truth.reindex(est.labels_.index)).mean() > 0.7)
    True
    """

    refine = False
    params: ClassVar[dict[str, Param]] = {
        "decode": DECODE,
        "start_prob": start_prob_param("stationary"),
        "lag_pairs": LAG,
        **MM_PARAMS,
        "tol": Float(1e-7, low=0.0, high=1.0, advanced=True, help="Moment matching stops when max |ΔΓ| is below tol."),
    }


@register(
    "hmm-mv",
    title="Sequence model started from majority vote",
    summary="Sequence-aware EM from majority vote: Baum–Welch started at MV confusions and MV transitions, Viterbi.",
    inputs=("sequence",),
    family="sequential",
    reference="Traganitis & Giannakis 'MV + Alg. 1' (§4.3).",
)
class HMMMajority(SequentialBase):
    """MV + Alg. 1: Γ⁽⁰⁾, T⁽⁰⁾ from majority-vote labels, then Baum–Welch and Viterbi.  See
    :class:`SequentialBase` for the fitted attributes.

    Examples
    --------
    >>> from fusion_core.simulate.sequential import hmm_chain
    >>> sim = hmm_chain(n_sequences=30, length=20, seed=0)
    >>> est = HMMMajority().fit(sim.responses)
    >>> bool((est.labels_ == est.viterbi_).all())
    True
    """

    default_start = "mv"
    params: ClassVar[dict[str, Param]] = {
        "decode": DECODE,
        "start_prob": start_prob_param("stationary"),
        "smoothing": SMOOTHING,
        "em_max_iter": EM_MAX_ITER,
        "emission": Choice("independent", ("independent", "markov", "auto"), help=EMISSION_HELP),
        "context_prior": CONTEXT_PRIOR,
        "tol": tol_param(with_mm=False),
        "random_state": Seed(0, help="Seed of the held-out blocks of emission='auto'."),
    }
