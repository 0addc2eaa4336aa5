"""Which files are a text format's logs: a file as given, or a folder's ``*.log``, ``*.out``,
``*.txt``, ``*.err``, ``*.jsonl`` and ``*.ndjson`` files whose first bytes (:func:`head`) the
format claims; never W&B's own (its debug logs, a run folder's copy of the console).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path

from ...errors import InputError
from ..codecs.files import LISTINGS, files_in, folder_stamp, is_file, natural, resolved
from .lines import CHUNK_BYTES

__all__ = ["HEAD_BYTES", "LOG_SUFFIXES", "head", "log_files", "logs_at"]

#: Bytes of a file's beginning that ``sniff`` looks at.
HEAD_BYTES = 64 << 10
#: Suffixes of the files in a folder that may hold captured stdout.
LOG_SUFFIXES = (".log", ".out", ".txt", ".err", ".jsonl", ".ndjson")
#: W&B's own files: its debug logs, and a run folder's copy of the console (``files/output.log``).
_WANDB_DEBUG = {"debug.log", "debug-internal.log", "debug-core.log"}
_WANDB_RUN = re.compile(r"(?:offline-)?run-\d{8}_\d{6}-\w+$")


def head(path: Path, size: int = HEAD_BYTES) -> str:
    """The first ``size`` bytes of ``path`` as text ("" if it cannot be read); when they hold
    less than two whole lines (a megabyte-long first line), the ``size`` bytes after the
    first line end within the first ``CHUNK_BYTES`` are added. Kept for the file's size and
    mtime, so the text formats that look at one file in turn read it once."""
    try:
        stat = path.stat()
    except OSError:
        return ""
    return _head(str(path), stat.st_size, stat.st_mtime_ns, stat.st_ino, size)


@lru_cache(maxsize=1 << 14)
def _head(path: str, _size: int, _mtime: int, _inode: int, size: int) -> str:
    try:
        with open(path, "rb") as handle:
            data = handle.read(size)
            if data.count(b"\n") < 2 and len(data) == size:
                rest = handle.read(CHUNK_BYTES)
                end = rest.find(b"\n")
                data += rest[end:end + size] if end >= 0 else b""
    except OSError:
        return ""
    return data.decode("utf-8", errors="replace")


def log_files(path: Path, claims: Callable[[str], bool]) -> list[Path]:
    """The files at ``path`` whose beginning ``claims`` accepts, in natural name order.

    ``path`` may be a file (taken whatever its name) or a folder (its own ``*.log``, ``*.out``,
    ``*.txt``, ``*.err``, ``*.jsonl`` and ``*.ndjson`` files; subfolders are not searched). W&B's debug logs and the
    console copy in a W&B run folder are never taken.
    """
    if is_file(path):
        candidates = [] if _is_wandb_file(path) else [path]
    else:
        candidates = _folder_logs(path)
    return [p for p in candidates if claims(head(p))]


def _folder_logs(folder: Path) -> list[Path]:
    """The log files in ``folder`` (:func:`log_files`), in natural name order."""
    stamp = folder_stamp(folder)  # one stat a folder inside codecs.files.one_look
    return [] if stamp is None else list(_logs_in(folder, *stamp))


@lru_cache(maxsize=LISTINGS)
def _logs_in(folder: Path, _mtime: int, _inode: int) -> tuple[Path, ...]:
    """:func:`_folder_logs`, kept for the folder's mtime (an entry added, removed or renamed
    changes it), so the text formats that look at one folder in turn list it once."""
    if _in_wandb_run(folder):  # once for the folder's files, not once each
        return ()
    return tuple(sorted((file for file in files_in(folder) if file.suffix in LOG_SUFFIXES
                         and file.name not in _WANDB_DEBUG), key=lambda file: natural(file.name)))


def logs_at(path: Path, claims: Callable[[str], bool], *, missing: str) -> list[Path]:
    """The logs a source reads at ``path``: the claimed ones, else the file itself; raises
    :class:`InputError` saying what was looked for (``missing``) when there is none."""
    logs = log_files(path, claims) or ([path] if is_file(path) else [])
    if not logs:
        raise InputError(f"{path}: {missing}")
    return logs


def _is_wandb_file(path: Path) -> bool:
    return path.name in _WANDB_DEBUG or _in_wandb_run(resolved(path).parent)


def _in_wandb_run(folder: Path) -> bool:
    """Whether ``folder`` is in a W&B run folder (it, or one of its two parents)."""
    folder = resolved(folder)
    return any(_WANDB_RUN.match(f.name) for f in [folder, *folder.parents[:2]])
