"""Smoothing pinned against TensorBoard's own numbers and a hand-computed x-aware case."""

from __future__ import annotations

import json
import math
import re

import polars as pl
import pytest

import runcompare as rc
from runcompare.analysis.smooth import Smoothing, parse_smoothing, smooth_expr
from runcompare.errors import UsageError

from .conftest import DATA, SAMPLES

REFERENCE = json.loads((DATA / "smoothing" / "tensorboard_ema.json").read_text())
_NONFINITE = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf,
              "NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def _floats(values):
    return [_NONFINITE[v] if isinstance(v, str) else float(v) for v in values]


def _smooth(values, spec, xs=None):
    frame = pl.DataFrame({"x": xs or [float(i) for i in range(len(values))], "value": values})
    return frame.select(smooth_expr(parse_smoothing(spec))).to_series().to_list()


@pytest.mark.parametrize("name", sorted(REFERENCE["inputs"]))
@pytest.mark.parametrize("weight", REFERENCE["weights"])
def test_tensorboard_ema_matches_tensorboards_own_code(name, weight):
    expected = _floats(REFERENCE["smoothed"][name][str(weight) if weight else "0"])
    got = _smooth(_floats(REFERENCE["inputs"][name]), f"tb:{weight}")
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert (math.isnan(g) and math.isnan(e)) or g == pytest.approx(e, rel=1e-12, abs=1e-12)


def test_x_aware_ema_by_hand():
    # half-life 2 steps: α = 1 − 2^(−Δx/2)
    got = _smooth([1.0, 2.0, math.nan, 4.0], "2", xs=[0.0, 1.0, 2.0, 12.0])
    a1 = 1 - 2 ** (-1 / 2)
    y1 = a1 * 2 + (1 - a1) * 1
    a2 = 1 - 2 ** (-11 / 2)  # the NaN is passed through and skipped
    assert got[0] == 1.0 and got[1] == pytest.approx(y1)
    assert math.isnan(got[2]) and got[3] == pytest.approx(a2 * 4 + (1 - a2) * y1)


def test_x_aware_ema_smooths_dense_and_sparse_logging_alike():
    dense_x = [float(i) for i in range(1001)]
    sparse_x = dense_x[::10]
    line = [10 - 0.005 * x for x in dense_x]
    dense = _smooth(line, "100", xs=dense_x)
    sparse = _smooth(line[::10], "100", xs=sparse_x)
    # a straight line lags by about the same x distance whatever the logging rate (within one
    # sparse logging interval, 10 × 0.005), while a per-point EMA lags 10× more when sparse
    assert dense[-1] == pytest.approx(sparse[-1], abs=10 * 0.005)
    by_index = _smooth(line, "tb:0.99")[-1], _smooth(line[::10], "tb:0.99")[-1]
    assert abs(by_index[0] - by_index[1]) > 5 * abs(dense[-1] - sparse[-1])


@pytest.mark.parametrize("spec, message", [
    ("tb:1", "must be in [0, 1)"), ("150%", "(0, 100]"), ("fast", "expected tb:WEIGHT"),
    ("-5", "must be positive"),
])
def test_bad_smoothing_specs(spec, message):
    with pytest.raises(UsageError, match=re.escape(message)):
        parse_smoothing(spec)


def test_the_ema_sees_only_distances_even_far_out_on_the_axis():
    """A series 2^40 out on the axis with a half-life of 1/32: its ticks (a millionth of a
    half-life each) counted from 0 passed 64 bits and compare crashed; counted from the
    series' first x, it smooths exactly as it does at 0 (these x are exact in f64)."""
    near = pl.DataFrame({"x": [0.0, 1 / 64, 3 / 64, 4 / 64], "value": [4.0, 3.0, 2.5, 2.0]})
    far = near.with_columns(pl.col("x") + 2.0 ** 40)
    ema = Smoothing("x", 1 / 32)
    smoothed = near.select(smooth_expr(ema)).to_series().to_list()
    assert far.select(smooth_expr(ema)).to_series().to_list() == smoothed
    assert smoothed[0] == 4.0 and 2.0 < smoothed[-1] < 3.0


