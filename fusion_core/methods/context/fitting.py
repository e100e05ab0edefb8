"""From ``context-em``'s EM runs to a :class:`~fusion_core.methods.results.Fit`: posteriors, per-annotator average
confusion, curves on the reporting grid (:class:`~fusion_core.methods.results.ContextCurves`), the long table of
fitted values at each annotator's observed contexts, and the solver diagnostics.

Binary labels follow the paper; more labels use one binary model per label (one-vs-rest, §9.2 option 1, [EXT]) or
per-class confusion curves (§9.2 option 2, [EXT], :func:`fit_confusion`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from fusion_core.data.responses import Responses
from fusion_core.methods.base import Gold
from fusion_core.methods.context.em import (
    BinaryCurves,
    BinaryResponses,
    ConfusionCurves,
    CurveModel,
    CurveState,
    run_paper,
    run_shared_prior,
    run_shared_prior_lockstep,
)
from fusion_core.methods.context.model import (
    ContextSetup,
    ContextValues,
    interpolate_levels,
    interpolate_rows,
    lipschitz_interpolate_chains,
    one_vs_rest_curves,
)
from fusion_core.methods.context.mstep import PairChains
from fusion_core.methods.em import EMRun
from fusion_core.methods.results import ContextCurves, Fit


@dataclass(frozen=True)
class Options:
    """The estimator's EM settings (see :class:`~fusion_core.methods.context.estimators.ContextEM`)."""

    variant: str = "shared_prior"
    n_iter: int = 5
    tol: float = 1e-6
    max_iter: int = 200
    accelerate: bool = True
    eps: float = 1e-6
    final_estep: bool = False
    interpolation: str = "paper"
    name: str = "context-em"


