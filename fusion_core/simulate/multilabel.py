"""Multi-label crowds with known flip rates (spec ``multilabel.md`` §12 generators S1, S2) and the sparse
multiclass Dawid–Skene crowd S3 used by the annealing oracles.

``multilabel_crowd`` returns a :class:`MultiLabelSimulation`: format-A responses (``task, worker, label`` with
``"|"``-joined sets), the true sets (Series by task of tuples), ε0/ε1 as workers × labels arrays and the set prior.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from fusion_core.errors import UserInputError
from fusion_core.simulate.dawid_skene import Simulation


@dataclass
class MultiLabelSimulation:
    responses: pd.DataFrame  # format A
    truth: pd.Series  # task → tuple of labels (sorted)
    eps0: np.ndarray  # workers × labels: P(report c | c ∉ L)
    eps1: np.ndarray  # workers × labels: P(omit c | c ∈ L)
    set_prior: pd.Series  # tuple → probability
    workers: pd.Index
    labels: pd.Index
    truth_matrix: np.ndarray  # items × labels, 1 where the label is in the true set


@dataclass
class SpammerCrowd(Simulation):
    """Spec §12 S3: :class:`Simulation` plus each worker's ``kind`` (0 good, 1 near-spammer, 2 poor)."""

    kind: np.ndarray


def distinct_workers(rng: np.random.Generator, n_items: int, n_workers: int, k: int) -> np.ndarray:
    """n_items × k matrix of distinct worker codes per row, uniformly at random (redraws rows with repeats)."""
    if k > n_workers:
        raise UserInputError("responses_per_item cannot exceed n_workers.")
    if k * 4 > n_workers:  # dense enough: random permutation keys
        return np.argsort(rng.uniform(size=(n_items, n_workers)), axis=1)[:, :k]
    w = rng.integers(0, n_workers, (n_items, k))
    while True:
        srt = np.sort(w, axis=1)
        bad = np.flatnonzero((np.diff(srt, axis=1) == 0).any(axis=1))
        if len(bad) == 0:
            return w
        w[bad] = rng.integers(0, n_workers, (len(bad), k))


def _sets(C: int, max_degree: int, include_empty: bool) -> list[tuple[int, ...]]:
    import itertools

    out = []
    for m in range(0 if include_empty else 1, max_degree + 1):
        out += list(itertools.combinations(range(C), m))
    return out


