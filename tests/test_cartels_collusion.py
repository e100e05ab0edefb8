"""The collusion check (fusion_core.diagnostics.cartels.collusion): planted cartels called colluding, skilled and
near-chance groups not, the audit and the Cartels page's call agreeing.  Many seeds: ``-m slow`` and
benchmarks/collusion_calibration.py."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from fusion_core.data.responses import as_responses
from fusion_core.diagnostics.audit.runner import _cartel
from fusion_core.diagnostics.cartels.collusion import DEFAULTS, check_collusion, group_evidence
from fusion_core.simulate.spectral import cartel, independent

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from collusion_calibration import run_seed


def _planted(seed: int):
    return cartel(m=50, n=800, r=0.2, pi_c=0.7, pi_range=(0.55, 0.95), xi_range=(0.8, 0.95), observed=0.3, seed=seed)


@pytest.mark.parametrize("seed", [0])
def test_planted_cartel_is_colluding_and_pages_agree(seed):
    sim = _planted(seed)
    resp = as_responses(sim.responses)
    g = sim.group
    true = {str(w) for w in g.index[g != "honest"]}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check = check_collusion(resp, random_state=seed)
        audit = _cartel(resp, DEFAULTS.n_bootstrap, DEFAULTS.alpha, seed, 100)
    assert len(check.groups) == 1
    found = set(check.groups[0])
    assert len(found & true) >= 0.8 * len(true) and len(found - true) <= 1
    ev = next(e for e in check.evidence if e.colluding)
    assert ev.agreement - ev.predicted >= DEFAULTS.min_excess and ev.excess_p < DEFAULTS.alpha
    assert ev.right_low <= ev.right <= ev.right_high
    assert set(audit.groups) == set(check.groups) and audit.status == "groups_found"
    assert check.confirmed().membership[list(ev.members)].eq("cartel 1").all()


def test_skilled_and_near_chance_groups_are_not_colluding():
    """The groups real crowds wrongly accused: the best annotators (agree because they are right) and the worst
    (near chance: spammers, not members)."""
    sim = independent(m=50, n=600, pi_range=(0.55, 0.95), observed=0.3, seed=3)
    resp = as_responses(sim.responses)
    acc = sim.balanced_accuracy.sort_values()
    rng = np.random.default_rng(0)
    best = group_evidence(resp, [str(w) for w in acc.index[-8:]], DEFAULTS, rng)
    worst = group_evidence(resp, [str(w) for w in acc.index[:8]], DEFAULTS, rng)
    assert not best.colluding and not worst.colluding
    assert best.right > 0.9 and abs(best.agreement - best.predicted) < DEFAULTS.min_excess
    # whose skill interval includes chance is set aside as a spammer (true balanced accuracies 0.55–0.58 here)
    assert len(worst.near_chance) >= 1 and not set(worst.near_chance) & set(best.members + best.near_chance)


def test_calibration_two_seeds():
    """Two seeds of the benchmark: no honest annotator accused, the planted cartel found, the pages agree."""
    for seed in (7, 8):
        r = run_seed(seed, audit=False)
        assert r["accused"] == 0 and r["found"] == r["planted"] == 1


@pytest.mark.slow
def test_calibration_many_seeds():
    """Issue 26 item 1's oracle: ≤ 1 % of honest annotators called colluding, ≥ 95 % of planted cartels found, the
    audit and the Cartels page's call name the same groups on every seed."""
    tot: dict[str, float] = {}
    n = 40
    for seed in range(100, 100 + n):
        for k, v in run_seed(seed).items():
            tot[k] = tot.get(k, 0.0) + v
    assert tot["accused"] <= 0.01 * tot["honest"]
    assert tot["found"] >= 0.95 * tot["planted"]
    assert tot["agree"] == n
