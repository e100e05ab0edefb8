"""The context-dependent reliability model of ``context-em``: the context as levels, (annotator, level) chains,
Lipschitz constants, the reporting grid, coverage, and the curves between fitted levels.

Soltanmohammadi, Naraghi-Pour & van der Schaar, ICML 2015 (``papers/soltanmohammadi-context-fusion.txt``);
spec ``context.md``.  Each annotator has reliability curves over a per-item context x (numeric, a date, or
categories with the discrete metric, §1.1, §5.4), constrained to be c-Lipschitz (eq. 2).  Only the distinct
context levels an annotator labelled enter the M-step (§5.2); more distinct values than ``max_context_levels``
are binned into equal-frequency levels (§5.6).  Smoothness in user terms (§10): ``swing`` s is the largest total
change of a curve across the observed context range, c = s / (max x − min x).  Between and beyond the fitted
levels curves follow the interpolation (17)–(19) (§7).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from fusion_core.data.coding import sorted_index
from fusion_core.data.responses import Responses
from fusion_core.data.text import show_value
from fusion_core.errors import UserInputError

MAX_CATEGORIES = 300  # a categorical context with more values is refused (spec §5.4)


# ====================================================================== the context per item
@dataclass(frozen=True)
class ContextValues:
    """The context per item code (NaN = missing; category codes for a categorical context) and its kind."""

    x: np.ndarray
    kind: str  # "numeric", "datetime (days)", "timedelta (days)" or "categorical"
    categories: pd.Index | None = None

    @property
    def discrete(self) -> bool:
        return self.categories is not None

    def codes(self, values: Any) -> np.ndarray:
        """User context values as the model's numbers (category codes, −1 for an unseen category)."""
        if self.categories is None:
            return np.atleast_1d(np.asarray(values, dtype=float))
        idx = pd.Index(np.atleast_1d(np.asarray(values, dtype=object)))
        return self.categories.get_indexer(idx).astype(float)


def context_column(data: pd.DataFrame | Any, column: str) -> pd.Series:
    """The context named by a column of the responses table, one value per task (it must be constant per task)."""
    if not isinstance(data, pd.DataFrame) or column not in data.columns:
        raise UserInputError(f"context column {column!r} is not in the responses table.")
    grp = data.groupby("task", sort=False)[column]
    nun = grp.nunique(dropna=False)
    bad = list(nun.index[nun > 1][:5])
    if bad:
        raise UserInputError(
            f"the context column {column!r} must be constant within a task; it varies in {int((nun > 1).sum())} "
            f"tasks, e.g. {bad}."
        )
    return grp.first()


