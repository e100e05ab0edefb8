"""Agreement on span labels (NER-style): each annotator's spans against the aggregated spans, and a
chance-corrected agreement over tokens.

* **Per annotator**: precision (share of the annotator's spans found in the reference), recall (share of the
  reference spans of the tasks they annotated that they marked) and F1, both *exact* (same start, end and label)
  and *overlap* (same label and at least one shared character) — the exact/partial matching of the MUC and
  SemEval-2013 NER evaluations (Chinchor & Sundheim 1993; Segura-Bedmar et al. 2013).  With no reference given
  it is the *majority spans*: the exact spans marked by more than half of a task's annotators.
* **Chance-corrected**: Krippendorff's α (nominal) over tokens, each token's value being the entity type the
  annotator gave it (``O`` outside spans) — token-level α as in Artstein & Poesio (2008, §4.4); computed by the
  one implementation of α, :func:`fusion_core.diagnostics.krippendorff.krippendorff`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from fusion_core.data.spans import SpanTable
from fusion_core.diagnostics.krippendorff import krippendorff
from fusion_core.errors import UserInputError
from fusion_core.methods.results import FitResult

KEY = ["task", "start", "end", "label"]
COLUMNS = {
    "spans": "spans marked",
    "exact_precision": "exact precision",
    "exact_recall": "exact recall",
    "exact_f1": "exact F1",
    "overlap_precision": "overlap precision",
    "overlap_recall": "overlap recall",
    "overlap_f1": "overlap F1",
}


@dataclass(frozen=True)
class SpanAgreement:
    """``table``: one row per annotator (index: their id as written) with the columns of :data:`COLUMNS`;
    ``token_alpha``: Krippendorff's α over tokens; ``reference``: what the spans were compared with and
    ``n_reference`` its number of spans."""

    table: pd.DataFrame
    token_alpha: float
    reference: str
    n_reference: int

    def frame(self) -> pd.DataFrame:
        """The table with plain column titles (for the app and the report)."""
        return self.table.rename(columns=COLUMNS)


def majority_spans(spans: SpanTable) -> pd.DataFrame:
    """Spans (task, start, end, label) marked exactly alike by more than half of the task's annotators."""
    per_task = spans.annotations.groupby("task").size()
    votes = spans.spans.drop_duplicates(subset=["worker", *KEY]).groupby(KEY).size().rename("votes").reset_index()
    need = per_task.reindex(votes["task"]).to_numpy()
    return votes.loc[votes["votes"].to_numpy() * 2 > need, KEY].reset_index(drop=True)


def _f1(p: np.ndarray, r: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(p + r > 0, 2 * p * r / np.where(p + r > 0, p + r, 1), 0.0)


def _ratio(num: pd.Series, den: pd.Series) -> np.ndarray:
    d = den.to_numpy(dtype=float)
    return np.where(d > 0, num.to_numpy(dtype=float) / np.where(d > 0, d, 1), np.nan)


def token_alpha(spans: SpanTable) -> float:
    """Krippendorff's α (nominal) over tokens: the entity type each annotator gave each token (``O`` outside)."""
    tokens = spans.token_table()
    tokens["label"] = tokens["label"].astype(str).str.replace(r"^[BI]-", "", regex=True)
    if tokens["label"].nunique() < 2:
        return 1.0 if len(tokens) else float("nan")
    return float(krippendorff(tokens[["task", "worker", "label"]], n_bootstrap=0).value)


def span_agreement(
    spans: SpanTable, reference: pd.DataFrame | None = None, *, reference_name: str | None = None
) -> SpanAgreement:
    """Per-annotator span precision, recall, F1 (exact and overlap) against ``reference`` (task, start, end,
    label; default :func:`majority_spans`) and the token-level α (module docstring)."""
    if spans.n_annotations == 0:
        raise UserInputError("span agreement needs at least one annotation with spans.")
    ref = (majority_spans(spans) if reference is None else reference[KEY]).drop_duplicates().reset_index(drop=True)
    name = reference_name or ("majority spans" if reference is None else "reference spans")
    ref = ref.assign(task=ref["task"].astype(str), ref_id=np.arange(len(ref)))
    pred = spans.spans.drop_duplicates(subset=["worker", *KEY]).reset_index(drop=True)
    pred = pred.assign(task=pred["task"].astype(str), pred_id=np.arange(len(pred)))
    ann = spans.annotations.assign(task=spans.annotations["task"].astype(str))
    workers = pd.Index(pd.unique(ann["worker"]), name="annotator")
    n_pred = pred.groupby("worker").size().reindex(workers, fill_value=0)
    ref_seen = ann.merge(ref, on="task")  # the reference spans of the tasks each annotator did
    n_ref = ref_seen.groupby("worker").size().reindex(workers, fill_value=0)
    exact = pred.merge(ref, on=KEY)
    n_exact = exact.groupby("worker").size().reindex(workers, fill_value=0)
    pairs = pred.merge(ref, on=["task", "label"], suffixes=("", "_ref"))
    pairs = pairs[(pairs["start"] < pairs["end_ref"]) & (pairs["start_ref"] < pairs["end"])]
    hit_pred = pairs.drop_duplicates("pred_id").groupby("worker").size().reindex(workers, fill_value=0)
    hit_ref = pairs.drop_duplicates(["worker", "ref_id"]).groupby("worker").size().reindex(workers, fill_value=0)
    ep, er = _ratio(n_exact, n_pred), _ratio(n_exact, n_ref)
    op, orc = _ratio(hit_pred, n_pred), _ratio(hit_ref, n_ref)
    table = pd.DataFrame(
        {
            "spans": n_pred.to_numpy(),
            "exact_precision": ep,
            "exact_recall": er,
            "exact_f1": _f1(np.nan_to_num(ep), np.nan_to_num(er)),
            "overlap_precision": op,
            "overlap_recall": orc,
            "overlap_f1": _f1(np.nan_to_num(op), np.nan_to_num(orc)),
        },
        index=workers,
    )
    return SpanAgreement(table, token_alpha(spans), name, len(ref))


def span_agreement_for(spans: SpanTable, fit: FitResult | None = None, method: str | None = None) -> SpanAgreement:
    """Span agreement against a sequence method's aggregated spans (its token labels decoded back into spans)
    when ``fit`` labelled the tokens of these spans, else against the majority spans."""
    if fit is not None and len(fit.items) and all("/" in str(i) for i in fit.items[:50]):
        tags = pd.Series(fit.classes.take(fit.label_codes), index=[str(i) for i in fit.items])
        if tags.astype(str).str.match(r"^(O|[BI]-.+)$").all():
            return span_agreement(
                spans, spans.spans_from_tags(tags), reference_name=f"{method or 'the method'}'s spans"
            )
    return span_agreement(spans)


__all__ = ["COLUMNS", "SpanAgreement", "majority_spans", "span_agreement", "span_agreement_for", "token_alpha"]
