"""Plotly figures as pure functions: a result (``FitResult`` or fitted estimator) or report in, a
``plotly.graph_objects.Figure`` out.  No Streamlit here; the app's pages only call these."""

from fusion_core.plots.annotators import (
    confusion_heatmap,
    confusion_small_multiples,
    eigenvector_bar,
    skill_ranking,
    skill_scatter,
)
from fusion_core.plots.cartels import loadings_scatter, scree_plot
from fusion_core.plots.compare import accuracy_bar, agreement_matrix
from fusion_core.plots.context import context_confusion_curves, context_reliability
from fusion_core.plots.data import kappa_heatmap, label_distribution, overlap_heatmap, response_count_histograms
from fusion_core.plots.items import neighbourhood_view, posterior_histogram, sequence_strip

__all__ = [
    "accuracy_bar",
    "agreement_matrix",
    "confusion_heatmap",
    "confusion_small_multiples",
    "context_confusion_curves",
    "context_reliability",
    "eigenvector_bar",
    "kappa_heatmap",
    "label_distribution",
    "loadings_scatter",
    "neighbourhood_view",
    "overlap_heatmap",
    "posterior_histogram",
    "response_count_histograms",
    "scree_plot",
    "sequence_strip",
    "skill_ranking",
    "skill_scatter",
]
