"""Per-judge bias audits of a pairwise panel: position bias, verbosity (length) bias and self-preference, each an
effect on the probability scale with a bootstrap-over-prompts interval and a verdict in plain words
(docs/JUDGES.md, "Bias audits").

Each effect is the judge's mean residual over its decisive judgements (ties left out): what it did (picked the
first-shown / the longer / its own family's answer: 1 or 0) minus what an unbiased judge of the same reliability
would do on that comparison, e_c = ½ + r_j (P(first better) − ½), where r_j is the judge's reliability and
P(first better) the item's posterior without this judgement under the pairwise Dawid–Skene fit
(:class:`~fusion_core.methods.pairwise.ds.PairwiseDS`).  When every option is shown first half of the time, e_c
averages ½ and the position effect is P(first) − ½, the same quantity as "flips when the order is swapped" from
judgements run in both orders; when the design is unbalanced the residual removes the options' quality.
Intervals: percentiles over prompts resampled with replacement (e_c held fixed).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import scipy.sparse as sp

from fusion_core.data.pairwise import TIE, PairwiseResponses

KINDS = {
    "position": ("prefers the first-shown answer", "prefers the second-shown answer", "position"),
    "length": ("prefers longer answers", "prefers shorter answers", "length"),
    "self": ("prefers its own model family", "disfavours its own model family", "self-preference"),
}


@dataclass(frozen=True)
class BiasRule:
    """When a bias is called (declared once).  ``level``: the interval's probability; an effect is flagged when
    the whole interval is on one side of 0 and the estimate is at least ``min_effect`` (probability points); it is
    "no sizeable bias" when the whole interval lies within ±``negligible``; with fewer than ``min_n`` decisive
    judgements, or an interval that is neither, "not enough comparisons to tell"."""

    level: float = 0.95
    min_effect: float = 0.05
    negligible: float = 0.1
    min_n: int = 30

    def text(self) -> str:
        return (
            f"a bias is called when the {self.level:.0%} interval excludes 0 and the effect is at least "
            f"{self.min_effect:g} (probability points); 'no sizeable bias' when the interval lies within "
            f"±{self.negligible:g}; fewer than {self.min_n} decisive judgements: not enough to tell."
        )


@dataclass(frozen=True)
class JudgeBias:
    """The three audits.  ``table``: one row per (judge, kind) with ``effect``, ``low``, ``high``, ``n`` (decisive
    judgements used) and ``verdict``; kinds without the needed columns (lengths, model families) are absent and
    named in ``skipped``."""

    table: pd.DataFrame
    rule: BiasRule
    n_bootstrap: int
    skipped: tuple[str, ...]

    def frame(self, kind: str) -> pd.DataFrame:
        """The rows of one kind ("position", "length", "self"), indexed by judge."""
        return self.table[self.table["kind"] == kind].set_index("judge").drop(columns="kind")

    def flagged(self, kind: str = "position") -> pd.Index:
        t = self.frame(kind)
        return t.index[t["flagged"].to_numpy(dtype=bool)]


def expected_first(data: PairwiseResponses, fit: object) -> np.ndarray:
    """e_c (module docstring) from a fitted :class:`~fusion_core.methods.pairwise.ds.PairwiseDS`: the item's
    posterior with judgement c's own likelihood term removed, mixed with ½ by the judge's reliability."""
    model, state, res = fit.model_, fit.state_, fit.result_  # type: ignore[attr-defined]
    post = np.clip(res.item_posterior[model.item], 1e-300, None)
    own = state.log_conf[data.judge[:, None], model.s, model.y[:, None]] * model.wc[:, None]
    loo = np.log(post) - own
    loo = np.exp(loo - loo.max(axis=1, keepdims=True))
    loo /= loo.sum(axis=1, keepdims=True)
    lo_better = loo[:, 0] + (0.5 * loo[:, 2] if loo.shape[1] == 3 else 0.0)
    first_better = np.where(model.lo_first, lo_better, 1 - lo_better)
    rel = np.clip(res.reliability, 0.0, 1.0)[data.judge]
    return np.asarray(0.5 + rel * (first_better - 0.5))


def _indicators(data: PairwiseResponses) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per kind: (mask of judgements that inform it, +1 when the 'favoured' side is the first-shown, else −1)."""
    decisive = data.outcome != TIE
    out = {"position": (decisive, np.ones(data.n))}
    if data.length_a is not None and data.length_b is not None:
        first_len = np.where(data.a_first, data.length_a, data.length_b)
        second_len = np.where(data.a_first, data.length_b, data.length_a)
        out["length"] = (decisive & (first_len != second_len), np.where(first_len > second_len, 1.0, -1.0))
    if data.judge_family is not None and data.family_a is not None and data.family_b is not None:
        own_a = (data.family_a == data.judge_family) & (data.judge_family != None)  # noqa: E711 (object arrays)
        own_b = (data.family_b == data.judge_family) & (data.judge_family != None)  # noqa: E711
        own_first = np.where(data.a_first, own_a, own_b).astype(bool)
        own_second = np.where(data.a_first, own_b, own_a).astype(bool)
        out["self"] = (decisive & (own_first != own_second), np.where(own_first, 1.0, -1.0))
    return out


