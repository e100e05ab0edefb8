"""The one-click audit behind the Audit summary page: run with a progress bar and time left, kept per session for
the current data only (a new dataset evicts the old audit), and its fit shared with the other pages as ``auto``."""

from __future__ import annotations

import time
from collections.abc import Callable

import plotly.graph_objects as go

from fusion_app.cache import fit_key
from fusion_app.state import State, session
from fusion_core.data.dataset import Dataset
from fusion_core.diagnostics.audit import AuditProgress, AuditResult, run_audit
from fusion_core.plots.audit import audit_figures

AUDIT_METHOD = "auto"


def _key(ds: Dataset) -> tuple[str, str | None]:
    return (ds.fingerprint, ds.gold_fingerprint)


def cached_audit(ds: Dataset, ss: State | None = None) -> AuditResult | None:
    """The audit of these data (and gold) if it was run in this session; an audit of other data is dropped."""
    ss = session() if ss is None else ss
    entry = ss.get("fc_audit")
    if entry is None:
        return None
    if entry[0] != _key(ds):
        ss["fc_audit"] = ss["fc_audit_figures"] = None
        return None
    return entry[1]


def audit_now(
    ds: Dataset, listener: Callable[[AuditProgress], None] | None = None, ss: State | None = None
) -> AuditResult:
    """Run the audit (reusing a cached ``auto`` fit of these data) and register its fit for the other pages."""
    ss = session() if ss is None else ss
    key = fit_key(ds, AUDIT_METHOD, {})
    fits = ss.setdefault("fc_fits", {})
    audit = run_audit(ds, method=AUDIT_METHOD, fit=fits.get(key), progress=listener)
    if key not in fits:
        fits[key] = audit.fit
        ss["fc_fit_count"] = ss.get("fc_fit_count", 0) + 1
    ss.setdefault("fc_active", {})[AUDIT_METHOD] = key
    ss.setdefault("fc_params", {})[AUDIT_METHOD] = {}
    ss["fc_audit"] = (_key(ds), audit)
    return audit


def figures_for(audit: AuditResult, ss: State | None = None) -> dict[str, go.Figure]:
    """The audit's charts, built once per audit in this session (page reruns reuse them)."""
    ss = session() if ss is None else ss
    entry = ss.get("fc_audit_figures")
    if entry is None or entry[0] is not audit:
        entry = (audit, audit_figures(audit))
        ss["fc_audit_figures"] = entry
    return entry[1]


def duration(seconds: float) -> str:
    """Seconds in words: "12 s", "3 min 5 s"."""
    s = max(0, round(seconds))
    return f"{s} s" if s < 60 else f"{s // 60} min {s % 60} s"


def progress_text(p: AuditProgress) -> str:
    """The progress bar's text: stage, share done and time left."""
    left = "estimating the time left…" if p.seconds_left is None else f"about {duration(p.seconds_left)} left"
    return f"{p.stage} — {100 * p.fraction:.0f}% · {left}"


class Throttle:
    """Calls ``show`` at most every ``every`` seconds (and always for the final event)."""

    def __init__(self, show: Callable[[AuditProgress], None], every: float = 0.2) -> None:
        self.show, self.every, self.last = show, every, 0.0

    def __call__(self, p: AuditProgress) -> None:
        now = time.monotonic()
        if p.fraction >= 1.0 or now - self.last >= self.every:
            self.last = now
            self.show(p)
