"""The thesis's Boolean noise models (spec ``multilabel.md`` §3.2) and multi-label evaluation metrics (§12 ML18).

Streich 2010 (ETH Diss. 19229), Ch. 9: under the mixture model (9.16) a source emits the true bit with
probability 1 − ε and guesses "present" with probability r otherwise; under the asymmetric flip model (9.17) a
present label is missed with probability ε1 and an absent one reported with probability ε0.  The two are the same
model for ε0 + ε1 ≤ 1: (ε0, ε1) = (ε r, ε (1 − r)).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from fusion_core.errors import UserInputError


def q_mixture(beta_L: np.ndarray, eps: float, r: float) -> np.ndarray:
    """P(x = 1) under the mixture model (9.16): β_L (ε − 1) + (1 − ε) + ε r."""
    return beta_L * (eps - 1) + (1 - eps) + eps * r


def q_flip(beta_L: np.ndarray, eps0: float, eps1: float) -> np.ndarray:
    """P(x = 1) under the asymmetric flip model (9.17): β_L (ε0 + ε1 − 1) + 1 − ε1."""
    return beta_L * (eps0 + eps1 - 1) + 1 - eps1


def mixture_to_flip(eps: float, r: float) -> tuple[float, float]:
    """(ε, r) → (ε0, ε1) = (ε r, ε (1 − r)) (exact, spec §3.2)."""
    return eps * r, eps * (1 - r)


def flip_to_mixture(eps0: float, eps1: float) -> tuple[float, float]:
    """(ε0, ε1) → (ε, r) = (ε0 + ε1, ε0 / (ε0 + ε1)); r is NaN (undefined) when ε0 + ε1 = 0; refused when
    ε0 + ε1 > 1 (an adversarial annotator has no mixture counterpart)."""
    e = eps0 + eps1
    if e > 1:
        raise UserInputError(f"ε0 + ε1 = {e:.3g} > 1 has no mixture counterpart (adversarial annotator).")
    return e, (eps0 / e if e > 0 else float("nan"))


def _as_matrix(sets: pd.Series, labels: Sequence[Any]) -> np.ndarray:
    lab = {v: i for i, v in enumerate(labels)}
    out = np.zeros((len(sets), len(labels)), bool)
    for r, s in enumerate(sets):  # metrics on user-facing Series of tuples
        for v in s:
            out[r, lab[v]] = True
    return out


def multilabel_metrics(pred: pd.Series, truth: pd.Series, labels: Sequence[Any] | None = None) -> dict[str, Any]:
    """Exact-set accuracy, Hamming loss, per-label F1, macro F1 and BER = 1 − mean per-set recall
    (spec §12 ML18; thesis (2.16) as printed is the mean per-set recall, erratum 12).  Series by task of tuples."""
    common = truth.index.intersection(pred.index)
    p, t = pred.loc[common], truth.loc[common]
    if labels is None:
        labels = sorted({v for s in list(p) + list(t) for v in s}, key=str)
    P, T = _as_matrix(p, labels), _as_matrix(t, labels)
    tp = (P & T).sum(axis=0)
    fp = (P & ~T).sum(axis=0)
    fn = (~P & T).sum(axis=0)
    denom = 2 * tp + fp + fn
    f1 = np.where(denom > 0, 2 * tp / np.where(denom > 0, denom, 1), 1.0)
    nt = T.sum(axis=1)
    recall = np.where(nt > 0, (P & T).sum(axis=1) / np.where(nt > 0, nt, 1), 1.0)
    return {
        "exact_set_accuracy": float((P == T).all(axis=1).mean()),
        "hamming_loss": float((P != T).mean()),
        "per_label_f1": dict(zip(labels, f1.tolist(), strict=True)),
        "macro_f1": float(f1.mean()),
        "ber": float(1 - recall.mean()),
    }
