"""Calibration of the collusion check (docs/AUDIT.md "Collusion", issue 26 item 1) on simulated crowds.

Per seed: two honest crowds with skill heterogeneity and sparse annotators (spectral ``independent`` at 30 %
observed; Dawid–Skene with zipf activity) and a crowd with a planted 10-member cartel among 50 annotators at 30 % observed (spectral ``cartel``, target 70 %
right, members 80–95 % faithful to it).  Prints the false accusation rate (honest annotators put in a dependent
group — copies or collusion,
including the honest annotators of the planted crowd and two groups proposed on purpose: the 8 best and the 8
worst annotators of the honest crowd — the groups real crowds wrongly accused), the recall of planted cartels (a
dependent group holds at least half of the planted members), member recall, how the found planted groups are
worded (possible collusion, not near-duplicate annotators: members 80–95 % faithful), and whether the audit's check
(``run_audit``'s ``_cartel``) and the Cartels page's call (:func:`check_collusion`) name the same groups.

    PYTHONPATH=$PWD nice -n 10 python benchmarks/collusion_calibration.py --seeds 200
"""

from __future__ import annotations

import time
import warnings

import numpy as np
import pandas as pd
from _common import make_parser

from fusion_core.data.responses import as_responses
from fusion_core.diagnostics.audit.runner import _cartel
from fusion_core.diagnostics.cartels.collusion import DEFAULTS, check_collusion, group_evidence
from fusion_core.diagnostics.cartels.words import POSSIBLE_COLLUSION
from fusion_core.simulate.dawid_skene import dawid_skene
from fusion_core.simulate.heavy import HEAVY_VARIANTS
from fusion_core.simulate.spectral import cartel, independent

HEAVY = ("heavy", "heavy-honest", "heavy-cartel")
"""The heavy-annotator shapes (:mod:`fusion_core.simulate.heavy`: ~2,000 binary items × ~5 responses, prior 78/22,
~60 % of annotators with < 10 responses, 5 heavy annotators giving ~70 % of the responses): two of the heavy
annotators biased with shared errors (dependent by construction: neither honest nor planted in the counts), none
biased, and none biased plus a planted cartel (:func:`plant_cartel`)."""


def plant_cartel(sim: object, seed: int, size: int = 8, cover: float = 0.1) -> tuple[pd.DataFrame, set[str]]:
    """The crowd's responses plus ``size`` cartel members (``c0`` …), each labelling a share ``cover`` of the items:
    a shared target 70 % right, each member faithful to it with probability U(0.8, 0.95) and otherwise an honest
    annotator of accuracy U(0.7, 0.9)."""
    rng = np.random.default_rng(10_000 + seed)
    truth = sim.truth  # type: ignore[attr-defined]
    t = truth.to_numpy().astype(int)
    target = np.where(rng.random(len(t)) < 0.7, t, 1 - t)
    frames = [sim.responses]  # type: ignore[attr-defined]
    for c in range(size):
        seen = np.flatnonzero(rng.random(len(t)) < cover)
        own = np.where(rng.random(len(seen)) < rng.uniform(0.7, 0.9), t[seen], 1 - t[seen])
        lab = np.where(rng.random(len(seen)) < rng.uniform(0.8, 0.95), target[seen], own)
        frames.append(pd.DataFrame({"task": truth.index[seen], "worker": f"c{c}", "label": lab}))
    return pd.concat(frames, ignore_index=True), {f"c{c}" for c in range(size)}


def heavy_crowds(seed: int) -> dict[str, tuple[pd.DataFrame, set[str], set[str]]]:
    """name → (responses, planted members, members dependent by construction) for :data:`HEAVY`."""
    shared = HEAVY_VARIANTS["heavy"](seed)
    role = shared.role
    honest = HEAVY_VARIANTS["heavy-honest"](seed)
    planted, members = plant_cartel(honest, seed)
    return {
        "heavy": (shared.responses, set(), {str(w) for w in role.index[role == "heavy biased"]}),
        "heavy-honest": (honest.responses, set(), set()),
        "heavy-cartel": (planted, members, set()),
    }


