"""compare() on real runs: aligned curves, groups, summary numbers and throughput."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

import runcompare as rc

from .conftest import DATA, SAMPLES


@pytest.fixture(scope="module")
def runs():
    return rc.load_many([SAMPLES / "mamba", SAMPLES / "attn", DATA / "hf_global32"],
                        settings=["hf_global32:seq_len=64"])


def test_aligned_never_extrapolates_and_counts_runs(runs):
    result = rc.compare(runs, x="tokens", metrics=["train/loss"])
    aligned = result.aligned
    last = {run.name: run.frame("tokens").filter(metric="train/loss")["x"].max() for run in runs}
    for name, end in last.items():
        beyond = aligned.filter(pl.col("run") == name, pl.col("x") > end)
        assert beyond["value"].null_count() == beyond.height
    at_end = aligned.filter(pl.col("x") == 102_400.0)
    assert at_end["n"].unique().to_list() == [2]  # hf_global32 stops at 61,440 tokens


def test_aligned_equals_the_logged_values_at_logged_x(runs):
    result = rc.compare(runs[:2], x="tokens", metrics=["train/loss"])
    logged = runs[1].frame("tokens").filter(metric="train/loss").select("x", "value")
    aligned = result.aligned.filter(run="attn").join(logged, on="x", suffix="_logged")
    assert aligned.height == logged.height
    assert (aligned["value"] == aligned["value_logged"]).all()


def test_group_band_holds_mean_and_n(runs):
    result = rc.compare(runs[:2], x="tokens", metrics=["train/loss"],
                        groups={"g": ["mamba", "attn"]})
    band = result.bands.filter(x=51_200.0)
    values = result.aligned.filter(x=51_200.0)["smoothed"]
    assert band["n"].item() == 2 and band["mean"].item() == pytest.approx(values.mean())
    assert band["min"].item() == values.min() and band["max"].item() == values.max()


def _tb_ema(values, weight):
    out, last = [], 0.0
    for i, v in enumerate(values, 1):
        last = last * weight + (1 - weight) * v
        out.append(last / (1 - weight ** i))
    return out


def _local_line(xs, values, h):
    """At each x, the least-squares line through the points within ±h, read there."""
    out = []
    for x in xs:
        near = [(a, v) for a, v in zip(xs, values) if abs(a - x) <= h]
        if len(near) < 2:
            out.append(near[0][1])
            continue
        slope, intercept = np.polyfit([a for a, _ in near], [v for _, v in near], 1)
        out.append(slope * x + intercept)
    return out


def test_speedup_is_the_ratio_of_crossings_of_the_local_fit(runs):
    # crossings of a training loss are read off a local linear fit of the raw points (no EMA
    # lag); tb:0.6 is a half-life of ln ½ / ln 0.6 = 1.36 points, the fit's half-window
    result = rc.compare(runs[:2], x="tokens", metrics=["train/loss"], target=3.0,
                        smooth="tb:0.6")
    rows = {r["run"]: r for r in result.summary.iter_rows(named=True)}
    first = rows["mamba"]["x_to_target"]
    assert rows["attn"]["speedup"] == pytest.approx(first / rows["attn"]["x_to_target"])
    for run in runs[:2]:
        loss = run.frame("tokens").filter(metric="train/loss").sort("x")
        xs = loss["x"].to_list()
        h = math.log(0.5) / math.log(0.6) * float(np.median(np.diff(xs)))
        fitted, elapsed = _local_line(xs, loss["value"].to_list(), h), loss["elapsed"].to_list()
        i = next(i for i, v in enumerate(fitted) if v <= 3.0)
        share = (3.0 - fitted[i - 1]) / (fitted[i] - fitted[i - 1])
        row = rows[run.name]
        assert row["curve"] == "local-fit" and 0 < share < 1
        assert row["x_to_target"] == pytest.approx(xs[i - 1] + share * (xs[i] - xs[i - 1]))
        assert row["elapsed_to_target"] == pytest.approx(
            elapsed[i - 1] + share * (elapsed[i] - elapsed[i - 1]))
    assert rows["attn"]["elapsed_speedup"] == pytest.approx(
        rows["mamba"]["elapsed_to_target"] / rows["attn"]["elapsed_to_target"])


def test_throughput_from_the_trainers_final_rates(runs):
    table = rc.compare(runs[:2], x="tokens").throughput
    for run in runs[:2]:
        row = table.filter(run=run.name)
        rate = run.facts["train_samples_per_second"].value
        if run.scalars["elapsed"].null_count() == run.scalars.height:
            assert row["samples_per_s"].item() == rate
        assert row["tokens_per_s"].item() == pytest.approx(row["samples_per_s"].item() * 64)


def test_smoothing_runs_on_all_points_before_alignment(runs):
    result = rc.compare(runs[:1], x="step", metrics=["train/loss"], smooth="tb:0.9")
    loss = runs[0].frame("step").filter(metric="train/loss").sort("x")["value"].to_list()
    expected, last = [], 0.0
    for i, v in enumerate(loss, 1):
        last = last * 0.9 + 0.1 * v
        expected.append(last / (1 - 0.9 ** i))
    assert result.aligned["smoothed"].to_list() == pytest.approx(expected)


def test_findings_frame_and_pandas(runs):
    result = rc.compare(runs, x="step")
    frame = result.findings.to_frame()
    assert "global-batch-mismatch" in frame["code"].to_list()
    assert list(result.findings.to_pandas().columns) == ["level", "code", "message", "run"]


def test_runs_identical_but_for_the_seed_form_a_group_with_bands():
    # a real TensorBoard logdir: three runs whose add_hparams differ only in the seed
    seeds = rc.load_many([DATA / "tensorboard" / "seeds"])
    assert [run.facts["seed"].value for run in seeds] == [0, 1, 2]
    result = rc.compare(seeds, x="step", metrics=["train/loss"])
    assert result.groups == {"seeds": ["seed0", "seed1", "seed2"]}
    band = result.bands.filter(x=10.0)
    # the band is of the drawn (smoothed) curves, the default smoothing's too
    values = result.aligned.filter(x=10.0, metric="train/loss")["smoothed"].to_list()
    raw = [run.scalars.filter(metric="train/loss", step=10)["value"].item() for run in seeds]
    assert values != raw and band["n"].item() == 3
    assert band["mean"].item() == pytest.approx(sum(values) / 3)
    assert (band["min"].item(), band["max"].item()) == (min(values), max(values))


def test_runs_that_differ_in_more_than_the_seed_are_not_grouped(runs):
    assert rc.compare(runs, x="tokens").groups == {}


def test_no_speedup_against_a_run_that_took_no_time_to_the_target(cli):
    """TensorBoard seeds: seed0's first point (step 1) is already below a target of 4.25, so
    it took 0 s to reach it; "0× as fast" would be a made-up number: no ratio at all. Long
    run names are printed whole in the race table, never cut to a shared prefix."""
    runs = rc.load_many([DATA / "tensorboard" / "seeds"], cache=False)
    rows = rc.compare(runs, metrics=["train/loss"], target=4.25).summary.filter(
        metric="train/loss").sort("run")
    assert rows.get_column("elapsed_to_target").to_list()[0] == 0
    assert rows.get_column("elapsed_to_target").to_list()[1] > 0
    assert rows.get_column("elapsed_speedup").to_list() == [None, None, None]
    speedups = rows.get_column("speedup").to_list()  # steps to target 1, 1.01, 1.06
    assert speedups[0] == 1 and speedups[1] == pytest.approx(1 / rows["x_to_target"][1])


def test_a_race_table_prints_long_run_names_whole(tmp_path):
    import re
    import shutil

    from rich.console import Console

    from runcompare.report.terminal import print_comparison

    names = [f"an_experiment_with_a_long_name_seed{i}" for i in range(3)]
    for i, name in enumerate(names):
        shutil.copytree(DATA / "tensorboard" / "seeds" / f"seed{i}", tmp_path / name)
    comparison = rc.compare(rc.load_many([tmp_path], cache=False))
    console = Console(width=100, record=True, highlight=False, markup=False)
    print_comparison(comparison, console)
    text = console.export_text()
    assert "…" not in text
    race = text[text.index("train/loss on"):]
    race = race[:race.index("└")]
    first = "".join(m.group(1).strip() for m in re.finditer(r"^│ ([^│]+)│", race, re.M))
    assert first == "".join(names)  # each name whole, folded over lines in turn
