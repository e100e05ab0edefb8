"""Per-user state of the Streamlit app and the cached computations behind its pages.

Everything a page needs lives in ``st.session_state`` under ``fc_*`` keys (one browser session = one user):

* ``fc_dataset`` — the current :class:`Dataset` (responses + optional gold, graph, context) or ``None``;
* ``fc_fits`` — fit cache ``{(data fingerprint, method, params, gold) → FitResult}``: switching pages or
  re-running a page never refits; only new data or new parameters do;
* ``fc_active`` — which cached fit each method name currently shows;
* ``fc_fit_count`` — number of actual fits run in this session (the benchmark checks it stays put);
* ``fc_bootstrap`` / ``fc_cartels`` — caches of the slower diagnostics.

Pure, data-only computations (agreement statistics) are wrapped in ``st.cache_data`` keyed by the data
fingerprint.  Pages only call functions from here, :mod:`fusion_core.plots` and the library.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
from collections.abc import Callable, Mapping, MutableMapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd
import streamlit as st

from fusion_core.data.loading import read_table
from fusion_core.data.responses import Responses
from fusion_core.errors import UserInputError
from fusion_core.methods import available, create, info
from fusion_core.methods.base import FitResult
from fusion_core.methods.params import Param as ParamSpec
from fusion_core.methods.registry import MethodInfo

DEFAULT_DEMO = "crowd"
_MARKUP = re.compile(r"<\s*/?\s*[A-Za-z!?][^>]*>|&[A-Za-z#0-9]+;")
_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$:&])")
ROLE_GUESSES = {
    "task": ("task", "item", "question", "id", "item_id", "task_id", "example", "sentence"),
    "worker": ("worker", "annotator", "rater", "labeler", "labeller", "user", "worker_id", "annotator_id", "judge"),
    "label": ("label", "answer", "response", "class", "rating", "judgment", "judgement", "value"),
    "sequence": ("sequence", "sentence_id", "seq", "doc", "document"),
    "position": ("position", "pos", "token_index", "index", "offset"),
    "context": ("context", "score", "feature", "covariate"),
}


# ---------------------------------------------------------------------------------------- data model
@dataclass
class Dataset:
    """What the user is working on.  ``fingerprint`` identifies responses + graph + context."""

    name: str
    source: str  # "demo" or "upload"
    responses: Responses
    fingerprint: str
    gold: pd.Series | None = None
    gold_fingerprint: str | None = None
    graph: Any = None
    graph_name: str | None = None
    context: pd.Series | None = None
    roles: pd.Series | None = None
    description: str = ""
    messages: list[str] = field(default_factory=list)
    graph_view: Any = None  # the item graph as a networkx graph with task ids (for drawing)

    @property
    def inputs(self) -> tuple[str, ...]:
        have = ["plain"]
        if self.responses.has_sequences:
            have.append("sequence")
        if self.graph is not None:
            have.append("graph")
        if self.context is not None:
            have.append("context")
        return tuple(have)


def _hash_update(h: hashlib._Hash, obj: Any) -> None:
    if obj is None:
        h.update(b"\0none")
    elif isinstance(obj, np.ndarray):
        h.update(str(obj.dtype).encode() + str(obj.shape).encode())
        h.update(np.ascontiguousarray(obj).tobytes())
    elif isinstance(obj, (pd.Index, pd.Series)):
        h.update(
            pd.util.hash_pandas_object(
                pd.Series(obj.astype(str) if obj.dtype == object else obj), index=isinstance(obj, pd.Series)
            )
            .to_numpy()
            .tobytes()
        )
        h.update(str(obj.dtype).encode())
    else:
        h.update(repr(obj).encode())


def fingerprint(responses: Responses, graph: Any = None, context: pd.Series | None = None) -> str:
    """Content hash of the coded responses (ids, labels, sequences), the graph's edges and the context."""
    h = hashlib.blake2b(digest_size=16)
    for part in (
        responses.item,
        responses.worker,
        responses.label,
        responses.items,
        responses.workers,
        responses.classes,
        responses.sequence,
        responses.position,
        responses.sequences,
        context,
    ):
        _hash_update(h, part)
    if graph is not None:
        if hasattr(graph, "source") and hasattr(graph, "target"):  # ItemGraph: edges in item codes
            _hash_update(h, np.asarray(graph.source))
            _hash_update(h, np.asarray(graph.target))
            _hash_update(h, np.asarray(getattr(graph, "weight", np.zeros(0))))
        elif hasattr(graph, "edges"):
            _hash_update(h, repr(sorted((str(u), str(v)) for u, v in graph.edges)))
        else:
            _hash_update(h, repr(graph))
    return h.hexdigest()


