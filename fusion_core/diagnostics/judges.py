"""Correlated judges: which judges of a panel (LLM or human) share errors, and how much the aggregate changes
when a correlated group is down-weighted.

Built on the cartel detector (:func:`fusion_core.diagnostics.cartels.detect_cartels`, spec ``spectral.md`` §6,
P14 §Cartel): a significant second covariance component means some judges follow a common target beyond the
truth; the detector splits the judges into groups along it.  Nothing in the responses says which group is the
independent one (P14), so this analysis takes the **largest group as independent** and calls the others
correlated.  When the test is significant but the detector splits off no group, the judges are split by the
angle of their loadings on the first two components (2-means on doubled angles, started at the two most distant
judges; ``CorrelatedJudges.source == "loadings"``).

Down-weighting: every member of a correlated group of size g gets weight 1/g (``group_weight="share"``: the group
counts as one judge) or a given weight, multiplied into each response's confidence
(:attr:`~fusion_core.data.responses.Responses.weight`), and the aggregate is refitted with a method that weighs
responses (majority vote, Dawid–Skene).  ``error_lift[a, b]`` = P(a and b both wrong) / (P(a wrong) P(b wrong))
on the items both judged, against the gold labels where given, else against the down-weighted aggregate: 1
means independent errors, > 1 shared errors.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd
import scipy.sparse as sp

from fusion_core.data.judges import AnnotatorInfo
from fusion_core.data.responses import Responses, as_responses
from fusion_core.errors import AggregationWarning, UserInputError

WEIGHTED_METHODS = ("mv", "ds", "ds1", "ordinal-em")  # methods whose fit weighs responses by their confidence


@dataclass(frozen=True)
class WeightingEffect:
    """The aggregate of ``method`` before and after weighting the judges: labels by task, the tasks whose label
    changed, and the accuracies on the gold items when gold labels were given (else None)."""

    method: str
    weight: pd.Series
    labels_before: pd.Series
    labels_after: pd.Series
    changed: pd.Index
    accuracy_before: float | None
    accuracy_after: float | None


@dataclass(frozen=True)
class CorrelatedJudges:
    """Result of :func:`correlated_judges`.

    ``groups``: the correlated groups (tuples of judge ids; empty when none); ``membership``: judge →
    "independent", "group 1", "group 2" …; ``p_value``: the detector's p-value for a second component;
    ``significant``: p < alpha; ``source``: "detector", "loadings" (fallback split) or "none";
    ``group_summary``: one row per group (members, size, mean error lift inside, the metadata all members share,
    e.g. the model); ``error_lift``: judge × judge table (module docstring); ``effect``: the aggregate before and
    after down-weighting (:class:`WeightingEffect`); ``warnings``: the detector's notes.
    """

    groups: tuple[tuple[Any, ...], ...]
    membership: pd.Series
    p_value: float
    significant: bool
    source: str
    group_summary: pd.DataFrame
    error_lift: pd.DataFrame
    effect: WeightingEffect
    warnings: tuple[str, ...] = ()


def _fit_labels(resp: Responses, method: str) -> pd.Series:
    from fusion_core.methods.registry import create

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AggregationWarning)
        return create(method).fit(resp).labels_


def _accuracy(labels: pd.Series, gold: pd.Series | None) -> float | None:
    if gold is None:
        return None
    common = gold.index.intersection(labels.index)
    if len(common) == 0:
        return None
    return float((labels.reindex(common).astype(str) == gold.reindex(common).astype(str)).mean())


def reweigh(
    data: Responses | pd.DataFrame,
    weight: pd.Series,
    *,
    method: str = "ds",
    true_labels: pd.Series | None = None,
) -> WeightingEffect:
    """Fit ``method`` with and without the per-judge ``weight`` (Series by judge id, missing judges weigh 1;
    multiplied into the response confidences) and compare the labels.

    Examples
    --------
    >>> from fusion_core.simulate.judges import judge_panel
    >>> sim = judge_panel(n_items=300, seed=0)
    >>> group = sim.group.index[sim.group]
    >>> eff = reweigh(sim.responses, pd.Series(1 / 3, index=group), method="mv", true_labels=sim.truth)
    >>> bool(eff.accuracy_after > eff.accuracy_before), eff.weight[group].round(3).tolist()
    (True, [0.333, 0.333, 0.333])
    """
    if method not in WEIGHTED_METHODS:
        raise UserInputError(
            f"method '{method}' does not weigh responses; use one of {', '.join(WEIGHTED_METHODS)} to down-weight judges."
        )
    resp = as_responses(data)
    w = pd.Series(weight, dtype=float).reindex(resp.workers).fillna(1.0).to_numpy()
    if not np.isfinite(w).all() or (w < 0).any():
        raise UserInputError("judge weights must be finite numbers ≥ 0.")
    base = np.ones(resp.n_responses) if resp.weight is None else resp.weight
    before = _fit_labels(resp, method)
    after = _fit_labels(replace(resp, weight=base * w[resp.worker]), method)
    changed = before.index[before.astype(str).to_numpy() != after.reindex(before.index).astype(str).to_numpy()]
    return WeightingEffect(
        method=method,
        weight=pd.Series(w, index=pd.Index(resp.workers, name="worker"), name="weight"),
        labels_before=before,
        labels_after=after,
        changed=pd.Index(changed, name="task"),
        accuracy_before=_accuracy(before, true_labels),
        accuracy_after=_accuracy(after, true_labels),
    )


def split_by_loadings(loadings: pd.DataFrame) -> list[set[Any]]:
    """Two groups of judges by the angle of their (v1, v2) loadings: weighted 2-means on doubled angles (a
    factor's sign is arbitrary), started at the two judges farthest apart in angle."""
    v = loadings[["v1", "v2"]].to_numpy(dtype=float)
    phi = 2 * np.arctan2(v[:, 1], v[:, 0])
    w = (v**2).sum(axis=1)
    gap = np.abs(np.angle(np.exp(1j * (phi[:, None] - phi[None, :]))))
    i, j = np.unravel_index(int(np.argmax(gap)), gap.shape)
    centres = phi[[i, j]]
    assign = np.zeros(len(phi), dtype=int)
    for _ in range(100):  # iterations of 2-means, not responses
        assign = np.argmin(np.abs(np.angle(np.exp(1j * (phi[:, None] - centres[None, :])))), axis=1)
        new = np.array([np.angle(np.sum((w * np.exp(1j * phi))[assign == k])) for k in range(2)])
        if np.allclose(new, centres, atol=1e-12):
            break
        centres = new
    return [set(loadings.index[assign == k]) for k in range(2) if (assign == k).any()]


def error_lift(resp: Responses, reference: pd.Series) -> pd.DataFrame:
    """Judge × judge lift of shared errors against ``reference`` labels by task (module docstring); NaN where two
    judges share fewer than 5 referenced items or one never errs there."""
    ref_codes = np.full(resp.n_items, -1)
    codes, values = resp.align_items(reference.dropna(), what="reference label")
    ref_codes[codes] = resp.label_codes(values, what="reference labels")
    keep = ref_codes[resp.item] >= 0
    worker, item = resp.worker[keep], resp.item[keep]
    wrong = (resp.label[keep] != ref_codes[item]).astype(float)
    shape = (resp.n_workers, resp.n_items)
    seen = sp.csr_matrix((np.ones(len(worker)), (worker, item)), shape=shape)
    seen.data[:] = 1.0  # repeated responses count once
    err = sp.csr_matrix((wrong, (worker, item)), shape=shape)
    err.data = np.minimum(err.data, 1.0)
    n = (seen @ seen.T).toarray()
    both = (err @ err.T).toarray()
    a_err = (err @ seen.T).toarray()  # a's errors on the items b judged
    with np.errstate(divide="ignore", invalid="ignore"):
        lift = (both / n) / ((a_err / n) * (a_err.T / n))
    lift[(n < 5) | ~np.isfinite(lift)] = np.nan
    np.fill_diagonal(lift, np.nan)
    names = pd.Index(resp.workers, name="worker")
    return pd.DataFrame(lift, index=names, columns=names.rename("other"))


def _groups(report: Any, alpha: float) -> tuple[list[set[Any]], str]:
    """All groups of the detector (its 'honest' group included), or the fallback split; and their source."""
    p = float(report.p_value[0]) if len(report.p_value) else 1.0
    if p >= alpha:
        return [], "none"
    honest = set(report.membership.index[report.membership == "honest"])
    found = [set(g) for g in report.groups]
    if found:
        return [honest, *found] if honest else found, "detector"
    return split_by_loadings(report.loadings), "loadings"


def correlated_judges(
    data: Responses | pd.DataFrame,
    *,
    method: str = "ds",
    group_weight: float | str = "share",
    true_labels: pd.Series | None = None,
    judges: AnnotatorInfo | None = None,
    positive_label: Any = None,
    n_bootstrap: int = 200,
    alpha: float = 0.05,
    random_state: int | None = 0,
) -> CorrelatedJudges:
    """Which judges share errors, and the aggregate of ``method`` before and after down-weighting the correlated
    groups (module docstring).

    ``group_weight``: "share" (each member of a group of size g weighs 1/g) or a weight in [0, 1] for every
    member; ``true_labels`` (gold, by task) adds accuracies and is the reference of the error lift; ``judges``
    (:class:`~fusion_core.data.judges.AnnotatorInfo`) names what each group shares (e.g. the model).  With more
    than two labels the detector looks at ``positive_label`` against the rest.

    Examples
    --------
    >>> from fusion_core.simulate.judges import judge_panel
    >>> sim = judge_panel(n_items=600, n_judges=8, n_correlated=3, seed=0)
    >>> res = correlated_judges(sim.responses, true_labels=sim.truth, judges=sim.judges)
    >>> sorted(res.groups[0]) == sorted(sim.group.index[sim.group])
    True
    >>> res.group_summary.loc[1, "model"], res.effect.accuracy_after > res.effect.accuracy_before
    ('model-a', True)
    """
    from fusion_core.diagnostics.cartels import detect_cartels

    if not (group_weight == "share" or (isinstance(group_weight, (int, float)) and 0 <= float(group_weight) <= 1)):
        raise UserInputError(f"group_weight must be 'share' or a number from 0 to 1; got {group_weight!r}.")
    resp = as_responses(data)
    if resp.n_classes == 2:
        binary, pos = resp, positive_label
    elif positive_label is None:
        raise UserInputError(
            f"these judges use {resp.n_classes} labels; the error-correlation test compares one label with the rest, "
            "so pass positive_label= (e.g. the label whose errors matter most)."
        )
    else:
        binary, pos = resp.one_vs_rest(positive_label), None
    with warnings.catch_warnings():  # the detector's notes are kept in the result
        warnings.simplefilter("ignore", AggregationWarning)
        report = detect_cartels(
            binary, n_bootstrap=n_bootstrap, alpha=alpha, random_state=random_state, positive_label=pos
        )
    found, source = _groups(report, alpha)
    found.sort(key=lambda g: (-len(g), sorted(map(str, g))))
    correlated = [g for g in found[1:] if len(g) >= 2]
    notes = list(report.warnings)
    if source == "loadings" and correlated:
        notes.append(
            "the detector found shared errors but split off no group, so the judges were split by their loadings."
        )
    if len(found) > 1 and len(found[0]) == len(found[1]):
        notes.append("the two largest groups are the same size: which one is independent is a guess.")
    membership, weight = _membership(resp.workers, correlated, group_weight)
    effect = reweigh(resp, weight, method=method, true_labels=true_labels)
    lift = error_lift(resp, true_labels if true_labels is not None else effect.labels_after)
    return CorrelatedJudges(
        groups=tuple(tuple(sorted(g, key=str)) for g in correlated),
        membership=membership,
        p_value=float(report.p_value[0]) if len(report.p_value) else float("nan"),
        significant=source != "none",
        source=source if correlated else "none",
        group_summary=_summary(correlated, lift, judges),
        error_lift=lift,
        effect=effect,
        warnings=tuple(dict.fromkeys(notes)),
    )


def _membership(workers: pd.Index, groups: list[set[Any]], group_weight: float | str) -> tuple[pd.Series, pd.Series]:
    """Judge → "independent" / "group k", and the weight of each judge (1, or the group's down-weight)."""
    membership = pd.Series("independent", index=pd.Index(workers, name="worker"), name="membership")
    weight = pd.Series(1.0, index=membership.index, name="weight")
    for k, g in enumerate(groups, start=1):
        members = list(g)
        membership[members] = f"group {k}"
        weight[members] = 1.0 / len(g) if group_weight == "share" else float(group_weight)
    return membership, weight


def _summary(groups: list[set[Any]], lift: pd.DataFrame, judges: AnnotatorInfo | None) -> pd.DataFrame:
    rows = []
    for k, g in enumerate(groups, start=1):
        members = sorted(g, key=str)
        inner = lift.loc[members, members].to_numpy()
        row: dict[str, Any] = {
            "group": k,
            "members": ", ".join(map(str, members)),
            "size": len(members),
            "error_lift": float(np.nanmean(inner)) if np.isfinite(inner).any() else float("nan"),
        }
        if judges is not None:
            row.update(judges.shared(members))
        rows.append(row)
    return pd.DataFrame(rows, columns=None if rows else ["group", "members", "size", "error_lift"]).set_index("group")
