"""Where the Dask engine keeps data between passes: the coded partitions (scratch) and the partitioned outputs.

Each partition ``i`` is one Parquet file per kind, ``<root>/<kind>/part-<i>.parquet``, written and read by the
worker that handles the partition, through fsspec, so ``root`` may be a local directory (a ``LocalCluster``), a
shared filesystem or an object-storage URL (``s3://``, ``gs://``, ``abfs://``: every worker of a real cluster must
be able to reach it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from fusion_core.data.responses import Responses
from fusion_core.engines.dask.kernels import partition_responses

CODED = "coded"  # item (local), worker, label codes of one partition, sorted by item
TASKS = "tasks"  # the partition's task ids in local item-code order, as given


@dataclass(frozen=True)
class Store:
    """A directory or object-storage prefix holding one Parquet file per partition and kind."""

    root: str
    storage_options: Mapping[str, Any] = field(default_factory=dict)

    def _fs(self) -> tuple[Any, str]:
        from fsspec.core import url_to_fs

        return url_to_fs(self.root, **dict(self.storage_options))

    def file(self, kind: str, i: int) -> str:
        _, base = self._fs()
        return f"{base.rstrip('/')}/{kind}/part-{i:05d}.parquet" if kind else f"{base.rstrip('/')}/part-{i:05d}.parquet"

    def write(self, kind: str, i: int, table: pa.Table) -> None:
        fs, _ = self._fs()
        path = self.file(kind, i)
        fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
        with fs.open(path, "wb") as f:
            pq.write_table(table, f)

    def read(self, kind: str, i: int) -> pa.Table:
        fs, _ = self._fs()
        with fs.open(self.file(kind, i), "rb") as f:
            return pq.read_table(f)

    def remove(self) -> None:
        """Delete everything under ``root``."""
        fs, base = self._fs()
        if fs.exists(base):
            fs.rm(base, recursive=True)


def write_coded(store: Store, i: int, tasks: pa.Array, codes: tuple[np.ndarray, np.ndarray, np.ndarray]) -> None:
    """Store partition ``i``: its coded responses (int32 item and worker codes, int16 label codes) and task ids."""
    item, worker, label = codes
    store.write(
        CODED,
        i,
        pa.table(
            {
                "item": pa.array(item.astype(np.int32)),
                "worker": pa.array(worker.astype(np.int32)),
                "label": pa.array(label.astype(np.int16)),
            }
        ),
    )
    store.write(TASKS, i, pa.table({"task": tasks}))


@dataclass(frozen=True)
class PartitionRef:
    """How a worker loads partition ``i`` of a store (the value passed to every per-partition task)."""

    store: Store
    index: int
    n_workers: int
    n_classes: int

    def load(self) -> Responses:
        t = self.store.read(CODED, self.index)
        return partition_responses(
            t.column("item").to_numpy(),
            t.column("worker").to_numpy(),
            t.column("label").to_numpy(),
            n_workers=self.n_workers,
            n_classes=self.n_classes,
        )

    def tasks(self) -> pa.Array:
        return self.store.read(TASKS, self.index).column("task").combine_chunks()


def as_responses(part: PartitionRef | Responses) -> Responses:
    """A partition's responses: loaded from the store, or already in memory (``cache='memory'``)."""
    return part if isinstance(part, Responses) else part.load()