def to_networkx(graph: Any, responses: Responses) -> Any:
    """A networkx view (nodes = task ids) of a graph given as networkx or as an ``ItemGraph``."""
    import networkx as nx

    if graph is None or isinstance(graph, nx.Graph):
        return graph
    if hasattr(graph, "source") and hasattr(graph, "target"):
        g = nx.Graph()
        g.add_nodes_from(responses.items)
        g.add_edges_from(
            zip(responses.items.take(np.asarray(graph.source)), responses.items.take(np.asarray(graph.target)))
        )
        return g
    return None


def gold_fingerprint(gold: pd.Series | None) -> str | None:
    if gold is None:
        return None
    h = hashlib.blake2b(digest_size=12)
    _hash_update(h, gold.astype(str))
    _hash_update(h, pd.Index(gold.index.astype(str)))
    return h.hexdigest()


def make_dataset(
    responses: Responses,
    *,
    name: str,
    source: str,
    gold: pd.Series | None = None,
    graph: Any = None,
    graph_name: str | None = None,
    context: pd.Series | None = None,
    roles: pd.Series | None = None,
    description: str = "",
) -> Dataset:
    return Dataset(
        name=name,
        source=source,
        responses=responses,
        fingerprint=fingerprint(responses, graph, context),
        gold=gold,
        gold_fingerprint=gold_fingerprint(gold),
        graph=graph,
        graph_name=graph_name,
        context=context,
        roles=roles,
        description=description,
        messages=responses.report.messages(),
        graph_view=to_networkx(graph, responses),
    )


def demo_dataset(key: str = DEFAULT_DEMO) -> Dataset:
    """A built-in simulated dataset (see :mod:`fusion_core.demo`); its truth becomes evaluation-only gold."""
    from fusion_core.demo import load_demo

    demo = load_demo(key)
    cols = demo.columns
    resp = Responses.from_frame(demo.responses, sequence=cols.get("sequence"), position=cols.get("position"))
    graph = demo.graph
    if graph is not None:
        graph = graph_for_fit(graph, resp)
    ds = make_dataset(
        resp,
        name=f"demo: {demo.title}",
        source="demo",
        gold=demo.truth,
        graph=graph,
        graph_name="simulated SBM graph" if demo.graph is not None else None,
        roles=demo.roles,
        description=demo.description,
    )
    if demo.graph is not None:
        ds.graph_view = demo.graph
    return ds


def graph_for_fit(graph: Any, responses: Responses) -> Any:
    """The graph in the form the graph methods take (``fusion_core.data.graph`` when present)."""
    try:
        from fusion_core.data.graph import graph_for_responses
    except ImportError:
        return graph
    return graph_for_responses(graph, responses)


# ------------------------------------------------------------------------------------- session state
def state() -> MutableMapping[str, Any]:
    return st.session_state


def ensure_state(ss: MutableMapping[str, Any] | None = None) -> MutableMapping[str, Any]:
    """Initialise the session on its first run: load the default demo so no page is ever empty."""
    ss = state() if ss is None else ss
    if not ss.get("fc_initialized"):
        ss["fc_fits"] = {}
        ss["fc_active"] = {}
        ss["fc_params"] = {}
        ss["fc_fit_count"] = 0
        ss["fc_bootstrap"] = {}
        ss["fc_cartels"] = {}
        ss["fc_pending"] = None
        ss["fc_seen_uploads"] = {}
        ss["fc_dataset"] = demo_dataset(DEFAULT_DEMO)
        ss["fc_initialized"] = True
    return ss


