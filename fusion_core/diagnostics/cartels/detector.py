"""Cartel detection: groups of annotators whose errors are correlated beyond the one-truth model.

P14 §Cartel (Lemma 2, Theorem 1) shows that a cartel following its own target labelling adds a second rank-one
component to the annotators' covariance.  The detector is the spec's product extension (``spectral.md`` §6.2–6.6,
[EXT]): the statistic is the top eigenvalue of the standardised residual of the rank-one fit (§6.3), its null a
parametric bootstrap of independent annotators (§6.4, :mod:`.bootstrap`); groups come from rank-two splits,
reassignment by regression evidence and merging (§6.5); the largest group is taken as honest (nothing identifies
which group is, P14); labels are recomputed without the cartel members (§6.5 step 9).

The detector flags *correlation*, not intent (spec P15): classifiers of one family or annotators sharing a
guideline look the same.  Binary labels only (the positive class is ``positive_label`` or the second label).
"""

from __future__ import annotations

import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import norm
from threadpoolctl import threadpool_limits

from fusion_core.data.responses import Responses, as_responses
from fusion_core.diagnostics.cartels.analysis import GroupAnalysis, split_group
from fusion_core.diagnostics.cartels.bootstrap import GroupTest
from fusion_core.diagnostics.cartels.report import CartelReport, CartelStatus
from fusion_core.errors import AggregationWarning, UserInputError
from fusion_core.methods.registry import create
from fusion_core.methods.spectral import (
    BinaryMatrix,
    Core,
    SparseOverlapWarning,
    pairwise_moments,
    resolve_sign,
    spectral_core,
)


@dataclass(frozen=True)
class _Settings:
    alpha: float
    n_bootstrap: int
    method: str
    n_min: int
    d_min: int
    m_min: int
    k_max: int
    n_components: int
    merge: bool
    same_sign: bool
    by_loading: bool = False


def detect_cartels(
    df_or_responses: Responses | pd.DataFrame,
    *,
    n_bootstrap: int = 200,
    alpha: float = 0.05,
    method: str = "sml",
    random_state: int | None = 0,
    positive_label: Any = None,
    n_min: int = 10,
    d_min: int = 3,
    m_min: int = 8,
    k_max: int = 3,
    n_components: int = 10,
    merge: bool = True,
    same_sign: bool = False,
    by_loading: bool = False,
) -> CartelReport:
    """Detect groups of annotators with correlated errors (spec ``spectral.md`` §6, P14 §Cartel).

    ``alpha``: test level for each component (the spec's stricter default is 0.01); ``n_bootstrap``:
    replicates of the parametric null; ``method``: registry method used for ``labels`` and
    ``labels_without_cartel``; ``n_min``/``d_min``: overlap needed for a pair / partners needed for an annotator
    to be analysed; ``m_min``/``k_max``: smallest group tested / maximum number of splits; ``same_sign``: a cartel
    only takes annotators whose loading on its factor has the sign of its core (the spec keeps both signs, §6.5
    step 3; the audit asks for agreement with the members, see ``_signed_evidence``); ``by_loading``: the
    sparse-crowd reading of §6.5 steps 6 and 8 (the audit's, :func:`_assignment_scores`): an annotator goes to the
    group on whose factor its loading is surely largest, and the main group is the one giving most responses.
    ``p_value[c]`` is the
    bootstrap p-value of the (c+1)-th largest eigenvalue of the standardised residual of the rank-one fit (index 0
    is the spec's statistic s, the evidence for a second component); every test stops at its h-th exceedance
    (Besag–Clifford, same decision as all ``n_bootstrap`` replicates: :mod:`.bootstrap`), so ``null_statistic``
    and ``null_eigenvalues`` hold the replicates drawn.  Deterministic given ``random_state``.

    Examples
    --------
    >>> from fusion_core.simulate.spectral import cartel
    >>> sim = cartel(m=40, n=400, r=0.3, pi_c=0.5, pi_range=(0.6, 0.85), xi_range=(0.7, 0.9), seed=11)
    >>> report = detect_cartels(sim.responses, n_bootstrap=50, random_state=1)
    >>> report.status, len(report.groups)
    ('groups_found', 1)
    >>> true = set(sim.group.index[sim.group != "honest"])
    >>> len(report.groups[0] & true) / len(true) > 0.9
    True
    """
    if int(n_bootstrap) < 1:
        raise UserInputError(f"n_bootstrap must be ≥ 1, got {n_bootstrap}.")
    if not 0 < alpha < 1:
        raise UserInputError(f"alpha must be between 0 and 1, got {alpha}.")
    resp = as_responses(df_or_responses)
    if resp.n_classes != 2:
        raise UserInputError(
            f"cartel detection needs binary labels; these data have {resp.n_classes} classes "
            f"{list(resp.classes)[:6]}. Recode to one class versus the rest first."
        )
    pos = 1 if positive_label is None else int(resp.label_codes([positive_label], what="positive_label")[0])
    settings = _Settings(
        float(alpha),
        int(n_bootstrap),
        method,
        n_min,
        d_min,
        m_min,
        k_max,
        n_components,
        merge,
        bool(same_sign),
        bool(by_loading),
    )
    # single-threaded BLAS: the work is thousands of small batched LAPACK/BLAS calls, for which OpenBLAS threads
    # only add synchronisation (on a loaded 2-core machine the default made the adult crowd 5–20× slower)
    with warnings.catch_warnings(record=True) as caught, threadpool_limits(limits=1, user_api="blas"):
        warnings.simplefilter("always", AggregationWarning)
        report = _detect(resp, pos, np.random.default_rng(random_state), settings)
    msgs: list[str] = []
    for w in caught:
        if issubclass(w.category, AggregationWarning):
            msgs.append(str(w.message))
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return replace(report, warnings=list(dict.fromkeys(report.warnings + msgs)))


