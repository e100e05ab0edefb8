"""Appending a batch of coded responses to coded responses (incremental fits): one coding for both.

Items, annotators and labels already known keep their codes; those that appear for the first time in the batch
are appended after them, in the batch's order.  Ids are matched exactly as written (the batch's text must equal
the earlier text).  The result holds every response of both (repeated (task, annotator) pairs stay separate, as
``duplicates="keep"`` does), so a fit of it equals a fit of the concatenated table up to the order of the codes.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import repeat
from typing import Any

import numpy as np
import pandas as pd

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
    pos = np.fromiter(map(known.get, values, repeat(-1)), dtype=np.int64, count=len(values))  # C-level loop
    missing = np.flatnonzero(pos < 0)
    if not len(missing):
        return old, pos, known
    fresh = new[missing]
    pos[missing] = len(old) + np.arange(len(fresh))
    known.update(zip(fresh.tolist(), range(len(old), len(old) + len(fresh)), strict=True))
    return old.append(fresh), pos, known


def code_batch(data: Responses | pd.DataFrame, old: Responses) -> Responses:
    """A batch (long format with crowd-kit columns, or coded) coded with the earlier classes first, so a batch may
    use one label only or new labels, and may come from one annotator."""
    if isinstance(data, Responses):
        return data
    if "label" not in data.columns:
        raise UserInputError("a batch of responses needs the columns task, worker and label.")
    seen = pd.Index(pd.unique(data["label"].dropna()))
    known = set(text_values(pd.Index(old.classes)))
    extra = [v for v, t in zip(seen, text_values(seen), strict=True) if v not in old.classes and t not in known]
    return Responses.from_frame(data, classes=[*old.classes, *extra], min_workers=1)


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
        weight = np.concatenate([ow, nw])
    report = ValidationReport(
        rows_read=old.report.rows_read + new.report.rows_read,
        responses=old.n_responses + new.n_responses,
        notes=[*old.report.notes, *new.report.notes],
    )
    merged = Responses(
        item=np.concatenate([old.item, imap[new.item]]),
        worker=np.concatenate([old.worker, wmap[new.worker]]),
        label=np.concatenate([old.label, cmap[new.label]]),
        items=items,
        workers=workers,
        classes=classes,
        report=report,
        weight=weight,
    )
    return Appended(merged, old.n_classes, old.n_items, old.n_workers, new.n_responses, (item_codes, worker_codes))


__all__ = ["Appended", "append_responses", "code_batch"]
