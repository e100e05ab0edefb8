"""Ensemble HMM (spec sequential-networked §2.3; oracles T1, T2, T6–T9, T15)."""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pandas as pd
import pytest
from conftest import fit_or_explain

from fusion_core.data.responses import Responses
from fusion_core.errors import UserInputError
from fusion_core.methods import create
from fusion_core.methods.dawid_skene import e_step, m_step, unary_log_likelihood
from fusion_core.methods.sequential import (
    HMMState,
    baum_welch,
    estimate_transition_mm,
    forward_backward,
    hmm_e_step,
    lagged_moments,
    layout_from_responses,
    response_context,
    viterbi,
)
from fusion_core.metrics import accuracy, confusion_error, transition_error
from fusion_core.simulate.sequential import gen_confusions, hmm_chain, sample_chains, stationary, transition_matrix


def _random_problem(seed=0, k=3, m=3, n=6):
    rng = np.random.default_rng(seed)
    conf = rng.dirichlet(np.ones(k), size=(m, k))  # workers × true × reported
    t = rng.dirichlet(np.ones(k), size=k).T  # column-stochastic, not symmetric
    p0 = rng.dirichlet(np.ones(k))
    y = rng.integers(0, k, size=n)
    f = np.array([[rng.choice(k, p=conf[w, y[i]]) for i in range(n)] for w in range(m)])
    log_e = np.log(conf[np.arange(m)[:, None], :, f].transpose(1, 2, 0)).sum(axis=2)  # n × K: Σ_m log Γ_m(f_m, k)
    return conf, t, p0, f, log_e


def _brute_force(log_e, t, p0):
    n, k = log_e.shape
    paths = np.array(list(itertools.product(range(k), repeat=n)))
    logp = np.log(p0[paths[:, 0]]) + log_e[np.arange(n), paths].sum(axis=1)
    logp += np.log(t[paths[:, 1:], paths[:, :-1]]).sum(axis=1)  # T[next, prev]
    p = np.exp(logp)
    z = p.sum()
    q = np.zeros((n, k))
    xi = np.zeros((n - 1, k, k))
    for i in range(n):
        np.add.at(q[i], paths[:, i], p / z)
    for i in range(n - 1):
        np.add.at(xi[i], (paths[:, i], paths[:, i + 1]), p / z)
    return q, xi, z, paths[np.argmax(logp)]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_t1_forward_backward_matches_enumeration(seed):
    conf, t, p0, f, log_e = _random_problem(seed)
    q_bf, xi_bf, z, path_bf = _brute_force(log_e, t, p0)
    fb = forward_backward(log_e[None], np.array([6]), t, p0, return_xi=True)
    np.testing.assert_allclose(fb.posterior[0], q_bf, atol=1e-10)
    np.testing.assert_allclose(fb.xi[0], xi_bf, atol=1e-10)
    assert abs(fb.log_likelihood[0] - np.log(z)) < 1e-10
    # eq. (47): Σ_k α_nk β_nk (unscaled) is the same for every n and equals Pr(F)
    mx = log_e.max(axis=1)
    log_c = np.log(fb.scale[0])
    for i in range(6):
        log_alpha_unscaled = np.log(fb.alpha[0, i]) + np.cumsum(log_c)[i] + mx[: i + 1].sum()
        log_beta_unscaled = np.log(fb.beta[0, i]) + log_c[i + 1 :].sum() + mx[i + 1 :].sum()
        total = np.log(np.exp(log_alpha_unscaled + log_beta_unscaled).sum())
        assert abs(total - np.log(z)) < 1e-10
    path = viterbi(log_e[None], np.array([6]), t, p0)[0]
    np.testing.assert_array_equal(path, path_bf)


