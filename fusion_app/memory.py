"""Give the memory of ended sessions back to the operating system.

Streamlit runs every session's script in threads of one server process.  When a session ends its state is freed,
but glibc keeps freed blocks in per-thread arenas, so the server's RSS stays high (measured: +260 MB after 10
sessions on 100k responses had ended).  :func:`start_trimmer` caps the number of arenas (``mallopt``) and runs a
daemon thread that every ``interval`` seconds collects garbage cycles and calls ``malloc_trim(0)``, which returns
the free pages of every arena.  No-op where glibc is absent (macOS, Windows, musl).
"""

from __future__ import annotations

import ctypes
import gc
import threading
import time

M_ARENA_MAX = -8  # glibc mallopt parameter
_lock = threading.Lock()
_running: list[threading.Thread] = []


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
        libc.mallopt(M_ARENA_MAX, max_arenas)

        def loop() -> None:
            while True:
                time.sleep(interval)
                gc.collect()
                trim(0)

        thread = threading.Thread(target=loop, name="fusion-app-malloc-trim", daemon=True)
        thread.start()
        _running.append(thread)
        return True
