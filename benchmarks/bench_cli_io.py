"""`fusion-core fit` end to end on a 1M- and a 10M-row answers CSV (issue 15, point 2): the stage breakdown.

The answers file is simulated Dawid–Skene data written as ``fusion-core simulate`` writes it (``task, worker,
label`` with ids ``t123``/``w45``): K = 4 classes, 5 responses per item (200k items at 1M rows, 2M items at 10M
rows), 1,000 annotators.  Each run is a fresh process:

* ``cli``: ``python -m fusion_core fit FILE --out DIR --timings`` — the command line's own breakdown (read,
  validate, code, fit, write per file; wall and CPU seconds), the process's wall time from launch to exit
  (interpreter and imports included) and its peak RSS;
* ``stages`` (``--code DIR`` of any checkout, e.g. the one before this work, which has no ``--timings``): the same
  stages timed from outside by calling the library functions the command line calls.

DS runs with a fixed ``max_iter`` (EM speed is measured by ``bench_ds_large.py``) and with its defaults
(``--default-iter``).  The machine is shared: the load average is printed before and after each run, and CPU
seconds beside wall seconds (wall ≈ CPU when a core is free; only the CSV parser uses threads).

Run:  python benchmarks/bench_cli_io.py [--rows 1000000 10000000] [--max-iter 5] [--code /path/to/old/checkout]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import make_parser

ROOT = Path(__file__).resolve().parents[1]

STAGES = r"""
import json, sys, time
t0 = time.perf_counter(); c0 = time.process_time()
from pathlib import Path
import fusion_core.cli as cli
from fusion_core.data.formats.dispatch import read_encoded
from fusion_core.data.readers import ReadOptions
from fusion_core.data.responses import Responses
from fusion_core.methods import create
out = []
def rec(name, f):
    w, c = time.perf_counter(), time.process_time()
    r = f()
    out.append([name, time.perf_counter() - w, time.process_time() - c])
    return r
out.append(["imports", time.perf_counter() - t0, time.process_time() - c0])
path, out_dir, max_iter = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
table = rec("read", lambda: read_encoded(path, options=ReadOptions(max_bytes=1 << 40)))
resp = rec("validate + code", lambda: Responses.from_table(table))
params = {"max_iter": max_iter} if max_iter > 0 else {}
est = rec("fit", lambda: create("ds", **params).fit(resp))
plain = cli.write_table
def timed_write(df, directory, stem, **kw):
    return rec(f"write {stem}", lambda: plain(df, directory, stem, **kw))
cli.write_table = timed_write
rec("write (tables + files)", lambda: cli.write_outputs(est, out_dir))
print(json.dumps(out))
"""


def simulate_csv(path: Path, rows: int) -> None:
    """A long answers CSV like ``fusion-core simulate`` writes (items in order, 5 answers each)."""
    import pyarrow as pa
    import pyarrow.csv as pcsv

    sys.path.insert(0, str(ROOT))
    from fusion_core.simulate import dawid_skene

    sim = dawid_skene(n_items=rows // 5, n_workers=1000, n_classes=4, responses_per_item=5, seed=0)
    pcsv.write_csv(pa.Table.from_pandas(sim.responses, preserve_index=False), str(path))


def run(cmd: list[str], code: Path) -> tuple[float, float, str, str]:
    """Wall seconds, peak RSS (MB), stdout and stderr of one child process."""
    env = {**os.environ, "PYTHONPATH": str(code)}
    t0 = time.perf_counter()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=env, cwd=code)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(), err.read().decode()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"failed: {' '.join(cmd)}\n{stderr}")
    return wall, usage.ru_maxrss / 1024, stdout, stderr


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load {one:.2f} {five:.2f} {fifteen:.2f}"


def main() -> None:
    ap = make_parser(__doc__)
    ap.add_argument("--rows", type=int, nargs="+", default=[1_000_000, 10_000_000])
    ap.add_argument("--max-iter", type=int, default=5, help="DS iterations of the fixed-iteration runs")
    ap.add_argument("--default-iter", action="store_true", help="also run DS with its default max_iter/tol")
    ap.add_argument("--code", type=Path, default=None, help="also time this checkout's stages from outside")
    ap.add_argument("--data", type=Path, default=Path(tempfile.gettempdir()) / "fusion_bench_cli_io")
    args = ap.parse_args()
    args.data.mkdir(parents=True, exist_ok=True)
    py = sys.executable
    for rows in args.rows:
        path = args.data / f"answers_{rows}.csv"
        if not path.exists():
            simulate_csv(path, rows)
        size = path.stat().st_size
        print(f"\n=== {rows:,} rows, {size / 1e6:.1f} MB ({path}) ===")
        iters = [args.max_iter] + ([0] if args.default_iter else [])
        for it in iters:
            label = f"max_iter={it}" if it else "DS defaults"
            if args.code is not None and it:  # the old checkout with the fixed iterations only
                before = load()
                wall, rss, stdout, _ = run(
                    [py, "-c", STAGES, str(path), str(args.data / "out_old"), str(it)], args.code
                )
                print(f"\n[stages, {args.code}, {label}]  {before} -> {load()}")
                for name, w, c in json.loads(stdout.strip().splitlines()[-1]):
                    print(f"  {name:<28} {w:7.2f} s wall  {c:7.2f} s CPU")
                print(f"  {'process (launch to exit)':<28} {wall:7.2f} s wall; peak RSS {rss:,.0f} MB")
            cmd = [py, "-m", "fusion_core", "fit", str(path), "--out", str(args.data / "out"), "--timings"]
            cmd += ["--param", f"max_iter={it}"] if it else []
            before = load()
            wall, rss, stdout, stderr = run(cmd, ROOT)
            print(f"\n[cli --timings, {ROOT}, {label}]  {before} -> {load()}")
            lines = stderr.splitlines()
            start = next((i for i, line in enumerate(lines) if line.startswith("stage")), len(lines))
            print("\n".join("  " + line for line in lines[start:]))
            print(
                f"  process (launch to exit): {wall:.2f} s wall; peak RSS {rss:,.0f} MB ({rss * 2**20 / size:.1f}× the file)"
            )


if __name__ == "__main__":
    main()
