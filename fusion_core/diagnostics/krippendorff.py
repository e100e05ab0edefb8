"""Krippendorff's α for nominal, ordinal, interval and ratio data, with a bootstrap interval over items.

Krippendorff (2011), "Computing Krippendorff's alpha-reliability": with the coincidences
``o_ck = Σ_u (n_uc n_uk − δ_ck n_uc)/(m_u − 1)`` over the units (items) holding ``m_u ≥ 2`` values, the
pairable-value totals ``n_c = Σ_k o_ck`` and ``n = Σ_c n_c``::

    α = 1 − (n − 1) Σ_ck o_ck δ²_ck / Σ_ck n_c n_k δ²_ck

with the metric δ²: nominal ``[c ≠ k]``; ordinal ``(Σ_{g=c..k} n_g − (n_c + n_k)/2)²`` (ranks of the pairable
values); interval ``(c − k)²``; ratio ``((c − k)/(c + k))²``.  Any number of coders per item, missing values
and repeated values are allowed: only the values per unit matter.  The observed part is accumulated per unit
from the pairs of distinct values inside each unit (no dense units × values × values array), so the statistic
is a function of item weights and its bootstrap replicates are matrix products
(:mod:`fusion_core.diagnostics.reliability`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import scipy.sparse as sp

from fusion_core.data.numeric import NumericResponses
from fusion_core.data.responses import Responses, as_responses
from fusion_core.diagnostics.reliability import ItemStatistic, ReliabilityEstimate, estimate_joint
from fusion_core.errors import UserInputError
from fusion_core.methods.ordinal import is_numeric_label, with_levels

METRICS = ("nominal", "ordinal", "interval", "ratio")
MAX_ORDINAL_VALUES = 200  # the ordinal metric keeps a values × values table per replicate


@dataclass(frozen=True)
class Units:
    """Values coded for α: ``unit`` (0 … n_units − 1, pairable units only), ``code`` (index into ``domain``) and
    ``domain`` (the ordered values as floats, or 0 … V − 1 for labels that are not numbers)."""

    unit: np.ndarray
    code: np.ndarray
    domain: np.ndarray
    n_units: int


def units_of(
    data: Responses | NumericResponses | pd.DataFrame, metric: str, levels: Sequence[Any] | str | None = None
) -> Units:
    """Pairable units and coded values of categorical or numeric responses (a long table with a ``value``
    column is numeric)."""
    if isinstance(data, pd.DataFrame) and "value" in data.columns and "label" not in data.columns:
        data = NumericResponses.from_frame(data)
    if isinstance(data, NumericResponses):
        domain, code = np.unique(data.value, return_inverse=True)
        item = data.item
    else:
        resp = as_responses(data)
        if metric == "ordinal" and levels is not None:
            resp = with_levels(resp, levels)
        item, code = resp.item, resp.label
        domain = np.arange(resp.n_classes, dtype=float)
        if metric in ("interval", "ratio"):
            bad = [str(c) for c in resp.classes if not is_numeric_label(c)]
            if bad:
                raise UserInputError(
                    f"the {metric} metric needs labels that are numbers, but {bad[:5]} are not; use the nominal "
                    "or ordinal metric."
                )
            domain = np.array([float(str(c)) for c in resp.classes])
    if metric == "ratio" and (domain < 0).any():
        raise UserInputError("the ratio metric needs values ≥ 0 (a true zero); use the interval metric.")
    m = np.bincount(item)
    pairable = m[item] >= 2
    if not pairable.any():
        raise UserInputError("Krippendorff's alpha needs at least one item with two or more values.")
    _, unit = np.unique(item[pairable], return_inverse=True)
    return Units(unit, code[pairable], domain, int(unit.max()) + 1)


def _pairs(units: Units) -> tuple[sp.csr_matrix, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Unit × value counts N, and every ordered pair of distinct values inside a unit: (unit, c, k, weight
    n_uc n_uk/(m_u − 1))."""
    v = len(units.domain)
    counts = sp.csr_matrix((np.ones(len(units.unit)), (units.unit, units.code)), shape=(units.n_units, v))
    counts.sum_duplicates()
    coo = counts.tocoo()
    order = np.lexsort((coo.col, coo.row))
    row, col, cnt = coo.row[order], coo.col[order], coo.data[order]
    d = np.bincount(row, minlength=units.n_units)  # distinct values per unit
    start = np.concatenate([[0], np.cumsum(d)[:-1]])
    a = np.repeat(np.arange(len(row)), d[row])
    b = np.repeat(start[row], d[row]) + (np.arange(len(a)) - np.repeat(np.cumsum(d[row]) - d[row], d[row]))
    distinct = a != b
    a, b = a[distinct], b[distinct]
    m = np.asarray(counts.sum(axis=1)).ravel()
    return counts, row[a], col[a], col[b], cnt[a] * cnt[b] / (m[row[a]] - 1)


