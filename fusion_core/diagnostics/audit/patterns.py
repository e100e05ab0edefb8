"""What an annotator's labels look like beside the rest of the crowd's, for the verdicts' reasons (docs/AUDIT.md,
"The verdict rule"): the label they give most and how often, and labels they use for another class consistently.

Skill above chance (:mod:`.evidence`) credits a response only when it *equals* the reference's label.  An annotator
whose labels are a permutation of the crowd's — who writes '2' for the crowd's '1' and '1' for its '2' — reports a
label that depends on the item as much as an accurate annotator's does, yet their skill is near 0: "near chance"
would say their answers barely depend on the items, which is false.  A spammer's labels are independent of the
true class (Raykar & Yu 2012, §2: every row of the confusion matrix is the same); a permutation's are not (the
confusion matrix is a permuted diagonal), and a model with confusion matrices (Dawid & Skene 1979) reads them
correctly — the annotator needs their labels' meaning corrected, not to be dropped.

**Relabelled skill.** Against the leave-self-out posterior ``q⁻ʲ`` of :mod:`.evidence` (the rest of the crowd's
labels, the annotator's own vote divided out), the expected confusion counts of j are
``E_j[t, l] = Σ_{responses (i, l) of j} q⁻ʲ_i[t]`` (the Dawid–Skene M-step, eq. 2.3).  Reading each reported label
l as the class it most often stands for, ``m(l) = argmax_t E_j[t, l]``, gives the accuracy of the relabelled
answers; a map chosen on the same responses it is scored on flatters a guesser, so it is **cross-fitted**: the
items are split in two halves (item index parity), the map is chosen on one half and scored on the other, and the
two scores are added (sample splitting; the score is then an honest estimate of the map's accuracy).  Chance for
the relabelled answers is ``Σ_l r_l π_{m(l)}`` (the annotator's label shares r, the class prior π), and the
interval is the Beta of :mod:`.evidence` with the counts scaled to the effective responses.  A **swap** is a map
that is one-to-one on the labels the annotator uses (at least ``min_share`` of their responses) and not the
identity: the verdict rule (:mod:`.rules`) calls an annotator who would be near chance "swaps labels" when the
whole interval of their relabelled skill is above the band — only for three labels or more, since on two labels a
swap is "worse than chance", which has its own verdict.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from fusion_core.data.responses import Responses

MIN_SHARE = 0.05
"""Labels an annotator uses on fewer than this share of their responses do not count against a one-to-one map."""
MOSTLY_ONE = 0.8
"""Share of an annotator's responses from which their most given label is named in the reason of a flag ..."""
OVERUSE = 0.1
"""... when it is also at least this much above the rest of the crowd's share of that class on the same items (on
88/12 labels an annotator giving the common label on 85 % of their responses does not over-use it)."""


@dataclass(frozen=True)
class LabelPatterns:
    """Per annotator (``workers`` order): ``top_label`` (code of the label they give most), ``top_share`` (its share
    of their responses on shared items) and ``crowd_share`` (the rest of the crowd's share of that class on the same
    items, from the leave-self-out posterior); ``mapping`` (annotators × labels: the class each reported label
    stands for, chosen on all their responses), ``swap`` (the map is one-to-one on the labels they use and not the
    identity), ``relabelled_skill`` / ``relabelled_low`` (cross-fitted skill above chance of the relabelled answers
    and the low end of its interval at ``level``); ``classes``: the labels as written."""

    workers: pd.Index
    classes: pd.Index
    top_label: np.ndarray
    top_share: np.ndarray
    crowd_share: np.ndarray
    mapping: np.ndarray
    swap: np.ndarray
    relabelled_skill: np.ndarray
    relabelled_low: np.ndarray
    level: float

    def swap_words(self) -> np.ndarray:
        """Per annotator, the labels they use for another class, in plain words ('' where none)."""
        out = np.full(len(self.workers), "", dtype=object)
        for j in np.flatnonzero(self.swap):
            moved = [
                f"'{self.classes[lab]}' where the rest of the crowd says '{self.classes[t]}'"
                for lab, t in enumerate(self.mapping[j])
                if t != lab
            ]
            out[j] = ", ".join(moved)
        return out

    def top_words(self) -> np.ndarray:
        """Per annotator who gives one label on at least :data:`MOSTLY_ONE` of their responses, and :data:`OVERUSE`
        more often than the rest of the crowd labels their items so, that fact in plain words ('' for the others)."""
        out = np.full(len(self.workers), "", dtype=object)
        top, crowd = np.nan_to_num(self.top_share), np.nan_to_num(self.crowd_share)
        for j in np.flatnonzero((top >= MOSTLY_ONE) & (top - crowd >= OVERUSE)):
            out[j] = (
                f"gives '{self.classes[self.top_label[j]]}' on {100 * self.top_share[j]:.0f}% of its responses (the "
                f"rest of the crowd on {100 * self.crowd_share[j]:.0f}% of the same items)"
            )
        return out


