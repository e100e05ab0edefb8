"""The Dask engine (issue 15 items 4–5) against the in-memory fits, on a LocalCluster with 2 workers.

Partitioned CSV and Parquet inputs with ids that look like numbers ("007" and "7", "1e3" and "1000"), text
labels, a label that needs CSV quoting and blank cells; ``ds``, ``ds1`` and ``mv`` must give the in-memory
posteriors, labels, confusion matrices, priors, skills, log-likelihoods and iteration counts to 1e-6, with the
ids and labels back exactly as written.  Skipped when dask is not installed.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from conftest import dataset_path

pytest.importorskip("dask.dataframe")
distributed = pytest.importorskip("distributed")

from fusion_core.data import load_responses  # noqa: E402
from fusion_core.engines.dask import DaskDawidSkene, create, fit, ingest  # noqa: E402
from fusion_core.errors import ConvergenceWarning, UserInputError  # noqa: E402
from fusion_core.methods import create as create_in_memory  # noqa: E402
from fusion_core.simulate import dawid_skene  # noqa: E402

TOL = 1e-6
TRICKY_TASKS = ["007", "7", "1e3", "1000", "-5", "a,b", 'say "hi"']


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None, silence_logs=40
    )
    with distributed.Client(cluster) as c:
        yield c
    cluster.close()


@pytest.fixture(scope="module")
def answers() -> pd.DataFrame:
    """Simulated DS responses with text ids: tricky task and worker ids, text labels, a few blank cells."""
    sim = dawid_skene(n_items=400, n_workers=12, n_classes=3, seed=3)
    df = sim.responses.copy()
    tasks = pd.Index(sorted(df["task"].unique(), key=str))
    names = {t: (TRICKY_TASKS[i] if i < len(TRICKY_TASKS) else f"item-{i}") for i, t in enumerate(tasks)}
    workers = {
        w: ("007" if i == 0 else "7" if i == 1 else f"w{i}") for i, w in enumerate(sorted(df["worker"].unique()))
    }
    labels = dict(zip(sorted(df["label"].unique()), ["cat", "dog, big", "01"]))
    out = pd.DataFrame(
        {
            "task": df["task"].map(names).astype(object),
            "worker": df["worker"].map(workers).astype(object),
            "label": df["label"].map(labels).astype(object),
        }
    )
    out.loc[5, "label"] = None  # dropped: missing label
    out.loc[9, "worker"] = None  # dropped: missing worker
    return out.sample(frac=1.0, random_state=0).reset_index(drop=True)  # items scattered over the input files


def _write(answers: pd.DataFrame, root, fmt: str) -> str:
    root.mkdir()
    bounds = np.linspace(0, len(answers), 4).astype(int)
    for i in range(3):
        part = answers.iloc[bounds[i] : bounds[i + 1]]
        if fmt == "csv":
            part.to_csv(root / f"part-{i}.csv", index=False)
        else:
            part.astype("string").to_parquet(root / f"part-{i}.parquet", index=False)
    return str(root / "*.csv") if fmt == "csv" else str(root)


def _compare(dask_fit, mem) -> None:
    res = dask_fit.result_
    probas = dask_fit.probas_.compute()
    labels = dask_fit.labels_.compute()
    assert sorted(probas.index) == sorted(mem.probas_.index)  # every task id back, exactly as written
    assert list(probas.columns) == list(mem.probas_.columns)  # labels as written, in the in-memory order
    np.testing.assert_allclose(probas.to_numpy(), mem.probas_.loc[probas.index].to_numpy(), atol=TOL)
    assert (labels == mem.labels_.loc[labels.index]).all()
    assert list(res.workers) == list(mem.workers_)
    assert np.allclose(res.class_prior, mem.priors_.to_numpy(), atol=TOL)
    assert np.allclose(dask_fit.skills_.to_numpy(), mem.skills_.loc[res.workers].to_numpy(), atol=TOL)
    assert (res.responses_per_worker == mem.responses_.responses_per_worker).all()
    assert res.n_iter == mem.n_iter_
    np.testing.assert_allclose(res.log_likelihood, mem.loss_history_, rtol=1e-9)
    if res.confusion is not None:
        np.testing.assert_allclose(res.confusion, mem.confusion_, atol=TOL)
        pd.testing.assert_frame_equal(
            dask_fit.errors_, mem.errors_, atol=TOL, check_index_type=False, check_column_type=False
        )


@pytest.mark.parametrize(("method", "fmt"), [("ds", "csv"), ("ds", "parquet"), ("ds1", "parquet"), ("mv", "csv")])
def test_dask_fit_equals_in_memory_fit(client, answers, tmp_path, method, fmt):
    source = _write(answers, tmp_path / "in", fmt)
    est = create(method).fit(
        source, scheduler=client, output=str(tmp_path / "out"), scratch=str(tmp_path / "scratch"), partition_size=600
    )
    mem = create_in_memory(method).fit(answers)
    assert est.result_.n_partitions >= 3
    assert est.result_.report.responses == mem.responses_.report.responses == len(answers) - 2
    assert est.result_.report.dropped_missing_label == 1 and est.result_.report.dropped_missing_id == 1
    _compare(est, mem)
    written = pd.read_parquet(tmp_path / "out")
    assert set(written["task"]) == set(answers["task"])
    assert {"007", "7", "1e3", "1000", "-5", "a,b", 'say "hi"'} <= set(written["task"])
    assert list(written.columns) == ["task", "label", "P(01)", "P(cat)", "P(dog, big)"]
    assert not (tmp_path / "scratch").exists() or not any((tmp_path / "scratch").rglob("*.parquet"))


def test_ingest_once_fit_several_methods_and_cache_in_memory(client, answers):
    coded = ingest(answers, partition_size=500)
    assert coded.n_responses == len(answers) - 2 and coded.n_partitions >= 3
    on_disk = fit(coded, "ds", params={"smoothing": 0.1}, scheduler=client)
    in_memory = fit(coded, "ds", params={"smoothing": 0.1}, scheduler=client, cache="memory")
    mem = create_in_memory("ds", smoothing=0.1).fit(answers)
    np.testing.assert_allclose(on_disk.confusion, mem.confusion_, atol=TOL)
    np.testing.assert_allclose(in_memory.confusion, mem.confusion_, atol=TOL)
    assert on_disk.n_iter == in_memory.n_iter == mem.n_iter_
    mv = fit(coded, "mv", scheduler=client)
    assert mv.confusion is None and mv.annotator_table().columns.tolist() == ["worker", "accuracy", "responses"]
    summary = on_disk.summary()
    assert summary["engine"] == "dask" and summary["responses"] == len(answers) - 2
    assert len(summary["seconds_per_iteration"]) == on_disk.n_iter  # one pass per E-step


def test_one_coin_collapse_guard_as_in_memory(client):
    """bluebirds: ds1's estimated priors collapse; both engines refit with equal priors, warn, and agree."""
    path = dataset_path("bluebirds") / "answers.csv"
    answers = pd.read_csv(path, dtype=str, keep_default_na=False)
    with pytest.warns(Warning, match="collapsed"):
        est = create("ds1").fit(str(path), scheduler=client.scheduler.address)  # a scheduler given by address
    with pytest.warns(Warning, match="collapsed"):
        mem = create_in_memory("ds1").fit(answers)
    assert np.allclose(est.priors_.to_numpy(), 0.5) and est.warnings_ == mem.warnings_
    _compare(est, mem)


