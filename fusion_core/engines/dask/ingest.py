"""Ingest for the Dask engine: read, validate, code globally, shuffle by item once, store coded partitions.

1. **Read** partitioned Parquet (``dd.read_parquet``; types kept) or CSV/TSV (``dd.read_csv`` with every column as
   text, only empty cells missing: ids and labels come back exactly as written), from a local path, a glob or an
   object-storage URL; or take a ``dask.dataframe`` / pandas DataFrame as it is.
2. **Census** (one pass, tree-reduced): rows, rows with a missing id or label, and the distinct workers and labels.
   They become the small global categories (natural order, as in memory), broadcast to every partition.
3. **Shuffle** the clean responses by a hash of the task id into partitions of about ``partition_size`` responses
   (``DataFrame.shuffle(on=task)``: every response of an item lands in the same partition).
4. **Code and store** each partition: items coded locally (sorted task ids), workers and labels by the global
   categories; responses sorted by item; written to the scratch store with the partition's task ids
   (:mod:`.store`).  Responses per worker and label and duplicate (task, worker) pairs are summed on the way.

Rows are kept as in memory with ``duplicates='keep'``: a row with a blank task, worker or label is dropped and
counted in the :class:`~fusion_core.data.responses.ValidationReport`.
"""

from __future__ import annotations

import math
import os
import shutil
import tempfile
import uuid
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from fusion_core.data.coding import sorted_index
from fusion_core.data.responses import ValidationReport
from fusion_core.engines.dask.runner import active_client, broadcast, cluster_is_local, require_dask, tree_sum
from fusion_core.engines.dask.store import PartitionRef, Store, write_coded
from fusion_core.errors import UserInputError

ROLES = ("task", "worker", "label")
PARTITION_SIZE = 2_000_000
FORMATS = ("parquet", "csv", "tsv")


@dataclass
class Census:
    """One pass over the raw rows (summed over partitions): counts and the distinct workers and labels kept."""

    rows: int
    missing_id: int
    missing_label: int
    workers: pd.Index
    labels: pd.Index

    def __add__(self, other: Census) -> Census:
        return Census(
            self.rows + other.rows,
            self.missing_id + other.missing_id,
            self.missing_label + other.missing_label,
            self.workers.append(other.workers).unique(),
            self.labels.append(other.labels).unique(),
        )


@dataclass
class Coding:
    """What coding the shuffled partitions yields (summed): (items, responses) per non-empty partition, responses
    per worker and label (workers × K) and rows repeating a (task, worker) pair."""

    sizes: dict[int, tuple[int, int]]
    label_counts: np.ndarray
    duplicate_rows: int

    def __add__(self, other: Coding) -> Coding:
        return Coding(
            {**self.sizes, **other.sizes},
            self.label_counts + other.label_counts,
            self.duplicate_rows + other.duplicate_rows,
        )


@dataclass
class CodedResponses:
    """Responses coded and stored by partition (the result of :func:`ingest`; fit several methods on it).

    ``workers`` and ``classes`` are the global categories (the user's ids and labels, in code order);
    ``label_counts`` is workers × classes response counts; ``sizes`` maps each non-empty partition to its
    (items, responses); ``report`` says what was dropped and why."""

    store: Store
    sizes: dict[int, tuple[int, int]]
    workers: pd.Index
    classes: pd.Index
    label_counts: np.ndarray
    report: ValidationReport
    owned: bool = False
    _finalizer: Any = field(default=None, repr=False)

    @property
    def n_items(self) -> int:
        return sum(s[0] for s in self.sizes.values())

    @property
    def n_responses(self) -> int:
        return sum(s[1] for s in self.sizes.values())

    @property
    def n_workers(self) -> int:
        return len(self.workers)

    @property
    def n_classes(self) -> int:
        return len(self.classes)

    @property
    def n_partitions(self) -> int:
        return len(self.sizes)

    @property
    def responses_per_worker(self) -> np.ndarray:
        return self.label_counts.sum(axis=1)

    def refs(self) -> list[PartitionRef]:
        """One loader per non-empty partition, in partition order."""
        return [PartitionRef(self.store, i, self.n_workers, self.n_classes) for i in sorted(self.sizes)]

    def cleanup(self) -> None:
        """Delete this ingest's scratch directory (its own subdirectory of ``scratch``) and everything in it."""
        if self._finalizer is not None:
            self._finalizer.detach()
        self.store.remove()


