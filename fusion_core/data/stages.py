"""Wall-clock and CPU time of the stages of a run (read, validate, code, fit, write …), for ``fusion-core fit
--timings``.

Library code wraps a stage in :func:`stage`; a caller that wants the figures collects them with :func:`timed`.
Nothing is recorded (and nothing costs) when nobody collects.  A context variable keeps concurrent callers apart.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field


@dataclass
class Stage:
    """One stage: its ``name`` (``read``, ``write``, …), what it worked on (``detail``), wall and CPU seconds."""

    name: str
    detail: str
    wall: float
    cpu: float


@dataclass
class Timings:
    """The stages of one run, in the order they finished."""

    stages: list[Stage] = field(default_factory=list)
    start: float = field(default_factory=time.perf_counter)
    cpu: float = field(default_factory=time.process_time)

    def lines(self, process: tuple[float, float] | None = None) -> list[str]:
        """A table for stderr: one line per stage (wall and CPU seconds), then the total.  ``process`` (wall and CPU
        seconds of the whole process so far, :func:`process_seconds`) adds the start — interpreter and imports,
        before the first stage — and makes the total the process's."""
        names = [f"{s.name} {s.detail}".strip() for s in self.stages]
        width = max([len(n) for n in names] + [24])
        out = [f"{'stage':<{width}}  {'wall s':>7}  {'CPU s':>7}"]
        wall = time.perf_counter() - self.start
        cpu = time.process_time() - self.cpu
        if process is not None:
            out.append(f"{'start (Python, imports)':<{width}}  {process[0] - wall:7.2f}  {process[1] - cpu:7.2f}")
            wall, cpu = process
        for name, s in zip(names, self.stages):
            out.append(f"{name:<{width}}  {s.wall:7.2f}  {s.cpu:7.2f}")
        out.append(f"{'total':<{width}}  {wall:7.2f}  {cpu:7.2f}")
        return out


def process_seconds() -> tuple[float, float] | None:
    """Wall and CPU seconds since this process started (None where ``/proc`` does not say: not Linux)."""
    try:
        with open("/proc/self/stat") as fh:
            started = int(fh.read().rsplit(")", 1)[1].split()[19])  # field 22: start time, in clock ticks since boot
        with open("/proc/uptime") as fh:
            uptime = float(fh.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return max(uptime - started / os.sysconf("SC_CLK_TCK"), 0.0), time.process_time()


_TIMINGS: ContextVar[Timings | None] = ContextVar("fusion_core_timings", default=None)


@contextmanager
def timed() -> Iterator[Timings]:
    """Collect the stages run inside the block."""
    timings = Timings()
    token = _TIMINGS.set(timings)
    try:
        yield timings
    finally:
        _TIMINGS.reset(token)


@contextmanager
def stage(name: str, detail: str = "") -> Iterator[None]:
    """Time the block as stage ``name`` when a caller collects timings (see :func:`timed`)."""
    timings = _TIMINGS.get()
    if timings is None:
        yield
        return
    wall, cpu = time.perf_counter(), time.process_time()
    try:
        yield
    finally:
        timings.stages.append(Stage(name, detail, time.perf_counter() - wall, time.process_time() - cpu))
