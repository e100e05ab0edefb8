"""fusion_core: annotator reliability and label aggregation without ground truth."""

from fusion_core.data.responses import Responses, ValidationReport, as_responses
from fusion_core.errors import AggregationWarning, UserInputError

__version__ = "0.1.0"
__all__ = ["AggregationWarning", "Responses", "UserInputError", "ValidationReport", "__version__", "as_responses"]
