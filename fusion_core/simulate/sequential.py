"""Sequential (HMM) crowd simulator: Markov label chains and annotators from the spec's confusion generator.

Spec ``sequential-networked.md`` §3.2 and §5 (common generator).  Transition matrices follow the
paper's orientation ``T[k_next, k_prev]`` (column-stochastic).  Confusions are returned in the
package layout ``workers × true × reported``; the paper's ``Γ_m`` is ``confusion[m].T``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from fusion_core.errors import UserInputError
from fusion_core.simulate.dawid_skene import Simulation

CHAINS = ("sticky", "iid", "cyclic", "random")


def gen_confusions(
    n_classes: int, n_workers: int, n_good: int, lo: float, hi: float, *, rng: np.random.Generator
) -> np.ndarray:
    """Spec §5 ``gen_confusions``: learners ``0..n_good-1`` have per true class a diagonal ``d ~ U(lo, hi)``
    and off-diagonal ``(1-d)·Dirichlet(1)``, resampled until every off-diagonal entry is below d; the
    others draw each row from Dirichlet(1).  Returns ``workers × true × reported``."""
    k = n_classes
    if not 0 <= n_good <= n_workers:
        raise UserInputError("n_good must be between 0 and n_workers.")
    conf = np.empty((n_workers, k, k))
    for m in range(n_workers):  # loops over learners and classes only
        for t in range(k):
            if m < n_good:
                while True:
                    d = rng.uniform(lo, hi)
                    off = (1 - d) * rng.dirichlet(np.ones(k - 1))
                    if off.max() < d:
                        break
                row = np.insert(off, t, d)
            else:
                row = rng.dirichlet(np.ones(k))
            conf[m, t] = row
    return conf


def transition_matrix(
    kind: str, n_classes: int, *, stickiness: float = 0.7, rng: np.random.Generator | None = None
) -> np.ndarray:
    """Column-stochastic ``T[next, prev]``: 'sticky' ``s I + (1-s) 11ᵀ/K`` (spec T6), 'iid' ``11ᵀ/K`` (T7),
    'cyclic' non-reversible ``colnorm(0.2 I + 0.7 P_cyc + 0.1/K)`` (T9), 'random' columns ~ Dirichlet(1)."""
    k = n_classes
    if kind == "sticky":
        return stickiness * np.eye(k) + (1 - stickiness) * np.ones((k, k)) / k
    if kind == "iid":
        return np.ones((k, k)) / k
    if kind == "cyclic":
        p = np.zeros((k, k))
        p[(np.arange(k) + 1) % k, np.arange(k)] = 1.0
        t = 0.2 * np.eye(k) + 0.7 * p + 0.1 / k
        return t / t.sum(axis=0, keepdims=True)
    if kind == "random":
        rng = rng or np.random.default_rng(0)
        return rng.dirichlet(np.ones(k), size=k).T
    raise UserInputError(f"unknown chain kind {kind!r}; use one of {CHAINS}.")


def stationary(transition: np.ndarray) -> np.ndarray:
    """Stationary distribution of a column-stochastic chain (eigenvector of T for eigenvalue 1)."""
    vals, vecs = np.linalg.eig(transition)
    v = np.real(vecs[:, np.argmin(np.abs(vals - 1))])
    v = np.abs(v)
    return v / v.sum()


def sample_chains(transition: np.ndarray, start: np.ndarray, n_sequences: int, length: int, rng) -> np.ndarray:
    """``n_sequences × length`` label codes; positions advance together across sequences (vectorised)."""
    k = transition.shape[0]
    y = np.empty((n_sequences, length), dtype=np.int64)
    y[:, 0] = rng.choice(k, size=n_sequences, p=start)
    cum = np.cumsum(transition, axis=0)  # column k' = cdf of next given prev k'
    for t in range(1, length):
        u = rng.random(n_sequences)
        y[:, t] = np.minimum((u[:, None] > cum[:, y[:, t - 1]].T).sum(axis=1), k - 1)
    return y


def sample_responses(
    y: np.ndarray, confusion: np.ndarray, rng, p_observe: float = 1.0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(item, worker, label) codes with ``f_m(x_n) ~ Categorical(confusion[m, y_n])``; each response
    is kept with probability ``p_observe`` (every item keeps at least one response)."""
    n = len(y)
    m_count, k, _ = confusion.shape
    cum = np.cumsum(confusion, axis=2)  # m, true, reported
    u = rng.random((m_count, n))
    labels = np.minimum((u[:, :, None] > cum[:, y, :]).sum(axis=2), k - 1)
    keep = rng.random((m_count, n)) < p_observe
    if p_observe < 1:
        none = ~keep.any(axis=0)
        keep[rng.integers(0, m_count, size=none.sum()), np.flatnonzero(none)] = True
    w, i = np.nonzero(keep)
    return i, w, labels[w, i]


