"""Pairwise judgements (LLM-judge panels comparing two answers): one row per (prompt, option A, option B, judge)
with the judge's preference A / B / tie, and optionally which option was shown first, a confidence, the two
answers' lengths and model families.

:class:`PairwiseResponses` holds them coded: option ids are shared by the A and B columns, every id is text exactly
as written, and the outcome is stored in *shown* coordinates too (first-shown won, second-shown won, tie), which is
where position bias lives.  Every problem is one :class:`~fusion_core.errors.UserInputError` naming the column and
rows (docs/JUDGES.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from fusion_core.data.columns import _is_missing, check_columns, row_numbers
from fusion_core.data.text import parse_numbers, show_value, text_values
from fusion_core.errors import UserInputError

A_WINS, B_WINS, TIE = 0, 1, 2
FIRST, SECOND = 0, 1  # shown coordinates: the first-shown option won / the second-shown option won (TIE stays 2)
A_WORDS = frozenset({"a", "option a", "option_a", "model_a", "left", "a wins", "a>b"})
B_WORDS = frozenset({"b", "option b", "option_b", "model_b", "right", "b wins", "b>a"})
TIE_WORDS = frozenset({"tie", "draw", "equal", "same", "both", "neither", "=", "a=b", "tie (bothbad)"})
ORDER_A = frozenset({"a", "ab", "a,b", "a-b", "option_a"})
ORDER_B = frozenset({"b", "ba", "b,a", "b-a", "option_b"})

ROLES = ("prompt", "option_a", "option_b", "judge", "preference")
OPTIONAL = ("order", "confidence", "length_a", "length_b", "family_a", "family_b", "judge_family")
ALIASES: dict[str, tuple[str, ...]] = {
    "prompt": ("prompt", "question_id", "question", "item", "task"),
    "option_a": ("option_a", "model_a", "system_a", "response_a"),
    "option_b": ("option_b", "model_b", "system_b", "response_b"),
    "judge": ("judge", "worker", "annotator", "rater"),
    "preference": ("preference", "winner", "label", "choice"),
    "order": ("order", "shown_first", "first"),
    "confidence": ("confidence",),
    "length_a": ("length_a", "len_a"),
    "length_b": ("length_b", "len_b"),
    "family_a": ("family_a",),
    "family_b": ("family_b",),
    "judge_family": ("judge_family",),
}


def pairwise_columns(columns: Sequence[Any]) -> dict[str, str] | None:
    """The role → column mapping found by the conventional names (:data:`ALIASES`, case-insensitive), or None when
    the table does not look pairwise (no option A / option B columns).  Used by the one-click audit to recognise
    pairwise files without an extra step."""
    by_fold = {str(c).strip().casefold(): str(c) for c in columns}
    found: dict[str, str] = {}
    for role, names in ALIASES.items():
        hit = next((by_fold[n] for n in names if n in by_fold and by_fold[n] not in found.values()), None)
        if hit is not None:
            found[role] = hit
    if "option_a" not in found or "option_b" not in found:
        return None
    return found


def file_columns(source: Any, *, format: str | None = None) -> list[str] | None:
    """The column names of a file from its first line (CSV / TSV / JSON lines) or schema (Parquet), without reading
    the rest; None when they cannot be told cheaply (not a path, unreadable, not UTF-8)."""
    import csv
    import json

    try:
        path = Path(source)
        with path.open("rb") as fh:
            head = fh.read(1 << 16)
        from fusion_core.data.formats import Sniff, detect

        fmt = format or detect(Sniff(path.name, head)).name
        if fmt == "parquet":
            import pyarrow.parquet as pq

            return list(pq.read_schema(path).names)
        line = head.decode("utf-8-sig").lstrip().split("\n", 1)[0].rstrip("\r")
        if fmt == "jsonl":
            first = json.loads(line)
            return [str(k) for k in first] if isinstance(first, dict) else None
        return next(csv.reader([line], delimiter="\t" if fmt == "tsv" else ","))
    except (TypeError, OSError, ValueError, UnicodeDecodeError, StopIteration):
        return None
    except Exception:  # pyarrow's own errors on a damaged Parquet file: let the real reader explain
        return None


@dataclass(frozen=True)
class PairwiseResponses:
    """Coded pairwise judgements (module docstring).

    Arrays, one entry per judgement: ``prompt``, ``option_a``, ``option_b``, ``judge`` (codes into ``prompts``,
    ``options``, ``judges``), ``outcome`` (0 = A preferred, 1 = B preferred, 2 = tie), ``a_first`` (option A was
    shown first), ``weight`` (the confidence, or None), ``length_a`` / ``length_b`` (or None), ``family_a`` /
    ``family_b`` / ``judge_family`` (text, None when unknown; arrays or None).  ``order_given`` says whether the
    order column was given (else A is taken as shown first).

    Examples
    --------
    >>> df = pd.DataFrame({"prompt": ["p1", "p1", "p2"], "option_a": ["x", "x", "y"], "option_b": ["y", "y", "z"],
    ...                    "judge": ["j1", "j2", "j1"], "preference": ["A", "tie", "B"]})
    >>> d = PairwiseResponses.from_frame(df)
    >>> list(d.options), d.outcome.tolist(), d.n_items
    (['x', 'y', 'z'], [0, 2, 1], 2)
    """

    prompt: np.ndarray
    option_a: np.ndarray
    option_b: np.ndarray
    judge: np.ndarray
    outcome: np.ndarray
    a_first: np.ndarray
    prompts: pd.Index
    options: pd.Index
    judges: pd.Index
    weight: np.ndarray | None = None
    length_a: np.ndarray | None = None
    length_b: np.ndarray | None = None
    family_a: np.ndarray | None = None
    family_b: np.ndarray | None = None
    judge_family: np.ndarray | None = None
    order_given: bool = False

    # ----------------------------------------------------------------------------------- sizes and views
    @property
    def n(self) -> int:
        return len(self.outcome)

    @property
    def n_options(self) -> int:
        return len(self.options)

    @property
    def n_judges(self) -> int:
        return len(self.judges)

    @property
    def n_prompts(self) -> int:
        return len(self.prompts)

    @property
    def has_ties(self) -> bool:
        return bool((self.outcome == TIE).any())

    @property
    def first(self) -> np.ndarray:
        """The option shown first, per judgement."""
        return np.where(self.a_first, self.option_a, self.option_b)

    @property
    def second(self) -> np.ndarray:
        return np.where(self.a_first, self.option_b, self.option_a)

    @property
    def shown_outcome(self) -> np.ndarray:
        """Outcome in shown coordinates: 0 = first-shown preferred, 1 = second-shown preferred, 2 = tie."""
        swap = ~self.a_first & (self.outcome != TIE)
        return np.where(swap, 1 - self.outcome, self.outcome).astype(np.int8)

    @property
    def weights(self) -> np.ndarray:
        """The per-judgement weight (the confidence, else 1)."""
        return np.ones(self.n) if self.weight is None else self.weight

    def items(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Comparison items: one per (prompt, unordered option pair).  Returns the item code of every judgement,
        and per item its prompt, its lower-coded option ``lo`` and higher-coded option ``hi``."""
        lo = np.minimum(self.option_a, self.option_b)
        hi = np.maximum(self.option_a, self.option_b)
        key = (self.prompt.astype(np.int64) * self.n_options + lo) * self.n_options + hi
        uniq, code = np.unique(key, return_inverse=True)
        hi_u = uniq % self.n_options
        lo_u = (uniq // self.n_options) % self.n_options
        return code.astype(np.int64), uniq // (self.n_options * self.n_options), lo_u, hi_u

    @property
    def n_items(self) -> int:
        return len(self.items()[1])

    def lo_outcome(self) -> np.ndarray:
        """Outcome in item coordinates: 0 = the item's lower-coded option preferred, 1 = the higher, 2 = tie."""
        flip = (self.option_a > self.option_b) & (self.outcome != TIE)
        return np.where(flip, 1 - self.outcome, self.outcome).astype(np.int8)

    def subset(self, keep: np.ndarray) -> PairwiseResponses:
        """The judgements where ``keep`` is true (codes and id indexes unchanged)."""
        cut: dict[str, Any] = {
            name: (None if getattr(self, name) is None else getattr(self, name)[keep])
            for name in ("prompt", "option_a", "option_b", "judge", "outcome", "a_first", "weight", "length_a",
                         "length_b", "family_a", "family_b", "judge_family")
        }  # fmt: skip
        return PairwiseResponses(
            **cut, prompts=self.prompts, options=self.options, judges=self.judges, order_given=self.order_given
        )

    def frame(self) -> pd.DataFrame:
        """The judgements as a table with the user's ids (prompt, option_a, option_b, judge, preference, order)."""
        words = np.array(["A", "B", "tie"], dtype=object)
        return pd.DataFrame(
            {
                "prompt": self.prompts.take(self.prompt),
                "option_a": self.options.take(self.option_a),
                "option_b": self.options.take(self.option_b),
                "judge": self.judges.take(self.judge),
                "preference": words[self.outcome],
                "order": np.where(self.a_first, "AB", "BA"),
            }
        )

    def choices(self) -> pd.DataFrame:
        """The categorical view (task, worker, label) for the one-click audit: task "prompt: X vs Y" (options in
        code order), worker the judge, label the preferred option's id or "tie"."""
        item, item_prompt, lo, hi = self.items()
        names = (
            self.prompts.take(item_prompt).astype(str) + ": " + self.options.take(lo).astype(str) + " vs "
            + self.options.take(hi).astype(str)
        )  # fmt: skip
        win = np.where(self.outcome == A_WINS, self.option_a, self.option_b)
        label = np.where(self.outcome == TIE, "tie", np.asarray(self.options.take(win), dtype=object))
        return pd.DataFrame({"task": np.asarray(names, dtype=object)[item], "worker": self.judges.take(self.judge),
                             "label": label})  # fmt: skip

    # ----------------------------------------------------------------------------------- reading
    @classmethod
    def from_frame(cls, df: pd.DataFrame, columns: Mapping[str, str] | None = None, **roles: str) -> PairwiseResponses:
        """Read a table: ``columns`` (or keywords) map the roles ``prompt``, ``option_a``, ``option_b``, ``judge``,
        ``preference`` (default: those names, or a conventional alias, :data:`ALIASES`) and the optional ``order``,
        ``confidence``, ``length_a``, ``length_b``, ``family_a``, ``family_b``, ``judge_family``.

        ``preference``: A / B / tie (case-insensitive; also left/right, draw …) or the preferred option's own id.
        ``order``: which option was shown first — A / B, AB / BA, or that option's id (default: A first).
        """
        if not isinstance(df, pd.DataFrame):
            raise UserInputError(
                f"expected a table (pandas DataFrame) of pairwise judgements, got {type(df).__name__}."
            )
        if len(df) == 0:
            raise UserInputError("the pairwise table has no rows.")
        mapping = {**(pairwise_columns(df.columns) or {}), **dict(columns or {}), **roles}
        unknown = sorted(set(mapping) - set(ROLES) - set(OPTIONAL))
        if unknown:
            raise UserInputError(f"unknown pairwise role(s) {unknown}; the roles are {list(ROLES + OPTIONAL)}.")
        wanted = {role: mapping.get(role, role) for role in ROLES}
        check_columns(wanted, list(df.columns))
        opt = {role: mapping[role] for role in OPTIONAL if role in mapping}
        check_columns(opt, list(df.columns))
        ids = {role: _ids(df[wanted[role]], wanted[role]) for role in ("prompt", "option_a", "option_b", "judge")}
        (ca, ua), (cb, ub) = ids["option_a"], ids["option_b"]
        # one factorisation of the distinct A and B values (in order of appearance) codes both columns
        both, uniq = pd.factorize(np.concatenate([ua, ub]))
        options = pd.Index(np.asarray(uniq, dtype=object), dtype=object)
        a = both[: len(ua)][ca].astype(np.int64)  # codes through the distinct values, not per row
        b = both[len(ua) :][cb].astype(np.int64)
        same = np.flatnonzero(a == b)
        if len(same):
            raise UserInputError(
                f"options A and B are the same ({show_value(options[a[same[0]]])}) on {row_numbers(same)}; "
                "a pairwise judgement compares two different options."
            )
        p, prompts = ids["prompt"][0].astype(np.int64), pd.Index(ids["prompt"][1], dtype=object)
        j, judges = ids["judge"][0].astype(np.int64), pd.Index(ids["judge"][1], dtype=object)
        outcome = _preference(df[wanted["preference"]], a, b, options, wanted["preference"])
        a_first = np.ones(len(df), dtype=bool)
        if "order" in opt:
            a_first = _order(df[opt["order"]], a, b, options, opt["order"])
        extra: dict[str, Any] = {}
        if "confidence" in opt:
            conf = _numbers(df[opt["confidence"]], opt["confidence"])
            if ((conf < 0) | (conf > 1)).any():
                bad = np.flatnonzero((conf < 0) | (conf > 1))
                raise UserInputError(
                    f"confidence column {opt['confidence']!r} must be in [0, 1]; see {row_numbers(bad)}."
                )
            extra["weight"] = conf
        for role in ("length_a", "length_b"):
            if role in opt:
                vals = _numbers(df[opt[role]], opt[role])
                if (vals <= 0).any():
                    bad = np.flatnonzero(vals <= 0)
                    raise UserInputError(
                        f"length column {opt[role]!r} must hold positive numbers; see {row_numbers(bad)}."
                    )
                extra[role] = vals
        if ("length_a" in extra) != ("length_b" in extra):
            raise UserInputError("give both length columns (length_a and length_b) or neither.")
        for role in ("family_a", "family_b", "judge_family"):
            if role in opt:
                col = df[opt[role]]
                miss = _is_missing(col)
                text = np.asarray(text_values(col, column=opt[role]).astype(object))
                text[miss] = None
                extra[role] = text
        return cls(
            prompt=p, option_a=a.astype(np.int64), option_b=b.astype(np.int64), judge=j, outcome=outcome,
            a_first=a_first, prompts=prompts, options=options, judges=judges, order_given="order" in opt, **extra,
        )  # fmt: skip


def as_pairwise(data: PairwiseResponses | pd.DataFrame, columns: Mapping[str, str] | None = None) -> PairwiseResponses:
    """``data`` as :class:`PairwiseResponses` (a table is read with :meth:`PairwiseResponses.from_frame`)."""
    return data if isinstance(data, PairwiseResponses) else PairwiseResponses.from_frame(data, columns)


def _ids(values: pd.Series, name: str) -> tuple[np.ndarray, np.ndarray]:
    """Codes and distinct values, as text exactly as written, of an id column; empty cells refused with their
    rows.  Everything but the factorisation works on the distinct values."""
    if isinstance(values.dtype, pd.CategoricalDtype):  # as read from a file: the codes are already there
        codes, uq = _used(values.cat.codes.to_numpy(), np.asarray(values.cat.categories, dtype=object))
    elif isinstance(values.dtype, pd.StringDtype):  # text already: factorised as it is
        if values.dtype.storage == "pyarrow":  # Arrow's dictionary encoding: its codes and distinct texts
            arr = pa.array(values.array)
            enc = (arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr).dictionary_encode()
            idx = enc.indices
            codes = (pc.fill_null(idx, -1) if idx.null_count else idx).to_numpy(zero_copy_only=False)
            uq = enc.dictionary.to_numpy(zero_copy_only=False)
            maybe = None
            if len(uq) > 64:  # a blank text is empty or starts with a space: only those are checked in Python
                first = pc.utf8_slice_codeunits(enc.dictionary, 0, 1)  # (≤ " ": str.isspace's U+001C–U+001F)
                maybe = pc.or_(pc.less_equal(first, " "), pc.utf8_is_space(first)).to_numpy(zero_copy_only=False)
            _refuse_empty(codes, uq, name, maybe)
        else:
            codes, uniq = values.array.factorize()
            uq = np.asarray(uniq, dtype=object)
            _refuse_empty(codes, uq, name)
        return codes, uq
    else:
        codes, uniq = pd.factorize(values.to_numpy(dtype=object, na_value=None))
        uq = np.asarray(uniq, dtype=object)
    _refuse_empty(codes, uq, name)
    return codes, np.asarray(text_values(pd.Index(uq), column=name), dtype=object)


def _refuse_empty(codes: np.ndarray, uq: np.ndarray, name: str, maybe: np.ndarray | None = None) -> None:
    """Missing or blank cells (checked on the distinct values, those in ``maybe`` when given) refused with their
    rows."""
    if maybe is None:
        blank = np.fromiter((isinstance(u, str) and not u.strip() for u in uq), dtype=bool, count=len(uq))
    else:
        blank = np.zeros(len(uq), dtype=bool)
        check = np.flatnonzero(maybe)
        blank[check] = [not u.strip() for u in uq[check]]
    miss = (codes < 0) | (blank[codes] if len(uq) else False)
    if miss.any():
        raise UserInputError(
            f"column {name!r} has empty cells on {row_numbers(np.flatnonzero(miss))}; fill or drop them."
        )


def _used(codes: np.ndarray, categories: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Categorical codes renumbered over the categories that occur, in order of first appearance (−1 kept)."""
    present = codes >= 0
    first = pd.unique(codes[present])
    remap = np.full(len(categories) + 1, -1, dtype=np.int64)
    remap[first] = np.arange(len(first))
    return remap[codes], categories[first]


def _words(values: pd.Series, name: str, options: pd.Index) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Codes, distinct texts, their stripped case-folded forms and the option each names (−1: none)."""
    codes, text = _ids(values, name)
    low = np.array([u.strip().casefold() for u in text], dtype=object)  # distinct values, not rows
    pos = {v: i for i, v in enumerate(options)}  # the options (distinct), not rows
    return codes, text, low, np.fromiter((pos.get(u, -1) for u in text), dtype=np.int64, count=len(text))


def _in(low: np.ndarray, words: frozenset[str] | set[str]) -> np.ndarray:
    """Which distinct values are one of ``words``."""
    return np.fromiter((u in words for u in low), dtype=bool, count=len(low))


def _numbers(values: pd.Series, name: str) -> np.ndarray:
    miss = _is_missing(values)
    if miss.any():
        raise UserInputError(
            f"column {name!r} has empty cells on {row_numbers(np.flatnonzero(miss))}; fill or drop them."
        )
    return parse_numbers(values.reset_index(drop=True), what=f"column {name!r}")


def _preference(values: pd.Series, a: np.ndarray, b: np.ndarray, options: pd.Index, name: str) -> np.ndarray:
    """A / B / tie words or the preferred option's id → 0 / 1 / 2; anything else is refused with its rows."""
    codes, text, low, named = _words(values, name, options)
    word = np.full(len(low), -1, dtype=np.int8)
    word[_in(low, TIE_WORDS)] = TIE
    word[_in(low, A_WORDS)] = A_WINS
    word[_in(low, B_WORDS)] = B_WINS
    out = word[codes]
    if (word < 0).any():  # some values are no word: the preferred option's id
        opt = named[codes]
        out[(out < 0) & (opt >= 0) & (opt == a)] = A_WINS
        out[(out < 0) & (opt >= 0) & (opt == b)] = B_WINS
    bad = np.flatnonzero(out < 0)
    if len(bad):
        raise UserInputError(
            f"preference column {name!r} has {show_value(text[codes[bad[0]]])} on {row_numbers(bad)}; use A, B or "
            "tie (or the preferred option's id)."
        )
    return out


def _order(values: pd.Series, a: np.ndarray, b: np.ndarray, options: pd.Index, name: str) -> np.ndarray:
    """Which option was shown first: A / B, AB / BA, or that option's id → True when A was first."""
    codes, text, low, named = _words(values, name, options)
    is_a, is_b = _in(low, ORDER_A), _in(low, ORDER_B)
    first_a, first_b = is_a[codes], is_b[codes]
    if not (is_a | is_b).all():  # some values are no word: the id of the option shown first
        opt = named[codes]
        rest = ~first_a & ~first_b & (opt >= 0)
        first_a = first_a | (rest & (opt == a))
        first_b = first_b | (rest & (opt == b))
    bad = np.flatnonzero(first_a == first_b)
    if len(bad):
        raise UserInputError(
            f"order column {name!r} has {show_value(text[codes[bad[0]]])} on {row_numbers(bad)}; say which option "
            "was shown first: A or B (also AB / BA, or the option's id)."
        )
    return first_a
