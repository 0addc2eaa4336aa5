"""The numpy step/wall-time lookup of ``_wandb_steps._points`` against the polars-join reference
``_wandb_steps._points_joined``, on random histories: several legs, rows without a step, rows
before the first step, missing or repeated internal keys, null values, unknown start times."""

from __future__ import annotations

import random
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from runcompare.sources.formats.wandb import _steps as _wandb_steps
from runcompare.sources.formats.wandb._leg import Leg

KEYS = ["_step", "_timestamp", "_runtime", "train/global_step", "loss", "acc", "_wandb"]


def _history(rng: random.Random, legs: int, repeats: bool) -> pl.DataFrame:
    rows: list[tuple[int, int, str, float | None]] = []
    for leg in range(legs):
        row = rng.randrange(3)
        for _ in range(rng.randrange(0, 40)):
            row += rng.choice((1, 1, 1, 2))
            keys = rng.sample(KEYS, rng.randrange(1, len(KEYS)))
            if repeats and rng.random() < 0.1:
                keys.append(rng.choice(KEYS[:4]))
            for key in keys:
                value = None if rng.random() < 0.1 else float(rng.randrange(-5, 500))
                if value is not None and key in ("loss", "acc", "_timestamp", "_runtime"):
                    value += rng.random()
                    value = rng.choice((value, value, value, float("nan")))
                rows.append((leg, row, key, value))
    return pl.DataFrame(rows, schema={"leg": pl.Int32, "row": pl.Int64, "key": pl.String,
                                      "value": pl.Float64}, orient="row")


@pytest.mark.parametrize("seed", range(60))
def test_points_match_the_joins(seed: int) -> None:
    rng = random.Random(seed)
    count = rng.randrange(1, 4)
    legs = [Leg(folder=Path("x"), file=None,
                run={"start_time": rng.choice((None, 1.7e9 + i))}) for i in range(count)]
    items = _history(rng, count, repeats=seed % 3 == 0)
    for step in ("train/global_step", "_step"):  # whole numbers, as _step_problem ensures
        fast, dropped = _wandb_steps._points(items, legs, step)
        reference, expected = _wandb_steps._points_joined(items, legs, step)
        assert dropped == expected
        assert_frame_equal(fast, reference)
