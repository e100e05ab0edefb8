"""The Ratings page's "Pairwise judges" view: a simulated panel or an uploaded file of A-vs-B judgements (and an
optional gold file), one library call (:func:`fusion_core.diagnostics.pairwise_audit.pairwise_audit`), and the
figures of :mod:`fusion_core.plots.pairwise` (docs/JUDGES.md)."""

from __future__ import annotations

from typing import Any

import streamlit as st

from fusion_app.shell import choose_one, download_buttons, md_escape, show_error
from fusion_app.state import session
from fusion_core.errors import UserInputError

PAIRWISE_LABEL = "Pairwise judges (A vs B)"
DEMO = (
    "5 judges compare answers of 8 systems on 400 prompts in a random order: judge1 prefers the first-shown "
    "answer (+0.15), judge2 longer answers (+0.12), judge3 its own model family (+0.12), judge5 prefers at random; "
    "a human gold label on 20 % of the comparisons."
)


def _demo() -> tuple[Any, Any]:
    from fusion_core.simulate.pairwise import pairwise_panel

    sim = pairwise_panel(400, 5, 8, reliability=[0.8, 0.7, 0.7, 0.8, 0.0], position_bias=[0.15, 0, 0, 0, 0],
                         length_bias=[0, 0.12, 0, 0, 0], self_preference=[0, 0, 0.12, 0, 0], verbosity=0.6, gold=0.2,
                         seed=0)  # fmt: skip
    return sim.responses, sim.gold


def _read(upload: Any) -> Any:
    from fusion_core.data.loading import read_table

    return read_table(upload, name=upload.name)


def pairwise_mapping(columns: list[str], prefix: str = "pw_col") -> dict[str, str] | None:
    """Which column plays which role: the conventional names are found, any other can be picked; None while a
    required role has no column (widget keys ``{prefix}_{role}``; the Data page's mapping uses it too)."""
    from fusion_core.data.pairwise import OPTIONAL, ROLES, pairwise_columns

    found = pairwise_columns(columns) or {}
    out: dict[str, str] = {}
    with st.expander("Columns", expanded=not all(r in found for r in ROLES)):
        cols = st.columns(4)
        for i, role in enumerate(ROLES + OPTIONAL):
            blank = "(choose a column)" if role in ROLES else "(none)"
            choices = [blank, *columns]
            default = found.get(role, blank)
            pick = cols[i % 4].selectbox(
                role.replace("_", " "), choices, index=choices.index(default), key=f"{prefix}_{role}"
            )
            if pick != blank:
                out[role] = pick
    missing = [r for r in ROLES if r not in out]
    if missing:
        st.info(f"Pick the column of: {', '.join(missing)}.")
        return None
    return out


def show_pairwise() -> None:
    """Render the view (called by pages/7_Ratings.py when the label type is pairwise)."""
    from fusion_core.data.pairwise import PairwiseResponses
    from fusion_core.diagnostics.pairwise_audit import pairwise_audit

    ss = session()
    source = st.radio("Data", ["Simulated demo", "Upload a pairwise file"], horizontal=True, key="pw_source")
    if source == "Simulated demo":
        st.caption(md_escape(DEMO))
        data, gold = _demo()
        key: tuple[Any, ...] = ("demo",)
    else:
        st.caption(
            "Columns: prompt, option_a, option_b, judge, preference (A / B / tie or the preferred option); optional "
            "order (shown first), confidence, length_a / length_b, family_a / family_b / judge_family."
        )
        up = st.file_uploader("Pairwise judgements", type=["csv", "tsv", "parquet", "jsonl"], key="pw_file")
        gold_up = st.file_uploader(
            "Gold preferences (optional)", type=["csv", "tsv", "parquet", "jsonl"], key="pw_gold"
        )
        if up is None:
            st.info("Upload a file of pairwise judgements, or pick the simulated demo.")
            st.stop()
        try:
            table = _read(up)
            gold = _read(gold_up) if gold_up is not None else None
        except UserInputError as exc:
            show_error(exc)
            st.stop()
        mapping = pairwise_mapping(list(table.columns))
        if mapping is None:
            st.stop()
        try:
            data = PairwiseResponses.from_frame(table, mapping)
        except UserInputError as exc:
            show_error(exc)
            st.stop()
        key = ("upload", up.name, up.size, None if gold_up is None else (gold_up.name, gold_up.size),
               tuple(sorted(mapping.items())))  # fmt: skip
    n_boot = choose_one(st, "Bootstrap refits (intervals)", [20, 50, 100, 200], ss.get("fc_pw_boot", 50), key="pw_boot")
    ss["fc_pw_boot"] = n_boot
    cache = ss.setdefault("fc_pairwise", {})
    key = (*key, n_boot)
    if key not in cache:
        if not st.button("Rank and audit the judges", type="primary", key="pw_run"):
            st.info("Press **Rank and audit the judges** to fit the panel and compute the intervals.")
            st.stop()
        try:
            with st.spinner(f"Fitting and {n_boot} bootstrap refits…", show_time=True):
                cache[key] = pairwise_audit(data, gold=gold, n_bootstrap=n_boot)
        except UserInputError as exc:
            show_error(exc)
            st.stop()
    show_pairwise_audit(cache[key])


def show_pairwise_audit(audit: Any, prefix: str = "pw") -> None:
    """The pairwise audit's findings, figures and tables (the Ratings view, and the Audit page for pairwise
    uploads with ``prefix`` for its widget keys)."""
    from fusion_core.diagnostics.pairwise_audit import pairwise_findings
    from fusion_core.plots.pairwise import bias_chart, ranking_chart, win_rate_chart

    for question, answer in pairwise_findings(audit):
        st.markdown(f"**{md_escape(question)}** {md_escape(answer)}")
    st.subheader("Ranking")
    st.plotly_chart(ranking_chart(audit.ranking), key=f"{prefix}_ranking")
    st.dataframe(audit.ranking.table, key=f"{prefix}_ranking_table")
    download_buttons("Download ranking", audit.ranking.table.reset_index(), "pairwise_ranking", key=f"{prefix}_dl_rank")
    st.subheader("Judges: reliability and biases")
    st.dataframe(audit.judges, key=f"{prefix}_judges")
    st.plotly_chart(bias_chart(audit.bias), key=f"{prefix}_bias")
    st.caption(md_escape("Rule: " + audit.bias.rule.text()))
    st.dataframe(audit.bias.table, key=f"{prefix}_bias_table")
    download_buttons("Download bias audits", audit.bias.table, "pairwise_bias", key=f"{prefix}_dl_bias")
    if audit.win_rates is not None:
        st.subheader("Win rates corrected with the gold subset")
        st.plotly_chart(win_rate_chart(audit.win_rates), key=f"{prefix}_wins")
        st.dataframe(audit.win_rates.table, key=f"{prefix}_wins_table")
        download_buttons("Download win rates", audit.win_rates.table.reset_index(), "pairwise_win_rates",
                         key=f"{prefix}_dl_wins")  # fmt: skip
