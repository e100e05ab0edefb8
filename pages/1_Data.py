"""Data page: demo datasets, upload + column mapping, side inputs (gold, graph, context), validation, summary."""

import streamlit as st

from fusion_app.cache import agreement_stats
from fusion_app.pairwise_view import pairwise_mapping
from fusion_app.shell import download_buttons, md_escape, page_setup, show_error
from fusion_app.state import current, max_upload_bytes, session, set_dataset
from fusion_core.data.dataset import make_dataset, pairwise_dataset
from fusion_core.data.formats import upload_types
from fusion_core.data.guess import guess_gold_columns
from fusion_core.data.pairwise import PairwiseResponses, pairwise_columns
from fusion_core.data.uploads import (
    build_responses,
    context_from_table,
    guess_column,
    guess_label_column,
    guess_layout,
    label_problem,
    read_context_upload,
    read_export_upload,
    read_gold_upload,
    read_graph_upload,
    read_upload,
)
from fusion_core.diagnostics.tables import plain_words
from fusion_core.errors import UserInputError
from fusion_core.plots import kappa_heatmap, label_distribution, overlap_heatmap, response_count_histograms
from fusion_core.simulate.demo import DEMOS, demo_dataset

ds = page_setup("Data")
ss = session()
st.title("Data")

NONE = "(none)"
UPLOAD_TYPES = upload_types()  # every format of the registry (fusion_core/data/formats)

tab_demo, tab_upload, tab_inputs = st.tabs(["Demo datasets", "Upload responses", "Gold, graph, context"])
MISSING_MARKERS = ["NA", "N/A", "null", "None", "nan", "-", "?"]

with tab_demo:
    st.caption("Built-in **simulated** datasets with known truth (used only for evaluation on the Compare page).")
    choice = st.selectbox("Demo dataset", list(DEMOS), format_func=lambda k: DEMOS[k], key="demo_choice")
    if choice is not None and st.button("Load demo", key="load_demo"):
        set_dataset(demo_dataset(choice))
        ss["fc_pending"] = None
        # rerun so the sidebar (drawn before this button) names the new data
        ss["fc_data_flash"] = f"Loaded the demo: {DEMOS[choice]}."
        st.rerun()

