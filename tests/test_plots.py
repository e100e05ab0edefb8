"""Figure functions: pure (result in, Figure out), correct data mapping, axes, escaping — no Streamlit."""

from __future__ import annotations

from types import SimpleNamespace

import networkx as nx
import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest

from fusion_core.data.responses import Responses
from fusion_core.diagnostics.agreement import cohen_kappa_matrix
from fusion_core.diagnostics.compare import changed_items, compare_methods
from fusion_core.methods import DawidSkene, MajorityVote
from fusion_core.plots import (
    accuracy_bar,
    agreement_matrix,
    confusion_heatmap,
    confusion_small_multiples,
    eigenvector_bar,
    kappa_heatmap,
    label_distribution,
    loadings_scatter,
    neighbourhood_view,
    overlap_heatmap,
    posterior_histogram,
    response_count_histograms,
    scree_plot,
    sequence_strip,
    skill_ranking,
)
from fusion_core.simulate import dawid_skene

LABELS = ["cat", "dog", "<b>bird</b>"]


@pytest.fixture(scope="module")
def sim():
    return dawid_skene(n_items=300, n_workers=10, n_classes=3, labels=LABELS, seed=4)


@pytest.fixture(scope="module")
def ds(sim):
    return DawidSkene().fit(sim.responses)


def _ticks(values) -> list[str]:
    return [str(v) for v in values]


def test_confusion_heatmap_orientation_values_and_escaping(ds):
    res = ds.result_
    w = res.workers[3]
    fig = confusion_heatmap(ds, w)  # a fitted estimator is accepted as well as a FitResult
    assert isinstance(fig, go.Figure)
    heat = fig.data[0]
    np.testing.assert_allclose(np.asarray(heat.z), res.confusion[3])
    assert fig.layout.yaxis.title.text == "true" and fig.layout.xaxis.title.text == "reported"
    assert fig.layout.yaxis.autorange == "reversed"  # row 0 (first true class) at the top, like a matrix
    classes = _ticks(res.classes)
    expected = [c.replace("<", "&lt;").replace(">", "&gt;") for c in classes]
    assert list(heat.x) == expected and list(heat.y) == expected
    assert not any("<b>" in t for t in heat.x)
    assert (heat.zmin, heat.zmax) == (0, 1)


def test_confusion_small_multiples_order_and_limits(ds):
    res = ds.result_
    fig = confusion_small_multiples(res, max_panels=6)
    heats = [t for t in fig.data if isinstance(t, go.Heatmap)]
    assert len(heats) == 6
    best = res.skills.sort_values(ascending=False).index[:6]
    titles = [a.text for a in fig.layout.annotations][:6]
    assert [t.split(" ")[0] for t in titles] == [str(w) for w in best]
    for h in heats:
        assert (h.zmin, h.zmax) == (0, 1)
    chosen = [res.workers[0], res.workers[5]]
    fig2 = confusion_small_multiples(res, chosen)
    np.testing.assert_allclose(np.asarray(fig2.data[1].z), res.confusion[5])
    assert fig2.layout.yaxis.title.text == "true" and fig2.layout.xaxis.title.text == "reported"


def test_no_confusion_gives_note(sim):
    mv = MajorityVote().fit(sim.responses)
    fig = confusion_heatmap(mv, mv.result_.workers[0])
    assert len(fig.data) == 0 and "no confusion" in fig.layout.annotations[0].text


def test_skill_ranking_sorted_with_error_bars(ds):
    res = ds.result_
    skills = res.skills
    iv = pd.DataFrame({"low": skills - 0.05, "high": skills + 0.1}, index=skills.index)
    fig = skill_ranking(res, iv)
    bar = fig.data[0]
    y = np.asarray(bar.y)
    assert np.all(np.diff(y) <= 0)
    np.testing.assert_allclose(bar.error_y.array, 0.1)
    np.testing.assert_allclose(bar.error_y.arrayminus, 0.05)
    fig2 = skill_ranking(res, max_workers=4)
    assert len(fig2.data[0].x) == 4 and "top 4 of 10" in fig2.layout.title.text
    assert fig2.data[0].error_y.array is None


