"""Work spread over worker processes with the results in the order of the tasks, so the
output is the same as in one process.

Workers are forked from a process that has imported runcompare but run no polars query:
forking a process whose polars threads are running can deadlock the child, which finds their
pool but not the threads. :func:`start_workers`, called before the tasks are found, forks them
from this process when it is still in that state (only the threads polars' and numpy's
imports start, :func:`_forkable`): a worker then starts in a few milliseconds and holds the
modules this process has. Otherwise they come from a fork server that has imported the
readers and run nothing; starting it costs an interpreter and its imports (about half a
second of the other core), and later reads fork their workers from the one started. This
process works too: a thread hands chunks of the tasks to the pool from the front while this
process takes them from the back, and no core waits for the workers to start. Each chunk is
a share of the tasks not yet taken (:func:`chunk_size`), so they shrink as the work runs out
and no process is left with a long chunk while the others wait. Few tasks are all done here:
starting workers costs more than they save.
On a Dask cluster (``scheduler``) every worker reads the paths it is given, so they must be
paths the workers see (a shared filesystem); the runs come back to this process.
"""

from __future__ import annotations

import functools
import gc
import multiprocessing
import os
import threading
import warnings
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, wait
from typing import TYPE_CHECKING, Any, TypeVar

from .errors import InputError

if TYPE_CHECKING:
    from concurrent.futures import ProcessPoolExecutor

__all__ = ["MANY", "MIN_TASKS", "chunk_size", "cores", "run_all", "start_workers", "stop_workers",
           "workers_for"]

T = TypeVar("T")
R = TypeVar("R")

#: Fewer tasks than this per worker are not worth a worker process.
MIN_TASKS = 8

#: The threads a process has once polars and numpy are imported, before any polars query
#: (by name; OpenBLAS's take the process's own): what :func:`_forkable` allows beside this
#: one. jemalloc's background threads are remade in a child (its fork handlers), and the
#: out-of-core cleaner is not needed there; a query starts polars' pool ("polars-0", ...)
#: and its async runtime ("tokio-rt-worker"), which a child would find without threads.
_IMPORT_THREADS = ("jemalloc_bg_thd", "polars-ooc-clea")

#: The tasks that :func:`run_all` hands ``many`` at a time in this process (without workers):
#: as many as the loader's ``many`` takes together (``load.schedule.TOGETHER``), progress
#: told after each.
MANY = 8

#: The pool :func:`start_workers` forked, with its worker count, until :func:`run_all` or
#: :func:`stop_workers` takes it.
_forked: list[tuple[int, ProcessPoolExecutor]] = []


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


def start_workers(tasks: int, workers: int | None = None) -> None:
    """Start the workers of ``tasks`` tasks, when there will be workers (:func:`workers_for`),
    while this process finds the tasks: forked from it now when it has run no polars query
    (:func:`_forkable`; :func:`run_all` then uses them, and :func:`stop_workers` ends them
    when it does not), else the fork server they come from, so that its interpreter and
    imports (about half a second of the other core) run meanwhile; :func:`run_all` starts it
    otherwise. Nothing where there is neither."""
    count = workers_for(tasks, workers)
    if count < 2:
        return
    if _forkable() and _fork_pool(count):
        return
    if _context().get_start_method() == "forkserver":
        from multiprocessing import forkserver

        forkserver.ensure_running()


