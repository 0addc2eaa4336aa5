"""Building a run: every source's reading of its root, the source whose points it shows, the
facts merged by priority, the batch hierarchy resolved, restarts resolved and every point put
on every axis."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from ..axes import axis_sources, normalize
from ..cache import SOURCES_FROM, read_cached
from ..errors import InputError, MissingInfoError, NoLogsFoundError, RuncompareError
from ..facts import merge_hparams
from ..legs import leg_numbers, resolve_legs
from ..model import Fact, Finding, Findings, Leg, RawLog, Run
from ..resolve import merge_facts, read_sidecar, resolve_batch
from ..sources import REGISTRY, Format, unreadable
from .roots import folder_name

__all__ = ["Given", "Sidecars", "build_run", "chosen_source", "read_sidecars", "read_sources",
           "source_hints"]

#: The runcompare.toml facts in a run's folder, then in its parent: per run name (None: for
#: every run there).
Sidecars = tuple[dict[str | None, dict[str, Fact[Any]]], ...]


@dataclass(frozen=True)
class Given:
    """What one run is built with besides its files: the facts the user gave for it
    (``--set``, keywords), the ``--config`` file's facts and hyperparameters, and the
    ``--duplicates`` policy."""

    user: dict[str, Fact[Any]]
    stated: dict[str, Fact[Any]]
    stated_hparams: dict[str, Fact[Any]]
    duplicates: str


def read_sidecars(path: Path) -> Sidecars:
    """The runcompare.toml files a run at ``path`` takes facts from, each read once."""
    folder = path if path.is_dir() else path.parent
    return tuple(read_sidecar(f) for f in (folder, folder.parent))


def _sidecar_facts(sidecars: Sidecars, name: str) -> list[dict[str, Fact[Any]]]:
    """runcompare.toml facts for run ``name``: its folder's table, then its folder's facts for
    every run, then the parent folder's."""
    return [s.get(key, {}) for s in sidecars for key in (name, None)]


def source_hints(path: Path, user: Mapping[str, Fact[Any]],
                 sidecars: Sidecars) -> dict[str, object]:
    """Values the user stated (``--set``, then runcompare.toml) that a source may need."""
    stated: dict[str, object] = {}
    for group in reversed([user, *_sidecar_facts(sidecars, folder_name(path))]):
        stated.update({k: f.value for k, f in group.items() if k != "name"})
    return stated


def read_sources(formats: Mapping[str, Format], path: Path, cache: bool,
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


def chosen_source(raws: list[RawLog], duplicates: str = "all") -> RawLog:
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


def build_run(path: Path, name: str, raws: list[RawLog], findings: list[Finding],
              given: Given, sidecars: Sidecars) -> Run:
    """The run ``name`` at ``path`` from its sources' ``raws`` (``findings``: what reading
    them found, added to): facts from the user, the config, runcompare.toml and the logs by
    priority, its batch hierarchy, its legs and its points on every axis."""
    chosen = chosen_source(raws, given.duplicates)
    facts, conflicts = merge_facts(given.user, given.stated, *_sidecar_facts(sidecars, name),
                                   *(raw.facts for raw in raws), run=name)
    hparams, clashes = merge_hparams(given.stated_hparams, *(raw.hparams for raw in raws),
                                     run=name)
    batch, derived = resolve_batch(facts, run=name)
    legs = _legs([chosen, *raws])
    kept, dropped = resolve_legs(chosen.scalars, policy=given.duplicates,
                                 starts=chosen.leg_starts, run=name)
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
