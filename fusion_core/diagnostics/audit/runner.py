""":func:`run_audit`: the recommended method, agreement and the cartel check in one call, with progress and an
estimate of the time left."""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd
from threadpoolctl import threadpool_limits

from fusion_core import progress as progress_events
from fusion_core.data.dataset import Dataset
from fusion_core.data.responses import Responses, as_responses
from fusion_core.diagnostics.agreement import AGREEMENT_STATISTICS, agreement_intervals
from fusion_core.diagnostics.audit.evidence import accuracy_evidence
from fusion_core.diagnostics.audit.items import DEFAULT_REVIEW, label_quality, review_items
from fusion_core.diagnostics.audit.latent_scale import level_ranks
from fusion_core.diagnostics.audit.patterns import label_patterns
from fusion_core.diagnostics.audit.ratings import check_label_type, rating_verdicts_for
from fusion_core.diagnostics.audit.reference import reference_bounds
from fusion_core.diagnostics.audit.result import (
    AnnotatorVerdicts,
    AuditProgress,
    AuditResult,
    CartelCheck,
    StageTime,
)
from fusion_core.diagnostics.audit.rules import DEFAULT_RULE, decide
from fusion_core.diagnostics.audit.safety import label_safety
from fusion_core.diagnostics.audit_options import audit_options, declared_options
from fusion_core.diagnostics.cartels.collusion import DEFAULTS as COLLUSION
from fusion_core.diagnostics.cartels.collusion import check_collusion
from fusion_core.diagnostics.drift import drift_for_audit
from fusion_core.diagnostics.pairwise_audit import pairwise_audit
from fusion_core.diagnostics.plan import audit_plan
from fusion_core.diagnostics.reliability import ReliabilityEstimate
from fusion_core.errors import UserInputError
from fusion_core.methods import create, info
from fusion_core.methods.results import FitResult

STAGES = (("fit", 0.3), ("agreement", 0.1), ("cartel", 0.55), ("verdicts", 0.05))
"""The audit's stages and their rough shares of its time on binary labels (measured on the demo crowd and on 100k
simulated responses: the cartel check dominates); without the cartel test (more than two labels) its share goes
to the others.  The time left is extrapolated from the elapsed time and the share done."""


def _stages(binary: bool) -> tuple[tuple[str, float], ...]:
    if binary:
        return STAGES
    rest = sum(w for n, w in STAGES if n != "cartel")
    return tuple((n, 0.0 if n == "cartel" else w / rest) for n, w in STAGES)


Listener = Callable[[AuditProgress], None]
_now = time.perf_counter
"""The audit's clock (tests replace it to check the time-left estimate independently of the machine's speed)."""
FALLBACK = "ds"
"""The method the audit falls back to when ``auto`` cannot hold responses out (tiny data): Dawid–Skene."""


class _Clock:
    """Turns stage-local progress into a never-decreasing share of the whole audit and a time-left estimate."""

    def __init__(self, listener: Listener | None) -> None:
        self.listener = listener
        self.start = _now()
        self.done = 0.0
        self.fraction = 0.0
        self.times: list[StageTime] = []
        self._stage_start = self.start

    def tell(self, stage: str, local: float, weight: float) -> None:
        f = min(max(self.done + weight * min(max(local, 0.0), 1.0), self.fraction), 1.0)
        self.fraction = f
        if self.listener is None:
            return
        elapsed = _now() - self.start
        if f >= 1.0:
            left: float | None = 0.0
        else:  # no estimate from the first few percent or the first 0.2 s: it would jump around
            left = elapsed * (1.0 - f) / f if f >= 0.03 and elapsed >= 0.2 else None
        self.listener(AuditProgress(stage, f, elapsed, left))

    def finish(self, name: str, weight: float, seconds: float | None = None) -> None:
        """End stage ``name``: its time is the time since the previous stage ended, or ``seconds`` for a stage that
        ran alongside the others (in the background thread)."""
        now = _now()
        self.times.append(StageTime(name, now - self._stage_start if seconds is None else seconds))
        self._stage_start = now
        self.done = min(self.done + weight, 1.0)


def _fit_listener(clock: _Clock, weight: float, expected_runs: int) -> Callable[[progress_events.Progress], None]:
    """Progress inside the fit: each new (stage) name is one more EM run; the share is runs done of those expected."""
    seen: dict[str, None] = {}

    def listen(p: progress_events.Progress) -> None:
        seen.setdefault(p.stage, None)
        n = max(expected_runs, len(seen))
        local = (len(seen) - 1 + p.fraction) / n
        clock.tell(f"Fitting the recommended model (fit {len(seen)} of about {n})", min(local, 0.97), weight)

    return listen


