"""The typed result of a pairwise fit (:class:`PairwiseFit`), the same for every pairwise model."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd


@dataclass(frozen=True)
class PairwiseFit:
    """What a pairwise model estimated.

    ``strength``: θ per option (logit scale, mean 0; a difference d means P(preferred) = σ(d) without ties);
    ``reliability``: per judge, 0 = prefers at random, 1 = follows the strengths (bt-judges: the weight r_j of the
    attentive component; ds-pairwise: P(first | first better) + P(second | second better) − 1 among decisive
    reports); ``position``: per judge, the model's P(prefers the first-shown | two equal options, decisive) − ½;
    ``tie_strength``: Davidson's ν (0 without ties); ``item_posterior``: ds-pairwise only, per comparison item
    (``item_prompt``, ``item_lo``, ``item_hi`` codes) P(lo better), P(hi better)[, P(tie)]; the convergence trace
    as in every EM fit (``log_likelihood`` per iteration, ``n_iter``, ``converged``)."""

    method: str
    options: pd.Index
    strength: np.ndarray
    judges: pd.Index
    reliability: np.ndarray
    position: np.ndarray
    tie_strength: float
    log_likelihood: tuple[float, ...]
    n_iter: int
    converged: bool
    item_prompt: np.ndarray | None = None
    item_lo: np.ndarray | None = None
    item_hi: np.ndarray | None = None
    item_posterior: np.ndarray | None = None
    warnings: tuple[str, ...] = ()

    def ranking(self) -> pd.DataFrame:
        """One row per option, strongest first: strength and rank (1 = best)."""
        order = np.argsort(-self.strength, kind="stable")
        ranks = np.empty(len(order), dtype=int)
        ranks[order] = np.arange(1, len(order) + 1)
        frame = pd.DataFrame({"strength": self.strength, "rank": ranks}, index=pd.Index(self.options, name="option"))
        return frame.iloc[order]

    def judges_frame(self) -> pd.DataFrame:
        """One row per judge: reliability and the model's position bias."""
        return pd.DataFrame(
            {"reliability": self.reliability, "position": self.position}, index=pd.Index(self.judges, name="judge")
        )

    @property
    def scores(self) -> pd.Series:
        """Strengths by option (crowd-kit's ``scores_`` orientation: higher is better)."""
        return pd.Series(self.strength, index=pd.Index(self.options, name="option"), name="strength")
