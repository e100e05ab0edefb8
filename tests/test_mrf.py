"""Ensemble MRF (spec sequential-networked §2.4; oracles T10–T13)."""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pandas as pd
import pytest
from conftest import fit_or_explain

from fusion_core.data.graph import empty_graph, graph_for_responses
from fusion_core.data.responses import Responses
from fusion_core.errors import AggregationWarning, UserInputError
from fusion_core.methods import create
from fusion_core.methods.dawid_skene import e_step, m_step
from fusion_core.methods.networked import icm, icm_energy, network_em, node_delta
from fusion_core.metrics import confusion_error, macro_f1
from fusion_core.simulate.graph import sbm


def _fit(name, sim, **params):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AggregationWarning)
        kw = {"graph": sim.edges} if name.startswith("mrf") else {}
        return create(name, **params).fit(sim.responses, **kw)


def test_t10_empty_graph_equals_dawid_skene_without_priors():
    sim = sbm(n_items=600, avg_degree=0.0, seed=1)
    resp = Responses.from_frame(sim.responses)
    k = resp.n_classes
    mv = np.argmax(resp.vote_counts(), axis=1)
    from fusion_core.methods.dawid_skene import expected_counts, normalize_confusion

    conf0 = normalize_confusion(expected_counts(resp, np.eye(k)[mv]), 0.01)
    delta = node_delta("M", resp)
    n_iter = 7
    run, _ = network_em(
        resp, empty_graph(resp.n_items), conf0, mv, delta, smoothing=0.01, max_iter=n_iter, tol=0.0, warn=False
    )
    post, labels, conf = run.posterior, run.estep.stats.labels, run.state.confusion
    # DS EM without priors from the same Γ⁽⁰⁾: n_iter E/M rounds
    c = conf0
    for _ in range(n_iter):
        q, _ = e_step(resp, c, np.full(k, 1.0 / k))
        c, _ = m_step(resp, q, 0.01, False)
    np.testing.assert_allclose(conf, c, atol=1e-12)
    q, _ = e_step(resp, c, np.full(k, 1.0 / k))
    np.testing.assert_allclose(post, q, atol=1e-12)
    np.testing.assert_array_equal(labels, np.argmax(q, axis=1))
    # delta = 0 on a real graph is the same as no graph
    sim2 = sbm(n_items=600, avg_degree=5, seed=1)
    g = graph_for_responses(sim2.edges, Responses.from_frame(sim2.responses))
    resp2 = Responses.from_frame(sim2.responses)
    mv2 = np.argmax(resp2.vote_counts(), axis=1)
    conf02 = normalize_confusion(expected_counts(resp2, np.eye(k)[mv2]), 0.01)
    a, _ = network_em(resp2, g, conf02, mv2, np.zeros(resp2.n_items), max_iter=5, tol=0.0, warn=False)
    b, _ = network_em(
        resp2, empty_graph(resp2.n_items), conf02, mv2, np.zeros(resp2.n_items), max_iter=5, tol=0.0, warn=False
    )
    np.testing.assert_allclose(a.state.confusion, b.state.confusion, atol=1e-12)
    np.testing.assert_array_equal(a.estep.stats.labels, b.estep.stats.labels)


def _check_t11(seed):
    out = {}
    for d in (5.0, 0.5):
        sim = sbm(n_items=2000, avg_degree=d, homophily=0.9, seed=seed)
        mm = _fit("mm", sim)
        alg4 = _fit("mrf-em", sim)
        f_mm, f_4 = macro_f1(mm.labels_, sim.truth), macro_f1(alg4.labels_, sim.truth)
        out[d] = f_4 - f_mm
        if d == 5.0:
            assert f_4 >= 0.97
            assert f_4 - f_mm >= 0.08
            assert confusion_error(sim.confusion, alg4.confusion_) <= confusion_error(sim.confusion, mm.confusion_)
            jac = _fit("mrf-em", sim, icm_mode="jacobi")
            assert abs(macro_f1(jac.labels_, sim.truth) - f_4) <= 0.005
        else:
            assert f_4 - f_mm >= 0.0
    return out


