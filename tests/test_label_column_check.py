"""A label column that is really an id or a time is refused before anything is fitted (issue 26, item 4), and
gold files get the same column guessing as the answers file."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from fusion_core.data.answers import read_answers
from fusion_core.data.guess import guess_gold_columns, label_column_problem
from fusion_core.data.loading import read_gold
from fusion_core.data.uploads import build_responses, guess_label_column, label_problem, read_gold_upload
from fusion_core.errors import UserInputError


def _label_studio_like(n: int = 400, seed: int = 0) -> pd.DataFrame:
    """Alphabetical columns as a Label Studio CSV has them: no column named like a label."""
    rng = np.random.default_rng(seed)
    t0 = pd.Timestamp("2024-03-01T08:00:00")
    return pd.DataFrame(
        {
            "annotation_id": [str(1000 + i) for i in range(n)],
            "annotator": [f"w{i % 7}" for i in range(n)],
            "created_at": [(t0 + pd.Timedelta(seconds=int(s))).isoformat() for s in rng.integers(0, 10**7, n)],
            "id": [str(i // 4) for i in range(n)],
            "sentiment": rng.choice(["Positive", "Negative", "Neutral"], n).tolist(),
        }
    )


def test_timestamp_id_and_near_unique_label_columns_are_refused_with_what_to_do():
    df = _label_studio_like()
    stamp = label_problem(df, "created_at")
    assert stamp is not None and "dates or times" in stamp and "choose the column" in stamp
    ident = label_problem(df, "annotation_id")
    assert ident is not None and "every one of its 400 rows" in ident
    # 9,966 distinct labels in 10,000 rows (the reported case), written as plain numbers
    near = label_column_problem([str(i) for i in range(9_966)], 10_000, "x")
    assert near is not None and "9,966 distinct values in 10,000 rows" in near
    assert label_problem(df, "sentiment") is None
    # real label columns with many classes or numbers are not refused
    assert label_column_problem([str(i) for i in range(1, 6)], 10_000, "rating") is None
    assert label_column_problem([f"c{i}" for i in range(200)], 10_000, "class") is None
    scores = [f"{x:.3f}" for x in np.random.default_rng(1).uniform(0, 5, 500)]  # continuous ratings
    assert label_column_problem(sorted(set(scores)), 500, "score") is None
    with pytest.raises(UserInputError, match="dates or times"):
        build_responses(df, layout="long", task="id", worker="annotator", label="created_at")
    resp = build_responses(df, layout="long", task="id", worker="annotator", label="sentiment")
    assert resp.n_classes == 3


def test_first_guess_for_the_label_is_never_an_id_or_time_column():
    df = _label_studio_like()
    assert guess_label_column(df, taken=["id", "annotator"]) == "sentiment"


def test_cli_reader_refuses_a_timestamp_label_before_fitting(tmp_path):
    """Read as a plain table (a Label Studio export's own reader skips its metadata columns)."""
    df = _label_studio_like()
    path = tmp_path / "ls.csv"
    df.to_csv(path, index=False)
    with pytest.raises(UserInputError, match="label column 'created_at' holds dates or times"):
        read_answers(path, format="csv", task="id", worker="annotator", label="created_at")
    assert read_answers(
        path, format="csv", task="id", worker="annotator", label="sentiment"
    ).responses.n_responses == len(df)


def test_cli_fit_prints_one_line_and_exits(tmp_path):
    df = _label_studio_like(60)
    path = tmp_path / "ls.csv"
    df.to_csv(path, index=False)
    cmd = [sys.executable, "-m", "fusion_core.cli", "fit", str(path), "--input-format", "csv"]
    cmd += ["--task-col", "id"]
    cmd += ["--worker-col", "annotator", "--label-col", "created_at", "--out", str(tmp_path / "out")]
    got = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=120)
    assert got.returncode != 0
    lines = [x for x in got.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and "dates or times" in lines[0] and "--label-col" in lines[0], got.stderr


def test_gold_columns_guessed_mapped_or_refused():
    assert guess_gold_columns(["task", "truth"]) == ("task", "truth", None)
    assert guess_gold_columns(["item_id", "gold_label", "notes"])[:2] == ("item_id", "gold_label")
    assert guess_gold_columns(["doc", "verdict"])[:2] == ("doc", "verdict")  # two columns: task, truth
    assert guess_gold_columns(["a", "b", "c"], "b", "c")[:2] == ("b", "c")
    with pytest.raises(UserInputError, match="--gold-task-col"):
        guess_gold_columns(["a", "b", "truth"])
    with pytest.raises(UserInputError, match=r"several columns .* task id"):
        guess_gold_columns(["item", "task_id", "truth"])
    with pytest.raises(UserInputError, match="no column 'x'"):
        guess_gold_columns(["task", "truth"], truth="x")


def test_gold_upload_with_its_own_column_names(tmp_path):
    df = _label_studio_like()
    resp = build_responses(df, layout="long", task="id", worker="annotator", label="sentiment")
    data = b"item_id,gold_label,comment\n0,Positive,x\n1,Negative,y\n"
    gold = read_gold_upload("g.csv", data, resp, 10**6)
    assert gold.to_dict() == {"0": "Positive", "1": "Negative"}
    with pytest.raises(UserInputError, match="--gold-truth-col"):
        read_gold_upload("g.csv", b"item_id,answer_key,comment\n0,Positive,x\n", resp, 10**6)
    mapped = read_gold_upload("g.csv", b"a,b,c\n0,Neutral,Positive\n", resp, 10**6, task="a", truth="c")
    assert mapped.to_dict() == {"0": "Positive"}
    path = tmp_path / "g.csv"
    path.write_bytes(b"sentence,expected\ns1,A\n")
    assert read_gold(path).to_dict() == {"s1": "A"}
