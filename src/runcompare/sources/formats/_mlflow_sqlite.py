"""MLflow's SQLite tracking store (``mlflow.db``, MLflow 3's default), read with the stdlib.

Nothing is ever written to the database or beside it (:func:`_connect`): a database whose
writer left no changes in a ``-wal`` or ``-journal`` file beside it is opened read-only and
immutable (``file:...?mode=ro&immutable=1``), so SQLite creates no ``-wal``/``-shm`` file and
takes no lock; one with such changes (a live writer, a killed one) is copied with them into a
private temporary folder and read there, so the changes are read and the originals untouched.
Text that is not UTF-8 (MLflow writes UTF-8) is damage, an :class:`InputError`. One
run = one row of ``runs`` (deleted runs and runs of deleted experiments are skipped). Its
points are the ``metrics`` rows of that ``run_uuid``: MLflow stores NaN as 0.0 with
``is_nan = 1`` and ±inf as ±1.7976931348623157e308 (the largest double); both are turned
back into NaN and ±inf. Timestamps are milliseconds.

A database SQLite refuses (cut short by a killed copy or a full disk, or damaged where SQLite
parses its schema) is read page by page instead (:mod:`~..codecs.sqlite_pages`): the rows on
the pages of the tables' b-trees that survive, with a ``damaged-input`` warning counting the
pages lost; when even its runs or metrics table cannot be found, it is the clear error.
"""

from __future__ import annotations

import shutil
import sqlite3
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any
from urllib.parse import quote

import polars as pl

from ...errors import InputError
from ...model import Finding
from ..codecs.files import files_in, is_dir, is_file
from ..codecs.sqlite_pages import Database, NotSqlite, Table

__all__ = ["METRIC_SCHEMA", "RunRecord", "databases", "is_database", "pending", "read_run",
           "run_ids", "run_name"]

HEADER = b"SQLite format 3\x00"
SUFFIXES = (".db", ".sqlite", ".sqlite3")
#: The name MLflow gives its database; claimed even when damaged, so the user sees why.
DEFAULT_NAME = "mlflow.db"
_TABLES = {"runs", "metrics", "params", "tags"}
#: Files beside a database where SQLite keeps changes a writer has not yet put in it.
_SIDE_FILES = ("-wal", "-journal")
#: A metrics row as MLflow types it; SQLite stores any type in any column, so others are damage.
_TYPED = ("(typeof(key) = 'text' AND typeof(value) IN ('real', 'integer') "
          "AND typeof(step) = 'integer' AND typeof(timestamp) = 'integer' "
          "AND typeof(is_nan) = 'integer')")
#: Columns of a run's metric points as both stores give them.
METRIC_SCHEMA = {"key": pl.String, "value": pl.Float64, "step": pl.Int64,
                 "timestamp": pl.Int64}


@dataclass
class RunRecord:
    """One MLflow run as either store holds it (metrics frame of :data:`METRIC_SCHEMA`)."""

    run_id: str
    name: str | None
    experiment: str | None
    status: str | None
    deleted: bool
    metrics: pl.DataFrame
    params: dict[str, str] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)
    #: What was wrong with what was stored (rows skipped), for the run's findings.
    findings: list[Finding] = field(default_factory=list)


def databases(path: Path) -> list[Path]:
    """The MLflow SQLite databases at ``path`` (the file itself, or files in the folder)."""
    if is_file(path):
        return [path] if is_database(path) else []
    if not is_dir(path):
        return []
    return [f for f in files_in(path) if f.suffix in SUFFIXES and is_database(f)]


def is_database(file: Path) -> bool:
    """An SQLite file with MLflow's runs/metrics/params/tags tables (or named mlflow.db)."""
    if not is_file(file):  # a FIFO would block the read forever
        return False
    try:
        with file.open("rb") as handle:
            magic = handle.read(len(HEADER))
    except OSError:
        return False
    if magic != HEADER:
        return file.name == DEFAULT_NAME and is_file(file)
    try:
        with _connect(file) as conn:
            names = {row[0] for row in _query(
                conn, file, "SELECT name FROM sqlite_master WHERE type = 'table'", ())}
    except InputError:
        return file.name == DEFAULT_NAME
    return names >= _TABLES


def run_ids(db: Path) -> list[str]:
    """Ids of the live runs (not deleted, in a live experiment), oldest first."""
    try:
        with _connect(db) as conn:
            rows = _query(conn, db, """
                SELECT r.run_uuid FROM runs r LEFT JOIN experiments e
                    ON e.experiment_id = r.experiment_id
                WHERE r.lifecycle_stage = 'active'
                  AND (e.lifecycle_stage IS NULL OR e.lifecycle_stage = 'active')
                ORDER BY r.start_time, r.run_uuid""", ())
    except _Refused as exc:
        return _salvaged(db, exc).run_ids()
    return [row[0] for row in rows]


