"""Bootstrap intervals: coverage of known simulated skills, label-permutation safety, any method."""

from __future__ import annotations

import numpy as np
import pytest

from fusion_core.data.responses import Responses
from fusion_core.diagnostics.bootstrap import align_classes, bootstrap_intervals
from fusion_core.errors import UserInputError
from fusion_core.methods import DawidSkene
from fusion_core.simulate import dawid_skene
from fusion_core.simulate.sequential import hmm_chain


def _true_skills(sim, index):
    true = np.einsum("k,wkk->w", sim.class_prior, sim.confusion)
    return true[sim.workers.get_indexer(index)]


def test_align_classes_recovers_permutation(rng):
    ref = rng.dirichlet(np.ones(4), size=200)
    perm = np.array([2, 0, 3, 1])
    shuffled = np.empty_like(ref)
    shuffled[:, perm] = ref  # bootstrap class perm[j] plays reference class j
    assert np.array_equal(align_classes(ref, shuffled), perm)
    assert np.allclose(shuffled[:, align_classes(ref, shuffled)], ref)


def test_ds_intervals_cover_true_skills():
    covered, total = 0, 0
    for seed in range(3):
        sim = dawid_skene(n_items=500, n_workers=15, n_classes=3, responses_per_item=5, seed=seed)
        b = bootstrap_intervals(sim.responses, "ds", n_bootstrap=60, level=0.9, random_state=seed)
        t = _true_skills(sim, b.skills.index)
        s = b.skills
        assert (s["low"] <= s["estimate"] + 1e-9).all() and (s["estimate"] <= s["high"] + 1e-9).all()
        covered += int(((s["low"].to_numpy() <= t) & (t <= s["high"].to_numpy())).sum())
        total += len(t)
        assert b.failed == 0 and b.n_bootstrap == 60
        assert b.confusion_low.shape == b.confusion.shape == (15, 3, 3)
        assert np.all(b.confusion_low <= b.confusion_high + 1e-12)
    # nominal 90%; 45 annotators → allow sampling noise, but far above chance-level widths
    assert covered / total >= 0.75


def test_intervals_shrink_with_more_items():
    small = dawid_skene(n_items=200, n_workers=10, n_classes=2, responses_per_item=5, seed=4)
    large = dawid_skene(n_items=2000, n_workers=10, n_classes=2, responses_per_item=5, seed=4)
    ws = bootstrap_intervals(small.responses, "ds", n_bootstrap=30).skills
    wl = bootstrap_intervals(large.responses, "ds", n_bootstrap=30).skills
    assert (wl["high"] - wl["low"]).mean() < 0.6 * (ws["high"] - ws["low"]).mean()


class _LabelSwitchingDS(DawidSkene):
    """DS whose latent classes come back in a rotated order on every other fit (EM label switching)."""

    calls = 0

    def _fit(self, responses, *, gold, graph, context):
        fit = super()._fit(responses, gold=gold, graph=graph, context=context)
        type(self).calls += 1
        if type(self).calls % 2 == 0:
            roll = np.roll(np.arange(responses.n_classes), 1)
            fit.posterior = fit.posterior[:, roll]
            fit.confusion = fit.confusion[:, roll, :]
            fit.class_prior = fit.class_prior[roll]
        return fit


def test_label_permutation_safe():
    sim = dawid_skene(n_items=400, n_workers=12, n_classes=3, responses_per_item=5, seed=7)
    plain = bootstrap_intervals(sim.responses, DawidSkene(), n_bootstrap=20, random_state=3)
    _LabelSwitchingDS.calls = 0  # reference fit unrotated, then every other replicate rotated
    switched = bootstrap_intervals(sim.responses, _LabelSwitchingDS(), n_bootstrap=20, random_state=3)
    assert switched.permuted >= 9
    assert plain.permuted == 0
    np.testing.assert_allclose(switched.skills[["low", "high"]], plain.skills[["low", "high"]], atol=1e-9)
    np.testing.assert_allclose(switched.confusion_low, plain.confusion_low, atol=1e-9)
    np.testing.assert_allclose(switched.confusion_high, plain.confusion_high, atol=1e-9)


