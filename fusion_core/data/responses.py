"""The response model: who labelled what, as integer-coded numpy arrays.

Every method works on a :class:`Responses` object. It holds one row per response (``item``, ``worker``,
``label`` integer codes, duplicates kept as separate rows unless a policy removed them), the mapping back
to the user's ids (``items``, ``workers``, ``classes`` as :class:`pandas.Index`), optional per-item
sequence / position codes for sequential data, and the :class:`ValidationReport` saying what was dropped
and why.  EM loops only ever touch the numpy arrays and the sparse count matrix built from them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from numbers import Number
from typing import Any

import numpy as np
import pandas as pd
import scipy.sparse as sp

from fusion_core.errors import UserInputError

DUPLICATE_POLICIES = ("keep", "first", "last", "error")
DEFAULT_COLUMNS = {"task": "task", "worker": "worker", "label": "label"}


@dataclass
class ValidationReport:
    """What happened between the user's table and the coded responses."""

    rows_read: int = 0
    responses: int = 0
    dropped_missing_label: int = 0
    dropped_missing_id: int = 0
    duplicate_rows: int = 0  # rows that repeat an earlier (task, worker) pair
    duplicate_policy: str = "keep"
    duplicates_removed: int = 0
    notes: list[str] = field(default_factory=list)

    def messages(self) -> list[str]:
        """Human-readable lines, one per thing a user should know."""
        out = [f"Read {self.rows_read:,} rows; kept {self.responses:,} responses."]
        if self.dropped_missing_label:
            out.append(f"Dropped {self.dropped_missing_label:,} rows with a missing label.")
        if self.dropped_missing_id:
            out.append(f"Dropped {self.dropped_missing_id:,} rows with a missing task or worker id.")
        if self.duplicate_rows:
            if self.duplicate_policy == "keep":
                out.append(
                    f"{self.duplicate_rows:,} rows repeat a (task, worker) pair; kept as separate responses "
                    "(policy 'keep')."
                )
            else:
                out.append(
                    f"{self.duplicate_rows:,} rows repeat a (task, worker) pair; removed "
                    f"{self.duplicates_removed:,} (policy '{self.duplicate_policy}')."
                )
        out.extend(self.notes)
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "rows_read": self.rows_read,
            "responses": self.responses,
            "dropped_missing_label": self.dropped_missing_label,
            "dropped_missing_id": self.dropped_missing_id,
            "duplicate_rows": self.duplicate_rows,
            "duplicate_policy": self.duplicate_policy,
            "duplicates_removed": self.duplicates_removed,
            "notes": list(self.notes),
        }


def _is_missing(values: pd.Series) -> np.ndarray:
    miss = values.isna().to_numpy().copy()
    if values.dtype == object or pd.api.types.is_string_dtype(values.dtype):
        stripped = values.astype("string").str.strip()
        miss |= (stripped == "").fillna(True).to_numpy(dtype=bool)
    return miss


def sorted_index(values: Iterable[Any]) -> pd.Index:
    """Unique values in a natural order: numeric order when all are numbers, string order otherwise."""
    uniq = pd.unique(pd.Series(list(values) if not isinstance(values, (pd.Series, pd.Index, np.ndarray)) else values))
    if all(isinstance(v, (Number, np.number)) and not isinstance(v, bool) for v in uniq):
        return pd.Index(sorted(uniq))
    try:
        return pd.Index(sorted(uniq))
    except TypeError:
        return pd.Index(sorted(uniq, key=lambda v: str(v)))


def _factorize(values: pd.Series) -> tuple[np.ndarray, pd.Index]:
    try:
        codes, uniques = pd.factorize(values, sort=True)
    except TypeError:  # mixed types that do not sort: order by their text
        codes, uniques = pd.factorize(values.astype(str), sort=True)
        first = pd.Series(values.to_numpy()).groupby(codes).first()
        uniques = pd.Index(first.to_numpy(), dtype=object)
    return codes.astype(np.int64), pd.Index(uniques)