def run_name(db: Path, run_id: str) -> str | None:
    """The run's name (``runs.name``, else the ``mlflow.runName`` tag), cheaply."""
    try:
        with _connect(db) as conn:
            rows = _query(conn, db, """
                SELECT r.name, t.value FROM runs r LEFT JOIN tags t
                    ON t.run_uuid = r.run_uuid AND t.key = 'mlflow.runName'
                WHERE r.run_uuid = ?""", (run_id,))
    except _Refused as exc:
        store = _salvaged(db, exc)
        run = store.run(run_id)
        return None if run is None else run["name"] or store.tags(run_id).get("mlflow.runName")
    return next((name or tag for name, tag in rows if name or tag), None)


def read_run(db: Path, run_id: str) -> RunRecord:
    """Everything runcompare needs of run ``run_id`` in ``db``."""
    try:
        return _read_run(db, run_id)
    except _Refused as exc:
        return _salvaged(db, exc).read_run(run_id)


def _read_run(db: Path, run_id: str) -> RunRecord:
    with _connect(db) as conn:
        runs = _query(conn, db, """
            SELECT r.name, r.status, r.lifecycle_stage, e.name FROM runs r
                LEFT JOIN experiments e ON e.experiment_id = r.experiment_id
            WHERE r.run_uuid = ?""", (run_id,))
        if not runs:
            known = ", ".join(run_ids(db)[:5]) or "none"
            raise InputError(f"{db}: no run with id {run_id!r} (live runs: {known}); pass the "
                             "database or its folder to read every run")
        name, status, stage, experiment = runs[0]
        rows = _query(conn, db, f"""
            SELECT key, value, step, timestamp, is_nan FROM metrics
            WHERE run_uuid = ? AND {_TYPED}""", (run_id,))
        untyped = _query(conn, db, f"""
            SELECT count(*) FROM metrics WHERE run_uuid = ? AND NOT {_TYPED}""", (run_id,))
        params = dict(_query(conn, db, "SELECT key, value FROM params WHERE run_uuid = ?",
                             (run_id,)))
        tags = dict(_query(conn, db, "SELECT key, value FROM tags WHERE run_uuid = ?",
                           (run_id,)))
    return RunRecord(run_id=run_id, name=name or tags.get("mlflow.runName"),
                     experiment=experiment, status=status, deleted=stage == "deleted",
                     metrics=_metrics(rows), params=params, tags=tags,
                     findings=_untyped(db, name or run_id, untyped[0][0]))


def _salvaged(db: Path, refused: InputError) -> _Salvage:
    """The rows of a database SQLite refuses (cut short, or damaged in its schema), read page
    by page (:mod:`~runcompare.sources.codecs.sqlite_pages`); ``refused`` is raised when even
    that cannot find its runs and metrics tables."""
    try:
        stat = db.stat()
    except OSError:
        raise refused from None
    store = _salvage(db.resolve(), stat.st_size, stat.st_mtime_ns, stat.st_ino)
    if store is None:
        raise refused
    return store


@lru_cache(maxsize=4)
def _salvage(db: Path, _size: int, _mtime: int, _inode: int) -> _Salvage | None:
    try:
        pages = Database(db.read_bytes())
    except (OSError, NotSqlite):
        return None
    tables = {name: pages.table(name) for name in ("runs", "metrics", "params", "tags",
                                                   "experiments")}
    if tables["runs"] is None or tables["metrics"] is None:
        return None  # the schema entries it needs are lost: the clear error stands
    return _Salvage(db, tables, pages)


