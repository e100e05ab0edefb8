"""The reading and writing rules of issue 11 (docs/DATA.md), one example each: ids and labels are text exactly as
written, Parquet values have one canonical text, missing-value markers and trimming are opt-in, malformed tables are
refused with their row, exports are formula-safe, memory limits are checked before reading, and the command line
answers every problem with one line."""

from __future__ import annotations

import io
import json

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fusion_core.cli import main
from fusion_core.data.export import csv_bytes, escape_formulas, needs_escape, read_csv_export, unescape_formula
from fusion_core.data.graph import graph_for_responses, read_graph
from fusion_core.data.loading import load_responses, read_context, read_gold, read_table
from fusion_core.data.text import format_size, size_over_limit
from fusion_core.errors import UserInputError
from fusion_core.methods import create


def _parquet(table: pa.Table) -> bytes:
    buf = io.BytesIO()
    pq.write_table(table, buf)
    return buf.getvalue()


def test_csv_ids_and_labels_are_text_exactly_as_written():
    data = b"task,worker,label\n007,a,1\n7,a,1.0\n1e3,a,01\n1000,b,TRUE\n007,b,NA\n7,b, x\n"
    r = load_responses(data, name="a.csv")
    assert list(r.items) == ["007", "7", "1000", "1e3"]  # natural order: by number, ties by text
    assert list(r.classes) == [" x", "01", "1", "1.0", "NA", "TRUE"]
    assert r.n_responses == 6 and r.report.dropped_missing_label == 0


def test_missing_markers_and_trimming_are_opt_in_and_apply_to_both_ends():
    data = b"task,worker,label\n1,a,x\n1,b, x \n2,a,null\n2,b,\n3,a,y\n3,b,NA\n"
    plain = load_responses(data, name="a.csv")
    assert set(plain.classes) == {"x", " x ", "null", "y", "NA"} and plain.report.dropped_missing_label == 1
    marked = load_responses(data, name="a.csv", na_values=["NA", "null"], strip_whitespace=True)
    assert list(marked.classes) == ["x", "y"] and marked.report.dropped_missing_label == 3


def test_json_lines_keep_number_text_and_refuse_nested_values():
    lines = [
        {"task": 1.0, "worker": "a", "label": 1e3},
        {"task": "1.0", "worker": "b", "label": True},
        {"task": 7, "worker": "a", "label": None},
        {"task": 7, "worker": "b", "label": "x"},
    ]
    text = "\n".join(json.dumps(x) for x in lines).replace("1000.0", "1e3")
    r = load_responses(text.encode(), name="a.jsonl")
    assert list(r.items) == ["1.0", "7"] and list(r.classes) == ["1e3", "true", "x"]
    with pytest.raises(UserInputError, match=r"line 1: the value of 'label' is a list"):
        load_responses(b'{"task": 1, "worker": "a", "label": [1, 2]}\n', name="a.jsonl")
    with pytest.raises(UserInputError, match=r"line 1 repeats the key 'task'"):
        load_responses(b'{"task": 1, "task": 2, "worker": "a", "label": "x"}\n', name="a.jsonl")


def test_parquet_values_map_to_one_canonical_text_in_long_and_wide_layouts():
    long = pa.table({"task": [1, 1, 2, 2], "worker": ["a", "b", "a", "b"], "label": [3.0, 0.5, 3.0, float("nan")]})
    r = load_responses(_parquet(long), name="l.parquet")
    assert list(r.classes) == ["0.5", "3"] and list(r.items) == ["1", "2"] and r.report.dropped_missing_label == 1
    wide = pa.table({"task": [1, 2], "a": [3, 3], "b": ["3", "x"], "c": [True, None]})
    w = load_responses(_parquet(wide), name="w.parquet", layout="wide")
    assert list(w.classes) == ["3", "true", "x"]  # the integer 3 and the text "3" are one class
    dates = pa.table({"task": pa.array([np.datetime64("2020-01-02T03:04:05", "s")] * 2), "worker": ["a", "b"]})
    assert read_table(_parquet(dates), name="d.parquet")["task"].iloc[0] == "2020-01-02T03:04:05"


@pytest.mark.parametrize(
    "table, match",
    [
        (
            pa.table({"task": ["1", "2"], "worker": ["a", "b"], "label": [[1], [2]]}),
            r"row 1 of column 'label' holds a list",
        ),
        (pa.table({"task": ["1", "2"], "worker": ["a", "b"], "label": [b"x", b"\xff"]}), r"not UTF-8 text \(row 2\)"),
        (pa.table({"task": ["1"], "worker": ["a"], "label": [{"k": 1}]}), r"holds a dictionary"),
    ],
)
def test_parquet_cells_that_are_not_single_values_are_refused(table, match):
    with pytest.raises(UserInputError, match=match):
        load_responses(_parquet(table), name="x.parquet")


