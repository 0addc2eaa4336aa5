"""The compute and cost axes on real runs: flops and device_hours."""

from __future__ import annotations

import json

import pytest

import runcompare as rc

from .conftest import DATA, SAMPLES


def _state(path):
    return json.loads((path / "trainer_state.json").read_text())


def test_flops_spread_the_trainers_total_flos_over_the_tokens():
    for name in ("mamba", "attn"):
        run = rc.load(SAMPLES / name)
        total = _state(SAMPLES / name)["total_flos"]
        frame = run.frame(x="flops").filter(metric="train/loss").sort("step")
        tokens = frame["tokens"].to_numpy()
        assert frame["x"].to_numpy() == pytest.approx(total * tokens / 102_400)
        assert frame["flops"][-1] == pytest.approx(total)
        assert run.axis_sources["flops"].startswith("logged counter total_flos (hf-trainer)")


def test_device_hours_are_elapsed_times_world_size():
    run = rc.load(DATA / "hf_ddp")  # world size 2, derived: 16 ÷ (4 × 2)
    assert run.batch.world_size.value == 2
    frame = run.frame(x="device_hours").drop_nulls("elapsed")
    assert frame.height > 0
    assert frame["x"].to_numpy() == pytest.approx(frame["elapsed"].to_numpy() * 2 / 3600)
    assert "world size 2" in run.axis_sources["device_hours"]


def test_compare_on_flops_works_on_hf_runs_that_logged_total_flos(cli, tmp_path):
    out = cli.json(SAMPLES / "mamba", SAMPLES / "attn", "--x", "flops", "--no-report")
    assert out["x"] == "flops" and out["verdict"]["axis"] == "flops"
    budget = min(_state(SAMPLES / n)["total_flos"] for n in ("mamba", "attn"))
    assert out["verdict"]["budget"] == pytest.approx(budget)  # mamba's 3.65e10
    assert out["verdict"]["text"].startswith("At 3.65e10 training FLOPs")
    assert "compute efficiency" in out["verdict"]["text"]


def test_compare_on_device_hours(cli):
    out = cli.json(SAMPLES / "mamba", SAMPLES / "attn", "--x", "device_hours", "--no-report")
    assert out["verdict"]["axis"] == "device_hours"
    # mamba's first eval (0.0097 device-hours) comes after attn's last (0.00236): on this
    # axis their eval losses share no stretch, so there is no common budget and no lead
    assert out["verdict"]["budget"] is None and out["verdict"]["call"] == "not-comparable"
    assert out["verdict"]["text"].startswith("The runs share no stretch of device_hours (mamba "
                                             "0.009693 to 0.01858, attn 0.0005203 to 0.002362)")
    assert "cost on this hardware" in out["verdict"]["text"]


def test_flops_per_token_is_a_set_key_and_wins_over_the_counter(cli):
    run = rc.load_many([SAMPLES / "attn"], settings=["flops_per_token=1e6"])[0]
    frame = run.frame(x="flops")
    assert frame["x"].to_numpy() == pytest.approx(frame["tokens"].to_numpy() * 1e6)
    assert run.axis_sources["flops"] == "flops_per_token 1,000,000 (--set) × tokens"
    bad = cli(SAMPLES / "attn", "--set", "flops_per_token=-3", "--no-report")
    assert bad.exit_code == 2 and "flops_per_token='-3' is not a positive number" in bad.stderr


def test_flops_are_never_guessed(cli):
    # nanoGPT's log states no FLOP count: the axis is refused, naming the fix
    result = cli(DATA / "text" / "nanogpt", "--x", "flops", "--no-report")
    assert result.exit_code == 1
    assert "cannot be put on the flops axis" in result.stderr
    assert "flops_per_token=N" in result.stderr and "never guessed" in result.stderr


def test_tensorboard_export_on_flops_and_device_hours(cli, tmp_path):
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader

    for axis, scale in (("flops", 1.0), ("device_hours", 3600.0)):
        out = tmp_path / axis
        result = cli("export", SAMPLES / "attn", "-o", out, "--format", "tensorboard",
                     "--x", axis)
        assert result.exit_code == 0, result.stderr
        assert "each step is" in result.stdout
        events = [e for f in out.rglob("events.out.tfevents.*")
                  for e in EventFileLoader(str(f)).Load() if e.summary.value]
        run = rc.load(SAMPLES / "attn")
        expected = sorted({round(v * scale) for v in run.scalars[axis].drop_nulls()})
        assert sorted({e.step for e in events}) == expected


def test_points_are_ordered_as_lexsort_orders_them():
    """The order by metric and then step (a radix sort of the metric codes, then a sort by
    step only of metrics whose steps go back) is ``np.lexsort``'s, ties kept in source order;
    and the table look-up of chosen codes is ``np.isin``'s answer."""
    import importlib

    import numpy as np

    axes = importlib.import_module("runcompare.axes")
    rng = np.random.default_rng(18)
    for trial in range(300):
        size, metrics = int(rng.integers(0, 300)), int(rng.integers(1, 7))
        codes = rng.integers(0, metrics, size)
        steps = (rng.integers(0, 20, size) if trial % 2 else  # steps that go back
                 np.sort(rng.integers(0, 50, size)))           # each metric's in order
        assert np.array_equal(axes._by_metric_then_step(codes, steps, metrics),
                              np.lexsort((steps, codes)))
        chosen = rng.choice(metrics, int(rng.integers(0, metrics + 1)), replace=False).tolist()
        assert np.array_equal(axes._among(codes, chosen, metrics), np.isin(codes, chosen))
