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
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import scipy.sparse as sp

from fusion_core.errors import AggregationWarning, UserInputError
from fusion_core.methods.base import Aggregator, FitResult, log_normalize
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

    def subset(self, mask: np.ndarray) -> MultiLabelData:
        """Selected responses with the same item/worker/label coding."""
        m = np.asarray(mask, bool)
        return MultiLabelData(
            self.item[m],
            self.worker[m],
            self.X[m],
            None if self.O is None else self.O[m],
            self.items,
            self.workers,
            self.labels,
            dict(self.report),
        )

    def to_frame(self, sep: str = "|") -> pd.DataFrame:
        """Format A (closed world only)."""
        vals = self.labels.astype(str).to_numpy()
        sets = [sep.join(vals[row]) for row in self.X]
        return pd.DataFrame(
            {"task": self.items.take(self.item), "worker": self.workers.take(self.worker), "label": sets}
        )


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
    if pd.api.types.is_string_dtype(col.dtype) or col.dtype == object:
        isna = col.isna().to_numpy()
    else:
        isna = col.isna().to_numpy()
    if isna.any():
        rows = [int(r) for r in np.flatnonzero(isna)[:5]]
        raise UserInputError(f"rows {rows}: label set missing; use an empty string for 'no labels'.")
    work = df[[task, worker]].copy()
    work["_row"] = np.arange(len(df))
    dup = work.duplicated(subset=[task, worker], keep=False).to_numpy()
    report["duplicate_rows"] = int(work.duplicated(subset=[task, worker]).sum())
    if report["duplicate_rows"]:
        if duplicates == "error":
            ex = work[dup].iloc[0]
            raise UserInputError(
                f"{report['duplicate_rows']} rows repeat a (task, worker) pair, e.g. task {ex[task]!r} by {ex[worker]!r}."
            )
        if duplicates == "last":
            keep = ~work.duplicated(subset=[task, worker], keep="last").to_numpy()
            work = work[keep]
            col = col[keep]
    col = col.reset_index(drop=True)
    if pd.api.types.infer_dtype(col, skipna=False) == "string":  # the common case: vectorised split/strip
        ex = col.str.split(sep, regex=False).explode()
        ex = ex.str.strip()
        rows = ex.index.to_numpy()
        vals = ex.to_numpy(dtype=object)
        nonempty = (ex != "").to_numpy()
    else:
        tokens = col.map(
            lambda v: (
                v.split(sep)
                if isinstance(v, str)
                else (list(v) if isinstance(v, (list, tuple, set, frozenset, np.ndarray)) else [v])
            )
        )
        ex = tokens.explode()
        rows = ex.index.to_numpy()
        vals = np.array([v.strip() if isinstance(v, str) else v for v in ex.to_numpy(dtype=object)], dtype=object)
        nonempty = np.array(
            [
                not (isinstance(v, str) and v == "") and not (v is None or (isinstance(v, float) and np.isnan(v)))
                for v in vals
            ],
            bool,
        )
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
    return MultiLabelData(
        item_code.astype(np.int64),
        worker_code.astype(np.int64),
        X,
        None,
        pd.Index(items),
        pd.Index(workers),
        voc,
        report,
    )


