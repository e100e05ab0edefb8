"""The HTML pieces every report section writes with: escaped text, tables and plotly chart divs (below
:mod:`~fusion_core.report.html` and the sections it includes, so they import no report module)."""

from __future__ import annotations

import html

import pandas as pd
import plotly.io as pio


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _table(df: pd.DataFrame, *, max_rows: int | None = None, digits: int = 3) -> str:
    shown = df if max_rows is None else df.iloc[:max_rows]
    body = shown.to_html(escape=True, na_rep="", float_format=lambda x: f"{x:.{digits}f}", border=0)
    more = f'<p class="note">First {max_rows:,} of {len(df):,} rows.</p>' if max_rows and len(df) > max_rows else ""
    return f'<div class="scroll">{body}</div>{more}'


def _chart(fig: object, key: str) -> str:
    return pio.to_html(
        fig,
        full_html=False,
        include_plotlyjs=False,
        div_id=f"chart-{key}",
        config={"displaylogo": False, "responsive": True},
    )
