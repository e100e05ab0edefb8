"""Moment matching for i.i.d. multiclass data (Traganitis & Giannakis §3.2; spec ``sequential-networked.md`` §2.2).

* :mod:`.moments`: sample moments with missing responses (sparse pairs, per-item triples);
* :mod:`.qp`: the exact simplex QPs (``qp_simplex`` is also used by the sequential family);
* :mod:`.blocks`: the objective (17) and its block quadratics, colour classes of independent blocks;
* :mod:`.solver`: block-coordinate descent, restarts and the As2 permutation fix (Alg. A2);
* :mod:`.estimators`: ``mm`` and ``mm-ds``.

Orientation: inside this package ``gamma[m]`` is the paper's ``Γ_m[k_resp, k_true]`` (columns are pmfs); the
estimators' ``confusion_`` is the package's ``workers × true × reported`` layout (``confusion_[m] == gamma[m].T``).
"""

from fusion_core.methods.moment_matching.blocks import (
    block_quadratic,
    block_quadratics,
    colour_learners,
    colour_plans,
    objective,
    prior_quadratic,
)
from fusion_core.methods.moment_matching.estimators import (
    MM_PARAMS,
    MomentMatching,
    MomentMatchingDawidSkene,
    fit_mm,
    map_posterior,
    mm_settings,
)
from fusion_core.methods.moment_matching.moments import Moments, compute_moments, default_min_support, moment_terms
from fusion_core.methods.moment_matching.qp import (
    GAMMA_FLOOR,
    floor_columns,
    project_simplex_columns,
    qp_columns,
    qp_columns_batch,
    qp_simplex,
)
from fusion_core.methods.moment_matching.solver import (
    MMResult,
    diagonal_dominance,
    fix_permutation_as2,
    moment_matching,
    mv_init,
    pair_residuals,
    solve_moments,
)

__all__ = [
    "GAMMA_FLOOR",
    "MM_PARAMS",
    "MMResult",
    "MomentMatching",
    "MomentMatchingDawidSkene",
    "Moments",
    "block_quadratic",
    "block_quadratics",
    "colour_learners",
    "colour_plans",
    "compute_moments",
    "default_min_support",
    "diagonal_dominance",
    "fit_mm",
    "fix_permutation_as2",
    "floor_columns",
    "map_posterior",
    "mm_settings",
    "moment_matching",
    "moment_terms",
    "mv_init",
    "objective",
    "pair_residuals",
    "prior_quadratic",
    "project_simplex_columns",
    "qp_columns",
    "qp_columns_batch",
    "qp_simplex",
    "solve_moments",
]