def test_files_read_by_the_in_memory_rules(client, tmp_path):
    """Parquet numbers become canonical text and CSV cells follow the reading options, exactly as load_responses:
    same ids, labels, classes (declared order) and dropped rows."""
    sim = dawid_skene(n_items=150, n_workers=6, n_classes=3, seed=1).responses
    typed = pd.DataFrame(
        {
            "item": sim["task"].str[1:].astype("int64"),  # integers: "7", not 7
            "who": sim["worker"],
            "grade": sim["label"].astype(float) + 1.0,  # floats 1.0, 2.0, 3.0: "1", "2", "3"
        }
    )
    typed.to_parquet(tmp_path / "typed.parquet", index=False)
    opts = {"task": "item", "worker": "who", "label": "grade", "classes": ["3", "2", "1"]}
    est = create("ds").fit(str(tmp_path / "typed.parquet"), scheduler=client, **opts)
    mem = create_in_memory("ds").fit(load_responses(tmp_path / "typed.parquet", **opts))
    assert list(est.classes_) == ["3", "2", "1"] == list(mem.classes_)
    _compare(est, mem)
    text = sim.astype(object)
    text.loc[:4, "label"] = "NA"  # missing with na_values=["NA"]
    text.loc[5:9, "worker"] = "  " + text.loc[5:9, "worker"] + " "  # the same worker once trimmed
    text.to_csv(tmp_path / "text.csv", index=False)
    read = {"na_values": ["NA"], "strip_whitespace": True}
    est = create("mv").fit(str(tmp_path / "text.csv"), scheduler=client, **read)
    mem = create_in_memory("mv").fit(load_responses(tmp_path / "text.csv", **read))
    assert est.result_.report.dropped_missing_label == mem.responses_.report.dropped_missing_label == 5
    assert list(est.workers_) == list(mem.workers_) and len(est.workers_) == 6
    _compare(est, mem)


