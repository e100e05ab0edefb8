"""Context-dependent annotator reliability (``context-em``): the model (:mod:`.model`), its EM steps for the shared
driver (:mod:`.em`, :mod:`.mstep`), one interior-point core (:mod:`.interior_point`) for the binary chain
(:mod:`.chain`) and simplex (:mod:`.simplex`) M-steps, the result (:mod:`.fitting`) and the estimator
(:mod:`.estimators`)."""

from fusion_core.methods.context.chain import discrete_mstep, lipschitz_chain_mstep
from fusion_core.methods.context.estimators import ContextEM, dp_metric, select_swing
from fusion_core.methods.context.interior_point import MStepInfo
from fusion_core.methods.context.model import context_coverage, interpolate_levels, lipschitz_interpolate
from fusion_core.methods.context.simplex import categorical_simplex_mstep, floored_simplex, lipschitz_simplex_mstep

__all__ = [
    "ContextEM",
    "MStepInfo",
    "categorical_simplex_mstep",
    "context_coverage",
    "discrete_mstep",
    "dp_metric",
    "floored_simplex",
    "interpolate_levels",
    "lipschitz_chain_mstep",
    "lipschitz_interpolate",
    "lipschitz_simplex_mstep",
    "select_swing",
]