def test_eigenvector_bar(ds):
    import dataclasses

    from fusion_core.methods.results import SpectralSummary

    res = ds.result_
    assert res.spectral is None
    assert len(eigenvector_bar(res).data) == 0  # not a spectral method: nothing to show
    vec = np.linspace(-0.2, 0.5, len(res.workers))
    res2 = dataclasses.replace(res, spectral=SpectralSummary(eigenvector=vec, eigenvalues=np.array([2.0, 0.5])))
    fig = eigenvector_bar(res2)
    np.testing.assert_allclose(sorted(fig.data[0].y, reverse=True), np.sort(vec)[::-1])
    np.testing.assert_allclose(fig.data[0].y, np.sort(vec)[::-1])  # sorted best first
    assert fig.data[0].marker.color[-1] != fig.data[0].marker.color[0]  # negative entries coloured apart
    assert "balanced accuracy" in fig.layout.yaxis.title.text  # the axis says what the entries measure
    vec[:2] = np.nan  # annotators outside the spectral core have no entry and are left out
    fig = eigenvector_bar(dataclasses.replace(res, spectral=SpectralSummary(eigenvector=vec, eigenvalues=np.array([]))))
    assert len(fig.data[0].y) == len(vec) - 2 and "2 outside the spectral core" in fig.layout.xaxis.title.text
    ova = np.linspace(-0.2, 0.5, 3 * len(res.workers)).reshape(len(res.workers), 3)  # one-vs-all: one series per class
    fig = eigenvector_bar(dataclasses.replace(res, spectral=SpectralSummary(eigenvector=ova, eigenvalues=np.array([]))))
    assert len(fig.data) == 3 and all(len(t.y) == len(res.workers) for t in fig.data)
    np.testing.assert_allclose(fig.data[1].y, ova[::-1, 1])
    empty = np.full(len(res.workers), np.nan)  # the EM fallback: no eigenvector was computed
    fig = eigenvector_bar(
        dataclasses.replace(res, spectral=SpectralSummary(eigenvector=empty, eigenvalues=np.array([])))
    )
    assert len(fig.data) == 0


def _fake_report():
    rng = np.random.default_rng(0)
    workers = pd.Index([f"w{i}" for i in range(8)])
    membership = pd.Series(["honest"] * 5 + ["cartel 1"] * 3, index=workers)
    loadings = pd.DataFrame({"v1": rng.normal(size=8), "v2": rng.normal(size=8)}, index=workers)
    return SimpleNamespace(
        eigenvalues=np.array([5.0, 2.0, 0.6, 0.5]),
        null_eigenvalues=rng.uniform(0.3, 0.9, size=(50, 4)),
        alpha=0.05,
        loadings=loadings,
        membership=membership,
        scores=pd.Series(np.r_[np.zeros(5), np.ones(3)], index=workers),
    )


def test_scree_plot_band_and_observed():
    rep = _fake_report()
    fig = scree_plot(rep)
    names = [t.name for t in fig.data]
    assert "observed" in names and "independence expectation" in names and any("band" in n for n in names)
    observed = fig.data[names.index("observed")]
    np.testing.assert_allclose(observed.y, rep.eigenvalues)
    expect = fig.data[names.index("independence expectation")]
    np.testing.assert_allclose(expect.y, rep.null_eigenvalues.mean(axis=0))
    empty = scree_plot(SimpleNamespace(eigenvalues=[]))
    assert len(empty.data) == 0


def test_loadings_scatter_groups():
    rep = _fake_report()
    fig = loadings_scatter(rep)
    by_name = {t.name: t for t in fig.data}
    assert set(by_name) == {"not in a cartel", "cartel 1"}
    assert len(by_name["cartel 1"].x) == 3 and len(by_name["not in a cartel"].x) == 5
    np.testing.assert_allclose(by_name["cartel 1"].x, rep.loadings["v1"].iloc[5:])


def test_posterior_histogram(ds):
    fig = posterior_histogram(ds)
    conf = ds.result_.posterior.max(axis=1)
    start = min(1 / ds.result_.posterior.shape[1], conf.min())
    np.testing.assert_array_equal(fig.data[0].y, np.histogram(conf, bins=30, range=(start, 1.0))[0])
    assert "300 items" in fig.layout.title.text


