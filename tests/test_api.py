"""The public Python API: what it exports and how frames come out."""

from __future__ import annotations

import pandas as pd
import pytest

import runcompare as rc

from .conftest import DATA, SAMPLES


def test_public_names_are_pinned():
    assert rc.__all__ == [
        "BatchConfig", "BatchPlan", "Comparison", "CriticalBatch", "Fact", "Finding", "Findings",
        "Goodput", "InputError", "MissingInfoError", "NoLogsFoundError", "NoiseScale", "Plan",
        "RawLog", "Run", "RuncompareError", "UnknownMetricError", "UsageError", "__version__",
        "compare", "critical_batch", "goodput", "load", "load_many", "noise_scale", "plan",
        "plan_batch",
    ]
    for name in rc.__all__:
        assert hasattr(rc, name)


def test_load_takes_facts_as_keywords_and_names_the_run():
    run = rc.load(SAMPLES / "attn", name="llama", seq_len=32)
    assert run.name == "llama"
    assert run.batch.seq_len == rc.Fact(32, "load()", "user")
    assert run.batch.tokens_per_step.value == 16 * 32


def test_unknown_fact_keyword_is_a_usage_error():
    with pytest.raises(rc.UsageError, match="unknown key 'batch'"):
        rc.load(SAMPLES / "attn", batch=3)


def test_frame_x_and_pandas():
    run = rc.load(SAMPLES / "mamba")
    frame = run.frame(x="tokens").filter(metric="train/loss")
    assert frame["x"].to_list() == [float(t) for t in frame["tokens"]]
    pdf = run.to_pandas(x="samples")
    assert isinstance(pdf, pd.DataFrame) and len(pdf) == run.scalars.height
    assert (pdf.loc[pdf.metric == "train/loss", "x"] == pdf.loc[pdf.metric == "train/loss",
                                                                "step"] * 16).all()


def test_axis_that_cannot_be_computed_raises_missing_info():
    run = rc.load(SAMPLES / "mamba", source="hf-trainer")
    with pytest.raises(rc.MissingInfoError, match="elapsed axis"):
        run.frame(x="elapsed")


def test_compare_summary_on_real_runs():
    mamba, attn = rc.load_many([SAMPLES / "mamba", SAMPLES / "attn"])
    result = rc.compare([mamba, attn], x="tokens")
    assert result.main == "eval/loss" and result.x == "tokens"
    rows = {r["run"]: r for r in result.summary.filter(metric="eval/loss").iter_rows(named=True)}
    for run in (mamba, attn):
        evals = run.frame(x="tokens").filter(metric="eval/loss").sort("x")
        assert rows[run.name]["final"] == evals["value"][-1]
        assert rows[run.name]["best"] == evals["value"].min()
        # both runs end at 100 steps × 1,024 tokens: the common budget is their last point
        assert rows[run.name]["at_common_budget"] == pytest.approx(evals["value"][-1])
    worst = max(r["final"] for r in rows.values())
    for run in (mamba, attn):
        # the crossing of the target, interpolated between the raw evals around it
        evals = run.frame(x="tokens").filter(metric="eval/loss").sort("x")
        xs, values = evals["x"].to_list(), evals["value"].to_list()
        i = next(i for i, v in enumerate(values) if v <= worst)
        share = (worst - values[i - 1]) / (values[i] - values[i - 1])
        assert rows[run.name]["x_to_target"] == pytest.approx(xs[i - 1] + share * (xs[i] - xs[i - 1]))
        assert rows[run.name]["curve"] == "raw"
    assert rows["attn"]["x_to_target"] == 102_400  # attn's final value is the target
    assert 99_800 < rows["mamba"]["x_to_target"] < 99_950  # not the logged 102,400


def test_run_metrics_follow_the_points_the_run_holds():
    """``Run.metrics`` is worked out once per points frame (a sweep's comparison asks for it
    thousands of times), and again for a frame put in its place; a pickled run carries no
    memo of it."""
    import pickle

    import polars as pl

    run = rc.load(SAMPLES / "attn")
    every = run.metrics
    assert every == sorted(run.scalars.get_column("metric").unique().to_list())
    assert "train/loss" in every and len(every) > 1
    run.scalars = run.scalars.filter(pl.col("metric") == "train/loss")
    assert run.metrics == ["train/loss"]
    copy = pickle.loads(pickle.dumps(run))
    assert "_slices" not in copy.__dict__ and copy.metrics == ["train/loss"]


def test_a_runs_points_of_a_metric_are_the_points_a_filter_finds():
    """``Run.points_of`` gives what filtering the points by metric gives, in the same order:
    for the frame as loaded (grouped by metric: slices), for one whose metrics are mixed
    (split once), for a metric never logged (no rows, same columns), and again for a frame
    put in its place; a pickled run carries no memo of it."""
    import pickle

    import polars as pl
    from polars.testing import assert_frame_equal

    run = rc.load(SAMPLES / "attn")
    loaded = run.scalars
    mixed = loaded.sample(fraction=1.0, shuffle=True, seed=3)
    assert mixed.get_column("metric").rle().len() > loaded.get_column("metric").n_unique()
    for frame in (loaded, mixed, loaded.tail(7)):
        run.scalars = frame
        for metric in [*loaded.get_column("metric").unique().to_list(), "never/logged"]:
            assert_frame_equal(run.points_of(metric), frame.filter(pl.col("metric") == metric))
    copy = pickle.loads(pickle.dumps(run))
    assert "_slices" not in copy.__dict__
    assert_frame_equal(copy.points_of("train/loss"), run.points_of("train/loss"))


def test_settings_take_numbers_as_a_mapping():
    """``settings={"seq_len": 64}`` is ``--set seq_len=64`` (issue 33: it wanted strings), with
    the same checks: the batch sweep's runs state no sequence length, and b16 gets its
    accumulation (2, as its log says) from the setting."""
    runs = [DATA / "batch_sweep" / "b4", DATA / "batch_sweep" / "b16"]
    mapped = rc.load_many(runs, settings={"seq_len": 64, "b16:grad_accum": 2})
    typed = rc.load_many(runs, settings=["seq_len=64", "b16:grad_accum=2"])
    for by_mapping, by_strings in zip(mapped, typed):
        assert by_mapping.batch == by_strings.batch
    b4, b16 = mapped
    assert b4.batch.seq_len == rc.Fact(64, "--set", "user")
    assert b16.batch.grad_accum == rc.Fact(2, "--set", "user")
    assert (b4.batch.tokens_per_step.value, b16.batch.tokens_per_step.value) == (4 * 64, 16 * 64)
    assert rc.load(runs[0], settings={"seq_len": 64.0}).batch.seq_len.value == 64


@pytest.mark.parametrize(("settings", "message"), [
    ({"seq_len": 64.5}, "--set: seq_len=64.5 is not a whole number ≥ 1"),
    ({"seq_len": True}, "--set: seq_len=True is not a whole number ≥ 1"),
    ({"seqlen": 64}, "--set: unknown key 'seqlen'; did you mean 'seq_len'?"),
    ({"b4:seq_len": ""}, "--set b4:seq_len='': expected KEY=VALUE or RUN:KEY=VALUE"),
    ([("seq_len", 64)], ("settings: ('seq_len', 64) is not a KEY=VALUE string; give strings "
                         "such as 'seq_len=1024', or a mapping such as {'seq_len': 1024}")),
])
def test_bad_settings_from_python_are_usage_errors(settings, message):
    with pytest.raises(rc.UsageError) as caught:
        rc.load_many([DATA / "batch_sweep" / "b4"], settings=settings)
    assert str(caught.value).startswith(message)
