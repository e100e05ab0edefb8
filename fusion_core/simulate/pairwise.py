"""A panel of LLM judges comparing two answers, with known truth (docs/JUDGES.md, "Simulator").

Options (systems) have strengths θ; each comparison item (prompt, A, B) has a true preference drawn from
Davidson's model (P(A) ∝ e^{θ_A}, P(B) ∝ e^{θ_B}, P(tie) ∝ ν e^{(θ_A+θ_B)/2}), which is also what a human gold
label says.  Judge j sees the item in a random order and, unless it reports a tie, prefers the first-shown option
with probability

    ½ + a_j (s − ½) + b_j + ℓ_j · sign(log len_first − log len_second) + σ_j · (own family first − own family second)

(a_j is lowered where needed so that this stays in [0.02, 0.98]), where s = 1, 0, ½ when the truth is first-better, second-better, tie.  So a_j is the
judge's reliability (0 = prefers at random), b_j its position bias (P(first) − ½ under a random order), ℓ_j its
length bias (extra probability of preferring the longer answer) and σ_j its self-preference (towards answers of
its own model family).  Judges of a correlated family share errors: on a share ``shared_error`` of the items the
family's members all see the truth reversed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from fusion_core.errors import UserInputError


@dataclass(frozen=True)
class PairwiseSimulation:
    """A simulated panel.  ``responses``: one row per judgement (prompt, option_a, option_b, judge, preference,
    order, length_a, length_b, family_a, family_b, judge_family, confidence); ``truth``: one row per item (prompt,
    option_a, option_b, preference) — the human label; ``gold``: the rows of ``truth`` given as gold (a random
    ``gold`` share); ``strengths``: θ by option; ``win_rate``: each option's true win rate (ties count ½) against an
    opponent drawn uniformly, the population value the corrected estimates aim at; ``judges``: one row per judge
    (reliability, position_bias, length_bias, self_preference, family, correlated)."""

    responses: pd.DataFrame
    truth: pd.DataFrame
    gold: pd.DataFrame
    strengths: pd.Series
    win_rate: pd.Series
    judges: pd.DataFrame
    tie_strength: float


def davidson_probs(diff: np.ndarray, nu: float) -> np.ndarray:
    """Davidson (1970) probabilities (first better, second better, tie) for strength differences θ_first − θ_second:
    the softmax of (d/2, −d/2, log ν)."""
    z = np.stack([diff / 2, -diff / 2, np.full_like(diff, np.log(max(nu, 1e-300)))], axis=1)
    z -= z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return np.asarray(e / e.sum(axis=1, keepdims=True))


def _vec(value: float | Sequence[float] | None, n: int, default: float, name: str) -> np.ndarray:
    out = np.full(n, default) if value is None else np.broadcast_to(np.asarray(value, dtype=float), (n,)).copy()
    if not np.isfinite(out).all():
        raise UserInputError(f"{name} must be finite numbers.")
    return out


def pairwise_panel(
    n_comparisons: int = 500,
    n_judges: int = 5,
    n_options: int = 8,
    *,
    strengths: Sequence[float] | None = None,
    reliability: float | Sequence[float] | None = None,
    position_bias: float | Sequence[float] | None = None,
    length_bias: float | Sequence[float] | None = None,
    self_preference: float | Sequence[float] | None = None,
    judge_families: Sequence[str] | None = None,
    option_families: Sequence[str] | None = None,
    correlated: Sequence[bool] | None = None,
    shared_error: float = 0.15,
    tie_strength: float = 0.3,
    verbosity: float = 0.3,
    both_orders: bool = False,
    gold: float = 0.1,
    seed: int | None = 0,
) -> PairwiseSimulation:
    """Simulate ``n_comparisons`` items (each its own prompt, two options drawn at random) judged by every judge
    (module docstring).  Defaults: strengths evenly spaced on [−1.5, 1.5]; reliabilities U(0.5, 0.9); no biases;
    judge j of family ``family{j}`` and option s of family ``family{s % n_judges}``; ``verbosity``: the sd of the
    options' mean log length (longer answers are not better); ``both_orders``: every judge sees every item in both
    orders (two judgements); ``gold``: share of items whose true preference is returned as gold.

    Examples
    --------
    >>> sim = pairwise_panel(n_comparisons=50, n_judges=3, position_bias=[0.2, 0.0, 0.0], seed=1)
    >>> sim.responses.shape[0], sim.judges["position_bias"].tolist(), len(sim.gold)
    (150, [0.2, 0.0, 0.0], 5)
    """
    if n_comparisons < 1 or n_judges < 1 or n_options < 2:
        raise UserInputError("a pairwise panel needs at least 1 comparison, 1 judge and 2 options.")
    if not 0 <= gold <= 1 or not 0 <= shared_error <= 1 or tie_strength < 0:
        raise UserInputError("gold and shared_error must be between 0 and 1, tie_strength ≥ 0.")
    rng = np.random.default_rng(seed)
    theta = np.linspace(-1.5, 1.5, n_options) if strengths is None else np.asarray(strengths, dtype=float)
    if theta.shape != (n_options,):
        raise UserInputError(f"strengths must have {n_options} values.")
    rel = rng.uniform(0.5, 0.9, n_judges) if reliability is None else _vec(reliability, n_judges, 0.7, "reliability")
    pos = _vec(position_bias, n_judges, 0.0, "position_bias")
    lenb = _vec(length_bias, n_judges, 0.0, "length_bias")
    selfp = _vec(self_preference, n_judges, 0.0, "self_preference")
    rel = np.minimum(rel, 0.96 - 2 * (np.abs(pos) + np.abs(lenb) + np.abs(selfp)))  # no clipping below: b is exact
    if (rel < 0).any():
        raise UserInputError("position, length and self-preference biases of a judge must add up to less than 0.48.")
    jfam = np.array(list(judge_families) if judge_families else [f"family{j}" for j in range(n_judges)], dtype=object)
    ofam = np.array(
        list(option_families) if option_families else [f"family{s % n_judges}" for s in range(n_options)], dtype=object
    )
    corr = np.zeros(n_judges, dtype=bool) if correlated is None else np.asarray(correlated, dtype=bool)
    if len(jfam) != n_judges or len(ofam) != n_options or len(corr) != n_judges:
        raise UserInputError("judge_families / correlated need one value per judge, option_families one per option.")

    # items: two distinct options each, in a random A/B assignment
    a = rng.integers(0, n_options, n_comparisons)
    b = (a + rng.integers(1, n_options, n_comparisons)) % n_options
    truth_probs = davidson_probs(theta[a] - theta[b], tie_strength)
    u = rng.random(n_comparisons)
    truth = np.where(u < truth_probs[:, 0], 0, np.where(u < truth_probs[:, :2].sum(axis=1), 1, 2))
    log_len = np.log(300.0) + verbosity * rng.standard_normal(n_options)
    len_a = np.exp(log_len[a] + 0.4 * rng.standard_normal(n_comparisons)).round() + 1
    len_b = np.exp(log_len[b] + 0.4 * rng.standard_normal(n_comparisons)).round() + 1
    fam_code, fams = pd.factorize(jfam)
    flip = rng.random((len(fams), n_comparisons)) < shared_error  # each family's shared misreadings

    reps = 2 if both_orders else 1
    item = np.tile(np.repeat(np.arange(n_comparisons), reps), n_judges)
    judge = np.repeat(np.arange(n_judges), n_comparisons * reps)
    if both_orders:
        first_a = np.tile(np.tile([True, False], n_comparisons), n_judges)
        swap = rng.random(n_comparisons * n_judges) < 0.5  # which order comes first does not matter here
        first_a = np.where(np.repeat(swap, 2), ~first_a, first_a)
    else:
        first_a = rng.random(len(item)) < 0.5
    seen = truth[item].copy()
    shared = flip[fam_code[judge], item] & corr[judge]
    seen = np.where(shared & (seen != 2), 1 - seen, seen)
    s_a = np.select([seen == 0, seen == 1], [1.0, 0.0], 0.5)  # 1 when A is (seen as) better
    s_first = np.where(first_a, s_a, 1 - s_a)
    dlen = np.sign(np.log(len_a[item]) - np.log(len_b[item])) * np.where(first_a, 1, -1)
    own_a = (ofam[a[item]] == jfam[judge]).astype(float)
    own_b = (ofam[b[item]] == jfam[judge]).astype(float)
    own = (own_a - own_b) * np.where(first_a, 1, -1)
    p_first = 0.5 + rel[judge] * (s_first - 0.5) + pos[judge] + lenb[judge] * dlen + selfp[judge] * own
    p_first = np.clip(p_first, 0.02, 0.98)
    p_tie = np.where(seen == 2, 0.5, 0.05)
    r = rng.random(len(item))
    first_won = rng.random(len(item)) < p_first
    outcome = np.where(r < p_tie, 2, np.where(first_won == first_a, 0, 1))
    conf = np.clip(0.55 + 0.4 * rel[judge] + 0.1 * rng.standard_normal(len(item)), 0.5, 1.0)

    opts = pd.Index([f"system{s + 1}" for s in range(n_options)], name="option")
    judges = pd.Index([f"judge{j + 1}" for j in range(n_judges)], name="judge")
    prompts = np.array([f"prompt{i:04d}" for i in range(n_comparisons)], dtype=object)
    words = np.array(["A", "B", "tie"], dtype=object)
    responses = pd.DataFrame(
        {
            "prompt": prompts[item],
            "option_a": opts.take(a[item]),
            "option_b": opts.take(b[item]),
            "judge": judges.take(judge),
            "preference": words[outcome],
            "order": np.where(first_a, "AB", "BA"),
            "length_a": len_a[item],
            "length_b": len_b[item],
            "family_a": ofam[a[item]],
            "family_b": ofam[b[item]],
            "judge_family": jfam[judge],
            "confidence": conf,
        }
    )
    truth_df = pd.DataFrame(
        {"prompt": prompts, "option_a": opts.take(a), "option_b": opts.take(b), "preference": words[truth]}
    )
    n_gold = round(gold * n_comparisons)
    gold_rows = np.sort(rng.choice(n_comparisons, size=n_gold, replace=False))
    pair = davidson_probs(theta[:, None].repeat(n_options, 1).ravel() - np.tile(theta, n_options), tie_strength)
    score = (pair[:, 0] + 0.5 * pair[:, 2]).reshape(n_options, n_options)
    np.fill_diagonal(score, 0.0)
    return PairwiseSimulation(
        responses=responses,
        truth=truth_df,
        gold=truth_df.iloc[gold_rows].reset_index(drop=True),
        strengths=pd.Series(theta, index=opts, name="strength"),
        win_rate=pd.Series(score.sum(axis=1) / (n_options - 1), index=opts, name="win_rate"),
        judges=pd.DataFrame(
            {
                "reliability": rel,
                "position_bias": pos,
                "length_bias": lenb,
                "self_preference": selfp,
                "family": jfam,
                "correlated": corr,
            },
            index=judges,
        ),
        tie_strength=float(tie_strength),
    )
