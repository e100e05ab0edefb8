"""Evidence for ds1's default (issue 14 item 1): one-coin Dawid–Skene with equal priors, estimated priors, and
estimated priors with the collapse guard (the default), on the categorical datasets in ../shared/datasets and on
simulated sparse crowds (600 annotators, zipf activity, median ≤ 10 responses each, class prior 80/20, 10 %
spammers).

Run: python benchmarks/ds1_priors.py
"""

from __future__ import annotations

import warnings

import pandas as pd
from _common import categorical_datasets, load, make_parser

from fusion_core.methods import create
from fusion_core.metrics import accuracy
from fusion_core.simulate import dawid_skene

SETTINGS = {
    "equal": {"estimate_priors": False},
    "estimated": {"estimate_priors": True, "prior_guard": 0.0},
    "estimated+guard (default)": {},
}


def row(answers: pd.DataFrame, truth: pd.Series) -> dict[str, float]:
    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, params in SETTINGS.items():
            out[name] = accuracy(create("ds1", **params).fit(answers).labels_, truth)
        out["ds"] = accuracy(create("ds").fit(answers).labels_, truth)
    return out


def main() -> None:
    rows = {ds: row(*load(ds)) for ds in categorical_datasets()}
    for seed in range(5):
        sim = dawid_skene(
            n_items=2000, n_workers=600, n_classes=2, responses_per_item=5, class_prior=[0.8, 0.2],
            spammers=60, worker_activity="zipf", seed=seed,
        )  # fmt: skip
        rows[f"sparse-sim-{seed}"] = row(sim.responses, sim.truth)
    table = pd.DataFrame(rows).T
    real = table.index.isin(categorical_datasets())
    means = {"MEAN real": table[real].mean(), "MEAN sparse-sim": table[~real].mean()}
    for name, mean in means.items():
        table.loc[name] = mean
    pd.set_option("display.width", 200)
    print(table.round(4).to_string())


if __name__ == "__main__":
    make_parser(__doc__).parse_args()
    main()
