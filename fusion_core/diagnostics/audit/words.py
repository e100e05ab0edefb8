"""The audit's findings in plain words: one answer per question an annotation manager asks, each naming the chart
that backs it (keys of :func:`fusion_core.plots.audit.audit_figures`).  Answers are plain text (user ids
included as written): the app and the report escape them."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fusion_core.diagnostics.agreement import AGREEMENT_STATISTICS
from fusion_core.diagnostics.audit.result import AuditResult
from fusion_core.diagnostics.audit.rules import ADVERSARIAL, DEPENDENT, FLAGS, NOISY, RELIABLE, SPAMMER, SWAPS, TOO_FEW
from fusion_core.diagnostics.audit.safety import AccuracyRange
from fusion_core.diagnostics.cartels.words import BAD_QUESTION, QUESTION, groups_headline, n_groups
from fusion_core.diagnostics.reliability import ReliabilityEstimate

MAX_NAMED = 5
"""Annotators named in a sentence at most (the table lists them all)."""


@dataclass(frozen=True)
class Finding:
    """One question, its answer in plain words, and the key of the chart that backs it."""

    question: str
    answer: str
    chart: str


def _names(ids: list[str]) -> str:
    shown = ", ".join(ids[:MAX_NAMED])
    return shown + (f" and {len(ids) - MAX_NAMED} more" if len(ids) > MAX_NAMED else "")


def sentence(text: str) -> str:
    """``text`` as a sentence: first letter capitalised, ending with a full stop."""
    text = text.strip()
    if not text:
        return text
    text = text[0].upper() + text[1:]
    return text if text.endswith((".", "!", "?")) else text + "."


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def strength(value: float) -> str:
    """Landis & Koch's (1977) words for a chance-corrected agreement value."""
    if not np.isfinite(value):
        return "undefined"
    for bound, word in ((0.0, "poor"), (0.2, "slight"), (0.4, "fair"), (0.6, "moderate"), (0.8, "substantial")):
        if value < bound:
            return word
    return "almost perfect"


def _estimate(name: str, e: ReliabilityEstimate | None) -> str:
    if e is None or not np.isfinite(e.value):
        return f"{name} could not be computed"
    iv = f" ({_pct(e.level)} interval {e.low:.2f} to {e.high:.2f})" if np.isfinite(e.low) else ""
    return f"{name} is {e.value:.2f}{iv}, {strength(e.value)}"


def _trust(a: AuditResult) -> Finding:
    c = a.annotators.counts()
    n = a.n_workers
    text = (
        f"{c[RELIABLE]} of {n} annotators are reliable and {c[NOISY]} more are noisy but clearly better than chance. "
        f"{c[TOO_FEW]} gave too few responses to tell."
    )
    return Finding("Whom can I trust?", text, "verdicts")


def _bad(a: AuditResult) -> Finding:
    v = a.annotators
    table = v.frame()
    parts = []
    for word, what in (
        (SPAMMER, "answer close to chance (spammers)"),
        (SWAPS, "use some labels for another class (their labels need relabelling, not dropping)"),
        (ADVERSARIAL, "are worse than chance"),
    ):
        ids = [str(w) for w in table.index[table["verdict"].to_numpy() == word]]
        if ids:
            parts.append(f"{len(ids)} {what}: {_names(ids)}")
    dependent = [str(w) for w in table.index[table["verdict"].to_numpy() == DEPENDENT]]
    if dependent:
        parts.append(f"{len(dependent)} are in a {DEPENDENT}: {_names(dependent)}")
    text = (
        "; ".join(parts) + "." if parts else "No annotator is near chance, worse than chance or in a dependent group."
    )
    text = text[0].upper() + text[1:]
    return Finding(BAD_QUESTION, text, "skill")


def _labels(a: AuditResult) -> Finding:
    q = a.labels
    text = (
        f"About {_pct(q.accuracy)} of the {q.n_items:,} labels are right if the model holds "
        f"({_pct(q.level)} interval {_pct(q.low)} to {_pct(q.high)}); model-based figures are often optimistic."
    )
    if a.safety is not None:
        text = accuracy_words(a.safety.accuracy, q.n_items)
    if q.gold_accuracy is not None:
        text += f" Against the {q.n_gold:,} known answers, {_pct(q.gold_accuracy)} are right."
    return Finding("How good are the final labels?", text, "labels")


