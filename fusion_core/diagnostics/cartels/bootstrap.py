"""The detector's null distribution (spec ``spectral.md`` §6.4): a parametric bootstrap from the fitted
independent two-coin model, with the observed missingness pattern copied exactly; p = (1 + #{s* ≥ s})/(B + 1).

Every test stops early (Besag & Clifford 1991, Biometrika 78:301) [EXT, ours]: the decision p < α is exactly the
one the full B replicates of the same random stream would give, so the test and its level are unchanged; only
the number of replicates drawn falls when the answer is clear (p well above α: at p ≈ 0.1 and B = 200 about 100
replicates, at p ≈ 0.5 about 20).  A rejection needs all B replicates (fewer than h exceedances), so groups found
cost what they did.  The first test's displayed null (spectrum band, p-values of the further components) is then
the n replicates drawn; its p-value is h/n (Besag & Clifford's valid p-value for a stopped test), the further
components' (1 + c)/(n + 1) on those n replicates (descriptive: the stop is decided by the first component).

Labels, not pair statistics, are redrawn: each label enters the pair sums of all its annotator's partners, and that
dependence shapes the top eigenvalue, so drawing each pair's sums on its own would be another null.  The sums of a
replicate are one pass over the fixed pair pattern (:class:`.pair_pattern.PairPattern`); the costs and the
measurements are in docs/AUDIT.md (the cartel check).
"""

from __future__ import annotations

import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import pandas as pd

from fusion_core import progress
from fusion_core.data.responses import Responses
from fusion_core.diagnostics.cartels.kernels import draw_labels_packed, packed_width
from fusion_core.diagnostics.cartels.pair_pattern import PairPattern
from fusion_core.diagnostics.cartels.statistic import batched_stats
from fusion_core.errors import AggregationWarning
from fusion_core.methods.base import initial_posterior
from fusion_core.methods.dawid_skene import fit_em_from
from fusion_core.methods.layout import n_threads
from fusion_core.methods.numerics import jit_enabled
from fusion_core.methods.spectral import BinaryMatrix, Moments, fit_binary

MAX_THREADS = 4  # bootstrap chunks computed at once (each holds a chunk's matrices)
MIN_THREADED_WORK = 1_000_000  # replicates cheaper than this (labels + pair entries, or m² of the eigenproblems)
# run on one thread: thread hand-offs cost more than they save (100 annotators, 100k responses, load 2.6: 1.1 s wall on
# one thread, 1.8 s on two); at 100 annotators and 1M responses two threads took 0.87–1.04 s against 1.30–1.64 s
SPARSE_BOOTSTRAP_CELLS = 200_000  # above this many annotator × item cells (and < 30% observed) the
# bootstrap draws only observed entries and sums over the fixed pair pattern (``PairPattern``) instead of
# dense batched products (whose cost m²·n per replicate made 800-annotator crowds take minutes)


@dataclass(frozen=True)
class NullModel:
    """Independent two-coin annotators (§6.4 step 1): sensitivity ψ, specificity η (clipped to [0.01, 0.99]) and
    the class imbalance b (clipped to ±0.98)."""

    psi: np.ndarray
    eta: np.ndarray
    b: float

    @property
    def start(self) -> np.ndarray:
        """The null's rank-one vector √(1−b²)(ψ + η − 1), the power iteration's warm start (ones if it is 0)."""
        x0 = np.sqrt(1 - self.b**2) * (self.psi + self.eta - 1)
        return x0 if np.linalg.norm(x0) != 0 else np.ones(len(self.psi))


@dataclass(frozen=True)
class GroupTest:
    """One bootstrap test of a group: observed statistic ``s`` (top residual eigenvalues), its replicates
    ``s_null`` (replicates drawn × components), p-values ``p`` (one per extra component), the observed and
    bootstrap spectra of the completed covariance, the null model and the number of replicates drawn."""

    s: np.ndarray
    s_null: np.ndarray
    p: np.ndarray
    spec: np.ndarray
    spec_null: np.ndarray
    null: NullModel
    n_drawn: int


