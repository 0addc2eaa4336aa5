"""Log formats behind one description (:class:`~.format.Format`), and one registry built from them.

Layers (imports point down; ``tests/test_layers.py`` holds the rule):

- :mod:`.formats`: one module per log format, each exporting one ``FORMAT``; formats never
  import each other (modules named ``_x`` there are helpers of a format, named after it; the
  W&B formats and their shared helpers are :mod:`.formats.wandb`);
- :mod:`.textlog`: lines to numbers for every text format (line reading, layouts, the native
  scanner and the polars splitter beside it);
- :mod:`.codecs`: bytes to records, knowing no log format (protobuf wire, TFRecord framing,
  the LevelDB log, CRC, whole-file reading);
- :mod:`.naming` (the one metric-name canonicaliser) and :mod:`.config` (configuration keys
  to facts).

Adding a format = one module exporting ``FORMAT`` + one line in :data:`FORMATS`
(``docs/adding-a-format.md``).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from ..display import did_you_mean
from ..errors import InputError, NoLogsFoundError, UsageError
from .codecs.files import (
    LFS_POINTER,
    exists,
    files_in,
    is_dir,
    is_file,
    lfs_message,
    may_read,
    one_look,
    passed_over,
    resolved,
)
from .format import Format, settle_claims
from .formats import (
    axolotl,
    detectron2,
    fairseq,
    hf_stdout,
    hf_trainer,
    jsonl,
    keras_csv,
    lightning,
    llamafactory,
    megatron,
    mlflow,
    mmengine,
    nanogpt,
    tensorboard,
    text,
    torchtitan,
)
from .formats.wandb import export as wandb_export
from .formats.wandb import run_folder as wandb_run_folder

__all__ = ["FORMATS", "REGISTRY", "Format", "detect", "unreadable"]

#: Every format, most preferred first. For text formats the order is also who takes a file
#: that two of them claim: the first (the generic ``text`` and ``jsonl`` come last).
FORMATS: list[Format] = settle_claims([
    hf_trainer.FORMAT,
    tensorboard.FORMAT,
    wandb_run_folder.FORMAT,
    wandb_export.FORMAT,
    lightning.FORMAT,
    mlflow.FORMAT,
    llamafactory.FORMAT,
    detectron2.FORMAT,
    mmengine.FORMAT,
    keras_csv.FORMAT,
    axolotl.FORMAT,
    hf_stdout.FORMAT,
    megatron.FORMAT,
    nanogpt.FORMAT,
    torchtitan.FORMAT,
    fairseq.FORMAT,
    jsonl.FORMAT,
    text.FORMAT,
])

#: Format name (as in ``--source`` and the JSON ``format``) -> format, most preferred first.
REGISTRY: dict[str, Format] = {fmt.name: fmt for fmt in FORMATS}


def detect(path: Path, *, source: str | None = None) -> dict[str, Format]:
    """The formats that hold logs under ``path``, in registry order.

    Raises :class:`InputError` for a missing path and :class:`NoLogsFoundError` when no format
    (or not the one asked for with ``source``) recognises it.
    """
    if not exists(path) and not any(fmt.virtual(path) for fmt in FORMATS if fmt.virtual):
        raise InputError(f"{path}: no such file or directory")
    if exists(path) and not is_file(path) and not is_dir(path):
        raise InputError(f"{path}: not a regular file or folder (a FIFO, socket or device, "
                         "which would never end); point runcompare at a log file or a run folder")
    if is_file(path) and not may_read(path):
        raise InputError(f"{path}: cannot be read (permission denied); make it readable "
                         "(chmod +r) or read it as a user who may")
    if source is not None and source not in REGISTRY:
        raise UsageError(f"unknown source {source!r}; {did_you_mean(source, REGISTRY)}choose one "
                         f"of {', '.join(REGISTRY)} (runcompare formats lists them)")
    names = [source] if source else list(REGISTRY)
    with one_look():  # the formats look at one moment of the tree, each folder stat'ed once
        found = {name: REGISTRY[name] for name in names if REGISTRY[name].finds(path)}
    if not found:
        pointer = _lfs_pointer(path)
        if pointer is not None:
            raise InputError(pointer)
        unread = unreadable(path)
        if source:
            raise NoLogsFoundError(f"{path}: no {source} logs found (looked for "
                                   f"{REGISTRY[source].describe})" + (f"; {unread}" if unread else ""))
        raise NoLogsFoundError(f"{path}: no training logs found"
                               + (f"; {unread}" if unread else "")
                               + "; `runcompare formats` lists what is read and where, "
                               "--pattern REGEX reads other text logs")
    return _one_reader_per_file(found, path)


def unreadable(path: Path) -> str | None:
    """What under the folder ``path`` no reader could open (FIFOs, links to nothing or in a
    loop, no permission; not W&B's link to its own log, :func:`_wandb_core_log`), said in one
    sentence with the fix; None when there is nothing."""
    found = passed_over(path, left=_wandb_core_log) if is_dir(path) else []
    if not found:
        return None
    more = f" and {len(found) - 5} more" if len(found) > 5 else ""
    return (f"{len(found)} entr{'y' if len(found) == 1 else 'ies'} under it could not be read "
            f"and {'was' if len(found) == 1 else 'were'} passed over: {', '.join(found[:5])}"
            f"{more}; if they hold logs, make them readable (chmod, or fix the links)")


#: A W&B run folder (``wandb/run-<date>_<time>-<id>``, ``offline-run-...``) and the file its
#: service logs to in the user's cache folder (``core-debug-<date>_<time>.log``).
_WANDB_RUN = re.compile(r"(?:offline-)?run-\d{8}_\d{6}-\w+")
_WANDB_CORE = re.compile(r"core-debug-[\w.-]*\.log")


def _wandb_core_log(link: Path, target: str) -> bool:
    """Whether the symbolic link ``link`` (to ``target``) is the one W&B's service makes in a
    run folder, ``logs/debug-core.log``, to its own log in the user's cache folder (an
    absolute path, ``~/.cache/wandb/logs/core-debug-<date>_<time>.log``; wandb-core's
    ``symlinkDebugCore``, core/internal/stream/streamlogger.go). It holds no training logs, and leads nowhere once the run has left the
    machine it was made on: not worth a warning.

    >>> run = Path("wandb/offline-run-20261129_100737-wqchi4g2")
    >>> _wandb_core_log(run / "logs/debug-core.log",
    ...                "/root/.cache/wandb/logs/core-debug-20261129_100737.log")
    True
    >>> _wandb_core_log(run / "logs/debug-core.log", "../../elsewhere.log")
    False
    >>> _wandb_core_log(run / "files/output.log",
    ...                "/root/.cache/wandb/logs/core-debug-20261129_100737.log")
    False
    """
    return (link.name == "debug-core.log" and link.parent.name == "logs"
            and _WANDB_RUN.fullmatch(link.parent.parent.name) is not None
            and os.path.isabs(target)
            and _WANDB_CORE.fullmatch(os.path.basename(target)) is not None)


def _lfs_pointer(path: Path) -> str | None:
    """What to say when ``path`` (or a file in the folder ``path``) is a Git LFS pointer."""
    candidates = [path] if is_file(path) else files_in(path)  # no FIFO: it never answers
    for file in candidates[:200]:
        try:
            with file.open("rb") as handle:
                message = lfs_message(file, handle.read(len(LFS_POINTER)))
        except OSError:
            continue
        if message is not None:
            return message
    return None


def _one_reader_per_file(found: dict[str, Format], path: Path) -> dict[str, Format]:
    """``found`` without the text formats all of whose files a structured format found there
    reads too (a W&B history export saved as JSON lines is that export, not a JSON-lines log).
    A text format whose logs are in several run folders below ``path`` (none at it) is
    compared by the files of every run root each format sees there."""
    texts = [name for name, fmt in found.items() if fmt.claims is not None]
    structured = [fmt for fmt in found.values() if fmt.claims is None]
    if not texts or not structured:
        return found
    own = {name: _files(found[name], [path]) for name in texts}
    below = [name for name, files in own.items() if not files]
    for name in below:
        own[name] = _files(found[name], found[name].roots(path))
    roots = {fmt.name: fmt.roots(path) if below else [path] for fmt in structured}
    taken = {file for fmt in structured for file in _files(fmt, roots[fmt.name])}
    return {name: fmt for name, fmt in found.items() if name not in texts or not own[name] <= taken}


def _files(fmt: Format, roots: list[Path]) -> set[Path]:
    """The files (resolved) ``fmt`` reads for the run roots ``roots``."""
    return {resolved(file) for root in roots for file in fmt.files_at(root)}