def _note(notes: list[str], text: str) -> None:
    notes.append(text)
    warnings.warn(text, AggregationWarning, stacklevel=4)


def _detect(resp: Responses, pos: int, rng: np.random.Generator, s: _Settings) -> CartelReport:
    # annotators with responses only: a subset of a larger crowd (the audit's most active annotators) keeps every
    # id, and the m × m moments of absent annotators cost O(m²) for nothing (2,500 ids for 100 annotators)
    active = np.flatnonzero(np.bincount(resp.worker, minlength=resp.n_workers) > 0)
    with ThreadPoolExecutor(1, thread_name_prefix="fusion-cartel-prep") as pool:
        # the moments, the core and the working state on a second thread while this one fits ``method``'s labels on
        # all the data, which need none of them (only this thread records warnings: the filters are process-wide)
        prep = pool.submit(_prepare, resp, pos, active, rng, s)
        labels = create(s.method).fit(resp).labels_
        core, an = prep.result()
    if an is None:
        warnings.warn(f"cartel detection not applicable: {core.reason}.", SparseOverlapWarning, stacklevel=3)
        return _could_not_run(core.reason, labels, s, resp.classes[pos])
    m = len(an.idx)
    workers = pd.Index(resp.workers.take(active[an.idx]), name="worker")
    n_comp = int(min(s.n_components, m))
    all_g = np.arange(m)
    done: dict[str, Any] = {}

    def meanwhile() -> None:  # does not depend on the test: done while the first test's null model is fitted
        done["loadings"] = _loadings(an, workers, n_comp)

    first = an.test(all_g, n_extra=max(n_comp - 1, 1), n_spec=n_comp, sequential=True, meanwhile=meanwhile)
    if not done:
        meanwhile()
    loadings, rho = done["loadings"]
    final: list[np.ndarray] = []
    if first.p[0] < s.alpha:
        final = _split_recursively(an, first, s)
        final = _reassign(an, final, s)
        if s.merge:
            final = _merge(an, first, final, s.alpha)
    final, main_k, strength, undetermined = _main_group(an, final or [all_g], s)
    notes: list[str] = []
    membership, groups, scores = _membership(an, final, main_k, workers, s.same_sign)
    if groups:
        _main_group_caveats(notes, final, main_k, strength, m, by_loading=s.by_loading)
    status, reason = _status(first, groups, s.alpha)
    if status == "no_evidence" and first.p[0] < s.alpha:
        _note(notes, reason + ".")
    labels_wo = _labels_without(resp, labels, groups, s.method, notes)
    return CartelReport(
        status=status,
        reason=reason,
        workers=workers,
        eigenvalues=np.asarray(first.spec),
        null_eigenvalues=np.asarray(first.spec_null),
        p_value=np.asarray(first.p),
        loadings=loadings,
        groups=groups,
        membership=membership,
        scores=scores,
        labels=labels,
        labels_without_cartel=labels_wo.rename("label"),
        alpha=s.alpha,
        n_bootstrap=s.n_bootstrap,
        warnings=notes,
        statistic=np.asarray(first.s),
        null_statistic=np.asarray(first.s_null),
        undetermined=workers[undetermined],
        rho=rho,
        method=s.method,
        positive_label=resp.classes[pos],
    )


