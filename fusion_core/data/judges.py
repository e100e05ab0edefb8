"""Per-annotator metadata (for panels of LLM judges: model name, prompt version), carried next to the responses.

:class:`AnnotatorInfo` is one row per annotator id with free-form text columns.  The conventional columns for
LLM judges are ``model`` and ``prompt_version`` (also ``provider``, ``temperature`` …); human panels can use it
for ``team`` or ``expertise``.  Analyses read it to name what a group of correlated judges has in common
(:func:`fusion_core.diagnostics.judges.correlated_judges`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from fusion_core.data.columns import _is_missing
from fusion_core.errors import UserInputError

JUDGE_COLUMNS = ("model", "prompt_version")


@dataclass(frozen=True)
class AnnotatorInfo:
    """Metadata per annotator: ``table`` is indexed by the annotator ids (index name ``worker``, unique), one column
    per attribute (text or numbers, missing allowed).

    Examples
    --------
    >>> import pandas as pd
    >>> info = AnnotatorInfo.from_frame(pd.DataFrame({"worker": ["j1", "j2", "j3"], "model": ["a", "a", "b"],
    ...                                               "prompt_version": ["v1", "v2", "v1"]}))
    >>> info.shared(["j1", "j2"])
    {'model': 'a'}
    """

    table: pd.DataFrame

    @classmethod
    def from_frame(
        cls, df: pd.DataFrame, *, worker: str = "worker", columns: Sequence[str] | None = None
    ) -> AnnotatorInfo:
        """One row per annotator: the ``worker`` id column and attribute columns (all others, or ``columns``)."""
        if not isinstance(df, pd.DataFrame):
            raise UserInputError(f"expected a table (pandas DataFrame) of annotator metadata, got {type(df).__name__}.")
        if worker not in df.columns:
            raise UserInputError(
                f"the annotator metadata has no '{worker}' column; it has {[str(c) for c in df.columns]}."
            )
        cols = [c for c in df.columns if c != worker] if columns is None else list(columns)
        missing = [str(c) for c in cols if c not in df.columns]
        if missing:
            raise UserInputError(f"the annotator metadata has no column(s) {missing}; it has {list(df.columns)}.")
        ids = df[worker]
        if _is_missing(ids).any():
            raise UserInputError("the annotator metadata has rows without an annotator id; fill or drop them.")
        if ids.duplicated().any():
            raise UserInputError(
                f"the annotator metadata lists annotator {ids[ids.duplicated()].iloc[0]!r} more than once; give one "
                "row per annotator."
            )
        table = df[cols].copy()
        table.index = pd.Index(ids.to_numpy(), name="worker")
        return cls(table)

    def for_workers(self, workers: pd.Index) -> pd.DataFrame:
        """The metadata rows of ``workers`` in that order (NaN for annotators without metadata; ids matched as given,
        then by their text, e.g. 7 and "7")."""
        codes = self.table.index.get_indexer(workers)
        if (codes < 0).any():
            text = pd.Index(self.table.index.astype(str)).get_indexer(pd.Index(workers).astype(str))
            codes = pd.Series(codes).where(codes >= 0, text).to_numpy()
        out = self.table.reset_index(drop=True).reindex(codes)
        out.index = pd.Index(workers, name="worker")
        return out

    def unknown(self, workers: pd.Index) -> list[Any]:
        """Annotators of ``workers`` that have no metadata row."""
        rows = self.for_workers(workers)
        return list(rows.index[rows.isna().all(axis=1)]) if self.table.shape[1] else list(workers)

    def shared(self, members: Sequence[Any]) -> dict[str, Any]:
        """The attributes every one of ``members`` has in common (e.g. ``{"model": "model-a"}``)."""
        rows = self.for_workers(pd.Index(list(members)))
        out: dict[str, Any] = {}
        for col in rows.columns:
            values = rows[col]
            if values.notna().all() and values.nunique() == 1:
                out[str(col)] = values.iloc[0]
        return out