def test_batched_sequences_of_different_lengths_match_single_runs():
    rng = np.random.default_rng(3)
    k = 3
    t = rng.dirichlet(np.ones(k), size=k).T
    p0 = rng.dirichlet(np.ones(k))
    lengths = np.array([4, 1, 6, 2])
    log_e = np.zeros((4, 6, k))
    for s, n in enumerate(lengths):
        log_e[s, :n] = np.log(rng.dirichlet(np.ones(k), size=n))
    fb = forward_backward(log_e, lengths, t, p0)
    paths = viterbi(log_e, lengths, t, p0)
    for s, n in enumerate(lengths):
        one = forward_backward(log_e[s : s + 1, :n], np.array([n]), t, p0)
        np.testing.assert_allclose(fb.posterior[s, :n], one.posterior[0], atol=1e-12)
        assert abs(fb.log_likelihood[s] - one.log_likelihood[0]) < 1e-10
        q_bf, _, _, path_bf = _brute_force(log_e[s, :n], t, p0) if n > 1 else (None, None, None, None)
        if n > 1:
            np.testing.assert_array_equal(paths[s, :n], path_bf)
        assert (paths[s, n:] == -1).all()


def _sim_responses(sim):
    return Responses.from_frame(sim.responses)


def test_t2_hmm_with_iid_chain_reduces_to_dawid_skene():
    sim = hmm_chain(n_sequences=20, length=10, chain="random", seed=4)
    resp = _sim_responses(sim)
    lay = layout_from_responses(resp)
    pi = np.array([0.4, 0.3, 0.2, 0.1])
    t = np.repeat(pi[:, None], 4, axis=1)  # every column = π
    conf = sim.confusion
    log_e = lay.pad(unary_log_likelihood(resp, conf))
    fb = forward_backward(log_e, lay.lengths, t, pi)
    q_ds, _ = e_step(resp, conf, pi)
    v = lay.valid
    np.testing.assert_allclose(fb.posterior[v], q_ds[lay.index[v]], atol=1e-10)
    path = viterbi(log_e, lay.lengths, t, pi)
    map_labels = np.argmax(unary_log_likelihood(resp, conf) + np.log(pi), axis=1)
    np.testing.assert_array_equal(path[v], map_labels[lay.index[v]])
    state = baum_welch(resp, lay, HMMState(conf, t, pi), smoothing=0.0, max_iter=1).state
    conf_ds, _ = m_step(resp, q_ds, 0.0, False)
    np.testing.assert_allclose(state.confusion, conf_ds, atol=1e-10)


def test_t15_transition_from_true_parameters_and_population_moments():
    rng = np.random.default_rng(0)
    k, m = 4, 10
    conf = gen_confusions(k, m, 6, 0.3, 0.5, rng=rng)
    gamma = conf.transpose(0, 2, 1)  # paper Γ_m[resp, true]
    t = transition_matrix("cyclic", k)
    pi = stationary(t)
    a = t * pi[None, :]
    s_tilde = np.einsum("aik,kl,bjl->abij", gamma, a, gamma)  # Γ_m A Γ_m'ᵀ
    t_hat, a_hat, pi_hat = estimate_transition_mm(gamma, s_tilde, np.full((m, m), 1e6))
    assert transition_error(t, t_hat) <= 0.02
    np.testing.assert_allclose(t_hat.sum(axis=0), 1.0, atol=1e-12)
    # the lag orientation matters: the time-reversed moments give a clearly different chain (P2)
    t_rev, _, _ = estimate_transition_mm(gamma, s_tilde.transpose(1, 0, 3, 2), np.full((m, m), 1e6))
    assert transition_error(t, t_rev) >= 1.0


def test_lagged_moments_never_cross_sequence_boundaries():
    df = pd.DataFrame(
        {
            "task": ["a0", "a1", "b0", "b1", "a0", "a1", "b0", "b1"],
            "worker": ["u", "u", "u", "u", "v", "v", "v", "v"],
            "label": [0, 1, 1, 0, 0, 1, 1, 0],
            "sequence": ["a", "a", "b", "b"] * 2,
            "position": [0, 1, 0, 1] * 2,
        }
    )
    resp = Responses.from_frame(df)
    s, support = lagged_moments(resp, layout_from_responses(resp))
    assert support.sum() == 2 * 4  # two transitions, 2×2 learner pairs each
    u = list(resp.workers).index("u")
    # pair (u at n, u at n-1): seq a gives (1, 0), seq b gives (0, 1)
    np.testing.assert_allclose(s[u, u], [[0, 0.5], [0.5, 0]])


