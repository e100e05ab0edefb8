"""Evaluation metrics against gold labels (used by benchmarks, the Compare page and tests)."""

from __future__ import annotations

import numpy as np
import pandas as pd


def accuracy(labels: pd.Series, truth: pd.Series) -> float:
    """Fraction of gold items whose predicted label equals the gold label (items without a prediction count wrong)."""
    truth = pd.Series(truth).dropna()
    pred = pd.Series(labels).reindex(truth.index)
    return float((pred.to_numpy() == truth.to_numpy()).mean()) if len(truth) else float("nan")


def balanced_accuracy(labels: np.ndarray, truth: np.ndarray) -> float:
    """Mean over the gold classes of the share of their items labelled correctly (P14 Eq. 1 for two classes);
    ``labels`` and ``truth`` are aligned arrays (one entry per item)."""
    pred, gold = np.asarray(labels), np.asarray(truth)
    return float(np.mean([np.mean(pred[gold == c] == c) for c in np.unique(gold)]))


def macro_f1(labels: pd.Series, truth: pd.Series, classes=None) -> float:
    """Unweighted mean over classes of the per-class F1 score (classes present in gold or predictions)."""
    truth = pd.Series(truth).dropna()
    pred = pd.Series(labels).reindex(truth.index)
    y, p = truth.to_numpy(), pred.to_numpy()
    classes = pd.unique(np.concatenate([y, p[~pd.isna(p)]])) if classes is None else classes
    f1s = []
    for c in classes:
        tp = np.sum((p == c) & (y == c))
        fp = np.sum((p == c) & (y != c))
        fn = np.sum((p != c) & (y == c))
        f1s.append(0.0 if tp == 0 else 2 * tp / (2 * tp + fp + fn))
    return float(np.mean(f1s)) if f1s else float("nan")


# ----------------------------------------------------------------------------------------------------------------
# Sequential / networked metrics (spec sequential-networked.md §3.1 and pitfall P8)


def _aligned(labels: pd.Series, truth: pd.Series) -> tuple[np.ndarray, np.ndarray, pd.Index]:
    truth = pd.Series(truth).dropna()
    pred = pd.Series(labels).reindex(truth.index)
    return pred.to_numpy(), truth.to_numpy(), truth.index


def per_sequence_f1(labels: pd.Series, truth: pd.Series, sequences: pd.Series) -> float:
    """Macro-F1 computed within each sequence, then averaged over sequences (the paper's sequential F-score).

    Zero-division policy (P8): inside a sequence a class is scored only if it occurs in the gold labels or the
    predictions; a class predicted but absent from the gold scores F1 = 0 (as does a gold class never predicted).
    ``sequences`` maps task → sequence id.
    """
    pred, gold, index = _aligned(labels, truth)
    seq = pd.Series(sequences).reindex(index).to_numpy()
    if len(gold) == 0:
        return float("nan")
    seq_code, _ = pd.factorize(seq)
    classes, codes = np.unique(np.concatenate([gold.astype(str), pred.astype(str)]), return_inverse=True)
    g, p = codes[: len(gold)], codes[len(gold) :]
    k, s = len(classes), seq_code.max() + 1
    tp = np.bincount(seq_code * k + g, weights=(g == p), minlength=s * k).reshape(s, k)
    n_gold = np.bincount(seq_code * k + g, minlength=s * k).reshape(s, k)
    n_pred = np.bincount(seq_code * k + p, minlength=s * k).reshape(s, k)
    present = (n_gold + n_pred) > 0
    f1 = np.where(present, 2 * tp / np.maximum(n_gold + n_pred, 1), 0.0)
    per_seq = f1.sum(axis=1) / present.sum(axis=1)
    return float(per_seq.mean())


def confusion_error(true_confusion: np.ndarray, estimated: np.ndarray) -> float:
    """ε_CM of eq. (38): mean over annotators of the induced 1-norm ``||Γ_m − Γ̂_m||_1`` (maximum column L1 of the
    paper's Γ = maximum row L1 of the package's ``workers × true × reported`` arrays).  Pass the package layout."""
    diff = np.abs(np.asarray(true_confusion, float) - np.asarray(estimated, float))
    if diff.ndim == 2:
        diff = diff[None]
    return float(diff.sum(axis=2).max(axis=1).mean())


def transition_error(true_transition: np.ndarray, estimated: np.ndarray) -> float:
    """``||T − T̂||_1`` (induced 1-norm: maximum column sum) for ``T[next, prev]`` (column-stochastic)."""
    diff = np.abs(np.asarray(true_transition, float) - np.asarray(estimated, float))
    return float(diff.sum(axis=0).max())


def bio_spans(tags: np.ndarray, sequences: np.ndarray) -> pd.DataFrame:
    """Entity spans of BIO tags given in sequence order (conlleval rules): an entity starts at ``B-X``, or at
    ``I-X`` not preceded by ``B-X``/``I-X`` in the same sequence, and continues over following ``I-X``.
    Returns a DataFrame ``start, end, type`` (end exclusive, positions in the given order)."""
    tags = pd.Series(tags, dtype=object).fillna("O").astype(str).to_numpy()
    n = len(tags)
    if n == 0:
        return pd.DataFrame({"start": [], "end": [], "type": []})
    ser = pd.Series(tags)
    head = ser.str[:2].to_numpy()
    prefix = np.where(np.isin(head, ["B-", "I-"]), head, "O")
    etype = np.where(prefix != "O", ser.str[2:].to_numpy(), "").astype(object)
    seq = pd.factorize(np.asarray(sequences))[0]
    same_seq_prev = np.r_[False, seq[1:] == seq[:-1]]
    prev_type = np.r_[[""], etype[:-1]]
    inside = prefix != "O"
    cont = (prefix == "I-") & same_seq_prev & (prev_type == etype) & np.r_[False, inside[:-1]]
    start = inside & ~cont
    starts = np.flatnonzero(start)
    # an entity ends before the next token that is not its continuation
    ends_mask = inside & ~np.r_[cont[1:], False]
    ends = np.flatnonzero(ends_mask) + 1
    return pd.DataFrame({"start": starts, "end": ends, "type": etype[starts]})


def entity_scores(labels: pd.Series, truth: pd.Series, sequences: pd.Series, positions: pd.Series) -> dict[str, float]:
    """Entity-level precision, recall and F1 for BIO tags (exact span and type match, conlleval style).

    ``sequences``/``positions`` map task → sequence id / position; tokens are ordered by them.
    """
    pred, gold, index = _aligned(labels, truth)
    frame = pd.DataFrame(
        {
            "seq": pd.Series(sequences).reindex(index).to_numpy(),
            "pos": pd.Series(positions).reindex(index).to_numpy(),
            "gold": gold,
            "pred": pred,
        }
    ).sort_values(["seq", "pos"], kind="stable")
    g = bio_spans(frame["gold"].to_numpy(), frame["seq"].to_numpy())
    p = bio_spans(frame["pred"].to_numpy(), frame["seq"].to_numpy())
    matched = len(g.merge(p, on=["start", "end", "type"]))
    precision = matched / len(p) if len(p) else 0.0
    recall = matched / len(g) if len(g) else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0
    return {"precision": precision, "recall": recall, "f1": f1, "n_gold": len(g), "n_pred": len(p)}