def _prepare(
    resp: Responses, pos: int, active: np.ndarray, rng: np.random.Generator, s: _Settings
) -> tuple[Core, GroupAnalysis | None]:
    """The ±1 labels of the ``active`` annotators, the spectral core of their moments and the working state on it
    (None when the core is too sparse); warns nothing, so that it can run on a second thread."""
    code = np.full(resp.n_workers, -1, dtype=np.int64)
    code[active] = np.arange(len(active))
    z = np.where(resp.label == pos, 1.0, -1.0)
    B = BinaryMatrix.from_codes(code[resp.worker], resp.item, z, len(active), resp.n_items)
    mom = pairwise_moments(B, n_min=s.n_min)
    core = spectral_core(B, mom, d_min=s.d_min)
    if core.too_sparse:
        return core, None
    idx = np.flatnonzero(core.mask)
    return core, GroupAnalysis(
        B, idx, n_bootstrap=s.n_bootstrap, alpha=s.alpha, n_min=s.n_min, rng=rng, moments=mom.restrict(idx)
    )


def _could_not_run(reason: str, labels: pd.Series, s: _Settings, positive_label: Any) -> CartelReport:
    empty = pd.Index([], name="worker")
    return CartelReport(
        status="could_not_run",
        reason=reason,
        workers=empty,
        eigenvalues=np.array([]),
        null_eigenvalues=np.zeros((s.n_bootstrap, 0)),
        p_value=np.array([]),
        loadings=pd.DataFrame(index=empty),
        groups=[],
        membership=pd.Series(dtype=object, name="membership"),
        scores=pd.Series(dtype=float, name="cartel_score"),
        labels=labels,
        labels_without_cartel=labels.copy(),
        alpha=s.alpha,
        n_bootstrap=s.n_bootstrap,
        warnings=[],
        method=s.method,
        positive_label=positive_label,
    )


def _status(first: GroupTest, groups: list[set[Any]], alpha: float) -> tuple[CartelStatus, str]:
    """The report's status and its reason in plain words."""
    p = float(first.p[0])
    if groups:
        return "groups_found", (
            f"{len(groups)} group(s) of annotators agree with each other beyond what their accuracy explains "
            f"(extra covariance component p = {p:.3g} < α = {alpha:g})"
        )
    if p >= alpha:
        return "no_evidence", (
            f"no extra covariance component (p = {p:.3g} ≥ α = {alpha:g}): the spectrum is consistent with "
            "independent annotators"
        )
    return "no_evidence", (
        f"a second covariance component is significant (p = {p:.3g}) but no separate group "
        "of annotators could be split off: the correlation is spread over the crowd (e.g. item "
        "difficulty or shared guidelines) rather than concentrated in a cartel"
    )


