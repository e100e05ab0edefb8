"""Ratings page: ordinal levels, numeric ratings and judges with confidences — each annotator's verdict from
bootstrap intervals, the ordinal confusion heatmap, the bias/noise scatter, the judges' calibration chart and
agreement with intervals (:func:`fusion_core.diagnostics.rating_report.rating_report`); pairwise (A vs B) judges in
:mod:`fusion_app.pairwise_view`."""

import pandas as pd
import streamlit as st

from fusion_app.pairwise_view import PAIRWISE_LABEL, show_pairwise
from fusion_app.shell import choose_one, download_buttons, md_escape, page_setup, show_error
from fusion_app.state import session
from fusion_core.diagnostics.rating_report import LABEL_TYPES, rating_demo, rating_report
from fusion_core.errors import UserInputError
from fusion_core.methods.ordinal import is_numeric_label
from fusion_core.plots.ratings import (
    agreement_chart,
    bias_noise_scatter,
    calibration_chart,
    ordinal_confusion_heatmap,
)

ds = page_setup("Ratings")
st.title("Ratings and judges")
st.caption(
    "For labels that are not plain categories: ordered levels, numbers, or judges that state a confidence. "
    "Verdicts come from each annotator's bias and noise with bootstrap intervals (rules in docs/RATINGS.md)."
)
ss = session()
kinds = {**LABEL_TYPES, "pairwise": PAIRWISE_LABEL}
kind = st.radio("Label type", list(kinds), format_func=kinds.get, horizontal=True, key="rt_kind")
if kind == "pairwise":  # A-vs-B judgements have their own input and view (docs/JUDGES.md)
    show_pairwise()
    st.stop()
sources = ["Simulated demo", "Current data"] if ds is not None else ["Simulated demo"]
source = st.radio("Data", sources, horizontal=True, key="rt_source")

levels, reference, roles = None, None, None
if source == "Simulated demo":
    demo = rating_demo(kind)
    st.caption(md_escape(demo.description))
    data, data_key, roles = demo.responses, f"demo:{kind}", demo.roles
    levels = list(demo.levels) if demo.levels else None
    if kind == "judges" and st.checkbox("Accuracy against the simulated truth (else the consensus)", key="rt_truth"):
        reference = demo.truth
else:
    data, data_key = ds.responses, ds.fingerprint
    st.caption(md_escape(ds.name))
    classes = list(ds.responses.classes)
    if kind == "ordinal":
        if all(is_numeric_label(c) for c in classes):
            shown = " < ".join(md_escape(c) for c in sorted(classes, key=lambda c: float(str(c))))
            st.markdown(f"Detected numeric levels: {shown}")
            if not st.checkbox("These are ordered levels, in this order", key="rt_confirm"):
                st.info("Confirm the detected level order to fit the ordinal model.")
                st.stop()
            levels = "numeric"
        else:
            levels = st.multiselect(
                "Level order, lowest first (pick every label, in order)", classes, default=classes,
                format_func=str, key="rt_levels",
            )  # fmt: skip
    if kind == "judges" and ds.gold is not None and st.checkbox("Accuracy against the gold labels", key="rt_gold"):
        reference = ds.gold

n_boot = choose_one(st, "Bootstrap refits (intervals)", [20, 50, 100, 200], ss.get("fc_rt_boot", 50), key="rt_boot")
ss["fc_rt_boot"] = n_boot
cache = ss.setdefault("fc_ratings", {})
order_key = tuple(map(str, levels)) if isinstance(levels, list) else levels
key = (kind, data_key, order_key, n_boot, reference is not None)
if key not in cache:
    if not st.button("Fit and diagnose", type="primary", key="rt_run"):
        st.info("Press **Fit and diagnose** to fit the model for this label type and compute the intervals.")
        st.stop()
    try:
        with st.spinner(f"Fitting and {n_boot} bootstrap refits…", show_time=True):
            cache[key] = rating_report(data, kind, levels=levels, n_bootstrap=n_boot, reference=reference)
    except UserInputError as exc:
        show_error(exc)
        st.stop()
report = cache[key]

if report.verdicts is not None:
    v = report.verdicts
    st.subheader("Verdicts")
    st.caption(md_escape(v.rule.text()) + f" ({round(100 * v.level)}% intervals, {v.n_bootstrap} refits).")
    cols = st.columns(max(len(v.counts()), 1))
    for col, (word, n) in zip(cols, v.counts().items(), strict=False):
        col.metric(word, n)
    table = v.table if roles is None else v.table.join(roles.rename("simulated role"))
    st.dataframe(table, key="rt_verdicts")
    download_buttons("Download verdicts", table, f"verdicts_{kind}", key="rt_download")
    st.plotly_chart(bias_noise_scatter(v), key="rt_scatter")
    if kind == "ordinal":
        st.subheader("Ordinal confusion (rows = true level, columns = reported)")
        who = st.selectbox("Annotator", ["(whole crowd)", *map(str, v.table.index)], key="rt_who")
        one = None if who == "(whole crowd)" else who
        fig = ordinal_confusion_heatmap(v.fit, responses=report.responses if one is None else None, worker=one)
        st.plotly_chart(fig, key="rt_confusion")
    else:
        with st.expander("Estimated true values with intervals"):
            st.dataframe(report.fit.result_.items_frame(), key="rt_items")

if report.calibration is not None:
    cal = report.calibration
    st.subheader("Calibration of the judges")
    pooled = cal.pooled
    c = st.columns(3)
    c[0].metric("stated confidence", f"{pooled['confidence']:.3f}")
    c[1].metric("observed accuracy", f"{pooled['accuracy']:.3f}")
    c[2].metric("expected calibration error", f"{pooled['ece']:.3f}")
    judges = list(map(str, cal.summary.index))
    chosen = st.multiselect("Judges on the chart", judges, default=judges[:3], key="rt_judges")
    st.plotly_chart(calibration_chart(cal, chosen), key="rt_calibration")
    table = cal.summary
    if report.correlated is not None:
        table = table.join(report.correlated.membership.rename("shares errors with"))
        for k, group in enumerate(report.correlated.groups, start=1):
            st.warning(f"Group {k} shares errors: {', '.join(md_escape(j) for j in group)}.", icon=":material/hub:")
    if roles is not None:
        table = table.join(roles.rename("simulated role"))
    st.dataframe(table, key="rt_judge_table")
    download_buttons("Download judge calibration", table, "judges_calibration", key="rt_judge_download")

st.subheader("Agreement")
st.plotly_chart(agreement_chart(report.agreement), key="rt_agreement")
st.dataframe(pd.DataFrame([e.as_dict() for e in report.agreement]), key="rt_agreement_table")
