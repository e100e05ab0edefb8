"""Reading the labelling tools' exports (issue 23): time and peak memory of ``read_answers`` on synthetic exports
of a chosen size — Label Studio JSON (parsed whole), MTurk batch results CSV and Prodigy JSONL (streamed).

Each file is read in a fresh Python process: the resident set size is taken after the imports, the high-water mark
reset (``/proc/self/clear_refs``), the file read, and the peak above the baseline printed beside the file size.

Run:  python benchmarks/bench_formats.py [--mb 20]
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from _common import CHILD_RSS, ROOT, make_parser

CHILD = (
    CHILD_RSS
    + r"""
import re, sys, time
from fusion_core.data.answers import read_answers
base = reset_peak()
t0 = time.perf_counter()
a = read_answers(sys.argv[1], max_bytes=1 << 31)
dt = time.perf_counter() - t0
print(f"{a.format}: {a.responses.n_responses:,} responses in {dt:.2f} s, peak +{(rss()[1] - base) / 2**20:.0f} MB")
"""
)


def label_studio(path: Path, n_tasks: int, rng: np.random.Generator) -> None:
    tasks = []
    for t in range(n_tasks):
        anns = [
            {
                "id": t * 5 + k,
                "completed_by": int(w),
                "result": [
                    {"from_name": "sentiment", "to_name": "text", "type": "choices",
                     "value": {"choices": [str(rng.choice(["Positive", "Negative", "Neutral"]))]}}
                ],
                "was_cancelled": bool(rng.random() < 0.02),
                "ground_truth": False,
                "lead_time": round(float(rng.random() * 10), 3),
            }
            for k, w in enumerate(rng.choice(200, 5, replace=False))
        ]  # fmt: skip
        tasks.append({"id": t, "data": {"text": f"review number {t} " + "lorem " * 8}, "annotations": anns})
    path.write_text(json.dumps(tasks))


def mturk(path: Path, n_rows: int, rng: np.random.Generator) -> None:
    opts = np.array(["cat", "dog", "other"])
    pick = rng.integers(0, 3, n_rows)
    with path.open("w") as fh:
        fh.write(
            "HITId,WorkerId,AssignmentStatus,Input.image_url,Answer.animal.cat,Answer.animal.dog,Answer.animal.other\n"
        )
        for i in range(n_rows):
            flags = ",".join("true" if pick[i] == k else "false" for k in range(3))
            fh.write(f"HIT{i // 5:08d},W{rng.integers(0, 500):05d},Approved,https://example.org/{i // 5}.jpg,{flags}\n")
    del opts


def prodigy(path: Path, n_rows: int, rng: np.random.Generator) -> None:
    with path.open("w") as fh:
        for i in range(n_rows):
            obj = {"text": f"ticket {i // 5}", "_input_hash": i // 5, "_task_hash": i // 5 + 7, "accept": [str(rng.choice(["A", "B", "C"]))],
                   "answer": "accept", "_annotator_id": f"ann-{rng.integers(0, 50)}"}  # fmt: skip
            fh.write(json.dumps(obj) + "\n")


def main() -> None:
    p = make_parser(__doc__)
    p.add_argument("--mb", type=float, default=20.0, help="approximate size of each file (MB)")
    args = p.parse_args()
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as tmp:
        files = {
            "label_studio.json": (label_studio, int(args.mb * 1e6 / 1300)),
            "mturk.csv": (mturk, int(args.mb * 1e6 / 90)),
            "prodigy.jsonl": (prodigy, int(args.mb * 1e6 / 150)),
        }
        for name, (make, n) in files.items():
            path = Path(tmp) / name
            make(path, n, rng)
            out = subprocess.run(
                [sys.executable, "-c", CHILD, str(path)], capture_output=True, text=True, cwd=ROOT, check=False
            )
            line = out.stdout.strip() or out.stderr.strip().splitlines()[-1]
            print(f"{name:18s} {path.stat().st_size / 1e6:6.1f} MB  {line}")


if __name__ == "__main__":
    main()
