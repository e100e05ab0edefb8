"""Loading and validation: formats, column mapping, policies, and one clear message per bad input."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pytest

from fusion_core import Responses, UserInputError
from fusion_core.data import load_responses, read_context, read_gold, read_table

LONG = pd.DataFrame(
    {"task": [1, 1, 2, 2, 3, 3], "worker": ["a", "b", "a", "b", "a", "c"], "label": ["x", "y", "y", "y", "x", "x"]}
)


def _bytes(df: pd.DataFrame, fmt: str) -> bytes:
    if fmt == "csv":
        return df.to_csv(index=False).encode()
    if fmt == "tsv":
        return df.to_csv(index=False, sep="\t").encode()
    if fmt == "jsonl":
        return df.to_json(orient="records", lines=True).encode()
    buf = io.BytesIO()
    df.to_parquet(buf, index=False)
    return buf.getvalue()


@pytest.mark.parametrize("fmt", ["csv", "tsv", "jsonl", "parquet"])
def test_every_format_round_trips(fmt, tmp_path):
    path = tmp_path / f"answers.{fmt}"
    path.write_bytes(_bytes(LONG, fmt))
    resp = load_responses(path)
    assert resp.n_responses == 6 and resp.n_items == 3 and resp.n_workers == 3
    assert list(resp.classes) == ["x", "y"]
    back = resp.to_frame().sort_values(["task", "worker"]).reset_index(drop=True)
    as_written = LONG.astype(str).sort_values(["task", "worker"]).reset_index(drop=True)  # files are read as text
    pd.testing.assert_frame_equal(back, as_written, check_dtype=False)
    # from bytes and from a file-like object with a name, as uploads arrive
    assert load_responses(_bytes(LONG, fmt), name=f"up.{fmt}").n_responses == 6
    f = io.BytesIO(_bytes(LONG, fmt))
    f.name = f"up.{fmt}"
    assert load_responses(f).n_responses == 6


def test_column_mapping_and_wide_layout():
    renamed = LONG.rename(columns={"task": "item", "worker": "annotator", "label": "answer"})
    resp = load_responses(renamed, task="item", worker="annotator", label="answer")
    assert resp.n_responses == 6
    wide = pd.DataFrame({"item": [1, 2, 3], "a": ["x", "y", "x"], "b": ["y", "y", None], "c": [None, None, "x"]})
    w = load_responses(wide, layout="wide", task="item")
    assert w.n_responses == 6 and set(w.workers) == {"a", "b", "c"}
    assert any("blank cells" in n for n in w.report.notes)
    csv = wide.to_csv(index=False).encode()
    assert load_responses(csv, name="w.csv", layout="wide", task="item").n_responses == 6


def test_integer_codes_and_mapping_back():
    resp = Responses.from_frame(LONG)
    assert resp.item.dtype == np.int64 and resp.label.max() == 1
    assert list(resp.items.take(resp.item)) == list(LONG["task"])
    assert list(resp.classes.take(resp.label)) == list(LONG["label"])
    np.testing.assert_array_equal(resp.vote_counts(), [[1, 1], [0, 2], [2, 0]])


def test_numeric_labels_sort_numerically():
    df = pd.DataFrame({"task": [1, 1, 2, 2], "worker": ["a", "b"] * 2, "label": [10, 9, 2, 10]})
    assert list(Responses.from_frame(df).classes) == [2, 9, 10]


def test_duplicate_policies():
    dup = pd.concat(
        [LONG, pd.DataFrame({"task": [1, 1], "worker": ["a", "a"], "label": ["y", "y"]})], ignore_index=True
    )
    keep = Responses.from_frame(dup)
    assert keep.n_responses == 8 and keep.report.duplicate_rows == 2
    assert any("kept as separate responses" in m for m in keep.report.messages())
    first = Responses.from_frame(dup, duplicates="first")
    last = Responses.from_frame(dup, duplicates="last")
    assert first.n_responses == last.n_responses == 6 and first.report.duplicates_removed == 2
    a_on_1 = lambda r: r.classes[r.label[(r.items[r.item] == 1) & (r.workers[r.worker] == "a")][0]]
    assert a_on_1(first) == "x" and a_on_1(last) == "y"
    with pytest.raises(UserInputError, match="repeat a \\(task, worker\\) pair"):
        Responses.from_frame(dup, duplicates="error")


def test_missing_labels_dropped_and_counted():
    df = LONG.copy()
    df.loc[0, "label"] = None
    df.loc[1, "label"] = ""
    df.loc[2, "worker"] = None
    resp = Responses.from_frame(df)
    assert resp.n_responses == 3
    assert resp.report.dropped_missing_label == 2 and resp.report.dropped_missing_id == 1
    text = " ".join(resp.report.messages())
    assert "missing label" in text and "missing task or worker" in text
    # a cell of spaces is a value unless whitespace is trimmed; extra missing-value markers are opt-in
    df.loc[1, "label"] = "  "
    assert "  " in list(Responses.from_frame(df).classes)
    assert Responses.from_frame(df, strip_whitespace=True).report.dropped_missing_label == 2
    df.loc[1, "label"] = "NA"
    assert "NA" in list(Responses.from_frame(df).classes)
    assert Responses.from_frame(df, na_values=["NA"]).report.dropped_missing_label == 2


@pytest.mark.parametrize(
    "df, pattern",
    [
        (LONG.drop(columns="label"), "missing label column 'label'"),
        (LONG.iloc[:0], "empty"),
        (LONG.assign(label="x"), "only one label value"),
        (LONG.assign(worker="a").drop_duplicates(["task"]), "only 1 annotator"),
        (LONG.assign(label=None), "no usable responses"),
    ],
)
def test_bad_frames_raise_one_clear_message(df, pattern):
    with pytest.raises(UserInputError, match=pattern):
        Responses.from_frame(df)


@pytest.mark.parametrize(
    "content, pattern",
    [
        (b"", "empty"),
        (b"   \n\n", "only whitespace|no columns"),
        ("task,worker,label\n1,a,caf\xe9\n".encode("latin-1"), "not UTF-8"),
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00", "not UTF-8|binary"),
        (b"task,worker,label\n1,a,x,extra,cols\n2,b\n", "row 2 .* has 5 field"),
        (b"task,worker,label\n1,a,x\n2,b\n", "row 3 .* has 2 field"),
        (b"task,label,label\n1,a,x\n", "repeats the column name 'label'"),
    ],
)
def test_bad_files_raise_one_clear_message(content, pattern):
    with pytest.raises(UserInputError, match=pattern):
        load_responses(content, name="answers.csv")


def test_oversize_and_unknown_format(tmp_path):
    big = LONG.to_csv(index=False).encode() * 50
    with pytest.raises(UserInputError, match="limit"):
        read_table(big, name="a.csv", max_bytes=100)
    p = tmp_path / "big.csv"
    p.write_bytes(big)
    with pytest.raises(UserInputError, match="over the"):
        read_table(p, max_bytes=100)
    with pytest.raises(UserInputError, match="not a Parquet"):
        read_table(b"task,worker\n", name="a.parquet")
    with pytest.raises(UserInputError, match="unknown format"):
        read_table(b"a,b\n1,2\n", format="xlsx")


def test_html_labels_kept_verbatim():
    df = LONG.assign(label=LONG["label"].map({"x": "<script>alert(1)</script>", "y": "<b>y</b>"}))
    resp = Responses.from_frame(df)
    assert "<script>alert(1)</script>" in list(resp.classes)


def test_gold_and_context_readers():
    gold = read_gold(b"task,truth\n1,x\n2,y\n", name="g.csv")
    assert gold.to_dict() == {"1": "x", "2": "y"}  # ids and labels read from a file are text
    with pytest.raises(UserInputError, match="truth"):
        read_gold(b"task,foo\n1,x\n", name="g.csv")
    with pytest.raises(UserInputError, match="more than once"):
        read_gold(b"task,truth\n1,x\n1,y\n", name="g.csv")
    ctx = read_context(b"task,context\n1,0.5\n2,3\n", name="c.csv")
    assert ctx.loc["2"] == 3.0
    with pytest.raises(UserInputError, match="numeric"):
        read_context(b"task,context\n1,abc\n", name="c.csv")
    resp = Responses.from_frame(LONG)
    with pytest.raises(UserInputError, match="not in the responses"):
        resp.item_codes([1, 99])
    np.testing.assert_array_equal(resp.item_codes(["1", "2"]), [0, 1])  # ids read as text still match


def test_sequences_are_coded_and_validated():
    df = pd.DataFrame(
        {
            "task": ["s1/0", "s1/1", "s1/3", "s2/0"] * 2,
            "worker": ["a"] * 4 + ["b"] * 4,
            "label": ["O", "B", "I", "O"] * 2,
            "sequence": ["s1", "s1", "s1", "s2"] * 2,
            "position": [0, 1, 3, 0] * 2,
        }
    )
    resp = Responses.from_frame(df)
    assert resp.has_sequences and list(resp.sequence_bounds) == [0, 3, 4]
    assert any("gaps" in n for n in resp.report.notes)
    clash = df.copy()
    clash.loc[0, "position"] = 1  # s1/0 and s1/1 both at position 1
    with pytest.raises(UserInputError):
        Responses.from_frame(clash)
    with pytest.raises(UserInputError, match="both a sequence column and a position column"):
        Responses.from_frame(df, sequence="sequence")


def test_one_vs_rest_recoding():
    from fusion_core.data.responses import Responses

    df = pd.DataFrame(
        {"task": [1, 1, 2, 2, 3], "worker": ["a", "b", "a", "b", "a"], "label": ["x", "y", "z", "y", "y"]}
    )
    r = Responses.from_frame(df)
    b = r.one_vs_rest("y")
    assert list(b.classes) == ["not y", "y"] and b.n_classes == 2
    assert b.to_frame()["label"].tolist() == ["not y", "y", "not y", "y", "y"]
    assert b.n_items == r.n_items and b.n_workers == r.n_workers and list(r.classes) == ["x", "y", "z"]
    with pytest.raises(UserInputError):
        r.one_vs_rest("nope")
