"""Span annotations (NER-style labels: character ranges with a label) and their token sequences.

A :class:`SpanTable` holds, for every completed annotation (task, annotator) — including annotations with no span —
the spans the annotator marked, and each task's text.  :meth:`SpanTable.token_table` turns them into token
sequences for the sequence methods (``hmm-em``, ``hmm-mm``…): tokens are the runs of non-space characters of the
text, every annotator labels every token of the tasks they annotated, with BIO tags (``B-PER``, ``I-PER``, ``O``);
the token item id is ``<task>/<token index>``, the sequence the task id and the position the token index.
:meth:`SpanTable.spans_from_tags` turns aggregated token tags back into spans (for span agreement).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from fusion_core.data.text import show_value
from fusion_core.errors import UserInputError

_TOKEN = re.compile(r"\S+")
SPAN_COLUMNS = ["task", "worker", "start", "end", "label"]


def tokens(text: str) -> tuple[np.ndarray, np.ndarray]:
    """Start and end character offsets of the tokens (runs of non-space characters) of ``text``."""
    found = [(m.start(), m.end()) for m in _TOKEN.finditer(text)]
    arr = np.array(found, dtype=np.int64).reshape(-1, 2)
    return arr[:, 0], arr[:, 1]


@dataclass
class SpanTable:
    """``annotations``: one row per completed annotation (task, worker); ``spans``: task, worker, start, end
    (character offsets, end exclusive), label; ``texts``: task → text; ``repeated``: earlier annotations of a
    person replaced by their later one."""

    annotations: pd.DataFrame
    spans: pd.DataFrame
    texts: Mapping[str, str]
    repeated: int = 0

    @classmethod
    def build(
        cls, annotations: list[tuple[str, str]], spans: list[tuple[int, int, int, str]], texts: Mapping[str, str]
    ) -> SpanTable:
        """From raw rows: ``annotations`` (task, worker) in export order and ``spans`` (index of the annotation,
        start, end, label).  A person's last annotation of a task wins (their earlier spans are dropped)."""
        ann = pd.DataFrame(annotations, columns=["task", "worker"], dtype=object)
        last = ann.drop_duplicates(subset=["task", "worker"], keep="last")
        sp = pd.DataFrame(spans, columns=["annotation", "start", "end", "label"])
        sp = sp[sp["annotation"].isin(last.index)]
        table = pd.DataFrame(
            {
                "task": ann["task"].to_numpy()[sp["annotation"].to_numpy(dtype=np.int64)],
                "worker": ann["worker"].to_numpy()[sp["annotation"].to_numpy(dtype=np.int64)],
                "start": sp["start"].to_numpy(dtype=np.int64),
                "end": sp["end"].to_numpy(dtype=np.int64),
                "label": sp["label"].to_numpy(dtype=object),
            }
        )
        missing = sorted(set(last["task"]) - set(texts))
        if missing:
            raise UserInputError(f"task {show_value(missing[0])} has spans but no text; export the task data too.")
        return cls(last.reset_index(drop=True), table, dict(texts), len(ann) - len(last))

    @property
    def n_annotations(self) -> int:
        return len(self.annotations)

    def token_offsets(self, task: str) -> tuple[np.ndarray, np.ndarray]:
        return tokens(self.texts[task])

    def tags(self, task: str, spans: pd.DataFrame) -> np.ndarray:
        """BIO tags of the tokens of ``task`` for one annotator's spans (a token in a span gets its label)."""
        starts, ends = self.token_offsets(task)
        out = np.full(len(starts), "O", dtype=object)
        for s, e, lab in zip(spans["start"], spans["end"], spans["label"], strict=True):
            first = int(np.searchsorted(ends, s, side="right"))
            last = int(np.searchsorted(starts, e, side="left"))
            if last > first:
                out[first] = f"B-{lab}"
                out[first + 1 : last] = f"I-{lab}"
        return out

    def token_table(self) -> pd.DataFrame:
        """Long table of token responses: task (``<task>/<i>``), worker, label (BIO tag), sequence, position."""
        groups = dict(tuple(self.spans.groupby(["task", "worker"], sort=False))) if len(self.spans) else {}
        empty = self.spans.iloc[:0]
        parts = []
        for task, worker in zip(self.annotations["task"], self.annotations["worker"], strict=True):
            tags = self.tags(task, groups.get((task, worker), empty))
            pos = np.arange(len(tags))
            parts.append(
                pd.DataFrame(
                    {
                        "task": [f"{task}/{i}" for i in pos],
                        "worker": worker,
                        "label": tags,
                        "sequence": task,
                        "position": pos.astype(str),
                    }
                )
            )
        if not parts:
            return pd.DataFrame(columns=["task", "worker", "label", "sequence", "position"], dtype=object)
        return pd.concat(parts, ignore_index=True)

    def spans_from_tags(self, tags: pd.Series) -> pd.DataFrame:
        """Spans (task, start, end, label) from BIO tags indexed by token item id ``<task>/<i>`` (e.g. the labels
        of ``hmm-em``): a span starts at ``B-X`` (or ``I-X`` after another tag) and runs over the ``I-X`` after it."""
        by_task: dict[str, dict[int, str]] = {}
        for item, tag in tags.items():
            task, _, idx = str(item).rpartition("/")
            by_task.setdefault(task, {})[int(idx)] = str(tag)
        rows = []
        for task, tagmap in by_task.items():
            if task not in self.texts:
                continue
            starts, ends = self.token_offsets(task)
            seq = [tagmap.get(i, "O") for i in range(len(starts))]
            open_label, open_start, prev_end = None, 0, 0
            for i, tag in enumerate([*seq, "O"]):
                kind, _, lab = tag.partition("-")
                if open_label is not None and not (kind == "I" and lab == open_label):
                    rows.append((task, open_start, prev_end, open_label))
                    open_label = None
                if kind in ("B", "I") and open_label is None:
                    open_label, open_start = lab, int(starts[i])
                if i < len(starts):
                    prev_end = int(ends[i])
        return pd.DataFrame(rows, columns=["task", "start", "end", "label"])


__all__ = ["SPAN_COLUMNS", "SpanTable", "tokens"]
