"""The audit's background stage (agreement alongside the fit and the cartel check) gives the sequential audit's
result field by field, runs in another thread, and leaves the process's warnings state as it found it."""

from __future__ import annotations

import dataclasses
import threading
import warnings
from typing import Any

import numpy as np
import pandas as pd
import pytest

from fusion_core.data.dataset import make_dataset
from fusion_core.data.responses import Responses
from fusion_core.diagnostics.agreement import agreement_intervals
from fusion_core.diagnostics.audit import run_audit
from fusion_core.simulate import dawid_skene
from fusion_core.simulate.demo import crowd_demo

TIMES = {"seconds", "wall", "timings"}  # how long things took: the only fields allowed to differ


def assert_same(a: Any, b: Any, path: str = "audit") -> None:
    """Recursive equality of two results: dataclasses field by field, arrays and frames exactly (NaN equal to NaN)."""
    assert type(a) is type(b), f"{path}: {type(a).__name__} vs {type(b).__name__}"
    if dataclasses.is_dataclass(a):
        for f in dataclasses.fields(a):
            if f.name not in TIMES:
                assert_same(getattr(a, f.name), getattr(b, f.name), f"{path}.{f.name}")
    elif isinstance(a, np.ndarray):
        assert a.shape == b.shape and a.dtype == b.dtype, path
        assert np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"), path
    elif isinstance(a, pd.DataFrame):
        times = [c for c in a.columns if c in TIMES]  # e.g. auto's table of candidates has their fit seconds
        pd.testing.assert_frame_equal(a.drop(columns=times), b.drop(columns=times), check_exact=True, obj=path)
    elif isinstance(a, pd.Series):
        pd.testing.assert_series_equal(a, b, check_exact=True, obj=path)
    elif isinstance(a, pd.Index):
        pd.testing.assert_index_equal(a, b, exact=True, obj=path)
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), path
        for k in a:
            assert_same(a[k], b[k], f"{path}[{k!r}]")
    elif isinstance(a, set | frozenset):
        assert a == b, path
    elif isinstance(a, list | tuple):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{path}[{i}]")
    elif isinstance(a, float) and np.isnan(a):
        assert np.isnan(b), path
    else:
        assert a == b, f"{path}: {a!r} != {b!r}"


def _demo() -> Any:
    d = crowd_demo(3)
    return make_dataset(Responses.from_frame(d.responses), name="demo", source="demo", gold=d.truth, roles=d.roles)


def _small_crowd() -> Responses:  # few responses per annotator: the fits emit warnings, some verdicts are 'too few'
    sim = dawid_skene(n_items=150, n_workers=30, n_classes=2, responses_per_item=3, spammers=4, seed=5)
    return Responses.from_frame(sim.responses)


@pytest.mark.parametrize("make", [_demo, _small_crowd], ids=["demo-with-cartel", "small-crowd"])
def test_concurrent_audit_equals_the_sequential_one_field_by_field(make):
    data = make()
    before = list(warnings.filters)
    seq = run_audit(data, n_bootstrap=150, cartel_bootstrap=60, random_state=4, concurrent=False)
    con = run_audit(data, n_bootstrap=150, cartel_bootstrap=60, random_state=4, concurrent=True)
    assert_same(seq, con)
    assert (
        [t.stage for t in con.timings] == [t.stage for t in seq.timings] == ["fit", "agreement", "cartel", "verdicts"]
    )
    assert warnings.filters == before  # no filter left behind by either run
    # the comparison is not vacuous: another seed changes the bootstrap intervals
    other = run_audit(data, n_bootstrap=150, cartel_bootstrap=60, random_state=5, concurrent=True)
    with pytest.raises(AssertionError):
        assert_same(seq, other)


def test_agreement_runs_in_the_background_thread(monkeypatch):
    from fusion_core.diagnostics.audit import runner

    threads: list[int] = []

    def spy(*args, **kwargs):
        threads.append(threading.get_ident())
        return agreement_intervals(*args, **kwargs)

    monkeypatch.setattr(runner, "agreement_intervals", spy)
    resp = _small_crowd()
    run_audit(resp, n_bootstrap=20, cartel_bootstrap=10, concurrent=True)
    run_audit(resp, n_bootstrap=20, cartel_bootstrap=10, concurrent=False)
    assert threads[0] != threading.get_ident() and threads[1] == threading.get_ident()


@pytest.mark.parametrize("make", [_demo, _small_crowd], ids=["demo", "small-crowd"])
def test_agreement_emits_no_warnings(make):
    """The background stage must not warn: the warnings hook is global, a warning there would land in the
    recording of the fit or the cartel check running at the same time."""
    data = make()
    resp = data.responses if hasattr(data, "responses") else data
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        agreement_intervals(resp, n_bootstrap=50)


def test_agreement_failure_is_a_note_not_a_crash():
    # every item labelled once: no pair of responses to agree, the audit says why and goes on
    rows = [(f"t{i}", f"w{i % 7}", "ab"[i % 2]) for i in range(200)]
    resp = Responses.from_frame(pd.DataFrame(rows, columns=["task", "worker", "label"]))
    seq = run_audit(resp, n_bootstrap=20, cartel_bootstrap=10, concurrent=False)
    con = run_audit(resp, n_bootstrap=20, cartel_bootstrap=10, concurrent=True)
    assert (
        con.agreement == ()
        and con.agreement_of("fleiss_kappa") is None
        and con.agreement_note
        and con.agreement_note == seq.agreement_note
    )
