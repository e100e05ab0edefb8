"""The report's span-agreement section (NER-style exports): per-annotator span precision, recall and F1 against
the aggregated spans, and Krippendorff's α over tokens (:mod:`fusion_core.diagnostics.span_agreement`)."""

from __future__ import annotations

import html

from fusion_core.diagnostics.span_agreement import SpanAgreement


def span_section(agreement: SpanAgreement | None) -> list[str]:
    """HTML parts of the section (none without spans); every id is escaped by pandas (``escape=True``)."""
    if agreement is None:
        return []
    body = agreement.frame().to_html(escape=True, na_rep="", float_format=lambda x: f"{x:.3f}", border=0)
    return [
        "<h2>Span agreement</h2>",
        f"<p>Each annotator's spans against {html.escape(agreement.reference)} ({agreement.n_reference:,} spans): "
        "<i>exact</i> = same start, end and label; <i>overlap</i> = same label and at least one shared character. "
        f"Chance-corrected agreement over tokens (Krippendorff's α, nominal): {agreement.token_alpha:.3f}.</p>",
        f'<div class="scroll">{body}</div>',
    ]


__all__ = ["span_section"]