def crowds(seed: int) -> dict[str, tuple[object, set[str]]]:
    """name → (simulation, planted members as text)."""
    honest = independent(m=50, n=600, pi_range=(0.55, 0.95), observed=0.3, seed=seed)
    zipf = dawid_skene(
        n_items=1200,
        n_workers=50,
        n_classes=2,
        responses_per_item=5,
        accuracy=(0.55, 0.95),
        worker_activity="zipf",
        seed=seed,
    )
    planted = cartel(m=50, n=800, r=0.2, pi_c=0.7, pi_range=(0.55, 0.95), xi_range=(0.8, 0.95), observed=0.3, seed=seed)
    g = planted.group
    return {
        "honest": (honest, set()),
        "zipf": (zipf, set()),
        "planted": (planted, {str(w) for w in g.index[g != "honest"]}),
    }


def run_seed(seed: int, audit: bool = True, shapes: tuple[str, ...] = ("spectral",)) -> dict[str, float]:
    """Counts over the seed's crowds of ``shapes`` ("spectral": :func:`crowds`; "heavy": :func:`heavy_crowds`)."""
    out = {
        "honest": 0.0,
        "accused": 0.0,
        "planted": 0.0,
        "found": 0.0,
        "members": 0.0,
        "hit": 0.0,
        "agree": 1.0,
        "worded": 0.0,
        "built": 0.0,
        "built_called": 0.0,
    }
    todo: list[tuple[str, object, set[str], set[str]]] = []
    if "spectral" in shapes:
        todo += [(name, sim, true, set()) for name, (sim, true) in crowds(seed).items()]
    if "heavy" in shapes:
        todo += [(name, answers, true, built) for name, (answers, true, built) in heavy_crowds(seed).items()]
    for name, sim, true, built in todo:
        resp = as_responses(sim if isinstance(sim, pd.DataFrame) else sim.responses)  # type: ignore[attr-defined]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            check = check_collusion(resp, random_state=seed)
            if audit:
                audit_groups = _cartel(resp, DEFAULTS.n_bootstrap, DEFAULTS.alpha, seed, 100).groups
                out["agree"] *= float(set(audit_groups) == set(check.groups))
        accused = check.members
        workers = {str(w) for w in resp.workers}
        out["honest"] += len(workers - true - built)
        out["accused"] += len(accused - true - built)
        out["built"] += len(built)
        out["built_called"] += len(accused & built)
        if name == "honest":  # the groups real crowds wrongly accused: the best and the worst annotators
            acc = sim.balanced_accuracy.sort_values()  # type: ignore[attr-defined]
            rng = np.random.default_rng(seed)
            for grp in (list(acc.index[-8:]), list(acc.index[:8])):
                ev = group_evidence(resp, [str(w) for w in grp], DEFAULTS, rng)
                out["honest"] += len(grp)
                out["accused"] += len(grp) if ev.dependent else 0
        if true:
            out["planted"] += 1
            out["found"] += float(any(len(set(g) & true) >= len(true) / 2 for g in check.groups))
            out["members"] += len(true)
            out["hit"] += len(accused & true)
            out["worded"] += float(
                any(
                    len(set(e.members) & true) >= len(true) / 2 and e.kind == POSSIBLE_COLLUSION for e in check.evidence
                )
            )
    return out


def timing(n_responses: int) -> None:
    """The audit's cartel stage on one large crowd: the spectral detector alone, then the whole check."""
    from fusion_core.diagnostics.cartels import detect_cartels

    m = 100
    n = n_responses // 5
    sim = cartel(m=m, n=n, r=0.2, pi_c=0.6, pi_range=(0.55, 0.95), xi_range=(0.8, 0.95), per_item=5, seed=0)
    resp = as_responses(sim.responses)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t0 = time.perf_counter()
        rep = detect_cartels(
            resp, n_bootstrap=DEFAULTS.n_bootstrap, alpha=DEFAULTS.alpha, same_sign=True, by_loading=True, method="mv"
        )
        t1 = time.perf_counter()
        check = _cartel(resp, DEFAULTS.n_bootstrap, DEFAULTS.alpha, 0, 100)
        t2 = time.perf_counter()
        rng = np.random.default_rng(0)
        for g in rep.groups:
            group_evidence(resp, sorted(map(str, g)), DEFAULTS, rng)
        t3 = time.perf_counter()
    print(
        f"{resp.n_responses:,} responses, {m} annotators: detector {t1 - t0:.2f} s ({len(rep.groups)} proposed), "
        f"audit's whole check {t2 - t1:.2f} s ({len(check.groups)} dependent), evidence alone {t3 - t2:.2f} s"
    )


