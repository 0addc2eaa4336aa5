"""Parsed runs, and whole runs as built, cached as Arrow IPC, so reading unchanged logs again
skips parsing them, and building them again with the same settings.

Where: ``$XDG_CACHE_HOME/runcompare`` (``~/.cache/runcompare`` when unset).

A parsed source is two files: ``<key>.arrow`` (the points as a zstd-compressed Arrow IPC
stream, and the values that do not compress as an uncompressed one, after a line naming
their empty columns and giving the run's name, which a built run has on every point,
:func:`points_stream`: smaller than parquet for these frames, and written and read in a
fifth of its time)
and ``<key>.json`` (everything else of the :class:`~runcompare.model.RawLog`, and the listing
it was read from), written in that order, each atomically, so a half-written entry is never
taken for a whole one. The ``.json`` file's first line is the SHA-256 of the rest of it and
of the points file's bytes: an entry that was edited, damaged or mixed with another is
treated as missing, as is one whose content does not have the types runcompare writes.

Whole runs are kept in packs, one folder of packs for each folder that holds run roots
(``built/<hash>/``): a read writes the runs it built afresh as one new pack (a sweep of 400
runs: one file, not 800; creating a file costs as much as writing 100 kB), and once a folder
has :data:`PACKS` packs the new one takes in the others. A pack starts with the SHA-256 of its
index, the index (where each run's entry is, and the entry's SHA-256), then the entries: each
run's metadata (the listing it was built from among them) and its points' stream. A pack
whose index is not whole holds nothing, and a run whose entry is not as written is missing.
The main process reads a folder's pack indexes once and writes its new pack; the workers read
their run's entry and check its files. On a Dask cluster whole runs are not kept (a worker's
cache is its own machine's); the parsed sources of large runs are, in each worker's cache.

A parsed source's key: the source name, the path's absolute form, the runcompare version,
the hints given to the source (facts the user stated that change what is read), and the
size and mtime of the readers' code (every module under ``sources/``, the native ones too,
so an edited checkout never serves stale parses). An entry is used only while the format's
``files_at(path)`` (every file its reader reads) lists the same files with the same size,
mtime and ctime in nanoseconds and inode: a file that grew, changed or appeared means a
fresh read (which replaces the entry), also after an edit whose mtime was put back (``cp
-p``, ``rsync -t``, ``touch -r``), since the ctime cannot be set back and a replaced file has
a new inode. A whole run's key is everything its build is given (the path as given, names,
stated facts, ``--duplicates``, the config file's facts) and the whole package's code; it is
used while every file of its sources lists the same, its runcompare.toml files are the same
(or still absent) and the same entries are passed over. The loader keeps parsed sources only
for runs of :data:`SOURCES_FROM` bytes or more (a small run changed in its settings is parsed
again, about as fast as its entry would read). A cache that cannot be written
(read-only home, full disk) is skipped silently; one that cannot be read is treated as
missing.
"""

from __future__ import annotations

import functools
import hashlib
import io
import json
import os
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, fields
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from stat import S_ISREG
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from . import sources
from .model import (
    RAW_SCHEMA,
    SCALAR_SCHEMA,
    BatchConfig,
    Fact,
    Finding,
    Findings,
    Leg,
    RawLog,
    Run,
    repeated,
    with_constants,
)
from .sources import Format
from .sources.codecs.files import resolved

if TYPE_CHECKING:
    from polars._typing import PolarsDataType

__all__ = ["PACKS", "SOURCES_FROM", "Stored", "built_entry", "built_key", "cache_dir",
           "files_listing", "keep_built", "points_stream", "read_built", "read_cached",
           "still_listed", "stored_runs", "stream_points"]

#: Bump when the layout of an entry changes.
_FORMAT = 9
#: The loader keeps a run's parsed sources beside the run as built only when its files hold
#: this many bytes: a smaller run parses about as fast as its entry reads back (a 0.5 MB
#: event file: 2.8 ms against 1 ms), and writing the entry cost a sweep 1.4 ms a run.
SOURCES_FROM = 4 << 20
#: A folder's packs of whole runs are merged into one when a read would make this many.
PACKS = 8


