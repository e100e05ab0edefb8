"""A panel of LLM judges with shared errors: independent judges plus a group (same base model, different
prompts) that follows its own, partly wrong, target labelling — the correlated-errors setting in which the
independent-annotator models fail (P14 §Cartel).  Each response carries a stated confidence, and each judge a
model name and prompt version (:class:`~fusion_core.data.judges.AnnotatorInfo`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from fusion_core.data.judges import AnnotatorInfo
from fusion_core.errors import UserInputError
from fusion_core.simulate.dawid_skene import Simulation


@dataclass
class JudgePanel(Simulation):
    """A judge panel: :class:`Simulation` plus the ``judges``' metadata (:class:`AnnotatorInfo`: model,
    prompt_version), ``group`` (bool Series by judge: in the correlated group), ``shared_error`` (bool Series by
    task: the group's target is wrong there) and each judge's ``accuracy`` (Series by judge)."""

    judges: AnnotatorInfo
    group: pd.Series
    shared_error: pd.Series
    accuracy: pd.Series


def _wrong(truth: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """A label different from ``truth``, uniformly among the other K − 1."""
    return (truth + rng.integers(1, k, size=len(truth))) % k


def _metadata(judges: pd.Index, in_group: np.ndarray) -> AnnotatorInfo:
    """Group members share base model "model-a" with prompt versions v1, v2, …; the others use one model each."""
    model = np.empty(len(judges), dtype=object)
    prompt = np.full(len(judges), "v1", dtype=object)
    model[in_group] = "model-a"
    prompt[in_group] = [f"v{v + 1}" for v in range(int(in_group.sum()))]
    model[~in_group] = [f"model-{chr(ord('b') + v)}" for v in range(int((~in_group).sum()))]
    return AnnotatorInfo.from_frame(pd.DataFrame({"worker": judges, "model": model, "prompt_version": prompt}))


def judge_panel(
    n_items: int = 600,
    n_judges: int = 8,
    n_correlated: int = 3,
    *,
    n_classes: int = 2,
    accuracy: tuple[float, float] = (0.7, 0.85),
    group_accuracy: tuple[float, float] = (0.85, 0.95),
    shared_error_rate: float = 0.3,
    labels: Sequence[Any] | None = None,
    seed: int | None = 0,
) -> JudgePanel:
    """Simulate a judge panel where ``n_correlated`` of ``n_judges`` judges share errors.

    Independent judges report the truth with accuracy ~ U(``accuracy``) (errors spread evenly).  The correlated
    group follows a shared target that differs from the truth on ``shared_error_rate`` of the items; each member
    reports the target with accuracy ~ U(``group_accuracy``), so on those items the members are wrong together.
    Every judge labels every item.  Confidence: independent judges are roughly calibrated (higher when right),
    group members are over-confident (0.85–1 whatever they say).  ``responses`` has columns task, worker, label,
    confidence; typed fields: ``judges`` (:class:`AnnotatorInfo`: model, prompt_version), ``group`` (bool Series by
    worker), ``shared_error`` (bool Series by task: the target is wrong there).  The default labels are
    ``"fail"``/``"pass"`` for two classes, else 0 … K − 1.

    Examples
    --------
    >>> sim = judge_panel(n_items=100, n_judges=8, n_correlated=3, seed=0)
    >>> sim.responses.shape, int(sim.group.sum())
    ((800, 4), 3)
    >>> sim.judges.table["model"].value_counts().iloc[:2].to_dict()
    {'model-a': 3, 'model-b': 1}
    """
    if n_judges < 3 or not 2 <= n_correlated < n_judges or n_items < 1 or n_classes < 2:
        raise UserInputError("a judge panel needs at least 3 judges, a correlated group of 2 or more, and 1 item.")
    if not 0.0 <= shared_error_rate <= 1.0:
        raise UserInputError("shared_error_rate must be between 0 and 1.")
    rng = np.random.default_rng(seed)
    k = n_classes
    truth = rng.integers(0, k, size=n_items)
    shared = rng.random(n_items) < shared_error_rate
    target = np.where(shared, _wrong(truth, k, rng), truth)
    in_group = np.zeros(n_judges, dtype=bool)
    in_group[rng.choice(n_judges, size=n_correlated, replace=False)] = True
    acc = np.where(in_group, rng.uniform(*group_accuracy, size=n_judges), rng.uniform(*accuracy, size=n_judges))
    item = np.tile(np.arange(n_items), n_judges)
    judge = np.repeat(np.arange(n_judges), n_items)
    aim = np.where(in_group[judge], target[item], truth[item])
    right = rng.random(len(item)) < acc[judge]
    reported = np.where(right, aim, _wrong(aim, k, rng))
    correct = reported == truth[item]
    calibrated = np.clip(np.where(correct, 0.8, 0.6) + 0.1 * rng.standard_normal(len(item)), 0.5, 1.0)
    confidence = np.where(in_group[judge], rng.uniform(0.85, 1.0, size=len(item)), calibrated)

    values = pd.Index(list(labels) if labels is not None else (["fail", "pass"] if k == 2 else list(range(k))))
    if len(values) != k:
        raise UserInputError(f"labels must have {k} values.")
    tasks = pd.Index([f"item{i:04d}" for i in range(n_items)], name="task")
    judges = pd.Index([f"judge{j + 1}" for j in range(n_judges)], name="worker")
    return JudgePanel(
        responses=pd.DataFrame(
            {
                "task": tasks.take(item),
                "worker": judges.take(judge),
                "label": values.take(reported),
                "confidence": confidence,
            }
        ),
        truth=pd.Series(values.take(truth), index=tasks, name="truth"),
        confusion=None,
        class_prior=np.full(k, 1.0 / k),
        workers=judges,
        classes=values,
        judges=_metadata(judges, in_group),
        group=pd.Series(in_group, index=judges, name="group"),
        shared_error=pd.Series(shared, index=tasks, name="shared_error"),
        accuracy=pd.Series(acc, index=judges, name="accuracy"),
    )
