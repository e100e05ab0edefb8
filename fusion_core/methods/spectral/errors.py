"""Warnings and the error of the spectral family (each names a pitfall of spec ``spectral.md``)."""

from __future__ import annotations

from fusion_core.errors import AggregationWarning, UserInputError


class SparseOverlapWarning(AggregationWarning):
    """Too few annotators share enough items for the spectral stage (§5.2); a fallback was used."""


class FewAnnotatorsWarning(AggregationWarning):
    """3–4 usable annotators: the rank-one fit has little redundancy (§3.1, P7)."""


class SignAmbiguityWarning(AggregationWarning):
    """The global ±1 sign of the eigenvector is weakly determined (§3.4, P1)."""


class DegenerateSpectrumWarning(AggregationWarning):
    """Near-zero leading eigenvalue or tensor denominator (§3.8, P5)."""


class ClassImbalanceWarning(AggregationWarning):
    """b̂ at or near the boundary ±1 (P3)."""


class SparseOverlapError(UserInputError):
    """Raised instead of the fallback when ``strict=True`` (§5.2 step 5)."""
