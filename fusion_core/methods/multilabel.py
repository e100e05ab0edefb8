"""Multi-label aggregation with a Boolean flip/mixture noise model (``multilabel-em``).

Spec ``multilabel.md`` (Streich 2010, ETH Diss. 19229, Ch. 9 noise models (9.8)–(9.17), annealing (9.20)–(9.25));
the annotator reading is an extension (§4).  Each item has a latent label *set* L in an admissible family 𝕃 (all
sets of at most M labels, optionally ∅); annotator j reports each label with P(x = 1 | c ∈ L) = 1 − ε1 and
P(x = 1 | c ∉ L) = ε0 (flip noise, §4.2) per noise cell (granularity §6).  EM (§5): E-step over sets with the
scatter-sum form log p(x_i | L) = B_i + Σ_c z_Lc Δ_ic (§4.3) in item chunks; closed-form M-step (§5.2–§5.3);
set / uniform / product prior (§4.4); the factorised "binary relevance" path when the model decouples (§4.5);
optional deterministic annealing (§7, :mod:`fusion_core.annealing`).
"""

from __future__ import annotations

import itertools
import time
import warnings
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
import pandas as pd
import scipy.sparse as sp

from fusion_core.errors import AggregationWarning, UserInputError
from fusion_core.methods.base import Aggregator, Fit, FitResult, log_normalize
from fusion_core.methods.registry import register

FLOOR = 1e-6
GRANULARITIES = ("global", "label", "annotator", "annotator_label", "item")
_N_PARAMS_ORDER = {g: i for i, g in enumerate(GRANULARITIES)}


# ====================================================================== data (spec §2)


@dataclass
class MultiLabelData:
    """Responses r with item/worker codes, bits X (R × C, bool) and observed mask O (None = all observed)."""

    item: np.ndarray
    worker: np.ndarray
    X: np.ndarray
    O: np.ndarray | None
    items: pd.Index
    workers: pd.Index
    labels: pd.Index
    report: dict[str, Any] = field(default_factory=dict)

    @property
    def n_items(self) -> int:
        return len(self.items)

    @property
    def n_workers(self) -> int:
        return len(self.workers)

    @property
    def n_labels(self) -> int:
        return len(self.labels)

    @property
    def n_responses(self) -> int:
        return len(self.item)

    def subset(self, mask: np.ndarray) -> "MultiLabelData":
        """Selected responses with the same item/worker/label coding."""
        m = np.asarray(mask, bool)
        return MultiLabelData(self.item[m], self.worker[m], self.X[m], None if self.O is None else self.O[m], self.items, self.workers, self.labels, dict(self.report))

    def to_frame(self, sep: str = "|") -> pd.DataFrame:
        """Format A (closed world only)."""
        vals = self.labels.astype(str).to_numpy()
        sets = [sep.join(vals[row]) for row in self.X]
        return pd.DataFrame({"task": self.items.take(self.item), "worker": self.workers.take(self.worker), "label": sets})


def _parse_present(v: pd.Series) -> np.ndarray:
    if pd.api.types.is_bool_dtype(v.dtype):
        return v.to_numpy(bool)
    text = v.astype(str).str.strip().str.lower()
    table = {"1": True, "0": False, "true": True, "false": False, "yes": True, "no": False, "1.0": True, "0.0": False}
    out = text.map(table)
    if out.isna().any():
        r = int(np.flatnonzero(out.isna().to_numpy())[0])
        raise UserInputError(f"row {r}: 'present' must be 0/1, true/false or yes/no, got {v.iloc[r]!r}.")
    return out.to_numpy(bool)


def _vocabulary(reported: Sequence[Any], labels: Sequence[Any] | None, sep: str) -> pd.Index:
    rep = pd.unique(pd.Series(list(reported), dtype=object)) if len(reported) else np.array([], dtype=object)
    if labels is not None:
        voc = list(labels)
        extra = [x for x in rep if x not in set(voc)]
        try:
            extra = sorted(extra)
        except TypeError:
            extra = sorted(extra, key=str)
        voc += extra
    else:
        try:
            voc = sorted(rep)
        except TypeError:
            voc = sorted(rep, key=str)
    bad = [x for x in voc if isinstance(x, str) and sep in x]
    if bad:
        raise UserInputError(f"labels {bad[:5]} contain the separator {sep!r}; choose another sep.")
    if len(voc) == 0:
        raise UserInputError("no label is reported and no vocabulary was given (labels=[...]).")
    return pd.Index(voc, dtype=object)


