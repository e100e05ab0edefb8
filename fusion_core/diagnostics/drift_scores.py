"""The scores behind reliability over time (:mod:`fusion_core.diagnostics.drift`): each response's agreement with
the posterior of its item without its annotator, and the efficient score of the annotator's accuracy."""

from __future__ import annotations

import numpy as np

from fusion_core.data.responses import Responses


def _confusion(resp: Responses, q: np.ndarray, who: np.ndarray, m: int) -> np.ndarray:
    """Dawid–Skene M-step confusion (eq. 2.3) of annotators ``who`` (m codes) from the posterior, half a response per
    cell: m × true × reported."""
    k = resp.n_classes
    flat = np.zeros((m * k, k))
    for c in range(k):  # K passes over the responses, each a bincount
        flat[:, c] = np.bincount(who * k + resp.label, weights=q[resp.item, c], minlength=m * k)
    conf = flat.reshape(m, k, k).transpose(0, 2, 1) + 0.5 / k
    return conf / conf.sum(axis=2, keepdims=True)


def leave_out_scores(
    resp: Responses, posterior: np.ndarray, segment: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """``x_r``: the probability of each response's label under its item's posterior without its annotator (module
    docstring), for every response (NaN on items nobody else labelled); and the accuracy Σ_k π_k Γ_j[k, k] of every
    annotator over all its responses (the value under "no change").  ``segment`` gives each response a code (an
    annotator whose accuracy changed counts as two: before and after): the posterior is then first corrected — each
    segmented response's factor Γ_j[·, l] of the fit is replaced by its segment's — so the others are scored
    against a crowd that knows who changed, and each response leaves out its own segment's factor."""
    q = np.clip(np.asarray(posterior, dtype=float), 1e-12, 1.0)
    m = resp.n_workers
    conf = _confusion(resp, q, resp.worker, m)
    if segment is not None and (segment != resp.worker).any():
        n_seg = int(segment.max()) + 1
        seg_conf = _confusion(resp, q, segment, n_seg)
        moved = np.flatnonzero(segment != resp.worker)
        log_q = np.log(q)
        ratio = np.log(seg_conf[segment[moved], :, resp.label[moved]]) - np.log(
            conf[resp.worker[moved], :, resp.label[moved]]
        )
        np.add.at(log_q, resp.item[moved], ratio)
        log_q -= log_q.max(axis=1, keepdims=True)
        q = np.exp(log_q)
        q = np.clip(q / q.sum(axis=1, keepdims=True), 1e-12, 1.0)
        conf = _confusion(resp, q, resp.worker, m)
        seg_conf = _confusion(resp, q, segment, n_seg)
    else:
        segment, seg_conf = resp.worker, conf
    log_lo = np.log(q[resp.item]) - np.log(seg_conf[segment, :, resp.label])
    log_lo -= log_lo.max(axis=1, keepdims=True)
    lo = np.exp(log_lo)
    x = lo[np.arange(resp.n_responses), resp.label] / lo.sum(axis=1)
    x[resp.responses_per_item[resp.item] < 2] = np.nan
    prior = q.mean(axis=0)
    accuracy = np.diagonal(conf, axis1=1, axis2=2) @ (prior / prior.sum())
    return x, accuracy


def efficient_scores(x: np.ndarray, accuracy: np.ndarray, n_classes: int) -> np.ndarray:
    """The efficient score of an annotator's accuracy a at its fitted value for each response:
    ``∂/∂a log[x a + (1 − x)(1 − a)/(K − 1)]`` — the one-coin likelihood of the response given the others'
    posterior.  A response on an item the others are unsure about (x near chance) carries little information and
    scores near 0; the change test scans the standardised cumulative sum of these scores (Horváth & Hušková's
    score-based CUSUM), which is more powerful than scanning x itself."""
    a = np.clip(accuracy, 1e-3, 1 - 1e-3)
    wrong = (1.0 - x) / (n_classes - 1)
    return (x - wrong) / (x * a + wrong * (1.0 - a))


__all__ = ["efficient_scores", "leave_out_scores"]
