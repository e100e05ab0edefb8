"""Item graphs for networked aggregation (spec ``sequential-networked.md`` §2.4): reading and validation.

``read_graph`` reads an edge list (CSV/TSV with ``source, target[, weight]``), GraphML or GML and
returns the edges as a DataFrame (duplicates kept so validation can report them).
``graph_for_responses`` checks the edges against the items of a :class:`Responses` and builds the
symmetric sparse adjacency every MRF method uses.  Undirected: (a, b) and (b, a) are the same edge.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np
import pandas as pd
import scipy.sparse as sp

from fusion_core.data.loading import _read_bytes, read_table
from fusion_core.data.responses import Responses
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
    cols = {c.lower(): c for c in df.columns}
    src = next((cols[c] for c in SOURCE_NAMES if c in cols), None)
    dst = next((cols[c] for c in TARGET_NAMES if c in cols), None)
    if src is None or dst is None:
        if df.shape[1] in (2, 3) and all(str(c).lower() not in ("task", "worker", "label") for c in df.columns):
            src, dst = df.columns[0], df.columns[1]
        else:
            raise UserInputError(
                f"{label} needs 'source' and 'target' columns (optional 'weight'); it has {[str(c) for c in df.columns]}."
            )
    out = pd.DataFrame({"source": df[src].to_numpy(), "target": df[dst].to_numpy()})
    wcol = cols.get("weight")
    if wcol is not None:
        w = pd.to_numeric(df[wcol], errors="coerce")
        if w.isna().any() or not np.all(np.isfinite(w)) or (w <= 0).any():
            raise UserInputError(f"{label}: the weight column must hold positive numbers.")
        out["weight"] = w.to_numpy(dtype=float)
    else:
        out["weight"] = 1.0
    if out[["source", "target"]].isna().any().any():
        raise UserInputError(f"{label}: some edges have an empty source or target.")
    return out


def edges_from_networkx(graph: nx.Graph) -> pd.DataFrame:
    """Edges of a networkx (multi)graph as ``source, target, weight`` (``weight`` attribute, default 1)."""
    rows = [(u, v, d.get("weight", 1.0)) for u, v, d in graph.edges(data=True)]
    df = pd.DataFrame(rows, columns=["source", "target", "weight"])
    df["weight"] = pd.to_numeric(df["weight"], errors="coerce")
    if df["weight"].isna().any() or (df["weight"] <= 0).any():
        raise UserInputError("graph edge weights must be positive numbers.")
    df.attrs["nodes"] = list(graph.nodes())
    return df


def read_graph(source: Any, *, name: str | None = None, format: str | None = None) -> pd.DataFrame:
    """Read an item graph from a path, bytes or file-like (with ``.name``).

    Formats: edge-list CSV/TSV (``source,target[,weight]``), GraphML, GML (via networkx).  Returns a
    DataFrame ``source, target, weight``; validate it against the data with :func:`graph_for_responses`.
    """
    if isinstance(source, (str, Path)) and not Path(source).is_file():
        raise UserInputError(f"graph file not found: {source}")
    guess = name or (str(source) if isinstance(source, (str, Path)) else str(getattr(source, "name", "") or ""))
    fmt = (format or _EXT.get(Path(guess).suffix.lower(), "")).lower()
    if not fmt:
        data, _ = _read_bytes(source, None)
        head = data[:512].lstrip().lower()
        fmt = (
            "graphml"
            if head.startswith(b"<?xml") or b"<graphml" in head
            else ("gml" if head.startswith(b"graph") else "csv")
        )
        source = data
    if fmt not in GRAPH_FORMATS:
        raise UserInputError(f"unknown graph format {fmt!r}; use one of {', '.join(GRAPH_FORMATS)}.")
    label = guess or "the graph file"
    if fmt in ("csv", "tsv"):
        df = read_table(source, name=name or guess or None, format=fmt)
        if len(df) == 0:
            raise UserInputError(f"{label} has a header but no edges.")
        return _edge_columns(df, label)
    data, _ = _read_bytes(source, None)
    try:
        if fmt == "graphml":
            g = nx.read_graphml(io.BytesIO(data), force_multigraph=True)
        else:
            try:  # node names from the 'label' attribute (as networkx writes them), else the numeric 'id'
                g = nx.read_gml(io.BytesIO(data), label="label")
            except nx.NetworkXError:
                g = nx.read_gml(io.BytesIO(data), label="id")
    except Exception as exc:  # networkx parser errors, one line for the user
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UserInputError(f"could not read {label} as {fmt.upper()}: {msg}") from None
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
                    f"the directed graph has {len(dup)} edge(s) in both directions, e.g. {dup[0]}; the item graph is "
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
        examples, count = uniq_bad[:5], len(uniq_bad)
        raise UserInputError(
            f"{count} graph node(s) are not tasks in the responses (for example {examples}); the graph's node ids "
            "must be the task ids of the answers file."
        )
    if len(edges) == 0:
        return empty_graph(n)
    loops = src == dst
    if loops.any():
        ex = edges["source"].to_numpy()[loops][0]
        raise UserInputError(f"the graph has {int(loops.sum())} self-loop(s), e.g. on node {ex!r}; remove them.")
    lo, hi = np.minimum(src, dst), np.maximum(src, dst)
    key = lo * n + hi
    _uniq, first, counts = np.unique(key, return_index=True, return_counts=True)
    if (counts > 1).any():
        d = int(np.flatnonzero(counts > 1)[0])
        i = first[d]
        raise UserInputError(
            f"the graph lists {int((counts > 1).sum())} edge(s) more than once (in either direction), e.g. "
            f"{edges['source'].iloc[i]!r} – {edges['target'].iloc[i]!r}; keep each undirected edge once."
        )
    w = edges["weight"].to_numpy(dtype=float)
    adj = sp.csr_matrix((np.r_[w, w], (np.r_[lo, hi], np.r_[hi, lo])), shape=(n, n))
    return ItemGraph(n, lo, hi, w, adj)
