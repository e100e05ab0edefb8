"""Spectral family (spec ``spectral.md``; Parisi et al. 2014, Jaffe et al. 2015): binary spectral maths and the
``sml`` / ``isml`` / ``sml-ds`` estimators.

* :mod:`.binary` — ±1 data (:class:`BinaryMatrix`); :mod:`.errors` — the family's warnings;
* :mod:`.moments` — pairwise-complete moments, the spectral core; :mod:`.completion` — rank-one completion and
  hard-impute; :mod:`.signs` — the eigenvector's sign; :mod:`.eigenvector` — the ranking eigenvector;
* :mod:`.imbalance` — class imbalance b (tensor, likelihood) and ψ/η; :mod:`.pipeline` — the binary pipeline;
* :mod:`.decisions` — labels, posteriors, confusion; :mod:`.one_vs_all` — more than two classes;
  :mod:`.em_stage` — EM from the spectral starts and the fallback; :mod:`.outputs` — typed results;
  :mod:`.estimators` — the registered estimators.
"""

from fusion_core.methods.spectral.binary import DELTA_B, EPS, GRID_STEP, BinaryMatrix
from fusion_core.methods.spectral.completion import (
    als_rank_one,
    loglinear_diagonal,
    pair_weights,
    principal_axis,
    top_eigenpair,
    top_eigh,
)
from fusion_core.methods.spectral.eigenvector import SpectralResult, fit_spectral
from fusion_core.methods.spectral.errors import (
    ClassImbalanceWarning,
    DegenerateSpectrumWarning,
    FewAnnotatorsWarning,
    SignAmbiguityWarning,
    SparseOverlapError,
    SparseOverlapWarning,
)
from fusion_core.methods.spectral.estimators import InformedSML, SpectralDawidSkene, SpectralMetaLearner
from fusion_core.methods.spectral.imbalance import (
    PatternDesign,
    estimate_b_likelihood,
    estimate_b_tensor,
    pattern_design,
    psi_eta_from_v,
    restricted_log_likelihood,
)
from fusion_core.methods.spectral.moments import Core, Moments, pairwise_moments, spectral_core
from fusion_core.methods.spectral.outputs import METHOD_FALLBACK, METHOD_ONE_VS_ALL, METHOD_SPECTRAL
from fusion_core.methods.spectral.pipeline import BinaryFit, fit_binary, isml_llr, sml_scores
from fusion_core.methods.spectral.signs import resolve_sign

__all__ = [
    "DELTA_B",
    "EPS",
    "GRID_STEP",
    "METHOD_FALLBACK",
    "METHOD_ONE_VS_ALL",
    "METHOD_SPECTRAL",
    "BinaryFit",
    "BinaryMatrix",
    "ClassImbalanceWarning",
    "Core",
    "DegenerateSpectrumWarning",
    "FewAnnotatorsWarning",
    "InformedSML",
    "Moments",
    "PatternDesign",
    "SignAmbiguityWarning",
    "SparseOverlapError",
    "SparseOverlapWarning",
    "SpectralDawidSkene",
    "SpectralMetaLearner",
    "SpectralResult",
    "als_rank_one",
    "estimate_b_likelihood",
    "estimate_b_tensor",
    "fit_binary",
    "fit_spectral",
    "isml_llr",
    "loglinear_diagonal",
    "pair_weights",
    "pairwise_moments",
    "pattern_design",
    "principal_axis",
    "psi_eta_from_v",
    "resolve_sign",
    "restricted_log_likelihood",
    "sml_scores",
    "spectral_core",
    "top_eigenpair",
    "top_eigh",
]
