"""Is the recommended labelling safe to use?  Three checks that do not trust the chosen model (docs/AUDIT.md,
"Never confidently wrong"):

1. **Departure from the vote.**  Labels that differ from plurality vote, and among those the items where the vote
   was close (a margin of at most one response).  A model that corrects the vote changes labels in both
   directions; a model whose latent classes drift towards a few annotators' preferences moves many close items the
   same way.  One direction taking most of the close changes is reported as a warning, with the items.
2. **Dependence on the model choice.**  The recommended method keeps the simplest model the held-out evidence
   cannot tell from the best; the other plausible models (``ModelChoice.alternatives``, fitted on all responses)
   are the labellings the data support equally well.  Items they label otherwise depend on the model choice.
3. **An honest accuracy range.**  The model's own expected accuracy (``Σ_i q_i[label_i] / n``) assumes the model
   is right.  Two checks that do not: (a) the accuracy each plausible alternative model gives the chosen labels,
   and (b) the held-out check — labels fitted without a fold of responses are compared with those hidden
   responses; when they agree less than the model predicts, the gap, divided by how much an annotator's response
   depends on the truth, is what the model overstates (``HeldoutCheck.calibrated``).  The estimate is the held-out
   figure (the model's own when there is none), the range spans every figure with its sampling interval.  Where
   the range is wider than :data:`PINNED_WIDTH` the audit says the accuracy cannot be pinned down without gold
   labels instead of showing one big number.  (c) The difficulty check (:mod:`.difficulty`): the two-type model's
   figure and the figure with its hard items' labels right only at chance join the range (both equal the
   one-type figure when no item looks hard); when the check finds items of differing difficulty, the audit says
   the accuracy cannot be estimated from the responses alone and gives no single figure (``summary.json``:
   ``accuracy_can_be_estimated`` false, ``accuracy_estimate`` null), whatever the range's width.  (d) The
   *population* figure (:func:`population_accuracy`): every figure above takes the truth to be a fixed class that
   the annotators' errors scatter around independently.  When annotators share an item's confusion, the known
   answer behaves like one more draw from the item's own responses (gold made by people as variable as the crowd),
   and a label is right as often as its share of the item's responses (the figure carries its sampling interval,
   as the model's own does).  No response-based check can tell the two
   apart; the figure joins the range when the crowd shows errors shared item by item (the difficulty check's
   ``overdispersed``: more unanimous items than equally hard items allow) or when the accuracy cannot be
   estimated (then every plausible model counts).  (e) *Stacking the two* (:mod:`.stacking`): the latent-class and
   population models are weighed by how well each predicts responses left out of their item (Yao et al. 2018),
   and the estimate is ``ŵ × (latent-class estimate) + (1 − ŵ) × (population figure)``: the chance that a known
   answer drawn from the stacked model agrees with the label.  A well-specified crowd keeps ``ŵ ≈ 1`` (its estimate
   and range do not move); the estimate's interval (``ŵ`` ± its standard error, each figure with its sampling
   interval) joins the range.  The verdicts' reference (``reference_low``) leaves it out, as it leaves out the
   population figure.  (f) *One-label annotators* (:mod:`.abstention`): when most responses come from them, the
   model in which *whether* an annotator responds depends on the class (data programming's label model) gives one
   more plausible figure, with its interval, and stands for the latent-class estimate; the accuracy still counts as
   not estimable (the model rests on firing being independent given the class, which the responses cannot check).
   (g) *Dependent annotators* (:mod:`.dependence`): when pairs of annotators agree more than a one-factor model of
   independent errors allows (copies, classifiers trained on the same features), the one-type model refitted with
   each response weighted by its design effect (copies count once) gives one more figure with its interval, and
   its difference from the one-type figure moves the latent-class estimate (not the abstention model's).  Like
   stacking, it stays out of ``reference_low``: verdicts see nothing new.
   (h) *Graded labels* (:mod:`.latent_scale`): when the levels are ordered (``ranks``), the latent-scale model (each
   item a continuous value discretised at the crowd's cut points) is stacked as a third model, the estimate is
   ``Σ_m ŵ_m × figure_m`` over the latent-class, latent-scale and population figures (interval: the weights'
   sandwich covariance by the delta method plus each figure's sampling interval), and its figure joins the range
   when its weight's lower end (at the verdict level) is above 0.  It too stays out of ``reference_low``.
   (i) *Copies that are most of the crowd* (:mod:`.copy_block`): a tight block the pair test cannot see (its
   inner agreement beyond what the members' agreement with the others implies); the figure with the block counted
   as one source joins the range (out of ``reference_low``) and the accuracy cannot be estimated.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
from scipy import stats

from fusion_core.data.responses import Responses
from fusion_core.diagnostics.audit.abstention import AbstentionFit, abstention_accuracy
from fusion_core.diagnostics.audit.difficulty import DifficultyCheck, difficulty_mixture
from fusion_core.diagnostics.audit.items import label_quality
from fusion_core.diagnostics.audit.latent_scale import level_ranks
from fusion_core.methods.results import FitResult

LOW_MARGIN = 1
"""A vote is close when its top label leads the next by at most this many responses."""
ONE_WAY_SHARE = 0.8
"""Share of the close changes in one direction from which the departure is called one-way."""
MIN_CHANGES = 20
"""Fewest close changes (and at least 2 % of the items) before a one-way departure is reported."""
PINNED_WIDTH = 0.1
ONE_LABEL_MIN = 10
"""Responses from which an annotator who always gives the same label counts as a one-label annotator …"""
ONE_LABEL_SHARE = 0.5
"""… and the share of all responses from such annotators beyond which the accuracy cannot be estimated."""
"""Widest accuracy range (high − low) still reported as one estimate."""


@dataclass(frozen=True)
class VoteDeparture:
    """Labels that differ from plurality vote (``changed``, per item), those on close votes (``close``), and the
    most common direction of the close changes: ``direction`` = (vote label, chosen label), ``n_direction`` of
    them; ``one_way`` when that direction takes at least :data:`ONE_WAY_SHARE` of at least
    :data:`MIN_CHANGES` close changes (and ≥ 2 % of the items)."""

    changed: np.ndarray
    close: np.ndarray
    direction: tuple[str, str] | None
    n_direction: int
    one_way: bool
    direction_codes: tuple[int, int] | None = None


@dataclass(frozen=True)
class AccuracyRange:
    """The labels' accuracy: ``estimate`` and its range ``low``–``high`` at ``level``; ``model`` the chosen model's
    own figure, ``heldout`` the held-out check's (None when auto did not choose), ``by_model`` the accuracy each
    plausible alternative model gives the chosen labels, ``difficulty`` the difficulty check (None when not run);
    ``one_label_share`` the share of responses from annotators who always give the same label (at least
    :data:`ONE_LABEL_MIN` responses); ``identifiable`` unless that check finds items of differing difficulty or
    that share exceeds :data:`ONE_LABEL_SHARE`; ``pinned`` when identifiable and the range is at most
    :data:`PINNED_WIDTH` wide; ``population`` the population figure (:func:`population_accuracy`; None without
    items of two or more responses), ``population_in_range`` whether it joined the range (module docstring, 3d);
    ``latent_estimate`` the latent-class models' estimate (the held-out figure, or the model's own; the abstention
    model's when fitted) and
    ``latent_weight`` the stacking weight that mixed it with the population figure into ``estimate`` (module
    docstring, 3e; None when not stacked); ``abstention`` the model in which responding depends on the class
    (:mod:`.abstention`; fitted when most responses come from one-label annotators, else None);
    ``estimate_low``–``estimate_high`` the stacked estimate's own interval (NaN when not stacked)."""

    estimate: float
    low: float
    high: float
    level: float
    model: float
    heldout: float | None
    by_model: tuple[tuple[str, float], ...]
    difficulty: DifficultyCheck | None = None
    one_label_share: float = 0.0
    population: float | None = None
    population_in_range: bool = False
    latent_low: float | None = None
    latent_estimate: float | None = None
    latent_weight: float | None = None
    abstention: AbstentionFit | None = None
    estimate_low: float = float("nan")
    estimate_high: float = float("nan")

    @property
    def reference_low(self) -> float:
        """The low end over the latent-truth figures only (the population figure left out): what an annotator's
        skill may be re-scaled by (:mod:`.reference`).  The attenuation of a skill by an unsure reference assumes the
        reference's errors are independent of the annotator's; under the population model they are shared by
        construction, and a skill measured against the rest of the crowd is already measured against it."""
        return self.low if self.latent_low is None else self.latent_low

    @property
    def shared_confusion(self) -> bool:
        """The crowd is unanimous on more items than a model of equally hard items allows (the difficulty check's
        ``overdispersed``): errors shared item by item, so the population figure joins the range."""
        return bool(self.difficulty is not None and self.difficulty.overdispersed)

    @property
    def one_label(self) -> bool:
        return bool(self.one_label_share > ONE_LABEL_SHARE)

    @property
    def copies_majority(self) -> bool:
        """A block of copies the pair test cannot see (:mod:`.copy_block`): the responses support two readings."""
        return bool(self.difficulty is not None and self.difficulty.copy_block is not None)

    @property
    def identifiable(self) -> bool:
        return not (self.one_label or self.copies_majority or (self.difficulty is not None and self.difficulty.flagged))

    @property
    def pinned(self) -> bool:
        return bool(self.identifiable and self.high - self.low <= PINNED_WIDTH)


