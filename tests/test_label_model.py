"""Label model for labelling functions: abstentions as responses (implicit and explicit), youtube_lf target."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from conftest import load_dataset

from fusion_core.data.responses import Responses
from fusion_core.methods import create
from fusion_core.methods.label_model import LabelModel, LabelModelState
from fusion_core.metrics import accuracy


@pytest.mark.xfail(
    strict=True,
    reason="issue 14 target youtube_lf ≥ 0.85 not met: the model's maximum-likelihood fit gives 0.844 (unique "
    "optimum from every start; 0.932 with the parameters fitted on gold), see docs/PEER_MODELS.md",
)
def test_youtube_lf_reaches_the_issue_target():
    answers, truth = load_dataset("youtube_lf")
    assert accuracy(create("lf").fit(answers).labels_, truth) >= 0.85


def test_youtube_lf_does_not_collapse():
    """Latent-class methods collapse to a constant labelling here (DS 0.452); majority vote gets 0.800."""
    answers, truth = load_dataset("youtube_lf")
    lm = create("lf").fit(answers)
    assert accuracy(lm.labels_, truth) >= 0.84
    assert lm.labels_.value_counts(normalize=True).min() > 0.3
    assert not any("always give the same label" in w for w in lm.warnings_)


def test_explicit_abstain_label_equals_implicit_abstentions():
    """Writing every missing (item, source) pair as the abstain label gives the same fit as the implicit rule."""
    answers, _ = load_dataset("youtube_lf")
    full = pd.MultiIndex.from_product([answers.task.unique(), answers.worker.unique()], names=["task", "worker"])
    filled = answers.set_index(["task", "worker"]).reindex(full).fillna({"label": -1}).reset_index()
    filled["label"] = filled["label"].astype(int)
    implicit = create("lf").fit(answers)
    explicit = create("lf", abstentions="explicit", abstain_label=-1).fit(filled)
    probs = explicit.probas_.reindex(implicit.probas_.index)
    assert (probs[-1] == 0).all()
    assert np.allclose(probs[[0, 1]].to_numpy(), implicit.probas_.to_numpy(), atol=1e-6)


def test_explicit_needs_an_abstain_label():
    from fusion_core.errors import UserInputError

    df = pd.DataFrame({"task": [0, 0, 1], "worker": ["a", "b", "a"], "label": [0, 1, 1]})
    with pytest.raises(UserInputError, match="abstain_label"):
        create("lf", abstentions="explicit").fit(df)


def test_one_e_step_by_hand():
    """Two sources, two items; source b abstains (implicitly) on item 1: its abstention enters the likelihood."""
    df = pd.DataFrame({"task": [0, 0, 1], "worker": ["a", "b", "a"], "label": [1, 1, 0]})
    resp = Responses.from_frame(df)
    votes = np.array([[[0.6, 0.1], [0.1, 0.7]], [[0.0, 0.1], [0.0, 0.5]]])  # source × true × reported
    abstain = 1 - votes.sum(axis=2)  # a: (0.3, 0.2), b: (0.9, 0.5)
    prior = np.array([0.4, 0.6])
    e = LabelModel(resp, smoothing=0.0).e_step(LabelModelState(votes, abstain, prior))
    like1 = prior * np.array([0.6, 0.1]) * abstain[1]  # item 1: a says 0, b abstains
    assert e.posterior[list(resp.items).index(1)] == pytest.approx(like1 / like1.sum())
    like0 = prior * np.array([0.1, 0.7]) * np.array([0.1, 0.5])  # item 0: a says 1, b says 1
    assert e.log_likelihood == pytest.approx(np.log(like0.sum()) + np.log(like1.sum()))
