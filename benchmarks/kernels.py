"""Does every compiled kernel earn its place?  The end-to-end gain of each kernel on the user-visible operation it
serves, against the numpy twin that replaces it (docs/KERNELS.md keeps the table this prints).

For each kernel: the operation (a method's fit or the cartel check, on simulated data of the size where the kernel
runs) is timed with the kernel and with only that kernel swapped for its twin (the switch each module already has:
the backend argument, the compiled-path threshold, ``jit_enabled`` of that module), alternating, ``--repeat``
times, in this process after one warm-up of each (numba's cache loaded, nothing compiled in the timings).  Printed
per kernel: the operation, median wall and CPU seconds with the kernel and with the twin, the gain in wall time
(1 − kernel / twin, in wall and in CPU seconds), and the largest difference between the two results (posteriors or cartel statistics).  The
machine is shared: the load average is printed first; CPU seconds are the steadier figure, wall seconds the one a
user waits for (threaded kernels gain in wall time only).

    python benchmarks/kernels.py [--repeat 3] [--responses 1000000] [--only ds-pass,votes,...]
"""

from __future__ import annotations

import contextlib
import os
import time
import warnings
from collections.abc import Callable, Iterator
from typing import Any

from _common import make_parser


def _patched(obj: Any, name: str, value: Any) -> contextlib.AbstractContextManager[None]:
    @contextlib.contextmanager
    def cm() -> Iterator[None]:
        old = getattr(obj, name)
        setattr(obj, name, value)
        try:
            yield
        finally:
            setattr(obj, name, old)

    return cm()


def _numpy_backend(fn: Callable[..., Any]) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        return fn(*args, **{**kwargs, "backend": "numpy"})

    return call


def _cases(
    n_responses: int,
    cartel_responses: int,
) -> list[tuple[str, str, Callable[[], Any], Callable[[], Any], Callable[[Any, Any], float]]]:
    """(kernel, operation, run, twin switch, result difference) per kernel."""
    import numpy as np

    from fusion_core.diagnostics.cartels import bootstrap, detect_cartels, pair_pattern
    from fusion_core.diagnostics.cartels.pair_pattern import PairPattern
    from fusion_core.methods import create, layout
    from fusion_core.methods.context import ContextEM, chain
    from fusion_core.methods.dawid_skene import core
    from fusion_core.simulate import dawid_skene
    from fusion_core.simulate.context import table1
    from fusion_core.simulate.spectral import cartel

    n_items = n_responses // 5
    sim = dawid_skene(n_items=n_items, n_workers=500, n_classes=4, responses_per_item=5, seed=0)
    table = sim.responses  # fits start from the table, as a user's do: coding the table is part of the operation
    shuffled = sim.responses.sample(frac=1.0, random_state=0)  # rows out of item order: the layout must sort them
    ctx = table1(8, 10_000, seed=1)
    dense = cartel(m=100, n=600, r=0.33, pi_c=0.5, seed=0).responses
    # the cartel check on a sparse binary crowd (5 responses per item, 500 annotators): the bit-packed draw runs here
    sparse = dawid_skene(
        n_items=cartel_responses // 5, n_workers=500, n_classes=2, responses_per_item=5, seed=0
    ).responses

    def fit(name: str, data: Any, **kw: Any) -> Callable[[], Any]:
        return lambda: create(name, **kw).fit(data)

    def post(a: Any, b: Any) -> float:
        return float(np.max(np.abs(np.asarray(a.probas_) - np.asarray(b.probas_))))

    def cartels(a: Any, b: Any) -> float:
        sa, sb = np.asarray(a.statistic, dtype=float), np.asarray(b.statistic, dtype=float)
        pa, pb = np.asarray(a.p_value, dtype=float), np.asarray(b.p_value, dtype=float)
        if sa.shape != sb.shape or pa.shape != pb.shape:
            return float("inf")
        return float(max(np.max(np.abs(sa - sb), initial=0.0), np.max(np.abs(pa - pb), initial=0.0)))

    def check(data: Any) -> Callable[[], Any]:
        return lambda: detect_cartels(data, n_bootstrap=200, alpha=0.01, random_state=0)

    def context_fit() -> Any:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ContextEM().fit(ctx.responses, context=ctx.context)

    packed_sums = PairPattern.sums

    def numpy_sums(self: Any, zs: Any) -> Any:  # the pair sums by numpy's reduceat, the other cartel kernels kept
        with _patched(pair_pattern, "jit_enabled", lambda: False):
            return packed_sums(self, zs)

    def stable_order_numpy(item: Any, indptr: Any, order: Any) -> None:
        order[:] = np.argsort(item, kind="stable")

    size = f"{n_responses / 1e6:g}M responses"
    return [
        (
            "ds pass (dawid_skene/_compiled.py)",
            f"ds fit, {size}",
            fit("ds", table),
            lambda: _patched(core, "ds_sweep", _numpy_backend(core.ds_sweep)),
            post,
        ),
        (
            "expected counts (sweep._counts_kernel)",
            f"ds fit, {size}",
            fit("ds", table),
            lambda: _patched(core, "expected_counts_of", _numpy_backend(core.expected_counts_of)),
            post,
        ),
        (
            "counting sort (layout._stable_order_kernel)",
            f"ds fit, {size}, rows shuffled",
            fit("ds", shuffled),
            lambda: _patched(layout, "_stable_order_kernel", stable_order_numpy),
            post,
        ),
        (
            "chain DP (context/_chain_dp.py)",
            "context-em fit, 10,000 items × 8",
            context_fit,
            lambda: _patched(chain, "DP_MIN_LEVELS", 1 << 62),
            post,
        ),
        (
            "cartel passes (cartels/kernels.py, all)",
            "detect_cartels, 100 × 600 dense",
            check(dense),
            lambda: _both(
                _patched(pair_pattern, "jit_enabled", lambda: False), _patched(bootstrap, "jit_enabled", lambda: False)
            ),
            cartels,
        ),
        (
            "bit-packed lanes (kernels.draw_labels_packed, pair_sums_packed)",
            f"detect_cartels, {cartel_responses / 1e6:g}M responses, 500 annotators",
            check(sparse),
            lambda: _both(_patched(bootstrap, "jit_enabled", lambda: False), _patched(PairPattern, "sums", numpy_sums)),
            cartels,
        ),
    ]