def current(ss: MutableMapping[str, Any] | None = None) -> Dataset | None:
    ss = state() if ss is None else ss
    return ss.get("fc_dataset")


def set_dataset(ds: Dataset | None, ss: MutableMapping[str, Any] | None = None) -> None:
    """Replace the current dataset; results shown are dropped when the data changed (the cache stays)."""
    ss = state() if ss is None else ss
    old = ss.get("fc_dataset")
    if old is None or ds is None or old.fingerprint != ds.fingerprint:
        ss["fc_active"] = {}
    ss["fc_dataset"] = ds


# --------------------------------------------------------------------------------------- escaping
def md_escape(text: Any) -> str:
    """User text made literal for Streamlit markdown (no formatting, no HTML)."""
    return _MD_SPECIAL.sub(r"\\\1", str(text)).replace("\n", " ")


def find_markup(values: Any) -> list[str]:
    """Values that contain HTML tags or entities."""
    return [str(v) for v in values if isinstance(v, str) and _MARKUP.search(v)]


# ------------------------------------------------------------------------------------------ uploads
def max_upload_bytes(ss: MutableMapping[str, Any] | None = None) -> int:
    """The upload limit: a per-session override (tests), ``FUSION_CORE_MAX_UPLOAD_MB``, or the server's
    ``server.maxUploadSize`` (MB)."""
    ss = state() if ss is None else ss
    if ss.get("fc_max_upload_bytes"):
        return int(ss["fc_max_upload_bytes"])
    env = os.environ.get("FUSION_CORE_MAX_UPLOAD_MB")
    if env:
        return int(float(env) * 1024 * 1024)
    return int(st.get_option("server.maxUploadSize")) * 1024 * 1024


def read_upload(name: str, data: bytes, limit: int) -> pd.DataFrame:
    """Read an uploaded table (CSV/TSV/Parquet/JSON lines) with the size limit; ``UserInputError`` on failure."""
    if len(data) > limit:
        raise UserInputError(
            f"{name} is {len(data) / 1e6:,.1f} MB, over the {limit / 1e6:,.1f} MB upload limit; "
            "split the file or ask the administrator to raise server.maxUploadSize."
        )
    return read_table(io.BytesIO(data), name=name, max_bytes=limit)


def guess_column(columns: list[str], role: str, taken: set[str] = frozenset()) -> str | None:
    """The column most likely to play ``role`` (by name), or None."""
    lower = {str(c).lower(): c for c in columns if c not in taken}
    for cand in ROLE_GUESSES.get(role, ()):
        if cand in lower:
            return lower[cand]
    return None


def build_responses(
    table: pd.DataFrame,
    *,
    layout: str,
    task: str | None,
    worker: str | None = None,
    label: str | None = None,
    sequence: str | None = None,
    position: str | None = None,
    duplicates: str = "keep",
) -> Responses:
    """Code a mapped upload; refuses labels with HTML markup (they would be a display hazard)."""
    if layout == "wide":
        resp = Responses.from_wide(table, task=task)
    else:
        if not task or not worker or not label:
            raise UserInputError("choose the task, annotator and label columns.")
        if len({task, worker, label}) < 3:
            raise UserInputError("task, annotator and label must be three different columns.")
        resp = Responses.from_frame(
            table,
            task=task,
            worker=worker,
            label=label,
            sequence=sequence or None,
            position=position or None,
            duplicates=duplicates,
        )
    bad = find_markup(resp.classes)
    if bad:
        raise UserInputError(
            f"{len(bad)} label value(s) contain HTML markup, e.g. {bad[0]!r}; labels must be plain text. "
            "Clean the label column and upload again."
        )
    return resp


