"""More than two classes: the one-vs-all reduction (Jaffe et al. 2015 §5; spec ``spectral.md`` §3.12).

Per class k the binary pipeline runs on f = +1 iff the label is k.  It gives the class priors (from the per-class
b̂) and the confusion diagonals ψ̂_kk; the off-diagonals are spread evenly (never estimated, J15 Theorem 2).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from fusion_core.data.responses import Responses
from fusion_core.errors import AggregationWarning
from fusion_core.methods.base import initial_posterior
from fusion_core.methods.dawid_skene import e_step, m_step
from fusion_core.methods.params import show
from fusion_core.methods.spectral.binary import EPS, BinaryMatrix
from fusion_core.methods.spectral.decisions import EM_SMOOTHING
from fusion_core.methods.spectral.pipeline import BinaryFit, fit_binary


@dataclass(frozen=True)
class OneVsAll:
    """The per-class binary fits and what the reduction derives from them (annotators × classes unless noted)."""

    fits: list[BinaryFit]
    prior: np.ndarray  # class prior, renormalised (K)
    prior_raw: np.ndarray  # (1 + b̂_k)/2 before renormalising (K)
    prior_sum: float  # Σ_k of prior_raw (≈ 1 when the per-class models fit)
    in_core: np.ndarray  # bool: annotator in class k's spectral core
    confusion: np.ndarray  # workers × true × reported: diagonal ψ̂_kk, off-diagonals spread evenly
    specificity: np.ndarray  # η̂_k: P(not k | truly not k), clipped to [ε, 1−ε]
    scores: np.ndarray  # items × K SML scores
    sml_posterior: np.ndarray  # one-hot argmax of the scores (majority vote without core labels)
    isml_posterior: np.ndarray
    majority_vote: np.ndarray  # soft majority vote (items × K)
    no_core: np.ndarray  # bool per item

    @property
    def eigenvector(self) -> np.ndarray:
        """annotators × classes: each class's J15-scaled eigenvector (NaN outside its core)."""
        return np.stack([_spectral(f).v for f in self.fits], axis=1)

    @property
    def eigenvalues(self) -> np.ndarray:
        """classes × components: each class's spectrum, NaN-padded to the longest."""
        rows = [np.asarray(_spectral(f).spectrum) for f in self.fits]
        out = np.full((len(rows), max(len(r) for r in rows)), np.nan)
        for i, r in enumerate(rows):  # one row per class
            out[i, : len(r)] = r
        return out

    def diagnostics(self, classes: Any) -> dict[str, Any]:
        return {
            "per_class": {str(classes[k]): f.diagnostics for k, f in enumerate(self.fits)},
            "class_prior_sum": self.prior_sum,
            "method_used": "spectral-ova",
        }


def _spectral(f: BinaryFit) -> Any:
    assert f.spectral is not None
    return f.spectral


def per_class_fits(resp: Responses, *, b_method: str, spectral: Mapping[str, Any]) -> list[BinaryFit] | None:
    """The binary pipeline for each class against the rest (warnings prefixed with the class); None as soon as one
    class has no spectral core (the caller falls back to EM)."""
    fits: list[BinaryFit] = []
    for k in range(resp.n_classes):  # loop over classes
        z = np.where(resp.label == k, 1.0, -1.0)
        B = BinaryMatrix.from_codes(resp.worker, resp.item, z, resp.n_workers, resp.n_items)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", AggregationWarning)
            bf = fit_binary(B, b_method=b_method, want_llr=False, **spectral)
        for w in caught:
            if issubclass(w.category, AggregationWarning):
                warnings.warn(f"one-vs-all class {show(resp.classes[k])}: {w.message}", w.category, stacklevel=2)
        if bf.spectral is None:
            return None
        fits.append(bf)
    return fits


def one_vs_all(resp: Responses, fits: list[BinaryFit], *, use_prior: bool) -> OneVsAll:
    """Priors, confusion, SML and i-SML posteriors from the per-class fits (§3.12 steps 4–7)."""
    K = resp.n_classes
    p_raw = (1 + np.array([f.b for f in fits])) / 2
    total = float(p_raw.sum())
    if abs(total - 1) > 0.05:
        warnings.warn(
            f"one-vs-all class probabilities sum to {total:.3f} before renormalising (|Σ−1| > 0.05): "
            "the per-class models fit poorly.",
            AggregationWarning,
            stacklevel=3,
        )
    prior = p_raw / total
    in_core = np.stack([_spectral(f).core.mask for f in fits], axis=1)
    diag = np.stack([np.clip(np.asarray(f.psi_raw, dtype=float), EPS, 1 - EPS) for f in fits], axis=1)
    spec_k = np.stack([np.clip(np.asarray(f.eta_raw, dtype=float), EPS, 1 - EPS) for f in fits], axis=1)
    mv = initial_posterior(resp, "mv")
    # confusion (§3.12 step 6): diagonal ψ̂_kk, off-diagonal (1 − ψ̂_kk)/(K−1) in each true-class row
    conf = np.repeat(((1 - np.nan_to_num(diag, nan=0.5)) / (K - 1))[:, :, None], K, axis=2)
    conf[:, np.arange(K), np.arange(K)] = np.nan_to_num(diag, nan=0.5)
    scores = np.stack([np.asarray(f.score) for f in fits], axis=1)
    no_core = np.stack([np.asarray(f.n_core_labels) for f in fits], axis=1).sum(axis=1) == 0
    sml_lab = np.argmax(scores, axis=1)
    sml_lab[no_core] = np.argmax(mv[no_core], axis=1)
    sml_post = np.eye(K)[sml_lab]
    covered = in_core.all(axis=1)
    if not covered.all():  # annotators outside some class's core: confusion from one M-step
        fill = m_step(resp, sml_post, EM_SMOOTHING, True)[0]
        conf[~covered] = fill[~covered]
    isml_post, _ = e_step(resp, conf, prior if use_prior else np.full(K, 1.0 / K))
    isml_post[no_core] = mv[no_core]
    return OneVsAll(
        fits=fits,
        prior=prior,
        prior_raw=p_raw,
        prior_sum=total,
        in_core=in_core,
        confusion=conf,
        specificity=spec_k,
        scores=scores,
        sml_posterior=sml_post,
        isml_posterior=isml_post,
        majority_vote=mv,
        no_core=no_core,
    )


def ova_specificity(conf: np.ndarray, prior: np.ndarray) -> np.ndarray:
    """P(f ≠ k | Y ≠ k) from full confusion matrices and the prior (workers × K)."""
    K = conf.shape[1]
    out = np.empty(conf.shape[:2])
    for k in range(K):  # loop over classes
        others = [c for c in range(K) if c != k]
        w = np.asarray(prior)[others] / max(np.sum(np.asarray(prior)[others]), 1e-300)
        out[:, k] = 1 - np.einsum("c,wc->w", w, conf[:, others, k])
    return out