@dataclass(frozen=True, eq=False)
class Responses:
    """Integer-coded responses.  ``confusion`` arrays elsewhere use the ``classes`` order of this object.

    Attributes
    ----------
    item, worker, label : int64 arrays of length ``n_responses`` (codes into ``items``/``workers``/``classes``).
    items, workers, classes : the user's ids / label values in code order.
    sequence, position : optional int arrays of length ``n_items`` (sequence code and position of each item).
    sequences : the user's sequence ids in code order (or ``None``).
    report : what validation did.
    """

    item: np.ndarray
    worker: np.ndarray
    label: np.ndarray
    items: pd.Index
    workers: pd.Index
    classes: pd.Index
    report: ValidationReport = field(default_factory=ValidationReport)
    sequence: np.ndarray | None = None
    position: np.ndarray | None = None
    sequences: pd.Index | None = None

    # ------------------------------------------------------------------ sizes
    @property
    def n_items(self) -> int:
        return len(self.items)

    @property
    def n_workers(self) -> int:
        return len(self.workers)

    @property
    def n_classes(self) -> int:
        return len(self.classes)

    @property
    def n_responses(self) -> int:
        return int(self.item.shape[0])

    @property
    def has_sequences(self) -> bool:
        return self.sequence is not None

    # ------------------------------------------------------- sparse structure
    @cached_property
    def counts(self) -> sp.csr_matrix:
        """Sparse ``n_items × (n_workers·K)`` count matrix; column ``w·K + l`` counts worker w saying l.

        With it the Dawid–Skene E-step is ``counts @ log_confusion`` and the M-step ``counts.T @ posterior``:
        two sparse-dense products per iteration, no Python loop over responses.
        """
        k = self.n_classes
        mat = sp.csr_matrix(
            (np.ones(self.n_responses), (self.item, self.worker * k + self.label)),
            shape=(self.n_items, self.n_workers * k),
        )
        mat.sum_duplicates()
        return mat

    @cached_property
    def counts_t(self) -> sp.csr_matrix:
        """Transpose of :attr:`counts` in CSR form (fast ``counts.T @ dense``)."""
        return self.counts.T.tocsr()

    def vote_counts(self, weights: np.ndarray | None = None) -> np.ndarray:
        """``n_items × K`` (weighted) vote counts; ``weights`` is one weight per worker."""
        w = None if weights is None else np.asarray(weights, dtype=float)[self.worker]
        flat = np.bincount(self.item * self.n_classes + self.label, weights=w, minlength=self.n_items * self.n_classes)
        return flat.reshape(self.n_items, self.n_classes).astype(float)

    @cached_property
    def responses_per_item(self) -> np.ndarray:
        return np.bincount(self.item, minlength=self.n_items)

    @cached_property
    def responses_per_worker(self) -> np.ndarray:
        return np.bincount(self.worker, minlength=self.n_workers)

    def dense_matrix(self, missing: int = -1) -> np.ndarray:
        """``n_workers × n_items`` label-code matrix with ``missing`` where no response (last duplicate wins)."""
        out = np.full((self.n_workers, self.n_items), missing, dtype=np.int64)
        out[self.worker, self.item] = self.label
        return out

    # -------------------------------------------------------------- sequences
    @cached_property
    def item_order(self) -> np.ndarray:
        """Items sorted by (sequence, position); identity order when there are no sequences."""
        if self.sequence is None:
            return np.arange(self.n_items)
        return np.lexsort((self.position, self.sequence))

    @cached_property
    def sequence_bounds(self) -> np.ndarray:
        """Start offsets into :attr:`item_order` of each sequence, plus the end (length n_sequences + 1)."""
        if self.sequence is None:
            return np.array([0, self.n_items])
        seq_sorted = self.sequence[self.item_order]
        starts = np.flatnonzero(np.r_[True, seq_sorted[1:] != seq_sorted[:-1]])
        return np.r_[starts, self.n_items]

    # ------------------------------------------------------------ conversions
    def to_frame(self) -> pd.DataFrame:
        """Long format with the user's ids (crowd-kit columns), plus sequence/position when present."""
        df = pd.DataFrame(
            {
                "task": self.items.take(self.item),
                "worker": self.workers.take(self.worker),
                "label": self.classes.take(self.label),
            }
        )
        if self.sequence is not None:
            df["sequence"] = self.sequences.take(self.sequence[self.item])
            df["position"] = self.position[self.item]
        return df

    def item_codes(self, ids: Iterable[Any], *, what: str = "tasks", strict: bool = True) -> np.ndarray:
        """Codes of the given item ids; ids not in the data raise (``strict``) or map to -1."""
        ids = pd.Index(list(ids) if not isinstance(ids, (pd.Index, pd.Series, np.ndarray)) else ids)
        codes = self.items.get_indexer(ids)
        if (codes < 0).any():
            # ids may come from a file read with another dtype ("7" vs 7): retry on their text
            text_index = pd.Index(self.items.astype(str))
            retry = text_index.get_indexer(ids.astype(str))
            codes = np.where(codes < 0, retry, codes)
        if strict and (codes < 0).any():
            bad = list(ids[codes < 0][:5])
            raise UserInputError(
                f"{int((codes < 0).sum())} {what} are not in the responses (for example {bad}); "
                "check that they use the same task ids as the answers file."
            )
        return codes

    def label_codes(self, values: Iterable[Any], *, what: str = "labels") -> np.ndarray:
        """Codes of label values in :attr:`classes`; unknown labels raise :class:`UserInputError`."""
        values = pd.Index(list(values) if not isinstance(values, (pd.Index, pd.Series, np.ndarray)) else values)
        codes = self.classes.get_indexer(values)
        if (codes < 0).any():
            text_index = pd.Index(self.classes.astype(str))
            retry = text_index.get_indexer(values.astype(str))
            codes = np.where(codes < 0, retry, codes)
        if (codes < 0).any():
            bad = sorted({str(v) for v in values[codes < 0]})[:5]
            raise UserInputError(
                f"{what} contain values that are not among the response labels {list(self.classes)}: {bad}."
            )
        return codes

    def align_items(self, series: pd.Series | Mapping[Any, Any], *, what: str) -> tuple[np.ndarray, np.ndarray]:
        """(item codes, values) for a Series indexed by task, e.g. gold labels or a context value."""
        series = pd.Series(series)
        series = series[~series.isna()]
        codes = self.item_codes(series.index, what=f"{what} tasks", strict=True)
        return codes, series.to_numpy()

    def subset(self, mask: np.ndarray) -> Responses:
        """The responses selected by a boolean mask, with the same item/worker/class coding."""
        mask = np.asarray(mask, dtype=bool)
        rep = replace(self.report, responses=int(mask.sum()), notes=list(self.report.notes))
        return replace(self, item=self.item[mask], worker=self.worker[mask], label=self.label[mask], report=rep)

    def with_items_resampled(self, item_draw: np.ndarray) -> Responses:
        """Bootstrap copy: items ``item_draw`` (codes, with repeats) become new items 0..len-1, with unique
        ids 0..len-1 (the source item of new item j is ``item_draw[j]``).  Sequences are not carried; see
        :meth:`with_sequences_resampled`."""
        item_draw = np.asarray(item_draw, dtype=np.int64)
        order = np.argsort(self.item, kind="stable")
        starts = np.searchsorted(self.item[order], np.arange(self.n_items + 1))
        lens = starts[item_draw + 1] - starts[item_draw]
        new_item = np.repeat(np.arange(len(item_draw)), lens)
        offset = np.arange(len(new_item)) - np.repeat(np.cumsum(lens) - lens, lens)  # rank within its item
        src = order[np.repeat(starts[item_draw], lens) + offset]
        return Responses(
            item=new_item,
            worker=self.worker[src],
            label=self.label[src],
            items=pd.RangeIndex(len(item_draw), name="bootstrap_item"),
            workers=self.workers,
            classes=self.classes,
            report=ValidationReport(rows_read=len(src), responses=len(src)),
        )

    def one_vs_rest(self, label: Any) -> Responses:
        """Binary copy: ``label`` against every other label (classes ``["not <label>", label]``), for binary-only
        analyses such as cartel detection on multi-class data."""
        code = int(self.label_codes([label], what="one-vs-rest label")[0])
        return replace(
            self,
            label=(self.label == code).astype(np.int64),
            classes=pd.Index([f"not {label}", label], dtype=object),
            report=replace(self.report, notes=list(self.report.notes)),
        )

    def with_sequences_resampled(self, sequence_draw: np.ndarray) -> tuple[Responses, np.ndarray]:
        """Block bootstrap for sequential data: whole sequences ``sequence_draw`` (codes, with repeats) become
        new sequences 0..len-1, positions kept.  Returns (copy, item_draw: source item of each new item)."""
        if self.sequence is None:
            raise UserInputError("these responses have no sequences to resample.")
        sequence_draw = np.asarray(sequence_draw, dtype=np.int64)
        bounds = self.sequence_bounds
        lens = bounds[sequence_draw + 1] - bounds[sequence_draw]
        offset = np.arange(int(lens.sum())) - np.repeat(np.cumsum(lens) - lens, lens)
        item_draw = self.item_order[np.repeat(bounds[sequence_draw], lens) + offset]
        boot = self.with_items_resampled(item_draw)
        boot = replace(
            boot,
            sequence=np.repeat(np.arange(len(sequence_draw), dtype=np.int64), lens),
            position=np.asarray(self.position)[item_draw],
            sequences=pd.RangeIndex(len(sequence_draw), name="bootstrap_sequence"),
        )
        return boot, item_draw

    # ------------------------------------------------------------- builders
    @classmethod
    def from_frame(
        cls,
        df: pd.DataFrame,
        *,
        task: str = "task",
        worker: str = "worker",
        label: str = "label",
        sequence: str | None = None,
        position: str | None = None,
        classes: Sequence[Any] | None = None,
        duplicates: str = "keep",
        min_workers: int = 2,
    ) -> Responses:
        """Validate and code a long-format table (crowd-kit columns by default).

        ``sequence``/``position`` default to the columns of those names when both are present.
        Raises :class:`UserInputError` with one actionable message for any unusable input.
        """
        if not isinstance(df, pd.DataFrame):
            raise UserInputError(f"expected a table (pandas DataFrame) of responses, got {type(df).__name__}.")
        if duplicates not in DUPLICATE_POLICIES:
            raise UserInputError(f"duplicates must be one of {DUPLICATE_POLICIES}, got {duplicates!r}.")
        if sequence is None and position is None and {"sequence", "position"} <= set(df.columns):
            sequence, position = "sequence", "position"
        if (sequence is None) != (position is None):
            raise UserInputError("sequential data needs both a sequence column and a position column.")
        wanted = {"task": task, "worker": worker, "label": label}
        if sequence is not None:
            wanted.update(sequence=sequence, position=position)
        missing = [f"{role} column '{col}'" for role, col in wanted.items() if col not in df.columns]
        if missing:
            raise UserInputError(
                f"missing {', '.join(missing)}; the table has columns {[str(c) for c in df.columns]}. "
                "Map the columns (e.g. --task-col/--worker-col/--label-col) or rename them."
            )
        if len(df) == 0:
            raise UserInputError("the responses table is empty: it has a header but no rows.")
        report = ValidationReport(rows_read=len(df), duplicate_policy=duplicates)
        cols = list(dict.fromkeys(wanted.values()))
        work = df[cols].copy()

        id_missing = _is_missing(work[task]) | _is_missing(work[worker])
        label_missing = _is_missing(work[label]) & ~id_missing
        if sequence is not None:
            id_missing |= _is_missing(work[sequence]) | work[position].isna().to_numpy()
        report.dropped_missing_id = int(id_missing.sum())
        report.dropped_missing_label = int(label_missing.sum())
        work = work[~(id_missing | label_missing)]
        if len(work) == 0:
            raise UserInputError("no usable responses: every row has a missing task, worker or label.")

        pair_dup = work.duplicated(subset=[task, worker], keep="first").to_numpy()
        report.duplicate_rows = int(pair_dup.sum())
        if report.duplicate_rows:
            if duplicates == "error":
                ex = work[pair_dup].iloc[0]
                raise UserInputError(
                    f"{report.duplicate_rows:,} rows repeat a (task, worker) pair, e.g. task {ex[task]!r} by worker "
                    f"{ex[worker]!r}; choose duplicates='keep', 'first' or 'last'."
                )
            if duplicates in ("first", "last"):
                keep = ~work.duplicated(subset=[task, worker], keep=duplicates).to_numpy()
                report.duplicates_removed = int((~keep).sum())
                work = work[keep]

        labels = work[label]
        if classes is None:
            class_index = sorted_index(labels.to_numpy())
        else:
            class_index = pd.Index(list(classes))
            if class_index.has_duplicates:
                raise UserInputError(f"the declared classes repeat a value: {list(class_index)}.")
        label_code = class_index.get_indexer(labels.to_numpy())
        if (label_code < 0).any():
            bad = sorted({str(v) for v in labels.to_numpy()[label_code < 0]})[:5]
            raise UserInputError(f"labels {bad} are not among the declared classes {list(class_index)}.")
        if len(class_index) < 2:
            raise UserInputError(
                f"only one label value ({class_index[0]!r}) occurs, so there is nothing to aggregate; "
                "pass the full list of classes if the others exist but were never chosen."
            )
        item_code, item_index = _factorize(work[task])
        worker_code, worker_index = _factorize(work[worker])
        if len(worker_index) < min_workers:
            raise UserInputError(
                f"only {len(worker_index)} annotator ({worker_index[0]!r}) gave responses; estimating reliability "
                f"needs at least {min_workers} annotators."
            )

        seq_codes = pos = seq_index = None
        if sequence is not None:
            seq_codes, seq_index, pos = _code_sequences(
                work, item_code, len(item_index), sequence, position, report, worker
            )

        report.responses = len(work)
        return cls(
            item=item_code,
            worker=worker_code,
            label=label_code.astype(np.int64),
            items=item_index,
            workers=worker_index,
            classes=class_index,
            report=report,
            sequence=seq_codes,
            position=pos,
            sequences=seq_index,
        )

    @classmethod
    def from_wide(
        cls,
        df: pd.DataFrame,
        *,
        task: str | None = None,
        classes: Sequence[Any] | None = None,
        min_workers: int = 2,
    ) -> Responses:
        """Wide format: one row per item, one column per annotator, blanks = no response.

        ``task`` names the item-id column; without it the index is the item id.
        """
        if not isinstance(df, pd.DataFrame):
            raise UserInputError(f"expected a table (pandas DataFrame), got {type(df).__name__}.")
        if len(df) == 0:
            raise UserInputError("the responses table is empty: it has a header but no rows.")
        if task is not None:
            if task not in df.columns:
                raise UserInputError(
                    f"missing task column '{task}'; the table has columns {[str(c) for c in df.columns]}."
                )
            df = df.set_index(task)
        if df.shape[1] == 0:
            raise UserInputError("the wide table has no annotator columns.")
        wide = df.copy()
        wide.index = wide.index.rename("task")
        wide.columns = pd.Index(wide.columns, name="worker")
        long = wide.stack(future_stack=True).rename("label").reset_index()
        blank = _is_missing(long["label"])
        report_blank = int(blank.sum())
        resp = cls.from_frame(long[~blank], classes=classes, min_workers=min_workers)
        resp.report.rows_read = len(wide)
        resp.report.notes.append(
            f"Wide table: {len(wide):,} items × {wide.shape[1]:,} annotators; {report_blank:,} blank cells = no response."
        )
        return resp


