"""Appending a batch of coded responses to coded responses (incremental fits): one coding for both.

Items, annotators and labels already known keep their codes; those that appear for the first time in the batch
are appended after them, in the batch's order.  Ids are matched exactly as written (the batch's text must equal
the earlier text).  The result holds every response of both (repeated (task, annotator) pairs stay separate, as
``duplicates="keep"`` does), so a fit of it equals a fit of the concatenated table up to the order of the codes.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from fusion_core.data.coding import _class_index
from fusion_core.data.columns import Coded, check_columns, role_codes
from fusion_core.data.responses import Responses
from fusion_core.data.text import text_values
from fusion_core.data.validation import ValidationReport
from fusion_core.errors import UserInputError


@dataclass(frozen=True)
class Appended:
    """The merged responses; the earlier items, annotators and labels keep their codes (the first
    ``n_old_items`` items, ``n_old_workers`` annotators, ``n_old_classes`` labels); ``n_new_responses`` is the
    batch's size; ``maps`` the id → code dictionaries of items and annotators (for the next batch)."""

    responses: Responses
    n_old_classes: int
    n_old_items: int
    n_old_workers: int
    n_new_responses: int
    maps: tuple[dict[Any, int], dict[Any, int]]


def _union(old: pd.Index, new: pd.Index, known: dict[Any, int] | None) -> tuple[pd.Index, np.ndarray, dict[Any, int]]:
    """``old`` followed by the values of ``new`` it lacks; the codes of ``new``'s values in the union; the id → code
    dictionary of the union.  Matched through a dictionary (pandas' ``get_indexer`` on text indexes converts the
    whole of ``old`` on every call), which the caller may keep for the next batch (``known``, ``old``'s)."""
    if known is None or len(known) != len(old):
        known = dict(zip(old.tolist(), range(len(old)), strict=True))
    values = new.tolist()
    n_old = len(old)
    # one C-level pass: a known id returns its code, a new one is inserted with the code it gets when every id of
    # the batch is new (the common case: no second pass)
    cand = range(n_old, n_old + len(values))
    pos = np.fromiter(map(known.setdefault, values, cand), dtype=np.int64, count=len(values))
    missing = np.flatnonzero(pos >= n_old)
    if not len(missing):
        return old, pos, known
    if len(missing) < len(values):  # some were known: the new ones' codes close up (their entries rewritten)
        codes = n_old + np.arange(len(missing))
        pos[missing] = codes
        known.update(zip(map(values.__getitem__, missing.tolist()), codes.tolist(), strict=True))
    fresh = new[missing]
    return old.append(fresh), pos, known


def code_batch(data: Responses | pd.DataFrame, old: Responses) -> Responses:
    """A batch (long format with crowd-kit columns, or coded) coded with the earlier classes first, so a batch may
    use one label only or new labels, and may come from one annotator.  A table's columns follow the value rules of
    a fit (:func:`~fusion_core.data.columns.role_codes`: each column factorised once) and rows with a missing id or
    label are dropped; the batch's own items and annotators keep their order of first appearance (not sorted:
    :func:`append_responses` appends the new ones after the earlier ones anyway)."""
    if isinstance(data, Responses):
        return data
    if not isinstance(data, pd.DataFrame):
        raise UserInputError(f"expected a table (pandas DataFrame) of responses, got {type(data).__name__}.")
    check_columns({"task": "task", "worker": "worker", "label": "label"}, list(data.columns))
    if len(data) == 0:
        raise UserInputError("the batch of responses is empty: it has a header but no rows.")
    task, worker, label = (role_codes(data[c], column=c) for c in ("task", "worker", "label"))
    report = ValidationReport(rows_read=len(data))
    id_missing = (task.codes < 0) | (worker.codes < 0)
    label_missing = (label.codes < 0) & ~id_missing
    report.dropped_missing_id, report.dropped_missing_label = int(id_missing.sum()), int(label_missing.sum())
    if report.dropped_missing_id or report.dropped_missing_label:
        keep = ~(id_missing | label_missing)
        task, worker, label = _used(task.take(keep)), _used(worker.take(keep)), label.take(keep)
    if not len(task.codes):
        raise UserInputError("no usable responses in the batch: every row has a missing task, worker or label.")
    seen = label.values[np.bincount(label.codes, minlength=len(label.values)) > 0]
    known = set(text_values(pd.Index(old.classes)))
    extra = [v for v, t in zip(seen, text_values(seen), strict=True) if v not in old.classes and t not in known]
    cls = _class_index(label, [*old.classes, *extra])
    report.responses = len(task.codes)
    return Responses(
        item=task.codes,
        worker=worker.codes,
        label=cls.codes,
        items=task.values,
        workers=worker.values,
        classes=cls.values,
        report=report,
    )


