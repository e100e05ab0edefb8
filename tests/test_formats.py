"""The formats registry (fusion_core/data/formats): every consumer lists every format, each tool export's
hand-written fixture reads back exactly as written with its left-out counts, and broken variants of each give one
UserInputError."""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import pandas as pd
import pytest

from fusion_core.cli import build_parser, main
from fusion_core.data.answers import read_answers
from fusion_core.data.formats import _REGISTRY as REGISTRY
from fusion_core.data.formats import (
    FormatInfo,
    Sniff,
    available_formats,
    dask_formats,
    detect,
    format_names,
    formats_help,
    register_format,
    upload_types,
)
from fusion_core.data.formats.dispatch import read_input
from fusion_core.data.loading import load_responses
from fusion_core.errors import UserInputError

ROOT = Path(__file__).resolve().parents[1]
FIX = ROOT / "tests" / "fixtures" / "formats"

FIXTURES = {
    "label_studio.json": "label-studio",
    "label_studio_ner.json": "label-studio",
    "label_studio_questions.json": "label-studio",
    "label_studio_min.json": "label-studio-min",
    "label_studio.csv": "label-studio-csv",
    "mturk_batch_results.csv": "mturk",
    "toloka_assignments.tsv": "toloka",
    "argilla_v1.jsonl": "argilla",
    "argilla_v2.json": "argilla",
    "prodigy_choice.jsonl": "prodigy",
    "prodigy_ner.jsonl": "prodigy",
    "doccano.jsonl": "doccano",
    "doccano_ner.jsonl": "doccano",
}
FIELD = {"label_studio_questions.json": "tags", "argilla_v2.json": "label"}


def _choices(parser, command: str, option: str) -> list[str]:
    sub = next(a for a in parser._actions if a.dest == "command").choices[command]
    return list(next(a for a in sub._actions if option in a.option_strings).choices)


# ------------------------------------------------------------------------------------- one list of formats
def test_every_consumer_lists_every_format():
    names = format_names()
    assert len(names) == len(set(names)) and {"csv", "tsv", "parquet", "jsonl"} <= set(names)
    parser = build_parser()
    for command in ("fit", "report", "agreement", "numeric"):
        assert _choices(parser, command, "--input-format") == names
    assert all(f.name in formats_help() for f in available_formats())
    exts = set(upload_types())
    assert all(e.lstrip(".") in exts for f in available_formats() for e in f.extensions)
    assert set(dask_formats()) <= set(names) and set(dask_formats()) == {"csv", "tsv", "parquet"}


def test_no_hand_kept_list_of_formats_elsewhere():
    """The app's upload box and the Dask ingest derive their lists from the registry (no literal list)."""
    page = ast.parse((ROOT / "pages" / "1_Data.py").read_text())
    upload = next(
        n for n in ast.walk(page) if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "UPLOAD_TYPES"
    )
    assert isinstance(upload.value, ast.Call) and getattr(upload.value.func, "id", "") == "upload_types"
    import fusion_core.data.readers as readers
    import fusion_core.engines.dask.ingest as ingest

    assert not hasattr(ingest, "FORMATS") and not hasattr(readers, "FORMATS") and not hasattr(readers, "EXTENSIONS")


def test_adding_a_format_is_one_registration(tmp_path):
    """A new format registered once shows up in the CLI choices, the upload types and detection."""
    info = FormatInfo(
        name="zz-test",
        title="test format",
        kind="export",
        extensions=(".zzt",),
        help="test",
        detect=lambda s: s.first_line.startswith("ZZT"),
        read_export=lambda inp, opts, field=None: None,  # type: ignore[arg-type,return-value]
    )
    register_format(info)
    try:
        assert "zz-test" in _choices(build_parser(), "report", "--input-format")
        assert "zzt" in upload_types()
        assert detect(Sniff("x.dat", b"ZZT 1\n")).name == "zz-test"
    finally:
        REGISTRY.pop("zz-test")


@pytest.mark.parametrize("name,fmt", sorted(FIXTURES.items()))
def test_fixture_is_detected(name, fmt):
    data = (FIX / name).read_bytes()
    assert detect(Sniff(name, data[:65536])).name == fmt
    assert detect(Sniff("upload.bin", data[:65536])).name == fmt or fmt.startswith(("mturk", "label-studio-csv"))


