"""Seed groups: runs that are the same experiment but for the random seed.

Given explicitly (``--group NAME=RUN,RUN``) or found automatically: runs whose facts agree on
everything but ``seed`` (which they all state and which differs) form a group named after what
their names share.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence

from ..errors import UsageError
from ..model import Run

__all__ = ["auto_groups", "parse_groups"]

#: Facts that say nothing about the experiment itself.
_IGNORED = {"seed", "name", "train_samples_per_second", "train_steps_per_second", "global_step",
            "tokens_seen", "total_flos"}


def parse_groups(specs: Iterable[str], runs: Sequence[Run]) -> dict[str, list[str]]:
    """``NAME=RUN,RUN,...`` strings into {group: [run, ...]}; every run must exist."""
    names = {run.name for run in runs}
    groups: dict[str, list[str]] = {}
    for spec in specs:
        group, eq, members = spec.partition("=")
        listed = [m.strip() for m in members.split(",") if m.strip()]
        if not eq or not group.strip() or not listed:
            raise UsageError(f"--group {spec!r}: expected NAME=RUN,RUN,...")
        missing = [m for m in listed if m not in names]
        if missing:
            raise UsageError(f"--group {spec!r}: no run called {', '.join(missing)}; the runs "
                             f"are {', '.join(sorted(names))}")
        groups[group.strip()] = listed
    return groups


def auto_groups(runs: Sequence[Run]) -> dict[str, list[str]]:
    """Groups of ≥ 2 runs whose facts are identical but for a stated, differing seed."""
    buckets: dict[tuple[object, ...], list[Run]] = {}
    for run in runs:
        if run.facts.get("seed") is None:
            continue
        key = tuple(sorted((k, f.value) for k, f in run.facts.items() if k not in _IGNORED))
        buckets.setdefault(key, []).append(run)
    groups: dict[str, list[str]] = {}
    for members in buckets.values():
        seeds = {m.facts["seed"].value for m in members}
        if len(members) >= 2 and len(seeds) == len(members):
            groups[_group_name([m.name for m in members], groups)] = [m.name for m in members]
    return groups


def _group_name(names: list[str], taken: Iterable[str]) -> str:
    """What the names share without a trailing seed marker (mamba-seed1, mamba-seed2 → mamba);
    "seeds" when they share nothing else."""
    stem = re.sub(r"[-_./ ]*(seed|s|run)?[-_]?$", "", os.path.commonprefix(names)) or "seeds"
    name, i = stem, 2
    while name in taken:
        name, i = f"{stem}-{i}", i + 1
    return name