def judge_bias(
    data: PairwiseResponses,
    fit: object,
    *,
    n_bootstrap: int = 200,
    rule: BiasRule | None = None,
    random_state: int | None = 0,
) -> JudgeBias:
    """Position, length and self-preference effects per judge with bootstrap intervals and verdicts (module
    docstring).  ``fit``: a fitted ``PairwiseDS`` on ``data``.

    Examples
    --------
    >>> from fusion_core.simulate.pairwise import pairwise_panel
    >>> from fusion_core.data.pairwise import PairwiseResponses
    >>> from fusion_core.methods.pairwise import PairwiseDS
    >>> sim = pairwise_panel(n_comparisons=400, n_judges=3, position_bias=[0.2, 0.0, 0.0], seed=3)
    >>> data = PairwiseResponses.from_frame(sim.responses)
    >>> audit = judge_bias(data, PairwiseDS().fit(data), n_bootstrap=100)
    >>> list(audit.flagged("position")), audit.frame("position").loc["judge1", "verdict"]
    (['judge1'], 'prefers the first-shown answer')
    """
    rule = rule or BiasRule()
    e = expected_first(data, fit)
    chose_first = (data.shown_outcome == 0).astype(float)
    rng = np.random.default_rng(random_state)
    boot = rng.multinomial(data.n_prompts, np.full(data.n_prompts, 1.0 / data.n_prompts), size=n_bootstrap)
    weights = np.vstack([np.ones(data.n_prompts), boot]).astype(float)[:, data.prompt]  # (1 + B) × judgements
    rows = []
    kinds = _indicators(data)
    for kind, (mask, side) in kinds.items():  # at most three kinds
        resid = np.where(side > 0, chose_first - e, (1 - chose_first) - (1 - e))
        onehot = sp.csr_matrix((mask.astype(float), (np.arange(data.n), data.judge)), shape=(data.n, data.n_judges))
        num = (weights * resid) @ onehot
        den = weights @ onehot
        with np.errstate(invalid="ignore", divide="ignore"):
            est = num / den
        alpha = (1 - rule.level) / 2
        low = np.nanquantile(est[1:], alpha, axis=0) if n_bootstrap else np.full(data.n_judges, np.nan)
        high = np.nanquantile(est[1:], 1 - alpha, axis=0) if n_bootstrap else np.full(data.n_judges, np.nan)
        for j in range(data.n_judges):  # judges, not responses
            rows.append(
                _row(data.judges[j], kind, est=float(est[0, j]), low=float(low[j]), high=float(high[j]),
                     n=int(den[0, j]), rule=rule)
            )  # fmt: skip
    skipped = tuple(k for k in KINDS if k not in kinds)
    table = pd.DataFrame(rows, columns=["judge", "kind", "effect", "low", "high", "n", "flagged", "verdict"])
    return JudgeBias(table=table, rule=rule, n_bootstrap=n_bootstrap, skipped=skipped)


def _row(judge: object, kind: str, *, est: float, low: float, high: float, n: int, rule: BiasRule) -> dict[str, object]:
    plus, minus, noun = KINDS[kind]
    flagged = False
    if n < rule.min_n or not np.isfinite(est):
        verdict = "not enough comparisons to tell"
    elif low > 0 and est >= rule.min_effect:
        verdict, flagged = plus, True
    elif high < 0 and est <= -rule.min_effect:
        verdict, flagged = minus, True
    elif -rule.negligible < low and high < rule.negligible:
        verdict = f"no sizeable {noun} bias" if kind != "self" else "no sizeable self-preference"
    else:
        verdict = "not enough comparisons to tell"
    return {"judge": judge, "kind": kind, "effect": est, "low": low, "high": high, "n": n, "flagged": flagged,
            "verdict": verdict}  # fmt: skip