with tab_upload:
    st.caption(
        f"CSV, TSV, Parquet or JSON lines, long (one row per response) or wide (one row per item, one column per "
        f"annotator); or a labelling tool's export (Label Studio, MTurk, Toloka, Argilla, Prodigy, doccano), read "
        f"with no mapping step. Limit {max_upload_bytes() / 1024 / 1024:,.0f} MB."
    )
    with st.expander("Reading options: missing values, spaces"):
        st.caption(
            "Ids and labels are read exactly as written: an empty cell is missing, every other value (NA, null, "
            "007, 1.0, TRUE) is kept as text. Choose extra missing-value markers or trimming if your file needs them."
        )
        markers = st.multiselect(
            "Extra missing-value markers",
            MISSING_MARKERS,
            key="read_missing",
            accept_new_options=True,
            help="Cells equal to one of these (exactly) are treated as missing, in every uploaded file.",
        )
        strip = st.checkbox(
            "Trim spaces at both ends of every value and column name",
            key="read_strip",
            help="Off: ' x' and 'x' are different labels. On: both become 'x'.",
        )
    reading = {"na_values": tuple(markers), "strip_whitespace": bool(strip)}
    up = st.file_uploader("Responses file", type=UPLOAD_TYPES, key="upload_responses")
    if up is not None:
        seen = ss.setdefault("fc_seen_uploads", {})
        token = (up.file_id, up.name, up.size, reading["na_values"], reading["strip_whitespace"])
        if seen.get("responses") != token:  # read each new upload once (again when the reading options change)
            seen["responses"] = token
            ss.pop("fc_upload_error", None)
            try:
                exported = read_export_upload(up.name, up.getvalue(), max_upload_bytes(), **reading)
                if exported is not None:  # a tool's export: no mapping step; what was read is the description
                    set_dataset(
                        make_dataset(
                            exported.responses,
                            name=f"upload: {up.name}",
                            source="upload",
                            gold=exported.gold,
                            spans=exported.spans,
                            export_format=exported.format,
                            export_control=exported.control,
                            description=" ".join(exported.lines()),
                        )
                    )
                    ss["fc_pending"] = None
                    ss["fc_data_flash"] = f"Loaded {exported.responses.n_responses:,} responses from the export."
                    st.rerun()
                table = read_upload(up.name, up.getvalue(), max_upload_bytes(), **reading)
                table.columns = [str(c) for c in table.columns]
                guessed, n_like = guess_layout(table)
                if pairwise_columns(table.columns) is not None:  # option A / option B columns: A-vs-B judgements
                    guessed = "pairwise"
                ss["fc_pending"] = {"name": up.name, "table": table, "layout": guessed, "annotator_like": n_like}
                ss["map_layout"] = guessed  # preselect the layout the file looks like
            except UserInputError as exc:  # the previous data (and any pending mapping) stay as they were
                ss["fc_upload_error"] = (token, str(exc))
        err = ss.get("fc_upload_error")
        if err and err[0] == token:
            show_error(UserInputError(err[1]))
    else:
        ss.pop("fc_upload_error", None)

    pending = ss.get("fc_pending")
    if pending is not None:
        table = pending["table"]
        cols = [str(c) for c in table.columns]
        table.columns = cols
        st.markdown(f"**Map the columns of** {md_escape(pending['name'])} ({len(table):,} rows)")
        st.dataframe(table.head(20), key="upload_preview", height=240)
        layout = st.radio(
            "Layout",
            ["long", "wide", "pairwise"],
            horizontal=True,
            key="map_layout",
            help="long: task, annotator, label per row; wide: one row per item, one column per annotator; "
            "pairwise: one row per judgement of two answers (prompt, option A, option B, judge, preference)",
        )
        n_like = pending.get("annotator_like", 0)
        if pending.get("layout") == "wide" and layout == "long":
            st.warning(
                f"This file looks **wide**: {n_like} columns hold values from one small set of labels, as if each "
                "column were an annotator. Read as long, it would give only one annotator column. Choose **wide** "
                "unless each row really is one response."
            )
        elif pending.get("layout") == "wide":
            st.caption(f"Detected a wide file: {n_like} columns look like annotators (one row per item).")
        if layout == "pairwise":  # A-vs-B judgements: the pairwise roles, then the one-click audit as usual
            st.caption(
                "Pairwise judgements: the audit ranks the options, weighs the judges and checks their position, "
                "length and self-preference biases (docs/JUDGES.md)."
            )
            mapping = pairwise_mapping(cols, prefix="map_pw")
            if st.button("Use these columns", type="primary", key="use_columns", disabled=mapping is None):
                try:
                    judged = PairwiseResponses.from_frame(table, mapping)
                    set_dataset(pairwise_dataset(judged, name=f"upload: {pending['name']}"))
                    ss["fc_pending"] = None
                    ss["fc_data_flash"] = f"Loaded {judged.n:,} pairwise judgements from the upload."
                    st.rerun()
                except UserInputError as exc:
                    show_error(exc)
        else:
            taken: set[str] = set()

            def pick(role: str, label: str, optional: bool = False) -> str | None:
                # the label's first guess is never an id or a time column (e.g. created_at by position)
                guess = guess_label_column(table, sorted(taken)) if role == "label" else guess_column(cols, role, taken)
                options = ([NONE] if optional else []) + cols
                index = options.index(guess) if guess in options else 0
                if not optional and guess is None:
                    index = min(len(taken), len(options) - 1)
                picked = st.selectbox(label, options, index=index, key=f"map_{role}")
                value = None if picked == NONE else picked
                if value:
                    taken.add(value)
                return value

            c1, c2, c3 = st.columns(3)
            with c1:
                task_col = pick("task", "Task (item id) column", optional=layout == "wide")
            if layout == "long":
                with c2:
                    worker_col = pick("worker", "Annotator column")
                with c3:
                    label_col = pick("label", "Label column")
                problem = label_problem(table, label_col)  # shown now; "Use these columns" refuses it
                if problem:
                    st.warning(md_escape(problem[0].upper() + problem[1:]), icon=":material/warning:")
                with st.expander("Optional: time, sequences, context, duplicates"):
                    time_col = pick("time", "Time column (date, timestamp or batch number)", optional=True)
                    seq_col = pick("sequence", "Sequence id column", optional=True)
                    pos_col = pick("position", "Position column", optional=True)
                    ctx_col = pick("context", "Context column (numeric, one value per item)", optional=True)
                    dup = st.selectbox(
                        "Repeated (task, annotator) pairs", ["keep", "first", "last", "error"], key="map_dup"
                    )
            else:
                worker_col = label_col = seq_col = pos_col = ctx_col = time_col = None
                dup = "keep"
            if st.button("Use these columns", type="primary", key="use_columns"):
                try:
                    resp = build_responses(
                        table,
                        layout=layout,
                        task=task_col,
                        worker=worker_col,
                        label=label_col,
                        sequence=seq_col,
                        position=pos_col,
                        duplicates=dup,
                        time=time_col,
                    )
                    context = context_from_table(table, task_col, ctx_col, resp) if task_col and ctx_col else None
                    new = make_dataset(resp, name=f"upload: {pending['name']}", source="upload", context=context)
                    set_dataset(new)
                    ss["fc_pending"] = None
                    ss["fc_data_flash"] = f"Loaded {resp.n_responses:,} responses from the upload."
                    st.rerun()
                except UserInputError as exc:
                    show_error(exc)