class _Salvage:
    """The queries of this module over a database's rows read page by page."""

    def __init__(self, db: Path, tables: dict[str, Table | None], pages: Database) -> None:
        self.db = db
        self.rows = {name: [dict(zip(t.columns, row)) for row in t.rows] if t else []
                     for name, t in tables.items()}
        lost = sum(t.lost_pages for t in tables.values() if t) + pages.lost_schema_pages
        self.finding = Finding(
            "warning", "damaged-input",
            f"{db}: SQLite refuses this database (cut short or damaged), so its rows were read "
            f"page by page from the tables' surviving pages; {lost} page"
            f"{'s' * (lost != 1)} could not be read{' (the file ends early)' if lost else ''}, "
            "and the rows on them are missing")

    def run(self, run_id: str) -> dict[str, Any] | None:
        return next((r for r in self.rows["runs"] if r.get("run_uuid") == run_id), None)

    def tags(self, run_id: str) -> dict[str, str]:
        return {r["key"]: r["value"] for r in self.rows["tags"] if r.get("run_uuid") == run_id}

    def run_ids(self) -> list[str]:
        stages = {e.get("experiment_id"): e.get("lifecycle_stage")
                  for e in self.rows["experiments"]}
        live = [r for r in self.rows["runs"] if r.get("lifecycle_stage") == "active"
                and stages.get(r.get("experiment_id")) in (None, "active")]
        live.sort(key=lambda r: (r.get("start_time") or 0, str(r.get("run_uuid"))))
        return [str(r["run_uuid"]) for r in live]

    def read_run(self, run_id: str) -> RunRecord:
        run = self.run(run_id)
        if run is None:
            known = ", ".join(self.run_ids()[:5]) or "none"
            raise InputError(f"{self.db}: no run with id {run_id!r} among the rows that could "
                             f"be read (live runs: {known})")
        experiments = {e.get("experiment_id"): e.get("name") for e in self.rows["experiments"]}
        mine = [m for m in self.rows["metrics"] if m.get("run_uuid") == run_id]
        typed = [m for m in mine if isinstance(m.get("key"), str)
                 and isinstance(m.get("value"), (int, float))
                 and all(isinstance(m.get(c), int) for c in ("step", "timestamp", "is_nan"))]
        rows = [(m["key"], m["value"], m["step"], m["timestamp"], m["is_nan"]) for m in typed]
        tags = self.tags(run_id)
        name = run.get("name")
        return RunRecord(
            run_id=run_id, name=name or tags.get("mlflow.runName"),
            experiment=experiments.get(run.get("experiment_id")), status=run.get("status"),
            deleted=run.get("lifecycle_stage") == "deleted", metrics=_metrics(rows),
            params={p["key"]: p["value"] for p in self.rows["params"]
                    if p.get("run_uuid") == run_id},
            tags=tags,
            findings=[self.finding, *_untyped(self.db, name or run_id, len(mine) - len(typed))])


def _untyped(db: Path, run: str, count: int) -> list[Finding]:
    if not count:
        return []
    return [Finding("warning", "damaged-input",
                    f"{db}: {count} metric rows of run {run!r} do not hold a text key and "
                    "numeric value, step and timestamp (damaged or edited); skipped them")]


def _metrics(rows: list[tuple[Any, ...]]) -> pl.DataFrame:
    frame = pl.DataFrame(rows, schema={**METRIC_SCHEMA, "is_nan": pl.Int64}, orient="row")
    huge = sys.float_info.max
    value = (pl.when(pl.col("is_nan") == 1).then(float("nan"))
             .when(pl.col("value") >= huge).then(float("inf"))
             .when(pl.col("value") <= -huge).then(float("-inf"))
             .otherwise(pl.col("value")))
    return (frame.with_columns(value=value).select(list(METRIC_SCHEMA))
            .sort("timestamp", "step", maintain_order=True))


def pending(db: Path) -> list[Path]:
    """The non-empty ``-wal``/``-journal`` files beside ``db``: changes not yet in the file."""
    files = [db.with_name(db.name + suffix) for suffix in _SIDE_FILES]
    return [file for file in files if is_file(file) and file.stat().st_size > 0]


@contextmanager
def _connect(db: Path) -> Iterator[sqlite3.Connection]:
    """A connection that reads ``db`` and writes nothing to it or beside it, closed on exit."""
    with _readable(db) as (file, immutable):
        flags = "mode=ro&immutable=1" if immutable else "mode=rw"
        try:
            conn = sqlite3.connect(f"file:{quote(str(file))}?{flags}", uri=True)
        except sqlite3.Error as exc:
            raise _error(db, exc) from exc
        try:
            yield conn
        finally:
            conn.close()


@contextmanager
def _readable(db: Path) -> Iterator[tuple[Path, bool]]:
    """The file to open and whether it may be opened immutable: ``db`` itself when nothing is
    pending beside it, else a copy of it and its pending files in a temporary folder."""
    db = db.resolve()
    side = pending(db)
    if not side:
        yield db, True
        return
    with tempfile.TemporaryDirectory(prefix="runcompare-sqlite-") as folder:
        try:
            for file in (db, *side):
                shutil.copyfile(file, Path(folder) / file.name)
        except OSError as exc:
            raise InputError(f"{db}: cannot be read with its {side[0].name} "
                             f"({exc.strerror or exc}); check the permissions of both") from exc
        yield Path(folder) / db.name, False


def _query(conn: sqlite3.Connection, db: Path, sql: str,
           args: tuple[Any, ...]) -> list[tuple[Any, ...]]:
    try:
        return conn.execute(sql, args).fetchall()
    except (sqlite3.Error, UnicodeDecodeError) as exc:  # text that is not UTF-8 is damage
        raise _error(db, exc) from exc


class _Refused(InputError):
    """SQLite refused the database file itself (malformed, not a database): a page-by-page
    read may still find its rows."""


def _error(db: Path, exc: sqlite3.Error | UnicodeDecodeError) -> InputError:
    kind = _Refused if isinstance(exc, sqlite3.DatabaseError) and (
        "malformed" in str(exc) or "not a database" in str(exc)) else InputError
    return kind(f"{db}: cannot be read as an MLflow SQLite database ({exc}); check that "
                      "it is the tracking database MLflow wrote (sqlite:///...) and not damaged")