@pytest.mark.parametrize("name", ["mv", "ds1"])
def test_other_registered_methods(name):
    sim = dawid_skene(n_items=300, n_workers=8, n_classes=2, responses_per_item=4, spammers=2, seed=2)
    b = bootstrap_intervals(sim.responses, name, n_bootstrap=15)
    assert b.method == name
    s = b.skills
    assert np.isfinite(s[["low", "high"]].to_numpy()).all()
    spam = sim.role[sim.role == "spammer"].index
    honest = sim.role[sim.role == "honest"].index
    assert s.loc[spam, "high"].max() < s.loc[honest, "estimate"].median()


def test_bad_arguments():
    sim = dawid_skene(n_items=50, n_workers=5, seed=0)
    with pytest.raises(UserInputError):
        bootstrap_intervals(sim.responses, "ds", level=1.5)
    with pytest.raises(UserInputError):
        bootstrap_intervals(sim.responses, "ds", n_bootstrap=1)
    with pytest.raises(UserInputError):
        bootstrap_intervals(sim.responses, "no-such-method")
    from fusion_core.methods import available

    graph_methods = [m.name for m in available() if "graph" in m.needs()]
    assert graph_methods
    for name in graph_methods:  # resampling nodes would break the item graph: refused clearly
        with pytest.raises(UserInputError, match="item graph"):
            bootstrap_intervals(sim.responses, name)
    with pytest.raises(UserInputError, match="sequences"):
        bootstrap_intervals(sim.responses, "hmm-em")


def test_item_resampling_matches_a_loop():
    sim = dawid_skene(n_items=60, n_workers=6, n_classes=3, responses_per_item=3, seed=1)
    r = Responses.from_frame(sim.responses)
    draw = np.random.default_rng(0).integers(0, r.n_items, size=r.n_items)
    boot = r.with_items_resampled(draw)
    rows = []
    for j, i in enumerate(draw):  # reference: the responses of each drawn item, in their original order
        for n in np.flatnonzero(r.item == i):
            rows.append((j, r.worker[n], r.label[n]))
    assert list(zip(boot.item, boot.worker, boot.label)) == rows
    assert boot.items.is_unique and boot.n_items == len(draw)


def test_sequence_block_resampling_keeps_whole_sequences():
    sim = hmm_chain(n_sequences=12, length=7, n_classes=3, n_workers=4, n_good=3, seed=3)
    r = Responses.from_frame(sim.responses)
    boot, item_draw = r.with_sequences_resampled(np.array([5, 5, 0, 11]))
    assert boot.n_items == 4 * 7 and len(boot.sequences) == 4
    assert np.array_equal(np.bincount(boot.sequence), [7, 7, 7, 7])
    for s, src in enumerate([5, 5, 0, 11]):
        new_items = np.flatnonzero(boot.sequence == s)
        assert set(r.sequence[item_draw[new_items]]) == {src}
        assert np.array_equal(np.sort(boot.position[new_items]), np.arange(7))
    # every response of a drawn item is carried with its worker and label
    assert boot.n_responses == int(sum(np.isin(r.item, np.flatnonzero(r.sequence == s)).sum() for s in [5, 5, 0, 11]))


def test_sequential_method_block_bootstrap_covers_true_skills():
    sim = hmm_chain(n_sequences=60, length=20, n_classes=3, n_workers=8, n_good=5, accuracy=(0.5, 0.8), seed=5)
    b = bootstrap_intervals(
        sim.responses, "hmm-em", {"emission": "independent", "init": "mv"}, n_bootstrap=25, level=0.9, random_state=1
    )
    s = b.skills
    assert b.failed == 0
    assert (s["low"] <= s["estimate"] + 1e-9).all() and (s["estimate"] <= s["high"] + 1e-9).all()
    t = _true_skills(sim, s.index)
    covered = ((s["low"].to_numpy() - 0.02 <= t) & (t <= s["high"].to_numpy() + 0.02)).mean()
    assert covered >= 0.75
    assert (s["high"] - s["low"]).mean() < 0.25


def test_context_method_bootstrap_carries_context():
    from fusion_core.simulate.context import table1

    sim = table1(6, 600, seed=1001)
    ctx = sim.context
    b = bootstrap_intervals(
        sim.responses, "context-em", n_bootstrap=12, level=0.9, random_state=0, fit_kwargs={"context": ctx}
    )
    s = b.skills
    assert b.failed == 0 and np.isfinite(s[["low", "high"]].to_numpy()).all()
    assert (s["low"] <= s["estimate"] + 1e-9).all() and (s["estimate"] <= s["high"] + 1e-9).all()
    with pytest.raises(UserInputError):  # the context is required, as for fit
        bootstrap_intervals(sim.responses, "context-em", n_bootstrap=3)
