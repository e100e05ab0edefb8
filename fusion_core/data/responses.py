"""The response model: who labelled what, as integer-coded numpy arrays.

Every method works on a :class:`Responses` object. It holds one row per response (``item``, ``worker``,
``label`` integer codes, duplicates kept as separate rows unless a policy removed them), the mapping back
to the user's ids (``items``, ``workers``, ``classes`` as :class:`pandas.Index`), optional per-item
sequence / position codes for sequential data, and the :class:`ValidationReport` saying what was dropped
and why.  EM loops only ever touch the numpy arrays and the sparse count matrix built from them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

import numpy as np
import pandas as pd
import scipy.sparse as sp

from fusion_core.data.coding import code_long, code_table, code_wide
from fusion_core.data.columns import CodedSizes
from fusion_core.data.readers import EncodedTable
from fusion_core.data.text import difference_hint, explain_unknown, show_values, text_values
from fusion_core.data.times import TimeColumn
from fusion_core.data.validation import ValidationReport
from fusion_core.errors import UserInputError

DEFAULT_COLUMNS = {"task": "task", "worker": "worker", "label": "label"}


@dataclass(frozen=True, eq=False)
class Responses(CodedSizes):
    """Integer-coded responses.  ``confusion`` arrays elsewhere use the ``classes`` order of this object.

    Attributes
    ----------
    item, worker, label : int64 arrays of length ``n_responses`` (codes into ``items``/``workers``/``classes``).
    items, workers, classes : the user's ids / label values in code order.
    sequence, position : optional int arrays of length ``n_items`` (sequence code and position of each item).
    sequences : the user's sequence ids in code order (or ``None``).
    weight : optional float array of length ``n_responses``: each response's confidence in [0, 1] (e.g. an LLM
        judge's stated probability), read with ``Responses.from_frame(df, confidence="col")``.  ``None`` means
        every response weighs 1.  Methods that can weigh responses read it as a *fractional vote*: majority
        vote adds ``c`` instead of 1, and every model built on :attr:`counts` (Dawid–Skene, ``ordinal-em``)
        multiplies the response's log-likelihood term by ``c`` (a tempered, weighted likelihood; ``c = 0``
        drops the response).  Agreement statistics ignore it.
    time : optional :class:`~fusion_core.data.times.TimeColumn`: when each response was given (a timestamp or a
        batch/round number), read with ``time="col"``; only reliability over time
        (:mod:`fusion_core.diagnostics.drift`) reads it.
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
    weight: np.ndarray | None = None
    time: TimeColumn | None = None

    # ------------------------------------------------------------------ sizes (the rest: CodedSizes)
    @property
    def n_classes(self) -> int:
        return len(self.classes)

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
        values = np.ones(self.n_responses) if self.weight is None else np.asarray(self.weight, dtype=float)
        mat = sp.csr_matrix(
            (values, (self.item, self.worker * k + self.label)),
            shape=(self.n_items, self.n_workers * k),
        )
        mat.sum_duplicates()
        return mat

    @cached_property
    def counts_t(self) -> sp.csr_matrix:
        """Transpose of :attr:`counts` in CSR form (fast ``counts.T @ dense``)."""
        return self.counts.T.tocsr()

    def vote_counts(self, weights: np.ndarray | None = None, *, use_confidence: bool = True) -> np.ndarray:
        """``n_items × K`` (weighted) vote counts; ``weights`` is one weight per worker.  Each response also counts
        its confidence (:attr:`weight`) unless ``use_confidence=False`` (plain counts, e.g. for agreement)."""
        w = None if weights is None else np.asarray(weights, dtype=float)[self.worker]
        if use_confidence and self.weight is not None:
            w = np.asarray(self.weight, dtype=float) if w is None else w * self.weight
        flat = np.bincount(self.item * self.n_classes + self.label, weights=w, minlength=self.n_items * self.n_classes)
        return flat.reshape(self.n_items, self.n_classes).astype(float)

    def dense_matrix(self, missing: int = -1) -> np.ndarray:
        """``n_workers × n_items`` label-code matrix with ``missing`` where no response (last duplicate wins)."""
        out = np.full((self.n_workers, self.n_items), missing, dtype=np.int64)
        out[self.worker, self.item] = self.label
        return out

    # -------------------------------------------------------------- sequences
    @cached_property
    def item_order(self) -> np.ndarray:
        """Items sorted by (sequence, position); identity order when there are no sequences."""
        if self.sequence is None or self.position is None:
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
        if self.weight is not None:
            df["confidence"] = self.weight
        if self.time is not None:
            df["time"] = self.time.display().to_numpy()
        if self.sequence is not None and self.sequences is not None and self.position is not None:
            df["sequence"] = self.sequences.take(self.sequence[self.item])
            df["position"] = self.position[self.item]
        return df

    def item_codes(self, ids: Iterable[Any], *, what: str = "tasks", strict: bool = True) -> np.ndarray:
        """Codes of the given item ids; ids not in the data raise (``strict``) or map to -1.  Ids are matched
        exactly, then by canonical text (a gold file read as text matches integer task ids)."""
        idx = pd.Index(list(ids) if not isinstance(ids, (pd.Index, pd.Series, np.ndarray)) else ids)
        codes = _match(self.items, idx)
        if strict and (codes < 0).any():
            bad = list(pd.unique(np.asarray(idx[codes < 0], dtype=object)))
            raise UserInputError(
                f"{len(bad):,} {what} are not in the responses ({show_values(bad)}){difference_hint(bad, self.items)}; "
                "check that they use the same task ids as the answers file."
            )
        return codes

    def label_codes(self, values: Iterable[Any], *, what: str = "labels") -> np.ndarray:
        """Codes of label values in :attr:`classes` (exact, then canonical text); unknown labels raise
        :class:`UserInputError` showing the values as written and what differs."""
        idx = pd.Index(list(values) if not isinstance(values, (pd.Index, pd.Series, np.ndarray)) else values)
        codes = _match(self.classes, idx)
        if (codes < 0).any():
            bad = list(pd.unique(np.asarray(idx[codes < 0], dtype=object)))
            raise UserInputError(explain_unknown(bad, list(self.classes), what=what, among="the response labels"))
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
        weight = None if self.weight is None else self.weight[mask]
        time = None if self.time is None else self.time.take(mask)
        return replace(
            self,
            item=self.item[mask],
            worker=self.worker[mask],
            label=self.label[mask],
            report=rep,
            weight=weight,
            time=time,
        )

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
            weight=None if self.weight is None else self.weight[src],
            time=None if self.time is None else self.time.take(src),
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
    def from_frame(cls, df: pd.DataFrame, **kwargs: Any) -> Responses:
        """Validate and code a long-format table (crowd-kit columns ``task, worker, label`` by default); see
        :func:`fusion_core.data.coding.code_long` for the options."""
        return code_long(df, into=cls, **kwargs)

    @classmethod
    def from_wide(cls, df: pd.DataFrame, **kwargs: Any) -> Responses:
        """Wide format: one row per item, one column per annotator, blanks = no response; see
        :func:`fusion_core.data.coding.code_wide`."""
        return code_wide(df, into=cls, **kwargs)

    @classmethod
    def from_table(cls, table: EncodedTable, **kwargs: Any) -> Responses:
        """A long-format table read by :mod:`fusion_core.data.readers` (its columns are handed over, not copied);
        see :func:`fusion_core.data.coding.code_table`."""
        return code_table(table, into=cls, **kwargs)