def context_from_table(table: pd.DataFrame, task: str, column: str, responses: Responses) -> pd.Series:
    """One numeric context value per item from a column of the responses table."""
    ctx = table[[task, column]].dropna().drop_duplicates(subset=[task])
    values = pd.to_numeric(ctx[column], errors="coerce")
    if values.isna().any():
        raise UserInputError(
            f"context column '{column}' must be numeric; found {ctx[column][values.isna()].iloc[0]!r}."
        )
    out = pd.Series(values.to_numpy(), index=pd.Index(ctx[task]), name="context")
    codes = responses.item_codes(out.index, what="context tasks", strict=False)
    out = out[codes >= 0]
    out.index = responses.items.take(codes[codes >= 0])
    return out


def read_gold_upload(name: str, data: bytes, responses: Responses, limit: int) -> pd.Series:
    """Gold labels from an uploaded file (task + truth/label/gold column), checked against the responses."""
    from fusion_core.data.loading import read_gold

    if len(data) > limit:
        raise UserInputError(f"{name} is over the {limit / 1e6:,.1f} MB upload limit.")
    gold = read_gold(io.BytesIO(data), name=name)
    bad = find_markup(pd.unique(gold.astype(str)))
    if bad:
        raise UserInputError(f"gold labels contain HTML markup, e.g. {bad[0]!r}; labels must be plain text.")
    codes = responses.item_codes(gold.index, what="gold tasks", strict=False)
    if (codes < 0).all():
        raise UserInputError("none of the gold tasks occur in the responses; check the task ids.")
    gold = gold[codes >= 0]
    gold.index = responses.items.take(codes[codes >= 0])
    responses.label_codes(gold.to_numpy(), what="gold labels")
    return gold


def read_context_upload(name: str, data: bytes, responses: Responses, limit: int) -> pd.Series:
    """A numeric context value per item from an uploaded file with ``task`` and ``context`` columns."""
    from fusion_core.data.loading import read_context

    if len(data) > limit:
        raise UserInputError(f"{name} is over the {limit / 1e6:,.1f} MB upload limit.")
    ctx = read_context(io.BytesIO(data), name=name)
    codes = responses.item_codes(ctx.index, what="context tasks", strict=False)
    if (codes < 0).all():
        raise UserInputError("none of the context tasks occur in the responses; check the task ids.")
    ctx = ctx[codes >= 0]
    ctx.index = responses.items.take(codes[codes >= 0])
    return ctx.rename("context")


def with_context(ds: Dataset, context: pd.Series | None) -> Dataset:
    new = make_dataset(
        ds.responses,
        name=ds.name,
        source=ds.source,
        gold=ds.gold,
        graph=ds.graph,
        graph_name=ds.graph_name,
        context=context,
        roles=ds.roles,
        description=ds.description,
    )
    new.graph_view, new.messages = ds.graph_view, list(ds.messages)
    return new


def read_graph_upload(name: str, data: bytes, responses: Responses, limit: int) -> Any:
    """An item graph (edge-list CSV, GraphML, GML) from an upload, in the form graph methods take."""
    if len(data) > limit:
        raise UserInputError(f"{name} is over the {limit / 1e6:,.1f} MB upload limit.")
    try:
        from fusion_core.data.graph import read_graph
    except ImportError:
        read_graph = _read_graph_fallback
    graph = read_graph(io.BytesIO(data), name=name)
    return graph_for_fit(graph, responses)


def _read_graph_fallback(source: io.BytesIO, name: str) -> Any:
    import networkx as nx

    data = source.getvalue()
    low = name.lower()
    try:
        if low.endswith(".graphml"):
            return nx.read_graphml(io.BytesIO(data))
        if low.endswith(".gml"):
            return nx.parse_gml(data.decode("utf-8").splitlines())
        table = read_table(io.BytesIO(data), name=name)
    except UserInputError:
        raise
    except Exception as exc:  # networkx parse errors have many types
        raise UserInputError(f"could not read the graph {name}: {exc}") from None
    if table.shape[1] < 2:
        raise UserInputError(f"the edge list {name} needs two columns (source, target).")
    return nx.from_edgelist(table.iloc[:, :2].itertuples(index=False, name=None))


