"""The verdict rule: one plain word per annotator from their accuracy *with its uncertainty* (docs/AUDIT.md).

Every threshold is declared once, in :class:`VerdictRule`; the rule is a pure function of per-annotator arrays
(:func:`decide`), so it is tested on hand-built cases.

The quantity judged is the annotator's **skill above chance** ``κ_j = (a_j − c_j) / (1 − c_j)``, where ``a_j`` is
their accuracy against the estimated true labels and ``c_j = Σ_k π_k r_jk`` the accuracy an annotator reporting
label k with their own frequency ``r_jk`` would reach by chance under the class prior π (Cohen's chance
correction for one annotator against the truth).  κ = 0 is guessing, 1 perfect, < 0 worse than chance.  Its
interval is the posterior interval of ``a_j`` (:mod:`.evidence`: against the rest of the crowd's labels) mapped
through the same formula, and the flags read the posterior probabilities ``P(κ < chance_band)`` and ``P(κ < 0)``
against the most favourable plausible reference (:mod:`.reference`).  In order:

1. **dependent group (copies or collusion)** — a member of a group the collusion check found (its members agree
   beyond their skills on answers the rest rejects: copies of one source or collusion, the words of
   :mod:`fusion_core.diagnostics.cartels.words`; it overrides the accuracy, which a shared source distorts);
2. **not enough responses to tell** — fewer than ``min_responses`` responses on items someone else labelled too,
   or responses worth fewer than that on certain labels (``n_effective``, :mod:`.evidence`: the rest of the crowd
   cannot tell the labels of the annotator's items);
3. **worse than chance** (adversarial) — ``P(κ < 0)`` is at least ``(1 + level)/2`` (the whole interval below 0)
   and the estimate below ``−chance_band`` (a guesser's estimate falls below 0 half of the time, and its interval
   excludes 0 one time in twenty), against the most favourable plausible reference;
4. **reliable** / **noisy** — the whole interval is above ``chance_band``: reliable when the estimate reaches
   ``reliable_skill``, noisy otherwise;
5. **near chance** (spammer) — ``P(κ < chance_band)`` is at least ``flag_probability`` (more likely than not below
   the band) and at least the prior's own probability of it (the Bayes factor favours "near chance": the flag
   comes from the responses, not from the uniform prior on the accuracy, which puts 0.575 of its mass below the
   band on balanced binary labels and 0.82 for an annotator whose chance accuracy is 0.79), against the most
   favourable plausible reference (the plausible models averaged, the labels' honest range at its low end);
   — unless, on three labels or more, the annotator's labels are a permutation of the crowd's (:mod:`.patterns`:
   they write '2' for the crowd's '1' and '1' for its '2') whose relabelled answers have their whole interval of
   skill above the band: their labels depend on the items as much as a skilled annotator's, so the verdict is
   **swaps labels**, a flag naming the labels they use for another class (a spammer's labels are independent of
   the class, Raykar & Yu 2012; these are not; a "noisy" annotator with such a swap gets it named in the reason).
   A near-chance reason names the label an annotator gives on at least 80% of their responses and 10 points more
   often than the crowd (a fact the user can check; the verdict stays near chance: such labels barely depend on
   the item);
6. otherwise an interval narrower than ``max_width`` with the estimate above the band is **noisy**; anything else
   is **not enough responses to tell** (also a flag that holds only against the chosen model's labels).

Without the probabilities (hand-built cases) they are read off the interval: ``P(κ < x) ≥ (1 + level)/2`` when
the interval is wholly below x, and ``P(κ < band) ≥ ½`` when the estimate is below it and the interval narrower
than ``max_width`` (the rule of the previous version, which the probabilities replace).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fusion_core.diagnostics.cartels.words import DEPENDENT

RELIABLE = "reliable"
NOISY = "noisy"
SPAMMER = "near chance (spammer)"
ADVERSARIAL = "worse than chance (adversarial)"
TOO_FEW = "not enough responses to tell"
SWAPS = "swaps labels (systematic confusion)"
VERDICTS = (ADVERSARIAL, DEPENDENT, SPAMMER, SWAPS, TOO_FEW, NOISY, RELIABLE)
"""All verdicts, worst first (the order tables and charts use)."""
ACCEPTABLE = (RELIABLE, NOISY)
"""Verdicts that do not flag an annotator."""
FLAGS = (ADVERSARIAL, DEPENDENT, SPAMMER, SWAPS)
"""Verdicts that flag an annotator (the headline's "annotators flagged")."""

SEVERITY = {v: i for i, v in enumerate(VERDICTS)}


@dataclass(frozen=True)
class VerdictRule:
    """The thresholds of the verdict rule (module docstring), declared once.

    ``level``: probability of the credible interval; ``min_responses``: responses on shared items needed before
    any accuracy verdict; ``chance_band``: skill above chance below which an annotator is "near chance";
    ``reliable_skill``: skill above chance from which an annotator is "reliable"; ``max_width``: widest skill
    interval on which the estimate may decide when the interval straddles ``chance_band`` (only without
    probabilities); ``flag_probability``: posterior probability of a skill below ``chance_band``, against the most
    favourable plausible reference, from which an annotator is "near chance".
    """

    level: float = 0.90
    min_responses: int = 10
    chance_band: float = 0.15
    reliable_skill: float = 0.5
    max_width: float = 0.4
    flag_probability: float = 0.5

    def describe(self) -> str:
        """The rule in one paragraph of plain words (shown in the app and the report)."""
        return (
            f"Skill above chance is 0 for guessing and 1 for always right. With its {100 * self.level:.0f}% "
            f"interval, measured against the labels the rest of the crowd gives (each annotator's own answers left "
            f"out): members of a group that agrees beyond its skills are a '{DEPENDENT}'; fewer than "
            f"{self.min_responses} responses on items others labelled too (or responses worth fewer than that, when "
            "the labels of those items are too uncertain) is 'not enough responses to tell'; an interval wholly "
            f"below 0 with an estimate below −{self.chance_band:g} is 'worse than chance'; wholly above "
            f"{self.chance_band:g} is 'reliable' when the estimate reaches {self.reliable_skill:g}, 'noisy' "
            f"otherwise; a probability of at least {self.flag_probability:g} that the skill is below "
            f"{self.chance_band:g} is 'near chance' — or '{SWAPS}' when, on three labels or more, its labels are "
            "the crowd's with some swapped and its answers relabelled so are clearly above that line; both flags must "
            "hold with the plausible models averaged and the "
            f"labels only as right as the low end of their honest range; otherwise an interval narrower than {self.max_width:g} is 'noisy', and the rest 'not enough "
            "responses to tell'."
        )


DEFAULT_RULE = VerdictRule()


def decide(
    skill: np.ndarray,
    low: np.ndarray,
    high: np.ndarray,
    n_responses: np.ndarray,
    in_cartel: np.ndarray,
    *,
    rule: VerdictRule = DEFAULT_RULE,
    n_effective: np.ndarray | None = None,
    p_near: np.ndarray | None = None,
    p_worse: np.ndarray | None = None,
    robust_p_near: np.ndarray | None = None,
    robust_p_worse: np.ndarray | None = None,
    robust_skill: np.ndarray | None = None,
    robust_why: str = "",
    prior_near: np.ndarray | None = None,
    robust_prior_near: np.ndarray | None = None,
    relabelled_low: np.ndarray | None = None,
    swap_words: np.ndarray | None = None,
    top_words: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Verdict and its reason (plain words) per annotator from the skill above chance, its interval, the number
    of responses on shared items and cartel membership (arrays of equal length).  ``n_effective`` (responses on
    certain labels worth the same evidence, :mod:`.evidence`) counts like ``n_responses`` for ``min_responses`` (the
    evidence, not the count of responses, must reach it), and words the reason of an undecided annotator whose
    responses are many but whose items' labels are too uncertain.  ``p_near``/``p_worse``: posterior probabilities
    that the skill is below ``chance_band`` / below 0 (read off the interval when not given, module docstring);
    ``robust_p_near``/``robust_p_worse``/``robust_skill``: the same against the most favourable plausible reference
    (:mod:`.reference`); a flag must hold on them too, else the annotator is "not enough responses to tell" for
    ``robust_why``.  ``prior_near``/``robust_prior_near``: the prior's own probability of a skill below the band;
    the near-chance flag needs the posterior probability to exceed it too (the responses, not the prior, must make
    the flag more likely than not).  ``relabelled_low``/``swap_words``: the low end of the skill of the annotator's
    answers relabelled by their swap and its words ('' where the labels are no swap; :mod:`.patterns`) — a
    near-chance annotator whose relabelled interval is above the band "swaps labels"; ``top_words``: the label an
    annotator gives most, named in a near-chance reason ('' for none)."""
    skill, low, high = (np.asarray(x, dtype=float) for x in (skill, low, high))
    n = np.asarray(n_responses, dtype=float)
    cartel = np.asarray(in_cartel, dtype=bool)
    band = rule.chance_band
    sure = (1 + rule.level) / 2
    undefined = ~(np.isfinite(skill) & np.isfinite(low) & np.isfinite(high))
    narrow = (high - low) <= rule.max_width
    n_eff = n if n_effective is None else np.asarray(n_effective, dtype=float)
    few_effective = np.rint(n_eff) < rule.min_responses  # an estimate: 10 certain responses may come out 9.99
    pct = f"{100 * rule.level:.0f}%"
    if p_near is None:  # read off the interval (module docstring)
        p_near = np.where(high < band, sure, np.where(narrow & (skill < band), rule.flag_probability, 0.0))
    if p_worse is None:
        p_worse = np.where(high < 0, sure, 0.0)
    p_near, p_worse = np.asarray(p_near, dtype=float), np.asarray(p_worse, dtype=float)
    r_near = p_near if robust_p_near is None else np.asarray(robust_p_near, dtype=float)
    r_worse = p_worse if robust_p_worse is None else np.asarray(robust_p_worse, dtype=float)
    r_skill = skill if robust_skill is None else np.asarray(robust_skill, dtype=float)
    adversarial = (p_worse >= sure) & (skill <= -band)
    p0 = np.zeros(len(skill)) if prior_near is None else np.nan_to_num(np.asarray(prior_near, dtype=float))
    r_p0 = p0 if robust_prior_near is None else np.nan_to_num(np.asarray(robust_prior_near, dtype=float))
    near = p_near >= np.maximum(rule.flag_probability, p0)
    near_robust = r_near >= np.maximum(rule.flag_probability, r_p0)
    weak = f"flagged only against the estimated labels: {robust_why or 'the reference is uncertain'}"
    nothing = np.full(len(skill), "", dtype=object)
    moved = nothing if swap_words is None else np.asarray(swap_words, dtype=object)
    mostly = nothing if top_words is None else np.asarray(top_words, dtype=object)
    r_low = np.full(len(skill), np.nan) if relabelled_low is None else np.asarray(relabelled_low, dtype=float)
    with np.errstate(invalid="ignore"):
        swaps = (moved != "") & (r_low >= band)
    swap_reasons = np.array(
        [
            f"its labels follow the rest of the crowd's with a swap: it answers {m}; relabelled so, the {pct} "
            f"interval of its skill above chance is above {band:g} (from {lo:.2f}; the relabelling chosen on half of "
            f"its items and checked on the other half), while as written its skill is {s:.2f}"
            for m, lo, s in zip(moved, np.nan_to_num(r_low), np.nan_to_num(skill))
        ],
        dtype=object,
    )
    with np.errstate(invalid="ignore"):
        chance_words = [
            f"skill above chance is below {band:g} with probability {p:.2f} ({p_fav:.2f} with the plausible models "
            "averaged and the labels only as right as the low end of their honest range): answers barely better than "
            "guessing"
            for p, p_fav in zip(np.nan_to_num(p_near), np.nan_to_num(r_near))
        ]
        chance_words = [f"{m}; {w}" if m else w for m, w in zip(mostly, chance_words)]
    cases = [
        (cartel, DEPENDENT, "in a group that agrees beyond its members' accuracy on answers the rest rejects"),
        (
            n < rule.min_responses,
            TOO_FEW,
            f"fewer than {rule.min_responses} responses on items someone else labelled too",
        ),
        (undefined, TOO_FEW, "skill above chance is undefined (one label only, on items of that label)"),
        (few_effective, TOO_FEW, "the labels of its items are too uncertain to judge it"),
        (
            adversarial & (r_worse >= sure) & (r_skill <= -band),
            ADVERSARIAL,
            f"the {pct} interval of skill above chance is wholly below 0 and the estimate below −{band:g}",
        ),
        (
            (low >= band) & (skill >= rule.reliable_skill),
            RELIABLE,
            f"the {pct} interval is above {band:g} and the estimate reaches {rule.reliable_skill:g}",
        ),
        (low >= band, NOISY, f"the {pct} interval is above {band:g} but the estimate is below {rule.reliable_skill:g}"),
        (near & near_robust & swaps, SWAPS, swap_reasons),
        (near & near_robust, SPAMMER, np.array(chance_words, dtype=object)),
        (adversarial | near, TOO_FEW, weak),
        (narrow & (skill >= band), NOISY, f"a precise estimate above {band:g} (interval crosses {band:g})"),
        (
            narrow,
            TOO_FEW,
            f"skill above chance is not clearly below {band:g}: a flag needs a probability of at least "
            f"{rule.flag_probability:g} that it is, and more than the prior alone gives",
        ),
    ]
    verdict = np.full(len(skill), TOO_FEW, dtype=object)
    reason = np.full(len(skill), f"the {pct} interval is wider than {rule.max_width:g}: more responses needed", object)
    decided = np.zeros(len(skill), dtype=bool)
    for mask, word, why in cases:
        take = np.asarray(mask, dtype=bool) & ~decided
        verdict[take] = word
        reason[take] = why[take] if isinstance(why, np.ndarray) else why
        decided |= take
    with np.errstate(invalid="ignore"):  # a swap that leaves some labels right: noisy, the reason names it
        named = (verdict == NOISY) & swaps & (r_low > low)
    reason[named] = [
        f"{r}; it mostly answers {m} (relabelled so, its skill is higher)" for r, m in zip(reason[named], moved[named])
    ]
    if n_effective is not None:
        unsure = (verdict == TOO_FEW) & (n >= rule.min_responses) & (n_eff < n / 2)
        reason[unsure] = [
            f"the labels of its items are too uncertain to judge it: its {int(a)} responses weigh like {b:.0f} on "
            "certain labels"
            for a, b in zip(n[unsure], n_eff[unsure])
        ]
    return verdict, reason