def _loadings(an: GroupAnalysis, workers: pd.Index, n_comp: int) -> tuple[pd.DataFrame, pd.Series]:
    """Spectrum loadings for display (§6.6): the rank-two fit's diagonal completes the covariance."""
    m = len(workers)
    L = an.rank_two(np.arange(m)) if m >= 3 else np.zeros((m, 2))
    R = np.where(an.mom.valid, an.mom.Q, 0.0)
    np.fill_diagonal(R, (L**2).sum(axis=1))
    vals, vecs = np.linalg.eigh(R)
    vals, vecs = vals[::-1][:n_comp], vecs[:, ::-1][:, :n_comp]
    load = vecs * np.sqrt(np.maximum(vals, 0))[None, :]
    load[:, 0] = resolve_sign(load[:, 0], "sum")[0]
    loadings = pd.DataFrame(load, index=workers, columns=[f"v{k + 1}" for k in range(load.shape[1])])
    return loadings, pd.Series(np.sqrt((L**2).sum(axis=1)), index=workers, name="rho")


def _split_recursively(an: GroupAnalysis, first: GroupTest, s: _Settings) -> list[np.ndarray]:
    """§6.5 steps 1–5: split groups whose extra component is significant, up to ``k_max`` splits."""
    m = len(an.idx)
    final: list[np.ndarray] = []
    queue, splits = [np.arange(m)], 0
    while queue:
        g = queue.pop(0)
        if len(g) < s.m_min or splits >= s.k_max:
            final.append(g)
            continue
        res = first if len(g) == m else an.test(g, sequential=True)
        if res.p[0] >= s.alpha:
            final.append(g)
            continue
        main, subg, _ = split_group(an, g)
        if len(main) < 3 or len(subg) < 3:
            final.append(g)
            continue
        splits += 1
        queue += [main, subg]
    return final


def _strengths(an: GroupAnalysis, groups: list[np.ndarray], by_loading: bool) -> list[float]:
    """What makes a group the main one (§6.5 steps 5 and 8): its rank-one eigenvalue ‖v̂_G‖², or with
    ``by_loading`` the responses its members give (a tight minority loads more strongly on its own factor than a
    sparse crowd on the truth's: measured on the heavy-annotator crowds of ``benchmarks/collusion_calibration.py``,
    where a planted cartel of 8 had the larger eigenvalue on 3 of 200 seeds and was taken as the honest group)."""
    if by_loading:
        return [float(an.mom.n_i[g].sum()) for g in groups]
    return [float(np.sum(an.rank_one(g) ** 2)) if len(g) >= 3 else 0.0 for g in groups]


def _strongest(an: GroupAnalysis, groups: list[np.ndarray], by_loading: bool = False) -> int:
    """Index of the main group (:func:`_strengths`)."""
    return int(np.argmax(_strengths(an, groups, by_loading)))


def _signed_evidence(
    an: GroupAnalysis, groups: list[np.ndarray], main_k: int, same_sign: bool
) -> tuple[np.ndarray, np.ndarray]:
    """§6.5 step 6 evidence z_ig; with ``same_sign``, a subgroup only takes annotators loading with its core's sign.

    z_ig squares the regression of i's covariance row on group g's factor u^g, so it cannot tell an annotator who
    follows the group's target from one who goes against it.  Under P14 Lemma 2 a member i covaries with the other
    members as (2ξ_i − 1)(2ξ_j − 1)(1 − b²): its coefficient has the sign of its skill on the group's target, and
    u^g is oriented by the sum rule (§3.4), so the group's core loads positively.  The spec keeps both signs in a
    group (§6.5 step 3 clusters axes: members worse than random on the target, ξ < ½, load negatively).  But an
    annotator unrelated to the group (a random answerer) also gets a coefficient of either sign from noise, and
    on sparse overlaps the two cannot be told apart by size.  ``same_sign`` (the audit's reading of "colluding":
    agrees with the members) sets subgroup evidence with a non-positive coefficient below every admissible value
    (−1), so such an annotator goes to the main group, where its accuracy is judged.  The main group keeps the
    unsigned evidence: its worse-than-chance annotators (adversaries, negative on the honest factor, §3.5) belong
    to it."""
    z, coef = an.evidence(groups)
    if not same_sign:
        return z, coef
    against = coef <= 0
    against[:, main_k] = False
    return np.where(against, -1.0, z), coef