# --------------------------------------------------------------------------------------------- fits
def params_key(params: Mapping[str, Any]) -> tuple:
    return tuple(sorted((k, repr(v)) for k, v in params.items()))


def fit_key(ds: Dataset, method: str, params: Mapping[str, Any], use_gold: bool = False) -> tuple:
    return (ds.fingerprint, method, params_key(params), ds.gold_fingerprint if use_gold else None)


def method_status(ds: Dataset | None) -> list[tuple[MethodInfo, bool, str]]:
    """Every registered method with (enabled?, reason) for the current data."""
    have = set(ds.inputs) if ds is not None else set()
    out = []
    for info in available():
        missing = [n for n in info.needs() if n not in have]
        if ds is None:
            out.append((info, False, "load data first"))
        elif missing:
            need = {
                "sequence": "sequence + position columns",
                "graph": "an item graph",
                "context": "a context value per item",
                "multilabel": "multi-label responses (label sets; use the library API)",
            }
            out.append((info, False, "needs " + ", ".join(need.get(m, m) for m in missing)))
        else:
            out.append((info, True, ""))
    return out


def get_fit(
    ds: Dataset,
    method: str,
    params: Mapping[str, Any] | None = None,
    *,
    use_gold: bool = False,
    ss: MutableMapping[str, Any] | None = None,
) -> FitResult:
    """The cached fit for (data, method, params, gold), fitting only on a cache miss; marks it active."""
    ss = state() if ss is None else ss
    params = dict(params or {})
    key = fit_key(ds, method, params, use_gold)
    fits = ss.setdefault("fc_fits", {})
    if key not in fits:
        est = create(method, **params)
        kwargs: dict[str, Any] = {}
        if "graph" in est.inputs:
            kwargs["graph"] = ds.graph
        if "context" in est.inputs:
            kwargs["context"] = ds.context
        if use_gold and ds.gold is not None:
            kwargs["true_labels"] = ds.gold
        est.fit(ds.responses, **kwargs)
        fits[key] = est.result_
        ss["fc_fit_count"] = ss.get("fc_fit_count", 0) + 1
    ss.setdefault("fc_active", {})[method] = key
    ss.setdefault("fc_params", {})[method] = params
    return fits[key]


def active_results(ss: MutableMapping[str, Any] | None = None) -> dict[str, FitResult]:
    """Results shown on the pages: the active fit of every method on the current data."""
    ss = state() if ss is None else ss
    ds = ss.get("fc_dataset")
    if ds is None:
        return {}
    fits = ss.get("fc_fits", {})
    return {m: fits[k] for m, k in ss.get("fc_active", {}).items() if k in fits and k[0] == ds.fingerprint}


def fit_many(
    ds: Dataset,
    requests: Mapping[str, Mapping[str, Any]],
    *,
    use_gold: bool = False,
    progress: Callable[[int, int, str], None] | None = None,
    ss: MutableMapping[str, Any] | None = None,
) -> tuple[dict[str, FitResult], dict[str, str]]:
    """Fit several methods; returns (results, error message per failed method)."""
    done, errors = {}, {}
    for i, (name, params) in enumerate(requests.items()):
        if progress is not None:
            progress(i, len(requests), name)
        try:
            done[name] = get_fit(ds, name, params, use_gold=use_gold, ss=ss)
        except UserInputError as exc:
            errors[name] = str(exc)
        except Exception as exc:  # a method failing must not take the page down
            errors[name] = f"{type(exc).__name__}: {exc}"
    if progress is not None:
        progress(len(requests), len(requests), "")
    return done, errors


def editable(spec: ParamSpec) -> bool:
    """Parameters the app offers as widgets (objects such as arrays stay at their defaults)."""
    if spec.kind in ("int", "float", "bool", "choice"):
        return True
    return spec.kind == "str" and isinstance(spec.default, str)