def parse_multilabel(
    df: pd.DataFrame,
    *,
    task: str = "task",
    worker: str = "worker",
    label: str = "label",
    present: str | None = None,
    sep: str = "|",
    labels: Sequence[Any] | None = None,
    unlisted: str = "absent",
    duplicates: str = "keep",
) -> MultiLabelData:
    """Both input formats of spec §2: format A (one row per (task, worker), label set as ``sep``-joined text or a
    list/tuple/set) and format B (one row per (task, worker, label) with a ``present`` column)."""
    if isinstance(df, MultiLabelData):
        return df
    if not isinstance(df, pd.DataFrame):
        raise UserInputError(f"expected a table of multi-label responses, got {type(df).__name__}.")
    if present is None and "present" in df.columns:
        present = "present"
    cols = [task, worker, label] + ([present] if present else [])
    miss = [c for c in cols if c not in df.columns]
    if miss:
        raise UserInputError(f"missing column(s) {miss}; the table has {[str(c) for c in df.columns]}.")
    if len(df) == 0:
        raise UserInputError("the responses table is empty.")
    if unlisted not in ("absent", "missing"):
        raise UserInputError(f"unlisted must be 'absent' or 'missing', got {unlisted!r}.")
    if duplicates not in ("keep", "last", "error"):
        raise UserInputError(f"duplicates must be 'keep', 'last' or 'error', got {duplicates!r}.")
    report: dict[str, Any] = {"rows_read": len(df)}
    ids = df[[task, worker]]
    if ids.isna().any().any():
        r = int(np.flatnonzero(ids.isna().any(axis=1).to_numpy())[0])
        raise UserInputError(f"row {r}: task or worker id missing.")
    if present is None:
        return _parse_format_a(df, task, worker, label, sep, labels, duplicates, report)
    return _parse_format_b(df, task, worker, label, present, sep, labels, unlisted, report)


def _parse_format_a(df, task, worker, label, sep, labels, duplicates, report) -> MultiLabelData:
    col = df[label]
    isna = col.map(lambda v: v is None or (isinstance(v, float) and np.isnan(v))).to_numpy(bool)
    if isna.any():
        rows = list(np.flatnonzero(isna)[:5])
        raise UserInputError(f"rows {rows}: label set missing; use an empty string for 'no labels'.")
    work = df[[task, worker]].copy()
    work["_row"] = np.arange(len(df))
    dup = work.duplicated(subset=[task, worker], keep=False).to_numpy()
    report["duplicate_rows"] = int(work.duplicated(subset=[task, worker]).sum())
    if report["duplicate_rows"]:
        if duplicates == "error":
            ex = work[dup].iloc[0]
            raise UserInputError(f"{report['duplicate_rows']} rows repeat a (task, worker) pair, e.g. task {ex[task]!r} by {ex[worker]!r}.")
        if duplicates == "last":
            keep = ~work.duplicated(subset=[task, worker], keep="last").to_numpy()
            work = work[keep]
            col = col[keep]
    tokens = col.map(lambda v: v.split(sep) if isinstance(v, str) else (list(v) if isinstance(v, (list, tuple, set, frozenset, np.ndarray)) else [v]))
    ex = tokens.explode()
    rows = np.repeat(np.arange(len(col)), tokens.map(len).to_numpy())
    vals = ex.to_numpy(dtype=object)
    vals = np.array([v.strip() if isinstance(v, str) else v for v in vals], dtype=object)
    nonempty = np.array([not (isinstance(v, str) and v == "") and not (v is None or (isinstance(v, float) and np.isnan(v))) for v in vals], bool)
    rows, vals = rows[nonempty], vals[nonempty]
    voc = _vocabulary(vals, labels, sep)
    code = voc.get_indexer(pd.Index(vals, dtype=object)) if len(vals) else np.zeros(0, np.int64)
    pairs = pd.DataFrame({"r": rows, "c": code}).drop_duplicates()
    report["repeated_labels_in_set"] = int(len(rows) - len(pairs))
    item_code, items = pd.factorize(work[task], sort=True)
    worker_code, workers = pd.factorize(work[worker], sort=True)
    X = np.zeros((len(work), len(voc)), dtype=bool)
    X[pairs["r"].to_numpy(), pairs["c"].to_numpy()] = True
    report["responses"] = len(work)
    return MultiLabelData(item_code.astype(np.int64), worker_code.astype(np.int64), X, None, pd.Index(items), pd.Index(workers), voc, report)


def _parse_format_b(df, task, worker, label, present, sep, labels, unlisted, report) -> MultiLabelData:
    if df[label].isna().any():
        r = int(np.flatnonzero(df[label].isna().to_numpy())[0])
        raise UserInputError(f"row {r}: label missing in format B (one row per task, worker, label).")
    pres = _parse_present(df[present])
    work = pd.DataFrame({"t": df[task].to_numpy(), "w": df[worker].to_numpy(), "l": df[label].to_numpy(), "p": pres, "_row": np.arange(len(df))})
    g = work.groupby(["t", "w", "l"], sort=False)["p"]
    nun = g.nunique()
    if (nun > 1).any():
        bad = nun[nun > 1].index[:5].tolist()
        rows = work.set_index(["t", "w", "l"]).loc[bad[:1], "_row"].tolist()
        raise UserInputError(f"conflicting duplicate rows (present both 0 and 1) for (task, worker, label) {bad}; rows {rows}.")
    before = len(work)
    work = work.drop_duplicates(subset=["t", "w", "l"])
    report["collapsed_duplicates"] = before - len(work)
    voc = _vocabulary(work["l"].to_numpy(), labels, sep)
    pair_df = work[["t", "w"]].drop_duplicates()
    item_code, items = pd.factorize(pair_df["t"], sort=True)
    worker_code, workers = pd.factorize(pair_df["w"], sort=True)
    key = pd.MultiIndex.from_frame(pair_df)
    r = key.get_indexer(pd.MultiIndex.from_frame(work[["t", "w"]]))
    c = voc.get_indexer(pd.Index(work["l"].to_numpy(), dtype=object))
    R = len(pair_df)
    X = np.zeros((R, len(voc)), bool)
    X[r[work["p"].to_numpy()], c[work["p"].to_numpy()]] = True
    O = None
    if unlisted == "missing":
        O = np.zeros((R, len(voc)), bool)
        O[r, c] = True
    elif work["p"].nunique() > 1:
        listed = pd.Series(c).groupby(r).agg(lambda s: frozenset(s))
        if listed.nunique() > 1:
            warnings.warn(
                "format B lists different label subsets for different (task, worker) pairs while unlisted='absent'; "
                "the data look like partial judgments: consider unlisted='missing'.",
                AggregationWarning,
            )
    report["responses"] = R
    return MultiLabelData(item_code.astype(np.int64), worker_code.astype(np.int64), X, O, pd.Index(items), pd.Index(workers), voc, report)