@dataclass(frozen=True)
class LabelSafety:
    """The three checks (module docstring): ``departure``, the alternatives and the items they label otherwise
    (``depends``, per item; ``alternative_labels`` class codes, alternatives × items), and ``accuracy``."""

    items: pd.Index
    classes: pd.Index
    label: np.ndarray
    majority: np.ndarray
    margin: np.ndarray
    departure: VoteDeparture
    alternatives: tuple[str, ...]
    alternative_labels: np.ndarray
    depends: np.ndarray
    accuracy: AccuracyRange

    def frame(self) -> pd.DataFrame:
        """The items whose label depends on the model choice or is a close one-way change: label, majority vote,
        vote margin (responses), each alternative's label, and why."""
        one_way = np.zeros(len(self.items), dtype=bool)
        if self.departure.one_way and self.departure.direction_codes is not None:
            a, b = self.departure.direction_codes
            one_way = self.departure.close & (self.majority == a) & (self.label == b)
        sel = np.flatnonzero(self.depends | one_way)
        why = np.where(
            self.depends[sel] & one_way[sel],
            "depends on the model; close vote changed one way",
            np.where(self.depends[sel], "depends on the model", "close vote changed one way"),
        )
        df = pd.DataFrame(
            {
                "label": self.classes.take(self.label[sel]),
                "majority vote": self.classes.take(self.majority[sel]),
                "vote margin": self.margin[sel],
            },
            index=pd.Index(self.items.take(sel), name="task"),
        )
        for name, lab in zip(self.alternatives, self.alternative_labels):
            df[f"label by {name}"] = self.classes.take(lab[sel])
        df["why"] = why
        return df

    def summary(self) -> dict:
        """The checks as plain JSON values (for ``summary.json``)."""
        d, acc = self.departure, self.accuracy
        return {
            "labels_changed_from_vote": int(d.changed.sum()),
            "close_votes_changed": int((d.changed & d.close).sum()),
            "one_way_departure": bool(d.one_way),
            "departure_direction": list(d.direction) if d.direction is not None else None,
            "departure_direction_count": int(d.n_direction),
            "plausible_alternatives": list(self.alternatives),
            "labels_depending_on_model": int(self.depends.sum()),
            "accuracy_estimate": acc.estimate if acc.identifiable else None,
            "accuracy_low": acc.low,
            "accuracy_high": acc.high,
            "accuracy_level": acc.level,
            "accuracy_model_says": acc.model,
            "accuracy_heldout_check": acc.heldout,
            "accuracy_by_alternative": dict(acc.by_model),
            "accuracy_pinned_down": acc.pinned,
            "accuracy_can_be_estimated": acc.identifiable,
            "accuracy_difficulty_check": acc.difficulty.summary() if acc.difficulty is not None else None,
            "responses_from_one_label_annotators": acc.one_label_share,
            "accuracy_population": acc.population,
            "accuracy_population_in_range": acc.population_in_range,
            "accuracy_errors_shared_item_by_item": acc.shared_confusion,
            "accuracy_latent_class_estimate": acc.latent_estimate,
            "accuracy_latent_class_weight": acc.latent_weight,
            "accuracy_estimate_interval": [acc.estimate_low, acc.estimate_high]
            if acc.identifiable and np.isfinite(acc.estimate_low)
            else None,
            "accuracy_abstention_model": acc.abstention.summary() if acc.abstention is not None else None,
        }


