"""Context-dependent annotators: the Table 1 classifiers of Soltanmohammadi et al. (ICML 2015) and random
smooth curves (spec ``context.md`` §13).  Returns :class:`~fusion_core.simulate.dawid_skene.Simulation` with the
context in ``responses['context']`` and ``extras``: ``context`` (Series by task), ``p0``/``p1`` (lists of
vectorised curve functions per worker), ``lipschitz`` (2 × K, the Table 1 constants or the generator's bound).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from fusion_core.errors import UserInputError
from fusion_core.simulate.dawid_skene import Simulation

# Table 1 with the extraction defects fixed (spec §13.1): (p0, c0, p1, c1) per classifier
TABLE1 = [
    (lambda x: -2 * x**2 + 2 * x, 2.0, lambda x: 0.5 + 0.5 * np.abs(np.sin(2 * np.pi * x)), 3.1),
    (lambda x: 2 * (x - 0.5) ** 2, 2.0, lambda x: 0.9 + 0 * x, 0.1),
    (lambda x: 0.5 * np.abs(np.sin(2 * np.pi * x)), 3.1, lambda x: 1 - 2 * (x - 0.5) ** 2, 2.0),
    (lambda x: 0.1 + 0 * x, 0.1, lambda x: 0.5 + 2 * (x - 0.5) ** 2, 2.0),
    (lambda x: 0.5 * x, 0.5, lambda x: 0.75 + 2 * (x - 0.5) ** 3, 1.5),
    (lambda x: 0.25 + 2 * (x - 0.5) ** 3, 1.5, lambda x: 0.75 - 2 * (x - 0.5) ** 3, 1.5),
    (lambda x: 0.5 * (1 - x), 0.5, lambda x: 0.75 + 0.5 * (x - 0.5), 0.5),
    (lambda x: 0.25 + 2 * (x - 0.5) ** 3, 1.5, lambda x: 0.5 * (2 - x), 0.5),
]


def _simulate(p0, p1, T, seed, per_item, prior1, x=None) -> tuple[pd.DataFrame, pd.Series, pd.Series]:
    rng = np.random.default_rng(seed)
    K = len(p0)
    if x is None:
        x = rng.uniform(0, 1, T)
    y = (rng.uniform(size=T) < prior1).astype(int)
    P0 = np.column_stack([np.clip(f(x), 0, 1) for f in p0])  # T × K
    P1 = np.column_stack([np.clip(f(x), 0, 1) for f in p1])
    prob = np.where(y[:, None] == 1, P1, P0)
    labels = (rng.uniform(size=(T, K)) < prob).astype(int)
    if per_item is None:
        ti, wk = np.nonzero(np.ones((T, K), bool))
    else:
        if not 1 <= per_item <= K:
            raise UserInputError(f"responses_per_item must be in 1..{K}, got {per_item}.")
        pick = np.argsort(rng.uniform(size=(T, K)), axis=1)[:, :per_item]
        ti = np.repeat(np.arange(T), per_item)
        wk = pick.ravel()
    tasks = pd.Index([f"t{t}" for t in range(T)])
    df = pd.DataFrame({"task": tasks[ti], "worker": [f"a{k + 1}" for k in wk], "label": labels[ti, wk], "context": x[ti]})
    truth = pd.Series(y, index=pd.Index(tasks, name="task"), name="truth")
    ctx = pd.Series(x, index=pd.Index(tasks, name="task"), name="context")
    return df, truth, ctx


def table1(n_annotators: int = 4, n_items: int = 400, seed: int = 1000, responses_per_item: int | None = None, prior1: float = 0.5) -> Simulation:
    """Spec §13.2 generator: x ~ U(0, 1), y ~ Bernoulli(prior1), ŷ_k ~ Bernoulli(p_{y,k}(x)); classifiers 1..K of
    Table 1.  ``responses_per_item`` (sparse extension §9.1): each item labelled by that many random annotators."""
    if not 1 <= n_annotators <= 8:
        raise UserInputError(f"Table 1 has 8 classifiers; n_annotators must be in 1..8, got {n_annotators}.")
    rows = TABLE1[:n_annotators]
    p0 = [r[0] for r in rows]
    p1 = [r[2] for r in rows]
    c = np.array([[r[1] for r in rows], [r[3] for r in rows]])
    return _package(p0, p1, c, n_items, seed, responses_per_item, prior1)


def flat(n_annotators: int = 4, n_items: int = 400, seed: int = 0, p0: float = 0.2, p1: float = 0.8) -> Simulation:
    """Context-independent annotators (oracle O18): constant p0, p1."""
    f0 = [lambda x, v=p0: v + 0 * x] * n_annotators
    f1 = [lambda x, v=p1: v + 0 * x] * n_annotators
    return _package(f0, f1, np.zeros((2, n_annotators)), n_items, seed, None, 0.5)


def random_smooth(n_annotators: int = 6, n_items: int = 1000, seed: int = 0, swing: float = 0.6, responses_per_item: int | None = None) -> Simulation:
    """Random smooth curves: p1 = 0.75 + a·sin(2π(f x + φ)) and p0 = 0.25 − b·sin(...), amplitudes so that
    each curve moves by about ``swing`` over [0, 1]; Lipschitz bound reported in ``extras['lipschitz']``."""
    rng = np.random.default_rng(seed)
    p0, p1, c = [], [], np.zeros((2, n_annotators))
    for k in range(n_annotators):
        for i, (centre, store) in enumerate(((0.25, p0), (0.75, p1))):
            f = rng.uniform(0.3, 1.0)
            ph = rng.uniform()
            amp = min(0.2, swing / 4)
            sign = -1 if i == 0 else 1
            store.append(lambda x, a=amp, f=f, ph=ph, m=centre, s=sign: m + s * a * np.sin(2 * np.pi * (f * x + ph)))
            c[i, k] = 2 * np.pi * f * amp
    return _package(p0, p1, c, n_items, seed, responses_per_item, 0.5)


def _package(p0, p1, c, T, seed, per_item, prior1) -> Simulation:
    df, truth, ctx = _simulate(p0, p1, T, seed, per_item, prior1)
    workers = pd.Index([f"a{k + 1}" for k in range(len(p0))])
    xm = 0.5
    conf = np.array([[[1 - f0(xm), f0(xm)], [1 - f1(xm), f1(xm)]] for f0, f1 in zip(p0, p1)], dtype=float)
    return Simulation(
        responses=df,
        truth=truth,
        confusion=conf,
        class_prior=np.array([1 - prior1, prior1]),
        workers=workers,
        classes=pd.Index([0, 1]),
        extras={"context": ctx, "p0": list(p0), "p1": list(p1), "lipschitz": c},
    )


def oracle_posterior(sim: Simulation, eps: float = 1e-6) -> np.ndarray:
    """Chair–Varshney posterior P(y = 1) per task (truth order) with the true curves and prior 0.5 (floored)."""
    df = sim.responses
    x = df["context"].to_numpy()
    k = df["worker"].map({w: i for i, w in enumerate(sim.workers)}).to_numpy()
    lab = df["label"].to_numpy()
    p0 = np.empty(len(df))
    p1 = np.empty(len(df))
    for i in range(len(sim.workers)):
        s = k == i
        p0[s] = sim.extras["p0"][i](x[s])
        p1[s] = sim.extras["p1"][i](x[s])
    p0 = np.clip(p0, eps, 1 - eps)
    p1 = np.clip(p1, eps, 1 - eps)
    llr = np.where(lab == 1, np.log(p1 / p0), np.log((1 - p1) / (1 - p0)))
    t = pd.Index(sim.truth.index).get_indexer(df["task"])
    tot = np.bincount(t, weights=llr, minlength=len(sim.truth))
    return 1 / (1 + np.exp(-tot))
