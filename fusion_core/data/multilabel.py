"""Multi-label responses: each annotator reports a *set* of labels per task (spec ``multilabel.md`` §2).

:class:`MultiLabelResponses` is the multi-label counterpart of :class:`~fusion_core.data.responses.Responses`: one
row per (task, annotator) response with item/worker codes, the reported bits ``X`` (responses × labels) and an
optional observed mask ``O`` (partial judgments), plus the user's ids.  :func:`parse_multilabel` reads both input
formats: format A (one row per (task, worker), the label set as ``sep``-joined text or a list/tuple/set) and
format B (one row per (task, worker, label) with a ``present`` column).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from fusion_core.data.columns import CodedSizes
from fusion_core.errors import AggregationWarning, UserInputError

_PRESENT = {"1": True, "0": False, "true": True, "false": False, "yes": True, "no": False, "1.0": True, "0.0": False}


@dataclass
class MultiLabelResponses(CodedSizes):
    """Responses r with item/worker codes, bits X (R × C, bool) and observed mask O (None = all observed)."""

    item: np.ndarray
    worker: np.ndarray
    X: np.ndarray
    O: np.ndarray | None
    items: pd.Index
    workers: pd.Index
    labels: pd.Index
    report: dict[str, Any] = field(default_factory=dict)

    @property
    def n_labels(self) -> int:
        return len(self.labels)

    def subset(self, mask: np.ndarray) -> MultiLabelResponses:
        """Selected responses with the same item/worker/label coding."""
        m = np.asarray(mask, bool)
        O = None if self.O is None else self.O[m]
        return MultiLabelResponses(
            self.item[m], self.worker[m], self.X[m], O, self.items, self.workers, self.labels, dict(self.report)
        )

    def to_frame(self, sep: str = "|") -> pd.DataFrame:
        """Format A (closed world only)."""
        vals = self.labels.astype(str).to_numpy()
        uniq, inv = unique_rows(self.X)
        names = np.array([sep.join(vals[row]) for row in uniq], dtype=object)  # one per distinct set
        return pd.DataFrame(
            {"task": self.items.take(self.item), "worker": self.workers.take(self.worker), "label": names[inv]}
        )

    def gold_sets(self, true_labels: pd.Series | Mapping[Any, Any], *, sep: str = "|") -> tuple[np.ndarray, np.ndarray]:
        """Gold label sets (a Series by task of label sets, as in format A) as (item codes, bits gold × labels)."""
        gold = pd.Series(true_labels, dtype=object)
        if gold.index.has_duplicates:
            raise UserInputError(
                f"gold label sets must be one per task; repeated tasks: {list(gold.index[gold.index.duplicated()][:5])}."
            )
        codes = self.items.get_indexer(gold.index)
        if (codes < 0).any():
            retry = pd.Index(self.items.astype(str)).get_indexer(gold.index.astype(str))
            codes = np.where(codes < 0, retry, codes)
        if (codes < 0).any():
            raise UserInputError(
                f"{int((codes < 0).sum())} gold tasks are not in the responses (for example "
                f"{list(gold.index[codes < 0][:5])}); check that they use the same task ids."
            )
        rows, vals = explode_sets(gold.reset_index(drop=True), sep)
        lab = self.labels.get_indexer(pd.Index(vals, dtype=object)) if len(vals) else np.zeros(0, np.int64)
        if (lab < 0).any():
            raise UserInputError(
                f"gold label sets use labels that are not in the responses: {sorted(set(map(str, vals[lab < 0])))[:5]}; "
                "pass them in labels=[...] or correct the gold file."
            )
        bits = np.zeros((len(gold), self.n_labels), bool)
        bits[rows, lab] = True
        return codes.astype(np.int64), bits


def unique_rows(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct rows of a boolean matrix and the index of each row among them (bit masks when ≤ 62 columns)."""
    if X.shape[1] <= 62:  # encode each set as an integer bit mask: a 1-D unique is far faster
        code = X.astype(np.int64) @ (np.int64(1) << np.arange(X.shape[1], dtype=np.int64))
        _, first, inv = np.unique(code, return_index=True, return_inverse=True)
        return X[first], inv.ravel()
    uniq, inv = np.unique(X, axis=0, return_inverse=True)
    return uniq, inv.ravel()


