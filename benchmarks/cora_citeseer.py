"""Networked aggregation on Cora and CiteSeer in the paper's setup (Traganitis & Giannakis §6.2.2, Table II).

Ten different scikit-learn classifiers are each trained on their own random 150 (Cora) / 100 (CiteSeer)
labelled nodes from the bag-of-words node features and predict every node; their predictions are the
"annotators".  Methods: MV, DS (EM from MV, the package's ``ds``), MM-DS (EM from moment matching, the
paper's "DS" baseline), ``mrf-em`` (Alg. 4) and ``mrf-mv`` (MV + Alg. 3) with the citation graph,
δ = M (the paper's value).  Reports macro-F1 (eq. 37) over 5 seeds.

scikit-learn is a benchmark-only dependency.  Run: ``python benchmarks/cora_citeseer.py``.
"""

from __future__ import annotations

import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import scipy.sparse as sp
from _common import make_parser

DATASETS = Path(__file__).resolve().parents[1].parent / "shared" / "datasets"
TRAIN_SIZE = {"cora": 150, "citeseer": 100}
METHODS = ("mv", "ds", "mm-ds", "mrf-em", "mrf-mv")


def classifiers(seed: int):
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.linear_model import LogisticRegression, RidgeClassifier, SGDClassifier
    from sklearn.naive_bayes import BernoulliNB, MultinomialNB
    from sklearn.neighbors import KNeighborsClassifier, NearestCentroid
    from sklearn.svm import LinearSVC
    from sklearn.tree import DecisionTreeClassifier

    return {
        "logreg": LogisticRegression(max_iter=500),
        "mnb": MultinomialNB(),
        "bnb": BernoulliNB(),
        "linsvc": LinearSVC(),
        "ridge": RidgeClassifier(),
        "knn": KNeighborsClassifier(n_neighbors=5, metric="cosine"),
        "tree": DecisionTreeClassifier(random_state=seed),
        "forest": RandomForestClassifier(n_estimators=50, random_state=seed, n_jobs=1),
        "sgd": SGDClassifier(random_state=seed),
        "centroid": NearestCentroid(),
    }


def load(name: str):
    d = DATASETS / name
    nodes = pd.read_csv(d / "nodes.csv")
    edges = pd.read_csv(d / "edges.csv")
    feats = pd.read_csv(d / "features_sparse.csv")
    n = int(nodes["node"].max()) + 1
    x = sp.csr_matrix(
        (feats["value"].to_numpy(float), (feats["node"].to_numpy(), feats["feature"].to_numpy())),
        shape=(n, int(feats["feature"].max()) + 1),
    )
    y = nodes.set_index("node")["label"].reindex(range(n)).fillna(-1).astype(int).to_numpy()
    return x, y, edges


def crowd(x, y, train_size: int, seed: int) -> pd.DataFrame:
    """Every classifier trained on its own random labelled subset, predicting all nodes (long format)."""
    rng = np.random.default_rng(seed)
    labelled = np.flatnonzero(y >= 0)
    rows = []
    for name, clf in classifiers(seed).items():
        train = rng.choice(labelled, size=train_size, replace=False)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            clf.fit(x[train], y[train])
            pred = clf.predict(x)
        rows.append(pd.DataFrame({"task": np.arange(len(y)), "worker": name, "label": pred}))
    return pd.concat(rows, ignore_index=True)


def run(name: str, seeds=range(5)) -> pd.DataFrame:
    from fusion_core.methods import create
    from fusion_core.metrics import macro_f1

    x, y, edges = load(name)
    truth = pd.Series(y, index=np.arange(len(y)))
    truth = truth[truth >= 0]
    records = []
    for seed in seeds:
        answers = crowd(x, y, TRAIN_SIZE[name], seed)
        per_worker = answers.groupby("worker").apply(
            lambda g: macro_f1(pd.Series(g["label"].to_numpy(), index=g["task"].to_numpy()), truth),
            include_groups=False,
        )
        rec = {"dataset": name, "seed": seed, "single_best*": float(per_worker.max())}
        for method in METHODS:
            t0 = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                kw = {"graph": edges} if method.startswith("mrf") else {}
                est = create(method).fit(answers, **kw)
            rec[method] = macro_f1(est.labels_, truth)
            rec[f"{method}_s"] = time.perf_counter() - t0
            if method == "mrf-em":
                rec["edge_agreement"] = est.result_.graph.edge_agreement
        records.append(rec)
    return pd.DataFrame(records)


def main(argv: list[str]) -> None:
    names = argv or ["cora", "citeseer"]
    pd.set_option("display.width", 200)
    for name in names:
        if not (DATASETS / name).is_dir():
            print(f"{name}: dataset not found under {DATASETS}")
            continue
        df = run(name)
        cols = ["seed", "single_best*", *METHODS, "edge_agreement"]
        print(
            f"\n== {name}: macro-F1 per seed (10 sklearn classifiers, {TRAIN_SIZE[name]} labelled nodes each; δ = M) =="
        )
        print(df[cols].round(4).to_string(index=False))
        mean = df[list(METHODS)].mean()
        std = df[list(METHODS)].std()
        print("mean ± sd: " + ", ".join(f"{m} {mean[m]:.4f}±{std[m]:.4f}" for m in METHODS))
        print("seconds (mean): " + ", ".join(f"{m} {df[f'{m}_s'].mean():.2f}" for m in METHODS))
        wins_ds = int((df["mrf-em"] > df["ds"]).sum())
        wins_mmds = int((df["mrf-em"] > df["mm-ds"]).sum())
        print(f"mrf-em > ds in {wins_ds}/{len(df)} seeds; mrf-em > mm-ds in {wins_mmds}/{len(df)} seeds")
        print("(* single best = best individual classifier scored against the truth: an evaluation-only reference)")


if __name__ == "__main__":
    ap = make_parser(__doc__)
    ap.add_argument("datasets", nargs="*", help="cora and/or citeseer (default: both)")
    main(ap.parse_args().datasets)