@pytest.mark.slow
def test_t11_networked_benefit():
    gaps = _check_t11(0)
    assert gaps[5.0] > gaps[0.5]


@pytest.mark.slow
def test_t11_many_seeds():
    gaps = [_check_t11(seed) for seed in range(1, 10)]
    assert np.mean([g[5.0] for g in gaps]) > np.mean([g[0.5] for g in gaps])


def test_t12_over_smoothing_diagnostic_warns():
    sim = sbm(n_items=2000, avg_degree=5, homophily=0.25, seed=0)
    with pytest.warns(AggregationWarning, match="over-smooth"):
        est = create("mrf-em").fit(sim.responses, graph=sim.edges)
    assert est.edge_agreement_ < 0.4
    assert any("over-smooth" in w for w in est.warnings_)
    # a homophilous graph does not trigger it
    good = sbm(n_items=1000, avg_degree=5, homophily=0.9, seed=0)
    est = _fit("mrf-em", good)
    assert not any("over-smooth" in w for w in est.warnings_)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_t13_gauss_seidel_icm_is_monotone_and_terminates(seed):
    sim = sbm(n_items=800, avg_degree=6, homophily=0.6, seed=seed)
    resp = Responses.from_frame(sim.responses)
    g = graph_for_responses(sim.edges, resp)
    rng = np.random.default_rng(seed)
    unary = np.log(rng.dirichlet(np.ones(4), size=resp.n_items))
    delta = 3.0
    y = rng.integers(0, 4, size=resp.n_items)
    energies = [icm_energy(unary, y, g, delta)]
    for _ in range(30):
        y, sweeps, done = icm(unary, g, y, np.full(resp.n_items, delta), t_max=1)
        energies.append(icm_energy(unary, y, g, delta))
        if done:
            break
    assert done
    assert all(b <= a + 1e-9 for a, b in itertools.pairwise(energies))
    y_j, sweeps_j, _ = icm(
        unary, g, rng.integers(0, 4, size=resp.n_items), np.full(resp.n_items, delta), mode="jacobi", t_max=7
    )
    assert sweeps_j <= 7


def test_mrf_mv_and_graph_validation():
    sim = sbm(n_items=800, avg_degree=5, homophily=0.9, seed=3)
    est = _fit("mrf-mv", sim)
    assert macro_f1(est.labels_, sim.truth) > macro_f1(create("mv").fit(sim.responses).labels_, sim.truth)
    with pytest.raises(UserInputError, match="graph"):
        create("mrf-em").fit(sim.responses)
    bad = pd.concat([sim.edges, pd.DataFrame({"source": ["nope"], "target": ["n1"]})])
    with pytest.raises(UserInputError, match="not tasks"):
        create("mrf-mv").fit(sim.responses, graph=bad)
    with pytest.raises(UserInputError):
        create("mrf-mv", delta="strong").fit(sim.responses, graph=sim.edges)


@pytest.mark.slow
def test_half_answered_delta_and_missing_responses():
    sim = sbm(n_items=800, avg_degree=5, homophily=0.9, p_observe=0.4, seed=4)
    resp = Responses.from_frame(sim.responses)
    np.testing.assert_allclose(node_delta("half_answered", resp), resp.responses_per_item / 2)
    est = _fit("mrf-em", sim, delta="half_answered")
    mm = _fit("mm", sim)
    assert macro_f1(est.labels_, sim.truth) > macro_f1(mm.labels_, sim.truth)