def _fork_pool(count: int) -> bool:
    """Fork the ``count - 1`` workers of a pool from this process now, kept for
    :func:`run_all`; False (and none kept) when the pool did not start them all at once, as a
    pool that forks does at its first task (a later fork would find polars' threads)."""
    from concurrent.futures import ProcessPoolExecutor

    stop_workers()
    before = set(multiprocessing.active_children())
    pool = ProcessPoolExecutor(count - 1, mp_context=multiprocessing.get_context("fork"),
                               initializer=_forked_worker, initargs=(max(1, cores() // count),))
    with warnings.catch_warnings():  # Python 3.12+ warns of any thread, those allowed too
        warnings.simplefilter("ignore", DeprecationWarning)
        pool.submit(int)
    if len(set(multiprocessing.active_children()) - before) < count - 1:
        pool.shutdown(cancel_futures=True)
        return False
    _forked.append((count, pool))
    return True


def stop_workers() -> None:
    """End the workers :func:`start_workers` forked that no :func:`run_all` has used."""
    while _forked:
        _forked.pop()[1].shutdown(cancel_futures=True)


def _forkable() -> bool:
    """Whether this process may fork its workers: on Linux, with no thread but this one
    among Python's and none among the process's but those of :data:`_IMPORT_THREADS` and
    OpenBLAS's (named as the process is)."""
    if threading.active_count() != 1 or "fork" not in multiprocessing.get_all_start_methods():
        return False
    try:
        with open("/proc/self/comm", encoding="utf-8") as f:
            allowed = (f.read().strip(), *_IMPORT_THREADS)
        names = []
        for thread in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{thread}/comm", encoding="utf-8") as f:
                names.append(f.read().strip())
    except OSError:  # not Linux, or a thread ended as it was looked at
        return False
    return all(name in allowed for name in names)


def _forked_worker(threads: int) -> None:
    """A worker forked from the reading process: what it holds moved out of the garbage
    collector's reach (as the fork server does, :mod:`runcompare._forkserver`), and its
    polars on its share of the cores."""
    gc.freeze()
    _share(threads)


def run_all(func: Callable[[T], R], tasks: Sequence[T], *, workers: int = 1,
            progress: Callable[[int], None] | None = None,
            scheduler: str | None = None,
            many: Callable[[Sequence[T]], list[R]] | None = None) -> list[R]:
    """``[func(task) for task in tasks]``, in ``workers`` processes when more than one (this
    one and ``workers - 1`` others), or on
    the Dask cluster whose scheduler is at ``scheduler`` (``tcp://host:8786``; the optional
    ``dask`` extra); ``progress(done)`` is called before the first result and as they come.

    ``many(some)``, when given, is ``[func(task) for task in some]`` done faster (the tasks
    taken together): it does each chunk, and here :data:`MANY` tasks at a time (progress
    told after each); the cluster calls ``func``.

    ``func``, ``many`` and the tasks must pickle (module-level functions, plain data and
    frames).
    """
    if progress is not None:
        progress(0)
    if scheduler is not None:
        return _on_cluster(func, tasks, scheduler, progress)
    work = functools.partial(_chunk, func) if many is None else many
    if workers <= 1 or len(tasks) < 2:
        out: list[R] = []
        step = 1 if many is None else MANY
        for first in range(0, len(tasks), step):
            out += work(tasks[first:first + step])
            if progress is not None:
                for done in range(first + 1, len(out) + 1):
                    progress(done)
        return out
    return _shared(work, tasks, workers, progress)


def chunk_size(left: int, workers: int) -> int:
    """The tasks one chunk takes when ``left`` are not yet taken: an eighth of each worker's
    share (guided self-scheduling: large chunks while there is much to do, one task at a time
    at the end, so the last chunk ends about when the others do).

    >>> [chunk_size(left, 2) for left in (1000, 100, 15, 1)]
    [62, 6, 1, 1]
    """
    return max(1, left // (workers * 8))


def _shared(work: Callable[[Sequence[T]], list[R]], tasks: Sequence[T], workers: int,
            progress: Callable[[int], None] | None) -> list[R]:
    """The tasks in chunks, done by ``workers - 1`` pool processes (from the front) and this
    one (from the back); the results in task order."""
    from concurrent.futures import ProcessPoolExecutor  # 20 ms to import: only for a pool

    forked = _forked.pop() if _forked else None
    if forked is not None and forked[0] != workers:
        forked[1].shutdown(cancel_futures=True)
        forked = None
    left = [0, len(tasks)]  # the tasks not yet taken: tasks[left[0]:left[1]]
    lock = threading.Lock()
    results: dict[int, list[R]] = {}
    failed: list[BaseException] = []

    def take(front: bool) -> range | None:
        with lock:
            lo, hi = left
            if failed or lo >= hi:
                return None
            size = chunk_size(hi - lo, workers)
            left[:] = [lo + size, hi] if front else [lo, hi - size]
            return range(lo, lo + size) if front else range(hi - size, hi)

    def feed() -> None:  # in a thread: starting the pool waits for the fork server
        try:
            with forked[1] if forked is not None else ProcessPoolExecutor(
                    workers - 1, mp_context=_context(), initializer=_share,
                    initargs=(max(1, cores() // workers),)) as pool:
                running: dict[Future[list[R]], int] = {}
                while True:
                    while len(running) < 2 * (workers - 1):
                        chunk = take(front=True)
                        if chunk is None:
                            break
                        running[pool.submit(work, tasks[chunk.start:chunk.stop])] = \
                            chunk.start
                    if not running:
                        return
                    finished, _ = wait(running, return_when=FIRST_COMPLETED)
                    for future in finished:
                        done = future.result()
                        with lock:
                            results[running.pop(future)] = done
        except BaseException as exc:  # noqa: BLE001 - raised in the calling thread below
            with lock:
                failed.append(exc)

    feeder = threading.Thread(target=feed, name="runcompare-workers", daemon=True)
    feeder.start()
    told = 0
    try:
        while (chunk := take(front=False)) is not None:
            done = work(tasks[chunk.start:chunk.stop])
            with lock:
                results[chunk.start] = done
            told = _tell(progress, told, results, lock)
    except BaseException:
        with lock:
            left[0] = left[1]
        raise
    finally:
        while feeder.is_alive():
            feeder.join(0.05)
            told = _tell(progress, told, results, lock)
    if failed:
        raise failed[0]
    return [result for first in sorted(results) for result in results[first]]


def _chunk(func: Callable[[T], R], tasks: Sequence[T]) -> list[R]:
    return [func(task) for task in tasks]


def _tell(progress: Callable[[int], None] | None, told: int, results: dict[int, list[Any]],
          lock: threading.Lock) -> int:
    """``progress`` for each task done since ``told`` were; the number done."""
    with lock:
        done = sum(len(chunk) for chunk in results.values())
    if progress is not None:
        for count in range(told + 1, done + 1):
            progress(count)
    return done


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
        client = Client(scheduler, timeout="5s",  # type: ignore[no-untyped-call]
                        set_as_default=False)  # (distributed's API is not typed)
    except (OSError, TimeoutError, ValueError) as exc:
        raise InputError(f"--scheduler {scheduler}: no Dask scheduler answers there ({exc}); "
                         "start one (`dask scheduler`) or leave out --scheduler") from exc
    with client:
        futures = client.map(func, list(tasks), pure=False)
        if progress is not None:
            for done, _ in enumerate(as_completed(futures), 1):  # type: ignore[no-untyped-call]
                progress(done)
        gathered: list[R] = client.gather(futures)  # type: ignore[no-untyped-call]
        return gathered


def _context() -> Any:
    """A fork server that has imported the readers (so a worker starts in milliseconds),
    with numpy's BLAS on one thread (:mod:`runcompare._forkserver_env`), and is made ready to
    fork them (:mod:`runcompare._forkserver`), or fresh interpreters where there is no fork
    server."""
    try:
        context = multiprocessing.get_context("forkserver")
    except ValueError:  # pragma: no cover - Windows
        return multiprocessing.get_context("spawn")
    context.set_forkserver_preload(["runcompare._forkserver_env", "runcompare.load",
                                     "runcompare._forkserver"])
    return context


def _share(threads: int) -> None:
    """Each worker's polars on its share of the cores (read when its thread pool starts)."""
    os.environ.setdefault("POLARS_MAX_THREADS", str(threads))