def read_cached(fmt: Format, path: Path, *, enabled: bool = True,
                hints: Mapping[str, object] | None = None, store_from: int = 0) -> RawLog:
    """``fmt.read_at(path, hints=hints)``, from the cache when ``enabled`` and the files are
    unchanged (the hints are part of the key: they can change what is read). A fresh read is
    kept when its files hold at least ``store_from`` bytes (see :data:`SOURCES_FROM`); fewer
    are read without looking for an entry (none is kept of them)."""
    hints = dict(hints or {})
    if not enabled:
        return fmt.read_at(path, hints=hints)
    try:
        files = fmt.files_at(path)
        small = not files or sum(os.stat(file).st_size for file in files) < store_from
        listing = [] if small else _listing(files)  # resolved too: only what may be kept
    except OSError:
        return fmt.read_at(path, hints=hints)
    if small:
        return fmt.read_at(path, hints=hints)  # none is kept: none to look for
    entry = cache_dir() / _key(fmt.name, path, hints)
    cached = _load(entry, listing, path)
    if cached is not None:
        return cached
    raw = fmt.read_at(path, hints=hints)
    try:
        if _listing(fmt.files_at(path)) == listing:  # unchanged while it was read
            _store(entry, listing, path, raw)
    except (OSError, TypeError, ValueError, pl.exceptions.PolarsError):
        pass  # a cache that cannot be written is no error
    return raw


def cache_dir() -> Path:
    """``$XDG_CACHE_HOME/runcompare``, or ``~/.cache/runcompare`` (XDG: relative is unset)."""
    base = os.environ.get("XDG_CACHE_HOME", "")
    root = Path(base) if base and os.path.isabs(base) else Path.home() / ".cache"
    return root / "runcompare"


def _listing(files: list[Path]) -> list[list[Any]]:
    """Absolute path, size, mtime and ctime (ns) and inode of each file."""
    out = []
    for file in files:
        stat = file.stat()
        out.append([str(resolved(file)), stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns,
                    stat.st_ino])
    return out


def _key(name: str, path: Path, hints: Mapping[str, object]) -> str:
    parts = [str(_FORMAT), name, str(path.resolve()), _version(),
             json.dumps(hints, sort_keys=True, default=str), *_code_stamp()]
    return f"{name}-{hashlib.sha256(chr(0).join(parts).encode()).hexdigest()[:32]}"


@functools.cache
def _version() -> str:
    try:
        return version("runcompare")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "0+unknown"


@functools.cache
def _code_stamp(whole: bool = False) -> tuple[str, ...]:
    """Size and mtime of every module of the readers (``runcompare/sources/``, every layer,
    the native ones too), or of the ``whole`` package, once per process."""
    root = Path(sources.__file__).parent
    if whole:
        root = root.parent
    try:
        return tuple(sorted(f"{p.relative_to(root)}:{p.stat().st_size}:{p.stat().st_mtime_ns}"
                            for p in root.rglob("*") if p.suffix in (".py", ".so", ".pyd")))
    except OSError:
        return ()


# -- whole runs ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Stored:
    """Where a whole run is kept: its pack file, where its entry starts there, the lengths of
    its metadata (JSON: the listing it was built from, and all of the run but its points) and
    of its points' stream, which follows, and the SHA-256 of both."""

    pack: str
    offset: int
    meta: int
    points: int
    digest: str


def built_key(key: str) -> str:
    """A whole run's key in its pack, from everything its build is given (``key``; the pack's
    folder is already one of this runcompare version and code)."""
    return hashlib.sha256(key.encode()).hexdigest()[:32]


def stored_runs(folder: Path) -> dict[str, Stored]:
    """The whole runs kept for run roots in ``folder`` (resolved), by :func:`built_key`: the
    newest pack's entry of a key; a pack that cannot be read, or is not whole, holds none."""
    found: dict[str, Stored] = {}
    try:
        packs = sorted(_pack_folder(folder).glob("*.pack"))
    except OSError:
        return found
    for pack in packs:
        found.update(_index(pack))
    return found