def explode_sets(col: pd.Series, sep: str) -> tuple[np.ndarray, np.ndarray]:
    """Label sets (``sep``-joined text, or lists/tuples/sets) as (row position, label) pairs, blanks dropped."""
    codes, urows, uvals = distinct_sets(col, sep)
    counts = np.bincount(urows, minlength=int(codes.max()) + 1 if len(codes) else 0)
    if not len(urows):
        return np.zeros(0, np.int64), uvals
    start = np.concatenate([[0], np.cumsum(counts)[:-1]])
    per_row = counts[codes]
    rows = np.repeat(np.arange(len(codes), dtype=np.int64), per_row)
    first = np.cumsum(per_row) - per_row  # each row's first pair
    within = np.arange(len(rows), dtype=np.int64) - np.repeat(first, per_row)
    return rows, uvals[np.repeat(start[codes], per_row) + within]


def distinct_sets(col: pd.Series, sep: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Label sets parsed once per *distinct* text: (code of each row's distinct set, (distinct set, label) pairs as
    set codes and labels, blanks dropped).  Text columns repeat few distinct sets, so splitting the distinct texts
    only makes the parse linear in the rows with a tiny constant (the split was a Python call per row)."""
    if not sep:
        raise UserInputError("the label-set separator sep must be a non-empty text such as '|'.")
    col = col.reset_index(drop=True)
    if pd.api.types.infer_dtype(col, skipna=False) == "string":  # the common case: vectorised split/strip
        codes, uniq = pd.factorize(col)
        ex = pd.Series(uniq).str.split(sep, regex=False).explode().str.strip()
        urows, uvals = _nonblank(ex.index.to_numpy(), ex.to_numpy(dtype=object), (ex != "").to_numpy())
        return codes.astype(np.int64), urows, uvals
    tokens = col.map(
        lambda v: (
            v.split(sep)
            if isinstance(v, str)
            else (list(v) if isinstance(v, (list, tuple, set, frozenset, np.ndarray)) else [v])
        )
    )
    ex = tokens.explode()
    vals = np.array([v.strip() if isinstance(v, str) else v for v in ex.to_numpy(dtype=object)], dtype=object)
    keep = np.array(
        [
            not (isinstance(v, str) and v == "") and not (v is None or (isinstance(v, float) and np.isnan(v)))
            for v in vals
        ],
        bool,
    )
    rows, vals = _nonblank(ex.index.to_numpy(), vals, keep)
    return np.arange(len(col), dtype=np.int64), rows, vals


def _nonblank(rows: np.ndarray, vals: np.ndarray, keep: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return rows[keep].astype(np.int64), vals[keep]


def _parse_present(v: pd.Series) -> np.ndarray:
    if pd.api.types.is_bool_dtype(v.dtype):
        return v.to_numpy(bool)
    out = v.astype(str).str.strip().str.lower().map(_PRESENT)
    if out.isna().any():
        r = int(np.flatnonzero(out.isna().to_numpy())[0])
        raise UserInputError(f"row {r}: 'present' must be 0/1, true/false or yes/no, got {v.iloc[r]!r}.")
    return out.to_numpy(bool)


def _sorted(values: Sequence[Any]) -> list[Any]:
    try:
        return sorted(values)
    except TypeError:
        return sorted(values, key=str)


def _vocabulary(reported: Sequence[Any] | np.ndarray, labels: Sequence[Any] | None, sep: str) -> pd.Index:
    rep = pd.unique(pd.Series(list(reported), dtype=object)) if len(reported) else np.array([], dtype=object)
    if labels is not None:
        voc = list(labels)
        known = set(voc)
        voc += _sorted([x for x in rep if x not in known])
    else:
        voc = _sorted(list(rep))
    bad = [x for x in voc if isinstance(x, str) and sep in x]
    if bad:
        raise UserInputError(f"labels {bad[:5]} contain the separator {sep!r}; choose another sep.")
    if len(voc) == 0:
        raise UserInputError("no label is reported and no vocabulary was given (labels=[...]).")
    return pd.Index(voc, dtype=object)


def parse_multilabel(
    df: pd.DataFrame | MultiLabelResponses,
    *,
    task: str = "task",
    worker: str = "worker",
    label: str = "label",
    present: str | None = None,
    sep: str = "|",
    labels: Sequence[Any] | None = None,
    unlisted: str = "absent",
    duplicates: str = "keep",
) -> MultiLabelResponses:
    """Both input formats of spec §2 (module docstring); a :class:`MultiLabelResponses` is returned unchanged.

    ``labels`` adds vocabulary labels nobody reported; ``unlisted`` (format B): labels not listed for a (task,
    worker) pair are "absent" (closed world) or "missing"; ``duplicates`` (format A): repeated (task, worker) rows
    are kept, reduced to the last one, or an "error"."""
    if isinstance(df, MultiLabelResponses):
        return df
    if not isinstance(df, pd.DataFrame):
        raise UserInputError(f"expected a table of multi-label responses, got {type(df).__name__}.")
    if present is None and "present" in df.columns:
        present = "present"
    cols = [task, worker, label] + ([present] if present else [])
    miss = [c for c in cols if c not in df.columns]
    if miss:
        raise UserInputError(f"missing column(s) {miss}; the table has {[str(c) for c in df.columns]}.")
    if len(df) == 0:
        raise UserInputError("the responses table is empty.")
    if unlisted not in ("absent", "missing"):
        raise UserInputError(f"unlisted must be 'absent' or 'missing', got {unlisted!r}.")
    if duplicates not in ("keep", "last", "error"):
        raise UserInputError(f"duplicates must be 'keep', 'last' or 'error', got {duplicates!r}.")
    ids = df[[task, worker]]
    if ids.isna().any().any():
        r = int(np.flatnonzero(ids.isna().any(axis=1).to_numpy())[0])
        raise UserInputError(f"row {r}: task or worker id missing.")
    report: dict[str, Any] = {"rows_read": len(df)}
    if present is None:
        work = _deduplicate(df, task, worker, duplicates, report)
        return _parse_format_a(work, df[label], task, worker, sep=sep, labels=labels, report=report)
    return _parse_format_b(df, (task, worker, label, present), sep=sep, labels=labels, unlisted=unlisted, report=report)


def _deduplicate(df: pd.DataFrame, task: str, worker: str, duplicates: str, report: dict[str, Any]) -> pd.DataFrame:
    """Format A rows after the duplicate policy, with their row position in ``_row``."""
    work = df[[task, worker]].copy()
    work["_row"] = np.arange(len(df))
    report["duplicate_rows"] = int(work.duplicated(subset=[task, worker]).sum())
    if report["duplicate_rows"] and duplicates == "error":
        ex = work[work.duplicated(subset=[task, worker], keep=False).to_numpy()].iloc[0]
        raise UserInputError(
            f"{report['duplicate_rows']} rows repeat a (task, worker) pair, e.g. task {ex[task]!r} by {ex[worker]!r}."
        )
    if report["duplicate_rows"] and duplicates == "last":
        work = work[~work.duplicated(subset=[task, worker], keep="last").to_numpy()]
    return work


def _parse_format_a(
    work: pd.DataFrame,
    col: pd.Series,
    task: str,
    worker: str,
    *,
    sep: str,
    labels: Sequence[Any] | None,
    report: dict[str, Any],
) -> MultiLabelResponses:
    isna = col.isna().to_numpy()
    if isna.any():
        bad = [int(r) for r in np.flatnonzero(isna)[:5]]
        raise UserInputError(f"rows {bad}: label set missing; use an empty string for 'no labels'.")
    codes, rows, vals = distinct_sets(col.iloc[work["_row"].to_numpy()], sep)  # rows: distinct sets
    voc = _vocabulary(vals, labels, sep)
    code = voc.get_indexer(pd.Index(vals, dtype=object)) if len(vals) else np.zeros(0, np.int64)
    pairs = pd.DataFrame({"r": rows, "c": code}).drop_duplicates()
    n_sets = int(codes.max()) + 1 if len(codes) else 0
    repeated = np.bincount(rows, minlength=n_sets) - np.bincount(pairs["r"].to_numpy(), minlength=n_sets)
    report["repeated_labels_in_set"] = int(repeated[codes].sum())
    item_code, items = pd.factorize(work[task], sort=True)
    worker_code, workers = pd.factorize(work[worker], sort=True)
    Xs = np.zeros((n_sets, len(voc)), dtype=bool)
    Xs[pairs["r"].to_numpy(), pairs["c"].to_numpy()] = True
    X = Xs[codes]
    report["responses"] = len(work)
    item_code, worker_code = item_code.astype(np.int64), worker_code.astype(np.int64)
    return MultiLabelResponses(item_code, worker_code, X, None, pd.Index(items), pd.Index(workers), voc, report)


def _parse_format_b(
    df: pd.DataFrame,
    names: tuple[str, str, str, str],
    *,
    sep: str,
    labels: Sequence[Any] | None,
    unlisted: str,
    report: dict[str, Any],
) -> MultiLabelResponses:
    task, worker, label, present = names
    if df[label].isna().any():
        r = int(np.flatnonzero(df[label].isna().to_numpy())[0])
        raise UserInputError(f"row {r}: label missing in format B (one row per task, worker, label).")
    pres = _parse_present(df[present])
    work = pd.DataFrame(
        {
            "t": df[task].to_numpy(),
            "w": df[worker].to_numpy(),
            "l": df[label].to_numpy(),
            "p": pres,
            "_row": np.arange(len(df)),
        }
    )
    nun = work.groupby(["t", "w", "l"], sort=False)["p"].nunique()
    if (nun > 1).any():
        bad = nun[nun > 1].index[:5].tolist()
        rows = work.set_index(["t", "w", "l"]).loc[bad[:1], "_row"].tolist()
        raise UserInputError(
            f"conflicting duplicate rows (present both 0 and 1) for (task, worker, label) {bad}; rows {rows}."
        )
    before = len(work)
    work = work.drop_duplicates(subset=["t", "w", "l"])
    report["collapsed_duplicates"] = before - len(work)
    voc = _vocabulary(work["l"].to_numpy(), labels, sep)
    pair_df = work[["t", "w"]].drop_duplicates()
    item_code, items = pd.factorize(pair_df["t"], sort=True)
    worker_code, workers = pd.factorize(pair_df["w"], sort=True)
    r = pd.MultiIndex.from_frame(pair_df).get_indexer(pd.MultiIndex.from_frame(work[["t", "w"]]))
    c = voc.get_indexer(pd.Index(work["l"].to_numpy(), dtype=object))
    p = work["p"].to_numpy()
    X = np.zeros((len(pair_df), len(voc)), bool)
    X[r[p], c[p]] = True
    O = None
    if unlisted == "missing":
        O = np.zeros((len(pair_df), len(voc)), bool)
        O[r, c] = True
    elif work["p"].nunique() > 1 and pd.Series(c).groupby(r).agg(frozenset).nunique() > 1:
        warnings.warn(
            "format B lists different label subsets for different (task, worker) pairs while unlisted='absent'; "
            "the data look like partial judgments: consider unlisted='missing'.",
            AggregationWarning,
            stacklevel=3,
        )
    report["responses"] = len(pair_df)
    item_code, worker_code = item_code.astype(np.int64), worker_code.astype(np.int64)
    return MultiLabelResponses(item_code, worker_code, X, O, pd.Index(items), pd.Index(workers), voc, report)