def _counts(
    worker: np.ndarray, label: np.ndarray, q: np.ndarray, n_workers: int, k: int
) -> tuple[np.ndarray, np.ndarray]:
    """Expected confusion counts (annotators × true × reported) under the rows ``q`` and the counts of each reported
    label (annotators × reported)."""
    key = worker * k + label
    e = np.stack([np.bincount(key, weights=q[:, t], minlength=n_workers * k).reshape(n_workers, k) for t in range(k)])
    return e.transpose(1, 0, 2), np.bincount(key, minlength=n_workers * k).reshape(n_workers, k).astype(float)


def _best_map(e: np.ndarray) -> np.ndarray:
    """Per annotator, the class each reported label most often stands for (itself on ties and unused labels)."""
    k = e.shape[1]
    ident = np.broadcast_to(np.arange(k), (e.shape[0], k))
    diag = np.diagonal(e, axis1=1, axis2=2)
    return np.where(diag >= e.max(axis=1) - 1e-12, ident, e.argmax(axis=1))


def label_patterns(
    resp: Responses,
    posterior: np.ndarray,
    *,
    class_prior: np.ndarray | None,
    confusion: np.ndarray | None,
    n_effective: np.ndarray | None = None,
    level: float = 0.9,
) -> LabelPatterns:
    """The label patterns of every annotator (module docstring) against the leave-self-out posterior (``confusion``:
    the fit's, workers × true × reported, divides each annotator's own vote out; without it the posterior is used
    as it is); ``n_effective`` (:mod:`.evidence`) scales the relabelled skill's interval."""
    q = np.asarray(posterior, dtype=float)
    w, k = resp.n_workers, resp.n_classes
    prior = np.asarray(class_prior if class_prior is not None else q.mean(axis=0), dtype=float)
    prior = prior / prior.sum()
    shared = resp.responses_per_item[resp.item] >= 2
    item, wk, lab = resp.item[shared], resp.worker[shared], resp.label[shared]
    rows = q[item]
    if confusion is not None:
        own = np.clip(np.asarray(confusion, dtype=float)[wk, :, lab], 1e-3, 1.0)
        rows = rows / own
        rows /= np.maximum(rows.sum(axis=1, keepdims=True), 1e-300)
    halves = [_counts(wk[item % 2 == h], lab[item % 2 == h], rows[item % 2 == h], w, k) for h in (0, 1)]
    e_all, n_all = halves[0][0] + halves[1][0], halves[0][1] + halves[1][1]
    n = n_all.sum(axis=1)
    right, chance = np.zeros(w), np.zeros(w)
    for h in (0, 1):
        m = _best_map(halves[1 - h][0])
        right += np.take_along_axis(halves[h][0], m[:, None, :], axis=1)[:, 0].sum(axis=1)
        chance += (halves[h][1] * prior[m]).sum(axis=1)
    mapping = _best_map(e_all)
    used = n_all >= MIN_SHARE * np.maximum(n, 1.0)[:, None]
    stands_for = np.zeros((w, k))  # how many used labels stand for each class
    for lab_ in range(k):
        stands_for[np.arange(w), mapping[:, lab_]] += used[:, lab_]
    one_to_one = (stands_for <= 1).all(axis=1)
    moved = (mapping != np.arange(k)) & used
    with np.errstate(divide="ignore", invalid="ignore"):
        c = chance / n
        acc = right / n
        scale = np.clip(np.nan_to_num(n_effective if n_effective is not None else n) / np.maximum(n, 1.0), 0.0, 1.0)
        low = stats.beta.ppf((1 - level) / 2, 1 + right * scale, 1 + (n - right) * scale)
        skill, skill_low = (acc - c) / (1 - c), (low - c) / (1 - c)
        top = n_all.argmax(axis=1)
        top_share = np.take_along_axis(n_all, top[:, None], axis=1)[:, 0] / n
        crowd_share = np.take_along_axis(e_all.sum(axis=2), top[:, None], axis=1)[:, 0] / n
    seen = n > 0
    nan = np.full(w, np.nan)
    return LabelPatterns(
        workers=pd.Index(resp.workers, name="worker"),
        classes=pd.Index(resp.classes),
        top_label=top,
        top_share=np.where(seen, top_share, nan),
        crowd_share=np.where(seen, crowd_share, nan),
        mapping=mapping,
        swap=seen & one_to_one & moved.any(axis=1) & (k >= 3),
        relabelled_skill=np.where(seen, skill, nan),
        relabelled_low=np.where(seen, skill_low, nan),
        level=level,
    )