def read_built(stored: Stored | None, listing: list[list[Any]],
               path: Path) -> tuple[Run, Any, bytes] | None:
    """The run ``stored`` holds when it was built from the same files (``listing``, see
    :func:`files_listing`) and its points are as written, with the ``extra`` stored beside it
    and its points as the stored stream (a worker sends them on as they are); ``path`` is
    the run's path as given this time."""
    entry = None if stored is None else _entry(stored)
    if entry is None:
        return None
    data, points = entry
    try:
        meta = json.loads(data)
        if meta["listing"] != listing:
            return None
        scalars = stream_points(points, SCALAR_SCHEMA)
        if scalars.height != meta["points"] or dict(scalars.schema) != SCALAR_SCHEMA:
            return None
        batch = BatchConfig(**_fact_map(meta["batch"]),
                            ramp=tuple((int(a), int(b)) for a, b in meta["ramp"]))
        run = Run(name=meta["name"], path=path, format=meta["source"], sources=meta["sources"],
                  step_unit=meta["step_unit"], batch=batch, scalars=scalars,
                  facts=_fact_map(meta["facts"]),
                  findings=Findings(_finding_list(meta["findings"])),
                  aliases=dict(meta["aliases"]), axis_sources=dict(meta["axis_sources"]),
                  legs=tuple(Leg(*leg) for leg in meta["legs"]),
                  hparams=_fact_map(meta["hparams"]))
    except (OSError, ValueError, KeyError, TypeError, AttributeError,
            pl.exceptions.PolarsError):  # gone, unreadable, or not the types written
        return None
    return run, meta["extra"], points


def built_entry(listing: list[list[Any]], run: Run, extra: Any) -> tuple[bytes, bytes] | None:
    """What :func:`keep_built` keeps of ``run`` built from the files of ``listing`` (and
    ``extra``, plain JSON): its metadata as JSON after the SHA-256 of both (hex), and its
    points as their stream (:func:`points_stream`); None when they cannot be written (no
    error: the run is not kept). The digest is worked out here, by whoever built the run (a
    worker), not by the one process that writes the pack (400 runs: 36 MB to hash, 55 ms)."""
    batch = {f.name: getattr(run.batch, f.name) for f in fields(BatchConfig) if f.name != "ramp"}
    try:
        meta = json.dumps({
            "listing": listing, "points": run.scalars.height, "extra": extra,
            "name": run.name, "source": run.format, "sources": run.sources,
            "step_unit": run.step_unit, "batch": _facts(batch),
            "ramp": [list(step) for step in run.batch.ramp], "facts": _facts(run.facts),
            "findings": _findings(run.findings), "aliases": run.aliases,
            "axis_sources": run.axis_sources,
            "legs": [[leg.leg, leg.first_step, leg.last_step, leg.wall_start, leg.wall_end]
                     for leg in run.legs],
            "hparams": _facts(run.hparams),
        }).encode("utf-8")
        points = points_stream(run.scalars, {"run": run.name})
    except (TypeError, ValueError, pl.exceptions.PolarsError):
        return None
    return _entry_digest(meta, points).encode("ascii") + meta, points


def _entry_digest(meta: bytes, points: bytes) -> str:
    """The SHA-256 (hex) of a kept run's entry: its metadata, then its points."""
    digest = hashlib.sha256(meta)
    digest.update(points)
    return digest.hexdigest()


def keep_built(folder: Path, entries: Mapping[str, tuple[bytes, bytes]]) -> None:
    """Keep whole runs whose roots are in ``folder`` (resolved): ``entries`` by
    :func:`built_key`, each as :func:`built_entry` made it (digest, metadata; points), in one
    new pack. Once the folder
    has :data:`PACKS` packs, the new one takes in every entry of the others (the newest of
    each key) and they are removed. A cache that cannot be written is no error."""
    if not entries:
        return
    try:
        where = _pack_folder(folder)
        packs = sorted(where.glob("*.pack"))
        kept: dict[str, tuple[bytes, bytes]] = {}
        merged = len(packs) + 1 >= PACKS
        for pack in packs if merged else ():
            kept.update(_entries(pack))
        kept.update(entries)
        _write_pack(where / f"{time.time_ns():020d}-{os.getpid()}.pack", kept)
        for pack in packs if merged else ():
            pack.unlink(missing_ok=True)
    except OSError:
        pass


