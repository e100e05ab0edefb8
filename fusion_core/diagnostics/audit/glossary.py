"""Every term the audit, the app and the report use, explained once in plain words (the Glossary page and the
report's glossary read this)."""

from __future__ import annotations

from fusion_core.diagnostics.audit.items import DEFAULT_REVIEW
from fusion_core.diagnostics.audit.rules import (
    ADVERSARIAL,
    DEFAULT_RULE,
    DEPENDENT,
    NOISY,
    RELIABLE,
    SPAMMER,
    SWAPS,
    TOO_FEW,
)
from fusion_core.diagnostics.cartels.words import NEAR_DUPLICATE, NEAR_IDENTICAL, POSSIBLE_COLLUSION

_r = DEFAULT_RULE
TERMS = {
    "Annotator": "A person (or program) who gave labels. Also called worker, rater or judge.",
    "Item": "One thing to be labelled (a task): an image, a sentence, a document …",
    "Response": "One label one annotator gave to one item.",
    "Ground truth": "The correct label of an item. The audit does not need it: it estimates it from the responses. "
    "Known answers (gold), when you have them, are used only to check the estimates.",
    "Majority vote": "The label most annotators gave to an item, every annotator counting the same.",
    "Recommended method (auto)": "Compares several models (majority vote, Dawid–Skene, one-coin Dawid–Skene, MACE) by "
    "how well they predict responses hidden from them, and keeps the best — or averages those it cannot tell apart.",
    "Dawid–Skene model": "A model in which each annotator has their own confusion matrix; fitted by the EM algorithm "
    "(Dawid & Skene 1979), it weighs annotators by how reliable they are.",
    "Confusion matrix": "For one annotator: how often they report each label (columns, 'reported') when the item's "
    "true label is each label (rows, 'true'). A perfect annotator has ones on the diagonal.",
    "Posterior (label probability)": "The model's probability that a label is the item's true label, given all "
    "responses. The item's label is the most probable one; its probability is the label's confidence.",
    "Accuracy": "The share of an annotator's responses that match the (estimated) true labels.",
    "Chance accuracy": "The accuracy an annotator would reach by guessing with their own label frequencies. "
    "Someone who always answers 'no' on data that is 90 % 'no' is right 90 % of the time by chance.",
    "Skill above chance": "(accuracy − chance accuracy) / (1 − chance accuracy): 0 for guessing, 1 for always "
    "right, below 0 for worse than guessing. The audit's verdicts are decided on it.",
    "Accuracy (Annotators page)": "A method's own estimate of each annotator's expected accuracy (for most "
    "methods; each method's help says what it is). Not corrected for chance: for that, see skill above chance.",
    "Accuracy (shrunk) and its lower bound": "The Annotators page ranks by the lower end of an interval in which "
    "each accuracy is pulled towards the crowd's average by a few pseudo-responses (an empirical-Bayes Beta "
    "prior): 10 perfect answers suggest a good annotator, not a perfect one, and rank below hundreds of "
    "answers at a slightly lower accuracy.",
    "Interval": f"The range the true value lies in with the stated probability (the audit uses {100 * _r.level:.0f} %). "
    "Few responses give wide intervals: the audit then says so instead of guessing.",
    "Bootstrap": "Repeating a computation on resampled data (items drawn with replacement) to see how much the "
    "result varies: the spread gives the interval.",
    RELIABLE: f"Skill above chance clearly above {_r.chance_band:g} and estimated at {_r.reliable_skill:g} or more.",
    NOISY: f"Clearly better than chance, but skill above chance below {_r.reliable_skill:g}: useful, makes mistakes.",
    SPAMMER: f"Skill above chance more likely below {_r.chance_band:g} than above it (probability at least "
    f"{_r.flag_probability:g}), measured against the labels the rest of the crowd gives, and still so with the "
    "plausible models averaged and those labels only as right as the low end of their honest range: answers barely "
    "better than guessing.",
    SWAPS: "Would be near chance, but on three labels or more its labels are the rest of the crowd's with some "
    "swapped (e.g. '2' written for the crowd's '1' and '1' for its '2'), and relabelled so its skill above chance is "
    f"clearly above {_r.chance_band:g}: its answers depend on the items; the labels' meaning needs correcting "
    "(a Dawid–Skene model reads them right), the annotator retraining on those labels.",
    ADVERSARIAL: "Skill above chance clearly below 0: gives wrong labels more often than guessing would.",
    DEPENDENT: "A member of a group whose members agree with each other more than their accuracy explains, on "
    "answers the rest of the crowd rejects, each on its own evidence (not merely linked to the group): their answers "
    "are not independent. The check cannot tell copies of one "
    f"source from collusion; it names the group '{NEAR_DUPLICATE}' when the members' answers are near-identical "
    f"(at least {NEAR_IDENTICAL:.0%} of pairs agree) and '{POSSIBLE_COLLUSION}' otherwise.",
    NEAR_DUPLICATE: "A dependent group whose members give near-identical answers: most likely one source seen "
    "several times (copies of one model or judge prompt, one person under several ids). Count it once.",
    POSSIBLE_COLLUSION: "A dependent group whose members otherwise answer like independent annotators, yet share "
    "answers the rest of the crowd rejects. That is how collusion looks, but a shared guideline or tool, or a minority "
    "that is right where the rest of the crowd is systematically wrong, can look the same: check a sample of the "
    "items before acting.",
    TOO_FEW: f"Fewer than {_r.min_responses} responses on items others labelled too, an estimate too uncertain "
    "to decide, or a flag that rests on labels the audit cannot pin down (it does not hold with the plausible "
    "models averaged or at the low end of the labels' honest accuracy range).",
    "Cartel check": "The dependence check (spectral test, Parisi et al. 2014, then the evidence tests). The spectral "
    "test only proposes groups; a group is kept when its members agree beyond their estimated skills on answers "
    "the rest of the crowd rejects. Three outcomes: dependent groups found; none found (the test ran); could not run "
    "(too little overlap between annotators, or more than two labels — then run it one label against the rest).",
    "Fleiss' κ (kappa)": "Agreement among all annotators corrected for chance: 1 full agreement, 0 what chance "
    "gives, below 0 less than chance (Fleiss 1971). Words: below 0 poor, to 0.2 slight, to 0.4 fair, to 0.6 "
    "moderate, to 0.8 substantial, above almost perfect (Landis & Koch 1977).",
    "Krippendorff's α (alpha)": "Another chance-corrected agreement that allows any number of annotators per item "
    "and missing responses (Krippendorff 2011); read like κ.",
    "Cohen's κ": "Chance-corrected agreement of one pair of annotators on the items both labelled.",
    "Items to look at again": f"Items whose label probability is below {DEFAULT_REVIEW.min_confidence:g}, whose "
    f"label differs from majority vote, or that have fewer than {DEFAULT_REVIEW.min_responses} responses.",
    "Expected label accuracy": "The average label probability: the share of labels right if the model is right. "
    "Real crowds often break model assumptions, so treat it as optimistic.",
    "Held-out responses": "Responses hidden from a model while it is fitted, then used to score how well it "
    "predicts them — a fair way to compare models without ground truth.",
    "Labels right (range, no gold)": "The share of right labels as three checks see it: the model's own figure, "
    "a held-out check (labels fitted without some responses, compared with those responses: when they agree less "
    "than the model predicts, the model is over-confident) and the figure each other plausible model gives the "
    "labels. When annotators seem to share mistakes item by item (more unanimous items than independent errors "
    "give), the range also reaches the population figure: each label right as often as its share of the item's "
    "responses, as if the known answers were one more annotator's. Shown as one number only when the checks agree "
    "within 10 points; otherwise only gold labels can tell.",
    "Labels that depend on the model choice": "Items that another model, which predicts the held-out responses as "
    "well as the chosen one, labels otherwise; and close votes that the chosen labels changed in the direction "
    "most changes took, a sign that a model may be following some annotators' preferences.",
}
"""Term → its explanation, in the order a reader meets them."""
