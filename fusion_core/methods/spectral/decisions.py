"""Labels, posteriors and confusion matrices from a binary spectral fit (spec ``spectral.md`` §3.6, §3.10, §5.2).

* SML labels: the sign of the score ``s_l = Σ_i Z_il v̂_i`` (P14 Eq. 15); ties go to the estimated majority
  class and items without a label from the spectral core take majority vote (§3.6, §5.4);
* i-SML posterior: ``σ(LLR [+ ln((1+b)/(1−b))])`` (J15 Eq. 8; the prior term only with ``use_prior``);
* confusion: ψ̂/η̂ on the core; annotators outside it get theirs from one Dawid–Skene M-step (§5.2 step 6).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fusion_core.data.responses import Responses
from fusion_core.methods.base import initial_posterior
from fusion_core.methods.dawid_skene import m_step
from fusion_core.methods.spectral.binary import EPS
from fusion_core.methods.spectral.pipeline import BinaryFit

EM_SMOOTHING = 0.01  # §3.11 step 2 pseudo-count (also the M-step that fills annotators outside the core)


@dataclass(frozen=True)
class BinaryDecisions:
    """The candidate posteriors of a binary spectral fit (items × 2, class-code columns) and the item flags."""

    sml_posterior: np.ndarray  # hard 0/1
    isml_posterior: np.ndarray | None  # None when b is unknown
    majority_vote: np.ndarray  # soft majority vote
    sml_labels: np.ndarray  # class codes
    tied: np.ndarray  # bool per item: SML score exactly 0
    no_core: np.ndarray  # bool per item: no label from a core annotator
    sml_mv_agreement: float  # share of items where the SML sign equals the majority-vote sign


def sigmoid_pair(x: np.ndarray) -> np.ndarray:
    """[P(−), P(+)] from log-odds x, computed stably."""
    p = np.where(x >= 0, 1 / (1 + np.exp(-np.abs(x))), np.exp(-np.abs(x)) / (1 + np.exp(-np.abs(x))))
    return np.stack([1 - p, p], axis=1)


def binary_decisions(resp: Responses, bf: BinaryFit, pos: int, *, use_prior: bool) -> BinaryDecisions:
    """SML labels and the i-SML posterior of a binary fit whose positive class has code ``pos``."""
    assert bf.score is not None and bf.n_core_labels is not None
    neg = 1 - pos
    mv = initial_posterior(resp, "mv")
    mv_sign = np.where(mv[:, pos] > mv[:, neg], 1.0, np.where(mv[:, pos] < mv[:, neg], -1.0, 0.0))
    b = bf.b
    positive_majority = (np.isfinite(b) and b > 0) or (not np.isfinite(b) and (resp.label == pos).mean() > 0.5)
    majority = 1.0 if positive_majority else -1.0
    no_core = bf.n_core_labels == 0
    s = bf.score
    sml_sign = np.sign(s)
    tied = (sml_sign == 0) & ~no_core
    sml_sign[tied] = majority
    sml_sign[no_core] = np.where(mv_sign[no_core] != 0, mv_sign[no_core], majority)
    sml_post = np.zeros((resp.n_items, 2))
    sml_post[:, pos] = sml_sign > 0
    sml_post[:, neg] = sml_sign < 0
    isml_post = None
    if bf.llr is not None:
        logit = bf.llr + (np.log((1 + b) / (1 - b)) if use_prior else 0.0)
        logit = np.where((logit == 0) & ~no_core, majority * 1e-9, logit)
        pm = sigmoid_pair(logit)
        isml_post = np.zeros((resp.n_items, 2))
        isml_post[:, pos], isml_post[:, neg] = pm[:, 1], pm[:, 0]
        isml_post[no_core] = mv[no_core]
    core_items = ~no_core
    agreement = float(np.mean(np.sign(s[core_items]) == mv_sign[core_items])) if core_items.any() else float("nan")
    return BinaryDecisions(
        sml_posterior=sml_post,
        isml_posterior=isml_post,
        majority_vote=mv,
        sml_labels=np.where(sml_sign > 0, pos, neg),
        tied=tied,
        no_core=no_core,
        sml_mv_agreement=agreement,
    )


def spectral_confusion(resp: Responses, bf: BinaryFit, posterior: np.ndarray, pos: int) -> np.ndarray:
    """Confusion matrices (workers × true × reported): ψ̂/η̂ (clipped to [ε, 1−ε]) for core annotators, one smoothed
    M-step from ``posterior`` for the others (§5.2 step 6)."""
    assert bf.spectral is not None
    neg = 1 - pos
    conf = m_step(resp, posterior, EM_SMOOTHING, True)[0].copy()
    if bf.psi_raw is not None and bf.eta_raw is not None:
        core = bf.spectral.core.mask
        psi = np.clip(bf.psi_raw, EPS, 1 - EPS)
        eta = np.clip(bf.eta_raw, EPS, 1 - EPS)
        conf[core, pos, pos], conf[core, pos, neg] = psi[core], 1 - psi[core]
        conf[core, neg, neg], conf[core, neg, pos] = eta[core], 1 - eta[core]
    return conf
