"""Running the engine's passes: the scheduler to use, the map over partitions and the tree reduction.

Every pass is a map of one kernel over the partitions followed by a tree reduction of the partial statistics
(``split_every`` at a time, so no node ever holds more than that many partial results), computed with
``dask.compute`` under the chosen scheduler.  Small values every task needs (the log-confusion and priors of the
current iteration, the global worker and class index) enter the graph once as one key, so each worker fetches
them once per pass: the broadcast.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from fusion_core.engines.dask.kernels import total
from fusion_core.errors import UserInputError

SPLIT_EVERY = 8
LOCAL_SCHEDULERS = ("threads", "processes", "synchronous", "sync", "single-threaded")


def require_dask() -> None:
    """Raise a clear :class:`UserInputError` when the optional dependencies are missing."""
    try:
        import dask.dataframe  # noqa: F401
    except ImportError:
        raise UserInputError(
            "the Dask engine needs dask: install it with `pip install 'fusion_core[dask]'` "
            "(dask[dataframe] and distributed)."
        ) from None


@contextlib.contextmanager
def scheduler(spec: Any = None) -> Iterator[None]:
    """Run the passes inside the block on ``spec``: None (dask's default: the active ``distributed.Client`` if
    there is one, else threads), a ``distributed.Client``, a scheduler address (``tcp://host:8786``; a client is
    opened for the block and closed after) or a local scheduler name ('threads', 'processes', 'synchronous')."""
    import dask

    if spec is None:
        yield
        return
    if isinstance(spec, str) and spec in LOCAL_SCHEDULERS:
        # a local scheduler shuffles by tasks even when a distributed Client is active in the process
        with dask.config.set({"scheduler": spec, "dataframe.shuffle.method": "tasks"}):
            yield
        return
    if isinstance(spec, str):
        from distributed import Client
        from distributed.comm.addressing import get_address_host_port, parse_address

        try:
            if parse_address(spec)[0] in ("tcp", "tls", "ws", "wss"):  # host and port checked first: a Client that
                get_address_host_port(spec)  # failed on a malformed address hangs for a minute at exit

            client = Client(spec, set_as_default=False, timeout="30s")
        except (OSError, ValueError, TypeError) as exc:  # unreachable, or not an address ('missing port number')
            raise UserInputError(
                f"could not reach the Dask scheduler at {spec!r} ({exc}); check the address and that the "
                "scheduler is running."
            ) from None
        try:
            with dask.config.set(scheduler=client):
                yield
        finally:
            client.close()
        return
    if type(spec).__name__ == "Client":
        with dask.config.set(scheduler=spec):
            yield
        return
    raise UserInputError(
        f"scheduler must be None, a distributed Client, a scheduler address such as 'tcp://host:8786' or one of "
        f"{', '.join(LOCAL_SCHEDULERS)}; got {type(spec).__name__}."
    )


def active_client() -> Any:
    """The distributed client the passes will use, or None (a local dask scheduler)."""
    import dask

    sched = dask.config.get("scheduler", None)
    if type(sched).__name__ == "Client":
        return sched
    if isinstance(sched, str) and sched in LOCAL_SCHEDULERS:
        return None
    try:
        from distributed import default_client
    except ImportError:
        return None
    try:
        return default_client()
    except ValueError:
        return None


def cluster_is_local(client: Any) -> bool:
    """Whether every worker of ``client`` runs on this machine (so a local scratch directory is shared)."""
    import socket

    here = {"127.0.0.1", "localhost", "::1", socket.gethostname()}
    with contextlib.suppress(OSError):
        here.add(socket.gethostbyname(socket.gethostname()))
    workers = client.scheduler_info(n_workers=-1).get("workers", {})
    for address in workers:
        proto, _, rest = str(address).partition("://")
        host = rest.rsplit(":", 1)[0].strip("[]")
        if proto != "inproc" and host not in here:
            return False
    return True


def broadcast(value: Any) -> Any:
    """``value`` as one graph key shared by every task of a pass."""
    from dask import delayed

    return delayed(value, pure=True, traverse=False)


def tree_sum(parts: Sequence[Any], split_every: int = SPLIT_EVERY) -> Any:
    """The sum of delayed partial statistics as a tree of ``split_every``-way additions."""
    from dask import delayed

    level = list(parts)
    if not level:
        raise ValueError("nothing to reduce")
    add = delayed(total, pure=True)
    while len(level) > 1:
        level = [add(level[i : i + split_every]) for i in range(0, len(level), split_every)]
    return level[0]


def map_reduce(kernel: Callable[..., Any], sources: Sequence[Any], *args: Any) -> Any:
    """Apply ``kernel(source, *args)`` to every partition and return the tree-reduced sum, computed."""
    import dask
    from dask import delayed

    fn = delayed(kernel, pure=True)
    shared = [broadcast(a) for a in args]
    return dask.compute(tree_sum([fn(s, *shared) for s in sources]))[0]
