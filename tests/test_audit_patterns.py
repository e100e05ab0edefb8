"""Label patterns for the verdicts (fusion_core.diagnostics.audit.patterns): a swap of labels is found and checked
on held-out items, a spammer's labels are no swap, one label given almost always is named, and the rule's
"swaps labels" verdict on hand-built cases; the swap oracle on simulated crowds (slow)."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from fusion_core.data.responses import as_responses
from fusion_core.diagnostics.audit import NOISY, SPAMMER, SWAPS, VERDICTS, VerdictRule, decide, run_audit
from fusion_core.diagnostics.audit.patterns import label_patterns
from fusion_core.simulate import dawid_skene

RULE = VerdictRule(level=0.9, min_responses=10, chance_band=0.15, reliable_skill=0.5, max_width=0.4)


def _crowd(n_items: int = 90, seed: int = 0) -> tuple[pd.DataFrame, np.ndarray]:
    """Three labels, truth cycling 0, 1, 2; an honest annotator (always right), a swapper ('1' ↔ '2', else right),
    a spammer (uniform labels) and one who says '2' on 90% of items (the truth on every tenth)."""
    rng = np.random.default_rng(seed)
    truth = np.arange(n_items) % 3
    swap = np.array([0, 2, 1])[truth]
    spam = rng.integers(0, 3, n_items)
    mostly = np.where(np.arange(n_items) % 10 == 0, truth, 2)
    rows = [
        pd.DataFrame({"task": [f"i{i}" for i in range(n_items)], "worker": w, "label": lab.astype(str)})
        for w, lab in (("honest", truth), ("swapper", swap), ("spammer", spam), ("mostly2", mostly))
    ]
    return pd.concat(rows, ignore_index=True), truth


def test_label_patterns_hand_computed():
    answers, truth = _crowd()
    resp = as_responses(answers)
    items = [str(x) for x in resp.items]
    posterior = np.eye(3)[truth[[int(i[1:]) for i in items]]]  # the truth itself as the reference
    p = label_patterns(resp, posterior, class_prior=np.full(3, 1 / 3), confusion=None, level=0.9)
    at = {str(w): j for j, w in enumerate(resp.workers)}
    s = at["swapper"]
    assert p.swap[s] and list(p.mapping[s]) == [0, 2, 1]
    # every held-out response is right once relabelled: accuracy 1, chance Σ_l r_l π_m(l) = 1/3, skill 1
    n = 90
    assert p.relabelled_skill[s] == pytest.approx(1.0)
    low = stats.beta.ppf(0.05, 1 + n, 1)
    assert p.relabelled_low[s] == pytest.approx((low - 1 / 3) / (2 / 3), abs=1e-9)
    assert p.swap_words()[s] == "'1' where the rest of the crowd says '2', '2' where the rest of the crowd says '1'"
    h = at["honest"]
    assert not p.swap[h] and list(p.mapping[h]) == [0, 1, 2] and p.swap_words()[h] == ""
    assert p.relabelled_skill[h] == pytest.approx(1.0)
    # a spammer's map, chosen on one half and scored on the other, is no better than chance
    assert p.relabelled_low[at["spammer"]] < 0.15
    m = at["mostly2"]
    # '2' on 81 of the 90 items, and on 3 of the other 9 (their truth cycles 0, 1, 2): 84 of 90
    assert p.top_share[m] == pytest.approx(84 / 90) and p.crowd_share[m] == pytest.approx(1 / 3)
    assert p.top_words()[m] == "gives '2' on 93% of its responses (the rest of the crowd on 33% of the same items)"
    assert p.top_words()[h] == ""


def test_no_swap_on_two_labels():
    """On two labels a swap is "worse than chance" (its own verdict), never "swaps labels"."""
    truth = np.arange(60) % 2
    answers = pd.concat(
        [
            pd.DataFrame({"task": [f"i{i}" for i in range(60)], "worker": w, "label": lab.astype(str)})
            for w, lab in (("a", truth), ("flip", 1 - truth))
        ]
    )
    resp = as_responses(answers)
    items = [int(str(i)[1:]) for i in resp.items]
    p = label_patterns(resp, np.eye(2)[truth[items]], class_prior=None, confusion=None)
    assert not p.swap.any()


def test_decide_swaps_labels_on_hand_built_cases():
    #            skill  low    high  relabelled low, swap words,         expected
    cases = [
        (0.02, -0.08, 0.12, 0.40, "'1' where the rest says '2'", SWAPS),  # near chance as written, a clear swap
        (0.02, -0.08, 0.12, 0.10, "'1' where the rest says '2'", SPAMMER),  # relabelled still near the band
        (0.02, -0.08, 0.12, 0.90, "", SPAMMER),  # no swap (e.g. the identity map, or two labels)
        (0.35, 0.25, 0.45, 0.60, "'1' where the rest says '2'", NOISY),  # noisy: the swap named in the reason
        (-0.50, -0.60, -0.40, 0.90, "'1' where the rest says '2'", "worse than chance (adversarial)"),
    ]
    skill, low, high, r_low, words, expected = (np.array(c, dtype=object) for c in zip(*cases))
    k = len(cases)
    tops = np.array(["", "", "gives '2' on 91% of its responses", "", ""], dtype=object)
    verdict, reason = decide(
        skill.astype(float),
        low.astype(float),
        high.astype(float),
        np.full(k, 200),
        np.zeros(k, dtype=bool),
        rule=RULE,
        relabelled_low=r_low.astype(float),
        swap_words=words,
        top_words=tops,
    )
    assert list(verdict) == list(expected)
    assert set(verdict) <= set(VERDICTS)
    assert "it answers '1' where the rest says '2'" in reason[0] and "from 0.40" in reason[0]
    assert reason[2].startswith("gives '2' on 91% of its responses; skill above chance is below 0.15")
    assert reason[3].endswith("; it mostly answers '1' where the rest says '2' (relabelled so, its skill is higher)")


def _swap_crowd(seed: int, n_classes: int) -> tuple[pd.DataFrame, pd.Series, list[str]]:
    """A simulated crowd (honest, 4 spammers) in which three honest annotators swap labels 1 and 2."""
    sim = dawid_skene(
        n_items=1500,
        n_workers=40,
        n_classes=n_classes,
        responses_per_item=5,
        accuracy=(0.6, 0.95),
        spammers=4,
        seed=seed,
    )
    r = sim.responses.copy()
    honest = [str(w) for w in sim.role.index[sim.role == "honest"]][:3]
    labs = sorted(r["label"].unique())
    m = r["worker"].astype(str).isin(honest)
    r.loc[m, "label"] = r.loc[m, "label"].map({labs[1]: labs[2], labs[2]: labs[1]}).fillna(r.loc[m, "label"])
    return r, sim.role, honest


@pytest.mark.slow
def test_swappers_found_and_spammers_stay_near_chance_many_seeds():
    """Three labels, 10 seeds: 3 honest annotators (accuracy 0.6–0.95) swap '1' and '2' — as written near chance,
    relabelled skilled: none of them is called near chance, "swaps labels" for ≥ 85% of them (the others: worse than
    chance as written where the class shares make the swap so, noisy, or undecided); spammers are never "swaps
    labels", nor is anyone else (measured: 27 of 30, 1 worse than chance, 1 noisy, 1 undecided; others 0 of 370)."""
    swapped, others, spammers_swapped, called = [], [], [], []
    for seed in range(10):
        answers, role, swappers = _swap_crowd(seed, 3)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            audit = run_audit(answers, cartel_bootstrap=50, random_state=seed)
        v = pd.Series(audit.annotators.verdict, index=[str(w) for w in audit.annotators.workers])
        swapped += list(v[swappers] == SWAPS)
        called += list(v[swappers])
        spammers_swapped += list(v[[str(w) for w in role.index[role == "spammer"]]] == SWAPS)
        others += list(v.drop(swappers) == SWAPS)
    print(
        f"swappers called so {np.mean(swapped):.2f} of {len(swapped)} ({pd.Series(called).value_counts().to_dict()});"
        f" others {sum(others)} of {len(others)}"
    )
    assert np.mean(swapped) >= 0.85 and SPAMMER not in called
    assert not any(spammers_swapped) and not any(others)


def test_top_label_named_only_when_over_used():
    """A label given on ≥ 80% of responses is named only ≥ 10 points above the crowd's share of that class on the
    same items: on 88/12 labels, 85% of the common one is no over-use."""
    from fusion_core.diagnostics.audit.patterns import LabelPatterns

    nan = np.full(3, np.nan)
    p = LabelPatterns(
        workers=pd.Index(["a", "b", "c"]),
        classes=pd.Index(["no", "yes"]),
        top_label=np.array([0, 0, 1]),
        top_share=np.array([0.85, 0.95, 0.70]),
        crowd_share=np.array([0.88, 0.50, 0.20]),
        mapping=np.tile([0, 1], (3, 1)),
        swap=np.zeros(3, dtype=bool),
        relabelled_skill=nan,
        relabelled_low=nan,
        level=0.9,
    )
    assert list(p.top_words()) == [
        "",
        "gives 'no' on 95% of its responses (the rest of the crowd on 50% of the same items)",
        "",
    ]
