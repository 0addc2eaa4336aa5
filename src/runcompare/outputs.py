"""What runcompare may write over: nothing but its own earlier outputs, and never a run.

Every output (the HTML report, the PNG/SVG figures, every export) is checked with
:func:`claim` before anything is written, whatever ``--force`` says: it may not be one of the
runs being read or lie inside one, and a path that exists may be replaced only when it is an
earlier output of the same kind that runcompare wrote, which each writer recognises by the
mark it writes (the writer's ``ours`` test):

============== ==============================================================================
HTML report    ``<meta name="generator" content="runcompare">`` in its first KiB
PNG figure     a ``tEXt`` chunk ``Software: runcompare`` right after ``IHDR``
SVG figure     the comment ``<!-- runcompare -->`` opening the file
csv export     its header: exactly the export's columns, in order
jsonl export   its first line: an object of exactly the export's columns, in order
parquet        a folder of ``run=*/part-*.parquet`` files only, each with the key
               ``runcompare`` in its file metadata
tensorboard    a folder of ``events.out.tfevents.*`` files only, each opening with an event
               whose ``source_metadata.writer`` is ``runcompare``
============== ==============================================================================

csv and JSON lines can hold no mark that every reader skips, so their header is their mark.
An empty folder is free for a folder output. A symbolic link is never an output. Files are
written through a temporary file in the same folder and renamed into place
(:func:`write_atomic`), so a reader never sees half a file and a link is replaced, not
followed.
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from .errors import InputError
from .model import Run

__all__ = ["claim", "head", "run_holding", "write_atomic"]


def claim(path: Path, *, runs: Sequence[Run], what: str, ours: Callable[[Path], bool],
          folder: bool = False, fix: str = "choose another --output") -> bool:
    """Check that ``path`` may be written as ``what`` (e.g. ``"an HTML report"``).

    Raises :class:`InputError` naming the path and ``fix`` when ``path`` is one of ``runs``
    or inside one, exists and holds one (replacing it would remove the run), or exists and is
    not ``ours``. Returns whether it exists (an earlier output to be replaced); an empty
    folder counts as free when ``folder``.
    """
    run = run_holding(path, runs)
    if run is not None:
        raise InputError(f"{path} is inside run {run.name!r} ({run.path}), which is being read; "
                         f"runcompare never writes into a run's logs: {fix}")
    held = next((run for run in runs if _inside(_on_disk(Path(run.path)), path)), None)
    if held is not None and (path.exists() or path.is_symlink()):
        raise InputError(f"{path} holds run {held.name!r} ({held.path}), which is being read, "
                         f"so it is not replaced: {fix}")
    if not path.exists() and not path.is_symlink():
        return False
    if folder and path.is_dir() and not path.is_symlink() and not any(path.iterdir()):
        return False
    if path.is_symlink() or not ours(path):
        raise InputError(f"{path} exists and is not {what} runcompare wrote, so it is left "
                         f"alone (--force or not); remove it yourself or {fix}")
    return True


def run_holding(path: Path, runs: Sequence[Run]) -> Run | None:
    """The run of ``runs`` that ``path`` is, or lies inside (links followed), if any.

    A run inside a file that holds several (``mlflow.db/<run_id>``, a panel CSV's run) counts
    as the file or folder that holds it.
    """
    return next((run for run in runs if _inside(path, _on_disk(Path(run.path)))), None)


def _inside(path: Path | None, folder: Path | None) -> bool:
    """Whether ``path`` is ``folder`` or lies inside it, links followed."""
    if path is None or folder is None:
        return False
    target, root = Path(os.path.realpath(path)), Path(os.path.realpath(folder))
    return target == root or root in target.parents


def _on_disk(path: Path) -> Path | None:
    """``path`` when it exists, else the file or folder that holds it when that does (a
    virtual root is ``<holder>/<run>``), links resolved."""
    for candidate in (path, path.parent):
        if candidate.exists():
            return Path(os.path.realpath(candidate))
    return None


def head(path: Path, size: int) -> bytes:
    """The first ``size`` bytes of ``path`` when it is a regular file, else ``b""`` (a FIFO or
    device is never opened for reading, so a check never blocks)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
        with os.fdopen(fd, "rb") as file:
            return file.read(size) if stat.S_ISREG(os.fstat(fd).st_mode) else b""
    except OSError:
        return b""


def write_atomic(path: Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` (parent folders made) through a temporary sibling, with the
    mode a plain write gives: the replaced file's, else 0o666 less the umask (not the
    temporary file's 0o600, which kept a report from a web server or a shared folder)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(data)
            os.fchmod(file.fileno(), _mode_for(path))
        os.replace(name, path)
    except BaseException:
        Path(name).unlink(missing_ok=True)
        raise
    return path


def _mode_for(path: Path) -> int:
    """The permission bits a plain ``open(path, "w")`` leaves: the existing file's, else
    0o666 less the process's umask."""
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        mask = os.umask(0o022)  # read by setting it; put back at once
        os.umask(mask)
        return 0o666 & ~mask
