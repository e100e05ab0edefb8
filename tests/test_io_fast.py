"""The fast I/O path (issue 15): CSV read by pyarrow's parallel streaming reader in many blocks, id columns encoded
in bulk or batch by batch, formula escaping from first bytes, CSV written by threads in pieces — with the reading
rules of docs/DATA.md unchanged (text exactly as written, row numbers in errors, duplicate policies)."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import fusion_core.data.export as export
import fusion_core.data.tabular as tabular
from fusion_core.cli import main
from fusion_core.data.export import csv_bytes, escape_formulas, read_csv_export
from fusion_core.data.loading import load_responses, read_table
from fusion_core.data.readers import Encoder
from fusion_core.data.stages import stage, timed
from fusion_core.errors import UserInputError

ODD = ["007", "7", "1e3", "1000", "NA", "null", "=1+2", "+cmd", "-1", "@x", "'q", "a,b", 'say "hi"', "x\ny", "x\r\ny"]
ODD += ["é", "日本", " pad ", "TRUE", "true", "0x1F", "-0", "0", "1.0", "1"]


@pytest.fixture
def small_blocks(monkeypatch):
    """CSV read in 256-byte blocks (many batches, so the per-batch, bulk and merge paths all run)."""
    monkeypatch.setattr(tabular, "_BLOCK", 256)
    monkeypatch.setattr(Encoder, "MERGE_BYTES", 64)


def _csv(rows: list[tuple[str, str, str]]) -> bytes:
    return csv_bytes(pd.DataFrame(rows, columns=["task", "worker", "label"]), escape_formulas=False)


def _odd_rows(n: int, seed: int = 0) -> list[tuple[str, str, str]]:
    rng = np.random.default_rng(seed)
    return [
        (f"t{rng.integers(0, n // 3)}-{ODD[i % len(ODD)]}", ODD[rng.integers(len(ODD))], ODD[i % 4]) for i in range(n)
    ]


@pytest.mark.parametrize("ratio", [1 / 16, 0.0, 2.0])  # adaptive, always bulk, never bulk
def test_streamed_blocks_read_text_exactly(small_blocks, monkeypatch, ratio):
    monkeypatch.setattr(Encoder, "BULK_RATIO", ratio)
    rows = _odd_rows(600)
    table = read_table(_csv(rows), name="a.csv")
    got = [tuple(map(str, r)) for r in table.astype(object).itertuples(index=False)]
    assert got == rows


@pytest.mark.parametrize("bulk_bytes", [0, 1, 200, 5_000, 10**9])
def test_encoder_matches_factorize_for_any_batching(monkeypatch, bulk_bytes):
    monkeypatch.setattr(Encoder, "MERGE_BYTES", 50)
    rng = np.random.default_rng(bulk_bytes)
    values = np.array([f"v{k}" for k in rng.integers(0, 300, 5_000)], dtype=object)
    values[rng.random(len(values)) < 0.05] = None
    enc, start = Encoder(16, bulk_bytes), 0
    while start < len(values):
        size = int(rng.integers(1, 400))
        enc.add(start, pa.array(values[start : start + size], pa.string()))
        start += size
    col = enc.finish(len(values), tabular.ReadOptions())
    codes, uniques = pd.factorize(pd.Series(values))
    assert list(col.values) == list(uniques)  # first-appearance order
    np.testing.assert_array_equal(col.codes.astype(np.int64), codes)


def test_round_trip_of_odd_ids_through_the_cli(small_blocks, tmp_path, capsys):
    truth = {f"q{i}{ODD[i % len(ODD)]}": ODD[(i * 7) % len(ODD)] for i in range(120)}
    other = {t: ODD[(k * 7 + 3) % len(ODD)] for k, t in enumerate(truth)}
    rows = [(t, f"w{j}{ODD[j]}", lab) for t, lab in truth.items() for j in range(3)]
    rows += [(t, "w9", lab) for t, lab in other.items()]  # outvoted
    src = tmp_path / "a.csv"
    src.write_bytes(_csv(rows))
    for fmt in ("csv", "parquet"):
        out = tmp_path / fmt
        assert main(["fit", str(src), "--out", str(out), "--method", "mv", "--format", fmt]) == 0
        labels = read_csv_export(out / "labels.csv") if fmt == "csv" else pd.read_parquet(out / "labels.parquet")
        assert dict(zip(labels["task"], labels["label"])) == truth
        workers = read_csv_export(out / "workers.csv") if fmt == "csv" else pd.read_parquet(out / "workers.parquet")
        assert set(workers["worker"]) == {f"w{j}{ODD[j]}" for j in range(3)} | {"w9"}
        if fmt == "csv":
            cells = [c for line in (out / "labels.csv").read_bytes().split(b"\n")[1:] for c in line.split(b",")]
            assert not any(c.startswith((b'"=', b'"+', b'"@')) for c in cells)
    capsys.readouterr()


def test_bad_rows_are_numbered_when_read_in_parallel(small_blocks):
    rows = _csv([(f"t{i}", f"w{i % 4}", "x") for i in range(500)])
    lines = rows.splitlines(keepends=True)
    short = b"".join(lines[:401]) + b'"t9","w1"\n' + b"".join(lines[401:])
    with pytest.raises(UserInputError, match=r"row 402 \(counting the header as row 1\) has 2 field"):
        load_responses(short, name="a.csv")
    long = b"".join(lines[:301]) + b'"t9","w1","x","y"\n' + b"".join(lines[301:])
    with pytest.raises(UserInputError, match=r"row 302 .* has 4 field"):
        load_responses(long, name="a.csv")
    latin = b"".join(lines[:450]) + "t1,w1,caf\u00e9\n".encode("latin-1") + b"".join(lines[450:])
    with pytest.raises(UserInputError, match=r"not UTF-8 text \(byte 0xe9 on line 451\)"):
        load_responses(latin, name="a.csv")


@pytest.mark.parametrize("policy, kept", [("keep", 9), ("first", 6), ("last", 6)])
def test_duplicate_policies_on_streamed_files(small_blocks, policy, kept):
    rows = [("t1", "w1", "a"), ("t1", "w2", "b"), ("t1", "w1", "b"), ("t2", "w1", "a"), ("t2", "w2", "a")]
    rows += [("t2", "w2", "b"), ("t3", "w1", "a"), ("t3", "w2", "b"), ("t3", "w1", "b")]
    resp = load_responses(_csv(rows), name="a.csv", duplicates=policy)
    assert resp.n_responses == kept and resp.report.duplicate_rows == 3
    if policy != "keep":
        frame = resp.to_frame()
        w1 = frame[(frame.task == "t1") & (frame.worker == "w1")]["label"].tolist()
        assert w1 == (["a"] if policy == "first" else ["b"])
    with pytest.raises(UserInputError, match=r"3 rows repeat a \(task, worker\) pair, e.g. task 't1' by worker 'w1'"):
        load_responses(_csv(rows), name="a.csv", duplicates="error")


def _escape_reference(values: pa.Array) -> pa.Array:
    starts = pc.fill_null(pc.match_substring_regex(values, r"^[=+\-@\t\r']"), False)
    number = pc.fill_null(pc.match_substring_regex(values, f"^{export.NUMBER}$"), False)
    escape = pc.and_(starts, pc.invert(number))
    return pc.if_else(escape, pc.utf8_replace_slice(values, start=0, stop=0, replacement="'"), values)


@pytest.mark.parametrize("large", [False, True])
def test_first_byte_escaping_equals_the_regex_rule(large):
    rng = np.random.default_rng(1)
    alphabet = list("=+-@\t\r'01e.xé ")
    values = ["".join(rng.choice(alphabet, size=rng.integers(0, 5))) for _ in range(3_000)]
    arr = pa.array([None if i % 17 == 0 else v for i, v in enumerate(values)], pa.large_string() if large else None)
    for part in (arr, arr.slice(5), arr.slice(1000, 700), pa.chunked_array([arr.slice(0, 10), arr.slice(10)])):
        flat = part.combine_chunks() if isinstance(part, pa.ChunkedArray) else part
        assert escape_formulas(part).to_pylist() == _escape_reference(flat).to_pylist()


def test_categorical_columns_are_written_like_text_columns():
    rng = np.random.default_rng(2)
    codes = rng.integers(-1, 3, 1_000)
    categorical = pd.Categorical.from_codes(codes, categories=["-a", "7", "@b"])
    df = pd.DataFrame({"task": [f"=t{i}" if i % 7 == 0 else f"t{i}" for i in range(1_000)], "p": rng.random(1_000)})
    coded = csv_bytes(df.assign(label=categorical))
    assert coded == csv_bytes(df.assign(label=pd.Series(categorical.astype(object), dtype=object)))
    back = read_csv_export(coded)
    assert back["task"].tolist() == df["task"].tolist()
    assert (
        back["label"].fillna("<missing>").tolist() == pd.Series(categorical).astype(object).fillna("<missing>").tolist()
    )
    assert np.array_equal(back["p"].astype(float).to_numpy(), df["p"].to_numpy())  # shortest text, same number


def test_stages_are_timed_only_when_collected(tmp_path, capsys):
    with stage("read", "nobody listens"):
        pass
    with timed() as timings, stage("read", "a.csv"):
        sum(range(1000))
    assert [(s.name, s.detail) for s in timings.stages] == [("read", "a.csv")] and timings.stages[0].wall >= 0
    src = tmp_path / "a.csv"
    src.write_bytes(_csv([(f"t{i}", f"w{i % 3}", "ab"[(i * i) % 2]) for i in range(60)]))
    assert main(["fit", str(src), "--out", str(tmp_path / "o"), "--method", "mv", "--timings"]) == 0
    err = capsys.readouterr().err
    names = [line.split()[0] for line in err.splitlines() if line.split()]
    for name in ("stage", "start", "read", "validate", "code", "fit", "write", "total"):
        assert name in names
    assert "write labels.csv (60 rows)" in err and "write posteriors.csv" in err and "read a.csv" in err


def test_labels_column_is_text_in_parquet(tmp_path, capsys):
    src = tmp_path / "a.csv"
    src.write_bytes(_csv([(f"t{i}", f"w{i % 3}", ["007", "7"][(i + i // 3) % 2]) for i in range(30)]))
    assert main(["fit", str(src), "--out", str(tmp_path), "--method", "mv", "--format", "parquet"]) == 0
    labels = pa.parquet.read_table(tmp_path / "labels.parquet")
    assert labels.schema.field("label").type == pa.string()
    assert set(labels.column("label").to_pylist()) <= {"007", "7"}
    capsys.readouterr()
    assert io  # the module's imports stay used when tests are trimmed
