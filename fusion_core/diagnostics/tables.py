"""The tables a user reads and downloads, built from typed result fields only (shared by the CLI and the app).

* :func:`annotator_table` — one row per annotator: accuracy (shrunk towards the crowd, :func:`shrunk_accuracy`,
  for the ranking), number of responses, the method's per-annotator
  columns (:class:`~fusion_core.methods.results.AnnotatorColumn`, headed by their plain-words titles), bootstrap
  intervals when given, the simulated role for demos.  Nothing else: a quantity that is not per annotator (an
  eigenvalue spectrum, a ranking order) cannot enter it.
* :func:`item_table` — one row per item: the method's own hard label (``FitResult.label_codes``, e.g. the
  Viterbi path), the posterior probability of that label, entropy, responses, the posterior of every class, gold.
* :func:`confusion_table` — confusion matrices in long form (annotator, true, reported, probability).
* :func:`plain_words` — a method's warning rewritten for readers (no spec references, symbols or reprs).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from fusion_core.data.responses import Responses
from fusion_core.methods.results import as_result

_PLAIN = (
    (re.compile(r"\s*\((?:valid-pair fraction|core size)[^)]*\)"), ""),  # internal diagnostics of the spectral core
    (re.compile(r"\s*\((?:see )?(?:spec\s*)?(?:``[^`]*``\s*)?(?:§[\d.]+|P\d+|J\d+|Eq\.?\s*\d+)[^)]*\)"), ""),
    (re.compile(r"\bspec\s+(?:``[^`]*``\s*)?(?:§[\d.]+|P\d+)"), ""),
    (re.compile(r"\bnp\.\w+\(([^()]*)\)"), r"\1"),  # numpy scalar reprs
    (re.compile(r"(?:class imbalance\s+)?b̂"), "the estimated class balance"),
    (re.compile(r"ψ̂"), "sensitivity"),
    (re.compile(r"η̂"), "specificity"),
    (re.compile(r"μ̂"), "the mean label"),
    (re.compile(r"v̂"), "the ranking eigenvector"),
    (re.compile(r"``([^`]*)``"), r"\1"),
    (re.compile(r"\s{2,}"), " "),
)


def plain_words(text: str) -> str:
    """A method's warning for readers: spec references ("(spec P3)", "§6.5"), the spectral core's internal figures
    ("valid-pair fraction … core size"), estimator symbols (b̂, ψ̂) and numpy reprs ("np.int64(0)") rewritten."""
    out = str(text)
    for pattern, repl in _PLAIN:
        out = pattern.sub(repl, out)
    return out.replace(" .", ".").replace(" ,", ",").strip()


ITEM_ORDERS = {
    "lowest confidence first": ("confidence", True),
    "highest confidence first": ("confidence", False),
    "highest entropy first": ("entropy", False),
    "task id": (None, True),
}
"""Sort orders offered for the item table: name → (column or None for the task id, ascending)."""


def label_confidence(result: Any) -> np.ndarray:
    """Posterior probability of each item's hard label (the maximum posterior when the label is the argmax)."""
    res = as_result(result)
    return res.posterior[np.arange(len(res.items)), res.label_codes]


def _counts(counts: np.ndarray, coded: pd.Index, wanted: pd.Index) -> np.ndarray:
    """``counts`` (in the order of ``coded``) looked up for the ids ``wanted`` (0 for ids not in ``coded``)."""
    codes = coded.get_indexer(wanted)
    return np.where(codes >= 0, counts[np.maximum(codes, 0)], 0)


def skill_lower_bound(skill: np.ndarray, n: np.ndarray, level: float = 0.9) -> np.ndarray:
    """The lower end of a Wilson score interval at ``level`` (two-sided) for an accuracy ``skill`` measured on
    ``n`` responses (an approximation: the accuracy is a model estimate, not a count of correct answers).
    Ranks 10 responses at 0.9 below 500 responses at 0.85; the ranking itself uses :func:`shrunk_accuracy`."""
    from scipy.stats import norm

    z = float(norm.ppf(0.5 + level / 2))
    p = np.clip(np.asarray(skill, dtype=float), 0.0, 1.0)
    n = np.maximum(np.asarray(n, dtype=float), 1.0)
    centre = p + z * z / (2 * n)
    spread = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return (centre - spread) / (1 + z * z / n)