def _run(sim, names):
    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in names:
            out[name] = create(name).fit(sim.responses)
    return out


def _oracle_acc(sim):
    resp = _sim_responses(sim)
    lay = layout_from_responses(resp)
    log_e = lay.pad(unary_log_likelihood(resp, sim.confusion))
    path = viterbi(log_e, lay.lengths, sim.transition, sim.start_prob)
    v = lay.valid
    pred = pd.Series(np.zeros(resp.n_items, dtype=int), index=resp.items)
    pred.iloc[lay.index[v]] = path[v]
    return accuracy(pred, sim.truth), resp


def _check_t6(seed, n_sequences=100, gap=0.03):
    sim = hmm_chain(n_sequences=n_sequences, chain="sticky", seed=seed)
    fits = _run(sim, ["ds", "hmm-mm", "hmm-em"])
    acc = {k: accuracy(v.labels_, sim.truth) for k, v in fits.items()}
    oracle, _ = _oracle_acc(sim)
    t_true = sim.transition
    assert acc["hmm-em"] - acc["ds"] >= gap, acc
    assert oracle - acc["hmm-em"] <= 0.015
    if n_sequences == 100:
        assert transition_error(t_true, fits["hmm-mm"].transition_.to_numpy()) <= 0.25
        assert transition_error(t_true, fits["hmm-em"].transition_.to_numpy()) <= 0.15
        assert confusion_error(sim.confusion, fits["hmm-em"].confusion_) <= 0.10
        assert confusion_error(sim.confusion, fits["hmm-mm"].confusion_) <= 0.12
    else:
        assert transition_error(t_true, fits["hmm-em"].transition_.to_numpy()) <= 0.3
    return fits


@pytest.mark.parametrize("seed", [0, pytest.param(1, marks=pytest.mark.slow)])
def test_t6_sequential_benefit_sticky_chain(seed):
    fits = _check_t6(seed)
    est = fits["hmm-em"]
    # fitted attributes: orientation documented as T[next, previous], column-stochastic
    assert est.transition_.index.name == "next" and est.transition_.columns.name == "previous"
    np.testing.assert_allclose(est.transition_.sum(axis=0), 1.0, atol=1e-9)
    assert est.viterbi_.equals(est.labels_)
    seq = est.result_.sequence
    np.testing.assert_array_equal(seq.transition, est.transition_.to_numpy())
    np.testing.assert_array_equal(seq.start_prob, est.start_prob_.to_numpy())
    np.testing.assert_array_equal(seq.viterbi, est.result_.label_codes)
    tr = est.loss_history_
    assert all(b >= a - 1e-9 * abs(a) for a, b in itertools.pairwise(tr))  # Baum–Welch never decreases


def test_t6_model_level_viterbi_beats_iid_map():
    sim = hmm_chain(chain="sticky", seed=0)
    oracle, resp = _oracle_acc(sim)
    iid = np.argmax(unary_log_likelihood(resp, sim.confusion) + np.log(sim.class_prior), axis=1)
    iid_acc = accuracy(pd.Series(iid, index=resp.items), sim.truth)
    assert oracle - iid_acc >= 0.04


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(10))
def test_t6_many_seeds(seed):
    _check_t6(seed)
    _check_t6(seed, n_sequences=25, gap=0.02)


