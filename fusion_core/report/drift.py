"""The report's *Reliability over time* section (with a time column): the changes found, a chart per changed
annotator (at most :data:`MAX_CHARTS`), the crowd per window and the test's settings.  Text is escaped as in
:mod:`fusion_core.report.html`."""

from __future__ import annotations

import html

import pandas as pd
import plotly.io as pio

from fusion_core.diagnostics.audit import AuditResult
from fusion_core.plots.drift import annotator_over_time

MAX_CHARTS = 5
"""Charts of changed annotators in the report at most (the app shows any annotator)."""


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _table(df: pd.DataFrame) -> str:
    body = df.to_html(escape=True, na_rep="", float_format=lambda x: f"{x:.3f}", border=0)
    return f'<div class="scroll">{body}</div>'


def drift_section(audit: AuditResult) -> list[str]:
    """HTML pieces of the section, or none without a time column."""
    d = audit.drift
    if d is None:
        return []
    changes = d.changes()
    parts = [
        "<h2>Reliability over time</h2>",
        f"<p>Time column {_e(d.time.name)}; {len(d.crowd_n)} {'batches' if d.batches else 'windows'}. "
        f"{d.n_tested} annotators tested for one change in accuracy, at a {d.rule.alpha:.0%} false-alarm rate for "
        f"the whole crowd (Bonferroni: p ≤ {d.threshold:.2g}); at least {d.rule.min_segment} scored responses on "
        f"each side of a change, windows shown from {d.rule.min_window} responses.</p>",
    ]
    parts += [f"<p>{_e(s)}</p>" for s in d.sentences()]
    if len(changes):
        parts.append(_table(changes))
        for w in changes.index[:MAX_CHARTS]:
            fig = annotator_over_time(d, w)
            parts.append(pio.to_html(fig, full_html=False, include_plotlyjs=False, config={"displaylogo": False}))
    parts += ["<h3>The crowd per window</h3>", _table(d.crowd())]
    return parts


__all__ = ["MAX_CHARTS", "drift_section"]
