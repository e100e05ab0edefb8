"""Collusion claims that separate collusion from skill: the one check the Audit and Cartels pages run.

The spectral detector (:func:`~fusion_core.diagnostics.cartels.detect_cartels`) proposes groups whose agreement
does not fit one rank-one component; skilled annotators who are right together, or noise among near-chance
annotators, can give such groups too.  A proposed group is called *dependent* only when, measured against the
leave-group-out posterior q_i (a Dawid–Skene fit on everyone else, Dawid & Skene 1979) on the items the rest of the
crowd decides (max_k q_ik ≥ ``decided``):

1. members whose balanced accuracy interval includes chance are *near chance* (spammers), not members — unless
   they themselves agree with the other proposed members beyond the confusions predict (:func:`.skills.copies`; a cartel
   following a random target is at chance against the truth, yet copies);
2. (a) the remaining members agree with each other more than their estimated confusions predict under conditional
   independence (p < ``alpha`` and an excess of at least ``min_excess``): each member's confusion is the method-of-moments estimate Π_a = G_a⁻¹ M_a with
   G_a[k,k'] = Σ_i q_ik q_ik' and M_a[k,l] = Σ_i q_ik [y_ai = l] (unbiased when q is calibrated: the rest's own
   errors do not shrink the members' accuracy), and the null draws the truth from q and each member's labels from
   Π_a (parametric bootstrap, ``n_null`` replicates, one-sided p-value of the agreeing member pairs);
3. (b) the excess is on answers the rest of the crowd rejects: member pairs agreeing on a label other than the
   rest's are more than the same null predicts (p < ``alpha``, excess ≥ ``min_excess``).  Skilled annotators who agree beyond
   independence because they are right together (e.g. on hard items) add agreeing pairs on the rest's answer only;
   a cartel following its own target adds them on the target's wrong answers;
4. membership is each member's own evidence, not linkage: a member's agreeing partners among the other proposed
   members must exceed the same null's prediction by at least ``min_excess`` of its partners, with p < ``alpha``
   against the replicates and p < ``alpha`` / (number of annotators) with a normal tail (the replicates' mean and
   spread, continuity-corrected): the detector chose the members among all annotators on that same agreement, so
   an honest annotator it linked to a group is the luckiest of many; and its partners agreeing on labels the rest
   rejects must exceed the null's (p < ``alpha``).  When the group passes 2 and 3 but some members lack their own
   evidence, the group of those with it is tested again (2, 3) against the same reference, once (dropping members
   and testing again until none drops let one weak true member take the others with it).  A group's pairs are
   dominated by its most active members: in a sparse crowd where two heavy annotators share errors, the group test
   passes on their pairs alone and, before this step, carried the honest annotators the detector had linked to
   them (``benchmarks/collusion_calibration.py --shapes heavy``).

The group table also shows how often the group's majority equals the rest's label on the decided items (Wilson
interval) next to what the members' skills predict.

A dependent group's members agree beyond their skills — copies of one source or collusion: the words that say which
(near-duplicate annotators / possible collusion) are in :mod:`.words`, the one place every front end takes them from.

Settings are declared once (:data:`DEFAULTS`); both pages call :func:`check_collusion`.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd
import scipy.sparse as sp
from scipy.stats import norm

from fusion_core.data.responses import Responses, as_responses
from fusion_core.diagnostics.cartels.detector import detect_cartels
from fusion_core.diagnostics.cartels.report import CartelReport
from fusion_core.diagnostics.cartels.skills import confusions, copies, tail, wilson
from fusion_core.diagnostics.cartels.words import group_kind, groups_headline
from fusion_core.methods.registry import create


@dataclass(frozen=True)
class CollusionSettings:
    """The collusion check's settings, declared once for every front end.

    ``alpha``: level of the detector and of the two evidence tests; ``n_bootstrap``: the detector's replicates;
    ``n_null``: replicates of the conditional-independence null per group; ``decided``: leave-group-out posterior
    an item needs to count as decided by the rest; ``level``: two-sided level of the skill and right-rate
    intervals; ``method``: the registry method giving the leave-group-out posterior; ``min_excess``: the smallest
    excess (observed − predicted share of member pairs) that counts, for both tests — the leave-group-out
    Dawid–Skene posterior is overconfident on sparse crowds, so skilled groups show a small but significant excess
    against it (about 1 point of pairs agreeing against the rest for the 8 best of 50 simulated annotators), while
    planted cartels show 10–17 points (``benchmarks/collusion_calibration.py``)."""

    alpha: float = 0.05
    n_bootstrap: int = 200
    n_null: int = 400
    decided: float = 0.9
    min_excess: float = 0.05
    level: float = 0.95
    method: str = "ds"


DEFAULTS = CollusionSettings()


@dataclass(frozen=True)
class GroupEvidence:
    """The evidence on one proposed group (ids as written).  ``agreement``/``predicted``: share of member pairs
    agreeing on shared decided items, observed / predicted from the members' confusions; ``excess_p``: its
    bootstrap p-value; ``right``, ``right_low``, ``right_high``: share of decided items where the group's majority
    equals the rest's label, with a Wilson interval; ``right_predicted``: the null's mean; ``right_p``: the null's
    chance of a share at least as high; ``wrong``/``wrong_predicted``/``wrong_p``: share of member pairs agreeing on
    a label the rest rejects, its prediction and p-value; ``unsupported``: proposed members above chance without
    their own evidence (step 4 of the module docstring), returned to the rest of the crowd."""

    proposed: tuple[str, ...]
    members: tuple[str, ...]
    near_chance: tuple[str, ...]
    n_pairs: int
    agreement: float
    predicted: float
    excess_p: float
    n_decided: int
    right: float
    right_low: float
    right_high: float
    right_predicted: float
    right_p: float
    wrong: float
    wrong_predicted: float
    wrong_p: float
    dependent: bool
    why: str
    unsupported: tuple[str, ...] = ()

    @property
    def kind(self) -> str:
        """The group in plain words (:func:`.words.group_kind`): near-duplicate annotators, possible collusion, or no
        evidence of dependence."""
        return group_kind(self.dependent, self.agreement)


@dataclass(frozen=True)
class CollusionCheck:
    """The detector's ``report`` and the ``evidence`` on each group it proposed; ``groups`` are the dependent ones
    (``kinds``: their words, :mod:`.words`)."""

    report: CartelReport
    evidence: tuple[GroupEvidence, ...]
    settings: CollusionSettings = field(default=DEFAULTS)

    @property
    def groups(self) -> tuple[tuple[str, ...], ...]:
        return tuple(e.members for e in self.evidence if e.dependent)

    @property
    def kinds(self) -> tuple[str, ...]:
        return tuple(e.kind for e in self.evidence if e.dependent)

    @property
    def members(self) -> set[str]:
        return {w for g in self.groups for w in g}

    def confirmed(self) -> CartelReport:
        """The detector's report with only the dependent groups (members as tested: near-chance annotators are not
        members); proposals that fail the tests become "honest" and, with none left, the status "no_evidence" with
        the evidence as its reason.  Both pages display this report."""
        rep = self.report
        if rep.status != "groups_found":
            return rep
        ids = {str(w): w for w in rep.workers}
        groups = [{ids[w] for w in g if w in ids} for g in self.groups]
        membership = pd.Series("honest", index=rep.workers, name="membership", dtype=object)
        for c, g in enumerate(groups, start=1):
            membership[list(g)] = f"cartel {c}"
        scores = rep.scores.where(membership != "honest", 0.0)
        if groups:
            return replace(rep, groups=groups, membership=membership, scores=scores, reason=collusion_reason(self))
        why = "; ".join(f"group {i + 1}: {e.why}" for i, e in enumerate(self.evidence))
        reason = (
            f"the spectral test proposed {len(rep.groups)} group(s), but none agrees beyond its members' skills on "
            f"answers the rest of the crowd rejects ({why})"
        )
        return replace(
            rep,
            status="no_evidence",
            reason=reason,
            groups=[],
            membership=membership,
            scores=scores,
            labels_without_cartel=rep.labels.copy(),
        )

    def frame(self) -> pd.DataFrame:
        """One row per proposed group: verdict, members, the excess agreement and the right-rate evidence."""
        rows = [
            {
                "dependent": e.dependent,
                "kind": e.kind,
                "members": ", ".join(e.members),
                "near chance (not members)": ", ".join(e.near_chance),
                "no own evidence (not members)": ", ".join(e.unsupported),
                "member pairs compared": e.n_pairs,
                "agreement observed": e.agreement,
                "agreement predicted by skill": e.predicted,
                "excess agreement p": e.excess_p,
                "agree against the rest": e.wrong,
                "against the rest, predicted": e.wrong_predicted,
                "against the rest p": e.wrong_p,
                "items the rest decides": e.n_decided,
                "group right (rest decides)": e.right,
                "right, interval low": e.right_low,
                "right, interval high": e.right_high,
                "right predicted by skill": e.right_predicted,
                "why": e.why,
            }
            for e in self.evidence
        ]
        return pd.DataFrame(rows, columns=list(rows[0]) if rows else ["dependent", "kind", "members", "why"])


def check_collusion(
    df_or_responses: Responses | pd.DataFrame,
    settings: CollusionSettings = DEFAULTS,
    *,
    random_state: int | None = 0,
    report: CartelReport | None = None,
) -> CollusionCheck:
    """Detector proposals (``same_sign``, ``by_loading``, majority-vote labels) checked by :func:`group_evidence`."""
    resp = as_responses(df_or_responses)
    if report is None:
        report = detect_cartels(
            resp,
            n_bootstrap=settings.n_bootstrap,
            alpha=settings.alpha,
            random_state=random_state,
            same_sign=True,
            by_loading=True,
            method="mv",
        )
    rng = np.random.default_rng(random_state)
    ev = tuple(group_evidence(resp, sorted(map(str, g)), settings, rng) for g in report.groups)
    return CollusionCheck(report, ev, settings)


def group_evidence(
    resp: Responses, members: list[str], settings: CollusionSettings, rng: np.random.Generator
) -> GroupEvidence:
    """The tests of the module docstring on one proposed group (ids as written): when the group passes (2, 3) but
    some members lack their own evidence (4), the group of those with it is tested again (2, 3), against the same
    reference (the crowd without the whole proposal)."""
    codes = _codes(resp, members)
    rest = resp.subset(~np.isin(resp.worker, codes))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        q = np.asarray(create(settings.method).fit(rest).probas_, dtype=float)
    has = np.bincount(rest.item, minlength=resp.n_items) > 0
    decided = has & (q.max(axis=1) >= settings.decided)
    ev, own = _evidence(resp, list(members), settings, rng, q=q, decided=decided)
    drop = tuple(w for w in ev.members if w not in own) if ev.dependent else ()
    if not drop:
        return ev
    if len(own) < 2:
        why = (
            "the group agrees beyond its members' skills on answers the rest rejects, but fewer than two members do "
            "so on their own evidence"
        )
        return replace(ev, members=tuple(w for w in ev.members if w in own), unsupported=drop, dependent=False, why=why)
    again, _ = _evidence(resp, [w for w in members if w in own], settings, rng, q=q, decided=decided)
    return replace(again, proposed=tuple(members), near_chance=ev.near_chance, unsupported=drop)


def _codes(resp: Responses, members: list[str]) -> np.ndarray:
    codes = resp.workers.get_indexer(pd.Index(members, dtype=object))
    if (codes < 0).any():  # ids as written: fall back to string comparison
        codes = np.flatnonzero(np.isin(resp.workers.astype(str), members))
    return np.asarray(codes)


def _evidence(
    resp: Responses,
    members: list[str],
    settings: CollusionSettings,
    rng: np.random.Generator,
    *,
    q: np.ndarray,
    decided: np.ndarray,
) -> tuple[GroupEvidence, set[str]]:
    """One pass of the tests on ``members`` against the reference posterior ``q`` (items ``decided``): the group's
    evidence and the kept members with their own (4)."""
    K = resp.n_classes
    codes = _codes(resp, members)
    in_g = np.isin(resp.worker, codes)
    keep = in_g & decided[resp.item]
    local = np.full(resp.n_workers, -1)
    local[codes] = np.arange(len(codes))
    who, item, lab = local[resp.worker[keep]], resp.item[keep], resp.label[keep]
    qi = q[item]
    Pi, n_k = confusions(qi, who, lab, len(codes))
    z = float(norm.ppf(0.5 + settings.level / 2))
    acc = np.einsum("akk->ak", Pi)
    ba = acc.mean(axis=1)
    se = np.sqrt((acc * (1 - acc) / np.maximum(n_k, 1)).sum(axis=1)) / K
    near = (ba - z * se <= 1.0 / K) & ~copies(
        Pi, q, who, item, lab, alpha=settings.alpha, min_excess=settings.min_excess
    )
    names = np.asarray(members, dtype=object)
    near_names = tuple(str(x) for x in names[near])
    ok = ~near[who]
    who, item, lab, qi = who[ok], item[ok], lab[ok], qi[ok]
    kept = tuple(str(x) for x in names[~near])

    own_names: set[str] = set()

    def _result(dependent: bool, why: str, **kw: Any) -> tuple[GroupEvidence, set[str]]:
        base: dict[str, Any] = {
            "n_pairs": 0,
            "agreement": np.nan,
            "predicted": np.nan,
            "excess_p": np.nan,
            "n_decided": 0,
            "right": np.nan,
            "right_low": np.nan,
            "right_high": np.nan,
            "right_predicted": np.nan,
            "right_p": np.nan,
            "wrong": np.nan,
            "wrong_predicted": np.nan,
            "wrong_p": np.nan,
        }
        base.update(kw)
        return GroupEvidence(tuple(members), kept, near_names, dependent=dependent, why=why, **base), own_names

    if len(kept) < 2:
        return _result(False, "fewer than two members are above chance: near-chance annotators are spammers")
    # items shared by ≥ 2 kept members
    u_items, inv = np.unique(item, return_inverse=True)
    cnt = np.bincount(inv)
    multi = cnt[inv] >= 2
    who, item, lab, qi, inv = who[multi], item[multi], lab[multi], qi[multi], inv[multi]
    u_items, inv = np.unique(item, return_inverse=True)
    n_it = len(u_items)
    if n_it == 0:
        return _result(False, "the members share no item the rest of the crowd decides")
    n_per = np.bincount(inv, minlength=n_it)
    n_pairs = int((n_per * (n_per - 1) // 2).sum())
    A = sp.csr_matrix((np.ones(len(inv)), (inv, np.arange(len(inv)))), shape=(n_it, len(inv)))
    q_it = q[u_items]
    rest_lab = q_it.argmax(axis=1)

    wrong_k = np.arange(K)[:, None, None] != rest_lab[None, :, None]

    m = len(codes)
    W = sp.csr_matrix((np.ones(len(inv)), (who, np.arange(len(inv)))), shape=(m, len(inv)))
    rest_r = rest_lab[inv]

    def stats(L: np.ndarray) -> tuple[np.ndarray, ...]:
        """Per column of L: agreeing pairs, pairs agreeing on a label the rest rejects, items where the group's
        (strict) majority equals the rest's label; and per member (rows): its agreeing partners, and those on a
        label the rest rejects."""
        counts = np.stack([np.asarray(A @ np.equal(L, k).astype(np.float64)) for k in range(K)])  # K × items × R
        pairs = counts * (counts - 1) / 2
        agree = pairs.sum(axis=(0, 1))
        wrong = (pairs * wrong_k).sum(axis=(0, 1))
        top = counts.max(axis=0)
        strict = (counts == top[None]).sum(axis=0) == 1
        right = (strict & (counts.argmax(axis=0) == rest_lab[:, None])).sum(axis=0)
        part = counts[L, inv[:, None], np.arange(L.shape[1])[None, :]] - 1.0  # responses × R
        return agree, wrong, right, W @ part, W @ (part * (rest_r[:, None] != L))

    o_agree, o_wrong, o_right, o_m_agree, o_m_wrong = stats(lab[:, None])
    obs_agree, obs_wrong, obs_right = float(o_agree[0]), float(o_wrong[0]), float(o_right[0])
    counts0 = np.stack([np.asarray(A @ (lab == k).astype(np.float64)) for k in range(K)])
    top0 = counts0.max(axis=0)
    n_maj = int(((counts0 == top0[None]).sum(axis=0) == 1).sum())
    # predicted agreeing pairs: Σ_i Σ_k q_ik Σ_l (S_ikl² − Q_ikl)/2 with S, Q sums of Π_a(k,l), Π_a(k,l)² on item i
    P = Pi[who]  # responses × K × K
    S = np.stack([np.asarray(A @ P[:, k, :]) for k in range(K)], axis=1)  # items × K × K
    Q = np.stack([np.asarray(A @ P[:, k, :] ** 2) for k in range(K)], axis=1)
    predicted = float((q_it * ((S**2 - Q) / 2).sum(axis=2)).sum())
    null_agree, null_wrong, null_right, null_m_agree, null_m_wrong = [], [], [], [], []
    cdf = np.cumsum(P, axis=2)
    qcdf = np.cumsum(q_it, axis=1)
    for start in range(0, settings.n_null, 100):
        R = min(100, settings.n_null - start)
        t = (rng.random((n_it, R))[:, None, :] > qcdf[:, :, None]).sum(axis=1)  # items × R
        t = np.minimum(t, K - 1)
        t_r = t[inv]  # responses × R
        c = cdf[np.arange(len(inv))[:, None], t_r]  # responses × R × K
        u = rng.random((len(inv), R))
        L = np.minimum((u[:, :, None] > c).sum(axis=2), K - 1)
        a_r, w_r, r_r, ma_r, mw_r = stats(L)
        null_agree.append(a_r)
        null_wrong.append(w_r)
        null_right.append(r_r)
        null_m_agree.append(ma_r)
        null_m_wrong.append(mw_r)
    na, nw, nr = np.concatenate(null_agree), np.concatenate(null_wrong), np.concatenate(null_right)
    # each member's own evidence: its agreeing partners (all, and on labels the rest rejects) against the null's
    nma, nmw = np.concatenate(null_m_agree, axis=1), np.concatenate(null_m_wrong, axis=1)
    m_pairs = np.maximum(W @ (n_per[inv] - 1.0), 1.0)
    m_agree_p = (1 + (nma >= o_m_agree).sum(axis=1)) / (nma.shape[1] + 1)
    m_wrong_p = (1 + (nmw >= o_m_wrong).sum(axis=1)) / (nmw.shape[1] + 1)
    m_agree_x = (o_m_agree[:, 0] - nma.mean(axis=1)) / m_pairs
    level = settings.alpha / max(resp.n_workers, 1)
    own = (m_agree_p < settings.alpha) & (tail(o_m_agree[:, 0], nma) < level) & (m_agree_x >= settings.min_excess)
    own &= m_wrong_p < settings.alpha
    own_names = {str(x) for x in names[own]}
    excess_p = float((1 + (na >= obs_agree).sum()) / (len(na) + 1))
    wrong_p = float((1 + (nw >= obs_wrong).sum()) / (len(nw) + 1))
    right_p = float((1 + (nr >= obs_right).sum()) / (len(nr) + 1))
    lo, hi = wilson(obs_right, n_maj, z)
    right = obs_right / n_maj if n_maj else float("nan")
    right_pred = float(nr.mean() / n_maj) if n_maj else float("nan")
    pairs_ = max(n_pairs, 1)
    a_excess = excess_p < settings.alpha and (obs_agree - predicted) / pairs_ >= settings.min_excess
    b_against = wrong_p < settings.alpha and (obs_wrong - float(nw.mean())) / pairs_ >= settings.min_excess
    if not a_excess:
        why = "their agreement is what their estimated skills predict"
    elif not b_against:
        why = (
            "they agree beyond their skills, but on answers the rest of the crowd supports (shared skill, "
            "not collusion)"
        )
    else:
        why = "they agree beyond their skills on answers the rest of the crowd rejects (copies or collusion)"
    return _result(
        a_excess and b_against,
        why,
        n_pairs=n_pairs,
        agreement=obs_agree / n_pairs if n_pairs else np.nan,
        predicted=predicted / n_pairs if n_pairs else np.nan,
        excess_p=excess_p,
        n_decided=n_maj,
        right=right,
        right_low=lo,
        right_high=hi,
        right_predicted=right_pred,
        right_p=right_p,
        wrong=obs_wrong / n_pairs if n_pairs else np.nan,
        wrong_predicted=float(nw.mean() / n_pairs) if n_pairs else np.nan,
        wrong_p=wrong_p,
    )


def collusion_reason(check: CollusionCheck) -> str:
    """The dependent groups and their evidence in one sentence (the Audit's reason and the Cartels page's detail),
    in the words of :mod:`.words`."""
    found = [x for x in check.evidence if x.dependent]
    parts = [
        f"group {i + 1} ({len(e.members)} members, {e.kind}): pairs agree {e.agreement:.0%} vs {e.predicted:.0%} "
        f"predicted by their skills (p = {e.excess_p:.2g}), {e.wrong:.0%} vs {e.wrong_predicted:.0%} on answers the "
        f"rest of the crowd rejects (p = {e.wrong_p:.2g})"
        for i, e in enumerate(found)
    ]
    return (
        f"{groups_headline([e.kind for e in found])}. Their members agree with each other beyond their estimated "
        "skills on answers the rest of the crowd rejects: " + "; ".join(parts)
    )