def _review(a: AuditResult) -> Finding:
    r = a.review
    text = (
        f"{int(r.flagged.sum()):,} of {len(r.items):,} items: {int(r.low_confidence.sum()):,} have a label "
        f"probability below {r.rule.min_confidence:g}, {int(r.disagrees.sum()):,} differ from majority vote, "
        f"{int(r.few_responses.sum()):,} have fewer than {r.rule.min_responses} responses."
    )
    return Finding("Which items need another look?", text, "review")


def _agreement(a: AuditResult) -> Finding:
    finite = [e for e in a.agreement if np.isfinite(e.value)]
    if not finite:
        why = sentence(a.agreement_note or "no item has two or more responses")
        return Finding("Do annotators agree?", f"Agreement could not be measured. {why}", "agreement")
    parts = [_estimate(s.title.split(" (")[0], e) for s, e in zip(AGREEMENT_STATISTICS, a.agreement)]
    text = f"{'; '.join(parts)} (1 = full agreement, 0 = chance)."
    return Finding("Do annotators agree?", text, "agreement")


def accuracy_words(acc: AccuracyRange, n_items: int) -> str:
    """The honest accuracy figure in plain words: one estimate when its range is narrow, else the range and why."""
    pct = _pct(acc.level)
    checks = f"the model alone says {_pct(acc.model)}"
    if acc.heldout is not None:
        checks += (
            f"; the held-out check (labels fitted without some responses, compared with them) says {_pct(acc.heldout)}"
        )
    if acc.by_model:
        checks += "; " + ", ".join(f"{name} gives these labels {_pct(v)}" for name, v in acc.by_model)
    if acc.population_in_range and acc.population is not None:
        checks += (
            f"; if the known answers behave like one more annotator's (a label right as often as its share of the "
            f"item's responses), {_pct(acc.population)}"
        )
        d = acc.difficulty
        if acc.shared_confusion and d is not None and not d.flagged:  # (else the difficulty words say it)
            checks += (
                f" — annotators seem to share mistakes item by item: {d.unanimous:,} items are unanimous where "
                f"independent errors give about {d.unanimous_expected:,.0f}"
            )
    dep = acc.difficulty.dependence if acc.difficulty is not None else None
    if dep is not None and dep.found:
        checks += (
            f"; {len(dep.annotators)} annotators agree in pairs more than independent annotators of their skill "
            f"would (copies of one source, shared tools or shared habits): counting that shared part once, "
            f"{_pct(dep.accuracy)}"
        )
    if acc.latent_weight is not None and acc.latent_weight < 0.995 and acc.population is not None:
        checks += (
            f"; weighing the two views by how well each predicts responses left out of their item (the model gets "
            f"{_pct(acc.latent_weight)} of the weight) gives {_pct(acc.estimate)}"
        )
    if acc.pinned:
        return (
            f"About {_pct(acc.estimate)} of the {n_items:,} labels are right (range {_pct(acc.low)} to "
            f"{_pct(acc.high)}, {pct}): {checks}."
        )
    if acc.one_label:
        return (
            f"How many of the {n_items:,} labels are right cannot be estimated from the responses: "
            f"{_pct(acc.one_label_share)} of them come from annotators who always give the same label (like rules "
            "that vote one class and abstain otherwise), and agreement cannot tell how often such annotators are "
            f"right. The checks span {_pct(acc.low)} to {_pct(acc.high)} ({checks}), but none of them can see it"
            + (
                f"; if how often an annotator responds depends on the item's class (and annotators respond "
                f"independently), about {_pct(acc.abstention.accuracy)}"
                if acc.abstention is not None
                else ""
            )
            + ". Give known answers for a sample of items to measure it."
        )
    block = acc.difficulty.copy_block if acc.difficulty is not None else None
    if block is not None and not (acc.difficulty is not None and acc.difficulty.flagged):
        return (
            f"How many of the {n_items:,} labels are right cannot be estimated from the responses: "
            f"{len(block.annotators)} annotators ({_names(list(block.annotators))}, {_pct(block.responses_share)} of "
            "the responses) agree with each other far more than their agreement with the others implies, as copies "
            "of one source do (classifiers trained on the same features, one tool shared). They are most of the "
            "crowd, so every model follows them; agreement cannot tell whether they are right or only alike. If "
            f"they are one source, about {_pct(block.accuracy)}; all checks together span {_pct(acc.low)} to "
            f"{_pct(acc.high)} ({checks}). Give known answers for a sample of items to measure it."
        )
    d = acc.difficulty
    if d is not None and d.flagged:
        why = "the votes split and agree in a pattern that a model of equally hard items cannot produce"
        if np.isfinite(d.unanimous_expected) and d.unanimous > d.unanimous_expected:
            why = (
                f"{d.unanimous:,} items are unanimous where a model of equally hard items expects "
                f"{d.unanimous_expected:,.0f}"
            )
        return (
            f"How many of the {n_items:,} labels are right cannot be estimated from the responses alone. The items "
            f"differ in difficulty: about {_pct(d.hard_share)} of them look hard ({why}). On hard items annotators "
            "often make the same mistake, and no check of the responses can see shared mistakes. If annotators are "
            f"better than chance on the hard items, about {_pct(d.accuracy)} are right; if not, {_pct(d.at_chance)};"
            f" all checks together span {_pct(acc.low)} to {_pct(acc.high)} ({checks}). Give known answers for a "
            "sample of items to measure it."
        )
    return (
        f"How many of the {n_items:,} labels are right cannot be pinned down without gold labels: between "
        f"{_pct(acc.low)} and {_pct(acc.high)} ({pct} range), most likely about {_pct(acc.estimate)}. Why: {checks}. "
        "Give known answers for a sample of items to measure it."
    )