MIN_PRIOR = 2.0
"""Fewest pseudo-responses of the crowd prior (and ½ on each side): 10 perfect responses never give 1–1."""
MAX_PRIOR = 20.0
"""Most pseudo-responses of the crowd prior: a crowd of equals cannot drown an annotator's own evidence."""


@dataclass(frozen=True)
class ShrunkAccuracy:
    """Accuracy shrunk towards the crowd: posterior mean and central interval of
    ``Beta(s·m + a·n, s·(1 − m) + (1 − a)·n)``, with crowd mean ``m`` and ``s`` pseudo-responses."""

    estimate: np.ndarray
    low: np.ndarray
    high: np.ndarray
    crowd_mean: float
    prior_strength: float


def shrunk_accuracy(accuracy: np.ndarray, n: np.ndarray, level: float = 0.9) -> ShrunkAccuracy:
    """Empirical-Bayes accuracy (Beta–binomial; Casella 1985, "An introduction to empirical Bayes data
    analysis"): the prior is a Beta centred on the crowd's response-weighted accuracy ``m`` whose strength ``s``
    (pseudo-responses) is the method-of-moments value ``m(1 − m)/τ² − 1``, τ² the spread of accuracies beyond
    binomial noise, clipped to [:data:`MIN_PRIOR`, :data:`MAX_PRIOR`]; each side gets at least ½ pseudo-response.
    ``accuracy`` × ``n`` counts as the correct responses (the accuracy is a model estimate).  Annotators with few
    responses move towards the crowd and get wide intervals; well-measured ones keep their own accuracy."""
    from scipy.stats import beta

    a = np.clip(np.nan_to_num(np.asarray(accuracy, dtype=float), nan=0.0), 0.0, 1.0)
    n = np.maximum(np.asarray(n, dtype=float), 0.0)
    total = float(n.sum())
    m = float((a * n).sum() / total) if total > 0 else float(a.mean()) if a.size else 0.5
    m = min(max(m, 1e-3), 1 - 1e-3)
    seen = n > 0
    if seen.sum() >= 2:
        w = n[seen] / n[seen].sum()
        spread = float((w * (a[seen] - m) ** 2).sum())
        noise = float((w * m * (1 - m) / n[seen]).sum())
        tau2 = spread - noise
        s = m * (1 - m) / tau2 - 1 if tau2 > 0 else MAX_PRIOR
    else:
        s = MAX_PRIOR
    s = min(max(s, MIN_PRIOR), MAX_PRIOR)
    alpha = max(s * m, 0.5) + a * n
    beta_ = max(s * (1 - m), 0.5) + (1 - a) * n
    tail = (1 - level) / 2
    return ShrunkAccuracy(
        estimate=alpha / (alpha + beta_),
        low=beta.ppf(tail, alpha, beta_),
        high=beta.ppf(1 - tail, alpha, beta_),
        crowd_mean=m,
        prior_strength=s,
    )