with tab_inputs:
    if ds is None:
        st.caption("Load responses first.")
    else:
        st.caption(
            "Gold labels are used for evaluation (Compare page) and, if you choose so on the Fit page, in fitting."
        )
        gold_up = st.file_uploader("Gold labels (task + truth columns)", type=UPLOAD_TYPES, key="upload_gold")
        if gold_up is not None and ss["fc_seen_uploads"].get("gold") != (gold_up.file_id, ds.fingerprint):
            ss["fc_seen_uploads"]["gold"] = (gold_up.file_id, ds.fingerprint)
            ss["fc_gold_pending"] = None
            for k in ("map_gold_task", "map_gold_truth"):  # a new file: the mapping starts from its own guess
                ss.pop(k, None)
            try:  # columns guessed as for the answers file; the mapping below changes them
                gold_cols = [
                    str(c) for c in read_upload(gold_up.name, gold_up.getvalue(), max_upload_bytes(), **reading)
                ]
                ss["fc_gold_pending"] = {"name": gold_up.name, "data": gold_up.getvalue(), "columns": gold_cols}
                g_task, g_truth, _ = guess_gold_columns(gold_cols)
                gold = read_gold_upload(
                    gold_up.name, gold_up.getvalue(), ds.responses, max_upload_bytes(), task=g_task, truth=g_truth,
                    **reading,
                )  # fmt: skip
                ds = ds.with_gold(gold)
                set_dataset(ds)
                ss["fc_gold_pending"]["mapped"] = (g_task, g_truth)
                st.success(
                    f"Gold labels for {len(gold):,} items loaded (task: {md_escape(g_task)}, truth: "
                    f"{md_escape(g_truth)})."
                )
            except UserInputError as exc:
                show_error(exc)
        elif gold_up is None:
            ss["fc_gold_pending"] = None
        gold_pending = ss.get("fc_gold_pending")
        if gold_pending is not None:
            gcols = gold_pending["columns"]
            try:
                first = guess_gold_columns(gcols)[:2]
            except UserInputError:
                first = (gcols[0], gcols[min(1, len(gcols) - 1)])
            mapped = gold_pending.get("mapped") or first
            with st.expander("Gold columns", expanded="mapped" not in gold_pending):
                g1, g2 = st.columns(2)
                g_task = g1.selectbox("Gold task column", gcols, index=gcols.index(mapped[0]), key="map_gold_task")
                g_truth = g2.selectbox("Gold truth column", gcols, index=gcols.index(mapped[1]), key="map_gold_truth")
                if st.button("Use these gold columns", key="use_gold_columns"):
                    try:
                        gold = read_gold_upload(
                            gold_pending["name"], gold_pending["data"], ds.responses, max_upload_bytes(),
                            task=g_task, truth=g_truth, **reading,
                        )  # fmt: skip
                        ds = ds.with_gold(gold)
                        set_dataset(ds)
                        gold_pending["mapped"] = (g_task, g_truth)
                        st.success(f"Gold labels for {len(gold):,} items loaded.")
                    except UserInputError as exc:
                        show_error(exc)
        graph_up = st.file_uploader(
            "Item graph (edge list CSV, GraphML, GML)", type=["csv", "tsv", "txt", "graphml", "gml"], key="upload_graph"
        )
        if graph_up is not None and ss["fc_seen_uploads"].get("graph") != (graph_up.file_id, ds.fingerprint):
            try:
                graph = read_graph_upload(
                    graph_up.name, graph_up.getvalue(), ds.responses, max_upload_bytes(), **reading
                )
                ds = ds.with_graph(graph, graph_up.name)
                set_dataset(ds)
                ss["fc_seen_uploads"]["graph"] = (graph_up.file_id, ds.fingerprint)
                st.success("Item graph loaded.")
            except UserInputError as exc:
                ss["fc_seen_uploads"]["graph"] = (graph_up.file_id, ds.fingerprint)
                show_error(exc)
        ctx_up = st.file_uploader(
            "Context per item (task + context columns, numeric)", type=UPLOAD_TYPES, key="upload_context"
        )
        if ctx_up is not None and ss["fc_seen_uploads"].get("context") != (ctx_up.file_id, ds.fingerprint):
            try:
                ctx = read_context_upload(ctx_up.name, ctx_up.getvalue(), ds.responses, max_upload_bytes(), **reading)
                ds = ds.with_context(ctx)
                set_dataset(ds)
                st.success(f"Context values for {len(ctx):,} items loaded.")
            except UserInputError as exc:
                show_error(exc)
            ss["fc_seen_uploads"]["context"] = (ctx_up.file_id, ds.fingerprint)

