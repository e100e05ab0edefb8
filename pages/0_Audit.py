"""Audit summary: one click runs the recommended method, agreement and the cartel check, then answers the manager's
questions in plain words, each with its chart; every annotator's verdict in a searchable table; the HTML report."""

import json

import streamlit as st

from fusion_app.audit import Throttle, audit_now, cached_audit, duration, figures_for, progress_text
from fusion_app.pairwise_view import show_pairwise_audit
from fusion_app.shell import csv_bytes, download_buttons, md_escape, no_data_notice, page_setup, show_error
from fusion_app.state import session
from fusion_core.diagnostics.audit import (
    AUDIT_LABEL_TYPES,
    VERDICTS,
    AuditProgress,
    accuracy_tile,
    audit_ratings,
    audit_summary,
    findings,
    flagged_tile,
    needs_care,
    suggested_label_type,
)
from fusion_core.diagnostics.audit_options import AUDIT_OPTIONS
from fusion_core.diagnostics.cartels.words import QUESTION as DEPENDENCE_QUESTION
from fusion_core.diagnostics.span_agreement import span_agreement_for
from fusion_core.errors import UserInputError
from fusion_core.plots.drift import annotator_over_time
from fusion_core.report import report_html
from fusion_core.report.tool_files import label_studio_predictions, predictions_json, resend_table, verdicts_table

MAX_SHOWN_ITEMS = 1000

ds = page_setup("Audit summary")
st.title("Audit summary")
if ds is None:
    no_data_notice()
    st.stop()
st.markdown(
    "One click estimates how reliable each annotator is, who is guessing, sabotaging or copying others, how good the "
    "final labels are and which items need another look — without ground truth."
)
audit = cached_audit(ds)
types = list(AUDIT_OPTIONS["label_type"].choices)  # the audit's declared options (diagnostics.audit_options)
label_type = st.radio(
    "What are the labels?",
    types,
    index=types.index(audit.label_type) if audit is not None else 0,
    format_func=AUDIT_LABEL_TYPES.get,
    horizontal=True,
    key="audit_label_type",
    help="Ordered levels and numbers also get rating verdicts: lenient, harsh or noisy, from each annotator's bias "
    "and noise with bootstrap intervals (docs/RATINGS.md).",
)
classes = list(ds.responses.classes)
levels: list[object] | str | None = None
if label_type == "nominal" and suggested_label_type(ds.responses) == "ordinal":
    st.info(
        "Every label is a number. If they are ordered levels (e.g. 1–5 scores), choose **Ordered levels** to also "
        "see who rates too leniently, too harshly or too noisily.",
        icon=":material/lightbulb:",
    )
if label_type == "ordinal":
    if suggested_label_type(ds.responses) == "ordinal":
        levels = "numeric"
        st.caption("Levels in numeric order: " + " < ".join(md_escape(c) for c in sorted(classes, key=float)))
    else:
        levels = st.multiselect(
            "Level order, lowest first (pick every label, in order)",
            classes,
            default=classes,
            format_func=str,
            key="audit_levels",
        )
left, right = st.columns([1, 2])
run = left.button(
    "Run audit" if audit is None else "Run the audit again",
    type="primary" if audit is None else "secondary",
    key="audit_run",
    icon=":material/fact_check:",
)
with right.expander("Choose methods (experts)"):
    st.markdown(
        "The audit uses the recommended method (**auto**): it compares majority vote, Dawid–Skene, its one-coin "
        "variant and MACE on held-out responses and keeps the best (averaging those it cannot tell apart). To fit "
        "and compare other methods, use the Fit page."
    )
    st.page_link("pages/2_Fit.py", label="Go to Fit", icon=":material/play_arrow:")

if run:
    bar = st.progress(0.0, text="Starting the audit…")

    def _show(p: AuditProgress) -> None:
        bar.progress(p.fraction, text=md_escape(progress_text(p)))

    try:
        audit = audit_now(ds, Throttle(_show))
        if label_type != "nominal":
            bar.progress(0.97, text="Rating verdicts: bias and noise with bootstrap refits…")
            audit = audit_ratings(audit, ds, label_type, levels=levels)
            ss = session()
            ss["fc_audit"] = (ss["fc_audit"][0], audit)  # the rated audit is the session's audit
    except UserInputError as exc:
        show_error(exc)
        st.stop()
    st.rerun()  # render the results (and the button's new label) from the session's audit

if audit is None:
    st.info("Press **Run audit** to audit the current data.")
    st.stop()

