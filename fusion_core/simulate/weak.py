"""Weak-supervision crowds: labelling functions that vote one class and abstain otherwise (issue 26's failure shape).

A labelling function (a keyword rule, a heuristic; Ratner et al., *Data Programming*, NeurIPS 2016) fires on the
items that match it and then always votes its own class; elsewhere it abstains, which in long format is simply a
missing response.  Its skill lies in *which items it fires on* (precision on the items it labels), not in which
label it gives.  A model of independent annotators that takes missing responses as uninformative cannot tell such
an annotator from one who reports one label whatever the item (its confusion rows are identical), so the truth
the model estimates from a crowd of them can be no better than the class prior: an audit must then say it cannot
judge them, never that they are near chance.

:func:`labelling_functions` draws such a crowd with ``spammers`` added: functions that fire on random items
(chance precision), for the audit to keep flagging where the labels can be told.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from fusion_core.errors import UserInputError
from fusion_core.simulate.dawid_skene import Simulation


@dataclass
class LabellingFunctions(Simulation):
    """A crowd of labelling functions: :class:`Simulation` plus each function's ``role`` (``function`` /
    ``spammer``), generating ``precision`` and the class it ``votes``, all Series by worker."""

    role: pd.Series
    precision: pd.Series
    votes: pd.Series


def labelling_functions(
    n_items: int = 2000,
    n_functions: int = 10,
    *,
    coverage: tuple[float, float] = (0.05, 0.3),
    precision: tuple[float, float] = (0.75, 0.98),
    spammers: int = 0,
    class_prior: tuple[float, float] = (0.5, 0.5),
    seed: int | None = 0,
) -> LabellingFunctions:
    """A binary crowd of one-class labelling functions (module docstring).

    Function f votes class ``f mod 2``; it fires on a share ~U(``coverage``) of the items, of which a share
    ~U(``precision``) are of its class (drawn from the items of each class); ``spammers`` extra functions fire on
    random items whatever their class (precision = the class prior).
    """
    if n_functions < 2 or n_items < 10:
        raise UserInputError("labelling_functions needs at least 2 functions and 10 items.")
    rng = np.random.default_rng(seed)
    prior = np.asarray(class_prior, dtype=float) / np.sum(class_prior)
    truth = rng.choice(2, size=n_items, p=prior)
    by_class = [np.flatnonzero(truth == k) for k in (0, 1)]
    n_total = n_functions + spammers
    names = [f"lf{j}" for j in range(n_total)]
    votes = np.arange(n_total) % 2
    precisions = np.concatenate([rng.uniform(*precision, n_functions), prior[votes[n_functions:]]])
    frames = []
    for j in range(n_total):
        n_fire = max(int(rng.uniform(*coverage) * n_items), 5)
        if j < n_functions:
            n_right = min(int(rng.binomial(n_fire, precisions[j])), len(by_class[votes[j]]))
            n_wrong = min(n_fire - n_right, len(by_class[1 - votes[j]]))
            fired = np.concatenate(
                [
                    rng.choice(by_class[votes[j]], n_right, replace=False),
                    rng.choice(by_class[1 - votes[j]], n_wrong, replace=False),
                ]
            )
        else:
            fired = rng.choice(n_items, n_fire, replace=False)
        frames.append(pd.DataFrame({"task": fired, "worker": names[j], "label": int(votes[j])}))
    responses = pd.concat(frames, ignore_index=True)
    responses["task"] = responses["task"].map(lambda i: f"item{i}")
    workers = pd.Index(names)
    role = pd.Series(["function" if j < n_functions else "spammer" for j in range(n_total)], index=workers, name="role")
    return LabellingFunctions(
        responses=responses,
        truth=pd.Series(truth, index=[f"item{i}" for i in range(n_items)], name="truth"),
        confusion=None,
        class_prior=prior,
        workers=workers,
        classes=pd.Index([0, 1]),
        role=role,
        precision=pd.Series(precisions, index=workers, name="precision"),
        votes=pd.Series(votes, index=workers, name="votes"),
    )


@dataclass
class ClassifierEnsemble(Simulation):
    """Independent annotators plus classifiers that share one source: :class:`Simulation` plus each annotator's
    ``role`` (``independent`` / ``member``) and ``accuracy`` (members: the implied one, ``f s + (1 − f) a``), both
    Series by worker, and the shared source's accuracy ``source_accuracy``."""

    role: pd.Series
    accuracy: pd.Series
    source_accuracy: float


def classifier_ensemble(
    n_items: int = 1500,
    n_independent: int = 6,
    n_members: int = 6,
    *,
    n_classes: int = 2,
    accuracy: tuple[float, float] = (0.65, 0.85),
    source_accuracy: tuple[float, float] = (0.75, 0.85),
    faithful: tuple[float, float] = (0.8, 0.95),
    observed: float = 0.7,
    seed: int | None = 0,
) -> ClassifierEnsemble:
    """Several classifiers trained on the same features (errors strongly correlated) beside independent annotators.

    The truth is uniform over ``n_classes``.  Independent annotators (accuracy ~U(``accuracy``), errors spread
    evenly) answer each item with probability ``observed``.  One shared source predicts every item, right with
    probability ~U(``source_accuracy``); each of the ``n_members`` classifiers answers every item, repeating the
    source's prediction with probability ~U(``faithful``) and otherwise drawing its own (accuracy ~U(``accuracy``)).
    Members are each as good as ``f s + (1 − f) a``, but they err together: counted as independent votes they
    outvote the independent annotators wherever the source is wrong.
    """
    if n_items < 10 or n_members < 2 or n_classes < 2:
        raise UserInputError("classifier_ensemble needs at least 10 items, 2 members and 2 classes.")
    rng = np.random.default_rng(seed)
    K = n_classes
    truth = rng.integers(0, K, n_items)

    def draw(acc: np.ndarray) -> np.ndarray:
        """Labels right with probability ``acc`` (per item), else another label uniformly."""
        wrong = (truth + rng.integers(1, K, n_items)) % K
        return np.where(rng.random(n_items) < acc, truth, wrong)

    s = float(rng.uniform(*source_accuracy))
    source = draw(np.full(n_items, s))
    acc = rng.uniform(*accuracy, n_independent + n_members)
    f = rng.uniform(*faithful, n_members)
    names = [f"a{j}" for j in range(n_independent)] + [f"m{j}" for j in range(n_members)]
    frames = []
    for j, name in enumerate(names):  # a loop over annotators (tens), each drawing all items at once
        own = draw(np.full(n_items, acc[j]))
        if j < n_independent:
            seen = np.flatnonzero(rng.random(n_items) < observed)
            lab = own[seen]
        else:
            seen = np.arange(n_items)
            lab = np.where(rng.random(n_items) < f[j - n_independent], source, own)
        frames.append(pd.DataFrame({"task": seen, "worker": name, "label": lab}))
    workers = pd.Index(names)
    implied = np.concatenate([acc[:n_independent], f * s + (1 - f) * acc[n_independent:]])
    return ClassifierEnsemble(
        responses=pd.concat(frames, ignore_index=True),
        truth=pd.Series(truth, index=pd.RangeIndex(n_items, name="task"), name="truth"),
        confusion=None,
        class_prior=np.full(K, 1.0 / K),
        workers=workers,
        classes=pd.Index(range(K)),
        role=pd.Series(["independent"] * n_independent + ["member"] * n_members, index=workers, name="role"),
        accuracy=pd.Series(implied, index=workers, name="accuracy"),
        source_accuracy=s,
    )