def test_detection_when_the_first_task_is_longer_than_the_head():
    # Label Studio writes "annotations" before "data", so the keys are in the head even when the text is long
    long_task = b'[{"id": 1, "annotations": [{"completed_by": 1}], "data": {"text": "' + b"x" * 70_000 + b'"}}]'
    assert detect(Sniff("export.json", long_task[:65536])).name == "label-studio"


def test_plain_tables_still_detected():
    assert detect(Sniff("a.csv", b"task,worker,label\n1,a,x\n")).name == "csv"
    assert detect(Sniff("a.json", b'[{"task": "1", "worker": "a", "label": "x"}]')).name == "jsonl"
    assert detect(Sniff("a", b"task\tworker\tlabel\n")).name == "tsv"


# ------------------------------------------------------------------------------------------ round trips
def _rows(ex) -> list[tuple[str, str, str]]:
    return list(ex.table[["task", "worker", "label"]].itertuples(index=False, name=None))


def test_label_studio_json_round_trip():
    ex = read_input(FIX / "label_studio.json").export
    assert sorted(_rows(ex)) == sorted(
        [
            ("101", "11", "Positive"), ("101", "12", "Positive"), ("101", "13", "Negative"),
            ("102", "11", "Negative"), ("102", "13", "Negative"),
            ("103", "11", "Neutral"), ("103", "12", "Neutral"), ("103", "13", "Positive"),
            ("105", "12", "Positive"), ("105", "11", "Negative"), ("105", "13", "Positive"),
        ]
    )  # fmt: skip
    assert ex.gold.to_dict() == {"103": "Neutral"}  # the ground-truth annotation, not a response
    r = ex.report
    assert (r.records, r.responses, r.cancelled, r.drafts, r.repeated, r.gold) == (14, 11, 1, 1, 1, 1)
    assert ("annotator", "completed_by") in r.mapping and any("1 tasks have no annotation" in n for n in r.notes)


def test_label_studio_questions_need_a_field_and_read_each_kind():
    with pytest.raises(UserInputError, match=r"several control.*'count', 'kind', 'quality', 'tags'"):
        read_input(FIX / "label_studio_questions.json")
    read = {
        f: read_input(FIX / "label_studio_questions.json", field=f).export for f in ("tags", "quality", "kind", "count")
    }
    assert _rows(read["tags"]) == [("7", "3", "animal|outdoor"), ("7", "5", "animal"), ("8", "3", "animal|outdoor")]
    assert read["tags"].gold.to_dict() == {"8": "indoor"}
    assert _rows(read["quality"]) == [("7", "3", "4"), ("7", "5", "5"), ("8", "3", "3")]
    assert _rows(read["kind"]) == [("7", "3", "Animal/Mammal/Cat"), ("7", "5", "Animal/Mammal/Cat|Animal/Mammal/Dog")]
    assert read["kind"].report.empty == 1  # task 8 by annotator 3 did not answer 'kind'
    assert _rows(read["count"]) == [("7", "3", "2.0"), ("8", "3", "1")]  # numbers keep their text
    with pytest.raises(UserInputError, match=r"no control.*'nope'"):
        read_input(FIX / "label_studio_questions.json", field="nope")


@pytest.mark.parametrize("name", ["label_studio_min.json", "label_studio.csv"])
def test_label_studio_min_and_csv_round_trip(name):
    ex = read_input(FIX / name).export
    assert _rows(ex) == [
        ("201", "7", "praise"), ("201", "8", "praise|question"), ("202", "7", "question"), ("202", "8", "question"),
        ("203", "7", "complaint"), ("203", "9", "praise"),
    ]  # fmt: skip
    assert (ex.report.records, ex.report.repeated, ex.report.empty) == (8, 1, 1)
    assert ("label", "intent") in ex.report.mapping


def test_mturk_round_trip():
    ex = read_input(FIX / "mturk_batch_results.csv").export
    assert _rows(ex) == [
        ("3X4Y0A", "A1B2C3D4E5", "cat"), ("3X4Y0A", "A2Z9Y8X7W6", "cat"), ("3X4Y0B", "A1B2C3D4E5", "dog"),
        ("3X4Y0B", "A2Z9Y8X7W6", "dog|other"), ("3X4Y0C", "A2Z9Y8X7W6", "other"), ("3X4Y0C", "A4QUIET000", "other"),
        ("3X4Y0C", "A1B2C3D4E5", "cat"),
    ]  # fmt: skip
    assert (ex.report.records, ex.report.rejected, ex.report.empty) == (9, 1, 1)