def _used(col: Coded) -> Coded:
    """``col`` without the values no row uses (kept in their order)."""
    used = np.bincount(col.codes, minlength=len(col.values)) > 0
    if used.all():
        return col
    return Coded((np.cumsum(used) - 1)[col.codes], col.values[used])


def append_responses(old: Responses, new: Responses, maps: tuple[dict[Any, int], ...] | None = None) -> Appended:
    """``old`` and the batch ``new`` in one coding (module docstring).  ``maps``: the previous result's ``maps``
    (id → code dictionaries of items and annotators), so a stream of batches does not rebuild them."""
    if old.has_sequences or new.has_sequences:
        raise UserInputError("incremental updates take plain responses; sequences need a full refit.")
    known_items, known_workers = maps if maps is not None else (None, None)
    items, imap, item_codes = _union(pd.Index(old.items), pd.Index(new.items), known_items)
    workers, wmap, worker_codes = _union(pd.Index(old.workers), pd.Index(new.workers), known_workers)
    classes, cmap, _ = _union(pd.Index(old.classes), pd.Index(new.classes), None)
    weight = None
    if old.weight is not None or new.weight is not None:
        ow = old.weight if old.weight is not None else np.ones(old.n_responses)
        nw = new.weight if new.weight is not None else np.ones(new.n_responses)
        weight = extend_buffer(ow, nw)
    report = ValidationReport(
        rows_read=old.report.rows_read + new.report.rows_read,
        responses=old.n_responses + new.n_responses,
        dropped_missing_label=old.report.dropped_missing_label + new.report.dropped_missing_label,
        dropped_missing_id=old.report.dropped_missing_id + new.report.dropped_missing_id,
        notes=[*old.report.notes, *new.report.notes],
    )
    merged = Responses(
        item=extend_buffer(old.item, imap[new.item]),
        worker=extend_buffer(old.worker, wmap[new.worker]),
        label=extend_buffer(old.label, cmap[new.label]),
        items=items,
        workers=workers,
        classes=classes,
        report=report,
        weight=weight,
    )
    return Appended(merged, old.n_classes, old.n_items, old.n_workers, new.n_responses, (item_codes, worker_codes))


#: buffers made by :func:`extend_buffer`, by id: (a weak reference to the buffer, rows in use)
_GROWN: dict[int, tuple[weakref.ref[np.ndarray], int]] = {}

#: spare room of a new buffer: a stream of batches moves each earlier response O(1) times on average
GROWTH = 1.5


def extend_buffer(old: np.ndarray, new: np.ndarray) -> np.ndarray:
    """``old`` followed by ``new`` without copying ``old`` when it is the used front of a buffer made here whose next
    rows are free: the batch is written there and a longer view returned (``old`` itself, a view of the front,
    never changes).  Otherwise a new buffer with :data:`GROWTH` times the room.  A second batch appended to the same
    ``old`` finds the rows taken (the buffer's use is past ``old``'s end) and copies."""
    n, m = len(old), len(new)
    base = old.base
    if isinstance(base, np.ndarray) and id(base) in _GROWN:
        ref, used = _GROWN[id(base)]
        if (
            ref() is base
            and used == n
            and base.ndim == 1
            and old.dtype == base.dtype
            and new.dtype == base.dtype
            and len(base) >= n + m
            and old.ctypes.data == base.ctypes.data
            and old.strides == base.strides
        ):
            base[n : n + m] = new
            _GROWN[id(base)] = (ref, n + m)
            return base[: n + m]
    buf = np.empty(int((n + m) * GROWTH) + 16, dtype=np.result_type(old, new))
    buf[:n] = old
    buf[n : n + m] = new
    _GROWN[id(buf)] = (weakref.ref(buf, _forget(id(buf))), n + m)
    return buf[: n + m]


def _forget(key: int) -> Callable[[weakref.ref[np.ndarray]], None]:
    """The callback dropping a freed buffer's entry from :data:`_GROWN`."""

    def drop(_: weakref.ref[np.ndarray]) -> None:
        _GROWN.pop(key, None)

    return drop


__all__ = ["Appended", "append_responses", "code_batch", "extend_buffer"]
