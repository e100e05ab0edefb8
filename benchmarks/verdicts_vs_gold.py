"""The audit's verdicts against each annotator's gold accuracy (issue 26 item 2; docs/AUDIT.md "Verdicts against
gold").

Truth bands from gold (never seen by the audit), per annotator on its responses to gold items: accuracy with its
Beta(1 + right, 1 + wrong) interval at 90 %, chance accuracy Σ_k π_k r_jk with the *gold* class shares π, and
skill above chance κ = (a − c)/(1 − c) with the interval mapped through the same formula:

* ``worse than chance`` — κ's interval wholly below 0;
* ``near chance`` — κ's interval contains 0, or κ < 0.15 (the rule's band);
* ``noisy`` — κ in [0.15, 0.5);  ``reliable`` — κ ≥ 0.5;
* ``few gold`` — fewer than 10 responses on gold items (left out of the summary).

Prints, per crowd and pooled, the confusion table (rows: gold band, columns: verdict), the flag precision and
recall ("bad" = near chance or worse than chance; "flagged" = every verdict of ``rules.FLAGS``: near chance, swaps
labels, worse than chance or in a dependent group — copies or collusion; gold cannot confirm dependence, so the
precision of the accuracy flags alone is printed too, "swaps labels" counted among them), and the acceptance check
of issue 26: annotators with gold accuracy above the crowd's median called near chance or in a dependent group,
and beside it those called "swaps labels" (a flag, counted in precision and recall, but not a claim of chance;
the gold band measures accuracy as written, so a swapper is "near chance" by it); a second line gives the same figures on annotators with at least 50 gold responses (where the gold band
is itself well determined) and the recall among bad annotators that got an accuracy verdict.  A third line splits
the bad annotators: *bad by the gold estimate* (κ < 0.15, or the interval wholly below 0) and *bad only because
the gold interval reaches 0* (estimate ≥ 0.15 on few gold responses: e.g. 16 of 16 right on 88/12 labels, whose
interval of skill reaches below 0), with the recall of each; a fourth says why the audit did not flag the bad
annotators it missed (the reason of its verdict, grouped).

Simulated crowds of several shapes, each built to a principle and never to the public sets (``SHAPES``): ``zipf``
(sparse zipf-active crowd, 10 % spammers, 3 % adversaries), ``imbalanced`` (the same on 80/20 or 70/20/10
labels), ``sparse`` (400 annotators on 3,000 items × 4, most with 5–30 responses) and ``heavy`` (a few heavy
annotators give most responses, two of them biased with shared errors on confusing items:
:mod:`fusion_core.simulate.heavy`); binary and 3 labels each.

    python benchmarks/verdicts_vs_gold.py                      # public sets + simulated crowds
    python benchmarks/verdicts_vs_gold.py --sets rte temp --sim-seeds 1 --shapes zipf heavy

``--label-type ordinal`` audits the public sets whose labels are all numbers with three or more values
(``relevance``, ``adult``) as ordered levels and compares the *rating* verdicts, which lead for ordered levels
(docs/RATINGS.md), with the same gold bands: near-chance calls (precision and recall against the gold bands near
or worse than chance), every rating flag (lenient, harsh, noisy, near chance: precision against gold bad, and
against gold bad or noisy, since a lenient, harsh or noisy call claims no chance), the annotators above the median
gold accuracy called near chance, the mean fitted reliability per gold band, and the model the verdicts came from.

    python benchmarks/verdicts_vs_gold.py --label-type ordinal --sets relevance adult --shapes
"""

from __future__ import annotations

import time
import warnings

import numpy as np
import pandas as pd
from _common import categorical_datasets, load, make_parser
from scipy import stats

from fusion_core.diagnostics.audit import run_audit
from fusion_core.diagnostics.audit.rules import ADVERSARIAL, DEPENDENT, FLAGS, SPAMMER, SWAPS, TOO_FEW, VERDICTS
from fusion_core.simulate import dawid_skene
from fusion_core.simulate.heavy import HEAVY_VARIANTS

