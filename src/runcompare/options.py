"""How runs are read: one frozen object of the reading options that every command that reads
runs shares (``--source``, ``--set``, ``--duplicates``, ``--no-cache``, ``--config``,
``--pattern``, ``--scheduler``), checked once where it is made.

It imports nothing heavy: the command line builds one before polars is loaded.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from .errors import UsageError

__all__ = ["DUPLICATE_POLICIES", "ReadOptions", "Settings"]

#: What ``--duplicates`` keeps of the steps a restarted leg logged again. keep-last: the
#: later leg wins (what the run's final state reflects); keep-first: the earlier leg's points
#: stand and a later leg only adds steps beyond them; all: nothing dropped.
DUPLICATE_POLICIES = ("keep-last", "keep-first", "all")

#: ``--set`` strings (``KEY=VALUE``, ``RUN:KEY=VALUE``), or a mapping of ``KEY`` or
#: ``RUN:KEY`` to a value.
Settings = Iterable[str] | Mapping[str, str | int | float]


@dataclass(frozen=True)
class ReadOptions:
    """The options of reading runs, as :func:`runcompare.load_many` documents them.

    ``settings`` are ``--set`` strings or a mapping (kept as a tuple or a dict copy, so a
    caller's list changed later changes nothing); ``source`` reads only that source of a
    folder; ``duplicates`` is the policy for steps a restarted leg logged again; ``cache``
    keeps and reuses what was read; ``config`` is a training config whose facts apply to
    every run; ``pattern`` a regular expression for text logs (it implies the text source);
    ``workers`` the processes that read (None: one per core for a large sweep); ``scheduler``
    a Dask scheduler's address; ``progress(done, total, name)`` is told as runs are read.

    >>> ReadOptions(settings=["seq_len=64"]).settings
    ('seq_len=64',)
    >>> ReadOptions(pattern="step (?P<step>\\\\d+)", source="hf-trainer")
    Traceback (most recent call last):
    runcompare.errors.UsageError: --pattern reads with the text source, not 'hf-trainer'
    """

    source: str | None = None
    settings: Settings = ()
    duplicates: str = "keep-last"
    cache: bool = True
    config: str | Path | None = None
    pattern: str | None = None
    workers: int | None = 1
    scheduler: str | None = None
    progress: Callable[[int, int, str], None] | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if self.pattern is not None and self.source not in (None, "text"):
            raise UsageError(f"--pattern reads with the text source, not {self.source!r}")
        if self.duplicates not in DUPLICATE_POLICIES:
            raise UsageError(f"--duplicates {self.duplicates!r}: choose one of "
                             f"{', '.join(DUPLICATE_POLICIES)}")
        settings = dict(self.settings) if isinstance(self.settings, Mapping) \
            else tuple(self.settings)
        object.__setattr__(self, "settings", settings)