# ------------------------------------------------------------------------------------------------ reading
def _format_of(source: str | os.PathLike[str] | Sequence[str], fmt: str | None) -> str:
    if fmt is not None:
        if fmt not in FORMATS:
            raise UserInputError(f"format must be one of {', '.join(FORMATS)}, got {fmt!r}.")
        return fmt
    first = str(source[0] if isinstance(source, (list, tuple)) and source else source).lower().rstrip("/")
    for suffix in (".gz", ".bz2", ".xz", ".zst"):
        first = first.removesuffix(suffix)
    if first.endswith((".parquet", ".pq")) or "." not in first.rsplit("/", 1)[-1]:
        return "parquet"  # a file, or a directory / prefix of a partitioned dataset
    if first.endswith(".csv"):
        return "csv"
    if first.endswith((".tsv", ".tab")):
        return "tsv"
    raise UserInputError(f"cannot tell the format of {first!r}; pass format='parquet', 'csv' or 'tsv'.")


def read_frame(
    source: Any,
    *,
    columns: Mapping[str, str],
    format: str | None = None,
    storage_options: Mapping[str, Any] | None = None,
    blocksize: str | int = "64MB",
) -> Any:
    """The responses as a ``dask.dataframe`` with columns ``task, worker, label`` (``columns`` maps each role to
    the user's column name)."""
    import dask.dataframe as dd

    cols = [columns[r] for r in ROLES]
    if len(set(cols)) < len(cols):
        raise UserInputError(f"task, worker and label must be three different columns, got {cols}.")
    opts = dict(storage_options or {})
    if isinstance(source, pd.DataFrame):
        source = dd.from_pandas(source, npartitions=max(1, math.ceil(len(source) / PARTITION_SIZE)))
    if isinstance(source, (str, os.PathLike, list, tuple)):
        fmt = _format_of(source, format)
        path = [str(s) for s in source] if isinstance(source, (list, tuple)) else str(source)
        try:
            if fmt == "parquet":
                frame = dd.read_parquet(path, storage_options=opts or None)
            else:
                frame = dd.read_csv(
                    path,
                    sep="\t" if fmt == "tsv" else ",",
                    dtype=str,
                    keep_default_na=False,
                    na_values=[""],
                    blocksize=blocksize,
                    storage_options=opts or None,
                )
        except (OSError, ValueError) as exc:
            msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise UserInputError(f"could not read {path!r} as {fmt.upper()}: {msg}") from None
        source = frame
    if not isinstance(source, dd.DataFrame):
        raise UserInputError(
            f"expected a dask DataFrame, a pandas DataFrame or a path/URL of Parquet or CSV files, got "
            f"{type(source).__name__}."
        )
    missing = [f"{r} column '{c}'" for r, c in zip(ROLES, cols) if c not in source.columns]
    if missing:
        raise UserInputError(
            f"missing {', '.join(missing)}; the data has columns {[str(c) for c in source.columns]}. "
            "Map the columns with task=, worker=, label= or rename them."
        )
    return source[cols].rename(columns={c: r for r, c in zip(ROLES, cols)})


# ------------------------------------------------------------------------------------ per-partition steps
def _missing(values: pd.Series) -> np.ndarray:
    """Missing cells: NA, or text that is empty after stripping (as the in-memory coder)."""
    miss = values.isna().to_numpy().copy()
    if values.dtype == object or pd.api.types.is_string_dtype(values.dtype):
        stripped = values.astype("string").str.strip()
        miss |= (stripped == "").fillna(True).to_numpy(dtype=bool)
    return miss


def _drop_missing(df: pd.DataFrame) -> pd.DataFrame:
    keep = ~(_missing(df["task"]) | _missing(df["worker"]) | _missing(df["label"]))
    return df[keep]


def census(df: pd.DataFrame) -> Census:
    """Row counts and the distinct workers and labels of one raw partition."""
    ids = _missing(df["task"]) | _missing(df["worker"])
    lab = _missing(df["label"]) & ~ids
    kept = df[~(ids | lab)]
    return Census(
        len(df), int(ids.sum()), int(lab.sum()), pd.Index(kept["worker"].unique()), pd.Index(kept["label"].unique())
    )


def code_partition(df: pd.DataFrame, i: int, store: Store, workers: pd.Index, classes: pd.Index) -> Coding:
    """Code one shuffled partition (local items, global workers and labels), sort it by item and store it."""
    k = len(classes)
    empty = np.zeros((len(workers), k), dtype=np.int64)
    if len(df) == 0:
        return Coding({}, empty, 0)
    item, tasks = pd.factorize(df["task"], sort=True)
    worker = workers.get_indexer(df["worker"])
    label = classes.get_indexer(df["label"])
    if (worker < 0).any() or (label < 0).any():  # the census saw every value; this would be a bug
        raise RuntimeError("a worker or label was not in the global categories")
    order = np.argsort((item * len(workers) + worker) * k + label, kind="stable")  # by item, worker, label
    item, worker, label = item[order], worker[order], label[order]
    dup = int(np.count_nonzero((item[1:] == item[:-1]) & (worker[1:] == worker[:-1])))
    write_coded(store, i, pd.Index(tasks), (item, worker, label))
    counts = np.bincount(worker * k + label, minlength=len(workers) * k).reshape(len(workers), k)
    return Coding({i: (len(tasks), len(df))}, counts, dup)