BANDS = ("worse than chance", "near chance", "noisy", "reliable", "few gold")
ENOUGH_GOLD = 50
"""Gold responses from which an annotator's gold band is itself well determined (the band's interval at 90 % on 50
balanced binary responses is about ±0.23 in skill above chance), for the second summary line."""


def gold_bands(answers: pd.DataFrame, truth: pd.Series, level: float = 0.9, min_gold: int = 10) -> pd.DataFrame:
    """Per annotator: gold responses, gold accuracy, κ and its interval, and the band (module docstring)."""
    df = answers.assign(task=answers["task"].astype(str), label=answers["label"].astype(str))
    gold = pd.Series(truth.astype(str).to_numpy(), index=truth.index.astype(str))
    df = df[df["task"].isin(gold.index)].assign(truth=lambda d: gold.reindex(d["task"]).to_numpy())
    df = df.assign(right=(df["label"] == df["truth"]).astype(float))
    pi = gold.value_counts(normalize=True)
    shares = pd.crosstab(df["worker"], df["label"], normalize="index")
    chance = shares.mul(pi.reindex(shares.columns).fillna(0.0), axis=1).sum(axis=1)
    g = df.groupby("worker")["right"].agg(["sum", "count"])
    a_post, b_post = 1 + g["sum"], 1 + g["count"] - g["sum"]
    acc = g["sum"] / g["count"]
    c = chance.reindex(g.index)
    scale = 1 / (1 - c).clip(lower=1e-9)
    kappa = (acc - c) * scale
    low = (stats.beta.ppf((1 - level) / 2, a_post, b_post) - c) * scale
    high = (stats.beta.ppf((1 + level) / 2, a_post, b_post) - c) * scale
    band = np.select(
        [g["count"] < min_gold, high < 0, (low <= 0) | (kappa < 0.15), kappa < 0.5],
        ["few gold", "worse than chance", "near chance", "noisy"],
        "reliable",
    )
    # chance on the annotator's own gold items: reporting with its label frequencies against the truth shares of
    # *its* items (an annotator who answers the common label of its batch is right often, at chance)
    own = pd.crosstab(df["worker"], df["truth"], normalize="index")
    c_own = (own.reindex(columns=shares.columns, fill_value=0.0) * shares.reindex(own.index)).sum(axis=1)
    c_own = c_own.reindex(g.index)
    kappa_own = (acc - c_own) / (1 - c_own).clip(lower=1e-9)
    out = pd.DataFrame(
        {
            "gold responses": g["count"],
            "gold accuracy": acc,
            "gold skill": kappa,
            "gold skill (own items)": kappa_own,
            "band": band,
        }
    )
    out.index = out.index.astype(str)
    return out


def compare(
    answers: pd.DataFrame, truth: pd.Series, cartel_bootstrap: int, label_type: str = "nominal"
) -> tuple[pd.DataFrame, float]:
    """One row per annotator: the audit's verdict (and its reason, ``why``) beside its gold band; and the audit's
    seconds.  ``label_type="ordinal"``: the rating verdicts (with ``reliability`` and the ``model`` they came
    from)."""
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        audit = run_audit(answers, cartel_bootstrap=cartel_bootstrap, random_state=0, label_type=label_type)
    seconds = time.perf_counter() - t0
    if audit.ratings is not None:
        table = audit.ratings.table
        verdicts = pd.DataFrame(
            {"verdict": table["verdict"], "why": table["reason"], "reliability": table["reliability"]}
        ).assign(model=audit.ratings.model)
    else:
        verdicts = audit.annotators.frame()[["verdict", "why"]]
    verdicts.index = verdicts.index.astype(str)
    rows = gold_bands(answers, truth).join(verdicts, how="inner")
    judged = rows["band"] != "few gold"
    rows["above median"] = judged & (rows["gold accuracy"] > rows.loc[judged, "gold accuracy"].median())
    return rows, seconds


