"""Log formats: one module per format behind one small protocol, and one registry.

A source module has ``files(path) -> list[Path]`` (the files ``read`` would read; the cache
checks their sizes and mtimes; :func:`sniff` asks whether it lists any, unless the module has
a cheaper ``sniff(path) -> bool`` of its own) and ``read(path, *, hints=None) -> RawLog`` (never guesses a batch size: it reports
facts and its step unit, and keeps every point of every leg). ``hints`` are the values of the
facts the user stated (``--set``, ``runcompare.toml``) by name, for formats that need one to
be read at all (``step_metric`` for W&B, ``logging_steps`` for Trainer stdout, ``pattern``).
A module whose format can hold several runs under one path (a TensorBoard logdir, a ``wandb/``
folder) also has ``expand(path) -> list[Path]``, the run roots it finds there; a root that
does not exist on disk (a run inside a database or an export file, ``<db>/<run_id>``) is one
for which the module's ``virtual(path)`` is true.

Adding a format = one module + one line in :data:`REGISTRY`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

from ..errors import InputError, NoLogsFoundError, UsageError
from ..model import RawLog
from .formats import (
    axolotl,
    hf_stdout,
    hf_trainer,
    lightning,
    megatron,
    mlflow,
    nanogpt,
    tensorboard,
    text,
    torchtitan,
    wandb,
    wandb_export,
)

__all__ = ["REGISTRY", "Source", "detect", "sniff"]


class Source(Protocol):
    def files(self, path: Path) -> list[Path]: ...

    def read(self, path: Path, *, hints: Mapping[str, object] | None = None) -> RawLog: ...


#: Source name (as in ``--source`` and the JSON ``format``) -> module, most preferred first.
REGISTRY: dict[str, Source] = {
    "hf-trainer": hf_trainer,
    "tensorboard": tensorboard,
    "wandb": wandb,
    "wandb-export": wandb_export,
    "lightning": lightning,
    "mlflow": mlflow,
    "axolotl": axolotl,
    "hf-stdout": hf_stdout,
    "megatron": megatron,
    "nanogpt": nanogpt,
    "torchtitan": torchtitan,
    "text": text,
}


def detect(path: Path, *, source: str | None = None) -> dict[str, Source]:
    """The sources that hold logs under ``path``, in registry order.

    Raises :class:`InputError` for a missing path and :class:`NoLogsFoundError` when no source
    (or not the one asked for with ``source``) recognises it.
    """
    if not path.exists() and not any(module.virtual(path) for module in REGISTRY.values()
                                     if hasattr(module, "virtual")):
        raise InputError(f"{path}: no such file or directory")
    if source is not None and source not in REGISTRY:
        raise UsageError(f"unknown source {source!r}; choose one of {', '.join(REGISTRY)}")
    names = [source] if source else list(REGISTRY)
    found = {name: REGISTRY[name] for name in names if sniff(REGISTRY[name], path)}
    if not found:
        looked_for = "; ".join(f"{name}: {_describe(REGISTRY[name])}" for name in names)
        raise NoLogsFoundError(f"{path}: no training logs found (looked for {looked_for})")
    return found


def sniff(module: Source, path: Path) -> bool:
    """Whether ``module`` finds logs at ``path``: its own ``sniff`` where it has one (a test
    cheaper than listing its files), else whether ``files`` lists any."""
    own = getattr(module, "sniff", None)
    return own(path) if own is not None else bool(module.files(path))


def _describe(module: Source) -> str:
    return (module.__doc__ or "").strip().splitlines()[0].rstrip(".")
