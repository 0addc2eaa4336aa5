"""Batch science: critical batch on a real sweep and on runs made from the model's equation,
the gradient noise scale, goodput of a resumed run, and the layouts of ``runcompare plan``."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import polars as pl
import pytest
from typer.testing import CliRunner

import runcompare as rc
from runcompare.cli import app
from runcompare.errors import InputError, MissingInfoError

from .conftest import DATA

SWEEP = DATA / "batch_sweep"
BATCHES = (4, 8, 16, 32, 64)
RESUMED = DATA / "hf_resumed"


@pytest.fixture(scope="module")
def sweep():
    return rc.load_many([SWEEP / f"b{b}" for b in BATCHES], settings=["seq_len=64"])


@pytest.fixture(scope="module")
def fit(sweep):
    return rc.critical_batch(sweep)


def _cli(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


# -- critical batch on the real sweep ------------------------------------------------------

def test_sweep_steps_fall_and_samples_rise_with_the_batch(fit):
    assert fit.metric == "eval/loss"
    assert [r.global_batch for r in fit.runs] == list(BATCHES)
    steps = [r.steps_to_target for r in fit.runs]
    samples = [r.samples_to_target for r in fit.runs]
    assert all(a > b for a, b in itertools.pairwise(steps))
    assert all(a < b for a, b in itertools.pairwise(samples))
    for r in fit.runs:  # constant batch: samples = steps × batch
        assert r.samples_to_target == pytest.approx(r.steps_to_target * r.global_batch)


def test_sweep_fit_reproduces_every_crossing_within_five_percent(fit):
    assert not fit.exact
    for r in fit.runs:
        steps = fit.s_min + fit.e_min / r.global_batch  # S = S_min (1 + B_crit / B)
        samples = fit.e_min + fit.s_min * r.global_batch  # E = E_min (1 + B / B_crit)
        assert steps == pytest.approx(r.steps_to_target, rel=0.05)
        assert samples == pytest.approx(r.samples_to_target, rel=0.05)
        assert fit.residuals[r.run] == pytest.approx(steps / r.steps_to_target - 1)
        # the model's equation holds at the fitted curve
        assert (steps / fit.s_min - 1) * (samples / fit.e_min - 1) == pytest.approx(1)


def test_sweep_b_crit_is_reported_with_its_fitted_range(fit):
    assert fit.b_crit == pytest.approx(fit.e_min / fit.s_min)
    assert fit.batch_range == (4, 64)
    assert 4 <= fit.b_crit <= 64
    found = [f for f in fit.findings if f.code == "b-crit-in-range"]
    assert found and "global batches 4–64" in found[0].message


def test_b_crit_outside_the_fitted_batches_says_so(sweep):
    two = rc.critical_batch(sweep[:2], target=1.6)  # batches 4 and 8
    assert two.exact and two.batch_range == (4, 8)
    assert all(abs(v) < 1e-9 for v in two.residuals.values())
    codes = {f.code: f for f in two.findings}
    assert "two-batches-exact" in codes and "cannot check" in codes["two-batches-exact"].message
    assert two.b_crit > 8
    assert codes["b-crit-outside-range"].level == "warning"
    assert "outside that range" in codes["b-crit-outside-range"].message


def test_b_crit_grows_as_the_loss_falls(fit):
    targets = [f.target for f in fit.curve]
    assert targets == sorted(targets) and targets[0] == fit.target
    b_crits = [f.b_crit for f in fit.curve]
    assert all(a > b for a, b in itertools.pairwise(b_crits))  # lower loss, larger B_crit


def test_runs_that_differ_in_more_than_the_batch_raise_a_finding():
    runs = rc.load_many([DATA / "hf_global32", DATA / "hf_seeds" / "lr1e-3_seed1"])
    result = rc.critical_batch(runs)
    differ = [f for f in result.findings if f.code == "not-batch-only"]
    assert any("learning rate" in f.message for f in differ)


# -- critical batch on runs made from the equation ----------------------------------------

def _equation_runs(tmp_path, s_min, e_min, batches):
    """One JSON-lines log per batch whose loss 2·exp(−step/τ) crosses 0.5 at the step count
    (S/S_min − 1)(E/E_min − 1) = 1 gives: S = S_min + E_min / B."""
    paths = []
    for batch in batches:
        steps_to = s_min + e_min / batch
        tau = steps_to / math.log(4)  # 2·exp(−S/τ) = 0.5
        folder = tmp_path / f"eq{batch}"
        folder.mkdir()
        lines = [json.dumps({"step": s, "loss": 2 * math.exp(-s / tau)})
                 for s in range(1, int(steps_to * 1.5) + 1)]
        (folder / "metrics.jsonl").write_text("\n".join(lines) + "\n")
        paths.append(folder)
    return [rc.load(p, global_batch=b) for p, b in zip(paths, batches)]


def test_runs_from_the_equation_recover_s_min_and_e_min(tmp_path):
    runs = _equation_runs(tmp_path, 300.0, 24_000.0, (16, 32, 128, 512))
    result = rc.critical_batch(runs, target=0.5)
    assert result.s_min == pytest.approx(300.0, rel=0.01)
    assert result.e_min == pytest.approx(24_000.0, rel=0.01)
    assert result.b_crit == pytest.approx(80.0, rel=0.01)
    assert result.metric == "train/loss"


def test_critical_batch_json_contract(fit):
    out = fit.to_json()
    for key in ("metric", "target", "runs", "s_min", "e_min", "b_crit", "batch_range",
                "residuals", "findings"):
        assert key in out
    assert set(out["runs"][0]) == {"run", "global_batch", "steps_to_target",
                                   "samples_to_target"}
    assert out["batch_range"] == [4, 64]


def test_critical_batch_cli(tmp_path):
    page = tmp_path / "cb.html"
    result = _cli("critical-batch", *(SWEEP / f"b{b}" for b in BATCHES), "--json",
                  "--html", page)
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert out["batch_range"] == [4, 64] and out["b_crit"] > 0
    text = page.read_text()
    assert '<meta name="generator" content="runcompare">' in text and "Critical batch" in text
    shown = _cli("critical-batch", SWEEP / "b4", SWEEP / "b64")
    assert shown.exit_code == 0 and "B_crit = E_min / S_min" in shown.output
    alone = _cli("critical-batch", SWEEP / "b4")
    assert alone.exit_code == 1 and "two or more global batches" in alone.output


# -- gradient noise scale ------------------------------------------------------------------

def test_noise_scale_on_a_pair_of_sweep_runs_is_positive_and_finite(sweep):
    result = rc.noise_scale(sweep[0], sweep[-1])
    assert result.batches == (4, 64) and result.x == "tokens"
    assert result.b_simple > 0 and math.isfinite(result.b_simple)
    assert result.b_simple_tokens == pytest.approx(result.b_simple * 64)
    assert result.b_simple == pytest.approx(result.trace / result.grad_sq)
    curve = result.curve.get_column("b_simple").drop_nulls().to_numpy()
    assert curve.size > 10 and (curve > 0).all() and np.isfinite(curve).all()
    out = result.to_json()
    assert any("before clipping" in a for a in out["assumptions"])
    assert any("Adam" in a for a in out["assumptions"])


def _norm_run(tmp_path, name, batch, norms, **facts):
    folder = tmp_path / name
    folder.mkdir()
    lines = [json.dumps({"step": s, "loss": 3.0 - 0.001 * s, "grad_norm": n})
             for s, n in enumerate(norms, start=1)]
    (folder / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    return rc.load(folder, global_batch=batch, **facts)


def test_noise_scale_is_exact_on_norms_made_from_its_equation(tmp_path):
    g2, trace = 0.5, 40.0  # E|G_B|² = |G|² + tr(Σ)/B
    small = _norm_run(tmp_path, "s", 8, [math.sqrt(g2 + trace / 8)] * 400)
    big = _norm_run(tmp_path, "b", 32, [math.sqrt(g2 + trace / 32)] * 100)
    result = rc.noise_scale(small, big)
    assert result.x == "samples"
    assert result.b_simple == pytest.approx(trace / g2)
    assert result.grad_sq == pytest.approx(g2) and result.trace == pytest.approx(trace)


def test_noise_scale_refuses_clipped_or_missing_norms_and_one_batch(tmp_path, sweep):
    clipped = _norm_run(tmp_path, "c", 8, [1.0] * 50, max_grad_norm=1.0)
    with pytest.raises(InputError, match="clipped values"):
        rc.noise_scale(clipped, sweep[-1])
    bare = rc.load(DATA / "tensorboard" / "torch_simple", global_batch=8)
    with pytest.raises(MissingInfoError, match="logged no train/grad_norm"):
        rc.noise_scale(bare, sweep[-1])
    with pytest.raises(InputError, match="two different batches"):
        rc.noise_scale(sweep[0], sweep[0])
    result = _cli("noise-scale", SWEEP / "b4", SWEEP / "b4")
    assert result.exit_code == 1 and result.output.startswith("error: ")


# -- goodput --------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def resumed():
    return rc.load(RESUMED, seq_len=64)


def test_goodput_attributes_the_gap_between_legs_to_the_restart(resumed):
    g = rc.goodput(resumed)
    first, second = resumed.legs
    gap = second.wall_start - first.wall_end  # no process was running
    assert gap > 5
    assert len(g.restarts) == 1
    restart = g.restarts[0]
    assert (restart["last_step_kept"], restart["resumed_at_step"]) == (20, 22)
    # leg 1 after its step-20 point (steps 21-30, thrown away), then the gap, less steps 21-22
    # that leg 2 trained before its first point (counted as training at the pace)
    loss = resumed.scalars.filter(pl.col("metric") == "train/loss")
    wall = dict(zip(loss.get_column("step"), loss.get_column("wall_time")))
    runtime = resumed.scalars.filter(pl.col("metric") == "eval/runtime", pl.col("step") == 20)
    evaluated = runtime.get_column("value").item()  # the eval at step 20 counts as evaluation
    # step 20 is a save step (save_steps 20): checkpoint-20, which leg 2 resumed from, was
    # written after the point, so only steps 21-30 are lost work (at the training pace) and
    # the rest of leg 1's time after step 20 is checkpointing
    after = first.wall_end - wall[20] - evaluated
    assert first.last_step == 30 and resumed.facts["save_steps"].value == 20
    assert restart["lost_work_seconds"] == pytest.approx(min(after, 10 * g.pace))
    assert restart["lost_work_seconds"] < after
    assert restart["downtime_seconds"] == pytest.approx(wall[22] - first.wall_end - 2 * g.pace)
    assert restart["downtime_seconds"] > gap - 2 * g.pace
    assert restart["seconds"] == pytest.approx(g.seconds["restarts"])
    assert 0 < g.pace < 0.2 * gap
    assert g.seconds["restarts"] > 0.5 * g.wall_seconds
    assert sum(g.seconds.values()) == pytest.approx(g.wall_seconds)
    assert g.productive_fraction == pytest.approx(g.seconds["training"] / g.wall_seconds)


def test_goodput_counts_logged_eval_runtimes_and_the_rate(resumed):
    g = rc.goodput(resumed, budget="100M")
    runtimes = resumed.scalars.filter(pl.col("metric") == "eval/runtime").get_column("value")
    assert g.seconds["evaluation"] == pytest.approx(runtimes.sum())
    assert g.axis == "tokens" and g.world_size == 1
    assert g.rate_per_device == g.rate and g.done == 40 * 16 * 64
    eta = g.eta()
    assert eta["hours_ideal"] == pytest.approx(1e8 / g.rate / 3600)
    assert eta["hours_at_goodput"] == pytest.approx(eta["hours_ideal"] / g.productive_fraction)
    assert g.timeline.height == 19  # intervals between the 20 training points


def test_goodput_refuses_what_the_logs_cannot_give(sweep):
    with pytest.raises(MissingInfoError, match="no logged wall times"):
        rc.goodput(sweep[0])
    with pytest.raises(MissingInfoError, match="seq_len"):
        rc.goodput(rc.load(RESUMED), budget="1B")
    result = _cli("goodput", RESUMED, "--budget", "lots")
    assert result.exit_code == 1 and "--budget 'lots'" in result.output


def test_goodput_cli(tmp_path):
    page = tmp_path / "g.html"
    result = _cli("goodput", RESUMED, "--set", "seq_len=64", "--budget", "100M", "--json",
                  "--html", page)
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert set(out["seconds"]) == {"training", "evaluation", "checkpointing", "restarts",
                                   "unexplained"}
    assert out["eta"]["hours_ideal"] > 0 and out["restarts"][0]["resumed_at_step"] == 22
    assert "tokens/s per device" in page.read_text()


# -- plan ------------------------------------------------------------------------------------

def test_plan_reproduces_the_seed_arithmetic():
    p = rc.plan(global_batch=4096, devices=256, micro_batch=8, seq_len=1024, budget="100B",
                tokens_per_second="1.2M")
    accum = p.options[0]
    assert (accum.name, accum.devices, accum.micro_batch, accum.grad_accum) == (
        "accumulation", 256, 8, 2)
    assert (accum.max_steps, accum.micro_steps, accum.tokens_per_step) == (23_842, 47_684,
                                                                          4_194_304)
    assert accum.total_tokens == 100_000_595_968
    assert accum.hours_ideal == pytest.approx(100_000_595_968 / 1.2e6 / 3600)
    assert round(accum.hours_ideal, 1) == 23.1
    ways = {o.name: (o.devices, o.micro_batch, o.grad_accum) for o in p.options}
    assert ways == {"accumulation": (256, 8, 2), "more devices": (512, 8, 1),
                    "bigger micro-batch": (256, 16, 1)}


def test_plan_with_a_run_uses_its_measured_rate_and_goodput(resumed):
    measured = rc.goodput(resumed)
    p = rc.plan(global_batch=64, devices=2, seq_len=64, max_steps=1000, run=resumed)
    assert p.tokens_per_second_per_device == pytest.approx(measured.rate_per_device)
    o = p.options[0]
    assert (o.micro_batch, o.grad_accum) == (2, 16)  # the run's micro-batch 2
    assert o.hours_at_goodput == pytest.approx(o.hours_ideal / measured.productive_fraction)


def test_plan_cli():
    result = _cli("plan", "--global-batch", 4096, "--devices", 256, "--micro-batch", 8,
                  "--seq-len", 1024, "--budget", "100B", "--tokens-per-second", "1.2M",
                  "--json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert out["options"][0]["grad_accum"] == 2
    assert out["options"][0]["total_tokens"] == 100_000_595_968
    assert any("all-reduce" in a for a in out["assumptions"])
    shown = _cli("plan", "--global-batch", 4096, "--devices", 256, "--micro-batch", 8,
                 "--seq-len", 1024, "--max-steps", 23842, "--tokens-per-second", "1.2M")
    assert shown.exit_code == 0 and "23.1" in shown.output and "47,684" in shown.output
    missing = _cli("plan", "--global-batch", 4096, "--devices", 256, "--micro-batch", 8,
                   "--seq-len", 1024)
    assert missing.exit_code == 1 and "--budget" in missing.output


def test_the_compare_report_has_a_critical_batch_section_for_batch_only_runs(tmp_path):
    sweep_page, other_page = tmp_path / "sweep.html", tmp_path / "other.html"
    result = _cli(*(SWEEP / f"b{b}" for b in (4, 16, 64)), "-o", sweep_page)
    assert result.exit_code == 0, result.output
    text = sweep_page.read_text()
    assert 'id="rc-critical-batch"' in text and "Critical batch (eval/loss" in text
    assert "fitted on global batches 4–64" in text
    # two runs at one global batch: no section
    result = _cli(DATA / "hf_seeds" / "lr3e-3_seed1", DATA / "hf_seeds" / "lr3e-3_seed2",
                  "-o", other_page)
    assert result.exit_code == 0, result.output
    assert 'id="rc-critical-batch"' not in other_page.read_text()


def test_critical_batch_smooth_sets_the_fit_window_and_tb0_reads_the_raw_points(cli):
    sweep = rc.load_many([SWEEP])
    raw = rc.critical_batch(sweep, metric="train/loss", smooth="tb:0")
    out = cli.json("critical-batch", SWEEP, "--metric", "train/loss", "--smooth", "tb:0")
    assert out["target"] == pytest.approx(raw.target)
    smallest = min(sweep, key=lambda run: run.batch.global_batch.value)
    loss = smallest.points_of("train/loss").sort("step")
    steps, values = loss["step"].to_numpy(), loss["value"].to_numpy()
    i = int(np.flatnonzero(values <= raw.target)[0])
    share = (raw.target - values[i - 1]) / (values[i] - values[i - 1])
    crossed = steps[i - 1] + share * (steps[i] - steps[i - 1])
    row = next(r for r in out["runs"] if r["run"] == smallest.name)
    assert row["steps_to_target"] == pytest.approx(crossed)
    wide = rc.critical_batch(sweep, metric="train/loss", smooth="10%")
    assert wide.runs[0].steps_to_target != raw.runs[0].steps_to_target