def _changes(a: AuditResult) -> Finding:
    n = int(a.review.disagrees.sum())
    text = f"{n:,} of {a.n_items:,} labels ({_pct(n / max(a.n_items, 1))}) differ from a simple majority vote"
    d = a.safety.departure if a.safety is not None else None
    if d is not None and d.one_way and d.direction is not None:
        n_close = int((d.changed & d.close).sum())
        text += (
            f". Warning: {d.n_direction:,} of the {n_close:,} changes on close votes go one way ('{d.direction[0]}' "
            f"→ '{d.direction[1]}'). A model does this when it explains some annotators' label preferences by moving "
            "items between classes, not only when it corrects the vote: check a sample of these items (listed under "
            "'labels that depend on the model choice')."
        )
    else:
        text += ": the model weighs annotators by their estimated skill instead of counting votes."
    return Finding("What changed compared with majority vote?", text, "changes")


def _dependence(a: AuditResult) -> Finding:
    s = a.safety
    assert s is not None
    if not s.alternatives:
        text = "No: no other candidate model predicts the held-out responses as well as the chosen one."
    else:
        n = int(s.depends.sum())
        text = (
            f"{n:,} labels ({_pct(n / max(a.n_items, 1))}) would be different under {', '.join(s.alternatives)}, "
            "which the held-out responses cannot tell from the chosen model; the list shows them."
        )
        if n == 0:
            text = f"No: {', '.join(s.alternatives)} predict the held-out responses as well and give the same labels."
    return Finding("Do the labels depend on the model choice?", text, "")


def _cartel(a: AuditResult) -> Finding:
    """Dependent groups (copies or collusion), in the words of :mod:`fusion_core.diagnostics.cartels.words`."""
    c = a.cartel
    if c.status == "groups_found":
        kinds = list(c.kinds) if len(c.kinds) == len(c.groups) else [DEPENDENT] * len(c.groups)
        groups = "; ".join(f"group {i + 1}, {k}: {_names(list(g))}" for i, (g, k) in enumerate(zip(c.groups, kinds)))
        text = (
            f"Yes — {n_groups(len(kinds))}: members agree with each other beyond their estimated "
            f"skills, on answers the rest of the crowd rejects ({groups}). Near-identical answers suggest one source "
            "(copies of one model, one person under several ids); otherwise the shared answers may be collusion — "
            "or the rest of the crowd may be wrong on those items: check a sample of them (the Cartels page lists "
            "the items each group swings). Their votes are not independent: count each group once."
        )
    elif c.status == "no_evidence":
        text = f"{groups_headline(())} (the test ran). {sentence(c.reason)}"
    else:
        text = f"The dependence check could not run: {sentence(c.reason)}"
        if c.report is not None:
            text += (
                " It needs annotators who each share 10 or more items with 3 or more others, and those annotators "
                "should give most of the responses: have several annotators label the same items to make it possible."
            )
    return Finding(QUESTION, text, "cartel" if c.report is not None and c.status != "could_not_run" else "")