@pytest.mark.parametrize("seed", [0])
def test_t7_no_harm_with_iid_labels(seed):
    sim = hmm_chain(chain="iid", seed=seed)
    fits = _run(sim, ["ds", "hmm-em"])
    assert abs(accuracy(fits["hmm-em"].labels_, sim.truth) - accuracy(fits["ds"].labels_, sim.truth)) <= 0.01


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(1, 10))
def test_t7_many_seeds(seed):
    test_t7_no_harm_with_iid_labels(seed)


@pytest.mark.slow
def test_t8_errors_shrink_with_n():
    err = {}
    for n_seq in (25, 100):
        t_err, c_err = [], []
        for seed in range(5):
            sim = hmm_chain(n_sequences=n_seq, chain="sticky", seed=seed)
            est = _run(sim, ["hmm-em"])["hmm-em"]
            t_err.append(transition_error(sim.transition, est.transition_.to_numpy()))
            c_err.append(confusion_error(sim.confusion, est.confusion_))
        err[n_seq] = (np.mean(t_err), np.mean(c_err))
    assert err[100][0] < err[25][0] and err[100][1] < err[25][1]


def _check_t9(seed):
    sim = hmm_chain(chain="cyclic", seed=seed)
    resp = _sim_responses(sim)
    lay = layout_from_responses(resp)
    fits = _run(sim, ["hmm-mm", "hmm-em"])
    t_true = sim.transition
    assert transition_error(t_true, fits["hmm-mm"].transition_.to_numpy()) <= 0.3
    # the lag-swapped estimate (P2 bug) is far off: the test is sensitive to orientation
    s, support = lagged_moments(resp, lay)
    gamma = fits["hmm-mm"].confusion_.transpose(0, 2, 1)
    t_swapped, _, _ = estimate_transition_mm(gamma, s.transpose(1, 0, 3, 2), support.T)
    assert transition_error(t_true, t_swapped) >= 1.0
    oracle, _ = _oracle_acc(sim)
    assert accuracy(fits["hmm-em"].labels_, sim.truth) >= oracle - 0.02


@pytest.mark.slow
def test_t9_orientation_guard_cyclic_chain():
    _check_t9(0)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(1, 5))
def test_t9_many_seeds(seed):
    _check_t9(seed)


def test_hmm_mv_and_missing_responses():
    sim = hmm_chain(n_sequences=60, chain="sticky", p_observe=0.5, seed=5)
    fits = _run(sim, ["ds", "hmm-mv"])
    assert accuracy(fits["hmm-mv"].labels_, sim.truth) > accuracy(fits["ds"].labels_, sim.truth)


def test_hmm_requires_sequences_and_validates_parameters():
    sim = hmm_chain(n_sequences=5, length=5, seed=0)
    with pytest.raises(UserInputError):
        create("hmm-em").fit(sim.responses.drop(columns=["sequence", "position"]))
    with pytest.raises(UserInputError):
        create("hmm-mv", decode="beam").fit(sim.responses)