def fit_null_model(B: BinaryMatrix, n_min: int, *, quiet: bool = False, moments: Moments | None = None) -> NullModel:
    """§6.4 step 1: i-SML, then two-coin Dawid–Skene EM from its posterior (spec §3.11), on a group's labels.

    ``quiet``: the fits are asked not to warn instead of their warnings being filtered (the filters are
    process-wide and not thread-safe), so that the model can be fitted on a second thread.  ``moments``: the
    group's pairwise moments (with ``n_min``), when already computed."""
    if quiet:
        with np.errstate(all="ignore"):  # thread-local state
            bf = fit_binary(B, n_min=n_min, d_min=1, warn=False, moments=moments)
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", AggregationWarning)
            bf = fit_binary(B, n_min=n_min, d_min=1, moments=moments)
    r = Responses(
        item=B.item,
        worker=B.worker,
        label=(B.z > 0).astype(np.int64),
        items=pd.RangeIndex(B.n),
        workers=pd.RangeIndex(B.m),
        classes=pd.Index([0, 1]),
    )
    if bf.llr is not None:
        p = 1 / (1 + np.exp(-np.clip(bf.llr + np.log((1 + bf.b) / (1 - bf.b)), -50, 50)))
        q0 = np.stack([1 - p, p], axis=1)
    else:
        q0 = initial_posterior(r, "mv")
    # the null is refitted for every group tested: its convergence is not reported to the user
    run = fit_em_from(r, q0, smoothing=0.01, estimate_priors=True, tol=1e-8, max_iter=500, warn=False)
    conf, prior = run.state.confusion, run.state.class_prior
    return NullModel(
        psi=np.clip(conf[:, 1, 1], 0.01, 0.99),
        eta=np.clip(conf[:, 0, 0], 0.01, 0.99),
        b=float(np.clip(prior[1] - prior[0], -0.98, 0.98)),
    )


def stop_count(alpha: float, n_bootstrap: int) -> int:
    """Exceedances h at which the sequential bootstrap stops: h ≥ α(B+1) − 1, so the full-B test could no
    longer reject, and h ≥ αB, so neither can the stopped one (p = h/n ≥ h/B ≥ α); at least 10."""
    h_min = max(int(np.ceil(alpha * (n_bootstrap + 1) - 1 - 1e-9)), int(np.ceil(alpha * n_bootstrap - 1e-9)))
    return max(h_min, 10)


def is_sparse(B: BinaryMatrix) -> bool:
    """Whether a group's bootstrap draws only its observed entries (large and < 30 % observed)."""
    m, n = B.m, B.n
    return m * n > SPARSE_BOOTSTRAP_CELLS and len(B.z) / (m * n) < 0.3


def _entry_order(B: BinaryMatrix) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    key = B.worker * B.n + B.item
    if np.all(key[1:] > key[:-1]):  # already in that order (``BinaryMatrix.from_codes``): no sort
        return B.worker, B.item, B.z
    order = np.lexsort((B.item, B.worker))
    return B.worker[order], B.item[order], B.z[order]


def pair_pattern(B: BinaryMatrix, n_min: int) -> PairPattern | None:
    """The fixed pair pattern a sparse group's bootstrap sums over (None for a dense group): it does not depend on
    the null model, so it can be built while that is fitted."""
    if not is_sparse(B):
        return None
    w, i, _ = _entry_order(B)
    return PairPattern(w, i, B.m, B.n, n_min)