def test_sequence_strip():
    from fusion_core.simulate.demo import sequence_demo

    demo = sequence_demo()
    resp = Responses.from_frame(demo.responses)
    est = DawidSkene().fit(resp)
    seq = resp.sequences[2]
    fig = sequence_strip(est, resp, seq)
    heat = fig.data[0]
    z = np.asarray(heat.z)
    items = np.flatnonzero(resp.sequence == 2)
    assert z.shape == (resp.n_classes, len(items))
    assert np.all(np.diff(np.asarray(heat.x)) > 0)  # positions in order
    order = items[np.argsort(resp.position[items])]
    np.testing.assert_allclose(z, est.result_.posterior[order].T)
    assert len(sequence_strip(est, resp, "no-such-seq").data) == 0


def test_neighbourhood_view_samples_large_graphs(sim, ds):
    g = nx.barabasi_albert_graph(300, 4, seed=1)
    g = nx.relabel_nodes(g, {i: f"t{i}" for i in g.nodes})
    center = "t0"
    fig = neighbourhood_view(g, ds, center, radius=3, max_nodes=40)
    markers = [t for t in fig.data if t.mode == "markers"]
    n_drawn = sum(len(t.x) for t in markers)
    assert n_drawn == 40 and "sampled 40 of" in fig.layout.title.text
    texts = [s for t in markers for s in t.text]
    assert any(s.startswith("t0<br>") for s in texts)
    for t in markers:  # colours follow the posterior label
        for s in t.text:
            node = s.split("<br>")[0]
            assert ds.labels_.loc[node].replace("<", "&lt;").replace(">", "&gt;") == t.name
    small = neighbourhood_view(g, ds, center, radius=1, max_nodes=500)
    assert "sampled" not in small.layout.title.text
    assert sum(len(t.x) for t in small.data if t.mode == "markers") == g.degree[center] + 1
    assert len(neighbourhood_view(g, ds, "missing").data) == 0


def test_item_figures_follow_the_methods_own_labels(ds):
    """A joint decoding (Viterbi, ICM) that differs from the posterior argmax is what the figures show."""
    from dataclasses import replace

    res = ds.result_
    codes = (res.posterior.argmax(axis=1) + 1) % len(res.classes)
    joint = replace(res, hard_labels=codes)
    hist = posterior_histogram(joint)
    conf = res.posterior[np.arange(len(codes)), codes]
    start = min(1 / len(res.classes), conf.min())
    np.testing.assert_array_equal(hist.data[0].y, np.histogram(conf, bins=30, range=(start, 1.0))[0])
    g = nx.path_graph(list(res.items[:30]))
    fig = neighbourhood_view(g, joint, res.items[0], radius=3)
    for t in (t for t in fig.data if t.mode == "markers"):
        for text in t.text:
            node = text.split("<br>")[0]
            label = res.classes[codes[res.items.get_loc(node)]]
            assert t.name == str(label).replace("<", "&lt;").replace(">", "&gt;")


def test_data_figures(sim):
    resp = Responses.from_frame(sim.responses)
    fig = response_count_histograms(resp)
    for trace, values in ((fig.data[0], resp.responses_per_worker), (fig.data[1], resp.responses_per_item)):
        counted = dict(zip(*np.unique(values, return_counts=True)))
        assert dict(zip(trace.x, trace.y)) == counted and sum(trace.y) == len(values)
    lab = label_distribution(resp)
    np.testing.assert_array_equal(lab.data[0].y, np.bincount(resp.label))
    assert "&lt;b&gt;bird&lt;/b&gt;" in list(lab.data[0].x)
    kappa, shared = cohen_kappa_matrix(resp)
    kh = kappa_heatmap(kappa)
    assert (kh.data[0].zmin, kh.data[0].zmax) == (-1, 1)
    oh = overlap_heatmap(shared)
    np.testing.assert_array_equal(oh.data[0].z, shared.to_numpy())


