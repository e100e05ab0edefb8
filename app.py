"""fusion_core app — home page.  Run with ``streamlit run app.py``.

The pages in ``pages/`` read the session state (via the app's support package :mod:`fusion_app`), call the
library and render figures from :mod:`fusion_core.plots`; there is no algorithm code in the app.
"""

import streamlit as st

from fusion_app.shell import md_escape, no_data_notice, page_setup
from fusion_core.plots import label_distribution, response_count_histograms

ds = page_setup("Home")
st.title("Annotator reliability audit")
st.markdown(
    "Estimate which annotators are reliable, which are spammers or copy each other, and which items need another "
    "look — without ground truth. Load data, fit one or several latent-truth models, then explore."
)

if ds is None:
    no_data_notice()
else:
    r = ds.responses
    if ds.source == "demo":
        st.success("A built-in **simulated** demo dataset is loaded so every page has something to show.")
    st.subheader("Current data")
    st.caption(md_escape(ds.name))
    if ds.description:
        st.caption(md_escape(ds.description))
    c = st.columns(4)
    c[0].metric("responses", f"{r.n_responses:,}")
    c[1].metric("items", f"{r.n_items:,}")
    c[2].metric("annotators", f"{r.n_workers:,}")
    c[3].metric("labels", r.n_classes)
    left, right = st.columns(2)
    left.plotly_chart(response_count_histograms(r), key="home_counts")
    right.plotly_chart(label_distribution(r), key="home_labels")

st.subheader("Start")
cols = st.columns(3)
with cols[0]:
    st.page_link("pages/1_Data.py", label="1 · Data: upload or pick a demo", icon=":material/upload:")
    st.page_link("pages/0_Audit.py", label="Audit summary: one-click audit and report", icon=":material/fact_check:")
    st.page_link("pages/2_Fit.py", label="2 · Fit methods", icon=":material/play_arrow:")
with cols[1]:
    st.page_link("pages/3_Annotators.py", label="3 · Annotators", icon=":material/group:")
    st.page_link("pages/4_Cartels.py", label="4 · Cartels", icon=":material/hub:")
with cols[2]:
    st.page_link("pages/5_Items.py", label="5 · Items", icon=":material/list:")
    st.page_link("pages/6_Compare.py", label="6 · Compare methods", icon=":material/compare:")
