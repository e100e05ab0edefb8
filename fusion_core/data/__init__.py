"""Data layer: reading user files and the integer-coded response model."""

from fusion_core.data.answers import Answers, read_answers
from fusion_core.data.loading import load_responses, read_context, read_gold, read_table
from fusion_core.data.multilabel import MultiLabelResponses, parse_multilabel
from fusion_core.data.responses import Responses, as_responses
from fusion_core.data.validation import ValidationReport

__all__ = [
    "Answers",
    "MultiLabelResponses",
    "Responses",
    "ValidationReport",
    "as_responses",
    "load_responses",
    "parse_multilabel",
    "read_answers",
    "read_context",
    "read_gold",
    "read_table",
]
