"""Which column plays which role (task, annotator, label …), guessed from common names: the one implementation
behind the app's column mapper (a first guess the user can change) and the command line (columns mapped
automatically with a one-line note; two candidates for one role are an error that lists them)."""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping, Sequence

from fusion_core.data.text import show_value
from fusion_core.errors import UserInputError

ROLE_GUESSES = {
    "task": ("task", "item", "question", "id", "item_id", "task_id", "example", "example_id", "sentence"),
    "worker": (
        "worker", "annotator", "rater", "labeler", "labeller", "user", "worker_id", "annotator_id", "rater_id",
        "judge", "user_id", "coder",
    ),
    "label": (
        "label", "answer", "response", "class", "rating", "judgment", "judgement", "value", "score", "category",
        "annotation",
    ),
    "sequence": ("sequence", "sentence_id", "seq", "doc", "document"),
    "position": ("position", "pos", "token_index", "index", "offset"),
    "context": ("context", "score", "feature", "covariate"),
    "time": ("time", "timestamp", "created_at", "submitted_at", "datetime", "date", "batch", "round"),
    "truth": (
        "truth", "label", "gold", "true_label", "gold_label", "answer", "correct", "expected", "reference", "target",
    ),
}  # fmt: skip
"""Column names (lower case) that suggest each role, most likely first."""

OPTIONS = {"task": "--task-col", "worker": "--worker-col", "label": "--label-col"}

MANY_LABELS = 50
"""More distinct labels than this, nearly one per response, and the label column is refused (an id or a time)."""

_DATE_TIME = re.compile(
    r"^\s*(\d{4}-\d{1,2}-\d{1,2}([T ]\d{1,2}:\d{2}(:\d{2}([.,]\d+)?)?\s*(Z|UTC|[+-]\d{2}:?\d{2})?)?"
    r"|\d{1,2}[/.]\d{1,2}[/.]\d{2,4}([ T]\d{1,2}:\d{2}(:\d{2})?\s*([AaPp][Mm])?)?"
    r"|\d{1,2}:\d{2}:\d{2}([.,]\d+)?)\s*$"
)
"""A date, a date and time (ISO 8601, 2024/01/31, 31.01.2024 …) or a time of day."""

_FRACTION = re.compile(r"^\s*[+-]?\d*\.\d+([eE][+-]?\d+)?\s*$")
"""A number with a fractional part: a continuous score (numeric ratings), never an id."""

_ID_OR_TIME_NAME = re.compile(r"(^|_)(id|uuid|guid|key|created|updated|modified|timestamp|time|date|at)$", re.I)
"""Column names that say "identifier" or "time" (``created_at``, ``annotation_id`` …)."""