# ---------------------------------------------------------------------------------- cached analyses
@st.cache_data(max_entries=8, show_spinner=False)
def agreement_stats(fp: str, _responses: Responses, max_workers: int = 30) -> dict[str, Any]:
    """Fleiss' κ, Krippendorff's α, pairwise Cohen's κ and overlap among the most active annotators."""
    from fusion_core.diagnostics.agreement import agreement_summary, cohen_kappa_matrix, most_active

    summary = agreement_summary(_responses, max_workers=max_workers)
    kappa, shared = cohen_kappa_matrix(_responses, workers=most_active(_responses, max_workers))
    return {"summary": summary, "kappa": kappa, "shared": shared}


def bootstrap_for(ds: Dataset, method: str, result: FitResult, n_bootstrap: int, level: float, ss=None):
    """Bootstrap intervals for an active result, cached per (fit, n, level)."""
    from fusion_core.diagnostics.bootstrap import bootstrap_intervals

    ss = state() if ss is None else ss
    key = (ss.get("fc_active", {}).get(method), n_bootstrap, level)
    cache = ss.setdefault("fc_bootstrap", {})
    if key not in cache:
        params = {k: v for k, v in ss.get("fc_params", {}).get(method, {}).items()}
        fit_kwargs = {"context": ds.context} if "context" in info(method).needs() else None
        cache[key] = bootstrap_intervals(
            ds.responses, method, params, n_bootstrap=n_bootstrap, level=level, fit_kwargs=fit_kwargs
        )
    return cache[key]


def cached_bootstrap(method: str, n_bootstrap: int, level: float, ss=None):
    ss = state() if ss is None else ss
    return ss.get("fc_bootstrap", {}).get((ss.get("fc_active", {}).get(method), n_bootstrap, level))


def cartel_detector() -> Callable[..., Any] | None:
    """``detect_cartels`` when the spectral diagnostics are installed, else None."""
    try:
        from fusion_core.diagnostics.cartels import detect_cartels
    except ImportError:
        return None
    return detect_cartels


def cartels_for(ds: Dataset, n_bootstrap: int, alpha: float, ss=None, one_vs_rest: Any = None):
    """Cartel report for the data (binary), or for ``one_vs_rest`` against the other labels (multi-class)."""
    ss = state() if ss is None else ss
    detect = cartel_detector()
    if detect is None:
        raise UserInputError("cartel detection is not available in this installation.")
    key = (ds.fingerprint, n_bootstrap, alpha, one_vs_rest)
    cache = ss.setdefault("fc_cartels", {})
    if key not in cache:
        resp = ds.responses if one_vs_rest is None else ds.responses.one_vs_rest(one_vs_rest)
        cache[key] = detect(resp, n_bootstrap=n_bootstrap, alpha=alpha, random_state=0)
    return cache[key]


def cached_cartels(ds: Dataset, n_bootstrap: int, alpha: float, ss=None, one_vs_rest: Any = None):
    ss = state() if ss is None else ss
    return ss.get("fc_cartels", {}).get((ds.fingerprint, n_bootstrap, alpha, one_vs_rest))


