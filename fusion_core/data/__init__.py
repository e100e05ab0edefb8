"""Data layer: reading user files and the integer-coded response model."""

from fusion_core.data.loading import load_responses, read_context, read_gold, read_table
from fusion_core.data.responses import Responses, ValidationReport, as_responses

__all__ = ["Responses", "ValidationReport", "as_responses", "load_responses", "read_context", "read_gold", "read_table"]
