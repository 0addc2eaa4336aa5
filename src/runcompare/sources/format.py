"""The one description of a log format that the loader sees: :class:`Format`.

Each module in :mod:`.formats` exports one ``FORMAT``; the registry (:mod:`runcompare.sources`)
is built from those objects and nothing else, so every capability a format has is a named
field here, and its name is written once (the loader stamps it on each
:class:`~runcompare.model.RawLog` the format reads).

Text formats (captured stdout) have ``claims`` instead of ``files``: whether a log file's first
bytes are theirs. Which text format takes a file is decided by the registry alone, in its order
(:func:`settle_claims`), so no text format imports another to keep off its files.

A format's ``read`` is a :class:`Reader` (a text format's a :class:`TextReader`), and every
:class:`~runcompare.model.RawLog` it returns is checked at :meth:`Format.read_at`
(:mod:`.contract`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol, cast

from ..model import RawLog
from .codecs.files import is_dir, roots_under
from .contract import check_raw
from .textlog.logs import log_files

__all__ = ["Claims", "Format", "Reader", "TextReader", "settle_claims"]

#: How many folders down a text format looks for runs under a folder holding none of its logs.
TEXT_DEPTH = 2

#: ``claims(head) -> bool``: whether a log whose first bytes are ``head`` is a text format's.
Claims = Callable[[str], bool]


class Reader(Protocol):
    """A format's ``read``: every point and fact of the run at ``path``."""

    def __call__(self, path: Path, /, *,
                 hints: Mapping[str, object] | None = None) -> RawLog: ...


class TextReader(Protocol):
    """A text format's ``read``: as :class:`Reader`, reading only the logs ``claims`` accepts
    (the claims the registry settled for it, :func:`settle_claims`)."""

    def __call__(self, path: Path, /, *, hints: Mapping[str, object] | None = None,
                 claims: Claims) -> RawLog: ...


@dataclass(frozen=True)
class Format:
    """A log format: what it reads, where it looks, and how the loader treats what it read."""

    #: As in ``--source NAME`` and the JSON ``format``; the registry key.
    name: str
    #: One line: what is read and where it is looked for (the no-logs error lists it).
    describe: str
    #: ``read(path, *, hints=None) -> RawLog``: every point of every leg and the facts the log
    #: states, never a guessed batch size. ``hints`` are the values of the facts the user stated
    #: (``--set``, ``runcompare.toml``) by name, for formats that need one to be read at all
    #: (``step_metric`` for W&B, ``logging_steps`` for Trainer stdout, ``pattern``). A text
    #: format's ``read`` also takes ``claims=``: the claims the registry settled for it.
    read: Reader | TextReader
    #: ``files(path) -> list[Path]``: the files ``read`` would read (the cache checks them;
    #: :meth:`finds` asks whether there are any). None for a text format: its files are the
    #: logs at ``path`` that its settled ``claims`` accept.
    files: Callable[[Path], list[Path]] | None = None
    #: Text formats: ``claims(head) -> bool``, whether a log's first bytes are this format's.
    claims: Claims | None = None
    #: ``sniff(path) -> bool``, a test cheaper than listing the files, where there is one.
    sniff: Callable[[Path], bool] | None = None
    #: ``expand(path) -> list[Path]``: the run roots under ``path``, for a format whose logs can
    #: hold several runs under one path (a TensorBoard logdir, a ``wandb/`` folder).
    expand: Callable[[Path], list[Path]] | None = None
    #: ``virtual(path) -> bool``: whether ``path`` is a run root that is not on disk (a run
    #: inside a database or an export file, ``<db>/<run_id>``).
    virtual: Callable[[Path], bool] | None = None
    #: Reads a configuration beside the logs: facts only, never the points of a run.
    facts_only: bool = False
    #: Values come from printed text (rounded): a structured source of the same run wins.
    printed: bool = False
    #: Formats whose points win over this one's when both read the run (a copy of their log,
    #: as LLaMA-Factory's trainer_log.jsonl is of trainer_state.json's log history).
    defers_to: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if (self.files is None) == (self.claims is None):
            raise TypeError(f"format {self.name!r}: give either files or claims (a text format)")

    def files_at(self, path: Path) -> list[Path]:
        """The files :meth:`read_at` would read at ``path``."""
        if self.files is not None:
            return self.files(path)
        assert self.claims is not None
        return log_files(self._text_root(path), self.claims)

    def finds(self, path: Path) -> bool:
        """Whether this format finds logs at ``path``: ``sniff`` where there is one, else
        whether :meth:`files_at` lists any (a text format: or :meth:`roots` finds runs)."""
        if self.sniff is not None:
            return self.sniff(path)
        if self.claims is not None:  # runs below, else its logs at path: one walk, not two
            return bool(self._below(path)) or bool(log_files(path, self.claims))
        return bool(self.files_at(path))

    def roots(self, path: Path) -> list[Path]:
        """The run roots at ``path``: ``expand``'s; a text format's: the folders up to
        :data:`TEXT_DEPTH` levels down that hold its logs when ``path`` holds none (a folder of
        runs, a log folder each); else ``[path]``."""
        if self.expand is not None:
            return self.expand(path)
        return self._below(path) or [path]

    def _below(self, path: Path) -> list[Path]:
        """A text format's run folders under the folder ``path`` that holds none of its logs
        itself ([] for any other)."""
        claims = self.claims
        if claims is None or not is_dir(path) or log_files(path, claims):
            return []
        return roots_under(path, lambda folder: bool(log_files(folder, claims)),
                           depth=TEXT_DEPTH)

    def read_at(self, path: Path, *, hints: Mapping[str, object] | None = None) -> RawLog:
        """What the format reads at ``path``, stamped with its name; a
        :class:`~runcompare.errors.ReaderError` when it breaks the contract (:mod:`.contract`)."""
        root = self._text_root(path)
        if self.claims is None:
            got = cast(Reader, self.read)(root, hints=hints)
        else:  # a text format: its read is a TextReader (tests/test_formats.py checks each)
            got = cast(TextReader, self.read)(root, hints=hints, claims=self.claims)
        raw = check_raw(got, self.name, root)
        raw.path = path
        raw.source = self.name
        return raw

    def _text_root(self, path: Path) -> Path:
        """Where a text format reads the run at ``path``: the one folder below holding its
        logs when ``path`` holds none (``run/logs/train.log``); else ``path``."""
        below = self._below(path)
        return below[0] if len(below) == 1 else path


def settle_claims(formats: Sequence[Format]) -> list[Format]:
    """``formats`` with each text format's claims narrowed to the logs that no text format
    before it claims: a file is the first claimant's, in this order.

    >>> a = Format("a", "", read=print, claims=lambda h: "x" in h)
    >>> b = Format("b", "", read=print, claims=lambda h: "y" in h)
    >>> [f.claims("xy") for f in settle_claims([a, b])], settle_claims([a, b])[1].claims("y")
    ([True, False], True)
    """
    settled: list[Format] = []
    earlier: list[Claims] = []
    for fmt in formats:
        if fmt.claims is None:
            settled.append(fmt)
            continue
        settled.append(replace(fmt, claims=_first_claimant(fmt.claims, tuple(earlier))))
        earlier.append(fmt.claims)
    return settled


def _first_claimant(own: Claims, before: tuple[Claims, ...]) -> Claims:
    """``own`` narrowed to the logs that none of ``before`` claims."""
    return lambda text: own(text) and not any(other(text) for other in before)