MISSED = (
    ("flagged only against the estimated labels", "not robust to the reference"),
    ("wider than", "interval too wide"),
    ("not clearly below", "probability below ½ or the prior's"),
    ("too uncertain", "uncertain labels"),
    ("fewer than", "too few shared responses"),
    ("precise estimate above", "estimate above the band"),
    ("interval is above", "interval above the band"),
)
"""Why a bad annotator was not flagged: a phrase of the verdict's reason (fusion_core.diagnostics.audit.rules) and
its short name in the benchmark's last line."""


def why_missed(why: str) -> str:
    return next((name for phrase, name in MISSED if phrase in why), "other")


def summary(rows: pd.DataFrame) -> str:
    """The confusion table and the flag figures of ``rows`` (gold band × verdict)."""
    table = pd.crosstab(rows["band"], rows["verdict"]).reindex(index=list(BANDS), columns=list(VERDICTS), fill_value=0)
    table = table.loc[table.sum(axis=1) > 0]
    judged = rows[rows["band"] != "few gold"]
    bad = judged["band"].isin(["near chance", "worse than chance"])
    flagged = judged["verdict"].isin(FLAGS)
    wrong = judged[judged["above median"] & judged["verdict"].isin([SPAMMER, DEPENDENT])]
    swapped = judged[judged["above median"] & (judged["verdict"] == SWAPS)]
    by_accuracy = judged["verdict"].isin([SPAMMER, ADVERSARIAL, SWAPS])
    lines = [
        table.to_string(),
        f"flagged {int(flagged.sum())}, of them truly bad {int((flagged & bad).sum())} "
        f"(precision {(flagged & bad).sum() / max(flagged.sum(), 1):.2f}; accuracy flags alone "
        f"{(by_accuracy & bad).sum()}/{int(by_accuracy.sum())} = {(by_accuracy & bad).sum() / max(by_accuracy.sum(), 1):.2f}); "
        f"bad {int(bad.sum())}, flagged {int((flagged & bad).sum())} "
        f"(recall {(flagged & bad).sum() / max(bad.sum(), 1):.2f}); "
        f"above the crowd's median gold accuracy yet called near chance or dependent: {len(wrong)} (and called "
        f"'{SWAPS}': {len(swapped)}{': ' + ', '.join(swapped.index) if len(swapped) else ''}); "
        f"dependent-group verdicts: {int((rows['verdict'] == DEPENDENT).sum())}; "
        f"'{SWAPS}' verdicts: {int((rows['verdict'] == SWAPS).sum())}",
    ]
    if len(wrong):
        at_chance = wrong["gold skill (own items)"] < 0.15
        lines.append(
            f"  of those {len(wrong)}: {int(at_chance.sum())} near chance by gold against the truth shares of their own "
            "gold items (chance = Σ_k share of k among its items × its frequency of k): "
            + ", ".join(
                f"{w} (gold skill {r['gold skill']:.2f}, own items {r['gold skill (own items)']:.2f})"
                for w, r in wrong.iterrows()
            )
        )
    # the same figures where the gold itself can tell (≥ ENOUGH_GOLD gold responses), and the recall among the bad
    # annotators the audit gave an accuracy verdict ("not enough responses to tell" is neither a flag nor a pass)
    enough = judged["gold responses"] >= ENOUGH_GOLD
    f2, b2 = flagged[enough], bad[enough]
    told = judged["verdict"] != TOO_FEW
    lines.append(
        f"with ≥ {ENOUGH_GOLD} gold responses: flagged {int(f2.sum())}, precision "
        f"{(f2 & b2).sum() / max(f2.sum(), 1):.2f}, recall {(f2 & b2).sum() / max(b2.sum(), 1):.2f} "
        f"({int(b2.sum())} bad); recall among bad annotators given an accuracy verdict "
        f"{(flagged & bad & told).sum() / max((bad & told).sum(), 1):.2f} ({int((bad & told).sum())})"
    )
    by_estimate = bad & ((judged["gold skill"] < 0.15) | (judged["band"] == "worse than chance"))
    by_interval = bad & ~by_estimate
    lines.append(
        f"bad by the gold estimate {int(by_estimate.sum())}, flagged {int((flagged & by_estimate).sum())} (recall "
        f"{(flagged & by_estimate).sum() / max(by_estimate.sum(), 1):.2f}); bad only because the gold interval "
        f"reaches 0 {int(by_interval.sum())}, flagged {int((flagged & by_interval).sum())}"
    )
    missed = judged[bad & ~flagged]
    if len(missed):
        why = missed["why"].map(why_missed).value_counts()
        lines.append("bad and not flagged, by the audit's reason: " + ", ".join(f"{k} {v}" for k, v in why.items()))
    return "\n".join(lines)


