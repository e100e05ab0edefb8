"""Speed of the sequential / networked methods (issue 4 targets), printed as wall and CPU seconds.

* ``hmm-em`` on conll_ner (78k tokens, 47 annotators, K = 9): target < 15 s
* ``mrf-em`` on Cora (2,708 nodes, 10 sklearn classifiers, K = 7, citation graph): target < 5 s
* ``mm`` on 100,000 items × 20 annotators × K = 5 (dense, spec generator): target < 10 s

Run: ``python benchmarks/bench_sequential_networked.py``.  CPU seconds are shown because the wall time
depends on what else runs on the machine.
"""

from __future__ import annotations

import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from _common import make_parser

HERE = Path(__file__).resolve().parent
DATASETS = HERE.parents[0].parent / "shared" / "datasets"


def timed(fn):
    w0, c0 = time.perf_counter(), time.process_time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = fn()
    return out, time.perf_counter() - w0, time.process_time() - c0


def report(label: str, wall: float, cpu: float, target: float, extra: str = "") -> None:
    verdict = "OK" if wall < target else ("OK (CPU)" if cpu < target else "SLOW")
    print(f"{label:48s} wall {wall:6.2f} s  cpu {cpu:6.2f} s  target < {target:g} s  {verdict}  {extra}")


def main() -> None:
    from fusion_core.data.responses import Responses
    from fusion_core.methods import create
    from fusion_core.simulate.sequential import gen_confusions, sample_responses

    conll = DATASETS / "conll_ner"
    if conll.is_dir():
        answers = pd.read_csv(conll / "answers.csv").drop(columns=["token"])
        resp, _, _ = timed(lambda: Responses.from_frame(answers))
        est, wall, cpu = timed(lambda: create("hmm-em").fit(resp))
        report("hmm-em on conll_ner (78k tokens, M=47, K=9)", wall, cpu, 15, f"EM iterations {est.n_iter_}")
        est, wall, cpu = timed(lambda: create("hmm-mv").fit(resp))
        report("hmm-mv on conll_ner", wall, cpu, 15, f"EM iterations {est.n_iter_}")
    else:
        print("conll_ner not available")

    if (DATASETS / "cora").is_dir():
        sys.path.insert(0, str(HERE))
        from cora_citeseer import crowd, load

        x, y, edges = load("cora")
        answers = crowd(x, y, 150, seed=0)
        resp = Responses.from_frame(answers)
        est, wall, cpu = timed(lambda: create("mrf-em").fit(resp, graph=edges))
        report("mrf-em on Cora (N=2708, M=10, K=7, 5278 edges)", wall, cpu, 5, f"EM iterations {est.n_iter_}")
        est, wall, cpu = timed(lambda: create("mrf-mv").fit(resp, graph=edges))
        report("mrf-mv on Cora", wall, cpu, 5, f"EM iterations {est.n_iter_}")
    else:
        print("cora not available")

    rng = np.random.default_rng(0)
    n, m, k = 100_000, 20, 5
    conf = gen_confusions(k, m, 12, 0.35, 0.65, rng=rng)
    y = rng.choice(k, size=n, p=rng.dirichlet(5 * np.ones(k)))
    item, worker, label = sample_responses(y, conf, rng)
    resp = Responses.from_frame(pd.DataFrame({"task": item, "worker": worker, "label": label}))
    est, wall, cpu = timed(lambda: create("mm").fit(resp))
    err = np.abs(conf - est.confusion_).sum(axis=2).max(axis=1).mean()
    acc = float((np.argmax(est.result_.posterior, axis=1) == y[resp.items.to_numpy()]).mean())
    report(
        "mm on 100k items × 20 annotators × K=5",
        wall,
        cpu,
        10,
        f"sweeps {est.n_iter_}, eps_CM {err:.3f}, acc {acc:.3f}",
    )


if __name__ == "__main__":
    make_parser(__doc__).parse_args()
    main()
