"""Fit page: methods from the registry, their declared parameters as widgets, fit one or several (cached); the
choice an automatic method made (``FitResult.selection``)."""

import pandas as pd
import streamlit as st

from fusion_app.cache import active_results, fit_many
from fusion_app.fit_form import NEEDS, RECOMMENDED, describe, method_status, param_inputs
from fusion_app.shell import download_buttons, md_escape, no_data_notice, page_setup, plain, show_table
from fusion_app.state import session

ds = page_setup("Fit")
ss = session()
st.title("Fit methods")
if ds is None:
    no_data_notice()
    st.stop()

status = method_status(ds)
enabled = [meta for meta, ok, _ in status if ok]
names = [meta.name for meta in enabled]
by_name = {meta.name: meta for meta in enabled}
previous = [m for m in active_results() if m in names]
default = previous or ([RECOMMENDED] if RECOMMENDED in names else names[:1])
if RECOMMENDED in names:
    st.markdown(f"**Recommended: `{RECOMMENDED}`** — {md_escape(describe(by_name[RECOMMENDED]))}")
st.caption("Results are cached: fitting again with the same data and parameters is instant.")
with st.expander("Choose methods (for experts)", expanded=bool(set(previous) - {RECOMMENDED})):
    st.caption("Methods whose inputs your data lack are listed with what they need.")
    st.dataframe(
        [
            {
                "method": meta.name,
                "what it does": describe(meta),
                "needs": ", ".join(NEEDS.get(n, n) for n in meta.needs()) or "responses only",
                "available": "yes" if ok else reason,
                "fitted": "yes" if meta.name in active_results() else "",
            }
            for meta, ok, reason in status
        ],
        key="method_table",
        hide_index=True,
        column_config={
            "method": st.column_config.TextColumn("method", width="small"),
            "what it does": st.column_config.TextColumn("what it does", width="large"),
        },
    )
    chosen = st.multiselect(
        "Methods to fit",
        names,
        default=default,
        format_func=lambda n: f"{n} — {'(recommended) ' if n == RECOMMENDED else ''}{describe(by_name[n])}",
        key="fit_methods",
        placeholder="Choose one or more methods",
    )
show_adv = st.toggle("Show advanced parameters", value=False, key="fit_advanced")
use_gold = False
if ds.gold is not None:
    use_gold = st.checkbox(
        "Use gold labels during fitting (semi-supervised)",
        value=False,
        key="fit_use_gold",
        help="Off: gold is only used to evaluate on the Compare page.",
    )

requests = {}
for name in chosen:
    meta = by_name[name]
    with st.expander(f"{name} parameters", expanded=False):
        if meta.reference:
            st.caption(md_escape(meta.reference))
        saved = ss.get("fc_params", {}).get(name, {})
        requests[name] = param_inputs(meta, saved, advanced=show_adv)

fit_label = "Fit the recommended method" if chosen == [RECOMMENDED] else "Fit selected methods"
if st.button(fit_label, type="primary", disabled=not chosen, key="fit_button"):
    bar = st.progress(0.0, text="Starting…")

    def progress(i: int, n: int, name: str) -> None:
        bar.progress(i / max(n, 1), text=f"Fitting {name} ({i + 1}/{n})…" if name else "Done.")

    with st.spinner("Fitting…", show_time=True):
        done, errors = fit_many(ds, requests, use_gold=use_gold, progress=progress)
    # show the outcome after a rerun so the sidebar and the tables below include the new results
    ss["fc_flash"] = {"done": list(done), "errors": errors}
    st.rerun()

flash = ss.pop("fc_flash", None)
if flash:
    for name, msg in flash["errors"].items():
        st.error(f"{md_escape(name)}: {plain(msg)}")
    if flash["done"]:
        st.success("Fitted: " + ", ".join(flash["done"]))

results = active_results()
if results:
    st.subheader("Results in this session")
    rows = []
    for name, res in results.items():
        s = res.summary()
        rows.append(
            {
                "method": name,
                "iterations": s["iterations"],
                "converged": s["converged"],
                "log-likelihood": s["log_likelihood"],
                "seconds": round(s["seconds"], 3),
                "warnings": len(s["warnings"]),
            }
        )
    show_table(pd.DataFrame(rows), key="results_table", hide_index=True)
    download_buttons("Download results", pd.DataFrame(rows), "fit_results", key="fit_results_download")
    for name, res in results.items():
        if res.selection is not None:
            choice = res.selection
            st.markdown(f"**{md_escape(name)}** chose **{md_escape(choice.chosen)}** by {md_escape(choice.criterion)}:")
            show_table(choice.table, key=f"selection_{name}", hide_index=True)
            download_buttons(
                "Download the comparison", choice.table, f"selection_{name}", key=f"selection_{name}_download"
            )
    notes = [(name, w) for name, res in results.items() for w in dict.fromkeys(res.warnings)]
    if notes:
        with st.expander(f"Warnings from the methods ({len(notes)})", expanded=len(notes) <= 3):
            for name, w in notes:
                st.warning(f"{md_escape(name)}: {plain(w)}")
    st.caption(f"Fits run in this session: {ss.get('fc_fit_count', 0)}")
    c = st.columns(3)
    c[0].page_link("pages/3_Annotators.py", label="Annotators", icon=":material/group:")
    c[1].page_link("pages/5_Items.py", label="Items", icon=":material/list:")
    c[2].page_link("pages/6_Compare.py", label="Compare", icon=":material/compare:")
elif chosen:
    st.caption(f"Press **{fit_label}** above to see the results.")
else:
    st.caption("Choose at least one method under **Choose methods**.")