@contextlib.contextmanager
def _both(a: contextlib.AbstractContextManager[None], b: contextlib.AbstractContextManager[None]) -> Iterator[None]:
    with a, b:
        yield


def main() -> None:
    ap = make_parser(__doc__)
    ap.add_argument("--repeat", type=int, default=3, help="timed runs of each side (median)")
    ap.add_argument("--responses", type=int, default=1_000_000, help="size of the ds / mv cases")
    ap.add_argument("--cartel-responses", type=int, default=200_000, help="size of the sparse cartel-check case")
    ap.add_argument("--only", default="", help="comma-separated words: keep kernels whose name contains one")
    args = ap.parse_args()

    import numpy as np

    from fusion_core.methods.numerics import jit_enabled

    if not jit_enabled():
        raise SystemExit("numba is not installed or FUSION_CORE_JIT=0: no kernel to measure")
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; median of {args.repeat} runs each")
    warnings.simplefilter("ignore")
    words = [w for w in args.only.split(",") if w]
    rows = []
    for kernel, operation, run, twin, diff in _cases(args.responses, args.cartel_responses):
        if words and not any(w in kernel for w in words):
            continue
        fast = run()  # warm-up: numba's cache loaded, the kernel's first call made
        with twin():
            slow = run()
        walls: dict[str, list[float]] = {"kernel": [], "twin": []}
        cpus: dict[str, list[float]] = {"kernel": [], "twin": []}
        for _ in range(args.repeat):
            for side in ("kernel", "twin"):
                t0, c0 = time.perf_counter(), time.process_time()
                if side == "twin":
                    with twin():
                        run()
                else:
                    run()
                walls[side].append(time.perf_counter() - t0)
                cpus[side].append(time.process_time() - c0)
        w = {s: float(np.median(v)) for s, v in walls.items()}
        c = {s: float(np.median(v)) for s, v in cpus.items()}
        gain, cpu_gain = 1 - w["kernel"] / w["twin"], 1 - c["kernel"] / c["twin"]
        rows.append(
            (kernel, operation, w["kernel"], w["twin"], c["kernel"], c["twin"], gain, cpu_gain, diff(fast, slow))
        )
        print(
            f"{kernel:46s} {operation:38s} wall {w['kernel']:6.2f} s vs {w['twin']:6.2f} s  "
            f"CPU {c['kernel']:6.2f} s vs {c['twin']:6.2f} s  gain {gain:+6.1%} wall, {cpu_gain:+6.1%} CPU  "
            f"max |Δ| {rows[-1][-1]:.1e}",
            flush=True,
        )
    print("\n| kernel | operation | wall kernel / twin | CPU kernel / twin | gain (wall, CPU) | max abs diff |")
    print("|---|---|---|---|---|---|")
    for kernel, operation, wk, wt, ck, ct, gain, cpu_gain, d in rows:
        print(
            f"| {kernel} | {operation} | {wk:.2f} / {wt:.2f} s | {ck:.2f} / {ct:.2f} s | {gain:+.0%}, {cpu_gain:+.0%} "
            f"| {d:.0e} |"
        )
    print(f"(load average {os.getloadavg()[0]:.1f} at the end)")


if __name__ == "__main__":
    main()