def _code_sequences(
    work: pd.DataFrame,
    item_code: np.ndarray,
    n_items: int,
    sequence: str,
    position: str,
    report: ValidationReport,
    worker_col: str,
) -> tuple[np.ndarray, pd.Index, np.ndarray]:
    """Per-item sequence code and position, with the checks sequential models rely on."""
    pos_raw = pd.to_numeric(work[position], errors="coerce")
    if pos_raw.isna().any() or (pos_raw % 1 != 0).any():
        bad = work[position][pos_raw.isna() | (pos_raw % 1 != 0)].iloc[0]
        raise UserInputError(f"position column '{position}' must hold whole numbers; found {bad!r}.")
    seq_code_rows, seq_index = _factorize(work[sequence])
    pos_rows = pos_raw.to_numpy().astype(np.int64)
    seq_of_item = np.full(n_items, -1, dtype=np.int64)
    pos_of_item = np.full(n_items, -1, dtype=np.int64)
    seq_of_item[item_code] = seq_code_rows
    pos_of_item[item_code] = pos_rows
    conflict = (seq_of_item[item_code] != seq_code_rows) | (pos_of_item[item_code] != pos_rows)
    if conflict.any():
        row = work.iloc[int(np.flatnonzero(conflict)[0])]
        raise UserInputError(
            f"task {row.iloc[0]!r} appears at more than one (sequence, position); each task must sit at one place."
        )
    key = pd.DataFrame({"s": seq_of_item, "p": pos_of_item})
    clash = key.duplicated(keep=False).to_numpy()
    if clash.any():
        i = int(np.flatnonzero(clash)[0])
        raise UserInputError(
            f"two different tasks share sequence {seq_index[seq_of_item[i]]!r} position {pos_of_item[i]}; "
            "positions must be unique within a sequence."
        )
    order = np.lexsort((pos_of_item, seq_of_item))
    s_sorted, p_sorted = seq_of_item[order], pos_of_item[order]
    same = s_sorted[1:] == s_sorted[:-1]
    gaps = int(((p_sorted[1:] - p_sorted[:-1]) > 1)[same].sum())
    if gaps:
        report.notes.append(
            f"{gaps:,} gaps in sequence positions (e.g. a missing token); the tokens on either side are "
            "treated as neighbours."
        )
    # within each annotator's pass over a sequence, rows should come in position order
    worker_rows = pd.factorize(work[worker_col])[0]
    grp = np.lexsort((seq_code_rows, worker_rows))  # stable: keeps row order inside a group
    same_grp = (worker_rows[grp][1:] == worker_rows[grp][:-1]) & (seq_code_rows[grp][1:] == seq_code_rows[grp][:-1])
    unsorted = int((np.diff(pos_rows[grp]) < 0)[same_grp].sum())
    if unsorted:
        report.notes.append(
            f"{unsorted:,} rows came before an earlier position of the same sequence and annotator; "
            "order never matters here: tokens are placed by their position."
        )
    return seq_of_item, seq_index, pos_of_item


def as_responses(data: Responses | pd.DataFrame, **kwargs: Any) -> Responses:
    """Accept either a :class:`Responses` or a long-format DataFrame (crowd-kit columns)."""
    if isinstance(data, Responses):
        return data
    return Responses.from_frame(data, **kwargs)