def vote_margin(resp: Responses) -> tuple[np.ndarray, np.ndarray]:
    """Per item: the top vote count minus the second (in responses), and the label with most votes."""
    votes = resp.vote_counts()
    top2 = -np.sort(-votes, axis=1)[:, :2] if votes.shape[1] > 1 else np.c_[votes, np.zeros(len(votes))]
    return (top2[:, 0] - top2[:, 1]).astype(int), votes.argmax(axis=1)


def vote_departure(label: np.ndarray, majority: np.ndarray, margin: np.ndarray, classes: pd.Index) -> VoteDeparture:
    """The departure check (module docstring, 1)."""
    changed = label != majority
    close = margin <= LOW_MARGIN
    sel = changed & close
    n_close = int(sel.sum())
    if n_close == 0:
        return VoteDeparture(changed, close, None, 0, False)
    k = len(classes)
    pair = np.bincount(majority[sel] * k + label[sel], minlength=k * k)
    top = int(pair.argmax())
    n_dir = int(pair[top])
    one_way = bool(n_close >= MIN_CHANGES and n_close >= 0.02 * len(label) and n_dir >= ONE_WAY_SHARE * n_close)
    codes = (top // k, top % k)
    return VoteDeparture(changed, close, (str(classes[codes[0]]), str(classes[codes[1]])), n_dir, one_way, codes)


def one_label_share(resp: Responses) -> float:
    """Share of the responses that come from annotators who gave at least :data:`ONE_LABEL_MIN` responses, all
    with the same label.  Such an annotator's confusion rows are identical (a labelling function that votes one
    class, ``fusion_core.simulate.weak``): agreement cannot tell how often they are right."""
    if resp.n_responses == 0:
        return 0.0
    n = resp.responses_per_worker
    used = np.bincount(resp.worker * resp.n_classes + resp.label, minlength=resp.n_workers * resp.n_classes)
    distinct = (used.reshape(resp.n_workers, resp.n_classes) > 0).sum(axis=1)
    return float(n[(distinct == 1) & (n >= ONE_LABEL_MIN)].sum() / resp.n_responses)


def population_shares(resp: Responses, label: np.ndarray) -> np.ndarray | None:
    """Per item, the chance that a label is right if the truth is one more draw from the item's own responses
    (module docstring, 3d): the share of the item's responses that give its label ``label`` (class codes).  An
    item with one response shows nothing of its own distribution; it gets the mean share of its label over the
    items with two or more responses labelled so (over all such items when none is).  None when no item has two
    or more responses."""
    label = np.asarray(label, dtype=np.int64)
    counts = resp.vote_counts(use_confidence=False)
    n = counts.sum(axis=1)
    several = n >= 2
    if not several.any():
        return None
    share = counts[np.arange(len(label)), label] / np.maximum(n, 1)
    K = counts.shape[1]
    hits = np.bincount(label[several], weights=share[several], minlength=K)
    items = np.bincount(label[several], minlength=K)
    base = np.where(items > 0, hits / np.maximum(items, 1), share[several].mean())
    return np.where(several, share, base[label])


def population_accuracy(resp: Responses, label: np.ndarray) -> float | None:
    """The population figure: the mean of :func:`population_shares` over the items (None when it has none)."""
    shares = population_shares(resp, label)
    return None if shares is None else float(shares.mean())


def accuracy_range(
    fit: FitResult,
    label: np.ndarray,
    level: float = 0.9,
    difficulty: DifficultyCheck | None = None,
    one_label: float = 0.0,
    *,
    population: np.ndarray | None = None,
    abstention: AbstentionFit | None = None,
) -> AccuracyRange:
    """The honest accuracy range (module docstring, 3); ``difficulty`` the difficulty check of the labels,
    ``one_label`` the share of responses from one-label annotators (:func:`one_label_share`), ``population`` the
    per-item shares of the population figure (:func:`population_shares`): their mean, with its sampling interval
    (Poisson-binomial, as the model's own figure), joins the range when the difficulty check finds errors shared
    item by item or the accuracy cannot be estimated; ``abstention`` (:mod:`.abstention`) joins the latent-truth
    figures with its interval."""
    idx = np.arange(len(label))
    own = label_quality(fit.posterior, label, level)  # the model's own figure and its interval
    z = float(stats.norm.ppf(0.5 + level / 2))
    model = own.accuracy
    figures = [own.low, own.high]
    by_model: list[tuple[str, float]] = []
    sel = fit.selection
    heldout, sd = None, 0.0
    if sel is not None:
        for name, post in zip(sel.alternatives, sel.alternative_posteriors):
            v = float(np.clip(post[idx, label], 0.0, 1.0).mean())
            by_model.append((name, v))
            figures.append(v)
        if sel.checks:
            heldout = float(np.mean([c.calibrated for c in sel.checks]))
            a = float(np.mean([c.agreement for c in sel.checks]))
            disc = float(np.mean([max(c.discrimination, 1e-6) for c in sel.checks]))
            m = max(min(c.n_hidden for c in sel.checks), 1)
            sd = float(np.sqrt(max(a * (1 - a), 1e-12) / m)) / disc
            figures += [heldout - z * sd, heldout + z * sd]
    estimate = heldout if heldout is not None else model
    sd_latent = sd if heldout is not None else (own.high - own.low) / (2 * z)
    if difficulty is not None:
        figures += [difficulty.accuracy, difficulty.at_chance]
    if abstention is not None:  # the model that reads one-label annotators' skill: the latent-class estimate
        figures += [abstention.low, abstention.high]
        estimate, sd_latent = abstention.accuracy, (abstention.high - abstention.low) / (2 * z)
    pop = (
        label_quality(population[:, None], np.zeros(len(population), dtype=np.int64), level)
        if population is not None
        else None
    )
    acc = AccuracyRange(
        estimate, 0.0, 1.0, level, model, heldout, tuple(by_model), difficulty, one_label, pop.accuracy if pop else None
    )
    joins = pop is not None and (acc.shared_confusion or not acc.identifiable)
    latent_low = float(np.clip(min(figures), 0, 1))
    dep = difficulty.dependence if difficulty is not None else None
    if dep is not None and dep.found:  # module docstring, 3g: copies counted once (after the verdicts' low end)
        figures += [dep.low, dep.high]
        if abstention is None:
            estimate = float(np.clip(estimate + dep.shift, 0.0, 1.0))
            figures += [estimate - z * sd_latent, estimate + z * sd_latent]
    if difficulty is not None and difficulty.copy_block is not None:  # module docstring, 3i
        figures += [difficulty.copy_block.low, difficulty.copy_block.high]
    if pop is not None and joins:
        figures += [pop.low, pop.high]
    stacked, weight, ends = estimate, None, (float("nan"), float("nan"))
    stack = difficulty.stacking if difficulty is not None else None
    scale = difficulty.latent_scale if difficulty is not None else None
    # graded labels (module docstring, 3h): the latent-scale figure joins the range when the left-out responses
    # give the model a weight above 0 (its lower end at the verdict level)
    if (
        scale is not None
        and stack is not None
        and stack.weight_scale is not None
        and stack.weight_cov is not None
        and stack.weight_scale - z * float(np.sqrt(max(stack.weight_cov[1][1], 0.0))) > 0.0
    ):
        figures += [scale.low, scale.high]
    if pop is not None and stack is not None and scale is not None and stack.weight_scale is not None:
        weight = stack.weight
        w = np.array([weight, stack.weight_scale, 1.0 - weight - stack.weight_scale])
        f = np.array([estimate, scale.accuracy, pop.accuracy])
        parts_sd = np.array([sd_latent, (scale.high - scale.low) / (2 * z), (pop.high - pop.low) / (2 * z)])
        c = f[:2] - f[2]
        half = z * (float(np.sqrt(max(c @ np.asarray(stack.weight_cov) @ c, 0.0))) + float(w @ parts_sd))
        stacked = float(w @ f)
        ends = (float(np.clip(stacked - half, 0, 1)), float(np.clip(stacked + half, 0, 1)))
        figures += list(ends)
    elif pop is not None and stack is not None:  # module docstring, 3e
        weight = stack.weight
        stacked = weight * estimate + (1 - weight) * pop.accuracy
        sd_pop = (pop.high - pop.low) / (2 * z)
        mine = []
        for w in np.clip([weight - z * stack.weight_sd, weight + z * stack.weight_sd], 0.0, 1.0):
            mid, half = w * estimate + (1 - w) * pop.accuracy, z * (w * sd_latent + (1 - w) * sd_pop)
            mine += [mid - half, mid + half]
        figures += mine
        ends = (float(np.clip(min(mine), 0, 1)), float(np.clip(max(mine), 0, 1)))
    low, high = float(np.clip(min(figures), 0, 1)), float(np.clip(max(figures), 0, 1))
    return replace(
        acc,
        estimate=float(stacked),
        low=low,
        high=high,
        population_in_range=bool(joins),
        latent_low=latent_low,
        latent_estimate=estimate,
        latent_weight=weight,
        abstention=abstention,
        estimate_low=ends[0],
        estimate_high=ends[1],
    )


def label_safety(
    resp: Responses,
    fit: FitResult,
    label: np.ndarray,
    majority: np.ndarray,
    level: float = 0.9,
    *,
    ranks: np.ndarray | str | None = None,
) -> LabelSafety:
    """All three checks for the labels ``label`` (class codes) of ``fit`` on ``resp``; ``ranks`` each class
    code's position among ordered levels, to add the latent-scale model of graded labels (module docstring, 3h;
    ``"auto"``: :func:`.latent_scale.level_ranks`; default None: not added — measured and not kept as the audit's
    default, docs/AUDIT.md)."""
    margin, _ = vote_margin(resp)
    label = np.asarray(label, dtype=np.int64)
    majority = np.asarray(majority, dtype=np.int64)
    sel = fit.selection
    names = tuple(sel.alternatives) if sel is not None else ()
    alt = (
        np.stack([np.asarray(p).argmax(axis=1) for p in sel.alternative_posteriors])
        if sel is not None and sel.alternative_posteriors
        else np.zeros((0, len(label)), dtype=np.int64)
    )
    depends = (alt != label[None, :]).any(axis=0) if len(alt) else np.zeros(len(label), dtype=bool)
    one_label = one_label_share(resp)
    post = np.asarray(fit.posterior)
    ranks = level_ranks(resp) if isinstance(ranks, str) else ranks
    return LabelSafety(
        items=pd.Index(resp.items),
        classes=pd.Index(resp.classes),
        label=label,
        majority=majority,
        margin=margin,
        departure=vote_departure(label, majority, margin, pd.Index(resp.classes)),
        alternatives=names,
        alternative_labels=alt,
        depends=depends,
        accuracy=accuracy_range(
            fit,
            label,
            level,
            difficulty_mixture(resp, post, label, ranks),
            one_label,
            population=population_shares(resp, label),
            abstention=abstention_accuracy(resp, post, label, level) if one_label > ONE_LABEL_SHARE else None,
        ),
    )
