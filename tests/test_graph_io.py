"""Item-graph reading and validation (spec sequential-networked §2.4; issue 4 point 3)."""

from __future__ import annotations

import io

import networkx as nx
import pandas as pd
import pytest

from fusion_core.data.graph import graph_for_responses, read_graph
from fusion_core.data.responses import Responses
from fusion_core.errors import UserInputError


@pytest.fixture
def resp():
    df = pd.DataFrame({"task": [1, 1, 2, 2, 3, 3, 4, 4], "worker": ["a", "b"] * 4, "label": [0, 0, 1, 1, 0, 1, 1, 1]})
    return Responses.from_frame(df)


def test_read_edge_list_csv_from_path_bytes_and_filelike(tmp_path, resp):
    text = "source,target,weight\n1,2,1.5\n2,3,2\n"
    p = tmp_path / "edges.csv"
    p.write_text(text)
    for src in (p, str(p), text.encode(), io.BytesIO(text.encode())):
        edges = read_graph(src) if not isinstance(src, bytes) else read_graph(src, name="edges.csv")
        assert list(edges.columns) == ["source", "target", "weight"]
        g = graph_for_responses(edges, resp)
        assert g.n_edges == 2
        assert g.adjacency[0, 1] == 1.5 and g.adjacency[1, 0] == 1.5  # symmetric
        assert list(g.degree) == [1, 2, 1, 0]  # item 4 is isolated


def test_read_graphml_and_gml(tmp_path, resp):
    g = nx.Graph()
    g.add_edge(1, 2, weight=2.0)
    g.add_edge(3, 4)
    nx.write_graphml(g, tmp_path / "g.graphml")
    nx.write_gml(g, tmp_path / "g.gml")
    for name in ("g.graphml", "g.gml"):
        edges = read_graph(tmp_path / name)
        item_graph = graph_for_responses(edges, resp)  # node ids "1" (text) match tasks 1
        assert item_graph.n_edges == 2
        assert sorted(item_graph.weight.tolist()) == [1.0, 2.0]
    fh = io.BytesIO((tmp_path / "g.graphml").read_bytes())
    fh.name = "upload.graphml"
    assert len(read_graph(fh)) == 2


def test_networkx_graph_is_accepted(resp):
    g = nx.path_graph([1, 2, 3, 4])
    assert graph_for_responses(g, resp).n_edges == 3


@pytest.mark.parametrize(
    "edges, match",
    [
        (pd.DataFrame({"source": [1, 9], "target": [2, 3]}), "not tasks"),
        (pd.DataFrame({"source": [1, 2], "target": [2, 2]}), "self-loop"),
        (pd.DataFrame({"source": [1, 2], "target": [2, 1]}), "more than once"),
        (pd.DataFrame({"source": [1, 1], "target": [2, 2]}), "more than once"),
        (pd.DataFrame({"a": [1], "b": [2], "c": [3], "d": [4]}), "source"),
        (pd.DataFrame({"source": [1], "target": [2], "weight": [-1.0]}), "positive"),
    ],
)
def test_validation_errors(resp, edges, match):
    with pytest.raises(UserInputError, match=match):
        graph_for_responses(edges, resp)


def test_unknown_node_in_networkx_graph_and_bad_files(tmp_path, resp):
    g = nx.Graph()
    g.add_edge(1, 2)
    g.add_node(99)
    with pytest.raises(UserInputError, match="not tasks"):
        graph_for_responses(g, resp)
    d = nx.DiGraph([(1, 2), (2, 1)])
    with pytest.raises(UserInputError, match="both directions"):
        graph_for_responses(d, resp)
    (tmp_path / "bad.graphml").write_text("<graphml><broken")
    with pytest.raises(UserInputError, match="not well-formed XML"):
        read_graph(tmp_path / "bad.graphml")
    with pytest.raises(UserInputError, match="not found"):
        read_graph(tmp_path / "missing.csv")
    (tmp_path / "empty.csv").write_text("source,target\n")
    with pytest.raises(UserInputError):
        read_graph(tmp_path / "empty.csv")