def _ratings(a: AuditResult) -> Finding:
    """For ordered levels or numbers: who rates too leniently, too harshly or too noisily (rating verdicts)."""
    v = a.ratings
    assert v is not None
    unit = "levels" if v.kind == "ordinal" else "the data's units"
    parts = []
    for word in ("lenient", "harsh", "noisy", "near chance"):
        who = [str(w) for w in v.flagged(word)]
        if who:
            parts.append(f"{word}: {_names(who)}")
    reliable = int((v.table["verdict"] == "reliable").sum())
    few = int((v.table["verdict"] == "not enough ratings to tell").sum())
    text = (
        f"Read as {a.label_type} ratings, {reliable} of {len(v.table)} annotators rate reliably (bias and noise "
        f"within the thresholds, {round(100 * v.level)}% bootstrap intervals, in {unit}); {few} gave too few "
        "ratings to tell. "
        + ("; ".join(parts) + "." if parts else "Nobody rates clearly too leniently, harshly or noisily.")
        + (f" {v.basis}" if v.basis else "")
    )
    return Finding("Who rates too leniently, too harshly or too noisily?", text, "ratings")


def accuracy_tile(audit: AuditResult) -> tuple[str, str]:
    """(label, value) of the headline accuracy tile: one figure only when the honest range pins it down, else the
    range (:mod:`.safety`)."""
    s = audit.safety
    if s is None:
        return "labels right (if the model holds)", _pct(audit.labels.accuracy)
    acc = s.accuracy
    if acc.pinned:
        return "labels right (estimated)", _pct(acc.estimate)
    if not acc.identifiable:
        return "labels right (cannot be estimated; checks span)", f"{_pct(acc.low)}–{_pct(acc.high)}"
    return "labels right (range, no gold)", f"{_pct(acc.low)}–{_pct(acc.high)}"


def needs_care(audit: AuditResult, question: str) -> bool:
    """Whether a finding about the labels is a warning: a one-way departure from the vote, or labels that depend on
    the model choice (2 % of the items or more)."""
    s = audit.safety
    if s is None:
        return False
    if question.startswith("What changed"):
        return bool(s.departure.one_way)
    if question.startswith("Do the labels depend"):
        return bool(s.depends.sum() >= 0.02 * max(audit.n_items, 1))
    return False


def _drift(a: AuditResult) -> Finding:
    """With a time column: whose accuracy changed over time, when, by how much (:mod:`fusion_core.diagnostics.drift`)."""
    assert a.drift is not None
    return Finding("Whose reliability changed over time?", " ".join(a.drift.sentences()), "drift")


def flagged_tile(audit: AuditResult, *, categorical: bool = False) -> tuple[str, str]:
    """(label, value) of the headline "annotators flagged" tile: for ordered levels or numbers the rating
    verdicts (anything but reliable or not enough ratings), unless ``categorical`` asks for the categorical ones
    (near chance, worse than chance, dependent group)."""
    if audit.ratings is not None and not categorical:
        verdict = audit.ratings.table["verdict"]
        n = int((~verdict.isin(("reliable", "not enough ratings to tell"))).sum())
        return "annotators flagged (rating verdicts)", f"{n} of {len(verdict):,}"
    counts = audit.annotators.counts()
    return "annotators flagged", f"{int(counts[list(FLAGS)].sum())} of {audit.n_workers:,}"


def findings(audit: AuditResult, *, categorical: bool = False) -> list[Finding]:
    """The audit's answers, in the order a manager asks the questions.  For labels declared ordinal or numeric
    the rating verdicts answer who to trust and who to correct; the categorical verdicts (the levels read as
    unrelated categories) join them only when ``categorical`` asks: the two sets judge different things and
    disagree (issue 26)."""
    rated = audit.ratings is not None
    return [
        *([_ratings(audit)] if rated else []),
        *([_trust(audit), _bad(audit)] if categorical or not rated else []),
        *([_drift(audit)] if audit.drift is not None else []),
        _cartel(audit),
        _labels(audit),
        *([_dependence(audit)] if audit.safety is not None else []),
        _review(audit),
        _agreement(audit),
        _changes(audit),
    ]
