"""The audit as one self-contained HTML file.

Every piece of text that comes from the data (dataset name, annotator and item ids, labels) is escaped with
:func:`html.escape`; tables are written by pandas with ``escape=True``; chart divs are plotly's, whose text the
figure functions escape (:func:`fusion_core.plots._common.esc`).  plotly.js is inlined once in the head (plotly's
offline bundle), so the file opens without a network connection.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from plotly.offline import get_plotlyjs

from fusion_core._version import __version__
from fusion_core.diagnostics.audit import AuditResult, findings
from fusion_core.diagnostics.audit.glossary import TERMS
from fusion_core.diagnostics.span_agreement import SpanAgreement
from fusion_core.errors import UserInputError
from fusion_core.plots.audit import audit_figures
from fusion_core.plots.plan import plan_curve
from fusion_core.report.drift import drift_section
from fusion_core.report.pairwise import pairwise_section
from fusion_core.report.parts import _chart, _e, _table
from fusion_core.report.spans import span_section

MAX_ROWS = 2000
"""Rows of the item tables in the report at most (the app's CSV downloads have them all)."""

_STYLE = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;
color:#222;line-height:1.45}
h1{margin-bottom:.2em}h2{border-bottom:1px solid #ddd;padding-bottom:.2em;margin-top:2em}
.meta{color:#666;font-size:.9em}.finding{margin:1.2em 0}.finding h3{margin:.2em 0}
table{border-collapse:collapse;font-size:.85em;margin:.5em 0}th,td{border:1px solid #ddd;padding:.25em .5em;
text-align:left;vertical-align:top}th{background:#f4f4f4}.scroll{max-height:480px;overflow:auto}
.note{color:#555;font-size:.9em}
"""


def _method_section(a: AuditResult) -> str:
    classes = ", ".join(_e(c) for c in a.classes[:20]) + (" …" if len(a.classes) > 20 else "")
    parts = [
        "<h2>Data and method</h2>",
        f"<p><b>Data:</b> {_e(a.dataset)}. {a.n_responses:,} responses by {a.n_workers:,} annotators on "
        f"{a.n_items:,} items; labels: {classes}.</p>",
    ]
    if a.description:
        parts.append(f"<p>{_e(a.description)}</p>")
    parts.append(f"<p><b>Method:</b> {_e(a.method)}.</p>")
    if a.fit.selection is not None:
        parts.append("<p>Candidate methods and their held-out scores:</p>" + _table(a.fit.selection.table))
    parts.append(f"<p><b>Verdict rule:</b> {_e(a.annotators.rule.describe())}</p>")
    r = a.review.rule
    parts.append(
        f"<p><b>Items to look at again:</b> label probability below {r.min_confidence:g}, label different from "
        f"majority vote, or fewer than {r.min_responses} responses.</p>"
    )
    secs = ", ".join(f"{_e(t.stage)} {t.seconds:.1f} s" for t in a.timings)
    overlap = "; agreement ran alongside the others" if sum(t.seconds for t in a.timings) > a.seconds else ""
    parts.append(f'<p class="note">Run time: {a.seconds:.1f} s ({secs}{overlap}).</p>')
    if a.warnings:
        parts.append("<p><b>Warnings:</b></p><ul>" + "".join(f"<li>{_e(w)}</li>" for w in a.warnings) + "</ul>")
    return "\n".join(parts)


def _cartel_table(a: AuditResult) -> str:
    c = a.cartel
    return f"<p>{_e(c.reason)}</p>" + (_table(c.frame()) if c.groups else "")


def _ratings_section(a: AuditResult) -> list[str]:
    """Ordered levels or numbers (``label_type``): the rating verdicts (bias, noise and their intervals)."""
    r = a.ratings
    if r is None:
        return []
    table = r.export_frame()
    return [
        f"<h2>Raters ({len(table):,}): lenient, harsh, noisy</h2>",
        f"<p>Bias and noise in {_e(r.unit)}, with {_e(f'{r.level:.0%}')} bootstrap intervals "
        f"({r.n_bootstrap} refits).{(' ' + _e(r.basis)) if r.basis else ''}</p>",
        _table(table),
    ]


def _safety_section(a: AuditResult) -> list[str]:
    """The labels that depend on the model choice or are close votes changed one way (:mod:`...audit.safety`)."""
    if a.safety is None:
        return []
    table = a.safety.frame()
    return [
        f"<h2>Labels that depend on the model choice ({len(table):,})</h2>",
        "<p>Items another plausible model labels otherwise, or close votes the chosen labels changed in the "
        "direction most changes took.</p>",
        _table(table, max_rows=MAX_ROWS),
    ]


def _plan_section(a: AuditResult) -> list[str]:
    """Which labels to buy next (the audit's re-labelling plan): the summary in words, its chart, the items."""
    if a.plan is None:
        return []
    return [
        "<h2>Which labels to buy next</h2>",
        f"<p>{_e(a.plan.summary())} Each item is ranked by the expected gain in label accuracy from more responses "
        "under the fitted model, and sent to reliable annotators who have not labelled it yet.</p>",
        _chart(plan_curve(a.plan), "plan"),
        _table(a.plan.frame().set_index("task"), max_rows=MAX_ROWS),
    ]


def report_html(
    audit: AuditResult, *, title: str | None = None, extra: Sequence[str] = (), spans: SpanAgreement | None = None
) -> str:
    """The audit report as one HTML document (module docstring); ``extra``: HTML pieces of a further section
    placed after the summary, where an audit of pairwise judgements has its section
    (:mod:`fusion_core.report.pairwise`)."""
    figs = audit_figures(audit)
    shown: set[str] = set()
    body = []
    for f in findings(audit):
        chart = ""
        if f.chart in figs and f.chart not in shown:
            chart = _chart(figs[f.chart], f.chart)
            shown.add(f.chart)
        body.append(f'<div class="finding"><h3>{_e(f.question)}</h3><p>{_e(f.answer)}</p>{chart}</div>')
    body += [_chart(fig, key) for key, fig in figs.items() if key not in shown]
    verdicts = audit.annotators.frame()
    review = audit.review.frame()
    changes = audit.review.changes()
    heading = title or f"Annotation audit: {audit.dataset}"
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en"><head><meta charset="utf-8">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            f"<title>{_e(heading)}</title><style>{_STYLE}</style>",
            f'<script type="text/javascript">{get_plotlyjs()}</script>',
            "</head><body>",
            f"<h1>{_e(heading)}</h1>",
            f'<p class="meta">Written {stamp} by fusion_core {_e(__version__)}. No ground truth is needed: every '
            "figure is estimated from the annotators' responses.</p>",
            "<h2>Summary</h2>",
            *body,
            *extra,
            *(pairwise_section(audit.pairwise) if audit.pairwise is not None else ()),
            _method_section(audit),
            *_ratings_section(audit),
            *_plan_section(audit),
            *span_section(spans),
            *drift_section(audit),
            f"<h2>Annotators ({len(verdicts):,}, worst first)</h2>",
            _table(verdicts),
            "<h2>Dependent groups (copies or collusion)</h2>",
            _cartel_table(audit),
            f"<h2>Items that need another look ({len(review):,})</h2>",
            _table(review, max_rows=MAX_ROWS),
            f"<h2>Labels that differ from majority vote ({len(changes):,})</h2>",
            _table(changes, max_rows=MAX_ROWS),
            *_safety_section(audit),
            "<h2>Glossary</h2><dl>",
            *(f"<dt><b>{_e(term)}</b></dt><dd>{_e(text)}</dd>" for term, text in TERMS.items()),
            "</dl>",
            "</body></html>",
        ]
    )


def write_report(
    audit: AuditResult, path: str | os.PathLike, *, title: str | None = None, spans: SpanAgreement | None = None
) -> Path:
    """Write :func:`report_html` to ``path`` (UTF-8); a path that cannot be written is a :class:`UserInputError`."""
    out = Path(path)
    try:
        out.write_text(report_html(audit, title=title, spans=spans), encoding="utf-8")
    except OSError as exc:
        raise UserInputError(f"cannot write the report to {out}: {exc.strerror or 'not allowed'}.") from None
    return out


__all__ = ["MAX_ROWS", "report_html", "write_report"]
