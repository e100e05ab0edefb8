"""Span agreement on a hand-computed Label Studio NER export (3 annotators, 2 sentences), hmm-em on its token
sequences, and the results sent back (Label Studio predictions, verdicts with the platform's ids)."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fusion_core.data.answers import read_answers
from fusion_core.data.formats.dispatch import read_input
from fusion_core.data.spans import SpanTable
from fusion_core.diagnostics.span_agreement import majority_spans, span_agreement, span_agreement_for
from fusion_core.methods import create
from fusion_core.report.tool_files import label_studio_predictions, resend_table

FIX = Path(__file__).resolve().parent / "fixtures" / "formats"
NER = FIX / "label_studio_ner.json"


@pytest.fixture(scope="module")
def spans() -> SpanTable:
    return read_input(NER).export.spans


def test_majority_spans_by_hand(spans):
    # s1 "Alice met Bob in Paris": Alice/PER ×3, Bob/PER ×2 (annotators 1, 2), Paris/LOC ×3, "Alice met"/PER ×1;
    # s2 "Carol flew to New York": Carol/PER ×3, "New York"/LOC ×2 (1 and 3; 3's later annotation), New/LOC ×1.
    got = sorted(majority_spans(spans).itertuples(index=False, name=None))
    assert got == [
        ("1", 0, 5, "PER"),
        ("1", 10, 13, "PER"),
        ("1", 17, 22, "LOC"),
        ("2", 0, 5, "PER"),
        ("2", 14, 22, "LOC"),
    ]


def test_span_agreement_matches_the_hand_computed_case(spans):
    a = span_agreement(spans)
    t = a.table
    # exact: 1 matches 5/5; 2 matches 4 of 5 ("New" ≠ "New York"); 3 marks 4 spans, 3 exact ("Alice met" is not),
    # recall 3/5 → F1 = 2·0.75·0.6/1.35 = 2/3.  Overlap: 2's "New" overlaps "New York" (P = R = 1); 3's "Alice met"
    # overlaps "Alice" (P = 4/4), but 3 missed "Bob" (R = 4/5, F1 = 8/9).
    expected = {
        "1": (5, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0),
        "2": (5, 0.8, 0.8, 0.8, 1.0, 1.0, 1.0),
        "3": (4, 0.75, 0.6, 2 / 3, 1.0, 0.8, 8 / 9),
    }
    for worker, row in expected.items():
        np.testing.assert_allclose(t.loc[worker].to_numpy(dtype=float), row, atol=1e-12)
    # token α (nominal; values PER/LOC/O per token, 10 tokens × 3 annotators): disagreeing coincidences 6 of 30,
    # n_PER = 9, n_O = 13, n_LOC = 8 → D_o = 6/30, D_e = (900 − 314)/870, α = 1 − D_o/D_e = 206/293.
    assert a.token_alpha == pytest.approx(206 / 293, abs=1e-12)
    assert a.n_reference == 5 and a.reference == "majority spans"


def test_tags_decode_back_to_each_annotators_spans(spans):
    tokens = spans.token_table()
    for worker, mine in tokens.groupby("worker"):
        decoded = spans.spans_from_tags(pd.Series(mine["label"].to_numpy(), index=mine["task"].to_numpy()))
        marked = spans.spans[spans.spans["worker"] == worker][["task", "start", "end", "label"]]
        assert sorted(decoded.itertuples(index=False, name=None)) == sorted(marked.itertuples(index=False, name=None))


def test_hmm_em_runs_on_the_ner_export_and_feeds_span_agreement(spans):
    answers = read_answers(NER)
    assert answers.responses.has_sequences and answers.responses.n_items == 10 and answers.responses.n_workers == 3
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # 10 tokens: the moment start falls back to majority vote, with a warning
        est = create("hmm-em", random_state=0).fit(answers.responses)
    tags = est.labels_.astype(str)
    assert set(tags) <= set(answers.responses.classes.astype(str))
    a = span_agreement_for(spans, est.result_, "hmm-em")
    assert a.reference == "hmm-em's spans"
    ref = spans.spans_from_tags(tags)
    assert a.n_reference == len(ref)
    # every annotator's exact precision is the share of their spans found among hmm-em's decoded spans
    keys = set(ref.itertuples(index=False, name=None))
    for worker, mine in spans.spans.groupby("worker"):
        hits = sum(
            (t, s, e, lab) in keys for t, s, e, lab in mine[["task", "start", "end", "label"]].itertuples(index=False)
        )
        assert a.table.loc[worker, "exact_precision"] == pytest.approx(hits / len(mine))


def test_label_studio_predictions_round_trip(tmp_path):
    path = FIX / "label_studio.json"
    answers = read_answers(path)
    est = create("ds", random_state=0).fit(answers.responses)
    preds = label_studio_predictions(est.result_, answers.control)
    labels = est.labels_
    assert [p["task"] for p in preds] == [101, 102, 103, 105]  # JSON numbers, as Label Studio wrote them
    for p in preds:
        (res,) = p["result"]
        assert (res["from_name"], res["to_name"], res["type"]) == ("sentiment", "text", "choices")
        assert res["value"]["choices"] == [labels[str(p["task"])]]
        assert 0.0 < p["score"] <= 1.0
    out = tmp_path / "preds.json"
    out.write_text(json.dumps(preds))
    assert json.loads(out.read_text()) == preds


def test_span_predictions_carry_the_aggregated_spans(spans):
    answers = read_answers(NER)
    est = create("mv").fit(answers.responses)
    preds = label_studio_predictions(est.result_, answers.control, spans=answers.spans)
    first = preds[0]
    assert first["task"] == 1
    got = [
        (r["value"]["start"], r["value"]["end"], r["value"]["labels"][0], r["value"]["text"]) for r in first["result"]
    ]
    assert got == [(0, 5, "PER", "Alice"), (10, 13, "PER", "Bob"), (17, 22, "LOC", "Paris")]


def test_resend_hook_names_the_platforms_item_column():
    assert list(resend_table(["3X4Y0A"], "mturk").columns) == ["HITId"]
    assert list(resend_table(["00011b"], "toloka").columns) == ["ASSIGNMENT:task_id"]
