"""Benchmark: Dawid–Skene on the Dask engine, up to 10⁸ responses on one machine (issue 15 items 4–5).

For each size (default 10⁷, 3·10⁷, 10⁸ responses; 5 per item on average, 1,000 annotators, K = 4) it

1. writes the simulated responses as partitioned Parquet, one file of ``--chunk`` rows per task on the cluster
   (no process ever holds more than one chunk; items are scattered over all files, as in a label log);
2. ingests them (census, one shuffle by task, coding) and fits ``ds`` with coded partitions re-read from disk
   every iteration (``cache='disk'``), then writes posteriors and labels as partitioned Parquet;
3. prints time per EM iteration, total time, worker CPU seconds, peak RSS of every worker process per phase
   (Linux VmHWM, reset at the start of each phase), the accuracy against the simulated truth and the load average.

The last table is the weak-scaling view: responses grow 10×, memory per worker must stay flat (bounded by the
partition size) and time per iteration grow linearly.  Run:

    python benchmarks/bench_dask.py                    # 10⁷, 3·10⁷, 10⁸ (≈ 10 GB of disk at most; cleaned up)
    python benchmarks/bench_dask.py --sizes 1e6 --max-iter 10  # quick check
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from _common import make_parser

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

K = 4
N_WORKERS_SIM = 1000
PER_ITEM = 5
PRIOR = np.array([0.4, 0.3, 0.2, 0.1])
LABELS = np.array(["bird", "cat", "dog", "fish"])
BYTES_PER_RESPONSE = 60  # input + shuffle spill + coded + output, generous


# ------------------------------------------------------------------------------------------- simulation
def confusions(seed: int = 0) -> np.ndarray:
    """Annotators' confusion matrices: accuracy U(0.55, 0.95), errors Dirichlet over the other labels."""
    rng = np.random.default_rng(seed)
    acc = rng.uniform(0.55, 0.95, N_WORKERS_SIM)
    conf = rng.dirichlet(np.ones(K - 1), size=(N_WORKERS_SIM, K)) * (1 - acc)[:, None, None]
    out = np.empty((N_WORKERS_SIM, K, K))
    for k in range(K):
        others = [j for j in range(K) if j != k]
        out[:, k, others] = conf[:, k, :]
        out[:, k, k] = acc
    return out