def multilabel_crowd(
    n_items: int = 2000,
    n_labels: int = 6,
    n_workers: int = 40,
    responses_per_item: int = 5,
    max_degree: int = 2,
    *,
    include_empty: bool = True,
    noise: str = "annotator_label",
    eps0_range: tuple[float, float] = (0.02, 0.15),
    eps1_range: tuple[float, float] = (0.1, 0.5),
    global_eps: tuple[float, float] = (0.08, 0.3),
    seed: int = 0,
) -> MultiLabelSimulation:
    """Spec §12 S1 (``noise="annotator_label"``) and S2 (``"global"`` with ``global_eps`` = (ε0, ε1), ``"annotator"``,
    ``"annotator_label"``): N items, each answered by ``responses_per_item`` distinct random annotators; true sets
    from all sets of size ≤ M with prior weights {0.1 for ∅, 1.0 for singletons, 0.4 for larger} × Gamma(2, 1)."""
    rng = np.random.default_rng(seed)
    C, J, N = n_labels, n_workers, n_items
    if responses_per_item > J:
        raise UserInputError("responses_per_item cannot exceed n_workers.")
    sets = _sets(C, max_degree, include_empty)
    base = np.array([0.1 if len(s) == 0 else (1.0 if len(s) == 1 else 0.4) for s in sets])
    w = base * rng.gamma(2.0, 1.0, size=len(sets))
    prior = w / w.sum()
    if noise == "annotator_label":
        e0 = rng.uniform(*eps0_range, size=(J, C))
        e1 = rng.uniform(*eps1_range, size=(J, C))
    elif noise == "annotator":
        e0 = np.repeat(rng.uniform(*eps0_range, size=J)[:, None], C, axis=1)
        e1 = np.repeat(rng.uniform(*eps1_range, size=J)[:, None], C, axis=1)
    elif noise == "global":
        e0 = np.full((J, C), global_eps[0])
        e1 = np.full((J, C), global_eps[1])
    else:
        raise UserInputError(f"noise must be 'annotator_label', 'annotator' or 'global', got {noise!r}.")
    truth_idx = rng.choice(len(sets), size=N, p=prior)
    Ztrue = np.zeros((N, C), bool)
    for k, s in enumerate(sets):  # loop over the (few) admissible sets
        Ztrue[np.ix_(truth_idx == k, list(s))] = True
    workers = distinct_workers(rng, N, J, responses_per_item)
    item = np.repeat(np.arange(N), responses_per_item)
    wk = workers.ravel()
    zt = Ztrue[item]
    u = rng.uniform(size=(len(item), C))
    X = np.where(zt, u >= e1[wk], u < e0[wk])
    labels = pd.Index([f"L{c}" for c in range(C)])
    lab = np.asarray(labels, dtype=object)
    tasks = pd.Index([f"i{i}" for i in range(N)])
    df = pd.DataFrame(
        {"task": tasks[item], "worker": [f"w{j}" for j in wk], "label": ["|".join(lab[row]) for row in X]}
    )
    truth = pd.Series([tuple(lab[row]) for row in Ztrue], index=pd.Index(tasks, name="task"), name="truth")
    wnames = pd.Index([f"w{j}" for j in range(J)])
    sp = pd.Series(prior, index=pd.Index([tuple(lab[list(s)]) for s in sets], tupleize_cols=False), name="prior")
    return MultiLabelSimulation(df, truth, e0, e1, sp, wnames, labels, Ztrue)


def sparse_spammer_crowd(
    n_items: int = 600, n_classes: int = 5, n_workers: int = 60, responses_per_item: int = 3, seed: int = 0
) -> SpammerCrowd:
    """Spec §12 S3: sparse multiclass DS crowd; a worker is good w.p. 0.3 (accuracy U(0.7, 0.95)), a near-spammer
    w.p. 0.5 (1/K + U(0, 0.1)), poor w.p. 0.2 (U(0.3, 0.5)); off-diagonal mass (1 − acc) × Dirichlet(0.5·1)."""
    rng = np.random.default_rng(seed)
    K, J, N = n_classes, n_workers, n_items
    kind = rng.choice(3, size=J, p=[0.3, 0.5, 0.2])
    acc = np.where(
        kind == 0,
        rng.uniform(0.7, 0.95, J),
        np.where(kind == 1, 1 / K + rng.uniform(0, 0.1, J), rng.uniform(0.3, 0.5, J)),
    )
    conf = np.zeros((J, K, K))
    for t in range(K):  # loop over classes
        others = [c for c in range(K) if c != t]
        conf[:, t, others] = (1 - acc)[:, None] * rng.dirichlet(0.5 * np.ones(K - 1), size=J)
        conf[:, t, t] = acc
    y = rng.integers(0, K, N)
    wk = distinct_workers(rng, N, J, responses_per_item).ravel()
    item = np.repeat(np.arange(N), responses_per_item)
    cum = np.cumsum(conf[wk, y[item]], axis=1)
    lab = (rng.uniform(size=len(item))[:, None] > cum).sum(axis=1)
    lab = np.minimum(lab, K - 1)
    tasks = pd.Index([f"i{i}" for i in range(N)])
    df = pd.DataFrame({"task": tasks[item], "worker": [f"w{j}" for j in wk], "label": lab})
    truth = pd.Series(y, index=pd.Index(tasks, name="task"), name="truth")
    workers = pd.Index([f"w{j}" for j in range(J)])
    return SpammerCrowd(df, truth, conf, np.full(K, 1 / K), workers, pd.Index(range(K)), kind)