def _delta2(x: np.ndarray, y: np.ndarray, metric: str) -> np.ndarray:
    if metric == "nominal":
        return (x != y).astype(float)
    if metric == "interval":
        return (x - y) ** 2
    total = x + y
    return np.divide(x - y, total, out=np.zeros(np.broadcast(x, y).shape), where=total != 0) ** 2


def _expected(n_v: np.ndarray, domain: np.ndarray, metric: str) -> np.ndarray:
    """``Σ_ck n_c n_k δ²_ck`` per replicate row of ``n_v`` (b × V), by value blocks for the ratio metric."""
    if metric == "nominal":
        return n_v.sum(axis=1) ** 2 - (n_v**2).sum(axis=1)
    if metric == "interval":
        s0, s1, s2 = n_v.sum(axis=1), n_v @ domain, n_v @ domain**2
        return 2 * (s0 * s2 - s1**2)
    out = np.zeros(len(n_v))
    step = max(1, 4_000_000 // max(len(domain), 1))
    for lo in range(0, len(domain), step):  # blocks of values, not responses
        block = _delta2(domain[lo : lo + step, None], domain[None, :], metric)
        out += np.einsum("bi,bi->b", n_v[:, lo : lo + step], n_v @ block.T)
    return out


def _ordinal_delta2(n_v: np.ndarray) -> np.ndarray:
    """b × V × V ordinal δ² from the pairable-value totals of each replicate (b × V)."""
    cum = np.cumsum(n_v, axis=1)
    lo_c = cum[:, :, None] - n_v[:, :, None]  # Σ_{g<c} n_g
    between = np.abs(cum[:, None, :] - lo_c)  # Σ_{g=c..k} n_g for c ≤ k (and its mirror)
    upper = np.triu(np.ones((n_v.shape[1],) * 2, dtype=bool))
    between = np.where(upper[None], between, np.transpose(between, (0, 2, 1)))
    return (between - (n_v[:, :, None] + n_v[:, None, :]) / 2) ** 2


Statistic = Callable[[np.ndarray], np.ndarray]
_DENSE_CELLS = 8_000_000  # units × (values + 1) up to which the per-unit value counts are held dense (64 MB)


def _fixed_statistic(units: Units, metric: str) -> tuple[Statistic, int]:
    """α as a function of item weights for the metrics whose δ² does not depend on the data (nominal, interval,
    ratio): the observed disagreement is a fixed per-unit sum."""
    counts, unit, c, k, w = _pairs(units)
    delta2 = _delta2(units.domain[c], units.domain[k], metric)
    per_unit = np.bincount(unit, weights=w * delta2, minlength=units.n_units)
    v = len(units.domain)
    if units.n_units * (v + 1) <= _DENSE_CELLS:  # few values: one dense product gives every replicate's sums
        columns = np.column_stack([counts.toarray(), per_unit])

        def stat(weights: np.ndarray) -> np.ndarray:
            sums = weights @ columns
            n_v = sums[:, :v]
            return 1.0 - (n_v.sum(axis=1) - 1) * sums[:, v] / _expected(n_v, units.domain, metric)

        return stat, v
    counts_t = counts.T.tocsr()

    def sparse_stat(weights: np.ndarray) -> np.ndarray:
        n_v = np.asarray(counts_t @ weights.T).T
        return 1.0 - (n_v.sum(axis=1) - 1) * (weights @ per_unit) / _expected(n_v, units.domain, metric)

    return sparse_stat, v


def _ordinal_statistic(units: Units, metric: str) -> tuple[Statistic, int]:
    """α as a function of item weights for the ordinal metric, whose δ² depends on each replicate's value totals:
    the per-unit coincidences are kept as a units × V² matrix."""
    v = len(units.domain)
    counts, unit, c, k, w = _pairs(units)
    counts_t = counts.T.tocsr()
    coinc = sp.csr_matrix((w, (unit, c * v + k)), shape=(units.n_units, v * v)).T.tocsr()

    def stat(weights: np.ndarray) -> np.ndarray:
        n_v = np.asarray(counts_t @ weights.T).T
        d2 = _ordinal_delta2(n_v)
        obs = np.einsum("bx,bx->b", np.asarray(coinc @ weights.T).T, d2.reshape(len(weights), -1))
        exp = np.einsum("bc,bck,bk->b", n_v, d2, n_v)
        return 1.0 - (n_v.sum(axis=1) - 1) * obs / exp

    return stat, v * v


def krippendorff(
    data: Responses | NumericResponses | pd.DataFrame,
    *,
    metric: str = "nominal",
    levels: Sequence[Any] | str | None = None,
    n_bootstrap: int = 1000,
    level: float = 0.95,
    random_state: int | None = 0,
) -> ReliabilityEstimate:
    """Krippendorff's α (module docstring) with a bootstrap percentile interval over items.

    ``metric``: 'nominal', 'ordinal', 'interval' or 'ratio'.  Categorical responses use their class order for
    the ordinal metric (``levels`` declares another order, as for ``ordinal-em``) and need number labels for the
    interval and ratio metrics; numeric responses use their values.

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> from fusion_core.data.numeric import NumericResponses
    >>> wide = pd.DataFrame([[np.nan, 1, np.nan], [np.nan] * 3, [np.nan, 2, 2], [np.nan, 1, 1], [np.nan, 3, 3],
    ...                      [3, 3, 4], [4, 4, 4], [1, 3, np.nan], [2, np.nan, 2], [1, np.nan, 1],
    ...                      [1, np.nan, 1], [3, np.nan, 3], [3, np.nan, 3], [np.nan] * 3, [3, np.nan, 4]])
    >>> ratings = NumericResponses.from_wide(wide.dropna(how="all"))
    >>> round(krippendorff(ratings, metric="nominal", n_bootstrap=0).value, 6)  # Krippendorff 2011, §A
    0.691358
    >>> round(krippendorff(ratings, metric="interval", n_bootstrap=0).value, 6)
    0.810845
    """
    if metric not in METRICS:
        raise UserInputError(f"metric must be one of {', '.join(METRICS)}; got {metric!r}.")
    units = units_of(data, metric, levels)
    v = _check_values(units)
    if metric == "ordinal" and v > MAX_ORDINAL_VALUES:
        raise UserInputError(
            f"the ordinal metric ranks {v} different values here; above {MAX_ORDINAL_VALUES} use the interval metric."
        )
    spec, n_units = alpha_statistic(units, metric)
    return estimate_joint([spec], n_units, n_bootstrap=n_bootstrap, level=level, random_state=random_state)[0]


def _check_values(units: Units) -> int:
    """The number of values α can tell apart, refusing fewer than two."""
    v = len(units.domain)
    if v < 2:
        raise UserInputError("Krippendorff's alpha needs at least two different values among the responses.")
    return v


def alpha_statistic(units: Units, metric: str) -> tuple[ItemStatistic, int]:
    """α of ``metric`` as a statistic of the weights of ``units`` (its pairable items in item order), and their
    number."""
    stat, cells = (_ordinal_statistic if metric == "ordinal" else _fixed_statistic)(units, metric)
    note = f"{units.n_units} items with two or more values; {len(units.unit)} pairable values"
    return ItemStatistic(stat, f"Krippendorff's alpha ({metric})", cells, note), units.n_units


def nominal_alpha_statistic(resp: Responses) -> tuple[ItemStatistic, int]:
    """Nominal α as a statistic of the weights of the items with two or more responses, and their number (the
    agreement registry's entry, :data:`fusion_core.diagnostics.agreement.AGREEMENT_STATISTICS`)."""
    units = units_of(resp, "nominal")
    _check_values(units)
    return alpha_statistic(units, "nominal")


def krippendorff_alpha(data: Responses | pd.DataFrame | np.ndarray) -> float:
    """Krippendorff's α with the nominal metric, no interval; ``data`` may also be an items × K count matrix.
    Units with a single value are not pairable and are left out; NaN when nothing is pairable or only one value
    occurs."""
    if isinstance(data, np.ndarray):
        counts = np.rint(np.asarray(data, dtype=float)).astype(np.int64)
        keep = np.flatnonzero(counts.sum(axis=1) >= 2)
        rows, cols = np.nonzero(counts[keep])
        reps = counts[keep][rows, cols]
        units = Units(np.repeat(rows, reps), np.repeat(cols, reps), np.arange(counts.shape[1], dtype=float), len(keep))
    else:
        resp = as_responses(data)
        if not (np.bincount(resp.item, minlength=resp.n_items) >= 2).any():
            return float("nan")
        units = units_of(resp, "nominal")
    if units.n_units == 0:
        return float("nan")
    spec, n_units = alpha_statistic(units, "nominal")
    with np.errstate(divide="ignore", invalid="ignore"):
        return float(spec.statistic(np.ones((1, n_units)))[0])