def rating_summary(rows: pd.DataFrame) -> str:
    """The rating verdicts of ``rows`` against the gold bands (module docstring, ``--label-type ordinal``)."""
    table = pd.crosstab(rows["band"], rows["verdict"]).reindex(index=list(BANDS), fill_value=0)
    table = table.loc[table.sum(axis=1) > 0]
    judged = rows[rows["band"] != "few gold"]
    bad = judged["band"].isin(["near chance", "worse than chance"])
    weak = bad | (judged["band"] == "noisy")
    chance = judged["verdict"] == "near chance"
    flagged = ~judged["verdict"].isin(["reliable", "not enough ratings to tell"])
    above = judged["above median"] & chance
    rho = judged.groupby("band")["reliability"].mean()

    def ratio(a: pd.Series, b: pd.Series) -> str:
        return f"{int(a.sum())}/{int(b.sum())} = {a.sum() / max(b.sum(), 1):.2f}"

    return "\n".join(
        [
            table.to_string(),
            f"verdicts from {', '.join(sorted(set(judged['model'])))}; near chance: {int(chance.sum())} of "
            f"{len(judged)}, precision {ratio(chance & bad, chance)}, recall {ratio(chance & bad, bad)}; every "
            f"rating flag: {int(flagged.sum())}, precision against gold bad {ratio(flagged & bad, flagged)}, against "
            f"gold bad or noisy {ratio(flagged & weak, flagged)}, recall of gold bad {ratio(flagged & bad, bad)}; "
            f"above the crowd's median gold accuracy yet called near chance: {int(above.sum())}",
            "mean fitted reliability by gold band: " + ", ".join(f"{b} {v:.2f}" for b, v in rho.items()),
        ]
    )


def simulated(seed: int, n_classes: int, **kw: object) -> tuple[pd.DataFrame, pd.Series]:
    """A sparse zipf-active crowd with honest (accuracy U(0.55, 0.95)), spamming and adversarial annotators:
    4,000 items × 5 responses by 120 annotators, 10 % spammers, 3 % adversaries (``kw`` overrides)."""
    shape: dict[str, object] = {
        "n_items": 4000,
        "n_workers": 120,
        "responses_per_item": 5,
        "spammers": 12,
        "adversarial": 4,
    }
    sim = dawid_skene(
        n_classes=n_classes,
        accuracy=(0.55, 0.95),
        worker_activity="zipf",
        seed=seed,
        **{**shape, **kw},  # type: ignore[arg-type]
    )
    return sim.responses, sim.truth


def imbalanced(seed: int, n_classes: int) -> tuple[pd.DataFrame, pd.Series]:
    """The zipf crowd of :func:`simulated` on imbalanced labels (80/20, or 70/20/10 on three)."""
    return simulated(seed, n_classes, class_prior=(0.8, 0.2) if n_classes == 2 else (0.7, 0.2, 0.1))