def _cartel_listener(
    clock: _Clock, weight: float, expected_tests: int = 3
) -> Callable[[progress_events.Progress], None]:
    """Progress inside the cartel check: a bootstrap test per group tested; a test starts when its share drops."""
    state = {"tests": 0, "last": 1.0}

    def listen(p: progress_events.Progress) -> None:
        if p.fraction <= state["last"]:
            state["tests"] += 1
        state["last"] = p.fraction
        n = max(expected_tests, int(state["tests"]))
        local = (state["tests"] - 1 + p.fraction) / n
        clock.tell(f"Checking for dependent groups (bootstrap test {int(state['tests'])})", min(local, 0.97), weight)

    return listen


def _expected_runs(method: str, params: Mapping[str, Any]) -> int:
    if method != "auto":
        return 1
    est = create("auto", **params)
    n = len(est.candidates) if est.candidates is not None else 5
    return n * int(est.n_splits) + 2


def _fit(resp: Responses, method: str, params: Mapping[str, Any], fit_kwargs: Mapping[str, Any]) -> FitResult:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return create(method, **params).fit(resp, **fit_kwargs).result_


def describe_method(fit: FitResult) -> str:
    """What the audit's labels come from, in plain words."""
    if fit.selection is None:
        return f"method {fit.method}"
    members = fit.selection.members or (fit.selection.chosen,)
    chosen = (
        f"the average of {', '.join(members)} (they predict held-out responses equally well)"
        if len(members) > 1
        else members[0]
    )
    return f"the recommended method ({fit.method}) chose {chosen}; criterion: {fit.selection.criterion}"


def _cartel(
    resp: Responses, n_bootstrap: int, alpha: float, random_state: int | None, max_annotators: int
) -> CartelCheck:
    if resp.n_classes != 2:
        return CartelCheck(
            "could_not_run",
            f"the cartel check compares annotators on two labels; these data have {resp.n_classes}. Run it one "
            "label against the rest on the Cartels page.",
        )
    note = ""
    if resp.n_workers > max_annotators:  # the test's cost grows fast with the annotators analysed
        top = np.argsort(-resp.responses_per_worker, kind="stable")[:max_annotators]
        keep = np.isin(resp.worker, top)
        note = (
            f" The audit tested the {max_annotators} most active of {resp.n_workers:,} annotators "
            f"({keep.mean():.0%} of the responses); the Cartels page can test them all."
        )
        resp = resp.subset(keep)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            # the one collusion check of every front end (docs/AUDIT.md "Collusion"): the detector's proposals
            # (same_sign, majority-vote labels) kept only when they agree beyond their skills on answers the rest of
            # the crowd rejects; near-chance annotators are spammers, not members
            check = check_collusion(
                resp, replace(COLLUSION, n_bootstrap=n_bootstrap, alpha=alpha), random_state=random_state
            )
    except UserInputError as exc:
        return CartelCheck("could_not_run", str(exc).rstrip(".") + "." + note)
    rep = check.confirmed()
    return CartelCheck(rep.status, rep.reason.rstrip(".") + "." + note, check.groups, rep, check.kinds)


Agreement = tuple[tuple[ReliabilityEstimate, ...], str, float]


def _agreement(resp: Responses, n_bootstrap: int, level: float, random_state: int | None) -> Agreement:
    """Every registered agreement statistic with its interval (or why not), and the seconds they took.  Uses its own
    random stream and neither the warnings machinery nor progress reports, so it can run in the background thread
    (see :func:`_background`)."""
    t0 = _now()
    try:
        estimates = agreement_intervals(resp, n_bootstrap=n_bootstrap, level=level, random_state=random_state)
    except UserInputError as exc:
        return (), str(exc), _now() - t0
    return estimates, "", _now() - t0


class _Later:
    """``fn(*args)`` run when its result is asked for (the sequential audit's stand-in for a future)."""

    def __init__(self, fn: Callable[..., Any], *args: Any) -> None:
        self.fn, self.args = fn, args

    def result(self) -> Any:
        return self.fn(*self.args)


