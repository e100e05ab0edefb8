"""The global sign of the ranking eigenvector (spec ``spectral.md`` §3.4, pitfall P1).

The eigenvector is determined up to ±1; the rules assume the annotators are better than random on average
('sum', default) or in majority ('count', the papers' assumption A3).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fusion_core.errors import UserInputError

SIGN_RULES = ("sum", "count")


def resolve_sign(v: np.ndarray, rule: str = "sum") -> tuple[np.ndarray, dict[str, Any]]:
    """``v`` with the sign chosen by ``rule``, and its diagnostics (sign margin, share of positive entries, whether
    the two rules disagree)."""
    v = np.asarray(v, dtype=float)
    s = v.sum()
    n_pos, n_neg = int((v > 0).sum()), int((v < 0).sum())
    if rule == "sum":
        flip = s < 0 or (s == 0 and n_pos < n_neg)
    elif rule == "count":
        flip = n_pos < n_neg or (n_pos == n_neg and s < 0)
    else:
        raise UserInputError(f"sign_rule must be 'sum' or 'count', got {rule!r}.")
    out = -v if flip else v
    tot = np.abs(v).sum()
    margin = float(out.sum() / tot) if tot > 0 else 0.0
    count_flip = n_pos < n_neg
    sum_flip = s < 0
    return out, {
        "sign_margin": margin,
        "frac_positive": float((out > 0).mean()) if len(out) else 0.0,
        "sign_rule_disagreement": bool(count_flip != sum_flip and n_pos != n_neg and s != 0),
    }
