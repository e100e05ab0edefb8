"""Compare page: label agreement between methods, items that change, annotator rankings (Spearman ρ),
accuracy against gold labels when given."""

import streamlit as st

from fusion_app.cache import active_key, view
from fusion_app.shell import download_buttons, results_page, show_table
from fusion_core.diagnostics.compare import changed_items, compare_methods
from fusion_core.plots import accuracy_bar, agreement_matrix

ds, results = results_page("Compare", "Compare methods")

ckey = (tuple(sorted((m, active_key(m)) for m in results)), ds.gold_fingerprint)
cmp = view("compare", ckey, lambda: compare_methods(results, gold=ds.gold))
show_table(cmp.summary, key="cmp_summary")
download_buttons("Download summary", cmp.summary, "compare_summary", key="cmp_summary_download")
if len(results) < 2:
    st.info("Fit at least two methods on the Fit page to compare them side by side.")

st.plotly_chart(agreement_matrix(cmp.agreement), key="cmp_agreement")
c1, c2 = st.columns(2)
with c1:
    st.markdown("**Items whose label differs** (method × method)")
    show_table(cmp.changed, key="cmp_changed")
    download_buttons("Download", cmp.changed, "compare_changed_counts", key="cmp_changed_download")
with c2:
    st.markdown("**Annotator ranking agreement** (Spearman ρ of skills)")
    show_table(cmp.rank_correlation.round(3), key="cmp_rank")
    download_buttons("Download", cmp.rank_correlation, "compare_rank_correlation", key="cmp_rank_download")

if ds.gold is not None:
    src = "simulated truth" if ds.source == "demo" else "uploaded gold labels"
    st.caption(f"Accuracy against {src} on {cmp.gold_items:,} items.")
    st.plotly_chart(accuracy_bar(cmp.accuracy), key="cmp_accuracy")
else:
    st.caption("Upload gold labels on the Data page to see accuracy.")

if len(results) >= 2:
    st.subheader("Items that change between two methods")
    names = list(results)
    a1, a2 = st.columns(2)
    first = a1.selectbox("First method", names, index=0, key="cmp_first")
    second = a2.selectbox("Second method", names, index=1, key="cmp_second")
    if first != second:
        diff = view(
            "changed_items",
            (ds.fingerprint, active_key(first), active_key(second)),
            lambda: changed_items(results[first], results[second]),
        )
        diff.index = diff.index.astype(str)
        st.caption(f"{len(diff):,} items change")
        show_table(diff, key="cmp_diff")
        download_buttons(
            "Download changed items", diff.rename_axis("task"), f"changed_{first}_vs_{second}", key="cmp_download"
        )
