"""The page shell every page starts with: page config, session initialised, navigation and the current data in
the sidebar, the notices for "no data" / "nothing fitted", and escaping of user text for Streamlit markdown."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Sequence
from typing import Any, Literal, TypeVar

import pandas as pd
import streamlit as st

from fusion_app.cache import active_results
from fusion_app.memory import start_trimmer
from fusion_app.state import ensure_state
from fusion_app.warmup import start_warm_up
from fusion_core.data import export
from fusion_core.data.dataset import Dataset
from fusion_core.diagnostics.tables import plain_words
from fusion_core.methods.results import FitResult

PAGES = (
    ("app.py", "Home", ":material/home:"),
    ("pages/1_Data.py", "1 · Data", ":material/upload:"),
    ("pages/0_Audit.py", "Audit summary", ":material/fact_check:"),
    ("pages/2_Fit.py", "2 · Fit", ":material/play_arrow:"),
    ("pages/3_Annotators.py", "3 · Annotators", ":material/group:"),
    ("pages/4_Cartels.py", "4 · Cartels", ":material/hub:"),
    ("pages/5_Items.py", "5 · Items", ":material/list:"),
    ("pages/6_Compare.py", "6 · Compare", ":material/compare:"),
    ("pages/7_Ratings.py", "7 · Ratings", ":material/star_half:"),
    ("pages/8_Plan.py", "8 · Plan: labels to buy", ":material/shopping_cart:"),
    ("pages/9_Glossary.py", "Glossary", ":material/menu_book:"),
)
"""Sidebar navigation (path, label, icon).  Streamlit's automatic page list is hidden in
``.streamlit/config.toml`` because it would label the home page by its file name ("app")."""

T = TypeVar("T")
_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$:&])")


def md_escape(text: Any) -> str:
    """User text made literal for Streamlit markdown (no formatting, no HTML)."""
    return _MD_SPECIAL.sub(r"\\\1", str(text)).replace("\n", " ")


def plain(text: Any) -> str:
    """A library warning in plain words (:func:`~fusion_core.diagnostics.tables.plain_words`), escaped."""
    return md_escape(plain_words(str(text)))


def show_error(exc: Exception) -> None:
    """One error box with the (escaped) message."""
    st.error(md_escape(str(exc)), icon=":material/error:")


def choose_one(where: Any, label: str, options: Sequence[T], value: T, *, key: str) -> T:
    """A select slider (in the container ``where``) for one of ``options`` (never a range)."""
    chosen = where.select_slider(label, list(options), value=value, key=key)
    return chosen[0] if isinstance(chosen, tuple) else chosen


def export_frame(df: pd.DataFrame) -> pd.DataFrame:
    """A shown table ready to download: its index (task or annotator ids) becomes the first column."""
    if isinstance(df.index, pd.RangeIndex) and df.index.name is None:
        return df
    name = str(df.index.name or "id")
    while name in map(str, df.columns):
        name = f"{name} (id)"
    return df.rename_axis(name).reset_index()


def csv_bytes(df: pd.DataFrame) -> bytes:
    """A shown table as formula-safe UTF-8 CSV (:func:`fusion_core.data.export.csv_bytes`), index first."""
    return export.csv_bytes(export_frame(df))


DOWNLOAD_NO_RERUN: Literal["ignore"] = "ignore"
"""``on_click`` of every download built by a callable: the click fetches the file and does not rerun the page.  With
a rerun (Streamlit's default) a full run revokes the page's deferred-file ids and drops the files generated but not
yet fetched, so a second download clicked while that run is going hung with a spinner or never arrived (issue 26;
tests/test_e2e_downloads.py)."""


def download_buttons(label: str, df: pd.DataFrame, stem: str, *, key: str) -> None:
    """Two download buttons for a shown table: CSV that opens safely in a spreadsheet (formulas neutralised with a
    leading ``'``) and Parquet with the raw values, for programs.  Files are built only when clicked, and a click
    does not rerun the page (:data:`DOWNLOAD_NO_RERUN`)."""
    left, right = st.columns(2)
    left.download_button(
        f"{label} (CSV)",
        lambda: export.csv_bytes(export_frame(df)),
        file_name=f"{stem}.csv",
        mime="text/csv",
        key=key,
        on_click=DOWNLOAD_NO_RERUN,
        help="Opens in a spreadsheet as text: values starting with = + - @ get a leading ' so they never run.",
    )
    right.download_button(
        f"{label} (Parquet)",
        lambda: export.parquet_bytes(export_frame(df)),
        file_name=f"{stem}.parquet",
        mime="application/vnd.apache.parquet",
        key=f"{key}_parquet",
        on_click=DOWNLOAD_NO_RERUN,
        help="The raw values, for programs (pandas.read_parquet, Arrow, Spark).",
    )


MAX_ROWS_SHOWN = 2_000
"""Rows sent to the browser per table (the download holds them all)."""


def display_frame(df: pd.DataFrame, max_rows: int = MAX_ROWS_SHOWN) -> pd.DataFrame:
    """A table as shown: its first ``max_rows`` rows, missing values as empty cells (never "None"/"nan")."""
    out = df.head(max_rows)
    missing = out.isna()
    cols = [c for c in out.columns if missing[c].any()]
    if cols:
        out = out.copy()
        for c in cols:
            num = pd.api.types.is_float_dtype(out[c])
            out[c] = [("" if m else (f"{v:.4g}" if num else v)) for v, m in zip(out[c].tolist(), missing[c])]
    return out


def show_table(df: pd.DataFrame, *, key: str, max_rows: int = MAX_ROWS_SHOWN, **kwargs: Any) -> None:
    """``st.dataframe`` of :func:`display_frame`, saying how many rows are left out (they are in the download)."""
    st.dataframe(display_frame(df, max_rows), key=key, **kwargs)
    if len(df) > max_rows:
        st.caption(f"Showing the first {max_rows:,} of {len(df):,} rows; the download has all of them.")


def page_setup(title: str) -> Dataset | None:
    """Common start of every page: wide layout, session initialised, navigation and current data in the sidebar."""
    with contextlib.suppress(st.errors.StreamlitAPIException):  # already set in this run
        st.set_page_config(page_title=f"{title} · fusion_core", layout="wide")
    start_trimmer()  # once per server process: memory of ended sessions goes back to the OS
    start_warm_up()  # once per server process: compiled kernels loaded before the first user needs them
    ss = ensure_state()
    ds = ss.get("fc_dataset")
    with st.sidebar:
        for path, label, icon in PAGES:
            st.page_link(path, label=label, icon=icon)
        st.divider()
        st.markdown("**Current data**")
        if ds is None:
            st.caption("No data loaded.")
        else:
            r = ds.responses
            st.caption(md_escape(ds.name))
            st.caption(
                f"{r.n_responses:,} responses · {r.n_items:,} items · {r.n_workers:,} annotators · {r.n_classes} labels"
            )
            fitted = sorted(active_results(ss))
            st.caption("Fitted: " + (", ".join(md_escape(m) for m in fitted) if fitted else "none yet"))
    return ds


def results_page(title: str, heading: str | None = None) -> tuple[Dataset, dict[str, FitResult]]:
    """Shell of a page that shows fitted results: returns (dataset, results by method), or stops the script with a
    pointer to the Data or Fit page when either is missing."""
    ds = page_setup(title)
    st.title(heading or title)
    if ds is None:
        no_data_notice()
        st.stop()
    results = active_results()
    if not results:
        no_results_notice()
        st.stop()
    return ds, results


def no_data_notice() -> None:
    st.info("No data is loaded. Open the **Data** page to load a demo dataset or upload your own.")
    st.page_link("pages/1_Data.py", label="Go to Data", icon=":material/upload:")


def no_results_notice() -> None:
    st.info("No method has been fitted on this data yet. Open the **Fit** page and fit one or more methods.")
    st.page_link("pages/2_Fit.py", label="Go to Fit", icon=":material/play_arrow:")
