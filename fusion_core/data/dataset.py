"""A dataset as a user works on it: coded responses plus optional gold labels, item graph, context values and
(for simulated demos) the annotators' roles, identified by a content fingerprint.

The fingerprint covers everything a fit depends on (responses, graph, context); gold labels have their own
fingerprint because they only enter a fit when the user asks for it.  Caches (the app's fit cache, for example)
key on these fingerprints.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, replace
from typing import Any

import networkx as nx
import numpy as np
import pandas as pd

from fusion_core.data.graph import ItemGraph
from fusion_core.data.pairwise import PairwiseResponses
from fusion_core.data.responses import Responses
from fusion_core.data.spans import SpanTable


@dataclass(frozen=True, eq=False)
class Dataset:
    """Responses with their optional side inputs.  ``source`` is ``"demo"`` or ``"upload"``; ``graph`` is the
    validated :class:`ItemGraph` the graph methods take and ``graph_view`` the same graph as a networkx graph with
    task ids (for drawing); ``roles`` holds simulated annotator roles (demos only); ``messages`` the validation
    report in plain sentences."""

    name: str
    source: str
    responses: Responses
    fingerprint: str
    gold: pd.Series | None = None
    gold_fingerprint: str | None = None
    graph: ItemGraph | None = None
    graph_name: str | None = None
    context: pd.Series | None = None
    roles: pd.Series | None = None
    description: str = ""
    messages: tuple[str, ...] = ()
    graph_view: nx.Graph | None = field(default=None, compare=False)
    spans: SpanTable | None = field(default=None, compare=False)
    """The spans of an NER-style export (for span agreement); the responses are their token sequences."""
    export_format: str | None = None
    """The labelling tool's export format the responses came from (results go back with its ids)."""
    export_control: tuple[str, str, str] | None = None
    """Label Studio: (from_name, to_name, type) of the question read (for predictions)."""
    pairwise: PairwiseResponses | None = field(default=None, compare=False)
    """Pairwise judgements (A vs B) the responses are the choices of (:func:`pairwise_dataset`); the audit then
    adds the pairwise section (ranking, judges' biases, docs/JUDGES.md)."""

    @property
    def inputs(self) -> tuple[str, ...]:
        """The input kinds this data offers (``plain`` plus ``sequence``, ``graph``, ``context``)."""
        have = ["plain"]
        if self.responses.has_sequences:
            have.append("sequence")
        if self.graph is not None:
            have.append("graph")
        if self.context is not None:
            have.append("context")
        return tuple(have)

    def fit_inputs(self, needs: tuple[str, ...], *, use_gold: bool = False) -> dict[str, Any]:
        """Keyword arguments for ``fit`` of a method that needs ``needs`` (graph, context) and, when asked,
        the gold labels as ``true_labels``."""
        kwargs: dict[str, Any] = {}
        if "graph" in needs:
            kwargs["graph"] = self.graph
        if "context" in needs:
            kwargs["context"] = self.context
        if use_gold and self.gold is not None:
            kwargs["true_labels"] = self.gold
        return kwargs

    def with_gold(self, gold: pd.Series | None) -> Dataset:
        """The same data with new gold labels (the data fingerprint, hence cached fits, stay valid)."""
        return replace(self, gold=gold, gold_fingerprint=gold_fingerprint(gold))

    def with_graph(self, graph: ItemGraph | None, name: str | None) -> Dataset:
        """The same responses with a new item graph (new fingerprint)."""
        return replace(
            self,
            graph=graph,
            graph_name=name,
            fingerprint=fingerprint(self.responses, graph, self.context, self.pairwise),
            graph_view=to_networkx(graph, self.responses),
        )

    def with_context(self, context: pd.Series | None) -> Dataset:
        """The same responses with new context values (new fingerprint)."""
        return replace(
            self, context=context, fingerprint=fingerprint(self.responses, self.graph, context, self.pairwise)
        )


