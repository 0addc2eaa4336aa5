"""detectron2 output folders: ``metrics.json``, which its ``JSONWriter`` appends one object a
line to (``detectron2.utils.events.JSONWriter.write``, checked against its source).

Each line holds the scalars of one iteration (``json.dumps(..., sort_keys=True)``) and
``iteration`` = ``storage.iter``: the trainer's 0-based iteration index, written by the
``PeriodicWriter`` hook after iteration ``i`` when ``(i + 1) % period == 0`` (iteration 19 is
the 20th update, 299 the last of 300). So a line's step is ``iteration + 1``, the optimizer
updates done, as for Lightning's 0-based steps. Losses (``total_loss``, ``loss_*``) are median
smoothed over a window of 20 iterations by the writer; ``lr``, ``time``, ``data_time``,
``eta_seconds`` and the evaluation results an ``EvalHook`` puts (``bbox/AP``, ...) at the
iteration it ran are metrics like the others. An iteration that goes back (a resume) starts a
new leg.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ...errors import InputError
from ...model import Fact, RawLog
from ..codecs.files import files_in, is_dir, is_file, roots_under
from ..format import Format
from ..naming import PRINTED, canonical_names
from ..textlog.points import to_raw
from ..textlog.records import numbers, read_records, record_rows

__all__ = ["FORMAT", "LOG", "expand", "files", "read"]

LOG = "metrics.json"
#: Bytes of a metrics.json looked at to tell detectron2's from another file of that name.
_HEAD = 1 << 16


def files(path: Path) -> list[Path]:
    """The metrics.json of the run at ``path``: :func:`_own_files` of ``path``, or of the one
    output folder below it (:func:`expand`); none for a folder of several."""
    roots = expand(path)
    return _own_files(roots[0]) if len(roots) == 1 else []


def _own_files(path: Path) -> list[Path]:
    """The metrics.json at ``path`` (the file, or the one in the folder) whose first line is
    an object with an ``iteration``."""
    try:
        if is_file(path):
            candidates = [path] if path.name == LOG else []
        else:
            candidates = [file for file in files_in(path) if file.name == LOG]
        return [file for file in candidates if _is_detectron2(file)]
    except OSError:  # a folder under one this user may not read
        return []


def expand(path: Path) -> list[Path]:
    """The output folders at ``path``: itself when it holds a detectron2 metrics.json, else
    those further down (:func:`~..codecs.files.roots_under`)."""
    if _own_files(path):
        return [path]
    return roots_under(path, lambda folder: bool(_own_files(folder))) if is_dir(path) else []


def _is_detectron2(file: Path) -> bool:
    with file.open("rb") as handle:
        first = handle.read(_HEAD).split(b"\n", 1)[0]
    try:
        value = json.loads(first)
    except ValueError:
        return False
    return isinstance(value, dict) and isinstance(value.get("iteration"), int)


def read(path: Path, *, hints: Mapping[str, object] | None = None) -> RawLog:
    """Every point of the detectron2 metrics.json at ``path``."""
    found = files(path)
    if not found:
        raise InputError(f"{path}: no detectron2 {LOG} found (lines like "
                         "{\"iteration\": 19, \"total_loss\": 2.03, \"lr\": 1.6e-05, ...})")
    file = found[0]
    log = read_records(file)
    kept = [(line, record) for line, record in log.objects
            if _step(record) is not None and numbers(record, {"iteration"})]
    if not kept:
        raise InputError(f"{file}: no line with an iteration and a number")
    rows, keys = record_rows([(line, _step(r), numbers(r, {"iteration"}))  # type: ignore[misc]
                              for line, r in kept])
    names = canonical_names(keys, PRINTED)
    last = max(kept, key=lambda item: item[1]["iteration"])
    facts = {"global_step": Fact(last[1]["iteration"] + 1,
                                 f"{file.name}: iteration {last[1]['iteration']} (line "
                                 f"{last[0]}) + 1", "logged")}
    return RawLog(path=path, scalars=to_raw(rows, names), step_unit="optimizer",
                  facts=facts, findings=log.findings("detectron2 metrics lines"), files=[file],
                  aliases={name: key for key, name in names.items() if name != key})


def _step(record: dict[str, Any]) -> int | None:
    """Updates done after the line's iteration (0-based) ran."""
    iteration = record.get("iteration")
    if not isinstance(iteration, int) or isinstance(iteration, bool) or iteration < 0:
        return None
    return iteration + 1


FORMAT = Format(
    "detectron2",
    "detectron2 output folders (or a folder of them): metrics.json ({\"iteration\": 19, \"total_loss\": ..., "
    "\"lr\": ...} a line)",
    read=read, files=files, sniff=lambda path: bool(expand(path)), expand=expand)
