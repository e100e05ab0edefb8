"""Per-browser-session state: everything a page needs lives in ``st.session_state`` under ``fc_*`` keys.

* ``fc_dataset`` — the current :class:`~fusion_core.data.dataset.Dataset` or None;
* ``fc_fits`` — fit cache ``{(data fingerprint, method, params, gold fingerprint) → FitResult}``;
* ``fc_active`` — the cache key each method name currently shows; ``fc_params`` — its parameters;
* ``fc_fit_count`` — number of fits actually run in this session (switching pages must not change it);
* ``fc_bootstrap`` / ``fc_cartels`` / ``fc_cartel_findings`` — caches of the slower diagnostics;
* ``fc_views`` — tables and figures built once per session (``fusion_app.cache.view``);
  all of these are evicted when the data change (:func:`set_dataset`);
* ``fc_pending`` — an upload waiting for its column mapping; ``fc_seen_uploads`` — uploads already read.

Functions take the state mapping as an optional ``ss`` argument so they can be exercised without a running app.
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping
from typing import Any, cast

import streamlit as st

from fusion_core.data.dataset import Dataset
from fusion_core.simulate.demo import DEFAULT_DEMO, demo_dataset

State = MutableMapping[str, Any]


def session() -> State:
    """This browser session's state."""
    return cast(State, st.session_state)


def ensure_state(ss: State | None = None) -> State:
    """Initialise the session on its first run: empty caches and the default demo, so no page is ever empty."""
    ss = session() if ss is None else ss
    if not ss.get("fc_initialized"):
        for key in ("fc_fits", "fc_active", "fc_params", "fc_bootstrap", "fc_cartels", "fc_seen_uploads"):
            ss[key] = {}
        ss["fc_fit_count"] = 0
        ss["fc_pending"] = None
        ss["fc_dataset"] = demo_dataset(DEFAULT_DEMO)
        ss["fc_initialized"] = True
    return ss


def current(ss: State | None = None) -> Dataset | None:
    """The dataset the user is working on, or None."""
    ss = session() if ss is None else ss
    return ss.get("fc_dataset")


SESSION_CACHES = ("fc_bootstrap", "fc_cartels", "fc_collusion", "fc_cartel_findings", "fc_views")
"""Per-session caches that hold results on one dataset only: emptied whenever the data change."""
AUDIT_KEYS = ("fc_audit", "fc_audit_figures")
"""The audit of the current data and its charts (``fusion_app.audit``): dropped with the data too."""


def set_dataset(ds: Dataset | None, ss: State | None = None) -> None:
    """Replace the current dataset.  When the responses change, every session cache of the old data is evicted:
    fits on other responses, bootstrap and cartel results, built tables and figures (memory goes back)."""
    ss = session() if ss is None else ss
    old = ss.get("fc_dataset")
    if old is None or ds is None or old.fingerprint != ds.fingerprint:
        ss["fc_active"] = {}
        keep = None if ds is None else ds.fingerprint
        ss["fc_fits"] = {k: v for k, v in ss.get("fc_fits", {}).items() if k[0] == keep}
        for key in SESSION_CACHES:
            ss[key] = {}
        for key in AUDIT_KEYS:
            ss[key] = None
    elif old is not ds:  # same responses, new side inputs (gold, graph, context): built views may show them
        ss["fc_views"] = {}
    ss["fc_dataset"] = ds


def max_upload_bytes(ss: State | None = None) -> int:
    """The upload limit in bytes: a per-session override (tests), ``FUSION_CORE_MAX_UPLOAD_MB``, or the server's
    ``server.maxUploadSize`` (MB)."""
    ss = session() if ss is None else ss
    if ss.get("fc_max_upload_bytes"):
        return int(ss["fc_max_upload_bytes"])
    env = os.environ.get("FUSION_CORE_MAX_UPLOAD_MB")
    if env:
        return int(float(env) * 1024 * 1024)
    return int(st.get_option("server.maxUploadSize")) * 1024 * 1024