def annotator_table(
    result: Any,
    responses: Responses,
    *,
    intervals: pd.DataFrame | None = None,
    roles: pd.Series | None = None,
    lower_bound: bool = False,
    level: float = 0.9,
) -> pd.DataFrame:
    """One row per annotator (index ``annotator``, ids as text), best accuracy first.

    Columns: ``accuracy`` (``FitResult.worker_skill``: for most methods the expected accuracy), ``responses``,
    one column per :class:`~fusion_core.methods.results.AnnotatorColumn` headed by its ``title``, ``accuracy low``
    / ``accuracy high`` from ``intervals`` (a frame by annotator with ``low`` and ``high``, e.g.
    ``BootstrapResult.skills``) and ``simulated role`` from ``roles`` (Series by annotator).  ``lower_bound``:
    add ``accuracy (shrunk)`` and ``accuracy (lower bound)`` from :func:`shrunk_accuracy` at ``level`` and sort
    by the lower bound, so annotators with few responses do not outrank well-measured ones; with ``intervals``
    the interval shown is the union of the bootstrap interval and the shrunk one (a bootstrap of 10 responses
    can be 1–1: the refits see the same few answers), and the lower bound is its lower end.
    """
    res = as_result(result)
    df = pd.DataFrame(
        {
            "accuracy": np.asarray(res.worker_skill, dtype=float),
            "responses": _counts(responses.responses_per_worker, responses.workers, res.workers),
        },
        index=pd.Index(res.workers, name="annotator"),
    )
    for col in res.annotator_columns:
        header = col.title if col.title not in df.columns else f"{col.title} ({col.key})"
        df[header] = np.asarray(col.values)
    shrunk = shrunk_accuracy(df["accuracy"].to_numpy(), df["responses"].to_numpy(), level) if lower_bound else None
    if intervals is not None:
        low = intervals["low"].reindex(res.workers).to_numpy(dtype=float)
        high = intervals["high"].reindex(res.workers).to_numpy(dtype=float)
        if shrunk is not None:
            low, high = np.fmin(low, shrunk.low), np.fmax(high, shrunk.high)
        df["accuracy low"], df["accuracy high"] = low, high
    if roles is not None:
        df["simulated role"] = roles.reindex(res.workers).to_numpy()
    df.index = pd.Index(df.index.astype(str), name="annotator")
    if shrunk is not None:
        low = df["accuracy low"].to_numpy() if intervals is not None else shrunk.low
        df.insert(1, "accuracy (lower bound)", low)
        df.insert(2, "accuracy (shrunk)", shrunk.estimate)
        return df.sort_values(["accuracy (lower bound)", "accuracy"], ascending=False, kind="stable")
    return df.sort_values("accuracy", ascending=False, kind="stable")


def item_table(result: Any, responses: Responses, *, gold: pd.Series | None = None) -> pd.DataFrame:
    """One row per item (index ``task``, ids as text): label, confidence, entropy, responses, ``P(<class>)`` for
    every class, and ``gold`` (text, empty where unknown) when gold labels are given."""
    res = as_result(result)
    post = res.posterior
    with np.errstate(divide="ignore", invalid="ignore"):
        entropy = -np.nansum(np.where(post > 0, post * np.log(post), 0.0), axis=1)
    df = pd.DataFrame(
        {
            "label": res.classes.take(res.label_codes).astype(str),
            "confidence": label_confidence(res),
            "entropy": entropy,
            "responses": _counts(responses.responses_per_item, responses.items, res.items),
        },
        index=pd.Index(res.items.astype(str), name="task"),
    )
    for k, c in enumerate(res.classes):
        df[f"P({c})"] = post[:, k]
    if gold is not None:
        g = pd.Series(gold.astype(str).to_numpy(), index=gold.index.astype(str))
        df["gold"] = g.reindex(df.index).fillna("")
    return df


def filter_items(df: pd.DataFrame, *, labels: list[str] | None, search: str, sort: str) -> pd.DataFrame:
    """Rows of an :func:`item_table` with one of ``labels`` (all when empty) whose task id contains ``search``,
    in one of the :data:`ITEM_ORDERS`."""
    out = df
    if labels:
        out = out[out["label"].isin(labels)]
    if search:
        out = out[out.index.str.contains(search, case=False, regex=False)]
    col, ascending = ITEM_ORDERS.get(sort, ("confidence", True))
    return out.sort_index() if col is None else out.sort_values(col, ascending=ascending, kind="stable")


def confusion_table(result: Any) -> pd.DataFrame | None:
    """Confusion matrices in long form (worker, true, reported, probability), or None when the method estimates
    none."""
    res = as_result(result)
    if res.confusion is None:
        return None
    w, k, _ = res.confusion.shape
    return pd.DataFrame(
        {
            "worker": np.repeat(np.asarray(res.workers, dtype=object), k * k),
            "true": np.tile(np.repeat(np.asarray(res.classes, dtype=object), k), w),
            "reported": np.tile(np.asarray(res.classes, dtype=object), w * k),
            "probability": res.confusion.reshape(-1),
        }
    )
