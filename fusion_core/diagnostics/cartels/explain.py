"""What a :class:`~fusion_core.diagnostics.cartels.CartelReport` means, in plain words and tables (presentation).

* :func:`explain_cartels` — one :class:`CartelFinding`: the four states (groups found / correlation but no
  separable group / no evidence / the test could not run), a headline, the test's power (:class:`CartelPower`)
  or what data would let it run (:class:`CartelRequirement`), the groups (members, strength, items they swing,
  with the real labels) and one row per annotator ("cartel 1" / "not in a cartel" / "not analysed", with a
  near-chance note from the skills when given; the cartel score is shown for members only, never to rank others).
* :func:`overlap_requirement`, :func:`cartel_power`, :func:`group_strength`, :func:`swing_items` — the pieces.

The power statement is an approximation (ours): a group of k annotators whose labels share an extra correlation ρ
adds a block of entries ≈ ρ·√(n − 1) to the standardised residual Ẽ = (Q̂ − v̂v̂ᵀ)/σ̂ (spec ``spectral.md`` §6.3;
σ̂ ≈ √(var_i var_j/(n − 1)) for n shared items), whose top eigenvalue is then ≈ (k − 1)·f·ρ·√(n̄ − 1) (f: share of
annotator pairs with enough overlap, n̄: their median overlap).  The group is detectable when that exceeds the
(1 − α) quantile of the statistic's bootstrap null.  Checked on simulations (30 annotators × 400 items, 5 members
copying a shared random label with probability c, so their labels correlate by ≈ c² beyond the truth): predicted
ρ ≥ 0.12 for 5 members; c = 0.3 (ρ ≈ 0.09) was significant in 1 of 3 seeds, c = 0.4 (ρ ≈ 0.16) in 3 of 3.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import scipy.sparse as sp

from fusion_core.data.responses import Responses
from fusion_core.diagnostics.cartels.report import CartelReport, CartelState
from fusion_core.diagnostics.cartels.words import groups_headline, n_groups

NEAR_CHANCE_MARGIN = 0.1
"""An annotator whose skill (expected accuracy) is within this of chance (1 / number of labels) is "near chance";
more than this below chance is "worse than chance"."""


@dataclass(frozen=True)
class CartelRequirement:
    """What the data lack for the test to run: ``n_min`` shared items per pair, ``d_min`` partners per annotator,
    hence at least ``d_min + 1`` annotators; how many qualify now and the largest overlap of any pair."""

    n_min: int
    d_min: int
    annotators_needed: int
    annotators_now: int
    max_overlap: int
    text: str


@dataclass(frozen=True)
class CartelPower:
    """Approximate power of the test on these data: the null's (1 − α) threshold of the statistic, the median
    overlap and share of usable pairs, and the smallest extra correlation detectable for groups of given sizes."""

    threshold: float
    median_overlap: float
    pair_fraction: float
    min_correlation: dict[int, float]
    text: str


@dataclass(frozen=True)
class CartelFinding:
    """A cartel report explained: ``state``, ``headline`` and ``detail`` in plain words, ``power`` (when the test
    ran) or ``requirement`` (when it could not), ``groups`` (one row per group) and ``annotators`` (one row per
    annotator of the data)."""

    state: CartelState
    headline: str
    detail: str
    groups: pd.DataFrame
    annotators: pd.DataFrame
    swing: pd.DataFrame
    power: CartelPower | None = None
    requirement: CartelRequirement | None = None
    notes: list[str] = field(default_factory=list)


def _overlap(responses: Responses) -> sp.csr_matrix:
    """Annotator × annotator counts of shared items."""
    o = sp.csr_matrix(
        (np.ones(responses.n_responses, dtype=np.float32), (responses.worker, responses.item)),
        shape=(responses.n_workers, responses.n_items),
    )
    o.data[:] = 1.0  # repeated (item, annotator) pairs count once
    return (o @ o.T).tocsr()


def overlap_requirement(responses: Responses, *, n_min: int = 10, d_min: int = 3) -> CartelRequirement:
    """How far the data are from what the test needs (the detector's defaults ``n_min`` = 10, ``d_min`` = 3):
    at least ``d_min + 1`` annotators, each sharing ≥ ``n_min`` items with ≥ ``d_min`` of the others."""
    n = _overlap(responses)
    n.setdiag(0)
    n.eliminate_zeros()
    partners = np.asarray((n >= n_min).sum(axis=1)).ravel()
    now = int((partners >= d_min).sum())
    max_ov = int(n.max()) if n.nnz else 0
    need = d_min + 1
    text = (
        f"needs at least {need} annotators who each share ≥ {n_min} items with ≥ {d_min} of the others; "
        f"now {now} annotator{'s' if now != 1 else ''} qualif{'y' if now != 1 else 'ies'} and the most any two "
        f"annotators share is {max_ov} item{'s' if max_ov != 1 else ''}. Have a few annotators label the same "
        f"≥ {n_min} items (an overlap batch), then run the test again."
    )
    return CartelRequirement(n_min, d_min, need, now, max_ov, text)


def cartel_power(report: CartelReport, responses: Responses, *, n_min: int = 10, sizes=(3, 5, 10)) -> CartelPower:
    """The approximate power of the test (see the module docstring): smallest extra correlation ρ detectable for
    groups of the given ``sizes`` among the analysed annotators."""
    threshold = report.threshold
    codes = responses.workers.get_indexer(report.workers)
    codes = codes[codes >= 0]
    n = _overlap(responses)[codes][:, codes].toarray()
    m = len(codes)
    off = ~np.eye(m, dtype=bool)
    ok = off & (n >= n_min)
    f = float(ok.sum() / off.sum()) if m > 1 else 0.0
    med = float(np.median(n[ok])) if ok.any() else 0.0
    min_rho: dict[int, float] = {}
    for k in sizes:
        if k <= m and f > 0 and med > 1 and np.isfinite(threshold):
            min_rho[int(k)] = float(threshold / ((k - 1) * f * np.sqrt(med - 1)))
    parts = [
        f"{k} annotators whose labels correlate by ≥ {r:.2f} beyond the truth" for k, r in min_rho.items() if r < 1
    ]
    if parts:
        text = (
            f"With these data the test would (approximately) detect a group of {' or of '.join(parts)} "
            f"(analysed annotators share a median of {med:.0f} items; {f:.0%} of their pairs overlap enough)."
        )
    else:
        text = "With these data even a large, strongly correlated group would be hard to detect (little overlap)."
    return CartelPower(threshold, med, f, min_rho, text)


def group_strength(responses: Responses, members: set[Any]) -> tuple[float, float]:
    """(agreement rate among the members, agreement rate between members and the other annotators), on the items
    they share, with the real labels."""
    codes = responses.workers.get_indexer(list(members))
    is_member = np.zeros(responses.n_workers, dtype=bool)
    is_member[codes[codes >= 0]] = True
    same = None
    for k in range(responses.n_classes):  # loop over labels, not responses
        sel = responses.label == k
        o = sp.csr_matrix(
            (np.ones(int(sel.sum())), (responses.worker[sel], responses.item[sel])),
            shape=(responses.n_workers, responses.n_items),
        )
        o.data[:] = 1.0
        s = o[is_member] @ o.T
        same = s if same is None else same + s
    assert same is not None
    shared = _overlap(responses)[is_member]
    same_d, shared_d = same.toarray(), shared.toarray()
    mem_cols = np.flatnonzero(is_member)
    rows = np.arange(len(mem_cols))
    shared_d[rows, mem_cols] = 0  # an annotator with themself
    same_d[rows, mem_cols] = 0
    inside = shared_d[:, is_member].sum()
    outside = shared_d[:, ~is_member].sum()
    within = float(same_d[:, is_member].sum() / inside) if inside else float("nan")
    between = float(same_d[:, ~is_member].sum() / outside) if outside else float("nan")
    return within, between


def swing_items(
    responses: Responses, members: set[Any], *, method: str = "ds", labels: pd.Series | None = None
) -> pd.DataFrame:
    """Items whose label changes when ``members`` are left out: columns "label with them", "label without them"
    (the real labels, as text), index task.  ``labels``: the full-crowd labels if already known."""
    from fusion_core.methods.registry import create

    if labels is None:
        labels = create(method).fit(responses).labels_
    keep = ~np.isin(responses.worker, responses.workers.get_indexer(list(members)))
    sub = responses.subset(keep)
    without = labels.copy()
    has = np.bincount(sub.item, minlength=responses.n_items) > 0
    if has.any():
        without.iloc[np.flatnonzero(has)] = create(method).fit(sub).labels_.to_numpy()[has]
    a, b = labels.astype(str), without.astype(str)
    diff = a.index[a.to_numpy() != b.to_numpy()]
    out = pd.DataFrame({"label with them": a.loc[diff], "label without them": b.loc[diff]})
    out.index = pd.Index(out.index.astype(str), name="task")
    return out


def _annotators(
    report: CartelReport, responses: Responses, skills: pd.Series | None, chance: float | None
) -> pd.DataFrame:
    workers = pd.Index(responses.workers.astype(str), name="annotator")
    member = report.membership.copy()
    member.index = member.index.astype(str)
    score = report.scores.copy()
    score.index = score.index.astype(str)
    status = pd.Series("not analysed (too little overlap with others)", index=workers, dtype=object)
    analysed = member.index.intersection(workers)
    status.loc[analysed] = np.where(
        member.loc[analysed].str.startswith("cartel"), member.loc[analysed], "not in a cartel"
    )
    is_member = status.str.startswith("cartel")
    df = pd.DataFrame({"cartel": status}, index=workers)
    df["cartel score"] = ""
    df.loc[is_member, "cartel score"] = [f"{v:.2f}" for v in score.reindex(df.index[is_member]).to_numpy(float)]
    df["responses"] = np.bincount(responses.worker, minlength=responses.n_workers)
    if skills is not None and chance is not None:
        sk = pd.Series(np.asarray(skills, dtype=float), index=skills.index.astype(str)).reindex(workers)
        df["skill"] = sk.round(3).to_numpy()
        note = np.where(
            sk < chance - NEAR_CHANCE_MARGIN,
            "worse than chance",
            np.where(sk <= chance + NEAR_CHANCE_MARGIN, "near chance (possible spammer)", ""),
        )
        df["skill note"] = np.where(sk.isna(), "", note)
    order = np.lexsort((df.index.to_numpy(dtype=str), np.where(is_member, 0, 1)))
    members_first = df.iloc[order]
    mem = members_first[members_first["cartel"].str.startswith("cartel")]
    mem = mem.sort_values(["cartel", "cartel score"], ascending=[True, False], kind="stable")
    return pd.concat([mem, members_first[~members_first["cartel"].str.startswith("cartel")]])


def explain_cartels(
    report: CartelReport,
    responses: Responses,
    *,
    skills: pd.Series | None = None,
    swing_method: str | None = None,
    n_min: int = 10,
    d_min: int = 3,
) -> CartelFinding:
    """Explain ``report`` on ``responses`` (the original data, with their real labels: for a one-vs-rest report
    pass the multi-class responses).  ``skills``: annotator → expected accuracy from a fit (for the near-chance
    notes; chance = 1 / number of labels).  ``swing_method``: method refitted without each group's members to list
    the items they swing (default: the report's labels when its labels are the real ones, else "ds")."""
    state = report.state
    chance = 1.0 / responses.n_classes if skills is not None else None
    annotators = _annotators(report, responses, skills, chance)
    empty_groups = pd.DataFrame(columns=["group", "members", "size", "agreement inside", "agreement with others"])
    real = report.labels.astype(str).isin(pd.Index(responses.classes.astype(str))).all()
    if state == "could_not_run":
        req = overlap_requirement(responses, n_min=n_min, d_min=d_min)
        return CartelFinding(
            state,
            "The dependence test could not run on these data.",
            f"Why: {report.reason}. What would make it possible: {req.text}",
            empty_groups,
            annotators,
            pd.DataFrame(),
            requirement=req,
        )
    power = cartel_power(report, responses, n_min=n_min)
    p = report.first_p_value
    if state == "no_evidence":
        return CartelFinding(
            state,
            f"{groups_headline(())}.",
            f"The test ran on {len(report.workers):,} annotators and found no extra shared component "
            f"(p = {p:.3g} ≥ α = {report.alpha:g}). {power.text}",
            empty_groups,
            annotators,
            pd.DataFrame(),
            power=power,
        )
    if state == "correlated_no_group":
        return CartelFinding(
            state,
            "Correlation found, but no separable group.",
            f"The annotators' labels share more than one common component (p = {p:.3g} < α = {report.alpha:g}), "
            "but no group of annotators could be split off: the extra correlation is spread over the crowd "
            "(e.g. some items are hard for everyone, or everyone follows the same guideline) rather than "
            f"concentrated in a cartel. {power.text}",
            empty_groups,
            annotators,
            pd.DataFrame(),
            power=power,
        )
    rows, swings = [], []
    for i, g in enumerate(report.groups, start=1):
        name = f"cartel {i}"
        within, between = group_strength(responses, g)
        if real and swing_method is None:
            sw = swing_items(responses, g, method=report.method, labels=report.labels)
        else:
            sw = swing_items(responses, g, method=swing_method or "ds")
        sw.insert(0, "group", name)
        swings.append(sw)
        rows.append(
            {
                "group": name,
                "members": ", ".join(sorted(map(str, g))),
                "size": len(g),
                "agreement inside": round(within, 3),
                "agreement with others": round(between, 3),
                "items they swing": len(sw),
            }
        )
    p_txt = f"p = {p:.3g} < α = {report.alpha:g}"
    return CartelFinding(
        state,
        f"{n_groups(len(report.groups))}: annotators who agree with each other beyond what their accuracy explains.",
        f"Members agree more among themselves than with the other annotators ({p_txt}). This flags dependence, "
        "not intent: copies of one source, or annotators sharing a guideline or a tool, can look the same as "
        f"collusion. {report.reason.rstrip('.')}.",
        pd.DataFrame(rows),
        annotators,
        pd.concat(swings) if swings else pd.DataFrame(),
        power=power,
    )