@pytest.mark.parametrize(
    "data, match",
    [
        (b"task,label,label\n1,a,x\n", r"repeats the column name 'label' \(columns 2 and 3\)"),
        (b"task,worker,label\n1,a,x\n2,b\n", r"row 3 \(counting the header as row 1\) has 2 field"),
        (b'task,worker,label\n1,a,"x\ny"\n2,b,y,z\n', r"row 3 .* has 4 field"),
        (b"task,worker,label\n1,a,caf\xe9\n", r"not UTF-8 text \(byte 0xe9 on line 2\)"),
    ],
)
def test_malformed_csv_is_refused_with_the_row(data, match):
    with pytest.raises(UserInputError, match=match):
        load_responses(data, name="a.csv")


def test_gold_context_and_graph_files_follow_the_same_rules():
    gold = read_gold(b"task,truth\n007,x \n7,y\n", name="g.csv")
    assert gold.to_dict() == {"007": "x ", "7": "y"}
    ctx = read_context(b"task,context\n007,1e3\n7,-0.5\n", name="c.csv")
    assert ctx.to_dict() == {"007": 1000.0, "7": -0.5}
    with pytest.raises(UserInputError, match=r"must hold finite numbers; found 'inf' \(row 2\)"):
        read_context(b"task,context\n1,2\n2,inf\n", name="c.csv")
    with pytest.raises(UserInputError, match=r"is empty for task '2'"):
        read_context(b"task,context\n1,2\n2,\n", name="c.csv")
    resp = load_responses(b"task,worker,label\n007,a,x\n7,a,y\n007,b,x\n7,b,x\n", name="a.csv")
    g = graph_for_responses(read_graph(b"source,target\n007,7\n", name="e.csv"), resp)
    assert g.n_edges == 1
    with pytest.raises(UserInputError, match=r"not tasks in the responses \('07'\)"):
        graph_for_responses(read_graph(b"source,target\n007,07\n", name="e.csv"), resp)


def test_graph_files_that_networkx_cannot_read_get_a_sentence():
    with pytest.raises(UserInputError, match=r"not well-formed XML \(line 1, column \d+\)"):
        read_graph(b"<graphml><graph><node id='a'>", name="g.graphml")
    undeclared = b"""<?xml version='1.0'?><graphml><graph edgedefault='undirected'><node id='1'/><node id='2'/>
    <edge source='1' target='2'><data key='d9'>1</data></edge></graph></graphml>"""
    with pytest.raises(UserInputError, match=r"could not read g.graphml as GraphML: Bad GraphML data: no key d9\.$"):
        read_graph(undeclared, name="g.graphml")
    bad_weight = undeclared.replace(
        b"<graph ", b"<key id='d9' for='edge' attr.name='weight' attr.type='double'/><graph "
    )
    with pytest.raises(UserInputError, match=r"is not a valid GraphML file: nodes and edges could not be read"):
        read_graph(bad_weight.replace(b">1</data>", b">abc</data>"), name="g.graphml")


def test_positions_beyond_exact_integers_are_refused():
    df = pd.DataFrame(
        {
            "task": ["t1", "t2"] * 2,
            "worker": ["a", "a", "b", "b"],
            "label": ["x", "y", "x", "x"],
            "sequence": ["s"] * 4,
            "position": ["0", "9223372036854775808"] * 2,
        }
    )
    with pytest.raises(UserInputError, match=r"whole numbers below 2\*\*53"):
        load_responses(df)


def test_labels_that_look_like_declared_classes_say_what_differs():
    with pytest.raises(UserInputError, match=r"'x ' differs from 'x' only by spaces at its ends"):
        load_responses(b"task,worker,label\n1,a,x \n1,b,y\n", name="a.csv", classes=["x", "y"])
    resp = load_responses(b"task,worker,label\n1,a,x\n1,b,y\n2,a,y\n2,b,y\n", name="a.csv")
    with pytest.raises(UserInputError, match=r"'Y' differs from 'y' only in upper/lower case"):
        create("ds").fit(resp, true_labels=pd.Series({"1": "Y"}))
    assert list(load_responses(b"task,worker,label\n1,a,0\n1,b,1\n", name="a.csv", classes=[0, 1]).classes) == [0, 1]


def test_sizes_are_written_for_people():
    assert format_size(512) == "512 bytes" and format_size(16_000) == "16 KB" and format_size(1536) == "1.5 KB"
    assert size_over_limit(209_715_300, 200 * 1024 * 1024) == "is 209,715,300 bytes, over the 209,715,200-byte limit"
    with pytest.raises(UserInputError, match=r"is 1\.0 KB, over the 100 bytes limit"):
        load_responses(b"x" * 1024, name="a.csv", max_bytes=100)


def test_parquet_declaring_too_many_rows_is_refused_from_its_metadata():
    block = pa.DictionaryArray.from_arrays(pa.array(np.zeros(200_000, np.int32)), pa.array(["x"]))
    data = _parquet(pa.table({"task": block, "worker": block, "label": block}))
    assert len(data) < 10_000
    with pytest.raises(UserInputError, match=r"declares 200,000 rows × 3 column\(s\) = 600,000 cells"):
        load_responses(data, name="big.parquet", max_bytes=len(data) * 10)


