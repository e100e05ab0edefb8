"""Warm the compiled kernels once per server process, in the background, so no user waits for them.

With numba installed (the ``fast`` extra), the Dawid–Skene pass, the expected counts and the cartel test's pair
sums and label draws, and ``context-em``'s chain M-step (the dynamic programme) run compiled kernels.  Importing numba and loading a kernel from its on-disk cache costs about
2 s the first time in a process (measured: numba import ≈ 1.3 s, three cache loads ≈ 0.76 s), which would otherwise
land on the first user's first audit; so would the first import of scipy.stats and the audit and plotting modules
(≈ 1 s).  :func:`start_warm_up` imports those and runs the kernels once on small simulated data in a daemon thread
when the server starts (the first page run); :func:`wait_warm_up` lets benchmarks wait for it, so
that they measure what a user of a running server sees.
"""

from __future__ import annotations

import logging
import threading
import time

from fusion_core.methods.numerics import jit_enabled

_lock = threading.Lock()
_done = threading.Event()
_started: list[float] = []  # seconds the warm-up took, once it has run


def _import_heavy_modules() -> None:
    """What the audit, its report and the result pages import on first use (scipy.stats alone ≈ 1 s)."""
    import importlib

    for name in ("scipy.stats", "fusion_core.diagnostics.audit", "fusion_core.plots", "fusion_core.report"):
        importlib.import_module(name)


def _warm() -> None:
    t0 = time.perf_counter()
    try:
        _import_heavy_modules()
        if not jit_enabled():
            return
        import numpy as np

        from fusion_core.data.responses import as_responses
        from fusion_core.diagnostics.audit import run_audit
        from fusion_core.methods.context.chain import warm_chain_programme
        from fusion_core.methods.dawid_skene.sweep import ds_sweep, expected_counts_of
        from fusion_core.plots.audit import audit_figures
        from fusion_core.simulate import dawid_skene

        for k in (2, 3):  # the pass is specialised per number of labels; 2 and 3 are the common ones
            sim = dawid_skene(n_items=60, n_workers=12, n_classes=k, responses_per_item=5, seed=0)
            coded = as_responses(sim.responses)
            confusion = np.full((coded.n_workers, k, k), 1.0 / k)
            prior = np.full(k, 1.0 / k)
            sweep = ds_sweep(coded, confusion, prior, backend="numba")
            expected_counts_of(coded, sweep.posterior, backend="numba")
            if k == 2:  # the audit's own path: agreement, cartel kernels, verdicts, and its plotly figures
                audit_figures(run_audit(coded, method="ds", n_bootstrap=2, cartel_bootstrap=2))
        warm_chain_programme()
    except Exception:  # a warm-up never breaks the app; the kernels then load on first use
        logging.getLogger(__name__).warning("warm-up failed; compiled kernels load on first use", exc_info=True)
    finally:
        _started.append(time.perf_counter() - t0)
        _done.set()


def start_warm_up() -> None:
    """Start the warm-up once per process (imports only without numba or with ``FUSION_CORE_JIT=0``)."""
    with _lock:
        if _started or _done.is_set() or getattr(start_warm_up, "_thread", None) is not None:
            return
        thread = threading.Thread(target=_warm, name="fusion-core-warm-up", daemon=True)
        start_warm_up._thread = thread  # type: ignore[attr-defined]
        thread.start()


def wait_warm_up(timeout: float = 120.0) -> float | None:
    """Block until the warm-up has finished; its duration in seconds (``None`` if it did not run)."""
    _done.wait(timeout)
    return _started[0] if _started else None
