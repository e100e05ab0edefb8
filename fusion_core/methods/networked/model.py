"""Alg. 3 (Traganitis & Giannakis §5, eqs. (34)–(36); spec ``sequential-networked.md`` §2.4.3): EM with a Potts
prior, as an :class:`~fusion_core.methods.em.EMModel` for the shared driver.

E-step: ICM (33) with the current Γ from the current labels, then the pseudo-likelihood posteriors (34)–(35)
with the neighbours clamped at the ICM labels, ``q_n ∝ exp(L[n, ·] − U_n(·))``; the objective the driver
monitors is the log pseudo-likelihood ``Σ_n log Σ_k exp(L[n, k] − U_n(k))``.  M-step (36) = (11) with
Dirichlet ``smoothing``.  Gold items keep their label in ICM and their class in the posteriors.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from fusion_core.data.graph import ItemGraph
from fusion_core.data.responses import Responses
from fusion_core.methods.base import Gold
from fusion_core.methods.dawid_skene import expected_counts, normalize_confusion, unary_log_likelihood
from fusion_core.methods.em import EMRun, EMSettings, EStep, run_em
from fusion_core.methods.networked.icm import color_classes, icm, potts_energy
from fusion_core.methods.numerics import log_normalize
from fusion_core.methods.ties import class_priority

CLAMPED = -1e30  # log-likelihood of the classes a gold item does not have


@dataclass(frozen=True)
class MRFState:
    """Parameters of Alg. 3: ``confusion`` (workers × true × reported) and the ICM labels the next ICM starts from."""

    confusion: np.ndarray
    labels: np.ndarray


@dataclass(frozen=True)
class MRFStats:
    """E-step statistics: pseudo-posteriors, the ICM labels and the ICM sweeps they took."""

    posterior: np.ndarray
    labels: np.ndarray
    sweeps: int


@dataclass
class PottsEM:
    """Pseudo-likelihood EM with ICM (see the module docstring); ``sweeps`` records the ICM sweeps of every E-step."""

    resp: Responses
    graph: ItemGraph
    delta: np.ndarray
    smoothing: float = 0.01
    mode: str = "gauss_seidel"
    t_max: int = 50
    gold: Gold | None = None
    sweeps: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.colors = color_classes(self.graph) if self.mode == "gauss_seidel" else None
        self.rank = class_priority(self.resp)
        self.fixed = None
        if self.gold is not None and len(self.gold[0]):
            self.fixed = np.zeros(self.resp.n_items, dtype=bool)
            self.fixed[self.gold[0]] = True

    def unary(self, confusion: np.ndarray) -> np.ndarray:
        """``L[n, k]`` with gold items keeping only their known class."""
        u = unary_log_likelihood(self.resp, confusion)
        if self.gold is not None and len(self.gold[0]):
            keep = u[self.gold[0], self.gold[1]]
            u[self.gold[0]] = CLAMPED
            u[self.gold[0], self.gold[1]] = keep
        return u

    def start_labels(self, labels: np.ndarray) -> np.ndarray:
        """Initial labels with gold items set to their class."""
        y = np.array(labels, dtype=np.int64)
        if self.gold is not None and len(self.gold[0]):
            y[self.gold[0]] = self.gold[1]
        return y

    def e_step(self, state: MRFState, temperature: float = 1.0) -> EStep:
        """ICM, then the pseudo-likelihood posteriors (34)–(35); objective: the log pseudo-likelihood."""
        if temperature != 1.0:
            raise NotImplementedError("the Potts EM is not annealed")
        unary = self.unary(state.confusion)
        y, n_sweeps, _ = icm(
            unary,
            self.graph,
            state.labels,
            self.delta,
            mode=self.mode,
            t_max=self.t_max,
            colors=self.colors,
            fixed=self.fixed,
            rank=self.rank,
        )
        self.sweeps.append(n_sweeps)
        post, lognorm = log_normalize(unary - potts_energy(y, self.graph, self.delta, self.resp.n_classes))
        return EStep(posterior=post, log_likelihood=float(lognorm.sum()), stats=MRFStats(post, y, n_sweeps))

    def m_step(self, stats: MRFStats) -> MRFState:
        """(36) = (11): confusion matrices from the pseudo-posteriors; the ICM labels carry over."""
        return MRFState(normalize_confusion(expected_counts(self.resp, stats.posterior), self.smoothing), stats.labels)


def network_em(
    resp: Responses,
    graph: ItemGraph,
    confusion0: np.ndarray,
    labels0: np.ndarray,
    delta: np.ndarray,
    *,
    smoothing: float = 0.01,
    mode: str = "gauss_seidel",
    t_max: int = 50,
    max_iter: int = 50,
    tol: float = 1e-6,
    gold: Gold | None = None,
    name: str = "Potts EM",
    warn: bool = True,
) -> tuple[EMRun[MRFState], PottsEM]:
    """Alg. 3 from ``confusion0`` (workers × true × reported) and ``labels0`` through the shared EM driver.

    The first E-step (ICM + pseudo-posteriors under ``confusion0``) is taken here and the driver starts from its
    M-step, so ``max_iter`` counts M-steps, as Alg. 3's outer iterations; the run's final E-step is the final
    ICM pass with the final Γ.  The driver stops when the relative change of the log pseudo-likelihood is at most
    ``tol``.  Returns the run (``run.estep.stats.labels``: the final ICM labels) and the model (ICM sweeps)."""
    model = PottsEM(resp, graph, delta, smoothing, mode, t_max, gold)
    first = model.e_step(MRFState(confusion0, model.start_labels(labels0)))
    run = run_em(model, model.m_step(first.stats), EMSettings(tol=tol, max_iter=max_iter, name=name, warn=warn))
    return run, model
