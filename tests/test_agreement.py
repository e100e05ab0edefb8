"""Agreement statistics against hand-computed / published cases."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fusion_core.data.responses import Responses
from fusion_core.diagnostics.agreement import (
    agreement_summary,
    cohen_kappa_matrix,
    fleiss_kappa,
    krippendorff_alpha,
    most_active,
)
from fusion_core.simulate import dawid_skene

# Fleiss (1971)-style worked example (Wikipedia "Fleiss' kappa"): 10 subjects, 14 raters, 5 categories.
FLEISS_TABLE = np.array(
    [
        [0, 0, 0, 0, 14],
        [0, 2, 6, 4, 2],
        [0, 0, 3, 5, 6],
        [0, 3, 9, 2, 0],
        [2, 2, 8, 1, 1],
        [7, 7, 0, 0, 0],
        [3, 2, 6, 3, 0],
        [2, 5, 3, 2, 2],
        [6, 5, 2, 1, 0],
        [0, 2, 2, 3, 7],
    ]
)


def _long_from_counts(table: np.ndarray) -> pd.DataFrame:
    rows = []
    for i, row in enumerate(table):
        labels = np.repeat(np.arange(table.shape[1]), row)
        rows += [(f"s{i}", f"r{j}", int(lab)) for j, lab in enumerate(labels)]
    return pd.DataFrame(rows, columns=["task", "worker", "label"])


def test_fleiss_published_example():
    # P̄ = 0.378, P_e = 0.2128 → κ = 0.2099 (hand-computed from the table)
    p_bar = np.mean([(r * (r - 1)).sum() / (14 * 13) for r in FLEISS_TABLE])
    p_k = FLEISS_TABLE.sum(0) / FLEISS_TABLE.sum()
    expected = (p_bar - (p_k**2).sum()) / (1 - (p_k**2).sum())
    assert expected == pytest.approx(0.2099, abs=5e-4)
    assert fleiss_kappa(FLEISS_TABLE) == pytest.approx(expected, abs=1e-12)
    assert fleiss_kappa(_long_from_counts(FLEISS_TABLE)) == pytest.approx(expected, abs=1e-12)


def test_fleiss_unequal_raters_hand_case():
    # item A: 3 ratings (x, x, y); item B: 2 ratings (y, y); item C: 1 rating (ignored)
    df = pd.DataFrame({"task": list("AAABBC"), "worker": ["1", "2", "3", "1", "2", "3"], "label": list("xxyyyx")})
    p_a = (2 * 1 + 0) / (3 * 2)  # 1/3
    p_b = 1.0
    p_bar = (p_a + p_b) / 2
    p_k = np.array([2, 3]) / 5
    p_e = (p_k**2).sum()
    assert fleiss_kappa(df) == pytest.approx((p_bar - p_e) / (1 - p_e))


def test_krippendorff_published_nominal_example():
    # Krippendorff (2011) reliability data with missing values: nominal α = 0.743
    nan = np.nan
    data = np.array(
        [
            [1, 2, 3, 3, 2, 1, 4, 1, 2, nan, nan, nan],
            [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, nan, 3],
            [nan, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, nan],
            [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, nan],
        ]
    )
    obs, unit = np.nonzero(~np.isnan(data))
    df = pd.DataFrame({"task": unit, "worker": obs, "label": data[obs, unit].astype(int)})
    assert krippendorff_alpha(df) == pytest.approx(0.743, abs=5e-4)


def test_perfect_and_chance_agreement():
    df = pd.DataFrame({"task": [0, 0, 1, 1, 2, 2], "worker": [0, 1] * 3, "label": ["a", "a", "b", "b", "a", "a"]})
    assert fleiss_kappa(df) == pytest.approx(1.0)
    assert krippendorff_alpha(df) == pytest.approx(1.0)
    sim = dawid_skene(n_items=3000, n_workers=10, n_classes=2, responses_per_item=4, spammers=10, seed=3)
    assert abs(fleiss_kappa(sim.responses)) < 0.05
    assert abs(krippendorff_alpha(sim.responses)) < 0.05


def test_cohen_kappa_hand_case():
    # 50 items: yes/yes 20, yes/no 5, no/yes 10, no/no 15 → p_o = 0.7, p_e = 0.5, κ = 0.4
    a = ["yes"] * 25 + ["no"] * 25
    b = ["yes"] * 20 + ["no"] * 5 + ["yes"] * 10 + ["no"] * 15
    df = pd.DataFrame({"task": list(range(50)) * 2, "worker": ["A"] * 50 + ["B"] * 50, "label": a + b})
    kappa, shared = cohen_kappa_matrix(df)
    assert kappa.loc["A", "B"] == pytest.approx(0.4)
    assert kappa.loc["B", "A"] == pytest.approx(0.4)
    assert kappa.loc["A", "A"] == 1.0
    assert shared.loc["A", "B"] == 50


def test_cohen_kappa_matches_loop_on_sparse_data():
    sim = dawid_skene(n_items=200, n_workers=8, n_classes=3, responses_per_item=3, seed=5)
    resp = Responses.from_frame(sim.responses)
    kappa, shared = cohen_kappa_matrix(resp, min_overlap=1)
    dense = resp.dense_matrix()
    for a in range(resp.n_workers):
        for b in range(a + 1, resp.n_workers):
            both = (dense[a] >= 0) & (dense[b] >= 0)
            assert shared.iloc[a, b] == both.sum()
            x, y = dense[a, both], dense[b, both]
            po = (x == y).mean()
            pe = sum((x == k).mean() * (y == k).mean() for k in range(3))
            assert kappa.iloc[a, b] == pytest.approx((po - pe) / (1 - pe))


def test_cohen_kappa_undefined_pairs_and_subset():
    df = pd.DataFrame({"task": [0, 1, 2, 3], "worker": ["A", "A", "B", "B"], "label": [0, 1, 0, 1]})
    kappa, shared = cohen_kappa_matrix(df)
    assert np.isnan(kappa.loc["A", "B"]) and shared.loc["A", "B"] == 0
    sim = dawid_skene(n_items=300, n_workers=12, seed=1, worker_activity="zipf")
    top = most_active(sim.responses, 4)
    kappa, _ = cohen_kappa_matrix(sim.responses, workers=top)
    assert list(kappa.index) == list(top)
    counts = sim.responses["worker"].value_counts()
    assert counts[top[0]] == counts.max()


def test_agreement_summary_orders_good_and_noisy_crowds():
    good = dawid_skene(n_items=500, n_workers=10, accuracy=(0.85, 0.95), seed=2).responses
    noisy = dawid_skene(n_items=500, n_workers=10, accuracy=(0.4, 0.5), seed=2).responses
    g, n = agreement_summary(good), agreement_summary(noisy)
    assert [v.key for v in g.values] == ["fleiss_kappa", "krippendorff_alpha"]
    assert g.value("fleiss_kappa") > n.value("fleiss_kappa") + 0.3
    assert g.value("krippendorff_alpha") > n.value("krippendorff_alpha") + 0.3
    assert g.value("fleiss_kappa") == fleiss_kappa(good) and g.value("krippendorff_alpha") == krippendorff_alpha(good)
    assert g.mean_pairwise_kappa > n.mean_pairwise_kappa + 0.3
    assert g.items_used == 500 and g.mean_ratings_per_item == pytest.approx(5.0)


def test_agreement_command_nominal_prints_every_registered_statistic(tmp_path, capsys):
    import json

    from fusion_core.cli import main
    from fusion_core.diagnostics.agreement import AGREEMENT_STATISTICS
    from fusion_core.diagnostics.krippendorff import krippendorff

    sim = dawid_skene(n_items=120, n_workers=8, n_classes=3, responses_per_item=3, seed=5)
    src = tmp_path / "answers.csv"
    sim.responses.to_csv(src, index=False)
    assert main(["agreement", str(src), "--metric", "nominal", "--bootstrap", "40", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert len(out) == len(AGREEMENT_STATISTICS)
    kappa, alpha = out
    assert kappa["statistic"] == "Fleiss' kappa" and kappa["value"] == fleiss_kappa(sim.responses.astype(str))
    ref = krippendorff(sim.responses.astype(str), metric="nominal", n_bootstrap=40, level=0.95)
    assert (alpha["statistic"], alpha["value"], alpha["low"], alpha["high"]) == (
        ref.statistic,
        ref.value,
        ref.low,
        ref.high,
    )
