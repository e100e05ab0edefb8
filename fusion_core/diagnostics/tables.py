"""The tables a user reads and downloads, built from typed result fields only (shared by the CLI and the app).

* :func:`annotator_table` — one row per annotator: skill, number of responses, the method's per-annotator
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
    """Evidence-aware skill: the lower end of a Wilson score interval at ``level`` (two-sided) for an accuracy
    ``skill`` measured on ``n`` responses (an approximation: the skill is a model estimate, not a count of correct
    answers).  Ranks 10 responses at 0.9 below 500 responses at 0.85."""
    from scipy.stats import norm

    z = float(norm.ppf(0.5 + level / 2))
    p = np.clip(np.asarray(skill, dtype=float), 0.0, 1.0)
    n = np.maximum(np.asarray(n, dtype=float), 1.0)
    centre = p + z * z / (2 * n)
    spread = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return (centre - spread) / (1 + z * z / n)


def annotator_table(
    result: Any,
    responses: Responses,
    *,
    intervals: pd.DataFrame | None = None,
    roles: pd.Series | None = None,
    lower_bound: bool = False,
) -> pd.DataFrame:
    """One row per annotator (index ``annotator``, ids as text), best skill first.

    Columns: ``skill`` (``FitResult.worker_skill``), ``responses``, one column per
    :class:`~fusion_core.methods.results.AnnotatorColumn` headed by its ``title``, ``skill low`` / ``skill high``
    from ``intervals`` (a frame by annotator with ``low`` and ``high``, e.g. ``BootstrapResult.skills``) and
    ``simulated role`` from ``roles`` (Series by annotator).  ``lower_bound``: add ``skill (lower bound)`` — the
    bootstrap ``low`` when ``intervals`` are given, else :func:`skill_lower_bound` — and sort by it, so annotators
    with few responses do not outrank well-measured ones.
    """
    res = as_result(result)
    df = pd.DataFrame(
        {
            "skill": np.asarray(res.worker_skill, dtype=float),
            "responses": _counts(responses.responses_per_worker, responses.workers, res.workers),
        },
        index=pd.Index(res.workers, name="annotator"),
    )
    for col in res.annotator_columns:
        header = col.title if col.title not in df.columns else f"{col.title} ({col.key})"
        df[header] = np.asarray(col.values)
    if intervals is not None:
        df["skill low"] = intervals["low"].reindex(res.workers).to_numpy(dtype=float)
        df["skill high"] = intervals["high"].reindex(res.workers).to_numpy(dtype=float)
    if roles is not None:
        df["simulated role"] = roles.reindex(res.workers).to_numpy()
    df.index = pd.Index(df.index.astype(str), name="annotator")
    if lower_bound:
        low = df["skill low"].to_numpy() if intervals is not None else skill_lower_bound(df["skill"], df["responses"])
        df.insert(1, "skill (lower bound)", low)
        return df.sort_values(["skill (lower bound)", "skill"], ascending=False, kind="stable")
    return df.sort_values("skill", ascending=False, kind="stable")


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