def test_toloka_round_trip():
    ex = read_input(FIX / "toloka_assignments.tsv").export
    assert sorted(_rows(ex)) == sorted(
        [
            ("00011a", "8f1c2e0b", "cat"), ("00011a", "4d9e7a31", "dog"), ("00011b", "8f1c2e0b", "dog"),
            ("00011b", "c0ffee99", "dog"), ("00011c", "c0ffee99", "other"), ("00011a", "c0ffee99", "cat"),
        ]
    )  # fmt: skip
    assert ex.gold.to_dict() == {"00011b": "dog"}
    assert (ex.report.records, ex.report.rejected, ex.report.skipped) == (9, 1, 2)


def test_argilla_round_trips():
    v1 = read_input(FIX / "argilla_v1.jsonl").export
    u = "6a1f0c2e-0000-4000-8000-00000000000"
    assert _rows(v1) == [
        ("q-17", u + "1", "billing"), ("q-17", u + "2", "billing"), ("q-18", u + "1", "shipping"),
        ("q-20", u + "3", "billing"), ("q-20", u + "1", "billing"),
    ]  # fmt: skip
    assert (v1.report.drafts, v1.report.skipped) == (1, 2)  # one discarded answer, one record nobody answered
    with pytest.raises(UserInputError, match=r"several question.*'aspects', 'label'"):
        read_input(FIX / "argilla_v2.json")
    aspects = read_input(FIX / "argilla_v2.json", field="aspects").export
    assert _rows(aspects) == [("rec-001", "u-ana", "battery"), ("rec-001", "u-bo", "battery|quality")]
    assert aspects.report.skipped == 2  # rec-002 has no answer, rec-003's is discarded


def test_argilla_parquet(tmp_path):
    rows = [
        {"id": "r1", "text": "a", "label.responses": ["x", "y"], "label.responses.users": ["u1", "u2"],
         "label.responses.status": ["submitted", "submitted"]},
        {"id": "r2", "text": "b", "label.responses": ["y"], "label.responses.users": ["u1"],
         "label.responses.status": ["draft"]},
    ]  # fmt: skip
    path = tmp_path / "dataset.parquet"
    pd.DataFrame(rows).to_parquet(path)
    got = read_input(path)
    assert got.format.name == "argilla" and _rows(got.export) == [("r1", "u1", "x"), ("r1", "u2", "y")]
    assert got.export.report.drafts == 1


def test_prodigy_and_doccano_round_trips():
    p = read_input(FIX / "prodigy_choice.jsonl").export
    assert sorted(_rows(p)) == sorted(
        [
            ("-118237811", "support-ben", "BILLING|SHIPPING"), ("5512093", "support-ben", "SHIPPING"),
            ("5512093", "support-ana", "OTHER"), ("-118237811", "support-cy", "BILLING"),
            ("-118237811", "support-ana", "BILLING"),
        ]
    )  # fmt: skip
    assert (p.report.skipped, p.report.rejected, p.report.repeated) == (1, 1, 1)
    d = read_input(FIX / "doccano.jsonl").export
    assert _rows(d) == [
        ("1", "1", "positive"), ("1", "2", "positive"), ("1", "3", "neutral"), ("2", "1", "negative"),
        ("2", "3", "angry|negative"), ("4", "2", "neutral"), ("4", "1", "neutral"),
    ]  # fmt: skip
    assert d.report.skipped == 1


SPANS = {
    "prodigy_ner.jsonl": [
        ("1001", "ner-a", 0, 5, "PER"), ("1001", "ner-a", 10, 13, "PER"), ("1001", "ner-b", 0, 5, "PER"),
        ("1001", "ner-b", 17, 22, "LOC"), ("1002", "ner-a", 14, 22, "LOC"),
    ],
    "doccano_ner.jsonl": [
        ("10", "ann", 0, 5, "PER"), ("10", "ann", 10, 13, "PER"), ("10", "bea", 0, 5, "PER"),
        ("10", "bea", 17, 22, "LOC"), ("11", "bea", 14, 22, "LOC"),
    ],
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(SPANS))
def test_span_exports_give_token_sequences(name):
    ex = read_input(FIX / name).export
    got = sorted(ex.spans.spans[["task", "worker", "start", "end", "label"]].itertuples(index=False, name=None))
    assert got == SPANS[name]
    assert ex.spans.n_annotations == 4  # an annotator who marked no span still labelled every token "O"
    resp = load_responses(FIX / name)
    assert resp.has_sequences and resp.n_items == 10 and resp.n_responses == 20