@contextmanager
def _background(concurrent: bool) -> Iterator[Callable[..., Future[Any] | _Later]]:
    """``submit(fn, *args)``: ``fn`` runs in one background thread while the caller goes on (``concurrent``), or
    in the caller's thread when its ``result()`` is asked for.  Only work that needs no progress reports (a new
    thread does not inherit the listener's context variable, so its reports go nowhere) and no
    ``warnings.catch_warnings`` goes there: the warnings filters and the recording hook are global to the process
    (Python ≤ 3.13), so a fit and the cartel check (which record their warnings) in two threads would swap each
    other's warnings and could leave the filters changed.  numpy, BLAS and the compiled kernels release the GIL, so
    the two threads can use both cores; BLAS runs single-threaded meanwhile, so they do not oversubscribe them."""
    if not concurrent:
        yield _Later
        return
    with threadpool_limits(limits=1, user_api="blas"), ThreadPoolExecutor(1, "fusion-audit") as pool:
        yield pool.submit


def _gold_hits(gold: pd.Series | None, items: pd.Index, labels: pd.Index) -> tuple[int, int] | None:
    if gold is None:
        return None
    g = gold.reindex(items)
    known = g.notna().to_numpy()
    hits = int((g.astype(str).to_numpy()[known] == labels.astype(str).to_numpy()[known]).sum())
    return hits, int(known.sum())


