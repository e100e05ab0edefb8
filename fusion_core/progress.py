"""Progress of long computations, reported to whoever listens (the app's progress bar, a CLI spinner).

Library code calls :func:`report`; a caller that wants to listen wraps the work in :func:`progress_to`.
Nothing is reported (and nothing costs) when nobody listens.  Uses a context variable, so concurrent app
sessions in different threads never see each other's progress.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass


@dataclass(frozen=True)
class Progress:
    """One progress event: ``stage`` in plain words, ``fraction`` of that stage done (0–1, an upper bound for
    iterative fits that may stop early), and for EM the iteration and current log-likelihood."""

    stage: str
    fraction: float
    iteration: int | None = None
    log_likelihood: float | None = None


_LISTENER: ContextVar[Callable[[Progress], None] | None] = ContextVar("fusion_core_progress", default=None)
_STAGE: ContextVar[str] = ContextVar("fusion_core_progress_stage", default="")


@contextmanager
def progress_to(listener: Callable[[Progress], None] | None) -> Iterator[None]:
    """Send every :func:`report` made inside the block to ``listener``."""
    token = _LISTENER.set(listener)
    try:
        yield
    finally:
        _LISTENER.reset(token)


@contextmanager
def stage(name: str) -> Iterator[None]:
    """Prefix reports made inside the block with ``name`` (e.g. which candidate ``auto`` is fitting)."""
    outer = _STAGE.get()
    token = _STAGE.set(f"{outer}: {name}" if outer else name)
    try:
        yield
    finally:
        _STAGE.reset(token)


def listening() -> bool:
    return _LISTENER.get() is not None


def report(what: str, fraction: float, *, iteration: int | None = None, log_likelihood: float | None = None) -> None:
    """Tell the listener (if any) how far ``what`` has got."""
    listener = _LISTENER.get()
    if listener is None:
        return
    outer = _STAGE.get()
    listener(
        Progress(f"{outer}: {what}" if outer else what, min(max(float(fraction), 0.0), 1.0), iteration, log_likelihood)
    )