def files_listing(files: list[Path], maybe: list[Path]) -> list[list[Any]]:
    """What :func:`read_built` checks: the ``files`` as :func:`read_cached` lists them, and
    whether each of ``maybe`` is there (and as what); raises OSError when a file is gone."""
    return _listing(files) + [_listing([m])[0] if m.is_file() else [str(m), None]
                              for m in maybe]


def still_listed(listing: list[list[Any]]) -> bool:
    """Whether the files of ``listing`` (as :func:`files_listing` made it) are still as it says:
    each stat'ed again by the path it holds, one it found absent still absent. The formats are
    not asked for their files again: inside :func:`~.sources.codecs.files.one_look` they name
    the same ones from the same listings of their folders (a run of the benchmark's sweep:
    40 µs for this and the passed-over look, against 90 µs for a second listing)."""
    for entry in listing:
        try:
            stat = os.stat(entry[0])
        except OSError:
            if entry[1] is not None:
                return False
            continue
        if entry[1] is None:
            if S_ISREG(stat.st_mode):
                return False
        elif entry[1:] != [stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_ino]:
            return False
    return True


def _pack_folder(folder: Path) -> Path:
    """Where the packs of runs in ``folder`` go: one folder per folder of runs, runcompare
    version and code."""
    parts = [str(_FORMAT), _version(), str(folder), *_code_stamp(whole=True)]
    return cache_dir() / "built" / hashlib.sha256(chr(0).join(parts).encode()).hexdigest()[:32]


def _index(pack: Path) -> dict[str, Stored]:
    """Where a pack's entries are, by key; none when its index is not whole and as written.

    A pack: the SHA-256 of its index (hex) and a newline, the index (JSON, one line: the
    format, and where each entry is after the index) and a newline, then the entries, each
    its metadata (JSON) and its points' stream. The index is small (a sweep's folder of 10,000
    runs: about a megabyte), so a look at one run of it reads little."""
    try:
        with open(pack, "rb") as file:
            digest = file.readline()[:-1]
            body = file.readline()
            start = file.tell()
        if digest.decode("ascii") != hashlib.sha256(body).hexdigest():
            return {}
        index = json.loads(body)
        if index["format"] != _FORMAT:
            return {}
        return {key: Stored(str(pack), start + offset, meta, points, digest)
                for key, (offset, meta, points, digest) in index["entries"].items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}


def _entry(stored: Stored) -> tuple[bytes, bytes] | None:
    """A kept run's metadata and points' stream, as written (None: not whole, or gone)."""
    try:
        with open(stored.pack, "rb") as file:
            file.seek(stored.offset)
            data = file.read(stored.meta + stored.points)
    except OSError:
        return None
    if hashlib.sha256(data).hexdigest() != stored.digest:
        return None
    return data[:stored.meta], data[stored.meta:]


def _entries(pack: Path) -> dict[str, tuple[bytes, bytes]]:
    """A pack's whole entries as :func:`keep_built` takes them (to merge packs)."""
    found = ((key, stored, _entry(stored)) for key, stored in _index(pack).items())
    return {key: (stored.digest.encode("ascii") + entry[0], entry[1])
            for key, stored, entry in found if entry is not None}


#: The length of the SHA-256 (hex) before the metadata of :func:`built_entry`'s entries.
_DIGEST = 64


def _write_pack(target: Path, entries: Mapping[str, tuple[bytes, bytes]]) -> None:
    index, offset = {}, 0
    for key, (head, points) in entries.items():
        meta = len(head) - _DIGEST
        index[key] = [offset, meta, len(points), head[:_DIGEST].decode("ascii")]
        offset += meta + len(points)
    body = json.dumps({"format": _FORMAT, "entries": index}).encode("ascii") + b"\n"

    def write(file: Any) -> None:
        file.write(hashlib.sha256(body).hexdigest().encode("ascii") + b"\n" + body)
        for head, points in entries.values():
            file.write(memoryview(head)[_DIGEST:])
            file.write(points)

    _placed(target, write)


# -- reading an entry ----------------------------------------------------------------------

