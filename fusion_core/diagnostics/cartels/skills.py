"""The members' skills in the collusion check (:mod:`.collusion`): method-of-moments confusions against the rest's
posterior, the copy test that keeps near-chance copiers in a group, the normal tail of the null's replicates and
Wilson intervals."""

from __future__ import annotations

import numpy as np
from scipy.stats import norm


def wilson(k: float, n: float, z: float) -> tuple[float, float]:
    """Wilson score interval of k successes in n trials at normal quantile z (Wilson 1927)."""
    if n <= 0:
        return float("nan"), float("nan")
    p = k / n
    c = (p + z * z / (2 * n)) / (1 + z * z / n)
    h = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return float(c - h), float(c + h)


def confusions(q: np.ndarray, who: np.ndarray, lab: np.ndarray, m: int) -> tuple[np.ndarray, np.ndarray]:
    """Method-of-moments confusions Π_a = G_a⁻¹ M_a (rows true, columns reported) and per-class weights n_ak."""
    K = q.shape[1]
    G = np.empty((m, K, K))
    M = np.empty((m, K, K))
    for k in range(K):
        for k2 in range(K):
            G[:, k, k2] = np.bincount(who, weights=q[:, k] * q[:, k2], minlength=m)
        M[:, k, :] = np.bincount(who * K + lab, weights=q[:, k], minlength=m * K).reshape(m, K)
    G += 1e-3 * np.eye(K)[None]
    M += 1e-3 / K
    Pi = np.linalg.solve(G, M)
    Pi = np.clip(Pi, 1e-3, None)
    Pi /= Pi.sum(axis=2, keepdims=True)
    return Pi, M.sum(axis=2)


def copies(
    Pi: np.ndarray,
    q: np.ndarray,
    who: np.ndarray,
    item: np.ndarray,
    lab: np.ndarray,
    *,
    alpha: float,
    min_excess: float,
) -> np.ndarray:
    """Per proposed member: does it agree with the other proposed members beyond its and their confusions predict
    (one-sided normal test at ``alpha`` on its agreeing pairs, excess ≥ ``min_excess``)?  A near-chance annotator who
    copies the group is no spammer (a cartel following a random target is at chance against the truth)."""
    m, K = Pi.shape[0], Pi.shape[1]
    if len(who) == 0:
        return np.zeros(m, dtype=bool)
    u_items, inv = np.unique(item, return_inverse=True)
    n_it = len(u_items)
    C = np.bincount(inv * K + lab, minlength=n_it * K).reshape(n_it, K)
    n_i = C.sum(axis=1)
    obs_r = C[inv, lab] - 1.0
    P = Pi[who]  # responses × K × K
    S = np.stack([np.bincount(inv, weights=P[:, k, l], minlength=n_it) for k in range(K) for l in range(K)], axis=1)
    S = S.reshape(n_it, K, K)
    qi = q[u_items][inv]
    pred_r = (qi * (P * (S[inv] - P)).sum(axis=2)).sum(axis=1)
    partners = np.maximum(n_i[inv] - 1.0, 0.0)
    var_r = pred_r * (1 - pred_r / np.maximum(partners, 1.0))
    obs = np.bincount(who, weights=obs_r, minlength=m)
    pred = np.bincount(who, weights=pred_r, minlength=m)
    var = np.bincount(who, weights=var_r, minlength=m)
    n_p = np.bincount(who, weights=partners, minlength=m)
    zc = float(norm.ppf(1 - alpha))
    excess = obs - pred
    return (excess > zc * np.sqrt(np.maximum(var, 1e-12))) & (excess >= min_excess * np.maximum(n_p, 1.0))


def tail(obs: np.ndarray, null: np.ndarray) -> np.ndarray:
    """One-sided p-value of counts ``obs`` (per row) against the null's replicates (columns): normal with the
    replicates' mean and spread (at least ½) and a continuity correction."""
    mu = null.mean(axis=1)
    sd = np.maximum(null.std(axis=1), 0.5)
    return np.asarray(norm.sf((obs - 0.5 - mu) / sd))