def sparse(seed: int, n_classes: int) -> tuple[pd.DataFrame, pd.Series]:
    """400 zipf-active annotators on 3,000 items × 4 responses (most with 5–30 responses), 10 % spammers, 3 %
    adversaries."""
    return simulated(seed, n_classes, n_items=3000, n_workers=400, responses_per_item=4, spammers=40, adversarial=12)


def heavy(seed: int, n_classes: int) -> tuple[pd.DataFrame, pd.Series]:
    """The heavy-annotator crowd (fusion_core.simulate.heavy: 78/22 labels, or 60/25/15 on three)."""
    sim = HEAVY_VARIANTS["heavy" if n_classes == 2 else "heavy-3class"](seed)
    return sim.responses, sim.truth


SHAPES = {
    "zipf": ("zipf activity, 10 % spammers, 3 % adversaries", simulated),
    "imbalanced": ("the same on 80/20 or 70/20/10 labels", imbalanced),
    "sparse": ("400 annotators on 3,000 items × 4, most with 5–30 responses", sparse),
    "heavy": ("a few heavy annotators, two biased with shared errors", heavy),
}
"""The simulated shapes (module docstring): name → (title, (seed, number of labels) → (answers, truth))."""


def main() -> None:
    ap = make_parser(__doc__)
    ap.add_argument("--sets", nargs="*", default=None, help="public sets (default: every categorical/ensemble set)")
    ap.add_argument("--sim-seeds", type=int, default=3, help="simulated crowds per label count (binary, 3 labels)")
    ap.add_argument("--shapes", nargs="*", default=list(SHAPES), choices=list(SHAPES), help="simulated shapes")
    ap.add_argument("--cartel-bootstrap", type=int, default=200, help="the audit's cartel-test replicates")
    ap.add_argument("--per-crowd", action="store_true", help="print each crowd's table, not only the pooled one")
    ap.add_argument(
        "--label-type",
        default="nominal",
        choices=("nominal", "ordinal"),
        help="ordinal: audit the public sets with numeric labels (3 or more) as ordered levels; rating verdicts",
    )
    args = ap.parse_args()
    sets = categorical_datasets() if args.sets is None else args.sets
    if args.label_type == "ordinal":
        for name in sets:
            answers, truth = load(name)
            if answers["label"].nunique() < 3 or not pd.api.types.is_numeric_dtype(answers["label"]):
                print(f"-- {name}: labels are not 3 or more numbers; skipped")
                continue
            rows, seconds = compare(answers, truth, args.cartel_bootstrap, "ordinal")
            print(f"== {name} as ordinal levels: {len(answers):,} responses, {len(rows)} annotators, {seconds:.1f} s")
            print(rating_summary(rows))
        return
    groups = [("public sets", [(name, lambda name=name: load(name)) for name in sets])]
    for shape in args.shapes:
        title, make = SHAPES[shape]
        crowds = [
            (f"{shape} K={k} seed={s}", lambda k=k, s=s, m=make: m(s, k)) for k in (2, 3) for s in range(args.sim_seeds)
        ]
        groups.append((f"simulated crowds, {shape} ({title})", crowds))
    simulated_rows = []
    for title, crowds in groups:
        pooled = []
        print(f"== {title}")
        for name, get in crowds:
            answers, truth = get()
            rows, seconds = compare(answers, truth, args.cartel_bootstrap)
            pooled.append(rows)
            print(f"-- {name}: {len(answers):,} responses, {len(rows)} annotators, audit {seconds:.1f} s")
            if args.per_crowd:
                print(summary(rows))
        if pooled:
            print(f"-- pooled over {len(pooled)} crowds")
            print(summary(pd.concat(pooled)))
            if title.startswith("simulated"):
                simulated_rows += pooled
    if len(args.shapes) > 1 and simulated_rows:
        print(f"== simulated crowds, every shape pooled ({len(simulated_rows)} crowds)")
        print(summary(pd.concat(simulated_rows)))


if __name__ == "__main__":
    main()
