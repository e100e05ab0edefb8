"""The result of :func:`~fusion_core.diagnostics.cartels.detect_cartels`: :class:`CartelReport`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import pandas as pd

CartelStatus = Literal["groups_found", "no_evidence", "could_not_run"]
CartelState = Literal["groups_found", "correlated_no_group", "no_evidence", "could_not_run"]
""":attr:`CartelReport.state`: the status with "no evidence" split into "correlation found but no separable group"
(the first extra component is significant, yet no group could be split off)."""


@dataclass(frozen=True, eq=False)
class CartelReport:
    """What the cartel detector found (spec ``spectral.md`` §6.6).

    Attributes
    ----------
    status : {"groups_found", "no_evidence", "could_not_run"}
        ``groups_found``: at least one group of annotators shares errors beyond the one-truth model;
        ``no_evidence``: the test ran and found no separable group; ``could_not_run``: too few annotators share
        enough items for the test (then every array below is empty).
    reason : str
        The status in plain words ("only 0 annotators share ≥ 10 items with ≥ 3 others", "no extra covariance
        component (p = 0.41 ≥ α = 0.05) …").
    workers : pd.Index
        The annotators analysed (the spectral core: those with enough overlap), in the order of the arrays below.
    eigenvalues : np.ndarray
        Spectrum of the annotators' completed covariance, descending (n_components).
    null_eigenvalues : np.ndarray
        The same spectrum for each bootstrap replicate of independent annotators (n_bootstrap × n_components).
    p_value : np.ndarray
        Bootstrap p-value of each extra component (index 0 is the 2nd eigenvalue: the evidence for a cartel).
    loadings : pd.DataFrame
        Index annotator, columns "v1", "v2", …: each annotator's loading on the leading eigenvectors (scaled by the
        square root of their eigenvalues); v1 is agreement with the crowd.
    groups : list of set
        The detected cartels (sets of annotator ids), largest first; [] when none.
    membership : pd.Series
        Annotator → "honest" (the main group; nothing identifies which group is honest, P14) or "cartel 1", ….
    scores : pd.Series
        Annotator → cartel score in [0, 1]: share of its regression evidence that points to a cartel.
    labels, labels_without_cartel : pd.Series
        Labels (by task) of ``method`` on the full crowd, and recomputed without the cartel members.
    alpha : float
        Test level of each component.
    n_bootstrap : int
        Bootstrap replicates of the first test.
    warnings : list of str
        Caveats met on the way (plain sentences).
    statistic, null_statistic : np.ndarray
        Observed top eigenvalues of the standardised residual of the rank-one fit (the test statistic s), and its
        bootstrap replicates (n_bootstrap × components).
    undetermined : pd.Index
        Near-random annotators (no usable signal); they count with the main group.
    rho : pd.Series
        Annotator → signal strength √(L1² + L2²) of the rank-two fit.
    method : str
        Registered method that gave ``labels``.
    positive_label : object
        The label coded +1 (the cartel agrees on when to give it).
    """

    status: CartelStatus
    reason: str
    workers: pd.Index
    eigenvalues: np.ndarray
    null_eigenvalues: np.ndarray
    p_value: np.ndarray
    loadings: pd.DataFrame
    groups: list[set[Any]]
    membership: pd.Series
    scores: pd.Series
    labels: pd.Series
    labels_without_cartel: pd.Series
    alpha: float
    n_bootstrap: int
    warnings: list[str]
    statistic: np.ndarray = field(default_factory=lambda: np.array([]))
    null_statistic: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    undetermined: pd.Index = field(default_factory=lambda: pd.Index([], name="worker"))
    rho: pd.Series = field(default_factory=lambda: pd.Series(dtype=float, name="rho"))
    method: str = "sml"
    positive_label: Any = None

    @property
    def state(self) -> CartelState:
        """The status with "no evidence" split: ``correlated_no_group`` when the first extra component is
        significant (p < α) but no group of annotators could be split off."""
        if self.status == "could_not_run":
            return "could_not_run"
        if self.groups:
            return "groups_found"
        return "correlated_no_group" if self.first_p_value < self.alpha else "no_evidence"

    @property
    def first_p_value(self) -> float:
        """Bootstrap p-value of the first extra component (NaN when the test did not run)."""
        p = np.atleast_1d(np.asarray(self.p_value, dtype=float))
        return float(p[0]) if p.size else float("nan")

    @property
    def threshold(self) -> float:
        """The (1 − α) quantile of the statistic under the bootstrap null (NaN when the test did not run)."""
        null = np.asarray(self.null_statistic, dtype=float)
        if null.ndim != 2 or not null.shape[0] or not null.shape[1]:
            return float("nan")
        return float(np.quantile(null[:, 0], 1 - self.alpha))

    @property
    def significant(self) -> bool:
        """True when at least one cartel was detected."""
        return bool(self.groups)
