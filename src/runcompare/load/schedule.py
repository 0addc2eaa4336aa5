"""Reading many runs: one task per run root, read in this process, worker processes or on a
Dask cluster, each run taken whole from the cache when it was built before from the same
files and settings, and kept there when it was built afresh."""

from __future__ import annotations

import contextvars
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import polars as pl

from ..cache import (
    Stored,
    built_entry,
    built_key,
    files_listing,
    keep_built,
    points_stream,
    read_built,
    still_listed,
    stored_runs,
    stream_points,
)
from ..errors import InputError, RuncompareError
from ..model import SCALAR_SCHEMA, Fact, Finding, RawLog, Run
from ..resolve import SIDECAR
from ..sources import REGISTRY, Format, detect, unreadable
from ..sources.codecs.files import one_look, resolved
from . import build
from .build import Given, Sidecars

__all__ = ["TOGETHER", "TOGETHER_BYTES", "Read", "Task", "final_run", "keep", "stage", "stage_many",
           "with_stored"]


@dataclass(frozen=True)
class Task:
    """One run root to read, with everything a worker process needs to read it: the root,
    its default name and whether its source may name it, its name made unique among the runs
    given, what it is built with, the reading options it needs (``source``, ``pattern``,
    ``cache``), and whether it is the only run (then an unreadable run is an error rather
    than a run skipped)."""

    root: Path
    name: str
    from_source: bool
    unique: str
    given: Given
    source: str | None
    pattern: str | None
    cache: bool
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
class Read:
    """A run read and built under ``name`` (its name made unique among the runs given, when
    no source or user names it), or the error its build raised; ``base`` is its name before
    it is made unique, ``split`` where the skipped runs' findings go in its findings."""

    base: str
    name: str
    run: Run | None
    error: RuncompareError | None
    split: int
    #: The run's points as the stream the cache will keep or read (None: not made).
    stream: bytes | None = None
    #: The run's metadata for the cache to keep with ``stream`` (None: it is not kept).
    fresh: bytes | None = None

    def __getstate__(self) -> dict[str, Any]:
        """Sent from a worker with the points as the cache's stream of them (the one it keeps or
        read, :func:`~..cache.points_stream`): a twentieth of the bytes of a pickled frame,
        written and read in about half a millisecond."""
        state = dict(self.__dict__)
        state.pop("stream")
        if self.run is not None:
            state["run"] = replace(self.run, scalars=pl.DataFrame())
            state["points"] = points_stream(self.run.scalars, {"run": self.run.name}) \
                if self.stream is None else self.stream
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        points = state.pop("points", None)
        self.__dict__.update(state, stream=points if state.get("fresh") else None)
        if points is not None and self.run is not None:
            self.run.scalars = stream_points(points, SCALAR_SCHEMA)


#: Runs staged together (:func:`stage_many`): each step of the stage done for all of them
#: before the next step, so that its code is still in the processor's caches (the benchmark's
#: 400 runs of 10,000 points read cold: 7-8% less time, in one process as with a worker) ...
TOGETHER = 8
#: ... while their files hold no more than this many bytes together (their points are held at
#: once between the steps); a larger run, or one read without the cache, is staged alone.
TOGETHER_BYTES = 8 << 20


def stage(task: Task) -> Read | Finding:
    """Read one run (in a worker process or here): its run, or the run-skipped finding of a
    run that cannot be read (raised when it is the only one). A run built before from the
    same files and settings comes from the cache whole. Detection, the cache's look and the
    read see one moment of the run's folders (:func:`~..sources.codecs.files.one_look`); the
    files read are stat'ed again after the read, so a file changed meanwhile is not kept."""
    return stage_many([task])[0]


def stage_many(tasks: Sequence[Task]) -> list[Read | Finding]:
    """:func:`stage` of each task, in order: up to :data:`TOGETHER` at a time are detected,
    then looked for in the cache, and those of them that are small enough together
    (:data:`TOGETHER_BYTES`) are then read, built, and made ready for the cache (and written
    out, with a part), a step at a time. Each task keeps a look of its own (its own
    context); an error is raised as :func:`stage` would raise it, the first in the tasks'
    order."""
    out: list[Read | Finding] = []
    for first in range(0, len(tasks), TOGETHER):
        window = [_Staged(task) for task in tasks[first:first + TOGETHER]]
        try:
            _step(window, _Staged.detect)
            _step(window, _Staged.look_up)
            for group in _together(window):
                for step in (_Staged.read, _Staged.build, _Staged.finish):
                    _step(group, step)
        finally:
            for staged in window:
                staged.close()
        out += [staged.outcome() for staged in window]
    return out


def _step(staged: list[_Staged], step: Callable[[_Staged], None]) -> None:
    for one in staged:
        one.take(step)


