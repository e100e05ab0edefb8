"""Simulators for the spectral family (spec ``spectral.md`` §6.7; P14 §Simulations, J15 §6.1).

* :func:`independent` — conditionally independent binary annotators; balanced accuracy π ~ U[0.3, 0.8] with
  a random sensitivity/specificity split (P14), or ψ, η drawn directly from ranges (J15).
* :func:`cartel` — honest annotators plus one or more cartels that follow their own target labelling τ
  (drawn from the truth through a symmetric channel with accuracy π_c).
* Both take ``observed`` (each entry kept with that probability, MCAR) or ``per_item`` (that many random
  annotators per item) for sparse variants.  Annotator order is shuffled (P9).

Labels: ``labels=(negative, positive)``; the positive label is coded +1 (y = +1 ⇔ positive).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from fusion_core.errors import UserInputError
from fusion_core.simulate.dawid_skene import Simulation


@dataclass
class SpectralCrowd(Simulation):
    """Binary annotators of the spectral family: :class:`Simulation` plus, by worker (in output order), the
    sensitivity ``psi``, specificity ``eta``, ``balanced_accuracy`` and ``group`` ('honest' / 'cartel 1' …); the
    class balance ``b``, the ``positive_label`` and the ``dense`` m × n ±1 matrix before masking.  :func:`cartel`
    adds ``xi`` (members' balanced accuracy w.r.t. their target, NaN for honest), ``pi`` (balanced accuracy w.r.t.
    the truth), ``tau`` (cartels × items targets, ±1) and ``pi_c`` (each target's accuracy)."""

    psi: pd.Series
    eta: pd.Series
    balanced_accuracy: pd.Series
    group: pd.Series
    b: float
    positive_label: Any
    dense: np.ndarray
    xi: pd.Series | None = None
    pi: pd.Series | None = None
    tau: np.ndarray | None = None
    pi_c: list[float] | None = None


def split_balanced_accuracy(pi: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """ψ ~ U[max(0, 2π−1), min(1, 2π)], η = 2π − ψ (§6.7 step 2 [CHOICE])."""
    lo, hi = np.maximum(0.0, 2 * pi - 1), np.minimum(1.0, 2 * pi)
    psi = rng.uniform(lo, hi)
    return psi, 2 * pi - psi


def _draw_labels(truth_pm: np.ndarray, psi: np.ndarray, eta: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """m × n matrix of ±1: +1 w.p. ψ_i when the target is +1, −1 w.p. η_i when it is −1."""
    u = rng.random((len(psi), len(truth_pm)))
    pos = truth_pm[None, :] > 0
    return np.where(pos, np.where(u < psi[:, None], 1, -1), np.where(u < eta[:, None], -1, 1)).astype(np.int8)


def _observed_mask(m: int, n: int, observed: float, per_item: int | None, rng: np.random.Generator) -> np.ndarray:
    if per_item is not None:
        if not 1 <= per_item <= m:
            raise UserInputError(f"per_item must be between 1 and {m}.")
        keys = rng.random((n, m))
        chosen = np.argpartition(keys, per_item - 1, axis=1)[:, :per_item]
        mask = np.zeros((m, n), dtype=bool)
        mask[chosen.T, np.arange(n)[None, :]] = True
        return mask
    if not 0 < observed <= 1:
        raise UserInputError(f"observed must be in (0, 1], got {observed}.")
    return np.ones((m, n), dtype=bool) if observed >= 1 else rng.random((m, n)) < observed


def _finish(
    Z: np.ndarray,
    mask: np.ndarray,
    y: np.ndarray,
    psi: np.ndarray,
    eta: np.ndarray,
    *,
    b: float,
    labels: Sequence[Any],
    order: np.ndarray,
    group: np.ndarray,
    cartels: dict[str, Any] | None = None,
) -> SpectralCrowd:
    """Shuffle annotators by ``order``, build the long table and the :class:`SpectralCrowd` (``cartels``: ``xi``
    and ``pi`` by annotator in generation order, ``tau`` and ``pi_c``)."""
    m, n = Z.shape
    Z, mask, psi, eta = Z[order], mask[order], psi[order], eta[order]
    label_index = pd.Index(list(labels))
    if len(label_index) != 2:
        raise UserInputError("labels must be (negative, positive).")
    workers = pd.Index([f"w{j}" for j in range(m)])
    tasks = pd.Index([f"t{i}" for i in range(n)])
    w, i = np.nonzero(mask)
    resp = pd.DataFrame(
        {"task": tasks.take(i), "worker": workers.take(w), "label": label_index.take((Z[w, i] > 0).astype(int))}
    )
    conf = np.empty((m, 2, 2))
    conf[:, 0, 0], conf[:, 0, 1] = eta, 1 - eta
    conf[:, 1, 0], conf[:, 1, 1] = 1 - psi, psi
    c = dict(cartels or {})
    for k in ("xi", "pi"):  # by annotator: in output order
        if k in c:
            c[k] = pd.Series(np.asarray(c[k])[order], index=workers, name=k)
    return SpectralCrowd(
        responses=resp,
        truth=pd.Series(label_index.take((y > 0).astype(int)), index=pd.Index(tasks, name="task"), name="truth"),
        confusion=conf,
        class_prior=np.array([(1 - b) / 2, (1 + b) / 2]),
        workers=workers,
        classes=labels,
        psi=pd.Series(psi, index=workers, name="psi"),
        eta=pd.Series(eta, index=workers, name="eta"),
        balanced_accuracy=pd.Series((psi + eta) / 2, index=workers, name="balanced_accuracy"),
        group=pd.Series(np.asarray(group, dtype=object)[order], index=workers, name="group"),
        b=b,
        positive_label=label_index[1],
        dense=Z.astype(float),
        **c,
    )


def independent(
    m: int = 100,
    n: int = 600,
    b: float = 0.0,
    pi_range: tuple[float, float] = (0.3, 0.8),
    psi_range: tuple[float, float] | None = None,
    *,
    eta_range: tuple[float, float] | None = None,
    psi: np.ndarray | None = None,
    eta: np.ndarray | None = None,
    observed: float = 1.0,
    per_item: int | None = None,
    labels: Sequence[Any] = (0, 1),
    seed: int | None = 0,
) -> SpectralCrowd:
    """Conditionally independent binary annotators (P14 §Simulations; J15 §6.1 with ``psi_range``/``eta_range``).

    Priority: explicit ``psi``/``eta`` arrays, then ``psi_range``/``eta_range`` (uniform), then balanced
    accuracy π ~ U[pi_range] with the random ψ/η split.  ``dense`` is the full m × n ±1 matrix
    (before masking, annotators in output order); ``confusion`` is workers × true × reported.
    """
    if not -1 < b < 1:
        raise UserInputError(f"b must be in (−1, 1), got {b}.")
    rng = np.random.default_rng(seed)
    if psi is not None and eta is not None:
        psi, eta = np.asarray(psi, float), np.asarray(eta, float)
        m = len(psi)
    elif psi_range is not None:
        psi = rng.uniform(*psi_range, size=m)
        eta = rng.uniform(*(eta_range or psi_range), size=m)
    else:
        pi = rng.uniform(*pi_range, size=m)
        psi, eta = split_balanced_accuracy(pi, rng)
    y = np.where(rng.random(n) < (1 + b) / 2, 1, -1)
    Z = _draw_labels(y, psi, eta, rng)
    mask = _observed_mask(m, n, observed, per_item, rng)
    order = rng.permutation(m)
    group = np.array(["honest"] * m, dtype=object)
    return _finish(Z, mask, y, psi, eta, b=b, labels=labels, order=order, group=group)


def cartel(
    m: int = 100,
    n: int = 600,
    r: float | Sequence[float] = 0.33,
    pi_c: float | Sequence[float] = 0.5,
    b: float = 0.0,
    *,
    pi_range: tuple[float, float] = (0.3, 0.8),
    xi_range: tuple[float, float] = (0.3, 0.8),
    observed: float = 1.0,
    per_item: int | None = None,
    labels: Sequence[Any] = (0, 1),
    seed: int | None = 0,
) -> SpectralCrowd:
    """Honest annotators plus cartels following their own target labelling (P14 §Cartel, spec §6.7).

    ``r``: cartel fraction (one float, or one per cartel); ``pi_c``: balanced accuracy of each target τ
    w.r.t. the truth (symmetric channel, so Lemma 2 holds exactly when b = 0); members' balanced accuracy
    ξ w.r.t. τ ~ U[xi_range].  Typed fields: ``group`` ('honest' / 'cartel 1' …), ``xi`` (NaN for honest),
    ``pi`` (balanced accuracy w.r.t. the truth; for members the implied value), ``tau`` (targets, ±1).
    ``confusion``/``psi``/``eta`` are w.r.t. the truth.
    """
    rs = [float(x) for x in np.atleast_1d(np.asarray(r, dtype=float))]
    pcs = [float(x) for x in np.atleast_1d(np.asarray(pi_c, dtype=float))]
    if len(pcs) == 1:
        pcs = pcs * len(rs)
    if len(pcs) != len(rs):
        raise UserInputError("give one pi_c per cartel.")
    sizes = [round(x * m) for x in rs]
    n_p = m - sum(sizes)
    if n_p < 1 or min(sizes) < 0:
        raise UserInputError("cartel fractions must leave at least one honest annotator.")
    rng = np.random.default_rng(seed)
    pi = rng.uniform(*pi_range, size=n_p)
    psi_h, eta_h = split_balanced_accuracy(pi, rng)
    y = np.where(rng.random(n) < (1 + b) / 2, 1, -1)
    blocks = [_draw_labels(y, psi_h, eta_h, rng)]
    psi_all, eta_all = [psi_h], [eta_h]
    group = ["honest"] * n_p
    xi_all = [np.full(n_p, np.nan)]
    taus = []
    for c, (size, pc) in enumerate(zip(sizes, pcs), start=1):
        tau = np.where(rng.random(n) < pc, y, -y)  # symmetric channel: sensitivity = specificity = π_c
        taus.append(tau)
        xi = rng.uniform(*xi_range, size=size)
        ps, es = split_balanced_accuracy(xi, rng)
        blocks.append(_draw_labels(tau, ps, es, rng))
        # w.r.t. the truth: P(f=+|y=+) = π_c ψ + (1−π_c)(1−η), P(f=−|y=−) = π_c η + (1−π_c)(1−ψ)
        psi_all.append(pc * ps + (1 - pc) * (1 - es))
        eta_all.append(pc * es + (1 - pc) * (1 - ps))
        group += [f"cartel {c}"] * size
        xi_all.append(xi)
    Z = np.vstack(blocks)
    psi, eta = np.concatenate(psi_all), np.concatenate(eta_all)
    mask = _observed_mask(m, n, observed, per_item, rng)
    order = rng.permutation(m)
    cartels = {"xi": np.concatenate(xi_all), "pi": (psi + eta) / 2, "tau": np.array(taus), "pi_c": pcs}
    return _finish(
        Z, mask, y, psi, eta, b=b, labels=labels, order=order, group=np.array(group, dtype=object), cartels=cartels
    )