def _assignment_scores(
    an: GroupAnalysis, groups: list[np.ndarray], main_k: int, s: _Settings
) -> tuple[np.ndarray, np.ndarray]:
    """§6.5 step 6's score of each annotator for each group (m × G; the largest wins) and the regression
    coefficients.  The spec's score is the evidence z_ig (:func:`_signed_evidence`), the squared t-statistic of
    the loading b_ig: it grows with the data the loading rests on, so in a sparse crowd where a few annotators give
    most responses, a cartel member who shares ~140 items with each heavy annotator and ~20 with each other member
    has more evidence for its (smaller) loading on the crowd's factor than for its loading on the cartel's, and
    goes to the crowd (measured: 7 of 200 heavy-annotator crowds lost their planted cartel so).  With
    ``by_loading`` the score is the one-sided lower confidence bound of the loading at the detector's level,
    |b_ig| − z_α·se_ig with se_ig = |b_ig|/√z_ig: the group whose factor the annotator loads on most, as far as
    its data show (a few noisy pairs do not win).  False accusations stay the collusion test's to control
    (:mod:`.collusion`).  Tried and dropped: the upper bound for the main group (the benefit of the doubt to the
    crowd) — it kept 2 honest annotators of the spectral planted crowds out of their cartels, but handed the two
    biased heavy annotators who share errors back to the crowd (called dependent 2/400 against 206/400 before).
    The sign rule of ``same_sign`` applies as in :func:`_signed_evidence`; an annotator with no valid pair in any
    group scores 0 for the main group."""
    if not s.by_loading:
        return _signed_evidence(an, groups, main_k, s.same_sign)
    z, coef = an.evidence(groups)
    has = z > 0
    se = np.abs(coef) / np.sqrt(np.where(has, z, 1.0))
    score = np.where(has, np.abs(coef) - float(norm.ppf(1 - s.alpha)) * se, -np.inf)
    if s.same_sign:
        against = coef <= 0
        against[:, main_k] = False
        score[against] = -np.inf
    score[~np.isfinite(score).any(axis=1), main_k] = 0.0
    return score, coef


def _reassign(an: GroupAnalysis, final: list[np.ndarray], s: _Settings) -> list[np.ndarray]:
    """§6.5 step 6: each annotator to the group with the largest score (:func:`_assignment_scores`), until stable
    (with ``same_sign``, a subgroup only takes annotators loading with its core's sign: :func:`_signed_evidence`)."""
    if len(final) <= 1:
        return final
    for _ in range(10):
        zmat, _ = _assignment_scores(an, final, _strongest(an, final, s.by_loading), s)
        lab = np.argmax(zmat, axis=1)
        new = [g for g in (np.flatnonzero(lab == k) for k in range(len(final))) if len(g)]
        if len(new) == len(final) and all(np.array_equal(a, b) for a, b in zip(new, final)):
            break
        final = new
    return final


def _merge(an: GroupAnalysis, first: GroupTest, final: list[np.ndarray], alpha: float) -> list[np.ndarray]:
    """§6.5 step 7: merge the pair of groups whose union is most clearly one group (largest p ≥ α), repeatedly."""
    m = len(an.idx)
    while len(final) > 1:
        best, best_p = None, -1.0
        for a in range(len(final)):
            for b in range(a + 1, len(final)):
                union = np.sort(np.concatenate([final[a], final[b]]))
                p = (first if len(union) == m else an.test(union, sequential=True)).p[0]
                if p >= alpha and p > best_p:
                    best, best_p = (a, b), p
        if best is None:
            break
        a, b = best
        merged = np.sort(np.concatenate([final[a], final[b]]))
        final = [g for k, g in enumerate(final) if k not in (a, b)] + [merged]
    return final