def test_the_driver_warns_when_em_stops_at_max_iter(client, answers):
    with pytest.warns(ConvergenceWarning, match="stopped after 2 iterations"):
        est = DaskDawidSkene(max_iter=2).fit(answers, scheduler=client)
    assert est.n_iter_ == 2 and not est.converged_


def test_bad_inputs_raise_one_clear_message(client, answers, tmp_path):
    with pytest.raises(UserInputError, match="missing label column 'answer'"):
        fit(answers, "ds", label="answer", scheduler=client)
    with pytest.raises(UserInputError, match="runs in memory only"):
        fit(answers, "glad", scheduler=client)
    with pytest.raises(UserInputError, match="has no parameter 'anneal'"):
        fit(answers, "ds", params={"anneal": True})
    with pytest.raises(UserInputError, match="max_iter"):
        fit(answers, "ds", params={"max_iter": 0})
    one_label = answers.assign(label="cat")
    with pytest.raises(UserInputError, match="only one label value"):
        fit(one_label, "mv", scheduler=client)
    with pytest.raises(UserInputError, match="cannot tell the format"):
        fit(str(tmp_path / "answers.xlsx"), "ds", scheduler=client)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(UserInputError, match="scheduler must be"):
            fit(answers, "ds", scheduler=3.5)


def test_cli_fits_on_the_dask_engine(tmp_path, capsys):
    """``fusion-core fit --engine dask`` writes the same workers/confusion tables as the in-memory fit."""
    import pandas as pd

    from fusion_core.cli import main
    from fusion_core.simulate import dawid_skene

    sim = dawid_skene(n_items=200, n_workers=8, n_classes=3, seed=4)
    src = tmp_path / "answers.csv"
    sim.responses.to_csv(src, index=False)
    assert main(["fit", str(src), "--method", "ds", "--out", str(tmp_path / "mem")]) == 0
    args = ["fit", str(src), "--method", "ds", "--engine", "dask", "--scheduler", "synchronous", "--out"]
    assert main([*args, str(tmp_path / "dask")]) == 0
    assert "Dask engine" in capsys.readouterr().out
    mem = pd.read_csv(tmp_path / "mem" / "workers.csv", dtype={"worker": str}).set_index("worker").sort_index()
    dsk = pd.read_csv(tmp_path / "dask" / "workers.csv", dtype={"worker": str}).set_index("worker").sort_index()
    assert np.allclose(mem["accuracy"], dsk.loc[mem.index, "accuracy"], atol=1e-6)
    assert main([*args, str(tmp_path / "x"), "--gold", str(src)]) == 2