st.caption(
    md_escape(f"Audit of {audit.dataset}: {audit.n_responses:,} responses, {audit.n_items:,} items, ")
    + md_escape(f"{audit.n_workers:,} annotators; took {duration(audit.seconds)}. Labels from {audit.method}.")
)
if audit.warnings:
    with st.expander(f"Notes from the audit ({len(audit.warnings)})"):
        for note in audit.warnings:
            st.caption(md_escape(note))
categorical = audit.ratings is None or st.toggle(
    "Also show the categorical verdicts (the levels read as unrelated categories)", key="audit_categorical"
)
m = st.columns(4)
m[0].metric(*flagged_tile(audit))
m[1].metric(*accuracy_tile(audit))
m[2].metric("items to look at again", f"{int(audit.review.flagged.sum()):,}")
alpha = audit.agreement_of("krippendorff_alpha")
m[3].metric("Krippendorff's α", "n/a" if alpha is None else f"{alpha.value:.2f}")

figs = figures_for(audit)
for f in findings(audit, categorical=categorical):
    st.subheader(f.question)
    text_col, chart_col = st.columns([2, 3])
    answer = md_escape(f.answer)
    if f.question.startswith(("What changed", "Do the labels depend")) and needs_care(audit, f.question):
        text_col.warning(answer, icon=":material/warning:")
    elif f.question == DEPENDENCE_QUESTION:
        status = audit.cartel.status
        if status == "groups_found":
            text_col.warning(answer, icon=":material/group_work:")
            text_col.dataframe(audit.cartel.frame(), key="audit_cartel_groups")
            text_col.download_button(
                "Dependent groups (CSV)",
                lambda: csv_bytes(audit.cartel.frame()),
                file_name="audit-cartel-groups.csv",
                mime="text/csv",
                key="audit_dl_cartel",
                on_click="ignore",  # no rerun: see fusion_app.shell.DOWNLOAD_NO_RERUN
            )
        elif status == "no_evidence":
            text_col.info(answer, icon=":material/check:")
        else:
            text_col.warning(answer, icon=":material/help:")
    else:
        text_col.markdown(answer)
    if f.chart in figs:
        chart_col.plotly_chart(figs[f.chart], key=f"audit_chart_{f.chart}")

if audit.pairwise is not None:  # pairwise judgements: the options' ranking and the judges' biases (docs/JUDGES.md)
    st.header("Pairwise judge panel")
    st.caption(
        "The findings above audit the judges' choices like any labels (task: prompt and pair, label: the preferred "
        "option); here the options are ranked and each judge's position, length and self-preference bias is tested."
    )
    show_pairwise_audit(audit.pairwise, prefix="audit_pw")

if audit.drift is not None:  # a time column: reliability over time, per annotator, with the downloads
    drift = audit.drift
    st.subheader("Reliability over time, per annotator")
    who = st.selectbox(
        "Annotator (those whose accuracy changed first)",
        list(dict.fromkeys([*drift.changes().index, *drift.workers])),
        format_func=str,
        key="audit_drift_annotator",
    )
    st.plotly_chart(annotator_over_time(drift, who), key="audit_drift_chart")
    download_buttons("Change test per annotator", drift.annotators(), "audit-drift-annotators", key="audit_dl_drift")
    download_buttons("Accuracy per annotator and window", drift.windows(), "audit-drift-windows", key="audit_dl_dw")
    download_buttons("The crowd per window", drift.crowd(), "audit-drift-crowd", key="audit_dl_dc")

if audit.ratings is not None:
    rv = audit.ratings
    st.subheader("Rating verdicts, every annotator")
    st.caption(md_escape(rv.rule.text()) + f" ({round(100 * rv.level)}% intervals, {rv.n_bootstrap} refits).")
    rated = rv.table
    if audit.annotators.roles is not None:
        rated = rated.join(audit.annotators.roles.rename("simulated role"))
    st.dataframe(rated, key="audit_rating_table")
    download_buttons("Rating verdicts", rated, "audit-rating-verdicts", key="audit_dl_ratings")
    if categorical:
        st.caption(
            "The verdicts below read the levels as unrelated categories (accuracy against the estimated label); "
            "for ratings, the rating verdicts above are the ones to act on."
        )


