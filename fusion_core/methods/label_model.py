"""A label model for weak-supervision sources (labelling functions) that treats abstentions as information.

Model: a latent-class model (Dawid & Skene 1979) in which **abstaining is one more response**: source j, given
true class k, votes label l with probability ``G_j[k, l]`` or abstains with ``G_j[k, ∅] = 1 − Σ_l G_j[k, l]``
(class-conditional coverage and accuracy, as the generative label models of data programming, Ratner et al.
NeurIPS 2016, with the abstention kept in the likelihood).  A one-sided source (votes "spam" or abstains) is then
identified: its abstentions on ham items are evidence too, so the fit does not collapse to a constant labelling
the way plain Dawid–Skene does when abstentions were dropped (youtube_lf: DS 0.452).

How abstentions are passed (parameter ``abstentions``):

* ``"implicit"`` (default): every (item, source) pair **without a response** is an abstention — right for
  ensembles and labelling functions where every source sees every item and the abstentions were dropped
  (``../shared/datasets/youtube_lf``).  Not for crowds, where a missing response means "not asked".
* ``"explicit"``: only responses whose label is ``abstain_label`` (e.g. ``-1`` or ``"abstain"``) are
  abstentions; missing pairs are missing at random.  ``abstain_label`` also works with ``"implicit"``.

The abstain label, when given, is never a latent class: its column of ``probas_`` is 0.

E-step (with the sparse count matrix ``A`` and the 0/1 presence matrix ``P`` items × sources):
``log q_ik = log π_k + (A @ log G_vote)_ik + Σ_j log G_j[k, ∅] − (P @ log G_∅)_ik``; M-step: expected vote counts
``Aᵀ q`` and expected abstentions ``Σ_i q_ik − (Pᵀ q)_jk``, plus ``smoothing`` pseudo-counts (MAP).  Two
sparse–dense products per iteration, no loop over responses.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple

import numpy as np
import scipy.sparse as sp

from fusion_core.data.responses import Responses
from fusion_core.errors import UserInputError
from fusion_core.methods.base import Aggregator, Gold, clamp_gold, initial_posterior, posterior_terms
from fusion_core.methods.dawid_skene.core import expected_counts
from fusion_core.methods.em import EMSettings, EStep, run_em
from fusion_core.methods.numerics import safe_log
from fusion_core.methods.params import Bool, Choice, Float, Int, Object, Param
from fusion_core.methods.registry import register
from fusion_core.methods.results import AnnotatorColumn, Fit

EXCLUDED = -1e12  # log prior of the abstain label as a latent class (never the true class)


class LabelModelState(NamedTuple):
    """``votes`` (sources × true × reported, including an explicit abstain label's column), ``abstain`` (sources
    × true: implicit abstention probability; 0 when abstentions are explicit) and ``class_prior``."""

    votes: np.ndarray
    abstain: np.ndarray
    class_prior: np.ndarray


def _check_abstain_label(value: Any) -> Any:
    if value is None or (isinstance(value, (str, int, float, np.integer, np.floating)) and not isinstance(value, bool)):
        return value
    raise ValueError("a single label value (for example -1 or 'abstain'), or None")


@dataclass
class LabelModel:
    """The abstention-aware latent-class model for the EM driver (see the module docstring)."""

    resp: Responses
    implicit: bool = True
    abstain_code: int | None = None
    smoothing: float = 0.1
    estimate_priors: bool = True
    gold: Gold | None = None

    def __post_init__(self) -> None:
        r = self.resp
        pres = sp.csr_matrix((np.ones(r.n_responses), (r.item, r.worker)), shape=(r.n_items, r.n_workers))
        pres.sum_duplicates()
        pres.data[:] = 1.0
        self.presence = pres
        self.presence_t = pres.T.tocsr()

    def e_step(self, state: LabelModelState, temperature: float = 1.0) -> EStep:
        r, k = self.resp, self.resp.n_classes
        log_v = safe_log(state.votes).transpose(0, 2, 1).reshape(r.n_workers * k, k)
        joint = np.asarray(r.counts @ log_v) + safe_log(state.class_prior)[None, :]
        if self.implicit:
            log_a = safe_log(state.abstain)  # W × K
            joint += log_a.sum(axis=0)[None, :] - np.asarray(self.presence @ log_a)
        if self.abstain_code is not None:
            joint[:, self.abstain_code] = EXCLUDED
        post, terms = posterior_terms(joint, self.gold, temperature)
        return EStep(post, float(terms.sum()) + self.log_prior(state), log_joint=joint)

    def log_prior(self, state: LabelModelState) -> float:
        """The MAP objective's extra term: ``smoothing`` × Σ log of every modelled probability."""
        s = self.smoothing
        if s <= 0:
            return 0.0
        total = safe_log(state.votes).sum()
        if self.implicit:
            total += safe_log(state.abstain).sum()
        return float(s * total)

    def m_step(self, stats: np.ndarray) -> LabelModelState:
        r, k, s = self.resp, self.resp.n_classes, self.smoothing
        votes = expected_counts(r, stats) + s  # W × true × reported
        if self.implicit:
            abstain = stats.sum(axis=0)[None, :] - np.asarray(self.presence_t @ stats)
            abstain = np.maximum(abstain, 0.0) + s
        else:
            abstain = np.zeros((r.n_workers, k))
        total = votes.sum(axis=2) + abstain
        prior = stats.sum(axis=0) + 1e-12 if self.estimate_priors else np.ones(k)
        if self.abstain_code is not None:
            prior[self.abstain_code] = 0.0
        return LabelModelState(votes / total[:, :, None], abstain / total, prior / prior.sum())

    def start(self, posterior: np.ndarray) -> LabelModelState:
        q = np.array(posterior, dtype=float)
        if self.abstain_code is not None:  # majority vote without the abstain votes
            q[:, self.abstain_code] = 0.0
            tot = q.sum(axis=1, keepdims=True)
            q = np.where(tot > 0, q / np.where(tot > 0, tot, 1.0), 1.0 / (q.shape[1] - 1))
            q[:, self.abstain_code] = 0.0
        return self.m_step(clamp_gold(q, self.gold))

    def permute(self, state: LabelModelState, source: np.ndarray) -> LabelModelState:
        """Latent class j of the new state is class ``source[j]`` of ``state`` (reported labels unchanged)."""
        return LabelModelState(state.votes[:, source, :], state.abstain[:, source], state.class_prior[source])


