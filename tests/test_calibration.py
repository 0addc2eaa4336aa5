"""The verdict's calls on runs of known truth: a Monte Carlo check with fixed seeds, using the
generator of benchmarks/calibration.py (whose 200-trial table is docs/calibration.md)."""

from __future__ import annotations

import sys
from collections import Counter
from dataclasses import replace

import numpy as np
import pytest

from .conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
from calibration import Condition, Recipe, make_run, trial  # noqa: E402

from runcompare.analysis.compare import rank  # noqa: E402
from runcompare.analysis.schedule import position, x_at_step  # noqa: E402

TRIALS = 30


def _calls(condition: Condition, seed: int = 7) -> tuple[Counter[str], int]:
    rng = np.random.default_rng(seed)
    results = [trial(condition, rng) for _ in range(TRIALS)]
    return Counter(r["call"] for r in results), sum(r["leader"] == "b" for r in results)


@pytest.mark.parametrize("condition", [
    Condition("seed offsets", Recipe(), Recipe()),
    Condition("AR(1) noise", Recipe(rho=0.9), Recipe(rho=0.9)),
    Condition("eval, seed offsets", Recipe(), Recipe(), metric="eval/loss"),
], ids=lambda c: c.name)
def test_identical_single_runs_are_never_called_clear(condition):
    calls, _ = _calls(condition)
    assert calls["clear"] == 0
    # seed offsets (sd 0.02) exceed each run's own scatter: a lead beyond it, unreplicated
    assert calls["unreplicated"] > 0 and calls["within-noise"] > 0


@pytest.mark.parametrize("rho", [0.0, 0.9])
def test_single_runs_own_noise_band_holds_its_false_leads_near_five_percent(rho):
    # no seed offset: the runs differ only by their point noise, which the band measures
    # (autocorrelated points count as fewer points); a lead beyond it is a false one
    calls, _ = _calls(Condition("noise only", Recipe(seed_sd=0, rho=rho),
                                Recipe(seed_sd=0, rho=rho)))
    assert calls["clear"] == 0 and calls["unreplicated"] <= 4  # at most 13% of 30


def test_seed_groups_of_one_recipe_are_seldom_clear_and_a_real_gap_is():
    same, _ = _calls(Condition("A/A seeds", Recipe(), Recipe(), seeds=3))
    assert same["clear"] <= 3 and same["unreplicated"] == 0
    better, right = _calls(Condition("A/B seeds", Recipe(), Recipe(effect=-0.1), seeds=3))
    assert right == TRIALS and better["clear"] >= 27


@pytest.mark.parametrize("metric", ["train/loss", "eval/loss"])
def test_a_large_true_effect_on_single_runs_leads_rightly_and_unreplicated(metric):
    calls, right = _calls(Condition("A/B", Recipe(), Recipe(effect=-0.1), metric=metric))
    assert right == TRIALS and calls["unreplicated"] >= 28 and calls["clear"] == 0


@pytest.mark.parametrize("x, per_step", [("tokens", 16 * 1024), ("step", 1)])
def test_runs_at_different_points_of_their_schedules_get_no_call_and_a_fair_reading(x, per_step):
    """On tokens, and on the step axis itself (where a position on the axis is the step)."""
    rng = np.random.default_rng(3)
    short = make_run("short", Recipe(schedule=2000), rng, seed=0)
    long = make_run("long", Recipe(schedule=4000, steps=4000), rng, seed=1)
    verdict = rank([short, long], x=x, metrics=["train/loss"], groups=False)
    assert verdict.call == "not-comparable" and verdict.budget == 2000 * per_step
    positions = verdict.schedule["positions"]
    assert positions["short"]["step"] == positions["long"]["step"] == 2000
    backwards = replace(long, scalars=long.scalars.reverse())  # points not in step order
    assert position(backwards, x, verdict.budget) == position(long, x, verdict.budget)
    assert position(long, x, verdict.budget).decayed == positions["long"]["decayed"]
    first = float(short.scalars.get_column("step").min())
    assert [x_at_step(short, x, s) for s in (first - 1, first, 1000.5, 2000, 2001)] == \
        [None, first * per_step, 1000.5 * per_step, 2000 * per_step, None]
    assert positions["short"]["decayed"] == pytest.approx(1.0)
    assert positions["long"]["decayed"] == pytest.approx(0.5, abs=1e-3)  # cosine at half way
    assert positions["long"]["source"].startswith("max_steps")
    instead = verdict.schedule["instead"]
    assert instead["where"] == "at the end of each schedule"
    assert instead["steps"] == {"short": 2000, "long": 4000}
    assert instead["leader"] == "long"  # twice the training, each annealed
    assert "schedule-position" not in verdict.text  # said in words:
    assert "different points of their learning-rate schedules" in verdict.text
    assert "Read instead at the end of each schedule (short at step 2,000, long at step " \
           "4,000): long" in verdict.text