def context_values(resp: Responses, context: Any) -> ContextValues:
    """Context per item code as float (dates and durations in days; categories by the discrete metric).  A
    one-column DataFrame is its column; infinite values are refused."""
    if isinstance(context, pd.DataFrame):
        if context.shape[1] != 1:
            raise UserInputError(
                f"the context must be one value per task: a Series indexed by task, or a one-column table; got a "
                f"table with {context.shape[1]} columns {[str(c) for c in context.columns][:5]}."
            )
        context = context.iloc[:, 0]
    try:
        ctx = pd.Series(context)
    except (TypeError, ValueError) as exc:
        raise UserInputError(
            f"the context must be a Series of one value per task (indexed by task); got {type(context).__name__} "
            f"({str(exc).splitlines()[0] if str(exc) else 'not convertible'})."
        ) from None
    if ctx.index.has_duplicates:
        g = ctx.groupby(level=0)
        nun = g.nunique(dropna=False)
        bad = list(nun.index[nun > 1][:5])
        if bad:
            raise UserInputError(f"the context must be one value per task; tasks with several values: {bad}.")
        ctx = g.first()
    kind, categories = "numeric", None
    if pd.api.types.is_datetime64_any_dtype(ctx.dtype):
        kind, vals = "datetime (days)", (ctx - ctx.min()).dt.total_seconds() / 86400.0
    elif pd.api.types.is_timedelta64_dtype(ctx.dtype):
        kind, vals = "timedelta (days)", ctx.dt.total_seconds() / 86400.0
    elif pd.api.types.is_bool_dtype(ctx.dtype) or pd.api.types.is_numeric_dtype(ctx.dtype):
        vals = ctx.astype(float)
    else:
        conv = pd.to_numeric(ctx, errors="coerce") if not isinstance(ctx.dtype, pd.CategoricalDtype) else None
        if conv is not None and not (conv.isna() & ctx.notna()).any():
            vals = conv.astype(float)
        else:  # categorical context: the discrete metric (d = 1 between different categories), spec §1.1, §5.4
            kind, categories = "categorical", _categories(ctx)
            vals = pd.Series(categories.get_indexer(ctx.to_numpy()).astype(float), index=ctx.index)
            vals[ctx.isna().to_numpy()] = np.nan
    infinite = np.isinf(vals.to_numpy(dtype=float))
    if infinite.any():
        task = vals.index[int(np.argmax(infinite))]
        raise UserInputError(
            f"the context of task {show_value(task)} is infinite; give a finite number per task (or leave it empty)."
        )
    x = np.full(resp.n_items, np.nan)
    codes = resp.item_codes(vals.index, what="context tasks", strict=False)
    ok = codes >= 0
    x[codes[ok]] = vals.to_numpy()[ok]
    return ContextValues(x, kind, categories)


def _categories(ctx: pd.Series) -> pd.Index:
    cats = sorted_index(ctx.dropna().to_numpy())
    if len(cats) > MAX_CATEGORIES:
        raise UserInputError(
            f"the context is neither numeric nor a usable categorical: {len(cats)} distinct non-numeric values "
            f"(e.g. {list(cats[:3])}); a categorical context may have at most {MAX_CATEGORIES} categories "
            "(spec §5.4). Convert it to a number (or a date) or group the values."
        )
    return cats


# ====================================================================== levels, pairs, constants
def context_levels(x: np.ndarray, used: np.ndarray, cap: int | None) -> tuple[np.ndarray, np.ndarray, float]:
    """Level index per item (−1 without context) and level locations (§5.2); more than ``cap`` distinct values are
    binned into ``cap`` equal-frequency levels at their means (§5.6).  Also returns the widest bin."""
    xi = x[used]
    uniq, inv = np.unique(xi, return_inverse=True)
    level = np.full(len(x), -1)
    if cap is None or len(uniq) <= int(cap):
        level[used] = inv
        return level, uniq, 0.0
    nb = int(cap)
    bins = (np.arange(len(uniq)) * nb) // len(uniq)
    item_bin = bins[inv]
    cnt = np.bincount(item_bin, minlength=nb)
    loc = np.bincount(item_bin, weights=xi, minlength=nb) / np.maximum(cnt, 1)
    lo = np.full(nb, np.inf)
    hi = np.full(nb, -np.inf)
    np.minimum.at(lo, bins, uniq)
    np.maximum.at(hi, bins, uniq)
    level[used] = item_bin
    return level, loc, float(np.max(hi - lo))


