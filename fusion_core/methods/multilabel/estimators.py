"""``multilabel-em``: a latent true label *set* per task and per-annotator flip rates (Boolean noise model, EM).

Spec ``multilabel.md`` (Streich 2010, ETH Diss. 19229, Ch. 9; the annotator reading is an extension, §4).  The data
model is :class:`~fusion_core.data.multilabel.MultiLabelResponses`; the EM steps are :mod:`.model` (run by the
shared driver, which also owns the optional deterministic annealing of §7); the admissible family is
:mod:`.family`.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Sequence
from typing import Any, ClassVar, Self

import numpy as np
import pandas as pd
import scipy.sparse as sp
from threadpoolctl import threadpool_limits

from fusion_core import progress
from fusion_core.data.multilabel import MultiLabelResponses, parse_multilabel, unique_rows
from fusion_core.errors import AggregationWarning, UserInputError
from fusion_core.methods.base import Aggregator
from fusion_core.methods.em import EMRun, EMSettings, check_anneal, resolve_schedule, run_em
from fusion_core.methods.multilabel.family import SetFamily, gold_set_index, set_family
from fusion_core.methods.multilabel.model import GRANULARITIES, GoldSets, MultiLabelModel, NoiseState
from fusion_core.methods.params import Bool, Choice, Float, Int, Object, Param, Text, show
from fusion_core.methods.registry import register
from fusion_core.methods.results import AnnotatorColumn, FitResult


@register(
    "multilabel-em",
    title="Multi-label EM (true label sets, per-annotator flip rates)",
    summary="Multi-label aggregation: latent true label set per task, per-annotator flip rates (Boolean noise "
    "model, EM).",
    inputs=("multilabel",),
    family="multilabel",
    reference="Streich 2010 (ETH Diss. 19229) Ch. 9 eqs. (9.8)–(9.25), restated for annotators; spec multilabel.md.",
)
class MultiLabelEM(Aggregator):
    """Multi-label EM (spec ``multilabel.md``).

    ``fit(df)`` with format A (``task, worker, label`` where label is a ``sep``-joined set or a list/tuple/set) or
    format B (``task, worker, label, present``), or a :class:`~fusion_core.data.multilabel.MultiLabelResponses`.
    Gold label sets (``true_labels=``, a Series by task of label sets) are clamped.  Fitted attributes:
    ``labels_`` (Series by task of tuples: the MAP set), ``probas_`` = ``marginals_`` (task × label, P(label in true
    set)), ``label_decisions_`` (labels with marginal > 0.5, may differ from the MAP set), ``flip_rates_`` (index
    (worker, label); false_positive = ε0, miss = ε1, sensitivity, specificity), ``errors_`` (same table),
    ``mixture_`` (ε, r view), ``set_prior_``, ``top_sets_``, ``skills_`` (mean balanced accuracy over labels),
    ``loss_history_``, ``log_likelihood_``, ``n_iter_``, ``converged_``, ``temperatures_`` (per iteration,
    annealing first) and ``result_`` (annealing trace in ``result_.annealing``).

    Examples
    --------
    >>> import warnings
    >>> from fusion_core.simulate.multilabel import multilabel_crowd
    >>> sim = multilabel_crowd(n_items=300, n_labels=4, n_workers=8, seed=0)
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     m = MultiLabelEM(max_degree=2).fit(sim.responses)
    >>> m.probas_.shape  # tasks × labels: P(label in the true set)
    (300, 4)
    >>> bool((m.labels_ == sim.truth.reindex(m.labels_.index)).mean() > 0.8)
    True
    """

    params: ClassVar[dict[str, Param]] = {
        "noise": Choice(
            "flip",
            ("flip", "mixture", "symmetric"),
            help="Noise model: asymmetric flip (ε0 false positives, ε1 misses), mixture (guess with prob. ε, say "
            "'present' with prob. r; excludes adversarial annotators) or symmetric flip.",
        ),
        "granularity": Choice(
            "annotator",
            GRANULARITIES,
            help="Noise cells: one global pair, per label, per annotator (default), per (annotator, label) or per "
            "item (diagnostic only: over-fits).",
        ),
        "max_degree": Int(
            None,
            low=1,
            high=100,
            nullable=True,
            help="Largest true-set size M (None: the 99th percentile of reported set sizes, 1..4).",
        ),
        "include_empty": Bool(True, help="Allow the empty set as a true label set."),
        "admissible": Choice(
            "degree",
            ("degree", "observed", "all"),
            help="Admissible true sets: all sets of ≤ M labels, the sets reported at least once (+ ∅), or all subsets.",
        ),
        "prior": Choice(
            "set",
            ("set", "uniform", "product"),
            help="Prior over true sets: estimated per set, uniform (the thesis's choice) or independent labels "
            "(only with admissible='all').",
        ),
        "alpha": Float(
            0.01, low=0.0, high=10.0, advanced=True, help="Pseudo-count on every noise count (Beta(1+α, 1+α) MAP)."
        ),
        "kappa": Float(1e-3, low=0.0, high=10.0, advanced=True, help="Pseudo-count on every set-prior entry."),
        "anneal": Object(
            False,
            help="Deterministic annealing (multilabel.md §7): off (default), on, or a dict of schedule settings "
            "(T0, factor, inner_max, inner_tol, guard, schedule).",
            text="off (False/None), on (True/'default'), or a dict of schedule settings",
            check=check_anneal,
        ),
        "tol": Float(1e-8, low=0.0, high=1.0, help="Stop when the relative change of the log-likelihood is below tol."),
        "max_iter": Int(500, low=1, high=100_000, help="Maximum EM iterations."),
        "factorize": Bool(
            True,
            advanced=True,
            help="Use the exact per-label (binary relevance) path when the model factorises (all subsets, product "
            "prior, per-label noise cells).",
        ),
        "sep": Text("|", help="Separator of label sets in format A text."),
        "unlisted": Choice(
            "absent",
            ("absent", "missing"),
            help="Format B: labels not listed for a (task, worker) pair are 'absent' (closed world) or 'missing' "
            "(partial judgments).",
        ),
    }

    # the declared parameters, as set by the generated keyword-only __init__
    noise: str
    granularity: str
    max_degree: int | None
    include_empty: bool
    admissible: str
    prior: str
    alpha: float
    kappa: float
    anneal: Any
    tol: float
    max_iter: int
    factorize: bool
    sep: str
    unlisted: str

    # ---------------------------------------------------------------- fit
    def fit(
        self,
        data: pd.DataFrame | MultiLabelResponses,
        *,
        labels: Sequence[Any] | None = None,
        true_labels: pd.Series | None = None,
        graph: Any = None,
        context: Any = None,
    ) -> Self:
        """Fit on format A or B responses (or :class:`MultiLabelResponses`); ``labels`` adds vocabulary labels
        nobody reported; ``true_labels`` (gold label sets by task) are clamped."""
        t0 = time.perf_counter()
        self.validated_params()
        d = self._data(data, labels)
        if d.n_workers < 2:
            raise UserInputError(
                f"only {d.n_workers} annotator gave responses; estimating reliability needs at least 2."
            )
        family = set_family(
            d,
            admissible=self.admissible,
            max_degree=self.max_degree,
            include_empty=bool(self.include_empty),
            prior=self.prior,
            factorize=bool(self.factorize),
            per_label_cells=self.granularity in ("label", "annotator_label"),
        )
        gold = None
        if true_labels is not None:
            family, gold = self._gold_sets(d, family, true_labels)
        # single-threaded BLAS: the E-step runs many small products (cache-sized chunks); on a busy machine
        # multi-threaded BLAS made them up to 30× slower (benchmarks/bench_multilabel.py)
        with (
            warnings.catch_warnings(record=True) as caught,
            progress.stage(self.method_name),
            threadpool_limits(limits=1, user_api="blas"),
        ):
            warnings.simplefilter("always", AggregationWarning)
            if family.pruned and family.Z is not None:
                warnings.warn(
                    f"{family.pruned + len(family.Z):,} true sets of at most {family.max_degree} labels are too many "
                    f"to enumerate; kept {len(family.Z):,}: the empty set, every single label and the most often "
                    "reported sets of several labels (set admissible='all' with prior='product', or a smaller "
                    "max_degree, for an exact family).",
                    AggregationWarning,
                    stacklevel=2,
                )
            model = self._model(d, family, gold)
            _warn_data(d)
            run = run_em(model, model.initial_state(), self._settings())
            _warn_mirrors(d, self._expand(run.state.eps0, d), self._expand(run.state.eps1, d))
        msgs = _replayed(caught)
        with threadpool_limits(limits=1, user_api="blas"):
            self._set_ml(d, model, run, family=family, msgs=msgs, seconds=time.perf_counter() - t0)
        return self

    def _data(self, data: Any, labels: Sequence[Any] | None = None) -> MultiLabelResponses:
        return parse_multilabel(data, sep=self.sep, labels=labels, unlisted=self.unlisted)

    def _gold_sets(self, d: MultiLabelResponses, family: SetFamily, true_labels: Any) -> tuple[SetFamily, GoldSets]:
        """The family (a pruned one extended by the gold sets) and the gold items with their set index (or bits)."""
        items, bits = d.gold_sets(true_labels, sep=self.sep)
        if family.factorised or family.Z is None:
            return family, (items, bits)
        family = family.with_sets(bits[bits.sum(axis=1) <= family.max_degree])
        assert family.Z is not None
        return family, (items, gold_set_index(family.Z, bits, [show(t) for t in d.items.take(items)]))

    def _model(self, d: MultiLabelResponses, family: SetFamily, gold: GoldSets | None) -> MultiLabelModel:
        return MultiLabelModel(
            d,
            granularity=self.granularity,
            noise=self.noise,
            Z=family.Z,
            prior=self.prior,
            alpha=float(self.alpha),
            kappa=float(self.kappa),
            factorised=family.factorised,
            gold=gold,
            keep_joint=resolve_schedule(self.anneal) is not None,
        )

    def _settings(self) -> EMSettings:
        return EMSettings(
            tol=float(self.tol),
            max_iter=int(self.max_iter),
            anneal=resolve_schedule(self.anneal),
            name=f"{self.method_name} EM",
        )

    # ---------------------------------------------------------------- outputs
    def _set_ml(
        self,
        d: MultiLabelResponses,
        model: MultiLabelModel,
        run: EMRun[NoiseState],
        *,
        family: SetFamily,
        msgs: list[str],
        seconds: float,
    ) -> None:
        st, m = run.state, run.posterior
        task_index = pd.Index(d.items, name="task")
        self.model_, self.state_, self.data_ = model, st, d
        self.workers_, self.classes_ = d.workers, d.labels
        if family.factorised or family.Z is None:
            map_sets = m > 0.5
        else:
            mp, tops = model.decode(st, top=5)
            map_sets = family.Z[mp]
            self._set_set_tables(d, family.Z, st, tops)
        self.labels_ = _as_tuples(map_sets, d.labels, task_index)
        self.label_decisions_ = _as_tuples(m > 0.5, d.labels, task_index)
        self.probas_ = pd.DataFrame(m, index=task_index, columns=pd.Index(d.labels, name="label"))
        self.marginals_ = self.probas_
        e0, e1 = self._expand(st.eps0, d), self._expand(st.eps1, d)
        self._set_noise_tables(d, e0, e1)
        if family.factorised:
            self.set_prior_ = pd.Series(st.rho, index=pd.Index(d.labels, name="label"), name="label_prior")
        trace = list(run.log_likelihood)
        ann = run.annealing
        self.loss_history_ = trace
        self.log_likelihood_ = trace[-1] if trace else None
        self.n_iter_, self.converged_ = run.n_iter, run.converged
        self.temperatures_ = [*(float(t) for t in (ann.temperatures if ann is not None else ())), *[1.0] * len(trace)]
        self.max_degree_ = family.max_degree
        self.warnings_ = msgs
        skills = 1 - 0.5 * (e0 + e1).mean(axis=1)  # mean balanced accuracy over labels
        self.skills_ = pd.Series(skills, index=pd.Index(d.workers, name="worker"), name="skill")
        self.result_ = FitResult(
            method=self.method_name,
            params=self.get_params(),
            items=d.items,
            workers=d.workers,
            classes=d.labels,
            posterior=m,
            confusion=None,
            class_prior=None,
            worker_skill=skills,
            log_likelihood=trace,
            n_iter=run.n_iter,
            converged=run.converged,
            seconds=seconds,
            annotator_columns=_annotator_columns(e0, e1),
            annealing=ann,
            details={"flip_rates": np.stack([e0, e1], axis=2), "map_sets": map_sets, "max_degree": family.max_degree},
            warnings=msgs,
        )

    def _set_noise_tables(self, d: MultiLabelResponses, e0: np.ndarray, e1: np.ndarray) -> None:
        """``flip_rates_`` / ``errors_`` and the mixture view ``mixture_`` (index (worker, label))."""
        idx = pd.MultiIndex.from_product([d.workers, d.labels], names=["worker", "label"])
        self.flip_rates_ = pd.DataFrame(
            {
                "false_positive": e0.ravel(),
                "miss": e1.ravel(),
                "sensitivity": 1 - e1.ravel(),
                "specificity": 1 - e0.ravel(),
            },
            index=idx,
        )
        self.errors_ = self.flip_rates_
        eps = e0 + e1
        with np.errstate(invalid="ignore", divide="ignore"):
            r = np.where(eps > 0, e0 / np.where(eps > 0, eps, 1), np.nan)
        self.mixture_ = pd.DataFrame({"eps": eps.ravel(), "r": r.ravel()}, index=idx)

    def _set_set_tables(self, d: MultiLabelResponses, Z: np.ndarray, st: NoiseState, tops: list[Any]) -> None:
        """``set_prior_`` (prior per admissible set) and ``top_sets_`` (the 5 most probable sets per task)."""
        lab_arr = np.asarray(d.labels, dtype=object)
        set_arr = np.empty(len(Z), dtype=object)
        set_arr[:] = [tuple(lab_arr[z]) for z in Z]  # one tuple per admissible set
        assert st.log_prior is not None
        index = pd.Index(list(set_arr), tupleize_cols=False, name="set")
        self.set_prior_ = pd.Series(np.exp(st.log_prior), index=index, name="prior")
        if not tops:
            self.top_sets_ = pd.DataFrame(columns=["task", "rank", "set", "probability"])
            return
        # per chunk: rank-major blocks of the chunk's items (numpy first, one table: chunks are many and small)
        k = tops[0][1].shape[1]
        task = np.concatenate([np.tile(np.arange(start, start + ix.shape[0]), k) for start, ix, _ in tops])
        rank = np.concatenate([np.repeat(np.arange(1, k + 1), ix.shape[0]) for _, ix, _ in tops])
        sets = np.concatenate([ix.T.ravel() for _, ix, _ in tops])
        prob = np.concatenate([pr.T.ravel() for _, _, pr in tops])
        self.top_sets_ = pd.DataFrame(
            {"task": d.items.take(task), "rank": rank, "set": set_arr[sets], "probability": prob}
        )

    def _expand(self, v: np.ndarray, d: MultiLabelResponses) -> np.ndarray:
        """Per-cell noise → workers × labels (item granularity: the mean over the worker's responses)."""
        J, C = d.n_workers, d.n_labels
        g = self.granularity
        if g == "global":
            return np.full((J, C), v[0])
        if g == "label":
            return np.broadcast_to(v, (J, C)).copy()
        if g == "annotator":
            return np.repeat(v[:, None], C, axis=1)
        if g == "annotator_label":
            return v.reshape(J, C)
        cnt = np.maximum(np.bincount(d.worker, minlength=J), 1)
        return np.repeat((np.bincount(d.worker, weights=v[d.item], minlength=J) / cnt)[:, None], C, axis=1)

    # ---------------------------------------------------------------- held-out scoring (§8)
    def heldout_item_scores(self, hidden: MultiLabelResponses) -> tuple[np.ndarray, np.ndarray]:
        """(item codes, S_i) for the items with hidden responses (see :meth:`MultiLabelModel.heldout_item_scores`)."""
        return self.model_.heldout_item_scores(self.state_, hidden)

    def n_free_parameters(self) -> int:
        """Noise parameters (per cell, 1 for symmetric, 2 otherwise) plus the free prior entries."""
        model = self.model_
        k = model.ncell * (1 if self.noise == "symmetric" else 2)
        if model.factorised or self.prior == "product":
            return k + model.C
        assert model.Z is not None
        return k + (model.Z.shape[0] - 1 if self.prior == "set" else 0)


# ---------------------------------------------------------------------------------- helpers
def _as_tuples(rows: np.ndarray, labels: pd.Index, index: pd.Index) -> pd.Series:
    """Boolean rows (items × labels) as a Series of label tuples (one tuple built per distinct set)."""
    lab_arr = np.asarray(labels, dtype=object)
    uniq, inv = unique_rows(rows)
    names = np.empty(len(uniq), dtype=object)
    names[:] = [tuple(lab_arr[u]) for u in uniq]
    return pd.Series(names[inv], index=index, name="label")


def _annotator_columns(e0: np.ndarray, e1: np.ndarray) -> tuple[AnnotatorColumn, ...]:
    return (
        AnnotatorColumn(
            "false_positive_rate",
            "false positives (mean over labels)",
            e0.mean(axis=1),
            "Share of labels absent from the true set that the annotator reports (ε0), averaged over labels.",
        ),
        AnnotatorColumn(
            "miss_rate",
            "misses (mean over labels)",
            e1.mean(axis=1),
            "Share of labels in the true set that the annotator leaves out (ε1), averaged over labels.",
        ),
    )


def _replayed(caught: list[warnings.WarningMessage]) -> list[str]:
    """Re-emit recorded warnings; the aggregation warnings' texts, each once, for ``warnings_``."""
    msgs: list[str] = []
    for w in caught:
        if issubclass(w.category, AggregationWarning) and str(w.message) not in msgs:
            msgs.append(str(w.message))
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return msgs


def _warn_data(d: MultiLabelResponses) -> None:
    """Labels nobody reports, and (annotator, label) columns that never vary (uninformative)."""
    obs = np.ones_like(d.X) if d.O is None else d.O
    reported = (d.X & obs).any(axis=0)
    for c in np.flatnonzero(~reported):  # labels, not responses
        warnings.warn(
            f"label {show(d.labels[c])} is never reported: its presence is determined by the prior alone.",
            AggregationWarning,
            stacklevel=3,
        )
    # constant annotator columns (always / never reporting a label), among annotators with ≥ 2 responses
    nresp = np.bincount(d.worker, minlength=d.n_workers)
    inc = sp.csr_matrix(
        (np.ones(d.n_responses), (d.worker, np.arange(d.n_responses))), shape=(d.n_workers, d.n_responses)
    )
    pos = np.asarray(inc @ (d.X & obs).astype(float))
    tot = np.asarray(inc @ obs.astype(float))
    const = ((pos == 0) | (pos == tot)) & (tot >= 2) & (nresp[:, None] >= 2) & reported[None, :]
    if const.any():
        ws, cs = np.nonzero(const)
        ex = [f"{show(d.workers[a])}/{show(d.labels[b])}" for a, b in zip(ws[:5], cs[:5], strict=True)]
        warnings.warn(
            f"{len(ws)} (annotator, label) columns are constant (always or never reported), uninformative about that "
            f"label: e.g. {', '.join(ex)}.",
            AggregationWarning,
            stacklevel=3,
        )


def _warn_mirrors(d: MultiLabelResponses, e0: np.ndarray, e1: np.ndarray) -> None:
    """A label whose annotators mostly have ε0 + ε1 > 1 may have been learnt inverted (the mirror solution)."""
    active = np.bincount(d.worker, minlength=d.n_workers) > 0
    if not active.any():
        return
    adverse = (e0 + e1 > 1)[active].mean(axis=0) > 0.5
    for c in np.flatnonzero(adverse):  # labels, not responses
        warnings.warn(
            f"most annotators of label {show(d.labels[c])} have ε0 + ε1 > 1: the label's meaning may be inverted "
            "(mirror solution).",
            AggregationWarning,
            stacklevel=3,
        )