class _Replicates:
    """Draws bootstrap label matrices of a group under the null and computes their statistics: dense batched
    products for small or well-filled matrices; for sparse ones only the observed entries, with moments summed
    over the fixed pattern of candidate pairs."""

    def __init__(
        self,
        B: BinaryMatrix,
        null: NullModel,
        *,
        n_min: int,
        n_extra: int,
        n_spec: int,
        pattern: PairPattern | None = None,
    ):
        self.null = null
        self.n_min, self.n_extra, self.n_spec = n_min, n_extra, n_spec
        self.x0 = null.start
        self.shape = m, n = B.m, B.n
        self.sparse = is_sparse(B)
        if self.sparse:  # entries in (annotator, item) order, as ``np.nonzero`` of the dense mask lists them
            self.w_idx, self.i_idx, self.z_obs = _entry_order(B)
            self.pat = pattern if pattern is not None else PairPattern(self.w_idx, self.i_idx, m, n, n_min)
        else:  # small or well-filled groups: dense m × n label and mask matrices
            self.Z = np.zeros((m, n))
            self.O = np.zeros((m, n), dtype=bool)
            self.Z[B.worker, B.item] = B.z
            self.O[B.worker, B.item] = True

    @property
    def work(self) -> int:
        """Rough cost of one replicate: labels drawn and pair entries summed (sparse) or cells (dense), or the
        m² · 4 of its eigenproblems, whichever is larger."""
        m, n = self.shape
        return max(self.pat.work if self.sparse else m * n, 4 * m * m)

    def chunk(self, chunk: int) -> int:
        """Replicates per batch, bounded so that a batch stays within memory."""
        m, n = self.shape
        if self.sparse:
            return max(1, min(chunk, int(3_000_000 // (m * m)), int(20_000_000 // max(self.pat.work, 1))))
        return max(1, min(chunk, int(10_000_000 // (m * n))))

    def stats(self, zs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Statistics of label batches: b × observed entries (sparse) or b × m × n (dense)."""
        if self.sparse:
            return self.pat.stats(zs, self.n_min, self.n_extra, self.x0, n_spec=self.n_spec)
        return batched_stats(zs, self.O, self.n_min, self.n_extra, self.x0, n_spec=self.n_spec)

    def observed(self) -> tuple[np.ndarray, np.ndarray]:
        if self.sparse:
            return self.stats(self.z_obs[None])
        return self.stats(self.Z[None])

    def draw(self, rng: np.random.Generator, nb: int) -> tuple[np.ndarray, np.ndarray]:
        """``nb`` replicates from the null (truth, then each observed label), and their statistics."""
        psi, eta, b = self.null.psi, self.null.eta, self.null.b
        m, n = self.shape
        # single-precision uniforms (24 random bits; ψ, η, b are clipped to [0.01, 0.99], so the probabilities are
        # exact to 6e-8): a quarter less generator time than doubles, which the labels' draw is dominated by
        y = rng.random((nb, n), dtype=np.float32) < (1 + b) / 2
        if self.sparse:  # draw only the observed entries (the missingness mask is copied exactly)
            u = rng.random((nb, len(self.w_idx)), dtype=np.float32)
            if jit_enabled():  # the same labels from the same draws, bit-packed (``PairPattern.sums_packed``)
                xp = np.zeros((len(self.w_idx), packed_width(nb)), dtype=np.uint8)
                draw_labels_packed(np.ascontiguousarray(y.T), u, self.w_idx, self.i_idx, psi, eta, xp)
                sums = self.pat.sums_packed(xp, nb)
                return self.pat.stats(sums, self.n_min, self.n_extra, self.x0, n_spec=self.n_spec)
            else:
                yy = y[:, self.i_idx]
                w = self.w_idx
                zs = np.where(yy, np.where(u < psi[w], 1.0, -1.0), np.where(u < eta[w], -1.0, 1.0))
        else:
            u = rng.random((nb, m, n), dtype=np.float32)
            zs = (
                np.where(
                    y[:, None, :],
                    np.where(u < psi[None, :, None], 1.0, -1.0),
                    np.where(u < eta[None, :, None], -1.0, 1.0),
                )
                * self.O[None]
            )
        return self.stats(zs)


def bootstrap_test(
    B: BinaryMatrix,
    null: NullModel,
    rng: np.random.Generator,
    *,
    n_bootstrap: int,
    alpha: float,
    n_min: int,
    n_extra: int = 1,
    n_spec: int = 0,
    chunk: int = 50,
    sequential: bool = False,
    threads: int | None = None,
    pattern: PairPattern | None = None,
) -> GroupTest:
    """Statistic and bootstrap p-values of a group's labels ``B`` (every item labelled by a member).

    ``sequential``: Besag–Clifford sequential Monte Carlo test.  Replicates are drawn in chunks and the bootstrap
    stops as soon as ``h`` replicates reach the observed statistic; the p-value is then ``h / n`` (n = replicates
    drawn), else the full-B p-value ``(1 + c) / (B + 1)``.  With ``h ≥ h_min`` (a count at which neither the full-B
    test nor the stopped one, h/n ≥ h/B, can reject), the decision p < α is exactly the one the full B replicates
    of this stream would give (the count can only grow); ``h = max(h_min, 10)`` keeps p precise enough to rank the
    merge candidates (§6.5 step 7).  ``threads``: chunks computed at once (default: the cores this process may
    use when a replicate costs ``MIN_THREADED_WORK`` or more, at most ``MAX_THREADS``; the replicates and the
    result do not depend on it).  ``pattern``: the group's :func:`pair_pattern`, if already built.
    """
    reps = _Replicates(B, null, n_min=n_min, n_extra=n_extra, n_spec=n_spec, pattern=pattern)
    chunk = reps.chunk(chunk)
    h = stop_count(alpha, n_bootstrap) if sequential else n_bootstrap + 1
    starts = list(range(0, n_bootstrap, chunk))  # chunks bound memory
    # each chunk draws from its own stream, seeded by the test's one draw from ``rng`` and the chunk's number, so
    # the replicates do not depend on how many threads compute them or on how far ahead they ran
    seed = int(rng.integers(2**63))

    def run(c: int) -> tuple[np.ndarray, np.ndarray]:
        return reps.draw(np.random.default_rng([seed, c]), min(chunk, n_bootstrap - starts[c]))

    s_null, spec_null, count, stop_at = [], [], 0, None
    if threads is None:  # small groups: a replicate costs a few ms, and thread hand-offs cost more than they save
        threads = n_threads() if reps.work >= MIN_THREADED_WORK else 1
    workers = min(threads, len(starts), MAX_THREADS)
    with ThreadPoolExecutor(max(workers, 1), thread_name_prefix="fusion-cartel") as pool:
        # the compiled kernels and numpy release the GIL (scipy.linalg.eigh holds it): ``workers`` chunks in flight,
        # read back in order; the stop rule only looks at the chunks before it, so the result is the sequential one
        pending = {c: pool.submit(run, c) for c in range(workers)}
        s_obs, spec_obs = reps.observed()  # while the first chunks are drawn
        for c, start in enumerate(starts):
            s, sp_ = pending.pop(c).result()
            progress.report("bootstrap test of a group", min(start + chunk, n_bootstrap) / n_bootstrap)
            s_null.append(s)
            spec_null.append(sp_)
            hits = count + np.cumsum(s[:, 0] >= s_obs[0, 0])
            if hits[-1] >= h:  # sequential stop: the h-th exceedance
                stop_at = start + int(np.argmax(hits >= h)) + 1
                break
            count = int(hits[-1])
            if c + workers < len(starts):  # after the stop check: a chunk past the stop is never started
                pending[c + workers] = pool.submit(run, c + workers)
        for f in pending.values():
            f.cancel()
    s_null_a = np.concatenate(s_null)
    spec_null_a = np.concatenate(spec_null)
    if stop_at is not None:
        s_null_a, spec_null_a = s_null_a[:stop_at], spec_null_a[:stop_at]
        p = (1 + (s_null_a >= s_obs[0][None, :]).sum(axis=0)) / (stop_at + 1)
        p[0] = h / stop_at
    else:
        p = (1 + (s_null_a >= s_obs[0][None, :]).sum(axis=0)) / (n_bootstrap + 1)
    return GroupTest(s_obs[0], s_null_a, p, spec_obs[0], spec_null_a, null, len(s_null_a))