def test_formula_escaping_is_reversible_and_spares_plain_numbers():
    values = ["=1+2", "+cmd", "-1", "+2.5", "1e-3", "-1+2", "@SUM(A1)", "\tx", "\rx", "'quoted", "plain", "-"]
    escaped = escape_formulas(pa.array(values)).to_pylist()
    assert escaped == [
        "'=1+2",
        "'+cmd",
        "-1",
        "+2.5",
        "1e-3",
        "'-1+2",
        "'@SUM(A1)",
        "'\tx",
        "'\rx",
        "''quoted",
        "plain",
        "'-",
    ]
    assert [needs_escape(v) for v in values] == [e != v for e, v in zip(escaped, values)]
    assert [unescape_formula(e) for e in escaped] == values
    df = pd.DataFrame({"=task": values, "p": np.linspace(0, 1, len(values))})
    data = csv_bytes(df)
    assert data.splitlines()[0] == b'"\'=task","p"' and b'"a\rb"' in csv_bytes(pd.DataFrame({"x": ["a\rb"]}))
    back = read_csv_export(data)
    assert list(back.columns) == ["=task", "p"] and back["=task"].tolist() == values
    assert csv_bytes(df, escape_formulas=False).splitlines()[1].startswith(b'"=1+2"')


def test_cli_outputs_round_trip_labels_named_like_the_fixed_columns(tmp_path, capsys):
    src = tmp_path / "a.csv"
    src.write_bytes(b'task,worker,label\n007,worker,task\n007,@b,task\n7,worker,"=HYPERLINK(""x"")"\n7,@b,"a\rb"\n')
    assert main(["fit", str(src), "--method", "mv", "--out", str(tmp_path / "o")]) == 0
    post = read_csv_export(tmp_path / "o" / "posteriors.csv")
    assert list(post.columns) == ["task", 'P(=HYPERLINK("x"))', "P(a\rb)", "P(task)"]
    assert post["task"].tolist() == ["007", "7"]
    assert set(read_csv_export(tmp_path / "o" / "workers.csv")["worker"]) == {"worker", "@b"}
    assert b'"\'@b"' in (tmp_path / "o" / "workers.csv").read_bytes()  # neutralised for spreadsheets
    labels = read_csv_export(tmp_path / "o" / "labels.csv")
    assert labels.set_index("task")["label"].to_dict()["007"] == "task"
    assert b"\"'=HYPERLINK" in (tmp_path / "o" / "labels.csv").read_bytes()  # the tie goes to the first class
    assert main(["fit", str(src), "--method", "mv", "--format", "parquet", "--out", str(tmp_path / "p")]) == 0
    parquet = pd.read_parquet(tmp_path / "p" / "posteriors.parquet")
    assert list(parquet.columns) == list(post.columns)
    capsys.readouterr()


def test_cli_reading_options_and_one_line_errors(tmp_path, capsys):
    src = tmp_path / "a.csv"
    src.write_bytes(b"task,worker,label\n1,a,x\n1,b,NA\n2,a, y\n2,b,y\n")
    out = tmp_path / "o"
    assert main(["fit", str(src), "--out", str(out), "--missing", "NA", "--strip-whitespace", "--method", "mv"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["classes"] == ["x", "y"] and summary["validation"]["dropped_missing_label"] == 1
    capsys.readouterr()
    for argv in (
        ["fit", str(src), "--out", str(out), "--layout", "diagonal"],
        ["fit", str(src), "--out", str(out), "--max-mb", "abc"],
        ["fit", str(src)],
        ["fit", str(src), "--out", str(out), "--label-sep", "|"],
    ):
        with pytest.raises(SystemExit) if "--layout" in argv or "abc" in argv or "--out" not in argv else _noop():
            code = main(argv)
            assert code == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("error: "), err


class _noop:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_cli_fits_multilabel_responses(tmp_path, capsys):
    src = tmp_path / "ml.csv"
    rows = ["task,worker,label"] + [
        f"i{i},w{w},{'L1;L2' if (i + w) % 3 else 'L1'}" for i in range(20) for w in range(4)
    ]
    rows[5] = rows[5].rsplit(",", 1)[0] + ","  # an empty cell is the empty label set
    src.write_text("\n".join(rows) + "\n")
    out = tmp_path / "o"
    assert main(["fit", str(src), "--method", "multilabel-em", "--label-sep", ";", "--out", str(out)]) == 0
    labels = read_csv_export(out / "labels.csv")
    assert len(labels) == 20 and set(labels["labels"].dropna()) <= {"L1", "L2", "L1;L2"}
    post = read_csv_export(out / "posteriors.csv")
    assert list(post.columns) == ["task", "P(L1)", "P(L2)"]
    assert {"worker", "label", "false_positive", "miss"} <= set(read_csv_export(out / "flip_rates.csv").columns)
    capsys.readouterr()