# -------------------------------------------------------------------------------------------------- fuzz
def _variants(data: bytes) -> list[bytes]:
    cuts = [len(data) * k // 7 for k in range(1, 7)]
    out = [data[:c] for c in cuts]
    out += [
        data.replace(b"{", b"[", 1),
        data.replace(b'"', b"", 3),
        data[: len(data) // 2] + b"\xff\xfe" + data[len(data) // 2 :],
    ]
    out += [b"[" * 100_000, data.replace(b"annotations", b"annotationz")]
    return out


@pytest.mark.parametrize("name,fmt", sorted(FIXTURES.items()))
def test_broken_exports_give_one_user_error(name, fmt, tmp_path):
    """Truncated and malformed variants, read as that format: read, or one UserInputError — never another
    exception; the file is left as it was."""
    data = (FIX / name).read_bytes()
    for i, broken in enumerate(_variants(data)):
        path = tmp_path / f"v{i}{Path(name).suffix}"
        path.write_bytes(broken)
        try:
            read_input(path, format=fmt, field=FIELD.get(name))
        except UserInputError as exc:
            assert "\n" not in str(exc) and len(str(exc)) < 600
        else:  # a JSON document or JSON line cut short cannot be read as if it were whole
            assert not (i < 6 and Path(name).suffix in (".json", ".jsonl")), f"variant {i} was read"
        assert path.read_bytes() == broken


# --------------------------------------------------------------------------------------------- commands
def _report_runs(names, tmp_path, capsys):
    for name in names:
        src = tmp_path / name
        shutil.copy(FIX / name, src)
        out, verdicts = tmp_path / (name + ".html"), tmp_path / (name + ".verdicts.csv")
        args = ["report", str(src), "--out", str(out), "--verdicts-out", str(verdicts)]
        assert main([*args, "--bootstrap", "0", "--cartel-bootstrap", "1"]) == 0
        assert out.stat().st_size > 1000
        table = pd.read_csv(verdicts, dtype=str)
        worker_col = {"label-studio": "completed_by", "mturk": "WorkerId", "toloka": "ASSIGNMENT:worker_id"}
        assert table.columns[0] == worker_col.get(FIXTURES[name], table.columns[0])
        assert set(table.iloc[:, 0]) == set(read_input(FIX / name).export.table["worker"])
        assert "read the " in capsys.readouterr().err


def test_report_runs_on_an_export_without_mapping(tmp_path, capsys):
    _report_runs(["label_studio.json"], tmp_path, capsys)


@pytest.mark.slow
def test_report_runs_on_every_export_without_mapping(tmp_path, capsys):
    _report_runs([n for n in FIXTURES if n not in FIELD], tmp_path, capsys)


def test_resend_file_has_the_platforms_ids(tmp_path, capsys):
    """The re-labelling plan's items go back in the platform's item and worker columns (MTurk: HITId, WorkerId);
    the command says so in one line when the plan has nothing to send."""
    from fusion_core.diagnostics.plan import plan_relabel
    from fusion_core.methods import create
    from fusion_core.report.tool_files import resend_table
    from fusion_core.simulate import dawid_skene

    sim = dawid_skene(n_items=200, n_workers=12, n_classes=2, responses_per_item=3, seed=1)
    plan = plan_relabel(sim.responses, create("ds").fit(sim.responses).result_, budget=30)
    table = resend_table(plan.frame(), "mturk")
    assert list(table.columns[:2]) == ["HITId", "suggested WorkerId"] and len(table) >= 1
    assert list(table["HITId"]) == list(plan.tasks)
    for tid, who in zip(table["HITId"], table["suggested WorkerId"]):  # nobody is asked again for an item
        already = set(sim.responses.loc[sim.responses["task"] == tid, "worker"])
        assert not already & set(who.split("; "))
    assert list(resend_table(["t1"], "toloka").columns) == ["ASSIGNMENT:task_id"]
    name = next(n for n, f in FIXTURES.items() if f == "mturk")  # a tiny batch: no label is worth buying
    src, out = tmp_path / name, tmp_path / "a.html"
    shutil.copy(FIX / name, src)
    args = ["report", str(src), "--out", str(out), "--resend-out", str(tmp_path / "r.csv"), "--bootstrap", "0"]
    assert main([*args, "--cartel-bootstrap", "1"]) == 2
    assert "--resend-out" in capsys.readouterr().err


def test_report_guesses_columns(tmp_path, capsys):
    src = tmp_path / "export.csv"
    src.write_text("item_id,annotator,answer\n1,a,x\n1,b,x\n2,a,y\n2,b,y\n3,a,x\n3,b,y\n")
    assert (
        main(["report", str(src), "--out", str(tmp_path / "r.html"), "--bootstrap", "0", "--cartel-bootstrap", "1"])
        == 0
    )
    err = capsys.readouterr().err
    assert "task <- 'item_id', worker <- 'annotator', label <- 'answer'" in err
    src.write_text("item,item_id,rater,score\n1,1,a,x\n")
    assert main(["report", str(src), "--out", str(tmp_path / "r.html")]) == 2
    assert (
        "several columns could be the task column ('item', 'item_id'); choose one with --task-col"
        in capsys.readouterr().err
    )


def test_docs_list_every_format():
    data = (ROOT / "docs" / "DATA.md").read_text()
    readme = (ROOT / "README.md").read_text()
    assert all(f"`{name}`" in data for name in format_names())
    assert "## From your labelling tool" in readme


# ------------------------------------------------------------------------------------ structural fuzzing
def _paths(obj, prefix=()):
    yield prefix
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _paths(v, (*prefix, i))


def _replaced(obj, path, value):
    if not path:
        return value
    out = obj.copy()
    out[path[0]] = _replaced(obj[path[0]], path[1:], value)
    return out


ODD = [None, 5, -1, 2.5, "x", "", [], {}, [[]], [{}], True, {"start": 3, "end": 1}, [0, 99999, "PER"]]


def _json_mutants(data: bytes, jsonl: bool, rng) -> list[bytes]:
    import json

    docs = [json.loads(x) for x in data.splitlines() if x.strip()] if jsonl else [json.loads(data)]
    out = []
    for _ in range(60):
        d = int(rng.integers(len(docs)))
        paths = list(_paths(docs[d]))
        path = paths[int(rng.integers(len(paths)))]
        new = list(docs)
        new[d] = _replaced(docs[d], path, ODD[int(rng.integers(len(ODD)))])
        out.append(("\n".join(json.dumps(x) for x in new) if jsonl else json.dumps(new[0])).encode())
    return out


def _table_mutants(data: bytes, sep: bytes, rng) -> list[bytes]:
    lines = data.splitlines()
    out = []
    for _ in range(40):
        rows = [line.split(sep) for line in lines]
        r, c = int(rng.integers(len(rows))), int(rng.integers(len(rows[0])))
        if c < len(rows[r]):
            rows[r][c] = [b"", b"maybe", b'"', b'{"choices": 5}', b"[1,2", b"Rejected"][int(rng.integers(6))]
        out.append(b"\n".join(sep.join(row) for row in rows))
    return out


@pytest.mark.slow
@pytest.mark.parametrize("name,fmt", sorted(FIXTURES.items()))
def test_structural_mutants_give_only_user_errors(name, fmt, tmp_path):
    """Every value of the fixture replaced, one at a time at random, by a value of another type (or a cell by odd
    text): read, or one UserInputError."""
    import numpy as np

    rng = np.random.default_rng(23)
    data = (FIX / name).read_bytes()
    suffix = Path(name).suffix
    if suffix in (".json", ".jsonl"):
        mutants = _json_mutants(data, suffix == ".jsonl", rng)
    else:
        mutants = _table_mutants(data, b"\t" if suffix == ".tsv" else b",", rng)
    for i, m in enumerate(mutants):
        path = tmp_path / f"m{i}{suffix}"
        path.write_bytes(m)
        try:
            read_answers(path, format=fmt, field=FIELD.get(name))
        except UserInputError as exc:  # the readers' own messages, not the dispatcher's safety net
            assert "does not have the structure" not in str(exc), str(exc)