def _together(window: list[_Staged]) -> list[list[_Staged]]:
    """The window's tasks still to be read, in groups of consecutive ones whose files hold at
    most :data:`TOGETHER_BYTES` together (one read without the cache alone)."""
    groups: list[list[_Staged]] = []
    held = 0
    for staged in window:
        if staged.ended or staged.result is not None and staged.task.part is None:
            continue  # nothing left to do for it (a run from the cache, not written out)
        size = staged.size()
        if not groups or size is None or held + size > TOGETHER_BYTES:
            groups.append([])
            held = 0
        groups[-1].append(staged)
        held += TOGETHER_BYTES + 1 if size is None else size  # read without the cache: alone
    return groups


class _Staged:
    """One task's stage, a step at a time, in a context of its own that holds its look
    (:func:`~..sources.codecs.files.one_look`): detected, looked for in the cache, read,
    built, made ready for the cache; :meth:`outcome` gives its result or raises its error."""

    def __init__(self, task: Task) -> None:
        self.task = task
        self.context = contextvars.copy_context()
        self.look = one_look()
        self.context.run(self.look.__enter__)
        self.result: Read | Finding | None = None  # set: no step left but finish
        self.error: Exception | None = None
        self.formats: dict[str, Format] = {}
        self.listing: list[list[Any]] | None = None
        self.sidecars: Sidecars = ()
        self.raws: tuple[list[RawLog], list[Finding]] = ([], [])
        self.built: Read | None = None

    @property
    def ended(self) -> bool:
        return self.error is not None or isinstance(self.result, Finding)

    def take(self, step: Callable[[_Staged], None]) -> None:
        """``step`` in the task's context, unless the task has ended (its error kept)."""
        if not self.ended and (self.result is None or step is _Staged.finish):
            try:
                self.context.run(step, self)
            except Exception as exc:  # noqa: BLE001 - raised by outcome(), in the tasks' order
                self.error = exc

    def size(self) -> int | None:
        """The bytes of the files it is to read (0 for a run from the cache; None: read
        without the cache, so not listed)."""
        if self.result is not None:
            return 0
        if self.listing is None:
            return None
        held: int = sum(entry[1] for entry in self.listing[:-1] if entry[1] is not None)
        return held

    def detect(self) -> None:
        formats = _formats(self.task)
        if isinstance(formats, Finding):
            self.result = formats
        else:
            self.formats = formats

    def look_up(self) -> None:
        task = self.task
        self.listing = _listing(task, self.formats) if task.key is not None else None
        found = None if self.listing is None else read_built(task.stored, self.listing,
                                                             task.root)
        if found is not None:
            run, (base, split), stream = found
            self.result = Read(base, run.name, run, None, split, stream)

    def read(self) -> None:
        self.sidecars = build.read_sidecars(self.task.root)
        read = _raws(self.task, self.sidecars, self.formats)
        if isinstance(read, Finding):
            self.result = read
        else:
            self.raws = read

    def build(self) -> None:
        task = self.task
        raws, findings = self.raws
        named = (task.given.user.get("name") or Fact(None, "")).value or (
            build.chosen_source(raws).name if task.from_source else None)
        done = _built(task, named or task.name, named or task.unique, raws, findings,
                      self.sidecars)
        self.raws = ([], [])
        self.built = done

    def finish(self) -> None:
        built = self.built
        if built is not None:
            if self.listing is not None and built.run is not None and _unchanged(self.task,
                                                                                 self.listing):
                kept = built_entry(self.listing, built.run, [built.base, built.split])
                if kept is not None:
                    built.fresh, built.stream = kept
            self.result = built
        done = self.result
        if self.task.part is not None and isinstance(done, Read) and done.run is not None:
            _write_part(self.task, done.run)
            done.stream = None  # the points left the run

    def close(self) -> None:
        """The task's look ended (in its context, where it began)."""
        self.context.run(self.look.__exit__, None, None, None)

    def outcome(self) -> Read | Finding:
        """The task's result, or the error its stage raised."""
        if self.error is not None:
            raise self.error
        assert self.result is not None
        return self.result


def _write_part(task: Task, run: Run) -> None:
    """The run's points written to the task's part file, and left out of the run."""
    from ..export import write_part

    assert task.part is not None
    write_part(run.scalars, run.name, task.part)
    run.scalars = run.scalars.clear()


def _formats(task: Task) -> dict[str, Format] | Finding:
    """The formats found at the task's root (the text source alone with ``--pattern``)."""
    try:
        return detect(task.root, source=task.source) if task.pattern is None else {
            "text": REGISTRY["text"]}
    except InputError as exc:
        return _skipped(task, exc)


