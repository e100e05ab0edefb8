"""The verdict rule: one plain word per annotator from their accuracy *with its uncertainty* (docs/AUDIT.md).

Every threshold is declared once, in :class:`VerdictRule`; the rule is a pure function of per-annotator arrays
(:func:`decide`), so it is tested on hand-built cases.

The quantity judged is the annotator's **skill above chance** ``κ_j = (a_j − c_j) / (1 − c_j)``, where ``a_j`` is
their accuracy against the estimated true labels and ``c_j = Σ_k π_k r_jk`` the accuracy an annotator reporting
label k with their own frequency ``r_jk`` would reach by chance under the class prior π (Cohen's chance
correction for one annotator against the truth).  κ = 0 is guessing, 1 perfect, < 0 worse than chance.  Its
interval is the Beta posterior interval of ``a_j`` mapped through the same formula.  In order:

1. **dependent group (copies or collusion)** — a member of a group the collusion check found (its members agree
   beyond their skills on answers the rest rejects: copies of one source or collusion, the words of
   :mod:`fusion_core.diagnostics.cartels.words`; it overrides the accuracy, which a shared source distorts);
2. **not enough responses to tell** — fewer than ``min_responses`` responses on items someone else labelled too,
   or responses worth fewer than that on certain labels (``n_effective``, :mod:`.evidence`: the rest of the crowd
   cannot tell the labels of the annotator's items);
3. **worse than chance** (adversarial) — the whole interval is below 0 and the estimate below ``−chance_band``
   (a guesser's estimate falls below 0 half of the time, and its interval excludes 0 one time in twenty);
4. **reliable** / **noisy** — the whole interval is above ``chance_band``: reliable when the estimate reaches
   ``reliable_skill``, noisy otherwise;
5. **near chance** (spammer) — the whole interval is below ``chance_band``;
6. the interval straddles ``chance_band``: when it is narrower than ``max_width`` the estimate decides (near
   chance below the band, noisy above); otherwise **not enough responses to tell**.
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
VERDICTS = (ADVERSARIAL, DEPENDENT, SPAMMER, TOO_FEW, NOISY, RELIABLE)
"""All verdicts, worst first (the order tables and charts use)."""
ACCEPTABLE = (RELIABLE, NOISY)
"""Verdicts that do not flag an annotator."""

SEVERITY = {v: i for i, v in enumerate(VERDICTS)}


@dataclass(frozen=True)
class VerdictRule:
    """The thresholds of the verdict rule (module docstring), declared once.

    ``level``: probability of the credible interval; ``min_responses``: responses on shared items needed before
    any accuracy verdict; ``chance_band``: skill above chance below which an annotator is "near chance";
    ``reliable_skill``: skill above chance from which an annotator is "reliable"; ``max_width``: widest skill
    interval on which the estimate may decide when the interval straddles ``chance_band``.
    """

    level: float = 0.90
    min_responses: int = 10
    chance_band: float = 0.15
    reliable_skill: float = 0.5
    max_width: float = 0.4

    def describe(self) -> str:
        """The rule in one paragraph of plain words (shown in the app and the report)."""
        return (
            f"Skill above chance is 0 for guessing and 1 for always right. With its {100 * self.level:.0f}% "
            f"interval: members of a group that agrees beyond its skills are a '{DEPENDENT}'; fewer than {self.min_responses} responses on items others "
            "labelled too (or responses worth fewer than that, when the labels of those items are too uncertain) "
            f"is 'not enough responses to tell'; an interval wholly below 0 with an estimate below "
            f"−{self.chance_band:g} is 'worse than chance'; "
            f"wholly above {self.chance_band:g} is 'reliable' when the estimate reaches {self.reliable_skill:g}, "
            f"'noisy' otherwise; wholly below {self.chance_band:g} is 'near chance'; an interval across "
            f"{self.chance_band:g} decides by the estimate when narrower than {self.max_width:g}, else 'not enough "
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
    robust_skill: np.ndarray | None = None,
    robust_high: np.ndarray | None = None,
    robust_why: str = "",
) -> tuple[np.ndarray, np.ndarray]:
    """Verdict and its reason (plain words) per annotator from the skill above chance, its interval, the number
    of responses on shared items and cartel membership (arrays of equal length).  ``n_effective`` (responses on
    certain labels worth the same evidence, :mod:`.evidence`) counts like ``n_responses`` for ``min_responses`` (the
    evidence, not the count of responses, must reach it), and words the reason of an undecided annotator whose
    responses are many but whose items' labels are too uncertain.  ``robust_skill``/``robust_high``: the most
    favourable estimate and upper end any plausible reference allows (:mod:`.reference`); a flag (worse than chance,
    near chance) must hold on them too, else the annotator is "not enough responses to tell" for ``robust_why``."""
    skill, low, high = (np.asarray(x, dtype=float) for x in (skill, low, high))
    n = np.asarray(n_responses, dtype=float)
    cartel = np.asarray(in_cartel, dtype=bool)
    band = rule.chance_band
    undefined = ~(np.isfinite(skill) & np.isfinite(low) & np.isfinite(high))
    narrow = (high - low) <= rule.max_width
    n_eff = n if n_effective is None else np.asarray(n_effective, dtype=float)
    few_effective = np.rint(n_eff) < rule.min_responses  # an estimate: 10 certain responses may come out 9.99
    pct = f"{100 * rule.level:.0f}%"
    r_skill = skill if robust_skill is None else np.asarray(robust_skill, dtype=float)
    r_high = high if robust_high is None else np.asarray(robust_high, dtype=float)
    adversarial = (high < 0) & (skill <= -band)
    chance_interval = high < band
    chance_estimate = narrow & (skill < band)
    chance_robust = (r_high < band) | (narrow & (r_skill < band))  # the same rule on the favourable reference
    weak = f"flagged only against the estimated labels: {robust_why or 'the reference is uncertain'}"
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
            adversarial & (r_high < 0) & (r_skill <= -band),
            ADVERSARIAL,
            f"the {pct} interval of skill above chance is wholly below 0 and the estimate below −{band:g}",
        ),
        (adversarial, TOO_FEW, weak),
        (
            (low >= band) & (skill >= rule.reliable_skill),
            RELIABLE,
            f"the {pct} interval is above {band:g} and the estimate reaches {rule.reliable_skill:g}",
        ),
        (low >= band, NOISY, f"the {pct} interval is above {band:g} but the estimate is below {rule.reliable_skill:g}"),
        (
            chance_interval & chance_robust,
            SPAMMER,
            f"the {pct} interval is wholly below {band:g}: answers barely better than guessing",
        ),
        (chance_interval, TOO_FEW, weak),
        (
            chance_estimate & chance_robust,
            SPAMMER,
            f"a precise estimate below {band:g} (interval crosses {band:g})",
        ),
        (chance_estimate, TOO_FEW, weak),
        (narrow, NOISY, f"a precise estimate above {band:g} (interval crosses {band:g})"),
    ]
    verdict = np.full(len(skill), TOO_FEW, dtype=object)
    reason = np.full(len(skill), f"the {pct} interval is wider than {rule.max_width:g}: more responses needed", object)
    decided = np.zeros(len(skill), dtype=bool)
    for mask, word, why in cases:
        take = np.asarray(mask, dtype=bool) & ~decided
        verdict[take] = word
        reason[take] = why
        decided |= take
    if n_effective is not None:
        unsure = (verdict == TOO_FEW) & (n >= rule.min_responses) & (n_eff < n / 2)
        reason[unsure] = [
            f"the labels of its items are too uncertain to judge it: its {int(a)} responses weigh like {b:.0f} on "
            "certain labels"
            for a, b in zip(n[unsure], n_eff[unsure])
        ]
    return verdict, reason
