"""Ordinal labels (ordered levels): ``ordinal-em`` (one ordered-probit scale, per-annotator bias and noise,
:mod:`.em`) and ``ordinal-ds`` (Dawid–Skene confusion rows shrunk towards each annotator's ordered-probit
backbone, :mod:`.ds`); the ordered-probit channel (:mod:`.scale`) and the level order (:mod:`.levels`)."""

from fusion_core.methods.ordinal.em import (
    LENIENT_BIAS,
    NOISY_NOISE,
    VERDICT_RULE,
    OrdinalEM,
    OrdinalModel,
    OrdinalState,
    log_prior,
    ordinal_fit,
    verdicts,
)
from fusion_core.methods.ordinal.levels import is_numeric_label, numeric_order, with_levels
from fusion_core.methods.ordinal.scale import (
    NOISE_CENTER,
    m_step_objective,
    ordinal_confusion,
    probit_gradient,
    scale_points,
)

__all__ = [
    "LENIENT_BIAS",
    "NOISE_CENTER",
    "NOISY_NOISE",
    "VERDICT_RULE",
    "OrdinalEM",
    "OrdinalModel",
    "OrdinalState",
    "is_numeric_label",
    "log_prior",
    "m_step_objective",
    "numeric_order",
    "ordinal_confusion",
    "ordinal_fit",
    "probit_gradient",
    "scale_points",
    "verdicts",
    "with_levels",
]