def test_compare_figures_and_tables(sim, ds):
    mv = MajorityVote().fit(sim.responses)
    cmp = compare_methods({"ds": ds, "mv": mv}, gold=sim.truth)
    assert cmp.agreement.loc["ds", "ds"] == 1.0
    same = (ds.labels_ == mv.labels_.reindex(ds.labels_.index)).mean()
    assert cmp.agreement.loc["ds", "mv"] == pytest.approx(same)
    assert cmp.changed.loc["ds", "mv"] == round((1 - same) * 300)
    assert cmp.accuracy["ds"] == pytest.approx((ds.labels_ == sim.truth.reindex(ds.labels_.index)).mean())
    assert cmp.accuracy["ds"] >= cmp.accuracy["mv"] - 0.02
    assert cmp.rank_correlation.loc["ds", "mv"] > 0.5
    fig = agreement_matrix(cmp.agreement)
    z = np.array(fig.data[0].z, dtype=float)  # the diagonal (a method with itself) is blank
    expected = cmp.agreement.to_numpy(dtype=float).copy()
    np.fill_diagonal(expected, np.nan)
    np.testing.assert_allclose(z, expected)
    off = expected[np.isfinite(expected)]  # the colour scale spans the off-diagonal range, not 0–1
    assert fig.data[0].zmin >= off.min() - 0.01 and fig.data[0].zmax <= max(off.max(), off.min() + 0.01)
    acc = accuracy_bar(cmp.accuracy)
    assert set(acc.data[0].x) == {"ds", "mv"}
    diff = changed_items(ds, mv)
    assert len(diff) == cmp.changed.loc["ds", "mv"]


@pytest.mark.slow
def test_context_reliability_curves_and_interpolated_regions():
    import warnings

    from fusion_core.methods import create
    from fusion_core.plots import context_confusion_curves, context_reliability
    from fusion_core.simulate.context import confusion_crowd, table1

    sim = table1(5, 400, seed=3)
    ctx = sim.context
    df = sim.responses
    w0 = sorted(df["worker"].unique())[0]
    df = df[~((df["worker"] == w0) & df["task"].isin(ctx[ctx > 0.7].index))]  # w0 never labels x > 0.7
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = create("context-em").fit(df, context=ctx)
    res = est.result_
    fig = context_reliability(est, [w0])
    grid = res.context.grid
    w = list(res.workers).index(w0)
    solid = next(t for t in fig.data if t.name == w0 and t.xaxis == "x")
    dotted = next(t for t in fig.data if t.name == f"{w0} (interpolated)" and t.xaxis == "x")
    y_s, y_d = np.asarray(solid.y, float), np.asarray(dotted.y, float)
    np.testing.assert_allclose(
        np.where(np.isfinite(y_s), y_s, 0), np.where(np.isfinite(y_s), res.context.detection[w], 0)
    )
    assert np.isfinite(y_d[grid > 0.75]).all() and np.isnan(y_s[grid > 0.75]).all()  # beyond its data: dotted only
    assert np.isfinite(y_s[grid < 0.6]).all()
    assert fig.layout.xaxis.title.text == "context" and "detection" in fig.layout.annotations[0].text
    # default: the most skilled annotators, at most max_workers of them
    assert len({t.name for t in context_reliability(est, max_workers=3).data if t.showlegend}) == 3

    sim3 = confusion_crowd(4, 400, seed=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est3 = create("context-em", multiclass="confusion").fit(sim3.responses, context=sim3.context)
    r3 = est3.result_
    k = r3.classes[1]
    fig3 = context_confusion_curves(est3, r3.workers[0], k)
    lines = [np.asarray(t.y, float) for t in fig3.data if t.showlegend is not False]
    assert len(lines) == len(r3.classes)
    total = np.nansum(np.vstack(lines), axis=0)
    np.testing.assert_allclose(total[np.isfinite(np.vstack(lines)).all(axis=0)], 1.0, atol=1e-6)  # a row of Π(x)
    assert "true" in fig3.layout.yaxis.title.text and "reported" in fig3.data[0].name
    assert len(context_reliability(est3, label=k).data) >= 2
    assert "no context curves" in context_reliability(DawidSkene().fit(sim3.responses)).layout.annotations[0].text