@declared_options
def run_audit(data: Dataset | Responses | pd.DataFrame, **options: Any) -> AuditResult:
    """Audit categorical crowd labels in one call (docs/AUDIT.md).

    Fits ``method`` (default ``auto``, the recommended method; pass ``fit`` to reuse a fit of these data), then
    Fleiss' κ and Krippendorff's α with ``n_bootstrap`` item-bootstrap intervals, the cartel check
    (``cartel_bootstrap`` replicates at level ``cartel_alpha``; binary labels; on the ``cartel_max_annotators``
    most active annotators, since the test's cost grows fast with the annotators analysed), and decides a verdict per annotator
    by ``rule``.  ``progress`` receives :class:`AuditProgress` events (share done, time left).
    ``label_type`` ``ordinal`` (``levels`` lowest first, or ``"numeric"``, the default for numeric labels) or
    ``numeric`` adds the rating verdicts (reliable / harsh / lenient / noisy / near chance) from bias and noise
    with ``rating_bootstrap`` refits (:mod:`.ratings`) as ``AuditResult.ratings``.  A dataset of pairwise
    judgements (:func:`~fusion_core.data.dataset.pairwise_dataset`) also gets the pairwise audit (ranking with at
    most 100 bootstrap refits, judges' biases, win rates corrected with ``pairwise_gold`` when given) as
    ``AuditResult.pairwise``.
    ``concurrent``: the agreement intervals run in a background thread alongside the fit and the cartel check
    (same result as ``concurrent=False``, which runs every stage in turn).  Deterministic given ``random_state``.
    """
    o = audit_options(
        options
    )  # every option checked against its declaration (diagnostics.audit_options), before any work
    method, fit, random_state = o["method"], o["fit"], o["random_state"]
    rule, review = o["rule"] or DEFAULT_RULE, o["review"] or DEFAULT_REVIEW
    n_bootstrap, cartel_bootstrap, cartel_alpha = o["n_bootstrap"], o["cartel_bootstrap"], o["cartel_alpha"]
    label_type, rating_bootstrap, progress = o["label_type"], o["rating_bootstrap"], o["progress"]
    pairwise_gold = o["pairwise_gold"]
    ds = data if isinstance(data, Dataset) else None
    resp = ds.responses if ds is not None else as_responses(data)
    levels = check_label_type(resp, label_type, o["levels"])  # before any fitting
    params = dict(o["params"] or {})
    clock = _Clock(progress)
    stages = _stages(resp.n_classes == 2)
    notes: list[str] = []

    with _background(o["concurrent"]) as submit:
        # agreement needs neither the fit nor the cartel check: it runs alongside them
        agreement = submit(_agreement, resp, n_bootstrap, rule.level, random_state)
        (name, weight) = stages[0]
        clock.tell("Fitting the recommended model", 0.0, weight)
        if fit is None:
            fit_kwargs = {} if ds is None else ds.fit_inputs(info(method).needs())
            with progress_events.progress_to(_fit_listener(clock, weight, _expected_runs(method, params))):
                try:
                    fit = _fit(resp, method, params, fit_kwargs)
                except UserInputError as exc:
                    if method != "auto":
                        raise
                    # too little data to compare methods on held-out responses: Dawid–Skene, the usual default
                    fit = _fit(resp, FALLBACK, {}, {})
                    notes.append(
                        f"The recommended method could not compare methods ({exc}); the audit used {FALLBACK}."
                    )
        clock.finish(name, weight)

        (name, weight) = stages[2]
        clock.tell("Checking for dependent groups (copies or collusion)", 0.0, weight)
        with progress_events.progress_to(_cartel_listener(clock, weight)):
            cartel = _cartel(resp, cartel_bootstrap, cartel_alpha, random_state, o["cartel_max_annotators"])
        clock.finish(name, weight)

        (name, weight) = stages[1]
        clock.tell(f"Measuring agreement ({', '.join(e.title for e in AGREEMENT_STATISTICS)})", 0.0, weight)
        agreement_estimates, agreement_note, agreement_seconds = agreement.result()
        clock.finish(name, weight, agreement_seconds)
        clock.times.insert(1, clock.times.pop())  # listed in the stages' order: fit, agreement, cartel, verdicts

    (name, weight) = stages[3]
    clock.tell("Deciding verdicts", 0.0, weight)
    evidence = accuracy_evidence(
        resp, fit.posterior, fit.class_prior, level=rule.level, confusion=fit.confusion, chance_band=rule.chance_band
    )
    members = cartel.members
    in_cartel = np.array([str(w) in members for w in resp.workers], dtype=bool)
    majority = _fit(resp, "mv", {}, {}).label_codes
    codes = np.asarray(fit.label_codes, dtype=np.int64)
    # ordered levels (declared, or three or more numbers) add the latent-scale model of graded labels (.latent_scale)
    safety = label_safety(resp, fit, codes, majority, rule.level, ranks=level_ranks(resp, label_type, levels))
    # flags must hold against the plausible references (alternatives averaged, the honest range's low end): .reference
    bounds = reference_bounds(resp, fit, evidence, safety.accuracy, rule.flag_probability)
    # labels that are a swap of the crowd's carry information: "swaps labels", not "near chance" (.patterns)
    patterns = label_patterns(
        resp,
        fit.posterior,
        class_prior=fit.class_prior,
        confusion=fit.confusion,
        n_effective=evidence.n_effective,
        level=rule.level,
    )
    verdict, reason = decide(
        evidence.skill,
        evidence.skill_low,
        evidence.skill_high,
        evidence.n_shared,
        in_cartel,
        rule=rule,
        n_effective=evidence.n_effective,
        p_near=evidence.p_near_chance,
        p_worse=evidence.p_worse,
        robust_p_near=bounds.p_near,
        robust_p_worse=bounds.p_worse,
        robust_skill=bounds.skill,
        robust_why=bounds.why(),
        prior_near=evidence.prior_near_chance,
        robust_prior_near=bounds.prior_near,
        relabelled_low=patterns.relabelled_low,
        swap_words=patterns.swap_words(),
        top_words=patterns.top_words(),
    )
    gold = ds.gold if ds is not None else None
    quality = label_quality(fit.posterior, codes, rule.level, _gold_hits(gold, resp.items, resp.classes.take(codes)))
    items = review_items(resp, fit.posterior, codes, majority, review)
    ratings = None
    if label_type != "nominal":
        clock.tell(f"Rating verdicts ({rating_bootstrap} bootstrap refits)", 0.5, weight)
        ratings = rating_verdicts_for(
            resp, label_type, levels=levels, n_bootstrap=rating_bootstrap, random_state=random_state, fit=fit
        )
    pairwise = None
    if ds is not None and ds.pairwise is not None:
        clock.tell("Ranking the options and auditing the judges (pairwise)", 0.8, weight)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            pairwise = pairwise_audit(
                ds.pairwise, gold=pairwise_gold, n_bootstrap=min(n_bootstrap, 100), random_state=random_state
            )
    clock.finish(name, weight)
    clock.tell("Audit done", 1.0, 0.0)
    return AuditResult(
        dataset=ds.name if ds is not None else "responses",
        description=ds.description if ds is not None else "",
        n_responses=int(resp.n_responses),
        n_items=int(resp.n_items),
        n_workers=int(resp.n_workers),
        classes=pd.Index(resp.classes),
        fit=fit,
        method=describe_method(fit),
        annotators=AnnotatorVerdicts(
            evidence, verdict, reason, rule, ds.roles if ds is not None else None, p_near_chance=bounds.p_near
        ),
        labels=quality,
        review=items,
        agreement=agreement_estimates,
        agreement_note=agreement_note,
        cartel=cartel,
        timings=tuple(clock.times),
        wall=_now() - clock.start,
        warnings=tuple(dict.fromkeys([*fit.warnings, *notes])),
        label_type=label_type,
        ratings=ratings,
        safety=safety,
        plan=audit_plan(resp, fit),
        drift=drift_for_audit(resp, fit.posterior, random_state),
        pairwise=pairwise,
    )