def test_length_one_sequences_are_handled():
    sim = hmm_chain(n_sequences=300, length=1, n_classes=3, seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = create("hmm-mv").fit(sim.responses)
    assert accuracy(est.labels_, sim.truth) > 0.6
    assert np.isfinite(est.transition_.to_numpy()).all()


def test_hmm_em_best_init_keeps_the_higher_likelihood():
    sim = hmm_chain(n_sequences=40, chain="sticky", p_observe=0.6, seed=6)
    fits = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for init in ("mm", "mv", "ds", "best"):
            fits[init] = create("hmm-em", init=init, emission="independent").fit(sim.responses)
    restarts = fits["best"].result_.restarts  # observed log Pr(F) after the short runs from every start
    scores = dict(zip(restarts.labels, restarts.log_likelihoods))
    assert set(scores) == {"mm", "mv", "ds"}
    used = restarts.labels[restarts.best]
    assert used == max(scores, key=scores.get) == fits["best"].result_.details["init_used"]
    for init in ("mm", "mv", "ds"):  # one start: no restarts to report
        assert fits[init].result_.restarts is None
    # the winner is then run to convergence: the same optimum as a full run from that start
    single = fits[used]
    assert fits["best"].loss_history_[-1] == pytest.approx(single.loss_history_[-1], rel=1e-6)
    with pytest.raises(UserInputError):
        create("hmm-em", init="random").fit(sim.responses)
    with pytest.raises(UserInputError):
        create("hmm-em", emission="semi-markov").fit(sim.responses)


def test_response_context_is_the_annotators_own_previous_label():
    # positions are ordered as integers (2 < 9 < 10), not as strings; worker v skips position 9
    df = pd.DataFrame(
        [
            ("a/10", "u", "O", "a", 10),
            ("a/2", "u", "B", "a", 2),
            ("a/9", "u", "I", "a", 9),
            ("a/2", "v", "O", "a", 2),
            ("a/10", "v", "B", "a", 10),
            ("b/0", "u", "I", "b", 0),
            ("b/1", "v", "O", "b", 1),
        ],
        columns=["task", "worker", "label", "sequence", "position"],
    )
    resp = Responses.from_frame(df)
    lay = layout_from_responses(resp)
    ctx = response_context(resp, lay)
    k = resp.n_classes
    code = {lab: i for i, lab in enumerate(resp.classes)}
    got = {
        (resp.items[i], resp.workers[w]): ("-" if c == k else resp.classes[c])
        for i, w, c in zip(resp.item, resp.worker, ctx.context)
    }
    assert got == {
        ("a/2", "u"): "-",
        ("a/9", "u"): "B",
        ("a/10", "u"): "I",
        ("a/2", "v"): "-",
        ("a/10", "v"): "-",  # v did not label a/9: no context
        ("b/0", "u"): "-",
        ("b/1", "v"): "-",  # never across sequences or annotators
    }
    # the sparse counts hold one (worker, context, label) entry per response
    assert ctx.counts.sum() == resp.n_responses
    col = (resp.workers.get_loc("u") * (k + 1) + code["I"]) * k + code["O"]
    assert ctx.counts[resp.items.get_loc("a/10"), col] == 1


def test_markov_emission_with_context_free_tables_is_the_papers_model():
    sim = hmm_chain(n_sequences=15, length=12, p_observe=0.7, seed=3)
    resp = _sim_responses(sim)
    lay = layout_from_responses(resp)
    ctx = response_context(resp, lay)
    t, p0 = sim.transition, sim.start_prob
    plain = HMMState(sim.confusion, t, p0)
    tables = HMMState(sim.confusion, t, p0, np.repeat(sim.confusion[:, None], resp.n_classes + 1, axis=1))
    one = hmm_e_step(resp, lay, plain)
    two = hmm_e_step(resp, lay, tables, ctx)
    np.testing.assert_allclose(two.posterior, one.posterior, atol=1e-12)
    np.testing.assert_allclose(two.xi_sum, one.xi_sum, atol=1e-9)
    assert two.log_evidence == pytest.approx(one.log_evidence, rel=1e-12)


def _copying_annotators(seed, rho, n_seq=100, length=30, k=4, m=8, p_obs=0.5):
    """Sticky chain; each annotator repeats its own previous label with probability ``rho``, else answers by
    its confusion: errors persist along the sequence, as on CoNLL-NER (the markov emission is exact here)."""
    rng = np.random.default_rng(seed)
    conf = gen_confusions(k, m, 5, 0.3, 0.5, rng=rng)
    t = transition_matrix("sticky", k, rng=rng)
    y = sample_chains(t, stationary(t), n_seq, length, rng)
    frames = []
    for w in range(m):
        seqs = np.flatnonzero(rng.random(n_seq) < p_obs)
        lab = np.zeros((len(seqs), length), dtype=int)
        for n in range(length):
            cum = conf[w, y[seqs, n]].cumsum(axis=1)
            fresh = np.minimum((rng.random((len(seqs), 1)) > cum).sum(axis=1), k - 1)
            copy = (rng.random(len(seqs)) < rho) if n else np.zeros(len(seqs), dtype=bool)
            lab[:, n] = np.where(copy, lab[:, n - 1], fresh)
        ss, nn = np.meshgrid(seqs, np.arange(length), indexing="ij")
        frames.append(
            pd.DataFrame(
                {
                    "task": [f"{a}/{b}" for a, b in zip(ss.ravel(), nn.ravel())],
                    "worker": f"w{w}",
                    "label": lab.ravel(),
                    "sequence": ss.ravel(),
                    "position": nn.ravel(),
                }
            )
        )
    return pd.concat(frames, ignore_index=True)


def test_auto_emission_follows_held_out_likelihood():
    """emission='auto' keeps the paper's emission when errors are independent given the truth (T6 data) and
    the annotator-Markov emission when annotators' errors persist along the sequence."""
    indep = create("hmm-em", init="ds").fit(hmm_chain(chain="sticky", seed=0).responses)
    res = indep.result_
    assert res.sequence.emission == "independent", res.details["emission_heldout_log_likelihood"]
    assert "context_confusion" not in res.details
    copying = create("hmm-em", init="ds").fit(_copying_annotators(0, rho=0.6))
    res = copying.result_
    assert res.sequence.emission == "markov", res.details["emission_heldout_log_likelihood"]
    assert res.details["context_confusion"].shape == (8, 5, 4, 4)
    np.testing.assert_allclose(res.details["context_confusion"].sum(axis=-1), 1.0, atol=1e-9)
    tr = copying.loss_history_
    assert all(b >= a - 1e-9 * abs(a) for a, b in itertools.pairwise(tr))  # MAP-EM with a fixed Dirichlet prior


def _span_error_bio(seed, n_seq=150, length=20, m=8, p_obs=0.5):
    """BIO chains (O, B-A, I-A, B-B, I-B) and annotators whose errors cover whole spans, as on CoNLL-NER:
    each entity is missed entirely (all O) or mistyped entirely, spurious entities start in O runs, plus 3%
    token noise."""
    rng = np.random.default_rng(seed)
    y = np.zeros((n_seq, length), dtype=int)
    for s in range(n_seq):
        n = 0
        while n < length:
            if rng.random() < 0.15:
                t, span = rng.integers(2), rng.geometric(0.5)
                y[s, n] = 1 + 2 * t
                y[s, n + 1 : n + span] = 2 + 2 * t
                n += span
            else:
                n += 1
    p_miss, p_type, p_spur = rng.uniform(0.1, 0.3, m), rng.uniform(0.05, 0.2, m), rng.uniform(0.01, 0.04, m)
    frames = []
    for w in range(m):
        seqs = np.flatnonzero(rng.random(n_seq) < p_obs)
        for s in seqs:
            lab, n = y[s].copy(), 0
            while n < length:
                if y[s, n] in (1, 3):
                    e = n + 1
                    while e < length and y[s, e] == y[s, n] + 1:
                        e += 1
                    r = rng.random()
                    if r < p_miss[w]:
                        lab[n:e] = 0
                    elif r < p_miss[w] + p_type[w]:
                        lab[n:e] = y[s, n:e] + (2 if y[s, n] == 1 else -2)
                    n = e
                elif rng.random() < p_spur[w]:
                    t, e = rng.integers(2), n + 1
                    while e < length and y[s, e] == 0 and rng.random() < 0.6:
                        e += 1
                    lab[n], lab[n + 1 : e] = 1 + 2 * t, 2 + 2 * t
                    n = e
                else:
                    n += 1
            flip = rng.random(length) < 0.03
            lab[flip] = rng.integers(5, size=int(flip.sum()))
            frames.append(
                pd.DataFrame(
                    {
                        "task": [f"{s}/{i}" for i in range(length)],
                        "worker": f"w{w}",
                        "label": lab,
                        "sequence": s,
                        "position": np.arange(length),
                    }
                )
            )
    truth = pd.Series(y.ravel(), index=[f"{s}/{i}" for s in range(n_seq) for i in range(length)])
    return pd.concat(frames, ignore_index=True), truth


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(6))
def test_span_level_errors_default_hmm_em_no_worse_than_ds(seed):
    """Span-correlated errors (the CoNLL pattern): 'auto' picks the markov emission and stays within one
    point of DS token accuracy (the paper's emission is also kept within one point)."""
    df, truth = _span_error_bio(seed)
    fits = _run_frame(df, {"ds": {}, "hmm-em": {}, "indep": {"emission": "independent"}})
    acc = {k: accuracy(v.labels_, truth.reindex(v.labels_.index)) for k, v in fits.items()}
    assert fits["hmm-em"].result_.sequence.emission == "markov"
    assert acc["hmm-em"] >= acc["ds"] - 0.01, acc
    assert acc["indep"] >= acc["ds"] - 0.01, acc


