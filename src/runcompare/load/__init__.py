"""Read runs: detect the sources under a path, merge their facts, resolve the batch hierarchy
and put every point on every axis.

The public functions (:func:`load`, :func:`load_many`, :func:`load_parts`, :func:`read_runs`)
take the reading options as one :class:`~runcompare.options.ReadOptions`, or as its keywords;
the work is done in three modules: :mod:`.roots` (which runs the paths hold and what each is
called), :mod:`.schedule` (one task per run, here, in workers or on a cluster, with the
cache) and :mod:`.build` (one run from its sources' readings).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from ..errors import InputError, UsageError
from ..model import Finding, Run
from ..options import ReadOptions, Settings
from ..parallel import run_all, start_workers, stop_workers, workers_for
from ..remote import remote_url
from ..resolve import parse_settings, user_fact
from ..sources.config import config_facts, config_hparams
from .build import Given
from .roots import (
    check_addressed,
    expand,
    folder_name,
    given_root,
    local,
    mark_remote,
    runs_likely,
    unique_names,
)
from .schedule import Task, final_run, keep, stage, stage_many, with_stored

__all__ = ["ReadOptions", "expand", "load", "load_many", "load_parts", "read_runs"]


def load(path: str | Path, *, name: str | None = None, source: str | None = None,
         settings: Settings = (), duplicates: str = "keep-last", cache: bool = True,
         progress: Callable[[int, int, str], None] | None = None,
         config: str | Path | None = None, pattern: str | None = None, **facts: Any) -> Run:
    """Read ``path`` as one run (a resumed run's legs, or a folder's sources, together); it
    takes what :func:`load_many` takes, and ``name``.

    ``facts`` (e.g. ``seq_len=1024``) override what the logs say. ::

        run = load("sample_logs/attn", seq_len=64)
        run.frame(x="tokens").filter(metric="train/loss")
    """
    if name is not None:
        facts = {**facts, "name": name}
    options = ReadOptions(source=source, settings=settings, duplicates=duplicates, cache=cache,
                          progress=progress, config=config, pattern=pattern)
    return _load_runs([path], options, given_by="load()", facts=facts, one_run=True)[0][0]


def load_many(paths: Iterable[str | Path], *, source: str | None = None,
              settings: Settings = (), duplicates: str = "keep-last", cache: bool = True,
              progress: Callable[[int, int, str], None] | None = None,
              config: str | Path | None = None, pattern: str | None = None,
              workers: int | None = 1, scheduler: str | None = None,
              **facts: Any) -> list[Run]:
    """Read the runs under ``paths`` (a folder of several runs gives one run per subfolder).

    ``settings`` are ``--set`` strings (``KEY=VALUE`` for every run, ``RUN:KEY=VALUE`` for the
    run named RUN), or a mapping of ``KEY`` or ``RUN:KEY`` to a value, a number or a string
    (``{"seq_len": 64, "attn:grad_accum": 8}``), checked as ``--set`` checks it; ``facts``
    apply to every run; ``config`` is a training config (an Axolotl YAML, ``--config FILE``)
    whose facts apply to every run, above what the logs say;
    ``pattern`` is a regular expression with named groups (a ``step`` or ``iter`` group) that
    reads plain-text logs no other source knows (``--pattern``; implies ``source="text"``);
    ``progress(done, total, name)`` is called before the first run is read and as each is
    done. ``workers`` processes read the runs (None: one per core once there are
    :data:`~runcompare.parallel.MIN_TASKS` runs per core, as the command line does; the
    default 1 reads them in this process), with the same runs in the same order as one
    process reads them. Workers forked from the fork server (once this process has run a
    polars query; :mod:`~runcompare.parallel`) import the main module again, so a script that
    asks for them keeps its work under ``if __name__ == "__main__":``. ``scheduler`` (a Dask
    scheduler's address) reads them on that cluster instead, with the same result.
    :func:`read_runs` takes the same options as one :class:`ReadOptions`.
    """
    options = ReadOptions(source=source, settings=settings, duplicates=duplicates, cache=cache,
                          progress=progress, config=config, pattern=pattern, workers=workers,
                          scheduler=scheduler)
    return [run for run, _ in _load_runs(paths, options, given_by="load_many()", facts=facts)]


def read_runs(paths: Iterable[str | Path], options: ReadOptions) -> list[Run]:
    """:func:`load_many` with its options as one object (what the command line reads with)."""
    return [run for run, _ in _load_runs(paths, options)]


def load_parts(paths: Iterable[str | Path], parts: str | Path,
               options: ReadOptions) -> list[tuple[Run, str]]:
    """:func:`read_runs` with each run's points written to a file in ``parts`` by whoever
    reads the run (a worker, on a Dask cluster) and left out of the run: each run, and where
    its points are. An export's partitions, written where they are read; ``parts`` may be a
    URL (a prefix in a bucket)."""
    return [(run, str(part)) for run, part in _load_runs(paths, options, parts=parts)]


def _load_runs(paths: Iterable[str | Path], options: ReadOptions, *,
               given_by: str = "load_many()", facts: Mapping[str, Any] | None = None,
               one_run: bool = False, parts: str | Path | None = None
               ) -> list[tuple[Run, str | None]]:
    """The runs under ``paths``, each with where its points were written (None without
    ``parts``); ``given_by`` is the source of the ``facts`` given as keywords;
    ``one_run`` reads each path as one run (:func:`load`). With ``parts`` (a folder the
    workers see, or a prefix in a bucket), each run's points are written there by whoever
    reads it, as ``<index>.parquet``, and the run comes back without them."""
    per_run = parse_settings(options.settings)
    common = {key: user_fact(key, value, source=given_by) for key, value in (facts or {}).items()}
    common.update(per_run.pop(None, {}))
    config = None if options.config is None else Path(options.config)
    stated = config_facts(config) if config is not None else {}
    stated_hparams = config_hparams(config) if config is not None else {}
    mirrors: dict[Path, str] = {}
    given = [local(path, mirrors) for path in paths]
    if options.scheduler is None and options.pattern is None and not one_run:
        start_workers(sum(runs_likely(path) for path in given), options.workers)
    try:
        roots = [root for path in given for root in (
            [given_root(path)] if options.pattern is not None
            else [(path, folder_name(path), False)] if one_run
            else expand(path, source=options.source))]
        shown = unique_names([name for _, name, _ in roots], [root for root, _, _ in roots])
        check_addressed(per_run, [name for _, name, _ in roots], shown)
        tasks = [Task(root, name, from_source, unique,
                      Given({**common, **per_run.get(name, {}), **per_run.get(unique, {})},
                            stated, stated_hparams, options.duplicates),
                      options.source, options.pattern, options.cache, len(roots) == 1,
                      None if parts is None else _within(parts, f"{index:06d}.parquet"))
                 for index, ((root, name, from_source), unique) in enumerate(zip(roots, shown))]
        if options.scheduler is None:
            tasks = with_stored(tasks)
        progress = options.progress
        done = run_all(stage, tasks, workers=workers_for(len(tasks), options.workers),
                       scheduler=options.scheduler, many=stage_many,
                       progress=None if progress is None else lambda n: progress(
                           n, len(tasks), tasks[min(n, len(tasks) - 1)].unique))
    finally:
        stop_workers()  # those started for runs that were not found, or not read in workers
    staged = [(task, read) for task, read in zip(tasks, done) if not isinstance(read, Finding)]
    keep(staged)
    skipped = [read for read in done if isinstance(read, Finding)]
    if not staged:
        raise InputError("no run could be read: " + "; ".join(f.message for f in skipped))
    names = unique_names([read.base for _, read in staged], [task.root for task, _ in staged])
    unknown = {run for run in per_run if run is not None} - {name for _, name, _ in roots} \
        - set(names) - set(shown)
    if unknown:
        raise UsageError(f"--set names no run called {', '.join(sorted(unknown))}; the runs "
                         f"are {', '.join(names)}")
    runs = mark_remote([final_run(task, read, name, skipped)
                        for (task, read), name in zip(staged, names)], mirrors)
    return [(run, task.part) for run, (task, _) in zip(runs, staged)]


def _within(parts: str | Path, name: str) -> str:
    """``name`` in the folder ``parts`` (a URL keeps its ``//``, which a Path folds)."""
    return f"{parts}/{name}" if remote_url(parts) is not None else str(Path(parts) / name)