# ====================================================================== admissible family (spec §4.4)


def admissible_sets(n_labels: int, max_degree: int, include_empty: bool = True) -> np.ndarray:
    """Membership matrix Z (|𝕃| × C, bool) of all sets of size ≤ max_degree (∅ first when included)."""
    rows = []
    for m in range(0 if include_empty else 1, max_degree + 1):
        for comb in itertools.combinations(range(n_labels), m):
            z = np.zeros(n_labels, bool)
            z[list(comb)] = True
            rows.append(z)
    return np.array(rows, dtype=bool).reshape(-1, n_labels)


# ====================================================================== model


@dataclass
class _State:
    eps0: np.ndarray  # per cell
    eps1: np.ndarray
    log_prior: np.ndarray | None  # per set (enumerated) or None
    rho: np.ndarray | None  # per label (factorised / product)


class _Model:
    """Sufficient statistics and E/M steps of one fit (everything vectorised over responses)."""

    def __init__(self, data: MultiLabelData, *, granularity, noise, Z, prior, alpha, kappa, factorised, chunk=20000):
        self.d = data
        R, C = data.X.shape
        self.C = C
        self.noise = noise
        self.prior = prior
        self.alpha = float(alpha)
        self.kappa = float(kappa)
        self.Z = Z
        self.factorised = factorised
        self.chunk = int(chunk)
        self.granularity = granularity
        cell, ncell = self._cells(granularity)
        self.cell = cell
        self.ncell = ncell
        Xf = data.X
        if data.O is None:
            self.Sx = np.bincount(cell.ravel(), weights=Xf.ravel().astype(float), minlength=ncell)
            self.So = np.bincount(cell.ravel(), minlength=ncell).astype(float)
        else:
            self.Sx = np.bincount(cell.ravel(), weights=(Xf & data.O).ravel().astype(float), minlength=ncell)
            self.So = np.bincount(cell.ravel(), weights=data.O.ravel().astype(float), minlength=ncell)
        self.inc = sp.csr_matrix((np.ones(R), (data.item, np.arange(R))), shape=(data.n_items, R))

    def _cells(self, g):
        d = self.d
        R, C = d.X.shape
        if g == "global":
            return np.zeros((R, C), np.int64), 1
        if g == "label":
            return np.broadcast_to(np.arange(C), (R, C)).copy(), C
        if g == "annotator":
            return np.repeat(d.worker[:, None], C, axis=1), d.n_workers
        if g == "annotator_label":
            return d.worker[:, None] * C + np.arange(C)[None, :], d.n_workers * C
        if g == "item":
            return np.repeat(d.item[:, None], C, axis=1), d.n_items
        raise UserInputError(f"granularity must be one of {GRANULARITIES}, got {g!r}.")

    # ---------------------------------------------------------------- M-step (§5.2–§5.4)
    def m_noise(self, m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        mr = m[self.d.item]
        if self.d.O is not None:
            mr = mr * self.d.O
        Sm = np.bincount(self.cell.ravel(), weights=mr.ravel(), minlength=self.ncell)
        Smx = np.bincount(self.cell.ravel(), weights=(mr * self.d.X).ravel(), minlength=self.ncell)
        n11 = Smx
        n10 = Sm - Smx
        n01 = self.Sx - Smx
        n00 = self.So - Sm - self.Sx + Smx
        a = self.alpha
        if self.noise == "symmetric":
            e = (n10 + n01 + a) / (self.So + 2 * a)
            e = np.clip(e, FLOOR, 1 - FLOOR)
            return e, e.copy()
        e1 = (n10 + a) / (n11 + n10 + 2 * a)
        e0 = (n01 + a) / (n01 + n00 + 2 * a)
        if self.noise == "mixture":  # §5.3: project onto ε0 + ε1 ≤ 1 (pure guesser on the boundary)
            over = e0 + e1 > 1
            if over.any():
                r = (n11 + n01 + 2 * a) / (self.So + 4 * a)
                e0 = np.where(over, r, e0)
                e1 = np.where(over, 1 - r, e1)
        return np.clip(e0, FLOOR, 1 - FLOOR), np.clip(e1, FLOOR, 1 - FLOOR)

    def m_prior(self, gamma_sum: np.ndarray | None, m: np.ndarray) -> tuple[np.ndarray | None, np.ndarray | None]:
        n = self.d.n_items
        if self.factorised or self.prior == "product":
            rho = np.clip(m.mean(axis=0), FLOOR, 1 - FLOOR)
            if self.factorised:
                return None, rho
            lp = self.Z @ np.log(rho) + (~self.Z) @ np.log1p(-rho)
            return lp, rho
        S = self.Z.shape[0]
        if self.prior == "uniform":
            return np.full(S, -np.log(S)), None
        pi = (gamma_sum + self.kappa) / (n + self.kappa * S)
        return np.log(pi), None

    def penalty(self, st: _State) -> float:
        """Log prior terms of the MAP objective (Beta(1+α, 1+α) on noise, Dirichlet(1+κ) on the set prior)."""
        a = self.alpha
        if self.noise == "symmetric":
            pen = a * (np.log(st.eps0) + np.log1p(-st.eps0)).sum()
        else:
            pen = a * (np.log(st.eps0) + np.log1p(-st.eps0) + np.log(st.eps1) + np.log1p(-st.eps1)).sum()
        if st.log_prior is not None and self.prior == "set" and not self.factorised:
            pen += self.kappa * st.log_prior.sum()
        return float(pen)

    # ---------------------------------------------------------------- E-step (§4.3, §5.1)
    def scatter(self, st: _State, data: MultiLabelData | None = None, cell=None, inc=None) -> tuple[np.ndarray, np.ndarray]:
        """B (items) and Δ (items × C) by scatter-sums over observed bits."""
        d = data or self.d
        cell = self.cell if cell is None else cell
        inc = self.inc if inc is None else inc
        le0, l1e0 = np.log(st.eps0), np.log1p(-st.eps0)
        le1, l1e1 = np.log(st.eps1), np.log1p(-st.eps1)
        X = d.X
        b = np.where(X, le0[cell], l1e0[cell])
        dl = np.where(X, (l1e1 - le0)[cell], (le1 - l1e0)[cell])
        if d.O is not None:
            b = b * d.O
            dl = dl * d.O
        B = inc @ b.sum(axis=1)
        D = inc @ dl
        return np.asarray(B).ravel(), np.asarray(D)

    def e_step(self, st: _State, T: float = 1.0, want_top: int = 0):
        """Tempered posterior marginals m, Σ_i γ_iL, ℓ (at T = 1), F (at T), entropy, MAP set index, top sets."""
        B, D = self.scatter(st)
        n = self.d.n_items
        if self.factorised:
            lo = np.log1p(-st.rho)[None, :]
            l1 = np.log(st.rho)[None, :] + D
            ll = float(B.sum() + np.logaddexp(lo, l1).sum())
            logit = (l1 - lo) / T
            m = 1.0 / (1.0 + np.exp(-logit))
            Fe = float(-T * (B / T).sum() - T * np.logaddexp(lo / T, l1 / T).sum())
            mm = np.clip(m, 1e-300, 1)
            ent = -(mm * np.log(mm) + (1 - m) * np.log(np.clip(1 - m, 1e-300, 1))).sum(axis=1)
            return {"m": m, "gsum": None, "ll": ll, "F": Fe, "entropy": float(ent.mean() / (self.C * np.log(2))), "map": None, "top": None}
        Zf = self.Z.astype(float)
        S = Zf.shape[0]
        m = np.empty((n, self.C))
        gsum = np.zeros(S)
        ll = 0.0
        Fe = 0.0
        ent = 0.0
        mp = np.empty(n, np.int64)
        top = [] if want_top else None
        for lo in range(0, n, self.chunk):
            hi = min(n, lo + self.chunk)
            lj = B[lo:hi, None] + D[lo:hi] @ Zf.T + st.log_prior[None, :]
            g1, lz = log_normalize(lj)
            ll += float(lz.sum())
            if T != 1.0:
                g, lzt = log_normalize(lj / T)
                Fe += float(-T * lzt.sum())
            else:
                g = g1
                Fe += float(-lz.sum())
            m[lo:hi] = g @ Zf
            gsum += g.sum(axis=0)
            ent += float(-(g * np.log(np.clip(g, 1e-300, 1))).sum())
            mp[lo:hi] = np.argmax(lj, axis=1)
            if want_top:
                k = min(want_top, S)
                idx = np.argsort(-g1, axis=1)[:, :k]
                top.append((idx, np.take_along_axis(g1, idx, axis=1)))
        return {"m": m, "gsum": gsum, "ll": ll, "F": Fe, "entropy": ent / (n * np.log(S)) if S > 1 else 0.0, "map": mp, "top": top}

    def m_step(self, e) -> _State:
        e0, e1 = self.m_noise(e["m"])
        lp, rho = self.m_prior(e["gsum"], e["m"])
        return _State(e0, e1, lp, rho)

    def initial_state(self) -> _State:
        """§5.5: m_ic = vote share of label c on item i (observed bits), one noise M-step, uniform prior."""
        d = self.d
        obs = np.ones_like(d.X, dtype=float) if d.O is None else d.O.astype(float)
        num = np.asarray(self.inc @ (d.X * obs))
        den = np.asarray(self.inc @ obs)
        m = np.where(den > 0, num / np.where(den > 0, den, 1), 0.5)
        e0, e1 = self.m_noise(m)
        if self.factorised:
            return _State(e0, e1, None, np.full(self.C, 0.5))
        S = self.Z.shape[0]
        if self.prior == "product":
            return _State(e0, e1, np.full(S, -np.log(S)), np.full(self.C, 0.5))
        return _State(e0, e1, np.full(S, -np.log(S)), None)


# ====================================================================== estimator

_PARAMS = {
    "noise": {"choices": ("flip", "mixture", "symmetric"), "help": "Noise model: asymmetric flip (ε0 false positives, ε1 misses), mixture (guess with prob. ε, say 'present' with prob. r; excludes adversarial annotators) or symmetric flip."},
    "granularity": {"choices": GRANULARITIES, "help": "Noise cells: one global pair, per label, per annotator (default), per (annotator, label) or per item (diagnostic only: over-fits)."},
    "max_degree": {"kind": "object", "help": "Largest true-set size M (default: 99th percentile of reported set sizes, 1..4)."},
    "include_empty": {"help": "Allow the empty set as a true label set."},
    "admissible": {"choices": ("degree", "observed", "all"), "help": "Admissible true sets: all sets of ≤ M labels, the sets reported at least once (+ ∅), or all subsets."},
    "prior": {"choices": ("set", "uniform", "product"), "help": "Prior over true sets: estimated per set, uniform (the thesis's choice) or independent labels (only with admissible='all')."},
    "alpha": {"low": 0.0, "high": 10.0, "help": "Pseudo-count on every noise count (Beta(1+α, 1+α) MAP).", "advanced": True},
    "kappa": {"low": 0.0, "high": 10.0, "help": "Pseudo-count on every set-prior entry.", "advanced": True},
    "anneal": {"kind": "object", "help": "Deterministic annealing: None (default), 'default' or a dict of schedule settings (T0, factor, inner_max, inner_tol, guard, schedule).", "advanced": True},
    "tol": {"low": 0.0, "high": 1.0, "help": "Stop when the relative change of the log-likelihood is below tol."},
    "max_iter": {"low": 1, "high": 10000, "help": "Maximum EM iterations."},
    "factorize": {"help": "Use the exact per-label (binary relevance) path when the model factorises (all subsets, product prior, per-label noise cells).", "advanced": True},
    "sep": {"help": "Separator of label sets in format A text."},
    "unlisted": {"choices": ("absent", "missing"), "help": "Format B: labels not listed for a (task, worker) pair are 'absent' (closed world) or 'missing' (partial judgments)."},
}


@register(
    "multilabel-em",
    summary="Multi-label aggregation: latent true label set per task, per-annotator flip rates (Boolean noise model, EM).",
    inputs=("multilabel",),
    family="multilabel",
    params=_PARAMS,
    reference="Streich 2010 (ETH Diss. 19229) Ch. 9 eqs. (9.8)–(9.25), restated for annotators; spec multilabel.md.",
)
class MultiLabelEM(Aggregator):
    """Multi-label EM (spec ``multilabel.md``).

    ``fit(df)`` with format A (``task, worker, label`` where label is a ``sep``-joined set or a list/tuple/set) or
    format B (``task, worker, label, present``).  Fitted attributes: ``labels_`` (Series by task of tuples: the MAP
    set), ``probas_`` = ``marginals_`` (task × label, P(label in true set)), ``label_decisions_`` (labels with
    marginal > 0.5, may differ from the MAP set), ``flip_rates_`` (index (worker, label); false_positive = ε0,
    miss = ε1, sensitivity, specificity), ``errors_`` (same table), ``mixture_`` (ε, r view), ``set_prior_``,
    ``top_sets_``, ``loss_history_``, ``log_likelihood_``, ``n_iter_``, ``converged_``, ``temperatures_``,
    ``result_`` (extras "flip_rates": workers × labels × 2 array [ε0, ε1]).
    """

    def __init__(
        self,
        noise: str = "flip",
        granularity: str = "annotator",
        max_degree: int | None = None,
        include_empty: bool = True,
        admissible: str = "degree",
        prior: str = "set",
        alpha: float = 0.01,
        kappa: float = 1e-3,
        anneal: Any = None,
        tol: float = 1e-8,
        max_iter: int = 500,
        factorize: bool = True,
        sep: str = "|",
        unlisted: str = "absent",
    ):
        self.noise = noise
        self.granularity = granularity
        self.max_degree = max_degree
        self.include_empty = include_empty
        self.admissible = admissible
        self.prior = prior
        self.alpha = alpha
        self.kappa = kappa
        self.anneal = anneal
        self.tol = tol
        self.max_iter = max_iter
        self.factorize = factorize
        self.sep = sep
        self.unlisted = unlisted

    # ---------------------------------------------------------------- helpers
    def _data(self, data, labels=None) -> MultiLabelData:
        if isinstance(data, MultiLabelData):
            return data
        return parse_multilabel(data, sep=self.sep, labels=labels, unlisted=self.unlisted)

    def _family(self, d: MultiLabelData) -> tuple[np.ndarray | None, bool, int | None]:
        C = d.n_labels
        per_label_cells = self.granularity in ("label", "annotator_label")
        if self.prior == "product" and self.admissible != "all":
            raise UserInputError("prior='product' is exact only with admissible='all' (all subsets); use prior='set' otherwise.")
        if self.admissible == "all":
            fact = bool(self.factorize) and self.prior == "product" and per_label_cells and bool(self.include_empty)
            if fact:
                return None, True, C
            if 2**C > 20000:
                raise UserInputError(f"admissible='all' with {C} labels enumerates {2**C:,} sets; use prior='product' with a per-label granularity (factorised) or a maximum degree.")
            return admissible_sets(C, C, bool(self.include_empty)), False, C
        obs = d.X if d.O is None else (d.X & d.O)
        sizes = obs.sum(axis=1)
        if self.max_degree is None:
            M = int(np.clip(np.ceil(np.percentile(sizes, 99)) if len(sizes) else 1, 1, 4))
        else:
            M = int(self.max_degree)
            if M < 1:
                raise UserInputError(f"max_degree must be ≥ 1, got {M}.")
        M = min(M, C)
        if self.admissible == "observed":
            uniq = np.unique(obs[sizes <= M], axis=0)
            Z = uniq.astype(bool)
            if self.include_empty and not (~Z.any(axis=1)).any():
                Z = np.vstack([np.zeros((1, C), bool), Z])
            if not self.include_empty:
                Z = Z[Z.any(axis=1)]
            return Z, False, M
        if self.admissible != "degree":
            raise UserInputError(f"admissible must be 'degree', 'observed' or 'all', got {self.admissible!r}.")
        from math import comb

        size = sum(comb(C, m) for m in range(0 if self.include_empty else 1, M + 1))
        if size > 20000:
            raise UserInputError(f"{size:,} admissible sets (C = {C}, M = {M}); choose a smaller max_degree or admissible='all' with prior='product'.")
        return admissible_sets(C, M, bool(self.include_empty)), False, M

    def _check(self) -> None:
        if self.noise not in ("flip", "mixture", "symmetric"):
            raise UserInputError(f"noise must be 'flip', 'mixture' or 'symmetric', got {self.noise!r}.")
        if self.granularity not in GRANULARITIES:
            raise UserInputError(f"granularity must be one of {GRANULARITIES}, got {self.granularity!r}.")
        if self.prior not in ("set", "uniform", "product"):
            raise UserInputError(f"prior must be 'set', 'uniform' or 'product', got {self.prior!r}.")
        if not (self.alpha >= 0 and self.kappa >= 0):
            raise UserInputError("alpha and kappa must be ≥ 0.")

    # ---------------------------------------------------------------- fit
    def fit(self, data, *, labels: Sequence[Any] | None = None, true_labels=None, graph=None, context=None) -> "MultiLabelEM":
        """Fit on format A or B responses (or a :class:`MultiLabelData`); ``labels`` adds vocabulary labels nobody
        reported.  ``true_labels`` is accepted for API symmetry and ignored in fitting."""
        t0 = time.perf_counter()
        self._check()
        d = self._data(data, labels)
        if d.n_workers < 2:
            raise UserInputError(f"only {d.n_workers} annotator gave responses; estimating reliability needs at least 2.")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", AggregationWarning)
            fit_out = self._fit_ml(d)
        msgs = []
        for w in caught:
            if issubclass(w.category, AggregationWarning):
                msgs.append(str(w.message))
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        self._set_ml(d, fit_out, msgs, time.perf_counter() - t0)
        return self

    def _fit_ml(self, d: MultiLabelData) -> dict[str, Any]:
        from fusion_core.annealing import anneal as run_anneal
        from fusion_core.annealing import resolve_schedule

        Z, factorised, M = self._family(d)
        model = _Model(d, granularity=self.granularity, noise=self.noise, Z=Z, prior=self.prior, alpha=self.alpha, kappa=self.kappa, factorised=factorised)
        self._model = model
        st = model.initial_state()
        self._warn_data(d)
        schedule = resolve_schedule(self.anneal)
        temps: list[float] = []
        ann_info: dict[str, Any] = {}
        if schedule is not None:
            st, temps, ann_info = self._anneal(model, st, schedule)
        trace: list[float] = []
        converged = False
        e = None
        it = 0
        for it in range(1, int(self.max_iter) + 1):
            e = model.e_step(st)
            trace.append(e["ll"] + model.penalty(st))
            if len(trace) >= 2 and abs(trace[-1] - trace[-2]) <= float(self.tol) * abs(trace[-1]):
                converged = True
                break
            if it == int(self.max_iter):
                break
            st = model.m_step(e)
        e = model.e_step(st, want_top=5)
        temps = temps + [1.0] * len(trace)
        return {"state": st, "e": e, "trace": trace, "n_iter": it, "converged": converged, "Z": Z, "factorised": factorised, "M": M, "temps": temps, "anneal": ann_info}

    def _anneal(self, model: _Model, st0: _State, schedule):
        from fusion_core.annealing import anneal as run_anneal

        def log_joint(st):
            B, D = model.scatter(st)
            if model.factorised:
                lo = np.log1p(-st.rho)[None, :]
                l1 = np.log(st.rho)[None, :] + D
                return np.stack([lo + 0 * D, l1], axis=2).reshape(-1, 2)
            return B[:, None] + D @ model.Z.astype(float).T + st.log_prior[None, :]

        def m_step(post):
            if model.factorised:
                m = post[:, 1].reshape(model.d.n_items, model.C)
                return model.m_step({"m": m, "gsum": None})
            return model.m_step({"m": post @ model.Z.astype(float), "gsum": post.sum(axis=0)})

        def params(st):
            parts = [st.eps0, st.eps1]
            if st.log_prior is not None:
                parts.append(np.exp(st.log_prior))
            if st.rho is not None:
                parts.append(st.rho)
            return np.concatenate(parts)

        def inform(st):
            return float(np.max(np.abs(1 - st.eps0 - st.eps1)))

        res = run_anneal(st0, log_joint=log_joint, m_step=m_step, params=params, informativeness=inform, schedule=schedule)
        info = {"T0": res.T0, "restarts": res.restarts, "fell_back": res.fell_back, "collapsed": res.collapsed, "trace": res.trace}
        return res.state, res.temperatures, info

    def _warn_data(self, d: MultiLabelData) -> None:
        obs = np.ones_like(d.X) if d.O is None else d.O
        reported = (d.X & obs).any(axis=0)
        for c in np.flatnonzero(~reported):
            warnings.warn(f"label {d.labels[c]!r} is never reported: its presence is determined by the prior alone.", AggregationWarning)
        # constant annotator columns (always / never reporting a label), among annotators with ≥ 2 responses
        nresp = np.bincount(d.worker, minlength=d.n_workers)
        inc = sp.csr_matrix((np.ones(d.n_responses), (d.worker, np.arange(d.n_responses))), shape=(d.n_workers, d.n_responses))
        pos = np.asarray(inc @ (d.X & obs).astype(float))
        tot = np.asarray(inc @ obs.astype(float))
        const = ((pos == 0) | (pos == tot)) & (tot >= 2) & (nresp[:, None] >= 2) & reported[None, :]
        if const.any():
            w, c = np.nonzero(const)
            ex = [f"{d.workers[a]!r}/{d.labels[b]!r}" for a, b in zip(w[:5], c[:5])]
            warnings.warn(
                f"{len(w)} (annotator, label) columns are constant (always or never reported), uninformative about that label: e.g. {', '.join(ex)}.",
                AggregationWarning,
            )

    def _set_ml(self, d: MultiLabelData, out: dict[str, Any], msgs: list[str], seconds: float) -> None:
        model: _Model = self._model
        st: _State = out["state"]
        e = out["e"]
        C, J = d.n_labels, d.n_workers
        labels = d.labels
        task_index = pd.Index(d.items, name="task")
        m = e["m"]
        Z = out["Z"]
        if out["factorised"]:
            map_sets = m > 0.5
        else:
            map_sets = Z[e["map"]]
        lab_arr = np.asarray(labels, dtype=object)
        self.labels_ = pd.Series([tuple(lab_arr[row]) for row in map_sets], index=task_index, name="label")
        self.label_decisions_ = pd.Series([tuple(lab_arr[row]) for row in (m > 0.5)], index=task_index, name="label")
        self.probas_ = pd.DataFrame(m, index=task_index, columns=pd.Index(labels, name="label"))
        self.marginals_ = self.probas_
        # noise per (worker, label), whatever the granularity
        e0 = self._expand(st.eps0, d)
        e1 = self._expand(st.eps1, d)
        idx = pd.MultiIndex.from_product([d.workers, labels], names=["worker", "label"])
        self.flip_rates_ = pd.DataFrame(
            {"false_positive": e0.ravel(), "miss": e1.ravel(), "sensitivity": 1 - e1.ravel(), "specificity": 1 - e0.ravel()}, index=idx
        )
        self.errors_ = self.flip_rates_
        eps = e0 + e1
        with np.errstate(invalid="ignore", divide="ignore"):
            r = np.where(eps > 0, e0 / np.where(eps > 0, eps, 1), np.nan)
        self.mixture_ = pd.DataFrame({"eps": eps.ravel(), "r": r.ravel()}, index=idx)
        adv = (e0 + e1 > 1)
        nresp = np.bincount(d.worker, minlength=J)
        for c in range(C):
            active = nresp > 0
            if active.any() and adv[active, c].mean() > 0.5:
                msg = f"most annotators of label {labels[c]!r} have ε0 + ε1 > 1: the label's meaning may be inverted (mirror solution)."
                warnings.warn(msg, AggregationWarning)
                msgs.append(msg)
        if out["factorised"]:
            self.set_prior_ = pd.Series(st.rho, index=pd.Index(labels, name="label"), name="label_prior")
        else:
            set_names = [tuple(lab_arr[z]) for z in Z]
            self.set_prior_ = pd.Series(np.exp(st.log_prior), index=pd.Index(set_names, tupleize_cols=False, name="set"), name="prior")
            rows = []
            for k, (ix, pr) in enumerate(e["top"] or []):
                start = k * model.chunk
                for rank in range(ix.shape[1]):
                    rows.append(pd.DataFrame({"task": d.items.take(np.arange(start, start + ix.shape[0])), "rank": rank + 1, "set": [set_names[s] for s in ix[:, rank]], "probability": pr[:, rank]}))
            self.top_sets_ = pd.concat(rows, ignore_index=True) if rows else pd.DataFrame(columns=["task", "rank", "set", "probability"])
        self.loss_history_ = list(out["trace"])
        self.log_likelihood_ = out["trace"][-1] if out["trace"] else None
        self.n_iter_ = out["n_iter"]
        self.converged_ = out["converged"]
        self.temperatures_ = out["temps"]
        self.anneal_info_ = out["anneal"]
        self.max_degree_ = out["M"]
        self.warnings_ = msgs
        self.workers_ = d.workers
        self.classes_ = labels
        self.data_ = d
        self.state_ = st
        flip = np.stack([e0, e1], axis=2)
        skills = 1 - 0.5 * (e0 + e1).mean(axis=1)  # mean balanced accuracy over labels
        self.skills_ = pd.Series(skills, index=pd.Index(d.workers, name="worker"), name="skill")
        self.result_ = FitResult(
            method=self.method_name,
            params=self.get_params(),
            items=d.items,
            workers=d.workers,
            classes=labels,
            posterior=m,
            confusion=None,
            class_prior=None,
            log_likelihood=list(out["trace"]),
            n_iter=out["n_iter"],
            converged=out["converged"],
            seconds=seconds,
            extras={"flip_rates": flip, "skills": skills, "map_sets": map_sets, "temperatures": np.asarray(out["temps"]), "max_degree": out["M"]},
            warnings=msgs,
        )

    def _expand(self, v: np.ndarray, d: MultiLabelData) -> np.ndarray:
        """Per-cell noise → workers × labels (item granularity: the mean over the worker's responses)."""
        J, C = d.n_workers, d.n_labels
        g = self.granularity
        if g == "global":
            return np.full((J, C), v[0])
        if g == "label":
            return np.broadcast_to(v, (J, C)).copy()
        if g == "annotator":
            return np.repeat(v[:, None], C, axis=1)
        if g == "annotator_label":
            return v.reshape(J, C)
        cnt = np.maximum(np.bincount(d.worker, minlength=J), 1)
        return np.repeat((np.bincount(d.worker, weights=v[d.item], minlength=J) / cnt)[:, None], C, axis=1)

    # ---------------------------------------------------------------- held-out scoring (§8)
    def heldout_item_scores(self, hidden: MultiLabelData) -> tuple[np.ndarray, np.ndarray]:
        """(item codes, S_i) for the items with hidden responses: S_i = log Σ_L γ̂_iL Π_{r∈H_i} p(x_r | L; θ̂)
        (joint posterior predictive, spec §8 step 4) with the fitted posterior and the cells' training estimates."""
        model: _Model = self._model
        st: _State = self.state_
        cell, _ = _Model._cells(_CellView(hidden), self.granularity)
        inc = sp.csr_matrix((np.ones(hidden.n_responses), (hidden.item, np.arange(hidden.n_responses))), shape=(hidden.n_items, hidden.n_responses))
        Bh, Dh = model.scatter(st, data=hidden, cell=cell, inc=inc)
        items = np.unique(hidden.item)
        B_tr, D_tr = model.scatter(st)
        if model.factorised:
            lo = np.log1p(-st.rho)[None, :]
            l1 = np.log(st.rho)[None, :] + D_tr[items]
            logm1 = l1 - np.logaddexp(lo, l1)
            logm0 = lo - np.logaddexp(lo, l1)
            S = Bh[items] + np.logaddexp(logm0, logm1 + Dh[items]).sum(axis=1)
            return items, S
        Zf = model.Z.astype(float)
        lj = B_tr[items, None] + D_tr[items] @ Zf.T + st.log_prior[None, :]
        logg = lj - log_normalize(lj)[1][:, None]
        hs = Bh[items, None] + Dh[items] @ Zf.T
        tot = logg + hs
        mx = tot.max(axis=1)
        S = mx + np.log(np.exp(tot - mx[:, None]).sum(axis=1))
        return items, S

    def n_free_parameters(self) -> int:
        """Noise parameters (per cell, 1 for symmetric, 2 otherwise) plus the free prior entries."""
        model: _Model = self._model
        k = model.ncell * (1 if self.noise == "symmetric" else 2)
        if model.factorised or self.prior == "product":
            return k + model.C
        return k + (model.Z.shape[0] - 1 if self.prior == "set" else 0)


class _CellView:
    """Minimal object with the attributes :meth:`_Model._cells` reads (for hidden responses)."""

    def __init__(self, d: MultiLabelData):
        self.d = d
