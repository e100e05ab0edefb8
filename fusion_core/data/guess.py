"""Which column plays which role (task, annotator, label …), guessed from common names: the one implementation
behind the app's column mapper (a first guess the user can change) and the command line (columns mapped
automatically with a one-line note; two candidates for one role are an error that lists them)."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

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
}  # fmt: skip
"""Column names (lower case) that suggest each role, most likely first."""

OPTIONS = {"task": "--task-col", "worker": "--worker-col", "label": "--label-col"}


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


__all__ = ["ROLE_GUESSES", "candidates", "guess_column", "guess_columns"]
