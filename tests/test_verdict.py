"""The verdict on real runs: who is ahead at the budget, by how much, is it real, what it cost."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

import runcompare as rc
from runcompare.analysis.noise import t_quantile
from runcompare.analysis.smooth import Smoothing

from .conftest import DATA, SAMPLES

SEEDS = sorted(p for p in (DATA / "hf_seeds").iterdir() if p.is_dir())


@pytest.fixture(scope="module")
def sample():
    return rc.compare(rc.load_many([SAMPLES / "mamba", SAMPLES / "attn"]))


def _evals(run, x="tokens"):
    frame = run.frame(x).filter(metric="eval/loss").sort("x")
    return frame["x"].to_numpy(), frame["value"].to_numpy(), frame["elapsed"].to_numpy()


def test_sample_verdict_numbers_come_from_the_logs(sample):
    verdict = sample.verdict
    mamba, attn = sample.runs
    (_, m_values, m_elapsed), (_, a_values, a_elapsed) = _evals(mamba), _evals(attn)
    assert (verdict.metric, verdict.axis, verdict.budget) == ("eval/loss", "tokens", 102_400)
    assert verdict.values == {"mamba": m_values[-1], "attn": a_values[-1]}
    assert verdict.leader == "mamba"
    assert verdict.difference == pytest.approx(a_values[-1] - m_values[-1])
    assert round(verdict.difference, 3) == 0.017
    assert verdict.relative == pytest.approx(verdict.difference / a_values[-1])
    assert round(verdict.relative * 100, 1) == 0.8
    # both at the budget in wall-clock and device-time (world size 1 each)
    assert verdict.cost["mamba"]["elapsed"] == pytest.approx(m_elapsed[-1])
    assert verdict.cost["attn"]["elapsed"] == pytest.approx(a_elapsed[-1])
    assert verdict.cost["attn"]["device_hours"] == pytest.approx(a_elapsed[-1] / 3600)
    assert round(m_elapsed[-1], 1) == 66.9 and round(a_elapsed[-1], 1) == 8.5
    assert round(m_elapsed[-1] / a_elapsed[-1], 1) == 7.9


def test_sample_crossings_are_interpolated_between_the_evals_around_the_target(sample):
    mamba, attn = sample.runs
    xs, values, elapsed = _evals(mamba)
    target = _evals(attn)[1][-1]  # the worst final value
    share = (values[-2] - target) / (values[-2] - values[-1])
    race = sample.verdict.race
    assert race["target"] == target and race["curve"] == "raw"
    assert race["crossings"]["mamba"] == pytest.approx(xs[-2] + share * (xs[-1] - xs[-2]))
    assert 99_850 < race["crossings"]["mamba"] < 99_950  # not the logged 102,400
    assert race["crossings"]["attn"] == 102_400
    assert race["elapsed"]["mamba"] == pytest.approx(
        elapsed[-2] + share * (elapsed[-1] - elapsed[-2]))


def test_sample_noise_is_the_scatter_of_the_last_evals_and_the_call_a_tie(sample):
    noise = sample.verdict.noise
    sigmas = {}
    for run in sample.runs:
        _, v, _ = _evals(run)
        # the last three evals (the last half of the budget): the middle one against the
        # line through its neighbours, evenly spaced (w = 1/2, variance factor 1.5)
        sigmas[run.name] = abs(v[-2] - (v[-3] + v[-1]) / 2) / math.sqrt(1.5)
    assert noise["kind"] == "eval-scatter" and noise["bend"] is True
    assert noise["sigma"] == pytest.approx(sigmas)
    band = 1.959964 * math.hypot(*sigmas.values())
    assert noise["half_width"] == pytest.approx(band, rel=1e-6)
    assert sample.verdict.difference < band and sample.verdict.call == "within-noise"


def test_sample_terminal_starts_with_the_headline_and_says_it_all(cli, tmp_path, sample):
    result = cli(SAMPLES / "mamba", SAMPLES / "attn", "--no-report")
    assert result.exit_code == 0
    lines = [line.rstrip() for line in result.stdout.splitlines()]
    assert lines[0] == ("mamba leads attn on eval/loss by 0.8% at 102,400 tokens: within the "
                        "noise, a tie.") == sample.verdict.headline
    assert len(lines[0].split()) <= 25
    cards = [f"{c['label']}: {c['value']}" for c in sample.verdict.key_numbers]
    assert [line.split("  (")[0] for line in lines[1:1 + len(cards)]] == cards
    assert cards[2:] == ["wall-clock: 7.9× less for attn", "training FLOPs: 1.52× fewer for mamba"]
    assert lines.index("Batch hierarchy") < lines.index("The verdict in full")  # prose after
    full = " ".join(result.stdout.split("The verdict in full")[1].split())
    assert full.startswith(" ".join(str(sample).split()))
    first = " ".join(str(sample).split())
    assert first.startswith("At 102,400 tokens mamba is ahead on eval/loss by 0.017 (0.8%): "
                            "2.187 against attn's 2.204 (lower is better).")
    band = sample.verdict.noise["half_width"]
    assert (f"within the noise (±{band:.2g} at 95%, the step-to-step scatter of each run's "
            "last 3 evals") in first and "so it is no real lead: call it a tie" in first
    # what would settle a tie of single runs: how many seeds, at what seed spread
    assert "3 seeds of each would settle it if their spread (sd) is below 0.0074" in first
    assert "mamba at 99,876 tokens, attn at 102,400 tokens" in first
    assert "wall-clock 66.9 s for mamba against 8.5 s for attn, 7.9× less for attn" in first
    assert "the same ratio in device-time (elapsed × world size, 1 device each)" in first
    assert "training FLOPs 3.65e10 for mamba against 5.56e10 for attn" in first
    assert "Decided on tokens (data efficiency" in first
    assert " tied" not in first and " first" not in first  # no "first, tied with"


def test_sample_json_verdict_is_the_same_object(cli, tmp_path, sample):
    out = cli.json(SAMPLES / "mamba", SAMPLES / "attn", "-o", tmp_path / "r.html")
    verdict = out["verdict"]
    assert {"text", "metric", "axis", "budget", "values", "leader", "difference", "relative",
            "noise", "call", "cost"} <= set(verdict)
    assert verdict["text"] == str(sample) and verdict["call"] == "within-noise"
    assert verdict["values"] == sample.verdict.values
    assert verdict["cost"]["attn"]["elapsed"] == pytest.approx(8.504, abs=1e-3)


def test_api_verdict_is_a_frozen_object_and_str_is_its_text(sample):
    assert str(sample) == sample.verdict.text == str(sample.verdict)
    with pytest.raises(dataclasses.FrozenInstanceError):
        sample.verdict.call = "clear"  # type: ignore[misc]
    assert sample.verdict.to_dict()["leader"] == "mamba"


def test_summary_races_quality_metrics_only(sample):
    races = sample.summary.filter(kind="quality")
    assert sorted(set(races["metric"])) == ["eval/loss", "train/loss"] and races.height == 4
    assert races["target"].null_count() == 0
    others = sample.summary.filter(kind="diagnostic")
    assert {"train/learning_rate", "train/grad_norm"} <= set(others["metric"])
    assert others["target"].null_count() == others["x_to_target"].null_count() == others.height
    assert others["speedup"].null_count() == others.height
    assert not set(sample.summary["metric"]) & set(sample.totals["metric"])


def test_different_global_batches_are_decided_on_tokens_and_say_why():
    runs = rc.load_many([SAMPLES / "attn", DATA / "hf_global32"],
                        settings=["hf_global32:seq_len=64"])
    verdict = rc.compare(runs, x="step").verdict
    assert verdict.axis == "tokens" and verdict.budget == 61_440  # 30 steps × 2,048
    xs, values, _ = _evals(runs[0])
    attn = float(np.interp(61_440, xs, values))
    assert verdict.values["attn"] == pytest.approx(attn)
    assert verdict.values["hf_global32"] == _evals(runs[1])[1][-1]
    assert verdict.leader == "attn"
    text = verdict.text
    assert text.startswith("At 61,440 tokens")
    assert ("Decided on tokens (data efficiency: quality per token trained on): the global "
            "batches differ (attn 16, hf_global32 32 sequences per step), so a step of "
            "hf_global32 holds 2× the data of a step of attn and a comparison on steps would "
            "mislead.") in text
    assert "the same peak learning rate" in text  # lr-not-rescaled, in words


def test_a_warning_many_runs_share_is_one_caveat_naming_them_all():
    # the batch sweep's Trainer stdout was block-buffered in every run: one warning each,
    # each naming its own train.log
    runs = rc.load_many([DATA / "batch_sweep"])
    buffered = [f for run in runs for f in run.findings if f.code == "stdout-buffered"]
    assert len(buffered) == 5 and len({f.message for f in buffered}) == 5
    verdict = rc.compare(runs).verdict
    names = [run.name for run in runs]
    phrase = ("stdout was block-buffered, so the steps of the Trainer's logged dicts were "
              "counted with logging_steps")
    assert verdict.fairness == [f"{', '.join(names)}: {phrase}"]
    assert "train.log" not in verdict.text


def test_seed_groups_give_welch_interval_and_n():
    runs = rc.load_many(SEEDS)
    comparison = rc.compare(runs)
    assert comparison.groups == {"lr3e-3": [f"lr3e-3_seed{s}" for s in (1, 2, 3)],
                                 "lr1e-3": [f"lr1e-3_seed{s}" for s in (1, 2, 3)]}
    verdict = comparison.verdict
    at_budget = {run.name: float(np.interp(verdict.budget, *_evals(run)[:2])) for run in runs}
    fast = np.array([at_budget[f"lr3e-3_seed{s}"] for s in (1, 2, 3)])
    slow = np.array([at_budget[f"lr1e-3_seed{s}"] for s in (1, 2, 3)])
    va, vb = fast.var(ddof=1) / 3, slow.var(ddof=1) / 3
    df = (va + vb) ** 2 / (va ** 2 / 2 + vb ** 2 / 2)
    half = t_quantile(0.975, df) * math.sqrt(va + vb)
    gain = slow.mean() - fast.mean()
    assert verdict.leader == "lr3e-3" and verdict.values["lr3e-3"] == pytest.approx(fast.mean())
    assert verdict.noise["kind"] == "seeds" and verdict.noise["n"] == {"lr3e-3": 3, "lr1e-3": 3}
    assert verdict.noise["interval"] == pytest.approx([gain - half, gain + half])
    assert verdict.call == "clear" and gain - half > 0
    assert (f"95% interval of lr3e-3's advantage is {gain - half:.3g} to {gain + half:.3g} "
            "(Welch, n = 3 and 3 runs), which excludes zero: a clear difference.") in verdict.text


def test_t_quantiles_match_the_table():
    # Student's t, two-sided 95% (any statistics table)
    for df, t in ((1, 12.7062), (3, 3.1824), (5, 2.5706), (30, 2.0423)):
        assert t_quantile(0.975, df) == pytest.approx(t, abs=1e-4)


def _seed_runs(*names):
    return [run for run in rc.load_many(SEEDS) if not names or run.name in names]


def test_single_runs_beyond_their_own_scatter_are_unreplicated_never_clear():
    # two real runs, one seed each, 23% apart: beyond each run's own eval scatter, but one
    # run per arm cannot show the seed-to-seed variation
    verdict = rc.compare(_seed_runs("lr3e-3_seed1", "lr1e-3_seed1")).verdict
    assert verdict.call == "unreplicated" and verdict.leader == "lr3e-3_seed1"
    assert verdict.noise["kind"] == "eval-scatter"
    assert verdict.difference > verdict.noise["half_width"]
    # what would settle it: Welch's half-width with n seeds, t(0.975, 2(n-1))·sd·√(2/n)
    for n, t in ((3, 2.7764), (5, 2.3060)):
        sd = verdict.noise["settle"][str(n)]
        assert t * sd * math.sqrt(2 / n) == pytest.approx(verdict.difference, rel=1e-3)
    assert "but unreplicated: one run per arm cannot show the seed-to-seed variation" \
        in verdict.text
    assert f"3 seeds of each would settle it if their spread (sd) is below " \
           f"{verdict.noise['settle']['3']:.2g}" in verdict.text
    speedup = verdict.race["speedup"]
    assert speedup["call"] == "unreplicated" and speedup["faster"] == "lr3e-3_seed1"
    low, high = speedup["interval"]
    assert low < speedup["value"] < high


def test_seed_groups_are_said_in_one_line_and_can_be_switched_off(cli):
    grouped = rc.compare(_seed_runs()).verdict
    assert ("Each arm is the mean of a seed group: lr3e-3 (3 runs), lr1e-3 (3 runs) (found "
            "automatically, runs whose facts agree but for the seed; --no-groups compares "
            "every run on its own).") in grouped.text
    speedup = grouped.race["speedup"]
    assert speedup["call"] == "clear" and speedup["interval"][0] > 1
    alone = rc.compare(_seed_runs(), groups=False)
    assert alone.groups == {} and "seed group" not in alone.verdict.text
    assert alone.verdict.call != "clear" and alone.verdict.noise["kind"] != "seeds"
    out = cli.json(*SEEDS, "--no-groups", "--no-report")
    assert out["verdict"]["call"] == alone.verdict.call
    assert len(out["verdict"]["values"]) == 6


def test_a_target_met_at_the_first_log_is_said_so_and_gives_no_speedup(sample):
    runs = sample.runs
    verdict = rc.compare(runs, metrics=["train/loss"], target=10.0).verdict
    assert sorted(verdict.race["before_first"]) == ["attn", "mamba"]
    assert verdict.race["speedup"] is None
    assert "mamba at or before its first log (5,120 tokens)" in verdict.text
    assert "no speedup is measured, as" in verdict.text and "sooner on tokens" not in verdict.text


def test_a_training_metric_is_read_at_the_budget_on_a_local_line_not_a_lagging_ema(sample):
    comparison = rc.compare(sample.runs, metrics=["train/loss"], smooth="15%")
    verdict = comparison.verdict
    for run in sample.runs:
        loss = run.frame("tokens").filter(metric="train/loss").sort("x")
        xs, values = loss["x"].to_numpy(), loss["value"].to_numpy()
        half = 0.15 * (xs.max() - xs.min())  # the window: 15% of the range each side
        near = np.abs(xs - verdict.budget) <= half
        assert near.sum() == 3  # the last three points, 5,120 tokens apart
        _slope, at_budget = np.polyfit(xs[near] - verdict.budget, values[near], 1)
        assert verdict.values[run.name] == pytest.approx(at_budget)
        # the summary shows the number the verdict used
        row = comparison.summary.filter(run=run.name, metric="train/loss")
        assert row["at_common_budget"].item() == pytest.approx(verdict.values[run.name])
        assert row["curve"].item() == "local-fit"


EVAL_RISES = DATA / "eval_rises" / "whisper_ja"


def test_a_main_metric_that_gets_worse_in_every_run_is_said_and_not_decided_on(cli):
    # a real Whisper fine-tune: eval loss 0.321 -> 0.420 over 5,000 steps, training loss falls
    runs = [rc.load(EVAL_RISES, name=name) for name in ("whisper_a", "whisper_b")]
    comparison = rc.compare(runs)
    assert comparison.main == "train/loss" and comparison.verdict.metric == "train/loss"
    assert ("Decided on train/loss: eval/loss got worse over training in every run (whisper_a "
            "0.321 → 0.42, whisper_b 0.321 → 0.42), so it does not measure what the training "
            "improved.") in comparison.verdict.text
    assert "are level on train/loss (local fit)" in comparison.verdict.text  # one log twice
    named = rc.compare(runs, metrics=["eval/loss"]).verdict  # named: kept, and said
    assert named.metric == "eval/loss"
    assert "got worse over training in every run" in named.text
    assert "the verdict rests on it all the same" in named.text


def test_runs_that_share_no_stretch_of_the_axis_get_no_lead_and_say_why(cli):
    # the sample attn run (steps 25-100) against a real Lightning run (steps 8-24)
    lightning = DATA / "lightning" / "lightning_logs" / "version_0"
    runs = rc.load_many([SAMPLES / "attn", lightning])
    verdict = rc.compare(runs).verdict
    assert verdict.call == "not-comparable" and verdict.leader is None and not verdict.values
    assert verdict.text.startswith("The runs share no stretch of step (attn 25 to 100, "
                                   "version_0 8 to 24)")
    assert "is ahead" not in verdict.text
    out = cli.json(SAMPLES / "attn", lightning, "--no-report")
    assert out["verdict"]["call"] == "not-comparable" and out["verdict"]["text"] == verdict.text


def test_a_bare_smoothing_weight_is_tensorboards_and_a_useless_half_life_is_warned(cli):
    runs = rc.load_many([SAMPLES / "mamba", SAMPLES / "attn"])
    assert rc.compare(runs, smooth="0.6").smoothing == Smoothing("tb", 0.6)
    tiny = rc.compare(runs, x="tokens", smooth="100")  # points are 5,120 tokens apart
    (warning,) = [f for f in tiny.findings if f.code == "smoothing-scale"]
    assert warning.level == "warning"
    assert "a half-life of 100 tokens is below the spacing of the logged points (5,120 " \
           "tokens)" in warning.message
    huge = rc.compare(runs, x="tokens", smooth="1M")
    assert any("longer than the x range" in f.message for f in huge.findings
               if f.code == "smoothing-scale")
    assert not [f for f in rc.compare(runs, x="tokens", smooth="5%").findings
                if f.code == "smoothing-scale"]


def test_tokens_from_a_counter_against_tokens_from_the_schedule_are_said():
    # hf_tokens logs num_input_tokens_seen; attn's tokens are steps × 16 × 64
    runs = rc.load_many([SAMPLES / "attn", DATA / "hf_tokens"])
    comparison = rc.compare(runs, x="tokens")
    (finding,) = [f for f in comparison.findings if f.code == "token-sources-differ"]
    assert "the tokens of hf_tokens are a logged counter and those of attn are steps × global " \
           "batch × sequence length" in finding.message
    assert "with padding or packing" in comparison.verdict.text


def test_aligned_smoothed_is_the_drawn_curve_under_the_default_smoothing(sample):
    aligned = sample.aligned.filter(metric="train/loss", run="attn").drop_nulls()
    assert (aligned["smoothed"] != aligned["value"]).sum() > aligned.height // 2
