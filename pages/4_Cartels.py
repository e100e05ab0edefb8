"""Cartels page: the test's outcome in one of four states (groups found / correlation but no separable group /
no evidence, with the test's power / could not run, with what data it needs), the spectrum and loadings, the
groups with the items they swing (real labels), and every annotator's cartel status."""

import numpy as np
import pandas as pd
import streamlit as st

from fusion_app.cache import cached_cartels, cartel_finding, cartels_for, collusion_for
from fusion_app.shell import choose_one, download_buttons, md_escape, no_data_notice, page_setup, plain
from fusion_app.state import session
from fusion_core.diagnostics.cartels.collusion import DEFAULTS
from fusion_core.diagnostics.cartels.words import NEAR_IDENTICAL
from fusion_core.errors import UserInputError
from fusion_core.plots import loadings_scatter, scree_plot

ds = page_setup("Cartels")
st.title("Cartels")
st.caption(
    "The members of a dependent group (copies or collusion) agree with each other more than their estimated "
    "accuracies explain, on answers the rest of the crowd rejects. The spectral detector proposes groups; each is kept only when both "
    "hold, and each member only on its own agreement with the others (near-chance annotators are spammers, not "
    "members). Near-identical answers suggest one source (near-"
    "duplicate annotators); otherwise the group is a possible collusion. The Audit summary runs the same check with "
    "the same defaults."
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
    c1,
    "Bootstrap samples for the null",
    [50, 100, 200, 400],
    ss.get("fc_cartel_nboot", DEFAULTS.n_bootstrap),
    key="cartel_nboot",
)
alpha = choose_one(
    c2, "Significance level α", [0.01, 0.05, 0.1], ss.get("fc_cartel_alpha", DEFAULTS.alpha), key="cartel_alpha"
)
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

with st.spinner("Explaining the result (refitting without each group to find the items it swings)…"):
    finding = cartel_finding(ds, n_boot, alpha, one_vs_rest=target)
assert finding is not None
for w in report.warnings:
    st.warning(plain(w))
if finding.state == "groups_found":
    st.error(f"**{md_escape(finding.headline)}**  \n{md_escape(finding.detail)}", icon=":material/group_off:")
elif finding.state == "correlated_no_group":
    st.warning(f"**{md_escape(finding.headline)}**  \n{md_escape(finding.detail)}", icon=":material/scatter_plot:")
elif finding.state == "no_evidence":
    st.info(f"**{md_escape(finding.headline)}**  \n{md_escape(finding.detail)}", icon=":material/check:")
else:
    st.warning(f"**{md_escape(finding.headline)}**  \n{md_escape(finding.detail)}", icon=":material/block:")
    st.stop()

left, right = st.columns(2)
left.plotly_chart(scree_plot(report), key="cartel_scree")
right.plotly_chart(loadings_scatter(report), key="cartel_loadings")

check = collusion_for(ds, n_boot, alpha, one_vs_rest=target)
if check is not None and len(check.evidence):
    st.subheader("Evidence on each proposed group")
    st.caption(
        "Agreement is measured on items the rest of the crowd decides (its posterior without the group ≥ "
        f"{DEFAULTS.decided:g}); 'predicted' is what the members' estimated confusions give if they answer "
        "independently. Dependent = both excesses significant and ≥ "
        f"{DEFAULTS.min_excess:.0%} of member pairs; near-duplicate annotators when pairs agree on ≥ "
        f"{NEAR_IDENTICAL:.0%} of items. 'Group right' is how often the group's majority equals the "
        f"rest's label ({DEFAULTS.level:.0%} interval)."
    )
    evidence = check.frame()
    st.dataframe(evidence, key="cartel_evidence", hide_index=True)
    download_buttons("Download evidence", evidence, "cartel_evidence", key="cartel_evidence_download")

p_values = np.atleast_1d(np.asarray(report.p_value, dtype=float))
tests = pd.DataFrame({"extra component": np.arange(2, p_values.size + 2), "bootstrap p-value": p_values})
with st.expander("Test details (one p-value per extra component)"):
    st.dataframe(tests, key="cartel_tests", hide_index=True)
    download_buttons("Download tests", tests, "cartel_tests", key="cartel_tests_download")

if len(finding.groups):
    st.subheader("Groups")
    st.caption(
        "agreement inside: how often two members give the same label on items they share; agreement with others: "
        "how often a member agrees with a non-member. Items they swing: items whose label changes when the group "
        "is left out."
    )
    st.dataframe(finding.groups, key="cartel_groups", hide_index=True)
    download_buttons("Download groups", finding.groups, "cartel_groups", key="cartel_groups_download")
    st.subheader("Items whose label the group swings")
    if len(finding.swing):
        st.dataframe(finding.swing, key="cartel_changed")
        download_buttons("Download swung items", finding.swing, "cartel_swung_items", key="cartel_download")
    else:
        st.caption("Leaving the group out changes no item's label.")

st.subheader("Annotators")
st.caption(
    "Members of dependent groups first (by the share of their evidence that points to the cartel), then everyone else by id: "
    "“not in a cartel” says nothing about quality — see the skill note"
    + (
        " (skills from a fitted method; near chance = within 0.1 of random guessing)."
        if "skill" in finding.annotators
        else "; fit a method to see who is near chance."
    )
)
roles = ds.roles
shown = finding.annotators
if roles is not None:
    shown = shown.assign(**{"simulated role": roles.set_axis(roles.index.astype(str)).reindex(shown.index).astype(str)})
st.dataframe(shown, key="cartel_membership")
download_buttons("Download annotators", shown, "cartel_annotators", key="cartel_annotators_download")
