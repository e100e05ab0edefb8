"""Give the memory of ended sessions back to the operating system.

Streamlit runs every session's script in threads of one server process.  Where the memory of ended sessions stayed
(measured with 10 concurrent sessions on 100k responses, ``benchmarks/bench_app.py``): after they ended, glibc's
heap held 406 MB of *free* blocks (``mallinfo2().fordblks``; live blocks 81 MB against 74 MB before) and RSS stayed
+289 MB over the baseline, and ``malloc_trim(0)`` gave none of it back.  The cause is glibc's dynamic mmap
threshold: it starts at 128 KiB, but every freed mmapped block raises it (up to 32 MiB), so the per-session numpy
and pandas buffers of 0.1–32 MB soon come from the arenas instead of ``mmap``, and the arenas end up fragmented —
a few live blocks pin the pages between them, which trimming cannot return.  Setting the threshold explicitly
(``mallopt(M_MMAP_THRESHOLD)``) turns the adjustment off: every block of 4 MiB or more is mmapped and goes back to
the OS when freed.  Measured with 10 sessions × 100k: at 128 KiB, +55–65 MB after the sessions ended (4 runs) instead
of +289 MB, but every large numpy temporary then costs fresh page faults (the audit took 1.5 → 2.1 s at 100k and
10.3 → 11.9 s at 1M); at 4 MiB, +69 MB after the end and a 628 MB peak, at the speed of glibc's default (audit
1.76 s at 100k, 9.6 s at 1M).  Python objects (pymalloc), pyarrow's mimalloc pool (≤ 11 MB)
and Streamlit's caches were not where the memory was.

Streamlit also keeps each closed session for a reconnect in a TTL cache that evicts only when touched, and its
runtime loop keeps the last session it flushed referenced (a loop variable) until another session connects.
:func:`start_trimmer` sets the threshold, caps the number of arenas and runs a daemon thread that every ``interval``
seconds drops the closed sessions whose reconnect time has passed (:func:`expire_stored_sessions`: shut down and
their ``st.session_state`` emptied, so a lingering reference keeps no data), collects garbage cycles and calls
``malloc_trim(0)``.  All of this is a no-op where glibc is absent (macOS, Windows, musl).
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import logging
import threading
import time

_log = logging.getLogger(__name__)

M_MMAP_THRESHOLD = -3  # glibc mallopt parameters
M_ARENA_MAX = -8
MMAP_THRESHOLD = 4 * 1024 * 1024
"""Blocks of this many bytes or more are mmapped and returned to the OS when freed (fixed instead of glibc's
dynamic threshold, which grows to 32 MiB; 4 MiB rather than glibc's initial 128 KiB, measured above)."""
_lock = threading.Lock()
_running: list[threading.Thread] = []


def expire_stored_sessions() -> int:
    """Shut down the closed sessions whose reconnect time (``server.disconnectedSessionTTL``) has passed and empty
    their session state; returns how many.  Streamlit's session store (a TTL cache) only forgets them lazily and
    without ``shutdown()``, which is what releases a session's uploaded files, deferred downloads and dataframe
    sources; the state is emptied because Streamlit's runtime loop may still reference the session object.
    Reaches into Streamlit's session manager (``_session_storage._cache`` under ``_storage_lock``) and does nothing
    if those internals are absent."""
    try:
        from streamlit.runtime import Runtime

        if not Runtime.exists():
            return 0
        mgr = Runtime.instance()._session_mgr
        cache = mgr._session_storage._cache  # type: ignore[attr-defined]
        lock = getattr(mgr, "_storage_lock", None) or contextlib.nullcontext()
        with lock:
            stored = dict(cache._data)
            cache.expire()
            expired = [info for key, info in stored.items() if key not in cache._data]
    except Exception:  # internals changed: the sessions then expire when the next visitor arrives
        return 0
    for info in expired:
        with contextlib.suppress(Exception):
            info.session.shutdown()
        with contextlib.suppress(Exception):
            info.session.session_state.clear()
    return len(expired)


def configure_malloc(libc: ctypes.CDLL, max_arenas: int = 4, mmap_threshold: int = MMAP_THRESHOLD) -> bool:
    """Fix glibc's mmap threshold (no dynamic growth) and cap its arenas; True when both settings were accepted."""
    ok_mmap = libc.mallopt(M_MMAP_THRESHOLD, mmap_threshold)
    ok_arenas = libc.mallopt(M_ARENA_MAX, max_arenas)
    return bool(ok_mmap and ok_arenas)


def start_trimmer(interval: float = 30.0, max_arenas: int = 4) -> bool:
    """Start the trimming thread once per process; True when it runs (glibc found)."""
    with _lock:
        if _running:
            return True
        try:
            libc = ctypes.CDLL("libc.so.6")
            trim = libc.malloc_trim
        except (OSError, AttributeError):
            return False
        configure_malloc(libc, max_arenas)

        def loop() -> None:
            while True:
                time.sleep(interval)
                expired = expire_stored_sessions()
                unreachable = gc.collect()
                trim(0)
                _log.info("memory trim: %d expired sessions shut down, %d unreachable objects", expired, unreachable)

        thread = threading.Thread(target=loop, name="fusion-app-malloc-trim", daemon=True)
        thread.start()
        _running.append(thread)
        return True
