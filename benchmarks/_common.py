"""Helpers shared by benchmark scripts: the command line (``--help``), dataset paths, peak memory, timing."""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATASETS = ROOT.parent / "shared" / "datasets"
sys.path.insert(0, str(ROOT))


def make_parser(doc: str | None) -> argparse.ArgumentParser:
    """The benchmark's command line, the same for every script: ``--help`` prints the script's docstring (what it
    measures and what it prints, ``benchmarks/README.md``) and exits before any work, any data or any import of a
    benchmark-only package.  Scripts add their own options to it and call ``parse_args()`` first thing."""
    text = (doc or "").strip()
    first, _, rest = text.partition("\n\n")
    return argparse.ArgumentParser(
        description=first, epilog=rest or None, formatter_class=argparse.RawDescriptionHelpFormatter
    )


def categorical_datasets() -> list[str]:
    """Names of the crowd (categorical) and ensemble datasets in ../shared/datasets, or [] when absent."""
    manifest = DATASETS / "manifest.json"
    if not manifest.exists():
        return []
    return [d["name"] for d in json.loads(manifest.read_text()) if d["kind"] in ("categorical", "ensemble")]


def load(name: str):
    import pandas as pd

    answers = pd.read_csv(DATASETS / name / "answers.csv")
    truth = pd.read_csv(DATASETS / name / "truth.csv").set_index("task")["truth"]
    return answers, truth


CHILD_RSS = r"""
import re
def rss():
    status = open('/proc/self/status').read()
    return [int(re.search(rf'{k}:\s+(\d+)', status).group(1)) * 1024 for k in ('VmRSS', 'VmHWM')]
def reset_peak():
    open('/proc/self/clear_refs', 'w').write('5')
    return rss()[0]
"""
"""Start of a child process's script that measures its memory (Linux /proc): ``rss()`` → [resident, peak] bytes;
``base = reset_peak()`` after the imports resets the peak and gives the resident size before the work."""


def peak_rss_mb() -> float:
    """Peak resident set size of this process so far (MB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def current_rss_mb() -> float:
    with open(f"/proc/{os.getpid()}/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


@contextmanager
def timer(store: dict, key: str):
    t0 = time.perf_counter()
    yield
    store[key] = time.perf_counter() - t0
