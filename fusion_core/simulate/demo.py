"""Built-in SIMULATED demo datasets (the app starts on one so no page is ever empty; tests use them too).

* ``crowd`` — binary crowd with honest annotators, a colluding cartel (spectral spec §6.7 simulator),
  spammers who answer at random and adversaries who mostly give the wrong label;
* ``sequence`` — token sequences whose labels follow a sticky Markov chain (HMM-Crowd setting);
* ``graph`` — items on a stochastic block model graph whose communities are the true classes.

Every demo carries its known truth (shown as "gold" for evaluation only, never used in fitting unless the
user asks) and the annotators' simulated roles; :func:`demo_dataset` returns it as a :class:`Dataset`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import networkx as nx
import numpy as np
import pandas as pd

from fusion_core.data.dataset import Dataset, make_dataset
from fusion_core.data.graph import graph_for_responses
from fusion_core.data.responses import Responses
from fusion_core.errors import UserInputError
from fusion_core.simulate.graph import sbm
from fusion_core.simulate.sequential import hmm_chain
from fusion_core.simulate.spectral import cartel

DEFAULT_DEMO = "crowd"
DEMOS = {
    "crowd": "Crowd with a cartel, spammers and adversaries (binary, simulated)",
    "sequence": "Sequence labelling task (HMM chain, simulated)",
    "graph": "Items on a graph (stochastic block model, simulated)",
}


@dataclass
class DemoData:
    """A simulated dataset: responses (long format), known truth, optional graph, annotator roles."""

    key: str
    title: str
    description: str
    responses: pd.DataFrame
    truth: pd.Series
    graph: nx.Graph | None = None
    roles: pd.Series | None = None
    columns: dict[str, str] = field(default_factory=dict)


N_SPAMMERS = 3
N_ADVERSARIES = 2
ADVERSARY_ACCURACY = 0.25
"""Demo crowd roles besides the cartel: spammers answer uniformly at random; adversaries give the true label with
probability :data:`ADVERSARY_ACCURACY` (worse than chance)."""


def crowd_demo(seed: int = 0) -> DemoData:
    """24 annotators on 400 binary items: ~20% form a cartel that follows its own target, 3 are spammers answering
    at random, 2 are adversaries who give the wrong label 75% of the time."""
    labels = ("negative", "positive")

    sim = cartel(
        m=24, n=400, r=0.2, pi_c=0.5, pi_range=(0.65, 0.9), xi_range=(0.7, 0.9), observed=0.6, labels=labels, seed=seed
    )
    df = sim.responses.copy()
    roles = pd.Series(sim.group, index=sim.workers, name="role").astype(str)
    honest = roles.index[roles == "honest"]
    rng = np.random.default_rng(seed + 1)
    picked = rng.choice(honest, size=N_SPAMMERS + N_ADVERSARIES, replace=False)
    spammers, adversaries = pd.Index(picked[:N_SPAMMERS]), pd.Index(picked[N_SPAMMERS:])
    is_spam = df["worker"].isin(spammers).to_numpy()
    df.loc[is_spam, "label"] = np.asarray(labels, dtype=object)[rng.integers(0, 2, size=int(is_spam.sum()))]
    is_adv = df["worker"].isin(adversaries).to_numpy()
    truth = sim.truth.reindex(df.loc[is_adv, "task"]).to_numpy()
    right = rng.random(int(is_adv.sum())) < ADVERSARY_ACCURACY
    flipped = np.where(truth == labels[0], labels[1], labels[0])
    df.loc[is_adv, "label"] = np.where(right, truth, flipped)
    roles[spammers] = "spammer"
    roles[adversaries] = "adversary"
    n_cartel = int(roles.str.startswith("cartel").sum())
    return DemoData(
        key="crowd",
        title=DEMOS["crowd"],
        description=(
            f"{len(df):,} simulated responses by {len(roles)} annotators on {len(sim.truth)} items. "
            f"{n_cartel} annotators form a cartel that copies a shared target labelling instead of the truth; "
            f"{N_SPAMMERS} annotators are spammers answering at random; {N_ADVERSARIES} are adversaries who give "
            f"the wrong label {100 * (1 - ADVERSARY_ACCURACY):.0f}% of the time."
        ),
        responses=df,
        truth=sim.truth,
        roles=roles,
    )


def sequence_demo(seed: int = 0) -> DemoData:
    """30 sequences of 25 tokens with sticky Markov labels (O / PER / LOC), 8 annotators (5 good)."""
    tags = np.array(["O", "PER", "LOC"], dtype=object)

    sim = hmm_chain(
        n_sequences=30,
        length=25,
        n_classes=3,
        n_workers=8,
        n_good=5,
        accuracy=(0.6, 0.9),
        stickiness=0.8,
        p_observe=0.7,
        seed=seed,
    )
    df = sim.responses.copy()
    df["label"] = tags[df["label"].to_numpy()]
    df["sequence"] = "seq" + df["sequence"].astype(str)
    roles = pd.Series(["good"] * 5 + ["noisy"] * 3, index=sim.workers, name="role")
    return DemoData(
        key="sequence",
        title=DEMOS["sequence"],
        description=(
            f"{len(df):,} simulated token labels: 30 sequences × 25 tokens, labels follow a sticky Markov chain; "
            "5 good annotators and 3 noisy ones."
        ),
        responses=df,
        truth=pd.Series(tags[sim.truth.to_numpy()], index=sim.truth.index, name="truth"),
        roles=roles,
        columns={"sequence": "sequence", "position": "position"},
    )


def graph_demo(seed: int = 0, n_items: int = 300, n_workers: int = 10) -> DemoData:
    """Stochastic block model (networked-crowd simulator, spec §3.4): 3 communities = 3 true classes,
    average degree 6, homophily 0.9; 10 annotators (6 good, 4 random), each labels ~30% of the items."""
    sim = sbm(
        n_items=n_items,
        n_classes=3,
        avg_degree=6.0,
        homophily=0.9,
        n_workers=n_workers,
        n_good=6,
        accuracy=(0.4, 0.6),
        p_observe=0.3,
        seed=seed,
    )
    classes = np.array(["A", "B", "C"], dtype=object)
    df = sim.responses.copy()
    df["label"] = classes[df["label"].to_numpy()]
    edges = sim.edges
    graph = nx.Graph()
    graph.add_nodes_from(sim.truth.index)
    graph.add_edges_from(edges[["source", "target"]].itertuples(index=False, name=None))
    roles = pd.Series(["good"] * 6 + ["random"] * (n_workers - 6), index=sim.workers, name="role")
    return DemoData(
        key="graph",
        title=DEMOS["graph"],
        description=(
            f"{len(df):,} simulated responses on {n_items} items that are nodes of a graph with "
            f"{graph.number_of_edges():,} edges; linked items tend to share their class "
            f"({100 * sim.homophily_realised:.0f}% of edges join items of the same class)."
        ),
        responses=df,
        truth=pd.Series(classes[sim.truth.to_numpy()], index=sim.truth.index, name="truth"),
        graph=graph,
        roles=roles,
    )


def load_demo(key: str, seed: int = 0) -> DemoData:
    """One of :data:`DEMOS` by key."""
    builders = {"crowd": crowd_demo, "sequence": sequence_demo, "graph": graph_demo}
    if key not in builders:
        raise UserInputError(f"unknown demo '{key}'; choose one of {', '.join(builders)}.")
    return builders[key](seed=seed)


def demo_dataset(key: str = DEFAULT_DEMO) -> Dataset:
    """A demo as a :class:`Dataset`; its truth becomes evaluation-only gold, its roles the simulated roles."""
    demo = load_demo(key)
    cols = demo.columns
    resp = Responses.from_frame(demo.responses, sequence=cols.get("sequence"), position=cols.get("position"))
    return make_dataset(
        resp,
        name=f"demo: {demo.title}",
        source="demo",
        gold=demo.truth,
        graph=None if demo.graph is None else graph_for_responses(demo.graph, resp),
        graph_name="simulated SBM graph" if demo.graph is not None else None,
        graph_view=demo.graph,
        roles=demo.roles,
        description=demo.description,
    )
