"""Work spread over worker processes with the results in the order of the tasks, so the
output is the same as in one process.

Workers are forked from a fork server that has imported runcompare but run nothing (forking
a process whose polars threads are running can deadlock); each worker's polars uses its share
of the cores. Few tasks are done in this process: starting workers costs more than they save.
On a Dask cluster (``scheduler``) every worker reads the paths it is given, so they must be
paths the workers see (a shared filesystem); the runs come back to this process.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any, TypeVar

from .errors import InputError

__all__ = ["MIN_TASKS", "cores", "run_all", "workers_for"]

T = TypeVar("T")
R = TypeVar("R")

#: Fewer tasks than this per worker are not worth a worker process.
MIN_TASKS = 8


def cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def workers_for(tasks: int, workers: int | None = None) -> int:
    """Worker processes for ``tasks`` tasks: ``workers`` when given (1: none), else one per
    core while each gets at least :data:`MIN_TASKS`.

    >>> workers_for(5), workers_for(400, 1), workers_for(3, 4)
    (1, 1, 3)
    """
    if workers is not None:
        return max(1, min(workers, tasks))
    return max(1, min(cores(), tasks // MIN_TASKS))


def run_all(func: Callable[[T], R], tasks: Sequence[T], *, workers: int = 1,
            progress: Callable[[int], None] | None = None,
            scheduler: str | None = None) -> list[R]:
    """``[func(task) for task in tasks]``, in ``workers`` processes when more than one, or on
    the Dask cluster whose scheduler is at ``scheduler`` (``tcp://host:8786``; the optional
    ``dask`` extra); ``progress(done)`` is called before the first result and as they come.

    ``func`` and the tasks must pickle (a module-level function, plain data and frames).
    """
    if progress is not None:
        progress(0)
    if scheduler is not None:
        return _on_cluster(func, tasks, scheduler, progress)
    if workers <= 1 or len(tasks) < 2:
        out = []
        for done, task in enumerate(tasks, 1):
            out.append(func(task))
            if progress is not None:
                progress(done)
        return out
    context = _context()
    chunk = max(1, len(tasks) // (workers * 8))
    with ProcessPoolExecutor(workers, mp_context=context, initializer=_share,
                             initargs=(max(1, cores() // workers),)) as pool:
        out = []
        for done, result in enumerate(pool.map(func, tasks, chunksize=chunk), 1):
            out.append(result)
            if progress is not None:
                progress(done)
        return out


def _on_cluster(func: Callable[[T], R], tasks: Sequence[T], scheduler: str,
                progress: Callable[[int], None] | None) -> list[R]:
    """The tasks on a Dask cluster, the results gathered in task order (an error a task
    raised is raised here)."""
    try:
        from distributed import Client, as_completed
    except ImportError as exc:
        raise InputError("--scheduler needs Dask's distributed scheduler; install the dask "
                         "extra: pip install 'runcompare[dask]'") from exc
    try:
        client = Client(scheduler, timeout="5s", set_as_default=False)
    except (OSError, TimeoutError, ValueError) as exc:
        raise InputError(f"--scheduler {scheduler}: no Dask scheduler answers there ({exc}); "
                         "start one (`dask scheduler`) or leave out --scheduler") from exc
    with client:
        futures = client.map(func, list(tasks), pure=False)
        if progress is not None:
            for done, _ in enumerate(as_completed(futures), 1):
                progress(done)
        return client.gather(futures)


def _context() -> Any:
    """A fork server that has imported the readers (so a worker starts in milliseconds), or
    fresh interpreters where there is no fork server."""
    try:
        context = multiprocessing.get_context("forkserver")
    except ValueError:  # pragma: no cover - Windows
        return multiprocessing.get_context("spawn")
    context.set_forkserver_preload(["runcompare.load"])
    return context


def _share(threads: int) -> None:
    """Each worker's polars on its share of the cores (read when its thread pool starts)."""
    os.environ.setdefault("POLARS_MAX_THREADS", str(threads))
