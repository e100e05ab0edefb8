"""Balanced accuracy (and accuracy) of MV, DS, SML, i-SML and sml-ds on the binary real datasets (issue 3).

Datasets: magic_ensemble (16 classifiers), rte, temp, bluebirds, product, possent from ../shared/datasets.
Prints one table per metric (rows = datasets, columns = methods), the i-SML ≥ SML and sml-ds ≥ DS checks,
the spectral diagnostics that explain them (b̂ by both estimators vs the true b, explained variance
λ₁/trace, eigen-gap, the EM start chosen, Spearman of v̂ with the annotators' empirical balanced accuracy),
and what ``detect_cartels`` finds on each dataset (balanced accuracy of SML with and without the groups).

DS is the registry's ``ds`` with smoothing 0.01 (the pseudo-count sml-ds uses, spec §3.11) and MV breaks
ties toward the smallest label (the registry default).  The positive class is the second label.

Run: python benchmarks/spectral_real_data.py
"""

from __future__ import annotations

import os
import time
import warnings

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np
import pandas as pd
from _common import DATASETS, load, make_parser
from scipy.stats import spearmanr

from fusion_core.diagnostics.cartels import detect_cartels
from fusion_core.errors import AggregationWarning
from fusion_core.methods import create
from fusion_core.metrics import balanced_accuracy

DATASETS_USED = ["magic_ensemble", "rte", "temp", "bluebirds", "product", "possent"]
METHODS = {
    "MV": ("mv", {}),
    "DS": ("ds", {"smoothing": 0.01}),
    "SML": ("sml", {}),
    "i-SML": ("isml", {}),
    "sml-ds": ("sml-ds", {}),
}


def empirical_ba(answers: pd.DataFrame, truth: pd.Series) -> pd.Series:
    df = answers.merge(truth.rename("y"), left_on="task", right_index=True)
    classes = sorted(truth.unique())
    rec = [df[df.y == c].groupby("worker")["label"].apply(lambda s, c=c: (s == c).mean()) for c in classes]
    return pd.concat(rec, axis=1).mean(axis=1)


def _em_start(est) -> str | None:
    """The start of the EM run sml-ds kept (its restarts record every start and the one kept)."""
    rs = est.result_.restarts
    return rs.labels[rs.best] if rs is not None else None


def main() -> None:
    if not DATASETS.is_dir():
        print(f"no datasets: {DATASETS} is absent")
        return
    bal = pd.DataFrame(index=DATASETS_USED, columns=list(METHODS), dtype=float)
    acc = bal.copy()
    secs = bal.copy()
    notes = []
    for ds in DATASETS_USED:
        answers, truth = load(ds)
        fitted = {}
        for col, (name, params) in METHODS.items():
            t0 = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", AggregationWarning)
                est = create(name, **params).fit(answers)
            secs.loc[ds, col] = time.perf_counter() - t0
            lab = est.labels_.reindex(truth.index)
            bal.loc[ds, col] = balanced_accuracy(lab.to_numpy(), truth.to_numpy())
            acc.loc[ds, col] = float((lab == truth).mean())
            fitted[col] = est
        iv = fitted["i-SML"]
        d = iv.diagnostics_
        classes = sorted(truth.unique())
        b_true = float((truth == classes[1]).mean() - (truth == classes[0]).mean())
        emp = empirical_ba(answers, truth)
        ev = iv.eigenvector_.dropna()
        common = ev.index.intersection(emp.index)
        rho = spearmanr(ev[common], emp[common]).statistic if len(common) > 2 else float("nan")
        tensor = create("isml", b_method="tensor")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", AggregationWarning)
            b_ten = tensor.fit(answers).class_imbalance_
        notes.append(
            {
                "dataset": ds,
                "m×n": f"{answers.worker.nunique()}×{answers.task.nunique()}",
                "core": d.get("core_size"),
                "b_lik": round(float(d.get("b_likelihood", np.nan)), 3),
                "b_tensor": round(float(b_ten), 3),
                "b_true": round(b_true, 3),
                "explained": round(float(d.get("explained", np.nan)), 3),
                "eigen_gap": round(float(d.get("eigen_gap", np.nan)), 1),
                "spearman(v,BA)": round(float(rho), 3),
                "em_start": _em_start(fitted["sml-ds"]),
                "out_of_range": d.get("out_of_range_count"),
            }
        )
    pd.set_option("display.width", 200)
    print("Balanced accuracy on gold items")
    print(bal.round(4).to_string())
    print()
    print("Accuracy on gold items")
    print(acc.round(4).to_string())
    print()
    print("Fit seconds")
    print(secs.round(3).to_string())
    print()
    print("Checks (balanced accuracy): i-SML ≥ SML and sml-ds ≥ DS")
    for ds in DATASETS_USED:
        a = bal.loc[ds, "i-SML"] - bal.loc[ds, "SML"]
        b = bal.loc[ds, "sml-ds"] - bal.loc[ds, "DS"]
        print(
            f"  {ds:<15} i-SML − SML = {a:+.4f} {'ok' if a >= 0 else 'NO'}   sml-ds − DS = {b:+.5f} {'ok' if b >= -1e-12 else 'NO'}"
        )
    print()
    print("Spectral diagnostics (i-SML)")
    print(pd.DataFrame(notes).set_index("dataset").to_string())
    print()
    print("Correlated groups (detect_cartels, B = 200, α = 0.01, labels by SML)")
    rows = []
    for ds in DATASETS_USED:
        answers, truth = load(ds)
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", AggregationWarning)
            rep = detect_cartels(answers, n_bootstrap=200, alpha=0.01, random_state=0)
        sub = truth.index
        rows.append(
            {
                "dataset": ds,
                "analysed": len(rep.workers),
                "p(2nd)": round(float(rep.p_value[0]), 4),
                "groups": [len(g) for g in rep.groups],
                "undetermined": len(rep.undetermined),
                "BA all": round(balanced_accuracy(rep.labels.reindex(sub).to_numpy(), truth.to_numpy()), 4),
                "BA without groups": round(
                    balanced_accuracy(rep.labels_without_cartel.reindex(sub).to_numpy(), truth.to_numpy()), 4
                ),
                "seconds": round(time.perf_counter() - t0, 2),
            }
        )
    print(pd.DataFrame(rows).set_index("dataset").to_string())


if __name__ == "__main__":
    make_parser(__doc__).parse_args()
    main()
