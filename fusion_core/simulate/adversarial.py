"""Small random and adversarial inputs for every kind of method (issue 11, "no pathological slowness"): the fuzz
test of every registered method and ``benchmarks/bench_pathologies.py`` draw from here.

Each draw is a valid long table (``task, worker, label``; ``sequence, position`` for sequential data) of at most
``max_responses`` rows plus the extra inputs a method needs (``graph`` edges, ``context`` values).  A draw mixes the
shapes that broke methods before: many labels (up to 200 distinct label sets for multi-label data), annotators
with a single response, items with exactly tied votes (two annotators who disagree), extreme context values
(±1e300, steps of 1e-300, constants, a few distinct values), long sequences and dense graphs.  Deterministic given
the seed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

KINDS = ("plain", "sequence", "graph", "context", "multilabel")
_ALPHABET = list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-=+@ éß中")


@dataclass
class Case:
    """One generated input: the long table, the keyword arguments of ``fit`` and a short description."""

    df: pd.DataFrame
    kwargs: dict[str, Any] = field(default_factory=dict)
    shape: str = ""


def _names(rng: np.random.Generator, n: int, prefix: str) -> list[str]:
    """``n`` distinct texts: plain, number-like (``007``, ``7``, ``1e3``) or odd characters."""
    style = rng.integers(3)
    if style == 0:
        return [f"{prefix}{i}" for i in range(n)]
    if style == 1:
        pool = ["007", "7", "1e3", "1000", "-0", "0", "TRUE", "NA", "1.0", "01"]
        return (pool + [str(i + 11) for i in range(n)])[:n] if n > len(pool) else pool[:n]
    out: dict[str, None] = {}
    while len(out) < n:
        k = int(rng.integers(1, 6))
        out["".join(rng.choice(_ALPHABET, size=k))] = None
    return list(out)


def _design(rng: np.random.Generator, max_responses: int) -> tuple[int, int, int, np.ndarray, np.ndarray, str]:
    """Items, annotators, responses: item and worker codes of each response and the design's name."""
    shape = str(rng.choice(["dense", "sparse", "singletons", "ties", "tiny"]))
    if shape == "tiny":
        n_items, n_workers, per = int(rng.integers(1, 6)), int(rng.integers(2, 4)), 2
    elif shape == "ties":
        n_items, n_workers, per = int(rng.integers(5, 200)), int(rng.integers(2, 6)), 2
    else:
        n_items = int(rng.integers(5, 400))
        n_workers = int(rng.integers(2, 40))
        per = int(rng.integers(2, min(n_workers, 8) + 1))
    per = min(per, n_workers)
    n_items = max(1, min(n_items, max_responses // per))
    item = np.repeat(np.arange(n_items), per)
    worker = np.concatenate([rng.choice(n_workers, size=per, replace=False) for _ in range(n_items)])
    if shape == "singletons":  # many annotators who give a single response each
        k = len(item) // 3
        extra = n_workers + np.arange(k)
        worker[rng.choice(len(item), size=k, replace=False)] = extra
        n_workers += k
    return n_items, n_workers, len(item), item, worker, shape


def _labels(rng: np.random.Generator, item: np.ndarray, shape: str) -> tuple[np.ndarray, int]:
    """Label codes of each response: many classes, or exact 1-vs-1 ties on every item."""
    many = bool(rng.random() < 0.3)
    k = int(rng.integers(3, 31)) if many else int(rng.integers(2, 5))
    truth = rng.integers(k, size=int(item.max()) + 1)
    acc = rng.uniform(0.3, 0.95)
    lab = np.where(rng.random(len(item)) < acc, truth[item], rng.integers(k, size=len(item)))
    if shape == "ties":  # two responses per item that always disagree
        first = np.r_[True, item[1:] != item[:-1]]
        lab = np.where(first, truth[item], (truth[item] + 1 + rng.integers(k - 1, size=len(item))) % k)
    used = np.unique(lab)
    if len(used) < 2:
        lab[0] = (lab[0] + 1) % k
    return lab, k


def _context(rng: np.random.Generator, n_items: int) -> np.ndarray:
    kind = rng.integers(6)
    if kind == 0:
        return rng.uniform(-1e300, 1e300, n_items)
    if kind == 1:
        return 1.0 + np.arange(n_items) * 1e-300 * rng.integers(0, 3, n_items)
    if kind == 2:
        return np.full(n_items, float(rng.normal()))
    if kind == 3:
        return rng.integers(0, 3, n_items).astype(float)
    if kind == 4:
        return rng.standard_cauchy(n_items) * 1e6
    return rng.uniform(0, 1, n_items)


def adversarial_case(seed: int, kind: str = "plain", *, max_responses: int = 2000) -> Case:
    """One random input for methods that need ``kind`` (see :data:`KINDS`), with at most ``max_responses`` rows."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}")
    rng = np.random.default_rng(seed)
    if kind == "multilabel":
        return _multilabel(rng, max_responses)
    n_items, n_workers, _, item, worker, shape = _design(rng, max_responses)
    lab, k = _labels(rng, item, shape)
    items = np.array(_names(rng, n_items, "t"), dtype=object)
    workers = np.array(_names(rng, n_workers, "w"), dtype=object)
    classes = np.array(_names(rng, k, "c"), dtype=object)
    df = pd.DataFrame({"task": items[item], "worker": workers[worker], "label": classes[lab]})
    kwargs: dict[str, Any] = {}
    if kind == "sequence":
        n_seq = int(rng.integers(1, max(2, n_items // 3) + 1))
        seq = np.sort(rng.integers(n_seq, size=n_items))
        pos = np.zeros(n_items, dtype=np.int64)
        for s in np.unique(seq):  # sequences, not responses
            pos[seq == s] = np.arange(int((seq == s).sum()))
        df["sequence"] = seq[item]
        df["position"] = pos[item]
    elif kind == "graph":
        m = int(rng.integers(0, 4 * n_items + 1))
        src, dst = rng.integers(n_items, size=m), rng.integers(n_items, size=m)
        pairs = np.unique(np.sort(np.column_stack([src, dst])[src != dst], axis=1), axis=0)  # each edge once
        kwargs["graph"] = pd.DataFrame({"source": items[pairs[:, 0]], "target": items[pairs[:, 1]]})
    elif kind == "context":
        kwargs["context"] = pd.Series(_context(rng, n_items), index=pd.Index(items, name="task"), name="context")
    df = df.sample(frac=1.0, random_state=int(rng.integers(2**31))).reset_index(drop=True)
    return Case(df, kwargs, f"{kind}/{shape}: {n_items} items, {n_workers} annotators, {k} labels, {len(df)} rows")


def _multilabel(rng: np.random.Generator, max_responses: int) -> Case:
    """Format A (``|``-joined sets): up to ~200 labels, many distinct reported sets."""
    n_items, n_workers, n, item, worker, shape = _design(rng, max_responses)
    c = int(rng.choice([2, 3, 5, 12, 40, 200]))
    labels = np.array(_names(rng, c, "L"), dtype=object)
    labels = np.array([str(v).replace("|", "/") or "_" for v in labels], dtype=object)
    labels = np.array(list(dict.fromkeys(labels)), dtype=object)
    c = len(labels)
    size = rng.integers(0, min(c, 6) + 1, size=n)
    texts = []
    for s in size:  # responses (≤ max_responses), building the set texts
        texts.append("|".join(labels[rng.choice(c, size=int(s), replace=False)]))
    items = np.array(_names(rng, n_items, "i"), dtype=object)
    workers = np.array(_names(rng, n_workers, "w"), dtype=object)
    df = pd.DataFrame({"task": items[item], "worker": workers[worker], "label": texts})
    return Case(df, {}, f"multilabel/{shape}: {n_items} items, {n_workers} annotators, {c} labels, {n} rows")