def _skipped(task: Task, exc: InputError) -> Finding:
    """The run-skipped finding of a run of several that cannot be read (one alone raises)."""
    if task.alone:
        raise exc
    return Finding("warning", "run-skipped", f"{task.unique} was not read ({exc}); the other "
                   "runs are compared without it")


def _listing(task: Task, formats: Mapping[str, Format]) -> list[list[Any]] | None:
    """What a whole run's cache entry is checked against: every file its sources read, the
    runcompare.toml files its build reads (or their absence) and what was passed over."""
    folder = task.root if task.root.is_dir() else task.root.parent
    try:
        return [*files_listing([f for fmt in formats.values() for f in fmt.files_at(task.root)],
                               [folder / SIDECAR, folder.parent / SIDECAR]),
                ["passed-over", unreadable(task.root)]]
    except OSError:
        return None


def _unchanged(task: Task, listing: list[list[Any]]) -> bool:
    """Whether what :func:`_listing` gave is still so after the build: its files stat'ed
    again (:func:`~..cache.still_listed`) and what was passed over looked at again."""
    try:
        return still_listed(listing[:-1]) and listing[-1] == ["passed-over",
                                                              unreadable(task.root)]
    except OSError:
        return False


def with_stored(tasks: list[Task]) -> list[Task]:
    """The tasks read with the cache, each with its whole run's key, the folder whose packs
    keep it and what they keep for it (each folder's packs are read once, each root resolved
    once)."""
    found: dict[Path, dict[str, Stored]] = {}
    out = []
    with one_look():
        for task in tasks:
            if task.cache:
                folder = resolved(task.root).parent
                if folder not in found:
                    found[folder] = stored_runs(folder)
                key = built_key(_task_key(task))
                task = replace(task, key=key, kept_in=folder, stored=found[folder].get(key))
            out.append(task)
    return out


def keep(staged: list[tuple[Task, Read]]) -> None:
    """The runs built afresh kept in the cache: one new pack for each folder of them."""
    packs: dict[Path, dict[str, tuple[bytes, bytes]]] = {}
    for task, read in staged:
        if read.fresh is not None and read.stream is not None:
            assert task.key is not None and task.kept_in is not None
            packs.setdefault(task.kept_in, {})[task.key] = (read.fresh, read.stream)
            read.fresh = read.stream = None
    for folder, entries in packs.items():
        keep_built(folder, entries)


def _task_key(task: Task) -> str:
    """Everything a build is given, as one string (a whole run's cache key)."""
    def facts(given: Mapping[str, Fact[Any]]) -> list[Any]:
        return sorted([k, f.value, f.source, f.kind] for k, f in given.items())

    given = task.given
    return json.dumps([str(task.root), str(resolved(task.root)), task.name, task.from_source,
                       task.unique, facts(given.user), task.source, task.pattern,
                       given.duplicates, facts(given.stated), facts(given.stated_hparams),
                       task.alone], default=str)


def _raws(task: Task, sidecars: Sidecars, formats: Mapping[str, Format] | None = None
          ) -> tuple[list[RawLog], list[Finding]] | Finding:
    """Every source's reading of the task's root (the run-skipped finding when it cannot be
    read and other runs can)."""
    hints = {**build.source_hints(task.root, task.given.user, sidecars),
             **({"pattern": task.pattern} if task.pattern else {})}
    if formats is None:
        found = _formats(task)
        if isinstance(found, Finding):
            return found
        formats = found
    try:
        return build.read_sources(formats, task.root, task.cache, hints)
    except InputError as exc:  # one unreadable run of several: the others are compared
        return _skipped(task, exc)


def _built(task: Task, base: str, name: str, raws: list[RawLog], findings: list[Finding],
           sidecars: Sidecars) -> Read:
    split = len(findings)
    try:
        run = build.build_run(task.root, name, raws, findings, task.given, sidecars)
    except RuncompareError as exc:  # raised in load_many's order, after its own checks
        return Read(base, name, None, exc, split)
    return Read(base, name, run, None, split)


def final_run(task: Task, read: Read, name: str, skipped: list[Finding]) -> Run:
    """The run under its final name (another than it was built under only when a source's
    names, or a run that could not be read, change which runs share a name: then it is read
    again here, from the cache), the skipped runs' warnings in its findings where a run read
    in one go has them."""
    if name != read.name:
        sidecars = build.read_sidecars(task.root)
        again = _raws(task, sidecars)
        assert not isinstance(again, Finding)  # it was read a moment ago
        read = _built(task, read.base, name, *again, sidecars)
        if task.part is not None and read.run is not None:  # the worker's part: another name
            _write_part(task, read.run)
    if read.error is not None:
        raise read.error
    assert read.run is not None
    read.run.findings[read.split:read.split] = skipped
    return read.run
