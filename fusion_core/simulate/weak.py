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
