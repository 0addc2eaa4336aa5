"""Read runs: detect the sources under a path, merge their facts, resolve the batch hierarchy
and put every point on every axis."""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from .axes import axis_sources, normalize
from .cache import (
    SOURCES_FROM,
    Stored,
    built_entry,
    built_key,
    files_listing,
    keep_built,
    points_stream,
    read_built,
    read_cached,
    stored_runs,
)
from .errors import InputError, MissingInfoError, NoLogsFoundError, RuncompareError, UsageError
from .legs import leg_numbers, resolve_legs
from .model import Fact, Finding, Findings, Leg, RawLog, Run
from .parallel import run_all, workers_for
from .remote import localize, origin, remote_url
from .resolve import (
    SIDECAR,
    Settings,
    merge_facts,
    parse_settings,
    read_sidecar,
    resolve_batch,
    user_fact,
)
from .sources import REGISTRY, Format, detect, unreadable
from .sources.codecs.files import one_look
from .sources.config import config_facts, config_hparams, merge_hparams

__all__ = ["expand", "load", "load_many"]


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
    return _load_runs([path], given_by="load()", source=source, settings=settings,
                      duplicates=duplicates, cache=cache, progress=progress, config=config,
                      pattern=pattern, workers=1, scheduler=None, facts=facts,
                      expand_roots=False)[0][0]


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
    process reads them. Worker processes import the main module again, so a script that asks
    for them keeps its work under ``if __name__ == "__main__":``. ``scheduler`` (a Dask
    scheduler's address) reads them on that cluster instead, with the same result.
    """
    return [run for run, _ in _load_runs(
        paths, given_by="load_many()", source=source, settings=settings, duplicates=duplicates,
        cache=cache, progress=progress, config=config, pattern=pattern, workers=workers,
        scheduler=scheduler, facts=facts)]


def load_parts(paths: Iterable[str | Path], parts: str | Path,
               **options: Any) -> list[tuple[Run, str]]:
    """:func:`load_many` (``options``: every keyword of it but the facts, as the command line
    gives them) with each run's points written to a file in ``parts`` by whoever reads the
    run (a worker, on a Dask cluster) and left out of the run: each run, and where its points
    are. An export's partitions, written where they are read; ``parts`` may be a URL (a
    prefix in a bucket)."""
    return [(run, str(part)) for run, part in
            _load_runs(paths, given_by="load_many()", facts={}, parts=parts, **options)]


def _load_runs(paths: Iterable[str | Path], *, given_by: str, source: str | None,
               settings: Settings, duplicates: str, cache: bool,
               progress: Callable[[int, int, str], None] | None,
               config: str | Path | None, pattern: str | None, workers: int | None,
               scheduler: str | None, facts: Mapping[str, Any],
               expand_roots: bool = True, parts: str | Path | None = None
               ) -> list[tuple[Run, str | None]]:
    """:func:`load_many`, each run with where its points were written (None without
    ``parts``); ``given_by`` is the source of the facts given as keywords;
    ``expand_roots=False`` reads each path as one run (:func:`load`). With ``parts`` (a
    folder the workers see, or a prefix in a bucket), each run's points are written there by
    whoever reads it, as ``<index>.parquet``, and the run comes back without them."""
    if pattern is not None and source not in (None, "text"):
        raise UsageError(f"--pattern reads with the text source, not {source!r}")
    per_run = parse_settings(settings)
    common = {key: user_fact(key, value, source=given_by) for key, value in facts.items()}
    common.update(per_run.pop(None, {}))
    stated = config_facts(Path(config)) if config is not None else {}
    settings_of = config_hparams(Path(config)) if config is not None else {}
    mirrors: dict[Path, str] = {}
    local = [_local(path, mirrors) for path in paths]
    roots = [root for path in local for root in (
        [_given(path)] if pattern is not None else expand(path, source=source)
        if expand_roots else [(path, _folder_name(path), False)])]
    shown = _unique([name for _, name, _ in roots], [root for root, _, _ in roots])
    _check_addressed(per_run, [name for _, name, _ in roots], shown)
    tasks = [_Task(root, name, from_source, unique,
                   {**common, **per_run.get(name, {}), **per_run.get(unique, {})},
                   source, pattern, cache, duplicates, stated, settings_of, len(roots) == 1,
                   None if parts is None else str(_within(parts, f"{index:06d}.parquet")))
             for index, ((root, name, from_source), unique) in enumerate(zip(roots, shown))]
    if scheduler is None:
        tasks = _with_stored(tasks)
    done = run_all(_stage, tasks, workers=workers_for(len(tasks), workers), scheduler=scheduler,
                   progress=None if progress is None else lambda n: progress(
                       n, len(tasks), tasks[min(n, len(tasks) - 1)].unique))
    staged = [(task, read) for task, read in zip(tasks, done) if not isinstance(read, Finding)]
    _keep(staged)
    skipped = [read for read in done if isinstance(read, Finding)]
    if not staged:
        raise InputError("no run could be read: " + "; ".join(f.message for f in skipped))
    names = _unique([read.base for _, read in staged], [task.root for task, _ in staged])
    unknown = {run for run in per_run if run is not None} - {name for _, name, _ in roots} \
        - set(names) - set(shown)
    if unknown:
        raise UsageError(f"--set names no run called {', '.join(sorted(unknown))}; the runs "
                         f"are {', '.join(names)}")
    runs = _remote([_final(task, read, name, skipped)
                    for (task, read), name in zip(staged, names)], mirrors)
    return [(run, task.part) for run, (task, _) in zip(runs, staged)]


def _within(parts: str | Path, name: str) -> str | Path:
    """``name`` in the folder ``parts``; a URL stays a string (a Path folds its ``//``)."""
    return f"{parts}/{name}" if remote_url(parts) is not None else Path(parts) / name


def _local(path: str | Path, mirrors: dict[Path, str]) -> Path:
    """``path``, or the local mirror of the remote run it names (noted in ``mirrors``)."""
    url = remote_url(path)
    if url is None:
        return Path(path)
    local = localize(url)
    mirrors[local] = url
    return local


def _remote(runs: list[Run], mirrors: dict[Path, str]) -> list[Run]:
    """Each run read from a mirror carries the URL it came from."""
    for run in runs if mirrors else ():
        run.origin = origin(run.path, mirrors)
    return runs


@dataclass(frozen=True)
class _Task:
    """One run root to read, with everything a worker process needs to read it."""

    root: Path
    name: str
    from_source: bool
    unique: str
    user: dict[str, Fact[Any]]
    source: str | None
    pattern: str | None
    cache: bool
    duplicates: str
    stated: dict[str, Fact[Any]]
    stated_hparams: dict[str, Fact[Any]]
    alone: bool
    #: Where the worker writes the run's points as a parquet file (an export's partition
    #: before it is named), sending back the run without them; None: the run comes back whole.
    part: str | None = None
    #: The whole run's key in the cache (None: it is not looked up or kept), the folder whose
    #: packs keep it (its root's, resolved), and what they keep for it.
    key: str | None = None
    kept_in: Path | None = None
    stored: Stored | None = None


@dataclass
class _Read:
    """A run read and built under ``name`` (its name made unique among the runs given, when
    no source or user names it), or the error its build raised; ``base`` is its name before
    it is made unique, ``split`` where the skipped runs' findings go in its findings."""

    base: str
    name: str
    run: Run | None
    error: RuncompareError | None
    split: int
    #: The run's points as the zstd IPC stream the cache will keep or read (None: not made).
    stream: bytes | None = None
    #: The run's metadata for the cache to keep with ``stream`` (None: it is not kept).
    fresh: bytes | None = None

    def __getstate__(self) -> dict[str, Any]:
        """Sent from a worker with the points as a zstd-compressed Arrow IPC stream (the
        cache's, when it keeps or read one): a twentieth of the bytes of a pickled frame,
        written and read in about half a millisecond."""
        state = dict(self.__dict__)
        state.pop("stream")
        if self.run is not None:
            state["run"] = replace(self.run, scalars=pl.DataFrame())
            state["points"] = points_stream(self.run.scalars) if self.stream is None \
                else self.stream
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        points = state.pop("points", None)
        self.__dict__.update(state, stream=points if state.get("fresh") else None)
        if points is not None and self.run is not None:
            self.run.scalars = pl.read_ipc_stream(io.BytesIO(points))


def _stage(task: _Task) -> _Read | Finding:
    """Read one run (in a worker process or here): its run, or the run-skipped finding of a
    run that cannot be read (raised when it is the only one). A run built before from the
    same files and settings comes from the cache whole."""
    formats = _formats(task)
    if isinstance(formats, Finding):
        return formats
    listing = _listing(task, formats) if task.key is not None else None
    found = None if listing is None else read_built(task.stored, listing, task.root)
    if found is not None:
        run, (base, split), stream = found
        done = _Read(base, run.name, run, None, split, stream)
    else:
        read = _raws(task, formats)
        if isinstance(read, Finding):
            return read
        raws, findings = read
        named = (task.user.get("name") or Fact(None, "")).value or (
            _chosen(raws).name if task.from_source else None)
        done = _built(task, named or task.name, named or task.unique, raws, findings)
        if listing is not None and done.run is not None and _listing(task, formats) == listing:
            kept = built_entry(listing, done.run, [done.base, done.split])
            if kept is not None:
                done.fresh, done.stream = kept
    if task.part is not None and done.run is not None:
        _write_part(task, done.run)
        done.stream = None  # the points left the run
    return done


def _write_part(task: _Task, run: Run) -> None:
    """The run's points written to the task's part file, and left out of the run."""
    from .export import write_part

    assert task.part is not None
    write_part(run.scalars, run.name, task.part)
    run.scalars = run.scalars.clear()


def _formats(task: _Task) -> dict[str, Format] | Finding:
    """The formats found at the task's root (the text source alone with ``--pattern``)."""
    try:
        return detect(task.root, source=task.source) if task.pattern is None else {
            "text": REGISTRY["text"]}
    except InputError as exc:
        return _skipped(task, exc)


def _skipped(task: _Task, exc: InputError) -> Finding:
    """The run-skipped finding of a run of several that cannot be read (one alone raises)."""
    if task.alone:
        raise exc
    return Finding("warning", "run-skipped", f"{task.unique} was not read ({exc}); the other "
                   "runs are compared without it")


def _listing(task: _Task, formats: Mapping[str, Format]) -> list[list[Any]] | None:
    """What a whole run's cache entry is checked against: every file its sources read, the
    runcompare.toml files its build reads (or their absence) and what was passed over."""
    folder = task.root if task.root.is_dir() else task.root.parent
    try:
        return [*files_listing([f for fmt in formats.values() for f in fmt.files_at(task.root)],
                               [folder / SIDECAR, folder.parent / SIDECAR]),
                ["passed-over", unreadable(task.root)]]
    except OSError:
        return None


def _with_stored(tasks: list[_Task]) -> list[_Task]:
    """The tasks read with the cache, each with its whole run's key, the folder whose packs
    keep it and what they keep for it (each folder's packs are read once)."""
    found: dict[Path, dict[str, Stored]] = {}
    out = []
    for task in tasks:
        if task.cache:
            folder = task.root.resolve().parent
            if folder not in found:
                found[folder] = stored_runs(folder)
            key = built_key(_task_key(task))
            task = replace(task, key=key, kept_in=folder, stored=found[folder].get(key))
        out.append(task)
    return out


def _keep(staged: list[tuple[_Task, _Read]]) -> None:
    """The runs built afresh kept in the cache: one new pack for each folder of them."""
    packs: dict[Path, dict[str, tuple[bytes, bytes]]] = {}
    for task, read in staged:
        if read.fresh is not None and read.stream is not None:
            assert task.key is not None and task.kept_in is not None
            packs.setdefault(task.kept_in, {})[task.key] = (read.fresh, read.stream)
            read.fresh = read.stream = None
    for folder, entries in packs.items():
        keep_built(folder, entries)


def _task_key(task: _Task) -> str:
    """Everything a build is given, as one string (a whole run's cache key)."""
    def facts(given: Mapping[str, Fact[Any]]) -> list[Any]:
        return sorted([k, f.value, f.source, f.kind] for k, f in given.items())

    return json.dumps([str(task.root), str(task.root.resolve()), task.name, task.from_source,
                       task.unique, facts(task.user), task.source, task.pattern,
                       task.duplicates, facts(task.stated), facts(task.stated_hparams),
                       task.alone], default=str)


def _raws(task: _Task, formats: Mapping[str, Format] | None = None
          ) -> tuple[list[RawLog], list[Finding]] | Finding:
    hints = {**_hints(task.root, task.user), **({"pattern": task.pattern} if task.pattern else {})}
    if formats is None:
        found = _formats(task)
        if isinstance(found, Finding):
            return found
        formats = found
    try:
        return _read_all(formats, task.root, task.cache, hints)
    except InputError as exc:  # one unreadable run of several: the others are compared
        return _skipped(task, exc)


def _built(task: _Task, base: str, name: str, raws: list[RawLog],
           findings: list[Finding]) -> _Read:
    split = len(findings)
    try:
        run = _build(task.root, name, task.user, raws, findings, task.duplicates, task.stated,
                     task.stated_hparams)
    except RuncompareError as exc:  # raised in load_many's order, after its own checks
        return _Read(base, name, None, exc, split)
    return _Read(base, name, run, None, split)


def _final(task: _Task, read: _Read, name: str, skipped: list[Finding]) -> Run:
    """The run under its final name (another than it was built under only when a source's
    names, or a run that could not be read, change which runs share a name: then it is read
    again here, from the cache), the skipped runs' warnings in its findings where a run read
    in one go has them."""
    if name != read.name:
        again = _raws(task)
        assert not isinstance(again, Finding)  # it was read a moment ago
        read = _built(task, read.base, name, *again)
        if task.part is not None and read.run is not None:  # the worker's part: another name
            _write_part(task, read.run)
    if read.error is not None:
        raise read.error
    assert read.run is not None
    read.run.findings[read.split:read.split] = skipped
    return read.run


def expand(path: Path, *, source: str | None = None) -> list[tuple[Path, str, bool]]:
    """The runs under ``path``: root, default name, and whether the source may name it.

    Every format found there names the run roots it sees (a format that cannot hold several
    runs reads ``path`` itself); a root inside another is part of it (an HF output dir's
    ``runs/`` TensorBoard logs). Two or more roots are that many runs, each named by its
    source (a W&B display name) or else after its subfolder; one is the run ``path`` is,
    named after its folder. A folder holding HF output dirs beside TensorBoard runs gives
    all of them.
    """
    with one_look():  # detection and the formats' roots: each folder looked at once
        formats = [f for f in detect(path, source=source).values() if not f.facts_only]
        roots = list(dict.fromkeys(root for fmt in formats
                                   for root in fmt.roots(path)))
    given = set(roots)
    outer = [root for root in roots if not any(parent in given for parent in root.parents)]
    if len(outer) < 2:
        return [(path, _folder_name(path), False)]
    return [(root, _relative_name(root, path), True) for root in outer]


def _given(path: Path) -> tuple[Path, str, bool]:
    """A path taken as one run as it is (``--pattern``: the text source reads what is there)."""
    if not path.exists():
        raise InputError(f"{path}: no such file or directory")
    return path, _folder_name(path), False


def _relative_name(root: Path, base: Path) -> str:
    try:
        return root.relative_to(base).as_posix()
    except ValueError:
        return root.name


def _unique(names: list[str], paths: list[Path]) -> list[str]:
    """Names made unique where runs share one: each prefixed with as many of its path's
    parent folders as it takes to tell them apart (``a/lightning_logs/version_0`` and
    ``b/lightning_logs/version_0``), which ``--set NAME:KEY=VALUE`` accepts as shown.

    >>> _unique(["v0", "v0", "x"], [Path("/p/a/logs/v0"), Path("/p/b/logs/v0"), Path("/x")])
    ['a/logs/v0', 'b/logs/v0', 'x']
    """
    out = list(names)
    sharing: dict[str, list[int]] = {}
    for i, name in enumerate(names):
        sharing.setdefault(name, []).append(i)
    for name, same in sharing.items():
        if len(same) < 2:
            continue
        parents = [paths[i].resolve().parents for i in same]
        for depth in range(1, max(len(p) for p in parents) + 1):
            tried = ["/".join([*(f.name for f in reversed(p[:depth])), name]) for p in parents]
            if len(set(tried)) == len(tried):
                break
        for i, unique in zip(same, tried):
            out[i] = unique
    return out


def _check_addressed(per_run: Mapping[str | None, Any], names: list[str],
                     shown: list[str]) -> None:
    """A ``--set RUN:...`` whose RUN several runs share is refused, naming them as shown."""
    for run in per_run:
        sharing = [unique for name, unique in zip(names, shown) if name == run and unique != run]
        if len(sharing) > 1:
            raise UsageError(f"--set {run}:... names {len(sharing)} runs; name one of them as "
                             f"shown: {', '.join(sharing)}")


def _folder_name(path: Path) -> str:
    path = path.resolve()
    folder = path.parent if path.is_file() else path
    if folder.name.startswith("checkpoint-") or folder.name == "last-checkpoint":
        folder = folder.parent
    return folder.name


def _chosen(raws: list[RawLog], duplicates: str = "all") -> RawLog:
    """The source whose points a run shows: a structured log before printed text (whose values
    are rounded), then the most points once restarts are resolved, then the preferred source;
    never a facts-only source (a config file beside the logs)."""
    with_points = [raw for raw in raws if not REGISTRY[raw.source].facts_only]
    if not with_points:
        raise NoLogsFoundError(f"{raws[0].path}: only a configuration ({raws[0].source}) was "
                               "found, no logged points; point runcompare at the run's logs")

    if len(with_points) == 1:
        return with_points[0]

    def rank(raw: RawLog) -> tuple[bool, bool, int]:
        kept = resolve_legs(raw.scalars, policy=duplicates, starts=raw.leg_starts)[0].height
        return (not _deferring(raw, with_points), not REGISTRY[raw.source].printed and kept > 0,
                kept)

    return max(with_points, key=rank)


def _deferring(raw: RawLog, raws: list[RawLog]) -> bool:
    """Whether another of ``raws`` with points is a format ``raw``'s format defers to."""
    wins = REGISTRY[raw.source].defers_to
    return any(other.source in wins and other.scalars.height for other in raws)


def _deferred(chosen: RawLog, raws: list[RawLog], run: str) -> list[Finding]:
    """The finding saying the points come from ``chosen`` rather than a copy of its log."""
    return [Finding("info", "source-deferred",
                    f"points from {chosen.source} ({', '.join(f.name for f in chosen.files[:1])}"
                    f"), not {raw.source} ({', '.join(f.name for f in raw.files[:1])}), which "
                    f"copies its log; pass --source {raw.source} to read that one", run)
            for raw in raws if raw is not chosen and chosen.source in
            REGISTRY[raw.source].defers_to]


def _sidecar(path: Path, name: str) -> list[dict[str, Fact[Any]]]:
    """runcompare.toml facts for run ``name`` in the run's folder, then in its parent."""
    folder = path if path.is_dir() else path.parent
    sidecars = [read_sidecar(f) for f in (folder, folder.parent)]
    return [s.get(key, {}) for s in sidecars for key in (name, None)]


def _hints(path: Path, user: Mapping[str, Fact[Any]]) -> dict[str, object]:
    """Values the user stated (``--set``, then runcompare.toml) that a source may need."""
    stated: dict[str, object] = {}
    for group in reversed([user, *_sidecar(path, _folder_name(path))]):
        stated.update({k: f.value for k, f in group.items() if k != "name"})
    return stated


def _build(path: Path, name: str, user: Mapping[str, Fact[Any]], raws: list[RawLog],
           findings: list[Finding], duplicates: str,
           stated: Mapping[str, Fact[Any]] | None = None,
           stated_hparams: Mapping[str, Fact[Any]] | None = None) -> Run:
    chosen = _chosen(raws, duplicates)
    facts, conflicts = merge_facts(user, stated or {}, *_sidecar(path, name),
                                   *(raw.facts for raw in raws), run=name)
    hparams, clashes = merge_hparams(stated_hparams or {}, *(raw.hparams for raw in raws),
                                     run=name)
    batch, derived = resolve_batch(facts, run=name)
    legs = _legs([chosen, *raws])
    kept, dropped = resolve_legs(chosen.scalars, policy=duplicates, starts=chosen.leg_starts,
                                 run=name)
    chosen.scalars, wall_times = _borrow_wall_times(kept, raws, chosen.source)
    scalars = normalize(chosen, batch, run=name, facts=facts)
    if len(raws) > 1:
        findings.append(Finding("info", "sources-merged",
                                f"points from {chosen.source}; facts from "
                                f"{', '.join(raw.source for raw in raws)}", name))
        findings += _deferred(chosen, raws, name)
    findings += [f if f.run else Finding(f.level, f.code, f.message, name)
                 for f in (*(f for raw in raws for f in raw.findings), *conflicts, *clashes,
                           *derived, *dropped)]
    return Run(name=name, path=path, format=chosen.source, sources=[r.source for r in raws],
               step_unit=chosen.step_unit, batch=batch, scalars=scalars, facts=facts,
               findings=Findings(findings), aliases=chosen.aliases,
               axis_sources=axis_sources(chosen, batch, facts=facts, wall_times=wall_times),
               legs=legs, hparams=hparams)


def _legs(raws: list[RawLog]) -> tuple[Leg, ...]:
    """Each leg's steps and wall-clock span, from the first of ``raws`` that logged wall times
    (every point it read, before restarts are resolved)."""
    for raw in raws:
        column = raw.scalars.get_column("wall_time")
        if column.null_count() == column.len():  # none logged (trainer_state.json): no pass
            continue
        wall = column.to_numpy()  # nulls as NaN
        timed = np.isfinite(wall)
        if not timed.any():
            continue
        legs = raw.scalars.get_column("leg").to_numpy()[timed]
        steps, wall = raw.scalars.get_column("step").to_numpy()[timed], wall[timed]
        numbers, leg_of = leg_numbers(legs)
        spans = []
        for i, number in enumerate(numbers.tolist()):
            mine = leg_of == i if numbers.size > 1 else slice(None)
            spans.append(Leg(number, int(steps[mine].min()), int(steps[mine].max()),
                             float(wall[mine].min()), float(wall[mine].max())))
        return tuple(sorted(spans, key=lambda leg: leg.wall_start))
    return ()


def _borrow_wall_times(points: pl.DataFrame, raws: list[RawLog],
                       source: str) -> tuple[pl.DataFrame, str | None]:
    """Wall times for points logged without one (trainer_state.json), from another source of
    the same run that logged the same metric at the same step (TensorBoard, W&B); also who
    logged the wall times the points end up with (None: nobody)."""
    if points.get_column("wall_time").null_count() < points.height:
        return points, f"wall times logged by {source}"
    timed = [raw for raw in raws if raw.scalars.get_column("wall_time").null_count()
             < raw.scalars.height]
    if not timed:
        return points, None
    clock = (pl.concat([t.scalars.select("metric", "step", "wall_time") for t in timed])
             .drop_nulls().group_by("metric", "step").agg(pl.col("wall_time").max()))
    borrowed = (points.drop("wall_time").join(clock, on=["metric", "step"], how="left",
                                              maintain_order="left")
                .select(points.columns))
    if borrowed.get_column("wall_time").null_count() == borrowed.height:
        return borrowed, None
    return borrowed, f"wall times logged by {', '.join(t.source for t in timed)}"


def _read_all(formats: Mapping[str, Format], path: Path, cache: bool,
              hints: Mapping[str, object]) -> tuple[list[RawLog], list[Finding]]:
    """Every source's reading of ``path``; a source that fails is reported while another reads."""
    raws: list[RawLog] = []
    failures: list[RuncompareError] = []
    broken: list[Finding] = []
    for fmt in formats.values():
        try:
            raws.append(read_cached(fmt, path, enabled=cache, hints=hints,
                                    store_from=SOURCES_FROM))
        except (InputError, MissingInfoError) as exc:  # another source may read the run
            failures.append(exc)
        except Exception as exc:  # a reader's bug: one bad source never sinks the others
            if len(formats) == 1:
                raise
            broken.append(_source_failed(fmt, path, exc, [f for f in formats if f != fmt.name]))
    if not raws:
        if failures:
            raise failures[0]
        raise InputError("; ".join(f.message for f in broken))
    findings = [Finding("warning", "source-unreadable", str(exc)) for exc in failures] + broken
    unread = unreadable(path)
    if unread:
        findings.append(Finding("warning", "passed-over", f"{path}: {unread}"))
    return raws, findings


def _source_failed(fmt: Format, path: Path, exc: Exception, others: list[str]) -> Finding:
    """The warning for a source whose reader failed on ``path`` (a bug, not bad input): which
    source, which files, what went wrong, and the ``--source`` that reads only another one."""
    try:
        files = [str(file) for file in fmt.files_at(path)]
    except OSError:
        files = []
    where = ", ".join(files[:3]) + (f" and {len(files) - 3} more" if len(files) > 3 else "")
    return Finding("warning", "source-unreadable",
                   f"{fmt.name} could not read {where or path} ({type(exc).__name__}: {exc}); "
                   f"its points and facts are left out and the run is read from "
                   f"{', '.join(others)}; pass --source {others[0]} to read only that one "
                   "(and please report this)")
