"""Work spread over worker processes with the results in the order of the tasks, so the
output is the same as in one process.

Workers are forked from a fork server that has imported runcompare but run nothing (forking
a process whose polars threads are running can deadlock); each worker's polars uses its share
of the cores. Few tasks are done in this process: starting workers costs more than they save.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any, TypeVar

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
            progress: Callable[[int], None] | None = None) -> list[R]:
    """``[func(task) for task in tasks]``, in ``workers`` processes when more than one;
    ``progress(done)`` is called before the first result and after each one in task order.

    ``func`` and the tasks must pickle (a module-level function, plain data and frames).
    """
    if progress is not None:
        progress(0)
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