def _parse_format_b(df, task, worker, label, present, sep, labels, unlisted, report) -> MultiLabelData:
    if df[label].isna().any():
        r = int(np.flatnonzero(df[label].isna().to_numpy())[0])
        raise UserInputError(f"row {r}: label missing in format B (one row per task, worker, label).")
    pres = _parse_present(df[present])
    work = pd.DataFrame(
        {
            "t": df[task].to_numpy(),
            "w": df[worker].to_numpy(),
            "l": df[label].to_numpy(),
            "p": pres,
            "_row": np.arange(len(df)),
        }
    )
    g = work.groupby(["t", "w", "l"], sort=False)["p"]
    nun = g.nunique()
    if (nun > 1).any():
        bad = nun[nun > 1].index[:5].tolist()
        rows = work.set_index(["t", "w", "l"]).loc[bad[:1], "_row"].tolist()
        raise UserInputError(
            f"conflicting duplicate rows (present both 0 and 1) for (task, worker, label) {bad}; rows {rows}."
        )
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
    return MultiLabelData(
        item_code.astype(np.int64), worker_code.astype(np.int64), X, O, pd.Index(items), pd.Index(workers), voc, report
    )


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
        d = data
        J, N = d.n_workers, d.n_items
        self.inc = sp.csr_matrix((np.ones(R), (d.item, np.arange(R))), shape=(N, R))
        # fast path (closed world, worker-based cells): every parameter is a workers × labels table, statistics
        # come from the item × worker count matrix and the present bits only — O(R + nnz(X)) per iteration
        self.fast = d.O is None and granularity != "item"
        if self.fast:
            jj, cc = np.divmod(np.arange(J * C), C)
            self.cell_of_wc, self.ncell = {
                "global": (np.zeros(J * C, np.int64), 1),
                "label": (cc, C),
                "annotator": (jj, J),
                "annotator_label": (np.arange(J * C), J * C),
            }[granularity]
            nz_r, nz_c = np.nonzero(d.X)
            self.nz_wc = d.worker[nz_r] * C + nz_c
            self.nz_ic = d.item[nz_r] * C + nz_c
            self.nz_item = d.item[nz_r]
            self.IW = sp.csr_matrix((np.ones(R), (d.item, d.worker)), shape=(N, J))
            self.IW.sum_duplicates()
            self.IWt = self.IW.T.tocsr()
            n_w = np.bincount(d.worker, minlength=J).astype(float)
            self.Sx = np.bincount(
                self.cell_of_wc, weights=np.bincount(self.nz_wc, minlength=J * C).astype(float), minlength=self.ncell
            )
            self.So = np.bincount(self.cell_of_wc, weights=np.repeat(n_w, C), minlength=self.ncell)
            self.cell = None
            return
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
        if self.fast:
            Sm_wc = np.asarray(self.IWt @ m).ravel()  # Σ_r m[i_r, c] per (worker, label)
            Smx_wc = np.bincount(self.nz_wc, weights=m.ravel()[self.nz_ic], minlength=len(self.cell_of_wc))
            Sm = np.bincount(self.cell_of_wc, weights=Sm_wc, minlength=self.ncell)
            Smx = np.bincount(self.cell_of_wc, weights=Smx_wc, minlength=self.ncell)
        else:
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
    def scatter(
        self, st: _State, data: MultiLabelData | None = None, cell=None, inc=None
    ) -> tuple[np.ndarray, np.ndarray]:
        """B (items) and Δ (items × C) by scatter-sums over observed bits."""
        if data is None and self.fast:
            return self._scatter_fast(st)
        d = data or self.d
        if cell is None:
            cell = self.cell if self.cell is not None else self._cells(self.granularity)[0]
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

    def _scatter_fast(self, st: _State) -> tuple[np.ndarray, np.ndarray]:
        d = self.d
        J, C, N = d.n_workers, self.C, d.n_items
        e0 = st.eps0[self.cell_of_wc].reshape(J, C)
        e1 = st.eps1[self.cell_of_wc].reshape(J, C)
        l0_abs, l0_pres = np.log1p(-e0), np.log(e0)  # x = 0 / x = 1 terms of B (label absent from L)
        d_abs = np.log(e1) - l0_abs  # x = 0 term of Δ
        d_pres = np.log1p(-e1) - l0_pres  # x = 1 term of Δ
        B = self.IW @ l0_abs.sum(axis=1)
        B += np.bincount(self.nz_item, weights=(l0_pres - l0_abs).ravel()[self.nz_wc], minlength=N)
        D = np.asarray(self.IW @ d_abs)
        D += np.bincount(self.nz_ic, weights=(d_pres - d_abs).ravel()[self.nz_wc], minlength=N * C).reshape(N, C)
        return np.asarray(B).ravel(), D

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
            return {
                "m": m,
                "gsum": None,
                "ll": ll,
                "F": Fe,
                "entropy": float(ent.mean() / (self.C * np.log(2))),
                "map": None,
                "top": None,
            }
        Zf = self.Z.astype(float)
        S = Zf.shape[0]
        m = np.empty((n, self.C))
        gsum = np.zeros(S)
        ll = 0.0
        Fe = 0.0
        ent = 0.0
        mp = np.empty(n, np.int64)
        top = [] if want_top else None
        chunk = max(1, min(self.chunk, int(5e6 // max(S, 1))))
        DT = np.ascontiguousarray(D.T)
        lp = st.log_prior[:, None]
        for lo in range(0, n, chunk):
            hi = min(n, lo + chunk)
            # sets × items layout: reductions over the short set axis run as fast row-wise passes
            lj = Zf @ DT[:, lo:hi]
            lj += B[None, lo:hi]
            lj += lp
            mp[lo:hi] = np.argmax(lj, axis=0)
            mx = lj.max(axis=0)
            g = lj - mx
            np.exp(g, out=g)
            tot = g.sum(axis=0)
            g /= tot
            lz = np.log(tot) + mx
            ll += float(lz.sum())
            if T != 1.0:
                g1 = g
                gt = lj / T
                mxt = gt.max(axis=0)
                gt -= mxt
                np.exp(gt, out=gt)
                tt = gt.sum(axis=0)
                gt /= tt
                Fe += float(-T * (np.log(tt) + mxt).sum())
                g = gt
                ent += float(-(g * np.log(np.clip(g, 1e-300, 1))).sum())
            else:
                g1 = g
                Fe += float(-lz.sum())
            m[lo:hi] = (Zf.T @ g).T
            gsum += g.sum(axis=1)
            if want_top:
                k = min(want_top, S)
                gi = g1.T
                idx = np.argsort(-gi, axis=1)[:, :k]
                top.append((lo, idx, np.take_along_axis(gi, idx, axis=1)))
        return {
            "m": m,
            "gsum": gsum,
            "ll": ll,
            "F": Fe,
            "entropy": ent / (n * np.log(S)) if S > 1 else 0.0,
            "map": mp,
            "top": top,
        }

    def m_step(self, e) -> _State:
        e0, e1 = self.m_noise(e["m"])
        lp, rho = self.m_prior(e["gsum"], e["m"])
        return _State(e0, e1, lp, rho)

    def initial_state(self) -> _State:
        """§5.5: m_ic = vote share of label c on item i (observed bits), one noise M-step, uniform prior."""
        d = self.d
        if d.O is None:
            num = (
                np.bincount(self.nz_ic, minlength=d.n_items * self.C).reshape(d.n_items, self.C).astype(float)
                if self.fast
                else np.asarray(self.inc @ d.X.astype(float))
            )
            den = np.bincount(d.item, minlength=d.n_items).astype(float)[:, None]
        else:
            obs = d.O.astype(float)
            num = np.asarray(self.inc @ (d.X * obs))
            den = np.asarray(self.inc @ obs)
        m = np.where(den > 0, num / np.where(den > 0, den, 1), 0.5)
        e0, e1 = self.m_noise(m)
        if self.factorised or self.prior == "product":  # the product prior's M-step from the vote shares
            lp, rho = self.m_prior(None, m)
            return _State(e0, e1, lp, rho)
        S = self.Z.shape[0]
        return _State(e0, e1, np.full(S, -np.log(S)), None)


# ====================================================================== estimator

_PARAMS = {
    "noise": {
        "choices": ("flip", "mixture", "symmetric"),
        "help": "Noise model: asymmetric flip (ε0 false positives, ε1 misses), mixture (guess with prob. ε, say 'present' with prob. r; excludes adversarial annotators) or symmetric flip.",
    },
    "granularity": {
        "choices": GRANULARITIES,
        "help": "Noise cells: one global pair, per label, per annotator (default), per (annotator, label) or per item (diagnostic only: over-fits).",
    },
    "max_degree": {
        "kind": "object",
        "help": "Largest true-set size M (default: 99th percentile of reported set sizes, 1..4).",
    },
    "include_empty": {"help": "Allow the empty set as a true label set."},
    "admissible": {
        "choices": ("degree", "observed", "all"),
        "help": "Admissible true sets: all sets of ≤ M labels, the sets reported at least once (+ ∅), or all subsets.",
    },
    "prior": {
        "choices": ("set", "uniform", "product"),
        "help": "Prior over true sets: estimated per set, uniform (the thesis's choice) or independent labels (only with admissible='all').",
    },
    "alpha": {
        "low": 0.0,
        "high": 10.0,
        "help": "Pseudo-count on every noise count (Beta(1+α, 1+α) MAP).",
        "advanced": True,
    },
    "kappa": {"low": 0.0, "high": 10.0, "help": "Pseudo-count on every set-prior entry.", "advanced": True},
    "anneal": {
        "kind": "object",
        "help": "Deterministic annealing: None (default), 'default' or a dict of schedule settings (T0, factor, inner_max, inner_tol, guard, schedule).",
        "advanced": True,
    },
    "tol": {"low": 0.0, "high": 1.0, "help": "Stop when the relative change of the log-likelihood is below tol."},
    "max_iter": {"low": 1, "high": 10000, "help": "Maximum EM iterations."},
    "factorize": {
        "help": "Use the exact per-label (binary relevance) path when the model factorises (all subsets, product prior, per-label noise cells).",
        "advanced": True,
    },
    "sep": {"help": "Separator of label sets in format A text."},
    "unlisted": {
        "choices": ("absent", "missing"),
        "help": "Format B: labels not listed for a (task, worker) pair are 'absent' (closed world) or 'missing' (partial judgments).",
    },
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
            raise UserInputError(
                "prior='product' is exact only with admissible='all' (all subsets); use prior='set' otherwise."
            )
        if self.admissible == "all":
            fact = bool(self.factorize) and self.prior == "product" and per_label_cells and bool(self.include_empty)
            if fact:
                return None, True, C
            if 2**C > 20000:
                raise UserInputError(
                    f"admissible='all' with {C} labels enumerates {2**C:,} sets; use prior='product' with a per-label granularity (factorised) or a maximum degree."
                )
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
            raise UserInputError(
                f"{size:,} admissible sets (C = {C}, M = {M}); choose a smaller max_degree or admissible='all' with prior='product'."
            )
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
    def fit(
        self, data, *, labels: Sequence[Any] | None = None, true_labels=None, graph=None, context=None
    ) -> MultiLabelEM:
        """Fit on format A or B responses (or a :class:`MultiLabelData`); ``labels`` adds vocabulary labels nobody
        reported.  ``true_labels`` is accepted for API symmetry and ignored in fitting."""
        t0 = time.perf_counter()
        self._check()
        d = self._data(data, labels)
        if d.n_workers < 2:
            raise UserInputError(
                f"only {d.n_workers} annotator gave responses; estimating reliability needs at least 2."
            )
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
        from fusion_core.methods.em.annealing import resolve_schedule

        Z, factorised, M = self._family(d)
        model = _Model(
            d,
            granularity=self.granularity,
            noise=self.noise,
            Z=Z,
            prior=self.prior,
            alpha=self.alpha,
            kappa=self.kappa,
            factorised=factorised,
        )
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
        return {
            "state": st,
            "e": e,
            "trace": trace,
            "n_iter": it,
            "converged": converged,
            "Z": Z,
            "factorised": factorised,
            "M": M,
            "temps": temps,
            "anneal": ann_info,
        }

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

        res = run_anneal(
            st0, log_joint=log_joint, m_step=m_step, params=params, informativeness=inform, schedule=schedule
        )
        info = {
            "T0": res.T0,
            "restarts": res.restarts,
            "fell_back": res.fell_back,
            "collapsed": res.collapsed,
            "trace": res.trace,
        }
        return res.state, res.temperatures, info

    def _warn_data(self, d: MultiLabelData) -> None:
        obs = np.ones_like(d.X) if d.O is None else d.O
        reported = (d.X & obs).any(axis=0)
        for c in np.flatnonzero(~reported):
            warnings.warn(
                f"label {d.labels[c]!r} is never reported: its presence is determined by the prior alone.",
                AggregationWarning,
            )
        # constant annotator columns (always / never reporting a label), among annotators with ≥ 2 responses
        nresp = np.bincount(d.worker, minlength=d.n_workers)
        inc = sp.csr_matrix(
            (np.ones(d.n_responses), (d.worker, np.arange(d.n_responses))), shape=(d.n_workers, d.n_responses)
        )
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

        def as_tuples(rows: np.ndarray) -> pd.Series:
            if rows.shape[1] <= 62:  # encode each set as an integer bit mask: a 1-D unique is far faster
                code = rows.astype(np.int64) @ (np.int64(1) << np.arange(rows.shape[1], dtype=np.int64))
                uc, first, inv = np.unique(code, return_index=True, return_inverse=True)
                uniq = rows[first]
            else:
                uniq, inv = np.unique(rows, axis=0, return_inverse=True)
            names = np.empty(len(uniq), dtype=object)
            names[:] = [tuple(lab_arr[u]) for u in uniq]  # one tuple per distinct set, not per item
            return pd.Series(names[inv.ravel()], index=task_index, name="label")

        self.labels_ = as_tuples(map_sets)
        self.label_decisions_ = as_tuples(m > 0.5)
        self.probas_ = pd.DataFrame(m, index=task_index, columns=pd.Index(labels, name="label"))
        self.marginals_ = self.probas_
        # noise per (worker, label), whatever the granularity
        e0 = self._expand(st.eps0, d)
        e1 = self._expand(st.eps1, d)
        idx = pd.MultiIndex.from_product([d.workers, labels], names=["worker", "label"])
        self.flip_rates_ = pd.DataFrame(
            {
                "false_positive": e0.ravel(),
                "miss": e1.ravel(),
                "sensitivity": 1 - e1.ravel(),
                "specificity": 1 - e0.ravel(),
            },
            index=idx,
        )
        self.errors_ = self.flip_rates_
        eps = e0 + e1
        with np.errstate(invalid="ignore", divide="ignore"):
            r = np.where(eps > 0, e0 / np.where(eps > 0, eps, 1), np.nan)
        self.mixture_ = pd.DataFrame({"eps": eps.ravel(), "r": r.ravel()}, index=idx)
        adv = e0 + e1 > 1
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
            self.set_prior_ = pd.Series(
                np.exp(st.log_prior), index=pd.Index(set_names, tupleize_cols=False, name="set"), name="prior"
            )
            rows = []
            set_arr = np.empty(len(set_names), dtype=object)
            set_arr[:] = set_names
            for start, ix, pr in e["top"] or []:
                for rank in range(ix.shape[1]):
                    rows.append(
                        pd.DataFrame(
                            {
                                "task": d.items.take(np.arange(start, start + ix.shape[0])),
                                "rank": rank + 1,
                                "set": set_arr[ix[:, rank]],
                                "probability": pr[:, rank],
                            }
                        )
                    )
            self.top_sets_ = (
                pd.concat(rows, ignore_index=True)
                if rows
                else pd.DataFrame(columns=["task", "rank", "set", "probability"])
            )
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
            extras={
                "flip_rates": flip,
                "skills": skills,
                "map_sets": map_sets,
                "temperatures": np.asarray(out["temps"]),
                "max_degree": out["M"],
            },
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
        inc = sp.csr_matrix(
            (np.ones(hidden.n_responses), (hidden.item, np.arange(hidden.n_responses))),
            shape=(hidden.n_items, hidden.n_responses),
        )
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


# ====================================================================== thesis noise models (spec §3.2) and metrics


def q_mixture(beta_L: np.ndarray, eps: float, r: float) -> np.ndarray:
    """P(x = 1) under the mixture model (9.16): β_L (ε − 1) + (1 − ε) + ε r."""
    return beta_L * (eps - 1) + (1 - eps) + eps * r


def q_flip(beta_L: np.ndarray, eps0: float, eps1: float) -> np.ndarray:
    """P(x = 1) under the asymmetric flip model (9.17): β_L (ε0 + ε1 − 1) + 1 − ε1."""
    return beta_L * (eps0 + eps1 - 1) + 1 - eps1


def mixture_to_flip(eps: float, r: float) -> tuple[float, float]:
    """(ε, r) → (ε0, ε1) = (ε r, ε (1 − r)) (exact, spec §3.2)."""
    return eps * r, eps * (1 - r)


def flip_to_mixture(eps0: float, eps1: float) -> tuple[float, float]:
    """(ε0, ε1) → (ε, r) = (ε0 + ε1, ε0 / (ε0 + ε1)); r is NaN (undefined) when ε0 + ε1 = 0; refused when ε0 + ε1 > 1."""
    e = eps0 + eps1
    if e > 1:
        raise UserInputError(f"ε0 + ε1 = {e:.3g} > 1 has no mixture counterpart (adversarial annotator).")
    return e, (eps0 / e if e > 0 else float("nan"))


def _as_matrix(sets: pd.Series, labels: Sequence[Any]) -> np.ndarray:
    lab = {v: i for i, v in enumerate(labels)}
    out = np.zeros((len(sets), len(labels)), bool)
    for r, s in enumerate(sets):  # metrics on user-facing Series of tuples
        for v in s:
            out[r, lab[v]] = True
    return out


def multilabel_metrics(pred: pd.Series, truth: pd.Series, labels: Sequence[Any] | None = None) -> dict[str, Any]:
    """Exact-set accuracy, Hamming loss, per-label F1, macro F1 and BER = 1 − mean per-set recall
    (spec §12 ML18; thesis (2.16) as printed is the mean per-set recall, erratum 12).  Series by task of tuples."""
    common = truth.index.intersection(pred.index)
    p, t = pred.loc[common], truth.loc[common]
    if labels is None:
        labels = sorted({v for s in list(p) + list(t) for v in s}, key=str)
    P, T = _as_matrix(p, labels), _as_matrix(t, labels)
    tp = (P & T).sum(axis=0)
    fp = (P & ~T).sum(axis=0)
    fn = (~P & T).sum(axis=0)
    denom = 2 * tp + fp + fn
    f1 = np.where(denom > 0, 2 * tp / np.where(denom > 0, denom, 1), 1.0)
    nt = T.sum(axis=1)
    recall = np.where(nt > 0, (P & T).sum(axis=1) / np.where(nt > 0, nt, 1), 1.0)
    return {
        "exact_set_accuracy": float((P == T).all(axis=1).mean()),
        "hamming_loss": float((P != T).mean()),
        "per_label_f1": dict(zip(labels, f1.tolist())),
        "macro_f1": float(f1.mean()),
        "ber": float(1 - recall.mean()),
    }
