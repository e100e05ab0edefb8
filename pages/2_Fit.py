"""Fit page: methods from the registry, their parameters as widgets, fit one or several (cached)."""

import streamlit as st

from fusion_core import app_state as S

ds = S.page_setup("Fit")
ss = S.state()
st.title("Fit methods")
if ds is None:
    S.no_data_notice()
    st.stop()

status = S.method_status(ds)
st.caption(
    "Methods come from the registry; those whose inputs your data lacks are listed with what they need. "
    "Results are cached: fitting again with the same data and parameters is instant."
)
st.dataframe(
    [
        {
            "method": info.name,
            "summary": info.summary,
            "needs": ", ".join(info.needs()) or "responses only",
            "available": "yes" if ok else reason,
            "fitted": "yes" if info.name in S.active_results() else "",
        }
        for info, ok, reason in status
    ],
    key="method_table",
    hide_index=True,
)
enabled = [info for info, ok, _ in status if ok]
names = [info.name for info in enabled]
by_name = {info.name: info for info in enabled}
previous = [m for m in S.active_results() if m in names]
chosen = st.multiselect(
    "Methods to fit",
    names,
    default=previous,
    format_func=lambda n: f"{n} — {by_name[n].summary}",
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
    info = by_name[name]
    saved = ss.get("fc_params", {}).get(name, {})
    params = {}
    with st.expander(f"{name} parameters", expanded=False):
        if info.reference:
            st.caption(info.reference)
        for spec in info.params:
            if not S.editable(spec) or (spec.advanced and not show_adv):
                continue
            value = saved.get(spec.name, spec.default)
            key = f"param_{name}_{spec.name}"
            label = spec.name
            if spec.kind == "bool":
                params[spec.name] = st.checkbox(label, value=bool(value), help=spec.help or None, key=key)
            elif spec.kind == "choice":
                opts = list(spec.choices or [value])
                params[spec.name] = st.selectbox(
                    label,
                    opts,
                    index=opts.index(value) if value in opts else 0,
                    help=spec.help or None,
                    key=key,
                    format_func=str,
                )
            elif spec.kind == "int":
                lo = None if spec.low is None else int(min(spec.low, value))
                hi = None if spec.high is None else int(max(spec.high, value))
                params[spec.name] = int(
                    st.number_input(
                        label, value=int(value), min_value=lo, max_value=hi, step=1, help=spec.help or None, key=key
                    )
                )
            elif spec.kind == "float":
                lo = None if spec.low is None else float(min(spec.low, value))
                hi = None if spec.high is None else float(max(spec.high, value))
                params[spec.name] = float(
                    st.number_input(
                        label,
                        value=float(value),
                        min_value=lo,
                        max_value=hi,
                        format="%g",
                        help=spec.help or None,
                        key=key,
                    )
                )
            else:
                params[spec.name] = st.text_input(label, value=str(value), help=spec.help or None, key=key)
    # only parameters that differ from the defaults go to the estimator (and into the cache key)
    defaults = {p.name: p.default for p in info.params}
    requests[name] = {k: v for k, v in params.items() if v != defaults.get(k)}

if st.button("Fit selected methods", type="primary", disabled=not chosen, key="fit_button"):
    bar = st.progress(0.0, text="Starting…")

    def progress(i: int, n: int, name: str) -> None:
        bar.progress(i / max(n, 1), text=f"Fitting {name} ({i + 1}/{n})…" if name else "Done.")

    with st.spinner("Fitting…", show_time=True):
        done, errors = S.fit_many(ds, requests, use_gold=use_gold, progress=progress)
    # show the outcome after a rerun so the sidebar and the tables below include the new results
    ss["fc_flash"] = {"done": list(done), "errors": errors}
    st.rerun()

flash = ss.pop("fc_flash", None)
if flash:
    for name, msg in flash["errors"].items():
        st.error(f"{S.md_escape(name)}: {S.md_escape(msg)}")
    if flash["done"]:
        st.success("Fitted: " + ", ".join(flash["done"]))

results = S.active_results()
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
    st.dataframe(rows, key="results_table", hide_index=True)
    for name, res in results.items():
        if "heldout_table" in res.extras:
            st.markdown(
                f"**{S.md_escape(name)}** chose **{S.md_escape(res.extras['chosen_method'])}** by held-out "
                "annotation log-likelihood (nats per hidden response, higher is better; ± one standard error "
                "over the splits):"
            )
            st.dataframe(res.extras["heldout_table"], key=f"heldout_{name}", hide_index=True)
    notes = [(name, w) for name, res in results.items() for w in dict.fromkeys(res.warnings)]
    if notes:
        with st.expander(f"Warnings from the methods ({len(notes)})", expanded=len(notes) <= 3):
            for name, w in notes:
                st.warning(f"{S.md_escape(name)}: {S.md_escape(w)}")
    st.caption(f"Fits run in this session: {ss.get('fc_fit_count', 0)}")
    c = st.columns(3)
    c[0].page_link("pages/3_Annotators.py", label="Annotators", icon=":material/group:")
    c[1].page_link("pages/5_Items.py", label="Items", icon=":material/list:")
    c[2].page_link("pages/6_Compare.py", label="Compare", icon=":material/compare:")
elif chosen:
    st.caption("Press **Fit selected methods**.")
else:
    S.no_results_notice()
