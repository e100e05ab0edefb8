"""Item graphs for networked aggregation (spec ``sequential-networked.md`` §2.4): reading and validation.

``read_graph`` reads an edge list (CSV/TSV with ``source, target[, weight]``), GraphML or GML and
returns the edges as a DataFrame (duplicates kept so validation can report them).
``graph_for_responses`` checks the edges against the items of a :class:`Responses` and builds the
symmetric sparse adjacency every MRF method uses.  Undirected: (a, b) and (b, a) are the same edge.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import networkx as nx
import numpy as np
import pandas as pd
import scipy.sparse as sp

from fusion_core.data.formats.dispatch import read_encoded
from fusion_core.data.readers import open_input, read_options
from fusion_core.data.responses import Responses
from fusion_core.data.text import parse_numbers, plain_values, show_value, show_values
from fusion_core.errors import UserInputError

GRAPH_FORMATS = ("csv", "tsv", "graphml", "gml")
_EXT = {
    ".csv": "csv",
    ".txt": "csv",
    ".tsv": "tsv",
    ".tab": "tsv",
    ".graphml": "graphml",
    ".xml": "graphml",
    ".gml": "gml",
}
SOURCE_NAMES = ("source", "src", "from", "u", "node1")
TARGET_NAMES = ("target", "dst", "to", "v", "node2")


def _edge_columns(df: pd.DataFrame, label: str) -> pd.DataFrame:
    cols = {str(c).lower(): c for c in df.columns}
    src = next((cols[c] for c in SOURCE_NAMES if c in cols), None)
    dst = next((cols[c] for c in TARGET_NAMES if c in cols), None)
    if src is None or dst is None:
        if df.shape[1] in (2, 3) and all(str(c).lower() not in ("task", "worker", "label") for c in df.columns):
            src, dst = df.columns[0], df.columns[1]
        else:
            raise UserInputError(
                f"{label} needs 'source' and 'target' columns (optional 'weight'); it has {[str(c) for c in df.columns]}."
            )
    out = pd.DataFrame({"source": plain_values(df[src]), "target": plain_values(df[dst])})
    if out[["source", "target"]].isna().any().any():
        row = int(out[["source", "target"]].isna().any(axis=1).to_numpy().argmax()) + 1
        raise UserInputError(f"{label}: edge {row:,} has an empty source or target; give both ends of every edge.")
    wcol = cols.get("weight")
    if wcol is not None:
        w = parse_numbers(plain_values(df[wcol]), what=f"{label}: the weight column")
        if (w <= 0).any():
            row = int(np.argmax(w <= 0)) + 1
            raise UserInputError(
                f"{label}: the weight column must hold positive numbers; edge {row:,} has {w[row - 1]:g}."
            )
        out["weight"] = w
    else:
        out["weight"] = 1.0
    return out


def edges_from_networkx(graph: nx.Graph) -> pd.DataFrame:
    """Edges of a networkx (multi)graph as ``source, target, weight`` (``weight`` attribute, default 1)."""
    rows = [(u, v, d.get("weight", 1.0)) for u, v, d in graph.edges(data=True)]
    blank = next((i for i, (u, v, _) in enumerate(rows) if u is None or v is None or u == "" or v == ""), None)
    if blank is not None:
        raise UserInputError(f"graph edge {blank + 1:,} has no source or no target node; give both ends of every edge.")
    df = pd.DataFrame(rows, columns=["source", "target", "weight"], dtype=object)
    weights = pd.to_numeric(df["weight"], errors="coerce").to_numpy(dtype=float)
    if len(weights) and (~np.isfinite(weights) | (weights <= 0)).any():
        bad = df["weight"].iloc[int(np.argmax(~np.isfinite(weights) | (weights <= 0)))]
        raise UserInputError(f"graph edge weights must be positive numbers; found {show_value(bad)}.")
    df["weight"] = weights
    df.attrs["nodes"] = list(graph.nodes())
    return df


def _parse_failure(exc: Exception, label: str, fmt: str) -> UserInputError:
    """One sentence for a GraphML/GML file networkx cannot read (never the parser's internal text)."""
    kind = {"graphml": "GraphML", "gml": "GML"}[fmt]
    if isinstance(exc, ElementTree.ParseError):
        line, column = getattr(exc, "position", (0, 0))
        return UserInputError(
            f"{label} is not well-formed XML (line {line:,}, column {column:,}); check that the file is complete "
            f"{kind}."
        )
    if isinstance(exc, KeyError):
        key = exc.args[0] if exc.args else ""
        return UserInputError(
            f"{label} refers to an attribute key {show_value(key)} that no <key> element declares; it is not valid "
            f"{kind} (write it with networkx, Gephi or yEd)."
        )
    text = str(exc).strip()
    if isinstance(exc, nx.NetworkXError) and text and "\n" not in text:
        return UserInputError(f"could not read {label} as {kind}: {text.rstrip('.')}.")
    return UserInputError(
        f"{label} is not a valid {kind} file: nodes and edges could not be read (write it with networkx, Gephi or yEd, "
        "or give an edge list CSV with source,target columns)."
    )


def read_graph(
    source: Any,
    *,
    name: str | None = None,
    format: str | None = None,
    max_bytes: int | None = None,
    na_values: Sequence[str] | str | None = None,
    strip_whitespace: bool = False,
) -> pd.DataFrame:
    """Read an item graph from a path, bytes or file-like (with ``.name``).

    Formats: edge-list CSV/TSV (``source,target[,weight]``; node ids as text, like task ids), GraphML, GML (via
    networkx).  Returns a DataFrame ``source, target, weight``; validate it against the data with
    :func:`graph_for_responses`.
    """
    opts = read_options(na_values, strip_whitespace, max_bytes)
    inp = open_input(source, name, opts.max_bytes)
    fmt = (format or _EXT.get(Path(inp.name).suffix.lower(), "")).lower()
    if not fmt:
        head = inp.head[:512].lstrip().lower()
        xml = head.startswith(b"<?xml") or b"<graphml" in head
        fmt = "graphml" if xml else ("gml" if head.startswith(b"graph") else "csv")
    if fmt not in GRAPH_FORMATS:
        raise UserInputError(f"unknown graph format {show_value(fmt)}; use one of {', '.join(GRAPH_FORMATS)}.")
    label = inp.label if inp.name else "the graph file"
    if fmt in ("csv", "tsv"):
        table = read_encoded(inp.read_all() if inp.path is None else inp.path, name=label, format=fmt, options=opts)
        if table.n_rows == 0:
            raise UserInputError(f"{label} has a header but no edges.")
        return _edge_columns(table.frame(), label)
    data = inp.read_all()
    try:
        if fmt == "graphml":
            g = nx.read_graphml(io.BytesIO(data), force_multigraph=True)
        else:
            try:  # node names from the 'label' attribute (as networkx writes them), else the numeric 'id'
                g = nx.read_gml(io.BytesIO(data), label="label")
            except nx.NetworkXError:
                g = nx.read_gml(io.BytesIO(data), label="id")
    except Exception as exc:  # networkx and XML parser errors, one sentence for the user
        raise _parse_failure(exc, label, fmt) from None
    if g.number_of_edges() == 0:
        raise UserInputError(f"{label} has no edges.")
    return edges_from_networkx(g)


@dataclass(frozen=True)
class ItemGraph:
    """A validated undirected item graph in the item codes of a :class:`Responses`.

    ``source``/``target``/``weight``: one row per undirected edge (source < target);
    ``adjacency``: symmetric CSR ``n_items × n_items`` of weights; ``degree``: neighbours per item.
    """

    n_items: int
    source: np.ndarray
    target: np.ndarray
    weight: np.ndarray
    adjacency: sp.csr_matrix

    @property
    def n_edges(self) -> int:
        return len(self.source)

    @property
    def degree(self) -> np.ndarray:
        return np.diff(self.adjacency.indptr)

    @property
    def average_degree(self) -> float:
        return 2.0 * self.n_edges / max(self.n_items, 1)


def empty_graph(n_items: int) -> ItemGraph:
    z = np.zeros(0, dtype=np.int64)
    return ItemGraph(n_items, z, z, np.zeros(0), sp.csr_matrix((n_items, n_items)))


def graph_for_responses(graph: Any, responses: Responses) -> ItemGraph:
    """Validate an item graph (networkx graph or DataFrame with ``source, target[, weight]``) against the items.

    Raises :class:`UserInputError` for nodes that are not tasks in the data, self-loops and duplicate edges
    (an undirected edge listed twice, in either direction).  Items without edges are isolated nodes.
    """
    if isinstance(graph, ItemGraph):
        if graph.n_items != responses.n_items:
            raise UserInputError("the item graph was built for different data; rebuild it for these responses.")
        return graph
    if isinstance(graph, nx.Graph):
        if graph.is_directed():
            dup = [(u, v) for u, v in graph.edges() if u != v and graph.has_edge(v, u) and str(u) < str(v)]
            if dup:
                raise UserInputError(
                    f"the directed graph has {len(dup)} edge(s) in both directions, e.g. {show_value(dup[0][0])} → {show_value(dup[0][1])}; the item graph is "
                    "undirected, so keep one direction."
                )
        edges = edges_from_networkx(graph)
        nodes = list(graph.nodes())
    elif isinstance(graph, pd.DataFrame):
        edges = _edge_columns(graph, "the edge table")
        nodes = []
    else:
        raise UserInputError(
            f"graph must be a networkx graph or a table with source/target columns, got {type(graph).__name__}."
        )
    n = responses.n_items
    src = responses.item_codes(edges["source"].to_numpy(), what="graph nodes", strict=False)
    dst = responses.item_codes(edges["target"].to_numpy(), what="graph nodes", strict=False)
    bad = np.concatenate([edges["source"].to_numpy()[src < 0], edges["target"].to_numpy()[dst < 0]]).astype(object)
    if nodes:
        node_arr = pd.Index(nodes)
        bad = np.concatenate(
            [
                bad,
                np.asarray(
                    node_arr[responses.item_codes(node_arr, what="graph nodes", strict=False) < 0], dtype=object
                ),
            ]
        )
    if len(bad):
        uniq_bad = list(pd.unique(pd.Series(bad, dtype=object)))
        raise UserInputError(
            f"{len(uniq_bad)} graph node(s) are not tasks in the responses ({show_values(uniq_bad)}); the graph's "
            "node ids must be the task ids of the answers file."
        )
    if len(edges) == 0:
        return empty_graph(n)
    loops = src == dst
    if loops.any():
        ex = edges["source"].to_numpy()[loops][0]
        raise UserInputError(
            f"the graph has {int(loops.sum())} self-loop(s), e.g. on node {show_value(ex)}; remove them."
        )
    lo, hi = np.minimum(src, dst), np.maximum(src, dst)
    key = lo * n + hi
    _, first, counts = np.unique(key, return_index=True, return_counts=True)
    if (counts > 1).any():
        d = int(np.flatnonzero(counts > 1)[0])
        i = first[d]
        raise UserInputError(
            f"the graph lists {int((counts > 1).sum())} edge(s) more than once (in either direction), e.g. "
            f"{show_value(edges['source'].iloc[i])} – {show_value(edges['target'].iloc[i])}; keep each undirected edge once."
        )
    w = edges["weight"].to_numpy(dtype=float)
    adj = sp.csr_matrix((np.r_[w, w], (np.r_[lo, hi], np.r_[hi, lo])), shape=(n, n))
    return ItemGraph(n, lo, hi, w, adj)