@dataclass
class SequenceCrowd(Simulation):
    """Sequences labelled by a crowd: :class:`Simulation` plus the true ``transition`` matrix (K × K),
    ``start_prob`` (K), the true ``labels`` (code per position, in sequence order) and the ``chain`` structure."""

    transition: np.ndarray
    start_prob: np.ndarray
    labels: np.ndarray
    chain: Any


def hmm_chain(
    n_sequences: int = 100,
    length: int = 40,
    n_classes: int = 4,
    n_workers: int = 10,
    n_good: int = 6,
    *,
    accuracy: tuple[float, float] = (0.3, 0.5),
    chain: str = "sticky",
    stickiness: float = 0.7,
    transition: np.ndarray | None = None,
    start: np.ndarray | str = "stationary",
    p_observe: float = 1.0,
    seed: int | None = 0,
) -> SequenceCrowd:
    """Simulate sequences labelled by a Markov chain and annotated by the spec's learners.

    ``responses`` has columns task, worker, label, sequence, position; a :class:`SequenceCrowd` also holds
    ``transition`` (``T[next, prev]``), ``start_prob``, ``labels`` (sequences × length codes).  ``class_prior`` is the
    stationary distribution.  Defaults are the spec's T6 setting (K=4, M=10, 6 good in U(0.3, 0.5)).
    """
    if n_sequences < 1 or length < 1 or n_classes < 2 or n_workers < 1:
        raise UserInputError("need at least one sequence of length ≥ 1, 2 classes and 1 worker.")
    rng = np.random.default_rng(seed)
    k = n_classes
    conf = gen_confusions(k, n_workers, n_good, accuracy[0], rng=rng, hi=accuracy[1])
    t = (
        transition_matrix(chain, k, stickiness=stickiness, rng=rng)
        if transition is None
        else np.asarray(transition, float)
    )
    pi = stationary(t)
    p0 = (
        pi
        if isinstance(start, str) and start == "stationary"
        else (np.full(k, 1 / k) if isinstance(start, str) and start == "uniform" else np.asarray(start, float))
    )
    y = sample_chains(t, p0, n_sequences, length, rng)
    flat = y.ravel()
    item, worker, label = sample_responses(flat, conf, rng, p_observe)
    seq = item // length
    pos = item % length
    tasks = np.array(
        [
            f"s{s}_{p}"
            for s, p in zip(np.repeat(np.arange(n_sequences), length), np.tile(np.arange(length), n_sequences))
        ]
    )
    workers = pd.Index([f"w{m}" for m in range(n_workers)])
    df = pd.DataFrame(
        {"task": tasks[item], "worker": workers.take(worker), "label": label, "sequence": seq, "position": pos}
    )
    truth = pd.Series(flat, index=pd.Index(tasks, name="task"), name="truth")
    return SequenceCrowd(
        responses=df,
        truth=truth,
        confusion=conf,
        class_prior=pi,
        workers=workers,
        classes=pd.Index(np.arange(k)),
        transition=t,
        start_prob=p0,
        labels=y,
        chain=chain,
    )
