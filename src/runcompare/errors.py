"""The one exception tree of runcompare.

Every error a user can cause is a :class:`RuncompareError`; its message names the bad value
(file, line or record, key) and how to fix it (so is a reader's broken contract,
:class:`ReaderError`, said as plainly). The CLI maps the tree to exit codes and prints
the message without a traceback::

    RuncompareError                 base class; never raised directly
     ├── InputError                 exit 1: a path, file or record that cannot be used
     │    └── NoLogsFoundError      a path holds no log runcompare knows
     ├── MissingInfoError           exit 1: a fact an axis or command needs is unknown
     │                              (the message names the --set key and runcompare.toml)
     ├── UnknownMetricError         exit 1: a metric no run has (the message lists those there are)
     ├── ReaderError                exit 1: a format's reader returned what its contract forbids
     │                              (``sources.contract``): a bug in runcompare, not in the
     │                              user's input; the message names the format and the file
     └── UsageError                 exit 2: an option's value is malformed (bad --set, unknown key)

Third-party exceptions (json, protobuf, polars, toml) are translated where they enter,
``raise InputError(...) from exc``.
"""

from __future__ import annotations

__all__ = [
    "InputError",
    "MissingInfoError",
    "NoLogsFoundError",
    "ReaderError",
    "RuncompareError",
    "UnknownMetricError",
    "UsageError",
]


class RuncompareError(Exception):
    """Base class of every error runcompare raises on purpose."""

    exit_code = 1


class InputError(RuncompareError):
    """A path, file or record that cannot be used as given."""


class NoLogsFoundError(InputError):
    """A path exists but holds no log format runcompare reads."""


class MissingInfoError(RuncompareError):
    """A fact that an axis or command needs is not in the logs and was not supplied."""


class UnknownMetricError(RuncompareError):
    """A metric was asked for that no run logged."""


class ReaderError(RuncompareError):
    """A format's reader returned a RawLog its contract forbids (``Format.read_at`` checks it):
    a bug to report, said with the format and the file rather than met later as a KeyError."""


class UsageError(RuncompareError):
    """An option's value is malformed."""

    exit_code = 2