@dataclass(frozen=True)
class FittedCurves:
    """The fitted curves at each annotator's (worker, level) pairs and their extension by eqs. (17)–(19): what
    interpolation and held-out scoring need.  Binary / one-vs-rest: ``binary[j]`` is 2 × pairs (false alarm,
    detection) of the problem for class ``problems[j]``; confusion curves: ``confusion`` is pairs × true ×
    reported.  ``lipschitz`` is the solver's layout (2 × workers, or classes × workers); ``values`` the context per
    item (and its categories)."""

    values: ContextValues
    levels: np.ndarray
    pair_worker: np.ndarray
    pair_level: np.ndarray
    lipschitz: np.ndarray
    mode: str
    discrete: bool
    problems: tuple[int, ...] = ()
    binary: tuple[np.ndarray, ...] = ()
    confusion: np.ndarray | None = None
    prior: np.ndarray = field(default_factory=lambda: np.zeros(0))
    pos: int = 1

    def binary_at(self, x: np.ndarray, w: int, j: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """(false alarm, detection) of worker code ``w`` in problem ``j`` at contexts ``x`` (NaN without responses)."""
        sel = self.pair_worker == w
        if not sel.any():
            return np.full(len(x), np.nan), np.full(len(x), np.nan)
        xs, P, c = self.levels[self.pair_level[sel]], self.binary[j], self.lipschitz
        fa = interpolate_levels(xs, P[0][sel], c[0, w], x, mode=self.mode, discrete=self.discrete)
        det = interpolate_levels(xs, P[1][sel], c[1, w], x, mode=self.mode, discrete=self.discrete)
        return fa, det

    def confusion_at(self, x: np.ndarray, w: int) -> np.ndarray:
        """Worker ``w``'s confusion matrices at contexts ``x`` (len(x) × J × J), NaN without responses."""
        assert self.confusion is not None
        J = self.confusion.shape[1]
        sel = self.pair_worker == w
        out = np.full((len(x), J, J), np.nan)
        if not sel.any():
            return out
        xs = self.levels[self.pair_level[sel]]
        pos = self.pos if J == 2 else 1
        for i in range(J):  # classes, not responses
            rows = self.confusion[sel, i, :]
            c = float(self.lipschitz[i, w])
            out[:, i, :] = interpolate_rows(xs, rows, c, x, mode=self.mode, discrete=self.discrete, eps=0.0, pos=pos)
        return out


def run_variant(model: CurveModel, opts: Options, name: str) -> EMRun[CurveState]:
    if opts.variant == "paper":
        return run_paper(model, n_iter=opts.n_iter, final_estep=opts.final_estep, name=name)
    return run_shared_prior(model, tol=opts.tol, max_iter=opts.max_iter, name=name, accelerate=opts.accelerate)


# ====================================================================== binary and one-vs-rest
def fit_binary(resp: Responses, setup: ContextSetup, opts: Options, *, pos: int, gold: Gold | None) -> Fit:
    """One binary model (2 labels, positive class ``pos``) or one per label (one-vs-rest)."""
    K = resp.n_classes
    problems = (pos,) if K == 2 else tuple(range(K))
    if K > 2:
        setup.warnings.append(
            f"{K} labels: one-vs-rest extension (spec §9.2): {K} binary models fitted independently; they can disagree."
        )
    chains = PairChains(setup.pair_worker, setup.pair_level, setup.levels)
    models, names = [], []
    for cls in problems:
        data = BinaryResponses(setup.item, (setup.label == cls).astype(np.int8), setup.pid, resp.n_items)
        curves = BinaryCurves(data, chains, setup.lipschitz, opts.eps, setup.discrete)
        g = None if gold is None else (gold[0], (gold[1] == cls).astype(np.int64))
        models.append(CurveModel(curves, per_item_prior=opts.variant == "paper", gold=g))
        names.append(f"{opts.name} EM" + ("" if K == 2 else f" (label {resp.classes[cls]} vs rest)"))
    if len(models) > 1 and opts.variant != "paper":  # one-vs-rest: the problems' M-steps share one solver run
        runs = run_shared_prior_lockstep(
            models, tol=opts.tol, max_iter=opts.max_iter, names=names, accelerate=opts.accelerate
        )
    else:
        runs = [run_variant(m, opts, n) for m, n in zip(models, names)]
    fitted = FittedCurves(
        setup.values,
        setup.levels,
        setup.pair_worker,
        setup.pair_level,
        setup.lipschitz,
        opts.interpolation,
        setup.discrete,
        problems=problems,
        binary=tuple(r.state.values for r in runs),
        prior=np.zeros(0),
        pos=pos,
    )
    post, prior = _binary_posterior(runs, K, pos)
    confusion = _binary_confusion(setup, runs[0].state.values, pos, resp.n_workers) if K == 2 else None
    det, fa = _binary_grid(fitted, setup.grid, resp.n_workers)
    context = _curves(setup, det[0] if K == 2 else det.transpose(1, 0, 2), fa[0] if K == 2 else fa.transpose(1, 0, 2))
    trace = runs[0].log_likelihood if K == 2 else _summed_trace(runs)
    details = _details(setup, opts, models, "binary" if K == 2 else "one_vs_rest", setup.lipschitz)
    details["curves"] = pd.concat(
        [_binary_table(resp, setup, fitted, j) for j in range(len(problems))], ignore_index=True
    )
    details["fitted_curves"] = fitted
    if opts.variant == "paper":
        details["raw_phi"] = pd.Series(runs[0].posterior[:, 1], index=pd.Index(resp.items, name="task"), name="phi")
    return Fit(
        posterior=post,
        confusion=confusion,
        class_prior=prior,
        log_likelihood=trace,
        n_iter=max(r.n_iter for r in runs),
        converged=all(r.converged for r in runs),
        context=ContextCurves(**context, positive_label=resp.classes[pos] if K == 2 else None),
        details=details,
    )


def _binary_posterior(runs: list[EMRun[CurveState]], K: int, pos: int) -> tuple[np.ndarray, np.ndarray]:
    """Posteriors and class prior in class order (one-vs-rest: the problems' P(class) scores normalised)."""
    if K > 2:
        scores = np.column_stack([r.posterior[:, 1] for r in runs])
        tot = scores.sum(axis=1, keepdims=True)
        post = np.where(tot > 0, scores / np.where(tot > 0, tot, 1), 1.0 / K)
        return post, post.mean(axis=0)
    g = runs[0].posterior[:, 1]
    post = np.zeros((len(g), 2))
    post[:, pos] = g
    post[:, 1 - pos] = 1 - g
    pr = runs[0].state.prior
    prior1 = float(pr[:, 1].mean()) if pr.ndim == 2 else float(pr[1])
    prior = np.zeros(2)
    prior[pos] = prior1
    prior[1 - pos] = 1 - prior1
    return post, prior


def _binary_confusion(setup: ContextSetup, P: np.ndarray, pos: int, n_workers: int) -> np.ndarray:
    """Per-annotator confusion: the curves averaged over the annotator's responses (0.5 without responses)."""
    w, pid, n = setup.worker, setup.pid, setup.n_contrib
    cnt = np.maximum(np.bincount(w, minlength=n_workers), 1)
    p0 = np.where(n > 0, np.bincount(w, weights=P[0][pid], minlength=n_workers) / cnt, 0.5)
    p1 = np.where(n > 0, np.bincount(w, weights=P[1][pid], minlength=n_workers) / cnt, 0.5)
    confusion = np.zeros((n_workers, 2, 2))
    confusion[:, 1 - pos, pos] = p0
    confusion[:, 1 - pos, 1 - pos] = 1 - p0
    confusion[:, pos, pos] = p1
    confusion[:, pos, 1 - pos] = 1 - p1
    if ((p1 - p0)[n > 0] <= 0).mean() > 0.5:
        setup.warnings.append("most annotators have mean Youden J ≤ 0: the labels may be swapped (spec §12 pitfall 6).")
    return confusion


def _binary_grid(fitted: FittedCurves, grid: np.ndarray, n_workers: int) -> tuple[np.ndarray, np.ndarray]:
    """Detection and false-alarm curves on the grid, problems × workers × grid (NaN without responses)."""
    det = np.full((len(fitted.problems), n_workers, len(grid)), np.nan)
    fa = np.full_like(det, np.nan)
    if not fitted.discrete and bool(np.all(np.diff(fitted.levels) > 0)):  # every curve in one batched scan
        P = np.concatenate(fitted.binary)  # fa, det of problem 0, fa, det of problem 1, …
        c = np.tile(fitted.lipschitz, (len(fitted.problems), 1))
        both = lipschitz_interpolate_chains(
            fitted.levels,
            fitted.pair_worker,
            fitted.pair_level,
            P,
            c,
            n_chains=n_workers,
            x_query=grid,
            mode=fitted.mode,
        )
        return both[1::2], both[0::2]
    for j in range(len(fitted.problems)):
        for w in range(n_workers):  # workers, not responses
            fa[j, w], det[j, w] = fitted.binary_at(grid, w, j)
    return det, fa


def _binary_table(resp: Responses, setup: ContextSetup, fitted: FittedCurves, j: int) -> pd.DataFrame:
    P = fitted.binary[j]
    return pd.DataFrame(
        {
            "worker": resp.workers.take(setup.pair_worker),
            "label": resp.classes[fitted.problems[j]],
            "context": _level_values(setup),
            "detection": P[1],
            "false_alarm": P[0],
            "n_responses": np.bincount(setup.pid, minlength=len(setup.pair_worker)),
        }
    )


def _summed_trace(runs: list[EMRun[CurveState]]) -> list[float]:
    """One-vs-rest: the problems' log-likelihoods summed over their common last iterations."""
    n = min(len(r.log_likelihood) for r in runs)
    return list(np.sum([np.asarray(r.log_likelihood[-n:]) for r in runs], axis=0))


# ====================================================================== confusion curves
def fit_confusion(resp: Responses, setup: ContextSetup, opts: Options, *, pos: int, gold: Gold | None) -> Fit:
    """§9.2 option 2 [EXT]: per-annotator confusion curves π_k(x)[i, j], each entry c_ik-Lipschitz, rows on the
    simplex.  With 2 labels this is the binary model (rows ordered by true class)."""
    J = resp.n_classes
    if J > 2:
        setup.warnings.append(f"{J} labels: per-class confusion curves (extension, spec §9.2 option 2).")
    c = setup.lipschitz
    if J == 2 and pos == 0:  # 2 labels: rows are (false-alarm, detection) as in the binary model → true-class order
        c = c[::-1].copy()
    chains = PairChains(setup.pair_worker, setup.pair_level, setup.levels)
    curves = ConfusionCurves(
        setup.item, setup.pid, setup.label, resp.n_items, chains, c, opts.eps, setup.discrete, J, pos
    )
    model = CurveModel(curves, per_item_prior=opts.variant == "paper", gold=gold)
    run = run_variant(model, opts, f"{opts.name} EM")
    Pi, pr = run.state.values, run.state.prior
    prior = pr.mean(axis=0) if pr.ndim == 2 else pr
    fitted = FittedCurves(
        setup.values, setup.levels, setup.pair_worker, setup.pair_level, c, opts.interpolation, setup.discrete,
        problems=(pos,) if J == 2 else tuple(range(J)), confusion=Pi, prior=prior, pos=pos,
    )  # fmt: skip
    confusion = _average_confusion(setup, Pi, resp.n_workers, pos)
    conf_grid = np.stack([fitted.confusion_at(setup.grid, w) for w in range(resp.n_workers)])  # workers × grid × J × J
    det, fa = one_vs_rest_curves(conf_grid, prior)  # workers × J × grid
    context = _curves(setup, det[:, pos] if J == 2 else det, fa[:, pos] if J == 2 else fa)
    details = _details(setup, opts, [model], "confusion", setup.lipschitz)
    details["curves"] = _confusion_table(resp, setup, fitted)
    details["fitted_curves"] = fitted
    if opts.variant == "paper":
        details["raw_phi"] = pd.DataFrame(run.posterior, index=pd.Index(resp.items, name="task"), columns=resp.classes)
    return run.to_fit(
        confusion=confusion,
        class_prior=prior,
        context=ContextCurves(**context, confusion=conf_grid, positive_label=resp.classes[pos] if J == 2 else None),
        details=details,
    )


def _average_confusion(setup: ContextSetup, Pi: np.ndarray, n_workers: int, pos: int) -> np.ndarray:
    """Per-annotator confusion averaged over the annotator's responses (uniform without responses), and the
    permuted-labels warning (spec §12 pitfall 6)."""
    J = Pi.shape[1]
    w, pid = setup.worker, setup.pid
    cnt = np.bincount(w, minlength=n_workers)
    confusion = np.empty((n_workers, J, J))
    for i in range(J):  # classes, not responses
        for j in range(J):
            confusion[:, i, j] = np.bincount(w, weights=Pi[pid, i, j], minlength=n_workers) / np.maximum(cnt, 1)
    confusion[cnt == 0] = np.full((J, J), 1.0 / J)
    diag = np.einsum("wii->wi", confusion)
    if J == 2:
        youden = confusion[:, pos, pos] - confusion[:, 1 - pos, pos]
    else:
        youden = diag.mean(axis=1) - (confusion.sum(axis=1) - diag).mean(axis=1) / (J - 1)
    if (youden[cnt > 0] <= 0).mean() > 0.5:
        setup.warnings.append(
            "most annotators look worse than chance on average: the labels may be permuted (spec §12 pitfall 6)."
        )
    return confusion


def _confusion_table(resp: Responses, setup: ContextSetup, fitted: FittedCurves) -> pd.DataFrame:
    assert fitted.confusion is not None
    d_pair, f_pair = one_vs_rest_curves(fitted.confusion[None], fitted.prior)  # 1 × J × pairs
    cnt = np.bincount(setup.pid, minlength=len(setup.pair_worker))
    frames = [
        pd.DataFrame(
            {
                "worker": resp.workers.take(setup.pair_worker),
                "label": resp.classes[k],
                "context": _level_values(setup),
                "detection": d_pair[0, k],
                "false_alarm": f_pair[0, k],
                "n_responses": cnt,
            }
        )
        for k in fitted.problems
    ]
    return pd.concat(frames, ignore_index=True)


# ====================================================================== shared pieces
def _level_values(setup: ContextSetup) -> Any:
    cats = setup.values.categories
    return cats.take(setup.pair_level) if cats is not None else setup.levels[setup.pair_level]


def _curves(setup: ContextSetup, det: np.ndarray, fa: np.ndarray) -> dict[str, Any]:
    cats = setup.values.categories
    grid = np.asarray(cats, dtype=object) if cats is not None else setup.grid
    return {
        "grid": grid,
        "detection": det,
        "false_alarm": fa,
        "coverage": setup.coverage,
        "categorical": cats is not None,
    }


def _details(
    setup: ContextSetup, opts: Options, models: list[CurveModel], multiclass: str, lipschitz: np.ndarray
) -> dict[str, Any]:
    """Solver and model diagnostics (for experts and tests; no other layer reads them)."""
    return {
        "context_levels": setup.levels,
        "context_kind": setup.values.kind,
        "variant": opts.variant,
        "multiclass": multiclass,
        "lipschitz": lipschitz,
        "mstep_gap": max(m.log.gap for m in models),
        "mstep_fallbacks": sum(m.log.n_fallback for m in models),
        "max_dP": models[0].log.max_change,
        "context_binning_bound": setup.binning_bound,
    }
