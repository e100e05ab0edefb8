"""Ingest for the Dask engine: read, validate, code globally, shuffle by item once, store coded partitions.

1. **Read** partitioned Parquet (``dd.read_parquet``) or CSV/TSV (``dd.read_csv``, every column as text), from a
   local path, a glob or an object-storage URL, or take a ``dask.dataframe`` / pandas DataFrame as it is.  Cells
   follow the in-memory reading rules (``docs/DATA.md``): the empty cell and ``na_values`` are missing, whitespace
   is trimmed only with ``strip_whitespace``; ids and labels read from files come back as canonical text
   (:mod:`fusion_core.data.text`: ``007`` stays ``"007"``, a Parquet integer 7 becomes ``"7"``), values of a
   DataFrame as they are.
2. **Census** (one pass, tree-reduced): rows, rows with a missing id or label, and the distinct workers and labels.
   They become the small global codebooks (natural order, as in memory), broadcast to every partition; partitions
   code the values as they are and only the distinct values (and the output task ids) are turned into text.
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
import pyarrow as pa

from fusion_core.data.columns import Coded
from fusion_core.data.formats import dask_formats, format_info
from fusion_core.data.readers import ReadOptions, clean_text, read_options
from fusion_core.data.text import canonical_text, explain_unknown, show_value, show_values, text_values
from fusion_core.data.validation import ValidationReport
from fusion_core.engines.dask.runner import active_client, broadcast, cluster_is_local, require_dask, tree_sum
from fusion_core.engines.dask.store import PartitionRef, Store, write_coded
from fusion_core.errors import UserInputError

ROLES = ("task", "worker", "label")
PARTITION_SIZE = 2_000_000


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
    label_first: np.ndarray | None = None
    """Per class, the rank of its first appearance in the data (partition order, then row order; classes never
    seen last): the second key of the tie rule, as in memory (:mod:`fusion_core.methods.ties`)."""
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
    """The format of a Dask source, among the registry's formats the engine reads (:func:`dask_formats`): given,
    or from the extension of the (first) path; a path without one is a partitioned Parquet dataset."""
    names = dask_formats()
    if fmt is not None:
        if fmt not in names:
            raise UserInputError(f"format must be one of {', '.join(names)}, got {fmt!r}.")
        return fmt
    first = str(source[0] if isinstance(source, (list, tuple)) and source else source).lower().rstrip("/")
    for suffix in (".gz", ".bz2", ".xz", ".zst"):
        first = first.removesuffix(suffix)
    if "." not in first.rsplit("/", 1)[-1]:
        return "parquet"  # a directory / prefix of a partitioned dataset
    for name in names:
        if first.endswith(format_info(name).extensions):
            return name
    raise UserInputError(f"cannot tell the format of {first!r}; pass format= one of {', '.join(names)}.")


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
                    engine="pyarrow",  # the in-memory reader's parser: a row with too few or too many fields is refused
                    blocksize=blocksize,
                    storage_options=opts or None,
                )
        except (OSError, ValueError) as exc:
            raise unreadable(path, fmt, exc) from None
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


def unreadable(path: Any, fmt: str, exc: BaseException) -> UserInputError:
    """One sentence for a file the CSV/Parquet reader refused (dask wraps pandas' error: its cause is named)."""
    cause = exc.__cause__ or exc
    msg = str(cause).strip().splitlines()[0] if str(cause).strip() else type(cause).__name__
    return UserInputError(
        f"could not read {path!r} as {fmt.upper()}: {msg}; fix that row, or quote values that contain the delimiter."
    )


# ------------------------------------------------------------------------------------ per-partition steps
def _clean_column(col: pd.Series, options: ReadOptions) -> pd.Series:
    """One id or label column with missing cells as NA: text as the in-memory readers clean it (the empty cell and
    ``na_values`` missing, both ends trimmed with ``strip_whitespace``), categoricals as their values."""
    if isinstance(col.dtype, pd.CategoricalDtype):
        col = col.astype(col.dtype.categories.dtype)
    if not (col.dtype == object or pd.api.types.is_string_dtype(col.dtype)):
        return col
    try:
        arr = pa.array(col, type=pa.string(), from_pandas=True)
    except (pa.ArrowException, TypeError, ValueError):  # an object column mixing text and other values
        return col.mask(col.isin(("", *options.na_values)))
    out = clean_text(arr, options).to_pandas()
    out.index = col.index
    return out


def clean(df: pd.DataFrame, options: ReadOptions) -> pd.DataFrame:
    """The role columns of one raw partition, cleaned (:func:`_clean_column`)."""
    return pd.DataFrame({r: _clean_column(df[r], options) for r in ROLES}, index=df.index)


def _drop_missing(df: pd.DataFrame) -> pd.DataFrame:
    return df[df[list(ROLES)].notna().all(axis=1)]


def census(df: pd.DataFrame) -> Census:
    """Row counts and the distinct workers and labels of one cleaned partition."""
    ids = (df["task"].isna() | df["worker"].isna()).to_numpy()
    lab = df["label"].isna().to_numpy() & ~ids
    kept = df[~(ids | lab)]
    return Census(
        len(df), int(ids.sum()), int(lab.sum()), pd.Index(kept["worker"].unique()), pd.Index(kept["label"].unique())
    )


@dataclass(frozen=True)
class Codebook:
    """Global codes of the distinct workers and labels, as they appear in the data (``*_keys``, any order), and
    whether ids are shown as canonical text (file inputs)."""

    worker_keys: pd.Index
    worker_code: np.ndarray
    label_keys: pd.Index
    label_code: np.ndarray
    n_workers: int
    n_classes: int
    as_text: bool

    def codes(self, df: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
        worker = self.worker_keys.get_indexer(df["worker"])
        label = self.label_keys.get_indexer(df["label"])
        if (worker < 0).any() or (label < 0).any():  # the census saw every value; this would be a bug
            raise RuntimeError("a worker or label was not in the global codebook")
        return self.worker_code[worker], self.label_code[label]


def code_partition(df: pd.DataFrame, i: int, store: Store, book: Codebook) -> Coding:
    """Code one shuffled partition (local items, global workers and labels), sort it by item and store it."""
    w, k = book.n_workers, book.n_classes
    if len(df) == 0:
        return Coding({}, np.zeros((w, k), dtype=np.int64), 0)
    item, tasks = pd.factorize(df["task"], sort=True)
    worker, label = book.codes(df)
    order = np.argsort((item * w + worker) * k + label, kind="stable")  # by item, worker, label
    item, worker, label = item[order], worker[order], label[order]
    dup = int(np.count_nonzero((item[1:] == item[:-1]) & (worker[1:] == worker[:-1])))
    ids = pa.array(np.asarray(tasks), from_pandas=True)
    write_coded(store, i, canonical_text(ids, column="task") if book.as_text else ids, (item, worker, label))
    counts = np.bincount(worker * k + label, minlength=w * k).reshape(w, k)
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
    na_values: Sequence[str] | str | None = None,
    strip_whitespace: bool = False,
    scratch: str | None = None,
    partition_size: int = PARTITION_SIZE,
    storage_options: Mapping[str, Any] | None = None,
    min_workers: int = 2,
) -> CodedResponses:
    """Read, validate and code responses for the Dask engine (see the module docstring); runs on the active
    scheduler.  ``na_values`` / ``strip_whitespace`` / ``classes`` as for in-memory reading (``docs/DATA.md``).
    ``scratch`` is where the coded partitions go (in a subdirectory of their own): a local temporary directory by
    default (right for a ``LocalCluster``; deleted with the result), or a shared filesystem / object-storage URL
    that every worker of a cluster can reach (delete it with :meth:`CodedResponses.cleanup`)."""
    import dask
    import dask.dataframe as dd
    from dask import delayed

    require_dask()
    if int(partition_size) < 1:
        raise UserInputError(f"partition_size must be a positive number of responses, got {partition_size!r}.")
    options = read_options(na_values, strip_whitespace)
    as_text = not isinstance(source, (pd.DataFrame, dd.DataFrame))  # files: ids and labels as canonical text
    frame = read_frame(
        source, columns={"task": task, "worker": worker, "label": label}, format=format, storage_options=storage_options
    ).map_partitions(clean, options)
    try:  # the files are read here: a row pandas refuses (too many fields) is the user's to fix
        seen = dask.compute(tree_sum([delayed(census, pure=True)(p) for p in frame.to_delayed()]))[0]
    except pd.errors.ParserError as exc:
        raise unreadable(source, format or "csv", exc) from None
    book, workers, class_index = _codebook(seen, classes, min_workers, as_text)
    store, owned = _scratch(scratch, storage_options)
    kept = seen.rows - seen.missing_id - seen.missing_label
    shuffled = frame.map_partitions(_drop_missing).shuffle(
        on="task", npartitions=max(1, math.ceil(kept / partition_size))
    )
    code = delayed(code_partition, pure=True)
    shared = broadcast(store), broadcast(book)
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
    first = np.full(len(class_index), len(book.label_keys), dtype=np.int64)
    np.minimum.at(first, book.label_code, np.arange(len(book.label_keys)))  # census keys: first-appearance order
    out = CodedResponses(store, coded.sizes, workers, class_index, coded.label_counts, report, owned, first)
    if owned:
        out._finalizer = weakref.finalize(out, shutil.rmtree, store.root, True)
    return out


def _natural(keys: pd.Index, as_text: bool) -> Coded:
    """Distinct values in their natural order (``codes[i]`` = the code of ``keys[i]``), shown as canonical text for
    file inputs or a column mixing types, else as they are (the in-memory rules)."""
    mixed = keys.dtype == object and len({type(v) for v in keys}) > 1
    return Coded(np.arange(len(keys)), text_values(keys) if as_text or mixed else keys).compact()


def _codebook(
    seen: Census, classes: Sequence[Any] | None, min_workers: int, as_text: bool
) -> tuple[Codebook, pd.Index, pd.Index]:
    """The global codebook and the worker and class indexes users see, with the in-memory checks."""
    if seen.rows == 0:
        raise UserInputError("the responses table is empty: it has a header but no rows.")
    if len(seen.workers) == 0:
        raise UserInputError("no usable responses: every row has a missing task, worker or label.")
    labels = _natural(seen.labels, as_text)
    cls = labels if classes is None else class_codes(labels, classes)
    if len(cls.values) < 2:
        raise UserInputError(
            f"only one label value ({show_value(cls.values[0])}) occurs, so there is nothing to aggregate; pass "
            "the full list of classes if the others exist but were never chosen."
        )
    workers = _natural(seen.workers, as_text)
    if len(workers.values) < min_workers:
        raise UserInputError(
            f"only {len(workers.values)} annotator ({show_value(workers.values[0])}) gave responses; estimating "
            f"reliability needs at least {min_workers} annotators."
        )
    book = Codebook(seen.workers, workers.codes, seen.labels, cls.codes, len(workers.values), len(cls.values), as_text)
    return book, workers.values, cls.values


def class_codes(labels: Coded, classes: Sequence[Any]) -> Coded:
    """Labels coded into the declared ``classes`` (matched exactly, then by canonical text, as in memory)."""
    declared = pd.Index(list(classes))
    if declared.has_duplicates:
        raise UserInputError(f"the declared classes repeat a value: {show_values(list(declared), 10)}.")
    pos = declared.get_indexer(labels.values)
    text = text_values(declared)
    if (pos < 0).any() and not text.has_duplicates:
        pos = np.where(pos < 0, text.get_indexer(text_values(labels.values)), pos)
    bad = labels.values[pos < 0]
    if len(bad):
        raise UserInputError(explain_unknown(list(bad), list(declared), what="labels", among="the declared classes"))
    return Coded(pos.astype(np.int64)[labels.codes], declared)


def _scratch(scratch: str | None, storage_options: Mapping[str, Any] | None) -> tuple[Store, bool]:
    if scratch is not None:  # a subdirectory of its own, so fits sharing a scratch location never collide
        from fsspec.core import url_to_fs

        try:
            url_to_fs(str(scratch), **dict(storage_options or {}))
        except (ValueError, ImportError, OSError, TypeError) as exc:
            raise UserInputError(
                f"cannot use {str(scratch)!r} as the scratch location ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__}); "
                "give a directory or a URL every worker can reach (file://, s3://, gs://, abfs://)."
            ) from None
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
