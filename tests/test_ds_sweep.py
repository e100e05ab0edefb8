"""The fused Dawid–Skene pass (methods/dawid_skene/sweep.py): numba and numpy give the same numbers, and both equal
the unfused E-step and M-step statistics computed from their definitions."""

from __future__ import annotations

import multiprocessing
import os

import numpy as np
import pandas as pd
import pytest

from fusion_core.data.responses import Responses
from fusion_core.methods import DawidSkene, OneCoinDawidSkene, layout
from fusion_core.methods.dawid_skene import sweep
from fusion_core.methods.dawid_skene.core import e_step_joint, expected_counts
from fusion_core.methods.numerics import log_normalize, log_normalize_into
from fusion_core.simulate import dawid_skene

BACKENDS = ["numpy", pytest.param("numba", marks=pytest.mark.skipif(not sweep.HAVE_NUMBA, reason="numba absent"))]


def _case(k: int = 3, weighted: bool = False, seed: int = 0) -> tuple[Responses, np.ndarray, np.ndarray]:
    sim = dawid_skene(n_items=700, n_workers=12, n_classes=k, responses_per_item=4, seed=seed)
    df = sim.responses.copy()
    if weighted:
        df["confidence"] = np.random.default_rng(seed).uniform(0.1, 1.0, len(df))
    resp = Responses.from_frame(df, confidence="confidence") if weighted else Responses.from_frame(df)
    rng = np.random.default_rng(seed + 1)
    conf = rng.dirichlet(np.ones(k), size=(resp.n_workers, k))
    conf[:, 0, 0] = 0.0  # an exact zero: clipped at the probability floor, never -inf
    prior = rng.dirichlet(np.ones(k))
    return resp, conf, prior


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("k", [2, 3, 5])
@pytest.mark.parametrize("weighted", [False, True])
def test_sweep_equals_unfused_definitions(backend, k, weighted):
    resp, conf, prior = _case(k, weighted)
    gold = (np.array([3, 10, 50]), np.array([0, k - 1, 1]))
    for g in (None, gold):
        for temperature in (1.0, 2.5):
            post, ll, joint = e_step_joint(resp, conf, prior, g, temperature)
            sw = sweep.ds_sweep(resp, conf, prior, g, temperature, want_joint=True, backend=backend)
            np.testing.assert_allclose(sw.posterior, post, rtol=0, atol=1e-12)
            np.testing.assert_allclose(sw.joint, joint, rtol=1e-13, atol=1e-10)
            assert sw.log_likelihood == pytest.approx(ll, rel=1e-12)
            np.testing.assert_allclose(sw.counts, expected_counts(resp, post), rtol=1e-12, atol=1e-10)
            np.testing.assert_allclose(sw.class_total, post.sum(axis=0), rtol=1e-12)
            if g is not None:
                assert np.all(sw.posterior[gold[0], gold[1]] == 1.0)


@pytest.mark.skipif(not sweep.HAVE_NUMBA, reason="numba absent")
def test_numba_threads_split_and_sum_to_one_pass(monkeypatch):
    resp, conf, prior = _case(4, False, seed=3)
    one = sweep.ds_sweep(resp, conf, prior, backend="numba")
    monkeypatch.setattr(layout, "MIN_CHUNK", 100)
    monkeypatch.setenv("FUSION_CORE_THREADS", "3")
    assert len(layout._chunks(layout.sweep_data(resp).indptr, 3)) == 4
    three = sweep.ds_sweep(resp, conf, prior, backend="numba")
    np.testing.assert_allclose(three.posterior, one.posterior, rtol=0, atol=1e-15)
    np.testing.assert_allclose(three.counts, one.counts, rtol=1e-13)
    assert three.log_likelihood == pytest.approx(one.log_likelihood, rel=1e-13)


@pytest.mark.skipif(not sweep.HAVE_NUMBA or not hasattr(os, "fork"), reason="numba absent or no fork")
def test_threaded_pass_runs_in_a_forked_child(monkeypatch):
    """The pass keeps its extra threads in a pool between passes; a child forked after the parent used the pool
    inherits the pool but not its threads, and must make its own (it waited forever before)."""
    monkeypatch.setattr(layout, "MIN_CHUNK", 100)
    monkeypatch.setenv("FUSION_CORE_THREADS", "2")
    resp, conf, prior = _case(3, False, seed=5)
    want = sweep.ds_sweep(resp, conf, prior, backend="numba").log_likelihood  # the parent's pool exists now
    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    child = ctx.Process(target=lambda: out.put(sweep.ds_sweep(resp, conf, prior, backend="numba").log_likelihood))
    child.start()
    child.join(60)
    if child.is_alive():
        child.kill()
        pytest.fail("the threaded pass hung in a forked child")
    assert out.get(timeout=5) == want