def label_column_problem(
    distinct: Iterable[object], n_values: int, column: str | None = None, *, role: str = "label"
) -> str | None:
    """Why a column cannot be the ``role`` column — its values look like an identifier or a time — or None.

    ``distinct``: its distinct non-empty values; ``n_values``: how many non-empty cells it has.  Refused when the
    values are date/times (≥ 90 % of a sample of distinct values; e.g. ``created_at``), when every value is
    different (≥ 20 values: a unique id), or when there are more than :data:`MANY_LABELS` distinct values and
    nearly one per value (≥ 90 %) — unless they are fractional numbers (continuous scores).  The message names the column and says to pick another one."""
    values = [str(v) for v in distinct]
    n_distinct = len(values)
    if n_values <= 0 or n_distinct <= 1:
        return None
    where = f"{role} column {show_value(column)}" if column is not None else f"{role} column"
    fix = f"choose the column that holds the answers as the {role} column" + (
        f" ({OPTIONS[role]} in the command line)." if role in OPTIONS else "."
    )
    step = max(1, n_distinct // 1000)
    sample = values[::step][:1000]
    dates = sum(bool(_DATE_TIME.match(v)) for v in sample)
    if dates >= 0.9 * len(sample) and n_distinct > 2:
        return f"the {where} holds dates or times (e.g. {show_value(sample[0])}), not answers; {fix}"
    if sum(bool(_FRACTION.match(v)) for v in sample) >= 0.9 * len(sample):
        return None  # continuous scores (numeric ratings) are nearly all distinct by nature
    if n_distinct == n_values and n_values >= 20:
        return (
            f"the {where} has a different value in every one of its {n_values:,} rows (e.g. "
            f"{show_value(values[0])}): it looks like an id, not answers; {fix}"
        )
    if n_distinct > MANY_LABELS and n_distinct >= 0.9 * n_values:
        return (
            f"the {where} has {n_distinct:,} distinct values in {n_values:,} rows, nearly one per row: it looks like "
            f"an id or a time, not answers; {fix}"
        )
    return None


def check_label_column(distinct: Iterable[object], n_values: int, column: str | None = None) -> None:
    """:func:`label_column_problem` as a :class:`UserInputError` (raised before anything is fitted)."""
    problem = label_column_problem(distinct, n_values, column)
    if problem is not None:
        raise UserInputError(problem[0].upper() + problem[1:])


def looks_like_id_or_time(column: str) -> bool:
    """Whether a column's name says identifier or time (``created_at``, ``annotation_id``): never a first guess
    for the label."""
    return bool(_ID_OR_TIME_NAME.search(str(column)))


def candidates(columns: Sequence[str], role: str, taken: Collection[str] = frozenset()) -> list[str]:
    """Columns whose name (any case) suggests ``role``, most likely first, among those not ``taken``."""
    lower: dict[str, list[str]] = {}
    for c in columns:
        if c not in taken:
            lower.setdefault(str(c).lower(), []).append(c)
    return [c for cand in ROLE_GUESSES.get(role, ()) for c in lower.get(cand, [])]


def guess_column(columns: list[str], role: str, taken: Collection[str] = frozenset()) -> str | None:
    """The column most likely to play ``role`` (by name, among those not ``taken``), or None (the app's guess)."""
    found = candidates(columns, role, taken)
    return found[0] if found else None


def guess_columns(columns: Sequence[str], given: Mapping[str, str | None]) -> tuple[dict[str, str], str | None]:
    """The column of each role in ``given`` (its value when not None; else the role's own name when it is a
    column; else the one column whose name suggests it), and a one-line note of what was guessed (None when
    nothing was).  No candidate, or two, is a :class:`UserInputError` naming them and the option to use."""
    out: dict[str, str] = {}
    for role, col in given.items():
        if col is not None:
            out[role] = col
    guessed = []
    for role, col in given.items():
        if col is not None:
            continue
        if role in columns and role not in out.values():
            out[role] = role
            continue
        found = candidates(columns, role, set(out.values()))
        option = OPTIONS.get(role, role)
        if not found:
            raise UserInputError(
                f"no column looks like the {role} column; the file has {', '.join(map(show_value, columns))}. "
                f"Name it with {option}."
            )
        if len(found) > 1:
            raise UserInputError(
                f"several columns could be the {role} column ({', '.join(map(show_value, found))}); choose one with "
                f"{option}."
            )
        out[role] = found[0]
        guessed.append(f"{role} <- {show_value(found[0])}")
    note = (
        f"columns guessed from their names: {', '.join(guessed)} (set them with --task-col, --worker-col, --label-col)."
        if guessed
        else None
    )
    return out, note


def guess_gold_columns(
    columns: Sequence[str], task: str | None = None, truth: str | None = None
) -> tuple[str, str, str | None]:
    """The (task, truth) columns of a gold file and a note of what was guessed (None when nothing was): given
    names win; else a column named ``task``, else the one whose name suggests an item id; ``truth``, ``gold``,
    ``label`` … for the truth (first present); a two-column file with neither is read as (task, truth).  Missing
    or ambiguous columns are a :class:`UserInputError` naming the columns and ``--gold-task-col``/
    ``--gold-truth-col``."""
    cols = [str(c) for c in columns]
    shown = ", ".join(map(show_value, cols))
    for given, option in ((task, "--gold-task-col"), (truth, "--gold-truth-col")):
        if given is not None and given not in cols:
            raise UserInputError(f"the gold file has no column {show_value(given)}; it has {shown} (see {option}).")
    guessed = []
    if (
        task is None
        and truth is None
        and len(cols) == 2
        and not candidates(cols, "task")
        and not candidates(cols, "truth")
    ):
        return cols[0], cols[1], f"gold columns read as task <- {show_value(cols[0])}, truth <- {show_value(cols[1])}."
    if task is None:
        found = ["task"] if "task" in cols else candidates(cols, "task", {truth} if truth else ())
        if not found:
            raise UserInputError(
                f"no column of the gold file looks like the task id; it has {shown}. Name it with --gold-task-col."
            )
        if len(found) > 1:
            raise UserInputError(
                f"several columns of the gold file could be the task id ({', '.join(map(show_value, found))}); "
                "choose one with --gold-task-col."
            )
        task = found[0]
        if task != "task":
            guessed.append(f"task <- {show_value(task)}")
    if truth is None:
        found = candidates(cols, "truth", {task})
        if not found:
            raise UserInputError(
                f"the gold file needs a 'truth' (or 'label'/'gold') column; it has {shown}. Name it with "
                "--gold-truth-col."
            )
        truth = found[0]
        if truth != "truth":
            guessed.append(f"truth <- {show_value(truth)}")
    if task == truth:
        raise UserInputError("the gold task and truth columns must be two different columns.")
    note = f"gold columns guessed from their names: {', '.join(guessed)}." if guessed else None
    return task, truth, note


__all__ = [
    "MANY_LABELS",
    "ROLE_GUESSES",
    "candidates",
    "check_label_column",
    "guess_column",
    "guess_columns",
    "guess_gold_columns",
    "label_column_problem",
    "looks_like_id_or_time",
]