@register(
    "lf",
    title="Label model for labelling functions (abstentions count)",
    summary="Latent-class label model for weak-supervision sources: per-source, per-class coverage and "
    "accuracy, with abstentions (missing responses, or an abstain label) as informative responses.",
    family="label_model",
    reference="Dawid & Skene 1979 with abstention as a response; generative label model as in Ratner et al., "
    "'Data Programming', NeurIPS 2016.",
)
class LabellingFunctionModel(Aggregator):
    """Label model for labelling functions / classifier ensembles in which abstaining carries information.

    Each source j has, for every true class k, a probability of voting each label and of abstaining
    (``G_j[k, ∅]``).  With ``abstentions="implicit"`` every (item, source) pair without a response counts as an
    abstention (every source saw every item); with ``"explicit"`` only responses equal to ``abstain_label`` do.
    ``confusion_[j]`` is the vote distribution given that j voted (rows sum to 1); per source
    ``result_.annotator_columns`` has ``coverage`` (share of items it voted on) and ``accuracy_when_voting``.
    Gold labels are clamped.  See ``docs/PEER_MODELS.md`` for how to pass abstentions.

    Examples
    --------
    >>> import pandas as pd
    >>> rows = [(i, "kw", "spam") for i in range(0, 40, 2)] + [(i, "short", "ham") for i in range(1, 40, 2)]
    >>> rows += [(i, "link", "spam") for i in range(0, 40, 4)] + [(i, "polite", "ham") for i in range(1, 40, 4)]
    >>> df = pd.DataFrame(rows, columns=["task", "worker", "label"])
    >>> lm = LabellingFunctionModel().fit(df)
    >>> lm.labels_.loc[[0, 1]].tolist()
    ['spam', 'ham']
    """

    handles_one_sided = True
    params: ClassVar[dict[str, Param]] = {
        "abstentions": Choice(
            "implicit",
            ("implicit", "explicit"),
            help="'implicit': a missing (item, source) response is an abstention (every source saw every item); "
            "'explicit': only responses equal to abstain_label are abstentions.",
        ),
        "abstain_label": Object(
            None,
            help="The label value that means 'abstained' (e.g. -1), or None.",
            text="a single label value (for example -1 or 'abstain'), or None",
            check=_check_abstain_label,
            advanced=False,
        ),
        "smoothing": Float(0.1, low=0.0, high=100.0, help="Pseudo-count added to every vote and abstention count."),
        "estimate_priors": Bool(True, help="Estimate class priors; off = equal priors."),
        "tol": Float(1e-7, low=0.0, high=1.0, help="Stop when the relative change of the objective is below tol."),
        "max_iter": Int(500, low=1, high=100_000, help="Maximum EM iterations."),
    }

    def _fit(self, responses: Responses, *, gold: Gold | None, graph: Any, context: Any) -> Fit:
        code = None
        if self.abstain_label is not None:
            found = responses.classes.get_indexer([self.abstain_label])
            code = int(found[0]) if found[0] >= 0 else None
        elif self.abstentions == "explicit":
            raise UserInputError(
                "abstentions='explicit' needs abstain_label, the label value that means 'abstained' (e.g. -1)."
            )
        if responses.n_classes - (code is not None) < 2:
            raise UserInputError("the label model needs at least 2 labels besides the abstain label.")
        model = LabelModel(
            responses, self.abstentions == "implicit", code, float(self.smoothing), bool(self.estimate_priors), gold
        )
        settings = EMSettings(tol=float(self.tol), max_iter=int(self.max_iter), name="Label model EM")
        run = run_em(model, model.start(initial_posterior(responses, "mv")), settings)
        st = run.state
        conf = st.votes / st.votes.sum(axis=2, keepdims=True)
        counts = expected_counts(responses, run.posterior)
        n = counts.sum(axis=(1, 2))
        correct = np.einsum("wkk->w", counts)
        if code is not None:
            n = n - counts[:, :, code].sum(axis=1)
        accuracy = np.where(n > 0, correct / np.maximum(n, 1e-300), np.nan)
        coverage = model.presence.sum(axis=0).A1 / max(responses.n_items, 1)
        return run.to_fit(
            confusion=conf,
            class_prior=st.class_prior,
            annotator_columns=(
                AnnotatorColumn("coverage", "coverage", coverage, "Share of items this source gave a response on."),
                AnnotatorColumn(
                    "accuracy_when_voting",
                    "accuracy when voting",
                    accuracy,
                    "Expected share of this source's (non-abstain) votes that are correct.",
                ),
            ),
        )