def _run_frame(df, specs):
    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for key, params in specs.items():
            out[key] = create("hmm-em" if key == "indep" else key, **params).fit(df)
    return out


def test_hard_labels_are_the_decoded_labels():
    sim = hmm_chain(n_sequences=30, chain="sticky", p_observe=0.7, seed=2)
    vit = create("hmm-em", init="mv").fit(sim.responses)
    hard = vit.result_.hard_labels
    assert hard.shape == (len(vit.result_.items),) and hard.dtype.kind == "i"
    np.testing.assert_array_equal(hard, vit.result_.sequence.viterbi)
    np.testing.assert_array_equal(vit.result_.label_codes, hard)
    assert vit.labels_.equals(vit.viterbi_) and vit.result_.labels.equals(vit.labels_)
    post = create("hmm-em", init="mv", decode="posterior").fit(sim.responses)
    np.testing.assert_array_equal(post.result_.hard_labels, post.probas_.to_numpy().argmax(axis=1))
    np.testing.assert_array_equal(post.result_.label_codes, post.result_.hard_labels)
    assert post.result_.labels.equals(post.labels_)
    assert (post.result_.sequence.viterbi != post.result_.hard_labels).any()  # the two decodings differ here


from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(
            st.integers(0, 3), st.integers(0, 5), st.sampled_from(["u", "v", "w"]), st.sampled_from(["B", "I", "O"])
        ),
        min_size=4,
        max_size=40,
    ),
    st.sampled_from(["hmm-em", "hmm-mm", "hmm-mv"]),
)
def test_random_sequences_fit_or_explain(data, method):
    df = pd.DataFrame(data, columns=["sequence", "position", "worker", "label"]).drop_duplicates(
        ["sequence", "position", "worker"]
    )
    df["task"] = df["sequence"].astype(str) + "/" + df["position"].astype(str)
    est = fit_or_explain(df, method)
    if est is None:
        return
    np.testing.assert_allclose(est.transition_.sum(axis=0), 1.0, atol=1e-9)
    assert set(est.labels_) <= set(df["label"])