@pytest.mark.skipif(not sweep.HAVE_NUMBA, reason="numba absent")
@pytest.mark.parametrize("cls", [DawidSkene, OneCoinDawidSkene])
def test_fits_agree_between_backends(monkeypatch, cls):
    sim = dawid_skene(n_items=2000, n_workers=30, n_classes=4, responses_per_item=5, seed=5)
    fits = {}
    for backend in ("numpy", "numba"):
        monkeypatch.setattr(sweep, "default_backend", lambda n, b=backend: b)
        fits[backend] = cls(max_iter=200, tol=1e-9, n_restarts=1).fit(sim.responses)
    a, b = fits["numpy"], fits["numba"]
    assert a.n_iter_ == b.n_iter_
    np.testing.assert_allclose(a.probas_.to_numpy(), b.probas_.to_numpy(), rtol=0, atol=1e-10)
    np.testing.assert_allclose(a.confusion_, b.confusion_, rtol=0, atol=1e-10)
    np.testing.assert_allclose(a.loss_history_, b.loss_history_, rtol=1e-12)


def test_exp_of_the_compiled_pass_is_exact_to_rounding():
    """The pass's own exp (Cody–Waite + degree-13 Taylor, 2ⁿ in the exponent bits) against numpy's, on rows whose
    log-joints spread over hundreds of nats (80 responses per item, confusions down to the 1e-10 floor)."""
    if not sweep.HAVE_NUMBA:
        pytest.skip("numba absent")
    rng = np.random.default_rng(0)
    n, w, k, r = 3000, 100, 4, 80
    item = np.repeat(np.arange(n), r)
    worker = np.concatenate([rng.choice(w, r, replace=False) for _ in range(n)])
    resp = Responses(
        item=item,
        worker=worker,
        label=rng.integers(0, k, n * r),
        items=pd.Index(range(n)),
        workers=pd.Index(range(w)),
        classes=pd.Index(range(k)),
    )
    conf = np.exp(-rng.uniform(0, 25, size=(w, k, k)))
    conf /= conf.sum(axis=2, keepdims=True)
    a = sweep.ds_sweep(resp, conf, np.full(k, 1 / k), want_joint=True, backend="numba")
    b = sweep.ds_sweep(resp, conf, np.full(k, 1 / k), backend="numpy")
    spread = a.joint.max(axis=1) - a.joint.min(axis=1)
    assert spread.max() > 300  # the test reaches deep into exp's range
    big = b.posterior > 1e-290
    np.testing.assert_allclose(a.posterior[big], b.posterior[big], rtol=1e-12)
    assert np.all(a.posterior[~big] < 1e-280)


def test_log_normalize_into_is_log_normalize():
    x = np.random.default_rng(1).normal(size=(1000, 5)) * 30
    out = np.empty_like(x)
    p, lz = log_normalize(x)
    lz2 = log_normalize_into(x, out)
    np.testing.assert_allclose(out, p, rtol=1e-14, atol=1e-300)
    np.testing.assert_allclose(lz2, lz, rtol=1e-14)
    log_normalize_into(x, x)  # in place
    np.testing.assert_allclose(x, p, rtol=1e-14, atol=1e-300)


def test_em_reuses_the_posterior_buffer_without_corrupting_runs():
    """With restarts each run keeps its own posterior (the model recycles only finished E-steps)."""
    sim = dawid_skene(n_items=400, n_workers=15, n_classes=3, responses_per_item=4, seed=2)
    est = DawidSkene(n_restarts=2, max_iter=300).fit(sim.responses)
    solo = DawidSkene(max_iter=300).fit(sim.responses)
    assert np.allclose(est.probas_.sum(axis=1), 1.0)
    ll = est.result_.restarts.log_likelihoods
    assert est.log_likelihood_ == pytest.approx(ll.max())
    if est.result_.restarts.best == 0:
        np.testing.assert_allclose(est.probas_.to_numpy(), solo.probas_.to_numpy(), atol=1e-12)


@pytest.mark.parametrize("backend", BACKENDS)
def test_structure_from_unsorted_items_and_repeated_responses(backend, monkeypatch):
    """The pass's own CSR (built from the coded arrays, never from Responses.counts) equals the count matrix when
    items come in any order and a worker answers an item twice (repeated entries count twice)."""
    rng = np.random.default_rng(4)
    n, w, k = 300, 9, 3
    item = rng.integers(0, n, 2000)
    worker = rng.integers(0, w, 2000)
    label = rng.integers(0, k, 2000)
    resp = Responses(
        item=item,
        worker=worker,
        label=label,
        items=pd.Index(range(n)),
        workers=pd.Index(range(w)),
        classes=pd.Index(range(k)),
    )
    assert not np.all(np.diff(item) >= 0)
    monkeypatch.setenv("FUSION_CORE_JIT", "1" if backend == "numba" else "0")
    monkeypatch.setattr(layout, "JIT_MIN_RESPONSES", 0)  # numba: the counting sort and the counts kernel run here
    d = sweep.sweep_data(resp)
    order = np.argsort(item, kind="stable")
    np.testing.assert_array_equal(d.indices.astype(np.int64), (worker * k + label)[order])
    q = rng.dirichlet(np.ones(k), size=n)
    np.testing.assert_allclose(sweep.expected_counts_of(resp, q), expected_counts(resp, q), rtol=1e-12, atol=1e-12)
    conf = rng.dirichlet(np.ones(k), size=(w, k))
    post, ll, _ = e_step_joint(resp, conf, np.full(k, 1 / k))
    sw = sweep.ds_sweep(resp, conf, np.full(k, 1 / k), backend=backend)
    np.testing.assert_allclose(sw.posterior, post, rtol=0, atol=1e-12)
    assert sw.log_likelihood == pytest.approx(ll, rel=1e-12)
