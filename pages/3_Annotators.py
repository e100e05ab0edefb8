"""Annotators page: every annotator's accuracy against their responses (chance line, interval bars), the ranking
eigenvector (``result.spectral``), the
reliability curves along a context (``result.context``), confusion heatmaps (rows = true, columns = reported),
and the downloadable annotator table (:func:`fusion_core.diagnostics.tables.annotator_table`)."""

import pandas as pd
import streamlit as st

from fusion_app.cache import active_key, bootstrap_for, cached_bootstrap, view
from fusion_app.shell import choose_one, download_buttons, md_escape, results_page, show_table
from fusion_app.state import session
from fusion_core.data import export
from fusion_core.diagnostics.span_agreement import span_agreement_for
from fusion_core.diagnostics.tables import annotator_table, confusion_table
from fusion_core.errors import UserInputError
from fusion_core.methods import info as method_info
from fusion_core.plots import (
    confusion_heatmap,
    confusion_small_multiples,
    context_confusion_curves,
    context_reliability,
    eigenvector_bar,
    skill_scatter,
)

ds, results = results_page("Annotators")

method = st.selectbox("Method", list(results), key="ann_method")
res = results[method]
info_inputs = set(method_info(method).inputs)

with st.expander("Uncertainty: bootstrap intervals (resampling items, or whole sequences)", expanded=False):
    c1, c2 = st.columns(2)
    ss = session()  # settings survive page switches
    n_boot = choose_one(c1, "Bootstrap replicates", [20, 50, 100, 200], ss.get("fc_boot_n", 50), key="ann_nboot")
    level = choose_one(c2, "Interval level", [0.8, 0.9, 0.95], ss.get("fc_boot_level", 0.9), key="ann_level")
    ss["fc_boot_n"], ss["fc_boot_level"] = n_boot, level
    if "graph" in info_inputs:
        st.caption("Resampling items would break the item graph this method conditions on; no intervals.")
    elif st.button("Compute intervals", key="ann_boot"):
        try:
            with st.spinner(f"Refitting {method} on {n_boot} bootstrap samples…", show_time=True):
                bootstrap_for(ds, method, n_boot, level)
        except UserInputError as exc:
            st.error(md_escape(str(exc)))
boot = cached_bootstrap(method, n_boot, level)
intervals = boot.skills if boot is not None else None

rank_level = boot.level if boot is not None else 0.9
akey = (active_key(method), boot is not None and (boot.n_bootstrap, boot.level))
table = view(
    "annotator_table",
    akey,
    lambda: annotator_table(res, ds.responses, intervals=intervals, roles=ds.roles, lower_bound=True, level=rank_level),
)
st.plotly_chart(
    view(
        "skill_scatter",
        akey,
        lambda: skill_scatter(
            res,
            pd.Series(table["responses"]),
            None if boot is None else table[["accuracy low", "accuracy high"]].set_axis(["low", "high"], axis=1),
        ),
    ),
    key="ann_skill",
)
chance = 1 / len(res.classes)
st.caption(
    f"**Accuracy** = the annotator's expected accuracy: the estimated chance that their label is the true one "
    "(the Audit page's *skill above chance* corrects it for guessing). "
    f"The dashed line is random guessing (1 / {len(res.classes)} labels = {chance:.2f}); red points are within "
    "0.1 of it or below. Annotators with few responses are uncertain: the table ranks by **accuracy (lower "
    f"bound)**, the lower end of a {rank_level:.0%} interval in which each accuracy is shrunk towards the crowd's "
    "(**accuracy (shrunk)**: a Beta prior worth a few responses, so 10 perfect answers do not make a perfect "
    "annotator)" + (", widened to cover the bootstrap interval." if boot is not None else ".")
)
if boot is not None:
    st.caption(
        f"{int(boot.level * 100)}% percentile intervals from {boot.n_bootstrap} "
        f"{'sequence-block' if 'sequence' in info_inputs else 'item'}-bootstrap refits "
        f"({boot.permuted} replicates needed their latent classes re-ordered, {boot.failed} failed)."
    )

if res.spectral is not None:
    with st.expander("Ranking eigenvector (spectral methods)"):
        st.plotly_chart(eigenvector_bar(res), key="ann_eigen")

if res.context is not None:
    st.subheader("Reliability along the context")
    st.caption(
        "Who to trust where: each annotator's curves against the item context (dotted where the annotator "
        "labelled nothing nearby, so the curve there is interpolation)."
    )
    c1, c2 = st.columns([3, 1])
    by_skill = list(table.sort_values("accuracy", ascending=False).index)
    chosen = c1.multiselect("Annotators", by_skill, default=by_skill[:6], key="ann_ctx_workers")
    label = None
    if res.context.detection is not None and res.context.detection.ndim == 3:
        label = c2.selectbox("Class (vs rest)", list(res.classes), format_func=str, key="ann_ctx_class")
    st.plotly_chart(context_reliability(res, chosen or None, label=label, max_workers=12), key="ann_ctx_curves")
    if res.context.confusion is not None:
        c1, c2 = st.columns(2)
        one = c1.selectbox("Annotator", by_skill, format_func=str, key="ann_ctx_one")
        true_class = c2.selectbox("True class", list(res.classes), format_func=str, key="ann_ctx_true")
        st.plotly_chart(context_confusion_curves(res, one, true_class), key="ann_ctx_confusion")

st.subheader("Confusion matrices")
if res.confusion is None:
    st.info(f"{md_escape(method)} does not estimate confusion matrices; see the accuracy ranking above.")
else:
    c1, c2, c3 = st.columns([2, 1, 1])
    search = c1.text_input("Search annotators", key="ann_search", placeholder="annotator id contains…")
    order = c2.radio("Sort by accuracy (lower bound)", ["best first", "worst first"], horizontal=True, key="ann_sort")
    panels = c3.slider("Panels", 1, 24, 8, key="ann_panels")
    shown = table if order == "best first" else table.iloc[::-1]
    if search:
        shown = shown[shown.index.str.contains(search, case=False, regex=False)]
    ids = list(res.workers.astype(str))
    workers = [res.workers[ids.index(w)] for w in shown.index[:panels]]
    if workers:
        st.plotly_chart(confusion_small_multiples(res, workers, max_panels=panels), key="ann_confusions")
        one = st.selectbox("One annotator in detail", workers, format_func=str, key="ann_one")
        st.plotly_chart(confusion_heatmap(res, one), key="ann_confusion_one")
    else:
        st.caption("No annotator matches the search.")
    st.download_button(
        "Download all confusion matrices (CSV)",
        lambda: export.csv_bytes(confusion_table(res)),
        file_name=f"confusion_{method}.csv",
        mime="text/csv",
        key="ann_confusion_download",
        help="Long form: annotator, true, reported, probability. Formula-safe for spreadsheets.",
    )

if ds.spans is not None:  # an NER-style export: span agreement against this method's spans
    spans = view("span_agreement", active_key(method), lambda: span_agreement_for(ds.spans, res, method))
    st.subheader("Span agreement")
    st.caption(
        f"Each annotator's spans against {md_escape(spans.reference)} ({spans.n_reference:,} spans): **exact** = "
        "same start, end and label; **overlap** = same label and at least one shared character. Chance-corrected "
        f"agreement over tokens (Krippendorff's α, nominal): **{spans.token_alpha:.3f}**."
    )
    show_table(spans.frame(), key="ann_spans")

st.subheader("Annotator table")
st.caption("One row per annotator, ranked by accuracy (lower bound).")
show_table(table, key="ann_table")
download_buttons("Download annotator table", table, f"annotators_{method}", key="ann_download")