def test_clamped_gold_token_conditions_forward_backward_and_viterbi():
    """A gold token in the emission table gives exactly the posteriors of the paths through its label."""
    from fusion_core.methods.sequential.model import clamp_emission

    conf, t, p0, f, log_e = _random_problem(5)
    n, k = log_e.shape
    gold = (np.array([2]), np.array([1]))
    clamped = clamp_emission(log_e, gold)
    fb = forward_backward(clamped[None], np.array([n]), t, p0, return_xi=True)
    paths = np.array(list(itertools.product(range(k), repeat=n)))
    logp = np.log(p0[paths[:, 0]]) + log_e[np.arange(n), paths].sum(axis=1)
    logp += np.log(t[paths[:, 1:], paths[:, :-1]]).sum(axis=1)
    ok = paths[:, 2] == 1
    p = np.where(ok, np.exp(logp), 0.0)
    q = np.zeros((n, k))
    for i in range(n):
        np.add.at(q[i], paths[:, i], p / p.sum())
    np.testing.assert_allclose(fb.posterior[0], q, atol=1e-10)
    assert fb.log_likelihood[0] == pytest.approx(np.log(p.sum()), rel=1e-12)  # log Pr(F, y_2 = 1)
    np.testing.assert_array_equal(viterbi(clamped[None], np.array([n]), t, p0)[0], paths[ok][np.argmax(logp[ok])])


