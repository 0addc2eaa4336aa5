"""Run roots: the runs under the paths given, what each is called, and the local mirror of a
remote one."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import InputError, UsageError
from ..model import Run
from ..remote import localize, origin, remote_url
from ..sources import detect
from ..sources.codecs.files import folders_in, is_file, one_look, resolved

__all__ = ["check_addressed", "expand", "folder_name", "given_root", "local", "mark_remote",
           "runs_likely", "unique_names"]

#: A run root: its path, its default name, and whether its source may name it.
Root = tuple[Path, str, bool]


def expand(path: Path, *, source: str | None = None) -> list[Root]:
    """The runs under ``path``: root, default name, and whether the source may name it.

    Every format found there names the run roots it sees (a format that cannot hold several
    runs reads ``path`` itself); a root inside another is part of it (an HF output dir's
    ``runs/`` TensorBoard logs). Two or more roots are that many runs, each named by its
    source (a W&B display name) or else after its subfolder; one is the run ``path`` is,
    named after its folder. A folder holding HF output dirs beside TensorBoard runs gives
    all of them.
    """
    with one_look():  # detection and the formats' roots: each folder looked at once
        formats = [f for f in detect(path, source=source).values() if not f.facts_only]
        roots = list(dict.fromkeys(root for fmt in formats
                                   for root in fmt.roots(path)))
    given = set(roots)
    outer = [root for root in roots if not any(parent in given for parent in root.parents)]
    if len(outer) < 2:
        return [(path, folder_name(path), False)]
    return [(root, _relative_name(root, path), True) for root in outer]


def runs_likely(path: Path) -> int:
    """How many runs ``path`` may hold, from one look at it before :func:`expand`'s: its
    folders that are not a run's checkpoints (a sweep's runs, a TensorBoard runs/ folder's),
    else one. A guess, to start the workers while the runs are found."""
    return max(1, sum(not _checkpoint(folder.name) for folder in folders_in(path)))


def _checkpoint(name: str) -> bool:
    return name.startswith("checkpoint-") or name == "last-checkpoint"


def given_root(path: Path) -> Root:
    """A path taken as one run as it is (``--pattern``: the text source reads what is there)."""
    if not path.exists():
        raise InputError(f"{path}: no such file or directory")
    return path, folder_name(path), False


def _relative_name(root: Path, base: Path) -> str:
    try:
        return root.relative_to(base).as_posix()
    except ValueError:
        return root.name


def unique_names(names: list[str], paths: list[Path]) -> list[str]:
    """Names made unique where runs share one: each prefixed with as many of its path's
    parent folders as it takes to tell them apart (``a/lightning_logs/version_0`` and
    ``b/lightning_logs/version_0``), which ``--set NAME:KEY=VALUE`` accepts as shown.

    >>> unique_names(["v0", "v0", "x"], [Path("/p/a/logs/v0"), Path("/p/b/logs/v0"),
    ...                                  Path("/x")])
    ['a/logs/v0', 'b/logs/v0', 'x']
    """
    out = list(names)
    sharing: dict[str, list[int]] = {}
    for i, name in enumerate(names):
        sharing.setdefault(name, []).append(i)
    for name, same in sharing.items():
        if len(same) < 2:
            continue
        parents = [paths[i].resolve().parents for i in same]
        for depth in range(1, max(len(p) for p in parents) + 1):
            tried = ["/".join([*(f.name for f in reversed(p[:depth])), name]) for p in parents]
            if len(set(tried)) == len(tried):
                break
        for i, unique in zip(same, tried):
            out[i] = unique
    return out


def check_addressed(per_run: Mapping[str | None, Any], names: list[str],
                    shown: list[str]) -> None:
    """A ``--set RUN:...`` whose RUN several runs share is refused, naming them as shown."""
    for run in per_run:
        sharing = [unique for name, unique in zip(names, shown) if name == run and unique != run]
        if len(sharing) > 1:
            raise UsageError(f"--set {run}:... names {len(sharing)} runs; name one of them as "
                             f"shown: {', '.join(sharing)}")


def folder_name(path: Path) -> str:
    """The name of the run at ``path``: its folder's (a file's parent folder; a checkpoint
    folder's parent)."""
    path = resolved(path)
    folder = path.parent if is_file(path) else path
    if _checkpoint(folder.name):
        folder = folder.parent
    return folder.name


def local(path: str | Path, mirrors: dict[Path, str]) -> Path:
    """``path``, or the local mirror of the remote run it names (noted in ``mirrors``)."""
    url = remote_url(path)
    if url is None:
        return Path(path)
    mirror = localize(url)
    mirrors[mirror] = url
    return mirror


def mark_remote(runs: list[Run], mirrors: dict[Path, str]) -> list[Run]:
    """Each run read from a mirror carries the URL it came from."""
    for run in runs if mirrors else ():
        run.origin = origin(run.path, mirrors)
    return runs