def make_dataset(
    responses: Responses,
    *,
    name: str,
    source: str,
    gold: pd.Series | None = None,
    graph: ItemGraph | None = None,
    graph_name: str | None = None,
    graph_view: nx.Graph | None = None,
    context: pd.Series | None = None,
    roles: pd.Series | None = None,
    description: str = "",
    spans: SpanTable | None = None,
    export_format: str | None = None,
    export_control: tuple[str, str, str] | None = None,
    pairwise: PairwiseResponses | None = None,
) -> Dataset:
    """A :class:`Dataset` with its fingerprints and validation messages computed."""
    return Dataset(
        name=name,
        source=source,
        responses=responses,
        fingerprint=fingerprint(responses, graph, context, pairwise),
        gold=gold,
        gold_fingerprint=gold_fingerprint(gold),
        graph=graph,
        graph_name=graph_name,
        context=context,
        roles=roles,
        description=description,
        spans=spans,
        export_format=export_format,
        export_control=export_control,
        pairwise=pairwise,
        messages=tuple(responses.report.messages()),
        graph_view=graph_view if graph_view is not None else to_networkx(graph, responses),
    )


# ------------------------------------------------------------------------------------------ fingerprints
def _hash_update(h: Any, obj: Any) -> None:
    if obj is None:
        h.update(b"\0none")
    elif isinstance(obj, np.ndarray):
        h.update(str(obj.dtype).encode() + str(obj.shape).encode())
        h.update(np.ascontiguousarray(obj).tobytes())
    elif isinstance(obj, (pd.Index, pd.Series)):
        values = pd.Series(obj.astype(str) if obj.dtype == object else obj)
        h.update(pd.util.hash_pandas_object(values, index=isinstance(obj, pd.Series)).to_numpy().tobytes())
        h.update(str(obj.dtype).encode())
    else:
        h.update(repr(obj).encode())


def pairwise_dataset(data: PairwiseResponses, *, name: str, source: str = "upload") -> Dataset:
    """Pairwise judgements as a dataset the one-click audit takes with no extra step: the responses are the judges'
    choices (task "prompt: X vs Y", annotator the judge, label the preferred option or "tie",
    :meth:`~fusion_core.data.pairwise.PairwiseResponses.choices`) and ``pairwise`` keeps the judgements, order
    shown included, for the pairwise audit (docs/JUDGES.md)."""
    order = "with the order shown" if data.order_given else "no order column: option A taken as shown first"
    return make_dataset(
        Responses.from_frame(data.choices()),
        name=name,
        source=source,
        pairwise=data,
        description=f"{data.n:,} pairwise judgements by {data.n_judges} judges of {data.n_options} options on "
        f"{data.n_prompts:,} prompts ({order}).",
    )


def fingerprint(
    responses: Responses,
    graph: ItemGraph | None = None,
    context: pd.Series | None = None,
    pairwise: PairwiseResponses | None = None,
) -> str:
    """Content hash of the coded responses (ids, labels, sequences), the graph's edges, the context and the
    pairwise judgements' order shown and weights (their choices are the responses)."""
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
    if responses.time is not None:  # only then: fingerprints of data without times stay as they were
        _hash_update(h, responses.time.values)
    if graph is not None:
        for arr in (graph.source, graph.target, graph.weight):
            _hash_update(h, np.asarray(arr))
    if pairwise is not None:  # only then: other fingerprints stay as they were
        for values in (pairwise.a_first, pairwise.weight, pairwise.length_a, pairwise.length_b):
            _hash_update(h, values)
        for text in (pairwise.family_a, pairwise.family_b, pairwise.judge_family):
            _hash_update(h, None if text is None else pd.Index(text).astype(str))
    return h.hexdigest()


def gold_fingerprint(gold: pd.Series | None) -> str | None:
    """Content hash of gold labels (task ids and labels as text), or None without gold."""
    if gold is None:
        return None
    h = hashlib.blake2b(digest_size=12)
    _hash_update(h, gold.astype(str))
    _hash_update(h, pd.Index(gold.index.astype(str)))
    return h.hexdigest()


def to_networkx(graph: ItemGraph | None, responses: Responses) -> nx.Graph | None:
    """The item graph as a networkx graph whose nodes are task ids (for drawing), or None."""
    if graph is None:
        return None
    g = nx.Graph()
    g.add_nodes_from(responses.items)
    g.add_edges_from(
        zip(responses.items.take(np.asarray(graph.source)), responses.items.take(np.asarray(graph.target)))
    )
    return g
