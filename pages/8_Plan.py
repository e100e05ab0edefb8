"""Plan page: which labels to buy next — items ranked by the expected gain in label accuracy from more responses,
the annotators to ask, the expected accuracy before and after (``fusion_core.diagnostics.plan``)."""

import math

import streamlit as st

from fusion_app.cache import active_key, view
from fusion_app.shell import download_buttons, md_escape, results_page, show_table
from fusion_core.diagnostics.plan import AUDIT_TARGET, plan_relabel
from fusion_core.plots.plan import plan_curve

ds, results = results_page("Plan", "Which labels to buy next")
st.markdown(
    "Each item is ranked by how much one or two more responses are expected to raise the chance that its label is "
    "right, under the fitted model, and sent to reliable annotators who have not labelled it yet (nobody gets more "
    "than a tenth of the budget). Items already at the target confidence need nothing."
)
method = st.selectbox("Method whose fit the plan uses", list(results), key="plan_method")
res = results[method]
n_items = len(res.items)
c1, c2, c3 = st.columns(3)
budget = c1.number_input(
    "Extra labels to buy",
    min_value=0,
    max_value=max(1, 5 * n_items),
    value=max(1, math.ceil(0.1 * n_items)),
    step=10,
    key="plan_budget",
)
target = c2.slider("Target label confidence", 0.5, 1.0, AUDIT_TARGET, 0.01, key="plan_target")
per_item = c3.slider("Most extra labels per item", 1, 5, 3, key="plan_per_item")
pkey = (active_key(method), int(budget), float(target), int(per_item))
plan = view(
    "plan", pkey, lambda: plan_relabel(ds.responses, res, int(budget), target=float(target), max_per_item=int(per_item))
)
st.info(md_escape(plan.summary()), icon=":material/shopping_cart:")
for note in plan.notes:
    st.caption(md_escape(note))
st.plotly_chart(view("plan_curve", pkey, lambda: plan_curve(plan)), key="plan_chart")
table = plan.frame()
show_table(
    table,
    key="plan_table",
    column_config={
        "expected gain": st.column_config.NumberColumn("expected gain", format="%.3f"),
        "confidence": st.column_config.NumberColumn("confidence", format="%.3f"),
    },
)
download_buttons("Download the plan", table, f"plan_{method}", key="plan_download")
download_buttons(
    "Download one row per label", plan.assignments(), f"plan_assignments_{method}", key="plan_download_rows"
)
