"""Resumed runs: points of several legs (restarts) merged into one history.

A leg that starts at step s orphans everything earlier legs logged at step ≥ s (they belong
to a trajectory that was thrown away when training went back to the checkpoint). The start of
a leg is the step a source knows it resumed from (TensorBoard's ``purge_step``), else the
first step it logged. Legs are numbered in time order by the source.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import polars as pl

from .errors import UsageError
from .model import Finding
from .options import DUPLICATE_POLICIES

__all__ = ["leg_numbers", "resolve_legs"]


def leg_numbers(legs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct leg numbers of the points' ``legs``, ascending, and each point's index
    into them (``np.unique(legs, return_inverse=True)`` without its sort of every point: a
    run has a few legs and may have millions of points).

    >>> [a.tolist() for a in leg_numbers(np.array([2, 0, 2, 5]))]
    [[0, 2, 5], [1, 0, 1, 2]]
    """
    if legs.size == 0 or legs.min() == legs.max():
        return legs[:1], np.zeros(legs.size, np.intp)
    numbers = np.unique(legs)
    return numbers, np.searchsorted(numbers, legs)


def resolve_legs(scalars: pl.DataFrame, *, policy: str = "keep-last",
                 starts: Mapping[int, int] | None = None,
                 run: str | None = None) -> tuple[pl.DataFrame, list[Finding]]:
    """Drop the points that a later (``keep-last``) or earlier (``keep-first``) leg overrides.

    Returns the kept points and one ``duplicates-dropped`` finding per metric that lost any.
    """
    if policy not in DUPLICATE_POLICIES:
        raise UsageError(f"--duplicates {policy!r}: choose one of {', '.join(DUPLICATE_POLICIES)}")
    numbers = scalars.get_column("leg").to_numpy()
    if policy == "all" or numbers.size == 0 or numbers.min() == numbers.max():  # one leg
        return scalars, []
    legs = scalars.group_by("leg").agg(first=pl.col("step").min(), last=pl.col("step").max())
    if starts:
        legs = legs.with_columns(pl.col("leg").replace_strict(
            dict(starts), default=pl.col("first"), return_dtype=pl.Int64).alias("first"))
    legs = legs.sort("leg")
    if policy == "keep-last":
        # a point survives if no later leg starts at or before its step
        cutoff = legs.select("leg", limit=pl.col("first").reverse().cum_min().reverse()
                             .shift(-1))
        keep = pl.col("limit").is_null() | (pl.col("step") < pl.col("limit"))
    else:
        # a point survives if no earlier leg reached its step
        cutoff = legs.select("leg", limit=pl.col("last").cum_max().shift(1))
        keep = pl.col("limit").is_null() | (pl.col("step") > pl.col("limit"))
    marked = scalars.join(cutoff, on="leg", how="left", maintain_order="left")
    dropped = marked.filter(~keep).group_by("metric").len().sort("metric")
    findings = [Finding("info", "duplicates-dropped",
                        f"{row['len']} points of {row['metric']} logged by a leg that a restart "
                        f"overrode were dropped ({policy}; --duplicates all keeps them)", run)
                for row in dropped.iter_rows(named=True)]
    return marked.filter(keep).drop("limit"), findings