def _match(known: pd.Index, wanted: pd.Index) -> np.ndarray:
    """Positions of ``wanted`` in ``known`` (−1 where absent): exact match first, then by canonical text."""
    codes = known.get_indexer(wanted) if len(wanted) else np.zeros(0, dtype=np.int64)
    if (codes < 0).any():
        text_known = text_values(known)
        if not text_known.has_duplicates:
            retry = text_known.get_indexer(text_values(wanted))
            codes = np.where(codes < 0, retry, codes)
    return np.asarray(codes, dtype=np.int64)


def as_responses(data: Responses | pd.DataFrame, **kwargs: Any) -> Responses:
    """Accept either a :class:`Responses` or a long-format DataFrame (crowd-kit columns)."""
    if isinstance(data, Responses):
        return data
    return Responses.from_frame(data, **kwargs)


def canonical_order(resp: Responses) -> Responses:
    """The same responses sorted by (task, annotator, label) codes (then weight): a fit then sees the same arrays
    whatever the row order of the input, so floating-point sums (and near-ties) cannot depend on it.  Used by
    ``auto`` and by the methods that declare ``canonical_rows`` (:class:`~fusion_core.methods.base.Aggregator`)."""
    if resp.weight is None and resp.n_items * resp.n_workers * resp.n_classes < 2**62:
        # one int64 key, stably sorted: the lexsort's order (ties keep their position), in a third of its time
        key = (resp.item.astype(np.int64, copy=False) * resp.n_workers + resp.worker) * resp.n_classes + resp.label
        order = np.argsort(key, kind="stable")
    else:
        keys = (
            (resp.label, resp.worker, resp.item)
            if resp.weight is None
            else (resp.weight, resp.label, resp.worker, resp.item)
        )
        order = np.lexsort(keys)
    weight = None if resp.weight is None else resp.weight[order]
    return replace(resp, item=resp.item[order], worker=resp.worker[order], label=resp.label[order], weight=weight)
