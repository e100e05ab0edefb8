"""Cartels page: eigenvalue spectrum against independent annotators, annotator loadings coloured by group,
the groups with their test result, and what changes in the labels without the cartel."""

import numpy as np
import pandas as pd
import streamlit as st

from fusion_app.cache import cached_cartels, cartels_for
from fusion_app.shell import choose_one, download_buttons, md_escape, no_data_notice, page_setup
from fusion_app.state import session
from fusion_core.errors import UserInputError
from fusion_core.plots import loadings_scatter, scree_plot

ds = page_setup("Cartels")
st.title("Cartels")
st.caption(
    "Colluding annotators (a cartel) agree with each other more than their accuracy explains. The detector "
    "compares the spectrum of the annotators' agreement matrix with what independent annotators would give."
)
if ds is None:
    no_data_notice()
    st.stop()
ss = session()  # remember the settings across page switches (widget state is dropped when leaving a page)
target = None
if ds.responses.n_classes != 2:
    classes = list(ds.responses.classes)
    st.info(
        f"Cartel detection works on binary labels; this data has {ds.responses.n_classes} labels, so it tests one "
        "label against all the others: a cartel is a group that agrees on when to give (or withhold) that label."
    )
    prev = ss.get("fc_cartel_target")
    target = st.selectbox(
        "Label tested against the rest",
        classes,
        index=classes.index(prev) if prev in classes else 0,
        format_func=str,
        key="cartel_target",
    )
    ss["fc_cartel_target"] = target

c1, c2 = st.columns(2)
n_boot = choose_one(
    c1, "Bootstrap samples for the null", [50, 100, 200, 400], ss.get("fc_cartel_nboot", 100), key="cartel_nboot"
)
alpha = choose_one(c2, "Significance level α", [0.01, 0.05, 0.1], ss.get("fc_cartel_alpha", 0.05), key="cartel_alpha")
ss["fc_cartel_nboot"], ss["fc_cartel_alpha"] = n_boot, alpha
report = cached_cartels(ds, n_boot, alpha, one_vs_rest=target)
if report is None and st.button("Detect cartels", type="primary", key="cartel_run"):
    try:
        with st.spinner("Fitting the independent model and its bootstrap null…", show_time=True):
            report = cartels_for(ds, n_boot, alpha, one_vs_rest=target)
    except UserInputError as exc:
        st.error(md_escape(str(exc)))
if report is None:
    st.caption("Press **Detect cartels** (takes a few seconds on the bootstrap null).")
    st.stop()

for w in report.warnings:
    st.warning(md_escape(w))
groups = list(report.groups)
reason = getattr(report, "reason", "")  # the test's state in words (spectral branch: status/reason)
if groups:
    st.warning(f"{len(groups)} group(s) of annotators behave as a cartel (α = {alpha}).", icon=":material/group_off:")
elif reason:
    st.info(md_escape(reason))
else:
    st.success(f"No cartel detected at α = {alpha}: the spectrum is consistent with independent annotators.")

left, right = st.columns(2)
left.plotly_chart(scree_plot(report), key="cartel_scree")
right.plotly_chart(loadings_scatter(report), key="cartel_loadings")

p_values = np.atleast_1d(np.asarray(report.p_value, dtype=float))
if p_values.size:
    st.dataframe(
        pd.DataFrame({"extra component": np.arange(2, p_values.size + 2), "bootstrap p-value": p_values}),
        key="cartel_tests",
        hide_index=True,
    )
if groups:
    st.subheader("Groups")
    rows = [
        {"group": f"cartel {i + 1}", "members": len(g), "annotators": ", ".join(sorted(map(str, g)))}
        for i, g in enumerate(groups)
    ]
    st.dataframe(rows, key="cartel_groups", hide_index=True)

if len(report.membership):
    tab = pd.DataFrame(
        {"group": report.membership.astype(str), "cartel score": report.scores.reindex(report.membership.index)}
    )
    if ds.roles is not None:
        tab["simulated role"] = ds.roles.reindex(tab.index).astype(str)
    tab.index = tab.index.astype(str)
    st.dataframe(tab.sort_values("cartel score", ascending=False), key="cartel_membership")

if len(report.labels) and len(report.labels_without_cartel):
    st.subheader("Labels without the cartel")
    a, b = report.labels, report.labels_without_cartel
    common = a.index.intersection(b.index)
    diff = common[a.loc[common].astype(str).to_numpy() != b.loc[common].astype(str).to_numpy()]
    st.metric("items whose label changes when the cartel is excluded", f"{len(diff):,} of {len(common):,}")
    if len(diff):
        changed = pd.DataFrame({"with cartel": a.loc[diff].astype(str), "without cartel": b.loc[diff].astype(str)})
        changed.index = changed.index.astype(str)
        st.dataframe(changed, key="cartel_changed")
        download_buttons(
            "Download changed items", changed.rename_axis("task"), "cartel_changed_items", key="cartel_download"
        )
