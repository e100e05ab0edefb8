"""What a fit on the Dask engine returns: the small results in memory, the per-item results as partitioned Parquet.

The layouts of the tables follow the CLI's outputs: ``confusion_table`` (worker, true, reported, probability),
``annotator_table`` (worker, skill, responses; best first), and the posterior files (task, label, ``P(<label>)``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from fusion_core.data.validation import ValidationReport
from fusion_core.engines.dask.em import probability_column
from fusion_core.engines.dask.store import Store
from fusion_core.methods.base import errors_frame
from fusion_core.methods.results import jsonable


@dataclass
class DaskFitResult:
    """A method fitted on the Dask engine.

    In memory (small): ``workers``, ``classes`` (the user's ids and labels, in code order), ``confusion`` (workers ×
    true × reported, None for majority vote), ``class_prior``, ``worker_skill`` (expected accuracy
    ``Σ_k π_k Γ_w[k, k]``, or for majority vote the posterior mass on the worker's own labels),
    ``responses_per_worker``, the log-likelihood trace, iterations, convergence, seconds (total and per EM
    iteration), the validation report and warnings.  On storage (large): posteriors and labels by task, one Parquet
    file per partition under ``output`` (read them lazily with :meth:`posteriors`)."""

    method: str
    params: dict[str, Any]
    workers: pd.Index
    classes: pd.Index
    confusion: np.ndarray | None
    class_prior: np.ndarray
    worker_skill: np.ndarray
    responses_per_worker: np.ndarray
    log_likelihood: list[float]
    n_iter: int
    converged: bool
    seconds: float
    iteration_seconds: list[float]
    n_items: int
    n_responses: int
    n_partitions: int
    output: Store
    report: ValidationReport = field(default_factory=ValidationReport)
    warnings: list[str] = field(default_factory=list)

    @property
    def priors(self) -> pd.Series:
        return pd.Series(self.class_prior, index=pd.Index(self.classes, name="label"), name="prior")

    @property
    def skills(self) -> pd.Series:
        return pd.Series(self.worker_skill, index=pd.Index(self.workers, name="worker"), name="skill")

    @property
    def errors(self) -> pd.DataFrame | None:
        """crowd-kit's layout of the confusion matrices (index (worker, reported label), columns true label)."""
        return None if self.confusion is None else errors_frame(self.confusion, self.workers, self.classes)

    def annotator_table(self) -> pd.DataFrame:
        """One row per annotator: ``worker``, ``accuracy`` (the expected share of right responses, the in-memory
        table's column), ``responses``; most accurate first."""
        df = pd.DataFrame(
            {"worker": self.workers, "accuracy": self.worker_skill, "responses": self.responses_per_worker.astype(int)}
        )
        return df.sort_values("accuracy", ascending=False, kind="stable").reset_index(drop=True)

    def confusion_table(self) -> pd.DataFrame | None:
        """Long layout: ``worker``, ``true``, ``reported``, ``probability`` (None for majority vote)."""
        if self.confusion is None:
            return None
        w, k, _ = self.confusion.shape
        return pd.DataFrame(
            {
                "worker": self.workers.repeat(k * k),
                "true": np.tile(np.repeat(np.asarray(self.classes, dtype=object), k), w),
                "reported": np.tile(np.asarray(self.classes, dtype=object), w * k),
                "probability": self.confusion.ravel(),
            }
        )

    def posteriors(self) -> Any:
        """The posteriors as a lazy ``dask.dataframe`` indexed by task, one column per class (named by the class,
        as ``probas_`` in memory)."""
        frame = self._read()
        return frame[[probability_column(c) for c in self.classes]].rename(
            columns={probability_column(c): c for c in self.classes}
        )

    def labels(self) -> Any:
        """The hard labels (posterior argmax) as a lazy ``dask`` Series indexed by task."""
        return self._read()["label"]

    def _read(self) -> Any:
        import dask.dataframe as dd

        root = self.output.root.rstrip("/")
        opts = dict(self.output.storage_options) or None
        return dd.read_parquet(root, index="task", calculate_divisions=False, storage_options=opts)

    def summary(self) -> dict[str, Any]:
        """JSON-ready summary (as ``FitResult.summary`` in memory, plus the engine's sizes and timings)."""
        ll = self.log_likelihood[-1] if self.log_likelihood else None
        return {
            "method": self.method,
            "engine": "dask",
            "parameters": {k: jsonable(v) for k, v in self.params.items()},
            "iterations": int(self.n_iter),
            "converged": bool(self.converged),
            "log_likelihood": None if ll is None else float(ll),
            "seconds": float(self.seconds),
            "seconds_per_iteration": [float(s) for s in self.iteration_seconds],
            "items": int(self.n_items),
            "responses": int(self.n_responses),
            "partitions": int(self.n_partitions),
            "workers": len(self.workers),
            "classes": [jsonable(c) for c in self.classes],
            "output": self.output.root,
            "warnings": list(self.warnings),
            "validation": self.report.to_dict(),
        }
