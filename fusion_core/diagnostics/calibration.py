"""Calibration of judges that state a confidence: does a judge that says 0.9 agree with the reference 90 % of the
time?  The reliability diagram (DeGroot & Fienberg 1983; Guo et al. 2017 for the expected calibration error).

Responses carry a confidence in [0, 1] (:attr:`~fusion_core.data.responses.Responses.weight`).  Confidences are
put in ``bins`` equal-width bins; per judge (and pooled) and bin: the mean stated confidence, the observed share
of responses equal to the reference label, a Wilson interval for that share, and the count.  The reference is
the gold label where given, else the consensus of a method that weighs confidences (Dawid–Skene by default) —
a consensus that includes the judge itself, so accuracies against it run somewhat high.  ``ECE = Σ_b (n_b/N)
|accuracy_b − confidence_b|``; ``overconfidence`` is the mean confidence minus the accuracy.

Verdict per judge (thresholds declared once: :data:`CALIBRATION_GAP`, :data:`MIN_RESPONSES`): **over-confident**
when the mean confidence exceeds the accuracy by at least the gap and lies above the accuracy's Wilson interval,
**under-confident** likewise below, **calibrated on average** when the gap is smaller and the mean confidence lies
inside the interval (calibration in the large: the ECE column says how well single bins match), otherwise (or
with fewer than ``MIN_RESPONSES`` referenced responses) **not enough responses to tell**.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.special import ndtri

from fusion_core.data.responses import Responses, as_responses
from fusion_core.errors import AggregationWarning, UserInputError

CALIBRATION_GAP = 0.05  # |mean confidence − accuracy| at least this: over- or under-confident
MIN_RESPONSES = 20  # fewer referenced responses: not enough to tell


@dataclass(frozen=True)
class Calibration:
    """Result of :func:`calibration`.

    ``bins``: one row per (judge, bin) with responses — columns ``judge`` (the user's id, or None for the pooled
    rows), ``bin_low``, ``bin_high``, ``confidence`` (mean stated), ``accuracy`` (observed), ``low``/``high``
    (Wilson interval at ``level``), ``count``.  ``summary``: one row per judge (index ``worker``): ``responses``,
    ``confidence``, ``accuracy``, ``accuracy_low``, ``accuracy_high``, ``overconfidence``, ``ece``, ``verdict``;
    ``pooled`` the numbers over every response.
    ``reference`` says what accuracy is measured against.
    """

    bins: pd.DataFrame
    summary: pd.DataFrame
    pooled: dict[str, float]
    reference: str
    level: float


def wilson(successes: np.ndarray, n: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray]:
    """Wilson score interval for a proportion (Wilson 1927); NaN where n = 0."""
    z = float(ndtri(0.5 + level / 2))
    with np.errstate(divide="ignore", invalid="ignore"):
        p = successes / n
        centre = (p + z**2 / (2 * n)) / (1 + z**2 / n)
        half = z * np.sqrt(p * (1 - p) / n + z**2 / (4 * n**2)) / (1 + z**2 / n)
    return centre - half, centre + half


def _reference_codes(
    resp: Responses, reference: pd.Series | None, method: str, name: str | None
) -> tuple[np.ndarray, str]:
    """Reference label code per item (−1 where none) and its description."""
    codes = np.full(resp.n_items, -1)
    if reference is not None:
        items, values = resp.align_items(reference.dropna(), what="reference label")
        codes[items] = resp.label_codes(values, what="reference labels")
        return codes, name or "gold labels"
    from fusion_core.methods.registry import create

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AggregationWarning)
        res = create(method).fit(resp).result_
    return np.asarray(res.label_codes), f"the consensus of {method} (confidence-weighted)"


def calibration(
    data: Responses | pd.DataFrame,
    reference: pd.Series | None = None,
    *,
    method: str = "ds",
    bins: int = 10,
    level: float = 0.95,
    reference_name: str | None = None,
) -> Calibration:
    """Reliability diagram numbers per judge and pooled (module docstring); a long table's ``confidence`` column
    is the stated confidence.  ``reference_name`` describes a given ``reference`` (default "gold labels"; e.g.
    "the labels of ds" when they are a fit's labels).

    Examples
    --------
    >>> from fusion_core.simulate.judges import judge_panel
    >>> sim = judge_panel(n_items=300, seed=0)
    >>> cal = calibration(sim.responses, sim.truth)
    >>> group = sim.group
    >>> bool(cal.summary.loc[group.index[group], "overconfidence"].min() > cal.summary.loc[group.index[~group],
    ...      "overconfidence"].max())
    True
    """
    if isinstance(data, pd.DataFrame) and "confidence" in data.columns:
        data = as_responses(data, confidence="confidence")
    resp = as_responses(data)
    if resp.weight is None:
        raise UserInputError(
            "these responses carry no confidence; load them with a confidence column (e.g. confidence='confidence')."
        )
    if isinstance(bins, bool) or not isinstance(bins, (int, np.integer)) or not 2 <= bins <= 100:
        raise UserInputError(f"bins must be a whole number from 2 to 100; got {bins!r}.")
    conf = np.asarray(resp.weight, dtype=float)
    ref, source = _reference_codes(resp, reference, method, reference_name)
    keep = ref[resp.item] >= 0
    if not keep.any():
        raise UserInputError("no response is on an item with a reference label.")
    worker, conf = resp.worker[keep], conf[keep]
    right = (resp.label[keep] == ref[resp.item[keep]]).astype(float)
    b = np.minimum((conf * bins).astype(np.int64), bins - 1)
    w = resp.n_workers
    cell = worker * bins + b
    size = w * bins
    n = np.bincount(cell, minlength=size).astype(float)
    sum_c = np.bincount(cell, weights=conf, minlength=size)
    sum_r = np.bincount(cell, weights=right, minlength=size)
    pooled_n = n.reshape(w, bins).sum(axis=0)
    pooled_c = sum_c.reshape(w, bins).sum(axis=0)
    pooled_r = sum_r.reshape(w, bins).sum(axis=0)
    edges = np.arange(bins + 1) / bins
    judge_ids = pd.Index(resp.workers)

    def frame(nn: np.ndarray, cc: np.ndarray, rr: np.ndarray, judge: np.ndarray) -> pd.DataFrame:
        lo, hi = wilson(rr, nn, level)
        k = np.arange(len(nn)) % bins
        with np.errstate(divide="ignore", invalid="ignore"):
            df = pd.DataFrame(
                {
                    "judge": judge,
                    "bin_low": edges[k],
                    "bin_high": edges[k + 1],
                    "confidence": cc / nn,
                    "accuracy": rr / nn,
                    "low": lo,
                    "high": hi,
                    "count": nn.astype(np.int64),
                }
            )
        return df[nn > 0]

    per = frame(n, sum_c, sum_r, judge_ids.take(np.repeat(np.arange(w), bins)).to_numpy(dtype=object))
    pooled_rows = frame(pooled_n, pooled_c, pooled_r, np.full(bins, None, dtype=object))
    table = pd.concat([pooled_rows, per], ignore_index=True)
    gap = np.abs(sum_r - sum_c).reshape(w, bins)  # n_b |acc_b − conf_b| = |Σ right − Σ conf| in bin b
    resp_n = n.reshape(w, bins).sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        summary = pd.DataFrame(
            {
                "responses": resp_n.astype(np.int64),
                "confidence": sum_c.reshape(w, bins).sum(axis=1) / resp_n,
                "accuracy": sum_r.reshape(w, bins).sum(axis=1) / resp_n,
                "ece": gap.sum(axis=1) / resp_n,
            },
            index=pd.Index(judge_ids, name="worker"),
        )
    acc_lo, acc_hi = wilson(sum_r.reshape(w, bins).sum(axis=1), resp_n, level)
    summary.insert(3, "accuracy_low", acc_lo)
    summary.insert(4, "accuracy_high", acc_hi)
    summary.insert(5, "overconfidence", summary["confidence"] - summary["accuracy"])
    summary["verdict"] = judge_verdicts(summary)
    total = float(pooled_n.sum())
    pooled = {
        "responses": total,
        "confidence": float(pooled_c.sum() / total),
        "accuracy": float(pooled_r.sum() / total),
        "ece": float(np.abs(pooled_r - pooled_c).sum() / total),
    }
    pooled["overconfidence"] = pooled["confidence"] - pooled["accuracy"]
    return Calibration(table, summary, pooled, source, level)


def judge_verdicts(summary: pd.DataFrame) -> np.ndarray:
    """Over-confident / under-confident / calibrated on average / not enough responses to tell (module docstring)."""
    gap = summary["overconfidence"].to_numpy()
    conf = summary["confidence"].to_numpy()
    lo, hi = summary["accuracy_low"].to_numpy(), summary["accuracy_high"].to_numpy()
    enough = summary["responses"].to_numpy() >= MIN_RESPONSES
    out = np.full(len(summary), "not enough responses to tell", dtype=object)
    out[enough & (gap >= CALIBRATION_GAP) & (conf > hi)] = "over-confident"
    out[enough & (gap <= -CALIBRATION_GAP) & (conf < lo)] = "under-confident"
    out[enough & (np.abs(gap) < CALIBRATION_GAP) & (conf >= lo) & (conf <= hi)] = "calibrated on average"
    return out


__all__ = ["CALIBRATION_GAP", "MIN_RESPONSES", "Calibration", "calibration", "judge_verdicts", "wilson"]