@st.fragment
def verdict_table() -> None:
    """Search and filter rerun only this part of the page."""
    st.subheader("Every annotator, worst first")
    st.caption(md_escape(audit.annotators.rule.describe()))
    table = audit.annotators.frame()
    c1, c2 = st.columns([2, 3])
    query = c1.text_input("Search annotators", key="audit_search", placeholder="annotator id contains…")
    chosen = c2.multiselect("Show verdicts", list(VERDICTS), key="audit_filter", placeholder="all verdicts")
    shown = table
    if query:
        shown = shown[shown.index.astype(str).str.contains(query, case=False, regex=False)]
    if chosen:
        shown = shown[shown["verdict"].isin(chosen)]
    st.caption(f"{len(shown):,} of {len(table):,} annotators")
    two = st.column_config.NumberColumn(format="%.2f")
    st.dataframe(shown, key="audit_table", column_config={c: two for c in shown.columns if shown[c].dtype.kind == "f"})
    download_buttons("Verdict table", table, "audit-annotators", key="audit_dl_annotators")


if categorical:
    verdict_table()

review = audit.review.frame()
st.subheader(f"Items that need another look ({len(review):,})")
if len(review) > MAX_SHOWN_ITEMS:
    st.caption(f"The {MAX_SHOWN_ITEMS:,} least confident are shown; the downloads have all {len(review):,}.")
st.dataframe(review.iloc[:MAX_SHOWN_ITEMS], key="audit_review")
download_buttons("Items to look at again", review, "audit-items-to-review", key="audit_dl_review")
if audit.plan is not None:  # which labels to buy next: the plan in words, the details on the Plan page
    st.info(md_escape(audit.plan.summary()), icon=":material/shopping_cart:")
    st.page_link("pages/8_Plan.py", label="Plan which labels to buy (budget, target)", icon=":material/shopping_cart:")

changes = audit.review.changes()
st.subheader(f"Labels that differ from majority vote ({len(changes):,})")
st.dataframe(changes.iloc[:MAX_SHOWN_ITEMS], key="audit_changes")
download_buttons("Changes against majority vote", changes, "audit-changes", key="audit_dl_changes")

if audit.safety is not None:
    depends = audit.safety.frame()
    st.subheader(f"Labels that depend on the model choice ({len(depends):,})")
    st.caption(
        "Items another plausible model labels otherwise, or close votes the chosen labels changed in the direction "
        "most changes took: check a sample of these before relying on them."
    )
    st.dataframe(depends.iloc[:MAX_SHOWN_ITEMS], key="audit_depends")
    download_buttons("Labels that depend on the model", depends, "audit-model-dependent", key="audit_dl_depends")

st.subheader("Share the audit")
st.download_button(
    "Download report (HTML)",
    lambda: report_html(
        audit, spans=span_agreement_for(ds.spans, audit.fit, audit.fit.method) if ds.spans else None
    ).encode("utf-8"),
    file_name="audit-report.html",
    mime="text/html",
    type="primary",
    key="audit_report",
    on_click="ignore",  # no rerun: see fusion_app.shell.DOWNLOAD_NO_RERUN
    icon=":material/download:",
    help="One file with the summary, every chart and the tables; opens in any browser without a network.",
)
st.download_button(
    "Download summary (JSON)",
    lambda: json.dumps(audit_summary(audit), indent=2).encode("utf-8"),
    file_name="summary.json",
    mime="application/json",
    key="audit_summary_json",
    on_click="ignore",  # no rerun: see fusion_app.shell.DOWNLOAD_NO_RERUN
    icon=":material/download:",
    help="The audit's figures as JSON: the same summary.json that `fusion-core report` writes.",
)
if ds.export_format is not None:  # an upload from a labelling tool: results back with its ids
    st.subheader("Back to your labelling tool")
    download_buttons(
        f"Verdicts with the {ds.export_format} worker ids",
        verdicts_table(audit, ds.export_format),
        "audit-verdicts-for-platform",
        key="audit_dl_platform",
    )
    if audit.plan is not None and len(audit.plan.tasks):
        download_buttons(
            f"Items to send again with the {ds.export_format} ids",
            resend_table(audit.plan.frame(), ds.export_format),
            "audit-resend-for-platform",
            key="audit_dl_resend",
        )
    if ds.export_control is not None:
        control = ds.export_control
        st.download_button(
            "Label Studio predictions (JSON)",
            lambda: predictions_json(
                label_studio_predictions(
                    audit.fit, control, spans=ds.spans, model_version=f"fusion_core {audit.fit.method}"
                )
            ),
            file_name="label-studio-predictions.json",
            mime="application/json",
            key="audit_ls_predictions",
            on_click="ignore",  # no rerun: see fusion_app.shell.DOWNLOAD_NO_RERUN
            help="The consensus label and its probability per task, to import as pre-annotations "
            "(Label Studio API: POST /api/predictions).",
        )
st.page_link("pages/9_Glossary.py", label="What do these terms mean? (Glossary)", icon=":material/menu_book:")
