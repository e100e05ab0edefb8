"""Bootstrap intervals: coverage of known simulated skills, label-permutation safety, any method."""

from __future__ import annotations

import numpy as np
import pytest

from fusion_core.diagnostics.bootstrap import align_classes, bootstrap_intervals
from fusion_core.errors import UserInputError
from fusion_core.methods import DawidSkene
from fusion_core.simulate import dawid_skene


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
    spam = sim.extras["role"][sim.extras["role"] == "spammer"].index
    honest = sim.extras["role"][sim.extras["role"] == "honest"].index
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

    structured = [m.name for m in available() if m.needs()]
    for name in structured:  # sequences / graphs / context do not survive item resampling: refused clearly
        with pytest.raises(UserInputError, match="plain responses"):
            bootstrap_intervals(sim.responses, name)
