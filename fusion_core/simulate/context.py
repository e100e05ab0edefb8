"""Context-dependent annotators: the Table 1 classifiers of Soltanmohammadi et al. (ICML 2015) and random
smooth curves (spec ``context.md`` §13).  Returns a :class:`ContextCrowd` with the context in
``responses['context']`` and as typed fields: ``context`` (Series by task), ``p0``/``p1`` (lists of vectorised curve
functions per worker), ``lipschitz`` (2 × K, the Table 1 constants or the generator's bound).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from fusion_core.errors import UserInputError
from fusion_core.simulate.dawid_skene import Simulation


@dataclass
class ContextCrowd(Simulation):
    """Context-dependent annotators: :class:`Simulation` plus the ``context`` (Series by task) and the
    ``lipschitz`` constants; the binary generators give the curves ``p0``/``p1`` (one vectorised function per
    worker), :func:`confusion_crowd` the ``confusion_fn`` per worker (context → classes × classes)."""

    context: pd.Series
    lipschitz: Any
    p0: list[Any] | None = None
    p1: list[Any] | None = None
    confusion_fn: list[Any] | None = None


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


def _simulate(p0, p1, T, seed, per_item, *, prior1, x=None) -> tuple[pd.DataFrame, pd.Series, pd.Series]:
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
    df = pd.DataFrame(
        {"task": tasks[ti], "worker": [f"a{k + 1}" for k in wk], "label": labels[ti, wk], "context": x[ti]}
    )
    truth = pd.Series(y, index=pd.Index(tasks, name="task"), name="truth")
    ctx = pd.Series(x, index=pd.Index(tasks, name="task"), name="context")
    return df, truth, ctx


def table1(
    n_annotators: int = 4,
    n_items: int = 400,
    seed: int = 1000,
    responses_per_item: int | None = None,
    prior1: float = 0.5,
) -> ContextCrowd:
    """Spec §13.2 generator: x ~ U(0, 1), y ~ Bernoulli(prior1), ŷ_k ~ Bernoulli(p_{y,k}(x)); classifiers 1..K of
    Table 1.  ``responses_per_item`` (sparse extension §9.1): each item labelled by that many random annotators."""
    if not 1 <= n_annotators <= 8:
        raise UserInputError(f"Table 1 has 8 classifiers; n_annotators must be in 1..8, got {n_annotators}.")
    rows = TABLE1[:n_annotators]
    p0 = [r[0] for r in rows]
    p1 = [r[2] for r in rows]
    c = np.array([[r[1] for r in rows], [r[3] for r in rows]])
    return _package(p0, p1, c, n_items, seed, per_item=responses_per_item, prior1=prior1)


def flat(n_annotators: int = 4, n_items: int = 400, seed: int = 0, p0: float = 0.2, p1: float = 0.8) -> ContextCrowd:
    """Context-independent annotators (oracle O18): constant p0, p1."""
    f0 = [lambda x, v=p0: v + 0 * x] * n_annotators
    f1 = [lambda x, v=p1: v + 0 * x] * n_annotators
    return _package(f0, f1, np.zeros((2, n_annotators)), n_items, seed, per_item=None, prior1=0.5)


def random_smooth(
    n_annotators: int = 6, n_items: int = 1000, seed: int = 0, swing: float = 0.6, responses_per_item: int | None = None
) -> ContextCrowd:
    """Random smooth curves: p1 = 0.75 + a·sin(2π(f x + φ)) and p0 = 0.25 − b·sin(...), amplitudes so that
    each curve moves by about ``swing`` over [0, 1]; Lipschitz bound reported in ``lipschitz``."""
    rng = np.random.default_rng(seed)
    p0: list[Any] = []
    p1: list[Any] = []
    c = np.zeros((2, n_annotators))
    for k in range(n_annotators):
        for i, (centre, store) in enumerate(((0.25, p0), (0.75, p1))):
            f = rng.uniform(0.3, 1.0)
            ph = rng.uniform()
            amp = min(0.2, swing / 4)
            sign = -1 if i == 0 else 1
            store.append(lambda x, a=amp, f=f, ph=ph, m=centre, s=sign: m + s * a * np.sin(2 * np.pi * (f * x + ph)))
            c[i, k] = 2 * np.pi * f * amp
    return _package(p0, p1, c, n_items, seed, per_item=responses_per_item, prior1=0.5)


def _package(p0, p1, c, T, seed, *, per_item, prior1) -> ContextCrowd:
    df, truth, ctx = _simulate(p0, p1, T, seed, per_item, prior1=prior1)
    workers = pd.Index([f"a{k + 1}" for k in range(len(p0))])
    xm = 0.5
    conf = np.array([[[1 - f0(xm), f0(xm)], [1 - f1(xm), f1(xm)]] for f0, f1 in zip(p0, p1)], dtype=float)
    return ContextCrowd(
        responses=df,
        truth=truth,
        confusion=conf,
        class_prior=np.array([1 - prior1, prior1]),
        workers=workers,
        classes=pd.Index([0, 1]),
        context=ctx,
        p0=list(p0),
        p1=list(p1),
        lipschitz=c,
    )


def oracle_posterior(sim: ContextCrowd, eps: float = 1e-6) -> np.ndarray:
    """Chair–Varshney posterior P(y = 1) per task (truth order) with the true curves and prior 0.5 (floored)."""
    if sim.p0 is None or sim.p1 is None:
        raise ValueError("oracle_posterior needs the curves p0/p1 of a binary generator (table1, flat, random_smooth)")
    curves0, curves1 = sim.p0, sim.p1
    df = sim.responses
    x = df["context"].to_numpy()
    k = df["worker"].map({w: i for i, w in enumerate(sim.workers)}).to_numpy()
    lab = df["label"].to_numpy()
    p0 = np.empty(len(df))
    p1 = np.empty(len(df))
    for i in range(len(sim.workers)):
        s = k == i
        p0[s] = curves0[i](x[s])
        p1[s] = curves1[i](x[s])
    p0 = np.clip(p0, eps, 1 - eps)
    p1 = np.clip(p1, eps, 1 - eps)
    llr = np.where(lab == 1, np.log(p1 / p0), np.log((1 - p1) / (1 - p0)))
    t = pd.Index(sim.truth.index).get_indexer(df["task"])
    tot = np.bincount(t, weights=llr, minlength=len(sim.truth))
    return 1 / (1 + np.exp(-tot))


def confusion_crowd(
    n_annotators: int = 6,
    n_items: int = 1000,
    n_classes: int = 3,
    seed: int = 0,
    responses_per_item: int | None = None,
    *,
    swing: float = 0.5,
) -> ContextCrowd:
    """Multiclass annotators with context-dependent confusion matrices (spec §9.2 option 2, [EXT]).

    x ~ U(0, 1), y uniform over ``n_classes``.  Annotator k's accuracy on class i is
    a_ki(x) = m_ki + swing·(x − 1/2) for even k and m_ki − swing·(x − 1/2) for odd k (good on opposite halves of the
    context), m_ki ~ U(0.6, 0.75); its errors on class i go to class i + 1 (mod J) with share f_k(x) = 0.5 + 0.4x
    (0.9 − 0.4x for odd k) and are spread evenly over the other classes otherwise.  Typed fields: ``context`` (Series by
    task), ``confusion_fn`` (per worker, x ↦ len(x) × true × reported), ``lipschitz`` (true × workers: the largest
    slope of any entry of the row, measured on a fine grid)."""
    if n_classes < 2:
        raise UserInputError(f"n_classes must be ≥ 2, got {n_classes}.")
    rng = np.random.default_rng(seed)
    J, K, T = int(n_classes), int(n_annotators), int(n_items)
    base = rng.uniform(0.6, 0.75, (K, J))

    def make(k):
        sgn = 1.0 if k % 2 == 0 else -1.0

        def conf(x, k=k, sgn=sgn):
            x = np.atleast_1d(np.asarray(x, float))
            acc = np.clip(base[k][None, :] + sgn * swing * (x[:, None] - 0.5), 0.05, 0.98)  # len(x) × J
            share = 0.5 + 0.4 * x if sgn > 0 else 0.9 - 0.4 * x
            out = np.empty((len(x), J, J))
            for i in range(J):  # classes
                err = 1.0 - acc[:, i]
                nxt = (i + 1) % J
                rest = [j for j in range(J) if j not in (i, nxt)]
                out[:, i, :] = 0.0
                out[:, i, i] = acc[:, i]
                if rest:
                    out[:, i, nxt] = err * share
                    out[:, i, rest] = (err * (1 - share) / len(rest))[:, None]
                else:
                    out[:, i, nxt] = err
            return out

        return conf

    fns = [make(k) for k in range(K)]
    x = rng.uniform(0, 1, T)
    y = rng.integers(0, J, T)
    if responses_per_item is None:
        ti, wk = np.nonzero(np.ones((T, K), bool))
    else:
        if not 1 <= responses_per_item <= K:
            raise UserInputError(f"responses_per_item must be in 1..{K}, got {responses_per_item}.")
        pick = np.argsort(rng.uniform(size=(T, K)), axis=1)[:, :responses_per_item]
        ti = np.repeat(np.arange(T), responses_per_item)
        wk = pick.ravel()
    u = rng.uniform(size=len(ti))
    lab = np.empty(len(ti), dtype=np.int64)
    for k in range(K):  # annotators, vectorised over their responses
        s = wk == k
        rows = fns[k](x[ti[s]])[np.arange(s.sum()), y[ti[s]]]  # responses × J
        lab[s] = (u[s][:, None] > np.cumsum(rows, axis=1)).sum(axis=1).clip(0, J - 1)
    tasks = pd.Index([f"t{t}" for t in range(T)])
    df = pd.DataFrame({"task": tasks[ti], "worker": [f"a{k + 1}" for k in wk], "label": lab, "context": x[ti]})
    truth = pd.Series(y, index=pd.Index(tasks, name="task"), name="truth")
    ctx = pd.Series(x, index=pd.Index(tasks, name="task"), name="context")
    g = np.linspace(0, 1, 2001)
    lip = np.array(
        [[np.max(np.abs(np.diff(fns[k](g)[:, i, :], axis=0))) / (g[1] - g[0]) for k in range(K)] for i in range(J)]
    )
    return ContextCrowd(
        responses=df,
        truth=truth,
        confusion=np.stack([f(np.array([0.5]))[0] for f in fns]),
        class_prior=np.full(J, 1.0 / J),
        workers=pd.Index([f"a{k + 1}" for k in range(K)]),
        classes=pd.Index(range(J)),
        context=ctx,
        confusion_fn=fns,
        lipschitz=lip,
    )
