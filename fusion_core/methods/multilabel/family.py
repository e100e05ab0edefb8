"""The admissible family 𝕃 of true label sets (spec ``multilabel.md`` §4.4–§4.5) and gold sets within it."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from math import comb

import numpy as np

from fusion_core.data.multilabel import MultiLabelResponses, unique_rows
from fusion_core.errors import UserInputError

MAX_SETS = 20000  # larger enumerated families are refused (memory and time per E-step)
#: 'degree' families with more sets than this are pruned to the sets the data can support (see :func:`set_family`):
#: an E-step costs O(sets × items) per iteration, so the cap bounds a fit of ≤ 2,000 responses to seconds
FAMILY_CAP = 400


@dataclass(frozen=True)
class SetFamily:
    """Membership matrix ``Z`` (sets × labels; None when factorised), whether the model factorises per label
    (§4.5) and the largest set size M."""

    Z: np.ndarray | None
    factorised: bool
    max_degree: int
    pruned: int = 0  # sets of the full 'degree' family left out by the cap (0: the family is complete)

    def with_sets(self, bits: np.ndarray) -> SetFamily:
        """A pruned family extended by the sets ``bits`` (e.g. gold sets) it lacks; complete families unchanged."""
        if not self.pruned or self.Z is None or not len(bits):
            return self
        Z = np.unique(np.vstack([self.Z, bits.astype(bool)]), axis=0)
        return SetFamily(_ordered(Z), False, self.max_degree, self.pruned)


def admissible_sets(n_labels: int, max_degree: int, include_empty: bool = True) -> np.ndarray:
    """Membership matrix Z (|𝕃| × C, bool) of all sets of size ≤ max_degree (∅ first when included)."""
    rows = []
    for m in range(0 if include_empty else 1, max_degree + 1):
        for chosen in itertools.combinations(range(n_labels), m):  # sets, not responses
            z = np.zeros(n_labels, bool)
            z[list(chosen)] = True
            rows.append(z)
    return np.array(rows, dtype=bool).reshape(-1, n_labels)


def set_family(
    d: MultiLabelResponses,
    *,
    admissible: str,
    max_degree: int | None,
    include_empty: bool,
    prior: str,
    factorize: bool,
    per_label_cells: bool,
) -> SetFamily:
    """The admissible sets: all subsets ('all', factorised when the model decouples: product prior, per-label
    cells, ∅ allowed), the sets reported at least once ('observed', + ∅), or all sets of at most M labels
    ('degree'; pruned by :func:`pruned_family` beyond :data:`FAMILY_CAP` sets); M defaults to the 99th percentile
    of reported set sizes, clipped to 1..4."""
    C = d.n_labels
    if prior == "product" and admissible != "all":
        raise UserInputError(
            "prior='product' is exact only with admissible='all' (all subsets); use prior='set' otherwise."
        )
    if admissible == "all":
        if factorize and prior == "product" and per_label_cells and include_empty:
            return SetFamily(None, True, C)
        if 2**C > MAX_SETS:
            raise UserInputError(
                f"admissible='all' with {C} labels enumerates {2**C:,} sets; use prior='product' with a per-label "
                "granularity (factorised) or a maximum degree."
            )
        return SetFamily(admissible_sets(C, C, include_empty), False, C)
    obs = d.X if d.O is None else (d.X & d.O)
    sizes = obs.sum(axis=1)
    if max_degree is None:
        M = int(np.clip(np.ceil(np.percentile(sizes, 99)) if len(sizes) else 1, 1, 4))
    else:
        M = int(max_degree)
    M = min(M, C)
    if admissible == "observed":
        Z = np.unique(obs[sizes <= M], axis=0).astype(bool)
        if include_empty and not (~Z.any(axis=1)).any():
            Z = np.vstack([np.zeros((1, C), bool), Z])
        if not include_empty:
            Z = Z[Z.any(axis=1)]
        return SetFamily(Z, False, M)
    size = sum(comb(C, m) for m in range(0 if include_empty else 1, M + 1))
    if size > FAMILY_CAP:
        return pruned_family(obs[sizes <= M], C, M, include_empty, size)
    return SetFamily(admissible_sets(C, M, include_empty), False, M)


def pruned_family(reported: np.ndarray, C: int, M: int, include_empty: bool, size: int) -> SetFamily:
    """The 'degree' family cut to :data:`FAMILY_CAP` sets when all ``size`` sets of ≤ M labels are too many (an
    approximation, recorded in ``pruned`` and warned about): ∅ (when allowed), every single label, then the sets of
    2..M labels that some annotator reported, most often reported first (equal counts: fewer labels first, then the
    sets whose labels are reported more often overall, then by membership), until the cap.  A true set of two or
    more labels that nobody reported as such is left out; the ranking uses only counts, so it depends neither on the
    row order nor on the label names."""
    base = admissible_sets(C, 1, include_empty)
    multi = reported[reported.sum(axis=1) >= 2]
    if len(multi):
        uniq, counts = np.unique(multi, axis=0, return_counts=True)
        popularity = uniq.astype(float) @ np.log1p(reported.sum(axis=0))
        members = tuple(uniq[:, j] for j in range(C - 1, -1, -1))
        order = np.lexsort((*members, -popularity, uniq.sum(axis=1), -counts))
        room = max(0, FAMILY_CAP - len(base))
        base = np.vstack([base, uniq[order[:room]]])
    return SetFamily(_ordered(base), False, M, size - len(base))


def _ordered(Z: np.ndarray) -> np.ndarray:
    """Sets ordered by size, then by their labels (∅ first), so the family does not depend on the row order."""
    key = np.lexsort((*(Z[:, j] for j in range(Z.shape[1] - 1, -1, -1)), Z.sum(axis=1)))
    return Z[key]


def gold_set_index(Z: np.ndarray, bits: np.ndarray, tasks: list[str]) -> np.ndarray:
    """Row of ``Z`` of every gold set (``bits``: gold items × labels); a gold set outside the family is refused.
    ``tasks``: the gold tasks' ids, for the message."""
    S = len(Z)
    _, inv = unique_rows(np.vstack([Z, bits]))
    where = np.full(int(inv.max()) + 1, -1)
    where[inv[:S]] = np.arange(S)
    idx = where[inv[S:]]
    if (idx < 0).any():
        bad = [tasks[i] for i in np.flatnonzero(idx < 0)[:5]]
        raise UserInputError(
            f"{int((idx < 0).sum())} gold label sets are not admissible true sets of this model (tasks {bad}); "
            "raise max_degree, set include_empty=True, or use admissible='all'."
        )
    return idx