@pytest.mark.parametrize("name", ["hmm-em", "hmm-mm", "hmm-mv"])
def test_gold_labels_are_clamped_and_inform_their_neighbours(name):
    sim = hmm_chain(n_sequences=40, length=25, chain="sticky", p_observe=0.4, seed=7)
    truth = sim.truth
    gold = truth.iloc[::3]
    rest = truth.index.difference(gold.index)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        free = create(name).fit(sim.responses)
        est = create(name).fit(sim.responses, true_labels=gold)
    p = est.probas_.loc[gold.index]
    np.testing.assert_array_equal(p.to_numpy().max(axis=1), 1.0)
    assert (est.labels_.loc[gold.index] == gold).all() and (est.viterbi_.loc[gold.index] == gold).all()
    np.testing.assert_array_equal(est.result_.label_codes, est.result_.hard_labels)
    # forward–backward carries the gold information to the other tokens of the sentence
    assert not np.allclose(free.probas_.loc[rest].to_numpy(), est.probas_.loc[rest].to_numpy(), atol=1e-3)
    assert accuracy(est.labels_.loc[rest], truth) >= accuracy(free.labels_.loc[rest], truth)


@pytest.mark.parametrize(
    "name,params",
    [
        ("hmm-em", {"em_max_iter": 0}),
        ("hmm-em", {"init": "random"}),
        ("hmm-em", {"lag_pairs": "lower"}),
        ("hmm-em", {"context_prior": -1.0}),
        ("hmm-em", {"min_pair_support": 0}),
        ("hmm-mv", {"emission": "semi-markov"}),
        ("hmm-mv", {"smoothing": -0.1}),
        ("hmm-mm", {"start_prob": "first"}),
        ("hmm-mm", {"item_weights": pd.Series([-1.0], index=["0/0"])}),
    ],
)
def test_out_of_range_parameters_are_refused(name, params):
    with pytest.raises(UserInputError, match=next(iter(params))):
        create(name, **params)


def test_parameters_that_do_nothing_are_not_offered():
    from fusion_core.methods import info

    assert {"smoothing", "em_max_iter", "emission"}.isdisjoint(p.name for p in info("hmm-mm").params)
    assert {"lag_pairs", "n_restarts", "min_pair_support"}.isdisjoint(p.name for p in info("hmm-mv").params)


def test_baum_welch_warns_at_its_iteration_limit():
    from fusion_core.errors import ConvergenceWarning

    sim = hmm_chain(n_sequences=20, length=15, seed=1)
    with pytest.warns(ConvergenceWarning, match="Baum–Welch"):
        est = create("hmm-mv", em_max_iter=2, tol=0.0).fit(sim.responses)
    assert not est.converged_ and est.n_iter_ == 2


def test_sequence_strip_marks_the_viterbi_path():
    from fusion_core.plots import sequence_strip

    sim = hmm_chain(n_sequences=10, length=12, chain="sticky", p_observe=0.5, seed=3)
    resp = Responses.from_frame(sim.responses)
    est = create("hmm-mv").fit(resp)
    seq = resp.sequences[1]
    fig = sequence_strip(est, resp, seq)
    items = np.flatnonzero(resp.sequence == 1)
    items = items[np.argsort(resp.position[items])]
    marks = fig.data[1]
    assert marks.name == "Viterbi path"
    np.testing.assert_array_equal(
        np.asarray(marks.y), resp.classes.take(est.result_.sequence.viterbi[items]).astype(str)
    )
