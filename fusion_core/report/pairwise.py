"""Pairwise judgements in the one-click audit and its HTML report: ``fusion-core report pairwise.csv`` recognises
a pairwise file by its columns (option A / option B, docs/JUDGES.md), audits the judges' choices like any
categorical labels (task = prompt and pair, label = the preferred option; :func:`~fusion_core.data.dataset.
pairwise_dataset`, the same dataset the app's Data page makes) and the report has the pairwise section — ranking
with intervals, judge reliability, bias audits, corrected win rates with ``--gold`` (:func:`pairwise_section`, which
:func:`~fusion_core.report.html.report_html` adds for every audit of pairwise judgements).
"""

from __future__ import annotations

from typing import Any


def pairwise_section(audit: Any) -> list[str]:
    """The report's pairwise section (HTML pieces) for a
    :class:`~fusion_core.diagnostics.pairwise_audit.PairwiseAudit`."""
    from fusion_core.diagnostics.pairwise_audit import pairwise_findings
    from fusion_core.plots.pairwise import bias_chart, ranking_chart, win_rate_chart
    from fusion_core.report.parts import _chart, _e, _table

    d = audit.data
    parts = [
        "<h2>Pairwise judge panel</h2>",
        f"<p>{d.n:,} judgements by {d.n_judges} judges of {d.n_options} options on {d.n_prompts:,} prompts "
        f"({'order given' if d.order_given else 'no order column: option A taken as shown first'}).</p>",
    ]
    parts += [f'<div class="finding"><h3>{_e(q)}</h3><p>{_e(a)}</p></div>' for q, a in pairwise_findings(audit)]
    parts += [_chart(ranking_chart(audit.ranking), "pairwise-ranking"), _table(audit.ranking.table)]
    parts += ["<h3>Judges</h3>", _table(audit.judges), _chart(bias_chart(audit.bias), "pairwise-bias")]
    parts += [f'<p class="note">Bias rule: {_e(audit.bias.rule.text())}</p>', _table(audit.bias.table)]
    if audit.bias.skipped:
        parts.append(f'<p class="note">Not audited (columns missing): {_e(", ".join(audit.bias.skipped))}.</p>')
    if audit.win_rates is not None:
        parts += [
            "<h3>Win rates corrected with the gold subset (prediction-powered inference)</h3>",
            _chart(win_rate_chart(audit.win_rates), "pairwise-wins"),
            _table(audit.win_rates.table),
        ]
    return parts


__all__ = ["pairwise_section"]
