"""Multi-label aggregation (``multilabel-em``): the noise model's EM steps (:mod:`.model`), the admissible family of
true label sets (:mod:`.family`), the thesis's noise models and metrics (:mod:`.noise`) and the estimator
(:mod:`.estimators`).  The data model is :mod:`fusion_core.data.multilabel`."""

from fusion_core.methods.multilabel.estimators import MultiLabelEM
from fusion_core.methods.multilabel.family import SetFamily, admissible_sets, set_family
from fusion_core.methods.multilabel.model import GRANULARITIES, MultiLabelModel, NoiseState, noise_cells
from fusion_core.methods.multilabel.noise import (
    flip_to_mixture,
    mixture_to_flip,
    multilabel_metrics,
    q_flip,
    q_mixture,
)

__all__ = [
    "GRANULARITIES",
    "MultiLabelEM",
    "MultiLabelModel",
    "NoiseState",
    "SetFamily",
    "admissible_sets",
    "flip_to_mixture",
    "mixture_to_flip",
    "multilabel_metrics",
    "noise_cells",
    "q_flip",
    "q_mixture",
    "set_family",
]