def response_pairs(
    item: np.ndarray, worker: np.ndarray, item_level: np.ndarray, n_levels: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(pair id per response, worker and level of every (worker, level) pair), pairs sorted by worker then level."""
    key = worker.astype(np.int64) * n_levels + item_level[item]
    uniq, pid = np.unique(key, return_inverse=True)
    return pid, (uniq // n_levels).astype(np.int64), (uniq % n_levels).astype(np.int64)


def lipschitz_constants(lipschitz: Any, swing: float, n_workers: int, x_range: float, rows: int = 2) -> np.ndarray:
    """c as ``rows`` × workers: rows = (false-alarm, detection) for the binary model, or one row per true class for
    the confusion-curve model (§9.2 option 2).  ``lipschitz`` (a number, a ``rows``-vector or array) overrides
    ``swing`` (c = swing / context range, §10)."""
    if lipschitz is None:
        return np.full((rows, n_workers), swing / x_range if x_range > 0 else 0.0)
    c = np.asarray(lipschitz, dtype=float)
    if c.ndim == 0:
        c = np.full((rows, n_workers), float(c))
    elif c.shape == (rows,):
        c = np.repeat(c[:, None], n_workers, axis=1)
    if c.shape != (rows, n_workers):
        what = "false-alarm row, detection row" if rows == 2 else "one row per true class"
        raise UserInputError(
            f"lipschitz must be a number or a {rows} × {n_workers} array ({what}); got shape {c.shape}."
        )
    return c


def check_lipschitz(value: Any) -> Any:
    """Parameter check for ``lipschitz``: None, or numbers that are finite and ≥ 0 (the shape is checked at fit)."""
    if value is None:
        return None
    try:
        c = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise UserInputError("None, a number ≥ 0, or an array of numbers ≥ 0 (one row per curve)") from None
    if c.ndim > 2 or not np.all(np.isfinite(c)) or (c < 0).any():
        raise UserInputError("None, a number ≥ 0, or an array of numbers ≥ 0 (one row per curve)")
    return value


# ====================================================================== coverage (spec §9.1)
def context_coverage(
    x_resp: np.ndarray, worker: np.ndarray, n_workers: int, grid: np.ndarray, names: pd.Index | None = None
) -> tuple[np.ndarray, list[str]]:
    """Responses per annotator against the context (workers × grid counts, each response at its nearest grid point;
    per category when ``names`` are the categories) and, as readable labels, the context regions (10 equal-width
    bins of the range, or the categories) in which fewer than 3 annotators have responses."""
    G = len(grid)
    if names is not None:
        cell = reg = x_resp.astype(np.int64)
        nreg = G
    else:
        lo, hi = float(grid[0]), float(grid[-1])
        span = hi - lo if hi > lo else 1.0
        cell = np.clip(np.rint((x_resp - lo) / span * (G - 1)), 0, G - 1).astype(np.int64)
        nreg = 10
        reg = np.clip(np.floor((x_resp - lo) / span * nreg), 0, nreg - 1).astype(np.int64)
        edges = lo + span * np.arange(nreg + 1) / nreg
    cov = np.bincount(worker * G + cell, minlength=n_workers * G).reshape(n_workers, G)
    per_region = (np.bincount(worker * nreg + reg, minlength=n_workers * nreg).reshape(n_workers, nreg) > 0).sum(axis=0)
    thin = []
    for r in np.flatnonzero(per_region < 3):  # ≤ 10 regions (or categories)
        where = f"category {names[r]!r}" if names is not None else f"[{edges[r]:.4g}, {edges[r + 1]:.4g}]"
        thin.append(f"{where}: {int(per_region[r])} annotator{'s' if per_region[r] != 1 else ''}")
    return cov, thin


# ====================================================================== the prepared fit
@dataclass
class ContextSetup:
    """What one ``context-em`` fit works on: the responses that have a context, their (worker, level) pairs, the
    levels, Lipschitz constants, the reporting grid and coverage, and the data warnings so far."""

    values: ContextValues
    levels: np.ndarray
    item: np.ndarray
    worker: np.ndarray
    label: np.ndarray
    pid: np.ndarray
    pair_worker: np.ndarray
    pair_level: np.ndarray
    lipschitz: np.ndarray
    grid: np.ndarray
    coverage: np.ndarray
    binning_bound: float
    n_contrib: np.ndarray  # responses with a context per worker
    warnings: list[str] = field(default_factory=list)

    @property
    def discrete(self) -> bool:
        return self.values.discrete


def prepare_context(
    resp: Responses,
    values: ContextValues,
    *,
    lipschitz: Any,
    swing: float,
    max_levels: int | None,
    grid_size: int,
    drop_missing: bool,
    rows: int,
) -> ContextSetup:
    """Levels, pairs, constants, grid and coverage of a fit, with the data warnings of spec §2, §5.6 and §9.1."""
    warn = _missing_context(resp, values.x, drop_missing)
    x = values.x
    keep = ~np.isnan(x[resp.item])
    used = ~np.isnan(x) & (resp.responses_per_item > 0)
    if not used.any():
        raise UserInputError("no task with responses has a context value.")
    if values.discrete:
        assert values.categories is not None
        levels = np.arange(len(values.categories), dtype=float)
        level = np.where(used, x, -1).astype(np.int64)
        bin_width = 0.0
        x_range = 1.0 if len(np.unique(x[used])) > 1 else 0.0  # the discrete metric's diameter
        grid = levels.copy()
    else:
        level, levels, bin_width = context_levels(x, used, max_levels)
        x_range = float(levels.max() - levels.min())
        grid = np.linspace(float(levels.min()), float(levels.max()), int(grid_size))
    c = lipschitz_constants(lipschitz, swing, resp.n_workers, x_range, rows)
    bound = float(c.max() * bin_width)
    item, worker, label = resp.item[keep], resp.worker[keep], resp.label[keep]
    n_contrib = np.bincount(worker, minlength=resp.n_workers)
    coverage, thin = context_coverage(x[item], worker, resp.n_workers, grid, values.categories)
    warn += _data_warnings(len(levels), bound, int((n_contrib > 0).sum()), x_range, thin)
    pid, pw, pl = response_pairs(item, worker, level, len(levels))
    return ContextSetup(values, levels, item, worker, label, pid, pw, pl, c, grid, coverage, bound, n_contrib, warn)


def _missing_context(resp: Responses, x: np.ndarray, drop: bool) -> list[str]:
    missing = np.isnan(x) & (resp.responses_per_item > 0)
    if not missing.any():
        return []
    if not drop:
        raise UserInputError(
            f"{int(missing.sum())} tasks have no context value (e.g. {list(resp.items[missing][:5])}); supply them or "
            "pass drop_missing_context=True to drop those tasks."
        )
    return [f"dropped {int(missing.sum())} tasks without a context value; their posteriors are the class prior."]


def _data_warnings(n_levels: int, bound: float, n_annotators: int, x_range: float, thin: list[str]) -> list[str]:
    warn = []
    if bound > 0.02:
        warn.append(
            f"context binning to {n_levels} levels can move a curve by up to {bound:.3f}; raise max_context_levels "
            "or pass None for the exact fit."
        )
    if n_annotators < 3:
        warn.append(
            "fewer than 3 annotators: the two-coin model is not identifiable (spec §2); results rest on the "
            "initialisation."
        )
    if x_range == 0:
        warn.append("the context is constant: context-em reduces to context-blind two-coin Dawid–Skene.")
    if thin and n_annotators >= 3 and x_range > 0:
        shown = "; ".join(thin[:3]) + (f" and {len(thin) - 3} more" if len(thin) > 3 else "")
        warn.append(
            f"fewer than 3 annotators have responses in part of the context range ({shown}): the curves there rest "
            "on 1–2 annotators or are pure interpolation (spec §9.1); the coverage (result.context.coverage) shows "
            "who labelled where."
        )
    return warn


# ====================================================================== interpolation (spec §7)
def lipschitz_interpolate(
    x_levels: np.ndarray, p_levels: np.ndarray, c: float, x_query: np.ndarray, mode: str = "paper"
) -> np.ndarray:
    """Eqs. (17)–(19): lower envelope p^(1), upper envelope p^(2); ``"paper"`` = min(p^(1), p^(2)),
    ``"mid"`` = their mean.  O(U + G) scan for scalar contexts; clipped to [0, 1]."""
    xl = np.asarray(x_levels, float)
    pl = np.asarray(p_levels, float)
    xq = np.asarray(x_query, float)
    if len(xl) == 0:
        return np.full(xq.shape, np.nan)
    order = np.argsort(xl, kind="stable")
    xl, pl = xl[order], pl[order]
    u = len(xl)
    i_le = np.searchsorted(xl, xq, side="right") - 1  # last level ≤ x
    i_ge = np.searchsorted(xl, xq, side="left")  # first level ≥ x
    has_le = i_le >= 0
    has_ge = i_ge < u
    le = np.clip(i_le, 0, u - 1)
    ge = np.clip(i_ge, 0, u - 1)
    a = np.maximum.accumulate(pl + c * xl)
    b = np.maximum.accumulate((pl - c * xl)[::-1])[::-1]
    lower = np.maximum(np.where(has_le, a[le] - c * xq, -np.inf), np.where(has_ge, b[ge] + c * xq, -np.inf))
    a2 = np.minimum.accumulate(pl - c * xl)
    b2 = np.minimum.accumulate((pl + c * xl)[::-1])[::-1]
    upper = np.minimum(np.where(has_le, a2[le] + c * xq, np.inf), np.where(has_ge, b2[ge] - c * xq, np.inf))
    out = np.minimum(lower, upper) if mode == "paper" else 0.5 * (lower + upper)
    return np.clip(out, 0.0, 1.0)


def _segment_accumulate(v: np.ndarray, seg: np.ndarray, n_seg: int, *, reverse: bool) -> np.ndarray:
    """Running maximum of ``v`` within contiguous segments (``seg``: non-decreasing segment id per entry), forwards
    or backwards: ranks plus segment offsets make one integer running maximum exact (no floating-point offsets)."""
    if reverse:
        return _segment_accumulate(v[::-1], n_seg - 1 - seg[::-1], n_seg, reverse=False)[::-1]
    order = np.argsort(v, kind="stable")
    rank = np.empty(len(v), dtype=np.int64)
    rank[order] = np.arange(len(v))
    top = np.maximum.accumulate(seg * len(v) + rank) - seg * len(v)
    return v[order[top]]


def lipschitz_interpolate_chains(
    levels: np.ndarray, pair_chain: np.ndarray, pair_level: np.ndarray, P: np.ndarray, c: np.ndarray,
    *, n_chains: int, x_query: np.ndarray, mode: str = "paper",
) -> np.ndarray:  # fmt: skip
    """:func:`lipschitz_interpolate` of many curves at once: rows ``P`` (R × pairs) on the chains of pairs sorted by
    chain then level (``pair_chain``, ``pair_level`` into the sorted distinct ``levels``), constants ``c``
    (R × chains), at the same ``x_query`` (G points); R × chains × G, NaN for chains without pairs.  The same
    floating-point operations as the one-chain scan, so the values are identical to it."""
    xq = np.asarray(x_query, float)
    R, n = P.shape
    out = np.full((R, n_chains, len(xq)), np.nan)
    if n == 0 or R == 0:
        return out
    M = len(levels) + 2
    key = pair_chain * M + pair_level + 1  # sorted: chain, then level
    first = np.searchsorted(pair_chain, np.arange(n_chains), side="left")
    last = np.searchsorted(pair_chain, np.arange(n_chains), side="right")
    lev_le = np.searchsorted(levels, xq, side="right")  # 1 + last level ≤ x
    lev_ge = np.searchsorted(levels, xq, side="left") + 1  # 1 + first level ≥ x
    base = np.arange(n_chains)[:, None] * M
    le = np.searchsorted(key, base + lev_le, side="right") - 1  # chains × G, pair index (last level ≤ x)
    ge = np.searchsorted(key, base + lev_ge, side="left")  # first level ≥ x
    has_le, has_ge = le >= first[:, None], ge < last[:, None]
    le, ge = np.clip(le, 0, n - 1), np.clip(ge, 0, n - 1)
    xl = levels[pair_level]
    seg = np.arange(R)[:, None] * n_chains + pair_chain  # R × pairs, non-decreasing when flattened
    flat_seg = seg.ravel()
    cp = np.take_along_axis(c, np.broadcast_to(pair_chain, (R, n)), axis=1)
    acc = lambda v, rev: _segment_accumulate(v.ravel(), flat_seg, R * n_chains, reverse=rev).reshape(R, n)  # noqa: E731
    a = acc(P + cp * xl, False)
    b = acc(P - cp * xl, True)
    a2 = -acc(-(P - cp * xl), False)
    b2 = -acc(-(P + cp * xl), True)
    for r in range(R):  # curves, not responses (chains × G per curve)
        cq = c[r][:, None] * xq[None, :]
        lower = np.maximum(np.where(has_le, a[r][le] - cq, -np.inf), np.where(has_ge, b[r][ge] + cq, -np.inf))
        upper = np.minimum(np.where(has_le, a2[r][le] + cq, np.inf), np.where(has_ge, b2[r][ge] - cq, np.inf))
        o = np.minimum(lower, upper) if mode == "paper" else 0.5 * (lower + upper)
        out[r] = np.clip(o, 0.0, 1.0)
    out[:, last == first] = np.nan
    return out


def interpolate_levels(
    x_levels: np.ndarray,
    p_levels: np.ndarray,
    c: float,
    x_query: np.ndarray,
    *,
    mode: str = "paper",
    discrete: bool = False,
) -> np.ndarray:
    """Eqs. (17)–(19) for a scalar metric (:func:`lipschitz_interpolate`) or the discrete metric (categorical
    contexts: d = 1 between different categories, so an unseen category gets min(max p − c, min p + c))."""
    if not discrete:
        return lipschitz_interpolate(x_levels, p_levels, c, x_query, mode)
    xl = np.asarray(x_levels, float)
    pl = np.asarray(p_levels, float)
    xq = np.asarray(x_query, float)
    if len(xl) == 0:
        return np.full(xq.shape, np.nan)
    lower, upper = pl.max() - c, pl.min() + c
    other = min(lower, upper) if mode == "paper" else 0.5 * (lower + upper)
    idx = pd.Index(xl).get_indexer(xq.ravel()).reshape(xq.shape)
    return np.clip(np.where(idx >= 0, pl[np.maximum(idx, 0)], other), 0.0, 1.0)


def interpolate_rows(
    xs: np.ndarray, rows: np.ndarray, c: float, xq: np.ndarray, *, mode: str, discrete: bool, eps: float, pos: int = 1
) -> np.ndarray:
    """Confusion rows (levels × J) at ``xq`` entry by entry by (17)–(19), then back onto the simplex: J = 2 keeps the
    binary model's convention (interpolate the positive class's entry ``pos``, the other is its complement; the
    lower extension (19) is not symmetric under p ↦ 1 − p); J > 2 clips at ``eps`` and renormalises."""
    J = rows.shape[1]
    if J == 2:
        p = np.clip(interpolate_levels(xs, rows[:, pos], c, xq, mode=mode, discrete=discrete), eps, 1 - eps)
        return np.column_stack([1 - p, p]) if pos == 1 else np.column_stack([p, 1 - p])
    vals = np.column_stack([interpolate_levels(xs, rows[:, j], c, xq, mode=mode, discrete=discrete) for j in range(J)])
    vals = np.maximum(vals, eps)
    return vals / vals.sum(axis=1, keepdims=True)


def one_vs_rest_curves(conf: np.ndarray, prior: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Class-vs-rest curves from confusion curves ``conf`` (workers × points × true × reported): detection
    P(ŷ = c | y = c) and false alarm P(ŷ = c | y ≠ c) = Σ_{i≠c} π_i P(ŷ = c | y = i) / Σ_{i≠c} π_i, as
    workers × classes × points."""
    det = np.einsum("wgcc->wcg", conf)
    w = np.clip(np.asarray(prior, float), 1e-12, None)
    weighted = np.einsum("wgic,i->wcg", conf, w) - det * w[None, :, None]
    fa = weighted / (w.sum() - w)[None, :, None]
    return det, fa