def test_a_half_life_too_short_for_the_range_is_refused_in_one_line(cli):
    runs = rc.load_many([SAMPLES / "mamba", SAMPLES / "attn"])
    with pytest.raises(UsageError, match=r"--smooth 1e-09: that half-life is .* times shorter"):
        rc.compare(runs, x="tokens", smooth="1e-12k")  # a bare 1e-9 is a TensorBoard weight
    result = cli(SAMPLES / "mamba", SAMPLES / "attn", "--x", "tokens", "--smooth", "1e-12k",
                 "--no-report")
    assert result.exit_code == 2 and "Traceback" not in result.output  # as a bad --smooth is
    assert rc.compare(runs, x="tokens", smooth=1).verdict.metric == "eval/loss"


@pytest.mark.parametrize("smoothing", [Smoothing("x", 5_000.0), Smoothing("tb", 0.6), None])
def test_a_runs_series_is_its_points_smoothed_once_for_every_reader(smoothing):
    """metric_series (what the summary, the verdict and the aligned curves read) is the
    run's points in x order with the curve the charts draw (drawn_points, worked out once
    per run, metric, axis and smoothing), the same as smoothing the points in a query of their
    own; without a smoothing, smoothed is the value as logged."""
    from runcompare.analysis.summary import drawn_points, metric_series, ordered_points

    runs = rc.load_many([SAMPLES / "mamba", SAMPLES / "attn"])
    for run in runs:
        for metric in ("train/loss", "eval/loss"):
            got = metric_series(run, metric, "tokens", smoothing)
            points = ordered_points(run, metric, "tokens")
            curve = pl.col("value") if smoothing is None else smooth_expr(smoothing, x="tokens")
            assert got.equals(points.select(
                pl.col("tokens").cast(pl.Float64).alias("x"), "value", "elapsed", "flops",
                "device_hours", curve.alias("smoothed")), null_equal=True)
            assert got.height == run.points_of(metric).height > 0
            if smoothing is not None:
                drawn = drawn_points(run, metric, "tokens", smoothing)
                assert drawn_points(run, metric, "tokens", smoothing) is drawn
                assert got.get_column("smoothed").equals(drawn.get_column("smoothed"))
    assert metric_series(runs[0], "no/such/metric", "tokens", smoothing) is None


@pytest.mark.parametrize("smoothing", [Smoothing("x", 2.0), Smoothing("tb", 0.6),
                                       Smoothing("tb", 0.0)])
def test_curves_smoothed_in_one_query_are_each_smoothed_on_its_own(smoothing):
    """Many curves smoothed in one query (what a sweep's summary and charts do) are each the
    curve a query of its own gives: the average starts again at each curve's first point and
    its own first x, a constant curve beside others stays as it is (TensorBoard's rule), and
    non-finite values pass through. These curves are made up: the smoothing's arithmetic,
    not a log, is under test."""
    from runcompare.analysis.summary import _smoothed

    parts = [pl.DataFrame({"x": xs, "value": values}, schema={"x": pl.Int64, "value": pl.Float64})
             for xs, values in [([0, 1, 2, 5], [4.0, 3.0, math.nan, 1.0]),
                                ([], []),
                                ([100, 101, 103], [2.5, 2.5, 2.5]),
                                ([7, 8, 9], [1.0, math.inf, -2.0])]]
    together = _smoothed(parts, "x", smoothing)
    alone = [part.select(smooth_expr(smoothing)).to_series() for part in parts]
    assert [len(curve) for curve in together] == [4, 0, 3, 3]
    for got, expected in zip(together, alone):
        assert got.to_list() == pytest.approx(expected.to_list(), nan_ok=True, rel=0, abs=0)
    assert together[2].to_list() == [2.5, 2.5, 2.5]


@pytest.mark.parametrize("smoothing", [Smoothing("x", 5_000.0), Smoothing("tb", 0.6)])
def test_drawing_many_runs_gives_each_the_curve_it_draws_alone(smoothing):
    from runcompare.analysis.summary import draw, drawn_points, ordered_points

    runs = rc.load_many([SAMPLES / "mamba", SAMPLES / "attn"])
    drawn = draw(runs, "train/loss", "tokens", smoothing)
    for run, points in zip(runs, drawn):
        alone = ordered_points(run, "train/loss", "tokens").with_columns(
            smooth_expr(smoothing, x="tokens").alias("smoothed"))
        assert points.equals(alone, null_equal=True)
        assert points.height == run.points_of("train/loss").height > 10
        assert drawn_points(run, "train/loss", "tokens", smoothing) is points  # kept
    assert draw([runs[1]], "no/such/metric", "tokens", smoothing)[0].is_empty()