ds = current()
flash = ss.pop("fc_data_flash", None)
if flash:
    st.success(md_escape(flash))
st.divider()
if ds is None:
    st.info("No data is loaded: pick a demo dataset or upload a file above.")
    st.stop()

r = ds.responses
st.header("Summary")
st.caption(md_escape(ds.name))
if ds.description:
    st.caption(md_escape(ds.description))
c = st.columns(5)
c[0].metric("responses", f"{r.n_responses:,}")
c[1].metric("items", f"{r.n_items:,}")
c[2].metric("annotators", f"{r.n_workers:,}")
c[3].metric("labels", r.n_classes)
c[4].metric("inputs", ", ".join(ds.inputs))
with st.expander("Validation report", expanded=ds.source == "upload"):
    for line in ds.messages:
        st.text(plain_words(line))
    if ds.gold is not None:
        st.text(f"Gold labels: {len(ds.gold):,} items.")
    if ds.graph is not None:
        st.text(f"Item graph: {ds.graph_name or 'graph'}.")
    if ds.context is not None:
        st.text(f"Context values: {len(ds.context):,} items.")

left, right = st.columns(2)
left.plotly_chart(response_count_histograms(r), key="data_counts")
right.plotly_chart(label_distribution(r), key="data_labels")

st.subheader("Agreement")
stats = agreement_stats(ds.fingerprint, r)
summ = stats["summary"]
a = st.columns(len(summ.values) + 2)
for col, v in zip(a, summ.values):  # every statistic of fusion_core.diagnostics.agreement.AGREEMENT_STATISTICS
    col.metric(v.title, f"{v.value:.3f}", help=v.help)
a[-2].metric(
    "mean pairwise Cohen's κ",
    f"{summ.mean_pairwise_kappa:.3f}",
    help=f"over {summ.pairs_used} pairs of the most active annotators",
)
a[-1].metric("items with ≥ 2 responses", f"{summ.items_used:,}")
k1, k2 = st.columns(2)
k1.plotly_chart(kappa_heatmap(stats["kappa"]), key="data_kappa")
k2.plotly_chart(overlap_heatmap(stats["shared"]), key="data_overlap")
download_buttons("Download pairwise κ", stats["kappa"], "pairwise_kappa", key="data_kappa_download")

if st.button("Clear data", key="clear_data"):
    set_dataset(None)
    st.rerun()