def _load(entry: Path, listing: list[list[Any]], path: Path) -> RawLog | None:
    """The cached RawLog when the entry is whole, as written and made from the same files
    (``listing``); None otherwise."""
    try:
        digest, _, body = entry.with_suffix(".json").read_bytes().partition(b"\n")
        points = entry.with_suffix(".arrow").read_bytes()
        if digest.decode("ascii") != _digest(body, points):
            return None
        meta = json.loads(body)
        if meta.get("format") != _FORMAT or meta.get("listing") != listing:
            return None
        scalars = stream_points(points, RAW_SCHEMA)
        if scalars.height != meta["points"] or dict(scalars.schema) != RAW_SCHEMA:
            return None
        return _from_meta(meta, scalars, path)
    except (OSError, ValueError, KeyError, TypeError, AttributeError,
            pl.exceptions.PolarsError):  # unreadable, or not the types written: missing
        return None


def _digest(body: bytes, points: bytes) -> str:
    return hashlib.sha256(body + b"\0" + points).hexdigest()


def _from_meta(meta: dict[str, Any], scalars: pl.DataFrame, path: Path) -> RawLog:
    argument = meta["argument"]
    return RawLog(
        source=meta["source"], path=_rebase(meta["path"], argument, path), scalars=scalars,
        step_unit=meta["step_unit"],
        facts=_fact_map(meta["facts"]), findings=_finding_list(meta["findings"]),
        files=[_rebase(f, argument, path) for f in meta["files"]],
        aliases=dict(meta["aliases"]), name=meta["name"],
        leg_starts={int(k): int(v) for k, v in meta["leg_starts"].items()},
        hparams={k: Fact(f["value"], f["source"], "config") for k, f in meta["hparams"].items()})


def _rebase(stored: str, argument: str, path: Path) -> Path:
    """A stored path spelled from this call's ``path`` as it was from the stored argument."""
    old = Path(stored)
    try:
        return path / old.relative_to(argument) if stored != argument else path
    except ValueError:
        return old


# -- writing an entry ----------------------------------------------------------------------

def _store(entry: Path, listing: list[list[Any]], path: Path, raw: RawLog) -> None:
    """Write an entry: its points, then its metadata with the digest of both (so a
    half-written entry is never taken for a whole one)."""
    body = json.dumps({  # first: a value JSON cannot hold stops here
        "format": _FORMAT, "listing": listing, "argument": str(path), "points": raw.points,
        "source": raw.source, "path": str(raw.path), "step_unit": raw.step_unit,
        "facts": _facts(raw.facts), "findings": _findings(raw.findings),
        "files": [str(f) for f in raw.files], "aliases": raw.aliases, "name": raw.name,
        "leg_starts": {str(k): v for k, v in raw.leg_starts.items()},
        "hparams": {k: f.to_json() for k, f in raw.hparams.items()},
    }).encode("utf-8")
    data = points_stream(raw.scalars)
    _placed(entry.with_suffix(".arrow"), lambda f: f.write(data))
    _atomic(entry.with_suffix(".json"),
            lambda f: f.write(_digest(body, data).encode("ascii") + b"\n" + body))


def points_stream(points: pl.DataFrame, same: Mapping[str, Any] | None = None) -> bytes:
    """``points`` as :func:`stream_points` reads them: a line (JSON) giving the rows, the
    columns that hold no value, the columns ``same`` says hold one value in every row (a
    run's name: the caller knows it, and it is not looked at) and the byte length of the
    first stream; then the other columns as a zstd-compressed Arrow IPC stream (smaller than
    parquet for these frames, and written and read in a fifth of its time), and the values
    that do not compress as a second, uncompressed one (:func:`_compresses`). Text columns
    are written as bytes and made text again as they are read: a text column read from a
    stream has its values checked as UTF-8 one at a time, bytes made text in one pass (a run
    of 10,000 points reads back 0.035 ms sooner, a tenth of its read).

    Neither kind of column in the line takes memory where a stream read writes it out: a
    run of trainer_state.json has 7 of its 12 columns empty and its name on every point, and
    reading its stream back touches about a third of the memory (400 runs: 0.74 ms a run
    -> 0.51 without the empty columns; 200 runs read back in a loop, 0.84 ms a run with the
    name on every point, 0.45-0.53 ms without)."""
    same = dict(same or {})
    height = points.height
    columns = [points.get_column(name) for name in points.columns if name not in same]
    empty = [column.name for column in columns if height and column.null_count() == height]
    packed: list[pl.Series] = []
    plain: list[pl.Series] = []
    for column in columns:
        if column.name not in empty:
            (packed if _compresses(column) else plain).append(
                column.cast(pl.Binary) if column.dtype == pl.String else column)
    first = io.BytesIO()
    pl.DataFrame(packed).write_ipc_stream(first, compression="zstd")
    buffer = io.BytesIO()
    buffer.write(json.dumps([height, empty, same, first.tell()]).encode("utf-8") + b"\n")
    buffer.write(first.getbuffer())
    if plain:
        pl.DataFrame(plain).write_ipc_stream(buffer)
    return buffer.getvalue()


