"""Items page: the item table (each method's own labels, ``result.label_codes``; filter, sort, search), confidence
histogram, items to re-annotate, posteriors along a sequence, and a graph neighbourhood coloured by label."""

import streamlit as st

from fusion_app.cache import active_key, view
from fusion_app.shell import download_buttons, md_escape, results_page, show_table
from fusion_core.diagnostics.tables import ITEM_ORDERS, filter_items, item_table
from fusion_core.plots import neighbourhood_view, posterior_histogram, sequence_strip

ds, results = results_page("Items")

method = st.selectbox("Method", list(results), key="items_method")
res = results[method]
ikey = (active_key(method), ds.gold_fingerprint)
table = view("item_table", ikey, lambda: item_table(res, ds.responses, gold=ds.gold))

st.plotly_chart(view("posterior_histogram", ikey, lambda: posterior_histogram(res)), key="items_hist")
if res.hard_labels is not None:
    st.caption(
        f"{md_escape(method)} decodes labels jointly (e.g. the most likely label path of a sequence): an item's label "
        "can differ from its single most probable label; this page and Compare use the same joint labels."
    )

st.subheader("Posterior table")
c1, c2, c3 = st.columns([2, 2, 1])
labels = c1.multiselect("Predicted label", [str(c) for c in res.classes], key="items_labels")
search = c2.text_input("Search task id", key="items_search", placeholder="task id contains…")
sort = c3.selectbox("Sort", list(ITEM_ORDERS), key="items_sort")
shown = view(
    "items_shown",
    (ikey, tuple(labels), search, sort),
    lambda: filter_items(table, labels=labels, search=search, sort=sort),
)
st.caption(f"{len(shown):,} of {len(table):,} items")
number_format = {
    "entropy": st.column_config.NumberColumn("entropy", format="%.3f"),
    **{c: st.column_config.NumberColumn(c, format="%.3f") for c in table.columns if c.startswith("P(")},
}
show_table(
    shown,
    key="items_table",
    column_config={
        "confidence": st.column_config.ProgressColumn("confidence", min_value=0.0, max_value=1.0, format="%.3f"),
        **number_format,
    },
)
download_buttons("Download posteriors", table, f"posteriors_{method}", key="items_download_all")

st.subheader("Items to re-annotate")
n_low = st.slider(
    "How many (lowest confidence first)", 10, max(10, min(1000, len(table))), min(50, len(table)), key="items_nlow"
)
low = view(
    "items_low", ikey, lambda: filter_items(table, labels=None, search="", sort="lowest confidence first").head(1000)
).head(n_low)
show_table(
    low,
    key="items_reannotate",
    height=240,
    column_config={"confidence": st.column_config.NumberColumn("confidence", format="%.3f"), **number_format},
)
download_buttons("Download items to re-annotate", low, f"reannotate_{method}", key="items_download_low")

r = ds.responses
if r.has_sequences and r.sequences is not None:
    st.subheader("Posteriors along a sequence")
    seq = st.selectbox("Sequence", list(r.sequences), format_func=str, key="items_sequence")
    st.plotly_chart(sequence_strip(res, r, seq), key="items_strip")

if ds.graph is not None:
    st.subheader("Graph neighbourhood")
    graph = ds.graph_view
    if graph is None:
        st.caption("The item graph is not in a drawable form.")
    else:
        nodes = [str(n) for n in list(graph.nodes)[:1]]
        c1, c2, c3 = st.columns(3)
        center_id = c1.text_input("Centre item (task id)", value=nodes[0] if nodes else "", key="items_center")
        radius = c2.slider("Hops", 1, 4, 2, key="items_radius")
        max_nodes = c3.slider("Max nodes drawn", 20, 500, 150, key="items_maxnodes")
        lookup = {str(n): n for n in graph.nodes}
        if center_id in lookup:
            st.plotly_chart(
                neighbourhood_view(graph, res, lookup[center_id], radius=radius, max_nodes=max_nodes), key="items_graph"
            )
        else:
            st.warning(f"Item {md_escape(center_id)} is not a node of the graph.")
