"""Peak memory of reading responses (issue 11 point 3, issue 25 item 3): 50 MB CSV and JSON-lines answers, a CSV
with one 50 MB field, JSON lines with a new key on every line, and Parquet files declaring 10^8 / 8.9·10^7 rows.

Each measurement runs in a fresh Python process: the resident set size (RSS) is taken after the imports, the
high-water mark is reset (``/proc/self/clear_refs``), the file is loaded with ``load_responses`` (``read_table``
for the rows marked "table"), and the peak RSS above the baseline is printed beside the file size.  The target is a
peak ≤ 4× the file size for CSV and JSON lines; the Parquet bombs and the key-per-line file must be refused before
their data is allocated (a refusal's peak is printed in MB).

Run:  python benchmarks/bench_io_memory.py [--mb 50] [--only csv,field,jsonl,keys,parquet]
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from _common import CHILD_RSS, ROOT, make_parser

CHILD = (
    CHILD_RSS
    + r"""
import json, re, sys, time
from fusion_core.data.loading import load_responses, read_table
from fusion_core.errors import UserInputError
base = reset_peak()
t0 = time.perf_counter()
try:
    if sys.argv[3] == "table":
        df = read_table(sys.argv[1], max_bytes=int(sys.argv[2]))
        outcome = f"read {df.shape[0]:,} rows x {df.shape[1]:,} columns"
    else:
        resp = load_responses(sys.argv[1], max_bytes=int(sys.argv[2]))
        outcome = f"loaded {resp.n_responses:,} responses, {resp.n_items:,} items, {resp.n_workers:,} workers"
except UserInputError as exc:
    outcome = f"refused: {exc}"
seconds = time.perf_counter() - t0
now, peak = rss()
print(json.dumps({"outcome": outcome, "seconds": seconds, "peak_delta": peak - base, "after": now - base}))
"""
)


def measure(path: Path, max_bytes: int, how: str = "responses") -> dict:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(path), str(max_bytes), how],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def write_csv(path: Path, target_mb: float, shape: str, seed: int = 0) -> None:
    """A long-format answers file of about ``target_mb`` MB: ``numeric`` ids like ``fusion-core simulate`` writes
    (``12345,w12,2``) or ``text`` ids as exported by labelling tools (``q-00012345,annotator_042,positive``)."""
    rng = np.random.default_rng(seed)
    row_bytes = 12 if shape == "numeric" else 36
    n = int(target_mb * 1024 * 1024 / row_bytes)
    items = rng.integers(0, n // 5, n)
    workers = rng.integers(0, 500, n)
    labels = rng.integers(0, 3, n)
    if shape == "numeric":
        df = pd.DataFrame({"task": items, "worker": np.char.add("w", workers.astype(str)), "label": labels})
    else:
        df = pd.DataFrame(
            {
                "task": np.char.add("q-", np.char.zfill(items.astype(str), 8)),
                "worker": np.char.add("annotator_", np.char.zfill(workers.astype(str), 3)),
                "label": np.array(["positive", "negative", "neutral"])[labels],
            }
        )
    df.to_csv(path, index=False)


def write_jsonl(path: Path, target_mb: float, seed: int = 0) -> None:
    """The ``text`` answers of :func:`write_csv` as JSON lines."""
    csv = path.with_suffix(".csv")
    write_csv(csv, target_mb / 2, "text", seed)
    pd.read_csv(csv, dtype=str).to_json(path, orient="records", lines=True)
    csv.unlink()


def write_one_field(path: Path, target_mb: float) -> None:
    """A small answers CSV whose one label cell is ``target_mb`` MB long (quoted)."""
    with path.open("w") as fh:
        fh.write("task,worker,label\n1,a,x\n1,b,y\n2,a,y\n")
        fh.write('2,b,"' + "z" * int(target_mb * 1024 * 1024) + '"\n')


def write_key_per_line(path: Path, lines: int = 30_000) -> None:
    """About 1.1 MB of JSON lines, each with one key no other line has (a sparse table of lines² cells)."""
    with path.open("w") as fh:
        for i in range(lines):
            fh.write(json.dumps({"task": str(i), "worker": "a", f"k{i}": "v"}) + "\n")


def write_huge_parquet(path: Path, rows: int = 10**8, group: int = 10**6) -> None:
    """A small file that declares ``rows`` rows: one constant dictionary-encoded value per column (RLE)."""
    schema = pa.schema([(c, pa.dictionary(pa.int32(), pa.string())) for c in ("task", "worker", "label")])
    block = pa.DictionaryArray.from_arrays(pa.array(np.zeros(group, dtype=np.int32)), pa.array(["x"]))
    with pq.ParquetWriter(path, schema, compression="zstd") as writer:
        for _ in range(rows // group):
            writer.write_table(pa.table([block, block, block], schema=schema))


def main() -> None:
    ap = make_parser(__doc__)
    ap.add_argument("--mb", type=float, default=50.0, help="size of the CSV / JSON-lines files (MB)")
    ap.add_argument("--only", default="csv,field,jsonl,keys,parquet", help="comma-separated cases to run")
    args = ap.parse_args()
    only = set(args.only.split(","))
    limit = 1024 * 1024 * 1024
    with tempfile.TemporaryDirectory() as tmp:
        print(
            "peak RSS = high-water mark above the RSS after imports, in a fresh process per file (ratio: to the file)"
        )
        print(f"{'file':<34} {'size':>9} {'peak RSS':>10} {'ratio':>6} {'time':>7}  outcome")
        if "csv" in only:
            for shape in ("numeric", "text"):
                path = Path(tmp) / f"answers_{shape}.csv"
                write_csv(path, args.mb, shape)
                _report(f"CSV, {shape} ids", path, measure(path, limit))
                path.unlink()
        if "field" in only:
            path = Path(tmp) / "one_field.csv"
            write_one_field(path, args.mb)
            _report("CSV, one field of the whole file", path, measure(path, limit))
            _report("same, read_table", path, measure(path, limit, "table"))
            path.unlink()
        if "jsonl" in only:
            path = Path(tmp) / "answers.jsonl"
            write_jsonl(path, args.mb)
            _report("JSON lines, text ids", path, measure(path, limit))
            path.unlink()
        if "keys" in only:
            path = Path(tmp) / "key_per_line.jsonl"
            write_key_per_line(path)
            _report("JSON lines, a new key per line", path, measure(path, limit, "table"))
        if "parquet" in only:
            huge = Path(tmp) / "declares_1e8_rows.parquet"
            t0 = time.perf_counter()
            write_huge_parquet(huge)
            print(f"(wrote the 10^8-row Parquet in {time.perf_counter() - t0:.1f} s)")
            _report("Parquet declaring 10^8 rows", huge, measure(huge, limit))
            _report("same, 200 MB limit (app default)", huge, measure(huge, 200 * 1024 * 1024))
            bomb = Path(tmp) / "declares_89M_rows.parquet"
            write_huge_parquet(bomb, rows=89 * 10**6)
            _report("Parquet declaring 8.9·10^7 rows", bomb, measure(bomb, limit))


def _report(label: str, path: Path, m: dict) -> None:
    size = path.stat().st_size
    mb = 1024 * 1024
    ratio = "    —" if m["outcome"].startswith("refused") else f"{m['peak_delta'] / size:>5.2f}×"
    m["outcome"] = m["outcome"].replace("\n", " ")
    print(
        f"{label:<34} {size / mb:>7.2f} MB {m['peak_delta'] / mb:>7.1f} MB {ratio} "
        f"{m['seconds']:>6.2f}s  {m['outcome'][:110]}"
    )


if __name__ == "__main__":
    main()