def _main_group(
    an: GroupAnalysis, final: list[np.ndarray], s: _Settings
) -> tuple[list[np.ndarray], int, list[float], np.ndarray]:
    """§6.5 step 8: the main group has the largest rank-one eigenvalue ‖v̂_G‖² (with ``by_loading``: gives most
    responses, :func:`_strengths`).  Undetermined annotators (§6.5 step 2, on the final groups: the loading on the
    best-fitting group's factor is within the noise floor, ρ_i² ≤ (2σ̄)²) go with the main group for fusion."""
    m = len(an.idx)
    strength = _strengths(an, final, s.by_loading)
    main_k = int(np.argmax(strength))
    zfin, coef = _assignment_scores(an, final, main_k, s)
    best_coef = coef[np.arange(m), np.argmax(zfin, axis=1)]
    undetermined = best_coef**2 <= 4 * an.noise_floor()
    if undetermined.any():
        und = np.flatnonzero(undetermined)
        final = [np.setdiff1d(g, und) if k != main_k else np.union1d(g, und) for k, g in enumerate(final)]
    return final, main_k, strength, undetermined


def _membership(
    an: GroupAnalysis, final: list[np.ndarray], main_k: int, workers: pd.Index, same_sign: bool
) -> tuple[pd.Series, list[set[Any]], pd.Series]:
    """Membership ("honest", "cartel 1", … largest first), the cartels as sets of ids, and the cartel score (share
    of an annotator's regression evidence that points to a cartel, with the sign rule of :func:`_signed_evidence`)."""
    others = [g for k, g in enumerate(final) if k != main_k and len(g)]
    others.sort(key=lambda g: -len(g))
    membership = pd.Series("honest", index=workers, name="membership", dtype=object)
    groups: list[set[Any]] = []
    for c, g in enumerate(others, start=1):
        membership.iloc[g] = f"cartel {c}"
        groups.append(set(workers.take(g)))
    scores = pd.Series(0.0, index=workers, name="cartel_score")
    if others:
        zmat, _ = _signed_evidence(an, [final[main_k], *others], 0, same_sign)
        zo = np.maximum(zmat[:, 1:].max(axis=1), 0.0)  # evidence against a group's core does not point to it
        tot = zo + zmat[:, 0]
        scores[:] = np.where(tot > 0, zo / np.where(tot > 0, tot, 1), 0.0)
    return membership, groups, scores


def _main_group_caveats(
    notes: list[str], final: list[np.ndarray], main_k: int, strength: list[float], m: int, *, by_loading: bool = False
) -> None:
    if len(final[main_k]) <= 0.5 * m:
        _note(notes, "no group holds more than half of the annotators: which group is 'honest' is unclear (P14).")
    srt = sorted(strength, reverse=True)
    if len(srt) > 1 and srt[1] >= 0.8 * srt[0]:
        what = "give numbers of responses" if by_loading else "have rank-one eigenvalues"
        _note(notes, f"the two strongest groups {what} within 20%: the main-group choice is unreliable.")


def _labels_without(
    resp: Responses, labels: pd.Series, groups: list[set[Any]], method: str, notes: list[str]
) -> pd.Series:
    """§6.5 step 9: ``method``'s labels without the cartel members; items only cartel members labelled keep the
    full-crowd label."""
    labels_wo = labels.copy()
    if not groups:
        return labels_wo
    cartel_workers = set().union(*groups)
    keep = ~np.isin(resp.worker, resp.workers.get_indexer(list(cartel_workers)))
    sub = resp.subset(keep)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AggregationWarning)
        est = create(method).fit(sub)
    has = np.bincount(sub.item, minlength=resp.n_items) > 0
    labels_wo.iloc[np.flatnonzero(has)] = est.labels_.to_numpy()[has]
    if (~has).any():
        notes.append(f"{int((~has).sum())} items were labelled only by cartel members; they keep the full-crowd label.")
    return labels_wo