def _compresses(column: pl.Series) -> bool:
    """Whether zstd is worth it for the column: every column but the points' values, and
    those when they are all float32's (TensorBoard and W&B log float32: their doubles end in
    29 zero bits and compress to about half). Values logged as doubles (trainer_state.json)
    compress to 95% of their size: uncompressed, a run of 10,000 reads back 0.035 ms sooner
    (a tenth of its read; writing it takes as long) and its stream is 4 kB larger."""
    if column.name != "value" or column.dtype != pl.Float64:
        return True
    values = column.to_numpy()
    narrowed = values.astype(np.float32)
    return bool((narrowed == values).all() or np.array_equal(narrowed, values, equal_nan=True))


def stream_points(stream: bytes, schema: Mapping[str, PolarsDataType]) -> pl.DataFrame:
    """The points :func:`points_stream` wrote, on ``schema``'s columns in its order; raises
    ValueError, TypeError or a PolarsError when ``stream`` is not such a stream of them."""
    head, _, body = stream.partition(b"\n")
    height, empty, same, split = json.loads(head)
    written = pl.read_ipc_stream(body[:split])
    if split < len(body):  # the values written uncompressed (the first stream may hold none)
        rest = pl.read_ipc_stream(body[split:])
        written = written.hstack(rest) if written.width else rest
    points = pl.DataFrame([repeated(None, height, dtype).alias(name) if name in empty or
                           name in same else written.get_column(name).cast(dtype)  # text: bytes
                           for name, dtype in schema.items()])  # each of same: below
    return with_constants(points, same)


def _placed(target: Path, write: Any) -> None:
    """:func:`_atomic` in a folder made if it is not there (also when it was removed since)."""
    _made(target.parent)
    try:
        _atomic(target, write)
    except FileNotFoundError:  # the cache folder was removed meanwhile
        _MADE.discard(target.parent)
        _made(target.parent)
        _atomic(target, write)


def _made(folder: Path) -> None:
    """``folder`` made (once a process: a mkdir of a folder that two processes fill at once
    waits on the filesystem's lock, about a millisecond an entry)."""
    if folder not in _MADE:
        folder.mkdir(parents=True, exist_ok=True)
        _MADE.add(folder)


_MADE: set[Path] = set()


def _facts(facts: Mapping[str, Fact[Any]]) -> dict[str, dict[str, Any]]:
    return {k: {"value": f.value, "source": f.source, "kind": f.kind} for k, f in facts.items()}


def _findings(findings: list[Finding]) -> list[dict[str, Any]]:
    return [{"level": f.level, "code": f.code, "message": f.message, "run": f.run}
            for f in findings]


def _fact_map(stored: Mapping[str, Any]) -> dict[str, Fact[Any]]:
    return {k: Fact(f["value"], f["source"], f["kind"]) for k, f in stored.items()}


def _finding_list(stored: list[Any]) -> list[Finding]:
    return [Finding(f["level"], f["code"], f["message"], f["run"]) for f in stored]


def _atomic(target: Path, write: Any) -> None:
    """Write ``target`` through a temporary file in its folder, then rename it into place."""
    handle, name = tempfile.mkstemp(dir=target.parent, prefix=target.name, suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as file:
            write(file)
        os.replace(name, target)
    except BaseException:
        Path(name).unlink(missing_ok=True)
        raise
