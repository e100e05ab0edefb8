"""Peak memory of reading responses (issue 11, point 3): a 50 MB CSV and a Parquet file declaring 10^8 rows.

Each measurement runs in a fresh Python process: the resident set size (RSS) is taken after the imports, the
high-water mark is reset (``/proc/self/clear_refs``), the file is loaded with ``load_responses``, and the peak RSS
above the baseline is printed beside the file size.  The target is a peak ≤ 4× the file size for CSV; the Parquet
file must be refused from its metadata, before any data is read.

Run:  python benchmarks/bench_io_memory.py [--mb 50]
"""

from __future__ import annotations

import argparse
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

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, re, sys, time
def rss():
    status = open('/proc/self/status').read()
    return [int(re.search(rf'{k}:\s+(\d+)', status).group(1)) * 1024 for k in ('VmRSS', 'VmHWM')]
from fusion_core.data.loading import load_responses
from fusion_core.errors import UserInputError
open('/proc/self/clear_refs', 'w').write('5')
base = rss()[0]
t0 = time.perf_counter()
try:
    resp = load_responses(sys.argv[1], max_bytes=int(sys.argv[2]))
    outcome = f"loaded {resp.n_responses:,} responses, {resp.n_items:,} items, {resp.n_workers:,} workers"
except UserInputError as exc:
    outcome = f"refused: {exc}"
seconds = time.perf_counter() - t0
now, peak = rss()
print(json.dumps({"outcome": outcome, "seconds": seconds, "peak_delta": peak - base, "after": now - base}))
"""


def measure(path: Path, max_bytes: int) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(path), str(max_bytes)], capture_output=True, text=True, cwd=ROOT, check=True
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


def write_huge_parquet(path: Path, rows: int = 10**8, group: int = 10**6) -> None:
    """A small file that declares ``rows`` rows: one constant dictionary-encoded value per column (RLE)."""
    schema = pa.schema([(c, pa.dictionary(pa.int32(), pa.string())) for c in ("task", "worker", "label")])
    block = pa.DictionaryArray.from_arrays(pa.array(np.zeros(group, dtype=np.int32)), pa.array(["x"]))
    with pq.ParquetWriter(path, schema, compression="zstd") as writer:
        for _ in range(rows // group):
            writer.write_table(pa.table([block, block, block], schema=schema))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=50.0, help="size of the CSV files (MB)")
    args = ap.parse_args()
    limit = 1024 * 1024 * 1024
    with tempfile.TemporaryDirectory() as tmp:
        print(
            "peak RSS = high-water mark above the RSS after imports, in a fresh process per file (ratio: to the file)"
        )
        print(f"{'file':<34} {'size':>9} {'peak RSS':>10} {'ratio':>6} {'time':>7}  outcome")
        for shape in ("numeric", "text"):
            path = Path(tmp) / f"answers_{shape}.csv"
            write_csv(path, args.mb, shape)
            _report(f"CSV, {shape} ids", path, measure(path, limit))
        huge = Path(tmp) / "declares_1e8_rows.parquet"
        t0 = time.perf_counter()
        write_huge_parquet(huge)
        print(f"(wrote the 10^8-row Parquet in {time.perf_counter() - t0:.1f} s)")
        _report("Parquet declaring 10^8 rows", huge, measure(huge, limit))
        _report("same, 200 MB limit (app default)", huge, measure(huge, 200 * 1024 * 1024))


def _report(label: str, path: Path, m: dict) -> None:
    size = path.stat().st_size
    mb = 1024 * 1024
    ratio = "    —" if m["outcome"].startswith("refused") else f"{m['peak_delta'] / size:>5.2f}×"
    print(
        f"{label:<34} {size / mb:>7.2f} MB {m['peak_delta'] / mb:>7.1f} MB {ratio} "
        f"{m['seconds']:>6.2f}s  {m['outcome'][:110]}"
    )


if __name__ == "__main__":
    main()
