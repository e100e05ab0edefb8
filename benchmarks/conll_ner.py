"""Sequence-aware aggregation on CoNLL-2003 NER crowd labels (Traganitis & Giannakis §6.1.2, Table I, NER row).

47 AMT annotators, 78,107 tokens in 5,916 sentences, 9 BIO classes.  For MV, DS (EM from MV, the package's
``ds``), MM-DS (EM from moment matching — the paper's "DS" baseline), ``hmm-mm`` (Alg. 2), ``hmm-em``
(Alg. 2 + Alg. 1), ``hmm-mv`` (MV + Alg. 1) and two [OURS] variants (hmm-em started from the better of
MM / MV by likelihood; hmm-mv with p0 re-estimated) it prints token accuracy, pooled macro-F1, the paper's
per-sentence averaged macro-F (P8 zero-division policy) and entity-level precision / recall / F1
(exact BIO span and type, conlleval style).

Run: ``python benchmarks/conll_ner.py``.
"""

from __future__ import annotations

import time
import warnings
from pathlib import Path

import pandas as pd

DATASET = Path(__file__).resolve().parents[1].parent / "shared" / "datasets" / "conll_ner"
METHODS = (
    ("mv", "mv", {}),
    ("ds", "ds", {}),
    ("mm-ds", "mm-ds", {}),
    ("hmm-mm", "hmm-mm", {}),
    ("hmm-em", "hmm-em", {}),
    ("hmm-mv", "hmm-mv", {}),
    ("hmm-em(init=best)", "hmm-em", {"init": "best"}),
    ("hmm-mv(p0=estimate)", "hmm-mv", {"start_prob": "estimate"}),
)


def main() -> None:
    from fusion_core.data.responses import Responses
    from fusion_core.methods import create
    from fusion_core.metrics import accuracy, entity_scores, macro_f1, per_sequence_f1

    if not DATASET.is_dir():
        print(f"conll_ner not found under {DATASET}")
        return
    answers = pd.read_csv(DATASET / "answers.csv")
    truth = pd.read_csv(DATASET / "truth.csv").set_index("task")["truth"]
    resp = Responses.from_frame(answers.drop(columns=["token"]))
    seq = pd.Series(resp.sequences.take(resp.sequence), index=resp.items)
    pos = pd.Series(resp.position, index=resp.items)
    print(
        f"conll_ner: {resp.n_items:,} tokens, {len(resp.sequences):,} sentences, {resp.n_workers} annotators, "
        f"{resp.n_classes} classes, {resp.n_responses:,} responses"
    )
    rows = []
    for label, name, params in METHODS:
        t0 = time.perf_counter()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            est = create(name, **params).fit(resp)
        seconds = time.perf_counter() - t0
        ent = entity_scores(est.labels_, truth, seq, pos)
        rows.append(
            {
                "method": label,
                "token_acc": accuracy(est.labels_, truth),
                "macro_F": macro_f1(est.labels_, truth),
                "per_sentence_F": per_sequence_f1(est.labels_, truth, seq),
                "entity_P": ent["precision"],
                "entity_R": ent["recall"],
                "entity_F1": ent["f1"],
                "iters": est.n_iter_,
                "seconds": seconds,
                "warnings": len(caught),
            }
        )
    table = pd.DataFrame(rows).set_index("method")
    pd.set_option("display.width", 200)
    print(table.round(4).to_string())
    h = table.loc["hmm-em"]
    for base in ("ds", "mm-ds"):
        b = table.loc[base]
        print(
            f"hmm-em vs {base}: macro-F {h.macro_F - b.macro_F:+.4f}, per-sentence F {h.per_sentence_F - b.per_sentence_F:+.4f}, "
            f"entity F1 {h.entity_F1 - b.entity_F1:+.4f}"
        )
    print("paper (Table I, NER, per-sentence F): MV 0.68, DS 0.71, Alg. 2 0.62, Alg. 1 + Alg. 2 0.72, MV + Alg. 1 0.70")


if __name__ == "__main__":
    main()
