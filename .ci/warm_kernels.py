"""Compile fusion_core's numba kernels once into numba's on-disk cache (``__pycache__`` beside each module).

``bash .ci/dev test`` runs this in the background while ruff and mypy run, and waits for it before pytest starts.
On a fresh checkout the cache is empty, and each of the two pytest workers would otherwise compile the kernels it
meets (≈ 1–4 s each, the same kernel twice when both workers meet it).  Each kernel is called once on tiny inputs
of the argument types the library passes it (docs/KERNELS.md lists the kernels), so the tests load it instead.

Harmless by design: without numba, or with ``FUSION_CORE_JIT=0``, it does nothing; a kernel whose call fails here
(its arguments changed) is named on stderr and skipped — the tests then compile it themselves, as before.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import time
import traceback
import warnings
from collections.abc import Callable

import numpy as np


def _ds_pass() -> None:
    """The fused Dawid–Skene pass for K = 2…5, unit and weighted counts (one compiled closure each), the expected
    counts kernel, and the layout's counting sort (items not in order)."""
    import pandas as pd

    from fusion_core.data.responses import Responses
    from fusion_core.methods import layout
    from fusion_core.methods.dawid_skene import sweep

    rng = np.random.default_rng(0)
    n, w = 40, 4
    item = rng.permutation(np.repeat(np.arange(n), 2))  # unsorted: sweep_data takes the counting sort
    worker = rng.integers(0, w, len(item))
    for k in (2, 3, 4, 5):
        for weight in (None, rng.uniform(0.1, 1.0, len(item))):
            resp = Responses(
                item=item,
                worker=worker,
                label=rng.integers(0, k, len(item)),
                items=pd.Index(range(n)),
                workers=pd.Index(range(w)),
                classes=pd.Index(range(k)),
                weight=weight,
            )
            conf = rng.dirichlet(np.ones(k), size=(w, k))
            prior = np.full(k, 1 / k)
            sweep.ds_sweep(resp, conf, prior, backend="numba")
            if k == 3 and weight is None:
                sweep.expected_counts_of(resp, rng.dirichlet(np.ones(k), size=n), backend="numba")
                saved = layout.JIT_MIN_RESPONSES
                layout.JIT_MIN_RESPONSES = 0
                try:
                    layout.sweep_data(
                        Responses(
                            item=item,
                            worker=worker,
                            label=resp.label,
                            items=resp.items,
                            workers=resp.workers,
                            classes=resp.classes,
                        )
                    )
                finally:
                    layout.JIT_MIN_RESPONSES = saved


def _cartels() -> None:
    """The cartel bootstrap's kernels, in the argument types of ``cartels/bootstrap.py`` and ``pair_pattern.py``:
    index arrays contiguous or strided (a column of a wider array), outputs in double and single precision."""
    from fusion_core.diagnostics.cartels import kernels as ck

    i64 = np.int64
    m, nb = 2, 1  # two annotators, one replicate, one candidate pair over two items
    worker = np.array([0, 0, 1, 1], dtype=i64)
    entry_item = np.array([0, 1, 0, 1], dtype=i64)
    ea, eb, starts = np.array([0, 1], dtype=i64), np.array([2, 3], dtype=i64), np.array([0], dtype=i64)
    a, b = np.array([0], dtype=i64), np.array([1], dtype=i64)
    strided = np.stack([worker, entry_item], axis=1)  # columns: non-contiguous views ('A' layout)
    for w_idx, i_idx in ((worker, entry_item), (strided[:, 0], strided[:, 1])):
        out = np.zeros((len(worker), ck.packed_width(nb)), dtype=np.uint8)
        yt = np.ones((2, nb), dtype=bool)
        u = np.full((nb, len(worker)), 0.5, dtype=np.float32)
        ck.draw_labels_packed(yt, u, w_idx, i_idx, np.full(m, 0.8), np.full(m, 0.8), out)
        diag, s1a, s1b, s12 = np.zeros((nb, m)), np.zeros((nb, 1)), np.zeros((nb, 1)), np.zeros((nb, 1))
        ck.pair_sums_packed(out.view(np.uint64), nb, w_idx, ea, eb, starts, diag, s1a, s1b, s12)
    counts = np.full((m, m), 2.0)
    qz, sigma2, W = np.zeros((nb, 1)), np.zeros((nb, 1)), np.zeros((nb, 1))
    valid = np.zeros((nb, 1), dtype=bool)
    base, deg, c = np.zeros((nb, m)), np.zeros((nb, m)), np.zeros((nb, m))
    n_i = np.diagonal(counts)  # a read-only strided view, as pair_pattern passes it
    ck.pair_moments_delta(diag, s1a, s1b, s12, n_i, counts[a, b], a, b, qz, valid, sigma2, base, W, deg, c)
    lam, x = np.ones(nb), np.full((nb, m), 0.5)
    for dtype in (np.float64, np.float32):
        out3 = np.empty((nb, m, m), dtype=dtype)
        ck.dense_symmetric(qz, a, b, base, lam, x, out3)
        ck.residual_symmetric(qz, valid, np.ones((nb, 1)), x, a, b, out3)
        ck.completed_symmetric(qz, valid, lam, x, base, a, b, out3)


def _chain_programme() -> None:
    """The context M-step's chain dynamic programme."""
    from fusion_core.methods.context.chain import warm_chain_programme

    warm_chain_programme()


def _pairwise() -> None:
    """The pairwise models' steps (Davidson Newton step, ``ds-pairwise`` E- and M-step), with and without ties:
    they run on fits of at least ``JIT_MIN_JUDGEMENTS`` judgements."""
    from fusion_core.data.pairwise import PairwiseResponses
    from fusion_core.methods.pairwise import create_pairwise
    from fusion_core.methods.pairwise.davidson import JIT_MIN_JUDGEMENTS
    from fusion_core.simulate.pairwise import pairwise_panel

    sim = pairwise_panel(JIT_MIN_JUDGEMENTS // 3 + 10, 3, 4, seed=0)
    d = PairwiseResponses.from_frame(sim.responses)
    for name in ("ds-pairwise", "bt-judges"):
        create_pairwise(name, max_iter=2).fit(d)


STEPS: dict[str, Callable[[], None]] = {
    "dawid-skene pass": _ds_pass,
    "cartel bootstrap": _cartels,
    "context chain programme": _chain_programme,
    "pairwise steps": _pairwise,
}


def main() -> int:
    if importlib.util.find_spec("numba") is None or os.environ.get("FUSION_CORE_JIT", "1") == "0":
        return 0
    t0 = time.perf_counter()
    failed = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, step in STEPS.items():
            try:
                step()
            except Exception:
                failed.append(name)
                print(f"warm_kernels: {name} not warmed (the tests will compile it):", file=sys.stderr)
                traceback.print_exc(limit=2)
    done = len(STEPS) - len(failed)
    print(f"warm_kernels: numba cache ready for {done}/{len(STEPS)} kernel groups in {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