# ------------------------------------------------------------------------------------------- tables
def annotator_table(ds: Dataset, result: FitResult, intervals: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per annotator: skill, responses, any per-annotator extras, roles (demo), intervals."""
    workers = pd.Index(result.workers, name="annotator")
    codes = ds.responses.workers.get_indexer(result.workers)
    n_resp = np.where(codes >= 0, ds.responses.responses_per_worker[np.maximum(codes, 0)], 0)
    df = pd.DataFrame({"skill": np.asarray(result.extras["skills"], dtype=float), "responses": n_resp}, index=workers)
    for key, val in result.extras.items():
        if key == "skills":
            continue
        arr = np.asarray(val) if isinstance(val, (np.ndarray, list, pd.Series)) else None
        if arr is not None and arr.ndim == 1 and len(arr) == len(workers) and np.issubdtype(arr.dtype, np.number):
            df[key] = arr
    if intervals is not None:
        df["skill low"] = intervals["low"].reindex(result.workers).to_numpy()
        df["skill high"] = intervals["high"].reindex(result.workers).to_numpy()
    if ds.roles is not None:
        df["simulated role"] = ds.roles.reindex(result.workers).to_numpy()
    df.index = df.index.astype(str)
    return df.sort_values("skill", ascending=False)


def item_table(ds: Dataset, result: FitResult) -> pd.DataFrame:
    """One row per item: label, confidence, entropy, responses, the posterior of every class, gold."""
    post = result.posterior
    conf = post.max(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        ent = -np.nansum(np.where(post > 0, post * np.log(post), 0.0), axis=1)
    codes = ds.responses.items.get_indexer(result.items)
    n_resp = np.where(codes >= 0, ds.responses.responses_per_item[np.maximum(codes, 0)], 0)
    df = pd.DataFrame(
        {
            "label": result.classes.take(post.argmax(axis=1)).astype(str),
            "confidence": conf,
            "entropy": ent,
            "responses": n_resp,
        },
        index=pd.Index(result.items.astype(str), name="task"),
    )
    for k, c in enumerate(result.classes):
        df[f"P({c})"] = post[:, k]
    if ds.gold is not None:
        g = pd.Series(ds.gold.astype(str).to_numpy(), index=ds.gold.index.astype(str))
        df["gold"] = g.reindex(df.index).fillna("")
    return df


def filter_items(df: pd.DataFrame, *, labels: list[str] | None, search: str, sort: str) -> pd.DataFrame:
    """Items filtered by predicted label and id substring, sorted by confidence/entropy/id."""
    out = df
    if labels:
        out = out[out["label"].isin(labels)]
    if search:
        out = out[out.index.str.contains(search, case=False, regex=False)]
    orders = {
        "lowest confidence first": ("confidence", True),
        "highest confidence first": ("confidence", False),
        "highest entropy first": ("entropy", False),
        "task id": (None, True),
    }
    col, asc = orders.get(sort, ("confidence", True))
    return out.sort_index() if col is None else out.sort_values(col, ascending=asc, kind="stable")


def csv_bytes(df: pd.DataFrame) -> bytes:
    return df.to_csv().encode("utf-8")


def with_gold(ds: Dataset, gold: pd.Series | None) -> Dataset:
    return replace(ds, gold=gold, gold_fingerprint=gold_fingerprint(gold))


def with_graph(ds: Dataset, graph: Any, name: str | None) -> Dataset:
    new = make_dataset(
        ds.responses,
        name=ds.name,
        source=ds.source,
        gold=ds.gold,
        graph=graph,
        graph_name=name,
        context=ds.context,
        roles=ds.roles,
        description=ds.description,
    )
    new.messages = list(ds.messages)
    return new


# ------------------------------------------------------------------------------------------- page shell
PAGES = (
    ("app.py", "Home", ":material/home:"),
    ("pages/1_Data.py", "1 · Data", ":material/upload:"),
    ("pages/2_Fit.py", "2 · Fit", ":material/play_arrow:"),
    ("pages/3_Annotators.py", "3 · Annotators", ":material/group:"),
    ("pages/4_Cartels.py", "4 · Cartels", ":material/hub:"),
    ("pages/5_Items.py", "5 · Items", ":material/list:"),
    ("pages/6_Compare.py", "6 · Compare", ":material/compare:"),
)
"""Sidebar navigation (path, label, icon).  Streamlit's automatic page list is hidden in
``.streamlit/config.toml`` because it would label the home page by its file name ("app")."""


def page_setup(title: str) -> Dataset | None:
    """Common start of every page: wide layout, session initialised, current data in the sidebar."""
    try:
        st.set_page_config(page_title=f"{title} · fusion_core", layout="wide")
    except st.errors.StreamlitAPIException:  # already set in this run
        pass
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


def results_page(title: str, heading: str | None = None):
    """Shell of a page that shows fitted results: returns (dataset, results by method), or stops the
    script with a pointer to the Data or Fit page when either is missing."""
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
