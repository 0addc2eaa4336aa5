"""Write a run's points as a TensorBoard event file, its step being a chosen axis.

Records are framed by the ``tensorboard`` package's own :class:`RecordWriter` (length, masked
CRC32C, payload, CRC) and hold its ``Event``/``Summary`` protos, as ``EventFileWriter`` writes
them, but synchronously: no background thread, one file per run folder. Each logged step (a
value of the axis and a wall time) becomes one event holding a ``simple_value`` per metric, the
classic scalar form every TensorBoard version reads. TensorBoard stores scalars as float32.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

import polars as pl
from tensorboard.compat.proto.event_pb2 import Event, SourceMetadata
from tensorboard.compat.proto.summary_pb2 import Summary
from tensorboard.summary.writer.record_writer import RecordWriter

__all__ = ["TB_AXES", "TB_STEP_UNITS", "run_folder", "whole_steps", "write_events"]

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


def write_events(frame: pl.DataFrame, folder: Path, *, x: str, now: float) -> Path:
    """Write the points of ``frame`` (one run, ``SCALAR_SCHEMA``) to an event file in ``folder``.

    The event step is column ``x`` (which must be known for every point); the event wall time is
    the logged one, or ``now`` (the export's time) where none was logged. Returns the file.
    """
    steps = _steps(frame, x=x, now=now)
    logged = frame.get_column("wall_time").min()
    start = now if logged is None else float(logged)  # type: ignore[arg-type]
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"events.out.tfevents.{int(now):010d}.runcompare"
    with path.open("wb") as file:
        writer = RecordWriter(file)
        writer.write(_header(start).SerializeToString())
        for step, wall_time, tags, values in steps.iter_rows():
            writer.write(_event(step, wall_time, tags, values).SerializeToString())
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


def _steps(frame: pl.DataFrame, *, x: str, now: float) -> pl.DataFrame:
    """One row per (axis value, wall time) in axis order, with the metrics and values there."""
    return (frame.with_columns(pl.col("wall_time").fill_null(now))
            .sort(x, "wall_time", maintain_order=True)
            .group_by(x, "wall_time", maintain_order=True)
            .agg("metric", "value"))


def _header(wall_time: float) -> Event:
    """The first record of every event file: the format version TensorBoard checks."""
    return Event(wall_time=wall_time, file_version="brain.Event:2",
                 source_metadata=SourceMetadata(writer="runcompare"))


def _event(step: int, wall_time: float, tags: list[str], values: list[float]) -> Event:
    summary = Summary(value=[Summary.Value(tag=tag, simple_value=value)
                             for tag, value in zip(tags, values)])
    return Event(wall_time=wall_time, step=step, summary=summary)