# ---------------------------------------------------------------------------------------------- ingest
def ingest(
    source: Any,
    *,
    task: str = "task",
    worker: str = "worker",
    label: str = "label",
    format: str | None = None,
    classes: Sequence[Any] | None = None,
    scratch: str | None = None,
    partition_size: int = PARTITION_SIZE,
    storage_options: Mapping[str, Any] | None = None,
    min_workers: int = 2,
) -> CodedResponses:
    """Read, validate and code responses for the Dask engine (see the module docstring); runs on the active
    scheduler.  ``scratch`` is where the coded partitions go (in a subdirectory of their own): a local temporary
    directory by default (right for a ``LocalCluster``; deleted with the result), or a shared filesystem /
    object-storage URL that every worker of a cluster can reach (delete it with :meth:`CodedResponses.cleanup`)."""
    import dask
    from dask import delayed

    require_dask()
    if int(partition_size) < 1:
        raise UserInputError(f"partition_size must be a positive number of responses, got {partition_size!r}.")
    frame = read_frame(
        source,
        columns={"task": task, "worker": worker, "label": label},
        format=format,
        storage_options=storage_options,
    )
    seen = dask.compute(tree_sum([delayed(census, pure=True)(p) for p in frame.to_delayed()]))[0]
    workers, class_index = _categories(seen, classes, min_workers)
    store, owned = _scratch(scratch, storage_options)
    kept = seen.rows - seen.missing_id - seen.missing_label
    n_out = max(1, math.ceil(kept / int(partition_size)))
    shuffled = frame.map_partitions(_drop_missing).shuffle(on="task", npartitions=n_out)
    code = delayed(code_partition, pure=True)
    shared = broadcast(store), broadcast(workers), broadcast(class_index)
    coded = dask.compute(tree_sum([code(p, i, *shared) for i, p in enumerate(shuffled.to_delayed())]))[0]
    report = ValidationReport(
        rows_read=seen.rows,
        responses=kept,
        dropped_missing_label=seen.missing_label,
        dropped_missing_id=seen.missing_id,
        duplicate_rows=coded.duplicate_rows,
        duplicate_policy="keep",
        notes=[f"Dask engine: {len(coded.sizes):,} partitions of responses by task."],
    )
    out = CodedResponses(store, coded.sizes, workers, class_index, coded.label_counts, report, owned)
    if owned:
        out._finalizer = weakref.finalize(out, shutil.rmtree, store.root, True)
    return out


def _categories(seen: Census, classes: Sequence[Any] | None, min_workers: int) -> tuple[pd.Index, pd.Index]:
    """The global worker and class indexes (natural order, as in memory), with the in-memory checks."""
    if seen.rows == 0:
        raise UserInputError("the responses table is empty: it has a header but no rows.")
    if len(seen.workers) == 0:
        raise UserInputError("no usable responses: every row has a missing task, worker or label.")
    if classes is None:
        class_index = sorted_index(seen.labels)
    else:
        class_index = pd.Index(list(classes))
        if class_index.has_duplicates:
            raise UserInputError(f"the declared classes repeat a value: {list(class_index)}.")
        unknown = seen.labels[class_index.get_indexer(seen.labels) < 0]
        if len(unknown):
            bad = sorted(str(v) for v in unknown)[:5]
            raise UserInputError(f"labels {bad} are not among the declared classes {list(class_index)}.")
    if len(class_index) < 2:
        raise UserInputError(
            f"only one label value ({class_index[0]!r}) occurs, so there is nothing to aggregate; "
            "pass the full list of classes if the others exist but were never chosen."
        )
    workers = sorted_index(seen.workers)
    if len(workers) < min_workers:
        raise UserInputError(
            f"only {len(workers)} annotator ({workers[0]!r}) gave responses; estimating reliability "
            f"needs at least {min_workers} annotators."
        )
    return workers, class_index


def _scratch(scratch: str | None, storage_options: Mapping[str, Any] | None) -> tuple[Store, bool]:
    if scratch is not None:  # a subdirectory of its own, so fits sharing a scratch location never collide
        return Store(
            f"{str(scratch).rstrip('/')}/fusion_core-{uuid.uuid4().hex[:12]}", dict(storage_options or {})
        ), False
    return Store(local_temp_dir("scratch", "fusion_core_dask_")), True


def local_temp_dir(option: str, prefix: str) -> str:
    """A new local temporary directory, refused when the cluster has workers on other machines (they could not
    reach it): then ``option`` must name a shared location."""
    client = active_client()
    if client is not None and not cluster_is_local(client):
        raise UserInputError(
            f"the cluster has workers on other machines: pass {option}= a location every worker can reach "
            "(an object-storage URL such as 's3://bucket/fusion/run1' or a shared filesystem)."
        )
    return tempfile.mkdtemp(prefix=prefix)
