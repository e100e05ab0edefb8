"""fusion_core: annotator reliability and label aggregation without ground truth."""

from fusion_core._version import __version__
from fusion_core.data.responses import Responses, as_responses
from fusion_core.data.validation import ValidationReport
from fusion_core.errors import AggregationWarning, ConvergenceWarning, UserInputError

__all__ = [
    "AggregationWarning",
    "ConvergenceWarning",
    "Responses",
    "UserInputError",
    "ValidationReport",
    "__version__",
    "as_responses",
]