def truth_of(task: np.ndarray) -> np.ndarray:
    """The true class of an item, a deterministic hash of its id (so every chunk agrees without sharing state)."""
    h = (task.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(11)
    u = h.astype(np.float64) / 2.0**53
    return np.searchsorted(np.cumsum(PRIOR), u, side="right").clip(0, K - 1)


def write_chunk(i: int, rows: int, n_items: int, path: str) -> int:
    """Chunk ``i`` of the label log: random items and annotators, labels drawn from the confusion matrices."""
    rng = np.random.default_rng([7, i])
    task = rng.integers(n_items, size=rows, dtype=np.int64)
    worker = rng.integers(N_WORKERS_SIM, size=rows).astype(np.int32)
    cum = np.cumsum(confusions()[worker, truth_of(task)], axis=1)
    label = (rng.random(rows)[:, None] > cum).sum(axis=1).clip(0, K - 1)
    table = pa.table({"task": task, "worker": worker, "label": pa.array(LABELS[label])})
    pq.write_table(table, f"{path}/part-{i:05d}.parquet")
    return rows


def accuracy_of(path: str) -> float:
    """Share of items whose written label is the simulated truth (read partition by partition)."""
    right = total = 0
    for f in sorted(Path(path).glob("*.parquet")):
        t = pq.read_table(f, columns=["task", "label"])
        task, label = t.column("task").to_numpy(), np.asarray(t.column("label").to_pylist())
        right += int((LABELS[truth_of(task)] == label).sum())
        total += len(task)
    return right / total


# ------------------------------------------------------------------------------------------- measuring
def _peak_mb() -> float:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM")) / 1024


def _reset_peak() -> None:
    with open("/proc/self/clear_refs", "w") as f:  # Linux: restart the peak-RSS (VmHWM) count
        f.write("5")


def _cpu_s() -> float:
    return float(sum(resource.getrusage(resource.RUSAGE_SELF)[:2]))


def worker_peaks_mb(client) -> list[float]:
    """Peak RSS (MB) of every worker process since the last :func:`fresh`."""
    return [round(v) for v in client.run(_peak_mb).values()]


def worker_cpu_s(client) -> float:
    """CPU seconds (user + system) of all worker processes so far (unlike wall time, robust to other load)."""
    return float(sum(client.run(_cpu_s).values()))


def fresh(client) -> float:
    """Start a phase: reset every worker's peak RSS; returns the workers' CPU seconds so far."""
    client.run(_reset_peak)
    return worker_cpu_s(client)


def run_size(client, n: int, args: argparse.Namespace, root: Path) -> dict:
    from fusion_core.engines.dask import DaskDawidSkene, ingest

    n_items = n // PER_ITEM
    data, scratch, out = root / f"in-{n}", root / f"scratch-{n}", root / f"out-{n}"
    for p in (data, scratch, out):
        p.mkdir(parents=True, exist_ok=True)
    row = {"responses": n, "items": n_items}
    fresh(client)
    t0 = time.perf_counter()
    chunks = [(i, min(args.chunk, n - i * args.chunk)) for i in range((n + args.chunk - 1) // args.chunk)]
    futures = client.map(write_chunk, *zip(*chunks), n_items=n_items, path=str(data), pure=False)
    assert sum(client.gather(futures)) == n
    row["generate s"] = time.perf_counter() - t0
    row["generate peak MB"] = max(worker_peaks_mb(client))

    cpu0 = fresh(client)
    t0 = time.perf_counter()
    coded = ingest(str(data), scratch=str(scratch), partition_size=args.partition_size)
    row["ingest s"] = time.perf_counter() - t0
    row["ingest CPU s"] = worker_cpu_s(client) - cpu0
    row["ingest peak MB"] = max(worker_peaks_mb(client))
    row["partitions"] = coded.n_partitions
    shutil.rmtree(data)  # the coded partitions are all the fit needs

    cpu0 = fresh(client)
    t0 = time.perf_counter()
    est = DaskDawidSkene(max_iter=args.max_iter).fit(coded, output=str(out))
    row["fit s"] = time.perf_counter() - t0
    row["EM peak MB"] = worker_peaks_mb(client)
    res = est.result_
    row["iterations"] = res.n_iter
    row["converged"] = res.converged
    row["s/iter"] = float(np.median(res.iteration_seconds))
    row["min s/iter"] = float(np.min(res.iteration_seconds))
    row["CPU s/pass"] = (worker_cpu_s(client) - cpu0) / (res.n_iter + 2)  # start pass + one per E-step + output pass
    row["log-likelihood"] = res.log_likelihood[-1]
    row["accuracy"] = accuracy_of(str(out))
    row["load"] = os.getloadavg()
    coded.cleanup()
    if args.cleanup:
        shutil.rmtree(root, ignore_errors=True)
    print(
        f"\n{n:,} responses ({n_items:,} items, {coded.n_partitions} partitions): "
        f"generate {row['generate s']:.0f} s, ingest {row['ingest s']:.0f} s, "
        f"fit {row['fit s']:.0f} s ({res.n_iter} iterations, converged {res.converged}); "
        f"per iteration median {row['s/iter']:.2f} s (all: {', '.join(f'{s:.1f}' for s in res.iteration_seconds)}); "
        f"worker CPU {row['CPU s/pass']:.2f} s per pass, ingest {row['ingest CPU s']:.0f} s"
    )
    print(
        f"  peak RSS per worker: generate {row['generate peak MB']} MB, ingest {row['ingest peak MB']} MB, "
        f"EM + output {row['EM peak MB']} MB; accuracy {row['accuracy']:.4f}; "
        f"log-likelihood {row['log-likelihood']:.6e}; load average {row['load'][0]:.2f} {row['load'][1]:.2f}"
    )
    return row


def main() -> None:
    ap = make_parser(__doc__)
    ap.add_argument("--sizes", default="1e7,3e7,1e8", help="responses per run, comma-separated")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--memory-limit", default="4GB", help="per worker process")
    ap.add_argument("--chunk", type=int, default=2_000_000, help="rows per generated Parquet file")
    ap.add_argument("--partition-size", type=int, default=2_000_000, help="responses per coded partition")
    ap.add_argument("--max-iter", type=int, default=100)
    ap.add_argument("--dir", default=str(Path(__file__).resolve().parents[1] / ".bench_dask"))
    ap.add_argument("--keep", dest="cleanup", action="store_false", help="keep the files")
    args = ap.parse_args()
    sizes = [int(float(s)) for s in args.sizes.split(",")]
    root = Path(args.dir)
    need = max(sizes) * BYTES_PER_RESPONSE
    free = shutil.disk_usage(root.parent).free
    print(f"disk: {free / 1e9:.0f} GB free at {root.parent}, at most {need / 1e9:.0f} GB needed per run")
    if need > free / 2:
        raise SystemExit("not enough free disk for the largest run (keep half the disk free); use --sizes")

    from distributed import Client, LocalCluster

    cluster = LocalCluster(
        n_workers=args.workers,
        threads_per_worker=1,
        processes=True,
        memory_limit=args.memory_limit,
        local_directory=str(root / "dask-worker-space"),
        dashboard_address=None,
    )
    rows = []
    try:
        with Client(cluster) as client:
            print(f"LocalCluster: {args.workers} worker processes × 1 thread, memory limit {args.memory_limit} each")
            for n in sizes:
                rows.append(run_size(client, n, args, root / f"run-{n}"))
    finally:
        cluster.close()
        if args.cleanup:
            shutil.rmtree(root, ignore_errors=True)
    table = pd.DataFrame(rows).set_index("responses")
    per = table.index.to_numpy() / 1e7
    table["CPU s/pass per 10^7"] = table["CPU s/pass"] / per
    table["ingest CPU s per 10^7"] = table["ingest CPU s"] / per
    table["EM peak MB (max)"] = [max(v) for v in table["EM peak MB"]]
    cols = ["partitions", "ingest s", "ingest CPU s per 10^7", "ingest peak MB", "iterations", "s/iter"]
    cols += ["min s/iter", "CPU s/pass per 10^7", "fit s", "EM peak MB (max)", "accuracy"]
    print("\nweak scaling (same cluster, data ×10: memory per worker flat, time per iteration linear)")
    print("(wall times depend on the machine's load; worker CPU seconds per 10^7 responses do not)")
    with pd.option_context("display.width", 200, "display.float_format", "{:.3f}".format):
        print(table[cols].to_string())
    print(f"main process peak RSS: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")


if __name__ == "__main__":
    main()
