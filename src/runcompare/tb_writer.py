"""Write a run's points as a TensorBoard event file, its step being a chosen axis.

Records hold the ``tensorboard`` package's ``Event``/``Summary`` protos, as ``EventFileWriter``
writes them, framed as TFRecords (length, its masked CRC-32C, payload, its masked CRC-32C) with
the project's CRC (:mod:`runcompare.sources.codecs.crc`), synchronously: no background thread,
one file per run folder. Each logged step (a value of the axis and a wall time) becomes one
event holding a ``simple_value`` per metric, the classic scalar form every TensorBoard version
reads. TensorBoard stores scalars as float32.

The same points give the same bytes: nothing comes from the clock, the host or the process. The
file is ``events.out.tfevents.<start>.runcompare``, ``<start>`` being the run's first logged
wall time in whole seconds (0 when no finite one was logged); a point logged without a wall time has
wall time 0, the protobuf default for "not set" (TensorBoard's wall-time axis shows it at
1970), rather than a time that was never logged.
"""

from __future__ import annotations

import math
import struct
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote

import polars as pl

from .outputs import head
from .sources.codecs.crc import masked_crc32c

if TYPE_CHECKING:  # the protos are imported where an event is made: other exports skip them
    from tensorboard.compat.proto.event_pb2 import Event

__all__ = ["TB_AXES", "TB_STEP_UNITS", "WRITER", "run_folder", "whole_steps", "write_events",
           "written_here"]

#: ``source_metadata.writer`` of the first event of every file runcompare writes: its mark.
WRITER = "runcompare"

#: Axes a TensorBoard step can hold (time axes are TensorBoard's own). Its steps are whole
#: numbers of at most 2⁶³ − 1: FLOPs are rounded, device-hours written as device-seconds.
TB_AXES = ("tokens", "samples", "micro_step", "step", "flops", "device_hours")

#: What a step means where it is not the axis' own unit.
TB_STEP_UNITS = {"flops": "training FLOPs, rounded to whole FLOPs",
                 "device_hours": "device-seconds (device_hours × 3600, rounded)"}

_INT64_MAX = 2 ** 63 - 1

#: Characters a run folder encodes: those Windows rejects in a file name, and ``%`` (so the
#: encoding is reversible); ``/`` only where the name cannot be nested folders.
_UNSAFE = frozenset('<>:"/\\|?*%')


def run_folder(name: str) -> str:
    """The folder (relative to the logdir) of a run, which TensorBoard shows as its name.

    The name as it is, ``/`` parts as nested folders, but for what a file system rejects
    (Windows' reserved characters, control characters, a leading dot, a trailing dot or
    space): that is percent-encoded, so ``urllib.parse.unquote`` gives the name back.

    >>> run_folder("sweep/lr 3e-4, bs=64 <a> é.")
    'sweep/lr 3e-4, bs=64 %3Ca%3E é%2E'
    >>> run_folder("../x"), run_folder("a//b")
    ('%2E%2E/x', 'a%2F%2Fb')
    """
    parts = name.split("/")
    return "/".join(map(_part, parts)) if all(parts) else _part(name)


def _part(text: str) -> str:
    """One folder name: unsafe characters, a leading dot, a trailing dot or space encoded."""
    ends = {".": "%2E", " ": "%20"}
    chars = [quote(c, safe="") if c in _UNSAFE or not c.isprintable() else c for c in text]
    if chars and chars[0] == ".":
        chars[0] = "%2E"
    if chars and chars[-1] in ends:
        chars[-1] = ends[chars[-1]]
    return "".join(chars)


def write_events(frame: pl.DataFrame, folder: Path, *, x: str) -> Path:
    """Write the points of ``frame`` (one run, ``SCALAR_SCHEMA``) to an event file in ``folder``.

    The event step is column ``x`` (which must be known for every point); the event wall time is
    the logged one, or 0 where none was logged (see the module docstring). Returns the file.
    """
    steps = _steps(frame, x=x)
    logged = frame.get_column("wall_time").drop_nans().min()
    start = float(logged) if isinstance(logged, float) and math.isfinite(logged) else 0.0
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"events.out.tfevents.{int(start):010d}.runcompare"
    with path.open("wb") as file:
        file.write(_record(_header(start).SerializeToString()))
        for step, wall_time, tags, values in steps.iter_rows():
            file.write(_record(_event(step, wall_time, tags, values).SerializeToString()))
    return path


def whole_steps(frame: pl.DataFrame, x: str) -> pl.DataFrame | None:
    """``frame`` with column ``x`` as whole-number TensorBoard steps (:data:`TB_STEP_UNITS`);
    None when a value does not fit a step (negative, or past 2⁶³ − 1).

    >>> f = pl.DataFrame({"device_hours": [0.0024, 0.0186]})
    >>> whole_steps(f, "device_hours")["device_hours"].to_list()
    [9, 67]
    """
    if x not in TB_STEP_UNITS:
        return frame
    scale = 3600.0 if x == "device_hours" else 1.0
    values = (pl.col(x).cast(pl.Float64) * scale).round()
    if not frame.select(((values >= 0) & (values < _INT64_MAX)).all()).item():
        return None
    return frame.with_columns(values.cast(pl.Int64).alias(x))


def _record(data: bytes) -> bytes:
    """One TFRecord: the length (u64), its masked CRC-32C, the data, its masked CRC-32C."""
    length = struct.pack("<Q", len(data))
    return (length + struct.pack("<I", masked_crc32c(length)) + data
            + struct.pack("<I", masked_crc32c(data)))


def _steps(frame: pl.DataFrame, *, x: str) -> pl.DataFrame:
    """One row per (axis value, wall time) in axis order, with the metrics and values there."""
    return (frame.with_columns(pl.col("wall_time").fill_null(0.0))
            .sort(x, "wall_time", maintain_order=True)
            .group_by(x, "wall_time", maintain_order=True)
            .agg("metric", "value"))


def written_here(path: Path) -> bool:
    """Whether ``path`` is an event file runcompare wrote: its first record is the header
    event naming :data:`WRITER`."""
    start = head(path, 12)
    if len(start) < 12 or start[8:12] != struct.pack("<I", masked_crc32c(start[:8])):
        return False
    (length,) = struct.unpack("<Q", start[:8])
    record = head(path, 12 + length)[12:] if length < 4096 else b""
    from google.protobuf.message import DecodeError
    from tensorboard.compat.proto.event_pb2 import Event

    try:
        event = Event.FromString(record)
    except DecodeError:
        return False
    return bool(event.file_version.startswith("brain.Event:")
                and event.source_metadata.writer == WRITER)


def _header(wall_time: float) -> Event:
    """The first record of every event file: the format version TensorBoard checks."""
    from tensorboard.compat.proto.event_pb2 import Event, SourceMetadata

    return Event(wall_time=wall_time, file_version="brain.Event:2",
                 source_metadata=SourceMetadata(writer=WRITER))


def _event(step: int, wall_time: float, tags: list[str], values: list[float]) -> Event:
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.compat.proto.summary_pb2 import Summary

    summary = Summary(value=[Summary.Value(tag=tag, simple_value=value)
                             for tag, value in zip(tags, values)])
    return Event(wall_time=wall_time, step=step, summary=summary)
