"""Bootstrap confidence intervals for annotator skills and confusion entries of any registered method.

Items are resampled with replacement (``Responses.with_items_resampled``), the method is refitted on each
replicate, and percentile intervals are taken per annotator.  Sequential methods resample whole sequences (a
block bootstrap, ``Responses.with_sequences_resampled``: dependence along a sequence is kept); item-aligned
inputs (a context value, gold labels) travel with their items.  Graph methods are refused: resampling nodes
would break the item graph the model conditions on.  Latent classes are only identified up to a
permutation, so every replicate's true-class axis is first matched to the full-data fit: the permutation
maximising ``Σ_n q_ref[draw_n] · q_boot[n]`` (Hungarian algorithm on a K × K score) is applied to the
posterior, the class prior and the *true* axis of the confusion matrices (reported labels are observed and
never permuted).  Annotators with no response in a replicate get NaN there and are left out of its quantiles.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from fusion_core.data.responses import Responses, as_responses
from fusion_core.errors import AggregationWarning, UserInputError
from fusion_core.methods.base import Aggregator, worker_skills
from fusion_core.methods.registry import info
from fusion_core.methods.results import FitResult


@dataclass
class BootstrapResult:
    """Percentile intervals at ``level`` from ``n_bootstrap`` item-resampled refits."""

    method: str
    level: float
    n_bootstrap: int
    skills: pd.DataFrame  # worker × (estimate, low, high, n_replicates)
    confusion: np.ndarray | None  # full-data estimate, workers × true × reported
    confusion_low: np.ndarray | None
    confusion_high: np.ndarray | None
    skill_samples: np.ndarray  # n_bootstrap × workers (NaN where a worker had no response)
    permuted: int  # replicates whose latent classes had to be re-ordered
    failed: int  # replicates that raised (left out)
    workers: pd.Index = field(default_factory=pd.Index)
    classes: pd.Index = field(default_factory=pd.Index)


def align_classes(reference: np.ndarray, posterior: np.ndarray) -> np.ndarray:
    """Permutation ``perm`` with ``posterior[:, perm]`` best matching ``reference`` (both n × K).

    ``perm[j]`` is the bootstrap class that plays reference class ``j``.
    """
    score = reference.T @ posterior  # K_ref × K_boot
    from scipy.optimize import linear_sum_assignment  # lazy: scipy.optimize costs 0.2 s of start-up

    rows, cols = linear_sum_assignment(-score)
    perm = np.empty(reference.shape[1], dtype=np.int64)
    perm[rows] = cols
    return perm


def _estimator(method: str | Aggregator, params: Mapping[str, Any] | None) -> tuple[str, dict[str, Any], type]:
    if isinstance(method, Aggregator):
        p = method.get_params()
        p.update(params or {})
        return method.method_name, p, type(method)
    meta = info(method)
    return meta.name, dict(params or {}), meta.cls


def bootstrap_intervals(
    data: Responses | pd.DataFrame,
    method: str | Aggregator,
    params: Mapping[str, Any] | None = None,
    *,
    n_bootstrap: int = 100,
    level: float = 0.9,
    random_state: int | None = 0,
    fit_kwargs: Mapping[str, Any] | None = None,
) -> BootstrapResult:
    """Item-bootstrap percentile intervals for skills and confusion entries (see module docstring).

    ``method``: a registered name or an estimator (its parameters are reused); ``fit_kwargs`` go to every
    ``fit``; ``context=`` and ``true_labels=`` (Series by item id) are resampled with their items.
    """
    if not 0 < level < 1:
        raise UserInputError(f"level must be between 0 and 1, got {level}.")
    if n_bootstrap < 2:
        raise UserInputError(f"n_bootstrap must be at least 2, got {n_bootstrap}.")
    resp = as_responses(data)
    name, p, cls = _estimator(method, params)
    by_sequence = _resamples_sequences(name, cls, resp)
    kwargs = dict(fit_kwargs or {})
    item_inputs = _item_aligned(resp, kwargs)
    ref = cls(**p).fit(resp, **kwargs).result_
    rng = np.random.default_rng(random_state)
    w, k = resp.n_workers, resp.n_classes
    skill_s = np.full((n_bootstrap, w), np.nan)
    conf_s = np.full((n_bootstrap, w, k, k), np.nan) if ref.confusion is not None else None
    permuted = failed = 0
    for b in range(n_bootstrap):  # one refit per replicate; each refit is vectorised
        boot, draw = _resample(resp, rng, by_sequence)
        for key, (by_code, numeric) in item_inputs.items():
            vals = pd.Series(by_code[draw], index=boot.items)
            vals = vals[vals.notna()]
            kwargs[key] = pd.to_numeric(vals) if numeric else vals
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", AggregationWarning)
                r = cls(**p).fit(boot, **kwargs).result_
        except (UserInputError, FloatingPointError, np.linalg.LinAlgError):
            failed += 1
            continue
        skills, conf, identity = _aligned_estimates(r, boot, ref.posterior[draw])
        permuted += not identity
        present = np.bincount(boot.worker, minlength=w) > 0
        skill_s[b] = np.where(present, skills, np.nan)
        if conf_s is not None and conf is not None:
            conf_s[b] = np.where(present[:, None, None], conf, np.nan)
    ok = np.isfinite(skill_s).any(axis=1)
    if ok.sum() < 2:
        raise UserInputError(f"only {int(ok.sum())} bootstrap replicates of '{name}' could be fitted; no intervals.")
    low, high = _percentiles(skill_s[ok], level)
    c_low, c_high = _percentiles(conf_s[ok], level) if conf_s is not None else (None, None)
    skills_df = pd.DataFrame(
        {
            "estimate": np.asarray(ref.worker_skill, dtype=float),
            "low": low,
            "high": high,
            "n_replicates": np.isfinite(skill_s[ok]).sum(axis=0),
        },
        index=pd.Index(resp.workers, name="worker"),
    )
    return BootstrapResult(
        method=name,
        level=level,
        n_bootstrap=n_bootstrap,
        skills=skills_df,
        confusion=ref.confusion,
        confusion_low=c_low,
        confusion_high=c_high,
        skill_samples=skill_s,
        permuted=permuted,
        failed=failed,
        workers=resp.workers,
        classes=resp.classes,
    )


def _resamples_sequences(name: str, cls: type, resp: Responses) -> bool:
    """Whether replicates resample whole sequences (sequence methods); refuses graph methods."""
    inputs = set(getattr(cls, "inputs", ("plain",)))
    if "graph" in inputs:
        raise UserInputError(
            f"method '{name}' conditions on the item graph, which resampling items would break; bootstrap "
            "intervals are available for plain, sequence and context methods."
        )
    by_sequence = "sequence" in inputs
    if by_sequence and not resp.has_sequences:
        raise UserInputError(f"method '{name}' needs sequences (sequence and position columns) to bootstrap.")
    return by_sequence


def _item_aligned(resp: Responses, kwargs: Mapping[str, Any]) -> dict[str, tuple[np.ndarray, bool]]:
    """Item-aligned fit inputs (context, gold): values by item code (NaN where absent) and whether numeric."""
    out = {}
    for key in ("context", "true_labels"):
        if kwargs.get(key) is not None:
            codes, vals = resp.align_items(kwargs[key], what=key)
            by_code = np.full(resp.n_items, np.nan, dtype=object)
            by_code[codes] = vals
            numeric = key == "context" and pd.api.types.is_numeric_dtype(pd.Series(kwargs[key]))
            out[key] = (by_code, bool(numeric))
    return out


def _resample(resp: Responses, rng: np.random.Generator, by_sequence: bool) -> tuple[Responses, np.ndarray]:
    """One replicate: (resampled responses, item code of each replicate item in the original data)."""
    if by_sequence:
        n_seq = len(resp.sequence_bounds) - 1
        return resp.with_sequences_resampled(rng.integers(0, n_seq, size=n_seq))
    draw = rng.integers(0, resp.n_items, size=resp.n_items)
    return resp.with_items_resampled(draw), draw


def _aligned_estimates(r: FitResult, boot: Responses, ref_post: np.ndarray) -> tuple[np.ndarray, Any, bool]:
    """A replicate's skills and confusion with its latent classes matched to the reference fit, and whether the
    classes came back in the reference order (then the method's own ``worker_skill`` is used as it is)."""
    k = r.posterior.shape[1]
    perm = align_classes(ref_post, r.posterior)
    identity = bool(np.all(perm == np.arange(k)))
    post = r.posterior[:, perm]
    conf = None if r.confusion is None else r.confusion[:, perm, :]
    if identity:
        skills = np.asarray(r.worker_skill, dtype=float)
    elif conf is not None:
        prior = r.class_prior[perm] if r.class_prior is not None else post.mean(axis=0)
        skills = np.einsum("k,wkk->w", prior, conf)
    else:
        skills = worker_skills(boot, post, None, None)
    return skills, conf, identity


def _percentiles(samples: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray]:
    """Central ``level`` percentile interval over the first axis, ignoring NaN (absent annotators)."""
    lo_q, hi_q = (1 - level) / 2, 1 - (1 - level) / 2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns for never-present workers
        return np.nanquantile(samples, lo_q, axis=0), np.nanquantile(samples, hi_q, axis=0)