from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(st.integers(0, 9), st.sampled_from(["u", "v", "w"]), st.sampled_from(["a", "b", "c"])),
        min_size=4,
        max_size=40,
    ),
    st.lists(st.tuples(st.integers(0, 9), st.integers(0, 9)), max_size=20),
    st.sampled_from(["mrf-em", "mrf-mv"]),
    st.sampled_from(["gauss_seidel", "jacobi"]),
)
def test_random_graphs_fit_or_explain(data, pairs, method, mode):
    df = pd.DataFrame(data, columns=["task", "worker", "label"]).drop_duplicates(["task", "worker"])
    tasks = set(df["task"])
    edges = {(min(a, b), max(a, b)) for a, b in pairs if a != b and a in tasks and b in tasks}
    edge_df = pd.DataFrame(sorted(edges), columns=["source", "target"])
    est = fit_or_explain(df, method, params={"icm_mode": mode}, graph=edge_df)
    if est is None:
        return
    assert set(est.labels_.index) == tasks


def test_icm_keeps_fixed_nodes():
    sim = sbm(n_items=500, avg_degree=6, homophily=0.9, seed=2)
    resp = Responses.from_frame(sim.responses)
    g = graph_for_responses(sim.edges, resp)
    rng = np.random.default_rng(0)
    unary = np.log(rng.dirichlet(np.ones(4), size=resp.n_items))
    y0 = rng.integers(0, 4, size=resp.n_items)
    fixed = rng.random(resp.n_items) < 0.2
    for mode in ("gauss_seidel", "jacobi"):
        y, _, _ = icm(unary, g, y0, np.full(resp.n_items, 5.0), mode=mode, fixed=fixed)
        np.testing.assert_array_equal(y[fixed], y0[fixed])
        assert (y[~fixed] != y0[~fixed]).any()


@pytest.mark.parametrize("name", ["mrf-em", "mrf-mv"])
def test_gold_nodes_are_clamped_and_inform_their_neighbours(name):
    sim = sbm(n_items=800, avg_degree=4, homophily=0.9, p_observe=0.3, seed=6)
    truth = sim.truth
    gold = truth.iloc[::4]
    rest = truth.index.difference(gold.index)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AggregationWarning)
        free = create(name).fit(sim.responses, graph=sim.edges)
        est = create(name).fit(sim.responses, graph=sim.edges, true_labels=gold)
    np.testing.assert_array_equal(est.probas_.loc[gold.index].to_numpy().max(axis=1), 1.0)
    assert (est.labels_.loc[gold.index] == gold).all()
    assert macro_f1(est.labels_.loc[rest], truth) >= macro_f1(free.labels_.loc[rest], truth)


def test_typed_graph_summary_and_parameters():
    sim = sbm(n_items=600, avg_degree=5, homophily=0.9, seed=3)
    est = _fit("mrf-em", sim, delta="half_answered")
    g = est.result_.graph
    resp = Responses.from_frame(sim.responses)
    assert g.n_edges == graph_for_responses(sim.edges, resp).n_edges
    assert g.delta == pytest.approx(resp.responses_per_item.mean() / 2)
    assert g.edge_agreement == est.edge_agreement_ and 0.5 < g.edge_agreement <= 1
    np.testing.assert_array_equal(est.result_.label_codes, est.result_.hard_labels)
    for bad in ({"delta": 0}, {"delta": -2.0}, {"delta": True}, {"delta": "strong"}, {"em_max_iter": 0}, {"t_max": 0}):
        with pytest.raises(UserInputError, match=next(iter(bad))):
            create("mrf-em", **bad)
    assert create("mrf-mv", delta=2.5).fit(sim.responses, graph=sim.edges).result_.graph.delta == 2.5
    from fusion_core.methods import info

    assert "min_pair_support" not in {p.name for p in info("mrf-mv").params}  # no moment matching in mrf-mv


def test_potts_em_warns_at_its_iteration_limit():
    from fusion_core.errors import ConvergenceWarning

    sim = sbm(n_items=600, avg_degree=5, homophily=0.7, seed=4)
    with pytest.warns(ConvergenceWarning, match="mrf-mv EM"):
        est = create("mrf-mv", em_max_iter=2, em_tol=0.0).fit(sim.responses, graph=sim.edges)
    assert not est.converged_ and est.n_iter_ == 2
