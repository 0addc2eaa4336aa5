"""LLaMA-Factory output folders: ``trainer_log.jsonl``, which its ``LogCallback`` appends to at
each of the Trainer's logs.

What the writer puts in a line (``llamafactory.train.callbacks.LogCallback.on_log``, checked
against its source): ``current_steps`` = ``state.global_step`` (the optimizer step),
``total_steps`` = ``state.max_steps``, then from the Trainer's last ``log_history`` entry
``loss``, ``eval_loss``, ``predict_loss``, ``reward``, ``accuracy`` (``rewards/accuracies``),
``lr`` (``learning_rate``; older releases wrote ``learning_rate``) and ``epoch``;
``percentage``, ``elapsed_time`` and ``remaining_time`` (progress, as text); with a token count
``throughput`` (tokens per second since the start) and ``total_tokens``
(``state.num_input_tokens_seen``, cumulative); with ``RECORD_VRAM`` ``vram_allocated`` and
``vram_reserved`` (GiB). Keys whose value is None are left out, so the end-of-training log is a
line of ``epoch`` (and the token counters) alone.

So a line's step is its ``current_steps``, in optimizer steps; ``total_tokens`` is the
token counter (``train/num_input_tokens_seen``). A prediction-only run writes progress lines
of its evaluation batches (``current_steps`` counts batches, no metric): such a file is
refused, it holds no training. The folder usually also holds the Trainer's
``trainer_state.json``, whose log history this file repeats: that source's points win
(:attr:`~..format.Format.defers_to`), and the loader says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import polars as pl

from ...errors import InputError
from ...model import Fact, RawLog
from ..codecs.files import files_in, is_dir, is_file, roots_under
from ..format import Format
from ..naming import canonical_names
from ..textlog.points import to_raw
from ..textlog.records import numbers, read_records, record_rows

__all__ = ["FORMAT", "LOG", "expand", "files", "read"]

LOG = "trainer_log.jsonl"
#: Keys of a line that are progress, not metrics.
_PROGRESS = {"current_steps", "total_steps", "percentage"}
#: The writer's names -> the Trainer's (which :func:`canonical_names` knows).
_RENAMES = {"lr": "learning_rate", "total_tokens": "num_input_tokens_seen",
            "accuracy": "rewards/accuracies"}


def files(path: Path) -> list[Path]:
    """The trainer_log.jsonl of the run at ``path``: :func:`_own_files` of ``path``, or of the
    one output folder below it (:func:`expand`); none for a folder of several."""
    roots = expand(path)
    return _own_files(roots[0]) if len(roots) == 1 else []


def _own_files(path: Path) -> list[Path]:
    """The trainer_log.jsonl at ``path`` (the file, or the one in the folder)."""
    try:
        if is_file(path):
            return [path] if path.name == LOG else []
    except OSError:  # a folder under one this user may not read
        return []
    return [file for file in files_in(path) if file.name == LOG]  # [] for a folder unread


def expand(path: Path) -> list[Path]:
    """The output folders at ``path``: itself when it holds a trainer_log.jsonl, else those
    further down (``saves/<model>/lora/<run>``; :func:`~..codecs.files.roots_under`)."""
    if _own_files(path):
        return [path]
    return roots_under(path, lambda folder: bool(_own_files(folder))) if is_dir(path) else []


def read(path: Path, *, hints: Mapping[str, object] | None = None) -> RawLog:
    """Every point of the trainer_log.jsonl at ``path``."""
    found = files(path)
    if not found:
        raise InputError(f"{path}: no {LOG} found")
    file = found[0]
    log = read_records(file)
    records = log.objects
    rows, names = _rows(file, records)
    scalars = to_raw(rows, names)
    return RawLog(path=path, scalars=scalars, step_unit="optimizer", facts=_facts(file, records),
                  findings=log.findings("LLaMA-Factory log lines"), files=[file],
                  aliases={name: key for key, name in names.items() if name != key})


def _rows(file: Path, records: list[tuple[int, dict[str, Any]]]
          ) -> tuple[pl.DataFrame, dict[str, str]]:
    """One row per line with a step and a metric (step, leg, a column per key), and each
    key's canonical name."""
    kept = [(line, record) for line, record in records
            if _step(record) is not None and _metrics(record)]
    if not kept:
        what = ("progress lines only (current_steps, total_steps, percentage: the batches of a "
                "prediction or evaluation run, not training steps)" if records else
                "no line with a current_steps and a number")
        raise InputError(f"{file}: LLaMA-Factory's log holds {what}; there is nothing to plot")
    rows, keys = record_rows([(line, _step(record), _metrics(record))  # type: ignore[misc]
                              for line, record in kept])
    names = canonical_names([_RENAMES.get(key, key) for key in keys])
    names = {key: names[_RENAMES.get(key, key)] for key in keys}
    return rows, names


def _step(record: dict[str, Any]) -> int | None:
    step = record.get("current_steps")
    whole = isinstance(step, int) and not isinstance(step, bool) and step >= 0
    return step if whole else None


def _metrics(record: dict[str, Any]) -> dict[str, float]:
    """The numbers of a line that are metrics (not progress; booleans are no numbers)."""
    return numbers(record, _PROGRESS)


def _facts(file: Path, records: list[tuple[int, dict[str, Any]]]) -> dict[str, Fact[Any]]:
    """max_steps (the last line's total_steps), the last step and the last token count."""
    facts: dict[str, Fact[Any]] = {}
    for key, name in (("total_steps", "max_steps"), ("current_steps", "global_step"),
                      ("total_tokens", "tokens_seen")):
        values = [(line, r[key]) for line, r in records
                  if isinstance(r.get(key), int) and not isinstance(r.get(key), bool)
                  and r[key] > 0]
        if values:
            line, value = values[-1] if key != "current_steps" else max(values,
                                                                         key=lambda v: v[1])
            facts[name] = Fact(value, f"{file.name}: {key} (line {line})", "logged")
    return facts


FORMAT = Format(
    "llamafactory",
    "LLaMA-Factory output folders (or a folder of them): trainer_log.jsonl "
    "({\"current_steps\": 10, \"total_steps\": 375, \"loss\": ...})",
    read=read, files=files, sniff=lambda path: bool(expand(path)), expand=expand,
    defers_to=("hf-trainer",))