def real(names: list[str], root: str = "/work/shared/datasets") -> None:
    """Public binary crowds with gold: the groups the Cartels page found on real crowds before (the best annotators;
    the near-chance ones) proposed on purpose, and the audit's check as it runs.  Gold only scores the outcome."""
    import pandas as pd

    for name in names:
        try:
            a = pd.read_csv(f"{root}/{name}/answers.csv", dtype=str)
            gold = pd.read_csv(f"{root}/{name}/truth.csv", dtype=str).set_index("task")["truth"]
        except FileNotFoundError:
            print(f"{name}: not found")
            continue
        if a["label"].nunique() != 2:
            continue
        resp = as_responses(a)
        g = a[a.task.isin(gold.index)]
        acc = (g.label == gold.reindex(g.task).to_numpy()).groupby(g.worker).agg(["mean", "size"])
        acc = acc[acc["size"] >= 20].sort_values("mean")
        rng = np.random.default_rng(0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            check = check_collusion(resp)
            out = []
            for what, grp in (("best 20", acc.index[-20:]), ("worst 10", acc.index[:10])):
                ev = group_evidence(resp, list(grp), DEFAULTS, rng)
                out.append(
                    f"{what} (gold {acc.loc[grp, 'mean'].mean():.2f}): dependent {ev.dependent} ({ev.kind}), "
                    f"{len(ev.near_chance)} near chance"
                )
        above = sum(acc["mean"].get(w, 0) > acc["mean"].median() for w in check.members)
        print(
            f"{name}: check {check.report.status}, {len(check.groups)} dependent group(s) {check.kinds}, {above} "
            "members above the gold median; " + "; ".join(out)
        )


def main() -> None:
    ap = make_parser(__doc__)
    ap.add_argument("--seeds", type=int, default=20, help="number of seeds (issue target: 200)")
    ap.add_argument("--first", type=int, default=0, help="first seed")
    ap.add_argument("--no-audit", action="store_true", help="skip the audit-vs-page agreement (half the time)")
    ap.add_argument("--verbose", action="store_true", help="a line per seed (to add up interrupted runs)")
    ap.add_argument("--timing", type=int, default=0, help="only time the audit's check on this many responses")
    ap.add_argument("--real", nargs="*", help="only check these public binary crowds (in /work/shared/datasets)")
    ap.add_argument(
        "--shapes", nargs="*", default=["spectral"], choices=["spectral", "heavy"], help="crowd shapes (module doc)"
    )
    args = ap.parse_args()
    if args.real:
        real(args.real)
        return
    if args.timing:
        timing(args.timing)
        return
    tot: dict[str, float] = {}
    t0 = time.perf_counter()
    for s in range(args.first, args.first + args.seeds):
        r = run_seed(s, audit=not args.no_audit, shapes=tuple(args.shapes))
        for k, v in r.items():
            tot[k] = tot.get(k, 0.0) + v
        if args.verbose or r["accused"] or r["found"] < r["planted"] or r["agree"] < 1:
            print(
                f"seed {s}: accused {r['accused']:.0f} of {r['honest']:.0f} honest, members hit {r['hit']:.0f}/{r['members']:.0f}, planted found {r['found']:.0f}/{r['planted']:.0f}, "
                f"pages agree {bool(r['agree'])}, dependent by construction called {r['built_called']:.0f}/"
                f"{r['built']:.0f}",
                flush=True,
            )
    n = args.seeds
    print(f"seeds: {n} ({args.first}..{args.first + n - 1}), {time.perf_counter() - t0:.0f} s")
    print(
        f"false accusation rate: {tot['accused']:.0f}/{tot['honest']:.0f} honest annotators "
        f"= {tot['accused'] / tot['honest']:.2%}  (target ≤ 1 %)"
    )
    print(
        f"planted cartels found: {tot['found']:.0f}/{tot['planted']:.0f} = {tot['found'] / tot['planted']:.1%}"
        "  (target ≥ 95 %)"
    )
    print(
        f"planted members put in a dependent group: {tot['hit']:.0f}/{tot['members']:.0f} = "
        f"{tot['hit'] / tot['members']:.1%}; found planted groups worded '{POSSIBLE_COLLUSION}': "
        f"{tot['worded']:.0f}/{tot['found']:.0f}"
    )
    if tot["built"]:
        print(
            f"heavy annotators biased with shared errors (dependent by construction) called dependent: "
            f"{tot['built_called']:.0f}/{tot['built']:.0f}"
        )
    if not args.no_audit:
        print(f"audit and Cartels page name the same groups: {tot['agree']:.0f}/{n} seeds")


if __name__ == "__main__":
    main()
