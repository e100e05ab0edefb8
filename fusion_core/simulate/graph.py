"""Networked crowd simulator: stochastic block model item graphs with annotators from the spec's generator.

Spec ``sequential-networked.md`` §3.4 [OURS]: communities are the classes; the SBM is parameterised by the
average degree ``d̄`` (expected ``d̄ N / 2`` edges) and the homophily ``h`` (the share of edges inside a
community).  Annotators come from :func:`fusion_core.simulate.sequential.gen_confusions`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from fusion_core.errors import UserInputError
from fusion_core.simulate.dawid_skene import Simulation
from fusion_core.simulate.sequential import gen_confusions, sample_responses


def sbm_edges(labels: np.ndarray, avg_degree: float, homophily: float, rng: np.random.Generator) -> np.ndarray:
    """``E × 2`` undirected edges (source < target, no loops, no duplicates): ``round(d̄N/2)`` edges of which a
    share ``h`` join nodes of the same community (drawn uniformly among such pairs), the rest join different ones."""
    n = len(labels)
    k = int(labels.max()) + 1 if n else 0
    n_edges = round(avg_degree * n / 2)
    n_in = round(homophily * n_edges)
    order = np.argsort(labels, kind="stable")
    sizes = np.bincount(labels, minlength=k)
    offsets = np.r_[0, np.cumsum(sizes)[:-1]]
    have = np.zeros(0, dtype=np.int64)

    def draw(count: int, within: bool) -> np.ndarray:
        found = np.zeros(0, dtype=np.int64)
        for _ in range(200):  # vectorised rejection rounds
            if len(found) >= count:
                break
            need = (count - len(found)) * 2 + 16
            u = rng.integers(0, n, size=need)
            if within:
                cu = labels[u]
                v = order[offsets[cu] + (rng.random(need) * sizes[cu]).astype(np.int64)]
            else:
                v = rng.integers(0, n, size=need)
            keep = (u != v) & ((labels[u] == labels[v]) == within)
            key = np.minimum(u[keep], v[keep]) * n + np.maximum(u[keep], v[keep])
            key = key[np.sort(np.unique(key, return_index=True)[1])]
            key = key[~np.isin(key, found) & ~np.isin(key, have)]
            found = np.r_[found, key[: count - len(found)]]
        return found

    inside = draw(n_in, True)
    have = inside
    between = draw(n_edges - n_in, False)
    keys = np.r_[inside, between]
    return np.stack([keys // n, keys % n], axis=1) if len(keys) else np.zeros((0, 2), dtype=np.int64)


@dataclass
class GraphCrowd(Simulation):
    """A crowd on an item graph: :class:`Simulation` plus the ``edges`` (DataFrame ``source, target`` of task ids),
    the realised within-community edge share ``homophily_realised`` and the asked ``avg_degree``."""

    edges: pd.DataFrame
    homophily_realised: float
    avg_degree: float


def sbm(
    n_items: int = 2000,
    n_classes: int = 4,
    avg_degree: float = 5.0,
    homophily: float = 0.9,
    n_workers: int = 10,
    *,
    n_good: int | None = None,
    accuracy: tuple[float, float] = (0.3, 0.5),
    class_prior: np.ndarray | None = None,
    p_observe: float = 1.0,
    seed: int | None = 0,
) -> GraphCrowd:
    """Simulate an SBM item graph labelled by annotators (defaults: the spec's T11 setting, all learners good).

    Returns a :class:`GraphCrowd`: ``edges`` is a DataFrame ``source, target`` of task ids (pass it as
    ``fit(df, graph=...)``); ``homophily_realised`` is the realised within-community edge share.
    """
    if n_items < 2 or n_classes < 2 or n_workers < 1:
        raise UserInputError("need at least 2 items, 2 classes and 1 worker.")
    if not 0 <= homophily <= 1 or avg_degree < 0:
        raise UserInputError("homophily must be in [0, 1] and avg_degree ≥ 0.")
    rng = np.random.default_rng(seed)
    k = n_classes
    prior = np.full(k, 1.0 / k) if class_prior is None else np.asarray(class_prior, float)
    y = rng.choice(k, size=n_items, p=prior)
    conf = gen_confusions(k, n_workers, n_workers if n_good is None else n_good, accuracy[0], rng=rng, hi=accuracy[1])
    edges = sbm_edges(y, avg_degree, homophily, rng)
    item, worker, label = sample_responses(y, conf, rng, p_observe)
    tasks = pd.Index([f"n{i}" for i in range(n_items)])
    workers = pd.Index([f"w{m}" for m in range(n_workers)])
    df = pd.DataFrame({"task": tasks.take(item), "worker": workers.take(worker), "label": label})
    edge_df = pd.DataFrame({"source": tasks.take(edges[:, 0]), "target": tasks.take(edges[:, 1])})
    realised = float(np.mean(y[edges[:, 0]] == y[edges[:, 1]])) if len(edges) else float("nan")
    return GraphCrowd(
        responses=df,
        truth=pd.Series(y, index=pd.Index(tasks, name="task"), name="truth"),
        confusion=conf,
        class_prior=prior,
        workers=workers,
        classes=pd.Index(np.arange(k)),
        edges=edge_df,
        homophily_realised=realised,
        avg_degree=avg_degree,
    )
